"""parse_single_example, parse_example, parse_single_sequence_example: each feature kind, its
defaults, and TensorFlow's errors."""
import numpy as np
import pytest

import tapegpu as tg

T = tg.train


def _ex(**features):
    kinds = {int: "int64_list", float: "float_list", bytes: "bytes_list"}
    feats = {}
    for k, values in features.items():
        kind = kinds[type(values[0])] if values else "int64_list"
        cls = {"int64_list": T.Int64List, "float_list": T.FloatList,
               "bytes_list": T.BytesList}[kind]
        feats[k] = T.Feature(**{kind: cls(value=values)})
    return T.Example(features=T.Features(feature=feats)).SerializeToString()


def test_fixed_len_features():
    rec = _ex(i=[4], f=[1.5, 2.5, 3.5, 4.5], s=[b"a", b"b"])
    out = tg.io.parse_single_example(tg.constant(rec), {
        "i": tg.io.FixedLenFeature([], tg.int64),
        "f": tg.io.FixedLenFeature([2, 2], tg.float32),
        "s": tg.io.FixedLenFeature([2], tg.string),
        "d": tg.io.FixedLenFeature([3], tg.float32, default_value=[7.0, 8.0, 9.0]),
    })
    assert out["i"].dtype == tg.int64 and out["i"].shape == () and int(out["i"]) == 4
    assert out["f"].dtype == tg.float32 and out["f"].numpy().tolist() == [[1.5, 2.5],
                                                                          [3.5, 4.5]]
    assert out["s"].dtype == tg.string and out["s"].numpy().tolist() == [b"a", b"b"]
    assert out["d"].numpy().tolist() == [7.0, 8.0, 9.0]


def test_fixed_len_errors():
    rec = _ex(i=[1, 2])
    with pytest.raises(tg.errors.InvalidArgumentError,
                       match="Feature: missing \\(data type: int64\\) is required"):
        tg.io.parse_single_example(rec, {"missing": tg.io.FixedLenFeature([], tg.int64)})
    with pytest.raises(tg.errors.InvalidArgumentError,
                       match="Values size: 2 but output shape: \\[3\\]"):
        tg.io.parse_single_example(rec, {"i": tg.io.FixedLenFeature([3], tg.int64)})
    with pytest.raises(tg.errors.InvalidArgumentError,
                       match="Data type: int64 but expected type: float"):
        tg.io.parse_single_example(rec, {"i": tg.io.FixedLenFeature([2], tg.float32)})
    with pytest.raises(ValueError, match="unsupported dtype int32"):
        tg.io.parse_single_example(rec, {"i": tg.io.FixedLenFeature([2], tg.int32)})
    with pytest.raises(tg.errors.InvalidArgumentError, match="Could not parse"):
        tg.io.parse_single_example(b"\x0a\x09garbage", {"i": tg.io.VarLenFeature(tg.int64)})


def test_var_len_and_ragged_features_batched():
    recs = [_ex(v=[1.0, 2.0]), _ex(), _ex(v=[3.0])]
    out = tg.io.parse_example(tg.constant(recs), {
        "v": tg.io.VarLenFeature(tg.float32),
        "r": tg.io.RaggedFeature(tg.float32, value_key="v", row_splits_dtype=tg.int64),
    })
    sp = out["v"]
    assert isinstance(sp, tg.SparseTensor)
    assert sp.indices.numpy().tolist() == [[0, 0], [0, 1], [2, 0]]
    assert sp.values.numpy().tolist() == [1.0, 2.0, 3.0]
    assert sp.dense_shape.numpy().tolist() == [3, 2]
    rt = out["r"]
    assert isinstance(rt, tg.RaggedTensor)
    assert rt.to_list() == [[1.0, 2.0], [], [3.0]]
    assert rt.row_splits.dtype == tg.int64


def test_var_len_single_example_is_one_dimensional():
    out = tg.io.parse_single_example(_ex(w=[b"x", b"y", b"z"]), {
        "w": tg.io.VarLenFeature(tg.string), "r": tg.io.RaggedFeature(tg.string, "w")})
    assert out["w"].indices.numpy().tolist() == [[0], [1], [2]]
    assert out["w"].dense_shape.numpy().tolist() == [3]
    assert out["r"].numpy().tolist() == [b"x", b"y", b"z"]


def test_parse_example_fixed_len_batch_and_sequence_padding():
    recs = [_ex(a=[1], s=[5, 6, 7]), _ex(a=[2], s=[8])]
    out = tg.io.parse_example(recs, {
        "a": tg.io.FixedLenFeature([1], tg.int64),
        "s": tg.io.FixedLenSequenceFeature([], tg.int64, allow_missing=True,
                                           default_value=-1)})
    assert out["a"].numpy().tolist() == [[1], [2]]
    assert out["s"].numpy().tolist() == [[5, 6, 7], [8, -1, -1]]
    with pytest.raises(ValueError, match="allow_missing=True"):
        tg.io.parse_example(recs, {"s": tg.io.FixedLenSequenceFeature([], tg.int64)})
    with pytest.raises(ValueError, match="scalar"):
        tg.io.parse_single_example(recs, {"a": tg.io.FixedLenFeature([1], tg.int64)})


def test_parse_single_sequence_example():
    se = T.SequenceExample()
    se.context.feature["len"].int64_list.value.append(3)
    tokens = se.feature_lists.feature_list["tok"]
    for ids in ([1, 2], [3], [4, 5, 6]):
        tokens.feature.add().int64_list.value.extend(ids)
    xy = se.feature_lists.feature_list["xy"]
    for t in range(3):
        xy.feature.add().float_list.value.extend([t, t + 0.5])
    ctx, seq = tg.io.parse_single_sequence_example(
        se.SerializeToString(),
        context_features={"len": tg.io.FixedLenFeature([], tg.int64),
                          "name": tg.io.FixedLenFeature([], tg.string, default_value="?")},
        sequence_features={"xy": tg.io.FixedLenSequenceFeature([2], tg.float32),
                           "tok": tg.io.VarLenFeature(tg.int64),
                           "tok_r": tg.io.RaggedFeature(tg.int64, value_key="tok"),
                           "absent": tg.io.FixedLenSequenceFeature([], tg.int64,
                                                                   allow_missing=True)})
    assert int(ctx["len"]) == 3 and ctx["name"].numpy() == b"?"
    assert seq["xy"].numpy().tolist() == [[0.0, 0.5], [1.0, 1.5], [2.0, 2.5]]
    assert seq["tok"].indices.numpy().tolist() == [[0, 0], [0, 1], [1, 0], [2, 0], [2, 1],
                                                   [2, 2]]
    assert seq["tok"].dense_shape.numpy().tolist() == [3, 3]
    assert seq["tok_r"].to_list() == [[1, 2], [3], [4, 5, 6]]
    assert seq["absent"].shape == (0,)
    with pytest.raises(tg.errors.InvalidArgumentError, match="Feature list 'gone' is required"):
        tg.io.parse_single_sequence_example(
            se.SerializeToString(),
            sequence_features={"gone": tg.io.FixedLenSequenceFeature([], tg.int64)})


def test_ragged_partitions_are_refused_clearly():
    with pytest.raises(NotImplementedError, match="partitions"):
        tg.io.RaggedFeature(tg.int64, partitions=("x",))


def test_in_a_dataset_map():
    recs = [_ex(x=[float(i)], y=[i]) for i in range(4)]
    desc = {"x": tg.io.FixedLenFeature([], tg.float32), "y": tg.io.FixedLenFeature([], tg.int64)}
    ds = tg.data.Dataset.from_tensor_slices(recs).map(
        lambda r: tg.io.parse_single_example(r, desc)).batch(2)
    batches = [(b["x"].numpy().tolist(), b["y"].numpy().tolist()) for b in ds]
    assert batches == [([0.0, 1.0], [0, 1]), ([2.0, 3.0], [2, 3])]
    assert np.asarray(tg.io.parse_example(recs, desc)["y"]).tolist() == [0, 1, 2, 3]


def test_parse_sequence_example_batch():
    recs = []
    for n in (1, 3, 0):
        se = T.SequenceExample()
        se.context.feature["c"].bytes_list.value.append(b"c%d" % n)
        for t in range(n):
            se.feature_lists.feature_list["x"].feature.add().int64_list.value.extend(
                range(t + 1))
            se.feature_lists.feature_list["f"].feature.add().float_list.value.append(t + 0.5)
        recs.append(se.SerializeToString())
    ctx, seq, lengths = tg.io.parse_sequence_example(
        recs, {"c": tg.io.FixedLenFeature([], tg.string)},
        {"x": tg.io.VarLenFeature(tg.int64), "r": tg.io.RaggedFeature(tg.int64, value_key="x"),
         "f": tg.io.FixedLenSequenceFeature([], tg.float32, allow_missing=True)})
    assert ctx["c"].numpy().tolist() == [b"c1", b"c3", b"c0"]
    assert seq["r"].to_list() == [[[0]], [[0], [0, 1], [0, 1, 2]], []]
    assert seq["x"].indices.numpy().tolist() == [[0, 0, 0], [1, 0, 0], [1, 1, 0], [1, 1, 1],
                                                 [1, 2, 0], [1, 2, 1], [1, 2, 2]]
    assert seq["x"].dense_shape.numpy().tolist() == [3, 3, 3]
    assert seq["f"].numpy().tolist() == [[0.5, 0, 0], [0.5, 1.5, 2.5], [0, 0, 0]]
    assert lengths == {"f": lengths["f"]} and lengths["f"].numpy().tolist() == [1, 3, 0]


def test_features_must_be_given():
    with pytest.raises(ValueError, match="features cannot be None"):
        tg.io.parse_single_example(_ex(a=[1]), {})
    with pytest.raises(ValueError, match="at least one should have values"):
        tg.io.parse_single_sequence_example(b"")
    with pytest.raises(ValueError, match="FixedLenSequenceFeature"):
        tg.io.parse_single_sequence_example(b"", sequence_features={
            "x": tg.io.FixedLenFeature([], tg.int64)})


def test_sparse_feature():
    recs = [_ex(r=[2, 0], c=[1, 4], v=[1.0, 2.0]), _ex(), _ex(r=[1], c=[0], v=[3.0])]
    feats = {"m": tg.io.SparseFeature(["r", "c"], "v", tg.float32, [3, 5])}
    sp = tg.io.parse_example(recs, feats)["m"]
    # entries ordered by index within each record (already_sorted=False)
    assert sp.indices.numpy().tolist() == [[0, 0, 4], [0, 2, 1], [2, 1, 0]]
    assert sp.values.numpy().tolist() == [2.0, 1.0, 3.0]
    assert sp.dense_shape.numpy().tolist() == [3, 3, 5]
    single = tg.io.parse_single_example(recs[0], feats)["m"]
    assert single.indices.numpy().tolist() == [[0, 4], [2, 1]]
    assert single.dense_shape.numpy().tolist() == [3, 5]
    with pytest.raises(tg.errors.InvalidArgumentError, match="outside \\[0, 3\\)"):
        tg.io.parse_single_example(_ex(r=[3], c=[0], v=[1.0]), feats)
    with pytest.raises(tg.errors.InvalidArgumentError, match="has 1 values but value"):
        tg.io.parse_single_example(_ex(r=[1], c=[0], v=[1.0, 2.0]), feats)


def test_parsing_in_a_tg_function_follows_its_input():
    # the parse runs in Python on the record's bytes: a trace guards the value (traced again
    # for another record) rather than keeping the first record's result as a constant
    @tg.function
    def label_twice(record):
        return tg.io.parse_single_example(
            record, {"a": tg.io.FixedLenFeature([], tg.int64)})["a"] * 2

    assert int(label_twice(tg.constant(_ex(a=[3])))) == 6
    assert int(label_twice(tg.constant(_ex(a=[5])))) == 10

    @tg.function
    def first_column(lines):
        return tg.io.decode_csv(lines, [[0]])[0] + 1

    assert first_column(tg.constant(["1", "2"])).numpy().tolist() == [2, 3]
    assert first_column(tg.constant(["5", "6"])).numpy().tolist() == [6, 7]
