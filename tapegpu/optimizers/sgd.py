"""Stochastic gradient descent with optional (Nesterov) momentum, Keras' rule."""
import math

from .base import Optimizer


class SGD(Optimizer):
    """Gradient descent with momentum, as Keras:

        v = momentum * v - lr * g
        p = p + v                          (nesterov=False)
        p = p + momentum * v - lr * g      (nesterov=True, with the new v)

    and `p = p - lr * g` when `momentum == 0`.

    >>> w = tg.Variable([1.0, 2.0])
    >>> opt = tg.optimizers.SGD(learning_rate=0.1, momentum=0.9)
    >>> _ = opt.apply_gradients([(tg.constant([1.0, 1.0]), w)])
    >>> _ = opt.apply_gradients([(tg.constant([1.0, 1.0]), w)])
    >>> w.numpy().round(3)  # v1 = -0.1, v2 = -0.19
    array([0.71, 1.71], dtype=float32)
    """

    _kind = "sgd"
    _slot_names = ("momentum",)

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, name="SGD", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)
        if not 0.0 <= float(momentum) <= 1.0:
            raise ValueError(f"SGD: momentum must be in [0, 1], got {momentum}")
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)

    def _needs_slot(self, name):
        return self.momentum > 0.0

    def _hyper(self, t, lr, dtype, xp=math):
        return {"lr": lr, "momentum": self.momentum, "nesterov": self.nesterov}

    @staticmethod
    def update(xp, p, g, v, lr, momentum, nesterov):
        """One SGD step on arrays: returns the new parameter; updates the velocity `v` in place."""
        if v is None:
            return p - lr * g
        v *= momentum
        v -= lr * g
        if nesterov:
            return p + (momentum * v - lr * g)
        return p + v
