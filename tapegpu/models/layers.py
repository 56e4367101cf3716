"""Keras-style layers: `Dense`, `BatchNormalization`, `LayerNormalization`, `Dropout`,
`Activation`, `ReLU`, `LeakyReLU`, `Softmax`, `Flatten`, `Reshape`, `Embedding`, `Lambda`,
`Concatenate`, `Add`, `Rescaling`, `Masking`, `Sequential`, and Keras 3's attention layers
`MultiHeadAttention`, `Attention`, `AdditiveAttention`.

A layer is a `Module` that creates its variables on its first call, from the input's shape and
dtype (`build`), then computes `call(inputs, ...)`. Layers whose behaviour differs between
training and inference take `training=` (default False, as Keras outside `fit`).

Masks, as Keras: `Embedding(mask_zero=True)` and `Masking` attach a bool mask to their output
(shape (batch, timesteps); `tg.keras.backend.get_keras_mask(output)` reads it); a layer whose
`call` takes `mask` receives it; layers that support masking (`supports_masking`) pass it on
(`compute_mask`); recurrent layers pass it on with `return_sequences=True`;
`GlobalAveragePooling1D` averages the unmasked steps only; a loss on a masked prediction
averages the unmasked positions. A layer that neither takes nor passes a mask drops it, as
Keras 3, but warns once (Keras 3 is silent, so a model would average over padding without
notice). The mask is kept beside the tensor, not on it (tapegpu/models/tensor_attributes.py).
"""
import functools
import inspect
import re
import threading
import warnings
import weakref

import numpy as np

from .. import ops
from ..core.dtypes import np_dtype
from ..core.tensor import Tensor, Variable, _thread, convert_to_tensor
from . import initializers, regularizers
from ..ops import EXPORTS
from ..ops.nn import bias_act, bias_activations, dropout_drawn
from ..ops.random import seeded_uniform
from ..ops.registry import InvalidArgumentError
from .module import Module
from .tensor_attributes import get_keras_mask, set_keras_logits, set_keras_mask

# Keras' activation names: the functions the op families list as activations, and "linear"
_ACTIVATIONS = {"linear": None, **{name: fn for name, fn in EXPORTS.items()
                                   if "activations" in fn.api}}
# the activations bias_act computes together with the bias, by function
_FUSABLE = {EXPORTS[name]: name for name in bias_activations() if name in EXPORTS}


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


class _Calls(threading.local):
    depth = 0  # how deep in layer calls this thread is


_calls = _Calls()
_with_added_losses = weakref.WeakSet()  # layers holding losses from `add_loss`


def _enter_call(layer):
    """Marks the start of a layer call; returns the depth to restore when it ends. The
    outermost call clears the losses `add_loss` added in the last call, of the layer and its
    sub-layers (Keras clears them at each top-level call); without such losses (the common
    case) nothing is walked."""
    depth = _calls.depth
    if depth == 0 and _with_added_losses:
        for m in (layer,) + tuple(layer.submodules):
            if m in _with_added_losses:
                m.__dict__["_added_losses"] = []
                _with_added_losses.discard(m)
    _calls.depth = depth + 1
    return depth


class Layer(Module):
    """Base class of layers: builds its variables on the first call.

    Subclasses implement `build(input_shape)` (creating variables with `add_weight`) and
    `call(inputs, ...)`. `dtype` is the variables' dtype; if None, it follows the first input's
    floating dtype (float32 for integer inputs).

    >>> class Scale(tg.layers.Layer):
    ...     def build(self, input_shape):
    ...         self.s = self.add_weight("s", (input_shape[-1],), "ones")
    ...     def call(self, x):
    ...         return x * self.s
    >>> Scale()(tg.ones((2, 3))).shape
    (2, 3)
    """

    _name_counts = {}
    # layers taking a list of inputs (Concatenate, Add): each is converted, `build` gets the
    # list of their shapes
    _MULTI_INPUT = False
    # Keras' masking: whether the layer passes its input's mask on unchanged (`compute_mask`),
    # and whether it makes a mask of its own from the inputs (Embedding(mask_zero=True), Masking)
    supports_masking = False
    _makes_mask = False
    _IGNORED_ATTRIBUTES = frozenset({"_regularized", "_init_args"})

    def __init__(self, dtype=None, name=None, input_shape=None, trainable=True):
        super().__init__(name=name if name is not None else _unique_name(type(self)))
        self._dtype = None if dtype is None else np.dtype(np_dtype(dtype))
        self.built = False
        if input_shape is not None:
            try:
                input_shape = tuple(None if d is None else int(d) for d in input_shape)
            except TypeError:
                raise TypeError(f"{type(self).__name__}: input_shape must be a tuple of "
                                f"dimensions (without the batch axis), got {input_shape!r}") \
                    from None
        self._input_shape_arg = input_shape
        self.trainable = bool(trainable)

    @property
    def trainable_variables(self):
        """The trainable variables of this layer and its sub-layers, less those of any layer
        with `trainable = False` (Keras' freezing), in the order of `variables`."""
        frozen = set()
        for m in (self,) + self.submodules:
            if not getattr(m, "trainable", True):
                frozen.update(id(v) for v in m.variables)
        return [v for v in self.variables if v.trainable and id(v) not in frozen]

    @property
    def non_trainable_variables(self):
        """The variables that `trainable_variables` leaves out, in the order of `variables`."""
        trainable = {id(v) for v in self.trainable_variables}
        return [v for v in self.variables if id(v) not in trainable]

    @property
    def dtype(self):
        """The variables' numpy dtype (None until built when not given)."""
        return self._dtype

    def build(self, input_shape):
        """Creates the layer's variables; `input_shape` is the first input's shape."""
        self.built = True

    # Keras' names for the variables
    weights = property(lambda self: self.variables)
    trainable_weights = property(lambda self: self.trainable_variables)
    non_trainable_weights = property(lambda self: self.non_trainable_variables)

    def get_config(self):
        """The constructor's arguments as a dict (Keras' `get_config`), where they are plain
        values (numbers, strings, None, and tuples, lists and dicts of them); `from_config`
        rebuilds the layer. Other arguments (e.g. an initializer object or a function) raise
        NotImplementedError naming them.

        >>> layer = tg.layers.Dense(3, activation="relu", name="d")
        >>> layer.get_config()
        {'units': 3, 'activation': 'relu', 'name': 'd', 'trainable': True}
        >>> tg.layers.Dense.from_config(layer.get_config()).units
        3
        """
        args, kw = self.__dict__.get("_init_args", ((), {}))
        try:
            bound = inspect.signature(type(self).__init__).bind(self, *args, **kw)
        except TypeError:
            bound = None
        config = {}
        if bound is not None:
            for key, value in list(bound.arguments.items())[1:]:
                param = inspect.signature(type(self).__init__).parameters[key]
                items = value.items() if param.kind is param.VAR_KEYWORD else [(key, value)]
                for k, v in items:
                    if not _plain(v):
                        raise NotImplementedError(
                            f"{type(self).__name__}.get_config: argument {k}={v!r} is not a "
                            "plain value (number, string, None, or a list/tuple/dict of them)")
                    config[k] = v
        config["name"] = self.name
        config["trainable"] = self.trainable
        return config

    @classmethod
    def from_config(cls, config):
        """The layer built from `get_config()`'s dict (new, unbuilt variables)."""
        return cls(**config)

    def get_weights(self):
        """The variables' values as numpy arrays (Keras' `get_weights`)."""
        return [v.numpy() for v in self.variables]

    def set_weights(self, weights):
        """Assigns arrays to the variables, in the order of `get_weights`."""
        variables = self.variables
        if len(weights) != len(variables):
            raise ValueError(f"{type(self).__name__} {self.name!r}: set_weights got "
                             f"{len(weights)} arrays for {len(variables)} variables")
        for v, w in zip(variables, weights):
            v.assign(np.asarray(w, dtype=v.dtype.as_numpy_dtype))

    def call(self, inputs, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must implement call(inputs)")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:  # the outermost constructor's arguments (get_config)
            user_init = cls.__dict__["__init__"]

            @functools.wraps(user_init)
            def __init__(self, *args, **kw):
                if "_init_args" not in self.__dict__:
                    self.__dict__["_init_args"] = (args, kw)
                user_init(self, *args, **kw)
            cls.__init__ = __init__
        if "build" in cls.__dict__:  # a layer built by hand is built (Keras' `layer.build(shape)`)
            user_build = cls.__dict__["build"]

            @functools.wraps(user_build)
            def build(self, input_shape):
                user_build(self, input_shape)
                self.built = True
            cls.build = build

    def add_weight(self, name=None, shape=None, initializer=None, trainable=True, dtype=None,
                   regularizer=None):
        """Creates a variable named `<layer>/<name>` initialised by `initializer`; a
        `regularizer`'s penalty of it is listed in `losses`.

        Keras 3's spelling works too: `add_weight(shape=..., initializer=...)`, or the shape
        first (`add_weight((3, 4), "ones")`). `initializer` defaults to 'glorot_uniform' for
        floating variables and 'zeros' otherwise, as in Keras.
        """
        if isinstance(name, (tuple, list)):  # Keras 3's positional order: shape, initializer
            if initializer is None and shape is not None:
                initializer = shape
            name, shape = None, name
        if shape is None:
            raise ValueError(f"{type(self).__name__}.add_weight: shape is required (a tuple of "
                             "dimensions)")
        if name is None:
            n = self.__dict__.get("_weight_count", 0)
            self.__dict__["_weight_count"] = n + 1
            name = "variable" if n == 0 else f"variable_{n}"
        dt = np_dtype(dtype) or self._dtype or np.dtype(np.float32)
        if initializer is None:
            initializer = "glorot_uniform" if np.dtype(dt).kind == "f" else "zeros"
        value = initializers.make(initializers.get(initializer), tuple(shape), dt)
        var = Variable(value, trainable=trainable, name=f"{self.name}/{name}")
        regularizer = regularizers.get(regularizer)
        if regularizer is not None:
            self.__dict__.setdefault("_regularized", []).append((var, regularizer))
        return var

    def add_loss(self, loss):
        """Adds a loss (a scalar tensor, e.g. an activity penalty computed in `call`) to
        `layer.losses`, as Keras: the added losses are cleared when the outermost layer is
        called again, so they are those of the last forward pass (a training step's
        `compute_loss` adds them to the loss)."""
        self.__dict__.setdefault("_added_losses", []).append(loss)
        _with_added_losses.add(self)

    @property
    def losses(self):
        """The penalties of the regularized weights of this layer and its sub-layers (Keras'
        `layer.losses`), computed now: under a tape they are differentiable, and the losses
        `add_loss` added during the last call.

        >>> layer = tg.layers.Dense(1, kernel_initializer="ones", kernel_regularizer="l2")
        >>> _ = layer(tg.ones((1, 2)))
        >>> [round(float(x), 4) for x in layer.losses]  # 0.01 * (1 + 1)
        [0.02]
        """
        out = []
        for m in (self,) + tuple(self.submodules):
            for var, reg in getattr(m, "_regularized", ()):
                out.append(reg(var.value()))
            out.extend(getattr(m, "_activity_losses", ()))  # ActivityRegularization's last
            out.extend(m.__dict__.get("_added_losses", ()))
        return out

    def __call__(self, inputs, *args, **kwargs):
        return self._tracked(self._layer_call, inputs, *args, **kwargs)

    def _tracked(self, body, *args, **kwargs):
        """`body(*args, **kwargs)` as a call of this layer (see `_enter_call`)."""
        depth = _enter_call(self)
        try:
            return body(*args, **kwargs)
        finally:
            _calls.depth = depth

    def _layer_call(self, inputs, *args, **kwargs):
        symbolic = _symbolic_input(inputs)
        if symbolic is not None:  # a functional model's graph (keras.Input): record the call
            return symbolic._symbolic_call(self, inputs, args, kwargs)
        if self._MULTI_INPUT:
            return self._call_multi(inputs, args, kwargs)
        x = self._convert(inputs)
        if not self.built:
            if self._dtype is None:
                self._dtype = x._data.dtype if x._data.dtype.kind == "f" else np.dtype(np.float32)
                x = self._convert(inputs)
            self.build(x.shape)
            self.built = True
        mask = kwargs["mask"] if "mask" in kwargs else get_keras_mask(inputs)
        if mask is None and not self._makes_mask:
            return self.call(x, *args, **kwargs)
        if mask is not None and "mask" not in kwargs:
            if _takes_mask(self):
                kwargs["mask"] = mask
            elif not self.supports_masking:
                self._warn_mask_dropped()
        return _attach_mask(self, self.call(x, *args, **kwargs), self.compute_mask(x, mask))

    def compute_mask(self, inputs, mask=None):
        """The mask of the output (Keras): the input's `mask` if the layer supports masking,
        else None."""
        return mask if self.supports_masking else None

    def _warn_mask_dropped(self):
        if not getattr(self, "_mask_warned", False):
            self._mask_warned = True
            warnings.warn(f"{type(self).__name__} {self.name!r} does not support masking: the "
                          "mask of its input is dropped (as Keras 3), and the padded steps "
                          "count in its output", stacklevel=3)

    def _call_multi(self, inputs, args, kwargs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) < 1:
            raise ValueError(f"{type(self).__name__} {self.name!r}: expects a list of input "
                             f"tensors, got {type(inputs).__name__}")
        xs = [self._convert(x) for x in inputs]
        if not self.built:
            if self._dtype is None:
                first = xs[0]._data.dtype
                self._dtype = first if first.kind == "f" else np.dtype(np.float32)
                xs = [self._convert(x) for x in inputs]
            self.build([x.shape for x in xs])
            self.built = True
        return self.call(xs, *args, **kwargs)

    def _convert(self, inputs):
        x = inputs._read() if isinstance(inputs, Variable) else inputs
        if not isinstance(x, Tensor):
            x = convert_to_tensor(x, dtype_hint=self._dtype) if self._dtype is not None \
                else convert_to_tensor(x)
        if self._dtype is None:
            return x
        kind = x._data.dtype.kind
        if kind in "iub":  # integer inputs are cast to the layer's dtype, as Keras does
            return ops.cast(x, self._dtype)
        if x._data.dtype != self._dtype:
            raise TypeError(f"{type(self).__name__} {self.name!r}: input of dtype "
                            f"{x._data.dtype.name} and shape {x.shape}, but the layer's "
                            f"variables are {self._dtype.name}; cast the input with tg.cast "
                            f"(tapegpu never converts floating dtypes silently)")
        return x


class Dense(Layer):
    """A fully connected layer: `activation(inputs @ kernel + bias)`.

    The kernel has shape `(input_shape[-1], units)`; inputs of rank > 2 are multiplied along
    their last axis.

    >>> layer = tg.layers.Dense(4, activation="elu")
    >>> layer(tg.ones((2, 3))).shape
    (2, 4)
    >>> layer.kernel.shape, layer.bias.shape
    ((3, 4), (4,))
    """

    supports_masking = True  # passes its input's mask on (Keras)

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 dtype=None, name=None, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        if int(units) <= 0 or int(units) != units:
            raise ValueError(f"Dense: units must be a positive integer, got {units!r}")
        self.units = int(units)
        self.activation = get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel = None
        self.bias = None

    def build(self, input_shape):
        if len(input_shape) < 2:
            raise ValueError(f"Dense {self.name!r}: inputs must have rank >= 2 (batch, ..., "
                             f"features), got shape {input_shape}; add a batch axis with "
                             "tg.expand_dims(x, 0)")
        self.kernel = self.add_weight("kernel", (input_shape[-1], self.units),
                                      self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.bias = self.add_weight("bias", (self.units,), self.bias_initializer,
                                        regularizer=self.bias_regularizer)

    def call(self, inputs):
        if inputs.ndim < 2 or inputs.shape[-1] != self.kernel.shape[0]:
            raise ValueError(f"Dense {self.name!r}: expected inputs with last dimension "
                             f"{self.kernel.shape[0]}, got shape {inputs.shape}")
        y = ops.matmul(inputs, self.kernel)
        fused = _FUSABLE.get(self.activation)
        if self.use_bias and fused is not None and not _keeps_logits(self.activation):
            return bias_act(y, self.bias, fused)  # one op (one kernel on a GPU)
        if self.use_bias:
            y = y + self.bias
        return _activate(self.activation, y)


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


class BatchNormalization(Layer):
    """Normalises over the batch (training) or with moving statistics (inference).

    With `training=True` the output uses the batch mean and (biased) variance over every axis
    but `axis`, and the moving statistics are updated:
    `moving = moving * momentum + batch_stat * (1 - momentum)` (Keras' rule). With
    `training=False` (default) it uses `moving_mean` and `moving_variance`, which are
    non-trainable variables. `gamma` (scale) and `beta` (center) are trainable.

    `fused` is accepted for code written for tf.keras and ignored (as Keras 3 does): there is
    one implementation, `tg.nn.batch_normalization`.

    >>> bn = tg.layers.BatchNormalization()
    >>> x = tg.constant([[1.0, 10.0], [3.0, 30.0]])
    >>> bn(x, training=True).numpy().round(2)
    array([[-1., -1.],
           [ 1.,  1.]], dtype=float32)
    >>> bn.moving_mean.numpy().round(2)
    array([0.02, 0.2 ], dtype=float32)
    """

    supports_masking = True  # passes its input's mask on (Keras)

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones",
                 moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 fused=None, dtype=None, name=None, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        if fused not in (None, True, False):
            raise TypeError(f"BatchNormalization: fused must be None, True or False, got "
                            f"{fused!r}")
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"BatchNormalization: momentum must be in [0, 1], got {momentum}")
        self.axis = int(axis)
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.center, self.scale = bool(center), bool(scale)
        self._inits = (beta_initializer, gamma_initializer, moving_mean_initializer,
                       moving_variance_initializer)
        self.gamma = self.beta = self.moving_mean = self.moving_variance = None

    def build(self, input_shape):
        ndim = len(input_shape)
        if not -ndim <= self.axis < ndim:
            raise ValueError(f"BatchNormalization {self.name!r}: axis {self.axis} is out of "
                             f"range for inputs of shape {input_shape}")
        self.axis = self.axis % ndim
        dim = (input_shape[self.axis],)
        beta, gamma, mean, var = self._inits
        if self.scale:
            self.gamma = self.add_weight("gamma", dim, gamma)
        if self.center:
            self.beta = self.add_weight("beta", dim, beta)
        self.moving_mean = self.add_weight("moving_mean", dim, mean, trainable=False)
        self.moving_variance = self.add_weight("moving_variance", dim, var, trainable=False)

    def call(self, inputs, training=False):
        ndim = inputs.ndim
        features = self.moving_mean.shape[0]
        if ndim <= self.axis or inputs.shape[self.axis] != features:
            raise ValueError(f"BatchNormalization {self.name!r}: built for {features} features "
                             f"on axis {self.axis}, got inputs of shape {inputs.shape}")
        bshape = [1] * ndim
        bshape[self.axis] = inputs.shape[self.axis]
        if training:
            axes = [a for a in range(ndim) if a != self.axis]
            mean, var = ops.moments(inputs, axes=axes, keepdims=True)
            self._update_moving(mean, var)
        else:
            mean = ops.reshape(self.moving_mean.value(), bshape)
            var = ops.reshape(self.moving_variance.value(), bshape)
        gamma = ops.reshape(self.gamma.value(), bshape) if self.scale else None
        beta = ops.reshape(self.beta.value(), bshape) if self.center else None
        return ops.batch_normalization(inputs, mean, var, beta, gamma, self.epsilon)

    def _update_moving(self, mean, var):
        """moving = moving * m + stat * (1 - m): eagerly on raw arrays (no tape records it);
        inside tg.function as ops and an assign, so that every call of the function updates
        the statistics (a raw update would happen at the trace only)."""
        m = self.momentum
        for moving, stat in ((self.moving_mean, mean), (self.moving_variance, var)):
            if _thread.tracers:
                batch = ops.reshape(ops.stop_gradient(stat), moving.shape)
                moving.assign(moving.value() * m + batch * (1.0 - m))
                continue
            batch = stat._data.reshape(moving.shape)
            moving._assign_array(moving._value._data * m + batch * (1.0 - m))


class Dropout(Layer):
    """Zeroes inputs with probability `rate` in training and scales the rest by 1/(1 - rate);
    the identity in inference.

    >>> drop = tg.layers.Dropout(0.5, seed=0)
    >>> x = tg.ones((4, 4))
    >>> bool(tg.reduce_all(drop(x) == x))           # inference: unchanged
    True
    >>> sorted(set(drop(x, training=True).numpy().ravel().tolist()))
    [0.0, 2.0]
    """

    supports_masking = True  # passes its input's mask on (Keras)

    def __init__(self, rate, noise_shape=None, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"Dropout: rate must be in [0, 1), got {rate}")
        self.rate = float(rate)
        self.noise_shape = noise_shape
        self._generator = seeded_uniform(seed)

    def call(self, inputs, training=False):
        if not training or self.rate == 0.0:
            return inputs
        noise = None if self.noise_shape is None else \
            tuple(s if s is not None else d for s, d in zip(self.noise_shape, inputs.shape))
        if self._generator is None:
            return ops.dropout(inputs, self.rate, noise_shape=noise)
        return dropout_drawn(inputs, self.rate, noise, self._generator)


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


class Flatten(Layer):
    """Reshapes `(batch, d1, d2, ...)` to `(batch, d1 * d2 * ...)`.

    >>> tg.layers.Flatten()(tg.zeros((2, 3, 4))).shape
    (2, 12)
    """

    def call(self, inputs):
        if inputs.ndim == 0:
            raise ValueError(f"Flatten {self.name!r}: inputs must have a batch axis, got a "
                             "scalar")
        if inputs.ndim == 1:
            return ops.expand_dims(inputs, 1)
        return ops.reshape(inputs, (inputs.shape[0], -1))


class Reshape(Layer):
    """Reshapes each example to `target_shape` (the batch axis is kept; one entry may be -1).

    >>> tg.layers.Reshape((3, 2))(tg.zeros((4, 6))).shape
    (4, 3, 2)
    """

    def __init__(self, target_shape, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        try:
            self.target_shape = tuple(int(d) for d in target_shape)
        except TypeError:
            raise TypeError(f"Reshape: target_shape must be a tuple of integers, got "
                            f"{target_shape!r}") from None
        if sum(d == -1 for d in self.target_shape) > 1 or \
                any(d < -1 or d == 0 for d in self.target_shape):
            raise ValueError(f"Reshape: target_shape must hold positive sizes and at most one "
                             f"-1, got {target_shape!r}")

    def call(self, inputs):
        per_example = int(np.prod(inputs.shape[1:]))
        known = int(np.prod([d for d in self.target_shape if d != -1]))
        if (-1 in self.target_shape and per_example % known) or \
                (-1 not in self.target_shape and known != per_example):
            raise ValueError(f"Reshape {self.name!r}: cannot reshape inputs of shape "
                             f"{inputs.shape} ({per_example} values per example) to "
                             f"target_shape {self.target_shape}")
        return ops.reshape(inputs, (inputs.shape[0],) + self.target_shape)


class LayerNormalization(Layer):
    """Normalises each example over `axis` (default: the last):
    `(x - mean) / sqrt(variance + epsilon) * gamma + beta`, Keras' formula.

    >>> ln = tg.layers.LayerNormalization()
    >>> ln(tg.constant([[1.0, 3.0]])).numpy().round(4)
    array([[-0.9995,  0.9995]], dtype=float32)
    """

    supports_masking = True  # passes its input's mask on (Keras)

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", dtype=None, name=None,
                 **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        self.axis = tuple(axis) if isinstance(axis, (list, tuple)) else (int(axis),)
        self.epsilon = float(epsilon)
        self.center, self.scale = bool(center), bool(scale)
        self._inits = (beta_initializer, gamma_initializer)
        self.gamma = self.beta = None

    def build(self, input_shape):
        ndim = len(input_shape)
        for a in self.axis:
            if not -ndim <= a < ndim:
                raise ValueError(f"LayerNormalization {self.name!r}: axis {a} is out of range "
                                 f"for inputs of shape {input_shape}")
        self.axis = tuple(sorted(a % ndim for a in self.axis))
        shape = tuple(input_shape[a] for a in self.axis)
        if self.scale:
            self.gamma = self.add_weight("gamma", shape, self._inits[1])
        if self.center:
            self.beta = self.add_weight("beta", shape, self._inits[0])

    def call(self, inputs):
        bshape = [inputs.shape[a] if a in self.axis else 1 for a in range(inputs.ndim)]
        mean, var = ops.moments(inputs, axes=list(self.axis), keepdims=True)
        y = (inputs - mean) * ops.rsqrt(var + self.epsilon)
        if self.scale:
            y = y * ops.reshape(self.gamma.value(), bshape)
        if self.center:
            y = y + ops.reshape(self.beta.value(), bshape)
        return y


class Embedding(Layer):
    """Maps integer indices in [0, input_dim) to rows of an `(input_dim, output_dim)` table.

    With `mask_zero=True` index 0 is padding: the output carries the mask `inputs != 0` for the
    layers after it (recurrent layers skip the padded steps), as Keras
    (`tg.keras.backend.get_keras_mask` reads it).

    >>> emb = tg.layers.Embedding(10, 4)
    >>> emb(tg.constant([[1, 2, 3]])).shape
    (1, 3, 4)
    >>> out = tg.layers.Embedding(10, 4, mask_zero=True)(tg.constant([[5, 2, 0]]))
    >>> tg.keras.backend.get_keras_mask(out).numpy()
    array([[ True,  True, False]])
    """

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", dtype=None,
                 name=None, mask_zero=False, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        self.mask_zero = self._makes_mask = bool(mask_zero)
        for label, n in (("input_dim", input_dim), ("output_dim", output_dim)):
            if int(n) != n or int(n) <= 0:
                raise ValueError(f"Embedding: {label} must be a positive integer, got {n!r}")
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.embeddings_initializer = initializers.get(embeddings_initializer)
        self.embeddings = None

    def _convert(self, inputs):  # indices stay integers
        x = inputs._read() if isinstance(inputs, Variable) else inputs
        x = x if isinstance(x, Tensor) else convert_to_tensor(x)
        if x._data.dtype.kind == "f":  # Keras accepts floats holding integers
            x = ops.cast(x, "int64")
        if x._data.dtype.kind not in "iu":
            raise TypeError(f"Embedding {self.name!r}: indices must be integers, got "
                            f"{x.dtype.name} of shape {x.shape}")
        return x

    def build(self, input_shape):
        self._dtype = self._dtype if self._dtype is not None and self._dtype.kind == "f" \
            else np.dtype(np.float32)
        self.embeddings = self.add_weight("embeddings", (self.input_dim, self.output_dim),
                                          self.embeddings_initializer)

    def call(self, inputs):
        data = inputs._data
        if data.size and (int(data.min()) < 0 or int(data.max()) >= self.input_dim):
            raise InvalidArgumentError(f"Embedding {self.name!r}: indices must be in [0, "
                                       f"{self.input_dim}), got values in [{int(data.min())}, "
                                       f"{int(data.max())}]")
        return ops.gather(self.embeddings, inputs)

    def compute_mask(self, inputs, mask=None):
        """`inputs != 0` with `mask_zero=True`, else None (Keras)."""
        return ops.not_equal(inputs, 0) if self.mask_zero else None


class Masking(Layer):
    """Marks the timesteps whose features all equal `mask_value` as padding: they become zeros,
    and the output carries the mask `any(inputs != mask_value, axis=-1)` for the layers after it
    (recurrent layers skip the padded steps), as Keras. (Keras multiplies by the mask, so a
    padded step holding inf or NaN becomes NaN; here it is 0.)

    >>> x = tg.constant([[[1.0, 2.0], [0.0, 0.0]]])
    >>> tg.keras.backend.get_keras_mask(tg.layers.Masking()(x)).numpy()
    array([[ True, False]])
    """

    supports_masking = True
    _makes_mask = True

    def __init__(self, mask_value=0.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.mask_value = mask_value

    def call(self, inputs):
        keep = ops.reduce_any(ops.not_equal(inputs, self.mask_value), axis=-1, keepdims=True)
        return ops.where(keep, inputs, ops.zeros((), dtype=inputs.dtype))

    def compute_mask(self, inputs, mask=None):
        """The steps with a feature different from `mask_value`."""
        return ops.reduce_any(ops.not_equal(inputs, self.mask_value), axis=-1)


class Lambda(Layer):
    """Wraps a function of the inputs as a layer (`arguments` are extra keyword arguments).

    >>> tg.layers.Lambda(lambda x: x * 2.0)(tg.ones((2,))).numpy()
    array([2., 2.], dtype=float32)
    """

    def __init__(self, function, output_shape=None, arguments=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not callable(function):
            raise TypeError(f"Lambda: function must be callable, got {function!r}")
        self.function = function
        self.arguments = dict(arguments or {})

    def __call__(self, inputs, *args, **kwargs):
        symbolic = _symbolic_input(inputs)
        if symbolic is not None:
            return symbolic._symbolic_call(self, inputs, args, kwargs)
        self.built = True
        if isinstance(inputs, np.ndarray):  # arrays become tensors, as for every layer
            inputs = convert_to_tensor(inputs)
        elif isinstance(inputs, (list, tuple)):
            inputs = type(inputs)(convert_to_tensor(x) if isinstance(x, np.ndarray) else x
                                  for x in inputs)
        return self.call(inputs, *args, **kwargs)

    def call(self, inputs, *args, **kwargs):
        return self.function(inputs, *args, **self.arguments, **kwargs)


class Concatenate(Layer):
    """Concatenates a list of tensors along `axis`.

    >>> tg.layers.Concatenate()([tg.ones((2, 1)), tg.zeros((2, 3))]).shape
    (2, 4)
    """

    _MULTI_INPUT = True
    supports_masking = True  # the masks concatenate along `axis` (Keras)

    def __init__(self, axis=-1, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.axis = int(axis)

    def _call_multi(self, inputs, args, kwargs):
        return _merge_call(self, inputs, args, kwargs)

    def compute_mask(self, inputs, mask=None):
        """Keras' rule: each input's mask (all True for an input without one) broadcast to the
        input's shape, concatenated along `axis`, then any() over the last axis; None when no
        input has a mask. Concatenating sequences along time concatenates their masks."""
        if mask is None:
            return None
        if not isinstance(mask, (list, tuple)) or len(mask) != len(inputs):
            raise ValueError(f"Concatenate {self.name!r}: mask must be a list with one entry "
                             f"per input ({len(inputs)}), got {mask!r}")
        if all(m is None for m in mask):
            return None
        full = []
        for x, m in zip(inputs, mask):
            if m is None:
                full.append(ops.fill(x.shape, True))
                continue
            m = convert_to_tensor(m)
            while m.ndim < x.ndim:
                m = ops.expand_dims(m, -1)
            full.append(ops.broadcast_to(m, x.shape))
        return ops.reduce_any(ops.concat(full, axis=self.axis), axis=-1)

    def call(self, inputs):
        shapes = [x.shape for x in inputs]
        ndim = len(shapes[0])
        axis = self.axis % ndim if ndim else 0
        if any(len(s) != ndim or s[:axis] + s[axis + 1:] != shapes[0][:axis] +
               shapes[0][axis + 1:] for s in shapes):
            raise ValueError(f"Concatenate {self.name!r}: inputs must match in every axis but "
                             f"the concatenation axis ({self.axis}), got shapes {shapes}")
        return ops.concat(list(inputs), axis=self.axis)


class Add(Layer):
    """Adds a list of tensors of the same shape (broadcasting as the `+` operator).

    >>> tg.layers.Add()([tg.ones((2,)), tg.ones((2,))]).numpy()
    array([2., 2.], dtype=float32)
    """

    _MULTI_INPUT = True
    supports_masking = True  # the output's mask: the OR of the inputs' (Keras' merge layers)

    def _call_multi(self, inputs, args, kwargs):
        return _merge_call(self, inputs, args, kwargs)

    def compute_mask(self, inputs, mask=None):
        """The OR of the inputs' masks (Keras), None if an input has none."""
        return _or_masks(self, inputs, mask)

    def call(self, inputs):
        y = inputs[0]
        for x in inputs[1:]:
            y = y + x
        return y


class Rescaling(Layer):
    """`inputs * scale + offset` (integer inputs are cast to the layer's dtype first).

    >>> tg.layers.Rescaling(1 / 255)(tg.constant([[0, 255]], dtype="uint8")).numpy()
    array([[0., 1.]], dtype=float32)
    """

    supports_masking = True  # passes its input's mask on (Keras)

    def __init__(self, scale, offset=0.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale, self.offset = float(scale), float(offset)

    def call(self, inputs):
        return inputs * self.scale + self.offset


class Sequential(Layer):
    """A stack of layers, each fed the previous one's output.

    `training=` is passed to the layers whose `call` accepts it.

    >>> model = tg.layers.Sequential([tg.layers.Dense(8, activation="gelu"),
    ...                               tg.layers.Dense(2)])
    >>> model(tg.ones((5, 3))).shape
    (5, 2)
    >>> [v.shape for v in model.trainable_variables]
    [(3, 8), (8,), (8, 2), (2,)]
    """

    def __init__(self, layers=None, name=None):
        super().__init__(name=name)
        self.layers = []
        for layer in layers or ():
            self.add(layer)

    def add(self, layer):
        """Appends a layer (any callable; modules among them are tracked)."""
        if not callable(layer):
            raise TypeError(f"Sequential.add: expected a layer or callable, got {layer!r}")
        self.layers.append(layer)

    def __call__(self, inputs, training=False):
        self.built = True
        x = inputs
        for layer in self.layers:
            if _takes_training(layer):
                x = layer(x, training=training)
            else:
                x = layer(x)
        return x

    def call(self, inputs, training=False):
        return self(inputs, training=training)

    def summary(self, print_fn=print):
        """Prints each layer with its variables' shapes and the parameter count."""
        total = 0
        for layer in self.layers:
            vs = layer.variables if isinstance(layer, Module) else ()
            n = sum(int(np.prod(v.shape)) for v in vs)
            total += n
            print_fn(f"{getattr(layer, 'name', type(layer).__name__):<24} "
                     f"{str([v.shape for v in vs]):<40} {n:>10,}")
        print_fn(f"{'total':<24} {'':<40} {total:>10,}")


def _keras_snake(name):
    """Keras' snake case: 'MyModel' -> 'my_model', 'MLP' -> 'mlp', 'ReLU' -> 're_lu'."""
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def _unique_name(cls):
    """'dense', 'dense_1', ... per layer class (Keras' naming), so variable names differ."""
    base = _keras_snake(cls.__name__)
    n = Layer._name_counts.get(base, 0)
    Layer._name_counts[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


def _plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _symbolic_input(inputs):
    """The first symbolic tensor (a functional model's graph edge, `keras.Input`) among
    `inputs` (a tensor or a list/tuple of them), or None."""
    if hasattr(inputs, "_symbolic_call"):
        return inputs
    if isinstance(inputs, (list, tuple)):
        for x in inputs:
            if hasattr(x, "_symbolic_call"):
                return x
    return None


def _takes_training(layer):
    return "training" in _call_parameters(layer)


def _takes_mask(layer):
    return "mask" in _call_parameters(layer)


def _call_parameters(layer):
    """The names of the parameters of `layer.call` (or of a plain callable), cached."""
    fn = layer.call if isinstance(layer, Layer) else layer
    key = getattr(fn, "__func__", fn)  # a layer class's call, or a plain callable
    try:
        known = _PARAMETERS.get(key)
    except TypeError:  # neither weakly referable nor hashable: not cached
        key = known = None
    if known is None:
        try:
            known = frozenset(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            known = frozenset()
        if key is not None:
            try:
                _PARAMETERS[key] = known
            except TypeError:  # e.g. a builtin function (no weak reference): not cached
                pass
    return known


# function -> the names of its parameters (inspect is slow per call); weak keys, so a callable
# dropped by every Sequential that held it is freed
_PARAMETERS = weakref.WeakKeyDictionary()


def _attach_mask(layer, out, mask):
    """Attaches the output mask `mask` (None: none) to `out`, a tensor or a tuple whose first
    item is the output (recurrent layers' `return_state`)."""
    head = out[0] if isinstance(out, (tuple, list)) and out else out
    if isinstance(head, Tensor):
        set_keras_mask(head, mask)
    return out


# Two activations by their Keras names, for code that names them as Keras' own code does
# (keras.applications: the classifier's default and InceptionV3's Activation layers)
CLASSIFIER_ACTIVATION = "softmax"
RECTIFIER_ACTIVATION = "relu"


# -- attention (Keras 3's MultiHeadAttention, Attention, AdditiveAttention) ------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _as_mask(mask, label, layer):
    """A Keras mask (bool, or numbers: kept where > 0.5) as a bool tensor, or None."""
    if mask is None:
        return None
    m = mask if isinstance(mask, Tensor) else convert_to_tensor(mask)
    if m._data.dtype.kind == "b":
        return m
    if m._data.dtype.kind not in "iuf":
        raise TypeError(f"{type(layer).__name__} {layer.name!r}: {label} must be bool or "
                        f"numeric, got {m.dtype.name} of shape {m.shape}")
    return ops.greater(m, 0.5) if m._data.dtype.kind == "f" else ops.not_equal(m, 0)


def _and(a, b):
    return b if a is None else a if b is None else ops.logical_and(a, b)


def _causal_mask(tq, ts):
    """(1, tq, ts) bool: query step i attends to value steps j <= i (Keras' causal mask)."""
    return ops.reshape(ops.greater_equal(ops.reshape(ops.range(tq), (tq, 1)),
                                         ops.reshape(ops.range(ts), (1, ts))), (1, tq, ts))


def _masked_attention_weights(scores, mask, axes):
    """Keras' masked softmax over `axes`: masked scores become -1e9 (-3e4 in float16) and their
    weights 0 (so a row masked entirely gets weights 0, not a uniform distribution)."""
    if mask is not None:
        big = -3e4 if scores._data.dtype == np.float16 else -1e9
        scores = ops.where(mask, scores, ops.cast(big, scores.dtype))
    if len(axes) == 1:
        weights = ops.softmax(scores, axis=axes[0])
    else:
        weights = ops.exp(scores - ops.reduce_logsumexp(scores, axis=list(axes), keepdims=True))
    if mask is not None:
        weights = ops.where(mask, weights, ops.zeros((), dtype=weights.dtype))
    return weights


def _attention_dropout(layer, weights, training):
    if not training or layer.dropout == 0.0:
        return weights
    if layer._generator is None:
        return ops.dropout(weights, layer.dropout)
    return dropout_drawn(weights, layer.dropout, None, layer._generator)


def _heads_first(x):
    """(batch..., steps, heads, channels) <-> (batch..., heads, steps, channels)."""
    perm = list(range(x.ndim))
    perm[-3], perm[-2] = perm[-2], perm[-3]
    return ops.transpose(x, perm)


def _attention_equations(rank, attn_axes):
    """Keras' einsum equations of multi-head attention over `attn_axes` of projected tensors of
    `rank` (batch..., attention axes..., heads, channels): the key-query products (scores of
    shape (batch..., heads, query axes..., key axes...)) and the weighted sum of the values."""
    target = _LETTERS[:rank]
    batch = [i for i in range(rank) if i not in attn_axes and i != rank - 1]
    source, offset = "", rank
    for i in range(rank):
        if i in batch or i == rank - 1:
            source += target[i]
        else:
            source += _LETTERS[offset]
            offset += 1
    product = "".join([target[i] for i in batch] + [target[i] for i in attn_axes] +
                      [source[i] for i in attn_axes])
    return f"{source},{target}->{product}", f"{product},{source}->{target}", len(product)


def _no_constraints(layer_name, **given):
    for key, value in given.items():
        if value is not None:
            raise NotImplementedError(f"{layer_name}: {key} is not supported by tapegpu (pass "
                                      f"None), got {value!r}")


class MultiHeadAttention(Layer):
    """Keras 3's multi-head attention: `num_heads` heads, each projecting `query`, `key` and
    `value` (each `(batch, steps..., features)`) to `key_dim` / `value_dim` channels, attending
    with `weights = softmax(q k^T / sqrt(key_dim))` over `attention_axes` (default: every axis
    between the batch and the features), and projecting the concatenated heads back to the
    query's features (or `output_shape`).

    Called as Keras: `layer(query, value, key=None, attention_mask=None,
    return_attention_scores=False, training=False, use_causal_mask=False)`; `key` defaults to
    `value`. The masks the inputs carry (e.g. from `Embedding(mask_zero=True)`), or
    `query_mask`/`value_mask`/`key_mask` given explicitly,
    restrict the attention as Keras' (query steps x value steps), together with
    `attention_mask` (bool, `(batch, query steps, value steps)`) and the causal mask; the output
    carries the query's mask. A query step whose every value step is masked gets weights 0.

    The weights are Keras' (`query/kernel (features, heads, key_dim)`, `query/bias`, `key/...`,
    `gate/...` with `use_gate`, `value/...`, `attention_output/kernel (heads, value_dim,
    out)`, `attention_output/bias`), in Keras' order, so `set_weights(keras_layer.get_weights())`
    carries a trained Keras layer over. `dropout` drops attention weights in training (`seed`
    as `Dropout`'s). `flash_attention` is accepted and does not change the result.

    >>> mha = tg.keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, name="mha")
    >>> x = tg.ones((3, 5, 8))
    >>> mha(x, x).shape
    (3, 5, 8)
    >>> out, scores = mha(x, x, return_attention_scores=True, use_causal_mask=True)
    >>> scores.shape  # (batch, heads, query steps, value steps)
    (3, 2, 5, 5)
    >>> [v.name for v in mha.variables][:2]
    ['mha/query/kernel', 'mha/query/bias']
    """

    supports_masking = True

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 output_shape=None, attention_axes=None, sliding_window=None,
                 flash_attention=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 use_gate=False, seed=None, dtype=None, name=None, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        for label, value, optional in (("num_heads", num_heads, False),
                                       ("key_dim", key_dim, False),
                                       ("value_dim", value_dim, True)):
            if optional and value is None:
                continue
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"MultiHeadAttention: {label} must be a positive integer"
                                 f"{' or None' if optional else ''}, got {value!r}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"MultiHeadAttention: dropout must be in [0, 1), got {dropout!r}")
        if flash_attention and dropout > 0.0:
            raise ValueError("MultiHeadAttention: dropout is not supported when flash attention "
                             "is enabled; set dropout=0.0 to use flash_attention")
        if sliding_window is not None and (not isinstance(sliding_window, int) or
                                           sliding_window <= 0):
            raise ValueError(f"MultiHeadAttention: sliding_window must be None or a positive "
                             f"integer, got {sliding_window!r}")
        _no_constraints("MultiHeadAttention", activity_regularizer=activity_regularizer,
                        kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        self.num_heads, self.key_dim = int(num_heads), int(key_dim)
        self.value_dim = int(value_dim) if value_dim else self.key_dim
        self.dropout = float(dropout)
        self.use_bias, self.use_gate = bool(use_bias), bool(use_gate)
        if output_shape:
            try:
                output_shape = (int(output_shape),) if np.ndim(output_shape) == 0 else \
                    tuple(int(d) for d in output_shape)
            except (TypeError, ValueError):
                raise ValueError(f"MultiHeadAttention: output_shape must be an int or a tuple "
                                 f"of ints, got {output_shape!r}") from None
        self._output_shape = output_shape or None
        if isinstance(attention_axes, int):
            attention_axes = (attention_axes,)
        elif attention_axes is not None and not isinstance(attention_axes, (list, tuple)):
            raise ValueError(f"MultiHeadAttention: attention_axes must be an int, list or "
                             f"tuple, got {attention_axes!r}")
        self.attention_axes = None if attention_axes is None else tuple(attention_axes)
        self.sliding_window = sliding_window
        self.flash_attention = flash_attention
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.seed = seed
        self._generator = seeded_uniform(seed)

    def _dense(self, name, kernel_shape, bias_shape):
        kernel = self.add_weight(f"{name}/kernel", kernel_shape, self.kernel_initializer,
                                 regularizer=self.kernel_regularizer)
        bias = self.add_weight(f"{name}/bias", bias_shape, self.bias_initializer,
                               regularizer=self.bias_regularizer) if self.use_bias else None
        return kernel, bias

    def _build_shapes(self, query_shape, value_shape=None, key_shape=None):
        """Creates the weights for inputs of these shapes (Keras' `build(query_shape,
        value_shape, key_shape=None)`; `value_shape` defaults to `query_shape`)."""
        value_shape = query_shape if value_shape is None else tuple(value_shape)
        key_shape = value_shape if key_shape is None else tuple(key_shape)
        query_shape = tuple(query_shape)
        if value_shape[1:-1] != key_shape[1:-1]:
            raise ValueError(f"MultiHeadAttention {self.name!r}: all dimensions of value and "
                             f"key but the last must be equal, got value shape {value_shape} "
                             f"and key shape {key_shape}")
        if len(query_shape) < 3 or len(value_shape) != len(query_shape):
            raise ValueError(f"MultiHeadAttention {self.name!r}: query and value must have the "
                             f"same rank >= 3 (batch, steps..., features), got shapes "
                             f"{query_shape} and {value_shape}")
        heads = self.num_heads
        self._shapes = (query_shape[1:], value_shape[1:], key_shape[1:])
        self._query = self._dense("query", (query_shape[-1], heads, self.key_dim),
                                  (heads, self.key_dim))
        self._key = self._dense("key", (key_shape[-1], heads, self.key_dim),
                                (heads, self.key_dim))
        if self.use_gate:
            self._gate = self._dense("gate", (query_shape[-1], heads, self.value_dim),
                                     (heads, self.value_dim))
        self._value = self._dense("value", (value_shape[-1], heads, self.value_dim),
                                  (heads, self.value_dim))
        out = self._output_shape or (query_shape[-1],)
        self._out = self._dense("attention_output", (heads, self.value_dim) + tuple(out),
                                tuple(out))
        rank = len(query_shape) + 1  # projected: (batch, steps..., heads, channels)
        axes = tuple(range(1, rank - 2)) if self.attention_axes is None else \
            tuple(a if a >= 0 else rank - 1 + a for a in self.attention_axes)
        if any(not 0 < a < rank - 2 for a in axes):
            raise ValueError(f"MultiHeadAttention {self.name!r}: attention_axes "
                             f"{self.attention_axes} are out of range for inputs of shape "
                             f"{query_shape} (valid: the axes between the batch and the "
                             "features)")
        self._axes = axes
        self._dot, self._combine, scores_rank = _attention_equations(rank, axes)
        self._norm_axes = tuple(range(scores_rank - len(axes), scores_rank))
        self.built = True

    def __call__(self, query, value=None, key=None, query_mask=None, value_mask=None,
                 key_mask=None, attention_mask=None, return_attention_scores=False,
                 training=False, use_causal_mask=False, _packed=False):
        if _packed:  # a functional model's node: [query, value(, key)]
            query, value, key = (list(query) + [None])[:3]
        kwargs = dict(query_mask=query_mask, value_mask=value_mask, key_mask=key_mask,
                      attention_mask=attention_mask,
                      return_attention_scores=return_attention_scores, training=training,
                      use_causal_mask=use_causal_mask)
        if value is None:
            raise ValueError(f"MultiHeadAttention {self.name!r}: call it as layer(query, value) "
                             "or layer(query, value, key); value is missing")
        symbolic = _symbolic_input([query, value, key])
        if symbolic is not None:
            inputs = [query, value] + ([] if key is None else [key])
            return symbolic._symbolic_call(self, inputs, (), dict(kwargs, _packed=True))
        masks = [m if m is not None else get_keras_mask(t)
                 for m, t in ((query_mask, query), (value_mask, value), (key_mask, key))]
        if key is value:
            masks[2] = None
        q = self._convert(query)
        if not self.built:
            if self._dtype is None:
                self._dtype = q._data.dtype if q._data.dtype.kind == "f" else \
                    np.dtype(np.float32)
                q = self._convert(query)
            self.build(q.shape, self._convert(value).shape,
                       None if key is None else self._convert(key).shape)
        v = self._convert(value)
        k = v if key is None else self._convert(key)
        kwargs.update(query_mask=masks[0], value_mask=masks[1], key_mask=masks[2])
        out = self.call(q, v, k, **kwargs)
        return _attach_mask(self, out, _as_mask(masks[0], "query_mask", self))

    def compute_mask(self, inputs, mask=None):
        """The query's mask (Keras)."""
        return mask

    def _project(self, x, dense, bound):
        """Keras' EinsumDense projection, as one matmul: the last `bound` axes of `x` times the
        kernel's first `bound` axes (kernel reshaped to a matrix)."""
        kernel, bias = dense
        inner = int(np.prod(kernel.shape[:bound]))
        outer = kernel.shape[bound:]
        y = ops.matmul(ops.reshape(x, x.shape[:x.ndim - bound] + (inner,)),
                       ops.reshape(kernel, (inner, int(np.prod(outer)))))
        y = ops.reshape(y, x.shape[:x.ndim - bound] + outer)
        return y if bias is None else y + bias

    def call(self, query, value, key=None, query_mask=None, value_mask=None, key_mask=None,
             attention_mask=None, return_attention_scores=False, training=False,
             use_causal_mask=False):
        key = value if key is None else key
        for label, x, want in (("query", query, self._shapes[0]), ("value", value,
                               self._shapes[1]), ("key", key, self._shapes[2])):
            if x.ndim != len(want) + 1 or x.shape[-1] != want[-1]:
                raise ValueError(f"MultiHeadAttention {self.name!r}: built for {label} of "
                                 f"shape (batch,) + {want}, got shape {x.shape}")
        if value.shape[:-1] != key.shape[:-1]:
            raise ValueError(f"MultiHeadAttention {self.name!r}: value and key must match in "
                             f"every axis but the last, got shapes {value.shape} and "
                             f"{key.shape}")
        mask = self._attention_mask(query, value, query_mask, value_mask, key_mask,
                                    attention_mask, use_causal_mask)
        q = self._project(query, self._query, 1) * \
            ops.cast(1.0 / np.sqrt(float(self.key_dim)), query.dtype)
        k = self._project(key, self._key, 1)
        v = self._project(value, self._value, 1)
        # one attention axis just before the heads (the default for (batch, steps, features)):
        # batched matmuls, (batch..., heads, steps, channels); else Keras' einsum equations
        one_axis = self._axes == (q.ndim - 3,)
        if one_axis:
            scores = ops.matmul(_heads_first(q), _heads_first(k), transpose_b=True)
        else:
            scores = ops.einsum(self._dot, k, q)
        if mask is not None:  # (batch, query steps, value steps) -> the scores' rank
            axis = -len(self._axes) * 2 - 1
            for _ in range(scores.ndim - mask.ndim):
                mask = ops.expand_dims(mask, axis)
        weights = _masked_attention_weights(scores, mask, self._norm_axes)
        dropped = _attention_dropout(self, weights, training)
        heads = _heads_first(ops.matmul(dropped, _heads_first(v))) if one_axis else \
            ops.einsum(self._combine, dropped, v)
        if self.use_gate:
            heads = heads * ops.sigmoid(self._project(query, self._gate, 1))
        out = self._project(heads, self._out, 2)
        return (out, weights) if return_attention_scores else out

    def _attention_mask(self, query, value, query_mask, value_mask, key_mask, attention_mask,
                        use_causal_mask):
        """Keras' attention mask: query mask (B, T, 1) & value and key masks (B, 1, S) & the
        causal and sliding-window masks (1, T, S) & `attention_mask`."""
        mask = None
        qm = _as_mask(query_mask, "query_mask", self)
        if qm is not None:
            mask = ops.expand_dims(qm, -1)
        for label, m in (("value_mask", value_mask), ("key_mask", key_mask)):
            m = _as_mask(m, label, self)
            if m is not None:
                mask = _and(mask, ops.expand_dims(m, -2))
        tq, ts = query.shape[1], value.shape[1]
        if use_causal_mask:
            mask = _and(mask, _causal_mask(tq, ts))
        if self.sliding_window is not None:
            distance = ops.abs(ops.reshape(ops.range(tq), (1, tq, 1)) -
                               ops.reshape(ops.range(ts), (1, 1, ts)))
            mask = _and(mask, ops.less(distance, self.sliding_window))
        attention_mask = _as_mask(attention_mask, "attention_mask", self)
        if attention_mask is not None and len(self._axes) == 1:
            want = (query.shape[0],) + query.shape[1:-1] + (ts,)
            try:
                ok = np.broadcast_shapes(attention_mask.shape, want) == want
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"MultiHeadAttention {self.name!r}: attention_mask of shape "
                                 f"{attention_mask.shape} does not broadcast to (batch, query "
                                 f"steps, value steps) = {want}")
        return _and(attention_mask, mask)


# Keras' signature, build(query_shape, value_shape, key_shape=None), which Layer's one-shape
# build wrapper does not take
MultiHeadAttention.build = MultiHeadAttention._build_shapes


class _ListAttention(Layer):
    """Keras' Attention and AdditiveAttention: called on [query, value] or [query, value, key]
    with masks [query_mask, value_mask] (the inputs' masks by default)."""

    _MULTI_INPUT = True
    supports_masking = True

    def __init__(self, use_scale=False, score_mode="dot", dropout=0.0, seed=None, dtype=None,
                 name=None, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        if score_mode not in ("dot", "concat"):
            raise ValueError(f"{type(self).__name__}: score_mode must be 'dot' or 'concat', got "
                             f"{score_mode!r}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"{type(self).__name__}: dropout must be in [0, 1), got "
                             f"{dropout!r}")
        self.use_scale, self.score_mode = bool(use_scale), score_mode
        self.dropout, self.seed = float(dropout), seed
        self._generator = seeded_uniform(seed)

    def _validate(self, inputs, mask):
        name = type(self).__name__
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"{name} {self.name!r} must be called on a list of inputs, namely "
                             f"[query, value] or [query, value, key], got {type(inputs).__name__}")
        if not 2 <= len(inputs) <= 3:
            raise ValueError(f"{name} {self.name!r} accepts a list of 2 or 3 inputs, namely "
                             f"[query, value] or [query, value, key], got {len(inputs)}")
        if mask is not None and (not isinstance(mask, (list, tuple)) or
                                 not 2 <= len(mask) <= 3):
            raise ValueError(f"{name} {self.name!r}: mask must be a list [query_mask, "
                             f"value_mask] (or of 3, as the inputs), got {mask!r}")

    def _call_multi(self, inputs, args, kwargs):
        self._validate(inputs, kwargs.get("mask"))
        if "mask" not in kwargs:
            masks = [get_keras_mask(x) for x in inputs]
            if any(m is not None for m in masks):
                kwargs["mask"] = masks
        out = super()._call_multi(inputs, args, kwargs)
        return _attach_mask(self, out, self.compute_mask(inputs, kwargs.get("mask")))

    def compute_mask(self, inputs, mask=None):
        """The query's mask (Keras)."""
        return None if not mask else _as_mask(mask[0], "query mask", self)

    def call(self, inputs, mask=None, training=False, return_attention_scores=False,
             use_causal_mask=False):
        q, v = inputs[0], inputs[1]
        k = inputs[2] if len(inputs) > 2 else v
        if q.ndim < 3 or v.ndim != q.ndim or k.shape[:-1] != v.shape[:-1] or \
                (self.score_mode == "dot" and q.shape[-1] != k.shape[-1]):
            raise ValueError(f"{type(self).__name__} {self.name!r}: expects query (batch, Tq, "
                             f"dim), value (batch, Tv, dim_v) and key (batch, Tv, dim), got "
                             f"shapes {q.shape}, {v.shape} and {k.shape}")
        q_mask = _as_mask(mask[0], "query mask", self) if mask else None
        v_mask = _as_mask(mask[1], "value mask", self) if mask else None
        scores = self._scores(q, k)
        scores_mask = None if v_mask is None else ops.expand_dims(v_mask, -2)
        if use_causal_mask:
            scores_mask = _and(scores_mask, _causal_mask(scores.shape[-2], scores.shape[-1]))
        if scores_mask is not None:
            big = 65504.0 if scores._data.dtype == np.float16 else 1.0e9
            scores = ops.where(scores_mask, scores, scores - ops.cast(big, scores.dtype))
        weights = ops.softmax(scores, axis=-1)
        out = ops.matmul(_attention_dropout(self, weights, training), v)
        if q_mask is not None:
            out = ops.where(ops.expand_dims(q_mask, -1), out, ops.zeros((), dtype=out.dtype))
        return (out, weights) if return_attention_scores else out


class Attention(_ListAttention):
    """Keras 3's dot-product (Luong) attention of `[query, value]` or `[query, value, key]`
    (`(batch, Tq, dim)`, `(batch, Tv, dim_v)`, `(batch, Tv, dim)`; `key` defaults to `value`):
    `softmax(query @ key^T * scale) @ value`, or with `score_mode="concat"`
    `concat_score_weight * sum(tanh(scale * (query + key)))` as the scores.

    `use_scale` adds the trainable scalar `scale` (ones); `score_mode="concat"` the scalar
    `concat_score_weight`. Masks: `mask=[query_mask, value_mask]` (by default the inputs'
    masks) as Keras': masked value steps get no weight (their scores less 1e9), masked
    query steps output zeros and the output carries the query's mask; `use_causal_mask=True`
    lets step i attend to steps <= i. `dropout` drops attention weights in training.

    >>> att = tg.keras.layers.Attention()
    >>> out, scores = att([tg.ones((2, 3, 4)), tg.ones((2, 5, 4))],
    ...                   return_attention_scores=True)
    >>> out.shape, scores.shape
    ((2, 3, 4), (2, 3, 5))
    """

    def build(self, input_shape):
        self.scale = self.add_weight("scale", (), "ones") if self.use_scale else None
        self.concat_score_weight = self.add_weight("concat_score_weight", (), "ones") \
            if self.score_mode == "concat" else None

    def _scores(self, q, k):
        if self.score_mode == "dot":
            scores = ops.matmul(q, k, transpose_b=True)
            return scores if self.scale is None else scores * self.scale
        s = ops.expand_dims(q, -2) + ops.expand_dims(k, -3)
        if self.scale is not None:
            s = self.scale * s
        return self.concat_score_weight * ops.reduce_sum(ops.tanh(s), axis=-1)


class AdditiveAttention(_ListAttention):
    """Keras 3's additive (Bahdanau) attention of `[query, value]` or `[query, value, key]`:
    the scores are `sum(scale * tanh(query + key), axis=-1)` per (query step, key step), with
    the trainable `scale` of shape `(dim,)` (glorot_uniform) when `use_scale` (the default);
    masks, causal mask and dropout as `Attention`.

    >>> att = tg.keras.layers.AdditiveAttention()
    >>> att([tg.ones((2, 3, 4)), tg.ones((2, 5, 4))]).shape
    (2, 3, 4)
    >>> att.scale.shape
    (4,)
    """

    def __init__(self, use_scale=True, dropout=0.0, seed=None, dtype=None, name=None,
                 **kwargs):
        super().__init__(use_scale=use_scale, dropout=dropout, seed=seed, dtype=dtype,
                         name=name, **kwargs)

    def build(self, input_shape):
        self.scale = self.add_weight("scale", (input_shape[0][-1],), "glorot_uniform") \
            if self.use_scale else None

    def _scores(self, q, k):
        if q.shape[-1] != k.shape[-1]:
            raise ValueError(f"AdditiveAttention {self.name!r}: query and key must have the same "
                             f"last dimension, got shapes {q.shape} and {k.shape}")
        t = ops.tanh(ops.expand_dims(q, -2) + ops.expand_dims(k, -3))
        return ops.reduce_sum(t if self.scale is None else self.scale * t, axis=-1)


# -- merge layers' masks (Add here, Multiply, Subtract, ... in tapegpu/keras/more_layers.py) -------

def _merge_call(layer, inputs, args, kwargs):
    """`_call_multi` of Keras' merge layers: `mask=` (a list, one per input) or else the inputs'
    masks give the output's mask, `layer.compute_mask`."""
    mask = kwargs.pop("mask", None)
    if mask is None and isinstance(inputs, (list, tuple)):
        masks = [get_keras_mask(x) for x in inputs]
        mask = masks if any(m is not None for m in masks) else None
    out = Layer._call_multi(layer, inputs, args, kwargs)
    return _attach_mask(layer, out, layer.compute_mask(inputs, mask))


def _or_masks(layer, inputs, mask):
    """The OR of the inputs' masks, None if any input has none (Keras' merge layers)."""
    if mask is None:
        return None
    if not isinstance(mask, (list, tuple)) or len(mask) != len(inputs):
        raise ValueError(f"{type(layer).__name__} {layer.name!r}: mask must be a list with one "
                         f"entry per input ({len(inputs)}), got {mask!r}")
    if any(m is None for m in mask):
        return None
    out = convert_to_tensor(mask[0])
    for m in mask[1:]:
        out = ops.logical_or(out, convert_to_tensor(m))
    return out
