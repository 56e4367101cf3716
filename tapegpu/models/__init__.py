"""Neural-network building blocks above the core: `Module`, Keras-style layers, losses and
initializers. They are exposed as `tg.Module`, `tg.layers`, `tg.losses` (and
`tg.models.initializers`)."""
from . import initializers, layers, losses  # noqa: F401
from .layers import Sequential  # noqa: F401  (as keras.models.Sequential)
from .module import Module  # noqa: F401
