"""serialize_tensor / parse_tensor, make_tensor_proto / make_ndarray, serialize_sparse,
decode_raw: bytes derived from tensor.proto by hand, round trips, TF's errors."""
import struct

import numpy as np
import pytest

import tapegpu as tg


def test_serialize_tensor_bytes():
    # dtype = 1 (field 1, varint); shape (field 2) with dims (field 2) of size (field 1) 2;
    # tensor_content (field 4): the raw little-endian values
    data = tg.io.serialize_tensor(tg.constant([1.0, 2.0])).numpy()
    assert data == b"\x08\x01" + b"\x12\x04\x12\x02\x08\x02" + b"\x22\x08" + \
        struct.pack("<ff", 1.0, 2.0)
    # strings: dtype 7, values one by one in string_val (field 8)
    data = tg.io.serialize_tensor(tg.constant([b"a", b"bc"])).numpy()
    assert data == b"\x08\x07\x12\x04\x12\x02\x08\x02" + b"\x42\x01a" + b"\x42\x02bc"
    # int64 scalar: dtype 9, an empty shape, eight bytes
    assert tg.io.serialize_tensor(tg.constant(np.int64(-2))).numpy() == \
        b"\x08\x09\x12\x00\x22\x08" + struct.pack("<q", -2)


@pytest.mark.parametrize("value", [
    np.arange(6, dtype=np.float32).reshape(2, 3), np.array(True), np.arange(3, dtype=np.int8),
    np.array([1.5, -2], dtype=np.float64), np.array([[1 + 2j]], dtype=np.complex64),
    np.zeros((0, 2), np.int32), np.array([np.iinfo(np.int64).min], np.int64)])
def test_round_trip(value):
    t = tg.constant(value)
    back = tg.io.parse_tensor(tg.io.serialize_tensor(t), t.dtype)
    assert back.dtype == t.dtype and back.shape == t.shape
    np.testing.assert_array_equal(back.numpy(), value)


def test_parse_tensor_type_mismatch():
    s = tg.io.serialize_tensor(tg.constant([1.0]))
    with pytest.raises(tg.errors.InvalidArgumentError,
                       match=r"Type mismatch between parsed tensor \(float\) and dtype "
                             r"\(int32\)"):
        tg.io.parse_tensor(s, tg.int32)
    with pytest.raises(tg.errors.InvalidArgumentError, match="Could not parse"):
        tg.io.parse_tensor(b"\x0a", tg.float32)


def test_make_tensor_proto_representations():
    p = tg.make_tensor_proto([1, 2, 3])
    assert p.dtype == 3 and p.tensor_content == struct.pack("<3i", 1, 2, 3)  # int32
    assert tg.make_tensor_proto([2 ** 40]).dtype == 9  # int64 when int32 would lose it
    assert tg.make_tensor_proto(np.array([1, 2], np.int64)).dtype == 9  # numpy keeps its dtype
    s = tg.make_tensor_proto(3.0)  # one element: in float_val
    assert s.dtype == 1 and list(s.float_val) == [3.0] and s.tensor_content == b""
    f = tg.make_tensor_proto(7, dtype=tg.int64, shape=[2, 2])  # fewer values than the shape
    assert list(f.int64_val) == [7] and tg.make_ndarray(f).tolist() == [[7, 7], [7, 7]]
    pad = tg.make_tensor_proto([1.0, 2.0], shape=[4])
    assert tg.make_ndarray(pad).tolist() == [1.0, 2.0, 2.0, 2.0]
    h = tg.make_tensor_proto(np.float16(1.5))
    assert h.dtype == 19 and list(h.half_val) == [0x3E00]
    assert tg.make_ndarray(h) == np.float16(1.5)
    with pytest.raises(ValueError, match="Too many elements provided. Takes at most 2, but "
                                         "got 3"):
        tg.make_tensor_proto([1, 2, 3], shape=[2])
    with pytest.raises(TypeError, match="Expected Tensor's shape"):
        tg.make_tensor_proto([1, 2], shape=[1, 2], verify_shape=True)


def test_make_ndarray_round_trips():
    for value in (np.arange(6.0).reshape(2, 3), np.array([b"x", b"yz"], dtype=object),
                  np.array([True, False]), np.array([[1 - 1j]], np.complex128)):
        got = tg.make_ndarray(tg.make_tensor_proto(value))
        assert got.dtype == value.dtype and got.tolist() == value.tolist()
    assert tg.make_ndarray(tg.make_tensor_proto(tg.constant([1.5]))).dtype == np.float32


def test_serialize_sparse():
    sp = tg.SparseTensor([[0, 1], [2, 0]], [5.0, 6.0], [3, 2])
    s = tg.io.serialize_sparse(sp)
    assert s.shape == (3,) and s.dtype == tg.string
    assert tg.io.parse_tensor(s[0], tg.int64).numpy().tolist() == [[0, 1], [2, 0]]
    assert tg.io.parse_tensor(s[1], tg.float32).numpy().tolist() == [5.0, 6.0]
    assert tg.io.parse_tensor(s[2], tg.int64).numpy().tolist() == [3, 2]
    with pytest.raises(NotImplementedError, match="out_type"):
        tg.io.serialize_sparse(sp, out_type=tg.int32)


def test_decode_raw():
    data = struct.pack("<3h", 1, -2, 300)
    assert tg.io.decode_raw([data], tg.int16).numpy().tolist() == [[1, -2, 300]]
    big = tg.io.decode_raw([struct.pack(">2h", 1, 2)], tg.int16, little_endian=False)
    assert big.numpy().tolist() == [[1, 2]]
    assert tg.io.decode_raw(b"\x00\x00\x80?", tg.float32).numpy().tolist() == [1.0]
    fixed = tg.io.decode_raw([b"\x01\x02\x03", b"\x04"], tg.uint8, fixed_length=2)
    assert fixed.numpy().tolist() == [[1, 2], [4, 0]]
    with pytest.raises(tg.errors.InvalidArgumentError, match="same size"):
        tg.io.decode_raw([b"ab", b"abcd"], tg.uint8)
    with pytest.raises(tg.errors.InvalidArgumentError, match="not a multiple of 4"):
        tg.io.decode_raw([b"abcde"], tg.float32)


def test_serialize_many_sparse_round_trip():
    sp = tg.SparseTensor([[0, 0, 1], [1, 2, 0], [1, 2, 3]], [b"a", b"b", b"c"], [3, 4, 5])
    s = tg.io.serialize_many_sparse(sp)
    assert s.shape == (3, 3) and s.dtype == tg.string
    # row 1: its entries, without the minibatch index, and the inner dense shape
    assert tg.io.parse_tensor(s[1][0], tg.int64).numpy().tolist() == [[2, 0], [2, 3]]
    assert tg.io.parse_tensor(s[1][1], tg.string).numpy().tolist() == [b"b", b"c"]
    assert tg.io.parse_tensor(s[2][2], tg.int64).numpy().tolist() == [4, 5]
    assert tg.io.parse_tensor(s[2][0], tg.int64).shape == (0, 2)
    back = tg.io.deserialize_many_sparse(s, tg.string, rank=3)
    assert back.indices.numpy().tolist() == sp.indices.numpy().tolist()
    assert back.values.numpy().tolist() == [b"a", b"b", b"c"]
    assert back.dense_shape.numpy().tolist() == [3, 4, 5]
    with pytest.raises(tg.errors.InvalidArgumentError, match="rank"):
        tg.io.deserialize_many_sparse(s, tg.string, rank=2)
    with pytest.raises(tg.errors.InvalidArgumentError, match="rank >= 2"):
        tg.io.serialize_many_sparse(tg.SparseTensor([[1]], [1], [3]))


def test_deserialize_many_sparse_takes_the_largest_shape():
    a = tg.io.serialize_sparse(tg.SparseTensor([[0, 1]], [1.0], [1, 2]))
    b = tg.io.serialize_sparse(tg.SparseTensor([[2, 0]], [2.0], [3, 1]))
    both = tg.constant(np.stack([a.numpy(), b.numpy()]))
    sp = tg.io.deserialize_many_sparse(both, tg.float32)
    assert sp.indices.numpy().tolist() == [[0, 0, 1], [1, 2, 0]]
    assert sp.dense_shape.numpy().tolist() == [2, 3, 2]
