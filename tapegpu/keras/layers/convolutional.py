"""Keras' convolution layers: `Conv1D`, `Conv2D`, `Conv3D`, `Conv1DTranspose`,
`Conv2DTranspose`, `DepthwiseConv2D`, `SeparableConv2D`, on `tg.nn`'s convolutions.

Arguments, defaults, weight names and shapes are Keras 3's: a `Conv2D` kernel is
`kernel_size + (in_channels // groups, filters)`, a `Conv2DTranspose` kernel
`kernel_size + (filters, in_channels)`, a `DepthwiseConv2D` kernel
`kernel_size + (in_channels, depth_multiplier)`. `data_format` is 'channels_last' (default) or
'channels_first'; `padding` is 'valid' or 'same' (and 'causal' for `Conv1D`).

The argument helpers here (`standardize_tuple`, `data_format_of`, `check_rank`) are shared
with the pooling, reshaping and regularization layers.
"""
import numpy as np

from ... import ops
from ...models import initializers, regularizers
from ...ops.nn import bias_act
from .activations import _FUSABLE, get_activation
from .base import Layer

# tg.nn's data_format names, by spatial rank: (channels_last, channels_first)
_NN_FORMATS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}


def standardize_tuple(value, n, name, allow_zero=False):
    """An int or `n` ints as a tuple of `n` ints, each > 0 (>= 0 with `allow_zero`)."""
    message = f"The `{name}` argument must be a tuple of {n} integers. Received {name}={value}"
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        values = (int(value),) * n
    else:
        try:
            values = tuple(value)
        except TypeError:
            raise ValueError(message) from None
        if len(values) != n or not all(isinstance(v, (int, np.integer)) and
                                        not isinstance(v, bool) for v in values):
            raise ValueError(message)
        values = tuple(int(v) for v in values)
    bad = sorted({v for v in values if (v < 0 if allow_zero else v <= 0)})
    if bad:
        raise ValueError(f"{message}, including values {bad} that do not satisfy "
                         f"`value {'>= 0' if allow_zero else '> 0'}`")
    return values


def data_format_of(value):
    """'channels_last' (for None too) or 'channels_first'; anything else is a ValueError."""
    if value is None:
        return "channels_last"
    fmt = str(value).lower()
    if fmt not in ("channels_last", "channels_first"):
        raise ValueError(f"The `data_format` argument must be one of 'channels_first', "
                         f"'channels_last'. Received: data_format={value!r}")
    return fmt


def padding_of(value, allow_causal=False):
    """'valid', 'same' (or 'causal'), case-insensitive."""
    allowed = ("valid", "same", "causal") if allow_causal else ("valid", "same")
    padding = value.lower() if isinstance(value, str) else value
    if padding not in allowed:
        raise ValueError(f"The `padding` argument must be one of {list(allowed)}. "
                         f"Received: padding={value!r}")
    return padding


def check_rank(layer, shape, ndim):
    """Keras' InputSpec error when an input does not have rank `ndim`."""
    if len(shape) != ndim:
        raise ValueError(f'Input 0 of layer "{layer.name}" is incompatible with the layer: '
                         f"expected ndim={ndim}, found ndim={len(shape)}. Full shape received: "
                         f"{tuple(shape)}")


def channels(layer, shape):
    return shape[1] if layer.data_format == "channels_first" else shape[-1]


def check_channels(layer, shape, expected):
    axis = 1 if layer.data_format == "channels_first" else -1
    if shape[axis] != expected:
        raise ValueError(f'Input 0 of layer "{layer.name}" is incompatible with the layer: '
                         f"expected axis {axis} of input shape to have value {expected}, but "
                         f"received input with shape {tuple(shape)}")


def conv_output_length(size, kernel, stride, dilation, padding):
    """Keras' output length of a convolution (or pooling) along one axis (None: unknown)."""
    if size is None:
        return None
    effective = (kernel - 1) * dilation + 1
    if padding == "same":
        return -(-size // stride)
    if padding == "causal":
        return (size - 1) // stride + 1
    return (size - effective) // stride + 1


class _Conv(Layer):
    """The convolution layers' common part: arguments, the kernel and bias, bias + activation."""

    rank = None

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, groups=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, dtype=None, name=None,
                 **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        kind = type(self).__name__
        if filters is not None and (int(filters) != filters or filters <= 0):
            raise ValueError(f"Invalid value for argument `filters`. Expected a strictly "
                             f"positive value. Received filters={filters}.")
        if int(groups) != groups or groups <= 0:
            raise ValueError(f"The number of groups must be a positive integer. Received: "
                             f"groups={groups}.")
        if filters is not None and filters % groups:
            raise ValueError(f"The number of filters must be evenly divisible by the number of "
                             f"groups. Received: groups={groups}, filters={filters}.")
        self.filters = None if filters is None else int(filters)
        self.groups = int(groups)
        self.kernel_size = standardize_tuple(kernel_size, self.rank, "kernel_size")
        self.strides = standardize_tuple(strides, self.rank, "strides")
        self.dilation_rate = standardize_tuple(dilation_rate, self.rank, "dilation_rate")
        self.padding = padding_of(padding, allow_causal=kind == "Conv1D")
        self.data_format = data_format_of(data_format)
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise ValueError(f"`strides > 1` not supported in conjunction with "
                             f"`dilation_rate > 1`. Received: strides={self.strides} and "
                             f"dilation_rate={self.dilation_rate}")
        self.activation = get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel = None
        self.bias = None

    @property
    def _nn_format(self):
        return _NN_FORMATS[self.rank][self.data_format == "channels_first"]

    def _spatial(self, shape):
        return tuple(shape[2:]) if self.data_format == "channels_first" else tuple(shape[1:-1])

    def _check_output(self, input_shape, lengths):
        if any(n is not None and n <= 0 for n in lengths):
            raise ValueError(f"{type(self).__name__} {self.name!r}: computed output size would "
                             f"be negative or zero. Received inputs shape={tuple(input_shape)}, "
                             f"kernel_size={self.kernel_size}, strides={self.strides}, "
                             f"padding={self.padding!r}, dilation_rate={self.dilation_rate}")

    def _add_bias(self, kernel_shape, bias_size):
        self.kernel = self.add_weight("kernel", kernel_shape, self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.bias = self.add_weight("bias", (bias_size,), self.bias_initializer,
                                        regularizer=self.bias_regularizer)

    def _finish(self, y):
        """bias and activation, the bias along the channel axis."""
        if not self.use_bias:
            return self.activation(y) if self.activation is not None else y
        if self.data_format == "channels_last":
            fused = _FUSABLE.get(self.activation)
            if fused is not None:
                return bias_act(y, self.bias, fused)
            y = y + self.bias
        else:
            y = y + ops.reshape(self.bias.value(), (1, -1) + (1,) * self.rank)
        return self.activation(y) if self.activation is not None else y

    def _checked(self, inputs, expected_channels):
        check_rank(self, inputs.shape, self.rank + 2)
        check_channels(self, inputs.shape, expected_channels)


class _ConvND(_Conv):
    """Conv1D, Conv2D, Conv3D."""

    def build(self, input_shape):
        check_rank(self, input_shape, self.rank + 2)
        cin = channels(self, input_shape)
        if cin % self.groups:
            raise ValueError(f"The number of input channels must be evenly divisible by the "
                             f"number of groups. Received groups={self.groups}, but the input "
                             f"has {cin} channels (full input shape is {tuple(input_shape)}).")
        self._check_output(input_shape, [
            conv_output_length(n, k, s, d, self.padding) for n, k, s, d in
            zip(self._spatial(input_shape), self.kernel_size, self.strides, self.dilation_rate)])
        self._add_bias(self.kernel_size + (cin // self.groups, self.filters), self.filters)

    def call(self, inputs):
        self._checked(inputs, self.kernel.shape[-2] * self.groups)
        x, padding = inputs, self.padding.upper()
        if self.padding == "causal":  # pad the start of the time axis; then a valid convolution
            pad = [[0, 0], [0, 0], [0, 0]]
            pad[2 if self.data_format == "channels_first" else 1][0] = \
                (self.kernel_size[0] - 1) * self.dilation_rate[0]
            x, padding = ops.pad(x, pad), "VALID"
        y = ops.convolution(x, self.kernel.value(), strides=self.strides, padding=padding,
                            data_format=self._nn_format, dilations=self.dilation_rate)
        return self._finish(y)


class Conv1D(_ConvND):
    """1-D convolution over `(batch, steps, channels)` ('channels_last') or
    `(batch, channels, steps)`; `padding` 'valid', 'same' or 'causal' (zeros before the first
    step, so output t sees inputs up to t).

    >>> conv = tg.keras.layers.Conv1D(4, 3, padding="same")
    >>> conv(tg.ones((2, 10, 3))).shape, conv.kernel.shape
    ((2, 10, 4), (3, 3, 4))
    """

    rank = 1

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, groups=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, dtype=None, name=None,
                 **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate,
                         groups, activation, use_bias, kernel_initializer, bias_initializer,
                         kernel_regularizer, bias_regularizer, dtype, name, **kwargs)


class Conv2D(_ConvND):
    """2-D convolution over images `(batch, height, width, channels)` ('channels_last') or
    `(batch, channels, height, width)`: `activation(conv2d(inputs, kernel) + bias)`.

    >>> conv = tg.keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="gelu")
    >>> conv(tg.ones((1, 28, 28, 1))).shape
    (1, 14, 14, 8)
    >>> conv.kernel.shape, conv.bias.shape
    ((3, 3, 1, 8), (8,))
    """

    rank = 2

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1), groups=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, dtype=None, name=None,
                 **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate,
                         groups, activation, use_bias, kernel_initializer, bias_initializer,
                         kernel_regularizer, bias_regularizer, dtype, name, **kwargs)


class Conv3D(_ConvND):
    """3-D convolution over volumes `(batch, depth, height, width, channels)`
    ('channels_last') or `(batch, channels, depth, height, width)`.

    >>> tg.keras.layers.Conv3D(2, 3)(tg.ones((1, 5, 5, 5, 1))).shape
    (1, 3, 3, 3, 2)
    """

    rank = 3

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid",
                 data_format=None, dilation_rate=(1, 1, 1), groups=1, activation=None,
                 use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, dtype=None, name=None,
                 **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate,
                         groups, activation, use_bias, kernel_initializer, bias_initializer,
                         kernel_regularizer, bias_regularizer, dtype, name, **kwargs)


def transpose_output_length(size, kernel, stride, dilation, padding, output_padding):
    """Keras' output length of a transposed convolution along one axis."""
    effective = (kernel - 1) * dilation + 1
    if padding == "valid":
        extra = max(effective, stride) - effective if output_padding is None else output_padding
        return (size - 1) * stride + effective + extra
    if output_padding is None:
        return size * stride
    return (size - 1) * stride + effective % 2 + output_padding


class _ConvTranspose(_Conv):
    """The transposed convolutions' common part: `output_padding`, the kernel
    `kernel_size + (filters, in_channels)` and its output lengths."""

    def __init__(self, filters, kernel_size, strides, padding, output_padding, data_format,
                 dilation_rate, activation, use_bias, kernel_initializer, bias_initializer,
                 kernel_regularizer, bias_regularizer, dtype, name, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, 1,
                         activation, use_bias, kernel_initializer, bias_initializer,
                         kernel_regularizer, bias_regularizer, dtype, name, **kwargs)
        self.output_padding = _output_padding(output_padding, self.strides, self.rank)

    def build(self, input_shape):
        check_rank(self, input_shape, self.rank + 2)
        self._check_output(input_shape, _transpose_lengths(self, input_shape))
        self._add_bias(self.kernel_size + (self.filters, channels(self, input_shape)),
                       self.filters)


class Conv2DTranspose(_ConvTranspose):
    """The transpose of `Conv2D` (its gradient with respect to its input), often called a
    deconvolution: it upsamples by `strides`. The kernel is `kernel_size + (filters,
    in_channels)`. Each spatial output length is `in * stride` ('same') or
    `(in - 1) * stride + max(kernel, stride)` ('valid'); `output_padding` (each < its stride)
    sets the extra length instead, as in Keras.

    >>> up = tg.keras.layers.Conv2DTranspose(4, 3, strides=2, padding="same")
    >>> up(tg.ones((1, 5, 5, 8))).shape, up.kernel.shape
    ((1, 10, 10, 4), (3, 3, 4, 8))
    """

    rank = 2

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid",
                 output_padding=None, data_format=None, dilation_rate=(1, 1), activation=None,
                 use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, dtype=None, name=None,
                 **kwargs):
        super().__init__(filters, kernel_size, strides, padding, output_padding, data_format,
                         dilation_rate, activation, use_bias, kernel_initializer,
                         bias_initializer, kernel_regularizer, bias_regularizer, dtype, name,
                         **kwargs)

    def call(self, inputs):
        self._checked(inputs, self.kernel.shape[-1])
        h, w = _transpose_lengths(self, inputs.shape)
        out_shape = (inputs.shape[0], self.filters, h, w) \
            if self.data_format == "channels_first" else (inputs.shape[0], h, w, self.filters)
        y = ops.conv2d_transpose(inputs, self.kernel.value(), out_shape, self.strides,
                                    padding=self.padding.upper(), data_format=self._nn_format,
                                    dilations=self.dilation_rate)
        return self._finish(y)


class Conv1DTranspose(_ConvTranspose):
    """The transpose of `Conv1D` over `(batch, steps, channels)` (or channels first): it
    upsamples the steps by `strides`. The kernel is `(kernel_size, filters, in_channels)`;
    output lengths and `output_padding` as `Conv2DTranspose`.

    >>> up = tg.keras.layers.Conv1DTranspose(4, 3, strides=2, padding="same")
    >>> up(tg.ones((1, 5, 8))).shape, up.kernel.shape
    ((1, 10, 4), (3, 4, 8))
    """

    rank = 1

    def __init__(self, filters, kernel_size, strides=1, padding="valid", output_padding=None,
                 data_format=None, dilation_rate=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, dtype=None, name=None,
                 **kwargs):
        super().__init__(filters, kernel_size, strides, padding, output_padding, data_format,
                         dilation_rate, activation, use_bias, kernel_initializer,
                         bias_initializer, kernel_regularizer, bias_regularizer, dtype, name,
                         **kwargs)

    def call(self, inputs):
        self._checked(inputs, self.kernel.shape[-1])
        (length,) = _transpose_lengths(self, inputs.shape)
        first = self.data_format == "channels_first"
        # as a 2-D transposed convolution over a height of 1
        x = ops.expand_dims(inputs, 2 if first else 1)
        kernel = ops.expand_dims(self.kernel.value(), 0)
        out_shape = (inputs.shape[0], self.filters, 1, length) if first else \
            (inputs.shape[0], 1, length, self.filters)
        y = ops.conv2d_transpose(x, kernel, out_shape, (1,) + self.strides,
                                 padding=self.padding.upper(),
                                 data_format="NCHW" if first else "NHWC",
                                 dilations=(1,) + self.dilation_rate)
        return self._finish(ops.squeeze(y, [2 if first else 1]))


def _output_padding(output_padding, strides, rank):
    if output_padding is None:
        return None
    pads = standardize_tuple(output_padding, rank, "output_padding", allow_zero=True)
    if any(p >= s for p, s in zip(pads, strides)):
        raise ValueError(f"Strides must be greater than output padding. Received "
                         f"strides={strides}, output_padding={pads}.")
    return pads


def _transpose_lengths(layer, input_shape):
    pads = layer.output_padding or (None,) * layer.rank
    return tuple(transpose_output_length(n, k, s, d, layer.padding, p) for n, k, s, d, p in
                 zip(layer._spatial(input_shape), layer.kernel_size, layer.strides,
                     layer.dilation_rate, pads))


class DepthwiseConv2D(_Conv):
    """Each input channel convolved with its own `depth_multiplier` filters: output channel
    `c * depth_multiplier + m` (tg.nn.depthwise_conv2d). The kernel is `kernel_size +
    (in_channels, depth_multiplier)` and is named 'kernel' (Keras 3; `depthwise_kernel` is the
    same variable, tf.keras 2's name).

    >>> dw = tg.keras.layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same")
    >>> dw(tg.ones((1, 6, 6, 3))).shape, dw.kernel.shape
    ((1, 6, 6, 6), (3, 3, 3, 2))
    """

    rank = 2

    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1,
                 data_format=None, dilation_rate=(1, 1), activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", bias_initializer="zeros",
                 depthwise_regularizer=None, bias_regularizer=None, dtype=None, name=None,
                 **kwargs):
        super().__init__(None, kernel_size, strides, padding, data_format, dilation_rate, 1,
                         activation, use_bias, depthwise_initializer, bias_initializer,
                         depthwise_regularizer, bias_regularizer, dtype, name, **kwargs)
        if int(depth_multiplier) != depth_multiplier or depth_multiplier <= 0:
            raise ValueError(f"Invalid value for argument `depth_multiplier`. Expected a "
                             f"strictly positive value. Received "
                             f"depth_multiplier={depth_multiplier}.")
        self.depth_multiplier = int(depth_multiplier)

    depthwise_kernel = property(lambda self: self.kernel)

    def build(self, input_shape):
        check_rank(self, input_shape, 4)
        cin = channels(self, input_shape)
        self._check_output(input_shape, [
            conv_output_length(n, k, s, d, self.padding) for n, k, s, d in
            zip(self._spatial(input_shape), self.kernel_size, self.strides, self.dilation_rate)])
        self._add_bias(self.kernel_size + (cin, self.depth_multiplier),
                       cin * self.depth_multiplier)

    def call(self, inputs):
        self._checked(inputs, self.kernel.shape[-2])
        y = ops.depthwise_conv2d(inputs, self.kernel.value(), self.strides,
                                    self.padding.upper(), data_format=self._nn_format,
                                    dilations=self.dilation_rate)
        return self._finish(y)


class SeparableConv2D(_Conv):
    """A depthwise convolution (`depthwise_kernel`, `kernel_size + (in_channels,
    depth_multiplier)`) followed by a 1x1 convolution (`pointwise_kernel`, `(1, 1, in_channels *
    depth_multiplier, filters)`), then the bias (`(filters,)`) and activation, as Keras.

    >>> sep = tg.keras.layers.SeparableConv2D(8, 3, padding="same")
    >>> sep(tg.ones((1, 6, 6, 3))).shape
    (1, 6, 6, 8)
    >>> [v.shape for v in sep.weights]
    [(3, 3, 3, 1), (1, 1, 3, 8), (8,)]
    """

    rank = 2

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1), depth_multiplier=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", pointwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, dtype=None, name=None,
                 **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, 1,
                         activation, use_bias, depthwise_initializer, bias_initializer,
                         depthwise_regularizer, bias_regularizer, dtype, name, **kwargs)
        if int(depth_multiplier) != depth_multiplier or depth_multiplier <= 0:
            raise ValueError(f"Invalid value for argument `depth_multiplier`. Expected a "
                             f"strictly positive value. Received "
                             f"depth_multiplier={depth_multiplier}.")
        self.depth_multiplier = int(depth_multiplier)
        self.pointwise_initializer = initializers.get(pointwise_initializer)
        self.pointwise_regularizer = regularizers.get(pointwise_regularizer)
        del self.bias  # set again below: the variables are listed in Keras' order
        self.depthwise_kernel = self.pointwise_kernel = self.bias = None

    def build(self, input_shape):
        check_rank(self, input_shape, 4)
        cin = channels(self, input_shape)
        self._check_output(input_shape, [
            conv_output_length(n, k, s, d, self.padding) for n, k, s, d in
            zip(self._spatial(input_shape), self.kernel_size, self.strides, self.dilation_rate)])
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel", self.kernel_size + (cin, self.depth_multiplier),
            self.kernel_initializer, regularizer=self.kernel_regularizer)
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel", (1, 1, cin * self.depth_multiplier, self.filters),
            self.pointwise_initializer, regularizer=self.pointwise_regularizer)
        if self.use_bias:
            self.bias = self.add_weight("bias", (self.filters,), self.bias_initializer,
                                        regularizer=self.bias_regularizer)

    def call(self, inputs):
        self._checked(inputs, self.depthwise_kernel.shape[-2])
        y = ops.depthwise_conv2d(inputs, self.depthwise_kernel.value(), self.strides,
                                    self.padding.upper(), data_format=self._nn_format,
                                    dilations=self.dilation_rate)
        y = ops.conv2d(y, self.pointwise_kernel.value(), 1, "VALID",
                          data_format=self._nn_format)
        return self._finish(y)

# Keras' other spellings
Convolution1D, Convolution2D, Convolution3D = Conv1D, Conv2D, Conv3D
Convolution1DTranspose, Convolution2DTranspose = Conv1DTranspose, Conv2DTranspose
