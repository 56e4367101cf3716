"""Scaled dot-product attention: tg.nn.scaled_dot_product_attention (Keras 3's
keras.ops.dot_product_attention).

`sdpa(q, k, v)` is one op on Keras' layout, q `(..., T, heads, d)` and k, v `(..., S, heads,
d)`, with params `scale` and `causal` (query step i attends to key steps j <= i, the top-left
diagonal, as Keras' `is_causal`). Its reference is the explicit computation: the (..., heads,
T, S) scores, a softmax along S (in float32 for 16-bit inputs, as Keras' backends), then the
weighted sum of the values. Its VJP and JVP are written with tapegpu's ops from the
probabilities the rule recomputes from q and k (the op saves its inputs and output, not the
T x S probabilities):

    P = softmax(scale q k^T),  O = P v
    dv = P^T dO,  dP = dO v^T,  dS = P (dP - rowsum(dO * O)),  dq = scale dS k,  dk = scale dS^T q

On the `cuda` backend, float16 and bfloat16 attention with head_dim a multiple of 8 up to 128
runs through cuDNN's flash attention where the optional `cudnn` module is installed
(tapegpu/backends/cudnn.py), forward and backward; everything else runs the reference.

Bias, masks and grouped-query attention (fewer key/value heads) are composed by the public
function from existing ops (the explicit path, on every backend).
"""
import math

import numpy as np

from .. import backends
from ..backends import cudnn
from ..core.tensor import convert_to_tensor
from . import binary, creation, linalg, nn, shape, unary
from ._base import apply, floating, public
from .registry import InvalidArgumentError, def_op
from .shape import repeat

# -- the op ----------------------------------------------------------------------------------------


def _heads_first(xp_or_ops, x):
    """(..., steps, heads, d) <-> (..., heads, steps, d)."""
    perm = list(range(x.ndim))
    perm[-3], perm[-2] = perm[-2], perm[-3]
    return xp_or_ops.transpose(x, perm)


def _causal_keep(xp, t, s):
    return xp.arange(t)[:, None] >= xp.arange(s)[None, :]


def _sdpa_forward(xp, q, k, v, scale, causal):
    wide = q.dtype.itemsize < 4  # 16-bit inputs: scores and softmax in float32
    qh, kh, vh = (_heads_first(xp, a) for a in (q, k, v))
    if wide:
        qh, kh = qh.astype(np.float32), kh.astype(np.float32)
    s = xp.matmul(qh, xp.swapaxes(kh, -1, -2)) * qh.dtype.type(scale)
    if causal:
        s = xp.where(_causal_keep(xp, s.shape[-2], s.shape[-1]), s,
                     xp.asarray(np.finfo(s.dtype).min, dtype=s.dtype))
    e = xp.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    out = xp.matmul(p.astype(q.dtype) if wide else p, vh)
    # numpy's matmul of bfloat16 (ml_dtypes) arrays returns float32: the op keeps q's dtype
    return _heads_first(xp, out.astype(q.dtype, copy=False))


def _cuda_forward(xp, q, k, v, scale, causal):
    return cudnn.sdpa_forward(xp, q, k, v, scale, causal)


def _cuda_vjp(g, q, k, v, out, scale, causal):
    return cudnn.sdpa_backward(backends.gpu(g.device.id).xp, g, q, k, v, out, scale, causal)


def _lowest(dtype):
    """The most negative finite value of an array's or a tensor's dtype (masked logits)."""
    return np.finfo(np.dtype(getattr(dtype, "as_numpy_dtype", dtype))).min


def _probs(ops, q, k, scale, causal):
    """softmax(scale q k^T) over the key steps, (..., heads, T, S)."""
    s = ops.matmul(_heads_first(ops, q), _heads_first(ops, k), transpose_b=True) * scale
    if causal:
        t, n = s.shape[-2], s.shape[-1]
        rows = ops.reshape(ops.arange_like(s, t), (t, 1))
        cols = ops.reshape(ops.arange_like(s, n), (1, n))
        s = ops.where(rows >= cols, s, ops.const_like(s, _lowest(s.dtype)))
    return ops.softmax(s, axis=-1)


# P = softmax(scale q k^T), O = P v:  dv = P^T dO, dS = P (dO v^T - rowsum(dO * O)),
# dq = scale dS k, dk = scale dS^T q  (heads-first, batch axes of g leading)
def _sdpa_vjp(ops, g, q, k, v, out, scale, causal):
    p = _probs(ops, q, k, scale, causal)
    gh, vh = _heads_first(ops, g), _heads_first(ops, v)
    dv = ops.matmul(p, gh, transpose_a=True)
    dp = ops.matmul(gh, vh, transpose_b=True)
    rowsum = ops.reduce_sum(gh * _heads_first(ops, out), axis=-1, keepdims=True)
    ds = p * (dp - rowsum) * scale
    dq = ops.matmul(ds, _heads_first(ops, k))
    dk = ops.matmul(ds, _heads_first(ops, q), transpose_a=True)
    return tuple(_heads_first(ops, a) for a in (dq, dk, dv))


# dP = P (dS - rowsum(P dS)) with dS = scale (tq k^T + q tk^T);  dO = dP v + P tv
def _sdpa_jvp(ops, ts, q, k, v, out, scale, causal):
    tq, tk, tv = ts
    p = _probs(ops, q, k, scale, causal)
    result = None
    ds = None
    if tq is not None:
        ds = ops.matmul(_heads_first(ops, tq), _heads_first(ops, k), transpose_b=True)
    if tk is not None:
        part = ops.matmul(_heads_first(ops, q), _heads_first(ops, tk), transpose_b=True)
        ds = part if ds is None else ds + part
    if ds is not None:
        ds = ds * scale
        dp = p * (ds - ops.reduce_sum(p * ds, axis=-1, keepdims=True))
        result = ops.matmul(dp, _heads_first(ops, v))
    if tv is not None:
        part = ops.matmul(p, _heads_first(ops, tv))
        result = part if result is None else result + part
    return None if result is None else _heads_first(ops, result)


def _sdpa_flops(in_shapes, out_shape, params):
    q, k = in_shapes[0], in_shapes[1]
    return 4 * math.prod(q) * k[-3]


_sdpa = def_op("sdpa", _sdpa_forward, args=("q", "k", "v"), saves=("q", "k", "v", "out"),
               vjp=_sdpa_vjp, jvp=_sdpa_jvp, batch="leading", flops=_sdpa_flops,
               kernels={"cuda": _cuda_forward}, vjp_kernels={"cuda": _cuda_vjp})


# -- the public function ---------------------------------------------------------------------------

def _check(q, k, v):
    fn = "scaled_dot_product_attention"
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise InvalidArgumentError(f"{fn}: query, key and value must have rank 4 (batch, seq, "
                                   f"heads, head_dim), got shapes {q.shape}, {k.shape}, "
                                   f"{v.shape}")
    if k.shape != v.shape:
        raise InvalidArgumentError(f"{fn}: key and value must have the same shape, got "
                                   f"{k.shape} and {v.shape}")
    if q.shape[0] != k.shape[0] or q.shape[-1] != k.shape[-1]:
        raise InvalidArgumentError(f"{fn}: query {q.shape} and key {k.shape} must match in "
                                   "batch and head_dim")
    if k.shape[2] == 0 or q.shape[2] % k.shape[2]:
        raise InvalidArgumentError(f"{fn}: the query's heads ({q.shape[2]}) must be a multiple "
                                   f"of the key's ({k.shape[2]})")
    if not (q.dtype == k.dtype == v.dtype):
        raise InvalidArgumentError(f"{fn}: query, key and value must have one dtype, got "
                                   f"{q.dtype.name}, {k.dtype.name}, {v.dtype.name}")


def _explicit(q, k, v, bias, mask, scale, is_causal):
    """The attention composed of tapegpu's ops (bias and masks): Keras' computation."""
    wide = q.dtype.size < 4
    qh, kh, vh = (shape.transpose(a, (0, 2, 1, 3)) for a in (q, k, v))
    if wide:
        qh, kh = unary.cast(qh, "float32"), unary.cast(kh, "float32")
    s = linalg.matmul(qh, kh, transpose_b=True) * scale
    if bias is not None:
        s = s + unary.cast(bias, s.dtype)
    keep = None
    if mask is not None:
        keep = unary.cast(mask, "bool")
    if is_causal:
        t, n = s.shape[-2], s.shape[-1]
        tri = binary.greater_equal(shape.reshape(creation.range(t), (t, 1)),
                                   shape.reshape(creation.range(n), (1, n)))
        keep = tri if keep is None else binary.logical_and(keep, tri)
    if keep is not None:
        s = binary.where(keep, s, _lowest(s.dtype))
    p = nn.softmax(s, axis=-1)
    if wide:
        p = unary.cast(p, q.dtype)
    return shape.transpose(linalg.matmul(p, vh), (0, 2, 1, 3))


def scaled_dot_product_attention(query, key, value, bias=None, mask=None, scale=None,
                                 is_causal=False, name=None):
    """Scaled dot-product attention, as Keras 3's `keras.ops.dot_product_attention`.

    `softmax(query key^T * scale + bias) value` per batch entry and head, on Keras' layout:
    `query` (B, T, N, H), `key` and `value` (B, S, K, H) with N a multiple of K (K < N:
    grouped-query attention, each key/value head serving N / K query heads). `bias` is added
    to the (B, N, T, S) logits (broadcast); `mask` (bool, broadcastable to (B, N, T, S)) is
    True where a query step may attend to a key step; `is_causal` lets query step i attend to
    key steps j <= i only. `scale` defaults to 1 / sqrt(H). Differentiable in query, key,
    value and bias.

    On a GPU with the optional `cudnn` module (`pip install 'tapegpu[cudnn]'`), float16 and
    bfloat16 attention without bias or mask runs as cuDNN's flash attention, forward and
    backward, without the (B, N, T, S) scores; `python -m tapegpu info` says whether it does.

    >>> q = tg.ones((1, 2, 1, 4))
    >>> tg.nn.scaled_dot_product_attention(q, q, tg.reshape(tg.range(8.0), (1, 2, 1, 4))).numpy()
    array([[[[2., 3., 4., 5.]],
    <BLANKLINE>
            [[2., 3., 4., 5.]]]], dtype=float32)
    """
    fn = "scaled_dot_product_attention"
    q, k, v = (floating(convert_to_tensor(a), fn) for a in (query, key, value))
    _check(q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if k.shape[2] != q.shape[2]:  # grouped-query attention: each key/value head, repeated
        k, v = (repeat(a, q.shape[2] // k.shape[2], axis=2) for a in (k, v))
    if bias is not None or mask is not None:
        if bias is not None:
            bias = convert_to_tensor(bias)
        if mask is not None:
            mask = convert_to_tensor(mask)
        return _explicit(q, k, v, bias, mask, scale, bool(is_causal))
    return apply(_sdpa, (q, k, v), {"scale": scale, "causal": bool(is_causal)})


__all__ = public(globals(), ("nn",))
