"""`custom_gradient`: a function that supplies its own VJP.

The function runs normally (outer tapes record its inside, which `grad_fn` may close over for
higher-order gradients); its outputs get fresh identities whose only recorded producer is one
entry calling `grad_fn`. Variables read inside the function are found by a watcher and passed
to `grad_fn(*upstream, variables=...)`, which then returns `(input_grads, variable_grads)`.
In forward mode the entry's JVP is grad_fn transposed (`forward.jvp_from_vjp`: grad_fn is
linear in the upstream, so its derivative with respect to the upstream is the Jacobian), which
needs grad_fn written with tapegpu ops; otherwise the function supports reverse mode only.
"""
import functools
import inspect

from ..core import nest
from . import sweep
from .forward import NoJVPError, first_index, fit
from .tape import GradientTape
from ..ops.registry import Op
from ..core.tensor import Tensor, Variable, _thread, convert_to_tensor


class _Slot:
    """A variable as an entry input: its id and its current value's array."""
    __slots__ = ("_uid", "_data")

    def __init__(self, var):
        self._uid = var._uid
        self._data = var._value._data


def custom_gradient(f=None):
    """Decorator: `f(*args)` returns `(y, grad_fn)`, and `grad_fn(*dy)` the input gradients.

    >>> @tg.custom_gradient
    ... def clipped_identity(x):
    ...     def grad_fn(dy):
    ...         return tg.clip_by_value(dy, -1.0, 1.0)
    ...     return tg.identity(x), grad_fn
    >>> x = tg.constant(2.0)
    >>> with tg.GradientTape() as t:
    ...     t.watch(x)
    ...     y = clipped_identity(x) * 5.0
    >>> float(t.gradient(y, x))
    1.0
    """
    if f is None:
        return custom_gradient

    @functools.wraps(f)
    def decorated(*args, **kwargs):
        seen = []
        watcher = seen.append
        _thread.variable_watchers.append(watcher)
        try:
            result, grad_fn = f(*args, **kwargs)
        finally:
            _thread.variable_watchers.remove(watcher)
        flat = nest.flatten(result)
        outs = [Tensor(r._data, r._dev) if isinstance(r, Tensor) else r for r in flat]
        if not _thread.recorders:
            return nest.pack_sequence_as(result, outs)
        arg_pos = [i for i, a in enumerate(args) if isinstance(a, (Tensor, Variable))]
        variables = _unique([v for v in seen if not any(v is args[i] for i in arg_pos)])
        if variables and "variables" not in inspect.signature(grad_fn).parameters and \
                not _takes_kwargs(grad_fn):
            raise TypeError(f"custom_gradient {f.__name__}: the function reads variables "
                            f"{[v.name for v in variables]}, so grad_fn must accept a keyword "
                            "argument 'variables' and return (input_grads, variable_grads)")
        inputs = [_Slot(args[i]) if isinstance(args[i], Variable) else args[i] for i in arg_pos]
        inputs += [_Slot(v) for v in variables]
        float_outs = [o for o in outs if isinstance(o, Tensor) and o._data.dtype.kind in "fc"]
        for k, out in enumerate(float_outs):
            rule = _rule(grad_fn, k, float_outs, len(args), arg_pos, variables)
            op = Op(f.__name__, args=tuple(f"a{i}" for i in range(len(inputs))), vjp=rule,
                    jvp=jvp_from_vjp(rule, out, [x._data.shape for x in inputs], f.__name__),
                    batched=False, same_dtype=False, variadic=True, tensor_rule=True)
            for rec in _thread.recorders:
                rec.record(op, inputs, out, {})
        return nest.pack_sequence_as(result, outs)

    return decorated


def _rule(grad_fn, k, outs, n_args, arg_pos, variables):
    """The VJP of output k: grad_fn with upstream g for output k and zeros for the others."""
    def vjp(ops, g):
        upstream = [g if j == k else ops.zeros_like(o) for j, o in enumerate(outs)]
        if variables:
            in_grads, var_grads = grad_fn(*upstream, variables=variables)
            var_grads = list(var_grads)
        else:
            in_grads, var_grads = grad_fn(*upstream), []
        in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
        if len(in_grads) != n_args:
            raise ValueError(f"custom_gradient: grad_fn returned {len(in_grads)} input gradients "
                             f"for {n_args} arguments")
        if len(var_grads) != len(variables):
            raise ValueError(f"custom_gradient: grad_fn returned {len(var_grads)} variable "
                             f"gradients for {len(variables)} variables")
        picked = [_as_tensor(in_grads[i]) for i in arg_pos]
        return tuple(picked + [_as_tensor(v) for v in var_grads])
    return vjp


def _as_tensor(g):
    if g is None or isinstance(g, Tensor):
        return g
    return convert_to_tensor(g)


def _unique(vs):
    out = []
    for v in vs:
        if not any(v is w for w in out):
            out.append(v)
    return out


def _takes_kwargs(fn):
    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())


# -- the transpose trick, for custom gradients ---------------------------------------------------

def jvp_from_vjp(vjp, out, in_shapes, name):
    """A JVP rule, for an op built per call (custom gradients, and any op whose owner opts in),
    from its VJP rule `vjp(ops, g, *saved, **params)` (a tuple of cotangents, linear in g) by
    `transpose_vjp`. Keeps only the output's shape, dtype and device."""
    spec = (out._data.shape, out._data.dtype, out._dev)

    def jvp(ops, ts, *saved, **params):
        def rule(g):
            cts = vjp(ops, g, *saved, **params)
            return cts if isinstance(cts, (tuple, list)) else (cts,)
        return transpose_vjp(rule, spec, ts, in_shapes, name)
    return jvp


def transpose_vjp(vjp, out_spec, ts, in_shapes, name):
    """J t from a VJP rule `g -> (J_1^T g, J_2^T g, ...)` that is linear in g.

    For every g, <g, J t> = sum_i <J_i^T g, t_i>, so J t is the gradient with respect to g of
    sum_i <vjp(g)_i, t_i>: reverse mode through the VJP rule itself. A linear rule has the same
    derivative everywhere; it is taken at g = 1 (so that a rule that ignores the upstream shows
    up as a non-zero constant). A rule must be written with tapegpu ops: a non-zero result that
    does not depend on g through them raises `NoJVPError` (the function supports reverse mode
    only). A rule that is not linear in g gets linearised at g = 1.
    """
    k = first_index(ts)
    nb = ts[k].ndim - len(in_shapes[k])
    shape, dtype, dev = out_spec
    g = Tensor(dev.xp.ones(shape, dtype=dtype), dev)
    with GradientTape() as tape:
        tape.watch(g)
        cts = vjp(g)
    seeds = []
    for i, (c, t) in enumerate(zip(cts, ts)):
        if c is None or t is None:
            continue
        if c._uid not in tape._tracked:
            if not c._dev.xp.any(c._data):
                continue  # a constant zero gradient: no contribution
            raise NoJVPError(f"custom_gradient {name}: grad_fn's result for input {i} is not "
                             "computed from the upstream gradient with tapegpu ops, so the "
                             "function supports reverse mode only (forward mode transposes "
                             "grad_fn, which needs it written with tapegpu ops)")
        seeds.append((c._uid, fit(t, t.shape[:nb], c.shape)))
    if not seeds:
        return None
    return sweep.backward(tape._entries, seeds, [g._uid], nb)[g._uid]


# -- recompute_grad: a custom gradient that re-runs the function under a tape of its own ------

def recompute_grad(f):
    """Decorator: gradients through `f` recompute its inside instead of keeping it.

    Only `f`'s inputs are kept on the tape; the backward sweep re-runs `f` (so `f` must be
    deterministic: random ops inside it draw again). Works for higher-order gradients.

    >>> layer = tg.recompute_grad(lambda x: tg.sin(tg.sin(x) * 2.0))
    >>> x = tg.constant([0.1, 0.2])
    >>> with tg.GradientTape() as t:
    ...     t.watch(x)
    ...     y = tg.reduce_sum(layer(x))
    >>> t.gradient(y, x).shape
    (2,)
    """
    @functools.wraps(f)
    def wrapped(*args):
        active = _thread.recorders
        if not active:
            return f(*args)
        seen = []
        _thread.variable_watchers.append(seen.append)
        outer = list(active)
        active.clear()  # nothing inside f is recorded: that is the memory saved
        try:
            result = f(*args)
        finally:
            active.extend(outer)
            _thread.variable_watchers.remove(seen.append)
        if not isinstance(result, Tensor):
            raise TypeError(f"recompute_grad({f.__name__}): f must return one tensor, got "
                            f"{type(result).__name__}")
        tensors = [a for a in args if isinstance(a, Tensor)]
        variables = []
        for v in seen:
            if not any(v is w for w in variables):
                variables.append(v)
        for rec in outer:
            note = getattr(rec, "note_variable", None)
            for v in variables:
                if note is not None:
                    note(v)
        out = Tensor(result._data, result._dev)
        op = Op(f"recompute_grad({f.__name__})",
                args=tuple(f"a{i}" for i in range(len(tensors) + len(variables))),
                vjp=_recompute_rule(f, args, tensors, variables), same_dtype=False,
                variadic=True, tensor_rule=True)
        inputs = tensors + [_VarSlot(v) for v in variables]
        for rec in outer:
            rec.record(op, inputs, out, {})
        return out

    return wrapped


class _VarSlot:
    __slots__ = ("_uid", "_data")

    def __init__(self, var):
        self._uid = var._uid
        self._data = var._value._data


def _recompute_rule(f, args, tensors, variables):
    def vjp(ops, g):
        with GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(tensors)
            tape.watch(variables)
            y = f(*args)
        return tuple(tape.batched_gradient(y, tensors + variables, g,
                                           batch_ndim=g.ndim - y.ndim))
    return vjp
