"""Second-order gradients through piecewise-linear activations (relu, relu6, leaky_relu), as
TensorFlow gives them: the activation's backward (TF's ReluGrad...) depends on the features
with a zero derivative, so a variable that enters a gradient only through the activation's
derivative gets zeros, not None. A WGAN-GP gradient penalty is the classic case: its gradient
w.r.t. the critic's hidden biases is zeros in TF; only the last bias, which the input gradient
does not depend on at all, is None."""
import numpy as np
import pytest

import tapegpu as tg

ALPHA = 0.2  # leaky_relu's default slope


def _critic_weights(seed=0):
    rng = np.random.default_rng(seed)
    w1, b1 = rng.normal(size=(3, 5)), rng.normal(size=5) + 1.0
    w2, b2 = rng.normal(size=(5, 4)), rng.normal(size=4)
    w3, b3 = rng.normal(size=(4, 1)), rng.normal(size=1)
    x = rng.normal(size=(6, 3))
    return [w1, b1, w2, b2, w3, b3], x


def _penalty_gradients_by_hand(params, x):
    """The gradient penalty mean((|dD/dx| - 1)^2) of D(x) = leaky(relu(x W1 + b1) W2 + b2) w3
    + b3 and its gradients w.r.t. W1, W2, w3, by hand in numpy: the masks are constant where
    the gradient exists, so dD/dx = ((d2 * w3) W2^T * m1) W1^T is multilinear in W1, W2, w3."""
    w1, b1, w2, b2, w3, _ = params
    h1 = x @ w1 + b1
    m1 = (h1 > 0).astype(float)
    h2 = np.maximum(h1, 0) @ w2 + b2
    d2 = np.where(h2 > 0, 1.0, ALPHA)
    u2 = d2 * w3[:, 0]
    u1 = m1 * (u2 @ w2.T)
    gx = u1 @ w1.T
    n = np.linalg.norm(gx, axis=1, keepdims=True)
    big_g = 2.0 / len(x) * (n - 1.0) / n * gx  # d penalty / d gx
    p = m1 * (big_g @ w1)
    return {"W1": big_g.T @ u1, "W2": p.T @ u2, "w3": (d2 * (p @ w2)).sum(0)[:, None]}


def _penalty(critic, variables, x):
    with tg.GradientTape() as outer:
        with tg.GradientTape() as inner:
            inner.watch(x)
            score = critic(x)
        g = inner.gradient(score, x)
        penalty = tg.reduce_mean((tg.norm(g, axis=1) - 1.0) ** 2)
    return outer.gradient(penalty, variables)


def test_wgan_gp_penalty_gradients_are_tfs():
    params, xs = _critic_weights()
    vs = [tg.Variable(p) for p in params]
    w1, b1, w2, b2, w3, b3 = vs

    def critic(x):
        h = tg.nn.relu(tg.matmul(x, w1) + b1)
        h = tg.nn.leaky_relu(tg.matmul(h, w2) + b2, alpha=ALPHA)
        return tg.matmul(h, w3) + b3

    grads = _penalty(critic, vs, tg.constant(xs))
    want = _penalty_gradients_by_hand(params, xs)
    assert [g is None for g in grads] == [False] * 5 + [True]  # TF: only the last bias
    for got, name in zip(grads[0::2], ("W1", "W2", "w3")):
        np.testing.assert_allclose(got.numpy(), want[name], rtol=1e-10, atol=1e-12)
    for got, v in ((grads[1], b1), (grads[3], b2)):  # through the masks only: zeros
        assert got.shape == v.shape and got.dtype == tg.float64
        assert np.array_equal(got.numpy(), np.zeros(v.shape))


def test_wgan_gp_with_dense_layers():
    """The same with Keras-style layers (Dense's fused bias + relu, then leaky_relu): the two
    hidden biases get zeros, the output bias None."""
    params, xs = _critic_weights(1)
    model = tg.layers.Sequential([tg.layers.Dense(5, activation="relu"),
                                  tg.layers.Dense(4, activation="leaky_relu"),
                                  tg.layers.Dense(1)])
    model(tg.constant(xs))
    for layer, (w, b) in zip(model.layers, zip(params[0::2], params[1::2])):
        layer.kernel.assign(w)
        layer.bias.assign(b)
    variables = [v for layer in model.layers for v in (layer.kernel, layer.bias)]
    grads = _penalty(model, variables, tg.constant(xs))
    assert [g is None for g in grads] == [False] * 5 + [True]
    want = _penalty_gradients_by_hand(params, xs)
    for got, name in zip(grads[0::2], ("W1", "W2", "w3")):
        np.testing.assert_allclose(got.numpy(), want[name], rtol=1e-10, atol=1e-12)
    assert not grads[1].numpy().any() and not grads[3].numpy().any()


@pytest.mark.parametrize("act", [tg.nn.relu, tg.nn.relu6, tg.nn.leaky_relu],
                         ids=["relu", "relu6", "leaky_relu"])
def test_a_shift_seen_only_by_the_derivative_gets_zeros(act):
    """d/db of sum(d act(x + b) / dx) is 0 (the derivative is piecewise constant), as a
    tensor; jacobians and a persistent outer tape agree."""
    x = tg.constant([-1.5, -0.25, 0.5, 2.0, 7.0])
    b = tg.Variable([0.1, 0.2, 0.3, 0.4, 0.5])
    with tg.GradientTape(persistent=True) as outer:
        with tg.GradientTape() as inner:
            inner.watch(x)
            y = act(x + b)
        dydx = inner.gradient(y, x)
        total = tg.reduce_sum(dydx)
    slope = {"relu": 0.0, "relu6": 0.0, "leaky_relu": ALPHA}[act.__name__]
    shifted = x.numpy() + b.numpy()
    inside = (shifted > 0) & ((shifted < 6) if act is tg.nn.relu6 else True)
    assert dydx.numpy().tolist() == np.where(inside, 1.0, slope).astype(np.float32).tolist()
    grad = outer.gradient(total, b)
    assert grad is not None and grad.shape == (5,) and not grad.numpy().any()
    jac = outer.jacobian(dydx, b)
    assert jac is not None and jac.shape == (5, 5) and not jac.numpy().any()


def test_inside_a_traced_function_too():
    params, xs = _critic_weights(2)
    vs = [tg.Variable(p) for p in params]
    w1, b1, w2, b2, w3, b3 = vs

    def critic(x):
        h = tg.nn.relu(tg.matmul(x, w1) + b1)
        h = tg.nn.leaky_relu(tg.matmul(h, w2) + b2, alpha=ALPHA)
        return tg.matmul(h, w3) + b3

    traced = tg.function(lambda x: _penalty(critic, vs, x))
    for seed in (2, 3):  # a second call with other inputs replays the trace
        xs = _critic_weights(seed)[1]
        grads = traced(tg.constant(xs))
        assert [g is None for g in grads] == [False] * 5 + [True]
        want = _penalty_gradients_by_hand(params, xs)
        np.testing.assert_allclose(grads[0].numpy(), want["W1"], rtol=1e-10, atol=1e-12)
        assert not grads[1].numpy().any() and not grads[3].numpy().any()


def test_first_order_gradients_keep_the_plain_backward():
    """Where nothing differentiates the sweep, relu's backward stays greater + where, the ops
    the array sweep's kernels and tg.function's replay run in one pass: a traced training step
    holds no relu_grad."""
    w = tg.Variable(np.ones((3, 4), np.float32))

    @tg.function
    def step(x):
        with tg.GradientTape() as tape:
            loss = tg.reduce_sum(tg.nn.relu(tg.matmul(x, w)))
        return tape.gradient(loss, w)

    x = tg.constant(np.arange(6, dtype=np.float32).reshape(2, 3) - 2.0)
    names = [n.op.name for n in step.get_concrete_function(x).graph.nodes if n.kind == "op"]
    assert "relu_grad" not in names and "where" in names and "greater" in names
    mask = (x.numpy() @ w.numpy() > 0).astype(np.float32)
    np.testing.assert_array_equal(step(x).numpy(), x.numpy().T @ mask)
