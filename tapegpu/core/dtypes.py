"""dtypes: TensorFlow's names over numpy's dtypes.

A `DType` wraps one numpy dtype. It compares equal to itself, to the numpy dtype, to the numpy
scalar type and to its name, so `x.dtype == tg.float32`, `x.dtype == np.float32` and
`x.dtype == "float32"` all hold.

`tg.string` is TensorFlow's string dtype: its tensors hold byte strings in a host numpy array
of dtype object (as TensorFlow's `.numpy()` gives them), never on a GPU, and carry no gradient.

`tg.bfloat16` is ml_dtypes' bfloat16 (as TensorFlow's and JAX's `.numpy()` give it): 8 bits of
exponent as float32, 8 of precision. numpy files it as kind "V"; it is the only such dtype a
tensor can have, so "V" among a dtype's kinds means bfloat16. Without ml_dtypes installed
(`pip install ml_dtypes`, a dependency of tapegpu) `tg.bfloat16` is absent.
"""
import numpy as np

try:
    import ml_dtypes as _ml_dtypes
except ImportError:  # optional at run time: everything but bfloat16 works without it
    _ml_dtypes = None


class DType:
    """A tensor's element type: TensorFlow's name over a numpy dtype.

    >>> tg.float32.name, tg.float32.is_floating, tg.float32 == np.float32
    ('float32', True, True)
    """

    __slots__ = ("name", "as_numpy_dtype", "_np")

    def __init__(self, np_dtype):
        self._np = np.dtype(np_dtype)
        self.name = {"b": "bool", "O": "string"}.get(self._np.kind, self._np.name)
        self.as_numpy_dtype = self._np.type

    @property
    def is_floating(self):
        return self._np.kind in "fV"  # V: bfloat16 (see the module's docstring)

    @property
    def is_complex(self):
        return self._np.kind == "c"

    @property
    def is_integer(self):
        return self._np.kind in "iu"

    @property
    def is_bool(self):
        return self._np.kind == "b"

    @property
    def is_string(self):
        return self._np.kind == "O"

    @property
    def size(self):
        return self._np.itemsize

    def __eq__(self, other):
        if isinstance(other, DType):
            return self._np == other._np
        if isinstance(other, str) and other in _STRING_NAMES:
            return self._np.kind == "O"
        try:
            return self._np == _numpy_of(other)
        except TypeError:
            return False

    def __hash__(self):
        return hash(self._np)

    def __repr__(self):
        return f"tg.{self.name}"

    def __str__(self):
        return self.name


float16 = DType(np.float16)
float32 = DType(np.float32)
float64 = DType(np.float64)
int8 = DType(np.int8)
int16 = DType(np.int16)
int32 = DType(np.int32)
int64 = DType(np.int64)
uint8 = DType(np.uint8)
uint16 = DType(np.uint16)
uint32 = DType(np.uint32)
uint64 = DType(np.uint64)
bool = DType(np.bool_)  # noqa: A001 (TensorFlow's name)
complex64 = DType(np.complex64)
complex128 = DType(np.complex128)
string = DType(object)  # byte strings, host-resident (see the module's docstring)

_BY_NUMPY = {d._np: d for d in (float16, float32, float64, int8, int16, int32, int64, uint8,
                                 uint16, uint32, uint64, bool, complex64, complex128, string)}
if _ml_dtypes is not None:
    bfloat16 = DType(_ml_dtypes.bfloat16)
    _BY_NUMPY[bfloat16._np] = bfloat16
# what names the string dtype: TensorFlow's name, and numpy's str and bytes types (whose
# arrays convert to string tensors)
_STRING_NAMES = ("string", "str", "bytes", "object")


def _numpy_of(value):
    """The numpy dtype `value` names; str and bytes (types or numpy dtypes) name object, the
    string tensors' numpy dtype."""
    if isinstance(value, str) and value in _STRING_NAMES or value in (str, bytes, np.str_,
                                                                       np.bytes_):
        return string._np
    npd = np.dtype(value)
    return string._np if npd.kind in "SU" else npd


def as_dtype(value):
    """Returns the `DType` for a DType, numpy dtype, numpy scalar type or name.

    >>> tg.as_dtype("float32") == tg.float32
    True
    """
    if isinstance(value, DType):
        return value
    try:
        npd = _numpy_of(value)
    except TypeError:
        raise TypeError(f"as_dtype: cannot interpret {value!r} as a dtype; valid are "
                        f"{sorted(d.name for d in _BY_NUMPY.values())}") from None
    d = _BY_NUMPY.get(npd)
    if d is None:
        raise TypeError(f"as_dtype: dtype {npd} is not supported; valid are "
                        f"{sorted(d.name for d in _BY_NUMPY.values())}")
    return d


def from_numpy(npd):
    """The DType of a numpy dtype (fast path for Tensor.dtype)."""
    d = _BY_NUMPY.get(npd)
    return d if d is not None else as_dtype(npd)


_NAMES = {}


def name_of(npd):
    """`npd.name`, read once per dtype: numpy 2 computes a dtype's name in Python at every read
    (2.6 us with numpy 2.4), which tg.function's call key, the optimizers' grouping and the GPU
    launch layer paid per argument, variable and launch."""
    name = _NAMES.get(npd)
    if name is None:
        name = _NAMES[npd] = npd.name
    return name


def np_dtype(value):
    """The numpy dtype of a DType / dtype-like, or None for None."""
    if value is None:
        return None
    return as_dtype(value)._np


def is_float(npd):
    return npd.kind in "fcV"  # V: bfloat16
