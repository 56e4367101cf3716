"""`keras.models.clone_model` and `keras.Variable`.

>>> model = tg.keras.Sequential([tg.keras.Input((3,)), tg.keras.layers.Dense(2, name="d")])
>>> clone = tg.keras.models.clone_model(model)
>>> clone.layers[0].name, clone.layers[0].kernel is model.layers[0].kernel
('d', False)
"""
import numpy as np

from ..core import nest
from ..core.floatx import floatx
from ..core.tensor import Variable as _TgVariable
from ..models import initializers as _initializers


def _default_clone(layer):
    """A new layer of the same class and config (new, unbuilt variables), as Keras."""
    try:
        config = layer.get_config()
    except NotImplementedError as e:
        raise ValueError(f"clone_model: layer {layer.name!r} ({type(layer).__name__}) cannot be "
                         f"rebuilt from its config ({e}); pass clone_function= (a function "
                         f"of a layer returning its copy)") from None
    return type(layer).from_config(config)


def clone_model(model, input_tensors=None, clone_function=None, call_function=None,
                recursive=False, **kwargs):
    """A model of the same architecture as `model` with new layers (new, freshly initialised
    weights: `clone.set_weights(model.get_weights())` copies them), as Keras'
    `clone_model`: a Sequential model is rebuilt layer by layer, a functional one by calling
    the cloned layers on new inputs (or `input_tensors`), a subclassed one from its
    `get_config`. `clone_function(layer)` makes each layer's copy (default: the class's
    `from_config(layer.get_config())`).

    >>> x = tg.keras.Input((4,)); y = tg.keras.layers.Dense(2)(tg.keras.layers.Dense(3)(x))
    >>> m = tg.keras.Model(x, y); c = tg.keras.models.clone_model(m)
    >>> c.outputs[0].shape, len(c.trainable_variables)
    ((None, 2), 4)
    """
    from .layers.core import Input, InputLayer, KerasTensor
    from .model import Functional, Sequential
    if kwargs:
        raise TypeError(f"clone_model: unrecognized keyword arguments: {sorted(kwargs)}")
    clone = clone_function or _default_clone
    if isinstance(model, Sequential):
        stack = [clone(layer) if not isinstance(layer, InputLayer) else None
                 for layer in model._stack]
        layers = [layer for layer in stack if layer is not None]
        if input_tensors is not None:
            x = nest.flatten(input_tensors)[0]
            new = Sequential(layers, name=model.name)
            out = new(x)
            return Functional(x, out, name=model.name)
        spec = model._input_spec
        if spec is not None:
            layers = [Input(batch_shape=tuple(spec.shape), dtype=spec.dtype.name)] + layers
        return Sequential(layers, name=model.name, trainable=model.trainable)
    if isinstance(model, Functional):
        old_inputs = model.inputs
        if input_tensors is None:
            new_inputs = [Input(batch_shape=tuple(t.shape), dtype=t.dtype.name, name=t.name)
                          for t in old_inputs]
        else:
            new_inputs = nest.flatten(input_tensors)
            if len(new_inputs) != len(old_inputs):
                raise ValueError(f"clone_model: the model has {len(old_inputs)} inputs, "
                                 f"input_tensors has {len(new_inputs)}")
        values = {id(o): n for o, n in zip(old_inputs, new_inputs)}
        copies = {}
        for node in model._nodes:
            layer = node.layer
            if id(layer) not in copies:
                copies[id(layer)] = clone(layer)
            args = nest.map_structure(
                lambda t: values[id(t)] if isinstance(t, KerasTensor) else t, node.inputs)
            out = copies[id(layer)](args, *node.args, **dict(node.kwargs))
            for sym, val in zip(node.outputs, nest.flatten(out)):
                values[id(sym)] = val
        inputs = nest.pack_sequence_as(model._inputs, new_inputs) \
            if isinstance(model._inputs, (list, tuple, dict)) else new_inputs[0]
        outputs = nest.map_structure(lambda t: values[id(t)], model._outputs)
        return Functional(inputs, outputs, name=model.name, trainable=model.trainable)
    try:
        config = model.get_config()
        return type(model).from_config(config)
    except (NotImplementedError, TypeError, AttributeError) as e:
        raise ValueError(f"clone_model: {type(model).__name__} is a subclassed model; it is "
                         f"cloned from get_config()/from_config(), which failed: {e}. Define "
                         f"get_config (and from_config) to clone it") from None


class Variable(_TgVariable):
    """`keras.Variable(initializer, shape=None, dtype=None, trainable=True, name=None)`: a
    variable whose value is `initializer` (an array, or an initializer object or name called
    with `shape` and `dtype`); dtype defaults to floatx for initializers and Python floats.
    It is a `tg.Variable`.

    >>> v = tg.keras.Variable("ones", shape=(2,), name="v")
    >>> v.numpy(), isinstance(v, tg.Variable)
    (array([1., 1.], dtype=float32), True)
    """

    def __init__(self, initializer, shape=None, dtype=None, trainable=True, autocast=True,
                 aggregation="none", synchronization="auto", name=None, **kwargs):
        dt = getattr(dtype, "name", dtype)
        if isinstance(initializer, str) or isinstance(initializer, _initializers.Initializer) \
                or (isinstance(initializer, type) and
                    issubclass(initializer, _initializers.Initializer)):
            if shape is None:
                raise ValueError(f"keras.Variable: when `initializer` is an initializer "
                                 f"({initializer!r}), `shape` must be given")
            value = _initializers.get(initializer)(tuple(shape), dt or floatx())
        elif callable(initializer) and shape is not None:
            value = initializer(tuple(shape), dt or floatx())
        else:
            value = initializer
            if dt is None and isinstance(value, (float, list, tuple)) and \
                    np.asarray(value).dtype.kind == "f":
                dt = floatx()
            if shape is not None and tuple(np.shape(value)) != tuple(shape):
                raise ValueError(f"keras.Variable: initial value of shape {np.shape(value)} "
                                 f"does not match shape={tuple(shape)}")
        super().__init__(value, trainable=trainable, name=name, dtype=dt)

    @property
    def path(self):
        return self.name
