"""TensorFlow's conversion rules for operands and layer inputs.

Numpy operands of operators and binary ops take the tensor's dtype as TF converts them
(`t * np.sqrt(2)` and `t + float64_array` stay float32; integers to integer and floating
tensors, floats to floating ones); a dtype TF cannot convert (floats for an integer tensor,
numbers for a bool one) is TF's TypeError. Numpy's operators defer to the tensor's (np_array +
tensor is a Tensor) while numpy functions read the tensor's value (`np.exp(tensor)` is a numpy
array), as TF's EagerTensor (Keras layers' autocasting: tests/keras/test_keras_autocast.py).
"""
import numpy as np
import pytest

import tapegpu as tg


def test_numpy_scalars_and_arrays_take_the_tensors_dtype(tg_device):
    t = tg.constant([1.0, 2.0])
    f64 = np.array([0.5, 0.25])
    cases = {
        "t * np.sqrt(2)": (lambda: t * np.sqrt(2), [np.sqrt(2), 2 * np.sqrt(2)]),
        "np.sqrt(2) * t": (lambda: np.sqrt(2) * t, [np.sqrt(2), 2 * np.sqrt(2)]),
        "t + float64 array": (lambda: t + f64, [1.5, 2.25]),
        "float64 array + t": (lambda: f64 + t, [1.5, 2.25]),
        "float64 array - t": (lambda: f64 - t, [-0.5, -1.75]),
        "t / np.float64": (lambda: t / np.float64(4), [0.25, 0.5]),
        "t + int64 array": (lambda: t + np.array([1, 2]), [2.0, 4.0]),
        "tg.add(t, float64 array)": (lambda: tg.add(t, f64), [1.5, 2.25]),
        "tg.maximum(float64 array, t)": (lambda: tg.maximum(f64, t), [1.0, 2.0]),
    }
    for what, (fn, want) in cases.items():
        r = fn()
        assert isinstance(r, tg.Tensor), what
        assert r.dtype == tg.float32, what
        assert r.device == t.device, what
        np.testing.assert_allclose(r.numpy(), np.float32(want), rtol=1e-6, err_msg=what)
    assert f64.dtype == np.float64 and f64.tolist() == [0.5, 0.25]  # the caller's, untouched
    i = tg.constant([1, 2])
    r = i * np.int64(3) + np.array([1, 1], np.int64)
    assert r.dtype == tg.int32 and r.numpy().tolist() == [4, 7]
    c = tg.constant([1 + 1j], tg.complex64)
    assert (c * np.float64(2)).dtype == tg.complex64
    v = tg.Variable([1.0, 2.0])
    assert (v * np.sqrt(2)).dtype == tg.float32 and (np.float64(1) - v).dtype == tg.float32
    assert (f64 == t).dtype == tg.bool


def test_numpy_operands_tf_cannot_convert_raise_type_error():
    i = tg.constant([1, 2])
    with pytest.raises(TypeError, match=r"add: .*numpy operand of dtype float64 and shape "
                                        r"\(2,\) to the tensor's dtype int32"):
        i + np.array([1.5, 2.0])
    with pytest.raises(TypeError, match="multiply: .*float64.*int32"):
        np.float64(1.5) * i
    with pytest.raises(TypeError, match="bool"):
        tg.constant([True]) & np.array([1])
    with pytest.raises(TypeError, match="complex128.*float32"):
        tg.constant([1.0]) + np.array([1j])


def test_gradients_flow_through_numpy_operands():
    x = tg.constant([1.0, 2.0])
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.reduce_sum(np.array([2.0, 3.0]) * x * np.sqrt(4.0))
    g = tape.gradient(y, x)
    assert g.dtype == tg.float32 and g.numpy().tolist() == [4.0, 6.0]


def test_numpy_functions_on_tensors_return_numpy_as_eager_tensors(tg_device):
    t = tg.constant([0.0, 1.0])
    e = np.exp(t)
    assert type(e) is np.ndarray and e.dtype == np.float32
    np.testing.assert_array_equal(e, np.exp(np.float32([0.0, 1.0])))
    assert type(np.add(t, t)) is np.ndarray
    assert np.sum(t) == 1.0 and np.mean(tg.Variable([1.0, 3.0])) == 2.0
    assert type(np.sin(tg.Variable([0.0]))) is np.ndarray
    assert np.allclose(np.linalg.norm(t), 1.0)
    assert t.numpy().tolist() == [0.0, 1.0]


def test_nested_lists_holding_tensors_convert_to_a_differentiable_stack(tg_device):
    """TF's autopacking: a list (at any depth) holding tensors is the stack of its elements,
    with gradients to each tensor; Python numbers beside them take the tensors' dtype."""
    x = tg.constant(2.0)
    with tg.GradientTape() as tape:
        tape.watch(x)
        m = tg.convert_to_tensor([[x, 3.0 * x], [x * x, 1.0]])
        y = tg.reduce_sum(m * tg.constant([[1.0, 10.0], [100.0, 1000.0]]))
    assert m.shape == (2, 2) and m.dtype == tg.float32 and m.device == x.device
    np.testing.assert_array_equal(m.numpy(), [[2.0, 6.0], [4.0, 1.0]])
    assert float(tape.gradient(y, x)) == 1.0 + 30.0 + 100.0 * 2 * 2.0
    # a list with tensors only below its first level, and a tuple
    np.testing.assert_array_equal(tg.convert_to_tensor([[x], (x,)]).numpy(), [[2.0], [2.0]])
    assert tg.convert_to_tensor([1, 2]).dtype == tg.int32  # no tensor inside: numpy's route


class _Meters:
    def __init__(self, value):
        self.value = value


class _Feet(_Meters):
    pass


def test_register_tensor_conversion_function_as_tensorflow():
    """Registered functions convert a type's instances for convert_to_tensor and every op,
    smaller priority first, then in order of registration; NotImplemented passes to the next;
    a non-tensor or a wrong dtype is TF's RuntimeError, naming the function."""
    from tapegpu.core import tensor as core_tensor
    saved = list(core_tensor._CONVERSIONS)
    calls = []

    def meters(value, dtype=None, name=None, as_ref=False):
        calls.append("meters")
        return tg.constant(value.value, dtype=dtype or tg.float32)

    def feet_only(value, dtype=None, name=None, as_ref=False):
        calls.append("feet")
        if not isinstance(value, _Feet):
            return NotImplemented
        return tg.constant(value.value * 0.3048, dtype=dtype or tg.float32)

    try:
        tg.register_tensor_conversion_function(_Meters, meters)
        tg.register_tensor_conversion_function(_Meters, feet_only, priority=10)
        r = tg.add(_Meters(2.0), 1.0)
        assert isinstance(r, tg.Tensor) and float(r) == 3.0
        assert calls == ["feet", "meters"]  # priority 10 first; it declined
        calls.clear()
        np.testing.assert_allclose(float(tg.convert_to_tensor(_Feet(10.0))), 3.048, rtol=1e-6)
        assert calls == ["feet"]
        assert tg.convert_to_tensor(_Meters(1), dtype=tg.float64).dtype == tg.float64

        tg.register_tensor_conversion_function(
            _Meters, lambda v, dtype=None, name=None, as_ref=False: v.value, priority=1)
        with pytest.raises(RuntimeError, match="convert_to_tensor.*_Meters.*not a Tensor"):
            tg.convert_to_tensor(_Meters(1.0))
    finally:
        core_tensor._CONVERSIONS[:] = saved
    tg.register_tensor_conversion_function(
        _Feet, lambda v, dtype=None, name=None, as_ref=False: tg.constant(1, tg.int32))
    try:
        with pytest.raises(RuntimeError, match="returned dtype int32, requested float32"):
            tg.convert_to_tensor(_Feet(1.0), dtype=tg.float32)
    finally:
        core_tensor._CONVERSIONS[:] = saved
    with pytest.raises(TypeError, match="Python numeric types and NumPy"):
        tg.register_tensor_conversion_function(np.ndarray, meters)
    with pytest.raises(TypeError, match="Python numeric types and NumPy"):
        tg.register_tensor_conversion_function((_Meters, float), meters)
    with pytest.raises(TypeError, match="must be a type or a tuple of types"):
        tg.register_tensor_conversion_function("Meters", meters)
    with pytest.raises(TypeError, match="conversion_func must be callable"):
        tg.register_tensor_conversion_function(_Meters, 3)
    assert core_tensor._CONVERSIONS == saved


def test_name_of_is_each_dtypes_name_read_once(monkeypatch):
    """dtypes.name_of caches numpy's dtype.name (computed in Python at every read by numpy 2):
    the same strings for every dtype tapegpu holds, bfloat16 and byte orders included."""
    import ml_dtypes
    from tapegpu.core import dtypes
    monkeypatch.setattr(dtypes, "_NAMES", {})
    kinds = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64, np.float16, np.float32,
             np.float64, np.complex64, np.complex128, ml_dtypes.bfloat16]
    for kind in kinds:
        d = np.dtype(kind)
        assert dtypes.name_of(d) == d.name
        assert dtypes.name_of(d.newbyteorder()) == d.newbyteorder().name
    assert len(dtypes._NAMES) <= 2 * len(kinds)
    assert dtypes.name_of(np.dtype(np.float32)) is dtypes.name_of(np.dtype("float32"))
