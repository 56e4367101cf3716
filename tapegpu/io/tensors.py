"""Tensors as bytes: `tg.io.serialize_tensor` / `parse_tensor` (a `TensorProto` in the
protobuf wire format), `tg.make_tensor_proto` / `tg.make_ndarray` and `tg.io.decode_raw`
(sparse tensors as bytes: sparse_io.py).

`serialize_tensor` writes what TensorFlow writes: the dtype's DataType number, the shape, and
the values as raw little-endian bytes (`tensor_content`), strings one by one (`string_val`).

>>> tg.io.serialize_tensor(tg.constant(1.0)).numpy()
b'\\x08\\x01\\x12\\x00"\\x04\\x00\\x00\\x80?'
>>> tg.io.parse_tensor(tg.io.serialize_tensor(tg.constant([1, 2])), tg.int32).numpy()
array([1, 2], dtype=int32)
"""
import numpy as np

from .. import backends as _backend
from ..core import dtypes
from ..core.tensor import Tensor, convert_to_tensor
from ..errors import InvalidArgumentError
from ..train.example import DecodeError, TensorProto, TensorShapeProto

__all__ = ["serialize_tensor", "parse_tensor", "decode_raw", "make_tensor_proto",
           "make_ndarray", "host_array"]

# TensorFlow's DataType enum (tensorflow/core/framework/types.proto)
_ENUM = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6,
         "string": 7, "complex64": 8, "int64": 9, "bool": 10, "bfloat16": 14, "uint16": 17,
         "complex128": 18, "float16": 19, "uint32": 22, "uint64": 23}
_NAME = {v: k for k, v in _ENUM.items()}
_TF_NAME = {"float32": "float", "float64": "double", "string": "string"}
# the *_val field that holds each dtype's values when tensor_content is not used
_VAL_FIELD = {"float32": "float_val", "float64": "double_val", "int32": "int_val",
              "uint8": "int_val", "int16": "int_val", "int8": "int_val", "uint16": "int_val",
              "int64": "int64_val", "bool": "bool_val", "complex64": "scomplex_val",
              "complex128": "dcomplex_val", "float16": "half_val", "uint32": "uint32_val",
              "uint64": "uint64_val", "string": "string_val"}


def _tf_name(name):
    return _TF_NAME.get(name, name)


def _enum(dtype, who):
    dtype = dtypes.as_dtype(dtype)
    if dtype.name not in _ENUM:
        raise TypeError(f"{who}: dtype {dtype.name} has no TensorProto encoding here (valid: "
                        f"{', '.join(sorted(_ENUM))})")
    return _ENUM[dtype.name]


def host_array(t):
    """The host numpy value of a tensor (strings: an object array of bytes, also 0-d), read
    through `numpy()`: a `tg.function` tracing the caller guards the value, so the Python
    computation on it is traced again for another value instead of kept as a constant."""
    value = t.numpy()
    if isinstance(value, bytes):
        arr = np.empty((), dtype=object)
        arr[()] = value
        return arr
    return np.asarray(value)


def _host(value):
    """A host numpy array of `value` (tensors' own dtype; strings as object arrays of bytes)."""
    t = value if isinstance(value, Tensor) else convert_to_tensor(value)
    return host_array(t), t.dtype


def _shape_proto(shape):
    return TensorShapeProto(dim=[{"size": int(d)} for d in shape])


def _proto_of_array(arr, dtype, who):
    """TensorFlow's `AsProtoTensorContent`: raw bytes for numbers, string_val for strings."""
    proto = TensorProto(dtype=_enum(dtype, who), tensor_shape=_shape_proto(arr.shape))
    if dtype.is_string:
        proto.string_val.extend(bytes(v) for v in arr.reshape(-1))
    else:
        proto.tensor_content = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")) \
            .tobytes()
    return proto


def _string_scalar(data):
    arr = np.empty((), dtype=object)
    arr[()] = data
    return Tensor(arr, _backend.lookup("cpu"))


def serialize_tensor(tensor, name=None):
    """The tensor as a serialized TensorProto, a scalar tg.string tensor
    (`tf.io.serialize_tensor`); `parse_tensor` reads it back.

    >>> tg.io.serialize_tensor(tg.constant([b"ab"])).numpy()
    b'\\x08\\x07\\x12\\x04\\x12\\x02\\x08\\x01B\\x02ab'
    """
    arr, dtype = _host(tensor)
    return _string_scalar(_proto_of_array(arr, dtype, "tf.io.serialize_tensor")
                          .SerializeToString())


def _shape_of(proto):
    if proto.tensor_shape.unknown_rank:
        raise ValueError("the TensorProto's shape has an unknown rank")
    shape = tuple(d.size for d in proto.tensor_shape.dim)
    if any(d < 0 for d in shape):
        raise ValueError(f"the TensorProto's shape {list(shape)} has unknown dimensions")
    return shape


def make_ndarray(tensor):
    """The numpy array a `TensorProto` holds (`tf.make_ndarray`): from `tensor_content`, or
    from the dtype's `*_val` field, whose last value fills the elements it does not list.

    >>> tg.make_ndarray(tg.make_tensor_proto(2.0, shape=[2, 2])).tolist()
    [[2.0, 2.0], [2.0, 2.0]]
    """
    if not isinstance(tensor, TensorProto):
        raise TypeError(f"tf.make_ndarray: expected a TensorProto, got {type(tensor).__name__}")
    if tensor.dtype not in _NAME:
        raise TypeError(f"tf.make_ndarray: Unsupported tensor type: {tensor.dtype}")
    name = _NAME[tensor.dtype]
    shape = _shape_of(tensor)
    n = int(np.prod(shape))
    if name == "string":
        values = list(tensor.string_val)
        if len(values) < n:
            values += [values[-1] if values else b""] * (n - len(values))
        arr = np.empty(n, dtype=object)
        arr[:] = values[:n]
        return arr.reshape(shape)
    npd = np.dtype(dtypes.as_dtype(name)._np).newbyteorder("<")
    if tensor.tensor_content:
        raw = tensor.tensor_content
        if len(raw) != n * npd.itemsize:
            raise ValueError(f"tf.make_ndarray: tensor_content has {len(raw)} bytes, the shape "
                             f"{list(shape)} of {name} needs {n * npd.itemsize}")
        return np.frombuffer(raw, dtype=npd).astype(npd.newbyteorder("=")).reshape(shape)
    field = list(getattr(tensor, _VAL_FIELD[name]))
    if name == "float16":
        values = np.array(field, dtype=np.uint16).view(np.float16)
    elif name.startswith("complex"):
        pairs = np.array(field, dtype=np.float32 if name == "complex64" else np.float64)
        values = (pairs[0::2] + 1j * pairs[1::2]).astype(npd)
    else:
        values = np.array(field, dtype=npd)
    npd = npd.newbyteorder("=")
    if values.size == 0:
        return np.zeros(shape, dtype=npd)
    if values.size < n:
        values = np.pad(values, (0, n - values.size), "edge")
    return values[:n].astype(npd).reshape(shape)


def make_tensor_proto(values, dtype=None, shape=None, verify_shape=False,
                      allow_broadcast=False):
    """A `TensorProto` of `values` (`tf.make_tensor_proto`): Python floats become float32 and
    Python ints int32 (int64 when they do not fit) unless `dtype` says otherwise; `shape` may
    ask for more elements than given, which are filled with the last value.

    >>> p = tg.make_tensor_proto([[1, 2], [3, 4]])
    >>> p.dtype, [d.size for d in p.tensor_shape.dim], p.tensor_content
    (3, [2, 2], b'\\x01\\x00\\x00\\x00\\x02\\x00\\x00\\x00\\x03\\x00\\x00\\x00\\x04\\x00\\x00\\x00')
    """
    who = "tf.make_tensor_proto"
    if isinstance(values, TensorProto):
        return values
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype)
    if isinstance(values, Tensor) or hasattr(values, "_data") and hasattr(values, "dtype"):
        arr, got = _host(values)
        if dtype is not None and dtype != got:
            raise TypeError(f"{who}: Expected {dtype.name}, but got a tensor of {got.name}")
        dtype = got
    else:
        t = convert_to_tensor(values, dtype=dtype)
        arr, got = _host(t)
        if dtype is None:
            dtype = got
            if not isinstance(values, (np.ndarray, np.generic)) and dtype == dtypes.int64 and \
                    np.array_equal(arr.astype(np.int32), arr):
                arr, dtype = arr.astype(np.int32), dtypes.int32
    _enum(dtype, who)
    if shape is None:
        shape = arr.shape
        same = True
    else:
        shape = tuple(int(d) for d in shape)
        size = int(np.prod(shape))
        same = size == arr.size
        if allow_broadcast:
            if arr.shape == shape:
                pass
            elif arr.size != 1:
                raise TypeError(f"{who}: Expected Tensor's shape: {shape}, but got {arr.shape}.")
            else:
                same = False
        else:
            if verify_shape and arr.shape != shape:
                raise TypeError(f"{who}: Expected Tensor's shape: {shape}, but got {arr.shape}.")
            if arr.size > size:
                raise ValueError(f"{who}: Too many elements provided. Takes at most {size:d}, "
                                 f"but got {arr.size:d}")
    proto = TensorProto(dtype=_enum(dtype, who), tensor_shape=_shape_proto(shape))
    if same and not dtype.is_string and int(np.prod(shape)) > 1:
        proto.tensor_content = np.ascontiguousarray(arr).astype(
            arr.dtype.newbyteorder("<")).tobytes()
        return proto
    flat = arr.reshape(-1)
    field = getattr(proto, _VAL_FIELD[dtype.name])
    if dtype.is_string:
        field.extend(bytes(v) for v in flat)
    elif dtype.name == "float16":
        field.extend(int(v) for v in flat.astype(np.float16).view(np.uint16))
    elif dtype.is_complex:
        field.extend(float(x) for v in flat for x in (v.real, v.imag))
    elif dtype == dtypes.bool:
        field.extend(bool(v) for v in flat)
    elif dtype.is_floating:
        field.extend(float(v) for v in flat)
    else:
        field.extend(int(v) for v in flat)
    return proto


def parse_tensor(serialized, out_type, name=None):
    """The tensor a serialized TensorProto holds (`tf.io.parse_tensor`); its dtype must be
    `out_type`.

    >>> t = tg.io.parse_tensor(tg.io.serialize_tensor(tg.constant([[1.5], [2.5]])), tg.float32)
    >>> tuple(t.shape), t.numpy().tolist()
    ((2, 1), [[1.5], [2.5]])
    """
    who = "tf.io.parse_tensor"
    out_type = dtypes.as_dtype(out_type)
    if isinstance(serialized, Tensor):
        if not serialized.dtype.is_string or serialized.ndim != 0:
            raise ValueError(f"{who}: serialized must be a scalar string, got "
                             f"{serialized.dtype.name} of shape {serialized.shape}")
        serialized = serialized.numpy()
    if isinstance(serialized, str):
        serialized = serialized.encode("latin-1")
    try:
        proto = TensorProto.FromString(bytes(serialized))
    except DecodeError:
        raise InvalidArgumentError(f"{who}: Could not parse `serialized` as TensorProto: "
                                   f"{bytes(serialized)[:40]!r}") from None
    got = _NAME.get(proto.dtype)
    if got != out_type.name:
        raise InvalidArgumentError(f"{who}: Type mismatch between parsed tensor "
                                   f"({_tf_name(got) if got else proto.dtype}) and dtype "
                                   f"({_tf_name(out_type.name)})")
    try:
        arr = make_ndarray(proto)
    except ValueError as e:
        raise InvalidArgumentError(f"{who}: {e}") from None
    if out_type.is_string:
        return Tensor(arr, _backend.lookup("cpu"))
    return convert_to_tensor(arr)


_RAW_TYPES = ("float16", "float32", "float64", "int32", "uint16", "uint8", "int16", "int8",
              "int64", "complex64", "complex128", "bool", "uint32", "uint64", "bfloat16")


def decode_raw(input_bytes, out_type, little_endian=True, fixed_length=None, name=None):
    """Reinterprets the bytes of each string as a vector of `out_type` numbers
    (`tf.io.decode_raw`): the output has the input's shape plus one axis; all strings must
    have the same length, a multiple of the dtype's size (or each is cut or zero-padded to
    `fixed_length` bytes).

    >>> tg.io.decode_raw(tg.constant([b"\\x01\\x00\\x02\\x00"]), tg.int16).numpy()
    array([[1, 2]], dtype=int16)
    """
    who = "tf.io.decode_raw"
    out_type = dtypes.as_dtype(out_type)
    if out_type.name not in _RAW_TYPES:
        raise TypeError(f"{who}: out_type must be one of {', '.join(_RAW_TYPES)}, got "
                        f"{out_type.name}")
    t = input_bytes if isinstance(input_bytes, Tensor) else convert_to_tensor(input_bytes)
    if not t.dtype.is_string:
        raise TypeError(f"{who}: input_bytes must be a tg.string tensor, got {t.dtype.name}")
    arr = host_array(t)
    npd = np.dtype(out_type._np).newbyteorder("<" if little_endian else ">")
    flat = [bytes(v) for v in arr.reshape(-1)]
    if fixed_length is not None:
        fixed_length = int(fixed_length)
        if fixed_length % npd.itemsize:
            raise InvalidArgumentError(f"{who}: fixed_length ({fixed_length}) must be a "
                                       f"multiple of the size of out_type ({npd.itemsize})")
        flat = [v[:fixed_length].ljust(fixed_length, b"\x00") for v in flat]
        width = fixed_length
    else:
        width = len(flat[0]) if flat else 0
        for i, v in enumerate(flat):
            if len(v) != width:
                raise InvalidArgumentError(f"{who}: DecodeRaw requires input strings to all be "
                                           f"the same size, but element {i} has size {len(v)} "
                                           f"!= {width}")
        if width % npd.itemsize:
            raise InvalidArgumentError(f"{who}: Input to DecodeRaw has length {width} that is "
                                       f"not a multiple of {npd.itemsize}, the size of "
                                       f"{_tf_name(out_type.name)}")
    data = np.frombuffer(b"".join(flat), dtype=npd).astype(npd.newbyteorder("="))
    return convert_to_tensor(data.reshape(arr.shape + (width // npd.itemsize,)))

