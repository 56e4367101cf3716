"""`tf.distribute.experimental.partitioners`: how many shards a variable's axis is split into.
A partitioner is called with a shape and a dtype and returns one count per axis."""
import math

from ..core.dtypes import as_dtype
from ..core.shape import TensorShape


class Partitioner:
    """The base of the partitioners: `partitioner(shape, dtype, axis=0)` -> counts per axis."""

    def __call__(self, shape, dtype, axis=0):
        raise NotImplementedError("Partitioner.__call__: a subclass gives it")


def _counts(shape, axis, n, who):
    dims = list(TensorShape(shape))
    if not 0 <= axis < len(dims):
        raise ValueError(f"{who}: axis {axis} is out of range for shape {dims}")
    out = [1] * len(dims)
    out[axis] = max(1, min(int(dims[axis]), int(n)))
    return out


class FixedShardsPartitioner(Partitioner):
    """`num_shards` shards along `axis` (fewer when the axis is shorter), as
    `tf.distribute.experimental.partitioners.FixedShardsPartitioner`.

    >>> tg.distribute.experimental.partitioners.FixedShardsPartitioner(2)([10, 3], tg.float32)
    [2, 1]
    """

    def __init__(self, num_shards):
        if not isinstance(num_shards, int) or num_shards < 1:
            raise ValueError(f"FixedShardsPartitioner: num_shards must be a positive int, got "
                             f"{num_shards!r}")
        self._num_shards = num_shards

    def __call__(self, shape, dtype, axis=0):
        return _counts(shape, axis, self._num_shards, "FixedShardsPartitioner")


class MinSizePartitioner(Partitioner):
    """As many shards along `axis` as keep each at least `min_shard_bytes` (total bytes /
    min_shard_bytes, rounded up), at most `max_shards` and the axis length, at least one, as
    `tf.distribute.experimental.partitioners.MinSizePartitioner(min_shard_bytes=256 << 10,
    max_shards=1, bytes_per_string=16)`.

    >>> p = tg.distribute.experimental.partitioners.MinSizePartitioner(
    ...     min_shard_bytes=4, max_shards=2)
    >>> p([6, 2], tg.float32), p([1, 2], tg.float32)
    ([2, 1], [1, 1])
    """

    def __init__(self, min_shard_bytes=256 << 10, max_shards=1, bytes_per_string=16):
        if min_shard_bytes < 1:
            raise ValueError(f"MinSizePartitioner: min_shard_bytes must be positive, got "
                             f"{min_shard_bytes!r}")
        if max_shards < 1:
            raise ValueError(f"MinSizePartitioner: max_shards must be positive, got "
                             f"{max_shards!r}")
        if bytes_per_string < 1:
            raise ValueError(f"MinSizePartitioner: bytes_per_string must be positive, got "
                             f"{bytes_per_string!r}")
        self._min_shard_bytes = min_shard_bytes
        self._max_shards = max_shards
        self._bytes_per_string = bytes_per_string

    def __call__(self, shape, dtype, axis=0):
        dtype = as_dtype(dtype)
        per = self._bytes_per_string if dtype.name == "string" else dtype.size
        total = math.prod(int(d) for d in TensorShape(shape)) * per
        n = min(self._max_shards, math.ceil(total / self._min_shard_bytes))
        return _counts(shape, axis, n, "MinSizePartitioner")
