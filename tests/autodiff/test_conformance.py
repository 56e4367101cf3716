"""TensorFlow conformance of the autodiff API's edges: repeated inputs, custom gradients'
contracts, forward accumulators, Jacobian sizes and empty Jacobians, memory budgets with ops
that cannot be recomputed, and the errors TensorFlow raises."""
import gc
import weakref

import numpy as np
import pytest

import tapegpu as tg


# -- recompute_grad and custom_gradient ------------------------------------------------------------

def test_recompute_grad_repeated_input_counts_once():
    f = tg.recompute_grad(lambda a, b: a * b)
    x = tg.constant(3.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = f(x, x)
    assert float(t.gradient(y, x)) == 6.0  # d(x*x)/dx = 2x, as TensorFlow


def test_recompute_grad_repeated_variable_and_tensor_mix():
    v = tg.Variable(2.0)
    f = tg.recompute_grad(lambda a, b, c: a * b * c * v)
    x = tg.constant(3.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = f(x, x, x)
    gx, gv = t.gradient(y, [x, v])
    assert float(gx) == pytest.approx(3 * 9.0 * 2.0) and float(gv) == pytest.approx(27.0)


def test_recompute_grad_tuple_outputs():
    f = tg.recompute_grad(lambda a: (tg.sin(a), [a * a, tg.cast(a, tg.int32)]))
    x = tg.constant([0.5, 1.0])
    with tg.GradientTape() as t:
        t.watch(x)
        s, (sq, i) = f(x)
        y = tg.reduce_sum(s) + tg.reduce_sum(sq)
    assert i.dtype == tg.int32
    np.testing.assert_allclose(t.gradient(y, x).numpy(), np.cos([0.5, 1.0]) + [1.0, 2.0],
                               rtol=1e-6)


def test_recompute_grad_forward_mode():
    v = tg.Variable([1.0, 2.0])
    f = tg.recompute_grad(lambda a: (tg.sin(a) * v, a * a))
    x = tg.constant([0.5, 1.0])
    with tg.autodiff.ForwardAccumulator(x, tg.constant([1.0, 1.0])) as acc:
        s, sq = f(x)
    np.testing.assert_allclose(acc.jvp(s).numpy(), np.cos([0.5, 1.0]) * [1.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(acc.jvp(sq).numpy(), [1.0, 2.0])
    with tg.GradientTape() as t:
        t.watch(x)
        s, _ = f(x)
    jac = t.jacobian(s, x, mode="forward")
    np.testing.assert_allclose(jac.numpy(), np.diag(np.cos([0.5, 1.0]) * [1.0, 2.0]), rtol=1e-6)


def test_custom_gradient_float_output_uses_the_rule():
    @tg.custom_gradient
    def f(x):
        return 3.0, lambda dy: dy * 10.0
    x = tg.constant(3.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = f(x)
    assert isinstance(y, tg.Tensor)
    assert float(t.gradient(y, x)) == 10.0


def test_custom_gradient_variable_returned_unchanged_uses_the_rule():
    v = tg.Variable(2.0)

    @tg.custom_gradient
    def f(x):
        return x, lambda dy: dy * 10.0
    with tg.GradientTape() as t:
        y = f(v)
    assert float(t.gradient(y, v)) == 10.0


@pytest.mark.parametrize("bad", [lambda dy: tg.ones((3, 3)), lambda dy: tg.ones((1,))])
def test_custom_gradient_checks_gradient_shapes(bad):
    @tg.custom_gradient
    def shaped(x):
        return x * 1.0, bad
    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as t:
        t.watch(x)
        y = shaped(x)
    with pytest.raises(ValueError, match=r"custom_gradient shaped: .*shape \(3,\)"):
        t.gradient(y, x)


def test_custom_gradient_checks_gradient_dtypes():
    @tg.custom_gradient
    def typed(x):
        return x * 1.0, lambda dy: tg.constant(np.ones(3))  # float64
    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as t:
        t.watch(x)
        y = typed(x)
    with pytest.raises(TypeError, match="custom_gradient typed: .*float64.*float32"):
        t.gradient(y, x)


def test_custom_gradient_integer_output_gets_an_upstream():
    seen = []

    @tg.custom_gradient
    def f(x):
        def grad_fn(dy, di):
            seen.append(di)
            return dy * 2.0
        return (x * 2.0, tg.constant(1)), grad_fn
    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as t:
        t.watch(x)
        y, _ = f(x)
    np.testing.assert_allclose(t.gradient(y, x).numpy(), [2.0, 2.0, 2.0])
    assert len(seen) == 1 and seen[0].dtype == tg.int32


def test_custom_gradient_method_self_is_not_an_input():
    class Layer:
        scale = 3.0

        @tg.custom_gradient
        def __call__(self, x):
            return x * self.scale, lambda dy: dy * self.scale
    x = tg.constant(2.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = Layer()(x)
    assert float(t.gradient(y, x)) == 3.0


def test_custom_gradient_empty_tuple_argument_is_not_an_input():
    @tg.custom_gradient
    def f(x, extra):
        return x * 2.0, lambda dy: dy * 2.0  # one gradient: () has no leaves
    x = tg.constant(2.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = f(x, ())
    assert float(t.gradient(y, x)) == 2.0


def test_grad_pass_through():
    x = tg.Variable(1.0)
    z = tg.Variable(3.0)
    with tg.GradientTape() as t:
        y = tg.grad_pass_through(x.assign)(z ** 2)
    assert float(t.gradient(y, z)) == 6.0
    a = tg.constant([0.3, 1.7])
    with tg.GradientTape() as t:
        t.watch(a)
        r = tg.grad_pass_through(tg.round)(a)
    np.testing.assert_allclose(r.numpy(), [0.0, 2.0])
    np.testing.assert_allclose(t.gradient(r, a).numpy(), [1.0, 1.0])


# -- ForwardAccumulator --------------------------------------------------------------------------

def test_forward_accumulator_none_tangent_raises():
    x = tg.constant(1.0)
    with pytest.raises(ValueError, match="ForwardAccumulator: the tangent .* is None"):
        tg.autodiff.ForwardAccumulator(x, None)
    with pytest.raises(ValueError, match="is None"):
        tg.autodiff.ForwardAccumulator([x, tg.constant(2.0)], [tg.constant(1.0), None])


def test_dropped_forward_accumulator_frees_its_tangents_without_gc():
    x = tg.constant(np.ones(10, np.float32))
    gc.disable()
    try:
        refs = []
        for _ in range(3):
            tangent = tg.constant(np.ones(10, np.float32))
            with tg.autodiff.ForwardAccumulator(x, tangent) as acc:
                y = tg.sin(x)
            refs += [weakref.ref(tangent), weakref.ref(acc.jvp(y))]
            del tangent, acc, y
        assert all(r() is None for r in refs)  # freed by reference counting alone
    finally:
        gc.enable()


def test_forward_accumulator_forgets_a_freed_primal():
    acc = tg.autodiff.ForwardAccumulator(tg.constant([1.0]), tg.constant([1.0]))
    with acc:
        y = tg.constant([2.0]) * 1.0  # not a primal: no tangent
    assert len(acc._tangents) == 0 and acc.jvp(y) is None
    x = tg.constant([1.0])
    with tg.autodiff.ForwardAccumulator(x, tg.constant([1.0])) as acc:
        y = x * 3.0
    assert len(acc._tangents) == 2
    del y
    assert len(acc._tangents) == 1


# -- memory budget with ops that cannot be recomputed -------------------------------------------

@tg.custom_gradient
def _double(x):
    return x * 2.0, lambda dy: dy * 2.0


_sin_in_numpy = tg.recompute_grad(lambda a: tg.sin(a))


def _np_sin(y):
    return tg.numpy_function(np.sin, [y], tg.float32, grad=lambda a, dy: dy * tg.cos(a))


@pytest.mark.parametrize("fn", [_double, _sin_in_numpy, _np_sin],
                         ids=["custom_gradient", "recompute_grad", "numpy_function"])
def test_memory_budget_keeps_entries_it_cannot_recompute(fn):
    x = tg.constant(np.linspace(0, 1, 100).astype(np.float32))
    grads = []
    for budget in (None, 1000):
        with tg.GradientTape(memory_budget=budget) as t:
            t.watch(x)
            y = x
            for _ in range(5):
                y = tg.sin(fn(tg.exp(y * 0.1)))
            loss = tg.reduce_sum(y)
        grads.append(t.gradient(loss, x).numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    assert t.stats()["segments"] >= 1
