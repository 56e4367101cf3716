"""Op determinism (tg.config.experimental.enable_op_determinism): on a GPU the scatters add
repeated indices in numpy's order, so their bits are numpy's at every run; traced functions
compile their kernels in the call (core/determinism.py)."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.core import determinism
from tapegpu.core.options import options
from tapegpu.ops import _base

SINGLE_DEVICE = True


def _keys(rng):
    """(out shape, key, values shape) of the scatters the ops make: rows of a table (a gather's
    gradient), a leading batch slice then ids (segment sums of batched cotangents), index
    tuples (scatter_nd), broadcast values, no index at all."""
    ids = rng.integers(0, 5, 40)
    return [((5,), (ids,), (40,)),
            ((5, 3), (ids,), (40, 3)),
            ((2, 5, 3), (slice(None), ids), (2, 40, 3)),
            ((4, 6), (rng.integers(0, 4, 30), rng.integers(0, 6, 30)), (30,)),
            ((5, 3), (ids,), (3,)),
            ((5,), (np.zeros(0, np.int64),), (0,)),
            ((7,), (np.full(25, 3),), (25,))]


def test_ordered_add_at_is_numpys_add_at_bit_for_bit():
    rng = np.random.default_rng(0)
    for shape, key, vshape in _keys(rng):
        for dtype in (np.float32, np.float64):
            # magnitudes far apart: another order of the additions rounds differently
            values = (rng.standard_normal(vshape) * 10.0 ** rng.integers(-6, 6, vshape)) \
                .astype(dtype)
            want = np.zeros(shape, dtype)
            np.add.at(want, key, values)
            got = np.zeros(shape, dtype)
            _base.ordered_add_at(np, got, key, values)
            np.testing.assert_array_equal(got, want)
            assert got.tobytes() == want.tobytes()


def test_the_order_matters_for_these_values():
    """The check above could not pass by accident: summing the same values in another order
    gives other bits."""
    values = np.array([1e8, 1.0, -1e8, 1.0], np.float32)
    key = (np.zeros(4, np.int64),)
    a = np.zeros(1, np.float32)
    _base.ordered_add_at(np, a, key, values)
    b = np.zeros(1, np.float32)
    _base.ordered_add_at(np, b, key, values[[0, 2, 1, 3]])
    assert a[0] != b[0]


@pytest.fixture
def deterministic(monkeypatch):
    monkeypatch.setattr(determinism, "_enabled", True)


def _scatters():
    """Public functions whose forward or gradient scatters with repeated indices."""
    rng = np.random.default_rng(1)
    table = rng.standard_normal((6, 4)).astype(np.float32) * 1e4
    ids = rng.integers(0, 6, 50).astype(np.int32)
    data = (rng.standard_normal((50, 4)) * 10.0 ** rng.integers(-4, 4, (50, 1))).astype(
        np.float32)

    def gather_grad():
        t = tg.constant(table)
        with tg.GradientTape() as tape:
            tape.watch(t)
            y = tg.reduce_sum(tg.gather(t, ids) * tg.constant(data))
        return tape.gradient(y, t)
    return {"gather gradient": gather_grad,
            "unsorted_segment_sum": lambda: tg.math.unsorted_segment_sum(
                tg.constant(data), tg.constant(ids), 6),
            "scatter_nd": lambda: tg.scatter_nd(tg.constant(ids[:, None]), tg.constant(data),
                                                [6, 4])}


def test_with_determinism_gpu_scatters_add_in_numpys_order(cupy_gpu, deterministic,
                                                           monkeypatch):
    ordered = []
    real = _base.ordered_add_at
    monkeypatch.setattr(_base, "ordered_add_at",
                        lambda *a: ordered.append(1) or real(*a))
    for name, fn in _scatters().items():
        with tg.device("cpu"):
            want = fn().numpy()
        ordered.clear()
        with tg.device("gpu:0"):
            got = fn()
            assert got.device.endswith("GPU:0")
            got = got.numpy()
        assert ordered, f"{name}: the GPU scatter did not take the ordered path"
        assert got.tobytes() == want.tobytes(), name


def test_without_determinism_gpu_scatters_use_the_backends_add_at(cupy_gpu, monkeypatch):
    monkeypatch.setattr(determinism, "_enabled", False)
    monkeypatch.setattr(_base, "ordered_add_at", lambda *a: pytest.fail("ordered path"))
    for fn in _scatters().values():
        with tg.device("gpu:0"):
            fn().numpy()


def test_with_determinism_traced_functions_compile_in_the_call(deterministic, monkeypatch,
                                                              tmp_path):
    from tapegpu.function import fusion
    if not options.fusion or fusion.unavailable_reason("numpy") is not None:
        pytest.skip("no fusion here")
    monkeypatch.setattr(options, "compile_in_background", True)
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(tmp_path))  # nothing cached: a compile
    monkeypatch.setattr(fusion, "_compiled", {})
    monkeypatch.setattr(fusion, "_background", None)  # a background job would fail here

    @tg.function
    def f(x):
        y = x
        for _ in range(5):
            y = tg.sin(y) * 1.25 + 0.5
        return y * y

    x = tg.constant(np.linspace(-1, 1, 64).astype(np.float32))
    f(x)
    assert getattr(f.get_concrete_function(x)._plan.graph, "fused", [])


def test_the_switch_is_tensorflows():
    assert tg.config.experimental.enable_op_determinism is determinism.enable_op_determinism
