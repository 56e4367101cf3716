"""Neural-network ops: softmax family, cross-entropies, normalisation, dropout."""
import numpy as np

from ..backends import checks
from .registry import REGISTRY, SAVE_OUT, InvalidArgumentError, def_op
from ._base import EMPTY, apply, floating, norm_axis, public, tensor
from ..core.tensor import Tensor, scalar_like
from .binary import as_tensor_pair, divide_no_nan, greater_equal, maximum, where
from .kernels import (add_reduce, bias_act_kernels, cpu_bias_act_into, cpu_kernels,
                      cpu_labels, cpu_shift, fits_cpu, rnn_cell_kernels, softmax_kernels,
                      sparse_xent_kernels)
from .random import uniform
from .reduce import reduce_sum
from .shape import concat, expand_dims, stack
from .unary import _differentiated, _sigmoid, cast, exp, log1p, rsqrt, square


def _softmax_forward(xp, x, axis=-1):
    if x.size == 0:  # (max over an empty axis has no identity)
        return x.copy()
    if axis % x.ndim == x.ndim - 1 and cpu_shift is not None and fits_cpu(x):
        # over the last axis on numpy: the shift by the row's max and the rows' sums by the
        # CPU kernels, numpy's exp and division (the same values: numpy's bits)
        e = np.empty_like(x)
        cpu_shift(x, e)
        np.exp(e, out=e)
        e /= add_reduce(e, (x.ndim - 1,), True)
        return e
    e = xp.exp(x - x.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _log_softmax_forward(xp, x, axis=-1):
    if x.size == 0:
        return x.copy()
    z = x - x.max(axis=axis, keepdims=True)
    return z - xp.log(xp.exp(z).sum(axis=axis, keepdims=True))


def _softmax_vjp(ops, g, out, axis=-1):
    return out * (g - ops.reduce_sum(g * out, axis=axis, keepdims=True))


def _outside_axis(q, r, params):
    """Whether a softmax is independent along axis q of its rank-r output: q is not its axis."""
    return q != params.get("axis", -1) % r


# softmax' g = y (g - <g, y>): the Jacobian diag(y) - y y^T is symmetric, so the JVP is the
# same map
_softmax = def_op("softmax", _softmax_forward, saves=("out",), vjp=_softmax_vjp,
                  jvp=_softmax_vjp, **softmax_kernels("softmax"), batch="leading",
                  per_example=("leading", _outside_axis))
# log_softmax' g = g - softmax * sum(g);  its JVP: t - <softmax, t>
_log_softmax = def_op("log_softmax", _log_softmax_forward, saves=("out",),
                      vjp=lambda ops, g, out, axis=-1:
                      g - ops.exp(out) * ops.reduce_sum(g, axis=axis, keepdims=True),
                      jvp=lambda ops, t, out, axis=-1:
                      t - ops.reduce_sum(t * ops.exp(out), axis=axis, keepdims=True),
                      **softmax_kernels("log_softmax"), batch="leading",
                      per_example=("leading", _outside_axis))


def _axis_params(x, axis, op):
    ax = norm_axis(axis, x.ndim, op)
    return EMPTY if ax == -1 else {"axis": ax}


def softmax(logits, axis=-1, name=None):
    """exp(x) / sum(exp(x)) along `axis`, computed stably.

    >>> tg.nn.softmax(tg.constant([0.0, 0.0])).numpy()
    array([0.5, 0.5], dtype=float32)
    """
    x = floating(logits, "softmax")
    return apply(_softmax, (x,), _axis_params(x, axis, "softmax"))


# a Keras activation's output keeps its input as logits of this kind (models/tensor_attributes.py), so
# that a categorical cross-entropy of it is computed from the logits (models/losses.py)
softmax.keras_logits = "categorical"


def log_softmax(logits, axis=-1, name=None):
    """x - logsumexp(x) along `axis`.

    >>> tg.nn.log_softmax(tg.constant([0.0, 0.0])).numpy().round(4)
    array([-0.6931, -0.6931], dtype=float32)
    """
    x = floating(logits, "log_softmax")
    return apply(_log_softmax, (x,), _axis_params(x, axis, "log_softmax"))


softmax.op = _softmax
log_softmax.op = _log_softmax


def _labels_in_range(xp, labels, n):
    """False for a label outside [0, n) on the host; on a device the check is queued without a
    sync (backends.checks: raised at the next host read) and the answer is True."""
    if not labels.size:
        return True
    if not checks.deferred(xp):
        return not (labels.min() < 0 or labels.max() >= n)
    checks.check(xp, (labels < 0) | (labels >= n), lambda host: _label_error(host, n), labels)
    return True


def _label_error(labels, n):
    bad = labels[(labels < 0) | (labels >= n)].ravel()[0]
    return InvalidArgumentError(f"sparse_softmax_cross_entropy_with_logits: label {int(bad)} is "
                                f"out of range [0, {n}) (found on the device, reported at the "
                                f"first read of a value after it)")


def _sparse_xent_forward(xp, labels, logits):
    """(loss, (softmax,)): the softmax is kept for the VJP instead of being recomputed."""
    n = logits.shape[-1]
    if not _labels_in_range(xp, labels, n):
        bad = labels[(labels < 0) | (labels >= n)].ravel()[0]
        raise ValueError(f"label {int(bad)} is out of range [0, {n})")
    m = logits.max(axis=-1, keepdims=True)
    e = xp.exp(logits - m)
    s = e.sum(axis=-1, keepdims=True)
    lse = xp.log(s[..., 0]) + m[..., 0]
    if logits.ndim == 2:   # (batch, classes): a fancy index, 4x faster than take_along_axis
        picked = logits[xp.arange(logits.shape[0]), labels]
    else:
        picked = xp.take_along_axis(logits, labels[..., None].astype(xp.intp), axis=-1)[..., 0]
    e /= s  # exactly _softmax_forward's arithmetic
    return lse - picked, (e,)


def _hot(ops, labels, n, dtype):
    return ops.cast(ops.equal(labels[..., None], ops.arange_like(labels, n)), dtype)


# d/dz (logsumexp(z) - z_label) = softmax(z) - onehot(label). On tensors the rule recomputes the
# softmax from the logits, so that it is differentiable itself; on arrays it uses `probs`, the
# forward's own softmax (the same arithmetic). Differentiated itself (Hessians), the VJP is one
# op, sparse_softmax_cross_entropy_grad (TF's op returns this backprop beside the loss).
def _sparse_xent_vjp(ops, g, labels, logits, probs):
    if _differentiated(ops):
        return ops.op("sparse_softmax_cross_entropy_grad", labels, logits, g)
    p = ops.softmax(logits) if ops.records else probs
    return g[..., None] * (p - _hot(ops, labels, logits.shape[-1], logits.dtype))


def _xent_grad_forward(xp, labels, logits, g):
    """(g[..., None] * (softmax(logits) - onehot(labels)), (the softmax,)): the rule's values,
    its operations (so its bits); on numpy the product by the CPU kernel (the same bits)."""
    p = _softmax_forward(xp, logits)
    if g.shape == labels.shape and cpu_labels(labels, p, g):  # (g may carry batch axes)
        out = xp.empty_like(p)
        cpu_kernels.xent_grad(p, labels, g, out)
        return out, (p,)
    hot = (labels[..., None] == xp.arange(logits.shape[-1])).astype(p.dtype)
    return g[..., None] * (p - hot), (p,)


def _xent_grad_probs(ops, logits, probs):
    return ops.softmax(logits) if ops.records else probs


# d/dz <c, g (softmax(z) - h)> is softmax's VJP of g c; d/dg = <c, softmax(z) - h> per row;
# the JVP: softmax's (the same symmetric map) of dz, times g, plus dg (softmax(z) - h)
def _xent_grad_vjp_logits(ops, c, labels, logits, g, probs):
    return _softmax_vjp(ops, c * g[..., None], _xent_grad_probs(ops, logits, probs))


def _xent_grad_vjp_g(ops, c, labels, logits, g, probs):
    p = _xent_grad_probs(ops, logits, probs)
    return ops.reduce_sum(c * (p - _hot(ops, labels, logits.shape[-1], logits.dtype)), axis=-1)


def _xent_grad_jvp(ops, ts, labels, logits, g, probs):
    _, dz, dg = ts
    p = _xent_grad_probs(ops, logits, probs)
    out = None
    if dz is not None:
        out = _softmax_vjp(ops, dz, p) * g[..., None]
    if dg is not None:
        term = dg[..., None] * (p - _hot(ops, labels, logits.shape[-1], logits.dtype))
        out = term if out is None else out + term
    return out


def _xent_grad_numpy_vjp(c, labels, logits, g, probs):
    """Both rules on numpy arrays without their dispatched ops (the same operations, so the
    same bits): softmax's VJP of g c from the kept softmax, and <c, softmax - onehot> per row;
    in one C pass where the CPU kernels take the arrays. Batched cotangents take the rules."""
    if c.shape != probs.shape or g.shape != labels.shape or type(c) is not np.ndarray:
        return NotImplemented
    if _XENT_GRAD_VJP is not None and cpu_labels(labels, probs, c, g):  # one C pass
        dz, dg = np.empty_like(probs), np.empty_like(g)
        _XENT_GRAD_VJP(c, labels, g, probs, dz, dg)
        return None, dz, dg
    u = c * g[..., None]
    axis = (probs.ndim - 1,)
    d_logits = probs * (u - add_reduce(u * probs, axis, True))
    d = probs - (labels[..., None] == np.arange(probs.shape[-1])).astype(probs.dtype)
    d *= c
    return None, d_logits, add_reduce(d, axis, False)


_XENT_GRAD_VJP = getattr(cpu_kernels, "xent_grad_vjp", None)
_sparse_xent_grad = def_op(
    "sparse_softmax_cross_entropy_grad", _xent_grad_forward, args=("labels", "logits", "g"),
    saves=("labels", "logits", "g", "probs"), residuals=("probs",),
    vjp=(None, _xent_grad_vjp_logits, _xent_grad_vjp_g), jvp=_xent_grad_jvp, same_dtype=False,
    vjp_kernels={"numpy": _xent_grad_numpy_vjp}, batch="leading")


def _sparse_xent_jvp(ops, ts, labels, logits, probs):
    # <softmax(z) - onehot(label), dz> along the last axis (labels carry no tangent)
    hot = _hot(ops, labels, logits.shape[-1], logits.dtype)
    return ops.reduce_sum((ops.softmax(logits) - hot) * ts[1], axis=-1)


_sparse_xent = def_op("sparse_softmax_cross_entropy_with_logits", _sparse_xent_forward,
                      args=("labels", "logits"), saves=("labels", "logits", "probs"),
                      residuals=("probs",), vjp=(None, _sparse_xent_vjp), jvp=_sparse_xent_jvp,
                      same_dtype=False, **sparse_xent_kernels(_labels_in_range),
                      batch="leading", per_example=("leading", lambda q, r, params: True))


def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """Per-example -log softmax(logits)[label]; labels are integer class indices.

    >>> tg.nn.sparse_softmax_cross_entropy_with_logits(
    ...     labels=[0], logits=[[0.0, 0.0]]).numpy().round(4)
    array([0.6931], dtype=float32)
    """
    z = floating(logits, "sparse_softmax_cross_entropy_with_logits")
    y = tensor(labels)
    if y._data.dtype.kind not in "iu":
        raise InvalidArgumentError(f"sparse_softmax_cross_entropy_with_logits: labels must be "
                                   f"integers, got {y.dtype.name}")
    if y._data.shape != z._data.shape[:-1]:
        raise InvalidArgumentError(f"sparse_softmax_cross_entropy_with_logits: labels of shape "
                                   f"{y.shape} do not match logits of shape {z.shape} (labels "
                                   f"must have shape {z.shape[:-1]})")
    return apply(_sparse_xent, (y, z), EMPTY)


sparse_softmax_cross_entropy_with_logits.op = _sparse_xent


def softmax_cross_entropy_with_logits(labels, logits, axis=-1, name=None):
    """-sum(labels * log_softmax(logits)) along `axis` (differentiable in both).

    >>> tg.nn.softmax_cross_entropy_with_logits([[0.5, 0.5]], [[0.0, 0.0]]).numpy().round(4)
    array([0.6931], dtype=float32)
    """
    y, z = _dense_labels(labels, logits, "softmax_cross_entropy_with_logits")
    return -reduce_sum(y * log_softmax(z, axis=axis), axis=axis)


def _dense_labels(labels, logits, op):
    """(labels, logits) as tensors of the logits' floating dtype and one shape."""
    z = floating(logits, op)
    y = as_tensor_pair(z, labels)[1]
    if y.shape != z.shape:
        raise InvalidArgumentError(f"{op}: labels {y.shape} and logits {z.shape} must have the "
                                   "same shape")
    return y, z


def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """Elementwise binary cross-entropy of the logistic function of the logits, computed stably:
    max(x, 0) - x z + log(1 + e^-|x|).

    >>> tg.nn.sigmoid_cross_entropy_with_logits([1.0], [0.0]).numpy().round(4)
    array([0.6931], dtype=float32)
    """
    z, x = _dense_labels(labels, logits, "sigmoid_cross_entropy_with_logits")
    # as TensorFlow, with both branches chosen by x >= 0, so that the gradient is exactly
    # 1 / (1 + e^-x) - z at x = 0 too (max and |x| have kinks there)
    pos = greater_equal(x, 0.0)
    return where(pos, x, 0.0) - x * z + log1p(exp(where(pos, -x, x)))


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """x / sqrt(max(sum(x^2, axis), epsilon)), as tf.math.l2_normalize (`dim` is its old name).

    >>> tg.math.l2_normalize(tg.constant([3.0, 4.0])).numpy()
    array([0.6, 0.8], dtype=float32)
    """
    x = floating(x, "l2_normalize")
    axis = dim if axis is None and dim is not None else axis
    square_sum = reduce_sum(square(x), axis=axis, keepdims=True)
    return x * rsqrt(maximum(square_sum, epsilon))


def l2_loss(t, name=None):
    """sum(t^2) / 2.

    >>> float(tg.nn.l2_loss(tg.constant([1.0, 2.0])))
    2.5
    """
    return reduce_sum(square(floating(t, "l2_loss"))) * 0.5


def bias_add(value, bias, name=None):
    """value + bias, with bias of shape (value.shape[-1],).

    >>> tg.nn.bias_add(tg.zeros((2, 3)), tg.ones(3)).shape
    (2, 3)
    """
    v, b = as_tensor_pair(value, bias)
    if b.ndim != 1 or v.ndim < 1 or b.shape[0] != v.shape[-1]:
        raise InvalidArgumentError(f"bias_add: bias must have shape ({v.shape[-1:]}) for a "
                                   f"value of shape {v.shape}, got {b.shape}")
    return v + b


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """(x - mean) / sqrt(variance + eps) * scale + offset (offset/scale may be None).

    >>> tg.nn.batch_normalization(tg.constant([1.0, 3.0]), 2.0, 1.0, None, None, 0.0).numpy()
    array([-1.,  1.], dtype=float32)
    """
    x = floating(x, "batch_normalization")
    inv = rsqrt(as_tensor_pair(x, variance)[1] + variance_epsilon)
    if scale is not None:
        inv = inv * scale
    y = (x - mean) * inv
    return y + offset if offset is not None else y


def dropout(x, rate, noise_shape=None, seed=None, name=None):
    """Zeroes elements with probability `rate` and scales the rest by 1 / (1 - rate). With an op
    `seed` the masks come from that seed's stream: a new mask at every call (also at every call
    of a `tg.function`), the same sequence after `tg.random.set_seed`, as TensorFlow.

    >>> sorted(set(tg.nn.dropout(tg.ones((1000,)), 0.5, seed=1).numpy().tolist()))
    [0.0, 2.0]
    """
    return dropout_drawn(x, rate, noise_shape, lambda shape, dt, dev: uniform(
        shape, dtype=dt, seed=seed, device=dev))


def dropout_drawn(x, rate, noise_shape, draw_uniform):
    """dropout with its uniform numbers from `draw_uniform(shape, dtype, device)` (a layer's
    own seeded generator)."""
    x = floating(x, "dropout")
    if not 0 <= float(rate) < 1:
        raise InvalidArgumentError(f"dropout: rate must be in [0, 1), got {rate}")
    if rate == 0:
        return x
    shape = x.shape if noise_shape is None else tuple(noise_shape)
    keep = draw_uniform(shape, x.dtype, x._dev) >= float(rate)
    return x * cast(keep, x.dtype) * (1.0 / (1.0 - float(rate)))




# -- bias + activation in one op (one kernel on a GPU) -------------------------------------------

def bias_activations():
    """The activations bias_act takes: the elementwise ops of one input whose derivative follows
    from their output (they save only `out`), so the fused op saves only its output too."""
    if _bias_activations[0] != len(REGISTRY):  # computed again only when ops were added
        _bias_activations[:] = [len(REGISTRY), tuple(sorted(
            name for name, op in REGISTRY.items()
            if op.elementwise and op.args == ("x",) and op.save_plan is SAVE_OUT))]
    return _bias_activations[1]


_bias_activations = [-1, ()]


def _bias_act_forward(xp, x, b, act):
    return REGISTRY[act].forward(xp, x + b)


# act(x + b)' = act'(out) for both x and b (the sweep sums b's cotangent over the rows)
def _bias_act_vjp(ops, g, out, act):
    gz = REGISTRY[act].vjp(ops, g, out)
    return gz, gz


def _bias_act_jvp(ops, ts, out, act):
    tx, tb = ts
    if tb is not None:  # b's tangent (batch + (n,)) broadcast over x's leading axes
        nb = tb.ndim - 1
        tb = ops.reshape(tb, tb.shape[:nb] + (1,) * (out.ndim - 1) + tb.shape[nb:])
    t = tb if tx is None else (tx if tb is None else tx + tb)
    return REGISTRY[act].vjp(ops, t, out)  # a diagonal Jacobian is its own transpose


def _bias_act_into(forward, in_shapes, params):
    """tg.function's replay on numpy: bias_act written into a buffer of its plan by the CPU
    kernel where it applies (else the forward's new array); the buffer may be `x`'s."""
    if set(params) != {"act"}:
        return None
    act = params["act"]

    def run(x, b, out):
        if out is not None:
            r = cpu_bias_act_into(act, x, b, out)
            if r is not NotImplemented:
                return r
        return forward(x, b)
    return run, True


_bias_act = def_op("bias_act", _bias_act_forward, args=("x", "b"), saves=("out",),
                   vjp=_bias_act_vjp, jvp=_bias_act_jvp, **bias_act_kernels(), batch="channels",
                   fresh=True, replay_into=_bias_act_into)


def bias_act(x, bias, activation):
    """activation(x + bias) as one op, for the activations in `bias_activations()` (a tapegpu
    extension: on a GPU it is one kernel, and its VJP one more). Dense layers use it.

    >>> tg.nn.bias_act(tg.constant([[-1.0, 2.0]]), tg.constant([1.0, 1.0]), "elu").numpy()
    array([[0., 3.]], dtype=float32)
    """
    v, b = as_tensor_pair(x, bias)
    if activation not in bias_activations():
        raise InvalidArgumentError(f"bias_act: activation {activation!r} is not one of "
                                   f"{bias_activations()}")
    if b.ndim != 1 or v.ndim < 1 or b.shape[0] != v.shape[-1]:
        raise InvalidArgumentError(f"bias_act: bias must have shape ({v.shape[-1:]}) for x of "
                                   f"shape {v.shape}, got {b.shape}")
    if v._data.dtype.kind not in "fV":  # V: bfloat16
        raise InvalidArgumentError(f"bias_act: expected floating tensors, got {v.dtype.name}")
    return apply(_bias_act, (v, b), {"act": activation})


bias_act.op = _bias_act


def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None):
    """sum(per_example_loss * sample_weight) / global_batch_size, as
    tf.nn.compute_average_loss: `global_batch_size` defaults to the first axis' length (one
    replica), an empty batch averages to 0, and a `sample_weight` of lower rank gains
    trailing axes (a weight per example).

    >>> float(tg.nn.compute_average_loss(tg.constant([1.0, 2.0, 3.0, 4.0]), global_batch_size=8))
    1.25
    """
    loss = floating(per_example_loss, "compute_average_loss")
    if loss.ndim == 0:
        raise ValueError(f"compute_average_loss: Invalid value passed for `per_example_loss`. "
                         f"Expected a tensor with at least rank 1. Received "
                         f"per_example_loss={float(loss)} with rank 0")
    if sample_weight is not None:
        w = cast(tensor(sample_weight), loss.dtype)
        while 0 < w.ndim < loss.ndim:
            w = expand_dims(w, -1)
        loss = loss * w
    n = loss.shape[0] if global_batch_size is None else global_batch_size
    if isinstance(n, Tensor):
        if n.ndim != 0 or n._data.dtype.kind not in "iu":
            raise TypeError(f"compute_average_loss: global_batch_size must be an integer "
                            f"scalar, got {n.dtype.name} of shape {n.shape}")
        n = int(n)
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"compute_average_loss: global_batch_size must be an integer, got "
                        f"{n!r}")
    if n < 0:
        raise InvalidArgumentError(f"compute_average_loss: global_batch_size must be "
                                   f"non-negative, got {n}")
    total = reduce_sum(loss)
    return divide_no_nan(total, scalar_like(n, total))


# -- recurrent cells: the pointwise part of an LSTM or GRU step, after its GEMMs -------------------
# One op each, so that a GPU runs a step's gates in one launch forward and one backward
# (cuda_kernels/rnn.cu); the references below and the rules compute what Keras' composite
# formulas compute, in the same order (tapegpu/keras/layers/rnn.py). Each saves its inputs, from
# which the backward recomputes the gates (pointwise, cheap): then the rules are differentiable
# through them, for higher order.

def _gate(a, k, u):
    """Gate k of width u of `a` (..., n * u)."""
    return a[..., k * u:(k + 1) * u]


def _lstm_forward(xp, x, h, b, c):
    u = c.shape[-1]
    z = (x + b) + h
    i, f, o = (_sigmoid(xp, _gate(z, k, u)) for k in (0, 1, 3))
    c_new = f * c + i * xp.tanh(_gate(z, 2, u))
    return xp.stack([o * xp.tanh(c_new), c_new])


def _lstm_gates(ops, x, h, b, c):
    # z = (x + b) + h, gates i, f, c, o (Keras' order)
    u = c.shape[-1]
    z = (x + b) + h
    return (ops.sigmoid(_gate(z, 0, u)), ops.sigmoid(_gate(z, 1, u)), ops.tanh(_gate(z, 2, u)),
            ops.sigmoid(_gate(z, 3, u)))


def _lstm_vjp(ops, g, x, h, b, c, out):
    # c' = f c + i g, h' = o tanh(c'):  dc' = g_c + g_h o (1 - tanh^2 c'), dz by each gate's
    # derivative (s' = s (1 - s), tanh' = 1 - tanh^2), dc = dc' f; z's cotangent is x's, h's, b's
    i, f, gg, o = _lstm_gates(ops, x, h, b, c)
    rest = (slice(None),) * c.ndim
    gh, gc = g[(Ellipsis, 0) + rest], g[(Ellipsis, 1) + rest]
    tc = ops.tanh(out[1])
    dc = gc + (gh * o) * (1.0 - tc * tc)
    dz = ops.concat([(dc * gg) * (i * (1.0 - i)), (dc * c) * (f * (1.0 - f)),
                     (dc * i) * (1.0 - gg * gg), (gh * tc) * (o * (1.0 - o))], axis=-1)
    return dz, dz, dz, dc * f


def _sum_tangents(ops, like, ts):
    present = [t for t in ts if t is not None]
    if not present:
        return ops.zeros_like(like)
    total = present[0]
    for t in present[1:]:
        total = total + t
    return total


def _bias_tangent(ops, tb, x):
    """A bias' tangent (batch axes first) lined up with x's rows: a 1 for each of them."""
    for _ in range(x.ndim - 1):
        tb = ops.expand_dims(tb, -2)
    return tb


def _lstm_jvp(ops, ts, x, h, b, c, out):
    # dc' = f' c + f dc + i' g + i g',  dh' = o' tanh c' + o (1 - tanh^2 c') dc'
    u = c.shape[-1]
    i, f, gg, o = _lstm_gates(ops, x, h, b, c)
    tb = None if ts[2] is None else _bias_tangent(ops, ts[2], x)
    tz = _sum_tangents(ops, x, (ts[0], ts[1], tb))
    tc = ops.zeros_like(c) if ts[3] is None else ts[3]
    ti, tf = _gate(tz, 0, u) * (i * (1.0 - i)), _gate(tz, 1, u) * (f * (1.0 - f))
    tg_, to = _gate(tz, 2, u) * (1.0 - gg * gg), _gate(tz, 3, u) * (o * (1.0 - o))
    dc = (tf * c + f * tc) + (ti * gg + i * tg_)
    tanh_c = ops.tanh(out[1])
    dh = to * tanh_c + o * ((1.0 - tanh_c * tanh_c) * dc)
    return ops.stack([dh, dc], axis=-(c.ndim + 1))


def _gru_parts(ops, x, h, b, s):
    # reset_after: z = s(x_z + h_z), r = s(x_r + h_r), hh = tanh(x_h + r h_h), with x and h
    # plus their biases b[0], b[1]; returns z, r, hh and h_h
    u = s.shape[-1]
    xb, hb = x + b[0], h + b[1]
    z = ops.sigmoid(_gate(xb, 0, u) + _gate(hb, 0, u))
    r = ops.sigmoid(_gate(xb, 1, u) + _gate(hb, 1, u))
    rh = _gate(hb, 2, u)
    return z, r, ops.tanh(_gate(xb, 2, u) + r * rh), rh


def _gru_forward(xp, x, h, b, s):
    u = s.shape[-1]
    xb, hb = x + b[0], h + b[1]
    z = _sigmoid(xp, _gate(xb, 0, u) + _gate(hb, 0, u))
    r = _sigmoid(xp, _gate(xb, 1, u) + _gate(hb, 1, u))
    hh = xp.tanh(_gate(xb, 2, u) + r * _gate(hb, 2, u))
    return z * s + (1.0 - z) * hh


def _gru_vjp(ops, g, x, h, b, s):
    # h' = z s + (1 - z) hh:  dz = (g s - g hh) z (1 - z), da = g (1 - z)(1 - hh^2) for
    # a = x_h + r h_h, dr = da h_h r (1 - r); ds = g z. b's rows get x's and h's cotangents.
    z, r, hh, rh = _gru_parts(ops, x, h, b, s)
    dz = (g * s - g * hh) * (z * (1.0 - z))
    da = (g * (1.0 - z)) * (1.0 - hh * hh)
    dr = (da * rh) * (r * (1.0 - r))
    dx, dh = ops.concat([dz, dr, da], axis=-1), ops.concat([dz, dr, da * r], axis=-1)
    return dx, dh, ops.stack([dx, dh], axis=-2), g * z


def _gru_jvp(ops, ts, x, h, b, s):
    # dh' = z' (s - hh) + z ds + (1 - z) hh',  hh' = (1 - hh^2)(x_h' + r' h_h + r h_h')
    u = s.shape[-1]
    z, r, hh, rh = _gru_parts(ops, x, h, b, s)
    tb = ops.zeros_like(b) if ts[2] is None else ts[2]
    txb = _sum_tangents(ops, x, (ts[0], _bias_tangent(ops, tb[..., 0, :], x)))
    thb = _sum_tangents(ops, h, (ts[1], _bias_tangent(ops, tb[..., 1, :], h)))
    ts_ = ops.zeros_like(s) if ts[3] is None else ts[3]
    tz = (_gate(txb, 0, u) + _gate(thb, 0, u)) * (z * (1.0 - z))
    tr = (_gate(txb, 1, u) + _gate(thb, 1, u)) * (r * (1.0 - r))
    thh = (_gate(txb, 2, u) + (tr * rh + r * _gate(thb, 2, u))) * (1.0 - hh * hh)
    return tz * (s - hh) + z * ts_ + (1.0 - z) * thh


_lstm_cell = def_op("lstm_cell", _lstm_forward, args=("x", "h", "b", "c"),
                    saves=("x", "h", "b", "c", "out"), vjp=_lstm_vjp, jvp=_lstm_jvp,
                    **rnn_cell_kernels("lstm_cell"))
_gru_cell = def_op("gru_cell", _gru_forward, args=("x", "h", "b", "s"),
                   saves=("x", "h", "b", "s"), vjp=_gru_vjp, jvp=_gru_jvp,
                   **rnn_cell_kernels("gru_cell"))


def _cell_args(op, x, h, bias, state, gates, bias_shape):
    x, h = floating(x, op), floating(h, op)
    bias, state = floating(bias, op), floating(state, op)
    u = state.shape[-1] if state.ndim else 0
    want = state.shape[:-1] + (gates * u,)
    if state.ndim < 1 or u == 0 or x.shape != want or h.shape != want or \
            bias.shape != bias_shape(u):
        raise InvalidArgumentError(
            f"{op}: for a state of shape (..., units) = {state.shape}, x and h must have shape "
            f"{want} and the bias {bias_shape(u)}; got x {x.shape}, h {h.shape}, bias "
            f"{bias.shape}")
    return x, h, bias, state


def lstm_cell(x, h, bias, c_prev, name=None):
    """The pointwise part of an LSTM step (Keras' LSTMCell with sigmoid gates and tanh),
    after its two GEMMs: with `z = x + bias + h` (`x = inputs @ kernel`, `h = h_prev @
    recurrent_kernel`, shape (..., 4 * units), gates in Keras' order i, f, c, o),

        c = sigmoid(z_f) * c_prev + sigmoid(z_i) * tanh(z_c),  h = sigmoid(z_o) * tanh(c)

    returns `(h, c)`, each of `c_prev`'s shape. `bias` has shape (4 * units,). On a GPU it is
    one kernel forward and one backward.

    >>> h, c = tg.nn.lstm_cell(tg.zeros((1, 8)), tg.zeros((1, 8)), tg.zeros(8),
    ...                        tg.ones((1, 2)))
    >>> c.numpy(), h.numpy().round(4)
    (array([[0.5, 0.5]], dtype=float32), array([[0.2311, 0.2311]], dtype=float32))
    """
    args = _cell_args("lstm_cell", x, h, bias, c_prev, 4, lambda u: (4 * u,))
    out = apply(_lstm_cell, args, EMPTY)
    return out[0], out[1]


def gru_cell(x, h, bias, h_prev, name=None):
    """The pointwise part of a GRU step (Keras' GRUCell with reset_after=True, sigmoid gates
    and tanh), after its two GEMMs `x = inputs @ kernel` and `h = h_prev @ recurrent_kernel`
    ((..., 3 * units) each, gates z, r, h). With `bias` (2, 3 * units) added by the op,
    `xb = x + bias[0]` and `hb = h + bias[1]`:

        z = sigmoid(xb_z + hb_z),  r = sigmoid(xb_r + hb_r),  hh = tanh(xb_h + r * hb_h)

    returns the new state `z * h_prev + (1 - z) * hh`. On a GPU it is one kernel forward and
    one backward.

    >>> tg.nn.gru_cell(tg.zeros((1, 6)), tg.zeros((1, 6)), tg.zeros((2, 6)),
    ...                tg.ones((1, 2))).numpy()
    array([[0.5, 0.5]], dtype=float32)
    """
    args = _cell_args("gru_cell", x, h, bias, h_prev, 3, lambda u: (2, 3 * u))
    return apply(_gru_cell, args, EMPTY)


lstm_cell.op, gru_cell.op = _lstm_cell, _gru_cell


__all__ = public(globals(), ("", "nn"), special=(
    ((), (bias_activations, dropout_drawn)), (("", "nn", "activations"), (softmax, log_softmax)),
    (("", "math", "nn", "linalg"), (l2_normalize,)),
    (("nn",), (compute_average_loss, lstm_cell, gru_cell))))
