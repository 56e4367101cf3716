"""`keras.random`: Keras 3's random functions (`normal`, `uniform`, `randint`,
`truncated_normal`, `categorical`, `dropout`, `shuffle`, `gamma`, `beta`, `binomial`) and
`SeedGenerator`, on tapegpu's generator. `seed` is None (the global generator, which
`tg.random.set_seed` / `keras.utils.set_random_seed` seed), an int (the same values for the
same int, as Keras), or a `SeedGenerator` (a new draw at each call, repeatable from its seed).
Floating results default to Keras' floatx.

>>> tg.keras.random.normal((2, 3), seed=1).shape
(2, 3)
>>> bool(tg.reduce_all(tg.keras.random.normal((4,), seed=7) == tg.keras.random.normal((4,), seed=7)))
True
"""
import numpy as np

from ..core.floatx import floatx
from ..core.tensor import constant, convert_to_tensor
from ..ops import random as _random


class SeedGenerator:
    """A source of seeds (`keras.random.SeedGenerator(seed=None)`): each random call given it
    draws new values; two generators made with the same seed draw the same sequence.

    >>> g = tg.keras.random.SeedGenerator(42)
    >>> a = tg.keras.random.uniform((2,), seed=g); b = tg.keras.random.uniform((2,), seed=g)
    >>> bool(tg.reduce_all(a == b))
    False
    """

    def __init__(self, seed=None, name=None, **kwargs):
        if seed is not None and not isinstance(seed, (int, np.integer)):
            raise ValueError(f"SeedGenerator: seed must be an integer or None, got {seed!r}")
        self.seed = seed
        self.name = name or "seed_generator"
        self._rng = np.random.default_rng(seed)

    def next(self, ordered=True):
        return int(self._rng.integers(0, 2 ** 31 - 1))


def _rng(seed):
    """A numpy Generator for `seed`: the global one (None), a fresh one from an int, the
    generator's next draw (a SeedGenerator)."""
    if seed is None:
        return _random._gen(None)
    if isinstance(seed, SeedGenerator):
        return np.random.default_rng(seed.next())
    if isinstance(seed, (int, np.integer)):
        return np.random.default_rng(int(seed))
    raise ValueError(f"keras.random: seed must be None, an int or a keras.random.SeedGenerator, "
                     f"got {seed!r}")


def _fdtype(dtype):
    return np.dtype(getattr(dtype, "name", dtype) or floatx())


def normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Samples of N(mean, stddev^2).

    >>> tg.keras.random.normal((2,), dtype="float64", seed=0).dtype
    tg.float64
    """
    z = _rng(seed).standard_normal(tuple(shape))
    return constant((z * stddev + mean).astype(_fdtype(dtype)))


def uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    """Samples of U[minval, maxval).

    >>> float(tg.reduce_min(tg.keras.random.uniform((100,), 2.0, 3.0, seed=0))) >= 2.0
    True
    """
    u = _rng(seed).uniform(minval, maxval, size=tuple(shape))
    return constant(u.astype(_fdtype(dtype)))


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """N(mean, stddev^2) redrawn beyond two standard deviations.

    >>> float(tg.reduce_max(tg.abs(tg.keras.random.truncated_normal((1000,), seed=0)))) <= 2.0
    True
    """
    rng = _rng(seed)
    z = rng.standard_normal(tuple(shape))
    while (bad := np.abs(z) > 2).any():
        z[bad] = rng.standard_normal(int(bad.sum()))
    return constant((z * stddev + mean).astype(_fdtype(dtype)))


def randint(shape, minval, maxval, dtype="int32", seed=None):
    """Integers uniform in [minval, maxval).

    >>> v = tg.keras.random.randint((50,), 0, 3, seed=0).numpy(); v.dtype, int(v.min()) >= 0, int(v.max()) < 3
    (dtype('int32'), True, True)
    """
    r = _rng(seed).integers(minval, maxval, size=tuple(shape))
    return constant(r.astype(np.dtype(getattr(dtype, "name", dtype))))


def categorical(logits, num_samples, dtype="int32", seed=None):
    """`num_samples` class indices per row of `logits` (batch, classes), drawn from
    softmax(logits).

    >>> tg.keras.random.categorical(tg.constant([[0.0, 100.0]]), 3, seed=0).numpy()
    array([[1, 1, 1]], dtype=int32)
    """
    lg = np.asarray(convert_to_tensor(logits).numpy(), dtype=np.float64)
    if lg.ndim != 2:
        raise ValueError(f"keras.random.categorical: logits must have shape (batch, classes), "
                         f"got {lg.shape}")
    p = np.exp(lg - lg.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    rng = _rng(seed)
    out = np.stack([rng.choice(lg.shape[1], size=num_samples, p=row) for row in p])
    return constant(out.astype(np.dtype(getattr(dtype, "name", dtype))))


def dropout(inputs, rate, noise_shape=None, seed=None):
    """`inputs` with a `rate` fraction zeroed and the rest scaled by 1 / (1 - rate).

    >>> tg.keras.random.dropout(tg.ones((4,)), 0.0).numpy()
    array([1., 1., 1., 1.], dtype=float32)
    """
    x = convert_to_tensor(inputs)
    if not 0 <= rate < 1:
        raise ValueError(f"keras.random.dropout: rate must be in [0, 1), got {rate!r}")
    shape = tuple(noise_shape) if noise_shape is not None else tuple(x.shape)
    keep = _rng(seed).uniform(size=shape) >= rate
    mask = constant((keep / (1.0 - rate)).astype(x.dtype.as_numpy_dtype))
    return x * mask


def shuffle(x, axis=0, seed=None):
    """`x` with its entries along `axis` permuted.

    >>> sorted(tg.keras.random.shuffle(tg.constant([1, 2, 3]), seed=0).numpy().tolist())
    [1, 2, 3]
    """
    from .. import ops
    x = convert_to_tensor(x)
    perm = _rng(seed).permutation(int(x.shape[axis]))
    return ops.gather(x, constant(perm.astype(np.int64)), axis=axis)


def gamma(shape, alpha, dtype=None, seed=None):
    """Samples of Gamma(alpha, 1).

    >>> tg.keras.random.gamma((3,), 2.0, seed=0).shape
    (3,)
    """
    return constant(_rng(seed).gamma(alpha, size=tuple(shape)).astype(_fdtype(dtype)))


def beta(shape, alpha, beta, dtype=None, seed=None):
    """Samples of Beta(alpha, beta).

    >>> 0 <= float(tg.keras.random.beta((), 2.0, 3.0, seed=0)) <= 1
    True
    """
    return constant(np.asarray(_rng(seed).beta(alpha, beta, size=tuple(shape)))
                    .astype(_fdtype(dtype)))


def binomial(shape, counts, probabilities, dtype=None, seed=None):
    """Samples of Binomial(counts, probabilities), as floats (Keras' default dtype).

    >>> tg.keras.random.binomial((2,), 5, 1.0, seed=0).numpy()
    array([5., 5.], dtype=float32)
    """
    return constant(np.asarray(_rng(seed).binomial(counts, probabilities, size=tuple(shape)))
                    .astype(_fdtype(dtype)))
