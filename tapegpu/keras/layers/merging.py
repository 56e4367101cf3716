"""Keras' merging layers: `Add`, `Subtract`, `Multiply`, `Average`, `Maximum`, `Minimum`,
`Concatenate`, `Dot`, and their functional forms (`add(inputs, **kwargs)` is
`Add(**kwargs)(inputs)`, ...).

They take a list of tensors. The output's mask is the OR of the inputs' masks (`Concatenate`:
the masks concatenated; `Dot`: none), as Keras.
"""
import numpy as np

from ... import ops
from ...core.tensor import convert_to_tensor
from ...models.tensor_attributes import get_keras_mask
from .base import Layer, _attach_mask
from .normalization import _l2_normalize


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


class _Merge(Layer):
    """Keras' elementwise merge layers: a list of tensors of one batch size whose shapes
    broadcast (an input of lower rank gets axes of size 1 after the batch axis, as Keras);
    the output mask is the OR of the inputs' masks (None if one has none)."""

    _MULTI_INPUT = True
    supports_masking = True
    _exactly = None  # the number of inputs the layer takes (None: at least 1)

    def _call_multi(self, inputs, args, kwargs):
        name = type(self).__name__
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"A merge layer ({name} {self.name!r}) should be called on a list "
                             f"of inputs, got {type(inputs).__name__}")
        if self._exactly is not None and len(inputs) != self._exactly:
            raise ValueError(f"A `{name}` layer should be called on exactly {self._exactly} "
                             f"inputs, got {len(inputs)}")
        return _merge_call(self, inputs, args, kwargs)

    def build(self, input_shape):
        batches = {s[0] for s in input_shape if len(s)}
        if len(batches) > 1:
            raise ValueError(f"{type(self).__name__} {self.name!r}: cannot merge tensors with "
                             f"different batch sizes, got shapes {list(input_shape)}")

    def compute_mask(self, inputs, mask=None):
        """The OR of the inputs' masks (Keras), None if an input has none."""
        return _or_masks(self, inputs, mask)

    def call(self, inputs):
        rank = max(x.ndim for x in inputs)  # Keras: lower ranks get axes after the batch's
        inputs = [ops.reshape(x, x.shape[:1] + (1,) * (rank - x.ndim) + x.shape[1:])
                  if 0 < x.ndim < rank else x for x in inputs]
        try:
            np.broadcast_shapes(*[x.shape for x in inputs])
        except ValueError:
            raise ValueError(f"{type(self).__name__} {self.name!r}: inputs have incompatible "
                             f"shapes, got {[x.shape for x in inputs]}") from None
        return self._merge(inputs)


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


class Subtract(_Merge):
    """`inputs[0] - inputs[1]` (exactly two inputs).

    >>> tg.keras.layers.Subtract()([tg.fill((2,), 3.0), tg.ones((2,))]).numpy()
    array([2., 2.], dtype=float32)
    """

    _exactly = 2

    def _merge(self, inputs):
        return inputs[0] - inputs[1]


class Multiply(_Merge):
    """The elementwise product of a list of tensors.

    >>> tg.keras.layers.Multiply()([tg.fill((2,), 3.0), tg.fill((2,), 2.0)]).numpy()
    array([6., 6.], dtype=float32)
    """

    def _merge(self, inputs):
        y = inputs[0]
        for x in inputs[1:]:
            y = y * x
        return y


class Average(_Merge):
    """The elementwise mean of a list of tensors.

    >>> tg.keras.layers.Average()([tg.fill((2,), 3.0), tg.ones((2,))]).numpy()
    array([2., 2.], dtype=float32)
    """

    def _merge(self, inputs):
        y = inputs[0]
        for x in inputs[1:]:
            y = y + x
        return y / len(inputs)


class Maximum(_Merge):
    """The elementwise maximum of a list of tensors.

    >>> tg.keras.layers.Maximum()([tg.constant([1.0, 4.0]), tg.constant([3.0, 2.0])]).numpy()
    array([3., 4.], dtype=float32)
    """

    def _merge(self, inputs):
        y = inputs[0]
        for x in inputs[1:]:
            y = ops.maximum(y, x)
        return y


class Minimum(_Merge):
    """The elementwise minimum of a list of tensors.

    >>> tg.keras.layers.Minimum()([tg.constant([1.0, 4.0]), tg.constant([3.0, 2.0])]).numpy()
    array([1., 2.], dtype=float32)
    """

    def _merge(self, inputs):
        y = inputs[0]
        for x in inputs[1:]:
            y = ops.minimum(y, x)
        return y


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


class Dot(_Merge):
    """Keras' batched dot product of two tensors: `axes` (an int, or a pair, one per input;
    negative counts from the end) are summed over, example by example; the output holds the
    remaining axes of the first input, then of the second ((batch, 1) if none remain). With
    `normalize=True` the inputs are first L2-normalised along `axes` (cosine similarity).
    The output has no mask (Keras).

    >>> tg.keras.layers.Dot(axes=1)([tg.ones((3, 4)), tg.ones((3, 4))]).numpy().ravel()
    array([4., 4., 4.], dtype=float32)
    >>> tg.keras.layers.Dot(axes=(2, 2))([tg.ones((2, 3, 4)), tg.ones((2, 5, 4))]).shape
    (2, 3, 5)
    """

    _exactly = 2

    def __init__(self, axes, normalize=False, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not isinstance(axes, int):
            if not isinstance(axes, (list, tuple)):
                raise TypeError(f"Dot: axes must be an int or a list of two ints, got "
                                f"{axes!r}")
            if len(axes) != 2 or not all(isinstance(a, int) for a in axes):
                raise ValueError(f"Dot: axes must hold two integers, got {axes!r}")
        self.axes = axes
        self.normalize = bool(normalize)

    def _resolve(self, shapes):
        pair = (self.axes, self.axes) if isinstance(self.axes, int) else tuple(self.axes)
        axes = []
        for a, s in zip(pair, shapes):
            if not -len(s) <= a < len(s) or a % len(s) == 0:
                raise ValueError(f"Dot {self.name!r}: axes {self.axes} out of range for inputs "
                                 f"of shapes {list(shapes)} (valid: the non-batch axes)")
            axes.append(a % len(s))
        return axes

    def build(self, input_shape):
        super().build(input_shape)
        s1, s2 = input_shape
        a1, a2 = self._resolve(input_shape)
        if s1[a1] != s2[a2]:
            raise ValueError(f"Dot {self.name!r}: incompatible input shapes: axis values "
                             f"{s1[a1]} (at axis {a1}) != {s2[a2]} (at axis {a2}). Full input "
                             f"shapes: {tuple(s1)}, {tuple(s2)}")

    def compute_mask(self, inputs, mask=None):
        """None (Keras)."""
        return None

    def call(self, inputs):
        x1, x2 = inputs
        a1, a2 = self._resolve([x1.shape, x2.shape])
        if x1.shape[a1] != x2.shape[a2] or x1.shape[0] != x2.shape[0]:
            raise ValueError(f"Dot {self.name!r}: incompatible input shapes {x1.shape} and "
                             f"{x2.shape} for axes ({a1}, {a2})")
        if self.normalize:
            x1 = _l2_normalize(x1, a1)
            x2 = _l2_normalize(x2, a2)
        letters = "abcdefghijklmnopqrstuvwxyz"
        s1 = list(letters[:x1.ndim])
        s2 = ["a"] + list(letters[x1.ndim:x1.ndim + x2.ndim - 1])
        s2[a2] = s1[a1]
        rest = [c for i, c in enumerate(s1) if i != a1] + \
            [c for i, c in enumerate(s2) if i not in (0, a2)]
        out = ops.einsum(f"{''.join(s1)},{''.join(s2)}->{''.join(rest)}", x1, x2)
        return ops.expand_dims(out, 1) if out.ndim == 1 else out


# -- Keras' functional forms -------------------------------------------------------------------

def add(inputs, **kwargs):
    """`Add(**kwargs)(inputs)`, Keras' functional form.

    >>> tg.keras.layers.add([tg.ones((2,)), tg.ones((2,))]).numpy()
    array([2., 2.], dtype=float32)
    """
    return Add(**kwargs)(inputs)


def subtract(inputs, **kwargs):
    """`Subtract(**kwargs)(inputs)`, Keras' functional form.

    >>> tg.keras.layers.subtract([tg.fill((2,), 3.0), tg.ones((2,))]).numpy()
    array([2., 2.], dtype=float32)
    """
    return Subtract(**kwargs)(inputs)


def multiply(inputs, **kwargs):
    """`Multiply(**kwargs)(inputs)`, Keras' functional form.

    >>> tg.keras.layers.multiply([tg.fill((2,), 3.0), tg.fill((2,), 2.0)]).numpy()
    array([6., 6.], dtype=float32)
    """
    return Multiply(**kwargs)(inputs)


def average(inputs, **kwargs):
    """`Average(**kwargs)(inputs)`, Keras' functional form.

    >>> tg.keras.layers.average([tg.fill((2,), 3.0), tg.ones((2,))]).numpy()
    array([2., 2.], dtype=float32)
    """
    return Average(**kwargs)(inputs)


def maximum(inputs, **kwargs):
    """`Maximum(**kwargs)(inputs)`, Keras' functional form.

    >>> tg.keras.layers.maximum([tg.constant([1.0, 4.0]), tg.constant([3.0, 2.0])]).numpy()
    array([3., 4.], dtype=float32)
    """
    return Maximum(**kwargs)(inputs)


def minimum(inputs, **kwargs):
    """`Minimum(**kwargs)(inputs)`, Keras' functional form.

    >>> tg.keras.layers.minimum([tg.constant([1.0, 4.0]), tg.constant([3.0, 2.0])]).numpy()
    array([1., 2.], dtype=float32)
    """
    return Minimum(**kwargs)(inputs)


def concatenate(inputs, axis=-1, **kwargs):
    """`Concatenate(axis=axis, **kwargs)(inputs)`, Keras' functional form.

    >>> tg.keras.layers.concatenate([tg.ones((2, 1)), tg.zeros((2, 3))]).shape
    (2, 4)
    """
    return Concatenate(axis=axis, **kwargs)(inputs)


def dot(inputs, axes=-1, **kwargs):
    """`Dot(axes=axes, **kwargs)(inputs)`, Keras' functional form.

    >>> tg.keras.layers.dot([tg.ones((3, 4)), tg.ones((3, 4))], axes=1).numpy().ravel()
    array([4., 4., 4.], dtype=float32)
    """
    return Dot(axes=axes, **kwargs)(inputs)
