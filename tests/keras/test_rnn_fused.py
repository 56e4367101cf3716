"""The fused recurrent cells (tg.nn.lstm_cell, tg.nn.gru_cell) inside Keras' LSTM and GRU: which
path a layer runs, that both paths give the same outputs and gradients (float32: within
rtol 1e-5, atol 1e-6; on the emulator and numpy they agree bit for bit in practice, since the
kernels compute the composite ops' IEEE operations in their order), launches per time step on
cuda_emu, empty batches, NaNs, tg.function against eager, second-order gradients."""
import collections

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.keras.layers import rnn

L = tg.keras.layers
TOL = dict(rtol=1e-5, atol=1e-6)


@pytest.fixture
def force_path(monkeypatch):
    """force_path(fused): every LSTMCell/GRUCell(reset_after) step by the fused op (True, on
    any backend: on numpy the op's reference) or by the composite formulas (False)."""
    def force(fused):
        monkeypatch.setattr(rnn._Cell, "_fuses",
                            lambda self, x: fused and self._FUSED is not None)
    return force


def _layer(kind, **kw):
    init = dict(kernel_initializer=tg.keras.initializers.GlorotUniform(seed=1),
                recurrent_initializer=tg.keras.initializers.Orthogonal(seed=2),
                bias_initializer=tg.keras.initializers.RandomNormal(seed=3))
    return (L.LSTM if kind == "lstm" else L.GRU)(5, **init, **kw)


def _run(layer, x, mask=None, training=False):
    """Outputs and the gradients of a weighted sum of them w.r.t. the weights and x."""
    with tg.GradientTape() as tape:
        tape.watch(x)
        out = layer(x, mask=mask, training=training)
        outs = out if isinstance(out, (list, tuple)) else [out]
        loss = sum(tg.reduce_sum(o * tg.sin(o + float(k))) for k, o in enumerate(outs))
    grads = tape.gradient(loss, layer.trainable_variables + [x])
    return [o.numpy() for o in outs], [g.numpy() for g in grads]


def _both_paths(force_path, make, x, measure=_run, **kw):
    """`measure(layer, x, **kw)` by the composite path and by the fused one, the layers made
    by `make()` with the same weights."""
    results = []
    for fused in (False, True):
        force_path(fused)
        layer = make()
        layer(x)  # build, then the same weights for both paths
        if results:
            layer.set_weights(results[0][0])
        results.append((layer.get_weights(), measure(layer, x, **kw)))
    return results[0][1], results[1][1]


def _assert_close(a, b):
    for u, v in zip(a[0] + a[1], b[0] + b[1]):
        np.testing.assert_allclose(u, v, **TOL)


CASES = [dict(), dict(return_sequences=True), dict(go_backwards=True, return_state=True),
         dict(use_bias=False, return_sequences=True), dict(dropout=0.3, recurrent_dropout=0.4,
                                                           seed=7)]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(c) or "default")
def test_fused_equals_composite(kind, case, force_path):
    rng = np.random.default_rng(0)
    x = tg.constant(rng.standard_normal((3, 4, 6)).astype(np.float32))
    training = "dropout" in case
    ref, got = _both_paths(force_path, lambda: _layer(kind, **case), x, training=training)
    _assert_close(ref, got)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_fused_equals_composite_with_a_mask(kind, force_path):
    rng = np.random.default_rng(1)
    x = tg.constant(rng.standard_normal((3, 5, 4)).astype(np.float32))
    mask = tg.constant(np.array([[1, 1, 0, 1, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1]], bool))
    ref, got = _both_paths(force_path, lambda: _layer(kind, return_sequences=True), x,
                           mask=mask)
    _assert_close(ref, got)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_empty_batch(kind, force_path):
    x = tg.zeros((0, 4, 6))
    ref, got = _both_paths(force_path, lambda: _layer(kind, return_state=True), x)
    assert got[0][0].shape == (0, 5)
    _assert_close(ref, got)
    assert all(not np.any(g) for g in got[1])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_nan_stays_in_its_example(kind, force_path):
    a = np.random.default_rng(2).standard_normal((3, 4, 6)).astype(np.float32)
    a[1, 2, 3] = np.nan
    ref, got = _both_paths(force_path, lambda: _layer(kind), tg.constant(a))
    out = got[0][0]
    assert np.isnan(out[1]).all() and np.isfinite(out[[0, 2]]).all()
    np.testing.assert_array_equal(np.isnan(ref[0][0]), np.isnan(out))
    np.testing.assert_allclose(ref[0][0][[0, 2]], out[[0, 2]], **TOL)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_float64_gradients_match_finite_differences(kind, force_path):
    force_path(True)
    rng = np.random.default_rng(3)
    layer = _layer(kind, dtype="float64")
    x = tg.constant(rng.standard_normal((2, 3, 4)))
    layer(x)
    theory, numeric = tg.test.compute_gradient(lambda v: tg.reduce_sum(layer(v) ** 2), [x])
    np.testing.assert_allclose(theory[0], numeric[0], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_traced_equals_eager(kind, force_path):
    force_path(True)
    layer = _layer(kind, return_sequences=True)
    layer(tg.zeros((2, 3, 4)))

    def step(x):
        with tg.GradientTape() as tape:
            tape.watch(x)
            loss = tg.reduce_sum(tg.tanh(layer(x)) * x[..., :1])
        return loss, tape.gradient(loss, layer.trainable_variables + [x])

    traced = tg.function(step)
    for call in range(3):
        x = tg.constant(np.random.default_rng(10 + call).standard_normal((2, 3, 4))
                        .astype(np.float32))
        want, got = step(x), traced(x)
        for a, b in zip([want[0]] + list(want[1]), [got[0]] + list(got[1])):
            np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_gradient_of_a_gradient(kind, force_path):
    """d/dW of |d loss / d x|^2: the fused op's rules recorded as composite ops."""
    x = tg.constant(np.random.default_rng(4).standard_normal((2, 3, 4)))

    def penalty_gradients(layer, x):
        with tg.GradientTape() as outer:
            with tg.GradientTape() as inner:
                inner.watch(x)
                loss = tg.reduce_sum(layer(x) ** 2)
            gx = inner.gradient(loss, x)
            penalty = tg.reduce_sum(gx * gx)
        return [g.numpy() for g in outer.gradient(penalty, layer.trainable_variables)]
    composite, fused = _both_paths(force_path, lambda: _layer(kind, dtype="float64"), x,
                                   penalty_gradients)
    for a, b in zip(composite, fused):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_jacobian_and_forward_mode(kind, force_path):
    """Batched VJPs (batch_jacobian) and JVPs through the fused cells equal the composite's."""
    rng = np.random.default_rng(5)
    x = tg.constant(rng.standard_normal((2, 3, 4)))
    v = tg.constant(rng.standard_normal((2, 3, 4)))

    def jacobian_and_jvp(layer, x):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
        jac = tape.batch_jacobian(y, x).numpy()
        with tg.autodiff.ForwardAccumulator(x, v) as acc:
            y = layer(x)
        return jac, acc.jvp(y).numpy()
    composite, fused = _both_paths(force_path, lambda: _layer(kind, dtype="float64"), x,
                                   jacobian_and_jvp)
    for a, b in zip(composite, fused):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def _ops_called(monkeypatch, fn):
    calls = collections.Counter()
    for name in ("lstm_cell", "gru_cell"):
        real = getattr(rnn.ops, name)

        def spy(*args, _real=real, _name=name):
            calls[_name] += 1
            return _real(*args)
        monkeypatch.setattr(rnn.ops, name, spy)
    fn()
    return dict(calls)


@pytest.mark.parametrize("layer, fused", [
    (lambda: L.LSTM(4), "lstm_cell"), (lambda: L.GRU(4), "gru_cell"),
    (lambda: L.LSTM(4, activation="relu"), None),
    (lambda: L.LSTM(4, recurrent_activation="softsign"), None),
    (lambda: L.GRU(4, reset_after=False), None), (lambda: L.SimpleRNN(4), None),
    (lambda: L.RNN([L.LSTMCell(4), L.GRUCell(4)]), "both")],
    ids=["lstm", "gru", "lstm_relu", "lstm_softsign", "gru_reset_before", "simple_rnn",
         "stacked"])
def test_which_path_runs(layer, fused, monkeypatch, tg_device):
    """The fused ops run on backends with CUDA kernels (GPU, cuda_emu) for Keras' default
    activations and GRU's reset_after=True; numpy and every other case run the composite."""
    calls = _ops_called(monkeypatch, lambda: layer()(tg.ones((2, 3, 5))))
    if tg_device == "numpy" or fused is None:
        assert calls == {}
    elif fused == "both":
        assert calls == {"lstm_cell": 3, "gru_cell": 3}
    else:
        assert calls == {fused: 3}


def test_a_trace_runs_the_composite(monkeypatch):
    layer = L.LSTM(4)
    with tg.device("cuda_emu"):
        calls = _ops_called(monkeypatch, lambda: tg.function(layer)(tg.ones((2, 3, 5))))
    assert calls == {}


def test_float16_runs_the_composite(monkeypatch):
    with tg.device("cuda_emu"):
        calls = _ops_called(monkeypatch,
                            lambda: L.LSTM(4, dtype="float16")(tg.ones((2, 3, 5), tg.float16)))
    assert calls == {}


def _launches_per_step(kind, steps):
    """Launches of one training step's forward and backward through the layer alone."""
    dev = tg.constant(0.0)._dev
    layer = _layer(kind)
    x = tg.constant(np.ones((2, steps, 3), np.float32))
    layer(x)
    dev.launches.clear()
    with tg.GradientTape() as tape:
        y = layer(x)
    fwd = collections.Counter(dev.launches)
    dev.launches.clear()
    tape.gradient(y, layer.trainable_variables, output_gradients=tg.ones_like(y))
    return fwd, collections.Counter(dev.launches)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_one_fused_launch_per_step_each_way(kind):
    """On cuda_emu a time step is its GEMMs and one fused kernel forward; backward one fused
    kernel, the GEMMs of the weights' and the state's cotangents and the bias' column sum
    (plus, for the LSTM, the two views of its packed (h, c) output)."""
    with tg.device("cuda_emu"):
        f3, b3 = _launches_per_step(kind, 3)
        f4, b4 = _launches_per_step(kind, 4)
    fwd, bwd = f4 - f3, b4 - b3
    assert dict(fwd) == {"matmul": 2, f"tapegpu_{kind}_cell_fwd_f32": 1}
    want = {f"tapegpu_{kind}_cell_bwd_f32": 1, "matmul.vjp": 3, "tapegpu_sum_middle_fwd_f32": 1}
    if kind == "lstm":
        want["getitem.vjp"] = 2
    assert dict(bwd) == want
