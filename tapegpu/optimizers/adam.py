"""Adam (Kingma & Ba) with Keras' update, including the bias correction folded into the step."""
import math

from .base import Optimizer, as_scalar


class Adam(Optimizer):
    """Adam, as Keras computes it at step t = 1, 2, ...:

        lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
        m = m + (g - m) * (1 - beta_1)
        v = v + (g^2 - v) * (1 - beta_2)
        p = p - lr_t * m / (sqrt(v) + epsilon)

    With `amsgrad=True`, `v_hat = max(v_hat, v)` replaces `v` in the denominator.

    >>> w = tg.Variable([1.0])
    >>> opt = tg.optimizers.Adam(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(tg.constant([0.5]), w)])
    >>> w.numpy().round(4)  # the first step moves by about lr, whatever the gradient's scale
    array([0.9], dtype=float32)
    """

    _kind = "adam"
    _slot_names = ("m", "v")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, name="Adam", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)
        for label, b in (("beta_1", beta_1), ("beta_2", beta_2)):
            if not 0.0 <= float(b) < 1.0:
                raise ValueError(f"Adam: {label} must be in [0, 1), got {b}")
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
        self.epsilon = float(epsilon)
        self.amsgrad = bool(amsgrad)
        if self.amsgrad:
            self._slot_names = ("m", "v", "vhat")

    def _hyper(self, t, lr, dtype, xp=math):
        lr_t = lr * xp.sqrt(1.0 - self.beta_2 ** t) / (1.0 - self.beta_1 ** t)
        return {"lr_t": lr_t, "b1": self.beta_1, "b2": self.beta_2, "eps": self.epsilon}

    def _fusable(self, hyper):
        return not self.amsgrad  # the fused kernel has no v_hat slot

    @staticmethod
    def update(xp, p, g, m, v, vhat=None, *, lr_t, b1, b2, eps):
        """One Adam step on arrays: returns the new parameter; updates m, v (, vhat) in place."""
        m += (g - m) * (1.0 - b1)
        v += (g * g - v) * (1.0 - b2)
        if vhat is not None:
            xp.maximum(vhat, v, out=vhat)
            v = vhat
        return p - lr_t * m / (xp.sqrt(v) + eps)


class AdamW(Adam):
    """Adam with decoupled weight decay, as Keras: before each Adam step,

        p = p - p * weight_decay * lr

    (the decay is not part of the gradient, so the moments never see it). Variables whose name
    contains a string of `exclude_from_weight_decay` are not decayed.

    >>> w = tg.Variable([1.0])
    >>> opt = tg.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5)
    >>> _ = opt.apply_gradients([(tg.constant([0.0]), w)])
    >>> w.numpy().round(4)  # 1 - 1 * 0.5 * 0.1, and Adam's step of a zero gradient is 0
    array([0.95], dtype=float32)
    """

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-7, amsgrad=False, exclude_from_weight_decay=None, name="AdamW",
                 **kwargs):
        super().__init__(learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                         amsgrad=amsgrad, name=name, **kwargs)
        if weight_decay is None or not float(weight_decay) >= 0.0:
            raise ValueError(f"AdamW: weight_decay must be a number >= 0, got {weight_decay!r}")
        self.weight_decay = float(weight_decay)
        self.exclude_from_weight_decay = list(exclude_from_weight_decay or ())

    def _update_one(self, var, p, g, lr, hyper_of):
        name = var.name or ""
        if self.weight_decay and not any(s in name for s in self.exclude_from_weight_decay):
            # (a number here; in a captured graph a 0-d device array cast to p's dtype, as a
            # number is when it meets the array)
            p = p - p * as_scalar(self.weight_decay * lr, p.dtype)
        return super()._update_one(var, p, g, lr, hyper_of)
