"""How long `import tapegpu` takes, against a baseline commit timed in the same run.

    python benchmarks/import_time.py --baseline <commit> [--rounds 9]

The baseline's files are written to a temporary folder (`git archive`, with this checkout's
compiled extension modules copied in); each round runs `python -X importtime -c "import
tapegpu"` once for the baseline and once for this checkout, interleaved, pinned to one CPU
(`taskset -c 1` where available). Reported: the medians of the `tapegpu` line's cumulative
time and of the process's CPU time (less sensitive to a loaded machine), per side, and their
ratios.
"""
import argparse
import glob
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _checkout(commit, into):
    archive = subprocess.run(["git", "-C", ROOT, "archive", commit], capture_output=True,
                             check=True).stdout
    with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as t:
        t.extractall(into, filter="data")
    for so in glob.glob(os.path.join(ROOT, "tapegpu", "**", "*.so"), recursive=True):
        dest = os.path.join(into, os.path.relpath(so, ROOT))
        if os.path.isdir(os.path.dirname(dest)):
            shutil.copy2(so, dest)


def _time(tree):
    """(wall microseconds of `import tapegpu` by -X importtime, CPU seconds of the process)."""
    cmd = [sys.executable, "-X", "importtime", "-c", "import tapegpu"]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "1"] + cmd
    env = dict(os.environ, PYTHONPATH=tree)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    err = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                         check=True).stderr
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    for line in err.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == "tapegpu":
            return int(parts[1]), cpu
    raise RuntimeError(f"no 'tapegpu' line in -X importtime's output of {tree}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", required=True, help="the commit to compare against")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--candidate", default=ROOT, help="the source tree to time (default: "
                        "this checkout)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as base:
        _checkout(args.baseline, base)
        _time(base), _time(args.candidate)  # warm the bytecode caches of both
        a, b = [], []
        for _ in range(args.rounds):
            a.append(_time(base))
            b.append(_time(args.candidate))
    ma, mb = statistics.median(w for w, _ in a), statistics.median(w for w, _ in b)
    ca, cb = statistics.median(c for _, c in a), statistics.median(c for _, c in b)
    print(f"import tapegpu, median of {args.rounds}: wall (-X importtime, ms) baseline "
          f"{args.baseline[:10]} {ma / 1e3:.0f}, {args.candidate} {mb / 1e3:.0f}, ratio "
          f"{mb / ma:.3f}; process CPU time (s) {ca:.3f} vs {cb:.3f}, ratio {cb / ca:.3f}")


if __name__ == "__main__":
    main()
