"""Fused VJPs: an op's VJP as one array-level call, for sweeps that nothing differentiates.

Each entry computes exactly what the op's tensor rule computes, in the same order of floating
point operations (so both sweep modes give identical bits), but on the backend's arrays, with
no tensors and no dispatch. Backends with custom kernels may route these through a kernel
(`dev.kernels`). Ops without an entry here use their tensor rule on wrapped arrays.
"""
from . import linalg as _linalg, unary as _unary
from .registry import REGISTRY
from ..autodiff.sweep import PASS
import importlib

import numpy as np

_shape = importlib.import_module(".shape", __package__)


def fuse(name, *rules):
    """Attaches the array-level VJP `rules` (one callable, or one per input; `PASS` where the
    cotangent is g itself) to op `name`."""
    op = REGISTRY[name]
    op.fused_vjp = rules[0] if len(rules) == 1 else tuple(rules)


def _nb(g, out_ndim):
    return g.ndim - out_ndim


_INTS = {2: "int16", 4: "int32", 8: "int64"}


def keep_where(xp, mask, g):
    """where(mask, g, 0), exactly (inf and nan included), without branches: the bits of g ANDed
    with all-ones (0 - True) or all-zeros (0 - False), in the mask's own buffer. numpy's
    `where` is several times slower on irregular masks."""
    ints = getattr(xp, _INTS[g.dtype.itemsize])
    m = xp.subtract(0, mask, dtype=ints)
    if m.shape != g.shape:  # the mask broadcasts against batch axes of g
        return xp.bitwise_and(m, g.view(ints)).view(g.dtype)
    xp.bitwise_and(m, g.view(ints), out=m)
    return m.view(g.dtype)


# -- elementwise -------------------------------------------------------------------------------
fuse("negative", lambda xp, g: -g)
fuse("identity", PASS)
fuse("read_variable", PASS)
fuse("abs", lambda xp, g, x: g * xp.sign(x))
fuse("square", lambda xp, g, x: g * (x * 2.0))
fuse("sqrt", lambda xp, g, out: g / (out * 2.0))
fuse("exp", lambda xp, g, out: g * out)
fuse("log", lambda xp, g, x: g / x)
fuse("sin", lambda xp, g, x: g * xp.cos(x))
fuse("cos", lambda xp, g, x: g * -xp.sin(x))
fuse("tanh", lambda xp, g, out: g * (1.0 - out * out))
fuse("sigmoid", lambda xp, g, out: g * (out * (1.0 - out)))
fuse("softplus", lambda xp, g, x: g * _unary._sigmoid(xp, x))
fuse("relu", lambda xp, g, out: keep_where(xp, out > 0.0, g))
fuse("elu", lambda xp, g, out, alpha=1.0: xp.where(out > 0.0, g, g * (out + alpha)))
fuse("leaky_relu", lambda xp, g, x, alpha=0.2:
     xp.where(x > 0.0, g, g * xp.asarray(alpha, dtype=g.dtype)))
fuse("add", PASS, PASS)
fuse("subtract", PASS, lambda xp, g: -g)
fuse("multiply", lambda xp, g, x, y: g * y, lambda xp, g, x, y: g * x)
fuse("divide", lambda xp, g, x, y: g / y, lambda xp, g, x, y: -g * (x / (y * y)))
fuse("maximum", lambda xp, g, x, y: keep_where(xp, x >= y, g),
     lambda xp, g, x, y: keep_where(xp, x < y, g))
fuse("minimum", lambda xp, g, x, y: keep_where(xp, x <= y, g),
     lambda xp, g, x, y: keep_where(xp, x > y, g))
fuse("where", None, lambda xp, g, c: keep_where(xp, c, g),
     lambda xp, g, c: keep_where(xp, ~c, g))
fuse("cast", lambda xp, g, dtype, src: g.astype(src) if src.kind in "fc" else None)

# -- linear algebra ------------------------------------------------------------------------------
_mm = _linalg._matmul_forward


def _matmul_a(xp, g, a, b, ta=False, tb=False):
    return _mm(xp, g, b, False, not tb) if not ta else _mm(xp, b, g, tb, True)


def _matmul_b(xp, g, a, b, ta=False, tb=False):
    return _mm(xp, a, g, not ta, False) if not tb else _mm(xp, g, a, True, ta)


fuse("matmul", _matmul_a, _matmul_b)

# -- reductions and shapes -------------------------------------------------------------------------


def _sum(xp, g, x_shape, axis, keepdims):
    if not keepdims:
        batch = g.shape[:_nb(g, len(x_shape) - len(axis))]
        g = g.reshape(batch + tuple(1 if i in axis else s for i, s in enumerate(x_shape)))
    return xp.broadcast_to(g, g.shape[:_nb(g, len(x_shape))] + tuple(x_shape))


def _mean(xp, g, x_shape, axis, keepdims):
    n = 1
    for i in axis:
        n *= x_shape[i]
    return _sum(xp, g, x_shape, axis, keepdims) * (1.0 / max(n, 1))


fuse("reduce_sum", _sum)
fuse("reduce_mean", _mean)
fuse("reshape", lambda xp, g, x_shape, shape: g.reshape(g.shape[:_nb(g, len(shape))] + x_shape))
fuse("broadcast_to", PASS)


def _transpose(xp, g, perm):
    nb = _nb(g, len(perm))
    inv = _shape._inverse(perm)
    return g.transpose(tuple(range(nb)) + tuple(nb + p for p in inv))


fuse("transpose", _transpose)


def _getitem(xp, g, x_shape, key, inner):
    inner_shape = tuple(x_shape[len(x_shape) - inner:])
    r = _shape.g_inner_ndim(key, x_shape, inner)
    advanced = any(isinstance(k, np.ndarray) for k in key)  # keys hold host index arrays
    return _shape._scatter_forward(xp, g, key, inner_shape, r, advanced)


fuse("getitem", _getitem)

# -- nn ----------------------------------------------------------------------------------------------
fuse("softmax", lambda xp, g, out, axis=-1:
     out * (g - (g * out).sum(axis=axis, keepdims=True)))
fuse("log_softmax", lambda xp, g, out, axis=-1:
     g - xp.exp(out) * g.sum(axis=axis, keepdims=True))


def _sparse_xent(xp, g, labels, logits, probs):
    n = logits.shape[-1]
    hot = (labels[..., None] == xp.arange(n, dtype=labels.dtype)).astype(logits.dtype)
    return g[..., None] * (probs - hot)


fuse("sparse_softmax_cross_entropy_with_logits", None, _sparse_xent)


def _bias_act(xp, g, out, act):
    gz = REGISTRY[act].fused_vjp(xp, g, out)
    return gz, gz


fuse("bias_act", _bias_act)
