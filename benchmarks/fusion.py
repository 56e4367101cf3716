"""Fusion figures: traced workloads with and without generated kernels, beside JAX's jit.

    python -m benchmarks.fusion [--json FILE] [--repeats 9] [--only W1,W2]

One thread pinned to one core (BLAS, XLA and PyTorch alike). For each workload of
workloads.py that has a tapegpu case (W1: 100 x (sin, *, +) on (16,), forward + gradient; W2:
the MLP training step; W4 batch Jacobian; W5 gradient and HVP; W6 per-example gradients), the
tapegpu case runs under `tg.function` fused (the default) and unfused (`jit_compile=False`),
interleaved in rounds with the numpy floor and JAX's jitted version where JAX is installed;
times are medians over rounds, ratios are to the fused case in the same round. Each tapegpu
case runs on an instance of the workload of its own, and their first results (from the same
initial values) are checked against each other first (float32 tolerances). Each case also
reports its process CPU time over wall time (1.0 = one busy core).
"""
from benchmarks.run import configure_threads

configure_threads("1")

import argparse  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402

import tapegpu as tg  # noqa: E402
from tapegpu.core import nest  # noqa: E402
from benchmarks import workloads  # noqa: E402
from benchmarks.run import import_peers  # noqa: E402
from benchmarks.timing import compare, cpu_over_wall  # noqa: E402

FUSED, UNFUSED = "tapegpu traced, fused", "tapegpu traced, unfused"


def _close(a, b):
    for x, y in zip(nest.flatten(a), nest.flatten(b)):
        x = x.numpy() if hasattr(x, "numpy") else np.asarray(x)
        y = y.numpy() if hasattr(y, "numpy") else np.asarray(y)
        np.testing.assert_allclose(x, y, rtol=2e-4, atol=1e-6)


def _tapegpu_cases(key, fw):
    """{row: fn}: the tapegpu cases of a fresh instance of the workload (its own variables)."""
    w = workloads.ALL[key](fw)
    return w, {row: fn for (row, framework), fn in w.cases.items()
               if framework == workloads.TAPEGPU}


def cases_of(key, fw):
    """{row: {case name: fn}} for one workload: traced fused/unfused, eager, floor, jax. Each
    tapegpu case runs on an instance of its own (a training step updates its variables), and
    their first results, from the same initial values, are cross-checked."""
    w, eager = _tapegpu_cases(key, fw)
    fused = {row: tg.function(fn) for row, fn in _tapegpu_cases(key, fw)[1].items()}
    plain = {row: tg.function(fn, jit_compile=False)
             for row, fn in _tapegpu_cases(key, fw)[1].items()}
    rows = {}
    for row, fn in eager.items():
        want = fn()
        _close(fused[row](), want)
        _close(plain[row](), want)
        rows[row] = {FUSED: fused[row], UNFUSED: plain[row], "tapegpu eager": fn}
    for (row, framework), fn in w.cases.items():
        if row in rows and framework in (workloads.FLOOR, "jax"):
            rows[row][framework if framework != workloads.FLOOR else "numpy (floor)"] = fn
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--only", default="W1,W2,W4,W5,W6")
    args = p.parse_args(argv)
    fw, versions, _ = import_peers("1", {"jax"})
    print(f"tapegpu {tg.__version__}, numpy {np.__version__}"
          + "".join(f", {k} {v}" for k, v in versions.items()) + "; one thread")
    results = {}
    for key in args.only.split(","):
        for row, cases in cases_of(key, fw).items():
            r = compare(cases, FUSED, repeats=args.repeats)
            for name, fn in cases.items():
                r[name]["cpu_over_wall"] = cpu_over_wall(fn)
            results[f"{key}: {row}"] = r
            print(f"\n{key}: {row}")
            for name, v in r.items():
                print(f"  {name:28s} {v['median_s'] * 1e6:10.1f} us   x{v['ratio']:.3f} of fused"
                      f"   cpu/wall {v['cpu_over_wall']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
