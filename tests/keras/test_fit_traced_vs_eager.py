"""`fit` traces its step by default: for every kind of layer whose gradient or state depends on
the batch's values (embeddings, max pooling, batch statistics, dropout masks, Keras masks), the
traced fit trains exactly as `compile(run_eagerly=True)` does, batch after batch."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu import keras

layers = keras.layers


def _embedding_model():
    return keras.Sequential([layers.Embedding(12, 4), layers.GlobalAveragePooling1D(),
                             layers.Dense(3)])


def _masked_embedding_model():
    return keras.Sequential([layers.Embedding(12, 4, mask_zero=True),
                             layers.GlobalAveragePooling1D(), layers.Dense(3)])


def _masked_rnn_model():
    return keras.Sequential([layers.Embedding(12, 4, mask_zero=True), layers.GRU(5),
                             layers.Dense(3)])


def _cnn_model(padding):
    return keras.Sequential([layers.Conv2D(4, 3, padding=padding, activation="relu"),
                             layers.MaxPooling2D(2, padding=padding), layers.Flatten(),
                             layers.Dense(3)])


def _pool1d_model():
    return keras.Sequential([layers.Conv1D(4, 3, activation="relu"), layers.MaxPooling1D(2),
                             layers.GlobalMaxPooling1D(), layers.Dense(3)])


def _batchnorm_model():
    return keras.Sequential([layers.Dense(6), layers.BatchNormalization(),
                             layers.Activation("relu"), layers.Dense(3)])


def _dropout_model():
    return keras.Sequential([layers.Dense(8, activation="relu"), layers.Dropout(0.5, seed=3),
                             layers.Dense(3)])


def _tokens(rng, n, length=7, padded=False):
    x = rng.integers(1, 12, (n, length))
    if padded:  # trailing zeros of different lengths: the masked steps
        lengths = rng.integers(2, length + 1, n)
        x[np.arange(length)[None, :] >= lengths[:, None]] = 0
    return x.astype(np.int32)


CASES = {
    "embedding": (_embedding_model, lambda rng: _tokens(rng, 24)),
    "masked_embedding": (_masked_embedding_model, lambda rng: _tokens(rng, 24, padded=True)),
    "masked_gru": (_masked_rnn_model, lambda rng: _tokens(rng, 24, padded=True)),
    "maxpool_valid": (lambda: _cnn_model("valid"), lambda rng: rng.standard_normal((24, 7, 7, 2))),
    "maxpool_same": (lambda: _cnn_model("same"), lambda rng: rng.standard_normal((24, 7, 7, 2))),
    "maxpool1d": (_pool1d_model, lambda rng: rng.standard_normal((24, 9, 2))),
    "batchnorm": (_batchnorm_model, lambda rng: rng.standard_normal((24, 5))),
    "dropout": (_dropout_model, lambda rng: rng.standard_normal((24, 5))),
}


def _fit(case, run_eagerly):
    build, make_x = CASES[case]
    rng = np.random.default_rng(0)
    x = make_x(rng).astype(np.float32) if case.startswith(("max", "batch", "drop")) else \
        make_x(rng)
    y = rng.integers(0, 3, len(x)).astype(np.int32)
    keras.utils.set_random_seed(1)
    model = build()
    model.build(x.shape)
    start = [w.numpy() for w in model.weights]
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], run_eagerly=run_eagerly)
    history = model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    moved = [not np.array_equal(w.numpy(), w0) for w, w0 in zip(model.weights, start)]
    assert any(moved), f"{case}: fit changed no weight"
    return model, history.history, model.predict(x, verbose=0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_traced_fit_trains_as_eager_fit(case):
    traced, h_traced, p_traced = _fit(case, run_eagerly=False)
    eager, h_eager, p_eager = _fit(case, run_eagerly=True)
    for key in h_eager:
        np.testing.assert_allclose(h_traced[key], h_eager[key], rtol=1e-6, atol=1e-6,
                                   err_msg=f"{case}: history[{key!r}]")
    for a, b in zip(traced.weights, eager.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6,
                                   err_msg=f"{case}: {b.name}")
    np.testing.assert_allclose(p_traced, p_eager, rtol=1e-6, atol=1e-6)
