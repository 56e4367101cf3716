"""GradientTape: records ops on watched tensors and differentiates them (reverse mode).

A tape tracks tensor ids: the ones it watches, and the outputs of every op it recorded. An op is
recorded when one of its inputs is tracked. Several tapes may record at once; each keeps its own
entries. A tape computing a gradient inside an outer tape's context has its rules' ops recorded
by the outer tape, which is how higher-order gradients (Hessians) work.
"""
import contextlib

from ..core import nest
from .. import ops
from . import sweep
from . import forward_jacobian as fj
from .checkpoint import Budget
from .jacobian import batch_jacobian, check_target, jacobian, warn_integer_source
from .memory import Ledger, plan, tape_stats
from .recorder import (READ_VARIABLE, Entry, Recorder, UnconnectedGradients, source_uid,
                       as_unconnected)
from ..core.profiler import _active as _profilers
from ..core.tensor import Tensor, Variable, _thread


class GradientTape(Recorder):
    """Records operations for automatic differentiation, with TensorFlow's semantics.

    >>> x = tg.constant(3.0)
    >>> with tg.GradientTape() as g:
    ...     g.watch(x)
    ...     y = x * x
    >>> float(g.gradient(y, x))
    6.0

    Nested tapes give higher-order derivatives:

    >>> with tg.GradientTape() as g2:
    ...     g2.watch(x)
    ...     with tg.GradientTape() as g1:
    ...         g1.watch(x)
    ...         y = x * x * x
    ...     dy = g1.gradient(y, x)
    >>> float(g2.gradient(dy, x))
    18.0
    """

    def __init__(self, persistent=False, watch_accessed_variables=True, memory_budget=None,
                 track_memory=False):
        self._persistent = bool(persistent)
        if memory_budget is not None and (isinstance(memory_budget, bool) or
                                          not isinstance(memory_budget, (int, float)) or
                                          not memory_budget > 0):
            raise ValueError(f"GradientTape: memory_budget must be a positive number of bytes "
                             f"or None, got {memory_budget!r}")
        self._track_memory = bool(track_memory) or bool(memory_budget)
        self._budget_bytes = memory_budget
        self._budget = Budget(memory_budget) if memory_budget else None
        self._peak_bytes = None
        self._watch_accessed = bool(watch_accessed_variables)
        self._tracked = set()  # ids that depend on what the tape watches
        self._roots = set()  # ids watched (tensors and variables)
        self._entries = []
        self._variables = {}
        self._recording = False
        self._spent = False
        self._failed = None  # what interrupted this non-persistent tape's sweep ("Type: msg")
        self._stats_peak = 0

    # -- context ------------------------------------------------------------------------------
    def __enter__(self):
        if self._spent:
            raise RuntimeError("GradientTape: this non-persistent tape already computed its "
                               "gradients and cannot record again; use a new tape or "
                               "persistent=True")
        if self._recording:
            raise ValueError("GradientTape: the tape is already recording (nested `with` on the "
                             "same tape)")
        self._push()
        return self

    def __exit__(self, *exc):
        if self._recording:
            self._pop()

    def _push(self):
        self._stack = _thread.recorders  # this thread's: the tape records this thread's ops
        self._stack.append(self)
        self._recording = True

    def _pop(self):
        """Stops recording; returns where the tape was among its thread's recorders."""
        stack = self._stack
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is self:
                del stack[i]
                break
        else:
            i = len(stack)
        self._recording = False
        return i

    @contextlib.contextmanager
    def stop_recording(self):
        """Temporarily stops recording on this tape.

        >>> x = tg.constant(2.0)
        >>> with tg.GradientTape() as t:
        ...     t.watch(x)
        ...     with t.stop_recording():
        ...         y = x * x
        >>> print(t.gradient(y, x))
        None
        """
        if not self._recording:
            raise ValueError("GradientTape.stop_recording: the tape is not recording (use it "
                             "inside the tape's `with` block)")
        where = self._pop()
        try:
            yield
        finally:  # back in its place: its nesting with accumulators and other tapes is kept
            self._stack.insert(min(where, len(self._stack)), self)
            self._recording = True

    def reset(self):
        """Clears everything recorded and watched so far (the tape keeps recording).

        >>> x = tg.constant(3.0)
        >>> with tg.GradientTape() as t:
        ...     t.watch(x)
        ...     y = x * x
        ...     t.reset()
        ...     t.watch(x)
        ...     z = x * 2.0
        >>> float(t.gradient(z, x))
        2.0
        """
        self._tracked = set()
        self._roots = set()
        self._entries = []
        self._variables = {}
        self._spent = False
        self._failed = None
        self._budget = Budget(self._budget_bytes) if self._budget_bytes else None

    # -- memory ---------------------------------------------------------------------------------
    def stats(self):
        """What the tape holds: recorded ops, saved bytes (all, activations only, by op type),
        the budget's checkpoints, and the peak of saved plus cotangent bytes of the last sweep
        (`peak_bytes`, measured when the tape has `track_memory=True` or a `memory_budget`, or
        runs inside `tg.profiler`; None otherwise, as measuring costs time per op).

        >>> x = tg.ones((256, 256))
        >>> with tg.GradientTape() as t:
        ...     t.watch(x)
        ...     y = tg.reduce_sum(tg.exp(x))
        >>> t.stats()["saved_bytes_by_op"]["exp"]
        262144
        """
        st = tape_stats(self)
        if self._spent:  # released by its one sweep: report what it had recorded
            st["recorded_ops"] = self._recorded_before_release
        if self._budget is not None:
            st["memory_budget"] = self._budget.limit
            st["checkpoint_bytes"] = self._budget.kept_checkpoints
            st["peak_kept_bytes"] = self._budget.peak_kept
            st["segments"] = len(self._budget.closed)
        return st

    def plan(self, target, sources):
        """Before running backward: what each VJP frees, what is recomputed, the predicted
        peak (a `memory.Plan`; print it for a table)."""
        return plan(self, target, sources)

    # -- watching -----------------------------------------------------------------------------
    def watch(self, tensor):
        """Makes the tape track `tensor` (a tensor, variable or nested structure of them).

        >>> x = tg.constant([1.0, 2.0])
        >>> with tg.GradientTape() as t:
        ...     t.watch(x)
        ...     y = tg.reduce_sum(x * x)
        >>> t.gradient(y, x).numpy()
        array([2., 4.], dtype=float32)
        """
        self._check_usable("watch")
        if type(tensor) is list or type(tensor) is tuple:  # (most calls: tensors, no nesting)
            tracked, roots = self._tracked, self._roots
            for t in tensor:
                if type(t) is not Tensor:
                    break
                if t._data.dtype.kind in "fcV":
                    tracked.add(t._uid)
                    roots.add(t._uid)
            else:
                return
        for t in nest.flatten(tensor):
            if isinstance(t, Variable):
                self._variables.setdefault(t._uid, t)
                self._watch_uid(t._uid)
            elif isinstance(t, Tensor):
                if t._data.dtype.kind in "fcV":  # only floating tensors carry gradients
                    self._watch_uid(t._uid)
            else:  # TensorFlow raises ValueError ("Passed in object ... not tf.Tensor")
                raise ValueError(f"GradientTape.watch: expected a tg.Tensor or tg.Variable, got "
                                 f"{type(t).__name__}; convert it with tg.constant first")

    def watched_variables(self):
        """The variables watched so far (explicitly or by being read), in the order they were
        constructed (as TensorFlow documents).

        >>> v = tg.Variable(1.0, name="v")
        >>> with tg.GradientTape() as t:
        ...     y = v * 2.0
        >>> [w.name for w in t.watched_variables()]
        ['v']
        """
        return tuple(sorted(self._variables.values(), key=lambda v: v._uid))

    # -- recording (record itself is _Recorder's, called by registry.apply) ------------------
    def record_variable_read(self, var, out):
        uid = var._uid
        if uid not in self._tracked:
            if not (self._watch_accessed and var.trainable):
                return out
            self._variables[uid] = var
            self._watch_uid(uid)
        if out is None:
            out = Tensor(var._value._data, var._value._dev)
        self._tracked.add(out._uid)
        e = Entry(READ_VARIABLE, (uid,), out._uid, (), {}, (var.shape,))
        self._entries.append(e)
        if self._budget is not None:
            self._budget.on_record(e, (Tensor(var._value._data, var._value._dev),), out)
        return out

    def note_variable(self, var):
        """Watches `var` if this tape watches the variables it sees read."""
        if self._watch_accessed and var.trainable and var._uid not in self._tracked:
            self._variables[var._uid] = var
            self._watch_uid(var._uid)

    def _watch_uid(self, uid):
        self._tracked.add(uid)
        self._roots.add(uid)

    def _reach(self, sources):
        """The tape's tracked ids when `sources` include everything it watches: then every
        entry depends on a source and the sweep can skip `sweep.reachable`. Else None."""
        return self._tracked if self._roots.issubset(sources) else None

    # -- differentiation ----------------------------------------------------------------------
    def _check_usable(self, what):
        if self._failed is not None:
            raise RuntimeError(f"GradientTape.{what}: an earlier call on this non-persistent "
                               f"tape raised {self._failed}; that sweep may already have "
                               "released part of what the tape kept, so it cannot compute "
                               "gradients again; fix the error, or create the tape with "
                               "persistent=True to retry")
        if self._spent:  # TensorFlow's message (code matches on it)
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one "
                               f"set of gradients (or jacobians) (GradientTape.{what}); create "
                               "it with persistent=True to call gradient more than once")

    def _begin(self, what):
        self._check_usable(what)
        if self._recording and not self._persistent:
            self._pop()  # as TensorFlow: a non-persistent tape stops recording here

    def _sweep(self, *args, **kwargs):
        """sweep.backward, remembering on a non-persistent tape an error that interrupted it
        (its VJPs release saved values as they go: a retry would fail on those)."""
        try:
            return sweep.backward(*args, **kwargs)
        except Exception as exc:
            if not self._persistent:  # the text only: the exception's frames hold arrays
                self._failed = f"{type(exc).__name__}: {exc}"
            raise

    def _finish(self):
        if not self._persistent:
            self._spent = True
            self._recorded_before_release = len(self._entries)
            self._entries = []
            self._tracked = set()
            self._roots = set()

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=UnconnectedGradients.NONE):
        """d(target)/d(sources): the sum over the target's elements, or the vector-Jacobian
        product with `output_gradients`. The result has the structure of `sources`.

        >>> x = tg.Variable([1.0, 2.0])
        >>> with tg.GradientTape() as t:
        ...     y = x * x
        >>> t.gradient(y, x, output_gradients=tg.constant([1.0, 10.0])).numpy()
        array([ 2., 40.], dtype=float32)
        """
        unconnected = as_unconnected(unconnected_gradients)
        targets = [target] if isinstance(target, (Tensor, Variable)) else nest.flatten(target)
        for t in targets:
            check_target(t, "GradientTape.gradient")
        flat, flat_sources, src_uids, floats = _flat_sources(sources)
        self._begin("gradient")
        if not floats:
            for s in flat_sources:
                if not _is_float(s):
                    warn_integer_source(s, "GradientTape.gradient")
        if output_gradients is None:
            seeds = [(_target_uid(t), ops.ones_like(_value(t))) for t in targets
                     if _is_float(t)]
        else:
            ogs = nest.flatten(output_gradients)
            if len(ogs) != len(targets):
                raise ValueError(f"GradientTape.gradient: {len(targets)} targets but "
                                 f"{len(ogs)} output_gradients")
            seeds = []
            for t, og in zip(targets, ogs):
                if og is None:
                    og = ops.ones_like(_value(t))
                og = ops.convert_to_tensor(og, dtype=_value(t).dtype)
                if og.shape != tuple(t.shape):
                    raise ValueError(f"GradientTape.gradient: output_gradients of shape "
                                     f"{og.shape} for a target of shape {tuple(t.shape)}; they "
                                     "must match")
                if _is_float(t):
                    seeds.append((_target_uid(t), og))
        ledger = Ledger() if self._track_memory or _profiling() else None
        grads = self._sweep(self._entries, seeds, src_uids, 0, release=not self._persistent,
                            ledger=ledger, reach=self._reach(src_uids))
        if ledger is not None:
            self._peak_bytes = ledger.peak
        for u, g in seeds:  # a source that is itself a target gets its seed
            if u in grads and grads[u] is None:
                grads[u] = g
        self._finish()
        if floats:  # (every source floating: None only where unconnected)
            get = grads.get
            result = [get(u) for u in src_uids]
            if any(g is None for g in result):
                result = [_finalize(g, s, unconnected, ()) for g, s in zip(result, flat_sources)]
        else:
            result = [_finalize(grads.get(u), s, unconnected, ()) for u, s in
                      zip(src_uids, flat_sources)]
        if flat:  # a list or tuple of tensors: the result in the same type
            return result if type(sources) is list else tuple(result)
        return nest.pack_sequence_as(sources, result)

    def batched_gradient(self, target, sources, output_gradients, batch_ndim=1,
                         unconnected_gradients=UnconnectedGradients.NONE):
        """Many VJPs in one backward sweep (a tapegpu extension).

        `output_gradients` has shape `batch_shape + target.shape` with `batch_ndim` leading
        axes; each source's result has shape `batch_shape + source.shape`, equal to stacking
        one `gradient` call per cotangent.

        >>> x = tg.constant([1.0, 2.0])
        >>> with tg.GradientTape() as t:
        ...     t.watch(x)
        ...     y = x * x
        >>> t.batched_gradient(y, x, tg.eye(2)).numpy()  # the Jacobian, row by row
        array([[2., 0.],
               [0., 4.]], dtype=float32)
        """
        check_target(target, "GradientTape.batched_gradient")
        unconnected = as_unconnected(unconnected_gradients)
        flat_sources = nest.flatten(sources)
        src_uids = [source_uid(s, i) for i, s in enumerate(flat_sources)]
        self._begin("batched_gradient")
        y = _value(target)
        og = ops.convert_to_tensor(output_gradients, dtype=y.dtype)
        batch = og.shape[:batch_ndim]
        if og.shape[batch_ndim:] != y.shape:
            raise ValueError(f"GradientTape.batched_gradient: output_gradients of shape "
                             f"{og.shape} must be batch_shape + target.shape {y.shape} with "
                             f"{batch_ndim} batch axes")
        seeds = [(_target_uid(target), og)] if _is_float(target) else []
        grads = self._sweep(self._entries, seeds, src_uids, batch_ndim,
                            release=not self._persistent, reach=self._reach(src_uids))
        self._finish()
        result = [_finalize(grads.get(u), s, unconnected, batch) for u, s in
                  zip(src_uids, flat_sources)]
        return nest.pack_sequence_as(sources, result)

    def jacobian(self, target, sources, unconnected_gradients=UnconnectedGradients.NONE,
                 parallel_iterations=None, experimental_use_pfor=True, mode="auto"):
        """The Jacobian `target.shape + source.shape` for each source.

        `mode='reverse'`: batched VJPs, one backward sweep per chunk of target elements (see
        jacobian.py); `mode='forward'`: batched JVPs, one forward sweep over the recorded ops per
        chunk of source elements (see forward_jacobian.py); `'auto'` (the default) picks forward
        mode when the sources have fewer elements than the target. `parallel_iterations` bounds
        the chunk size (else chunks fit `tapegpu.autodiff.jacobian.MEMORY_BUDGET`, and a
        Jacobian larger than that budget raises MemoryError before any work);
        `experimental_use_pfor=False` falls back to one reverse sweep per target element
        (reverse mode only; as in TensorFlow, it needs a persistent tape).

        >>> x = tg.constant([1.0, 2.0])
        >>> with tg.GradientTape() as t:
        ...     t.watch(x)
        ...     y = x * x
        >>> t.jacobian(y, x, mode="forward").numpy()
        array([[2., 0.],
               [0., 4.]], dtype=float32)
        """
        unconnected = as_unconnected(unconnected_gradients)
        if (experimental_use_pfor or mode == "forward") and \
                fj.use_forward(self, target, sources, mode, "jacobian"):
            try:
                return fj.jacobian(self, target, sources, unconnected, parallel_iterations)
            except fj.NoJVPError:  # a custom gradient that supports reverse mode only
                if mode == "forward":
                    raise
        return jacobian(self, target, sources, unconnected, parallel_iterations,
                        experimental_use_pfor)

    def batch_jacobian(self, target, source, unconnected_gradients=UnconnectedGradients.NONE,
                       parallel_iterations=None, experimental_use_pfor=True, mode="auto"):
        """Per-example Jacobians: `(b,) + target.shape[1:] + source.shape[1:]`; `mode` as in
        `jacobian` (forward mode when a row of the source is smaller than a row of the
        target).

        >>> x = tg.constant([[1.0, 2.0], [3.0, 4.0]])
        >>> with tg.GradientTape() as t:
        ...     t.watch(x)
        ...     y = x * x
        >>> t.batch_jacobian(y, x).numpy()
        array([[[2., 0.],
                [0., 4.]],
        <BLANKLINE>
               [[6., 0.],
                [0., 8.]]], dtype=float32)
        """
        unconnected = as_unconnected(unconnected_gradients)
        if (experimental_use_pfor or mode == "forward") and \
                fj.use_forward(self, target, source, mode, "batch_jacobian"):
            try:
                return fj.batch_jacobian(self, target, source, unconnected, parallel_iterations)
            except fj.NoJVPError:
                if mode == "forward":
                    raise
        return batch_jacobian(self, target, source, unconnected, parallel_iterations,
                              experimental_use_pfor)


def _profiling():
    return bool(_profilers)


def _flat_sources(sources):
    """(whether `sources` is a list or tuple of tensors and variables, which is its own flat
    form (most calls), the flat sources, their ids, whether all are floating)."""
    if type(sources) is list or type(sources) is tuple:
        uids = []
        floats = True
        for s in sources:
            if type(s) is Tensor:
                d = s._data
            elif isinstance(s, (Tensor, Variable)):
                d = _value(s)._data
            else:
                break
            uids.append(s._uid)
            floats = floats and d.dtype.kind in "fcV"
        else:
            return True, sources, uids, floats
    flat = nest.flatten(sources)
    uids = [source_uid(s, i) for i, s in enumerate(flat)]
    return False, flat, uids, all(_is_float(s) for s in flat)


def _value(t):
    return t._value if isinstance(t, Variable) else t


def _is_float(t):
    return _value(t)._data.dtype.kind in "fcV"


def _target_uid(t):
    if isinstance(t, (Tensor, Variable)):
        return t._uid
    raise TypeError(f"GradientTape.gradient: the target is a {type(t).__name__}; it must be a "
                    "tg.Tensor computed under the tape")


def _finalize(g, source, unconnected, batch):
    """None for integer sources; zeros or None for unconnected ones; else the cotangent."""
    v = _value(source)
    if v._data.dtype.kind not in "fcV":
        return None
    if g is None:
        if unconnected is UnconnectedGradients.ZERO:
            return ops.zeros(tuple(batch) + v.shape, dtype=v.dtype)
        return None
    return g
