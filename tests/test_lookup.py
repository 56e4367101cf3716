"""tg.lookup.StaticHashTable and KeyValueTensorInitializer (TF's documented example)."""
import numpy as np
import pytest

import tapegpu as tg


def test_static_hash_table_tf_example():
    keys_tensor = tg.constant(["a", "b", "c"])
    vals_tensor = tg.constant([7, 8, 9])
    input_tensor = tg.constant(["a", "f"])
    table = tg.lookup.StaticHashTable(
        tg.lookup.KeyValueTensorInitializer(keys_tensor, vals_tensor), default_value=-1)
    out = table.lookup(input_tensor)
    assert out.dtype == tg.int32
    np.testing.assert_array_equal(out.numpy(), [7, -1])
    np.testing.assert_array_equal(table[tg.constant([["c"], ["b"]])].numpy(), [[9], [8]])
    assert int(table.size()) == 3
    k, v = table.export()
    assert sorted(k.numpy().tolist()) == [b"a", b"b", b"c"] and sorted(v.numpy()) == [7, 8, 9]


def test_integer_keys_and_errors():
    init = tg.lookup.KeyValueTensorInitializer([3, 5], [0.5, 1.5], key_dtype=tg.int64,
                                               value_dtype=tg.float32)
    table = tg.lookup.StaticHashTable(init, 0.0)
    np.testing.assert_array_equal(table.lookup(tg.constant([5, 4], tg.int64)).numpy(),
                                  [1.5, 0.0])
    with pytest.raises(TypeError, match="keys must be int64"):
        table.lookup(tg.constant(["x"]))
    with pytest.raises(ValueError, match="same length"):
        tg.lookup.KeyValueTensorInitializer([1, 2], [1])
    with pytest.raises(ValueError, match="duplicate keys"):
        tg.lookup.StaticHashTable(tg.lookup.KeyValueTensorInitializer([1, 1], [1, 2]), 0)
    with pytest.raises(NotImplementedError, match="FarmHash"):
        tg.lookup.StaticVocabularyTable(init, num_oov_buckets=3)
