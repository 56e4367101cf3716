"""Jacobians by batched VJPs: one backward sweep whose cotangents carry a leading batch axis.

`jacobian` seeds the sweep with the identity basis `eye(n).reshape((n,) + y.shape)`, in chunks
whose cotangents fit `MEMORY_BUDGET`; `batch_jacobian` uses the independence of rows to seed
`(m, b) + y.shape[1:]` instead of `(b*m, b) + ...`. The loop fallback
(`experimental_use_pfor=False`) runs one sweep per target element.
"""
import math


from ..core import nest
from .. import ops
from . import sweep
from ..core.tensor import Tensor, Variable
from .recorder import UnconnectedGradients, source_uid

MEMORY_BUDGET = 256 * 2**20  # bytes of cotangents one chunk may hold at its widest


def _chunk(tape, n, parallel_iterations, sources, itemsize, reach):
    """Rows per sweep: `parallel_iterations`, or as many as keep the widest cotangent row
    (over the tensors that depend on a source) times a few live ones within MEMORY_BUDGET."""
    if parallel_iterations:
        return max(1, min(n, int(parallel_iterations)))
    if reach is None:
        forward, reach = sweep.reachable(tape._entries, sources)
    else:
        forward = tape._entries
    widest = 1
    for e in forward:
        for u, s in zip(e.in_uids, e.in_shapes):
            if u in reach:
                widest = max(widest, math.prod(s))
    return max(1, min(n, MEMORY_BUDGET // (4 * itemsize * widest)))


def _sources(sources):
    flat = nest.flatten(sources)
    return flat, [source_uid(s, i) for i, s in enumerate(flat)]


def _value(t):
    return t._value if isinstance(t, Variable) else t


def _basis(target, start, k, n):
    """Rows start..start+k of the identity, shaped (k,) + target.shape."""
    xp = target._dev.xp
    seed = xp.zeros((k, n), dtype=target._data.dtype)
    seed[xp.arange(k), start + xp.arange(k)] = 1
    return Tensor(seed.reshape((k,) + target.shape), target._dev)


def batch_basis(like, start, k, b, inner_shape):
    """Rows start..start+k of the identity over `inner_shape`, repeated for each of `b`
    independent rows: shape (k, b) + inner_shape (batch_jacobian's seeds, both modes)."""
    xp = like._dev.xp
    m = math.prod(inner_shape)
    e = xp.zeros((k, 1, m), dtype=like._data.dtype)
    e[xp.arange(k), 0, start + xp.arange(k)] = 1
    return Tensor(xp.broadcast_to(e, (k, b, m)).reshape((k, b) + tuple(inner_shape)), like._dev)


def jacobian(tape, target, sources, unconnected, parallel_iterations, use_pfor):
    tape._begin("jacobian")
    flat, uids = _sources(sources)
    y = _value(target)
    n = y.size
    chunks = {u: [] for u in uids}
    if y._data.dtype.kind in "fc" and n:
        reach = tape._reach(uids)
        if use_pfor:
            k = _chunk(tape, n, parallel_iterations, uids, y._data.itemsize, reach)
            for start in range(0, n, k):
                kk = min(k, n - start)
                last = start + kk >= n
                got = sweep.backward(tape._entries, [(target._uid, _basis(y, start, kk, n))],
                                     uids, 1, release=last and not tape._persistent,
                                     reach=reach)
                for u in uids:
                    chunks[u].append(got[u])
        else:
            for i in range(n):  # plain gradients, no batch axis: the reference for the above
                seed = Tensor(_basis(y, i, 1, n)._data.reshape(y.shape), y._dev)
                got = sweep.backward(tape._entries, [(target._uid, seed)], uids, 0,
                                     release=i == n - 1 and not tape._persistent, reach=reach)
                for u, s in zip(uids, flat):
                    g = got[u]
                    chunks[u].append(None if g is None else ops.reshape(g, (1,) + tuple(s.shape)))
    tape._finish()
    out = []
    for u, s in zip(uids, flat):
        v = _value(s)
        parts = chunks[u]  # connectivity is structural: every chunk is None or none is
        if v._data.dtype.kind not in "fc":
            out.append(None)
        elif not parts or parts[0] is None:
            out.append(ops.zeros(y.shape + v.shape, dtype=v.dtype)
                       if unconnected is UnconnectedGradients.ZERO else None)
        else:
            full = parts[0] if len(parts) == 1 else ops.concat(parts, axis=0)
            out.append(ops.reshape(full, y.shape + v.shape))
    return nest.pack_sequence_as(sources, out)


def batch_arguments(tape, target, source):
    """(target value, source value, source id, batch size), checked: both share axis 0."""
    tape._begin("batch_jacobian")
    y = _value(target)
    x = _value(source)
    uid = source_uid(source, 0)
    if y.ndim < 1 or x.ndim < 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"batch_jacobian: target {y.shape} and source {x.shape} must share "
                         "their first (batch) dimension")
    return y, x, uid, y.shape[0]


def batch_jacobian(tape, target, source, unconnected, parallel_iterations, use_pfor):
    y, x, uid, b = batch_arguments(tape, target, source)
    m = math.prod(y.shape[1:])
    parts = []
    if y._data.dtype.kind in "fc" and x._data.dtype.kind in "fc" and m and b:
        reach = tape._reach([uid])
        step = _chunk(tape, m, parallel_iterations, [uid], y._data.itemsize, reach) \
            if use_pfor else 1
        for start in range(0, m, step):
            k = min(step, m - start)
            # rows are independent, so one basis vector per output coordinate serves them all
            seed = batch_basis(y, start, k, b, y.shape[1:])
            got = sweep.backward(tape._entries, [(target._uid, seed)], [uid], 1,
                                 release=start + k >= m and not tape._persistent,
                                 reach=reach)[uid]
            parts.append(got)
    tape._finish()
    if x._data.dtype.kind not in "fc":
        return None
    if not parts or parts[0] is None:
        return ops.zeros((b,) + y.shape[1:] + x.shape[1:], dtype=x.dtype) \
            if unconnected is UnconnectedGradients.ZERO else None
    full = parts[0] if len(parts) == 1 else ops.concat(parts, axis=0)  # (m, b) + x.shape[1:]
    full = ops.transpose(full, (1, 0) + tuple(range(2, full.ndim)))
    return ops.reshape(full, (b,) + y.shape[1:] + x.shape[1:])
