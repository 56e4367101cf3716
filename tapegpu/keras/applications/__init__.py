"""`keras.applications`: MobileNet, MobileNetV2, InceptionV3, VGG16, VGG19, ResNet50, ResNet101,
ResNet152, Xception and EfficientNetB0-B7 built with Keras' layer structure, names
and parameter counts, and their `preprocess_input`. Nothing is downloaded here: build with
`weights=None` and load weights from a local file with `model.load_weights(path)`;
`weights='imagenet'` (Keras' default) raises saying so.

>>> model = tg.keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35,
...                                           include_top=False, pooling="avg", weights=None)
>>> model.outputs[0].shape
(None, 1280)
"""
from . import imagenet_utils, inception_v3, mobilenet_v2  # noqa: F401
from .inception_v3 import InceptionV3  # noqa: F401
from .mobilenet_v2 import MobileNetV2  # noqa: F401
from . import resnet, vgg  # noqa: F401
from .resnet import ResNet50, ResNet101, ResNet152  # noqa: F401
from .vgg import VGG16, VGG19  # noqa: F401
from . import efficientnet, mobilenet, xception  # noqa: F401
from .efficientnet import (EfficientNetB0, EfficientNetB1, EfficientNetB2,  # noqa: F401
                           EfficientNetB3, EfficientNetB4, EfficientNetB5, EfficientNetB6,
                           EfficientNetB7)
from .mobilenet import MobileNet  # noqa: F401
from .xception import Xception  # noqa: F401


def _module(name, doc, **members):
    import sys
    import types
    mod = types.ModuleType(f"{__name__}.{name}", doc)
    mod.__dict__.update(members, decode_predictions=imagenet_utils.decode_predictions)
    sys.modules.setdefault(mod.__name__, mod)
    return mod


# Keras' per-model modules (keras.applications.vgg16.preprocess_input, ...)
vgg16 = _module("vgg16", "VGG16 and its preprocess_input.", VGG16=VGG16,
                preprocess_input=vgg.preprocess_input)
vgg19 = _module("vgg19", "VGG19 and its preprocess_input.", VGG19=VGG19,
                preprocess_input=vgg.preprocess_input)
resnet50 = _module("resnet50", "ResNet50 and its preprocess_input.", ResNet50=ResNet50,
                   preprocess_input=resnet.preprocess_input)
resnet.decode_predictions = imagenet_utils.decode_predictions
inception_v3.decode_predictions = imagenet_utils.decode_predictions
mobilenet_v2.decode_predictions = imagenet_utils.decode_predictions
