"""Every kernel of cuda_kernels/ against its numpy reference, on the emulator: for the kernels
of an op, its registry entry (reference forward, VJP rule on numpy arrays); for the others,
backends.kernels.reference.

Each case runs in forward and in reverse resume order, in float32 and float64,
on sizes that cover one element, partial blocks, grid-stride tails (the
KernelSet is capped at 3 blocks) and empty inputs (no launch)."""

SINGLE_DEVICE = True  # about the kernels themselves, not a tapegpu device

import glob
import os

import numpy as np
import pytest

from tapegpu.backends.emu import RawModule
from tapegpu.backends.kernels import KERNEL_DIR, KernelSet, kernel_files, kernel_names
from tapegpu.backends.kernels import reference as ref
from tapegpu.backends.kernels.launch import ACTIVATIONS, reduction_groups
from tapegpu import backends
from tapegpu.ops import TENSOR_OPS
from tapegpu.ops.namespace import ArrayOps
from tapegpu.ops.registry import REGISTRY

# the references of op kernels: the ops' own forwards and VJP rules on numpy arrays, run by
# numpy alone (no kernel of any backend)
_NUMPY_RULES = ArrayOps(backends.NUMPY, TENSOR_OPS)


def op_forward(name, *arrays, **params):
    return REGISTRY[name].forward(np, *arrays, **params)


def op_vjp(name, g, *saved, **params):
    rule = REGISTRY[name].vjp
    rule = rule[-1] if type(rule) is tuple else rule
    return rule(_NUMPY_RULES, g, *saved, **params)


def saves_output(name):
    return REGISTRY[name].saves == ("out",)

DTYPES = (np.float32, np.float64)
TOL = {np.float32: dict(rtol=3e-5, atol=3e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}
SIZES = (0, 1, 255, 257, 3000)   # empty, one, partial block, one past a block, grid-stride tail
MAX_BLOCKS = 3


@pytest.fixture(scope="module")
def kernel_sets():
    return {o: KernelSet.emulated(order=o, max_blocks=MAX_BLOCKS) for o in ("forward", "reverse")}


@pytest.fixture
def ks(kernel_sets, order):
    kernel_sets[order].launches.clear()
    return kernel_sets[order]


def sample(shape, dtype, seed=0, scale=3.0):
    x = np.random.default_rng(seed).standard_normal(shape) * scale
    if x.size >= 4:   # include values where naive formulas overflow
        x.flat[:4] = [-60.0, 60.0, 0.0, -1e-3]
    return x.astype(dtype)


def check(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, **TOL[dtype])


def assert_launches(ks, expected):
    assert sum(ks.launches.values()) == expected, dict(ks.launches)


# ------------------------------------------------------------ activations
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_act_fwd(ks, name, size, dtype):
    x = sample(size, dtype)
    check(ks.act_fwd(name, x), op_forward(name, x), dtype)
    assert_launches(ks, 1 if size else 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_act_bwd(ks, name, size, batch, dtype):
    """dx = g * f'(saved); a batch of cotangents goes in one launch."""
    x = sample(size, dtype)
    saved = op_forward(name, x) if saves_output(name) else x
    g = sample(batch + (size,), dtype, seed=1, scale=1.0)
    check(ks.act_bwd(name, g, saved), op_vjp(name, g, saved), dtype)
    assert_launches(ks, 1 if size else 0)


def test_act_bwd_rejects_mismatched_cotangent(ks):
    with pytest.raises(ValueError, match=r"cotangent \(4, 3\) float32 must be batch_shape \+ \(4,\)"):
        ks.act_bwd("relu", np.zeros((4, 3), np.float32), np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="must be float32 or float64, got int64"):
        ks.act_fwd("relu", np.arange(3))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0, 5), (1, 1), (7, 33), (300, 13), (2, 3, 4)])
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_bias_act_fwd(ks, name, shape, dtype):
    x, b = sample(shape, dtype), sample(shape[-1:], dtype, seed=2)
    check(ks.bias_act_fwd(name, x, b), op_forward(name, x + b), dtype)
    assert_launches(ks, 1 if x.size else 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0, 5), (1, 1), (7, 33), (16, 3), (17, 3), (300, 13),
                                   (2, 3, 4), (3000, 1), (40, 700)])
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_bias_act_bwd(ks, name, shape, dtype):
    """dx = g * f'(saved) and db = dx summed over the rows, in one launch: a thread per
    column over at most 16 rows (numpy's bits), else shares of rows added by the last block
    (3000 x 1: 188 shares; 40 x 700: 700 columns fill the 3 blocks, one share)."""
    x = sample(shape, dtype)
    saved = op_forward(name, x) if saves_output(name) else x
    g = sample(shape, dtype, seed=1, scale=1.0)
    dx, db = ks.bias_act_bwd(name, g, saved)
    want = op_vjp(name, g, saved)
    check(dx, want, dtype)
    rows = want.reshape(-1, shape[-1])
    check(db, rows.astype(np.float64).sum(0).astype(dtype), dtype)
    if ks.column_sum_parts(*rows.shape) == 1:  # the bits of the unfused sum of dx
        np.testing.assert_array_equal(db, dx.reshape(rows.shape).sum(0))
    assert_launches(ks, 1 if x.size else 0)
    if g.size:  # NaNs reach the sums of their columns where the rule lets them through
        g.flat[::7] = np.nan
        db = ks.bias_act_bwd(name, g, saved)[1]
        want = op_vjp(name, g, saved).reshape(-1, shape[-1]).sum(0)
        np.testing.assert_array_equal(np.isnan(db), np.isnan(want))
        assert np.isnan(db).any() or name == "relu"


def test_bias_act_bwd_rejects_mismatched_cotangent(ks):
    with pytest.raises(ValueError, match=r"bias_relu_bwd: cotangent \(2, 4, 3\) float32 must "
                                         r"have the saved value's shape \(4, 3\)"):
        ks.bias_act_bwd("relu", np.zeros((2, 4, 3), np.float32), np.zeros((4, 3), np.float32))


# ------------------------------------------------------------ softmax family
ROW_SHAPES = [(0, 4), (3, 0), (1, 1), (5, 7), (4, 33), (9, 300), (2, 3, 257)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_fwd(ks, log, shape, dtype):
    x = sample(shape, dtype)
    name = "log_softmax" if log else "softmax"
    check(getattr(ks, name + "_fwd")(x), op_forward(name, x), dtype)
    assert_launches(ks, 1 if x.size else 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("shape", ROW_SHAPES)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_bwd(ks, log, shape, batch, dtype):
    x = sample(shape, dtype)
    name = "log_softmax" if log else "softmax"
    y = op_forward(name, x)
    g = sample(batch + shape, dtype, seed=1, scale=1.0)
    check(getattr(ks, name + "_bwd")(g, y), op_vjp(name, g, y), dtype)
    assert_launches(ks, 1 if g.size else 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0, 5), (1, 1), (5, 7), (9, 300)])
def test_sparse_xent(ks, shape, dtype):
    z = sample(shape, dtype)
    labels = np.random.default_rng(3).integers(0, shape[1], shape[0])
    loss, probs = ks.sparse_xent_fwd(z, labels)
    xent = "sparse_softmax_cross_entropy_with_logits"
    want_loss, (want_probs,) = op_forward(xent, labels, z)
    check(loss, want_loss, dtype)
    check(probs, want_probs, dtype)
    g = sample(shape[:1], dtype, seed=4, scale=1.0)
    check(ks.sparse_xent_bwd(g, probs, labels.astype(np.int32)),
          op_vjp(xent, g, labels, z, want_probs), dtype)
    assert_launches(ks, 2 if z.size else 0)


def test_sparse_xent_label_out_of_range_gives_nan(ks):
    z = sample((3, 4), np.float32)
    loss, probs = ks.sparse_xent_fwd(z, np.array([0, 4, -1]))
    assert np.isfinite(loss[0]) and np.isnan(loss[1:]).all()
    dz = ks.sparse_xent_bwd(np.ones(3, np.float32), probs, np.array([0, 4, -1]))
    assert np.isfinite(dz[0]).all() and np.isnan(dz[1:]).all()


# ------------------------------------------------------------ un-broadcast
UNBROADCAST = [  # (g shape, batch_ndim, in_shape, launches)
    ((4, 5), 0, (5,), 1),              # bias gradient: reduce the leading axis (sum_middle)
    ((4, 5), 0, (4, 1), 1),            # reduce the last axis (sum_last)
    ((6, 300), 0, (6, 1), 1),          # rows longer than a block
    ((2, 3, 4, 5, 6), 1, (4, 1, 6), 2),
    ((2, 3, 4, 5, 6), 1, (1, 5, 1), 2),
    ((2, 3, 4, 5, 6), 2, (), 1),       # everything but the batch axes
    ((3, 4, 5), 0, (), 1),             # to a scalar
    ((3, 4, 5), 1, (4, 5), 0),         # nothing to reduce: a copy
    ((2, 1, 5), 1, (1, 5), 0),         # size-1 axes are free
    ((7, 1000), 0, (1000,), 1),        # grid-stride over outputs
    ((2, 0, 5), 1, (1, 5), 0),         # empty reduced axis: zeros
    ((0, 4, 5), 1, (1, 5), 0),         # empty batch
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("g_shape,batch_ndim,in_shape,launches", UNBROADCAST)
def test_unbroadcast(ks, g_shape, batch_ndim, in_shape, launches, dtype):
    g = sample(g_shape, dtype)
    got = ks.unbroadcast(g, batch_ndim, in_shape)
    check(got, ref.unbroadcast(g, batch_ndim, in_shape), dtype)
    assert not np.shares_memory(got, g)
    assert_launches(ks, launches)


def test_reduction_groups():
    assert reduction_groups((2, 3, 4, 5, 6), 1, (4, 1, 6)) == [(2, False), (3, True), (4, False),
                                                               (5, True), (6, False)]
    assert reduction_groups((8, 3, 4), 1, (1, 1)) == [(8, False), (12, True)]
    with pytest.raises(ValueError, match=r"\(3,\) does not broadcast to \(4,\)"):
        reduction_groups((4,), 0, (3,))


# ------------------------------------------------------------ optimizers
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("momentum,nesterov", [(0.0, False), (0.9, False), (0.9, True)])
def test_sgd_update(ks, momentum, nesterov, size, dtype):
    p, v = sample(size, dtype), sample(size, dtype, seed=5, scale=0.1)
    want_p, want_v = p.copy(), v.copy()
    for step in range(3):
        g = sample(size, dtype, seed=10 + step, scale=1.0)
        ks.sgd_update(p, g, v, 0.1, momentum, nesterov)
        ref.sgd_update(want_p, g, want_v, dtype(0.1), dtype(momentum), nesterov)
    check(p, want_p, dtype)
    check(v, want_v, dtype)
    assert_launches(ks, 3 if size else 0)


def test_sgd_without_velocity(ks):
    p, g = np.ones(5, np.float32), np.full(5, 2.0, np.float32)
    ks.sgd_update(p, g, None, 0.25)
    np.testing.assert_array_equal(p, 0.5)
    with pytest.raises(ValueError, match="momentum needs a velocity"):
        ks.sgd_update(p, g, None, 0.25, momentum=0.9)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
def test_adam_update(ks, size, dtype):
    p = sample(size, dtype)
    m, v = np.zeros(size, dtype), np.zeros(size, dtype)
    want = [p.copy(), m.copy(), v.copy()]
    lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-7
    for t in range(1, 4):
        g = sample(size, dtype, seed=20 + t, scale=1.0)
        lr_t = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
        ks.adam_update(p, g, m, v, lr_t, b1, b2, eps)
        ref.adam_update(want[0], g, want[1], want[2], *(dtype(s) for s in (lr_t, b1, b2, eps)))
    for got, w in zip((p, m, v), want):
        check(got, w, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_a_rate_in_device_memory_gives_the_rate_by_values_bits(ks, kind, size, dtype):
    """The `_devlr` entry points (a captured graph's update: the rate a device computed, read
    through a pointer) against the rate passed by value, single and multi-tensor."""
    def run(rate, multi):
        p = sample(size, dtype)
        slots = [sample(size, dtype, seed=5, scale=0.1) for _ in range(1 if kind == "sgd" else 2)]
        slots[-1] = np.abs(slots[-1])  # (Adam's second moment)
        for step in range(3):
            g = sample(size, dtype, seed=10 + step, scale=1.0)
            r = rate(0.1 / (step + 1))
            if kind == "sgd" and multi:
                ks.sgd_multi_update([p], [g], slots, r, momentum=0.9, nesterov=True)
            elif kind == "sgd":
                ks.sgd_update(p, g, slots[0], r, momentum=0.9, nesterov=True)
            elif multi:
                ks.adam_multi_update([p], [g], [slots[0]], [slots[1]], r, 0.9, 0.999, 1e-7)
            else:
                ks.adam_update(p, g, *slots, r, 0.9, 0.999, 1e-7)
        return [p] + slots
    for multi in (False, True):
        ks.launches.clear()
        by_value = run(float, multi)
        ks.launches.clear()
        by_address = run(lambda r: np.asarray(r, dtype), multi)
        suffix = "f32" if dtype == np.float32 else "f64"
        name = f"tapegpu_{kind}{'_multi' if multi else ''}_update_devlr_{suffix}"
        assert dict(ks.launches) == ({name: 3} if size else {})
        for a, b in zip(by_value, by_address):
            assert a.tobytes() == b.tobytes()


def test_a_device_rate_must_be_a_scalar_of_the_parameters_dtype(ks):
    p = np.ones(4, np.float32)
    for bad in (np.ones(1, np.float32), np.asarray(0.1, np.float64), [0.1]):
        with pytest.raises(TypeError, match="0-d device array of the parameters' dtype"):
            ks.sgd_update(p, p.copy(), p.copy(), bad, momentum=0.9)
        with pytest.raises(TypeError, match="0-d device array"):
            ks.adam_multi_update([p], [p.copy()], [p.copy()], [p.copy()], bad, 0.9, 0.999, 1e-7)


def test_optimizer_rejects_non_contiguous_parameters(ks):
    p = np.zeros((4, 4), np.float32).T
    with pytest.raises(ValueError, match="C-contiguous"):
        ks.adam_update(p, p, p, p, 0.1, 0.9, 0.999, 1e-7)


# ------------------------------------------------------------ the launch table
@pytest.mark.parametrize("file", kernel_files())
def test_emulated_entry_points_match_the_table(file):
    module = RawModule(path=os.path.join(KERNEL_DIR, file + ".cu"))
    assert sorted(module.kernel_names) == kernel_names(file)


def test_every_activation_kernel_is_an_ops_kernel():
    """activations.cu's activations are exactly the ops that declare activation kernels."""
    declared = sorted(name for name, op in REGISTRY.items()
                      if "cuda_emu" in op.kernels and op.elementwise and op.args == ("x",))
    assert declared == sorted(ACTIVATIONS)


def test_every_kernel_file_is_in_the_table():
    files = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(KERNEL_DIR, "*.cu")))
    assert files == kernel_files()


def test_launch_counter_names_kernels(ks):
    x = np.ones(10, np.float32)
    ks.act_fwd("tanh", x)
    ks.act_fwd("tanh", x)
    ks.softmax_fwd(x.astype(np.float64))
    assert dict(ks.launches) == {"tapegpu_tanh_fwd_f32": 2, "tapegpu_softmax_fwd_f64": 1}


def test_kernels_load_only_from_the_package(tmp_path):
    """No environment variable and no `cuda_kernels/` directory elsewhere (another
    distribution's, the working directory's) can replace tapegpu's kernels."""
    import subprocess
    import sys
    import tapegpu
    fake = tmp_path / "cuda_kernels"
    fake.mkdir()
    (fake / "activations.cu").write_text("TAPEGPU_ACTIVATION(evil, float, f32)\n")
    env = dict(os.environ, TAPEGPU_KERNEL_DIR=str(fake),
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", "from tapegpu.backends import kernels; "
                        "print(kernels.KERNEL_DIR); print(kernels.ACTIVATIONS)"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    kernel_dir, activations = r.stdout.splitlines()
    package = os.path.dirname(os.path.abspath(tapegpu.__file__))
    # an install's package data, or this checkout's cuda_kernels/ beside tapegpu/ (in place)
    assert kernel_dir == KERNEL_DIR and "evil" not in activations
    assert kernel_dir in (os.path.join(package, "cuda_kernels"),
                          os.path.join(os.path.dirname(package), "cuda_kernels"))
    assert os.path.isfile(os.path.join(kernel_dir, "activations.cu"))
