"""`tg.compat`, as `tf.compat`: bytes/text helpers, shape dimensions, and `tg.compat.v1`.

`tg.compat.v1` answers TF1's names: a name TF 2 also has at the same path (`reduce_mean`,
`nn.relu`, `data.Dataset`, `float32`, ...) is tapegpu's TF2 object, `logging` is TF1's logging
module on Python's `logging`, TF1's switches of TF2 behaviour (`enable_eager_execution`,
`enable_v2_behavior`, ...) are accepted, and the graph-mode API (`Session`, `placeholder`,
`get_variable`, `global_variables_initializer`, ...) raises NotImplementedError saying what to use
instead. `tg.compat.v2` is `tg`.

>>> tg.compat.v1.nn.relu is tg.nn.relu
True
>>> tg.compat.as_bytes("abc")
b'abc'
"""
import numbers as _numbers
import os as _os
import sys as _sys

import numpy as _np

from . import private_paths, surface, tf_names  # noqa: F401
from .v1 import v1  # noqa: F401

bytes_or_text_types = (bytes, str)
integral_types = (_numbers.Integral, _np.integer)
real_types = (_numbers.Real, _np.integer, _np.floating)
complex_types = (_numbers.Complex, _np.number)


def as_bytes(bytes_or_text, encoding="utf-8"):
    """`bytes_or_text` as bytes (text encoded with `encoding`), as `tf.compat.as_bytes`.

    >>> tg.compat.as_bytes("é")
    b'\\xc3\\xa9'
    """
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    raise TypeError(f"as_bytes: expected binary or unicode string, got {bytes_or_text!r}")


def as_text(bytes_or_text, encoding="utf-8"):
    """`bytes_or_text` as str (bytes decoded with `encoding`), as `tf.compat.as_text`.

    >>> tg.compat.as_text(b"abc")
    'abc'
    """
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text.decode(encoding)
    raise TypeError(f"as_text: expected binary or unicode string, got {bytes_or_text!r}")


as_str = as_text


def as_str_any(value, encoding="utf-8"):
    """`str(value)`, bytes decoded first, as `tf.compat.as_str_any`.

    >>> tg.compat.as_str_any(3)
    '3'
    """
    return as_text(value, encoding) if isinstance(value, bytes) else str(value)


def path_to_str(path):
    """A path-like object's string (`os.fspath`), anything else unchanged, as
    `tf.compat.path_to_str`.

    >>> import pathlib; tg.compat.path_to_str(pathlib.Path("/tmp"))
    '/tmp'
    """
    return _os.fspath(path) if hasattr(path, "__fspath__") else path


def dimension_value(dimension):
    """The int (or None) of a shape's dimension, as `tf.compat.dimension_value`.

    >>> tg.compat.dimension_value(tg.TensorShape([2, None])[0])
    2
    """
    return getattr(dimension, "value", dimension)


def dimension_at_index(shape, index):
    """Dimension `index` of `shape` (None where the rank is unknown), as
    `tf.compat.dimension_at_index`.

    >>> tg.compat.dimension_at_index(tg.TensorShape([2, 3]), 1)
    3
    """
    dims = getattr(shape, "dims", shape)
    if dims is None:
        return None
    return dimension_value(list(dims)[index])


def forward_compatible(year, month, day):
    """Whether the ops are compatible with graphs produced after the date: always True
    (tapegpu has no GraphDef producers to stay compatible with).

    >>> tg.compat.forward_compatible(2021, 1, 1)
    True
    """
    return True


class forward_compatibility_horizon:  # noqa: N801  (TF's name)
    """Context manager moving the forward-compatibility date (accepted; nothing to move).

    >>> with tg.compat.forward_compatibility_horizon(2030, 1, 1):
    ...     tg.compat.forward_compatible(2030, 1, 1)
    True
    """

    def __init__(self, year, month, day):
        self.date = (year, month, day)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


v2 = _sys.modules["tapegpu"]
