"""The op-spec table: one entry per public op, driving tests/test_ops.py.

A spec names the public function (wrapped to take only differentiable tensor arguments), the
shapes of sample inputs, their domain, a numpy reference of the forward, and which registry ops
it exercises (`covers`); `grad=False` marks ops without a gradient (their outputs must be
unconnected). A meta-test fails if a registered op is covered by no spec.
"""
import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

import tapegpu as tg
import tapegpu.signal  # noqa: F401 (registers the spectral ops)

try:
    from scipy.special import erf as _erf
except ImportError:  # pragma: no cover
    _erf = np.vectorize(math.erf)


@dataclass
class Spec:
    name: str
    fn: Callable
    shapes: tuple
    ref: Optional[Callable] = None
    domain: tuple = (-2.0, 2.0)
    grad: bool = True
    covers: tuple = ()
    make: Optional[Callable] = None  # custom sample maker: rng, dtype -> list of arrays
    atol: float = 1e-5
    extra: dict = field(default_factory=dict)

    def __repr__(self):
        return self.name


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _attention_ref(q, k, v, scale, causal):
    """Keras' dot_product_attention on (B, T, N, H) arrays, in numpy."""
    s = np.einsum("btnh,bsnh->bnts", q, k) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    return np.einsum("bnts,bsnh->btnh", _softmax(s), v).astype(q.dtype)


def _lstm_ref(z, c):
    i, f, g, o = np.split(z, 4, axis=-1)
    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    return np.stack([_sigmoid(o) * np.tanh(c), c])


def _gru_ref(x, h, b, s):
    (xz, xr, xh), (hz, hr, hh) = np.split(x + b[0], 3, -1), np.split(h + b[1], 3, -1)
    z, r = _sigmoid(xz + hz), _sigmoid(xr + hr)
    return z * s + (1 - z) * np.tanh(xh + r * hh)


def _spd(rng, dtype, n=3, batch=()):
    a = rng.standard_normal(batch + (n, n))
    return [(a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)]


def _away_from_jumps(rng, dtype, shapes):
    """floormod's samples: x = q y with q's fraction in [0.2, 0.8] (finite differences never
    cross a jump of x mod y)."""
    y = rng.uniform(0.5, 3.0, shapes[1])
    q = rng.integers(-3, 4, shapes[0]) + rng.uniform(0.2, 0.8, shapes[0])
    return [(q * y).astype(dtype), y.astype(dtype)]


def _away_from(points, eps=0.15):
    """A sample maker that keeps inputs away from kinks (relu at 0, floor at integers...)."""
    def make(rng, dtype, shapes):
        out = []
        for s in shapes:
            x = rng.uniform(-3, 3, size=s)
            for p in points:
                near = np.abs(x - p) < eps
                x[near] += 2 * eps
            out.append(x.astype(dtype))
        return out
    return make


def _linear_backward(fn, shape):
    """g -> the gradient of the linear `fn` (at zeros of `shape`) for the cotangent g: `fn`'s
    backward op, a function of g alone."""
    def backward(g):
        x = tg.zeros(shape, dtype=g.dtype)
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x, output_gradients=g)
    return backward


def _backward(act):
    """(g, x) -> the gradient of act at x for the cotangent g, computed by a tape."""
    def fn(g, x):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = act(x)
        return tape.gradient(y, x, output_gradients=g)
    return fn


LABELS = np.array([0, 2, 1, 3], dtype=np.int32)
INDICES = np.array([[2, 0], [1, 2]], dtype=np.int64)
MASK = np.array([[True, False, True, True], [False, True, False, True],
                 [True, True, False, False]])

def _xlog_sample(rng, dtype, shapes):
    """x away from 0 (where xlogy's derivative is 0 by convention, which central differences do
    not see; tests/ops/test_ops_conformance.py checks that case), y positive."""
    x = rng.uniform(0.2, 2, size=shapes[0]) * rng.choice([-1, 1], size=shapes[0])
    return [x.astype(dtype), rng.uniform(0.3, 2, size=shapes[1]).astype(dtype)]


def _digamma_ref(x):
    """psi(x) by its series: psi(x) = -gamma + sum_k (1/(k+1) - 1/(k+x)), summed to
    k = 2 10^5 and the tail by Euler-Maclaurin (x moved above 0 by psi(x) = psi(x + 1) - 1/x)."""
    x = np.asarray(x, np.float64)
    shift = np.ceil(np.maximum(1.0 - x, 0.0))
    y = x + shift
    k = np.arange(200000.0)
    n = k[-1] + 1  # the tail from n by Euler-Maclaurin: integral + f(n)/2 - f'(n)/12
    s = np.array([(1 / (k + 1) - 1 / (k + v)).sum() + np.log((n + v) / (n + 1)) +
                  (1 / (n + 1) - 1 / (n + v)) / 2 + (1 / (n + 1) ** 2 - 1 / (n + v) ** 2) / 12
                  for v in y.ravel()]).reshape(y.shape)
    corr = np.array([sum(1 / (v + j) for j in range(int(n))) for v, n in
                     zip(x.ravel(), shift.ravel())]).reshape(x.shape)
    return -0.5772156649015329 + s - corr


def _trigamma_ref(x):
    """psi1(x) = sum_k 1/(x + k)^2, summed to k = 10^5 and the tail by its integral."""
    k = np.arange(100000.0)
    return np.array([(1 / (v + k) ** 2).sum() + 1 / (v + k[-1] + 0.5)
                     for v in np.ravel(x)]).reshape(np.shape(x))

def _scatter_ref(x, indices, updates, combine):
    """A tensor scatter one index tuple at a time; `combine` None replaces (the last wins)."""
    out = np.array(x, copy=True)
    idx = np.asarray(indices)
    rows = np.reshape(updates, (-1,) + out.shape[idx.shape[-1]:])
    for i, row in zip(idx.reshape(-1, idx.shape[-1]), rows):
        at = tuple(i)
        out[at] = row if combine is None else combine(out[at], row)
    return out


def _clip_rows(rows, max_norm):
    norm = np.sqrt((rows * rows).sum(-1, keepdims=True))
    return rows * max_norm / np.maximum(norm, max_norm)


def _unique_ref(x):
    seen = []
    for v in x.tolist():
        if v not in seen:
            seen.append(v)
    return np.array(seen, x.dtype)

def _conv_ref(x, w, strides, pads, dilations=None):
    """Channels-last N-d convolution (cross-correlation) with groups, one kernel tap at a time."""
    nd = w.ndim - 2
    dil = dilations or (1,) * nd
    xpad = np.pad(x, [(0, 0)] + [tuple(p) for p in pads] + [(0, 0)])
    cin_g, cout = w.shape[-2:]
    groups = x.shape[-1] // cin_g
    cout_g = cout // groups
    out = [(xpad.shape[1 + i] - (w.shape[i] - 1) * dil[i] - 1) // strides[i] + 1
           for i in range(nd)]
    y = np.zeros((x.shape[0], *out, cout))
    for tap in np.ndindex(*w.shape[:nd]):
        patch = xpad[(slice(None),) + tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for
                                            t, d, o, s in zip(tap, dil, out, strides))]
        for g in range(groups):
            y[..., g * cout_g:(g + 1) * cout_g] += (
                patch[..., g * cin_g:(g + 1) * cin_g] @ w[tap][:, g * cout_g:(g + 1) * cout_g])
    return y.astype(x.dtype)


def _conv_filter_grad_ref(x, u, w_shape, strides, pads):
    """d/dw of sum(conv(x, w) * u), one filter element at a time (the conv is linear in w)."""
    dw = np.zeros(w_shape)
    for i in np.ndindex(*w_shape):
        e = np.zeros(w_shape)
        e[i] = 1.0
        dw[i] = (_conv_ref(x.astype(np.float64), e, strides, pads) * u).sum()
    return dw.astype(x.dtype)


def _transpose_ref(g, w, spatial, strides, pads):
    """The transposed convolution: each g[n, o, co] spread over the window of output o."""
    out = np.zeros((g.shape[0],) + tuple(n + lo + hi for n, (lo, hi) in zip(spatial, pads)) +
                   (w.shape[-2],))
    for o in np.ndindex(*g.shape[1:-1]):
        for tap in np.ndindex(*w.shape[:-2]):
            at = tuple(oi * s + t for oi, s, t in zip(o, strides, tap))
            out[(slice(None),) + at] += g[(slice(None),) + o] @ w[tap].T
    crop = tuple(slice(lo, lo + n) for (lo, _), n in zip(pads, spatial))
    return out[(slice(None),) + crop].astype(g.dtype)


def _avg_pool_grad_ref(x, u):
    """d/dx of sum(avg_pool2d(x, 3, 2, "SAME") * u) on (1, 5, 4, 2), from its linearity."""
    dx = np.zeros(x.shape)
    for i in np.ndindex(*x.shape):
        e = np.zeros(x.shape)
        e[i] = 1.0
        dx[i] = (_pool_ref(e, (3, 3), (2, 2), ((1, 1), (0, 1)), "AVG") * u).sum()
    return dx.astype(x.dtype)


def _pool_ref(x, ksize, strides, pads, kind, dilations=None):
    """Channels-last N-d max or average pooling over the unpadded elements of each window."""
    nd = len(ksize)
    dil = dilations or (1,) * nd
    spatial = x.shape[1:-1]
    out = [(n + lo + hi - (k - 1) * d - 1) // s + 1
           for n, (lo, hi), k, d, s in zip(spatial, pads, ksize, dil, strides)]
    y = np.zeros((x.shape[0], *out, x.shape[-1]), x.dtype)
    for o in np.ndindex(*out):
        idx = [[oi * s - lo + t * d for t in range(k)] for oi, s, (lo, _), k, d in
               zip(o, strides, pads, ksize, dil)]
        idx = [[i for i in ix if 0 <= i < n] for ix, n in zip(idx, spatial)]
        win = x[(slice(None),) + np.ix_(*idx) + (slice(None),)]
        win = win.reshape(x.shape[0], -1, x.shape[-1])
        y[(slice(None),) + o] = win.max(1) if kind == "MAX" else win.mean(1)
    return y


def _max_pool_grad_ref(x, u, ksize, strides, pads):
    """d/dx of sum(max_pool(x) * u): each u to its window's first maximum."""
    xpad = np.pad(x, [(0, 0)] + [tuple(p) for p in pads] + [(0, 0)], constant_values=-np.inf)
    dx = np.zeros(xpad.shape)
    for n, c in np.ndindex(x.shape[0], x.shape[-1]):
        for o in np.ndindex(*u.shape[1:-1]):
            taps = list(np.ndindex(*ksize))
            vals = [xpad[(n,) + tuple(oi * s + t for oi, s, t in zip(o, strides, tap)) + (c,)]
                    for tap in taps]
            tap = taps[int(np.argmax(vals))]
            dx[(n,) + tuple(oi * s + t for oi, s, t in zip(o, strides, tap)) + (c,)] += \
                u[(n,) + o + (c,)]
    crop = tuple(slice(lo, lo + m) for (lo, _), m in zip(pads, x.shape[1:-1]))
    return dx[(slice(None),) + crop + (slice(None),)].astype(x.dtype)


def _inner_grad(f, wrt):
    """The gradient of sum(f(...) * u) with respect to argument `wrt` of f, by an inner tape: a
    function of the other arguments and u, whose own derivatives are second derivatives."""
    def grad(*args):
        *xs, u = args
        xs = [tg.constant(x) if not isinstance(x, tg.Tensor) else x for x in xs]
        with tg.GradientTape() as tape:
            tape.watch(xs[wrt])
            y = f(*xs)
        return tape.gradient(y, xs[wrt], output_gradients=u)
    return grad


_W_FIXED = np.random.default_rng(7).uniform(-1, 1, (2, 2, 3, 4))


def _first_dropout(x, rate, seed):
    """dropout with the first mask of op seed `seed`'s stream at every call (set_seed restarts
    the stream; the checks call the function many times and need one mask)."""
    tg.random.set_seed(0)
    return tg.nn.dropout(x, rate, seed=seed)


def _dropout_mask(shape, dtype, rate, seed):
    """The current device's first dropout scaling for an op seed: 0 or 1 / (1 - rate) per
    element."""
    mask = _first_dropout(tg.ones(shape, dtype=dtype), rate, seed).numpy()
    assert set(np.unique(mask)) <= {0.0, 1.0 / (1.0 - rate)}, np.unique(mask)
    return mask


def _nchw(f):
    """A channels-last reference applied to channels-first arrays."""
    return lambda x, *a: np.moveaxis(f(np.moveaxis(x, 1, -1), *a), -1, 1)

# -- TF's image kernels, for the image specs (half-pixel centers, positions in float32) --------

def _tf_positions(n_in, n_out, nearest=False):
    scale = np.float32(n_in) / np.float32(n_out)
    pos = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * scale
    return pos if nearest else pos - np.float32(0.5)


def _tf_bilinear_axis(n_in, n_out):
    """resize_bilinear_op.cc's lower, upper and lerp per output index."""
    pos = _tf_positions(n_in, n_out)
    lower = np.maximum(np.floor(pos).astype(int), 0)
    upper = np.minimum(np.ceil(pos).astype(int), n_in - 1)
    return lower, upper, (pos - np.floor(pos)).astype(np.float64)


def _tf_resize_bilinear(x, height, width):
    """top_left + (top_right - top_left) * x_lerp, then top + (bottom - top) * y_lerp."""
    yl, yu, ya = _tf_bilinear_axis(x.shape[-3], height)
    xl, xu, xa = _tf_bilinear_axis(x.shape[-2], width)
    ya, xa = ya[:, None, None], xa[:, None]
    top = x[..., yl, :, :][..., xl, :] + (x[..., yl, :, :][..., xu, :] -
                                          x[..., yl, :, :][..., xl, :]) * xa
    bottom = x[..., yu, :, :][..., xl, :] + (x[..., yu, :, :][..., xu, :] -
                                             x[..., yu, :, :][..., xl, :]) * xa
    return (top + (bottom - top) * ya).astype(x.dtype)


def _tf_resize_nearest(x, height, width):
    yi = np.minimum(np.floor(_tf_positions(x.shape[-3], height, True)).astype(int),
                    x.shape[-3] - 1)
    xi = np.minimum(np.floor(_tf_positions(x.shape[-2], width, True)).astype(int),
                    x.shape[-2] - 1)
    return x[..., yi, :, :][..., xi, :]


def _tf_bicubic_axis(n_in, n_out):
    """resize_bicubic_op.cc with half-pixel centers: Keys' kernel (a = -0.5) read from a table
    of 1024 steps (here in float64), taps outside the image weighted 0, the others
    renormalised."""
    a = -0.5
    table = []
    for i in range(1025):
        t = i / 1024
        table.append((((a + 2) * t - (a + 3)) * t * t + 1,
                      ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a))
    table = np.asarray(table)
    pos = _tf_positions(n_in, n_out)
    idx, wts = [], []
    for p in pos:
        base = int(np.floor(p))
        off = int(np.rint((p - np.float32(base)) * np.float32(1024)))
        taps = [base - 1, base, base + 1, base + 2]
        w = [table[off, 1], table[off, 0], table[1024 - off, 0], table[1024 - off, 1]]
        w = [wi if 0 <= t < n_in else 0.0 for t, wi in zip(taps, w)]
        total = sum(w)
        idx.append([min(max(t, 0), n_in - 1) for t in taps])
        wts.append([float(wi / total) for wi in w])
    return np.asarray(idx), np.asarray(wts)


def _tf_resize_bicubic(x, height, width):
    yi, yw = _tf_bicubic_axis(x.shape[-3], height)
    xi, xw = _tf_bicubic_axis(x.shape[-2], width)
    out = 0.0
    for i in range(4):
        rows = x[..., yi[:, i], :, :]
        for j in range(4):
            out = out + rows[..., xi[:, j], :] * (yw[:, i, None, None] * xw[:, j, None])
    return np.asarray(out).astype(x.dtype)


def _tf_resize_with_pad(x, th, tw):
    """image_ops_impl's _resize_image_with_pad_common, its arithmetic in float32."""
    f32 = np.float32
    h, w = f32(x.shape[-3]), f32(x.shape[-2])
    ratio = max(w / f32(tw), h / f32(th))
    rh, rw = h / ratio, w / ratio
    nh, nw = int(np.floor(rh)), int(np.floor(rw))
    top = max(0, int(np.floor((f32(th) - rh) / 2)))
    left = max(0, int(np.floor((f32(tw) - rw) / 2)))
    out = np.zeros(x.shape[:-3] + (th, tw, x.shape[-1]), x.dtype)
    out[..., top:top + nh, left:left + nw, :] = _tf_resize_bilinear(x, nh, nw)
    return out


def _tf_adjust_contrast(x, f):
    mean = x.mean(axis=(-3, -2), keepdims=True)
    return ((x - mean) * f + mean).astype(x.dtype)



def _triangular_sample(batch_a, batch_b=()):
    """A well-conditioned triangular solve: a dominant diagonal, the other triangle random (it
    must not be read)."""
    def make(rng, dtype, shapes):
        a = rng.standard_normal(batch_a + (3, 3)) + 3 * np.eye(3)
        return [a.astype(dtype), rng.standard_normal(batch_b + (3, 2)).astype(dtype)]
    return make


def _svd_loss(x, full=False):
    """u diag(s^2) v^T beside u diag(w) v^T (and, with full_matrices, the projector onto the
    extra singular vectors): independent of the singular vectors' signs."""
    s, u, v = tg.linalg.svd(x, full_matrices=full)
    k = s.shape[-1]
    w = tg.cast(tg.range(3.0, 3.0 - k, -1.0), x.dtype)
    u1, v1 = u[..., :k], v[..., :k]
    parts = [tg.matmul(u1 * (s * s)[..., None, :], v1, transpose_b=True),
             tg.matmul(u1 * w, v1, transpose_b=True)]
    if full and u.shape[-1] > k:
        parts.append(tg.matmul(u[..., k:], u[..., k:], transpose_b=True))
    if full and v.shape[-1] > k:
        parts.append(tg.matmul(v[..., k:], v[..., k:], transpose_b=True))
    return tg.concat([tg.reshape(p, p.shape[:-2] + (-1,)) for p in parts], axis=-1)


def _svd_loss_ref(x, full=False):
    u, s, vh = np.linalg.svd(x, full_matrices=full)
    k = s.shape[-1]
    w = np.arange(3.0, 3.0 - k, -1.0)
    u1, v1 = u[..., :k], np.swapaxes(vh, -1, -2)[..., :k]
    parts = [(u1 * (s * s)[..., None, :]) @ np.swapaxes(v1, -1, -2),
             (u1 * w) @ np.swapaxes(v1, -1, -2)]
    if full and u.shape[-1] > k:
        parts.append(u[..., k:] @ np.swapaxes(u[..., k:], -1, -2))
    if full and vh.shape[-1] > k:
        v2 = np.swapaxes(vh, -1, -2)[..., k:]
        parts.append(v2 @ np.swapaxes(v2, -1, -2))
    return np.concatenate([p.reshape(p.shape[:-2] + (-1,)) for p in parts],
                          axis=-1).astype(x.dtype)


def _eigh_loss(x):
    """v diag(w) v^T above the eigenvalues: independent of the eigenvectors' signs."""
    e, v = tg.linalg.eigh(x)
    w = tg.cast(tg.constant([1.0, -2.0, 3.0]), x.dtype)
    return tg.concat([tg.matmul(v * w, v, transpose_b=True), e[..., None, :]], axis=-2)


def _eigh_loss_ref(x):
    e, v = np.linalg.eigh(x)
    w = np.array([1.0, -2.0, 3.0])
    return np.concatenate([(v * w) @ np.swapaxes(v, -1, -2), e[..., None, :]],
                          axis=-2).astype(x.dtype)


def _lu_ref(x):
    """Doolittle with partial pivoting (LAPACK's getrf), one matrix at a time."""
    out = np.array(x, copy=True)
    for a in out.reshape((-1,) + x.shape[-2:]):
        for k in range(a.shape[0]):
            p = k + int(np.argmax(np.abs(a[k:, k])))
            a[[k, p]] = a[[p, k]]
            a[k + 1:, k] /= a[k, k]
            a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
    return out


def _expm_ref(x):
    """exp(A) by its Taylor series in float64, after scaling A below norm 1/2 (then squaring)."""
    a = np.asarray(x, np.float64)
    s = max(0, int(np.ceil(np.log2(max(np.abs(a).sum(-2).max(), 1e-300) / 0.5))))
    a = a / 2.0 ** s
    term = out = np.broadcast_to(np.eye(a.shape[-1]), a.shape).copy()
    for k in range(1, 30):
        term = term @ a / k
        out = out + term
    for _ in range(s):
        out = out @ out
    return out.astype(x.dtype)


U = (3, 4)  # default unary sample shape
SPECS = [
    # -- unary math ------------------------------------------------------------------------
    Spec("negative", tg.negative, (U,), np.negative),
    Spec("abs", tg.abs, (U,), np.abs, make=_away_from([0.0])),
    Spec("sign", tg.sign, (U,), np.sign, make=_away_from([0.0])),
    Spec("square", tg.square, (U,), np.square),
    Spec("sqrt", tg.sqrt, (U,), np.sqrt, domain=(0.2, 3.0)),
    Spec("rsqrt", tg.math.rsqrt, (U,), lambda x: 1 / np.sqrt(x), domain=(0.2, 3.0)),
    Spec("exp", tg.exp, (U,), np.exp),
    Spec("expm1", tg.math.expm1, (U,), np.expm1),
    Spec("log", tg.math.log, (U,), np.log, domain=(0.2, 3.0)),
    Spec("log1p", tg.math.log1p, (U,), np.log1p, domain=(-0.8, 3.0)),
    Spec("sin", tg.sin, (U,), np.sin),
    Spec("cos", tg.cos, (U,), np.cos),
    Spec("tan", tg.math.tan, (U,), np.tan, domain=(-1.2, 1.2)),
    Spec("tanh", tg.tanh, (U,), np.tanh),
    Spec("sinh", tg.math.sinh, (U,), np.sinh),
    Spec("cosh", tg.cosh, (U,), np.cosh),
    Spec("atan", tg.math.atan, (U,), np.arctan),
    Spec("asin", tg.math.asin, (U,), np.arcsin, domain=(-0.9, 0.9)),
    Spec("acos", tg.math.acos, (U,), np.arccos, domain=(-0.9, 0.9)),
    # complex numbers through real-valued round trips (TF's rules: real, imag -> complex(g, 0),
    # complex(0, g); complex -> (real(g), imag(g)))
    Spec("complex_real", lambda x, y: tg.math.real(tg.complex(x, y)), (U, U), lambda x, y: x,
         covers=("complex", "real")),
    Spec("complex_imag", lambda x, y: tg.math.imag(tg.complex(y, x)), (U, U), lambda x, y: x,
         covers=("complex", "imag")),
    # real FFTs through real-valued round trips; their backward ops through `_backward`
    Spec("rfft", lambda x: tg.math.real(tg.signal.rfft(x)) - 2.0 * tg.math.imag(tg.signal.rfft(x)),
         (U,), lambda x: np.real(np.fft.rfft(x)) - 2.0 * np.imag(np.fft.rfft(x)),
         covers=("rfft", "real", "imag")),
    Spec("rfft2d_padded", lambda x: tg.math.imag(tg.signal.rfft2d(x, [4, 6])), (U,),
         lambda x: np.imag(np.fft.rfft2(x, (4, 6))), covers=("rfft", "imag")),
    Spec("irfft", lambda x, y: tg.signal.irfft(tg.complex(x, y), [6]), ((3, 4), (3, 4)),
         lambda x, y: np.fft.irfft(x + 1j * y, 6), covers=("irfft", "complex")),
    Spec("irfft2d_odd", lambda x, y: tg.signal.irfft2d(tg.complex(x, y), [3, 5]), (U, U),
         lambda x, y: np.fft.irfft2(x + 1j * y, (3, 5)), covers=("irfft", "complex")),
    Spec("rfft_adjoint", _linear_backward(lambda x: tg.math.real(tg.signal.rfft(x)), U),
         ((3, 3),), lambda g: np.real(np.fft.ifft(np.pad(g, ((0, 0), (0, 1))), axis=-1)) * 4,
         covers=("rfft_adjoint",)),
    Spec("irfft_adjoint", _linear_backward(
        lambda x: tg.signal.irfft(tg.complex(x, x * 0.0), [6]), (3, 4)), ((3, 6),),
         lambda g: np.real(np.fft.rfft(g, axis=-1)) * np.array([1, 2, 2, 1]) / 6,
         covers=("irfft_adjoint",)),
    Spec("sigmoid", tg.sigmoid, (U,), _sigmoid, domain=(-6, 6)),
    Spec("softplus", tg.math.softplus, (U,), lambda x: np.log1p(np.exp(x)), domain=(-6, 6)),
    Spec("erfc", tg.math.erfc, (U,), lambda x: 1 - _erf(x)),
    Spec("log_sigmoid", tg.math.log_sigmoid, (U,), lambda x: -np.log1p(np.exp(-x)),
         domain=(-6, 6)),
    Spec("atan2", tg.math.atan2, (U, U), np.arctan2, make=_away_from([0.0])),
    Spec("xlogy", tg.math.xlogy, (U, U), lambda x, y: np.where(x == 0, 0.0, x * np.log(y)),
         make=_xlog_sample),
    Spec("xlog1py", tg.math.xlog1py, (U, U), lambda x, y: np.where(x == 0, 0.0, x * np.log1p(y)),
         make=_xlog_sample),
    Spec("softsign", tg.nn.softsign, (U,), lambda x: x / (1 + np.abs(x)), make=_away_from([0.0])),
    Spec("erf", tg.math.erf, (U,), _erf),
    Spec("reciprocal", tg.math.reciprocal, (U,), lambda x: 1 / x, domain=(0.3, 3.0)),
    Spec("floor", tg.math.floor, (U,), np.floor, grad=False),
    Spec("ceil", tg.math.ceil, (U,), np.ceil, grad=False),
    Spec("round", tg.round, (U,), np.round, grad=False),
    Spec("relu", tg.nn.relu, (U,), lambda x: np.maximum(x, 0), make=_away_from([0.0])),
    Spec("relu6", tg.nn.relu6, (U,), lambda x: np.clip(x, 0, 6), make=_away_from([0.0, 6.0]),
         extra={"scale": 4.0}),
    Spec("elu", tg.nn.elu, (U,), lambda x: np.where(x > 0, x, np.expm1(x)),
         make=_away_from([0.0])),
    Spec("elu_alpha", lambda x: tg.nn.elu(x, alpha=0.5), (U,),
         lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)), make=_away_from([0.0]),
         covers=("elu",)),
    Spec("selu", tg.nn.selu, (U,), lambda x: 1.0507009873554805 * np.where(
        x > 0, x, 1.6732632423543772 * np.expm1(x)), make=_away_from([0.0]), covers=("elu",)),
    Spec("gelu", tg.nn.gelu, (U,), lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
    Spec("gelu_tanh", lambda x: tg.nn.gelu(x, approximate=True), (U,),
         lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
         covers=("gelu",)),
    Spec("leaky_relu", tg.nn.leaky_relu, (U,), lambda x: np.where(x > 0, x, 0.2 * x),
         make=_away_from([0.0])),
    # an activation's backward g * act'(x), by an inner tape: recorded by an outer tape, it is
    # the activation's grad op (TF's ReluGrad...), linear in g, zero but connected in x
    Spec("relu_grad", _backward(tg.nn.relu), (U, U), lambda g, x: np.where(x > 0, g, 0.0),
         make=_away_from([0.0]), covers=("relu_grad", "relu")),
    Spec("relu6_grad", _backward(lambda x: tg.nn.relu6(x * 3.0)), (U, U),
         lambda g, x: np.where((x > 0) & (x < 2), 3.0 * g, 0.0), make=_away_from([0.0, 2.0]),
         covers=("relu6_grad", "relu6", "multiply")),
    Spec("leaky_relu_grad", _backward(lambda x: tg.nn.leaky_relu(x, alpha=0.3)), (U, U),
         lambda g, x: np.where(x > 0, g, 0.3 * g), make=_away_from([0.0]),
         covers=("leaky_relu_grad", "leaky_relu")),
    Spec("tanh_grad", _backward(tg.tanh), (U, U), lambda g, x: g * (1 - np.tanh(x) ** 2),
         covers=("tanh_grad", "tanh")),
    Spec("identity", tg.identity, (U,), lambda x: x),
    Spec("read_variable", lambda x: x * tg.Variable(1.5, dtype=x.dtype).read_value(), (U,),
         lambda x: x * 1.5,
         covers=("read_variable", "multiply")),
    Spec("stop_gradient", tg.stop_gradient, (U,), lambda x: x, grad=False),
    Spec("cast_roundtrip", lambda x: tg.cast(tg.cast(x, tg.float32), x.dtype) * x, (U,),
         lambda x: x.astype(np.float32).astype(x.dtype) * x, covers=("cast",), atol=1e-4,
         extra={"h": 1e-2, "rel": 1e-5}),  # float32 quantisation: a wide, exact-for-x^2 step
    Spec("cast_int", lambda x: tg.cast(x, tg.int32), (U,), lambda x: np.trunc(x).astype(np.int32),
         grad=False, covers=("cast",)),
    # -- binary ----------------------------------------------------------------------------
    Spec("add", tg.add, ((3, 4), (4,)), np.add),
    Spec("add_scalar", lambda x: x + 2.5, (U,), lambda x: x + 2.5, covers=("add",)),
    Spec("subtract", tg.subtract, ((3, 1), (1, 4)), np.subtract),
    Spec("multiply", tg.multiply, ((2, 3, 4), (3, 1)), np.multiply),
    Spec("divide", tg.divide, ((3, 4), (3, 4)), np.divide, domain=(0.5, 2.0)),
    Spec("pow", tg.pow, ((3, 4), (4,)), np.power, domain=(0.5, 2.0)),
    Spec("pow_scalar", lambda x: x ** 3.0, (U,), lambda x: x ** 3, covers=("pow",)),
    Spec("maximum", tg.maximum, ((3, 4), (4,)), np.maximum),
    Spec("minimum", tg.minimum, ((3, 4), (3, 1)), np.minimum),
    Spec("squared_difference", tg.math.squared_difference, ((3, 4), (4,)),
         lambda x, y: (x - y) ** 2),
    Spec("where", lambda x, y: tg.where(MASK, x, y), ((3, 4), (4,)),
         lambda x, y: np.where(MASK, x, y)),
    Spec("clip_by_value", lambda x: tg.clip_by_value(x, -0.5, 0.7), (U,),
         lambda x: np.clip(x, -0.5, 0.7), make=_away_from([-0.5, 0.7], 0.05),
         covers=("maximum", "minimum")),
    # TF's float floordiv is floor(x / y) (numpy's floor_divide differs: inf // 2, 1 // 0.1)
    Spec("floordiv", tg.math.floordiv, ((3, 4), (4,)), lambda x, y: np.floor(x / y),
         domain=(0.5, 3.0), grad=False),
    Spec("floormod", tg.math.floormod, ((3, 4), (4,)), np.mod, make=_away_from_jumps),
    Spec("equal", tg.equal, ((3, 4), (4,)), np.equal, grad=False),
    Spec("not_equal", tg.math.not_equal, ((3, 4), (4,)), np.not_equal, grad=False),
    Spec("less", tg.math.less, ((3, 4), (4,)), np.less, grad=False),
    Spec("less_equal", tg.math.less_equal, ((3, 4), (4,)), np.less_equal, grad=False),
    Spec("greater", tg.greater, ((3, 4), (4,)), np.greater, grad=False),
    Spec("greater_equal", tg.math.greater_equal, ((3, 4), (4,)), np.greater_equal, grad=False),
    Spec("logical", lambda x, y: tg.math.logical_xor(tg.math.logical_or(
        tg.math.logical_and(x > 0, y > 0), tg.math.logical_not(x > 1)), y < 0),
        ((3, 4), (4,)), lambda x, y: ((x > 0) & (y > 0) | ~(x > 1)) ^ (y < 0), grad=False,
        covers=("logical_and", "logical_or", "logical_not", "logical_xor", "greater", "less")),
    # -- reductions ----------------------------------------------------------------------------
    Spec("reduce_sum", tg.reduce_sum, ((3, 4),), np.sum),
    Spec("reduce_sum_axis", lambda x: tg.reduce_sum(x, axis=1), ((2, 3, 4),),
         lambda x: x.sum(1), covers=("reduce_sum",)),
    Spec("reduce_sum_keep", lambda x: tg.reduce_sum(x, axis=[0, 2], keepdims=True), ((2, 3, 4),),
         lambda x: x.sum((0, 2), keepdims=True), covers=("reduce_sum",)),
    Spec("reduce_mean", lambda x: tg.reduce_mean(x, axis=-1), ((2, 3, 4),),
         lambda x: x.mean(-1)),
    Spec("reduce_max", lambda x: tg.reduce_max(x, axis=0), ((3, 4),), lambda x: x.max(0)),
    Spec("reduce_min", lambda x: tg.math.reduce_min(x, axis=1, keepdims=True), ((3, 4),),
         lambda x: x.min(1, keepdims=True)),
    Spec("cumsum", lambda x: tg.math.cumsum(x, axis=1), ((3, 4),), lambda x: np.cumsum(x, 1)),
    Spec("cumsum_exclusive_reverse", lambda x: tg.math.cumsum(x, axis=0, exclusive=True,
                                                              reverse=True), ((3, 4),),
         lambda x: np.flip(np.cumsum(np.flip(x, 0), 0), 0) - x, covers=("cumsum",)),
    Spec("cumprod", lambda x: tg.math.cumprod(x, axis=-1), ((3, 4),),
         lambda x: np.cumprod(x, -1), domain=(0.5, 1.5)),
    Spec("cumprod_exclusive_reverse", lambda x: tg.math.cumprod(x, exclusive=True, reverse=True),
         ((4, 3),), lambda x: np.flip(np.cumprod(np.flip(x, 0), 0), 0) / x, domain=(0.5, 1.5),
         covers=("cumprod",)),
    Spec("reduce_prod", lambda x: tg.math.reduce_prod(x, axis=1), ((3, 4),),
         lambda x: x.prod(1)),
    Spec("reduce_prod_zero", lambda x: tg.math.reduce_prod(x * tg.constant(
        np.array([1, 0, 1, 1], x.dtype.as_numpy_dtype))), ((4,),),
        lambda x: (x * np.array([1, 0, 1, 1])).prod(), covers=("reduce_prod",)),
    Spec("reduce_logsumexp", lambda x: tg.math.reduce_logsumexp(x, axis=-1), ((3, 4),),
         lambda x: np.log(np.exp(x).sum(-1))),
    Spec("reduce_variance", lambda x: tg.math.reduce_variance(x, axis=0), ((3, 4),),
         lambda x: x.var(0)),
    Spec("reduce_std", tg.math.reduce_std, ((3, 4),), np.std),
    Spec("moments", lambda x: tg.stack(tg.nn.moments(x, axes=[0])), ((5, 3),),
         lambda x: np.stack([x.mean(0), x.var(0)])),
    Spec("norm", tg.norm, ((3, 4),), np.linalg.norm),
    Spec("norm_1_axis", lambda x: tg.norm(x, ord=1, axis=1), ((3, 4),),
         lambda x: np.abs(x).sum(1), make=_away_from([0.0])),
    Spec("norm_inf", lambda x: tg.norm(x, ord=np.inf), ((3, 4),), lambda x: np.abs(x).max()),
    Spec("norm_p3", lambda x: tg.norm(x, ord=3), ((5,),),
         lambda x: (np.abs(x) ** 3).sum() ** (1 / 3), make=_away_from([0.0])),
    Spec("argmax", lambda x: tg.argmax(x, axis=1), ((3, 4),), lambda x: x.argmax(1),
         grad=False),
    Spec("argmin", lambda x: tg.argmin(x, axis=0), ((3, 4),), lambda x: x.argmin(0),
         grad=False),
    Spec("reduce_any_all", lambda x: tg.stack([tg.math.reduce_any(x > 1.0, axis=1),
                                               tg.math.reduce_all(x > -1.0, axis=1)]),
         ((3, 4),), lambda x: np.stack([(x > 1).any(1), (x > -1).all(1)]), grad=False,
         covers=("reduce_any", "reduce_all", "greater")),
    Spec("count_nonzero", lambda x: tg.math.count_nonzero(tg.math.floor(x)), ((3, 4),),
         lambda x: np.count_nonzero(np.floor(x)), grad=False),
    # -- shape ---------------------------------------------------------------------------------
    Spec("reshape", lambda x: tg.reshape(x, (4, -1)), ((2, 3, 4),), lambda x: x.reshape(4, -1)),
    Spec("transpose", lambda x: tg.transpose(x, (2, 0, 1)), ((2, 3, 4),),
         lambda x: x.transpose(2, 0, 1)),
    Spec("T", lambda x: x.T, ((3, 4),), lambda x: x.T, covers=("transpose",)),
    Spec("expand_dims", lambda x: tg.expand_dims(x, 1), ((3, 4),),
         lambda x: x[:, None], covers=("reshape",)),
    Spec("squeeze", lambda x: tg.squeeze(x, axis=1), ((3, 1, 4),), lambda x: x[:, 0],
         covers=("reshape",)),
    Spec("concat", lambda x, y: tg.concat([x, y, x], axis=1), ((3, 2), (3, 4)),
         lambda x, y: np.concatenate([x, y, x], 1)),
    Spec("stack", lambda x, y: tg.stack([x, y], axis=1), ((3, 4), (3, 4)),
         lambda x, y: np.stack([x, y], 1), covers=("concat", "reshape")),
    Spec("unstack", lambda x: tg.unstack(x, axis=1)[2] * tg.unstack(x)[0][:1], ((3, 4),),
         lambda x: x[:, 2] * x[0, :1], covers=("getitem",)),
    Spec("split", lambda x: tg.split(x, [1, 3], axis=1)[1], ((3, 4),), lambda x: x[:, 1:],
         covers=("getitem",)),
    Spec("tile", lambda x: tg.tile(x, [2, 3]), ((3, 4),), lambda x: np.tile(x, (2, 3))),
    Spec("pad", lambda x: tg.pad(x, [[1, 0], [2, 1]], constant_values=0.5), ((3, 4),),
         lambda x: np.pad(x, [[1, 0], [2, 1]], constant_values=0.5)),
    Spec("gather", lambda x: tg.gather(x, INDICES, axis=1), ((2, 3, 4),),
         lambda x: np.take(x, INDICES, axis=1)),
    Spec("gather_repeat", lambda x: tg.gather(x, [0, 0, 2]), ((3, 4),), lambda x: x[[0, 0, 2]],
         covers=("gather",)),
    Spec("broadcast_to", lambda x: tg.broadcast_to(x, (2, 3, 4)), ((3, 1),),
         lambda x: np.broadcast_to(x, (2, 3, 4))),
    Spec("getitem_basic", lambda x: x[1:, ::2, None], ((3, 4),), lambda x: x[1:, ::2, None],
         covers=("getitem", "getitem_grad")),
    Spec("getitem_int", lambda x: x[..., 1], ((2, 3, 4),), lambda x: x[..., 1],
         covers=("getitem",)),
    Spec("getitem_array", lambda x: x[np.array([2, 0, 2])], ((3, 4),),
         lambda x: x[[2, 0, 2]], covers=("getitem", "getitem_grad")),
    Spec("getitem_mask", lambda x: x[MASK], ((3, 4),), lambda x: x[MASK], covers=("getitem",)),
    Spec("getitem_separated", lambda x: x[np.array([2, 0, 2]), :, 1], ((3, 4, 2),),
         lambda x: x[[2, 0, 2], :, 1], covers=("getitem", "getitem_grad")),
    Spec("one_hot", lambda x: tg.one_hot(tg.argmax(x, axis=1), 4), ((3, 4),),
         lambda x: np.eye(4, dtype=np.float32)[x.argmax(1)], grad=False,
         extra={"out_dtype": np.float32}),
    Spec("matrix_transpose", tg.linalg.matrix_transpose, ((2, 3, 4),),
         lambda x: np.swapaxes(x, -1, -2), covers=("transpose",)),
    Spec("repeat", lambda x: tg.repeat(x, 2), ((2, 3),), lambda x: np.repeat(x, 2),
         covers=("reshape", "gather")),
    Spec("repeat_axis", lambda x: tg.repeat(x, [2, 0, 3], axis=1), ((2, 3, 2),),
         lambda x: np.repeat(x, [2, 0, 3], axis=1), covers=("gather",)),
    Spec("tensor_diag", tg.linalg.tensor_diag, ((2, 3),),
         lambda x: np.diag(x.ravel()).reshape(x.shape * 2), covers=("getitem_grad", "reshape")),
    Spec("roll", lambda x: tg.roll(x, shift=[1, -2], axis=[0, 2]), ((3, 2, 4),),
         lambda x: np.roll(x, (1, -2), axis=(0, 2))),
    Spec("roll_repeated_axis", lambda x: tg.roll(x, shift=[2, 3], axis=[-1, 1]), ((3, 4),),
         lambda x: np.roll(x, 5, axis=1), covers=("roll",)),
    # -- linear algebra ------------------------------------------------------------------------
    Spec("matmul", tg.matmul, ((3, 4), (4, 5)), np.matmul),
    Spec("matmul_batched", tg.matmul, ((2, 3, 4), (4, 5)), np.matmul, covers=("matmul",)),
    Spec("matmul_batched_b", tg.matmul, ((3, 4), (2, 4, 5)), np.matmul, covers=("matmul",)),
    Spec("matmul_ta", lambda a, b: tg.matmul(a, b, transpose_a=True), ((4, 3), (4, 5)),
         lambda a, b: a.T @ b, covers=("matmul",)),
    Spec("matmul_tb", lambda a, b: tg.matmul(a, b, transpose_b=True), ((2, 3, 4), (5, 4)),
         lambda a, b: a @ b.T, covers=("matmul",)),
    # few rows against a larger b: computed as (b a^T)^T (see linalg._matmul_forward)
    Spec("matmul_tb_skinny", lambda a, b: tg.matmul(a, b, transpose_b=True), ((3, 1, 4), (7, 4)),
         lambda a, b: a @ b.T, covers=("matmul",)),
    Spec("matmul_tab", lambda a, b: tg.matmul(a, b, transpose_a=True, transpose_b=True),
         ((4, 3), (5, 4)), lambda a, b: a.T @ b.T, covers=("matmul",)),
    Spec("matmul_op", lambda a, b: a @ b, ((2, 3, 4), (2, 4, 2)), np.matmul,
         covers=("matmul",)),
    Spec("tensordot", lambda a, b: tg.tensordot(a, b, axes=[[1, 2], [0, 1]]),
         ((2, 3, 4), (3, 4, 5)), lambda a, b: np.tensordot(a, b, axes=[[1, 2], [0, 1]]),
         covers=("matmul", "transpose", "reshape")),
    Spec("einsum", lambda a, b: tg.einsum("bij,jk->bik", a, b), ((2, 3, 4), (4, 5)),
         lambda a, b: np.einsum("bij,jk->bik", a, b)),
    Spec("einsum_sum", lambda a, b: tg.einsum("ij,jk", a, b), ((3, 4), (4, 5)),
         lambda a, b: np.einsum("ij,jk", a, b), covers=("einsum",)),
    Spec("einsum_ellipsis", lambda a, b: tg.einsum("...i,i->...", a, b), ((2, 3, 4), (4,)),
         lambda a, b: np.einsum("...i,i->...", a, b), covers=("einsum",)),
    Spec("einsum_reduce", lambda a: tg.einsum("ijk->j", a), ((2, 3, 4),),
         lambda a: np.einsum("ijk->j", a), covers=("einsum",)),
    Spec("einsum_outer3", lambda a, b, c: tg.einsum("i,j,k->ijk", a, b, c), ((2,), (3,), (2,)),
         lambda a, b, c: np.einsum("i,j,k->ijk", a, b, c), covers=("einsum",)),
    Spec("solve", tg.linalg.solve, ((3, 3), (3, 2)), np.linalg.solve,
         make=lambda rng, dt, s: [_spd(rng, dt)[0], rng.standard_normal((3, 2)).astype(dt)]),
    Spec("solve_adjoint", lambda a, b: tg.linalg.solve(a, b, adjoint=True), ((3, 3), (3, 2)),
         lambda a, b: np.linalg.solve(a.T, b), covers=("solve",),
         make=lambda rng, dt, s: [(rng.standard_normal((3, 3)) + 3 * np.eye(3)).astype(dt),
                                  rng.standard_normal((3, 2)).astype(dt)]),
    Spec("inv", tg.linalg.inv, ((2, 3, 3),), np.linalg.inv,
         make=lambda rng, dt, s: _spd(rng, dt, 3, (2,))),
    Spec("det", tg.linalg.det, ((3, 3),), np.linalg.det,
         make=lambda rng, dt, s: [(rng.standard_normal((3, 3)) + 2 * np.eye(3)).astype(dt)]),
    Spec("slogdet", lambda x: tg.linalg.slogdet(x)[1], ((2, 3, 3),),
         lambda x: np.linalg.slogdet(x)[1], covers=("logabsdet",),
         make=lambda rng, dt, s: [(rng.standard_normal((2, 3, 3)) + 2 * np.eye(3)).astype(dt)]),
    Spec("cholesky", lambda x: tg.linalg.cholesky(tg.matmul(x, x, transpose_b=True) + 3.0 *
                                                  tg.eye(3, dtype=x.dtype)), ((3, 3),),
         lambda x: np.linalg.cholesky(x @ x.T + 3 * np.eye(3))),
    Spec("diag_part_trace", lambda x: tg.linalg.trace(x) * tg.linalg.diag_part(x), ((3, 3),),
         lambda x: np.trace(x) * np.diag(x), covers=("getitem", "reduce_sum")),
    Spec("clip_by_norm", lambda x: tg.clip_by_norm(x, 1.0), ((3, 4),),
         lambda x: x / max(np.linalg.norm(x), 1.0)),
    Spec("global_norm", lambda x, y: tg.linalg.global_norm([x, y]), ((3,), (2, 2)),
         lambda x, y: np.sqrt((x ** 2).sum() + (y ** 2).sum())),
    Spec("band_part", lambda x: tg.linalg.band_part(x, 1, 0), ((2, 3, 4),),
         lambda x: np.triu(np.tril(x), -1)),
    Spec("diag", lambda d: tg.linalg.diag(d, k=1), ((2, 3),),
         lambda d: np.stack([np.diag(r, 1) for r in d])),
    Spec("diag_padded", lambda d: tg.linalg.diag(d, k=-1, num_cols=4, padding_value=1.5),
         ((3,),), lambda d: np.diag(d, -1) + 1.5 * (1 - np.eye(4, k=-1)), covers=("diag",)),
    Spec("triangular_solve", tg.linalg.triangular_solve, ((3, 3), (3, 2)),
         lambda a, b: np.linalg.solve(np.tril(a), b), make=_triangular_sample(())),
    Spec("triangular_solve_upper_adjoint", lambda a, b: tg.linalg.triangular_solve(
        a, b, lower=False, adjoint=True), ((2, 3, 3), (3, 2)),
        lambda a, b: np.linalg.solve(np.swapaxes(np.triu(a), -1, -2), b),
        make=_triangular_sample((2,)), covers=("triangular_solve",)),
    Spec("cholesky_solve", tg.linalg.cholesky_solve, ((3, 3), (2, 3, 2)),
         lambda c, b: np.linalg.solve(np.tril(c) @ np.tril(c).T, b),
         make=_triangular_sample((), (2,)), covers=("triangular_solve",)),
    # decompositions: functions of the factors that do not depend on the signs of singular
    # vectors or eigenvectors (numpy's and CuPy's choices differ)
    Spec("svd", lambda x: _svd_loss(x), ((4, 3),), lambda x: _svd_loss_ref(x),
         covers=("svd",)),
    Spec("svd_wide_batched", lambda x: _svd_loss(x), ((2, 3, 5),),
         lambda x: _svd_loss_ref(x), covers=("svd",)),
    Spec("svd_full", lambda x: _svd_loss(x, full=True), ((4, 3),),
         lambda x: _svd_loss_ref(x, full=True), covers=("svd",)),
    Spec("svd_full_wide", lambda x: _svd_loss(x, full=True), ((3, 4),),
         lambda x: _svd_loss_ref(x, full=True), covers=("svd",)),
    Spec("svd_values", lambda x: tg.linalg.svd(x, compute_uv=False), ((2, 3, 4),),
         lambda x: np.linalg.svd(x, compute_uv=False), covers=("svd",)),
    Spec("eigh", lambda x: _eigh_loss(x), ((2, 3, 3),), lambda x: _eigh_loss_ref(x),
         covers=("eigh",)),
    Spec("eigvalsh", tg.linalg.eigvalsh, ((2, 3, 3),), np.linalg.eigvalsh, covers=("eigh",)),
    Spec("qr", lambda x: tg.concat(tg.linalg.qr(x), axis=-2), ((4, 3),),
         lambda x: np.concatenate(np.linalg.qr(x), axis=-2)),
    Spec("qr_wide_batched", lambda x: tg.concat(tg.linalg.qr(x), axis=-1), ((2, 3, 5),),
         lambda x: np.concatenate(np.linalg.qr(x), axis=-1), covers=("qr",)),
    Spec("qr_full_square", lambda x: tg.concat(tg.linalg.qr(x, full_matrices=True), axis=-1),
         ((3, 3),), lambda x: np.concatenate(np.linalg.qr(x, "complete"), axis=-1),
         covers=("qr",)),
    Spec("pinv", tg.linalg.pinv, ((2, 4, 3),), np.linalg.pinv, covers=("svd",)),
    Spec("lstsq", tg.linalg.lstsq, ((5, 3), (5, 2)),
         lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0],
         covers=("cholesky", "triangular_solve", "matmul")),
    Spec("lstsq_wide_l2", lambda a, b: tg.linalg.lstsq(a, b, l2_regularizer=0.25),
         ((2, 3, 5), (2, 3, 2)),
         lambda a, b: np.swapaxes(a, -1, -2) @ np.linalg.solve(
             a @ np.swapaxes(a, -1, -2) + 0.25 * np.eye(3), b),
         covers=("cholesky", "triangular_solve", "matmul")),
    Spec("lstsq_svd_l2", lambda a, b: tg.linalg.lstsq(a, b, l2_regularizer=0.25, fast=False),
         ((5, 3), (5, 2)), lambda a, b: np.linalg.solve(a.T @ a + 0.25 * np.eye(3), a.T @ b),
         covers=("svd",)),
    Spec("expm", tg.linalg.expm, ((3, 3),), lambda x: _expm_ref(x), domain=(-0.6, 0.6)),
    Spec("expm_squared_batched", tg.linalg.expm, ((2, 3, 3),), lambda x: _expm_ref(x),
         make=lambda rng, dt, s: [(rng.uniform(-1, 1, s[0]) * [[[0.05]], [[2.5]]]).astype(dt)],
         covers=("expm",)),
    Spec("lu", lambda x: tg.linalg.lu(x).lu, ((2, 4, 4),), lambda x: _lu_ref(x)),
    Spec("lu_solve", lambda x, b: tg.linalg.lu_solve(*tg.linalg.lu(x), b), ((3, 3), (3, 2)),
         np.linalg.solve, covers=("lu", "triangular_solve", "matmul")),
    # -- nn --------------------------------------------------------------------------------------
    Spec("softmax", tg.nn.softmax, ((3, 4),), _softmax),
    Spec("softmax_axis0", lambda x: tg.nn.softmax(x, axis=0), ((3, 4),),
         lambda x: _softmax(x, 0), covers=("softmax",)),
    Spec("log_softmax", tg.nn.log_softmax, ((3, 4),), lambda x: np.log(_softmax(x))),
    Spec("sparse_xent", lambda z: tg.nn.sparse_softmax_cross_entropy_with_logits(
        labels=LABELS, logits=z), ((4, 5),),
        lambda z: -np.log(_softmax(z))[np.arange(4), LABELS],
        covers=("sparse_softmax_cross_entropy_with_logits",)),
    # its VJP by an inner tape: recorded by an outer tape, the cross-entropy's grad op
    Spec("sparse_xent_grad", _backward(lambda z: tg.nn.sparse_softmax_cross_entropy_with_logits(
        labels=LABELS, logits=z)), ((4,), (4, 5)),
        lambda g, z: g[:, None] * (_softmax(z) - np.eye(5)[LABELS]),
        covers=("sparse_softmax_cross_entropy_grad", "sparse_softmax_cross_entropy_with_logits")),
    Spec("softmax_xent", lambda y, z: tg.nn.softmax_cross_entropy_with_logits(y, z),
         ((3, 4), (3, 4)), lambda y, z: -(y * np.log(_softmax(z))).sum(-1),
         covers=("log_softmax", "reduce_sum")),
    Spec("sigmoid_xent", lambda y, z: tg.nn.sigmoid_cross_entropy_with_logits(y, z),
         ((3, 4), (3, 4)), lambda y, z: -(y * np.log(_sigmoid(z)) + (1 - y) *
                                         np.log(1 - _sigmoid(z))),
         make=lambda rng, dt, s: [rng.uniform(0, 1, s[0]).astype(dt),
                                  _away_from([0.0])(rng, dt, s[1:])[0]],
         covers=("relu", "log1p", "exp", "abs")),
    Spec("l2_loss", tg.nn.l2_loss, ((3, 4),), lambda x: (x ** 2).sum() / 2),
    Spec("bias_add", tg.nn.bias_add, ((3, 4), (4,)), np.add, covers=("add",)),
    Spec("bias_act_relu", lambda x, b: tg.nn.bias_act(x, b, "relu"), ((3, 4), (4,)),
         lambda x, b: np.maximum(x + b, 0), make=_away_from([0.0]), covers=("bias_act",)),
    Spec("bias_act_tanh", lambda x, b: tg.nn.bias_act(x, b, "tanh"), ((2, 3, 4), (4,)),
         lambda x, b: np.tanh(x + b), covers=("bias_act",)),
    Spec("bias_act_sigmoid", lambda x, b: tg.nn.bias_act(x, b, "sigmoid"), ((3, 4), (4,)),
         lambda x, b: 1 / (1 + np.exp(-(x + b))), covers=("bias_act",)),
    Spec("bias_act_elu", lambda x, b: tg.nn.bias_act(x, b, "elu"), ((3, 4), (4,)),
         lambda x, b: np.where(x + b > 0, x + b, np.expm1(x + b)), covers=("bias_act",),
         make=lambda rng, dt, s: [_away_from([0.0])(rng, dt, s[:1])[0],
                                  np.zeros(4, dt)]),
    # recurrent cells: the state axis first (h; c), gates in Keras' order
    Spec("lstm_cell", lambda x, h, b, c: tg.stack(tg.nn.lstm_cell(x, h, b, c)),
         ((3, 8), (3, 8), (8,), (3, 2)), lambda x, h, b, c: _lstm_ref(x + b + h, c),
         covers=("lstm_cell",)),
    Spec("gru_cell", tg.nn.gru_cell, ((3, 6), (3, 6), (2, 6), (3, 2)), _gru_ref),
    Spec("batch_normalization", lambda x, m, v, o, s: tg.nn.batch_normalization(
        x, m, v, o, s, 1e-3), ((5, 4), (4,), (4,), (4,), (4,)),
        lambda x, m, v, o, s: (x - m) / np.sqrt(v + 1e-3) * s + o,
        make=lambda rng, dt, s: [rng.standard_normal(s[0]).astype(dt),
                                 rng.standard_normal(4).astype(dt),
                                 rng.uniform(0.5, 2, 4).astype(dt),
                                 rng.standard_normal(4).astype(dt),
                                 rng.standard_normal(4).astype(dt)],
        covers=("rsqrt", "subtract", "multiply", "add")),
    Spec("is_nan", tg.math.is_nan, (U,), np.isnan, grad=False,
         make=lambda rng, dt, shapes: [np.array([[np.nan, 1.0], [np.inf, -np.inf]], dt)]),
    Spec("is_inf", tg.math.is_inf, (U,), np.isinf, grad=False,
         make=lambda rng, dt, shapes: [np.array([[np.nan, 1.0], [np.inf, -np.inf]], dt)]),
    Spec("is_finite", tg.math.is_finite, (U,), np.isfinite, grad=False,
         make=lambda rng, dt, shapes: [np.array([[np.nan, 1.0], [np.inf, -np.inf]], dt)]),
    Spec("l2_normalize", lambda x: tg.math.l2_normalize(x, axis=-1), ((3, 4),),
         lambda x: x / np.sqrt((x * x).sum(-1, keepdims=True)),
         covers=("maximum", "rsqrt", "reduce_sum")),
    Spec("matvec", tg.linalg.matvec, ((2, 3, 4), (4,)), lambda a, b: a @ b,
         covers=("matmul",)),
    Spec("clip_by_global_norm", lambda x, y: tg.clip_by_global_norm([x, y], 1.5)[0][0] * 2.0 +
         tg.clip_by_global_norm([x, y], 1.5)[0][1], (U, U),
         lambda x, y: (2 * x + y) * 1.5 / max(np.sqrt((x * x).sum() + (y * y).sum()), 1.5),
         covers=("minimum", "reduce_sum")),
    Spec("sort", lambda x: tg.sort(x, axis=0), ((5, 3),), lambda x: np.sort(x, 0),
         covers=("take_along", "put_along", "argsort")),
    Spec("sort_descending", lambda x: tg.sort(x, direction="DESCENDING"), ((3, 5),),
         lambda x: -np.sort(-x, -1), covers=("take_along",)),
    Spec("top_k", lambda x: tg.math.top_k(x, k=2).values, ((3, 5),),
         lambda x: -np.sort(-x, -1)[..., :2], covers=("take_along",)),
    Spec("gather_nd", lambda x: tg.gather_nd(x, [[1, 0], [2, 3], [1, 0]]), ((3, 4),),
         lambda x: x[[1, 2, 1], [0, 3, 0]], covers=("getitem",)),
    Spec("boolean_mask", lambda x: tg.boolean_mask(x, MASK), ((3, 4),), lambda x: x[MASK],
         covers=("getitem",)),
    Spec("unsorted_segment_sum", lambda x: tg.math.unsorted_segment_sum(x, [2, 0, 2], 4),
         ((3, 4),), lambda x: np.stack([x[1], 0 * x[0], x[0] + x[2], 0 * x[0]])),
    Spec("unsorted_segment_mean", lambda x: tg.math.unsorted_segment_mean(x, [2, 0, 2], 3),
         ((3, 4),), lambda x: np.stack([x[1], 0 * x[0], (x[0] + x[2]) / 2]),
         covers=("unsorted_segment_sum",)),
    Spec("unsorted_segment_max", lambda x: tg.math.unsorted_segment_max(x, [1, 0, 1], 2),
         ((3, 4),), lambda x: np.stack([x[1], np.maximum(x[0], x[2])])),
    Spec("unsorted_segment_min", lambda x: tg.math.unsorted_segment_min(x, [1, 0, 1], 2),
         ((3, 4),), lambda x: np.stack([x[1], np.minimum(x[0], x[2])])),
    Spec("segment_sum", lambda x: tg.math.segment_sum(x, [0, 0, 1]), ((3, 4),),
         lambda x: np.stack([x[0] + x[1], x[2]]), covers=("unsorted_segment_sum",)),
    # the mask is the device's own draw for the op seed (a GPU draws other numbers than numpy)
    Spec("dropout", lambda x: _first_dropout(x, 0.5, 3), ((4, 5),),
         lambda x: x * _dropout_mask(x.shape, x.dtype, 0.5, 3)),
    Spec("lgamma", tg.math.lgamma, ((3, 4),), lambda x: np.vectorize(math.lgamma)(x),
         make=_away_from([0.0, -1.0, -2.0, -3.0], 0.3)),
    Spec("digamma", tg.math.digamma, ((3, 4),), lambda x: _digamma_ref(x),
         make=_away_from([0.0, -1.0, -2.0, -3.0], 0.3), covers=("polygamma",)),
    Spec("polygamma", lambda x: tg.math.polygamma(1, x), ((3, 4),),
         lambda x: _trigamma_ref(x), domain=(0.3, 6.0)),
    Spec("cumulative_logsumexp", lambda x: tg.math.cumulative_logsumexp(x, axis=1), ((3, 4),),
         lambda x: np.log(np.cumsum(np.exp(x), 1))),
    # exp of it: the exclusive scan's first element is -inf (exp: 0, which differences can see)
    Spec("cumulative_logsumexp_exclusive_reverse", lambda x: tg.exp(tg.math.cumulative_logsumexp(
        x, exclusive=True, reverse=True)), ((4, 3),),
        lambda x: np.flip(np.cumsum(np.flip(np.exp(x), 0), 0), 0) - np.exp(x),
        covers=("cumulative_logsumexp", "exp")),
    Spec("scatter_nd", lambda u: tg.scatter_nd([[1, 0], [2, 3], [1, 0]], u, [3, 4]), ((3,),),
         lambda u: _scatter_ref(np.zeros((3, 4), u.dtype), [[1, 0], [2, 3], [1, 0]], u, np.add),
         covers=("getitem_grad",)),
    Spec("scatter_nd_slices", lambda u: tg.scatter_nd([[2], [0]], u, [3, 4]), ((2, 4),),
         lambda u: _scatter_ref(np.zeros((3, 4), u.dtype), [[2], [0]], u, np.add),
         covers=("getitem_grad",)),
    Spec("tensor_scatter_nd_add", lambda x, u: tg.tensor_scatter_nd_add(x, [[1], [1]], u),
         ((3, 4), (2, 4)), lambda x, u: _scatter_ref(x, [[1], [1]], u, np.add),
         covers=("getitem_grad", "add")),
    Spec("tensor_scatter_nd_sub", lambda x, u: tg.tensor_scatter_nd_sub(x, [[0, 2]], u),
         ((3, 4), (1,)), lambda x, u: _scatter_ref(x, [[0, 2]], -u, np.add),
         covers=("getitem_grad", "subtract")),
    Spec("tensor_scatter_nd_update", lambda x, u: tg.tensor_scatter_nd_update(
        x, [[2], [0], [2]], u), ((3, 4), (3, 4)),
        lambda x, u: _scatter_ref(x, [[2], [0], [2]], u, None),
        covers=("getitem_grad", "where", "gather")),
    Spec("tensor_scatter_nd_max", lambda x, u: tg.tensor_scatter_nd_max(x, [[2], [0], [2]], u),
         ((3, 4), (3, 4)), lambda x, u: _scatter_ref(x, [[2], [0], [2]], u, np.maximum),
         covers=("unsorted_segment_max", "maximum", "where")),
    Spec("tensor_scatter_nd_min", lambda x, u: tg.tensor_scatter_nd_min(x, [[1, 1], [0, 3]], u),
         ((3, 4), (2,)), lambda x, u: _scatter_ref(x, [[1, 1], [0, 3]], u, np.minimum),
         covers=("unsorted_segment_min", "minimum", "where")),
    Spec("embedding_lookup", lambda a, b: tg.nn.embedding_lookup([a, b], [[3, 0], [1, 3]]),
         ((2, 3), (2, 3)), lambda a, b: np.concatenate([a, b])[[[3, 0], [1, 3]]],
         covers=("gather", "concat")),
    Spec("embedding_lookup_max_norm", lambda p: tg.nn.embedding_lookup(p, [2, 0, 2],
                                                                       max_norm=1.5),
         ((3, 4),), lambda p: _clip_rows(p[[2, 0, 2]], 1.5), covers=("gather", "maximum")),
    Spec("searchsorted", lambda s, v: tg.searchsorted(s, v, side="right"), ((2, 5), (2, 3)),
         lambda s, v: np.stack([np.searchsorted(r, w, side="right") for r, w in zip(s, v)]),
         grad=False, make=lambda rng, dt, shapes: [np.sort(rng.uniform(-2, 2, shapes[0]), -1)
                                                   .astype(dt), rng.uniform(-3, 3, shapes[1])
                                                   .astype(dt)], extra={"out_dtype": np.int32}),
    Spec("unique", lambda x: tg.unique(tg.math.floor(x)).y, ((7,),),
         lambda x: _unique_ref(np.floor(x)), grad=False, covers=("unique", "floor")),
    Spec("unique_idx", lambda x: tg.unique(tg.math.floor(x), out_idx=tg.int64).idx, ((7,),),
         lambda x: np.array([_unique_ref(np.floor(x)).tolist().index(v) for v in np.floor(x)]),
         grad=False, covers=("unique", "floor")),
    # -- convolution and pooling ---------------------------------------------------------------
    Spec("conv2d_same_strided", lambda x, w: tg.nn.conv2d(x, w, [1, 2, 1, 1], "SAME"),
         ((2, 5, 4, 3), (3, 2, 3, 4)), lambda x, w: _conv_ref(x, w, (2, 1), ((1, 1), (0, 1))),
         covers=("conv", "transpose")),
    Spec("conv2d_nchw_groups_dilated", lambda x, w: tg.nn.conv2d(
        x, w, 1, "VALID", data_format="NCHW", dilations=2), ((1, 4, 5, 6), (2, 2, 2, 6)),
        _nchw(lambda x, w: _conv_ref(x, w, (1, 1), ((0, 0), (0, 0)), (2, 2))),
        covers=("conv", "transpose")),
    Spec("conv2d_explicit", lambda x, w: tg.nn.conv2d(x, w, 2, [[0, 0], [1, 0], [2, 1], [0, 0]]),
         ((1, 4, 4, 2), (3, 3, 2, 2)), lambda x, w: _conv_ref(x, w, (2, 2), ((1, 0), (2, 1))),
         covers=("conv",)),
    Spec("conv1d", lambda x, w: tg.nn.conv1d(x, w, 2, "SAME"), ((2, 7, 2), (3, 2, 3)),
         lambda x, w: _conv_ref(x, w, (2,), ((1, 1),)), covers=("conv",)),
    Spec("conv3d", lambda x, w: tg.nn.conv3d(x, w, [1, 1, 1, 1, 1], "SAME"),
         ((1, 3, 3, 2, 2), (2, 2, 2, 2, 2)),
         lambda x, w: _conv_ref(x, w, (1, 1, 1), ((0, 1), (0, 1), (0, 1))), covers=("conv",)),
    Spec("depthwise_conv2d", lambda x, w: tg.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "VALID"),
         ((1, 4, 3, 2), (2, 2, 2, 2)),
         lambda x, w: _conv_ref(x, w.reshape(2, 2, 1, 4), (1, 1), ((0, 0), (0, 0))),
         covers=("conv", "reshape")),
    Spec("conv2d_transpose", lambda x, w: tg.nn.conv2d_transpose(x, w, (2, 5, 5, 4), 2),
         ((2, 3, 3, 2), (3, 3, 4, 2)),
         lambda x, w: _transpose_ref(x, w, (5, 5), (2, 2), ((1, 1), (1, 1))),
         covers=("conv_backprop_input",)),
    Spec("conv2d_filter_grad", lambda x, u: _inner_grad(
        lambda x, w: tg.nn.conv2d(x, w, 1, "VALID"), 1)(x, tg.constant(_W_FIXED.astype(
            x.dtype.as_numpy_dtype)), u), ((2, 4, 3, 3), (2, 3, 2, 4)),
        lambda x, u: _conv_filter_grad_ref(x, u, (2, 2, 3, 4), (1, 1), ((0, 0), (0, 0))),
        covers=("conv", "conv_backprop_filter", "conv_backprop_input")),
    # -- attention -----------------------------------------------------------------------------
    Spec("sdpa", lambda q, k, v: tg.nn.scaled_dot_product_attention(q, k, v),
         ((2, 3, 2, 4), (2, 5, 2, 4), (2, 5, 2, 4)),
         lambda q, k, v: _attention_ref(q, k, v, 0.5, False), covers=("sdpa",)),
    Spec("sdpa_causal_scaled", lambda q, k, v: tg.nn.scaled_dot_product_attention(
        q, k, v, scale=0.7, is_causal=True), ((1, 4, 3, 2), (1, 4, 3, 2), (1, 4, 3, 2)),
        lambda q, k, v: _attention_ref(q, k, v, 0.7, True), covers=("sdpa",)),
    Spec("max_pool2d_same", lambda x: tg.nn.max_pool2d(x, 3, 2, "SAME"), ((2, 5, 4, 3),),
         lambda x: _pool_ref(x, (3, 3), (2, 2), ((1, 1), (0, 1)), "MAX"),
         covers=("max_pool",)),
    Spec("max_pool1d_explicit", lambda x: tg.nn.max_pool1d(x, 2, 2, [[0, 0], [1, 0], [0, 0]]),
         ((2, 5, 3),), lambda x: _pool_ref(x, (2,), (2,), ((1, 0),), "MAX"),
         covers=("max_pool",)),
    Spec("max_pool3d_ncdhw", lambda x: tg.nn.max_pool3d(x, 2, 1, "VALID", "NCDHW"),
         ((1, 2, 3, 3, 2),),
         _nchw(lambda x: _pool_ref(x, (2, 2, 2), (1, 1, 1), ((0, 0),) * 3, "MAX")),
         covers=("max_pool", "transpose")),
    # gradient x input (a saliency map): the gradient is piecewise constant in x
    Spec("max_pool_grad", lambda x, u: x * _inner_grad(
        lambda x: tg.nn.max_pool2d(x, 2, 2, "SAME"), 0)(x, u), ((2, 5, 3, 2), (2, 3, 2, 2)),
        lambda x, u: x * _max_pool_grad_ref(x, u, (2, 2), (2, 2), ((0, 1), (0, 1))),
        covers=("max_pool", "max_pool_grad", "max_pool_grad_grad")),
    Spec("avg_pool2d_same", lambda x: tg.nn.avg_pool2d(x, [2, 3], 2, "SAME"), ((2, 5, 4, 3),),
         lambda x: _pool_ref(x, (2, 3), (2, 2), ((0, 1), (0, 1)), "AVG"),
         covers=("avg_pool",)),
    Spec("avg_pool1d", lambda x: tg.nn.avg_pool1d(x, 3, 1, "SAME"), ((2, 5, 3),),
         lambda x: _pool_ref(x, (3,), (1,), ((1, 1),), "AVG"), covers=("avg_pool",)),
    Spec("avg_pool3d", lambda x: tg.nn.avg_pool3d(x, 2, 2, "VALID"), ((1, 4, 2, 3, 2),),
         lambda x: _pool_ref(x, (2, 2, 2), (2, 2, 2), ((0, 0),) * 3, "AVG"),
         covers=("avg_pool",)),
    Spec("avg_pool_grad", lambda u: _inner_grad(lambda x: tg.nn.avg_pool2d(x, 3, 2, "SAME"), 0)(
        tg.zeros((1, 5, 4, 2), dtype=u.dtype), u), ((1, 3, 2, 2),),
        lambda u: _avg_pool_grad_ref(np.zeros((1, 5, 4, 2), u.dtype), u),
        covers=("avg_pool", "avg_pool_grad")),
    Spec("pool_dilated", lambda x: tg.nn.pool(x, [2, 2], "MAX", padding="SAME", dilations=2) +
         tg.nn.pool(x, [2, 2], "AVG", padding="SAME", dilations=2), ((1, 5, 4, 2),),
         lambda x: _pool_ref(x, (2, 2), (1, 1), ((1, 1), (1, 1)), "MAX", (2, 2)) +
         _pool_ref(x, (2, 2), (1, 1), ((1, 1), (1, 1)), "AVG", (2, 2)),
         covers=("max_pool", "avg_pool", "add")),

    # -- image -----------------------------------------------------------------------------------
    Spec("resize_bilinear", lambda x: tg.image.resize(x, [5, 3]), ((2, 3, 4, 2),),
         lambda x: _tf_resize_bilinear(x, 5, 3), covers=("einsum",)),
    Spec("resize_bilinear_3d", lambda x: tg.image.resize(x, [2, 7]), ((3, 4, 1),),
         lambda x: _tf_resize_bilinear(x, 2, 7), covers=("einsum", "reshape")),
    Spec("resize_bicubic", lambda x: tg.image.resize(x, [7, 3], method="bicubic"),
         ((1, 4, 5, 2),), lambda x: _tf_resize_bicubic(x, 7, 3), covers=("einsum",)),
    Spec("resize_nearest", lambda x: tg.image.resize(x, [5, 2], method="nearest"),
         ((2, 3, 4, 1),), lambda x: _tf_resize_nearest(x, 5, 2), covers=("gather",)),
    Spec("resize_with_pad", lambda x: tg.image.resize_with_pad(x, 6, 5), ((2, 4, 3, 2),),
         lambda x: _tf_resize_with_pad(x, 6, 5),
         covers=("einsum", "pad")),
    Spec("adjust_contrast", lambda x, f: tg.image.adjust_contrast(x, f), ((2, 3, 4, 2), ()),
         _tf_adjust_contrast, covers=("reduce_mean", "subtract", "multiply", "add")),
    Spec("convert_image_dtype", lambda x: tg.image.convert_image_dtype(
        tg.image.convert_image_dtype(x, tg.float32), x.dtype) * x, (U,),
        lambda x: x.astype(np.float32).astype(x.dtype) * x, covers=("cast",), atol=1e-4,
        extra={"h": 1e-2, "rel": 1e-5}),
    Spec("convert_image_dtype_uint8", lambda x: tg.image.convert_image_dtype(x, tg.uint8), (U,),
         lambda x: (x * 255.5).astype(np.uint8), domain=(0.0, 1.0), grad=False,
         covers=("convert_image_dtype",)),
    Spec("linspace", lambda a, b: tg.linspace(a, b, 5, axis=-1), ((3,), (2, 1)),
         lambda a, b: np.linspace(a, b, 5, axis=-1)),
    Spec("where_indices", lambda x: tg.where(x > 0.0), ((3, 4),), lambda x: np.argwhere(x > 0),
         grad=False, covers=("where_indices", "greater")),
    Spec("count_true", lambda x: tg.function(lambda c: tg.where(c))(x > 0.0), ((3, 4),),
         lambda x: np.argwhere(x > 0), grad=False, covers=("count_true", "where_indices")),
    Spec("slogdet_sign", lambda x: tg.linalg.slogdet(x)[0], ((2, 3, 3),),
         lambda x: np.linalg.slogdet(x)[0], grad=False, covers=("det_sign",)),
]

BY_NAME = {s.name: s for s in SPECS}


def covered_ops(spec):
    names = set(spec.covers)
    fn = spec.fn
    op = getattr(fn, "op", None)
    if op is not None:
        names.add(op.name)
    if not spec.covers and op is None:
        names.add(spec.name)
    from tapegpu.ops.registry import REGISTRY  # an op's residuals are computed by its spec too
    return names | {r.name for n in names if n in REGISTRY for r in REGISTRY[n].residual_ops}


def sample(spec, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if spec.make is not None:
        return spec.make(rng, dtype, spec.shapes)
    lo, hi = spec.domain
    return [rng.uniform(lo, hi, size=s).astype(dtype) for s in spec.shapes]
