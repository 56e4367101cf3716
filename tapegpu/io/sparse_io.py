"""Sparse tensors as bytes: `tg.io.serialize_sparse`, `serialize_many_sparse` and
`deserialize_many_sparse` (each part a serialized TensorProto, tensors.py). Imported when
first used, as tg.sparse is (tapegpu/io/__init__.py).

>>> s = tg.io.serialize_sparse(tg.SparseTensor([[0, 1]], [5], [2, 2]))
>>> s.shape
(3,)
"""
import numpy as np

from .. import backends as _backend
from ..core import dtypes
from ..core.tensor import Tensor, convert_to_tensor
from ..errors import InvalidArgumentError
from ..sparse import SparseTensor
from .tensors import _proto_of_array, host_array, parse_tensor, serialize_tensor

__all__ = ["serialize_sparse", "serialize_many_sparse", "deserialize_many_sparse"]


def serialize_sparse(sp_input, out_type=dtypes.string, name=None):
    """A SparseTensor as a 1-D string tensor of 3 serialized tensors: its indices, values and
    dense shape (`tf.io.serialize_sparse`).

    >>> s = tg.io.serialize_sparse(tg.SparseTensor([[0, 1]], [5], [2, 2]))
    >>> tg.io.parse_tensor(s[2], tg.int64).numpy().tolist()
    [2, 2]
    """
    who = "tf.io.serialize_sparse"
    if not isinstance(sp_input, SparseTensor):
        raise TypeError(f"{who}: expected a tg.SparseTensor, got {type(sp_input).__name__}")
    if not dtypes.as_dtype(out_type).is_string:
        raise NotImplementedError(f"{who}: out_type={dtypes.as_dtype(out_type).name} is not "
                                  "implemented in tapegpu (variant tensors do not exist here); "
                                  "use out_type=tg.string")
    parts = [serialize_tensor(t).numpy() for t in (sp_input.indices, sp_input.values,
                                                   sp_input.dense_shape)]
    arr = np.empty(3, dtype=object)
    arr[:] = parts
    return Tensor(arr, _backend.lookup("cpu"))


def _sparse_parts(sp, who):
    if not isinstance(sp, SparseTensor):
        raise TypeError(f"{who}: expected a tg.SparseTensor, got {type(sp).__name__}")
    values = host_array(sp.values)
    return sp.indices.numpy(), values, sp.dense_shape.numpy(), sp.values.dtype


def serialize_many_sparse(sp_input, out_type=dtypes.string, name=None):
    """A SparseTensor whose first dimension is a minibatch, as a `[N, 3]` string tensor: row
    i holds the serialized indices, values and dense shape of the i-th entry
    (`tf.io.serialize_many_sparse`); `deserialize_many_sparse` reads it back.

    >>> sp = tg.SparseTensor([[0, 0], [1, 2]], [1.0, 2.0], [2, 3])
    >>> tg.io.serialize_many_sparse(sp).shape
    (2, 3)
    """
    who = "tf.io.serialize_many_sparse"
    if not dtypes.as_dtype(out_type).is_string:
        raise NotImplementedError(f"{who}: out_type={dtypes.as_dtype(out_type).name} is not "
                                  "implemented in tapegpu (variant tensors do not exist here); "
                                  "use out_type=tg.string")
    indices, values, shape, dtype = _sparse_parts(sp_input, who)
    if len(shape) < 2:
        raise InvalidArgumentError(f"{who}: sp_input must have rank >= 2 (a minibatch of "
                                   f"sparse tensors), got dense shape {shape.tolist()}")
    rows = np.empty((int(shape[0]), 3), dtype=object)
    for i in range(int(shape[0])):
        mine = indices[:, 0] == i
        parts = (indices[mine][:, 1:], values[mine], shape[1:])
        rows[i] = [_proto_of_array(np.asarray(a) if k != 1 else a, dt, who)
                   .SerializeToString() for k, (a, dt) in enumerate(
                       zip(parts, (dtypes.int64, dtype, dtypes.int64)))]
    return Tensor(rows, _backend.lookup("cpu"))


def deserialize_many_sparse(serialized_sparse, dtype, rank=None, name=None):
    """The SparseTensor of a `[N, 3]` string tensor of serialized sparse tensors
    (`tf.io.deserialize_many_sparse`): the N entries stacked along a new first dimension,
    the dense shape being the largest of theirs.

    >>> sp = tg.SparseTensor([[0, 0], [1, 2]], [1.0, 2.0], [2, 3])
    >>> back = tg.io.deserialize_many_sparse(tg.io.serialize_many_sparse(sp), tg.float32)
    >>> back.indices.numpy().tolist(), back.dense_shape.numpy().tolist()
    ([[0, 0], [1, 2]], [2, 3])
    """
    who = "tf.io.deserialize_many_sparse"
    dtype = dtypes.as_dtype(dtype)
    t = serialized_sparse if isinstance(serialized_sparse, Tensor) else \
        convert_to_tensor(serialized_sparse)
    if not t.dtype.is_string or t.ndim != 2 or t.shape[1] != 3:
        raise InvalidArgumentError(f"{who}: serialized_sparse must be a [N, 3] tg.string "
                                   f"tensor, got {t.dtype.name} of shape {tuple(t.shape)}")
    all_indices, all_values, shapes = [], [], []
    for i, row in enumerate(host_array(t)):
        idx = parse_tensor(row[0], dtypes.int64).numpy()
        vals = parse_tensor(row[1], dtype)
        vals = host_array(vals)
        shp = parse_tensor(row[2], dtypes.int64).numpy()
        if shapes and len(shp) != len(shapes[0]):
            raise InvalidArgumentError(f"{who}: Inconsistent rank across SparseTensors: rank "
                                       f"prior to SparseTensor[{i}] was: {len(shapes[0]) + 1} "
                                       f"but rank of SparseTensor[{i}] is: {len(shp) + 1}")
        shapes.append(shp)
        all_indices.append(np.concatenate([np.full((len(idx), 1), i, np.int64),
                                           idx.reshape(len(idx), len(shp))], axis=1))
        all_values.append(vals)
    n = len(shapes)
    inner = np.max(np.stack(shapes), axis=0) if n else np.zeros(0 if rank is None
                                                                 else rank - 1, np.int64)
    if rank is not None and len(inner) + 1 != rank:
        raise InvalidArgumentError(f"{who}: the serialized sparse tensors have rank "
                                   f"{len(inner) + 1}, not {rank}")
    indices = np.concatenate(all_indices) if n else np.zeros((0, len(inner) + 1), np.int64)
    if dtype.is_string:
        values = np.empty(sum(len(v) for v in all_values), dtype=object)
        values[:] = [v for vs in all_values for v in vs]
        values = Tensor(values, _backend.lookup("cpu"))
    else:
        values = convert_to_tensor(np.concatenate(all_values).astype(dtype._np) if n
                                   else np.zeros(0, dtype._np))
    return SparseTensor(indices, values, [n] + [int(d) for d in inner])
