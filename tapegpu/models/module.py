"""`Module`: a container that finds the variables and sub-modules held in its attributes.

As `tf.Module` and Sonnet's `snt.Module`, discovery walks the instance's attributes and the
lists, tuples and dicts inside them. The order is deterministic: attributes in the order they
were first set (so a Dense layer lists its kernel before its bias, as Keras does), list and
tuple items in order, dict items in sorted-key order (as `tf.nest`). A variable or module that is
reachable along several paths is listed once, at its first occurrence.
"""
import re

from ..core.tensor import Variable

_NAME_RE = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(name):
    return _NAME_RE.sub("_", name).lower()


class Module:
    """Base class for objects that hold variables and other modules.

    Subclasses assign variables and modules to attributes (directly or inside lists, tuples and
    dicts); `variables`, `trainable_variables` and `submodules` find them.

    >>> class Affine(tg.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = tg.Variable([[1.0, 2.0]])
    ...         self.b = tg.Variable([0.0, 0.0], trainable=False)
    ...     def __call__(self, x):
    ...         return x @ self.w + self.b
    >>> class Net(tg.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.blocks = [Affine(), Affine()]
    >>> net = Net()
    >>> len(net.variables), len(net.trainable_variables), len(net.submodules)
    (4, 2, 2)
    """

    # Attributes never searched (back references and caches would create cycles or duplicates).
    _IGNORED_ATTRIBUTES = frozenset()

    def __init__(self, name=None):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"{type(self).__name__}: name must be a string, got {name!r}")
        self._name = name if name is not None else _snake(type(self).__name__)

    @property
    def name(self):
        """The module's name (the snake-cased class name unless given)."""
        return getattr(self, "_name", _snake(type(self).__name__))

    @property
    def variables(self):
        """Every variable of this module and its sub-modules, each once, in a fixed order (a new
        list each time, as Keras)."""
        return _walk(self, Variable, recurse_into_modules=True)

    @property
    def trainable_variables(self):
        """The variables with `trainable=True` (what optimizers update), a list in the order of
        `variables`."""
        return [v for v in self.variables if v.trainable]

    @property
    def non_trainable_variables(self):
        """The variables with `trainable=False` (e.g. BatchNormalization's moving statistics), a
        list in the order of `variables`."""
        return [v for v in self.variables if not v.trainable]

    @property
    def submodules(self):
        """Every module reachable from this one (not itself), each once: children before
        grandchildren (breadth-first, as `tf.Module.submodules`)."""
        found = []
        seen = {id(self)}
        frontier = [self]
        while frontier:
            children = []
            for m in frontier:
                for child in _walk(m, Module, recurse_into_modules=False):
                    if id(child) not in seen:
                        seen.add(id(child))
                        found.append(child)
                        children.append(child)
            frontier = children
        return tuple(found)

    def __repr__(self):
        return f"<{type(self).__name__} {self.name!r}: {len(self.variables)} variables>"


def _walk(module, kind, recurse_into_modules):
    """Objects of type `kind` reachable from `module`'s attributes, deduplicated by identity."""
    out = []
    seen = {id(module)}
    for key, value in vars(module).items():
        if key in module._IGNORED_ATTRIBUTES or key == "_name":
            continue
        _collect(value, kind, recurse_into_modules, out, seen)
    return out


def _collect(value, kind, recurse, out, seen):
    if id(value) in seen:
        return
    if isinstance(value, Module):
        seen.add(id(value))
        if kind is Module:
            out.append(value)
        if recurse:
            for key, attr in vars(value).items():
                if key not in value._IGNORED_ATTRIBUTES and key != "_name":
                    _collect(attr, kind, recurse, out, seen)
    elif isinstance(value, Variable):
        seen.add(id(value))
        if kind is Variable:
            out.append(value)
    elif isinstance(value, (list, tuple)):
        seen.add(id(value))
        for item in value:
            _collect(item, kind, recurse, out, seen)
    elif isinstance(value, dict):
        seen.add(id(value))
        for k in _sorted_keys(value):
            _collect(value[k], kind, recurse, out, seen)


def _sorted_keys(d):
    try:
        return sorted(d)
    except TypeError:  # keys of mixed types: keep insertion order
        return list(d)
