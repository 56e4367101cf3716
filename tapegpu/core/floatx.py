"""Keras' float type (`keras.backend.floatx()`): the dtype of Keras layers, inputs,
initializers, metrics and losses made without one. Only Keras reads it: `tg.constant(1.0)`
stays float32, as TensorFlow's does. `tg.keras.backend` exports the two functions."""
import numpy as np

_floatx = ["float32"]
_ACCEPTED = ("float16", "float32", "float64")


def floatx():
    """Keras' default float type, as a string ('float32' unless `set_floatx` changed it).

    >>> tg.keras.backend.floatx()
    'float32'
    """
    return _floatx[0]


def set_floatx(value):
    """Sets Keras' default float type: 'float16', 'float32' or 'float64' ('bfloat16' is not
    supported). Layers, inputs, initializers, metrics and losses made afterwards without a
    dtype use it.

    >>> tg.keras.backend.set_floatx("float64")
    >>> tg.keras.layers.Dense(2)(np.ones((1, 3))).dtype
    tg.float64
    >>> tg.keras.backend.set_floatx("float32")
    """
    name = getattr(value, "name", value)
    if name not in _ACCEPTED:
        raise ValueError(f"set_floatx: unknown `floatx` value: {value!r}. Expected one of "
                         f"{set(_ACCEPTED)}")
    _floatx[0] = str(name)


def np_floatx():
    """floatx as a numpy dtype."""
    return np.dtype(_floatx[0])
