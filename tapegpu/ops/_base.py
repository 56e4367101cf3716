"""Helpers the op families share: input conversion, axis normalisation, scatter-adds."""
import numpy as np

from ..core import determinism
from .registry import InvalidArgumentError, apply, apply1, apply2  # noqa: F401 (re-exported)
from ..core.tensor import Tensor, as_tensor_pair, convert_to_tensor, scalar_like

EMPTY = {}  # shared params of ops without params; never mutated


def tensor(x):
    return x if type(x) is Tensor else convert_to_tensor(x)


def floating(x, op):
    """`x` as a tensor, which must be floating (math functions are not defined on integers)."""
    x = x if type(x) is Tensor else convert_to_tensor(x)
    if x._data.dtype.kind not in "fcV":
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
    x, y = as_tensor_pair(x, y, op.name)
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


def public(module_globals, default, special=()):
    """Names the public functions of a family module (its `__all__`) and where tapegpu's
    public API lists each one (`fn.api`: namespaces such as "math" or "nn", "" for the top
    level): `default` for every function defined in the module, `special` a sequence of
    `(namespaces, functions)` for the others (`()` keeps a function internal)."""
    module = module_globals["__name__"]
    for namespaces, fns in special:
        for fn in fns:
            fn.api = tuple(namespaces)
    names = []
    for name, fn in module_globals.items():
        if name.startswith("_") or not callable(fn) or isinstance(fn, type) or \
                getattr(fn, "__module__", None) != module:
            continue
        if not hasattr(fn, "api"):
            fn.api = tuple(default)
        if fn.api:
            names.append(name)
    return names


def add_at(xp, out, key, values):
    """`xp.add.at(out, key, values)`: `values` added into `out[key]`, repeated indices adding
    up. CuPy adds them with atomics, in an order that changes from run to run; with op
    determinism on (core/determinism.py) they add in numpy's order instead, so a GPU gives
    numpy's bits at every run."""
    if xp is np or not determinism.enabled():
        xp.add.at(out, key, values)
    else:
        ordered_add_at(xp, out, key, values)


def extreme_at(xp, name, out, key, values):
    """`xp.maximum.at(out, key, values)` (`name` "maximum") or `minimum.at`: each target of
    `out[key]` combined with all its values. numpy's own on the host. Not CuPy's: its
    `maximum.at` / `minimum.at` (atomicMax / atomicMin, cupy/_core/include/cupy/atomics.cuh)
    compare float64 with fmaxf / fminf, so they round the result to float32 and skip NaN, and
    have no loop for 8- and 16-bit integers, bool or float16. On a device the values are
    combined with the elementwise `maximum` / `minimum` instead: sorted by target, folded
    pairwise within each target's run in log2(n) passes, then one write per target. No
    sync; NaN propagates, as numpy's. `out` is contiguous (the ops make it)."""
    if xp is np:
        getattr(np, name).at(out, key, values)
        return
    fn = getattr(xp, name)
    targets = xp.arange(out.size).reshape(out.shape)[key]
    t = targets.reshape(-1)
    if t.size == 0:
        return
    v = xp.broadcast_to(xp.asarray(values, dtype=out.dtype), targets.shape).reshape(-1)
    order = xp.argsort(t, kind="stable")
    t, v = t[order], v[order]
    step = 1
    while step < t.size:  # v[i]: the extreme of v[i : i + 2 * step] within i's target
        same = t[step:] == t[:-step]
        v[:-step] = xp.where(same, fn(v[:-step], v[step:]), v[:-step])
        step *= 2
    first = xp.ones(t.shape, dtype=bool)
    first[1:] = t[1:] != t[:-1]
    flat = out.reshape(-1)
    flat[t[first]] = fn(flat[t[first]], v[first])


def ordered_add_at(xp, out, key, values):
    """`add.at` in numpy's order with plain scatters: the targets sorted stably, each pass adds
    the k-th value of every target (no index repeats within a pass), as many passes as the
    most repeated target has values. `out` is contiguous (the ops make it)."""
    targets = xp.arange(out.size).reshape(out.shape)[key]
    t = targets.reshape(-1)
    if t.size == 0:
        return
    v = xp.broadcast_to(xp.asarray(values), targets.shape).reshape(-1)
    order = xp.argsort(t, kind="stable")
    t, v = t[order], v[order]
    first = xp.ones(t.shape, dtype=bool)
    first[1:] = t[1:] != t[:-1]
    rank = xp.arange(t.size) - xp.flatnonzero(first)[xp.cumsum(first) - 1]
    flat = out.reshape(-1)
    for k in range(int(rank.max()) + 1):
        sel = rank == k
        flat[t[sel]] += v[sel]

