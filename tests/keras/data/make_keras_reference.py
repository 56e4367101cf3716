"""Writes keras_conv_reference.npz: Keras 3's outputs of its convolution, pooling and spatial
layers on random inputs, with the layers' weights, for test_keras_conv_layers.py.

Run with Keras 3 installed (it was written with keras 3.15.1 on tensorflow 2.21.0):
    python tests/keras/data/make_keras_reference.py
"""
import json
import os

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402

CASES = [
    ("Conv1D", dict(filters=3, kernel_size=3, padding="causal", dilation_rate=2), (2, 9, 2)),
    ("Conv2D", dict(filters=4, kernel_size=3, strides=2, padding="same"), (2, 7, 8, 3)),
    ("Conv2D", dict(filters=4, kernel_size=(3, 2), groups=2, data_format="channels_first"),
     (2, 4, 7, 8)),
    ("Conv3D", dict(filters=2, kernel_size=2, strides=2, padding="same"), (1, 5, 4, 3, 2)),
    ("Conv2DTranspose", dict(filters=3, kernel_size=3, strides=2, padding="same",
                             output_padding=1), (2, 4, 5, 2)),
    ("Conv2DTranspose", dict(filters=3, kernel_size=3, strides=2), (2, 4, 5, 2)),
    ("Conv2DTranspose", dict(filters=3, kernel_size=4, strides=2, padding="same"), (2, 4, 5, 2)),
    ("Conv2DTranspose", dict(filters=3, kernel_size=3, strides=3, output_padding=2,
                             data_format="channels_first"), (2, 2, 4, 5)),
    ("Conv1DTranspose", dict(filters=3, kernel_size=3, strides=2, padding="same",
                             output_padding=1), (2, 5, 2)),
    ("Conv1DTranspose", dict(filters=2, kernel_size=2, strides=3, dilation_rate=1,
                             data_format="channels_first"), (2, 3, 4)),
    ("DepthwiseConv2D", dict(kernel_size=3, strides=2, padding="same", depth_multiplier=2),
     (2, 7, 6, 3)),
    ("SeparableConv2D", dict(filters=4, kernel_size=3, padding="same", depth_multiplier=2),
     (2, 7, 6, 3)),
    ("MaxPooling2D", dict(pool_size=3, strides=2, padding="same"), (2, 7, 6, 3)),
    ("AveragePooling2D", dict(pool_size=3, strides=2, padding="same"), (2, 7, 6, 3)),
    ("AveragePooling1D", dict(pool_size=2, padding="same", data_format="channels_first"),
     (2, 3, 7)),
    ("GlobalAveragePooling2D", dict(keepdims=True), (2, 7, 6, 3)),
    ("UpSampling2D", dict(size=(2, 3), interpolation="bilinear"), (2, 3, 4, 2)),
    ("UpSampling2D", dict(size=2, interpolation="bicubic"), (2, 3, 4, 2)),
    ("ZeroPadding2D", dict(padding=((1, 0), (2, 1))), (2, 3, 4, 2)),
    ("Cropping2D", dict(cropping=((1, 0), (2, 1))), (2, 5, 6, 2)),
]


def main():
    rng = np.random.default_rng(0)
    arrays = {"cases": np.array(json.dumps(CASES)),
              "versions": np.array(f"keras {keras.__version__}")}
    for i, (name, kwargs, shape) in enumerate(CASES):
        if "filters" in kwargs or name == "DepthwiseConv2D":
            kwargs = dict(kwargs, bias_initializer="random_normal")
        layer = getattr(keras.layers, name)(**kwargs)
        x = rng.normal(size=shape).astype("float32")
        arrays[f"x{i}"] = x
        arrays[f"y{i}"] = np.asarray(layer(x))
        for j, w in enumerate(layer.get_weights()):
            arrays[f"w{i}_{j}"] = w
        arrays[f"names{i}"] = np.array([w.path.split("/")[-1] for w in layer.weights])
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "keras_conv_reference.npz")
    np.savez_compressed(path, **arrays)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
