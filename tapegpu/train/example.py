"""TensorFlow's record protocol buffers, `tf.train.Example` and its parts, and `TensorProto`:
the messages of `tensorflow/core/example/{example,feature}.proto` and
`tensorflow/core/framework/{tensor,tensor_shape}.proto`, in the protobuf wire format, with the
generated classes' Python interface (keyword construction, field access, `SerializeToString`,
`FromString` / `ParseFromString`, `HasField`, `WhichOneof`, `CopyFrom`, `MergeFrom`, `Clear`,
text format as `str()`). The wire format and the classes' machinery are in protobuf.py.

>>> ex = tg.train.Example(features=tg.train.Features(feature={
...     "x": tg.train.Feature(int64_list=tg.train.Int64List(value=[1, 300]))}))
>>> ex.SerializeToString()
b'\\n\\x0e\\n\\x0c\\n\\x01x\\x12\\x07\\x1a\\x05\\n\\x03\\x01\\xac\\x02'
>>> list(tg.train.Example.FromString(ex.SerializeToString()).features.feature["x"].int64_list.value)
[1, 300]
"""

from .protobuf import DecodeError, Message, packed_varints  # noqa: F401

__all__ = ["BytesList", "FloatList", "Int64List", "Feature", "Features", "FeatureList",
           "FeatureLists", "Example", "SequenceExample", "TensorProto", "TensorShapeProto",
           "DecodeError", "packed_varints"]


def _message(name, fields, doc):
    cls = type(name, (Message,), {"_FIELDS": tuple(fields), "__doc__": doc,
                                  "__module__": __name__})
    return cls


BytesList = _message("BytesList", [(1, "value", "bytes", "repeated", None)],
                     "`tf.train.BytesList`: `value`, a repeated bytes field.\n\n"
                     "    >>> tg.train.BytesList(value=[b'ab']).SerializeToString()\n"
                     "    b'\\n\\x02ab'\n")
FloatList = _message("FloatList", [(1, "value", "float", "repeated", None)],
                     "`tf.train.FloatList`: `value`, repeated float32 (packed).\n\n"
                     "    >>> tg.train.FloatList(value=[1.0]).SerializeToString()\n"
                     "    b'\\n\\x04\\x00\\x00\\x80?'\n")
Int64List = _message("Int64List", [(1, "value", "int64", "repeated", None)],
                     "`tf.train.Int64List`: `value`, repeated int64 (packed varints).\n\n"
                     "    >>> tg.train.Int64List(value=[1, -1]).SerializeToString()\n"
                     "    b'\\n\\x0b\\x01\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x01'\n")
Feature = _message("Feature", [(1, "bytes_list", BytesList, "optional", "kind"),
                               (2, "float_list", FloatList, "optional", "kind"),
                               (3, "int64_list", Int64List, "optional", "kind")],
                   "`tf.train.Feature`: one of `bytes_list`, `float_list`, `int64_list` (the "
                   "oneof `kind`).\n\n"
                   "    >>> f = tg.train.Feature(float_list=tg.train.FloatList(value=[0.5]))\n"
                   "    >>> f.WhichOneof('kind'), list(f.float_list.value)\n"
                   "    ('float_list', [0.5])\n")
Features = _message("Features", [(1, "feature", Feature, "map", None)],
                    "`tf.train.Features`: `feature`, a map from name to `Feature`.\n\n"
                    "    >>> fs = tg.train.Features(feature={'a': tg.train.Feature("
                    "bytes_list=tg.train.BytesList(value=[b'x']))})\n"
                    "    >>> list(fs.feature['a'].bytes_list.value)\n"
                    "    [b'x']\n")
FeatureList = _message("FeatureList", [(1, "feature", Feature, "repeated", None)],
                       "`tf.train.FeatureList`: `feature`, a repeated `Feature` (a sequence).\n\n"
                       "    >>> fl = tg.train.FeatureList(feature=[tg.train.Feature("
                       "int64_list=tg.train.Int64List(value=[i])) for i in range(3)])\n"
                       "    >>> [f.int64_list.value[0] for f in fl.feature]\n"
                       "    [0, 1, 2]\n")
FeatureLists = _message("FeatureLists", [(1, "feature_list", FeatureList, "map", None)],
                        "`tf.train.FeatureLists`: `feature_list`, a map from name to "
                        "`FeatureList`.\n\n"
                        "    >>> fls = tg.train.FeatureLists(feature_list={'s': "
                        "tg.train.FeatureList()})\n"
                        "    >>> list(fls.feature_list)\n"
                        "    ['s']\n")
Example = _message("Example", [(1, "features", Features, "optional", None)],
                   "`tf.train.Example`: `features`, a `Features` message; the record format "
                   "of TFRecord files.\n\n"
                   "    >>> ex = tg.train.Example()\n"
                   "    >>> ex.features.feature['y'].int64_list.value.append(7)\n"
                   "    >>> print(ex)\n"
                   "    features {\n"
                   "      feature {\n"
                   "        key: \"y\"\n"
                   "        value {\n"
                   "          int64_list {\n"
                   "            value: 7\n"
                   "          }\n"
                   "        }\n"
                   "      }\n"
                   "    }\n"
                   "    <BLANKLINE>\n")
SequenceExample = _message("SequenceExample",
                           [(1, "context", Features, "optional", None),
                            (2, "feature_lists", FeatureLists, "optional", None)],
                           "`tf.train.SequenceExample`: `context` (`Features`) and "
                           "`feature_lists` (`FeatureLists`).\n\n"
                           "    >>> se = tg.train.SequenceExample()\n"
                           "    >>> se.feature_lists.feature_list['t'].feature.add()"
                           ".int64_list.value.extend([1, 2])\n"
                           "    >>> tg.train.SequenceExample.FromString("
                           "se.SerializeToString()) == se\n"
                           "    True\n")

_Dim = _message("Dim", [(1, "size", "int64", "optional", None),
                        (2, "name", "string", "optional", None)],
                "One dimension of a `TensorShapeProto`: `size` (-1 unknown) and `name`.")
TensorShapeProto = _message("TensorShapeProto", [(2, "dim", _Dim, "repeated", None),
                                                 (3, "unknown_rank", "bool", "optional", None)],
                            "TensorFlow's `TensorShapeProto`: `dim` (each with `size`) and "
                            "`unknown_rank`.\n\n"
                            "    >>> s = tg.make_tensor_proto([[1, 2, 3], [4, 5, 6]])"
                            ".tensor_shape\n"
                            "    >>> [d.size for d in s.dim]\n"
                            "    [2, 3]\n")
TensorShapeProto.Dim = _Dim
_Dim.__qualname__ = "TensorShapeProto.Dim"  # where pickle finds it
TensorProto = _message("TensorProto", [
    (1, "dtype", "int32", "optional", None),
    (2, "tensor_shape", TensorShapeProto, "optional", None),
    (3, "version_number", "int32", "optional", None),
    (4, "tensor_content", "bytes", "optional", None),
    (5, "float_val", "float", "repeated", None),
    (6, "double_val", "double", "repeated", None),
    (7, "int_val", "int32", "repeated", None),
    (8, "string_val", "bytes", "repeated", None),
    (9, "scomplex_val", "float", "repeated", None),
    (10, "int64_val", "int64", "repeated", None),
    (11, "bool_val", "bool", "repeated", None),
    (12, "dcomplex_val", "double", "repeated", None),
    (13, "half_val", "int32", "repeated", None),
    (16, "uint32_val", "uint32", "repeated", None),
    (17, "uint64_val", "uint64", "repeated", None),
], "TensorFlow's `TensorProto` (`tensorflow/core/framework/tensor.proto`): `dtype` (a DataType "
   "enum value), `tensor_shape`, and the values either as `tensor_content` (raw little-endian "
   "bytes) or in the `*_val` field of the dtype; made by `tg.make_tensor_proto`, read by "
   "`tg.make_ndarray`.\n\n"
   "    >>> tg.make_tensor_proto([1.0, 2.0]).dtype\n"
   "    1\n")
