"""Algebraic rewrites of an optimized graph, before it is fused and planned.

`rewrite(graph)` rewrites the graph in place (then CSE and DCE run again, keeping the trace's
counts); `concrete.graph` prints the result. The rules are the ops' own, registered in their
families' files (`Op.rewrite`, as JAX keeps a primitive's rules beside it): a rule gets a
`Rewriter` (this module: the graph's shapes, dtypes, constants, producers and uses, and node
builders) and a node, and returns the nodes that replace it, or None. Rules are driven by
shapes and the values of the graph's constants, never by what the function computes. The
rules today: a product with a repeated or one-hot constant (matmul, ops/linalg.py), a select
of a scaled cotangent and a clipped shift (where, ops/binary.py). One rule is the pass's own,
on every elementwise op of several inputs: an input that only broadcasts a value
(`Op.broadcast_only`) is read as that value where the result keeps its shape.
"""
import numpy as np

from ..core.options import options
from .graph import Node, optimize


class Rewriter:
    """What a rule sees of the graph it rewrites, and how it builds nodes."""

    def __init__(self, graph):
        self.graph = graph
        self.producers = {n.out: n for n in graph.nodes if n.kind == "op"}
        self.use_counts = {}
        for n in graph.nodes:
            for v in n.ins:
                self.use_counts[v] = self.use_counts.get(v, 0) + 1

    def meta(self, vid):
        """(label, shape, dtype name, device) of a value."""
        return self.graph.meta[vid]

    def producer(self, vid):
        """The op node computing `vid`, or None (an input, a constant, a read)."""
        return self.producers.get(vid)

    def uses(self, vid):
        return self.use_counts.get(vid, 0)

    def is_constant(self, vid):
        return vid in self.graph.constants

    def constant_value(self, vid):
        """A constant's value as a host array, else None."""
        a = self.graph.constants.get(vid)
        return None if a is None else np.asarray(self.graph.meta[vid][3].to_numpy(a))

    def scalar(self, vid):
        """The value of a one-element constant (0-d host array), else None."""
        a = self.graph.constants.get(vid)
        if a is None or a.size != 1:
            return None
        return self.constant_value(vid).reshape(())

    def value(self, dev, shape, dtype):
        self.graph.meta.append(("op", tuple(shape), dtype, dev))
        return len(self.graph.meta) - 1

    def constant(self, dev, array):
        vid = self.value(dev, array.shape, array.dtype.name)
        self.graph.meta[vid] = ("constant",) + self.graph.meta[vid][1:]
        self.graph.constants[vid] = dev.asarray(array)
        return vid

    def node(self, dev, op, ins, params, shape, dtype, out=None):
        """A node of `op` (an entry: `<public function>.op`) on values `ins`; it defines `out`
        (a new value when None)."""
        if out is None:
            out = self.value(dev, shape, dtype)
        return Node("op", op, tuple(ins), params, out, dev)


def rewrite(graph):
    """Applies the rules to `graph` (in place; returns it). Each rule fires at most once per
    node, and the rewritten nodes are not revisited."""
    if not options.rewrites:
        return graph
    r = Rewriter(graph)
    out = []
    changed = False
    for n in graph.nodes:
        new = None
        if n.kind == "op" and n.op.registered:  # not a per-call op
            if n.op.elementwise and len(n.ins) > 1:
                changed |= _skip_broadcasts(r, n)
            if n.op.rewrite is not None:
                new = n.op.rewrite(r, n)
        if new is None:
            new = [n]
        else:
            changed = True
        out.extend(new)
        r.producers.update((m.out, m) for m in new if m.kind == "op")
    if changed:
        graph.nodes = out
        counts = graph.traced_nodes, graph.merged, graph.dropped
        optimize(graph)  # the replaced nodes and constants are dropped
        graph.traced_nodes, graph.merged, graph.dropped = counts
    return graph


def _skip_broadcasts(r, n):
    """Replaces the inputs of the elementwise `n` that only broadcast a value with that value,
    where the inputs still broadcast to `n`'s shape. Whether any was replaced."""
    ins = list(n.ins)
    shape = r.meta(n.out)[1]
    for k, v in enumerate(ins):
        b = r.producer(v)
        if b is None or not b.op.broadcast_only:
            continue
        trial = ins[:k] + [b.ins[0]] + ins[k + 1:]
        if np.broadcast_shapes(*(r.meta(i)[1] for i in trial)) == shape:
            ins = trial
    if tuple(ins) == n.ins:
        return False
    n.ins = tuple(ins)
    return True
