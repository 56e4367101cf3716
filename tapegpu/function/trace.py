"""Tracing: a `Tracer` records every op, variable read, assignment, optimizer update, print and
guard of one run of a Python function into a `graph.Graph`.

A trace runs the function on the call's real values (the first call of a signature executes
eagerly while it is recorded). The tracer is seen three ways:

* as an observer of every registry op (`registry.OBSERVERS`; differentiable or not);
* as a recorder on `_thread.recorders`: variable reads come to `record_variable_read`, a
  GradientTape's sweep inside the trace runs in tensor mode (its VJPs are ops, so gradients are
  part of the graph), and per-call ops (custom_gradient, recompute_grad) come to `record`;
* on `_thread.tracers`: guards (a tensor's value leaving as a Python value), assignments,
  optimizer updates and `tg.print`.

A tensor the trace did not produce is resolved, in order: by id (outputs, placeholders, reads);
by its array (a tensor re-wrapping a traced value's array: custom_gradient's outputs, an
assigned value); else it is captured as a constant, by value.
"""
import contextlib
import sys
import threading

import numpy as np

from ..core.tensor import Tensor, Variable, _next_uid, _thread, constant
from ..ops import registry
from ..ops.control_flow import TensorArray
from .graph import Graph


class OperatorNotAllowedInGraphError(TypeError):
    """A tensor's value was used as a Python value (`if t:`, `float(t)`) in a `tg.function`
    with an `input_signature`, where it cannot retrace for a new value (TensorFlow's error)."""


class TracedValueAsConstantError(RuntimeError):
    """Tapegpu's own guard against stale values: a value computed from a traced tensor's
    array outside an op would become a constant of the graph (every later call would reuse the
    traced call's values), so the trace refuses it."""


FOLD_SIZE = 64  # results of ops on constants only, up to this many elements, become constants
_lock = threading.Lock()
_active = [0]  # traces running, in all threads


def _observe(op, inputs, out, params):
    for tracer in _thread.tracers:
        tracer.observe(op, inputs, out, params)


class Tracer:
    """Records one run of a function (see the module docstring)."""

    def __init__(self, name, forbid_guards=False, may_create_variables=True):
        self.graph = Graph(name)
        self.name = name
        self.forbid_guards = forbid_guards
        self.may_create_variables = may_create_variables
        self.start_uid = _next_uid()
        self.by_uid = {}
        self.by_data = {}
        self.keep = []  # what the maps refer to stays alive until the trace ends
        self.created = []  # variables created during this trace
        self.effects = []  # kinds of side effects so far, for the guard-after-update check
        self.dynamic = set()  # values that depend on an argument, a variable or a random draw
        self.captured = set()  # values that depend on tensors made before the trace

    # -- activation -------------------------------------------------------------------------------
    def __enter__(self):
        _thread.tracers.append(self)
        _thread.recorders.append(self)
        with _lock:  # the observer is installed while any thread traces
            _active[0] += 1
            if _observe not in registry.OBSERVERS:
                registry.OBSERVERS.append(_observe)
        return self

    def __exit__(self, *exc):
        _remove(_thread.tracers, self)
        _remove(_thread.recorders, self)
        with _lock:
            _active[0] -= 1
            if not _active[0] and _observe in registry.OBSERVERS:
                registry.OBSERVERS.remove(_observe)
        self.keep = self.by_data = self.by_uid = None

    # -- values -----------------------------------------------------------------------------------
    def bind(self, t, vid):
        self.by_uid[t._uid] = vid
        self.by_data[id(t._data)] = vid
        self.keep.append(t)

    def known(self, t):
        vid = self.by_uid.get(t._uid)
        if vid is None:
            vid = self.by_data.get(id(t._data))
            if vid is not None:
                self.by_uid[t._uid] = vid
                self.keep.append(t)
        return vid

    def value(self, t):
        if isinstance(t, Variable):
            t = t._read()
        vid = self.known(t)
        if vid is None:
            if t._uid >= self.start_uid:
                source = self._traced_array(t._data)
                if source is not None:
                    raise TracedValueAsConstantError(
                        f"tg.function {self.name}: a tensor made in the trace holds a view of "
                        f"the array of a traced value ({self.graph._type(source)}) without an "
                        f"op; the graph would keep this call's values as a constant. This is a "
                        f"bug in the function that made it: compute it with tapegpu's ops")
            vid = self.graph.new_value("constant", t)
            self.graph.constants[vid] = t._data
            if t._uid < self.start_uid and t._data.ndim:
                self.captured.add(vid)  # (scalars, such as the cached Python numbers, fold)
            self.bind(t, vid)
        return vid

    def placeholder(self, t, name):
        vid = self.graph.new_value(name, t)
        self.graph.inputs.append(vid)
        self.graph.input_names.append(name)
        self.dynamic.add(vid)
        self.bind(t, vid)

    # -- what the trace sees ---------------------------------------------------------------------
    def observe(self, op, inputs, out, params):
        self._check_params(op, params)
        self._node(op, [self.value(t) for t in inputs], out, params)

    def _node(self, op, ins, out, params):
        """`out` as the value of a node applying `op` to values `ins`."""
        dynamic = not self.dynamic.isdisjoint(ins)
        captured = not self.captured.isdisjoint(ins)
        if not dynamic and not captured and out._data.size <= FOLD_SIZE:
            # every input is a constant made in the trace: so is the result (constant folding:
            # a Python `if` or a loop counter computed from constants needs no guard). Tensors
            # captured from outside are inputs of the graph, as in TF: not folded
            vid = self.graph.new_value("constant", out)
            self.graph.constants[vid] = out._data
            self.bind(out, vid)
            return
        vid = self.graph.add("op", op, ins, params, out)
        if dynamic:
            self.dynamic.add(vid)
        elif captured:
            self.captured.add(vid)
        self.bind(out, vid)

    def record(self, op, inputs, out, params):
        """A recorder's call: registry ops come through `observe`; a per-call op's output
        (custom_gradient, recompute_grad) re-wraps its function's result, found by array. The
        residuals an op hands its rule (`out._res`) become nodes of their own ops
        (`op.residual_ops`), so that a rule run in the trace computes with graph values."""
        if not op.registered:
            self.known(out)
            if op.name not in self.graph.opaque:
                self.graph.opaque.append(op.name)
        elif op.residuals:
            ins = [self.value(t) for t in inputs]
            for res_op, r in zip(op.residual_ops, out._res):
                self._node(res_op, ins, r, params)

    def _check_params(self, op, params):
        """Refuses a traced value's array (or a view of one) among an op's params: a param is
        fixed when the graph is made, so the op would use the traced call's values at every
        later call. What depends on a traced value must be an input of the op."""
        for value in params.values():
            for item in (value if isinstance(value, (tuple, list)) else (value,)):
                vid = self._traced_array(item)
                if vid is not None:
                    raise TracedValueAsConstantError(
                        f"tg.function {self.name}: op {op.name!r} was given the array of a "
                        f"traced value ({self.graph._type(vid)}) as a parameter; the graph "
                        f"would keep this call's values for every later call. This is a bug "
                        f"in the function that applies {op.name!r}: the value must be an "
                        f"input of the op")

    def _traced_array(self, a):
        """The value whose array `a` is, or is a view of, if it depends on an argument, a
        variable or a random draw; else None."""
        while hasattr(a, "ndim") and not isinstance(a, (np.generic, np.dtype)):
            vid = self.by_data.get(id(a))
            if vid is not None and vid in self.dynamic:
                return vid
            a = getattr(a, "base", None)
        return None

    def record_random(self, draw, out):
        """A random tensor made while tracing: a node calling `draw()` again at every replay
        (a saved model cannot hold it: `opaque`)."""
        vid = self.graph.add("random", draw, (), None, out)
        self.dynamic.add(vid)
        self.bind(out, vid)
        if draw.__name__ not in self.graph.opaque:
            self.graph.opaque.append(draw.__name__)

    def note_variable(self, var):
        self._check_variable(var)

    def record_variable_read(self, var, out):
        self._check_variable(var)
        if out is None:
            out = Tensor(var._value._data, var._value._dev)
        vid = self.graph.add("read", var, (), None, out, label=var.name)
        self.dynamic.add(vid)
        self.bind(out, vid)
        return out

    def guard(self, t):
        vid = self.known(t)
        if vid not in self.dynamic:
            return  # computed from constants only: its value cannot change
        if self.forbid_guards:
            raise OperatorNotAllowedInGraphError(
                f"tg.function {self.name}: using a tensor's value as a Python value (bool, "
                f"int, float, numpy; a Python `if`/`while` on a tensor) is not allowed under an "
                f"input_signature: the function cannot retrace for a new value. Use tg.where or "
                f"compute the condition outside the function")
        if "pull" in self.effects:
            raise NotImplementedError(
                f"tg.function {self.name}: a tensor's value is used as a Python value after "
                f"next(iterator); a guard there could not give the element back when it "
                f"fails. Take the element after the condition, or use tg.where/tg.cond")
        if "update" in self.effects:
            raise NotImplementedError(
                f"tg.function {self.name}: a tensor's value is used as a Python value after "
                f"optimizer.apply_gradients; a guard there could not undo the update when it "
                f"fails. Move the condition before apply_gradients")
        host = t._dev.to_numpy(t._data).copy()
        self.graph.add("guard", host, (vid,), None)

    def on_assign(self, var, kind, value):
        self._check_variable(var)
        self.graph.add("assign", var, (self.value(value),), kind)
        self.effects.append("assign")

    def on_update(self, fn, grads, variables):
        for v in variables:
            self._check_variable(v)
        self.graph.add("update", fn, [self.value(g) for g in grads], list(variables))
        self.effects.append("update")

    def on_pull(self, pull):
        """`next(iterator)` of a tg.data iterator: `pull([], [])` takes the next element at
        every call (tapegpu/data/iterators.py); its values are `random`-kind reads."""
        self.graph.add("update", pull, [], [])
        self.effects.append("pull")

    def on_print(self, template, tensors):
        self.graph.add("print", template, [self.value(t) for t in tensors], None)
        self.effects.append("print")

    def _check_variable(self, var):
        if var._uid > self.start_uid and all(v is not var for v in self.created):
            if not self.may_create_variables:
                raise ValueError(
                    f"tg.function {self.name} only supports singleton tg.Variables created on "
                    f"the first call (variable {var.name!r} was created by a later trace). Make "
                    f"sure the tg.Variable is only created once or created outside tg.function")
            self.created.append(var)

    def finish(self, result, nest):
        """Resolves the function's result: the graph's outputs; returns the result with
        variables read as tensors."""
        leaves = nest.flatten(result)
        outs = []
        values = []
        for leaf in leaves:
            if isinstance(leaf, Variable):
                leaf = leaf._read()
            if isinstance(leaf, TensorArray):
                raise TypeError(f"tg.function {self.name}: a tg.TensorArray cannot be returned "
                                f"(a replay would return the traced elements); return "
                                f"ta.stack() or ta.concat()")
            if isinstance(leaf, (bool, int, float, np.number, np.bool_, np.ndarray)):
                leaf = constant(leaf)  # TF: numbers come back as tensors (int32, float32, ...)
            if isinstance(leaf, Tensor):
                outs.append(("v", self.value(leaf)))
            else:
                outs.append(("py", leaf))
            values.append(leaf)
        self.graph.outputs = outs
        self.graph.structure = result
        return nest.pack_sequence_as(result, values)


def _remove(stack, item):
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is item:
            del stack[i]
            return


@contextlib.contextmanager
def init_scope():
    """Runs its block outside any `tg.function` trace (TensorFlow's `tf.init_scope`): its ops
    execute eagerly and are not recorded; tensors it makes are captured as constants when the
    function uses them afterwards. Outside a trace it does nothing.

    >>> @tg.function
    ... def f(x):
    ...     with tg.init_scope():
    ...         c = tg.constant(2.0) * 3.0  # computed once, at trace time
    ...     return x * c
    >>> float(f(tg.constant(1.0)))
    6.0
    """
    tracers = list(_thread.tracers)
    saved = [(i, r) for i, r in enumerate(_thread.recorders) if isinstance(r, Tracer)]
    del _thread.tracers[:]
    for _, r in saved:
        _remove(_thread.recorders, r)
    try:
        yield
    finally:
        _thread.tracers.extend(tracers)
        for i, r in saved:
            _thread.recorders.insert(min(i, len(_thread.recorders)), r)


def print_(*inputs, output_stream=None, sep=" ", end="\n"):
    """Prints tensors and Python values (TensorFlow's `tf.print`): inside a `tg.function` it is
    a graph node, so it prints at every call, not only when the function is traced. Prints to
    `output_stream` (default `sys.stderr`, as TensorFlow).

    >>> import sys
    >>> tg.print("x:", tg.constant([1, 2]), output_stream=sys.stdout)
    x: [1 2]
    """
    parts = []
    tensors = []
    for x in inputs:
        if isinstance(x, Variable):
            x = x._read()
        if isinstance(x, Tensor):
            parts.append(("t", None))
            tensors.append(x)
        else:
            parts.append(("py", str(x)))
    template = (tuple(parts), sep, end, output_stream)
    for tracer in _thread.tracers:
        tracer.on_print(template, tensors)
    stream = output_stream or sys.stderr
    values = iter([t._dev.to_numpy(t._data) for t in tensors])
    stream.write(sep.join(str(next(values)) if k == "t" else text for k, text in parts) + end)
