"""Interop through DLPack: `tg.experimental.dlpack.from_dlpack / to_dlpack` (as TF's), and
`tg.from_dlpack`. Tensors also speak `__dlpack__`, `__array__` and, on a GPU,
`__cuda_array_interface__`, so `torch.from_dlpack(t)`, `np.asarray(t)` and `cupy.asarray(t)`
work directly."""
import ctypes
import types

import numpy as np

from .. import backends as backend
from .tensor import Tensor, read_only

_CPU, _CUDA = 1, 2  # DLPack device types


def from_dlpack(obj):
    """A tensor from any DLPack producer (torch, jax, cupy, numpy) or a DLPack capsule.

    Host data is copied (a tensor is immutable, and the producer may write to its buffer);
    GPU data is taken by CuPy without a copy.

    >>> tg.experimental.dlpack.from_dlpack(np.arange(3.0)).numpy()
    array([0., 1., 2.])
    """
    if type(obj).__name__ == "PyCapsule":
        kind, index = _capsule_device(obj)
        if kind == _CUDA:  # to_dlpack's of a GPU tensor, torch's, ...
            dev = backend.lookup(f"gpu:{index}")
            return Tensor(dev.xp.from_dlpack(obj), dev)
        obj = _Capsule(obj)
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack: expected a DLPack producer (an object with __dlpack__: "
                        f"a torch, jax, cupy or numpy array) or a DLPack capsule, got "
                        f"{type(obj).__name__}; use tg.constant for lists and scalars")
    kind, index = obj.__dlpack_device__()[:2] if hasattr(obj, "__dlpack_device__") else \
        (_CPU, 0)
    if kind == _CUDA:   # on the producer's GPU
        dev = backend.lookup(f"gpu:{int(index)}")
        return Tensor(dev.xp.from_dlpack(obj), dev)
    dev = backend.current() if backend.current().xp is np else backend.NUMPY
    return Tensor(np.array(np.from_dlpack(obj), copy=True), dev)


def _capsule_device(capsule):
    """(DLPack device type, device id) of a capsule's tensor (type 1 CPU, 2 CUDA), read from its
    struct:
    DLTensor {void *data; DLDevice device; ...}, first in a legacy "dltensor"'s
    DLManagedTensor, after version, manager_ctx, deleter and flags (32 bytes) in a
    "dltensor_versioned"'s. (None, None) for a capsule already consumed ("used_dltensor")."""
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype, api.PyCapsule_GetName.argtypes = \
        ctypes.c_char_p, [ctypes.py_object]
    api.PyCapsule_GetPointer.restype, api.PyCapsule_GetPointer.argtypes = \
        ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    name = api.PyCapsule_GetName(capsule)
    offset = {b"dltensor": 0, b"dltensor_versioned": 32}.get(name)
    if offset is None:
        return None, None
    address = api.PyCapsule_GetPointer(capsule, name) + offset + ctypes.sizeof(ctypes.c_void_p)
    return ctypes.c_int32.from_address(address).value, \
        ctypes.c_int32.from_address(address + 4).value


class _Capsule:
    """A host DLPack capsule (to_dlpack's) as a producer numpy takes."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return (_CPU, 0)


def to_dlpack(tensor):
    """A DLPack capsule of the tensor's value.

    A legacy (unversioned) capsule cannot mark its buffer read-only, so a host tensor's capsule
    holds a copy: what its consumer writes never reaches the tensor. On a GPU it is the
    tensor's buffer (read it, don't write it).

    >>> cap = tg.experimental.dlpack.to_dlpack(tg.ones(2))
    >>> type(cap).__name__
    'PyCapsule'
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack: expected a tg.Tensor, got {type(tensor).__name__}")
    if tensor._dev.xp is np:
        return tensor._data.copy().__dlpack__()
    return tensor._data.__dlpack__()


_UNSET = object()


def _dlpack(self, stream=None, max_version=None, dl_device=None, copy=_UNSET):
    # Host tensors are immutable: a consumer of the 2023.12 protocol (DLPack >= 1.0 and the
    # `copy` keyword, as numpy) gets a read-only view of the buffer (the read-only flag travels
    # with it); others get a copy: older ones cannot be told, and PyTorch (max_version without
    # `copy`) ignores the flag. CuPy arrays have no read-only flag: GPU tensors export their
    # buffer.
    told = copy is not _UNSET
    copy = None if copy is _UNSET else copy
    kwargs = {}
    if stream is not None:
        kwargs["stream"] = stream
    if dl_device is not None:
        kwargs["dl_device"] = dl_device
    if copy is not None:
        kwargs["copy"] = copy
    if self._dev.xp is not np:
        if max_version is not None:
            kwargs["max_version"] = max_version
        return self._data.__dlpack__(**kwargs)
    if told and max_version is not None and tuple(max_version) >= (1, 0) and not copy:
        return read_only(self._data).__dlpack__(max_version=max_version, **kwargs)
    return self._data.copy().__dlpack__(**kwargs)


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
