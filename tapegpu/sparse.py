"""`tg.sparse` and `tg.SparseTensor`: TensorFlow's sparse tensors in COO form (`indices`
int64 (N, rank), `values` (N,), `dense_shape` int64 (rank,)), with the functions real programs
use: `to_dense`, `from_dense`, `sparse_dense_matmul`, `reorder`, `add`, `reduce_sum`,
`retain`, `reset_shape`, `transpose`, `expand_dims`, `slice`, `to_indicator`. The computations go
through dense tensors (tapegpu has no sparse kernels), so `values` keep their gradients through
`to_dense` and `sparse_dense_matmul`; memory is that of the dense result.

>>> st = tg.sparse.SparseTensor(indices=[[0, 0], [1, 2]], values=[1.0, 2.0], dense_shape=[3, 4])
>>> tg.sparse.to_dense(st).numpy()
array([[1., 0., 0., 0.],
       [0., 0., 2., 0.],
       [0., 0., 0., 0.]], dtype=float32)
"""
import numpy as np

from .core.tensor import Tensor, Variable, constant, convert_to_tensor


def _tg():
    import tapegpu
    return tapegpu


class SparseTensor:
    """A sparse tensor (`tf.sparse.SparseTensor`): `indices` (N, rank) int64, `values` (N,),
    `dense_shape` (rank,) int64; `shape`, `dtype`, `with_values`, `from_value`, and `to_dense`
    via `tg.sparse.to_dense`.

    >>> tg.SparseTensor([[0, 1]], [5], [2, 2]).shape
    (2, 2)
    """

    def __init__(self, indices, values, dense_shape):
        self.indices = convert_to_tensor(np.asarray(indices.numpy() if isinstance(
            indices, (Tensor, Variable)) else indices, dtype=np.int64).reshape(-1, len(
                np.asarray(dense_shape.numpy() if isinstance(dense_shape, Tensor)
                           else dense_shape).reshape(-1))))
        self.values = values if isinstance(values, (Tensor, Variable)) else \
            convert_to_tensor(values)
        self.dense_shape = convert_to_tensor(np.asarray(
            dense_shape.numpy() if isinstance(dense_shape, Tensor) else dense_shape,
            dtype=np.int64).reshape(-1))
        n = int(self.indices.shape[0])
        if tuple(self.values.shape) != (n,):
            raise ValueError(f"SparseTensor: values must have shape ({n},) (one per index), "
                             f"got {tuple(self.values.shape)}")

    @property
    def shape(self):
        from .core.shape import TensorShape
        return TensorShape([int(d) for d in self.dense_shape.numpy()])

    @property
    def dtype(self):
        return self.values.dtype

    def get_shape(self):
        return self.shape

    def with_values(self, new_values):
        """The same indices and shape with `new_values`."""
        return SparseTensor(self.indices, new_values, self.dense_shape)

    @classmethod
    def from_value(cls, value):
        return value if isinstance(value, SparseTensor) else from_dense(value)

    def __repr__(self):
        return (f"SparseTensor(indices={self.indices!r}, values={self.values!r}, "
                f"dense_shape={self.dense_shape!r})")

    def __mul__(self, other):  # elementwise with a dense tensor or scalar, as TF's
        dense = convert_to_tensor(other)
        if dense.ndim == 0:
            return self.with_values(self.values * dense)
        picked = _tg().gather_nd(_tg().broadcast_to(dense, self.shape), self.indices)
        return self.with_values(self.values * picked)

    __rmul__ = __mul__


SparseTensorValue = SparseTensor


def to_dense(sp_input, default_value=None, validate_indices=True, name=None):
    """The dense tensor of `sp_input` (`default_value`, 0 by default, where no index is);
    differentiable in the values.

    >>> tg.sparse.to_dense(tg.SparseTensor([[1]], [3], [3]), default_value=-1).numpy()
    array([-1,  3, -1], dtype=int32)
    """
    _check(sp_input, "to_dense")
    tg = _tg()
    shape = [int(d) for d in sp_input.dense_shape.numpy()]
    idx = sp_input.indices.numpy()
    if validate_indices and len(idx):
        if (idx < 0).any() or (idx >= np.asarray(shape)).any():
            raise tg.errors.InvalidArgumentError(
                None, None, f"sparse.to_dense: an index of {idx.tolist()} is out of bounds of "
                            f"dense_shape {shape}")
        flat = np.ravel_multi_index(idx.T, shape)
        if len(np.unique(flat)) != len(flat):
            raise tg.errors.InvalidArgumentError(
                None, None, "sparse.to_dense: indices repeat an index")
    out = tg.scatter_nd(sp_input.indices, sp_input.values, shape)
    if default_value is not None and default_value != 0:
        mask = tg.scatter_nd(sp_input.indices, tg.ones_like(sp_input.values, dtype="bool"),
                             shape) if len(idx) else tg.zeros(shape, dtype="bool")
        out = tg.where(mask, out, tg.cast(tg.fill(shape, default_value), out.dtype))
    return out


def from_dense(tensor, name=None):
    """The SparseTensor of `tensor`'s nonzero entries (row-major order).

    >>> tg.sparse.from_dense(tg.constant([0, 7, 0])).indices.numpy()
    array([[1]])
    """
    tg = _tg()
    t = convert_to_tensor(tensor)
    idx = np.argwhere(t.numpy() != 0).astype(np.int64)
    values = tg.gather_nd(t, idx) if len(idx) else tg.zeros((0,), dtype=t.dtype)
    return SparseTensor(idx, values, list(t.shape))


def sparse_dense_matmul(sp_a, b, adjoint_a=False, adjoint_b=False, name=None):
    """`sp_a @ b` with a SparseTensor `sp_a` (either may be the sparse one, as TF).

    >>> tg.sparse.sparse_dense_matmul(tg.SparseTensor([[0, 1]], [2.0], [1, 2]),
    ...                               tg.ones((2, 1))).numpy()
    array([[2.]], dtype=float32)
    """
    tg = _tg()
    a = to_dense(sp_a) if isinstance(sp_a, SparseTensor) else convert_to_tensor(sp_a)
    b = to_dense(b) if isinstance(b, SparseTensor) else convert_to_tensor(b)
    return tg.matmul(a, b, adjoint_a=adjoint_a, adjoint_b=adjoint_b) if adjoint_a or \
        adjoint_b else tg.matmul(a, b)


def reorder(sp_input, name=None):
    """The same SparseTensor with its indices in row-major order.

    >>> tg.sparse.reorder(tg.SparseTensor([[1], [0]], [1, 2], [2])).values.numpy()
    array([2, 1], dtype=int32)
    """
    _check(sp_input, "reorder")
    idx = sp_input.indices.numpy()
    shape = sp_input.dense_shape.numpy()
    order = np.argsort(np.ravel_multi_index(idx.T, shape), kind="stable") if len(idx) else \
        np.zeros(0, np.int64)
    return SparseTensor(idx[order], _tg().gather(sp_input.values, order),
                        sp_input.dense_shape)


def add(a, b, threshold=0):
    """a + b: a SparseTensor when both are sparse, else a dense tensor.

    >>> tg.sparse.add(tg.SparseTensor([[0]], [1.0], [2]), tg.constant([1.0, 1.0])).numpy()
    array([2., 1.], dtype=float32)
    """
    if isinstance(a, SparseTensor) and isinstance(b, SparseTensor):
        return from_dense(to_dense(a) + to_dense(b))
    a = to_dense(a) if isinstance(a, SparseTensor) else a
    b = to_dense(b) if isinstance(b, SparseTensor) else b
    return convert_to_tensor(a) + convert_to_tensor(b)


def reduce_sum(sp_input, axis=None, keepdims=False, output_is_sparse=False, name=None):
    """The sum over `axis` (all by default) of the dense values, as TF's.

    >>> float(tg.sparse.reduce_sum(tg.SparseTensor([[0], [2]], [1.0, 2.0], [3])))
    3.0
    """
    out = _tg().reduce_sum(to_dense(sp_input), axis=axis, keepdims=keepdims)
    return from_dense(out) if output_is_sparse else out


def reduce_max(sp_input, axis=None, keepdims=False, output_is_sparse=False, name=None):
    """The maximum over `axis` of the dense values (absent entries count as 0).

    >>> float(tg.sparse.reduce_max(tg.SparseTensor([[0]], [-1.0], [2])))
    0.0
    """
    out = _tg().reduce_max(to_dense(sp_input), axis=axis, keepdims=keepdims)
    return from_dense(out) if output_is_sparse else out


def retain(sp_input, to_retain):
    """The entries where the boolean vector `to_retain` is True.

    >>> tg.sparse.retain(tg.SparseTensor([[0], [1]], [5, 6], [2]), [False, True]).values.numpy()
    array([6], dtype=int32)
    """
    keep = np.flatnonzero(np.asarray(convert_to_tensor(to_retain).numpy(), bool))
    return SparseTensor(sp_input.indices.numpy()[keep], _tg().gather(sp_input.values, keep),
                        sp_input.dense_shape)


def reset_shape(sp_input, new_shape=None):
    """The same entries with `new_shape`, or the tightest shape holding them.

    >>> tg.sparse.reset_shape(tg.SparseTensor([[1, 2]], [1], [5, 5])).shape
    (2, 3)
    """
    shape = new_shape if new_shape is not None else \
        (sp_input.indices.numpy().max(axis=0) + 1 if int(sp_input.indices.shape[0]) else
         np.zeros(len(sp_input.shape), np.int64))
    return SparseTensor(sp_input.indices, sp_input.values, shape)


def transpose(sp_input, perm=None, name=None):
    """The SparseTensor with its dimensions permuted (reversed by default).

    >>> tg.sparse.transpose(tg.SparseTensor([[0, 1]], [1], [2, 3])).indices.numpy()
    array([[1, 0]])
    """
    rank = len(sp_input.shape)
    perm = list(range(rank))[::-1] if perm is None else list(perm)
    idx = sp_input.indices.numpy()[:, perm]
    shape = sp_input.dense_shape.numpy()[perm]
    return reorder(SparseTensor(idx, sp_input.values, shape))


def expand_dims(sp_input, axis=None, name=None):
    """The SparseTensor with a dimension of size 1 inserted at `axis` (last by default).

    >>> tg.sparse.expand_dims(tg.SparseTensor([[1]], [1], [3]), 0).shape
    (1, 3)
    """
    rank = len(sp_input.shape)
    axis = -1 if axis is None else axis
    axis = axis % (rank + 1)
    idx = np.insert(sp_input.indices.numpy(), axis, 0, axis=1)
    shape = np.insert(sp_input.dense_shape.numpy(), axis, 1)
    return SparseTensor(idx, sp_input.values, shape)


def slice(sp_input, start, size, name=None):  # noqa: A001  (TF's name)
    """The entries in the box [start, start + size), re-indexed from `start`.

    >>> tg.sparse.slice(tg.SparseTensor([[0], [3]], [1, 2], [4]), [2], [2]).indices.numpy()
    array([[1]])
    """
    idx = sp_input.indices.numpy()
    start, size = np.asarray(start, np.int64), np.asarray(size, np.int64)
    shape = np.minimum(start + size, sp_input.dense_shape.numpy()) - start
    keep = np.flatnonzero(((idx >= start) & (idx < start + size)).all(axis=1))
    return SparseTensor(idx[keep] - start, _tg().gather(sp_input.values, keep),
                        np.maximum(shape, 0))


def to_indicator(sp_input, vocab_size, name=None):
    """A dense bool tensor (..., vocab_size): True at each row's values (TF's to_indicator).

    >>> tg.sparse.to_indicator(tg.SparseTensor([[0, 0]], [2], [1, 1]), 3).numpy()
    array([[False, False,  True]])
    """
    tg = _tg()
    idx = sp_input.indices.numpy()
    vals = np.asarray(sp_input.values.numpy(), np.int64)
    outer = [int(d) for d in sp_input.dense_shape.numpy()[:-1]]
    out = np.zeros(outer + [vocab_size], bool)
    for i, v in zip(idx, vals):
        out[tuple(i[:-1]) + (v,)] = True
    return tg.constant(out)


def _check(sp, who):
    if not isinstance(sp, SparseTensor):
        raise TypeError(f"sparse.{who}: expected a SparseTensor, got {type(sp).__name__}")


def eye(num_rows, num_columns=None, dtype="float32", name=None):
    """The identity matrix as a SparseTensor.

    >>> tg.sparse.to_dense(tg.sparse.eye(2)).numpy()
    array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    n = min(num_rows, num_columns or num_rows)
    return SparseTensor(np.stack([np.arange(n)] * 2, axis=1), constant(np.ones(n, np.dtype(
        getattr(dtype, "name", dtype)))), [num_rows, num_columns or num_rows])
