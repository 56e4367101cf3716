"""User-defined composite types and dispatch to them, as TensorFlow's
`tf.experimental.ExtensionType` and `tf.experimental.dispatch_for_*`.

An `ExtensionType` subclass declares its fields with type annotations; each instance is an
immutable record whose fields are converted and checked against their annotations (a
`tg.Tensor` field converts its value with `tg.convert_to_tensor`, a `Tuple[int, ...]` field
takes a list or tuple of ints, ...). The class gets `__init__` (fields positionally or by
name, defaults from class attributes), `__repr__`, `__eq__`/`__ne__` (a bool tensor: same type
spec and equal tensors), a nested `Spec` class (`tg.type_spec_from_value(value)`) and calls
the user's `__validate__` after construction.

Dispatch: `dispatch_for_api(tg.math.add, {"x": MyType})` makes `tg.math.add` (as reached
through tapegpu's public namespaces) call the decorated function when an argument has the
registered type. Registering replaces the API's entry in the public namespaces with a wrapper
that checks the registered signatures first, so that calls of APIs nobody dispatches cost
nothing; `unregister_dispatch_for` puts the original back when no dispatcher is left.
"""
import collections.abc
import functools
import inspect
import sys
import types
import typing

import numpy as np

from .core import dtypes
from .core.shape import TensorShape
from .core.tensor import Tensor, Variable, convert_to_tensor
from .ops import binary as _binary, unary as _unary
from .ops.reduce import reduce_all
from .ops.shape import stack
from .function.api import TensorSpec

__all__ = ["ExtensionType", "BatchableExtensionType", "ExtensionTypeSpec",
           "type_spec_from_value", "dispatch_for_api", "dispatch_for_unary_elementwise_apis",
           "dispatch_for_binary_elementwise_apis", "unregister_dispatch_for"]

_MISSING = object()
_UNIONS = (typing.Union, types.UnionType)  # Optional[int] and int | None


# -- field conversion -----------------------------------------------------------------------------

def _type_name(t):
    return getattr(t, "__name__", None) or repr(t)


def _convert(value, annotation, where):
    """`value` converted to the field type `annotation`; TypeError naming `where` if it is not
    one."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is typing.Any:
        return value
    if origin in _UNIONS:
        for t in args:
            try:
                return _convert(value, t, where)
            except (TypeError, ValueError):
                continue
        raise TypeError(f"{where}: expected {annotation}, got {value!r}")
    if origin in (tuple, collections.abc.Sequence):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where}: expected a tuple ({annotation}), got {value!r}")
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if origin is tuple and args:
            if len(value) != len(args):
                raise TypeError(f"{where}: expected a tuple of {len(args)} values "
                                f"({annotation}), got {value!r}")
            return tuple(_convert(v, t, f"{where}[{i}]")
                         for i, (v, t) in enumerate(zip(value, args)))
        return tuple(value)
    if origin in (collections.abc.Mapping, dict):
        if not isinstance(value, collections.abc.Mapping):
            raise TypeError(f"{where}: expected a mapping ({annotation}), got {value!r}")
        kt, vt = args if args else (typing.Any, typing.Any)
        return types.MappingProxyType({_convert(k, kt, f"{where} key"):
                                       _convert(v, vt, f"{where}[{k!r}]")
                                       for k, v in value.items()})
    if annotation is None or annotation is type(None):
        if value is not None:
            raise TypeError(f"{where}: expected None, got {value!r}")
        return None
    if annotation is Tensor:
        if isinstance(value, Variable):
            return value._read()
        if isinstance(value, Tensor):
            return value
        try:
            return convert_to_tensor(value)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{where}: expected a tg.Tensor (or a value convertible to one), "
                            f"got {value!r} ({e})") from None
    if annotation is TensorShape:
        return value if isinstance(value, TensorShape) else TensorShape(value)
    if annotation is dtypes.DType:
        return dtypes.as_dtype(value)
    if annotation is float:
        if isinstance(value, (int, float, np.integer, np.floating)) and \
                not isinstance(value, bool):
            return float(value)
        raise TypeError(f"{where}: expected float, got {value!r}")
    if annotation is int:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)
        raise TypeError(f"{where}: expected int, got {value!r}")
    if isinstance(annotation, type):
        if isinstance(value, annotation):
            return value
        raise TypeError(f"{where}: expected {_type_name(annotation)}, got {value!r}")
    raise TypeError(f"{where}: unsupported field type annotation {annotation!r}")


_SUPPORTED_ORIGINS = (typing.Union, types.UnionType, tuple, collections.abc.Sequence,
                      collections.abc.Mapping,
                      dict)


def _check_annotation(annotation, where):
    """TypeError at class creation for an annotation no field can have (as TF)."""
    origin = typing.get_origin(annotation)
    if origin is not None:
        if origin not in _SUPPORTED_ORIGINS:
            raise TypeError(f"{where}: unsupported type annotation {annotation!r}; supported "
                            f"are Python scalars, tg.Tensor, tg.TensorShape, tg.DType, "
                            f"ExtensionTypes, classes, Union/Optional, Tuple and Mapping")
        for a in typing.get_args(annotation):
            if a is not Ellipsis:
                _check_annotation(a, where)
    elif not (annotation is None or annotation is typing.Any or isinstance(annotation, type)):
        raise TypeError(f"{where}: unsupported type annotation {annotation!r}")


# -- type specs -----------------------------------------------------------------------------------

def _spec_of(value):
    if isinstance(value, Tensor):
        return TensorSpec(tuple(value.shape), value.dtype)
    if isinstance(value, ExtensionType):
        return value._type_spec
    if isinstance(value, tuple):
        return tuple(_spec_of(v) for v in value)
    if isinstance(value, types.MappingProxyType):
        return tuple(sorted((k, _spec_of(v)) for k, v in value.items()))
    return value


class ExtensionTypeSpec:
    """The type spec of an ExtensionType value: its fields with tensors replaced by
    `tg.TensorSpec`s (`MyType.Spec`, `tg.type_spec_from_value(value)`)."""

    value_type = None  # the ExtensionType class (set on each generated Spec)

    def __init__(self, **fields):
        object.__setattr__(self, "_fields", dict(fields))

    def __getattr__(self, name):
        fields = self.__dict__.get("_fields", {})
        if name in fields:
            return fields[name]
        raise AttributeError(f"{type(self).__qualname__} has no attribute {name!r}")

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__qualname__} is immutable")

    def _key(self):
        return tuple((k, _hashable(v)) for k, v in self._fields.items())

    def __eq__(self, other):
        return type(self) is type(other) and self._key() == other._key()

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((type(self), self._key()))

    def __repr__(self):
        inner = ", ".join(f"{k}={v!r}" for k, v in self._fields.items())
        return f"{type(self).__qualname__}({inner})"


def _hashable(v):
    if isinstance(v, TensorSpec):
        return ("TensorSpec", v.shape, v.dtype.name)
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    return v


def type_spec_from_value(value):
    """The type spec of `value`, as `tf.type_spec_from_value`: a `tg.TensorSpec` for a tensor
    (or a value convertible to one), `MyType.Spec` for an ExtensionType value.

    >>> tg.type_spec_from_value(tg.constant([1.0, 2.0]))
    TensorSpec(shape=(2,), dtype=tg.float32, name=None)
    """
    if isinstance(value, ExtensionType):
        return value._type_spec
    if isinstance(value, Variable):
        value = value._read()
    if isinstance(value, Tensor):
        return _spec_of(value)
    try:
        return _spec_of(convert_to_tensor(value))
    except (TypeError, ValueError):
        raise TypeError(f"Could not build a TypeSpec for {value!r} of unsupported type "
                        f"{type(value)}.") from None


# -- the class ------------------------------------------------------------------------------------

def _fields_of(cls):
    """{name: annotation} over the class and its ExtensionType bases, base fields first."""
    fields = {}
    for klass in reversed(cls.__mro__):
        if klass is ExtensionType or klass.__dict__.get("_tg_abstract") or \
                not issubclass(klass, ExtensionType):
            continue
        hints = typing.get_type_hints(klass, vars(sys.modules.get(klass.__module__,
                                                                  types.ModuleType("m"))))
        for name in klass.__dict__.get("__annotations__", {}):
            annotation = hints[name]
            if typing.get_origin(annotation) is typing.ClassVar:
                continue
            fields[name] = annotation
    return fields


class ExtensionType:
    """A user-defined composite type with typed, immutable fields, as
    `tf.experimental.ExtensionType`.

    >>> class MaskedTensor(tg.experimental.ExtensionType):
    ...     values: tg.Tensor
    ...     mask: tg.Tensor
    ...     def __validate__(self):
    ...         assert self.values.shape == self.mask.shape, "shapes differ"
    >>> mt = MaskedTensor(values=[1, 2, 3], mask=[True, False, True])
    >>> mt.values.numpy().tolist(), mt.mask.dtype
    ([1, 2, 3], tg.bool)
    >>> bool(mt == MaskedTensor([1, 2, 3], [True, False, True]))
    True
    """

    __slots__ = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        fields = _fields_of(cls)
        defaults = {}
        for name, annotation in fields.items():
            _check_annotation(annotation, f"{cls.__name__}.{name}")
            for klass in cls.__mro__:
                if name in klass.__dict__ and not isinstance(klass.__dict__[name],
                                                             (property, types.FunctionType)):
                    defaults[name] = klass.__dict__[name]
                    break
        cls._tg_fields = fields
        cls._tg_defaults = defaults
        if cls.__dict__.get("_tg_abstract"):
            return
        user_init = cls.__dict__.get("__init__")
        if user_init is not None:
            cls.__init__ = _wrap_user_init(cls, user_init)
        else:
            cls.__init__ = _generated_init(cls)
        spec = cls.__dict__.get("Spec")
        bases = (spec, ExtensionTypeSpec) if isinstance(spec, type) and \
            not issubclass(spec, ExtensionTypeSpec) else (spec,) if spec else \
            (ExtensionTypeSpec,)
        cls.Spec = type("Spec", bases, {"value_type": cls, "__qualname__": f"{cls.__name__}.Spec",
                                        "__module__": cls.__module__})

    # the generated __init__ is set per class; this one only rejects ExtensionType() itself
    def __init__(self, *args, **kwargs):
        raise TypeError("ExtensionType is abstract: subclass it and annotate the fields")

    def _tg_finish(self):
        cls = type(self)
        d = object.__getattribute__(self, "__dict__")
        for name, annotation in cls._tg_fields.items():
            if name not in d:
                if name in cls._tg_defaults:
                    d[name] = cls._tg_defaults[name]
                else:
                    raise ValueError(f"{cls.__name__}.__init__: field {name!r} was not set "
                                     f"by the constructor")
            d[name] = _convert(d[name], annotation, f"{cls.__name__}.{name}")
        d["_tg_frozen"] = True
        validate = getattr(self, "__validate__", None)
        if validate is not None:
            validate()

    def __setattr__(self, name, value):
        if self.__dict__.get("_tg_frozen"):
            raise AttributeError(f"Cannot mutate attribute `{name}` outside the custom "
                                 f"constructor of ExtensionType.")
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if self.__dict__.get("_tg_frozen"):
            raise AttributeError(f"Cannot mutate attribute `{name}` outside the custom "
                                 f"constructor of ExtensionType.")
        object.__delattr__(self, name)

    @property
    def _type_spec(self):
        return type(self).Spec(**{k: _spec_of(getattr(self, k)) for k in type(self)._tg_fields})

    def __repr__(self):
        inner = ", ".join(f"{k}={getattr(self, k)!r}" for k in type(self)._tg_fields)
        return f"{type(self).__name__}({inner})"

    def _tg_parts(self):
        """The field values in field order (mappings as dicts), for tg.function's structure
        functions (`tapegpu/core/nest.py`, `composites`)."""
        return [dict(v) if isinstance(v, types.MappingProxyType) else v
                for v in (getattr(self, k) for k in type(self)._tg_fields)]

    def _tg_rebuild(self, parts):
        """A value of this type with the fields `parts` (already converted and validated
        ones: no conversion, no `__validate__`)."""
        out = object.__new__(type(self))
        d = out.__dict__
        for k, v in zip(type(self)._tg_fields, parts):
            d[k] = types.MappingProxyType(v) if isinstance(v, dict) else v
        d["_tg_frozen"] = True
        return out

    def _tg_tensors(self):
        """The tensors of the fields (nested ones included), in field order."""
        out = []
        for k in type(self)._tg_fields:
            _collect(getattr(self, k), out)
        return out

    def __eq__(self, other):
        if type(self) is not type(other) or self._type_spec != other._type_spec:
            return False
        mine, theirs = self._tg_tensors(), other._tg_tensors()
        if not mine:
            return _binary.equal(True, True)
        conds = [reduce_all(_binary.equal(a, b)) for a, b in zip(mine, theirs)]
        return reduce_all(stack(conds))

    def __ne__(self, other):
        eq = self.__eq__(other)
        return (not eq) if isinstance(eq, bool) else _binary.logical_not(eq)

    __hash__ = None  # fields may be tensors (as TF's)


def _collect(value, out):
    if isinstance(value, Tensor):
        out.append(value)
    elif isinstance(value, ExtensionType):
        out.extend(value._tg_tensors())
    elif isinstance(value, tuple):
        for v in value:
            _collect(v, out)
    elif isinstance(value, types.MappingProxyType):
        for k in sorted(value):
            _collect(value[k], out)


def _generated_init(cls):
    names = list(cls._tg_fields)
    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                default=cls._tg_defaults.get(n, inspect.Parameter.empty))
              for n in names]
    try:
        signature = inspect.Signature([inspect.Parameter("self",
                                                         inspect.Parameter.POSITIONAL_ONLY)]
                                      + params)
    except ValueError:  # a default before a field without one: keyword-only after it
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]
        signature = inspect.Signature([inspect.Parameter("self",
                                                         inspect.Parameter.POSITIONAL_ONLY)]
                                      + params)

    def __init__(self, *args, **kwargs):
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{cls.__name__}.__init__: {e}") from None
        d = object.__getattribute__(self, "__dict__")
        for name, value in bound.arguments.items():
            if name != "self":
                d[name] = value
        self._tg_finish()

    __init__.__signature__ = signature
    __init__.__qualname__ = f"{cls.__name__}.__init__"
    return __init__


def _wrap_user_init(cls, user_init):
    @functools.wraps(user_init)
    def __init__(self, *args, **kwargs):
        user_init(self, *args, **kwargs)
        if type(self) is cls:  # the most derived class finishes the construction
            self._tg_finish()
    return __init__


class BatchableExtensionType(ExtensionType):  # noqa: D101 (documented below)
    """An ExtensionType whose values TensorFlow can batch (`tf.data`, `tf.map_fn`). In tapegpu
    it is an `ExtensionType`: fields, construction, validation, equality and dispatch work as
    for any; batching such values through `tg.data` or `tg.vectorized_map` is not supported
    (those stack tensors, not ExtensionType values).

    >>> class Pair(tg.experimental.BatchableExtensionType):
    ...     a: tg.Tensor
    ...     b: tg.Tensor
    >>> Pair(1.0, 2.0).b.numpy().item()
    2.0
    """

    __slots__ = ()
    _tg_abstract = True


# -- dispatch -------------------------------------------------------------------------------------

_api_dispatchers = {}  # original API function -> [_Dispatcher]
_wrappers = {}  # original API function -> its dispatching wrapper
_targets = {}  # dispatch target -> [(original API, _Dispatcher)]


def _matches(value, annotation):
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is typing.Any:
        return True
    if origin in _UNIONS:
        return any(_matches(value, a) for a in args)
    if origin in (list, collections.abc.Sequence, collections.abc.Iterable, tuple):
        if not isinstance(value, (list, tuple)) or not value:
            return False
        inner = args[0] if args else typing.Any
        return all(_matches(v, inner) for v in value)
    if annotation is None or annotation is type(None):
        return value is None
    return isinstance(annotation, type) and isinstance(value, annotation)


def _mentions_dispatchable(annotation):
    return any(isinstance(t, type) and t is not Tensor and t is not type(None)
               for t in _leaf_types(annotation))


def _leaf_types(annotation):
    args = typing.get_args(annotation)
    if not args:
        return [annotation]
    return [t for a in args for t in _leaf_types(a)]


class _Dispatcher:
    def __init__(self, api, target, signatures):
        self.api, self.target, self.signatures = api, target, signatures
        self.api_signature = inspect.signature(api)

    def __call__(self, args, kwargs):
        try:
            bound = self.api_signature.bind(*args, **kwargs)
        except TypeError:
            return NotImplemented
        for sig in self.signatures:
            if all(_matches(bound.arguments.get(name, _MISSING), t) for name, t in sig.items()):
                return self.target(*args, **kwargs)
        return NotImplemented


class _ElementwiseDispatcher:
    def __init__(self, api, target, types_, binary):
        self.api, self.target, self.types, self.binary = api, target, types_, binary

    def __call__(self, args, kwargs):
        n = 2 if self.binary else 1
        names = list(inspect.signature(self.api).parameters)[:n]
        values = list(args[:n]) + [kwargs[k] for k in names[len(args):n] if k in kwargs]
        if len(values) != n or not all(_matches(v, t) for v, t in zip(values, self.types)):
            return NotImplemented
        rest_args, rest_kwargs = args[n:], {k: v for k, v in kwargs.items() if k not in names}
        api = self.api

        def api_func(*xs):
            return api(*xs, *rest_args, **rest_kwargs)
        api_func.__name__ = api.__name__
        return self.target(api_func, *values)


def _public_namespaces():
    import tapegpu
    out = [tapegpu]
    for value in list(vars(tapegpu).values()):
        if isinstance(value, types.ModuleType) and value.__name__.startswith("tapegpu"):
            out.append(value)
    return out


def _install(api, dispatcher):
    api = getattr(api, "_tg_dispatch_original", api)
    _api_dispatchers.setdefault(api, []).append(dispatcher)
    if api not in _wrappers:
        table = _api_dispatchers

        @functools.wraps(api)
        def wrapper(*args, **kwargs):
            for d in table.get(api, ()):
                out = d(args, kwargs)
                if out is not NotImplemented:
                    return out
            return api(*args, **kwargs)
        wrapper._tg_dispatch_original = api
        _wrappers[api] = wrapper
        for ns in _public_namespaces():
            for name, value in list(vars(ns).items()):
                if value is api:
                    setattr(ns, name, wrapper)
    return api


def _uninstall(api, dispatcher):
    table = _api_dispatchers.get(api, [])
    if dispatcher in table:
        table.remove(dispatcher)
    if not table and api in _wrappers:
        wrapper = _wrappers.pop(api)
        _api_dispatchers.pop(api, None)
        for ns in _public_namespaces():
            for name, value in list(vars(ns).items()):
                if value is wrapper:
                    setattr(ns, name, api)


def _api_name(api):
    return getattr(api, "__name__", repr(api))


def dispatch_for_api(api, *signatures):
    """Decorator: `api` (a tapegpu public function such as `tg.math.add`) calls the decorated
    function instead of its own implementation when its arguments match one of `signatures`
    (dicts {parameter name: type}; without any, the decorated function's annotations), as
    `tf.experimental.dispatch_for_api`.

    >>> class Box(tg.experimental.ExtensionType):
    ...     v: tg.Tensor
    >>> @tg.experimental.dispatch_for_api(tg.math.reduce_sum)
    ... def box_sum(input_tensor: Box, axis=None, keepdims=False, name=None):
    ...     return tg.math.reduce_sum(input_tensor.v, axis, keepdims)
    >>> float(tg.math.reduce_sum(Box([1.0, 2.0])))
    3.0
    >>> tg.experimental.unregister_dispatch_for(box_sum)
    """
    if not callable(api):
        raise TypeError(f"dispatch_for_api: api must be a tapegpu public function, got "
                        f"{api!r}")
    original = getattr(api, "_tg_dispatch_original", api)
    try:
        api_params = inspect.signature(original).parameters
    except (TypeError, ValueError):
        raise TypeError(f"dispatch_for_api: {api!r} has no inspectable signature") from None

    def decorate(target):
        sigs = list(signatures)
        if not sigs:
            hints = typing.get_type_hints(target)
            hints.pop("return", None)
            if not hints:
                raise ValueError(f"dispatch_for_api: the dispatch target {target.__name__} "
                                 f"has no type annotations and no signatures were given")
            sigs = [hints]
            target_params = list(inspect.signature(target).parameters)
            if target_params != list(api_params):
                raise ValueError(f"Dispatch function's signature {target_params} does not "
                                 f"match API's signature {list(api_params)} "
                                 f"({_api_name(original)}).")
        for sig in sigs:
            if not isinstance(sig, dict):
                raise TypeError(f"dispatch_for_api: each signature must be a dict "
                                f"{{parameter name: type}}, got {sig!r}")
            for name, t in sig.items():
                if name not in api_params:
                    raise ValueError(f"dispatch_for_api: {_api_name(original)} has no "
                                     f"parameter {name!r}; its parameters are "
                                     f"{list(api_params)}")
        d = _Dispatcher(original, target, sigs)
        _install(original, d)
        _targets.setdefault(target, []).append((original, d))
        return target
    return decorate


def _elementwise_apis(binary):
    if binary:
        names = ["add", "subtract", "multiply", "divide", "truediv", "pow", "maximum",
                 "minimum", "atan2", "xlogy", "xlog1py", "floordiv", "floormod", "mod",
                 "squared_difference", "equal", "not_equal", "less", "less_equal", "greater",
                 "greater_equal", "logical_and", "logical_or", "logical_xor", "divide_no_nan",
                 "multiply_no_nan"]
        return [getattr(_binary, n) for n in names]
    skip = {"identity", "stop_gradient", "polygamma"}
    return [getattr(_unary, n) for n in _unary.__all__ if n not in skip] + \
        [_binary.logical_not]


def _elementwise(binary, types_):
    def decorate(handler):
        for api in _elementwise_apis(binary):
            d = _ElementwiseDispatcher(api, handler, types_, binary)
            _install(api, d)
            _targets.setdefault(handler, []).append((api, d))
        return handler
    return decorate


def dispatch_for_unary_elementwise_apis(x_type):
    """Decorator: every unary elementwise API (`tg.math.abs`, `tg.exp`, `tg.cast`, ...) calls
    `handler(api_func, x)` when its first argument is an `x_type`; `api_func` applies the API
    (with its other arguments) to a tensor, as
    `tf.experimental.dispatch_for_unary_elementwise_apis`.

    >>> class Box(tg.experimental.ExtensionType):
    ...     v: tg.Tensor
    >>> @tg.experimental.dispatch_for_unary_elementwise_apis(Box)
    ... def box_unary(api_func, x):
    ...     return Box(api_func(x.v))
    >>> tg.math.abs(Box([-1.0, 2.0])).v.numpy().tolist()
    [1.0, 2.0]
    >>> tg.experimental.unregister_dispatch_for(box_unary)
    """
    return _elementwise(False, (x_type,))


def dispatch_for_binary_elementwise_apis(x_type, y_type):
    """Decorator: every binary elementwise API (`tg.math.add`, `tg.maximum`, `tg.equal`, ...)
    calls `handler(api_func, x, y)` when its first two arguments are an `x_type` and a
    `y_type`, as `tf.experimental.dispatch_for_binary_elementwise_apis`.

    >>> class Box(tg.experimental.ExtensionType):
    ...     v: tg.Tensor
    >>> @tg.experimental.dispatch_for_binary_elementwise_apis(Box, Box)
    ... def box_binary(api_func, x, y):
    ...     return Box(api_func(x.v, y.v))
    >>> tg.math.add(Box([1.0]), Box([2.0])).v.numpy().tolist()
    [3.0]
    >>> tg.experimental.unregister_dispatch_for(box_binary)
    """
    return _elementwise(True, (x_type, y_type))


def unregister_dispatch_for(dispatch_target):
    """Removes every dispatch registered for `dispatch_target` (a function decorated by one
    of the `dispatch_for_*` decorators), as `tf.experimental.unregister_dispatch_for`;
    ValueError if there is none.

    >>> tg.experimental.unregister_dispatch_for(print)
    Traceback (most recent call last):
    ValueError: Function <built-in function print> was not registered using a `dispatch_for_*` decorator.
    """
    entries = _targets.pop(dispatch_target, None)
    if not entries:
        raise ValueError(f"Function {dispatch_target!r} was not registered using a "
                         f"`dispatch_for_*` decorator.")
    for api, d in entries:
        _uninstall(api, d)
