"""tg.debugging: check_numerics (eager, in tg.function at every call, gradient), assert_equal,
assert_near and assert_shapes."""
import numpy as np
import pytest

import tapegpu as tg

dbg = tg.debugging


@pytest.mark.parametrize("values,what", [([1.0, np.nan], "NaN values"),
                                         ([np.inf, 1.0], "Inf values"),
                                         ([-np.inf, np.nan], "Inf and NaN values")])
def test_check_numerics_names_the_message_and_the_problem(values, what):
    with pytest.raises(tg.errors.InvalidArgumentError, match=f"weights : Tensor had {what}"):
        dbg.check_numerics(tg.constant(values), "weights")


def test_check_numerics_is_the_identity_with_its_gradient():
    x = tg.constant(np.array([[0.5, -2.0], [3.0, 0.0]]))
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = dbg.check_numerics(x * x, "square")
        loss = tg.reduce_sum(y * tg.constant(np.array([[1.0, 2.0], [3.0, 4.0]])))
    np.testing.assert_array_equal(y.numpy(), x.numpy() ** 2)
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(),
                               2 * x.numpy() * np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert dbg.check_numerics(tg.zeros((0, 3)), "empty").shape == (0, 3)
    assert float(dbg.check_numerics(tg.constant(2.5), "scalar")) == 2.5
    with pytest.raises(tg.errors.InvalidArgumentError, match="floating"):
        dbg.check_numerics(tg.constant([1, 2]), "ints")


def test_check_numerics_checks_at_every_call_of_a_function():
    @tg.function
    def f(a):
        return dbg.check_numerics(tg.math.log(a), "log of a") * 2.0

    np.testing.assert_allclose(f(tg.constant([1.0, 2.0])).numpy(), 2 * np.log([1.0, 2.0]))
    with pytest.raises(tg.errors.InvalidArgumentError, match="log of a : Tensor had Inf"):
        f(tg.constant([0.0, 2.0]))
    np.testing.assert_allclose(f(tg.constant([3.0, 4.0])).numpy(), 2 * np.log([3.0, 4.0]))
    assert f.experimental_get_tracing_count() == 1


def test_assert_equal_and_near():
    dbg.assert_equal(tg.constant([[1, 2], [1, 2]]), [1, 2])
    with pytest.raises(tg.errors.InvalidArgumentError, match="hey"):
        dbg.assert_equal([1, 2], [1, 3], message="hey")
    with pytest.raises(tg.errors.InvalidArgumentError, match="x == y"):
        dbg.assert_equal(tg.constant([[1, 2], [1, 2]]), [1, 2.5])
    with pytest.raises(tg.errors.InvalidArgumentError, match="Incompatible shapes"):
        dbg.assert_equal([1, 2], [1, 2, 3])
    eps = np.finfo(np.float32).eps
    dbg.assert_near(tg.constant([1.0, 2.0]), tg.constant([1.0, 2.0 + 4 * eps]))
    with pytest.raises(tg.errors.InvalidArgumentError, match="rtol"):
        dbg.assert_near(tg.constant([1.0, 2.0]), tg.constant([1.0, 2.0 + 100 * eps]))
    dbg.assert_near(tg.constant([1.0]), tg.constant([1.5]), atol=0.5)
    with pytest.raises(tg.errors.InvalidArgumentError, match="near"):
        dbg.assert_near(tg.constant([1.0]), tg.constant([1.6]), atol=0.5, message="near")
    with pytest.raises(tg.errors.InvalidArgumentError, match="one dtype"):
        dbg.assert_near(tg.constant([1.0]), tg.constant(np.array([1.0])))


def test_assert_shapes():
    x, y, s = tg.ones((2, 3)), tg.ones((3,)), tg.constant(1.0)
    dbg.assert_shapes([(x, ("N", "Q")), (y, ("Q",)), (s, ())])
    dbg.assert_shapes([(x, (None, ".")), (x, ("*", 3)), (tg.ones((4, 2, 3)), ("*", "N", 3))])
    dbg.assert_shapes([(x, [2, 3])])
    with pytest.raises(ValueError, match="dimension 0 must have size 2. Received size 3"):
        dbg.assert_shapes([(x, ("N", "Q")), (y, ("N",))])
    with pytest.raises(ValueError, match="dimension 1 must have size 4"):
        dbg.assert_shapes([(x, (2, 4))])
    with pytest.raises(ValueError, match="must have rank 1"):
        dbg.assert_shapes([(x, ("N",))])
    with pytest.raises(ValueError, match="rank at least 3"):
        dbg.assert_shapes([(x, ("*", 1, 2, 3))])
