"""Devices: `tg.device(...)`, `tensor.to(...)`, `tg.copy_to`, `tg.config.list_devices()`.

Tensors are created on the current device: the innermost `tg.device` block of the calling
thread, else the default, resolved once per process (the first GPU when CuPy and a GPU are
present, else the CPU; `TAPEGPU_DEVICE` overrides).
An op's inputs must share one device; there are no silent copies.
"""
import contextlib
import threading
from collections import namedtuple

from .. import backends as _backend
from .tensor import Tensor, Variable, convert_to_tensor

PhysicalDevice = namedtuple("PhysicalDevice", "name device_type")


class device(contextlib.ContextDecorator):
    """Context manager (and decorator) placing new tensors on a device: 'cpu', 'gpu', 'gpu:N'
    or 'cuda_emu' (the CUDA kernels run by the CPU emulator).

    >>> with tg.device("cpu"):
    ...     x = tg.zeros(2)
    >>> x.device.endswith("CPU:0")
    True
    """

    def __init__(self, name):
        self._dev = _backend.lookup(name)
        self._entered = threading.local()  # per thread: backend contexts entered, innermost last

    def _recreate_cm(self):
        return device(self._dev)  # as a decorator: a fresh block per call (calls may overlap)

    def __enter__(self):
        _backend.current()  # resolve the default first, so it is what the block returns to
        stack = _backend.device_stack()
        stack.append(self._dev)
        enter = getattr(self._dev, "context", None)
        ctx = None
        if enter is not None:
            ctx = enter()
            ctx.__enter__()
        self._entered.__dict__.setdefault("ctxs", []).append(ctx)
        return self

    def __exit__(self, *exc):
        ctx = self._entered.ctxs.pop()
        if ctx is not None:
            ctx.__exit__(*exc)
        _backend.device_stack().pop()


def copy_to(x, device_name):
    """A copy of `x` on another device (`x` itself if it is already there).

    >>> tg.copy_to(tg.ones(2), "cpu").shape
    (2,)
    """
    dev = _backend.lookup(device_name)
    t = x._read() if isinstance(x, Variable) else x
    if not isinstance(t, Tensor):
        t = convert_to_tensor(t)
    if t._dev is dev:
        return t
    if hasattr(dev, "copy_from") and t._dev.xp is dev.xp:  # GPU to GPU: no host round trip
        return Tensor(dev.copy_from(t._data), dev)
    return Tensor(dev.asarray(t._dev.to_numpy(t._data)), dev)  # tensors are immutable: sharing
    # a host buffer between cpu and cuda_emu tensors is safe


def list_devices():
    """The devices usable here, GPUs first, as `(name, device_type)` records.

    >>> [d.device_type for d in tg.config.list_devices()][-2:]
    ['CPU', 'CUDA_EMU']
    """
    return [PhysicalDevice(b.device, b.device_type) for b in _backend.available()]


def default_device():
    """The device new tensors go to outside any `tg.device` block.

    >>> tg.config.default_device() == tg.zeros(1).device
    True
    """
    return _backend._default().device
