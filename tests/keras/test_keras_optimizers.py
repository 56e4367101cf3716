"""keras.optimizers follow Keras 3's documented update rules: each is compared, over 100 steps
with varying gradients, to a numpy transcription of the rule (float64 to 1e-6; float32, which
the fused GPU kernels run, to 1e-5)."""
import numpy as np
import pytest

import tapegpu as tg

keras = tg.keras
STEPS = 100


def _grads(shape, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=shape) for _ in range(STEPS)]


def _run(opt, p0, grads, dtype):
    w = tg.Variable(p0.astype(dtype), name="w")
    for g in grads:
        opt.apply_gradients([(tg.constant(g.astype(dtype)), w)])
    return w.numpy().astype(np.float64)


def sgd_reference(p, grads, lr, momentum, nesterov):
    v = np.zeros_like(p)
    for g in grads:
        if momentum == 0:
            p = p - lr * g
            continue
        v = momentum * v - lr * g
        p = p + momentum * v - lr * g if nesterov else p + v
    return p


def adam_reference(p, grads, lr, b1, b2, eps, weight_decay=0.0):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        p = p - p * weight_decay * lr  # AdamW: decoupled decay before the Adam step
        m = m + (g - m) * (1 - b1)
        v = v + (g * g - v) * (1 - b2)
        alpha = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        p = p - alpha * m / (np.sqrt(v) + eps)  # epsilon outside the square root
    return p


def adagrad_reference(p, grads, lr, init, eps):
    acc = np.full_like(p, init)
    for g in grads:
        acc = acc + g * g
        p = p - lr * g / np.sqrt(acc + eps)
    return p


TOL = {"float64": 1e-6, "float32": 1e-5}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("momentum,nesterov", [(0.0, False), (0.9, False), (0.9, True),
                                               (0.5, True)])
def test_sgd_matches_keras(dtype, momentum, nesterov):
    p0 = np.linspace(-1, 1, 6).reshape(2, 3)
    grads = _grads(p0.shape)
    opt = keras.optimizers.SGD(learning_rate=0.01, momentum=momentum, nesterov=nesterov)
    got = _run(opt, p0, grads, dtype)
    np.testing.assert_allclose(got, sgd_reference(p0, grads, 0.01, momentum, nesterov),
                               atol=TOL[dtype], rtol=0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("eps", [1e-7, 1e-1])  # a large epsilon exposes where it is added
def test_adam_matches_keras(dtype, eps):
    p0 = np.linspace(-1, 1, 6).reshape(2, 3)
    grads = _grads(p0.shape, seed=1)
    opt = keras.optimizers.Adam(learning_rate=0.01, beta_1=0.8, beta_2=0.99, epsilon=eps)
    got = _run(opt, p0, grads, dtype)
    np.testing.assert_allclose(got, adam_reference(p0, grads, 0.01, 0.8, 0.99, eps),
                               atol=TOL[dtype], rtol=0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_adamw_matches_keras(dtype):
    p0 = np.linspace(-1, 1, 6).reshape(2, 3)
    grads = _grads(p0.shape, seed=2)
    opt = keras.optimizers.AdamW(learning_rate=0.01, weight_decay=0.1)
    got = _run(opt, p0, grads, dtype)
    want = adam_reference(p0, grads, 0.01, 0.9, 0.999, 1e-7, weight_decay=0.1)
    np.testing.assert_allclose(got, want, atol=TOL[dtype], rtol=0)
    # the decay is decoupled: it differs from Adam on a gradient with an L2 term
    l2 = adam_reference(p0, grads, 0.01, 0.9, 0.999, 1e-7)
    assert np.abs(want - l2).max() > 1e-4


def test_adamw_defaults_and_exclusion():
    opt = keras.optimizers.AdamW()
    assert (opt.weight_decay, opt.learning_rate, opt.epsilon) == (0.004, 0.001, 1e-7)
    opt = keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5,
                                 exclude_from_weight_decay=["bias"])
    w, b = tg.Variable([1.0], name="dense/kernel"), tg.Variable([1.0], name="dense/bias")
    opt.apply_gradients([(tg.constant([0.0]), w), (tg.constant([0.0]), b)])
    np.testing.assert_allclose(w.numpy(), [0.95], rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), [1.0])
    with pytest.raises(ValueError, match="AdamW: weight_decay"):
        keras.optimizers.AdamW(weight_decay=-1.0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_adagrad_matches_keras(dtype):
    p0 = np.linspace(-1, 1, 6).reshape(2, 3)
    grads = _grads(p0.shape, seed=3)
    got = _run(keras.optimizers.Adagrad(learning_rate=0.05), p0, grads, dtype)
    np.testing.assert_allclose(got, adagrad_reference(p0, grads, 0.05, 0.1, 1e-7),
                               atol=TOL[dtype], rtol=0)


def test_keras_optimizers_are_tapegpus():
    assert keras.optimizers.Adam is tg.optimizers.Adam
    assert keras.optimizers.SGD is tg.optimizers.SGD
    assert keras.optimizers.AdamW is tg.optimizers.AdamW
    assert isinstance(keras.optimizers.get("adam"), tg.optimizers.Adam)
    with pytest.raises(ValueError, match="Could not interpret optimizer identifier"):
        keras.optimizers.get("adafactor")


def rmsprop_reference(p, grads, lr, rho, momentum, eps, centered):
    v = np.zeros_like(p)
    a = np.zeros_like(p)
    m = np.zeros_like(p)
    for g in grads:
        v = rho * v + (1 - rho) * g * g
        if centered:
            a = rho * a + (1 - rho) * g
            d = v - a * a + eps
        else:
            d = v + eps
        inc = lr * g / np.sqrt(d)  # epsilon inside the square root (Keras 3)
        if momentum > 0:
            m = momentum * m + inc
            p = p - m
        else:
            p = p - inc
    return p


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("momentum,centered", [(0.0, False), (0.9, False), (0.5, True)])
def test_rmsprop_matches_keras(dtype, momentum, centered):
    p0 = np.linspace(-1, 1, 6).reshape(2, 3)
    grads = _grads(p0.shape, seed=4)
    opt = keras.optimizers.RMSprop(learning_rate=0.01, momentum=momentum, centered=centered,
                                   epsilon=1e-3)
    got = _run(opt, p0, grads, dtype)
    want = rmsprop_reference(p0, grads, 0.01, 0.9, momentum, 1e-3, centered)
    np.testing.assert_allclose(got, want, atol=TOL[dtype], rtol=0)
