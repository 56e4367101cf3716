"""`tg.feature_column`: TensorFlow's feature columns (deprecated in TF 2, still used by its
structured-data tutorial), consumed by `tg.keras.layers.DenseFeatures`.

A column describes how one feature of a dict of inputs becomes dense model input:

- `numeric_column(key, shape)`: the values as float32, `normalizer_fn` applied;
- `bucketized_column(source, boundaries)`: the bucket of each value, one-hot;
- `categorical_column_with_vocabulary_list(key, vocabulary_list)`: ids of strings or
  integers in a list (-1, or `default_value`, for values not in it); consumed through
- `indicator_column(categorical)`: the multi-hot vector of the ids, or
- `embedding_column(categorical, dimension)`: the `combiner` (mean) of trained embeddings.

`DenseFeatures(columns)(features)` concatenates the columns' outputs, ordered by column name,
as TensorFlow does. Columns that hash (`categorical_column_with_hash_bucket`,
`crossed_column`, a vocabulary's `num_oov_buckets`) use TensorFlow's FarmHash, which tapegpu
does not have: they raise NotImplementedError saying so.

>>> age = tg.feature_column.numeric_column("age")
>>> kind = tg.feature_column.indicator_column(
...     tg.feature_column.categorical_column_with_vocabulary_list("kind", ["cat", "dog"]))
>>> layer = tg.keras.layers.DenseFeatures([age, kind])
>>> layer({"age": tg.constant([3.0, 5.0]), "kind": tg.constant(["dog", "cat"])}).numpy()
array([[3., 0., 1.],
       [5., 1., 0.]], dtype=float32)
"""
import math
import sys

import numpy as np

from .compat import surface
from .core import dtypes
from .core.tensor import Tensor, Variable, constant, convert_to_tensor
from . import ops
from .keras.layers.base import Layer
from .keras import initializers

__all__ = ["numeric_column", "bucketized_column", "categorical_column_with_vocabulary_list",
           "categorical_column_with_identity", "indicator_column", "embedding_column",
           "DenseFeatures", "input_layer"]


def _as_tensor(value, key):
    if isinstance(value, Variable):
        return value._read()
    if isinstance(value, Tensor):
        return value
    try:
        return convert_to_tensor(np.asarray(value) if not isinstance(value, (list, tuple))
                                 else value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"feature column {key!r}: cannot convert the feature to a tensor "
                         f"({e})") from None


def _lookup(features, key):
    if key not in features:
        raise ValueError(f"The feature {key!r} is not in features dictionary (keys: "
                         f"{sorted(features)})")
    return _as_tensor(features[key], key)


def _batched_2d(x):
    """A rank-1 feature of one value per example as (batch, 1), as TF's `expand_dims`."""
    return ops.expand_dims(x, -1) if x.ndim == 1 else x


class _Column:
    """The base of the feature columns: a frozen record with a name."""

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _set(self, **fields):
        for k, v in fields.items():
            object.__setattr__(self, k, v)

    def __repr__(self):
        inner = ", ".join(f"{k}={v!r}" for k, v in self._fields().items())
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other):
        return type(self) is type(other) and repr(self) == repr(other)

    def __hash__(self):
        return hash(repr(self))

    @property
    def parents(self):
        return []


class NumericColumn(_Column):
    """A dense column of float values (`numeric_column`)."""

    def __init__(self, key, shape, default_value, dtype, normalizer_fn):
        self._set(key=key, shape=shape, default_value=default_value, dtype=dtype,
                  normalizer_fn=normalizer_fn)

    def _fields(self):
        return {"key": self.key, "shape": self.shape, "default_value": self.default_value,
                "dtype": self.dtype, "normalizer_fn": self.normalizer_fn}

    @property
    def name(self):
        return self.key

    @property
    def variable_shape(self):
        return tuple(self.shape)

    def _values(self, features):
        """(batch,) + shape float values (normalizer applied)."""
        x = _lookup(features, self.key)
        if x._data.dtype.kind not in "biuf":
            raise ValueError(f"numeric_column {self.key!r}: the feature must be numeric, got "
                             f"{x.dtype.name}")
        x = ops.cast(_batched_2d(x), self.dtype)
        if self.normalizer_fn is not None:
            x = self.normalizer_fn(x)
        n = int(np.prod(self.shape))
        if int(np.prod(x.shape[1:])) != n:
            raise ValueError(f"numeric_column {self.key!r}: the feature has shape "
                             f"{tuple(x.shape)}, which does not hold {self.shape} per example")
        return ops.reshape(x, (-1,) + tuple(self.shape))

    def _dense(self, features, layer):
        x = self._values(features)
        return ops.cast(ops.reshape(x, (-1, int(np.prod(self.shape)))), dtypes.float32)

    @property
    def parse_spec(self):
        return {self.key: ("fixed", self.shape, self.dtype, self.default_value)}


class BucketizedColumn(_Column):
    """The buckets of a numeric column's values (`bucketized_column`): dense as one-hot
    vectors, categorical as bucket ids."""

    def __init__(self, source_column, boundaries):
        self._set(source_column=source_column, boundaries=boundaries)

    def _fields(self):
        return {"source_column": self.source_column, "boundaries": self.boundaries}

    @property
    def name(self):
        return f"{self.source_column.name}_bucketized"

    @property
    def parents(self):
        return [self.source_column]

    @property
    def num_buckets(self):
        return (len(self.boundaries) + 1) * int(np.prod(self.source_column.shape))

    def _ids(self, features):
        """(batch, source size) int64 bucket ids; bucket i holds boundaries[i-1] <= v <
        boundaries[i]."""
        x = self.source_column._values(features)
        x = ops.reshape(x, (x.shape[0], -1))
        values = x.numpy().astype(np.float64)
        ids = np.searchsorted(np.asarray(self.boundaries, dtype=np.float64), values,
                              side="right")
        return constant(ids.astype(np.int64))

    def _dense(self, features, layer):
        ids = self._ids(features)
        k = len(self.boundaries) + 1
        onehot = ops.one_hot(ids, k, dtype=dtypes.float32)  # (batch, size, k)
        return ops.reshape(onehot, (ids.shape[0], -1))

    def _id_rows(self, features):
        ids = self._ids(features).numpy()
        k = len(self.boundaries) + 1
        return ids + k * np.arange(ids.shape[1])[None, :]  # one bucket range per element

    @property
    def parse_spec(self):
        return self.source_column.parse_spec


class VocabularyListCategoricalColumn(_Column):
    """Ids of the values in a vocabulary list (`categorical_column_with_vocabulary_list`)."""

    def __init__(self, key, vocabulary_list, dtype, default_value, num_oov_buckets):
        self._set(key=key, vocabulary_list=vocabulary_list, dtype=dtype,
                  default_value=default_value, num_oov_buckets=num_oov_buckets)

    def _fields(self):
        return {"key": self.key, "vocabulary_list": self.vocabulary_list, "dtype": self.dtype,
                "default_value": self.default_value, "num_oov_buckets": self.num_oov_buckets}

    @property
    def name(self):
        return self.key

    @property
    def num_buckets(self):
        return len(self.vocabulary_list) + self.num_oov_buckets

    def _id_rows(self, features):
        """(batch, n) int64 ids (default_value for values out of the list)."""
        x = _batched_2d(_lookup(features, self.key))
        values = x.numpy()
        if self.dtype == dtypes.string:
            if values.dtype.kind not in "OSU":
                raise ValueError(f"categorical_column_with_vocabulary_list {self.key!r}: "
                                 f"expected string features, got {x.dtype.name}")
            table = {(v.encode() if isinstance(v, str) else v): i
                     for i, v in enumerate(self.vocabulary_list)}

            def key(v):
                return v.encode() if isinstance(v, str) else bytes(v)
        else:
            if values.dtype.kind not in "iu":
                raise ValueError(f"categorical_column_with_vocabulary_list {self.key!r}: "
                                 f"expected integer features, got {x.dtype.name}")
            table = {int(v): i for i, v in enumerate(self.vocabulary_list)}
            key = int
        flat = values.reshape(values.shape[0], -1)
        ids = np.array([[table.get(key(v), self.default_value) for v in row] for row in flat],
                       dtype=np.int64).reshape(flat.shape)
        return ids

    @property
    def parse_spec(self):
        return {self.key: ("var", None, self.dtype, None)}


class IdentityCategoricalColumn(_Column):
    """Integer features that are their own ids in [0, num_buckets)
    (`categorical_column_with_identity`)."""

    def __init__(self, key, num_buckets, default_value):
        self._set(key=key, number_buckets=num_buckets, default_value=default_value)

    def _fields(self):
        return {"key": self.key, "number_buckets": self.number_buckets,
                "default_value": self.default_value}

    @property
    def name(self):
        return self.key

    @property
    def num_buckets(self):
        return self.number_buckets

    def _id_rows(self, features):
        x = _batched_2d(_lookup(features, self.key))
        if x._data.dtype.kind not in "iu":
            raise ValueError(f"categorical_column_with_identity {self.key!r}: expected "
                             f"integer features, got {x.dtype.name}")
        ids = x.numpy().reshape(x.shape[0], -1).astype(np.int64)
        bad = (ids < 0) | (ids >= self.number_buckets)
        if bad.any():
            if self.default_value is None:
                raise ValueError(f"categorical_column_with_identity {self.key!r}: ids must be "
                                 f"in [0, {self.number_buckets}), got {ids[bad].tolist()}")
            ids = np.where(bad, self.default_value, ids)
        return ids

    @property
    def parse_spec(self):
        return {self.key: ("var", None, dtypes.int64, None)}


def _multi_hot(ids, n):
    """(batch, n) float32 counts of each id per row (negative ids ignored)."""
    out = np.zeros((ids.shape[0], n), dtype=np.float32)
    rows, cols = np.nonzero(ids >= 0)
    np.add.at(out, (rows, ids[rows, cols]), 1.0)
    return out


class IndicatorColumn(_Column):
    """The multi-hot vector of a categorical column's ids (`indicator_column`)."""

    def __init__(self, categorical_column):
        self._set(categorical_column=categorical_column)

    def _fields(self):
        return {"categorical_column": self.categorical_column}

    @property
    def name(self):
        return f"{self.categorical_column.name}_indicator"

    @property
    def parents(self):
        return [self.categorical_column]

    @property
    def variable_shape(self):
        return (self.categorical_column.num_buckets,)

    def _dense(self, features, layer):
        ids = self.categorical_column._id_rows(features)
        return constant(_multi_hot(ids, self.categorical_column.num_buckets))

    @property
    def parse_spec(self):
        return self.categorical_column.parse_spec


class EmbeddingColumn(_Column):
    """Trained embeddings of a categorical column's ids, combined per example
    (`embedding_column`)."""

    def __init__(self, categorical_column, dimension, combiner, initializer, max_norm,
                 trainable):
        self._set(categorical_column=categorical_column, dimension=dimension,
                  combiner=combiner, initializer=initializer, max_norm=max_norm,
                  trainable=trainable)

    def _fields(self):
        return {"categorical_column": self.categorical_column, "dimension": self.dimension,
                "combiner": self.combiner, "max_norm": self.max_norm,
                "trainable": self.trainable}

    @property
    def name(self):
        return f"{self.categorical_column.name}_embedding"

    @property
    def parents(self):
        return [self.categorical_column]

    @property
    def variable_shape(self):
        return (self.dimension,)

    def _dense(self, features, layer):
        table = layer._embedding_weights(self)
        ids = self.categorical_column._id_rows(features)
        valid = (ids >= 0).astype(np.float32)
        rows = ops.gather(table, constant(np.where(ids >= 0, ids, 0)))  # (batch, n, dim)
        if self.max_norm is not None:
            norms = ops.sqrt(ops.reduce_sum(rows * rows, axis=-1, keepdims=True))
            rows = rows * ops.minimum(1.0, self.max_norm / ops.maximum(norms, 1e-30))
        weights = valid
        if self.combiner == "mean":
            weights = valid / np.maximum(valid.sum(axis=1, keepdims=True), 1.0)
        elif self.combiner == "sqrtn":
            weights = valid / np.maximum(np.sqrt(valid.sum(axis=1, keepdims=True)), 1.0)
        return ops.reduce_sum(rows * constant(weights[..., None]), axis=1)

    @property
    def parse_spec(self):
        return self.categorical_column.parse_spec


# -- constructors ---------------------------------------------------------------------------------

def _check_key(key, fn):
    if not isinstance(key, str):
        raise ValueError(f"{fn}: key must be a string, got {key!r}")


def numeric_column(key, shape=(1,), default_value=None, dtype=dtypes.float32,
                   normalizer_fn=None):
    """A dense column of the feature `key` (float values of `shape` per example), as
    `tf.feature_column.numeric_column`; `normalizer_fn` maps the values first.

    >>> col = tg.feature_column.numeric_column("x", normalizer_fn=lambda v: v / 10.0)
    >>> tg.keras.layers.DenseFeatures([col])({"x": tg.constant([5.0, 20.0])}).numpy().ravel()
    array([0.5, 2. ], dtype=float32)
    """
    _check_key(key, "numeric_column")
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s)
                                                                            for s in shape)
    if not shape or any(s <= 0 for s in shape):
        raise ValueError(f"numeric_column: shape dimensions must be greater than 0, got "
                         f"{shape} for key {key!r}")
    dtype = dtypes.as_dtype(dtype)
    if not (dtype.is_floating or dtype.is_integer):
        raise ValueError(f"numeric_column: dtype must be convertible to float, got {dtype} "
                         f"for key {key!r}")
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError(f"numeric_column: normalizer_fn must be a callable, got "
                        f"{normalizer_fn!r}")
    if default_value is not None:
        default_value = tuple(np.broadcast_to(np.asarray(default_value, dtype=np.float64),
                                              shape).ravel().tolist())
    return NumericColumn(key, shape, default_value, dtype, normalizer_fn)


def bucketized_column(source_column, boundaries):
    """The bucket of each value of the numeric column `source_column`: bucket 0 holds values
    below `boundaries[0]`, bucket i those in [boundaries[i-1], boundaries[i]), as
    `tf.feature_column.bucketized_column` (dense: one-hot; categorical: bucket ids).

    >>> b = tg.feature_column.bucketized_column(tg.feature_column.numeric_column("a"), [0, 10])
    >>> tg.keras.layers.DenseFeatures([b])({"a": tg.constant([-1.0, 0.0, 12.0])}).numpy()
    array([[1., 0., 0.],
           [0., 1., 0.],
           [0., 0., 1.]], dtype=float32)
    """
    if not isinstance(source_column, NumericColumn):
        raise ValueError(f"bucketized_column: source_column must be a column generated with "
                         f"numeric_column(). Given: {source_column!r}")
    if len(source_column.shape) > 1:
        raise ValueError(f"bucketized_column: source_column must be one-dimensional column. "
                         f"Given: {source_column!r}")
    if not isinstance(boundaries, (list, tuple)) or not boundaries:
        raise ValueError(f"bucketized_column: boundaries must be a sorted list, got "
                         f"{boundaries!r}")
    b = [float(v) for v in boundaries]
    if any(b[i] >= b[i + 1] for i in range(len(b) - 1)):
        raise ValueError(f"bucketized_column: boundaries must be a sorted list, got "
                         f"{boundaries!r}")
    return BucketizedColumn(source_column, tuple(b))


def categorical_column_with_vocabulary_list(key, vocabulary_list, dtype=None, default_value=-1,
                                            num_oov_buckets=0):
    """The id of each value of the feature `key` in `vocabulary_list` (strings or integers),
    `default_value` (-1: no id) for other values, as
    `tf.feature_column.categorical_column_with_vocabulary_list`. `num_oov_buckets > 0` hashes
    the other values with TensorFlow's FarmHash, which tapegpu does not have: it raises.

    >>> c = tg.feature_column.categorical_column_with_vocabulary_list("c", ["a", "b", "c"])
    >>> c.num_buckets
    3
    """
    _check_key(key, "categorical_column_with_vocabulary_list")
    vocab = tuple(vocabulary_list) if vocabulary_list is not None else ()
    if not vocab:
        raise ValueError(f"categorical_column_with_vocabulary_list: vocabulary_list "
                         f"{vocabulary_list!r} must be non-empty, column_name: {key}")
    if len(set(vocab)) != len(vocab):
        raise ValueError(f"categorical_column_with_vocabulary_list: Duplicate keys in "
                         f"vocabulary_list {vocabulary_list!r}, column_name: {key}")
    strings = all(isinstance(v, (str, bytes)) for v in vocab)
    ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vocab)
    if not (strings or ints):
        raise ValueError(f"categorical_column_with_vocabulary_list: vocabulary_list must be "
                         f"all strings or all integers, got {vocabulary_list!r}")
    vocab_dtype = dtypes.string if strings else dtypes.int64
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype)
        if (dtype == dtypes.string) != strings:
            raise ValueError(f"categorical_column_with_vocabulary_list: dtype {dtype} is not "
                             f"compatible with vocabulary_list {vocabulary_list!r}")
    else:
        dtype = vocab_dtype
    num_oov_buckets = int(num_oov_buckets)
    if num_oov_buckets < 0:
        raise ValueError(f"categorical_column_with_vocabulary_list: Invalid num_oov_buckets "
                         f"{num_oov_buckets} in {key}.")
    if num_oov_buckets:
        if default_value != -1:
            raise ValueError(f"categorical_column_with_vocabulary_list: Can't specify both "
                             f"num_oov_buckets and default_value in {key}.")
        raise NotImplementedError(
            "tf.feature_column.categorical_column_with_vocabulary_list(num_oov_buckets>0) is "
            "not available in tapegpu: out-of-vocabulary values are hashed with TensorFlow's "
            "FarmHash Fingerprint64, which tapegpu does not have. Instead: num_oov_buckets=0 "
            "with a default_value (one id for every other value)")
    default_value = int(default_value) if default_value is not None else -1
    return VocabularyListCategoricalColumn(key, vocab, dtype, default_value, 0)


def categorical_column_with_identity(key, num_buckets, default_value=None):
    """Integer features in [0, num_buckets) as their own ids (`default_value` for others;
    None raises), as `tf.feature_column.categorical_column_with_identity`.

    >>> c = tg.feature_column.indicator_column(
    ...     tg.feature_column.categorical_column_with_identity("i", 3))
    >>> tg.keras.layers.DenseFeatures([c])({"i": tg.constant([2, 0])}).numpy()
    array([[0., 0., 1.],
           [1., 0., 0.]], dtype=float32)
    """
    _check_key(key, "categorical_column_with_identity")
    if int(num_buckets) < 1:
        raise ValueError(f"categorical_column_with_identity: num_buckets {num_buckets} < 1, "
                         f"column_name {key}")
    if default_value is not None and not 0 <= int(default_value) < int(num_buckets):
        raise ValueError(f"categorical_column_with_identity: default_value {default_value} "
                         f"not in range [0, {num_buckets}), column_name {key}")
    return IdentityCategoricalColumn(key, int(num_buckets),
                                     None if default_value is None else int(default_value))


_CATEGORICAL = (VocabularyListCategoricalColumn, IdentityCategoricalColumn, BucketizedColumn)


def indicator_column(categorical_column):
    """The multi-hot (one-hot for one value per example) float vector of a categorical
    column's ids, as `tf.feature_column.indicator_column`; ids of -1 (out of the vocabulary)
    give all zeros.

    >>> c = tg.feature_column.categorical_column_with_vocabulary_list("c", ["a", "b"])
    >>> tg.keras.layers.DenseFeatures([tg.feature_column.indicator_column(c)])(
    ...     {"c": tg.constant(["b", "z"])}).numpy()
    array([[0., 1.],
           [0., 0.]], dtype=float32)
    """
    if not isinstance(categorical_column, _CATEGORICAL):
        raise ValueError(f"indicator_column: Unsupported input type. Input must be a "
                         f"CategoricalColumn. Given: {categorical_column!r}")
    return IndicatorColumn(categorical_column)


def embedding_column(categorical_column, dimension, combiner="mean", initializer=None,
                     ckpt_to_load_from=None, tensor_name_in_ckpt=None, max_norm=None,
                     trainable=True, use_safe_embedding_lookup=True):
    """A trained `dimension`-vector per id of a categorical column, combined per example by
    `combiner` ('mean', 'sqrtn' or 'sum'), as `tf.feature_column.embedding_column`; the
    table starts from `initializer` (default: truncated normal, stddev 1/sqrt(dimension)) and
    is a variable of the consuming `DenseFeatures` layer.

    >>> c = tg.feature_column.categorical_column_with_vocabulary_list("c", ["a", "b"])
    >>> e = tg.feature_column.embedding_column(c, dimension=4)
    >>> tg.keras.layers.DenseFeatures([e])({"c": tg.constant(["a", "b"])}).shape
    (2, 4)
    """
    if not isinstance(categorical_column, _CATEGORICAL):
        raise ValueError(f"embedding_column: categorical_column must be a CategoricalColumn, "
                         f"got {categorical_column!r}")
    if dimension is None or int(dimension) < 1:
        raise ValueError(f"Invalid dimension {dimension}.")
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError(f"embedding_column: combiner must be one of 'mean', 'sqrtn' and "
                         f"'sum', got {combiner!r}")
    if (ckpt_to_load_from is None) != (tensor_name_in_ckpt is None):
        raise ValueError("Must specify both `ckpt_to_load_from` and `tensor_name_in_ckpt` or "
                         "none of them.")
    if ckpt_to_load_from is not None:
        raise NotImplementedError(
            "tf.feature_column.embedding_column(ckpt_to_load_from=...) is not available in "
            "tapegpu: it reads TensorFlow checkpoints. Instead: assign the table to the "
            "DenseFeatures layer's variable after building it")
    if initializer is not None and not callable(initializer):
        raise ValueError(f"initializer must be callable if specified. Embedding of column_name: "
                         f"{categorical_column.name}")
    return EmbeddingColumn(categorical_column, int(dimension), combiner, initializer,
                           max_norm, bool(trainable))


def _hash_refusal(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(
            f"tf.feature_column.{name} is not available in tapegpu: it hashes with TensorFlow's "
            f"FarmHash Fingerprint64, which tapegpu does not have (its buckets would differ "
            f"from TensorFlow's). Instead: categorical_column_with_vocabulary_list or "
            f"categorical_column_with_identity")
    fn.__name__ = name
    fn.__doc__ = f"tf.feature_column.{name}: not available in tapegpu (FarmHash)."
    fn._tapegpu_refused = True
    return fn


crossed_column = _hash_refusal("crossed_column")
categorical_column_with_hash_bucket = _hash_refusal("categorical_column_with_hash_bucket")


# -- consuming them -----------------------------------------------------------------------------

def _dense_columns(feature_columns, who):
    if isinstance(feature_columns, _Column):
        feature_columns = [feature_columns]
    columns = list(feature_columns or ())
    if not columns:
        raise ValueError(f"{who}: Expected feature_columns to be iterable, found "
                         f"{feature_columns!r}.")
    for c in columns:
        if not hasattr(c, "_dense"):
            raise ValueError(f"{who}: Items of feature_columns must be a DenseColumn. You can "
                             f"wrap a categorical column with an embedding_column or "
                             f"indicator_column. Given: {c!r}")
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise ValueError(f"{who}: Duplicate feature column name found for columns: {names}")
    return sorted(columns, key=lambda c: c.name)


class DenseFeatures(Layer):
    """A Keras layer turning a dict of features into one dense float32 tensor: the outputs of
    `feature_columns` concatenated in the order of their names, as
    `tf.keras.layers.DenseFeatures` (embedding columns' tables are its variables).

    >>> cols = [tg.feature_column.numeric_column("b"), tg.feature_column.numeric_column("a")]
    >>> tg.keras.layers.DenseFeatures(cols)({"a": [1.0], "b": [2.0]}).numpy()
    array([[1., 2.]], dtype=float32)
    """

    def __init__(self, feature_columns, trainable=True, name=None, partitioner=None,
                 **kwargs):
        super().__init__(trainable=trainable, name=name, **kwargs)
        object.__setattr__(self, "_columns",
                           tuple(_dense_columns(feature_columns, "DenseFeatures")))
        self._tables = {}

    def _embedding_weights(self, column):
        var = self._tables.get(column.name)
        if var is None:
            init = column.initializer or initializers.TruncatedNormal(
                mean=0.0, stddev=1.0 / math.sqrt(column.dimension))
            var = self.add_weight(f"{column.name}/embedding_weights",
                                  (column.categorical_column.num_buckets, column.dimension),
                                  init, trainable=column.trainable and self.trainable,
                                  dtype="float32")
            self._tables[column.name] = var
        return var

    def build(self, input_shape=None):
        for c in self._columns:
            if isinstance(c, EmbeddingColumn):
                self._embedding_weights(c)
        self.built = True

    def __call__(self, features, *args, **kwargs):
        return self._tracked(self._features_call, features)

    def _features_call(self, features):
        if not isinstance(features, dict):
            raise ValueError(f"DenseFeatures {self.name!r}: We expected a dictionary here. "
                             f"Instead we got: {features!r}")
        if not self.built:
            self.build(None)
        outs = [c._dense(features, self) for c in self._columns]
        return ops.concat(outs, axis=-1)

    def call(self, features):
        return self._features_call(features)


def input_layer(features, feature_columns, weight_collections=None, trainable=True,
                cols_to_vars=None, cols_to_output_tensors=None):
    """The dense tensor of `feature_columns` for `features`, as
    `tf.compat.v1.feature_column.input_layer` (a `DenseFeatures` layer made for the call:
    embedding tables start afresh each call; keep a `DenseFeatures` layer to train them).

    >>> tg.compat.v1.feature_column.input_layer(
    ...     {"a": [[1.0], [2.0]]}, [tg.feature_column.numeric_column("a")]).shape
    (2, 1)
    """
    return DenseFeatures(feature_columns, trainable=trainable)(features)


# the names of tf.feature_column this module lacks are refusals, however it is first imported
surface.hook(sys.modules[__name__], "tf.feature_column")
