"""`tg.lookup`: immutable key -> value tables, as `tf.lookup` (`StaticHashTable` filled by a
`KeyValueTensorInitializer`). Lookups run on the host (keys are often strings) and return a
tensor of the keys' shape. Tables that hash out-of-vocabulary keys into buckets
(`StaticVocabularyTable`) use TensorFlow's FarmHash, which tapegpu does not have: they are
refused.

>>> init = tg.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2])
>>> table = tg.lookup.StaticHashTable(init, default_value=-1)
>>> table.lookup(tg.constant(["b", "z", "a"])).numpy()
array([ 2, -1,  1], dtype=int32)
"""
import sys

import numpy as np

from .compat import surface
from .core import dtypes
from .core.tensor import Tensor, Variable, constant, convert_to_tensor

__all__ = ["KeyValueTensorInitializer", "StaticHashTable"]


def _host(value, dtype, what):
    if isinstance(value, Variable):
        value = value._read()
    t = value if isinstance(value, Tensor) else convert_to_tensor(value, dtype=dtype)
    if dtype is not None and t.dtype != dtypes.as_dtype(dtype):
        raise TypeError(f"{what}: expected {dtypes.as_dtype(dtype).name}, got {t.dtype.name}")
    return t


def _key(v):
    return v.encode() if isinstance(v, str) else v.item() if isinstance(v, np.generic) else v


class KeyValueTensorInitializer:
    """The keys and values (1-D, the same length) a table starts with, as
    `tf.lookup.KeyValueTensorInitializer`.

    >>> init = tg.lookup.KeyValueTensorInitializer([1, 2], [10.0, 20.0])
    >>> init.key_dtype, init.value_dtype
    (tg.int32, tg.float32)
    """

    def __init__(self, keys, values, key_dtype=None, value_dtype=None, name=None):
        self._keys = _host(keys, key_dtype, "KeyValueTensorInitializer keys")
        self._values = _host(values, value_dtype, "KeyValueTensorInitializer values")
        if self._keys.ndim != 1 or self._values.ndim != 1 or \
                self._keys.shape[0] != self._values.shape[0]:
            raise ValueError(f"KeyValueTensorInitializer: keys and values must be 1-D of the same "
                             f"length, got shapes {tuple(self._keys.shape)} and "
                             f"{tuple(self._values.shape)}")
        self.key_dtype, self.value_dtype = self._keys.dtype, self._values.dtype
        self._name = name or "key_value_init"

    def _pairs(self):
        return [_key(k) for k in self._keys.numpy()], self._values.numpy()


class StaticHashTable:
    """An immutable table filled from `initializer`; keys it lacks give `default_value`, as
    `tf.lookup.StaticHashTable` (`lookup`, `table[keys]`, `size`, `export`).

    >>> t = tg.lookup.StaticHashTable(
    ...     tg.lookup.KeyValueTensorInitializer(["x", "y"], [0.5, 1.5]), default_value=0.0)
    >>> t[tg.constant([["y", "q"]])].numpy().tolist(), int(t.size())
    ([[1.5, 0.0]], 2)
    """

    def __init__(self, initializer, default_value, name=None, experimental_is_anonymous=False):
        if not isinstance(initializer, KeyValueTensorInitializer):
            raise TypeError(f"StaticHashTable: initializer must be a KeyValueTensorInitializer, "
                            f"got {type(initializer).__name__}")
        keys, values = initializer._pairs()
        if len(set(keys)) != len(keys):
            raise ValueError("StaticHashTable: the initializer has duplicate keys")
        self._init = initializer
        self._table = dict(zip(keys, values.tolist()))
        self.key_dtype, self.value_dtype = initializer.key_dtype, initializer.value_dtype
        self.default_value = _host(default_value, self.value_dtype,
                                   "StaticHashTable default_value")
        if self.default_value.ndim != 0:
            raise ValueError("StaticHashTable: default_value must be a scalar")
        self._name = name

    @property
    def name(self):
        return self._name or "hash_table"

    def size(self, name=None):
        """The number of entries (an int64 scalar tensor)."""
        return constant(np.int64(len(self._table)))

    def lookup(self, keys, name=None):
        """The values of `keys` (any shape), `default_value` where a key is absent."""
        k = keys._read() if isinstance(keys, Variable) else keys
        k = k if isinstance(k, Tensor) else convert_to_tensor(k, dtype=self.key_dtype)
        if (k.dtype == dtypes.string) != (self.key_dtype == dtypes.string) or \
                (k.dtype != self.key_dtype and k.dtype != dtypes.string and
                 k._data.dtype.kind not in "iu"):
            raise TypeError(f"StaticHashTable.lookup: keys must be {self.key_dtype.name}, got "
                            f"{k.dtype.name}")
        arr = k.numpy()
        default = self.default_value.numpy().item()
        out = np.array([self._table.get(_key(v), default) for v in arr.ravel()],
                       dtype=dtypes.np_dtype(self.value_dtype)).reshape(arr.shape)
        return constant(out) if self.value_dtype != dtypes.string else \
            convert_to_tensor(out.astype(object))

    __getitem__ = lookup

    def export(self, name=None):
        """(keys, values) tensors of the table's entries."""
        return self._init._keys, self._init._values


# the names of tf.lookup this module lacks are refusals, however it is first imported
surface.hook(sys.modules[__name__], "tf.lookup")
