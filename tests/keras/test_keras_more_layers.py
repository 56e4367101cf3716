"""keras.layers' attention, wrapper, merge, normalization, noise, reshaping and activation layers
(tapegpu/models/layers.py's attention classes, tapegpu/keras/more_layers.py): outputs and
gradients against Keras 3's own, stored in tests/keras/data/keras_more_layers_reference.npz
(written by make_keras_more_layers_reference.py) with the same weights, weight names and order,
masks, finite differences, tg.function against eager, noise layers, and errors."""
import json
import os
import re

import numpy as np
import pytest

import tapegpu as tg

keras = tg.keras
L = keras.layers
REFERENCE = os.path.join(os.path.dirname(__file__), "data", "keras_more_layers_reference.npz")


def _reference_cases():
    with np.load(REFERENCE) as data:
        cases = json.loads(str(data["cases"]))
        return [(i, case, {k: data[k] for k in data.files
                           if re.fullmatch(rf"[a-z]+{i}(_\d+)?", k)})
                for i, case in enumerate(cases)]


def _indexed(arrays, prefix, i):
    out, j = [], 0
    while f"{prefix}{i}_{j}" in arrays:
        out.append(arrays[f"{prefix}{i}_{j}"])
        j += 1
    return out


def _make(name, kwargs):
    if name == "TimeDistributed":
        inner, inner_kwargs = kwargs
        return L.TimeDistributed(getattr(L, inner)(**inner_kwargs))
    kwargs = {k: tuple(v) if isinstance(v, list) and k != "shared_axes" else v
              for k, v in kwargs.items()}
    return getattr(L, name)(**kwargs)


def _call(layer, xs, masks, how, kwargs):
    """As the generator: list layers get mask=[...]; others get the masks as _keras_mask."""
    if how == "list":
        return layer(xs, mask=[None if m is None else np.array(m) for m in masks], **kwargs) \
            if masks is not None else layer(xs, **kwargs)
    if masks is not None:
        for x, m in zip(xs, masks):
            x._keras_mask = None if m is None else tg.constant(m)
    return layer(*xs, **kwargs)


CASES = _reference_cases()


@pytest.mark.parametrize("i, case, arrays", CASES, ids=[f"{c[0]}{i}" for i, c, _ in CASES])
def test_outputs_and_gradients_match_keras(i, case, arrays):
    """Keras 3's outputs, output masks and gradients (of sum(output * probe), with respect to
    the weights and the inputs) on the same weights; Keras' weight names, shapes and order."""
    name, kwargs, _, call_kwargs, masks, how = case
    layer = _make(name, kwargs)
    xs = [tg.Variable(x) for x in _indexed(arrays, "x", i)]
    if f"adapt{i}" in arrays:
        layer.adapt(arrays[f"adapt{i}"])
    _call(layer, [tg.identity(x) for x in xs], masks, how, dict(call_kwargs))
    keras_names = ["/".join(str(n).split("/")[-2:]) if name == "MultiHeadAttention"
                   else str(n).split("/")[-1] for n in arrays[f"names{i}"]]
    ours = ["/".join(v.name.split("/")[-2:]) if name == "MultiHeadAttention"
            else v.name.split("/")[-1] for v in layer.variables]
    assert ours == keras_names
    weights = _indexed(arrays, "w", i)
    assert [w.shape for w in layer.get_weights()] == [w.shape for w in weights]
    layer.set_weights(weights)
    with tg.GradientTape() as tape:
        ins = [tg.identity(x) for x in xs]
        out = _call(layer, ins, masks, how, dict(call_kwargs))
        flat = tg.nest.flatten(out)
        loss = tg.add_n([tg.reduce_sum(t * p) for t, p in zip(flat, _indexed(arrays, "p", i))])
    grads = tape.gradient(loss, layer.trainable_variables + xs)
    want = _indexed(arrays, "y", i)
    assert len(flat) == len(want)
    for got, ref in zip(flat, want):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)
    if f"outmask{i}" in arrays:
        np.testing.assert_array_equal(flat[0]._keras_mask.numpy(), arrays[f"outmask{i}"])
    else:
        assert getattr(flat[0], "_keras_mask", None) is None
    refs = _indexed(arrays, "g", i)
    assert len(grads) == len(refs)
    for got, ref in zip(grads, refs):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("i, case, arrays", CASES, ids=[f"{c[0]}{i}" for i, c, _ in CASES])
def test_tg_function_equals_eager(i, case, arrays):
    """Every layer traced by tg.function (outputs and the gradients of the weights) equals eager,
    masks included."""
    name, kwargs, _, call_kwargs, masks, how = case
    layer = _make(name, kwargs)
    xs = _indexed(arrays, "x", i)
    if f"adapt{i}" in arrays:
        layer.adapt(arrays[f"adapt{i}"])
    _call(layer, [tg.constant(x) for x in xs], masks, how, dict(call_kwargs))
    layer.set_weights(_indexed(arrays, "w", i))
    probes = _indexed(arrays, "p", i)

    def step(*ins):
        ins = list(ins)
        with tg.GradientTape() as tape:
            out = _call(layer, ins, masks, how, dict(call_kwargs))
            flat = tg.nest.flatten(out)
            loss = tg.add_n([tg.reduce_sum(t * p) for t, p in zip(flat, probes)])
        return flat, tape.gradient(loss, layer.trainable_variables)

    eager_out, eager_grads = step(*[tg.constant(x) for x in xs])
    traced = tg.function(step)
    for _ in range(2):  # the trace, then a replay
        out, grads = traced(*[tg.constant(x) for x in xs])
        for a, b in zip(out, eager_out):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
        for a, b in zip(grads, eager_grads):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


# -- finite differences (float64) ------------------------------------------------------------------

def _fd_check(layer, make_inputs, call, seed=0):
    """The tape's directional derivatives of sum(out * r) along random directions of every
    weight and every input, against central differences, in float64."""
    rng = np.random.default_rng(seed)
    xs = make_inputs(rng)
    out = call(layer, [tg.constant(x) for x in xs])
    layer.set_weights([rng.normal(scale=0.5, size=w.shape) for w in layer.get_weights()])
    r = rng.normal(size=tg.nest.flatten(out)[0].shape)

    def loss(ws, ins):
        layer.set_weights(ws)
        return float(tg.reduce_sum(tg.nest.flatten(call(layer, [tg.constant(x) for x in ins]))[0]
                                   * r))
    ws = layer.get_weights()
    tensors = [tg.Variable(x) for x in xs]
    with tg.GradientTape() as tape:
        y = tg.reduce_sum(tg.nest.flatten(call(layer, [tg.identity(t) for t in tensors]))[0] * r)
    grads = tape.gradient(y, layer.trainable_variables + tensors)
    assert len(layer.trainable_variables) == len(ws)
    eps = 1e-6
    for k, g in enumerate(grads):
        base = (ws + xs)[k]
        d = rng.normal(size=base.shape)

        def moved(sign):
            ws2, xs2 = [w.copy() for w in ws], [x.copy() for x in xs]
            (ws2 + xs2)[k][...] += sign * eps * d
            return loss(ws2, xs2)
        numeric = (moved(1) - moved(-1)) / (2 * eps)
        assert numeric == pytest.approx(float(np.sum(g.numpy() * d)), rel=1e-6, abs=1e-7), k
    layer.set_weights(ws)


def _args_call(**kwargs):
    return lambda layer, ins: layer(*ins, **kwargs)


def _list_call(**kwargs):
    return lambda layer, ins: layer(ins, **kwargs)


def _normals(*shapes):
    return lambda rng: [rng.normal(size=s) for s in shapes]


@pytest.mark.parametrize("make, inputs, call", [
    (lambda: L.MultiHeadAttention(2, 3, dtype="float64"), _normals((2, 4, 5), (2, 3, 6)),
     _args_call(use_causal_mask=True)),
    (lambda: L.MultiHeadAttention(2, 2, use_gate=True, output_shape=(2, 3), dtype="float64"),
     _normals((2, 3, 4), (2, 3, 4), (2, 3, 5)), _args_call()),
    (lambda: L.Attention(use_scale=True, score_mode="concat", dtype="float64"),
     _normals((2, 3, 4), (2, 5, 4)), _list_call(use_causal_mask=True)),
    (lambda: L.AdditiveAttention(dtype="float64"), _normals((2, 3, 4), (2, 5, 4)),
     _list_call()),
    (lambda: L.GroupNormalization(groups=2, axis=1, dtype="float64"), _normals((2, 4, 3)),
     _args_call()),
    (lambda: L.PReLU(shared_axes=[1], dtype="float64"), _normals((2, 3, 4)), _args_call()),
    (lambda: L.Dot(axes=(2, 2), normalize=True, dtype="float64"),
     _normals((2, 3, 4), (2, 5, 4)), _list_call()),
    (lambda: L.TimeDistributed(L.Dense(3, activation="tanh", dtype="float64")),
     _normals((2, 4, 5)), _args_call()),
], ids=["mha-causal", "mha-gate-key", "attention-concat", "additive", "groupnorm", "prelu",
        "dot-normalize", "time-distributed"])
def test_gradients_against_finite_differences(make, inputs, call):
    _fd_check(make(), inputs, call)


# -- masks ----------------------------------------------------------------------------------------

def test_mha_takes_the_masks_of_its_inputs():
    """Embedding(mask_zero=True)'s mask makes the query/value masks Keras derives; the same as
    the explicit attention_mask (query & value), and as explicit query_mask / value_mask; the
    output carries the query's mask; masked value steps get weight 0."""
    tokens = np.array([[3, 1, 4, 0, 0], [2, 7, 1, 8, 0]])
    emb = L.Embedding(10, 6, mask_zero=True)
    mha = L.MultiHeadAttention(2, 3)
    x = emb(tokens)
    out, scores = mha(x, x, return_attention_scores=True)
    valid = tokens != 0
    np.testing.assert_array_equal(out._keras_mask.numpy(), valid)
    assert np.all(scores.numpy()[~np.broadcast_to(valid[:, None, None, :], scores.shape)] == 0)
    plain = tg.constant(x.numpy())  # no mask attached
    explicit = mha(plain, plain, attention_mask=valid[:, :, None] & valid[:, None, :],
                   return_attention_scores=True)
    by_args = mha(plain, plain, query_mask=valid, value_mask=valid, return_attention_scores=True)
    for other in (explicit, by_args):
        np.testing.assert_allclose(other[0].numpy(), out.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(other[1].numpy(), scores.numpy(), rtol=1e-6, atol=1e-6)
    unmasked = mha(plain, plain)
    assert not np.allclose(unmasked.numpy()[valid], out.numpy()[valid])


def test_mha_causal_mask_ignores_the_future():
    rng = np.random.default_rng(1)
    mha = L.MultiHeadAttention(2, 4)
    x = rng.normal(size=(2, 6, 5)).astype(np.float32)
    out, scores = mha(x, x, use_causal_mask=True, return_attention_scores=True)
    assert np.all(np.triu(np.ones((6, 6)), 1)[None, None] * scores.numpy() == 0)
    x2 = x.copy()
    x2[:, 4:] += 1.0  # changing steps 4, 5 leaves the outputs of steps 0..3
    out2 = mha(x2, x2, use_causal_mask=True)
    np.testing.assert_allclose(out2.numpy()[:, :4], out.numpy()[:, :4], rtol=1e-6, atol=1e-6)
    assert not np.allclose(out2.numpy()[:, 4:], out.numpy()[:, 4:])


def test_attention_masks_from_inputs_and_mask_argument():
    rng = np.random.default_rng(2)
    q = rng.normal(size=(2, 3, 4)).astype(np.float32)
    v = rng.normal(size=(2, 5, 4)).astype(np.float32)
    qm = np.array([[True, False, True], [True, True, True]])
    vm = np.array([[True, True, False, False, True], [True, True, True, True, False]])
    for cls in (L.Attention, L.AdditiveAttention):
        layer = cls()
        out, w = layer([q, v], mask=[qm, vm], return_attention_scores=True)
        np.testing.assert_array_equal(out._keras_mask.numpy(), qm)
        assert np.all(out.numpy()[~qm] == 0)                      # masked queries: zeros
        assert np.allclose(w.numpy()[np.broadcast_to(~vm[:, None, :], w.shape)], 0, atol=1e-6)
        qt, vt = tg.constant(q), tg.constant(v)
        qt._keras_mask, vt._keras_mask = tg.constant(qm), tg.constant(vm)
        np.testing.assert_array_equal(layer([qt, vt]).numpy(), out.numpy())
        assert getattr(layer([q, v]), "_keras_mask", None) is None


def test_merge_layers_or_the_masks():
    a, b = tg.ones((2, 3, 4)), tg.ones((2, 3, 4))
    a._keras_mask = tg.constant([[True, False, False], [True, True, False]])
    b._keras_mask = tg.constant([[False, True, False], [True, False, False]])
    for cls in (L.Add, L.Multiply, L.Subtract, L.Average, L.Maximum, L.Minimum):
        np.testing.assert_array_equal(cls()([a, b])._keras_mask.numpy(),
                                      [[True, True, False], [True, True, False]])
        assert getattr(cls()([a, tg.ones((2, 3, 4))]), "_keras_mask", None) is None
    assert getattr(L.Dot(axes=2)([a, b]), "_keras_mask", None) is None


def test_time_distributed_passes_the_mask_and_shares_weights():
    x = np.random.default_rng(3).normal(size=(2, 4, 3)).astype(np.float32)
    xt = tg.constant(x)
    xt._keras_mask = tg.constant([[True, True, False, False], [True, True, True, False]])
    td = L.TimeDistributed(L.Dense(5))
    y = td(xt)
    np.testing.assert_array_equal(y._keras_mask.numpy(), xt._keras_mask.numpy())
    for t in range(4):  # the wrapped layer on each step alone
        np.testing.assert_allclose(y.numpy()[:, t], td.layer(x[:, t]).numpy(), rtol=1e-6)
    assert len(td.weights) == 2


def test_transformer_block_in_a_functional_model_fits():
    """The Keras tutorial's Transformer block: functional model, MultiHeadAttention(x, x) with
    Embedding masks, residual Add, LayerNormalization; fit lowers the loss, and predictions
    under tg.function equal eager."""
    rng = np.random.default_rng(4)
    tokens = rng.integers(1, 20, size=(32, 6))
    tokens[:, 4:] = 0
    y = (tokens[:, 0] > 10).astype(np.int64)
    inputs = keras.Input(shape=(6,), dtype="int64")
    x = L.Embedding(20, 8, mask_zero=True)(inputs)
    att = L.MultiHeadAttention(num_heads=2, key_dim=4, dropout=0.1, seed=3)(x, x)
    x = L.LayerNormalization(epsilon=1e-6)(L.Add()([x, att]))
    x = L.GlobalAveragePooling1D()(x)
    outputs = L.Dense(2)(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(tokens, y, epochs=8, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    eager = model(tokens).numpy()
    np.testing.assert_allclose(tg.function(lambda t: model(t))(tokens).numpy(), eager,
                               rtol=1e-5, atol=1e-6)
    # the padded steps do not matter: masked as values, and as queries averaged out by
    # GlobalAveragePooling1D (the mask passes through Add and LayerNormalization)
    emb = model.layers[1]
    table = emb.embeddings.numpy()
    table[0] = rng.normal(size=8) * 3
    emb.embeddings.assign(table)
    np.testing.assert_allclose(model(tokens).numpy(), eager, rtol=1e-5, atol=1e-6)
