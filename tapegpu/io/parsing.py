"""Parsing serialized `tf.train.Example` records into tensors: `tg.io.parse_single_example`,
`parse_example` (SequenceExamples: sequence.py), and the feature descriptions
`FixedLenFeature`, `FixedLenSequenceFeature`, `VarLenFeature`, `RaggedFeature`,
`SparseFeature`.

A feature's values are read from its `bytes_list` (dtype tg.string), `float_list`
(tg.float32) or `int64_list` (tg.int64); those are the only dtypes a description may ask for.
Records are decoded straight from the protobuf wire format (tapegpu/train/example.py describes
it); only the features asked for are decoded.

>>> ex = tg.train.Example(features=tg.train.Features(feature={
...     "label": tg.train.Feature(int64_list=tg.train.Int64List(value=[3])),
...     "xy": tg.train.Feature(float_list=tg.train.FloatList(value=[0.5, 1.5]))}))
>>> out = tg.io.parse_single_example(ex.SerializeToString(), {
...     "label": tg.io.FixedLenFeature([], tg.int64),
...     "xy": tg.io.FixedLenFeature([2], tg.float32)})
>>> int(out["label"]), out["xy"].numpy().tolist()
(3, [0.5, 1.5])
"""
import collections

import numpy as np

from .. import backends as _backend
from ..core import dtypes
from ..core.tensor import Tensor, convert_to_tensor
from ..errors import InvalidArgumentError
from ..ragged import RaggedTensor
from ..sparse import SparseTensor
from ..train.protobuf import DecodeError, _fields, _signed64, packed_varints
from .tensors import host_array

__all__ = ["FixedLenFeature", "FixedLenSequenceFeature", "VarLenFeature", "RaggedFeature",
           "SparseFeature", "parse_single_example", "parse_example"]

_KIND_OF = {"string": 1, "float32": 2, "int64": 3}  # Feature's field number for each dtype
_KIND_NAME = {1: "string", 2: "float", 3: "int64"}


def _feature_dtype(dtype, who):
    dtype = dtypes.as_dtype(dtype)
    if dtype.name not in _KIND_OF:
        raise ValueError(f"{who}: unsupported dtype {dtype.name}: a feature holds tg.string "
                         "(bytes_list), tg.float32 (float_list) or tg.int64 (int64_list)")
    return dtype


def _shape(shape, who):
    if shape is None:
        raise ValueError(f"{who}: shape must be given (a list of ints; [] for a scalar)")
    if isinstance(shape, int):
        shape = [shape]
    out = []
    for d in shape:
        d = getattr(d, "value", d)
        if d is None or int(d) < 0:
            raise ValueError(f"{who}: every dimension of shape must be known, got {shape}")
        out.append(int(d))
    return tuple(out)


class FixedLenFeature(collections.namedtuple("FixedLenFeature",
                                             ["shape", "dtype", "default_value"])):
    """A feature of a fixed number of values (`tf.io.FixedLenFeature(shape, dtype,
    default_value=None)`): parsed to a tensor of `shape`; a record without the feature gets
    `default_value` (reshaped to `shape`), or fails when there is none.

    >>> tg.io.FixedLenFeature([2], tg.float32)
    FixedLenFeature(shape=[2], dtype=tg.float32, default_value=None)
    """

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


class FixedLenSequenceFeature(collections.namedtuple(
        "FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"])):
    """A feature list whose every step has `shape` values (`tf.io.FixedLenSequenceFeature`):
    parsed to a tensor `[steps] + shape`; in `parse_example`, a feature of a variable number of
    `shape`-sized values, padded with `default_value` (needs `allow_missing=True`).

    >>> tg.io.FixedLenSequenceFeature([], tg.int64, allow_missing=True).allow_missing
    True
    """

    def __new__(cls, shape, dtype, allow_missing=False, default_value=None):
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A feature of any number of values (`tf.io.VarLenFeature(dtype)`), parsed to a
    `tg.SparseTensor`.

    >>> tg.io.VarLenFeature(tg.string)
    VarLenFeature(dtype=tg.string)
    """


class RaggedFeature(collections.namedtuple(
        "RaggedFeature", ["dtype", "value_key", "partitions", "row_splits_dtype", "validate"])):
    """A feature of any number of values parsed to a ragged tensor (`tf.io.RaggedFeature(dtype,
    value_key=None, partitions=(), row_splits_dtype=tg.int32, validate=False)`):
    `parse_example` gives a `tg.RaggedTensor` [batch, (values)], `parse_single_example` a
    1-D tensor. `value_key` names the feature to read (default: the description's key).
    Partitions (nested row lengths read from other features) are not implemented.

    >>> tg.io.RaggedFeature(tg.int64).row_splits_dtype
    tg.int32
    """

    def __new__(cls, dtype, value_key=None, partitions=(), row_splits_dtype=dtypes.int32,
                validate=False):
        if partitions:
            raise NotImplementedError(
                f"tf.io.RaggedFeature: partitions={partitions!r} are not implemented in "
                "tapegpu (only partitions=(), a ragged tensor of one ragged dimension); read "
                "the row lengths as features of their own and build the tensor with "
                "tg.RaggedTensor.from_nested_row_lengths")
        row_splits_dtype = dtypes.as_dtype(row_splits_dtype)
        if row_splits_dtype not in (dtypes.int32, dtypes.int64):
            raise ValueError(f"tf.io.RaggedFeature: row_splits_dtype must be tg.int32 or "
                             f"tg.int64, got {row_splits_dtype.name}")
        return super().__new__(cls, dtype, value_key, tuple(partitions), row_splits_dtype,
                               validate)


class SparseFeature(collections.namedtuple(
        "SparseFeature", ["index_key", "value_key", "dtype", "size", "already_sorted"])):
    """A sparse tensor assembled from features (`tf.io.SparseFeature(index_key, value_key,
    dtype, size, already_sorted=False)`): the values of feature `value_key` go to the
    positions read from the int64 feature(s) `index_key` (one per dimension, each index in
    [0, size)); parsed to a `tg.SparseTensor` of dense shape `size` (`[batch] + size` in
    `parse_example`), its entries in index order.

    >>> ex = tg.train.Example(features=tg.train.Features(feature={
    ...     "ix": tg.train.Feature(int64_list=tg.train.Int64List(value=[3, 0])),
    ...     "v": tg.train.Feature(float_list=tg.train.FloatList(value=[1.5, 2.5]))}))
    >>> sp = tg.io.parse_single_example(ex.SerializeToString(),
    ...                                 {"s": tg.io.SparseFeature("ix", "v", tg.float32, 4)})["s"]
    >>> sp.indices.numpy().tolist(), sp.values.numpy().tolist(), sp.dense_shape.numpy().tolist()
    ([[0], [3]], [2.5, 1.5], [4])
    """

    def __new__(cls, index_key, value_key, dtype, size, already_sorted=False):
        return super().__new__(cls, index_key, value_key, dtype, size, already_sorted)


def _sparse_feature(f, key, raw_of, n, who):
    """The batched SparseTensor of a SparseFeature; raw_of(name, dtype) gives each record's
    values of a feature (None when missing)."""
    index_keys = [f.index_key] if isinstance(f.index_key, str) else list(f.index_key)
    sizes = [f.size] if isinstance(f.size, int) else [int(s) for s in f.size]
    if len(sizes) != len(index_keys):
        raise ValueError(f"{who}: SparseFeature {key!r} has {len(index_keys)} index keys but "
                         f"{len(sizes)} sizes")
    dtype = _feature_dtype(f.dtype, who)
    values = raw_of(f.value_key, dtype)
    ids = [raw_of(k, dtypes.int64) for k in index_keys]
    empty = np.zeros(0, dtype=object if dtype.is_string else dtype._np)
    rows_idx, rows_val = [], []
    for b in range(n):
        v = empty if values[b] is None else values[b]
        cols = [np.zeros(0, np.int64) if i[b] is None else i[b] for i in ids]
        for k, c in zip(index_keys, cols):
            if c.size != v.size:
                raise InvalidArgumentError(f"{who}: SparseFeature {key!r}, record {b}: index "
                                           f"feature {k!r} has {c.size} values but value "
                                           f"feature {f.value_key!r} has {v.size}")
        for c, size, k in zip(cols, sizes, index_keys):
            bad = (c < 0) | (c >= size)
            if bad.any():
                raise InvalidArgumentError(f"{who}: SparseFeature {key!r}, record {b}: index "
                                           f"{int(c[bad][0])} of {k!r} is outside [0, {size})")
        idx = np.stack([np.full(v.size, b, np.int64)] + cols, axis=1) if v.size else \
            np.zeros((0, len(cols) + 1), np.int64)
        if not f.already_sorted and v.size:
            order = np.lexsort(idx[:, ::-1].T)
            idx, v = idx[order], v[order]
        rows_idx.append(idx)
        rows_val.append(v)
    indices = np.concatenate(rows_idx) if n else np.zeros((0, len(sizes) + 1), np.int64)
    return SparseTensor(indices, _tensor(_concat(rows_val, dtype), dtype), [n] + sizes)


# -- decoding ------------------------------------------------------------------------------------

def _map_entries(payload, who):
    """{key: value bytes} of the map<string, message> entries in `payload` (a Features or
    FeatureLists message); a repeated key keeps its last value, as protobuf maps do."""
    out = {}
    try:
        for number, wire, entry in _fields(payload):
            if number != 1 or wire != 2:
                continue
            key, value = "", b""
            for n, w, v in _fields(entry):
                if n == 1 and w == 2:
                    key = v.decode("utf-8")
                elif n == 2 and w == 2:
                    value = v
            out[key] = value
    except (DecodeError, UnicodeDecodeError) as e:
        raise InvalidArgumentError(f"{who}: Could not parse example input ({e})") from None
    return out


def _message_field(payload, number, who):
    """The (merged) bytes of sub-message field `number` of `payload`, or None if absent."""
    found = None
    try:
        for n, w, v in _fields(payload):
            if n == number and w == 2:
                found = v if found is None else found + v
    except DecodeError as e:
        raise InvalidArgumentError(f"{who}: Could not parse example input ({e})") from None
    return found


def _feature_values(feature, dtype, key, who):
    """The values of a serialized Feature as a 1-D numpy array of `dtype` (an empty Feature
    gives no values); a Feature of another kind is an error."""
    kind, payload = None, b""
    try:
        for n, w, v in _fields(feature):
            if n in (1, 2, 3) and w == 2:
                kind, payload = n, v
    except DecodeError as e:
        raise InvalidArgumentError(f"{who}: Could not parse example input ({e})") from None
    want = _KIND_OF[dtype.name]
    if kind is not None and kind != want:
        raise InvalidArgumentError(
            f"{who}: Name: <unknown>, Key: {key}, Index: 0.  Data types don't match. "
            f"Data type: {_KIND_NAME[kind]} but "
            f"expected type: {_KIND_NAME[want]}")
    try:
        return _list_values(payload, want)
    except DecodeError as e:
        raise InvalidArgumentError(f"{who}: Key: {key}. Could not parse the feature ({e})") \
            from None


def _list_values(payload, kind):
    if kind == 1:
        values = [v for n, w, v in _fields(payload) if n == 1 and w == 2]
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        return arr
    parts = []
    for n, w, v in _fields(payload):
        if n != 1:
            continue
        if kind == 2:
            if w == 2:
                if len(v) % 4:
                    raise DecodeError(f"a packed float list of {len(v)} bytes")
                parts.append(np.frombuffer(v, "<f4"))
            elif w == 5:
                parts.append(np.frombuffer(v, "<f4"))
        elif w == 2:
            parts.append(packed_varints(v))
        elif w == 0:
            parts.append(np.array([_signed64(v)], dtype=np.int64))
    npd = np.float32 if kind == 2 else np.int64
    return np.concatenate(parts).astype(npd) if parts else np.zeros(0, npd)


def _tensor(arr, dtype):
    if dtype.is_string:
        return Tensor(np.asarray(arr, dtype=object), _backend.lookup("cpu"))
    return convert_to_tensor(np.array(arr, dtype=dtype._np))


def _default(feature, shape, who, key):
    value = feature.default_value
    if value is None:
        return None
    arr = _host_values(value, feature.dtype)
    if arr.size != int(np.prod(shape)):  # TensorFlow reshapes the default to the shape
        raise InvalidArgumentError(f"{who}: the default_value of feature {key!r} has "
                                   f"{arr.size} values, but its shape {list(shape)} needs "
                                   f"{int(np.prod(shape))}")
    return arr.reshape(shape)


def _host_values(value, dtype):
    if isinstance(value, Tensor):
        value = value.numpy()
    if dtype.is_string:
        flat = [v.encode("utf-8") if isinstance(v, str) else bytes(v)
                for v in np.ravel(np.asarray(value, dtype=object))]
        arr = np.empty(len(flat), dtype=object)
        arr[:] = flat
        return arr.reshape(np.shape(value))
    return np.asarray(value, dtype=dtype._np)


def _serialized_list(serialized, who):
    """A list of bytes records and the batch shape of `serialized`."""
    if isinstance(serialized, Tensor):
        if not serialized.dtype.is_string:
            raise TypeError(f"{who}: serialized must be a tg.string tensor, got "
                            f"{serialized.dtype.name}")
        arr = host_array(serialized)
    elif isinstance(serialized, (bytes, str)):
        arr = np.array(serialized.encode("utf-8") if isinstance(serialized, str) else serialized,
                       dtype=object)
    else:
        arr = np.array([v.encode("utf-8") if isinstance(v, str) else v
                        for v in np.ravel(np.asarray(serialized, dtype=object))],
                       dtype=object).reshape(np.shape(serialized))
    for v in arr.flat:
        if not isinstance(v, (bytes, np.bytes_)):
            raise TypeError(f"{who}: serialized must hold bytes (serialized Example protos), "
                            f"got {type(v).__name__}")
    return list(arr.flat), arr.shape


def _check_features(features, who, sequence=False):
    if not features and not sequence:
        raise ValueError(f"{who}: Invalid argument: features cannot be None.")
    if not isinstance(features, dict):
        raise TypeError(f"{who}: features must be a dict from feature name to FixedLenFeature, "
                        f"VarLenFeature or RaggedFeature, got {type(features).__name__}")
    kinds = (FixedLenFeature, VarLenFeature, RaggedFeature, FixedLenSequenceFeature,
             SparseFeature)
    for key, f in features.items():
        if not isinstance(f, kinds):
            raise ValueError(f"{who}: Unsupported feature type for {key!r}: {f!r} (valid: "
                             "FixedLenFeature, FixedLenSequenceFeature, VarLenFeature, "
                             "RaggedFeature, SparseFeature)")
        _feature_dtype(f.dtype, who)


def _examples_features(records, who):
    """For each record, {name: Feature bytes} of its `features`."""
    out = []
    for i, record in enumerate(records):
        features = _message_field(bytes(record), 1, who)
        out.append(_map_entries(features or b"", who))
    return out


def _parse_batch(records, features, who, names=None):
    """{key: batched result} for a list of serialized Examples."""
    per_record = _examples_features(records, who)

    def raw_of(name, dtype):
        return [None if feats.get(name) is None else
                _feature_values(feats[name], dtype, name, who) for feats in per_record]

    out = {}
    for key, f in features.items():
        if isinstance(f, SparseFeature):
            out[key] = _sparse_feature(f, key, raw_of, len(per_record), who)
            continue
        dtype = _feature_dtype(f.dtype, who)
        src = f.value_key or key if isinstance(f, RaggedFeature) else key
        values = []
        for i, feats in enumerate(per_record):
            raw = feats.get(src)
            values.append(None if raw is None else _feature_values(raw, dtype, src, who))
        out[key] = _batched(f, dtype, key, values, who)
    return out


def _batched(f, dtype, key, values, who):
    """The batched result of one feature from each record's values (None: missing)."""
    n = len(values)
    if isinstance(f, FixedLenFeature):
        shape = _shape(f.shape, who)
        size = int(np.prod(shape))
        default = _default(f, shape, who, key)
        rows = []
        for i, v in enumerate(values):
            if v is None:
                if default is None:
                    raise InvalidArgumentError(
                        f"{who}: Name: <unknown>, Feature: {key} (data type: "
                        f"{_KIND_NAME[_KIND_OF[dtype.name]]}) is "
                        "required but could not be found.")
                rows.append(default.reshape(-1))
            elif v.size != size:
                raise InvalidArgumentError(
                    f"{who}: Name: <unknown>, Key: {key}, Index: {i}.  Number of "
                    f"{_KIND_NAME[_KIND_OF[dtype.name]]} values != expected.  Values size: "
                    f"{v.size} but output shape: {list(shape)}")
            else:
                rows.append(v)
        return _tensor(_stack(rows, dtype, (n,) + shape), dtype)
    if isinstance(f, FixedLenSequenceFeature):
        if not f.allow_missing:
            raise ValueError(f"{who}: FixedLenSequenceFeature {key!r} in an Example needs "
                             "allow_missing=True (it is parsed as a padded list of values)")
        shape = _shape(f.shape, who)
        size = max(int(np.prod(shape)), 1)
        rows = [np.zeros(0, dtype=object if dtype.is_string else dtype._np) if v is None else v
                for v in values]
        for i, v in enumerate(rows):
            if v.size % size:
                raise InvalidArgumentError(
                    f"{who}: Name: <unknown>, Key: {key}, Index: {i}.  Number of values is not "
                    f"a multiple of the shape's size {size}: {v.size}")
        steps = max([v.size // size for v in rows], default=0)
        pad = _host_values(f.default_value, dtype).reshape(-1) if f.default_value is not None \
            else np.array([b""] if dtype.is_string else [0], dtype=object if dtype.is_string
                          else dtype._np)
        if pad.size != 1:
            raise InvalidArgumentError(f"{who}: the default_value of FixedLenSequenceFeature "
                                       f"{key!r} is the padding value, one element; got "
                                       f"{pad.size}")
        out = np.empty((n, steps * size), dtype=object if dtype.is_string else dtype._np)
        for i, v in enumerate(rows):
            out[i, :v.size] = v
            if v.size < steps * size:
                out[i, v.size:] = pad[0]
        return _tensor(out.reshape((n, steps) + shape), dtype)
    rows = [np.zeros(0, dtype=object if dtype.is_string else dtype._np) if v is None else v
            for v in values]
    flat = _concat(rows, dtype)
    lengths = np.array([v.size for v in rows], dtype=np.int64)
    if isinstance(f, VarLenFeature):
        indices = np.stack([np.repeat(np.arange(n, dtype=np.int64), lengths),
                            np.concatenate([np.arange(k, dtype=np.int64) for k in lengths])
                            if n else np.zeros(0, np.int64)], axis=1)
        dense_shape = [n, int(lengths.max()) if n else 0]
        return SparseTensor(indices, _tensor(flat, dtype), dense_shape)
    splits = np.concatenate([[0], np.cumsum(lengths)]).astype(f.row_splits_dtype._np)
    return RaggedTensor.from_row_splits(_tensor(flat, dtype), convert_to_tensor(splits))


def _stack(rows, dtype, shape):
    if dtype.is_string:
        arr = np.empty(shape, dtype=object)
        flat = arr.reshape(-1) if arr.size else arr
        if arr.size:
            flat[:] = [x for r in rows for x in r]
            return flat.reshape(shape)
        return arr
    return np.array(rows, dtype=dtype._np).reshape(shape) if rows else np.zeros(shape,
                                                                               dtype._np)


def _concat(rows, dtype):
    if dtype.is_string:
        arr = np.empty(sum(r.size for r in rows), dtype=object)
        arr[:] = [x for r in rows for x in r]
        return arr
    return np.concatenate(rows).astype(dtype._np) if rows else np.zeros(0, dtype._np)


def _unbatch(value):
    """The first (only) record's part of a batched result."""
    if isinstance(value, SparseTensor):
        idx = value.indices.numpy()
        return SparseTensor(idx[:, 1:], value.values, value.dense_shape.numpy()[1:])
    if isinstance(value, RaggedTensor):
        return value.values
    return _tensor(host_array(value)[0],
                   value.dtype)


def parse_example(serialized, features, example_names=None, name=None):
    """Parses a batch of serialized `tf.train.Example`s (`tf.io.parse_example`): a 1-D string
    tensor (or list of bytes) in, a dict of batched tensors out: a FixedLenFeature gives
    `[batch] + shape`, a VarLenFeature a `tg.SparseTensor` of dense shape `[batch, max
    count]`, a RaggedFeature a `tg.RaggedTensor` `[batch, (count)]`, a
    FixedLenSequenceFeature (allow_missing=True) `[batch, max steps] + shape` padded with its
    default value.

    >>> recs = [tg.train.Example(features=tg.train.Features(feature={"v": tg.train.Feature(
    ...     int64_list=tg.train.Int64List(value=list(range(n))))})).SerializeToString()
    ...     for n in (1, 3)]
    >>> sp = tg.io.parse_example(recs, {"v": tg.io.VarLenFeature(tg.int64)})["v"]
    >>> sp.indices.numpy().tolist(), sp.values.numpy().tolist(), sp.dense_shape.numpy().tolist()
    ([[0, 0], [1, 0], [1, 1], [1, 2]], [0, 0, 1, 2], [2, 3])
    """
    who = "tf.io.parse_example"
    _check_features(features, who)
    records, shape = _serialized_list(serialized, who)
    if len(shape) != 1:
        raise ValueError(f"{who}: serialized must be a vector (1-D) of records, got shape "
                         f"{shape}; use tg.io.parse_single_example for one record")
    return _parse_batch(records, features, who)


def parse_single_example(serialized, features, example_names=None, name=None):
    """Parses one serialized `tf.train.Example` (`tf.io.parse_single_example`): a scalar
    string (tensor or bytes) in, a dict out: a FixedLenFeature gives a tensor of its shape, a
    VarLenFeature a 1-D `tg.SparseTensor`, a RaggedFeature a 1-D tensor.

    >>> ex = tg.train.Example(features=tg.train.Features(feature={"w": tg.train.Feature(
    ...     bytes_list=tg.train.BytesList(value=[b"a", b"b"]))}))
    >>> tg.io.parse_single_example(ex.SerializeToString(),
    ...                            {"w": tg.io.VarLenFeature(tg.string)})["w"].values.numpy()
    array([b'a', b'b'], dtype=object)
    """
    who = "tf.io.parse_single_example"
    _check_features(features, who)
    records, shape = _serialized_list(serialized, who)
    if shape != ():
        raise ValueError(f"{who}: serialized must be a scalar (one record), got shape {shape}; "
                         "use tg.io.parse_example for a batch")
    return {k: _unbatch(v) for k, v in _parse_batch(records, features, who).items()}
