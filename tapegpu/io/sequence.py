"""Parsing serialized `tf.train.SequenceExample` records: `tg.io.parse_single_sequence_example`
and `parse_sequence_example` (context features as in parsing.py's Examples; feature lists
step by step).

>>> se = tg.train.SequenceExample()
>>> for t in range(3):
...     se.feature_lists.feature_list["x"].feature.add().int64_list.value.append(t)
>>> _, seq = tg.io.parse_single_sequence_example(
...     se.SerializeToString(), sequence_features={"x": tg.io.VarLenFeature(tg.int64)})
>>> seq["x"].dense_shape.numpy().tolist()
[3, 1]
"""
import numpy as np

from ..core.tensor import convert_to_tensor
from ..errors import InvalidArgumentError
from ..ragged import RaggedTensor
from ..sparse import SparseTensor
from ..train.protobuf import DecodeError, _fields
from .parsing import (_KIND_NAME, _KIND_OF, FixedLenFeature, FixedLenSequenceFeature,
                      RaggedFeature, VarLenFeature, _batched, _check_features, _concat,
                      _feature_dtype, _feature_values, _map_entries, _message_field,
                      _serialized_list, _shape, _stack, _tensor, _unbatch)

__all__ = ["parse_single_sequence_example", "parse_sequence_example"]


def _check_sequence_features(context_features, sequence_features, who):
    if not (context_features or sequence_features):
        raise ValueError(f"{who}: Both `context_features` and `sequence_features` argument are "
                         "None, but at least one should have values.")
    context_features = context_features or {}
    sequence_features = sequence_features or {}
    _check_features(context_features, who, sequence=True)
    _check_features(sequence_features, who, sequence=True)
    for key, f in context_features.items():
        if isinstance(f, FixedLenSequenceFeature):
            raise ValueError(f"{who}: context feature {key!r} must be a FixedLenFeature, "
                             "VarLenFeature or RaggedFeature")
    for key, f in sequence_features.items():
        if isinstance(f, FixedLenFeature):
            raise ValueError(f"{who}: sequence feature {key!r} must be a "
                             "FixedLenSequenceFeature, VarLenFeature or RaggedFeature (a "
                             "FixedLenFeature describes one context value)")
    return context_features, sequence_features


def parse_single_sequence_example(serialized, context_features=None, sequence_features=None,
                                  example_name=None, name=None):
    """Parses one serialized `tf.train.SequenceExample`
    (`tf.io.parse_single_sequence_example`): returns `(context, feature_lists)`, two dicts.
    Context features are parsed as in `parse_single_example`; a sequence feature gives, for a
    FixedLenSequenceFeature, a tensor `[steps] + shape`; for a VarLenFeature a
    `tg.SparseTensor` of dense shape `[steps, max count]`; for a RaggedFeature a
    `tg.RaggedTensor` `[steps, (count)]`. A missing feature list is an error unless its
    FixedLenSequenceFeature has `allow_missing=True` (then zero steps).

    >>> se = tg.train.SequenceExample()
    >>> se.context.feature["id"].int64_list.value.append(7)
    >>> for t in (1, 2):
    ...     se.feature_lists.feature_list["x"].feature.add().float_list.value.append(t / 2)
    >>> ctx, seq = tg.io.parse_single_sequence_example(
    ...     se.SerializeToString(), {"id": tg.io.FixedLenFeature([], tg.int64)},
    ...     {"x": tg.io.FixedLenSequenceFeature([], tg.float32)})
    >>> int(ctx["id"]), seq["x"].numpy().tolist()
    (7, [0.5, 1.0])
    """
    who = "tf.io.parse_single_sequence_example"
    context_features, sequence_features = _check_sequence_features(
        context_features, sequence_features, who)
    records, shape = _serialized_list(serialized, who)
    if shape != ():
        raise ValueError(f"{who}: serialized must be a scalar (one record), got shape {shape}")
    ctx, lists = _sequence_parts(bytes(records[0]), context_features, sequence_features, who)
    context = {key: _unbatch(_batched(f, _feature_dtype(f.dtype, who), key, [ctx[key]], who))
               for key, f in context_features.items()}
    sequences = {}
    for key, f in sequence_features.items():
        dtype = _feature_dtype(f.dtype, who)
        values = lists[key]
        if isinstance(f, FixedLenSequenceFeature):
            sequences[key] = _tensor(_steps(values, f, dtype, key, who), dtype)
        else:
            sequences[key] = _batched(f, dtype, key, values, who)
    return context, sequences


def _sequence_parts(record, context_features, sequence_features, who):
    """The values of one serialized SequenceExample: {context key: 1-D values, or None when
    missing}, {sequence key: [1-D values of each step]} (a missing list that may be missing
    has no steps)."""
    context = {}
    if context_features:
        feats = _map_entries(_message_field(record, 1, who) or b"", who)
        for key, f in context_features.items():
            dtype = _feature_dtype(f.dtype, who)
            src = f.value_key or key if isinstance(f, RaggedFeature) else key
            raw = feats.get(src)
            context[key] = None if raw is None else _feature_values(raw, dtype, src, who)
    lists = _map_entries(_message_field(record, 2, who) or b"", who) if sequence_features \
        else {}
    sequences = {}
    for key, f in sequence_features.items():
        dtype = _feature_dtype(f.dtype, who)
        src = f.value_key or key if isinstance(f, RaggedFeature) else key
        raw = lists.get(src)
        if raw is None:
            if isinstance(f, FixedLenSequenceFeature) and not f.allow_missing:
                raise InvalidArgumentError(f"{who}: Name: <unknown>, Feature list '{key}' is "
                                           "required but could not be found.  Did you mean to "
                                           "include it in feature_list_dense_missing_assumed_"
                                           "empty or feature_list_dense_defaults?")
            steps = []
        else:
            try:
                steps = [v for n, w, v in _fields(raw) if n == 1 and w == 2]
            except DecodeError as e:
                raise InvalidArgumentError(f"{who}: Could not parse example input ({e})") \
                    from None
        sequences[key] = [_feature_values(v, dtype, src, who) for v in steps]
    return context, sequences


def _steps(values, f, dtype, key, who):
    """The [steps] + shape array of a FixedLenSequenceFeature's feature list."""
    fshape = _shape(f.shape, who)
    size = int(np.prod(fshape))
    for t, v in enumerate(values):
        if v.size != size:
            raise InvalidArgumentError(
                f"{who}: Name: <unknown>, Key: {key}, Index: {t}.  Number of "
                f"{_KIND_NAME[_KIND_OF[dtype.name]]} values != expected.  values "
                f"size: {v.size} but output shape: {list(fshape)}")
    return _stack(values, dtype, (len(values),) + fshape)


def parse_sequence_example(serialized, context_features=None, sequence_features=None,
                           example_names=None, name=None):
    """Parses a batch of serialized `tf.train.SequenceExample`s
    (`tf.io.parse_sequence_example`): returns `(context, feature_lists, lengths)`. Context
    features are batched as in `parse_example`; a FixedLenSequenceFeature gives `[batch,
    max steps] + shape`, shorter lists padded with 0 (or b''), and `lengths[key]` the steps
    of each record (int64); a VarLenFeature a `tg.SparseTensor` of dense shape `[batch, max
    steps, max count]`; a RaggedFeature a `tg.RaggedTensor` `[batch, (steps), (count)]`.

    >>> recs = []
    >>> for n in (1, 2):
    ...     se = tg.train.SequenceExample()
    ...     for t in range(n):
    ...         se.feature_lists.feature_list["x"].feature.add().int64_list.value.append(t + 1)
    ...     recs.append(se.SerializeToString())
    >>> _, seq, lengths = tg.io.parse_sequence_example(
    ...     recs, sequence_features={"x": tg.io.FixedLenSequenceFeature([], tg.int64)})
    >>> seq["x"].numpy().tolist(), lengths["x"].numpy().tolist()
    ([[1, 0], [1, 2]], [1, 2])
    """
    who = "tf.io.parse_sequence_example"
    context_features, sequence_features = _check_sequence_features(
        context_features, sequence_features, who)
    records, shape = _serialized_list(serialized, who)
    if len(shape) != 1:
        raise ValueError(f"{who}: serialized must be a vector (1-D) of records, got shape "
                         f"{shape}; use tg.io.parse_single_sequence_example for one record")
    parts = [_sequence_parts(bytes(r), context_features, sequence_features, who)
             for r in records]
    n = len(parts)
    context = {key: _batched(f, _feature_dtype(f.dtype, who), key,
                             [ctx[key] for ctx, _ in parts], who)
               for key, f in context_features.items()}
    sequences, lengths = {}, {}
    for key, f in sequence_features.items():
        dtype = _feature_dtype(f.dtype, who)
        per = [lists[key] for _, lists in parts]
        steps = np.array([len(v) for v in per], dtype=np.int64)
        longest = int(steps.max()) if n else 0
        if isinstance(f, FixedLenSequenceFeature):
            arrays = [_steps(v, f, dtype, key, who) for v in per]
            fshape = _shape(f.shape, who)
            out = np.zeros((n, longest) + fshape, dtype=object if dtype.is_string
                           else dtype._np)
            if dtype.is_string:
                out[...] = b""
            for b, a in enumerate(arrays):
                out[b, :len(a)] = a
            sequences[key] = _tensor(out, dtype)
            lengths[key] = convert_to_tensor(steps)
            continue
        flat = _concat([v for values in per for v in values], dtype)
        counts = [np.array([v.size for v in values], dtype=np.int64) for values in per]
        if isinstance(f, VarLenFeature):
            index = [(b, t, i) for b, c in enumerate(counts) for t, k in enumerate(c)
                     for i in range(k)]
            widest = max([int(c.max()) for c in counts if c.size], default=0)
            indices = np.array(index, dtype=np.int64).reshape(-1, 3)
            sequences[key] = SparseTensor(indices, _tensor(flat, dtype), [n, longest, widest])
        else:
            splits_np = f.row_splits_dtype._np
            outer = np.concatenate([[0], np.cumsum(steps)]).astype(splits_np)
            inner = np.concatenate([[0], np.cumsum(np.concatenate(counts) if counts
                                                   else np.zeros(0, np.int64))]).astype(splits_np)
            sequences[key] = RaggedTensor.from_nested_row_splits(
                _tensor(flat, dtype), [convert_to_tensor(outer), convert_to_tensor(inner)])
    return context, sequences, lengths
