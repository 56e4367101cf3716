"""tg.py_function: TensorFlow's semantics (func of tensors, inp, Tout, decorator form), gradients
through the tapegpu ops func runs, outputs converted to Tout, TF's error mapping."""
import math

import numpy as np
import pytest

import tapegpu as tg


def log_huber(x, m):
    if tg.abs(x) <= m:
        return x ** 2
    return m ** 2 * (1 - 2 * tg.math.log(m) + tg.math.log(x ** 2))


def test_tf_documented_log_huber_example():
    x, m = tg.constant(1.0), tg.constant(2.0)
    with tg.GradientTape() as t:
        t.watch([x, m])
        y = tg.py_function(func=log_huber, inp=[x, m], Tout=tg.float32)
    assert float(y) == 1.0 and y.dtype == tg.float32
    assert float(t.gradient(y, x)) == 2.0


def test_gradients_follow_the_branch_taken():
    """Past the threshold: y = m^2 (1 - 2 log m + log x^2), so dy/dx = 2 m^2 / x and
    dy/dm = 2 m (1 - 2 log m + log x^2) - 2 m."""
    xv, mv = 3.0, 2.0
    x, m = tg.constant(xv, dtype=tg.float64), tg.constant(mv, dtype=tg.float64)
    with tg.GradientTape() as t:
        t.watch([x, m])
        y = tg.py_function(log_huber, [x, m], tg.float64)
    dx, dm = t.gradient(y, [x, m])
    assert float(y) == pytest.approx(mv ** 2 * (1 - 2 * math.log(mv) + math.log(xv ** 2)))
    assert float(dx) == pytest.approx(2 * mv ** 2 / xv)
    assert float(dm) == pytest.approx(2 * mv * (1 - 2 * math.log(mv) + math.log(xv ** 2)) - 2 * mv)


def test_several_outputs_variables_and_python_values():
    v = tg.Variable([1.0, 2.0])

    def f(a, b):
        return [tg.reduce_sum(a * b), a * 3.0, 7]

    with tg.GradientTape(persistent=True) as t:
        s, triple, seven = tg.py_function(f, [v, tg.constant([10.0, 20.0])],
                                          [tg.float32, tg.float32, tg.int64])
    assert float(s) == 50.0 and seven.dtype == tg.int64 and int(seven) == 7
    np.testing.assert_array_equal(t.gradient(s, v).numpy(), [10.0, 20.0])
    np.testing.assert_array_equal(t.gradient(triple, v).numpy(), [3.0, 3.0])
    assert t.gradient(seven, v) is None


def test_values_that_leave_through_numpy_have_no_gradient():
    x = tg.constant([1.0, 2.0])
    with tg.GradientTape() as t:
        t.watch(x)
        y = tg.py_function(lambda a: np.sum(a.numpy() ** 2), [x], tg.float32)
    assert float(y) == 5.0
    assert t.gradient(y, x) is None


def test_decorator_form_and_empty_tout():
    @tg.py_function(Tout=tg.float32)
    def square_plus(x, c):
        return x * x + c

    x = tg.constant(3.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = square_plus(x, tg.constant(1.0))
    assert float(y) == 10.0 and float(t.gradient(y, x)) == 6.0
    seen = []
    assert tg.py_function(lambda a: seen.append(float(a)), [tg.constant(4.0)], []) == []
    assert seen == [4.0]


def test_outputs_must_have_their_tout_dtype():
    with pytest.raises(tg.errors.InvalidArgumentError, match="float64 tensor but Tout says "
                                                             "float32"):
        tg.py_function(lambda: tg.constant(1.0, dtype=tg.float64), [], tg.float32)
    with pytest.raises(tg.errors.InvalidArgumentError, match="Tout lists 2 outputs"):
        tg.py_function(lambda: tg.constant(1.0), [], [tg.float32, tg.float32])
    with pytest.raises(tg.errors.InvalidArgumentError, match="output 0 is None"):
        tg.py_function(lambda: None, [], tg.float32)
    assert tg.py_function(lambda: 2, [], tg.float32).dtype == tg.float32


def test_errors_map_as_in_tensorflow():
    def raises(exc):
        def f():
            raise exc
        return f

    with pytest.raises(tg.errors.InvalidArgumentError, match="ValueError: bad") as info:
        tg.py_function(raises(ValueError("bad")), [], tg.float32)
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(tg.errors.OutOfRangeError, match="StopIteration"):
        tg.py_function(raises(StopIteration()), [], tg.float32)
    with pytest.raises(tg.errors.UnknownError, match="ZeroDivisionError"):
        tg.py_function(lambda: 1 / 0, [], tg.float32)
    with pytest.raises(tg.errors.NotFoundError, match="gone"):
        tg.py_function(raises(tg.errors.NotFoundError("gone")), [], tg.float32)
    with pytest.raises(TypeError, match="inp must be a list"):
        tg.py_function(lambda a: a, tg.constant(1.0), tg.float32)
    with pytest.raises(TypeError, match="Tout is required"):
        tg.py_function(lambda: 1.0, [])
    with pytest.raises(TypeError, match="needs Tout"):
        tg.py_function()


def test_inside_tg_function_and_dataset_map():
    """Inside tg.function, func's ops are traced; a branch on a value (a guard) retraces, so
    each call takes the branch of its own input. In Dataset.map it runs per element."""
    def branch(x):
        return x * 2.0 if float(tg.reduce_sum(x)) > 0 else -x

    @tg.function
    def g(x):
        return tg.py_function(branch, [x], tg.float32)

    assert [float(g(tg.constant([v]))[0]) for v in (1.0, -1.0, 3.0)] == [2.0, 1.0, 6.0]
    ds = tg.data.Dataset.from_tensor_slices([1.0, 2.0, 3.0]).map(
        lambda x: tg.py_function(lambda v: v * 10.0, [x], tg.float32))
    assert [float(e) for e in ds] == [10.0, 20.0, 30.0]
