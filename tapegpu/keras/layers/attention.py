"""Keras 3's attention layers: `MultiHeadAttention`, `Attention` (dot-product, Luong) and
`AdditiveAttention` (Bahdanau), with Keras' weights, masks (the inputs' masks, explicit masks,
the causal mask) and attention dropout.
"""
import numpy as np

from ... import ops
from ...core.tensor import Tensor, convert_to_tensor
from ...models import initializers, regularizers
from ...models.tensor_attributes import get_keras_mask
from ...ops.nn import dropout_drawn
from ...ops.random import seeded_uniform
from .base import Layer, _attach_mask, _symbolic_input


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _as_mask(mask, label, layer):
    """A Keras mask (bool, or numbers: kept where > 0.5) as a bool tensor, or None."""
    if mask is None:
        return None
    m = mask if isinstance(mask, Tensor) else convert_to_tensor(mask)
    if m._data.dtype.kind == "b":
        return m
    if m._data.dtype.kind not in "iuf":
        raise TypeError(f"{type(layer).__name__} {layer.name!r}: {label} must be bool or "
                        f"numeric, got {m.dtype.name} of shape {m.shape}")
    return ops.greater(m, 0.5) if m._data.dtype.kind == "f" else ops.not_equal(m, 0)


def _and(a, b):
    return b if a is None else a if b is None else ops.logical_and(a, b)


def _causal_mask(tq, ts):
    """(1, tq, ts) bool: query step i attends to value steps j <= i (Keras' causal mask)."""
    return ops.reshape(ops.greater_equal(ops.reshape(ops.range(tq), (tq, 1)),
                                         ops.reshape(ops.range(ts), (1, ts))), (1, tq, ts))


def _masked_attention_weights(scores, mask, axes):
    """Keras' masked softmax over `axes`: masked scores become -1e9 (-3e4 in float16) and their
    weights 0 (so a row masked entirely gets weights 0, not a uniform distribution)."""
    if mask is not None:
        big = -3e4 if scores._data.dtype == np.float16 else -1e9
        scores = ops.where(mask, scores, ops.cast(big, scores.dtype))
    if len(axes) == 1:
        weights = ops.softmax(scores, axis=axes[0])
    else:
        weights = ops.exp(scores - ops.reduce_logsumexp(scores, axis=list(axes), keepdims=True))
    if mask is not None:
        weights = ops.where(mask, weights, ops.zeros((), dtype=weights.dtype))
    return weights


def _attention_dropout(layer, weights, training):
    if not training or layer.dropout == 0.0:
        return weights
    if layer._generator is None:
        return ops.dropout(weights, layer.dropout)
    return dropout_drawn(weights, layer.dropout, None, layer._generator)


def _heads_first(x):
    """(batch..., steps, heads, channels) <-> (batch..., heads, steps, channels)."""
    perm = list(range(x.ndim))
    perm[-3], perm[-2] = perm[-2], perm[-3]
    return ops.transpose(x, perm)


def _attention_equations(rank, attn_axes):
    """Keras' einsum equations of multi-head attention over `attn_axes` of projected tensors of
    `rank` (batch..., attention axes..., heads, channels): the key-query products (scores of
    shape (batch..., heads, query axes..., key axes...)) and the weighted sum of the values."""
    target = _LETTERS[:rank]
    batch = [i for i in range(rank) if i not in attn_axes and i != rank - 1]
    source, offset = "", rank
    for i in range(rank):
        if i in batch or i == rank - 1:
            source += target[i]
        else:
            source += _LETTERS[offset]
            offset += 1
    product = "".join([target[i] for i in batch] + [target[i] for i in attn_axes] +
                      [source[i] for i in attn_axes])
    return f"{source},{target}->{product}", f"{product},{source}->{target}", len(product)


def _no_constraints(layer_name, **given):
    for key, value in given.items():
        if value is not None:
            raise NotImplementedError(f"{layer_name}: {key} is not supported by tapegpu (pass "
                                      f"None), got {value!r}")


class MultiHeadAttention(Layer):
    """Keras 3's multi-head attention: `num_heads` heads, each projecting `query`, `key` and
    `value` (each `(batch, steps..., features)`) to `key_dim` / `value_dim` channels, attending
    with `weights = softmax(q k^T / sqrt(key_dim))` over `attention_axes` (default: every axis
    between the batch and the features), and projecting the concatenated heads back to the
    query's features (or `output_shape`).

    Called as Keras: `layer(query, value, key=None, attention_mask=None,
    return_attention_scores=False, training=False, use_causal_mask=False)`; `key` defaults to
    `value`. The masks the inputs carry (e.g. from `Embedding(mask_zero=True)`), or
    `query_mask`/`value_mask`/`key_mask` given explicitly,
    restrict the attention as Keras' (query steps x value steps), together with
    `attention_mask` (bool, `(batch, query steps, value steps)`) and the causal mask; the output
    carries the query's mask. A query step whose every value step is masked gets weights 0.

    The weights are Keras' (`query/kernel (features, heads, key_dim)`, `query/bias`, `key/...`,
    `gate/...` with `use_gate`, `value/...`, `attention_output/kernel (heads, value_dim,
    out)`, `attention_output/bias`), in Keras' order, so `set_weights(keras_layer.get_weights())`
    carries a trained Keras layer over. `dropout` drops attention weights in training (`seed`
    as `Dropout`'s). `flash_attention` is accepted and does not change the result.

    >>> mha = tg.keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, name="mha")
    >>> x = tg.ones((3, 5, 8))
    >>> mha(x, x).shape
    (3, 5, 8)
    >>> out, scores = mha(x, x, return_attention_scores=True, use_causal_mask=True)
    >>> scores.shape  # (batch, heads, query steps, value steps)
    (3, 2, 5, 5)
    >>> [v.name for v in mha.variables][:2]
    ['mha/query/kernel', 'mha/query/bias']
    """

    supports_masking = True

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 output_shape=None, attention_axes=None, sliding_window=None,
                 flash_attention=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 use_gate=False, seed=None, dtype=None, name=None, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        for label, value, optional in (("num_heads", num_heads, False),
                                       ("key_dim", key_dim, False),
                                       ("value_dim", value_dim, True)):
            if optional and value is None:
                continue
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"MultiHeadAttention: {label} must be a positive integer"
                                 f"{' or None' if optional else ''}, got {value!r}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"MultiHeadAttention: dropout must be in [0, 1), got {dropout!r}")
        if flash_attention and dropout > 0.0:
            raise ValueError("MultiHeadAttention: dropout is not supported when flash attention "
                             "is enabled; set dropout=0.0 to use flash_attention")
        if sliding_window is not None and (not isinstance(sliding_window, int) or
                                           sliding_window <= 0):
            raise ValueError(f"MultiHeadAttention: sliding_window must be None or a positive "
                             f"integer, got {sliding_window!r}")
        _no_constraints("MultiHeadAttention", activity_regularizer=activity_regularizer,
                        kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        self.num_heads, self.key_dim = int(num_heads), int(key_dim)
        self.value_dim = int(value_dim) if value_dim else self.key_dim
        self.dropout = float(dropout)
        self.use_bias, self.use_gate = bool(use_bias), bool(use_gate)
        if output_shape:
            try:
                output_shape = (int(output_shape),) if np.ndim(output_shape) == 0 else \
                    tuple(int(d) for d in output_shape)
            except (TypeError, ValueError):
                raise ValueError(f"MultiHeadAttention: output_shape must be an int or a tuple "
                                 f"of ints, got {output_shape!r}") from None
        self._output_shape = output_shape or None
        if isinstance(attention_axes, int):
            attention_axes = (attention_axes,)
        elif attention_axes is not None and not isinstance(attention_axes, (list, tuple)):
            raise ValueError(f"MultiHeadAttention: attention_axes must be an int, list or "
                             f"tuple, got {attention_axes!r}")
        self.attention_axes = None if attention_axes is None else tuple(attention_axes)
        self.sliding_window = sliding_window
        self.flash_attention = flash_attention
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.seed = seed
        self._generator = seeded_uniform(seed)

    def _dense(self, name, kernel_shape, bias_shape):
        kernel = self.add_weight(f"{name}/kernel", kernel_shape, self.kernel_initializer,
                                 regularizer=self.kernel_regularizer)
        bias = self.add_weight(f"{name}/bias", bias_shape, self.bias_initializer,
                               regularizer=self.bias_regularizer) if self.use_bias else None
        return kernel, bias

    def _build_shapes(self, query_shape, value_shape=None, key_shape=None):
        """Creates the weights for inputs of these shapes (Keras' `build(query_shape,
        value_shape, key_shape=None)`; `value_shape` defaults to `query_shape`)."""
        value_shape = query_shape if value_shape is None else tuple(value_shape)
        key_shape = value_shape if key_shape is None else tuple(key_shape)
        query_shape = tuple(query_shape)
        if value_shape[1:-1] != key_shape[1:-1]:
            raise ValueError(f"MultiHeadAttention {self.name!r}: all dimensions of value and "
                             f"key but the last must be equal, got value shape {value_shape} "
                             f"and key shape {key_shape}")
        if len(query_shape) < 3 or len(value_shape) != len(query_shape):
            raise ValueError(f"MultiHeadAttention {self.name!r}: query and value must have the "
                             f"same rank >= 3 (batch, steps..., features), got shapes "
                             f"{query_shape} and {value_shape}")
        heads = self.num_heads
        self._shapes = (query_shape[1:], value_shape[1:], key_shape[1:])
        self._query = self._dense("query", (query_shape[-1], heads, self.key_dim),
                                  (heads, self.key_dim))
        self._key = self._dense("key", (key_shape[-1], heads, self.key_dim),
                                (heads, self.key_dim))
        if self.use_gate:
            self._gate = self._dense("gate", (query_shape[-1], heads, self.value_dim),
                                     (heads, self.value_dim))
        self._value = self._dense("value", (value_shape[-1], heads, self.value_dim),
                                  (heads, self.value_dim))
        out = self._output_shape or (query_shape[-1],)
        self._out = self._dense("attention_output", (heads, self.value_dim) + tuple(out),
                                tuple(out))
        rank = len(query_shape) + 1  # projected: (batch, steps..., heads, channels)
        axes = tuple(range(1, rank - 2)) if self.attention_axes is None else \
            tuple(a if a >= 0 else rank - 1 + a for a in self.attention_axes)
        if any(not 0 < a < rank - 2 for a in axes):
            raise ValueError(f"MultiHeadAttention {self.name!r}: attention_axes "
                             f"{self.attention_axes} are out of range for inputs of shape "
                             f"{query_shape} (valid: the axes between the batch and the "
                             "features)")
        self._axes = axes
        self._dot, self._combine, scores_rank = _attention_equations(rank, axes)
        self._norm_axes = tuple(range(scores_rank - len(axes), scores_rank))
        self.built = True

    def __call__(self, query, value=None, key=None, query_mask=None, value_mask=None,
                 key_mask=None, attention_mask=None, return_attention_scores=False,
                 training=False, use_causal_mask=False, _packed=False):
        if _packed:  # a functional model's node: [query, value(, key)]
            query, value, key = (list(query) + [None])[:3]
        kwargs = dict(query_mask=query_mask, value_mask=value_mask, key_mask=key_mask,
                      attention_mask=attention_mask,
                      return_attention_scores=return_attention_scores, training=training,
                      use_causal_mask=use_causal_mask)
        if value is None:
            raise ValueError(f"MultiHeadAttention {self.name!r}: call it as layer(query, value) "
                             "or layer(query, value, key); value is missing")
        symbolic = _symbolic_input([query, value, key])
        if symbolic is not None:
            inputs = [query, value] + ([] if key is None else [key])
            return symbolic._symbolic_call(self, inputs, (), dict(kwargs, _packed=True))
        masks = [m if m is not None else get_keras_mask(t)
                 for m, t in ((query_mask, query), (value_mask, value), (key_mask, key))]
        if key is value:
            masks[2] = None
        q = self._convert(query)
        if not self.built:
            if self._dtype is None:
                self._dtype = q._data.dtype if q._data.dtype.kind == "f" else \
                    np.dtype(np.float32)
                q = self._convert(query)
            self.build(q.shape, self._convert(value).shape,
                       None if key is None else self._convert(key).shape)
        v = self._convert(value)
        k = v if key is None else self._convert(key)
        kwargs.update(query_mask=masks[0], value_mask=masks[1], key_mask=masks[2])
        out = self.call(q, v, k, **kwargs)
        return _attach_mask(self, out, _as_mask(masks[0], "query_mask", self))

    def compute_mask(self, inputs, mask=None):
        """The query's mask (Keras)."""
        return mask

    def _project(self, x, dense, bound):
        """Keras' EinsumDense projection, as one matmul: the last `bound` axes of `x` times the
        kernel's first `bound` axes (kernel reshaped to a matrix)."""
        kernel, bias = dense
        inner = int(np.prod(kernel.shape[:bound]))
        outer = kernel.shape[bound:]
        y = ops.matmul(ops.reshape(x, x.shape[:x.ndim - bound] + (inner,)),
                       ops.reshape(kernel, (inner, int(np.prod(outer)))))
        y = ops.reshape(y, x.shape[:x.ndim - bound] + outer)
        return y if bias is None else y + bias

    def call(self, query, value, key=None, query_mask=None, value_mask=None, key_mask=None,
             attention_mask=None, return_attention_scores=False, training=False,
             use_causal_mask=False):
        key = value if key is None else key
        for label, x, want in (("query", query, self._shapes[0]), ("value", value,
                               self._shapes[1]), ("key", key, self._shapes[2])):
            if x.ndim != len(want) + 1 or x.shape[-1] != want[-1]:
                raise ValueError(f"MultiHeadAttention {self.name!r}: built for {label} of "
                                 f"shape (batch,) + {want}, got shape {x.shape}")
        if value.shape[:-1] != key.shape[:-1]:
            raise ValueError(f"MultiHeadAttention {self.name!r}: value and key must match in "
                             f"every axis but the last, got shapes {value.shape} and "
                             f"{key.shape}")
        mask = self._attention_mask(query, value, query_mask, value_mask, key_mask,
                                    attention_mask, use_causal_mask)
        q = self._project(query, self._query, 1) * \
            ops.cast(1.0 / np.sqrt(float(self.key_dim)), query.dtype)
        k = self._project(key, self._key, 1)
        v = self._project(value, self._value, 1)
        # one attention axis just before the heads (the default for (batch, steps, features)):
        # batched matmuls, (batch..., heads, steps, channels); else Keras' einsum equations
        one_axis = self._axes == (q.ndim - 3,)
        if one_axis and q.ndim == 4 and mask is None and k.shape == v.shape and \
                not return_attention_scores and (not training or self.dropout == 0.0):
            # no mask, weights or dropout to keep: one attention op (cuDNN's flash attention
            # on GPUs where it applies; tg.nn.scaled_dot_product_attention), q scaled above
            heads = ops.scaled_dot_product_attention(q, k, v, scale=1.0)
            if self.use_gate:
                heads = heads * ops.sigmoid(self._project(query, self._gate, 1))
            return self._project(heads, self._out, 2)
        if one_axis:
            scores = ops.matmul(_heads_first(q), _heads_first(k), transpose_b=True)
        else:
            scores = ops.einsum(self._dot, k, q)
        if mask is not None:  # (batch, query steps, value steps) -> the scores' rank
            axis = -len(self._axes) * 2 - 1
            for _ in range(scores.ndim - mask.ndim):
                mask = ops.expand_dims(mask, axis)
        weights = _masked_attention_weights(scores, mask, self._norm_axes)
        dropped = _attention_dropout(self, weights, training)
        heads = _heads_first(ops.matmul(dropped, _heads_first(v))) if one_axis else \
            ops.einsum(self._combine, dropped, v)
        if self.use_gate:
            heads = heads * ops.sigmoid(self._project(query, self._gate, 1))
        out = self._project(heads, self._out, 2)
        return (out, weights) if return_attention_scores else out

    def _attention_mask(self, query, value, query_mask, value_mask, key_mask, attention_mask,
                        use_causal_mask):
        """Keras' attention mask: query mask (B, T, 1) & value and key masks (B, 1, S) & the
        causal and sliding-window masks (1, T, S) & `attention_mask`."""
        mask = None
        qm = _as_mask(query_mask, "query_mask", self)
        if qm is not None:
            mask = ops.expand_dims(qm, -1)
        for label, m in (("value_mask", value_mask), ("key_mask", key_mask)):
            m = _as_mask(m, label, self)
            if m is not None:
                mask = _and(mask, ops.expand_dims(m, -2))
        tq, ts = query.shape[1], value.shape[1]
        if use_causal_mask:
            mask = _and(mask, _causal_mask(tq, ts))
        if self.sliding_window is not None:
            distance = ops.abs(ops.reshape(ops.range(tq), (1, tq, 1)) -
                               ops.reshape(ops.range(ts), (1, 1, ts)))
            mask = _and(mask, ops.less(distance, self.sliding_window))
        attention_mask = _as_mask(attention_mask, "attention_mask", self)
        if attention_mask is not None and len(self._axes) == 1:
            want = (query.shape[0],) + query.shape[1:-1] + (ts,)
            try:
                ok = np.broadcast_shapes(attention_mask.shape, want) == want
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"MultiHeadAttention {self.name!r}: attention_mask of shape "
                                 f"{attention_mask.shape} does not broadcast to (batch, query "
                                 f"steps, value steps) = {want}")
        return _and(attention_mask, mask)


# Keras' signature, build(query_shape, value_shape, key_shape=None), which Layer's one-shape
# build wrapper does not take
MultiHeadAttention.build = MultiHeadAttention._build_shapes


class _ListAttention(Layer):
    """Keras' Attention and AdditiveAttention: called on [query, value] or [query, value, key]
    with masks [query_mask, value_mask] (the inputs' masks by default)."""

    _MULTI_INPUT = True
    supports_masking = True

    def __init__(self, use_scale=False, score_mode="dot", dropout=0.0, seed=None, dtype=None,
                 name=None, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        if score_mode not in ("dot", "concat"):
            raise ValueError(f"{type(self).__name__}: score_mode must be 'dot' or 'concat', got "
                             f"{score_mode!r}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"{type(self).__name__}: dropout must be in [0, 1), got "
                             f"{dropout!r}")
        self.use_scale, self.score_mode = bool(use_scale), score_mode
        self.dropout, self.seed = float(dropout), seed
        self._generator = seeded_uniform(seed)

    def _validate(self, inputs, mask):
        name = type(self).__name__
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"{name} {self.name!r} must be called on a list of inputs, namely "
                             f"[query, value] or [query, value, key], got {type(inputs).__name__}")
        if not 2 <= len(inputs) <= 3:
            raise ValueError(f"{name} {self.name!r} accepts a list of 2 or 3 inputs, namely "
                             f"[query, value] or [query, value, key], got {len(inputs)}")
        if mask is not None and (not isinstance(mask, (list, tuple)) or
                                 not 2 <= len(mask) <= 3):
            raise ValueError(f"{name} {self.name!r}: mask must be a list [query_mask, "
                             f"value_mask] (or of 3, as the inputs), got {mask!r}")

    def _call_multi(self, inputs, args, kwargs):
        self._validate(inputs, kwargs.get("mask"))
        if "mask" not in kwargs:
            masks = [get_keras_mask(x) for x in inputs]
            if any(m is not None for m in masks):
                kwargs["mask"] = masks
        out = super()._call_multi(inputs, args, kwargs)
        return _attach_mask(self, out, self.compute_mask(inputs, kwargs.get("mask")))

    def compute_mask(self, inputs, mask=None):
        """The query's mask (Keras)."""
        return None if not mask else _as_mask(mask[0], "query mask", self)

    def call(self, inputs, mask=None, training=False, return_attention_scores=False,
             use_causal_mask=False):
        q, v = inputs[0], inputs[1]
        k = inputs[2] if len(inputs) > 2 else v
        if q.ndim < 3 or v.ndim != q.ndim or k.shape[:-1] != v.shape[:-1] or \
                (self.score_mode == "dot" and q.shape[-1] != k.shape[-1]):
            raise ValueError(f"{type(self).__name__} {self.name!r}: expects query (batch, Tq, "
                             f"dim), value (batch, Tv, dim_v) and key (batch, Tv, dim), got "
                             f"shapes {q.shape}, {v.shape} and {k.shape}")
        q_mask = _as_mask(mask[0], "query mask", self) if mask else None
        v_mask = _as_mask(mask[1], "value mask", self) if mask else None
        scores = self._scores(q, k)
        scores_mask = None if v_mask is None else ops.expand_dims(v_mask, -2)
        if use_causal_mask:
            scores_mask = _and(scores_mask, _causal_mask(scores.shape[-2], scores.shape[-1]))
        if scores_mask is not None:
            big = 65504.0 if scores._data.dtype == np.float16 else 1.0e9
            scores = ops.where(scores_mask, scores, scores - ops.cast(big, scores.dtype))
        weights = ops.softmax(scores, axis=-1)
        out = ops.matmul(_attention_dropout(self, weights, training), v)
        if q_mask is not None:
            out = ops.where(ops.expand_dims(q_mask, -1), out, ops.zeros((), dtype=out.dtype))
        return (out, weights) if return_attention_scores else out


class Attention(_ListAttention):
    """Keras 3's dot-product (Luong) attention of `[query, value]` or `[query, value, key]`
    (`(batch, Tq, dim)`, `(batch, Tv, dim_v)`, `(batch, Tv, dim)`; `key` defaults to `value`):
    `softmax(query @ key^T * scale) @ value`, or with `score_mode="concat"`
    `concat_score_weight * sum(tanh(scale * (query + key)))` as the scores.

    `use_scale` adds the trainable scalar `scale` (ones); `score_mode="concat"` the scalar
    `concat_score_weight`. Masks: `mask=[query_mask, value_mask]` (by default the inputs'
    masks) as Keras': masked value steps get no weight (their scores less 1e9), masked
    query steps output zeros and the output carries the query's mask; `use_causal_mask=True`
    lets step i attend to steps <= i. `dropout` drops attention weights in training.

    >>> att = tg.keras.layers.Attention()
    >>> out, scores = att([tg.ones((2, 3, 4)), tg.ones((2, 5, 4))],
    ...                   return_attention_scores=True)
    >>> out.shape, scores.shape
    ((2, 3, 4), (2, 3, 5))
    """

    def build(self, input_shape):
        self.scale = self.add_weight("scale", (), "ones") if self.use_scale else None
        self.concat_score_weight = self.add_weight("concat_score_weight", (), "ones") \
            if self.score_mode == "concat" else None

    def _scores(self, q, k):
        if self.score_mode == "dot":
            scores = ops.matmul(q, k, transpose_b=True)
            return scores if self.scale is None else scores * self.scale
        s = ops.expand_dims(q, -2) + ops.expand_dims(k, -3)
        if self.scale is not None:
            s = self.scale * s
        return self.concat_score_weight * ops.reduce_sum(ops.tanh(s), axis=-1)


class AdditiveAttention(_ListAttention):
    """Keras 3's additive (Bahdanau) attention of `[query, value]` or `[query, value, key]`:
    the scores are `sum(scale * tanh(query + key), axis=-1)` per (query step, key step), with
    the trainable `scale` of shape `(dim,)` (glorot_uniform) when `use_scale` (the default);
    masks, causal mask and dropout as `Attention`.

    >>> att = tg.keras.layers.AdditiveAttention()
    >>> att([tg.ones((2, 3, 4)), tg.ones((2, 5, 4))]).shape
    (2, 3, 4)
    >>> att.scale.shape
    (4,)
    """

    def __init__(self, use_scale=True, dropout=0.0, seed=None, dtype=None, name=None,
                 **kwargs):
        super().__init__(use_scale=use_scale, dropout=dropout, seed=seed, dtype=dtype,
                         name=name, **kwargs)

    def build(self, input_shape):
        self.scale = self.add_weight("scale", (input_shape[0][-1],), "glorot_uniform") \
            if self.use_scale else None

    def _scores(self, q, k):
        if q.shape[-1] != k.shape[-1]:
            raise ValueError(f"AdditiveAttention {self.name!r}: query and key must have the same "
                             f"last dimension, got shapes {q.shape} and {k.shape}")
        t = ops.tanh(ops.expand_dims(q, -2) + ops.expand_dims(k, -3))
        return ops.reduce_sum(t if self.scale is None else self.scale * t, axis=-1)
