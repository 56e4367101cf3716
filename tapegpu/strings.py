"""`tg.strings`: TensorFlow's common string functions on `tg.string` tensors.

String tensors hold bytes (str is UTF-8 encoded) in host memory, on the CPU whatever the
current device, as TensorFlow keeps them; they have no gradient. Every function here is
elementwise over numpy object arrays.

>>> tg.strings.upper(tg.constant(["ab", "c"])).numpy()
array([b'AB', b'C'], dtype=object)
"""
import re

import numpy as np

from . import backends as _backend
from .core import dtypes
from .core.tensor import Tensor, convert_to_tensor

__all__ = ["length", "lower", "upper", "strip", "join", "reduce_join", "regex_replace",
           "regex_full_match", "to_number", "as_string", "substr"]


def _strings(x, who):
    t = convert_to_tensor(x)
    if not t.dtype.is_string:
        raise TypeError(f"tg.strings.{who}: expected a tg.string tensor (text), got "
                        f"{t.dtype.name} of shape {t.shape}; use tg.strings.as_string to "
                        "format numbers")
    return t._data


def _text(arr):
    return Tensor(arr, _backend.lookup("cpu"))


def _map(fn, arr, out=object):
    flat = np.empty(arr.size, dtype=out)
    flat[:] = [fn(v) for v in arr.ravel()]
    return flat.reshape(arr.shape)


def length(input, unit="BYTE", name=None):  # noqa: A002
    """The length of each string, in bytes (`unit='BYTE'`) or in Unicode code points
    (`'UTF8_CHAR'`), as int32.

    >>> tg.strings.length(tg.constant(["abc", "é"])).numpy()
    array([3, 2], dtype=int32)
    """
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise ValueError(f"tg.strings.length: unit must be 'BYTE' or 'UTF8_CHAR', got {unit!r}")
    a = _strings(input, "length")
    count = len if unit == "BYTE" else (lambda b: len(b.decode("utf-8")))
    return convert_to_tensor(_map(count, a, np.int32))


def lower(input, encoding="", name=None):  # noqa: A002
    """Each string in lower case (ASCII letters, or all letters with `encoding='utf-8'`)."""
    a = _strings(input, "lower")
    fn = (lambda b: b.decode("utf-8").lower().encode("utf-8")) if encoding else bytes.lower
    return _text(_map(fn, a))


def upper(input, encoding="", name=None):  # noqa: A002
    """Each string in upper case (ASCII letters, or all letters with `encoding='utf-8'`)."""
    a = _strings(input, "upper")
    fn = (lambda b: b.decode("utf-8").upper().encode("utf-8")) if encoding else bytes.upper
    return _text(_map(fn, a))


def strip(input, name=None):  # noqa: A002
    """Each string without leading and trailing whitespace."""
    return _text(_map(bytes.strip, _strings(input, "strip")))


def join(inputs, separator="", name=None):
    """The elementwise concatenation of the string tensors in `inputs` (broadcast), with
    `separator` between them.

    >>> tg.strings.join([tg.constant(["a", "b"]), tg.constant("x")], separator="-").numpy()
    array([b'a-x', b'b-x'], dtype=object)
    """
    arrays = [_strings(x, "join") for x in inputs]
    if not arrays:
        raise ValueError("tg.strings.join: inputs must hold at least one tensor")
    sep = separator.encode("utf-8") if isinstance(separator, str) else bytes(separator)
    parts = np.broadcast_arrays(*arrays)
    out = np.empty(parts[0].shape, dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = sep.join(p[idx] for p in parts)
    return _text(out)


def reduce_join(inputs, axis=None, keepdims=False, separator="", name=None):
    """Joins the strings along `axis` (all of them when None), with `separator`.

    >>> tg.strings.reduce_join(tg.constant([["a", "b"], ["c", "d"]]), axis=1).numpy()
    array([b'ab', b'cd'], dtype=object)
    """
    a = _strings(inputs, "reduce_join")
    sep = separator.encode("utf-8") if isinstance(separator, str) else bytes(separator)
    axes = tuple(range(a.ndim)) if axis is None else \
        tuple(ax % a.ndim for ax in ((axis,) if isinstance(axis, int) else axis))
    keep = [ax for ax in range(a.ndim) if ax not in axes]
    moved = np.transpose(a, keep + list(axes)).reshape(
        [a.shape[ax] for ax in keep] + [-1])
    out = np.empty(moved.shape[:-1], dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = sep.join(moved[idx])
    if keepdims:
        out = out.reshape([1 if ax in axes else a.shape[ax] for ax in range(a.ndim)])
    return _text(out)


def _pattern(p):
    return re.compile(p.encode("utf-8") if isinstance(p, str) else bytes(p))


def regex_replace(input, pattern, rewrite, replace_global=True, name=None):  # noqa: A002
    """Replaces the matches of `pattern` by `rewrite` (`\\1` names a group), every match or
    the first (`replace_global=False`). Python's `re` syntax, which agrees with TF's RE2 on
    the common patterns.

    >>> tg.strings.regex_replace(tg.constant("a1b22"), r"\\d+", "#").numpy()
    b'a#b#'
    """
    a = _strings(input, "regex_replace")
    pat = _pattern(pattern)
    rw = rewrite.encode("utf-8") if isinstance(rewrite, str) else bytes(rewrite)
    count = 0 if replace_global else 1
    return _text(_map(lambda b: pat.sub(rw, b, count=count), a))


def regex_full_match(input, pattern, name=None):  # noqa: A002
    """Whether each whole string matches `pattern` (bool)."""
    a = _strings(input, "regex_full_match")
    pat = _pattern(pattern)
    return convert_to_tensor(_map(lambda b: pat.fullmatch(b) is not None, a, np.bool_))


def to_number(string_tensor, out_type=dtypes.float32, name=None):
    """Parses each string as a number of `out_type` (float32 by default); a string that is
    not a number raises InvalidArgumentError naming it, as TF.

    >>> tg.strings.to_number(tg.constant(["1.5", "-2"])).numpy()
    array([ 1.5, -2. ], dtype=float32)
    """
    from .ops.registry import InvalidArgumentError
    a = _strings(string_tensor, "to_number")
    npd = dtypes.np_dtype(out_type)
    parse = float if npd.kind == "f" else int

    def one(b):
        try:
            return parse(b.decode("utf-8").strip())
        except ValueError:
            raise InvalidArgumentError(f"tg.strings.to_number: StringToNumberOp could not "
                                       f"correctly convert string: {b!r} to "
                                       f"{np.dtype(npd).name}") from None
    return convert_to_tensor(_map(one, a, npd))


def as_string(input, precision=-1, scientific=False, shortest=False, width=-1, fill="",
              name=None):  # noqa: A002
    """Formats each number as a string, as TF: floats with 6 decimals unless `precision`,
    `scientific` or `shortest` say otherwise, ints in decimal, bools as 'true'/'false'.

    >>> tg.strings.as_string(tg.constant([1.5, 2.0])).numpy()
    array([b'1.500000', b'2.000000'], dtype=object)
    """
    t = convert_to_tensor(input)
    a = t.numpy()
    if t.dtype.is_string:
        return t
    if a.dtype.kind == "b":
        fmt = lambda v: "true" if v else "false"  # noqa: E731
    elif a.dtype.kind in "iu":
        fmt = lambda v: f"{int(v)}"  # noqa: E731
    else:
        spec = "g" if shortest else "e" if scientific else "f"
        prec = "" if precision < 0 and shortest else f".{6 if precision < 0 else precision}"
        fmt = (lambda v: repr(float(v)).rstrip("0").rstrip(".") if shortest and precision < 0
               else format(float(v), prec + spec))
    pad = fill or " "
    out = _map(lambda v: (fmt(v).rjust(width, pad) if width > 0 else fmt(v)).encode(), a)
    return _text(out)


def substr(input, pos, len, unit="BYTE", name=None):  # noqa: A002
    """The substring of each string from `pos` (negative: from the end), `len` long."""
    a = _strings(input, "substr")

    def one(b):
        s = b if unit == "BYTE" else b.decode("utf-8")
        start = pos if pos >= 0 else builtins_len(s) + pos
        if not 0 <= start <= builtins_len(s):
            from .ops.registry import InvalidArgumentError
            raise InvalidArgumentError(f"tg.strings.substr: pos {pos} out of range for string "
                                       f"{b!r} of length {builtins_len(s)}")
        piece = s[start:start + len]
        return piece if unit == "BYTE" else piece.encode("utf-8")
    return _text(_map(one, a))


builtins_len = __builtins__["len"] if isinstance(__builtins__, dict) else __builtins__.len
