"""Learning-rate schedules: callables of the optimizer step (Keras' `optimizers.schedules`).

The step is the number of updates already applied (0 for the first update). An optimizer also
accepts any plain callable `lr(step) -> float`.

Each schedule here also has a device form, `_on_device(xp, step)`: the same float64 formula on
`step`, a 0-d float64 array of the device (`xp` its array module), by device ops, which a
CUDA graph captures (an optimizer's update in a captured `tg.function`, see
tapegpu/optimizers/captured.py): the graph computes each step's rate from the device's step
count. A plain callable, or a subclass that defines `__call__` without `_on_device`, runs on the
host only (such a step is not captured).
"""
import math


class LearningRateSchedule:
    """Base class: `__call__(step) -> learning rate` (a Python float)."""

    def __call__(self, step):
        raise NotImplementedError

    def _device_refusal(self):
        """Why `_on_device` cannot compute this schedule, or None."""
        return None


class _RateDecay(LearningRateSchedule):
    """A decay by `decay_rate` over `step / decay_steps` (floored with `staircase`)."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False):
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps, self.decay_rate = float(decay_steps), float(decay_rate)
        self.staircase = bool(staircase)

    def _progress(self, step):
        p = float(step) / self.decay_steps
        return math.floor(p) if self.staircase else p

    def _progress_on_device(self, xp, step):
        p = step / self.decay_steps
        return xp.floor(p) if self.staircase else p


class ExponentialDecay(_RateDecay):
    """`initial_learning_rate * decay_rate ** (step / decay_steps)` (floored with `staircase`).

    >>> s = tg.optimizers.schedules.ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5)
    >>> s(0), s(10), round(s(5), 4)
    (0.1, 0.05, 0.0707)
    """

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False):
        if decay_steps <= 0:
            raise ValueError(f"ExponentialDecay: decay_steps must be positive, got {decay_steps}")
        super().__init__(initial_learning_rate, decay_steps, decay_rate, staircase)

    def __call__(self, step):
        return self.initial_learning_rate * self.decay_rate ** self._progress(step)

    def _on_device(self, xp, step):
        return self.initial_learning_rate * self.decay_rate ** self._progress_on_device(xp, step)


class InverseTimeDecay(_RateDecay):
    """`initial_learning_rate / (1 + decay_rate * step / decay_steps)`.

    >>> tg.optimizers.schedules.InverseTimeDecay(1.0, 1, 1.0)(3)
    0.25
    """

    def __call__(self, step):
        return self.initial_learning_rate / (1.0 + self.decay_rate * self._progress(step))

    def _on_device(self, xp, step):
        return self.initial_learning_rate / (1.0 + self.decay_rate *
                                             self._progress_on_device(xp, step))


class PiecewiseConstantDecay(LearningRateSchedule):
    """`values[i]` while `step <= boundaries[i]` (Keras' convention), `values[-1]` after.

    >>> s = tg.optimizers.schedules.PiecewiseConstantDecay([10, 20], [1.0, 0.5, 0.1])
    >>> s(0), s(10), s(11), s(25)
    (1.0, 1.0, 0.5, 0.1)
    """

    def __init__(self, boundaries, values):
        if len(values) != len(boundaries) + 1:
            raise ValueError(f"PiecewiseConstantDecay: needs len(values) == len(boundaries) + 1, "
                             f"got {len(values)} values and {len(boundaries)} boundaries")
        self.boundaries = [float(b) for b in boundaries]
        self.values = [float(v) for v in values]

    def __call__(self, step):
        for b, v in zip(self.boundaries, self.values):
            if step <= b:
                return v
        return self.values[-1]

    def _on_device(self, xp, step):
        out = step * 0.0 + self.values[-1]  # (step >= 0: exactly values[-1])
        for b, v in zip(self.boundaries[::-1], self.values[-2::-1]):
            out = xp.where(step <= b, v, out)  # the first boundary at or past the step wins
        return out


class CosineDecay(LearningRateSchedule):
    """Cosine decay from `initial_learning_rate` to `alpha * initial_learning_rate` over
    `decay_steps`.

    >>> round(tg.optimizers.schedules.CosineDecay(1.0, 10)(5), 4)
    0.5
    """

    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0):
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps, self.alpha = float(decay_steps), float(alpha)

    def __call__(self, step):
        p = min(float(step), self.decay_steps) / self.decay_steps
        cosine = 0.5 * (1.0 + math.cos(math.pi * p))
        return self.initial_learning_rate * ((1 - self.alpha) * cosine + self.alpha)

    def _on_device(self, xp, step):
        p = xp.minimum(step, self.decay_steps) / self.decay_steps
        cosine = 0.5 * (1.0 + xp.cos(math.pi * p))
        return self.initial_learning_rate * ((1 - self.alpha) * cosine + self.alpha)


class PolynomialDecay(LearningRateSchedule):
    """A polynomial decay from `initial_learning_rate` to `end_learning_rate` over
    `decay_steps` (Keras):

        p = min(step, decay_steps) / decay_steps
        lr = (initial_learning_rate - end_learning_rate) * (1 - p) ** power + end_learning_rate

    With `cycle=True` the decay restarts: `decay_steps` is multiplied by
    `ceil(step / decay_steps)` (1 at step 0) instead of capping the step.

    >>> s = tg.optimizers.schedules.PolynomialDecay(1.0, 10, end_learning_rate=0.0, power=2.0)
    >>> s(0), s(5), s(20)
    (1.0, 0.25, 0.0)
    """

    def __init__(self, initial_learning_rate, decay_steps, end_learning_rate=0.0001,
                 power=1.0, cycle=False, name="PolynomialDecay"):
        if decay_steps <= 0:
            raise ValueError(f"PolynomialDecay: argument `decay_steps` must be > 0, got "
                             f"decay_steps={decay_steps}")
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps = float(decay_steps)
        self.end_learning_rate, self.power = float(end_learning_rate), float(power)
        self.cycle, self.name = bool(cycle), name

    def __call__(self, step):
        step, decay_steps = float(step), self.decay_steps
        if self.cycle:
            decay_steps *= 1.0 if step == 0 else math.ceil(step / decay_steps)
        else:
            step = min(step, decay_steps)
        span = self.initial_learning_rate - self.end_learning_rate
        return span * (1.0 - step / decay_steps) ** self.power + self.end_learning_rate

    def _on_device(self, xp, step):
        decay_steps = self.decay_steps
        if self.cycle:
            decay_steps = decay_steps * xp.where(step == 0, 1.0, xp.ceil(step / decay_steps))
        else:
            step = xp.minimum(step, decay_steps)
        span = self.initial_learning_rate - self.end_learning_rate
        return span * (1.0 - step / decay_steps) ** self.power + self.end_learning_rate


class CosineDecayRestarts(LearningRateSchedule):
    """Cosine decay with warm restarts (SGDR, Loshchilov & Hutter), as Keras: the first
    period lasts `first_decay_steps`, each next one `t_mul` times longer, and each restart
    begins at `m_mul` times the previous peak; within a period i the rate is

        initial_learning_rate * ((1 - alpha) * m_mul**i * 0.5 * (1 + cos(pi * f)) + alpha)

    with f the fraction of the period completed.

    >>> s = tg.optimizers.schedules.CosineDecayRestarts(1.0, 10, t_mul=2.0, m_mul=0.5)
    >>> s(0), round(s(5), 4), s(10), round(s(20), 4)
    (1.0, 0.5, 0.5, 0.25)
    """

    def __init__(self, initial_learning_rate, first_decay_steps, t_mul=2.0, m_mul=1.0,
                 alpha=0.0, name="SGDRDecay"):
        if first_decay_steps <= 0:
            raise ValueError(f"CosineDecayRestarts: argument `first_decay_steps` must be > 0, "
                             f"got first_decay_steps={first_decay_steps}")
        self.initial_learning_rate = float(initial_learning_rate)
        self.first_decay_steps = float(first_decay_steps)
        self.t_mul, self.m_mul = float(t_mul), float(m_mul)
        self.alpha, self.name = float(alpha), name

    def __call__(self, step):
        fraction = float(step) / self.first_decay_steps
        if self.t_mul == 1.0:
            restart = math.floor(fraction)
            fraction -= restart
        else:  # periods 1, t, t^2, ...: period i starts at (1 - t^i) / (1 - t)
            restart = math.floor(math.log(1.0 - fraction * (1.0 - self.t_mul)) /
                                 math.log(self.t_mul))
            while (1.0 - self.t_mul ** (restart + 1)) / (1.0 - self.t_mul) <= fraction:
                restart += 1  # a boundary the rounded logarithm put one period early
            start = (1.0 - self.t_mul ** restart) / (1.0 - self.t_mul)
            fraction = (fraction - start) / self.t_mul ** restart
        cosine = 0.5 * self.m_mul ** restart * (1.0 + math.cos(math.pi * fraction))
        return self.initial_learning_rate * ((1.0 - self.alpha) * cosine + self.alpha)

    def _device_refusal(self):
        if self.t_mul != 1.0:
            return f"has no device form with t_mul={self.t_mul} (its period's search corrects a " \
                   "rounded logarithm by a host loop); t_mul=1.0 has one"
        return None

    def _on_device(self, xp, step):
        fraction = step / self.first_decay_steps
        restart = xp.floor(fraction)
        fraction = fraction - restart
        cosine = 0.5 * self.m_mul ** restart * (1.0 + xp.cos(math.pi * fraction))
        return self.initial_learning_rate * ((1.0 - self.alpha) * cosine + self.alpha)
