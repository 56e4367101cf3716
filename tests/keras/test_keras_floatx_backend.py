"""`keras.backend.set_floatx('float64')` end to end, and Keras 2's backend functions
(`tf.keras.backend.*`) as TF documents them."""
import numpy as np
import pytest

import tapegpu as tg

K = tg.keras.backend
SINGLE_DEVICE = True


@pytest.fixture
def float64():
    K.set_floatx("float64")
    try:
        yield
    finally:
        K.set_floatx("float32")


def test_floatx_defaults_and_validation():
    assert K.floatx() == "float32"
    with pytest.raises(ValueError, match=r"set_floatx: unknown `floatx` value: 'float8'"):
        K.set_floatx("float8")
    assert K.floatx() == "float32"


def test_set_floatx_float64_end_to_end(float64):
    model = tg.keras.Sequential([tg.keras.Input((3,)),
                                 tg.keras.layers.Dense(8, activation="relu"),
                                 tg.keras.layers.BatchNormalization(),
                                 tg.keras.layers.Dense(1)])
    model.compile(optimizer=tg.keras.optimizers.Adam(1e-2), loss="mse", metrics=["mae"])
    rng = np.random.default_rng(0)
    x, y = rng.random((64, 3)), rng.random((64, 1))
    history = model.fit(x, y, epochs=3, batch_size=16, verbose=0)
    assert {v.dtype.name for v in model.variables} == {"float64"}
    # the optimizer's slots follow the variables (its step counter is an integer)
    slots = {v.dtype.name for v in model.optimizer.variables() if v.dtype.is_floating}
    assert slots == {"float64"}
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert model.predict(x, verbose=0).dtype == np.float64
    assert model(x[:2]).dtype == tg.float64
    # loss values and metrics in float64
    assert isinstance(history.history["mae"][0], float)
    assert tg.keras.metrics.Mean()(1.0).dtype == tg.float64


def test_set_floatx_float64_pieces(float64):
    assert tg.keras.initializers.GlorotUniform()((2, 2)).dtype == tg.float64
    assert tg.keras.initializers.get("zeros")((2,)).dtype == tg.float64
    assert tg.keras.layers.Dense(2)(np.ones((1, 3))).dtype == tg.float64
    assert tg.keras.layers.Dense(2)(tg.ones((1, 3), "int32")).dtype == tg.float64
    assert tg.keras.layers.Embedding(3, 2)(np.array([1])).dtype == tg.float64
    assert tg.keras.Input((2,)).dtype == np.float64
    assert K.random_normal((2,)).dtype == tg.float64
    assert K.variable(1.0).dtype == tg.float64
    assert K.cast_to_floatx([1]).dtype == np.float64
    # TF's own constants are not Keras': tg.constant(1.0) stays float32, as in TF
    assert tg.constant(1.0).dtype == tg.float32
    loss = tg.keras.losses.MeanSquaredError()(np.zeros((2, 1)), np.ones((2, 1)))
    assert loss.dtype == tg.float64


def test_initializer_class_as_kernel_initializer():
    layer = tg.keras.layers.Dense(2, kernel_initializer=tg.keras.initializers.GlorotUniform,
                                  bias_initializer=tg.keras.initializers.Ones)
    layer(tg.ones((1, 3)))
    assert np.all(layer.bias.numpy() == 1)
    assert isinstance(tg.keras.initializers.get("glorot_uniform"),
                      tg.keras.initializers.GlorotUniform)


def test_keras2_backend_functions_as_tf_documents():
    x = tg.constant([[1.0, -2.0], [3.0, 4.0]])
    np.testing.assert_allclose(K.mean(x, axis=1).numpy(), [-0.5, 3.5])
    np.testing.assert_allclose(K.sum(x, axis=0, keepdims=True).numpy(), [[4.0, 2.0]])
    np.testing.assert_allclose(K.sqrt(x).numpy(), [[1.0, 0.0], [np.sqrt(3), 2.0]], rtol=1e-6)
    np.testing.assert_allclose(K.clip(x, 0.0, 2.0).numpy(), [[1.0, 0.0], [2.0, 2.0]])
    assert K.int_shape(tg.keras.Input((3, 4))) == (None, 3, 4)
    assert K.int_shape(K.batch_flatten(tg.zeros((2, 3, 4)))) == (2, 12)
    assert K.dot(tg.ones((2, 3, 4)), tg.ones((4, 5))).shape == (2, 3, 5)
    # batch_dot as Keras 2's docstring: (32, 20) . (32, 20) on axes 1 -> (32, 1)
    assert K.batch_dot(tg.ones((32, 20)), tg.ones((32, 20)), axes=1).shape == (32, 1)
    assert K.batch_dot(tg.ones((32, 20, 1)), tg.ones((32, 30, 20)), axes=(1, 2)).shape \
        == (32, 1, 30)
    b = K.random_bernoulli((1000,), p=0.3, seed=1).numpy()
    assert set(np.unique(b)) <= {0.0, 1.0} and 0.2 < b.mean() < 0.4
    assert K.random_uniform((3,), 2.0, 3.0).numpy().min() >= 2.0
    v = K.variable([1.0, 2.0])
    K.set_value(v, [5.0, 6.0])
    np.testing.assert_array_equal(K.get_value(v), [5.0, 6.0])
    np.testing.assert_allclose(K.switch(tg.constant([True, False]), tg.ones(2),
                                        tg.zeros(2)).numpy(), [1.0, 0.0])
    assert K.image_data_format() == "channels_last" and K.backend() == "tensorflow"
    assert K.epsilon() == 1e-7
    with pytest.raises(NotImplementedError, match="tg.GradientTape"):
        K.gradients(x, [x])
    # Keras' promotion: integers join a float without widening it
    assert K.result_type("int32", "float32") == "float32"
    assert K.result_type("int32", "int64") == "int64"
