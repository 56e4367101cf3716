"""What keras.applications' models share: input-shape checks, the `weights` argument (nothing
is downloaded here), the top (classifier or pooling), and `preprocess_input`."""
import os

import numpy as np

from ... import ops
from ...core.tensor import Tensor
from ..layers.activations import CLASSIFIER_ACTIVATION, get_activation
from ..layers.core import Dense, Input, KerasTensor
from ..layers.pooling import GlobalAveragePooling2D, GlobalMaxPooling2D
from ..model import Functional


def check_weights(weights, include_top, classes, fn):
    """`weights` must be None or the path of a file written by `save_weights`; 'imagenet'
    raises, saying why and what to do instead."""
    if isinstance(weights, str) and weights == "imagenet":
        raise ValueError(
            f"{fn}: weights='imagenet' needs Keras' pretrained weights, which would be "
            f"downloaded; tapegpu downloads nothing. Build the architecture with weights=None "
            f"and load weights saved with save_weights from a local file: "
            f"model.load_weights(path) (or pass weights=path).")
    if weights is not None and not (isinstance(weights, (str, os.PathLike)) and
                                    os.path.exists(weights)):
        raise ValueError(f"{fn}: the `weights` argument should be either `None` (random "
                         f"initialization) or the path to the weights file to be loaded. "
                         f"Received: weights={weights!r}")
    if include_top and (int(classes) != classes or classes <= 0):
        raise ValueError(f"{fn}: `classes` must be a positive integer, got classes={classes!r}")


def input_of(input_shape, input_tensor, default_size, min_size, include_top, fn):
    """The model's input (a `keras.Input`) from `input_shape` or `input_tensor`, checked as
    Keras checks them (channels last: rows, cols, channels)."""
    if input_tensor is not None:
        if not isinstance(input_tensor, KerasTensor) or len(input_tensor.shape) != 4:
            raise ValueError(f"{fn}: input_tensor must be a keras.Input of rank 4 (batch, "
                             f"rows, cols, channels); Received input_tensor={input_tensor!r}")
        if input_shape is not None and tuple(input_shape) != tuple(input_tensor.shape[1:]):
            raise ValueError(f"{fn}: input_shape {tuple(input_shape)} does not match "
                             f"input_tensor's shape {input_tensor.shape}")
        input_shape = tuple(input_tensor.shape[1:])
    if input_shape is None:
        input_shape = (default_size, default_size, 3)
    try:
        input_shape = tuple(None if d is None else int(d) for d in input_shape)
    except TypeError:
        raise ValueError(f"{fn}: `input_shape` must be a tuple of three integers, got "
                         f"{input_shape!r}") from None
    if len(input_shape) != 3:
        raise ValueError(f"{fn}: `input_shape` must be a tuple of three integers (rows, "
                         f"cols, channels). Received: input_shape={input_shape}")
    rows, cols, _ = input_shape
    if None in (rows, cols):
        raise ValueError(f"{fn}: give the input's rows and cols (input_shape={input_shape}): "
                         "tapegpu builds a functional model by running each layer on an input "
                         "of that size (the built model accepts other sizes too)")
    if rows < min_size or cols < min_size:
        raise ValueError(f"{fn}: Input size must be at least {min_size}x{min_size}; "
                         f"Received: input_shape={input_shape}")
    return input_tensor if input_tensor is not None else Input(shape=input_shape)


def top(x, include_top, pooling, classes, classifier_activation, weights, fn,
        pool_name=None):
    """Keras' top: global average pooling and a Dense 'predictions' layer, or (without the
    top) optional global 'avg' or 'max' pooling."""
    if include_top:
        if weights is not None and get_activation(classifier_activation) not in (
                None, get_activation(CLASSIFIER_ACTIVATION)):
            raise ValueError(f"{fn}: Only `None` and {CLASSIFIER_ACTIVATION!r} activations are "
                             f"allowed for the `classifier_activation` argument when using "
                             f"pretrained weights, with `include_top=True`; Received: "
                             f"classifier_activation={classifier_activation!r}")
        x = GlobalAveragePooling2D(name=pool_name)(x)
        return Dense(classes, activation=classifier_activation, name="predictions")(x)
    if pooling == "avg":
        return GlobalAveragePooling2D()(x)
    if pooling == "max":
        return GlobalMaxPooling2D()(x)
    if pooling is not None:
        raise ValueError(f"{fn}: pooling must be None, 'avg' or 'max', got {pooling!r}")
    return x


def finish(inputs, outputs, name, weights):
    model = Functional(inputs, outputs, name=name)
    if weights is not None:
        model.load_weights(weights)
    return model


def correct_pad(shape, kernel_size):
    """((top, bottom), (left, right)) zero padding before a strided 'valid' convolution of an
    input of spatial `shape` (Keras' correct_pad): one less before than after on even sizes."""
    adjust = [1 - n % 2 for n in shape]
    half = [k // 2 for k in kernel_size]
    return ((half[0] - adjust[0], half[0]), (half[1] - adjust[1], half[1]))


_MODES = ("caffe", "tf", "torch")
_CAFFE_MEAN = (103.939, 116.779, 123.68)  # BGR
_TORCH_MEAN, _TORCH_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def preprocess_input(x, data_format=None, mode="caffe"):
    """Scales a batch of images (0-255 pixels, RGB) as a pretrained model expects: 'tf' to
    [-1, 1], 'torch' to [0, 1] then normalised by ImageNet's channel means and deviations,
    'caffe' RGB to BGR then minus the channel means. Keras' function: a numpy array gives a new
    float array (float32 from integers; unlike Keras, the input is never modified in place), a
    tensor a tensor.

    >>> tg.keras.applications.imagenet_utils.preprocess_input(np.array([0, 255]), mode="tf")
    array([-1.,  1.], dtype=float32)
    """
    if mode not in _MODES:
        raise ValueError(f"Expected mode to be one of `caffe`, `tf` or `torch`. Received: "
                         f"mode={mode!r}")
    fmt = "channels_last" if data_format is None else data_format
    if fmt not in ("channels_last", "channels_first"):
        raise ValueError(f"Expected data_format to be one of `channels_first` or "
                         f"`channels_last`. Received: data_format={data_format!r}")
    if isinstance(x, Tensor):
        if x._data.dtype.kind != "f":
            x = ops.cast(x, "float32")
        return _scale(x, fmt, mode, ops)
    x = np.asarray(x)
    x = x.astype(np.float32) if x.dtype.kind != "f" else x.copy()
    return _scale(x, fmt, mode, np)


def _scale(x, fmt, mode, xp):
    if mode == "tf":
        return x / 127.5 - 1.0
    if x.ndim < 3 or (x.shape[1 if x.ndim == 4 else 0] if fmt == "channels_first"
                      else x.shape[-1]) != 3:
        raise ValueError(f"preprocess_input: mode {mode!r} expects images with 3 channels "
                         f"({fmt}), got shape {tuple(x.shape)}")
    axis = (x.ndim - 3) if fmt == "channels_first" else x.ndim - 1
    shape = [1] * x.ndim
    shape[axis] = 3
    dtype = x._data.dtype if isinstance(x, Tensor) else x.dtype
    if mode == "torch":
        mean = np.reshape(np.asarray(_TORCH_MEAN, dtype), shape)
        std = np.reshape(np.asarray(_TORCH_STD, dtype), shape)
        return (x / 255.0 - mean) / std
    bgr = ops.gather(x, [2, 1, 0], axis=axis) if xp is ops else np.flip(x, axis)
    return bgr - np.reshape(np.asarray(_CAFFE_MEAN, dtype), shape)


CLASS_INDEX_PATH = ("https://storage.googleapis.com/download.tensorflow.org/data/"
                    "imagenet_class_index.json")
_CLASS_INDEX = []


def decode_predictions(preds, top=5):
    """The `top` (class id, name, score) triples of each row of ImageNet predictions (batch,
    1000), as Keras: the class index is `imagenet_class_index.json`, fetched once with
    `keras.utils.get_file` into `~/.keras/models` (where Keras keeps it; put the file there
    on a machine without network).

    >>> tg.keras.applications.imagenet_utils.decode_predictions(np.zeros((1, 10)))
    Traceback (most recent call last):
    ValueError: decode_predictions expects a batch of predictions (i.e. a 2D array of shape (samples, 1000)). Received array with shape: (1, 10)
    """
    import json
    from ..legacy_preprocessing import get_file
    preds = preds.numpy() if isinstance(preds, Tensor) else np.asarray(preds)
    if preds.ndim != 2 or preds.shape[1] != 1000:
        raise ValueError(f"decode_predictions expects a batch of predictions (i.e. a 2D array "
                         f"of shape (samples, 1000)). Received array with shape: {preds.shape}")
    if not _CLASS_INDEX:
        path = get_file("imagenet_class_index.json", CLASS_INDEX_PATH, cache_subdir="models",
                        file_hash="c2c37ea517e94d9795004a39431a14cb")
        with open(path, encoding="utf-8") as f:
            _CLASS_INDEX.append(json.load(f))
    index = _CLASS_INDEX[0]
    results = []
    for row in preds:
        best = row.argsort()[-top:][::-1]
        results.append([tuple(index[str(i)]) + (row[i],) for i in best])
    return results
