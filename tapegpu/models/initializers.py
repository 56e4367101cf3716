"""Weight initializers, named as in Keras (`'glorot_uniform'`, `'he_normal'`, `'zeros'`, ...).

An initializer is a callable `init(shape, dtype) -> Tensor`. Random ones draw from tapegpu's
generator (`tg.random.set_seed` makes them repeatable) or, with `seed=`, from their own.
Fan-in and fan-out follow Keras: for a kernel of shape (..., fan_in, fan_out) the leading axes
form the receptive field.
"""
import re
import math

import numpy as np

from ..ops import random as _random
from ..ops.creation import fill
from ..core.dtypes import np_dtype
from ..core.floatx import np_floatx as _floatx
from ..core.tensor import Tensor, constant


def _fans(shape):
    shape = tuple(shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    field = math.prod(shape[:-2])
    return shape[-2] * field, shape[-1] * field


class Initializer:
    """Base class: subclasses implement `__call__(shape, dtype=None)`."""

    def __call__(self, shape, dtype=None):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"


class Zeros(Initializer):
    """All zeros.

    >>> tg.models.initializers.Zeros()((2,)).numpy()
    array([0., 0.], dtype=float32)
    """

    def __call__(self, shape, dtype=None):
        return fill(tuple(shape), np.zeros((), np_dtype(dtype) or _floatx()))


class Ones(Initializer):
    """All ones.

    >>> tg.models.initializers.Ones()((2,)).numpy()
    array([1., 1.], dtype=float32)
    """

    def __call__(self, shape, dtype=None):
        return fill(tuple(shape), np.ones((), np_dtype(dtype) or _floatx()))


class Constant(Initializer):
    """Every element equal to `value`.

    >>> tg.models.initializers.Constant(0.5)((2,)).numpy()
    array([0.5, 0.5], dtype=float32)
    """

    def __init__(self, value=0.0):
        self.value = float(value)

    def __call__(self, shape, dtype=None):
        return fill(tuple(shape), np.asarray(self.value, np_dtype(dtype) or _floatx()))


class RandomNormal(Initializer):
    """N(mean, stddev^2).

    >>> tg.models.initializers.RandomNormal(stddev=0.1, seed=0)((3, 2)).shape
    (3, 2)
    """

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev = float(mean), float(stddev)
        self._rng = None if seed is None else np.random.default_rng(seed)

    def _normal(self, shape, dtype, stddev, truncated=False):
        rng = self._rng if self._rng is not None else _random._gen(None)
        z = rng.standard_normal(tuple(shape))
        while truncated and (bad := np.abs(z) > 2).any():
            z[bad] = rng.standard_normal(int(bad.sum()))
        return constant((z * stddev + self.mean).astype(np_dtype(dtype) or _floatx()))

    def __call__(self, shape, dtype=None):
        return self._normal(shape, dtype, self.stddev)


class RandomUniform(Initializer):
    """U[minval, maxval).

    >>> float(tg.reduce_max(tg.models.initializers.RandomUniform(-1.0, 1.0)((100,)))) < 1.0
    True
    """

    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        self.minval, self.maxval = float(minval), float(maxval)
        self._rng = None if seed is None else np.random.default_rng(seed)

    def __call__(self, shape, dtype=None):
        rng = self._rng if self._rng is not None else _random._gen(None)
        u = rng.uniform(self.minval, self.maxval, size=tuple(shape))
        return constant(u.astype(np_dtype(dtype) or _floatx()))


class VarianceScaling(Initializer):
    """Keras' VarianceScaling: variance `scale / n` with n the fan-in, fan-out or their mean;
    `distribution` is 'truncated_normal', 'untruncated_normal' or 'uniform'.

    >>> init = tg.models.initializers.VarianceScaling(2.0, "fan_in", "uniform", seed=0)
    >>> init((64, 32)).shape
    (64, 32)
    """

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None):
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"VarianceScaling: mode must be 'fan_in', 'fan_out' or 'fan_avg', "
                             f"got {mode!r}")
        if distribution not in ("truncated_normal", "untruncated_normal", "normal", "uniform"):
            raise ValueError(f"VarianceScaling: distribution must be 'truncated_normal', "
                             f"'untruncated_normal' or 'uniform', got {distribution!r}")
        self.scale, self.mode, self.distribution = float(scale), mode, distribution
        self._rng = None if seed is None else np.random.default_rng(seed)

    def __call__(self, shape, dtype=None):
        fan_in, fan_out = _fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[self.mode]
        var = self.scale / max(1.0, n)
        rng = self._rng if self._rng is not None else _random._gen(None)
        dt = np_dtype(dtype) or _floatx()
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * var)
            return constant(rng.uniform(-limit, limit, size=tuple(shape)).astype(dt))
        z = rng.standard_normal(tuple(shape))
        if self.distribution == "truncated_normal":
            while (bad := np.abs(z) > 2).any():
                z[bad] = rng.standard_normal(int(bad.sum()))
            z /= 0.87962566103423978  # stddev of N(0, 1) truncated to [-2, 2]
        return constant((z * math.sqrt(var)).astype(dt))


class GlorotUniform(VarianceScaling):
    """U[-l, l] with l = sqrt(6 / (fan_in + fan_out)) (Xavier uniform).

    >>> tg.initializers.GlorotUniform(seed=0)((64, 32)).shape
    (64, 32)
    """

    def __init__(self, seed=None):
        super().__init__(1.0, "fan_avg", "uniform", seed)


class GlorotNormal(VarianceScaling):
    """Truncated normal with variance 2 / (fan_in + fan_out).

    >>> tg.initializers.GlorotNormal(seed=0)((64, 32)).shape
    (64, 32)
    """

    def __init__(self, seed=None):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed)


class HeUniform(VarianceScaling):
    """U[-l, l] with l = sqrt(6 / fan_in).

    >>> tg.initializers.HeUniform(seed=0)((64, 32)).shape
    (64, 32)
    """

    def __init__(self, seed=None):
        super().__init__(2.0, "fan_in", "uniform", seed)


class HeNormal(VarianceScaling):
    """Truncated normal with variance 2 / fan_in.

    >>> tg.initializers.HeNormal(seed=0)((64, 32)).shape
    (64, 32)
    """

    def __init__(self, seed=None):
        super().__init__(2.0, "fan_in", "truncated_normal", seed)


class LecunNormal(VarianceScaling):
    """Truncated normal with variance 1 / fan_in.

    >>> tg.initializers.LecunNormal(seed=0)((64, 32)).shape
    (64, 32)
    """

    def __init__(self, seed=None):
        super().__init__(1.0, "fan_in", "truncated_normal", seed)


class Orthogonal(Initializer):
    """A random orthogonal matrix times `gain` (Keras' Orthogonal): the QR decomposition of a
    normal matrix, signs fixed by R's diagonal. Shapes of rank > 2 are flattened to
    (prod(shape[:-1]), shape[-1]); the rows are orthonormal when there are fewer rows than
    columns, else the columns.

    >>> q = tg.initializers.Orthogonal(seed=0)((3, 3)).numpy()
    >>> bool(np.allclose(q @ q.T, np.eye(3), atol=1e-6))
    True
    """

    def __init__(self, gain=1.0, seed=None):
        self.gain = float(gain)
        self._rng = None if seed is None else np.random.default_rng(seed)

    def __call__(self, shape, dtype=None):
        shape = tuple(shape)
        if len(shape) < 2:
            raise ValueError(f"Orthogonal: the shape must have rank >= 2, got {shape}")
        rows, cols = math.prod(shape[:-1]), shape[-1]
        rng = self._rng if self._rng is not None else _random._gen(None)
        a = rng.standard_normal((max(rows, cols), min(rows, cols)))
        q, r = np.linalg.qr(a)
        q = q * np.where(np.diag(r) < 0, -1.0, 1.0)  # a unique Q: R's diagonal made positive
        if rows < cols:
            q = q.T
        return constant((self.gain * q.reshape(shape)).astype(np_dtype(dtype) or _floatx()))


_BY_NAME = {
    "zeros": Zeros, "ones": Ones, "constant": Constant, "random_normal": RandomNormal,
    "random_uniform": RandomUniform, "glorot_uniform": GlorotUniform,
    "glorot_normal": GlorotNormal, "he_uniform": HeUniform, "he_normal": HeNormal,
    "lecun_normal": LecunNormal, "variance_scaling": VarianceScaling,
    "uniform": RandomUniform, "normal": RandomNormal,  # Keras' short aliases
    "orthogonal": Orthogonal,
}


def get(identifier):
    """An initializer from a Keras name, an initializer, or any callable `(shape, dtype)`.

    >>> tg.models.initializers.get("zeros")((2,)).numpy()
    array([0., 0.], dtype=float32)
    """
    if isinstance(identifier, str):
        key = _snake_name(identifier)
        if key not in _BY_NAME:
            raise ValueError(f"unknown initializer {identifier!r}; valid names: "
                             f"{sorted(_BY_NAME)}, or pass a callable (shape, dtype) -> tensor")
        return _BY_NAME[key]()
    if isinstance(identifier, type) and issubclass(identifier, Initializer):
        return identifier()  # the class itself (kernel_initializer=GlorotUniform), as Keras
    if callable(identifier):
        return identifier
    raise TypeError(f"an initializer must be a name or a callable (shape, dtype), got "
                    f"{identifier!r}")


def _snake_name(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def make(initializer, shape, dtype):
    """Calls an initializer and checks the result (shape and dtype) for a clear error.

    >>> tg.initializers.make(tg.initializers.get("ones"), (2,), "float64").numpy()
    array([1., 1.])
    """
    value = initializer(tuple(shape), dtype)
    if not isinstance(value, Tensor):
        value = constant(np.asarray(value, dtype=np_dtype(dtype)))
    if tuple(value.shape) != tuple(shape) or value._data.dtype != np_dtype(dtype):
        raise ValueError(f"initializer {initializer!r} returned {value.dtype.name}"
                         f"{list(value.shape)}; expected {np.dtype(np_dtype(dtype)).name}"
                         f"{list(shape)}")
    return value
