"""`python -m tapegpu.distribute.run -n N script.py [args...]`: runs `script.py` on N ranks.

A thin wrapper of `mpiexec -n N python script.py args...`: it finds mpiexec next to this Python
first (the mpich wheel of the distributed extra installs it there), then on PATH, and gives each
rank `cpu_count // N` BLAS/OpenMP threads (at least 1) unless OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS or MKL_NUM_THREADS are set already. Exits with mpiexec's status.
"""
import argparse
import os
import shutil
import subprocess
import sys

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def find_mpiexec():
    """The path of mpiexec: beside sys.executable, else on PATH; None when there is none."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    return shutil.which("mpiexec")


def command(n, script, args, mpiexec=None):
    """The command line that runs `script` on `n` ranks."""
    mpiexec = mpiexec or find_mpiexec()
    if mpiexec is None:
        raise FileNotFoundError(
            "tapegpu.distribute.run: mpiexec not found (beside this Python or on PATH); "
            "install an MPI with `pip install -e \".[distributed]\"` (mpi4py and the mpich "
            "wheel) or your system's MPI")
    return [mpiexec, "-n", str(n), sys.executable, script, *args]


def environment(n, base=None):
    """The ranks' environment: `base` (os.environ) with per-rank thread counts filled in."""
    env = dict(os.environ if base is None else base)
    if not any(v in env for v in THREAD_VARS):
        threads = str(max(1, (os.cpu_count() or 1) // n))
        for v in THREAD_VARS:
            env[v] = threads
    return env


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m tapegpu.distribute.run",
        description="Run a tapegpu script on N MPI ranks (wraps mpiexec).")
    parser.add_argument("-n", "--np", dest="n", type=int, required=True,
                        help="number of ranks")
    parser.add_argument("script", help="the Python script every rank runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    ns = parser.parse_args(argv)
    if ns.n < 1:
        parser.error(f"-n must be at least 1, got {ns.n}")
    try:
        cmd = command(ns.n, ns.script, ns.args)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 127
    return subprocess.call(cmd, env=environment(ns.n))


if __name__ == "__main__":
    sys.exit(main())
