"""Diagonal propagation: a traced Jacobian's backward on per-example values instead of a basis.

`tape.jacobian(losses, variables)` of per-example losses (shape (n,)) runs the backward on the
cotangent basis, the n x n identity: each value of the backward then has a leading basis axis k
and, somewhere after it, the batch axis b of the forward, and is zero wherever k != b. Run as
recorded, a kernel gradient x^T @ G then multiplies by those zeros: n times the work of the
per-example gradients. This pass (TensorFlow's vectorization of Jacobians plays the same trick)
keeps such values in their diagonal form: a value V of shape (n, ..., n at axis p, ...) with
V[k, ..., b, ...] = (k == b) D[..., b, ...] is represented by D, V's shape without axis 0.

Seeds: a constant equal to the identity of size n > 1, between axis 0 and one other axis (the
others of size 1): D = ones. Rules (the only places a diagonal value stays diagonal; `RULES`
and `elementwise` below):

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

from ..ops.binary import multiply
from ..ops.linalg import matmul
from ..ops.reduce import reduce_sum
from ..ops.shape import broadcast_to, getitem, reshape, transpose
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

    # -- rules: each returns ("diag", D, p), ("plain",) having defined n.out, or None ---------
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

    def reduce_sum(self, n):
        (v,) = n.ins
        d, p, size = self.diag[v]
        _, out_shape, dtype, dev = self.g.meta[n.out]
        r = len(self.shape(v))
        axis = n.params.get("axis")
        keep = n.params.get("keepdims", False)
        axes = tuple(range(r)) if axis is None else \
            tuple(sorted({a % r for a in ((axis,) if isinstance(axis, int) else axis)}))
        if 0 in axes and p in axes:
            return None  # the trace of the diagonal: run as traced
        rest = tuple(a - 1 for a in axes if a not in (0, p))
        if rest:
            s = [x for i, x in enumerate(self.shape(d)) if keep or i not in rest]
            d = self.emit(reduce_sum.op, [d], {"axis": rest, "keepdims": keep}, s, dtype, dev)
        if 0 not in axes and p not in axes:
            return "diag", d, p - sum(1 for a in rest if a < p - 1 and not keep)
        # summed over k or over b: the diagonal itself, with b where the result has it
        pd = p - 1 - (0 if keep else sum(1 for a in rest if a < p - 1))
        if p in axes and pd:  # over b: the values of k, now in b's place, lead
            s = list(self.shape(d))
            perm = list(range(len(s)))
            perm.insert(0, perm.pop(pd))
            d = self.emit(transpose.op, [d], {"perm": tuple(perm)}, [s[i] for i in perm],
                          dtype, dev)
        # over k, b stays in its place; with keepdims, the summed axes are 1 in the result
        self.reshape_into(d, n.out, out_shape, dev)
        return ("plain",)

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

    def matmul(self, n):
        a, b = n.ins
        if (a in self.diag) == (b in self.diag):
            return None
        ta, tb = n.params.get("ta", False), n.params.get("tb", False)
        if set(n.params) - {"ta", "tb"}:
            return None
        _, out_shape, dtype, dev = self.g.meta[n.out]
        r = len(out_shape)
        v, other = (a, b) if a in self.diag else (b, a)
        d, p, size = self.diag[v]
        if len(self.shape(v)) != r or r < 3 or self.shape(v)[0] != out_shape[0]:
            return None
        if v == a:  # the axis of V that the product sums over
            contracted = r - 2 if ta else r - 1
        else:
            contracted = r - 1 if tb else r - 2
        if p != contracted:
            o = self.k_free(other, r, dev)
            if o is None:
                return None
            ins = [d, o] if v == a else [o, d]
            dd = self.emit(matmul.op, ins, n.params, out_shape[1:], dtype, dev)
            if p < r - 2:
                return "diag", dd, p
            return "diag", dd, (r - 2 if v == a else r - 1)
        # b is summed over: per-example outer products (rank 3, a matrix as the other operand)
        if r != 3 or len(self.shape(other)) != 2:
            return None
        # D as (b, the other axis of V): V's product matrix is (b, columns) or (rows, b)
        dm = self.transpose2(d, dev) if (tb if v == b else not ta) else d
        if v == b:  # out[k] = A^T[k, :] outer D[k, :], A = other (transposed when ta)
            xm = other if ta else self.transpose2(other, dev)
            u, w = xm, dm
        else:  # out[k] = D[:, k] outer B[k, :], B = other (transposed when tb)
            xm = self.transpose2(other, dev) if tb else other
            u, w = dm, xm
        bs, m = self.shape(u)
        nn = self.shape(w)[1]
        u3 = self.reshape(u, (bs, m, 1), dev)
        w3 = self.reshape(w, (bs, 1, nn), dev)
        self.emit(multiply.op, [u3, w3], {}, out_shape, dtype, dev, out=n.out)
        self.defined.add(n.out)
        return ("plain",)

    def getitem(self, n):
        (v,) = n.ins
        d, p, size = self.diag[v]
        key, inner = n.params.get("key"), n.params.get("inner")
        r = len(self.shape(v))
        if not isinstance(key, tuple) or set(n.params) != {"key", "inner"}:
            return None
        full = (slice(None),) * (r - inner) + key
        if not full or full[0] is None or any(
                k is not None and not (isinstance(k, slice) and k == slice(None)) for k in full):
            return None
        full = full + (slice(None),) * (r - sum(1 for k in full if k is not None))
        out_axis, axis, newp = 0, 0, None
        for k in full:
            if k is not None:
                if axis == p:
                    newp = out_axis
                axis += 1
            out_axis += 1
        _, out_shape, dtype, dev = self.g.meta[n.out]
        dd = self.emit(getitem.op, [d], {"key": full[1:], "inner": r - 1}, out_shape[1:],
                       dtype, dev)
        return "diag", dd, newp

    def broadcast_to(self, n):
        (v,) = n.ins
        d, p, size = self.diag[v]
        _, out_shape, dtype, dev = self.g.meta[n.out]
        s = self.shape(v)
        if set(n.params) != {"shape"} or len(s) != len(out_shape) or \
                (s[0], s[p]) != (out_shape[0], out_shape[p]):
            return None
        dd = self.emit(broadcast_to.op, [d], {"shape": tuple(out_shape[1:])}, out_shape[1:],
                       dtype, dev)
        return "diag", dd, p

    def reshape_rule(self, n):
        """A reshape that only inserts or drops axes of size 1, axis 0 staying first."""
        (v,) = n.ins
        d, p, size = self.diag[v]
        _, out_shape, dtype, dev = self.g.meta[n.out]
        s = self.shape(v)
        big_in = [i for i, x in enumerate(s) if x != 1]
        big_out = [i for i, x in enumerate(out_shape) if x != 1]
        if [s[i] for i in big_in] != [out_shape[i] for i in big_out] or not out_shape or \
                out_shape[0] != s[0] or big_out[0] != 0:
            return None
        dd = self.reshape(d, out_shape[1:], dev)
        return "diag", dd, big_out[big_in.index(p)]

    def run(self):
        g = self.g
        for n in g.nodes:
            n.ins = tuple(self.alias.get(v, v) for v in n.ins)
            result = None
            if n.kind == "op" and any(v in self.diag for v in n.ins):
                rule = RULES.get(n.op) or (_Pass.elementwise if n.op.elementwise else None)
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


# the structural rules, by op entry (as JAX keys its rules by primitive)
RULES = {reduce_sum.op: _Pass.reduce_sum, matmul.op: _Pass.matmul, getitem.op: _Pass.getitem,
         broadcast_to.op: _Pass.broadcast_to, reshape.op: _Pass.reshape_rule}


ENABLED = True  # tests and benchmarks turn the pass off to compare


def propagate(graph):
    """Rewrites an optimized graph (in place) so that values diagonal over a Jacobian's basis
    and batch axes are computed in their diagonal form (the module docstring); a graph without
    an identity constant is returned unchanged."""
    if not ENABLED:
        return graph
    p = _Pass(graph)
    if not p.diag:
        return graph
    return p.run()
