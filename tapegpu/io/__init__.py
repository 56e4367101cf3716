"""`tg.io`: TensorFlow's `tf.io` (files, records, parsing, tensor serialization), assembled
here from its modules: files.py (`read_file`, `write_file`), records.py (TFRecord files),
parsing.py (Example protos to tensors), csv.py (`decode_csv`), tensors.py
(`serialize_tensor`, `parse_tensor`, `decode_raw`, ...), codecs.py (base64, compressed
strings, `matching_files`), gfile.py (`tg.io.gfile`; TF1's
names in gfile_v1.py). TF1's `tf_record_iterator` and `TFRecordCompressionType` live in
records.py and are reached as `tg.compat.v1.io.*` (tapegpu/compat/surface.py, LAZY).

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "f.txt")
>>> tg.io.write_file(path, tg.constant("hello"))
>>> tg.io.read_file(path).numpy()
b'hello'
"""
from . import gfile  # noqa: F401
from .codecs import (decode_base64, decode_compressed, decode_json_example,  # noqa: F401
                     encode_base64, matching_files)
from .csv import decode_csv  # noqa: F401
from .files import read_file, write_file  # noqa: F401
from .parsing import (FixedLenFeature, FixedLenSequenceFeature, RaggedFeature,  # noqa: F401
                      SparseFeature, VarLenFeature, parse_example, parse_sequence_example,
                      parse_single_example, parse_single_sequence_example)
from .records import TFRecordOptions, TFRecordWriter  # noqa: F401
from .tensors import (decode_raw, deserialize_many_sparse, parse_tensor,  # noqa: F401
                      serialize_many_sparse, serialize_sparse, serialize_tensor)

__all__ = ["read_file", "write_file", "FixedLenFeature", "FixedLenSequenceFeature",
           "VarLenFeature", "RaggedFeature", "SparseFeature", "parse_example",
           "parse_single_example", "parse_single_sequence_example", "parse_sequence_example",
           "TFRecordOptions", "TFRecordWriter", "decode_csv", "decode_raw", "serialize_tensor",
           "parse_tensor", "serialize_sparse", "encode_base64", "decode_base64",
           "decode_compressed", "matching_files", "serialize_many_sparse",
           "deserialize_many_sparse", "decode_json_example"]
