"""The small steps of a dense layer's backward on `numpy` (the sweep's bias gradient by the CPU
kernel `colsum`, a loss's mean and its VJP without numpy's wrappers): numpy's bits, and the
general path wherever the fast one does not apply."""
SINGLE_DEVICE = True  # the numpy backend's kernels

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.autodiff import sweep
from tapegpu.backends import cpu_kernels
from tapegpu.core.options import options
from tapegpu.ops import kernels as K

needs_kernels = pytest.mark.skipif(cpu_kernels is None, reason="the CPU kernels are not built")


def _bits(a):
    return np.asarray(a).tobytes()


@needs_kernels
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 256), (64, 10), (1, 5), (3, 2), (1000, 3), (5, 4097)])
def test_colsum_gives_numpys_bits(dtype, shape):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(shape) * rng.uniform(1e-3, 1e4, shape)).astype(dtype)
    out = np.empty(shape[1], dtype)
    cpu_kernels.colsum(x, out)
    assert _bits(out) == _bits(np.add.reduce(x, axis=0))


@needs_kernels
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_colsum_keeps_numpys_zeros_infinities_and_nans(dtype):
    x = np.array([[-0.0, -0.0, np.inf, np.inf, 1.0, np.nan],
                  [-0.0, 0.0, -np.inf, 1.0, -1.0, 2.0],
                  [-0.0, -0.0, 3.0, np.inf, -0.0, 3.0]], dtype)
    out = np.empty(6, dtype)
    cpu_kernels.colsum(x, out)
    with np.errstate(invalid="ignore"):  # inf - inf
        want = np.add.reduce(x, axis=0)  # -0.0 columns sum to +0.0: numpy starts from 0
    assert _bits(out) == _bits(want)
    assert not np.signbit(out[0])


@needs_kernels
def test_colsum_refuses_what_it_does_not_take():
    x = np.ones((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"x must be \(rows, n\) and out \(n,\)"):
        cpu_kernels.colsum(x, np.empty(5, np.float32))
    with pytest.raises(TypeError, match="float32 or all float64"):
        cpu_kernels.colsum(x, np.empty(3, np.float64))
    with pytest.raises(TypeError, match="takes 2 arrays"):
        cpu_kernels.colsum(x)
    def first(x):
        return K.cpu_sum(x, (0,), False)
    assert first(np.ones((4, 1), np.float32)) is None       # one column: numpy's pairwise
    assert first(np.ones((4, 3), np.float32)[:, ::2]) is None  # not contiguous
    assert first(np.ones((2, 4, 3), np.float32)) is None    # not a matrix
    assert first(np.ones((4, 3), np.complex64)) is None


def _dense(x, w, b):
    xt, wt, bt = tg.constant(x), tg.constant(w), tg.constant(b)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch([wt, bt])
        z = tg.matmul(xt, wt) + bt
        y = tg.tanh(z)
    return tape, z, y, bt


@needs_kernels
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7])
def test_a_bias_gradient_is_the_sum_of_the_rows_by_the_kernel(dtype, n, monkeypatch):
    """The sweep sums a dense layer's cotangent over its rows by `colsum` (once per layer) with
    numpy's bits; a single column takes numpy's sum (pairwise); a Jacobian's batched
    cotangents are summed over the right axis."""
    calls = []
    kernel = K._COLSUM
    monkeypatch.setattr(K, "_COLSUM", lambda *a: calls.append(1) or kernel(*a))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((33, 6)).astype(dtype)
    w = rng.standard_normal((6, n)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    tape, z, y, bt = _dense(x, w, b)
    u = tg.constant(rng.standard_normal(y.shape).astype(dtype))
    gz, gb = tape.gradient(y, [z, bt], output_gradients=u)
    assert _bits(gb.numpy()) == _bits(np.add.reduce(gz.numpy(), axis=0))
    np.testing.assert_allclose(gb.numpy(), (u.numpy() * (1 - np.tanh(x @ w + b) ** 2)).sum(0),
                               rtol=1e-4)
    assert len(calls) == (1 if n > 1 else 0)
    us = rng.standard_normal((4,) + y.shape).astype(dtype)
    jac = tape.batched_gradient(y, bt, tg.constant(us)).numpy()
    for k in range(4):
        one = tape.gradient(y, bt, output_gradients=tg.constant(us[k])).numpy()
        np.testing.assert_allclose(jac[k], one, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("shape,axis,keepdims", [((5, 7), None, False), ((64,), None, False),
                                                 ((5, 7), None, True), ((5, 7), 1, False),
                                                 ((), None, False)])
def test_the_mean_vjp_on_arrays_equals_the_rule_on_tensors(dtype, shape, axis, keepdims,
                                                            monkeypatch):
    """A loss's mean (every axis, a 0-d cotangent) has its VJP filled in one product, the
    rule's: the array sweep's bits equal the tensor sweep's, for every axis form."""
    rng = np.random.default_rng(2)
    x = tg.constant(rng.standard_normal(shape).astype(dtype))
    g = tg.constant(np.asarray(rng.standard_normal(), dtype) * 3)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tg.reduce_mean(x * 1.5, axis=axis, keepdims=keepdims)
    og = tg.constant(np.broadcast_to(g.numpy(), y.shape).copy())
    fast = tape.gradient(y, x, output_gradients=og).numpy()
    monkeypatch.setattr(options, "array_sweep", False)
    plain = tape.gradient(y, x, output_gradients=og).numpy()
    assert fast.dtype == plain.dtype and _bits(fast) == _bits(plain)
    n = max(int(np.prod(shape)) // int(np.prod(y.shape) or 1), 1)
    np.testing.assert_allclose(fast, np.broadcast_to(og.numpy().reshape(
        y.shape if keepdims or axis is None else y.shape + (1,)) * 1.5 / n, shape),
        rtol=1e-6)


def test_sum_to_without_the_kernel_keeps_numpys_sum(monkeypatch):
    """The general un-broadcast (numpy's add.reduce) where the kernel is absent: same bits."""
    monkeypatch.setattr(K, "_COLSUM", None)
    c = np.random.default_rng(1).standard_normal((9, 4)).astype(np.float32)
    ns = sweep.array_ops(tg.constant(0.0)._dev, sweep.TENSOR_OPS)
    got = sweep.sum_to(ns, c, 0, (4,))
    assert _bits(got) == _bits(np.add.reduce(c, axis=0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduce_sum_and_mean_have_numpys_bits_over_every_axis_set(dtype, monkeypatch):
    """reduce_sum and reduce_mean on numpy (by the CPU kernels for every axis, the last, or
    the first of a matrix): np.sum's and np.mean's bits for every axis set and keepdims, on
    contiguous and strided arrays; the kernels run for the axis sets they cover."""
    import itertools
    calls = []
    for name in ("_ROWSUM", "_COLSUM"):
        kernel = getattr(K, name)
        if kernel is not None:
            monkeypatch.setattr(K, name, lambda *a, k=kernel: calls.append(1) or k(*a))
    rng = np.random.default_rng(4)
    for shape in [(5,), (784, 256), (64, 10), (4, 6, 5), (3, 1), (1, 7), (9, 200)]:
        base = tg.constant((rng.standard_normal(shape) * 1e3).astype(dtype))
        for t in (base, tg.transpose(base)):  # (a transpose: a strided view on numpy)
            x = t._data
            axes = [None] + [c for r in range(1, x.ndim + 1)
                             for c in itertools.combinations(range(x.ndim), r)]
            for axis, keepdims in itertools.product(axes, (False, True)):
                for fn, ref in ((tg.reduce_sum, np.sum), (tg.reduce_mean, np.mean)):
                    got = fn(t, axis=axis, keepdims=keepdims).numpy()
                    want = ref(x, axis=axis, keepdims=keepdims)
                    assert got.shape == np.shape(want) and got.dtype == want.dtype
                    assert _bits(got) == _bits(want), (fn.__name__, shape, axis, keepdims)
    for shape in [(3, 1), (1, 7), (2, 1, 4), (5,)]:  # -0.0 everywhere: numpy's sums give +0.0
        x = np.full(shape, -0.0, dtype)
        for axis in [None] + list(range(len(shape))):
            got = tg.reduce_sum(tg.constant(x), axis=axis).numpy()
            assert _bits(got) == _bits(np.sum(x, axis=axis)), (shape, axis)
    assert calls or cpu_kernels is None


def test_a_dot_products_cotangent_is_the_other_factor_and_leaves_it_as_it_was():
    # reduce_sum(w * v) from the seed: the product's cotangent spreads a single 1, so it is the
    # other factor itself (1 * v is v, -0.0 and nan included); a second contribution to the
    # same source is then added into a new buffer, never into v's
    rng = np.random.default_rng(3)
    vn = rng.standard_normal((4, 5)).astype(np.float32)
    vn[0, :3] = [-0.0, np.nan, np.inf]
    v, v2 = tg.constant(vn), tg.constant(rng.standard_normal((4, 5)).astype(np.float32))
    before = vn.copy()
    w = tg.constant(rng.standard_normal((4, 5)).astype(np.float32))
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(w)
        one = tg.reduce_sum(w * v)
        two = one + tg.reduce_sum(v2 * w)
    g1 = tape.gradient(one, w)
    assert _bits(g1) == _bits(vn)
    assert np.shares_memory(g1._data, v._data)  # no product computed
    for t in (tape, tg.GradientTape()):
        if t is not tape:
            with t:
                t.watch(w)
                two = tg.reduce_sum(w * v) + tg.reduce_sum(v2 * w)
        g2 = t.gradient(two, w)
        np.testing.assert_array_equal(g2.numpy(), vn + v2.numpy())
        assert not np.shares_memory(g2._data, v._data)
        assert _bits(v._data) == _bits(before)  # v itself was not accumulated into


def test_a_spread_cotangent_other_than_one_is_multiplied():
    w = tg.constant([[1.0, 2.0], [3.0, 4.0]])
    v = tg.constant([[5.0, 6.0], [7.0, 8.0]])
    with tg.GradientTape() as tape:
        tape.watch(w)
        y = tg.reduce_sum(w * v)
    g = tape.gradient(y, w, output_gradients=tg.constant(2.0))
    np.testing.assert_array_equal(g.numpy(), 2.0 * v.numpy())
    assert not np.shares_memory(g._data, v._data)


def test_an_empty_dot_product_has_an_empty_gradient():
    w, v = tg.zeros((0, 3)), tg.zeros((0, 3))
    with tg.GradientTape() as tape:
        tape.watch(w)
        y = tg.reduce_sum(w * v)
    assert tape.gradient(y, w).shape == (0, 3)


@pytest.mark.parametrize("a, shape", [
    (np.array(2.5, np.float32), (3, 4)), (np.arange(4.0).reshape(1, 4), (3, 4)),
    (np.arange(3.0).reshape(3, 1), (3, 4)), (np.array(1.0), ()),
    (np.arange(6.0).reshape(2, 1, 3), (2, 5, 3)), (np.zeros((0, 1)), (0, 4)),
    (np.arange(8.0).reshape(2, 4)[:, ::2][:1], (3, 2))])  # (the last not contiguous)
def test_a_sums_spread_cotangent_is_numpys_broadcast_view(a, shape):
    from tapegpu.ops.reduce import _spread
    view, want = _spread(a, shape), np.broadcast_to(a, shape)
    assert view.shape == want.shape and view.strides == want.strides
    assert _bits(view) == _bits(want) and not view.flags.writeable
    assert np.shares_memory(view, a) or not a.size


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_a_losss_mean_vjp_is_the_rules_product_for_every_cotangent_and_count(dtype):
    from tapegpu.ops.reduce import _mean_numpy_vjp
    rng = np.random.default_rng(9)
    info = np.finfo(dtype)
    gs = [*(rng.standard_normal(200) * 10.0 ** rng.integers(-6, 6, 200)), 0.0, -0.0, np.inf,
          -np.inf, np.nan, float(info.max), float(info.tiny), float(info.smallest_subnormal)]
    for g in gs:
        for n in (1, 3, 7, 10, 64, 100, 1000, 12345):
            with np.errstate(all="ignore"):
                ga = np.asarray(g, dtype)  # (inf where float16 cannot hold g)
                want = np.broadcast_to(ga, (n,)) * (1.0 / n)  # the rule's operations
            got = _mean_numpy_vjp(ga, (n,), (0,), False)
            assert got.dtype == want.dtype and _bits(got) == _bits(want), (g, n)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_losss_mean_is_numpys_for_every_size_and_magnitude(dtype):
    # the whole-array mean: the kernel's sum divided on Python floats and rounded into a 0-d
    # array, numpy's division in float64 then rounded to the dtype
    rng = np.random.default_rng(12)
    for n in (1, 2, 3, 7, 10, 63, 64, 100, 999, 4097):
        for scale in (1e-30, 1e-3, 1.0, 7e3, 1e30):
            x = (rng.standard_normal(n) * scale).astype(dtype)
            got = tg.reduce_mean(tg.constant(x))._data
            assert type(got) is np.ndarray and got.shape == ()
            assert _bits(got) == _bits(np.mean(x)), (n, scale)
