"""Adagrad (Duchi et al.), with Keras' update."""
import math

from .base import Optimizer


class InitialAccumulator:
    """For optimizers whose first slot starts at `initial_accumulator_value` (Adagrad, Ftrl):
    the slot made for a new variable is raised to it."""

    def _slots_for(self, var):
        fresh = var._uid not in self._slots
        slots = super()._slots_for(var)
        if fresh:
            slots[0] += self.initial_accumulator_value
        return slots


class Adagrad(InitialAccumulator, Optimizer):
    """Adagrad, as Keras computes it (the accumulator starts at `initial_accumulator_value`):

        acc = acc + g^2
        p = p - lr * g / sqrt(acc + epsilon)

    >>> w = tg.Variable([1.0])
    >>> opt = tg.optimizers.Adagrad(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(tg.constant([1.0]), w)])
    >>> w.numpy().round(4)  # 1 - 0.1 * 1 / sqrt(0.1 + 1)
    array([0.9047], dtype=float32)
    """

    _kind = "adagrad"
    _slot_names = ("accumulator",)

    def __init__(self, learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-7,
                 name="Adagrad", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)
        if not float(initial_accumulator_value) >= 0.0:
            raise ValueError(f"Adagrad: initial_accumulator_value must be >= 0, got "
                             f"{initial_accumulator_value}")
        self.initial_accumulator_value = float(initial_accumulator_value)
        self.epsilon = float(epsilon)

    def _hyper(self, t, lr, dtype, xp=math):
        return {"lr": lr, "eps": self.epsilon}

    @staticmethod
    def update(xp, p, g, acc, *, lr, eps):
        """One Adagrad step on arrays: returns the new parameter; updates `acc` in place."""
        acc += g * g
        return p - lr * g / xp.sqrt(acc + eps)
