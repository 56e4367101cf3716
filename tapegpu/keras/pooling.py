"""Keras' pooling and spatial reshaping layers: `MaxPooling1D/2D/3D`, `AveragePooling1D/2D/3D`,
`GlobalAveragePooling1D/2D/3D`, `GlobalMaxPooling1D/2D/3D`, `ZeroPadding1D/2D`,
`UpSampling1D/2D`, `Cropping1D/2D`.

Arguments and defaults are Keras 3's: `strides` default to `pool_size`, `padding` is 'valid'
(default) or 'same' (the average then counts only the window's unpadded elements, as
TensorFlow), `data_format` is 'channels_last' (default) or 'channels_first'.
"""
import numpy as np

from .. import ops
from ..core.tensor import Tensor, convert_to_tensor
from ..ops.image import resize
from ..models.layers import Layer
from .conv_layers import (_NN_FORMATS, check_rank, conv_output_length, data_format_of,
                          padding_of, standardize_tuple)


class _Pooling(Layer):
    rank = None
    kind = None  # "MAX" or "AVG"

    def __init__(self, pool_size, strides=None, padding="valid", data_format=None, name=None,
                 **kwargs):
        super().__init__(name=name, **kwargs)
        self.pool_size = standardize_tuple(pool_size, self.rank, "pool_size")
        self.strides = self.pool_size if strides is None else \
            standardize_tuple(strides, self.rank, "strides")
        self.padding = padding_of(padding)
        self.data_format = data_format_of(data_format)

    def build(self, input_shape):
        check_rank(self, input_shape, self.rank + 2)
        spatial = input_shape[2:] if self.data_format == "channels_first" else input_shape[1:-1]
        lengths = [conv_output_length(n, k, s, 1, self.padding)
                   for n, k, s in zip(spatial, self.pool_size, self.strides)]
        if any(n <= 0 for n in lengths):
            raise ValueError(f"{type(self).__name__} {self.name!r}: computed output size would "
                             f"be negative or zero. Received inputs shape={tuple(input_shape)}, "
                             f"pool_size={self.pool_size}, strides={self.strides}, "
                             f"padding={self.padding!r}")

    def call(self, inputs):
        check_rank(self, inputs.shape, self.rank + 2)
        pool = ops.max_pool if self.kind == "MAX" else ops.avg_pool
        return pool(inputs, self.pool_size, self.strides, self.padding.upper(),
                    data_format=_NN_FORMATS[self.rank][self.data_format == "channels_first"])


class MaxPooling1D(_Pooling):
    """The maximum of each window of `pool_size` steps of `(batch, steps, channels)`.

    >>> x = tg.reshape(tg.constant([1.0, 3.0, 2.0, 5.0, 4.0]), (1, 5, 1))
    >>> tg.keras.layers.MaxPooling1D()(x).numpy().ravel()
    array([3., 5.], dtype=float32)
    """

    rank, kind = 1, "MAX"

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None, name=None,
                 **kwargs):
        super().__init__(pool_size, strides, padding, data_format, name, **kwargs)


class MaxPooling2D(_Pooling):
    """The maximum of each `pool_size` window of images `(batch, height, width, channels)`.

    >>> x = tg.reshape(tg.range(16.0), (1, 4, 4, 1))
    >>> tg.keras.layers.MaxPooling2D()(x)[0, :, :, 0].numpy()
    array([[ 5.,  7.],
           [13., 15.]], dtype=float32)
    """

    rank, kind = 2, "MAX"

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None,
                 name=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, name, **kwargs)


class MaxPooling3D(_Pooling):
    """The maximum of each `pool_size` window of volumes `(batch, d, h, w, channels)`.

    >>> tg.keras.layers.MaxPooling3D()(tg.ones((1, 4, 4, 4, 2))).shape
    (1, 2, 2, 2, 2)
    """

    rank, kind = 3, "MAX"

    def __init__(self, pool_size=(2, 2, 2), strides=None, padding="valid", data_format=None,
                 name=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, name, **kwargs)


class AveragePooling1D(_Pooling):
    """The mean of each window of `pool_size` steps of `(batch, steps, channels)`.

    >>> x = tg.reshape(tg.constant([1.0, 3.0, 2.0, 5.0, 4.0]), (1, 5, 1))
    >>> tg.keras.layers.AveragePooling1D(padding="same")(x).numpy().ravel()
    array([2. , 3.5, 4. ], dtype=float32)
    """

    rank, kind = 1, "AVG"

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None, name=None,
                 **kwargs):
        super().__init__(pool_size, strides, padding, data_format, name, **kwargs)


class AveragePooling2D(_Pooling):
    """The mean of each `pool_size` window of images `(batch, height, width, channels)`.

    >>> x = tg.reshape(tg.range(16.0), (1, 4, 4, 1))
    >>> tg.keras.layers.AveragePooling2D()(x)[0, :, :, 0].numpy()
    array([[ 2.5,  4.5],
           [10.5, 12.5]], dtype=float32)
    """

    rank, kind = 2, "AVG"

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None,
                 name=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, name, **kwargs)


class AveragePooling3D(_Pooling):
    """The mean of each `pool_size` window of volumes `(batch, d, h, w, channels)`.

    >>> tg.keras.layers.AveragePooling3D()(tg.ones((1, 4, 4, 4, 2))).shape
    (1, 2, 2, 2, 2)
    """

    rank, kind = 3, "AVG"

    def __init__(self, pool_size=(2, 2, 2), strides=None, padding="valid", data_format=None,
                 name=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, name, **kwargs)


class _GlobalPooling(Layer):
    rank = None
    kind = None

    def __init__(self, data_format=None, keepdims=False, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.data_format = data_format_of(data_format)
        self.keepdims = bool(keepdims)

    def build(self, input_shape):
        check_rank(self, input_shape, self.rank + 2)

    def call(self, inputs):
        check_rank(self, inputs.shape, self.rank + 2)
        first = 2 if self.data_format == "channels_first" else 1
        axes = list(range(first, first + self.rank))
        reduce = ops.reduce_max if self.kind == "MAX" else ops.reduce_mean
        return reduce(inputs, axis=axes, keepdims=self.keepdims)


class GlobalAveragePooling1D(_GlobalPooling):
    """The mean over the steps: `(batch, steps, channels)` -> `(batch, channels)` (or
    `(batch, 1, channels)` with `keepdims=True`). With a mask (bool `(batch, steps)`, given or
    carried by the input from `Embedding(mask_zero=True)` or `Masking`), the mean over the
    unmasked steps, as Keras; an example with every step masked gives 0 (Keras: 0/0 = NaN).

    >>> tg.keras.layers.GlobalAveragePooling1D()(tg.ones((2, 5, 3))).shape
    (2, 3)
    """

    rank, kind = 1, "AVG"
    supports_masking = True

    def call(self, inputs, mask=None):
        if mask is None:
            return super().call(inputs)
        check_rank(self, inputs.shape, 3)
        steps = 2 if self.data_format == "channels_first" else 1
        mask = mask if isinstance(mask, Tensor) else convert_to_tensor(mask)
        if mask._data.dtype.kind != "b" or mask.shape != (inputs.shape[0], inputs.shape[steps]):
            raise ValueError(f"GlobalAveragePooling1D {self.name!r}: mask must be bool of shape "
                             f"(batch, steps) = {(inputs.shape[0], inputs.shape[steps])}, got "
                             f"{mask.dtype.name} of shape {tuple(mask.shape)}")
        weight = ops.expand_dims(ops.cast(mask, inputs.dtype), 1 if steps == 2 else 2)
        total = ops.reduce_sum(inputs * weight, axis=steps, keepdims=self.keepdims)
        count = ops.reduce_sum(weight, axis=steps, keepdims=self.keepdims)
        return total / ops.maximum(count, 1.0)

    def compute_mask(self, inputs, mask=None):
        """None: the steps are reduced away."""
        return None


class GlobalAveragePooling2D(_GlobalPooling):
    """The mean over height and width: `(batch, h, w, channels)` -> `(batch, channels)`.

    >>> tg.keras.layers.GlobalAveragePooling2D(keepdims=True)(tg.ones((2, 4, 4, 3))).shape
    (2, 1, 1, 3)
    """

    rank, kind = 2, "AVG"


class GlobalAveragePooling3D(_GlobalPooling):
    """The mean over the three spatial axes.

    >>> tg.keras.layers.GlobalAveragePooling3D()(tg.ones((2, 3, 3, 3, 4))).shape
    (2, 4)
    """

    rank, kind = 3, "AVG"


class GlobalMaxPooling1D(_GlobalPooling):
    """The maximum over the steps: `(batch, steps, channels)` -> `(batch, channels)`.

    >>> tg.keras.layers.GlobalMaxPooling1D()(tg.ones((2, 5, 3))).shape
    (2, 3)
    """

    rank, kind = 1, "MAX"


class GlobalMaxPooling2D(_GlobalPooling):
    """The maximum over height and width: `(batch, h, w, channels)` -> `(batch, channels)`.

    >>> tg.keras.layers.GlobalMaxPooling2D()(tg.ones((2, 4, 4, 3))).shape
    (2, 3)
    """

    rank, kind = 2, "MAX"


class GlobalMaxPooling3D(_GlobalPooling):
    """The maximum over the three spatial axes.

    >>> tg.keras.layers.GlobalMaxPooling3D()(tg.ones((2, 3, 3, 3, 4))).shape
    (2, 4)
    """

    rank, kind = 3, "MAX"


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

# Keras' other spellings
MaxPool1D, MaxPool2D, MaxPool3D = MaxPooling1D, MaxPooling2D, MaxPooling3D
AvgPool1D, AvgPool2D, AvgPool3D = AveragePooling1D, AveragePooling2D, AveragePooling3D
GlobalAvgPool1D, GlobalAvgPool2D, GlobalAvgPool3D = \
    GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAveragePooling3D
GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPool3D = \
    GlobalMaxPooling1D, GlobalMaxPooling2D, GlobalMaxPooling3D
