"""Diagonal propagation: a traced Jacobian's backward on per-example values instead of a basis.

`tape.jacobian(losses, variables)` of per-example losses (shape (n,)) runs the backward on the
cotangent basis, the n x n identity: each value of the backward then has a leading basis axis k
and, somewhere after it, the batch axis b of the forward, and is zero wherever k != b. Run as
recorded, a kernel gradient x^T @ G then multiplies by those zeros: n times the work of the
per-example gradients. This pass (TensorFlow's vectorization of Jacobians plays the same trick)
keeps such values in their diagonal form: a value V of shape (n, ..., n at axis p, ...) with
V[k, ..., b, ...] = (k == b) D[..., b, ...] is represented by D, V's shape without axis 0.

Seeds: a constant equal to the identity of size n > 1, between axis 0 and one other axis (the
others of size 1): D = ones. Rules (the only places a diagonal value stays diagonal): the
pass's own `elementwise`, and the ops' own (`Op.diagonal`, registered in their families'
files, as JAX keys its rules by primitive: reduce_sum in ops/reduce.py, matmul in
ops/linalg.py, getitem, broadcast_to and reshape in ops/shape.py). A rule gets the pass (its
`diag` map, `meta`, `shape`, `emit`, `reshape`, `transpose2`, `k_free`, `reshape_into`) and
a node; it returns ("diag", D, p), ("plain",) having defined the node's output, or None:

* an elementwise op (`Op.elementwise`) whose other operands do not vary along k (size 1 or
  absent there) and that gives 0 where its diagonal operands are 0: D' = op(D, ...). Which
  operands must be zero for a zero result is the op entry's `zero_when` (a product is zero
  when either factor is), all of them for a `linear` op (add, subtract, cast), and for other one-input ops
  whether the op's forward gives 0 at 0 (sin, sinh: yes; exp, cos: no). A constant of zeros
  counts as a diagonal operand (where(mask, g, 0.0) keeps g's form);
* matmul on the last two axes with an operand that does not vary along k: the diagonal is
  kept when b is a batch axis of the product or its row (column) axis; when b is the
  contracted axis (x^T @ G, the gradient of a kernel), the product is per example outer
  products, out[k] = x[k]^T-row times D[k]-row, a plain value computed as one broadcast multiply;
* reduce_sum: over b (or over k) the result is D itself, as a plain value (the batch axis moved
  to the front); over other axes the diagonal is kept;
* getitem by full slices and new axes (None) after axis 0, reshapes that only insert or drop
  axes of size 1 after it, broadcast_to along other axes than k and b: D alike.

Anything else that uses a diagonal value gets the full value, rebuilt once as
identity x D ("materialised"), and runs as traced. Results equal the traced graph's up to the
rounding of sums: the pass drops additions of exact zeros and products by them. One
difference, as for TensorFlow's vectorized Jacobians and JAX's vmap: where a factor is Inf or
NaN, the full backward computes 0 * Inf = NaN at the off-diagonal (k != b) entries and sums
NaN into the gradients; this pass never forms those products.
"""
import math

import numpy as np

from ..core.options import options
from ..ops.binary import multiply  # the structural ops the pass builds with
from ..ops.shape import reshape, transpose
from .graph import EFFECTS, Node

def _zero_groups(op, params, dtypes):
    """The groups of argument positions such that the op gives 0 when all of a group are 0:
    as its entry's `zero_when` states, all of them for a linear op, and for other one-input
    ops whether its forward gives 0 at 0."""
    if op.zero_when:
        return [tuple(op.args.index(a) for a in group) for group in op.zero_when]
    if op.linear:
        return [tuple(range(len(op.args)))]
    if len(op.args) != 1 or op.residuals:
        return []
    try:
        with np.errstate(all="ignore"):
            out = op.forward(np, np.zeros((), dtypes[0]), **params)
        return [(0,)] if np.all(np.asarray(out) == 0) else []
    except Exception:  # an op whose forward does not run on a numpy 0-d array: no rule
        return []


def _identity_axis(shape):
    """The axis p > 0 such that `shape` is (n, 1, ..., n at p, 1, ...) with n > 1, else None."""
    if len(shape) < 2 or shape[0] < 2:
        return None
    ps = [i for i, s in enumerate(shape) if i and s != 1]
    return ps[0] if len(ps) == 1 and shape[ps[0]] == shape[0] else None


def _eye(shape, p, dtype):
    """The identity of size shape[0] between axes 0 and p, with the size-1 axes of `shape`."""
    return np.eye(shape[0], dtype=dtype).reshape([s if i in (0, p) else 1
                                                  for i, s in enumerate(shape)])


class _Pass:
    def __init__(self, graph):
        self.g = graph
        self.diag = {}  # vid -> (D vid, p, n)
        self.defined = set(graph.constants) | set(graph.inputs)
        self.nodes = []
        self.eyes = {}  # (n, p, rank, dtype) -> identity-pattern constant vid
        self.zero_consts = set()
        self.alias = {}  # vid -> the vid that holds its value
        for v, a in list(graph.constants.items()):
            _, shape, dtype, dev = graph.meta[v]
            p = _identity_axis(shape)
            if dtype[0] not in "fc" or not (p or math.prod(shape) == 1):
                continue
            host = np.asarray(dev.to_numpy(a))
            if p and np.array_equal(host, _eye(shape, p, host.dtype)):
                self.diag[v] = (self.constant(np.ones(shape[1:], dtype), dev), p, shape[0])
            elif not p and not np.any(host):
                self.zero_consts.add(v)

    # -- building nodes --------------------------------------------------------------------
    def constant(self, host, dev):
        self.g.meta.append(("constant", host.shape, host.dtype.name, dev))
        vid = len(self.g.meta) - 1
        self.g.constants[vid] = dev.asarray(host)
        self.defined.add(vid)
        return vid

    def emit(self, op, ins, params, shape, dtype, dev, out=None):
        """A node of `op` (an entry: `<public function>.op`) appended; its output value."""
        if out is None:
            self.g.meta.append((op.name, tuple(shape), dtype, dev))
            out = len(self.g.meta) - 1
        self.nodes.append(Node("op", op, tuple(ins), params, out, dev))
        return out

    def shape(self, v):
        return self.g.meta[v][1]

    def meta(self, v):
        """(label, shape, dtype name, device) of a value."""
        return self.g.meta[v]

    def reshape(self, v, shape, dev):
        if tuple(shape) == self.shape(v):
            return v
        return self.emit(reshape.op, [v], {"shape": tuple(shape)}, shape, self.g.meta[v][2], dev)

    def transpose2(self, v, dev):
        s = self.shape(v)
        return self.emit(transpose.op, [v], {"perm": (1, 0)}, s[::-1], self.g.meta[v][2], dev)

    def materialise(self, v):
        """Defines the full value `v` from its diagonal form: identity pattern x D."""
        if v in self.defined:
            return
        d, p, n = self.diag[v]
        _, shape, dtype, dev = self.g.meta[v]
        key = (n, p, len(shape), dtype, dev.name)
        if key not in self.eyes:
            pattern = [1] * len(shape)
            pattern[0] = pattern[p] = n
            self.eyes[key] = self.constant(_eye(pattern, p, dtype), dev)
        dx = self.reshape(d, (1,) + self.shape(d), dev)
        self.emit(multiply.op, [self.eyes[key], dx], {}, shape, dtype, dev, out=v)
        self.defined.add(v)

    def varies_k(self, v, rank):
        """Whether `v` varies along axis 0 of a result of `rank` (right-aligned broadcasting)."""
        s = self.shape(v)
        return len(s) == rank and s[0] != 1

    def k_free(self, v, rank, dev):
        """`v` as an operand of D's rank (rank - 1), where it does not vary along axis 0 of a
        result of `rank`; None if it does."""
        if self.varies_k(v, rank):
            return None
        s = self.shape(v)
        return self.reshape(v, s[1:], dev) if len(s) == rank else v

    # -- the pass's own rule -------------------------------------------------------------------
    def elementwise(self, n):
        _, out_shape, dtype, dev = self.g.meta[n.out]
        r = len(out_shape)
        ps = {self.diag[v][1:] for v in n.ins if v in self.diag}
        if len(ps) != 1 or r < 2:
            return None
        p, size = ps.pop()
        zero = set()
        for i, v in enumerate(n.ins):
            if v in self.diag:
                s = self.shape(v)
                if len(s) != r or s[0] != out_shape[0] or s[p] != out_shape[p]:
                    return None
                zero.add(i)
            elif v in self.zero_consts:
                zero.add(i)
        groups = [set(grp) for grp in
                  _zero_groups(n.op, n.params, [self.g.meta[v][2] for v in n.ins])
                  if set(grp) <= zero]
        # every zero operand in a group that makes the result zero (x / V is no diagonal)
        if not groups or not zero <= set().union(*groups):
            return None
        if any(self.varies_k(v, r) for i, v in enumerate(n.ins) if i not in zero):
            return None
        ins = [self.diag[v][0] if v in self.diag else self.k_free(v, r, dev) for v in n.ins]
        d = self.emit(n.op, ins, n.params, out_shape[1:], dtype, dev)
        return "diag", d, p

    def reshape_into(self, d, out, shape, dev):
        """Defines value `out` (of `shape`, the same elements as `d`) from `d`."""
        if math.prod(self.shape(d)) != math.prod(shape):
            raise AssertionError("diagonal: a rule's result has the wrong size")
        if self.shape(d) == tuple(shape):
            self.alias[out] = d
            return
        self.emit(reshape.op, [d], {"shape": tuple(shape)}, shape, self.g.meta[out][2], dev,
                  out=out)
        self.defined.add(out)

    def run(self):
        g = self.g
        for n in g.nodes:
            n.ins = tuple(self.alias.get(v, v) for v in n.ins)
            result = None
            if n.kind == "op" and any(v in self.diag for v in n.ins):
                rule = n.op.diagonal or (_Pass.elementwise if n.op.elementwise else None)
                result = rule(self, n) if rule is not None else None
                if result is not None and result[0] == "diag":
                    self.diag[n.out] = result[1:] + (self.diag[next(
                        v for v in n.ins if v in self.diag)][2],)
            if result is None:
                for v in n.ins:
                    if v in self.diag:
                        self.materialise(v)
                self.nodes.append(n)
                if n.out is not None:
                    self.defined.update(n.out if isinstance(n.out, tuple) else (n.out,))
        g.outputs = [(k, self.alias.get(v, v)) if k == "v" else (k, v) for k, v in g.outputs]
        for k, v in g.outputs:
            if k == "v" and v in self.diag:
                self.materialise(v)
        live = {v for k, v in g.outputs if k == "v"}
        kept = []
        for n in reversed(self.nodes):
            if n.kind in EFFECTS or n.out in live:
                live.update(n.ins)
                kept.append(n)
        g.nodes = kept[::-1]
        g.constants = {v: a for v, a in g.constants.items() if v in live}
        return g


def propagate(graph):
    """Rewrites an optimized graph (in place) so that values diagonal over a Jacobian's basis
    and batch axes are computed in their diagonal form (the module docstring); a graph without
    an identity constant is returned unchanged."""
    if not options.diagonal:
        return graph
    p = _Pass(graph)
    if not p.diag:
        return graph
    return p.run()
