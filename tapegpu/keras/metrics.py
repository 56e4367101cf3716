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

import numpy as np

from ..core.tensor import Tensor, Variable, _thread, constant
from ..models import initializers as _initializers
from ..models import losses as _losses
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
    that reruns it with each call's tensor values (the others are constants of the trace)."""
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
            current[i] = _host(a)
        update(*current)

    for tracer in _thread.tracers:
        tracer.on_update(replay, tensors, [])


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
        self.dtype = dtype or "float32"
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
        """`result()` as a Python float (what fit's logs hold), without making a tensor."""
        return float(_np(self.result()))

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}>"


class _HostMetric(Metric):
    """tapegpu's metrics: their state is float64 numbers on the host, set by reset_state."""

    def __init__(self, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.reset_state()


def _snake(name):
    out = ""
    for i, c in enumerate(name):
        if c.isupper() and i and not name[i - 1].isupper():
            out += "_"
        out += c.lower()
    return out


class Mean(_HostMetric):
    """The (weighted) mean of every value given: `sum(values * w) / sum(w)`.

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
        self.total += float((v * w).sum())
        self.count += float(w.sum())

    def _mean(self):
        return self.total / self.count if self.count else 0.0

    def result(self):
        return self._scalar(self._mean())

    def _value(self):  # fit's logs: the result's value without making a tensor
        return float(np.asarray(self._mean(), self.dtype))


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
    """The mean of `fn(y_true, y_pred, **kwargs)` over every example seen."""

    def __init__(self, fn, name=None, dtype=None, **kwargs):
        self._fn, self._fn_kwargs = fn, kwargs
        super().__init__(name=name or getattr(fn, "__name__", "mean_metric_wrapper"),
                         dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        _effect(self._update_pair, y_true, y_pred, sample_weight)

    def _update_pair(self, y_true, y_pred, sample_weight):
        self._update(_np(self._fn(y_true, y_pred, **self._fn_kwargs)), sample_weight)


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
