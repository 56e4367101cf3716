"""Elements of a dataset: nested tuples (namedtuples) and dicts of tensors, as tf.data sees them.

Lists are not structures here: as in tf.data, a list is converted to one tensor
(`from_tensor_slices([1, 2, 3])` has scalar elements). The helpers convert Python values and
numpy arrays to tensors on the current device, describe elements by `tg.TensorSpec`s, and stack
(`batch`), pad (`padded_batch`) and split (`unbatch`) them with the arrays' own module, outside
any tape (an input pipeline is not differentiated, as in TensorFlow).
"""
import numpy as np

from .. import backends as _backend
from ..core import dtypes, nest
from ..core.tensor import Tensor, Variable, convert_to_tensor
from ..function import TensorSpec
from ..ops.registry import InvalidArgumentError


def is_structure(s):
    return isinstance(s, (tuple, dict))


def normalize(value, who):
    """`value` with every leaf a Tensor on the current device (lists become tensors)."""
    if isinstance(value, dict):
        if type(value) is dict:
            return {k: normalize(v, who) for k, v in value.items()}
        return type(value)((k, normalize(v, who)) for k, v in value.items())
    if isinstance(value, tuple):
        items = [normalize(v, who) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, TensorSpec):
        raise TypeError(f"{who}: a tg.TensorSpec is not a value; pass tensors, arrays or "
                        "Python numbers")
    return to_device(convert(value, who))


def convert(value, who, dtype=None):
    if value is None:
        raise TypeError(f"{who}: an element component is None; dataset elements are (nested "
                        "tuples and dicts of) tensors")
    try:
        return convert_to_tensor(value, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{who}: {e}") from None


def to_device(t, dev=None):
    """`t` on `dev` (default: the current device); a copy only when it lives elsewhere."""
    dev = _backend.current() if dev is None else dev
    if isinstance(t, Variable):
        t = t._read()
    if t._dev is dev or t._data.dtype == object:  # strings stay on the host
        return t
    return Tensor(dev.asarray(t._dev.to_numpy(t._data)), dev)


def flatten(element):
    return nest.flatten(element)


def pack(structure, leaves):
    return nest.pack_sequence_as(structure, leaves)


def spec_of(element):
    """The `tg.TensorSpec` structure describing `element`."""
    return nest.map_structure(lambda t: TensorSpec(tuple(t.shape), t.dtype), element)


def same_structure(a, b):
    try:
        nest.assert_same_structure(a, b, check_types=False)
    except (ValueError, TypeError):
        return False
    return True


def most_specific_common(a, b):
    """The spec both `a` and `b` satisfy (dimensions that differ become None)."""
    if a.dtype != b.dtype:
        raise TypeError(f"incompatible dtypes {a.dtype.name} and {b.dtype.name}")
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return TensorSpec(None, a.dtype)
    return TensorSpec(tuple(x if x == y else None for x, y in zip(a.shape, b.shape)), a.dtype)


def unbatched_spec(spec, who):
    if spec.shape is not None and len(spec.shape) == 0:
        raise ValueError(f"{who}: the input elements must have rank >= 1 to be split along "
                         f"their first dimension, got a component of spec {spec}")
    return TensorSpec(None if spec.shape is None else spec.shape[1:], spec.dtype)


def batched_spec(spec, batch_dim):
    return TensorSpec(None if spec.shape is None else (batch_dim,) + spec.shape, spec.dtype)


# -- stacking, padding, splitting ----------------------------------------------------------------

def stack(elements, dev):
    """One element whose leaves stack the leaves of `elements` along a new first axis."""
    leaves = [flatten(e) for e in elements]
    out = []
    for c in range(len(leaves[0])):
        parts = [ls[c] for ls in leaves]
        first = parts[0]
        for i, p in enumerate(parts[1:], 1):
            if p.shape != first.shape:
                raise InvalidArgumentError(
                    f"Dataset.batch: Cannot batch tensors with different shapes in component "
                    f"{c}. First element had shape {list(first.shape)} and element {i} had "
                    f"shape {list(p.shape)}; use padded_batch to pad them to a common shape")
            if p._data.dtype != first._data.dtype:
                raise InvalidArgumentError(
                    f"Dataset.batch: component {c} has dtype {first.dtype.name} in the first "
                    f"element and {p.dtype.name} in element {i}")
        if first._data.dtype == object:  # strings: stacked on the host, where they live
            out.append(Tensor(np.stack([p._data for p in parts]), first._dev))
            continue
        out.append(Tensor(dev.xp.stack([to_device(p, dev)._data for p in parts]), dev))
    return pack(elements[0], out)


def pad_stack(elements, padded_shapes, padding_values, dev):
    """`padded_batch`'s stacking: every leaf padded at the end of each dimension to its padded
    shape (None, or -1 in a dimension: the largest in the batch) with its padding value
    (`padded_shapes` and `padding_values` are flat lists, one per leaf)."""
    leaves = [flatten(e) for e in elements]
    shapes, values = padded_shapes, padding_values
    out = []
    for c in range(len(leaves[0])):
        parts = [to_device(ls[c], dev) for ls in leaves]
        rank = parts[0].ndim
        for i, p in enumerate(parts):
            if p.ndim != rank:
                raise InvalidArgumentError(
                    f"Dataset.padded_batch: component {c} has rank {rank} in the first element "
                    f"and rank {p.ndim} in element {i}; padding keeps the rank")
        want = shapes[c]
        if want is not None and len(want) != rank:
            raise InvalidArgumentError(
                f"Dataset.padded_batch: padded_shapes for component {c} is {list(want)}, of rank "
                f"{len(want)}, but the component has rank {rank}")
        target = []
        for d in range(rank):
            biggest = max(p.shape[d] for p in parts)
            w = None if want is None else want[d]
            if w is None or w == -1:
                target.append(biggest)
            elif biggest > w:
                raise InvalidArgumentError(
                    f"Dataset.padded_batch: Attempted to pad to a smaller size than the input "
                    f"element (component {c}, dimension {d}: size {biggest} > padded size {w})")
            else:
                target.append(int(w))
        npd = parts[0]._data.dtype
        fill = values[c]
        batch = dev.xp.full((len(parts),) + tuple(target), fill, dtype=npd)
        for i, p in enumerate(parts):
            if p._data.dtype != npd:
                raise InvalidArgumentError(
                    f"Dataset.padded_batch: component {c} has dtype {parts[0].dtype.name} in "
                    f"the first element and {p.dtype.name} in element {i}")
            batch[(i,) + tuple(slice(0, s) for s in p.shape)] = p._data
        out.append(Tensor(batch, dev))
    return pack(elements[0], out)


def split(element, who, dev):
    """The slices of `element` along the first axis of every leaf (which must agree)."""
    leaves = [to_device(t, dev) for t in flatten(element)]
    n = None
    for t in leaves:
        if t.ndim == 0:
            raise InvalidArgumentError(f"{who}: Input element must have a non-scalar value in "
                                       f"each component (got a scalar of dtype {t.dtype.name})")
        if n is None:
            n = t.shape[0]
        elif t.shape[0] != n:
            raise InvalidArgumentError(f"{who}: Input element must have the same batch size in "
                                       f"each component. Component 0 had size {n} but another "
                                       f"component had size {t.shape[0]}")
    for i in range(n or 0):
        yield pack(element, [Tensor(t._data[i], dev) if t._data.dtype != object else
                             Tensor(t._data[i:i + 1].reshape(t._data.shape[1:]), t._dev)
                             for t in leaves])


def placeholder(spec, size, dev):
    """A tensor matching `spec`, its unknown dimensions of length `size`, filled with `size`
    (so that shapes computed from values vary with `size` too)."""
    shape = () if spec.shape is None else tuple(size if d is None else d for d in spec.shape)
    if spec.dtype.is_string:  # strings of `size` characters
        return Tensor(np.full(shape, b"x" * size, dtype=object), _backend.lookup("cpu"))
    return Tensor(dev.xp.full(shape, size, dtype=dtypes.np_dtype(spec.dtype)), dev)


def padding_scalar(value, dtype, who):
    """A padding value as a numpy scalar of `dtype` (Python numbers adopt it, as TF's
    dtype hint; a tensor or array of another dtype is an error)."""
    try:
        t = convert_to_tensor(value, dtype_hint=dtype)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{who}: padding value {value!r}: {e}") from None
    if t.ndim != 0:
        raise ValueError(f"{who}: padding values must be scalars, got shape {t.shape}")
    if t.dtype != dtype:
        raise TypeError(f"{who}: the padding value {t.numpy().item()!r} has dtype "
                        f"{t.dtype.name}; the component has dtype {dtype.name}")
    return t.numpy()[()]
