"""tg.function figures: W1 (per-op overhead) and W2 (training step) traced vs eager, as ratios
to hand-written numpy floors timed in the same run.

    python -m benchmarks.function      (one thread, pinned; prints ratios; --json FILE)

W1: 100 x (sin, *, +) on a (16,) vector, forward + gradient, the body of workloads.w1_overhead
under @tg.function (the tape and its gradient are traced into the graph). W2: the gradient step
of core.training_cases under @tg.function, against the 8-matmul floor. Each case also reports
its process CPU time over wall time (1.0 = one busy core).
"""
from benchmarks.timing import pin_one_thread

pin_one_thread()

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import tapegpu as tg  # noqa: E402
from benchmarks.core import training_cases  # noqa: E402
from benchmarks.timing import compare, table  # noqa: E402
from benchmarks.workloads import FLOOR, TAPEGPU, w1_overhead  # noqa: E402


def w1_cases():
    w = w1_overhead({})
    cases = {("numpy by hand" if fw == FLOOR else "tapegpu eager"): fn
             for (_, fw), fn in w.cases.items() if fw in (FLOOR, TAPEGPU)}
    traced = tg.function(cases["tapegpu eager"])
    traced()
    np.testing.assert_array_equal(traced().numpy(), cases["tapegpu eager"]().numpy())
    cases["tapegpu @tg.function"] = traced
    return cases


def w2_cases():
    cases = training_cases()
    cases = {k: v for k, v in cases.items() if k != "pytorch step"}
    traced = tg.function(cases["tapegpu step"])
    traced()
    for a, b in zip(traced(), cases["tapegpu step"]()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    cases["tapegpu step @tg.function"] = traced
    return cases


def cpu_over_wall(fn, seconds=0.3):
    n = 0
    w0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - w0 < seconds:
        fn()
        n += 1
    return (time.process_time() - c0) / (time.perf_counter() - w0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--repeats", type=int, default=9)
    args = p.parse_args(argv)
    results = {}
    print(f"tapegpu {tg.__version__}, numpy {np.__version__}; one thread")
    for name, cases, base, title in (
            ("w1", w1_cases(), "numpy by hand",
             "W1 100 x (sin, *, +) on (16,), forward + gradient"),
            ("w2", w2_cases(), "numpy 8 matmuls (floor)",
             "W2 training step 784-1024-1024-10 ReLU, batch 256 (gradients)")):
        r = compare(cases, base, repeats=args.repeats)
        for n, fn in cases.items():
            r[n]["cpu_over_wall"] = cpu_over_wall(fn)
        print(table(title, r, base))
        print("  cpu/wall: " + ", ".join(f"{n} {r[n]['cpu_over_wall']:.2f}" for n in r))
        results[name] = r
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
