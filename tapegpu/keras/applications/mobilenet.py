"""`keras.applications.MobileNet` (Howard et al. 2017, "MobileNets: Efficient Convolutional
Neural Networks for Mobile Vision Applications") with Keras' layers, layer names and parameter
counts (4,253,864 with the top at alpha 1), and `preprocess_input` (pixels to [-1, 1])."""
from ..layers.activations import CLASSIFIER_ACTIVATION, Activation, ReLU
from ..layers.convolutional import Conv2D, DepthwiseConv2D
from ..layers.regularization import Dropout
from ..layers.normalization import BatchNormalization
from ..layers.pooling import GlobalAveragePooling2D, GlobalMaxPooling2D
from ..layers.reshaping import Reshape, ZeroPadding2D
from . import imagenet_utils

# the depthwise-separable blocks: (pointwise filters, stride), block ids 1..13
_BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
           (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1))


def _block(x, filters, alpha, depth_multiplier, stride, block_id):
    """A 3x3 depthwise convolution and a 1x1 pointwise one, each with BatchNormalization and
    ReLU6; a strided block pads bottom/right first (Keras' 'valid' strided convolution)."""
    filters = int(filters * alpha)
    if stride != 1:
        x = ZeroPadding2D(((0, 1), (0, 1)), name=f"conv_pad_{block_id}")(x)
    x = DepthwiseConv2D((3, 3), padding="same" if stride == 1 else "valid",
                        depth_multiplier=depth_multiplier, strides=(stride, stride),
                        use_bias=False, name=f"conv_dw_{block_id}")(x)
    x = BatchNormalization(axis=-1, name=f"conv_dw_{block_id}_bn")(x)
    x = ReLU(6.0, name=f"conv_dw_{block_id}_relu")(x)
    x = Conv2D(filters, (1, 1), padding="same", use_bias=False, strides=(1, 1),
               name=f"conv_pw_{block_id}")(x)
    x = BatchNormalization(axis=-1, name=f"conv_pw_{block_id}_bn")(x)
    return ReLU(6.0, name=f"conv_pw_{block_id}_relu")(x)


def MobileNet(input_shape=None, alpha=1.0, depth_multiplier=1, dropout=1e-3,  # noqa: N802
              include_top=True, weights="imagenet", input_tensor=None, pooling=None,
              classes=1000, classifier_activation=CLASSIFIER_ACTIVATION, name=None):
    """MobileNet (v1) as a functional `keras.Model` with Keras' arguments, layer names and
    parameter counts; `weights` None or the path of a `save_weights` file ('imagenet' raises:
    nothing is downloaded). Inputs of at least 32x32 (default 224x224x3).

    >>> m = tg.keras.applications.MobileNet(input_shape=(32, 32, 3), alpha=0.25,
    ...                                     include_top=False, weights=None, pooling="avg")
    >>> m.outputs[0].shape
    (None, 256)
    """
    fn = "MobileNet"
    imagenet_utils.check_weights(weights, include_top, classes, fn)
    if not alpha > 0:
        raise ValueError(f"{fn}: alpha must be > 0, got {alpha!r}")
    inputs = imagenet_utils.input_of(input_shape, input_tensor, 224, 32, include_top, fn)
    x = ZeroPadding2D(((0, 1), (0, 1)), name="conv1_pad")(inputs)
    x = Conv2D(int(32 * alpha), (3, 3), padding="valid", use_bias=False, strides=(2, 2),
               name="conv1")(x)
    x = BatchNormalization(axis=-1, name="conv1_bn")(x)
    x = ReLU(6.0, name="conv1_relu")(x)
    for block_id, (filters, stride) in enumerate(_BLOCKS, start=1):
        x = _block(x, filters, alpha, depth_multiplier, stride, block_id)
    if include_top:  # Keras' MobileNet top: pooled, dropout, a 1x1 convolution as classifier
        x = GlobalAveragePooling2D(keepdims=True)(x)
        x = Dropout(dropout, name="dropout")(x)
        x = Conv2D(classes, (1, 1), padding="same", name="conv_preds")(x)
        x = Reshape((classes,), name="reshape_2")(x)
        x = Activation(classifier_activation, name="predictions")(x)
    elif pooling == "avg":
        x = GlobalAveragePooling2D()(x)
    elif pooling == "max":
        x = GlobalMaxPooling2D()(x)
    elif pooling is not None:
        raise ValueError(f"{fn}: pooling must be None, 'avg' or 'max', got {pooling!r}")
    if name is None:
        name = f"mobilenet_{alpha:0.2f}_{inputs.shape[1]}"
    return imagenet_utils.finish(inputs, x, name, weights)


def preprocess_input(x, data_format=None):
    """Pixels in [0, 255] to [-1, 1] (`x / 127.5 - 1`), what MobileNet expects.

    >>> tg.keras.applications.mobilenet.preprocess_input(np.array([0.0, 255.0]))
    array([-1.,  1.])
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")


decode_predictions = imagenet_utils.decode_predictions
