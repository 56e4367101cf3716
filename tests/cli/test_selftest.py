"""`python -m tapegpu selftest`: on a machine without a GPU it says what it would do and exits 0;
on a GPU (here: the CuPy stand-in, kernels run by the emulator) every step runs in a process of
its own with a timeout, its results in the JSON as they come, a table last."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tapegpu import backends as backend
from tapegpu.backends.kernels.launch import ACTIVATIONS, KERNELS, KernelSet, parity_cases
from tapegpu.cli import selftest, selftest_checks

SINGLE_DEVICE = True


@pytest.fixture
def sim(cupy_gpu):
    """The stand-in as CuPy (tests/conftest.py), gpu:0 fresh."""
    return cupy_gpu


def test_without_a_gpu_it_prints_the_plan_and_exits_0(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(selftest.backend, "gpu_count", lambda: 0)
    out_json = tmp_path / "r.json"
    assert selftest.main(["--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "no usable GPU here" in out and "Nothing was run" in out
    for i, step in enumerate(selftest.STEPS, 1):
        assert f"  {i}. {step}: " in out
    assert not out_json.exists()


def test_python_m_tapegpu_selftest_exits_0_without_a_gpu(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TAPEGPU_TEST_CUPY_SIM"}
    proc = subprocess.run([sys.executable, "-m", "tapegpu", "selftest"], capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=120)
    if "no usable GPU" not in proc.stdout:
        pytest.skip("a GPU is usable here: the selftest ran for real")
    assert proc.returncode == 0 and proc.stderr == "" and not list(tmp_path.iterdir())


def test_unknown_step_is_refused(capsys):
    with pytest.raises(SystemExit) as info:
        selftest.main(["--steps", "kernels,bogus"])
    assert info.value.code == 2 and "unknown steps ['bogus']" in capsys.readouterr().err


def test_parity_cases_launch_every_kernel_of_the_table():
    ks = KernelSet.emulated()
    labels = [label for label, run in parity_cases() if run(ks, np.array) is not None]
    assert len(labels) == len(set(labels))
    assert {name for _, name in KERNELS.values()} == set(ks.launches)


def test_parity_cases_at_a_size_that_wraps_the_grid_launch_every_kernel():
    ks = KernelSet.emulated(block=32, max_blocks=2)  # 64 threads: every loop wraps
    labels = [label for label, run in parity_cases(shape=(70, 40)) if run(ks, np.array)]
    assert {name for _, name in KERNELS.values()} == set(ks.launches)
    assert "unbroadcast to (1, 40) float32" in labels


def test_on_the_simulated_gpu_every_step_runs_end_to_end(sim, tmp_path, capsys):
    """Each step in a process of its own (the stand-in installed there too), results in the
    JSON as they come; the tests step runs one test module on the device."""
    out_json = tmp_path / "r.json"
    rc = selftest.main(["--quick", "--json", str(out_json), "--budget", "1500", "--timeouts",
                        "kernels=300,generated=300,capture=300,training=300,tests=300,"
                        "benchmarks=300", "--tests", "tests/ops/test_random_ops.py"])
    out = capsys.readouterr().out
    report = json.loads(out_json.read_text())
    steps = {s["step"]: s for s in report["steps"]}
    assert list(steps) == list(selftest.STEPS) and report["finished"] and report["simulated"]
    for name in ("kernels", "generated", "training", "tests", "benchmarks"):
        assert steps[name]["status"] == "passed", (name, steps[name]["detail"])
    kernels = steps["kernels"]["data"]
    assert kernels["not_launched"] == [] and kernels["failed"] == []
    assert all(c["bit_exact"] for c in kernels["cases"])  # the same emulator on both sides
    assert any(c["case"].endswith("grid 2x32") for c in kernels["cases"])
    generated = steps["generated"]["data"]["cases"]
    assert any("parts=" in c["case"] and c["bit_exact"] for c in generated)  # two stages
    assert all(c["ok"] for c in generated)
    capture_cases = steps["capture"]["data"]["cases"]  # compared call by call
    assert len(capture_cases) == 3 and all(c["bit_exact"] and c["captured"]
                                           for c in capture_cases), capture_cases
    training = {c["case"]: c for c in steps["training"]["data"]["cases"]}
    assert set(training) == {"mlp", "keras cnn", "keras lstm"}
    tests = steps["tests"]["data"]
    assert tests["counts"]["passed"] > 0 and tests["counts"]["failed"] == 0
    assert tests["selected"] == sum(tests["counts"].values())
    assert {r["name"] for r in steps["benchmarks"]["data"]["report"]["results"]} == \
        {"launch", "jacobian"}
    assert report["device"].endswith("GPU:0")
    parts = tmp_path / "r.parts"
    assert (parts / "kernels.jsonl").exists() and (parts / "tests.jsonl").exists()
    lines = out.splitlines()
    head = lines.index(next(ln for ln in lines if ln.startswith("step ")))
    assert lines[head].split() == ["step", "status", "seconds", "detail"]
    assert [ln.split()[0] for ln in lines[head + 1:head + 7]] == list(selftest.STEPS)
    assert rc == (0 if steps["capture"]["status"] == "passed" else 1)


def test_a_step_past_its_timeout_is_killed_and_keeps_what_it_did(sim, tmp_path, capsys):
    out_json = tmp_path / "r.json"
    assert selftest.main(["--steps", "kernels", "--json", str(out_json),
                          "--timeouts", "kernels=6"]) == 1
    step = json.loads(out_json.read_text())["steps"][0]
    assert step["status"] == "TIMEOUT" and step["timeout_s"] == 6
    assert "killed after 6 s with" in step["detail"]
    cases = step["data"]["cases"]
    assert cases and len(cases) < 2 * len(list(parity_cases()))  # some, not all, were done
    assert capsys.readouterr().out.splitlines()[-2].split()[:2] == ["kernels", "TIMEOUT"]


def test_the_budget_skips_the_steps_it_has_no_time_for(sim, tmp_path, capsys):
    out_json = tmp_path / "r.json"
    assert selftest.main(["--steps", "kernels,capture", "--json", str(out_json),
                          "--budget", "6"]) == 1
    kernels, capture = json.loads(out_json.read_text())["steps"]
    assert kernels["status"] == "TIMEOUT" and kernels["timeout_s"] <= 6
    assert capture["status"] == "skipped" and "no time left" in capture["detail"]


def test_a_kernel_that_disagrees_with_the_emulator_fails_the_check(sim):
    dev = backend.gpu(0)
    real = type(dev.kernels).act_fwd

    def off_by_a_bit(self, name, x):
        y = real(self, name, x)
        return y + 1e-3 if self.xp is not np else y  # the GPU's kernel sets, not the emulator's
    emitted = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(type(dev.kernels), "act_fwd", off_by_a_bit)
        status, detail, data = selftest_checks.kernels(dev, emitted.append, quick=True)
    assert status == "FAILED" and f"{4 * len(ACTIVATIONS)} beyond tolerance" in detail
    assert len(emitted) == data["cases"] and not all(c["ok"] for c in emitted)
