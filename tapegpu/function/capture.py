"""CUDA graphs for tg.function: a traced step captured once and replayed as one graph launch.

`tg.function(f, jit_compile=True)` on `cuda` (or `cuda_emu`) captures the replay of each
concrete function at its first call: the fused schedule (graph.Plan) runs once on a capturing
stream, and later calls launch the captured graph, one `cudaGraphLaunch` instead of a launch per
kernel and library call (the launch counter, `tg.profiler`'s `launches`, shows `cuda_graph` 1
per call). `jit_compile=None` (the default) fuses without capturing; `jit_compile=False` does
neither. Where a capture is refused or fails, the function replays uncaptured, with the same
results, and `concrete.capture_info["reason"]` says why.

What a graph fixes, and how a call gets around it:

* buffers: every array of the capture stays allocated as long as the graph (on `cuda` the
  capture allocates from a memory pool of its own, `cupy.cuda.MemoryPool`, so no array freed
  during the capture is handed to other code while the graph still writes it). Arguments are
  copied into the graph's input buffers before a launch; results are copied out of it after
  (the caller owns new arrays: the next launch does not change them). Copies are device to
  device copies, not kernel launches.
* variables: the graph reads a variable's array of the capture; before a launch, a variable
  whose array changed since (assigned outside the function) is copied into it, and after a
  launch each variable the step assigns gets a new array holding the graph's value (arrays a
  caller holds are never written by a later launch).
* shapes and Python values: a new shape or a new Python argument is a new trace (tg.function's
  rules), so a new capture; a graph never replays for inputs it was not captured for.
* optimizers: an optimizer's `apply_gradients` (a Keras-style step: `opt.apply_gradients(zip(
  tape.gradient(loss, vars), vars))`) is captured with the rest of the step. Its per-step
  terms are computed on the device inside the graph (tapegpu/optimizers/captured.py): the
  graph reads `iterations` and writes `iterations + 1`; the learning rate is a number in a
  device buffer (written again before a launch when `optimizer.learning_rate` was set to
  another number), a tensor's or variable's array, or a schedule of tg.optimizers.schedules
  computed from the device's step count; Adam's bias correction and the other optimizers'
  step terms (`_hyper`) are computed from those, and the fused SGD and Adam kernels read the
  step's rate through a pointer (`_devlr` kernels). Each launch also counts the step on the
  host (`optimizer._step`, what the uncaptured replay and `optimizer.learning_rate` read), and
  slots the optimizer was given since the capture (a checkpoint's restore) are copied into the
  graph's. The results are the uncaptured replay's and eager code's, bit for bit on
  `cuda_emu` and the CuPy stand-in (see captured.py for a GPU's float64 library functions).
  A change of the optimizer's settings or of the kind of its learning rate captures again.

Refused (uncaptured replay, the reason kept): steps on numpy; `tg.print` and guards (values the
Python code read on the host; a capture may not read the device); random draws (a graph would
replay the same numbers); an optimizer update that needs host code at every call: a learning
rate that is a Python callable (not a schedule of tg.optimizers.schedules), a schedule without a
device form (CosineDecayRestarts with `t_mul != 1`, a subclass with its own `__call__`), Nadam
(its momentum schedule is a host loop over all steps), `iterations` or a tensor learning rate on
another device than the step's, a variable updated twice in one call; other update nodes (a
metric's update_state, `next(iterator)`, a distribute strategy's reduction, LossScaleOptimizer's
finite check); and any host read or synchronisation during the capture (CUDA's and CuPy's rule,
e.g. `float(t)` in the step). On a real GPU CuPy also refuses its cuBLAS calls during a capture
(CuPy 14.2: "calling cuBLAS API during stream capture is currently unsupported"): `matmul` calls
cuBLAS itself (backends/cublas.py), and a step with another cuBLAS call through CuPy replays
uncaptured there (docs/function.md).
"""
import collections
import threading

import numpy as np

from ..backends.emu import stream as emu_stream
from ..core.tensor import Tensor
from . import graph as _graph

TARGETS = ("cuda_emu", "cuda")
GRAPH_LAUNCH = emu_stream.GRAPH_LAUNCH  # the launch counter's name of one graph launch

_REFUSED_KINDS = {
    _graph.PRINT: "tg.print reads tensors on the host at every call",
    _graph.GUARD: "the function's Python code read a tensor's value (a guard checked on the "
                  "host at every call)",
}


def refusal(plan):
    """Why `plan` cannot be captured (a sentence), or None when it can."""
    devs = {n.dev for n in plan.graph.nodes if n.dev is not None}
    devs |= {plan.graph.meta[v][3] for v in plan.graph.inputs}
    names = sorted({d.name for d in devs})
    if len(devs) != 1 or names[0] not in TARGETS:
        return f"graphs are captured on one device of {', '.join(TARGETS)}; this step runs " \
               f"on {', '.join(names) or 'no device'}"
    dev = next(iter(devs))
    for n in plan.graph.nodes:
        if n.kind == "random":
            return "a random draw: a graph would replay the same numbers at every call"
    for kind, fn, _, _, _, params, _ in plan.steps:
        if kind in _REFUSED_KINDS:
            return _REFUSED_KINDS[kind]
        if kind == _graph.UPDATE:
            reason = _update_refusal(fn, params, dev)
            if reason is not None:
                return reason
    return None


def _update_refusal(fn, variables, dev):
    """Why the update node `fn` (of `variables`) cannot be captured, or None: an optimizer's
    apply_gradients is captured where its step terms compute on the device
    (tapegpu/optimizers/captured.py); other update nodes run Python code at every call."""
    from ..optimizers import captured
    if captured.is_update(fn):
        return captured.refusal(fn.__self__, variables, dev)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or \
        type(fn).__name__
    return f"the update node {name!r} runs host code at every call (a metric's update_state, " \
           "next(iterator), a distribute strategy's reduction, LossScaleOptimizer's finite " \
           "check); only an optimizer's apply_gradients is captured"


class Capture:
    """The captured graph of one concrete function's plan, and its replays (`run`)."""

    def __init__(self, plan):
        self.plan = plan
        devs = [n.dev for n in plan.graph.nodes if n.dev is not None] + \
            [plan.graph.meta[v][3] for v in plan.graph.inputs]  # (a step of side effects only)
        self.dev = devs[0] if devs else None
        self.reason = refusal(plan)
        self.entry = None
        self._lock = threading.Lock()
        self.info = {"captured": False, "reason": self.reason, "captures": 0,
                     "graph_launches": 0, "copies": 0}

    def run(self, arrays):
        """The plan's outputs for `arrays`: from the graph when it is captured. The graph's
        buffers serve one call at a time: a call while another thread (or a re-entrant call)
        uses them replays uncaptured."""
        if self.reason is not None or not self._lock.acquire(blocking=False):
            return _graph.replay(self.plan, arrays)
        try:
            return self._run(arrays)
        finally:
            self._lock.release()

    def _run(self, arrays):
        if self.entry is None or not self.entry.fits(arrays):
            try:
                self.entry, outs = _capture(self.plan, self.dev, arrays)
            except _Refused as e:
                self._refuse(str(e))
                return _graph.replay(self.plan, arrays)
            self.info.update(captured=True, captures=self.info["captures"] + 1)
            self._count(outs)
            return outs.arrays
        outs = self.entry.launch(arrays)
        self._count(outs)
        return outs.arrays

    def _refuse(self, reason):
        self.reason = self.info["reason"] = reason
        self.entry = None
        self.info["captured"] = False

    def _count(self, outs):
        self.info["graph_launches"] += outs.launched
        self.info["copies"] += outs.copies


class _Refused(Exception):
    pass


class _Result:
    __slots__ = ("arrays", "launched", "copies")

    def __init__(self, arrays, launched, copies):
        self.arrays, self.launched, self.copies = arrays, launched, copies


def _stream(dev):
    """A stream that can capture on `dev`, and whether the work it captures runs meanwhile."""
    if dev.name == "cuda_emu":
        return emu_stream.Stream(dev), emu_stream.EXECUTES_WHILE_CAPTURING
    return dev.xp.cuda.Stream(non_blocking=True), False


def _copy_into(xp, dst, src):
    """A device-to-device copy of `src` into the graph's buffer `dst` (same shape and dtype):
    on `cuda` a memcpy on the current stream where `src` is C-contiguous (`cupy.copyto` would
    be a kernel launch), else copyto."""
    if xp is not np and src.flags.c_contiguous and dst.flags.c_contiguous and \
            src.dtype == dst.dtype and src.shape == dst.shape:
        if src.nbytes:
            dst.data.copy_from_device_async(src.data, src.nbytes)
        return
    xp.copyto(dst, src)


def _fresh(xp, a):
    """A new array equal to `a` (a copy of the graph's buffer the caller owns)."""
    if xp is np or not a.flags.c_contiguous:
        return xp.array(a, copy=True)
    out = xp.empty(a.shape, a.dtype)
    _copy_into(xp, out, a)
    return out


class _Entry:
    """One capture: the graph, its input buffers, the variables it reads and assigns."""

    def __init__(self, dev, graph, inputs, reads, writes, outputs, keep, pool, updates):
        self.dev, self.graph, self.inputs = dev, graph, inputs
        self.reads, self.writes, self.outputs = reads, writes, outputs
        self.keep, self.pool = keep, pool  # every array (and the pool) the graph uses
        self.updates = updates  # the optimizers' updates (captured.GraphUpdate)

    def fits(self, arrays):
        return all(a.shape == b.shape and a.dtype == b.dtype
                   for a, b in zip(arrays, self.inputs)) and \
            all(var._value._data.shape == buf.shape and var._value._data.dtype == buf.dtype
                for var, buf in self.reads) and all(u.fits() for u in self.updates)

    def launch(self, arrays):
        xp = self.dev.xp
        copies = 0
        for buf, a in zip(self.inputs, arrays):
            if a is not buf:
                _copy_into(xp, buf, a)
                copies += 1
        for var, buf in self.reads:
            if var._value._data is not buf:
                _copy_into(xp, buf, var._value._data)
                copies += 1
        for u in self.updates:
            copies += u.before_launch(lambda dst, src: _copy_into(xp, dst, src))
        _launch(self.dev, self.graph)
        return self.finish(copies)

    def finish(self, copies, launched=1):
        """After a launch: variables assigned get new arrays, outputs are new arrays, the
        optimizers count the step on the host."""
        xp = self.dev.xp
        for u in self.updates:
            u.after_launch()
        for var, buf in self.writes:
            var._value = Tensor(_fresh(xp, buf), var._value._dev)
        outs = []
        for kind, v in self.outputs:
            if kind == "v":
                outs.append(_fresh(xp, v))
            else:
                outs.append(v)
        return _Result(outs, launched, copies + len(self.writes) + len(outs))


def _assign_value(xp, kind):
    if kind == "assign":
        return None
    return xp.add if kind == "assign_add" else xp.subtract


def _capture(plan, dev, arrays):
    """Captures `plan` on `dev` for `arrays`; returns (_Entry, the first call's _Result)."""
    xp = dev.xp
    updates = {}  # step index -> captured.GraphUpdate, made before the capture begins
    for k, (kind, fn, _, _, _, params, _) in enumerate(plan.steps):
        if kind == _graph.UPDATE:
            reason = _update_refusal(fn, params, dev)  # (its settings may have changed)
            if reason is not None:
                raise _Refused(reason)
            from ..optimizers import captured
            updates[k] = captured.GraphUpdate(fn.__self__, params, dev)
    inputs = [xp.array(a, copy=True, order="C") for a in arrays]
    variables = []
    for k, (kind, fn, *_) in enumerate(plan.steps):
        if kind in (_graph.READ, _graph.ASSIGN):
            new = [fn]
        elif kind == _graph.UPDATE:
            new = updates[k].reads
        else:
            continue
        variables += [v for v in new if all(v is not w for w in variables)]
    reads = [(var, var._value._data) for var in variables]
    pool = None
    stream, executes = _stream(dev)
    if executes:  # the capture runs the updates: one that fails gives their slots back
        for u in updates.values():
            u.snapshot()
    if dev.name == "cuda":  # a pool of the graph's own: nothing it uses is given to others
        pool = xp.cuda.MemoryPool()
        allocator = xp.cuda.using_allocator(pool.malloc)
    else:
        allocator = _null()
    emu = dev.name == "cuda_emu"
    counted = collections.Counter(dev.launches)
    vals = plan.template.copy()
    for v, a in zip(plan.graph.inputs, inputs):
        vals[v] = a
    context = dev.context() if hasattr(dev, "context") else _null()  # the GPU of the step
    try:
        with context, allocator, stream:
            stream.begin_capture()
            try:
                for k, (kind, fn, ins, out, _, params, buf) in enumerate(plan.steps):
                    args = [vals[i] for i in ins]
                    before = collections.Counter(dev.launches) if emu else None
                    if kind == _graph.OP:
                        call = fn if buf is None else _without_out(fn)
                        outs = (_array(xp, call(*args)),)
                        vals[out] = outs[0]
                    elif kind == _graph.FUSED:
                        call = fn
                        outs = tuple(_array(xp, a) for a in fn(*args))
                        for v, a in zip(out, outs):
                            vals[v] = a
                    elif kind == _graph.READ:
                        vals[out] = fn._value._data
                        continue
                    elif kind == _graph.UPDATE:  # on the graph's buffers; see GraphUpdate
                        u = updates[k]
                        call = u.fn
                        args = args + u.inputs()
                        outs = tuple(_array(xp, a) for a in call(*args))
                        for var, a in zip(u.writes, outs):
                            var._value = Tensor(a, var._value._dev)
                    else:  # ASSIGN
                        op = _assign_value(xp, params)
                        if op is None:
                            fn._value = Tensor(args[0], fn._value._dev)
                            continue
                        call = op
                        args = [fn._value._data, args[0]]
                        outs = (op(*args),)
                        fn._value = Tensor(outs[0], fn._value._dev)
                    if emu:
                        launched = collections.Counter(dev.launches)
                        launched.subtract(before)
                        stream.record(call, args, outs, {k: n for k, n in launched.items() if n})
            except BaseException:
                _abort(stream)
                raise
            graph = stream.end_capture()
    except _Refused:
        raise
    except Exception as e:  # a host read, a sync or an allocation the capture refuses
        for var, buf in reads:  # the capture did not run the step: the variables are as before
            var._value = Tensor(buf, var._value._dev)
        for u in updates.values():
            u.restore()
        raise _Refused(f"the capture failed: {type(e).__name__}: {e}") from e
    writes = [(var, var._value._data) for var, buf0 in reads if var._value._data is not buf0]
    outputs = [(k, vals[v]) if k == "v" else (k, v) for k, v in plan.graph.outputs]
    keep = [a for a in vals if a is not None]
    entry = _Entry(dev, graph, inputs, reads, writes, outputs, keep, pool,
                   list(updates.values()))
    for var, buf in reads:  # the graph reads these buffers: the step starts from them
        var._value = Tensor(buf, var._value._dev)
    for u in updates.values():
        u.forget()
    if not executes:  # a GPU's capture only recorded the work: the first call launches it
        dev.launches.clear()
        dev.launches.update(counted)  # what the capture counted was not launched
        _launch(dev, graph)
    return entry, entry.finish(len(inputs), launched=int(not executes))


def _array(xp, a):
    """A step's result as an array (numpy's reductions give scalars: a graph needs buffers)."""
    return xp.asarray(a) if isinstance(a, np.generic) else a


def _launch(dev, graph):
    with dev.context() if hasattr(dev, "context") else _null():
        graph.launch()
    if dev.name != "cuda_emu":  # the emulator's graph counts its own launch
        dev.launches[GRAPH_LAUNCH] += 1


def _without_out(fn):
    def call(*args):
        return fn(*args, None)
    return call


def _abort(stream):
    abort = getattr(stream, "abort", None)
    if abort is not None:
        abort()
    elif stream.is_capturing():
        stream.end_capture()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
