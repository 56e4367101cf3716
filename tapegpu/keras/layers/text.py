"""Keras 3's text preprocessing layers: `StringLookup` (strings to vocabulary indices and back)
and `TextVectorization` (standardize, split, n-grams, then `StringLookup`).

Both run on the host, on `tg.string` tensors (numpy object arrays of bytes), as TensorFlow runs
them on the CPU: they have no gradient and no weights to train. Their behaviour is Keras 3's:

- the vocabulary is `[mask_token] + [oov_token] * num_oov_indices + tokens` in `"int"` mode
  (the mask token only when it is set); in the other modes the mask token is left out and
  masked inputs are dropped;
- `adapt` counts the tokens and keeps them by decreasing count, ties broken by the tokens in
  decreasing order (Keras' `np.lexsort(...)[::-1]`), cut to `max_tokens` less the special
  tokens; for `"tf_idf"` the weights are `log(1 + documents / (1 + documents with the
  token))`, the OOV entries taking their mean;
- with more than one OOV index an unknown token goes to OOV index `fingerprint64(token) %
  num_oov_indices` (`tg.strings.to_hash_bucket_fast`), as Keras;
- `"multi_hot"`, `"count"` and `"tf_idf"` outputs are one row of `depth` values per sample
  (the last input axis is the sample's tokens), `"one_hot"` one row per token (a new last
  axis), as Keras 3's `encode_categorical_inputs`.
"""
import collections
import math
import re

import numpy as np

from ... import strings as _strings
from ...core.tensor import Tensor, convert_to_tensor
from ...ops.registry import InvalidArgumentError
from ...ragged import RaggedTensor
from .base import Layer

_OUTPUT_MODES = ("int", "one_hot", "multi_hot", "count", "tf_idf")
# Keras 3's punctuation class for "strip_punctuation" (TextVectorization)
_PUNCTUATION = re.compile(rb'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']')


def _bytes(token, encoding="utf-8"):
    if isinstance(token, bytes):
        return token
    if isinstance(token, str):
        return token.encode(encoding)
    if isinstance(token, np.generic):
        return _bytes(token.item(), encoding)
    raise TypeError(f"expected a string token, got {token!r}")


def _text(token, encoding="utf-8"):
    return token.decode(encoding) if isinstance(token, bytes) else token


def _object_array(values, shape=None):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out if shape is None else out.reshape(shape)


def _string_tensor(x, who):
    """`x` (a tensor, RaggedTensor, array, list or str) as a tg.string Tensor or RaggedTensor."""
    if isinstance(x, RaggedTensor):
        return x
    if isinstance(x, (list, tuple)) and any(isinstance(r, (list, tuple)) for r in x):
        lengths = {len(r) for r in x if isinstance(r, (list, tuple))}
        if len(lengths) > 1:
            from ... import ragged
            return ragged.constant(x)
    t = convert_to_tensor(x)
    if not t.dtype.is_string:
        raise TypeError(f"{who}: expected string inputs, got {t.dtype.name} of shape {t.shape}")
    return t


def _ragged_rows(x):
    """The rows (lists of bytes) of a RaggedTensor of rank 2: the samples' tokens."""
    if x.ragged_rank != 1:
        raise ValueError(f"expected a RaggedTensor of rank 2 (samples of tokens), got ragged "
                         f"rank {x.ragged_rank}")
    return [list(r) for r in x.to_list()]



def _output_mode(output_mode, who):
    """Keras' `output_mode`, its older spellings ("binary", "tf-idf") read as today's."""
    if output_mode == "binary":
        output_mode = "multi_hot"
    elif output_mode == "tf-idf":
        output_mode = "tf_idf"
    if output_mode not in _OUTPUT_MODES:
        raise ValueError(f"{who}: invalid value for argument `output_mode`; expected one "
                         f"of {_OUTPUT_MODES}, received output_mode={output_mode!r}")
    return output_mode

class StringLookup(Layer):
    """Maps strings to integer indices of a vocabulary (Keras 3's `StringLookup`), or back with
    `invert=True`; with `output_mode` `"one_hot"`, `"multi_hot"`, `"count"` or `"tf_idf"` it
    encodes the indices. Give the `vocabulary` (a list, array, tensor or a text file with one
    token a line) or learn it with `adapt(data)`. See the module docstring for the rules.

    >>> layer = tg.keras.layers.StringLookup(vocabulary=["a", "b", "c", "d"])
    >>> layer(tg.constant([["a", "c", "d"], ["d", "z", "b"]])).numpy()
    array([[1, 3, 4],
           [4, 0, 2]])
    >>> layer.get_vocabulary()
    ['[UNK]', 'a', 'b', 'c', 'd']
    """

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token="[UNK]",
                 vocabulary=None, idf_weights=None, invert=False, output_mode="int",
                 pad_to_max_tokens=False, sparse=False, encoding="utf-8", name=None, **kwargs):
        kwargs.pop("has_input_vocabulary", None)
        kwargs.pop("vocabulary_size", None)
        kwargs.pop("vocabulary_dtype", None)
        super().__init__(name=name, **kwargs)
        who = f"{type(self).__name__}"
        output_mode = _output_mode(output_mode, who)
        if max_tokens is not None and max_tokens <= 1:
            raise ValueError(f"{who}: if set, `max_tokens` must be greater than 1, received "
                             f"max_tokens={max_tokens}")
        if pad_to_max_tokens and max_tokens is None:
            raise ValueError(f"{who}: if pad_to_max_tokens is True, must set `max_tokens`, "
                             f"received max_tokens={max_tokens}")
        if num_oov_indices < 0:
            raise ValueError(f"{who}: `num_oov_indices` must be greater than or equal to 0, "
                             f"received num_oov_indices={num_oov_indices}")
        if invert and output_mode != "int":
            raise ValueError(f"{who}: `output_mode` must be 'int' when `invert` is true, "
                             f"received output_mode={output_mode!r}")
        if sparse:
            raise ValueError(f"{who}: sparse=True is not supported by tapegpu (dense outputs "
                             f"only); received sparse={sparse}")
        if output_mode == "tf_idf" and idf_weights is None and vocabulary is not None:
            raise ValueError(f"{who}: `idf_weights` must be set if output_mode is 'tf_idf' "
                             "and a vocabulary is given")
        self.max_tokens, self.num_oov_indices = max_tokens, int(num_oov_indices)
        self.mask_token, self.oov_token = mask_token, oov_token
        self.invert, self.output_mode = bool(invert), output_mode
        self.pad_to_max_tokens, self.sparse, self.encoding = pad_to_max_tokens, sparse, encoding
        self.input_vocabulary, self.input_idf_weights = vocabulary, idf_weights
        self._tokens = []          # the learned / given tokens (bytes), in index order
        self._index = {}           # token -> index
        self.idf_weights = None    # numpy float32 (vocabulary_size or max_tokens,) for tf_idf
        self._has_input_vocabulary = vocabulary is not None
        self.built = True
        if vocabulary is not None:
            self.set_vocabulary(vocabulary, idf_weights)

    # -- the vocabulary ---------------------------------------------------------------------
    def _oov_start_index(self):
        return 1 if self.mask_token is not None and self.output_mode == "int" else 0

    def _token_start_index(self):
        return self._oov_start_index() + self.num_oov_indices

    def _special_tokens(self):
        return [self.mask_token] * self._oov_start_index() + \
            [self.oov_token] * self.num_oov_indices

    def vocabulary_size(self):
        """The size of the vocabulary, special tokens included."""
        return self._token_start_index() + len(self._tokens)

    def get_vocabulary(self, include_special_tokens=True):
        """The vocabulary as a list of str, in index order (with the mask and OOV tokens first
        unless `include_special_tokens=False`)."""
        vocab = [_text(t, self.encoding) for t in self._tokens]
        if include_special_tokens:
            vocab = [_text(t, self.encoding) for t in self._special_tokens()] + vocab
        return vocab

    def _set_tokens(self, tokens):
        self._tokens = list(tokens)
        start = self._token_start_index()
        self._index = {t: start + i for i, t in enumerate(self._tokens)}

    def set_vocabulary(self, vocabulary, idf_weights=None):
        """Sets the vocabulary (a list, array, 1-D tensor, or the path of a text file with one
        token a line) and, for `"tf_idf"`, its `idf_weights`."""
        who = f"{type(self).__name__} {self.name!r}"
        if self.output_mode == "tf_idf":
            if idf_weights is None:
                raise ValueError(f"{who}: `idf_weights` must be set if output_mode is 'tf_idf'")
        elif idf_weights is not None:
            raise ValueError(f"{who}: `idf_weights` should only be set if output_mode is "
                             f"'tf_idf', received output_mode={self.output_mode!r} and "
                             f"idf_weights={idf_weights}")
        if isinstance(vocabulary, str):
            if self.output_mode == "tf_idf":
                raise ValueError(f"{who}: output_mode 'tf_idf' does not support loading a "
                                 "vocabulary from file")
            try:
                with open(vocabulary, "rb") as f:
                    lines = f.read().split(b"\n")
            except OSError:
                raise ValueError(f"{who}: vocabulary file {vocabulary} does not exist") \
                    from None
            while lines and lines[-1] == b"":
                lines.pop()
            tokens = [ln.rstrip(b"\r") for ln in lines]
        else:
            if isinstance(vocabulary, Tensor):
                vocabulary = vocabulary.numpy()
            tokens = [_bytes(t, self.encoding) for t in np.asarray(vocabulary, object).ravel()]
        if not tokens:
            raise ValueError(f"{who}: cannot set an empty vocabulary, received "
                             f"vocabulary={vocabulary}")
        specials = [_bytes(t, self.encoding) if t is not None else None
                    for t in self._special_tokens()]
        start = self._token_start_index()
        found_specials = tokens[:start] == specials
        if found_specials:
            tokens = tokens[start:]
        repeated = [t for t, c in collections.Counter(tokens).items() if c > 1]
        if repeated:
            raise ValueError(f"{who}: the passed vocabulary has at least one repeated term. "
                             f"Please uniquify your dataset. The repeated terms are: "
                             f"{[_text(t, self.encoding) for t in repeated]}")
        if self.mask_token is not None and _bytes(self.mask_token) in tokens:
            raise ValueError(f"{who}: found reserved mask token {self.mask_token!r} at an "
                             f"unexpected location in `vocabulary`; the vocabulary need not "
                             f"hold the mask and OOV tokens, or holds them only at its start "
                             f"in this order: {self._special_tokens()}")
        if self.oov_token is not None and self.invert and _bytes(self.oov_token) in tokens:
            raise ValueError(f"{who}: found reserved OOV token {self.oov_token!r} at an "
                             f"unexpected location in `vocabulary`; include it only at the "
                             f"start, in this order: {self._special_tokens()}")
        if self.max_tokens is not None and start + len(tokens) > self.max_tokens:
            raise ValueError(f"{who}: attempted to set a vocabulary larger than the maximum "
                             f"vocab size. Received vocabulary size is {start + len(tokens)}; "
                             f"`max_tokens` is {self.max_tokens}")
        self._set_tokens(tokens)
        if self.output_mode == "tf_idf":
            w = np.asarray(idf_weights.numpy() if isinstance(idf_weights, Tensor)
                           else idf_weights, np.float64)
            if w.ndim != 1 or len(w) != len(tokens) + (start if found_specials else 0):
                raise ValueError(f"{who}: `idf_weights` must be a 1-D array as long as the "
                                 f"vocabulary ({len(tokens)}), got shape {w.shape}")
            if not found_specials:
                w = np.concatenate([np.full(start, w.mean()), w])
            self._set_idf(w)

    def _set_idf(self, w):
        if self.pad_to_max_tokens and self.max_tokens is not None:
            w = np.concatenate([w, np.zeros(self.max_tokens - len(w))])
        self.idf_weights = w.astype(np.float32)

    # -- adapt ------------------------------------------------------------------------------
    def adapt(self, data, steps=None):
        """Learns the vocabulary (and, for `"tf_idf"`, the document frequencies) from `data`:
        a list, array or tensor of strings (each element a document, each row of a 2-D one a
        document), a `tg.data.Dataset` or an iterable of such batches."""
        if self._has_input_vocabulary:
            raise ValueError(f"Cannot adapt layer {self.name!r} after setting a static "
                             "vocabulary via `vocabulary` argument or `set_vocabulary()` method")
        counts, doc_counts, docs = collections.Counter(), collections.Counter(), 0
        for batch in _batches(data, steps, self.name):
            for row in self._documents(batch):
                counts.update(row)
                if self.output_mode == "tf_idf":
                    doc_counts.update(set(row))
                    docs += 1
        for special in (self.mask_token, self.oov_token):
            if special is not None:
                counts.pop(_bytes(special, self.encoding), None)
        ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        if self.max_tokens:
            ordered = ordered[:max(self.max_tokens - self._token_start_index(), 0)]
        self._set_tokens([t for t, _ in ordered])
        if self.output_mode == "tf_idf":
            w = np.array([math.log(1 + docs / (1 + doc_counts[t])) for t, _ in ordered])
            mean = w.mean() if len(w) else 0.0
            self._set_idf(np.concatenate([np.full(self._token_start_index(), mean), w]))

    def _documents(self, batch):
        """The documents (lists of tokens) of one batch of `adapt`'s data."""
        if isinstance(batch, (tuple, list)) and len(batch) == 2 and \
                all(isinstance(b, (Tensor, RaggedTensor)) for b in batch):
            batch = batch[0]  # an (x, y) pair of a dataset
        x = _string_tensor(batch, f"{type(self).__name__}.adapt")
        if isinstance(x, RaggedTensor):
            return [[_bytes(t) for t in r] for r in x.to_list()]
        a = x.numpy()
        if a.ndim == 0:
            return [[a.item()]]
        if a.ndim == 1:
            return [list(a)]
        return [list(r) for r in a.reshape(a.shape[0], -1)]

    # -- calling ----------------------------------------------------------------------------
    def _convert(self, inputs):
        if isinstance(inputs, RaggedTensor):
            return inputs
        if self.invert:
            return convert_to_tensor(inputs)
        return _string_tensor(inputs, f"{type(self).__name__} {self.name!r}")

    def build(self, input_shape):
        pass

    def _lookup(self, a):
        """Indices (int64) of the bytes in the object array `a`, with the mask and OOV rules."""
        start, n_oov = self._oov_start_index(), self.num_oov_indices
        mask = _bytes(self.mask_token, self.encoding) if self.mask_token is not None else None
        a = np.asarray(a, dtype=object)
        out = np.empty(a.shape, np.int64)
        flat, res = a.ravel(), out.reshape(-1)
        for i, t in enumerate(flat):
            t = _bytes(t, self.encoding)
            if mask is not None and t == mask:
                res[i] = 0 if self.output_mode == "int" else -1
                continue
            idx = self._index.get(t)
            if idx is None:
                if n_oov == 0:
                    raise InvalidArgumentError(
                        f"When `num_oov_indices=0` all inputs should be in vocabulary, found "
                        f"OOV values [{t!r}], consider setting `num_oov_indices=1`.")
                idx = start + (_strings._fingerprint64(t) % n_oov if n_oov > 1 else 0)
            res[i] = idx
        return out

    def _invert(self, a):
        vocab = [_bytes(t, self.encoding) for t in self.get_vocabulary()]
        oov = _bytes(self.oov_token, self.encoding)
        start = self._token_start_index()
        a = np.asarray(a)
        out = np.empty(a.shape, object)
        res = out.reshape(-1)
        for i, k in enumerate(a.ravel()):
            k = int(k)
            if self.mask_token is not None and k == 0:
                res[i] = _bytes(self.mask_token, self.encoding)
            elif start <= k < len(vocab):
                res[i] = vocab[k]
            else:
                res[i] = oov
        return out

    def call(self, inputs):
        if self.invert:
            if isinstance(inputs, RaggedTensor):
                return inputs.with_flat_values(convert_to_tensor(
                    self._invert(inputs.flat_values.numpy())))
            return convert_to_tensor(self._invert(inputs.numpy()))
        if self.output_mode == "int":
            if isinstance(inputs, RaggedTensor):
                return inputs.with_flat_values(convert_to_tensor(
                    self._lookup(inputs.flat_values.numpy())))
            return convert_to_tensor(self._lookup(inputs.numpy()))
        return self._encode(inputs)

    def _depth(self):
        if self.pad_to_max_tokens:
            return self.max_tokens
        return self.vocabulary_size()

    def _encode(self, inputs):
        """Keras' `encode_categorical_inputs` of the looked-up indices: `"one_hot"` adds an
        axis of `depth`; `"multi_hot"`, `"count"` and `"tf_idf"` reduce the last axis (the
        tokens of a sample) to `depth` values. A scalar input counts as one token."""
        depth = self._depth()
        who = f"{type(self).__name__} {self.name!r}"
        if self.output_mode == "tf_idf" and self.idf_weights is None:
            raise ValueError(f"{who}: when output_mode is 'tf_idf', idf_weights must be set "
                             "(adapt the layer or pass vocabulary and idf_weights)")
        if isinstance(inputs, RaggedTensor):
            if self.output_mode == "one_hot":
                idx = self._lookup(inputs.flat_values.numpy())
                return inputs.with_flat_values(convert_to_tensor(_one_hot(idx, depth)))
            rows = _ragged_rows(inputs)
            idx = [self._lookup(_object_array(r)) for r in rows]
            out = np.stack([self._reduce(i, depth) for i in idx]) if idx else \
                np.zeros((0, depth), np.float32)
        else:
            idx = self._lookup(inputs.numpy())
            if idx.ndim == 0:
                idx = idx[None]
            if idx.ndim > 2 and self.output_mode not in ("one_hot", "multi_hot"):
                raise ValueError(f"{who}: when output_mode is anything other than 'multi_hot', "
                                 f"'one_hot', or 'int', the rank must be 2 or less. Received "
                                 f"output_mode: {self.output_mode} and input shape: "
                                 f"{tuple(inputs.shape)}")
            if self.output_mode == "one_hot":
                return convert_to_tensor(_one_hot(idx, depth))
            flat = idx.reshape(-1, idx.shape[-1])
            out = np.stack([self._reduce(i, depth) for i in flat]).reshape(
                idx.shape[:-1] + (depth,))
        if self.output_mode == "tf_idf":
            out = out * self.idf_weights[:depth]
        return convert_to_tensor(out.astype(np.float32))

    def _reduce(self, idx, depth):
        """One sample's indices as `depth` values: presence (multi_hot) or counts."""
        idx = idx[(idx >= 0) & (idx < depth)]
        counts = np.bincount(idx, minlength=depth)[:depth].astype(np.float32)
        return np.minimum(counts, 1.0) if self.output_mode == "multi_hot" else counts

    def compute_output_shape(self, input_shape):
        if self.output_mode == "int":
            return tuple(input_shape)
        depth = self._depth()
        input_shape = tuple(input_shape)
        if self.output_mode == "one_hot":
            return (input_shape or (1,)) + (depth,)
        return input_shape[:-1] + (depth,)

    def get_config(self):
        config = super().get_config()
        config.update(max_tokens=self.max_tokens, num_oov_indices=self.num_oov_indices,
                      mask_token=self.mask_token, oov_token=self.oov_token,
                      vocabulary=self.get_vocabulary(include_special_tokens=False)
                      if self._has_input_vocabulary else None,
                      idf_weights=None if self.input_idf_weights is None else
                      np.asarray(self.input_idf_weights, np.float64).tolist(),
                      invert=self.invert, output_mode=self.output_mode,
                      pad_to_max_tokens=self.pad_to_max_tokens, sparse=self.sparse,
                      encoding=self.encoding)
        return config


def _one_hot(idx, depth):
    """`idx` (any shape) one-hot along a new last axis of `depth`; indices outside [0, depth)
    (a dropped mask token) give zeros."""
    out = np.zeros(idx.shape + (depth,), np.float32)
    ok = (idx >= 0) & (idx < depth)
    np.put_along_axis(out, np.where(ok, idx, 0)[..., None], ok[..., None].astype(np.float32),
                      axis=-1)
    return out


def _batches(data, steps, name):
    """The batches of `adapt`'s `data`: a list / tuple / array / tensor is one batch (a 1-D one
    made a column: each string a document), a dataset or other iterable gives its own."""
    from ...data import Dataset
    if isinstance(data, Dataset):
        if steps is not None:
            data = data.take(steps)
        return list(data)
    if isinstance(data, (list, tuple, np.ndarray, Tensor, str, bytes)):
        t = _string_tensor(data, f"adapt of {name!r}")
        if isinstance(t, Tensor) and t.ndim == 1:
            t = convert_to_tensor(t.numpy().reshape(-1, 1))
        return [t]
    if isinstance(data, RaggedTensor):
        return [data]
    if hasattr(data, "__iter__"):
        return list(data)
    raise TypeError(f"adapt of {name!r}: expected a list, array, tensor, dataset or iterable of "
                    f"batches of strings, got {type(data).__name__}")


class TextVectorization(Layer):
    """Turns strings into token indices or token counts (Keras 3's `TextVectorization`):
    `standardize` ("lower_and_strip_punctuation", "lower", "strip_punctuation", None or a
    callable on string tensors), `split` ("whitespace", "character", None or a callable),
    `ngrams` (an int n for 1..n, or a tuple of widths), then a `StringLookup` with mask token
    `""` (index 0, also the padding) and OOV token `"[UNK]"`. `output_mode="int"` gives int64
    indices padded with 0 (or cut) to `output_sequence_length`, or to the longest sample.

    >>> vec = tg.keras.layers.TextVectorization(output_sequence_length=4)
    >>> vec.adapt(["The cat sat.", "the cat ran"])
    >>> vec.get_vocabulary()
    ['', '[UNK]', 'the', 'cat', 'sat', 'ran']
    >>> vec(["the dog sat"]).numpy()
    array([[2, 1, 4, 0]])
    """

    def __init__(self, max_tokens=None, standardize="lower_and_strip_punctuation",
                 split="whitespace", ngrams=None, output_mode="int", output_sequence_length=None,
                 pad_to_max_tokens=False, vocabulary=None, idf_weights=None, sparse=False,
                 ragged=False, encoding="utf-8", name=None, **kwargs):
        kwargs.pop("vocabulary_size", None)
        kwargs.pop("has_input_vocabulary", None)
        who = "TextVectorization"
        if not (standardize is None or callable(standardize) or standardize in
                ("lower_and_strip_punctuation", "lower", "strip_punctuation")):
            raise ValueError(f"{who}: invalid value for argument `standardize`; expected one of "
                             f"('lower_and_strip_punctuation', 'lower', 'strip_punctuation'), "
                             f"None or a callable, received standardize={standardize!r}")
        if not (split is None or callable(split) or split in ("whitespace", "character")):
            raise ValueError(f"{who}: invalid value for argument `split`; expected one of "
                             f"('whitespace', 'character'), None or a callable, received "
                             f"split={split!r}")
        output_mode = _output_mode(output_mode, who)
        if not (ngrams is None or isinstance(ngrams, int) or isinstance(ngrams, tuple) and
                all(isinstance(n, int) for n in ngrams)):
            raise ValueError(f"`ngrams` must be None, an integer, or a tuple of integers. "
                             f"Received: ngrams={ngrams}")
        if output_mode == "int" and not (output_sequence_length is None or
                                         isinstance(output_sequence_length, int)):
            raise ValueError(f"`output_sequence_length` must be either None or an integer when "
                             f"`output_mode` is 'int'. Received: "
                             f"output_sequence_length={output_sequence_length}")
        if output_mode != "int" and output_sequence_length is not None:
            raise ValueError(f"`output_sequence_length` must not be set if `output_mode` is not "
                             f"'int'. Received output_sequence_length={output_sequence_length}.")
        if ragged and output_mode != "int":
            raise ValueError(f"`ragged` must not be true if `output_mode` is not 'int'. "
                             f"Received: ragged={ragged} and output_mode={output_mode}")
        super().__init__(name=name, **kwargs)
        self._standardize, self._split = standardize, split
        self._ngrams_arg = ngrams
        self._ngrams = tuple(range(1, ngrams + 1)) if isinstance(ngrams, int) else ngrams
        self._output_mode, self._output_sequence_length = output_mode, output_sequence_length
        self._ragged, self._encoding = ragged, encoding
        self._lookup_layer = StringLookup(
            max_tokens=max_tokens, vocabulary=vocabulary, idf_weights=idf_weights,
            pad_to_max_tokens=pad_to_max_tokens, mask_token="", output_mode=output_mode,
            sparse=sparse, encoding=encoding)
        self.built = True

    # -- vocabulary (the lookup layer's) ----------------------------------------------------
    def get_vocabulary(self, include_special_tokens=True):
        """The vocabulary, as a list of str (`''` and `'[UNK]'` first in `"int"` mode)."""
        return self._lookup_layer.get_vocabulary(include_special_tokens)

    def vocabulary_size(self):
        """The size of the vocabulary, the padding and OOV tokens included."""
        return self._lookup_layer.vocabulary_size()

    def set_vocabulary(self, vocabulary, idf_weights=None):
        """Sets the vocabulary (and `idf_weights` for `"tf_idf"`), as `StringLookup`'s."""
        self._lookup_layer.set_vocabulary(vocabulary, idf_weights)

    def adapt(self, data, batch_size=None, steps=None):
        """Learns the vocabulary from `data` (a list or array of strings, each a document; a
        dataset or iterable of batches), after standardizing, splitting and n-grams."""
        if self._lookup_layer._has_input_vocabulary:
            raise ValueError(f"Cannot adapt layer {self.name!r} after setting a static "
                             "vocabulary via `vocabulary` argument or `set_vocabulary()` method")
        processed = [self._preprocess(b) for b in _batches(data, steps, self.name)]
        self._lookup_layer.adapt(iter(processed))

    # -- the pipeline -----------------------------------------------------------------------
    def _preprocess(self, inputs):
        if isinstance(inputs, (tuple, list)) and len(inputs) == 2 and \
                isinstance(inputs[0], Tensor) and isinstance(inputs[1], Tensor):
            inputs = inputs[0]  # an (x, y) batch of a dataset
        x = _string_tensor(inputs, f"TextVectorization {self.name!r}")
        if self._standardize in ("lower", "lower_and_strip_punctuation"):
            x = _strings.lower(x)
        if self._standardize in ("strip_punctuation", "lower_and_strip_punctuation"):
            x = convert_to_tensor(_map(lambda b: _PUNCTUATION.sub(b"", b), x.numpy()))
        if callable(self._standardize):
            x = self._standardize(x)
        if self._split is not None:
            if x.ndim > 1:
                if x.shape[-1] != 1:
                    raise ValueError(f"When using `TextVectorization` to tokenize strings, the "
                                     f"input rank must be 1 or the last shape dimension must "
                                     f"be 1. Received: inputs.shape={tuple(x.shape)} with "
                                     f"rank={x.ndim}")
                x = convert_to_tensor(x.numpy().reshape(x.shape[:-1]))
            if self._split == "whitespace":
                x = _strings.split(x)
            elif self._split == "character":
                x = _strings.unicode_split(x, "UTF-8")
            else:
                x = self._split(x)
        if self._ngrams is not None:
            x = _strings.ngrams(x, self._ngrams, separator=" ")
        return x

    def _convert(self, inputs):
        return inputs

    def build(self, input_shape):
        pass

    def call(self, inputs):
        x = self._preprocess(inputs)
        out = self._lookup_layer.call(x)
        if self._output_mode != "int":
            return out
        n = self._output_sequence_length
        if isinstance(out, RaggedTensor):
            if self._ragged:
                return out
            rows = out.to_list()
            width = n if n is not None else max((len(r) for r in rows), default=0)
            dense = np.zeros((len(rows), width), np.int64)
            for i, r in enumerate(rows):
                r = r[:width]
                dense[i, :len(r)] = r
            return convert_to_tensor(dense)
        if n is not None:
            a = out.numpy()[..., :n]
            if not self._ragged and a.shape[-1] < n:
                pad = [(0, 0)] * (a.ndim - 1) + [(0, n - a.shape[-1])]
                a = np.pad(a, pad)
            return convert_to_tensor(a)
        return out

    def compute_output_shape(self, input_shape):
        if self._output_mode == "int":
            return (input_shape[0], self._output_sequence_length)
        if self._split is None:
            if len(input_shape) <= 1:
                input_shape = tuple(input_shape) + (1,)
        else:
            input_shape = tuple(input_shape) + (None,)
        return self._lookup_layer.compute_output_shape(input_shape)

    def get_config(self):
        config = super().get_config()
        lk = self._lookup_layer
        if callable(self._standardize) or callable(self._split):
            raise ValueError(f"TextVectorization {self.name!r}: get_config cannot serialize a "
                             "callable standardize or split")
        config.update(max_tokens=lk.max_tokens, standardize=self._standardize,
                      split=self._split, ngrams=self._ngrams_arg,
                      output_mode=self._output_mode,
                      output_sequence_length=self._output_sequence_length,
                      pad_to_max_tokens=lk.pad_to_max_tokens, sparse=lk.sparse,
                      ragged=self._ragged,
                      vocabulary=lk.get_vocabulary(False) if lk._has_input_vocabulary else None,
                      idf_weights=lk.get_config()["idf_weights"], encoding=self._encoding)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("ngrams"), list):
            config["ngrams"] = tuple(config["ngrams"])
        return cls(**config)


def _map(fn, arr):
    out = np.empty(arr.size, dtype=object)
    out[:] = [fn(v) for v in arr.ravel()]
    return out.reshape(arr.shape)
