"""numpy references of every kernel in ``cuda_kernels/``.

These are the definitions the kernels are tested against: each function
computes, in the input dtype, what the kernel of the same name must return.
They take and return numpy arrays and import nothing but numpy.
"""

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def relu(x):
    return np.maximum(x, 0).astype(x.dtype)


def elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0))).astype(x.dtype)


def sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def tanh(x):
    return np.tanh(x)


def softplus(x):
    return (np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))).astype(x.dtype)


def gelu(x):
    """Exact GELU, x * Phi(x) (``tf.nn.gelu(approximate=False)``)."""
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1 + _erf(x64 / math.sqrt(2)))).astype(x.dtype)


ACTIVATIONS = {"relu": relu, "elu": elu, "gelu": gelu, "sigmoid": sigmoid, "tanh": tanh,
               "softplus": softplus}

# What each backward kernel reads: the forward output or the forward input.
SAVES = {"relu": "out", "elu": "out", "sigmoid": "out", "tanh": "out", "gelu": "x", "softplus": "x"}


def _derivative(name, saved):
    """f'(.) as a function of the saved value (see SAVES)."""
    s = saved.astype(np.float64)
    if name == "relu":
        d = (s > 0).astype(np.float64)            # relu'  = [y > 0]
    elif name == "elu":
        d = np.where(s > 0, 1.0, s + 1)           # elu'   = 1 or y + 1
    elif name == "sigmoid":
        d = s * (1 - s)                           # sigma' = y (1 - y)
    elif name == "tanh":
        d = 1 - s * s                             # tanh'  = 1 - y^2
    elif name == "softplus":
        d = sigmoid(s)                            # softplus' = sigmoid(x)
    elif name == "gelu":                          # gelu'  = Phi(x) + x phi(x)
        d = 0.5 * (1 + _erf(s / math.sqrt(2))) + s * np.exp(-0.5 * s * s) / math.sqrt(2 * math.pi)
    else:
        raise KeyError(name)
    return d


def act_fwd(name, x):
    return ACTIVATIONS[name](x)


def act_bwd(name, g, saved):
    """dx = g * f'(saved); g may carry leading batch axes (g.shape == batch + saved.shape)."""
    return (g.astype(np.float64) * _derivative(name, saved)).astype(g.dtype)


def bias_act_fwd(name, x, b):
    y = x + b
    return y if name == "none" else ACTIVATIONS[name](y)


def _shifted(x):
    """x - max(x) over the last axis (empty rows allowed)."""
    return x - x.max(axis=-1, keepdims=True, initial=-np.inf)


def softmax_fwd(x):
    z = _shifted(x)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax_fwd(x):
    z = _shifted(x)
    with np.errstate(divide="ignore"):  # an empty row has log(0); there is nothing to fill
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def softmax_bwd(g, y):
    """dx = y * (g - sum(g * y)); g.shape == batch + y.shape."""
    return y * (g - (g * y).sum(axis=-1, keepdims=True))


def log_softmax_bwd(g, y):
    """dx = g - exp(y) * sum(g); g.shape == batch + y.shape."""
    return g - np.exp(y) * g.sum(axis=-1, keepdims=True)


def sparse_xent_fwd(logits, labels):
    """(loss, probs): loss[r] = logsumexp(z[r]) - z[r, label[r]], probs = softmax(z)."""
    logp = log_softmax_fwd(logits)
    rows = np.arange(logits.shape[0])
    return -logp[rows, labels], np.exp(logp)


def sparse_xent_bwd(g, probs, labels):
    """dz = g[row] * (probs - onehot(label))."""
    onehot = np.zeros_like(probs)
    onehot[np.arange(probs.shape[0]), labels] = 1
    return g[:, None] * (probs - onehot)


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
