"""How ops run on values with a batch axis (`tg.vectorized_map`): the batching rules.

An op's entry says how it batches with its `batch` field: the name of one of the kinds below,
shared by many ops, or a rule of its own written beside it in its family's file (reshape's,
matmul's, conv's), as JAX registers a batching rule with each primitive. A rule takes
`(op, vals, flags, params, size)`: the real values (batched ones with the batch axis first),
which of them are batched, the op's per-example params and the batch size; it returns the real
output (batch axis first), or None where it does not cover the inputs (then vectorized_map runs
the op once per example). autodiff/vectorize.py calls the rules and names no op.

The kinds (`KINDS`):
  broadcast      inputs broadcast against each other's leading axes (elementwise ops)
  leading        the op maps over leading axes and names its axes from the right
  leading_broadcast  as leading, for inputs of one core rank whose batch axes broadcast
  axis           as leading, with the non-negative axes of its `axis` param shifted by one
  first          only the first input may carry the batch axis (else the loop)
  merge          the batch axis folds into the op's own axis 0, which every input has
  channels       per-channel params (a bias): per example, the batch folds into the channels
  lead           the op's `lead` param (axes in front of the ones it works on) plus one
"""
from . import registry
from .shape import _broadcast as _BROADCAST_TO, _reshape as _RESHAPE, _transpose as _TRANSPOSE


# -- helpers for rules -----------------------------------------------------------------------------

def reshaped(v, shape):
    """`v` in `shape` (which the rules compute: valid by construction)."""
    if v._data.shape == shape:
        return v
    return registry.apply1(_RESHAPE, v, {"shape": shape})


def transposed(v, perm):
    return registry.apply1(_TRANSPOSE, v, {"perm": tuple(perm)})


def aligned(v, rank):
    """A batched value with its per-example axes left-padded with 1s to `rank`."""
    s = v._data.shape
    if len(s) == rank + 1:
        return v
    return reshaped(v, s[:1] + (1,) * (rank + 1 - len(s)) + s[1:])


def materialised(v, b, size):
    """Every example's copy of an input (a broadcast view when it is not batched)."""
    return v if b else registry.apply1(_BROADCAST_TO, v, {"shape": (size,) + v._data.shape})


def with_param(op, vals, params, key, value):
    """The op on `vals` with one param replaced."""
    p = dict(params)
    p[key] = value
    return registry.apply(op, vals, p)


def merged(v, size):
    """A batched value with its batch axis folded into its next one."""
    s = v._data.shape
    return reshaped(v, (size * s[1],) + s[2:])


def unmerge(v, size):
    """The inverse of `merged`."""
    s = v._data.shape
    return reshaped(v, (size, s[0] // size) + s[1:])


def to_channels(v, size):
    """A batched (B, ..., C) value as (..., B * C): the batch in front of each channel block."""
    s = v._data.shape
    n = len(s)
    return reshaped(transposed(v, tuple(range(1, n - 1)) + (0, n - 1)), s[1:-1] + (size * s[-1],))


def from_channels(y, size):
    """(..., B * C) back to (B, ..., C)."""
    s = y._data.shape
    n = len(s)
    t = reshaped(y, s[:-1] + (size, s[-1] // size))
    return transposed(t, (n - 1,) + tuple(range(n - 1)) + (n,))


# -- the kinds -------------------------------------------------------------------------------------

def broadcast(op, vals, flags, params, size):
    # inputs broadcast from the right: batched ones get the batch axis in front of the others'
    if len(vals) == 1:
        return registry.apply1(op, vals[0], params)
    if len(vals) == 2:
        x, y = vals
        bx, by = flags
        rx = x._data.ndim - bx
        ry = y._data.ndim - by
        if bx and rx < ry:
            x = aligned(x, ry)
        elif by and ry < rx:
            y = aligned(y, rx)
        return registry.apply2(op, x, y, params)
    ranks = [v._data.ndim - b for v, b in zip(vals, flags)]
    rank = max(ranks)
    args = [aligned(v, rank) if b and r < rank else v for v, b, r in zip(vals, flags, ranks)]
    if len(args) == 2:
        return registry.apply2(op, args[0], args[1], params)
    return registry.apply(op, args, params)


def leading(op, vals, flags, params, size):
    # the op maps over leading axes and names its axes from the right
    return registry.apply(op, [materialised(v, b, size) for v, b in zip(vals, flags)], params)


def leading_broadcast(op, vals, flags, params, size):
    # as leading, for inputs of one core rank that broadcast their own batch axes: each is
    # given ones after the batch axis up to the largest rank, so the batch axes line up
    vals = [materialised(v, b, size) for v, b in zip(vals, flags)]
    rank = max(v._data.ndim for v in vals)
    vals = [v if v._data.ndim == rank else
            reshaped(v, v._data.shape[:1] + (1,) * (rank - v._data.ndim) + v._data.shape[1:])
            for v in vals]
    return registry.apply(op, vals, params)


def _shifted(axis):
    if isinstance(axis, int):
        return axis + 1 if axis >= 0 else axis
    return tuple(a + 1 if a >= 0 else a for a in axis)


def axis(op, vals, flags, params, size):
    p = dict(params)
    p["axis"] = _shifted(params["axis"])
    if len(vals) == 1:
        return registry.apply1(op, vals[0], p)
    return registry.apply(op, [materialised(v, b, size) for v, b in zip(vals, flags)], p)


def first(op, vals, flags, params, size):
    if any(flags[1:]):
        return None
    return registry.apply(op, vals, params)


def merge(op, vals, flags, params, size):
    # the op's own axis 0 is a batch axis: the map's batch folds into it
    args = [merged(materialised(v, b, size), size) for v, b in zip(vals, flags)]
    return unmerge(registry.apply(op, args, params), size)


def merge_first(op, vals, flags, params, size):
    """merge, for ops whose later inputs must be the same for every example."""
    if any(flags[1:]):
        return None
    return unmerge(registry.apply(op, [merged(vals[0], size)] + list(vals[1:]), params), size)


def channels(op, vals, flags, params, size):
    # per-channel parameters (a bias): shared, the op broadcasts them itself; per example, the
    # batch folds into the channels of every input
    if not any(flags[1:]):
        return registry.apply(op, vals, params)
    args = [to_channels(materialised(v, b, size), size) for v, b in zip(vals, flags)]
    return from_channels(registry.apply(op, args, params), size)


def lead(op, vals, flags, params, size):
    # the op's `lead` param counts the leading axes in front of the ones it works on
    if any(flags[1:]):
        return None
    return registry.apply2(op, vals[0], vals[1], dict(params, lead=params.get("lead", 0) + 1))


KINDS = {"broadcast": broadcast, "leading": leading, "leading_broadcast": leading_broadcast,
         "axis": axis, "first": first, "merge": merge, "channels": channels, "lead": lead}
assert set(KINDS) == set(registry.BATCH_KINDS)


def rule_of(op):
    """The batching rule of `op`, or None (the op then runs once per example)."""
    return op.batch if callable(op.batch) else KINDS.get(op.batch)
