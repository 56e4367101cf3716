"""Adamax (Kingma & Ba, section 7.1): Adam with the infinity norm, with Keras' update."""
import math

from .base import Optimizer


def _check_betas(who, **betas):
    for label, b in betas.items():
        if not 0.0 <= float(b) < 1.0:
            raise ValueError(f"{who}: {label} must be in [0, 1), got {b}")
    return [float(b) for b in betas.values()]


class Adamax(Optimizer):
    """Adamax, as Keras computes it at step t = 1, 2, ...:

        m = m + (g - m) * (1 - beta_1)
        u = max(beta_2 * u, |g|)
        p = p - lr * m / ((1 - beta_1^t) * (u + epsilon))

    >>> w = tg.Variable([1.0])
    >>> opt = tg.optimizers.Adamax(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(tg.constant([0.5]), w)])
    >>> w.numpy().round(4)  # the first step moves by lr * sign(g)
    array([0.9], dtype=float32)
    """

    _kind = "adamax"
    _slot_names = ("momentum", "norm")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 name="adamax", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)
        self.beta_1, self.beta_2 = _check_betas("Adamax", beta_1=beta_1, beta_2=beta_2)
        self.epsilon = float(epsilon)

    def _hyper(self, t, lr, dtype, xp=math):
        return {"lr_t": lr / (1.0 - self.beta_1 ** t), "b1": self.beta_1, "b2": self.beta_2,
                "eps": self.epsilon}

    @staticmethod
    def update(xp, p, g, m, u, *, lr_t, b1, b2, eps):
        """One Adamax step on arrays: returns the new parameter; updates m, u in place."""
        m += (g - m) * (1.0 - b1)
        xp.maximum(u * b2, xp.abs(g), out=u)
        return p - lr_t * m / (u + eps)
