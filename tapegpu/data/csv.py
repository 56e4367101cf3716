"""CSV files as datasets: `tg.data.experimental.CsvDataset` (records as tuples of scalars, one
per column) and `tg.data.experimental.make_csv_dataset` (batches of feature dicts, columns
named by the header and typed by inference). Records are split and converted by
tapegpu/io/csv.py, as `tg.io.decode_csv` does.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "a.csv")
>>> with open(path, "w") as f:
...     _ = f.write("x,y\\n1,2.5\\n")
>>> [(int(x), float(y)) for x, y in tg.data.experimental.CsvDataset(path, [[0], [0.0]],
...                                                                  header=True)]
[(1, 2.5)]
"""
import codecs
import collections

import numpy as np

from .. import backends as _backend
from ..core import dtypes
from ..core.tensor import Tensor
from ..errors import InvalidArgumentError
from ..function import TensorSpec
from ..io import csv as _csv
from ..io import gfile as _gfile
from ..io import records as _records
from .dataset import AUTOTUNE, Dataset, _count
from .records import _FileSource, _lines

__all__ = ["CsvDataset", "make_csv_dataset"]


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
