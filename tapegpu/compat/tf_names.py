"""TensorFlow's top-level names that real TF2 programs use and tapegpu answers as TF does:
TF's own initializers (`tf.random_normal_initializer`, ...), `tf.name_scope`,
`tf.executing_eagerly`, `tf.get_logger`, `tf.group`, `tf.no_op`, `tf.is_tensor`, `tf.metrics`
(Keras' metrics) and `tf.test` (`gpu_device_name`, `is_gpu_available`, ...; `TestCase`, `main` and `Benchmark` are in
tf_test.py, imported when first used).
`install(tg)` puts them in place at the end of `import tapegpu`.

>>> init = tg.random_normal_initializer(mean=1.0, stddev=2.0, seed=1)
>>> tg.Variable(init(shape=[3], dtype=tg.float32)).shape
(3,)
"""
import logging
import sys

import numpy as np

from ..models import initializers as _init


# -- TF's initializers (tf.*_initializer): TF's defaults, float32 unless told (not floatx) ------

class random_normal_initializer(_init.RandomNormal):  # noqa: N801  (TF's name)
    """`tf.random_normal_initializer(mean=0.0, stddev=0.05, seed=None)`: N(mean, stddev^2);
    called with `(shape, dtype=tf.float32)`.

    >>> tg.random_normal_initializer()((2,)).dtype
    tg.float32
    """

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        super().__init__(mean, stddev, seed)

    def __call__(self, shape, dtype="float32", **kwargs):
        return super().__call__(shape, dtype)


class random_uniform_initializer(_init.RandomUniform):  # noqa: N801
    """`tf.random_uniform_initializer(minval=-0.05, maxval=0.05, seed=None)`: U[minval,
    maxval); called with `(shape, dtype=tf.float32)`.

    >>> float(tg.reduce_max(tg.random_uniform_initializer(0.0, 1.0)((100,)))) < 1.0
    True
    """

    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        super().__init__(minval, maxval, seed)

    def __call__(self, shape, dtype="float32", **kwargs):
        return super().__call__(shape, dtype)


class zeros_initializer(_init.Zeros):  # noqa: N801
    """`tf.zeros_initializer()`: zeros of `(shape, dtype=tf.float32)`.

    >>> tg.zeros_initializer()((2,)).numpy()
    array([0., 0.], dtype=float32)
    """

    def __call__(self, shape, dtype="float32", **kwargs):
        return super().__call__(shape, dtype)


class ones_initializer(_init.Ones):  # noqa: N801
    """`tf.ones_initializer()`: ones of `(shape, dtype=tf.float32)`.

    >>> tg.ones_initializer()((2,)).numpy()
    array([1., 1.], dtype=float32)
    """

    def __call__(self, shape, dtype="float32", **kwargs):
        return super().__call__(shape, dtype)


class constant_initializer(_init.Constant):  # noqa: N801
    """`tf.constant_initializer(value=0)`: `value` (a scalar, or a list/array of the shape's
    size, reshaped) of `(shape, dtype=tf.float32)`.

    >>> tg.constant_initializer([1, 2, 3, 4])((2, 2)).numpy()
    array([[1., 2.],
           [3., 4.]], dtype=float32)
    """

    def __init__(self, value=0):
        super().__init__(0.0)
        self.value = value

    def __call__(self, shape, dtype="float32", **kwargs):
        from ..core.tensor import constant
        value = np.asarray(self.value, dtype=np.dtype(getattr(dtype, "name", dtype)))
        if value.ndim == 0:
            return constant(np.full(tuple(shape), value))
        if value.size != int(np.prod(shape)):
            raise TypeError(f"constant_initializer: the value has {value.size} elements, the "
                            f"shape {tuple(shape)} needs {int(np.prod(shape))} (or give a "
                            f"scalar)")
        return constant(value.reshape(tuple(shape)))


# -- graph-era names that mean nothing eagerly ---------------------------------------------------

class name_scope:  # noqa: N801
    """`tf.name_scope(name)`: a context manager (tapegpu's ops carry no scoped names, so it
    only records the name, readable as `tg.get_current_name_scope()`).

    >>> with tg.name_scope("block") as scope:
    ...     tg.get_current_name_scope()
    'block'
    """

    _stack = []

    def __init__(self, name):
        if not isinstance(name, str):
            raise ValueError(f"name_scope: name must be a string, got {name!r}")
        self.name = name

    def __enter__(self):
        full = "/".join(name_scope._stack + [self.name]) if self.name else ""
        name_scope._stack.append(self.name)
        return full + "/" if full else ""

    def __exit__(self, *exc):
        name_scope._stack.pop()
        return False


def get_current_name_scope():
    """The names of the enclosing `tg.name_scope`s joined by '/' ('' outside any).

    >>> tg.get_current_name_scope()
    ''
    """
    return "/".join(n for n in name_scope._stack if n)


def executing_eagerly():
    """True outside a `tg.function`'s trace, False while tracing, as `tf.executing_eagerly`.

    >>> tg.executing_eagerly()
    True
    >>> tg.function(lambda x: tg.constant(tg.executing_eagerly()))(tg.zeros(1)).numpy()
    array(False)
    """
    from ..function import trace
    return not trace._thread.tracers


def get_logger():
    """TensorFlow's logger: Python's logger 'tensorflow' (`tf.get_logger`).

    >>> tg.get_logger().name
    'tensorflow'
    """
    return logging.getLogger("tensorflow")


def no_op(name=None):
    """Does nothing (`tf.no_op`); returns None.

    >>> tg.no_op()
    """
    return None


def group(*inputs, name=None):
    """Groups side effects (`tf.group`): eagerly they have happened already; returns None.

    >>> v = tg.Variable(1.0); tg.group(v.assign_add(1.0)); float(v)
    2.0
    """
    return None


def is_tensor(x):
    """Whether `x` is a tapegpu tensor or variable (`tf.is_tensor`).

    >>> tg.is_tensor(tg.zeros(2)), tg.is_tensor(np.zeros(2))
    (True, False)
    """
    from ..core.tensor import Tensor, Variable
    return isinstance(x, (Tensor, Variable))


# -- tf.test -------------------------------------------------------------------------------------

def gpu_device_name():
    """'/device:GPU:0' when a GPU is usable, else '' (`tf.test.gpu_device_name`).

    >>> isinstance(tg.test.gpu_device_name(), str)
    True
    """
    import tapegpu
    gpus = tapegpu.config.list_physical_devices("GPU")
    return "/device:GPU:0" if gpus else ""


def is_gpu_available(cuda_only=False, min_cuda_compute_capability=None):
    """Whether a GPU is usable (`tf.test.is_gpu_available`, deprecated in TF for
    `tf.config.list_physical_devices('GPU')`).

    >>> isinstance(tg.test.is_gpu_available(), bool)
    True
    """
    return bool(gpu_device_name())


def is_built_with_cuda():
    """True: tapegpu's GPU backends are CUDA's."""
    return True


def is_built_with_gpu_support():
    """True: tapegpu runs on NVIDIA GPUs when one is present."""
    return True


def is_built_with_rocm():
    """False: tapegpu has no ROCm backend."""
    return False


def is_built_with_xla():
    """False: tapegpu has no XLA."""
    return False


def is_cpu_target_available(cpu):
    return True


def install(tg):
    """Put the names in place on `tg` (called at the end of `import tapegpu`)."""
    mod = sys.modules[__name__]
    for name in ("random_normal_initializer", "random_uniform_initializer", "zeros_initializer",
                 "ones_initializer", "constant_initializer", "name_scope",
                 "get_current_name_scope", "executing_eagerly", "get_logger", "no_op", "group",
                 "is_tensor"):
        if name not in vars(tg):
            setattr(tg, name, getattr(mod, name))
    tg.metrics = tg.keras.metrics  # TF's lazy alias of Keras' metrics
    # tg.sparse, tg.SparseTensor, tg.ragged, tg.RaggedTensor: imported when first used
    # (tapegpu/compat/surface.py, LAZY)
    for name in ("gpu_device_name", "is_gpu_available", "is_built_with_cuda",
                 "is_built_with_gpu_support", "is_built_with_rocm", "is_built_with_xla",
                 "is_cpu_target_available"):
        setattr(tg.test, name, getattr(mod, name))
