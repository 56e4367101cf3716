"""`keras.applications.InceptionV3` (Szegedy et al. 2016, "Rethinking the Inception
Architecture for Computer Vision") with Keras' layers, names and parameter counts, and
`preprocess_input` (pixels to [-1, 1])."""
from ..layers.activations import CLASSIFIER_ACTIVATION, RECTIFIER_ACTIVATION, Activation
from ..layers.convolutional import Conv2D
from ..layers.merging import Concatenate
from ..layers.normalization import BatchNormalization
from ..layers.pooling import AveragePooling2D, MaxPooling2D
from . import imagenet_utils


def conv2d_bn(x, filters, num_row, num_col, padding="same", strides=(1, 1), name=None):
    """Conv2D (no bias) -> BatchNormalization (no scale) -> rectifier; with `name`, the
    layers are `name_conv`, `name_bn` and `name` (Keras' helper)."""
    x = Conv2D(filters, (num_row, num_col), strides=strides, padding=padding, use_bias=False,
               name=None if name is None else name + "_conv")(x)
    x = BatchNormalization(axis=3, scale=False, name=None if name is None else name + "_bn")(x)
    return Activation(RECTIFIER_ACTIVATION, name=name)(x)


def _concat(branches, name=None):
    return Concatenate(axis=3, name=name)(branches)


def _avg_branch(x, filters):
    return conv2d_bn(AveragePooling2D((3, 3), strides=(1, 1), padding="same")(x), filters, 1, 1)


def _block_35(x, pool_filters, name):
    """mixed0-2 (35 x 35): 1x1; 1x1 -> 5x5; 1x1 -> 3x3 -> 3x3; avg pool -> 1x1."""
    b1 = conv2d_bn(x, 64, 1, 1)
    b5 = conv2d_bn(conv2d_bn(x, 48, 1, 1), 64, 5, 5)
    b3 = conv2d_bn(conv2d_bn(conv2d_bn(x, 64, 1, 1), 96, 3, 3), 96, 3, 3)
    return _concat([b1, b5, b3, _avg_branch(x, pool_filters)], name)


def _block_17(x, width, name):
    """mixed4-7 (17 x 17): factorised 7x7 convolutions (1x7 and 7x1) of `width` filters."""
    b1 = conv2d_bn(x, 192, 1, 1)
    b7 = conv2d_bn(x, width, 1, 1)
    b7 = conv2d_bn(b7, width, 1, 7)
    b7 = conv2d_bn(b7, 192, 7, 1)
    d7 = conv2d_bn(x, width, 1, 1)
    for rows, cols in ((7, 1), (1, 7), (7, 1)):
        d7 = conv2d_bn(d7, width, rows, cols)
    d7 = conv2d_bn(d7, 192, 1, 7)
    return _concat([b1, b7, d7, _avg_branch(x, 192)], name)


def _block_8(x, i):
    """mixed9, mixed10 (8 x 8): branches that split into 1x3 and 3x1 convolutions."""
    b1 = conv2d_bn(x, 320, 1, 1)
    b3 = conv2d_bn(x, 384, 1, 1)
    b3 = _concat([conv2d_bn(b3, 384, 1, 3), conv2d_bn(b3, 384, 3, 1)], f"mixed9_{i}")
    d3 = conv2d_bn(conv2d_bn(x, 448, 1, 1), 384, 3, 3)
    d3 = _concat([conv2d_bn(d3, 384, 1, 3), conv2d_bn(d3, 384, 3, 1)])
    return _concat([b1, b3, d3, _avg_branch(x, 192)], f"mixed{9 + i}")


def InceptionV3(include_top=True, weights="imagenet", input_tensor=None,  # noqa: N802
                input_shape=None, pooling=None, classes=1000,
                classifier_activation=CLASSIFIER_ACTIVATION, name="inception_v3"):
    """InceptionV3 as a functional `keras.Model`, with Keras' layer structure and names.

    `input_shape` defaults to (299, 299, 3) (channels last; rows and cols at least 75),
    `include_top` adds global average pooling ('avg_pool') and a Dense 'predictions' layer of
    `classes` units (else `pooling` None, 'avg' or 'max'). `weights` must be None or the path
    of a file written by `save_weights`: 'imagenet' (Keras' default, kept so that code
    expecting pretrained weights does not silently get random ones) raises, since nothing is
    downloaded here: build with weights=None, then `load_weights(path)`. With the top:
    23,851,784 parameters, as Keras.

    >>> model = tg.keras.applications.InceptionV3(input_shape=(75, 75, 3), include_top=False,
    ...                                           pooling="avg", weights=None)
    >>> model.outputs[0].shape
    (None, 2048)
    """
    fn = "InceptionV3"
    imagenet_utils.check_weights(weights, include_top, classes, fn)
    inputs = imagenet_utils.input_of(input_shape, input_tensor, 299, 75, include_top, fn)
    x = conv2d_bn(inputs, 32, 3, 3, strides=(2, 2), padding="valid")
    x = conv2d_bn(x, 32, 3, 3, padding="valid")
    x = conv2d_bn(x, 64, 3, 3)
    x = MaxPooling2D((3, 3), strides=(2, 2))(x)
    x = conv2d_bn(x, 80, 1, 1, padding="valid")
    x = conv2d_bn(x, 192, 3, 3, padding="valid")
    x = MaxPooling2D((3, 3), strides=(2, 2))(x)

    for i, pool_filters in enumerate((32, 64, 64)):
        x = _block_35(x, pool_filters, f"mixed{i}")
    # mixed3: to 17 x 17
    b3 = conv2d_bn(x, 384, 3, 3, strides=(2, 2), padding="valid")
    d3 = conv2d_bn(conv2d_bn(x, 64, 1, 1), 96, 3, 3)
    d3 = conv2d_bn(d3, 96, 3, 3, strides=(2, 2), padding="valid")
    x = _concat([b3, d3, MaxPooling2D((3, 3), strides=(2, 2))(x)], "mixed3")

    for i, width in enumerate((128, 160, 160, 192)):
        x = _block_17(x, width, f"mixed{4 + i}")
    # mixed8: to 8 x 8
    b3 = conv2d_bn(conv2d_bn(x, 192, 1, 1), 320, 3, 3, strides=(2, 2), padding="valid")
    b7 = conv2d_bn(x, 192, 1, 1)
    b7 = conv2d_bn(b7, 192, 1, 7)
    b7 = conv2d_bn(b7, 192, 7, 1)
    b7 = conv2d_bn(b7, 192, 3, 3, strides=(2, 2), padding="valid")
    x = _concat([b3, b7, MaxPooling2D((3, 3), strides=(2, 2))(x)], "mixed8")

    for i in range(2):
        x = _block_8(x, i)
    x = imagenet_utils.top(x, include_top, pooling, classes, classifier_activation, weights, fn,
                           pool_name="avg_pool")
    return imagenet_utils.finish(inputs, x, name, weights)


def preprocess_input(x, data_format=None):
    """Pixels in [0, 255] to [-1, 1] (`x / 127.5 - 1`), what InceptionV3 expects.

    >>> tg.keras.applications.inception_v3.preprocess_input(np.array([[255]], np.uint8))
    array([[1.]], dtype=float32)
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")
