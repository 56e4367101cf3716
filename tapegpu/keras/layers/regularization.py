"""Keras' regularization layers: `Dropout`, `SpatialDropout1D/2D/3D`, `GaussianNoise`,
`GaussianDropout`, `ActivityRegularization`.

The dropout and noise layers are the identity outside training; their `seed` gives the layer
its own generator (else they draw from tapegpu's global stream, `tg.random.set_seed`).
"""
import numpy as np

from ... import ops
from ...ops.nn import dropout_drawn
from ...ops.random import normal, seeded_normal, seeded_uniform
from .base import Layer
from .convolutional import check_rank, data_format_of


class Dropout(Layer):
    """Zeroes inputs with probability `rate` in training and scales the rest by 1/(1 - rate);
    the identity in inference.

    >>> drop = tg.layers.Dropout(0.5, seed=0)
    >>> x = tg.ones((4, 4))
    >>> bool(tg.reduce_all(drop(x) == x))           # inference: unchanged
    True
    >>> sorted(set(drop(x, training=True).numpy().ravel().tolist()))
    [0.0, 2.0]
    """

    supports_masking = True  # passes its input's mask on (Keras)

    def __init__(self, rate, noise_shape=None, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"Dropout: rate must be in [0, 1), got {rate}")
        self.rate = float(rate)
        self.noise_shape = noise_shape
        self._generator = seeded_uniform(seed)

    def call(self, inputs, training=False):
        if not training or self.rate == 0.0:
            return inputs
        noise = None if self.noise_shape is None else \
            tuple(s if s is not None else d for s, d in zip(self.noise_shape, inputs.shape))
        if self._generator is None:
            return ops.dropout(inputs, self.rate, noise_shape=noise)
        return dropout_drawn(inputs, self.rate, noise, self._generator)


def _check_rate(layer_name, rate):
    if not 0.0 <= float(rate) <= 1.0:
        raise ValueError(f"{layer_name}: rate must be a float in [0, 1], got rate={rate!r}")
    return float(rate)


def _standard_normal(layer, shape, x):
    if layer._generator is None:
        return normal(shape, dtype=x.dtype, device=x._dev)
    return layer._generator(shape, x.dtype, x._dev)


class GaussianNoise(Layer):
    """Adds N(0, stddev^2) noise in training (`training=True`); the identity otherwise.

    >>> layer = tg.keras.layers.GaussianNoise(0.1, seed=0)
    >>> x = tg.ones((2, 3))
    >>> bool(tg.reduce_all(layer(x) == x)), bool(tg.reduce_all(layer(x, training=True) == x))
    (True, False)
    """

    supports_masking = True

    def __init__(self, stddev, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not 0.0 <= float(stddev) <= 1.0:
            raise ValueError(f"GaussianNoise: stddev must be a float in [0, 1], got "
                             f"stddev={stddev!r}")
        self.stddev, self.seed = float(stddev), seed
        self._generator = seeded_normal(seed)

    def call(self, inputs, training=False):
        if not training or self.stddev == 0.0:
            return inputs
        return inputs + _standard_normal(self, inputs.shape, inputs) * \
            ops.cast(self.stddev, inputs.dtype)


class GaussianDropout(Layer):
    """Multiplies by N(1, rate / (1 - rate)) noise in training (for 0 < rate < 1); the
    identity otherwise.

    >>> layer = tg.keras.layers.GaussianDropout(0.5, seed=0)
    >>> layer(tg.ones((2, 2)), training=True).shape
    (2, 2)
    """

    supports_masking = True

    def __init__(self, rate, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.rate, self.seed = _check_rate("GaussianDropout", rate), seed
        self._generator = seeded_normal(seed)

    def call(self, inputs, training=False):
        if not training or not 0.0 < self.rate < 1.0:
            return inputs
        stddev = np.sqrt(self.rate / (1.0 - self.rate))
        return inputs * (_standard_normal(self, inputs.shape, inputs) *
                         ops.cast(stddev, inputs.dtype) + ops.cast(1.0, inputs.dtype))


class _SpatialDropout(Layer):
    """Dropout of whole feature maps: one keep/drop decision per (example, channel)."""

    supports_masking = True
    rank = None

    def __init__(self, rate, seed=None, data_format=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.rate, self.seed = _check_rate(type(self).__name__, rate), seed
        self.data_format = data_format_of(data_format)
        self._generator = seeded_uniform(seed)

    def build(self, input_shape):
        check_rank(self, input_shape, self.rank + 2)

    def call(self, inputs, training=False):
        check_rank(self, inputs.shape, self.rank + 2)
        if not training or self.rate == 0.0:
            return inputs
        if self.rate == 1.0:
            return ops.zeros_like(inputs)
        b = inputs.shape[0]
        noise = (b, inputs.shape[1]) + (1,) * self.rank if \
            self.data_format == "channels_first" else (b,) + (1,) * self.rank + \
            (inputs.shape[-1],)
        if self._generator is None:
            return ops.dropout(inputs, self.rate, noise_shape=noise)
        return dropout_drawn(inputs, self.rate, noise, self._generator)


class SpatialDropout1D(_SpatialDropout):
    """Drops whole channels of `(batch, steps, channels)` inputs with probability `rate` in
    training (the rest scaled by 1 / (1 - rate)); the identity otherwise.

    >>> y = tg.keras.layers.SpatialDropout1D(0.5, seed=1)(tg.ones((2, 4, 3)), training=True)
    >>> bool(tg.reduce_all(tg.reduce_max(y, axis=1) == tg.reduce_min(y, axis=1)))
    True
    """

    rank = 1

    def __init__(self, rate, seed=None, name=None, **kwargs):
        super().__init__(rate, seed=seed, name=name, **kwargs)


class SpatialDropout2D(_SpatialDropout):
    """Drops whole feature maps of `(batch, rows, cols, channels)` inputs (channels_first:
    `(batch, channels, rows, cols)`) with probability `rate` in training; the identity
    otherwise.

    >>> tg.keras.layers.SpatialDropout2D(0.5)(tg.ones((2, 4, 4, 3)), training=True).shape
    (2, 4, 4, 3)
    """

    rank = 2


class SpatialDropout3D(_SpatialDropout):
    """Drops whole 3-D feature maps of `(batch, d1, d2, d3, channels)` inputs (or channels
    first) with probability `rate` in training; the identity otherwise.

    >>> tg.keras.layers.SpatialDropout3D(0.5)(tg.ones((1, 2, 2, 2, 3))).shape
    (1, 2, 2, 2, 3)
    """

    rank = 3


class ActivityRegularization(Layer):
    """The identity, adding `(l1 * sum|x| + l2 * sum(x^2)) / batch_size` of its output to
    `losses` (Keras 3's activity regularization; `fit` adds it to the loss). `losses` holds the
    penalty of the last call.

    >>> layer = tg.keras.layers.ActivityRegularization(l1=0.5)
    >>> _ = layer(tg.fill((2, 3), -1.0))
    >>> [float(x) for x in layer.losses]  # 0.5 * 6 / 2
    [1.5]
    """

    supports_masking = True

    def __init__(self, l1=0.0, l2=0.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.l1, self.l2 = float(l1), float(l2)
        self._activity_losses = []

    def call(self, inputs):
        penalty = ops.zeros((), dtype=inputs.dtype)
        if self.l1:
            penalty = penalty + self.l1 * ops.reduce_sum(ops.abs(inputs))
        if self.l2:
            penalty = penalty + self.l2 * ops.reduce_sum(ops.square(inputs))
        if inputs.ndim and inputs.shape[0]:
            penalty = penalty / inputs.shape[0]
        self._activity_losses = [penalty]
        return inputs
