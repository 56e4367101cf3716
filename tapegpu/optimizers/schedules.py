"""Learning-rate schedules: callables of the optimizer step (Keras' `optimizers.schedules`).

The step is the number of updates already applied (0 for the first update). An optimizer also
accepts any plain callable `lr(step) -> float`.
"""
import math


class LearningRateSchedule:
    """Base class: `__call__(step) -> learning rate` (a Python float)."""

    def __call__(self, step):
        raise NotImplementedError


class _RateDecay(LearningRateSchedule):
    """A decay by `decay_rate` over `step / decay_steps` (floored with `staircase`)."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False):
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps, self.decay_rate = float(decay_steps), float(decay_rate)
        self.staircase = bool(staircase)

    def _progress(self, step):
        p = float(step) / self.decay_steps
        return math.floor(p) if self.staircase else p


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


class InverseTimeDecay(_RateDecay):
    """`initial_learning_rate / (1 + decay_rate * step / decay_steps)`.

    >>> tg.optimizers.schedules.InverseTimeDecay(1.0, 1, 1.0)(3)
    0.25
    """

    def __call__(self, step):
        return self.initial_learning_rate / (1.0 + self.decay_rate * self._progress(step))


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
