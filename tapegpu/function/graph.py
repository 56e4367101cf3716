"""The graph a `tg.function` trace records, its optimisation and its replay.

A graph holds values (ids 0..n-1) and nodes in trace order. A value is a placeholder (a tensor
argument), a constant (a tensor captured by value) or the output of a node. Nodes:

* `op`: a registry op on values (`op`, `params`), one output;
* `random`: a random draw (`tg.random.*`, dropout masks): `op` draws a fresh array at every
  replay, as TF's random ops do in a `tf.function` (never merged with another draw);
* `read`: a variable's value, read live at replay;
* `assign`: `var.assign` / `assign_add` / `assign_sub` of a value (a side effect);
* `update`: an optimizer's `apply_gradients` on gradient values (a side effect: the
  optimizer's own array update runs at replay, reading its step and learning rate then);
* `print`: `tg.print` (a side effect);
* `guard`: a value that became a Python value while tracing (`bool`, `int`, `float`,
  `numpy`): the replay checks it still has the traced value.

`optimize` merges identical pure nodes (CSE: same op, inputs and params; reads of the same
variable between the same side effects) and drops nodes that reach neither an output nor a side
effect (DCE). `Plan` turns the result into a flat schedule of array calls that frees every
intermediate array after its last use.
"""
import functools
import sys

import numpy as np

from ..core.tensor import Tensor
from ..ops import registry

EFFECTS = ("assign", "update", "print", "guard")


class GuardMismatch(Exception):
    """A guard's value differs from the traced one (the caller retraces or tries another
    variant)."""


class Node:
    __slots__ = ("kind", "op", "ins", "params", "out", "dev")

    def __init__(self, kind, op, ins, params, out, dev):
        self.kind = kind
        self.op = op
        self.ins = ins
        self.params = params
        self.out = out
        self.dev = dev


class Graph:
    """Values, nodes, inputs and outputs of one trace (see the module docstring)."""

    def __init__(self, name):
        self.name = name
        self.meta = []  # vid -> (label, shape, dtype name, dev)
        self.constants = {}  # vid -> array
        self.inputs = []  # placeholder vids, in the order of the flattened tensor arguments
        self.input_names = []
        self.nodes = []
        self.outputs = []  # ("v", vid) or ("py", value), in flattened order
        self.structure = None
        self.opaque = []  # names of per-call ops (custom_gradient, recompute_grad,
        # numpy_function) the trace met: the graph holds their inner ops or their values only
        self.traced_nodes = 0
        self.merged = 0
        self.dropped = 0

    def new_value(self, label, t):
        self.meta.append((label, tuple(t._data.shape), t._data.dtype.name, t._dev))
        return len(self.meta) - 1

    def add(self, kind, op, ins, params, out_tensor=None, label=None):
        out = None
        if out_tensor is not None:
            out = self.new_value(label or kind, out_tensor)
        dev = out_tensor._dev if out_tensor is not None else None
        self.nodes.append(Node(kind, op, tuple(ins), params, out, dev))
        return out

    # -- printing -------------------------------------------------------------------------------
    def _name(self, vid):
        return f"%{vid}"

    def _type(self, vid):
        _, shape, dtype, _ = self.meta[vid]
        return f"{dtype}{list(shape)}"

    def __str__(self):
        args = ", ".join(f"{self._name(v)}: {self._type(v)}" for v in self.inputs)
        lines = [f"graph {self.name}({args})  # traced {self.traced_nodes} nodes; CSE merged "
                 f"{self.merged}, DCE dropped {self.dropped}"]
        for vid, a in self.constants.items():
            lines.append(f"  {self._name(vid)} = constant {self._type(vid)}")
        for n in self.nodes:
            ins = ", ".join(self._name(i) for i in n.ins)
            if n.kind == "op":
                params = "".join(f", {k}={v!r}" for k, v in n.params.items())
                lines.append(f"  {self._name(n.out)} = {n.op.name}({ins}{params})"
                             f"  : {self._type(n.out)}")
            elif n.kind == "read":
                lines.append(f"  {self._name(n.out)} = read {n.op.name!r}  : {self._type(n.out)}")
            elif n.kind == "random":
                lines.append(f"  {self._name(n.out)} = {n.op.__name__}()  : {self._type(n.out)}")
            elif n.kind == "assign":
                lines.append(f"  {n.params} {n.op.name!r} <- {ins}")
            elif n.kind == "update":
                lines.append(f"  update {[v.name for v in n.params]} <- ({ins})")
            elif n.kind == "print":
                lines.append(f"  print({ins})")
            else:
                lines.append(f"  guard {ins} == traced value")
        outs = ", ".join(self._name(v) if k == "v" else repr(v) for k, v in self.outputs)
        lines.append(f"  return ({outs})")
        return "\n".join(lines)

    __repr__ = __str__


def _params_key(params):
    try:
        key = tuple(sorted(params.items()))
        hash(key)
        return key
    except TypeError:  # unhashable params (slices, lists): never merged
        return None


def optimize(graph):
    """CSE then DCE, in place; the node order (a topological order) is kept."""
    graph.traced_nodes = len(graph.nodes)
    alias = {}
    seen = {}
    version = {}  # variable uid -> side effects on it so far
    kept = []
    for n in graph.nodes:
        ins = tuple(alias.get(i, i) for i in n.ins)
        n.ins = ins
        key = None
        if n.kind == "op":
            pk = _params_key(n.params)
            key = None if pk is None else ("op", n.op, ins, pk)
        elif n.kind == "read":
            key = ("read", n.op._uid, version.get(n.op._uid, 0))
        elif n.kind == "assign":
            version[n.op._uid] = version.get(n.op._uid, 0) + 1
        elif n.kind == "update":
            for v in n.params:
                version[v._uid] = version.get(v._uid, 0) + 1
        if key is not None:
            prev = seen.get(key)
            if prev is not None:
                alias[n.out] = prev
                graph.merged += 1
                continue
            seen[key] = n.out
        kept.append(n)
    graph.outputs = [(k, alias.get(v, v)) if k == "v" else (k, v) for k, v in graph.outputs]
    live = {v for k, v in graph.outputs if k == "v"}
    out = []
    for n in reversed(kept):
        if n.kind in EFFECTS or n.out in live:
            live.update(n.ins)
            out.append(n)
        else:
            graph.dropped += 1
    graph.nodes = out[::-1]
    graph.constants = {v: a for v, a in graph.constants.items() if v in live}
    return graph


def _array_fn(op, dev, params):
    """The op's forward on arrays, as `registry.forward_on` runs it, bound once."""
    kernel = op.kernels.get(dev.name) if op.kernels else None
    f = op.forward
    if kernel is None and not op.residuals:
        if getattr(f, "ufunc", None) and not params and \
                f.__qualname__.startswith("ufunc.") and hasattr(dev.xp, f.ufunc):
            return getattr(dev.xp, f.ufunc)
        return functools.partial(f, dev.xp, **params)

    def run(*arrays):
        out = registry.forward_on(op, dev, arrays, params)
        return out[0] if op.residuals else out
    return run


_UINT = {"float32": np.uint32, "float64": np.uint64}


def _select_zero(graph, node):
    """`where(mask, x, 0.0)` on numpy arrays of one shape (the gradient of a ReLU-like
    activation) as a bitwise AND of x's bits with the mask widened to all-ones words: the same
    bits as numpy's `where` (+0.0 where the mask is false; NaN and -0.0 kept where it is true),
    ten times faster than its broadcasting loop. None if the node is not such a `where`."""
    if node.op.name != "where" or node.dev.name != "numpy" or len(node.ins) != 3:
        return None
    c, x, z = node.ins
    _, shape, dtype, _ = graph.meta[node.out]
    zero = graph.constants.get(z)
    if zero is None or not shape or dtype not in _UINT or zero.dtype.name != dtype or \
            zero.size != 1 or \
            zero.reshape(()).view(_UINT[dtype]) != 0 or \
            graph.meta[c][1:3] != (shape, "bool") or graph.meta[x][1:3] != (shape, dtype):
        return None
    uint = _UINT[dtype]

    def select_zero(mask, a, _zero):
        bits = np.negative(mask, dtype=uint)
        return np.bitwise_and(a.view(uint), bits, out=bits).view(a.dtype)
    return select_zero


OP, READ, ASSIGN, UPDATE, PRINT, GUARD = range(6)
_KINDS = {"op": OP, "random": OP, "read": READ, "assign": ASSIGN, "update": UPDATE, "print": PRINT,
          "guard": GUARD}


class Plan:
    """The flat schedule of an optimized graph: each step (kind, callable or object, input
    slots, output slot, slots to free after it)."""

    def __init__(self, graph):
        self.graph = graph
        nodes = graph.nodes
        outputs = {v for k, v in graph.outputs if k == "v"}
        last = {}
        for i, n in enumerate(nodes):
            for v in n.ins:
                last[v] = i
        frees = [[] for _ in nodes]
        for v, i in last.items():
            if v not in outputs:
                frees[i].append(v)
        self.unused_inputs = tuple(v for v in graph.inputs if v not in last and v not in outputs)
        steps = []
        for n, fr in zip(nodes, frees):
            kind = _KINDS[n.kind]
            obj = (_select_zero(graph, n) or _array_fn(n.op, n.dev, n.params)) \
                if n.kind == "op" else n.op
            steps.append((kind, obj, n.ins, n.out, tuple(fr), n.params))
        self.steps = steps
        self.template = [None] * len(graph.meta)
        for v, a in graph.constants.items():
            self.template[v] = a
        self.has_guards = any(n.kind == "guard" for n in nodes)
        self.assigned = []
        for n in nodes:
            if n.kind == "assign" and all(v is not n.op for v in self.assigned):
                self.assigned.append(n.op)
        # the most values alive at once (inputs and constants included)
        alive = len(graph.constants) + len(graph.inputs) - len(self.unused_inputs)
        peak = alive
        for s in steps:
            if s[3] is not None:
                alive += 1
            peak = max(peak, alive)
            alive -= len(s[4])
        self.peak_live = peak
        self.straight = None if self.has_guards or any(s[0] == PRINT for s in steps) else \
            _straight_line(self)


def _straight_line(plan):
    """The schedule as one Python function of straight-line code: a local variable per value,
    `del` at its last use, the callables and constants as the function's globals. It does what
    `replay`'s loop does, without the loop's bookkeeping per step (the graph is printable with
    `str(concrete.graph)`, the code with `plan.source`)."""
    names = {}
    env = {"_assign": _assign}
    lines = []
    for v, a in plan.graph.constants.items():
        env[f"c{v}"] = a
        names[v] = f"c{v}"
    params = []
    for v in plan.graph.inputs:
        names[v] = f"v{v}"
        params.append(f"v{v}")
    for k, (kind, fn, ins, out, frees, prm) in enumerate(plan.steps):
        args = ", ".join(names[i] for i in ins)
        if kind == OP:
            env[f"f{k}"] = fn
            lines.append(f"v{out} = f{k}({args})")
        elif kind == READ:
            env[f"var{k}"] = fn
            lines.append(f"v{out} = var{k}._value._data")
        elif kind == ASSIGN:
            env[f"var{k}"], env[f"p{k}"] = fn, prm
            lines.append(f"_assign(var{k}, p{k}, {args})")
        else:  # UPDATE
            env[f"f{k}"], env[f"p{k}"] = fn, prm
            lines.append(f"f{k}([{args}], p{k})")
        if out is not None:
            names[out] = f"v{out}"
        dead = [names[v] for v in frees if names.get(v, "").startswith("v")]
        if dead:
            lines.append(f"del {', '.join(dead)}")
    outs = ", ".join(names[v] if k == "v" else f"o{n}" for n, (k, v) in
                     enumerate(plan.graph.outputs))
    for n, (k, v) in enumerate(plan.graph.outputs):
        if k != "v":
            env[f"o{n}"] = v
    body = "\n    ".join(lines + [f"return [{outs}]"])
    plan.source = f"def run({', '.join(params)}):\n    {body}\n"
    exec(compile(plan.source, f"<tg.function {plan.graph.name}>", "exec"), env)
    return env["run"]


# tests set this to watch the slots after every step: on_step(values)
on_step = None


def replay(plan, arrays):
    """Runs the schedule on input arrays; returns the output arrays (flattened order)."""
    if plan.straight is not None and on_step is None:
        return plan.straight(*arrays)
    vals = plan.template.copy()
    for v, a in zip(plan.graph.inputs, arrays):
        vals[v] = a
    for v in plan.unused_inputs:
        vals[v] = None
    snapshot = [(var, var._value) for var in plan.assigned] if plan.has_guards else None
    printed = [] if plan.has_guards else None
    try:
        for kind, fn, ins, out, frees, params in plan.steps:
            if kind == OP:
                vals[out] = fn(*[vals[i] for i in ins])
            elif kind == READ:
                vals[out] = fn._value._data
            elif kind == ASSIGN:
                _assign(fn, params, vals[ins[0]])
            elif kind == UPDATE:
                fn([vals[i] for i in ins], params)
            elif kind == PRINT:
                _print(fn, [vals[i] for i in ins], printed)
            else:
                _check(fn, vals[ins[0]], plan.graph.meta[ins[0]][3])
            for v in frees:
                vals[v] = None
            if on_step is not None:
                on_step(vals)
    except GuardMismatch:
        for var, value in snapshot:
            var._value = value
        raise
    if printed:
        for stream, text in printed:
            stream.write(text)
    return [vals[v] if k == "v" else v for k, v in plan.graph.outputs]


def _assign(var, kind, a):
    dev = var._value._dev
    if kind == "assign":
        var._value = Tensor(a, dev)
    elif kind == "assign_add":
        var._value = Tensor(var._value._data + a, dev)
    else:
        var._value = Tensor(var._value._data - a, dev)


def _check(expected, a, dev):
    host = np.asarray(dev.to_numpy(a))
    if host.shape != expected.shape or not np.array_equal(
            host, expected, equal_nan=host.dtype.kind in "fc"):
        raise GuardMismatch()


def format_print(template, values):
    """tg.print's text: `template` is (parts, sep, end, stream) where a part is ("t", None) for
    the next tensor value (a host array) or ("py", text)."""
    parts, sep, end, stream = template
    it = iter(values)
    out = []
    for kind, text in parts:
        out.append(str(next(it)) if kind == "t" else text)
    return (stream or sys.stderr), sep.join(out) + end


def _print(template, arrays, buffer):
    hosts = [np.asarray(a) if isinstance(a, np.ndarray) or np.isscalar(a) else
             np.asarray(a.get()) for a in arrays]
    stream, text = format_print(template, hosts)
    if buffer is None:
        stream.write(text)
    else:
        buffer.append((stream, text))
