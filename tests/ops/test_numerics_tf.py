"""Numerics where numpy's answer is not TensorFlow's: integer division by zero, float floor
division, the sigmoid of complex numbers, the mean of integers. Expected values come from
Python's own integers and complex numbers, or from TensorFlow's definitions (floor(x / y))."""
import cmath
import math

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.backends import checks

import cupy_sim  # tests/support (conftest puts it on the path)

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8]  # tapegpu's integer dtypes


def _floordiv_ref(x, y):
    return [a // b for a, b in zip(x, y)]  # Python's // floors, as TF's FloorDiv


def _floormod_ref(x, y):
    return [a % b for a, b in zip(x, y)]  # the sign of y, as TF's FloorMod


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.__name__)
def test_integer_floordiv_and_floormod_are_floored(dtype):
    signed = np.dtype(dtype).kind == "i"
    x = [7, -7, 7, -7, 0, 5, 100] if signed else [7, 6, 0, 5, 100, 1, 9]
    y = [2, 2, -2, -2, 3, -3, 7] if signed else [2, 4, 3, 3, 7, 9, 1]
    tx, ty = tg.constant(np.array(x, dtype)), tg.constant(np.array(y, dtype))
    assert (tx // ty).numpy().tolist() == _floordiv_ref(x, y)
    assert (tx % ty).numpy().tolist() == _floormod_ref(x, y)
    assert (tx // ty).dtype == tx.dtype


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name,fn", [("floordiv", lambda x, y: x // y),
                                     ("floormod", lambda x, y: x % y),
                                     ("floordiv", tg.math.floordiv),
                                     ("floormod", tg.math.floormod)],
                         ids=["//", "%", "floordiv", "floormod"])
def test_integer_division_by_zero_raises_as_tf(name, fn, dtype, tg_device):
    x = tg.constant(np.array([6, 4, 2], dtype))
    y = tg.constant(np.array([3, 0, 1], dtype))
    match = rf"{name}: Integer division by zero: y\[1\] is 0; integer floordiv \(//\) and " \
            r"floormod \(%\) need a nonzero divisor"
    if not checks.deferred(x._dev.xp):  # on the host (or TAPEGPU_SYNC_CHECKS=1): by the op
        with pytest.raises(tg.errors.InvalidArgumentError, match=match):
            fn(x, y)
        return
    # on a device (cuda_sim or a real GPU): queued without a sync, raised at the next read of
    # any value
    cupy_sim.stats.reset()
    out = fn(x, y)
    assert checks.pending() == 1
    if tg_device == "cuda_sim":
        assert dict(cupy_sim.stats.syncs) == {}
    with pytest.raises(tg.errors.InvalidArgumentError,
                       match=match + r".*found on the device, reported at the first read"):
        out.numpy()
    assert checks.pending() == 0


def test_integer_division_by_a_scalar_zero_and_by_broadcast_zeros(tg_device):
    x = tg.constant(np.arange(6, dtype=np.int32).reshape(2, 3))
    cases = [(lambda: x // 0, r"floordiv: Integer division by zero: y is 0"),
             (lambda: x % tg.constant(np.array([[1], [0]], np.int32)),
              r"floormod: Integer division by zero: y\[1, 0\] is 0")]
    for compute, match in cases:
        with pytest.raises(tg.errors.InvalidArgumentError, match=match):
            compute().numpy()


def test_integer_division_with_no_elements_raises_nothing(tg_device):
    empty = tg.constant(np.zeros((0, 3), np.int64))
    assert (empty // 0).shape == (0, 3)
    assert (empty % tg.constant(np.zeros(3, np.int64))).numpy().size == 0
    assert checks.pending() == 0


def test_integer_division_is_checked_only_for_integers(tg_device):
    """Floats divide by zero as IEEE says (TF: inf, -inf, nan), with no check queued."""
    x = tg.constant([5.0, -5.0, 0.0])
    out = (x // 0.0).numpy()
    assert checks.pending() == 0
    assert out[0] == math.inf and out[1] == -math.inf and math.isnan(out[2])
    assert math.isnan((x % 0.0).numpy()[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_floordiv_is_floor_of_the_quotient(dtype):
    """TF's FloorDiv on floats is floor(x / y): inf // 2 is inf (numpy's floor_divide: nan),
    and 1 // 0.1 is floor(1 / 0.1) = 10 (numpy's and Python's: 9)."""
    x = np.array([math.inf, -math.inf, 1.0, -1.0, 7.5, -7.5, 3.0], dtype)
    y = np.array([2.0, 2.0, 0.1, 0.1, 2.0, 2.0, math.inf], dtype)
    want = [math.floor(a / b) if math.isfinite(a / b) else a / b
            for a, b in zip(x.tolist(), y.tolist())]
    if dtype == np.float32:  # the quotient rounded to float32 first, as TF's kernel divides
        want = [float(np.floor(np.float32(a) / np.float32(b))) for a, b in zip(x, y)]
    got = tg.math.floordiv(tg.constant(x), tg.constant(y))
    assert got.dtype == tg.as_dtype(dtype)
    assert got.numpy().tolist() == want
    assert got.numpy()[:4].tolist() == [math.inf, -math.inf, 10.0, -10.0]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_sigmoid_of_complex_numbers_keeps_the_imaginary_part(dtype):
    zs = [1 + 2j, -3 + 0.5j, 0.25 - 4j, 0j]
    got = tg.sigmoid(tg.constant(np.array(zs, dtype)))
    assert got.dtype == tg.as_dtype(dtype)
    want = [1 / (1 + cmath.exp(-z)) for z in zs]
    tol = 1e-6 if dtype == np.complex64 else 1e-14
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
    assert abs(got.numpy()[0].imag) > 0.1


def _truncated_mean(values):
    """The mean TF computes for integers: an exact sum divided, truncating toward zero."""
    s, n = sum(values), len(values)
    if not n:
        return 0
    return -(-s // n) if s < 0 else s // n


def test_int64_mean_is_exact():
    big = [2 ** 60 + 1, 2 ** 60 + 3]
    got = tg.reduce_mean(tg.constant(np.array(big, np.int64)))
    assert got.dtype == tg.int64 and int(got) == _truncated_mean(big) == 2 ** 60 + 2
    odd = [-(2 ** 62) - 1, -(2 ** 62) - 2, 2 ** 40 + 7]
    assert int(tg.reduce_mean(tg.constant(np.array(odd, np.int64)))) == _truncated_mean(odd)


def test_int32_mean_sums_in_64_bits_as_tf():
    """TF's Mean of int8/16/32 accumulates in int64 (uint64 for unsigned): no wrap-around."""
    top = [2 ** 31 - 1] * 3
    assert int(tg.reduce_mean(tg.constant(np.array(top, np.int32)))) == 2 ** 31 - 1
    assert int(tg.reduce_mean(tg.constant(np.array([250, 251, 255], np.uint8)))) == 252


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.__name__)
def test_integer_mean_truncates_toward_zero_over_axes(dtype, tg_device):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    low, high = max(info.min, -1000), min(info.max, 1000)
    x = rng.integers(low, high, size=(3, 4, 5), endpoint=True).astype(dtype)
    t = tg.constant(x)
    for axis in (None, 0, 1, (0, 2), -1):
        got = tg.reduce_mean(t, axis=axis)
        axes = tuple(range(3)) if axis is None else \
            tuple(a % 3 for a in (axis if isinstance(axis, tuple) else (axis,)))
        moved = np.moveaxis(x, axes, tuple(range(-len(axes), 0)))
        rows = moved.reshape(moved.shape[:moved.ndim - len(axes)] + (-1,))
        want = np.array([_truncated_mean([int(v) for v in r])
                         for r in rows.reshape(-1, rows.shape[-1])]).reshape(rows.shape[:-1])
        assert got.dtype == t.dtype
        assert got.numpy().tolist() == want.tolist(), axis


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64])
def test_float_mean_has_numpys_bits_over_every_axis_set(dtype, tg_device):
    """reduce_mean of float32/float64 on numpy computes numpy's mean without its Python
    wrappers (the sum, then the division by the count): the same bits as np.mean, for every
    axis set, keepdims, 0-d results and a count past float32's integers (2**24 + 1).

    On a real GPU the mean is CuPy's: its reductions add in another order than numpy's
    pairwise sums (a tree over a block's threads), so there it equals numpy's within the
    rounding of a reordered sum, not bit for bit (the CuPy stand-in reduces with numpy)."""
    import itertools
    real_gpu = tg_device.startswith("gpu")
    rng = np.random.default_rng(3)
    for shape in [(), (7,), (3, 5), (4, 6, 5), (2**24 + 1,)]:
        x = (rng.standard_normal(shape) * 1e3).astype(dtype)
        if np.iscomplexobj(x):
            x = x + 1j * x[::-1] if x.ndim else x
        axes = [None] + [c for r in range(1, len(shape) + 1)
                         for c in itertools.combinations(range(len(shape)), r)]
        for axis, keepdims in itertools.product(axes[:3] if x.size > 1000 else axes,
                                                (False, True)):
            got = tg.reduce_mean(tg.constant(x), axis=axis, keepdims=keepdims).numpy()
            want = np.mean(x, axis=axis, keepdims=keepdims)
            assert got.dtype == want.dtype and got.shape == np.shape(want)
            if not real_gpu:
                assert got.tobytes() == np.asarray(want).tobytes(), (shape, axis, keepdims)
                continue
            # a sum of n terms in any order: within (n - 1) eps of the sum of magnitudes;
            # the division by n rounds once more
            n = x.size // max(np.size(want), 1)
            eps = np.finfo(x.real.dtype).eps
            bound = (n - 1) * eps * np.mean(np.abs(x), axis=axis, keepdims=keepdims) + \
                eps * np.abs(want)
            assert np.all(np.abs(got - want) <= bound), (shape, axis, keepdims)


def test_integer_mean_of_no_elements_is_zero(tg_device):
    got = tg.reduce_mean(tg.constant(np.zeros((0, 3), np.int32)), axis=0)
    assert got.dtype == tg.int32 and got.numpy().tolist() == [0, 0, 0]


def test_count_nonzero_of_bools_counts_true(tg_device):
    mask = np.array([[True, False, True], [False, False, True]])
    got = tg.math.count_nonzero(tg.constant(mask), axis=1)
    assert got.dtype == tg.int64 and got.numpy().tolist() == [int(r.sum()) for r in mask]
    assert int(tg.math.count_nonzero(tg.constant(mask))) == 3
