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
from .forward import jvp_from_vjp
from ..ops.registry import Op
from ..core.tensor import Tensor, Variable, _thread


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
    from ..core.tensor import convert_to_tensor
    return convert_to_tensor(g)


def _unique(vs):
    out = []
    for v in vs:
        if not any(v is w for w in out):
            out.append(v)
    return out


def _takes_kwargs(fn):
    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())
