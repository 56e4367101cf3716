"""`tg.strings`: TensorFlow's common string functions on `tg.string` tensors.

String tensors hold bytes (str is UTF-8 encoded) in host memory, on the CPU whatever the
current device, as TensorFlow keeps them; they have no gradient. Every function here is
elementwise over numpy object arrays.

>>> tg.strings.upper(tg.constant(["ab", "c"])).numpy()
array([b'AB', b'C'], dtype=object)
"""
import re
import sys

import numpy as np

from . import backends as _backend
from .core import dtypes
from .core.tensor import Tensor, _leaving, _thread, convert_to_tensor

__all__ = ["length", "lower", "upper", "strip", "join", "reduce_join", "regex_replace",
           "regex_full_match", "to_number", "as_string", "substr", "split", "bytes_split",
           "unicode_decode", "unicode_encode", "unicode_split", "to_hash_bucket_fast",
           "to_hash_bucket", "to_hash_bucket_strong", "ngrams", "unicode_transcode",
           "unicode_decode_with_offsets", "unicode_split_with_offsets", "unsorted_segment_join"]


def _strings(x, who):
    t = convert_to_tensor(x)
    if not t.dtype.is_string:
        raise TypeError(f"tg.strings.{who}: expected a tg.string tensor (text), got "
                        f"{t.dtype.name} of shape {t.shape}; use tg.strings.as_string to "
                        "format numbers")
    if _thread.tracers:  # computed on the host from the value, not by a recorded op: inside a
        _leaving(t)      # tg.function the trace guards the value, so a new one retraces (the
    return t._data      # result is never a constant of the first call's text)


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


# -- splitting: a scalar gives a 1-D tensor, a tensor of rank N a RaggedTensor of ragged rank N ---

def _ragged_pieces(arr, pieces_of, dtype):
    """TF's shape rule for the splitting functions: `pieces_of(b)` lists the pieces of one
    string; a scalar input gives them as a 1-D tensor, an input of rank N a RaggedTensor whose
    N outer dimensions are the input's (uniform) and whose last one is ragged."""
    from .ragged import RaggedTensor
    if arr.ndim == 0:
        return _pieces_tensor(pieces_of(arr.item()), dtype)
    rows = [pieces_of(b) for b in arr.ravel()]
    flat = _pieces_tensor([p for row in rows for p in row], dtype)
    out = RaggedTensor.from_row_lengths(flat, [len(row) for row in rows])
    for d in range(arr.ndim - 1, 0, -1):  # the outer dimensions, uniform
        n = int(np.prod(arr.shape[:d]))
        out = RaggedTensor.from_row_lengths(out, [arr.shape[d]] * n)
    return out


def _pieces_tensor(pieces, dtype):
    if dtype is object:
        flat = np.empty(len(pieces), dtype=object)
        flat[:] = pieces
        return _text(flat)
    return convert_to_tensor(np.asarray(pieces, dtype=dtype).reshape(len(pieces)))


def _is_ragged(x):
    """Whether `x` is a tg.RaggedTensor (none exists before tapegpu.ragged is imported)."""
    ragged = sys.modules.get("tapegpu.ragged")
    return ragged is not None and isinstance(x, ragged.RaggedTensor)


def _dense_strings(x, who):
    if _is_ragged(x):  # the functions that take ragged inputs handle them before
        raise TypeError(f"tg.strings.{who}: RaggedTensor inputs are not supported; pass its "
                        "flat_values and rebuild with with_flat_values")
    return _strings(x, who)


def split(input, sep=None, maxsplit=-1, name=None):  # noqa: A002
    """Splits each string at `sep` (TF's `tf.strings.split`). With `sep` None or empty,
    runs of ASCII whitespace separate and no piece is empty (but the remainder after
    `maxsplit` splits, as TF); otherwise every `sep` separates (`"a,,b"` gives `a`, ``, `b`).
    At most `maxsplit` splits when it is not -1. A scalar gives
    a 1-D tensor, a tensor of rank N a `tg.RaggedTensor` of ragged rank N, a RaggedTensor one
    more ragged dimension (its flat values split).

    >>> tg.strings.split(tg.constant("hello  world")).numpy()
    array([b'hello', b'world'], dtype=object)
    >>> tg.strings.split(tg.constant(["a,b", "c"]), sep=",").to_list()
    [[b'a', b'b'], [b'c']]
    """
    if _is_ragged(input):  # split the flat values: one more ragged dimension
        return input.with_flat_values(split(input.flat_values, sep, maxsplit))
    arr = _dense_strings(input, "split")
    if isinstance(sep, Tensor):
        sep = sep.numpy().item() if sep.ndim == 0 else None
    sep = sep.encode("utf-8") if isinstance(sep, str) else sep
    if sep is not None and not isinstance(sep, bytes):
        raise TypeError(f"tg.strings.split: sep must be a string or None, got {sep!r}")
    maxsplit = int(maxsplit)
    if sep:
        return _ragged_pieces(arr, lambda b: b.split(sep, maxsplit), object)
    return _ragged_pieces(arr, lambda b: _split_whitespace(b, maxsplit), object)


_WHITESPACE = b" \t\n\v\f\r"


def _split_whitespace(b, maxsplit):
    """TF's whitespace split (StringSplitV2 with an empty sep): tokens between runs of ASCII
    whitespace; after `maxsplit` tokens the rest (leading whitespace removed) is the last
    piece, even when empty; `maxsplit=0` keeps the string as it is."""
    if maxsplit == 0:
        return [b]
    out, rest = [], b.lstrip(_WHITESPACE)
    while rest:
        n = 0
        while n < len(rest) and rest[n] not in _WHITESPACE:
            n += 1
        out.append(rest[:n])
        rest = rest[n:].lstrip(_WHITESPACE)
        if 0 < maxsplit == len(out):
            out.append(rest)
            break
    return out


def bytes_split(input, name=None):  # noqa: A002
    """Splits each string into its bytes (one-byte strings); the shape rule of `split`.

    >>> tg.strings.bytes_split(tg.constant("abc")).numpy()
    array([b'a', b'b', b'c'], dtype=object)
    """
    if _is_ragged(input):
        return input.with_flat_values(bytes_split(input.flat_values))
    arr = _dense_strings(input, "bytes_split")
    return _ragged_pieces(arr, lambda b: [b[i:i + 1] for i in range(len(b))], object)


# -- Unicode --------------------------------------------------------------------------------------

_ENCODINGS = {"UTF-8": "utf-8", "UTF-16-BE": "utf-16-be", "UTF-32-BE": "utf-32-be"}
_ERRORS = ("strict", "replace", "ignore")


def _codec(encoding, errors, who, arg):
    if encoding not in _ENCODINGS:
        raise ValueError(f"tg.strings.{who}: {arg} must be one of {sorted(_ENCODINGS)}, got "
                         f"{encoding!r}")
    if errors not in _ERRORS:
        raise ValueError(f"tg.strings.{who}: errors must be one of {_ERRORS}, got {errors!r}")
    return _ENCODINGS[encoding]


def _is_control(cp):
    return cp < 0x20 or 0x7F <= cp < 0xA0


def _code_points(b, codec, errors, replacement_char, replace_control, who,
                 with_offsets=False):
    """The code points of the bytes `b` in `codec` (and each one's byte offset with
    `with_offsets`); each maximal invalid subsequence is an error (`strict`), one
    `replacement_char` (`replace`) or dropped (`ignore`)."""
    from .ops.registry import InvalidArgumentError
    out, offsets, pos = [], [], 0

    def take(chunk, start):
        for ch in chunk:
            out.append(ord(ch))
            offsets.append(start)
            start += len(ch.encode(codec))
    while True:
        try:
            take(b[pos:].decode(codec), pos)
            break
        except UnicodeDecodeError as e:
            take(b[pos:pos + e.start].decode(codec), pos)
            if errors == "strict":
                raise InvalidArgumentError(f"tg.strings.{who}: invalid formatting on input "
                                           f"string {b!r} ({e.reason} at byte "
                                           f"{pos + e.start})") from None
            if errors == "replace":
                out.append(int(replacement_char))
                offsets.append(pos + e.start)
            pos += e.end
    if replace_control:
        out = [int(replacement_char) if _is_control(c) else c for c in out]
    return (out, offsets) if with_offsets else out


def unicode_decode(input, input_encoding, errors="replace", replacement_char=65533,
                   replace_control_characters=False, name=None):  # noqa: A002
    """The Unicode code points (int32) of each string, decoded from `input_encoding`
    ('UTF-8', 'UTF-16-BE', 'UTF-32-BE'). Invalid bytes raise (`errors='strict'`), become
    `replacement_char` (`'replace'`) or are dropped (`'ignore'`). A scalar gives a 1-D tensor,
    a tensor of rank N a `tg.RaggedTensor`.

    >>> tg.strings.unicode_decode(tg.constant("h\\u00e9"), "UTF-8").numpy()
    array([104, 233], dtype=int32)
    """
    codec = _codec(input_encoding, errors, "unicode_decode", "input_encoding")
    if _is_ragged(input):
        return input.with_flat_values(unicode_decode(
            input.flat_values, input_encoding, errors, replacement_char,
            replace_control_characters))
    arr = _dense_strings(input, "unicode_decode")
    return _ragged_pieces(arr, lambda b: _code_points(
        b, codec, errors, replacement_char, replace_control_characters, "unicode_decode"),
        np.int32)


def unicode_split(input, input_encoding, errors="replace", replacement_char=65533,
                  name=None):  # noqa: A002
    """Splits each string into its characters (each a string in `input_encoding`); invalid
    bytes as in `unicode_decode`. The shape rule of `split`.

    >>> tg.strings.unicode_split(tg.constant("h\\u00e9"), "UTF-8").numpy()
    array([b'h', b'\\xc3\\xa9'], dtype=object)
    """
    codec = _codec(input_encoding, errors, "unicode_split", "input_encoding")
    if _is_ragged(input):
        return input.with_flat_values(unicode_split(input.flat_values, input_encoding, errors,
                                                    replacement_char))
    arr = _dense_strings(input, "unicode_split")
    return _ragged_pieces(arr, lambda b: [chr(c).encode(codec) for c in _code_points(
        b, codec, errors, replacement_char, False, "unicode_split")], object)


def _encode_one(codes, codec, errors, replacement_char):
    from .ops.registry import InvalidArgumentError
    chars = []
    for c in codes:
        c = int(c)
        if 0 <= c <= 0x10FFFF and not 0xD800 <= c <= 0xDFFF:
            chars.append(chr(c))
        elif errors == "strict":
            raise InvalidArgumentError(f"tg.strings.unicode_encode: {c} is not a valid Unicode "
                                       "code point")
        elif errors == "replace":
            chars.append(chr(int(replacement_char)))
    return "".join(chars).encode(codec)


def unicode_encode(input, output_encoding, errors="replace", replacement_char=65533,
                   name=None):  # noqa: A002
    """Encodes code points (an int32 tensor whose last axis holds each string's characters,
    or a `tg.RaggedTensor`) into strings in `output_encoding`; the result has one rank less.
    Invalid code points raise (`errors='strict'`), become `replacement_char` or are dropped.

    >>> tg.strings.unicode_encode(tg.constant([104, 233]), "UTF-8").numpy()
    b'h\\xc3\\xa9'
    """
    from .ragged import RaggedTensor
    codec = _codec(output_encoding, errors, "unicode_encode", "output_encoding")
    if isinstance(input, RaggedTensor):
        if isinstance(input.values, RaggedTensor):  # encode the inner rows, keep the outer
            return RaggedTensor.from_row_splits(
                unicode_encode(input.values, output_encoding, errors, replacement_char),
                input.row_splits)
        return _pieces_tensor([_encode_one(r, codec, errors, replacement_char)
                               for r in input.to_list()], object)
    t = convert_to_tensor(input)
    if t.dtype.is_string or t.dtype.is_floating or t.ndim == 0:
        raise TypeError(f"tg.strings.unicode_encode: input must be an integer tensor of rank "
                        f">= 1 (code points) or a RaggedTensor, got {t.dtype.name} of shape "
                        f"{t.shape}")
    a = t.numpy()
    flat = a.reshape(-1, a.shape[-1])
    out = np.empty(flat.shape[0], dtype=object)
    out[:] = [_encode_one(row, codec, errors, replacement_char) for row in flat]
    return _text(out.reshape(a.shape[:-1]))


# -- hashing: FarmHash's Fingerprint64 (farmhashna::Hash64), as TF's to_hash_bucket_fast ---------

_M = (1 << 64) - 1
_K0, _K1, _K2 = 0xc3a5c85c97cb3127, 0xb492b66fbe98f273, 0x9ae16a3b2f90404f


def _rot(v, s):
    return ((v >> s) | (v << (64 - s))) & _M


def _f64(b, i):
    return int.from_bytes(b[i:i + 8], "little")


def _f32(b, i):
    return int.from_bytes(b[i:i + 4], "little")


def _mix(v):
    return v ^ (v >> 47)


def _len16(u, v, mul):
    a = _mix(((u ^ v) * mul) & _M)
    b = _mix(((v ^ a) * mul) & _M)
    return (b * mul) & _M


def _weak32(b, i, a, c):
    """FarmHash's WeakHashLen32WithSeeds over b[i:i + 32] and seeds a, c."""
    w, x, y, z = _f64(b, i), _f64(b, i + 8), _f64(b, i + 16), _f64(b, i + 24)
    a = (a + w) & _M
    c = _rot((c + a + z) & _M, 21)
    d = a
    a = (a + x + y) & _M
    c = (c + _rot(a, 44)) & _M
    return (a + z) & _M, (c + d) & _M


def _hash_short(s, n):
    if n > 32:  # 33 to 64 bytes
        mul = (_K2 + 2 * n) & _M
        a, b = (_f64(s, 0) * _K2) & _M, _f64(s, 8)
        c, d = (_f64(s, n - 8) * mul) & _M, (_f64(s, n - 16) * _K2) & _M
        y = (_rot((a + b) & _M, 43) + _rot(c, 30) + d) & _M
        z = _len16(y, (a + _rot((b + _K2) & _M, 18) + c) & _M, mul)
        e, f = (_f64(s, 16) * mul) & _M, _f64(s, 24)
        g, h = ((y + _f64(s, n - 32)) * mul) & _M, ((z + _f64(s, n - 24)) * mul) & _M
        return _len16((_rot((e + f) & _M, 43) + _rot(g, 30) + h) & _M,
                      (e + _rot((f + a) & _M, 18) + g) & _M, mul)
    if n > 16:  # 17 to 32 bytes
        mul = (_K2 + 2 * n) & _M
        a, b = (_f64(s, 0) * _K1) & _M, _f64(s, 8)
        c, d = (_f64(s, n - 8) * mul) & _M, (_f64(s, n - 16) * _K2) & _M
        return _len16((_rot((a + b) & _M, 43) + _rot(c, 30) + d) & _M,
                      (a + _rot((b + _K2) & _M, 18) + c) & _M, mul)
    if n >= 8:
        mul = (_K2 + 2 * n) & _M
        a, b = (_f64(s, 0) + _K2) & _M, _f64(s, n - 8)
        c = (_rot(b, 37) * mul + a) & _M
        d = ((_rot(a, 25) + b) * mul) & _M
        return _len16(c, d, mul)
    if n >= 4:
        mul = (_K2 + 2 * n) & _M
        return _len16((n + (_f32(s, 0) << 3)) & _M, _f32(s, n - 4), mul)
    if n > 0:
        y = s[0] + (s[n >> 1] << 8)
        z = n + (s[n - 1] << 2)
        return (_mix(((y * _K2) ^ (z * _K0)) & _M) * _K2) & _M
    return _K2


def _fingerprint64(s):
    """FarmHash's Fingerprint64 of the bytes `s` (farmhashna::Hash64), as an int in
    [0, 2**64): the hash of TF's `to_hash_bucket_fast`."""
    s, n = bytes(s), len(s)
    if n <= 64:
        return _hash_short(s, n)
    x = 81
    y = (81 * _K1 + 113) & _M
    z = (_mix((y * _K2 + 113) & _M) * _K2) & _M
    v = w = (0, 0)
    x = (x * _K2 + _f64(s, 0)) & _M
    end = ((n - 1) // 64) * 64
    i = 0
    while True:
        x = (_rot((x + y + v[0] + _f64(s, i + 8)) & _M, 37) * _K1) & _M
        y = (_rot((y + v[1] + _f64(s, i + 48)) & _M, 42) * _K1) & _M
        x ^= w[1]
        y = (y + v[0] + _f64(s, i + 40)) & _M
        z = (_rot((z + w[0]) & _M, 33) * _K1) & _M
        v = _weak32(s, i, (v[1] * _K1) & _M, (x + w[0]) & _M)
        w = _weak32(s, i + 32, (z + w[1]) & _M, (y + _f64(s, i + 16)) & _M)
        z, x = x, z
        i += 64
        if i == end:
            break
    mul = (_K1 + ((z & 0xFF) << 1)) & _M
    i = n - 64
    w0 = (w[0] + ((n - 1) & 63)) & _M
    v0 = (v[0] + w0) & _M
    w0 = (w0 + v0) & _M
    v, w = (v0, v[1]), (w0, w[1])
    x = (_rot((x + y + v[0] + _f64(s, i + 8)) & _M, 37) * mul) & _M
    y = (_rot((y + v[1] + _f64(s, i + 48)) & _M, 42) * mul) & _M
    x ^= (w[1] * 9) & _M
    y = (y + v[0] * 9 + _f64(s, i + 40)) & _M
    z = (_rot((z + w[0]) & _M, 33) * mul) & _M
    v = _weak32(s, i, (v[1] * mul) & _M, (x + w[0]) & _M)
    w = _weak32(s, i + 32, (z + w[1]) & _M, (y + _f64(s, i + 16)) & _M)
    z, x = x, z
    return _len16((_len16(v[0], w[0], mul) + _mix(y) * _K0 + z) & _M,
                  (_len16(v[1], w[1], mul) + x) & _M, mul)


def to_hash_bucket_fast(input, num_buckets, name=None):  # noqa: A002
    """Hashes each string to a bucket in `[0, num_buckets)` (int64): FarmHash's Fingerprint64
    modulo `num_buckets`, the same buckets as TensorFlow's.

    >>> tg.strings.to_hash_bucket_fast(tg.constant(["Hello", "TensorFlow", "2.x"]), 3).numpy()
    array([0, 2, 2])
    """
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, (int, np.integer)) or \
            num_buckets < 1:
        raise ValueError(f"tg.strings.to_hash_bucket_fast: num_buckets must be an int >= 1, "
                         f"got {num_buckets!r}")
    if _is_ragged(input):
        return input.with_flat_values(to_hash_bucket_fast(input.flat_values, num_buckets))
    a = _dense_strings(input, "to_hash_bucket_fast")
    return convert_to_tensor(_map(lambda b: _fingerprint64(b) % int(num_buckets), a, np.int64))



def unicode_decode_with_offsets(input, input_encoding, errors="replace", replacement_char=65533,
                                replace_control_characters=False, name=None):  # noqa: A002
    """`unicode_decode`'s code points and, for each, the byte offset where it starts in its
    string (int64), as `tf.strings.unicode_decode_with_offsets`.

    >>> cps, offsets = tg.strings.unicode_decode_with_offsets(tg.constant("h\u00e9!"), "UTF-8")
    >>> cps.numpy(), offsets.numpy()
    (array([104, 233,  33], dtype=int32), array([0, 1, 3]))
    """
    codec = _codec(input_encoding, errors, "unicode_decode_with_offsets", "input_encoding")
    if _is_ragged(input):
        cps, offsets = unicode_decode_with_offsets(input.flat_values, input_encoding, errors,
                                                   replacement_char, replace_control_characters)
        return input.with_flat_values(cps), input.with_flat_values(offsets)
    arr = _dense_strings(input, "unicode_decode_with_offsets")

    def both(b):
        return _code_points(b, codec, errors, replacement_char, replace_control_characters,
                            "unicode_decode_with_offsets", with_offsets=True)
    return (_ragged_pieces(arr, lambda b: both(b)[0], np.int32),
            _ragged_pieces(arr, lambda b: both(b)[1], np.int64))


def unicode_split_with_offsets(input, input_encoding, errors="replace", replacement_char=65533,
                               name=None):  # noqa: A002
    """`unicode_split`'s characters and the byte offset of each in its string (int64).

    >>> chars, offsets = tg.strings.unicode_split_with_offsets(tg.constant("\u00e9a"), "UTF-8")
    >>> chars.numpy(), offsets.numpy()
    (array([b'\\xc3\\xa9', b'a'], dtype=object), array([0, 2]))
    """
    codec = _codec(input_encoding, errors, "unicode_split_with_offsets", "input_encoding")
    if _is_ragged(input):
        chars, offsets = unicode_split_with_offsets(input.flat_values, input_encoding, errors,
                                                    replacement_char)
        return input.with_flat_values(chars), input.with_flat_values(offsets)
    arr = _dense_strings(input, "unicode_split_with_offsets")

    def both(b):
        return _code_points(b, codec, errors, replacement_char, False,
                            "unicode_split_with_offsets", with_offsets=True)
    return (_ragged_pieces(arr, lambda b: [chr(c).encode(codec) for c in both(b)[0]], object),
            _ragged_pieces(arr, lambda b: both(b)[1], np.int64))


def unicode_transcode(input, input_encoding, output_encoding, errors="replace",
                      replacement_char=65533, replace_control_characters=False,
                      name=None):  # noqa: A002
    """Re-encodes each string from `input_encoding` to `output_encoding` ('UTF-8',
    'UTF-16-BE', 'UTF-32-BE'); invalid input as in `unicode_decode`.

    >>> tg.strings.unicode_transcode(tg.constant("h\u00e9"), "UTF-8", "UTF-16-BE").numpy()
    b'\\x00h\\x00\\xe9'
    """
    src = _codec(input_encoding, errors, "unicode_transcode", "input_encoding")
    dst = _codec(output_encoding, errors, "unicode_transcode", "output_encoding")
    if _is_ragged(input):
        return input.with_flat_values(unicode_transcode(
            input.flat_values, input_encoding, output_encoding, errors, replacement_char,
            replace_control_characters))
    a = _dense_strings(input, "unicode_transcode")
    return _text(_map(lambda b: "".join(chr(c) for c in _code_points(
        b, src, errors, replacement_char, replace_control_characters,
        "unicode_transcode")).encode(dst), a))


def ngrams(data, ngram_width, separator=" ", pad_values=None, padding_width=None,
           preserve_short_sequences=False, name=None):
    """The n-grams of the innermost dimension of `data` (TF's `tf.strings.ngrams`): for each
    width in `ngram_width` (an int or a sequence), every window of that many tokens joined by
    `separator`. With `pad_values` (one string, or a (left, right) pair) each row is padded
    by `padding_width` tokens (default width - 1) on both sides; `preserve_short_sequences`
    makes a row too short for any n-gram give one of all its tokens. A dense input gives a
    dense result, a RaggedTensor a RaggedTensor.

    >>> tg.strings.ngrams(tg.constant(["a", "b", "c"]), 2).numpy()
    array([b'a b', b'b c'], dtype=object)
    >>> tg.strings.ngrams(tg.constant(["a", "b"]), 3, pad_values="#").numpy()
    array([b'# # a', b'# a b', b'a b #', b'b # #'], dtype=object)
    """
    from .ragged import RaggedTensor
    widths = list(ngram_width) if isinstance(ngram_width, (list, tuple)) else [ngram_width]
    if any(int(w) < 1 for w in widths):
        raise ValueError(f"All ngram_widths must be greater than 0. Got {ngram_width}")
    if padding_width is not None and padding_width < 1:
        raise ValueError("padding_width must be greater than 0.")
    if padding_width is not None and pad_values is None:
        raise ValueError("pad_values must be provided if padding_width is set.")
    if pad_values is None:
        left = right = b""
        pad = 0
    else:
        left, right = pad_values if isinstance(pad_values, (list, tuple)) else \
            (pad_values, pad_values)
        left, right = (v.encode("utf-8") if isinstance(v, str) else bytes(v)
                       for v in (left, right))
        pad = -1 if padding_width is None else int(padding_width)
    sep = separator.encode("utf-8") if isinstance(separator, str) else bytes(separator)

    def row_ngrams(row):
        out = []
        for n in widths:
            p = min(n - 1 if pad < 0 else pad, n - 1)
            seq = [left] * p + list(row) + [right] * p
            out.extend(sep.join(seq[i:i + n]) for i in range(len(seq) - n + 1))
        if preserve_short_sequences and not out and len(row):
            p = max(pad, 0)
            out.append(sep.join([left] * p + list(row) + [right] * p))
        return out

    if isinstance(data, RaggedTensor):
        if isinstance(data.values, RaggedTensor):
            return RaggedTensor.from_row_splits(
                ngrams(data.values, ngram_width, separator, pad_values, padding_width,
                       preserve_short_sequences), data.row_splits)
        rows = [row_ngrams([_bytes(t) for t in r]) for r in data.to_list()]
        return RaggedTensor.from_row_lengths(
            _pieces_tensor([g for r in rows for g in r], object), [len(r) for r in rows])
    a = _strings(data, "ngrams")
    if a.ndim == 0:
        raise ValueError("tg.strings.ngrams: data must have rank > 0")
    rows = [row_ngrams(list(r)) for r in a.reshape(-1, a.shape[-1])]
    flat = _pieces_tensor([g for r in rows for g in r], object)
    return _text(flat.numpy().reshape(a.shape[:-1] + (-1,)))


def _bytes(t):
    return t.encode("utf-8") if isinstance(t, str) else bytes(t)


def unsorted_segment_join(inputs, segment_ids, num_segments, separator="", name=None):
    """Joins the strings of `inputs` by segment (`tf.strings.unsorted_segment_join`): output
    row k joins, in order, the rows of `inputs` whose `segment_ids` (a prefix of its shape)
    are k; empty segments give ''.

    >>> tg.strings.unsorted_segment_join(tg.constant(["a", "b", "c"]), [1, 0, 1], 2,
    ...                                  separator=":").numpy()
    array([b'b', b'a:c'], dtype=object)
    """
    from .ops.registry import InvalidArgumentError
    a = _strings(inputs, "unsorted_segment_join")
    ids = np.asarray(segment_ids.numpy() if isinstance(segment_ids, Tensor) else segment_ids)
    n = int(num_segments.numpy() if isinstance(num_segments, Tensor) else num_segments)
    if ids.shape != a.shape[:ids.ndim]:
        raise InvalidArgumentError(f"tg.strings.unsorted_segment_join: segment_ids.shape "
                                   f"{ids.shape} must be a prefix of inputs.shape {a.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise InvalidArgumentError(f"tg.strings.unsorted_segment_join: segment_ids must be in "
                                   f"[0, {n}), got values in [{ids.min()}, {ids.max()}]")
    sep = separator.encode("utf-8") if isinstance(separator, str) else bytes(separator)
    inner = a.shape[ids.ndim:]
    rows = a.reshape((-1,) + inner)
    out = np.empty((n,) + inner, dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = b""
    parts = {}
    for k, seg in enumerate(ids.ravel()):
        parts.setdefault(int(seg), []).append(np.asarray(rows[k], dtype=object))
    for seg, members in parts.items():
        for idx in np.ndindex(inner):
            out[(seg,) + idx] = sep.join(m[idx] for m in members)
    return _text(out)


def _murmur64(s, seed=0xDECAFCAFFE):
    """TensorFlow's own Hash64 (MurmurHash64A with seed 0xDECAFCAFFE), of to_hash_bucket."""
    m, r = 0xc6a4a7935bd1e995, 47
    n = len(s)
    h = (seed ^ (n * m)) & _M
    full = n - n % 8
    for i in range(0, full, 8):
        k = (_f64(s, i) * m) & _M
        k ^= k >> r
        k = (k * m) & _M
        h = ((h ^ k) * m) & _M
    tail = s[full:]
    if tail:
        for j in range(len(tail) - 1, -1, -1):
            h ^= tail[j] << (8 * j)
        h = (h * m) & _M
    h ^= h >> r
    h = (h * m) & _M
    return h ^ (h >> r)


def _siphash24(k0, k1, s):
    """SipHash-2-4 of the bytes `s` with the key (k0, k1) (TF's StrongKeyedHash)."""
    def rotl(x, b):
        return ((x << b) | (x >> (64 - b))) & _M
    v = [k0 ^ 0x736f6d6570736575, k1 ^ 0x646f72616e646f6d, k0 ^ 0x6c7967656e657261,
         k1 ^ 0x7465646279746573]

    def rounds(count):
        for _ in range(count):
            v[0] = (v[0] + v[1]) & _M
            v[1] = rotl(v[1], 13) ^ v[0]
            v[0] = rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & _M
            v[3] = rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & _M
            v[3] = rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & _M
            v[1] = rotl(v[1], 17) ^ v[2]
            v[2] = rotl(v[2], 32)
    n = len(s)
    full = n - n % 8
    for i in range(0, full, 8):
        word = _f64(s, i)
        v[3] ^= word
        rounds(2)
        v[0] ^= word
    last = ((n & 0xFF) << 56) | int.from_bytes(s[full:], "little")
    v[3] ^= last
    rounds(2)
    v[0] ^= last
    v[2] ^= 0xFF
    rounds(4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def _buckets(num_buckets, who):
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, (int, np.integer)) or \
            num_buckets < 1:
        raise ValueError(f"tg.strings.{who}: num_buckets must be an int >= 1, got "
                         f"{num_buckets!r}")
    return int(num_buckets)


def to_hash_bucket(input, num_buckets, name=None):  # noqa: A002
    """Hashes each string to a bucket in `[0, num_buckets)` (int64) with TensorFlow's legacy
    Hash64 (MurmurHash64A), the same buckets as `tf.strings.to_hash_bucket`.

    >>> tg.strings.to_hash_bucket(tg.constant(["Hello", "TensorFlow", "2.x"]), 3).numpy()
    array([2, 0, 1])
    """
    n = _buckets(num_buckets, "to_hash_bucket")
    if _is_ragged(input):
        return input.with_flat_values(to_hash_bucket(input.flat_values, num_buckets))
    a = _dense_strings(input, "to_hash_bucket")
    return convert_to_tensor(_map(lambda b: _murmur64(b) % n, a, np.int64))


def to_hash_bucket_strong(input, num_buckets, key, name=None):  # noqa: A002
    """Hashes each string to a bucket in `[0, num_buckets)` (int64) with SipHash-2-4 keyed by
    `key` (two uint64 values), the same buckets as `tf.strings.to_hash_bucket_strong`.

    >>> tg.strings.to_hash_bucket_strong(tg.constant(["Hello", "TF"]), 3, [1, 2]).numpy()
    array([2, 0])
    """
    n = _buckets(num_buckets, "to_hash_bucket_strong")
    if len(key) != 2:
        raise ValueError(f"tg.strings.to_hash_bucket_strong: key must hold 2 elements, got "
                         f"{list(key)}")
    k0, k1 = (int(k) & _M for k in key)
    if _is_ragged(input):
        return input.with_flat_values(to_hash_bucket_strong(input.flat_values, num_buckets, key))
    a = _dense_strings(input, "to_hash_bucket_strong")
    return convert_to_tensor(_map(lambda b: _siphash24(k0, k1, b) % n, a, np.int64))
