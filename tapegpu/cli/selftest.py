"""`python -m tapegpu selftest`: the first thing to run on a machine with an NVIDIA GPU.

On the first GPU (or `--device gpu:N`) it runs, each as one step of a report:

1. tests: the test suite's `gpu`-marked tests on that device (from a source checkout);
2. kernels: every CUDA kernel of the table on fixed inputs, its result against the emulator's on
   the same inputs (bit-exact, or within rtol 1e-5 for float32 and 1e-12 for float64: nvcc
   contracts a * b + c into FMAs and CUDA's math functions differ from glibc's by an ulp or two);
3. training: a short MLP run (dense layers, dropout, sparse cross-entropy, clipping by global
   norm, Adam) whose loss must fall, timed per step;
4. benchmarks: `benchmarks/gpu.py` (from a source checkout), its output kept.

It writes one JSON file (`--json`, default tapegpu-selftest.json) and prints a table; the exit
status is 0 when every step passed or was skipped, 1 otherwise. On a machine without a usable
GPU it prints what it would do and why it cannot, and exits 0.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

import tapegpu as tg
from .. import backends as backend
from ..backends.kernels.launch import KERNELS, KernelSet, parity_cases
from .info import why_no_gpu

STEPS = {
    "tests": "the gpu-marked tests of the test suite on the device (pytest -m gpu)",
    "kernels": "every CUDA kernel against the emulator's result on the same inputs",
    "training": "a short MLP training run on the device (its loss must fall)",
    "benchmarks": "benchmarks/gpu.py: the workloads on the device",
}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RTOL = {"float32": 1e-5, "float64": 1e-12}


def plan(steps=STEPS):
    return "\n".join(f"  {i}. {name}: {STEPS[name]}" for i, name in enumerate(steps, 1))


def run_tests(device):
    tests = os.path.join(ROOT, "tests")
    if not os.path.isfile(os.path.join(tests, "conftest.py")):
        return "skipped", "the tests are not here (run from a source checkout)", {}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p",
                           "no:cacheprovider", "--device", device, tests],
                          capture_output=True, text=True, cwd=ROOT)
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    status = "passed" if proc.returncode in (0, 5) else "FAILED"  # 5: no test selected
    return status, last, {"returncode": proc.returncode, "output": proc.stdout[-4000:]}


def run_kernels(dev):
    """Each parity case on the GPU's kernel set and in the emulator."""
    emu = KernelSet.emulated()
    rows, failed, exact = [], [], 0
    for label, run in parity_cases():
        want = run(emu, lambda a: np.array(a, copy=True))
        got = [dev.to_numpy(a) for a in run(dev.kernels, dev.asarray)]
        dtype = label.rsplit(" ", 1)[1]
        same = all(np.array_equal(w, h, equal_nan=True) for w, h in zip(want, got))
        close = same or all(np.allclose(h, w, rtol=RTOL[dtype], atol=RTOL[dtype],
                                        equal_nan=True) for w, h in zip(want, got))
        err = max((float(np.max(np.abs(h.astype(np.float64) - w), initial=0.0))
                   for w, h in zip(want, got)), default=0.0)
        exact += same
        rows.append({"case": label, "bit_exact": same, "max_abs_diff": err, "ok": close})
        if not close:
            failed.append(label)
    missing = sorted({name for _, name in KERNELS.values()} - set(emu.launches))
    status = "FAILED" if failed or missing else "passed"
    detail = f"{len(rows)} cases, {exact} bit-exact, {len(failed)} beyond tolerance" + \
        (f": {', '.join(failed[:5])}" if failed else "") + \
        (f"; kernels never launched: {', '.join(missing)}" if missing else "")
    return status, detail, {"cases": rows, "not_launched": missing}


def run_training(device, steps=30):
    tg.random.set_seed(0)
    rng = np.random.default_rng(0)
    with tg.device(device):
        x = tg.constant(rng.normal(size=(256, 32)).astype(np.float32))
        y = tg.constant((rng.normal(size=256) > 0).astype(np.int64) +
                        2 * (rng.normal(size=256) > 0))
        model = [tg.layers.Dense(64, activation="gelu"), tg.layers.Dropout(0.2),
                 tg.layers.Dense(4)]
        loss_fn = tg.losses.SparseCategoricalCrossentropy(from_logits=True)
        opt = tg.optimizers.Adam(0.01)
        losses, times = [], []
        for _ in range(steps):
            start = time.perf_counter()
            with tg.GradientTape() as tape:
                loss = loss_fn(y, model[2](model[1](model[0](x), training=True)))
            variables = [v for layer in model for v in layer.trainable_variables]
            grads, _ = tg.clip_by_global_norm(tape.gradient(loss, variables), 1.0)
            opt.apply_gradients(zip(grads, variables))
            loss._dev.synchronize()
            times.append(time.perf_counter() - start)
            losses.append(loss)
        values = [float(v) for v in losses]
    ok = all(np.isfinite(values)) and values[-1] < values[0]
    step_ms = 1e3 * float(np.median(times[1:]))
    return ("passed" if ok else "FAILED",
            f"loss {values[0]:.4f} -> {values[-1]:.4f} in {steps} steps, {step_ms:.2f} ms/step",
            {"losses": values, "median_step_ms": step_ms})


def run_benchmarks():
    if not os.path.isfile(os.path.join(ROOT, "benchmarks", "gpu.py")):
        return "skipped", "benchmarks/ is not here (run from a source checkout)", {}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--repeats", "5"],
                          capture_output=True, text=True, cwd=ROOT)
    lines = proc.stdout.strip().splitlines()
    return ("passed" if proc.returncode == 0 else "FAILED",
            f"{len(lines)} lines of results (in the JSON)",
            {"returncode": proc.returncode, "output": proc.stdout[-20000:],
             "stderr": proc.stderr[-4000:]})


def table(results):
    width = max(len(r["step"]) for r in results)
    lines = [f"{'step':<{width}}  {'status':<8} {'seconds':>8}  detail"]
    for r in results:
        lines.append(f"{r['step']:<{width}}  {r['status']:<8} {r['seconds']:>8.1f}  "
                     f"{r['detail']}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tapegpu selftest",
                                     description="Checks tapegpu on this machine's GPU.")
    parser.add_argument("--device", default="gpu:0", help="the GPU to test (default gpu:0)")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated steps among {', '.join(STEPS)} (default: all)")
    parser.add_argument("--json", default="tapegpu-selftest.json",
                        help="where to write the results (default tapegpu-selftest.json)")
    args = parser.parse_args(argv)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown steps {unknown}; choose among {', '.join(STEPS)}")
    if backend.gpu_count() == 0:
        print(f"python -m tapegpu selftest: no usable GPU here ({why_no_gpu() or 'none'}).\n"
              f"On a GPU it would run, on {args.device}:\n{plan(steps)}\n"
              f"and write {args.json} with a table of the results. Nothing was run.")
        return 0
    try:
        dev = backend.lookup(args.device)
    except (RuntimeError, ValueError) as e:
        print(f"python -m tapegpu selftest: error: {e}", file=sys.stderr)
        return 2
    runners = {"tests": lambda: run_tests(args.device), "kernels": lambda: run_kernels(dev),
               "training": lambda: run_training(args.device), "benchmarks": run_benchmarks}
    results = []
    for name in steps:
        start = time.perf_counter()
        try:
            status, detail, data = runners[name]()
        except Exception as e:  # a step's crash is its result; the others still run
            status, detail, data = "FAILED", f"{type(e).__name__}: {e}", {}
        results.append({"step": name, "status": status, "detail": detail,
                        "seconds": time.perf_counter() - start, "data": data})
    report = {"tapegpu": tg.__version__, "python": platform.python_version(),
              "device": dev.device, "properties": _properties(dev), "steps": results}
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1, default=str)
    print(table(results))
    print(f"results: {os.path.abspath(args.json)}")
    return 0 if all(r["status"] != "FAILED" for r in results) else 1


def _properties(dev):
    try:
        return dev.properties()
    except Exception as e:  # the report still gets written
        return {"error": str(e)}
