"""The reverse sweep: from seeded cotangents back to the sources, over recorded entries.

Every cotangent in one sweep carries the same leading `batch_shape` (empty for `gradient`, one
axis for `jacobian`). Rules may return cotangents in the op's broadcast shape; `sum_to` reduces
them to `batch_shape + input.shape` here, the one place where un-broadcasting happens.

One loop (`_sweep`) walks the entries in reverse and calls each op's step one way, `step(g,
entry, reach) -> cotangents`; a mode supplies the steps and the values. When a tape is recording
while the sweep runs (higher-order gradients), `_TensorMode`: rules run on tensors, so the
sweep's own ops are recorded. Otherwise nothing needs the VJP's graph and `_ArrayMode` runs on
the backend's arrays: each rule with the array namespace, or the backend's VJP kernel where it
has one. Both modes give identical results. The switches `options.array_sweep` and
`options.in_place` (core/options.py) turn the array mode and in-place accumulation off.
"""
import sys

import numpy as np

from .. import ops
from ..ops import TENSOR_OPS
from ..ops.kernels import cpu_sum
from ..ops.namespace import TensorOps, array_ops
from ..ops.registry import apply, passthrough
from ..core import profiler
from ..core.options import options
from ..core.quiet import quiet_enter, quiet_exit
from ..core.profiler import _active as _profilers
from ..core.tensor import Tensor, _thread
from .recorder import Recorder, saved_arrays


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
        token = quiet_enter()
        try:
            grads = _sweep(forward, reach, seeds, sources, batch_ndim, release,
                           _ArrayMode(dev, batch_ndim, ledger))
        finally:
            quiet_exit(token)
        return {u: (None if a is None else Tensor(_array(a), dev)) for u, a in grads.items()}
    recorded = any(getattr(r, "records", True) for r in _thread.recorders)
    return _sweep(forward, reach, seeds, sources, batch_ndim, release,
                  _TensorMode(TENSOR_OPS if recorded else UNRECORDED_OPS, batch_ndim))


def _array(a):
    """numpy gives 0-d results as scalars: gradients are arrays."""
    return np.asarray(a) if isinstance(a, np.generic) else a


def _sweep(forward, reach, seeds, sources, batch_ndim, release, mode):
    """The reverse walk, one way for both modes: each entry whose output has a cotangent runs
    its op's step (`mode.step(op)`, built once per op), and each input's cotangent is summed to the input's shape (`sum_to`) and
    accumulated (in place into a buffer only the sweep holds, in array mode)."""
    keep = set(sources)
    ns = mode.ns
    add = mode.add
    in_place = mode.in_place
    ledger = mode.ledger
    watched = mode.watched
    steps = {}  # op -> (its step in this sweep,) + its shape (_unary_step, _binary_step)
    mode.begin(forward)
    grads = {}
    get = grads.get
    pop = grads.pop
    for u, g in seeds:
        g = mode.value(g)
        prev = get(u)
        grads[u] = g if prev is None else add(prev, g)
        if ledger is not None:
            ledger.hold(grads[u])
    fast = not batch_ndim and ledger is None  # cotangents need no un-batching, no ledger
    for e in reversed(forward):
        out = e.out_uid
        g = get(out) if out in keep else pop(out, None)
        if g is None:
            continue
        if e.saved is None:
            mode.restore(e)
        op = e.op
        how = steps.get(op)
        if how is None:
            step = mode.step(op)
            how = steps[op] = (step,) + getattr(step, "shape", _CALLED)
        step, kind, r0, r1, rns = how
        # the elementwise rule shapes run here, without the step's call: `c` is the first
        # input's cotangent, `c1` the second's; other steps are called (`cts`, all inputs)
        c1 = cts = None
        if kind is _UNARY:
            p = e.params
            x = e.saved[0]._data
            c = r0(rns, g, x, **p) if p else r0(rns, g, x)
        elif kind is _ADD:
            u0, u1 = e.in_uids
            c = g if u0 in reach else None
            if u1 in reach:
                c1 = g
        elif kind is _BINARY:  # both inputs saved
            u0, u1 = e.in_uids
            s = e.saved
            x = s[0]._data
            y = s[1]._data
            p = e.params
            c = (r0(rns, g, x, y, **p) if p else r0(rns, g, x, y)) if u0 in reach else None
            if u1 in reach:
                c1 = r1(rns, g, x, y, **p) if p else r1(rns, g, x, y)
        else:
            cts = step(g, e, reach)
            c = cts[0]
            if len(cts) > 2 or len(cts) == 2 and cts[1] is not None:
                c1 = cts  # more than one cotangent: the general loop below
        if watched:
            mode.account(e, g, cts or ((c,) if kind is _UNARY else (c, c1)), out in keep,
                         release)
        if release:
            e.saved = None
        if c1 is None and c is not None and fast:
            # (elementwise chains, constants as second operands) a lone cotangent, the first
            # for its input and of its shape, is stored as it is
            u = e.in_uids[0]
            if u not in grads and (c._data.shape if type(c) is Tensor else c.shape) == \
                    e.in_shapes[0]:
                grads[u] = c
                continue
        if cts is None:
            cts = (c,) if kind is _UNARY else (c, c1)
        for u, c, shape in zip(e.in_uids, cts, e.in_shapes):
            if c is None or u not in reach:
                continue
            if batch_ndim or (c._data.shape if type(c) is Tensor else c.shape) != shape:
                c = sum_to(ns, c, batch_ndim, shape)
            prev = get(u)
            if prev is None:
                grads[u] = c
                if ledger is not None:
                    ledger.hold(c)
            elif in_place and _owned(prev) and prev.shape == c.shape and prev.dtype == c.dtype:
                prev += c  # nobody else holds this buffer: accumulate in place
            else:
                grads[u] = add(prev, c)
                if ledger is not None:
                    ledger.drop(prev)
                    ledger.hold(grads[u])
    mode.finish(release)
    return {u: get(u) for u in sources}


class _TensorMode:
    """The sweep on tensors: rules run with `ns` (tapegpu itself when a tape records the sweep,
    so the sweep's own ops are recorded: higher-order gradients)."""

    in_place = False
    ledger = None

    def __init__(self, ns, batch_ndim):
        self.ns = ns
        self.batch_ndim = batch_ndim
        self.watched = bool(_profilers)
        self.add = ops.add

    @staticmethod
    def value(g):
        return g

    @staticmethod
    def begin(forward):
        pass

    def step(self, op):
        ns, batch_ndim = self.ns, self.batch_ndim
        if self.watched:
            def step(g, e, reach):
                with profiler.muted():
                    return vjp(e, g, reach, batch_ndim, ns)
            return step
        if ns is not TENSOR_OPS or op.tensor_rule or not op.registered:
            # (per-call ops, custom gradients: their rules may hold tensors of their own)
            return lambda g, e, reach: vjp(e, g, reach, batch_ndim, ns)

        def step(g, e, reach):
            if _constant(g, e.saved):  # (a loss's mean from the seed) recorded by no tape
                return _on_arrays(op, g, e, reach, batch_ndim)
            return vjp(e, g, reach, batch_ndim, ns)
        return step

    @staticmethod
    def restore(e):
        if e.recompute is not None:
            raise RuntimeError(
                f"{e.op.name}: its saved values were dropped under the tape's memory_budget, "
                "and a tape is recording this sweep (a higher-order gradient); recomputed "
                "values would not be connected to it. Use a tape without memory_budget for "
                "Hessians")

    @staticmethod
    def account(e, g, cts, kept, release):
        profiler.on_vjp(e, g._data, [c._data for c in cts if c is not None])

    @staticmethod
    def finish(release):
        pass


def _constant(g, saved):
    """Whether a step's values are constants to every recorder: only tapes record (no trace,
    accumulator or vectorized_map), and none tracks g or the entry's saved tensors. Then no
    tape would record the step's ops, and it runs as the array sweep runs it."""
    recs = _thread.recorders
    if _thread.tracers:
        return False
    for r in recs:
        if not isinstance(r, Recorder):
            return False
        tracked = r._tracked
        if g._uid in tracked:
            return False
        for s in saved:
            if type(s) is Tensor and s._uid in tracked:
                return False
    return True


def _on_arrays(op, g, e, reach, batch_ndim):
    """An entry's step on the backend's arrays (the array sweep's), its cotangents as
    tensors."""
    dev = g._dev
    key = (dev, bool(batch_ndim))
    step = op.steps.get(key)
    if step is None:
        step = op.steps[key] = _array_step(op, dev, batch_ndim)
    token = quiet_enter()
    try:
        cts = step(g._data, e, reach)
    finally:
        quiet_exit(token)
    return [None if c is None else Tensor(_array(c), dev) for c in cts]


class _ArrayMode:
    """The sweep on one backend's raw arrays: no tensors and no dispatch; each op's rule runs
    with the array namespace, or the backend's VJP kernel where it has one. A `memory.Ledger`
    records the peak bytes of saved values plus cotangents; checkpointed entries get their
    saved values back by recomputing their segment."""

    def __init__(self, dev, batch_ndim, ledger):
        self.dev = dev
        self.ns = array_ops(dev, TENSOR_OPS)
        self.key = (dev, bool(batch_ndim))
        self.batch_ndim = batch_ndim
        self.ledger = ledger
        self.in_place = options.in_place
        self.watched = ledger is not None or bool(_profilers)
        self.restored = []
        self.add = _plus

    def begin(self, forward):
        if self.ledger is not None:
            for e in forward:
                for a in saved_arrays(e):
                    self.ledger.hold(a)

    @staticmethod
    def value(g):
        return g._data

    def step(self, op):
        step = op.steps.get(self.key)
        if step is None:
            step = op.steps[self.key] = _array_step(op, self.dev, self.batch_ndim)
        return step

    def restore(self, e):
        _restore(e, self.restored, self.ledger)

    def account(self, e, g, cts, kept, release):
        _account(e, g, cts, kept, release, self.ledger)

    def finish(self, release):
        if not release:
            for seg in self.restored:
                seg.drop()  # a persistent tape keeps to its budget between sweeps


def _plus(a, b):
    return a + b


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

def _array_step(op, dev, batch_ndim):
    """`step(g, entry, reach) -> cotangents`, one array (or None) per input of `op`: the op's
    VJP rule run on the backend's arrays (`ops` the array namespace), by the backend's VJP
    kernel where it has one. Inputs not in `reach` get None. Built once per op, device and
    batchedness (`op.steps`)."""
    if op.tensor_rule or (batch_ndim and not op.batched):
        return _tensor_step(dev, batch_ndim)
    step = _rule_step(op, array_ops(dev, TENSOR_OPS), _reader(op.save_plan),
                      _tensors(op.save_plan))
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
        if len(plan) == 3:
            return lambda saved: (saved[0]._data, saved[1]._data, saved[2]._data)
    if all(kind == 2 for kind, _ in plan):  # shapes only (reductions): the saved tuple itself
        return lambda saved: saved
    return lambda saved: tuple([s._data if type(s) is Tensor else s for s in saved])


def _tensors(plan):
    """How many tensors an op saves when it saves only tensors (inputs, its output or
    residuals), else None."""
    return len(plan) if all(kind in (0, 1, 4) for kind, _ in plan) else None


def _rule_step(op, ns, read, tensors):
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
        return _unary_step(rule[0], ns, read, tensors)
    if len(rule) == 2:
        return _binary_step(rule, ns, read, tensors)

    def step(g, e, reach):
        a = read(e.saved) if e.saved else ()
        p = e.params
        return [(g if r is passthrough else r(ns, g, *a, **p))
                if (r is not None and u in reach) else None
                for r, u in zip(rule, e.in_uids)]
    return step


# The rule shapes of elementwise code, which the sweep's loop runs itself (a step's `shape`:
# (kind, rule of the first input, rule of the second, namespace)): the same computation as the
# step, without a call per entry. Any other step is called.
_UNARY, _ADD, _BINARY = 1, 2, 3
_CALLED = (None, None, None, None)


def _unary_step(r, ns, read, tensors):
    # the hot path of elementwise code: one call of the rule, no argument packing
    if r is passthrough:
        return lambda g, e, reach: (g,)
    if tensors == 1:
        def step(g, e, reach):
            p = e.params
            x = e.saved[0]._data
            return (r(ns, g, x, **p) if p else r(ns, g, x),)
        step.shape = (_UNARY, r, None, ns)  # the sweep's loop runs it without the call
        return step

    def step(g, e, reach):
        p = e.params
        return (r(ns, g, *read(e.saved), **p) if p else r(ns, g, *read(e.saved)),)
    return step


def _binary_step(rule, ns, read, tensors):
    r0, r1 = rule
    if r0 is passthrough and r1 is passthrough:  # add
        def step(g, e, reach):
            u0, u1 = e.in_uids
            return (g if u0 in reach else None, g if u1 in reach else None)
        step.shape = (_ADD, None, None, ns)
        return step

    if r0 is not None and r1 is not None and passthrough not in rule and tensors == 2:
        def step(g, e, reach):  # multiply, divide...: both inputs saved
            u0, u1 = e.in_uids
            s = e.saved
            x = s[0]._data
            y = s[1]._data
            p = e.params
            if p:
                return (r0(ns, g, x, y, **p) if u0 in reach else None,
                        r1(ns, g, x, y, **p) if u1 in reach else None)
            return (r0(ns, g, x, y) if u0 in reach else None,
                    r1(ns, g, x, y) if u1 in reach else None)
        step.shape = (_BINARY, r0, r1, ns)
        return step

    if r0 is not None and r1 is not None and passthrough not in rule:
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
        cs = [sum_to(TENSOR_OPS, c, 0, shape) for c in cs]
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


def _shape(c):
    """A cotangent's shape as a plain tuple (a tensor's without making its TensorShape)."""
    return c._data.shape if type(c) is Tensor else c.shape


def _reduce_sum(ns, c, axes, keepdims):
    """reduce_sum of a cotangent over `axes` (sorted, non-negative, as `_reduction_axes` gives
    them): on tensors the op itself, without the public function's checks of its arguments."""
    if type(c) is Tensor:
        return apply(_SUM, (c,), {"axis": axes, "keepdims": keepdims})
    return ns.reduce_sum(c, axis=axes, keepdims=keepdims)


_SUM = ops.reduce_sum.op


def sum_to(ns, c, batch_ndim, shape):
    """Sums a cotangent of shape `batch + broadcast(shape)` down to `batch + shape` (the one
    un-broadcast of the package), with the namespace `ns` of the sweep's values: tensors, or
    one backend's arrays, where a float cotangent takes the backend's un-broadcast kernel if
    it has one (`ns.unbroadcast`, one launch per run of reduced axes)."""
    cs = _shape(c)
    if not batch_ndim and len(cs) == 2 and len(shape) == 1 and cs[1] == shape[0] and \
            ns.unbroadcast is None and type(c) is np.ndarray:
        s = cpu_sum(c, (0,), False)  # (a dense layer's bias: its rows summed, numpy's bits)
        if s is not None:
            return s
    target = cs[:batch_ndim] + tuple(shape)
    if cs == target:
        return c
    lead, axes = _reduction_axes(cs, batch_ndim, shape)
    kernel = ns.unbroadcast
    if kernel is not None and axes and lead >= 0 and c.dtype.kind == "f" and \
            c.dtype.itemsize in (4, 8):
        return kernel(c, batch_ndim, shape)
    if type(c) is np.ndarray and c.dtype.kind in "fc" and lead >= 0:
        # numpy's sum itself (what reduce_sum's forward calls, so the same bits), without the
        # op's dispatch
        c = np.add.reduce(c, axis=axes, keepdims=len(axes) != lead) if axes else c
        if lead and len(axes) != lead:
            c = c.reshape(c.shape[:batch_ndim] + c.shape[batch_ndim + lead:])
    elif lead > 0 and len(axes) == lead:  # only added leading axes: one sum removes them
        c = _reduce_sum(ns, c, axes, False)
    elif lead >= 0:
        if axes:
            c = _reduce_sum(ns, c, axes, True)
        if lead:
            cs = _shape(c)
            c = ns.reshape(c, cs[:batch_ndim] + cs[batch_ndim + lead:])
    if _shape(c) != target:
        c = ns.broadcast_to(c, target)
    return c
