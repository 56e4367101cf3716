"""The GPU backend: CuPy arrays, our kernels through `cupy.RawModule`, the rest through CuPy
(cuBLAS, cuSOLVER, its elementwise kernels and reductions). This is the only module that
imports CuPy, and it is imported only when a GPU is asked for. Everything that can be shared
with the tested paths is: grid/block choice and launches live in `kernels.KernelSet`, the
kernel entries of the ops in their registry entries (ops/kernels.py), both exercised on every
test run by `cuda_emu`."""
import collections

import numpy

import cupy  # noqa: F401  (ImportError here means no GPU backend; backend.lookup says so)

from . import checks
from .kernels.launch import NVRTC_OPTIONS, KernelSet


def device_count():
    return cupy.cuda.runtime.getDeviceCount()


def special(name):
    """cupyx.scipy.special's function `name` (erf, erfc, ...)."""
    import cupyx.scipy.special  # part of CuPy; loaded when a special function first runs
    return getattr(cupyx.scipy.special, name)


def _load_module(path, names):
    with open(path) as f:  # one FMA policy with the generated kernels (NVRTC_OPTIONS)
        return cupy.RawModule(code=f.read(), options=NVRTC_OPTIONS)


def _negative_zero(value, dtype):
    """Whether `value` is a 0-d float or complex zero with a negative sign in it."""
    if not isinstance(value, (float, complex, numpy.floating, numpy.complexfloating)) and \
            not (isinstance(value, numpy.ndarray) and value.ndim == 0):
        return False
    v = numpy.asarray(value, dtype=dtype)
    return v.dtype.kind in "fc" and bool(v == 0) and \
        bool(numpy.signbit(v.real) or numpy.signbit(v.imag))


class CudaBackend:
    """Arrays on GPU `index`, in CuPy's memory pool, on CuPy's current stream."""

    counts_launches = True
    device_type = "GPU"

    def __init__(self, index=0):
        self.index = index
        self.name = "cuda"
        self.short = f"gpu:{index}"
        self.device = f"/job:localhost/replica:0/task:0/device:GPU:{index}"
        self.xp = cupy
        self.launches = collections.Counter()
        self._kernels = None
        from ..core.config import apply_tensor_float_32
        apply_tensor_float_32()  # TF32 for float32 products, as tg.config.experimental says

    @property
    def kernels(self):
        if self._kernels is None:
            with cupy.cuda.Device(self.index):
                self._kernels = KernelSet(cupy, _load_module, context=self.context)
            self._kernels.launches = self.launches
        return self._kernels

    def context(self):
        return cupy.cuda.Device(self.index)

    def asarray(self, value, dtype=None):
        with cupy.cuda.Device(self.index):
            if _negative_zero(value, dtype):
                # CuPy uploads a 0-d value with ndarray.fill, which memsets a value == 0, so
                # -0.0 would arrive as +0.0: negate a zero on the device (no upload) instead
                v = numpy.asarray(value, dtype=dtype)
                if v.dtype.kind == "f":
                    return cupy.negative(cupy.zeros((), dtype=v.dtype))
                return cupy.asarray(v.reshape(1)).reshape(())  # complex: byte for byte
            return cupy.asarray(value, dtype=dtype)

    def copy_from(self, array):
        """A copy on this GPU of a CuPy array on any GPU: device to device (peer to peer
        where the GPUs allow it), never through the host."""
        with cupy.cuda.Device(self.index):
            return cupy.array(array, copy=True)

    def to_numpy(self, array):
        if checks.pending():  # a host read: the queued device checks are read with it
            checks.raise_pending(cupy)
        return cupy.asnumpy(array)

    def synchronize(self):
        cupy.cuda.Device(self.index).synchronize()

    def memory_stats(self):
        pool = cupy.get_default_memory_pool()
        return {"pool_used_bytes": pool.used_bytes(), "pool_total_bytes": pool.total_bytes()}

    def properties(self):
        p = cupy.cuda.runtime.getDeviceProperties(self.index)
        return {"name": p["name"].decode(), "memory_bytes": p["totalGlobalMem"],
                "compute_capability": f"{p['major']}.{p['minor']}"}

    def __repr__(self):
        return f"<backend cuda:{self.index}>"
