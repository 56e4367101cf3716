"""`vectorized_map`: a function of one example run once on a whole batch, by batching rules.

While `fn` runs, each value that depends on `elems` is a *batched value*: a tensor whose array
is a `BatchArray`, a stand-in that reports the per-example shape and dtype (so `fn`'s own
shape logic sees one example, as TensorFlow's pfor does) and holds the real tensor, whose axis
0 is the batch axis. Every op on it goes through the registry as usual; its forward refuses the
stand-in, and `registry._failed` hands the op to `batching` here, which runs it on the real
tensors by the rule its entry names (`Op.batch`: a kind or a rule of its own, ops/batching.py):
nothing here names an op, and nothing is checked on the path of ordinary values. An op
without a rule runs once per example (stacked), and `vectorized_map` names it in one warning.

Tapes. The rules' ops on real tensors are ordinary ops: tapes outside `vectorized_map` record
them, so gradients flow through it. Tapes entered inside `fn` record the op itself on the
batched values (per-example shapes, per-example params), so `tape.gradient` inside `fn` runs
the VJP rules on batched values, which batch in turn: per-example gradients are
`vectorized_map` over a gradient. A marker among the thread's recorders keeps those sweeps on
tensors (the array sweep cannot see batched values) and tells inner tapes from outer ones.

Nested `vectorized_map` calls batch a batched value again; each op is handled by the innermost
map among its inputs first (`_Trace.level`), whose rule's ops then meet the outer map's values.
"""
import math
import warnings

from .. import ops
from ..core import nest
from ..core.tensor import Tensor, Variable, _thread, convert_to_tensor
from ..errors import InvalidArgumentError
from ..ops import batching, registry


class Batched(TypeError):
    """A batched value's array was read or computed with outside an op (its value differs per
    example): `vectorized_map` then runs `fn` once per example, or raises."""


def _refuse(self, *args, **kwargs):
    raise Batched("a batched value of tg.vectorized_map cannot be read as one array (its value "
                  "differs per example)")


class BatchArray:
    """The array of a batched value: per-example `shape` and `dtype`, the real tensor `value`
    (batch axis first) and the map it belongs to. Anything else refuses (`Batched`)."""
    __slots__ = ("value", "shape", "dtype", "trace")

    def __init__(self, value, trace):
        self.value = value
        self.shape = value._data.shape[1:]
        self.dtype = value._data.dtype
        self.trace = trace

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    def __getattr__(self, name):
        _refuse(self)

    __array_ufunc__ = __array_function__ = __array__ = _refuse
    __len__ = __iter__ = __getitem__ = __setitem__ = __bool__ = __float__ = __int__ = _refuse
    __index__ = __complex__ = __dlpack__ = _refuse
    # `batching(op, inputs, params)`, which `registry._failed` calls: `_apply`, set below


for _name in ("__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__",
              "__pow__", "__matmul__", "__and__", "__or__", "__xor__"):
    setattr(BatchArray, _name, _refuse)
    setattr(BatchArray, _name.replace("__", "__r", 1), _refuse)
for _name in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__neg__", "__pos__",
              "__abs__", "__invert__"):
    setattr(BatchArray, _name, _refuse)
BatchArray.__hash__ = None


class _Trace:
    """One `vectorized_map` call: its batch size, nesting level, marker among the thread's
    recorders, whether ops without a rule may loop, and the ops that did."""

    def __init__(self, size, level, fallback):
        self.size = size
        self.fallback = fallback
        self.level = level
        self.marker = _Marker()
        self.looped = []

    def batched(self, t):
        return Tensor(BatchArray(t, self), t._dev)


class _Marker:
    """Sits among the thread's recorders while `fn` runs: the tapes after it were entered inside
    `fn`. It records nothing (`records`: no tape sees the sweeps it is alone with); its
    presence keeps backward sweeps on tensors."""
    records = False

    def record(self, op, inputs, out, params):
        pass

    def record_variable_read(self, var, out):
        return out


_levels = []  # the active maps of this program, innermost last (a map runs in one thread)


def _apply(op, inputs, params):
    """Runs `op` on `inputs`, some of them batched values: the real op by its rule (or a loop)
    with the tapes entered inside the map paused, then the op itself recorded on those tapes."""
    if len(inputs) == 1:
        d = inputs[0]._data
        trace = d.trace
        flags = _ONE
        vals = [d.value]
    elif len(inputs) == 2 and not _two_maps(inputs[0]._data, inputs[1]._data):
        dx = inputs[0]._data
        dy = inputs[1]._data
        if type(dx) is not BatchArray:
            trace, flags, vals = dy.trace, _SECOND, [inputs[0], dy.value]
        elif type(dy) is BatchArray:
            trace, flags, vals = dx.trace, _BOTH, [dx.value, dy.value]
        else:
            trace, flags, vals = dx.trace, _FIRST, [dx.value, inputs[1]]
    else:
        trace = None
        for t in inputs:  # the innermost map among the inputs batches first
            d = t._data
            if type(d) is BatchArray and (trace is None or d.trace.level > trace.level):
                trace = d.trace
        flags = [type(t._data) is BatchArray and t._data.trace is trace for t in inputs]
        vals = [t._data.value if b else t for t, b in zip(inputs, flags)]
    rule = batching.rule_of(op)
    recs = _thread.recorders
    marker = trace.marker
    if recs and recs[-1] is marker:  # no tape entered inside fn is recording (a sweep)
        recs.pop()
        try:
            out = rule(op, vals, flags, params, trace.size) if rule is not None else None
            if out is None:
                out = _loop(op, vals, flags, params, trace)
        finally:
            recs.append(marker)
        return Tensor(BatchArray(out, trace), out._dev)
    cut = _index(recs, marker)
    inner = recs[cut:]
    del recs[cut:]
    capture = _Capture(op) if op.residuals and len(inner) > 1 else None
    if capture is not None:
        recs.append(capture)
    looped = False
    try:
        out = rule(op, vals, flags, params, trace.size) if rule is not None else None
        if out is None:
            out = _loop(op, vals, flags, params, trace)
            looped = True
    finally:
        if capture is not None:
            recs.remove(capture)
        recs.extend(inner)
    y = Tensor(BatchArray(out, trace), out._dev)
    if len(inner) > 1 and op.vjp is not None and out._data.dtype.kind in "fcV":
        if capture is not None:
            res = capture.residuals(trace.size, None if looped else op.batch)
            y._res = tuple(trace.batched(r) for r in res)
        for i in range(1, len(inner)):
            inner[i].record(op, inputs, y, params)
        if capture is not None:
            del y._res
    return y


BatchArray.batching = staticmethod(_apply)


_ONE = (True,)
_BOTH, _FIRST, _SECOND = (True, True), (True, False), (False, True)


def _two_maps(dx, dy):
    """Whether two inputs' arrays are batched values of two different maps."""
    return type(dx) is BatchArray and type(dy) is BatchArray and dx.trace is not dy.trace


def _index(recs, marker):
    """Where `marker` is among the recorders (their end if the map has ended)."""
    try:
        return recs.index(marker)  # recorders compare by identity
    except ValueError:
        return len(recs)


class _Capture:
    """Catches the residuals (`op.residuals`) of the real op's calls, for the tapes inside the
    map to save."""

    def __init__(self, op):
        self.op = op
        self.calls = []

    def record(self, op, inputs, out, params):
        if op is self.op:
            self.calls.append(out._res)

    def record_variable_read(self, var, out):
        return out

    def residuals(self, size, kind):
        """The residuals with the batch axis first: stacked after the loop (`kind` None), as
        the op's one call gave them after a rule."""
        if kind is None:  # the loop: one call per example
            return [ops.stack([c[k] for c in self.calls]) for k in range(len(self.calls[0]))]
        res = self.calls[-1]
        if kind == "merge":
            return [batching.unmerge(r, size) for r in res]
        return list(res)


def _loop(op, vals, flags, params, trace):
    """The op once per example, stacked: for ops without a rule (or inputs their rule does not
    cover)."""
    if not trace.fallback:
        raise ValueError(f"vectorized_map: no batching rule covers the batched inputs of op "
                         f"{op.name!r}; pass fallback_to_while_loop=True to run it once per "
                         "example")
    if op.name not in trace.looped:
        trace.looped.append(op.name)
    rows = []
    for i in range(trace.size):
        args = [v[i] if b else v for v, b in zip(vals, flags)]
        rows.append(registry.apply(op, args, params))
    return ops.stack(rows)


# -- the public function ------------------------------------------------------------------------

def vectorized_map(fn, elems, fallback_to_while_loop=True, warn=True):
    """Maps `fn` over axis 0 of `elems` by running it once on the whole batch.

    As TensorFlow's `tf.vectorized_map`: `elems` is a tensor or a nested structure of tensors
    with one size of axis 0 (those of size 1 are broadcast); `fn` gets one example (the structure of `elems`, each tensor
    without axis 0) and returns a tensor or nested structure; the results are stacked along a
    new axis 0. Python values and tensors that `fn` reads from outside are the same for every
    example. Each op runs once, on the batch, by its batching rule; an op without one runs once
    per example and is named in a warning (`warn`), or raises when `fallback_to_while_loop` is
    False. Where `fn` needs a batched value as a Python value (`bool(x)`, `x.numpy()`), the
    whole of `fn` runs once per example (and says so), or raises.

    It works under a `tg.GradientTape` (gradients flow through it) and with tapes inside `fn`:
    per-example gradients are a map over a gradient.

    >>> x = tg.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> tg.vectorized_map(lambda row: tg.reduce_sum(row * row), x).numpy()
    array([ 5., 25., 61.], dtype=float32)
    >>> w = tg.Variable([0.5, -1.0])
    >>> def grad_of_one(row):
    ...     with tg.GradientTape() as tape:
    ...         loss = tg.reduce_sum(row * w) ** 2
    ...     return tape.gradient(loss, w)
    >>> tg.vectorized_map(grad_of_one, x).numpy()
    array([[ -3.,  -6.],
           [-15., -20.],
           [-35., -42.]], dtype=float32)
    """
    flat = [_tensor(e) for e in nest.flatten(elems)]
    size = _batch_size(flat)
    flat = [e if e.shape[0] == size else ops.broadcast_to(e, (size,) + e.shape[1:])
            for e in flat]
    trace = _Trace(size, len(_levels), fallback_to_while_loop)
    args = nest.pack_sequence_as(elems, [trace.batched(e) for e in flat])
    recs = _thread.recorders
    recs.append(trace.marker)
    _levels.append(trace)
    try:
        result = fn(args)
        outs = [_unbatched(r, trace) for r in nest.flatten(result)]
    except Batched as e:
        if not fallback_to_while_loop:
            raise ValueError(f"vectorized_map: fn reads a batched value as a Python value ({e}); "
                             "pass fallback_to_while_loop=True to run it once per example") \
                from None
        result, outs = None, None
    finally:
        _levels.remove(trace)
        recs.remove(trace.marker)
    if outs is None:
        if warn:
            warnings.warn("vectorized_map: fn reads a batched value as a Python value; running "
                          "it once per example", UserWarning, stacklevel=2)
        return _map_by_loop(fn, elems, flat, size)
    if trace.looped:
        if warn:
            warnings.warn(f"vectorized_map: op(s) {', '.join(trace.looped)} ran once per "
                          "example: no batching rule covers their batched inputs (TensorFlow "
                          "falls back to a while loop there)", UserWarning, stacklevel=2)
    return nest.pack_sequence_as(result, outs)


def _tensor(e):
    if isinstance(e, Variable):
        return e.read_value()
    if isinstance(e, Tensor):
        return e
    return convert_to_tensor(e)


def _batch_size(flat):
    if not flat:
        raise ValueError("vectorized_map: elems must hold at least one tensor")
    for e in flat:
        if not e.shape:
            raise ValueError(f"vectorized_map: elems must have a leading axis to map over, got a "
                             f"scalar (shapes: {[list(t.shape) for t in flat]})")
    sizes = {t.shape[0] for t in flat} - {1}  # as TensorFlow, a size of 1 is broadcast
    if len(sizes) > 1:  # TensorFlow fails inside its gather; this names the shapes
        raise InvalidArgumentError(
            "vectorized_map: all elems must have the same size of axis 0 (or 1, broadcast), "
            f"got shapes {[list(t.shape) for t in flat]}")
    return sizes.pop() if sizes else 1


def _unbatched(r, trace):
    """A result of `fn` as the stacked tensor: batched values unwrapped, the others (the same
    for every example) repeated along a new axis 0."""
    if r is None:
        return None
    if isinstance(r, Variable):
        r = r.read_value()
    if not isinstance(r, Tensor):
        r = convert_to_tensor(r)
    d = r._data
    if type(d) is BatchArray and d.trace is trace:
        return d.value
    return ops.broadcast_to(ops.expand_dims(r, 0), (trace.size,) + tuple(r.shape))


def _map_by_loop(fn, elems, flat, size):
    rows = []
    for i in range(size):
        rows.append(fn(nest.pack_sequence_as(elems, [t[i] for t in flat])))
    leaves = [nest.flatten(r) for r in rows]
    outs = [None if col[0] is None else ops.stack(list(col)) for col in zip(*leaves)]
    return nest.pack_sequence_as(rows[0], outs)
