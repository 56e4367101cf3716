"""A strict stand-in for CuPy, for running tapegpu's `cuda` backend in the test suite.

numpy computes underneath, but arrays are this module's own `ndarray`, which keeps CuPy's
contract where it differs from numpy's:

* no implicit host conversion: `numpy.asarray(a)` (`__array__`) raises TypeError with CuPy's
  message; `a.get()` and `cupy.asnumpy(a)` are the explicit ways. numpy arrays are refused as
  operands of ufuncs, operators and most functions (CuPy's "Unsupported type"), accepted only
  where CuPy copies them to the device (`cupy.asarray`/`array`, indices, `a[...] = host`).
* `float(a)`, `int(a)`, `bool(a)`, `a.item()`, `a.tolist()`, `repr(a)` sync with the host: they
  work, and are counted per call site (`stats`), like `.get()` and host->device copies.
* only CuPy's public names exist (names.txt, made by refresh_names.py from CuPy 13 and 14):
  a numpy-only function is an AttributeError, as on a GPU.
* results are arrays: reductions and scalar indexing give 0-d arrays, never numpy scalars.
* `cupy.linalg` never raises on singular or non-positive-definite input: `inv`/`solve` give
  NaN, `cholesky` a partial factor (LAPACK's potrf stops at the first non-positive pivot and
  leaves the rest), as cuSOLVER does without `cupyx.errstate(linalg='raise')`; `svd` of a
  matrix with NaN or inf is partly finite, as cuSOLVER's.
* `ufunc.at` and `scatter_add/max/min` exist only for CuPy's scatter ufuncs and dtypes, and
  `maximum.at`/`minimum.at` of floats skip NaN and round float64 to float32, as CuPy's
  atomicMax/atomicMin (fmaxf/fminf in a CAS loop).
* a value == 0 written by `fill` (and so by `full` and `asarray` of a 0-d host value) is a
  memset: -0.0 arrives as +0.0, as CuPy's.
* `sum` of floats adds the elements of each result in a GPU reduction's order (strided
  shares, then a tree), not numpy's, as CuPy's does: its bits differ from numpy's.
* DLPack: an array exports its "device" buffer as kDLCUDA (numpy refuses it; a host copy
  with `dl_device=(1, 0)`), and `cupy.from_dlpack` takes such capsules back without a copy.
* `linalg.solve` does not broadcast batch axes of `a` against `b`.
* out-of-range integer index arrays wrap (`a[[1, 3]]` of a length-3 array is `a[[1, 0]]`).
* `cupy.RawModule` runs the CUDA source through tapegpu's emulator
  (`tapegpu.backends.emu.RawModule`); `cupy.cuda.runtime.getDeviceCount()` is 1 unless
  `set_device_count(n)` says otherwise (arrays then remember the device current where they
  were made, and views their base's, as CuPy's do); work runs at once on every stream.
* `cupy.cuda.nccl` (nccl.py): NCCL's API as CuPy exposes it, stream-ordered. A collective's
  results land when work ordered after it needs them: the stream's next work (and, as CUDA's
  legacy default stream, the null stream's and a blocking stream's for each other), a
  synchronize, or an event recorded after it that is waited for or synchronized; until then
  its receive buffer holds 0xFF bytes (NaN), what a reader that skipped the wait would see.

`install()` puts it in `sys.modules` as `cupy`, `cupy.cuda`, `cupy.cuda.nccl`, `cupyx`,
`cupyx.scipy.special` and `cupyx.scipy.linalg`; `stats` counts host syncs and transfers per
tapegpu call site, and NCCL calls.
"""
import collections
import contextlib
import ctypes
import importlib.machinery
import math
import os
import sys
import threading
import types
import weakref

import numpy as np

from tapegpu.backends import emu

_HERE = os.path.dirname(os.path.abspath(__file__))
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))
SIM_VERSION = "14.2.0"


def _load_names():
    names = collections.defaultdict(set)
    with open(os.path.join(_HERE, "names.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                ns, name = line.split()
                names[ns].add(name)
    return names


NAMES = _load_names()


# ----------------------------------------------------------------------------- counters
class Stats:
    """Host syncs and host<->device copies, keyed by the calling site outside the stand-in
    (`path:line (function)`): `syncs[site]`, `transfers[(direction, site)]` with direction
    'd2h' or 'h2d'; NCCL calls as `nccl[(name, site)]` (e.g. 'allReduce')."""

    def __init__(self):
        self.syncs = collections.Counter()
        self.transfers = collections.Counter()
        self.nccl = collections.Counter()  # (collective, site): NCCL calls (nccl.py)

    def reset(self):
        self.syncs.clear()
        self.transfers.clear()
        self.nccl.clear()

    def sync(self):
        self.syncs[_site()] += 1

    def transfer(self, direction):
        if _pending_count[0]:  # a copy is stream-ordered: what the stream waits for lands
            _drain_launch(_Stream.current())
        site = _site()
        self.transfers[(direction, site)] += 1
        if direction == "d2h":
            self.syncs[site] += 1

    def sites(self, prefix="tapegpu"):
        """Sync sites inside `prefix` (a path prefix relative to the repository)."""
        return {s: n for s, n in self.syncs.items() if s.startswith(prefix)}


stats = Stats()
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))


def _site():
    f = sys._getframe(2)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_HERE) and not fn.startswith(_NUMPY_DIR):
            rel = os.path.relpath(fn, _ROOT) if fn.startswith(_ROOT) else fn
            return f"{rel}:{f.f_lineno} ({f.f_code.co_name})"
        f = f.f_back
    return "?"


# ----------------------------------------------------------------------------- wrapping
def _unsupported(x):
    return TypeError(f"Unsupported type {type(x)}")


def _is_scalar(x):
    return isinstance(x, (bool, int, float, complex, np.generic))


def _strict(x):
    """A device value for numpy: our arrays unwrapped; numpy arrays refused (CuPy's rule)."""
    if isinstance(x, ndarray):
        return x._a
    if isinstance(x, np.ndarray):
        raise _unsupported(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_strict(v) for v in x)
    return x


def _host_ok(x):
    """A value CuPy copies to the device (asarray, indices, setitem): numpy arrays allowed."""
    if isinstance(x, ndarray):
        return x._a
    if isinstance(x, np.ndarray):
        _refuse_h2d()
        stats.transfer("h2d")
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_host_ok(v) for v in x)
    return x


def _wrap(r):
    if isinstance(r, np.ndarray):
        return ndarray._of(r)
    if isinstance(r, np.generic):
        return ndarray._of(np.asarray(r))
    if isinstance(r, tuple) and not hasattr(r, "_fields"):
        return tuple(_wrap(v) for v in r)
    if isinstance(r, tuple) and any(isinstance(v, np.ndarray) for v in r):
        return tuple(_wrap(v) for v in r)  # numpy's named results (slogdet): CuPy's are tuples
    if isinstance(r, list):
        return [_wrap(v) for v in r]
    return r


def _wrap_index(key, shape):
    """The index with CuPy's wrap-around for integer arrays (and numpy arrays copied over)."""
    key = _host_ok(key)
    tup = key if isinstance(key, tuple) else (key,)
    out, axis = [], 0
    n_expl = sum(1 for k in tup if k is not None and k is not Ellipsis and
                 not (isinstance(k, np.ndarray) and k.dtype == np.bool_))
    n_expl += sum(k.ndim - 1 for k in tup if isinstance(k, np.ndarray) and k.dtype == np.bool_)
    for k in tup:
        if k is Ellipsis:
            out.append(k)
            axis += len(shape) - n_expl
            continue
        if k is None:
            out.append(k)
            continue
        if isinstance(k, list):
            k = np.asarray(k)
        if isinstance(k, np.ndarray) and k.dtype.kind in "iu" and axis < len(shape) and \
                shape[axis]:
            k = np.mod(k, shape[axis])
        out.append(k)
        axis += k.ndim if isinstance(k, np.ndarray) and k.dtype == np.bool_ else 1
    return tuple(out) if isinstance(key, tuple) else out[0]


class Flags:
    def __init__(self, a):
        self.c_contiguous = a.flags.c_contiguous
        self.f_contiguous = a.flags.f_contiguous
        self.owndata = a.flags.owndata

    def __getitem__(self, k):
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous,
                "OWNDATA": self.owndata}[k]


# ----------------------------------------------------------------------------- capture
class _CaptureState(threading.local):
    def __init__(self):
        self.depth = 0  # nested stand-in calls: only the outermost one is a captured launch


_cap = _CaptureState()


def _capturing():
    """The current stream if it is capturing (CuPy captures the work issued on it), else None."""
    st = _Stream.current()
    return st if st._nodes is not None else None


def _refuse_d2h():
    if _capturing() is not None:
        raise RuntimeError("the current stream is capturing, so D2H transfers are disallowed")


def _refuse_h2d():
    if _capturing() is not None:
        raise RuntimeError("the current stream is capturing, so H2D transfers are disallowed")


def _refuse_sync():
    if _capturing() is not None:
        raise _MODULES["cupy.cuda"].runtime.CUDARuntimeError(
            "cudaErrorStreamCaptureUnsupported: operation not permitted when stream is "
            "capturing")


def _arrays_in(x):
    if isinstance(x, ndarray):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _arrays_in(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _arrays_in(v)


def _captured(writes=None):
    """Records the call as a launch of the capturing stream (run again by `Graph.launch`, its
    results copied into the buffers of the captured call's results). `writes(args, kwargs)`
    names the arrays it may write in place: their contents before the capture come back at
    `end_capture` (a capture runs nothing on a GPU)."""
    def deco(fn):
        def call(*args, **kwargs):
            if _pending_count[0] and _cap.depth == 0:
                _drain_launch(_Stream.current())
            st = _capturing() if _cap.depth == 0 else None
            if st is None:
                _cap.depth += 1
                try:
                    return fn(*args, **kwargs)
                finally:
                    _cap.depth -= 1
            if writes is not None:
                for a in writes(args, kwargs):
                    st._save(a)
            _cap.depth += 1
            try:
                r = fn(*args, **kwargs)
            finally:
                _cap.depth -= 1
            st._nodes.append((fn, args, kwargs, r))
            return r
        call.__name__ = fn.__name__
        call.__wrapped__ = fn
        return call
    return deco


def _out_arg(args, kwargs):
    return list(_arrays_in(kwargs.get("out")))


def _first_arg(args, kwargs):
    return list(_arrays_in(args[:1]))


def _all_args(args, kwargs):
    return list(_arrays_in(args))


# ----------------------------------------------------------------------------- devices
class _DeviceState(threading.local):
    def __init__(self):
        self.current = 0  # cudaGetDevice of this thread (Device.use, `with Device(i)`)


_device_state = _DeviceState()
_device_count = [1]  # set_device_count
_owners = {}  # id(base numpy array) -> (weakref to it, device): only with several devices


def set_device_count(n):
    """Gives the stand-in `n` devices (1 by default): `cupy.cuda.runtime.getDeviceCount()`
    says `n`, `cupy.cuda.Device(i)` accepts i < n, and arrays remember their device. Returns
    the previous count."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"cupy_sim.set_device_count: n must be a positive int, got {n!r}")
    old = _device_count[0]
    _device_count[0] = n
    if n == 1:
        _owners.clear()
        _device_state.current = 0
    return old


def _root(a):
    """The numpy array that owns `a`'s memory (`a` itself, or the base its views lead to)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _note_device(a):
    """Records the current device as the device of `a`'s memory, if `a` owns it (an entry
    left by an array that is gone, whose id `a` reuses, is replaced)."""
    entry = _owners.get(id(a))
    if a.base is None and (entry is None or entry[0]() is not a):
        if len(_owners) > 4096:  # forget the arrays that are gone
            for k in [k for k, (r, _) in _owners.items() if r() is None]:
                del _owners[k]
        _owners[id(a)] = (weakref.ref(a), _device_state.current)


def _device_of(a):
    """The device of a numpy array's memory (0 with one device)."""
    if _device_count[0] == 1:
        return 0
    root = _root(a)
    entry = _owners.get(id(root))
    return entry[1] if entry is not None and entry[0]() is root else _device_state.current


# device pointers handed out by `.data` (MemoryPointer): NCCL's calls take raw pointers
_pointers = {}  # ptr -> (weakref to the owning numpy array, its address, device)


def _remember_pointer(a, ptr, device):
    root = _root(a)
    if not (root.flags.c_contiguous or root.flags.f_contiguous):
        return
    if len(_pointers) > 4096:
        for k in [k for k, (r, _, _) in _pointers.items() if r() is None]:
            del _pointers[k]
    _pointers[ptr] = (weakref.ref(root), root.ctypes.data, device)


def _memory(ptr, nbytes, what):
    """(uint8 numpy view of the `nbytes` device bytes at `ptr`, device): `ptr` must come from
    a live array's `.data.ptr` (as CUDA needs a live allocation)."""
    entry = _pointers.get(ptr)
    root = entry[0]() if entry is not None else None
    if root is None:
        raise ValueError(f"cupy_sim: {what} was given the pointer {ptr:#x}, which no live "
                         "cupy array's .data.ptr gave (on a GPU: an illegal address)")
    flat = root.ravel(order="K").view(np.uint8)
    start = ptr - entry[1]
    if start + nbytes > flat.size:
        raise ValueError(f"cupy_sim: {what} reads or writes {nbytes} bytes at {ptr:#x}, past "
                         f"the end of its allocation ({flat.size - start} bytes left)")
    return flat[start:start + nbytes], entry[2]


class MemoryPointer:
    def __init__(self, a):
        self.ptr = a.ctypes.data
        self.device_id = _device_of(a)
        self._a = a
        _remember_pointer(a, self.ptr, self.device_id)

    def _bytes(self, size):
        base = self._a.reshape(-1).view(np.uint8) if self._a.flags.c_contiguous else None
        if base is None or size > base.size:
            raise ValueError(f"cupy_sim: a copy of {size} bytes from a pointer into "
                             f"{self._a.nbytes} contiguous bytes")
        return base[:size]

    @_captured(lambda args, kwargs: [types.SimpleNamespace(_a=args[0]._a)])
    def copy_from_device_async(self, src, size, stream=None):
        """cudaMemcpyAsync device to device (a copy, not a kernel; allowed while capturing)."""
        if stream is not None and _pending_count[0]:
            _drain_launch(stream)
        if not isinstance(src, MemoryPointer):
            raise TypeError(f"src must be a cupy.cuda.MemoryPointer, not {type(src).__name__}")
        self._bytes(size)[...] = src._bytes(size)

    def copy_from_device(self, src, size):
        _refuse_sync()  # a synchronous copy: refused while capturing, as CuPy does
        self.copy_from_device_async(src, size)


# ----------------------------------------------------------------------------- ndarray
class ndarray:
    """CuPy's ndarray on a numpy buffer (`_a`). Construct as CuPy does:
    `ndarray(shape, dtype=float, memptr=None, strides=None, order='C')`."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        self._a = np.empty(shape, dtype, order=order)
        if _device_count[0] > 1:
            _note_device(self._a)

    @classmethod
    def _of(cls, a):
        obj = cls.__new__(cls)
        obj._a = a
        if _device_count[0] > 1:
            _note_device(a)
        st = _capturing()
        if st is not None and a.flags.owndata:
            st._allocated(obj)
        return obj

    # CuPy refuses implicit conversion to numpy
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use "
                        "`.get()` to construct a NumPy array explicitly.")

    def __array_ufunc__(self, uf, method, *inputs, **kwargs):
        func = _MODULES["cupy"].__dict__.get(uf.__name__) or \
            _MODULES["cupyx.scipy.special"].__dict__.get(uf.__name__)
        if func is None:
            return NotImplemented
        if "out" in kwargs:
            kwargs["out"] = kwargs["out"][0]
        if method != "__call__":
            func = getattr(func, method, None)
            if func is None:
                return NotImplemented
        return func(*inputs, **kwargs)

    def __array_function__(self, func, types_, args, kwargs):
        ns = func.__module__.split(".")
        ns = "cupy" + "".join("." + p for p in ns[1:] if p in ("linalg", "fft", "random"))
        mod = _MODULES.get(ns)
        ours = getattr(mod, func.__name__, None) if mod is not None else None
        if ours is None:
            return NotImplemented
        return ours(*args, **kwargs)

    # explicit transfers and syncs
    def get(self, stream=None, order="C", out=None, blocking=True):
        _refuse_d2h()
        stats.transfer("d2h")
        if out is not None:
            out[...] = self._a
            return out
        return np.array(self._a, order=order, copy=True)

    def set(self, arr, stream=None):
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"Only numpy.ndarray can be set to cupy.ndarray, got {type(arr)}")
        _refuse_h2d()
        stats.transfer("h2d")
        self._a[...] = arr

    def item(self):
        _refuse_d2h()
        stats.transfer("d2h")
        return self._a.item()

    def tolist(self):
        _refuse_d2h()
        stats.transfer("d2h")
        return self._a.tolist()

    def tobytes(self, order="C"):
        _refuse_d2h()
        stats.transfer("d2h")
        return self._a.tobytes(order)

    def _scalar(self, conv):
        if self._a.size != 1:
            raise TypeError("only length-1 arrays can be converted to Python scalars")
        _refuse_d2h()
        stats.transfer("d2h")
        return conv(self._a.reshape(()).item())

    def __float__(self):
        return self._scalar(float)

    def __int__(self):
        return self._scalar(int)

    def __complex__(self):
        return self._scalar(complex)

    def __bool__(self):
        if self._a.size == 0:
            return False
        if self._a.size > 1:
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous. Use a.any() or a.all()")
        return self._scalar(bool)

    def __repr__(self):
        stats.transfer("d2h")
        return repr(self._a)

    def __str__(self):
        stats.transfer("d2h")
        return str(self._a)

    def __format__(self, spec):
        stats.transfer("d2h")
        return format(self._a if self._a.ndim else self._a.item(), spec)

    # attributes
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    strides = property(lambda self: self._a.strides)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    T = property(lambda self: ndarray._of(self._a.T))
    flags = property(lambda self: Flags(self._a))
    data = property(lambda self: MemoryPointer(self._a))
    device = property(lambda self: _Device(_device_of(self._a)))
    base = property(lambda self: None if self._a.base is None else
                    ndarray._of(self._a.base) if isinstance(self._a.base, np.ndarray) else None)

    @property
    def real(self):
        return ndarray._of(self._a.real)

    @property
    def imag(self):
        return ndarray._of(self._a.imag)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "descr": self.dtype.descr,
                "data": (self._a.ctypes.data, False), "version": 3,
                "strides": None if self._a.flags.c_contiguous else self.strides}

    def __len__(self):
        if self._a.ndim == 0:
            raise TypeError("len() of unsized object")
        return len(self._a)

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self._a.shape[0]))

    def __getitem__(self, key):
        k = key if isinstance(key, tuple) else (key,)
        if all(v is None or v is Ellipsis or isinstance(v, slice) or
               (isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)))
               for v in k):  # basic indexing: a view, as CuPy's (0-d for a single element)
            return ndarray._of(self._a[k if any(v is Ellipsis for v in k) else k + (...,)])
        return self._gather(key)

    @_captured()
    def _gather(self, key):
        return _wrap(self._a[_wrap_index(key, self._a.shape)])

    @_captured(_first_arg)
    def __setitem__(self, key, value):
        self._a[_wrap_index(key, self._a.shape)] = _host_ok(value)

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        raise TypeError("cupy_sim arrays are not pickled (CuPy pickles through the host: "
                        "use .get())")

    __hash__ = None

    @_captured()
    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        return ndarray._of(self._a.astype(dtype, order=order, copy=copy))

    def reshape(self, *shape, order="C", copy=None):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return ndarray._of(self._a.reshape(shape, order=order))

    @_captured()
    def ptp(self, axis=None, out=None, keepdims=False):
        return _wrap(np.ptp(self._a, axis=axis, keepdims=keepdims))

    def take(self, indices, axis=None, out=None):
        return _MODULES["cupy"].take(self, indices, axis=axis, out=out)

    @_captured(_first_arg)
    def put(self, indices, values, mode="wrap"):
        np.put(self._a, _host_ok(indices), _strict(values), mode="wrap")

    @_captured(_first_arg)
    def scatter_add(self, slices, value):
        _scatter(self, slices, value, "add")

    @_captured(_first_arg)
    def scatter_max(self, slices, value):
        _scatter(self, slices, value, "maximum")

    @_captured(_first_arg)
    def scatter_min(self, slices, value):
        _scatter(self, slices, value, "minimum")

    @_captured(_first_arg)
    def fill(self, value):
        _fill_value(self._a, value)

    def toDlpack(self):
        return _device_capsule(self)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device is None or tuple(dl_device) == self.__dlpack_device__():  # its buffer
            if copy is True:
                raise BufferError("copy=True only supported for copy to CPU.")
            return _device_capsule(self, max_version)
        if tuple(dl_device) == (1, 0):  # a host copy, as CuPy's CPU export
            if copy is False:
                raise ValueError("GPU memory cannot be exported to CPU without copy.")
            stats.transfer("d2h")
            return self._a.copy().__dlpack__(
                **({"max_version": max_version} if max_version is not None else {}))
        raise BufferError("unsupported device requested.")

    def __dlpack_device__(self):
        return (2, _device_of(self._a))  # kDLCUDA, the array's GPU


def _method(name):
    @_captured(_out_arg)
    def m(self, *args, **kwargs):
        return _wrap(getattr(self._a, name)(*_strict(args),
                                            **{k: _strict(v) for k, v in kwargs.items()}))
    m.__name__ = name
    return m


for _name in NAMES["cupy.ndarray"]:
    if not _name.startswith("_") and _name not in ndarray.__dict__ and \
            hasattr(np.ndarray, _name):
        setattr(ndarray, _name, _method(_name))


# operators: through the module's ufuncs, so CuPy's operand rules apply
def _operand_ok(other):
    return isinstance(other, (ndarray, np.ndarray)) or _is_scalar(other)


def _binop(ufname, reflected=False, inplace=False):
    def op(self, other):
        if not _operand_ok(other):
            if getattr(other, "__array_priority__", -1) > ndarray.__array_priority__ or \
                    hasattr(type(other), "__array_ufunc__") and other.__array_ufunc__ is None:
                return NotImplemented
            if isinstance(other, (list, tuple)) or not hasattr(other, "__array__"):
                return NotImplemented
            raise _unsupported(other)
        uf = _MODULES["cupy"].__dict__[ufname]
        if inplace:
            return uf(self, other, out=self)
        return uf(other, self) if reflected else uf(self, other)
    return op


for _op, _uf in [("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                 ("truediv", "true_divide"), ("floordiv", "floor_divide"),
                 ("mod", "remainder"), ("pow", "power"), ("matmul", "matmul"),
                 ("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor"),
                 ("lshift", "left_shift"), ("rshift", "right_shift")]:
    setattr(ndarray, f"__{_op}__", _binop(_uf))
    setattr(ndarray, f"__r{_op}__", _binop(_uf, reflected=True))
    setattr(ndarray, f"__i{_op}__", _binop(_uf, inplace=True))
for _op, _uf in [("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
                 ("ge", "greater_equal"), ("eq", "equal"), ("ne", "not_equal")]:
    setattr(ndarray, f"__{_op}__", _binop(_uf))
for _op, _uf in [("neg", "negative"), ("pos", "positive"), ("abs", "absolute"),
                 ("invert", "invert")]:
    setattr(ndarray, f"__{_op}__", (lambda u: lambda self: _MODULES["cupy"].__dict__[u](self))(_uf))


# ----------------------------------------------------------------------------- fill, DLPack
def _fill_value(a, value):
    """CuPy's ndarray.fill: a value == 0 (-0.0 too) is a memset of zero bytes, so -0.0 becomes
    +0.0; cupy.asarray of a 0-d host value and cupy.full go through it."""
    v = np.asarray(_strict(value)).astype(a.dtype)
    if v.shape != ():
        raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
    if a.dtype.kind != "V" and v == 0 and a.flags.c_contiguous:
        a.reshape(-1).view(np.uint8)[...] = 0  # contiguous: reshape is a view
    else:
        a[...] = v


@_captured()
def full(shape, fill_value, dtype=None, order="C"):
    dt = np.asarray(_strict(fill_value)).dtype if dtype is None else dtype
    a = np.empty(shape, dtype=dt, order=order)
    _fill_value(a, fill_value)
    return _wrap(a)


@_captured()
def full_like(a, fill_value, dtype=None, order="K", subok=None, shape=None):
    _assert_device(a)
    out = np.empty_like(a._a, dtype=dtype, order=order, shape=shape)
    _fill_value(out, fill_value)
    return _wrap(out)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


def _device_capsule(a, max_version=None):
    """A legacy DLPack capsule of `a` that says kDLCUDA, as CuPy's export of its device buffer:
    a host consumer (numpy) refuses it ("Unsupported device in DLTensor"), `cupy.from_dlpack`
    takes it back. The structs live as long as the array."""
    x = a._a
    shape = (ctypes.c_int64 * max(x.ndim, 1))(*x.shape)
    strides = (ctypes.c_int64 * max(x.ndim, 1))(*[s // x.itemsize for s in x.strides])
    dl = _DLTensor(x.ctypes.data, _DLDevice(2, _device_of(x)), x.ndim, _DL_CODES[x.dtype.kind],
                   x.itemsize * 8, 1, shape, strides, 0)
    versioned = max_version is not None and max_version[0] >= 1
    t = _DLManagedTensorVersioned(1, 0, None, None, 0, dl) if versioned else \
        _DLManagedTensor(dl, None, None)
    view = ndarray._of(x)  # what cupy.from_dlpack gives back: the same buffer
    if id(a) not in _KEEP:
        _KEEP[id(a)] = []
        weakref.finalize(a, _KEEP.pop, id(a), None)
    _KEEP[id(a)].append((t, shape, strides, view))
    _EXPORTS[ctypes.addressof(t)] = view
    name = b"dltensor_versioned" if versioned else b"dltensor"
    return _capsule_new(ctypes.addressof(t), name, None)


def _from_device_capsule(capsule):
    """The array a `_device_capsule` exports (its buffer, no copy), None for another capsule."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    for name in (b"dltensor", b"dltensor_versioned"):
        try:
            return _EXPORTS.get(get(capsule, name))
        except ValueError:  # the other name
            pass
    return None


_EXPORTS = weakref.WeakValueDictionary()  # DLManagedTensor address -> exported array
_KEEP = {}  # id(array) -> its exports' structs, alive as long as the array


@_captured()
def from_dlpack(array, *, device=None, copy=None):
    """CuPy's: a capsule or a producer of device memory, taken without a copy; host memory
    (a producer on the CPU) copied to the device."""
    if type(array).__name__ == "PyCapsule":
        got = _from_device_capsule(array)
        if got is None:
            raise BufferError("the stand-in takes back only its own device capsules")
        return got
    if array.__dlpack_device__()[0] == 2:
        return from_dlpack(array.__dlpack__(stream=None))
    stats.transfer("h2d")
    return _wrap(np.array(np.from_dlpack(array), copy=True))


# ----------------------------------------------------------------------------- scatters
# CuPy's ufunc.at and scatter_add/max/min (cupy/_core/_routines_indexing.pyx, _scatter_op):
# only these ufuncs, each with its atomic's dtypes (TypeError otherwise); the values are cast to
# the target's dtype first. The float atomicMax / atomicMin of cupy/_core/include/cupy/
# atomics.cuh are CAS loops over fmaxf / fminf: NaN is skipped (C's fmax), and a float64 target
# gets the float32-rounded result at every write (fmaxf of two doubles computes in float).
_I = (np.int32, np.int64, np.uint32, np.uint64)
_SCATTER_OPS = {"add": ("add", _I + (np.float16, np.float32, np.float64)),
                "subtract": ("sub", (np.int32, np.uint32)),
                "maximum": ("max", _I + (np.float32, np.float64)),
                "minimum": ("min", _I + (np.float32, np.float64)),
                "bitwise_and": ("and", _I), "bitwise_or": ("or", _I), "bitwise_xor": ("xor", _I)}
_SCATTER_NP = {"add": np.add, "sub": np.subtract, "max": np.maximum, "min": np.minimum,
               "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _scatter(a, indices, value, ufname):
    op, dtypes = _SCATTER_OPS[ufname]
    if a.dtype.type not in dtypes:
        raise TypeError(f"cupy.{ufname}.at only supports "
                        f"{', '.join(np.dtype(d).name for d in dtypes)} as data type")
    idx = _wrap_index(indices, a.shape)
    v = np.asarray(_strict(value)).astype(a.dtype, copy=False)
    if op in ("max", "min") and a.dtype.kind == "f":
        with np.errstate(over="ignore"):  # float64's extremes are float32's infinities
            work = a._a.astype(np.float32)
        touched = np.zeros(a.shape, dtype=bool)
        touched[idx] = True
        (np.fmax if op == "max" else np.fmin).at(work, idx, v.astype(np.float32))
        a._a[touched] = work[touched]
    else:
        _SCATTER_NP[op].at(a._a, idx, v)


# ----------------------------------------------------------------------------- ufuncs
class ufunc:
    """CuPy's ufunc: device arrays and scalars only."""

    def __init__(self, npu, name=None):
        self._u = npu
        self.__name__ = name or npu.__name__
        self.nin, self.nout, self.nargs = npu.nin, npu.nout, npu.nargs
        self.types = npu.types

    def __repr__(self):
        return f"<ufunc '{self.__name__}'>"

    @_captured(lambda args, kwargs: list(_arrays_in(args[3].get("out"))))
    def _call(self, fn, args, kwargs):
        for a in args:
            if not (isinstance(a, ndarray) or _is_scalar(a)):
                raise _unsupported(a)
        out = kwargs.pop("out", None)
        if isinstance(out, tuple):
            out = out[0] if len(out) == 1 else out
        if out is not None:
            if not isinstance(out, ndarray):
                raise TypeError("Output arguments must be cupy.ndarray")
            fn(*_strict(args), out=out._a, **kwargs)
            return out
        return _wrap(fn(*_strict(args), **kwargs))

    def __call__(self, *args, **kwargs):
        return self._call(self._u, args, kwargs)

    def reduce(self, *args, **kwargs):
        return self._call(self._u.reduce, args[:1], dict(kwargs, **dict(
            zip(("axis", "dtype", "out", "keepdims"), args[1:]))))

    def accumulate(self, *args, **kwargs):
        return self._call(self._u.accumulate, args[:1], dict(kwargs, **dict(
            zip(("axis", "dtype", "out"), args[1:]))))

    def outer(self, a, b, **kwargs):
        return self._call(self._u.outer, (a, b), kwargs)

    @_captured(lambda args, kwargs: list(_arrays_in(args[1:2])))
    def at(self, a, indices, b=None):
        if not isinstance(a, ndarray):
            raise _unsupported(a)
        if self.__name__ not in _SCATTER_OPS:  # CuPy's: only the ufuncs with a scatter kernel
            raise NotImplementedError(f"`cupy_{self.__name__}.at` is not supported yet")
        _scatter(a, indices, b, self.__name__)


# ----------------------------------------------------------------------------- functions
_HOST_OK = {"array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray"}
_ARRAY_RESULT = {"allclose", "array_equal", "array_equiv", "count_nonzero"}


def _function(npf, name):
    if name in _HOST_OK:
        def f(*args, **kwargs):
            if args and isinstance(args[0], ndarray) and name != "array" and \
                    np.dtype(kwargs.get("dtype") or args[0].dtype) == args[0].dtype and \
                    _keeps(args[0], {"ascontiguousarray": "C", "asfortranarray": "F"}.get(
                        name, kwargs.get("order"))):
                return args[0]  # CuPy's asarray returns the array itself
            r = np.array(npf(*_host_ok(args), **_host_ok(kwargs)), copy=name == "array"
                         or None, order="K")
            if r.ndim == 0 and not (args and isinstance(args[0], ndarray)):
                r = r.copy()
                _fill_value(r, r[()])  # CuPy uploads a 0-d host value with ndarray.fill
            return _wrap(r)
    else:
        def f(*args, **kwargs):
            out = kwargs.get("out")
            if out is not None:
                if not isinstance(out, ndarray):
                    raise TypeError("Output arguments must be cupy.ndarray")
                kwargs["out"] = out._a
            r = npf(*_strict(args), **{k: _strict(v) for k, v in kwargs.items()})
            if out is not None:
                return out
            if name in _ARRAY_RESULT and not isinstance(r, np.ndarray):
                r = np.asarray(r)
            return _wrap(r)
    f = _captured(_out_arg)(f)
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = getattr(npf, "__doc__", None)
    return f


def _keeps(a, order):
    if order in (None, "K", "A"):
        return True
    return a._a.flags.c_contiguous if order == "C" else a._a.flags.f_contiguous


def asnumpy(a, stream=None, order="C", out=None, blocking=True):
    if isinstance(a, ndarray):
        return a.get(stream=stream, order=order, out=out, blocking=blocking)
    r = np.asarray(a, order=order)
    if out is not None:
        out[...] = r
        return out
    return r


@_captured(_out_arg)
def take(a, indices, axis=None, out=None):
    if not isinstance(a, ndarray):
        raise _unsupported(a)
    idx = _host_ok(indices)
    n = a._a.size if axis is None else a._a.shape[axis]
    if isinstance(idx, (np.ndarray, int, np.integer)) and n:
        idx = np.mod(idx, n)
    r = np.take(a._a, idx, axis=axis)
    if out is not None:
        out._a[...] = r
        return out
    return _wrap(r)


def _mean_dtype_check(dtype):
    # CuPy's mean has loops ?,b..Q -> d, e->e, f->f, d->d, F->F, D->D only: an integer dtype=
    # finds none ("Wrong type ... for cupy_mean")
    if dtype is not None and np.dtype(dtype).kind in "biu":
        raise TypeError(f"Wrong type ({np.dtype(dtype)}) of arguments for cupy_mean")


@_captured(_out_arg)
def mean(a, axis=None, dtype=None, out=None, keepdims=False):
    _mean_dtype_check(dtype)
    return _function(np.mean, "mean")(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims)


def _block_order_sum(x, axis, keepdims):
    """numpy's sum of a float array, its reduced elements added as a GPU reduction adds them:
    CuPy gives each result to a block whose threads each add a strided share of the elements,
    then combine their shares in a tree. So not numpy's order (the rows in order, over leading
    axes): here four shares, strided, summed then added pairwise (a reduction of two elements
    or fewer is the same either way)."""
    axes = tuple(range(x.ndim)) if axis is None else \
        tuple(sorted(a % x.ndim for a in ((axis,) if np.ndim(axis) == 0 else axis)))
    n = math.prod(x.shape[a] for a in axes)
    if n <= 2:
        return np.sum(x, axis=axes, keepdims=keepdims)
    kept = [a for a in range(x.ndim) if a not in axes]
    flat = np.transpose(x, kept + list(axes)).reshape([x.shape[a] for a in kept] + [n])
    shares = [np.add.reduce(flat[..., j::4], axis=-1) for j in range(min(4, n))]
    while len(shares) > 1:
        shares = [shares[i] + shares[i + 1] if i + 1 < len(shares) else shares[i]
                  for i in range(0, len(shares), 2)]
    r = shares[0]
    if keepdims:
        r = r.reshape([1 if a in axes else x.shape[a] for a in range(x.ndim)])
    return np.asarray(r, dtype=x.dtype)


@_captured(_out_arg)
def _sum(a, axis=None, dtype=None, out=None, keepdims=False):   # cupy.sum
    if isinstance(a, ndarray) and a._a.dtype.kind == "f" and dtype is None and out is None \
            and a._a.size:
        return _wrap(_block_order_sum(a._a, axis, keepdims))
    return _function(np.sum, "sum")(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims)


def _ndarray_sum(self, axis=None, dtype=None, out=None, keepdims=False):
    return _sum(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)


ndarray.sum = _ndarray_sum


def _ndarray_mean(self, axis=None, dtype=None, out=None, keepdims=False):
    return mean(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)


ndarray.mean = _ndarray_mean


def get_array_module(*args):
    for a in args:
        if isinstance(a, ndarray):
            return _MODULES["cupy"]
    return np


class _Pool:
    def used_bytes(self):
        return 0

    def total_bytes(self):
        return 0

    def free_all_blocks(self):
        pass

    def n_free_blocks(self):
        return 0


_POOL = _Pool()


# ----------------------------------------------------------------------------- linalg
LinAlgError = np.linalg.LinAlgError


def _assert_device(*arrays):
    for a in arrays:
        if not isinstance(a, ndarray):
            raise _unsupported(a)


def _per_matrix(fn, a, out_shape, fallback):
    """fn over the matrices of a; where numpy raises LinAlgError, `fallback(matrix)`."""
    try:
        return fn(a)
    except LinAlgError:
        pass
    flat = a.reshape((-1,) + a.shape[-2:])
    outs = []
    for i in range(flat.shape[0]):
        try:
            outs.append(fn(flat[i]))
        except LinAlgError:
            outs.append(fallback(flat[i]))
    return np.stack(outs).reshape(out_shape) if outs else np.empty(out_shape, a.dtype)


def _float_type(a):
    return a.dtype if a.dtype.kind in "fc" else np.dtype(np.float64)


@_captured(_out_arg)
def inv(a):
    _assert_device(a)
    x = a._a
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise LinAlgError(f"{x.ndim}-dimensional array given. Array must be at least "
                          "two-dimensional and square")
    dt = _float_type(x)
    return _wrap(_per_matrix(np.linalg.inv, x, x.shape,
                             lambda m: np.full(m.shape, np.nan, dt)).astype(dt, copy=False))


@_captured(_out_arg)
def solve(a, b):
    _assert_device(a, b)
    x, y = a._a, b._a
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise LinAlgError(f"{x.ndim}-dimensional array given. Array must be at least "
                          "two-dimensional and square")
    if y.ndim == 0:
        raise ValueError("b must have at least one dimension")
    if y.ndim == 1:
        if x.shape[-1] != y.size:
            raise ValueError("a must have (..., M, M) shape and b must have (M,) for "
                             "one-dimensional b")
        y = np.broadcast_to(y, x.shape[:-1])
    elif x.shape[:-1] != y.shape[:-1]:
        raise ValueError("a must have (..., M, M) shape and b must have (..., M, K) for "
                         "multidimensional b")
    dt = np.result_type(_float_type(x), _float_type(y))
    vec = y.ndim == x.ndim - 1
    yy = y[..., None] if vec else y
    out = np.empty(yy.shape, dt)
    fx = x.reshape((-1,) + x.shape[-2:])
    fy = yy.reshape((-1,) + yy.shape[-2:])
    fo = out.reshape((-1,) + yy.shape[-2:])
    for i in range(fx.shape[0]):
        try:
            fo[i] = np.linalg.solve(fx[i], fy[i])
        except LinAlgError:
            fo[i] = np.nan
    return _wrap(out[..., 0] if vec else out)


def _potrf(m):
    """LAPACK's unblocked Cholesky: at a non-positive (or NaN) pivot it stores the pivot and
    stops, leaving the columns after it as they were in the input."""
    n = m.shape[0]
    L = np.tril(m).astype(m.dtype, copy=True)
    for j in range(n):
        ajj = m[j, j] - L[j, :j] @ L[j, :j]
        if not ajj > 0:
            L[j, j] = ajj
            break
        L[j, j] = np.sqrt(ajj)
        L[j + 1:, j] = (m[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return L


@_captured(_out_arg)
def cholesky(a):
    _assert_device(a)
    x = a._a
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise LinAlgError(f"{x.ndim}-dimensional array given. Array must be at least "
                          "two-dimensional and square")
    return _wrap(_per_matrix(np.linalg.cholesky, x, x.shape, _potrf))


@_captured(_out_arg)
def svd(a, full_matrices=True, compute_uv=True):
    """cuSOLVER's SVD returns without an error for a matrix with NaN or inf, partly finite (an
    H200 gave s = [nan, 0.61, 0.51] for a 3x3 matrix with one NaN): here, the SVD of the
    matrix with those entries zeroed, NaN for the first singular value and vectors."""
    _assert_device(a)
    x = a._a
    bad = ~np.isfinite(x).all(axis=(-2, -1))
    out = np.linalg.svd(np.where(bad[..., None, None], np.where(np.isfinite(x), x, 0), x),
                        full_matrices=full_matrices, compute_uv=compute_uv)
    if bad.any():
        if compute_uv:
            out[0][bad, :, 0] = np.nan
            out[1][bad, 0] = np.nan
            out[2][bad, 0, :] = np.nan
        else:
            out[bad, 0] = np.nan
    return _wrap(tuple(out) if compute_uv else out)


@_captured()
def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=False):
    _assert_device(a, b)
    m = np.tril(a._a) if lower else np.triu(a._a)
    if unit_diagonal:
        m = m.copy()
        np.fill_diagonal(m, 1)
    if trans in (1, "T"):
        m = m.T
    elif trans in (2, "C"):
        m = m.conj().T
    with np.errstate(all="ignore"):
        try:
            return _wrap(np.linalg.solve(m, b._a))
        except LinAlgError:
            return _wrap(np.full(b.shape, np.nan, np.result_type(m, b._a)))


# ----------------------------------------------------------------------------- special
def _special(name, fn):
    vec = np.vectorize(fn, otypes=[np.float64])

    @_captured(_out_arg)
    def f(x, out=None):
        if not (isinstance(x, ndarray) or _is_scalar(x)):
            raise _unsupported(x)
        a = _strict(x)
        a = np.asarray(a)
        # CuPy's special ufuncs have float32 and float64 loops: float16 computes in float32
        dt = np.float32 if a.dtype in (np.float16, np.float32) else np.float64
        r = vec(a).astype(dt) if a.size else np.empty(a.shape, dt)
        if out is not None:
            out._a[...] = r
            return out
        return _wrap(r)
    f.__name__ = name
    return f


_SPECIALS = {"erf": math.erf, "erfc": math.erfc, "gammaln": math.lgamma,
             "gamma": math.gamma}


# ----------------------------------------------------------------------------- random
class _RandomProxy:
    """numpy's Generator/RandomState with device results."""

    def __init__(self, gen):
        self._g = gen

    def __getattr__(self, name):
        attr = getattr(self._g, name)
        if not callable(attr):
            return attr

        def f(*args, **kwargs):
            return _wrap(attr(*_strict(args), **{k: _strict(v) for k, v in kwargs.items()}))
        return f


def _random_module():
    m = types.ModuleType("cupy.random")
    state = [np.random.RandomState(0)]
    for name in NAMES["cupy.random"]:
        if name in ("default_rng",):
            setattr(m, name, lambda seed=None: _RandomProxy(np.random.default_rng(seed)))
        elif name == "RandomState":
            setattr(m, name, lambda seed=None, method=None: _RandomProxy(
                np.random.RandomState(seed)))
        elif name == "seed":
            setattr(m, name, lambda seed=None: state.__setitem__(0, np.random.RandomState(seed)))
        elif name == "get_random_state":
            setattr(m, name, lambda: _RandomProxy(state[0]))
        elif hasattr(np.random.RandomState, name):
            setattr(m, name, (lambda n: lambda *a, **k: _wrap(getattr(state[0], n)(
                *_strict(a), **{kk: _strict(v) for kk, v in k.items()})))(name))
    return m


# ----------------------------------------------------------------------------- cuda
class _Device:
    def __init__(self, device=None):
        self.id = _device_state.current if device is None else int(device)
        if not 0 <= self.id < _device_count[0]:
            raise RuntimeError(f"CUDARuntimeError: cudaErrorInvalidDevice: invalid device "
                               f"ordinal {self.id}")
        self._previous = []

    def __enter__(self):
        self._previous.append(_device_state.current)
        _device_state.current = self.id
        return self

    def __exit__(self, *exc):
        _device_state.current = self._previous.pop()
        return False

    def use(self):
        _device_state.current = self.id

    def synchronize(self):
        _refuse_sync()
        stats.sync()
        _drain_all(self.id)

    compute_capability = "80"

    def __eq__(self, other):
        return isinstance(other, _Device) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


_streams = {}  # ptr -> weakref to the stream (the null stream itself)


class _Stream:
    """cupy.cuda.Stream: work runs at once here, so a stream only keeps CuPy's bookkeeping:
    `with stream:` (or `use()`) makes it the calling thread's current stream, as in CuPy.

    Capture (`begin_capture`, `end_capture` -> `cupy.cuda.Graph`, `Graph.launch`) keeps CuPy's
    rules: not on the null stream, one capture at a time, no host transfer or synchronisation
    while capturing (CuPy's RuntimeError / CUDARuntimeError), and a graph launch reads and
    writes the buffers of the capture, which must still be allocated (an array of the capture
    freed from the default pool is an error at launch: on a GPU its memory may be another
    array's by then; arrays allocated through `cupy.cuda.using_allocator(pool.malloc)` live as
    long as `pool`). numpy computes underneath, so the captured work runs while it is
    captured; `end_capture` undoes that as far as a caller can see: arrays that existed before
    the capture get their contents back and arrays it allocated are filled with NaN (0xFF
    bytes), what a GPU's capture, which runs nothing, leaves there."""
    null = None
    _current = threading.local()
    _count = 0

    def __init__(self, null=False, non_blocking=False, ptds=False):
        _Stream._count += 1
        self.ptr = 0 if null else 0x1000 + _Stream._count
        self.waited = collections.deque(maxlen=1024)  # the last events waited for (tests)
        self._nodes = None
        self.non_blocking = bool(non_blocking)
        self.device_id = _device_state.current
        self._pending = []  # NCCL collectives not landed yet, in issue order (nccl.py)
        self._issued = 0  # NCCL collectives issued on this stream so far (events' positions)
        _streams[self.ptr] = self if null else weakref.ref(self)

    # capture
    def begin_capture(self, mode=None):
        if self.ptr in (0, 1):
            raise RuntimeError("cannot capture on the default (legacy) stream")
        if self._nodes is not None:
            raise _MODULES["cupy.cuda"].runtime.CUDARuntimeError(
                "cudaErrorIllegalState: operation would make the legacy stream depend on a "
                "capturing blocking stream")
        self._nodes, self._saved, self._allocs = [], {}, []

    def is_capturing(self):
        return self._nodes is not None

    def end_capture(self):
        if self._nodes is None:
            raise _MODULES["cupy.cuda"].runtime.CUDARuntimeError(
                "cudaErrorIllegalState: operation not permitted when stream is not capturing")
        nodes, saved, allocs = self._nodes, self._saved, self._allocs
        self._nodes = self._saved = self._allocs = None
        for a, before in saved.values():
            a[...] = before
        for ref in allocs:
            a = ref()
            if a is not None and a.size:  # 0xFF bytes: NaN in every float type
                a[...] = _poison(a.dtype)
        return Graph._of([_weak_node(n) for n in nodes])

    def _save(self, arr):
        a = arr._a
        if id(a) not in self._saved and not any(r() is a for r in self._allocs):
            self._saved[id(a)] = (a, a.copy())

    def _allocated(self, obj):
        self._allocs.append(weakref.ref(obj._a))
        pool = _allocator.pool
        if pool is not None:
            pool._held.append(obj._a)

    def __enter__(self):
        stack = _Stream._stack()
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _Stream._stack().pop()
        return False

    @staticmethod
    def _stack():
        stack = getattr(_Stream._current, "stack", None)
        if stack is None:
            stack = _Stream._current.stack = []
        return stack

    @staticmethod
    def current():
        stack = _Stream._stack()
        return stack[-1] if stack else _Stream.null

    def use(self):
        stack = _Stream._stack()
        stack[:] = [self]
        return self

    def record(self, event=None):
        event = _Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event):
        """Work issued on this stream from now on runs after what `event` recorded: here, the
        collectives before the event land now (a GPU would not block the host)."""
        self.waited.append(event)
        if event.stream is not None and event.stream is not self:
            _drain(event.stream, event._position)

    @property
    def done(self):
        return _test(self)

    def synchronize(self):
        _refuse_sync()
        stats.sync()
        _drain(self)


_Stream.null = _Stream(null=True)


# -- stream order of the collectives that nccl.py issues ---------------------------------------
_pending_count = [0]  # collectives not landed yet, on all streams (a fast check for every call)
_pending_lock = threading.RLock()


def _stream_of(ptr, what):
    """The stream whose `.ptr` is `ptr` (0, 1 and 2 name the null stream, as CUDA's legacy and
    per-thread default streams)."""
    if ptr in (0, 1, 2):
        return _Stream.null
    ref = _streams.get(ptr)
    st = ref() if ref is not None else None
    if st is None:
        raise ValueError(f"cupy_sim: {what} was given the stream pointer {ptr:#x}, which is no "
                         "live cupy.cuda.Stream's .ptr")
    return st


def _live_streams():
    out = []
    for ref in list(_streams.values()):
        st = ref if isinstance(ref, _Stream) else ref()
        if st is not None:
            out.append(st)
    return out


def _drain(stream, upto=None):
    """Lands the collectives issued on `stream` (those before position `upto`, or all)."""
    if not stream._pending:
        return
    with _pending_lock:
        while stream._pending and (upto is None or stream._pending[0].position < upto):
            op = stream._pending.pop(0)
            _pending_count[0] -= 1
            op.land()


def _drain_launch(stream):
    """What work issued on `stream` waits for: the stream's own collectives, and, as CUDA's
    legacy default stream does, the null stream's for a blocking stream and every blocking
    stream's for the null stream."""
    _drain(stream)
    if not _pending_count[0] or stream.non_blocking:
        return
    if stream is _Stream.null:
        for st in _live_streams():
            if st is not stream and not st.non_blocking:
                _drain(st)
    else:
        _drain(_Stream.null)


def _drain_all(device=None):
    for st in _live_streams():
        if device is None or st.device_id == device or st is _Stream.null:
            _drain(st)


def _test(stream, upto=None):
    """Whether the stream's collectives (before `upto`) are complete, landing them if so
    (cudaStreamQuery/cudaEventQuery: never blocks)."""
    with _pending_lock:
        ops = [op for op in stream._pending if upto is None or op.position < upto]
        if not all(op.ready() for op in ops):
            return False
        _drain(stream, upto)
        return True


def _poison(dtype):
    """The value of 0xFF bytes in `dtype` (NaN for floats, -1 or the maximum for integers)."""
    return np.frombuffer(b"\xff" * dtype.itemsize, dtype)[0] if dtype.kind != "b" else True


class _Dead(RuntimeError):
    pass


class _Ref:
    """An array of a captured launch, held as the GPU holds it: by address, not alive."""
    __slots__ = ("ref", "view")

    def __init__(self, a):
        # a view is held (numpy rebuilds no view from an address); it holds its memory too
        self.view = a._a if not a._a.flags.owndata else None
        self.ref = weakref.ref(a._a) if self.view is None else None

    def get(self):
        a = self.view if self.view is not None else self.ref()
        if a is None:
            raise _Dead()
        return ndarray._of(a)


class _PtrRef:
    """A MemoryPointer of a captured launch, held as `_Ref` holds an array."""
    __slots__ = ("ref",)

    def __init__(self, p):
        self.ref = _Ref(ndarray._of(p._a))

    def get(self):
        return MemoryPointer(self.ref.get()._a)


def _weak(x):
    if isinstance(x, ndarray):
        return _Ref(x)
    if isinstance(x, MemoryPointer):
        return _PtrRef(x)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_weak(v) for v in x)
    if isinstance(x, dict):
        return {k: _weak(v) for k, v in x.items()}
    return x


def _strong(x):
    if isinstance(x, (_Ref, _PtrRef)):
        return x.get()
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_strong(v) for v in x)
    if isinstance(x, dict):
        return {k: _strong(v) for k, v in x.items()}
    return x


def _weak_node(node):
    fn, args, kwargs, r = node
    return fn, _weak(args), _weak(kwargs), _weak(r)


class Graph:
    """cupy.cuda.Graph: made by `Stream.end_capture()` only; `launch(stream=None)`."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("currently this class cannot be initiated by the user and "
                                  "must be created via stream capture")

    @classmethod
    def _of(cls, nodes):
        g = cls.__new__(cls)
        g._nodes = nodes
        return g

    def launch(self, stream=None):
        try:
            work = [(fn, _strong(a), _strong(k), _strong(r)) for fn, a, k, r in self._nodes]
        except _Dead:
            raise _MODULES["cupy.cuda"].runtime.CUDARuntimeError(
                "cudaErrorIllegalAddress (cupy_sim): the graph uses an array that was freed "
                "after the capture; CuPy's memory pool may have given its memory to another "
                "array. Keep the capture's arrays alive as long as the graph (or allocate them "
                "from a pool of the graph's own with cupy.cuda.using_allocator)") from None
        _cap.depth += 1
        try:
            for fn, args, kwargs, r in work:
                _copy_results(r, fn(*args, **kwargs))
        finally:
            _cap.depth -= 1

    def upload(self, stream=None):
        pass


def _copy_results(dst, src):
    if isinstance(dst, ndarray) and isinstance(src, ndarray):
        if src._a is not dst._a and not np.shares_memory(src._a, dst._a):
            dst._a[...] = src._a
    elif isinstance(dst, (list, tuple)) and isinstance(src, (list, tuple)):
        for d, r in zip(dst, src):
            _copy_results(d, r)


class _AllocatorState(threading.local):
    def __init__(self):
        self.pool = None  # the MemoryPool of `using_allocator`, None for the default pool


_allocator = _AllocatorState()


class MemoryPool:
    """cupy.cuda.MemoryPool: the arrays allocated through `using_allocator(pool.malloc)`
    stay allocated as long as the pool (its blocks are the pool's)."""

    def __init__(self, allocator=None):
        self._held = []

    def malloc(self, size):
        raise NotImplementedError("cupy_sim: MemoryPool.malloc is only passed to "
                                  "cupy.cuda.using_allocator")

    def used_bytes(self):
        return sum(a.nbytes for a in self._held)

    def total_bytes(self):
        return self.used_bytes()

    def free_all_blocks(self, stream=None):
        pass


@contextlib.contextmanager
def using_allocator(allocator=None):
    """cupy.cuda.using_allocator: arrays made inside belong to `allocator`'s pool."""
    pool = getattr(allocator, "__self__", None)
    if allocator is not None and not isinstance(pool, MemoryPool):
        raise TypeError("cupy_sim: using_allocator takes a cupy.cuda.MemoryPool's malloc")
    old = _allocator.pool
    _allocator.pool = pool
    try:
        yield
    finally:
        _allocator.pool = old


class _Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.stream = None
        self._position = 0

    def record(self, stream=None):
        self.stream = _Stream.current() if stream is None else stream
        self._position = self.stream._issued  # after the collectives issued on it so far

    @property
    def done(self):
        return self.stream is None or _test(self.stream, self._position)

    def synchronize(self):
        _refuse_sync()
        stats.sync()
        if self.stream is not None:
            _drain(self.stream, self._position)


class _Kernel:
    def __init__(self, fn):
        self._fn = fn

    @_captured(lambda args, kwargs: list(_arrays_in(args[3:4])) + list(_arrays_in(kwargs)))
    def __call__(self, grid, block, args, *, shared_mem=0, stream=None,
                 enable_cooperative_groups=False):
        if stream is not None and _pending_count[0]:
            _drain_launch(stream)
        host = []
        for a in args:
            if isinstance(a, ndarray):
                host.append(a._a)
            elif isinstance(a, np.ndarray):
                raise _unsupported(a)
            else:
                host.append(a)
        self._fn(grid, block, tuple(host), shared_mem=shared_mem)


class RawModule:
    """cupy.RawModule on tapegpu's emulator."""

    def __init__(self, code=None, path=None, options=(), backend="nvrtc",
                 translate_cucomplex=False, *, enable_cooperative_groups=False,
                 name_expressions=None, jitify=False):
        if not isinstance(options, tuple):
            raise TypeError("options must be a tuple of str")
        # a real GPU keeps no per-module thread stacks: the emulator gives them back after each
        # launch, so the many modules of a test session (fused kernels) fit in the process
        self._mod = emu.RawModule(code=code, path=path, options=options, keep_stacks=False)

    def get_function(self, name):
        return _Kernel(self._mod.get_function(name))


def _cuda_module():
    cuda = types.ModuleType("cupy.cuda")
    runtime = types.ModuleType("cupy.cuda.runtime")
    runtime.getDeviceCount = lambda: _device_count[0]
    runtime.getDevice = lambda: _device_state.current
    runtime.setDevice = lambda i: _Device(i).use()
    runtime.deviceSynchronize = lambda: (_refuse_sync(), stats.sync(), _drain_all())[1]
    runtime.streamCaptureModeRelaxed = 2
    runtime.runtimeGetVersion = lambda: 12040
    runtime.driverGetVersion = lambda: 12040
    runtime.CUDARuntimeError = type("CUDARuntimeError", (RuntimeError,), {})
    runtime.getDeviceProperties = lambda i: {
        "name": b"cupy_sim (numpy)", "totalGlobalMem": 16 * 2 ** 30, "major": 8, "minor": 0}
    cuda.runtime = runtime
    cuda.Device = _Device
    cuda.Stream = _Stream
    cuda.Event = _Event
    cuda.Graph = Graph
    cuda.MemoryPool = MemoryPool
    cuda.using_allocator = using_allocator
    cuda.get_current_stream = lambda device_id=None: _Stream.current()
    cuda.is_available = lambda: True
    cuda.get_device_id = lambda: _device_state.current
    cuda.MemoryPointer = MemoryPointer
    return cuda


# ----------------------------------------------------------------------------- modules
_MODULES = {}


def _fill(mod, ns, npmod, overrides):
    for name in sorted(NAMES[ns]):
        if name in overrides:
            setattr(mod, name, overrides[name])
            continue
        if not hasattr(npmod, name):
            continue
        v = getattr(npmod, name)
        if isinstance(v, np.ufunc):
            setattr(mod, name, ufunc(v, name))
        elif isinstance(v, type) or isinstance(v, types.ModuleType) or not callable(v):
            if not isinstance(v, types.ModuleType):
                setattr(mod, name, v)
        else:
            setattr(mod, name, _function(v, name))


# cupy._core's compute types for products (cuBLAS's math mode): float16, float32 (and
# complex64), float64. TBD until first asked: then CuPy's default, except float32 under
# CUPY_TF32=1 (TF32). Under TF32 the stand-in's float32 products round their inputs to TF32
# (10 bits of mantissa, to nearest even), as tensor cores do.
_COMPUTE_TYPES = {"e": 0, "f": 0, "d": 0}
COMPUTE_TYPE_DEFAULT, COMPUTE_TYPE_TF32 = 1, 7


def _compute_index(dtype):
    c = np.dtype(dtype).char
    key = {"e": "e", "f": "f", "F": "f", "d": "d", "D": "d"}.get(c)
    if key is None:
        raise TypeError(f"dtype is not supported: {dtype}")
    return key


def get_compute_type(dtype):
    key = _compute_index(dtype)
    if _COMPUTE_TYPES[key] == 0:
        tf32 = key == "f" and int(os.environ.get("CUPY_TF32", "0")) > 0
        _COMPUTE_TYPES[key] = COMPUTE_TYPE_TF32 if tf32 else COMPUTE_TYPE_DEFAULT
    return _COMPUTE_TYPES[key]


def set_compute_type(dtype, compute_type):
    if compute_type not in range(8):
        raise ValueError(f"Unknown compute type: {compute_type}")
    _COMPUTE_TYPES[_compute_index(dtype)] = compute_type


def to_tf32(a):
    """float32 values rounded to TF32 (10 bits of mantissa, to nearest even; NaN and inf
    kept)."""
    u = a.view(np.uint32)
    r = ((u + np.uint32(0x0FFF) + ((u >> np.uint32(13)) & np.uint32(1)))
         & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(a), r, a)


class _ProductUfunc(ufunc):
    """matmul: float32 operands rounded to TF32 first when the compute type says TF32."""

    def _call(self, fn, args, kwargs):
        if get_compute_type(np.float32) == COMPUTE_TYPE_TF32 and \
                all(isinstance(a, ndarray) and a.dtype == np.float32 for a in args[:2]):
            # rounded inside the call, so that a captured graph's launch rounds its operands'
            # values then (rounded copies made at capture would be arrays of the capture)
            def fn(x, y, *rest, _fn=fn, **kw):
                return _fn(to_tf32(x), to_tf32(y), *rest, **kw)
        return ufunc._call(self, fn, args, kwargs)


def _module(name):
    m = types.ModuleType(name)
    m.__spec__ = importlib.machinery.ModuleSpec(name, None)
    m.__file__ = os.path.join(_HERE, "__init__.py")
    m.__path__ = []
    _MODULES[name] = m
    return m


def build():
    """The stand-in's modules, by name (built once)."""
    if "cupy" in _MODULES:
        return dict(_MODULES)
    cupy = _module("cupy")
    linalg = _module("cupy.linalg")
    _fill(linalg, "cupy.linalg", np.linalg, {"inv": inv, "solve": solve, "cholesky": cholesky,
                                             "svd": svd, "LinAlgError": LinAlgError})
    cupy.linalg = linalg
    fft = _module("cupy.fft")  # numpy 2's pocketfft keeps float32 as complex64, as cuFFT
    _fill(fft, "cupy.fft", np.fft, {})
    cupy.fft = fft
    random = _random_module()
    _MODULES["cupy.random"] = random
    lib = _module("cupy.lib")  # imported by cupy's own modules, so `cupy.lib` is always there
    lib.stride_tricks = _module("cupy.lib.stride_tricks")
    _fill(lib.stride_tricks, "cupy.lib.stride_tricks", np.lib.stride_tricks, {})
    cuda = _cuda_module()
    _MODULES["cupy.cuda"] = cuda
    from . import nccl  # the stand-in's NCCL (it uses this module's streams and pointers)
    cuda.nccl = _MODULES["cupy.cuda.nccl"] = nccl
    _fill(cupy, "cupy", np, {
        "ndarray": ndarray, "ufunc": ufunc, "asnumpy": asnumpy, "take": take, "mean": mean,
        "sum": _sum,
        "full": full, "full_like": full_like, "from_dlpack": from_dlpack,
        "get_array_module": get_array_module, "RawModule": RawModule, "cuda": cuda,
        "linalg": linalg, "random": random, "fft": fft,
        "get_default_memory_pool": lambda: _POOL,
        "get_default_pinned_memory_pool": lambda: _POOL,
        "is_available": lambda: True})
    cupy.lib = lib
    cupy.matmul = _ProductUfunc(np.matmul, "matmul")
    core = _module("cupy._core")  # CuPy's compute types (cupy._core.set_compute_type)
    core.get_compute_type, core.set_compute_type = get_compute_type, set_compute_type
    cupy._core = core
    cupy.__version__ = SIM_VERSION
    cupy.cupy_sim = sys.modules[__name__]
    cupyx = _module("cupyx")
    scipy = _module("cupyx.scipy")
    special = _module("cupyx.scipy.special")
    for name in NAMES["cupyx.scipy.special"]:
        if name in _SPECIALS:
            setattr(special, name, _special(name, _SPECIALS[name]))
    sla = _module("cupyx.scipy.linalg")
    sla.solve_triangular = solve_triangular
    scipy.special, scipy.linalg = special, sla
    cupyx.scipy = scipy
    cupyx.scatter_add = lambda a, slices, value: a.scatter_add(slices, value)
    cupyx.errstate = lambda **kw: contextlib.nullcontext()
    return dict(_MODULES)


def install():
    """Put the stand-in in sys.modules (as cupy, cupyx, ...); returns the cupy module."""
    mods = build()
    sys.modules.update(mods)
    return mods["cupy"]


def uninstall():
    for name in list(_MODULES):
        if sys.modules.get(name) is _MODULES[name]:
            del sys.modules[name]


def installed():
    return "cupy" in _MODULES and sys.modules.get("cupy") is _MODULES["cupy"]
