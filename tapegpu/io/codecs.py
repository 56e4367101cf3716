"""Whole-string codecs of `tg.io`: `encode_base64` / `decode_base64` (web-safe base64, as
TensorFlow's), `decode_compressed` (ZLIB, GZIP), and `matching_files` (glob).

>>> tg.io.encode_base64(tg.constant([b"\\xfb\\xff"])).numpy()
array([b'-_8'], dtype=object)
"""
import base64
import binascii
import gzip
import zlib

import numpy as np

from .. import backends as _backend
from ..core.tensor import Tensor, convert_to_tensor
from ..errors import InvalidArgumentError
from . import gfile as _gfile
from . import records as _records

__all__ = ["encode_base64", "decode_base64", "decode_compressed", "matching_files"]


def _strings(x, who):
    t = x if isinstance(x, Tensor) else convert_to_tensor(x)
    if not t.dtype.is_string:
        raise TypeError(f"{who}: expected a tg.string tensor, got {t.dtype.name}")
    return np.asarray(t._data, dtype=object)


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
