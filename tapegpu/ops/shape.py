"""Shape ops: reshape, transpose, concatenation, slicing, gathering, tiling, padding.

All are linear; their VJPs move `g` back into the input's layout with leading batch axes kept
(the number of batch axes of `g` is `g.ndim - out.ndim`). Their JVPs are the op itself applied
to the tangent, with its axis parameters shifted past the tangent's batch axes.
"""
import builtins
import math
from collections import namedtuple

import numpy as np

from ..backends import checks
from .registry import InvalidArgumentError, def_op, passthrough
from ..core.dtypes import np_dtype
from ..core.tensor import Tensor, Variable, convert_to_tensor, register_tensor_conversion_function
from ._base import add_at, apply, norm_axes, norm_axis, public, tensor
from . import binary as _b, unary as _u
from .binary import equal, where

_py_slice = builtins.slice  # (the module defines tf.slice)


def _nb(g, out_ndim):
    return g.ndim - out_ndim


# -- batching rules (tg.vectorized_map; ops/batching.py): a shape-like param gains the batch axis

def _batched_param(op, vals, params, key, value):
    return apply(op, vals, dict(params, **{key: value}))


def _batch_reshape(op, vals, flags, params, size):
    return _batched_param(op, vals, params, "shape", (size,) + tuple(params["shape"]))


def _batch_transpose(op, vals, flags, params, size):
    return _batched_param(op, vals, params, "perm", (0,) + tuple(p + 1 for p in params["perm"]))


def _batch_broadcast_to(op, vals, flags, params, size):
    shape = tuple(params["shape"])
    x = vals[0]  # the batched input, its per-example axes left-padded with 1s to the target's
    s = x._data.shape
    if len(s) < len(shape) + 1:
        x = apply(_reshape, (x,), {"shape": s[:1] + (1,) * (len(shape) + 1 - len(s)) + s[1:]})
    return _batched_param(op, [x], params, "shape", (size,) + shape)


def _batch_tile(op, vals, flags, params, size):
    return _batched_param(op, vals, params, "multiples", (1,) + tuple(params["multiples"]))


def _batch_pad(op, vals, flags, params, size):
    return _batched_param(op, vals, params, "paddings", ((0, 0),) + tuple(params["paddings"]))


# -- reshape / transpose / broadcast ---------------------------------------------------------

_reshape = def_op("reshape", lambda xp, x, shape: xp.reshape(x, shape), saves=("x.shape",),
                  linear=True, view=True, c="x",
                  vjp=lambda ops, g, x_shape, shape:
                  ops.reshape(g, g.shape[:_nb(g, len(shape))] + x_shape),
                  jvp=lambda ops, t, x_shape, shape:
                  ops.reshape(t, t.shape[:_nb(t, len(x_shape))] + shape), batch=_batch_reshape)


def reshape(tensor_, shape, name=None):
    """The same elements in a new shape (one -1 is inferred).

    >>> tg.reshape(tg.range(6), (2, -1)).shape
    (2, 3)
    """
    x = tensor(tensor_)
    if isinstance(shape, Tensor):
        shape = shape.numpy().tolist()
    shape = tuple(int(s) for s in shape)
    if shape == x._data.shape:
        return x
    known = math.prod([s for s in shape if s != -1])
    if shape.count(-1) > 1 or (-1 in shape and (known == 0 or x.size % known)) or \
            (-1 not in shape and known != x.size):
        raise InvalidArgumentError(f"reshape: cannot reshape a tensor of shape {x.shape} "
                                   f"({x.size} elements) into shape {shape}")
    if -1 in shape:
        shape = tuple(x.size // known if s == -1 else s for s in shape)
    return apply(_reshape, (x,), {"shape": shape})


reshape.op = _reshape  # its entry, for passes keyed on entries (function/)
# rules on arrays (ops/namespace.py): numpy's reshape, without a copy where the shape is the same
reshape.on_arrays = lambda dev, x, shape: x if x.shape == tuple(shape) else \
    x.reshape(tuple(shape))


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _transpose_vjp(ops, g, perm):
    nb = _nb(g, len(perm))
    return ops.transpose(g, tuple(range(nb)) + tuple(nb + p for p in _inverse(perm)))


def _transpose_jvp(ops, t, perm):
    nb = _nb(t, len(perm))
    return ops.transpose(t, tuple(range(nb)) + tuple(nb + p for p in perm))


_transpose = def_op("transpose", lambda xp, x, perm: xp.transpose(x, perm), linear=True,
                    view=True, vjp=_transpose_vjp, jvp=_transpose_jvp, batch=_batch_transpose)


def transpose(a, perm=None, conjugate=False, name=None):
    """Permutes axes (reverses them when `perm` is None).

    >>> tg.transpose(tg.zeros((2, 3))).shape
    (3, 2)
    """
    x = tensor(a)
    nd = x.ndim
    perm = tuple(range(nd - 1, -1, -1)) if perm is None else \
        tuple(int(p) % nd if nd else 0 for p in (perm.numpy().tolist()
                                                 if isinstance(perm, Tensor) else perm))
    if sorted(perm) != list(range(nd)):
        raise InvalidArgumentError(f"transpose: perm {perm} is not a permutation of the "
                                   f"{nd} axes of a tensor of shape {x.shape}")
    return apply(_transpose, (x,), {"perm": perm})


transpose.op = _transpose  # its entry, for passes keyed on entries (function/)
transpose.on_arrays = lambda dev, x, perm: dev.xp.transpose(x, perm)


def matrix_transpose(a, name=None):
    """Swaps the last two axes.

    >>> tg.linalg.matrix_transpose(tg.zeros((4, 2, 3))).shape
    (4, 3, 2)
    """
    x = tensor(a)
    if x.ndim < 2:
        raise InvalidArgumentError(f"matrix_transpose: needs rank >= 2, got shape {x.shape}")
    return transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def _broadcast_jvp(ops, t, x_shape, shape):
    # the tangent's batch axes stay in front: size-1 axes go in after them
    nb = _nb(t, len(x_shape))
    lifted = ops.reshape(t, t.shape[:nb] + (1,) * (len(shape) - len(x_shape)) + tuple(x_shape))
    return ops.broadcast_to(lifted, t.shape[:nb] + tuple(shape))


# broadcast_to's VJP is g itself: the sweep sums it back to the input's shape (the input's
# shape is saved for the JVP, which needs its rank)
_broadcast = def_op("broadcast_to", lambda xp, x, shape: xp.broadcast_to(x, shape),
                    saves=("x.shape",), vjp=passthrough, jvp=_broadcast_jvp, linear=True,
                    view=True, c="x", batch=_batch_broadcast_to, broadcast_only=True)


def broadcast_to(input, shape, name=None):  # noqa: A002
    """Broadcasts to `shape` (numpy rules).

    >>> tg.broadcast_to(tg.constant([1.0, 2.0]), (3, 2)).shape
    (3, 2)
    """
    x = tensor(input)
    shape = tuple(int(s) for s in (shape.numpy().tolist() if isinstance(shape, Tensor)
                                   else shape))
    if x.shape == shape:
        return x
    return apply(_broadcast, (x,), {"shape": shape})


broadcast_to.op = _broadcast  # its entry, for passes keyed on entries (function/)
broadcast_to.on_arrays = lambda dev, x, shape: dev.xp.broadcast_to(x, tuple(shape))


def expand_dims(input, axis, name=None):  # noqa: A002
    """Inserts a size-1 axis at `axis`.

    >>> tg.expand_dims(tg.zeros((2, 3)), -1).shape
    (2, 3, 1)
    """
    x = tensor(input)
    nd = x.ndim + 1
    a = int(axis)
    if not -nd <= a < nd:
        raise InvalidArgumentError(f"expand_dims: axis {a} out of range for a tensor of rank "
                                   f"{x.ndim}; valid are [{-nd}, {nd})")
    a %= nd
    return reshape(x, x.shape[:a] + (1,) + x.shape[a:])


def squeeze(input, axis=None, name=None):  # noqa: A002
    """Removes size-1 axes (all of them, or those in `axis`).

    >>> tg.squeeze(tg.zeros((1, 2, 1))).shape
    (2,)
    """
    x = tensor(input)
    if axis is None:
        axes = tuple(i for i, s in enumerate(x.shape) if s == 1)
    else:
        axes = norm_axes(axis, x.ndim, "squeeze")
        bad = [a for a in axes if x.shape[a] != 1]
        if bad:
            raise InvalidArgumentError(f"squeeze: axis {bad[0]} of shape {x.shape} has size "
                                       f"{x.shape[bad[0]]}, not 1")
    return reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))


# -- concat / stack / split ---------------------------------------------------------------

def _concat_vjp(ops, g, axis, sizes):
    out, start = [], 0
    lead = (_py_slice(None),) * (g.ndim + axis)
    for n in sizes:
        out.append(g[lead + (_py_slice(start, start + n),)])
        start += n
    return tuple(out)


def _concat_jvp(ops, ts, axis, sizes):
    # concat of the tangents; a zero tangent becomes zeros of its input's (batched) shape
    like = next(t for t in ts if t is not None)
    parts = []
    for t, n in zip(ts, sizes):
        if t is None:
            shape = list(like.shape)
            shape[axis] = n
            t = Tensor(like._dev.xp.zeros(tuple(shape), dtype=like._data.dtype), like._dev)
        parts.append(t)
    return ops.concat(parts, axis=axis)


_concat = def_op("concat", lambda xp, *xs, axis, sizes: xp.concatenate(xs, axis=axis),
                 vjp=_concat_vjp, jvp=_concat_jvp, linear=True, variadic=True, args=("*",),
                 batch="leading", flops=0)


def concat(values, axis, name=None):
    """Joins tensors along an existing axis.

    >>> tg.concat([tg.zeros((2, 1)), tg.ones((2, 3))], axis=1).shape
    (2, 4)
    """
    xs = [tensor(v) for v in values]
    if not xs:
        raise InvalidArgumentError("concat: needs at least one tensor")
    nd = xs[0].ndim
    if nd == 0:
        raise InvalidArgumentError("concat: cannot concatenate scalars; use tg.stack")
    ax = norm_axis(axis, nd, "concat")
    for t in xs:
        if t.ndim != nd or t.shape[:nd + ax] + t.shape[nd + ax + 1:] != \
                xs[0].shape[:nd + ax] + xs[0].shape[nd + ax + 1:]:
            raise InvalidArgumentError(
                f"concat: shapes {[x.shape for x in xs]} differ outside axis {axis}")
    if len(xs) == 1:
        return xs[0]
    return apply(_concat, tuple(xs), {"axis": ax, "sizes": tuple(t.shape[ax] for t in xs)})


def stack(values, axis=0, name=None):
    """Joins tensors along a new axis.

    >>> tg.stack([tg.zeros(3), tg.ones(3)]).shape
    (2, 3)
    """
    xs = [tensor(v) for v in values]
    if not xs:
        raise InvalidArgumentError("stack: needs at least one tensor")
    shape = xs[0].shape
    for t in xs:
        if t.shape != shape:
            raise InvalidArgumentError(f"stack: all shapes must match, got "
                                       f"{[x.shape for x in xs]}")
    a = int(axis) % (len(shape) + 1)
    expanded = [reshape(t, shape[:a] + (1,) + shape[a:]) for t in xs]
    return concat(expanded, axis=a) if len(expanded) > 1 else expanded[0]


def _autopack(value, dtype=None, name=None, as_ref=False):
    """A (nested) list or tuple holding tensors converts to the stack of its elements,
    differentiably (TensorFlow's autopacking; registered below)."""
    if not _holds_tensor(value):
        return NotImplemented
    return stack([convert_to_tensor(v, dtype) for v in value])


def _holds_tensor(value):
    return any(isinstance(v, (Tensor, Variable)) or
               isinstance(v, (list, tuple)) and _holds_tensor(v) for v in value)


register_tensor_conversion_function((list, tuple), _autopack, priority=99)


def unstack(value, num=None, axis=0, name=None):
    """Splits along `axis` into a list of tensors with that axis removed.

    >>> [t.shape for t in tg.unstack(tg.zeros((2, 3)), axis=1)]
    [(2,), (2,), (2,)]
    """
    x = tensor(value)
    a = norm_axes(axis, x.ndim, "unstack")[0]
    pre = (_py_slice(None),) * a
    return [getitem(x, pre + (i,)) for i in range(x.shape[a])]


def unstack_last(x, n):
    return [getitem(x, (Ellipsis, i)) for i in range(n)]


def split(value, num_or_size_splits, axis=0, num=None, name=None):
    """Splits along `axis` into `num_or_size_splits` equal parts, or parts of the given sizes.

    >>> [t.shape for t in tg.split(tg.zeros((4, 6)), [1, 5], axis=1)]
    [(4, 1), (4, 5)]
    """
    x = tensor(value)
    a = norm_axes(axis, x.ndim, "split")[0]
    n = x.shape[a]
    if isinstance(num_or_size_splits, int):
        k = num_or_size_splits
        if k <= 0 or n % k:
            raise InvalidArgumentError(f"split: axis {a} of size {n} does not split into {k} "
                                       "equal parts")
        sizes = [n // k] * k
    else:
        sizes = [int(s) for s in num_or_size_splits]
        if sizes.count(-1) == 1:
            sizes[sizes.index(-1)] = n - sum(s for s in sizes if s != -1)
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise InvalidArgumentError(f"split: sizes {list(num_or_size_splits)} do not add up "
                                       f"to axis {a} of size {n}")
    out, start = [], 0
    pre = (_py_slice(None),) * a
    for s in sizes:
        out.append(getitem(x, pre + (_py_slice(start, start + s),)))
        start += s
    return out


# -- tile / pad --------------------------------------------------------------------------------

def _tile_vjp(ops, g, x_shape, multiples):
    # g viewed as batch + (m0, d0, m1, d1, ...): sum over the m axes
    nb = g.ndim - len(x_shape)
    inter = g.shape[:nb] + tuple(v for m, d in zip(multiples, x_shape) for v in (m, d))
    return ops.reduce_sum(ops.reshape(g, inter),
                          axis=tuple(nb + 2 * i for i in range(len(x_shape))))


_tile = def_op("tile", lambda xp, x, multiples: xp.tile(x, multiples), saves=("x.shape",),
               vjp=_tile_vjp, linear=True, flops=0,
               jvp=lambda ops, t, x_shape, multiples:
               ops.tile(t, (1,) * _nb(t, len(x_shape)) + tuple(multiples)), batch=_batch_tile)


def tile(input, multiples, name=None):  # noqa: A002
    """Repeats the tensor `multiples[i]` times along axis i.

    >>> tg.tile(tg.zeros((2, 3)), [2, 1]).shape
    (4, 3)
    """
    x = tensor(input)
    m = tuple(int(v) for v in (multiples.numpy().tolist() if isinstance(multiples, Tensor)
                               else multiples))
    if len(m) != x.ndim or any(v < 0 for v in m):
        raise InvalidArgumentError(f"tile: multiples {m} must have one non-negative entry per "
                                   f"axis of the shape {x.shape}")
    return apply(_tile, (x,), {"multiples": m})


def _pad_vjp(ops, g, paddings, constant_values):
    nb = g.ndim - len(paddings)
    key = (_py_slice(None),) * nb + tuple(_py_slice(lo, g.shape[nb + i] - hi)
                                      for i, (lo, hi) in enumerate(paddings))
    return g[key]


def _pad_jvp(ops, t, paddings, constant_values):
    # pad is affine: its tangent is the tangent padded with zeros
    return ops.pad(t, ((0, 0),) * _nb(t, len(paddings)) + tuple(paddings))


_pad = def_op("pad", lambda xp, x, paddings, constant_values:
              xp.pad(x, paddings, constant_values=constant_values), vjp=_pad_vjp, jvp=_pad_jvp,
              batch=_batch_pad, flops=0)


def pad(tensor_, paddings, mode="CONSTANT", constant_values=0, name=None):
    """Pads with `constant_values`: `paddings[i] = [before, after]` for axis i.

    >>> tg.pad(tg.ones((2, 2)), [[1, 1], [0, 2]]).shape
    (4, 4)
    """
    x = tensor(tensor_)
    if str(mode).upper() != "CONSTANT":
        raise InvalidArgumentError(f"pad: mode {mode!r} is not supported; only 'CONSTANT'")
    p = np.asarray(paddings.numpy() if isinstance(paddings, Tensor) else paddings, dtype=int)
    if p.shape != (x.ndim, 2) or (p < 0).any():
        raise InvalidArgumentError(f"pad: paddings must be non-negative with shape "
                                   f"({x.ndim}, 2) for a tensor of shape {x.shape}, got "
                                   f"{p.tolist()}")
    paddings = tuple(map(tuple, p.tolist()))
    if not isinstance(constant_values, Tensor) and not hasattr(constant_values, "assign"):
        return apply(_pad, (x,), {"paddings": paddings, "constant_values": constant_values})
    # a tensor's value is an input, not a param (a param would be fixed in a tg.function):
    # placed where a host mask of the padding says; no gradient, as TF's PadV2
    c = tensor(constant_values)
    if c.ndim or c._data.dtype != x._data.dtype:
        raise InvalidArgumentError(f"pad: constant_values must be a scalar of the tensor's "
                                   f"dtype {x.dtype.name}, got {c.dtype.name} of shape "
                                   f"{c.shape}")
    padded = apply(_pad, (x,), {"paddings": paddings, "constant_values": 0})
    mask = np.pad(np.zeros(x.shape, bool), paddings, constant_values=True)
    return where(mask, _u.stop_gradient(c), padded)


# -- roll --------------------------------------------------------------------------------------

def _roll_forward(xp, x, shift, axis):
    # shift and axis count from the right, so leading batch axes (a tangent's) pass through
    return xp.roll(x, shift, axis=axis)


_roll = def_op("roll", _roll_forward, linear=True,
               vjp=lambda ops, g, shift, axis:
               ops.op("roll", g, shift=tuple(-s for s in shift), axis=axis),
               jvp=lambda ops, t, shift, axis: ops.op("roll", t, shift=shift, axis=axis),
               batch="leading")


def _ints(value, what):
    if isinstance(value, Tensor):
        if value._data.dtype.kind not in "iu" or value.ndim > 1:
            raise InvalidArgumentError(f"roll: {what} must be an int or a vector of ints, got "
                                       f"{value.dtype.name} of shape {value.shape}")
        value = value.numpy().tolist()
    vals = [value] if not isinstance(value, (list, tuple, np.ndarray)) else list(value)
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in vals):
        raise InvalidArgumentError(f"roll: {what} must be an int or a vector of ints, got "
                                   f"{value!r}")
    return [int(v) for v in vals], isinstance(value, (int, np.integer))


def roll(input, shift, axis, name=None):  # noqa: A002
    """Rolls elements along `axis` by `shift` (tf.roll): element i moves to (i + shift) mod n;
    elements that leave one end come back at the other. `shift` and `axis` are ints or
    vectors of the same length; a repeated axis rolls by the sum of its shifts.

    >>> tg.roll(tg.constant([0, 1, 2, 3, 4]), shift=2, axis=0).numpy()
    array([3, 4, 0, 1, 2], dtype=int32)
    >>> tg.roll(tg.reshape(tg.range(6), (2, 3)), shift=[1, -1], axis=[0, 1]).numpy()
    array([[4, 5, 3],
           [1, 2, 0]], dtype=int32)
    """
    x = tensor(input)
    shifts, scalar_shift = _ints(shift, "shift")
    axes, scalar_axis = _ints(axis, "axis")
    if scalar_shift != scalar_axis or len(shifts) != len(axes):
        raise InvalidArgumentError(f"roll: shift and axis must both be ints or vectors of the "
                                   f"same length, got shift={shift!r} and axis={axis!r}")
    total = {}
    for s, a in zip(shifts, axes):
        a = norm_axis(a, x.ndim, "roll")
        total[a] = total.get(a, 0) + s
    # a shift of a multiple of the axis' length is the identity there (and rolls nothing
    # along an empty axis)
    kept = {a: s % x.shape[a] for a, s in total.items() if x.shape[a] and s % x.shape[a]}
    if not kept:
        return x
    return apply(_roll, (x,), {"shift": tuple(kept.values()), "axis": tuple(kept)})


# -- indexing ------------------------------------------------------------------------------------

# Leading axes (the op's own batch or a sweep's batch axes) are indexed by full slices in
# front of the key. numpy moves the axes of integer arrays that a slice separates to the very
# front, in front of those leading axes too; both functions put the leading axes back first.

def _getitem_forward(xp, x, key, inner):
    lead = x.ndim - inner
    out = x[(_py_slice(None),) * lead + key]
    if x.dtype.kind == "O" and not isinstance(out, xp.ndarray):  # one string: a 0-d array
        out = xp.asarray(out, dtype=object)
    if lead and _separated_advanced(key):
        k = _advanced_ndim(key)
        out = xp.moveaxis(out, tuple(range(k, k + lead)), tuple(range(lead)))
    return out


def _scatter_forward(xp, g, key, inner_shape, r, advanced):
    lead = g.ndim - r
    out = xp.zeros(g.shape[:lead] + inner_shape, dtype=g.dtype)
    full = (_py_slice(None),) * lead + key
    if lead and _separated_advanced(key):
        k = _advanced_ndim(key)
        g = xp.moveaxis(g, tuple(range(lead)), tuple(range(k, k + lead)))
    if advanced:
        add_at(xp, out, full, g)  # repeated indices add up
    else:
        out[full] = g
    return out


def _is_index_array(k):
    """Whether a normalized key entry is an index array, on the host (numpy) or on the device
    (a gather's saved indices are device arrays: CuPy's are no numpy.ndarray)."""
    return hasattr(k, "ndim") and hasattr(k, "dtype") and not isinstance(k, np.generic)


def _advanced_ndim(key):
    return len(np.broadcast_shapes(*[k.shape for k in key if _is_index_array(k)]))


def _separated_advanced(key):
    """Whether numpy moves the indexed axes to the front: integer arrays (and, with them,
    integers) that a slice or None separates."""
    if not any(_is_index_array(k) for k in key):
        return False
    pos = [i for i, k in enumerate(key) if _is_index_array(k) or isinstance(k, int)]
    return pos[-1] - pos[0] + 1 != len(pos)


def _getitem_jvp(ops, t, x_shape, key, inner):
    # linear: the tangent indexed the same way (its batch axes lead, as the forward keeps them)
    return ops.op("getitem", t, key=key, inner=inner)


# getitem and its scatter are each other's transposes
_getitem = def_op("getitem", _getitem_forward, saves=("x.shape",), linear=True, flops=0,
                  vjp=lambda ops, g, x_shape, key, inner:
                  _scatter(ops, g, key, x_shape[len(x_shape) - inner:],
                           g_inner_ndim(key, x_shape, inner)),
                  jvp=_getitem_jvp, batch="leading",
                  view_when=lambda params: not any(_is_index_array(k) for k in params["key"]))
_scatter_op = def_op("getitem_grad", _scatter_forward, linear=True,
                     vjp=lambda ops, g, key, inner_shape, r, advanced:
                     ops.op("getitem", g, key=key, inner=len(inner_shape)), batch="leading")


def g_inner_ndim(key, x_shape, inner):
    """ndim of x[key] over the inner (indexed) axes, from the key alone (numpy's rules)."""
    arrays = [k for k in key if _is_index_array(k)]
    ints = sum(1 for k in key if isinstance(k, int))
    news = sum(1 for k in key if k is None)
    adv = len(np.broadcast_shapes(*[a.shape for a in arrays])) if arrays else 0
    return inner - ints - len(arrays) + news + adv


def _scatter(ops, g, key, inner_shape, r):
    advanced = any(_is_index_array(k) for k in key)  # repeated indices must add up
    return ops.op("getitem_grad", g, key=key, inner_shape=tuple(inner_shape), r=r,
                  advanced=advanced)


def _normalize_key(key, shape, xp):
    """A tuple key without Ellipsis, tensors or bool masks (those become integer arrays)."""
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    for k in key:
        if isinstance(k, (Tensor,)):
            k = k.numpy()
        elif hasattr(k, "_value") and hasattr(k, "assign"):
            k = k.numpy()
        elif _is_index_array(k) and not isinstance(k, np.ndarray):  # a device array (CuPy)
            k = tensor(k).numpy()
        if isinstance(k, list):
            k = np.asarray(k)
        out.append(k)
    n_real = sum(1 for k in out if k is not None and k is not Ellipsis and
                 not (isinstance(k, np.ndarray) and k.dtype == np.bool_)) + \
        sum(k.ndim for k in out if isinstance(k, np.ndarray) and k.dtype == np.bool_)
    if sum(1 for k in out if k is Ellipsis) > 1:
        raise InvalidArgumentError("getitem: an index can only have a single ellipsis")
    expanded = []
    for k in out:
        if k is Ellipsis:
            expanded.extend([_py_slice(None)] * (len(shape) - n_real))
        elif isinstance(k, np.ndarray) and k.dtype == np.bool_:
            expanded.extend(np.nonzero(k))
        elif isinstance(k, np.ndarray):
            if k.dtype.kind not in "iu":
                raise InvalidArgumentError(f"getitem: index arrays must be integer or bool, "
                                           f"got {k.dtype}")
            expanded.append(k.astype(np.intp, copy=False))
        elif isinstance(k, (np.integer,)):
            expanded.append(int(k))
        else:
            expanded.append(k)
    return tuple(expanded)


def getitem(x, key):
    """x[key]: basic slicing, integer arrays and boolean masks (numpy semantics).

    >>> tg.constant([[1.0, 2.0], [3.0, 4.0]])[:, 1].numpy()
    array([2., 4.], dtype=float32)
    """
    x = tensor(x)
    key = _normalize_key(key, x.shape, x._dev.xp)
    try:
        return apply(_getitem, (x,), {"key": key, "inner": x.ndim})
    except IndexError as e:
        raise InvalidArgumentError(f"getitem: {e} (shape {x.shape})") from None


getitem.op = _getitem  # its entry, for passes keyed on entries (function/)


# -- gather ---------------------------------------------------------------------------------------

def _gather_vjp(ops, g, p_shape, indices, axis):
    # the transpose of a gather is a scatter-add into zeros of the params' shape: a segment sum
    # of g's slices over the indices (repeated indices add up); the indices are an input of it,
    # never a constant (inside tg.function each call has its own). g's axes before the indices'
    # are its batch axes and the params' axes before `axis`
    lead = g.ndim - indices.ndim + axis + 1
    return ops.op("unsorted_segment_sum", g, indices, num=p_shape[axis], lead=lead)


def _gather_forward(xp, params, indices, axis):
    # valid indices are [0, n), as TF's (a negative index is an error, not counted from the end)
    n, ax = params.shape[axis], params.ndim + axis
    if indices.size and checks.deferred(xp):  # on a device: queued, no sync (CuPy's take wraps)
        checks.check(xp, (indices < 0) | (indices >= n),
                     lambda host: InvalidArgumentError(f"gather: {_index_error(host, n, ax)} "
                                                       f"(found on the device, reported at the "
                                                       f"first read of a value after it)"),
                     indices)
    elif indices.size and (indices.min() < 0 or indices.max() >= n):
        raise IndexError(_index_error(indices, n, ax))
    return xp.take(params, indices, axis=axis)


def _index_error(indices, n, axis):
    at = tuple(int(i) for i in np.argwhere((indices < 0) | (indices >= n))[0])
    return f"indices{list(at)} = {int(indices[at])} is not in [0, {n}) (axis {axis} of params)"


def _gather_jvp(ops, ts, p_shape, indices, axis):
    # gather is linear in params; `axis` counts from the right, past the batch axes
    return None if ts[0] is None else ops.gather(ts[0], indices, axis=axis)


_gather = def_op("gather", _gather_forward, args=("params", "indices"), flops=0,
                 saves=("params.shape", "indices"), vjp=(_gather_vjp, None), jvp=_gather_jvp,
                 same_dtype=False, batch="first")


def gather(params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
    """Picks slices of `params` along `axis` at `indices` (any integer shape).

    >>> tg.gather(tg.constant([10.0, 20.0, 30.0]), [2, 0]).numpy()
    array([30., 10.], dtype=float32)
    """
    p = tensor(params)
    idx = tensor(indices) if not isinstance(indices, (list, tuple, np.ndarray)) else \
        convert_to_tensor(np.asarray(indices))
    if idx._data.dtype.kind not in "iu":
        raise InvalidArgumentError(f"gather: indices must be integers, got {idx.dtype.name}")
    if batch_dims:
        raise InvalidArgumentError("gather: batch_dims other than 0 are not supported")
    ax = norm_axis(0 if axis is None else axis, p.ndim, "gather")
    return apply(_gather, (p, idx), {"axis": ax})


gather.op = _gather  # its entry, for passes keyed on entries (function/)


def one_hot(indices, depth, on_value=None, off_value=None, axis=-1, dtype=None, name=None):
    """One-hot encoding of integer `indices` along a new last axis (no gradient).

    >>> tg.one_hot([0, 2], 3).numpy()
    array([[1., 0., 0.],
           [0., 0., 1.]], dtype=float32)
    """
    idx = tensor(indices)
    if idx._data.dtype.kind not in "iu":
        raise InvalidArgumentError(f"one_hot: indices must be integers, got {idx.dtype.name}")
    xp = idx._dev.xp
    dt = np_dtype(dtype) or (np.dtype(np.float32) if on_value is None or
                             isinstance(on_value, float) else np.asarray(on_value).dtype)
    on = 1 if on_value is None else on_value
    off = 0 if off_value is None else off_value
    # registry ops (not arrays), so that a tg.function trace records them with `indices`
    positions = Tensor(xp.arange(int(depth), dtype=idx._data.dtype), idx._dev)
    hot = equal(expand_dims(idx, -1), positions)
    out = where(hot, Tensor(xp.asarray(on, dtype=dt), idx._dev),
                Tensor(xp.asarray(off, dtype=dt), idx._dev))
    if axis != -1:
        perm = list(range(out.ndim - 1))
        perm.insert(axis % out.ndim, out.ndim - 1)
        out = transpose(out, perm)
    return out


def repeat(input, repeats, axis=None, name=None):  # noqa: A002
    """Repeats each element `repeats` times along `axis` (of the flattened input when `axis` is
    None); `repeats` is an int or one count per element of that axis (tf.repeat).

    >>> tg.repeat(tg.constant([1.0, 2.0]), 2).numpy()
    array([1., 1., 2., 2.], dtype=float32)
    >>> tg.repeat(tg.constant([[1, 2], [3, 4]]), [1, 2], axis=0).numpy()
    array([[1, 2],
           [3, 4],
           [3, 4]], dtype=int32)
    """
    x = tensor(input)
    if axis is None:
        x = reshape(x, (-1,))
        ax = -1
    else:
        if isinstance(axis, Tensor):
            axis = axis.numpy().item() if axis.ndim == 0 else axis
        if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
            raise TypeError(f"repeat: axis must be None or an int, got {axis!r}")
        ax = norm_axis(int(axis), x.ndim, "repeat")
    r = np.asarray(repeats.numpy() if isinstance(repeats, Tensor) else repeats)
    if r.dtype.kind not in "iu" or r.ndim > 1:
        raise TypeError(f"repeat: repeats must be an int or a vector of ints, got {repeats!r}")
    n = x.shape[ax]
    if r.ndim == 1 and r.size not in (1, n):
        raise InvalidArgumentError(f"repeat: {r.size} repeats for axis {axis} of size {n} (shape "
                                   f"{x.shape}); give one count per element or a single count")
    if (r < 0).any():
        raise InvalidArgumentError(f"repeat: repeats must be >= 0, got {r.tolist()}")
    # a gather of each index repeated: its gradient sums the copies back (a scatter-add)
    return gather(x, np.repeat(np.arange(n), np.broadcast_to(r.reshape(-1), (n,))), axis=ax)


def shape(input, out_type=np.int32, name=None):  # noqa: A002
    """The shape as an integer tensor.

    >>> tg.shape(tg.zeros((2, 3))).numpy()
    array([2, 3], dtype=int32)
    """
    x = tensor(input)
    dt = np_dtype(out_type)
    return Tensor(np.asarray(x.shape, dtype=dt), x._dev) if x._dev.xp is np else \
        Tensor(x._dev.asarray(np.asarray(x.shape, dtype=dt)), x._dev)


def rank(input, name=None):  # noqa: A002
    """The number of axes as an int32 scalar.

    >>> int(tg.rank(tg.zeros((2, 3))))
    2
    """
    return convert_to_tensor(np.int32(tensor(input).ndim))


def size(input, out_type=np.int32, name=None):  # noqa: A002
    """The number of elements (int32 unless `out_type`).

    >>> int(tg.size(tg.zeros((2, 3))))
    6
    >>> tg.size(tg.zeros((2, 3)), out_type=tg.float32).dtype
    tg.float32
    """
    return convert_to_tensor(np.asarray(tensor(input).size, dtype=np_dtype(out_type)))


# -- gather_nd, boolean_mask --------------------------------------------------------------------

def gather_nd(params, indices, batch_dims=0, name=None):
    """Slices of `params` at the index tuples in the last axis of `indices`, as tf.gather_nd:
    the result has shape indices.shape[:-1] + params.shape[indices.shape[-1]:]; its gradient
    adds up where indices repeat.

    >>> tg.gather_nd(tg.constant([[1.0, 2.0], [3.0, 4.0]]), [[1, 0], [0, 1]]).numpy()
    array([3., 2.], dtype=float32)
    """
    p = tensor(params)
    idx = tensor(indices)
    if batch_dims != 0:
        raise InvalidArgumentError("gather_nd: batch_dims other than 0 is not supported yet")
    if idx._data.dtype.kind not in "iu" or idx.ndim < 1 or idx.shape[-1] > p.ndim:
        raise InvalidArgumentError(f"gather_nd: indices must be integers of shape (..., k) with "
                                   f"k <= rank {p.ndim} of params, got {idx.dtype.name} of shape "
                                   f"{idx.shape}")
    host = idx.numpy()
    k = host.shape[-1]
    for axis in range(k):  # TF raises for an index out of range (numpy would wrap negatives)
        col = host[..., axis].ravel()
        bad = col[(col < 0) | (col >= p.shape[axis])]
        if bad.size:
            raise InvalidArgumentError(f"gather_nd: index {bad[0]} is out of range for axis "
                                       f"{axis} of size {p.shape[axis]}")
    return getitem(p, tuple(host[..., axis] for axis in range(k)))


def boolean_mask(tensor_, mask, axis=None, name=None):
    """The elements (or slices along `axis`) where `mask` is True, flattened over the mask's
    axes, as tf.boolean_mask.

    >>> tg.boolean_mask(tg.constant([1.0, 2.0, 3.0]), [True, False, True]).numpy()
    array([1., 3.], dtype=float32)
    """
    x = tensor(tensor_)
    m = tensor(mask)
    a = 0 if axis is None else norm_axes(axis, x.ndim, "boolean_mask")[0]
    if m._data.dtype.kind != "b" or m.ndim == 0 or x.shape[a:a + m.ndim] != m.shape:
        raise InvalidArgumentError(f"boolean_mask: mask must be bool with the shape of the "
                                   f"tensor's axes {a}..{a + m.ndim - 1}, {x.shape[a:a + m.ndim]}; "
                                   f"got {m.dtype.name} of shape {m.shape}")
    return getitem(x, (_py_slice(None),) * a + (m.numpy(),))


# -- scatter_nd, tensor_scatter_nd_* -------------------------------------------------------------
# A scatter is the transpose of a gather: scatter_nd is the registry's getitem_grad (a scatter-add
# into zeros, whose VJP is the gather and whose JVP the scatter of the tangent).

def _scatter_key(op, indices, updates, shape):
    """The index columns of `indices` (host arrays, checked against `shape`) as a getitem key,
    with `updates` checked to have the shape indices.shape[:-1] + shape[k:]."""
    idx = tensor(indices)
    if idx._data.dtype.kind not in "iu" or idx.ndim < 1 or idx.shape[-1] > len(shape):
        raise InvalidArgumentError(f"{op}: indices must be integers of shape (..., k) with k <= "
                                   f"{len(shape)} (the rank of the output {list(shape)}), got "
                                   f"{idx.dtype.name} of shape {idx.shape}")
    host = idx.numpy()
    k = host.shape[-1]
    want = host.shape[:-1] + tuple(shape[k:])
    if tuple(updates.shape) != want:
        raise InvalidArgumentError(f"{op}: updates must have shape indices.shape[:-1] + "
                                   f"shape[{k}:] = {list(want)}, got {list(updates.shape)}")
    rows = host.reshape(-1, k)
    bad = (rows < 0) | (rows >= np.asarray(shape[:k], dtype=np.int64))
    if bad.any():
        r = int(np.nonzero(bad.any(axis=1))[0][0])
        at = [int(i) for i in np.unravel_index(r, host.shape[:-1])]
        raise InvalidArgumentError(f"{op}: indices{at} = {rows[r].tolist()} does not index into "
                                   f"shape {list(shape)}")
    return tuple(host[..., axis].astype(np.intp) for axis in range(k)), rows


def _output_shape(shape):
    if isinstance(shape, Tensor):
        shape = shape.numpy().tolist()
    return tuple(int(n) for n in shape)


def _scatter_add(updates, key, shape):
    return apply(_scatter_op, (updates,), {"key": key, "inner_shape": tuple(shape),
                                           "r": updates.ndim, "advanced": True})


def scatter_nd(indices, updates, shape, name=None):
    """Zeros of `shape` with `updates` added at `indices`, as `tf.scatter_nd`: each index tuple
    in the last axis of `indices` names a slice shape[k:]; repeated indices add up. Its gradient
    is a gather_nd.

    >>> tg.scatter_nd([[1], [3], [1]], tg.constant([1.0, 2.0, 5.0]), [4]).numpy()
    array([0., 6., 0., 2.], dtype=float32)
    """
    u = tensor(updates)
    out_shape = _output_shape(shape)
    key, _ = _scatter_key("scatter_nd", indices, u, out_shape)
    return _scatter_add(u, key, out_shape)


def tensor_scatter_nd_add(tensor_, indices, updates, name=None):
    """`tensor_` with `updates` added at `indices` (repeated indices add up), as
    `tf.tensor_scatter_nd_add`.

    >>> tg.tensor_scatter_nd_add(tg.ones(3), [[0], [0]], tg.constant([1.0, 2.0])).numpy()
    array([4., 1., 1.], dtype=float32)
    """
    x = tensor(tensor_)
    u = tensor(updates)
    key, _ = _scatter_key("tensor_scatter_nd_add", indices, u, x.shape)
    return x + _scatter_add(u, key, x.shape)


def tensor_scatter_nd_sub(tensor_, indices, updates, name=None):
    """`tensor_` with `updates` subtracted at `indices`, as `tf.tensor_scatter_nd_sub`.

    >>> tg.tensor_scatter_nd_sub(tg.ones(3), [[2]], tg.constant([1.0])).numpy()
    array([1., 1., 0.], dtype=float32)
    """
    x = tensor(tensor_)
    u = tensor(updates)
    key, _ = _scatter_key("tensor_scatter_nd_sub", indices, u, x.shape)
    return x - _scatter_add(u, key, x.shape)


def unique_positions(op, tensor_, indices, updates):
    """(key, last, inverse, n) of the n distinct index tuples of a tensor scatter: `key` indexes
    them (in order of first occurrence), `last` is each one's last row of updates, `inverse`
    each row's position among them (the rows: the updates reshaped to (-1,) + slice shape)."""
    key, rows = _scatter_key(op, indices, updates, tensor_.shape)
    k = rows.shape[1]
    flat = np.ravel_multi_index(rows.T, tensor_.shape[:k]) if k else np.zeros(len(rows), int)
    _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    inverse = rank[inverse.reshape(-1)]
    last = np.zeros(order.size, dtype=np.intp)
    last[inverse] = np.arange(inverse.size)  # numpy assigns in order: the last row wins
    ukey = tuple(col.reshape(-1)[last] for col in key)
    return ukey, last, inverse, order.size


def _mask_at(x, key):
    """A bool tensor beside `x`: True on the slices `key` names."""
    mask = np.zeros(x.shape, dtype=bool)
    mask[key] = True
    return Tensor(mask if x._dev.xp is np else x._dev.asarray(mask), x._dev)


def tensor_scatter_nd_update(tensor_, indices, updates, name=None):
    """`tensor_` with the slices at `indices` replaced by `updates`, as
    `tf.tensor_scatter_nd_update`. Where an index repeats, the last update wins (TensorFlow
    leaves the order unspecified); the gradient goes to that update and not to `tensor_` there.

    >>> tg.tensor_scatter_nd_update(tg.zeros((2, 2)), [[1, 0]], tg.constant([7.0])).numpy()
    array([[0., 0.],
           [7., 0.]], dtype=float32)
    """
    x = tensor(tensor_)
    u = tensor(updates)
    ukey, last, _, n = unique_positions("tensor_scatter_nd_update", x, indices, u)
    k = len(ukey)
    picked = gather(reshape(u, (-1,) + x.shape[k:]), last, axis=0)
    return _b.where(_mask_at(x, ukey), _scatter_add(picked, ukey, x.shape), x)


# -- searchsorted, unique (no gradient) ---------------------------------------------------------

def _searchsorted_forward(xp, seq, values, right, dtype):
    if seq.ndim == 1:
        return xp.searchsorted(seq, values, side="right" if right else "left").astype(dtype)
    # one row at a time in one call: the count of elements before each value's place
    before = seq[..., None, :] <= values[..., :, None] if right else \
        seq[..., None, :] < values[..., :, None]
    return xp.sum(before, axis=-1, dtype=dtype)


_searchsorted = def_op("searchsorted", _searchsorted_forward, args=("sorted_sequence", "values"),
                       batch="leading")


def searchsorted(sorted_sequence, values, side="left", out_type=np.int32, name=None):
    """Where each of `values` would go in the rows of `sorted_sequence` (the innermost axis,
    sorted ascending) to keep them sorted, as `tf.searchsorted`: `side="left"` gives the first
    such place, "right" the last. The leading axes of both must agree.

    >>> tg.searchsorted(tg.constant([0.0, 1.0, 2.0]), tg.constant([1.0, 2.5]), side="right").numpy()
    array([2, 3], dtype=int32)
    """
    seq, vals = tensor(sorted_sequence), tensor(values)
    if side not in ("left", "right"):
        raise InvalidArgumentError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    dt = np_dtype(out_type)
    if dt not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise InvalidArgumentError(f"searchsorted: out_type must be int32 or int64, got {dt}")
    if seq.ndim < 1 or vals.ndim != seq.ndim or vals.shape[:-1] != seq.shape[:-1]:
        raise InvalidArgumentError(f"searchsorted: sorted_sequence and values must have the same "
                                   f"rank >= 1 and the same leading dimensions, got shapes "
                                   f"{seq.shape} and {vals.shape}")
    if seq._data.dtype != vals._data.dtype:
        raise InvalidArgumentError(f"searchsorted: sorted_sequence and values must have one "
                                   f"dtype, got {seq.dtype.name} and {vals.dtype.name}")
    return apply(_searchsorted, (seq, vals), {"right": side == "right", "dtype": dt})


def _unique_forward(xp, x, index, dtype):
    # numpy's unique sorts; TensorFlow keeps the order of first occurrence
    values, first, inverse = xp.unique(x, return_index=True, return_inverse=True)
    order = xp.argsort(first)
    if not index:
        return values[order]
    rank = xp.empty_like(order)
    rank[order] = xp.arange(order.size)
    return rank[inverse.reshape(-1)].astype(dtype)


_unique = def_op("unique", _unique_forward)

Unique = namedtuple("Unique", "y idx")


def unique(x, out_idx=np.int32, name=None):
    """The distinct elements of the 1-D `x` in order of first occurrence, and for each element
    of `x` the position of its value in them, as `tf.unique` (no gradient).

    >>> y, idx = tg.unique(tg.constant([1, 1, 2, 4, 4, 4, 7, 8, 8]))
    >>> y.numpy(), idx.numpy()
    (array([1, 2, 4, 7, 8], dtype=int32), array([0, 0, 1, 2, 2, 2, 3, 4, 4], dtype=int32))
    """
    t = tensor(x)
    dt = np_dtype(out_idx)
    if t.ndim != 1:
        raise InvalidArgumentError(f"unique: x must be a vector, got shape {t.shape}")
    if dt not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise InvalidArgumentError(f"unique: out_idx must be int32 or int64, got {dt}")
    return Unique(apply(_unique, (t,), {"index": False, "dtype": dt}),
                  apply(_unique, (t,), {"index": True, "dtype": dt}))


# -- sorting ------------------------------------------------------------------------------------
# take_along picks, along `axis`, the elements that an integer index array names (a sort's
# permutation, top_k's indices); put_along is its transpose, scattering into zeros of length n.
# Indices have the shape of x (without a cotangent's leading batch axes, which they broadcast
# over), so both are linear in their first input and each other's VJP.

def _batched_index(xp, idx, like):
    return xp.broadcast_to(idx, like.shape[:like.ndim - idx.ndim] + idx.shape)


def _take_along_forward(xp, x, idx, axis):
    return xp.take_along_axis(x, _batched_index(xp, idx, x), axis=axis)


def _put_along_forward(xp, g, idx, axis, n):
    shape = list(g.shape)
    shape[axis] = n
    out = xp.zeros(tuple(shape), dtype=g.dtype)
    # out[..., idx[i], ...] = g[..., i, ...] by open index grids (CuPy has no put_along_axis)
    axis %= g.ndim
    key = [xp.arange(s).reshape((-1,) + (1,) * (g.ndim - 1 - k)) for k, s in enumerate(g.shape)]
    key[axis] = _batched_index(xp, idx, g)
    out[tuple(key)] = g
    return out


_take_along = def_op("take_along", _take_along_forward, args=("x", "idx"), saves=("x.shape", "idx"),
                     same_dtype=False,
                     vjp=(lambda ops, g, x_shape, idx, axis:
                          ops.op("put_along", g, idx, axis=axis, n=x_shape[axis]), None),
                     jvp=lambda ops, ts, x_shape, idx, axis:
                     None if ts[0] is None else ops.op("take_along", ts[0], idx, axis=axis),
                     batch="leading")
_put_along = def_op("put_along", _put_along_forward, args=("g", "idx"), saves=("idx",),
                    same_dtype=False,
                    vjp=(lambda ops, g, idx, axis, n: ops.op("take_along", g, idx, axis=axis),
                         None),
                    jvp=lambda ops, ts, idx, axis, n:
                    None if ts[0] is None else ops.op("put_along", ts[0], idx, axis=axis, n=n),
                    batch="leading")


def _argsort_forward(xp, x, axis, descending):
    # a stable sort of -x keeps equal elements in their order, as TF's stable descending sort
    return xp.argsort(-x if descending else x, axis=axis, kind="stable").astype(xp.int32)


_argsort = def_op("argsort", _argsort_forward, batch="leading")  # no gradient: indices


def _direction(direction, op):
    if direction not in ("ASCENDING", "DESCENDING"):
        raise InvalidArgumentError(f"{op}: direction must be 'ASCENDING' or 'DESCENDING', got "
                                   f"{direction!r}")
    return direction == "DESCENDING"


def argsort(values, axis=-1, direction="ASCENDING", stable=False, name=None):
    """The indices (int32) that sort `values` along `axis`, as tf.argsort (always stable).

    >>> tg.argsort(tg.constant([3.0, 1.0, 2.0])).numpy()
    array([1, 2, 0], dtype=int32)
    """
    x = tensor(values)
    if x.ndim == 0:
        raise InvalidArgumentError("argsort: a scalar has no axis to sort; give a tensor of "
                                   "rank >= 1")
    return apply(_argsort, (x,), {"axis": norm_axis(axis, x.ndim, "argsort"),
                                  "descending": _direction(direction, "argsort")})


def sort(values, axis=-1, direction="ASCENDING", name=None):
    """`values` sorted along `axis`, as tf.sort; its gradient goes back to where each element
    came from.

    >>> tg.sort(tg.constant([3.0, 1.0, 2.0]), direction="DESCENDING").numpy()
    array([3., 2., 1.], dtype=float32)
    """
    x = tensor(values)
    idx = argsort(x, axis=axis, direction=direction)
    return apply(_take_along, (x, idx), {"axis": norm_axis(axis, x.ndim, "sort")})


TopK = namedtuple("TopK", "values indices")


def top_k(input, k=1, sorted=True, name=None):  # noqa: A002
    """The k largest entries along the last axis and their indices (int32), as tf.math.top_k
    (ties: the lower index first); the gradient goes to the entries picked.

    >>> tg.math.top_k(tg.constant([1.0, 3.0, 2.0]), k=2).values.numpy()
    array([3., 2.], dtype=float32)
    """
    x = tensor(input)
    k = int(k)
    if x.ndim == 0 or not 0 <= k <= x.shape[-1]:
        raise InvalidArgumentError(f"top_k: k={k} must be in [0, {x.shape[-1] if x.ndim else 0}] "
                                   f"for an input of shape {x.shape}")
    idx = argsort(x, axis=-1, direction="DESCENDING")[..., :k]
    return TopK(apply(_take_along, (x, idx), {"axis": -1}), idx)



# -- reverse, slice, strided_slice, sequence_mask, meshgrid (compositions) ----------------------

def _int_list(value, what, op):
    """A host list of ints from a list, array or integer tensor of rank <= 1."""
    host = np.asarray(value.numpy() if isinstance(value, Tensor) else value)
    if host.ndim > 1 or (host.size and host.dtype.kind not in "iu"):
        raise InvalidArgumentError(f"{op}: {what} must be a vector of integers, got "
                                   f"{host.dtype} of shape {host.shape}")
    return [int(v) for v in host.reshape(-1)]


def reverse(tensor, axis, name=None):  # noqa: F811 (the argument shadows the helper, as TF)
    """`tensor` with the order of its elements reversed along each axis in `axis` (a vector of
    distinct axes), as tf.reverse; the gradient is reversed back.

    >>> tg.reverse(tg.constant([[1, 2, 3], [4, 5, 6]]), [1]).numpy()
    array([[3, 2, 1],
           [6, 5, 4]], dtype=int32)
    """
    x = convert_to_tensor(tensor)
    axes = _int_list(axis, "axis", "reverse")
    seen = set()
    for a in axes:
        a = norm_axis(a, x.ndim, "reverse") % x.ndim
        if a in seen:
            raise InvalidArgumentError(f"reverse: axis {a} specified more than once")
        seen.add(a)
    if not seen:
        return x
    return getitem(x, tuple(_py_slice(None, None, -1) if a in seen else _py_slice(None)
                            for a in range(x.ndim)))


def slice(input_, begin, size, name=None):  # noqa: A001 (TF's name)
    """The block of `input_` starting at index `begin` with extent `size` per axis (-1: to
    the end of that axis), as tf.slice.

    >>> tg.slice(tg.reshape(tg.range(12), (3, 4)), [1, 1], [-1, 2]).numpy()
    array([[ 5,  6],
           [ 9, 10]], dtype=int32)
    """
    x = convert_to_tensor(input_)
    b = _int_list(begin, "begin", "slice")
    n = _int_list(size, "size", "slice")
    if len(b) != x.ndim or len(n) != x.ndim:
        raise InvalidArgumentError(f"slice: begin and size must each have one entry per axis "
                                   f"of the input of shape {x.shape}, got {len(b)} and "
                                   f"{len(n)}")
    key = []
    for i, (start, extent, dim) in enumerate(zip(b, n, x.shape)):
        if not 0 <= start <= dim:
            raise InvalidArgumentError(f"slice: expected begin[{i}] in [0, {dim}], but got "
                                       f"{start}")
        extent = dim - start if extent == -1 else extent
        if not 0 <= extent <= dim - start:
            raise InvalidArgumentError(f"slice: expected size[{i}] in [0, {dim - start}], but "
                                       f"got {extent}")
        key.append(_py_slice(start, start + extent))
    return getitem(x, tuple(key))


def _bits(mask, n):
    return [bool(int(mask) >> i & 1) for i in range(n)]


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, var=None, name=None):
    """`input_[begin:end:strides]` spelled as tf.strided_slice: bit i of `begin_mask` /
    `end_mask` ignores begin[i] / end[i], of `ellipsis_mask` makes entry i an `...`, of
    `new_axis_mask` a new axis of size 1, of `shrink_axis_mask` the single index begin[i]
    (removing that axis). Negative indices count from the end; the gradient scatters back.

    >>> x = tg.reshape(tg.range(12), (3, 4))
    >>> tg.strided_slice(x, [0, 1], [3, 4], [2, 2]).numpy()
    array([[ 1,  3],
           [ 9, 11]], dtype=int32)
    """
    x = convert_to_tensor(input_)
    b = _int_list(begin, "begin", "strided_slice")
    e = _int_list(end, "end", "strided_slice")
    s = [1] * len(b) if strides is None else _int_list(strides, "strides", "strided_slice")
    if not len(b) == len(e) == len(s):
        raise InvalidArgumentError(f"strided_slice: begin, end and strides must have one "
                                   f"length, got {len(b)}, {len(e)} and {len(s)}")
    if 0 in s:
        raise InvalidArgumentError(f"strided_slice: strides must be non-zero, got {s}")
    masks = [_bits(m, len(b)) for m in (begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                                         shrink_axis_mask)]
    if sum(masks[2]) > 1:
        raise InvalidArgumentError("strided_slice: multiple ellipses in slice spec not allowed")
    key = []
    for i, (skip_b, skip_e, ellipsis, new, shrink) in enumerate(zip(*masks)):
        if ellipsis:
            key.append(Ellipsis)
        elif new:
            key.append(None)
        elif shrink:
            key.append(b[i])
        else:
            key.append(_py_slice(None if skip_b else b[i], None if skip_e else e[i], s[i]))
    axis = 0  # check the shrunk indices against the axes they name (as TF does)
    for k in key:
        if k is Ellipsis:
            axis += x.ndim - sum(1 for k2 in key if k2 is not None and k2 is not Ellipsis)
            continue
        if isinstance(k, int) and axis < x.ndim and not -x.shape[axis] <= k < x.shape[axis]:
            raise InvalidArgumentError(f"strided_slice: slice index {k} of dimension {axis} out "
                                       f"of bounds (size {x.shape[axis]})")
        axis += k is not None
    return getitem(x, tuple(key))


def sequence_mask(lengths, maxlen=None, dtype=np.bool_, name=None):
    """A mask of shape lengths.shape + (maxlen,) that is true at [..., j] where
    j < lengths[...], as tf.sequence_mask (`maxlen` defaults to the largest length).

    >>> tg.sequence_mask([1, 3, 2], 4).numpy()
    array([[ True, False, False, False],
           [ True,  True,  True, False],
           [ True,  True, False, False]])
    """
    n = convert_to_tensor(lengths)
    if n._data.dtype.kind not in "iu":
        raise InvalidArgumentError(f"sequence_mask: lengths must be integers, got "
                                   f"{n.dtype.name}")
    if maxlen is None:
        maxlen = int(n.numpy().max()) if n.size else 0
    else:
        m = convert_to_tensor(maxlen)
        if m.ndim != 0 or m._data.dtype.kind not in "iu":
            raise InvalidArgumentError(f"sequence_mask: maxlen must be an integer scalar, got "
                                       f"{m.dtype.name} of shape {m.shape}")
        maxlen = int(m)
    positions = Tensor(n._dev.xp.arange(max(maxlen, 0), dtype=n._data.dtype), n._dev)
    mask = _b.less(positions, expand_dims(n, -1))
    target = np_dtype(dtype)
    return mask if target == np.bool_ else _u.cast(mask, target)


def meshgrid(*args, **kwargs):
    """Coordinate grids of the 1-D tensors in `args`, as tf.meshgrid: with indexing="xy"
    (default) the first two output axes are swapped (Cartesian), with "ij" they follow the
    arguments (matrix indexing). Gradients sum back over the broadcast axes.

    >>> xs, ys = tg.meshgrid([1, 2, 3], [4, 5])
    >>> xs.numpy()
    array([[1, 2, 3],
           [1, 2, 3]], dtype=int32)
    """
    indexing = kwargs.pop("indexing", "xy")
    kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"meshgrid: unexpected keyword arguments {sorted(kwargs)}")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: Argument `indexing` parameter must be either 'xy' or "
                         f"'ij', got '{indexing}'")
    xs = [reshape(a, (-1,)) for a in (convert_to_tensor(a) for a in args)]
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and len(xs) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        at = (1 - i if i < 2 else i) if indexing == "xy" and len(xs) > 1 else i
        view = [1] * len(xs)
        view[at] = x.shape[0]
        out.append(broadcast_to(reshape(x, view), shape))
    return out


# -- tg.function's diagonal pass (function/diagonal.py): how a value diagonal over a
# Jacobian's basis goes through the op (returns ("diag", D, p), ("plain",) or None)

def _diagonal_getitem(ps, n):
    (v,) = n.ins
    d, p, size = ps.diag[v]
    key, inner = n.params.get("key"), n.params.get("inner")
    r = len(ps.shape(v))
    if not isinstance(key, tuple) or set(n.params) != {"key", "inner"}:
        return None
    full = (_py_slice(None),) * (r - inner) + key
    if not full or full[0] is None or any(k is not None and not (
            isinstance(k, _py_slice) and k == _py_slice(None)) for k in full):
        return None
    full = full + (_py_slice(None),) * (r - sum(1 for k in full if k is not None))
    out_axis, axis, newp = 0, 0, None
    for k in full:
        if k is not None:
            if axis == p:
                newp = out_axis
            axis += 1
        out_axis += 1
    _, out_shape, dtype, dev = ps.meta(n.out)
    dd = ps.emit(_getitem, [d], {"key": full[1:], "inner": r - 1}, out_shape[1:],
                 dtype, dev)
    return "diag", dd, newp


def _diagonal_broadcast_to(ps, n):
    (v,) = n.ins
    d, p, size = ps.diag[v]
    _, out_shape, dtype, dev = ps.meta(n.out)
    s = ps.shape(v)
    if set(n.params) != {"shape"} or len(s) != len(out_shape) or \
            (s[0], s[p]) != (out_shape[0], out_shape[p]):
        return None
    dd = ps.emit(_broadcast, [d], {"shape": tuple(out_shape[1:])}, out_shape[1:],
                 dtype, dev)
    return "diag", dd, p


def _diagonal_reshape(ps, n):
    """A reshape that only inserts or drops axes of size 1, axis 0 staying first."""
    (v,) = n.ins
    d, p, size = ps.diag[v]
    _, out_shape, dtype, dev = ps.meta(n.out)
    s = ps.shape(v)
    big_in = [i for i, x in enumerate(s) if x != 1]
    big_out = [i for i, x in enumerate(out_shape) if x != 1]
    if [s[i] for i in big_in] != [out_shape[i] for i in big_out] or not out_shape or \
            out_shape[0] != s[0] or big_out[0] != 0:
        return None
    dd = ps.reshape(d, out_shape[1:], dev)
    return "diag", dd, big_out[big_in.index(p)]


_getitem.diagonal = _diagonal_getitem
_broadcast.diagonal = _diagonal_broadcast_to
_reshape.diagonal = _diagonal_reshape


__all__ = public(globals(), ("",), special=((("linalg",), (matrix_transpose,)),
                                            (("math",), (top_k,)),
                                            ((), (getitem, g_inner_ndim, unstack_last,
                                                  unique_positions))))
