"""Keras' autocasting: layers and models cast floating inputs to their dtype (a float64 numpy
array into a float32 layer works and gives float32, as Keras), differentiably."""
import numpy as np
import pytest

import tapegpu as tg


def test_keras_layers_autocast_floating_inputs_to_their_dtype():
    x64 = np.random.default_rng(0).standard_normal((4, 3))  # float64, as numpy makes them
    d = tg.keras.layers.Dense(2, dtype="float32")
    y = d(x64)
    assert y.dtype == tg.float32 and d.kernel.dtype == tg.float32
    assert x64.dtype == np.float64
    # a layer built on float32 inputs is float32: float64 arrays given later are cast
    d2 = tg.keras.layers.Dense(2)
    d2(np.ones((1, 3), np.float32))
    assert d2(x64).dtype == tg.float32 and d2.kernel.dtype == tg.float32
    # float64 tensors into a float32 layer: cast, and the gradient comes back in float64
    t64 = tg.constant(x64)
    with tg.GradientTape() as tape:
        tape.watch(t64)
        out = tg.reduce_sum(d(t64))
    assert out.dtype == tg.float32
    g = tape.gradient(out, t64)
    assert g.dtype == tg.float64
    np.testing.assert_allclose(g.numpy(), np.tile(d.kernel.numpy().sum(1), (4, 1)), rtol=1e-6)
    # a model of float32 layers on float64 data, as Keras programs feed it
    inputs = tg.keras.Input((3,))
    model = tg.keras.Model(inputs, tg.keras.layers.Dense(1)(
        tg.keras.layers.Dense(4, activation="relu")(inputs)))
    assert model(x64).dtype == tg.float32
    lstm = tg.keras.layers.LSTM(3, dtype="float32")
    assert lstm(np.ones((1, 2, 3), np.float64)).dtype == tg.float32
    with pytest.raises(TypeError, match="Dense .*complex128.*float32"):
        d(tg.constant(np.ones((1, 3), np.complex128)))
