"""Datasets that read files: `tg.data.TFRecordDataset` (the records of TFRecord files),
`tg.data.TextLineDataset` (lines of text files), `tg.data.experimental.CsvDataset` (CSV
records as tuples of scalars) and `tg.data.experimental.make_csv_dataset` (batches of
feature dicts from CSV files with a header).

Files are read in order, one after another, or with `num_parallel_reads=n`, `n` at a time,
one element from each in turn (tf.data's deterministic interleave). Elements are scalar
tensors (tg.string, or the CSV columns' dtypes).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
>>> with open(path, "w") as f:
...     _ = f.write("first\\nsecond\\n")
>>> [x.numpy() for x in tg.data.TextLineDataset(path)]
[b'first', b'second']
"""
import codecs
import collections
import os

import numpy as np

from .. import backends as _backend
from ..core import dtypes
from ..core.tensor import Tensor
from ..errors import DataLossError, InvalidArgumentError
from ..function import TensorSpec
from ..io import csv as _csv
from .. import io as _io
from ..io import gfile as _gfile
from ..io import records as _records
from .dataset import AUTOTUNE, UNKNOWN_CARDINALITY, Dataset, _count

__all__ = ["TFRecordDataset", "TextLineDataset", "FixedLengthRecordDataset", "CsvDataset",
           "make_csv_dataset", "TFRecordWriter", "make_batched_features_dataset"]


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


def _csv_records(lines, use_quote):
    """CSV records from lines: a line that leaves a quoted field open continues with the
    next one (a quoted field may hold line breaks)."""
    pending = None
    for line in lines:
        pending = line if pending is None else pending + b"\n" + line
        if use_quote and pending.count(b'"') % 2:
            continue
        yield pending
        pending = None
    if pending is not None:
        yield pending


class CsvDataset(_FileSource):
    """The records of CSV files as tuples of scalar tensors, one per column
    (`tf.data.experimental.CsvDataset(filenames, record_defaults, compression_type=None,
    buffer_size=None, header=False, field_delim=',', use_quote_delim=True, na_value='',
    select_cols=None, exclude_cols=None)`); `record_defaults` as in `tg.io.decode_csv`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "c.csv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("a,b\\n1,x\\n,y\\n")
    >>> ds = tg.data.experimental.CsvDataset(path, [tg.constant([0], tg.int64), tg.string],
    ...                                      header=True)
    >>> [(int(a), b.numpy()) for a, b in ds]
    [(1, b'x'), (0, b'y')]
    """

    _who = "tf.data.experimental.CsvDataset"
    _ignore_errors = False

    def __init__(self, filenames, record_defaults, compression_type=None, buffer_size=None,
                 header=False, field_delim=",", use_quote_delim=True, na_value="",
                 select_cols=None, exclude_cols=None, name=None):
        self._setup(filenames, None)
        self._compression = _records._compression(compression_type, self._who)
        self._columns = _csv.column_defaults(record_defaults, self._who)
        if select_cols is not None and exclude_cols is not None:
            raise ValueError(f"{self._who}: select_cols and exclude_cols cannot be given "
                             "together")
        self._exclude = None
        if exclude_cols is not None:
            self._exclude = sorted(set(int(c) for c in exclude_cols))
        self._delim, self._na, self._select = _csv.check_options(
            field_delim, na_value, select_cols, len(self._columns), self._who)
        self._header, self._quote = bool(header), bool(use_quote_delim)

    def _read(self, path):
        records = _csv_records(_lines(path, self._compression, self._who), self._quote)
        if self._header:
            next(records, None)
        for index, record in enumerate(records):
            select = self._select
            if self._exclude is not None:
                n = len(_csv.split_record(record, self._delim, self._quote, index, self._who))
                select = [c for c in range(n) if c not in self._exclude]
                if len(select) != len(self._columns):
                    raise ValueError(f"{self._who}: record {index} has {n} fields; without "
                                     f"exclude_cols {self._exclude} that leaves {len(select)} "
                                     f"but record_defaults has {len(self._columns)}")
            try:
                row = _csv.parse_row(record, self._columns, self._delim, self._quote,
                                     self._na, select, index, self._who)
            except InvalidArgumentError:
                if self._ignore_errors:  # make_csv_dataset(ignore_errors=True): skip it
                    continue
                raise
            yield tuple(_csv.column_tensor([v], dtype, ())
                        for v, (dtype, _) in zip(row, self._columns))

    def _spec(self):
        return tuple(TensorSpec((), dtype) for dtype, _ in self._columns)


def _infer_type(field, previous):
    """The first of int32, int64, float32, float64, string that holds `field` and is no
    narrower than `previous` (TensorFlow's inference for make_csv_dataset: a float must parse
    to less than infinity in the dtype, so 'nan', 'inf' and 1e40 for float32 do not)."""
    order = [dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64, dtypes.string]
    start = order.index(previous) if previous is not None else 0
    for dtype in order[start:]:
        if dtype.is_string:
            return dtype
        try:
            value = _csv.convert_field(field, dtype, None, None, 0, 0, "")
        except Exception:  # noqa: BLE001 - not of this dtype
            continue
        if dtype.is_floating:
            with np.errstate(over="ignore"):
                if not dtype._np.type(value) < np.inf:
                    continue
        return dtype
    return dtypes.string


def _inferred_default(dtype):
    """make_csv_dataset's default for an inferred column: 0, or '' for strings (optional)."""
    if dtype.is_string:
        arr = np.empty(1, dtype=object)
        arr[0] = b""
        return Tensor(arr, _backend.lookup("cpu"))
    return Tensor(np.zeros(1, dtype=dtype._np), _backend.lookup("cpu"))


def make_csv_dataset(file_pattern, batch_size, column_names=None, column_defaults=None,
                     label_name=None, select_columns=None, field_delim=",",
                     use_quote_delim=True, na_value="", header=True, num_epochs=None,
                     shuffle=True, shuffle_buffer_size=10000, shuffle_seed=None,
                     prefetch_buffer_size=None, num_parallel_reads=None, sloppy=False,
                     num_rows_for_inference=100, compression_type=None, ignore_errors=False,
                     encoding="utf-8"):
    """Batches of `(features, label)` read from CSV files (`tf.data.experimental.
    make_csv_dataset`): `features` an OrderedDict from column name to a `[batch]` tensor,
    `label` the `label_name` column (without it, the features alone). Column names come from
    the first file's header unless given; dtypes from `column_defaults` (a dtype or an empty
    tensor: a required column), or inferred from the first `num_rows_for_inference` rows
    (int32, int64, float32, float64 or string; missing values then default to 0 or '').
    `ignore_errors=True` skips the records that fail to parse; `encoding` decodes the header.
    The files are shuffled and the records shuffled with a buffer of `shuffle_buffer_size`
    when `shuffle`; `num_epochs=None` repeats forever (and drops the last, partial batch, as
    TensorFlow does).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("x,y,label\\n1,0.5,0\\n2,1.5,1\\n3,2.5,0\\n")
    >>> ds = tg.data.experimental.make_csv_dataset(path, batch_size=3, label_name="label",
    ...                                            num_epochs=1, shuffle=False)
    >>> features, label = next(iter(ds))
    >>> list(features), features["y"].numpy().tolist(), label.numpy().tolist()
    (['x', 'y'], [0.5, 1.5, 2.5], [0, 1, 0])
    """
    who = "tf.data.experimental.make_csv_dataset"
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise ValueError(f"{who}: unknown encoding {encoding!r}") from None
    batch_size = _count(batch_size, who, "batch_size", 1)
    files = _gfile.glob(file_pattern)
    if not files:
        raise ValueError(f"{who}: No files match `file_pattern` {file_pattern!r}.")
    compression = _records._compression(compression_type, who)
    delim = field_delim.decode("latin-1") if isinstance(field_delim, bytes) else field_delim
    na = na_value.encode("utf-8") if isinstance(na_value, str) else bytes(na_value)

    def first_records(n):
        out = []
        for path in files:
            records = _csv_records(_lines(path, compression, who), use_quote_delim)
            if header:
                next(records, None)
            for r in records:
                if n is not None and len(out) >= n:
                    return out
                out.append(_csv.split_record(r, delim, use_quote_delim, len(out), who))
        return out

    if column_names is None:
        if not header:
            raise ValueError(f"{who}: Cannot infer column names without a header line: give "
                             "column_names or header=True")
        head = next(_csv_records(_lines(files[0], compression, who), use_quote_delim), None)
        if head is None:
            raise ValueError(f"{who}: the file {files[0]} is empty: no header line")
        column_names = [f.decode(encoding) for f in
                        _csv.split_record(head, delim, use_quote_delim, 0, who)]
        for path in files[1:]:
            other = next(_csv_records(_lines(path, compression, who), use_quote_delim), None)
            if other is None or [f.decode(encoding) for f in _csv.split_record(
                    other, delim, use_quote_delim, 0, who)] != column_names:
                raise ValueError(f"{who}: Files have different column names in the header "
                                 f"row ({files[0]} and {path}).")
    column_names = list(column_names)
    if len(set(column_names)) != len(column_names):
        raise ValueError(f"{who}: Cannot have duplicate column names: {column_names}")
    if select_columns is not None:
        if all(isinstance(c, int) for c in select_columns):
            indices = sorted(set(select_columns))
        else:
            missing = [c for c in select_columns if c not in column_names]
            if missing:
                raise ValueError(f"{who}: select_columns {missing} are not among the column "
                                 f"names {column_names}")
            indices = sorted(column_names.index(c) for c in select_columns)
        if indices and indices[-1] >= len(column_names):
            raise ValueError(f"{who}: select_columns {select_columns} out of range for "
                             f"{len(column_names)} columns")
    else:
        indices = list(range(len(column_names)))
    names = [column_names[i] for i in indices]
    if label_name is not None and label_name not in names:
        raise ValueError(f"{who}: `label_name` provided must be one of the columns: {names}")
    if column_defaults is None:
        inferred = [None] * len(indices)
        for fields in first_records(num_rows_for_inference):
            for k, i in enumerate(indices):
                if i < len(fields) and fields[i] not in (b"", na):
                    inferred[k] = _infer_type(fields[i], inferred[k])
        column_defaults = [_inferred_default(t or dtypes.string) for t in inferred]
    elif len(column_defaults) != len(indices):
        raise ValueError(f"{who}: column_defaults has {len(column_defaults)} entries for "
                         f"{len(indices)} " + ("selected columns: if specified, "
                                               "column_defaults and select_columns must have "
                                               "same length" if select_columns is not None
                                               else "columns"))
    dataset = Dataset.from_tensor_slices(files)
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=shuffle_seed)

    def read(filename):
        ds = CsvDataset(filename, column_defaults, compression_type=compression,
                        header=header, field_delim=delim, use_quote_delim=use_quote_delim,
                        na_value=na_value, select_cols=indices)
        ds._ignore_errors = bool(ignore_errors)
        return ds

    cycle = 1 if num_parallel_reads is None else num_parallel_reads
    dataset = dataset.interleave(read, cycle_length=cycle, block_length=1)
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=shuffle_seed)
    if num_epochs != 1:
        dataset = dataset.repeat(num_epochs)
    dataset = dataset.batch(batch_size, drop_remainder=num_epochs is None)

    def to_dict(*columns):
        features = collections.OrderedDict(zip(names, columns))
        if label_name is None:
            return features
        label = features.pop(label_name)
        return features, label

    dataset = dataset.map(to_dict)
    buffer = AUTOTUNE if prefetch_buffer_size is None else prefetch_buffer_size
    return dataset.prefetch(buffer)



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
