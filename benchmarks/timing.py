"""Timing that survives machines whose speed changes by up to 1.8x within seconds.

Call `pin_one_thread()` before numpy is imported. `compare(cases, baseline)` times every case
in rounds, rotating their order within each round, and reports for each case the median over
rounds of (case time / baseline time in the same round): a ratio measured under the same
machine state, which is what these benchmarks claim.
"""
import os
import statistics
import time

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def pin_one_thread():
    """One BLAS/OpenMP thread and one CPU (call before importing numpy)."""
    for k in _THREAD_VARS:
        os.environ[k] = "1"
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    except (AttributeError, OSError):
        pass


def _time_once(fn, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def _inner_for(fn, target=0.05):
    t = _time_once(fn, 1)
    return max(1, int(target / max(t, 1e-7)))


def time_rounds(cases, repeats=9, warmup=2, target=0.05):
    """({name: [seconds per call, one per round]}, {name: calls per timing}): every case timed
    once per round, the order of the cases rotating from round to round."""
    names = list(cases)
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    inner = {n: _inner_for(cases[n], target) for n in names}
    times = {n: [] for n in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            times[n].append(_time_once(cases[n], inner[n]))
    return times, inner


def compare(cases, baseline, repeats=9, warmup=2, target=0.05):
    """{name: {"median_s", "ratio"}}: per-round ratios to `baseline`, median over rounds."""
    times, inner = time_rounds(cases, repeats, warmup, target)
    out = {}
    for n in cases:
        ratios = [a / b for a, b in zip(times[n], times[baseline])]
        out[n] = {"median_s": statistics.median(times[n]), "ratio": statistics.median(ratios),
                  "repeats": repeats, "inner": inner[n]}
    return out


def table(title, results, baseline, unit=1e3, unit_name="ms"):
    lines = [f"\n{title}", f"  {'case':<34} {'median ' + unit_name:>12} {'ratio to ' + baseline:>18}"]
    for n, r in results.items():
        lines.append(f"  {n:<34} {r['median_s'] * unit:>12.4f} {r['ratio']:>18.3f}")
    return "\n".join(lines)


def cpu_over_wall(fn, seconds=0.3):
    """The process's CPU time over wall time while `fn` runs repeatedly for `seconds` (1.0: one
    busy core; less: the process waited for the CPU)."""
    w0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - w0 < seconds:
        fn()
    return (time.process_time() - c0) / (time.perf_counter() - w0)
