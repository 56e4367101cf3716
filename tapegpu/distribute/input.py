"""Input for the strategies: distributed datasets and their iterators, `InputContext`.

`experimental_distribute_dataset(dataset)`: `dataset` yields global batches; each is split along
axis 0 into `num_replicas_in_sync` consecutive shares (as even as possible, larger first), and
this process's replicas take theirs, each copied to its device. Every process iterates the
whole dataset (as TensorFlow's AutoShardPolicy.DATA reads all of it on every worker), so the
union of the replicas' shares of a step is the dataset's global batch of that step.

`distribute_datasets_from_function(dataset_fn)`: `dataset_fn(InputContext)` makes each
process's dataset of per-replica batches; each step, each local replica takes the next batch.
Under several processes the ranks agree at every step on whether all still have data (one
small host collective), and stop together when one has run out.

Inside `tg.function`, `next(iterator)` is an effect of the graph: each call takes the next
element.
"""
import numpy as np

from .. import backends as _backend
from ..core import nest
from ..core.device import copy_to
from ..core.tensor import Tensor, convert_to_tensor
from ..data import Dataset
from ..errors import OutOfRangeError
from . import collectives
from .values import PerReplica, effect


class InputContext:
    """What `distribute_datasets_from_function` tells `dataset_fn` (TensorFlow's
    `tf.distribute.InputContext`): this process's input pipeline among
    `num_input_pipelines`, and the replicas in sync.

        ctx = tg.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1,
                                         num_replicas_in_sync=4)
        ctx.get_per_replica_batch_size(64)  # 16
    """

    def __init__(self, num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=1):
        self._num_input_pipelines = num_input_pipelines
        self._input_pipeline_id = input_pipeline_id
        self._num_replicas_in_sync = num_replicas_in_sync

    num_input_pipelines = property(lambda self: self._num_input_pipelines)
    input_pipeline_id = property(lambda self: self._input_pipeline_id)
    num_replicas_in_sync = property(lambda self: self._num_replicas_in_sync)

    def get_per_replica_batch_size(self, global_batch_size):
        """`global_batch_size / num_replicas_in_sync`; ValueError when it does not divide."""
        if global_batch_size % self._num_replicas_in_sync:
            raise ValueError(f"The `global_batch_size` {global_batch_size!r} is not divisible "
                             f"by `num_replicas_in_sync` {self._num_replicas_in_sync!r}")
        return global_batch_size // self._num_replicas_in_sync

    def __repr__(self):
        return f"tg.distribute.InputContext(num_input_pipelines={self._num_input_pipelines}, " \
               f"input_pipeline_id={self._input_pipeline_id}, num_replicas_in_sync=" \
               f"{self._num_replicas_in_sync})"


class InputOptions:
    """Options of the distributed datasets (TensorFlow's `tf.distribute.InputOptions`):
    accepted for compatibility; elements always go to their replica's device."""

    def __init__(self, experimental_fetch_to_device=None, experimental_replication_mode=None,
                 experimental_place_dataset_on_device=False,
                 experimental_per_replica_buffer_size=1):
        self.experimental_fetch_to_device = experimental_fetch_to_device
        self.experimental_replication_mode = experimental_replication_mode
        self.experimental_place_dataset_on_device = experimental_place_dataset_on_device
        self.experimental_per_replica_buffer_size = experimental_per_replica_buffer_size


def _check(dataset, what):
    if not isinstance(dataset, Dataset):
        raise TypeError(f"tg.distribute.{what}: expected a tg.data.Dataset, got "
                        f"{type(dataset).__name__}")


def _options(options, what):
    if options is not None and not isinstance(options, InputOptions):
        raise TypeError(f"tg.distribute.{what}: options must be a tg.distribute.InputOptions "
                        f"or None, got {options!r}")


class DistributedDataset:
    """A dataset whose elements are per-replica values (TensorFlow's
    `tf.distribute.DistributedDataset`): iterate it, or `iter()` it and call `next`.

        for batch in strategy.experimental_distribute_dataset(dataset):
            strategy.run(step, args=(batch,))
    """

    def __init__(self, strategy, make, what):
        self._strategy = strategy
        self._make = make  # () -> the per-step element source (an iterator of structures)
        self._what = what

    @classmethod
    def split(cls, strategy, dataset, options):
        what = f"{type(strategy).__name__}.experimental_distribute_dataset"
        _check(dataset, what)
        _options(options, what)

        def steps():
            for element in dataset:
                shares = strategy._split(element, "experimental_distribute_dataset")
                yield shares[0] if len(shares) == 1 else _per_replica(shares)
        return cls(strategy, steps, what)

    @classmethod
    def from_function(cls, strategy, dataset_fn, options):
        what = f"{type(strategy).__name__}.distribute_datasets_from_function"
        _options(options, what)
        if not callable(dataset_fn):
            raise TypeError(f"tg.distribute.{what}: dataset_fn must be callable, got "
                            f"{type(dataset_fn).__name__}")
        ctx = InputContext(strategy._processes, strategy._process,
                           strategy.num_replicas_in_sync)
        dataset = dataset_fn(ctx)
        _check(dataset, what)
        devices = strategy._devices

        def steps():
            it = iter(dataset)
            while True:
                batches = []
                for d in devices:
                    try:
                        batches.append(nest.map_structure(
                            lambda t, d=d: _to(t, d.backend), next(it)))
                    except StopIteration:
                        break
                if not _all_have(strategy, len(batches) == len(devices), what):
                    return
                yield batches[0] if len(batches) == 1 else _per_replica(batches)
        return cls(strategy, steps, what)

    def __iter__(self):
        return DistributedIterator(self._make(), self._what)


def _to(t, dev):
    t = t if isinstance(t, Tensor) else convert_to_tensor(t)
    return t if t._dev is dev else copy_to(t, dev)


def _per_replica(structures):
    """Structures of the replicas (same structure) -> one structure of PerReplica leaves."""
    leaves = [nest.flatten(s) for s in structures]
    return nest.pack_sequence_as(structures[0], [PerReplica(p) for p in zip(*leaves)])


def _all_have(strategy, mine, what):
    """Whether every process still has an element (every process asks at every step)."""
    if strategy._processes == 1:
        return mine
    flag = Tensor(np.array([1 if mine else 0], np.int32), _backend.NUMPY)  # a host value
    return bool(collectives.allreduce(flag, op=collectives.Min, name=what).numpy()[0])


class DistributedIterator:
    """The iterator of a DistributedDataset: `next(it)` or `it.get_next()` gives the next
    per-replica element; StopIteration (OutOfRangeError from `get_next`) at the end."""

    def __init__(self, steps, what):
        self._steps = steps
        self._what = what

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return self.get_next()
        except OutOfRangeError:
            raise StopIteration from None

    def get_next(self):
        return effect(self._pull, (), f"{self._what} next")

    def _pull(self, _):
        try:
            return next(self._steps)
        except StopIteration:  # in a tg.function's replay too, as TensorFlow's graphs do
            raise OutOfRangeError("End of sequence") from None
