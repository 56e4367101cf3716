"""Building blocks above the core that Keras' layers and models use: `Module`, losses,
initializers, regularizers, and Keras' annotations of tensors (`tensor_attributes`: masks and
logits). They are exposed as `tg.Module`, `tg.losses`, `tg.initializers` (and
`tg.models.initializers`); the layers are in `tapegpu/keras/layers/` (`tg.layers`)."""
from . import initializers, losses, regularizers, tensor_attributes  # noqa: F401
from .module import Module  # noqa: F401
