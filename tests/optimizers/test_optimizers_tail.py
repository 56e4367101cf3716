"""Adamax, Nadam, Adadelta, Lion, Ftrl and the PolynomialDecay / CosineDecayRestarts
schedules against numpy transcriptions of Keras 3's update rules and formulas."""
import math

import numpy as np
import pytest

import tapegpu as tg

GRADS = [np.array([0.5, -1.0, 2.0]), np.array([0.1, 0.3, -0.7]), np.array([1.5, 0.0, 0.2]),
         np.array([-0.4, 0.9, 0.1]), np.array([0.0, -2.0, 1.0])]
P0 = np.array([1.0, -2.0, 0.5])


def _run(opt, dtype):
    w = tg.Variable(P0.astype(dtype))
    out = []
    for g in GRADS:
        opt.apply_gradients([(tg.constant(g.astype(dtype)), w)])
        out.append(w.numpy())
    assert w.dtype == tg.as_dtype(dtype)
    return np.array(out)


def adamax_reference(lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    p, m, u = P0.copy(), np.zeros(3), np.zeros(3)
    for t, g in enumerate(GRADS, start=1):
        m = m + (g - m) * (1 - beta_1)
        u = np.maximum(beta_2 * u, np.abs(g))
        p = p - lr * m / ((1 - beta_1 ** t) * (u + epsilon))
        yield p


def nadam_reference(lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    p, m, v, u_product = P0.copy(), np.zeros(3), np.zeros(3), 1.0
    for t, g in enumerate(GRADS, start=1):
        u_t = beta_1 * (1 - 0.5 * 0.96 ** t)
        u_next = beta_1 * (1 - 0.5 * 0.96 ** (t + 1))
        u_product = u_product * u_t
        m = m + (g - m) * (1 - beta_1)
        v = v + (g * g - v) * (1 - beta_2)
        m_hat = u_next * m / (1 - u_product * u_next) + (1 - u_t) * g / (1 - u_product)
        p = p - lr * m_hat / (np.sqrt(v / (1 - beta_2 ** t)) + epsilon)
        yield p


def adadelta_reference(lr=0.001, rho=0.95, epsilon=1e-7):
    p, acc_g, acc_d = P0.copy(), np.zeros(3), np.zeros(3)
    for g in GRADS:
        acc_g = rho * acc_g + (1 - rho) * g * g
        delta = -np.sqrt(acc_d + epsilon) * g / np.sqrt(acc_g + epsilon)
        acc_d = rho * acc_d + (1 - rho) * delta * delta
        p = p + lr * delta
        yield p


def lion_reference(lr=0.001, beta_1=0.9, beta_2=0.99):
    p, m = P0.copy(), np.zeros(3)
    for g in GRADS:
        p = p - lr * np.sign(beta_1 * m + (1 - beta_1) * g)
        m = beta_2 * m + (1 - beta_2) * g
        yield p


def ftrl_reference(lr=0.001, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                   l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                   l2_shrinkage_regularization_strength=0.0, beta=0.0):
    p, acc, linear = P0.copy(), np.full(3, initial_accumulator_value), np.zeros(3)
    k, l1 = -learning_rate_power, l1_regularization_strength
    l2 = l2_regularization_strength + beta / (2 * lr)
    for g in GRADS:
        new_acc = acc + g * g
        linear = linear + g + 2 * l2_shrinkage_regularization_strength * p \
            - (new_acc ** k - acc ** k) / lr * p
        p = (np.clip(linear, -l1, l1) - linear) / (new_acc ** k / lr + 2 * l2)
        acc = new_acc
        yield p


CASES = [
    ("Adamax", adamax_reference, {}), ("Adamax", adamax_reference,
                                       dict(lr=0.05, beta_1=0.8, beta_2=0.9, epsilon=1e-3)),
    ("Nadam", nadam_reference, {}), ("Nadam", nadam_reference,
                                     dict(lr=0.02, beta_1=0.5, beta_2=0.9, epsilon=1e-4)),
    ("Adadelta", adadelta_reference, {}), ("Adadelta", adadelta_reference,
                                           dict(lr=1.0, rho=0.5, epsilon=1e-6)),
    ("Lion", lion_reference, {}), ("Lion", lion_reference, dict(lr=0.1, beta_1=0.6,
                                                                 beta_2=0.7)),
    ("Ftrl", ftrl_reference, {}),
    ("Ftrl", ftrl_reference, dict(lr=0.1, learning_rate_power=-0.7,
                                  initial_accumulator_value=0.3, l1_regularization_strength=0.01,
                                  l2_regularization_strength=0.02,
                                  l2_shrinkage_regularization_strength=0.03, beta=0.1)),
]


@pytest.mark.parametrize("name,reference,kwargs", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_optimizer_matches_keras_rule(name, reference, kwargs, dtype):
    args = dict(kwargs)
    lr = args.pop("lr", 0.001)
    want = np.array(list(reference(**kwargs)))
    got = _run(getattr(tg.optimizers, name)(learning_rate=lr, **args), dtype)
    tol = dict(rtol=2e-6, atol=1e-7) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got, want, **tol)


@pytest.mark.parametrize("name", ["Adamax", "Nadam", "Adadelta", "Lion", "Ftrl"])
def test_optimizer_defaults_names_and_keras_namespace(name):
    cls = getattr(tg.optimizers, name)
    opt = cls()
    assert opt.name == name.lower()
    assert opt.learning_rate == pytest.approx(0.001)
    assert tg.keras.optimizers.get(name.lower()).__class__ is cls
    assert getattr(tg.keras.optimizers, name) is cls


def test_optimizer_slots_hold_keras_state():
    opt = tg.optimizers.Adamax(learning_rate=0.1)
    w = tg.Variable(P0.astype(np.float32))
    opt.apply_gradients([(tg.constant(GRADS[0].astype(np.float32)), w)])
    np.testing.assert_allclose(opt.get_slot(w, "norm").numpy(), np.abs(GRADS[0]), rtol=1e-6)
    ftrl = tg.optimizers.Ftrl(initial_accumulator_value=0.25)
    ftrl.apply_gradients([(tg.constant(GRADS[0].astype(np.float32)), w)])
    np.testing.assert_allclose(ftrl.get_slot(w, "accumulator").numpy(), 0.25 + GRADS[0] ** 2,
                               rtol=1e-6)


def test_optimizers_reject_bad_hyperparameters():
    with pytest.raises(ValueError, match="Adamax: beta_1 must be in"):
        tg.optimizers.Adamax(beta_1=1.0)
    with pytest.raises(ValueError, match="Nadam: beta_2 must be in"):
        tg.optimizers.Nadam(beta_2=-0.1)
    with pytest.raises(ValueError, match="Adadelta: rho must be in"):
        tg.optimizers.Adadelta(rho=1.5)
    with pytest.raises(ValueError, match="Lion: beta_1 must be in"):
        tg.optimizers.Lion(beta_1=0.0)
    with pytest.raises(ValueError, match="`learning_rate_power` needs to be negative"):
        tg.optimizers.Ftrl(learning_rate_power=0.5)
    with pytest.raises(ValueError, match="`l1_regularization_strength` needs to be positive"):
        tg.optimizers.Ftrl(l1_regularization_strength=-1.0)


def test_new_optimizers_minimize_a_quadratic_in_fit():
    x = np.random.default_rng(0).normal(size=(64, 2)).astype(np.float32)
    y = x @ np.array([[1.5], [-2.0]], np.float32)
    for name in ["adamax", "nadam", "lion"]:
        model = tg.keras.Sequential([tg.keras.layers.Dense(1)])
        model.compile(optimizer=tg.keras.optimizers.get(name), loss="mse")
        model.optimizer.learning_rate = 0.05
        losses = model.fit(x, y, epochs=20, batch_size=16, verbose=0).history["loss"]
        assert losses[-1] < 0.2 * losses[0], (name, losses)


def polynomial_reference(step, initial, decay_steps, end=0.0001, power=1.0, cycle=False):
    if cycle:
        decay_steps = decay_steps * (1.0 if step == 0 else math.ceil(step / decay_steps))
    else:
        step = min(step, decay_steps)
    return (initial - end) * (1 - step / decay_steps) ** power + end


@pytest.mark.parametrize("kwargs", [dict(), dict(end_learning_rate=0.01, power=0.5, cycle=True),
                                    dict(end_learning_rate=0.0, power=3.0)])
def test_polynomial_decay(kwargs):
    s = tg.optimizers.schedules.PolynomialDecay(0.1, 7, **kwargs)
    ref = dict(kwargs)
    ref = dict(end=ref.get("end_learning_rate", 0.0001), power=ref.get("power", 1.0),
               cycle=ref.get("cycle", False))
    for step in range(30):
        assert s(step) == pytest.approx(polynomial_reference(step, 0.1, 7, **ref), rel=1e-12)
    with pytest.raises(ValueError, match="`decay_steps` must be > 0"):
        tg.optimizers.schedules.PolynomialDecay(0.1, 0)


def restarts_reference(step, initial, first, t_mul=2.0, m_mul=1.0, alpha=0.0):
    """Walks the periods one by one: first, first * t_mul, first * t_mul^2, ..."""
    start, length, peak = 0.0, float(first), 1.0
    while step >= start + length:
        start, length, peak = start + length, length * t_mul, peak * m_mul
    cosine = 0.5 * peak * (1 + math.cos(math.pi * (step - start) / length))
    return initial * ((1 - alpha) * cosine + alpha)


@pytest.mark.parametrize("kwargs", [dict(), dict(t_mul=1.0, m_mul=0.7, alpha=0.1),
                                    dict(t_mul=1.5, m_mul=0.9, alpha=0.05),
                                    dict(t_mul=10.0)])
def test_cosine_decay_restarts(kwargs):
    s = tg.optimizers.schedules.CosineDecayRestarts(0.1, 3, **kwargs)
    for step in list(range(200)) + [333, 3333, 3332]:  # 333: log(1000) / log(10) < 3
        assert s(step) == pytest.approx(restarts_reference(step, 0.1, 3, **kwargs), rel=1e-9,
                                        abs=1e-12), step
    with pytest.raises(ValueError, match="`first_decay_steps` must be > 0"):
        tg.optimizers.schedules.CosineDecayRestarts(0.1, -1)


def test_schedules_drive_an_optimizer():
    schedule = tg.optimizers.schedules.PolynomialDecay(1.0, 4, end_learning_rate=0.0)
    opt = tg.optimizers.SGD(learning_rate=schedule)
    w = tg.Variable([0.0])
    for _ in range(5):
        opt.apply_gradients([(tg.constant([1.0]), w)])
    np.testing.assert_allclose(w.numpy(), [-(1.0 + 0.75 + 0.5 + 0.25 + 0.0)], rtol=1e-6)
