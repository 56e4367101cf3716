"""`keras.applications.Xception` (Chollet 2017, "Xception: Deep Learning with Depthwise
Separable Convolutions") with Keras' layers, names and parameter count (22,910,480 with the
top), and `preprocess_input` ('tf': pixels to [-1, 1])."""
from ..layers.activations import CLASSIFIER_ACTIVATION, Activation
from ..layers.convolutional import Conv2D, SeparableConv2D
from ..layers.merging import Add
from ..layers.normalization import BatchNormalization
from ..layers.pooling import MaxPooling2D
from . import imagenet_utils


def _residual(x, filters):
    """The strided 1x1 shortcut of an entry/exit block."""
    r = Conv2D(filters, (1, 1), strides=(2, 2), padding="same", use_bias=False)(x)
    return BatchNormalization(axis=-1)(r)


def _sep(x, filters, name, act_first=True):
    """[relu] -> SeparableConv2D 3x3 (no bias) -> BatchNormalization, named as Keras'."""
    if act_first:
        x = Activation("relu", name=f"{name}_act")(x)
    x = SeparableConv2D(filters, (3, 3), padding="same", use_bias=False, name=name)(x)
    return BatchNormalization(axis=-1, name=f"{name}_bn")(x)


def Xception(include_top=True, weights="imagenet", input_tensor=None,  # noqa: N802
             input_shape=None, pooling=None, classes=1000,
             classifier_activation=CLASSIFIER_ACTIVATION, name="xception"):
    """Xception as a functional `keras.Model` with Keras' arguments, layer names and
    parameter count; `weights` None or the path of a `save_weights` file ('imagenet' raises:
    nothing is downloaded). Inputs of at least 71x71 (default 299x299x3).

    >>> m = tg.keras.applications.Xception(weights=None, include_top=False,
    ...                                    input_shape=(71, 71, 3), pooling="avg")
    >>> m.outputs[0].shape
    (None, 2048)
    """
    fn = "Xception"
    imagenet_utils.check_weights(weights, include_top, classes, fn)
    inputs = imagenet_utils.input_of(input_shape, input_tensor, 299, 71, include_top, fn)
    x = Conv2D(32, (3, 3), strides=(2, 2), use_bias=False, name="block1_conv1")(inputs)
    x = BatchNormalization(axis=-1, name="block1_conv1_bn")(x)
    x = Activation("relu", name="block1_conv1_act")(x)
    x = Conv2D(64, (3, 3), use_bias=False, name="block1_conv2")(x)
    x = BatchNormalization(axis=-1, name="block1_conv2_bn")(x)
    x = Activation("relu", name="block1_conv2_act")(x)
    # entry flow: blocks 2-4, each halving the size beside a strided 1x1 shortcut
    for block, filters in ((2, 128), (3, 256), (4, 728)):
        residual = _residual(x, filters)
        x = _sep(x, filters, f"block{block}_sepconv1", act_first=block != 2)
        x = _sep(x, filters, f"block{block}_sepconv2")
        x = MaxPooling2D((3, 3), strides=(2, 2), padding="same", name=f"block{block}_pool")(x)
        x = Add()([x, residual])
    # middle flow: blocks 5-12, three separable convolutions around an identity shortcut
    for block in range(5, 13):
        residual = x
        for i in (1, 2, 3):
            x = _sep(x, 728, f"block{block}_sepconv{i}")
        x = Add()([x, residual])
    # exit flow
    residual = _residual(x, 1024)
    x = _sep(x, 728, "block13_sepconv1")
    x = _sep(x, 1024, "block13_sepconv2")
    x = MaxPooling2D((3, 3), strides=(2, 2), padding="same", name="block13_pool")(x)
    x = Add()([x, residual])
    for i, filters in ((1, 1536), (2, 2048)):
        x = SeparableConv2D(filters, (3, 3), padding="same", use_bias=False,
                            name=f"block14_sepconv{i}")(x)
        x = BatchNormalization(axis=-1, name=f"block14_sepconv{i}_bn")(x)
        x = Activation("relu", name=f"block14_sepconv{i}_act")(x)
    x = imagenet_utils.top(x, include_top, pooling, classes, classifier_activation, weights, fn,
                           pool_name="avg_pool")
    return imagenet_utils.finish(inputs, x, name, weights)


def preprocess_input(x, data_format=None):
    """Pixels in [0, 255] to [-1, 1] (`x / 127.5 - 1`), what Xception expects.

    >>> tg.keras.applications.xception.preprocess_input(np.array([0.0, 255.0]))
    array([-1.,  1.])
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")


decode_predictions = imagenet_utils.decode_predictions
