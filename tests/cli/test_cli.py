"""`python -m tapegpu` usage and exit codes; the demo's epoch losses and its HVP verdict."""
import io
import re
import subprocess
import os
import sys
import types
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

import tapegpu as tg
from tapegpu import __main__ as entry
from tapegpu.cli import demo
from tapegpu.cli import info as info_module

SINGLE_DEVICE = True
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("flag", ["--help", "-h", "help"])
def test_help_prints_usage_listing_the_commands_and_exits_0(flag, capsys):
    assert entry.main([flag]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: python -m tapegpu") and not err
    assert re.search(r"^\s+demo\s", out, re.M) and re.search(r"^\s+info\s", out, re.M)


def test_unknown_command_prints_usage_and_exits_2(capsys):
    assert entry.main(["trian"]) == 2
    out, err = capsys.readouterr()
    assert not out and err.startswith("usage: python -m tapegpu")
    assert "unknown command 'trian'" in err


def test_python_m_tapegpu_help_and_unknown_command_exit_codes():
    run = [sys.executable, "-m", "tapegpu"]
    proc = subprocess.run(run + ["--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "info" in proc.stdout, proc.stderr
    proc = subprocess.run(run + ["nope"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage:" in proc.stderr


def test_info_takes_help_and_refuses_unknown_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        entry.main(["info", "--help"])
    assert exit_.value.code == 0 and "--no-kernel-checks" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        entry.main(["info", "--bogus"])
    assert exit_.value.code == 2


def test_demo_reports_the_epoch_mean_loss(monkeypatch):
    """The loss printed per epoch is the mean over the epoch's examples, not the last batch's."""
    batches = []
    base = tg.losses.SparseCategoricalCrossentropy

    class Recording(base):
        def __call__(self, y_true, y_pred, sample_weight=None):
            loss = super().__call__(y_true, y_pred, sample_weight)
            batches.append((float(loss), y_true.shape[0]))
            return loss

    monkeypatch.setattr(tg.losses, "SparseCategoricalCrossentropy", Recording)
    out = io.StringIO()
    demo.train_classifier(2, batch_size=100, out=out)
    shown = [float(v) for v in re.findall(r"loss (\d+\.\d+)", out.getvalue())]
    steps = len(batches) // 2
    assert len(shown) == 2 and batches[steps - 1][1] < 100  # a last, smaller batch
    for epoch, value in enumerate(shown):
        losses, sizes = np.array(batches[epoch * steps:(epoch + 1) * steps]).T
        assert value == pytest.approx(np.average(losses, weights=sizes), abs=6e-5)
        assert value != pytest.approx(losses[-1], abs=6e-5)


def test_demo_prints_a_verdict_for_the_hvp_check():
    out = io.StringIO()
    with redirect_stdout(out):
        result = demo.run(["--small", "--epochs", "1"])
    text = out.getvalue()
    rel = result["hvp_relative_error"]
    assert rel < demo.HVP_TOLERANCE
    assert f"ok (relative difference {rel:.1e} < 1e-04)" in text, text
    assert demo.hvp_verdict(3e-3) == "FAILED (relative difference 3.0e-03 >= 1e-04)"
    assert result["hvp_tolerance"] == demo.HVP_TOLERANCE   # on the CPU


def test_the_hvp_check_allows_for_tf32_products_on_a_gpu_only():
    """On an H200 the demo's float32 HVP (TF32 products, on by default as in TensorFlow) was
    9.3e-4 from the float64 differences and the demo exited 1."""
    gpu, cpu = "/job:localhost/replica:0/task:0/device:GPU:0", \
        "/job:localhost/replica:0/task:0/device:CPU:0"
    was = tg.config.experimental.tensor_float_32_execution_enabled()
    try:
        tg.config.experimental.enable_tensor_float_32_execution(True)
        assert demo.hvp_tolerance(gpu) == demo.HVP_TOLERANCE_TF32 > 9.3e-4
        assert demo.hvp_tolerance(cpu) == demo.HVP_TOLERANCE
        tg.config.experimental.enable_tensor_float_32_execution(False)
        assert demo.hvp_tolerance(gpu) == demo.HVP_TOLERANCE
    finally:
        tg.config.experimental.enable_tensor_float_32_execution(was)


# -- info on a machine without a usable GPU -----------------------------------------------------

def test_info_with_tapegpu_device_gpu_and_no_gpu_is_a_one_line_error():
    env = {**os.environ, "TAPEGPU_DEVICE": "gpu"}
    env.pop("TAPEGPU_TEST_CUPY_SIM", None)
    proc = subprocess.run([sys.executable, "-m", "tapegpu", "info", "--no-kernel-checks"],
                          capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode == 0 and "gpus: none" not in proc.stdout:
        pytest.skip("a GPU is usable here")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m tapegpu info: error: "
                                                   "TAPEGPU_DEVICE='gpu'"), proc.stderr
    assert "no such GPU" in lines[0] and "cuda_emu" in lines[0]
    assert "gpus: none: " in proc.stdout


class _FakeRuntime:
    def __init__(self, error):
        self.error = error

    def getDeviceCount(self):
        raise self.error


def _fake_cupy(monkeypatch, error, major):
    cupy = types.SimpleNamespace(__version__="14.2.0",
                                 cuda=types.SimpleNamespace(runtime=_FakeRuntime(error)))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(info_module, "find_spec", lambda name: object())
    monkeypatch.setattr(info_module, "cupy_cuda_major", lambda: major)


def test_info_shows_cupys_own_error_with_hints_for_its_cuda(monkeypatch):
    err = RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for "
                       "CUDA runtime version")
    _fake_cupy(monkeypatch, err, 12)
    why = info_module.why_no_gpu()
    assert "CuPy says RuntimeError: cudaErrorInsufficientDriver" in why
    assert "too old for CUDA 12" in why and "525.60.13" in why
    assert "CUDA 13" not in why and "cuda13" not in why and "580" not in why
    assert info_module._cupy() == "14.2.0 (for CUDA 12)"
    _fake_cupy(monkeypatch, RuntimeError("libnvrtc.so.12: cannot open shared object file"), 12)
    why = info_module.why_no_gpu()
    assert "libnvrtc.so.12" in why and "pip install 'cupy-cuda12x[ctk]'" in why


def test_info_nvrtc_hint_matches_cupys_cuda_12(monkeypatch):
    monkeypatch.setattr(info_module.nvrtc, "available", lambda: False)
    monkeypatch.setattr(info_module.nvrtc, "reason", lambda: "cuda-bindings is not installed "
                        "(x); pip install cuda-bindings nvidia-cuda-nvrtc")
    monkeypatch.setattr(info_module, "cupy_cuda_major", lambda: 12)
    hint = info_module._nvrtc()
    assert "'cuda-bindings==12.*' 'nvidia-cuda-nvrtc-cu12==12.*'" in hint and "13" not in hint


def test_cuda_extras_bring_cupys_ctk_for_a_driver_only_machine():
    tomllib = pytest.importorskip("tomllib")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert extras["cuda12"] == ["cupy-cuda12x[ctk]>=14"]
    assert extras["cuda13"] == ["cupy-cuda13x[ctk]>=14"]
