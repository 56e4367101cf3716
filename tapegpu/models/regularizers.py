"""Weight regularizers (Keras'): `L1`, `L2`, `L1L2`, and `get`.

A regularizer is a callable of a weight returning a scalar penalty. Layers given one
(`kernel_regularizer=`, `bias_regularizer=`) list the penalties of their weights in
`layer.losses`, computed when read (under a tape, they are differentiable); `fit` adds them to
the loss, and a custom training loop adds `sum(model.losses)`.

>>> reg = tg.keras.regularizers.l2(0.1)
>>> float(reg(tg.constant([1.0, 2.0])))
0.5
"""
from .. import ops


class Regularizer:
    """Base class: `__call__(x)` returns the penalty of weight `x`."""

    def __call__(self, x):
        raise NotImplementedError

    def get_config(self):
        return dict(vars(self))


def _factor(value, who, name):
    value = float(value)
    if not value >= 0.0:
        raise ValueError(f"{who}: {name} must be a number >= 0, got {value}")
    return value


class L1(Regularizer):
    """`l1 * sum(|x|)`.

    >>> float(tg.keras.regularizers.L1(0.5)(tg.constant([1.0, -2.0])))
    1.5
    """

    def __init__(self, l1=0.01):
        self.l1 = _factor(l1, "L1", "l1")

    def __call__(self, x):
        return self.l1 * ops.reduce_sum(ops.abs(x))


class L2(Regularizer):
    """`l2 * sum(x^2)`.

    >>> float(tg.keras.regularizers.L2(0.5)(tg.constant([1.0, -2.0])))
    2.5
    """

    def __init__(self, l2=0.01):
        self.l2 = _factor(l2, "L2", "l2")

    def __call__(self, x):
        return self.l2 * ops.reduce_sum(ops.square(x))


class L1L2(Regularizer):
    """`l1 * sum(|x|) + l2 * sum(x^2)`.

    >>> float(tg.keras.regularizers.L1L2(l1=1.0, l2=1.0)(tg.constant([2.0])))
    6.0
    """

    def __init__(self, l1=0.0, l2=0.0):
        self.l1 = _factor(l1, "L1L2", "l1")
        self.l2 = _factor(l2, "L1L2", "l2")

    def __call__(self, x):
        out = 0.0
        if self.l1:
            out = out + self.l1 * ops.reduce_sum(ops.abs(x))
        if self.l2:
            out = out + self.l2 * ops.reduce_sum(ops.square(x))
        return out if self.l1 or self.l2 else ops.reduce_sum(x) * 0.0


l1, l2, l1_l2 = L1, L2, L1L2  # Keras' lower-case aliases

_BY_NAME = {"l1": L1, "l2": L2, "l1_l2": L1L2, "l1l2": L1L2}


def get(identifier):
    """A regularizer from a name ('l1', 'l2', 'l1_l2'), a Regularizer or a callable; None stays
    None.

    >>> type(tg.keras.regularizers.get("l2")).__name__
    'L2'
    """
    if identifier is None:
        return None
    if isinstance(identifier, str):
        if identifier.lower() not in _BY_NAME:
            raise ValueError(f"Could not interpret regularizer identifier: {identifier!r}; "
                             f"valid names: {sorted(_BY_NAME)}, or a callable of a weight")
        return _BY_NAME[identifier.lower()]()
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret regularizer identifier: {identifier!r}")
