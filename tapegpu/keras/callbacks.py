"""Keras callbacks: `Callback`, `History`, `EarlyStopping`, `LambdaCallback`, `ProgbarLogger`.

`fit` calls `on_train_begin`, then per epoch `on_epoch_begin`, `on_train_batch_begin/end` per
step, `on_epoch_end(epoch, logs)` (logs hold 'loss', the metrics and their 'val_' versions),
and `on_train_end`. A callback stops training by setting `self.model.stop_training = True`.
"""
import sys
import time
import warnings

import numpy as np


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
    def on_train_batch_begin(self, batch, logs=None): pass
    def on_train_batch_end(self, batch, logs=None): pass
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
    """Saves the weights (`model.save_weights`) after each epoch, or only when `monitor`
    improves with `save_best_only=True`. `filepath` may hold `{epoch}` and log keys."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=True, mode="auto", save_freq="epoch"):
        super().__init__()
        if save_freq != "epoch":
            raise ValueError(f"ModelCheckpoint: only save_freq='epoch' is supported, got "
                             f"{save_freq!r}")
        self.filepath, self.monitor, self.verbose = str(filepath), monitor, verbose
        self.save_best_only = bool(save_best_only)
        self._stop = EarlyStopping(monitor=monitor, mode=mode)
        self._stop.on_train_begin()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_best_only:
            value = logs.get(self.monitor)
            if value is None:
                warnings.warn(f"ModelCheckpoint: can save best model only with {self.monitor} "
                              f"available; available are {sorted(logs)}", UserWarning,
                              stacklevel=2)
                return
            if not self._stop._better(value, self._stop.best):
                return
            self._stop.best = value
        self.model.save_weights(path)


class ProgbarLogger(Callback):
    """Keras' progress display: on a terminal a bar updated per step; otherwise (a file or a
    pipe) one line per epoch, as Keras prints when its output is not interactive.
    `verbose=2` always prints one line per epoch."""

    def __init__(self, verbose=1, stream=None):
        super().__init__()
        self.verbose = verbose
        self.stream = stream

    def _out(self):
        return self.stream if self.stream is not None else sys.stdout

    def on_train_begin(self, logs=None):
        out = self._out()
        self._interactive = self.verbose == 1 and hasattr(out, "isatty") and out.isatty()

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()
        self._seen = 0
        epochs = self.params.get("epochs")
        print(f"Epoch {epoch + 1}/{epochs}", file=self._out())

    def on_train_batch_end(self, batch, logs=None):
        self._seen = batch + 1
        if self._interactive:
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
        done = int(width * self._seen / steps) if steps else width
        bar = "━" * done + " " * (width - done) if self.verbose == 1 else ""
        timing = f"{elapsed:.0f}s {per_step * 1e3:.0f}ms/step"
        values = " - ".join(f"{k}: {_fmt(v)}" for k, v in (logs or {}).items())
        head = f"{self._seen}/{steps} " + (f"{bar} " if bar else "- ")
        return head + timing + (f" - {values}" if values else "")


def _fmt(v):
    v = float(np.asarray(v))
    return f"{v:.4f}" if abs(v) >= 1e-3 or v == 0 else f"{v:.4e}"


class CallbackList:
    """Calls each callback's hook in order."""

    def __init__(self, callbacks, model, params):
        self.callbacks = list(callbacks)
        for c in self.callbacks:
            if not isinstance(c, Callback):
                raise TypeError(f"fit: callbacks must be keras.callbacks.Callback instances, "
                                f"got {c!r}")
            c.set_model(model)
            c.set_params(params)

    def __getattr__(self, hook):
        if not hook.startswith("on_"):
            raise AttributeError(hook)

        def call(*args, **kwargs):
            for c in self.callbacks:
                getattr(c, hook)(*args, **kwargs)
        return call
