"""The demo (short run) reaches its stated accuracy, and every example script runs."""
import io
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from tapegpu.cli import demo

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
SMALL_ACCURACY = 0.85  # the --small run's stated floor on the test split


def _run_demo(argv):
    buf = io.StringIO()
    with redirect_stdout(buf):
        result = demo.run(argv)
    return result, buf.getvalue()


def test_demo_small_reaches_the_stated_accuracy():
    result, text = _run_demo(["--small"])
    assert result["accuracy"] >= SMALL_ACCURACY, text
    assert result["lm_converged"]
    a, b, c, d = result["fitted"]
    assert abs(a - 2.0) < 0.05 and abs(b - 0.7) < 0.05 and abs(c - 3.0) < 0.05
    assert result["hvp_relative_error"] < 5e-2
    for needle in ("devices:", "CPU", "test accuracy", "Levenberg-Marquardt", "batch_jacobian",
                   "Hessian-vector product", "timings", "\r"):
        assert needle in text, needle


def test_demo_falls_back_to_generated_digits(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)  # import fails
    x_train, y_train, x_test, y_test, source = demo.load_digits()
    assert source.startswith("generated") and x_train.shape[1] == 64
    assert x_train.dtype.name == "float32" and set(y_test) == set(range(10))
    result, text = _run_demo(["--small"])
    assert "generated 8x8 digits" in text
    assert result["accuracy"] >= SMALL_ACCURACY, text


def test_python_m_tapegpu_demo_exits_with_status_0():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "tapegpu", "demo", "--small"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "test accuracy" in proc.stdout


def test_there_are_examples():
    names = {p.stem for p in EXAMPLES}
    assert {"vjp_output_gradients", "intermediate_gradients", "chain_rule_jacobian",
            "per_example_gradients", "blackbox_loss", "levenberg_marquardt_model"} <= names


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(script):
    if script.stem.startswith("distributed"):
        pytest.importorskip("mpi4py", reason="the distributed extra (mpi4py) is not installed")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip()
