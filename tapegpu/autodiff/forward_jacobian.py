"""Jacobians in forward mode: one forward sweep over a tape's entries pushes a batch of tangents.

`jacobian(..., mode='forward')` seeds each source with the identity basis
`eye(n).reshape((n,) + source.shape)` (in chunks, like the reverse sweep's), pushes it through
the recorded entries in recording order with the ops' JVP rules (`forward.push`), and reads the
target's tangent `(n,) + target.shape`: column j of the Jacobian is J e_j. The rules see only
each entry's declared saves (no recomputation, nothing extra kept), which is why a rule that
needs an input's rank saves its shape. `'auto'` picks forward mode when the sources have fewer
elements than the target, and when every entry on the path has a JVP rule.

`hessian(f, x)` is forward-over-reverse: the gradient computed under an outer tape, then its
forward-mode Jacobian over that tape (which holds both the forward and the backward ops).
"""
import math


from ..core import nest
from .. import ops
from . import sweep
from .forward import NoJVPError, has_jvp, push, zeros_on
from . import jacobian as reverse
from .jacobian import (Result, _basis, batch_arguments, batch_basis,
                       differentiable_result, jacobian_arguments, unconnected_batch)
from ..core.tensor import Tensor, Variable
from .recorder import UnconnectedGradients


def _chunk(tape, n, parallel_iterations, source, target=None):
    """Basis vectors per sweep: `parallel_iterations`, or as many as keep a few tangents of the
    widest tensor on the way from `source` to `target` (every recorded tensor without a
    target) within MEMORY_BUDGET."""
    if target is not None:
        width = reverse.widest(tape, [source._uid], target)
    else:
        width = 1
        for e in tape._entries:
            for s in e.in_shapes:
                width = max(width, math.prod(s))
    return reverse.rows_per_chunk(n, parallel_iterations, width, _value(source)._data.itemsize)


def _value(t):
    return t._value if isinstance(t, Variable) else t


def _float(t):
    return _value(t)._data.dtype.kind in "fcV"


def tangents(entries, seeds, targets):
    """Tangents of the ids `targets` given `seeds` {id: tangent}, pushed through the entries
    on a path from a seed to a target, in recording order. A tangent is dropped after its last
    use. Returns a list with None where a target does not depend on the seeds."""
    plan, _ = sweep.prune(entries, list(seeds), targets)
    plan.reverse()
    last = {}
    for i, e in enumerate(plan):
        for u in e.in_uids:
            last[u] = i
    keep = set(targets)
    ts = dict(seeds)
    segment = None  # the checkpointed segment restored last (tapes with a memory budget)
    for i, e in enumerate(plan):
        ins = [None if u is None else ts.get(u) for u in e.in_uids]
        if all(t is None for t in ins):
            continue
        if e.saved is None and getattr(e, "recompute", None) is not None:
            if segment is not None and segment is not e.recompute:
                segment.drop()  # segments come in recording order: that one is done
            segment = e.recompute
            segment.restore()
        if e.saved is None:
            raise RuntimeError(f"{e.op.name}: its saved values were already released; a "
                               "non-persistent tape can compute only one set of gradients")
        t = push(e.op, ins, e.saved, e.params, e.in_shapes)
        if t is not None:
            ts[e.out_uid] = t
        for u in e.in_uids:
            if u is not None and last.get(u) == i and u not in keep:
                ts.pop(u, None)
    if segment is not None:
        segment.drop()
    return [ts.get(u) for u in targets]


def supported(tape, sources, target):
    """Whether every entry between the sources and the target has a JVP rule."""
    uids = [s._uid for s in nest.flatten(sources)]
    plan, _ = sweep.prune(tape._entries, uids, [target._uid])
    return all(has_jvp(e.op) for e in plan)


def use_forward(tape, target, sources, mode, what):
    """Resolves `mode` ('auto', 'forward' or 'reverse') for one jacobian call."""
    if mode not in ("auto", "forward", "reverse"):
        raise ValueError(f"GradientTape.{what}: mode must be 'auto', 'forward' or 'reverse', "
                         f"got {mode!r}")
    if mode != "auto":
        return mode == "forward"
    flat = nest.flatten(sources)
    if not all(isinstance(t, (Tensor, Variable)) for t in flat + [target]):
        return False  # the reverse path reports what is wrong
    n_in = sum(_value(s).size for s in flat if _float(s))
    if what == "batch_jacobian":
        n_in = n_in // max(_value(target).shape[0], 1) if _value(target).ndim else n_in
        n_out = math.prod(_value(target).shape[1:])
    else:
        n_out = _value(target).size
    return n_in < n_out and supported(tape, sources, target)


def jacobian(tape, target, sources, unconnected, parallel_iterations):
    """`tape.jacobian(..., mode='forward')`: target.shape + source.shape per source."""
    flat, uids, y, parallel_iterations = jacobian_arguments(
        tape, target, sources, parallel_iterations, True, "GradientTape.jacobian")
    tape._begin("jacobian")
    record = differentiable_result()
    out = []
    for s, u in zip(flat, uids):
        v = _value(s)
        n = v.size
        # column j of the Jacobian is J e_j: a chunk (k,) + y.shape fills columns start...
        result = Result((y.size, n), record)

        def place(array, start, part):
            array[:, start:start + part.shape[0]] = part.reshape(part.shape[0], y.size).T

        if _float(target) and _float(s):
            k = _chunk(tape, n, parallel_iterations, s, target) if n else 0
            for start in range(0, n, k) if n else [0]:  # an empty source: one empty chunk
                t = tangents(tape._entries, {u: _basis(v, start, min(k, n - start), n)},
                             [target._uid])[0]
                result.add(start, t, place)
                if t is None:
                    break
        full = result.value(lambda parts: _columns_last(
            parts[0] if len(parts) == 1 else ops.concat(parts, axis=0), v.shape))
        if full is not None:
            full = ops.reshape(full, y.shape + v.shape)
        elif _float(s) and unconnected is UnconnectedGradients.ZERO:
            full = zeros_on(v, y.shape + v.shape)  # as the reverse path does
        out.append(full)
    tape._finish()
    return nest.pack_sequence_as(sources, out)


def _columns_last(t, x_shape):
    """(n,) + shape (one tangent per basis vector, i.e. per column) -> shape + x_shape."""
    nd = t.ndim
    t = ops.transpose(t, tuple(range(1, nd)) + (0,))
    return ops.reshape(t, t.shape[:-1] + tuple(x_shape))


def batch_jacobian(tape, target, source, unconnected, parallel_iterations):
    """`tape.batch_jacobian(..., mode='forward')`: rows are independent, so one basis vector per
    source coordinate, repeated over the batch, gives that column for every row at once."""
    y, x, uid, b, parallel_iterations = batch_arguments(tape, target, source,
                                                        parallel_iterations, True)
    m = math.prod(x.shape[1:])
    my = math.prod(y.shape[1:])
    result = Result((b, my, m), differentiable_result())

    def place(array, start, part):  # part (k, b) + y.shape[1:] -> array[:, :, start:start + k]
        k = part.shape[0]
        array[:, :, start:start + k] = part.reshape(k, b, my).transpose(1, 2, 0)

    if _float(target) and _float(source):
        step = _chunk(tape, m, parallel_iterations, source, target) if m else 0
        for start in range(0, m, step) if m else [0]:
            k = min(step, m - start)
            seed = batch_basis(x, start, k, b, x.shape[1:])
            t = tangents(tape._entries, {uid: seed}, [target._uid])[0]
            result.add(start, t, place)
            if t is None:
                break
    tape._finish()
    if not _float(source):
        return None
    full = result.value(lambda parts: _columns_last(
        parts[0] if len(parts) == 1 else ops.concat(parts, axis=0), x.shape[1:]))
    if full is None:
        return unconnected_batch(y, x, b, unconnected)
    return ops.reshape(full, (b,) + y.shape[1:] + x.shape[1:])


def hessian_blocks(tape, xs, grads):
    """`H[i][j]` (shape `x_i.shape + x_j.shape`) from the gradients `grads` of a scalar with
    respect to `xs`, computed under the persistent `tape`: column block j is the basis of x_j
    pushed through the forward and the backward ops at once (forward over reverse)."""
    targets = [g._uid for g in grads if g is not None]
    cols = []
    for x in xs:
        v = _value(x)
        n = v.size
        k = _chunk(tape, n, None, x)
        parts = [tangents(tape._entries, {x._uid: _basis(v, s, min(k, n - s), n)}, targets)
                 for s in range(0, n, k)]
        cols.append([None if parts[0][i] is None else
                     ops.concat([p[i] for p in parts], axis=0) if len(parts) > 1 else
                     parts[0][i] for i in range(len(targets))])
    rows = []
    it = iter(range(len(targets)))
    for g, xi in zip(grads, xs):
        i = None if g is None else next(it)
        row = []
        for j, xj in enumerate(xs):
            t = None if i is None else cols[j][i]
            shape = _value(xi).shape + _value(xj).shape
            row.append(zeros_on(_value(xi), shape) if t is None else
                       _columns_last(t, _value(xj).shape))
        rows.append(row)
    return rows
