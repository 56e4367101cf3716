"""Tensor creation on the current device."""
import numpy as np

from .. import backends as _backend
from ..core.dtypes import np_dtype
from .registry import InvalidArgumentError, def_op
from ._base import apply, public
from ..core.tensor import Tensor, convert_to_tensor
from .shape import broadcast_to
from .unary import cast


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
    d = x._data
    dt = d.dtype if dtype is None else np_dtype(dtype)
    xp = x._dev.xp
    if xp is np:  # (numpy's ones is empty + copyto in Python: the seed of a gradient, on
        a = np.empty(d.shape, dt)  # every call)
        a.fill(1)
        return Tensor(a, x._dev)
    return Tensor(xp.ones(d.shape, dtype=dt), x._dev)


def fill(dims, value, name=None):
    """A tensor of shape `dims` filled with the scalar `value` (its dtype inferred as for
    tg.constant). The value is broadcast, so its gradient is the sum of the output's (as TF).

    >>> tg.fill((2,), 7).numpy()
    array([7, 7], dtype=int32)
    """
    v = convert_to_tensor(value)
    if v.ndim:
        raise InvalidArgumentError(f"fill: value must be a scalar (0-d), got shape {v.shape}")
    return broadcast_to(v, _shape(dims, "fill"))


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


# -- linspace: out_i = start + i (stop - start) / (num - 1), the last one stop itself ------------

def _linspace_forward(xp, start, stop, num, axis):
    return xp.linspace(start, stop, num, axis=axis, dtype=start.dtype)


def _linspace_weights(ops, like, num, axis):
    """w_i = i / (num - 1) along `axis` (out_i = (1 - w_i) start + w_i stop)."""
    w = np.arange(num) / max(num - 1, 1)
    return ops.const_like(like, w.reshape((num,) + (1,) * (-axis - 1)))


def _linspace_vjp(ops, g, start_shape, stop_shape, num, axis):
    w = _linspace_weights(ops, g, num, axis)
    return (ops.reduce_sum(g * (ops.const_like(g, 1.0) - w), axis=axis),
            ops.reduce_sum(g * w, axis=axis))


def _linspace_jvp(ops, ts, start_shape, stop_shape, num, axis):
    # linear in (start, stop): the op on the tangents, each given size-1 axes after its batch
    # axes up to the larger rank (so they broadcast as the primals did) and a zero tangent
    # given as zeros
    shapes = (start_shape, stop_shape)
    k = 0 if ts[0] is not None else 1
    batch = ts[k].shape[:ts[k].ndim - len(shapes[k])]
    rank = len(batch) + max(len(start_shape), len(stop_shape))
    ts = [ops.const_like(ts[k], np.zeros(batch + tuple(s))) if t is None else t
          for t, s in zip(ts, shapes)]
    a, b = (ops.reshape(t, batch + (1,) * (rank - t.ndim) + t.shape[len(batch):]) for t in ts)
    return ops.op("linspace", a, b, num=num, axis=axis)


_linspace = def_op("linspace", _linspace_forward, args=("start", "stop"),
                   saves=("start.shape", "stop.shape"), vjp=_linspace_vjp, jvp=_linspace_jvp,
                   batch="leading_broadcast")


def linspace(start, stop, num, name=None, axis=0):
    """`num` evenly spaced values from start to stop inclusive (float32 for Python floats),
    along a new axis `axis`; differentiable in start and stop.

    >>> tg.linspace(0.0, 1.0, 3).numpy()
    array([0. , 0.5, 1. ], dtype=float32)
    """
    a = convert_to_tensor(start)
    dt = a._data.dtype if a._data.dtype.kind == "f" else np.dtype(np.float32)
    a = cast(a, dt)
    b = cast(convert_to_tensor(stop), dt)
    nd = max(a.ndim, b.ndim) + 1
    if not -nd <= axis < nd:
        raise InvalidArgumentError(f"linspace: axis {axis} is out of range for a result of "
                                   f"rank {nd}; valid axes are [{-nd}, {nd})")
    return apply(_linspace, (a, b), {"num": _count(num, "num", "linspace"),
                                     "axis": axis - nd if axis >= 0 else axis})


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
