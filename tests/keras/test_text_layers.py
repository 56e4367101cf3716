"""tg.keras.layers.StringLookup and TextVectorization: Keras 3's documented examples and
hand-computed vocabularies, counts and tf-idf weights."""
import math

import numpy as np
import pytest

import tapegpu as tg

VOCAB = ["a", "b", "c", "d"]
DATA = [["a", "c", "d"], ["d", "z", "b"]]


def test_string_lookup_int_and_vocabulary():
    layer = tg.keras.layers.StringLookup(vocabulary=VOCAB)
    out = layer(tg.constant(DATA))
    assert out.dtype == tg.int64
    np.testing.assert_array_equal(out.numpy(), [[1, 3, 4], [4, 0, 2]])
    assert layer.get_vocabulary() == ["[UNK]", "a", "b", "c", "d"]
    assert layer.get_vocabulary(include_special_tokens=False) == VOCAB
    assert layer.vocabulary_size() == 5


def test_string_lookup_several_oov_indices_hash_as_keras():
    # Keras' documented example: 'm' -> 0, 'z' -> 1 (FarmHash buckets)
    layer = tg.keras.layers.StringLookup(vocabulary=VOCAB, num_oov_indices=2)
    np.testing.assert_array_equal(layer(tg.constant([["a", "c", "d"], ["m", "z", "b"]])).numpy(),
                                  [[2, 4, 5], [0, 1, 3]])


def test_string_lookup_mask_token_and_zero_oov():
    layer = tg.keras.layers.StringLookup(vocabulary=VOCAB, mask_token="")
    np.testing.assert_array_equal(layer(tg.constant(["", "a", "q"])).numpy(), [0, 2, 1])
    assert layer.get_vocabulary()[:2] == ["", "[UNK]"]
    strict = tg.keras.layers.StringLookup(vocabulary=VOCAB, num_oov_indices=0)
    np.testing.assert_array_equal(strict(tg.constant(["d", "a"])).numpy(), [3, 0])
    with pytest.raises(tg.errors.InvalidArgumentError, match="num_oov_indices=0"):
        strict(tg.constant(["zz"]))


def test_string_lookup_encodings():
    multi = tg.keras.layers.StringLookup(vocabulary=VOCAB, output_mode="multi_hot")
    np.testing.assert_array_equal(
        multi(tg.constant([["a", "c", "d", "d"], ["d", "z", "b", "z"]])).numpy(),
        [[0, 1, 0, 1, 1], [1, 0, 1, 0, 1]])
    count = tg.keras.layers.StringLookup(vocabulary=VOCAB, output_mode="count")
    np.testing.assert_array_equal(
        count(tg.constant([["a", "c", "d", "d"], ["d", "z", "b", "z"]])).numpy(),
        [[0, 1, 0, 1, 2], [2, 0, 1, 0, 1]])
    one = tg.keras.layers.StringLookup(vocabulary=VOCAB, output_mode="one_hot")
    np.testing.assert_array_equal(one(tg.constant(["a", "b", "c", "d", "z"])).numpy(),
                                  np.eye(5)[[1, 2, 3, 4, 0]])
    assert one(tg.constant([["a"], ["z"]])).shape == (2, 1, 5)  # a new last axis
    assert one(tg.constant("b")).numpy().tolist() == [[0, 0, 1, 0, 0]]
    np.testing.assert_array_equal(multi(tg.constant(["a", "a", "d"])).numpy(), [0, 1, 0, 0, 1])
    padded = tg.keras.layers.StringLookup(vocabulary=VOCAB, output_mode="multi_hot",
                                          max_tokens=8, pad_to_max_tokens=True)
    assert padded(tg.constant([["a"]])).shape == (1, 8)


def test_string_lookup_tf_idf_given_weights():
    # Keras' documented example: idf weights [0.25, 0.75, 0.6, 0.4] for a..d, OOV gets
    # their mean 0.5
    layer = tg.keras.layers.StringLookup(output_mode="tf_idf", vocabulary=VOCAB,
                                         idf_weights=[0.25, 0.75, 0.6, 0.4])
    out = layer(tg.constant([["a", "c", "d", "d"], ["d", "z", "b", "z"]])).numpy()
    np.testing.assert_allclose(out, [[0, 0.25, 0, 0.6, 0.8], [1.0, 0, 0.75, 0, 0.4]],
                               rtol=1e-6)


def test_string_lookup_adapt_orders_by_count_then_token_descending():
    layer = tg.keras.layers.StringLookup()
    layer.adapt(tg.constant([["a", "c", "d", "d"], ["d", "z", "b", "z"]]))
    # d:3, z:2, then the count-1 tokens in decreasing order c, b, a
    assert layer.get_vocabulary() == ["[UNK]", "d", "z", "c", "b", "a"]
    small = tg.keras.layers.StringLookup(max_tokens=3)
    small.adapt(["x", "y", "y", "[UNK]"])
    assert small.get_vocabulary() == ["[UNK]", "y", "x"]


def test_string_lookup_adapt_tf_idf_weights():
    layer = tg.keras.layers.StringLookup(output_mode="tf_idf")
    layer.adapt([["a", "c", "d", "d"], ["d", "z", "b", "z"]])
    # idf = log(1 + 2 documents / (1 + documents holding the token))
    idf = {"d": math.log(1 + 2 / 3), "z": math.log(2), "c": math.log(2), "b": math.log(2),
           "a": math.log(2)}
    vocab = layer.get_vocabulary()[1:]
    w = [idf[t] for t in vocab]
    np.testing.assert_allclose(layer.idf_weights, [np.mean(w)] + w, rtol=1e-6)
    out = layer(tg.constant([["d", "d", "q"]])).numpy()
    np.testing.assert_allclose(out[0], [np.mean(w), 2 * idf["d"], 0, 0, 0, 0], rtol=1e-6)


def test_string_lookup_invert():
    inv = tg.keras.layers.StringLookup(vocabulary=VOCAB, invert=True)
    assert inv(tg.constant([[1, 3, 4], [4, 0, 2]])).numpy().tolist() == \
        [[b"a", b"c", b"d"], [b"d", b"[UNK]", b"b"]]
    with pytest.raises(ValueError, match="invert"):
        tg.keras.layers.StringLookup(invert=True, output_mode="count")


def test_string_lookup_vocabulary_errors_and_file(tmp_path):
    with pytest.raises(ValueError, match="repeated"):
        tg.keras.layers.StringLookup(vocabulary=["a", "a"])
    with pytest.raises(ValueError, match="output_mode"):
        tg.keras.layers.StringLookup(output_mode="bag")
    with pytest.raises(ValueError, match="static"):
        tg.keras.layers.StringLookup(vocabulary=VOCAB).adapt(["a"])
    path = tmp_path / "vocab.txt"
    path.write_text("x\ny\n")
    layer = tg.keras.layers.StringLookup(vocabulary=str(path))
    np.testing.assert_array_equal(layer(tg.constant(["y", "x", "w"])).numpy(), [2, 1, 0])


def test_string_lookup_ragged_input():
    layer = tg.keras.layers.StringLookup(vocabulary=VOCAB)
    out = layer(tg.ragged.constant([["a"], ["b", "z"]]))
    assert out.to_list() == [[1], [2, 0]]


def test_text_vectorization_adapt_and_pad():
    vec = tg.keras.layers.TextVectorization(output_sequence_length=4)
    vec.adapt(["The cat sat.", "the cat ran"])
    assert vec.get_vocabulary() == ["", "[UNK]", "the", "cat", "sat", "ran"]
    out = vec(tg.constant([["the dog sat"], ["cat cat cat cat cat"]]))
    assert out.dtype == tg.int64
    np.testing.assert_array_equal(out.numpy(), [[2, 1, 4, 0], [3, 3, 3, 3]])
    free = tg.keras.layers.TextVectorization(vocabulary=["the", "cat"])
    np.testing.assert_array_equal(free(["the cat", "cat"]).numpy(), [[2, 3], [3, 0]])


def test_text_vectorization_standardize_strips_keras_punctuation():
    vec = tg.keras.layers.TextVectorization(split=None, vocabulary=["hello world"])
    np.testing.assert_array_equal(vec(["Hello, World!"]).numpy(), [2])
    keep = tg.keras.layers.TextVectorization(standardize="lower", vocabulary=["hi!"])
    np.testing.assert_array_equal(keep(["HI!"]).numpy(), [[2]])
    with pytest.raises(ValueError, match="last shape dimension must be 1"):
        tg.keras.layers.TextVectorization(vocabulary=["a"])(tg.constant([["a", "b"]]))


def test_text_vectorization_ngrams_multi_hot():
    vec = tg.keras.layers.TextVectorization(output_mode="multi_hot", ngrams=2)
    vec.adapt(["a b", "b c a"])
    # a:2 b:2, then count 1 in decreasing order: 'c a', 'c', 'b c', 'a b'
    assert vec.get_vocabulary() == ["[UNK]", "b", "a", "c a", "c", "b c", "a b"]
    np.testing.assert_array_equal(vec(["a b c"]).numpy(), [[0, 1, 1, 0, 1, 1, 1]])


def test_text_vectorization_character_split_ragged_and_count():
    vec = tg.keras.layers.TextVectorization(split="character", ragged=True)
    vec.adapt(["abba"])
    assert vec(["ab", "ba c"]).to_list() == [[3, 2], [2, 3, 1, 1]]
    count = tg.keras.layers.TextVectorization(output_mode="count", vocabulary=["x", "y"])
    np.testing.assert_array_equal(count(["x x q", "y"]).numpy(), [[1, 2, 0], [0, 0, 1]])
    with pytest.raises(ValueError, match="output_sequence_length"):
        tg.keras.layers.TextVectorization(output_mode="count", output_sequence_length=3)


def test_text_vectorization_in_a_model_and_a_dataset_map():
    vec = tg.keras.layers.TextVectorization(output_sequence_length=3)
    vec.adapt(["the cat", "the dog"])
    inp = tg.keras.Input(shape=(1,), dtype="string")
    emb = tg.keras.layers.Embedding(vec.vocabulary_size(), 2)(vec(inp))
    model = tg.keras.Model(inp, tg.keras.layers.GlobalAveragePooling1D()(emb))
    assert model.predict(np.array([["the cat"], ["dog"]], dtype=object)).shape == (2, 2)
    ds = tg.data.Dataset.from_tensor_slices(["the cat", "dog"]).batch(2).map(vec)
    (batch,) = list(ds)
    np.testing.assert_array_equal(batch.numpy(), [[2, 4, 0], [3, 0, 0]])


def test_config_round_trip():
    vec = tg.keras.layers.TextVectorization(max_tokens=10, ngrams=(1, 2),
                                            vocabulary=["a", "b"])
    again = tg.keras.layers.TextVectorization.from_config(vec.get_config())
    assert again.get_vocabulary() == vec.get_vocabulary()
    np.testing.assert_array_equal(again(["a b"]).numpy(), vec(["a b"]).numpy())
