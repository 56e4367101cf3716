"""`python -m benchmarks`: tapegpu against PyTorch, JAX, TensorFlow and HIPS autograd (whichever
are installed: `pip install ".[bench]"`). See benchmarks/run.py."""
import argparse
import os
import sys


def parse(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--threads", choices=("1", "all"), default="1",
                   help="1: one thread pinned to one core (default); all: every core")
    p.add_argument("--only", help="comma-separated workloads, e.g. W1,W3,W7 (default: all)")
    p.add_argument("--frameworks", help="comma-separated peers to import: torch,jax,tf,autograd "
                   "(default: every one installed)")
    p.add_argument("--repeats", type=int, default=9, help="timed rounds (at least 7)")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls per case first")
    p.add_argument("--target", type=float, default=0.05,
                   help="seconds per timing (calls are repeated within a round up to this)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "results"))
    p.add_argument("--fresh", action="store_true",
                   help="drop the other thread mode's results from latest.json")
    p.add_argument("--report-only", action="store_true",
                   help="only rewrite latest.md and ratios.png from latest.json")
    args = p.parse_args(argv)
    if args.repeats < 7:
        p.error("--repeats must be at least 7 (medians of fewer rounds are noise here)")
    return args


if __name__ == "__main__":
    args = parse()
    from benchmarks.run import configure_threads
    configure_threads(args.threads)  # before numpy is imported
    from benchmarks.run import main
    main(args)
    sys.exit(0)
