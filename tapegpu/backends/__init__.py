"""Backends: where arrays live and which array module computes on them.

A backend is a small object: `name`, `device` (TensorFlow-style device string), `short`
(what `tg.device` accepts), `xp` (the array module: numpy or cupy), `asarray`, `to_numpy`,
`synchronize`, `kernels` (the custom-kernel set, or None), `memory_stats` and `launches`
(kernel launches per kernel or op name). Ops run their `xp`-generic forward; a backend with
kernels has some ops' forwards and VJPs replaced by kernel launches (the `kernels=` and
`vjp_kernels=` of their registry entries, built in ops/kernels.py).

Three kinds: `numpy` (always), `cuda_emu` (numpy arrays, our CUDA kernels run by the
emulator: the kernels' test bed) and `cuda` (CuPy arrays on a GPU, in cuda.py: the only module
that imports CuPy, on first use).
"""
import collections
import os
import threading

import numpy as np

from . import emu
from .emu import stream as emu_stream

# One-pass CPU kernels for the numpy backend (tapegpu/backends/_cpu.c: bias + ReLU and ReLU's
# backward), built at install where a C compiler is; numpy runs those ops without them, with the
# same bits. TAPEGPU_PURE_PYTHON=1 leaves them out.
cpu_kernels = None
if os.environ.get("TAPEGPU_PURE_PYTHON", "") in ("", "0"):
    try:
        from . import _cpu as cpu_kernels
    except ImportError:  # not built
        cpu_kernels = None


class NumpyBackend:
    """CPU arrays, computed by numpy. Always available."""

    name = "numpy"
    device = "/job:localhost/replica:0/task:0/device:CPU:0"
    short = "cpu"
    device_type = "CPU"
    xp = np
    kernels = None
    counts_launches = False  # numpy calls are not kernel launches

    def __init__(self):
        self.launches = collections.Counter()

    def asarray(self, value, dtype=None):
        return np.asarray(value, dtype=dtype)

    def to_numpy(self, array):
        return np.asarray(array)

    def synchronize(self):
        pass

    def memory_stats(self):
        return {}

    def __repr__(self):
        return f"<backend {self.name}>"


class CudaEmuBackend(NumpyBackend):
    """numpy arrays, with our CUDA kernels run by the emulator (tapegpu.backends.emu): every custom
    kernel launch of the GPU backend happens here too, from the same source, on the CPU.
    Library calls (matmul, reductions, elementwise numpy) count as one launch each, as they
    would be one CuPy/cuBLAS launch on a GPU."""

    name = "cuda_emu"
    device = "/job:localhost/replica:0/task:0/device:CUDA_EMU:0"
    short = "cuda_emu"
    device_type = "CUDA_EMU"
    counts_launches = True

    def __init__(self):
        super().__init__()
        self._kernels = None
        self.capturing = None  # the emu.stream.Stream capturing this device's launches

    def to_numpy(self, array):
        if self.capturing is not None:  # as CUDA: no device-to-host copy in a capture
            raise emu_stream.CaptureError("the device is capturing a graph, so device-to-host "
                                          "transfers are disallowed")
        return np.asarray(array)

    def synchronize(self):
        if self.capturing is not None:
            raise emu_stream.CaptureError("cudaErrorStreamCaptureUnsupported: synchronize "
                                          "while the device is capturing a graph")

    @property
    def kernels(self):
        if self._kernels is None:
            from .kernels import KernelSet
            self._kernels = KernelSet.emulated()
            self._kernels.launches = self.launches  # one counter for kernels and library calls
        return self._kernels

    @staticmethod
    def available():
        """Whether the emulator can build and run a kernel here (checked once per
        process by building and launching a one-line kernel; see `unavailable_reason`)."""
        return CudaEmuBackend.unavailable_reason() is None

    @staticmethod
    def unavailable_reason():
        """None if the emulator works here, else why it does not."""
        return emu.unavailable_reason()


NUMPY = NumpyBackend()
CUDA_EMU = CudaEmuBackend()

_gpus = {}  # index -> CudaBackend, created on first use


class Placement:
    """The device configuration `tg.config` sets (tapegpu/core/config.py): which GPUs are
    visible, how many logical devices each device type has, soft placement. Logical devices
    all compute on their physical device: logical CPU N is the CPU backend, logical GPU N the
    backend of the visible GPU it was split from."""
    visible_gpus = None  # physical indices of the visible GPUs (None: all)
    logical_cpus = 1  # logical CPU devices ('/device:CPU:0' .. N-1)
    logical_gpus = None  # visible-GPU index of each logical GPU (None: one per visible GPU)
    soft = False  # tg.config.set_soft_device_placement: unknown devices fall back to the CPU
    used = set()  # device types whose logical devices have been used (their layout is fixed)


def gpu(index=0):
    """The backend of (visible) GPU `index` (CuPy), or a RuntimeError saying why there is
    none."""
    if Placement.visible_gpus is not None and index < len(Placement.visible_gpus):
        index = Placement.visible_gpus[index]
    if index not in _gpus:
        from .cuda import CudaBackend  # the one import of CuPy
        _gpus[index] = CudaBackend(index)
    return _gpus[index]


def physical_gpu_count():
    """GPUs usable through CuPy (0 without CuPy or without a driver); never raises."""
    from importlib.util import find_spec
    if find_spec("cupy") is None:
        return 0
    try:
        from .cuda import device_count
        return device_count()
    except Exception:  # a broken CUDA install is "no GPU", reported by `tapegpu info`
        return 0


def gpu_count():
    """GPUs usable here: those of CuPy that tg.config.set_visible_devices left visible."""
    if Placement.visible_gpus is not None:
        return len(Placement.visible_gpus)
    return physical_gpu_count()


def _logical(kind, index):
    """The backend of logical device `kind`:`index` (CPU or GPU) beyond the physical ones'
    first, or None when there is no such logical device."""
    if kind == "cpu":
        if index < Placement.logical_cpus:
            Placement.used.add("CPU")
            return NUMPY
        return None
    if Placement.logical_gpus is not None:
        if index < len(Placement.logical_gpus):
            Placement.used.add("GPU")
            return gpu(Placement.logical_gpus[index])
        return None
    return gpu(index) if index < gpu_count() else None


def lookup(name):
    """The backend for a device name: 'cpu', 'gpu', 'gpu:N', 'cuda', 'cuda:N', 'cuda_emu'
    (TensorFlow's '/device:CPU:0' and '/GPU:0' spellings work too)."""
    if not isinstance(name, str):
        if hasattr(name, "xp") and hasattr(name, "name"):
            return name
        raise TypeError(f"device must be a string such as 'cpu', 'gpu:0' or 'cuda_emu', got "
                        f"{name!r}")
    key = name.strip().lower()
    for prefix in ("/job:localhost/replica:0/task:0", "/device:", "/"):
        if key.startswith(prefix):
            key = key[len(prefix):]
    key = key.replace("device:", "")
    if key in ("cpu", "cpu:0", "numpy"):
        return NUMPY
    if key in ("cuda_emu", "cuda_emu:0"):
        return CUDA_EMU
    kind, _, idx = key.partition(":")
    if kind == "cpu" and idx.isdigit():  # a logical CPU (tg.config.set_logical_device_...)
        found = _logical("cpu", int(idx))
        if found is not None or Placement.soft:
            return NUMPY
        raise ValueError(f"tg.device({name!r}): there are {Placement.logical_cpus} logical CPU "
                         f"device(s); make more with tg.config.set_logical_device_configuration "
                         f"(or enable tg.config.set_soft_device_placement(True))")
    if kind in ("gpu", "cuda"):
        index = int(idx) if idx else 0
        found = _logical("gpu", index)
        if found is not None:
            return found
        if Placement.soft:  # TensorFlow's soft placement: an unknown device runs on the CPU
            return NUMPY
        n = gpu_count()
        why = "CuPy is not installed (pip install 'tapegpu[cuda12]')" if not _has_cupy() \
            else f"{n} GPU(s) visible"
        raise RuntimeError(f"tg.device({name!r}): no such GPU here ({why}); available "
                           f"devices: {', '.join(b.short for b in available())}")
    raise ValueError(f"unknown device {name!r}; valid are 'cpu', 'gpu', 'gpu:N', 'cuda_emu' "
                     f"(available here: {', '.join(b.short for b in available())})")


def _has_cupy():
    from importlib.util import find_spec
    return find_spec("cupy") is not None


def available():
    """The backends usable on this machine: GPUs first, then the CPU and the emulator."""
    out = [gpu(i) for i in range(gpu_count())]
    out.append(NUMPY)
    if CudaEmuBackend.available():
        out.append(CUDA_EMU)
    return out


def all_backends():
    """The backends created so far."""
    return [NUMPY, CUDA_EMU] + list(_gpus.values())


def _default():
    """TAPEGPU_DEVICE if set, else the first GPU when CuPy and a GPU are present, else CPU."""
    env = os.environ.get("TAPEGPU_DEVICE")
    if env:
        return lookup(env)
    return gpu(0) if gpu_count() else NUMPY


class _DeviceState(threading.local):
    """The `tg.device` blocks entered in this thread, innermost last: as in TensorFlow, a device
    scope applies to the thread that entered it (a new thread starts on the default device)."""

    def __init__(self):
        self.stack = []


_devices = _DeviceState()
_default_backend = None  # resolved once per process, on first use


def device_stack():
    """This thread's device stack (`tg.device` pushes and pops it)."""
    return _devices.stack


def current():
    """Where new tensors are created: the innermost `tg.device` block of this thread, else the
    default device."""
    stack = _devices.stack
    if stack:
        return stack[-1]
    return _default_backend if _default_backend is not None else _resolve_default()


def _resolve_default():
    global _default_backend
    with _default_lock:
        if _default_backend is None:
            _default_backend = _default()
    return _default_backend


_default_lock = threading.Lock()
