"""tg.TensorArray: TensorFlow's loop accumulator, eagerly, under a tape, in tg.while_loop and
in tg.function traces."""
import numpy as np
import pytest

import tapegpu as tg


def test_write_read_stack_size_and_dynamic_growth():
    ta = tg.TensorArray(tg.float32, size=0, dynamic_size=True, clear_after_read=False)
    for i, v in enumerate([10.0, 20.0, 30.0]):
        ta = ta.write(i, v)
    assert [float(ta.read(i)) for i in range(3)] == [10.0, 20.0, 30.0]
    assert ta.stack().numpy().tolist() == [10.0, 20.0, 30.0]
    assert ta.stack().dtype == tg.float32
    assert int(ta.size()) == 3 and ta.size().dtype == tg.int32
    ta = ta.write(tg.constant(5), 60.0)  # a tensor index; growing leaves 3 and 4 unwritten
    assert ta.stack().numpy().tolist() == [10.0, 20.0, 30.0, 0.0, 0.0, 60.0]
    assert ta.element_shape == ()


def test_tf_errors_for_bad_writes():
    ta = tg.TensorArray(tg.float32, size=2, element_shape=[3])
    with pytest.raises(tg.errors.OutOfRangeError, match="not resizeable"):
        ta.write(2, tg.zeros(3))
    with pytest.raises(tg.errors.OutOfRangeError, match="negative"):
        ta.write(-1, tg.zeros(3))
    with pytest.raises(tg.errors.InvalidArgumentError, match="dtype is float32.*int32"):
        ta.write(0, tg.constant([1, 2, 3]))
    with pytest.raises(ValueError, match="incompatible shape"):
        ta.write(0, tg.zeros(4))
    ta.write(0, tg.ones(3))
    with pytest.raises(tg.errors.InvalidArgumentError, match="already been written"):
        ta.write(0, tg.ones(3))
    with pytest.raises(ValueError, match="size must be declared"):
        tg.TensorArray(tg.float32)
    with pytest.raises(TypeError, match="index must be an int"):
        ta.read(0.5)


def test_clear_after_read_and_unwritten_elements():
    ta = tg.TensorArray(tg.float32, size=3)
    ta = ta.write(0, tg.constant([1.0, 2.0]))
    assert ta.read(0).numpy().tolist() == [1.0, 2.0]
    with pytest.raises(tg.errors.InvalidArgumentError, match="read index 0 twice"):
        ta.read(0)
    assert ta.read(2).numpy().tolist() == [0.0, 0.0]  # never written: zeros of the known shape
    with pytest.raises(tg.errors.InvalidArgumentError, match="cleared"):
        ta.stack()  # TF's eager stack would give zeros for the cleared element
    with pytest.raises(tg.errors.OutOfRangeError, match="size is 3"):
        ta.read(3)
    unknown = tg.TensorArray(tg.float32, size=2)
    with pytest.raises(tg.errors.InvalidArgumentError, match="never written"):
        unknown.read(1)
    keep = tg.TensorArray(tg.float32, size=1, clear_after_read=False).write(0, 4.0)
    assert float(keep.read(0)) == float(keep.read(0)) == 4.0


def test_unstack_scatter_gather_split_concat():
    x = tg.constant(np.arange(12, dtype=np.float32).reshape(4, 3))
    ta = tg.TensorArray(tg.float32, size=4, clear_after_read=False).unstack(x)
    np.testing.assert_array_equal(ta.stack().numpy(), x.numpy())
    np.testing.assert_array_equal(ta.gather([3, 1]).numpy(), x.numpy()[[3, 1]])
    np.testing.assert_array_equal(ta.gather(tg.constant([2])).numpy(), x.numpy()[[2]])
    np.testing.assert_array_equal(ta.concat().numpy(), x.numpy().reshape(-1))
    with pytest.raises(ValueError, match="cannot unstack 4 tensors.*static size 2"):
        tg.TensorArray(tg.float32, size=2).unstack(x)
    sc = tg.TensorArray(tg.float32, size=5).scatter([4, 0], x[:2])
    np.testing.assert_array_equal(sc.stack().numpy()[[4, 0]], x.numpy()[:2])
    assert sc.stack().numpy()[1:4].sum() == 0
    sp = tg.TensorArray(tg.float32, size=2, infer_shape=False).split(tg.range(5.0), [2, 3])
    assert sp.read(1).numpy().tolist() == [2.0, 3.0, 4.0]
    with pytest.raises(tg.errors.InvalidArgumentError, match="add up to 4"):
        tg.TensorArray(tg.float32, size=2).split(tg.range(5.0), [1, 3])
    scalars = tg.TensorArray(tg.float32, size=1).write(0, 1.0)
    with pytest.raises(tg.errors.InvalidArgumentError, match="scalar shape at index 0"):
        scalars.concat()
    empty = tg.TensorArray(tg.float32, size=0, element_shape=[2])
    assert empty.stack().shape == (0, 2)
    with pytest.raises(tg.errors.InvalidArgumentError, match="not fully defined"):
        tg.TensorArray(tg.float32, size=0).stack()


def test_gradients_flow_through_writes_reads_and_stack():
    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as tape:
        tape.watch(x)
        ta = tg.TensorArray(tg.float32, size=3, clear_after_read=False).unstack(x * x)
        y = tg.reduce_sum(ta.read(1) * ta.stack())  # x1^2 * (x0^2 + x1^2 + x2^2)
    g = tape.gradient(y, x).numpy()
    x0, x1, x2 = 1.0, 2.0, 3.0
    want = [2 * x0 * x1 ** 2, 2 * x1 * (x0 ** 2 + x1 ** 2 + x2 ** 2) + 2 * x1 * x1 ** 2,
            2 * x2 * x1 ** 2]
    np.testing.assert_allclose(g, want, rtol=1e-6)


def _accumulate(x, n):
    ta = tg.TensorArray(tg.float32, size=0, dynamic_size=True)

    def body(i, ta):
        return i + 1, ta.write(i, tg.sin(x) * tg.cast(i, tg.float32))
    _, ta = tg.while_loop(lambda i, ta: i < n, body, (tg.constant(0), ta))
    return ta.stack()


def test_while_loop_accumulator_inside_tg_function_matches_eager_without_guards():
    traced = tg.function(lambda x: _accumulate(x, 4))
    x = tg.constant([0.5, 1.0, 2.0])
    for v in (x, x + 1.0):
        np.testing.assert_array_equal(traced(v).numpy(), _accumulate(v, 4).numpy())
    assert traced.experimental_get_tracing_count() == 1
    graph = str(traced.get_concrete_function(x).graph)
    # the loop counter and condition are computed from constants: folded, no guard
    assert "guard" not in graph and "less" not in graph
    assert graph.count("sin(") == 1  # CSE: the four sin(x) are one


def test_gradient_through_an_accumulator_in_a_traced_training_step():
    x = tg.Variable([0.5, 1.0])

    @tg.function
    def step():
        with tg.GradientTape() as tape:
            loss = tg.reduce_sum(_accumulate(x, 3) ** 2)
        return tape.gradient(loss, x)

    with tg.GradientTape() as tape:
        loss = tg.reduce_sum(_accumulate(x, 3) ** 2)
    want = tape.gradient(loss, x).numpy()
    np.testing.assert_allclose(step().numpy(), want, rtol=1e-6)
    x.assign([1.5, -1.0])
    with tg.GradientTape() as tape:
        loss = tg.reduce_sum(_accumulate(x, 3) ** 2)
    np.testing.assert_allclose(step().numpy(), tape.gradient(loss, x).numpy(), rtol=1e-6)
    assert step.experimental_get_tracing_count() == 1


def test_a_trip_count_from_an_argument_is_guarded_one_graph_per_count():
    @tg.function
    def f(x, n):
        return _accumulate(x, n)

    x = tg.constant([1.0])
    assert f(x, tg.constant(2)).shape == (2, 1)
    assert f(x, tg.constant(3)).shape == (3, 1)  # the guard on `i < n` fails: a retrace
    assert f(x, tg.constant(2)).shape == (2, 1)  # both graphs kept
    assert f.experimental_get_tracing_count() == 2


def test_fibonacci_example_of_tf_docs():
    @tg.function
    def fibonacci(n):
        ta = tg.TensorArray(tg.float32, size=0, dynamic_size=True)
        ta = ta.unstack([0.0, 1.0])
        for i in range(2, n):
            ta = ta.write(i, ta.read(i - 1) + ta.read(i - 2))
        return ta.stack()

    assert fibonacci(7).numpy().tolist() == [0.0, 1.0, 1.0, 2.0, 3.0, 5.0, 8.0]


def test_a_tensor_array_cannot_cross_the_function_boundary():
    @tg.function
    def make(x):
        return tg.TensorArray(tg.float32, size=1).write(0, x)

    with pytest.raises(TypeError, match="make: a tg.TensorArray cannot be returned.*stack"):
        make(tg.constant(1.0))

    @tg.function
    def take(ta):
        return ta.stack()

    with pytest.raises(TypeError, match="take: a tg.TensorArray cannot be an argument"):
        take(tg.TensorArray(tg.float32, size=1).write(0, 1.0))


def test_tf_function_api_example_collects_in_a_tensor_array():
    @tg.function
    def f(x):
        ta = tg.TensorArray(dtype=tg.int32, size=0, dynamic_size=True)
        for i in range(len(x)):
            ta = ta.write(i, x[i] + 1)
        return ta.stack()

    assert f(tg.constant([1, 2, 3])).numpy().tolist() == [2, 3, 4]
    assert f(tg.constant([4, 5, 6])).numpy().tolist() == [5, 6, 7]
    assert f.experimental_get_tracing_count() == 1
