"""`keras.applications.MobileNetV2` (Sandler et al. 2018, "MobileNetV2: Inverted Residuals and
Linear Bottlenecks") with Keras' layers, layer names and parameter counts, and
`preprocess_input` (pixels to [-1, 1])."""
from ..layers.activations import CLASSIFIER_ACTIVATION, ReLU
from ..layers.convolutional import Conv2D, DepthwiseConv2D
from ..layers.merging import Add
from ..layers.normalization import BatchNormalization
from ..layers.reshaping import ZeroPadding2D
from . import imagenet_utils

# the inverted residual blocks after the first one: (output filters, stride) in order; every
# block expands its input channels 6 times
_BLOCKS = ((24, 2), (24, 1),
           (32, 2), (32, 1), (32, 1),
           (64, 2), (64, 1), (64, 1), (64, 1),
           (96, 1), (96, 1), (96, 1),
           (160, 2), (160, 1), (160, 1),
           (320, 1))


def _make_divisible(v, divisor=8):
    """The multiple of `divisor` nearest to v (at least divisor, and not below 0.9 v)."""
    rounded = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * v else rounded


def _batch_norm(x, name):
    return BatchNormalization(axis=-1, epsilon=1e-3, momentum=0.999, name=name)(x)


def _inverted_res_block(inputs, expansion, stride, alpha, filters, block_id):
    """1x1 expansion (not in block 0), 3x3 depthwise (stride 1 or 2), linear 1x1 projection;
    a residual connection when the shapes allow."""
    in_channels = inputs.shape[-1]
    out_channels = _make_divisible(int(filters * alpha))
    x = inputs
    prefix = f"block_{block_id}_" if block_id else "expanded_conv_"
    if block_id:
        x = Conv2D(expansion * in_channels, 1, padding="same", use_bias=False,
                   name=prefix + "expand")(x)
        x = _batch_norm(x, prefix + "expand_BN")
        x = ReLU(6.0, name=prefix + "expand_relu")(x)
    if stride == 2:
        x = ZeroPadding2D(imagenet_utils.correct_pad(x.shape[1:3], (3, 3)),
                          name=prefix + "pad")(x)
    x = DepthwiseConv2D(3, strides=stride, use_bias=False,
                        padding="same" if stride == 1 else "valid",
                        name=prefix + "depthwise")(x)
    x = _batch_norm(x, prefix + "depthwise_BN")
    x = ReLU(6.0, name=prefix + "depthwise_relu")(x)
    x = Conv2D(out_channels, 1, padding="same", use_bias=False, name=prefix + "project")(x)
    x = _batch_norm(x, prefix + "project_BN")
    if in_channels == out_channels and stride == 1:
        return Add(name=prefix + "add")([inputs, x])
    return x


def MobileNetV2(input_shape=None, alpha=1.0, include_top=True, weights="imagenet",  # noqa: N802
                input_tensor=None, pooling=None, classes=1000,
                classifier_activation=CLASSIFIER_ACTIVATION, name=None):
    """MobileNetV2 as a functional `keras.Model`, with Keras' layer structure and names.

    `input_shape` defaults to (224, 224, 3) (channels last; rows and cols at least 32), `alpha`
    scales the width (filters) of every layer, `include_top` adds global average pooling and a
    Dense 'predictions' layer of `classes` units (else `pooling` None, 'avg' or 'max').
    `weights` must be None or the path of a file written by `save_weights`: 'imagenet' (Keras'
    default, kept so that code expecting pretrained weights does not silently get random
    ones) raises, since nothing is downloaded here: build with weights=None, then
    `load_weights(path)`. With alpha=1.0 and the top: 3,538,984 parameters, as Keras.

    >>> model = tg.keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35,
    ...                                           classes=10, weights=None)
    >>> model.name, model.outputs[0].shape
    ('mobilenetv2_0.35_32', (None, 10))
    """
    fn = "MobileNetV2"
    imagenet_utils.check_weights(weights, include_top, classes, fn)
    if not alpha > 0:
        raise ValueError(f"{fn}: alpha must be > 0, got {alpha!r}")
    inputs = imagenet_utils.input_of(input_shape, input_tensor, 224, 32, include_top, fn)
    x = Conv2D(_make_divisible(32 * alpha), 3, strides=(2, 2), padding="same", use_bias=False,
               name="Conv1")(inputs)
    x = BatchNormalization(axis=-1, epsilon=1e-3, momentum=0.999, name="bn_Conv1")(x)
    x = ReLU(6.0, name="Conv1_relu")(x)
    x = _inverted_res_block(x, expansion=1, stride=1, alpha=alpha, filters=16, block_id=0)
    for block_id, (filters, stride) in enumerate(_BLOCKS, start=1):
        x = _inverted_res_block(x, expansion=6, stride=stride, alpha=alpha, filters=filters,
                                block_id=block_id)
    # the last 1x1 convolution widens with alpha > 1 only (as the paper)
    last = _make_divisible(1280 * alpha) if alpha > 1.0 else 1280
    x = Conv2D(last, 1, use_bias=False, name="Conv_1")(x)
    x = _batch_norm(x, "Conv_1_bn")
    x = ReLU(6.0, name="out_relu")(x)
    x = imagenet_utils.top(x, include_top, pooling, classes, classifier_activation, weights, fn)
    if name is None:
        name = f"mobilenetv2_{alpha:0.2f}_{inputs.shape[1]}"
    return imagenet_utils.finish(inputs, x, name, weights)


def preprocess_input(x, data_format=None):
    """Pixels in [0, 255] to [-1, 1] (`x / 127.5 - 1`), what MobileNetV2 expects.

    >>> tg.keras.applications.mobilenet_v2.preprocess_input(np.array([0.0, 127.5, 255.0]))
    array([-1.,  0.,  1.])
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")
