"""Keras' reshaping layers: `Flatten`, `Reshape`, `Permute`, `RepeatVector`, `ZeroPadding1D/2D`,
`Cropping1D/2D`, `UpSampling1D/2D`.

The spatial ones take Keras 3's arguments: `data_format` is 'channels_last' (default) or
'channels_first'.
"""
import numpy as np

from ... import ops
from ...ops.image import resize
from .base import Layer
from .convolutional import check_rank, data_format_of, standardize_tuple


class Flatten(Layer):
    """Reshapes `(batch, d1, d2, ...)` to `(batch, d1 * d2 * ...)`.

    >>> tg.layers.Flatten()(tg.zeros((2, 3, 4))).shape
    (2, 12)
    """

    def call(self, inputs):
        if inputs.ndim == 0:
            raise ValueError(f"Flatten {self.name!r}: inputs must have a batch axis, got a "
                             "scalar")
        if inputs.ndim == 1:
            return ops.expand_dims(inputs, 1)
        return ops.reshape(inputs, (inputs.shape[0], -1))


class Reshape(Layer):
    """Reshapes each example to `target_shape` (the batch axis is kept; one entry may be -1).

    >>> tg.layers.Reshape((3, 2))(tg.zeros((4, 6))).shape
    (4, 3, 2)
    """

    def __init__(self, target_shape, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        try:
            self.target_shape = tuple(int(d) for d in target_shape)
        except TypeError:
            raise TypeError(f"Reshape: target_shape must be a tuple of integers, got "
                            f"{target_shape!r}") from None
        if sum(d == -1 for d in self.target_shape) > 1 or \
                any(d < -1 or d == 0 for d in self.target_shape):
            raise ValueError(f"Reshape: target_shape must hold positive sizes and at most one "
                             f"-1, got {target_shape!r}")

    def call(self, inputs):
        per_example = int(np.prod(inputs.shape[1:]))
        known = int(np.prod([d for d in self.target_shape if d != -1]))
        if (-1 in self.target_shape and per_example % known) or \
                (-1 not in self.target_shape and known != per_example):
            raise ValueError(f"Reshape {self.name!r}: cannot reshape inputs of shape "
                             f"{inputs.shape} ({per_example} values per example) to "
                             f"target_shape {self.target_shape}")
        return ops.reshape(inputs, (inputs.shape[0],) + self.target_shape)


class Permute(Layer):
    """Permutes the non-batch axes: `dims` is a permutation of 1..rank-1 (1-based, as Keras).

    >>> tg.keras.layers.Permute((2, 1))(tg.zeros((4, 3, 5))).shape
    (4, 5, 3)
    """

    def __init__(self, dims, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.dims = tuple(dims)
        if sorted(self.dims) != list(range(1, len(self.dims) + 1)):
            raise ValueError(f"Permute: invalid permutation argument dims={dims!r}; dims must "
                             f"be a permutation of 1..{len(self.dims)} (the batch axis, 0, "
                             "stays first)")

    def call(self, inputs):
        if inputs.ndim != len(self.dims) + 1:
            raise ValueError(f"Permute {self.name!r}: dims={self.dims} permutes "
                             f"{len(self.dims)} axes, got inputs of shape {inputs.shape}")
        return ops.transpose(inputs, (0,) + self.dims)


class RepeatVector(Layer):
    """Repeats `(batch, features)` inputs `n` times: `(batch, n, features)`.

    >>> tg.keras.layers.RepeatVector(3)(tg.zeros((2, 4))).shape
    (2, 3, 4)
    """

    def __init__(self, n, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError(f"RepeatVector: expected an integer value for n, got {n!r}")
        self.n = int(n)

    def build(self, input_shape):
        check_rank(self, input_shape, 2)

    def call(self, inputs):
        check_rank(self, inputs.shape, 2)
        return ops.tile(ops.expand_dims(inputs, 1), (1, self.n, 1))


def _pairs(value, name, fn):
    """Keras' 2-D padding/cropping argument: an int, 2 ints (symmetric), or 2 pairs."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = int(value)
        if value < 0:
            raise ValueError(f"{fn}: `{name}` must be >= 0, got {name}={value}")
        return ((value, value), (value, value))
    if not hasattr(value, "__len__"):
        raise ValueError(f"`{name}` should be either an int, a tuple of 2 ints (symmetric "
                         f"height, symmetric width), or a tuple of 2 tuples of 2 ints ((top, "
                         f"bottom), (left, right)). Received: {name}={value!r}.")
    if len(value) != 2:
        raise ValueError(f"`{name}` should have two elements. Received: {name}={value!r}.")
    return tuple(standardize_tuple(v, 2, f"{'1st' if i == 0 else '2nd'} entry of {name}",
                                   allow_zero=True) for i, v in enumerate(value))


class _Spatial(Layer):
    """The reshaping layers' input checks: rank and data_format."""

    rank = None

    def build(self, input_shape):
        check_rank(self, input_shape, self.rank + 2)

    def _axis(self, i):
        """The tensor axis of spatial axis i."""
        return (2 if getattr(self, "data_format", "channels_last") == "channels_first" else 1) + i


class ZeroPadding1D(_Spatial):
    """Zeros before and after the steps of `(batch, steps, channels)`: `padding` an int or
    `(before, after)`.

    >>> tg.keras.layers.ZeroPadding1D(2)(tg.ones((1, 3, 1))).numpy().ravel()
    array([0., 0., 1., 1., 1., 0., 0.], dtype=float32)
    """

    rank = 1

    def __init__(self, padding=1, data_format=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.padding = standardize_tuple(padding, 2, "padding", allow_zero=True)
        self.data_format = data_format_of(data_format)

    def call(self, inputs):
        check_rank(self, inputs.shape, 3)
        pads = [[0, 0]] * 3
        pads[self._axis(0)] = list(self.padding)
        return ops.pad(inputs, pads)


class ZeroPadding2D(_Spatial):
    """Zero rows and columns around images: `padding` an int, `(symmetric_height,
    symmetric_width)` or `((top, bottom), (left, right))`.

    >>> tg.keras.layers.ZeroPadding2D(((1, 0), (0, 2)))(tg.ones((1, 2, 2, 1)))[0, :, :, 0].numpy()
    array([[0., 0., 0., 0.],
           [1., 1., 0., 0.],
           [1., 1., 0., 0.]], dtype=float32)
    """

    rank = 2

    def __init__(self, padding=(1, 1), data_format=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.padding = _pairs(padding, "padding", "ZeroPadding2D")
        self.data_format = data_format_of(data_format)

    def call(self, inputs):
        check_rank(self, inputs.shape, 4)
        pads = [[0, 0]] * 4
        for i in range(2):
            pads[self._axis(i)] = list(self.padding[i])
        return ops.pad(inputs, pads)


class Cropping1D(_Spatial):
    """Drops `cropping = (start, end)` steps (or an int for both) of `(batch, steps, channels)`.

    >>> tg.keras.layers.Cropping1D((1, 2))(tg.ones((1, 6, 2))).shape
    (1, 3, 2)
    """

    rank = 1

    def __init__(self, cropping=(1, 1), name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.cropping = standardize_tuple(cropping, 2, "cropping", allow_zero=True)

    def build(self, input_shape):
        super().build(input_shape)
        _check_crop(self, input_shape, (self.cropping,), 1)

    def call(self, inputs):
        check_rank(self, inputs.shape, 3)
        _check_crop(self, inputs.shape, (self.cropping,), 1)
        start, end = self.cropping
        return inputs[:, start:inputs.shape[1] - end, :]


class Cropping2D(_Spatial):
    """Drops rows and columns at the images' borders: `cropping` an int, `(symmetric_height,
    symmetric_width)` or `((top, bottom), (left, right))`.

    >>> tg.keras.layers.Cropping2D(((1, 0), (2, 1)))(tg.ones((1, 5, 6, 3))).shape
    (1, 4, 3, 3)
    """

    rank = 2

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.cropping = _pairs(cropping, "cropping", "Cropping2D")
        self.data_format = data_format_of(data_format)

    def build(self, input_shape):
        super().build(input_shape)
        _check_crop(self, input_shape, self.cropping, self._axis(0))

    def call(self, inputs):
        check_rank(self, inputs.shape, 4)
        first = self._axis(0)
        _check_crop(self, inputs.shape, self.cropping, first)
        index = [slice(None)] * 4
        for i, (lo, hi) in enumerate(self.cropping):
            index[first + i] = slice(lo, inputs.shape[first + i] - hi)
        return inputs[tuple(index)]


def _check_crop(layer, shape, cropping, first):
    for i, (lo, hi) in enumerate(cropping):
        if lo + hi >= shape[first + i]:
            raise ValueError(f"Values in `cropping` argument should be smaller than the "
                             f"corresponding spatial dimension of the input. Received: "
                             f"input_shape={tuple(shape)}, cropping={layer.cropping}")


class UpSampling1D(_Spatial):
    """Repeats each step `size` times: `(batch, steps, channels)` -> `(batch, steps * size,
    channels)`.

    >>> tg.keras.layers.UpSampling1D(2)(tg.constant([[[1.0], [2.0]]])).numpy().ravel()
    array([1., 1., 2., 2.], dtype=float32)
    """

    rank = 1

    def __init__(self, size=2, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.size = standardize_tuple(size, 1, "size")[0]

    def call(self, inputs):
        check_rank(self, inputs.shape, 3)
        return ops.repeat(inputs, self.size, axis=1)


_INTERPOLATIONS = ("nearest", "bilinear", "bicubic")


class UpSampling2D(_Spatial):
    """Enlarges images by `size = (rows, cols)`: 'nearest' repeats each pixel (default);
    'bilinear' and 'bicubic' interpolate with `tg.image.resize` (half-pixel centers, as Keras
    3 on TensorFlow).

    >>> x = tg.reshape(tg.constant([1.0, 2.0]), (1, 1, 2, 1))
    >>> tg.keras.layers.UpSampling2D((1, 2))(x)[0, :, :, 0].numpy()
    array([[1., 1., 2., 2.]], dtype=float32)
    """

    rank = 2

    def __init__(self, size=(2, 2), data_format=None, interpolation="nearest", name=None,
                 **kwargs):
        super().__init__(name=name, **kwargs)
        self.size = standardize_tuple(size, 2, "size")
        self.data_format = data_format_of(data_format)
        if interpolation not in _INTERPOLATIONS:
            raise ValueError(f"UpSampling2D: `interpolation` must be one of "
                             f"{list(_INTERPOLATIONS)}, got interpolation={interpolation!r}")
        self.interpolation = interpolation

    def call(self, inputs):
        check_rank(self, inputs.shape, 4)
        first = self._axis(0)
        if self.interpolation == "nearest":
            y = inputs
            for i in range(2):
                if self.size[i] != 1:
                    y = ops.repeat(y, self.size[i], axis=first + i)
            return y
        x = ops.transpose(inputs, (0, 2, 3, 1)) if first == 2 else inputs
        y = resize(x, [x.shape[1] * self.size[0], x.shape[2] * self.size[1]],
                   method=self.interpolation)
        if y.dtype != inputs.dtype:  # resize returns float32 for half-precision images
            y = ops.cast(y, inputs.dtype)
        return ops.transpose(y, (0, 3, 1, 2)) if first == 2 else y
