"""numpy references of the kernels in ``cuda_kernels/`` that are not ops.

The kernels that implement an op (activations, normalised exponentials, cross-entropy) are
tested against the
op's own registry entry: its reference forward and its VJP rule on numpy arrays
(tests/backends/kernels/test_kernels.py). The ones here serve the machinery (un-broadcasting
cotangents) and the optimizers; each function computes, in the input dtype, what the kernel of
the same name must return. They import nothing but numpy.
"""
import numpy as np


def unbroadcast(g, batch_ndim, in_shape):
    """Sum g (batch_shape + full_shape) down to batch_shape + in_shape."""
    batch_shape, full_shape = g.shape[:batch_ndim], g.shape[batch_ndim:]
    lead = len(full_shape) - len(in_shape)
    padded = (1,) * lead + tuple(in_shape)
    axes = tuple(batch_ndim + a for a, (i, f) in enumerate(zip(padded, full_shape)) if i == 1 and f != 1)
    return g.sum(axis=axes, keepdims=True).reshape(batch_shape + tuple(in_shape)).astype(g.dtype)


def sgd_update(p, g, v, lr, momentum, nesterov):
    """Keras SGD, in place: v = momentum v - lr g; p += v (Nesterov: p += momentum v - lr g)."""
    v[...] = momentum * v - lr * g
    p += momentum * v - lr * g if nesterov else v


def adam_update(p, g, m, v, lr_t, b1, b2, eps):
    """Keras Adam, in place, with lr_t = lr sqrt(1 - b2^t) / (1 - b1^t) given."""
    m[...] = b1 * m + (1 - b1) * g
    v[...] = b2 * v + (1 - b2) * g * g
    p -= lr_t * m / (np.sqrt(v) + eps)
