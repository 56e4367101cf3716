"""Interop through DLPack: `tg.experimental.dlpack.from_dlpack / to_dlpack` (as TF's), and
`tg.from_dlpack`. Tensors also speak `__dlpack__`, `__array__` and, on a GPU,
`__cuda_array_interface__`, so `torch.from_dlpack(t)`, `np.asarray(t)` and `cupy.asarray(t)`
work directly."""
import types

import numpy as np

from .. import backends as backend
from .tensor import Tensor

_CPU, _CUDA = 1, 2  # DLPack device types


def from_dlpack(obj):
    """A tensor from any DLPack producer (torch, jax, cupy, numpy) or a DLPack capsule.

    Host data is copied (a tensor is immutable, and the producer may write to its buffer);
    GPU data is taken by CuPy without a copy.

    >>> tg.experimental.dlpack.from_dlpack(np.arange(3.0)).numpy()
    array([0., 1., 2.])
    """
    kind = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else _CPU
    if kind == _CUDA:
        dev = backend.lookup("gpu")
        return Tensor(dev.xp.from_dlpack(obj), dev)
    dev = backend.current() if backend.current().xp is np else backend.NUMPY
    return Tensor(np.array(np.from_dlpack(obj), copy=True), dev)


def to_dlpack(tensor):
    """A DLPack capsule of the tensor's buffer (read it, don't write it).

    >>> cap = tg.experimental.dlpack.to_dlpack(tg.ones(2))
    >>> type(cap).__name__
    'PyCapsule'
    """
    return tensor._data.__dlpack__()


def _dlpack(self, stream=None, **kwargs):
    return self._data.__dlpack__(**({"stream": stream} if stream is not None else {}), **kwargs)


def _dlpack_device(self):
    return self._data.__dlpack_device__()


def _cuda_array_interface(self):
    iface = getattr(self._data, "__cuda_array_interface__", None)
    if iface is None:
        raise AttributeError(f"a tensor on {self._dev.short} has no __cuda_array_interface__ "
                             "(only GPU tensors do)")
    return iface


Tensor.__dlpack__ = _dlpack
Tensor.__dlpack_device__ = _dlpack_device
Tensor.__cuda_array_interface__ = property(_cuda_array_interface)

dlpack = types.SimpleNamespace(from_dlpack=from_dlpack, to_dlpack=to_dlpack)
