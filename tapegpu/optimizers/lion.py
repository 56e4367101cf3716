"""Lion (Chen et al., "Symbolic Discovery of Optimization Algorithms"), with Keras' update."""
import math

from .base import Optimizer


class Lion(Optimizer):
    """Lion, as Keras computes it: the step is the sign of an interpolation, then the
    momentum is updated with its own rate:

        p = p - lr * sign(beta_1 * m + (1 - beta_1) * g)
        m = beta_2 * m + (1 - beta_2) * g

    Every element moves by exactly lr (or 0), so Lion wants a smaller learning rate than Adam.

    >>> w = tg.Variable([1.0, 1.0])
    >>> opt = tg.optimizers.Lion(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(tg.constant([0.5, -3.0]), w)])
    >>> w.numpy().round(4)
    array([0.9, 1.1], dtype=float32)
    """

    _kind = "lion"
    _slot_names = ("momentum",)

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.99, name="lion", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)
        if not 0.0 < float(beta_1) <= 1.0:
            raise ValueError(f"Lion: beta_1 must be in (0, 1], got {beta_1}")
        if not 0.0 <= float(beta_2) <= 1.0:
            raise ValueError(f"Lion: beta_2 must be in [0, 1], got {beta_2}")
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)

    def _hyper(self, t, lr, dtype, xp=math):
        return {"lr": lr, "b1": self.beta_1, "b2": self.beta_2}

    @staticmethod
    def update(xp, p, g, m, *, lr, b1, b2):
        """One Lion step on arrays: returns the new parameter; updates m in place."""
        new = p - lr * xp.sign(m * b1 + g * (1.0 - b1))
        m *= b2
        m += g * (1.0 - b2)
        return new
