"""`python -m tapegpu selftest`: the first thing to run on a machine with an NVIDIA GPU, a verdict
in minutes (8 at most by default, `--budget`).

On the first GPU (or `--device gpu:N`) it runs these steps, each in a process of its own with a
timeout (its share of the budget, and never past the budget's end):

1. kernels: every hand-written CUDA kernel (cuda_kernels/) on the GPU and in the emulator on
   the same inputs, at a small size and at sizes that wrap the grid and exceed one block;
2. generated: every kernel tg.function generates for the op spec table's fusible ops, their
   VJPs, column sums (one and two stages) and a training step, on the GPU and in the emulator;
3. capture: steps captured as CUDA graphs against the same steps uncaptured, call by call;
4. training: an MLP by hand, Keras `fit` of a CNN and of an LSTM (each loss must fall);
5. tests: the test suite's tests parametrized on that GPU (`pytest --device gpu:N -n 8`, from a
   source checkout), each outcome logged as it comes;
6. benchmarks: `benchmarks/gpu.py` (tapegpu against PyTorch and JAX on the same GPU).

Bit-exact means the same bits; kernels that call CUDA's math functions (exp, tanh, ...) may
differ from the emulator's glibc by an ulp or two, within selftest_checks.RTOL/ATOL.

Results go to one JSON file (`--json`, default tapegpu-selftest.json), rewritten (atomically)
whenever a step ends; while a step runs, each case it finishes is appended to
`<json>.parts/<step>.jsonl`, so a step killed at its timeout (or a machine lost) keeps what it
did. A table is printed last. The exit status is 0 when every step passed or was skipped, 1
otherwise. Without a usable GPU it prints what it would do and why it cannot, and exits 0.
It installs nothing: a step whose tools are missing (pytest, the benchmarks' peers, a C++
compiler for the emulator) is skipped or reduced, and says so.
"""
import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time

import tapegpu as tg
from .. import backends as backend
from ..core import files
from .info import why_no_gpu

STEPS = {
    "kernels": "every hand-written CUDA kernel against the emulator on the same inputs, at "
               "sizes that wrap the grid and exceed one block",
    "generated": "every kernel tg.function generates (fused ops, VJPs, column sums, a "
                 "training step) against the emulator",
    "capture": "steps captured as CUDA graphs against the same steps uncaptured",
    "training": "an MLP by hand, Keras fit of a CNN and of an LSTM (each loss must fall)",
    "tests": "the test suite's tests parametrized on the device (pytest --device DEV -n 8)",
    "benchmarks": "benchmarks/gpu.py: tapegpu against PyTorch and JAX on the same GPU",
}
# each step's timeout in seconds (its share of the default 480 s budget; an H200 with 16 cores)
BUDGET = {"kernels": 60, "generated": 90, "capture": 20, "training": 45, "tests": 160,
          "benchmarks": 90}
TOTAL_BUDGET = 470
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD = "import sys; from tapegpu.cli import selftest; sys.exit(selftest.child(sys.argv[1:]))"


def plan(steps=STEPS):
    return "\n".join(f"  {i}. {name}: {STEPS[name]}" for i, name in enumerate(steps, 1))


def _simulated_cupy():
    """The directory of the CuPy stand-in (tests/support) when it is this process's `cupy`
    (the test suite's `cuda_sim`): the steps' processes install it too."""
    cupy = sys.modules.get("cupy")
    sim = getattr(cupy, "cupy_sim", None)
    return os.path.dirname(os.path.dirname(os.path.abspath(sim.__file__))) if sim else None


def _python(code):
    """[python, -c, code] for a step's process, the stand-in installed first where it is here."""
    sim = _simulated_cupy()
    if sim:
        code = (f"import sys; sys.path.insert(0, {sim!r}); import cupy_sim; "
                f"cupy_sim.install(); {code}")
    return [sys.executable, "-c", code]


def _env(extra=()):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def _run(cmd, timeout, log, env, cwd=ROOT):
    """Runs `cmd` in a session of its own (its children too: pytest's workers), output to `log`;
    kills the whole session at `timeout`. Returns (returncode or None on timeout, seconds)."""
    start = time.perf_counter()
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            if proc.poll() is None or rc is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
    return rc, time.perf_counter() - start


def _records(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:  # a line cut by a kill
                    pass
    except FileNotFoundError:
        pass
    return out


def _tail(path, n=3000):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def run_check(name, device, timeout, parts, quick=False):
    """A check of selftest_checks in a process of its own."""
    log, path = os.path.join(parts, f"{name}.log"), os.path.join(parts, f"{name}.jsonl")
    for p in (log, path):
        if os.path.exists(p):
            os.unlink(p)
    rc, _ = _run(_python(CHILD) + [name, device, path] + (["quick"] if quick else []),
                 timeout, log, _env())
    records = _records(path)
    cases = [r["case"] for r in records if "case" in r]
    results = [r["result"] for r in records if "result" in r]
    if results:
        status, detail, data = results[-1]
    elif rc is None:
        bad = [c for c in cases if not c.get("ok", True)]
        status, detail, data = "TIMEOUT", f"killed after {timeout:.0f} s with {len(cases)} " \
            f"cases done ({len(bad)} failed); the last: {cases[-1]['case'] if cases else '-'}", {}
    else:
        status, detail, data = "FAILED", f"its process exited with status {rc} without a " \
            f"result: {_tail(log, 300).strip().splitlines()[-1:] or ['no output']}", {}
    return status, detail, {**data, "cases": cases, "output_tail": _tail(log)}


def child(argv):
    """A step's process: `child([step, device, log path[, "quick"]])` runs
    selftest_checks.CHECKS[step] on the device, appending each case and then the result to the
    log as JSON lines."""
    from . import selftest_checks
    name, device, path = argv[:3]
    quick = argv[3:] == ["quick"]
    with open(path, "a", buffering=1) as f:
        def emit(record):
            f.write(json.dumps({"case": record}, default=str) + "\n")
            f.flush()
        try:
            result = selftest_checks.CHECKS[name](backend.lookup(device), emit, quick=quick)
        except Exception as e:  # the step's crash is its result
            import traceback
            result = ("FAILED", f"{type(e).__name__}: {e}"[:500],
                      {"traceback": traceback.format_exc()[-3000:]})
        f.write(json.dumps({"result": result}, default=str) + "\n")
    return 0


def _pytest_device(device):
    """The `--device` the test suite knows this GPU by (`cuda_sim` for the stand-in)."""
    return "cuda_sim" if _simulated_cupy() else device


def run_tests(device, timeout, parts, tests=None, workers=None):
    """The tests parametrized on `device` (and the `gpu`-marked ones) by pytest with xdist,
    each outcome appended to parts/tests.jsonl as it comes (tapegpu/cli/pytest_log.py)."""
    from importlib.util import find_spec
    if not os.path.isfile(os.path.join(ROOT, "tests", "conftest.py")):
        return "skipped", "the tests are not here (run from a source checkout)", {}
    if find_spec("pytest") is None:
        return "skipped", "pytest is not installed here", {}
    log, path = os.path.join(parts, "tests.log"), os.path.join(parts, "tests.jsonl")
    for p in (log, path):
        if os.path.exists(p):
            os.unlink(p)
    dev = _pytest_device(device)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
           "tapegpu.cli.pytest_log", "--device", dev, "-rN"]
    workers = workers if workers is not None else min(8, os.cpu_count() or 1)
    if find_spec("xdist") is not None and workers > 1:
        cmd += ["-n", str(workers)]
    if find_spec("pytest_timeout") is not None:
        cmd += ["--timeout", str(int(min(120, max(10, timeout / 2))))]
    cmd += list(tests) if tests else [os.path.join(ROOT, "tests")]
    rc, _ = _run(cmd, timeout, log, _env({"TAPEGPU_SELFTEST_LOG": path,
                                          "TAPEGPU_SELFTEST_DEVICE": dev}))
    records = _records(path)
    outcomes, started = {}, set()
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    for r in records:
        if "start" in r:
            started.add(r["start"])
        elif "test" in r:
            old = outcomes.get(r["test"])
            if old is None or rank.get(r["outcome"], 0) > rank.get(old["outcome"], 0):
                outcomes[r["test"]] = r
    # each xdist worker collects (and reports) every selected test
    selected = max((r["selected"] for r in records if "selected" in r), default=0)
    counts = {k: sum(1 for r in outcomes.values() if r["outcome"] == k) for k in rank}
    unfinished = sorted(started - set(outcomes))
    bad = [{"test": t, "outcome": r["outcome"], "message": r.get("message", "")[-600:]}
           for t, r in outcomes.items() if r["outcome"] in ("failed", "error")]
    summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "no test ran"
    if rc is None:
        status = "TIMEOUT"
        detail = f"killed after {timeout:.0f} s: {summary} of {selected or '?'} selected; " \
            f"{len(unfinished)} started and unfinished"
    else:
        status = "passed" if rc == 0 and outcomes else "FAILED"  # 5: no test selected
        detail = f"{summary} of {selected or len(outcomes)} selected (pytest status {rc})"
    return status, detail, {"returncode": rc, "selected": selected, "counts": counts,
                            "failures": bad[:200], "unfinished": unfinished[:50],
                            "output_tail": _tail(log)}


def run_benchmarks(device, timeout, parts, quick=False):
    if not os.path.isfile(os.path.join(ROOT, "benchmarks", "gpu.py")):
        return "skipped", "benchmarks/ is not here (run from a source checkout)", {}
    log, path = os.path.join(parts, "benchmarks.log"), os.path.join(parts, "benchmarks.json")
    for p in (log, path):
        if os.path.exists(p):
            os.unlink(p)
    code = "import sys, runpy; sys.argv = ['benchmarks.gpu'] + sys.argv[1:]; " \
        "runpy.run_module('benchmarks.gpu', run_name='__main__')"
    cmd = _python(code) + ["--device", device, "--json", path, "--budget",
                           str(int(max(10, timeout - 10)))] + (["--quick"] if quick else [])
    rc, _ = _run(cmd, timeout, log, _env())
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError):
        report = {}
    rows = report.get("results", [])
    failed = [r["name"] for r in rows if r.get("status") not in ("ok", "skipped")]
    if rc is None:
        status = "TIMEOUT"
    else:
        status = "passed" if rc == 0 and not failed else "FAILED"
    detail = f"{len(rows)} results ({len(failed)} failed" + \
        (f": {', '.join(failed[:4])}" if failed else "") + f"), in {path}"
    return status, detail, {"returncode": rc, "report": report, "output_tail": _tail(log)}


def table(results):
    width = max([len(r["step"]) for r in results] + [4])
    lines = [f"{'step':<{width}}  {'status':<8} {'seconds':>8}  detail"]
    for r in results:
        lines.append(f"{r['step']:<{width}}  {r['status']:<8} {r['seconds']:>8.1f}  "
                     f"{r['detail']}")
    return "\n".join(lines)


def _write_report(path, report):
    text = json.dumps(report, indent=1, default=str).encode()
    files.atomic_write(path, lambda f: f.write(text))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tapegpu selftest",
                                     description="Checks tapegpu on this machine's GPU.")
    parser.add_argument("--device", default="gpu:0", help="the GPU to test (default gpu:0)")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated steps among {', '.join(STEPS)} (default: all)")
    parser.add_argument("--json", default="tapegpu-selftest.json",
                        help="where to write the results (default tapegpu-selftest.json)")
    parser.add_argument("--budget", type=float, default=TOTAL_BUDGET,
                        help=f"seconds for all the steps together (default {TOTAL_BUDGET})")
    parser.add_argument("--timeouts", default="",
                        help="per-step timeouts in seconds, e.g. 'tests=300,kernels=90' "
                             f"(defaults: {', '.join(f'{k}={v}' for k, v in BUDGET.items())})")
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes and fewer cases (a check of the self-test itself)")
    parser.add_argument("--tests", default=None,
                        help="comma-separated test paths for the tests step (default: tests/)")
    args = parser.parse_args(argv)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown steps {unknown}; choose among {', '.join(STEPS)}")
    if args.budget <= 0:
        parser.error(f"--budget must be a positive number of seconds, got {args.budget}")
    budget = dict(BUDGET)
    for item in filter(None, (t.strip() for t in args.timeouts.split(","))):
        name, _, value = item.partition("=")
        try:
            budget[name.strip()] = float(value)
        except ValueError:
            budget[name.strip()] = -1.0
        if name.strip() not in STEPS or not budget[name.strip()] > 0:
            parser.error(f"--timeouts: {item!r} must be STEP=SECONDS with STEP among "
                         f"{', '.join(STEPS)} and SECONDS > 0")
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
    out = os.path.abspath(args.json)
    parts = os.path.splitext(out)[0] + ".parts"
    os.makedirs(parts, exist_ok=True)
    deadline = time.monotonic() + args.budget
    report = {"tapegpu": tg.__version__, "python": platform.python_version(),
              "device": dev.device, "properties": _properties(dev),
              "simulated": bool(_simulated_cupy()), "budget_s": args.budget,
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "steps": [], "running": None, "finished": False}
    tests = args.tests.split(",") if args.tests else None
    runners = {"tests": lambda t: run_tests(args.device, t, parts, tests),
               "benchmarks": lambda t: run_benchmarks(args.device, t, parts, args.quick)}
    for i, name in enumerate(steps):
        left = deadline - time.monotonic()
        timeout = min(budget[name], left)
        start = time.perf_counter()
        if timeout < 5:
            status, detail, data = "skipped", f"no time left in the {args.budget:.0f} s " \
                "budget", {}
        else:
            report["running"] = name
            _write_report(out, report)
            print(f"[selftest] {name} (timeout {timeout:.0f} s) ...", flush=True)
            try:
                run = runners.get(name) or (lambda t, name=name: run_check(
                    name, args.device, t, parts, args.quick))
                status, detail, data = run(timeout)
            except Exception as e:  # the orchestration's own failure is the step's result
                status, detail, data = "FAILED", f"{type(e).__name__}: {e}", {}
        report["steps"].append({"step": name, "status": status, "detail": detail,
                                "seconds": time.perf_counter() - start,
                                "timeout_s": round(timeout, 1), "data": data})
        report["running"] = None
        _write_report(out, report)
    report["finished"] = True
    _write_report(out, report)
    print(table(report["steps"]))
    print(f"results: {out}")
    return 0 if all(r["status"] in ("passed", "skipped") for r in report["steps"]) else 1


def _properties(dev):
    try:
        return dev.properties()
    except Exception as e:  # the report still gets written
        return {"error": str(e)}
