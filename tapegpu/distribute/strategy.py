"""TensorFlow's distribution strategies (`tf.distribute`) on tapegpu's machinery.

    strategy = tg.distribute.MirroredStrategy()            # the GPUs of this process
    with strategy.scope():
        model = make_model()
        model.compile(optimizer="adam", loss=loss)
    model.fit(dataset, epochs=2)                           # each batch split over the replicas

`MirroredStrategy(devices)`: one replica per device of this process (GPUs, or logical CPU
devices '/cpu:0', '/cpu:1', ... which all compute on the CPU). `MultiWorkerMirroredStrategy()`:
one replica per MPI rank (run under mpiexec), on the rank's GPU (tg.distribute.init gives each
rank one) or its CPU; gradients cross ranks by NCCL (GPUs) or MPI (CPUs), as
`DistributedGradientTape`'s do.

Replicas. `run(fn, args)` calls `fn` once per replica, each on its device, in a thread of its
own, as TensorFlow does; the threads take turns (one runs Python at a time, in replica order),
so Python side effects (a layer building its variables) happen once and in order. A replica
that calls `optimizer.apply_gradients` (or `ReplicaContext.merge_call`, `all_reduce`) waits
there until every replica has; the calling thread then reduces the gradients (their sum, in
replica order, as TensorFlow's optimizers; the mean under Keras `fit`, whose losses are means
over each replica's share) and applies them once, on the first replica's device, and the new
values are broadcast to the other replicas (the cross-device ops: NCCL between GPUs, copies
otherwise). Every replica therefore holds the same bits.

Variables. A variable that a replica reads is mirrored from then on: one copy per replica
device, each replica reading its own (the strategy switches the copies as the turn passes; a
variable keeps the first replica's copy outside `run`). A replica may assign its own copy
(BatchNormalization's moving statistics): at the end of `run`, copies that differ are replaced
by their mean (floating point; other dtypes: the first replica's), which for moving averages
is what TensorFlow's SyncOnRead MEAN variables read. Under MultiWorkerMirroredStrategy a
variable is broadcast from rank 0 when a replica first reads it, so every rank starts from the
same values (TensorFlow broadcasts at creation).

Inside `tg.function`, `run`, `reduce` and the distributed iterators' `next` are each recorded
as one effect that runs eagerly at every call (the replicas' threads cannot be traced).
"""
import gc

import numpy as np

from .. import backends as _backend
from ..core import nest
from ..core.device import copy_to, device as _device_scope
from ..core.tensor import Tensor, Variable, _next_uid, convert_to_tensor
from . import collectives, cross_device, gradients, nccl, runtime
from .collectives import Average, Sum
from .experimental import CommunicationImplementation, CommunicationOptions
from .input import DistributedDataset, InputContext
from .replicas import (Replica, ReplicaContext, ThreadedRun, ValueContext, as_tensor, context,
                       reduce_op_of)
from .values import PerReplica, component, effect, map_leaves, regroup

_CPU_PREFIXES = ("/job:localhost/replica:0/task:0/device:", "/device:", "/", "device:")


# -- contexts -----------------------------------------------------------------------------------
_ctx = context
def get_strategy():
    """The strategy of the current scope or replica, else the default strategy (one replica,
    the current device), as `tf.distribute.get_strategy()`.

        with tg.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
            tg.distribute.get_strategy().num_replicas_in_sync  # 2
    """
    if _ctx.replica is not None:
        return _ctx.replica.strategy
    return _ctx.scopes[-1] if _ctx.scopes else _DEFAULT


def has_strategy():
    """Whether a strategy other than the default is in effect (a scope or a replica).

        tg.distribute.has_strategy()  # False
    """
    return get_strategy() is not _DEFAULT


def in_cross_replica_context():
    """True inside a strategy's `scope()` but outside `run` (TensorFlow's cross-replica
    context); False in a replica and outside any strategy.

        with tg.distribute.MirroredStrategy(["/cpu:0"]).scope():
            tg.distribute.in_cross_replica_context()  # True
    """
    return _ctx.replica is None and bool(_ctx.scopes)


def get_replica_context():
    """The `ReplicaContext` of the replica this code runs in (inside `strategy.run`), None in
    a cross-replica context, or the default strategy's replica context outside any strategy.

        def step(x):
            ctx = tg.distribute.get_replica_context()
            return x * float(ctx.replica_id_in_sync_group)
    """
    if _ctx.replica is not None:
        return _ctx.replica
    return None if _ctx.scopes else _DEFAULT_REPLICA


class _Scope:
    """`strategy.scope()`: the variables created in the outermost block are adopted by the
    strategy when it ends (mirrored on every replica device; broadcast from rank 0)."""

    def __init__(self, strategy):
        self.strategy = strategy
        self.start = None

    def __enter__(self):
        current = get_strategy()
        if current is not _DEFAULT and current is not self.strategy:
            raise ValueError(f"Mixing different tf.distribute.Strategy objects: "
                             f"{self.strategy!r} is not {current!r} (a strategy's scope "
                             "cannot be entered inside another strategy's)")
        if self.strategy not in _ctx.scopes and _ctx.replica is None:
            self.start = _next_uid()
        _ctx.scopes.append(self.strategy)
        return self.strategy

    def __exit__(self, kind, value, tb):
        _ctx.scopes.pop()
        start, self.start = self.start, None
        if start is not None and kind is None:
            self.strategy._adopt_created(start)
        return False


# -- replica devices ----------------------------------------------------------------------------
class _Device:
    """A replica's device: its backend and TensorFlow's name for it."""

    def __init__(self, backend, name):
        self.backend = backend
        self.name = name

    def __repr__(self):
        return self.name


def _replica_devices(devices, what):
    """MirroredStrategy's devices: all GPUs by default (else the CPU); '/cpu:N' names are
    logical CPU devices (TensorFlow's, after set_logical_device_configuration)."""
    if devices is None:
        n = _backend.gpu_count()
        if n == 0:
            return [_Device(_backend.NUMPY, "/job:localhost/replica:0/task:0/device:CPU:0")]
        return [_Device(_backend.gpu(i), _backend.gpu(i).device) for i in range(n)]
    if isinstance(devices, str) or not isinstance(devices, (list, tuple)):
        raise ValueError(f"tg.distribute.{what}: devices must be a list of device names such "
                         f"as ['/gpu:0', '/gpu:1'] or ['/cpu:0', '/cpu:1'], got {devices!r}")
    if not devices:
        raise ValueError(f"tg.distribute.{what}: `devices` cannot be empty")
    out, keys = [], []
    for name in devices:
        if not isinstance(name, str):
            raise ValueError(f"tg.distribute.{what}: devices must be strings, got {name!r}")
        key = name.strip().lower()
        for prefix in _CPU_PREFIXES:
            if key.startswith(prefix):
                key = key[len(prefix):]
        kind, _, index = key.partition(":")
        if kind == "cpu" and (index == "" or index.isdigit()):
            key = f"cpu:{int(index or 0)}"
            dev = _Device(_backend.NUMPY, f"/job:localhost/replica:0/task:0/device:CPU:"
                                          f"{int(index or 0)}")
        else:
            try:
                backend = _backend.lookup(name)
            except (RuntimeError, ValueError, TypeError) as exc:
                raise ValueError(f"tg.distribute.{what}: device {name!r}: {exc}") from None
            key = backend.short
            dev = _Device(backend, backend.device)
        if key in keys:
            raise ValueError(f"tg.distribute.{what}: No duplicates allowed in `devices` "
                             f"argument: {list(devices)}")
        keys.append(key)
        out.append(dev)
    return out


# -- the strategies -----------------------------------------------------------------------------
class _Mirror:
    """A mirrored variable's copies, one per local replica (`values[0]`: the primary)."""

    def __init__(self, var, values):
        self.var = var
        self.values = values
        self.synced = list(values)  # the copies as the last broadcast left them


class StrategyExtended:
    """`strategy.extended` (TensorFlow's `tf.distribute.StrategyExtended`): the parts of a
    strategy that libraries use."""

    def __init__(self, strategy):
        self._strategy = strategy

    @property
    def worker_devices(self):
        """The devices of this process's replicas (TensorFlow's names)."""
        return tuple(d.name for d in self._strategy._devices)

    @property
    def parameter_devices(self):
        return self.worker_devices

    @property
    def should_checkpoint(self):
        """Whether this process should save checkpoints (rank 0 under MultiWorker...)."""
        return self._strategy._process == 0

    should_save_summary = should_checkpoint


class Strategy:
    """What `MirroredStrategy` and `MultiWorkerMirroredStrategy` share (TensorFlow's
    `tf.distribute.Strategy`): `scope`, `run`, `reduce`, the distributed datasets,
    `num_replicas_in_sync`, `experimental_local_results`."""

    def __init__(self, devices, cross_device_ops, processes=1, process=0, bucket_bytes=None,
                 what="Strategy"):
        self._devices = devices
        self._xops = cross_device_ops
        self._processes = processes
        self._process = process
        self._bucket_bytes = bucket_bytes
        self._what = what
        self._mirrors = {}  # variable uid -> _Mirror (several local replicas)
        self._synced = set()  # variable uids broadcast from rank 0 (several processes)
        self._ran = False  # whether run was called (the first run adopts what it created)
        self.extended = StrategyExtended(self)

    def __repr__(self):
        return f"<tg.distribute.{type(self).__name__} with {self.num_replicas_in_sync} " \
               f"replica(s): {[d.name for d in self._devices]}>"

    @property
    def num_replicas_in_sync(self):
        """How many replicas compute each step (their gradients are combined)."""
        return len(self._devices) * self._processes

    @property
    def cluster_resolver(self):
        return None

    def scope(self):
        """A context in which this strategy is current (`tg.distribute.get_strategy()`):
        Keras `compile` under it makes `fit` distribute each batch over the replicas.

            with strategy.scope():
                model = make_model()
                model.compile(optimizer="sgd", loss="mse")
        """
        return _Scope(self)

    # -- run ------------------------------------------------------------------------------------
    def run(self, fn, args=(), kwargs=None, options=None):
        """Calls `fn(*args, **kwargs)` once per replica of this process, each on its device
        in its replica context; a `PerReplica` argument gives each replica its component,
        a tensor goes to every replica (copied to its device). Returns the replicas' results,
        `PerReplica` where they differ (plain values with one replica per process).

            def step(x):
                with tg.GradientTape() as tape:
                    loss = tg.nn.compute_average_loss(loss_fn(model(x)),
                                                      global_batch_size=64)
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss
            losses = strategy.run(step, args=(next(iterator),))
        """
        if _ctx.replica is not None:
            raise RuntimeError(f"tg.distribute.{type(self).__name__}.run: called in a replica "
                               "context (inside another run); call it in the cross-replica "
                               "context")
        kwargs = dict(kwargs or {})
        if not callable(fn):
            raise TypeError(f"tg.distribute.{type(self).__name__}.run: fn must be callable, "
                            f"got {type(fn).__name__}")
        structure = (tuple(args), kwargs)
        return effect(lambda s: regroup(self._run(fn, s[0], s[1])), structure,
                       f"{type(self).__name__}.run")

    def _run(self, fn, args, kwargs, grad_op=Sum):
        """The replicas' results, a list in local replica order."""
        n = len(self._devices)
        per_args = [self._for_replica(args, r) for r in range(n)]
        per_kwargs = [self._for_replica(kwargs, r) for r in range(n)]
        return self._replicas(fn, per_args, per_kwargs, grad_op)

    def _replicas(self, fn, per_args, per_kwargs, grad_op):
        start = _next_uid() if not self._ran else None
        self._begin()
        try:
            if len(self._devices) == 1:
                return [Replica(self, 0, grad_op).call(fn, per_args[0], per_kwargs[0])]
            return ThreadedRun(self, fn, per_args, per_kwargs, grad_op).run()
        finally:
            self._end()
            if start is not None:  # the variables the first run created (lazy builds)
                self._ran = True
                self._adopt_created(start)

    def _for_replica(self, structure, r):
        dev = self._devices[r].backend

        def pick(v):
            if isinstance(v, PerReplica):
                if len(v) != len(self._devices):
                    raise ValueError(f"tg.distribute.{type(self).__name__}.run: a PerReplica "
                                     f"of {len(v)} values for {len(self._devices)} replicas")
                v = v[r]
            if isinstance(v, Variable):
                return v
            if isinstance(v, Tensor) and v._dev is not dev:
                return copy_to(v, dev)
            return v
        return map_leaves(pick, structure)

    # -- variables ------------------------------------------------------------------------------
    def _adopt(self, var, r):
        """A variable read by replica r for the first time: mirrored on every replica device
        (several local replicas), broadcast from rank 0 (several processes)."""
        if var._uid in self._mirrors or var._uid in self._synced:
            return
        if self._processes > 1:
            self._synced.add(var._uid)
            gradients.broadcast_variables([var], root_rank=0)
        if len(self._devices) == 1:  # one local replica: the variable lives on its device
            if var._value._dev is not self._devices[0].backend:
                var._value = copy_to(var._value, self._devices[0].backend)
        else:
            base = var._value
            values = [base if d.backend is base._dev else copy_to(base, d.backend)
                      for d in self._devices]
            self._mirrors[var._uid] = _Mirror(var, values)
            var._value = values[r]

    def _adopt_all(self, variables):
        """`_adopt` for variables created in the cross-replica context (in order: under
        several processes every rank passes the same ones)."""
        for var in variables:
            self._adopt(var, 0)
        self._activate(0)

    def _adopt_created(self, start_uid):
        """Adopts the variables created since `start_uid` was drawn (a scope's block, the
        first `run`): those a replica assigns without reading them (BatchNormalization's
        moving statistics) are mirrored too."""
        if self._processes == 1 and len(self._devices) == 1 and \
                self._devices[0].backend is _backend.current():
            return  # made where the one replica runs: nothing to mirror or move
        gc.collect()  # what is unreachable goes first, the same on every rank
        created = sorted((o for o in gc.get_objects()
                          if isinstance(o, Variable) and o._uid > start_uid),
                         key=lambda v: v._uid)
        self._adopt_all(created)

    def _activate(self, r):
        for m in self._mirrors.values():
            m.var._value = m.values[r]

    def _save(self, r):
        for m in self._mirrors.values():
            m.values[r] = m.var._value

    def _begin(self):
        """Mirrors whose variable was assigned outside `run` take the new value everywhere."""
        changed = [m for m in self._mirrors.values() if m.var._value is not m.values[0]]
        for m in changed:
            m.values[0] = m.var._value
        self._broadcast(changed)

    def _end(self):
        """After `run`: copies that replicas assigned are replaced by their mean (floats) or
        the first replica's copy; every variable shows its primary copy."""
        self._activate(0)
        diverged = [m for m in self._mirrors.values()
                    if any(v is not s for v, s in zip(m.values[1:], m.synced[1:]))]
        floats = [m for m in diverged if m.values[0]._data.dtype.kind in "fc"]
        if floats:
            sums = self._xops.reduce(self._devices, [list(m.values) for m in floats])
            for m, total in zip(floats, sums):
                m.values[0] = Tensor(total._data / total._data.dtype.type(len(self._devices)),
                                     total._dev)
        self._broadcast(diverged)
        self._activate(0)

    def _broadcast(self, mirrors, primary=False):
        """The primary copies of `mirrors` (with `primary`: the variables' current values) to
        every other replica."""
        if not mirrors or len(self._devices) == 1:
            return
        if primary:
            for m in mirrors:
                m.values[0] = m.var._value
        copies = self._xops.broadcast(self._devices, [m.values[0] for m in mirrors])
        for i, m in enumerate(mirrors):
            m.values = [copies[r][i] for r in range(len(self._devices))]
            m.synced = list(m.values)
            m.var._value = m.values[0]

    # -- cross-replica reductions ---------------------------------------------------------------
    def _reduce_gradients(self, per_replica, variables, op):
        """`per_replica[r]`: replica r's gradients of `variables` -> their sum (op Sum) or mean
        (op Average) over every replica of the job, on the first replica's device."""
        if self.num_replicas_in_sync == 1:  # nothing to combine
            return list(per_replica[0])
        local = self._xops.reduce(self._devices, [list(parts) for parts in zip(*per_replica)])
        if self._processes > 1:
            local = gradients.reduce_gradients(
                local, variables, Sum, bucket_bytes=self._bucket_bytes,
                what=f"{type(self).__name__} (apply_gradients in a replica)")
        if op is Average:
            n = self.num_replicas_in_sync
            local = [None if g is None else Tensor(g._data / g._data.dtype.type(n), g._dev)
                     for g in local]
        return local

    def _reduce_tensors(self, op, parts, what):
        """Tensors of the local replicas (same shape and dtype) -> their SUM or MEAN over every
        replica of the job, on the first replica's device."""
        (total,) = self._xops.reduce(self._devices, [list(parts)])
        if self._processes > 1:
            total = collectives.allreduce(total, op=Sum, name=what)
        if op is Average:
            total = Tensor(total._data / total._data.dtype.type(self.num_replicas_in_sync),
                           total._dev)
        return total

    def reduce(self, reduce_op, value, axis):
        """`value` (per-replica, e.g. `run`'s result) combined over every replica of the job:
        `ReduceOp.SUM` or `ReduceOp.MEAN` (or 'SUM', 'MEAN'). With `axis` (usually 0, the
        batch axis), the values are also reduced along that axis: MEAN then divides by the
        number of elements along it over all replicas (the global batch), as TensorFlow.
        Returns a tensor on the first replica's device.

            per_example = strategy.run(step, args=(batch,))
            loss = strategy.reduce(tg.distribute.ReduceOp.SUM, per_example, axis=None)
        """
        what = f"{type(self).__name__}.reduce"
        op = reduce_op_of(reduce_op, what)
        if _ctx.replica is not None:
            raise RuntimeError(f"tg.distribute.{what}: called in a replica context; use "
                               "tg.distribute.get_replica_context().all_reduce there")
        return effect(lambda v: self._reduce(op, v, axis, what), value, what)

    def _reduce(self, op, value, axis, what):
        parts = [as_tensor(v, what) for v in self.experimental_local_results(value)]
        if len(parts) != len(self._devices):
            raise ValueError(f"tg.distribute.{what}: {len(parts)} values for "
                             f"{len(self._devices)} replicas")
        if axis is None:
            return self._reduce_tensors(op, parts, what)
        summed = [Tensor(p._dev.xp.sum(p._data, axis=axis), p._dev) for p in parts]
        total = self._reduce_tensors(Sum, summed, what)
        if op is Sum:
            return total
        count = sum(p.shape[axis] for p in parts)
        if self._processes > 1:  # the global batch: every rank's count (host values)
            counts = Tensor(np.array([count], np.int64), _backend.NUMPY)
            count = int(collectives.allreduce(counts, op=Sum, name=what).numpy()[0])
        return Tensor(total._data / total._data.dtype.type(count), total._dev)

    def experimental_local_results(self, value):
        """The components of a per-replica value on this process, as a tuple (a plain value
        gives a 1-tuple).

            strategy.experimental_local_results(strategy.run(lambda: 1.0))  # (1.0, 1.0)
        """
        if isinstance(value, PerReplica):
            return tuple(value)
        return (value,) * len(self._devices) if len(self._devices) > 1 else (value,)

    def gather(self, value, axis):
        """The replicas' values concatenated along `axis` (every replica of the job, in
        replica order), on the first replica's device.

            strategy.gather(strategy.run(lambda: tg.ones((2,))), axis=0).shape  # (2 * n,)
        """
        what = f"{type(self).__name__}.gather"

        def gather(v):
            parts = [copy_to(as_tensor(p, what), self._devices[0].backend)
                     for p in self.experimental_local_results(v)]
            xp = parts[0]._dev.xp
            local = Tensor(xp.concatenate([p._data for p in parts], axis=axis), parts[0]._dev)
            if self._processes == 1:
                return local
            moved = Tensor(xp.moveaxis(local._data, axis, 0), local._dev)
            everyone = collectives.allgather(moved, name=what)
            return Tensor(xp.moveaxis(everyone._data, 0, axis), everyone._dev)
        return effect(gather, value, what)

    def experimental_distribute_values_from_function(self, value_fn):
        """`value_fn(ctx)` per local replica (`ctx.replica_id_in_sync_group`,
        `ctx.num_replicas_in_sync`) as a per-replica value, each on its replica's device.

            v = strategy.experimental_distribute_values_from_function(
                lambda ctx: tg.constant(float(ctx.replica_id_in_sync_group)))
        """
        values = []
        for r, d in enumerate(self._devices):
            with _device_scope(d.backend):
                values.append(value_fn(ValueContext(self._process * len(self._devices) + r,
                                                    self.num_replicas_in_sync)))
        return values[0] if len(values) == 1 else PerReplica(values)

    # -- input ----------------------------------------------------------------------------------
    def experimental_distribute_dataset(self, dataset, options=None):
        """A dataset of global batches, distributed: each batch is split along axis 0 into
        `num_replicas_in_sync` consecutive shares (as even as possible), this process's
        replicas taking theirs, each on its device (TensorFlow's rebatching: the batch size
        of `dataset` is the global batch size).

            dist = strategy.experimental_distribute_dataset(dataset.batch(64))
            for batch in dist:
                strategy.run(step, args=(batch,))
        """
        return DistributedDataset.split(self, dataset, options)

    def distribute_datasets_from_function(self, dataset_fn, options=None):
        """`dataset_fn(input_context)` makes this process's dataset of per-replica batches
        (already batched and sharded: `input_context.get_per_replica_batch_size(global)`,
        `input_context.input_pipeline_id` of `num_input_pipelines`); each step, each local
        replica takes the next batch, on its device.

            def dataset_fn(ctx):
                batch = ctx.get_per_replica_batch_size(64)
                return data.shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(batch)
            dist = strategy.distribute_datasets_from_function(dataset_fn)
        """
        return DistributedDataset.from_function(self, dataset_fn, options)

    # -- Keras ----------------------------------------------------------------------------------
    def _keras_step(self, model, step, what, traced=None):
        """Keras' `step(*batch)` for `fit`, `evaluate` or `predict` (`what`) under this
        strategy: the global batch split over the replicas, `step` once per replica on its
        share; `fit`'s gradients are averaged (Keras' losses are means over each replica's
        share); `predict` returns the replicas' outputs concatenated in replica order (every
        rank's), the others replica 0's result. The model is built (on the first replica's
        device, from one row) before its first step, so that its variables are mirrored
        from the start.

        `traced`: `step` through tg.function, which runs instead of `step` when this process
        has one replica (the replica runs in the calling thread; the reduction over the
        replicas is an effect of the graph). Several local replicas run `step` eagerly: they
        are threads that meet in the middle of the step. The returned function's `function`
        is the tg.function in use, or None."""
        use = traced if traced is not None and len(self._devices) == 1 else step

        def run(*batch):
            shares = self._split(batch, what)
            self._prepare_model(model, shares[0])
            grad_op = Average if what == "fit" else Sum
            results = self._replicas(use, shares, [{}] * len(shares), grad_op)
            if what != "predict":
                return results[0]
            return nest.map_structure(lambda *parts: self._concat(parts, what), *results)
        run.function = use if use is not step else None
        return run

    def _prepare_model(self, model, share):
        if not getattr(model, "built", True):
            x = share[0]
            with _device_scope(self._devices[0].backend):
                model(map_leaves(lambda t: t if t is None else Tensor(t._data[:1], t._dev)
                                 if t._dev is self._devices[0].backend else
                                 copy_to(Tensor(t._data[:1], t._dev), self._devices[0].backend),
                                 x), training=False)
        self._adopt_all(model.variables)

    def _concat(self, parts, what):
        """Local replicas' outputs (then every rank's) concatenated along axis 0."""
        primary = self._devices[0].backend
        moved = [copy_to(as_tensor(p, what), primary) for p in parts]
        local = Tensor(primary.xp.concatenate([p._data for p in moved]), primary)
        return local if self._processes == 1 else collectives.allgather(local, name=what)

    def _split(self, structure, what):
        """This process's replicas' shares of a global batch (axis 0 of every tensor or
        array, split over all the job's replicas; None stays None): one structure per local
        replica, each on its device."""
        total = self.num_replicas_in_sync
        first = self._process * len(self._devices)

        def shares(v):
            if v is None:
                return None
            t = v._read() if isinstance(v, Variable) else v
            t = t if isinstance(t, Tensor) else convert_to_tensor(t)
            if t.ndim == 0:
                raise ValueError(f"tg.distribute.{type(self).__name__}.{what}: the data must be "
                                 "batched (each tensor's first axis is the global batch); got "
                                 "a scalar")
            bounds = np.cumsum([0] + _even(int(t.shape[0]), total))
            out = []
            for r, d in enumerate(self._devices):
                piece = Tensor(t._data[bounds[first + r]:bounds[first + r + 1]], t._dev)
                out.append(piece if d.backend is t._dev else copy_to(piece, d.backend))
            return PerReplica(out)
        split = map_leaves(shares, structure)
        return [component(split, r) for r in range(len(self._devices))]


def _even(n, parts):
    """n split into `parts` sizes as even as possible, larger first."""
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


class MirroredStrategy(Strategy):
    """Synchronous training on several devices of one process (TensorFlow's
    `tf.distribute.MirroredStrategy(devices=None, cross_device_ops=None)`): one replica per
    device, variables mirrored on every device, gradients combined each step.

    `devices`: device names; default: every GPU, else the CPU. '/cpu:0', '/cpu:1', ... are
    logical CPU devices (TensorFlow needs `tf.config.set_logical_device_configuration` for
    them first; here they are accepted as they are): replicas that all compute on the CPU.
    `cross_device_ops`: `NcclAllReduce()` (the default when every device is a GPU and CuPy's
    NCCL is there), `ReductionToOneDevice()` or `HierarchicalCopyAllReduce()`.

        strategy = tg.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        with strategy.scope():
            model = tg.keras.Sequential([tg.keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)   # 4 rows per replica
    """

    def __init__(self, devices=None, cross_device_ops=None):
        what = "MirroredStrategy"
        devs = _replica_devices(devices, what)
        if cross_device_ops is None:
            cross_device_ops = cross_device.default(devs)
        if not isinstance(cross_device_ops, cross_device.CrossDeviceOps):
            raise ValueError(f"tg.distribute.{what}: cross_device_ops must be a "
                             f"tg.distribute.CrossDeviceOps (NcclAllReduce, "
                             f"ReductionToOneDevice, HierarchicalCopyAllReduce), got "
                             f"{cross_device_ops!r}")
        cross_device_ops.check(devs, what)
        super().__init__(devs, cross_device_ops, what=what)


class _ClusterResolver:
    """`strategy.cluster_resolver` of MultiWorkerMirroredStrategy: the MPI ranks as
    TensorFlow's workers ('worker', rank)."""

    def __init__(self, rank, size):
        self.task_type = "worker"
        self.task_id = rank
        self.rpc_layer = "mpi"
        self._size = size

    def cluster_spec(self):
        return {"worker": [f"rank:{i}" for i in range(self._size)]}

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
        return {"GPU": _backend.gpu_count()}


class MultiWorkerMirroredStrategy(Strategy):
    """Synchronous training over the ranks of an MPI job (TensorFlow's
    `tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=None,
    communication_options=None)`): one replica per rank, on the rank's GPU (each rank gets
    one, see tg.distribute.init) or its CPU; gradients cross the ranks by NCCL on GPUs and MPI
    on CPUs, every rank receiving the same bits. Run the script under `mpiexec -n N` (or
    `python -m tapegpu.distribute.run -n N`): the workers are the MPI ranks, not TF_CONFIG's,
    so `cluster_resolver` must be None; `strategy.cluster_resolver.task_id` is the rank.

        strategy = tg.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = make_model()
        dist = strategy.experimental_distribute_dataset(dataset.batch(64))
    """

    def __init__(self, cluster_resolver=None, communication_options=None):
        what = "MultiWorkerMirroredStrategy"
        if cluster_resolver is not None:
            raise ValueError(f"tg.distribute.{what}: the workers are the ranks of the MPI job "
                             "(run the script under mpiexec); cluster_resolver must be None")
        options = communication_options or CommunicationOptions()
        if not isinstance(options, CommunicationOptions):
            raise TypeError(f"tg.distribute.{what}: communication_options must be a "
                            f"tg.distribute.experimental.CommunicationOptions, got "
                            f"{communication_options!r}")
        runtime.init(timeout=options.timeout_seconds)
        if options.timeout_seconds is not None:
            runtime._state.timeout = float(options.timeout_seconds)
        dev = runtime._state.device or _backend.current()
        if options.implementation == CommunicationImplementation.NCCL and \
                nccl.route(dev) != "nccl":
            raise ValueError(f"tg.distribute.{what}: CommunicationImplementation.NCCL needs "
                             f"this rank on a GPU with CuPy's NCCL; it is on {dev.short}")
        self._options = options
        st = runtime._state
        super().__init__([_Device(dev, f"/job:worker/replica:0/task:{st.comm.Get_rank()}/"
                                       f"device:{dev.device.rsplit('device:', 1)[-1]}")],
                         cross_device.ReductionToOneDevice(), processes=st.comm.Get_size(),
                         process=st.comm.Get_rank(), bucket_bytes=options.bytes_per_pack or None,
                         what=what)
        self._resolver = _ClusterResolver(st.comm.Get_rank(), st.comm.Get_size())
        if options.implementation == CommunicationImplementation.RING:
            self._route = "mpi"

    @property
    def cluster_resolver(self):
        return self._resolver

    def _replicas(self, fn, per_args, per_kwargs, grad_op):
        with nccl.forced(getattr(self, "_route", None)):
            return super()._replicas(fn, per_args, per_kwargs, grad_op)

    def _reduce(self, op, value, axis, what):
        with nccl.forced(getattr(self, "_route", None)):
            return super()._reduce(op, value, axis, what)


class _DefaultStrategy(Strategy):
    """The strategy in effect outside any scope: one replica, the current device."""

    def __init__(self):
        super().__init__([], cross_device.ReductionToOneDevice(), what="Strategy")

    @property
    def _devices(self):
        return [_Device(_backend.current(), _backend.current().device)]

    @_devices.setter
    def _devices(self, value):
        pass

    def scope(self):
        return _DefaultScope()

    def run(self, fn, args=(), kwargs=None, options=None):
        return fn(*args, **(kwargs or {}))

    def experimental_distribute_dataset(self, dataset, options=None):
        return dataset

    def distribute_datasets_from_function(self, dataset_fn, options=None):
        return dataset_fn(InputContext())


class _DefaultScope:
    def __enter__(self):
        return _DEFAULT

    def __exit__(self, *exc):
        return False


_DEFAULT = _DefaultStrategy()
_DEFAULT_REPLICA = ReplicaContext(_DEFAULT, 0)
