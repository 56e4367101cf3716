"""A CPU emulator of the CUDA execution model, for testing kernels without a GPU.

``RawModule`` mirrors ``cupy.RawModule``: the same ``.cu`` source, the same
call shape, numpy arrays in place of device arrays::

    >>> import numpy as np
    >>> from tapegpu.backends.emu import RawModule
    >>> mod = RawModule(code='''
    ... extern "C" __global__ void scale(float *x, float a, long long n) {
    ...     for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
    ...          i += (long long)blockDim.x * gridDim.x)
    ...         x[i] *= a;
    ... }''')
    >>> x = np.arange(5, dtype=np.float32)
    >>> mod.get_function("scale")((2,), (32,), (x, np.float32(3), 5))
    >>> x
    array([ 0.,  3.,  6.,  9., 12.], dtype=float32)

Threads run as fibers, blocks one after another; see docs/emulator.md for
what is emulated, what is not, and the diagnostics (all raised as
``EmuError`` subclasses).
"""

import ctypes
import json
import threading

import numpy as np

from . import build as _build
from .build import EmuCacheWarning, EmuCompileError, build_library

__all__ = ["RawModule", "Function", "EmuError", "EmuCompileError", "EmuLaunchError",
           "EmuArgumentError", "EmuKernelError", "EmuOutOfBoundsError", "EmuCacheWarning",
           "ORDERS", "unavailable_reason"]

ORDERS = ("forward", "reverse", "random")
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
MAX_SHARED_BYTES = 48 * 1024   # without the opt-in attribute, as on every GPU since sm_50
GUARD_BYTES = 256              # guard padding on each side of every array argument
GUARD_FILL = 0xFF              # reads past an array give NaN; writes there are detected

# ctypes releases the GIL during a launch, and the runtime keeps one scheduler
# and `__shared__` is one static copy per library: one launch at a time.
_launch_lock = threading.Lock()
_libraries = {}   # library path -> (ctypes.CDLL, manifest); dlopen shares them anyway


class EmuError(RuntimeError):
    """Base class of every error the emulator reports."""


class EmuLaunchError(EmuError, ValueError):
    """Invalid launch configuration (grid, block, shared memory)."""


class EmuArgumentError(EmuError, TypeError):
    """Arguments that do not match the kernel's parameters."""


class EmuKernelError(EmuError):
    """The kernel misbehaved while running: deadlock, divergent barrier, assert..."""


class EmuOutOfBoundsError(EmuKernelError):
    """A kernel wrote into the guard padding around an array argument."""


class RawModule:
    """Compile a CUDA C source for the emulator (cf. ``cupy.RawModule``).

    Args:
      code: the source text; or
      path: a ``.cu`` file to read it from.
      options: accepted for CuPy compatibility; ``-D`` definitions are honoured.
      order: the order in which threads resume after a collective:
        ``'forward'``, ``'reverse'`` or ``'random'`` (seeded by ``seed``).
      keep_stacks: keep the threads' stacks between launches (two memory mappings per
        thread while the module is loaded); False gives them back after each launch, for
        modules of which a process loads many (a process has about 65,000 mappings).
    """

    def __init__(self, code=None, *, path=None, options=(), order="forward", seed=0,
                 keep_stacks=True):
        if (code is None) == (path is None):
            raise ValueError("RawModule needs exactly one of code= or path=")
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, not {order!r}")
        if path is not None:
            with open(path) as f:
                code = f.read()
        self.name = str(path) if path is not None else "<code>"
        self.order, self.seed = order, int(seed)
        # False: the fiber stacks (two memory mappings per thread) are given back after each
        # launch, for modules of which a process loads many (tg.function's fused kernels)
        self.keep_stacks = bool(keep_stacks)
        defines = tuple(o for o in options if str(o).startswith("-D"))
        lib_path, self.build_hash = build_library(code, self.name, defines)
        self._lib, manifest = _load(lib_path, self.build_hash)
        self._params, self._constants = manifest["kernels"], manifest["constants"]
        self._launches = 0

    @property
    def kernel_names(self):
        return tuple(self._params)

    def get_function(self, name):
        """The kernel ``name`` as a callable ``f(grid, block, args, shared_mem=0)``."""
        if name not in self._params:
            raise AttributeError(f"{self.name} has no kernel {name!r}; it defines "
                                 f"{', '.join(self._params) or 'none'}")
        return Function(self, name)

    def get_global(self, name):
        """The bytes of the ``__constant__`` variable ``name`` as a writable
        numpy ``uint8`` array (CuPy returns a device pointer; write through
        ``.view(dtype)``)."""
        if name not in self._constants:
            raise AttributeError(f"{self.name} has no __constant__ {name!r}; it defines "
                                 f"{', '.join(self._constants) or 'none'}")
        fn = getattr(self._lib, f"emu_global_{name}")
        fn.restype = ctypes.c_void_p
        size = ctypes.c_size_t()
        addr = fn(ctypes.byref(size))
        buf = (ctypes.c_uint8 * size.value).from_address(addr)
        return np.frombuffer(buf, dtype=np.uint8)  # libraries stay loaded for the process

    def _next_seed(self):
        self._launches += 1
        return self.seed * 1000003 + self._launches


def _load(path, key):
    """Load a built library once per process and read its manifest.

    `path` comes from `build_library`, which has checked it against its manifest
    (owner, permissions, size, sha256) before this dlopen runs any of its code."""
    if str(path) not in _libraries:
        lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
        lib.emu_manifest.restype = ctypes.c_char_p
        lib.emu_last_error.restype = ctypes.c_char_p
        _libraries[str(path)] = lib, json.loads(lib.emu_manifest().decode())
    lib, manifest = _libraries[str(path)]
    # a library of several sources (build.build_libraries) lists each source's part by its hash
    manifest = manifest.get("members", {}).get(key, manifest)
    if manifest.get("hash", key) != key or "kernels" not in manifest:
        raise EmuCompileError(f"cached library {path} does not match its content hash "
                              f"(built for {manifest.get('hash')}, wanted {key}); delete it and "
                              "its .json manifest")
    return lib, manifest


_PROBE = 'extern "C" __global__ void emu_probe(int *y) { y[threadIdx.x] = 2 * threadIdx.x + 1; }'
_probes = {}   # (compiler, flags) -> None or why the emulator does not work


def unavailable_reason():
    """None if the emulator can build and run a kernel here, else why not.

    Builds (or loads from the cache) and runs a one-line kernel, once per process
    and compiler."""
    cfg = (_build.CXX, tuple(_build.flags()))
    if cfg not in _probes:
        try:
            y = np.zeros(8, np.int32)
            RawModule(code=_PROBE).get_function("emu_probe")((1,), (8,), (y,))
            ok = np.array_equal(y, 2 * np.arange(8) + 1)
            _probes[cfg] = None if ok else f"a test kernel ran but computed {y.tolist()}"
        except Exception as e:
            _probes[cfg] = f"cannot build and run a test kernel with {_build.CXX!r}: {e}"
    return _probes[cfg]


class Function:
    """One kernel of a RawModule, callable as ``f(grid, block, args, shared_mem=0)``."""

    def __init__(self, module, name):
        self.module, self.name = module, name
        lib = module._lib
        sig = getattr(lib, f"emu_signature_{name}")
        sig.restype = ctypes.c_char_p
        codes = sig().decode().rstrip(";")
        self.param_types = tuple(codes.split(",")) if codes else ()
        self.param_names = tuple(module._params[name])
        self._launch = getattr(lib, f"emu_launch_{name}")
        self._launch.argtypes = [ctypes.POINTER(ctypes.c_longlong), ctypes.c_void_p]
        self._launch.restype = ctypes.c_int

    def __repr__(self):
        params = ", ".join(f"{t} {n}" for t, n in zip(self.param_types, self.param_names))
        return f"<emulated kernel {self.name}({params})>"

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        grid, block = _dims("grid", grid, MAX_GRID_DIM), _dims("block", block, MAX_BLOCK_DIM)
        self._check_config(grid, block, shared_mem)
        args = tuple(args)
        if len(args) != len(self.param_types):
            raise EmuArgumentError(f"{self.name} takes {len(self.param_types)} arguments "
                                   f"({', '.join(self.param_names)}), got {len(args)}")
        slots, guarded = [], {}
        for i, (arg, code) in enumerate(zip(args, self.param_types)):
            slots.append(self._marshal(i, arg, code, guarded))
        pointers = (ctypes.c_void_p * max(1, len(slots)))(*[ctypes.addressof(s) for s in slots])
        config = (ctypes.c_longlong * 10)(*grid, *block, int(shared_mem),
                                          ORDERS.index(self.module.order), self.module._next_seed(),
                                          int(not self.module.keep_stacks))
        with _launch_lock:
            status = self._launch(config, pointers)
            error = self.module._lib.emu_last_error().decode() if status else ""
        if status:
            raise EmuKernelError(f"{self.name}: {error}")
        for g in guarded.values():   # every guard first: nothing is copied back from a bad launch
            g.check()
        for g in guarded.values():
            g.copy_back()

    def _check_config(self, grid, block, shared_mem):
        threads = block[0] * block[1] * block[2]
        if threads > MAX_THREADS_PER_BLOCK:
            raise EmuLaunchError(f"{self.name}: block {block} has {threads} threads; "
                                 f"at most {MAX_THREADS_PER_BLOCK} are allowed")
        if not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
            raise EmuLaunchError(f"{self.name}: shared_mem must be a non-negative int, got {shared_mem!r}")
        if shared_mem > MAX_SHARED_BYTES:
            raise EmuLaunchError(f"{self.name}: {shared_mem} bytes of dynamic shared memory requested; "
                                 f"at most {MAX_SHARED_BYTES} (48 KiB) without an opt-in")

    def _marshal(self, i, arg, code, guarded):
        """One argument as CuPy passes it: arrays by pointer, Python int as
        int64, float as float64, bool as bool, numpy scalars as their dtype."""
        what = f"{self.name}: argument {i} ({self.param_names[i] if i < len(self.param_names) else '?'})"
        if code.endswith("*"):
            if not isinstance(arg, np.ndarray):
                raise EmuArgumentError(f"{what} is a pointer ({_ctype(code)}); got {type(arg).__name__}")
            const, elem = code.startswith("c"), code[:-1].lstrip("c")
            if elem not in ("v", "?") and _code(arg.dtype) != elem:
                raise EmuArgumentError(f"{what} is {_ctype(code)} but the array has dtype {arg.dtype}")
            if not arg.flags.c_contiguous:
                raise EmuArgumentError(f"{what}: the array is not C-contiguous")
            if not const and not arg.flags.writeable:
                raise EmuArgumentError(f"{what} is {_ctype(code)} but the array is read-only")
            return ctypes.c_void_p(self._guard(arg, what, not const, guarded).address)
        if isinstance(arg, np.ndarray):
            raise EmuArgumentError(f"{what} is a scalar ({_ctype(code)}); got an array")
        if isinstance(arg, (bool, np.bool_)):
            value = np.bool_(arg)
        elif isinstance(arg, int):
            value = np.int64(arg)
        elif isinstance(arg, float):
            value = np.float64(arg)
        elif isinstance(arg, np.generic):
            value = arg
        else:
            raise EmuArgumentError(f"{what}: cannot pass {type(arg).__name__} to a kernel")
        if _code(value.dtype) != code:
            hint = "" if isinstance(arg, np.generic) else \
                f" (a Python {type(arg).__name__} is passed as {value.dtype}, as CuPy does)"
            raise EmuArgumentError(f"{what} is {_ctype(code)} but gets {value.dtype}{hint}; "
                                   f"pass numpy.{_np_name(code)}(...)")
        return ctypes.create_string_buffer(value.tobytes(), max(8, value.nbytes))


    @staticmethod
    def _guard(arr, what, writes, guarded):
        """The guarded copy of `arr`, shared when the same array is passed twice
        (an in-place kernel then sees one buffer, as on a GPU). Overlapping arrays that the
        kernel only reads (two slices of one array) get copies of their own, which read the
        same values as the GPU's aliased pointers; an overlap with an array it writes could
        not be emulated by copies and is refused."""
        key = (arr.ctypes.data, arr.nbytes)
        if key in guarded:
            guarded[key].writes |= writes
            return guarded[key]
        for other in guarded.values():
            if (writes or other.writes) and arr.nbytes and other.arr.nbytes and \
                    np.may_share_memory(arr, other.arr):
                raise EmuArgumentError(f"{what} overlaps {other.what.split(': ')[1]} without being the same "
                                       "array; the emulator copies arguments, so pass one array or "
                                       "disjoint ones")
        guarded[key] = _Guarded(arr, what, writes)
        return guarded[key]


class _Guarded:
    """An array argument copied into a buffer with guard bytes on both sides.

    Reads past the array see 0xFF bytes (NaN); writes past it are found when
    the guards are checked after the launch, before the data is copied back."""

    def __init__(self, arr, what, writes):
        self.arr, self.what, self.writes = arr, what, writes
        n = arr.nbytes
        self.buf = np.full(n + 2 * GUARD_BYTES + 256, GUARD_FILL, dtype=np.uint8)
        start = (-self.buf.ctypes.data) % 256          # 256-byte aligned, like cudaMalloc
        self.lo = self.buf[start:start + GUARD_BYTES]
        self.data = self.buf[start + GUARD_BYTES:start + GUARD_BYTES + n]
        self.hi = self.buf[start + GUARD_BYTES + n:start + 2 * GUARD_BYTES + n]
        self.data[:] = arr.reshape(-1).view(np.uint8)
        self.address = self.data.ctypes.data

    def check(self):
        bad_lo = np.flatnonzero(self.lo != GUARD_FILL)
        bad_hi = np.flatnonzero(self.hi != GUARD_FILL)
        if bad_lo.size or bad_hi.size:
            where = []
            if bad_lo.size:
                where.append(f"{GUARD_BYTES - bad_lo[0]} bytes before its start")
            if bad_hi.size:
                where.append(f"byte {bad_hi[0]} past its end")
            raise EmuOutOfBoundsError(
                f"out-of-bounds write in {self.what}: written up to {' and '.join(where)} "
                f"(the array has {self.arr.size} x {self.arr.dtype} = {self.arr.nbytes} bytes)")

    def copy_back(self):
        if self.writes and self.arr.nbytes:
            self.arr.reshape(-1).view(np.uint8)[:] = self.data


def _dims(what, d, limits):
    if isinstance(d, (int, np.integer)):
        d = (d,)
    try:
        d = tuple(int(v) for v in d)
    except TypeError:
        raise EmuLaunchError(f"{what} must be an int or a tuple of 1-3 ints, got {d!r}") from None
    if not 1 <= len(d) <= 3:
        raise EmuLaunchError(f"{what} must have 1 to 3 dimensions, got {d}")
    d = d + (1,) * (3 - len(d))
    for v, lim, axis in zip(d, limits, "xyz"):
        if not 1 <= v <= lim:
            raise EmuLaunchError(f"{what}.{axis} = {v} is outside [1, {lim}] (CUDA rejects empty or "
                                 f"oversized launches); {what} = {d}")
    return d


def _code(dtype):
    dtype = np.dtype(dtype)
    return {"f": "f", "i": "i", "u": "u", "b": "b"}.get(dtype.kind, "x") + str(dtype.itemsize)


_C_NAMES = {"f4": "float", "f8": "double", "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
            "u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64", "b1": "bool", "v": "void"}


def _ctype(code):
    if code.endswith("*"):
        const, elem = code.startswith("c"), code[:-1].lstrip("c")
        return ("const " if const else "") + _C_NAMES.get(elem, elem) + "*"
    return _C_NAMES.get(code, code)


def _np_name(code):
    return {"b1": "bool_"}.get(code, _C_NAMES.get(code.rstrip("*"), "?"))
