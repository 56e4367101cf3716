"""An optimizer's `apply_gradients` inside a CUDA graph (tapegpu/function/capture.py).

A graph replays its kernels with the arguments they were captured with, so the per-step terms
of an update (the learning rate of a schedule, Adam's bias correction, the step count) cannot
be Python numbers computed on the host at each call, as the eager update (`_apply_arrays`)
computes them. In a graph they are computed on the device, from device memory:

* the step count is `optimizer.iterations`, a device variable: the graph reads it, computes
  `step = iterations` (float64) and `t = step + 1`, and writes `iterations + 1`;
* the learning rate is a 0-d float64 array: a number's value uploaded before the capture (and
  written again before a launch when `optimizer.learning_rate` was set to another number), a
  tensor's or a variable's array, or a schedule of tg.optimizers.schedules computed from
  `step` by device ops (`LearningRateSchedule._on_device`);
* each optimizer's `_hyper(t, lr, dtype, xp)` runs on those arrays (Adam's `lr_t`, Adamax's),
  and each term that depends on them is cast to the variable's dtype: 0-d device arrays, read
  by the fused kernels through a pointer (`sgd_update_devlr`, `adam_update_devlr`, their
  multi-tensor forms in cuda_kernels/optimizers.cu) and used by the `xp` rules as the number
  is in the eager update (a Python float meets a float32 array as a float32).

The rules are the eager update's own functions (`_update_variables`, the kernels, `update`),
so a captured step computes what the eager step computes: the float64 formulas are the same
operations (on `cuda_emu` and the CuPy stand-in numpy's, which call the C library as Python's
`math` does; on a GPU CUDA's `pow`, `exp`, `cos`, within 2 ulp of float64, so a rate may differ
from the host's in its last float64 bit, what a float32 rate almost never shows), and each
per-element step is the same function of the same float32 values.

Refused (`refusal`): a learning rate that is a Python callable (not a schedule of
tg.optimizers.schedules: its code runs on the host), a schedule without a device form
(`CosineDecayRestarts` with `t_mul != 1`, a subclass with its own `__call__`), an optimizer
whose step terms are host loops (Nadam), `iterations`, a tensor learning rate or a variable on
another device than the step's, and a variable updated twice in one call.
"""
import numbers
import operator

import numpy as np

from ..core.tensor import Tensor, Variable
from .base import Optimizer, _Arrays, as_scalar
from .schedules import LearningRateSchedule


def is_update(fn):
    """Whether the update node `fn` of a traced graph is an optimizer's apply_gradients."""
    return getattr(fn, "__func__", None) is Optimizer._apply_arrays and \
        isinstance(fn.__self__, Optimizer)


def _rate_device(lr):
    return lr._value._dev if isinstance(lr, Variable) else lr._dev


def refusal(opt, variables, dev):
    """Why `opt`'s update of `variables` cannot run inside a graph on `dev` (a sentence naming
    the optimizer), or None."""
    name = f"{opt.name} ({type(opt).__name__}).apply_gradients"
    reason = opt._graph_refusal()
    if reason is not None:
        return f"{name}: {reason}"
    if len({v._uid for v in variables}) < len(variables):
        return f"{name} updates a variable twice in one call (its updates run one after the " \
               "other on the host's values)"
    for v in variables:
        if v._value._dev is not dev:
            return f"{name}: variable {v.name!r} is on {v._value._dev.name}, the step on " \
                   f"{dev.name}"
    it = opt._iterations
    if it._value._dev is not dev:
        return f"{name}: its step count `iterations` is on {it._value._dev.name}, the step on " \
               f"{dev.name} (create the optimizer under the step's tg.device)"
    lr = opt._learning_rate
    if isinstance(lr, (Tensor, Variable)):
        value = lr._value if isinstance(lr, Variable) else lr
        if _rate_device(lr) is not dev or value._data.shape != ():
            return f"{name}: its learning rate is a tensor of shape {list(value._data.shape)} " \
                   f"on {_rate_device(lr).name}; a graph reads a scalar on the step's device " \
                   f"{dev.name}"
        return None
    if isinstance(lr, numbers.Real):
        return None
    if isinstance(lr, LearningRateSchedule):
        reason = _schedule_refusal(lr)
        return None if reason is None else f"{name}: its learning-rate schedule {lr!r} " \
                                           f"{reason}"
    return f"{name}: its learning rate {_callable_name(lr)} is a Python callable of the step, " \
           "run on the host at every call; a graph computes a number or a schedule of " \
           "tg.optimizers.schedules on the device (or use jit_compile=None)"


def _callable_name(fn):
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return repr(fn) if name is None else f"{name!r} ({fn!r})"


def _schedule_refusal(schedule):
    """None where `schedule` computes on the device, else why not."""
    for cls in type(schedule).__mro__:  # the class that defines __call__ must define the device
        if "_on_device" in cls.__dict__:  # form too (a subclass may compute something else)
            break
        if "__call__" in cls.__dict__:
            return f"has no device form (its class {cls.__name__} defines __call__ only: " \
                   "Python code run on the host at every call)"
    else:
        return "has no device form"
    return schedule._device_refusal()


def _plain(v):
    """Whether `v` is a setting a graph holds as a constant: a number, a string, a flag, None,
    or a list or tuple of numbers."""
    if isinstance(v, (list, tuple)):
        return all(isinstance(x, (bool, numbers.Number, str)) for x in v)
    return isinstance(v, (bool, numbers.Number, str, type(None)))


class _Settings:
    """The plain settings of an object when a graph was captured (`same()`: whether they are
    still those: an item getter on its `__dict__`, cheap enough for every call)."""

    def __init__(self, obj, skip=()):
        self.d = getattr(obj, "__dict__", {})
        names = [k for k, v in self.d.items() if k not in skip and _plain(v)]
        self.count = len(self.d)
        if names:
            g = operator.itemgetter(*names)
            self.get = g if len(names) > 1 else (lambda d: (g(d),))
            # lists copied: compared by value, so a list changed in place is seen
            self.values = tuple(list(v) if isinstance(v, list) else v for v in self.get(self.d))
        else:
            self.get, self.values = (lambda d: ()), ()

    def same(self):
        try:
            return len(self.d) == self.count and self.get(self.d) == self.values
        except KeyError:  # a setting deleted
            return False


class GraphUpdate:
    """One optimizer update node of a captured graph: `fn` on the graph's buffers, and the
    host's side of each launch (`fits`, `before_launch`, `after_launch`).

    Made before the capture begins (it creates the slots and uploads a number learning rate:
    work a capture may not do). `reads` are the variables whose arrays `fn` takes after the
    gradients (the updated ones, `iterations`, a variable learning rate), `inputs()` those
    arrays and the rate's buffer; `fn` returns the variables' new arrays and `iterations + 1`
    (`writes`), and updates the slots in place."""

    def __init__(self, opt, variables, dev):
        self.opt, self.variables, self.dev = opt, list(variables), dev
        self.slots = [opt._slots_for(v) for v in self.variables]  # the optimizer's lists
        self.buffers = [list(s) for s in self.slots]  # the arrays the graph updates
        self.settings = _Settings(opt, skip=("_step", "_learning_rate", "_lr_read"))
        lr = opt._learning_rate
        self.rate = lr  # (a number: any number is read from the rate's buffer)
        self.rate_settings = None if isinstance(lr, numbers.Real) else _Settings(lr)
        self.rate_var = lr if isinstance(lr, Variable) else None
        self.rate_value = self.rate_buf = None
        if isinstance(lr, numbers.Real):
            self.rate_value = float(lr)
            self.rate_buf = dev.asarray(self.rate_value, np.float64)
        elif isinstance(lr, Tensor):
            self.rate_buf = lr._data
        self.schedule = lr if isinstance(lr, LearningRateSchedule) else None
        self.reads = self.variables + [opt._iterations] + \
            ([self.rate_var] if self.rate_var is not None else [])
        self.writes = self.variables + [opt._iterations]
        self._saved = None

    def inputs(self):
        arrays = [v._value._data for v in self.reads]
        return arrays + ([self.rate_buf] if self.rate_buf is not None else [])

    def fn(self, *arrays):
        """(new variable arrays..., iterations + 1) from (gradients..., variable arrays...,
        iterations[, learning rate]): device work only, on the arrays it is given."""
        opt, xp, n = self.opt, self.dev.xp, len(self.variables)
        grads, params, it = list(arrays[:n]), arrays[n:2 * n], arrays[2 * n]
        step = it.astype(np.float64)  # updates applied before this one
        if self.schedule is not None:
            lr = self.schedule._on_device(xp, step)
        else:
            lr = arrays[2 * n + 1]
            lr = lr if lr.dtype == np.float64 else lr.astype(np.float64)
        t = step + 1.0
        cache = {}

        def hyper_of(dtype):
            dtype = np.dtype(dtype)
            h = cache.get(dtype)
            if h is None:
                h = cache[dtype] = {k: as_scalar(v, dtype)
                                    for k, v in opt._hyper(t, lr, dtype, xp).items()}
            return h
        grads = opt._clip(grads, self.variables)
        values = _Arrays(self.variables, params)
        opt._update_variables(grads, self.variables, lr, hyper_of, values)
        return tuple(values.get(v) for v in self.variables) + (xp.asarray(it + 1),)

    def fits(self):
        """Whether the graph still computes this optimizer's update (its settings, its
        learning rate's object and settings, or any number): else the step is captured
        again."""
        lr = self.opt._learning_rate
        if self.rate_settings is None:
            if not isinstance(lr, numbers.Real):
                return False
        elif lr is not self.rate or not self.rate_settings.same():
            return False
        return self.settings.same()

    def before_launch(self, copy):
        """Puts the host's state where the graph reads it: slots the optimizer was given
        since (a checkpoint's restore) are copied into the graph's (`copy(dst, src)`, a device
        copy), and a number learning rate set since is written into the rate's buffer.
        Returns the number of copies."""
        copies = 0
        for owned, graph in zip(self.slots, self.buffers):
            for i, (a, b) in enumerate(zip(owned, graph)):
                if a is not b and b is not None:
                    copy(b, a)
                    owned[i] = b
                    copies += 1
        lr = self.opt._learning_rate
        if self.rate_value is not None and float(lr) != self.rate_value:
            self.rate_value = float(lr)
            _write(self.dev.xp, self.rate_buf, self.rate_value)
            copies += 1
        return copies

    def after_launch(self):
        self.opt._step += 1  # the host's count, as the eager update keeps it

    def snapshot(self):
        """Copies of the slots (the emulator computes while it captures: a capture that fails
        gives them back, `restore`)."""
        xp = self.dev.xp
        self._saved = [[None if a is None else xp.array(a, copy=True) for a in s]
                       for s in self.buffers]

    def forget(self):
        self._saved = None

    def restore(self):
        if self._saved is None:
            return
        for graph, saved in zip(self.buffers, self._saved):
            for a, b in zip(graph, saved):
                if a is not None:
                    a[...] = b
        self._saved = None


def _write(xp, buf, value):
    if xp is np:
        buf[...] = value
    else:
        buf.set(np.asarray(value, np.float64))
