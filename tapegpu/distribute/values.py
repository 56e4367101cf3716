"""Values of the strategies: per-replica values and the structures that carry them, and the
effect through which `run`, `reduce` and the distributed iterators enter a tg.function graph.
"""
from ..core import nest
from ..core.tensor import Tensor, Variable, _thread
from ..data.iterators import unseen


# -- per-replica values -------------------------------------------------------------------------
class DistributedValues:
    """Base class of values with one component per replica of this process (TensorFlow's
    `tf.distribute.DistributedValues`): `strategy.experimental_local_results(v)` gives the
    components."""


class PerReplica(tuple, DistributedValues):
    """One value per local replica, in replica order (what `run` returns and distributed
    datasets yield when a process has several replicas). A tuple, so that tg.function and
    tg.nest see its tensors."""

    def __new__(cls, values):
        return super().__new__(cls, values)

    @property
    def values(self):
        return tuple(self)

    def __repr__(self):
        return "PerReplica:{" + ", ".join(f"\n  {i}: {v!r}" for i, v in enumerate(self)) + "\n}"


def map_leaves(fn, s):
    """`fn` over the leaves of a structure, a PerReplica being a leaf."""
    if isinstance(s, PerReplica):
        return fn(s)
    if isinstance(s, dict):
        return type(s)((k, map_leaves(fn, v)) for k, v in s.items())
    if isinstance(s, tuple) and hasattr(s, "_fields"):
        return type(s)(*[map_leaves(fn, v) for v in s])
    if isinstance(s, (list, tuple)):
        return type(s)(map_leaves(fn, v) for v in s)
    return fn(s)


def regroup(per_replica):
    """The replicas' results (one structure each) as one structure whose leaves are
    PerReplica values (or the object itself where every replica has the same object)."""
    if len(per_replica) == 1:
        return per_replica[0]
    leaves = [nest.flatten(v) for v in per_replica]
    if len({len(x) for x in leaves}) != 1:
        raise ValueError("tg.distribute: the replicas returned structures of different sizes: "
                         f"{[len(x) for x in leaves]}; every replica must return the same "
                         "structure")
    combined = []
    for parts in zip(*leaves):
        combined.append(parts[0] if all(p is parts[0] for p in parts) else PerReplica(parts))
    return nest.pack_sequence_as(per_replica[0], combined)


def component(value, r):
    return map_leaves(lambda v: v[r] if isinstance(v, PerReplica) else v, value)


# -- tg.function ----------------------------------------------------------------------------
def effect(compute, structure, name):
    """`compute(structure)` now; inside a tg.function trace, also an effect of the graph that
    computes it again at every call from that call's tensors (the structure's tensors are its
    inputs, the result's tensors its outputs)."""
    tracers = _thread.tracers
    if not tracers:
        return compute(structure)
    leaves = nest.flatten(structure)
    positions = [i for i, v in enumerate(leaves) if isinstance(v, (Tensor, Variable))]
    inputs = [leaves[i]._read() if isinstance(leaves[i], Variable) else leaves[i]
              for i in positions]
    with unseen():
        out = compute(structure)
    outputs = [t for t in nest.flatten(out) if isinstance(t, Tensor)]
    current = []

    def replay(arrays, _variables):
        fresh = list(leaves)
        for i, t, a in zip(positions, inputs, arrays):
            fresh[i] = Tensor(a, t._dev)
        with unseen():
            res = compute(nest.pack_sequence_as(structure, fresh))
        current[:] = [t._data for t in nest.flatten(res) if isinstance(t, Tensor)]

    replay.__name__ = f"distribute.{name}"
    tracer = tracers[-1]
    tracer.on_update(replay, inputs, [])
    for k, t in enumerate(outputs):
        def read(k=k):
            return current[k]
        read.__name__ = f"distribute.{name}"
        tracer.record_random(read, t)
    return out
