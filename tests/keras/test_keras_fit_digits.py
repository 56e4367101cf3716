"""`fit` on 8x8 digits: the progress display and a stated accuracy.

The digits are scikit-learn's 1797 8x8 images when scikit-learn is installed; the synthetic
digits of benchmarks/keras_fit.py (ten noisy class templates, the same size) always.
"""
import re

import numpy as np
import pytest

import tapegpu as tg

keras = tg.keras


def _synthetic_digits():
    rng = np.random.default_rng(0)
    templates = rng.uniform(0, 16, size=(10, 64)).astype(np.float32)
    y = rng.integers(0, 10, 1797)
    x = np.clip(templates[y] + rng.normal(0, 4, size=(1797, 64)), 0, 16).astype(np.float32)
    return x / 16.0, y


def _fit(x, y, capsys, epochs):
    tg.random.set_seed(0)
    model = keras.Sequential([keras.layers.Dense(64, activation="relu", input_shape=(64,)),
                              keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    capsys.readouterr()
    history = model.fit(x, y, epochs=epochs, batch_size=32, validation_split=0.2)
    lines = capsys.readouterr().out.splitlines()
    # not a terminal: "Epoch i/n" then one progress line per epoch, nothing per step
    assert lines[0::2] == [f"Epoch {i}/{epochs}" for i in range(1, epochs + 1)]
    steps = -(-int(len(x) * 0.8) // 32)
    for line, loss, acc in zip(lines[1::2], history.history["loss"],
                               history.history["accuracy"]):
        assert re.fullmatch(rf"{steps}/{steps} ━{{20}} \d+s \d+(ms|us)/step - loss: "
                            rf"{loss:.4f} - accuracy: {acc:.4f} - val_loss: \S+ - "
                            r"val_accuracy: \S+", line), line
    return model, history


def test_fit_on_synthetic_digits_reaches_98_percent(capsys):
    x, y = _synthetic_digits()
    model, history = _fit(x, y, capsys, epochs=5)
    assert history.history["val_accuracy"][-1] >= 0.98
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    cut = int(len(x) * 0.8)
    pred = model.predict(x[cut:], verbose=0).argmax(-1)
    assert np.mean(pred == y[cut:]) == pytest.approx(history.history["val_accuracy"][-1])


def test_fit_on_scikit_learn_digits_reaches_95_percent(capsys, tg_device):
    datasets = pytest.importorskip("sklearn.datasets")
    if tg_device != "numpy":
        pytest.skip("one device is enough for the accuracy on the real digits (the "
                    "synthetic test runs on each)")
    digits = datasets.load_digits()
    order = np.random.default_rng(0).permutation(len(digits.target))
    x = (digits.data[order] / 16.0).astype(np.float32)
    _, history = _fit(x, digits.target[order], capsys, epochs=10)
    assert history.history["val_accuracy"][-1] >= 0.95  # about 0.98 measured
