"""tg.strings.split, bytes_split, unicode_decode/encode/split and to_hash_bucket_fast."""
import ctypes

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.strings import _fingerprint64


def test_split_scalar_is_dense_and_whitespace_runs_merge():
    out = tg.strings.split(tg.constant("  hello \t world\n"))
    assert isinstance(out, tg.Tensor)
    assert out.numpy().tolist() == [b"hello", b"world"]


def test_split_with_sep_keeps_empty_pieces_and_maxsplit():
    assert tg.strings.split(tg.constant("1<>2<><>3"), sep="<>").numpy().tolist() == \
        [b"1", b"2", b"", b"3"]
    assert tg.strings.split(tg.constant("a,b,c"), sep=",", maxsplit=1).numpy().tolist() == \
        [b"a", b"b,c"]


def test_split_whitespace_maxsplit_as_tf():
    # TF's SplitV2: after maxsplit tokens, the rest without its leading whitespace
    split = lambda s, n: tg.strings.split(tg.constant(s), maxsplit=n).numpy().tolist()
    assert split(" a  b c ", 1) == [b"a", b"b c "]
    assert split("a b ", 2) == [b"a", b"b", b""]
    assert split(" a b", 0) == [b" a b"]
    assert split("", -1) == [] and split(" \t\v ", -1) == []


def test_split_vector_and_matrix_are_ragged():
    rt = tg.strings.split(tg.constant(["a b", "", "c"]))
    assert isinstance(rt, tg.RaggedTensor)
    assert rt.to_list() == [[b"a", b"b"], [], [b"c"]]
    rt2 = tg.strings.split(tg.constant([["a b", "c"], ["d", "e f g"]]))
    assert rt2.ragged_rank == 2
    assert rt2.to_list() == [[[b"a", b"b"], [b"c"]], [[b"d"], [b"e", b"f", b"g"]]]


def test_split_rejects_numbers():
    with pytest.raises(TypeError, match="split"):
        tg.strings.split(tg.constant([1, 2]))


def test_bytes_split():
    assert tg.strings.bytes_split(tg.constant("hé")).numpy().tolist() == \
        [b"h", b"\xc3", b"\xa9"]
    assert tg.strings.bytes_split(tg.constant(["ab", ""])).to_list() == [[b"a", b"b"], []]


def test_unicode_decode_encode_round_trip():
    text = ["héllo", "", "日本"]
    cps = tg.strings.unicode_decode(tg.constant(text), "UTF-8")
    assert cps.to_list() == [[ord(c) for c in s] for s in text]
    assert cps.flat_values.dtype == tg.int32
    back = tg.strings.unicode_encode(cps, "UTF-8")
    assert back.numpy().tolist() == [s.encode() for s in text]
    utf16 = tg.strings.unicode_encode(tg.constant([[104, 233]]), "UTF-16-BE")
    assert utf16.numpy().tolist() == [b"\x00h\x00\xe9"]


def test_unicode_decode_errors():
    bad = tg.constant(b"a\xffb")
    assert tg.strings.unicode_decode(bad, "UTF-8").numpy().tolist() == [97, 65533, 98]
    assert tg.strings.unicode_decode(bad, "UTF-8", errors="ignore").numpy().tolist() == [97, 98]
    assert tg.strings.unicode_decode(bad, "UTF-8", replacement_char=63).numpy().tolist() == \
        [97, 63, 98]
    with pytest.raises(tg.errors.InvalidArgumentError):
        tg.strings.unicode_decode(bad, "UTF-8", errors="strict")
    with pytest.raises(ValueError, match="input_encoding"):
        tg.strings.unicode_decode(bad, "latin-1")
    ctrl = tg.strings.unicode_decode(tg.constant("a\x01"), "UTF-8",
                                     replace_control_characters=True)
    assert ctrl.numpy().tolist() == [97, 65533]


def test_unicode_encode_invalid_code_points():
    assert tg.strings.unicode_encode(tg.constant([65, 0x110000]), "UTF-8").numpy() == \
        "A\ufffd".encode()
    with pytest.raises(tg.errors.InvalidArgumentError):
        tg.strings.unicode_encode(tg.constant([65, -1]), "UTF-8", errors="strict")


def test_unicode_split():
    assert tg.strings.unicode_split(tg.constant(["aé", "b"]), "UTF-8").to_list() == \
        [[b"a", "é".encode()], [b"b"]]


# FarmHash Fingerprint64 values published for BigQuery's FARM_FINGERPRINT (signed int64) and
# Amazon Redshift's farmFingerprint64, and the Fingerprint64 of "" (k2 in FarmHash's source)
@pytest.mark.parametrize("text,value", [
    (b"1footrue", -1541654101129638711), (b"2applefalse", 2794438866806483259),
    (b"3true", -4880158226897771312), (b"alphabet", -2427165924636348523),
    (b"Amazon Redshift", 8085098817162212970), (b"", 0x9ae16a3b2f90404f - 2 ** 64)])
def test_fingerprint64_published_values(text, value):
    assert ctypes.c_int64(_fingerprint64(text)).value == value


def _farmhash_selftest_buffer(n):
    """The first n bytes of FarmHash's self-test buffer (farmhash.cc's Setup())."""
    mask, k0 = (1 << 64) - 1, 0xc3a5c85c97cb3127
    a, b, out = 9, 777, bytearray()
    for i in range(n):
        a = (a + b) & mask
        b = (b + a) & mask
        a = ((a ^ (a >> 41)) * k0) & mask
        b = (((b ^ (b >> 41)) * k0) + i) & mask
        out.append((b >> 37) & 0xFF)
    return bytes(out)


# farmhash.cc's farmhashnaTest table: case i hashes the i bytes at offset i * i of the buffer;
# these are its Hash64 entries (= Fingerprint64), covering every length path (0-16, 17-32,
# 33-64, > 64 with one and several 64-byte blocks)
_FARMHASH_CASES = {
    3: 0xef923a7a1af78eab, 7: 0x1b5a063fb4c7f9f1, 12: 0xe3f6828b6017086d,
    16: 0x03ead5f21d344056, 17: 0x6abbfde37ee03b5b, 25: 0x0dc78cb032c49217,
    32: 0x0782fa1b08b475e7, 33: 0x09deb3da5e16b5b8, 48: 0x01601bbbc1db4a56,
    64: 0xdef74bf4c9f1bc1b, 65: 0x3cceab392bc39b3f, 100: 0x05ad36f677825ce0,
    128: 0xf4a9a248b462909d, 129: 0xd4f7c858d78153b6, 200: 0x40f32eb90e5caa01,
    298: 0x2031c84bc57a1a9f}


def test_fingerprint64_farmhash_self_test_vectors():
    buf = _farmhash_selftest_buffer(298 * 298 + 298)
    for i, want in _FARMHASH_CASES.items():
        assert _fingerprint64(buf[i * i:i * i + i]) == want, i


def test_to_hash_bucket_fast_documented_example():
    out = tg.strings.to_hash_bucket_fast(tg.constant(["Hello", "TensorFlow", "2.x"]), 3)
    assert out.dtype == tg.int64
    np.testing.assert_array_equal(out.numpy(), [0, 2, 2])
    with pytest.raises(ValueError, match="num_buckets"):
        tg.strings.to_hash_bucket_fast(tg.constant("a"), 0)


def test_siphash_reference_vector_and_strong_buckets():
    from tapegpu.strings import _siphash24
    # SipHash-2-4 paper, appendix A: key 00..0f, message 00..0e
    assert _siphash24(0x0706050403020100, 0x0f0e0d0c0b0a0908, bytes(range(15))) == \
        0xa129ca6149be45e5
    out = tg.strings.to_hash_bucket_strong(tg.constant(["Hello", "TF"]), 3, [1, 2])
    np.testing.assert_array_equal(out.numpy(), [2, 0])  # TF's documented example


def test_to_hash_bucket_documented_example():
    out = tg.strings.to_hash_bucket(tg.constant(["Hello", "TensorFlow", "2.x"]), 3)
    np.testing.assert_array_equal(out.numpy(), [2, 0, 1])


def test_ngrams_widths_padding_and_shapes():
    data = tg.constant(["a", "b", "c"])
    assert tg.strings.ngrams(data, (1, 3)).numpy().tolist() == [b"a", b"b", b"c", b"a b c"]
    padded = tg.strings.ngrams(data, 2, separator="_", pad_values=("<", ">"))
    assert padded.numpy().tolist() == [b"<_a", b"a_b", b"b_c", b"c_>"]
    one = tg.strings.ngrams(data, 4, pad_values="#", padding_width=1)
    assert one.numpy().tolist() == [b"# a b c", b"a b c #"]
    short = tg.strings.ngrams(tg.constant(["x"]), 3, preserve_short_sequences=True)
    assert short.numpy().tolist() == [b"x"]
    dense = tg.strings.ngrams(tg.constant([["a", "b"], ["c", "d"]]), 2)
    assert dense.shape == (2, 1) and dense.numpy().tolist() == [[b"a b"], [b"c d"]]
    rag = tg.strings.ngrams(tg.ragged.constant([["a", "b", "c"], ["d"]]), 2)
    assert rag.to_list() == [[b"a b", b"b c"], []]
    with pytest.raises(ValueError, match="pad_values"):
        tg.strings.ngrams(data, 2, padding_width=1)


def test_unicode_offsets_and_transcode():
    cps, offsets = tg.strings.unicode_decode_with_offsets(tg.constant(["aé", b"\xffb"]),
                                                          "UTF-8")
    assert cps.to_list() == [[97, 233], [65533, 98]]
    assert offsets.to_list() == [[0, 1], [0, 1]]
    chars, offs = tg.strings.unicode_split_with_offsets(tg.constant("日a"), "UTF-8")
    assert chars.numpy().tolist() == ["日".encode(), b"a"] and offs.numpy().tolist() == [0, 3]
    out = tg.strings.unicode_transcode(tg.constant(["é", b"a\xff"]), "UTF-8", "UTF-32-BE")
    assert out.numpy().tolist() == ["é".encode("utf-32-be"), "a\ufffd".encode("utf-32-be")]


def test_unsorted_segment_join():
    out = tg.strings.unsorted_segment_join(tg.constant([["a", "b"], ["c", "d"], ["e", "f"]]),
                                           [1, 0, 1], 3, separator="-")
    assert out.numpy().tolist() == [[b"c", b"d"], [b"a-e", b"b-f"], [b"", b""]]
    with pytest.raises(tg.errors.InvalidArgumentError):
        tg.strings.unsorted_segment_join(tg.constant(["a"]), [2], 2)


def test_ragged_inputs_split_their_flat_values():
    rt = tg.ragged.constant([["a b", "c"], ["d e f"]])
    out = tg.strings.split(rt)
    assert out.to_list() == [[[b"a", b"b"], [b"c"]], [[b"d", b"e", b"f"]]]
    assert tg.strings.bytes_split(tg.ragged.constant([["ab"], []])).to_list() == \
        [[[b"a", b"b"]], []]
    hashed = tg.strings.to_hash_bucket_fast(
        tg.ragged.constant([["Hello"], ["TensorFlow", "2.x"]]), 3)
    assert hashed.to_list() == [[0], [2, 2]]
    cps, offsets = tg.strings.unicode_decode_with_offsets(tg.ragged.constant([["é"]]), "UTF-8")
    assert cps.to_list() == [[[233]]] and offsets.to_list() == [[[0]]]
