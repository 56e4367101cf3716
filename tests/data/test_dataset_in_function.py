"""tg.data iterators inside tg.function: `next(iterator)` takes a new element at every call
(TF's iterator ops), never the traced call's element baked into the graph; iterating a dataset
inside the function is refused with a clear error rather than baked."""
import numpy as np
import pytest

import tapegpu as tg


def test_next_inside_a_traced_function_takes_a_new_element_each_call():
    it = iter(tg.data.Dataset.range(10).map(lambda x: (x, x * 10)))

    @tg.function
    def step(iterator):
        a, b = next(iterator)
        return a * 2 + b

    assert [int(step(it)) for _ in range(4)] == [0, 12, 24, 36]
    assert step.experimental_get_tracing_count() == 1


def test_a_training_step_pulling_its_batch_trains_on_each_batch_then_ends():
    w = tg.Variable(1.0)
    it = iter(tg.data.Dataset.from_tensor_slices([1.0, 2.0, 3.0]))

    @tg.function
    def train(iterator):
        x = next(iterator)
        with tg.GradientTape() as tape:
            loss = w * x
        w.assign_sub(0.1 * tape.gradient(loss, w))
        return loss

    losses = [float(train(it)) for _ in range(3)]
    np.testing.assert_allclose(losses, [1.0, 0.9 * 2.0, 0.7 * 3.0], rtol=1e-6)
    assert float(w) == pytest.approx(0.4)
    with pytest.raises(tg.errors.OutOfRangeError, match="End of sequence"):
        train(it)


def test_iterating_a_dataset_inside_a_traced_function_is_refused():
    ds = tg.data.Dataset.range(5).shuffle(5)

    @tg.function
    def first_two():
        return tg.stack([x for x in ds.take(2)])

    with pytest.raises(NotImplementedError, match="iterating a dataset inside a tg.function"):
        first_two()


def test_a_condition_on_a_pulled_value_is_refused_as_a_guard():
    it = iter(tg.data.Dataset.range(4))

    @tg.function
    def f(iterator):
        x = next(iterator)
        return x if x > 1 else -x

    with pytest.raises(NotImplementedError, match="after next\\(iterator\\)"):
        f(it)
