"""keras.layers.CategoryEncoding and Discretization (Keras 3's documented examples), the
custom-object registry and activations.serialize/deserialize."""
import numpy as np
import pytest

import tapegpu as tg

L = tg.keras.layers


def test_category_encoding_modes():
    one = L.CategoryEncoding(num_tokens=4, output_mode="one_hot")(tg.constant([3, 2, 0, 1]))
    np.testing.assert_array_equal(one.numpy(), np.eye(4)[[3, 2, 0, 1]])
    assert one.dtype == tg.float32
    col = L.CategoryEncoding(4, "one_hot")(np.array([[1], [3]]))  # a last axis of 1 is replaced
    np.testing.assert_array_equal(col.numpy(), [[0, 1, 0, 0], [0, 0, 0, 1]])
    x = tg.constant([[0, 1], [0, 0], [1, 2], [3, 1]])
    multi = L.CategoryEncoding(4)(x).numpy()  # multi_hot by default
    np.testing.assert_array_equal(multi, [[1, 1, 0, 0], [1, 0, 0, 0], [0, 1, 1, 0], [0, 1, 0, 1]])
    w = np.array([[.1, .2], [.1, .1], [.2, .3], [.4, .2]])
    count = L.CategoryEncoding(4, "count")(x, count_weights=w).numpy()
    np.testing.assert_allclose(count, [[.1, .2, 0, 0], [.2, 0, 0, 0], [0, .2, .3, 0],
                                       [0, .2, 0, .4]], rtol=1e-6)
    np.testing.assert_array_equal(L.CategoryEncoding(3, "count")([2, 2, 0]).numpy(), [1, 0, 2])
    with pytest.raises(tg.errors.InvalidArgumentError, match="0 <= values < num_tokens"):
        L.CategoryEncoding(3)(tg.constant([[3]]))
    with pytest.raises(ValueError, match="num_tokens must be set"):
        L.CategoryEncoding()
    with pytest.raises(ValueError, match="count_weights"):
        L.CategoryEncoding(4)(x, count_weights=w)


def test_category_encoding_in_a_model():
    model = tg.keras.Sequential([tg.keras.Input((2,), dtype="int64"), L.CategoryEncoding(5),
                                 L.Dense(1, kernel_initializer="ones")])
    np.testing.assert_allclose(model(np.array([[1, 2], [4, 4]])).numpy(), [[2.0], [1.0]])


def test_discretization_boundaries_and_adapt():
    x = np.array([[-1.5, 1.0, 3.4, .5], [0.0, 3.0, 1.3, 0.0]])
    out = L.Discretization(bin_boundaries=[0., 1., 2.])(x)
    assert out.dtype == tg.int64
    np.testing.assert_array_equal(out.numpy(), [[0, 2, 3, 1], [1, 3, 2, 1]])
    layer = L.Discretization(num_bins=4, epsilon=0.01)
    layer.adapt(x)
    np.testing.assert_array_equal(layer(x).numpy(), [[0, 2, 3, 2], [1, 3, 3, 1]])
    ds = tg.data.Dataset.from_tensor_slices(x.ravel().astype(np.float32)).batch(3)
    batched = L.Discretization(num_bins=4)
    batched.adapt(ds)
    assert len(batched.bin_boundaries) == 3
    oh = L.Discretization(bin_boundaries=[0.0], output_mode="one_hot")(np.array([-1.0, 2.0]))
    np.testing.assert_array_equal(oh.numpy(), [[1, 0], [0, 1]])
    with pytest.raises(ValueError, match="Both `num_bins` and `bin_boundaries`"):
        L.Discretization(bin_boundaries=[1.0], num_bins=3)
    with pytest.raises(ValueError, match="call `adapt"):
        L.Discretization(num_bins=3)(x)
    with pytest.raises(ValueError, match="Cannot adapt"):
        L.Discretization(bin_boundaries=[1.0]).adapt(x)


def test_registry_and_activation_serialization():
    @tg.keras.utils.register_keras_serializable(package="T")
    def scaled(x):
        return x * 3

    assert tg.keras.saving.get_registered_name(scaled) == "T>scaled"
    assert tg.keras.saving.get_registered_object("T>scaled") is scaled
    assert tg.keras.saving.get_custom_objects()["T>scaled"] is scaled
    with pytest.raises(ValueError, match="get_config"):
        tg.keras.saving.register_keras_serializable()(type("NoConfig", (), {}))
    with tg.keras.saving.custom_object_scope({"x2": scaled}):
        assert tg.keras.saving.get_registered_object("x2") is scaled
    assert tg.keras.saving.get_registered_object("x2") is None
    acts = tg.keras.activations
    assert acts.serialize(acts.relu) == "relu" and acts.deserialize("relu") is acts.relu
    cfg = acts.serialize(scaled)
    assert cfg["config"] == "T>scaled" and acts.deserialize(cfg) is scaled
    with pytest.raises(ValueError, match="cannot be serialized"):
        acts.serialize(lambda x: x)
    with pytest.raises(ValueError, match="Unknown activation function: 'nope'"):
        acts.deserialize("nope")
    kl = tg.keras.losses.kullback_leibler_divergence([[0.5, 0.5]], [[0.25, 0.75]])
    np.testing.assert_allclose(kl.numpy(), [0.5 * np.log(2) + 0.5 * np.log(0.5 / 0.75)],
                               rtol=1e-5)


def test_integer_lookup_keras_examples():
    vocab = [12, 36, 1138, 42]
    data = np.array([[12, 1138, 42], [42, 1000, 36]])
    layer = L.IntegerLookup(vocabulary=vocab)
    np.testing.assert_array_equal(layer(data).numpy(), [[1, 3, 4], [4, 0, 2]])
    assert layer(data).dtype == tg.int64 and layer.vocabulary_size() == 5
    adapted = L.IntegerLookup()
    adapted.adapt(data)
    assert adapted.get_vocabulary() == [-1, 42, 1138, 1000, 36, 12]
    np.testing.assert_array_equal(adapted(data).numpy(), [[5, 2, 1], [1, 3, 4]])
    np.testing.assert_array_equal(L.IntegerLookup(vocabulary=vocab, num_oov_indices=2)(data)
                                  .numpy(), [[2, 4, 5], [5, 0, 3]])
    np.testing.assert_array_equal(
        L.IntegerLookup(vocabulary=vocab, output_mode="one_hot")(np.array([12, 36, 1138, 42, 7]))
        .numpy(), np.eye(5)[[1, 2, 3, 4, 0]])
    np.testing.assert_array_equal(L.IntegerLookup(vocabulary=vocab, output_mode="multi_hot")(
        data).numpy(), [[0, 1, 0, 1, 1], [1, 0, 1, 0, 1]])
    np.testing.assert_array_equal(L.IntegerLookup(vocabulary=vocab, output_mode="count",
                                                  pad_to_max_tokens=True, max_tokens=8)(
        np.array([[12, 12, 7]])).numpy(), [[1, 2, 0, 0, 0, 0, 0, 0]])
    masked = L.IntegerLookup(vocabulary=vocab, mask_token=0)
    np.testing.assert_array_equal(masked(np.array([[12, 0, 42], [42, 1000, 0]])).numpy(),
                                  [[2, 0, 5], [5, 1, 0]])
    inverse = L.IntegerLookup(vocabulary=vocab, invert=True)
    np.testing.assert_array_equal(inverse(np.array([[1, 3, 4], [4, 0, 2]])).numpy(),
                                  [[12, 1138, 42], [42, -1, 36]])
    with pytest.raises(ValueError, match="repeated term"):
        L.IntegerLookup(vocabulary=[1, 1])
    with pytest.raises(ValueError, match="invert"):
        L.IntegerLookup(invert=True, output_mode="multi_hot")
    max3 = L.IntegerLookup(max_tokens=3)
    max3.adapt(np.array([5, 5, 5, 6, 6, 7]))
    assert max3.get_vocabulary() == [-1, 5, 6]
