"""Keras callbacks: `Callback`, `History`, `EarlyStopping`, `ModelCheckpoint`, `LambdaCallback`,
`ProgbarLogger`, `LearningRateScheduler`, `ReduceLROnPlateau`, `TerminateOnNaN`, `CSVLogger`.

`fit` calls `on_train_begin`, then per epoch `on_epoch_begin`, `on_train_batch_begin/end` per
step, `on_epoch_end(epoch, logs)` (logs hold 'loss', the metrics and their 'val_' versions),
and `on_train_end`. A callback stops training by setting `self.model.stop_training = True`.
"""
import csv
import os
import sys
import time
import warnings

import numpy as np

from ..core.tensor import Tensor, Variable
from ..optimizers import schedules as _schedules


class Callback:
    """Base class: override the `on_*` hooks you need; `self.model` and `self.params` are set
    by `fit`."""

    def __init__(self):
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None): pass
    def on_train_end(self, logs=None): pass
    def on_epoch_begin(self, epoch, logs=None): pass
    def on_epoch_end(self, epoch, logs=None): pass
    def on_batch_begin(self, batch, logs=None): pass  # Keras: called by on_train_batch_begin
    def on_batch_end(self, batch, logs=None): pass  # Keras: called by on_train_batch_end

    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs=logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs=logs)

    def on_test_begin(self, logs=None): pass
    def on_test_end(self, logs=None): pass
    def on_test_batch_begin(self, batch, logs=None): pass
    def on_test_batch_end(self, batch, logs=None): pass
    def on_predict_begin(self, logs=None): pass
    def on_predict_end(self, logs=None): pass
    def on_predict_batch_begin(self, batch, logs=None): pass
    def on_predict_batch_end(self, batch, logs=None): pass


class History(Callback):
    """Records each epoch's logs: `history.history['loss']` is the list of epoch losses and
    `history.epoch` the epoch indices. `fit` returns it."""

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []

    def on_train_begin(self, logs=None):
        self.epoch = []

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)


class LambdaCallback(Callback):
    """A callback from functions: `on_epoch_end=lambda epoch, logs: ...` and the like."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_begin=None,
                 on_train_end=None, on_train_batch_begin=None, on_train_batch_end=None,
                 **kwargs):
        super().__init__()
        for name, fn in dict(on_epoch_begin=on_epoch_begin, on_epoch_end=on_epoch_end,
                             on_train_begin=on_train_begin, on_train_end=on_train_end,
                             on_train_batch_begin=on_train_batch_begin,
                             on_train_batch_end=on_train_batch_end, **kwargs).items():
            if fn is not None:
                if not name.startswith("on_") or not hasattr(Callback, name):
                    raise TypeError(f"LambdaCallback: unknown hook {name!r}")
                setattr(self, name, fn)


class EarlyStopping(Callback):
    """Stops training when `monitor` has not improved by more than `min_delta` for `patience`
    epochs (Keras' rule); with `restore_best_weights`, the best epoch's weights are restored.

    `mode` 'auto' minimises unless the name contains 'acc', 'auc', 'precision' or 'recall'.
    """

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto",
                 baseline=None, restore_best_weights=False, start_from_epoch=0):
        super().__init__()
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"EarlyStopping: mode must be 'auto', 'min' or 'max', got {mode!r}")
        self.monitor, self.patience, self.verbose = monitor, int(patience), verbose
        self.min_delta = abs(float(min_delta))
        self.baseline, self.restore_best_weights = baseline, bool(restore_best_weights)
        self.start_from_epoch = int(start_from_epoch)
        if mode == "auto":
            mode = "max" if any(s in monitor for s in ("acc", "auc", "precision", "recall")) \
                else "min"
        self.mode = mode
        self.stopped_epoch = 0

    def _better(self, value, reference):
        if reference is None:
            return True
        if self.mode == "min":
            return value < reference - self.min_delta
        return value > reference + self.min_delta

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        self.best = None
        self.best_weights = None
        self.best_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None:
            warnings.warn(f"EarlyStopping: metric {self.monitor!r} is not available; available "
                          f"metrics are {sorted(logs or {})}", UserWarning, stacklevel=2)
            return
        if epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights = self.model.get_weights()
        self.wait += 1
        if self._better(value, self.best):
            self.best, self.best_epoch = value, epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._better(value, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None and \
                self.stopped_epoch > 0:
            if self.verbose > 0:
                print(f"Restoring model weights from the end of the best epoch: "
                      f"{self.best_epoch + 1}.")
            self.model.set_weights(self.best_weights)


class ModelCheckpoint(Callback):
    """Saves the weights (`model.save_weights`) at each epoch's end, or every `save_freq`
    batches (an integer), or only when `monitor` improves with `save_best_only=True`, as
    Keras'. `filepath` may hold `{epoch}` and log keys; its directory is created. Each save
    replaces the file atomically (`save_weights` writes a temporary file and renames it), so a
    process killed during a save leaves the previous checkpoint whole. `verbose=1` prints each
    save. tapegpu has no whole-model format (`.keras` files):
    `save_weights_only=False`, Keras' default, raises instead of silently saving weights only.
    """

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=False, mode="auto", save_freq="epoch",
                 initial_value_threshold=None):
        super().__init__()
        if not save_weights_only:
            raise NotImplementedError(
                "ModelCheckpoint: tapegpu saves weights only (there is no .keras whole-model "
                "format); pass save_weights_only=True (the file is written by "
                "model.save_weights and read by model.load_weights), or use "
                "tg.train.CheckpointManager / tg.saved_model")
        if save_freq != "epoch" and not (isinstance(save_freq, int) and save_freq > 0):
            raise ValueError(f"ModelCheckpoint: save_freq must be 'epoch' or a positive number "
                             f"of batches, got {save_freq!r}")
        self.filepath, self.monitor, self.verbose = os.fspath(filepath), monitor, verbose
        self.save_best_only = bool(save_best_only)
        self.save_freq = save_freq
        self._stop = EarlyStopping(monitor=monitor, mode=mode)
        self._stop.on_train_begin()
        if initial_value_threshold is not None:
            self._stop.best = float(initial_value_threshold)
        self._epoch = 0
        self._batches = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        self._batches += 1
        if self._batches % self.save_freq == 0:
            self._save(self._epoch, dict(logs or {}))

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save(epoch, dict(logs or {}))

    def _save(self, epoch, logs):
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_best_only:
            value = logs.get(self.monitor)
            if value is None:
                warnings.warn(f"ModelCheckpoint: can save best model only with {self.monitor} "
                              f"available; available are {sorted(logs)}", UserWarning,
                              stacklevel=2)
                return
            best = self._stop.best
            if best is None:  # printed as Keras starts: from inf (or -inf when maximising)
                best = np.inf if self._stop.mode == "min" else -np.inf
            if not self._stop._better(value, self._stop.best):
                if self.verbose > 0:
                    print(f"\nEpoch {epoch + 1}: {self.monitor} did not improve from "
                          f"{best:.5f}")
                return
            if self.verbose > 0:
                print(f"\nEpoch {epoch + 1}: {self.monitor} improved from {best:.5f} to "
                      f"{value:.5f}, saving model to {path}")
            self._stop.best = value
        elif self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: saving model to {path}")
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        self.model.save_weights(path)


def _learning_rate(model, who):
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or not hasattr(optimizer, "learning_rate"):
        raise ValueError(f"{who}: the optimizer must have a `learning_rate` attribute (compile "
                         "the model with a keras.optimizers optimizer)")
    return float(optimizer.learning_rate)


def _set_learning_rate(model, value, who):
    optimizer = model.optimizer
    if isinstance(optimizer._learning_rate, _schedules.LearningRateSchedule):
        raise TypeError(f"{who}: this optimizer was created with a `LearningRateSchedule` "
                        "object as its `learning_rate` constructor argument, hence its learning "
                        "rate is not settable")
    optimizer.learning_rate = value


class LearningRateScheduler(Callback):
    """Sets the optimizer's learning rate at the start of each epoch to
    `schedule(epoch, current_learning_rate)` (or `schedule(epoch)` for a function of one
    argument), `epoch` counting from 0; the rate in force is logged as 'learning_rate'.

    >>> cb = tg.keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5)
    """

    def __init__(self, schedule, verbose=0):
        super().__init__()
        if not callable(schedule):
            raise TypeError(f"LearningRateScheduler: schedule must be a callable of (epoch, lr), "
                            f"got {schedule!r}")
        self.schedule, self.verbose = schedule, verbose

    def on_epoch_begin(self, epoch, logs=None):
        lr = _learning_rate(self.model, "LearningRateScheduler")
        try:
            lr = self.schedule(epoch, lr)
        except TypeError:  # the older one-argument form
            lr = self.schedule(epoch)
        if isinstance(lr, (Tensor, Variable)) and lr.ndim == 0 and lr.dtype.is_floating:
            lr = float(lr)
        if not isinstance(lr, (float, np.floating)):
            raise ValueError(f"The output of the `schedule` function should be a float. Got: "
                             f"{lr!r}")
        _set_learning_rate(self.model, float(lr), "LearningRateScheduler")
        if self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: LearningRateScheduler setting learning rate to {lr}.")

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = _learning_rate(self.model, "LearningRateScheduler")


class ReduceLROnPlateau(Callback):
    """Multiplies the learning rate by `factor` (down to `min_lr`) when `monitor` has not
    improved by more than `min_delta` for `patience` epochs, then waits `cooldown` epochs before
    counting again (Keras' rule). `mode` 'auto' maximises a monitor whose name contains 'acc'
    and minimises otherwise. The rate in force is logged as 'learning_rate'.
    """

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto",
                 min_delta=1e-4, cooldown=0, min_lr=0.0, **kwargs):
        super().__init__()
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau does not support a factor >= 1.0. Got {factor}")
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'auto', 'min' or 'max', got "
                             f"{mode!r}")
        self.monitor, self.factor, self.patience = monitor, float(factor), int(patience)
        self.verbose, self.min_delta = verbose, float(min_delta)
        self.cooldown, self.min_lr = int(cooldown), float(min_lr)
        self.mode = mode
        self._reset()

    def _reset(self):
        self._maximise = self.mode == "max" or (self.mode == "auto" and "acc" in self.monitor)
        self.best = -np.inf if self._maximise else np.inf
        self.wait = 0
        self.cooldown_counter = 0

    def _improved(self, value):
        if self._maximise:
            return value > self.best + self.min_delta
        return value < self.best - self.min_delta

    def on_train_begin(self, logs=None):
        self._reset()

    def on_epoch_end(self, epoch, logs=None):
        logs = {} if logs is None else logs
        lr = _learning_rate(self.model, "ReduceLROnPlateau")
        logs["learning_rate"] = lr
        value = logs.get(self.monitor)
        if value is None:
            warnings.warn(f"Learning rate reduction is conditioned on metric `{self.monitor}` "
                          f"which is not available. Available metrics are: "
                          f"{','.join(sorted(logs))}.", UserWarning, stacklevel=2)
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if self._improved(value):
            self.best, self.wait = value, 0
            return
        if self.cooldown_counter > 0:
            return
        self.wait += 1
        if self.wait < self.patience or lr <= np.float32(self.min_lr):
            return
        new_lr = max(lr * self.factor, self.min_lr)
        _set_learning_rate(self.model, new_lr, "ReduceLROnPlateau")
        if self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {new_lr}.")
        self.cooldown_counter, self.wait = self.cooldown, 0


class TerminateOnNaN(Callback):
    """Stops training as soon as a step's loss is NaN or infinite (`fit` ends after that step).
    It reads the loss after every step, which costs a device-to-host copy per step on a GPU."""

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not np.isfinite(float(loss)):
            print(f"Batch {batch}: Invalid loss, terminating training")
            self.model.stop_training = True


class CSVLogger(Callback):
    """Writes one CSV row per epoch to `filename`: 'epoch' (from 0), then the logs' keys in
    sorted order; the header is written first unless `append=True` adds to a file that already
    has rows. Values missing from an epoch (validation skipped by a stop) are written 'NA'.
    """

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        self.filename, self.sep, self.append = os.fspath(filename), separator, bool(append)
        self.keys = None
        self._file = None
        self._writer = None

    def on_train_begin(self, logs=None):
        has_rows = self.append and os.path.exists(self.filename) and \
            os.path.getsize(self.filename) > 0
        self._header = not has_rows
        self._file = open(self.filename, "a" if self.append else "w", newline="")
        self._writer = None
        self.keys = None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.keys is None:
            self.keys = sorted(logs)
        if self._writer is None:
            self._writer = csv.DictWriter(self._file, fieldnames=["epoch"] + self.keys,
                                          delimiter=self.sep, extrasaction="ignore")
            if self._header:
                self._writer.writeheader()
        row = {"epoch": epoch}
        row.update({k: _csv_value(logs[k]) if k in logs else "NA" for k in self.keys})
        self._writer.writerow(row)
        self._file.flush()

    def on_train_end(self, logs=None):
        if self._file is not None:
            self._file.close()
            self._file = None
            self._writer = None


def _csv_value(v):
    if isinstance(v, str):
        return v
    a = np.asarray(v)
    if a.ndim:
        return f"[{', '.join(str(x) for x in a.ravel().tolist())}]"
    return a.item()


class ProgbarLogger(Callback):
    """Keras' progress display: on a terminal a bar redrawn as steps end (at most every
    `interval` seconds, and only then are the metrics read); otherwise (a file or a pipe) one
    line per epoch, as Keras prints when its output is not interactive. `verbose=2` always
    prints one line per epoch."""

    def __init__(self, verbose=1, stream=None, interval=0.05):
        super().__init__()
        self.verbose = verbose
        self.stream = stream
        self.interval = float(interval)

    def _out(self):
        return self.stream if self.stream is not None else sys.stdout

    def on_train_begin(self, logs=None):
        out = self._out()
        self._interactive = self.verbose == 1 and hasattr(out, "isatty") and out.isatty()

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()
        self._shown = None  # the first step is always shown
        self._seen = 0
        epochs = self.params.get("epochs")
        print(f"Epoch {epoch + 1}/{epochs}", file=self._out())

    def on_train_batch_end(self, batch, logs=None):
        self._seen = batch + 1
        if not self._interactive:
            return
        now = time.perf_counter()
        if self._shown is not None and now - self._shown < self.interval and \
                self._seen != self.params.get("steps"):
            return
        self._shown = now
        self._out().write("\r" + self._line(logs, final=False))
        self._out().flush()

    def on_epoch_end(self, epoch, logs=None):
        line = self._line(logs, final=True)
        out = self._out()
        out.write(("\r" if self._interactive else "") + line + "\n")
        out.flush()

    def _line(self, logs, final):
        steps = self.params.get("steps") or self._seen
        elapsed = time.perf_counter() - self._start
        per_step = elapsed / max(1, self._seen)
        width = 20
        done = min(width, int(width * self._seen / steps)) if steps else width
        bar = "━" * done + " " * (width - done) if self.verbose == 1 else ""
        timing = f"{elapsed:.0f}s {_per_step(per_step)}"
        values = " - ".join(f"{k}: {_fmt(v)}" for k, v in (logs or {}).items())
        head = f"{self._seen}/{steps} " + (f"{bar} " if bar else "- ")
        return head + timing + (f" - {values}" if values else "")


def _per_step(seconds):
    """Keras' time per step: in s, ms or us, whichever reads as a number >= 1."""
    if seconds >= 1:
        return f"{seconds:.0f}s/step"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.0f}ms/step"
    return f"{seconds * 1e6:.0f}us/step"


def _fmt(v):
    v = np.asarray(v)
    if v.ndim:  # a metric of several values (F1Score per class): printed as Keras does
        return "[" + " ".join(_fmt(x) for x in v.ravel()) + "]"
    v = float(v)
    return f"{v:.4f}" if abs(v) >= 1e-3 or v == 0 else f"{v:.4e}"


# a callback overriding Keras' older batch hooks is called through the train-batch ones
_BATCH_ALIASES = {"on_train_batch_begin": "on_batch_begin",
                  "on_train_batch_end": "on_batch_end"}


class CallbackList:
    """Calls each callback's hook in order. A hook that no callback overrides costs nothing,
    and `wants(hook)` tells `fit` whether any callback will read that hook's logs (so that
    per-step logs are only computed when something reads them)."""

    def __init__(self, callbacks, model, params):
        self.callbacks = list(callbacks)
        for c in self.callbacks:
            if not isinstance(c, Callback):
                raise TypeError(f"fit: callbacks must be keras.callbacks.Callback instances, "
                                f"got {c!r}")
            c.set_model(model)
            c.set_params(params)
        self._hooks = {}

    def _bound(self, hook):
        methods = self._hooks.get(hook)
        if methods is None:
            names = (hook,) + ((_BATCH_ALIASES[hook],) if hook in _BATCH_ALIASES else ())
            methods = tuple(getattr(c, hook) for c in self.callbacks if any(
                getattr(type(c), h, None) is not getattr(Callback, h) or h in vars(c)
                for h in names))
            self._hooks[hook] = methods
        return methods

    def wants(self, hook):
        """True when some callback overrides `hook`."""
        return bool(self._bound(hook))

    def __getattr__(self, hook):
        if not hook.startswith("on_") or not hasattr(Callback, hook):
            raise AttributeError(hook)
        methods = self._bound(hook)
        arity = 2 if "epoch" in hook or "batch" in hook else 1  # (index,) logs

        def call(*args):  # as Keras, every hook gets a logs dict ({} when there are none)
            if len(args) < arity:
                args = args + ({},)
            for m in methods:
                m(*args)
        return call
