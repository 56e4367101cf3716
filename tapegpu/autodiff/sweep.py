"""The reverse sweep: from seeded cotangents back to the sources, over recorded entries.

Every cotangent in one sweep carries the same leading `batch_shape` (empty for `gradient`, one
axis for `jacobian`). Rules may return cotangents in the op's broadcast shape; `sum_to` reduces
them to `batch_shape + input.shape` here, the one place where un-broadcasting happens.

Two modes. When a tape is recording while the sweep runs (higher-order gradients), rules run on
tensors, so the sweep's own ops are recorded. Otherwise nothing needs the VJP's graph and the
sweep runs on the backend's arrays: an op's `fused_vjp` (one array-level call) when it has one,
else its tensor rule on wrapped arrays. Both modes give identical results.
"""
import sys

import numpy as np

from .. import ops
from ..ops import TENSOR_OPS
from ..ops.namespace import TensorOps, array_ops
from ..ops.registry import SAVE_XY, passthrough
from ..core import profiler
from ..core.options import options
from ..core.profiler import _active as _profilers
from ..core.tensor import Tensor, _thread
from .recorder import saved_arrays


class _UnrecordedOps(TensorOps):
    """tapegpu's functions on tensors while no tape records the sweep (only recorders that
    say `records = False` are active, such as tg.vectorized_map's marker): rules may use what
    the forward kept instead of recomputing it differentiably."""
    records = False


UNRECORDED_OPS = _UnrecordedOps(ops)


def reachable(entries, sources):
    """The entries that depend on a source, in recording order, and the ids they reach."""
    reach = set(sources)
    isdisjoint = reach.isdisjoint
    add = reach.add
    forward = []
    append = forward.append
    for e in entries:
        if not isdisjoint(e.in_uids):
            add(e.out_uid)
            append(e)
    return forward, reach


def prune(entries, sources, seeds):
    """The entries on a path from a source to a seeded tensor, in reverse recording order."""
    forward, reach = reachable(entries, sources)
    needed = set(seeds)
    plan = []
    for e in reversed(forward):
        if e.out_uid in needed:
            plan.append(e)
            needed.update(u for u in e.in_uids if u in reach)
    return plan, reach


def backward(entries, seeds, sources, batch_ndim=0, release=False, ledger=None, reach=None):
    """Cotangents of `sources` (a list of tensor ids) given `seeds` [(tensor id, cotangent)].

    Visits only entries on a path from a source to a seed: those that depend on a source
    (`reachable`) and whose output has a cotangent when the reverse walk gets to them.
    Returns {source id: Tensor or None}. With `release`, each entry's saved values are dropped
    right after its rule ran (non-persistent tapes); a cotangent is dropped as soon as its
    producer's rule has consumed it. A `memory.Ledger` records the peak bytes of saved values
    plus cotangents (array mode). `reach`, when the caller knows that every entry depends on a
    source, is the set of ids that do (the tape's tracked ids): it saves the `reachable` pass.
    """
    if not seeds:
        return {u: None for u in sources}
    dev = seeds[0][1]._dev
    if _profilers:
        with profiler.backward_phase():
            return _backward(entries, seeds, sources, batch_ndim, release, ledger, dev, reach)
    return _backward(entries, seeds, sources, batch_ndim, release, ledger, dev, reach)


def _backward(entries, seeds, sources, batch_ndim, release, ledger, dev, reach):
    forward, reach = (entries, reach) if reach is not None else reachable(entries, sources)
    if options.array_sweep and not _thread.recorders:
        # rules meet the same domain edges as the ops' forwards (log's g / x at 0): as there,
        # numpy's warnings about inf and nan are not raised from tapegpu's lines
        with np.errstate(divide="ignore", invalid="ignore"):
            grads = _sweep_arrays(forward, reach, seeds, sources, batch_ndim, release, dev,
                                  ledger)
        return {u: (None if a is None else Tensor(_array(a), dev)) for u, a in grads.items()}
    recorded = any(getattr(r, "records", True) for r in _thread.recorders)
    return _sweep_tensors(forward, reach, seeds, sources, batch_ndim, release,
                          TENSOR_OPS if recorded else UNRECORDED_OPS)


def _array(a):
    """numpy gives 0-d results as scalars: gradients are arrays."""
    return np.asarray(a) if isinstance(a, np.generic) else a


def _sweep_tensors(forward, reach, seeds, sources, batch_ndim, release, ns=TENSOR_OPS):
    keep = set(sources)
    add = ops.add
    grads = {}
    for u, g in seeds:
        prev = grads.get(u)
        grads[u] = g if prev is None else add(prev, g)
    for e in reversed(forward):
        out = e.out_uid
        g = grads.pop(out, None) if out not in keep else grads.get(out)
        if g is None:
            continue
        if e.saved is None and e.recompute is not None:
            raise RuntimeError(
                f"{e.op.name}: its saved values were dropped under the tape's memory_budget, and "
                "a tape is recording this sweep (a higher-order gradient); recomputed values "
                "would not be connected to it. Use a tape without memory_budget for Hessians")
        if _profilers:
            with profiler.muted():
                cts = vjp(e, g, reach, batch_ndim, ns)
            profiler.on_vjp(e, g._data, [c._data for c in cts if c is not None])
        else:
            cts = vjp(e, g, reach, batch_ndim, ns)
        if release:
            e.saved = None
        for u, c, shape in zip(e.in_uids, cts, e.in_shapes):
            if c is None or u not in reach:
                continue
            if batch_ndim or c._data.shape != shape:
                c = sum_to(c, batch_ndim, shape)
            prev = grads.get(u)
            grads[u] = c if prev is None else add(prev, c)
    return {u: grads.get(u) for u in sources}


def _sweep_arrays(forward, reach, seeds, sources, batch_ndim, release, dev, ledger):
    """The same walk on raw arrays: no tensors and no dispatch; each op's rule runs with the
    array namespace, or the backend's VJP kernel where it has one."""
    keep = set(sources)
    xp = dev.xp
    track = ledger is not None
    if track:
        for e in forward:
            for a in saved_arrays(e):
                ledger.hold(a)
    key = (dev, bool(batch_ndim))
    watched = track or bool(_profilers)
    fast = not (batch_ndim or track)  # cotangents need neither un-batching nor a ledger
    restored = []
    ns = array_ops(dev, TENSOR_OPS)
    steps = {}  # op -> how this sweep runs its VJP (`_how`)
    grads = {}
    get = grads.get
    pop = grads.pop
    for u, g in seeds:
        prev = get(u)
        grads[u] = g._data if prev is None else prev + g._data
        if track:
            ledger.hold(grads[u])
    for e in reversed(forward):
        out = e.out_uid
        g = get(out) if out in keep else pop(out, None)
        if g is None:
            continue
        if e.saved is None:
            _restore(e, restored, ledger)
        op = e.op
        how = steps.get(op)
        if how is None:
            how = steps[op] = _how(op, key, dev, batch_ndim)
        kind, step, r0, r1 = how
        # the common rule shapes run here, without the step's call (elementwise chains): `c` is
        # the first input's cotangent, `c1` the second's
        c1 = None
        if kind is _UNARY:
            p = e.params
            x = e.saved[0]._data
            c = r0(ns, g, x, **p) if p else r0(ns, g, x)
        elif kind is _ADD:
            u0, u1 = e.in_uids
            c = g if u0 in reach else None
            if u1 in reach:
                c1 = g
        elif kind is _BINARY:
            u0, u1 = e.in_uids
            s = e.saved
            x = s[0]._data
            y = s[1]._data
            p = e.params
            c = (r0(ns, g, x, y, **p) if p else r0(ns, g, x, y)) if u0 in reach else None
            if u1 in reach:
                c1 = r1(ns, g, x, y, **p) if p else r1(ns, g, x, y)
        else:
            cts = step(g, e, reach)
            c = cts[0]
            if len(cts) > 2 or len(cts) == 2 and cts[1] is not None:
                c1 = cts  # (more than one cotangent: the general loop below)
        if kind is not _STEP:
            cts = None  # built below only where needed
        if watched:
            cts = cts or ((c,) if kind is _UNARY else (c, c1))
            _account(e, g, cts, out in keep, release, ledger)
        if release:
            e.saved = None
        if c1 is None and c is not None and fast:
            u = e.in_uids[0]  # a lone cotangent, the first for its input, is stored as it is
            if u not in grads and c.shape == e.in_shapes[0]:
                grads[u] = c
                continue
        if cts is None:
            cts = (c,) if kind is _UNARY else (c, c1)
        for u, c, shape in zip(e.in_uids, cts, e.in_shapes):
            if c is None:
                continue
            if batch_ndim or c.shape != shape:
                c = sum_to_array(xp, c, batch_ndim, shape, dev)
            prev = get(u)
            if prev is None:
                grads[u] = c
                if track:
                    ledger.hold(c)
            elif options.in_place and _owned(prev) and prev.shape == c.shape and prev.dtype == c.dtype:
                prev += c  # nobody else holds this buffer: accumulate in place
            else:
                grads[u] = prev + c
                if track:
                    ledger.drop(prev)
                    ledger.hold(grads[u])
    if not release:
        for seg in restored:
            seg.drop()  # a persistent tape keeps to its budget between sweeps
    return {u: get(u) for u in sources}


def _restore(e, restored, ledger):
    """Gives a checkpointed entry its saved values back (by recomputing its segment)."""
    if e.recompute is None:
        raise RuntimeError(f"{e.op.name}: its saved values were already released; a "
                           "non-persistent tape can compute only one set of gradients")
    e.recompute.restore()
    restored.append(e.recompute)
    if ledger is not None:
        for r in e.recompute.entries:
            for a in saved_arrays(r):
                ledger.hold(a)


def _account(e, g, cts, kept, release, ledger):
    """Profiler and memory ledger bookkeeping after one entry's VJP."""
    if _profilers:
        profiler.on_vjp(e, g, cts)
    if ledger is not None:
        if not kept:
            ledger.drop(g)
        if release:
            for a in saved_arrays(e):
                ledger.drop(a)


def _owned(a):
    """Whether only the sweep holds `a`'s buffer: it owns its memory (not a view), is writeable,
    and its references are the grads dict's, the caller's local and this call's own."""
    return getattr(a, "base", 0) is None and getattr(a.flags, "writeable", True) and \
        sys.getrefcount(a) <= _OWNED_REFS


def _refs_inside_owned():
    """sys.getrefcount inside `_owned` of a buffer that only a dict holds, called as the sweep
    calls it: 4 on CPython 3.11 and later; 3.10 keeps one more on the caller's stack."""
    grads = {0: bytearray(1)}
    prev = grads.get(0)
    return _probe(prev)


def _probe(a):
    return sys.getrefcount(a)


_OWNED_REFS = _refs_inside_owned()


# -- array-level steps: each op's VJP rule on one device's arrays ---------------------------------

_UNARY, _ADD, _BINARY, _STEP = "unary", "add", "binary", "step"


def _how(op, key, dev, batch_ndim):
    """(kind, step, rule0, rule1): how a sweep runs `op`'s VJP. `step` is its array step
    (built once per op, device and batchedness: `op.steps`); the loop calls the rules itself
    for the common shapes, when no kernel and no launch counting is involved: one input and one
    saved tensor (_UNARY), g handed to both inputs (_ADD), two rules of the two saved inputs
    (_BINARY)."""
    step = op.steps.get(key)
    if step is None:
        step = op.steps[key] = _array_step(op, dev, batch_ndim)
    if op.tensor_rule or (batch_ndim and not op.batched) or dev.name in op.vjp_kernels or \
            dev.counts_launches or op.variadic:
        return _STEP, step, None, None
    rules = op.vjp if type(op.vjp) is tuple else (op.vjp,)
    plan = op.save_plan
    if len(rules) == 1 and len(op.args) == 1 and rules[0] is not passthrough and \
            len(plan) == 1 and plan[0][0] in (0, 1):
        return _UNARY, step, rules[0], None
    if len(rules) == 2 and len(op.args) == 2:
        if rules[0] is passthrough and rules[1] is passthrough:
            return _ADD, step, None, None
        if plan is SAVE_XY and None not in rules and passthrough not in rules:
            return _BINARY, step, rules[0], rules[1]
    return _STEP, step, None, None


def _array_step(op, dev, batch_ndim):
    """`step(g, entry, reach) -> cotangents`, one array (or None) per input of `op`: the op's
    VJP rule run on the backend's arrays (`ops` the array namespace), by the backend's VJP
    kernel where it has one. Inputs not in `reach` get None. Built once per op, device and
    batchedness (`op.steps`)."""
    if op.tensor_rule or (batch_ndim and not op.batched):
        return _tensor_step(dev, batch_ndim)
    step = _rule_step(op, array_ops(dev, TENSOR_OPS), _reader(op.save_plan))
    kernel = op.vjp_kernels.get(dev.name) if op.vjp_kernels else None
    if kernel is not None:
        return _kernel_step(op, kernel, step)
    if dev.counts_launches:
        return _counting(step, dev, op.name + ".vjp")
    return step


def _reader(plan):
    """`read(saved) -> tuple of arrays` for an op's save plan (tensors unwrapped, shapes
    kept)."""
    if all(kind in (0, 1, 4) for kind, _ in plan):
        if len(plan) == 1:
            return lambda saved: (saved[0]._data,)
        if len(plan) == 2:
            return lambda saved: (saved[0]._data, saved[1]._data)
    return lambda saved: tuple([s._data if type(s) is Tensor else s for s in saved])


def _rule_step(op, ns, read):
    """The step of a rule: one callable (the cotangents of all inputs) or a tuple of callables
    (one per input: None for none, `passthrough` for g itself, which is not called)."""
    rule = op.vjp
    if type(rule) is not tuple:
        if len(op.args) == 1 and not op.variadic:
            rule = (rule,)
        else:
            def step(g, e, reach):
                cts = rule(ns, g, *read(e.saved), **e.params)
                return [c if u in reach else None for c, u in zip(cts, e.in_uids)]
            return step
    if len(rule) == 1:
        return _unary_step(rule[0], ns, read)
    if len(rule) == 2:
        return _binary_step(rule, ns, read)

    def step(g, e, reach):
        a = read(e.saved) if e.saved else ()
        p = e.params
        return [(g if r is passthrough else r(ns, g, *a, **p))
                if (r is not None and u in reach) else None
                for r, u in zip(rule, e.in_uids)]
    return step


def _unary_step(r, ns, read):
    # the hot path of elementwise code: one call of the rule, no argument packing
    if r is passthrough:
        return lambda g, e, reach: (g,)

    def step(g, e, reach):
        p = e.params
        return (r(ns, g, *read(e.saved), **p) if p else r(ns, g, *read(e.saved)),)
    return step


def _binary_step(rule, ns, read):
    r0, r1 = rule
    if r0 is passthrough and r1 is passthrough:  # add
        def step(g, e, reach):
            u0, u1 = e.in_uids
            return (g if u0 in reach else None, g if u1 in reach else None)
        return step

    if r0 is not None and r1 is not None and passthrough not in rule:  # multiply, divide...
        def step(g, e, reach):
            u0, u1 = e.in_uids
            a = read(e.saved)
            p = e.params
            if p:
                return (r0(ns, g, *a, **p) if u0 in reach else None,
                        r1(ns, g, *a, **p) if u1 in reach else None)
            return (r0(ns, g, *a) if u0 in reach else None,
                    r1(ns, g, *a) if u1 in reach else None)
        return step

    def step(g, e, reach):  # subtract, where: a rule may be None or passthrough
        u0, u1 = e.in_uids
        a = read(e.saved) if e.saved else ()
        p = e.params
        return tuple((g if r is passthrough else r(ns, g, *a, **p))
                     if (r is not None and u in reach) else None
                     for r, u in ((r0, u0), (r1, u1)))
    return step


def _kernel_step(op, kernel, rule_step):
    """A VJP kernel's step; where it returns NotImplemented (dtypes or params it does not
    cover, batched cotangents), the rule's. Kernels count their own launches."""
    read = _reader(op.save_plan)
    one = len(op.args) == 1 and not op.variadic

    def step(g, e, reach):
        cts = kernel(g, *read(e.saved), **e.params)
        if cts is NotImplemented:
            return rule_step(g, e, reach)
        if one:
            return (cts,)
        return [c if u in reach else None for c, u in zip(cts, e.in_uids)]
    return step


def _counting(step, dev, name):
    """`step`, counting one library launch per cotangent it computed (not for g itself or its
    views) when the rule launched nothing that counted itself."""
    launches = dev.launches

    def counted(g, e, reach):
        before = sum(launches.values())
        cts = step(g, e, reach)
        if sum(launches.values()) == before:
            for c in cts:
                if c is not None and c is not g and getattr(c, "base", None) is not g:
                    launches[name] += 1
        return cts
    return counted


def _tensor_step(dev, batch_ndim):
    """A rule on tensors wrapping the arrays (rules of user functions, and rules that take no
    batch axes under a batched sweep)."""
    def step(g, e, reach):
        if _profilers:
            with profiler.muted():
                cts = vjp(e, Tensor(g, dev), reach, batch_ndim)
        else:
            cts = vjp(e, Tensor(g, dev), reach, batch_ndim)
        return [None if c is None or u not in reach else c._data
                for c, u in zip(cts, e.in_uids)]
    return step


def vjp(e, g, reach, batch_ndim, ns=TENSOR_OPS):
    """The input cotangents of one entry as tensors (None where an input needs none)."""
    op = e.op
    if batch_ndim and not op.batched:
        return _vjp_unbatched(e, g, reach, batch_ndim)
    rule = op.vjp
    saved = e.saved
    if saved is None:
        raise RuntimeError(f"{op.name}: its saved values were already released; a non-persistent "
                           "tape can compute only one set of gradients")
    params = e.params
    if type(rule) is tuple:
        return [(g if r is passthrough else r(ns, g, *saved, **params))
                if (r is not None and u in reach) else None
                for r, u in zip(rule, e.in_uids)]
    if len(e.in_uids) == 1 and not op.variadic:
        return (rule(ns, g, *saved, **params),)
    return rule(ns, g, *saved, **params)


def _vjp_unbatched(e, g, reach, batch_ndim):
    """For rules that accept no batch axes (custom gradients): one call per batch element."""
    batch = g.shape[:batch_ndim]
    flat = ops.reshape(g, (-1,) + g.shape[batch_ndim:])
    rows = [vjp(e, flat[i], reach, 0) for i in range(flat.shape[0])]
    out = []
    for k, shape in enumerate(e.in_shapes):
        cs = [r[k] for r in rows]
        if any(c is None for c in cs):
            out.append(None)
            continue
        cs = [sum_to(c, 0, shape) for c in cs]
        out.append(ops.reshape(ops.stack(cs), batch + tuple(shape)))
    return out


def _reduction_axes(cs, batch_ndim, shape):
    """Axes of a cotangent of shape `cs` to sum so that it becomes `batch + shape`."""
    lead = len(cs) - batch_ndim - len(shape)
    axes = list(range(batch_ndim, batch_ndim + lead))
    for i, s in enumerate(shape):
        if s == 1 and cs[batch_ndim + lead + i] != 1:
            axes.append(batch_ndim + lead + i)
    return lead, tuple(axes)


def sum_to(c, batch_ndim, shape):
    """Sums a cotangent of shape `batch + broadcast(shape)` down to `batch + shape`."""
    cs = c.shape
    target = cs[:batch_ndim] + tuple(shape)
    if cs == target:
        return c
    lead, axes = _reduction_axes(cs, batch_ndim, shape)
    if lead > 0 and len(axes) == lead:  # only added leading axes: one sum removes them
        c = ops.reduce_sum(c, axis=axes)
    elif lead >= 0:
        if axes:
            c = ops.reduce_sum(c, axis=axes, keepdims=True)
        if lead:
            c = ops.reshape(c, c.shape[:batch_ndim] + c.shape[batch_ndim + lead:])
    if c.shape != target:
        c = ops.broadcast_to(c, target)
    return c


def sum_to_array(xp, c, batch_ndim, shape, dev=None):
    """`sum_to` on a raw array (one un-broadcast kernel on backends with kernels)."""
    cs = c.shape
    target = cs[:batch_ndim] + tuple(shape)
    if cs == target:
        return c
    lead, axes = _reduction_axes(cs, batch_ndim, shape)
    if dev is not None and dev.kernels is not None and axes and lead >= 0 and \
            c.dtype.kind == "f" and c.dtype.itemsize in (4, 8):
        return dev.kernels.unbroadcast(c, batch_ndim, shape)
    if lead >= 0 and axes:
        c = c.sum(axis=axes, keepdims=True)
        if lead:
            c = c.reshape(c.shape[:batch_ndim] + c.shape[batch_ndim + lead:])
    elif lead > 0:
        c = c.reshape(c.shape[:batch_ndim] + c.shape[batch_ndim + lead:])
    if c.shape != target:
        c = xp.broadcast_to(c, target)
    return c
