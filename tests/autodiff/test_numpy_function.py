"""tg.numpy_function: black-box ops with user gradients or estimated Jacobians."""
import numpy as np
import pytest

import tapegpu as tg


def f_np(x, y):
    """A black box of two inputs, two outputs: (sum sin(x) y^2, x * y)."""
    return np.sum(np.sin(x) * y ** 2), x * y


def _analytic(x, y, g0, g1):
    """VJP of f_np with cotangents g0 (scalar) and g1 (like x)."""
    return g0 * np.cos(x) * y ** 2 + g1 * y, g0 * 2 * np.sin(x) * y + g1 * x


def _grads(x, y, grad, dtype):
    xt, yt = tg.constant(x.astype(dtype)), tg.constant(y.astype(dtype))
    with tg.GradientTape() as tape:
        tape.watch([xt, yt])
        s, p = tg.numpy_function(f_np, [xt, yt], [dtype, dtype], grad=grad)
        loss = 3.0 * s + tg.reduce_sum(p * tg.constant(np.arange(3.0).astype(dtype)))
    return tape.gradient(loss, [xt, yt])


X = np.array([0.3, -1.2, 2.0])
Y = np.array([1.5, 0.5, -0.7])


@pytest.mark.parametrize("estimator,dtype,rtol", [
    ("central_difference", np.float64, 1e-8), ("forward_difference", np.float64, 1e-6),
    ("central_difference", np.float32, 2e-3), ("forward_difference", np.float32, 1e-2)])
def test_difference_estimators_match_the_analytic_gradient(estimator, dtype, rtol):
    gx, gy = _grads(X, Y, estimator, dtype)
    want_x, want_y = _analytic(X, Y, 3.0, np.arange(3.0))
    assert gx.dtype == tg.as_dtype(dtype)
    np.testing.assert_allclose(gx.numpy(), want_x, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(gy.numpy(), want_y, rtol=rtol, atol=rtol)


def test_spsa_is_close_with_many_samples_and_repeatable_with_a_seed():
    want_x, want_y = _analytic(X, Y, 3.0, np.arange(3.0))
    gx, gy = _grads(X, Y, tg.estimators.spsa(num_samples=4000, seed=0), np.float64)
    scale = np.abs(np.concatenate([want_x, want_y])).max()
    np.testing.assert_allclose(gx.numpy(), want_x, atol=0.1 * scale)
    np.testing.assert_allclose(gy.numpy(), want_y, atol=0.1 * scale)
    again = _grads(X, Y, tg.estimators.spsa(num_samples=4000, seed=0), np.float64)[0]
    np.testing.assert_array_equal(again.numpy(), gx.numpy())
    by_name = _grads(X, Y, "spsa", np.float64)[0]
    assert by_name.shape == (3,)


def test_without_grad_the_forward_runs_and_the_gradient_explains_how_to_supply_one():
    x = tg.Variable([1.0, 2.0])
    with tg.GradientTape() as tape:
        y = tg.numpy_function(lambda a: a * 2, [x], tg.float32)  # no error here
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0])
    with pytest.raises(tg.NoGradientError, match=r"has no gradient.*grad=.*callable "
                                                  r"grad\(upstream, \*inputs\).*"
                                                  r"'central_difference'.*spsa"):
        tape.gradient(y, x)


def test_user_grad_inside_a_taped_computation():
    calls = []

    def measure(v):
        calls.append(v.copy())
        return np.float32(np.sum(v ** 3))

    def grad(upstream, v):
        return upstream * 3.0 * v * v  # tapegpu ops: differentiable again

    w = tg.Variable([1.0, -2.0, 0.5])
    with tg.GradientTape() as outer:
        with tg.GradientTape() as tape:
            h = tg.tanh(w) * 2.0
            y = tg.numpy_function(measure, [h], tg.float32, grad=grad)
            loss = tg.square(y)
        g = tape.gradient(loss, w)
        total = tg.reduce_sum(g)
    h_np = np.tanh(w.numpy()) * 2
    y_np = np.sum(h_np ** 3)
    want = 2 * y_np * 3 * h_np ** 2 * 2 * (1 - np.tanh(w.numpy()) ** 2)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-5)
    assert len(calls) == 1 and y.dtype == tg.float32
    assert outer.gradient(total, w) is not None  # the user rule was recorded: second order


def test_user_grad_may_return_numpy_and_none():
    x = tg.constant([1.0, 2.0])
    n = tg.constant(3.0)
    with tg.GradientTape() as tape:
        tape.watch([x, n])
        y = tg.numpy_function(lambda a, k: a * k, [x, n], tg.float32,
                              grad=lambda g, a, k: (g.numpy() * k.numpy(), None))
    gx, gn = tape.gradient(y, [x, n])
    np.testing.assert_array_equal(gx.numpy(), [3.0, 3.0])
    assert gn is None
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.numpy_function(np.sin, [x], tg.float32, grad=lambda g, a: (g, g))
    with pytest.raises(ValueError, match="grad returned 2 gradients for 1 inputs"):
        tape.gradient(y, x)


def test_jacobian_through_an_estimated_op_reuses_one_estimate():
    calls = []

    def f(v):
        calls.append(1)
        return np.tanh(v) * v[::-1]

    x = tg.constant(np.array([0.5, -1.0, 2.0, 0.1]))
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.numpy_function(f, [x], tg.float64, grad="central_difference")
    jac = tape.jacobian(y, x).numpy()
    assert len(calls) == 1 + 2 * 4  # forward + two evaluations per input element
    v = x.numpy()
    want = np.diag((1 - np.tanh(v) ** 2) * v[::-1]) + np.tanh(v)[:, None] * np.eye(4)[::-1]
    np.testing.assert_allclose(jac, want, rtol=1e-8, atol=1e-10)
    with tg.GradientTape() as tape:  # per-example rows through tape.jacobian work too
        tape.watch(x)
        y = tg.numpy_function(f, [x], tg.float64, grad="forward_difference")
        z = y * 2.0
    np.testing.assert_allclose(tape.jacobian(z, x).numpy(), 2 * want, rtol=1e-6, atol=1e-7)


def test_integer_inputs_get_no_gradient_and_outputs_follow_tout():
    x = tg.constant([1.0, 2.0])
    k = tg.constant([2, 3])
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.numpy_function(lambda a, b: a * b, [x, k], tg.float32, grad="central_difference")
    with pytest.warns(UserWarning, match="got int32"):
        gx, gk = tape.gradient(y, [x, k])
    np.testing.assert_allclose(gx.numpy(), [2.0, 3.0], rtol=1e-3)
    assert gk is None
    assert tg.numpy_function(lambda a: a.sum(), [k], tg.float32).dtype == tg.float32
    with pytest.raises(TypeError, match="output 0 has dtype float32 but Tout says int32"):
        tg.numpy_function(lambda a: a * 0.5, [x], tg.int32)
    with pytest.raises(ValueError, match="Tout lists 2 outputs"):
        tg.numpy_function(lambda a: a, [x], [tg.float32, tg.float32])
    with pytest.raises(ValueError, match="unknown gradient estimator 'fd'"):
        tg.numpy_function(lambda a: a, [x], tg.float32, grad="fd")


def test_func_gets_copies_it_may_modify():
    x = tg.constant([1.0, 2.0])

    def vandal(a):
        a[:] = 0
        return a + 1

    y = tg.numpy_function(vandal, [x], tg.float32)
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(y.numpy(), [1.0, 1.0])


def test_forward_mode_through_an_estimated_op():
    if getattr(tg.autodiff, "ForwardAccumulator", None) is None:
        pytest.skip("forward mode (tg.autodiff.ForwardAccumulator) is not in this build")
    x = tg.constant(np.array([0.5, -1.0, 2.0]))
    t = tg.constant(np.array([1.0, 0.0, -2.0]))
    with tg.autodiff.ForwardAccumulator(x, t) as acc:
        y = tg.numpy_function(lambda v: np.exp(v) * v.sum(), [x], tg.float64,
                              grad="central_difference")
    v = x.numpy()
    jac = np.diag(np.exp(v)) * v.sum() + np.exp(v)[:, None]
    np.testing.assert_allclose(acc.jvp(y).numpy(), jac @ t.numpy(), rtol=1e-7)
    with tg.GradientTape() as tape:  # tape.jacobian may pick forward mode: same Jacobian
        tape.watch(x)
        y = tg.numpy_function(lambda v: np.concatenate([v, v]) ** 2, [x], tg.float64,
                              grad="central_difference")
    np.testing.assert_allclose(tape.jacobian(y, x).numpy(),
                               np.concatenate([np.diag(2 * v)] * 2), rtol=1e-7, atol=1e-9)


def test_jacobian_through_a_user_grad_op_with_more_outputs_than_inputs():
    x = tg.constant([1.0, 2.0])
    with tg.GradientTape() as tape:  # reverse mode (the rule has no JVP), one VJP per row
        tape.watch(x)
        y = tg.numpy_function(lambda v: np.concatenate([v, 3 * v, v * v]), [x], tg.float32,
                              grad=lambda g, v: g[0:2] + 3 * g[2:4] + 2 * v * g[4:6])
    want = np.concatenate([np.eye(2), 3 * np.eye(2), np.diag([2.0, 4.0])])
    np.testing.assert_allclose(tape.jacobian(y, x).numpy(), want)


def test_evaluation_counts_of_the_estimators():
    calls = []

    def f(v):
        calls.append(1)
        return v ** 2

    x = tg.constant(np.arange(5.0))
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.numpy_function(f, [x], tg.float64, grad="forward_difference")
    g = tape.gradient(y, x)
    assert len(calls) == 1 + 5 + 1  # forward call, one per element, f(x) once more
    np.testing.assert_allclose(g.numpy(), 2 * np.arange(5.0), rtol=1e-6, atol=1e-6)
    calls.clear()
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.numpy_function(f, [x], tg.float64, grad=tg.estimators.spsa(num_samples=3))
    tape.gradient(y, x)
    assert len(calls) == 1 + 2 * 3  # SPSA: two per sample, whatever the input size
