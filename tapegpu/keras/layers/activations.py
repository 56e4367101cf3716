"""Keras' activations by name (`get_activation`) and the activation layers: `Activation`,
`ReLU`, `LeakyReLU`, `PReLU`, `ELU`, `Softmax`.

An activation applied by a layer (`Dense(activation=...)`, `Activation`, `Softmax`) whose
description names a kind of logits keeps its input as the output's logits, so that a
cross-entropy of that kind computes from them (`_activate`).
"""
from ... import ops
from ...core.tensor import Tensor
from ...models import initializers, regularizers
from ...models.tensor_attributes import set_keras_logits
from ...ops import EXPORTS
from ...ops.nn import bias_activations
from .base import Layer


# Keras' activation names: the functions the op families list as activations, and "linear"
_ACTIVATIONS = {"linear": None, **{name: fn for name, fn in EXPORTS.items()
                                   if "activations" in fn.api}}
# the activations bias_act computes together with the bias, by function
_FUSABLE = {EXPORTS[name]: name for name in bias_activations() if name in EXPORTS}


# Two activations by their Keras names, for code that names them as Keras' own code does
# (keras.applications: the classifier's default and InceptionV3's Activation layers)
CLASSIFIER_ACTIVATION = "softmax"
RECTIFIER_ACTIVATION = "relu"


def get_activation(identifier):
    """An activation function from a Keras name or a callable (`None` and 'linear': identity).

    >>> act = tg.layers.get_activation("relu6")
    >>> act(tg.constant([-1.0, 7.0])).numpy()
    array([0., 6.], dtype=float32)
    """
    if identifier is None:
        return None
    if isinstance(identifier, str):
        if identifier not in _ACTIVATIONS:
            raise ValueError(f"unknown activation {identifier!r}; valid names: "
                             f"{sorted(_ACTIVATIONS)}, or pass a callable")
        return _ACTIVATIONS[identifier]
    if callable(identifier):
        return identifier
    raise TypeError(f"activation must be a name or a callable, got {identifier!r}")


def _keeps_logits(act):
    return getattr(act, "keras_logits", None) is not None


def _activate(act, x):
    """`act(x)` as a Keras layer applies it: the output of an activation whose description
    names a kind of logits (`keras_logits`: softmax's "categorical", the logistic's "binary")
    keeps `x` as its logits, and a cross-entropy of that kind computes from them, exactly, as
    Keras does on TensorFlow (tapegpu/models/losses.py) instead of from clipped
    probabilities."""
    if act is None:
        return x
    out = act(x)
    kind = getattr(act, "keras_logits", None)
    if kind is not None and isinstance(out, Tensor) and out is not x:
        set_keras_logits(out, kind, x)
    return out


class Activation(Layer):
    """Applies an activation function (a name or a callable).

    >>> tg.layers.Activation("gelu")(tg.zeros((2,))).numpy()
    array([0., 0.], dtype=float32)
    """

    supports_masking = True  # passes its input's mask on (Keras)

    def __init__(self, activation, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.activation = get_activation(activation)

    def call(self, inputs):
        return _activate(self.activation, inputs)


class ReLU(Layer):
    """Rectified linear unit with Keras' options: `max(x, 0)`, capped at `max_value`, with
    `negative_slope * (x - threshold)` below `threshold`.

    >>> tg.layers.ReLU(max_value=6.0)(tg.constant([-1.0, 3.0, 9.0])).numpy()
    array([0., 3., 6.], dtype=float32)
    """

    supports_masking = True  # passes its input's mask on (Keras)

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if max_value is not None and max_value < 0:
            raise ValueError(f"ReLU: max_value must be >= 0 or None, got {max_value}")
        if negative_slope < 0:
            raise ValueError(f"ReLU: negative_slope must be >= 0, got {negative_slope}")
        self.max_value = None if max_value is None else float(max_value)
        self.negative_slope, self.threshold = float(negative_slope), float(threshold)

    def call(self, inputs):
        if self.negative_slope == 0.0 and self.threshold == 0.0:
            y = ops.relu(inputs)
        else:
            y = ops.where(inputs >= self.threshold, inputs,
                          (inputs - self.threshold) * self.negative_slope)
        if self.max_value is not None:
            y = ops.minimum(y, ops.cast(self.max_value, y.dtype))
        return y


class LeakyReLU(Layer):
    """`x` for x >= 0, `negative_slope * x` below (Keras 3's default slope 0.3).

    >>> tg.layers.LeakyReLU(negative_slope=0.5)(tg.constant([-2.0, 2.0])).numpy()
    array([-1.,  2.], dtype=float32)
    """

    supports_masking = True  # passes its input's mask on (Keras)

    def __init__(self, negative_slope=0.3, name=None, **kwargs):
        if "alpha" in kwargs:  # the tf.keras 2 spelling
            negative_slope = kwargs.pop("alpha")
        super().__init__(name=name, **kwargs)
        if negative_slope < 0:
            raise ValueError(f"LeakyReLU: negative_slope must be >= 0, got {negative_slope}")
        self.negative_slope = float(negative_slope)

    def call(self, inputs):
        return ops.leaky_relu(inputs, alpha=self.negative_slope)


class PReLU(Layer):
    """Parametric rectifier: `x` for x >= 0, `alpha * x` below, with the trainable `alpha` of
    shape `input_shape[1:]` (size 1 along `shared_axes`), initialised to zeros.

    >>> layer = tg.keras.layers.PReLU(alpha_initializer=tg.keras.initializers.Constant(0.1))
    >>> layer(tg.constant([[-2.0, 3.0]])).numpy()
    array([[-0.2,  3. ]], dtype=float32)
    """

    supports_masking = True

    def __init__(self, alpha_initializer="Zeros", alpha_regularizer=None, alpha_constraint=None,
                 shared_axes=None, dtype=None, name=None, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        if alpha_constraint is not None:
            raise NotImplementedError(f"PReLU: alpha_constraint is not supported by tapegpu "
                                      f"(pass None), got {alpha_constraint!r}")
        self.alpha_initializer = initializers.get(
            alpha_initializer.lower() if isinstance(alpha_initializer, str) else
            alpha_initializer)
        self.alpha_regularizer = regularizers.get(alpha_regularizer)
        self.shared_axes = None if shared_axes is None else \
            list(shared_axes) if isinstance(shared_axes, (list, tuple)) else [shared_axes]

    def build(self, input_shape):
        shape = list(input_shape[1:])
        for a in self.shared_axes or ():
            if not 1 <= a < len(input_shape):
                raise ValueError(f"PReLU {self.name!r}: shared_axes {self.shared_axes} must be "
                                 f"non-batch axes (1..{len(input_shape) - 1}) of inputs of "
                                 f"shape {tuple(input_shape)}")
            shape[a - 1] = 1
        self.alpha = self.add_weight("alpha", tuple(shape), self.alpha_initializer,
                                     regularizer=self.alpha_regularizer)

    def call(self, inputs):
        want = self.alpha.shape
        if inputs.ndim != len(want) + 1 or any(
                w != 1 and w != d for w, d in zip(want, inputs.shape[1:])):
            raise ValueError(f"PReLU {self.name!r}: built for inputs of shape (batch,) + "
                             f"{want} (1: shared axes), got shape {inputs.shape}")
        zero = ops.zeros((), dtype=inputs.dtype)
        return ops.maximum(inputs, zero) + self.alpha * ops.minimum(inputs, zero)


class ELU(Layer):
    """Exponential linear unit: `x` for x > 0, `alpha * (exp(x) - 1)` otherwise.

    >>> tg.keras.layers.ELU(alpha=0.5)(tg.constant([-100.0, 2.0])).numpy()
    array([-0.5,  2. ], dtype=float32)
    """

    supports_masking = True

    def __init__(self, alpha=1.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.alpha = float(alpha)

    def call(self, inputs):
        zero = ops.zeros((), dtype=inputs.dtype)
        negative = ops.expm1(ops.minimum(inputs, zero)) * ops.cast(self.alpha, inputs.dtype)
        return ops.where(inputs > zero, inputs, negative)


class Softmax(Layer):
    """Softmax along `axis`.

    >>> tg.layers.Softmax()(tg.constant([[0.0, 0.0]])).numpy()
    array([[0.5, 0.5]], dtype=float32)
    """

    supports_masking = True  # passes its input's mask on (Keras)

    def __init__(self, axis=-1, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.axis = axis

    def call(self, inputs):
        if self.axis in (-1, inputs.ndim - 1):  # over the last axis: its logits are kept
            return _activate(ops.softmax, inputs)
        return ops.softmax(inputs, axis=self.axis)
