"""Sparse softmax cross-entropy's CPU kernels (tapegpu/backends/_cpu.c, `xent_*`): the forward's
and the VJP's arithmetic in one C pass each around numpy's own exp, sum and log, with the
reference's bits (nn._sparse_xent_forward and the rule's numpy form)."""
SINGLE_DEVICE = True  # the numpy backend's kernels

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.backends import cpu_kernels
from tapegpu.ops import kernels as K
from tapegpu.ops import nn as N

pytestmark = pytest.mark.skipif(cpu_kernels is None, reason="the CPU kernels are not built")


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    assert a[~np.isnan(a)].tobytes() == b[~np.isnan(b)].tobytes()


CASES = [((64, 10), 1), ((1, 1), 1), ((3, 7), 1e4), ((5, 300), 30), ((2, 3, 4), 1), ((17, 9), 1e-3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape,scale", CASES)
def test_the_kernels_give_the_references_bits(dtype, label_dtype, shape, scale):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) * scale).astype(dtype)
    if x.size > 6:   # a row with a NaN and an infinity: NaN throughout, as numpy's
        x.flat[3], x.flat[5] = np.nan, -np.inf
    labels = rng.integers(0, shape[-1], shape[:-1]).astype(label_dtype)
    loss, (probs,) = K._sparse_xent_cpu(np, labels, x)
    want_loss, (want_probs,) = N._sparse_xent_forward(np, labels, x)
    _same(loss, want_loss)
    _same(probs, want_probs)
    g = rng.standard_normal(shape[:-1]).astype(dtype)
    _, got = K._sparse_xent_numpy_vjp(g, labels, x, probs)
    want = np.array(probs)
    rows = want.reshape(-1, shape[-1])
    rows[np.arange(rows.shape[0]), labels.reshape(-1)] -= 1
    want *= g[..., None]
    _same(got, want)


def test_the_op_uses_them_and_still_refuses_a_label_out_of_range():
    x = tg.constant(np.linspace(-2, 2, 20, dtype=np.float32).reshape(2, 10))
    with tg.GradientTape() as tape:
        tape.watch(x)
        loss = tg.nn.sparse_softmax_cross_entropy_with_logits([3, 9], x)
    want, (probs,) = N._sparse_xent_forward(np, np.array([3, 9], np.int32), x.numpy())
    _same(loss.numpy(), want)
    g = tape.gradient(loss, x).numpy()
    probs[0, 3] -= 1
    probs[1, 9] -= 1
    _same(g, probs)
    with pytest.raises(Exception, match=r"label 10 is out of range \[0, 10\)"):
        tg.nn.sparse_softmax_cross_entropy_with_logits([3, 10], x)
    assert K._sparse_xent_cpu(np, np.array([3, 10], np.int32), x.numpy()) is NotImplemented


def test_what_the_kernels_do_not_take_runs_the_reference():
    x = np.linspace(-2, 2, 40, dtype=np.float32).reshape(4, 10)
    for labels, logits in [(np.array([1, 2, 3, 4], np.int16), x),       # label dtype
                           (np.arange(8, dtype=np.int32)[::2], x),       # strided labels
                           (np.array([1, 2, 3, 4], np.int32), x[:, ::2].copy().T[:4]),
                           (np.zeros(0, np.int32), np.zeros((0, 10), np.float32))]:
        assert K._sparse_xent_cpu(np, labels, logits) is NotImplemented
    with pytest.raises(TypeError, match="float32 or all float64"):
        cpu_kernels.xent_grad(x, np.zeros(4, np.int32), np.ones(4), np.empty_like(x))
    with pytest.raises(ValueError, match="argument 1 has 3 elements, not 4"):
        cpu_kernels.xent_grad(x, np.zeros(3, np.int32), np.ones(4, np.float32), np.empty_like(x))
    with pytest.raises(TypeError, match="the labels int32 or int64"):
        cpu_kernels.xent_shift(x, np.zeros(4, np.float32), np.empty_like(x),
                               np.empty((4, 2), np.float32))
    with pytest.raises(ValueError, match="label 10 is outside"):
        cpu_kernels.xent_grad(x, np.full(4, 10, np.int32), np.ones(4, np.float32),
                              np.empty_like(x))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rowsum_gives_numpys_pairwise_bits(dtype):
    """The rows' sums between exp and log: numpy's add.reduce over the last axis (its pairwise
    scheme: in order under 8, 8 running sums to 128, halves beyond), bit for bit, -0.0 rows
    summing to +0.0 as numpy's (which starts from the identity)."""
    rng = np.random.default_rng(9)
    for n in list(range(1, 140)) + [255, 256, 257, 1000, 4097, 10000]:
        x = (rng.standard_normal((3, n)) * rng.uniform(1e-3, 1e4, (3, n))).astype(dtype)
        out = np.empty(3, dtype)
        cpu_kernels.rowsum(x, out)
        assert out.tobytes() == np.add.reduce(x, axis=-1).tobytes(), n
    for n in (5, 12, 200):
        x = np.full((2, n), -0.0, dtype)
        out = np.empty(2, dtype)
        cpu_kernels.rowsum(x, out)
        assert out.tobytes() == np.add.reduce(x, axis=-1).tobytes() and not np.signbit(out).any()
    with pytest.raises(ValueError, match=r"x must be \(rows, n\) and out \(rows,\)"):
        cpu_kernels.rowsum(np.ones((4, 3), dtype), np.empty(3, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,scale", CASES + [((4, 1), 1), ((3, 1000), 10)])
def test_softmax_over_the_last_axis_keeps_numpys_bits(dtype, shape, scale):
    """softmax over the last axis on numpy (the shift by the row's max and the rows' sums by
    the CPU kernels) gives the bits of numpy's max, exp, sum and division; NaN where numpy's
    is; other axes take numpy's own steps."""
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(shape) * scale).astype(dtype)
    if x.size > 6:
        x.flat[3], x.flat[5] = np.nan, -np.inf
    x.flat[0] = -0.0
    want = np.exp(x - x.max(axis=-1, keepdims=True))
    want /= want.sum(axis=-1, keepdims=True)
    _same(N._softmax_forward(np, x), want)
    z = np.empty_like(x)
    cpu_kernels.shift(x, z)
    _same(z, x - x.max(axis=-1, keepdims=True))
    if x.ndim > 1:
        want0 = np.exp(x - x.max(axis=0, keepdims=True))
        want0 /= want0.sum(axis=0, keepdims=True)
        _same(N._softmax_forward(np, x, axis=0), want0)
    with pytest.raises(ValueError, match="out like x"):
        cpu_kernels.shift(x, np.empty(x.size + 1, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape,scale", CASES)
def test_the_grad_ops_vjp_kernel_gives_the_rules_bits(dtype, label_dtype, shape, scale,
                                                      monkeypatch):
    """sparse_softmax_cross_entropy_grad's VJP on numpy in one C pass (`xent_grad_vjp`): the
    bits of its rules' operations on numpy (the same function without the kernel), NaN and
    infinite rows included; a label out of range is refused."""
    rng = np.random.default_rng(12)
    x = (rng.standard_normal(shape) * scale).astype(dtype)
    if x.size > 6:
        x.flat[3], x.flat[5] = np.nan, -np.inf
    labels = rng.integers(0, shape[-1], shape[:-1]).astype(label_dtype)
    probs = N._softmax_forward(np, x)
    c = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal(shape[:-1]).astype(dtype)
    _, dz, dg = N._xent_grad_numpy_vjp(c, labels, x, g, probs)
    monkeypatch.setattr(N, "_XENT_GRAD_VJP", None)
    _, want_dz, want_dg = N._xent_grad_numpy_vjp(c, labels, x, g, probs)
    _same(dz, want_dz)
    _same(dg, want_dg)
    with pytest.raises(ValueError, match="label -1 is outside"):
        cpu_kernels.xent_grad_vjp(c, np.full(labels.shape, -1, label_dtype), g, probs,
                                  np.empty_like(c), np.empty_like(g))
