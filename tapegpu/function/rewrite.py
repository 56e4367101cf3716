"""Algebraic rewrites of an optimized graph, before it is fused and planned.

`rewrite(graph)` rewrites the graph in place (then CSE and DCE run again, keeping the trace's
counts); `concrete.graph` prints the result. Each rule is driven by op names, shapes and the
values of the graph's constants, never by what the function computes:

* **A product with a repeated constant**: `matmul(c, b)` where the constant `c` repeats along
  one of its axes other than the summed one (a batch Jacobian's cotangent basis: one basis
  vector per output coordinate, the same for every row) is computed on one copy of `c` and
  broadcast (`broadcast_to`, a view) instead of once per repetition.
* **A product with a one-hot constant**: `matmul(e, b)` where every row of the constant `e` is a
  unit vector (the identity basis of `jacobian`, rows of `one_hot`) selects rows of `b` (or of its
  transpose) with `gather` instead of multiplying. The selection differs from the product only
  where `b` holds an infinity or NaN: the product's `0 * inf` is NaN in every row, the selection
  keeps each row's own values.
* **A select of a scaled cotangent**: `where(m, g, g * s)` (an activation's backward: ELU,
  SELU, leaky ReLU) where `m` and `s` are smaller than `g` (broadcast over a Jacobian's basis
  axis) becomes `g * where(m, 1, s)`: the select runs on the small operands and one broadcasting
  product on the large one, bit for bit the same values (`g * 1` is `g`).
* **A clipped shift**: `where(y > 0, c, y + c)` with `c` the same constant scalar >= 0 on both
  sides (ELU's derivative from its output) is `minimum(y + c, c)`, bit for bit (rounding is
  monotone: y > 0 gives y + c >= c; NaN propagates through both), one pass instead of a
  comparison and a select (numpy's `where` branches per element on its mask). Differentiated
  (a traced function called under a tape runs its graph's ops), the two differ only for
  0 < y < half an ulp of c, where `y + c` rounds to c: the select's derivative in y is 0 there,
  the minimum's 1 (ties go to its first input).
* **Broadcasts an elementwise op does itself**: an input `broadcast_to(v)` of an elementwise op
  of several inputs whose result keeps its shape with `v` in its place reads `v`.
"""
import math

import numpy as np

from ..ops import registry
from ..ops.binary import add as add_, greater, minimum, multiply, where
from ..ops.linalg import matmul
from ..ops.shape import broadcast_to, gather, transpose
from .graph import Node, optimize

ENABLED = True


def rewrite(graph):
    """Applies the rules to `graph` (in place; returns it). Each rule fires at most once per
    node, and the rewritten nodes are not revisited."""
    if not ENABLED:
        return graph
    producer = {n.out: n for n in graph.nodes if n.kind == "op"}
    uses = {}
    for n in graph.nodes:
        for v in n.ins:
            uses[v] = uses.get(v, 0) + 1
    out = []
    changed = False
    for n in graph.nodes:
        new = None
        if n.kind == "op" and n.op is registry.REGISTRY.get(n.op.name):  # not a per-call op
            if n.op.elementwise and len(n.ins) > 1:
                changed |= _skip_broadcasts(graph, n, producer)
            if n.op is matmul.op:
                new = _constant_product(graph, n)
            elif n.op is where.op:
                new = _scaled_select(graph, n, producer, uses)
                if new is not None:  # the small select it makes may be a clipped shift
                    new[:1] = _clipped_shift(graph, new[0], producer) or new[:1]
                else:
                    new = _clipped_shift(graph, n, producer)
        if new is None:
            new = [n]
        else:
            changed = True
        out.extend(new)
        producer.update((m.out, m) for m in new)
    if changed:
        graph.nodes = out
        counts = graph.traced_nodes, graph.merged, graph.dropped
        optimize(graph)  # the replaced nodes and constants are dropped
        graph.traced_nodes, graph.merged, graph.dropped = counts
    return graph


def _value(graph, dev, shape, dtype):
    graph.meta.append(("op", tuple(shape), dtype, dev))
    return len(graph.meta) - 1


def _constant(graph, dev, array):
    vid = _value(graph, dev, array.shape, array.dtype.name)
    graph.meta[vid] = ("constant",) + graph.meta[vid][1:]
    graph.constants[vid] = dev.asarray(array)
    return vid


def _node(graph, dev, op, ins, params, shape, dtype, out=None):
    """A node of `op` (an entry: `<public function>.op`)."""
    if out is None:
        out = _value(graph, dev, shape, dtype)
    return Node("op", op, tuple(ins), params, out, dev)


# -- matmul by a repeated or one-hot constant -----------------------------------------------------

def _repeated_axes(c):
    """The axes of `c` (but the last, which a product sums over) along which every slice equals
    the first."""
    return tuple(ax for ax in range(c.ndim - 1) if c.shape[ax] > 1 and
                 np.array_equal(c, np.take(c, [0], axis=ax).repeat(c.shape[ax], axis=ax)))


def _one_hot_rows(c):
    """Each row's column of the 1 when every row (last axis) of `c` is a unit vector, else
    None."""
    if c.shape[-1] == 0 or c.size == 0:
        return None
    idx = np.argmax(c, axis=-1)
    unit = np.zeros_like(c)
    np.put_along_axis(unit, idx[..., None], 1, axis=-1)
    return idx.astype(np.int64) if np.array_equal(c, unit) else None


def _constant_product(graph, n):
    """`matmul(c, b)` with `c` a constant (not transposed) and `b` a matrix: on one copy of `c`
    where it repeats, as a row selection where its rows are unit vectors."""
    a, b = n.ins
    if n.params.get("ta") or a not in graph.constants or len(graph.meta[b][1]) != 2:
        return None
    dev = n.dev
    _, shape, dtype, _ = graph.meta[n.out]
    c = np.asarray(dev.to_numpy(graph.constants[a]))
    if c.ndim < 2 or c.dtype.kind != "f":
        return None
    axes = _repeated_axes(c)
    small = c[tuple(slice(0, 1) if ax in axes else slice(None) for ax in range(c.ndim))]
    idx = _one_hot_rows(small)
    if not axes and idx is None:
        return None
    tb = n.params.get("tb", False)
    bshape = graph.meta[b][1]
    rows = bshape[::-1] if tb else bshape  # op(b): (k, n)
    small_shape = small.shape[:-1] + rows[1:]
    target = None if axes else n.out
    nodes = []
    if idx is not None:
        src = b
        if tb:
            t = _node(graph, dev, transpose.op, (b,), {"perm": (1, 0)}, rows, dtype)
            nodes.append(t)
            src = t.out
        nodes.append(_node(graph, dev, gather.op, (src, _constant(graph, dev, idx)),
                           {"axis": -2}, small_shape, dtype, target))
    else:
        nodes.append(_node(graph, dev, matmul.op, (_constant(graph, dev, small), b), n.params,
                           small_shape, dtype, target))
    if axes:
        nodes.append(_node(graph, dev, broadcast_to.op, (nodes[-1].out,),
                           {"shape": tuple(shape)}, shape, dtype, n.out))
    return nodes


def _skip_broadcasts(graph, n, producer):
    """Replaces the inputs of the elementwise `n` made by `broadcast_to` with what they
    broadcast, where the inputs still broadcast to `n`'s shape. Whether any was replaced."""
    ins = list(n.ins)
    shape = graph.meta[n.out][1]
    for k, v in enumerate(ins):
        b = producer.get(v)
        if b is None or b.kind != "op" or b.op is not broadcast_to.op:
            continue
        trial = ins[:k] + [b.ins[0]] + ins[k + 1:]
        if np.broadcast_shapes(*(graph.meta[i][1] for i in trial)) == shape:
            ins = trial
    if tuple(ins) == n.ins:
        return False
    n.ins = tuple(ins)
    return True


# -- where(m, g, g * s) -> g * where(m, 1, s) --------------------------------------------------

def _size(shape):
    return math.prod(shape)


def _scaled_select(graph, n, producer, uses):
    """`where(m, g, g * s)` (or `where(m, g * s, g)`) with the product used only here and
    `m`, `s` broadcasting to fewer elements than `g`: `g * where(m, 1, s)`."""
    m, x, y = n.ins
    _, shape, dtype, _ = graph.meta[n.out]
    if graph.meta[m][2] != "bool" or dtype not in ("float16", "float32", "float64"):
        return None
    for g, p, scaled_second in ((x, y, True), (y, x, False)):
        prod = producer.get(p)
        if prod is None or prod.op is not multiply.op or uses.get(p) != 1 or \
                g not in prod.ins:
            continue
        s = prod.ins[1] if prod.ins[0] == g else prod.ins[0]
        if graph.meta[p][1:3] != (shape, dtype) or graph.meta[g][2] != dtype or \
                graph.meta[s][2] != dtype:
            continue
        small = np.broadcast_shapes(graph.meta[m][1], graph.meta[s][1])
        if len(small) > len(shape) or _size(small) >= _size(shape) or \
                np.broadcast_shapes(graph.meta[g][1], small) != shape:
            continue
        dev = n.dev
        one = _constant(graph, dev, np.ones((), dtype))
        factor = _node(graph, dev, where.op, (m, one, s) if scaled_second else (m, s, one), {},
                       small, dtype)
        return [factor, _node(graph, dev, multiply.op, (g, factor.out), {}, shape, dtype, n.out)]
    return None


# -- where(y > 0, c, y + c) -> minimum(y + c, c) ---------------------------------------------

def _scalar(graph, vid):
    """The value of a one-element constant, else None."""
    a = graph.constants.get(vid)
    if a is None or a.size != 1:
        return None
    return np.asarray(graph.meta[vid][3].to_numpy(a)).reshape(())


def _same_scalar(graph, u, v):
    a, b = _scalar(graph, u), _scalar(graph, v)
    return a is not None and b is not None and a.dtype == b.dtype and a == b


def _clipped_shift(graph, n, producer):
    """`where(y > 0, c, y + c)` for a constant scalar c >= 0: `[minimum(y + c, c)]`."""
    m, c, s = n.ins
    cmp, add = producer.get(m), producer.get(s)
    _, shape, dtype, _ = graph.meta[n.out]
    if cmp is None or add is None or cmp.op is not greater.op or add.op is not add_.op or \
            cmp.params or add.params:
        return None
    y, zero = cmp.ins
    if add.ins[0] != y and add.ins[1] != y:
        return None
    shift = add.ins[1] if add.ins[0] == y else add.ins[0]
    z, cv = _scalar(graph, zero), _scalar(graph, c)
    if z is None or z != 0 or cv is None or not cv >= 0 or not _same_scalar(graph, c, shift) or \
            graph.meta[s][1:3] != (shape, dtype) or graph.meta[y][1:3] != (shape, dtype):
        return None
    return [_node(graph, n.dev, minimum.op, (s, c), {}, shape, dtype, n.out)]
