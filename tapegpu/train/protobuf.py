"""The protobuf wire format and the Python interface of protobuf's generated classes, for the
few messages tapegpu reads and writes (tapegpu/train/example.py: Example and its parts,
TensorProto): a message class is a field table over `Message`.

Wire format (protobuf encoding): a message is a sequence of (tag, value) pairs; a tag is the
varint `field_number << 3 | wire_type`; wire type 0 is a varint, 1 eight little-endian bytes,
2 a varint length then that many bytes (strings, bytes, sub-messages, packed repeated numbers),
5 four little-endian bytes. Repeated numbers are written packed (proto3) and read packed or not.
Fields are written in field-number order and map entries sorted by key (a deterministic
encoding); fields a message does not know are skipped on reading. Text (`str()`) is TF 2.21's
protobuf (upb) text format.

>>> from tapegpu.train.protobuf import packed_varints
>>> packed_varints(b"\\x01\\xac\\x02").tolist()
[1, 300]
"""
import operator
import struct

import numpy as np

__all__ = ["DecodeError", "Message", "RepeatedScalarContainer", "RepeatedCompositeContainer",
           "MessageMap", "packed_varints"]


class DecodeError(Exception):
    """Bytes that are not a valid encoding of the message (protobuf's `DecodeError`)."""


# -- wire format ---------------------------------------------------------------------------------

def _varint(n):
    """The varint encoding of a non-negative int below 2**64 (negative int64s are written as
    their two's complement, ten bytes)."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(buf, pos, end):
    result = shift = 0
    while True:
        if pos >= end:
            raise DecodeError("Truncated message: a varint runs past the end")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("Error parsing message: a varint is longer than 10 bytes")


def _signed64(n):
    n &= (1 << 64) - 1
    return n - (1 << 64) if n >= 1 << 63 else n


def _signed32(n):
    n &= (1 << 32) - 1
    return n - (1 << 32) if n >= 1 << 31 else n


def _fields(buf, pos=0, end=None):
    """Yields (field_number, wire_type, value) of the encoded message buf[pos:end]: an int for
    varints, bytes for the fixed and length-delimited types."""
    end = len(buf) if end is None else end
    while pos < end:
        tag, pos = _read_varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise DecodeError("Error parsing message: field number 0")
        if wire == 0:
            value, pos = _read_varint(buf, pos, end)
        elif wire == 1 or wire == 5:
            size = 8 if wire == 1 else 4
            if pos + size > end:
                raise DecodeError("Truncated message: a fixed-size field runs past the end")
            value, pos = bytes(buf[pos:pos + size]), pos + size
        elif wire == 2:
            size, pos = _read_varint(buf, pos, end)
            if pos + size > end:
                raise DecodeError("Truncated message: a length-delimited field runs past the end")
            value, pos = bytes(buf[pos:pos + size]), pos + size
        else:
            raise DecodeError(f"Error parsing message: wire type {wire} (groups or invalid)")
        yield number, wire, value


def _tag(number, wire):
    return _varint(number << 3 | wire)


def _delimited(number, payload):
    return _tag(number, 2) + _varint(len(payload)) + payload


# -- scalar kinds: (wire type of one value, packed?, check, encode one, decode one) ---------------

def _check_int(lo, hi):
    def check(v):  # anything with __index__ (bools and integer scalar tensors too, as
        #            protobuf takes them), never a float
        if isinstance(v, (float, np.floating, str, bytes)) or not hasattr(v, "__index__"):
            raise TypeError(f"{v!r} has type {type(v).__name__}, but expected one of: int")
        try:
            v = int(bool(v)) if getattr(getattr(v, "dtype", None), "is_bool", False) \
                else operator.index(v)  # a bool tensor (TensorFlow's TFRecord tutorial)
        except TypeError:
            raise TypeError(f"{v!r} has type {type(v).__name__}, but expected one of: "
                            "int") from None
        if not lo <= v <= hi:
            raise ValueError(f"Value out of range: {v}")
        return v
    return check


def _real(v):
    """A number field's value as a Python float: ints, floats, numpy and scalar tensors."""
    if isinstance(v, (str, bytes, complex)) or not hasattr(v, "__float__"):
        raise TypeError(f"{v!r} has type {type(v).__name__}, but expected one of: int, float")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise TypeError(f"{v!r} has type {type(v).__name__}, but expected one of: int, "
                        "float") from None


def _check_float(v):
    return float(np.float32(_real(v)))  # a float field holds float32 values


def _check_double(v):
    return _real(v)


def _check_bytes(v):
    if not isinstance(v, (bytes, np.bytes_)):
        raise TypeError(f"{v!r} has type {type(v).__name__}, but expected one of: bytes")
    return bytes(v)


def _check_str(v):
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{v!r} is not valid UTF-8 for a string field") from None
    if not isinstance(v, str):
        raise TypeError(f"{v!r} has type {type(v).__name__}, but expected one of: bytes, str")
    return v


def _check_bool(v):
    if not isinstance(v, (bool, np.bool_, int, np.integer)):
        raise TypeError(f"{v!r} has type {type(v).__name__}, but expected one of: bool, int")
    return bool(v)


_KINDS = {  # name: (wire type, check, encode one value, decode one value, default)
    "int64": (0, _check_int(-2 ** 63, 2 ** 63 - 1), _varint, _signed64, 0),
    "int32": (0, _check_int(-2 ** 31, 2 ** 31 - 1), _varint, _signed32, 0),
    "uint32": (0, _check_int(0, 2 ** 32 - 1), _varint, lambda n: n & 0xFFFFFFFF, 0),
    "uint64": (0, _check_int(0, 2 ** 64 - 1), _varint, lambda n: n & (2 ** 64 - 1), 0),
    "bool": (0, _check_bool, lambda v: _varint(int(v)), bool, False),
    "float": (5, _check_float, lambda v: struct.pack("<f", v),
              lambda b: struct.unpack("<f", b)[0], 0.0),
    "double": (1, _check_double, lambda v: struct.pack("<d", v),
               lambda b: struct.unpack("<d", b)[0], 0.0),
    "bytes": (2, _check_bytes, None, bytes, b""),
    "string": (2, _check_str, None, lambda b: b.decode("utf-8"), ""),
}


def packed_varints(payload):
    """The int64 values of a packed varint field, decoded in numpy: a value ends at each byte
    below 0x80, and its k-th byte carries bits 7k..7k+6 (ten bytes at most; bits past 64 are
    dropped, so a negative int64's ten-byte encoding reads back as itself)."""
    arr = np.frombuffer(payload, np.uint8)
    if not arr.size:
        return np.zeros(0, np.int64)
    ends = np.flatnonzero(arr < 0x80)
    if not ends.size or ends[-1] != arr.size - 1:
        raise DecodeError("Truncated message: a varint runs past the end")
    starts = np.concatenate([[0], ends[:-1] + 1])
    lengths = ends - starts + 1
    if lengths.max() > 10:
        raise DecodeError("Error parsing message: a varint is longer than 10 bytes")
    values = np.zeros(ends.size, np.uint64)
    for k in range(int(lengths.max())):
        has = lengths > k
        values[has] |= (arr[starts[has] + k].astype(np.uint64) & np.uint64(0x7F)) << \
            np.uint64(7 * k)
    return values.view(np.int64)


def _decode_packed(kind, payload):
    wire, _, _, decode, _ = _KINDS[kind]
    if wire == 5:
        return [float(v) for v in np.frombuffer(payload, "<f4")] if len(payload) % 4 == 0 \
            else _bad(f"packed float field of {len(payload)} bytes")
    if wire == 1:
        return [float(v) for v in np.frombuffer(payload, "<f8")] if len(payload) % 8 == 0 \
            else _bad(f"packed double field of {len(payload)} bytes")
    if kind == "int64":
        return packed_varints(payload).tolist()
    out, pos = [], 0
    while pos < len(payload):
        v, pos = _read_varint(payload, pos, len(payload))
        out.append(decode(v))
    return out


def _bad(what):
    raise DecodeError(f"Error parsing message: {what}")


# -- containers ----------------------------------------------------------------------------------

class _Repeated:
    """What the repeated fields share: a list of values that tells its message when it
    changes (`_listener`)."""

    def __delitem__(self, index):
        del self._values[index]
        self._listener()

    def __getitem__(self, index):
        return self._values[index]

    def __len__(self):
        return len(self._values)

    def __iter__(self):
        return iter(self._values)


class RepeatedScalarContainer(_Repeated):
    """A repeated number/bytes field: a list that checks each value's type."""

    def __init__(self, check, listener):
        self._values, self._check, self._listener = [], check, listener

    def append(self, value):
        self._values.append(self._check(value))
        self._listener()

    def extend(self, values):
        self._values.extend(self._check(v) for v in values)
        self._listener()

    def insert(self, index, value):
        self._values.insert(index, self._check(value))
        self._listener()

    def remove(self, value):
        self._values.remove(value)
        self._listener()

    def pop(self, index=-1):
        value = self._values.pop(index)
        self._listener()
        return value

    def __setitem__(self, index, value):
        if isinstance(index, slice):
            self._values[index] = [self._check(v) for v in value]
        else:
            self._values[index] = self._check(value)
        self._listener()

    def __eq__(self, other):
        if isinstance(other, RepeatedScalarContainer):
            return self._values == other._values
        return isinstance(other, (list, tuple)) and self._values == list(other)

    def __repr__(self):
        return repr(self._values)


class RepeatedCompositeContainer(_Repeated):
    """A repeated message field: `add(**fields)`, `append`, `extend`, indexing."""

    def __init__(self, cls, listener):
        self._values, self._cls, self._listener = [], cls, listener

    def add(self, **kwargs):
        msg = self._cls(**kwargs)
        msg._listener = self._listener
        self._values.append(msg)
        self._listener()
        return msg

    def append(self, message):
        if isinstance(message, dict):
            self.add(**message)
        else:
            self.add().CopyFrom(message)

    def extend(self, messages):
        for m in messages:
            self.append(m)

    def __eq__(self, other):
        return list(self) == list(other) if isinstance(other, (list, tuple,
                                                               RepeatedCompositeContainer)) \
            else NotImplemented

    def __repr__(self):
        return repr(self._values)


class MessageMap:
    """A map<string, Message> field: reading a missing key creates its (empty) entry, as
    protobuf's message maps do; `get` does not."""

    def __init__(self, cls, listener):
        self._values, self._cls, self._listener = {}, cls, listener

    def __getitem__(self, key):
        key = _check_str(key)
        if key not in self._values:
            msg = self._cls()
            msg._listener = self._listener
            self._values[key] = msg
            self._listener()
        return self._values[key]

    def __setitem__(self, key, value):
        raise ValueError("Direct assignment of submessage not allowed: use "
                         f"map[{key!r}].CopyFrom(value)")

    def get(self, key, default=None):
        return self._values.get(key, default)

    def get_or_create(self, key):
        return self[key]

    def __contains__(self, key):
        return key in self._values

    def __delitem__(self, key):
        del self._values[key]
        self._listener()

    def __len__(self):
        return len(self._values)

    def __iter__(self):
        return iter(self._values)

    def keys(self):
        return self._values.keys()

    def values(self):
        return self._values.values()

    def items(self):
        return self._values.items()

    def clear(self):
        self._values.clear()
        self._listener()

    def update(self, other):
        for k, v in dict(other).items():
            self[k].CopyFrom(v)

    def __eq__(self, other):
        if isinstance(other, MessageMap):
            return self._values == other._values
        return isinstance(other, dict) and self._values == other

    def __repr__(self):
        return repr(self._values)


# -- messages ------------------------------------------------------------------------------------

def _nothing():
    pass


class Message:
    """The generated-class interface over a field table `_FIELDS`:
    [(number, name, kind, label, oneof)] where kind is a scalar kind name or a Message class,
    and label is "optional", "repeated" or "map" (map<string, kind>)."""

    _FIELDS = ()
    _listener = staticmethod(_nothing)

    def __init__(self, **kwargs):
        self._values = {}
        self._present = set()  # message fields set (or mutated) and oneof members chosen
        for name, value in kwargs.items():
            field = self._field(name)
            number, _, kind, label, _ = field
            if value is None:
                continue
            if label == "repeated":
                getattr(self, name).extend(value)
            elif label == "map":
                target = getattr(self, name)
                for k, v in dict(value).items():
                    target[k].CopyFrom(v) if isinstance(v, Message) else \
                        target[k].CopyFrom(kind(**v))
            elif isinstance(kind, type):
                sub = getattr(self, name)
                sub.CopyFrom(value if isinstance(value, Message) else kind(**value))
                self._mark(name)
            else:
                setattr(self, name, value)

    @classmethod
    def _field(cls, name):
        for f in cls._FIELDS:
            if f[1] == name:
                return f
        raise ValueError(f'Protocol message {cls.__name__} has no "{name}" field.')

    def _mark(self, name):
        """`name` is now present (a sub-message mutated, a oneof member chosen)."""
        field = self._field(name)
        if field[4] is not None:  # choosing a oneof member clears the others
            for other in self._FIELDS:
                if other[4] == field[4] and other[1] != name:
                    self._values.pop(other[1], None)
                    self._present.discard(other[1])
        self._present.add(name)
        self._listener()

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        _, _, kind, label, _ = self._field_or_attr(name)
        values = self.__dict__["_values"]
        if name not in values:
            mark = (lambda: self._mark(name))
            if label == "repeated":
                values[name] = (RepeatedCompositeContainer(kind, mark) if isinstance(kind, type)
                                else RepeatedScalarContainer(_KINDS[kind][1], mark))
            elif label == "map":
                values[name] = MessageMap(kind, mark)
            elif isinstance(kind, type):
                sub = kind()
                sub._listener = mark
                values[name] = sub
            else:
                return _KINDS[kind][4]
        return values[name]

    def _field_or_attr(self, name):
        try:
            return self._field(name)
        except ValueError:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute "
                                 f"{name!r}") from None

    def __setattr__(self, name, value):
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        _, _, kind, label, _ = self._field_or_attr(name)
        if label != "optional" or isinstance(kind, type):
            what = "repeated" if label != "optional" else "message"
            raise AttributeError(f"Assignment not allowed to field \"{name}\" in protocol "
                                 f"message object (a {what} field: use extend/append or "
                                 "CopyFrom)")
        self._values[name] = _KINDS[kind][1](value)
        self._mark(name)

    def HasField(self, name):  # noqa: N802 - protobuf's name
        if name not in self._names():
            self._oneof(name)  # a oneof's name: is any of its members set
            return self.WhichOneof(name) is not None
        _, _, kind, label, oneof = self._field(name)
        if label != "optional" or (not isinstance(kind, type) and oneof is None):
            raise ValueError(f'Protocol message has no non-repeated submessage field "{name}" '
                             "nor marked as optional")
        return name in self._present

    def _names(self):
        return [f[1] for f in self._FIELDS]

    def _oneof(self, name):
        if any(f[4] == name for f in self._FIELDS):
            return name
        raise ValueError(f'Protocol message {type(self).__name__} has no "{name}" field.')

    def WhichOneof(self, oneof_group):  # noqa: N802
        self._oneof(oneof_group)
        for f in self._FIELDS:
            if f[4] == oneof_group and f[1] in self._present:
                return f[1]
        return None

    def ClearField(self, name):  # noqa: N802
        self._field_or_attr(name)
        self._values.pop(name, None)
        self._present.discard(name)

    def Clear(self):  # noqa: N802
        self._values.clear()
        self._present.clear()
        self._listener()

    def CopyFrom(self, other):  # noqa: N802
        if other is self:
            return
        if type(other) is not type(self):
            raise TypeError(f"Parameter to CopyFrom() must be instance of same class: expected "
                            f"{type(self).__name__} got {type(other).__name__}.")
        self.Clear()
        self.MergeFrom(other)

    def MergeFrom(self, other):  # noqa: N802
        """Merges `other` into this message (protobuf's rules: set scalars overwrite, repeated
        fields append, sub-messages and map entries merge)."""
        if type(other) is not type(self):
            raise TypeError(f"Parameter to MergeFrom() must be instance of same class: expected "
                            f"{type(self).__name__} got {type(other).__name__}.")
        self.MergeFromString(other.SerializeToString())

    def IsInitialized(self):  # noqa: N802
        return True

    def ListFields(self):  # noqa: N802
        out = []
        for f in self._FIELDS:
            if self._is_set(f):
                out.append((f, getattr(self, f[1])))
        return out

    def _is_set(self, field):
        _, name, kind, label, oneof = field
        if label != "optional":
            return len(self._values.get(name, ())) > 0
        if isinstance(kind, type) or oneof is not None:
            return name in self._present
        return name in self._values and self._values[name] != _KINDS[kind][4]

    # -- encoding --------------------------------------------------------------------------------
    def SerializeToString(self, deterministic=None):  # noqa: N802
        out = bytearray()
        for field in self._FIELDS:
            if not self._is_set(field):
                continue
            number, name, kind, label, _ = field
            value = getattr(self, name)
            if label == "map":
                for key in sorted(value.keys()):
                    entry = _delimited(1, key.encode("utf-8")) + \
                        _delimited(2, value[key].SerializeToString())
                    out += _delimited(number, entry)
            elif isinstance(kind, type):
                for m in (value if label == "repeated" else [value]):
                    out += _delimited(number, m.SerializeToString())
            else:
                wire, _, encode, _, _ = _KINDS[kind]
                values = list(value) if label == "repeated" else [value]
                if wire == 2:
                    for v in values:
                        raw = v.encode("utf-8") if isinstance(v, str) else v
                        out += _delimited(number, raw)
                elif label == "repeated":  # packed
                    out += _delimited(number, b"".join(encode(v) for v in values))
                else:
                    out += _tag(number, wire) + encode(value)
        return bytes(out)

    SerializePartialToString = SerializeToString  # every message here is always complete

    def ByteSize(self):  # noqa: N802
        return len(self.SerializeToString())

    def __reduce__(self):  # pickles (and deep-copies) as its bytes, as protobuf messages do
        return type(self).FromString, (self.SerializeToString(),)

    @classmethod
    def FromString(cls, s):  # noqa: N802
        msg = cls()
        msg.MergeFromString(s)
        return msg

    def ParseFromString(self, serialized):  # noqa: N802
        self.Clear()
        return self.MergeFromString(serialized)

    def MergeFromString(self, serialized):  # noqa: N802
        if isinstance(serialized, memoryview):
            serialized = bytes(serialized)
        if not isinstance(serialized, (bytes, bytearray)):
            raise TypeError(f"{type(self).__name__}.ParseFromString: expected bytes, got "
                            f"{type(serialized).__name__}")
        by_number = {f[0]: f for f in self._FIELDS}
        for number, wire, value in _fields(serialized):
            field = by_number.get(number)
            if field is None:
                continue  # an unknown field
            _, name, kind, label, _ = field
            if label == "map":
                key, entry = "", b""
                for n, w, v in _fields(value) if wire == 2 else _bad(f"map field {name}"):
                    if n == 1 and w == 2:
                        key = v.decode("utf-8")
                    elif n == 2 and w == 2:
                        entry = v
                getattr(self, name)[key].MergeFromString(entry)
            elif isinstance(kind, type):
                if wire != 2:
                    _bad(f"field {name} of wire type {wire}, expected 2")
                if label == "repeated":
                    getattr(self, name).add().MergeFromString(value)
                else:
                    getattr(self, name).MergeFromString(value)
                    self._mark(name)
            else:
                kwire, _, _, decode, _ = _KINDS[kind]
                if wire == 2 and kwire != 2:
                    values = _decode_packed(kind, value)
                elif wire == kwire:
                    values = [decode(value) if kwire in (0, 2) else
                              _decode_packed(kind, value)[0]]
                else:
                    _bad(f"field {name} of wire type {wire}, expected {kwire}")
                if label == "repeated":
                    getattr(self, name)._values.extend(values)
                    self._listener()
                else:
                    self._values[name] = values[-1]
                    self._listener()
        return len(serialized)

    # -- comparison and text ---------------------------------------------------------------------
    def __eq__(self, other):
        if not isinstance(other, Message):
            return NotImplemented
        return type(self) is type(other) and \
            self.SerializeToString() == other.SerializeToString()

    __hash__ = None

    def __str__(self):
        return "".join(self._text(0))

    __repr__ = __str__

    def _text(self, indent):
        pad = "  " * indent
        for field in self._FIELDS:
            if not self._is_set(field):
                continue
            _, name, kind, label, _ = field
            value = getattr(self, name)
            if label == "map":
                for key in sorted(value.keys()):
                    yield f"{pad}{name} {{\n{pad}  key: {_text_scalar('string', key)}\n"
                    yield f"{pad}  value {{\n"
                    yield from value[key]._text(indent + 2)
                    yield f"{pad}  }}\n{pad}}}\n"
            elif isinstance(kind, type):
                for m in (value if label == "repeated" else [value]):
                    yield f"{pad}{name} {{\n"
                    yield from m._text(indent + 1)
                    yield f"{pad}}}\n"
            else:
                for v in (value if label == "repeated" else [value]):
                    yield f"{pad}{name}: {_text_scalar(kind, v)}\n"


def _c_escape(raw, raw_high=False):
    """Protobuf text format's escaping: \\n \\r \\t \\" \\' \\\\, octal for the other
    bytes outside printable ASCII (a string field's UTF-8 bytes >= 0x80 are kept)."""
    out = bytearray()
    for b in raw:
        c = chr(b)
        if c in "\n\r\t\"'\\":
            out += {"\n": b"\\n", "\r": b"\\r", "\t": b"\\t"}.get(c, b"\\" + bytes([b]))
        elif 32 <= b < 127 or (raw_high and b >= 0x80):
            out.append(b)
        else:
            out += f"\\{b:03o}".encode()
    return out.decode("utf-8", "replace")


def _text_scalar(kind, v):
    if kind == "bytes":
        return f'"{_c_escape(v)}"'
    if kind == "string":
        return f'"{_c_escape(v.encode("utf-8"), raw_high=True)}"'
    if kind == "bool":
        return "true" if v else "false"
    if kind in ("float", "double"):
        return _round_trip(v, kind)
    return str(v)


def _round_trip(v, kind):
    """A float as protobuf's (upb's) text format writes it: '%.6g', or '%.9g' when that does
    not read back as the same float32 (doubles: '%.15g', else '%.17g'); inf, -inf, nan."""
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    short, long_ = (6, 9) if kind == "float" else (15, 17)
    text = f"{v:.{short}g}"
    same = np.float32(float(text)) == np.float32(v) if kind == "float" else float(text) == v
    return text if same else f"{v:.{long_}g}"
