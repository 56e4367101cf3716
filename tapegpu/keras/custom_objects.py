"""Keras 3's registry of custom objects (`keras.saving.register_keras_serializable`,
`get_registered_name`, `get_registered_object`, `get_custom_objects`, `custom_object_scope`)
and the activations' `serialize` / `deserialize`, which name functions through it."""
import inspect
import threading

__all__ = ["register_keras_serializable", "get_registered_name", "get_registered_object",
           "get_custom_objects", "CustomObjectScope", "custom_object_scope", "serialize",
           "deserialize"]

_OBJECTS = {}  # "package>name" -> object
_NAMES = {}  # object -> "package>name"
_scope = threading.local()  # the innermost custom_object_scope's dict


def get_custom_objects():
    """The global dict of registered custom objects ({"package>name": object}; editable), as
    `keras.saving.get_custom_objects`.

    >>> isinstance(tg.keras.saving.get_custom_objects(), dict)
    True
    """
    return _OBJECTS


def register_keras_serializable(package="Custom", name=None):
    """Decorator registering a class (which must have `get_config`) or a function under
    `"package>name"` (name: its `__name__`), as `keras.saving.register_keras_serializable`.

    >>> @tg.keras.saving.register_keras_serializable(package="demo")
    ... def double(x):
    ...     return x * 2
    >>> tg.keras.saving.get_registered_name(double)
    'demo>double'
    """
    def decorator(arg):
        registered = f"{package}>{name if name is not None else arg.__name__}"
        if inspect.isclass(arg) and not hasattr(arg, "get_config"):
            raise ValueError("Cannot register a class that does not have a get_config() method.")
        _OBJECTS[registered] = arg
        _NAMES[arg] = registered
        return arg
    return decorator


def get_registered_name(obj):
    """The name `obj` was registered under, else its `__name__`, as
    `keras.saving.get_registered_name`.

    >>> tg.keras.saving.get_registered_name(len)
    'len'
    """
    try:
        return _NAMES[obj]
    except (KeyError, TypeError):
        return obj.__name__


def get_registered_object(name, custom_objects=None, module_objects=None):
    """The object registered as `name`: from the innermost `custom_object_scope`, the global
    registry, then `custom_objects` and `module_objects`; None if none has it, as
    `keras.saving.get_registered_object`.

    >>> tg.keras.saving.get_registered_object("no>such") is None
    True
    """
    scoped = getattr(_scope, "objects", {})
    for table in (scoped, _OBJECTS, custom_objects or {}, module_objects or {}):
        if name in table:
            return table[name]
    return None


class CustomObjectScope:
    """Within the block, `custom_objects` ({name: object}) are found by name (by
    `get_registered_object` and deserialization), as `keras.saving.custom_object_scope`.

    >>> with tg.keras.saving.custom_object_scope({"mine": abs}):
    ...     tg.keras.saving.get_registered_object("mine") is abs
    True
    """

    def __init__(self, custom_objects):
        self.custom_objects = dict(custom_objects or {})
        self._saved = None

    def __enter__(self):
        self._saved = getattr(_scope, "objects", {})
        _scope.objects = {**self._saved, **self.custom_objects}
        return self

    def __exit__(self, *exc):
        _scope.objects = self._saved


custom_object_scope = CustomObjectScope


def _builtin_activations():
    import tapegpu
    acts = tapegpu.keras.activations
    return {n: getattr(acts, n) for n in dir(acts)
            if not n.startswith("_") and n not in ("get", "serialize", "deserialize")
            and callable(getattr(acts, n, None))}


def serialize(activation):
    """An activation's config, as `keras.activations.serialize`: the name of a Keras
    activation ('relu'), or for a registered custom function a dict naming it.

    >>> tg.keras.activations.serialize(tg.keras.activations.relu)
    'relu'
    """
    for name, fn in _builtin_activations().items():
        if fn is activation:
            return name
    if activation in _NAMES or (inspect.isfunction(activation) and
                                get_registered_object(activation.__name__) is activation):
        registered = get_registered_name(activation)
        return {"module": getattr(activation, "__module__", None), "class_name": "function",
                "config": registered, "registered_name": registered}
    raise ValueError(f"Unknown activation function '{activation}' cannot be serialized due to "
                     f"invalid function name. Make sure to use an activation name that matches "
                     f"the references defined in activations.py or use "
                     f"`@keras.saving.register_keras_serializable()` to register any custom "
                     f"activations.")


def deserialize(config, custom_objects=None):
    """The activation function `config` names (a name, or a dict from `serialize`), looked up
    in `custom_objects`, the registry and Keras' activations, as
    `keras.activations.deserialize`.

    >>> tg.keras.activations.deserialize("tanh") is tg.keras.activations.tanh
    True
    """
    name = config.get("config") if isinstance(config, dict) else config
    if not isinstance(name, str):
        raise ValueError(f"Could not interpret activation function identifier: {config!r}")
    found = get_registered_object(name, custom_objects, _builtin_activations())
    if found is None:
        raise ValueError(f"Unknown activation function: '{name}'. Please ensure you are using a "
                         f"`keras.utils.custom_object_scope` and that this object is included "
                         f"in the scope.")
    return found
