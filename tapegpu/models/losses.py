"""Keras losses: `MeanSquaredError`, `MeanAbsoluteError`, `Huber`, `BinaryCrossentropy`,
`SparseCategoricalCrossentropy`, `CategoricalCrossentropy`, `KLDivergence`, `Hinge`,
`SquaredHinge`, `CategoricalHinge`, `LogCosh`, `CosineSimilarity`,
`MeanAbsolutePercentageError`, `MeanSquaredLogarithmicError`, `Poisson`.

A loss object is called as `loss(y_true, y_pred, sample_weight=None)`. It computes one value per
example (`mean_squared_error` averages the last axis; the cross-entropies reduce the class
axis), multiplies by `sample_weight` if given, and reduces as Keras does:
`'sum_over_batch_size'` (default: the sum divided by the number of per-example values),
`'sum'`, or `'none'` (the per-example values).

Cross-entropies of logits (`from_logits=True`) use the stable log-sum-exp forms. Of
probabilities, they renormalise the class axis and clip to [1e-7, 1 - 1e-7] before the log,
as Keras does, so a probability of 0 gives a finite loss.

Per-example gradients: compute the per-example losses (`reduction='none'`) under a tape and
take `tape.jacobian(losses, variables)`. Each result has shape `(batch,) + variable.shape`; row
i is the gradient of example i's loss. It is one forward pass and one batched backward sweep,
not a loop over examples (see `examples/per_example_gradients.py` and
`benchmarks/per_example.py`).

>>> model = tg.layers.Sequential([tg.layers.Dense(3, activation="gelu"), tg.layers.Dense(2)])
>>> x, y = tg.random.normal((5, 4)), tg.constant([0, 1, 1, 0, 1])
>>> loss_fn = tg.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
>>> with tg.GradientTape() as tape:
...     losses = loss_fn(y, model(x))           # shape (5,)
>>> grads = tape.jacobian(losses, model.trainable_variables)
>>> [g.shape for g in grads]
[(5, 4, 3), (5, 3), (5, 3, 2), (5, 2)]
"""
import math

import numpy as np

from .. import ops
from ..backends import checks
from ..core.tensor import Tensor, Variable, convert_to_tensor
from ..ops.registry import InvalidArgumentError
from .tensor_attributes import get_keras_logits, get_keras_mask

EPSILON = 1e-7  # Keras' backend.epsilon(), the probability clip
_REDUCTIONS = ("sum_over_batch_size", "sum", "none", "auto")


def _pred(y_pred, who):
    y = y_pred._read() if isinstance(y_pred, Variable) else y_pred
    y = y if isinstance(y, Tensor) else convert_to_tensor(y)
    if y._data.dtype.kind != "f":
        raise TypeError(f"{who}: y_pred must be floating, got {y.dtype.name} of shape {y.shape}")
    return y


def _true_like(y_true, y_pred):
    """y_true in y_pred's dtype (labels follow the predictions, as in Keras)."""
    t = convert_to_tensor(y_true, dtype_hint=y_pred.dtype)
    return t if t._data.dtype == y_pred._data.dtype else ops.cast(t, y_pred.dtype)


def mean_squared_error(y_true, y_pred):
    """Per-example mean of squared errors over the last axis.

    >>> tg.losses.mean_squared_error([[0.0, 2.0]], [[1.0, 1.0]]).numpy()
    array([1.], dtype=float32)
    """
    y_true, y_pred = _same_shape(y_true, y_pred, "mean_squared_error")
    return ops.reduce_mean(ops.squared_difference(y_pred, y_true), axis=-1)


def _same_shape(y_true, y_pred, who):
    """y_true and y_pred of one shape, after Keras' one adjustment: where their ranks differ by
    one and the longer ends in an axis of 1, a vector is given that axis and anything else loses
    it ((n,) labels against (n, 1) predictions compare row by row, never as an (n, n)
    broadcast). Other shape differences raise."""
    y_pred = _pred(y_pred, who)
    y_true = _true_like(y_true, y_pred)
    if y_true.shape == y_pred.shape:
        return y_true, y_pred
    t, p = _same_rank(y_true, y_pred)
    if t.shape != p.shape:
        raise ValueError(f"{who}: y_true {y_true.shape} and y_pred {y_pred.shape} must have "
                         "the same shape (or differ by a last axis of 1)")
    return t, p


def _same_rank(a, b):
    if a.ndim == b.ndim + 1 and a.shape[-1] == 1:
        return (a, ops.expand_dims(b, -1)) if b.ndim == 1 else (ops.squeeze(a, -1), b)
    if b.ndim == a.ndim + 1 and b.shape[-1] == 1:
        return (ops.expand_dims(a, -1), b) if a.ndim == 1 else (a, ops.squeeze(b, -1))
    return a, b


def mean_absolute_error(y_true, y_pred):
    """Per-example mean of absolute errors over the last axis.

    >>> tg.losses.mean_absolute_error([[0.0, 2.0]], [[1.0, 1.0]]).numpy()
    array([1.], dtype=float32)
    """
    y_true, y_pred = _same_shape(y_true, y_pred, "mean_absolute_error")
    return ops.reduce_mean(ops.abs(y_pred - y_true), axis=-1)


def huber(y_true, y_pred, delta=1.0):
    """Per-example mean over the last axis of `0.5 * e^2` where `|e| <= delta`, else
    `delta * (|e| - 0.5 * delta)` (e = y_pred - y_true).

    >>> tg.losses.huber([[0.0, 0.0]], [[0.5, 3.0]]).numpy()
    array([1.3125], dtype=float32)
    """
    y_true, y_pred = _same_shape(y_true, y_pred, "huber")
    if not delta > 0:
        raise ValueError(f"huber: delta must be > 0, got {delta}")
    err = ops.abs(y_pred - y_true)
    small = ops.minimum(err, ops.cast(delta, err.dtype))
    # 0.5 * min(e, d)^2 + d * (e - min(e, d)): both branches in one differentiable form
    return ops.reduce_mean(0.5 * small * small + delta * (err - small), axis=-1)


def _keras_logits(y_pred, kind):
    """The logits of `y_pred` when it is a Keras activation's output of this kind
    ("categorical" or "binary"; tapegpu/keras/layers/activations.py `_activate`), else None.
    Keras on TensorFlow computes such cross-entropies from the logits: exact, and with a
    gradient where clipped probabilities have none."""
    link = get_keras_logits(y_pred)
    return link[1] if link is not None and link[0] == kind else None


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    """Per-example mean over the last axis of `-(y log p + (1 - y) log(1 - p))`; probabilities
    are clipped to [1e-7, 1 - 1e-7] (Keras), logits use the stable form (also for the
    output of a Keras layer's logistic activation: from its logits, as Keras on TensorFlow).

    >>> tg.losses.binary_crossentropy([[1.0, 0.0]], [[0.0, 0.0]], from_logits=True).numpy()
    array([0.6931472], dtype=float32)
    """
    logits = None if from_logits else _keras_logits(y_pred, "binary")
    if logits is not None:
        y_pred, from_logits = logits, True
    y_true, y_pred = _same_shape(y_true, y_pred, "binary_crossentropy")
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:
        values = ops.sigmoid_cross_entropy_with_logits(labels=y_true, logits=y_pred)
    else:
        p = ops.clip_by_value(y_pred, EPSILON, 1.0 - EPSILON)
        values = -(y_true * ops.log(p) + (1.0 - y_true) * ops.log(1.0 - p))
    return ops.reduce_mean(values, axis=axis)


def kl_divergence(y_true, y_pred):
    """Per-example `sum(y_true * log(y_true / y_pred))` over the last axis, both clipped to
    [1e-7, 1] (Keras).

    >>> tg.losses.kl_divergence([[0.5, 0.5]], [[0.5, 0.5]]).numpy()
    array([0.], dtype=float32)
    """
    y_true, y_pred = _same_shape(y_true, y_pred, "kl_divergence")
    t = ops.clip_by_value(y_true, EPSILON, 1.0)
    p = ops.clip_by_value(y_pred, EPSILON, 1.0)
    return ops.reduce_sum(t * ops.log(t / p), axis=-1)


def _hinge_labels(y_true):
    """Keras' hinge labels: 0/1 labels become -1/1 when every label is 0 or 1; other labels
    (already -1/1) are kept. Decided on the device (no host read)."""
    binary = ops.reduce_all(ops.logical_or(ops.equal(y_true, 0.0), ops.equal(y_true, 1.0)))
    return ops.where(binary, 2.0 * y_true - 1.0, y_true)


def hinge(y_true, y_pred):
    """Per-example mean over the last axis of `max(1 - y_true * y_pred, 0)`; labels of 0/1
    are first mapped to -1/1 (Keras).

    >>> tg.losses.hinge([[0.0, 1.0]], [[0.6, 0.4]]).numpy()  # mean(1 + 0.6, 1 - 0.4)
    array([1.1], dtype=float32)
    """
    y_true, y_pred = _same_shape(y_true, y_pred, "hinge")
    margin = 1.0 - _hinge_labels(y_true) * y_pred
    return ops.reduce_mean(ops.maximum(margin, ops.zeros((), dtype=margin.dtype)), axis=-1)


def squared_hinge(y_true, y_pred):
    """Per-example mean over the last axis of `max(1 - y_true * y_pred, 0)^2`; labels of 0/1
    are first mapped to -1/1 (Keras).

    >>> tg.losses.squared_hinge([[0.0, 1.0]], [[0.6, 0.4]]).numpy()  # mean(1.6^2, 0.6^2)
    array([1.46], dtype=float32)
    """
    y_true, y_pred = _same_shape(y_true, y_pred, "squared_hinge")
    margin = ops.maximum(1.0 - _hinge_labels(y_true) * y_pred, ops.zeros((), y_pred.dtype))
    return ops.reduce_mean(ops.square(margin), axis=-1)


def categorical_hinge(y_true, y_pred):
    """Per-example `max(neg - pos + 1, 0)` with `pos = sum(y_true * y_pred)` and
    `neg = max((1 - y_true) * y_pred)` over the last axis (one-hot labels).

    >>> tg.losses.categorical_hinge([[0.0, 1.0]], [[0.6, 0.4]]).numpy()  # 0.6 - 0.4 + 1
    array([1.2], dtype=float32)
    """
    y_true, y_pred = _same_shape(y_true, y_pred, "categorical_hinge")
    pos = ops.reduce_sum(y_true * y_pred, axis=-1)
    neg = ops.reduce_max((1.0 - y_true) * y_pred, axis=-1)
    return ops.maximum(neg - pos + 1.0, ops.zeros((), dtype=pos.dtype))


def log_cosh(y_true, y_pred):
    """Per-example mean over the last axis of `log(cosh(y_pred - y_true))`, computed as
    `x + softplus(-2x) - log(2)` so large errors do not overflow (Keras).

    >>> tg.losses.log_cosh([[0.0, 0.0]], [[1.0, -1.0]]).numpy()
    array([0.43378085], dtype=float32)
    """
    y_true, y_pred = _same_shape(y_true, y_pred, "log_cosh")
    x = y_pred - y_true
    return ops.reduce_mean(x + ops.softplus(-2.0 * x) - math.log(2.0), axis=-1)


def _unit(x, axis):
    """x / max(||x||, 1e-7) along `axis` (Keras' `ops.normalize`: the inverse norm is capped
    at 1 / epsilon, so a zero vector stays zero, with a finite gradient)."""
    square_sum = ops.reduce_sum(ops.square(x), axis=axis, keepdims=True)
    return x * ops.rsqrt(ops.maximum(square_sum, EPSILON * EPSILON))


def cosine_similarity(y_true, y_pred, axis=-1):
    """Per-example NEGATIVE cosine similarity `-sum(unit(y_true) * unit(y_pred))` along `axis`
    (Keras' loss: -1 for the same direction, 0 for orthogonal vectors or a zero vector).

    >>> tg.losses.cosine_similarity([[0.0, 1.0], [1.0, 0.0]], [[0.0, 3.0], [-2.0, 0.0]]).numpy()
    array([-1.,  1.], dtype=float32)
    """
    y_true, y_pred = _same_shape(y_true, y_pred, "cosine_similarity")
    return -ops.reduce_sum(_unit(y_true, axis) * _unit(y_pred, axis), axis=axis)


def mean_absolute_percentage_error(y_true, y_pred):
    """Per-example `100 * mean(|y_true - y_pred| / max(|y_true|, 1e-7))` over the last axis.

    >>> tg.losses.mean_absolute_percentage_error([[2.0, 4.0]], [[1.0, 5.0]]).numpy()
    array([37.5], dtype=float32)
    """
    y_true, y_pred = _same_shape(y_true, y_pred, "mean_absolute_percentage_error")
    scale = ops.maximum(ops.abs(y_true), ops.cast(EPSILON, y_true.dtype))
    return 100.0 * ops.reduce_mean(ops.abs((y_true - y_pred) / scale), axis=-1)


def mean_squared_logarithmic_error(y_true, y_pred):
    """Per-example mean over the last axis of `(log(1 + p) - log(1 + t))^2`, with `p` and `t`
    first raised to at least 1e-7 (Keras).

    >>> tg.losses.mean_squared_logarithmic_error([[0.0]], [[1.718281828]]).numpy().round(4)
    array([1.], dtype=float32)
    """
    y_true, y_pred = _same_shape(y_true, y_pred, "mean_squared_logarithmic_error")
    eps = ops.cast(EPSILON, y_pred.dtype)
    first = ops.log(ops.maximum(y_pred, eps) + 1.0)
    second = ops.log(ops.maximum(y_true, eps) + 1.0)
    return ops.reduce_mean(ops.square(first - second), axis=-1)


def poisson(y_true, y_pred):
    """Per-example mean over the last axis of `y_pred - y_true * log(y_pred + 1e-7)`.

    >>> tg.losses.poisson([[1.0, 0.0]], [[1.0, 2.0]]).numpy()  # (1 - log(1) + 2) / 2
    array([1.5], dtype=float32)
    """
    y_true, y_pred = _same_shape(y_true, y_pred, "poisson")
    return ops.reduce_mean(y_pred - y_true * ops.log(y_pred + EPSILON), axis=-1)


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, axis=-1):
    """Per-example cross-entropy with integer class labels.

    Labels must lie in [0, number of classes); one outside raises `tg.InvalidArgumentError`
    (with probabilities as with logits).

    >>> tg.losses.sparse_categorical_crossentropy([0], [[0.0, 0.0]], from_logits=True).numpy()
    array([0.6931472], dtype=float32)
    """
    return _sparse_categorical_crossentropy(y_true, y_pred, from_logits, axis,
                                            "sparse_categorical_crossentropy")


def _sparse_categorical_crossentropy(y_true, y_pred, from_logits, axis, who):
    logits = None if from_logits or axis not in (-1, getattr(y_pred, "ndim", 0) - 1) else \
        _keras_logits(y_pred, "categorical")
    if logits is not None:  # a Keras layer's activation output: from its logits (Keras on TF)
        y_pred, from_logits = logits, True
    y_pred = _pred(y_pred, who)
    labels = convert_to_tensor(y_true)
    if labels._data.dtype.kind == "f":  # Keras accepts float labels holding integers
        labels = ops.cast(labels, "int64")
    if labels.ndim == y_pred.ndim and labels.shape[-1] == 1:
        labels = ops.reshape(labels, labels.shape[:-1])
    if axis not in (-1, y_pred.ndim - 1):
        raise ValueError(f"{who}: only the last axis can hold the classes, got axis={axis}")
    if labels.shape != y_pred.shape[:-1]:
        raise ValueError(f"{who}: labels of shape {labels.shape} do not match predictions of "
                         f"shape {y_pred.shape}; labels must have shape {y_pred.shape[:-1]} "
                         f"(or {y_pred.shape[:-1] + (1,)}) with values in [0, {y_pred.shape[-1]})")
    _check_labels(labels, y_pred.shape[-1], who)
    if from_logits:
        return ops.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=y_pred)
    log_p = ops.log(_clipped_probabilities(y_pred))
    hot = ops.one_hot(labels, y_pred.shape[-1], dtype=y_pred.dtype)
    return -ops.reduce_sum(hot * log_p, axis=-1)


def _check_labels(labels, n, who):
    """Raises InvalidArgumentError for the first label outside [0, n) (TensorFlow's check); on a
    GPU the check is queued without a sync and raised at the next host read (backends.checks)."""
    data = labels._data
    if not data.size:
        return
    xp = labels._dev.xp
    bad = (data < 0) | (data >= n)
    if checks.deferred(xp):
        checks.check(xp, bad, lambda host: _label_error(host, n, who), data)
    elif bool(bad.any()):
        raise _label_error(data, n, who)


def _label_error(data, n, who):
    index = np.unravel_index(int(((data < 0) | (data >= n)).ravel().argmax()), data.shape)
    return InvalidArgumentError(f"{who}: received a label value of {int(data[index])} (at index "
                                f"{tuple(int(i) for i in index)}) which is outside the valid "
                                f"range of [0, {n}) for predictions with {n} classes")


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    """Per-example cross-entropy with one-hot (or soft) labels.

    >>> tg.losses.categorical_crossentropy([[1.0, 0.0]], [[0.5, 0.5]]).numpy()
    array([0.6931472], dtype=float32)
    """
    who = "categorical_crossentropy"
    logits = None if from_logits or axis not in (-1, getattr(y_pred, "ndim", 0) - 1) else \
        _keras_logits(y_pred, "categorical")
    if logits is not None:  # a Keras layer's activation output: from its logits (Keras on TF)
        y_pred, from_logits = logits, True
    y_pred = _pred(y_pred, who)
    y_true = _true_like(y_true, y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"{who}: y_true {y_true.shape} and y_pred {y_pred.shape} must have the "
                         "same shape (one-hot labels; use SparseCategoricalCrossentropy for "
                         "integer labels)")
    if label_smoothing:
        n = y_pred.shape[axis]
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / n
    if from_logits:
        return ops.softmax_cross_entropy_with_logits(y_true, y_pred, axis=axis)
    log_p = ops.log(_clipped_probabilities(y_pred, axis))
    return -ops.reduce_sum(y_true * log_p, axis=axis)


def _clipped_probabilities(p, axis=-1):
    """p / sum(p) clipped to [eps, 1 - eps] (Keras' treatment of probabilities)."""
    p = p / ops.reduce_sum(p, axis=axis, keepdims=True)
    return ops.clip_by_value(p, EPSILON, 1.0 - EPSILON)


def _float32_if_16_bit(y):
    """A float16 or bfloat16 prediction (a mixed-precision model's output) cast to float32:
    Keras 3's losses compute in float32."""
    d = getattr(getattr(y, "_data", None), "dtype", None)
    if d is not None and d.itemsize == 2 and d.kind in "fV":  # V: bfloat16
        return ops.cast(y, "float32")
    return y


class Loss:
    """Base class: `call(y_true, y_pred)` gives per-example values; `__call__` weights and
    reduces them."""

    def __init__(self, reduction="sum_over_batch_size", name=None):
        reduction = "none" if reduction is None else reduction  # Keras 3 spells it None
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {_REDUCTIONS}, "
                             f"got {reduction!r}")
        self.reduction = "sum_over_batch_size" if reduction == "auto" else reduction
        self.name = name or type(self).__name__

    def call(self, y_true, y_pred):
        raise NotImplementedError

    def __call__(self, y_true, y_pred, sample_weight=None):
        """The weighted, reduced loss. A prediction carrying a Keras mask (from
        `Embedding(mask_zero=True)` or `Masking` through recurrent layers with
        `return_sequences=True`) counts its unmasked positions only: masked values are 0 and
        "sum_over_batch_size" divides by the number of unmasked positions, as Keras."""
        mask = get_keras_mask(y_pred)
        y_pred = _float32_if_16_bit(y_pred)
        values = self.call(y_true, y_pred)
        if sample_weight is not None:
            if _holds_none(sample_weight):
                raise ValueError(f"{type(self).__name__}: sample_weight must hold numbers only, "
                                 f"got {sample_weight!r}; give a weight (e.g. 0.0) to every "
                                 "example")
            w = _true_like(sample_weight, values)
            while w.ndim > values.ndim and w.shape[-1] == 1:
                w = ops.reshape(w, w.shape[:-1])
            values = values * w
        if mask is not None:
            mask = self._mask_for(mask, values)
            values = ops.where(mask, values, ops.zeros((), dtype=values.dtype))
        if self.reduction == "none":
            return values
        total = ops.reduce_sum(values)
        if self.reduction == "sum":
            return total
        if mask is not None:
            return total / ops.maximum(ops.reduce_sum(ops.cast(mask, values.dtype)), 1.0)
        return total / float(max(1, values.size if values.ndim else 1))

    def _mask_for(self, mask, values):
        """The prediction's mask broadcast to the per-position values."""
        if mask.shape != values.shape[:mask.ndim]:
            raise ValueError(f"{type(self).__name__}: the prediction's mask has shape "
                             f"{tuple(mask.shape)}, which does not lead the shape of the "
                             f"per-position losses {tuple(values.shape)}")
        while mask.ndim < values.ndim:
            mask = ops.expand_dims(mask, -1)
        return ops.broadcast_to(mask, values.shape) if mask.shape != values.shape else mask


def _holds_none(value):
    if value is None:
        return True
    if isinstance(value, np.ndarray):
        return value.dtype == object and any(_holds_none(v) for v in value.ravel().tolist())
    if isinstance(value, (list, tuple)):
        return any(_holds_none(v) for v in value)
    return False


class MeanSquaredError(Loss):
    """mean((y_true - y_pred)^2), averaged over the last axis then reduced over examples.

    >>> mse = tg.losses.MeanSquaredError()
    >>> float(mse([[0.0, 1.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 0.0]]))
    0.5
    """

    def __init__(self, reduction="sum_over_batch_size", name="mean_squared_error"):
        super().__init__(reduction, name)

    def call(self, y_true, y_pred):
        return mean_squared_error(y_true, y_pred)


class SparseCategoricalCrossentropy(Loss):
    """Cross-entropy between integer labels and predicted class probabilities (or logits).

    >>> loss = tg.losses.SparseCategoricalCrossentropy(from_logits=True)
    >>> round(float(loss([1, 2], [[0.0, 2.0, 0.0], [1.0, 1.0, 1.0]])), 4)
    0.6691
    """

    def __init__(self, from_logits=False, reduction="sum_over_batch_size",
                 name="sparse_categorical_crossentropy"):
        super().__init__(reduction, name)
        self.from_logits = bool(from_logits)

    def call(self, y_true, y_pred):
        return _sparse_categorical_crossentropy(y_true, y_pred, self.from_logits, -1,
                                                type(self).__name__)


class CategoricalCrossentropy(Loss):
    """Cross-entropy between one-hot (or soft) labels and predicted probabilities (or logits).

    >>> loss = tg.losses.CategoricalCrossentropy()
    >>> round(float(loss([[0.0, 1.0]], [[0.2, 0.8]])), 4)
    0.2231
    """

    def __init__(self, from_logits=False, label_smoothing=0.0,
                 reduction="sum_over_batch_size", name="categorical_crossentropy"):
        super().__init__(reduction, name)
        self.from_logits = bool(from_logits)
        self.label_smoothing = float(label_smoothing)

    def call(self, y_true, y_pred):
        return categorical_crossentropy(y_true, y_pred, self.from_logits, self.label_smoothing)


class MeanAbsoluteError(Loss):
    """mean(|y_true - y_pred|) over the last axis, then reduced over examples.

    >>> float(tg.losses.MeanAbsoluteError()([[0.0, 1.0]], [[1.0, 1.0]]))
    0.5
    """

    def __init__(self, reduction="sum_over_batch_size", name="mean_absolute_error"):
        super().__init__(reduction, name)

    def call(self, y_true, y_pred):
        return mean_absolute_error(y_true, y_pred)


class Huber(Loss):
    """The Huber loss (quadratic within `delta`, linear beyond), averaged over the last axis.

    >>> float(tg.losses.Huber()([[0.0, 0.0]], [[0.5, 3.0]]))
    1.3125
    """

    def __init__(self, delta=1.0, reduction="sum_over_batch_size", name="huber_loss"):
        super().__init__(reduction, name)
        if not delta > 0:
            raise ValueError(f"Huber: delta must be > 0, got {delta}")
        self.delta = float(delta)

    def call(self, y_true, y_pred):
        return huber(y_true, y_pred, self.delta)


class BinaryCrossentropy(Loss):
    """Cross-entropy between 0/1 (or soft) labels and probabilities (or logits).

    >>> round(float(tg.losses.BinaryCrossentropy()([[1.0], [0.0]], [[0.8], [0.2]])), 4)
    0.2231
    """

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1,
                 reduction="sum_over_batch_size", name="binary_crossentropy"):
        super().__init__(reduction, name)
        self.from_logits = bool(from_logits)
        self.label_smoothing = float(label_smoothing)
        self.axis = axis

    def call(self, y_true, y_pred):
        return binary_crossentropy(y_true, y_pred, self.from_logits, self.label_smoothing,
                                   self.axis)


class KLDivergence(Loss):
    """Kullback-Leibler divergence `sum(y_true * log(y_true / y_pred))` per example.

    >>> round(float(tg.losses.KLDivergence()([[1.0, 0.0]], [[0.5, 0.5]])), 4)
    0.6931
    """

    def __init__(self, reduction="sum_over_batch_size", name="kl_divergence"):
        super().__init__(reduction, name)

    def call(self, y_true, y_pred):
        return kl_divergence(y_true, y_pred)


class _Elementwise(Loss):
    """A loss whose `call` is one per-example function of (y_true, y_pred)."""

    _fn = None

    def __init__(self, reduction, name):
        super().__init__(reduction, name)

    def call(self, y_true, y_pred):
        return type(self)._fn(y_true, y_pred)


class Hinge(_Elementwise):
    """`mean(max(1 - y_true * y_pred, 0))` over the last axis (0/1 labels become -1/1).

    >>> round(float(tg.losses.Hinge()([[0.0, 1.0], [0.0, 0.0]], [[0.6, 0.4], [0.4, 0.6]])), 4)
    1.3
    """

    _fn = staticmethod(hinge)

    def __init__(self, reduction="sum_over_batch_size", name="hinge"):
        super().__init__(reduction, name)


class SquaredHinge(_Elementwise):
    """`mean(max(1 - y_true * y_pred, 0)^2)` over the last axis (0/1 labels become -1/1).

    >>> round(float(tg.losses.SquaredHinge()([[0.0, 1.0]], [[0.6, 0.4]])), 4)
    1.46
    """

    _fn = staticmethod(squared_hinge)

    def __init__(self, reduction="sum_over_batch_size", name="squared_hinge"):
        super().__init__(reduction, name)


class CategoricalHinge(_Elementwise):
    """`max(max((1 - y_true) * y_pred) - sum(y_true * y_pred) + 1, 0)` per example.

    >>> round(float(tg.losses.CategoricalHinge()([[0.0, 1.0]], [[0.6, 0.4]])), 4)
    1.2
    """

    _fn = staticmethod(categorical_hinge)

    def __init__(self, reduction="sum_over_batch_size", name="categorical_hinge"):
        super().__init__(reduction, name)


class LogCosh(_Elementwise):
    """`mean(log(cosh(y_pred - y_true)))` over the last axis.

    >>> round(float(tg.losses.LogCosh()([[0.0, 0.0]], [[1.0, -1.0]])), 4)
    0.4338
    """

    _fn = staticmethod(log_cosh)

    def __init__(self, reduction="sum_over_batch_size", name="log_cosh"):
        super().__init__(reduction, name)


class CosineSimilarity(Loss):
    """The NEGATIVE cosine similarity along `axis` (Keras: minimising it aligns the vectors).

    >>> float(tg.losses.CosineSimilarity()([[0.0, 1.0], [1.0, 1.0]], [[0.0, 3.0], [1.0, -1.0]]))
    -0.5
    """

    def __init__(self, axis=-1, reduction="sum_over_batch_size", name="cosine_similarity"):
        super().__init__(reduction, name)
        self.axis = axis

    def call(self, y_true, y_pred):
        return cosine_similarity(y_true, y_pred, self.axis)


class MeanAbsolutePercentageError(_Elementwise):
    """`100 * mean(|y_true - y_pred| / max(|y_true|, 1e-7))` over the last axis.

    >>> float(tg.losses.MeanAbsolutePercentageError()([[2.0, 4.0]], [[1.0, 5.0]]))
    37.5
    """

    _fn = staticmethod(mean_absolute_percentage_error)

    def __init__(self, reduction="sum_over_batch_size", name="mean_absolute_percentage_error"):
        super().__init__(reduction, name)


class MeanSquaredLogarithmicError(_Elementwise):
    """`mean((log(1 + y_pred) - log(1 + y_true))^2)` over the last axis.

    >>> round(float(tg.losses.MeanSquaredLogarithmicError()([[0.0]], [[1.718281828]])), 4)
    1.0
    """

    _fn = staticmethod(mean_squared_logarithmic_error)

    def __init__(self, reduction="sum_over_batch_size", name="mean_squared_logarithmic_error"):
        super().__init__(reduction, name)


class Poisson(_Elementwise):
    """`mean(y_pred - y_true * log(y_pred + 1e-7))` over the last axis.

    >>> float(tg.losses.Poisson()([[1.0, 0.0]], [[1.0, 2.0]]))
    1.5
    """

    _fn = staticmethod(poisson)

    def __init__(self, reduction="sum_over_batch_size", name="poisson"):
        super().__init__(reduction, name)


MSE = mse = mean_squared_error
MAE = mae = mean_absolute_error
KLD = kld = kl_divergence
MAPE = mape = mean_absolute_percentage_error
MSLE = msle = mean_squared_logarithmic_error

_BY_NAME = {
    "mean_squared_error": MeanSquaredError, "mse": MeanSquaredError,
    "mean_absolute_error": MeanAbsoluteError, "mae": MeanAbsoluteError,
    "huber": Huber, "huber_loss": Huber, "binary_crossentropy": BinaryCrossentropy,
    "categorical_crossentropy": CategoricalCrossentropy,
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
    "kl_divergence": KLDivergence, "kld": KLDivergence,
    "hinge": Hinge, "squared_hinge": SquaredHinge, "categorical_hinge": CategoricalHinge,
    "log_cosh": LogCosh, "cosine_similarity": CosineSimilarity,
    "mean_absolute_percentage_error": MeanAbsolutePercentageError,
    "mape": MeanAbsolutePercentageError,
    "mean_squared_logarithmic_error": MeanSquaredLogarithmicError,
    "msle": MeanSquaredLogarithmicError, "poisson": Poisson,
}


def get(identifier):
    """A loss from a Keras name ('mse', 'sparse_categorical_crossentropy', ...), a `Loss`, or
    a function `fn(y_true, y_pred)` returning per-example values.

    >>> type(tg.losses.get("mse")).__name__
    'MeanSquaredError'
    """
    if isinstance(identifier, Loss):
        return identifier
    if isinstance(identifier, str):
        if identifier not in _BY_NAME:
            raise ValueError(f"Could not interpret loss identifier: {identifier!r}; valid "
                             f"names: {sorted(_BY_NAME)}, a Loss or a function "
                             "fn(y_true, y_pred)")
        return _BY_NAME[identifier]()
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret loss identifier: {identifier!r}")
