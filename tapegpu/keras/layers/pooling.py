"""Keras' pooling layers: `MaxPooling1D/2D/3D`, `AveragePooling1D/2D/3D`,
`GlobalAveragePooling1D/2D/3D`, `GlobalMaxPooling1D/2D/3D` (and Keras' shorter spellings,
`MaxPool2D`, `GlobalAvgPool2D`, ...).

Arguments and defaults are Keras 3's: `strides` default to `pool_size`, `padding` is 'valid'
(default) or 'same' (the average then counts only the window's unpadded elements, as
TensorFlow), `data_format` is 'channels_last' (default) or 'channels_first'.
"""
from ... import ops
from ...core.tensor import Tensor, convert_to_tensor
from .base import Layer
from .convolutional import (_NN_FORMATS, check_rank, conv_output_length, data_format_of,
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
        if any(n is not None and n <= 0 for n in lengths):
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


# Keras' other spellings
MaxPool1D, MaxPool2D, MaxPool3D = MaxPooling1D, MaxPooling2D, MaxPooling3D
AvgPool1D, AvgPool2D, AvgPool3D = AveragePooling1D, AveragePooling2D, AveragePooling3D
GlobalAvgPool1D, GlobalAvgPool2D, GlobalAvgPool3D = \
    GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAveragePooling3D
GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPool3D = \
    GlobalMaxPooling1D, GlobalMaxPooling2D, GlobalMaxPooling3D
