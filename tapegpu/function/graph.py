"""The graph a `tg.function` trace records, its optimisation and its replay.

A graph holds values (ids 0..n-1) and nodes in trace order. A value is a placeholder (a tensor
argument), a constant (a tensor captured by value) or the output of a node. Nodes:

* `op`: a registry op on values (`op`, `params`), one output;
* `random`: a random draw (`tg.random.*`, dropout masks): `op` draws a fresh array at every
  replay, as TF's random ops do in a `tf.function` (never merged with another draw);
* `read`: a variable's value, read live at replay;
* `assign`: `var.assign` / `assign_add` / `assign_sub` of a value (a side effect);
* `update`: an optimizer's `apply_gradients` on gradient values (a side effect: the
  optimizer's own array update runs at replay, reading its step and learning rate then; a
  captured CUDA graph computes them on the device, tapegpu/optimizers/captured.py);
* `print`: `tg.print` (a side effect);
* `guard`: a value that became a Python value while tracing (`bool`, `int`, `float`,
  `numpy`): the replay checks it still has the traced value;
* `fused`: only in the copy that replays (fusion.py): one generated kernel computing a group of
  elementwise nodes, with several outputs (`out` is a tuple).

`optimize` merges identical pure nodes (CSE: same op, inputs and params; reads of the same
variable between the same side effects) and drops nodes that reach neither an output nor a side
effect (DCE). `Plan` turns the result into a flat schedule of array calls that frees every
intermediate array after its last use.
"""
import functools
import math
import sys
import threading

import numpy as np

from ..core.tensor import Tensor
from ..core.options import options
from ..errors import InvalidArgumentError, OpError
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
            elif n.kind == "fused":
                outs = ", ".join(self._name(v) for v in n.out)
                lines.append(f"  {outs} = {n.params}({ins})")
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
        # a forward that is exactly a ufunc (registry.ufunc, registry.exact_ufunc) is called as
        # the ufunc itself; `quiet`'s wrapper is kept (it silences numpy's warnings)
        name = getattr(f, "ufunc", None)
        if name is not None and not params and \
                not f.__qualname__.startswith("quiet.") and hasattr(dev.xp, name):
            fn = getattr(dev.xp, name)
        else:
            fn = functools.partial(f, dev.xp, **params)
        if dev.counts_launches and op.launches(params):  # one library launch, as eager counts it
            return _counted(fn, dev.launches, op.name)
        return fn

    def run(*arrays):
        out = registry.forward_on(op, dev, arrays, params)
        return out[0] if op.residuals else out
    return run


def _counted(fn, launches, name):
    def run(*arrays):
        launches[name] += 1
        return fn(*arrays)
    return run


POOL_BYTES = 1 << 16  # intermediates from this size on are written into the plan's buffers


def _fold_constants(graph, constants, outputs):
    """Computes once the small values of `numpy` ops on constants alone (a loss's scale, one-hot
    labels: what a gradient makes of constants), adding them to `constants`; returns the
    indices of the nodes folded. Graph outputs are left to their nodes (each call returns a new
    array)."""
    folded = set()
    for i, n in enumerate(graph.nodes):
        if n.kind != "op" or n.dev.name != "numpy" or n.out in outputs or \
                not all(v in constants for v in n.ins):
            continue
        _, shape, dtype, _ = graph.meta[n.out]
        if np.dtype(dtype).itemsize * math.prod(shape) > POOL_BYTES:
            continue
        constants[n.out] = _array_fn(n.op, n.dev, n.params)(*[constants[v] for v in n.ins])
        folded.add(i)
    return folded


def _residual_groups(graph, folded):
    """{index of the first: indices} of the nodes of an op with residuals and of its residual
    ops (registry `residual_ops`) on the same inputs and params: one step of the plan runs them
    (the op's forward computes its residuals anyway)."""
    groups = {}
    for i, n in enumerate(graph.nodes):
        if n.kind != "op" or i in folded:
            continue
        op = n.op.residual_of[0] if n.op.residual_of is not None else n.op
        pk = _params_key(n.params)
        if op.residuals and pk is not None:
            groups.setdefault((op, n.ins, pk), []).append(i)
    return {g[0]: g for g in groups.values() if len(g) > 1}


def _with_residuals_fn(graph, indices):
    """One call of the op of a residual group returning the group's values in its order."""
    nodes = [graph.nodes[i] for i in indices]
    first = nodes[0]
    op = first.op.residual_of[0] if first.op.residual_of is not None else first.op
    picks = [-1 if n.op.residual_of is None else n.op.residual_of[1] for n in nodes]
    dev, params = first.dev, first.params

    def run(*arrays):
        out, res = registry.forward_on(op, dev, arrays, params)
        return tuple(out if k < 0 else res[k] for k in picks)
    return run


def _out_fn(graph, node, fn):
    """(`fn` with an `out` argument, whether `out` may be one of the inputs) for the ops whose
    result can be written into a buffer of the plan, else None. The function returns `out` or,
    where it cannot use it, a new array."""
    if node.kind == "fused":  # a generated kernel writing its first result (fusion.py)
        into = getattr(fn, "into", None)
        return (into, False) if into is not None else None
    if node.dev.name != "numpy" or node.kind != "op":
        return None
    if isinstance(fn, np.ufunc):
        return (lambda *a: fn(*a[:-1], out=a[-1])), True
    if node.op.replay_into is not None:
        return node.op.replay_into(fn, [graph.meta[i][1] for i in node.ins], node.params)
    return None


def _fresh(graph, node, fn):
    """Whether the step's result is a new array (never a view of an input): then an input of
    it may live in a buffer of the plan. A fused kernel's results always are."""
    return node.kind == "fused" or node.kind == "op" and node.dev.name == "numpy" and (
        isinstance(fn, np.ufunc) or node.op.fresh)


OP, READ, ASSIGN, UPDATE, PRINT, GUARD, FUSED = range(7)
_KINDS = {"op": OP, "random": OP, "read": READ, "assign": ASSIGN, "update": UPDATE, "print": PRINT,
          "guard": GUARD, "fused": FUSED}


class Plan:
    """The flat schedule of an optimized graph: each step (kind, callable or object, input
    slots, output slot, slots to free after it, params, buffer or None).

    Steps are the graph's nodes (with its fused kernels: fusion.py), but an op with residuals
    and the nodes of its residuals run as one step, and small values of ops on constants alone
    are computed once, when the plan is made. Intermediates of `POOL_BYTES` or more that only
    feed ops making new arrays (matmul, elementwise ops, bias_act, sums, fused kernels: their
    first result) are written with `out=` into buffers the plan keeps between calls, assigned
    from the liveness of the values (a buffer serves every value of its shape and dtype whose
    life does not overlap; an elementwise op may write over an input that dies there): no
    allocation, no page faults.
    Graph outputs are always new arrays (the caller keeps them)."""

    def __init__(self, graph):
        self.graph = graph
        nodes = graph.nodes
        outputs = {v for k, v in graph.outputs if k == "v"}
        self.constants = dict(graph.constants)
        folded = _fold_constants(graph, self.constants, outputs)
        grouped = _residual_groups(graph, folded)
        skip = folded | {j for g in grouped.values() for j in g[1:]}
        plain = []  # (node, kind, fn, ins, out)
        for i, n in enumerate(nodes):
            if i in skip:
                continue
            kind = _KINDS[n.kind]
            ins, out = n.ins, n.out
            if i in grouped:
                kind, fn = FUSED, _with_residuals_fn(graph, grouped[i])
                out = tuple(nodes[j].out for j in grouped[i])
            elif n.kind == "op":
                fn = _array_fn(n.op, n.dev, n.params)
            else:
                fn = n.op
            plain.append((n, kind, fn, ins, out))
        last = {}
        for i, (_, _, _, ins, _) in enumerate(plain):
            for v in ins:
                last[v] = i
        frees = [[] for _ in plain]
        for v, i in last.items():
            if v not in outputs:
                frees[i].append(v)
        self.unused_inputs = tuple(v for v in graph.inputs if v not in last and v not in outputs)
        consumers_fresh = {}
        for n, _, fn, ins, _ in plain:
            for v in ins:
                consumers_fresh[v] = consumers_fresh.get(v, True) and _fresh(graph, n, fn)
        slot_of, self.slots = {}, []
        free_slots = {}
        steps = []
        for i, (n, kind, fn, ins, out) in enumerate(plain):
            out_fn = None
            first = out[0] if kind == FUSED else out  # a buffer for a fused step's first output
            if first is not None and first not in outputs and consumers_fresh.get(first):
                _, shape, dtype, _ = graph.meta[first]
                if np.dtype(dtype).itemsize * math.prod(shape) >= POOL_BYTES:
                    out_fn = _out_fn(graph, n, fn)
            dying = [slot_of[v] for v in frees[i] if v in slot_of]
            buf = None
            if out_fn is not None:
                fn_out, may_alias = out_fn
                key = graph.meta[first][1:3]
                if may_alias:
                    for sl in dying:
                        free_slots.setdefault(self.slots[sl], []).append(sl)
                    dying = []
                pool = free_slots.get(key)
                if pool:
                    buf = pool.pop()
                else:
                    buf = len(self.slots)
                    self.slots.append(key)
                slot_of[first] = buf
                fn = fn_out
            for sl in dying:
                free_slots.setdefault(self.slots[sl], []).append(sl)
            steps.append((kind, fn, ins, out, tuple(frees[i]), n.params, buf))
        self.steps = steps
        self.step_nodes = [p[0] for p in plain]  # the graph node of each step (for errors)
        self.buffers = None  # allocated at the first replay
        self._lock = threading.Lock()
        self.template = [None] * len(graph.meta)
        for v, a in self.constants.items():
            self.template[v] = a
        self.has_guards = any(n.kind == "guard" for n in nodes)
        self.assigned = []
        for n in nodes:
            if n.kind == "assign" and all(v is not n.op for v in self.assigned):
                self.assigned.append(n.op)
        # the most values alive at once (inputs and constants included)
        alive = len(self.constants) + len(graph.inputs) - len(self.unused_inputs)
        peak = alive
        for s in steps:
            if s[3] is not None:
                alive += len(s[3]) if s[0] == FUSED else 1
            peak = max(peak, alive)
            alive -= len(s[4])
        self.peak_live = peak
        self.straight = _straight_line(self)

    @property
    def buffer_bytes(self):
        """The bytes of the buffers the plan keeps between calls."""
        return sum(np.dtype(d).itemsize * math.prod(s) for s, d in self.slots)

    def run(self, arrays):
        """The straight-line code on the plan's buffers; on fresh arrays when another thread
        (or a re-entrant call) is using them. A failed guard gives the variables assigned
        before it their values back and raises GuardMismatch (the caller retraces)."""
        if not self.has_guards:
            return self._run(arrays)
        snapshot = [(var, var._value) for var in self.assigned]
        try:
            return self._run(arrays)
        except GuardMismatch:
            for var, value in snapshot:
                var._value = value
            raise

    def _run(self, arrays):
        if not self._lock.acquire(blocking=False):
            return self.straight([None] * len(self.slots), *arrays)
        try:
            if self.buffers is None:
                self.buffers = [np.empty(s, d) for s, d in self.slots]
            return self.straight(self.buffers, *arrays)
        finally:
            self._lock.release()


def _straight_line(plan):
    """The schedule as one Python function of straight-line code: a local variable per value,
    `del` at its last use, the callables and constants as the function's globals, the buffers
    its first argument: every replay runs it (the step loop of `_replay` only serves a debugger's
    `options.on_step`). Prints of a graph with guards are held until every guard passed (the
    graph is printable with `str(concrete.graph)`, the code with `plan.source`)."""
    names = {}
    env = {"_assign": _assign, "_print": _print, "_check": _check, "_flush": _flush}
    lines = ["_P = []"] if plan.has_guards else []
    plan.line_steps = steps_of = [None] * len(lines)  # the step of each line (errors name it)
    for v, a in plan.constants.items():
        env[f"c{v}"] = a
        names[v] = f"c{v}"
    params = ["_B"]
    for v in plan.graph.inputs:
        names[v] = f"v{v}"
        params.append(f"v{v}")
    for k, (kind, fn, ins, out, frees, prm, buf) in enumerate(plan.steps):
        args = ", ".join([names[i] for i in ins] + ([f"_B[{buf}]"] if buf is not None else []))
        if kind == OP:
            env[f"f{k}"] = fn
            lines.append(f"v{out} = f{k}({args})")
        elif kind == FUSED:
            env[f"f{k}"] = fn
            lines.append(f"{''.join(f'v{v}, ' for v in out)}= f{k}({args})")
            names.update((v, f"v{v}") for v in out)
            out = None
        elif kind == READ:
            env[f"var{k}"] = fn
            lines.append(f"v{out} = var{k}._value._data")
        elif kind == ASSIGN:
            env[f"var{k}"], env[f"p{k}"] = fn, prm
            lines.append(f"_assign(var{k}, p{k}, {args})")
        elif kind == PRINT:
            env[f"p{k}"] = fn
            lines.append(f"_print(p{k}, [{args}], {'_P' if plan.has_guards else 'None'})")
        elif kind == GUARD:
            env[f"p{k}"], env[f"d{k}"] = fn, plan.graph.meta[ins[0]][3]
            lines.append(f"_check(p{k}, {args}, d{k})")
        else:  # UPDATE
            env[f"f{k}"], env[f"p{k}"] = fn, prm
            lines.append(f"f{k}([{args}], p{k})")
        if out is not None:
            names[out] = f"v{out}"
        steps_of.extend([k] * (len(lines) - len(steps_of)))
        dead = [names[v] for v in frees if names.get(v, "").startswith("v")]
        if dead:
            lines.append(f"del {', '.join(dead)}")
            steps_of.append(k)
    outs = ", ".join(names[v] if k == "v" else f"o{n}" for n, (k, v) in
                     enumerate(plan.graph.outputs))
    for n, (k, v) in enumerate(plan.graph.outputs):
        if k != "v":
            env[f"o{n}"] = v
    if plan.has_guards:
        lines.append("_flush(_P)")
    body = "\n    ".join(lines + [f"return [{outs}]"])
    plan.source = f"def run({', '.join(params)}):\n    {body}\n"
    exec(compile(plan.source, f"<tg.function {plan.graph.name}>", "exec"), env)
    return env["run"]


_OP_ERRORS = (ValueError, TypeError, IndexError, ArithmeticError)


def replay(plan, arrays):
    """Runs the schedule on input arrays; returns the output arrays (flattened order). An
    op's error (a value that its forward refuses: an index out of range, an integer division
    by zero) is raised as eager code raises it, InvalidArgumentError naming the op."""
    try:
        return _replay(plan, arrays)
    except _OP_ERRORS as e:
        if isinstance(e, OpError):
            raise
        raise _replay_error(plan, e) from None


def _replay_error(plan, e):
    """InvalidArgumentError naming the op of the step that raised `e` and its inputs."""
    source = f"<tg.function {plan.graph.name}>"
    k = None
    tb = e.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename == source:
            i = tb.tb_lineno - 2
            if 0 <= i < len(plan.line_steps) and plan.line_steps[i] is not None:
                k = plan.line_steps[i]
        elif frame.f_code is _replay.__code__ and "fn" in frame.f_locals:
            fn, out = frame.f_locals["fn"], frame.f_locals.get("out")
            k = next((i for i, s in enumerate(plan.steps) if s[1] is fn and s[3] == out), k)
        tb = tb.tb_next
    if k is None:
        return e
    node = plan.step_nodes[k]
    name = node.op.name if node.kind == "op" else str(node.params or node.kind)
    ins = ", ".join(f"{plan.graph.meta[i][2]}{list(plan.graph.meta[i][1])}" for i in node.ins)
    return InvalidArgumentError(f"{name}: {e} (in tg.function {plan.graph.name}; inputs: "
                                f"{ins})")


def _replay(plan, arrays):
    on_step = options.on_step  # a debugger's hook after every step (core/options.py)
    if on_step is None:
        return plan.run(arrays)
    vals = plan.template.copy()
    for v, a in zip(plan.graph.inputs, arrays):
        vals[v] = a
    for v in plan.unused_inputs:
        vals[v] = None
    snapshot = [(var, var._value) for var in plan.assigned] if plan.has_guards else None
    printed = [] if plan.has_guards else None
    try:
        for kind, fn, ins, out, frees, params, buf in plan.steps:
            if kind == OP:
                vals[out] = fn(*[vals[i] for i in ins]) if buf is None else \
                    fn(*[vals[i] for i in ins], None)
            elif kind == FUSED:
                args = [vals[i] for i in ins] + ([] if buf is None else [None])
                for v, a in zip(out, fn(*args)):
                    vals[v] = a
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
    with var._lock:  # atomic with the variable's eager assignments (Variable.assign)
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
    if getattr(stream, "takes_values", False):  # a sink of the host values (tg.summary.scalar)
        return stream, list(values)
    it = iter(values)
    out = []
    for kind, text in parts:
        out.append(str(next(it)) if kind == "t" else text)
    return (stream or sys.stderr), sep.join(out) + end


def _flush(printed):
    for stream, text in printed:
        stream.write(text)


def _print(template, arrays, buffer):
    hosts = [np.asarray(a) if isinstance(a, np.ndarray) or np.isscalar(a) else
             np.asarray(a.get()) for a in arrays]
    stream, text = format_print(template, hosts)
    if buffer is None:
        stream.write(text)
    else:
        buffer.append((stream, text))
