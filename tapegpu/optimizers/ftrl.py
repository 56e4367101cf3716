"""FTRL-Proximal (McMahan et al.), with Keras' update."""
import math

from .adagrad import InitialAccumulator
from .base import Optimizer


class Ftrl(InitialAccumulator, Optimizer):
    """Follow The Regularized Leader, as Keras computes it (k = -learning_rate_power,
    l2 = l2_regularization_strength + beta / (2 lr)):

        g' = g + 2 * l2_shrinkage_regularization_strength * p
        acc_new = acc + g^2
        linear = linear + g' - (acc_new^k - acc^k) / lr * p
        p = (clip(linear, -l1, l1) - linear) / (acc_new^k / lr + 2 * l2)
        acc = acc_new

    The accumulator starts at `initial_accumulator_value`, the linear term at 0.

    >>> w = tg.Variable([1.0])
    >>> opt = tg.optimizers.Ftrl(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(tg.constant([0.5]), w)])
    >>> w.numpy().round(4)
    array([0.381], dtype=float32)
    """

    _kind = "ftrl"
    _slot_names = ("accumulator", "linear")

    def __init__(self, learning_rate=0.001, learning_rate_power=-0.5,
                 initial_accumulator_value=0.1, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, l2_shrinkage_regularization_strength=0.0,
                 beta=0.0, name="ftrl", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)
        for label, value in (("initial_accumulator_value", initial_accumulator_value),
                             ("l1_regularization_strength", l1_regularization_strength),
                             ("l2_regularization_strength", l2_regularization_strength),
                             ("l2_shrinkage_regularization_strength",
                              l2_shrinkage_regularization_strength)):
            if not float(value) >= 0.0:
                raise ValueError(f"Ftrl: `{label}` needs to be positive or zero, got {value}")
        if not float(learning_rate_power) <= 0.0:
            raise ValueError(f"Ftrl: `learning_rate_power` needs to be negative or zero, got "
                             f"{learning_rate_power}")
        self.learning_rate_power = float(learning_rate_power)
        self.initial_accumulator_value = float(initial_accumulator_value)
        self.l1_regularization_strength = float(l1_regularization_strength)
        self.l2_regularization_strength = float(l2_regularization_strength)
        self.l2_shrinkage_regularization_strength = float(l2_shrinkage_regularization_strength)
        self.beta = float(beta)

    def _hyper(self, t, lr, dtype, xp=math):
        return {"lr": lr, "k": -self.learning_rate_power,
                "l1": self.l1_regularization_strength,
                "l2": self.l2_regularization_strength + self.beta / (2.0 * lr),
                "shrink": self.l2_shrinkage_regularization_strength}

    @staticmethod
    def update(xp, p, g, acc, linear, *, lr, k, l1, l2, shrink):
        """One FTRL step on arrays: returns the new parameter; updates the accumulator and
        the linear term in place."""
        new_acc = acc + g * g
        linear += (g + 2.0 * shrink * p) - (new_acc ** k - acc ** k) / lr * p
        quadratic = new_acc ** k / lr + 2.0 * l2
        acc[...] = new_acc
        return (xp.clip(linear, -l1, l1) - linear) / quadratic
