"""Splitting a data set between ranks."""
import numpy as np

from ..core.tensor import Tensor, Variable


def shard(data, num_shards, index):
    """Rows `index, index + num_shards, index + 2 * num_shards, ...` of `data` along axis 0
    (as `tf.data.Dataset.shard`): rank `index`'s share of a data set split `num_shards` ways.
    A tensor gives a tensor (on its device), anything else a numpy array. Shard sizes differ
    by at most one row; make the number of rows a multiple of `num_shards` for equal batches.

        x_mine = tg.distribute.shard(x, tg.distribute.size(), tg.distribute.rank())
    """
    if isinstance(num_shards, bool) or not isinstance(num_shards, (int, np.integer)) or \
            num_shards < 1:
        raise ValueError(f"tg.distribute.shard: num_shards must be a positive int, got "
                         f"{num_shards!r}")
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or \
            not 0 <= index < num_shards:
        raise ValueError(f"tg.distribute.shard: index must be in 0 .. {num_shards - 1}, got "
                         f"{index!r}")
    if isinstance(data, Variable):
        data = data._value
    if isinstance(data, Tensor):
        if data.ndim == 0:
            raise ValueError("tg.distribute.shard: a scalar has no rows to split")
        return Tensor(data._data[index::num_shards], data._dev)
    a = np.asarray(data)
    if a.ndim == 0:
        raise ValueError("tg.distribute.shard: a scalar has no rows to split")
    return a[index::num_shards]
