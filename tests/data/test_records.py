"""tg.data's file sources: TFRecordDataset and TextLineDataset (order, parallel reads,
compression, filenames given every way TF accepts)."""
import gzip

import pytest

import tapegpu as tg


def _write_records(path, recs, options=None):
    with tg.io.TFRecordWriter(str(path), options) as w:
        for r in recs:
            w.write(r)
    return str(path)


def test_tfrecord_dataset_files_in_order_and_interleaved(tmp_path):
    a = _write_records(tmp_path / "a", [b"a0", b"a1", b"a2"])
    b = _write_records(tmp_path / "b", [b"b0"])
    c = _write_records(tmp_path / "c", [b"c0", b"c1"])
    ds = tg.data.TFRecordDataset([a, b, c])
    assert ds.element_spec == tg.TensorSpec((), tg.string)
    assert int(ds.cardinality()) == tg.data.UNKNOWN_CARDINALITY
    assert [x.numpy() for x in ds] == [b"a0", b"a1", b"a2", b"b0", b"c0", b"c1"]
    # num_parallel_reads=2: two files open, one record from each in turn; when a file ends
    # the turn passes on, and the next file opens in its place when the turn comes back
    par = tg.data.TFRecordDataset([a, b, c], num_parallel_reads=2)
    assert [x.numpy() for x in par] == [b"a0", b"b0", b"a1", b"a2", b"c0", b"c1"]
    assert isinstance(par, tg.data.TFRecordDataset) and isinstance(par, tg.data.Dataset)


def test_filenames_as_tensor_and_dataset(tmp_path):
    a = _write_records(tmp_path / "a", [b"1"])
    b = _write_records(tmp_path / "b", [b"2"])
    assert [x.numpy() for x in tg.data.TFRecordDataset(tg.constant([a, b]))] == [b"1", b"2"]
    files = tg.data.Dataset.from_tensor_slices([b, a])
    assert [x.numpy() for x in tg.data.TFRecordDataset(files)] == [b"2", b"1"]
    with pytest.raises(TypeError, match="filenames"):
        tg.data.TFRecordDataset(3)


def test_tfrecord_dataset_pipeline(tmp_path):
    recs = [tg.train.Example(features=tg.train.Features(feature={
        "x": tg.train.Feature(float_list=tg.train.FloatList(value=[i, -i])),
        "y": tg.train.Feature(int64_list=tg.train.Int64List(value=[i % 2]))}))
        .SerializeToString() for i in range(5)]
    path = _write_records(tmp_path / "e.gz", recs, tg.io.TFRecordOptions("GZIP"))
    desc = {"x": tg.io.FixedLenFeature([2], tg.float32), "y": tg.io.FixedLenFeature([], tg.int64)}
    ds = tg.data.TFRecordDataset(path, "GZIP").batch(2).map(
        lambda r: tg.io.parse_example(r, desc))
    out = [(b["x"].numpy().tolist(), b["y"].numpy().tolist()) for b in ds]
    assert out == [([[0, 0], [1, -1]], [0, 1]), ([[2, -2], [3, -3]], [0, 1]), ([[4, -4]], [0])]


def test_text_line_dataset(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"one\r\ntwo\n\nthree")
    q = tmp_path / "u.txt.gz"
    q.write_bytes(gzip.compress(b"x\ny\n"))
    assert [x.numpy() for x in tg.data.TextLineDataset(str(p))] == \
        [b"one", b"two", b"", b"three"]
    assert [x.numpy() for x in tg.data.TextLineDataset(str(q), compression_type="GZIP")] == \
        [b"x", b"y"]
    assert len([x for x in tg.data.TextLineDataset([str(p), str(p)])]) == 8
    assert tg.data.TextLineDataset(str(p)).element_spec == tg.TensorSpec((), tg.string)
    with pytest.raises(tg.errors.NotFoundError):
        list(tg.data.TextLineDataset(str(tmp_path / "missing.txt")))
    skipped = tg.data.TextLineDataset(str(p)).skip(1).filter(
        lambda line: tg.strings.length(line) > 0)
    assert [x.numpy() for x in skipped] == [b"two", b"three"]


def test_fixed_length_record_dataset(tmp_path):
    a = tmp_path / "a.bin"
    a.write_bytes(b"H" + bytes(range(6)) + b"FF")
    b = tmp_path / "b.bin"
    b.write_bytes(b"H" + b"xyz" + b"FF")
    ds = tg.data.FixedLengthRecordDataset([str(a), str(b)], 3, header_bytes=1, footer_bytes=2)
    assert [x.numpy() for x in ds] == [bytes([0, 1, 2]), bytes([3, 4, 5]), b"xyz"]
    records = ds.map(lambda r: tg.io.decode_raw(r, tg.uint8))
    assert [r.numpy().tolist() for r in records][:2] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(tg.errors.DataLossError, match="not an exact multiple"):
        list(tg.data.FixedLengthRecordDataset(str(a), 4))
    with pytest.raises(tg.errors.InvalidArgumentError, match="record_bytes"):
        tg.data.FixedLengthRecordDataset(str(a), 0)


def test_experimental_tfrecord_writer_and_batched_features(tmp_path):
    recs = tg.data.Dataset.from_tensor_slices([tg.train.Example(features=tg.train.Features(
        feature={"x": tg.train.Feature(int64_list=tg.train.Int64List(value=[i])),
                 "y": tg.train.Feature(float_list=tg.train.FloatList(value=[i / 2]))}))
        .SerializeToString() for i in range(5)])
    path = str(tmp_path / "w.tfrecord.gz")
    tg.data.experimental.TFRecordWriter(path, "GZIP").write(recs)
    assert [r.numpy() for r in tg.data.TFRecordDataset(path, "GZIP")] == \
        [r.numpy() for r in recs]
    with pytest.raises(TypeError, match="scalar tg.string"):
        tg.data.experimental.TFRecordWriter(path).write(tg.data.Dataset.range(3))
    # (tg.data elements hold tensors only, so VarLenFeature's SparseTensor cannot be one)
    feats = {"x": tg.io.FixedLenFeature([], tg.int64), "y": tg.io.FixedLenFeature([], tg.float32)}
    ds = tg.data.experimental.make_batched_features_dataset(
        path, 2, feats, label_key="x", reader_args=["GZIP"], num_epochs=1, shuffle=False)
    out = [(f["y"].numpy().tolist(), x.numpy().tolist()) for f, x in ds]
    assert out == [([0.0, 0.5], [0, 1]), ([1.0, 1.5], [2, 3]), ([2.0], [4])]
    forever = tg.data.experimental.make_batched_features_dataset(
        path, 3, feats, reader_args=["GZIP"], shuffle=False)
    it = iter(forever)
    assert [next(it)["x"].numpy().tolist() for _ in range(2)] == [[0, 1, 2], [3, 4, 0]]
    with pytest.raises(ValueError, match="label_key"):
        tg.data.experimental.make_batched_features_dataset(path, 2, feats, label_key="z")
    with pytest.raises(tg.errors.InvalidArgumentError, match="No files matched"):
        tg.data.experimental.make_batched_features_dataset(str(tmp_path / "*.none"), 2, feats)


def test_no_files_no_records():
    assert list(tg.data.TFRecordDataset([], num_parallel_reads=2)) == []
    assert list(tg.data.TextLineDataset([])) == []


def test_decode_csv_in_a_map_gives_tuples(tmp_path):
    # TensorFlow's CSV tutorial: map_func returns decode_csv's list, which tf.data packs as a
    # tuple of components (of different dtypes)
    p = tmp_path / "t.csv"
    p.write_text("a,b\n1,x\n2,y\n")
    ds = tg.data.TextLineDataset(str(p)).skip(1).map(
        lambda line: tg.io.decode_csv(line, [int(), str()]))
    assert ds.element_spec == (tg.TensorSpec((), tg.int32), tg.TensorSpec((), tg.string))
    assert [(int(a), b.numpy()) for a, b in ds] == [(1, b"x"), (2, b"y")]
    lines = tg.data.TextLineDataset(str(p)).skip(1).batch(2).map(
        lambda x: tg.io.decode_csv(x, record_defaults=[int(), str()]))
    assert [[c.numpy().tolist() for c in b] for b in lines] == [[[1, 2], [b"x", b"y"]]]


def test_list_files(tmp_path):
    for n in ("b.csv", "a.csv", "c.txt"):
        (tmp_path / n).write_text("h\n1\n")
    names = [f.numpy() for f in tg.data.Dataset.list_files(str(tmp_path / "*.csv"),
                                                           shuffle=False)]
    assert names == [str(tmp_path / n).encode() for n in ("a.csv", "b.csv")]
    both = tg.data.Dataset.list_files([str(tmp_path / "*.txt"), str(tmp_path / "a.*")],
                                      shuffle=False)
    assert [f.numpy() for f in both] == [str(tmp_path / n).encode() for n in ("a.csv", "c.txt")]
    shuffled = tg.data.Dataset.list_files(str(tmp_path / "*"), seed=3)
    assert sorted(f.numpy() for f in shuffled) == sorted(
        str(tmp_path / n).encode() for n in ("a.csv", "b.csv", "c.txt"))
    with pytest.raises(tg.errors.InvalidArgumentError, match="No files matched pattern"):
        tg.data.Dataset.list_files(str(tmp_path / "*.none"))
    # TensorFlow's CSV tutorial: files -> interleaved CsvDatasets
    rows = tg.data.Dataset.list_files(str(tmp_path / "*.csv"), shuffle=False).interleave(
        lambda path: tg.data.experimental.CsvDataset(path, [int()], header=True),
        cycle_length=10)
    assert [int(r) for (r,) in rows] == [1, 1]
