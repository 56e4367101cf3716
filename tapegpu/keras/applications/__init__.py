"""`keras.applications`: MobileNetV2 and InceptionV3 built with Keras' layer structure, names
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
