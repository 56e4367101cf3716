"""`keras.applications.VGG16` and `VGG19` (Simonyan and Zisserman 2014, "Very Deep
Convolutional Networks for Large-Scale Image Recognition") with Keras' layers, names and
parameter counts (138,357,544 and 143,667,240 with the top), and `preprocess_input` ('caffe':
RGB to BGR, minus ImageNet's channel means)."""
from ..layers.activations import CLASSIFIER_ACTIVATION
from ..layers.convolutional import Conv2D
from ..layers.core import Dense
from ..layers.pooling import GlobalAveragePooling2D, GlobalMaxPooling2D, MaxPooling2D
from ..layers.reshaping import Flatten
from . import imagenet_utils

_BLOCKS = {16: (2, 2, 3, 3, 3), 19: (2, 2, 4, 4, 4)}
_FILTERS = (64, 128, 256, 512, 512)


def _vgg(depth, include_top, weights, input_tensor, input_shape, pooling, classes,
         classifier_activation, name):
    fn = f"VGG{depth}"
    imagenet_utils.check_weights(weights, include_top, classes, fn)
    inputs = imagenet_utils.input_of(input_shape, input_tensor, 224, 32, include_top, fn)
    x = inputs
    for block, (convs, filters) in enumerate(zip(_BLOCKS[depth], _FILTERS), start=1):
        for i in range(1, convs + 1):
            x = Conv2D(filters, (3, 3), activation="relu", padding="same",
                       name=f"block{block}_conv{i}")(x)
        x = MaxPooling2D((2, 2), strides=(2, 2), name=f"block{block}_pool")(x)
    if include_top:  # Keras' VGG top: flatten, two 4096-unit layers, the classifier
        x = Flatten(name="flatten")(x)
        x = Dense(4096, activation="relu", name="fc1")(x)
        x = Dense(4096, activation="relu", name="fc2")(x)
        x = Dense(classes, activation=classifier_activation, name="predictions")(x)
    elif pooling == "avg":
        x = GlobalAveragePooling2D()(x)
    elif pooling == "max":
        x = GlobalMaxPooling2D()(x)
    elif pooling is not None:
        raise ValueError(f"{fn}: pooling must be None, 'avg' or 'max', got {pooling!r}")
    return imagenet_utils.finish(inputs, x, name, weights)


def VGG16(include_top=True, weights="imagenet", input_tensor=None, input_shape=None,  # noqa: N802
          pooling=None, classes=1000, classifier_activation=CLASSIFIER_ACTIVATION,
          name="vgg16"):
    """VGG16 as a functional `keras.Model`, with Keras' arguments and layer names; `weights`
    None or the path of a `save_weights` file ('imagenet' raises: nothing is downloaded).

    >>> m = tg.keras.applications.VGG16(include_top=False, weights=None, input_shape=(32, 32, 3))
    >>> m.count_params(), m.outputs[0].shape
    (14714688, (None, 1, 1, 512))
    """
    return _vgg(16, include_top, weights, input_tensor, input_shape, pooling, classes,
                classifier_activation, name)


def VGG19(include_top=True, weights="imagenet", input_tensor=None, input_shape=None,  # noqa: N802
          pooling=None, classes=1000, classifier_activation=CLASSIFIER_ACTIVATION,
          name="vgg19"):
    """VGG19 as a functional `keras.Model` (VGG16 with four convolutions in blocks 3-5).

    >>> tg.keras.applications.VGG19(include_top=False, weights=None,
    ...                             input_shape=(32, 32, 3)).count_params()
    20024384
    """
    return _vgg(19, include_top, weights, input_tensor, input_shape, pooling, classes,
                classifier_activation, name)


def preprocess_input(x, data_format=None):
    """'caffe' preprocessing: RGB to BGR, then minus ImageNet's channel means (what VGG
    expects).

    >>> tg.keras.applications.vgg16.preprocess_input(np.zeros((1, 1, 3)))[0, 0]
    array([-103.939, -116.779, -123.68 ])
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")
