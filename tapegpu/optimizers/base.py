"""The optimizer base class: gradients in, one fused update per variable out.

Each optimizer writes its rule once, as `update(xp, p, g, *slots, **hyper) -> new_p` on raw
arrays of the variable's backend (`xp` is numpy or cupy). The rule returns a NEW parameter
array (assigned with `Variable._assign_array`), so an array that a tape saved is never written;
slot arrays (momentum, first and second moments) belong to the optimizer and are updated in
place. A backend with custom kernels (`dev.kernels`) runs the whole rule as kernel launches:
one for the variables of one device and dtype (up to 8 per launch) where it has a
multi-tensor kernel (`_multi_tensor_updates`), else one per variable (`_fused_update`, None
when no kernel exists). Both kernels compute the same per-element step, so results do not
depend on which ran.
"""
import numbers
import threading
import warnings

import numpy as np

from ..autodiff.tape import GradientTape
from ..backends.kernels import KERNELS
from ..core import nest
from ..core.tensor import Tensor, Variable, _thread, convert_to_tensor
from ..core import dtypes
from ..core.dtypes import float32 as _float32
from .schedules import LearningRateSchedule

# Inside a tg.distribute strategy's replica (strategy.run), the strategy sets `apply` for the
# thread: apply_gradients then reduces the gradients over the replicas before updating, as
# TensorFlow's optimizers do through merge_call (tapegpu/distribute/replicas.py).
in_replica = threading.local()


def _fused_update(kind, var, p, g, slots, hyper):
    """Runs `<kind>_update` of the variable's backend kernels on its array `p`, if there is one.

    The kernel updates a fresh copy of `p` and the slots in place (one launch); the copy is
    returned (it becomes the variable's value). Returns None when the backend has no such
    kernel (the numpy backend) or none for the variable's dtype (e.g. float16), and the caller
    runs the `xp` rule instead, so results never depend on which kernels exist.
    """
    kernels = getattr(var._value._dev, "kernels", None)
    fn = getattr(kernels, f"{kind}_update", None) if kernels is not None else None
    if fn is None or (f"{kind}_update", p.dtype.name) not in KERNELS:
        return None
    xp = var._value._dev.xp
    new = xp.array(p, copy=True, order="C")
    fn(new, xp.asarray(g, order="C"), *slots, **hyper)  # (keeps 0-d arrays 0-d)
    return new


class _Live:
    """The variables' values as the eager update reads and writes them (`_Arrays` is a
    captured graph's)."""

    @staticmethod
    def get(var):
        return var._value._data

    @staticmethod
    def set(var, array):
        var._assign_array(array)


_LIVE = _Live()


class _Arrays:
    """The variables' values as arrays of a captured graph's update (the variables themselves
    are not touched: the graph's caller gives them its results)."""

    def __init__(self, variables, arrays):
        self.arrays = {v._uid: a for v, a in zip(variables, arrays)}

    def get(self, var):
        return self.arrays[var._uid]

    def set(self, var, array):
        self.arrays[var._uid] = array


def _multi_kernel(kind, var):
    """The backend's `<kind>_multi_update` for the variable's dtype, or None."""
    kernels = getattr(var._value._dev, "kernels", None)
    fn = getattr(kernels, f"{kind}_multi_update", None) if kernels is not None else None
    if fn is None or (f"{kind}_multi_update", var._value._data.dtype.name) not in KERNELS:
        return None
    return fn


def as_scalar(x, dtype):
    """A step term as the rules combine it with arrays of `dtype`: a Python number as it is (it
    meets the array as a number of its dtype); a device value (a captured graph's, see
    captured.py) cast to `dtype`, so that it meets the array as the number would."""
    if type(x) in (bool, int, float):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x, dtype)
    return x.astype(dtype)


def _scale(xp, c, norm, dtype):
    """min(1, c / norm) as a 0-d array of `dtype` on the norm's device."""
    return xp.minimum(1.0, c / xp.maximum(norm, 1e-38)).astype(dtype)


class _LearningRate(float):
    """An optimizer's current learning rate as a float that can be assigned (Keras 2's
    `K.set_value(optimizer.lr, value)`)."""

    dtype = property(lambda self: _float32)

    def __new__(cls, optimizer):
        obj = super().__new__(cls, optimizer._current_lr())
        obj._optimizer = optimizer
        return obj

    def assign(self, value):
        self._optimizer.learning_rate = float(value)

    def numpy(self):
        return np.float32(self)


class Optimizer:
    """Base class of the gradient-based optimizers (Keras' API).

    Subclasses set `_kind`, `_slot_names` and implement `_hyper(t, lr, dtype, xp=math)` (the
    terms of step t = 1, 2, ... at learning rate lr: Python numbers, or, in a captured CUDA
    graph, 0-d device arrays computed with the device's array module `xp`: see captured.py)
    and the static `update(xp, p, g, *slots, **hyper)`.

    `learning_rate` is a float, a `LearningRateSchedule`, or any callable of the step (the
    number of updates applied so far, starting at 0). `clipnorm` clips each gradient's norm,
    `global_clipnorm` the norm of all of them together, `clipvalue` each element.
    """

    _kind = None
    _slot_names = ()

    def __init__(self, learning_rate, name=None, clipnorm=None, clipvalue=None,
                 global_clipnorm=None, lr=None, decay=None):
        # Keras 2's spellings: `lr` is learning_rate (it wins over the default, as in Keras
        # 2); `decay` is Keras 2's time-based decay, lr / (1 + decay * iterations)
        if lr is not None:
            learning_rate = lr
        if decay:
            from .schedules import InverseTimeDecay
            learning_rate = InverseTimeDecay(learning_rate, 1, decay)
        if clipnorm is not None and global_clipnorm is not None:
            raise ValueError(f"{type(self).__name__}: set clipnorm or global_clipnorm, not both")
        for label, c in (("clipnorm", clipnorm), ("clipvalue", clipvalue),
                         ("global_clipnorm", global_clipnorm)):
            if c is None:
                continue
            if not isinstance(c, numbers.Real) or isinstance(c, bool):
                raise TypeError(f"{type(self).__name__}: {label} must be a number or None, "
                                f"got {c!r}")
            if not c >= 0:
                raise ValueError(f"{type(self).__name__}: {label} must be >= 0 (or None for "
                                 f"no clipping), got {c}")
        if not (isinstance(learning_rate, (numbers.Real, Tensor, Variable)) or
                callable(learning_rate)):
            raise TypeError(f"{type(self).__name__}: learning_rate must be a number, a "
                            f"LearningRateSchedule or a callable of the step, got "
                            f"{learning_rate!r}")
        self._learning_rate = learning_rate
        self.name = name or type(self).__name__
        self.clipnorm, self.clipvalue, self.global_clipnorm = clipnorm, clipvalue, global_clipnorm
        self._step = 0
        self._slots = {}  # variable id -> (variable, [slot arrays])
        self._iterations = Variable(np.int64(0), trainable=False, name=f"{self.name}/iterations")

    # -- state ----------------------------------------------------------------------------------
    @property
    def iterations(self):
        """The number of `apply_gradients` calls so far (an int64 variable, as in Keras)."""
        return self._iterations

    @property
    def learning_rate(self):
        """The learning rate for the next step (a schedule is evaluated at `iterations`)."""
        return self._current_lr()

    @learning_rate.setter
    def learning_rate(self, value):
        self._learning_rate = value

    @property
    def lr(self):
        """Keras 2's name of `learning_rate` (a float that `keras.backend.set_value(opt.lr, v)`
        and `opt.lr.assign(v)` set)."""
        return _LearningRate(self)

    @lr.setter
    def lr(self, value):
        self.learning_rate = value

    def _current_lr(self):
        lr = self._learning_rate
        if isinstance(lr, LearningRateSchedule) or (callable(lr) and
                                                    not isinstance(lr, (Tensor, Variable))):
            lr = lr(self._step)
        return self._host_lr(lr) if isinstance(lr, (Tensor, Variable)) else float(lr)

    def _host_lr(self, lr):
        """A tensor learning rate's value, read from its device once per value: an assign gives
        a variable a new value tensor (its arrays are never written in place), so the read is
        kept with that tensor and a step with an unchanged rate reads nothing (no host sync)."""
        value = lr._value if isinstance(lr, Variable) else lr
        cached = getattr(self, "_lr_read", None)
        if cached is None or cached[0] is not value:
            cached = self._lr_read = (value, float(value.numpy()))
        return cached[1]

    def get_slot(self, var, name):
        """A copy of one of the optimizer's slots for `var` (e.g. 'momentum', 'm', 'v')."""
        if name not in self._slot_names:
            raise KeyError(f"{self.name}: no slot {name!r}; this optimizer has "
                           f"{list(self._slot_names)}")
        if var._uid not in self._slots:
            raise KeyError(f"{self.name}: no slots yet for variable {var.name!r} (they are "
                           "created by the first apply_gradients)")
        arr = self._slots[var._uid][1][self._slot_names.index(name)]
        if arr is None:
            raise KeyError(f"{self.name}: slot {name!r} is not used with these settings")
        return Tensor(var._value._dev.xp.array(arr, copy=True), var._value._dev)

    def variables(self):
        """The optimizer's state: `iterations` then copies of every slot, as tensors (the slots
        themselves are updated in place, so a tensor never shares their memory)."""
        out = [self._iterations]
        for var, slots in self._slots.values():
            xp = var._value._dev.xp
            out += [Tensor(xp.array(s, copy=True), var._value._dev) for s in slots
                    if s is not None]
        return out

    def _slots_for(self, var):
        entry = self._slots.get(var._uid)
        if entry is None:
            xp = var._value._dev.xp
            p = var._value._data
            # C order whatever the variable's layout: fused kernels update slots in place
            entry = (var, [xp.zeros(p.shape, p.dtype) if self._needs_slot(name) else None
                           for name in self._slot_names])
            self._slots[var._uid] = entry
        return entry[1]

    def _needs_slot(self, name):
        return True

    # -- updates --------------------------------------------------------------------------------
    def apply_gradients(self, grads_and_vars):
        """Applies one update to each variable whose gradient is not None.

        `grads_and_vars` is an iterable of `(gradient, variable)` pairs, e.g.
        `zip(grads, vars)`. Variables with a `None` gradient are skipped with a warning naming
        them. Returns `iterations` after the update.
        """
        merge = getattr(in_replica, "apply", None)
        if merge is not None:  # in a replica of a tg.distribute strategy
            return merge(self, grads_and_vars)
        pairs = list(grads_and_vars)
        for _, v in pairs:
            self._check_variable(v)
        skipped = [v for g, v in pairs if g is None]
        pairs = [(g, v) for g, v in pairs if g is not None]
        if skipped:
            warnings.warn(f"{self.name}: no gradient for variables "
                          f"{[getattr(v, 'name', repr(v)) for v in skipped]}; they are not "
                          "updated (is the loss connected to them?)", UserWarning, stacklevel=2)
        grads = [self._gradient_tensor(g, v) for g, v in pairs]
        variables = [v for _, v in pairs]
        for tracer in _thread.tracers:  # inside tg.function: one graph node replays the update
            tracer.on_update(self._apply_arrays, grads, variables)
        return self._apply_arrays([g._data for g in grads], variables)

    def scale_loss(self, loss):
        """The loss to differentiate: `loss` itself (Keras 3; a `LossScaleOptimizer` scales
        it). `fit` calls it on every step."""
        return loss

    def apply(self, grads, trainable_variables):
        """`apply_gradients(zip(grads, trainable_variables))`: Keras 3's form (its custom
        training steps call `self.optimizer.apply(gradients, trainable_vars)`)."""
        grads, variables = list(grads), list(trainable_variables)
        if len(grads) != len(variables):
            raise ValueError(f"{self.name}.apply: {len(grads)} gradients for "
                             f"{len(variables)} variables; pass one gradient per variable")
        return self.apply_gradients(zip(grads, variables))

    def _apply_arrays(self, arrays, variables):
        """The update from gradient arrays: clipping, the learning rate at the current step,
        one rule per variable, the step count (what a tg.function graph node replays; a
        captured graph runs `captured.GraphUpdate` instead: the same rules, with the step's
        terms computed on the device)."""
        arrays = self._clip(arrays, variables)
        lr = self._current_lr()
        self._update_variables(arrays, variables, lr, None, _LIVE)
        self._step += 1  # the host's count (schedules, bias corrections): never read back
        it = self._iterations
        it._assign_array(it._dev.asarray(it._value._data + 1))  # counted on its device
        return self._iterations

    def _update_variables(self, arrays, variables, lr, hyper_of, values):
        """One rule per variable: `hyper_of(dtype)` gives the step's hyperparameters (None:
        `_hyper` of the host's step and `lr`), `values` reads and writes the variables' arrays
        (`_LIVE` or a graph's `_Arrays`)."""
        rest = self._multi_tensor_updates(arrays, variables, lr, hyper_of, values)
        if values is _LIVE:  # (the eager path, without the indirection)
            for g, var in rest:
                var._assign_array(self._update_one(var, var._value._data, g, lr, hyper_of))
            return
        for g, var in rest:
            values.set(var, self._update_one(var, values.get(var), g, lr, hyper_of))

    def _multi_tensor_updates(self, arrays, variables, lr, hyper_of, values):
        """Updates the variables that a multi-tensor kernel covers, by device and dtype (one
        launch per `MULTI_TENSORS` non-empty variables, see backends/kernels/launch.py): the
        kernel updates fresh copies of the parameters and the slots in place, and the copies
        become the variables' values (as `_fused_update`). Returns the (gradient, variable)
        pairs left for `_update_one`: all of them for an optimizer with its own `_update_one`
        (AdamW's decay) or a rule the kernel lacks, and when a variable appears twice (its
        updates then run one after the other)."""
        pairs = list(zip(arrays, variables))
        if type(self)._update_one is not Optimizer._update_one or \
                len({v._uid for v in variables}) < len(variables):
            return pairs
        groups, rest = {}, []
        for g, var in pairs:
            fn = _multi_kernel(self._kind, var)
            if fn is None:
                rest.append((g, var))
            else:
                key = (id(var._value._dev), dtypes.name_of(var._value._data.dtype))
                groups.setdefault(key, (fn, []))[1].append((g, var))
        for fn, group in groups.values():
            var0 = group[0][1]
            dtype = var0._value._data.dtype
            hyper = self._hyper(self._step + 1, lr, dtype) if hyper_of is None else \
                hyper_of(dtype)
            if not self._fusable(hyper):
                rest += group
                continue
            xp = var0._value._dev.xp
            new = [xp.array(values.get(var), copy=True, order="C") for _, var in group]
            grads = [xp.asarray(g, order="C") for g, _ in group]
            slots = zip(*[self._slots_for(var) for _, var in group])
            fn(new, grads, *[list(s) for s in slots], **hyper)
            for p, (_, var) in zip(new, group):
                values.set(var, p)
        return rest

    def _update_one(self, var, p, g, lr, hyper_of):
        """The new array of `var`, whose current array is `p` (its slots updated in place)."""
        slots = self._slots_for(var)
        hyper = self._hyper(self._step + 1, lr, p.dtype) if hyper_of is None else \
            hyper_of(p.dtype)
        if self._fusable(hyper):
            new = _fused_update(self._kind, var, p, g, slots, hyper)
            if new is not None:
                return new
        return self.update(var._value._dev.xp, p, g, *slots, **hyper)

    def _fusable(self, hyper):
        return True

    def _graph_refusal(self):
        """Why this optimizer's step terms cannot be computed on the device in a captured CUDA
        graph (captured.py), or None."""
        return None

    def _check_variable(self, var):
        if not isinstance(var, Variable):
            raise TypeError(f"{self.name}.apply_gradients: expected tg.Variable, got "
                            f"{type(var).__name__}")
        if var._value._data.dtype.kind not in "fcV":
            raise TypeError(f"{self.name}.apply_gradients: variable {var.name!r} has dtype "
                            f"{var.dtype.name} (shape {list(var.shape)}); optimizers update "
                            "floating-point variables only (make it trainable=False, or create "
                            "it with a float dtype)")

    def _gradient_tensor(self, g, var):
        if not var.trainable:
            raise ValueError(f"{self.name}.apply_gradients: variable {var.name!r} is not "
                             "trainable")
        g = g._read() if isinstance(g, Variable) else g
        g = g if isinstance(g, Tensor) else convert_to_tensor(g, dtype=var.dtype)
        if g.shape != var.shape or g._data.dtype != var._value._data.dtype:
            raise ValueError(f"{self.name}.apply_gradients: gradient {g.dtype.name}"
                             f"{list(g.shape)} for variable {var.name!r} of "
                             f"{var.dtype.name}{list(var.shape)}; they must match")
        if g._dev is not var._value._dev:
            raise ValueError(f"{self.name}.apply_gradients: gradient on {g.device} for variable "
                             f"{var.name!r} on {var.device}")
        return g

    def _clip(self, arrays, variables):
        if not arrays:
            return arrays
        xp = variables[0]._value._dev.xp
        if self.clipvalue is not None:
            c = float(self.clipvalue)
            arrays = [xp.clip(g, -c, c) for g in arrays]
        # the norms stay on the arrays' device: a GPU step reads nothing back
        if self.clipnorm is not None:
            c = float(self.clipnorm)
            arrays = [g * _scale(xp, c, xp.linalg.norm(g.ravel()), g.dtype) for g in arrays]
        if self.global_clipnorm is not None:
            c = float(self.global_clipnorm)
            norm = xp.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in arrays))
            arrays = [g * _scale(xp, c, norm, g.dtype) for g in arrays]
        return arrays

    def minimize(self, loss, var_list, tape=None):
        """Computes the gradient of `loss` with a GradientTape and applies it.

        `loss` is a callable taking no argument (or a tensor computed under `tape`);
        `var_list` a list of variables (or a callable returning one). Returns the loss value.

        >>> w = tg.Variable(3.0)
        >>> opt = tg.optimizers.SGD(learning_rate=0.1)
        >>> _ = opt.minimize(lambda: w * w, [w])
        >>> round(float(w), 4)  # 3 - 0.1 * 6
        2.4
        """
        if tape is None:
            if not callable(loss):
                raise TypeError(f"{self.name}.minimize: without a tape, loss must be a callable "
                                "returning the loss tensor")
            with GradientTape() as tape:
                value = loss()
        else:
            value = loss() if callable(loss) else loss
        variables = var_list() if callable(var_list) else var_list
        variables = nest.flatten(variables)
        grads = tape.gradient(value, variables)
        self.apply_gradients(zip(grads, variables))
        return value

    def __repr__(self):
        return f"<{type(self).__name__} learning_rate={self._learning_rate!r} " \
               f"iterations={self._step}>"
