"""The functions of `keras.utils` (`to_categorical`, `set_random_seed`, `pad_sequences`,
`normalize`, `timeseries_dataset_from_array`, `Progbar`); `keras.backend` is backend.py."""
import random as _py_random
import sys
import time
import types

import numpy as np

from .. import ops as _ops
from ..core.tensor import Tensor
from ..data import Dataset
from ..ops import random as _tg_random


def to_categorical(x, num_classes=None):
    """One-hot rows (float32) for integer labels `x`; `num_classes` defaults to max(x) + 1.

    >>> tg.keras.utils.to_categorical([0, 2], num_classes=3)
    array([[1., 0., 0.],
           [0., 0., 1.]], dtype=float32)
    """
    x = np.asarray(x.numpy() if hasattr(x, "numpy") else x)
    if x.dtype.kind == "f":
        if not np.all(x == np.round(x)):
            raise ValueError("to_categorical: labels must be integers")
        x = x.astype(np.int64)
    if x.dtype.kind not in "iu":
        raise TypeError(f"to_categorical: labels must be integers, got {x.dtype.name}")
    if x.ndim and x.shape[-1] == 1 and x.ndim > 1:
        x = x[..., 0]
    n = int(x.max()) + 1 if num_classes is None else int(num_classes)
    if x.size and (x.min() < 0 or x.max() >= n):
        raise ValueError(f"to_categorical: labels must be in [0, {n}), got values in "
                         f"[{x.min()}, {x.max()}]")
    return np.eye(n, dtype=np.float32)[x]


def set_random_seed(seed):
    """Seeds Python's `random`, numpy's global generator and tapegpu's (`tg.random.set_seed`)
    with one integer, as keras.utils.set_random_seed.

    >>> tg.keras.utils.set_random_seed(1); a = tg.random.uniform((2,)).numpy()
    >>> tg.keras.utils.set_random_seed(1); bool((a == tg.random.uniform((2,)).numpy()).all())
    True
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"set_random_seed: Expected `seed` argument to be an integer. "
                         f"Received: seed={seed} (of type {type(seed)})")
    _py_random.seed(int(seed))
    np.random.seed(int(seed) % 2 ** 32)
    _tg_random.set_seed(int(seed))


def pad_sequences(sequences, maxlen=None, dtype="int32", padding="pre", truncating="pre",
                  value=0.0):
    """The sequences as one numpy array (len(sequences), maxlen) + their common trailing
    shape: longer ones cut at the start (`truncating="pre"`) or end ("post"), shorter ones
    filled with `value` before ("pre") or after ("post"); `maxlen` defaults to the longest.

    >>> tg.keras.utils.pad_sequences([[1, 2, 3], [4]], maxlen=2)
    array([[2, 3],
           [0, 4]], dtype=int32)
    """
    if padding not in ("pre", "post"):
        raise ValueError(f'pad_sequences: Padding type "{padding}" not understood')
    if truncating not in ("pre", "post"):
        raise ValueError(f'pad_sequences: Truncating type "{truncating}" not understood')
    rows = []
    for s in sequences:
        if not hasattr(s, "__len__"):
            raise ValueError(f"pad_sequences: `sequences` must be a list of iterables. Found "
                             f"non-iterable: {s}")
        rows.append(np.asarray(s.numpy() if isinstance(s, Tensor) else s))
    dt = np.dtype(dtype)
    if isinstance(value, str) and dt.kind not in "OUS":
        raise ValueError(f"pad_sequences: `dtype` {dt} is not compatible with `value`'s type: "
                         f"{type(value)}\nYou should set `dtype=object` for variable length "
                         f"strings.")
    trailing = next((r.shape[1:] for r in rows if len(r)), ())
    n = max((len(r) for r in rows), default=0) if maxlen is None else int(maxlen)
    out = np.full((len(rows), n) + trailing, value, dtype=dt)
    for i, r in enumerate(rows):
        if not len(r) or not n:
            continue
        r = r[-n:] if truncating == "pre" else r[:n]
        if r.shape[1:] != trailing:
            raise ValueError(f"pad_sequences: Shape of sample {r.shape[1:]} of sequence at "
                             f"position {i} is different from expected shape {trailing}")
        if padding == "post":
            out[i, :len(r)] = r
        else:
            out[i, n - len(r):] = r
    return out


def normalize(x, axis=-1, order=2):
    """`x` divided by its `order`-norm along `axis` (rows of norm 0 stay 0): a numpy array for
    a numpy array, a tensor (differentiable) otherwise, as keras.utils.normalize (whose numpy
    path divides along the last axis whatever `axis` is; here along `axis`).

    >>> tg.keras.utils.normalize(np.array([[3.0, 4.0]]))
    array([[0.6, 0.8]])
    """
    if isinstance(x, np.ndarray):
        x = x.astype(np.float64) if x.dtype.kind not in "fc" else x
        norm = np.linalg.norm(x, order, axis, keepdims=True)
        return x / np.where(norm == 0, 1, norm)
    t = _ops.convert_to_tensor(x)
    if t._data.dtype.kind != "f":
        raise TypeError(f"normalize: expected a floating tensor, got {t.dtype.name}")
    norm = _ops.norm(t, ord=order, axis=axis, keepdims=True)
    zero = _ops.equal(norm, _ops.zeros_like(norm))
    return t / _ops.where(zero, _ops.ones_like(norm), norm)


def _check_window_args(n, sequence_stride, sampling_rate, start_index, end_index):
    who = "timeseries_dataset_from_array"
    if start_index:
        if start_index < 0:
            raise ValueError(f"{who}: `start_index` must be 0 or greater. Received: "
                             f"start_index={start_index}")
        if start_index >= n:
            raise ValueError(f"{who}: `start_index` must be lower than the length of the data. "
                             f"Received: start_index={start_index}, for data of length {n}")
    if end_index:
        if start_index and end_index <= start_index:
            raise ValueError(f"{who}: `end_index` must be higher than `start_index`. Received: "
                             f"start_index={start_index}, and end_index={end_index}")
        if end_index >= n:
            raise ValueError(f"{who}: `end_index` must be lower than the length of the data. "
                             f"Received: end_index={end_index}, for data of length {n}")
        if end_index <= 0:
            raise ValueError(f"{who}: `end_index` must be higher than 0. Received: "
                             f"end_index={end_index}")
    for name, v in (("sampling_rate", sampling_rate), ("sequence_stride", sequence_stride)):
        if v <= 0:
            raise ValueError(f"{who}: `{name}` must be higher than 0. Received: {name}={v}")
        if v >= n:
            raise ValueError(f"{who}: `{name}` must be lower than the length of the data. "
                             f"Received: {name}={v}, for data of length {n}")


def timeseries_dataset_from_array(data, targets, sequence_length, sequence_stride=1,
                                  sampling_rate=1, batch_size=128, shuffle=False, seed=None,
                                  start_index=None, end_index=None):
    """A `tg.data.Dataset` of windows of `data` (time along axis 0), as Keras': window k
    holds data[start_index + p_k + j * sampling_rate] for j < sequence_length, where
    p_k = k * sequence_stride, and is paired with targets[p_k] when `targets` is given;
    windows must end before `end_index`. Batched by `batch_size` (None: single windows);
    `shuffle` shuffles the windows (with `seed`).

    >>> ds = tg.keras.utils.timeseries_dataset_from_array(
    ...     np.arange(10), np.arange(10) * 10, sequence_length=3, sequence_stride=3)
    >>> [(x.numpy().tolist(), y.numpy().tolist()) for x, y in ds]
    [([[0, 1, 2], [3, 4, 5], [6, 7, 8]], [0, 30, 60])]
    """
    values = np.asarray(data.numpy() if isinstance(data, Tensor) else data)
    n = len(values)
    _check_window_args(n, sequence_stride, sampling_rate, start_index, end_index)
    start = 0 if start_index is None else int(start_index)
    end = n if end_index is None else int(end_index)
    count = end - start - (sequence_length - 1) * sampling_rate
    target_values = None
    if targets is not None:
        target_values = np.asarray(targets.numpy() if isinstance(targets, Tensor) else targets)
        count = min(count, len(target_values))
    starts = np.arange(0, max(count, 0), sequence_stride)
    if shuffle:
        rng = np.random.RandomState(np.random.randint(1e6) if seed is None else seed)
        rng.shuffle(starts)
    offsets = np.arange(sequence_length) * sampling_rate
    windows = values[start:end][starts[:, None] + offsets] if len(starts) else \
        np.zeros((0, sequence_length) + values.shape[1:], values.dtype)
    parts = windows
    if target_values is not None:
        parts = (windows, target_values[start:end][starts] if len(starts) else
                 target_values[:0])
    dataset = Dataset.from_tensor_slices(parts)
    if batch_size is not None:
        if shuffle:
            dataset = dataset.shuffle(buffer_size=batch_size * 8, seed=seed)
        dataset = dataset.batch(batch_size)
    elif shuffle:
        dataset = dataset.shuffle(buffer_size=1024, seed=seed)
    return dataset


class Progbar:
    """A text progress bar, as keras.utils.Progbar: `update(current, values)` redraws it
    (`values`: (name, value) pairs, averaged over the steps seen unless named in
    `stateful_metrics`), `add(n, values)` advances by n. verbose=1 redraws one line, 2 prints
    one line when done, 0 nothing; `target` None: unknown length.

    >>> bar = tg.keras.utils.Progbar(2, verbose=0)
    >>> bar.update(1, [("loss", 1.0)]); bar.update(2, [("loss", 3.0)])
    >>> bar.mean("loss")
    2.0
    """

    def __init__(self, target, width=20, verbose=1, interval=0.05, stateful_metrics=None,
                 unit_name="step"):
        self.target, self.width, self.verbose = target, int(width), verbose
        self.interval, self.unit_name = interval, unit_name
        self.stateful_metrics = set(stateful_metrics or ())
        self._seen = 0
        self._values = {}  # name -> [sum of value * steps, steps] (or [value, 1] if stateful)
        self._start = time.time()
        self._last_draw = 0.0

    def mean(self, name):
        """The current (averaged) value of metric `name`."""
        total, steps = self._values[name]
        return total / max(steps, 1)

    def update(self, current, values=None, finalize=None):
        """Moves the bar to step `current` and records `values` (see the class)."""
        finalize = (self.target is not None and current >= self.target) if finalize is None \
            else finalize
        for name, v in values or ():
            v = float(v.numpy()) if isinstance(v, Tensor) else float(v)
            if name in self.stateful_metrics:
                self._values[name] = [v, 1]
            else:
                steps = max(current - self._seen, 1)
                total = self._values.setdefault(name, [0.0, 0])
                total[0] += v * steps
                total[1] += steps
        self._seen = current
        now = time.time()
        if self.verbose == 1 and (finalize or now - self._last_draw >= self.interval):
            sys.stdout.write("\r" + self._line(current) + ("\n" if finalize else ""))
            sys.stdout.flush()
            self._last_draw = now
        elif self.verbose == 2 and finalize:
            sys.stdout.write(self._line(current) + "\n")

    def add(self, n, values=None):
        """Advances the bar by `n` steps."""
        self.update(self._seen + n, values)

    def _line(self, current):
        if self.target is None:
            bar = f"{current}/Unknown"
        else:
            done = int(self.width * min(current / max(self.target, 1), 1))
            arrow = ">" if done < self.width else ""
            bar = (f"{current}/{self.target} [" + "=" * (done - (arrow != "")) + arrow +
                   "." * (self.width - done) + "]")
        elapsed = time.time() - self._start
        metrics = "".join(f" - {k}: {self.mean(k):.4f}" for k in self._values)
        return f"{bar} {elapsed:.0f}s{metrics}"


utils = types.ModuleType("tapegpu.keras.utils", "`to_categorical`, `set_random_seed`, "
                        "`pad_sequences`, `normalize`, `timeseries_dataset_from_array`, "
                        "`Progbar`.")
utils.to_categorical = to_categorical
utils.set_random_seed = set_random_seed
utils.pad_sequences = pad_sequences
utils.normalize = normalize
utils.timeseries_dataset_from_array = timeseries_dataset_from_array
utils.Progbar = Progbar
