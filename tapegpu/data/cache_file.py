"""The file of `Dataset.cache(filename)`: tapegpu's own format, read without pickle.

    b"TGDATA-CACHE 1\\n"               magic and version
    one line of JSON, then b"\\n"      {"leaves": [dtype name, ...]}: the element's leaves
    per element: b"E", then each leaf as a .npy record (numpy.lib.format, no pickle)
    at the end: b"Z" and the number of elements (8 bytes, little-endian)

The first iteration writes `<filename>.tgcache.partial-<pid>-<n>` and renames it to
`<filename>.tgcache` only when the input is exhausted, so an iteration that stops early (or a
process that dies) leaves no cache that a later iteration would use: as in tf.data, only a
complete cache is read. Later iterations, in this process or another, read the file.
"""
import itertools
import json
import os

import numpy as np

from ..core import dtypes
from ..errors import DataLossError, NotFoundError
from ..ops.registry import InvalidArgumentError

MAGIC = b"TGDATA-CACHE 1\n"
SUFFIX = ".tgcache"
_partials = itertools.count()


def path_of(filename):
    return os.fspath(filename) + SUFFIX


def _leaf_names(specs):
    return [dtypes.as_dtype(s.dtype).name for s in specs]


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
        self._file.write(json.dumps({"leaves": _leaf_names(specs)}).encode() + b"\n")
        self._count = 0

    def write(self, arrays):
        self._file.write(b"E")
        for a in arrays:
            np.lib.format.write_array(self._file, np.asarray(a), allow_pickle=False)
        self._count += 1

    def finish(self):
        self._file.write(b"Z" + self._count.to_bytes(8, "little"))
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
    dataset's leaf specs."""
    path = path_of(filename)
    with open(path, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise DataLossError(None, None, f"Dataset.cache: {path!r} is not a tapegpu cache "
                                "file (delete it, or use another filename)")
        try:
            header = json.loads(f.readline())
            stored = list(header["leaves"])
        except (ValueError, KeyError, TypeError):
            raise DataLossError(None, None, f"Dataset.cache: the header of {path!r} is "
                                "damaged (delete the file)") from None
        expected = _leaf_names(specs)
        if stored != expected:
            raise InvalidArgumentError(
                f"Dataset.cache: the cache file {path!r} holds elements with leaves of dtypes "
                f"{stored}, but this dataset's are {expected}; delete the file or use another "
                "filename")
        count = 0
        while True:
            tag = f.read(1)
            if tag == b"Z":
                if int.from_bytes(f.read(8), "little") != count:
                    raise DataLossError(None, None, f"Dataset.cache: {path!r} is damaged "
                                        "(element count mismatch)")
                return
            if tag != b"E":
                raise DataLossError(None, None, f"Dataset.cache: {path!r} is damaged or "
                                    "truncated (delete the file)")
            try:
                arrays = [np.lib.format.read_array(f, allow_pickle=False) for _ in stored]
            except ValueError as e:
                raise DataLossError(None, None, f"Dataset.cache: {path!r} is damaged: "
                                    f"{e}") from None
            count += 1
            yield arrays
