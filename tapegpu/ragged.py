"""`tg.ragged` and `tg.RaggedTensor`: TensorFlow's ragged tensors as values and row
partitions (`flat_values`, and one `row_splits` vector per ragged dimension), with the
constructors (`constant`, `from_row_splits`, `from_row_lengths`, `from_value_rowids`,
`from_row_starts`, `from_row_limits`, `from_tensor`, `from_nested_row_splits`), the
partition accessors, `to_tensor` (padded; differentiable in the values), `to_list`, row
indexing and `with_flat_values`. Operations beyond those go through `to_tensor` or
`flat_values` (`tg.ragged.map_flat_values`).

>>> rt = tg.ragged.constant([[1, 2, 3], [], [4]])
>>> rt.row_lengths().numpy(), rt.to_tensor().numpy()
(array([3, 0, 1]), array([[1, 2, 3],
       [0, 0, 0],
       [4, 0, 0]], dtype=int32))
"""
import builtins

import numpy as np

from .core.tensor import Tensor, Variable, convert_to_tensor


_builtin_range = builtins.range


def _tg():
    import tapegpu
    return tapegpu


def _splits(x, who):
    s = np.asarray(x.numpy() if isinstance(x, (Tensor, Variable)) else x, dtype=np.int64)
    if s.ndim != 1 or len(s) < 1 or s[0] != 0 or (np.diff(s) < 0).any():
        raise ValueError(f"RaggedTensor.{who}: row_splits must be a non-empty, non-decreasing "
                         f"vector starting at 0, got {s.tolist()}")
    return s


class RaggedTensor:
    """A ragged tensor: rows of different lengths (`tf.RaggedTensor`). Make one with
    `tg.ragged.constant` or a `from_*` constructor.

    >>> tg.RaggedTensor.from_row_lengths([1, 2, 3], [2, 1]).to_list()
    [[1, 2], [3]]
    """

    def __init__(self, values, row_splits, _internal=True):
        self._values = values if isinstance(values, RaggedTensor) else convert_to_tensor(values)
        self._row_splits = row_splits
        nvals = self._values.nrows() if isinstance(self._values, RaggedTensor) else \
            int(self._values.shape[0])
        if int(row_splits[-1]) != nvals:
            raise ValueError(f"RaggedTensor: row_splits end at {int(row_splits[-1])} but there "
                             f"are {nvals} values (rows of the next dimension)")

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def from_row_splits(cls, values, row_splits, name=None, validate=True):
        return cls(values, _splits(row_splits, "from_row_splits"))

    @classmethod
    def from_row_lengths(cls, values, row_lengths, name=None, validate=True):
        lengths = np.asarray(row_lengths.numpy() if isinstance(row_lengths, Tensor)
                             else row_lengths, np.int64)
        if (lengths < 0).any():
            raise ValueError(f"RaggedTensor.from_row_lengths: row_lengths must be >= 0, got "
                             f"{lengths.tolist()}")
        return cls(values, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))

    @classmethod
    def from_value_rowids(cls, values, value_rowids, nrows=None, name=None, validate=True):
        ids = np.asarray(value_rowids.numpy() if isinstance(value_rowids, Tensor)
                         else value_rowids, np.int64)
        if len(ids) and (np.diff(ids) < 0).any():
            raise ValueError("RaggedTensor.from_value_rowids: value_rowids must be sorted")
        n = int(nrows) if nrows is not None else (int(ids[-1]) + 1 if len(ids) else 0)
        lengths = np.bincount(ids, minlength=n) if len(ids) else np.zeros(n, np.int64)
        return cls.from_row_lengths(values, lengths)

    @classmethod
    def from_row_starts(cls, values, row_starts, name=None, validate=True):
        starts = np.asarray(row_starts, np.int64)
        n = cls._outer_len(values)
        return cls.from_row_splits(values, np.concatenate([starts, [n]]))

    @classmethod
    def from_row_limits(cls, values, row_limits, name=None, validate=True):
        return cls.from_row_splits(values, np.concatenate([[0], np.asarray(row_limits,
                                                                           np.int64)]))

    @classmethod
    def from_nested_row_splits(cls, flat_values, nested_row_splits, name=None, validate=True):
        result = flat_values
        for splits in reversed(list(nested_row_splits)):
            result = cls.from_row_splits(result, splits)
        return result

    @classmethod
    def from_nested_row_lengths(cls, flat_values, nested_row_lengths, name=None,
                                validate=True):
        result = flat_values
        for lengths in reversed(list(nested_row_lengths)):
            result = cls.from_row_lengths(result, lengths)
        return result

    @classmethod
    def from_tensor(cls, tensor, lengths=None, padding=None, ragged_rank=1, name=None):
        """Rows of a dense tensor, cut to `lengths` or where `padding` starts at the end."""
        t = convert_to_tensor(tensor)
        arr = t.numpy()
        n, m = arr.shape[0], arr.shape[1]
        if lengths is not None:
            lens = np.asarray(lengths, np.int64)
        elif padding is not None:
            pad = np.asarray(arr == padding)
            pad = pad.reshape(n, m, -1).all(axis=2)
            lens = np.array([m - int(np.argmin(row[::-1])) if not row.all() else 0
                             for row in pad]) if m else np.zeros(n, np.int64)
            lens = np.where(pad.all(axis=1), 0, lens)
        else:
            lens = np.full(n, m, np.int64)
        rows = np.concatenate([np.arange(int(k)) + i * m for i, k in enumerate(lens)]) \
            if lens.sum() else np.zeros(0, np.int64)
        flat = _tg().reshape(t, [n * m] + list(t.shape[2:]))
        return cls.from_row_lengths(_tg().gather(flat, rows.astype(np.int64)), lens)

    @staticmethod
    def _outer_len(values):
        return values.nrows() if isinstance(values, RaggedTensor) else \
            int(convert_to_tensor(values).shape[0])

    # -- accessors ----------------------------------------------------------------------------
    @property
    def values(self):
        return self._values

    @property
    def flat_values(self):
        v = self._values
        return v.flat_values if isinstance(v, RaggedTensor) else v

    @property
    def row_splits(self):
        return convert_to_tensor(self._row_splits)

    @property
    def nested_row_splits(self):
        inner = self._values.nested_row_splits if isinstance(self._values, RaggedTensor) \
            else ()
        return (self.row_splits,) + tuple(inner)

    @property
    def ragged_rank(self):
        return 1 + (self._values.ragged_rank if isinstance(self._values, RaggedTensor) else 0)

    @property
    def dtype(self):
        return self.flat_values.dtype

    @property
    def shape(self):
        from .core.shape import TensorShape
        inner = list(self._values.shape)[1:]
        return TensorShape([self.nrows_int(), None] + inner)

    def nrows_int(self):
        return len(self._row_splits) - 1

    def nrows(self, out_type="int64", name=None):
        return convert_to_tensor(np.asarray(self.nrows_int(), np.dtype(out_type)))

    def row_lengths(self, axis=1, name=None):
        if axis != 1:
            return self._values.row_lengths(axis - 1)
        return convert_to_tensor(np.diff(self._row_splits))

    def row_starts(self, name=None):
        return convert_to_tensor(self._row_splits[:-1])

    def row_limits(self, name=None):
        return convert_to_tensor(self._row_splits[1:])

    def value_rowids(self, name=None):
        return convert_to_tensor(np.repeat(np.arange(self.nrows_int()),
                                           np.diff(self._row_splits)).astype(np.int64))

    def with_values(self, new_values):
        return RaggedTensor(new_values, self._row_splits)

    def with_flat_values(self, new_values):
        if isinstance(self._values, RaggedTensor):
            return RaggedTensor(self._values.with_flat_values(new_values), self._row_splits)
        return RaggedTensor(new_values, self._row_splits)

    def bounding_shape(self, axis=None, name=None, out_type="int64"):
        shape = self._bounding()
        out = convert_to_tensor(np.asarray(shape, np.dtype(out_type)))
        return out if axis is None else out[axis]

    def _bounding(self):
        lengths = np.diff(self._row_splits)
        width = int(lengths.max()) if len(lengths) else 0
        if isinstance(self._values, RaggedTensor):
            inner = self._values._bounding()[1:]
        else:
            inner = list(self._values.shape[1:])
        return [self.nrows_int(), width] + list(inner)

    # -- conversion ---------------------------------------------------------------------------
    def to_tensor(self, default_value=None, name=None, shape=None):
        """The padded dense tensor (`default_value`, 0 by default, in the padding), of the
        bounding shape or `shape`; differentiable in the values."""
        tg = _tg()
        inner = self._values.to_tensor(default_value) if isinstance(
            self._values, RaggedTensor) else self._values
        bshape = [self.nrows_int(), self._bounding()[1]] + list(inner.shape[1:])
        if shape is not None:
            bshape = [b if s is None else int(s) for b, s in zip(bshape, shape)]
        n, width = bshape[0], bshape[1]
        lengths = np.diff(self._row_splits)
        rows, cols, src = [], [], []
        for i in _builtin_range(min(n, self.nrows_int())):
            k = min(int(lengths[i]), width)
            rows.extend([i] * k)
            cols.extend(_builtin_range(k))
            src.extend(_builtin_range(int(self._row_splits[i]), int(self._row_splits[i]) + k))
        inner_shape = bshape[2:]
        inner = _fit(inner, inner_shape)
        picked = tg.gather(inner, np.asarray(src, np.int64)) if src else \
            tg.zeros([0] + inner_shape, dtype=inner.dtype)
        idx = np.stack([np.asarray(rows, np.int64), np.asarray(cols, np.int64)], axis=1) \
            if rows else np.zeros((0, 2), np.int64)
        out = tg.scatter_nd(idx, picked, bshape)
        if default_value is not None and default_value != 0:
            mask = np.zeros(bshape[:2], bool)
            mask[rows, cols] = True
            mask = mask.reshape(bshape[:2] + [1] * len(inner_shape))
            fill = tg.cast(tg.fill(bshape, default_value), out.dtype)
            out = tg.where(tg.constant(np.broadcast_to(mask, bshape)), out, fill)
        return out

    def to_list(self):
        vals = self._values.to_list() if isinstance(self._values, RaggedTensor) else \
            self._values.numpy().tolist()
        return [vals[int(a):int(b)] for a, b in zip(self._row_splits[:-1],
                                                     self._row_splits[1:])]

    def numpy(self):
        """An object array of the rows' arrays (as TF's `RaggedTensor.numpy()`)."""
        out = np.empty(self.nrows_int(), dtype=object)
        for i, (a, b) in enumerate(zip(self._row_splits[:-1], self._row_splits[1:])):
            row = self._values[int(a):int(b)]
            out[i] = row.numpy() if not isinstance(row, list) else np.asarray(row)
        return out

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            n = self.nrows_int()
            i = key + n if key < 0 else key
            if not 0 <= i < n:
                raise IndexError(f"RaggedTensor: row {key} out of range for {n} rows")
            a, b = int(self._row_splits[i]), int(self._row_splits[i + 1])
            if isinstance(self._values, RaggedTensor):
                return self._values._rows(a, b)
            return self._values[a:b]
        if isinstance(key, slice):
            idx = _builtin_range(*key.indices(self.nrows_int()))
            return self._select(list(idx))
        raise TypeError(f"RaggedTensor: index with an int or a slice of rows (or use "
                        f"to_tensor()), got {key!r}")

    def _rows(self, a, b):
        return self._select(list(_builtin_range(a, b)))

    def _select(self, rows):
        lengths = np.diff(self._row_splits)[rows] if rows else np.zeros(0, np.int64)
        src = [j for i in rows for j in _builtin_range(int(self._row_splits[i]),
                                              int(self._row_splits[i + 1]))]
        if isinstance(self._values, RaggedTensor):
            vals = self._values._select(src)
        else:
            vals = _tg().gather(self._values, np.asarray(src, np.int64)) if src else \
                self._values[0:0]
        return RaggedTensor.from_row_lengths(vals, lengths)

    def __repr__(self):
        return f"<tg.RaggedTensor {self.to_list()}>"


def _fit(t, shape):
    """`t` (rows, *inner) cut or zero-padded to inner `shape`."""
    if list(t.shape[1:]) == list(shape):
        return t
    tg = _tg()
    sl = [slice(None)] + [slice(0, s) for s in shape]
    t = t[tuple(sl)]
    pads = [[0, 0]] + [[0, s - d] for s, d in zip(shape, t.shape[1:])]
    return tg.pad(t, pads)


def _depth(x):
    d = 0
    while isinstance(x, (list, tuple)):
        if not x:
            return d + 1
        x = x[0]
        d += 1
    return d


def constant(pylist, dtype=None, ragged_rank=None, inner_shape=None, name=None,
             row_splits_dtype="int64"):
    """A RaggedTensor of a nested Python list (TF's `tf.ragged.constant`): ragged in every
    dimension but the last uniform ones (`ragged_rank` defaults to the list's depth - 1).

    >>> tg.ragged.constant([[[1, 2], [3]], [[4]]]).ragged_rank
    2
    """
    depth = _depth(pylist)
    if ragged_rank is None:
        ragged_rank = max(depth - 1 - (len(inner_shape) if inner_shape else 0), 1)
    if depth <= ragged_rank:
        raise ValueError(f"ragged.constant: the list's depth {depth} must exceed ragged_rank "
                         f"{ragged_rank}")

    splits_per_level = []
    level = list(pylist)
    for _ in _builtin_range(ragged_rank):
        splits = [0]
        nxt = []
        for row in level:
            if not isinstance(row, (list, tuple)):
                raise ValueError("ragged.constant: all rows must be nested to the same depth")
            nxt.extend(row)
            splits.append(len(nxt))
        splits_per_level.append(np.asarray(splits, np.int64))
        level = nxt
    np_dtype = None if dtype is None else np.dtype(getattr(dtype, "name", dtype))
    arr = np.asarray(level, dtype=np_dtype)
    if arr.dtype == np.float64 and dtype is None:
        arr = arr.astype(np.float32)
    if arr.dtype == np.int64 and dtype is None and all(
            isinstance(v, int) for v in np.ravel(arr).tolist()[:1]):
        arr = arr.astype(np.int32)
    if inner_shape is not None and len(level) == 0:
        arr = arr.reshape((0,) + tuple(inner_shape))
    flat = convert_to_tensor(arr)
    return RaggedTensor.from_nested_row_splits(flat, splits_per_level)


def map_flat_values(op, *args, **kwargs):
    """`op` applied to the flat values of the RaggedTensor arguments (the partitions kept).

    >>> tg.ragged.map_flat_values(tg.square, tg.ragged.constant([[1, 2], [3]])).to_list()
    [[1, 4], [9]]
    """
    rts = [a for a in list(args) + list(kwargs.values()) if isinstance(a, RaggedTensor)]
    if not rts:
        return op(*args, **kwargs)
    first = rts[0]
    unwrap = [a.flat_values if isinstance(a, RaggedTensor) else a for a in args]
    kw = {k: v.flat_values if isinstance(v, RaggedTensor) else v for k, v in kwargs.items()}
    return first.with_flat_values(op(*unwrap, **kw))


def row_splits_to_segment_ids(splits, name=None, out_type="int64"):
    """The row of each value from row splits.

    >>> tg.ragged.row_splits_to_segment_ids([0, 2, 3]).numpy()
    array([0, 0, 1])
    """
    s = _splits(splits, "row_splits_to_segment_ids")
    return convert_to_tensor(np.repeat(np.arange(len(s) - 1), np.diff(s)).astype(out_type))


def segment_ids_to_row_splits(segment_ids, num_segments=None, out_type="int64", name=None):
    """Row splits from the row of each value.

    >>> tg.ragged.segment_ids_to_row_splits([0, 0, 1]).numpy()
    array([0, 2, 3])
    """
    ids = np.asarray(segment_ids, np.int64)
    n = num_segments if num_segments is not None else (int(ids.max()) + 1 if len(ids) else 0)
    return convert_to_tensor(np.concatenate([[0], np.cumsum(np.bincount(ids, minlength=n))])
                             .astype(out_type))


def range(starts, limits=None, deltas=1, dtype=None, name=None, row_splits_dtype="int64"):  # noqa: A001
    """Row i is range(starts[i], limits[i], deltas[i]) (TF's `tf.ragged.range`).

    >>> tg.ragged.range([3, 1]).to_list()
    [[0, 1, 2], [0]]
    """
    if limits is None:
        starts, limits = 0, starts
    s, lim, d = np.broadcast_arrays(np.asarray(starts), np.asarray(limits), np.asarray(deltas))
    rows = [np.arange(a, b, c) for a, b, c in zip(s.ravel(), lim.ravel(), d.ravel())]
    values = np.concatenate(rows) if rows else np.zeros(0)
    values = values.astype(np.dtype(getattr(dtype, "name", dtype)) if dtype is not None else
                           (np.int32 if values.dtype.kind == "i" else np.float32))
    return RaggedTensor.from_row_lengths(values, [len(r) for r in rows])
