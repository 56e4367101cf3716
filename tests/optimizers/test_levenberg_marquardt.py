"""Levenberg–Marquardt: known optima, against gradient descent, and on a model's variables."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.optimizers import levenberg_marquardt as lm_module

X = np.linspace(0.0, 1.0, 30)
Y = 2.0 * np.exp(-1.5 * X) + 0.5


def _exp_problem(dtype=tg.float64):
    a, b, c = (tg.Variable(v, dtype=dtype) for v in (1.0, 0.0, 0.0))
    x = tg.constant(X.astype(tg.as_dtype(dtype).as_numpy_dtype))
    y = tg.constant(Y.astype(tg.as_dtype(dtype).as_numpy_dtype))
    return (a, b, c), (lambda: a * tg.exp(b * x) + c - y)


def test_fits_an_exponential_to_the_known_optimum():
    (a, b, c), residuals = _exp_problem()
    result = tg.optimizers.LevenbergMarquardt().minimize(residuals, [a, b, c])
    assert result.converged, result.message
    np.testing.assert_allclose([float(a), float(b), float(c)], [2.0, -1.5, 0.5], rtol=1e-8)
    assert result.objective < 1e-18 and result.iterations < 20
    assert result.initial_objective == pytest.approx(0.5 * np.sum((1.0 - Y) ** 2))
    assert result.history[0] == result.initial_objective
    assert all(h2 <= h1 for h1, h2 in zip(result.history, result.history[1:]))


def test_beats_gradient_descent_in_iterations():
    (a, b, c), residuals = _exp_problem()
    result = tg.optimizers.LevenbergMarquardt().minimize(residuals, [a, b, c])
    target = 1e-6
    (a2, b2, c2), residuals2 = _exp_problem()
    opt = tg.optimizers.SGD(learning_rate=0.05, momentum=0.9)
    steps = 0
    while steps < 2000:
        loss = opt.minimize(lambda: 0.5 * tg.reduce_sum(tg.square(residuals2())), [a2, b2, c2])
        steps += 1
        if float(loss) < target:
            break
    assert result.iterations < 20 <= steps, (result.iterations, steps)


def test_rosenbrock_residuals():
    x, y = tg.Variable(-1.2, dtype=tg.float64), tg.Variable(1.0, dtype=tg.float64)
    result = tg.optimizers.LevenbergMarquardt().minimize(
        lambda: tg.stack([1.0 - x, 10.0 * (y - x * x)]), [x, y], max_iterations=100)
    assert result.converged, result.message
    np.testing.assert_allclose([float(x), float(y)], [1.0, 1.0], atol=1e-8)


@pytest.mark.parametrize("scaling,update", [("levenberg", "nielsen"), ("marquardt", "factor"),
                                            ("levenberg", "factor")])
def test_damping_variants_converge(scaling, update):
    (a, b, c), residuals = _exp_problem()
    lm = tg.optimizers.LevenbergMarquardt(damping=1e-2, scaling=scaling, damping_update=update)
    result = lm.minimize(residuals, [a, b, c], max_iterations=200)
    assert result.converged, result.message
    np.testing.assert_allclose([float(a), float(b), float(c)], [2.0, -1.5, 0.5], rtol=1e-6)


def test_float32_fit_keeps_float32_and_stops_at_its_precision():
    (a, b, c), residuals = _exp_problem(tg.float32)
    result = tg.optimizers.LevenbergMarquardt().minimize(residuals, [a, b, c])
    assert a.dtype == tg.float32 and a.numpy().dtype == np.float32
    np.testing.assert_allclose([float(a), float(b), float(c)], [2.0, -1.5, 0.5], atol=2e-3)
    assert result.converged, result.message


def test_fits_a_sequential_models_variables():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(64, 1))
    y = np.sin(2.5 * x)
    tg.random.set_seed(0)
    model = tg.layers.Sequential([tg.layers.Dense(8, activation="tanh"), tg.layers.Dense(1)])
    model(x)  # build: float64, from the data
    before = float(tg.losses.MeanSquaredError()(y, model(x)))
    result = tg.optimizers.LevenbergMarquardt().minimize(
        lambda: model(x) - y, model.trainable_variables, max_iterations=60)
    after = float(tg.losses.MeanSquaredError()(y, model(x)))
    assert after < 1e-4 < before / 100, (before, after)
    assert result.objective == pytest.approx(0.5 * after * 64, rel=1e-9)
    assert result.jacobian_evaluations <= result.iterations + 1


def test_callback_and_result_fields():
    (a, b, c), residuals = _exp_problem()
    seen = []
    result = tg.optimizers.LevenbergMarquardt().minimize(
        residuals, [a, b, c], max_iterations=3, callback=lambda it, f, vs: seen.append((it, f)))
    assert [it for it, _ in seen] == [1, 2, 3] and result.iterations == 3
    assert not result.converged and "max_iterations=3" in result.message
    assert seen[-1][1] == result.objective


def test_errors_name_the_problem():
    lm = tg.optimizers.LevenbergMarquardt()
    with pytest.raises(ValueError, match="var_list is empty"):
        lm.minimize(lambda: tg.ones(2), [])
    w = tg.Variable([1.0, 2.0])
    with pytest.raises(TypeError, match="residual of dtype float64.*variables are float32"):
        lm.minimize(lambda: tg.cast(w, tg.float64), [w])
    with pytest.raises(TypeError, match="must hold tg.Variable"):
        lm.minimize(lambda: w, [tg.constant(1.0)])
    with pytest.raises(ValueError, match="scaling must be"):
        tg.optimizers.LevenbergMarquardt(scaling="fletcher")


def test_functional_minimize_has_tensorflow_graphics_semantics():
    def r1(a, b, c):
        return a * tg.exp(b * X) + c - Y

    def r2(a, b, c):
        return tg.stack([a - a])  # a second residual, identically zero

    start = [tg.constant(v, dtype=tg.float64) for v in (1.0, 0.0, 0.0)]
    calls = []
    objective, values = lm_module.minimize(
        [r1, r2], start, max_iterations=20,
        callback=lambda it, f, vs: calls.append((it, float(f), len(vs))))
    np.testing.assert_allclose([float(v) for v in values], [2.0, -1.5, 0.5], rtol=1e-8)
    assert objective.dtype == tg.float64 and float(objective) < 1e-18
    assert calls[0][0] == 1 and calls[0][2] == 3
    assert float(start[0]) == 1.0  # the starting point is not modified
    v = tg.Variable(1.0, dtype=tg.float64)
    lm_module.minimize(lambda v: v - 3.0, v, 5)
    assert float(v) == 1.0  # nor a variable passed as the start (TFG converts it to a tensor)
    with pytest.raises(ValueError, match="at least 1"):
        lm_module.minimize(r1, start, 0)


def test_forward_mode_jacobian_when_available():
    if getattr(tg.autodiff, "ForwardAccumulator", None) is None:
        pytest.skip("forward mode (tg.autodiff.ForwardAccumulator) is not in this build")
    (a, b, c), residuals = _exp_problem()
    result = tg.optimizers.LevenbergMarquardt(jacobian_mode="forward").minimize(
        residuals, [a, b, c])
    assert result.converged, result.message
    np.testing.assert_allclose([float(a), float(b), float(c)], [2.0, -1.5, 0.5], rtol=1e-8)
