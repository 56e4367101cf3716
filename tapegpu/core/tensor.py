"""Tensor and Variable.

A `Tensor` is an immutable n-d array on one device: it holds the backend's array (`_data`), the
backend (`_dev`) and a unique id (`_uid`, never reused) by which tapes track it. Nothing ever
writes into a tensor's array, so a tape may keep a reference to it instead of a copy.

A `Variable` is a mutable cell holding a tensor. Assigning replaces the tensor (the old array is
untouched, so values saved on a tape stay valid). Each read under an active tape is recorded as an
identity from the variable's own id, which is how gradients reach variables across assignments.
"""
import copy as _copy
import itertools
import math
import numbers
import threading

import numpy as np

from .. import backends as _backend
from . import dtypes
from .shape import TensorShape

_new_tuple = tuple.__new__  # Tensor.shape wraps the array's shape tuple as a TensorShape as is


class _ThreadState(threading.local):
    """What records in this thread: as in TensorFlow, a tape sees only the ops of the thread
    that entered it."""

    def __init__(self):
        # tapes and forward accumulators recording, innermost last; changed in place, never
        # rebound (a tape keeps the list it was pushed on)
        self.recorders = []
        self.variable_watchers = []  # told about every variable read (custom_gradient)
        self.variable_creators = []  # told about every variable created (tg.distribute)
        # tapegpu.function traces recording, innermost last: told when a tensor's value leaves
        # as a Python value (a guard) and about variable assignments (graph side effects)
        self.tracers = []


_thread = _ThreadState()


def _leaving(t):
    """`t`'s value becomes a Python value (bool, int, float, numpy): active traces guard it."""
    for tracer in _thread.tracers:
        tracer.guard(t)


def _assigned(var, kind, value):
    """`var` was assigned (`kind`: assign, assign_add, assign_sub) `value`: traces record it."""
    for tracer in _thread.tracers:
        tracer.on_assign(var, kind, value)


class TensorBase:
    """A tensor's fields and constructor."""
    # _res: see registry. Keras' masks and logits are kept beside tensors, by weak reference
    # (tapegpu/models/tensor_attributes.py)
    __slots__ = ("_data", "_dev", "_uid", "_res", "__weakref__")

    def __init__(self, data, dev=None):
        self._data = data
        self._dev = dev if dev is not None else _backend.current()
        self._uid = _next_uid()


_next_uid = itertools.count(1).__next__


class Tensor(TensorBase):
    """An immutable n-d array on one device.

    >>> x = tg.constant([[1.0, 2.0], [3.0, 4.0]])
    >>> x.shape, x.dtype
    ((2, 2), tg.float32)
    >>> (x @ x).numpy()
    array([[ 7., 10.],
           [15., 22.]], dtype=float32)
    """

    __slots__ = ()  # the fields are TensorBase's
    # as TensorFlow's EagerTensor: numpy's operators defer to ours by priority (np_array +
    # tensor -> Tensor, as are CuPy's, whose arrays have priority 100), while numpy functions
    # read the value through __array__ (np.exp(tensor) -> numpy array)
    __array_priority__ = 1000
    __hash__ = None  # `==` is elementwise, as in TensorFlow 2; use `.ref()` as a key

    # -- attributes -----------------------------------------------------------------------
    @property
    def shape(self):
        return _new_tuple(TensorShape, self._data.shape)

    def get_shape(self):
        """The shape, a TensorShape (TensorFlow's alias of `shape`)."""
        return _new_tuple(TensorShape, self._data.shape)

    @property
    def dtype(self):
        return dtypes.from_numpy(self._data.dtype)

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def size(self):
        return self._data.size

    @property
    def device(self):
        return self._dev.device

    @property
    def nbytes(self):
        return self._data.nbytes

    def numpy(self):
        """A host numpy copy of the value."""
        if _thread.tracers:
            _leaving(self)
        a = np.array(self._dev.to_numpy(self._data), copy=True)
        return a[()] if a.dtype == object and not a.ndim else a  # a string scalar: bytes, as TF

    def item(self):
        if _thread.tracers:
            _leaving(self)
        return self._dev.to_numpy(self._data).item()

    def ref(self):
        """A hashable reference to this tensor (as TensorFlow's `Tensor.ref()`)."""
        return _Ref(self)

    def __array__(self, dtype=None, copy=None):
        a = self._dev.to_numpy(self._data)
        if copy or (dtype is not None and np.dtype(dtype) != a.dtype):
            return np.array(a, dtype=dtype, copy=True)
        return read_only(a)

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a scalar tensor (shape ()) is not defined")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a scalar tensor (shape ()) is not defined")
        return (self[i] for i in range(self._data.shape[0]))

    def __bool__(self):
        if self._data.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {self.shape} is ambiguous; "
                             "use tg.reduce_any or tg.reduce_all")
        if _thread.tracers:
            _leaving(self)
        return bool(self._dev.to_numpy(self._data))  # (a host read: device checks too)

    def __float__(self):
        if _thread.tracers:
            _leaving(self)
        return float(self._dev.to_numpy(self._data))

    def __int__(self):
        if _thread.tracers:
            _leaving(self)
        return int(self._dev.to_numpy(self._data))

    def __index__(self):
        if self._data.dtype.kind not in "iu":
            raise TypeError(f"only integer tensors can be used as an index, not {self.dtype.name}")
        if _thread.tracers:
            _leaving(self)
        return int(self._dev.to_numpy(self._data))

    def __repr__(self):
        a = self._dev.to_numpy(self._data)
        vals = repr(a.item()) if a.ndim == 0 else repr(a)
        dev = "" if self._dev is _backend.NUMPY else f", device={self._dev.short}"
        return f"<tg.Tensor: shape={self.shape}, dtype={self.dtype.name}{dev}, numpy={vals}>"

    def __format__(self, spec):
        """f"{loss:.3f}" formats a scalar tensor's value, as TensorFlow's eager tensors do;
        a format spec on a tensor of more elements raises numpy's TypeError."""
        if not spec:
            return str(self)
        a = self._dev.to_numpy(self._data)
        return format(a.item() if a.ndim == 0 else a, spec)

    def __str__(self):
        return f"tg.Tensor({np.array2string(self._dev.to_numpy(self._data))}, " \
               f"shape={self.shape}, dtype={self.dtype.name})"

    def __reduce__(self):
        return (_rebuild, (self.numpy(),))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def _rebuild(array):
    return Tensor(array)


def read_only(a):
    """A view of the host array `a` that nothing can make writable: numpy lets
    `setflags(write=True)` through when any array below a view is writable, so the view is
    taken through a read-only buffer instead (the tensor stays immutable)."""
    return np.asarray(memoryview(a).toreadonly())


class _Ref:
    __slots__ = ("_t",)

    def __init__(self, t):
        self._t = t

    def deref(self):
        return self._t

    def __hash__(self):
        return hash(self._t._uid)

    def __eq__(self, other):
        return isinstance(other, _Ref) and other._t is self._t


class Variable:
    """A mutable tensor-valued cell whose reads are tracked by tapes.

    >>> v = tg.Variable(3.0)
    >>> with tg.GradientTape() as tape:
    ...     y = v * v
    >>> float(tape.gradient(y, v))
    6.0
    >>> _ = v.assign_sub(1.0); float(v)
    2.0
    """

    __array_priority__ = 1000  # as Tensor's: numpy operators defer, numpy functions read
    __hash__ = None  # `==` is elementwise, as in TensorFlow 2; use `.ref()` as a key
    _count = itertools.count()

    def __init__(self, initial_value, trainable=True, name=None, dtype=None):
        if callable(initial_value):
            initial_value = initial_value()
        value = _convert(initial_value, dtype, None, "Variable")
        if isinstance(initial_value, np.ndarray) and value._data is initial_value:
            value = Tensor(initial_value.copy(), value._dev)
        self._value = value
        self._uid = _next_uid()
        self._lock = threading.Lock()  # the assignments hold it (see assign)
        self.trainable = bool(trainable)
        self.name = name if name is not None else f"Variable:{next(Variable._count)}"
        for hook in _thread.variable_creators:
            hook(self)

    # A variable reads like a tensor.
    shape = property(lambda self: _new_tuple(TensorShape, self._value._data.shape))
    dtype = property(lambda self: self._value.dtype)
    ndim = property(lambda self: self._value._data.ndim)
    device = property(lambda self: self._value.device)
    _dev = property(lambda self: self._value._dev)

    def numpy(self):
        return self._value.numpy()

    def value(self):
        return self._read()

    def ref(self):
        """A hashable reference to this variable (as TensorFlow's `Variable.ref()`)."""
        return _Ref(self)

    def read_value(self):
        return self._read()

    def _read(self):
        """The current value; under active tapes, a recorded read (identity from this variable)."""
        for watcher in _thread.variable_watchers:
            watcher(self)
        active = _thread.recorders
        if not active:
            return self._value
        out = None
        for rec in active:
            out = rec.record_variable_read(self, out)
        return out if out is not None else self._value

    def _checked(self, value, op):
        t = _convert(value, None, self._value.dtype, f"Variable.{op}")
        if t.shape != self.shape:
            raise ValueError(f"Variable.{op}: value of shape {t.shape} does not match the "
                             f"variable {self.name!r} of shape {self.shape}")
        if t._data.dtype != self._value._data.dtype:
            raise TypeError(f"Variable.{op}: value of dtype {t.dtype.name} does not match the "
                            f"variable {self.name!r} of dtype {self.dtype.name}")
        if t._dev is not self._value._dev:
            raise ValueError(f"Variable.{op}: value on {t.device} but variable {self.name!r} "
                             f"on {self.device}")
        return t

    # The assignments hold the variable's lock: assign_add and assign_sub read, add and write
    # back, and without it concurrent updates from threads are lost (TF's ResourceVariable
    # loses none); assign takes it too, so it lands before or after an update, never inside.
    def assign(self, value, read_value=True):
        t = self._checked(value, "assign")
        if isinstance(value, np.ndarray) and t._data is value:
            t = Tensor(value.copy(), t._dev)  # the caller still holds `value`
        with self._lock:
            self._value = Tensor(t._data, t._dev)
        if _thread.tracers:
            _assigned(self, "assign", t)
        return self if read_value else None

    def assign_add(self, delta, read_value=True):
        d = self._checked(delta, "assign_add")
        with self._lock:  # a new array: values saved on tapes stay
            self._value = Tensor(self._value._data + d._data, d._dev)
        if _thread.tracers:
            _assigned(self, "assign_add", d)
        return self if read_value else None

    def assign_sub(self, delta, read_value=True):
        d = self._checked(delta, "assign_sub")
        with self._lock:
            self._value = Tensor(self._value._data - d._data, d._dev)
        if _thread.tracers:
            _assigned(self, "assign_sub", d)
        return self if read_value else None

    def get_shape(self):
        """The shape, a TensorShape (TensorFlow's alias of `shape`)."""
        return self.shape

    def _assign_array(self, array):
        """Replace the value by a freshly computed array the caller owns (optimizers)."""
        self._value = Tensor(array, self._value._dev)

    def __array__(self, dtype=None, copy=None):
        return self._value.__array__(dtype, copy)

    def __len__(self):
        return len(self._value)

    def __bool__(self):
        return bool(self._value)

    def __float__(self):
        return float(self._value)

    def __int__(self):
        return int(self._value)

    def __index__(self):
        return self._value.__index__()

    def __iter__(self):
        return iter(self._read())

    def __repr__(self):
        vals = np.array2string(self.numpy(), separator=", ", threshold=1000)
        return f"<tg.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}, " \
               f"numpy={vals}>"

    # Copies are new variables with ids of their own (a tape must never take a copy for the
    # original): the current value (an immutable tensor, shared), name and trainability.
    def __copy__(self):
        new = Variable.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._uid = _next_uid()
        new._lock = threading.Lock()
        return new

    def __deepcopy__(self, memo):
        new = Variable.__new__(type(self))
        memo[id(self)] = new
        for key, val in self.__dict__.items():
            if key not in ("_value", "_uid", "_lock"):
                new.__dict__[key] = _copy.deepcopy(val, memo)
        new._value = Tensor(self._value._data.copy(), self._value._dev)
        new._uid = _next_uid()
        new._lock = threading.Lock()
        return new

    def __reduce__(self):
        return (_rebuild_variable, (self.numpy(), self.trainable, self.name))


def _rebuild_variable(array, trainable, name):
    return Variable(array, trainable=trainable, name=name)


# -- conversion ---------------------------------------------------------------------------------

_INT32 = 2 ** 31
_INT64 = 2 ** 63


def _infer_dtype(value, op="convert_to_tensor"):
    """TensorFlow's defaults: Python floats -> float32, ints -> int32 (int64 when they do not fit
    int32), bools -> bool; `value` is a Python scalar or a numpy array."""
    if isinstance(value, bool):
        return np.bool_
    if isinstance(value, numbers.Integral):
        if -_INT32 <= value < _INT32:
            return np.int32
        if -_INT64 <= value < _INT64:
            return np.int64
        raise ValueError(f"{op}: the Python int {value} does not fit int64")
    if isinstance(value, numbers.Real):
        return np.float32
    if isinstance(value, numbers.Complex):
        return np.complex64
    arr = np.asarray(value)
    kind = arr.dtype.kind
    if kind == "f":
        return np.float32
    if kind in "iu":
        return np.int32 if arr.dtype.itemsize <= 8 and np.all(np.abs(arr) < _INT32) else np.int64
    if kind == "c":
        return np.complex64
    return arr.dtype


def _check_lossless(src, arr, target, op):
    """Refuse float -> int conversions that would truncate (TF raises TypeError here too)."""
    if target.kind in "iub" and src.dtype.kind in "fcV" and not np.array_equal(arr, src):
        raise TypeError(f"{op}: cannot convert {src.tolist()!r} to dtype {np.dtype(target).name} "
                        "without losing its value")


def _none_error(op):
    # TensorFlow's message (a ValueError, not a NaN)
    return ValueError(f"{op}: Attempt to convert a value (None) with an unsupported type "
                      "(<class 'NoneType'>) to a Tensor")


_KINDS = "biufc"  # bool, ints, floats, complex: what a tensor can hold


def _host(value, op):
    """A new numpy array of a nested list / tuple or an array-like, refusing Nones, ragged lists
    and non-numeric elements (which numpy would turn into NaN or an object array)."""
    try:
        if hasattr(value, "__dlpack__") and not hasattr(value, "__array__"):
            src = np.array(np.from_dlpack(value), copy=True)
        else:
            src = np.array(value)
    except (ValueError, TypeError, OverflowError, BufferError) as e:
        raise ValueError(f"{op}: cannot convert {_short(value)} to a tensor ({e})") from None
    if src.dtype.kind not in _KINDS:
        if src.dtype.kind == "O" and any(v is None for v in src.flat):
            raise _none_error(op)
        raise TypeError(f"{op}: cannot convert {_short(value)} to a tensor: its elements have "
                        f"numpy dtype {src.dtype} (tensors hold bool, integers, floats or "
                        "complex numbers)")
    return src


def _short(value):
    r = repr(value)
    return r if len(r) <= 80 else r[:77] + "..."


# Conversion functions for other types (tg.register_tensor_conversion_function), as
# (priority, order of registration, base types, function), tried in that order. tapegpu.ops
# registers one: a (nested) list or tuple holding tensors is a differentiable stack of them.
_CONVERSIONS = []
_BUILT_IN = frozenset((float, int, bool, complex, str, bytes, np.ndarray))


def register_tensor_conversion_function(base_type, conversion_func, priority=100):
    """Registers `conversion_func(value, dtype=None, name=None, as_ref=False)` to convert
    instances of `base_type` (a type or a tuple of types) to a Tensor, as TensorFlow's:
    convert_to_tensor (and every op, for its tensor arguments) calls it for such a value, in
    order of `priority` (smaller first), then of registration. It returns a Tensor of the
    requested `dtype` (when given), or NotImplemented to let the next function try.

    >>> class Meters:
    ...     def __init__(self, value):
    ...         self.value = value
    >>> tg.register_tensor_conversion_function(
    ...     Meters, lambda m, dtype=None, name=None, as_ref=False: tg.constant(m.value, dtype))
    >>> tg.add(Meters(2.0), 1.0).numpy()
    np.float32(3.0)
    """
    types = base_type if isinstance(base_type, tuple) else (base_type,)
    if not types or not all(isinstance(t, type) for t in types):
        raise TypeError("register_tensor_conversion_function: base_type must be a type or a "
                        f"tuple of types, got {base_type!r}")
    if any(issubclass(t, (int, float, np.generic, np.ndarray)) for t in types):
        raise TypeError("register_tensor_conversion_function: cannot register conversions for "
                        f"Python numeric types and NumPy scalars and arrays, got {base_type!r}")
    if not callable(conversion_func):
        raise TypeError("register_tensor_conversion_function: conversion_func must be "
                        f"callable, got {conversion_func!r}")
    _CONVERSIONS.append((priority, len(_CONVERSIONS), types, conversion_func))
    _CONVERSIONS.sort(key=lambda c: c[:2])


def _registered(value, dtype, name, op):
    """The first registered conversion of `value` that applies, or None."""
    for _, _, types, fn in _CONVERSIONS:
        if not isinstance(value, types):
            continue
        t = fn(value, dtype=dtype, name=name, as_ref=False)
        if t is NotImplemented:
            continue
        if isinstance(t, Variable):
            t = t._read()
        if not isinstance(t, Tensor):
            raise RuntimeError(f"{op}: the conversion function {fn!r} for "
                               f"{type(value).__name__} returned a {type(t).__name__}, not a "
                               "Tensor")
        if dtype is not None and t._data.dtype != dtypes.np_dtype(dtype):
            raise RuntimeError(f"{op}: the conversion function {fn!r} for "
                               f"{type(value).__name__} returned dtype {t.dtype.name}, "
                               f"requested {dtypes.as_dtype(dtype).name}")
        return t
    return None


def convert_to_tensor(value, dtype=None, dtype_hint=None, name=None):
    """Converts tensors, variables, numpy arrays, Python scalars and nested lists to a Tensor.

    Python floats become float32 and Python ints int32 (int64 if they do not fit; TensorFlow's
    defaults); numpy arrays keep their dtype. A `dtype` that does not match a tensor's raises
    instead of casting silently; None, ragged lists and non-numeric values raise too.

    >>> tg.convert_to_tensor([1, 2]).dtype
    tg.int32
    """
    return _convert(value, dtype, dtype_hint, "convert_to_tensor")


def _convert(value, dtype, dtype_hint, op):
    if type(value) is Tensor:
        if dtype is not None and value._data.dtype != dtypes.np_dtype(dtype):
            raise TypeError(f"{op}: tensor has dtype {value.dtype.name}, "
                            f"requested {dtypes.as_dtype(dtype).name}; use tg.cast to convert")
        return value
    if isinstance(value, Variable):
        return _convert(value._read(), dtype, None, op)
    if isinstance(value, Tensor):  # subclass
        return value
    if value is None:
        raise _none_error(op)
    if type(value) not in _BUILT_IN:
        t = _registered(value, dtype, None, op)
        if t is not None:
            return t
    dev = _backend.current()
    target = dtypes.np_dtype(dtype)
    if dev.xp is not np and not isinstance(value, np.ndarray) and \
            (hasattr(value, "__cuda_array_interface__") or hasattr(value, "__dlpack__")):
        if target is None:
            target = np.dtype(value.dtype) if hasattr(value, "dtype") else None
        return Tensor(_own(dev.asarray(value, dtype=target), value), dev)
    if dev.xp is np and not isinstance(value, np.ndarray) and \
            hasattr(value, "__cuda_array_interface__") and hasattr(value, "device"):
        # a GPU array for a CPU tensor: an explicit copy to the host (implicit ones raise)
        value = _backend.gpu(getattr(value.device, "id", 0)).to_numpy(value)
    strings = _strings(value, dtype, op)
    if strings is not None:
        return strings
    scalar = isinstance(value, numbers.Number) and not isinstance(value, np.generic)
    src = value if scalar or isinstance(value, (np.ndarray, np.generic)) else _host(value, op)
    if not scalar and src.dtype.kind not in _KINDS:
        raise TypeError(f"{op}: numpy dtype {src.dtype} is not supported (tensors hold bool, "
                        "integers, floats or complex numbers)")
    if target is None:
        if not scalar and src is value:  # numpy arrays and scalars keep their dtype
            target = value.dtype
        elif dtype_hint is not None:
            hint = dtypes.np_dtype(dtype_hint)
            target = hint if _fits(src, hint) else np.dtype(_infer_dtype(src, op))
        else:
            target = np.dtype(_infer_dtype(src, op))
    try:
        host = np.array(src, dtype=target, copy=True)
    except OverflowError:
        raise TypeError(f"{op}: cannot convert {_short(value)} to dtype {target.name}: out of "
                        "its range") from None
    if not scalar or isinstance(value, (float, complex)):
        _check_lossless(np.asarray(src), host, target, op)
    arr = dev.asarray(host) if dev.xp is not np else host
    return Tensor(arr, dev)


def _is_text(v):
    return isinstance(v, (str, bytes, np.str_, np.bytes_))


def _strings(value, dtype, op):
    """A string tensor (tg.string) of `value` if it holds text: str, bytes, numpy text arrays
    or (nested) lists of them. Its elements are bytes (str is UTF-8 encoded), in a host numpy
    array of dtype object on the CPU whatever the current device: strings never go to a GPU,
    as TensorFlow keeps them in host memory. None when `value` holds no text."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "SU" and not (value.dtype.kind == "O" and value.size and
                                                  _is_text(value.flat[0])):
            return None
        src = value
    elif _is_text(value):
        src = np.array(value, dtype=object)
    elif isinstance(value, (list, tuple)) and value and _is_text(nest_first(value)):
        try:
            src = np.array(value, dtype=object)
        except ValueError as e:
            raise ValueError(f"{op}: cannot convert {_short(value)} to a tensor ({e})") from None
        if src.dtype != object or any(not _is_text(v) for v in src.flat):
            raise TypeError(f"{op}: cannot convert {_short(value)} to a string tensor: every "
                            "element must be str or bytes")
    else:
        return None
    if dtype is not None and not dtypes.as_dtype(dtype).is_string:
        raise TypeError(f"{op}: cannot convert text {_short(value)} to dtype "
                        f"{dtypes.as_dtype(dtype).name}; text becomes tg.string tensors (use "
                        "tg.strings.to_number to parse numbers)")
    flat = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in np.ravel(src)]
    arr = np.empty(len(flat), dtype=object)
    arr[:] = flat
    return Tensor(arr.reshape(np.shape(src)), _backend.lookup("cpu"))


def nest_first(value):
    """The first leaf of a nested list."""
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    return value


def _own(arr, value):
    """`arr` (the device's asarray of `value`) in a buffer of its own, as a tensor made from a
    numpy array is: CuPy's asarray returns the caller's array itself, or a view of its memory,
    unless it converts the dtype."""
    try:
        converted = arr.dtype != np.dtype(value.dtype)
    except TypeError:  # a foreign dtype object (torch's): compare no further, copy
        converted = False
    return arr if converted else arr.copy()


def _fits(src, npd):
    """Whether a Python scalar/list may adopt dtype `npd` (ints may become floats, not reverse)."""
    if npd.kind in "fcV":  # V: bfloat16
        return True
    kind = np.asarray(src).dtype.kind
    return kind in "iub" if npd.kind in "iu" else kind == "b"


def constant(value, dtype=None, shape=None, name=None):
    """Creates a constant tensor (a copy of `value`).

    >>> tg.constant(1.5)
    <tg.Tensor: shape=(), dtype=float32, numpy=1.5>
    """
    t = _convert(value, dtype, None, "constant")
    if isinstance(value, (Tensor, Variable)):
        t = Tensor(t._data, t._dev)
    if shape is not None:
        shape = tuple(shape)
        if t.size == 1:
            # a broadcast copy, not xp.full: CuPy's fill memsets a -0.0 (to +0.0)
            t = Tensor(t._dev.xp.broadcast_to(t._data.reshape(()), shape).copy(), t._dev)
        elif t.size == int(np.prod(shape)):
            t = Tensor(t._data.reshape(shape), t._dev)
        else:
            raise ValueError(f"constant: cannot give a value of shape {t.shape} the shape {shape}")
    return t


_scalars = {}  # (value, dtype, device) -> Tensor: immutable, so safely shared


def scalar_like(value, like):
    """A Python scalar as a tensor with the dtype and device of `like` (no silent promotion)."""
    npd = like._data.dtype
    t = _scalars.get((value, npd, like._dev))
    # -0.0 == 0.0 as a key, but not as a summand: only +0.0 is cached
    if t is not None and (value or math.copysign(1.0, value) > 0.0):
        return t
    if npd.kind in "iu":
        if isinstance(value, float) and not float(value).is_integer():
            raise TypeError(f"cannot use the float {value!r} with a tensor of dtype {npd.name}; "
                            "cast the tensor to a floating dtype first")
    elif npd.kind == "b" and not isinstance(value, bool):
        raise TypeError(f"cannot use {value!r} with a tensor of dtype bool")
    try:
        t = Tensor(like._dev.asarray(value, dtype=npd), like._dev)  # -0.0 kept on a GPU
    except OverflowError:
        info = np.iinfo(npd)
        raise TypeError(f"cannot use the Python int {value} with a tensor of dtype {npd.name}: "
                        f"out of its range [{info.min}, {info.max}]; cast the tensor to a wider "
                        "dtype first") from None
    # not cached: bools (True == 1 as a key, but 1 must fail for a bool tensor), NaN (never
    # equal to itself as a key) and -0.0
    if npd.kind != "b" and value == value and (value or math.copysign(1.0, value) > 0.0):
        if len(_scalars) > 4096:
            _scalars.clear()
        _scalars[(value, npd, like._dev)] = t
    return t


def _compatible(desired, given):
    """TensorFlow's rule for converting a numpy operand to a tensor's dtype (its EagerTensor
    conversion's IsCompatible): integers to any integer type, integers and floats to floats,
    and those and complex to complex; bools only to bool."""
    d, g = "f" if desired.kind == "V" else desired.kind, given.kind  # V: bfloat16
    if d == g or (d in "iu" and g in "iu"):
        return True
    return (d == "f" and g in "iuf") or (d == "c" and g in "iufc")


def numpy_like(value, like, op):
    """A numpy array or scalar operand of a binary op as a tensor of `like`'s dtype, as
    TensorFlow converts it (`t * np.sqrt(2)` and `t + float64_array` stay float32); a dtype it
    cannot take (floats for an integer tensor, numbers for a bool one) is TensorFlow's
    TypeError."""
    npd = like._data.dtype
    if value.dtype == npd:
        return _convert(value, None, None, op)
    if value.dtype.kind not in _KINDS or npd.kind not in _KINDS + "V" or \
            not _compatible(npd, value.dtype):
        raise TypeError(f"{op}: cannot convert a numpy operand of dtype {value.dtype.name} and "
                        f"shape {np.shape(value)} to the tensor's dtype {npd.name} (numpy "
                        "operands take the tensor's dtype: integers convert to integer, float "
                        "and complex tensors, floats to float and complex ones); cast one of "
                        "them first (tg.cast or .astype)")
    return _convert(value, npd, None, op)


def as_tensor_pair(x, y, op="convert_to_tensor"):
    """Converts a binary op's operands: Python scalars and numpy operands adopt the other
    operand's dtype, as TensorFlow's (errors name `op`)."""
    tx = type(x)
    ty = type(y)
    if tx is Tensor:
        if ty is Tensor:
            return x, y
        if ty in (float, int, bool):
            return x, scalar_like(y, x)
        if isinstance(y, (np.ndarray, np.generic)):
            return x, numpy_like(y, x, op)
        return x, _convert(y, None, x.dtype, op)
    if ty is Tensor:
        if tx in (float, int, bool):
            return scalar_like(x, y), y
        if isinstance(x, (np.ndarray, np.generic)):
            return numpy_like(x, y, op), y
        return _convert(x, None, y.dtype, op), y
    x = _convert(x, None, None, op)
    if ty in (float, int, bool):
        return x, scalar_like(y, x)
    return x, _convert(y, None, x.dtype, op)
