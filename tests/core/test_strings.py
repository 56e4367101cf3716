"""String tensors (tg.string), as TensorFlow's: host-resident bytes, never on a GPU, no
gradient; tg.strings' common functions, tg.io.read_file / write_file, and tf.data pipelines
of file names and text."""
import os

import numpy as np
import pytest

import tapegpu as tg


def test_text_converts_to_host_string_tensors_on_every_device(tg_device):
    a = tg.constant("a")
    assert a.dtype == tg.string and a.shape == () and type(a.numpy()) is bytes and a.numpy() == b"a"
    assert repr(a) == "<tg.Tensor: shape=(), dtype=string, numpy=b'a'>"
    b = tg.constant([["x", "yy"], ["é", b"w"]])
    assert b.dtype == tg.string and b.shape == (2, 2)
    assert b.numpy().tolist() == [[b"x", b"yy"], ["é".encode(), b"w"]]
    assert b[0, 1].numpy() == b"yy" and b[1].numpy().tolist() == ["é".encode(), b"w"]
    assert "CPU" in a.device and "CPU" in b.device  # never on a GPU
    arr = np.array(["p", "q"])
    assert tg.convert_to_tensor(arr).numpy().tolist() == [b"p", b"q"]
    assert arr.tolist() == ["p", "q"]
    assert tg.as_dtype("string") is tg.string and tg.TensorSpec([], tg.string).dtype == tg.string
    with pytest.raises(TypeError, match="text becomes tg.string"):
        tg.constant("1.5", dtype=tg.float32)
    with pytest.raises(TypeError, match="every element must be str or bytes"):
        tg.constant(["a", 1])


def test_strings_functions_follow_tensorflow():
    s = tg.strings
    assert s.length(tg.constant(["abc", "é"])).numpy().tolist() == [3, 2]
    assert s.length(tg.constant("é"), unit="UTF8_CHAR").numpy() == 1
    assert s.upper(tg.constant(["ab"])).numpy().tolist() == [b"AB"]
    assert s.lower(tg.constant("AB")).numpy() == b"ab"
    assert s.strip(tg.constant(" a ")).numpy() == b"a"
    assert s.join([tg.constant(["a", "b"]), tg.constant("x")], separator="-").numpy().tolist() \
        == [b"a-x", b"b-x"]
    grid = tg.constant([["a", "b"], ["c", "d"]])
    assert s.reduce_join(grid, axis=1).numpy().tolist() == [b"ab", b"cd"]
    assert s.reduce_join(grid, axis=0, separator=",").numpy().tolist() == [b"a,c", b"b,d"]
    assert s.reduce_join(grid).numpy() == b"abcd"
    assert s.regex_replace(tg.constant("a1b22"), r"\d+", "#").numpy() == b"a#b#"
    assert s.regex_replace(tg.constant("a1b22"), r"\d+", "#", replace_global=False).numpy() \
        == b"a#b22"
    assert s.regex_full_match(tg.constant(["ab", "abc"]), "ab").numpy().tolist() == [True, False]
    n = s.to_number(tg.constant(["1.5", "-2"]))
    assert n.dtype == tg.float32 and n.numpy().tolist() == [1.5, -2.0]
    assert s.to_number(tg.constant("7"), out_type=tg.int64).dtype == tg.int64
    with pytest.raises(tg.errors.InvalidArgumentError, match="could not correctly convert"):
        s.to_number(tg.constant("x"))
    assert s.as_string(tg.constant([1.5, 2.0])).numpy().tolist() == [b"1.500000", b"2.000000"]
    assert s.as_string(tg.constant([True])).numpy().tolist() == [b"true"]
    assert s.substr(tg.constant("hello"), 1, 3).numpy() == b"ell"
    with pytest.raises(TypeError, match="tg.strings.upper: expected a tg.string tensor"):
        s.upper(tg.constant([1.0]))


def test_read_and_write_files(tmp_path):
    path = str(tmp_path / "f.txt")
    tg.io.write_file(path, tg.constant("hello\n"))
    assert open(path, "rb").read() == b"hello\n"
    assert tg.io.read_file(tg.constant(path)).numpy() == b"hello\n"
    assert tg.io.read_file(path).dtype == tg.string
    with pytest.raises(tg.errors.NotFoundError, match="No such file"):
        tg.io.read_file(str(tmp_path / "missing"))
    assert os.listdir(tmp_path) == ["f.txt"]  # the atomic write left no temporary file


def test_a_dataset_of_file_names_reads_and_parses_them(tmp_path, tg_device):
    names = []
    for i in range(4):
        p = tmp_path / f"{i}.txt"
        p.write_text(f"{i}.5")
        names.append(str(p))

    def load(path):
        text = tg.io.read_file(path)
        return tg.strings.to_number(tg.strings.strip(text)), path
    ds = tg.data.Dataset.from_tensor_slices(names).map(load).batch(2)
    assert ds.element_spec[1].dtype == tg.string
    got = [(x.numpy().tolist(), [os.path.basename(p.decode()) for p in n.numpy()])
           for x, n in ds]
    assert got == [([0.5, 1.5], ["0.txt", "1.txt"]), ([2.5, 3.5], ["2.txt", "3.txt"])]
    assert all("CPU" in n.device for _, n in ds)
