"""`compile`, `fit`, `evaluate`, `predict` (and the `*_on_batch` steps) of `keras.Model`.

A training step is the custom-training-loop pattern: a `GradientTape` around the forward pass
and the compiled loss, `optimizer.apply_gradients`, then the metrics. `fit` runs it through
`tg.function` (one trace per batch shape; random draws such as dropout masks are fresh at every
call, also those of layers with a `seed`), unless `compile(run_eagerly=True)`. Inputs are numpy arrays or
tensors (sliced into `batch_size` batches, reshuffled each epoch when `shuffle=True`), or a
`tg.data.Dataset` yielding `(x, y)` or `(x, y, sample_weight)` batches.
"""
import math
import warnings
from collections.abc import Mapping

import numpy as np

from .. import backends as _backend
from .. import ops
from ..autodiff.tape import GradientTape
from ..core import nest
from ..core.tensor import Tensor, Variable, convert_to_tensor
from ..data import Dataset
from ..distribute import strategy as _distribute
from ..function import function as _tg_function
from ..models import losses as _losses
from .. import optimizers as _optimizers
from . import callbacks as _callbacks
from . import metrics as _metrics

_OPTIMIZERS = {"sgd": _optimizers.SGD, "adam": _optimizers.Adam, "adamw": _optimizers.AdamW,
               "rmsprop": _optimizers.RMSprop, "adagrad": _optimizers.Adagrad}


def get_optimizer(identifier):
    """An optimizer from a name ('adam', 'sgd', ...) or an optimizer instance."""
    if isinstance(identifier, _optimizers.Optimizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _OPTIMIZERS:
        return _OPTIMIZERS[identifier.lower()]()
    raise ValueError(f"Could not interpret optimizer identifier: {identifier!r}; valid names: "
                     f"{sorted(_OPTIMIZERS)}, or a keras.optimizers.Optimizer")


class _Compiled:
    def __init__(self, optimizer, loss, metrics, loss_weights, weighted_metrics=None):
        self.optimizer = get_optimizer(optimizer)
        self.loss_spec = loss
        self.loss = None if loss is None or isinstance(loss, (list, tuple, dict)) else \
            _losses.get(loss)
        self.loss_weights = loss_weights
        self.metric_specs = list(metrics or [])
        self.weighted_specs = list(weighted_metrics or [])
        # created from the first batch (so 'accuracy' can see the shapes): `metrics`, then
        # `weighted_metrics`, and the names each is logged under
        self.metrics = None
        self.unweighted, self.weighted = None, None
        self.metric_names = None
        self.loss_tracker = _metrics.Mean(name="loss")
        self.output_losses = None  # [(name, loss, weight, tracker)] for several outputs
        self.run_eagerly = False
        self.train_function = None  # made by the first fit

    def loss_value(self, y, y_pred, sample_weight, output_names=None):
        if self.loss_spec is None:
            raise ValueError("fit: the model was compiled without a loss; pass loss= to "
                             "compile (or override train_step)")
        if isinstance(y_pred, (list, tuple, dict)):
            return self._outputs_loss(y, y_pred, sample_weight, output_names)
        if self.loss is None:
            raise ValueError(f"fit: compile was given losses for several outputs "
                             f"({self.loss_spec!r}) but the model has one output")
        return _one_loss(self.loss, y, y_pred, sample_weight)

    def _outputs_loss(self, y, y_pred, sample_weight, output_names):
        """Keras' loss of a model with several outputs: the sum over outputs of
        `loss_weight * loss(y_i, y_pred_i)`; each weighted term is also logged as
        '<output name>_loss'."""
        preds = nest.flatten(y_pred)
        if isinstance(y_pred, dict):
            names = sorted(y_pred)
        else:
            names = list(output_names or [f"output_{i + 1}" for i in range(len(preds))])
        if self.output_losses is None:
            self.output_losses = self._resolve(names)
        if isinstance(y, dict):
            missing = [n for n in names if n not in y]
            if missing:
                raise ValueError(f"fit: the targets are a dict without keys {missing}; the "
                                 f"model's outputs are {names}")
            targets = [y[n] for n in names]
        elif isinstance(y, (list, tuple)) and len(y) == len(preds):
            targets = list(y)
        else:
            raise ValueError(f"fit: the model has {len(preds)} outputs {names}; y must be a "
                             f"list of {len(preds)} targets or a dict keyed by those names")
        total, parts = None, []
        for (name, loss, weight, _), yt, yp in zip(self.output_losses, targets, preds):
            if loss is None:
                parts.append(None)
                continue
            value = _one_loss(loss, yt, yp, sample_weight) * float(weight)
            parts.append(value)
            total = value if total is None else total + value
        if total is None:
            raise ValueError(f"fit: no output of {names} has a loss")
        self.last_parts = parts
        return total

    def _resolve(self, names):
        def per_output(spec, label, default):
            if isinstance(spec, dict):
                unknown = sorted(set(spec) - set(names))
                if unknown:
                    raise ValueError(f"compile: {label} has keys {unknown} that are not output "
                                     f"names; the outputs are {names}")
                return [spec.get(n, default) for n in names]
            if isinstance(spec, (list, tuple)):
                if len(spec) != len(names):
                    raise ValueError(f"compile: {label} has {len(spec)} entries but the model "
                                     f"has {len(names)} outputs {names}")
                return list(spec)
            return [spec] * len(names)

        losses = per_output(self.loss_spec, "loss", None)
        weights = per_output(self.loss_weights if self.loss_weights is not None else 1.0,
                             "loss_weights", 1.0)
        return [(n, None if lo is None else _losses.get(lo), w,
                 None if lo is None else _metrics.Mean(name=f"{n}_loss"))
                for n, lo, w in zip(names, losses, weights)]

    def build_metrics(self, y, y_pred):
        if self.metrics is not None:
            return
        if (self.metric_specs or self.weighted_specs) and \
                isinstance(y_pred, (list, tuple, dict)):
            raise NotImplementedError("compile: metrics for a model with several outputs are "
                                      "not supported (the loss, loss_weights and each output's "
                                      "loss are); compute them in a custom train_step")
        plain = [self._metric(spec, y, y_pred) for spec in self.metric_specs]
        weighted = [self._metric(spec, y, y_pred) for spec in self.weighted_specs]
        self.metric_names = _log_names(plain, weighted)
        self.metrics, self.unweighted, self.weighted = plain + weighted, plain, weighted

    def _metric(self, spec, y, y_pred):
        if spec in ("accuracy", "acc"):
            m = _accuracy_for(self.loss, y, y_pred)
            m.name = spec
        else:
            m = _metrics.get(spec)
            if isinstance(spec, str):  # logged under the name given, as Keras 3 ('mae')
                m.name = spec
        return m

    def update_metrics(self, y, y_pred, sample_weight):
        """Keras 3's compiled metrics: `metrics` see no sample weights (nor class weights,
        which fit folds into them), `weighted_metrics` see them; both see a prediction's
        mask (MeanMetricWrapper)."""
        self.build_metrics(y, y_pred)
        for m in self.unweighted:
            m.update_state(y, y_pred)
        for m in self.weighted:
            m.update_state(y, y_pred, sample_weight=sample_weight)

    def named_metrics(self):
        """(logged name, metric) of the built compiled metrics."""
        return list(zip(self.metric_names or (), self.metrics or ()))

    def trackers(self):
        """The loss trackers: the total, then each output's."""
        return [self.loss_tracker] + [t for _, _, _, t in self.output_losses or ()
                                      if t is not None]


class _CompileMetrics:
    """The compiled metrics before a batch has built them, as Keras 3's `compile_metrics`
    container in `model.metrics`: a custom train_step's `update_state(y, y_pred)` builds and
    updates them (then `model.metrics` lists them one by one), `result()` is a dict."""

    name = "compile_metrics"

    def __init__(self, compiled):
        self._c = compiled

    def update_state(self, y, y_pred, sample_weight=None):
        self._c.update_metrics(y, y_pred, sample_weight)

    def result(self):
        return {name: m.result() for name, m in self._c.named_metrics()}

    def reset_state(self):
        for m in self._c.metrics or ():
            m.reset_state()


def _log_names(plain, weighted):
    """The names compiled metrics are logged under, as Keras 3's CompileMetrics: a name seen
    before gets '_1', '_2', ...; a weighted metric's gets 'weighted_' first."""
    seen = {}

    def unique(name):
        seen[name] = seen.get(name, 0) + 1
        return name if seen[name] == 1 else f"{name}_{seen[name] - 1}"
    names = [unique(m.name) for m in plain]
    return names + [unique(f"weighted_{m.name}" if m.name in seen else m.name)
                    for m in weighted]


def _one_loss(loss, y, y_pred, sample_weight):
    if isinstance(loss, _losses.Loss):
        return loss(y, y_pred, sample_weight=sample_weight)
    values = loss(y, y_pred)  # a function: per-example values, averaged as Keras
    if sample_weight is not None:
        values = values * convert_to_tensor(sample_weight, dtype=values.dtype)
    return ops.reduce_sum(values) / float(max(1, values.size if values.ndim else 1))


def _output_names(model):
    """The names of a functional model's outputs (their layers'), as Keras' `output_names`."""
    outputs = getattr(model, "_outputs", None)
    if not isinstance(outputs, (list, tuple)):
        return None
    names = []
    for t in outputs:
        history = getattr(t, "_keras_history", None)
        names.append(history[0].layer.name if history else getattr(t, "name", None))
    return names if all(names) and len(set(names)) == len(names) else None


def _accuracy_for(loss, y, y_pred):
    """Keras' choice for metrics=['accuracy']: from the loss, else from the shapes."""
    if isinstance(loss, _losses.SparseCategoricalCrossentropy):
        return _metrics.SparseCategoricalAccuracy()
    if isinstance(loss, _losses.CategoricalCrossentropy):
        return _metrics.CategoricalAccuracy()
    if isinstance(loss, _losses.BinaryCrossentropy):
        return _metrics.BinaryAccuracy()
    # the shapes only: reading y's value here would leave a traced train step after the update
    yt = tuple(y.shape) if isinstance(y, (Tensor, Variable)) else tuple(np.shape(y))
    yp = tuple(y_pred.shape)
    if yp and yp[-1] == 1:
        return _metrics.BinaryAccuracy()
    if yt == yp:
        return _metrics.CategoricalAccuracy()
    return _metrics.SparseCategoricalAccuracy()


def _np(v):
    if isinstance(v, Variable):
        v = v._read()
    return v.numpy() if isinstance(v, Tensor) else np.asarray(v)


def _unpack(batch):
    """(x, y, sample_weight) from a dataset element."""
    if isinstance(batch, tuple):
        if len(batch) == 1:
            return batch[0], None, None
        if len(batch) == 2:
            return batch[0], batch[1], None
        if len(batch) == 3:
            return batch
        raise ValueError(f"fit: a dataset element must be x, (x, y) or (x, y, sample_weight), "
                         f"got a tuple of {len(batch)}")
    return batch, None, None


def _num_rows(x, who):
    rows = {int((v.shape if isinstance(v, (Tensor, Variable)) else np.shape(v))[0])
            for v in nest.flatten(x)}
    if len(rows) != 1:
        raise ValueError(f"{who}: every input array must have the same number of rows (the "
                         f"batch axis), got {sorted(rows)}")
    return rows.pop()


def _take(structure, idx):
    return nest.map_structure(
        lambda v: None if v is None else convert_to_tensor(_np(v)[idx]), structure)


def _on_device(v):
    """A private copy of an input array on the current device (batches are then slices of
    it, made on the device: no host-to-device copy per step)."""
    if isinstance(v, Variable):
        v = v._read()
    dev = _backend.current()
    if isinstance(v, Tensor):
        if v.dtype.is_string:  # text stays on the host, as TF keeps string tensors there
            return Tensor(np.array(v._data, copy=True), v._dev)
        if v._dev is dev:
            return Tensor(dev.xp.array(v._data, copy=True), dev)
        return Tensor(dev.asarray(v._dev.to_numpy(v._data)), dev)
    return convert_to_tensor(np.array(v, copy=True))


def _rows(t, idx):
    return Tensor(t._data[idx], t._dev)


def class_weights(y, class_weight, who):
    """Keras' per-example weights from `class_weight` ({class index: weight}): the class of an
    example is its label, or the argmax of a one-hot label; classes not listed weigh 1.0."""
    if not isinstance(class_weight, dict):
        raise TypeError(f"{who}: class_weight must be a dict mapping class indices to weights, "
                        f"got {class_weight!r}")
    if isinstance(y, (list, dict)) or (isinstance(y, tuple) and len(y) != 1):
        raise ValueError("`class_weight` is only supported for Models with a single output.")
    labels = _np(nest.flatten(y)[0])
    if labels.ndim > 1:
        labels = labels.argmax(axis=-1) if labels.shape[-1] != 1 else labels[..., 0]
    labels = np.round(labels).astype(np.int64).reshape(labels.shape[:1])
    return np.array([class_weight.get(int(c), 1.0) for c in labels], dtype=np.float32)


def _weighted(batch, class_weight, who):
    """`(x, y, sample_weight)` with the class weights folded into the sample weights."""
    x, y, sw = batch
    if class_weight is None:
        return batch
    if y is None:
        raise ValueError(f"{who}: class_weight needs targets y")
    w = class_weights(y, class_weight, who)
    if sw is not None:
        given = _np(sw)
        if given.size != w.size:
            raise ValueError(f"{who}: sample_weight of shape {given.shape} must hold one "
                             f"weight per example ({w.size}) to be combined with class_weight")
        w = (w * given.reshape(w.shape)).astype(np.float32)
    return x, y, convert_to_tensor(w)


class _ArrayData:
    """Batches of in-memory arrays: copied to the device once, then sliced there per step."""

    def __init__(self, x, y, sample_weight, batch_size, shuffle, who, class_weight=None):
        if batch_size is None:
            batch_size = 32
        if int(batch_size) != batch_size or batch_size <= 0:
            raise ValueError(f"{who}: batch_size must be a positive integer, got {batch_size!r}")
        self.n = _num_rows(x, who)
        for label, v in (("y", y), ("sample_weight", sample_weight)):
            if v is not None and _num_rows(v, who) != self.n:
                raise ValueError(f"{who}: x has {self.n} rows but {label} has "
                                 f"{_num_rows(v, who)}; they must match")
        if class_weight is not None:
            sample_weight = _weighted((x, y, sample_weight), class_weight, who)[2]
        device = lambda s: None if s is None else nest.map_structure(_on_device, s)  # noqa: E731
        self.x, self.y, self.sw = device(x), device(y), device(sample_weight)
        self.batch_size, self.shuffle = int(batch_size), shuffle

    def steps(self):
        return -(-self.n // self.batch_size)

    full_steps = steps

    def __iter__(self):
        order = np.random.permutation(self.n) if self.shuffle else None
        x, y, sw = self.x, self.y, self.sw
        if order is not None:  # on the arrays' device once per epoch: no upload per batch
            order = nest.flatten(x)[0]._dev.asarray(order)
        plain = isinstance(x, Tensor) and isinstance(y, (Tensor, type(None))) and sw is None
        for start in range(0, self.n, self.batch_size):
            idx = slice(start, start + self.batch_size) if order is None else \
                order[start:start + self.batch_size]
            if plain:  # the common case, without walking structures
                yield _rows(x, idx), None if y is None else _rows(y, idx), None
                continue
            take = lambda s: None if s is None else nest.map_structure(  # noqa: E731
                lambda t: _rows(t, idx), s)
            yield take(x), take(y), take(sw)


class _DatasetData:
    def __init__(self, dataset, steps, class_weight=None, who="fit"):
        self.dataset, self._steps = dataset, steps
        self.class_weight, self.who = class_weight, who

    def steps(self):
        if self._steps is not None:
            return self._steps
        return self.full_steps()

    def full_steps(self):
        n = self.dataset._card()
        return n if n >= 0 else None

    def __iter__(self):
        for i, batch in enumerate(self.dataset):
            if self._steps is not None and i >= self._steps:
                break
            yield _weighted(_unpack(batch), self.class_weight, self.who)


class _GeneratorData:
    """A Python generator (or iterator) of batches, or a `keras.utils.PyDataset` /
    `Sequence` (indexable batches with `len`), as Keras 3's fit takes them: each item is
    `(x,)`, `(x, y)` or `(x, y, sample_weight)`. A generator is consumed as it goes (with
    `steps_per_epoch`, the next epoch continues it, as Keras); a PyDataset is indexed from 0
    each pass and its `on_epoch_end` called after."""

    def __init__(self, source, steps, class_weight=None, who="fit"):
        self.source, self._steps = source, steps
        self.class_weight, self.who = class_weight, who
        self._indexed = _is_py_dataset(source)
        self._it = None if self._indexed else iter(source)

    def steps(self):
        return self._steps if self._steps is not None else self.full_steps()

    def full_steps(self):
        return len(self.source) if self._indexed else None

    def __iter__(self):
        if self._indexed:
            n = len(self.source) if self._steps is None else min(self._steps, len(self.source))
            for i in range(n):
                yield _weighted(_unpack(self.source[i]), self.class_weight, self.who)
            if hasattr(self.source, "on_epoch_end"):
                self.source.on_epoch_end()
            return
        for i, batch in enumerate(self._it):
            yield _weighted(_unpack(batch), self.class_weight, self.who)
            if self._steps is not None and i + 1 >= self._steps:
                break


def _is_py_dataset(x):
    return hasattr(x, "__getitem__") and hasattr(x, "__len__") and \
        not isinstance(x, (np.ndarray, list, tuple, dict, Tensor, Variable))


def _is_generator(x):
    return _is_py_dataset(x) or (hasattr(x, "__next__") and hasattr(x, "__iter__"))


class _Epochs:
    """The batches of each epoch. Without `steps_per_epoch` an epoch is one pass over the data.
    With it, as Keras, the data's iterator continues from one epoch to the next; when it runs
    out during an epoch, a warning says so, that epoch ends, and the next starts a new pass."""

    def __init__(self, data, steps_per_epoch):
        self.data, self.steps_per_epoch = data, steps_per_epoch
        self._it = None
        self._seen = 0

    def epoch(self):
        """An iterator of this epoch's batches."""
        if self.steps_per_epoch is None:
            return iter(self.data)
        return self._steps()

    def _steps(self):
        total = self.data.full_steps()  # None: not known before the data run out
        for _ in range(self.steps_per_epoch):
            if self._it is None:
                self._it, self._seen = iter(self.data), 0
            if total is not None and self._seen >= total:
                return self._ran_out()
            try:
                batch = next(self._it)
            except StopIteration:
                return self._ran_out()
            self._seen += 1
            yield batch
        if total is not None and self._seen >= total:
            self._it = None  # a complete pass: the next epoch starts a new one

    def _ran_out(self):
        self._it = None
        warnings.warn("Your input ran out of data; interrupting training. Make sure that your "
                      "dataset or generator can generate at least `steps_per_epoch * epochs` "
                      "batches. You may need to use the `.repeat()` function when building "
                      "your dataset.", UserWarning, stacklevel=4)


class _StepLogs(Mapping):
    """A step's logs for callbacks, read from the metrics only when a callback looks at them
    (reading a metric is a device-to-host copy on a GPU)."""

    def __init__(self, model):
        self._model = model
        self._logs = None

    def _values(self):
        if self._logs is None:
            self._logs = self._model._logs()
        return self._logs

    def __getitem__(self, key):
        return self._values()[key]

    def __iter__(self):
        return iter(self._values())

    def __len__(self):
        return len(self._values())

    def copy(self):
        return dict(self._values())

    def __repr__(self):
        return repr(self._values())


def _model_float(model):
    """The floating dtype of the model's variables (when they agree), else its own, else
    float32 (Keras' floatx)."""
    kinds = {np.dtype(v.dtype.name) for v in model.variables if np.dtype(v.dtype.name).kind == "f"}
    if len(kinds) == 1:
        return kinds.pop()
    own = getattr(model, "_dtype", None)
    if own is not None and np.dtype(own).kind == "f":
        return np.dtype(own)
    from ..core.floatx import floatx
    return np.dtype(floatx())


def _floatx(model, data, who):
    """numpy float arrays among `data` (x, y, sample_weight) in the model's floating dtype, as
    Keras' data adapters cast numpy floats to floatx (np.random.random gives float64); said
    once by a warning, since a float64 -> float32 cast rounds. Tensors are left as they are
    (a float64 tensor into a float32 layer raises)."""
    target = _model_float(model)
    cast = []

    def convert(a):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.dtype != target:
            cast.append(a.dtype.name)
            return a.astype(target)
        return a
    out = tuple(None if part is None else nest.map_structure(convert, part) for part in data)
    if cast:
        warnings.warn(f"{who}: numpy arrays of {sorted(set(cast))} were cast to the model's "
                      f"{target.name}, as Keras casts numpy floats to floatx; pass {target.name} "
                      f"arrays to skip the cast", UserWarning, stacklevel=3)
    return out


def _adapter(x, y, sample_weight, batch_size, shuffle, steps, who, class_weight=None):
    if isinstance(x, Dataset):
        if y is not None:
            raise ValueError(f"{who}: y must not be given when x is a tg.data.Dataset (the "
                             "dataset yields (x, y) pairs)")
        if sample_weight is not None:
            raise ValueError(f"{who}: sample_weight must not be given with a Dataset (yield "
                             "(x, y, sample_weight) instead)")
        if batch_size is not None:
            raise ValueError(f"{who}: batch_size must not be given when x is a Dataset (batch "
                             "the dataset with .batch())")
        return _DatasetData(x, steps, class_weight, who)
    if _is_generator(x):
        if y is not None or sample_weight is not None or batch_size is not None:
            raise ValueError(f"{who}: y, sample_weight and batch_size must not be given when "
                             f"x is a generator or PyDataset (it yields batches (x, y[, "
                             f"sample_weight]))")
        return _GeneratorData(x, steps, class_weight, who)
    if x is None:
        raise ValueError(f"{who}: x must be given (arrays, tensors or a tg.data.Dataset)")
    return _ArrayData(x, y, sample_weight, batch_size, shuffle, who, class_weight)


def _mixed_float16(model):
    """Whether the model (or, for a model without a policy of its own, one of its layers)
    computes under the 'mixed_float16' policy."""
    for m in (model,) + tuple(getattr(model, "submodules", ())):
        policy = getattr(m, "_dtype_policy", None)
        if policy is not None and policy.name == "mixed_float16":
            return True
    return False


class Trainer:
    """compile / fit / evaluate / predict for `keras.Model` (a mixin)."""

    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None,
                weighted_metrics=None, run_eagerly=False, steps_per_execution=1,
                jit_compile="auto", auto_scale_loss=True):
        """Sets the optimizer (a name or instance), the loss (a name, `Loss` or function) and
        the metrics (names such as 'accuracy', `Metric`s or functions) used by `fit`.
        As Keras 3, `metrics` are not weighted: `weighted_metrics` are the ones weighted by
        `sample_weight` and `class_weight` (a metric in both lists is logged a second time
        as 'weighted_<name>'). Mean metrics such as accuracy count only the unmasked
        positions of a masked prediction.

        For a model with several outputs, `loss` is one loss for every output, a list (one
        per output) or a dict keyed by output names (the output layers' names), and
        `loss_weights` a list or dict of the outputs' weights: the loss is the weighted sum,
        and each output's weighted loss is logged as '<name>_loss' (Keras 3). Metrics are
        not supported for several outputs."""
        if loss_weights is not None and not isinstance(loss_weights, (list, tuple, dict)):
            raise TypeError(f"compile: loss_weights must be a list or a dict keyed by output "
                            f"names, got {loss_weights!r}")
        for label, value in (("metrics", metrics), ("weighted_metrics", weighted_metrics)):
            if value is not None and not isinstance(value, (list, tuple)):
                raise TypeError(f"compile: {label} must be a list, got {value!r}")
        self._compiled = _Compiled(optimizer, loss, metrics, loss_weights, weighted_metrics)
        # compiled in a tg.distribute strategy's scope: fit splits each batch over its replicas
        self._compiled.strategy = _distribute.get_strategy() if _distribute.has_strategy() \
            else None
        self._compiled.run_eagerly = bool(run_eagerly)
        if auto_scale_loss and _mixed_float16(self) and \
                not isinstance(self._compiled.optimizer, _optimizers.LossScaleOptimizer):
            # Keras 3: a mixed_float16 model's optimizer scales the loss (float16 gradients
            # underflow otherwise)
            self._compiled.optimizer = _optimizers.LossScaleOptimizer(
                self._compiled.optimizer, name="loss_scale_optimizer")
        self.optimizer = self._compiled.optimizer

    def _require_compiled(self, who):
        if getattr(self, "_compiled", None) is None:
            raise RuntimeError(f"You must call `compile()` before using the model ({who}).")
        return self._compiled

    @property
    def metrics(self):
        """The loss tracker then the compiled metrics (once the first batch has built them)."""
        c = getattr(self, "_compiled", None)
        if c is None:
            return []
        if c.metrics is None and (c.metric_specs or c.weighted_specs):  # Keras 3's container
            return c.trackers() + [_CompileMetrics(c)]
        return c.trackers() + list(c.metrics or [])

    @property
    def metrics_names(self):
        names = self._log_names()
        return [names.get(id(m), m.name) for m in self.metrics]

    def _log_names(self):
        """{id(metric): the name it is logged under} of the compiled metrics (a weighted
        metric may be 'weighted_<name>')."""
        c = getattr(self, "_compiled", None)
        return {} if c is None else {id(m): n for n, m in c.named_metrics()}

    def reset_metrics(self):
        for m in self.metrics:
            m.reset_state()

    # -- Keras 2's spellings (docs/porting_from_tensorflow.md) -------------------------------------
    @property
    def compiled_loss(self):
        """Keras 2's `model.compiled_loss(y, y_pred, sample_weight=None,
        regularization_losses=None)` of a custom train_step: the compiled loss plus the given
        regularization losses; it updates the 'loss' tracker, as Keras 2 does."""
        model = self

        def compiled_loss(y_true, y_pred, sample_weight=None, regularization_losses=None):
            c = model._require_compiled("compiled_loss")
            loss = c.loss_value(y_true, y_pred, sample_weight, _output_names(model))
            if regularization_losses:
                loss = loss + ops.add_n([ops.cast(p, loss.dtype)
                                         for p in regularization_losses])
            rows = _num_rows(y_pred, "compiled_loss")
            c.loss_tracker.update_state(loss, sample_weight=rows)
            return loss
        return compiled_loss

    @property
    def compiled_metrics(self):
        """Keras 2's `model.compiled_metrics`: `update_state(y, y_pred, sample_weight=None)`
        updates the compiled metrics; `result()` is a dict of their values."""
        return _CompileMetrics(self._require_compiled("compiled_metrics"))

    def fit_generator(self, generator, *args, **kwargs):
        """Keras 2's `fit_generator`: `fit` on the generator (Keras 2 deprecated it for that)."""
        return self.fit(generator, *args, **kwargs)

    def evaluate_generator(self, generator, *args, **kwargs):
        """Keras 2's `evaluate_generator`: `evaluate` on the generator."""
        return self.evaluate(generator, *args, **kwargs)

    def predict_generator(self, generator, *args, **kwargs):
        """Keras 2's `predict_generator`: `predict` on the generator."""
        return self.predict(generator, *args, **kwargs)

    # -- steps ----------------------------------------------------------------------------------
    # A step gets its batch as Keras 3 gives it: `(x,)`, `(x, y)` or `(x, y, sample_weight)`
    # (`keras.utils.unpack_x_y_sample_weight` splits it). An overridden train_step or test_step
    # returns the logs fit and evaluate report (a dict of tensors; nested dicts are flattened),
    # as in Keras' "customizing what happens in fit" guide.
    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The compiled loss of `y_pred` against `y` plus the layers' added losses (the
        weights' regularization, `add_loss`), as Keras 3's `Model.compute_loss`."""
        loss = self._compiled.loss_value(y, y_pred, sample_weight, _output_names(self))
        penalties = self.losses
        if penalties:
            loss = loss + ops.add_n([ops.cast(p, loss.dtype) for p in penalties])
        return loss

    def train_step(self, data):
        """One optimisation step on a batch `(x, y[, sample_weight])`; returns the logs."""
        x, y, sw = unpack_x_y_sample_weight(data)
        c = self._compiled
        with GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x, y, y_pred, sw)
            scaled = c.optimizer.scale_loss(loss)  # Keras 3 (a LossScaleOptimizer scales it)
        variables = self.trainable_variables
        grads = tape.gradient(scaled, variables)
        c.optimizer.apply_gradients(zip(grads, variables))
        return self._update_metrics(loss, y, y_pred, sw, x)

    def test_step(self, data):
        """The loss and metrics of a batch `(x, y[, sample_weight])`, without updating."""
        x, y, sw = unpack_x_y_sample_weight(data)
        y_pred = self(x, training=False)
        loss = self._compiled.loss_value(y, y_pred, sw, _output_names(self))
        return self._update_metrics(loss, y, y_pred, sw, x)

    def _overrides(self, step):
        return getattr(type(self), step) is not getattr(Trainer, step)

    def _distributed(self, step, what, traced=None):
        """`step(x, y, sw)` as it runs for `fit`, `evaluate` or `predict` (`what`): under the
        tg.distribute strategy of `compile`'s scope, once per replica on its share of the
        batch (tapegpu/distribute/strategy.py; `traced`, step's tg.function, where the
        strategy can trace it); else `step` itself."""
        strategy = getattr(getattr(self, "_compiled", None), "strategy", None)
        return step if strategy is None else strategy._keras_step(self, step, what, traced)

    def _run_test_step(self, batch):
        logs = self._distributed(lambda *b: self.test_step(pack_x_y_sample_weight(*b)),
                                 "evaluate")(*batch)
        if self._overrides("test_step"):
            self._step_logs = logs
        return logs

    def _update_metrics(self, loss, y, y_pred, sw, x):
        c = self._compiled
        rows = _num_rows(x, "fit")
        c.loss_tracker.update_state(loss, sample_weight=rows)
        for (_, _, _, tracker), part in zip(c.output_losses or (), getattr(c, "last_parts", ())):
            if tracker is not None:
                tracker.update_state(part, sample_weight=rows)
        c.update_metrics(y, y_pred, sw)
        return self._logs()

    def _logs(self):
        step_logs = getattr(self, "_step_logs", None)
        if step_logs is not None:  # an overridden step's own logs
            return {k: float(_np(v)) if isinstance(v, (Tensor, Variable, np.ndarray)) else v
                    for k, v in _flat_logs(step_logs).items()}
        names = self._log_names()
        return {names.get(id(m), m.name): m._value() for m in self.metrics
                if not isinstance(m, _CompileMetrics)}

    def make_train_function(self):
        """The function `fit` calls per batch: `train_step` through `tg.function`, or
        `train_step` itself when compiled with `run_eagerly=True`. It returns nothing; `fit`
        reads the metrics after each call."""
        c = self._compiled
        if c.train_function is None:
            keep = self._overrides("train_step")  # its logs are fit's

            def run(x, y, sw):
                logs = self.train_step(pack_x_y_sample_weight(x, y, sw))
                return logs if keep else None
            step = run if c.run_eagerly else _tg_function(run)
            if c.strategy is not None:  # per replica (traced with one replica per process)
                step = self._distributed(run, "fit", None if c.run_eagerly else step)

            def train_function(data):
                logs = step(*data)
                if keep:
                    self._step_logs = logs
            train_function.step = step  # the tg.function (run_eagerly: the plain step)
            c.train_function = train_function
        return c.train_function

    def predict_step(self, data):
        x, _, _ = unpack_x_y_sample_weight(data)
        return self(x, training=False)

    # -- loops ----------------------------------------------------------------------------------
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, initial_epoch=0, steps_per_epoch=None, validation_steps=None,
            validation_batch_size=None, validation_freq=1):
        """Trains for `epochs` epochs; returns a `keras.callbacks.History`.

        Prints a progress bar on a terminal (redrawn at most every 0.05 s) and one line per
        epoch otherwise (`verbose=2`: one line per epoch; 0: silent). As Keras:
        `class_weight` ({class: weight}) multiplies each example's `sample_weight` by its
        class's weight (classes not listed: 1); `validation_split` keeps the last fraction
        of the arrays for validation; epochs are numbered from `initial_epoch`; with
        `steps_per_epoch` the data's iterator continues from one epoch to the next (a
        warning says when it runs out, and the next epoch starts over). Per-step logs are
        read from the metrics only when a callback reads them.
        """
        self._require_compiled("fit")
        if int(epochs) != epochs or epochs < 0:
            raise ValueError(f"fit: epochs must be a non-negative integer, got {epochs!r}")
        if steps_per_epoch is not None and (int(steps_per_epoch) != steps_per_epoch or
                                            steps_per_epoch <= 0):
            raise ValueError(f"fit: steps_per_epoch must be a positive integer or None, got "
                             f"{steps_per_epoch!r}")
        if not 0.0 <= validation_split < 1.0:
            raise ValueError(f"fit: validation_split must be in [0, 1), got {validation_split}")
        if validation_split:
            if isinstance(x, Dataset):
                raise ValueError("fit: validation_split is only supported for arrays and "
                                 "tensors, not for a tg.data.Dataset")
            n = _num_rows(x, "fit")
            cut = int(math.floor(n * (1.0 - validation_split)))
            if cut in (0, n):  # Keras' check and message
                raise ValueError(f"fit: training data contains {n} samples, which is not "
                                 "sufficient to split it into a validation and training set "
                                 f"as specified by `validation_split={validation_split}` "
                                 "(each must keep at least one sample). Either provide more "
                                 "data, or a different value for the `validation_split` "
                                 "argument.")
            split = lambda s, idx: None if s is None else _take(s, idx)  # noqa: E731
            head, tail = np.arange(cut), np.arange(cut, n)
            validation_data = (split(x, tail), split(y, tail), split(sample_weight, tail))
            x, y, sample_weight = split(x, head), split(y, head), split(sample_weight, head)
        x, y, sample_weight = _floatx(self, (x, y, sample_weight), "fit")
        data = _adapter(x, y, sample_weight, batch_size, shuffle, None, "fit", class_weight)
        epochs_data = _Epochs(data, None if steps_per_epoch is None else int(steps_per_epoch))
        val = None
        if validation_data is not None:
            if isinstance(validation_data, Dataset):
                val = _adapter(validation_data, None, None, None, False, validation_steps,
                               "fit")
            else:
                vx, vy, vsw = _floatx(self, _unpack(tuple(validation_data)), "fit")
                val = _adapter(vx, vy, vsw, validation_batch_size or batch_size, False,
                               validation_steps, "fit")
        verbose = 1 if verbose == "auto" else int(verbose)
        history = _callbacks.History()
        cbs = list(callbacks or [])
        if verbose:
            cbs.append(_callbacks.ProgbarLogger(verbose))
        cbs.append(history)
        steps = data.steps() if steps_per_epoch is None else int(steps_per_epoch)
        cbs = _callbacks.CallbackList(cbs, self, {"epochs": int(epochs), "steps": steps,
                                                  "verbose": verbose})
        self.stop_training = False
        self.history = history
        cbs.on_train_begin()
        # a callback restoring a backup (BackupAndRestore) sets the epoch to resume at
        initial_epoch = self.__dict__.pop("_initial_epoch", None) or initial_epoch
        logs = {}
        train_function = self.make_train_function()
        batch_begin, batch_end = cbs.on_train_batch_begin, cbs.on_train_batch_end
        batch_logs = cbs.wants("on_train_batch_end")
        for epoch in range(int(initial_epoch), int(epochs)):
            self.reset_metrics()
            self._step_logs = None
            cbs.on_epoch_begin(epoch)
            for step, batch in enumerate(epochs_data.epoch()):
                batch_begin(step)
                train_function(batch)
                if batch_logs:  # read from the metrics only if a callback looks
                    batch_end(step, _StepLogs(self))
                if self.stop_training:
                    break
            logs = self._logs()
            if val is not None and (epoch + 1) % validation_freq == 0:
                val_logs = self._evaluate_data(val, _callbacks.CallbackList([], self, {}))
                logs.update({f"val_{k}": v for k, v in val_logs.items()})
            cbs.on_epoch_end(epoch, logs)
            if self.stop_training:
                break
        cbs.on_train_end(logs)
        return history

    def _evaluate_data(self, data, cbs):
        self._require_compiled("evaluate")
        self.reset_metrics()
        self._step_logs = None
        cbs.on_test_begin()
        logs = {}
        for step, batch in enumerate(data):
            cbs.on_test_batch_begin(step)
            logs = self._run_test_step(batch)
            cbs.on_test_batch_end(step, logs)
        logs = self._logs()
        cbs.on_test_end(logs)
        return logs

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 steps=None, callbacks=None, return_dict=False):
        """The loss and metrics over the data: a scalar (loss only), a list `[loss, *metrics]`,
        or a dict with `return_dict=True`."""
        self._require_compiled("evaluate")
        x, y, sample_weight = _floatx(self, (x, y, sample_weight), "evaluate")
        data = _adapter(x, y, sample_weight, batch_size, False, steps, "evaluate")
        logs = self._evaluate_data(data, _callbacks.CallbackList(callbacks or [], self, {}))
        if verbose not in (0, "auto") and verbose:
            print(" - ".join(f"{k}: {_callbacks._fmt(v)}" for k, v in logs.items()))
        if return_dict:
            return logs
        values = list(logs.values())
        return values[0] if len(values) == 1 else values

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """The model's outputs over the data, concatenated along the batch axis (numpy)."""
        x = _floatx(self, (x,), "predict")[0]
        data = _adapter(x, None, None, batch_size, False, steps, "predict")
        cbs = _callbacks.CallbackList(callbacks or [], self, {})
        cbs.on_predict_begin()
        outs = []
        for step, batch in enumerate(data):
            cbs.on_predict_batch_begin(step)
            outs.append(nest.map_structure(_np, self._distributed(
                lambda *b: self.predict_step(pack_x_y_sample_weight(*b)), "predict")(*batch)))
            cbs.on_predict_batch_end(step, {"outputs": outs[-1]})
        cbs.on_predict_end()
        if not outs:
            raise ValueError("predict: the input is empty")
        columns = zip(*[nest.flatten(o) for o in outs])
        return nest.pack_sequence_as(outs[0], [np.concatenate(c, axis=0) for c in columns])

    def train_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """One `train_step` on one batch; the loss (and metrics) of that batch."""
        self._require_compiled("train_on_batch")
        self.reset_metrics()
        logs = self.train_step(pack_x_y_sample_weight(_as_batch(x), _as_batch(y),
                                                      _as_batch(sample_weight)))
        logs = _flat_logs(logs) if self._overrides("train_step") else logs
        return logs if return_dict else _as_values(logs)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        self._require_compiled("test_on_batch")
        self.reset_metrics()
        logs = self.test_step(pack_x_y_sample_weight(_as_batch(x), _as_batch(y),
                                                     _as_batch(sample_weight)))
        logs = _flat_logs(logs) if self._overrides("test_step") else logs
        return logs if return_dict else _as_values(logs)

    def predict_on_batch(self, x):
        return nest.map_structure(_np, self(_as_batch(x), training=False))


def unpack_x_y_sample_weight(data):
    """(x, y, sample_weight) of a step's batch: `(x,)`, `(x, y)`, `(x, y, sample_weight)` or
    x alone, missing parts None (Keras' `keras.utils.unpack_x_y_sample_weight`)."""
    if isinstance(data, list):
        data = tuple(data)
    if not isinstance(data, tuple):
        return data, None, None
    if 1 <= len(data) <= 3:
        return tuple(data) + (None,) * (3 - len(data))
    raise ValueError(f"keras.utils.unpack_x_y_sample_weight: data must be x, (x,), (x, y) or "
                     f"(x, y, sample_weight), got a tuple of {len(data)}")


def pack_x_y_sample_weight(x, y=None, sample_weight=None):
    """The batch as a step gets it: `(x,)`, `(x, y)` or `(x, y, sample_weight)` (Keras'
    `keras.utils.pack_x_y_sample_weight`; x alone when it is a tuple or list itself, so that
    unpacking gives it back whole)."""
    if y is None and sample_weight is None:
        return (x,) if isinstance(x, (tuple, list)) else x
    return (x, y) if sample_weight is None else (x, y, sample_weight)


def _flat_logs(logs, prefix=""):
    """A step's logs with nested dicts flattened (Keras 3 logs `compile_metrics`' results
    under their own names)."""
    if not isinstance(logs, Mapping):
        raise TypeError(f"fit: an overridden train_step/test_step must return a dict of "
                        f"logs ({{name: value}}), got {type(logs).__name__}")
    out = {}
    for k, v in logs.items():
        if isinstance(v, Mapping):
            out.update(_flat_logs(v))
        else:
            out[k] = v
    return out


def _as_batch(v):
    return None if v is None else nest.map_structure(
        lambda a: a if isinstance(a, (Tensor, Variable)) else convert_to_tensor(np.asarray(a)),
        v)


def _as_values(logs):
    values = list(logs.values())
    return values[0] if len(values) == 1 else values
