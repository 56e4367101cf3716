"""`LossScaleOptimizer`: Keras 3's dynamic loss scaling around another optimizer.

float16 gradients underflow to zero below about 6e-8 (and lose precision below 6e-5): the loss
is multiplied by a large scale before differentiation (`scale_loss`), so the gradients are
large enough, and divided by it again before the update. The scale adapts: a step whose
gradients hold an inf or NaN (the scale was too large) is skipped and halves the scale; after
`dynamic_growth_steps` finite steps in a row it doubles. As Keras 3:

    opt = tg.keras.optimizers.LossScaleOptimizer(tg.keras.optimizers.SGD(0.1))
    with tg.GradientTape() as tape:
        loss = ...
        scaled_loss = opt.scale_loss(loss)
    grads = tape.gradient(scaled_loss, variables)   # scaled gradients
    opt.apply_gradients(zip(grads, variables))      # unscales, checks, updates or skips

TensorFlow's Keras 2 form (`get_scaled_loss`, then `get_unscaled_gradients`, whose gradients
`apply_gradients` then takes as unscaled) works too. `fit` scales the loss itself (every
optimizer has `scale_loss`; only this one changes the loss).

The check of the gradients is one read of a count from the device per step; the scale lives in
a variable on the loss's device (`dynamic_scale`), so a `tg.function` step reads its current
value at every call.
"""
import math

import numpy as np

from ..core.tensor import Tensor, Variable, _thread
from .base import Optimizer


class LossScaleOptimizer(Optimizer):
    """Wraps `inner_optimizer` with dynamic loss scaling (Keras 3's
    `keras.optimizers.LossScaleOptimizer(inner_optimizer, initial_scale=2.0**15,
    dynamic_growth_steps=2000)`).

    >>> opt = tg.keras.optimizers.LossScaleOptimizer(tg.keras.optimizers.SGD(0.5))
    >>> w = tg.Variable([1.0, 2.0])
    >>> with tg.GradientTape() as tape:
    ...     loss = opt.scale_loss(tg.reduce_sum(w * w))
    >>> _ = opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
    >>> w.numpy().tolist(), float(opt.dynamic_scale)
    ([0.0, 0.0], 32768.0)
    """

    def __init__(self, inner_optimizer, initial_scale=2.0 ** 15, dynamic_growth_steps=2000,
                 name=None, **kwargs):
        if not isinstance(inner_optimizer, Optimizer) or \
                isinstance(inner_optimizer, LossScaleOptimizer):
            raise TypeError(f"LossScaleOptimizer: inner_optimizer must be a (non loss scale) "
                            f"keras.optimizers.Optimizer, got {inner_optimizer!r}")
        try:
            scale = float(initial_scale)
        except (TypeError, ValueError):
            scale = float("nan")
        if not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"LossScaleOptimizer: initial_scale must be a finite number > 0, "
                             f"got {initial_scale!r}")
        if isinstance(dynamic_growth_steps, bool) or not isinstance(dynamic_growth_steps, int) \
                or dynamic_growth_steps < 1:
            raise ValueError(f"LossScaleOptimizer: dynamic_growth_steps must be an int >= 1, "
                             f"got {dynamic_growth_steps!r}")
        unknown = set(kwargs) - {"clipnorm", "clipvalue", "global_clipnorm"}
        if unknown:
            raise TypeError(f"LossScaleOptimizer: unexpected arguments {sorted(unknown)}")
        if any(kwargs.get(k) is not None for k in kwargs):
            raise ValueError("LossScaleOptimizer: clipnorm, clipvalue and global_clipnorm are "
                             "not supported here; give them to the inner optimizer")
        super().__init__(learning_rate=0.0, name=name or "loss_scale_optimizer")
        self.inner_optimizer = inner_optimizer
        self.initial_scale = scale
        self.dynamic_growth_steps = dynamic_growth_steps
        # the host's copies (the step's check reads the gradients' finiteness anyway); the
        # variables mirror them for a tg.function step and for the user
        self._scale = scale
        self._good_steps = 0
        self.step_counter = Variable(np.int64(0), trainable=False,
                                     name=f"{self.name}/step_counter")
        # a float32 variable, moved to the loss's device if it is elsewhere (scale_loss)
        self._dynamic_scale = Variable(np.float32(scale), trainable=False,
                                       name=f"{self.name}/dynamic_scale")
        self._unscaled = False  # whether get_unscaled_gradients ran since the last update

    # -- state ----------------------------------------------------------------------------------
    @property
    def dynamic_scale(self):
        """The current loss scale (a float32 variable; Keras 3's `dynamic_scale`)."""
        return self._dynamic_scale

    @property
    def loss_scale(self):
        """The current loss scale as a float (TensorFlow's Keras 2 name)."""
        return self._scale

    @property
    def iterations(self):
        """The inner optimizer's update count: a skipped step does not count (Keras 3)."""
        return self.inner_optimizer.iterations

    @property
    def learning_rate(self):
        return self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, value):
        if getattr(self, "inner_optimizer", None) is None:  # Optimizer.__init__'s placeholder
            self._learning_rate = value
            return
        self.inner_optimizer.learning_rate = value

    def variables(self):
        """The inner optimizer's state, then the step counter and the scale."""
        return self.inner_optimizer.variables() + [self.step_counter, self.dynamic_scale]

    def get_slot(self, var, name):
        return self.inner_optimizer.get_slot(var, name)

    def get_config(self):
        return {"name": self.name, "initial_scale": self.initial_scale,
                "dynamic_growth_steps": self.dynamic_growth_steps,
                "inner_optimizer": type(self.inner_optimizer).__name__}

    # -- scaling --------------------------------------------------------------------------------
    def _scale_on(self, like):
        """The scale variable on `like`'s device, in `like`'s dtype (a cast where they
        differ: the float32 scale of a float16 loss)."""
        from ..ops import cast
        v = self.dynamic_scale
        if v._value._dev is not like._dev:  # made where the loss is, once
            self._dynamic_scale = v = Variable(Tensor(like._dev.asarray(np.float32(self._scale)),
                                                      like._dev), trainable=False,
                                               name=f"{self.name}/dynamic_scale")
        return v if like._data.dtype == np.float32 else cast(v, like._data.dtype)

    def scale_loss(self, loss):
        """`loss` times the current scale (Keras 3's `scale_loss`): differentiate this one."""
        loss = _as_tensor(loss, "scale_loss")
        return loss * self._scale_on(loss)

    def get_scaled_loss(self, loss):
        """`scale_loss` under TensorFlow's Keras 2 name."""
        return self.scale_loss(loss)

    def get_unscaled_gradients(self, grads):
        """The gradients divided by the scale (TensorFlow's Keras 2 form): `apply_gradients`
        then takes its gradients as unscaled. None stays None."""
        self._unscaled = True
        out = []
        for g in grads:
            if g is None:
                out.append(None)
                continue
            g = _as_tensor(g, "get_unscaled_gradients")
            out.append(g / self._scale_on(g))
        return out

    # -- updates --------------------------------------------------------------------------------
    def apply_gradients(self, grads_and_vars):
        """Unscales the gradients (unless `get_unscaled_gradients` already did), and applies
        them with the inner optimizer when all are finite; otherwise skips the step and halves
        the scale. Returns `iterations`."""
        pairs = list(grads_and_vars)
        for _, v in pairs:
            self._check_variable(v)
        pairs = [(g, v) for g, v in pairs if g is not None]
        grads = [self._gradient_tensor(g, v) for g, v in pairs]
        variables = [v for _, v in pairs]
        unscaled, self._unscaled = self._unscaled, False

        def update(arrays, variables, unscaled=unscaled):
            return self._apply_scaled(arrays, variables, unscaled)
        for tracer in _thread.tracers:  # inside tg.function: one graph node replays the update
            tracer.on_update(update, grads, variables)
        return update([g._data for g in grads], variables)

    def _apply_scaled(self, arrays, variables, unscaled):
        if not arrays:
            return self.iterations
        xp = variables[0]._value._dev.xp
        if not unscaled:
            arrays = [g * g.dtype.type(1.0 / self._scale) for g in arrays]
        bad = sum(xp.count_nonzero(~xp.isfinite(g)) for g in arrays)
        if int(bad) == 0:  # one read from the device per step
            self.inner_optimizer._apply_arrays(arrays, variables)
            self._good_steps += 1
            if self._good_steps >= self.dynamic_growth_steps:
                self._scale *= 2.0
                self._good_steps = 0
        else:  # skipped: the scale was too large
            self._scale /= 2.0
            self._good_steps = 0
        self._write_state()
        return self.iterations

    def _write_state(self):
        s = self.dynamic_scale
        s._assign_array(s._value._dev.asarray(np.float32(self._scale)))
        c = self.step_counter
        c._assign_array(c._value._dev.asarray(np.int64(self._good_steps)))

    def __repr__(self):
        return f"<LossScaleOptimizer inner={self.inner_optimizer!r} scale={self._scale}>"


def _as_tensor(x, who):
    from ..core.tensor import convert_to_tensor
    x = x._read() if isinstance(x, Variable) else x
    x = x if isinstance(x, Tensor) else convert_to_tensor(x)
    if x._data.dtype.kind not in "fV":
        raise TypeError(f"LossScaleOptimizer.{who}: expected a floating tensor, got "
                        f"{x.dtype.name} of shape {x.shape}")
    return x
