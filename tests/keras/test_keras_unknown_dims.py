"""Functional models on inputs with unknown dimensions build symbolically, as Keras': a U-Net
on `Input((None, None, 3))` (Conv2D, MaxPooling2D, UpSampling2D, Concatenate skip connections)
gets its shapes from the layers' rules, no layer runs while the graph is built, and the model
then runs on any valid image size."""
import numpy as np
import pytest

import tapegpu as tg

L = tg.keras.layers


def _unet(depth, width=4):
    inp = tg.keras.Input((None, None, 3))
    x, skips = inp, []
    for d in range(depth):
        x = L.Conv2D(width * 2 ** d, 3, padding="same", activation="relu")(x)
        x = L.BatchNormalization()(x)
        skips.append(x)
        x = L.MaxPooling2D(2)(x)
    x = L.Conv2D(width * 2 ** depth, 3, padding="same", activation="relu")(x)
    x = L.Dropout(0.1)(x)
    for d in reversed(range(depth)):
        x = L.UpSampling2D(2)(x)
        x = L.Concatenate()([x, skips[d]])
        x = L.Conv2D(width * 2 ** d, 3, padding="same", activation="relu")(x)
    out = L.Conv2D(1, 1, activation="sigmoid")(x)
    return inp, out


def test_unet_on_unknown_sizes_builds_without_running_a_layer(monkeypatch):
    ran = []
    for cls in (L.Conv2D, L.MaxPooling2D, L.UpSampling2D, L.Concatenate,
                L.BatchNormalization):
        original = cls.call
        monkeypatch.setattr(cls, "call", lambda self, *a, _o=original, **k:
                            ran.append(type(self).__name__) or _o(self, *a, **k))
    inp, out = _unet(depth=5)  # five poolings: no small stand-in size would pass them
    assert ran == []
    assert out.shape == (None, None, None, 1)
    model = tg.keras.Model(inp, out)
    assert ran == []
    assert model.output_shape == (None, None, None, 1)
    assert [v.shape for v in model.layers[1].trainable_variables] == [(3, 3, 3, 4), (4,)]
    y = model(np.random.default_rng(0).random((2, 64, 96, 3)).astype(np.float32))
    assert y.shape == (2, 64, 96, 1) and "Conv2D" in ran


def test_unet_runs_and_trains_on_several_sizes():
    inp, out = _unet(depth=2)
    model = tg.keras.Model(inp, out)
    opt = tg.optimizers.Adam(1e-2)
    for h, w in ((8, 8), (12, 16), (4, 20)):
        x = np.random.default_rng(h).random((1, h, w, 3)).astype(np.float32)
        with tg.GradientTape() as tape:
            y = model(x, training=True)
            loss = tg.reduce_mean((y - 0.5) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        assert all(g is not None for g in grads)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        assert y.shape == (1, h, w, 1)


def test_symbolic_shapes_follow_keras_rules():
    inp = tg.keras.Input((None, 10, 3))
    c = L.Conv2D(5, 3, strides=2)(inp)  # valid: (10 - 3) // 2 + 1 = 4 along the known axis
    assert c.shape == (None, None, 4, 5)
    p = L.MaxPooling2D(2, padding="same")(c)
    assert p.shape == (None, None, 2, 5)
    u = L.UpSampling2D((2, 3))(p)
    assert u.shape == (None, None, 6, 5)
    a = L.Add()([u, u])
    assert a.shape == (None, None, 6, 5)
    d = L.Dense(7)(a)
    assert d.shape == (None, None, 6, 7)
    with pytest.raises(ValueError, match="Concatenate .*every axis but the concatenation"):
        L.Concatenate()([u, d[:, :, :3, :]])


def test_layers_without_a_rule_are_run_on_stand_ins_and_unknown_dims_stay_unknown():
    tokens = tg.keras.Input((None,), dtype="int32")
    e = L.Embedding(10, 4)(tokens)
    assert e.shape == (None, None, 4)
    assert L.LSTM(3)(e).shape == (None, 3)
    assert L.LSTM(3, return_sequences=True)(e).shape == (None, None, 3)

    class NeedsFive(tg.keras.layers.Layer):
        def call(self, x):
            return tg.reshape(x, (-1, 5, 3))  # 5 divides no stand-in size
    with pytest.raises(ValueError, match="NeedsFive .*cannot infer its output shape on "
                                         "inputs with unknown dimensions.*compute_output_shape"):
        NeedsFive()(tg.keras.Input((None, 3)))

    class Halve(tg.keras.layers.Layer):
        def call(self, x):
            return x[:, ::2]

        def compute_output_shape(self, input_shape):
            n = input_shape[1]
            return (input_shape[0], None if n is None else (n + 1) // 2) + input_shape[2:]
    assert Halve()(tg.keras.Input((None, 3))).shape == (None, None, 3)
