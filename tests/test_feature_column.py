"""tg.feature_column and DenseFeatures against hand-computed outputs (TF's semantics)."""
import numpy as np
import pytest

import tapegpu as tg

fc = tg.feature_column


def test_numeric_column_defaults_shape_and_normalizer():
    col = fc.numeric_column("x", shape=2, normalizer_fn=lambda v: v * 2.0)
    assert col.name == "x" and col.shape == (2,) and col.dtype == tg.float32
    out = tg.keras.layers.DenseFeatures([col])({"x": tg.constant([[1, 2], [3, 4]])})
    assert out.dtype == tg.float32
    np.testing.assert_array_equal(out.numpy(), [[2, 4], [6, 8]])
    with pytest.raises(ValueError, match="shape dimensions must be greater than 0"):
        fc.numeric_column("x", shape=(0,))


def test_bucketized_boundaries_are_left_closed():
    b = fc.bucketized_column(fc.numeric_column("a"), [0.0, 10.0, 20.0])
    assert b.name == "a_bucketized" and b.num_buckets == 4
    x = np.array([-5, 0, 9.99, 10, 25], dtype=np.float32)
    out = tg.keras.layers.DenseFeatures([b])({"a": x}).numpy()
    expected = np.eye(4, dtype=np.float32)[np.searchsorted([0, 10, 20], x, side="right")]
    np.testing.assert_array_equal(out, expected)
    with pytest.raises(ValueError, match="sorted list"):
        fc.bucketized_column(fc.numeric_column("a"), [3, 1])
    with pytest.raises(ValueError, match="numeric_column"):
        fc.bucketized_column("a", [1])


def test_vocabulary_list_indicator_and_default_value():
    c = fc.categorical_column_with_vocabulary_list("k", ["a", "b", "c"])
    ind = fc.indicator_column(c)
    assert ind.name == "k_indicator"
    out = tg.keras.layers.DenseFeatures([ind])({"k": tg.constant([["a", "c"], ["z", "b"]])})
    np.testing.assert_array_equal(out.numpy(), [[1, 0, 1], [0, 1, 0]])
    c2 = fc.categorical_column_with_vocabulary_list("k", ["a", "b"], default_value=0)
    out = tg.keras.layers.DenseFeatures([fc.indicator_column(c2)])({"k": ["z", "b"]})
    np.testing.assert_array_equal(out.numpy(), [[1, 0], [0, 1]])
    ints = fc.categorical_column_with_vocabulary_list("n", [10, 20])
    out = tg.keras.layers.DenseFeatures([fc.indicator_column(ints)])({"n": [20, 10, 5]})
    np.testing.assert_array_equal(out.numpy(), [[0, 1], [1, 0], [0, 0]])
    with pytest.raises(ValueError, match="Duplicate keys"):
        fc.categorical_column_with_vocabulary_list("k", ["a", "a"])
    with pytest.raises(NotImplementedError, match="FarmHash"):
        fc.categorical_column_with_vocabulary_list("k", ["a"], num_oov_buckets=2)
    with pytest.raises(NotImplementedError, match="FarmHash"):
        fc.crossed_column([c, c2], 10)


def test_embedding_column_mean_combiner_and_training():
    c = fc.categorical_column_with_vocabulary_list("k", ["a", "b", "c"])
    e = fc.embedding_column(c, dimension=2)
    layer = tg.keras.layers.DenseFeatures([e])
    out = layer({"k": tg.constant([["a", "b"], ["c", "zz"]])})
    table = layer.trainable_variables[0].numpy()
    assert table.shape == (3, 2)
    # stddev 1/sqrt(2) truncated at two stddevs
    assert np.all(np.abs(table) <= 2 / np.sqrt(2) + 1e-6)
    np.testing.assert_allclose(out.numpy(), [(table[0] + table[1]) / 2, table[2]], rtol=1e-6)
    with tg.GradientTape() as tape:
        y = tg.reduce_sum(layer({"k": tg.constant([["a", "a"]])}))
    g = tape.gradient(y, layer.trainable_variables[0])
    np.testing.assert_allclose(tg.convert_to_tensor(g).numpy(), [[1, 1], [0, 0], [0, 0]])
    s = fc.embedding_column(c, dimension=2, combiner="sum",
                            initializer=tg.keras.initializers.Ones())
    out = tg.keras.layers.DenseFeatures([s])({"k": tg.constant([["a", "b"]])})
    np.testing.assert_array_equal(out.numpy(), [[2, 2]])
    with pytest.raises(ValueError, match="Invalid dimension"):
        fc.embedding_column(c, dimension=0)


def test_dense_features_orders_columns_by_name_and_checks_inputs():
    cols = [fc.numeric_column("b"), fc.numeric_column("a"), fc.numeric_column("C")]
    out = tg.keras.layers.DenseFeatures(cols)({"a": [1.0], "b": [2.0], "C": [3.0]})
    np.testing.assert_array_equal(out.numpy(), [[3, 1, 2]])
    with pytest.raises(ValueError, match="not in features dictionary"):
        tg.keras.layers.DenseFeatures(cols)({"a": [1.0]})
    with pytest.raises(ValueError, match="DenseColumn"):
        tg.keras.layers.DenseFeatures([fc.categorical_column_with_identity("i", 3)])
    out = tg.compat.v1.feature_column.input_layer({"a": [[1.0]]}, [fc.numeric_column("a")])
    np.testing.assert_array_equal(out.numpy(), [[1.0]])


def test_the_structured_data_tutorial_trains():
    rng = np.random.default_rng(0)
    n = 64
    feats = {"age": rng.uniform(0, 4, n).astype(np.float32),
             "Type": np.array(rng.choice(["Cat", "Dog"], n), dtype=object),
             "Breed1": np.array(rng.choice(["a", "b", "c", "z"], n), dtype=object)}
    labels = (feats["Type"] == "Dog").astype(np.int64)
    age = fc.numeric_column("age")
    cols = [age, fc.bucketized_column(age, [1, 2, 3]),
            fc.indicator_column(fc.categorical_column_with_vocabulary_list("Type", ["Cat", "Dog"])),
            fc.embedding_column(fc.categorical_column_with_vocabulary_list(
                "Breed1", ["a", "b", "c", "d"]), dimension=3)]
    ds = tg.data.Dataset.from_tensor_slices((feats, labels)).batch(16)
    model = tg.keras.Sequential([tg.keras.layers.DenseFeatures(cols),
                                 tg.keras.layers.Dense(1)])
    model.compile(optimizer=tg.keras.optimizers.Adam(0.1),
                  loss=tg.keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    h = model.fit(ds, epochs=10, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]
    assert h.history["accuracy"][-1] == 1.0
