"""RMSprop (Hinton), with Keras' update."""
import math

from .base import Optimizer


class RMSprop(Optimizer):
    """RMSprop, as Keras computes it:

        s = rho * s + (1 - rho) * g^2
        a = rho * a + (1 - rho) * g                 (centered only)
        d = s - a^2 + epsilon  (centered)  or  s + epsilon
        step = lr * g / sqrt(d)
        mom = momentum * mom + step;  p = p - mom   (momentum > 0)
        p = p - step                                (momentum == 0)

    >>> w = tg.Variable([1.0])
    >>> opt = tg.optimizers.RMSprop(learning_rate=0.01)
    >>> _ = opt.apply_gradients([(tg.constant([2.0]), w)])
    >>> w.numpy().round(4)  # 1 - 0.01 * 2 / sqrt(0.1 * 4)
    array([0.9684], dtype=float32)
    """

    _kind = "rmsprop"

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7,
                 centered=False, name="RMSprop", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)
        if not 0.0 <= float(rho) < 1.0:
            raise ValueError(f"RMSprop: rho must be in [0, 1), got {rho}")
        self.rho, self.momentum = float(rho), float(momentum)
        self.epsilon, self.centered = float(epsilon), bool(centered)
        self._slot_names = ("rms", "momentum", "mg")

    def _needs_slot(self, name):
        return {"rms": True, "momentum": self.momentum > 0, "mg": self.centered}[name]

    def _hyper(self, t, lr, dtype, xp=math):
        return {"lr": lr, "rho": self.rho, "momentum": self.momentum, "eps": self.epsilon}

    @staticmethod
    def update(xp, p, g, rms, mom, mg, *, lr, rho, momentum, eps):
        """One RMSprop step on arrays: returns the new parameter; updates the slots in place."""
        rms *= rho
        rms += (1.0 - rho) * (g * g)
        if mg is not None:
            mg *= rho
            mg += (1.0 - rho) * g
            denom = rms - mg * mg + eps
        else:
            denom = rms + eps
        step = lr * g / xp.sqrt(denom)
        if mom is not None:
            mom *= momentum
            mom += step
            return p - mom
        return p - step
