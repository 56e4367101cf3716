"""`tg.io`: TensorFlow's `tf.io` (files, records, parsing, tensor serialization), assembled
here from its modules: files.py (`read_file`, `write_file`), records.py (TFRecord files),
parsing.py (Example protos to tensors; SequenceExamples in sequence.py), csv.py
(`decode_csv`), tensors.py (`serialize_tensor`, `parse_tensor`, `decode_raw`, ...),
sparse_io.py (sparse tensors as bytes), codecs.py (base64, compressed strings, JSON
Examples, `matching_files`), gfile.py (`tg.io.gfile`; TF1's names in gfile_v1.py), and the
image decoders and encoders of tapegpu/image_codecs.py (`decode_png`, `decode_jpeg`, ...). TF1's
`tf_record_iterator` and `TFRecordCompressionType` live in records.py and are reached as
`tg.compat.v1.io.*` (tapegpu/compat/surface.py, LAZY).

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "f.txt")
>>> tg.io.write_file(path, tg.constant("hello"))
>>> tg.io.read_file(path).numpy()
b'hello'
"""
import importlib

from . import gfile  # noqa: F401
from .codecs import (decode_base64, decode_compressed, decode_json_example,  # noqa: F401
                     encode_base64, match_filenames_once, matching_files)
from .csv import decode_csv  # noqa: F401
from .files import read_file, write_file  # noqa: F401
from .records import TFRecordOptions, TFRecordWriter  # noqa: F401
from .tensors import decode_raw, parse_tensor, serialize_tensor  # noqa: F401
from ..image_codecs import (decode_and_crop_jpeg, decode_bmp, decode_gif,  # noqa: F401
                            decode_image, decode_jpeg, decode_png, encode_jpeg, encode_png,
                            extract_jpeg_shape, is_jpeg)

# parsing.py, sequence.py and sparse_io.py use tg.sparse and tg.ragged, whose imports
# `import tapegpu` leaves for first use: their names are imported when first read (PEP 562)
_ON_FIRST_USE = {
    **{name: "parsing" for name in (
        "FixedLenFeature", "FixedLenSequenceFeature", "VarLenFeature", "RaggedFeature",
        "SparseFeature", "parse_example", "parse_single_example")},
    **{name: "sequence" for name in (
        "parse_single_sequence_example", "parse_sequence_example")},
    **{name: "sparse_io" for name in (
        "serialize_sparse", "serialize_many_sparse", "deserialize_many_sparse")},
}


def __getattr__(name):
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["read_file", "write_file", "decode_csv", "decode_raw", "serialize_tensor",
           "parse_tensor", "TFRecordOptions", "TFRecordWriter", "encode_base64",
           "decode_base64", "decode_compressed", "decode_json_example", "matching_files",
           "match_filenames_once", "decode_and_crop_jpeg", "decode_bmp", "decode_gif",
           "decode_image", "decode_jpeg", "decode_png", "encode_jpeg", "encode_png",
           "extract_jpeg_shape", "is_jpeg",
           *_ON_FIRST_USE]
