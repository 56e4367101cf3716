"""Adadelta (Zeiler), with Keras' update (which keeps a learning rate)."""
import math

from .base import Optimizer


class Adadelta(Optimizer):
    """Adadelta, as Keras computes it (`rms(x) = sqrt(x + epsilon)`):

        acc_g = rho * acc_g + (1 - rho) * g^2
        delta = -rms(acc_delta) * g / rms(acc_g)
        acc_delta = rho * acc_delta + (1 - rho) * delta^2
        p = p + lr * delta

    >>> w = tg.Variable([1.0])
    >>> opt = tg.optimizers.Adadelta(learning_rate=1.0)
    >>> _ = opt.apply_gradients([(tg.constant([1.0]), w)])
    >>> w.numpy().round(6)  # 1 - sqrt(1e-7) / sqrt(0.05 + 1e-7)
    array([0.998586], dtype=float32)
    """

    _kind = "adadelta"
    _slot_names = ("accumulated_grad", "accumulated_delta_var")

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-7, name="adadelta",
                 **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)
        if not 0.0 <= float(rho) <= 1.0:
            raise ValueError(f"Adadelta: rho must be in [0, 1], got {rho}")
        self.rho, self.epsilon = float(rho), float(epsilon)

    def _hyper(self, t, lr, dtype, xp=math):
        return {"lr": lr, "rho": self.rho, "eps": self.epsilon}

    @staticmethod
    def update(xp, p, g, acc_g, acc_delta, *, lr, rho, eps):
        """One Adadelta step on arrays: returns the new parameter; updates the accumulators
        in place."""
        acc_g *= rho
        acc_g += (1.0 - rho) * (g * g)
        delta = -xp.sqrt(acc_delta + eps) * g / xp.sqrt(acc_g + eps)
        acc_delta *= rho
        acc_delta += (1.0 - rho) * (delta * delta)
        return p + lr * delta
