"""TFRecord files: `tg.io.TFRecordWriter`, `tg.io.TFRecordOptions`, and reading them
(`tf_record_iterator`, used by `tg.data.TFRecordDataset`).

A TFRecord file is a sequence of records, each

    uint64 length            (little-endian)
    uint32 masked_crc32c(length bytes)
    byte   data[length]
    uint32 masked_crc32c(data)

where `masked_crc32c(b) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2**32)` with `c` the
CRC-32C (Castagnoli) of `b`. The whole file may be GZIP- or ZLIB-compressed. Reading checks
both checksums and raises `tg.errors.DataLossError` on a mismatch or a truncated record.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "r.tfrecord")
>>> with tg.io.TFRecordWriter(path) as w:
...     w.write(b"abc")
>>> with open(path, "rb") as f:
...     f.read().hex()
'0300000000000000b099490e6162636e57f121'
"""
import functools
import gzip
import struct
import zlib

import numpy as np

from ..core.tensor import Tensor
from ..errors import DataLossError, NotFoundError
from .files import path_of

__all__ = ["TFRecordOptions", "TFRecordWriter", "TFRecordCompressionType", "tf_record_iterator",
           "crc32c", "masked_crc32c"]


def _crc_table():
    poly = 0x82F63B78  # CRC-32C's polynomial, bit-reflected
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()
_NP_TABLE = np.array(_TABLE, dtype=np.uint32)
_LANES_FROM = 1 << 14  # data at least this long is checksummed in numpy lanes


def _crc_raw(data, crc):
    """The CRC register after feeding `data` to it (no initial or final inversion)."""
    table = _TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def _gf2_times(mat, vec):
    """A 32x32 matrix over GF(2) (its 32 columns as ints) times a 32-bit vector."""
    out, i = 0, 0
    while vec:
        if vec & 1:
            out ^= mat[i]
        vec >>= 1
        i += 1
    return out


def _gf2_square(mat):
    return [_gf2_times(mat, mat[i]) for i in range(32)]


@functools.lru_cache(maxsize=64)
def _zeros_operator(nbytes):
    """The matrix that advances a CRC register over `nbytes` zero bytes (zlib's crc32_combine
    idea: the register's update is linear over GF(2), so n zero bytes are a matrix power)."""
    one_bit = [0x82F63B78] + [1 << i for i in range(31)]  # one zero bit
    result = [1 << i for i in range(32)]  # identity
    power = _gf2_square(_gf2_square(_gf2_square(one_bit)))  # one zero byte
    while nbytes:
        if nbytes & 1:
            result = [_gf2_times(power, c) for c in result]
        nbytes >>= 1
        if nbytes:
            power = _gf2_square(power)
    return result


def _crc_lanes(data, crc):
    """`_crc_raw` of long data: the data is cut into `k` lanes of `n` bytes whose registers
    advance together in numpy (one table lookup per lane per byte), then chained: the register
    after lanes a and b is zeros_n(register after a) xor (b's register from 0)."""
    size = len(data)
    # n numpy steps (a few microseconds each) plus k chainings in Python (a few more each):
    # about sqrt(size) of each
    k = max(1, int(np.sqrt(size * 0.6)))
    n = size // k
    body = np.frombuffer(data, dtype=np.uint8, count=n * k).reshape(k, n)
    regs = np.zeros(k, dtype=np.uint32)
    for j in range(n):
        regs = _NP_TABLE[(regs ^ body[:, j]) & 0xFF] ^ (regs >> 8)
    shift = _zeros_operator(n)
    for r in regs.tolist():
        crc = _gf2_times(shift, crc) ^ r
    return _crc_raw(memoryview(data)[n * k:], crc)


def crc32c(data):
    """The CRC-32C (Castagnoli) checksum of bytes, as TFRecord files use it.

    >>> hex(tg.io.records.crc32c(b"123456789"))
    '0xe3069283'
    """
    data = bytes(data)
    run = _crc_lanes if len(data) >= _LANES_FROM else _crc_raw
    return run(data, 0xFFFFFFFF) ^ 0xFFFFFFFF


def masked_crc32c(data):
    """TFRecord's masked CRC-32C: the checksum rotated right by 15 bits plus 0xa282ead8.

    >>> hex(tg.io.records.masked_crc32c(b"\\x03" + b"\\x00" * 7))
    '0xe4999b0'
    """
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class TFRecordCompressionType:
    """`tf.compat.v1.io.TFRecordCompressionType`: NONE (0), ZLIB (1), GZIP (2).

    >>> tg.compat.v1.io.TFRecordCompressionType.GZIP
    2
    """
    NONE, ZLIB, GZIP = 0, 1, 2


_COMPRESSION = {None: "", "": "", "ZLIB": "ZLIB", "GZIP": "GZIP",
                TFRecordCompressionType.NONE: "", TFRecordCompressionType.ZLIB: "ZLIB",
                TFRecordCompressionType.GZIP: "GZIP"}


def _compression(value, who):
    if isinstance(value, TFRecordOptions):
        return value.compression_type_string()
    if isinstance(value, Tensor) and value.dtype.is_string and value.ndim == 0:
        value = value.numpy()
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    key = value.upper() if isinstance(value, str) else value
    if isinstance(key, bool) or key not in _COMPRESSION:
        raise ValueError(f"{who}: compression_type must be None, '', 'ZLIB' or 'GZIP' (or a "
                         f"TFRecordCompressionType), got {value!r}")
    return _COMPRESSION[key]


class TFRecordOptions:
    """Options of TFRecord files (`tf.io.TFRecordOptions`): the compression ('', 'ZLIB',
    'GZIP') and zlib's settings (`compression_level`, `window_bits`, `mem_level`,
    `compression_strategy`); buffer sizes and `flush_mode` are accepted.

    >>> tg.io.TFRecordOptions(compression_type="GZIP").compression_type
    'GZIP'
    >>> tg.io.TFRecordOptions.get_compression_type_string("ZLIB")
    'ZLIB'
    """

    compression_type_map = {TFRecordCompressionType.ZLIB: "ZLIB",
                            TFRecordCompressionType.GZIP: "GZIP",
                            TFRecordCompressionType.NONE: ""}

    def __init__(self, compression_type=None, flush_mode=None, input_buffer_size=None,
                 output_buffer_size=None, window_bits=None, compression_level=None,
                 compression_method=None, mem_level=None, compression_strategy=None):
        self.compression_type = _compression(compression_type, "tf.io.TFRecordOptions")
        if compression_level is not None and not -1 <= compression_level <= 9:
            raise ValueError(f"tf.io.TFRecordOptions: compression_level must be in [-1, 9], "
                             f"got {compression_level}")
        if window_bits is not None and not 8 <= window_bits <= 15:
            raise ValueError(f"tf.io.TFRecordOptions: window_bits must be in [8, 15], got "
                             f"{window_bits}")
        if compression_method not in (None, zlib.DEFLATED):
            raise ValueError(f"tf.io.TFRecordOptions: compression_method must be "
                             f"{zlib.DEFLATED} (deflate), got {compression_method!r}")
        self.flush_mode, self.input_buffer_size = flush_mode, input_buffer_size
        self.output_buffer_size, self.window_bits = output_buffer_size, window_bits
        self.compression_level, self.compression_method = compression_level, compression_method
        self.mem_level, self.compression_strategy = mem_level, compression_strategy

    @classmethod
    def get_compression_type_string(cls, options):
        """The compression of `options` (a TFRecordOptions, a string, a
        TFRecordCompressionType or None) as '', 'ZLIB' or 'GZIP'."""
        if options is None:
            return ""
        return _compression(options, "tf.io.TFRecordOptions.get_compression_type_string")

    def compression_type_string(self):
        return self.compression_type

    def _compressor(self):
        level = -1 if self.compression_level is None else self.compression_level
        bits = 15 if self.window_bits is None else self.window_bits
        mem = 8 if self.mem_level is None else self.mem_level
        strategy = 0 if self.compression_strategy is None else self.compression_strategy
        if self.compression_type == "GZIP":
            bits += 16
        return zlib.compressobj(level, zlib.DEFLATED, bits, mem, strategy)

    def __repr__(self):
        return f"TFRecordOptions(compression_type={self.compression_type!r})"


def _options(options, who):
    if isinstance(options, TFRecordOptions):
        return options
    return TFRecordOptions(compression_type=_compression(options, who))


def _path(path, who):
    return path_of(path, who)


def encode_record(data):
    """One record's bytes in the TFRecord framing."""
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + \
        struct.pack("<I", masked_crc32c(data))


class TFRecordWriter:
    """Writes records (bytes) to a TFRecord file (`tf.io.TFRecordWriter(path, options=None)`):
    `write(record)`, `flush()`, `close()`; a context manager. The file is created (truncated)
    when the writer is made.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.tfrecord.gz")
    >>> with tg.io.TFRecordWriter(path, options="GZIP") as w:
    ...     for i in range(3):
    ...         w.write(b"record %d" % i)
    >>> [r.numpy() for r in tg.data.TFRecordDataset(path, compression_type="GZIP")]
    [b'record 0', b'record 1', b'record 2']
    """

    def __init__(self, path, options=None):
        who = "tf.io.TFRecordWriter"
        self._path = _path(path, who)
        self._options = _options(options, who)
        try:
            self._file = open(self._path, "wb")
        except FileNotFoundError:
            raise NotFoundError(f"{who}: {self._path}; No such file or directory") from None
        self._zip = self._options._compressor() if self._options.compression_type else None

    def write(self, record):
        """Appends one record (bytes, str, or a scalar string tensor)."""
        if self._file is None:
            raise ValueError("tf.io.TFRecordWriter.write: the writer is closed")
        if isinstance(record, Tensor):
            if not record.dtype.is_string or record.ndim != 0:
                raise TypeError(f"tf.io.TFRecordWriter.write: record must be a scalar string, "
                                f"got {record.dtype.name} of shape {record.shape}")
            record = record.numpy()
        if isinstance(record, str):
            record = record.encode("utf-8")
        if not isinstance(record, (bytes, bytearray, memoryview)):
            raise TypeError(f"tf.io.TFRecordWriter.write: record must be bytes (e.g. "
                            f"example.SerializeToString()), got {type(record).__name__}")
        data = encode_record(bytes(record))
        self._file.write(self._zip.compress(data) if self._zip else data)

    def flush(self):
        """Writes what is buffered to the file (a compressed stream is flushed so that the
        records so far can be read)."""
        if self._file is None:
            raise ValueError("tf.io.TFRecordWriter.flush: the writer is closed")
        if self._zip:
            self._file.write(self._zip.flush(zlib.Z_SYNC_FLUSH))
        self._file.flush()

    def close(self):
        """Finishes the file (the end of the compressed stream) and closes it."""
        if self._file is None:
            return
        if self._zip:
            self._file.write(self._zip.flush())
        self._file.close()
        self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - an interpreter shutting down
            pass


def open_stream(path, compression, who):
    """A binary stream of the file's (decompressed) contents."""
    try:
        if compression == "GZIP":
            return gzip.open(path, "rb")
        raw = open(path, "rb")
    except FileNotFoundError:
        raise NotFoundError(f"{who}: {path}; No such file or directory") from None
    except IsADirectoryError:
        raise NotFoundError(f"{who}: {path} is a directory, not a file") from None
    return _ZlibReader(raw) if compression == "ZLIB" else raw


class _ZlibReader:
    """A read-only stream of a zlib-compressed file (decompressed a chunk at a time; a read
    moves a position in the buffer instead of copying what is left)."""

    def __init__(self, raw):
        self._raw, self._z = raw, zlib.decompressobj()
        self._buf, self._pos, self._eof = bytearray(), 0, False

    def _fill(self):
        chunk = self._raw.read(1 << 16)
        if self._pos:
            del self._buf[:self._pos]
            self._pos = 0
        try:
            self._buf += self._z.decompress(chunk) if chunk else self._z.flush()
        except zlib.error as e:
            raise DataLossError(f"corrupted ZLIB stream: {e}") from None
        if not chunk:
            self._eof = True

    def read(self, n=-1):
        while not self._eof and (n < 0 or len(self._buf) - self._pos < n):
            self._fill()
        end = len(self._buf) if n < 0 else min(len(self._buf), self._pos + n)
        out = bytes(self._buf[self._pos:end])
        self._pos = end
        return out

    def close(self):
        self._raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def iter_lines(stream, chunk=1 << 20):
    """The lines of a binary stream, without their line ends ('\\n' and a '\\r' before
    it), read a chunk at a time; a last line without '\\n' is a line too."""
    pending = b""
    while True:
        data = stream.read(chunk)
        if not data:
            break
        parts = (pending + data).split(b"\n")
        pending = parts.pop()
        for line in parts:
            yield line[:-1] if line.endswith(b"\r") else line
    if pending:
        yield pending[:-1] if pending.endswith(b"\r") else pending


def read_records(path, compression="", who="tf.data.TFRecordDataset"):
    """Yields the records (bytes) of a TFRecord file, checking both checksums of each."""
    with open_stream(path, compression, who) as f:
        offset = 0
        while True:
            try:
                header = f.read(12)
            except (OSError, EOFError, zlib.error) as e:  # a damaged gzip stream
                raise DataLossError(f"{who}: {path}: corrupted compressed data ({e})") from None
            if not header:
                return
            if len(header) < 12:
                raise DataLossError(f"{who}: truncated record at {offset} in {path}")
            length, crc = struct.unpack("<QI", header)
            if masked_crc32c(header[:8]) != crc:
                raise DataLossError(f"{who}: corrupted record at {offset} in {path} (the "
                                    "length's checksum does not match)")
            try:
                body = f.read(length + 4)
            except (OSError, EOFError, zlib.error) as e:
                raise DataLossError(f"{who}: {path}: corrupted compressed data ({e})") from None
            if len(body) < length + 4:
                raise DataLossError(f"{who}: truncated record at {offset} in {path}")
            data = body[:length]
            if masked_crc32c(data) != struct.unpack("<I", body[length:])[0]:
                raise DataLossError(f"{who}: corrupted record at {offset} in {path} (the "
                                    "data's checksum does not match)")
            yield data
            offset += 16 + length


def tf_record_iterator(path, options=None):
    """`tf.compat.v1.io.tf_record_iterator`: an iterator of the records (bytes) of a TFRecord
    file; `options` a TFRecordOptions or a compression type.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
    >>> with tg.io.TFRecordWriter(path) as w:
    ...     w.write(b"x")
    >>> list(tg.compat.v1.io.tf_record_iterator(path))
    [b'x']
    """
    who = "tf.compat.v1.io.tf_record_iterator"
    return read_records(_path(path, who), _options(options, who).compression_type, who)
