"""The functions of `keras.utils` (`to_categorical`) and `keras.backend` (`clear_session`,
`epsilon`)."""
import types

import numpy as np

from ..models.layers import Layer


def to_categorical(x, num_classes=None):
    """One-hot rows (float32) for integer labels `x`; `num_classes` defaults to max(x) + 1.

    >>> tg.keras.utils.to_categorical([0, 2], num_classes=3)
    array([[1., 0., 0.],
           [0., 0., 1.]], dtype=float32)
    """
    x = np.asarray(x.numpy() if hasattr(x, "numpy") else x)
    if x.dtype.kind == "f":
        if not np.all(x == np.round(x)):
            raise ValueError("to_categorical: labels must be integers")
        x = x.astype(np.int64)
    if x.dtype.kind not in "iu":
        raise TypeError(f"to_categorical: labels must be integers, got {x.dtype.name}")
    if x.ndim and x.shape[-1] == 1 and x.ndim > 1:
        x = x[..., 0]
    n = int(x.max()) + 1 if num_classes is None else int(num_classes)
    if x.size and (x.min() < 0 or x.max() >= n):
        raise ValueError(f"to_categorical: labels must be in [0, {n}), got values in "
                         f"[{x.min()}, {x.max()}]")
    return np.eye(n, dtype=np.float32)[x]


def clear_session():
    """Resets Keras' layer-name counters (new layers are named 'dense', 'dense_1', ... again)."""
    Layer._name_counts.clear()


def epsilon():
    """The fuzz factor of the losses and metrics (1e-7)."""
    return 1e-7


utils = types.ModuleType("tapegpu.keras.utils", "`to_categorical`.")
utils.to_categorical = to_categorical
backend = types.ModuleType("tapegpu.keras.backend", "`clear_session`, `epsilon`.")
backend.clear_session = clear_session
backend.epsilon = epsilon
