"""A sweep recorded by an outer tape (higher order) runs a step whose values no tape tracks
(a loss's mean from the seed) as the array sweep runs it: the same bits as the recorded rule,
and never for steps that a tape records or whose rules hold tensors of their own."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.autodiff import sweep


@pytest.fixture
def on_arrays(monkeypatch):
    calls = []
    real = sweep._on_arrays

    def spy(op, g, e, reach, batch_ndim):
        calls.append(op.name)
        return real(op, g, e, reach, batch_ndim)
    monkeypatch.setattr(sweep, "_on_arrays", spy)
    return calls


def _hvp(params, v, x, labels):
    with tg.GradientTape() as outer:
        outer.watch(params)
        with tg.GradientTape() as inner:
            inner.watch(params)
            h = tg.tanh(tg.matmul(x, params[0]) + params[1])
            loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(
                labels, tg.matmul(h, params[2])))
        gs = inner.gradient(loss, params)
        dot = tg.add_n([tg.reduce_sum(g * u) for g, u in zip(gs, v)])
    return outer.gradient(dot, params)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_constant_steps_keep_the_recorded_rules_bits(seed, on_arrays, monkeypatch):
    rng = np.random.default_rng(seed)
    shapes = [(6, 5), (5,), (5, 3)]
    params = [tg.constant(rng.standard_normal(s)) for s in shapes]
    v = [tg.constant(rng.standard_normal(s)) for s in shapes]
    x = tg.constant(rng.standard_normal((4, 6)))
    labels = tg.constant(rng.integers(0, 3, 4).astype(np.int32))
    fast = _hvp(params, v, x, labels)
    assert on_arrays == ["reduce_mean"]  # the seed's step only: the rest is recorded
    monkeypatch.setattr(sweep, "_constant", lambda g, saved: False)
    slow = _hvp(params, v, x, labels)
    assert len(on_arrays) == 1
    for a, b in zip(fast, slow):
        assert a.numpy().tobytes() == b.numpy().tobytes()


def test_steps_of_custom_gradients_stay_recorded(on_arrays):
    # the rule closes over x, which the outer tape tracks: on arrays, d2 would be lost
    x = tg.constant([0.3, 0.7], dtype=tg.float64)

    @tg.custom_gradient
    def f(x):
        def grad(dy):
            return dy * tg.cos(x)
        return tg.sin(x), grad

    with tg.GradientTape() as t2:
        t2.watch(x)
        with tg.GradientTape() as t1:
            t1.watch(x)
            y = tg.reduce_mean(f(x))
        d1 = t1.gradient(y, x)
    d2 = t2.gradient(d1, x)
    np.testing.assert_allclose(d2.numpy(), -np.sin(x.numpy()) / 2, rtol=1e-12)
    assert on_arrays == ["reduce_mean"]


def test_a_tracked_cotangent_is_recorded(on_arrays):
    # output_gradients that depend on the outer tape's source: every step is recorded
    x = tg.constant([0.3, -1.2, 2.0], dtype=tg.float64)
    with tg.GradientTape() as outer:
        outer.watch(x)
        with tg.GradientTape() as inner:
            inner.watch(x)
            y = tg.reduce_mean(tg.tanh(x) * x)
        g = inner.gradient(y, x, output_gradients=tg.reduce_sum(x))
    h = outer.gradient(g, x)
    assert on_arrays == []
    xn = x.numpy()
    t = np.tanh(xn)
    d1 = (t + xn * (1 - t * t)) / 3  # dy/dx
    d2 = (2 * (1 - t * t) - 2 * xn * t * (1 - t * t)) / 3  # its derivative, elementwise
    np.testing.assert_allclose(h.numpy(), d1.sum() + xn.sum() * d2, rtol=1e-12)
