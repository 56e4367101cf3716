"""Control flow in eager execution: `cond`, `while_loop`, `map_fn`, `scan`, `foldl`, `foldr`,
`switch_case`, with TensorFlow's names, arguments and structure rules.

Eagerly, a branch or an iteration is a Python call on tensors: every op it runs is recorded by
the active tapes and accumulators, so gradients (reverse and forward mode) flow through the
branch taken and every iteration run, as in TensorFlow's eager mode. Arguments that only shape
graph building in TensorFlow (`parallel_iterations`, `swap_memory`, `back_prop`,
`shape_invariants`) are accepted and checked, not needed.
"""
from ..core import nest
from ..core.tensor import Tensor, Variable, convert_to_tensor
from ._base import public
from .registry import InvalidArgumentError
from .shape import stack, unstack


def _truth(pred, op):
    """A Python bool from a bool scalar (a tensor or a Python bool), as TF's eager predicate."""
    if isinstance(pred, (Tensor, Variable)):
        t = convert_to_tensor(pred)
        if t.shape != () or t.dtype.name != "bool":
            raise InvalidArgumentError(f"{op}: the predicate must be a bool scalar, got "
                                       f"{t.dtype.name} of shape {t.shape}")
        return bool(t.numpy())
    if isinstance(pred, bool):
        return pred
    raise TypeError(f"{op}: the predicate must be a bool scalar tensor or a Python bool, got "
                    f"{type(pred).__name__}")


def cond(pred, true_fn=None, false_fn=None, name=None):
    """`true_fn()` if `pred` else `false_fn()`, as tf.cond (eagerly: only the branch taken runs).

    >>> x = tg.constant(2.0)
    >>> float(tg.cond(x > 1.0, lambda: x * 10.0, lambda: x))
    20.0
    """
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("cond: true_fn and false_fn must be callables")
    return true_fn() if _truth(pred, "cond") else false_fn()


def switch_case(branch_index, branch_fns, default=None, name=None):
    """`branch_fns[branch_index]()`, or `default()` for an index out of range (else the last
    branch, as TF), as tf.switch_case; `branch_fns` may be a list or a dict {int: fn}.

    >>> float(tg.switch_case(tg.constant(1), [lambda: tg.constant(1.0), lambda: tg.constant(2.0)]))
    2.0
    """
    fns = dict(branch_fns) if isinstance(branch_fns, dict) else dict(enumerate(branch_fns))
    if not fns or not all(callable(f) for f in fns.values()):
        raise TypeError("switch_case: branch_fns must be a non-empty list or dict of callables")
    i = convert_to_tensor(branch_index) if not isinstance(branch_index, int) else branch_index
    if isinstance(i, Tensor):
        if i.shape != () or i.dtype.name not in ("int32", "int64"):
            raise InvalidArgumentError(f"switch_case: branch_index must be an int32 or int64 "
                                       f"scalar, got {i.dtype.name} of shape {i.shape}")
        i = int(i.numpy())
    if i in fns:
        return fns[i]()
    return default() if default is not None else fns[max(fns)]()


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10,
               back_prop=True, swap_memory=False, maximum_iterations=None, name=None):
    """Repeats `loop_vars = body(*loop_vars)` while `cond(*loop_vars)`, at most
    `maximum_iterations` times, as tf.while_loop; returns the loop variables in their structure.
    `body` must return the structure of `loop_vars`, with the same dtypes (TF's rule).

    >>> i, total = tg.while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s + i),
    ...                          (tg.constant(0), tg.constant(0)))
    >>> int(i), int(total)
    (4, 6)
    """
    if not callable(cond) or not callable(body):
        raise TypeError("while_loop: cond and body must be callables")
    if parallel_iterations is not None and int(parallel_iterations) < 1:
        raise ValueError(f"while_loop: parallel_iterations must be positive, got "
                         f"{parallel_iterations}")
    single = not isinstance(loop_vars, (list, tuple))
    args = [loop_vars] if single else list(loop_vars)
    n = 0
    while (maximum_iterations is None or n < int(maximum_iterations)) and \
            _truth(cond(*args), "while_loop"):
        new = body(*args)
        # as TF, a body of one loop variable may return it bare
        new_args = list(new) if isinstance(new, (list, tuple)) and not single else [new]
        _check_structure(args, new_args)
        args = new_args
        n += 1
    if single:
        return args[0]
    return nest.pack_sequence_as(loop_vars, nest.flatten(args))


def _check_structure(old, new):
    """body's result has the loop variables' structure and dtypes (TF raises otherwise)."""
    try:
        nest.assert_same_structure(old, new, check_types=False)
    except (ValueError, TypeError) as e:
        raise ValueError(f"while_loop: body must return the structure of loop_vars: {e}") \
            from None
    for a, b in zip(nest.flatten(old), nest.flatten(new)):
        if isinstance(a, (Tensor, Variable)) and isinstance(b, (Tensor, Variable)) and \
                a.dtype != b.dtype:
            raise TypeError(f"while_loop: a loop variable of dtype {a.dtype.name} became "
                            f"{b.dtype.name} in body; loop variables keep their dtypes")


def _elements(elems, op, reverse=False):
    """The elements of a (nested) structure of tensors along axis 0, as structures."""
    flat = [convert_to_tensor(e) for e in nest.flatten(elems)]
    if not flat:
        raise ValueError(f"{op}: elems must hold at least one tensor")
    n = {t.shape[0] if t.ndim else None for t in flat}
    if None in n or len(n) != 1:
        raise ValueError(f"{op}: every tensor of elems must have the same size along axis 0, "
                         f"got shapes {[t.shape for t in flat]}")
    rows = [unstack(t) for t in flat]
    order = range(len(rows[0]) - 1, -1, -1) if reverse else range(len(rows[0]))
    return [nest.pack_sequence_as(elems, [r[i] for r in rows]) for i in order]


def _stacked(results, op):
    if not results:
        raise ValueError(f"{op}: elems have no rows; the output's shape is unknown")
    flat = [nest.flatten(r) for r in results]
    return nest.pack_sequence_as(results[0], [stack(list(col)) for col in zip(*flat)])


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True, swap_memory=False,
           infer_shape=True, name=None, fn_output_signature=None):
    """`fn` applied to each element of `elems` along axis 0, the results stacked, as tf.map_fn
    (`elems` and the results may be nested structures).

    >>> tg.map_fn(lambda x: x * x, tg.constant([1.0, 2.0, 3.0])).numpy()
    array([1., 4., 9.], dtype=float32)
    """
    return _stacked([fn(e) for e in _elements(elems, "map_fn")], "map_fn")


def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
         swap_memory=False, infer_shape=True, reverse=False, name=None):
    """The accumulators `acc = fn(acc, x)` over the elements of `elems` (the first element is
    the initial accumulator when `initializer` is None), stacked, as tf.scan.

    >>> tg.scan(lambda a, x: a + x, tg.constant([1.0, 2.0, 3.0])).numpy()
    array([1., 3., 6.], dtype=float32)
    """
    xs = _elements(elems, "scan", reverse)
    acc, rest = (xs[0], xs[1:]) if initializer is None else (initializer, xs)
    accs = [acc] if initializer is None else []
    for x in rest:
        acc = fn(acc, x)
        accs.append(acc)
    out = _stacked(accs, "scan")
    if reverse:
        out = nest.map_structure(lambda t: stack(unstack(t)[::-1]), out)
    return out


def foldl(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """`fn(acc, x)` folded over the elements of `elems` from the first, as tf.foldl.

    >>> float(tg.foldl(lambda a, x: a * x, tg.constant([1.0, 2.0, 3.0, 4.0])))
    24.0
    """
    return _fold(fn, _elements(elems, "foldl"), initializer)


def foldr(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """`fn(acc, x)` folded over the elements of `elems` from the last, as tf.foldr.

    >>> float(tg.foldr(lambda a, x: a - x, tg.constant([1.0, 2.0, 10.0])))
    7.0
    """
    return _fold(fn, _elements(elems, "foldr", reverse=True), initializer)


def _fold(fn, xs, initializer):
    acc, rest = (xs[0], xs[1:]) if initializer is None else (initializer, xs)
    for x in rest:
        acc = fn(acc, x)
    return acc


__all__ = public(globals(), ("",))
