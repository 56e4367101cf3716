"""Matrix products on a GPU by cuBLAS directly (ctypes), for the `matmul` op on `cuda`.

Why not CuPy's `matmul`: CuPy refuses every cuBLAS call on a capturing stream (CuPy 14.2:
"calling cuBLAS API during stream capture is currently unsupported"), so no training step with
a product could be captured as a CUDA graph (tapegpu/function/capture.py); and its host cost
per product was about 40 us on an H200's host. cuBLAS itself captures its GEMMs once it has a
workspace of its own (cuBLAS's documentation, "CUDA Graphs Support"): this module keeps one
handle per GPU with a 32 MiB workspace (Hopper's advice). A product binds the handle to the
current stream, and the workspace again (binding a stream resets it to cuBLAS's default pool),
only when the stream is another than the last one bound. Binding both at every product made
an H200's MLP step 1.5x slower against PyTorch's in the same run than with CuPy's matmul,
likely because resetting the workspace pool allocates or frees device memory, which waits for
the device (binding on a change only is not measured on a GPU yet). Products on two streams
at the same time would share the one workspace: tapegpu runs its steps on one stream at a time
(a capture's included); a `tg.data` map that computes products on the prefetch stream while a
step runs is the exception to remember (a workspace per stream would lift it).

`matmul(xp, a, b, ta, tb)` is the op's `cuda` kernel: op(a) @ op(b) for float16, float32 and
float64 matrices, or equal-sized batches of them, whose matrices are C- or F-contiguous (a
transposed view costs nothing: it is cuBLAS's other `op`); anything else returns NotImplemented
and takes the op's reference forward (CuPy's). Eager code, a trace and its replay all take this
path on a GPU, so a captured step has the uncaptured step's bits. float32 products use TF32
where `tg.config.experimental.enable_tensor_float_32_execution` allows it (on by default, as
TensorFlow) and the GPU has it (compute capability 8.0+), as CuPy's did (core/config.py).
Without libcublas (a machine without a GPU, the CuPy stand-in of the tests), or with
TAPEGPU_CUBLAS=0 in the environment, `available()` is False and the kernel always declines.
"""
import ctypes
import os
import threading

import numpy as np

from .. import backends
from ..core import config

WORKSPACE_BYTES = 32 << 20
# cudaDataType and cublasComputeType_t (cublas_api.h, library_types.h)
_DATA = {np.dtype(np.float16): 2, np.dtype(np.float32): 0, np.dtype(np.float64): 1}
_COMPUTE_32F, _COMPUTE_32F_TF32, _COMPUTE_64F = 68, 77, 70
_OP_N, _OP_T = 0, 1
_GEMM_DEFAULT = -1

_lib = None
_why = None
_lock = threading.Lock()
_handles = {}   # device id -> [handle, workspace array, its pointer, TF32 there, bound stream]
_SCALARS = (ctypes.c_float(1.0), ctypes.c_float(0.0), ctypes.c_double(1.0), ctypes.c_double(0.0))
_ONE32, _ZERO32, _ONE64, _ZERO64 = (ctypes.addressof(c) for c in _SCALARS)  # alpha, beta


def _load():
    """libcublas as CuPy loaded it (its soname, found among the process's libraries), else
    from NVIDIA's wheel by cuda-pathfinder; None and the reason where neither works."""
    global _lib, _why
    if _lib is not None or _why is not None:
        return _lib
    if os.environ.get("TAPEGPU_CUBLAS", "1") == "0":
        _why = "TAPEGPU_CUBLAS=0"
        return None
    try:
        import cupy
    except ImportError as e:
        _why = f"CuPy is not installed ({e})"
        return None
    if hasattr(cupy, "cupy_sim"):   # the tests' stand-in: no GPU behind it
        _why = "CuPy is the tests' stand-in"
        return None
    try:
        import cupy_backends.cuda.libs.cublas  # noqa: F401  (loads libcublas into the process)
    except ImportError:
        pass
    errors = []
    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        try:
            from cuda.pathfinder import load_nvidia_dynamic_lib
            lib = ctypes.CDLL(load_nvidia_dynamic_lib("cublas").abs_path)
        except Exception as e:  # noqa: BLE001  (no wheel, no toolkit: CuPy's matmul then)
            _why = f"libcublas not found ({'; '.join(errors)}; {e})"
            return None
    p, i, i64, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_size_t
    lib.cublasCreate_v2.argtypes = [ctypes.POINTER(p)]
    lib.cublasSetStream_v2.argtypes = [p, p]
    lib.cublasSetWorkspace_v2.argtypes = [p, p, sz]
    lib.cublasGemmEx.argtypes = [p, i, i, i, i, i, p, p, i, i, p, i, i, p, p, i, i, i, i]
    lib.cublasGemmStridedBatchedEx.argtypes = [p, i, i, i, i, i, p, p, i, i, i64, p, i, i, i64,
                                               p, p, i, i, i64, i, i, i]
    for f in ("cublasCreate_v2", "cublasSetStream_v2", "cublasSetWorkspace_v2", "cublasGemmEx",
              "cublasGemmStridedBatchedEx"):
        getattr(lib, f).restype = i
    _lib = lib
    return lib


def available():
    return _load() is not None


def reason():
    """Why products take CuPy's matmul instead ('' where cuBLAS is used directly)."""
    _load()
    return _why or ""


def _check(status, what):
    if status != 0:
        raise RuntimeError(f"cuBLAS {what} failed with status {status}")


def _entry(xp, device):
    """GPU `device`'s [handle, workspace, its pointer, TF32 there, the stream it is bound to],
    made at its first use (with that GPU current)."""
    entry = _handles.get(device)
    if entry is None:
        with _lock:
            entry = _handles.get(device)
            if entry is None:
                handle = ctypes.c_void_p()
                _check(_lib.cublasCreate_v2(ctypes.byref(handle)), "create")
                workspace = xp.empty(WORKSPACE_BYTES, dtype=np.uint8)
                tf32 = int(xp.cuda.Device(device).compute_capability) >= 80
                entry = _handles[device] = [handle, workspace, workspace.data.ptr, tf32, None]
    return entry


def _operand(x, transposed):
    """(cuBLAS op, leading dimension) of the matrices of `x` (its last two axes, shape (r, c),
    standing for op(x) when `transposed`) read as column-major: a C-contiguous matrix is its
    transpose with ld c, an F-contiguous one itself with ld r. None for other layouts."""
    r, c = x.shape[-2:]
    item = x.itemsize
    s_r, s_c = x.strides[-2:]
    if (s_c == item or c == 1) and (s_r == c * item or r == 1):
        op, ld = _OP_N, max(c, 1)          # row-major: x^T column-major
    elif (s_r == item or r == 1) and (s_c == r * item or c == 1):
        op, ld = _OP_T, max(r, 1)          # column-major: x itself
    else:
        return None
    if transposed:
        op = _OP_T if op == _OP_N else _OP_N
    return op, ld


def matmul(xp, a, b, ta=False, tb=False):
    """op(a) @ op(b) by cuBLAS (module docstring), or NotImplemented."""
    if a.dtype != b.dtype or a.dtype not in _DATA or a.ndim != b.ndim or a.ndim not in (2, 3) \
            or _load() is None:
        return NotImplemented
    batch = a.shape[0] if a.ndim == 3 else 1
    if a.ndim == 3 and (b.shape[0] != batch or batch == 0):
        return NotImplemented
    m, k = a.shape[-1:-3:-1] if ta else a.shape[-2:]
    k2, n = b.shape[-1:-3:-1] if tb else b.shape[-2:]
    if k != k2 or 0 in (m, n, k):
        return NotImplemented
    opa, opb = _operand(a, ta), _operand(b, tb)
    if opa is None or opb is None:
        return NotImplemented
    if a.ndim == 3:
        sa, sb = a.strides[0] // a.itemsize, b.strides[0] // b.itemsize
        if sa * a.itemsize != a.strides[0] or sb * b.itemsize != b.strides[0]:
            return NotImplemented
    dtype = a.dtype
    data = _DATA[dtype]
    device = a.device.id
    with xp.cuda.Device(device):
        entry = _entry(xp, device)
        handle, _, ws, has_tf32, _ = entry
        if dtype == np.float64:
            compute, one, zero = _COMPUTE_64F, _ONE64, _ZERO64
        else:
            compute = _COMPUTE_32F_TF32 if dtype == np.float32 and has_tf32 and \
                config.tensor_float_32_execution_enabled() else _COMPUTE_32F
            one, zero = _ONE32, _ZERO32
        out = xp.empty(a.shape[:-2] + (m, n), dtype=dtype)
        stream = xp.cuda.get_current_stream().ptr
        # row-major C (m, n) = op(A) op(B) is column-major C^T (n, m) = op(B)^T op(A)^T: B
        # first. One handle per GPU: its stream and workspace are bound under the lock
        with _lock:
            if entry[4] != stream:
                _check(_lib.cublasSetStream_v2(handle, stream), "set stream")
                _check(_lib.cublasSetWorkspace_v2(handle, ws, WORKSPACE_BYTES), "set workspace")
                entry[4] = stream
            if a.ndim == 2:
                what, status = "GemmEx", _lib.cublasGemmEx(handle, opb[0], opa[0], n, m, k, one, b.data.ptr,
                                           data, opb[1], a.data.ptr, data, opa[1], zero,
                                           out.data.ptr, data, n, compute, _GEMM_DEFAULT)
            else:
                what, status = "GemmStridedBatchedEx", _lib.cublasGemmStridedBatchedEx(
                    handle, opb[0], opa[0], n, m, k, one, b.data.ptr, data, opb[1], sb,
                    a.data.ptr, data, opa[1], sa, zero, out.data.ptr, data, n, m * n, batch,
                    compute, _GEMM_DEFAULT)
        _check(status, what)
    dev = backends.gpu(device)
    if dev.counts_launches:   # (a kernel counts its own launches: ops/registry.py)
        dev.launches["matmul"] += 1
    return out
