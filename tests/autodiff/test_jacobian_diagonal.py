"""Eager `tape.jacobian` of per-example losses: the sweep keeps its cotangents diagonal
(autodiff/jacobian.py, `_DiagonalMode`), as tg.function's diagonal pass does, and computes what
the batched sweep on the identity basis computes (`options.diagonal = False`); where the
structure does not hold (ops that mix the batch, ops without a rule) it falls back to the full
value and stays right."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.autodiff import jacobian as J
from tapegpu.core.options import options

SINGLE_DEVICE = True  # the array sweep on numpy

B, F, H, C = 6, 5, 7, 3  # batch, features, hidden, classes: distinct, to tell axes apart


@pytest.fixture
def diagonal_sweeps(monkeypatch):
    """How many Jacobians took the diagonal sweep."""
    calls = []
    sweep = J._diagonal_sweep
    monkeypatch.setattr(J, "_diagonal_sweep", lambda *a: calls.append(1) or sweep(*a))
    return calls


@pytest.fixture
def materialised(monkeypatch):
    """The shapes of the diagonal cotangents that were rebuilt in full."""
    shapes = []
    full = J.Diagonal.full

    def counting(self, xp):
        shapes.append(self.shape)
        return full(self, xp)
    monkeypatch.setattr(J.Diagonal, "full", counting)
    return shapes


def _both(fn):
    """fn() with the diagonal sweep, and with the batched sweep on the identity basis."""
    got = fn()
    options.diagonal = False
    try:
        want = fn()
    finally:
        options.diagonal = True
    return got, want


def _assert_close(got, want, rtol=2e-5, atol=2e-6):
    got, want = tg.nest.flatten(got), tg.nest.flatten(want)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=rtol, atol=atol)


def _data(seed=1):
    rng = np.random.default_rng(seed)
    x = tg.constant(rng.standard_normal((B, F)).astype(np.float32))
    labels = tg.constant(rng.integers(0, C, B).astype(np.int32))
    target = tg.constant(rng.standard_normal((B, C)).astype(np.float32))
    vs = [tg.Variable(rng.standard_normal((F, H)).astype(np.float32) * 0.5),
          tg.Variable(rng.standard_normal((H, C)).astype(np.float32) * 0.5),
          tg.Variable(rng.standard_normal(H).astype(np.float32) * 0.1),
          tg.Variable(rng.standard_normal(C).astype(np.float32) * 0.1)]
    return x, labels, target, vs


@pytest.mark.parametrize("loss", ["xent", "squared", "log_softmax"])
@pytest.mark.parametrize("act", ["tanh", "relu", "sigmoid"])
def test_per_example_gradients_stay_diagonal(materialised, diagonal_sweeps, act, loss):
    x, labels, target, vs = _data()
    activation = {"tanh": tg.tanh, "relu": tg.nn.relu, "sigmoid": tg.sigmoid}[act]

    def jac():
        with tg.GradientTape() as tape:
            h = activation(tg.matmul(x, vs[0]) + vs[2])
            z = tg.matmul(h, vs[1]) + vs[3]
            if loss == "xent":
                losses = tg.nn.sparse_softmax_cross_entropy_with_logits(labels, z)
            elif loss == "squared":
                losses = tg.reduce_mean(tg.square(z - target), axis=1)
            else:
                losses = -tg.reduce_sum(tg.nn.log_softmax(z) * target, axis=-1)
        return tape.jacobian(losses, vs)
    got, want = _both(jac)
    assert diagonal_sweeps == [1] and materialised == []
    _assert_close(got, want)
    assert got[0].shape == (B, F, H)


def test_the_per_example_gradients_are_each_examples_gradient():
    x, labels, _, vs = _data(2)

    def losses_of(xs, ys):
        h = tg.tanh(tg.matmul(xs, vs[0]) + vs[2])
        return tg.nn.sparse_softmax_cross_entropy_with_logits(ys, tg.matmul(h, vs[1]) + vs[3])
    with tg.GradientTape() as tape:
        losses = losses_of(x, labels)
    per_example = tape.jacobian(losses, vs)
    for i in range(B):
        with tg.GradientTape() as tape:
            loss = tg.reduce_sum(losses_of(x[i:i + 1], labels[i:i + 1]))
        for a, b in zip(per_example, tape.gradient(loss, vs)):
            np.testing.assert_allclose(a.numpy()[i], b.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mix", ["centre", "batch_sum", "batch_max"])
def test_ops_that_mix_the_batch_fall_back_and_stay_right(materialised, mix):
    x, labels, _, vs = _data(3)

    def jac():
        with tg.GradientTape() as tape:
            h = tg.tanh(tg.matmul(x, vs[0]) + vs[2])
            if mix == "centre":  # every example's h depends on the others'
                h = h - tg.reduce_mean(h, axis=0)
            elif mix == "batch_sum":
                h = h * tg.reduce_sum(h)
            else:
                h = h * tg.reduce_max(h, axis=0, keepdims=True)
            losses = tg.nn.sparse_softmax_cross_entropy_with_logits(
                labels, tg.matmul(h, vs[1]) + vs[3])
        return tape.jacobian(losses, vs)
    got, want = _both(jac)
    assert materialised  # the mixing op's cotangent is the full value
    _assert_close(got, want)


def test_transposed_products_a_watched_input_and_softmax_over_the_batch(materialised):
    x, labels, _, vs = _data(4)
    wt = tg.Variable(np.ascontiguousarray(vs[0].numpy().T))  # (H, F)

    def jac():
        with tg.GradientTape() as tape:
            tape.watch(x)
            h = tg.nn.relu(tg.matmul(x, wt, transpose_b=True))            # (B, H)
            z = tg.matmul(tg.transpose(vs[1]), h, transpose_b=True)       # (C, B)
            p = tg.nn.softmax(z, axis=0)                                  # over the batch
            losses = tg.reduce_sum(z * p, axis=0)                         # (B,)
        return tape.jacobian(losses, [x, wt, vs[1]])
    got, want = _both(jac)
    _assert_close(got, want)
    assert got[0].shape == (B, B, F)


def test_xt_products_and_a_persistent_tape_twice():
    x, labels, _, vs = _data(5)
    xt = tg.constant(np.ascontiguousarray(x.numpy().T))  # (F, B)

    def jac():
        with tg.GradientTape(persistent=True) as tape:
            h = tg.tanh(tg.matmul(xt, vs[0], transpose_a=True) + vs[2])
            losses = tg.nn.sparse_softmax_cross_entropy_with_logits(
                labels, tg.matmul(h, vs[1]) + vs[3])
        first = tape.jacobian(losses, vs)
        second = tape.jacobian(losses, vs)
        _assert_close(first, second, rtol=0, atol=0)
        return first
    got, want = _both(jac)
    _assert_close(got, want)


def test_a_non_persistent_tape_is_spent_and_unconnected_sources_stay_none():
    x, labels, _, vs = _data(6)
    other = tg.Variable(np.ones(3, np.float32))
    with tg.GradientTape() as tape:
        h = tg.tanh(tg.matmul(x, vs[0]))
        losses = tg.reduce_sum(h, axis=1)
    got = tape.jacobian(losses, [vs[0], other])
    assert got[1] is None
    assert got[0].shape == (B, F, H)
    with pytest.raises(RuntimeError):
        tape.jacobian(losses, vs[0])


def test_a_conv_net_falls_back_where_no_rule_applies(materialised):
    rng = np.random.default_rng(7)
    x = tg.constant(rng.standard_normal((4, 6, 6, 2)).astype(np.float32))
    w = tg.Variable(rng.standard_normal((3, 3, 2, 3)).astype(np.float32) * 0.3)
    v = tg.Variable(rng.standard_normal((27, 2)).astype(np.float32) * 0.3)

    def jac():
        with tg.GradientTape() as tape:
            h = tg.nn.max_pool2d(tg.nn.relu(tg.nn.conv2d(x, w, 1, "SAME")), 2, 2, "SAME")
            z = tg.matmul(tg.reshape(h, (4, -1)), v)
            losses = tg.reduce_sum(tg.square(z), axis=1)
        return tape.jacobian(losses, [w, v])
    got, want = _both(jac)
    assert materialised
    _assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_targets_that_are_not_per_example_take_the_basis(materialised, diagonal_sweeps):
    x, labels, _, vs = _data(8)
    with tg.GradientTape(persistent=True) as tape:
        z = tg.matmul(tg.tanh(tg.matmul(x, vs[0])), vs[1])   # (B, C): rank 2
        one = tg.reduce_sum(z, axis=1)[:1]                    # (1,)
    for target in (z, one):
        got = tape.jacobian(target, vs[:2])
        options.diagonal = False
        try:
            want = tape.jacobian(target, vs[:2])
        finally:
            options.diagonal = True
        _assert_close(got, want, rtol=0, atol=0)
    assert materialised == [] and diagonal_sweeps == []
