"""Tensor creation on the current device."""
import numpy as np

from .. import backends as _backend
from ..core.dtypes import np_dtype
from .registry import InvalidArgumentError
from ._base import public
from ..core.tensor import Tensor, convert_to_tensor


def _shape(shape):
    if isinstance(shape, Tensor):
        shape = shape.numpy().tolist()
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise InvalidArgumentError(f"shape {shape} has a negative dimension")
    return shape


def _make(fill, shape, dtype, default=np.float32):
    dev = _backend.current()
    dt = np_dtype(dtype) or np.dtype(default)
    return Tensor(dev.xp.full(_shape(shape), fill, dtype=dt), dev)


def zeros(shape, dtype=None, name=None):
    """A tensor of zeros (float32 unless `dtype`).

    >>> tg.zeros((2, 3)).shape
    (2, 3)
    """
    return _make(0, shape, dtype)


def ones(shape, dtype=None, name=None):
    """A tensor of ones (float32 unless `dtype`).

    >>> tg.ones(2).numpy()
    array([1., 1.], dtype=float32)
    """
    return _make(1, shape, dtype)


def zeros_like(input, dtype=None, name=None):  # noqa: A002
    """Zeros with the shape, dtype and device of `input`.

    >>> tg.zeros_like(tg.constant([1, 2])).numpy()
    array([0, 0], dtype=int32)
    """
    x = convert_to_tensor(input)
    return Tensor(x._dev.xp.zeros(x.shape, dtype=np_dtype(dtype) or x._data.dtype), x._dev)


def ones_like(input, dtype=None, name=None):  # noqa: A002
    """Ones with the shape, dtype and device of `input`.

    >>> tg.ones_like(tg.constant([1.0, 2.0])).numpy()
    array([1., 1.], dtype=float32)
    """
    x = input if type(input) is Tensor else convert_to_tensor(input)
    return Tensor(x._dev.xp.ones(x._data.shape, dtype=np_dtype(dtype) or x._data.dtype), x._dev)


def fill(dims, value, name=None):
    """A tensor of shape `dims` filled with `value` (its dtype inferred as for tg.constant).

    >>> tg.fill((2,), 7).numpy()
    array([7, 7], dtype=int32)
    """
    v = convert_to_tensor(value)
    return Tensor(v._dev.xp.full(_shape(dims), v._data, dtype=v._data.dtype), v._dev)


def eye(num_rows, num_columns=None, batch_shape=None, dtype=None, name=None):
    """An identity matrix (optionally batched).

    >>> tg.eye(2).numpy()
    array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    dev = _backend.current()
    m = dev.xp.eye(int(num_rows), None if num_columns is None else int(num_columns),
                   dtype=np_dtype(dtype) or np.float32)
    if batch_shape:
        m = dev.xp.broadcast_to(m, tuple(batch_shape) + m.shape).copy()
    return Tensor(m, dev)


def linspace(start, stop, num, name=None, axis=0):
    """`num` evenly spaced values from start to stop inclusive (float32 for Python floats).

    >>> tg.linspace(0.0, 1.0, 3).numpy()
    array([0. , 0.5, 1. ], dtype=float32)
    """
    a = convert_to_tensor(start)
    dt = a._data.dtype if a._data.dtype.kind == "f" else np.dtype(np.float32)
    return Tensor(a._dev.xp.linspace(a._data, convert_to_tensor(stop)._data, int(num),
                                     dtype=dt, axis=axis), a._dev)


def range(start, limit=None, delta=1, dtype=None, name=None):  # noqa: A001
    """Like Python's range, as a tensor (int32 for ints, float32 for floats).

    >>> tg.range(3).numpy()
    array([0, 1, 2], dtype=int32)
    """
    if limit is None:
        start, limit = 0, start
    vals = [start, limit, delta]
    dev = _backend.current()
    if dtype is None:
        dtype = np.float32 if any(isinstance(v, float) for v in vals) else np.int32
    return Tensor(dev.xp.arange(start, limit, delta, dtype=np_dtype(dtype)), dev)


__all__ = public(globals(), ("",))
