"""keras.Model subclassing, keras.Sequential (input_shape=, keras.Input), functional models,
the layers added for Keras, summary, weights files."""
import numpy as np
import pytest

import tapegpu as tg

keras = tg.keras
X = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)


class MLP(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(8, activation="relu")
        self.drop = keras.layers.Dropout(0.5, seed=0)
        self.out = keras.layers.Dense(3)

    def call(self, x, training=None):
        return self.out(self.drop(self.hidden(x), training=training))


def test_layers_are_tapegpus():
    for name in ("Dense", "Dropout", "BatchNormalization", "Activation", "Flatten", "Add",
                 "Embedding", "LayerNormalization"):
        assert getattr(keras.layers, name) is getattr(tg.layers, name)
    assert issubclass(keras.Sequential, tg.layers.Sequential)
    for name in keras.layers.__all__:  # one class each, under both spellings
        assert getattr(tg.layers, name) is getattr(keras.layers, name), name
    assert tg.layers.Sequential is keras.Sequential is keras.models.Sequential


def test_subclassed_model_variables_and_training_flag():
    model = MLP(name="mlp")
    assert model.name == "mlp" and model.variables == []
    y = model(X)
    assert y.shape == (5, 3)
    tv = model.trainable_variables
    assert isinstance(tv, list) and isinstance(model.variables, list)
    assert [v.shape for v in tv] == [(4, 8), (8,), (8, 3), (3,)]
    np.testing.assert_array_equal(model(X).numpy(), y.numpy())  # inference: dropout is off
    assert not np.array_equal(model(X, training=True).numpy(), y.numpy())
    assert [layer.name for layer in model.layers] == [model.hidden.name, model.drop.name,
                                                      model.out.name]


def test_subclassed_build_is_called_with_the_input_shape():
    class Affine(keras.Model):
        def build(self, input_shape):
            self.seen = input_shape
            self.w = self.add_weight("w", (input_shape[-1], 2), "ones")

        def call(self, x):
            return x @ self.w

    m = Affine()
    assert m(X).shape == (5, 2) and m.seen == (5, 4) and m.built
    # Model.build(shape) without an own build calls the model on zeros
    m2 = MLP()
    m2.build((None, 4))
    assert len(m2.trainable_variables) == 4


def test_gradients_through_a_subclassed_model():
    model = MLP()
    with tg.GradientTape() as tape:
        loss = tg.reduce_mean(model(X, training=True) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None and g.shape == v.shape
               for g, v in zip(grads, model.trainable_variables))


def test_sequential_input_shape_builds_at_once():
    model = keras.Sequential([keras.layers.Dense(8, activation="relu", input_shape=(4,)),
                              keras.layers.Dense(2)])
    assert [v.shape for v in model.trainable_variables] == [(4, 8), (8,), (8, 2), (2,)]
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "(None, 8)" in text and "(None, 2)" in text and "Total params: 58" in text
    assert "Trainable params: 58" in text and "Non-trainable params: 0" in text
    assert model(X).shape == (5, 2)


def test_sequential_with_keras_input_and_add():
    model = keras.Sequential()
    model.add(keras.Input(shape=(4,)))
    model.add(keras.layers.Dense(3))
    assert len(model.layers) == 1 and len(model.variables) == 2
    model.add(keras.layers.Dense(1))
    assert model(X).shape == (5, 1)
    lazy = keras.Sequential([keras.layers.Dense(3)])
    assert lazy.variables == []
    assert lazy(X).shape == (5, 3) and len(lazy.variables) == 2


def test_one_sequential_for_tg_layers_and_keras(tmp_path):
    """tg.layers.Sequential is keras.Sequential: callables among the layers, the first input's
    dtype, output shapes noted at the first call, checkpoint paths model/layers/<i>/..."""
    model = tg.layers.Sequential([keras.layers.Dense(3), lambda x: 2.0 * x, tg.nn.relu])
    x = tg.constant(X.astype(np.float64))
    y = model(x)
    assert y.dtype == tg.float64 and model.layers[0].kernel.dtype == tg.float64
    assert model.output_shape == (5, 3) and isinstance(model, keras.Model)
    np.testing.assert_array_equal(y.numpy(), np.maximum(2.0 * model.layers[0](x).numpy(), 0.0))
    path = tg.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    names = {name for name, _ in tg.train.list_variables(path)}
    assert {"model/layers/0/kernel", "model/layers/0/bias"} <= names


def test_functional_dag_matches_the_layers_applied_by_hand():
    inputs = keras.Input(shape=(4,), name="x")
    h = keras.layers.Dense(6, activation="relu")(inputs)
    a = keras.layers.Dense(6)(h)
    s = keras.layers.Add()([h, a])
    c = keras.layers.Concatenate()([s, h])
    outputs = keras.layers.Dense(2)(c)
    assert outputs.shape == (None, 2)
    model = keras.Model(inputs=inputs, outputs=outputs)
    assert isinstance(model, keras.Model)
    d1, d2, add, cat, d3 = model.layers[1:]
    hh = d1(X)
    want = d3(cat([add([hh, d2(hh)]), hh]))
    np.testing.assert_allclose(model(X).numpy(), want.numpy(), rtol=1e-6)
    assert len(model.trainable_variables) == 6


def test_functional_multiple_inputs_and_outputs():
    a, b = keras.Input(shape=(4,)), keras.Input(shape=(2,))
    merged = keras.layers.Concatenate()([a, b])
    o1 = keras.layers.Dense(1)(merged)
    o2 = keras.layers.Dense(3)(merged)
    model = keras.Model([a, b], [o1, o2])
    y1, y2 = model([X, np.ones((5, 2), np.float32)])
    assert y1.shape == (5, 1) and y2.shape == (5, 3)
    with pytest.raises(ValueError, match="the model has 2 inputs, got 1"):
        model(X)


def test_functional_with_a_nested_model():
    inner = MLP()
    inputs = keras.Input(shape=(4,))
    outputs = keras.layers.Softmax()(inner(inputs))
    model = keras.Model(inputs, outputs)
    np.testing.assert_allclose(model(X).numpy().sum(-1), np.ones(5), rtol=1e-6)
    assert len(model.trainable_variables) == 4


def test_new_layers_compute_keras_formulas():
    L = keras.layers
    assert L.Flatten()(np.zeros((2, 3, 4), np.float32)).shape == (2, 12)
    assert L.Reshape((2, -1))(np.zeros((3, 8), np.float32)).shape == (3, 2, 4)
    x = np.array([[1.0, 2.0, 6.0], [-1.0, 0.0, 4.0]], np.float32)
    ln = L.LayerNormalization(epsilon=1e-3)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(ln(x).numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(L.ReLU(max_value=3.0)(x).numpy(), np.clip(x, 0, 3))
    np.testing.assert_allclose(L.ReLU(negative_slope=0.1, threshold=1.0)(x).numpy(),
                               np.where(x >= 1, x, 0.1 * (x - 1)), rtol=1e-6)
    np.testing.assert_allclose(L.LeakyReLU()(x).numpy(), np.where(x > 0, x, 0.3 * x),
                               rtol=1e-6)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(L.Softmax()(x).numpy(), e / e.sum(-1, keepdims=True),
                               rtol=1e-6)
    np.testing.assert_allclose(L.Rescaling(0.5, offset=1.0)(x).numpy(), x * 0.5 + 1.0)
    np.testing.assert_allclose(L.Lambda(lambda t, k: t * k, arguments={"k": 3.0})(x).numpy(),
                               x * 3)
    emb = L.Embedding(10, 4)
    out = emb(np.array([[1, 2], [9, 0]]))
    assert out.shape == (2, 2, 4)
    np.testing.assert_array_equal(out.numpy()[1, 0], emb.embeddings.numpy()[9])
    assert np.abs(emb.embeddings.numpy()).max() <= 0.05  # Keras' 'uniform': U(-0.05, 0.05)
    with pytest.raises(tg.InvalidArgumentError, match=r"indices must be in \[0, 10\)"):
        emb(np.array([10])).numpy()  # at the call on a CPU; on a GPU at the next host read
    with pytest.raises(ValueError, match="Concatenate .* must match"):
        L.Concatenate()([np.zeros((2, 3), np.float32), np.zeros((3, 3), np.float32)])
    with pytest.raises(ValueError, match="Reshape .* cannot reshape"):
        L.Reshape((5,))(np.zeros((2, 4), np.float32))


def test_embedding_and_layer_norm_gradients():
    emb = keras.layers.Embedding(5, 3)
    ln = keras.layers.LayerNormalization()
    with tg.GradientTape() as tape:
        y = tg.reduce_sum(ln(emb(np.array([[0, 1, 1]]))) * tg.constant([1.0, 2.0, 3.0]))
    g_emb, g_gamma, g_beta = tape.gradient(y, [emb.embeddings, ln.gamma, ln.beta])
    assert g_emb.shape == (5, 3) and np.abs(g_emb.numpy()[2:]).max() == 0
    np.testing.assert_allclose(g_beta.numpy(), [3.0, 6.0, 9.0], rtol=1e-6)


def test_trainable_false_freezes_a_layer():
    model = MLP()
    model(X)
    model.hidden.trainable = False
    assert [v.shape for v in model.trainable_variables] == [(8, 3), (3,)]
    assert [v.shape for v in model.non_trainable_variables] == [(4, 8), (8,)]
    frozen = keras.layers.Dense(2, trainable=False)
    frozen(X)
    assert frozen.trainable_variables == [] and len(frozen.variables) == 2


def test_save_and_load_weights(tmp_path):
    a, b = MLP(), MLP()
    a(X), b(X)
    path = str(tmp_path / "mlp.weights.npz")
    a.save_weights(path)
    b.load_weights(path)
    np.testing.assert_array_equal(a(X).numpy(), b(X).numpy())
    c = keras.Sequential([keras.layers.Dense(2, input_shape=(4,))])
    with pytest.raises(ValueError, match="holds 4 arrays but model"):
        c.load_weights(path)


def test_model_errors():
    with pytest.raises(ValueError, match="InputLayer: give shape="):
        keras.Input()
    with pytest.raises(NotImplementedError, match="must implement call"):
        keras.Model()(X)
    with pytest.raises(ValueError, match="must be keras.Input tensors"):
        keras.Model(X, X)
    with pytest.raises(TypeError, match="unexpected arguments"):
        keras.Input(shape=(2,), ragged=True)
    with pytest.raises(TypeError, match="Dense.*input_shape must be a tuple"):
        keras.layers.Dense(2, input_shape=3)
    with pytest.raises(RuntimeError, match="You must call `compile\\(\\)`"):
        MLP().fit(X, np.zeros(5), verbose=0)


def test_utils_and_backend():
    np.testing.assert_array_equal(keras.utils.to_categorical([0, 2, 1]),
                                  np.eye(3, dtype=np.float32)[[0, 2, 1]])
    with pytest.raises(ValueError, match="to_categorical: labels must be in"):
        keras.utils.to_categorical([3], num_classes=2)
    keras.backend.clear_session()
    assert keras.layers.Dense(1).name == "dense"
    assert keras.activations.get("relu") is tg.nn.relu


def test_regularizers_fill_losses_and_fit_minimises_them():
    reg = keras.regularizers
    assert float(reg.l2(0.5)(tg.constant([1.0, -2.0]))) == 2.5
    assert float(reg.L1(0.5)(tg.constant([1.0, -2.0]))) == 1.5
    assert float(reg.L1L2(l1=1.0, l2=1.0)(tg.constant([2.0]))) == 6.0
    with pytest.raises(ValueError, match="Could not interpret regularizer identifier"):
        keras.layers.Dense(1, kernel_regularizer="l3")
    model = keras.Sequential([keras.layers.Dense(3, input_shape=(2,),
                                                 kernel_regularizer=reg.l2(0.1)),
                              keras.layers.Dense(1, bias_regularizer="l1")])
    kernel = model.layers[0].kernel
    assert len(model.losses) == 2
    np.testing.assert_allclose(float(model.losses[0]), 0.1 * (kernel.numpy() ** 2).sum(),
                               rtol=1e-6)
    with tg.GradientTape() as tape:
        penalty = tg.add_n(model.losses)
    np.testing.assert_allclose(tape.gradient(penalty, kernel).numpy(), 0.2 * kernel.numpy(),
                               rtol=1e-6)
    # zero inputs and targets: the data loss has no gradient, only the penalty moves the kernel
    before = kernel.numpy()
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    model.fit(np.zeros((4, 2), np.float32), np.zeros((4, 1), np.float32), batch_size=4,
              epochs=3, verbose=0)
    np.testing.assert_allclose(kernel.numpy(), before * (1 - 0.5 * 0.2) ** 3, rtol=1e-5)


def test_custom_layer_in_keras_3_style():
    """TF's "custom layers" guide: add_weight(shape=..., initializer=..., trainable=...)."""
    class Linear(keras.layers.Layer):
        def __init__(self, units=32, **kwargs):
            super().__init__(**kwargs)
            self.units = units

        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], self.units),
                                     initializer="random_normal", trainable=True)
            self.b = self.add_weight(shape=(self.units,), initializer="zeros", trainable=True)
            self.k = self.add_weight((2,), "ones", trainable=False)
            self.g = self.add_weight(shape=(2, 2))

        def call(self, inputs):
            return tg.matmul(inputs, self.w) + self.b

    layer = Linear(4, name="linear")
    assert layer(np.ones((2, 3), np.float32)).shape == (2, 4)
    assert [v.name for v in layer.variables] == ["linear/variable", "linear/variable_1",
                                                 "linear/variable_2", "linear/variable_3"]
    assert len(layer.trainable_variables) == 3
    np.testing.assert_array_equal(layer.k.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(layer.b.numpy(), np.zeros(4))
    assert np.abs(layer.g.numpy()).max() > 0  # glorot_uniform by default, as Keras
    with pytest.raises(ValueError, match="Linear.add_weight: shape is required"):
        layer.add_weight(name="x")


def test_datasets_load_local_files_or_name_the_download(tmp_path):
    with pytest.raises(RuntimeError, match="mnist.load_data: tapegpu does not download.*"
                                           "mnist.npz"):
        keras.datasets.mnist.load_data()
    path = tmp_path / "mnist.npz"
    np.savez(path, x_train=np.zeros((3, 28, 28), np.uint8), y_train=np.arange(3),
             x_test=np.ones((2, 28, 28), np.uint8), y_test=np.arange(2))
    (x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data(path=str(path))
    assert x_train.shape == (3, 28, 28) and y_test.tolist() == [0, 1]


def test_default_names_follow_keras():
    keras.backend.clear_session()
    assert MLP().name == "mlp"
    assert keras.layers.ReLU().name == "re_lu"
    assert keras.layers.LayerNormalization().name == "layer_normalization"


def test_functional_operators_on_symbolic_tensors():
    a, b = keras.Input(shape=(4,)), keras.Input(shape=(4,))
    dense = keras.layers.Dense(4)
    h = dense(a)
    o = (h + b) * 2.0 - 1.0
    o2 = 1.0 - o[:, :2]
    assert o.shape == (None, 4) and o2.shape == (None, 2)
    model = keras.Model([a, b], [o, o2, -o, h @ tg.ones((4, 1))])
    x1, x2 = X[:, :4], X[::-1, :4].copy()
    r = model([x1, x2])
    want = (dense(x1).numpy() + x2) * 2 - 1
    np.testing.assert_allclose(r[0].numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(r[1].numpy(), 1 - want[:, :2], rtol=1e-6)
    np.testing.assert_allclose(r[2].numpy(), -want, rtol=1e-6)
    np.testing.assert_allclose(r[3].numpy(), dense(x1).numpy().sum(-1, keepdims=True), rtol=1e-5)


def test_get_config_round_trips_simple_layers_and_sequential():
    layer = keras.layers.Dense(3, activation="relu", use_bias=False, name="d")
    assert layer.get_config() == {"units": 3, "activation": "relu", "use_bias": False,
                                  "name": "d", "trainable": True}
    clone = keras.layers.Dense.from_config(layer.get_config())
    assert (clone.units, clone.use_bias, clone.name) == (3, False, "d")
    with pytest.raises(NotImplementedError, match="argument kernel_initializer=.* not a plain"):
        keras.layers.Dense(3, kernel_initializer=tg.initializers.Zeros()).get_config()
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dropout(0.25), keras.layers.Dense(2)], name="seq")
    config = model.get_config()
    assert [e["class_name"] for e in config["layers"]] == ["InputLayer", "Dense", "Dropout",
                                                           "Dense"]
    rebuilt = keras.Sequential.from_config(config)
    assert rebuilt.name == "seq"
    assert [v.shape for v in rebuilt.variables] == [v.shape for v in model.variables]
    rebuilt.set_weights(model.get_weights())
    np.testing.assert_array_equal(rebuilt(X).numpy(), model(X).numpy())
    assert MLP(name="m").get_config() == {"name": "m", "trainable": True}
