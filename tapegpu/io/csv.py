"""CSV records to tensors: `tg.io.decode_csv`, and the record splitting and field conversion
that `tg.data.experimental.CsvDataset` shares with it.

A record is split on `field_delim`; with `use_quote_delim`, a field that starts with `"` runs
to the next lone `"` (`""` inside stands for one quote) and may hold the delimiter. An empty
field, or one equal to `na_value`, takes its column's default; a column whose default is
empty is required. Numbers are parsed as the column's dtype (int32, int64, float32, float64)
and a field that is not one is an InvalidArgumentError naming the field and the record.

>>> a, b = tg.io.decode_csv(["1,x", "2,\\"y,z\\""], [[0], [""]])
>>> a.numpy().tolist(), b.numpy().tolist()
([1, 2], [b'x', b'y,z'])
"""
import re

import numpy as np

from .. import backends as _backend
from ..core import dtypes
from ..core.tensor import Tensor, convert_to_tensor
from ..errors import InvalidArgumentError
from .tensors import host_array

__all__ = ["decode_csv"]

_CSV_DTYPES = ("float32", "float64", "int32", "int64", "string")
_INT = re.compile(rb"^\s*[+-]?[0-9]+\s*$")
_FLOAT = re.compile(rb"^\s*[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|inf|infinity|nan)"
                    rb"\s*$", re.IGNORECASE)


def split_record(record, delim, use_quote, index, who):
    """The fields (bytes) of one CSV record (bytes)."""
    fields, i, n = [], 0, len(record)
    d, q = ord(delim), ord('"')
    while True:
        if use_quote and i < n and record[i] == q:
            out, i = bytearray(), i + 1
            while True:
                if i >= n:
                    raise InvalidArgumentError(f"{who}: Quoted field has to end with quote "
                                               f"followed by delim or end (record {index})")
                if record[i] == q:
                    if i + 1 < n and record[i + 1] == q:
                        out.append(q)
                        i += 2
                        continue
                    i += 1
                    break
                out.append(record[i])
                i += 1
            if i < n and record[i] != d:
                raise InvalidArgumentError(f"{who}: Quoted field has to end with quote followed "
                                           f"by delim or end (record {index})")
            fields.append(bytes(out))
        else:
            j = record.find(delim.encode("latin-1"), i)
            j = n if j < 0 else j
            field = record[i:j]
            if use_quote and b'"' in field:
                raise InvalidArgumentError(f"{who}: Unquoted fields cannot have quotes inside "
                                           f"(record {index}: {bytes(record)!r})")
            fields.append(bytes(field))
            i = j
        if i >= n:
            return fields
        i += 1  # the delimiter
        if i == n:
            fields.append(b"")
            return fields


def column_defaults(record_defaults, who):
    """[(dtype, default host value or None)] of `record_defaults`: each a one-element list or
    tensor (the default) or an empty one of the column's dtype (a required column)."""
    if not isinstance(record_defaults, (list, tuple)):
        raise TypeError(f"{who}: record_defaults must be a list (one entry per column), got "
                        f"{type(record_defaults).__name__}")
    out = []
    for i, d in enumerate(record_defaults):
        if isinstance(d, dtypes.DType):
            t = _empty(d)
        elif isinstance(d, Tensor):
            t = d
        elif isinstance(d, (list, tuple)) and len(d) == 0:
            t = _empty(dtypes.float32)
        else:
            t = convert_to_tensor(d)
        dtype = t.dtype
        if dtype.name not in _CSV_DTYPES:
            raise TypeError(f"{who}: record_defaults[{i}] has dtype {dtype.name}; CSV columns "
                            f"are one of {', '.join(_CSV_DTYPES)}")
        if t.size > 1:
            raise ValueError(f"{who}: record_defaults[{i}] must have at most one element (the "
                             f"default), got shape {t.shape}")
        value = None if t.size == 0 else np.asarray(t.numpy()).reshape(-1)[0]
        out.append((dtype, value))
    return out


def _empty(dtype):
    dtype = dtypes.as_dtype(dtype)
    if dtype.is_string:
        return Tensor(np.empty(0, dtype=object), _backend.lookup("cpu"))
    return convert_to_tensor(np.zeros(0, dtype=dtype._np))


def convert_field(field, dtype, default, na_value, column, index, who):
    """The value of one field for its column."""
    if field == b"" or field == na_value:
        if default is None:
            raise InvalidArgumentError(f"{who}: Field {column} is required but missing in record "
                                       f"{index}!")
        return default
    name = dtype.name
    if name == "string":
        return field
    if name.startswith("int"):
        if not _INT.match(field):
            raise InvalidArgumentError(f"{who}: Field {column} in record {index} is not a valid "
                                       f"{name}: {field.decode('utf-8', 'replace')}")
        v = int(field)
        info = np.iinfo(dtype._np)
        if not info.min <= v <= info.max:
            raise InvalidArgumentError(f"{who}: Field {column} in record {index} is not a valid "
                                       f"{name}: {field.decode('utf-8', 'replace')}")
        return v
    if not _FLOAT.match(field):
        raise InvalidArgumentError(f"{who}: Field {column} in record {index} is not a valid "
                                   f"{'float' if name == 'float32' else 'double'}: "
                                   f"{field.decode('utf-8', 'replace')}")
    return float(field)


def check_options(field_delim, na_value, select_cols, ncols, who):
    if not isinstance(field_delim, (str, bytes)) or len(field_delim) != 1:
        raise ValueError(f"{who}: field_delim must be one character, got {field_delim!r}")
    if isinstance(field_delim, bytes):
        field_delim = field_delim.decode("latin-1")
    na = na_value.encode("utf-8") if isinstance(na_value, str) else bytes(na_value)
    if select_cols is not None:
        select_cols = [int(c) for c in select_cols]
        if any(c < 0 for c in select_cols) or select_cols != sorted(set(select_cols)):
            raise ValueError(f"{who}: select_cols must be non-negative and strictly increasing, "
                             f"got {select_cols}")
        if len(select_cols) != ncols:
            raise ValueError(f"{who}: record_defaults has {ncols} entries but select_cols "
                             f"{len(select_cols)}; give one default per selected column")
    return field_delim, na, select_cols


def parse_row(record, columns, delim, use_quote, na, select_cols, index, who):
    """The converted values of one record (a list, one per column)."""
    fields = split_record(record, delim, use_quote, index, who)
    if select_cols is None:
        if len(fields) != len(columns):
            raise InvalidArgumentError(f"{who}: Expect {len(columns)} fields but have "
                                       f"{len(fields)} in record {index}")
    else:
        if select_cols and select_cols[-1] >= len(fields):
            raise InvalidArgumentError(f"{who}: Expect at least {select_cols[-1] + 1} fields "
                                       f"but have {len(fields)} in record {index}")
        fields = [fields[c] for c in select_cols]
    return [convert_field(f, dtype, default, na, k if select_cols is None else select_cols[k],
                          index, who)
            for k, (f, (dtype, default)) in enumerate(zip(fields, columns))]


def column_tensor(values, dtype, shape):
    if dtype.is_string:
        arr = np.empty(len(values), dtype=object)
        arr[:] = [bytes(v) for v in values]
        return Tensor(arr.reshape(shape), _backend.lookup("cpu"))
    return convert_to_tensor(np.array(values, dtype=dtype._np).reshape(shape))


def decode_csv(records, record_defaults, field_delim=",", use_quote_delim=True, na_value="",
               select_cols=None, name=None):
    """Converts CSV records (a string tensor of any shape) to one tensor per column, each of
    the records' shape (`tf.io.decode_csv`). `record_defaults` gives each column's dtype and
    default: `[0.0]` a float32 column defaulting to 0, `[0]` int32, `[""]` string,
    `tg.constant([], tg.int64)` (or a dtype) a required int64 column.

    >>> x, y = tg.io.decode_csv(tg.constant(["1.5,", ",7"]), [[0.0], [-1]])
    >>> x.numpy().tolist(), y.numpy().tolist()
    ([1.5, 0.0], [-1, 7])
    """
    who = "tf.io.decode_csv"
    columns = column_defaults(record_defaults, who)
    delim, na, select_cols = check_options(field_delim, na_value, select_cols, len(columns), who)
    t = records if isinstance(records, Tensor) else convert_to_tensor(records)
    if not t.dtype.is_string:
        raise TypeError(f"{who}: records must be a tg.string tensor, got {t.dtype.name}")
    arr = host_array(t)
    rows = [parse_row(bytes(r), columns, delim, use_quote_delim, na, select_cols, i, who)
            for i, r in enumerate(arr.reshape(-1))]
    return [column_tensor([row[k] for row in rows], dtype, arr.shape)
            for k, (dtype, _) in enumerate(columns)]
