"""Keras' initializers beyond `tg.initializers`' own: `TruncatedNormal`, `LecunUniform`,
`Identity`, the snake_case names (`keras.initializers.glorot_uniform`, ...; each is the class),
and `serialize` / `deserialize`.

>>> tg.keras.initializers.Identity()((2, 2)).numpy()
array([[1., 0.],
       [0., 1.]], dtype=float32)
"""
import numpy as np

from ..core.floatx import np_floatx
from ..core.tensor import constant
from ..models import initializers as _init


class TruncatedNormal(_init.RandomNormal):
    """N(mean, stddev^2) redrawn beyond two standard deviations (Keras' TruncatedNormal).

    >>> v = tg.keras.initializers.TruncatedNormal(stddev=1.0, seed=0)((1000,)).numpy()
    >>> float(np.abs(v).max()) <= 2.0
    True
    """

    def __call__(self, shape, dtype=None):
        return self._normal(shape, dtype, self.stddev, truncated=True)


class LecunUniform(_init.VarianceScaling):
    """U[-l, l] with l = sqrt(3 / fan_in).

    >>> tg.keras.initializers.LecunUniform(seed=0)((4, 3)).shape
    (4, 3)
    """

    def __init__(self, seed=None):
        super().__init__(1.0, "fan_in", "uniform", seed)


class Identity(_init.Initializer):
    """`gain` times the identity matrix (a 2-D shape; rectangular ones get ones on the
    diagonal).

    >>> tg.keras.initializers.Identity(gain=2.0)((2, 3)).numpy()
    array([[2., 0., 0.],
           [0., 2., 0.]], dtype=float32)
    """

    def __init__(self, gain=1.0):
        self.gain = float(gain)

    def __call__(self, shape, dtype=None):
        if len(shape) != 2:
            raise ValueError(f"Identity initializer: the shape must be 2-D, got {tuple(shape)}")
        dt = np.dtype(getattr(dtype, "name", dtype)) if dtype is not None else np_floatx()
        return constant((self.gain * np.eye(*shape)).astype(dt))


def serialize(initializer):
    """{'class_name', 'config'} of an initializer (its constructor's plain attributes).

    >>> tg.keras.initializers.serialize(tg.keras.initializers.Constant(3.0))
    {'class_name': 'Constant', 'config': {'value': 3.0}}
    """
    config = {k: v for k, v in vars(initializer).items() if not k.startswith("_")}
    return {"class_name": type(initializer).__name__, "config": config}


def deserialize(config, custom_objects=None):
    """The initializer `serialize` described (or a name).

    >>> type(tg.keras.initializers.deserialize({"class_name": "Zeros", "config": {}})).__name__
    'Zeros'
    """
    if isinstance(config, str):
        return _init.get(config)
    name = config["class_name"]
    table = {k: v for k, v in vars(_init).items() if isinstance(v, type)}
    table.update(members())
    table.update(custom_objects or {})
    if name not in table:
        raise ValueError(f"deserialize: unknown initializer {name!r}")
    return table[name](**config.get("config", {}))


def members():
    """{name: object} added to keras.initializers (and tg.initializers)."""
    out = {"TruncatedNormal": TruncatedNormal, "LecunUniform": LecunUniform,
           "Identity": Identity, "IdentityInitializer": Identity,
           "OrthogonalInitializer": _init.Orthogonal,
           "serialize": serialize, "deserialize": deserialize}
    classes = {k: v for k, v in vars(_init).items() if isinstance(v, type) and
               issubclass(v, _init.Initializer)}
    classes.update({k: v for k, v in out.items() if isinstance(v, type)})
    for name in ("Zeros", "Ones", "Constant", "RandomNormal", "RandomUniform", "GlorotUniform",
                 "GlorotNormal", "HeUniform", "HeNormal", "LecunNormal", "LecunUniform",
                 "VarianceScaling", "Orthogonal", "TruncatedNormal", "Identity"):
        snake = _init._snake_name(name)
        out[snake] = classes[name]
    return out
