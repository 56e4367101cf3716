"""Keras 3's integer-encoding preprocessing layers: `CategoryEncoding` (one-hot, multi-hot and
count vectors of integer ids) and `Discretization` (the bucket of each value, from given
boundaries or from quantiles learned by `adapt`). Both run on the host (numpy), as Keras
runs them in a tf.data pipeline; their outputs carry no gradient (they are integer
functions of the input)."""
import numpy as np

from ..core.tensor import Tensor, Variable, constant, convert_to_tensor
from ..errors import InvalidArgumentError
from .layers.base import Layer, _symbolic_input

__all__ = ["CategoryEncoding", "Discretization"]

_MODES = ("one_hot", "multi_hot", "count")


def _host(inputs):
    if isinstance(inputs, Variable):
        inputs = inputs._read()
    if isinstance(inputs, Tensor):
        return inputs.numpy()
    return np.asarray(inputs)


def _encode(ids, mode, depth, dtype, weights, who):
    """Keras' `encode_categorical_inputs` for integer `ids` in [0, depth): 'one_hot' adds a
    last axis of `depth` (replacing a last axis of size 1), 'multi_hot' / 'count' turn the last
    axis (a rank-1 input is one sample) into `depth` presence flags / counts."""
    ids = np.asarray(ids)
    if ids.size and (ids.min() < 0 or ids.max() >= depth):
        raise InvalidArgumentError(f"{who}: Input values must be in the range 0 <= values < "
                                   f"num_tokens with num_tokens={depth}; got values in "
                                   f"[{int(ids.min())}, {int(ids.max())}]")
    ids = ids.astype(np.int64)
    if ids.ndim == 0:
        ids = ids[None]
    if mode == "one_hot":
        if ids.ndim > 1 and ids.shape[-1] == 1:
            ids = ids[..., 0]
        out = np.eye(depth, dtype=dtype)[ids]
        return constant(out)
    if ids.ndim > 2:
        raise ValueError(f"{who}: {mode!r} encodes inputs of rank 1 or 2 (a sample or a batch "
                         f"of samples), got shape {ids.shape}")
    rows = ids.reshape(-1, ids.shape[-1]) if ids.ndim == 2 else ids.reshape(1, -1)
    w = None if weights is None else np.asarray(weights, np.float64).reshape(rows.shape)
    out = np.zeros((rows.shape[0], depth), np.float64)
    r = np.repeat(np.arange(rows.shape[0]), rows.shape[1])
    np.add.at(out, (r, rows.ravel()), 1.0 if w is None else w.ravel())
    if mode == "multi_hot":
        out = (out > 0).astype(np.float64)
    out = out.astype(dtype)
    return constant(out if ids.ndim == 2 else out[0])


class CategoryEncoding(Layer):
    """Encodes integer ids in [0, num_tokens) as one-hot, multi-hot or count vectors, as
    `keras.layers.CategoryEncoding` (float32 output; `count_weights` weigh each id in 'count'
    mode).

    >>> layer = tg.keras.layers.CategoryEncoding(num_tokens=4, output_mode="multi_hot")
    >>> layer(tg.constant([[0, 1], [0, 0], [1, 2], [3, 1]])).numpy()
    array([[1., 1., 0., 0.],
           [1., 0., 0., 0.],
           [0., 1., 1., 0.],
           [0., 1., 0., 1.]], dtype=float32)
    """

    def __init__(self, num_tokens=None, output_mode="multi_hot", sparse=False, **kwargs):
        super().__init__(**kwargs)
        if num_tokens is None:
            raise ValueError("num_tokens must be set to use this layer. If the number of tokens "
                             "is not known beforehand, use the IntegerLookup layer instead.")
        if int(num_tokens) < 1:
            raise ValueError(f"`num_tokens` must be >= 1. Received: num_tokens={num_tokens}.")
        if output_mode not in _MODES:
            raise ValueError(f"Unknown arg for output_mode: {output_mode}. Allowed values are "
                             f"{list(_MODES)}")
        if sparse:
            raise NotImplementedError("keras.layers.CategoryEncoding(sparse=True) is not "
                                      "available in tapegpu: its outputs are dense. Instead: "
                                      "sparse=False")
        self.num_tokens, self.output_mode, self.sparse = int(num_tokens), output_mode, False

    def __call__(self, inputs, count_weights=None, **kwargs):
        symbolic = _symbolic_input(inputs)
        if symbolic is not None:  # a functional model's graph (keras.Input)
            extra = {} if count_weights is None else {"count_weights": count_weights}
            return symbolic._symbolic_call(self, inputs, (), extra)
        return self._tracked(self.call, inputs, count_weights)

    def call(self, inputs, count_weights=None):
        if count_weights is not None and self.output_mode != "count":
            raise ValueError(f"`count_weights` is not used when `output_mode` is not `'count'`. "
                             f"Received `count_weights={count_weights}`.")
        ids = _host(inputs)
        if ids.dtype.kind not in "iub":
            if ids.dtype.kind == "f" and np.all(ids == np.floor(ids)):
                ids = ids.astype(np.int64)  # Keras casts float-held ids
            else:
                raise ValueError(f"CategoryEncoding {self.name!r}: inputs must be integer ids, "
                                 f"got {ids.dtype}")
        weights = None if count_weights is None else _host(count_weights)
        dtype = self._dtype if self._dtype is not None and self._dtype.kind == "f" \
            else np.dtype(np.float32)
        return _encode(ids, self.output_mode, self.num_tokens, dtype, weights,
                       f"CategoryEncoding {self.name!r}")


# -- Discretization's quantile summaries (Keras' adapt): a summary is [values; weights]; a batch
# is summarised by every `step`-th sorted value, summaries merge by sorting and compress by
# interpolating the cumulative weights at multiples of epsilon; the boundaries are a final
# compression at multiples of 1 / num_bins, its last point dropped.

def _summarize(values, epsilon):
    v = np.sort(np.asarray(values, np.float32).ravel())
    increment = v.size * epsilon
    step = max(increment, 1)
    picked = v[int(increment)::int(step)]
    return np.stack([picked, np.full(picked.shape, step, dtype=picked.dtype)])


def _compress(summary, epsilon):
    if summary.shape[1] * epsilon < 1:
        return summary
    percents = epsilon + np.arange(0.0, 1.0, epsilon)
    cum = summary[1].cumsum()
    new_values = np.interp(percents, cum / cum[-1], summary[0])
    new_cum = np.interp(percents, cum / cum[-1], cum)
    weights = new_cum - np.concatenate(([0], new_cum[:-1]))
    return np.stack([new_values, weights]).astype(np.float32)


def _merge(a, b, epsilon):
    merged = np.concatenate([a, b], axis=1)
    return _compress(merged[:, np.argsort(merged[0])], epsilon)


class Discretization(Layer):
    """The bucket of each value: bucket 0 holds values below `bin_boundaries[0]`, bucket i
    those in [boundaries[i-1], boundaries[i]), as `keras.layers.Discretization`; with
    `num_bins` instead, `adapt(data)` learns quantile boundaries (Keras' approximate
    summaries, `epsilon` precision). `output_mode` 'int' gives int64 ids, 'one_hot',
    'multi_hot' and 'count' float vectors of `len(bin_boundaries) + 1`.

    >>> x = np.array([[-1.5, 1.0, 3.4, 0.5], [0.0, 3.0, 1.3, 0.0]])
    >>> tg.keras.layers.Discretization(bin_boundaries=[0.0, 1.0, 2.0])(x).numpy()
    array([[0, 2, 3, 1],
           [1, 3, 2, 1]])
    """

    def __init__(self, bin_boundaries=None, num_bins=None, epsilon=0.01, output_mode="int",
                 sparse=False, dtype=None, name=None):
        if output_mode not in ("int",) + _MODES:
            raise ValueError(f"Unknown arg for output_mode: {output_mode}. Allowed values are "
                             f"{['int', *_MODES]}")
        if dtype is None:
            dtype = "int64" if output_mode == "int" else "float32"
        super().__init__(dtype=dtype, name=name)
        if sparse:
            raise NotImplementedError("keras.layers.Discretization(sparse=True) is not "
                                      "available in tapegpu: its outputs are dense. Instead: "
                                      "sparse=False")
        if num_bins is not None and num_bins < 0:
            raise ValueError(f"`num_bins` must be greater than or equal to 0. Received: "
                             f"`num_bins={num_bins}`")
        if num_bins is not None and bin_boundaries is not None:
            raise ValueError(f"Both `num_bins` and `bin_boundaries` should not be set. "
                             f"Received: `num_bins={num_bins}` and "
                             f"`bin_boundaries={bin_boundaries}`")
        if num_bins is None and bin_boundaries is None:
            raise ValueError("You need to set either `num_bins` or `bin_boundaries`.")
        self.bin_boundaries = None if bin_boundaries is None else \
            [float(b) for b in bin_boundaries]
        self.num_bins, self.epsilon = num_bins, float(epsilon)
        self.output_mode, self.sparse = output_mode, False
        self.summary = None if self.bin_boundaries else np.zeros((2, 0), np.float32)

    def adapt(self, data, steps=None):
        """Learns `num_bins` quantile boundaries from `data` (an array, a tensor, or a
        dataset / iterable of batches; `steps` batches at most)."""
        if self.num_bins is None:
            raise ValueError("Cannot adapt a Discretization layer that has been initialized "
                             "with `bin_boundaries`, use `num_bins` instead.")
        self.summary = np.zeros((2, 0), np.float32)
        if isinstance(data, (np.ndarray, Tensor, Variable, list, tuple)):
            batches = [data]
        else:
            batches = data.take(steps) if steps is not None and hasattr(data, "take") else data
        for batch in batches:
            values = _host(batch).astype(np.float32)
            self.summary = _merge(_summarize(values, self.epsilon), self.summary, self.epsilon)
        self.bin_boundaries = _compress(self.summary, 1.0 / self.num_bins)[0, :-1].tolist()

    def __call__(self, inputs, **kwargs):
        symbolic = _symbolic_input(inputs)
        if symbolic is not None:  # a functional model's graph (keras.Input)
            return symbolic._symbolic_call(self, inputs, (), {})
        return self._tracked(self.call, inputs)

    def call(self, inputs):
        if self.bin_boundaries is None:
            raise ValueError("You need to either pass the `bin_boundaries` argument at "
                             "construction time or call `adapt(dataset)` before you can start "
                             "using the `Discretization` layer.")
        ids = np.digitize(_host(inputs), np.asarray(self.bin_boundaries, np.float64))
        if self.output_mode == "int":
            return convert_to_tensor(ids.astype(self._dtype))
        return _encode(ids, self.output_mode, len(self.bin_boundaries) + 1, self._dtype, None,
                       f"Discretization {self.name!r}")
