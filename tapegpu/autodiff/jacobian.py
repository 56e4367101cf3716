"""Jacobians by batched VJPs: one backward sweep whose cotangents carry a leading batch axis.

`jacobian` seeds the sweep with the identity basis `eye(n).reshape((n,) + y.shape)`, in chunks
whose cotangents fit `MEMORY_BUDGET`; `batch_jacobian` uses the independence of rows to seed
`(m, b) + y.shape[1:]` instead of `(b*m, b) + ...`. The loop fallback
(`experimental_use_pfor=False`) runs one sweep per target element.

Chunks are sized from the widest tensor a chunk's cotangents (or tangents) take: the target
and every input of every recorded op on a path from the sources to it (a broadcast input
included). The Jacobian itself is checked against `MEMORY_BUDGET` before any sweep runs
(unless `parallel_iterations` chooses the chunks); chunks are written into one preallocated
result, so the peak is the Jacobian plus one chunk. Under an outer tape or accumulator the
chunks are concatenated with tapegpu ops instead (the result must stay differentiable).

Per-example targets (`tape.jacobian(losses, variables)` with `losses` of shape (n,), in one
chunk): the sweep keeps cotangents in their diagonal form, as tg.function's diagonal pass does
(function/diagonal.py). The seed is the identity, and a cotangent V of shape (n, ..., n at axis
p, ...) that is zero wherever k != b is held as D (V's shape without axis 0): `Diagonal(D, p)`.
`_DiagonalMode` is a mode of the one sweep loop (sweep._sweep) whose steps keep that form:

* an elementwise op: its VJP run once on D, unbatched; an input that has the batch axis gets
  the diagonal of the result, one broadcast along it (a bias) gets the per-example rows of it;
* softmax, log_softmax and sparse cross-entropy (independent along their leading axes, the
  batch axis one of them), and reductions over other axes than the batch axis: their VJP on D,
  unbatched, diagonal along the inputs' batch axis;
* matmul of matrices with the batch axis in the rows of the product: D @ B^T stays diagonal,
  A^T @ V (a kernel's gradient) is the per-example outer products A[k]^T D[k], a plain value.

Anything else gets the full value (identity pattern x D, "materialised") and runs the array
sweep's batched step. The results are the batched sweep's up to the rounding of sums (the
additions of exact zeros are not made); where a factor is Inf or NaN the full backward also
spreads NaN to the off-diagonal entries, which this never forms (as tg.function and
vectorized_map). `options.diagonal` turns it off.
"""
import math
import warnings

import numpy as np

from ..core.quiet import quiet_enter, quiet_exit
from ..core import nest
from .. import ops
from . import sweep
from ..backends import cpu_kernels
from ..core.options import options
from ..core.profiler import _active as _profilers
from ..core.tensor import Tensor, Variable, _thread
from ..ops.registry import passthrough
from .recorder import UnconnectedGradients, source_uid

MEMORY_BUDGET = 256 * 2**20  # bytes: a chunk's cotangents at their widest; a Jacobian at most


def check_target(target, what):
    """The target of `what` (e.g. "GradientTape.gradient") must be a tensor or variable."""
    if isinstance(target, (Tensor, Variable)):
        return
    hint = " (.numpy() leaves the tape: differentiate the tensor itself)" \
        if isinstance(target, (np.ndarray, np.generic)) else ""
    raise TypeError(f"{what}: the target is a {type(target).__name__}{hint}; it "
                    "must be a tg.Tensor computed under the tape (or a structure of them, for "
                    "gradient)")


def warn_integer_source(source, what, stacklevel=3):
    """TensorFlow logs a warning and returns None for a source of an integer dtype."""
    warnings.warn(f"{what}: the dtype of the source must be floating (e.g. "
                  f"tg.float32), got {_value(source).dtype.name}; its gradient is None",
                  UserWarning, stacklevel=stacklevel)


def widest(tape, sources, target):
    """Elements of the widest tensor a chunk's cotangents (tangents) can take: the target and
    every input of the recorded ops between the sources and the target."""
    plan, _ = sweep.prune(tape._entries, list(sources), [target._uid])
    w = max(1, _value(target).size)
    for e in plan:
        for s in e.in_shapes:
            w = max(w, math.prod(s))
    return w


def rows_per_chunk(n, parallel_iterations, width, itemsize):
    """`parallel_iterations`, or as many rows as keep a few live cotangents of `width`
    elements within MEMORY_BUDGET."""
    if parallel_iterations:
        return max(1, min(n, parallel_iterations))
    return max(1, min(n, MEMORY_BUDGET // (4 * itemsize * width)))


def check_size(what, elements, itemsize, parallel_iterations, use_pfor):
    """Refuses, before any sweep, a Jacobian that outgrows MEMORY_BUDGET by itself (unless the
    caller chose the chunks with `parallel_iterations` or the loop fallback)."""
    nbytes = elements * itemsize
    if nbytes <= MEMORY_BUDGET or parallel_iterations or not use_pfor:
        return
    raise MemoryError(f"{what}: the Jacobian has {elements} elements "
                      f"({nbytes / 2**20:.1f} MiB), more than tapegpu.autodiff.jacobian."
                      f"MEMORY_BUDGET ({MEMORY_BUDGET / 2**20:.1f} MiB); take the Jacobian of a "
                      "smaller target (or fewer sources), pass parallel_iterations=k to choose "
                      "the rows per sweep yourself, experimental_use_pfor=False (one sweep per "
                      "target element), or raise MEMORY_BUDGET")


def check_parallel_iterations(parallel_iterations, what):
    if parallel_iterations is None:
        return None
    if isinstance(parallel_iterations, bool) or \
            not isinstance(parallel_iterations, (int, np.integer)) or parallel_iterations < 1:
        raise ValueError(f"{what}: parallel_iterations must be None or a positive "
                         f"integer, got {parallel_iterations!r}")
    return int(parallel_iterations)


def check_loop_fallback(tape, use_pfor, parallel_iterations, rows, what):
    """TensorFlow (eager) on a non-persistent tape: experimental_use_pfor=False runs one
    gradient call per target element, so it raises RuntimeError up front; parallel_iterations
    smaller than the target's rows (elements, or elements per batch row for batch_jacobian)
    makes pfor call the loop body, i.e. `gradient`, more than once, so the second call raises
    the tape's one-set-of-gradients RuntimeError. Both are raised here before any work."""
    if tape._persistent:
        return
    if not use_pfor:
        raise RuntimeError(f"GradientTape must be created with persistent=True to compute the "
                           f"{what.split('.')[-1]} with eager execution enabled and with "
                           "experimental_use_pfor set to False.")
    if parallel_iterations is not None and parallel_iterations < rows:
        raise RuntimeError("A non-persistent GradientTape can only be used to compute one set "
                           f"of gradients (or jacobians) ({what} with parallel_iterations="
                           f"{parallel_iterations} < {rows} target rows computes several); "
                           "create the tape with persistent=True, or leave parallel_iterations "
                           "unset")


def differentiable_result():
    """Whether a tape or accumulator is active (chunks are then joined with tapegpu ops)."""
    return bool(_thread.recorders)


class Result:
    """A Jacobian assembled chunk by chunk: written into one preallocated array, or, when an
    outer recorder is active, concatenated with tapegpu ops (differentiable)."""

    def __init__(self, shape, record):
        self.shape = tuple(shape)  # the full result's shape, first axis = the chunked one
        self.record = record
        self.parts = []
        self.array = None
        self.dev = None
        self.connected = None

    def add(self, start, part, place=None):
        """Chunk `part` (a tensor or None) for rows start...; `place(array, start, part)` writes
        it into the preallocated array (default: along axis 0)."""
        if part is None:
            self.connected = False
            return
        self.connected = True
        if self.record:
            self.parts.append(part)
            return
        if self.array is None:
            if start == 0 and part.shape[0] == self.shape[0] and place is None:
                self.parts = [part]  # one chunk is the whole result: no copy
                return
            self.dev = part._dev
            self.array = part._dev.xp.empty(self.shape, dtype=part._data.dtype)
        if place is None:
            self.array[start:start + part.shape[0]] = part._data
        else:
            place(self.array, start, part._data)

    def value(self, join):
        """The assembled tensor (None if unconnected): the preallocated array, or
        `join(parts)` (recorded chunks, or the one chunk that is the whole result)."""
        if not self.connected:
            return None
        if self.array is not None:
            return Tensor(self.array, self.dev)
        return join(self.parts)


def _sources(sources):
    flat = nest.flatten(sources)
    return flat, [source_uid(s, i) for i, s in enumerate(flat)]


def _value(t):
    return t._value if isinstance(t, Variable) else t


def _float(t):
    return _value(t)._data.dtype.kind in "fcV"


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


def _concat0(parts):
    return parts[0] if len(parts) == 1 else ops.concat(parts, axis=0)


def jacobian_arguments(tape, target, sources, parallel_iterations, use_pfor, what):
    """Checks shared by both modes' `jacobian`; returns (flat sources, their ids, target value,
    parallel_iterations)."""
    check_target(target, what)
    flat, uids = _sources(sources)
    tape._check_usable(what.split(".")[-1])
    parallel_iterations = check_parallel_iterations(parallel_iterations, what)
    y = _value(target)
    check_loop_fallback(tape, use_pfor, parallel_iterations, y.size, what)
    for s in flat:
        if not _float(s):
            warn_integer_source(s, what, stacklevel=5)
    if _float(target):
        n_in = sum(_value(s).size for s in flat if _float(s))
        check_size(what, y.size * n_in, y._data.itemsize, parallel_iterations, use_pfor)
    return flat, uids, y, parallel_iterations


def jacobian(tape, target, sources, unconnected, parallel_iterations, use_pfor):
    flat, uids, y, parallel_iterations = jacobian_arguments(
        tape, target, sources, parallel_iterations, use_pfor, "GradientTape.jacobian")
    tape._begin("jacobian")
    n = y.size
    record = differentiable_result()
    results = {u: Result((n,) + tuple(_value(s).shape), record) for u, s in zip(uids, flat)}
    if _float(target):
        reach = tape._reach(uids)
        if use_pfor or not n:  # an empty target: one empty chunk finds what is connected
            k = rows_per_chunk(n, parallel_iterations, widest(tape, uids, target),
                               y._data.itemsize) if n else 0
            chunks = range(0, n, k) if n else [0]
            if k == n and _diagonal_applies(y, record):
                got = _diagonal_sweep(tape, target, y, uids, reach)
                for u in uids:
                    results[u].add(0, got[u])
                chunks = []
            for start in chunks:
                kk = min(k, n - start)
                got = tape._sweep(tape._entries, [(target._uid, _basis(y, start, kk, n))],
                                     uids, 1, release=start + kk >= n and not tape._persistent,
                                     reach=reach)
                for u in uids:
                    results[u].add(start, got[u])
        else:
            for i in range(n):  # plain gradients, no batch axis: the reference for the above
                seed = Tensor(_basis(y, i, 1, n)._data.reshape(y.shape), y._dev)
                got = tape._sweep(tape._entries, [(target._uid, seed)], uids, 0,
                                     release=i == n - 1 and not tape._persistent, reach=reach)
                for u, s in zip(uids, flat):
                    g = got[u]
                    results[u].add(i, None if g is None else
                                   ops.reshape(g, (1,) + tuple(_value(s).shape)))
    tape._finish()
    out = []
    for u, s in zip(uids, flat):
        v = _value(s)
        full = results[u].value(_concat0)  # connectivity is structural: all chunks or none
        if not _float(s):
            out.append(None)
        elif full is None:
            out.append(ops.zeros(y.shape + v.shape, dtype=v.dtype)
                       if unconnected is UnconnectedGradients.ZERO else None)
        else:
            out.append(ops.reshape(full, y.shape + v.shape))
    return nest.pack_sequence_as(sources, out)


# -- per-example targets: the sweep on diagonal cotangents ---------------------------------------

def _diagonal_applies(y, record):
    """A per-example target (rank 1, more than one element) whose sweep runs on arrays, on a
    backend that does not count its launches (the steps here launch uncounted array calls)."""
    return (y.ndim == 1 and y.shape[0] > 1 and options.diagonal and options.array_sweep and
            not record and not _profilers and y._data.dtype.kind == "f" and
            not y._dev.counts_launches)


class Diagonal:
    """The cotangent V of shape (n,) + d.shape with V[k, ..., b at axis p, ...] =
    (k == b) d[..., b, ...], held as d."""
    __slots__ = ("d", "p", "shape", "dtype")

    def __init__(self, d, p):
        self.d = d
        self.p = p
        self.shape = (d.shape[p - 1],) + d.shape
        self.dtype = d.dtype

    def full(self, xp):
        """V itself: zeros, and d on the diagonal of axes 0 and p."""
        n, p = self.shape[0], self.p
        v = xp.zeros(self.shape, dtype=self.dtype)
        idx = xp.arange(n)
        xp.moveaxis(v, p, 1)[idx, idx] = xp.moveaxis(self.d, p - 1, 0)
        return v


def _diagonal_sweep(tape, target, y, uids, reach):
    """{source id: Tensor (n,) + source shape, or None}: the sweep of the identity seed with
    cotangents kept diagonal where the ops' steps allow it (the module docstring)."""
    dev = y._dev
    seed = Diagonal(dev.xp.ones(y.shape, dtype=y._data.dtype), 1)
    mode = _DiagonalMode(dev)
    forward, reach = (tape._entries, reach) if reach is not None else \
        sweep.reachable(tape._entries, uids)
    release = not tape._persistent
    try:
        token = quiet_enter()
        try:
            grads = sweep._sweep(forward, reach, [(target._uid, seed)], uids, 1, release, mode)
        finally:
            quiet_exit(token)
    except Exception as exc:  # as tape._sweep: a released tape remembers why
        if release:
            tape._failed = f"{type(exc).__name__}: {exc}"
        raise
    xp = dev.xp
    return {u: None if a is None else
            Tensor(a.full(xp) if type(a) is Diagonal else sweep._array(a), dev)
            for u, a in grads.items()}


class _DiagonalMode(sweep._ArrayMode):
    """The array sweep (batched) whose cotangents may be `Diagonal`: each op's step keeps the
    form where a rule below applies, else runs the batched step on the full value. Restoring
    dropped saved values and finishing are the array sweep's (without a ledger)."""

    in_place = False  # accumulation makes new arrays (a Diagonal has no buffer to add into)
    ledger = None
    watched = False

    def __init__(self, dev):
        self.dev = dev
        self.xp = dev.xp
        self.ns = sweep.array_ops(dev, sweep.TENSOR_OPS)
        self.restored = []

    @staticmethod
    def value(g):
        return g

    def add(self, a, b):
        if type(a) is Diagonal and type(b) is Diagonal and a.p == b.p:
            return Diagonal(a.d + b.d, a.p)
        xp = self.xp
        return (a.full(xp) if type(a) is Diagonal else a) + \
            (b.full(xp) if type(b) is Diagonal else b)

    def step(self, op):
        dev, xp = self.dev, self.xp
        batched = sweep._ArrayMode(dev, 1, None).step(op)
        single = sweep._ArrayMode(dev, 0, None).step(op)
        kind = op.per_example[0] if isinstance(op.per_example, tuple) else op.per_example
        if op.elementwise:
            rule = _passthrough if op.vjp is passthrough or (
                type(op.vjp) is tuple and all(r is passthrough for r in op.vjp)) \
                else _elementwise
        else:
            rule = _RULES.get(kind)  # None: the batched step on the full value

        def step(g, e, reach):
            if type(g) is Diagonal:
                if rule is not None:
                    cts = rule(g, e, reach, single, xp)
                    if cts is not None:
                        return cts
                g = g.full(xp)
            return batched(g, e, reach)
        return step


def _passthrough(g, e, reach, single, xp):
    """An elementwise op whose VJP is g itself for every input (add, read_variable)."""
    if any(s != g.d.shape for s in e.in_shapes):
        return _elementwise(g, e, reach, single, xp)
    return [g if u in reach else None for u in e.in_uids]


def _per_example(c, q, shape, xp):
    """Cotangent rows `c` (the op's output shape, batch axis q) of an input of `shape` that
    broadcasts along the batch axis: the per-example cotangents, (n,) + shape."""
    r = c.ndim
    lead = r - len(shape)
    axes = tuple(i for i in range(r) if i != q and (i < lead or shape[i - lead] == 1))
    if axes:
        c = xp.sum(c, axis=axes, keepdims=True)
    c = xp.moveaxis(c, q, 0)
    return c.reshape((c.shape[0],) + tuple(shape))


def _elementwise(g, e, reach, single, xp):
    """An elementwise op: its VJP of D, unbatched; diagonal for inputs with the batch axis."""
    d, q = g.d, g.p - 1
    n, r = g.shape[0], d.ndim
    cts = single(d, e, reach)
    out = []
    for u, c, shape in zip(e.in_uids, cts, e.in_shapes):
        if c is None or u not in reach:
            out.append(None)
            continue
        lead = r - len(shape)
        has_b = q >= lead and shape[q - lead] == n
        if c.shape == tuple(shape) and has_b:
            out.append(Diagonal(c, q - lead + 1))
        elif c.shape != d.shape:  # the rule summed over the batch axis already
            return None
        elif has_b:
            axes = tuple(i for i in range(r) if i != q and (i < lead or shape[i - lead] == 1))
            c = xp.sum(c, axis=axes, keepdims=True) if axes else c
            out.append(Diagonal(c.reshape(shape), q - lead + 1))
        else:
            out.append(_per_example(c, q, shape, xp))
    return out


# ops over their last axes, independent along the leading ones: whether the batch axis q of
# their output (of rank r) is a leading one, given their params
def _leading(g, e, reach, single, xp):
    """An op over its last axes, independent along the leading ones (the batch axis among
    them): its VJP of D, unbatched, for inputs with the batch axis in the same place."""
    d, q = g.d, g.p - 1
    n = g.shape[0]
    if not e.op.per_example[1](q, d.ndim, e.params) or any(
            len(s) <= q or s[q] != n or s[:q] != d.shape[:q] for s in e.in_shapes):
        return None
    cts = single(d, e, reach)
    out = []
    for u, c, shape in zip(e.in_uids, cts, e.in_shapes):
        if c is None or u not in reach:
            out.append(None)
        elif c.shape != tuple(shape):
            return None
        else:
            out.append(Diagonal(c, g.p))
    return out


def _reduction(g, e, reach, single, xp):
    """A reduction over other axes than the batch axis: its VJP of D, unbatched (D spread over
    the reduced axes), diagonal along the input's batch axis."""
    d, q = g.d, g.p - 1
    (shape,) = e.in_shapes
    r = len(shape)
    axis = e.params.get("axis")
    axes = set(range(r)) if axis is None else {a % r for a in (
        (axis,) if isinstance(axis, int) else axis)}
    kept = list(range(r)) if e.params.get("keepdims") else [i for i in range(r) if i not in axes]
    if len(kept) != d.ndim or kept[q] in axes:
        return None
    (c,) = single(d, e, reach)
    if c is None or e.in_uids[0] not in reach:
        return [None]
    if c.shape != tuple(shape):
        return None
    return [Diagonal(c, kept[q] + 1)]


def _outer(a, d, xp):
    """Row by row outer products (k, m) x (k, n) -> (k, m, n): numpy's C kernel where built
    (ops/kernels.py's einsum takes it too), the same products."""
    if cpu_kernels is not None and xp is np and a.dtype == d.dtype and \
            a.dtype in (np.float32, np.float64) and a.size and d.size:
        out = np.empty(a.shape + d.shape[1:], a.dtype)
        cpu_kernels.outer(np.ascontiguousarray(a), np.ascontiguousarray(d), out)
        return out
    return a[:, :, None] * d[:, None, :]


def _matmul(g, e, reach, single, xp):
    """A @ B of matrices with the batch axis in the product's rows: the cotangent of A is
    diagonal (D @ B^T), B's the per-example outer products A[k]^T D[k]."""
    if g.p != 1 or len(e.in_shapes[0]) != 2 or len(e.in_shapes[1]) != 2 or \
            set(e.params) - {"ta", "tb"} or g.dtype.kind != "f":
        return None
    ta, tb = e.params.get("ta", False), e.params.get("tb", False)
    a, b = (s._data for s in e.saved)
    d = g.d
    ua, ub = e.in_uids
    ca = cb = None
    if ua in reach:
        ca = d @ (b if tb else b.T)        # (rows, inner): op(a)'s cotangent, diagonal
        ca = Diagonal(ca, 1) if not ta else Diagonal(xp.ascontiguousarray(ca.T), 2)
    if ub in reach:
        am = a.T if ta else a               # op(a): (rows, inner)
        cb = _outer(am, d, xp)              # (rows = k, inner, cols): op(b)'s cotangent
        if tb:
            cb = cb.transpose(0, 2, 1)
    return [ca, cb]


# the rules by the kind an op declares (`Op.per_example`, ops/registry.py)
_RULES = {"leading": _leading, "reduction": _reduction, "product": _matmul}


def batch_arguments(tape, target, source, parallel_iterations, use_pfor):
    """Checks shared by both modes' `batch_jacobian`; returns (target value, source value,
    source id, batch size, parallel_iterations)."""
    what = "GradientTape.batch_jacobian"
    check_target(target, what)
    uid = source_uid(source, 0)
    tape._check_usable("batch_jacobian")
    parallel_iterations = check_parallel_iterations(parallel_iterations, what)
    y = _value(target)
    x = _value(source)
    # TensorFlow: both must have rank >= 2 and share their first (batch) dimension
    if y.ndim < 2 or x.ndim < 2 or y.shape[0] != x.shape[0]:
        raise ValueError(f"{what}: target {y.shape} and source {x.shape} must have rank 2 or "
                         "higher and share their first (batch) dimension")
    check_loop_fallback(tape, use_pfor, parallel_iterations, math.prod(y.shape[1:]), what)
    if not _float(source):
        warn_integer_source(source, what, stacklevel=5)
    elif _float(target):
        check_size(what, y.size * math.prod(x.shape[1:]), y._data.itemsize,
                   parallel_iterations, use_pfor)
    tape._begin("batch_jacobian")
    return y, x, uid, y.shape[0], parallel_iterations


def unconnected_batch(y, x, b, unconnected):
    """An unconnected batch_jacobian: zeros of the target's dtype (as TensorFlow) or None."""
    if unconnected is UnconnectedGradients.ZERO:
        return ops.zeros((b,) + y.shape[1:] + x.shape[1:], dtype=y.dtype)
    return None


def batch_jacobian(tape, target, source, unconnected, parallel_iterations, use_pfor):
    y, x, uid, b, parallel_iterations = batch_arguments(tape, target, source,
                                                        parallel_iterations, use_pfor)
    m = math.prod(y.shape[1:])
    inner = tuple(x.shape[1:])
    record = differentiable_result()
    result = Result((b, m) + inner, record)

    def place(array, start, part):  # part (k, b) + inner -> array[:, start:start + k]
        array[:, start:start + part.shape[0]] = part.swapaxes(0, 1)

    if _float(target) and _float(source):
        reach = tape._reach([uid])
        step = rows_per_chunk(m, parallel_iterations, widest(tape, [uid], target),
                              y._data.itemsize) if use_pfor and m else 1
        for start in range(0, m, step) if m else [0]:
            k = min(step, m - start)
            # rows are independent, so one basis vector per output coordinate serves them all
            seed = batch_basis(y, start, k, b, y.shape[1:])
            got = tape._sweep(tape._entries, [(target._uid, seed)], [uid], 1,
                                 release=start + k >= m and not tape._persistent,
                                 reach=reach)[uid]
            result.add(start, got, place)
    tape._finish()
    if not _float(source):
        return None
    full = result.value(lambda parts: ops.transpose(
        _concat0(parts), (1, 0) + tuple(range(2, 2 + len(inner)))))  # (b, m) + inner
    if full is None:
        return unconnected_batch(y, x, b, unconnected)
    return ops.reshape(full, (b,) + y.shape[1:] + inner)
