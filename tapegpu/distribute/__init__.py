"""Data-parallel training over MPI, with Horovod's names and semantics (`tg.distribute`).

    import tapegpu as tg
    tg.distribute.init()                                   # once per rank
    tg.distribute.broadcast_variables(model.variables)     # every rank starts from rank 0's
    x = tg.distribute.shard(x, tg.distribute.size(), tg.distribute.rank())
    with tg.GradientTape() as tape:
        loss = loss_fn(model(x), y)
    tape = tg.distribute.DistributedGradientTape(tape)     # gradients averaged over ranks
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables))

Run it with `python -m tapegpu.distribute.run -n 2 script.py` (or `mpiexec -n 2 python
script.py`). Needs mpi4py and an MPI library: `pip install -e ".[distributed]"`; device tensors
travel by NCCL with `pip install -e ".[nccl]"`.

TensorFlow's strategies speak the same machinery, with TensorFlow's names
(`tf.distribute.MirroredStrategy` ports as `tg.distribute.MirroredStrategy`):

    strategy = tg.distribute.MirroredStrategy()            # or MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = make_model()
        model.compile(optimizer="adam", loss=loss)
    model.fit(dataset, epochs=2)

See docs/distribute.md.
"""
from .collectives import (Average, Compression, Max, Min, ReduceOp, Sum, allgather,  # noqa: F401
                          allgather_object, allreduce, broadcast, broadcast_object)
from .data import shard  # noqa: F401
from .gradients import (BUCKET_BYTES, DistributedGradientTape, DistributedOptimizer,  # noqa: F401
                        broadcast_variables)
from .runtime import (init, is_initialized, local_rank, local_size, rank, shutdown,  # noqa: F401
                      size)
from . import experimental  # noqa: F401,E402  (CommunicationOptions, CommunicationImplementation)
from .cross_device import (CrossDeviceOps, HierarchicalCopyAllReduce,  # noqa: F401,E402
                           NcclAllReduce, ReductionToOneDevice)
from .input import DistributedDataset, DistributedIterator, InputContext, InputOptions  # noqa
from .replicas import ReplicaContext  # noqa: F401,E402
from .strategy import (MirroredStrategy, MultiWorkerMirroredStrategy, Strategy,  # noqa: F401
                       StrategyExtended, get_replica_context, get_strategy, has_strategy,
                       in_cross_replica_context)
from .values import DistributedValues  # noqa: F401,E402
from . import cluster as _cluster, partitioners as _partitioners  # noqa: E402
from .one_device import (CentralStorageStrategy, ExperimentalMultiWorkerMirroredStrategy,  # noqa
                         OneDeviceStrategy)
# tf.distribute.experimental's strategies and partitioners, tf.distribute.cluster_resolver
experimental.CentralStorageStrategy = CentralStorageStrategy
experimental.MultiWorkerMirroredStrategy = ExperimentalMultiWorkerMirroredStrategy
experimental.partitioners = _partitioners
experimental.CollectiveCommunication = experimental.CommunicationImplementation  # TF's old name
cluster_resolver = _cluster

__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
           "allreduce", "allgather", "broadcast", "broadcast_object", "allgather_object",
           "broadcast_variables", "DistributedGradientTape", "DistributedOptimizer",
           "Compression", "ReduceOp", "Average", "Sum", "Min", "Max", "shard", "BUCKET_BYTES",
           # TensorFlow's tf.distribute
           "MirroredStrategy", "MultiWorkerMirroredStrategy", "Strategy", "StrategyExtended",
           "ReplicaContext", "InputContext", "InputOptions", "DistributedDataset",
           "DistributedIterator", "DistributedValues", "CrossDeviceOps", "NcclAllReduce",
           "HierarchicalCopyAllReduce", "ReductionToOneDevice", "get_strategy", "has_strategy",
           "in_cross_replica_context", "get_replica_context", "experimental",
           "OneDeviceStrategy", "cluster_resolver"]
