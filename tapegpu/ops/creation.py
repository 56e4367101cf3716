"""Tensor creation on the current device."""
import numpy as np

from .. import backends as _backend
from ..core.dtypes import np_dtype
from .registry import InvalidArgumentError
from ._base import public
from ..core.tensor import Tensor, convert_to_tensor


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _shape(shape, op):
    """`shape` (an int, a sequence of ints or an integer tensor) as a tuple of sizes >= 0."""
    given = shape
    if isinstance(shape, Tensor):
        if shape._data.dtype.kind not in "iu" or shape.ndim > 1:
            raise TypeError(f"{op}: a shape tensor must be an integer scalar or vector, got "
                            f"{shape.dtype.name} of shape {shape.shape}")
        shape = shape.numpy().tolist()
    if _is_int(shape):
        shape = (shape,)
    try:
        dims = list(shape)
    except TypeError:
        raise TypeError(f"{op}: shape must be an int or a sequence of ints, got "
                        f"{given!r}") from None
    # integer scalar tensors among the sizes, as TensorFlow takes them (`fill([n], x)`)
    dims = [int(d) if isinstance(d, Tensor) and d.ndim == 0 and d._data.dtype.kind in "iu"
            else d for d in dims]
    bad = [d for d in dims if not _is_int(d)]
    if bad:
        raise TypeError(f"{op}: shape must be an int or a sequence of ints, got {given!r} "
                        f"({bad[0]!r} is a {type(bad[0]).__name__})")
    shape = tuple(int(d) for d in dims)
    if any(s < 0 for s in shape):
        raise InvalidArgumentError(f"{op}: shape {shape} has a negative dimension")
    return shape


def _count(value, what, op):
    """A non-negative Python int argument (eye's sizes, linspace's num)."""
    if isinstance(value, Tensor) and value.ndim == 0 and value._data.dtype.kind in "iu":
        value = int(value)
    if not _is_int(value):
        raise TypeError(f"{op}: {what} must be an int, got {value!r}")
    if value < 0:
        raise InvalidArgumentError(f"{op}: {what} must be >= 0, got {value}")
    return int(value)


def _make(fill, shape, dtype, op, default=np.float32):
    dev = _backend.current()
    dt = np_dtype(dtype) or np.dtype(default)
    return Tensor(dev.xp.full(_shape(shape, op), fill, dtype=dt), dev)


def zeros(shape, dtype=None, name=None):
    """A tensor of zeros (float32 unless `dtype`).

    >>> tg.zeros((2, 3)).shape
    (2, 3)
    """
    return _make(0, shape, dtype, "zeros")


def ones(shape, dtype=None, name=None):
    """A tensor of ones (float32 unless `dtype`).

    >>> tg.ones(2).numpy()
    array([1., 1.], dtype=float32)
    """
    return _make(1, shape, dtype, "ones")


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
    return Tensor(v._dev.xp.full(_shape(dims, "fill"), v._data, dtype=v._data.dtype), v._dev)


def eye(num_rows, num_columns=None, batch_shape=None, dtype=None, name=None):
    """An identity matrix (optionally batched).

    >>> tg.eye(2).numpy()
    array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    dev = _backend.current()
    rows = _count(num_rows, "num_rows", "eye")
    cols = rows if num_columns is None else _count(num_columns, "num_columns", "eye")
    m = dev.xp.eye(rows, cols, dtype=np_dtype(dtype) or np.float32)
    if batch_shape is not None:
        m = dev.xp.broadcast_to(m, _shape(batch_shape, "eye") + m.shape).copy()
    return Tensor(m, dev)


def linspace(start, stop, num, name=None, axis=0):
    """`num` evenly spaced values from start to stop inclusive (float32 for Python floats).

    >>> tg.linspace(0.0, 1.0, 3).numpy()
    array([0. , 0.5, 1. ], dtype=float32)
    """
    a = convert_to_tensor(start)
    dt = a._data.dtype if a._data.dtype.kind == "f" else np.dtype(np.float32)
    return Tensor(a._dev.xp.linspace(a._data, convert_to_tensor(stop)._data,
                                     _count(num, "num", "linspace"),
                                     dtype=dt, axis=axis), a._dev)


def range(start, limit=None, delta=1, dtype=None, name=None):  # noqa: A001
    """Like Python's range, as a tensor (int32 for ints, float32 for floats).

    >>> tg.range(3).numpy()
    array([0, 1, 2], dtype=int32)
    """
    if limit is None:
        start, limit = 0, start
    vals = [v.item() if isinstance(v, Tensor) and v.ndim == 0 else v
            for v in (start, limit, delta)]
    start, limit, delta = vals
    for v in vals:
        if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool):
            raise TypeError(f"range: start, limit and delta must be ints or floats, got "
                            f"{v!r}")
    if delta == 0:
        raise InvalidArgumentError("range: Requires delta != 0")
    dev = _backend.current()
    if dtype is None:
        dtype = np.float32 if any(isinstance(v, float) for v in vals) else np.int32
    return Tensor(dev.xp.arange(start, limit, delta, dtype=np_dtype(dtype)), dev)


__all__ = public(globals(), ("",), special=((("", "linalg"), (eye,)),))
