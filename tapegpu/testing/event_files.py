"""Reading TensorBoard event files back, field by field (for tests of the writers): the
TFRecord framing with its masked CRC-32C checked, each Event decoded as {field: [values]}."""
import struct

from ..keras import tensorboard


def _varint(buf, i):
    shift = n = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def fields(buf):
    """{field number: [values]} of a protobuf message (varint, 64-bit, bytes, 32-bit).

    >>> from tapegpu.testing.event_files import fields
    >>> fields(bytes([8, 150, 1]))
    {1: [150]}
    """
    out, i = {}, 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise AssertionError(f"wire type {wire}")
        out.setdefault(number, []).append(v)
    return out


def events(path):
    """The Event messages of the file at `path`, each as `fields` gives it; the records'
    checksums are checked."""
    data = open(path, "rb").read()
    i, out = 0, []
    while i < len(data):
        header = data[i:i + 8]
        (n,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", data[i + 8:i + 12])[0] == \
            tensorboard._masked(tensorboard.crc32c(header))
        body = data[i + 12:i + 12 + n]
        assert struct.unpack("<I", data[i + 12 + n:i + 16 + n])[0] == \
            tensorboard._masked(tensorboard.crc32c(body))
        out.append(fields(body))
        i += 16 + n
    return out


def scalars(evs):
    """[(step, {tag: value})] of the scalar summaries among `evs` (after the first, the file
    version)."""
    out = []
    for e in evs[1:]:
        summary = fields(e[5][0])
        values = {}
        for v in summary[1]:
            f = fields(v)
            values[f[1][0].decode()] = struct.unpack("<f", f[2][0])[0]
        out.append((e.get(2, [0])[0], values))
    return out
