"""keras.layers' attention, wrapper, merge, normalization, noise, reshaping and activation layers
(tapegpu/models/layers.py's attention classes, tapegpu/keras/more_layers.py): outputs and
gradients against Keras 3's own, stored in tests/keras/data/keras_more_layers_reference.npz
(written by make_keras_more_layers_reference.py) with the same weights, weight names and order,
masks, finite differences, tg.function against eager, noise layers, and errors."""

import numpy as np
import pytest

import tapegpu as tg
from keras_reference import indexed, reference_cases

keras = tg.keras
L = keras.layers
get_keras_mask, set_keras_mask = keras.backend.get_keras_mask, keras.backend.set_keras_mask


def _make(name, kwargs):
    if name == "TimeDistributed":
        inner, inner_kwargs = kwargs
        return L.TimeDistributed(getattr(L, inner)(**inner_kwargs))
    kwargs = {k: tuple(v) if isinstance(v, list) and k != "shared_axes" else v
              for k, v in kwargs.items()}
    return getattr(L, name)(**kwargs)


def _call(layer, xs, masks, how, kwargs):
    """As the generator: list layers get mask=[...]; others get the masks attached (Keras'
    `_keras_mask`)."""
    if how == "list":
        return layer(xs, mask=[None if m is None else np.array(m) for m in masks], **kwargs) \
            if masks is not None else layer(xs, **kwargs)
    if masks is not None:
        for x, m in zip(xs, masks):
            set_keras_mask(x, None if m is None else tg.constant(m))
    return layer(*xs, **kwargs)


CASES = reference_cases("keras_more_layers_reference.npz")


@pytest.mark.parametrize("i, case, arrays", CASES, ids=[f"{c[0]}{i}" for i, c, _ in CASES])
def test_outputs_and_gradients_match_keras(i, case, arrays):
    """Keras 3's outputs, output masks and gradients (of sum(output * probe), with respect to
    the weights and the inputs) on the same weights; Keras' weight names, shapes and order."""
    name, kwargs, _, call_kwargs, masks, how = case
    layer = _make(name, kwargs)
    xs = [tg.Variable(x) for x in indexed(arrays, "x", i)]
    if f"adapt{i}" in arrays:
        layer.adapt(arrays[f"adapt{i}"])
    _call(layer, [tg.identity(x) for x in xs], masks, how, dict(call_kwargs))
    keras_names = ["/".join(str(n).split("/")[-2:]) if name == "MultiHeadAttention"
                   else str(n).split("/")[-1] for n in arrays[f"names{i}"]]
    ours = ["/".join(v.name.split("/")[-2:]) if name == "MultiHeadAttention"
            else v.name.split("/")[-1] for v in layer.variables]
    assert ours == keras_names
    weights = indexed(arrays, "w", i)
    assert [w.shape for w in layer.get_weights()] == [w.shape for w in weights]
    layer.set_weights(weights)
    with tg.GradientTape() as tape:
        ins = [tg.identity(x) for x in xs]
        out = _call(layer, ins, masks, how, dict(call_kwargs))
        flat = tg.nest.flatten(out)
        loss = tg.add_n([tg.reduce_sum(t * p) for t, p in zip(flat, indexed(arrays, "p", i))])
    grads = tape.gradient(loss, layer.trainable_variables + xs)
    want = indexed(arrays, "y", i)
    assert len(flat) == len(want)
    for got, ref in zip(flat, want):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)
    if f"outmask{i}" in arrays:
        np.testing.assert_array_equal(get_keras_mask(flat[0]).numpy(), arrays[f"outmask{i}"])
    else:
        assert get_keras_mask(flat[0]) is None
    refs = indexed(arrays, "g", i)
    assert len(grads) == len(refs)
    for got, ref in zip(grads, refs):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("i, case, arrays", CASES, ids=[f"{c[0]}{i}" for i, c, _ in CASES])
def test_tg_function_equals_eager(i, case, arrays):
    """Every layer traced by tg.function (outputs and the gradients of the weights) equals eager,
    masks included."""
    name, kwargs, _, call_kwargs, masks, how = case
    layer = _make(name, kwargs)
    xs = indexed(arrays, "x", i)
    if f"adapt{i}" in arrays:
        layer.adapt(arrays[f"adapt{i}"])
    _call(layer, [tg.constant(x) for x in xs], masks, how, dict(call_kwargs))
    layer.set_weights(indexed(arrays, "w", i))
    probes = indexed(arrays, "p", i)

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
    np.testing.assert_array_equal(get_keras_mask(out).numpy(), valid)
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
        np.testing.assert_array_equal(get_keras_mask(out).numpy(), qm)
        assert np.all(out.numpy()[~qm] == 0)                      # masked queries: zeros
        assert np.allclose(w.numpy()[np.broadcast_to(~vm[:, None, :], w.shape)], 0, atol=1e-6)
        qt, vt = tg.constant(q), tg.constant(v)
        set_keras_mask(qt, tg.constant(qm))
        set_keras_mask(vt, tg.constant(vm))
        np.testing.assert_array_equal(layer([qt, vt]).numpy(), out.numpy())
        assert get_keras_mask(layer([q, v])) is None


def test_merge_layers_or_the_masks():
    a, b = tg.ones((2, 3, 4)), tg.ones((2, 3, 4))
    set_keras_mask(a, tg.constant([[True, False, False], [True, True, False]]))
    set_keras_mask(b, tg.constant([[False, True, False], [True, False, False]]))
    for cls in (L.Add, L.Multiply, L.Subtract, L.Average, L.Maximum, L.Minimum):
        np.testing.assert_array_equal(get_keras_mask(cls()([a, b])).numpy(),
                                      [[True, True, False], [True, True, False]])
        assert get_keras_mask(cls()([a, tg.ones((2, 3, 4))])) is None
    assert get_keras_mask(L.Dot(axes=2)([a, b])) is None


def test_time_distributed_passes_the_mask_and_shares_weights():
    x = np.random.default_rng(3).normal(size=(2, 4, 3)).astype(np.float32)
    xt = tg.constant(x)
    set_keras_mask(xt, tg.constant([[True, True, False, False], [True, True, True, False]]))
    td = L.TimeDistributed(L.Dense(5))
    y = td(xt)
    np.testing.assert_array_equal(get_keras_mask(y).numpy(), get_keras_mask(xt).numpy())
    for t in range(4):  # the wrapped layer on each step alone
        np.testing.assert_allclose(y.numpy()[:, t], td.layer(x[:, t]).numpy(), rtol=1e-6)
    assert len(td.weights) == 2


def test_transformer_block_in_a_functional_model_fits():
    """The Keras tutorial's Transformer block: functional model, MultiHeadAttention(x, x) with
    Embedding masks, residual Add, LayerNormalization; fit lowers the loss, and predictions
    under tg.function equal eager."""
    tg.random.set_seed(4)  # the initial weights: the test must not depend on the tests before
    rng = np.random.default_rng(4)
    tokens = rng.integers(1, 20, size=(32, 6))
    tokens[:, 4:] = 0
    y = ((tokens[:, :4] > 10).sum(1) >= 2).astype(np.int64)  # order-free: no positions here
    inputs = keras.Input(shape=(6,), dtype="int64")
    x = L.Embedding(20, 8, mask_zero=True)(inputs)
    att = L.MultiHeadAttention(num_heads=2, key_dim=4, dropout=0.1, seed=3)(x, x)
    x = L.LayerNormalization(epsilon=1e-6)(L.Add()([x, att]))
    x = L.GlobalAveragePooling1D()(x)
    outputs = L.Dense(2)(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(tokens, y, epochs=20, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < 0.8 * history.history["loss"][0]
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


# -- noise layers ---------------------------------------------------------------------------------

NOISE = [
    (lambda seed: L.GaussianNoise(0.5, seed=seed), (400, 50)),
    (lambda seed: L.GaussianDropout(0.3, seed=seed), (400, 50)),
    (lambda seed: L.SpatialDropout1D(0.4, seed=seed), (400, 6, 50)),
    (lambda seed: L.SpatialDropout2D(0.4, seed=seed), (400, 3, 4, 50)),
    (lambda seed: L.SpatialDropout2D(0.4, seed=seed, data_format="channels_first"),
     (400, 50, 3, 4)),
    (lambda seed: L.SpatialDropout3D(0.4, seed=seed), (40, 2, 3, 2, 50)),
]


@pytest.mark.parametrize("make, shape", NOISE,
                         ids=["gaussian-noise", "gaussian-dropout", "spatial1d", "spatial2d",
                              "spatial2d-first", "spatial3d"])
def test_noise_layers(make, shape):
    """Identity outside training; in training the noise has Keras' distribution; one seed
    gives one sequence of draws (two layers alike, new draws per call, in tg.function too);
    the mask passes on."""
    x = tg.constant(np.full(shape, 2.0, np.float32))
    layer = make(7)
    assert layer(x) is x or np.array_equal(layer(x).numpy(), x.numpy())
    y = layer(x, training=True).numpy()
    y2 = layer(x, training=True).numpy()
    assert not np.array_equal(y, y2)
    np.testing.assert_array_equal(make(7)(x, training=True).numpy(), y)  # same seed
    if isinstance(layer, L.GaussianNoise):
        noise = y - 2.0
        assert abs(noise.mean()) < 0.02 and abs(noise.std() - 0.5) < 0.02
    elif isinstance(layer, L.GaussianDropout):
        factor = y / 2.0  # N(1, rate / (1 - rate))
        assert abs(factor.mean() - 1) < 0.02 and abs(factor.std() - np.sqrt(0.3 / 0.7)) < 0.02
    else:
        assert set(np.unique(y)) <= {0.0, 2.0 / 0.6 + 0.0} or np.allclose(
            np.unique(y), [0.0, 2.0 / 0.6])
        channels_first = layer.data_format == "channels_first"
        per_map = np.moveaxis(y, 1, -1) if channels_first else y
        flat = per_map.reshape(shape[0], -1, per_map.shape[-1])
        assert np.all(flat.min(axis=1) == flat.max(axis=1))  # whole maps kept or dropped
        assert abs((flat[:, 0] == 0).mean() - 0.4) < 0.03
    traced = tg.function(lambda t: layer(t, training=True))
    a, b = traced(x).numpy(), traced(x).numpy()
    assert not np.array_equal(a, b)
    m = tg.constant(np.full(shape, 1.0, np.float32))
    set_keras_mask(m, tg.constant(np.ones(shape[:2], bool)))
    assert get_keras_mask(layer(m, training=True)) is get_keras_mask(m)


def test_noise_layer_arguments_and_errors():
    with pytest.raises(ValueError, match="GaussianDropout.*rate"):
        L.GaussianDropout(1.5)
    with pytest.raises(ValueError, match="SpatialDropout1D.*rate"):
        L.SpatialDropout1D(-0.1)
    with pytest.raises(ValueError, match="GaussianNoise.*stddev"):
        L.GaussianNoise(-1.0)
    with pytest.raises(ValueError, match="expected ndim=3, found ndim=2"):
        L.SpatialDropout1D(0.5)(tg.ones((2, 3)), training=True)
    with pytest.raises(ValueError, match="data_format"):
        L.SpatialDropout2D(0.5, data_format="nhwc")
    x = tg.ones((3, 4, 5))
    np.testing.assert_array_equal(L.SpatialDropout1D(1.0)(x, training=True).numpy(), 0.0)
    np.testing.assert_array_equal(L.GaussianDropout(1.0)(x, training=True).numpy(), 1.0)
    y = tg.ones((5, 3), dtype="float64")  # float64 stays float64
    assert L.GaussianNoise(0.1)(y, training=True).dtype == tg.float64
    assert L.GaussianNoise(0.1, dtype="float64")(y, training=True).dtype == tg.float64


def test_mha_and_attention_dropout_in_training_only():
    x = np.random.default_rng(5).normal(size=(2, 4, 6)).astype(np.float32)
    mha = L.MultiHeadAttention(2, 3, dropout=0.5, seed=1)
    _, w = mha(x, x, return_attention_scores=True)
    np.testing.assert_allclose(w.numpy().sum(-1), 1.0, rtol=1e-5)  # softmax, undropped
    out = mha(x, x).numpy()
    np.testing.assert_array_equal(mha(x, x).numpy(), out)
    trained = mha(x, x, training=True).numpy()
    assert not np.allclose(trained, out)
    twin = L.MultiHeadAttention(2, 3, dropout=0.5, seed=1)
    twin(x, x)
    twin.set_weights(mha.get_weights())
    mha2 = L.MultiHeadAttention(2, 3, dropout=0.5, seed=1)
    mha2(x, x)
    mha2.set_weights(mha.get_weights())
    np.testing.assert_array_equal(twin(x, x, training=True).numpy(),
                                  mha2(x, x, training=True).numpy())
    att = L.Attention(dropout=0.5, seed=2)
    base = att([x, x]).numpy()
    np.testing.assert_array_equal(att([x, x], training=False).numpy(), base)
    assert not np.allclose(att([x, x], training=True).numpy(), base)


# -- Normalization --------------------------------------------------------------------------------

def test_normalization_adapt_on_arrays_batches_and_datasets():
    rng = np.random.default_rng(6)
    data = rng.normal(loc=3.0, scale=2.0, size=(30, 4, 2)).astype(np.float32)
    whole = L.Normalization(axis=(1, 2))
    whole.adapt(data)
    np.testing.assert_allclose(whole.adapt_mean.numpy(), data.mean(0), rtol=1e-5)
    np.testing.assert_allclose(whole.adapt_variance.numpy(), data.var(0), rtol=1e-4)
    assert [v.name.split("/")[-1] for v in whole.weights] == ["mean", "variance", "count"]
    assert whole.trainable_weights == [] and whole.count.dtype == tg.int64
    for source in ([data[:7], data[7:20], data[20:]],              # uneven batches
                   tg.data.Dataset.from_tensor_slices(data).batch(8),
                   tg.constant(data)):
        norm = L.Normalization(axis=(1, 2))
        norm.adapt(source)
        np.testing.assert_allclose(norm.adapt_mean.numpy(), whole.adapt_mean.numpy(),
                                   rtol=1e-5)
        np.testing.assert_allclose(norm.adapt_variance.numpy(), whole.adapt_variance.numpy(),
                                   rtol=1e-4)
    y = whole(data).numpy()
    np.testing.assert_allclose(y.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(y.std(0), 1.0, rtol=1e-3)
    back = L.Normalization(axis=(1, 2), invert=True)
    back.adapt(data)
    np.testing.assert_allclose(back(y).numpy(), data, rtol=1e-5, atol=1e-5)
    scalar = L.Normalization(axis=None)
    scalar.adapt(data)
    assert scalar.adapt_mean.shape == () and \
        float(scalar.adapt_mean.numpy()) == pytest.approx(float(data.mean()), rel=1e-5)


def test_normalization_with_given_statistics_and_errors():
    norm = L.Normalization(mean=[1.0, 2.0], variance=[4.0, 0.0])
    y = norm(tg.constant([[3.0, 2.0]])).numpy()
    np.testing.assert_allclose(y, [[1.0, 0.0]])  # sqrt(0) floored at 1e-7
    assert norm.weights == []
    with pytest.raises(ValueError, match="both mean and variance"):
        L.Normalization(mean=1.0)
    with pytest.raises(ValueError, match="same shape"):
        L.Normalization(mean=[1.0, 2.0], variance=[1.0])
    with pytest.raises(ValueError, match="adapt"):
        norm.adapt(np.zeros((2, 2), np.float32))
    adapted = L.Normalization()
    adapted.adapt(np.zeros((4, 3), np.float32))
    with pytest.raises(ValueError, match=r"input_shape=\(4, 3\).*incompatible shape \(2, 5\)"):
        adapted.adapt(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match="Normalization.*built for inputs of shape"):
        adapted(tg.ones((2, 5)))
    with pytest.raises(ValueError, match="empty"):
        L.Normalization().adapt([])


# -- ActivityRegularization, configs, shapes ------------------------------------------------------

def test_activity_regularization_adds_to_the_loss_in_fit():
    layer = L.ActivityRegularization(l1=0.1, l2=0.01)
    x = tg.constant([[1.0, -2.0], [3.0, 0.0]])
    assert layer(x) is x
    expect = (0.1 * 6.0 + 0.01 * 14.0) / 2
    assert [float(v) for v in layer.losses] == pytest.approx([expect])
    model = keras.Sequential([keras.Input(shape=(2,)), L.Dense(2, kernel_initializer="ones"),
                              L.ActivityRegularization(l2=1.0)])
    model.compile(optimizer="sgd", loss="mse")
    xs, ys = np.ones((4, 2), np.float32), np.zeros((4, 2), np.float32)
    history = model.fit(xs, ys, epochs=1, batch_size=4, verbose=0)
    # mse of the outputs (2, 2) is 4; the activity penalty adds sum(out^2) / batch = 8 * 4 / 4
    assert history.history["loss"][0] == pytest.approx(4.0 + 8.0, rel=1e-5)


def test_configs_round_trip():
    for layer in (L.MultiHeadAttention(2, 3, value_dim=4, dropout=0.1, output_shape=5),
                  L.Attention(use_scale=True, score_mode="concat"), L.AdditiveAttention(),
                  L.Dot(axes=(1, 2), normalize=True), L.PReLU(shared_axes=[1, 2]),
                  L.ELU(alpha=0.3), L.GroupNormalization(groups=4, epsilon=0.1),
                  L.Normalization(axis=None, invert=True), L.GaussianNoise(0.2, seed=3),
                  L.SpatialDropout2D(0.2, data_format="channels_first"), L.Permute((2, 1)),
                  L.RepeatVector(4), L.UnitNormalization(axis=[1, 2]),
                  L.ActivityRegularization(l1=0.2)):
        config = layer.get_config()
        clone = type(layer).from_config(config)
        assert clone.get_config() == config


def test_reshaping_and_activation_layers():
    x = np.random.default_rng(7).normal(size=(2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(L.Permute((2, 1))(x).numpy(), x.transpose(0, 2, 1))
    np.testing.assert_array_equal(L.RepeatVector(3)(x[:, 0]).numpy(),
                                  np.repeat(x[:, None, 0], 3, axis=1))
    prelu = L.PReLU()
    np.testing.assert_array_equal(prelu(x).numpy(), np.maximum(x, 0))  # alpha starts at 0
    assert prelu.alpha.shape == (3, 4)
    big = L.ELU()(tg.constant([-1e4, 0.0, 1e4])).numpy()
    np.testing.assert_array_equal(big, [-1.0, 0.0, 1e4])
    with tg.GradientTape() as tape:
        t = tg.constant([-1e4, -1.0, 2.0])
        tape.watch(t)
        y = L.ELU(alpha=2.0)(t)
    np.testing.assert_allclose(tape.gradient(y, t).numpy(), [0.0, 2 * np.exp(-1.0), 1.0],
                               rtol=1e-6)
    unit = L.UnitNormalization(axis=[1, 2])(x).numpy()
    np.testing.assert_allclose((unit ** 2).sum(axis=(1, 2)), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(L.UnitNormalization()(np.zeros((1, 3), np.float32)).numpy(),
                                  0.0)  # no division by zero


# -- errors ---------------------------------------------------------------------------------------

def test_errors_name_the_layer_the_shapes_and_what_is_valid():
    x3 = tg.ones((2, 3, 4))
    with pytest.raises(ValueError, match="num_heads must be a positive integer"):
        L.MultiHeadAttention(0, 2)
    with pytest.raises(ValueError, match="key_dim"):
        L.MultiHeadAttention(2, 2.5)
    with pytest.raises(ValueError, match="attention_axes"):
        L.MultiHeadAttention(2, 2, attention_axes="time")
    with pytest.raises(ValueError, match="value is missing"):
        L.MultiHeadAttention(2, 2)(x3)
    with pytest.raises(ValueError, match=r"value and key.*\(2, 5, 4\).*\(2, 6, 4\)"):
        L.MultiHeadAttention(2, 2)(x3, tg.ones((2, 5, 4)), tg.ones((2, 6, 4)))
    with pytest.raises(ValueError, match="same rank >= 3"):
        L.MultiHeadAttention(2, 2)(tg.ones((2, 4)), tg.ones((2, 4)))
    mha = L.MultiHeadAttention(2, 2, name="att")
    mha(x3, x3)
    with pytest.raises(ValueError, match=r"'att': built for query of shape.*\(2, 3, 5\)"):
        mha(tg.ones((2, 3, 5)), x3)
    with pytest.raises(ValueError, match=r"'att': attention_mask of shape \(2, 3, 4\) does not "
                       r"broadcast to .* \(2, 3, 5\)"):
        mha(x3, tg.ones((2, 5, 4)), attention_mask=np.ones((2, 3, 4), bool))
    with pytest.raises(NotImplementedError, match="kernel_constraint"):
        L.MultiHeadAttention(2, 2, kernel_constraint="non_neg")
    with pytest.raises(ValueError, match="dropout is not supported when flash attention"):
        L.MultiHeadAttention(2, 2, dropout=0.1, flash_attention=True)
    assert mha(tg.ones((2, 3, 4), dtype="float64"), x3).dtype == tg.float32  # Keras' autocast
    with pytest.raises(ValueError, match=r"Attention 'a' must be called on a list"):
        L.Attention(name="a")(x3)
    with pytest.raises(ValueError, match="list of 2 or 3 inputs"):
        L.Attention()([x3])
    with pytest.raises(ValueError, match="score_mode must be 'dot' or 'concat'"):
        L.Attention(score_mode="add")
    with pytest.raises(ValueError, match=r"Attention .*shapes \(2, 3, 4\), \(2, 3, 5\)"):
        L.Attention()([x3, tg.ones((2, 3, 5)), tg.ones((2, 3, 5))])
    with pytest.raises(ValueError, match="mask must be a list"):
        L.Attention()([x3, x3], mask=np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="exactly 2 inputs"):
        L.Subtract()([x3, x3, x3])
    with pytest.raises(ValueError, match="should be called on a list"):
        L.Multiply()(x3)
    with pytest.raises(ValueError, match=r"incompatible shapes.*\(2, 3, 4\), \(2, 3, 5\)"):
        L.Maximum()([x3, tg.ones((2, 3, 5))])
    with pytest.raises(ValueError, match="different batch sizes"):
        L.Average()([x3, tg.ones((3, 3, 4))])
    with pytest.raises(ValueError, match=r"axis values 4 \(at axis 2\) != 3 \(at axis 1\)"):
        L.Dot(axes=(2, 1))([x3, x3])
    with pytest.raises(TypeError, match="axes must be an int"):
        L.Dot(axes="last")
    with pytest.raises(ValueError, match="two integers"):
        L.Dot(axes=(1, 2, 3))
    with pytest.raises(ValueError, match="TimeDistributed: please initialize"):
        L.TimeDistributed(lambda t: t)
    with pytest.raises(ValueError, match=r"TimeDistributed .*rank >= 3.*\(2, 3\)"):
        L.TimeDistributed(L.Dense(2))(tg.ones((2, 3)))
    with pytest.raises(ValueError, match="invalid permutation"):
        L.Permute((1, 3))
    with pytest.raises(ValueError, match=r"Permute .*\(2, 3\)"):
        L.Permute((2, 1))(tg.ones((2, 3)))
    with pytest.raises(ValueError, match="expected ndim=2, found ndim=3"):
        L.RepeatVector(2)(x3)
    with pytest.raises(TypeError, match="integer value for n"):
        L.RepeatVector(2.5)
    with pytest.raises(ValueError, match=r"channels \(4\) must be a multiple of .* groups \(3\)"):
        L.GroupNormalization(groups=3)(x3)
    with pytest.raises(ValueError, match=r"groups \(8\) cannot be more than the number of "):
        L.GroupNormalization(groups=8)(x3)
    with pytest.raises(ValueError, match="groups must be a positive integer"):
        L.GroupNormalization(groups=0)
    with pytest.raises(ValueError, match=r"PReLU .*shared_axes \[3\]"):
        L.PReLU(shared_axes=3)(x3)
    with pytest.raises(TypeError, match="UnitNormalization: invalid value for axis"):
        L.UnitNormalization(axis="last")
    with pytest.raises(ValueError, match=r"UnitNormalization .*axis 3 is out of bounds"):
        L.UnitNormalization(axis=3)(x3)


def test_mha_attention_axes_of_a_rank_4_input():
    """Attention over axis 2 of (batch, a, steps, features) is attention over the steps of each
    (batch, a) sequence; over axes (1, 2) it differs (one softmax over both axes)."""
    x = np.random.default_rng(8).normal(size=(2, 3, 4, 5)).astype(np.float32)
    per_row = L.MultiHeadAttention(2, 3, attention_axes=2)
    y = per_row(x, x, use_causal_mask=False)
    flat = L.MultiHeadAttention(2, 3)
    flat(x[0], x[0])
    flat.set_weights(per_row.get_weights())
    np.testing.assert_allclose(y.numpy().reshape(6, 4, 5),
                               flat(x.reshape(6, 4, 5), x.reshape(6, 4, 5)).numpy(),
                               rtol=1e-5, atol=1e-6)
    both = L.MultiHeadAttention(2, 3, attention_axes=(1, 2))
    both(x, x)
    both.set_weights(per_row.get_weights())
    _, scores = both(x, x, return_attention_scores=True)
    assert scores.shape == (2, 2, 3, 4, 3, 4)
    np.testing.assert_allclose(scores.numpy().sum(axis=(-2, -1)), 1.0, rtol=1e-5)
    assert not np.allclose(both(x, x).numpy(), y.numpy())


class _ArrayLike:  # as a pandas DataFrame: converts with __array__, iterates over its columns
    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a

    def __iter__(self):
        return iter(["column"])


def test_normalization_as_the_regression_tutorial_uses_it():
    """Normalization(input_shape=[1], axis=None) adapted on a 1-d array normalizes (batch, 1)
    inputs; adapt takes a DataFrame-like object as an array."""
    rng = np.random.default_rng(9)
    hp = rng.uniform(50, 200, size=64).astype(np.float32)
    norm = L.Normalization(input_shape=[1], axis=None)
    norm.adapt(hp)
    model = keras.Sequential([norm, L.Dense(1, kernel_initializer="ones")])
    got = model.predict(hp[:10].reshape(-1, 1), verbose=0)
    np.testing.assert_allclose(got[:, 0], (hp[:10] - hp.mean()) / hp.std(), rtol=1e-4)
    table = rng.normal(size=(20, 3)).astype(np.float32)
    frame = L.Normalization()
    frame.adapt(_ArrayLike(table))
    np.testing.assert_allclose(frame.adapt_mean.numpy(), table.mean(0), rtol=1e-5, atol=1e-6)


def test_seq2seq_with_repeat_vector_and_time_distributed_fits():
    rng = np.random.default_rng(10)
    model = keras.Sequential([keras.Input(shape=(5, 3)), L.LSTM(8), L.RepeatVector(4),
                              L.LSTM(8, return_sequences=True),
                              L.TimeDistributed(L.Dense(2))])
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss="mse")
    x = rng.normal(size=(16, 5, 3)).astype(np.float32)
    y = np.repeat(x[:, :1, :2], 4, axis=1)
    history = model.fit(x, y, epochs=10, verbose=0)
    assert history.history["loss"][-1] < 0.8 * history.history["loss"][0]
    assert model.predict(x, verbose=0).shape == (16, 4, 2)


def test_cross_attention_in_a_functional_model():
    q_in, v_in = keras.Input(shape=(4, 6)), keras.Input(shape=(7, 6))
    mha, att = L.MultiHeadAttention(2, 3), L.Attention()
    model = keras.Model([q_in, v_in], [mha(q_in, v_in), att([q_in, v_in])])
    rng = np.random.default_rng(11)
    q = rng.normal(size=(2, 4, 6)).astype(np.float32)
    v = rng.normal(size=(2, 7, 6)).astype(np.float32)
    out, out2 = model([q, v])
    np.testing.assert_allclose(out.numpy(), mha(q, v).numpy(), rtol=1e-6)
    np.testing.assert_allclose(out2.numpy(), att([q, v]).numpy(), rtol=1e-6)
    # keyword call, as the TensorFlow Transformer tutorial's layers do; key given explicitly
    np.testing.assert_array_equal(mha(query=q, value=v).numpy(), mha(q, v).numpy())
    np.testing.assert_array_equal(mha(query=q, key=v, value=v).numpy(), mha(q, v).numpy())
    assert not np.allclose(mha(q, v, key=v[..., ::-1]).numpy(), mha(q, v).numpy())


def test_merge_layers_broadcast_lower_ranks_after_the_batch_axis():
    """As Keras: (batch, features) merged with (batch, steps, features) is taken as
    (batch, 1, features), not numpy's right-aligned broadcasting."""
    rng = np.random.default_rng(12)
    a = rng.normal(size=(2, 3)).astype(np.float32)
    b = rng.normal(size=(2, 4, 3)).astype(np.float32)
    for cls, fn in ((L.Multiply, np.multiply), (L.Subtract, np.subtract),
                    (L.Maximum, np.maximum), (L.Minimum, np.minimum),
                    (L.Average, lambda p, q: (p + q) / 2)):
        np.testing.assert_allclose(cls()([a, b]).numpy(), fn(a[:, None], b), rtol=1e-6)
    with pytest.raises(ValueError, match="incompatible shapes"):
        L.Multiply()([rng.normal(size=(2, 4)), b.astype(np.float64)])


def test_which_layers_pass_a_mask_on():
    """As Keras 3: the elementwise layers pass a (batch, steps) mask on; Permute and
    RepeatVector (which move or add the steps) drop it, with tapegpu's one warning."""
    x = tg.ones((2, 3, 4))
    set_keras_mask(x, tg.constant([[True, True, False], [True, False, False]]))
    for layer in (L.PReLU(), L.ELU(), L.Identity(), L.UnitNormalization(),
                  L.GroupNormalization(groups=2), L.ActivityRegularization(),
                  L.GaussianNoise(0.1), L.GaussianDropout(0.1), L.SpatialDropout1D(0.1),
                  L.TimeDistributed(L.Dense(2))):
        np.testing.assert_array_equal(get_keras_mask(layer(x)).numpy(), get_keras_mask(x).numpy())
    with pytest.warns(UserWarning, match="Permute .* does not support masking"):
        assert get_keras_mask(L.Permute((2, 1))(x)) is None
