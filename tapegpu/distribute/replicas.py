"""The replicas of `Strategy.run`: the replica context of each, their threads taking turns,
`merge_call` (where `optimizer.apply_gradients` in a replica goes), and the update it makes.

Several local replicas run as threads, one per replica, that take turns in replica order (one
runs Python at a time, as TensorFlow's MirroredStrategy runs them) until each returns or calls
`merge_call`; once every replica waits there, the calling thread runs the merge function once,
in the cross-replica context, and the replicas go on with its result. One local replica runs in
the calling thread, and `merge_call` runs the merge function at once.
"""
import threading

import numpy as np

from ..core.device import device as _device_scope
from ..core.tensor import Tensor, Variable, _thread, convert_to_tensor
from ..data.iterators import unseen
from ..optimizers import base as _optimizer_base
from .collectives import Average, Sum
from .values import PerReplica, component, effect, map_leaves, regroup


class _Context(threading.local):
    """This thread's strategies: the scopes it entered (innermost last) and, inside
    `strategy.run`, the replica it runs."""

    def __init__(self):
        self.scopes = []
        self.replica = None


context = _ctx = _Context()


def as_tensor(v, what):
    if isinstance(v, Variable):
        return v._read()
    if isinstance(v, Tensor):
        return v
    try:
        return convert_to_tensor(v)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"tg.distribute.{what}: expected tensors, got {type(v).__name__} "
                        f"({exc})") from None


def reduce_op_of(op, what):
    """Sum or Average from TensorFlow's `ReduceOp.SUM` / `ReduceOp.MEAN` or 'SUM' / 'MEAN'."""
    if isinstance(op, str):
        key = op.upper()
        if key in ("SUM", "MEAN"):
            return Sum if key == "SUM" else Average
    elif op is Sum or op is Average:
        return op
    raise ValueError(f"tg.distribute.{what}: reduce_op must be tg.distribute.ReduceOp.SUM or "
                     f"ReduceOp.MEAN (or 'SUM', 'MEAN'), got {op!r}")


# -- replica context ----------------------------------------------------------------------------
class ValueContext:
    """What `experimental_distribute_values_from_function` tells `value_fn`."""

    def __init__(self, replica_id_in_sync_group=0, num_replicas_in_sync=1):
        self.replica_id_in_sync_group = replica_id_in_sync_group
        self.num_replicas_in_sync = num_replicas_in_sync


class ReplicaContext:
    """The strategy's API in a replica (TensorFlow's `tf.distribute.ReplicaContext`), from
    `tg.distribute.get_replica_context()` inside `strategy.run`."""

    def __init__(self, strategy, replica_id_in_sync_group, run=None, local=0):
        self.strategy = strategy
        self._id = replica_id_in_sync_group
        self._run = run  # the ThreadedRun of several local replicas, or None
        self._local = local

    @property
    def num_replicas_in_sync(self):
        return self.strategy.num_replicas_in_sync

    @property
    def replica_id_in_sync_group(self):
        """This replica's index among all the job's replicas, an int32 scalar tensor."""
        return convert_to_tensor(np.int32(self._id))

    @property
    def devices(self):
        return (self.strategy._devices[self._local].name,)

    def merge_call(self, merge_fn, args=(), kwargs=None):
        """Runs `merge_fn(strategy, *args, **kwargs)` once for all local replicas, in the
        cross-replica context: every replica must call it; the arguments come together as
        PerReplica values (the same object from every replica stays that object), and each
        replica receives the result (its component if it is a PerReplica)."""
        kwargs = dict(kwargs or {})
        if self._run is not None:
            return self._run.merge(self._local, merge_fn, args, kwargs)
        return _cross_replica(self.strategy, merge_fn, args, kwargs)

    def all_reduce(self, reduce_op, value, options=None):
        """`value` (a nest of tensors) reduced over all the job's replicas (SUM or MEAN), the
        result on every replica's device; every replica must call it.

            total = tg.distribute.get_replica_context().all_reduce("SUM", local_count)
        """
        what = "ReplicaContext.all_reduce"
        op = reduce_op_of(reduce_op, what)

        def reduce_leaf(strategy, v):
            parts = [as_tensor(p, what) for p in strategy.experimental_local_results(v)]
            total = strategy._reduce_tensors(op, parts, what)
            copies = strategy._xops.broadcast(strategy._devices, [total])
            return copies[0][0] if len(copies) == 1 else PerReplica([c[0] for c in copies])

        def merged(strategy, value):
            return map_leaves(lambda v: reduce_leaf(strategy, v), value)
        return self.merge_call(merged, args=(value,))




def _cross_replica(strategy, fn, args, kwargs):
    """`fn(strategy, *args, **kwargs)` in the cross-replica context of this thread."""
    saved, hook = _ctx.replica, getattr(_optimizer_base.in_replica, "apply", None)
    _ctx.replica = None
    _optimizer_base.in_replica.apply = None
    _ctx.scopes.append(strategy)
    try:
        with unseen():
            return fn(strategy, *args, **kwargs)
    finally:
        _ctx.scopes.pop()
        _ctx.replica = saved
        _optimizer_base.in_replica.apply = hook


def _merged_apply(strategy, optimizer, pairs, grad_op):
    """The update of `optimizer.apply_gradients` called in the replicas: gradients reduced
    over every replica, applied once on the primary copies, broadcast to the others."""
    pairs = list(pairs)
    variables = [v for _, v in pairs]
    for v in variables:
        if isinstance(v, PerReplica):
            raise ValueError("tg.distribute: the replicas passed different variables to "
                             "apply_gradients; every replica must update the same variables "
                             "in the same order")
    n = len(strategy._devices)
    per_replica = [[g[r] if isinstance(g, PerReplica) else g for g, _ in pairs]
                   for r in range(n)]
    grads = strategy._reduce_gradients(per_replica, variables, grad_op)
    with _device_scope(strategy._devices[0].backend):
        return optimizer.apply_gradients(zip(grads, variables))  # ThreadedRun broadcasts it


def _traced_apply(strategy, optimizer, pairs, grad_op):
    """`optimizer.apply_gradients` in the one local replica while a tg.function traces it
    (Keras `fit` under a strategy with one replica per process): the reduction over the
    replicas is one effect of the graph, run again at every call on that call's gradients, and
    the optimizer's update is traced after it, as it is without a strategy."""
    variables = [v for _, v in pairs]
    reduced = [g for g, _ in pairs]
    if strategy.num_replicas_in_sync > 1:
        reduced = effect(lambda grads: strategy._reduce_gradients([list(grads)], variables,
                                                                  grad_op),
                         reduced, f"{type(strategy).__name__} allreduce")
    hook = _optimizer_base.in_replica.apply
    _optimizer_base.in_replica.apply = None
    try:
        with _device_scope(strategy._devices[0].backend):
            return optimizer.apply_gradients(zip(reduced, variables))
    finally:
        _optimizer_base.in_replica.apply = hook


class Replica:
    """Sets up this thread as local replica `r` of a strategy while `call` runs: its device,
    its replica context, the variable watcher, and apply_gradients merging over replicas."""

    def __init__(self, strategy, r, grad_op, run=None):
        self.strategy = strategy
        self.r = r
        self.grad_op = grad_op
        self.run = run

    def call(self, fn, args, kwargs):
        s, r = self.strategy, self.r
        ctx = ReplicaContext(s, s._process * len(s._devices) + r, self.run, r)
        saved = (_ctx.replica, getattr(_optimizer_base.in_replica, "apply", None))
        grad_op = self.grad_op

        def apply(optimizer, grads_and_vars):
            if self.run is None and _thread.tracers:  # one local replica, traced
                return _traced_apply(s, optimizer, list(grads_and_vars), grad_op)
            return ctx.merge_call(_merged_apply, args=(optimizer, list(grads_and_vars),
                                                       grad_op))

        def watch(var):
            if var._uid not in s._mirrors and var._uid not in s._synced and \
                    (s._processes > 1 or len(s._devices) > 1):
                with unseen():  # a trace records no broadcast: it happens once, here
                    s._adopt(var, r)

        _ctx.replica = ctx
        _optimizer_base.in_replica.apply = apply
        _thread.variable_watchers.append(watch)
        _thread.variable_creators.append(watch)  # mirrored from its initial value
        try:
            with _device_scope(s._devices[r].backend):
                return fn(*args, **kwargs)
        finally:
            _thread.variable_creators.remove(watch)
            _thread.variable_watchers.remove(watch)
            _ctx.replica, _optimizer_base.in_replica.apply = saved


class _Aborted(BaseException):
    """Ends a replica thread whose sibling failed."""


class ThreadedRun:
    """`run` over several local replicas: one thread each, taking turns in replica order
    (one runs Python at a time) until it returns or calls merge_call; once every replica
    waits in merge_call, the calling thread runs the merge function (cross-replica context)
    and the replicas go on."""

    def __init__(self, strategy, fn, args, kwargs, grad_op):
        self.strategy = strategy
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.grad_op = grad_op
        n = len(strategy._devices)
        self.cv = threading.Condition()
        self.turn = None
        self.state = ["run"] * n
        self.results = [None] * n
        self.requests = [None] * n
        self.merged = None
        self.error = None
        self.aborted = False

    def run(self):
        threads = [threading.Thread(target=self._replica, args=(r,), daemon=True,
                                    name=f"tg.distribute replica {r}")
                   for r in range(len(self.state))]
        for t in threads:
            t.start()
        try:
            with self.cv:
                while self.error is None:
                    self._round()
                    if self.error is not None:
                        break
                    states = set(self.state)
                    if states == {"done"}:
                        break
                    if states == {"merge"}:
                        self._merge()
                        continue
                    waiting = [r for r, st in enumerate(self.state) if st == "merge"]
                    done = [r for r, st in enumerate(self.state) if st == "done"]
                    self.error = RuntimeError(
                        f"tg.distribute.{type(self.strategy).__name__}.run: replicas {done} "
                        f"returned while replicas {waiting} wait in merge_call (an "
                        "optimizer's apply_gradients, all_reduce); every replica must make "
                        "the same cross-replica calls")
        finally:
            with self.cv:
                self.aborted = self.error is not None
                self.cv.notify_all()
            for t in threads:
                t.join()
        if self.error is not None:
            raise self.error
        return self.results

    def _round(self):
        """Gives each running replica the turn, in order, until it yields."""
        for r, st in enumerate(self.state):
            if st != "run":
                continue
            self.turn = r
            self.cv.notify_all()
            while self.turn == r:
                self.cv.wait()
            if self.error is not None:
                return

    def _merge(self):
        s = self.strategy
        fns = {req[0] for req in self.requests}
        fn = self.requests[0][0]
        if len(fns) > 1 and not all(getattr(f, "__code__", None) is getattr(fn, "__code__", 1)
                                    for f in fns):
            self.error = RuntimeError(f"tg.distribute.{type(s).__name__}.run: the replicas "
                                      "called merge_call with different functions")
            return
        args = regroup([req[1] for req in self.requests])
        kwargs = regroup([req[2] for req in self.requests])
        s._activate(0)
        try:
            self.merged = _cross_replica(s, fn, args, kwargs)
        except BaseException as exc:  # noqa: B036 (handed to the caller of run)
            self.error = exc
            return
        # what the merge assigned (the update, the optimizer's iterations) goes to every replica
        s._broadcast([m for m in s._mirrors.values() if m.var._value is not m.values[0]],
                     primary=True)
        self.state = ["run"] * len(self.state)

    def _replica(self, r):
        with self.cv:
            while self.turn != r and not self.aborted:
                self.cv.wait()
            if self.aborted:
                return
        s = self.strategy
        s._activate(r)
        outcome = "done"
        try:
            self.results[r] = Replica(s, r, self.grad_op, self).call(
                self.fn, self.args[r], self.kwargs[r])
        except _Aborted:
            outcome = "aborted"
        except BaseException as exc:  # noqa: B036 (handed to the caller of run)
            outcome = "error"
            with self.cv:
                if self.error is None:
                    self.error = exc
        finally:
            s._save(r)
            with self.cv:
                self.state[r] = outcome
                self.turn = None
                self.cv.notify_all()

    def merge(self, r, fn, args, kwargs):
        """merge_call from replica r (which holds the turn)."""
        s = self.strategy
        with self.cv:
            s._save(r)
            self.requests[r] = (fn, args, kwargs)
            self.state[r] = "merge"
            self.turn = None
            self.cv.notify_all()
            while not (self.turn == r and self.state[r] == "run") and not self.aborted:
                self.cv.wait()
            if self.aborted:
                raise _Aborted()
        s._activate(r)
        return component(self.merged, r)
