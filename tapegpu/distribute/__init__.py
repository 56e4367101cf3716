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
script.py`). Needs mpi4py and an MPI library: `pip install -e ".[distributed]"`. See
docs/distribute.md.
"""
from .collectives import (Average, Compression, Max, Min, ReduceOp, Sum, allgather,  # noqa: F401
                          allgather_object, allreduce, broadcast, broadcast_object)
from .data import shard  # noqa: F401
from .gradients import (BUCKET_BYTES, DistributedGradientTape, DistributedOptimizer,  # noqa: F401
                        broadcast_variables)
from .runtime import (init, is_initialized, local_rank, local_size, rank, shutdown,  # noqa: F401
                      size)

__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
           "allreduce", "allgather", "broadcast", "broadcast_object", "allgather_object",
           "broadcast_variables", "DistributedGradientTape", "DistributedOptimizer",
           "Compression", "ReduceOp", "Average", "Sum", "Min", "Max", "shard", "BUCKET_BYTES"]
