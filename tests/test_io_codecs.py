"""encode_base64 / decode_base64 (web-safe), decode_compressed, matching_files."""
import gzip
import zlib

import pytest

import tapegpu as tg


def test_base64_is_web_safe_and_unpadded():
    data = bytes([0xFB, 0xFF, 0xBF])  # standard base64: '+/+/' ; web-safe: '-_-_'
    enc = tg.io.encode_base64(tg.constant([data, b"a"]))
    assert enc.numpy().tolist() == [b"-_-_", b"YQ"]
    assert tg.io.encode_base64(tg.constant(b"a"), pad=True).numpy() == b"YQ=="
    assert tg.io.decode_base64(enc).numpy().tolist() == [data, b"a"]
    assert tg.io.decode_base64(tg.constant(b"YQ==")).numpy() == b"a"
    with pytest.raises(tg.errors.InvalidArgumentError, match="Invalid character"):
        tg.io.decode_base64(tg.constant(b"+/+/"))


def test_decode_compressed():
    strings = tg.constant([zlib.compress(b"xyz"), zlib.compress(b"")])
    assert tg.io.decode_compressed(strings, "ZLIB").numpy().tolist() == [b"xyz", b""]
    assert tg.io.decode_compressed(tg.constant(gzip.compress(b"q")), "GZIP").numpy() == b"q"
    assert tg.io.decode_compressed(tg.constant(b"raw")).numpy() == b"raw"
    with pytest.raises(tg.errors.InvalidArgumentError, match="corrupted ZLIB"):
        tg.io.decode_compressed(tg.constant(b"not zlib"), "ZLIB")
    with pytest.raises(ValueError, match="compression_type"):
        tg.io.decode_compressed(tg.constant(b"x"), "BZ2")


def test_matching_files(tmp_path):
    for name in ("b.txt", "a.txt", "c.csv"):
        (tmp_path / name).write_text("")
    got = tg.io.matching_files(str(tmp_path / "*.txt"))
    assert got.dtype == tg.string
    assert got.numpy().tolist() == [str(tmp_path / n).encode() for n in ("a.txt", "b.txt")]


def test_decode_json_example():
    js = ('{"features": {"feature": {'
          '"i": {"int64_list": {"value": [1, "-2", "9007199254740993"]}},'
          '"f": {"floatList": {"value": [1.5, "NaN"]}},'
          '"b": {"bytesList": {"value": ["YWJj", "-_8"]}},'
          '"e": {}}}}')
    out = tg.io.decode_json_example(tg.constant([js]))
    assert out.shape == (1,)
    ex = tg.train.Example.FromString(out.numpy()[0])
    feats = ex.features.feature
    assert list(feats["i"].int64_list.value) == [1, -2, 9007199254740993]
    f = list(feats["f"].float_list.value)
    assert f[0] == 1.5 and f[1] != f[1]
    assert list(feats["b"].bytes_list.value) == [b"abc", b"\xfb\xff"]
    assert feats["e"].WhichOneof("kind") is None
    with pytest.raises(tg.errors.InvalidArgumentError, match='no field named "feats"'):
        tg.io.decode_json_example('{"feats": {}}')
    with pytest.raises(tg.errors.InvalidArgumentError, match="Error while parsing JSON"):
        tg.io.decode_json_example("{not json")


def test_match_filenames_once(tmp_path):
    (tmp_path / "x.txt").write_text("")
    v = tg.io.match_filenames_once(str(tmp_path / "*.txt"))
    assert isinstance(v, tg.Variable) and not v.trainable and v.dtype == tg.string
    (tmp_path / "y.txt").write_text("")  # matched once: later files are not in it
    assert v.numpy().tolist() == [str(tmp_path / "x.txt").encode()]
