"""The file of `Dataset.cache(filename)`: tapegpu's own format, read without pickle.

    b"TGDATA-CACHE 2\\n"      magic and format version
    b"H" record               JSON {"leaves": [[dtype name, shape], ...]}: the element spec's
                              leaves (a shape is a list with null for an unknown dimension, or
                              null for an unknown rank)
    b"E" record per element   each leaf as a .npy record (numpy.lib.format, no pickle)
    b"Z" and the number of elements (8 bytes, little-endian)

A record is its tag, the length of its bytes (8 bytes) and their CRC-32 (4 bytes, both
little-endian), then the bytes. A reader checks each record's checksum before it uses anything
in it, as TensorFlow's cache (a TensorBundle) checks each tensor's, and raises
`tg.errors.DataLossError` naming the file and the record: a flipped bit is never served as data.
A length is checked against what is left of the file before anything is allocated for it.

The spec in the header is what makes a cache written by another pipeline fail at once: TF does
not key its cache file by the pipeline either (another pipeline may read it on purpose), and
when the elements it reads are not of the dataset's types and shapes its iterator raises
InvalidArgumentError ("Incompatible shapes at component 0: expected [3] but got [4]"). A reader
here compares the header with the dataset's spec before reading any element (a different number
of components, a dtype or an incompatible shape raise `tg.errors.InvalidArgumentError` naming
the file), then each element's arrays with the spec (as TF's iterator does). Nothing is rewritten:
delete the file, or use another filename.

The first iteration writes `<filename>.tgcache.partial-<pid>-<n>` and renames it to
`<filename>.tgcache` only when the input is exhausted, so an iteration that stops early (or a
process that dies) leaves no cache that a later iteration would use: as in tf.data, only a
complete cache is read. Later iterations, in this process or another, read the file.
"""
import io
import itertools
import json
import os
import struct
import zlib

import numpy as np

from ..core import dtypes, files
from ..errors import DataLossError, NotFoundError
from ..ops.registry import InvalidArgumentError

MAGIC = b"TGDATA-CACHE 2\n"
_FAMILY = b"TGDATA-CACHE "  # the magic of every version
SUFFIX = ".tgcache"
_FRAME = struct.Struct("<QI")  # a record's length and CRC-32
_COUNT = struct.Struct("<Q")
_partials = itertools.count()


def path_of(filename):
    return os.fspath(filename) + SUFFIX


def _leaves(specs):
    return [[dtypes.as_dtype(s.dtype).name, None if s.shape is None else list(s.shape)]
            for s in specs]


def _record(tag, payload):
    return tag + _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


class Writer:
    """Writes elements (flat lists of numpy arrays) to a partial file; `finish()` renames it
    to the cache's path, `discard()` removes it."""

    def __init__(self, filename, specs):
        self.path = path_of(filename)
        self.partial = f"{self.path}.partial-{os.getpid()}-{next(_partials)}"
        try:
            self._file = open(self.partial, "wb")
        except OSError as e:
            raise NotFoundError(None, None, f"Dataset.cache: cannot create the cache file "
                                f"{self.partial!r}: {e.strerror}") from None
        self._file.write(MAGIC)
        self._file.write(_record(b"H", json.dumps({"leaves": _leaves(specs)}).encode()))
        self._count = 0

    def write(self, arrays):
        buf = io.BytesIO()
        for a in arrays:
            np.lib.format.write_array(buf, np.asarray(a), allow_pickle=False)
        self._file.write(_record(b"E", buf.getvalue()))
        self._count += 1

    def finish(self):
        self._file.write(b"Z" + _COUNT.pack(self._count))
        self._file.close()
        os.replace(self.partial, self.path)

    def discard(self):
        self._file.close()
        try:
            os.remove(self.partial)
        except OSError:
            pass


def read(filename, specs):
    """The elements (flat lists of numpy arrays) of a complete cache file, checked against the
    dataset's leaf specs (`tg.TensorSpec`s)."""
    reader = _Reader(path_of(filename))
    with reader:
        reader.check_header(specs)
        while True:
            payload = reader.next_element()
            if payload is None:
                return
            yield reader.element(payload, specs)


class _Reader:
    """An open cache file, read record by record; every error names the file and the record."""

    def __init__(self, path):
        self.path = path
        self._f = open(path, "rb")
        self._size = os.fstat(self._f.fileno()).st_size
        self.count = 0  # elements read

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()

    def fail(self, what):
        raise DataLossError(None, None, f"Dataset.cache: the cache file {self.path!r} is "
                            f"damaged: {what} (delete the file; the next complete iteration "
                            "writes it again)")

    def _payload(self, record):
        """The bytes of the record whose tag was just read, once their checksum matches."""
        frame = self._f.read(_FRAME.size)
        if len(frame) < _FRAME.size:
            self.fail(f"{record} is truncated")
        length, crc = _FRAME.unpack(frame)
        left = self._size - self._f.tell()
        if length > left:
            self.fail(f"{record} claims {length} bytes but {left} are left (a truncated file "
                      "or a damaged length)")
        payload = self._f.read(length)
        got = zlib.crc32(payload)
        if got != crc:
            self.fail(f"checksum does not match for {record}: stored {crc:#010x}, calculated "
                      f"on the restored bytes {got:#010x}")
        return payload

    def check_header(self, specs):
        magic = self._f.read(len(MAGIC))
        if magic != MAGIC:
            if magic.startswith(_FAMILY):
                self.fail(f"it is in another version of tapegpu's cache format "
                          f"({magic.strip().decode('ascii', 'replace')!r}; this tapegpu reads "
                          f"{MAGIC.strip().decode()!r})")
            raise DataLossError(None, None, f"Dataset.cache: {self.path!r} is not a tapegpu "
                                "cache file (delete it, or use another filename)")
        if self._f.read(1) != b"H":
            self.fail("the header record is missing")
        payload = self._payload("the header record")
        try:
            stored = [_leaf(leaf) for leaf in json.loads(payload)["leaves"]]
        except (ValueError, KeyError, TypeError):
            self.fail("its header does not describe elements (its checksum matches: the file "
                      "was not written by Dataset.cache)")
        _check_spec(self.path, stored, specs)

    def next_element(self):
        """The checked bytes of the next element's record, or None at the end of the file."""
        tag = self._f.read(1)
        if tag == b"Z":
            count = self._f.read(_COUNT.size)
            if len(count) < _COUNT.size or _COUNT.unpack(count)[0] != self.count:
                self.fail(f"its end marker does not count the {self.count} elements read")
            if self._f.read(1):
                self.fail("there are bytes after its end marker")
            return None
        record = f"the record of element {self.count}"
        if tag != b"E":
            self.fail(f"{record} is missing or its tag is damaged (got {tag!r}; a truncated "
                      "file?)")
        payload = self._payload(record)
        self.count += 1
        return payload

    def element(self, payload, specs):
        """The arrays of an element's checked bytes, each checked against its spec."""
        index = self.count - 1
        buf = io.BytesIO(payload)
        arrays = []
        for i, spec in enumerate(specs):
            try:
                header = files.npy_header(buf)
            except ValueError as e:
                self.fail(f"component {i} of element {index} is not an array ({e})")
            _check_component(self.path, index, i, spec, header[2], header[0])
            try:
                arrays.append(files.npy_data(buf, header, len(payload) - buf.tell()))
            except ValueError as e:
                self.fail(f"component {i} of element {index}: {e}")
        if buf.tell() != len(payload):
            self.fail(f"the record of element {index} has {len(payload) - buf.tell()} bytes "
                      f"after its {len(specs)} components")
        return arrays


def _leaf(leaf):
    """(dtype, shape) of a header's leaf [dtype name, shape or null]."""
    name, shape = leaf
    if not isinstance(name, str) or not (shape is None or isinstance(shape, list) and all(
            d is None or type(d) is int and d >= 0 for d in shape)):
        raise TypeError(leaf)
    return dtypes.as_dtype(name), None if shape is None else tuple(shape)


def _compatible(shape, spec_shape):
    """TF's `IsCompatibleWith`: unknown ranks and dimensions match anything."""
    if shape is None or spec_shape is None:
        return True
    return len(shape) == len(spec_shape) and all(
        a is None or b is None or a == b for a, b in zip(shape, spec_shape))


def _fmt(shape):
    return "<unknown>" if shape is None else \
        "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _check_spec(path, stored, specs):
    """The header's leaves against the dataset's, with the messages of tf.data's iterator."""
    def refuse(what):
        raise InvalidArgumentError(
            f"Dataset.cache: the cache file {path!r} was written by a pipeline whose elements "
            f"differ from this dataset's: {what}. A cache file is not tied to the pipeline "
            f"that wrote it (as in TensorFlow); delete it or use another filename")
    if len(stored) != len(specs):
        refuse(f"number of components does not match: expected {len(specs)} but the file "
               f"has {len(stored)}")
    for i, ((dtype, shape), spec) in enumerate(zip(stored, specs)):
        want = dtypes.as_dtype(spec.dtype)
        if dtype != want:
            refuse(f"data types do not match at component {i}: expected {want.name} but the "
                   f"file has {dtype.name}")
        if not _compatible(shape, spec.shape):
            refuse(f"incompatible shapes at component {i}: expected {_fmt(spec.shape)} but "
                   f"the file has {_fmt(shape)}")


def _check_component(path, element, i, spec, dtype, shape):
    if dtype.name != dtypes.as_dtype(spec.dtype).name or not _compatible(shape, spec.shape):
        raise InvalidArgumentError(
            f"Dataset.cache: element {element} of the cache file {path!r} does not match the "
            f"dataset: component {i} is {dtype.name} of shape {_fmt(shape)}, expected "
            f"{dtypes.as_dtype(spec.dtype).name} of shape {_fmt(spec.shape)}")
