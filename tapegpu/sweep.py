"""The reverse sweep: from seeded cotangents back to the sources, over recorded entries.

Every cotangent in one sweep carries the same leading `batch_shape` (empty for `gradient`, one
axis for `jacobian`). Rules may return cotangents in the op's broadcast shape; `sum_to` reduces
them to `batch_shape + input.shape` here, the one place where un-broadcasting happens.
"""
from . import ops


def prune(entries, sources, seeds):
    """The entries on a path from a source to a seeded tensor, in reverse recording order, and
    the set of tensor ids that depend on a source (only they need cotangents)."""
    reach = set(sources)
    forward = []
    for e in entries:
        for u in e.in_uids:
            if u in reach:
                reach.add(e.out_uid)
                forward.append(e)
                break
    needed = set(seeds)
    plan = []
    for e in reversed(forward):
        if e.out_uid in needed:
            plan.append(e)
            for u in e.in_uids:
                if u in reach:
                    needed.add(u)
    return plan, reach


def backward(entries, seeds, sources, batch_ndim=0, release=False):
    """Cotangents of `sources` (a list of tensor ids) given `seeds` [(tensor id, cotangent)].

    Returns {source id: cotangent or None}. With `release`, each entry's saved values are
    dropped right after its rule ran (non-persistent tapes), and each cotangent is dropped after
    its last use.
    """
    plan, reach = prune(entries, sources, [u for u, _ in seeds])
    keep = set(sources)
    grads = {}
    for u, g in seeds:
        prev = grads.get(u)
        grads[u] = g if prev is None else ops.add(prev, g)
    for e in plan:
        g = grads.get(e.out_uid) if e.out_uid in keep else grads.pop(e.out_uid, None)
        if g is None:
            continue
        cts = vjp(e, g, reach, batch_ndim)
        if release:
            e.saved = None
        for u, c, shape in zip(e.in_uids, cts, e.in_shapes):
            if c is None or u not in reach:
                continue
            c = sum_to(c, batch_ndim, shape)
            prev = grads.get(u)
            grads[u] = c if prev is None else ops.add(prev, c)
    return {u: grads.get(u) for u in sources}


def vjp(e, g, reach, batch_ndim):
    """The input cotangents of one entry (None where an input needs none)."""
    op = e.op
    if batch_ndim and not op.batched:
        return _vjp_unbatched(e, g, reach, batch_ndim)
    rule = op.vjp
    if e.saved is None:
        raise RuntimeError(f"{op.name}: its saved values were already released; a non-persistent "
                           "tape can compute only one set of gradients")
    if type(rule) is tuple:
        return [r(g, *e.saved, **e.params) if (r is not None and u in reach) else None
                for r, u in zip(rule, e.in_uids)]
    if len(e.in_uids) == 1 and not op.variadic:
        return (rule(g, *e.saved, **e.params),)
    return rule(g, *e.saved, **e.params)


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


def sum_to(c, batch_ndim, shape):
    """Sums a cotangent of shape `batch + broadcast(shape)` down to `batch + shape`."""
    cs = c.shape
    target = cs[:batch_ndim] + tuple(shape)
    if cs == target:
        return c
    lead = len(cs) - len(target)
    if lead >= 0:
        axes = list(range(batch_ndim, batch_ndim + lead))
        for i, s in enumerate(shape):
            if s == 1 and cs[batch_ndim + lead + i] != 1:
                axes.append(batch_ndim + lead + i)
        if axes:
            c = ops.reduce_sum(c, axis=tuple(axes), keepdims=True)
        if lead:
            c = ops.reshape(c, c.shape[:batch_ndim] + c.shape[batch_ndim + lead:])
    if c.shape != target:
        c = ops.broadcast_to(c, target)
    return c
