"""`keras.applications.ResNet50`, `ResNet101` and `ResNet152` (He et al. 2015, "Deep Residual
Learning for Image Recognition"; Keras' v1 layout: bottleneck blocks with the stride in the
first 1x1 convolution) with Keras' layers, names and parameter counts (25,636,712 for ResNet50
with the top), and `preprocess_input` ('caffe')."""
from ..layers.activations import CLASSIFIER_ACTIVATION, Activation
from ..layers.convolutional import Conv2D
from ..layers.merging import Add
from ..layers.normalization import BatchNormalization
from ..layers.pooling import MaxPooling2D
from ..layers.reshaping import ZeroPadding2D
from . import imagenet_utils

_STACKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def _bn(x, name):
    return BatchNormalization(axis=3, epsilon=1.001e-5, name=name)(x)


def _block(x, filters, stride=1, conv_shortcut=True, name=None):
    """Keras' block1: 1x1 (stride) -> 3x3 -> 1x1 (4 x filters), plus the shortcut (a 1x1
    projection when `conv_shortcut`)."""
    if conv_shortcut:
        shortcut = Conv2D(4 * filters, 1, strides=stride, name=name + "_0_conv")(x)
        shortcut = _bn(shortcut, name + "_0_bn")
    else:
        shortcut = x
    x = Conv2D(filters, 1, strides=stride, name=name + "_1_conv")(x)
    x = Activation("relu", name=name + "_1_relu")(_bn(x, name + "_1_bn"))
    x = Conv2D(filters, 3, padding="same", name=name + "_2_conv")(x)
    x = Activation("relu", name=name + "_2_relu")(_bn(x, name + "_2_bn"))
    x = Conv2D(4 * filters, 1, name=name + "_3_conv")(x)
    x = _bn(x, name + "_3_bn")
    x = Add(name=name + "_add")([shortcut, x])
    return Activation("relu", name=name + "_out")(x)


def _stack(x, filters, blocks, stride1=2, name=None):
    x = _block(x, filters, stride=stride1, name=name + "_block1")
    for i in range(2, blocks + 1):
        x = _block(x, filters, conv_shortcut=False, name=f"{name}_block{i}")
    return x


def _resnet(depth, include_top, weights, input_tensor, input_shape, pooling, classes,
            classifier_activation, name):
    fn = f"ResNet{depth}"
    imagenet_utils.check_weights(weights, include_top, classes, fn)
    inputs = imagenet_utils.input_of(input_shape, input_tensor, 224, 32, include_top, fn)
    x = ZeroPadding2D(((3, 3), (3, 3)), name="conv1_pad")(inputs)
    x = Conv2D(64, 7, strides=2, name="conv1_conv")(x)
    x = Activation("relu", name="conv1_relu")(_bn(x, "conv1_bn"))
    x = ZeroPadding2D(((1, 1), (1, 1)), name="pool1_pad")(x)
    x = MaxPooling2D(3, strides=2, name="pool1_pool")(x)
    for i, (filters, blocks) in enumerate(zip((64, 128, 256, 512), _STACKS[depth])):
        x = _stack(x, filters, blocks, stride1=1 if i == 0 else 2, name=f"conv{i + 2}")
    x = imagenet_utils.top(x, include_top, pooling, classes, classifier_activation, weights,
                           fn, pool_name="avg_pool")
    return imagenet_utils.finish(inputs, x, name, weights)


def ResNet50(include_top=True, weights="imagenet", input_tensor=None, input_shape=None,  # noqa: N802
             pooling=None, classes=1000, classifier_activation=CLASSIFIER_ACTIVATION,
             name="resnet50"):
    """ResNet50 as a functional `keras.Model`, with Keras' arguments and layer names;
    `weights` None or the path of a `save_weights` file ('imagenet' raises: nothing is
    downloaded).

    >>> m = tg.keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3))
    >>> m.count_params(), m.outputs[0].shape
    (25636712, (None, 1000))
    """
    return _resnet(50, include_top, weights, input_tensor, input_shape, pooling, classes,
                   classifier_activation, name)


def ResNet101(include_top=True, weights="imagenet", input_tensor=None, input_shape=None,  # noqa: N802
              pooling=None, classes=1000, classifier_activation=CLASSIFIER_ACTIVATION,
              name="resnet101"):
    """ResNet101 (23 blocks in the third stack)."""
    return _resnet(101, include_top, weights, input_tensor, input_shape, pooling, classes,
                   classifier_activation, name)


def ResNet152(include_top=True, weights="imagenet", input_tensor=None, input_shape=None,  # noqa: N802
              pooling=None, classes=1000, classifier_activation=CLASSIFIER_ACTIVATION,
              name="resnet152"):
    """ResNet152 (8 and 36 blocks in the second and third stacks)."""
    return _resnet(152, include_top, weights, input_tensor, input_shape, pooling, classes,
                   classifier_activation, name)


def preprocess_input(x, data_format=None):
    """'caffe' preprocessing (RGB to BGR, minus ImageNet's channel means), what ResNet50
    expects.

    >>> tg.keras.applications.resnet50.preprocess_input(np.full((1, 1, 3), 255.0))[0, 0]
    array([151.061, 138.221, 131.32 ])
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")
