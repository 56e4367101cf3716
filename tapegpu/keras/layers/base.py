"""The base `Layer` and what every layer call shares: naming, building on the first call,
dtype rules, `get_config`, weights, losses, and the passing of Keras masks.

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

from ... import ops
from ...core import floatx as _floatx_setting
from ...core.dtypes import np_dtype
from ...core.tensor import Tensor, Variable, convert_to_tensor
from ...models import initializers, regularizers
from ...models.module import Module
from ...models.tensor_attributes import get_keras_mask, set_keras_mask
from .. import mixed_precision as _mixed_precision


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

    def __init__(self, dtype=None, name=None, input_shape=None, trainable=True,
                 input_dim=None):
        super().__init__(name=name if name is not None else _unique_name(type(self)))
        # the dtype, or a policy (tg.keras.mixed_precision): its variables' dtype in _dtype
        compute, variable, policy = _mixed_precision.layer_dtypes(dtype)
        self._dtype = compute if variable is None else variable
        self._dtype_policy = policy
        if _mixed_precision.needs_install(compute, variable):
            _mixed_precision.install(self, compute, variable)
        self.built = False
        if input_dim is not None and input_shape is None:  # Keras 2: Dense(4, input_dim=3)
            input_shape = (input_dim,)
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

    @property
    def dtype_policy(self):
        """The layer's dtype policy (`tg.keras.mixed_precision.DTypePolicy`).

        Its own or the global one when it was made under one; else its dtype's (floatx's
        until built, when it follows its input)."""
        if self._dtype_policy is not None:
            return self._dtype_policy
        from ..mixed_precision import DTypePolicy
        return DTypePolicy(None if self._dtype is None else self._dtype.name)

    @property
    def compute_dtype(self):
        """The dtype of the layer's computations, as a string (Keras 3)."""
        return self.dtype_policy.compute_dtype

    @property
    def variable_dtype(self):
        """The dtype of the layer's variables, as a string (Keras 3)."""
        return self.dtype_policy.variable_dtype

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

        >>> layer = tg.layers.Dense(3, activation="gelu", name="d")
        >>> layer.get_config()
        {'units': 3, 'activation': 'gelu', 'name': 'd', 'trainable': True}
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

    def count_params(self):
        """The number of scalars in the layer's variables (Keras' `count_params`); a layer
        not built yet raises ValueError, as in Keras.

        >>> layer = tg.keras.layers.Dense(2); _ = layer(np.ones((1, 3))); layer.count_params()
        8
        """
        if not self.built:
            raise ValueError(f"You tried to call `count_params` on layer {self.name!r}, but "
                             f"the layer isn't built. You can build it manually via: "
                             f"`{self.name}.build(batch_input_shape)`.")
        return int(sum(int(np.prod(v.shape)) for v in self.variables))

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
        dt = np_dtype(dtype) or self._dtype or np.dtype(_floatx())
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
                self._dtype = _default_dtype(x._data.dtype)
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
                self._dtype = _default_dtype(xs[0]._data.dtype)
                xs = [self._convert(x) for x in inputs]
            self.build([x.shape for x in xs])
            self.built = True
        return self.call(xs, *args, **kwargs)

    def _convert(self, inputs):
        """The call's input as a tensor of the layer's dtype. Keras' autocasting: floating
        inputs (numpy arrays, tensors) are cast to the layer's floating dtype (a float64 array
        into a float32 layer gives float32), and so are integer and bool ones. A layer without
        a dtype takes its first input's floating dtype (see `_default_dtype`)."""
        x = inputs._read() if isinstance(inputs, Variable) else inputs
        if not isinstance(x, Tensor):
            target = self._dtype
            if isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind == "f" and \
                    target is not None and target.kind == "f":
                # cast on the host: no device cast, no gradient to keep
                return convert_to_tensor(np.asarray(x, dtype=target))
            x = convert_to_tensor(x, dtype_hint=target) if target is not None \
                else convert_to_tensor(x)
        if self._dtype is None:
            return x
        kind = x._data.dtype.kind
        if kind in "iub":  # integer inputs are cast to the layer's dtype, as Keras does
            return ops.cast(x, self._dtype)
        if x._data.dtype != self._dtype:
            if kind in "fV" and self._dtype.kind in "fV":  # Keras' autocast (V: bfloat16)
                return ops.cast(x, self._dtype)
            raise TypeError(f"{type(self).__name__} {self.name!r}: input of dtype "
                            f"{x._data.dtype.name} and shape {x.shape}, but the layer's "
                            f"variables are {self._dtype.name}; cast the input with tg.cast "
                            f"(layers cast floating and integer inputs only)")
        return x


def _floatx():
    """Keras' floatx (tg.keras.backend.floatx())."""
    return _floatx_setting.floatx()


def _default_dtype(first):
    """The dtype of a layer made without one, from its first input's dtype `first`: Keras'
    floatx once `set_floatx` has changed it (as Keras), else the input's floating dtype
    (float32 for integer inputs)."""
    fx = _floatx()
    return first if first.kind == "f" and fx == "float32" else np.dtype(fx)


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
