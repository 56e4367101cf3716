"""`python -m tapegpu selftest`: on a machine without a GPU it says what it would do and exits 0;
on a GPU (here: the CuPy stand-in, kernels run by the emulator) it checks every kernel against
the emulator, runs a short training, writes one JSON and prints a table."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tapegpu import backends as backend
from tapegpu.backends.kernels.launch import ACTIVATIONS, KERNELS, KernelSet, parity_cases
from tapegpu.cli import selftest

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


def test_on_the_simulated_gpu_it_checks_kernels_and_trains(sim, tmp_path, capsys):
    out_json = tmp_path / "r.json"
    assert selftest.main(["--steps", "kernels,training", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    report = json.loads(out_json.read_text())
    kernels, training = report["steps"]
    assert kernels["step"] == "kernels" and kernels["status"] == "passed"
    assert all(c["ok"] and c["bit_exact"] for c in kernels["data"]["cases"])  # same emulator
    assert kernels["data"]["not_launched"] == []
    assert training["status"] == "passed"
    losses = training["data"]["losses"]
    assert losses[-1] < losses[0] and len(losses) == 30
    assert report["device"].endswith("GPU:0")
    assert out.splitlines()[0].split() == ["step", "status", "seconds", "detail"]
    assert [ln.split()[:2] for ln in out.splitlines()[1:3]] == [["kernels", "passed"],
                                                                ["training", "passed"]]


def test_a_kernel_that_disagrees_with_the_emulator_fails_the_selftest(sim, tmp_path,
                                                                     monkeypatch, capsys):
    dev = backend.gpu(0)
    real = type(dev.kernels).act_fwd

    def off_by_a_bit(self, name, x):
        y = real(self, name, x)
        return y + 1e-3 if self is dev.kernels else y
    monkeypatch.setattr(type(dev.kernels), "act_fwd", off_by_a_bit)
    assert selftest.main(["--steps", "kernels", "--json", str(tmp_path / "r.json")]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:2] == ["kernels", "FAILED"]
    assert f"{2 * len(ACTIVATIONS)} beyond tolerance" in out  # each forward, both dtypes
