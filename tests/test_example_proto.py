"""tf.train.Example and its parts, TensorProto: exact protobuf wire bytes derived by hand from
example.proto / feature.proto / tensor.proto, round trips, the generated classes' interface."""
import struct

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.train.example import DecodeError, TensorProto

T = tg.train


def _ld(field, payload):
    """A length-delimited field (wire type 2) whose payload is shorter than 128 bytes."""
    assert len(payload) < 128
    return bytes([field << 3 | 2, len(payload)]) + payload


def test_example_bytes_match_the_wire_format():
    ex = T.Example(features=T.Features(feature={
        "a": T.Feature(int64_list=T.Int64List(value=[1, 150, -1])),
        "b": T.Feature(bytes_list=T.BytesList(value=[b"hi", b""])),
        "c": T.Feature(float_list=T.FloatList(value=[1.0, -2.5])),
    }))
    # int64 varints: 1 -> 01, 150 -> 96 01, -1 -> ten bytes (two's complement)
    ints = b"\x01" + b"\x96\x01" + b"\xff" * 9 + b"\x01"
    a = _ld(3, _ld(1, ints))                               # Feature.int64_list = 3, packed
    b = _ld(1, _ld(1, b"hi") + _ld(1, b""))                # Feature.bytes_list = 1
    c = _ld(2, _ld(1, struct.pack("<ff", 1.0, -2.5)))      # Feature.float_list = 2, packed
    entries = b"".join(_ld(1, _ld(1, k) + _ld(2, v)) for k, v in
                       [(b"a", a), (b"b", b), (b"c", c)])  # map entries: key = 1, value = 2
    expected = _ld(1, entries)                              # Example.features = 1
    assert ex.SerializeToString() == expected
    back = T.Example.FromString(expected)
    assert list(back.features.feature["a"].int64_list.value) == [1, 150, -1]
    assert list(back.features.feature["b"].bytes_list.value) == [b"hi", b""]
    assert list(back.features.feature["c"].float_list.value) == [1.0, -2.5]
    assert back == ex


def test_reading_accepts_unpacked_numbers_and_skips_unknown_fields():
    # Int64List with two unpacked varints (wire type 0), then an unknown field 9 (varint)
    payload = b"\x08\x05\x08\x07" + b"\x48\x01"
    assert list(T.Int64List.FromString(payload).value) == [5, 7]
    # FloatList with an unpacked float (wire type 5)
    assert list(T.FloatList.FromString(b"\x0d" + struct.pack("<f", 0.5)).value) == [0.5]


def test_truncated_bytes_raise_decode_error():
    with pytest.raises(DecodeError):
        T.Example.FromString(b"\x0a\x05\x0a")
    with pytest.raises(DecodeError):
        T.Int64List.FromString(b"\x08\x80")


def test_feature_is_a_oneof():
    f = T.Feature()
    assert f.WhichOneof("kind") is None and not f.HasField("int64_list")
    f.int64_list.value.append(3)
    assert f.WhichOneof("kind") == "int64_list" and f.HasField("int64_list")
    f.float_list.value.append(1.0)
    assert f.WhichOneof("kind") == "float_list" and not f.HasField("int64_list")
    assert f.SerializeToString() == _ld(2, _ld(1, struct.pack("<f", 1.0)))
    # an explicitly set empty list is present and serialized
    assert T.Feature(int64_list=T.Int64List()).SerializeToString() == b"\x1a\x00"


def test_field_types_are_checked():
    with pytest.raises(TypeError, match="expected one of: bytes"):
        T.BytesList(value=["text"])
    with pytest.raises(TypeError):
        T.Int64List(value=[1.5])
    assert list(T.Int64List(value=[True, np.int32(4)]).value) == [1, 4]  # as protobuf
    with pytest.raises(ValueError, match="out of range"):
        T.Int64List(value=[2 ** 63])
    with pytest.raises(ValueError, match="no \"nope\" field"):
        T.Example(nope=1)
    with pytest.raises(AttributeError):
        T.Example().features = T.Features()


def test_float_values_are_float32():
    assert T.FloatList(value=[0.1]).value[0] == float(np.float32(0.1))
    # text: '%.6g', or '%.9g' when that is another float32 (upb's format, TF 2.21's protobuf)
    assert str(T.FloatList(value=[np.e, 0.5])) == "value: 2.71828175\nvalue: 0.5\n"


def test_scalar_tensors_fill_number_fields():
    # TensorFlow's TFRecord tutorial passes eager tensors to Int64List and FloatList
    ints = T.Int64List(value=[tg.constant(3, tg.int64), tg.constant(True)])
    assert list(ints.value) == [3, 1]
    assert list(T.FloatList(value=[tg.constant(0.5)]).value) == [0.5]
    with pytest.raises(TypeError):
        T.Int64List(value=[tg.constant(1.5)])
    with pytest.raises(TypeError):
        T.BytesList(value=[tg.constant(b"x")])


def test_map_access_creates_entries_and_text_format():
    ex = T.Example()
    ex.features.feature["z"].bytes_list.value.append(b"a\"\n\xff")
    ex.features.feature["y"].float_list.value.extend([0.1, 2, 1e-7, float("inf")])
    assert ex.HasField("features")
    assert str(ex) == (
        'features {\n'
        '  feature {\n    key: "y"\n    value {\n      float_list {\n        value: 0.1\n'
        '        value: 2\n        value: 1e-07\n        value: inf\n'
        '      }\n    }\n  }\n'
        '  feature {\n    key: "z"\n    value {\n      bytes_list {\n'
        '        value: "a\\"\\n\\377"\n      }\n    }\n  }\n'
        '}\n')


def test_copy_merge_clear():
    a = T.Int64List(value=[1])
    b = T.Int64List(value=[2, 3])
    a.MergeFrom(b)
    assert list(a.value) == [1, 2, 3]
    a.CopyFrom(b)
    assert list(a.value) == [2, 3]
    a.Clear()
    assert list(a.value) == [] and a.SerializeToString() == b""
    with pytest.raises(TypeError):
        a.CopyFrom(T.FloatList())


def test_sequence_example_round_trip():
    se = T.SequenceExample(
        context=T.Features(feature={"id": T.Feature(int64_list=T.Int64List(value=[9]))}),
        feature_lists=T.FeatureLists(feature_list={"t": T.FeatureList(feature=[
            T.Feature(float_list=T.FloatList(value=[i])) for i in range(3)])}))
    data = se.SerializeToString()
    # context = field 1, feature_lists = field 2
    assert data[:1] == b"\x0a"
    back = T.SequenceExample.FromString(data)
    assert [f.float_list.value[0] for f in back.feature_lists.feature_list["t"].feature] == \
        [0.0, 1.0, 2.0]
    assert back.context.feature["id"].int64_list.value[0] == 9


def test_tensor_proto_known_encoding():
    # TensorFlow's serialize_tensor(tf.constant(1.0)): dtype=1 (DT_FLOAT), an empty shape,
    # tensor_content = the float's 4 little-endian bytes
    p = TensorProto(dtype=1, tensor_shape={}, tensor_content=struct.pack("<f", 1.0))
    assert p.SerializeToString() == b'\x08\x01\x12\x00"\x04\x00\x00\x80?'


def test_compat_v1_names_are_the_same_classes():
    assert tg.compat.v1.train.Example is T.Example
    assert tg.compat.surface.status("tf.train.SequenceExample") == "implemented"


def test_packed_varints_edge_values():
    from tapegpu.train.example import packed_varints
    # hand-written encodings: 0 -> 00, 127 -> 7f, 128 -> 80 01, 300 -> ac 02,
    # -1 -> ff*9 01, -2**63 -> 80*9 01, 2**63-1 -> ff*8 7f
    data = (b"\x00" + b"\x7f" + b"\x80\x01" + b"\xac\x02" + b"\xff" * 9 + b"\x01" +
            b"\x80" * 9 + b"\x01" + b"\xff" * 8 + b"\x7f")
    assert packed_varints(data).tolist() == [0, 127, 128, 300, -1, -2 ** 63, 2 ** 63 - 1]
    with pytest.raises(DecodeError, match="longer than 10 bytes"):
        packed_varints(b"\xff" * 10 + b"\x01")
    with pytest.raises(DecodeError, match="Truncated"):
        packed_varints(b"\x01\x80")


def test_pickle_and_deepcopy():
    import copy
    import pickle
    ex = T.Example()
    ex.features.feature["a"].bytes_list.value.append(b"z")
    for clone in (pickle.loads(pickle.dumps(ex)), copy.deepcopy(ex)):
        assert clone == ex and clone is not ex
        clone.features.feature["a"].bytes_list.value.append(b"y")
        assert list(ex.features.feature["a"].bytes_list.value) == [b"z"]
