"""Nested structures (lists, tuples, namedtuples, dicts) of tensors, as tf.nest sees them."""
import collections
import types


def flatten(structure):
    """Leaves in TensorFlow's order (dicts by sorted key)."""
    out = []
    _flatten(structure, out)
    return out


def _flatten(s, out):
    if isinstance(s, dict):
        for k in sorted(s):
            _flatten(s[k], out)
    elif isinstance(s, (list, tuple)):
        for v in s:
            _flatten(v, out)
    else:
        out.append(s)


def pack_sequence_as(structure, leaves):
    """Rebuilds `structure` with `leaves` in flatten's order."""
    it = iter(leaves)
    result = _pack(structure, it)
    return result


def _pack(s, it):
    if isinstance(s, dict):
        packed = {k: _pack(s[k], it) for k in sorted(s)}
        if type(s) is dict:
            return {k: packed[k] for k in s}
        if isinstance(s, collections.defaultdict):  # its constructor takes the factory first
            out = type(s)(s.default_factory)
            out.update((k, packed[k]) for k in s)
            return out
        return type(s)((k, packed[k]) for k in s)
    if isinstance(s, tuple) and hasattr(s, "_fields"):
        return type(s)(*[_pack(v, it) for v in s])
    if isinstance(s, (list, tuple)):
        return type(s)(_pack(v, it) for v in s)
    return next(it)


# -- composites: values of user types that declare their parts (tg.experimental.ExtensionType:
# `_tg_fields`, `_tg_parts()` and `_tg_rebuild(parts)`). tf.nest leaves them whole unless
# asked (`expand_composites`); tg.function expands them (its arguments and results).

_COMPOSITE_TYPES = {}  # type -> whether its values are composites (asked once per type)


def is_composite(s):
    """Whether `s` is a composite value (its type declares `_tg_fields` and it has parts)."""
    t = type(s)
    known = _COMPOSITE_TYPES.get(t)
    if known is None:
        known = _COMPOSITE_TYPES[t] = getattr(t, "_tg_fields", None) is not None
    return known and hasattr(s, "_tg_parts")


def _flatten_composites(s, out):
    if isinstance(s, dict):
        for k in sorted(s):
            _flatten_composites(s[k], out)
    elif isinstance(s, (list, tuple)):
        for v in s:
            _flatten_composites(v, out)
    elif is_composite(s):
        for v in s._tg_parts():
            _flatten_composites(v, out)
    else:
        out.append(s)


def _pack_composites(s, it):
    if not isinstance(s, (dict, list, tuple)) and is_composite(s):
        return s._tg_rebuild([_pack_composites(v, it) for v in s._tg_parts()])
    if isinstance(s, dict):
        packed = {k: _pack_composites(s[k], it) for k in sorted(s)}
        return {k: packed[k] for k in s} if type(s) is dict else \
            type(s)((k, packed[k]) for k in s)
    if isinstance(s, tuple) and hasattr(s, "_fields"):
        return type(s)(*[_pack_composites(v, it) for v in s])
    if isinstance(s, (list, tuple)):
        return type(s)(_pack_composites(v, it) for v in s)
    return next(it)


def _composite_flatten(structure):
    out = []
    _flatten_composites(structure, out)
    return out


def _composite_pack(structure, leaves):
    return _pack_composites(structure, iter(leaves))


def _composite_is_nested(s):
    return isinstance(s, (list, tuple, dict)) or is_composite(s)


# the structure functions with composites expanded (what tg.function sees)
composites = types.SimpleNamespace(flatten=_composite_flatten,
                                   pack_sequence_as=_composite_pack,
                                   is_nested=_composite_is_nested)


def map_structure(fn, structure):
    return pack_sequence_as(structure, [fn(x) for x in flatten(structure)])


def is_nested(s):
    return isinstance(s, (list, tuple, dict))


def assert_same_structure(nest1, nest2, check_types=True):
    """Raises ValueError when the two structures nest differently (TypeError, with `check_types`,
    when their sequence types differ), as tf.nest.assert_same_structure.

    >>> tg.nest.assert_same_structure([1, (2, 3)], [4, (5, 6)])
    """
    def shape(s):
        if isinstance(s, dict):
            return (type(s) if check_types else dict, tuple((k, shape(s[k])) for k in sorted(s)))
        if isinstance(s, (list, tuple)):
            kind = type(s) if check_types else (tuple if hasattr(s, "_fields") else list)
            return (kind, tuple(shape(v) for v in s))
        return None

    a, b = shape(nest1), shape(nest2)
    if a == b:
        return
    if check_types and shape_without_types(nest1) == shape_without_types(nest2):
        raise TypeError(f"The two structures don't have the same sequence type: {nest1!r} and "
                        f"{nest2!r}")
    raise ValueError(f"The two structures don't have the same nested structure: {nest1!r} and "
                     f"{nest2!r}")


def shape_without_types(s):
    if isinstance(s, dict):
        return ("dict", tuple((k, shape_without_types(s[k])) for k in sorted(s)))
    if isinstance(s, (list, tuple)):
        return ("seq", tuple(shape_without_types(v) for v in s))
    return None
