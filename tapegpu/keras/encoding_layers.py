"""Keras 3's integer-encoding preprocessing layers: `CategoryEncoding` (one-hot, multi-hot and
count vectors of integer ids), `Discretization` (the bucket of each value, from given
boundaries or from quantiles learned by `adapt`) and `IntegerLookup` (integer tokens to
vocabulary indices). They run on the host (numpy), as Keras runs them in a tf.data
pipeline; their outputs carry no gradient (they are integer functions of the input)."""
import numpy as np

from ..core.tensor import Tensor, Variable, constant, convert_to_tensor
from ..errors import InvalidArgumentError
from .layers.base import Layer, _symbolic_input

__all__ = ["CategoryEncoding", "Discretization", "IntegerLookup"]

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


class _OneInput(Layer):
    """A layer of one input that a functional model's graph (keras.Input) calls symbolically."""

    def __call__(self, inputs, **kwargs):
        symbolic = _symbolic_input(inputs)
        if symbolic is not None:  # a functional model's graph (keras.Input)
            return symbolic._symbolic_call(self, inputs, (), {})
        return self._tracked(self.call, inputs)


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


class Discretization(_OneInput):
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


class IntegerLookup(_OneInput):
    """Maps integer tokens to contiguous indices through a vocabulary, as
    `keras.layers.IntegerLookup` (Keras 3's arguments): index 0 is the `mask_token` when one is
    set (output_mode 'int' only), then `num_oov_indices` indices for tokens not in the
    vocabulary (several: `token mod num_oov_indices`), then the vocabulary in order. The
    vocabulary is given or learned by `adapt` (most frequent first, ties by the larger token).
    `output_mode` 'one_hot', 'multi_hot' and 'count' encode the indices as `CategoryEncoding`
    does; `invert=True` maps indices back to tokens.

    >>> layer = tg.keras.layers.IntegerLookup(vocabulary=[12, 36, 1138, 42])
    >>> layer(tg.constant([[12, 1138, 42], [42, 1000, 36]])).numpy()
    array([[1, 3, 4],
           [4, 0, 2]])
    """

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token=-1,
                 vocabulary=None, vocabulary_dtype="int64", idf_weights=None, invert=False,
                 output_mode="int", sparse=False, pad_to_max_tokens=False, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if output_mode not in ("int",) + _MODES:
            if output_mode == "tf_idf":
                raise NotImplementedError("keras.layers.IntegerLookup(output_mode='tf_idf') is "
                                          "not available in tapegpu. Instead: output_mode="
                                          "'count' times your idf weights")
            raise ValueError(f"Unknown arg for output_mode: {output_mode}. Allowed values are "
                             f"{['int', *_MODES, 'tf_idf']}")
        if sparse:
            raise NotImplementedError("keras.layers.IntegerLookup(sparse=True) is not "
                                      "available in tapegpu: its outputs are dense. Instead: "
                                      "sparse=False")
        if max_tokens is not None and max_tokens <= 1:
            raise ValueError(f"If `max_tokens` is set for `IntegerLookup`, it must be greater "
                             f"than 1. Received: max_tokens={max_tokens}")
        if num_oov_indices < 0:
            raise ValueError(f"The value of `num_oov_indices` argument for `IntegerLookup` must "
                             f">= 0. Received: num_oov_indices={num_oov_indices}")
        if invert and output_mode != "int":
            raise ValueError(f"`output_mode` must be `'int'` when `invert` is true. Received: "
                             f"output_mode={output_mode}")
        if idf_weights is not None:
            raise ValueError("`idf_weights` should only be set if `output_mode` is 'tf_idf'.")
        self.max_tokens, self.num_oov_indices = max_tokens, int(num_oov_indices)
        self.mask_token = None if mask_token is None else int(mask_token)
        self.oov_token = None if oov_token is None else int(oov_token)
        self.vocabulary_dtype = np.dtype(vocabulary_dtype)
        self.invert, self.output_mode = bool(invert), output_mode
        self.pad_to_max_tokens, self.sparse = bool(pad_to_max_tokens), False
        self._vocab = []
        if vocabulary is not None:
            self.set_vocabulary(vocabulary)

    # -- the vocabulary ---------------------------------------------------------------------
    def _specials(self):
        mask = [self.mask_token] if self.mask_token is not None and \
            self.output_mode == "int" else []
        return mask + [self.oov_token] * self.num_oov_indices

    def set_vocabulary(self, vocabulary, idf_weights=None):
        """Sets the vocabulary (a list or 1-D array of distinct integers, no special
        tokens)."""
        if isinstance(vocabulary, str):
            raise NotImplementedError("keras.layers.IntegerLookup(vocabulary=<file path>) is not "
                                      "available in tapegpu. Instead: read the file and pass a "
                                      "list of integers")
        vocab = [int(v) for v in np.asarray(_host(vocabulary)).ravel()]
        if len(set(vocab)) != len(vocab):
            repeated = sorted({v for v in vocab if vocab.count(v) > 1})
            raise ValueError(f"The passed vocabulary has at least one repeated term. Please "
                             f"uniquify your dataset. The repeated terms are {repeated}")
        for special, what in ((self.mask_token, "mask_token"), (self.oov_token, "oov_token")):
            if special is not None and special in vocab and \
                    (what == "oov_token" and self.num_oov_indices or what == "mask_token"):
                raise ValueError(f"Found reserved tokens in `vocabulary`: {what}={special}")
        room = None if self.max_tokens is None else self.max_tokens - len(self._specials())
        if room is not None and len(vocab) > room:
            raise ValueError(f"Attempted to set a vocabulary larger than the maximum vocab size. "
                             f"Received vocabulary size is {len(vocab) + len(self._specials())}; "
                             f"`max_tokens` is {self.max_tokens}.")
        self._vocab = vocab

    def get_vocabulary(self, include_special_tokens=True):
        """The tokens by index (the special tokens first unless excluded)."""
        return (self._specials() if include_special_tokens else []) + list(self._vocab)

    def vocabulary_size(self):
        """The number of indices (the vocabulary and the special tokens)."""
        return len(self.get_vocabulary())

    def adapt(self, data, steps=None):
        """Learns the vocabulary from `data` (an array, a tensor, or a dataset / iterable of
        batches): tokens by decreasing frequency, ties by decreasing token, at most
        `max_tokens` minus the special indices."""
        counts = {}
        if isinstance(data, (np.ndarray, Tensor, Variable, list, tuple)):
            batches = [data]
        else:
            batches = data.take(steps) if steps is not None and hasattr(data, "take") else data
        for batch in batches:
            values, n = np.unique(np.asarray(_host(batch)).ravel().astype(np.int64),
                                  return_counts=True)
            for v, c in zip(values.tolist(), n.tolist()):
                counts[v] = counts.get(v, 0) + c
        for special in (self.mask_token, self.oov_token):
            counts.pop(special, None)
        order = sorted(counts, key=lambda t: (counts[t], t), reverse=True)
        room = None if self.max_tokens is None else self.max_tokens - len(self._specials())
        self._vocab = order[:room] if room is not None else order

    # -- calls ------------------------------------------------------------------------------
    def call(self, inputs):
        x = np.asarray(_host(inputs))
        if self.invert:
            vocab = np.asarray(self.get_vocabulary(), dtype=np.int64)
            idx = x.astype(np.int64)
            if idx.size and (idx.min() < 0 or idx.max() >= len(vocab)):
                raise InvalidArgumentError(f"IntegerLookup {self.name!r}: indices must be in "
                                           f"[0, {len(vocab)}) to invert")
            return convert_to_tensor(vocab[idx].astype(self.vocabulary_dtype))
        if x.dtype.kind not in "iu":
            raise ValueError(f"IntegerLookup {self.name!r}: inputs must be integers, got "
                             f"{x.dtype}")
        start = len(self._specials())
        table = {t: start + i for i, t in enumerate(self._vocab)}
        oov_start = 1 if self.mask_token is not None and self.output_mode == "int" else 0
        flat = x.astype(np.int64).ravel()
        out = np.empty(flat.shape, np.int64)
        for i, t in enumerate(flat.tolist()):
            if self.mask_token is not None and t == self.mask_token:
                out[i] = 0 if self.output_mode == "int" else -1
            elif t in table:
                out[i] = table[t]
            elif self.num_oov_indices == 0:
                raise InvalidArgumentError(f"IntegerLookup {self.name!r}: token {t} is not in "
                                           f"the vocabulary and num_oov_indices is 0")
            else:
                out[i] = oov_start + t % self.num_oov_indices
        ids = out.reshape(x.shape)
        if self.output_mode == "int":
            return convert_to_tensor(ids)
        depth = self.max_tokens if self.pad_to_max_tokens and self.max_tokens else \
            self.vocabulary_size()
        return _encode_skipping(ids, self.output_mode, depth, f"IntegerLookup {self.name!r}")


def _encode_skipping(ids, mode, depth, who):
    """`_encode` with ids of -1 (dropped mask tokens) contributing nothing."""
    if mode == "one_hot":
        out = _encode(np.maximum(ids, 0), mode, depth, np.float32, None, who).numpy()
        squeezed = ids[..., 0] if ids.ndim > 1 and ids.shape[-1] == 1 else ids
        out[squeezed < 0] = 0.0
        return constant(out)
    weights = (ids >= 0).astype(np.float64)
    out = _encode(np.maximum(ids, 0), "count", depth, np.float64, weights, who).numpy()
    if mode == "multi_hot":
        out = (out > 0).astype(np.float64)
    return constant(out.astype(np.float32))
