"""`keras.applications.EfficientNetB0` ... `B7` (Tan and Le 2019, "EfficientNet: Rethinking
Model Scaling for Convolutional Neural Networks") with Keras 3's layers, names and parameter
counts (B0: 5,330,571 with the top), and `preprocess_input` (the identity: the models rescale
and normalise their inputs themselves)."""
import math

from ...models.initializers import VarianceScaling
from ..layers.activations import CLASSIFIER_ACTIVATION, Activation
from ..layers.convolutional import Conv2D, DepthwiseConv2D
from ..layers.core import Dense
from ..layers.merging import Add, Multiply
from ..layers.normalization import BatchNormalization
from ..layers.pooling import GlobalAveragePooling2D, GlobalMaxPooling2D
from ..layers.preprocessing import Normalization, Rescaling
from ..layers.regularization import Dropout
from ..layers.reshaping import Reshape, ZeroPadding2D
from . import imagenet_utils

# the stages: kernel, repeats, filters in, filters out, expansion, stride (squeeze-and-excite
# ratio 0.25 and identity skips everywhere)
_STAGES = ((3, 1, 32, 16, 1, 1), (3, 2, 16, 24, 6, 2), (5, 2, 24, 40, 6, 2),
           (3, 3, 40, 80, 6, 2), (5, 3, 80, 112, 6, 1), (5, 4, 112, 192, 6, 2),
           (3, 1, 192, 320, 6, 1))
_SE_RATIO = 0.25


def _conv_init():
    return VarianceScaling(scale=2.0, mode="fan_out", distribution="truncated_normal")


def _round_filters(filters, width, divisor=8):
    filters *= width
    rounded = max(divisor, int(filters + divisor / 2) // divisor * divisor)
    return int(rounded + divisor if rounded < 0.9 * filters else rounded)


def _pad(x, kernel):
    """Keras' correct_pad for x's spatial size (an unknown size pads as an even one)."""
    shape = tuple(2 if d is None else d for d in x.shape[1:3])
    return imagenet_utils.correct_pad(shape, (kernel, kernel))


def _block(x, name, filters_in, filters_out, kernel, stride, expand, drop_rate):
    """An inverted residual (MBConv) block with squeeze-and-excite, named as Keras'."""
    inputs = x
    filters = filters_in * expand
    if expand != 1:
        x = Conv2D(filters, 1, padding="same", use_bias=False, kernel_initializer=_conv_init(),
                   name=name + "expand_conv")(x)
        x = BatchNormalization(axis=-1, name=name + "expand_bn")(x)
        x = Activation("swish", name=name + "expand_activation")(x)
    if stride == 2:
        x = ZeroPadding2D(_pad(x, kernel), name=name + "dwconv_pad")(x)
    x = DepthwiseConv2D(kernel, strides=stride, padding="valid" if stride == 2 else "same",
                        use_bias=False, depthwise_initializer=_conv_init(),
                        name=name + "dwconv")(x)
    x = BatchNormalization(axis=-1, name=name + "bn")(x)
    x = Activation("swish", name=name + "activation")(x)
    filters_se = max(1, int(filters_in * _SE_RATIO))
    se = GlobalAveragePooling2D(name=name + "se_squeeze")(x)
    se = Reshape((1, 1, filters), name=name + "se_reshape")(se)
    se = Conv2D(filters_se, 1, padding="same", activation="swish",
                kernel_initializer=_conv_init(), name=name + "se_reduce")(se)
    se = Conv2D(filters, 1, padding="same", activation="sigmoid",
                kernel_initializer=_conv_init(), name=name + "se_expand")(se)
    x = Multiply(name=name + "se_excite")([x, se])
    x = Conv2D(filters_out, 1, padding="same", use_bias=False, kernel_initializer=_conv_init(),
               name=name + "project_conv")(x)
    x = BatchNormalization(axis=-1, name=name + "project_bn")(x)
    if stride == 1 and filters_in == filters_out:
        if drop_rate > 0:
            x = Dropout(drop_rate, noise_shape=(None, 1, 1, 1), name=name + "drop")(x)
        x = Add(name=name + "add")([x, inputs])
    return x


def _efficientnet(width, depth, default_size, dropout_rate, name, include_top, weights,
                  input_tensor, input_shape, pooling, classes, classifier_activation, fn):
    imagenet_utils.check_weights(weights, include_top, classes, fn)
    inputs = imagenet_utils.input_of(input_shape, input_tensor, default_size, 32, include_top,
                                     fn)
    x = Rescaling(1.0 / 255.0)(inputs)
    x = Normalization(axis=-1)(x)
    x = ZeroPadding2D(_pad(x, 3), name="stem_conv_pad")(x)
    x = Conv2D(_round_filters(32, width), 3, strides=2, padding="valid", use_bias=False,
               kernel_initializer=_conv_init(), name="stem_conv")(x)
    x = BatchNormalization(axis=-1, name="stem_bn")(x)
    x = Activation("swish", name="stem_activation")(x)
    repeats = [int(math.ceil(depth * s[1])) for s in _STAGES]
    total, b = float(sum(repeats)), 0
    for i, ((kernel, _, f_in, f_out, expand, stride), n) in enumerate(zip(_STAGES, repeats)):
        f_in, f_out = _round_filters(f_in, width), _round_filters(f_out, width)
        for j in range(n):
            x = _block(x, f"block{i + 1}{chr(j + 97)}_", f_in if j == 0 else f_out, f_out,
                       kernel, stride if j == 0 else 1, expand, 0.2 * b / total)
            b += 1
    x = Conv2D(_round_filters(1280, width), 1, padding="same", use_bias=False,
               kernel_initializer=_conv_init(), name="top_conv")(x)
    x = BatchNormalization(axis=-1, name="top_bn")(x)
    x = Activation("swish", name="top_activation")(x)
    if include_top:
        x = GlobalAveragePooling2D(name="avg_pool")(x)
        if dropout_rate > 0:
            x = Dropout(dropout_rate, name="top_dropout")(x)
        x = Dense(classes, activation=classifier_activation,
                  kernel_initializer=VarianceScaling(scale=1.0 / 3.0, mode="fan_out",
                                                     distribution="uniform"),
                  name="predictions")(x)
    elif pooling == "avg":
        x = GlobalAveragePooling2D(name="avg_pool")(x)
    elif pooling == "max":
        x = GlobalMaxPooling2D(name="max_pool")(x)
    elif pooling is not None:
        raise ValueError(f"{fn}: pooling must be None, 'avg' or 'max', got {pooling!r}")
    return imagenet_utils.finish(inputs, x, name, weights)


_VARIANTS = {  # width, depth, default size, dropout
    "B0": (1.0, 1.0, 224, 0.2), "B1": (1.0, 1.1, 240, 0.2), "B2": (1.1, 1.2, 260, 0.3),
    "B3": (1.2, 1.4, 300, 0.3), "B4": (1.4, 1.8, 380, 0.4), "B5": (1.6, 2.2, 456, 0.4),
    "B6": (1.8, 2.6, 528, 0.5), "B7": (2.0, 3.1, 600, 0.5)}


def _builder(variant):
    width, depth, size, dropout = _VARIANTS[variant]

    def build(include_top=True, weights="imagenet", input_tensor=None, input_shape=None,
              pooling=None, classes=1000, classifier_activation=CLASSIFIER_ACTIVATION,
              name=f"efficientnet{variant.lower()}"):
        return _efficientnet(width, depth, size, dropout, name, include_top, weights,
                             input_tensor, input_shape, pooling, classes,
                             classifier_activation, f"EfficientNet{variant}")
    build.__name__ = build.__qualname__ = f"EfficientNet{variant}"
    build.__doc__ = f"""EfficientNet{variant} as a functional `keras.Model` with Keras 3's
    arguments, layer names and parameter counts (width {width}, depth {depth}, default input
    {size}x{size}x3, inputs in [0, 255]); `weights` None or the path of a `save_weights` file
    ('imagenet' raises: nothing is downloaded).

    >>> m = tg.keras.applications.EfficientNet{variant}(weights=None, include_top=False,
    ...     input_shape=(32, 32, 3), pooling="avg")
    >>> m.outputs[0].shape[0] is None
    True
    """
    return build


EfficientNetB0, EfficientNetB1, EfficientNetB2, EfficientNetB3 = (
    _builder(v) for v in ("B0", "B1", "B2", "B3"))
EfficientNetB4, EfficientNetB5, EfficientNetB6, EfficientNetB7 = (
    _builder(v) for v in ("B4", "B5", "B6", "B7"))


def preprocess_input(x, data_format=None):
    """The input unchanged, as Keras' EfficientNet preprocess_input (the models rescale their
    [0, 255] inputs themselves).

    >>> tg.keras.applications.efficientnet.preprocess_input(np.array([0.0, 255.0]))
    array([  0., 255.])
    """
    return x


decode_predictions = imagenet_utils.decode_predictions
