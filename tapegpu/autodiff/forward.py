"""Forward mode: JVP rules, `ForwardAccumulator`, and the functional `jvp`, `vjp`, `hvp`.

A tangent `t` of a tensor `x` has shape `batch_shape + x.shape` (any number of leading batch
axes, the same for every tangent of one computation); `None` is the zero tangent. One op call
maps its input tangents to the output tangent `batch_shape + out.shape` (`push`). The rule is
found in this order, and derived here once for every op that has no rule of its own:

1. `op.jvp`, a native rule, `jvp(ops, t, *saved, **params)` (one tensor argument) or
   `jvp(ops, ts, *saved, **params)` (several; `ts` a tuple with None for zero tangents), which
   returns the tangent in exactly `batch_shape + out.shape` (or None);
2. `elementwise=True`: the Jacobian of each input is diagonal, so it is its own transpose and
   `J t = sum_i vjp_i(t_i)`. Each `t_i` is first lifted to the output's rank (size-1 axes
   inserted after the batch axes) so that it broadcasts against the saved values exactly as
   the input did in the forward call; a diagonal Jacobian is only diagonal in that layout;
3. `linear=True`: `J t = op(t)`, the op itself applied to the tangents (for the linear ops
   whose forward treats extra leading axes as batch axes; the others have native rules).

Rules see only the op's declared saves, so the same rule serves a `ForwardAccumulator` (live
tensors) and the forward sweep over a tape's entries (`forward_jacobian.py`). Every rule is
written with tapegpu ops: its computation is recorded by outer tapes and accumulators, which is
what makes forward-over-reverse and reverse-over-forward work. An op with a VJP and none of the
above supports reverse mode only and says so (`NoJVPError`).
"""
import functools
import weakref

import numpy as np

from ..core import nest
from .. import ops
from ..ops import TENSOR_OPS
from ..ops.registry import apply, passthrough
from ..core.tensor import Tensor, Variable, _thread
from .recorder import UnconnectedGradients, as_unconnected


class NoJVPError(NotImplementedError):
    """An op (or custom gradient) that supports reverse mode only was used in forward mode."""


def has_jvp(op):
    """Whether `op` has a JVP rule, native or derived."""
    return op.jvp is not None or op.elementwise or op.linear


def push(op, ts, saved, params, in_shapes):
    """The output tangent of one op call (`batch + out.shape`), or None if it is zero."""
    k = first_index(ts)
    nb = ts[k].ndim - len(in_shapes[k])
    if op.jvp is not None:
        arg = ts[0] if len(in_shapes) == 1 and not op.variadic else tuple(ts)
        return op.jvp(TENSOR_OPS, arg, *saved, **params)
    if op.elementwise:
        if op.linear and len(ts) == 1:
            return apply(op, (ts[0],), params)
        return _elementwise_jvp(op, ts, saved, params, in_shapes, nb)
    if op.linear:
        batch = ts[k].shape[:nb]
        return apply(op, tuple(zeros_on(ts[k], batch + tuple(s)) if t is None else t
                               for t, s in zip(ts, in_shapes)), params)
    raise NoJVPError(f"{op.name}: this op has a gradient (VJP) but no forward-mode (JVP) rule, "
                     "so it supports reverse mode only; use tg.GradientTape, or give the op a "
                     "`jvp=` rule in its registry entry")


def _elementwise_jvp(op, ts, saved, params, in_shapes, nb):
    # a diagonal Jacobian: J_i t_i = d_i * t_i = J_i^T t_i, i.e. the VJP rule applied to t_i
    rules = op.vjp
    if len(in_shapes) == 1:
        return _call(rules[0] if type(rules) is tuple else rules, ts[0], saved, params)
    s0 = in_shapes[0]
    out_shape = s0 if all(s == s0 for s in in_shapes) else np.broadcast_shapes(*in_shapes)
    k = first_index(ts)
    total = None
    for i, t in enumerate(ts):
        if t is None:
            continue
        if nb and len(in_shapes[i]) < len(out_shape):  # without batch axes numpy aligns them
            t = lift(t, nb, len(out_shape))
        d = _call(rules[i], t, saved, params) if type(rules) is tuple else \
            rules(TENSOR_OPS, t, *saved, **params)[i]
        if d is not None:
            total = d if total is None else ops.add(total, d)
    return fit(total, ts[k].shape[:nb], out_shape)


def _call(rule, t, saved, params):
    return t if rule is passthrough else rule(TENSOR_OPS, t, *saved, **params)


def first_index(ts):
    """The index of the first non-zero tangent."""
    for i, t in enumerate(ts):
        if t is not None:
            return i


def lift(t, nb, ndim):
    """t (batch + shape) with size-1 axes after the `nb` batch axes, up to `ndim` non-batch
    axes: it then broadcasts against tensors of rank `ndim` as the primal did."""
    k = ndim - (t.ndim - nb)
    if k <= 0:
        return t
    return ops.reshape(t, t.shape[:nb] + (1,) * k + t.shape[nb:])


def fit(t, batch, shape):
    """A rule's tangent broadcast to `batch + shape` (rules may return a broadcastable one)."""
    if t is None:
        return None
    target = tuple(batch) + tuple(shape)
    if t.shape == target:
        return t
    return ops.broadcast_to(lift(t, len(batch), len(shape)), target)


def zeros_on(like, shape):
    """Zeros of `shape` with the dtype and device of `like` (not the current device's)."""
    return Tensor(like._dev.xp.zeros(tuple(shape), dtype=like._data.dtype), like._dev)


# -- ForwardAccumulator -------------------------------------------------------------------------

class ForwardAccumulator:
    """Computes Jacobian-vector products ("JVP"s) using forward-mode autodiff.

    While the accumulator is active (`with`), every op whose inputs have tangents gets its
    output's tangent computed at once; `acc.jvp(y)` looks it up (no computation). `primals` is a
    tensor, variable or nested structure of them; `tangents` has the same structure and shapes.
    Accumulators nest strictly (as TensorFlow's): an accumulator sees the JVP computations of
    the accumulators and tapes inside it, never those of the ones outside, so the outer one
    takes higher-order JVPs, and a tape inside an accumulator gives forward-over-reverse
    Hessian-vector products. `batch_ndim` (a tapegpu extension) lets every tangent carry that
    many leading batch axes: many JVPs in one pass.

    >>> x = tg.constant(1.1)
    >>> with tg.autodiff.ForwardAccumulator(x, tg.constant(1.0)) as outer:
    ...     with tg.autodiff.ForwardAccumulator(x, tg.constant(1.0)) as inner:
    ...         y = x ** 3.5
    >>> round(float(inner.jvp(y)), 4)  # 3.5 * 1.1 ** 2.5
    4.4417
    >>> round(float(outer.jvp(inner.jvp(y))), 4)  # 3.5 * 2.5 * 1.1 ** 1.5
    10.0948
    """

    def __init__(self, primals, tangents, batch_ndim=0):
        self._tangents = {}  # tensor or variable id -> tangent
        self._refs = {}  # tensor id -> weak reference that forgets its tangent with the tensor
        self._recording = False
        self._batch_ndim = int(batch_ndim)
        flat_p = nest.flatten(primals)
        flat_t = nest.flatten(tangents)
        if len(flat_p) != len(flat_t):
            raise ValueError(f"ForwardAccumulator: {len(flat_p)} primals but {len(flat_t)} "
                             "tangents; they must have the same structure")
        seen = set()
        for p, t in zip(flat_p, flat_t):
            if not isinstance(p, (Tensor, Variable)):
                raise TypeError(f"ForwardAccumulator: primals must be tg.Tensor or tg.Variable, "
                                f"got {type(p).__name__}")
            if p._uid in seen:
                raise ValueError(f"ForwardAccumulator: {p!r} was specified as a primal multiple "
                                 "times; if that was intended, sum its tangents")
            seen.add(p._uid)
            self._watch(p, t)

    def _watch(self, p, t):
        v = p._value if isinstance(p, Variable) else p
        if t is None:  # TensorFlow raises ValueError too (None converts to no tensor)
            raise ValueError(f"ForwardAccumulator: the tangent of the primal {p!r} is None; "
                             "pass a tensor of the primal's shape (zeros for no direction)")
        if v._data.dtype.kind not in "fcV":
            return  # integer primals carry no tangent (TensorFlow only warns)
        t = ops.convert_to_tensor(t, dtype=v.dtype)
        nb = self._batch_ndim
        if t.shape[nb:] != v.shape or t.ndim != v.ndim + nb:
            raise ValueError(f"ForwardAccumulator: tangent of shape {t.shape} for a primal of "
                             f"shape {v.shape}" + (f" with {nb} batch axes" if nb else "") +
                             "; they must match")
        if isinstance(p, Variable):
            self._tangents[p._uid] = t
        else:
            self._keep(p, t)

    def _keep(self, x, t):
        uid = x._uid
        self._tangents[uid] = t
        # the callback holds the accumulator weakly: a strong reference would make a cycle
        # (accumulator -> refs -> weakref -> callback -> refs) that keeps every tangent alive
        # until the cycle collector runs
        self._refs[uid] = weakref.ref(x, functools.partial(_forget, weakref.ref(self), uid))

    # -- context --------------------------------------------------------------------------------
    def __enter__(self):
        if self._recording:
            raise ValueError("ForwardAccumulator: the accumulator is already recording")
        self._stack = _thread.recorders  # this thread's: it sees this thread's ops
        self._stack.append(self)
        self._recording = True
        return self

    def __exit__(self, *exc):
        stack = self._stack
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is self:
                del stack[i]
                break
        self._recording = False

    # -- recording (called by registry.apply and Variable._read) ---------------------------------
    def record(self, op, inputs, out, params):
        get = self._tangents.get
        ts = [get(x._uid) for x in inputs]
        if all(t is None for t in ts):
            return
        # the JVP's own ops are seen by the recorders outside this one only (strict nesting)
        active = _thread.recorders
        i = _index(self, active)
        inner = active[i:]
        del active[i:]
        try:
            t = push(op, ts, op.saved_values(inputs, out), params,
                     [x._data.shape for x in inputs])
        finally:
            active.extend(inner)
        if t is not None:
            self._keep(out, t)

    def record_variable_read(self, var, out):
        t = self._tangents.get(var._uid)
        if t is None:
            return out
        if out is None:
            out = Tensor(var._value._data, var._value._dev)
        self._keep(out, t)
        return out

    # -- results -----------------------------------------------------------------------------------
    def jvp(self, primals, unconnected_gradients="none"):
        """The JVPs computed for `primals` (a tensor, variable or nested structure of them):
        tensors of the primals' shapes (plus batch axes), or None where no JVP was computed
        (zeros with `unconnected_gradients='zero'`). Performs no computation.

        >>> v = tg.Variable([1.0, 2.0])
        >>> with tg.autodiff.ForwardAccumulator(v, tg.constant([1.0, 0.0])) as acc:
        ...     with tg.GradientTape() as tape:
        ...         y = tg.reduce_sum(v ** 3.0)
        ...     backward = tape.gradient(y, v)
        >>> acc.jvp(backward).numpy()  # forward-over-backward Hessian-vector product
        array([6., 0.], dtype=float32)
        """
        zero = as_unconnected(unconnected_gradients) is UnconnectedGradients.ZERO

        def fetch(x):
            if x is None:
                return None
            if not isinstance(x, (Tensor, Variable)):
                raise TypeError(f"ForwardAccumulator.jvp: expected tg.Tensor or tg.Variable, "
                                f"got {type(x).__name__}")
            t = self._tangents.get(x._uid)
            if t is None and zero:
                v = x._value if isinstance(x, Variable) else x
                batch = self._batch_shape()
                t = zeros_on(v, batch + v.shape)
            return t
        return nest.map_structure(fetch, primals)

    def _batch_shape(self):
        nb = self._batch_ndim
        for t in self._tangents.values():
            return t.shape[:nb]
        return ()

    def __repr__(self):
        return f"<ForwardAccumulator with {len(self._tangents)} tangents" + \
            (", recording>" if self._recording else ">")


def _forget(acc_ref, uid, _):
    """A primal was freed: its accumulator (if still alive) forgets its tangent."""
    acc = acc_ref()
    if acc is not None:
        acc._tangents.pop(uid, None)
        acc._refs.pop(uid, None)


def _index(rec, active):
    for i in range(len(active) - 1, -1, -1):
        if active[i] is rec:
            return i
    raise RuntimeError("ForwardAccumulator: recording while not active")


# -- functional API -------------------------------------------------------------------------------
