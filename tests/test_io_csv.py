"""decode_csv, CsvDataset and make_csv_dataset: defaults, dtypes, quotes, TF's errors."""
import collections

import pytest

import tapegpu as tg


def test_decode_csv_dtypes_and_defaults():
    a, b, c, d, e = tg.io.decode_csv(
        ["1,2.5,x,7, 3 ", ",,,,"],
        [[0], [0.0], ["d"], tg.constant([9], tg.int64), tg.constant([1.0], tg.float64)])
    assert (a.dtype, b.dtype, c.dtype, d.dtype, e.dtype) == \
        (tg.int32, tg.float32, tg.string, tg.int64, tg.float64)
    assert a.numpy().tolist() == [1, 0] and b.numpy().tolist() == [2.5, 0.0]
    assert c.numpy().tolist() == [b"x", b"d"] and d.numpy().tolist() == [7, 9]
    assert e.numpy().tolist() == [3.0, 1.0]  # spaces around numbers are allowed


def test_decode_csv_keeps_the_records_shape():
    (x,) = tg.io.decode_csv(tg.constant([["1", "2"], ["3", "4"]]), [[0]])
    assert x.shape == (2, 2) and x.numpy().tolist() == [[1, 2], [3, 4]]


def test_decode_csv_select_cols_and_na_value():
    # TensorFlow's own test: empty fields take the defaults
    out = tg.io.decode_csv([",,", "4,5,6"], [[0], [1], [2]], select_cols=[0, 1, 2])
    assert [t.numpy().tolist() for t in out] == [[0, 4], [1, 5], [2, 6]]
    out = tg.io.decode_csv(["a,NA,3"], [[""], [-1]], select_cols=[0, 1], na_value="NA")
    assert [t.numpy().tolist() for t in out] == [[b"a"], [-1]]


def test_decode_csv_quotes():
    a, b = tg.io.decode_csv(['"x, ""y""",1', 'z,"2"'], [[""], [0]])
    assert a.numpy().tolist() == [b'x, "y"', b"z"] and b.numpy().tolist() == [1, 2]
    (q,) = tg.io.decode_csv(['a"b'], [[""]], use_quote_delim=False)
    assert q.numpy().tolist() == [b'a"b']
    (t,) = tg.io.decode_csv(["a\tb"], [[""]], field_delim=";")
    assert t.numpy().tolist() == [b"a\tb"]


@pytest.mark.parametrize("records,defaults,message", [
    (["1,2"], [[0]], "Expect 1 fields but have 2 in record 0"),
    (["1", ""], [tg.int32], "Field 0 is required but missing in record 1"),
    (["x"], [[0]], "Field 0 in record 0 is not a valid int32: x"),
    (["3000000000"], [[0]], "not a valid int32"),
    (["1.5"], [tg.constant([0], tg.int64)], "not a valid int64"),
    (["1e"], [[0.0]], "not a valid float"),
    (['a"b'], [[""]], "Unquoted fields cannot have quotes"),
    (['"ab'], [[""]], "Quoted field has to end with quote"),
])
def test_decode_csv_errors(records, defaults, message):
    with pytest.raises(tg.errors.InvalidArgumentError, match=message):
        tg.io.decode_csv(records, defaults)


def test_decode_csv_bad_arguments():
    with pytest.raises(TypeError, match="bool"):
        tg.io.decode_csv(["1"], [[True]])
    with pytest.raises(ValueError, match="one character"):
        tg.io.decode_csv(["1"], [[0]], field_delim=",,")


def test_csv_dataset(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(b'id,name,score\r\n1,"a,b",0.5\r\n2,c,\r\n3,"multi\nline",2\r\n')
    ds = tg.data.experimental.CsvDataset(str(path), [tg.int64, [""], [-1.0]], header=True)
    assert ds.element_spec == (tg.TensorSpec((), tg.int64), tg.TensorSpec((), tg.string),
                               tg.TensorSpec((), tg.float32))
    rows = [(int(i), n.numpy(), float(s)) for i, n, s in ds]
    assert rows == [(1, b"a,b", 0.5), (2, b"c", -1.0), (3, b"multi\nline", 2.0)]
    sel = tg.data.experimental.CsvDataset(str(path), [[0.0]], header=True, select_cols=[2])
    assert [float(s) for (s,) in sel] == [0.5, 0.0, 2.0]
    exc = tg.data.experimental.CsvDataset(str(path), [[0], [0.0]], header=True,
                                          exclude_cols=[1])
    assert [(int(i), float(s)) for i, s in exc] == [(1, 0.5), (2, 0.0), (3, 2.0)]


def test_make_csv_dataset(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b,c,label\n1,0.5,x,1\n2,1.5,y,0\n3,1e40,z,1\n4,2.5,w,0\n")
    ds = tg.data.experimental.make_csv_dataset(str(path), batch_size=2, label_name="label",
                                               num_epochs=1, shuffle=False)
    batches = list(ds)
    assert len(batches) == 2
    features, label = batches[0]
    assert isinstance(features, collections.OrderedDict) and list(features) == ["a", "b", "c"]
    # inferred: a int32, b float64 (1e40 does not fit float32), c string, label int32
    assert features["a"].dtype == tg.int32 and features["b"].dtype == tg.float64
    assert features["c"].dtype == tg.string and label.dtype == tg.int32
    assert features["a"].numpy().tolist() == [1, 2] and label.numpy().tolist() == [1, 0]
    sel = tg.data.experimental.make_csv_dataset(
        str(path), batch_size=3, select_columns=["a", "c"], num_epochs=None, shuffle=False,
        column_defaults=[tg.constant([0], tg.int64), [""]])
    it = iter(sel)
    first, second = next(it), next(it)  # repeats forever, full batches only
    assert list(first) == ["a", "c"] and first["a"].dtype == tg.int64
    assert first["a"].numpy().tolist() == [1, 2, 3] and second["a"].numpy().tolist() == [4, 1, 2]
    with pytest.raises(ValueError, match="label_name"):
        tg.data.experimental.make_csv_dataset(str(path), 2, label_name="nope")
    with pytest.raises(ValueError, match="No files match"):
        tg.data.experimental.make_csv_dataset(str(tmp_path / "*.none"), 2)


def test_make_csv_dataset_inferred_columns_are_optional(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("n,x,s\n1,,a\n,2.5,\n7,nan,b\n")
    ds = tg.data.experimental.make_csv_dataset(str(path), batch_size=3, num_epochs=1,
                                               shuffle=False)
    (batch,) = list(ds)
    # n: int32 with 0 for the missing value; x: 'nan' is no float to the inference (it
    # parses to no number below infinity), so x is a string column; s: '' when missing
    assert batch["n"].dtype == tg.int32 and batch["n"].numpy().tolist() == [1, 0, 7]
    assert batch["x"].dtype == tg.string and batch["x"].numpy().tolist() == [b"", b"2.5",
                                                                              b"nan"]
    assert batch["s"].numpy().tolist() == [b"a", b"", b"b"]


def test_make_csv_dataset_ignore_errors_and_header_check(tmp_path):
    a = tmp_path / "a.csv"
    a.write_text("k,v\n1,2\noops,3\n4,5\n")
    ds = tg.data.experimental.make_csv_dataset(
        str(a), batch_size=5, num_epochs=1, shuffle=False, ignore_errors=True,
        column_defaults=[tg.int32, tg.int32])
    (batch,) = list(ds)
    assert batch["k"].numpy().tolist() == [1, 4]
    strict = tg.data.experimental.make_csv_dataset(
        str(a), batch_size=5, num_epochs=1, shuffle=False, column_defaults=[tg.int32, tg.int32])
    with pytest.raises(tg.errors.InvalidArgumentError, match="not a valid int32: oops"):
        list(strict)
    b = tmp_path / "b.csv"
    b.write_text("k,w\n1,2\n")
    with pytest.raises(ValueError, match="different column names"):
        tg.data.experimental.make_csv_dataset([str(a), str(b)], 2)
    with pytest.raises(ValueError, match="same length"):
        tg.data.experimental.make_csv_dataset(str(a), 2, select_columns=["k"],
                                              column_defaults=[[0], [0]])
