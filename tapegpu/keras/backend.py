"""`tg.keras.backend`: Keras' backend settings (`floatx`, `set_floatx`, `epsilon`,
`image_data_format`, `clear_session`) and Keras 2's backend functions (`K.mean`,
`K.random_normal`, `K.square`, ...), which `tf.keras.backend` still has and real programs
still call (`import tensorflow.keras.backend as K`).

Keras 2's functions follow `tf.keras.backend`'s signatures and defaults: reductions take
`axis=None, keepdims=False`; the random functions draw floatx values; `variable`/`constant`
make floatx tensors from Python floats.

>>> K = tg.keras.backend
>>> K.mean(tg.constant([[1.0, 2.0], [3.0, 4.0]]), axis=1).numpy()
array([1.5, 3.5], dtype=float32)
>>> K.int_shape(tg.zeros((2, 3)))
(2, 3)
"""
import numpy as np

import builtins as _builtins
import sys as _sys

from ..core.floatx import floatx, set_floatx  # noqa: F401
from ..core.tensor import Tensor, Variable, constant as _constant, convert_to_tensor
from ..models.tensor_attributes import get_keras_mask, set_keras_mask  # noqa: F401
from .layers.base import Layer



class _Lazy:
    """`tapegpu` itself, read at call time (this module is imported while tapegpu is)."""

    def __getattr__(self, name):
        return getattr(_sys.modules["tapegpu"], name)


_tg = _Lazy()


def _alias(path, name=None):
    """Keras 2's `K.<name>`: the tapegpu function at `path`, looked up when called."""
    parts = path.split(".")

    def fn(*args, **kwargs):
        obj = _sys.modules["tapegpu"]
        for part in parts:
            obj = getattr(obj, part)
        return obj(*args, **kwargs)
    fn.__name__ = name or parts[-1]
    fn.__doc__ = f"`tg.{path}`, as Keras 2's `K.{fn.__name__}`."
    return fn


_EPSILON = [1e-7]
_IMAGE_DATA_FORMAT = ["channels_last"]
_UIDS = {}


def epsilon():
    """The fuzz factor of the losses and metrics (1e-7 unless `set_epsilon` changed it).

    >>> tg.keras.backend.epsilon()
    1e-07
    """
    return _EPSILON[0]


def set_epsilon(value):
    """Sets the fuzz factor `epsilon()` returns.

    >>> tg.keras.backend.set_epsilon(1e-5); tg.keras.backend.epsilon()
    1e-05
    >>> tg.keras.backend.set_epsilon(1e-7)
    """
    _EPSILON[0] = float(value)


def image_data_format():
    """'channels_last' (unless `set_image_data_format` changed it), as Keras.

    >>> tg.keras.backend.image_data_format()
    'channels_last'
    """
    return _IMAGE_DATA_FORMAT[0]


def set_image_data_format(data_format):
    """Sets the value `image_data_format()` returns: 'channels_last' or 'channels_first'.

    >>> tg.keras.backend.set_image_data_format("channels_last")
    """
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"set_image_data_format: the `data_format` argument must be one of "
                         f"{{'channels_first', 'channels_last'}}. Received: {data_format!r}")
    _IMAGE_DATA_FORMAT[0] = str(data_format)


def backend():
    """The name of the backend: 'tensorflow' (tapegpu has TensorFlow's semantics; code that
    branches on the backend takes TensorFlow's path).

    >>> tg.keras.backend.backend()
    'tensorflow'
    """
    return "tensorflow"


def clear_session(free_memory=True):
    """Resets Keras' layer-name counters (new layers are named 'dense', 'dense_1', ... again)
    and the uids of `get_uid`.

    >>> tg.keras.backend.clear_session(); tg.keras.layers.Dense(1).name
    'dense'
    """
    Layer._name_counts.clear()
    _UIDS.clear()


def get_uid(prefix=""):
    """1, 2, 3, ... on successive calls with the same `prefix` (since `clear_session`).

    >>> tg.keras.backend.clear_session(); tg.keras.backend.get_uid("x"), tg.keras.backend.get_uid("x")
    (1, 2)
    """
    _UIDS[prefix] = _UIDS.get(prefix, 0) + 1
    return _UIDS[prefix]


def standardize_dtype(dtype=None):
    """The dtype's name as a string (floatx for None), as Keras.

    >>> tg.keras.backend.standardize_dtype(np.float64)
    'float64'
    """
    if dtype is None:
        return floatx()
    if isinstance(dtype, str) and dtype in ("int", "float"):
        return {"int": "int64", "float": "float32"}[dtype]
    return _tg.as_dtype(dtype).name


def is_float_dtype(dtype):
    """Whether `dtype` is a floating dtype.

    >>> tg.keras.backend.is_float_dtype("float16"), tg.keras.backend.is_float_dtype("int32")
    (True, False)
    """
    return standardize_dtype(dtype).startswith(("float", "bfloat"))


def is_int_dtype(dtype):
    """Whether `dtype` is an integer dtype.

    >>> tg.keras.backend.is_int_dtype("uint8")
    True
    """
    return standardize_dtype(dtype).startswith(("int", "uint"))


def result_type(*dtypes):
    """The dtype `dtypes` promote to, as a string, by Keras' rules: integers join a floating
    dtype without widening it (int32 + float32 is float32), else numpy's promotion; floatx when
    none is given.

    >>> tg.keras.backend.result_type("int32", "float32")
    'float32'
    """
    if not dtypes:
        return floatx()
    nps = [np.dtype(standardize_dtype(d)) for d in dtypes]
    floats = [d for d in nps if d.kind in "fc"]
    return np.result_type(*(floats or nps)).name


def is_keras_tensor(x):
    """Whether `x` is a symbolic Keras tensor (a functional model's `Input` or what a layer
    made of one).

    >>> tg.keras.backend.is_keras_tensor(tg.keras.Input((2,))), tg.keras.backend.is_keras_tensor(tg.zeros(2))
    (True, False)
    """
    from .layers.core import KerasTensor
    return isinstance(x, KerasTensor)


def is_sparse(tensor):
    """False: tapegpu has no sparse tensors."""
    return False


def to_dense(tensor):
    """`tensor` itself (tapegpu's tensors are dense)."""
    return convert_to_tensor(tensor)


# -- Keras 2's backend functions (tf.keras.backend.*) --------------------------------------

def _fx(dtype):
    return dtype or floatx()


def cast_to_floatx(x):
    """`x` as a numpy array of floatx (as Keras 2).

    >>> tg.keras.backend.cast_to_floatx([1, 2]).dtype
    dtype('float32')
    """
    if isinstance(x, Tensor):
        return _tg.cast(x, floatx())
    return np.asarray(x, dtype=floatx())


def variable(value, dtype=None, name=None, constraint=None):
    """A `tg.Variable` of `value` (floatx by default).

    >>> tg.keras.backend.variable([1.0, 2.0]).dtype
    tg.float32
    """
    return Variable(np.asarray(value, dtype=_fx(dtype)) if not isinstance(value, Tensor)
                    else _tg.cast(value, _fx(dtype)), name=name)


def constant(value, dtype=None, shape=None, name=None):
    """A constant tensor of `value` (floatx by default).

    >>> tg.keras.backend.constant(2, shape=(2,)).numpy()
    array([2., 2.], dtype=float32)
    """
    arr = np.asarray(value, dtype=_fx(dtype))
    if shape is not None:
        arr = np.broadcast_to(arr, tuple(shape)).copy()
    return _constant(arr)


def get_value(x):
    """`x`'s value as a numpy array.

    >>> tg.keras.backend.get_value(tg.Variable([1.0]))
    array([1.], dtype=float32)
    """
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


eval = get_value  # noqa: A001  (Keras 2's name)


def batch_get_value(tensors):
    """The values of `tensors`, as numpy arrays."""
    return [get_value(t) for t in tensors]


def set_value(x, value):
    """Assigns `value` to the variable `x` (its dtype kept).

    >>> v = tg.Variable([1.0]); tg.keras.backend.set_value(v, [3.0]); v.numpy()
    array([3.], dtype=float32)
    """
    x.assign(np.asarray(value, dtype=x.dtype.as_numpy_dtype))


def batch_set_value(tuples):
    """`set_value(x, value)` for each pair."""
    for x, value in tuples:
        set_value(x, value)


def update(x, new_x):
    return x.assign(new_x)


def update_add(x, increment):
    return x.assign_add(increment)


def update_sub(x, decrement):
    return x.assign_sub(decrement)


def moving_average_update(x, value, momentum):
    """x = x * momentum + value * (1 - momentum), as Keras 2."""
    return x.assign(x * momentum + convert_to_tensor(value, dtype_hint=x.dtype) * (1 - momentum))


def dtype(x):
    """`x`'s dtype name.

    >>> tg.keras.backend.dtype(tg.zeros(2))
    'float32'
    """
    return convert_to_tensor(x).dtype.name


def int_shape(x):
    """`x`'s static shape as a tuple of ints (None for unknown).

    >>> tg.keras.backend.int_shape(tg.keras.Input((3,)))
    (None, 3)
    """
    shape = x.shape
    return tuple(getattr(shape, "as_list", lambda: list(shape))())


def ndim(x):
    return len(int_shape(x))


def shape(x):
    """`x`'s dynamic shape, as a tensor."""
    return _tg.shape(x)


def count_params(x):
    """The number of scalars in `x`."""
    return int(np.prod(int_shape(x)))


def ones(shape, dtype=None, name=None):
    return _tg.ones(shape, dtype=_fx(dtype))


def zeros(shape, dtype=None, name=None):
    return _tg.zeros(shape, dtype=_fx(dtype))


def ones_like(x, dtype=None, name=None):
    return _tg.ones_like(x, dtype=dtype)


def zeros_like(x, dtype=None, name=None):
    return _tg.zeros_like(x, dtype=dtype)


def eye(size, dtype=None, name=None):
    return _tg.eye(size, dtype=_fx(dtype))


def arange(start, stop=None, step=1, dtype="int32"):
    if stop is None:
        start, stop = 0, start
    return _tg.range(start, stop, step, dtype=dtype)


def cast(x, dtype):
    return _tg.cast(x, dtype)


def _reduction(path, name):
    tf_fn = _alias(path)

    def fn(x, axis=None, keepdims=False):
        return tf_fn(x, axis=axis, keepdims=keepdims)
    fn.__name__ = name
    fn.__doc__ = f"`tg.{path}(x, axis, keepdims)`, as Keras 2's `K.{name}`."
    return fn


sum = _reduction("reduce_sum", "sum")  # noqa: A001
mean = _reduction("reduce_mean", "mean")
max = _reduction("reduce_max", "max")  # noqa: A001
min = _reduction("reduce_min", "min")  # noqa: A001
prod = _reduction("reduce_prod", "prod")
var = _reduction("math.reduce_variance", "var")
std = _reduction("math.reduce_std", "std")


def any(x, axis=None, keepdims=False):  # noqa: A001
    return _tg.reduce_any(_tg.cast(x, "bool"), axis=axis, keepdims=keepdims)


def all(x, axis=None, keepdims=False):  # noqa: A001
    return _tg.reduce_all(_tg.cast(x, "bool"), axis=axis, keepdims=keepdims)


def argmax(x, axis=-1):
    return _tg.argmax(x, axis=axis)


def argmin(x, axis=-1):
    return _tg.argmin(x, axis=axis)


def cumsum(x, axis=0):
    return _tg.cumsum(x, axis=axis)


def cumprod(x, axis=0):
    return _tg.math.cumprod(x, axis=axis)


for _name, _path in {
        "abs": "abs", "square": "square", "exp": "exp", "log": "math.log", "sign": "sign",
        "sin": "sin", "cos": "cos", "tanh": "tanh", "sigmoid": "sigmoid",
        "softplus": "nn.softplus", "softsign": "nn.softsign", "round": "round", "pow": "pow",
        "equal": "equal", "not_equal": "not_equal", "greater": "greater",
        "greater_equal": "greater_equal", "less": "less", "less_equal": "less_equal",
        "maximum": "maximum", "minimum": "minimum", "stop_gradient": "stop_gradient",
        "transpose": "transpose", "reshape": "reshape", "tile": "tile", "gather": "gather",
        "one_hot": "one_hot", "map_fn": "map_fn", "foldl": "foldl", "foldr": "foldr"}.items():
    globals()[_name] = _alias(_path, _name)


def sqrt(x):
    """sqrt(max(x, 0)), as Keras 2 (negative inputs clipped to 0 first)."""
    x = convert_to_tensor(x)
    return _tg.sqrt(_tg.maximum(x, _tg.zeros_like(x)))


def clip(x, min_value, max_value):
    """`x` clipped to [min_value, max_value] (max_value raised to min_value if below)."""
    if max_value is not None and min_value is not None and max_value < min_value:
        max_value = min_value
    return _tg.clip_by_value(x, min_value, max_value)


def concatenate(tensors, axis=-1):
    return _tg.concat(list(tensors), axis=axis)


def stack(x, axis=0):
    return _tg.stack(list(x), axis=axis)


def expand_dims(x, axis=-1):
    return _tg.expand_dims(x, axis)


def squeeze(x, axis):
    return _tg.squeeze(x, [axis])


def flatten(x):
    return _tg.reshape(x, [-1])


def batch_flatten(x):
    """`x` as (batch, everything else).

    >>> tg.keras.backend.batch_flatten(tg.zeros((2, 3, 4))).shape
    (2, 12)
    """
    return _tg.reshape(x, [-1, int(np.prod(int_shape(x)[1:]))])


def permute_dimensions(x, pattern):
    return _tg.transpose(x, perm=list(pattern))


def repeat_elements(x, rep, axis):
    return _tg.repeat(x, rep, axis=axis)


def repeat(x, n):
    """(batch, dim) -> (batch, n, dim), as Keras 2's `K.repeat`."""
    return _tg.tile(_tg.expand_dims(x, 1), [1, n, 1])


def reverse(x, axes):
    return _tg.reverse(x, [axes] if isinstance(axes, int) else list(axes))


def dot(x, y):
    """Keras 2's `K.dot`: matmul over x's last and y's second-to-last axis (any ranks).

    >>> tg.keras.backend.dot(tg.ones((2, 3)), tg.ones((3, 4))).shape
    (2, 4)
    """
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    if len(x.shape) == 2 and len(y.shape) == 2:
        return _tg.matmul(x, y)
    return _tg.tensordot(x, y, axes=[[len(x.shape) - 1], [_builtins.max(len(y.shape) - 2, 0)]])


def batch_dot(x, y, axes=None):
    """Batchwise dot product, as Keras 2 (`axes` default: x's last, y's second-to-last for
    rank >= 3, else last)."""
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    if axes is None:
        axes = [len(x.shape) - 1, len(y.shape) - 2 if len(y.shape) > 2 else len(y.shape) - 1]
    if isinstance(axes, int):
        axes = [axes, axes]
    a, b = [ax % len(t.shape) for ax, t in zip(axes, (x, y))]
    letters = "abcdefghijklmnopq"
    xs = "z" + letters[:len(x.shape) - 1]
    ys = "z" + letters[len(x.shape) - 1:len(x.shape) + len(y.shape) - 2]
    ys = ys[:b] + xs[a] + ys[b + 1:]
    out = "".join(c for c in xs if c != xs[a]) + "".join(c for c in ys[1:] if c != xs[a])
    result = _tg.einsum(f"{xs},{ys}->{out}", x, y)
    return _tg.expand_dims(result, 1) if len(result.shape) == 1 else result


def switch(condition, then_expression, else_expression):
    """`then` where `condition`, else `else` (callables are called), as Keras 2."""
    t = then_expression() if callable(then_expression) else then_expression
    e = else_expression() if callable(else_expression) else else_expression
    if isinstance(condition, (bool, np.bool_)):
        return t if condition else e
    return _tg.where(_tg.cast(condition, "bool"), t, e)


def relu(x, alpha=0.0, max_value=None, threshold=0.0):
    """Keras 2's relu with `alpha` (leak), `max_value` and `threshold`."""
    x = convert_to_tensor(x)
    out = _tg.where(x > threshold, x, alpha * (x - threshold)) if (alpha or threshold) \
        else _tg.nn.relu(x)
    return out if max_value is None else _tg.minimum(out, max_value)


def elu(x, alpha=1.0):
    return _tg.nn.elu(x) if alpha == 1.0 else _tg.where(x > 0, x, alpha * (_tg.exp(x) - 1))


def softmax(x, axis=-1):
    return _tg.nn.softmax(x, axis=axis)


def hard_sigmoid(x):
    """clip(0.2 x + 0.5, 0, 1), as Keras 2."""
    return _tg.clip_by_value(0.2 * convert_to_tensor(x) + 0.5, 0.0, 1.0)


def l2_normalize(x, axis=None):
    return _tg.nn.l2_normalize(x, axis=axis)


def bias_add(x, bias, data_format=None):
    return _tg.nn.bias_add(x, bias)


def dropout(x, level, noise_shape=None, seed=None):
    return _tg.nn.dropout(x, rate=level, noise_shape=noise_shape, seed=seed)


def in_top_k(predictions, targets, k):
    return _tg.math.in_top_k(targets, predictions, k)


def batch_normalization(x, mean, var, beta, gamma, axis=-1, epsilon=1e-3):
    return _tg.nn.batch_normalization(x, mean, var, beta, gamma, epsilon)


def binary_crossentropy(target, output, from_logits=False):
    """Elementwise binary cross-entropy (no mean over the last axis), as Keras 2."""
    from ..models import losses
    target, output = convert_to_tensor(target), convert_to_tensor(output)
    return losses.binary_crossentropy(_tg.expand_dims(target, -1), _tg.expand_dims(output, -1),
                                      from_logits=from_logits)


def categorical_crossentropy(target, output, from_logits=False, axis=-1):
    from ..models import losses
    return losses.categorical_crossentropy(target, output, from_logits=from_logits, axis=axis)


def sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1):
    from ..models import losses
    return losses.sparse_categorical_crossentropy(target, output, from_logits=from_logits,
                                                  axis=axis)


def conv2d(x, kernel, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1)):
    """2-D convolution of NHWC `x` with an HWIO `kernel`, as Keras 2."""
    if (data_format or image_data_format()) != "channels_last":
        raise ValueError("conv2d: tapegpu's keras.backend.conv2d takes channels_last inputs; "
                         "transpose to NHWC first")
    return _tg.nn.conv2d(x, kernel, list(strides), padding.upper(),
                         dilations=list(dilation_rate))


def temporal_padding(x, padding=(1, 1)):
    return _tg.pad(x, [[0, 0], list(padding), [0, 0]])


def spatial_2d_padding(x, padding=((1, 1), (1, 1)), data_format=None):
    return _tg.pad(x, [[0, 0], list(padding[0]), list(padding[1]), [0, 0]])


def resize_images(x, height_factor, width_factor, data_format=None, interpolation="nearest"):
    """NHWC `x` upsampled by integer factors (as UpSampling2D)."""
    h, w = int_shape(x)[1:3]
    return _tg.image.resize(x, [h * height_factor, w * width_factor], method=interpolation)


def gradients(loss, variables):
    raise NotImplementedError(
        "tf.keras.backend.gradients is not available in tapegpu: it builds symbolic gradients "
        "in a TF1 graph. Instead: tg.GradientTape (tape.gradient(loss, variables))")


def name_scope(name):
    """A context manager naming nothing (tapegpu's ops have no name scopes), as tg.name_scope."""
    import contextlib
    return contextlib.nullcontext(name)


# -- Keras 2's random functions (floatx values) ----------------------------------------------

def random_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Normal samples of `shape` (floatx), as Keras 2's `K.random_normal`.

    >>> tg.keras.backend.random_normal((2, 3), seed=1).shape
    (2, 3)
    """
    return _tg.random.normal(shape, mean=mean, stddev=stddev, dtype=_fx(dtype), seed=seed)


def random_uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    return _tg.random.uniform(shape, minval=minval, maxval=maxval, dtype=_fx(dtype), seed=seed)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    return _tg.random.truncated_normal(shape, mean=mean, stddev=stddev, dtype=_fx(dtype),
                                       seed=seed)


def random_bernoulli(shape, p=0.0, dtype=None, seed=None):
    """1 with probability `p`, else 0, of `shape` (floatx), as Keras 2.

    >>> float(tg.reduce_sum(tg.keras.backend.random_bernoulli((100,), p=1.0)))
    100.0
    """
    u = _tg.random.uniform(shape, dtype=_fx(dtype), seed=seed)
    return _tg.cast(u < p, _fx(dtype))


random_binomial = random_bernoulli


def random_normal_variable(shape, mean, scale, dtype=None, name=None, seed=None):
    return Variable(random_normal(shape, mean, scale, dtype, seed), name=name)


def random_uniform_variable(shape, low, high, dtype=None, name=None, seed=None):
    return Variable(random_uniform(shape, low, high, dtype, seed), name=name)
