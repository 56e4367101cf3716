"""`tg.experimental.numpy`: numpy's names for tapegpu's ops, as `tf.experimental.numpy`.

No new ops: `TABLE` maps each numpy name to the tapegpu function that computes it where the
two take the same arguments; the functions below adapt the ones whose numpy signatures differ
(reductions over `axis=None` meaning all axes, flattening defaults, numpy's keyword names).
Everything stays differentiable. As numpy (and tf.experimental.numpy) do, the functions
defined here read lists and Python numbers with numpy's dtypes (float64, int64) and create
float64 by default; the functions of `TABLE` that are tapegpu's own convert them as
`tg.convert_to_tensor` does (float32, int32).
"""
import numpy as np

from ..core import dtypes as _dtypes
from ..core.tensor import Tensor, Variable, convert_to_tensor
from . import binary as _b, creation as _c, linalg as _la, reduce as _r
from . import unary as _u
from ._base import InvalidArgumentError, tensor
from .shape import (  # (tapegpu.ops.shape, the module, is shadowed by the function)
    argsort as _argsort, broadcast_to as _broadcast_to, concat as _concat,
    expand_dims as _expand_dims, gather as _gather, repeat as _repeat, reshape as _reshape,
    sort as _sort, squeeze as _squeeze, stack as _stack, tile as _tile, transpose as _transpose)


def _t(a):
    """`a` as a tensor, lists and Python numbers with numpy's dtypes."""
    if isinstance(a, Tensor):
        return a
    return tensor(a) if hasattr(a, "_value") else convert_to_tensor(np.asarray(a))


def _cast(a, dtype):
    a = _t(a)
    return a if dtype is None else _u.cast(a, dtype)


def _reduction(fn):
    def reduce(a, axis=None, dtype=None, out=None, keepdims=False, ddof=0, **where):
        # numpy's own np.sum(t), np.std(t, ddof=1), ... call these as methods with out=, ddof=
        if out is not None or where:
            raise InvalidArgumentError(f"experimental.numpy.{fn.__name__}: tensors are "
                                       f"immutable: out= (and {sorted(where)}) are not supported")
        a = _cast(a, dtype)
        result = fn(a, axis=axis, keepdims=bool(keepdims))
        if ddof:  # the variance over n - ddof
            n = a.size // max(result.size, 1)
            scale = n / (n - ddof)
            result = result * (scale ** 0.5 if fn is _r.reduce_std else scale)
        return result
    reduce.__name__ = reduce.__qualname__ = fn.__name__
    reduce.__doc__ = f"numpy's name for `tg.{fn.__name__}` (axis=None: all axes)."
    return reduce


def _flat_axis(a, axis):
    """(a, axis) with axis None meaning the flattened array, as numpy's."""
    a = _t(a)
    return (_reshape(a, (-1,)), 0) if axis is None else (a, axis)


def array(object, dtype=None, copy=True, ndmin=0):  # noqa: A002
    """A tensor of `object` (tensors are immutable: a copy is never needed)."""
    t = _t(object) if dtype is None else convert_to_tensor(np.asarray(object), dtype=dtype)
    while t.ndim < ndmin:
        t = _expand_dims(t, 0)
    return t


def asarray(a, dtype=None):
    """`a` as a tensor (the same tensor if it is one of `dtype` already)."""
    return _t(a) if dtype is None else convert_to_tensor(np.asarray(a), dtype=dtype)


def zeros(shape, dtype=np.float64):
    """Zeros of `shape` (float64 unless `dtype`, as numpy)."""
    return _c.zeros(shape, dtype=dtype)


def ones(shape, dtype=np.float64):
    """Ones of `shape` (float64 unless `dtype`, as numpy)."""
    return _c.ones(shape, dtype=dtype)


def full(shape, fill_value, dtype=None):
    """`shape` filled with `fill_value`."""
    return _c.fill(shape, _t(fill_value) if dtype is None else
                   convert_to_tensor(np.asarray(fill_value), dtype=dtype))


def eye(N, M=None, k=0, dtype=np.float64):  # noqa: N803 (numpy's names)
    """The identity (ones on diagonal `k`)."""
    if k:
        raise InvalidArgumentError("experimental.numpy.eye: only k=0 is supported")
    return _c.eye(N, M, dtype=dtype)


def arange(start, stop=None, step=1, dtype=None):
    """start, start + step, ... below stop (numpy's arange: int64 for ints, else float64)."""
    if dtype is None:
        dtype = np.arange(0, 1, 1, dtype=np.result_type(start, stop or 0, step)).dtype
    return _c.range(start, stop, step, dtype=dtype)


def linspace(start, stop, num=50, endpoint=True, dtype=np.float64):
    """`num` evenly spaced numbers from start to stop (without stop if not `endpoint`)."""
    if not endpoint:
        stop = start + (stop - start) * (num - 1) / num if num else stop
    out = _c.linspace(np.float64(start), np.float64(stop), num)
    return _u.cast(out, dtype)


def argmax(a, axis=None):
    """The index of the largest element (of the flattened array when axis is None)."""
    a, axis = _flat_axis(a, axis)
    return _r.argmax(a, axis=axis)


def argmin(a, axis=None):
    """The index of the smallest element (of the flattened array when axis is None)."""
    a, axis = _flat_axis(a, axis)
    return _r.argmin(a, axis=axis)


def cumsum(a, axis=None, dtype=None):
    """The cumulative sum (of the flattened array when axis is None)."""
    a, axis = _flat_axis(_cast(a, dtype), axis)
    return _r.cumsum(a, axis=axis)


def cumprod(a, axis=None, dtype=None):
    """The cumulative product (of the flattened array when axis is None)."""
    a, axis = _flat_axis(_cast(a, dtype), axis)
    return _r.cumprod(a, axis=axis)


def sort(a, axis=-1):
    """`a` sorted along `axis` (the flattened array when axis is None)."""
    a, axis = _flat_axis(a, axis)
    return _sort(a, axis=axis)


def argsort(a, axis=-1):
    """The int64 indices that sort `a` along `axis` (stable)."""
    a, axis = _flat_axis(a, axis)
    return _u.cast(_argsort(a, axis=axis), np.int64)


def take(a, indices, axis=None):
    """The elements at `indices` along `axis` (of the flattened array when axis is None)."""
    a, axis = _flat_axis(a, axis)
    return _gather(a, indices, axis=axis)


def reshape(a, newshape):
    """`a` with shape `newshape` (-1: inferred)."""
    return _reshape(a, newshape)


def transpose(a, axes=None):
    """`a` with its axes permuted (reversed when `axes` is None)."""
    return _transpose(a, axes)


def concatenate(arys, axis=0):
    """The arrays joined along `axis`."""
    return _concat(list(arys), axis)


def clip(a, a_min, a_max):
    """`a` limited to [a_min, a_max]."""
    return _b.clip_by_value(a, a_min, a_max)


def dot(a, b):
    """numpy's dot: the product over a's last and b's first axis (or second to last)."""
    a, b = _t(a), _t(b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return _la.tensordot(a, b, [[a.ndim - 1], [max(b.ndim - 2, 0)]])


def outer(a, b):
    """The outer product of the flattened arrays."""
    return _reshape(a, (-1, 1)) * _reshape(b, (1, -1))


def round(a, decimals=0):  # noqa: A001
    """`a` rounded half to even (to `decimals` places)."""
    if decimals == 0:
        return _u.round(a)
    scale = 10.0 ** decimals
    return _u.round(_t(a) * scale) / scale


def ndim(a):
    """The number of axes."""
    return _t(a).ndim


def shape(a):
    """The shape, as a tuple."""
    return tuple(_t(a).shape)


def size(a, axis=None):
    """The number of elements (along `axis` if given)."""
    t = _t(a)
    return t.size if axis is None else t.shape[axis]


# tapegpu's elementwise functions whose names are numpy ufuncs compute those ufuncs (abs, exp,
# sin, add, maximum, less, logical_and, ...): derived, not listed
TABLE = {name: getattr(family, name) for family in (_u, _b) for name in family.__all__
         if isinstance(getattr(np, name, None), np.ufunc)}
TABLE.update({
    # numpy's other spellings
    "absolute": _u.abs, "arctan": _u.atan, "isnan": _u.is_nan, "isinf": _u.is_inf,
    "isfinite": _u.is_finite, "true_divide": _b.divide, "floor_divide": _b.floordiv,
    "remainder": _b.floormod, "power": _b.pow, "arctan2": _b.atan2, "where": _b.where,
    "matmul": _la.matmul, "einsum": _la.einsum, "tensordot": _la.tensordot,
    # shapes
    "expand_dims": _expand_dims, "squeeze": _squeeze, "stack": _stack, "tile": _tile,
    "broadcast_to": _broadcast_to, "repeat": _repeat, "zeros_like": _c.zeros_like,
    "ones_like": _c.ones_like,
    # reductions (axis=None: all axes, as numpy)
    "sum": _reduction(_r.reduce_sum), "mean": _reduction(_r.reduce_mean),
    "prod": _reduction(_r.reduce_prod), "max": _reduction(_r.reduce_max),
    "amax": _reduction(_r.reduce_max), "min": _reduction(_r.reduce_min),
    "amin": _reduction(_r.reduce_min), "std": _reduction(_r.reduce_std),
    "var": _reduction(_r.reduce_variance), "all": _reduction(_r.reduce_all),
    "any": _reduction(_r.reduce_any),
})
TABLE.update({fn.__name__: fn for fn in (
    array, asarray, zeros, ones, full, eye, arange, linspace, argmax, argmin, cumsum, cumprod,
    sort, argsort, take, reshape, transpose, concatenate, clip, dot, outer, round, ndim, shape,
    size)})
TABLE.update({name: getattr(_dtypes, name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "float16",
    "float32", "float64", "complex64", "complex128")})
TABLE["bool_"] = _dtypes.bool
TABLE["ndarray"] = Tensor
TABLE["pi"], TABLE["e"], TABLE["inf"], TABLE["nan"] = np.pi, np.e, np.inf, np.nan


# -- numpy's methods on tensors -------------------------------------------------------------------

def _reshape_method(self, *shape):
    return _reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int)
                    else shape)


def _transpose_method(self, *axes):
    return _transpose(self, (axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else
                             axes) or None)


def _numpy_methods():
    """The methods `experimental_enable_numpy_behavior` gives tensors (TensorFlow's list, less
    the ones tensors have anyway): numpy's method names, as ndarray's."""
    methods = {name: TABLE[name] for name in (
        "sum", "mean", "prod", "max", "min", "std", "var", "all", "any", "argmax", "argmin",
        "cumsum", "cumprod", "clip", "round", "sort", "argsort", "take", "dot", "squeeze")}
    methods.update({"reshape": _reshape_method, "transpose": _transpose_method,
                    "astype": lambda self, dtype: _u.cast(self, dtype),
                    "ravel": lambda self: _reshape(self, (-1,)),
                    "tolist": lambda self: self.numpy().tolist()})
    return methods


def experimental_enable_numpy_behavior(prefer_float32=False, dtype_conversion_mode="legacy"):
    """Gives tensors numpy's methods (`x.reshape(2, 3)`, `x.sum(axis=0)`, `x.astype(...)`,
    `x.ravel()`, `x.tolist()`, ...), as `tf.experimental.numpy.experimental_enable_numpy_behavior`
    does (for all tensors and variables, from the call on). tapegpu's dtype rules are unchanged
    (`prefer_float32` and `dtype_conversion_mode` are accepted for compatibility)."""
    for name, fn in _numpy_methods().items():
        setattr(Tensor, name, fn)
        setattr(Variable, name, _on_value(fn))


def _on_value(fn):
    def method(self, *args, **kwargs):
        return fn(self._read(), *args, **kwargs)
    return method


TABLE["experimental_enable_numpy_behavior"] = experimental_enable_numpy_behavior
