"""Keras metrics: stateful accumulators with `update_state`, `result` and `reset_state`.

The state lives on the host (float64 numpy scalars): a metric reads each batch's values once,
so it adds no variables to a model and no ops to a tape. Inside `tg.function`, an update is
recorded as an effect of the graph (as `apply_gradients` is), so each call of the compiled
function updates the metric with that call's values.

>>> m = tg.keras.metrics.SparseCategoricalAccuracy()
>>> m.update_state([1, 0], [[0.1, 0.9], [0.2, 0.8]])
>>> float(m.result())
0.5
>>> m.reset_state()
>>> float(m.result())
0.0
"""
import functools
import threading
import warnings

import numpy as np

from ..core.floatx import floatx as _floatx
from ..core.tensor import Tensor, Variable, _thread, constant
from ..models import initializers as _initializers
from ..models import losses as _losses
from ..models.tensor_attributes import get_keras_mask
from ..ops import zeros


def _host(array):
    """A backend array as a numpy array (CuPy arrays are copied to the host)."""
    return array.get() if hasattr(array, "get") and not isinstance(array, np.ndarray) \
        else np.asarray(array)


def _np(value):
    if isinstance(value, Variable):
        value = value._read()
    if isinstance(value, Tensor):
        return _host(value._data)
    return np.asarray(value)


def _effect(update, *values):
    """Runs `update(*numpy arrays)` now, and inside `tg.function` records it as a graph effect
    that reruns it with each call's tensor values (the others are constants of the trace).
    `update` is a host metric's method: it runs holding the metric's lock, since its `+=` on
    the state are read-modify-writes that concurrent threads would otherwise lose."""
    metric = update.__self__
    update = _locked(update)
    metric._flush()  # the updates a replay deferred come first
    arrays = [None if v is None else _np(v) for v in values]
    update(*arrays)
    if not _thread.tracers:
        return
    positions = [i for i, v in enumerate(values) if isinstance(v, (Tensor, Variable))]
    tensors = [values[i]._read() if isinstance(values[i], Variable) else values[i]
               for i in positions]

    def replay(raw, _variables):
        current = list(arrays)
        for i, a in zip(positions, raw):
            current[i] = a
        _defer(metric, update, current)

    for tracer in _thread.tracers:
        tracer.on_update(replay, tensors, [])


# A replay's metric update whose values are on a GPU waits, as device copies, until the metric
# is read (`result`, fit's logs) or its waiting updates hold more than DEFER_BYTES: reading them
# at every step would be host syncs (a steady `fit` step makes none).
DEFER_BYTES = 64 << 20


def _defer(metric, update, values):
    """`update(*values)` now where every value is on the host, else later (see DEFER_BYTES),
    device arrays copied on their device (a replay may reuse its buffers)."""
    if all(v is None or isinstance(v, np.ndarray) for v in values):
        update(*values)
        return
    held = [v if v is None or isinstance(v, np.ndarray) else v.copy() for v in values]
    size = sum(getattr(v, "nbytes", 0) for v in held)
    with metric._lock:
        metric._pending.append((update, held))
        metric._pending_bytes += size
        full = metric._pending_bytes > DEFER_BYTES
    if full:
        metric._flush()


def _locked(update):
    """`update`, a host metric's method, run holding that metric's lock."""
    lock = update.__self__._lock

    def run(*arrays):
        with lock:
            update(*arrays)
    return run


def _weights(sample_weight, values, who):
    """The sample weights broadcast to the shape of `values` (None: ones)."""
    if sample_weight is None:
        return np.ones_like(values, dtype=np.float64)
    w = _np(sample_weight).astype(np.float64)
    while w.ndim > values.ndim and w.shape[-1] == 1:
        w = w.reshape(w.shape[:-1])
    while w.ndim < values.ndim:
        w = w[..., None]
    try:
        return np.broadcast_to(w, values.shape)
    except ValueError:
        raise ValueError(f"{who}: sample_weight of shape {w.shape} does not broadcast to the "
                         f"values' shape {values.shape}") from None


def _live_result(result):
    """`result` that, inside `tg.function`, is a graph node computing the result again at
    every call (the state is on the host: a value made while tracing would be a constant of
    the trace, and a custom train_step returning `m.result()` would log its first value
    forever)."""
    def value(self):  # a Variable (or Keras 3's `variable.value`) is read
        out = result(self)
        if getattr(out, "__name__", None) == "value" and \
                isinstance(getattr(out, "__self__", None), Variable):
            out = out()
        return out._read() if isinstance(out, Variable) else out

    @functools.wraps(result)
    def live(self):
        out = value(self)
        if _thread.tracers and isinstance(out, Tensor):
            def fresh():
                return value(self)._data
            fresh.__name__ = f"metric.{self.name}.result"
            _thread.tracers[-1].record_random(fresh, out)
        return out
    return live


class Metric:
    """Base class: subclasses implement `update_state(...)` and `result()`, as Keras 3's.

    A subclass keeps its state in variables made by `add_variable` (or `add_weight`) in its
    `__init__`, updated with tapegpu ops (`assign_add`), so `tg.function` records the updates;
    the default `reset_state()` sets them to zeros. `result()` may return a tensor, a variable
    or Keras 3's `variable.value`. Calling a metric updates its state with the arguments and
    returns the result. (tapegpu's own metrics keep a float64 state on the host instead.)

    >>> class Count(tg.keras.metrics.Metric):
    ...     def __init__(self, name="count"):
    ...         super().__init__(name=name)
    ...         self.n = self.add_variable(shape=(), initializer="zeros", name="n")
    ...     def update_state(self, values):
    ...         self.n.assign_add(tg.cast(tg.size(values), "float32"))
    ...     def result(self):
    ...         return self.n
    >>> m = Count()
    >>> m.update_state(tg.ones((2, 3))); float(m.result())
    6.0
    >>> m.reset_state(); float(m.result())
    0.0
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "result" in cls.__dict__:
            cls.result = _live_result(cls.__dict__["result"])

    def __init__(self, name=None, dtype=None):
        self.name = name or _snake(type(self).__name__)
        self.dtype = dtype or _floatx()
        self._metric_variables = []

    def add_variable(self, shape=(), initializer="zeros", dtype=None, aggregation="sum",
                     name=None):
        """A non-trainable state variable of the metric (Keras 3's `Metric.add_variable`)."""
        dtype = dtype or self.dtype
        init = _initializers.get(initializer)
        var = Variable(init(tuple(shape), dtype=dtype), trainable=False,
                       name=f"{self.name}/{name or 'variable'}", dtype=dtype)
        self._metric_variables.append(var)
        return var

    def add_weight(self, name=None, shape=(), initializer="zeros", dtype=None,
                   aggregation="sum"):
        """`add_variable` (Keras' older spelling)."""
        return self.add_variable(shape, initializer, dtype, aggregation, name)

    @property
    def variables(self):
        return list(self._metric_variables)

    def reset_state(self):
        """Sets the state variables to zeros (Keras 3's default)."""
        for v in self._metric_variables:
            v.assign(zeros(v.shape, dtype=v.dtype))

    def update_state(self, *args, **kwargs):
        raise NotImplementedError

    def result(self):
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        self.update_state(*args, **kwargs)
        return self.result()

    def _scalar(self, value):
        return constant(np.asarray(value, dtype=self.dtype))

    def _value(self):
        """`result()` as a Python float (what fit's logs hold), without making a tensor; a
        metric of several values (F1Score per class, counts at several thresholds) gives a
        numpy array, as Keras' logs do."""
        value = _np(self.result())
        return float(value) if value.ndim == 0 else value

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}>"


class _HostMetric(Metric):
    """tapegpu's metrics: their state is float64 numbers on the host, set by reset_state and
    updated holding the metric's lock (see `_effect`)."""

    def __init__(self, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        self._lock = threading.Lock()
        self._pending, self._pending_bytes = [], 0  # deferred updates (`_defer`)
        self.reset_state()

    def __init_subclass__(cls, **kwargs):
        for name in ("result", "_value"):  # a read applies the deferred updates first
            if name in cls.__dict__:
                setattr(cls, name, _flushing(cls.__dict__[name]))
        if "reset_state" in cls.__dict__:
            setattr(cls, "reset_state", _dropping(cls.__dict__["reset_state"]))
        super().__init_subclass__(**kwargs)  # then Metric's (a live result in a trace)

    def _flush(self):
        """Applies the updates a replay deferred, in order (one host read each)."""
        if not self._pending:
            return
        with self._lock:
            pending, self._pending, self._pending_bytes = self._pending, [], 0
        for update, values in pending:
            update(*[v if v is None or isinstance(v, np.ndarray) else _host(v)
                     for v in values])

    def __getstate__(self):  # a copy (or a pickle) gets a lock of its own
        self._flush()
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _flushing(read):
    @functools.wraps(read)
    def flushed(self):
        self._flush()
        return read(self)
    return flushed


def _dropping(reset):
    @functools.wraps(reset)
    def dropped(self):
        if getattr(self, "_pending", None):
            with self._lock:  # updates from before the reset: the reset discards them
                self._pending, self._pending_bytes = [], 0
        return reset(self)
    return dropped


def _snake(name):
    out = ""
    for i, c in enumerate(name):
        if c.isupper() and i and not name[i - 1].isupper():
            out += "_"
        out += c.lower()
    return out


class Mean(_HostMetric):
    """The (weighted) mean of the values given, as Keras 3 reduces them: each example's values
    and weights are averaged over its positions (the axes after the first), and the result is
    `sum(example values * weights) / sum(example weights)`.

    >>> m = tg.keras.metrics.Mean()
    >>> m.update_state([1.0, 3.0])
    >>> m.update_state(5.0)
    >>> float(m.result())
    3.0
    """

    def __init__(self, name="mean", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def reset_state(self):
        self.total = 0.0
        self.count = 0.0

    def update_state(self, values, sample_weight=None):
        _effect(self._update, values, sample_weight)

    def _update(self, values, sample_weight):
        v = values.astype(np.float64)
        w = _weights(sample_weight, v, f"{type(self).__name__}.update_state")
        self.total += float(_per_example(v * w).sum())
        self.count += float(_per_example(w).sum())

    def _mean(self):
        return self.total / self.count if self.count else 0.0

    def result(self):
        return self._scalar(self._mean())

    def _value(self):  # fit's logs: the result's value without making a tensor
        return float(np.asarray(self._mean(), self.dtype))


def _per_example(a):
    """Each example's mean over its positions (Keras' Mean counts examples, not positions: a
    batch of longer sequences does not weigh more)."""
    return a.mean(axis=tuple(range(1, a.ndim))) if a.ndim > 1 else a


class Sum(_HostMetric):
    """The (weighted) sum of every value given.

    >>> m = tg.keras.metrics.Sum()
    >>> m.update_state([1.0, 3.0])
    >>> float(m.result())
    4.0
    """

    def __init__(self, name="sum", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def reset_state(self):
        self.total = 0.0

    def update_state(self, values, sample_weight=None):
        _effect(self._update, values, sample_weight)

    def _update(self, values, sample_weight):
        v = values.astype(np.float64)
        self.total += float((v * _weights(sample_weight, v, "Sum.update_state")).sum())

    def result(self):
        return self._scalar(self.total)


class MeanMetricWrapper(Mean):
    """The mean of `fn(y_true, y_pred, **kwargs)` over every example seen. As Keras 3's, a
    prediction's mask (`Embedding(mask_zero=True)`, `Masking`) multiplies the sample weights:
    padded positions count for nothing."""

    def __init__(self, fn, name=None, dtype=None, **kwargs):
        self._fn, self._fn_kwargs = fn, kwargs
        super().__init__(name=name or getattr(fn, "__name__", "mean_metric_wrapper"),
                         dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        mask = get_keras_mask(y_pred)
        _effect(self._update_pair, y_true, y_pred, sample_weight, mask)

    def _update_pair(self, y_true, y_pred, sample_weight, mask=None):
        values = _np(self._fn(y_true, y_pred, **self._fn_kwargs))
        if mask is not None:
            weights = mask.astype(np.float64)
            if sample_weight is not None:
                weights = weights * _weights(sample_weight, weights,
                                             f"{type(self).__name__}.update_state")
            sample_weight = weights
        self._update(values, sample_weight)


def accuracy(y_true, y_pred):
    """1.0 where `y_true == y_pred` (elementwise), else 0.0."""
    t, p = _np(y_true), _np(y_pred)
    if t.shape != p.shape:
        raise ValueError(f"accuracy: y_true {t.shape} and y_pred {p.shape} must have the same "
                         "shape")
    return (t == p).astype(np.float64)


def sparse_categorical_accuracy(y_true, y_pred):
    """Per example, 1.0 where `argmax(y_pred, -1)` equals the integer label."""
    t, p = _np(y_true), _np(y_pred)
    if t.ndim == p.ndim and t.ndim and t.shape[-1] == 1:
        t = t[..., 0]
    if t.shape != p.shape[:-1]:
        raise ValueError(f"sparse_categorical_accuracy: labels of shape {t.shape} do not match "
                         f"predictions of shape {p.shape}; expected labels of shape "
                         f"{p.shape[:-1]}")
    return (np.argmax(p, axis=-1) == t).astype(np.float64)


def categorical_accuracy(y_true, y_pred):
    """Per example, 1.0 where `argmax(y_pred, -1) == argmax(y_true, -1)` (one-hot labels)."""
    t, p = _np(y_true), _np(y_pred)
    if t.shape != p.shape:
        raise ValueError(f"categorical_accuracy: y_true {t.shape} and y_pred {p.shape} must "
                         "have the same shape (one-hot labels)")
    return (np.argmax(p, axis=-1) == np.argmax(t, axis=-1)).astype(np.float64)


def binary_accuracy(y_true, y_pred, threshold=0.5):
    """Per example, the fraction of `(y_pred > threshold) == y_true` over the last axis."""
    t, p = _np(y_true), _np(y_pred)
    if t.shape != p.shape:
        if t.shape + (1,) == p.shape:
            t = t[..., None]
        else:
            raise ValueError(f"binary_accuracy: y_true {t.shape} and y_pred {p.shape} must "
                             "have the same shape")
    hit = ((p > threshold).astype(np.float64) == t.astype(np.float64)).astype(np.float64)
    return hit.mean(axis=-1) if hit.ndim else hit


class Accuracy(MeanMetricWrapper):
    """How often predictions equal labels (exactly).

    >>> m = tg.keras.metrics.Accuracy()
    >>> float(m([1, 2, 3, 4], [0, 2, 3, 4]))
    0.75
    """

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(accuracy, name=name, dtype=dtype)


class SparseCategoricalAccuracy(MeanMetricWrapper):
    """How often `argmax(y_pred)` equals the integer label."""

    def __init__(self, name="sparse_categorical_accuracy", dtype=None):
        super().__init__(sparse_categorical_accuracy, name=name, dtype=dtype)


class CategoricalAccuracy(MeanMetricWrapper):
    """How often `argmax(y_pred)` equals `argmax(y_true)` (one-hot labels).

    >>> m = tg.keras.metrics.CategoricalAccuracy()
    >>> float(m([[0, 0, 1], [0, 1, 0]], [[0.1, 0.9, 0.8], [0.05, 0.95, 0]]))
    0.5
    """

    def __init__(self, name="categorical_accuracy", dtype=None):
        super().__init__(categorical_accuracy, name=name, dtype=dtype)


class BinaryAccuracy(MeanMetricWrapper):
    """How often `y_pred > threshold` matches the 0/1 label.

    >>> m = tg.keras.metrics.BinaryAccuracy()
    >>> float(m([[1], [1], [0], [0]], [[0.98], [1], [0], [0.6]]))
    0.75
    """

    def __init__(self, name="binary_accuracy", dtype=None, threshold=0.5):
        super().__init__(binary_accuracy, name=name, dtype=dtype, threshold=threshold)
        self.threshold = threshold


class MeanSquaredError(MeanMetricWrapper):
    """The mean of `mean((y_true - y_pred)^2, axis=-1)` over examples."""

    def __init__(self, name="mean_squared_error", dtype=None):
        super().__init__(lambda t, p: _np(_losses.mean_squared_error(t, p)), name=name,
                         dtype=dtype)


class MeanAbsoluteError(MeanMetricWrapper):
    """The mean of `mean(|y_true - y_pred|, axis=-1)` over examples."""

    def __init__(self, name="mean_absolute_error", dtype=None):
        super().__init__(lambda t, p: _np(_losses.mean_absolute_error(t, p)), name=name,
                         dtype=dtype)


class BinaryCrossentropy(MeanMetricWrapper):
    """The mean binary cross-entropy over examples (`keras.losses.binary_crossentropy`).

    >>> m = tg.keras.metrics.BinaryCrossentropy(from_logits=True)
    >>> round(float(m([[1.0, 0.0]], [[0.0, 0.0]])), 4)
    0.6931
    """

    def __init__(self, name="binary_crossentropy", dtype=None, from_logits=False,
                 label_smoothing=0.0):
        super().__init__(lambda t, p: _np(_losses.binary_crossentropy(
            t, p, from_logits=from_logits, label_smoothing=label_smoothing)), name=name,
            dtype=dtype)


class CategoricalCrossentropy(MeanMetricWrapper):
    """The mean categorical cross-entropy over examples (one-hot labels)."""

    def __init__(self, name="categorical_crossentropy", dtype=None, from_logits=False,
                 label_smoothing=0.0, axis=-1):
        super().__init__(lambda t, p: _np(_losses.categorical_crossentropy(
            t, p, from_logits=from_logits, label_smoothing=label_smoothing, axis=axis)),
            name=name, dtype=dtype)


class SparseCategoricalCrossentropy(MeanMetricWrapper):
    """The mean sparse categorical cross-entropy over examples (integer labels)."""

    def __init__(self, name="sparse_categorical_crossentropy", dtype=None, from_logits=False,
                 axis=-1):
        super().__init__(lambda t, p: _np(_losses.sparse_categorical_crossentropy(
            t, p, from_logits=from_logits, axis=axis)), name=name, dtype=dtype)


class KLDivergence(MeanMetricWrapper):
    """The mean Kullback-Leibler divergence over examples."""

    def __init__(self, name="kl_divergence", dtype=None):
        super().__init__(lambda t, p: _np(_losses.kl_divergence(t, p)), name=name, dtype=dtype)


class RootMeanSquaredError(Mean):
    """`sqrt(mean((y_true - y_pred)^2))` over every element seen (Keras: the root of the
    running mean, not a mean of roots).

    >>> m = tg.keras.metrics.RootMeanSquaredError()
    >>> float(m([[0.0, 1.0]], [[1.0, 1.0]]))  # sqrt((1 + 0) / 2)
    0.7071067690849304
    """

    def __init__(self, name="root_mean_squared_error", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        _effect(self._update_pair, y_true, y_pred, sample_weight)

    def _update_pair(self, y_true, y_pred, sample_weight):
        t, p = _np(y_true).astype(np.float64), _np(y_pred).astype(np.float64)
        if t.shape != p.shape and t.shape + (1,) == p.shape:
            t = t[..., None]
        self._update(np.square(t - p), sample_weight)

    def _mean(self):
        return float(np.sqrt(super()._mean()))


def _top_k_hits(pred, labels, k):
    """1.0 where the label is among the k largest predictions of its row (ties: as
    tf.math.in_top_k, a label whose score equals the k-th largest counts)."""
    kth = -np.sort(-pred, axis=-1)[..., min(k, pred.shape[-1]) - 1]
    score = np.take_along_axis(pred, labels[..., None].astype(np.intp), axis=-1)[..., 0]
    return (score >= kth).astype(np.float64)


def sparse_top_k_categorical_accuracy(y_true, y_pred, k=5):
    """Per example, 1.0 where the integer label is among the top `k` predictions."""
    t, p = _np(y_true), _np(y_pred)
    if t.ndim == p.ndim and t.shape[-1] == 1:
        t = t[..., 0]
    if t.shape != p.shape[:-1]:
        raise ValueError(f"sparse_top_k_categorical_accuracy: labels of shape {t.shape} do "
                         f"not match predictions of shape {p.shape}")
    return _top_k_hits(p, t, k)


def top_k_categorical_accuracy(y_true, y_pred, k=5):
    """Per example, 1.0 where the one-hot label's class is among the top `k` predictions."""
    t, p = _np(y_true), _np(y_pred)
    if t.shape != p.shape:
        raise ValueError(f"top_k_categorical_accuracy: y_true {t.shape} and y_pred {p.shape} "
                         "must have the same shape (one-hot labels)")
    return _top_k_hits(p, np.argmax(t, axis=-1), k)


class SparseTopKCategoricalAccuracy(MeanMetricWrapper):
    """How often the integer label is among the top `k` predictions.

    >>> m = tg.keras.metrics.SparseTopKCategoricalAccuracy(k=1)
    >>> float(m([2, 1], [[0.1, 0.9, 0.8], [0.05, 0.95, 0]]))
    0.5
    """

    def __init__(self, k=5, name="sparse_top_k_categorical_accuracy", dtype=None):
        super().__init__(sparse_top_k_categorical_accuracy, name=name, dtype=dtype, k=k)
        self.k = k


class TopKCategoricalAccuracy(MeanMetricWrapper):
    """How often the one-hot label's class is among the top `k` predictions."""

    def __init__(self, k=5, name="top_k_categorical_accuracy", dtype=None):
        super().__init__(top_k_categorical_accuracy, name=name, dtype=dtype, k=k)
        self.k = k


class _Confusion(_HostMetric):
    """True/false positives and negatives of `y_pred > threshold` against 0/1 labels."""

    def __init__(self, thresholds=None, top_k=None, class_id=None, name=None, dtype=None):
        if top_k is not None:
            raise NotImplementedError(f"{type(self).__name__}: top_k is not supported; use "
                                      "thresholds")
        single = thresholds is None or np.ndim(thresholds) == 0
        t = np.atleast_1d(np.asarray(0.5 if thresholds is None else thresholds,
                                     dtype=np.float64))
        if ((t < 0) | (t > 1)).any():
            raise ValueError(f"{type(self).__name__}: thresholds must be in [0, 1], got "
                             f"{thresholds!r}")
        self.thresholds, self._single, self.class_id = t, single, class_id
        super().__init__(name=name, dtype=dtype)

    def reset_state(self):
        n = len(self.thresholds)
        self.true_positives = np.zeros(n)
        self.false_positives = np.zeros(n)
        self.false_negatives = np.zeros(n)
        self.true_negatives = np.zeros(n)

    def update_state(self, y_true, y_pred, sample_weight=None):
        _effect(self._update, y_true, y_pred, sample_weight)

    def _update(self, y_true, y_pred, sample_weight):
        t, p = y_true.astype(np.float64), y_pred.astype(np.float64)
        if t.shape != p.shape:
            raise ValueError(f"{type(self).__name__}.update_state: y_true {t.shape} and y_pred "
                             f"{p.shape} must have the same shape")
        if self.class_id is not None:
            t, p = t[..., self.class_id], p[..., self.class_id]
        w = _weights(sample_weight, p, f"{type(self).__name__}.update_state")
        positive = t > 0.5
        for i, th in enumerate(self.thresholds):
            pred = p > th
            self.true_positives[i] += float((w * (pred & positive)).sum())
            self.false_positives[i] += float((w * (pred & ~positive)).sum())
            self.false_negatives[i] += float((w * (~pred & positive)).sum())
            self.true_negatives[i] += float((w * (~pred & ~positive)).sum())

    def _ratio(self, num, den):
        r = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
        return self._scalar(r[0] if self._single else r)


class Precision(_Confusion):
    """`true_positives / (true_positives + false_positives)` at `thresholds` (default 0.5).

    >>> m = tg.keras.metrics.Precision()
    >>> float(m([0, 1, 1, 1], [1, 0, 1, 1]))
    0.6666666865348816
    """

    def __init__(self, thresholds=None, top_k=None, class_id=None, name="precision",
                 dtype=None):
        super().__init__(thresholds, top_k, class_id, name, dtype)

    def result(self):
        return self._ratio(self.true_positives, self.true_positives + self.false_positives)


class Recall(_Confusion):
    """`true_positives / (true_positives + false_negatives)` at `thresholds` (default 0.5).

    >>> m = tg.keras.metrics.Recall()
    >>> float(m([0, 1, 1, 1], [1, 0, 1, 1]))
    0.6666666865348816
    """

    def __init__(self, thresholds=None, top_k=None, class_id=None, name="recall", dtype=None):
        super().__init__(thresholds, top_k, class_id, name, dtype)

    def result(self):
        return self._ratio(self.true_positives, self.true_positives + self.false_negatives)


class AUC(_HostMetric):
    """Area under the ROC curve, Keras' way: true/false positives at `num_thresholds`
    thresholds evenly spaced in [0, 1] (the first just below 0, the last just above 1), and
    the trapezoidal rule over the (false positive rate, true positive rate) points.

    >>> m = tg.keras.metrics.AUC(num_thresholds=3)
    >>> float(m([0, 0, 1, 1], [0, 0.5, 0.3, 0.9]))
    0.75
    """

    def __init__(self, num_thresholds=200, curve="ROC", summation_method="interpolation",
                 name="auc", dtype=None, thresholds=None, multi_label=False,
                 from_logits=False):
        if curve != "ROC" or summation_method != "interpolation" or multi_label:
            raise NotImplementedError("AUC: only curve='ROC', summation_method='interpolation' "
                                      "and multi_label=False are supported")
        if thresholds is None:
            if int(num_thresholds) != num_thresholds or num_thresholds <= 1:
                raise ValueError(f"AUC: num_thresholds must be an integer > 1, got "
                                 f"{num_thresholds!r}")
            inner = [(i + 1) / (num_thresholds - 1) for i in range(int(num_thresholds) - 2)]
        else:
            inner = sorted(float(t) for t in thresholds)
        self.thresholds = np.array([-1e-7] + inner + [1.0 + 1e-7])
        self.from_logits = bool(from_logits)
        super().__init__(name=name, dtype=dtype)

    def reset_state(self):
        n = len(self.thresholds)
        self.true_positives, self.false_positives = np.zeros(n), np.zeros(n)
        self.false_negatives, self.true_negatives = np.zeros(n), np.zeros(n)

    def update_state(self, y_true, y_pred, sample_weight=None):
        _effect(self._update, y_true, y_pred, sample_weight)

    def _update(self, y_true, y_pred, sample_weight):
        t, p = y_true.astype(np.float64), y_pred.astype(np.float64)
        if t.shape != p.shape:
            raise ValueError(f"AUC.update_state: y_true {t.shape} and y_pred {p.shape} must "
                             "have the same shape")
        if self.from_logits:
            p = 1.0 / (1.0 + np.exp(-p))
        w = _weights(sample_weight, p, "AUC.update_state").ravel()
        positive, p = t.ravel() > 0.5, p.ravel()
        above = p[None, :] > self.thresholds[:, None]  # (thresholds, values)
        self.true_positives += (above & positive) @ w
        self.false_positives += (above & ~positive) @ w
        self.false_negatives += (~above & positive) @ w
        self.true_negatives += (~above & ~positive) @ w

    def result(self):
        tp, fp = self.true_positives, self.false_positives
        tpr = np.divide(tp, tp + self.false_negatives, out=np.zeros_like(tp),
                        where=tp + self.false_negatives > 0)
        fpr = np.divide(fp, fp + self.true_negatives, out=np.zeros_like(fp),
                        where=fp + self.true_negatives > 0)
        return self._scalar(np.sum((fpr[:-1] - fpr[1:]) * (tpr[:-1] + tpr[1:]) / 2.0))


def _wrap_loss(fn, sign=1.0):
    """A metric function from a per-example loss of tg.losses (values on the host)."""
    def metric(y_true, y_pred):
        return sign * _np(fn(y_true, y_pred))
    metric.__name__ = fn.__name__
    return metric


class MeanAbsolutePercentageError(MeanMetricWrapper):
    """The mean of `100 * mean(|y_true - y_pred| / max(|y_true|, 1e-7), axis=-1)` over
    examples.

    >>> m = tg.keras.metrics.MeanAbsolutePercentageError()
    >>> float(m([[2.0, 4.0]], [[1.0, 5.0]]))
    37.5
    """

    def __init__(self, name="mean_absolute_percentage_error", dtype=None):
        super().__init__(_wrap_loss(_losses.mean_absolute_percentage_error), name=name,
                         dtype=dtype)


class MeanSquaredLogarithmicError(MeanMetricWrapper):
    """The mean of `mean((log(1 + y_pred) - log(1 + y_true))^2, axis=-1)` over examples.

    >>> m = tg.keras.metrics.MeanSquaredLogarithmicError()
    >>> round(float(m([[0.0]], [[1.718281828]])), 4)
    1.0
    """

    def __init__(self, name="mean_squared_logarithmic_error", dtype=None):
        super().__init__(_wrap_loss(_losses.mean_squared_logarithmic_error), name=name,
                         dtype=dtype)


class LogCoshError(MeanMetricWrapper):
    """The mean of `mean(log(cosh(y_pred - y_true)), axis=-1)` over examples.

    >>> m = tg.keras.metrics.LogCoshError()
    >>> round(float(m([[0.0, 0.0]], [[1.0, -1.0]])), 4)
    0.4338
    """

    def __init__(self, name="logcosh", dtype=None):
        super().__init__(_wrap_loss(_losses.log_cosh), name=name, dtype=dtype)


class CosineSimilarity(MeanMetricWrapper):
    """The mean cosine similarity along `axis` over examples (POSITIVE, unlike the loss:
    1 for the same direction).

    >>> m = tg.keras.metrics.CosineSimilarity()
    >>> float(m([[0.0, 1.0], [1.0, 1.0]], [[0.0, 3.0], [1.0, -1.0]]))
    0.5
    """

    def __init__(self, name="cosine_similarity", dtype=None, axis=-1):
        super().__init__(lambda t, p: -_np(_losses.cosine_similarity(t, p, axis=axis)),
                         name=name, dtype=dtype)
        self.axis = axis


class Hinge(MeanMetricWrapper):
    """The mean hinge loss `mean(max(1 - y_true * y_pred, 0), axis=-1)` over examples (0/1
    labels become -1/1).

    >>> m = tg.keras.metrics.Hinge()
    >>> round(float(m([[0.0, 1.0]], [[0.6, 0.4]])), 4)
    1.1
    """

    def __init__(self, name="hinge", dtype=None):
        super().__init__(_wrap_loss(_losses.hinge), name=name, dtype=dtype)


class SquaredHinge(MeanMetricWrapper):
    """The mean squared hinge loss over examples.

    >>> m = tg.keras.metrics.SquaredHinge()
    >>> round(float(m([[0.0, 1.0]], [[0.6, 0.4]])), 4)
    1.46
    """

    def __init__(self, name="squared_hinge", dtype=None):
        super().__init__(_wrap_loss(_losses.squared_hinge), name=name, dtype=dtype)


class CategoricalHinge(MeanMetricWrapper):
    """The mean categorical hinge loss over examples (one-hot labels).

    >>> m = tg.keras.metrics.CategoricalHinge()
    >>> round(float(m([[0.0, 1.0]], [[0.6, 0.4]])), 4)
    1.2
    """

    def __init__(self, name="categorical_hinge", dtype=None):
        super().__init__(_wrap_loss(_losses.categorical_hinge), name=name, dtype=dtype)


class Poisson(MeanMetricWrapper):
    """The mean of `mean(y_pred - y_true * log(y_pred + 1e-7), axis=-1)` over examples.

    >>> m = tg.keras.metrics.Poisson()
    >>> float(m([[1.0, 0.0]], [[1.0, 2.0]]))
    1.5
    """

    def __init__(self, name="poisson", dtype=None):
        super().__init__(_wrap_loss(_losses.poisson), name=name, dtype=dtype)


class _Count(_Confusion):
    """The (weighted) count of one cell of the confusion matrix at `thresholds`: a scalar for
    one threshold (default 0.5), a vector for a list."""

    _cell = None

    def __init__(self, thresholds=None, name=None, dtype=None):
        super().__init__(thresholds, None, None, name or self._cell, dtype)

    def result(self):
        counts = getattr(self, self._cell)
        return self._scalar(counts[0] if self._single else counts)


class TruePositives(_Count):
    """The weighted number of positive labels predicted above the threshold.

    >>> m = tg.keras.metrics.TruePositives()
    >>> float(m([0, 1, 1, 1], [1, 0, 1, 1]))
    2.0
    """

    _cell = "true_positives"


class FalsePositives(_Count):
    """The weighted number of negative labels predicted above the threshold.

    >>> m = tg.keras.metrics.FalsePositives(thresholds=[0.2, 0.7])
    >>> m([0, 0, 1, 0], [0.1, 0.5, 0.9, 0.8]).numpy()
    array([2., 1.], dtype=float32)
    """

    _cell = "false_positives"


class TrueNegatives(_Count):
    """The weighted number of negative labels predicted at or below the threshold.

    >>> m = tg.keras.metrics.TrueNegatives()
    >>> float(m([0, 1, 0, 0], [0.1, 0.3, 0.9, 0.2]))
    2.0
    """

    _cell = "true_negatives"


class FalseNegatives(_Count):
    """The weighted number of positive labels predicted at or below the threshold.

    >>> m = tg.keras.metrics.FalseNegatives()
    >>> float(m([0, 1, 1, 1], [0, 0.4, 0.6, 1]))
    1.0
    """

    _cell = "false_negatives"


class FBetaScore(_HostMetric):
    """The F-beta score `(1 + beta^2) * precision * recall / (beta^2 * precision + recall)`
    of 2-D multi-label (or one-hot) predictions, per class, as Keras 3:

    - a prediction counts as positive where it exceeds `threshold`, or (threshold=None) where
      it is its row's maximum (and not 0);
    - `average=None` gives one score per class; 'micro' pools the counts of every class;
      'macro' averages the per-class scores; 'weighted' averages them weighted by each
      class's (weighted) number of positive labels;
    - the ratios add 1e-7 to their denominators (Keras), so a class never seen scores 0.

    >>> m = tg.keras.metrics.FBetaScore(beta=2.0, threshold=0.5)
    >>> m([[1, 0], [1, 1], [0, 1]], [[0.9, 0.2], [0.1, 0.7], [0.6, 0.8]]).numpy().round(4)
    array([0.5, 1. ], dtype=float32)
    """

    def __init__(self, average=None, beta=1.0, threshold=None, name="fbeta_score",
                 dtype=None):
        who = type(self).__name__
        if average not in (None, "micro", "macro", "weighted"):
            raise ValueError(f"{who}: invalid `average` argument value. Expected one of: "
                             f"{{None, 'micro', 'macro', 'weighted'}}. Received: "
                             f"average={average!r}")
        if not isinstance(beta, float) or not beta > 0.0:
            raise ValueError(f"{who}: `beta` must be a Python float > 0, got {beta!r}")
        if threshold is not None and (not isinstance(threshold, float) or
                                      not 0.0 < threshold <= 1.0):
            raise ValueError(f"{who}: `threshold` must be None or a Python float with "
                             f"0 < threshold <= 1, got {threshold!r}")
        self.average, self.beta, self.threshold = average, beta, threshold
        super().__init__(name=name, dtype=dtype)

    def reset_state(self):
        self._counts = None  # (tp, fp, fn, positives) per class, made by the first update

    def update_state(self, y_true, y_pred, sample_weight=None):
        _effect(self._update, y_true, y_pred, sample_weight)

    def _update(self, y_true, y_pred, sample_weight):
        t, p = y_true.astype(np.float64), y_pred.astype(np.float64)
        if t.ndim != 2 or p.ndim != 2 or t.shape != p.shape:
            raise ValueError(f"{type(self).__name__}: expects 2D inputs of one shape "
                             f"(batch_size, output_dim); received y_true.shape={t.shape} "
                             f"and y_pred.shape={p.shape}")
        if self._counts is not None and self._counts.shape[1] != p.shape[1]:
            raise ValueError(f"{type(self).__name__}: got {p.shape[1]} classes after "
                             f"{self._counts.shape[1]}")
        if self.threshold is None:
            hit = (p >= p.max(axis=-1, keepdims=True)) & (np.abs(p) > 1e-9)
        else:
            hit = p > self.threshold
        hit = hit.astype(np.float64)
        w = np.ones((len(p), 1)) if sample_weight is None else \
            np.broadcast_to(np.asarray(sample_weight, np.float64).reshape(-1, 1),
                            (len(p), 1))
        cells = np.stack([hit * t, hit * (1 - t), (1 - hit) * t, t])  # tp, fp, fn, positives
        counts = (cells * w).sum(axis=1)
        self._counts = counts if self._counts is None else self._counts + counts

    def _score(self):
        if self._counts is None:
            return np.float64(0.0) if self.average is not None else np.zeros(0)
        tp, fp, fn, positives = self._counts
        if self.average == "micro":
            tp, fp, fn = tp.sum(), fp.sum(), fn.sum()
        eps, b2 = 1e-7, self.beta ** 2
        precision, recall = tp / (tp + fp + eps), tp / (tp + fn + eps)
        score = (1 + b2) * precision * recall / (b2 * precision + recall + eps)
        if self.average == "weighted":
            return np.sum(score * positives / (positives.sum() + eps))
        return np.mean(score) if self.average is not None else score

    def result(self):
        return self._scalar(self._score())


class F1Score(FBetaScore):
    """The F1 score `2 * precision * recall / (precision + recall)`: `FBetaScore` with
    beta=1.0 (Keras 3's arguments and averages).

    >>> m = tg.keras.metrics.F1Score(average="micro", threshold=0.5)
    >>> round(float(m([[1, 0], [1, 1], [0, 1]], [[0.9, 0.2], [0.1, 0.7], [0.6, 0.8]])), 4)
    0.75
    """

    def __init__(self, average=None, threshold=None, name="f1_score", dtype=None):
        super().__init__(average=average, beta=1.0, threshold=threshold, name=name,
                         dtype=dtype)


class R2Score(_HostMetric):
    """The coefficient of determination `1 - sum(w (y - y_pred)^2) / sum(w (y - mean(y))^2)`
    per output column of 2-D inputs, as Keras 3: `class_aggregation` is 'uniform_average'
    (the mean over columns), 'variance_weighted_average' (weighted by each column's
    variance) or None (one score per column); a column of constant labels scores 0.
    `num_regressors` > 0 gives the adjusted score `1 - (1 - r2) (n - 1) / (n - p - 1)`, where
    n counts every label value seen (Keras' count; it falls back to the plain score with a
    warning when n - 1 <= p).

    >>> m = tg.keras.metrics.R2Score()
    >>> round(float(m([[1.0], [2.0], [3.0]], [[1.0], [2.0], [4.0]])), 4)  # 1 - 1 / 2
    0.5
    """

    def __init__(self, class_aggregation="uniform_average", num_regressors=0,
                 name="r2_score", dtype=None):
        valid = ("uniform_average", "variance_weighted_average", None)
        if class_aggregation not in valid:
            raise ValueError(f"R2Score: invalid value for argument `class_aggregation`. "
                             f"Expected one of {valid}. Received: "
                             f"class_aggregation={class_aggregation!r}")
        if isinstance(num_regressors, bool) or not isinstance(num_regressors, int) or \
                num_regressors < 0:
            raise ValueError(f"R2Score: invalid value for argument `num_regressors`. Expected "
                             f"an integer >= 0. Received: num_regressors={num_regressors!r}")
        self.class_aggregation, self.num_regressors = class_aggregation, num_regressors
        super().__init__(name=name, dtype=dtype)

    def reset_state(self):
        self._sums = None  # (sum w y, sum w y^2, sum w (y - y_pred)^2, sum w) per column
        self.num_samples = 0

    def update_state(self, y_true, y_pred, sample_weight=None):
        _effect(self._update, y_true, y_pred, sample_weight)

    def _update(self, y_true, y_pred, sample_weight):
        t, p = y_true.astype(np.float64), y_pred.astype(np.float64)
        if t.ndim == p.ndim - 1 and p.shape[-1] == 1:
            t = t[..., None]
        elif p.ndim == t.ndim - 1 and t.shape[-1] == 1:
            p = p[..., None]
        if t.ndim != 2 or t.shape != p.shape:
            raise ValueError(f"R2Score: expects 2D inputs with shape (batch_size, "
                             f"output_dim); received y_true.shape={y_true.shape} and "
                             f"y_pred.shape={y_pred.shape}")
        if self._sums is not None and self._sums.shape[1] != t.shape[1]:
            raise ValueError(f"R2Score: got {t.shape[1]} output columns after "
                             f"{self._sums.shape[1]}")
        w = _weights(sample_weight, t, "R2Score.update_state")
        sums = np.stack([(w * t).sum(0), (w * t * t).sum(0), (w * (t - p) ** 2).sum(0),
                         w.sum(0)])
        self._sums = sums if self._sums is None else self._sums + sums
        self.num_samples += t.size

    def _score(self):
        if self._sums is None:
            return np.float64(0.0)
        total, squares, residual, count = self._sums
        with np.errstate(divide="ignore", invalid="ignore"):
            variance = squares - total * (total / count)
            raw = 1.0 - residual / variance
        raw = np.where(np.isinf(raw), 0.0, raw)
        if self.class_aggregation == "uniform_average":
            score = np.mean(raw)
        elif self.class_aggregation == "variance_weighted_average":
            score = np.sum(variance * raw) / np.sum(variance)
        else:
            score = raw
        n, k = self.num_samples, self.num_regressors
        if k and k >= n - 1:
            warnings.warn("R2Score: more independent predictors than data points (or as "
                          "many as n - 1) in the adjusted R2 score; falling back to the "
                          "standard R2 score", stacklevel=3)
        elif k:
            score = 1.0 - (1.0 - score) * (n - 1) / (n - k - 1)
        return score

    def result(self):
        return self._scalar(self._score())


class MeanIoU(_HostMetric):
    """The mean intersection-over-union of `num_classes` classes, as Keras 3: a weighted
    confusion matrix of (label, prediction) pairs is accumulated, and the result is the mean
    of `tp / (tp + fp + fn)` over the classes that appear (as a label or a prediction).

    Labels and predictions are class ids (truncated toward 0, as Keras' int64 state does),
    or with `sparse_y_true=False` / `sparse_y_pred=False` scores whose argmax along `axis` is
    taken. Pairs with an id outside [0, num_classes), or a label equal to `ignore_class`, are
    not counted. Sample weights stay floats (Keras' int64 state truncates them, with a
    warning), and one weight per example is broadcast over the example's positions.

    >>> m = tg.keras.metrics.MeanIoU(num_classes=2)
    >>> round(float(m([0, 0, 1, 1], [0, 1, 0, 1])), 4)  # (1/3 + 1/3) / 2
    0.3333
    """

    def __init__(self, num_classes, name=None, dtype=None, ignore_class=None,
                 sparse_y_true=True, sparse_y_pred=True, axis=-1):
        if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) \
                or num_classes < 1:
            raise ValueError(f"MeanIoU: num_classes must be an integer >= 1, got "
                             f"{num_classes!r}")
        self.num_classes, self.ignore_class = int(num_classes), ignore_class
        self.sparse_y_true, self.sparse_y_pred = bool(sparse_y_true), bool(sparse_y_pred)
        self.axis = axis
        super().__init__(name=name or "mean_io_u", dtype=dtype)

    def reset_state(self):
        self.total_cm = np.zeros((self.num_classes, self.num_classes))

    def update_state(self, y_true, y_pred, sample_weight=None):
        _effect(self._update, y_true, y_pred, sample_weight)

    def _update(self, y_true, y_pred, sample_weight):
        t = y_true if self.sparse_y_true else np.argmax(y_true, axis=self.axis)
        p = y_pred if self.sparse_y_pred else np.argmax(y_pred, axis=self.axis)
        # ids truncate toward 0 before the range test (Keras' default int64 state)
        t, p = np.trunc(t.astype(np.float64)), np.trunc(p.astype(np.float64))
        if t.size != p.size:
            raise ValueError(f"MeanIoU.update_state: {t.size} labels (shape {t.shape}) and "
                             f"{p.size} predictions (shape {p.shape}); give one prediction "
                             "per label")
        w = _weights(sample_weight, t, "MeanIoU.update_state").ravel()
        t, p = t.ravel(), p.ravel()
        n = self.num_classes
        keep = (t >= 0) & (t < n) & (p >= 0) & (p < n)
        if self.ignore_class is not None:
            keep &= t != self.ignore_class
        np.add.at(self.total_cm, (t[keep].astype(np.int64), p[keep].astype(np.int64)),
                  w[keep])

    def result(self):
        cm = self.total_cm
        tp = np.diag(cm)
        denominator = cm.sum(axis=0) + cm.sum(axis=1) - tp
        valid = denominator > 1e-9
        iou = np.where(valid, tp / (denominator + 1e-7), 0.0)
        return self._scalar(iou.sum() / (valid.sum() + 1e-7))


_BY_NAME = {
    "accuracy": Accuracy, "acc": Accuracy, "sparse_categorical_accuracy":
    SparseCategoricalAccuracy, "categorical_accuracy": CategoricalAccuracy,
    "binary_accuracy": BinaryAccuracy, "mean_squared_error": MeanSquaredError,
    "mse": MeanSquaredError, "mean_absolute_error": MeanAbsoluteError,
    "mae": MeanAbsoluteError, "precision": Precision, "recall": Recall, "auc": AUC,
    "mean": Mean,
    "sum": Sum,
    "binary_crossentropy": BinaryCrossentropy, "categorical_crossentropy":
    CategoricalCrossentropy, "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
    "kl_divergence": KLDivergence, "kld": KLDivergence,
    "root_mean_squared_error": RootMeanSquaredError,
    "sparse_top_k_categorical_accuracy": SparseTopKCategoricalAccuracy,
    "top_k_categorical_accuracy": TopKCategoricalAccuracy,
    "mean_absolute_percentage_error": MeanAbsolutePercentageError,
    "mape": MeanAbsolutePercentageError,
    "mean_squared_logarithmic_error": MeanSquaredLogarithmicError,
    "msle": MeanSquaredLogarithmicError, "logcosh": LogCoshError, "log_cosh": LogCoshError,
    "cosine_similarity": CosineSimilarity, "hinge": Hinge, "squared_hinge": SquaredHinge,
    "categorical_hinge": CategoricalHinge, "poisson": Poisson,
    "true_positives": TruePositives, "false_positives": FalsePositives,
    "true_negatives": TrueNegatives, "false_negatives": FalseNegatives,
    "f1_score": F1Score, "fbeta_score": FBetaScore, "r2_score": R2Score,
}


def get(identifier):
    """A metric from a name ('accuracy', 'mae', ...), a Metric, or a function
    `fn(y_true, y_pred)` (averaged over examples)."""
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, str):
        if identifier not in _BY_NAME:
            raise ValueError(f"Could not interpret metric identifier: {identifier!r}; valid "
                             f"names: {sorted(_BY_NAME)}, a keras.metrics.Metric or a function "
                             "fn(y_true, y_pred)")
        return _BY_NAME[identifier]()
    if callable(identifier):
        return MeanMetricWrapper(lambda t, p: _np(identifier(t, p)),
                                 name=getattr(identifier, "__name__", "metric"))
    raise ValueError(f"Could not interpret metric identifier: {identifier!r}")
