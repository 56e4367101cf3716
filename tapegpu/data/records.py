"""Datasets that read files: `tg.data.TFRecordDataset` (the records of TFRecord files),
`tg.data.TextLineDataset` (lines of text files), `tg.data.FixedLengthRecordDataset`, and
`tg.data.experimental.TFRecordWriter` / `make_batched_features_dataset` (CSV files: csv.py).

Files are read in order, one after another, or with `num_parallel_reads=n`, `n` at a time,
one element from each in turn (tf.data's deterministic interleave). Elements are scalar
tensors of tg.string.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
>>> with open(path, "w") as f:
...     _ = f.write("first\\nsecond\\n")
>>> [x.numpy() for x in tg.data.TextLineDataset(path)]
[b'first', b'second']
"""
import os

import numpy as np

from .. import backends as _backend
from ..core import dtypes
from ..core.tensor import Tensor
from ..errors import DataLossError, InvalidArgumentError
from ..function import TensorSpec
from .. import io as _io
from ..io import gfile as _gfile
from ..io import records as _records
from .dataset import AUTOTUNE, UNKNOWN_CARDINALITY, Dataset, _count

__all__ = ["TFRecordDataset", "TextLineDataset", "FixedLengthRecordDataset", "TFRecordWriter",
           "make_batched_features_dataset"]


def _string(data):
    arr = np.empty((), dtype=object)
    arr[()] = data
    return Tensor(arr, _backend.lookup("cpu"))


def _filenames(filenames, who):
    """The file names (str) of a str / bytes / list / string tensor, or a Dataset of them
    (returned as is, read when iterated)."""
    if isinstance(filenames, Dataset):
        spec = filenames.element_spec
        if not isinstance(spec, TensorSpec) or not spec.dtype.is_string or len(spec.shape):
            raise TypeError(f"{who}: a dataset of filenames must have scalar tg.string "
                            f"elements, got {spec}")
        return filenames
    if isinstance(filenames, Tensor):
        if not filenames.dtype.is_string or filenames.ndim > 1:
            raise TypeError(f"{who}: filenames must be a scalar or 1-D tg.string tensor, got "
                            f"{filenames.dtype.name} of shape {filenames.shape}")
        filenames = list(np.asarray(filenames.numpy(), dtype=object).reshape(-1))
    if isinstance(filenames, (str, bytes, os.PathLike)):
        filenames = [filenames]
    if not isinstance(filenames, (list, tuple)):
        raise TypeError(f"{who}: filenames must be a string, a list of strings, a tg.string "
                        f"tensor or a dataset of them, got {type(filenames).__name__}")
    out = []
    for f in filenames:
        if isinstance(f, Tensor):
            f = f.numpy()
        if isinstance(f, bytes):
            f = f.decode("utf-8")
        if not isinstance(f, (str, os.PathLike)):
            raise TypeError(f"{who}: each filename must be a string, got {f!r}")
        out.append(os.fspath(f))
    return out


class _FileSource(Dataset):
    """Elements read file by file by `self._read(path)`."""

    _who = "tf.data"

    def _setup(self, filenames, num_parallel_reads):
        self._files = _filenames(filenames, self._who)
        self._parallel = None
        if num_parallel_reads is not None:
            n = _count(num_parallel_reads, self._who, "num_parallel_reads", AUTOTUNE)
            if n == 0:
                raise ValueError(f"{self._who}: num_parallel_reads must be positive or "
                                 "tg.data.AUTOTUNE, got 0")
            self._parallel = n

    def _paths(self):
        if isinstance(self._files, Dataset):
            for f in self._files:
                yield f.numpy().decode("utf-8")
        else:
            yield from self._files

    def _iterate(self, ctx):
        if self._parallel is None or self._parallel == 1:
            for path in self._paths():
                yield from self._read(path)
            return
        paths = list(self._paths())
        if not paths:
            return
        files = Dataset.from_tensor_slices(paths)
        reading = files.interleave(lambda f: _OneFile(self, f.numpy().decode("utf-8")),
                                   cycle_length=self._parallel, block_length=1)
        yield from reading._iterate(ctx)

    def _card(self):
        return UNKNOWN_CARDINALITY


class _OneFile(Dataset):
    def __init__(self, source, path):
        self._source, self._path = source, path

    def _iterate(self, ctx):
        return self._source._read(self._path)

    def _spec(self):
        return self._source.element_spec

    def _card(self):
        return UNKNOWN_CARDINALITY


class TFRecordDataset(_FileSource):
    """The records of one or more TFRecord files, as scalar tg.string tensors
    (`tf.data.TFRecordDataset(filenames, compression_type=None, buffer_size=None,
    num_parallel_reads=None)`); each record's checksums are verified
    (`tg.errors.DataLossError` when they do not match).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "r.tfrecord")
    >>> with tg.io.TFRecordWriter(path) as w:
    ...     w.write(tg.train.Example(features=tg.train.Features(feature={"y": tg.train.Feature(
    ...         int64_list=tg.train.Int64List(value=[5]))})).SerializeToString())
    >>> ds = tg.data.TFRecordDataset([path]).map(lambda r: tg.io.parse_single_example(
    ...     r, {"y": tg.io.FixedLenFeature([], tg.int64)}))
    >>> [int(e["y"]) for e in ds]
    [5]
    """

    _who = "tf.data.TFRecordDataset"

    def __init__(self, filenames, compression_type=None, buffer_size=None,
                 num_parallel_reads=None, name=None):
        self._setup(filenames, num_parallel_reads)
        self._compression = _records._compression(compression_type, self._who)

    def _read(self, path):
        for record in _records.read_records(path, self._compression, self._who):
            yield _string(record)

    def _spec(self):
        return TensorSpec((), dtypes.string)


def _lines(path, compression, who):
    """The lines of a file, without their line ends ('\\n' and a '\\r' before it), read a
    chunk at a time."""
    with _records.open_stream(path, compression, who) as f:
        yield from _records.iter_lines(f)


class TextLineDataset(_FileSource):
    """The lines of one or more text files, without their line ends, as scalar tg.string
    tensors (`tf.data.TextLineDataset(filenames, compression_type=None, buffer_size=None,
    num_parallel_reads=None)`).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "b.txt")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"a\\r\\n\\nb")
    >>> [x.numpy() for x in tg.data.TextLineDataset(path)]
    [b'a', b'', b'b']
    """

    _who = "tf.data.TextLineDataset"

    def __init__(self, filenames, compression_type=None, buffer_size=None,
                 num_parallel_reads=None, name=None):
        self._setup(filenames, num_parallel_reads)
        self._compression = _records._compression(compression_type, self._who)

    def _read(self, path):
        for line in _lines(path, self._compression, self._who):
            yield _string(line)

    def _spec(self):
        return TensorSpec((), dtypes.string)


class FixedLengthRecordDataset(_FileSource):
    """Records of `record_bytes` bytes each from one or more files, after `header_bytes` and
    before `footer_bytes` of each file, as scalar tg.string tensors
    (`tf.data.FixedLengthRecordDataset(filenames, record_bytes, header_bytes=None,
    footer_bytes=None, buffer_size=None, compression_type=None, num_parallel_reads=None)`).
    A file whose body is not a whole number of records is a DataLossError.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "f.bin")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"HDRaabbccFT")
    >>> ds = tg.data.FixedLengthRecordDataset(path, 2, header_bytes=3, footer_bytes=2)
    >>> [x.numpy() for x in ds]
    [b'aa', b'bb', b'cc']
    """

    _who = "tf.data.FixedLengthRecordDataset"

    def __init__(self, filenames, record_bytes, header_bytes=None, footer_bytes=None,
                 buffer_size=None, compression_type=None, num_parallel_reads=None, name=None):
        self._setup(filenames, num_parallel_reads)
        self._record = _count(record_bytes, self._who, "record_bytes", 1)
        self._header = _count(header_bytes, self._who, "header_bytes", 0, none_as=0)
        self._footer = _count(footer_bytes, self._who, "footer_bytes", 0, none_as=0)
        self._compression = _records._compression(compression_type, self._who)

    def _read(self, path):
        """The records, read a block at a time; the last `footer_bytes` are held back until
        the end shows they are the footer."""
        record, footer = self._record, self._footer
        block = max(record, (1 << 20) // record * record)
        with _records.open_stream(path, self._compression, self._who) as f:
            head = f.read(self._header)
            buf, pos, body = bytearray(), 0, 0
            while True:
                data = f.read(block)
                if data:
                    del buf[:pos]
                    pos = 0
                    buf += data
                    while len(buf) - pos >= record + footer:
                        yield _string(bytes(buf[pos:pos + record]))
                        pos += record
                        body += record
                    continue
                left = len(buf) - pos
                if len(head) < self._header or left != footer:
                    raise DataLossError(
                        f"{self._who}: Excluding the header ({self._header} bytes) and footer "
                        f"({footer} bytes), input file \"{path}\" has body length "
                        f"{max(body + left - footer, 0)} bytes, which is not an exact multiple "
                        f"of the record length ({record} bytes).")
                return

    def _spec(self):
        return TensorSpec((), dtypes.string)


class TFRecordWriter:
    """Writes a dataset of scalar strings to a TFRecord file
    (`tf.data.experimental.TFRecordWriter(filename, compression_type=None)`): `write(dataset)`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "w.tfrecord")
    >>> tg.data.experimental.TFRecordWriter(path).write(
    ...     tg.data.Dataset.from_tensor_slices([b"a", b"b"]))
    >>> [x.numpy() for x in tg.data.TFRecordDataset(path)]
    [b'a', b'b']
    """

    def __init__(self, filename, compression_type=None):
        self._who = "tf.data.experimental.TFRecordWriter"
        self._path = _records._path(filename, self._who)
        self._options = _records.TFRecordOptions(
            _records._compression(compression_type, self._who))

    def write(self, dataset):
        """Writes every element of `dataset` (scalar tg.string tensors) as a record."""
        if not isinstance(dataset, Dataset):
            raise TypeError(f"{self._who}.write: expected a tg.data.Dataset, got "
                            f"{type(dataset).__name__}")
        spec = dataset.element_spec
        if not isinstance(spec, TensorSpec) or not spec.dtype.is_string or len(spec.shape):
            raise TypeError(f"{self._who}.write: the dataset's elements must be scalar "
                            f"tg.string tensors, got {spec}")
        with _records.TFRecordWriter(self._path, self._options) as writer:
            for element in dataset:
                writer.write(element)


def make_batched_features_dataset(file_pattern, batch_size, features, reader=None,
                                  label_key=None, reader_args=None, num_epochs=None,
                                  shuffle=True, shuffle_buffer_size=10000, shuffle_seed=None,
                                  prefetch_buffer_size=None, reader_num_threads=None,
                                  parser_num_threads=None, sloppy_ordering=False,
                                  drop_final_batch=False):
    """Batches of parsed `tf.train.Example`s read from files
    (`tf.data.experimental.make_batched_features_dataset`): the files matching
    `file_pattern` are read with `reader` (default `tg.data.TFRecordDataset`, given
    `reader_args` after the file name), shuffled when `shuffle`, repeated `num_epochs` times
    (forever when None), batched and parsed with `tg.io.parse_example(batch, features)`;
    with `label_key`, elements are `(features, label)`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "e.tfrecord")
    >>> with tg.io.TFRecordWriter(path) as w:
    ...     for i in range(3):
    ...         w.write(tg.train.Example(features=tg.train.Features(feature={"x": tg.train.Feature(
    ...             int64_list=tg.train.Int64List(value=[i]))})).SerializeToString())
    >>> ds = tg.data.experimental.make_batched_features_dataset(
    ...     path, 2, {"x": tg.io.FixedLenFeature([], tg.int64)}, num_epochs=1, shuffle=False)
    >>> [b["x"].numpy().tolist() for b in ds]
    [[0, 1], [2]]
    """
    who = "tf.data.experimental.make_batched_features_dataset"
    batch_size = _count(batch_size, who, "batch_size", 1)
    files = _gfile.glob(file_pattern)
    if not files:
        raise InvalidArgumentError(f"{who}: No files matched pattern: {file_pattern}")
    if label_key is not None and label_key not in features:
        raise ValueError(f"{who}: The `label_key` provided ({label_key!r}) must be one of the "
                         f"`features` keys.")
    reader = TFRecordDataset if reader is None else reader
    args = list(reader_args or [])
    dataset = Dataset.from_tensor_slices(files)
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=shuffle_seed)
    cycle = 1 if reader_num_threads is None else reader_num_threads
    dataset = dataset.interleave(lambda f: reader(f, *args), cycle_length=cycle,
                                 block_length=1)
    spec = dataset.element_spec
    if isinstance(spec, tuple) and len(spec) == 2 and all(
            isinstance(x, TensorSpec) and x.dtype.is_string for x in spec):
        dataset = dataset.map(lambda _, value: value)  # (key, value) records: the values
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=shuffle_seed)
    if num_epochs != 1:
        dataset = dataset.repeat(num_epochs)
    # repeating forever, every batch is full: TensorFlow drops the (never reached) remainder
    dataset = dataset.batch(batch_size, drop_remainder=drop_final_batch or num_epochs is None)

    def parse(records):
        parsed = _io.parse_example(records, features)
        if label_key is None:
            return parsed
        return parsed, parsed.pop(label_key)

    dataset = dataset.map(parse)
    return dataset.prefetch(AUTOTUNE if prefetch_buffer_size is None else prefetch_buffer_size)
