"""Helpers the op families share: input conversion and axis normalisation."""
from .registry import InvalidArgumentError, apply, apply1, apply2  # noqa: F401 (re-exported)
from ..core.tensor import Tensor, as_tensor_pair, convert_to_tensor, scalar_like

EMPTY = {}  # shared params of ops without params; never mutated


def tensor(x):
    return x if type(x) is Tensor else convert_to_tensor(x)


def floating(x, op):
    """`x` as a tensor, which must be floating (math functions are not defined on integers)."""
    x = x if type(x) is Tensor else convert_to_tensor(x)
    if x._data.dtype.kind not in "fc":
        raise InvalidArgumentError(f"{op}: expected a floating tensor, got {x.dtype.name} of "
                                   f"shape {x.shape}; use tg.cast(x, tg.float32) first")
    return x


def call2(op, x, y, params=EMPTY):
    """A binary op on tensors or Python scalars (which adopt the other operand's dtype)."""
    if type(x) is Tensor:
        ty = type(y)
        if ty is Tensor:
            return apply2(op, x, y, params)
        if ty is float or ty is int:
            return apply2(op, x, scalar_like(y, x), params)
    x, y = as_tensor_pair(x, y)
    return apply2(op, x, y, params)


def norm_axes(axis, ndim, op):
    """`axis` (None, int or sequence) as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, Tensor):
        axis = axis.numpy().tolist()
    axes = (axis,) if isinstance(axis, int) else tuple(int(a) for a in axis)
    out = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise InvalidArgumentError(f"{op}: axis {a} is out of range for a tensor of rank "
                                       f"{ndim}; valid axes are [{-ndim}, {ndim})")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise InvalidArgumentError(f"{op}: repeated axis in {axis}")
    return tuple(sorted(out))


def norm_axis(axis, ndim, op):
    """One axis as a negative index (counted from the right, as batch-aware rules need)."""
    if isinstance(axis, Tensor):
        axis = int(axis)
    if not -ndim <= axis < ndim:
        raise InvalidArgumentError(f"{op}: axis {axis} is out of range for a tensor of rank "
                                   f"{ndim}; valid axes are [{-ndim}, {ndim})")
    return axis - ndim if axis >= 0 else axis
