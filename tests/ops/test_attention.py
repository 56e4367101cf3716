"""tg.nn.scaled_dot_product_attention against Keras 3's dot_product_attention written in numpy
(bias, mask, causal, scale, grouped-query heads), its errors, and MultiHeadAttention taking it.
Runs on every device (the cuDNN path itself: tests/backends/test_cudnn.py)."""
import numpy as np
import pytest

import tapegpu as tg


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _keras_attention(q, k, v, bias=None, mask=None, scale=None, is_causal=False):
    """Keras 3's computation on (B, T, N, H) / (B, S, K, H) arrays, in float64."""
    n, kh = q.shape[2], k.shape[2]
    k, v = np.repeat(k, n // kh, axis=2), np.repeat(v, n // kh, axis=2)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.einsum("btnh,bsnh->bnts", q, k) * scale
    if bias is not None:
        s = s + bias
    keep = np.ones(s.shape, bool)
    if mask is not None:
        keep &= np.broadcast_to(mask, s.shape)
    if is_causal:
        keep &= np.tril(np.ones(s.shape[-2:], bool))
    s = np.where(keep, s, -0.7 * np.finfo(np.float64).max)
    return np.einsum("bnts,bsnh->btnh", _softmax(s), v)


CASES = {
    "plain": dict(),
    "causal": dict(is_causal=True),
    "scale": dict(scale=0.25),
    "bias": dict(bias=(1, 3, 5, 6)),
    "mask": dict(mask=(2, 1, 5, 6)),
    "mask_causal_bias": dict(mask=(5, 6), is_causal=True, bias=(3, 1, 6)),
    "grouped": dict(kv_heads=1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_keras_computation_with_gradients(case):
    spec = dict(CASES[case])
    rng = np.random.default_rng(0)
    kv_heads = spec.pop("kv_heads", 3)
    q = rng.standard_normal((2, 5, 3, 4))
    k, v = rng.standard_normal((2, 6, kv_heads, 4)), rng.standard_normal((2, 6, kv_heads, 4))
    for name in ("bias",):
        if name in spec:
            spec[name] = rng.standard_normal(spec[name])
    if "mask" in spec:
        spec["mask"] = rng.uniform(size=spec["mask"]) > 0.3
        spec["mask"][..., 0] = True  # every query attends somewhere
    want = _keras_attention(q, k, v, **spec)
    args = [tg.constant(a) for a in (q, k, v)]
    kwargs = {n: tg.constant(a) if isinstance(a, np.ndarray) else a for n, a in spec.items()}
    with tg.GradientTape() as tape:
        tape.watch(args)
        out = tg.nn.scaled_dot_product_attention(*args, **kwargs)
        loss = tg.reduce_sum(out * out)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)
    grads = tape.gradient(loss, args)
    # central differences of the numpy computation along one random direction per input
    for i, g in enumerate(grads):
        d = rng.standard_normal(args[i].shape)
        eps = 1e-6
        plus = [a.numpy() + (eps * d if j == i else 0) for j, a in enumerate(args)]
        minus = [a.numpy() - (eps * d if j == i else 0) for j, a in enumerate(args)]
        fd = (np.sum(_keras_attention(*plus, **spec) ** 2) -
              np.sum(_keras_attention(*minus, **spec) ** 2)) / (2 * eps)
        np.testing.assert_allclose(np.sum(g.numpy() * d), fd, rtol=1e-6)


def test_float16_is_computed_in_float32_inside():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 4, 2, 8)) * 4
    out = tg.nn.scaled_dot_product_attention(*(tg.constant(q, tg.float16),) * 3, is_causal=True)
    assert out.dtype == tg.float16
    q16 = q.astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(out.numpy().astype(np.float64),
                               _keras_attention(q16, q16, q16, is_causal=True), rtol=2e-3,
                               atol=2e-3)


@pytest.mark.parametrize("args, message", [
    (((2, 3, 4), (2, 3, 2, 4), (2, 3, 2, 4)), "must have rank 4"),
    (((2, 3, 2, 4), (2, 3, 2, 4), (2, 3, 2, 5)), "key and value must have the same shape"),
    (((2, 3, 2, 4), (2, 3, 2, 5), (2, 3, 2, 5)), "must match in batch and head_dim"),
    (((2, 3, 3, 4), (2, 3, 2, 4), (2, 3, 2, 4)), r"heads \(3\) must be a multiple"),
])
def test_errors(args, message):
    with pytest.raises(tg.errors.InvalidArgumentError, match=message):
        tg.nn.scaled_dot_product_attention(*(tg.zeros(s) for s in args))


def test_keras_ops_alias():
    q = tg.ones((1, 2, 1, 8))
    assert np.array_equal(tg.keras.ops.dot_product_attention(q, q, q, is_causal=True).numpy(),
                          tg.nn.scaled_dot_product_attention(q, q, q, is_causal=True).numpy())
    with pytest.raises(NotImplementedError, match="attn_logits_soft_cap"):
        tg.keras.ops.dot_product_attention(q, q, q, attn_logits_soft_cap=20.0)


def test_multi_head_attention_takes_the_attention_op(monkeypatch):
    """Without a mask, scores or dropout MultiHeadAttention calls the op; its output equals the
    explicit path's (taken when the scores are asked for)."""
    layer = tg.keras.layers.MultiHeadAttention(2, 8, dtype="float64")
    rng = np.random.default_rng(2)
    x, y = tg.constant(rng.standard_normal((2, 5, 6))), tg.constant(rng.standard_normal((2, 4, 6)))
    explicit, _ = layer(x, y, return_attention_scores=True)
    calls = []
    real = tg.nn.scaled_dot_product_attention
    monkeypatch.setattr(tg.ops, "scaled_dot_product_attention",
                        lambda *a, **kw: calls.append(1) or real(*a, **kw), raising=False)
    out = layer(x, y)
    np.testing.assert_allclose(out.numpy(), explicit.numpy(), rtol=1e-12, atol=1e-14)
    assert calls == [1]
    layer(x, y, attention_mask=np.ones((2, 5, 4), bool))  # a mask: the explicit path
    assert calls == [1]
