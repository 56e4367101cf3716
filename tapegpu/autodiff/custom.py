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
from .forward import ForwardAccumulator, NoJVPError, first_index, fit
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

    `grad_fn` gets one upstream gradient per output of `f` (integer outputs included) and
    returns one gradient per argument (nested arguments count by their leaves, as in
    TensorFlow), each None or of its argument's shape and dtype. On a method, `self` is not an
    argument.

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
    return _CustomGradient(f)


class _CustomGradient:
    """A `custom_gradient` function; as a method, its `self` is bound, not an input."""

    def __init__(self, f, bound=()):
        functools.update_wrapper(self, f)
        self._f = f
        self._bound = bound

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return _CustomGradient(self._f, (obj,))

    def __call__(self, *args, **kwargs):
        return _custom_call(self._f, self._bound, args, kwargs)


def _fresh(r, name):
    """An output of a custom-gradient function as a new tensor (TensorFlow's identity)."""
    if isinstance(r, Tensor):
        return Tensor(r._data, r._dev)
    if isinstance(r, Variable):
        return Tensor(r._value._data, r._value._dev)
    if r is None:
        raise TypeError(f"custom_gradient {name}: the function returned None as an output; "
                        "outputs must be tensors (or values convertible to them)")
    return convert_to_tensor(r)


def _custom_call(f, bound, args, kwargs):
    name = f.__name__
    seen = []
    watcher = seen.append
    _thread.variable_watchers.append(watcher)
    try:
        result, grad_fn = f(*bound, *args, **kwargs)
    finally:
        _thread.variable_watchers.remove(watcher)
    flat = nest.flatten(result)
    outs = [_fresh(r, name) for r in flat]
    if not _thread.recorders:
        return nest.pack_sequence_as(result, outs)
    flat_args = nest.flatten(args)  # an empty tuple is no argument, a list is its leaves
    arg_pos = [i for i, a in enumerate(flat_args) if isinstance(a, (Tensor, Variable))]
    variables = _unique([v for v in seen if not any(v is flat_args[i] for i in arg_pos)])
    if variables and "variables" not in inspect.signature(grad_fn).parameters and \
            not _takes_kwargs(grad_fn):
        raise TypeError(f"custom_gradient {name}: the function reads variables "
                        f"{[v.name for v in variables]}, so grad_fn must accept a keyword "
                        "argument 'variables' and return (input_grads, variable_grads)")
    for rec in _thread.recorders:  # a variable argument is read (as TensorFlow converts it)
        note = getattr(rec, "note_variable", None)
        if note is not None:
            for i in arg_pos:
                if isinstance(flat_args[i], Variable):
                    note(flat_args[i])
    inputs = [_Slot(flat_args[i]) if isinstance(flat_args[i], Variable) else flat_args[i]
              for i in arg_pos]
    inputs += [_Slot(v) for v in variables]
    specs = [_spec(flat_args[i]) for i in arg_pos] + [_spec(v) for v in variables]
    for k, out in enumerate(outs):
        if out._data.dtype.kind not in "fcV":
            continue  # no gradient flows into an integer output; grad_fn still gets its slot
        rule = _rule(grad_fn, k, outs, len(flat_args), arg_pos, variables, specs, name)
        op = Op(name, args=tuple(f"a{i}" for i in range(len(inputs))), vjp=rule,
                jvp=jvp_from_vjp(rule, out, [x._data.shape for x in inputs], name),
                batched=False, same_dtype=False, variadic=True, tensor_rule=True)
        for rec in _thread.recorders:
            rec.record(op, inputs, out, {})
    return nest.pack_sequence_as(result, outs)


def _spec(x):
    v = x._value if isinstance(x, Variable) else x
    return v._data.shape, v._data.dtype


def _rule(grad_fn, k, outs, n_args, arg_pos, variables, specs, name):
    """The VJP of output k: grad_fn with upstream g for output k and zeros for the others."""
    def vjp(ops, g):
        upstream = [g if j == k else ops.zeros_like(o) for j, o in enumerate(outs)]
        if variables:
            got = grad_fn(*upstream, variables=variables)
            if not isinstance(got, (list, tuple)) or len(got) != 2:
                raise ValueError(f"custom_gradient {name}: grad_fn must return (input_grads, "
                                 "variable_grads) when the function reads variables")
            in_grads, var_grads = got
            var_grads = list(var_grads)
        else:
            in_grads, var_grads = grad_fn(*upstream), []
        in_grads = nest.flatten(in_grads)
        if len(in_grads) != n_args:
            raise ValueError(f"custom_gradient {name}: grad_fn returned {len(in_grads)} input "
                             f"gradients for {n_args} arguments")
        if len(var_grads) != len(variables):
            raise ValueError(f"custom_gradient {name}: grad_fn returned {len(var_grads)} "
                             f"variable gradients for {len(variables)} variables")
        grads = [in_grads[i] for i in arg_pos] + var_grads
        return tuple(_checked(c, spec, i, name) for i, (c, spec) in enumerate(zip(grads, specs)))
    return vjp


def _checked(g, spec, i, name):
    """grad_fn's gradient for input i, which must have the input's shape and dtype."""
    shape, dtype = spec
    if g is None or dtype.kind not in "fcV":
        return None
    if not isinstance(g, Tensor):
        g = convert_to_tensor(g, dtype=dtype) if isinstance(g, (int, float)) else \
            convert_to_tensor(g)
    if g._data.shape != shape:
        raise ValueError(f"custom_gradient {name}: grad_fn returned a gradient of shape "
                         f"{g._data.shape} for input {i} of shape {shape}; it must have the "
                         "input's shape")
    if g._data.dtype != dtype:
        raise TypeError(f"custom_gradient {name}: grad_fn returned a {g._data.dtype} gradient "
                        f"for input {i} of dtype {dtype}; it must have the input's dtype "
                        "(use tg.cast)")
    return g


def _unique(vs, by_uid=False):
    out = []
    uids = set()
    for v in vs:
        if by_uid:
            if v._uid not in uids:
                uids.add(v._uid)
                out.append(v)
        elif not any(v is w for w in out):
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


def grad_pass_through(f):
    """Decorator: `f` runs as usual, and its gradient is the identity (TensorFlow's
    `tf.grad_pass_through`): each output's upstream gradient is passed to the argument at the
    same position, so `f` must return as many outputs as it takes arguments, of the same
    shapes and dtypes. Variables `f` reads get no gradient.

    >>> x = tg.Variable(1.0)
    >>> z = tg.Variable(3.0)
    >>> with tg.GradientTape() as t:
    ...     y = tg.grad_pass_through(x.assign)(z ** 2)  # a non-differentiable assignment
    >>> float(t.gradient(y, z))
    6.0
    """
    @functools.wraps(f)
    def passed(*args, **kwargs):
        def grad_fn(*upstream, variables=None):
            if variables is not None:
                return upstream, [None] * len(variables)
            return upstream
        return f(*args, **kwargs), grad_fn

    return _CustomGradient(passed)


# -- recompute_grad: a custom gradient that re-runs the function under a tape of its own ------

def recompute_grad(f):
    """Decorator: gradients through `f` recompute its inside instead of keeping it.

    Only `f`'s inputs are kept on the tape; the backward sweep re-runs `f` (so `f` must be
    deterministic: random ops inside it draw again). `f` returns a tensor or a list/tuple of
    them. Works for higher-order gradients and in forward mode (the JVP re-runs `f` under a
    `ForwardAccumulator`).

    >>> layer = tg.recompute_grad(lambda x: tg.sin(tg.sin(x) * 2.0))
    >>> x = tg.constant([0.1, 0.2])
    >>> with tg.GradientTape() as t:
    ...     t.watch(x)
    ...     y = tg.reduce_sum(layer(x))
    >>> t.gradient(y, x).shape
    (2,)
    """
    name = f"recompute_grad({getattr(f, '__name__', type(f).__name__)})"

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
        flat = nest.flatten(result)
        for r in flat:
            if not isinstance(r, Tensor):
                raise TypeError(f"{name}: f must return a tensor or a list/tuple of tensors, "
                                f"got {type(r).__name__}")
        # each tensor once: an argument passed twice is one input (its gradient is not doubled)
        tensors = _unique([a for a in nest.flatten(args) if isinstance(a, Tensor)], by_uid=True)
        variables = _unique(seen)
        for rec in outer:
            note = getattr(rec, "note_variable", None)
            for v in variables:
                if note is not None:
                    note(v)
        outs = [Tensor(r._data, r._dev) for r in flat]
        inputs = tensors + [_Slot(v) for v in variables]
        for k, out in enumerate(outs):
            if out._data.dtype.kind not in "fcV":
                continue
            op = Op(name, args=tuple(f"a{i}" for i in range(len(inputs))),
                    vjp=_recompute_rule(f, args, tensors, variables, k),
                    jvp=_recompute_jvp(f, args, tensors, variables, k),
                    same_dtype=False, variadic=True, tensor_rule=True)
            for rec in outer:
                rec.record(op, inputs, out, {})
        return nest.pack_sequence_as(result, outs)

    return wrapped


def _recompute_rule(f, args, tensors, variables, k):
    def vjp(ops, g):
        with GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(tensors)
            tape.watch(variables)
            y = nest.flatten(f(*args))[k]
        return tuple(tape.batched_gradient(y, tensors + variables, g,
                                           batch_ndim=g.ndim - y.ndim))
    return vjp


def _recompute_jvp(f, args, tensors, variables, k):
    """Output k's tangent: `f` re-run under an accumulator seeded with the input tangents."""
    primals = tensors + variables

    def jvp(ops, ts):
        i = first_index(ts)
        nb = ts[i].ndim - len(primals[i].shape)
        watched = [(p, t) for p, t in zip(primals, ts) if t is not None]
        with ForwardAccumulator([p for p, _ in watched], [t for _, t in watched],
                                batch_ndim=nb) as acc:
            y = nest.flatten(f(*args))[k]
        return acc.jvp(y)
    return jvp
