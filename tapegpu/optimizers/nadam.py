"""Nadam (Dozat): Adam with Nesterov momentum and a momentum schedule, with Keras' update."""
import math

from .adamax import _check_betas
from .base import Optimizer


class Nadam(Optimizer):
    """Nadam, as Keras computes it at step t = 1, 2, ... (mu_t = beta_1 (1 - 0.5 0.96^t),
    and U_t = mu_1 ... mu_t):

        m = m + (g - m) * (1 - beta_1)
        v = v + (g^2 - v) * (1 - beta_2)
        m_hat = mu_{t+1} m / (1 - U_{t+1}) + (1 - mu_t) g / (1 - U_t)
        p = p - lr * m_hat / (sqrt(v / (1 - beta_2^t)) + epsilon)

    >>> w = tg.Variable([1.0])
    >>> opt = tg.optimizers.Nadam(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(tg.constant([0.5]), w)])
    >>> w.numpy().round(4)  # Nesterov's look-ahead: a step larger than lr
    array([0.8937], dtype=float32)
    """

    _kind = "nadam"
    _slot_names = ("momentum", "velocity")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 name="nadam", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)
        self.beta_1, self.beta_2 = _check_betas("Nadam", beta_1=beta_1, beta_2=beta_2)
        self.epsilon = float(epsilon)

    def _mu(self, t):
        return self.beta_1 * (1.0 - 0.5 * 0.96 ** t)

    def _graph_refusal(self):
        return "Nadam's momentum schedule is a product over every step so far, computed by a " \
               "host loop at each call"

    def _hyper(self, t, lr, dtype, xp=math):
        u_t = 1.0
        for i in range(1, t + 1):  # the product of the momentum schedule up to step t
            u_t *= self._mu(i)
        mu_t, mu_next = self._mu(t), self._mu(t + 1)
        return {"lr": lr, "c_m": mu_next / (1.0 - u_t * mu_next),
                "c_g": (1.0 - mu_t) / (1.0 - u_t), "b1": self.beta_1, "b2": self.beta_2,
                "v_scale": 1.0 / (1.0 - self.beta_2 ** t), "eps": self.epsilon}

    @staticmethod
    def update(xp, p, g, m, v, *, lr, c_m, c_g, b1, b2, v_scale, eps):
        """One Nadam step on arrays: returns the new parameter; updates m, v in place."""
        m += (g - m) * (1.0 - b1)
        v += (g * g - v) * (1.0 - b2)
        m_hat = c_m * m + c_g * g
        return p - lr * m_hat / (xp.sqrt(v * v_scale) + eps)
