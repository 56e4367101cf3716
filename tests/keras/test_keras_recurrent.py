"""keras.layers SimpleRNN/LSTM/GRU, their cells, RNN(cell) and Bidirectional: Keras 3's
formulas (checked against numpy written from Keras' equations, and against Keras 3's own
outputs and gradients saved in tests/keras/data/keras_recurrent_reference.npz, with the same
weights), weights' layout and defaults, output structure, gradients (finite differences) and
training."""

import numpy as np
import pytest

import tapegpu as tg
from keras_reference import indexed, reference_cases

keras = tg.keras
L = keras.layers
RNG = np.random.default_rng(0)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# -- Keras' equations in numpy: one step each ---------------------------------------------------

def np_simple_step(x, states, kernel, recurrent_kernel, bias):
    h = np.tanh(x @ kernel + bias + states[0] @ recurrent_kernel)
    return h, [h]


def np_lstm_step(x, states, kernel, recurrent_kernel, bias):
    h, c = states
    u = h.shape[-1]
    z = x @ kernel + h @ recurrent_kernel + bias
    i, f = sigmoid(z[:, :u]), sigmoid(z[:, u:2 * u])      # gate order i, f, c, o
    g, o = np.tanh(z[:, 2 * u:3 * u]), sigmoid(z[:, 3 * u:])
    c = f * c + i * g
    h = o * np.tanh(c)
    return h, [h, c]


def np_gru_step(x, states, kernel, recurrent_kernel, bias):
    """reset_after=True: bias[0] for the inputs, bias[1] for the state; gates z, r, h."""
    h = states[0]
    u = h.shape[-1]
    xw = x @ kernel + bias[0]
    hu = h @ recurrent_kernel + bias[1]
    z = sigmoid(xw[:, :u] + hu[:, :u])
    r = sigmoid(xw[:, u:2 * u] + hu[:, u:2 * u])
    hh = np.tanh(xw[:, 2 * u:] + r * hu[:, 2 * u:])
    h = z * h + (1 - z) * hh
    return h, [h]


def np_gru_before_step(x, states, kernel, recurrent_kernel, bias):
    """reset_after=False: one bias (inputs only); the reset gate scales h before its matmul."""
    h = states[0]
    u = h.shape[-1]
    xw = x @ kernel + bias
    z = sigmoid(xw[:, :u] + h @ recurrent_kernel[:, :u])
    r = sigmoid(xw[:, u:2 * u] + h @ recurrent_kernel[:, u:2 * u])
    hh = np.tanh(xw[:, 2 * u:] + (r * h) @ recurrent_kernel[:, 2 * u:])
    h = z * h + (1 - z) * hh
    return h, [h]


def np_run(step, x, states, weights, go_backwards=False):
    outs = []
    order = range(x.shape[1])[::-1] if go_backwards else range(x.shape[1])
    for t in order:
        out, states = step(x[:, t], states, *weights)
        outs.append(out)
    return np.stack(outs, axis=1), states


# kind -> (cell class, layer class, constructor kwargs, numpy step, gates, states)
KINDS = {
    "simple": (L.SimpleRNNCell, L.SimpleRNN, {}, np_simple_step, 1, 1),
    "lstm": (L.LSTMCell, L.LSTM, {}, np_lstm_step, 4, 2),
    "gru": (L.GRUCell, L.GRU, {}, np_gru_step, 3, 1),
    "gru_reset_before": (L.GRUCell, L.GRU, {"reset_after": False}, np_gru_before_step, 3, 1),
}
B, T, F, U = 3, 4, 5, 6


def random_weights(layer_or_cell, dtype=np.float64):
    weights = [RNG.normal(scale=0.4, size=v.shape).astype(dtype)
               for v in layer_or_cell.variables]
    layer_or_cell.set_weights(weights)
    return weights


def random_states(n, dtype=np.float64):
    return [RNG.normal(scale=0.5, size=(B, U)).astype(dtype) for _ in range(n)]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_cell_step_matches_keras_equations(kind):
    cell_cls, _, kw, np_step, _, n_states = KINDS[kind]
    cell = cell_cls(U, dtype="float64", **kw)
    x = RNG.normal(size=(B, F))
    states = random_states(n_states)
    cell(x, states)  # builds
    weights = random_weights(cell)
    out, new = cell(x, [tg.constant(s) for s in states])
    want_out, want_states = np_step(x, states, *weights)
    np.testing.assert_allclose(out.numpy(), want_out, rtol=1e-10, atol=1e-12)
    assert len(new) == n_states
    for got, want in zip(new, want_states):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_layer_sequence_matches_keras_equations(kind, go_backwards):
    _, layer_cls, kw, np_step, _, n_states = KINDS[kind]
    layer = layer_cls(U, return_sequences=True, return_state=True, go_backwards=go_backwards,
                      dtype="float64", **kw)
    x = RNG.normal(size=(B, T, F))
    init = random_states(n_states)
    layer(x, initial_state=init)
    weights = random_weights(layer)
    got = layer(x, initial_state=init)
    want_seq, want_states = np_run(np_step, x, init, weights, go_backwards)
    assert isinstance(got, tuple) and len(got) == 1 + n_states
    np.testing.assert_allclose(got[0].numpy(), want_seq, rtol=1e-10, atol=1e-12)
    for g, w in zip(got[1:], want_states):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-10, atol=1e-12)
    # without return_sequences: the last processed step's output
    last = layer_cls(U, go_backwards=go_backwards, dtype="float64", **kw)
    last(x)
    last.set_weights(weights)
    np.testing.assert_allclose(last(x, initial_state=init).numpy(), want_seq[:, -1],
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_weights_layout_and_defaults(kind):
    cell_cls, layer_cls, kw, _, gates, n_states = KINDS[kind]
    layer = layer_cls(U, **kw)
    layer(np.ones((2, T, F), np.float32))
    kernel, recurrent, bias = layer.variables
    assert [v.name.split("/")[-1] for v in layer.variables] == \
        ["kernel", "recurrent_kernel", "bias"]
    assert kernel.shape == (F, gates * U) and recurrent.shape == (U, gates * U)
    assert kernel.dtype == tg.float32
    bias_shape = (2, gates * U) if kind == "gru" else (gates * U,)
    assert bias.shape == bias_shape
    # recurrent_initializer 'orthogonal': the (U, gates*U) matrix has orthonormal rows
    r = recurrent.numpy().astype(np.float64)
    np.testing.assert_allclose(r @ r.T, np.eye(U), atol=1e-5)
    # kernel 'glorot_uniform': within sqrt(6 / (fan_in + fan_out)), and not constant
    limit = np.sqrt(6.0 / (F + gates * U))
    assert np.abs(kernel.numpy()).max() <= limit and kernel.numpy().std() > limit / 4
    want_bias = np.zeros(bias_shape)
    if kind == "lstm":  # unit_forget_bias=True: the forget gate's bias starts at one
        want_bias[U:2 * U] = 1.0
    np.testing.assert_array_equal(bias.numpy(), want_bias)
    assert layer.cell.state_size == ([U, U] if n_states == 2 else U)
    assert layer.units == U


def test_lstm_unit_forget_bias_false_and_bias_initializer():
    layer = L.LSTM(U, unit_forget_bias=False, bias_initializer="ones")
    layer(np.ones((1, 2, F), np.float32))
    np.testing.assert_array_equal(layer.cell.bias.numpy(), np.ones(4 * U))
    layer = L.LSTM(U, bias_initializer="ones")  # forget ones, the rest from bias_initializer
    layer(np.ones((1, 2, F), np.float32))
    np.testing.assert_array_equal(layer.cell.bias.numpy(), np.ones(4 * U))
    layer = L.LSTM(U, use_bias=False)
    layer(np.ones((1, 2, F), np.float32))
    assert len(layer.variables) == 2


def test_activation_arguments():
    x = RNG.normal(size=(B, T, F))
    layer = L.LSTM(U, activation=None, recurrent_activation="tanh", dtype="float64",
                   return_sequences=True)
    layer(x)
    w = random_weights(layer)

    def step(x, states, kernel, recurrent_kernel, bias):
        h, c = states
        z = x @ kernel + h @ recurrent_kernel + bias
        i, f, g, o = np.split(z, 4, axis=-1)
        c = np.tanh(f) * c + np.tanh(i) * g
        h = np.tanh(o) * c
        return h, [h, c]
    want, _ = np_run(step, x, random_states(0) + [np.zeros((B, U))] * 2, w)
    np.testing.assert_allclose(layer(x).numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("return_sequences", [False, True])
@pytest.mark.parametrize("return_state", [False, True])
def test_output_structure(return_sequences, return_state):
    x = np.ones((2, 7, 3), np.float32)
    for layer_cls, n_states in ((L.LSTM, 2), (L.GRU, 1), (L.SimpleRNN, 1)):
        out = layer_cls(5, return_sequences=return_sequences, return_state=return_state)(x)
        seq_shape = (2, 7, 5) if return_sequences else (2, 5)
        if return_state:
            assert isinstance(out, tuple)  # as Keras 3
            assert [t.shape for t in out] == [seq_shape] + [(2, 5)] * n_states
        else:
            assert isinstance(out, tg.Tensor) and out.shape == seq_shape


def test_go_backwards_reverses_the_reading_and_the_output_order():
    x = RNG.normal(size=(2, 5, 3)).astype(np.float32)
    fwd = L.GRU(4, return_sequences=True)
    bwd = L.GRU(4, return_sequences=True, go_backwards=True)
    fwd(x), bwd(x)
    bwd.set_weights(fwd.get_weights())
    # reading x backwards is reading the reversed x forwards; the output stays in that order
    np.testing.assert_allclose(bwd(x).numpy(), fwd(x[:, ::-1].copy()).numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(bwd(x).numpy(), fwd(x).numpy())


def test_state_passing_continues_a_sequence():
    """Two halves with the first's final states as the second's initial states equal the
    whole sequence (what stateful=True would do)."""
    x = RNG.normal(size=(2, 6, 3)).astype(np.float32)
    layer = L.LSTM(4, return_sequences=True, return_state=True)
    whole, h, c = layer(x)
    first, h1, c1 = layer(x[:, :3])
    second, h2, c2 = layer(x[:, 3:], initial_state=[h1, c1])
    np.testing.assert_allclose(second.numpy(), whole.numpy()[:, 3:], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c2.numpy(), c.numpy(), rtol=1e-5, atol=1e-6)


def test_errors():
    with pytest.raises(NotImplementedError, match="stateful"):
        L.LSTM(4, stateful=True)
    layer = L.GRU(4)
    with pytest.raises(ValueError, match="timesteps"):
        layer(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="mask"):
        L.GRU(4)(np.ones((2, 3, 1), np.float32), mask=np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="mask"):
        L.GRU(4)(np.ones((2, 3, 1), np.float32), mask=np.ones((2, 4), bool))
    with pytest.raises(ValueError, match="initial_state"):
        L.LSTM(4)(np.ones((2, 3, 1), np.float32), initial_state=[np.zeros((2, 4), np.float32)])
    with pytest.raises(TypeError, match="dtype"):
        L.GRU(4)(np.ones((2, 3, 1), np.float32), initial_state=[np.zeros((2, 4))])
    with pytest.raises(ValueError, match="state"):  # an LSTM cell takes [h, c]
        L.LSTMCell(4)(np.ones((2, 3), np.float32), [np.zeros((2, 4), np.float32)])
    with pytest.raises(ValueError, match="units"):
        L.LSTM(0)
    with pytest.raises(ValueError, match="dropout"):
        L.GRU(3, dropout=1.5)
    with pytest.raises(NotImplementedError, match="kernel_constraint"):
        L.SimpleRNN(3, kernel_constraint=lambda w: w)
    with pytest.raises(ValueError, match="use_cudnn"):
        L.LSTM(3, use_cudnn="yes")
    # Keras' autocast: a float64 input into a float32 layer is cast
    assert L.LSTM(3, dtype="float32")(np.ones((1, 2, 3), np.float64)).dtype == tg.float32
    assert L.LSTM(3, unroll=True)(np.ones((1, 2, 3), np.float32)).shape == (1, 3)


def test_dropout_masks_are_fixed_over_time_and_only_in_training():
    """With identity kernel, zero recurrent kernel and a linear activation the outputs are the
    dropped inputs: one mask for all steps, values 0 or 1 / (1 - rate)."""
    layer = L.SimpleRNN(4, activation=None, dropout=0.5, recurrent_dropout=0.5, seed=1,
                        return_sequences=True)
    x = np.ones((8, 5, 4), np.float32)
    layer(x)
    layer.set_weights([np.eye(4, dtype=np.float32), np.zeros((4, 4), np.float32),
                       np.zeros(4, np.float32)])
    np.testing.assert_array_equal(layer(x).numpy(), x)  # inference: no dropout
    y = layer(x, training=True).numpy()
    assert set(np.unique(y)) == {0.0, 2.0}
    np.testing.assert_array_equal(y, np.repeat(y[:, :1], 5, axis=1))  # same mask every step
    assert not np.array_equal(layer(x, training=True).numpy(), y)  # a new mask per call


def test_recurrent_dropout_in_training_only():
    x = RNG.normal(size=(4, 5, 3)).astype(np.float32)
    for layer in (L.LSTM(6, recurrent_dropout=0.5, seed=0), L.GRU(6, recurrent_dropout=0.5,
                                                                  seed=0)):
        plain = layer(x).numpy()
        np.testing.assert_array_equal(layer(x, training=False).numpy(), plain)
        assert not np.allclose(layer(x, training=True).numpy(), plain)


class MinimalRNNCell(L.Layer):
    """Keras' RNN guide's custom cell."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units),
                                      initializer="uniform", name="kernel")
        self.recurrent_kernel = self.add_weight(shape=(self.units, self.units),
                                                initializer="uniform", name="recurrent_kernel")

    def call(self, inputs, states):
        prev_output = states[0]
        h = tg.matmul(inputs, self.kernel)
        output = h + tg.matmul(prev_output, self.recurrent_kernel)
        return output, [output]


def test_rnn_with_a_custom_cell():
    x = RNG.normal(size=(B, T, F)).astype(np.float32)
    layer = L.RNN(MinimalRNNCell(U), return_sequences=True)
    y = layer(x).numpy()
    k, r = (v.numpy() for v in layer.variables)
    want, _ = np_run(lambda x, s: (x @ k + s[0] @ r, [x @ k + s[0] @ r]), x,
                     [np.zeros((B, U), np.float32)], [])
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    # and with a built-in cell it equals the corresponding layer with the same weights
    rnn = L.RNN(L.LSTMCell(U), return_state=True)
    lstm = L.LSTM(U, return_state=True)
    rnn(x), lstm(x)
    lstm.set_weights(rnn.get_weights())
    for a, b in zip(rnn(x), lstm(x)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("merge_mode", ["concat", "sum", "mul", "ave", None])
def test_bidirectional(merge_mode):
    x = RNG.normal(size=(B, T, F)).astype(np.float32)
    bi = L.Bidirectional(L.GRU(U, return_sequences=True), merge_mode=merge_mode)
    y = bi(x)
    assert len(bi.trainable_variables) == 6
    fw = bi.forward_layer(x).numpy()
    bw = bi.backward_layer(x).numpy()[:, ::-1]  # back in time order
    assert bi.backward_layer.go_backwards and not bi.forward_layer.go_backwards
    want = {"concat": np.concatenate([fw, bw], -1), "sum": fw + bw, "mul": fw * bw,
            "ave": (fw + bw) / 2, None: None}[merge_mode]
    if merge_mode is None:
        np.testing.assert_allclose(y[0].numpy(), fw, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(y[1].numpy(), bw, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-6, atol=1e-7)
    # the backward copy reads x from the end: its last output saw only x[:, -1]
    single = L.GRU(U)
    single(x[:, -1:])
    single.set_weights(bi.backward_layer.get_weights())
    np.testing.assert_allclose(bw[:, -1], single(x[:, -1:]).numpy(), rtol=1e-5, atol=1e-6)


def test_bidirectional_return_state():
    out = L.Bidirectional(L.LSTM(4, return_state=True))(np.ones((2, 3, 5), np.float32))
    assert [t.shape for t in out] == [(2, 8)] + [(2, 4)] * 4


def _directional_check(fn, params, rng, eps=1e-6, rtol=1e-6):
    """d/dt fn(params + t * v) at 0 by central differences equals <grad, v>."""
    with tg.GradientTape() as tape:
        loss = fn()
    grads = tape.gradient(loss, params)
    for p, g in zip(params, grads):
        base = p.numpy()
        v = rng.normal(size=base.shape)
        p.assign(base + eps * v)
        up = float(fn())
        p.assign(base - eps * v)
        down = float(fn())
        p.assign(base)
        numeric = (up - down) / (2 * eps)
        analytic = float(np.sum(g.numpy() * v))
        assert abs(numeric - analytic) <= rtol * max(1.0, abs(numeric)) + 1e-8, \
            (p.name, numeric, analytic)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_gradients_by_finite_differences(kind):
    _, layer_cls, kw, _, _, n_states = KINDS[kind]
    rng = np.random.default_rng(3)
    layer = layer_cls(3, return_sequences=True, return_state=True, dtype="float64", **kw)
    x = tg.Variable(rng.normal(size=(2, 3, 2)))
    h0 = [tg.Variable(rng.normal(scale=0.5, size=(2, 3))) for _ in range(n_states)]
    layer(x)
    random_weights(layer)
    target = rng.normal(size=(2, 3, 3))

    def loss():
        seq, *states = layer(x, initial_state=h0)
        return tg.reduce_sum((seq - target) ** 2) + tg.reduce_sum(states[-1] ** 3)
    _directional_check(loss, layer.trainable_variables + [x] + h0, rng)


def test_gradient_through_bidirectional_and_go_backwards():
    rng = np.random.default_rng(4)
    bi = L.Bidirectional(L.LSTM(2, return_sequences=True), merge_mode="mul", dtype="float64")
    x = tg.Variable(rng.normal(size=(2, 3, 2)))
    bi(x)
    random_weights(bi)
    _directional_check(lambda: tg.reduce_sum(tg.sin(bi(x))), bi.trainable_variables + [x], rng)


@pytest.mark.parametrize("layer_cls", [L.LSTM, L.GRU, L.SimpleRNN])
def test_training_a_tiny_model_reduces_the_loss(layer_cls):
    """Predict the running mean of a sequence's first feature at its end."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(32, 6, 2)).astype(np.float32)
    y = x[:, :, :1].mean(axis=1)
    tg.random.set_seed(0)
    model = keras.Sequential([keras.Input((6, 2)), layer_cls(8), L.Dense(1)])
    opt = keras.optimizers.Adam(0.02)
    losses = []
    for _ in range(40):
        with tg.GradientTape() as tape:
            loss = tg.reduce_mean((model(x, training=True) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        assert all(g is not None for g in grads)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        losses.append(float(loss))
    assert losses[-1] < 0.3 * losses[0], losses[::10]


def test_fit_and_functional_model():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(64, 5, 3)).astype(np.float32)
    y = (x[:, :, 0].sum(axis=1) > 0).astype(np.int64)
    tg.random.set_seed(6)
    inputs = keras.Input((5, 3))
    h = L.Bidirectional(L.GRU(8, return_sequences=True))(inputs)
    h = L.LSTM(8)(h)
    model = keras.Model(inputs, L.Dense(2)(h))
    model.compile(optimizer=keras.optimizers.Adam(0.02),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = model.fit(x, y, epochs=8, batch_size=16, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert model.predict(x, verbose=0).shape == (64, 2)


def test_orthogonal_initializer():
    init = tg.initializers.get("orthogonal")
    wide = init((3, 5), "float64").numpy()
    tall = init((5, 3), "float64").numpy()
    np.testing.assert_allclose(wide @ wide.T, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(tall.T @ tall, np.eye(3), atol=1e-12)
    cube = tg.initializers.Orthogonal(gain=2.0)((2, 2, 4), "float32")
    flat = cube.numpy().reshape(4, 4).astype(np.float64)
    assert cube.dtype == tg.float32
    np.testing.assert_allclose(flat @ flat.T, 4 * np.eye(4), atol=1e-5)
    a = tg.initializers.Orthogonal(seed=3)((4, 4)).numpy()
    np.testing.assert_array_equal(a, tg.initializers.Orthogonal(seed=3)((4, 4)).numpy())
    with pytest.raises(ValueError, match="rank"):
        init((4,))


def test_sequential_config_round_trip():
    model = keras.Sequential([keras.Input((5, 3)), L.GRU(4, return_sequences=True,
                                                         reset_after=False),
                              L.LSTM(2, go_backwards=True), L.Dense(1)])
    config = model.get_config()
    assert [e["class_name"] for e in config["layers"]] == ["InputLayer", "GRU", "LSTM", "Dense"]
    assert config["layers"][1]["config"]["reset_after"] is False
    clone = keras.Sequential.from_config(config)
    clone.set_weights(model.get_weights())
    x = RNG.normal(size=(2, 5, 3)).astype(np.float32)
    np.testing.assert_allclose(clone(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
    assert [type(layer).__name__ for layer in clone.layers] == ["GRU", "LSTM", "Dense"]


def test_get_initial_state_takes_a_batch_size_or_the_inputs():
    layer = L.GRU(4, return_sequences=True, return_state=True)
    x = RNG.normal(size=(3, 5, 2)).astype(np.float32)
    for arg in (3, x, tg.constant(x)):  # Keras 3's batch size; tf.keras 2's inputs
        states = layer.get_initial_state(arg)
        assert [s.shape for s in states] == [(3, 4)] and not states[0].numpy().any()
    # as in TF's text generation tutorial: the states returned are fed back in
    seq, state = layer(x, initial_state=layer.get_initial_state(x))
    seq2, _ = layer(x, initial_state=state)
    assert seq2.shape == (3, 5, 4) and not np.allclose(seq2.numpy(), seq.numpy())
    with pytest.raises(ValueError, match="batch size"):
        layer.get_initial_state("3")


# -- against Keras 3 itself (tests/keras/data/make_keras_recurrent_reference.py) -----------------



@pytest.mark.parametrize("i, case, arrays", reference_cases("keras_recurrent_reference.npz"),
                         ids=[f"{c[0]}{i}" for i, c, _ in reference_cases("keras_recurrent_reference.npz")])
def test_outputs_and_gradients_match_keras(i, case, arrays):
    """Keras 3's outputs and gradients (of sum(output * probe) for random probes, with respect
    to the weights and the inputs) on Keras' weights, with and without masks; weight names and
    initial values."""
    name, kwargs, inner, _, with_state = case
    if name == "Bidirectional":
        layer = L.Bidirectional(getattr(L, inner[0])(**inner[1]), **kwargs)
    elif name == "RNN":  # stacked cells
        layer = L.RNN([getattr(L, n)(**k) for n, k in inner], **kwargs)
    else:
        layer = getattr(L, name)(**kwargs)
    x = tg.Variable(arrays[f"x{i}"])
    states = indexed(arrays, "s", i) or None
    mask = arrays.get(f"mask{i}")
    layer(x, initial_state=states, mask=mask)
    # Keras' weights: same order, names and shapes; the initial values follow the same rules
    keras_names = [str(n).split("/")[-1] for n in arrays[f"names{i}"]]
    assert [v.name.split("/")[-1] for v in layer.variables] == keras_names
    for ours, theirs, label in zip(layer.get_weights(), indexed(arrays, "init", i),
                                   keras_names):
        assert ours.shape == theirs.shape
        if label == "bias":  # zeros, and ones for an LSTM's forget gate
            np.testing.assert_array_equal(ours, theirs)
        elif label == "recurrent_kernel":  # orthogonal: orthonormal rows, as Keras'
            for m in (ours, theirs):
                np.testing.assert_allclose(m @ m.T, np.eye(m.shape[0]), atol=1e-5)
    layer.set_weights(indexed(arrays, "w", i))
    with tg.GradientTape() as tape:
        out = layer(x, initial_state=states, mask=mask)
        flat = tg.nest.flatten(out)
        loss = tg.add_n([tg.reduce_sum(t * p) for t, p in zip(flat, indexed(arrays, "p", i))])
    grads = tape.gradient(loss, layer.trainable_variables + [x])
    want = indexed(arrays, "y", i)
    assert len(flat) == len(want)
    for got, ref in zip(flat, want):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-6)
    for got, ref in zip(grads, indexed(arrays, "g", i)):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-5)


def test_stacked_cells():
    x = RNG.normal(size=(2, 5, 3)).astype(np.float32)
    rnn = L.RNN([L.LSTMCell(4), L.SimpleRNNCell(3)], return_sequences=True, return_state=True)
    seq, (h1, c1), (h2,) = rnn(x)
    assert isinstance(rnn.cell, L.StackedRNNCells) and rnn.cell.state_size == [[4, 4], 3]
    assert seq.shape == (2, 5, 3) and c1.shape == (2, 4)
    np.testing.assert_array_equal(seq.numpy()[:, -1], h2.numpy())
    # the same as two layers, the first returning its sequence into the second
    first, second = L.LSTM(4, return_sequences=True), L.SimpleRNN(3, return_sequences=True)
    second(first(x))
    first.set_weights(rnn.get_weights()[:3])
    second.set_weights(rnn.get_weights()[3:])
    np.testing.assert_allclose(second(first(x)).numpy(), seq.numpy(), rtol=1e-5, atol=1e-6)
    # initial states, nested per cell (or flat, in the same order)
    init = [[RNG.normal(size=(2, 4)).astype(np.float32)] * 2, [np.zeros((2, 3), np.float32)]]
    nested = rnn(x, initial_state=init)
    flat = rnn(x, initial_state=[init[0][0], init[0][1], init[1][0]])
    np.testing.assert_array_equal(nested[0].numpy(), flat[0].numpy())
    assert not np.allclose(nested[0].numpy(), seq.numpy())
    # Bidirectional copies the cells: no weights shared
    bi = L.Bidirectional(L.RNN([L.GRUCell(2), L.GRUCell(2)]))
    assert bi(x).shape == (2, 4)
    assert len({id(v) for v in bi.variables}) == len(bi.variables) == 12
    with pytest.raises(ValueError, match="at least one cell"):
        L.RNN([])


def test_mask_skips_steps():
    """A masked step changes nothing: the same as the sequence without it."""
    x = RNG.normal(size=(2, 5, 3)).astype(np.float32)
    mask = np.array([[True, True, False, True, False], [True] * 5])
    layer = L.LSTM(4, return_state=True)
    out, h, c = layer(x, mask=mask)
    kept_out, _, kept_c = layer(x[:1, [0, 1, 3]])
    np.testing.assert_allclose(out.numpy()[:1], kept_out.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.numpy()[:1], kept_c.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.numpy()[1:], layer(x[1:])[0].numpy(), rtol=1e-5, atol=1e-6)
    # no gradient reaches the inputs of masked steps
    xv = tg.Variable(x)
    with tg.GradientTape() as tape:
        loss = tg.reduce_sum(L.GRU(3, return_sequences=True)(xv, mask=mask) ** 2)
    g = tape.gradient(loss, xv).numpy()
    assert not g[0, [2, 4]].any() and g[0, [0, 1, 3]].all() and g[1].all()
