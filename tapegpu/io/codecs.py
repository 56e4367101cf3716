"""Whole-string codecs of `tg.io`: `encode_base64` / `decode_base64` (web-safe base64, as
TensorFlow's), `decode_compressed` (ZLIB, GZIP), `decode_json_example` (JSON Examples to
binary ones) and `matching_files` (glob).

>>> tg.io.encode_base64(tg.constant([b"\\xfb\\xff"])).numpy()
array([b'-_8'], dtype=object)
"""
import base64
import binascii
import gzip
import json
import zlib

import numpy as np

from .. import backends as _backend
from ..core.tensor import Tensor, Variable, convert_to_tensor
from ..errors import InvalidArgumentError
from ..train import example as _example
from . import gfile as _gfile
from . import records as _records
from .tensors import host_array

__all__ = ["encode_base64", "decode_base64", "decode_compressed", "matching_files",
           "match_filenames_once", "decode_json_example"]


def _strings(x, who):
    t = x if isinstance(x, Tensor) else convert_to_tensor(x)
    if not t.dtype.is_string:
        raise TypeError(f"{who}: expected a tg.string tensor, got {t.dtype.name}")
    return host_array(t)


def _map(fn, arr):
    out = np.empty(arr.size, dtype=object)
    out[:] = [fn(bytes(v)) for v in arr.reshape(-1)]
    return Tensor(out.reshape(arr.shape), _backend.lookup("cpu"))


def encode_base64(input, pad=False, name=None):  # noqa: A002 - TensorFlow's argument name
    """Each string in web-safe base64 ('-' and '_' for '+' and '/'), without '=' padding
    unless `pad` (`tf.io.encode_base64`).

    >>> tg.io.encode_base64(tg.constant("hi"), pad=True).numpy()
    b'aGk='
    """
    def enc(b):
        out = base64.urlsafe_b64encode(b)
        return out if pad else out.rstrip(b"=")
    return _map(enc, _strings(input, "tf.io.encode_base64"))


def decode_base64(input, name=None):  # noqa: A002
    """Decodes web-safe base64 strings, padded or not (`tf.io.decode_base64`); an
    InvalidArgumentError for characters outside the web-safe alphabet.

    >>> tg.io.decode_base64(tg.constant(["aGk", "aGk="])).numpy()
    array([b'hi', b'hi'], dtype=object)
    """
    def dec(b):
        stripped = b.rstrip(b"=")
        if len(stripped) % 4 == 1 or not all(c in _SAFE for c in stripped):
            raise InvalidArgumentError(f"tf.io.decode_base64: Invalid character found in "
                                       f"base64 (or an impossible length): {b[:40]!r}")
        try:
            return base64.urlsafe_b64decode(stripped + b"=" * (-len(stripped) % 4))
        except binascii.Error as e:
            raise InvalidArgumentError(f"tf.io.decode_base64: {e}") from None
    return _map(dec, _strings(input, "tf.io.decode_base64"))


_SAFE = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def decode_compressed(bytes, compression_type="", name=None):  # noqa: A002
    """Decompresses each string (`tf.io.decode_compressed`): `compression_type` '' (as is),
    'ZLIB' or 'GZIP'; corrupt data is an InvalidArgumentError.

    >>> import zlib
    >>> tg.io.decode_compressed(tg.constant([zlib.compress(b"abc")]), "ZLIB").numpy()
    array([b'abc'], dtype=object)
    """
    who = "tf.io.decode_compressed"
    kind = _records._compression(compression_type, who)

    def dec(b):
        try:
            if kind == "ZLIB":
                return zlib.decompress(b)
            if kind == "GZIP":
                return gzip.decompress(b)
        except (zlib.error, OSError, EOFError) as e:
            raise InvalidArgumentError(f"{who}: corrupted {kind} data ({e})") from None
        return b
    return _map(dec, _strings(bytes, who))


def matching_files(pattern, name=None):
    """The files matching a glob pattern (or a 1-D tensor of patterns), a sorted 1-D
    tg.string tensor (`tf.io.matching_files`).

    >>> tg.io.matching_files("/no/such/dir/*").shape
    (0,)
    """
    arr = _strings(pattern, "tf.io.matching_files")
    if arr.ndim > 1:
        raise ValueError(f"tf.io.matching_files: pattern must be a scalar or 1-D, got shape "
                         f"{arr.shape}")
    found = _gfile.glob([bytes(p) for p in arr.reshape(-1)])
    out = np.empty(len(found), dtype=object)
    out[:] = [f.encode("utf-8") for f in found]
    return Tensor(out, _backend.lookup("cpu"))


def match_filenames_once(pattern, name=None):
    """The files matching `pattern`, matched once, in a non-trainable string variable
    (`tf.io.match_filenames_once`), sorted.

    >>> v = tg.io.match_filenames_once("/no/such/dir/*")
    >>> v.trainable, v.shape
    (False, (0,))
    """
    return Variable(matching_files(pattern), trainable=False,
                    name=name or "matching_filenames")


def _camel(name):
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _json_scalar(value, kind, path):
    if kind == "bytes":
        if not isinstance(value, str):
            raise ValueError(f"{path}: expected a base64 string, got {value!r}")
        text = value.replace("-", "+").replace("_", "/")
        try:
            return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except binascii.Error:
            raise ValueError(f"{path}: invalid base64 {value!r}") from None
    if kind == "float":
        special = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
        if isinstance(value, str) and value in special:
            return special[value]
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, str)) or \
            (isinstance(value, str) and not value.lstrip("-").isdigit()):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(f"{path}: expected an integer, got {value!r}")
    return int(value)


def _json_message(obj, cls, path):
    """A message of `cls` from its proto3 JSON form (field names as in the .proto or in
    lowerCamelCase; int64 as numbers or strings; bytes as base64)."""
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a JSON object for {cls.__name__}, got {obj!r}")
    msg = cls()
    fields = {}
    for f in cls._FIELDS:
        fields[f[1]] = fields[_camel(f[1])] = f
    for key, value in obj.items():
        if key not in fields:
            raise ValueError(f'{path}: Message type "tensorflow.{cls.__name__}" has no field '
                             f'named "{key}"')
        _, name, kind, label, _ = fields[key]
        if value is None:
            continue
        where = f"{path}.{key}"
        if label == "map":
            if not isinstance(value, dict):
                raise ValueError(f"{where}: expected a JSON object, got {value!r}")
            for k, v in value.items():
                getattr(msg, name)[k].CopyFrom(_json_message(v, kind, f"{where}[{k!r}]"))
        elif label == "repeated":
            if not isinstance(value, list):
                raise ValueError(f"{where}: expected a JSON array, got {value!r}")
            target = getattr(msg, name)
            for i, v in enumerate(value):
                if isinstance(kind, type):
                    target.append(_json_message(v, kind, f"{where}[{i}]"))
                else:
                    target.append(_json_scalar(v, kind, f"{where}[{i}]"))
        elif isinstance(kind, type):
            getattr(msg, name).CopyFrom(_json_message(value, kind, where))
            msg._mark(name)
        else:
            setattr(msg, name, _json_scalar(value, kind, where))
    return msg


def decode_json_example(json_examples, name=None):
    """JSON-encoded `tf.train.Example` protos (proto3's JSON mapping: field names as in
    example.proto or lowerCamelCase, int64 values as numbers or strings, bytes as base64) to
    serialized binary ones, a string tensor of the same shape (`tf.io.decode_json_example`).

    >>> js = '{"features": {"feature": {"a": {"int64List": {"value": ["1", 2]}}}}}'
    >>> ex = tg.train.Example.FromString(tg.io.decode_json_example(js).numpy())
    >>> list(ex.features.feature["a"].int64_list.value)
    [1, 2]
    """
    who = "tf.io.decode_json_example"

    def convert(raw):
        try:
            obj = json.loads(raw.decode("utf-8"))
            return _json_message(obj, _example.Example, "Example").SerializeToString()
        except (ValueError, TypeError, UnicodeDecodeError) as e:
            raise InvalidArgumentError(f"{who}: Error while parsing JSON: {e}") from None
    return _map(convert, _strings(json_examples, who))
