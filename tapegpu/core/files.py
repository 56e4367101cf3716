"""Writing files so that a crash never leaves one half-written (the emulator's compiled
libraries and manifests, `tg.train` checkpoints, Keras weights files), and reading the `.npy`
records of tapegpu's files so that nothing runs and nothing is allocated that a file only
claims.

A `.npy` record is read in two steps: `npy_header` (shape, order, dtype; plain bool, integer,
float and complex dtypes only, so nothing is ever unpickled), then, once the caller has checked
that header against what it expects, `npy_data`, which allocates the data only when the bytes
left in the record can hold it. A damaged header that claims 10^12 elements is refused before
anything is allocated for them.
"""
import math
import os
import secrets
import zipfile

import numpy as np

PLAIN_KINDS = "biufc"  # bool, integers, floats, complex: the dtypes that never pickle
_DEFLATE_RATIO = 1032  # the most bytes one byte of deflate data expands to


def atomic_write(path, write, mode=None):
    """Calls `write(f)` on a new temporary file beside `path` (`.<name>.tmp...`, created
    private when `mode` is given, then set to `mode`), fsyncs it and renames it to `path`, then
    fsyncs the directory. A crash before the rename leaves `path` as it was."""
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp{os.getpid()}."
                                  f"{secrets.token_hex(4)}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    fsync_dir(directory)


def write_npz(path, arrays):
    """Writes `arrays` to `path` atomically, laid out as `numpy.savez` does (members `arr_0.npy`,
    `arr_1.npy`, ... of an uncompressed zip, so `numpy.load` reads it), without pickle."""
    def write(f):
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            for i, a in enumerate(arrays):
                with zf.open(f"arr_{i}.npy", "w", force_zip64=True) as m:
                    np.lib.format.write_array(m, np.asarray(a), allow_pickle=False)
    atomic_write(path, write)


def fsync_dir(directory):
    """Makes a rename in `directory` durable (where directories can be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows: directories cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- reading .npy records ----------------------------------------------------------------------
def npy_header(f):
    """(shape, fortran_order, dtype) of the `.npy` record at `f`'s position, read up to its data.
    Raises ValueError for a damaged header or a dtype that is not bool, integer, float or
    complex (object arrays would be unpickled: they are refused, never loaded)."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise ValueError(f".npy format version {version[0]}.{version[1]} is not read (1.0 and "
                         "2.0 are)")
    if dtype.kind not in PLAIN_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise ValueError(f"an array of dtype {dtype} (only bool, integer, float and complex "
                         "arrays are read)")
    return shape, fortran, dtype


def npy_data(f, header, limit):
    """The array of a `.npy` record whose header `npy_header` read, in native byte order. The
    data must fit in `limit` bytes (what is left of the record), which is checked before it is
    allocated: a header's shape alone never sizes an allocation."""
    shape, fortran, dtype = header
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if nbytes > limit:
        raise ValueError(f"the header claims {nbytes} bytes of data ({dtype} of shape "
                         f"{tuple(shape)}) but the record holds at most {limit}")
    buf = bytearray(nbytes)
    view, got = memoryview(buf), 0
    while got < nbytes:
        n = f.readinto(view[got:])
        if not n:
            raise ValueError(f"truncated: {got} of the {nbytes} bytes of data")
        got += n
    arr = np.frombuffer(buf, dtype=dtype, count=count).reshape(shape,
                                                               order="F" if fortran else "C")
    return arr.astype(dtype.newbyteorder("="), copy=False)


def zip_member_limit(info, archive_size):
    """The most bytes the zip member `info` can hold in an archive of `archive_size` bytes: its
    stated size, no more than stored or deflated data of that archive can give."""
    ratio = 1 if info.compress_type == zipfile.ZIP_STORED else _DEFLATE_RATIO
    return min(info.file_size, archive_size * ratio)
