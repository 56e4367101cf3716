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
