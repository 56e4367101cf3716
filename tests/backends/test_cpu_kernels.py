"""The CPU kernels (tapegpu/backends/_cpu.c) are optional: an install with a C compiler builds
them, and without them (TAPEGPU_PURE_PYTHON=1) the op, tape and model suites pass on numpy.
The activation kernels, generated from the ops' expressions, give the entries' bits."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tapegpu import backends as tg_backends
from tapegpu.backends import cpu_kernels

SINGLE_DEVICE = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_cpu_kernels_are_built_where_a_compiler_is():
    """Where a C compiler is (CI), the install builds the kernels: otherwise their paths would
    be skipped without anyone noticing."""
    if os.environ.get("TAPEGPU_PURE_PYTHON", "") not in ("", "0"):
        assert cpu_kernels is None
        return
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: numpy runs those ops")
    assert cpu_kernels is not None, \
        "tapegpu.backends._cpu is not built: reinstall with `pip install -e .`"


@pytest.mark.skipif(cpu_kernels is None, reason="numpy runs those ops here already")
def test_the_suites_pass_without_the_cpu_kernels():
    env = dict(os.environ, TAPEGPU_PURE_PYTHON="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        "-p", "no:xdist", "--device", "numpy", "tests/autodiff/test_tape.py",
                        "tests/autodiff/test_memory.py", "tests/ops/test_ops.py",
                        "tests/models/test_module_layers.py",
                        "tests/backends/test_cpu_kernels.py::"
                        "test_the_cpu_kernels_are_built_where_a_compiler_is"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and " failed" not in r.stdout


def _specials(shape, dtype, seed):
    """Values with NaN, +-inf, +-0.0 and subnormals scattered among normal ones."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 2).astype(dtype)
    flat = a.reshape(-1)
    picks = rng.choice(flat.size, size=min(flat.size, 30), replace=False)
    flat[picks] = np.resize(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -np.nan, 1e-40,
                                      -1e-40], dtype), picks.size)
    return a


CPU_ACTIVATIONS = getattr(cpu_kernels, "ACTIVATIONS", ())


@pytest.mark.skipif(cpu_kernels is None, reason="tapegpu._cpu is not built")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", CPU_ACTIVATIONS)
def test_activation_kernels_give_the_entries_bits(name, dtype):
    """The generated activation kernels: bias + forward is the op's forward of x + b, the
    backward (with batch axes on the cotangent) the op's rule on numpy arrays, bit for bit."""
    from tapegpu.ops.registry import REGISTRY
    op, k = REGISTRY[name], CPU_ACTIVATIONS.index(name)
    x, b = _specials((37, 45), dtype, 1), _specials((45,), dtype, 2)
    out = np.empty_like(x)
    cpu_kernels.bias_act(k, x, b, out)
    with np.errstate(all="ignore"):
        want = op.forward(np, x + b)
    assert out.tobytes() == want.tobytes()
    _backward_is_the_rule(op, k, want if op.saves == ("out",) else x + b, 3)


def _backward_is_the_rule(op, k, saved, seed):
    """CPU backward k of `op` from `saved`, with batch axes on the cotangent: the op's rule on
    numpy arrays, bit for bit. Returns the cotangent and the rule's result."""
    from tapegpu.ops import TENSOR_OPS
    from tapegpu.ops.namespace import ArrayOps
    g = _specials((3,) + saved.shape, saved.dtype, seed)
    got = np.empty_like(g)
    cpu_kernels.act_backward(k, saved, g, got)
    rule = op.vjp[0] if type(op.vjp) is tuple else op.vjp
    with np.errstate(all="ignore"):
        want = rule(ArrayOps(tg_backends.NUMPY, TENSOR_OPS), g, saved)
    assert got.tobytes() == want.tobytes()
    return g, want


CPU_BACKWARDS = getattr(cpu_kernels, "BACKWARDS", ())


@pytest.mark.skipif(cpu_kernels is None, reason="tapegpu._cpu is not built")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", CPU_BACKWARDS)
def test_backward_kernels_give_the_rules_bits(name, dtype):
    """The generated backwards of the ops whose VJP only is exact (tanh: 1 - y^2): the op's
    rule on numpy arrays, bit for bit, with batch axes on the cotangent; and tanh_grad's
    forward on numpy (its kernel) is tanh's rule."""
    from tapegpu.ops.registry import REGISTRY
    op = REGISTRY[name]
    k = len(CPU_ACTIVATIONS) + CPU_BACKWARDS.index(name)
    saved = _specials((37, 45), dtype, 4)
    if op.saves == ("out",):  # a value the forward can give (tanh, sigmoid: within [-1, 1])
        with np.errstate(all="ignore"):
            saved = op.forward(np, saved)
    g, want = _backward_is_the_rule(op, k, saved, 5)
    if name == "tanh":
        with np.errstate(all="ignore"):
            via = REGISTRY["tanh_grad"].kernels["numpy"](np, g, saved)
        assert via.tobytes() == want.tobytes()
    with pytest.raises(TypeError, match="index k into ACTIVATIONS"):
        cpu_kernels.bias_act(k, saved, saved[0], saved.copy())  # a backward has no forward


@pytest.mark.skipif(cpu_kernels is None, reason="tapegpu._cpu is not built")
def test_activation_kernels_check_their_arguments():
    x = np.ones((4, 3), np.float32)
    with pytest.raises(TypeError, match="index k into ACTIVATIONS"):
        cpu_kernels.bias_act(len(CPU_ACTIVATIONS), x, x[0], x.copy())
    with pytest.raises(TypeError, match="index k into ACTIVATIONS"):
        cpu_kernels.act_backward(0, x, x)
    with pytest.raises(ValueError, match="x must be rows of len"):
        cpu_kernels.bias_act(0, x, np.ones(5, np.float32), x.copy())
    with pytest.raises(ValueError, match="g must be batches of y"):
        cpu_kernels.act_backward(0, np.ones(5, np.float32), x, x.copy())
    with pytest.raises(TypeError, match="must all be float32 or all float64"):
        cpu_kernels.act_backward(0, x, x.astype(np.float64), x.copy())
