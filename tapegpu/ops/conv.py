"""Convolution and pooling: tf.nn.conv1d/conv2d/conv3d/convolution, conv2d_transpose,
depthwise_conv2d, max/avg pooling in 1, 2 and 3 spatial dimensions, and tf.nn.pool.

Every op works on channels-last arrays with any number of spatial dimensions (1, 2 or 3 from the
public functions) and any leading axes: `x` is `(..., *spatial, channels)`, a filter
`(*kernel, in_channels / groups, out_channels)`. Channels-first inputs are transposed to
channels-last and back by the public functions.

Convolution is three bilinear ops that are each other's transposes:

* `conv(x, w)`: im2col (a strided window view of the padded input) and one matmul per group;
* `conv_backprop_input(g, w)` (the transposed convolution): one matmul, then col2im (the columns
  added into the padded input, one strided slice per kernel tap);
* `conv_backprop_filter(x, g)` (the correlation of the input with the output gradient): im2col
  and one matmul.

The VJPs and JVPs of each are the other two (and itself), so gradients of any order stay in these
ops. A cotangent with leading batch axes folds into the leading axes of an input-shaped argument;
a batch of filters folds into the channel axis, grouped so that each group still sees its own
channels (`_fold`/`_unfold`).

Pooling: `max_pool` keeps the index of each window's maximum (its first occurrence, as
TensorFlow's CPU kernels) as a residual. A NaN anywhere in a window is the window's maximum and
takes its gradient (the first NaN, as PyTorch): TensorFlow's kernels skip NaN in the forward
(on the CPU and, unless TF_ENABLE_MAXPOOL_NANPROP is set, on GPUs), so a NaN input can vanish
from the loss, and send the gradient to the NaN's position anyway; `max_pool_grad` scatters a cotangent to those positions
and `max_pool_grad_grad` gathers from them: these two are each other's transposes.
`avg_pool` and `avg_pool_grad` are linear and each other's transposes; with SAME padding, a
window's mean is over its valid (unpadded) elements, as in TensorFlow.

On the `numpy` backend, where tapegpu/backends/_cpu.c is built, ungrouped float convolutions
run im2col/col2im in C with the matmuls over cache-sized blocks of rows (a 3x3 stride-1 2-D
forward and filter gradient with 32 or more input channels, and its input gradient with 32 or
more output channels, at any SAME, VALID or explicit padding up to 2: Winograd F(2x2, 3x3)
tiles instead), and max_pool and max_pool_grad are one pass in C (`_cpu_*` below); the functions
above are the reference they are tested against and what every other case and backend runs.

On the `cuda` backend the three ops run through cuDNN where the optional `cudnn` module is
installed and takes the case (tapegpu/backends/cudnn.py: float32, float16, bfloat16; 1-, 2-
and 3-D, any strides, dilations, padding and groups cuDNN supports); elsewhere the im2col
reference runs on CuPy and cuBLAS.
"""
import math

import numpy as np

from ..backends import cpu_kernels
from ..backends import cudnn
from ..core.tensor import Tensor, convert_to_tensor
from .registry import InvalidArgumentError, def_op
from . import batching
from ._base import apply, floating, public
from .shape import reshape, transpose

# -- array helpers (forwards only) -----------------------------------------------------------------


def _spatial_slices(offsets, dilations, counts, strides):
    """Index of the inputs that kernel tap `offsets` meets, one per output position."""
    return (Ellipsis,) + tuple(slice(o * d, o * d + (n - 1) * s + 1, s) for o, d, n, s in
                               zip(offsets, dilations, counts, strides)) + (slice(None),)


def _pad(xp, x, pads, value=0):
    if not any(lo or hi for lo, hi in pads):
        return x
    width = [(0, 0)] * (x.ndim - len(pads) - 1) + [tuple(p) for p in pads] + [(0, 0)]
    return xp.pad(x, width, constant_values=value)


def _windows(xp, xpad, ksize, strides, dilations):
    """The view (..., *out, C, *ksize) of the windows of a padded input (no copy)."""
    nd = len(ksize)
    eff = tuple((k - 1) * d + 1 for k, d in zip(ksize, dilations))
    axes = tuple(range(xpad.ndim - nd - 1, xpad.ndim - 1))
    win = xp.lib.stride_tricks.sliding_window_view(xpad, eff, axis=axes)
    return win[(Ellipsis,) + tuple(slice(None, None, s) for s in strides) + (slice(None),) +
               tuple(slice(None, None, d) for d in dilations)]


def _crop(dx, pads, spatial):
    if not any(lo or hi for lo, hi in pads):
        return dx
    return dx[(Ellipsis,) + tuple(slice(lo, lo + n) for (lo, _), n in zip(pads, spatial)) +
              (slice(None),)]


def _padded(spatial, pads):
    return tuple(n + lo + hi for n, (lo, hi) in zip(spatial, pads))


def _filter_matrix(w, groups):
    """(*k, cin_g, cout) -> (groups, cin_g * K, cout_g), rows ordered (cin_g, *k) as im2col's."""
    nd = w.ndim - 2
    cin_g, cout = w.shape[-2:]
    w = w.reshape(w.shape[:-1] + (groups, cout // groups))
    w = w.transpose((nd + 1, nd) + tuple(range(nd)) + (nd + 2,))
    return w.reshape(groups, cin_g * math.prod(w.shape[2:-1]), cout // groups)


def _conv_forward(xp, x, w, strides, dilations, pads):
    nd = len(strides)
    ksize, (cin_g, cout) = w.shape[:nd], w.shape[-2:]
    groups = x.shape[-1] // cin_g
    cols = _windows(xp, _pad(xp, x, pads), ksize, strides, dilations)  # (..., *out, C, *k)
    lead = cols.shape[:-nd - 1]
    a = cols.reshape(math.prod(lead), groups, cin_g * math.prod(ksize))
    b = _filter_matrix(w, groups)
    if groups == 1:
        return xp.matmul(a[:, 0], b[0]).reshape(lead + (cout,))
    return xp.matmul(a.transpose(1, 0, 2), b).transpose(1, 0, 2).reshape(lead + (cout,))


def _conv_input_forward(xp, g, w, in_shape, strides, dilations, pads):
    """The transposed convolution: g (..., *out, cout) -> (..., *in_shape)."""
    nd = len(strides)
    ksize, (cin_g, cout) = w.shape[:nd], w.shape[-2:]
    spatial, c = in_shape[:-1], in_shape[-1]
    groups = c // cin_g
    taps = math.prod(ksize)
    lead, out = g.shape[:-nd - 1], g.shape[-nd - 1:-1]
    gm = g.reshape(-1, groups, cout // groups)
    # columns ordered (tap, group, cin_g): each tap's slice is a (rows, c) matrix with
    # contiguous channels, added into the padded input by one strided add
    b = w.reshape(taps, cin_g, groups, cout // groups).transpose(2, 3, 0, 1)
    if groups == 1:
        cols = xp.matmul(gm[:, 0], b[0].reshape(cout, taps * cin_g))
    else:
        cols = xp.matmul(gm.transpose(1, 0, 2), b.reshape(groups, cout // groups, -1))
        cols = cols.reshape(groups, -1, taps, cin_g).transpose(1, 2, 0, 3)
    cols = xp.ascontiguousarray(cols).reshape(-1, taps, c)
    dx = xp.zeros(lead + _padded(spatial, pads) + (c,), dtype=g.dtype)
    for i, offsets in enumerate(np.ndindex(*ksize)):
        dx[_spatial_slices(offsets, dilations, out, strides)] += cols[:, i].reshape(
            lead + out + (c,))
    return _crop(dx, pads, spatial)


def _conv_filter_forward(xp, x, g, w_shape, strides, dilations, pads):
    """The filter gradient: sum over every leading and output position of window x cotangent."""
    nd = len(strides)
    ksize, (cin_g, cout) = tuple(w_shape[:nd]), w_shape[-2:]
    groups = x.shape[-1] // cin_g
    cols = _windows(xp, _pad(xp, x, pads), ksize, strides, dilations)
    a = cols.reshape(-1, groups, cin_g * math.prod(ksize))
    gm = g.reshape(-1, groups, cout // groups)
    if groups == 1:
        dw = xp.matmul(a[:, 0].T, gm[:, 0])[None]
    else:
        dw = xp.matmul(a.transpose(1, 2, 0), gm.transpose(1, 0, 2))
    dw = dw.reshape((groups, cin_g) + ksize + (cout // groups,))
    dw = dw.transpose(tuple(range(2, nd + 2)) + (1, 0, nd + 2))
    return dw.reshape(tuple(w_shape))


# -- batch folding in rules (computed with `ops`) --------------------------------------------------

def _fold(ops, v, nb, axis, groups):
    """A value with `nb` leading batch axes, its batch moved into channel axis `axis` (-1 or -2)
    as (groups, batch, channels / groups): a grouped convolution then treats each batch entry as
    more channels of the same group."""
    shape = v.shape
    bsize = math.prod(shape[:nb])
    rest = shape[nb:]
    n = len(rest)
    ax = n + axis
    c = rest[ax]
    v = ops.reshape(v, (bsize,) + rest[:ax] + (groups, c // groups) + rest[ax + 1:])
    # axes: 0 batch, 1..ax the axes before, ax+1 group, ax+2 channel-in-group, then the rest
    perm = tuple(range(1, ax + 2)) + (0,) + tuple(range(ax + 2, n + 2))
    v = ops.transpose(v, perm)
    return ops.reshape(v, rest[:ax] + (groups * bsize * (c // groups),) + rest[ax + 1:])


def _unfold(ops, v, batch, axis, groups):
    """The inverse of `_fold` on a result: its channel axis `axis` (groups, batch, c) becomes
    leading batch axes `batch`."""
    shape = v.shape
    n = len(shape)
    ax = n + axis
    bsize = math.prod(batch)
    c = shape[ax] // (groups * bsize)
    v = ops.reshape(v, shape[:ax] + (groups, bsize, c) + shape[ax + 1:])
    perm = (ax + 1,) + tuple(range(ax + 1)) + tuple(range(ax + 2, n + 2))
    v = ops.transpose(v, perm)
    return ops.reshape(v, tuple(batch) + shape[:ax] + (groups * c,) + shape[ax + 1:])


def _groups(x_channels, w_shape):
    return x_channels // w_shape[-2]


def _conv_b(ops, x, w, nbw, **p):
    """conv(x, w) for x with any leading axes and w with `nbw` leading batch axes."""
    if nbw == 0:
        return ops.op("conv", x, w, **p)
    groups = _groups(x.shape[-1], w.shape[nbw:])
    y = ops.op("conv", x, _fold(ops, w, nbw, -1, groups), **p)
    return _unfold(ops, y, w.shape[:nbw], -1, groups)


def _input_b(ops, g, w, nbw, in_shape, **p):
    """conv_backprop_input(g, w) for g with any leading axes, w with `nbw` batch axes."""
    if nbw == 0:
        return ops.op("conv_backprop_input", g, w, in_shape=in_shape, **p)
    groups = _groups(in_shape[-1], w.shape[nbw:])
    wf = _fold(ops, w, nbw, -2, 1)  # (..., (batch, cin_g), cout): batch inside each group
    bsize = math.prod(w.shape[:nbw])
    folded = tuple(in_shape[:-1]) + (in_shape[-1] * bsize,)
    dx = ops.op("conv_backprop_input", g, wf, in_shape=folded, **p)
    return _unfold(ops, dx, w.shape[:nbw], -1, groups)


def _filter_b(ops, x, g, w_shape, nbx=0, nbg=0, **p):
    """conv_backprop_filter(x, g) with `nbx` batch axes on x or `nbg` on g."""
    groups = _groups(x.shape[-1], w_shape)
    cin_g, cout = w_shape[-2:]
    if nbx:
        bsize = math.prod(x.shape[:nbx])
        xf = _fold(ops, x, nbx, -1, groups)
        dw = ops.op("conv_backprop_filter", xf, g,
                    w_shape=tuple(w_shape[:-2]) + (bsize * cin_g, cout), **p)
        return _unfold(ops, dw, x.shape[:nbx], -2, 1)
    if nbg:
        bsize = math.prod(g.shape[:nbg])
        gf = _fold(ops, g, nbg, -1, groups)
        dw = ops.op("conv_backprop_filter", x, gf,
                    w_shape=tuple(w_shape[:-1]) + (bsize * cout,), **p)
        return _unfold(ops, dw, g.shape[:nbg], -1, groups)
    return ops.op("conv_backprop_filter", x, g, w_shape=tuple(w_shape), **p)


# conv(x, w) = y:  dx = conv_backprop_input(g, w),  dw = conv_backprop_filter(x, g);  bilinear,
# so its JVP is conv(tx, w) + conv(x, tw)
def _conv_vjp_x(ops, g, x, w, **p):
    nd = len(p["strides"])
    return ops.op("conv_backprop_input", g, w, in_shape=tuple(x.shape[-nd - 1:]), **p)


def _conv_vjp_w(ops, g, x, w, **p):
    return _filter_b(ops, x, g, w.shape, nbg=g.ndim - x.ndim, **p)


def _sum(a, b):
    return b if a is None else (a if b is None else a + b)


def _conv_jvp(ops, ts, x, w, **p):
    tx, tw = ts
    return _sum(None if tx is None else ops.op("conv", tx, w, **p),
                None if tw is None else _conv_b(ops, x, tw, tw.ndim - w.ndim, **p))


# conv_backprop_input(g, w) = dx, the transpose of conv(., w):  its VJP for a cotangent h of dx
# is conv(h, w) for g and conv_backprop_filter(h, g) for w
def _input_vjp_g(ops, h, g, w, in_shape, **p):
    return ops.op("conv", h, w, **p)


def _input_vjp_w(ops, h, g, w, in_shape, **p):
    return _filter_b(ops, h, g, w.shape, nbx=h.ndim - g.ndim, **p)


def _input_jvp(ops, ts, g, w, in_shape, **p):
    tg_, tw = ts
    return _sum(None if tg_ is None else
                ops.op("conv_backprop_input", tg_, w, in_shape=in_shape, **p),
                None if tw is None else _input_b(ops, g, tw, tw.ndim - w.ndim, in_shape, **p))


# conv_backprop_filter(x, g) = dw:  for a cotangent h of dw, conv_backprop_input(g, h) for x and
# conv(x, h) for g
def _filter_vjp_x(ops, h, x, g, w_shape, **p):
    nd = len(p["strides"])
    return _input_b(ops, g, h, h.ndim - len(w_shape), tuple(x.shape[-nd - 1:]), **p)


def _filter_vjp_g(ops, h, x, g, w_shape, **p):
    return _conv_b(ops, x, h, h.ndim - len(w_shape), **p)


def _filter_jvp(ops, ts, x, g, w_shape, **p):
    tx, tg_ = ts
    return _sum(None if tx is None else
                _filter_b(ops, tx, g, w_shape, nbx=tx.ndim - x.ndim, **p),
                None if tg_ is None else
                _filter_b(ops, x, tg_, w_shape, nbg=tg_.ndim - g.ndim, **p))


# -- CPU kernels (numpy backend; tapegpu/backends/_cpu.c) ------------------------------------------
#
# The same three ops with im2col/col2im in C and the matmuls over blocks of rows small enough for
# the columns to stay in cache: a block's columns are written, then read once by one matmul, and
# the buffer is reused for the next block. Columns are ordered (tap, channel), so the filter
# (*k, cin, cout) is already the matrix (taps * cin, cout). A 3x3 stride-1 2-D forward and filter
# gradient with many input channels use Winograd F(2x2, 3x3) instead (the filter gradient as the
# forward's adjoint), over blocks of tiles; so does the input gradient with many output channels
# (a forward of the output gradient with the flipped filter). Ungrouped float32/float64 only;
# every other case is the reference's (the kernels return NotImplemented).

_CPU_CONV = cpu_kernels is not None and hasattr(cpu_kernels, "im2col")
_BLOCK_BYTES = 1 << 19  # one block of columns: half a MiB


def _geom(c, spatial, out, ksize, strides, dilations, pads):
    """The kernels' geometry tuple: C, then in, out, ksize, strides, dilations and low pads,
    each as 3 spatial axes (leading ones of size 1)."""
    def three(vals, fill):
        return (fill,) * (3 - len(vals)) + tuple(int(v) for v in vals)
    return ((int(c),) + three(spatial, 1) + three(out, 1) + three(ksize, 1) + three(strides, 1) +
            three(dilations, 1) + three([lo for lo, _ in pads], 0))


def _out_spatial(spatial, ksize, strides, dilations, pads):
    return tuple((n + lo + hi - (k - 1) * d - 1) // s + 1 for n, k, s, d, (lo, hi) in
                 zip(spatial, ksize, strides, dilations, pads))


def _native(xp, *arrays):
    """Whether the C kernels take these arrays: numpy float32/float64 of one dtype."""
    dt = arrays[0].dtype
    return _CPU_CONV and xp is np and dt in (np.float32, np.float64) and all(
        type(a) is np.ndarray and a.dtype == dt for a in arrays)


def _blocks(rows, width, itemsize):
    """(buffer rows, [(first row, row count)]): row blocks of about _BLOCK_BYTES of columns."""
    step = max(1, min(rows, _BLOCK_BYTES // max(1, width * itemsize)))
    return step, [(r, min(step, rows - r)) for r in range(0, rows, step)]


_WINOGRAD_MIN_CHANNELS = 32
_WINOGRAD_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])


def _winograd_fits(w_shape, strides, dilations):
    """A 3x3 stride-1 2-D convolution with enough input channels for F(2x2, 3x3) to pay: from
    32 (its 16 matmuls have the input channels as inner dimension; with fewer, im2col's 9 times
    as long one is faster)."""
    return (len(strides) == 2 and tuple(w_shape[:2]) == (3, 3) and strides == (1, 1) and
            dilations == (1, 1) and w_shape[2] >= _WINOGRAD_MIN_CHANNELS and w_shape[3] >= 8
            and hasattr(cpu_kernels, "winograd_input"))


def _tile_blocks(x, cin, cout, out, pads):
    """For each block of Winograd tiles (small enough to stay in cache): buffers (16, n, cin)
    and (16, n, cout), reused from block to block, and the kernels' geometry tuple."""
    tiles = math.prod(x.shape[:-3]) * -(-out[0] // 2) * -(-out[1] // 2)
    step = max(1, min(tiles, _BLOCK_BYTES // (16 * (cin + cout) * x.itemsize)))
    v_buf = np.empty(16 * step * cin, x.dtype)
    m_buf = np.empty(16 * step * cout, x.dtype)
    for t0 in range(0, tiles, step):
        n = min(step, tiles - t0)
        yield (v_buf[:16 * n * cin].reshape(16, n, cin), m_buf[:16 * n * cout].reshape(16, n, cout),
               (cin,) + x.shape[-3:-1] + tuple(out) + (pads[0][0], pads[1][0], t0))


def _winograd_conv(x, w, pads, out):
    """Winograd F(2x2, 3x3): each 4x4 input tile (stride 2) transformed to 16 values per
    channel (B^T d B), 16 matmuls with the transformed filter (G w G^T), and the 2x2 outputs
    transformed back (A^T m A)."""
    cin, cout = w.shape[2:]
    g = _WINOGRAD_G.astype(w.dtype)
    u = np.tensordot(g, np.tensordot(g, w, axes=(1, 0)), axes=(1, 1))  # (4 b, 4 a, cin, cout)
    u = np.ascontiguousarray(u.transpose(1, 0, 2, 3)).reshape(16, cin, cout)
    x = np.ascontiguousarray(x)
    y = np.empty(x.shape[:-3] + tuple(out) + (cout,), x.dtype)
    for v, m, geom in _tile_blocks(x, cin, cout, out, pads):
        cpu_kernels.winograd_input(x, v, geom)
        np.matmul(v, u, out=m)
        cpu_kernels.winograd_output(m, y, geom)
    return y


def _winograd_filter(x, g, w_shape, pads, out):
    """The filter gradient as the adjoint of `_winograd_conv`: the input tiles' transforms and
    the output gradient's (A dy A^T), 16 matmuls summed over the blocks of tiles, and
    G^T (.) G back to the 3x3 filter."""
    cin, cout = w_shape[2:]
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    du = np.zeros((16, cin, cout), x.dtype)
    part = np.empty((16, cin, cout), x.dtype)
    for v, m, geom in _tile_blocks(x, cin, cout, out, pads):
        cpu_kernels.winograd_input(x, v, geom)
        cpu_kernels.winograd_grad_output(g, m, geom)
        np.matmul(v.transpose(0, 2, 1), m, out=part)
        du += part
    gm = _WINOGRAD_G.astype(x.dtype)
    du = du.reshape(4, 4, cin, cout)
    dw = np.tensordot(gm, np.tensordot(gm, du, axes=(0, 0)), axes=(0, 1))  # (j, i, cin, cout)
    return np.ascontiguousarray(dw.transpose(1, 0, 2, 3))


def _cpu_conv(xp, x, w, strides, dilations, pads):
    nd = len(strides)
    ksize, (cin, cout) = w.shape[:nd], w.shape[-2:]
    if x.shape[-1] != cin or not _native(xp, x, w):
        return NotImplemented
    spatial = x.shape[-nd - 1:-1]
    out = _out_spatial(spatial, ksize, strides, dilations, pads)
    lead = x.shape[:-nd - 1]
    rows, width = math.prod(lead) * math.prod(out), math.prod(ksize) * cin
    if rows and _winograd_fits(w.shape, strides, dilations):
        return _winograd_conv(x, w, pads, out)
    y = np.empty((rows, cout), x.dtype)
    if rows and cout:
        x = np.ascontiguousarray(x)
        wm = np.ascontiguousarray(w).reshape(width, cout)
        geom = _geom(cin, spatial, out, ksize, strides, dilations, pads)
        step, blocks = _blocks(rows, width, x.itemsize)
        buf = np.empty((step, width), x.dtype)
        for r0, n in blocks:
            cols = buf[:n]
            cpu_kernels.im2col(x, cols, geom, r0)
            np.matmul(cols, wm, out=y[r0:r0 + n])
    return y.reshape(lead + out + (cout,))


def _winograd_input_fits(w_shape, strides, dilations, pads):
    """The input gradient of a 3x3 stride-1 convolution is a 3x3 convolution of the output
    gradient (channels cout -> cin) with the flipped filter, padded 2 - lo and 2 - hi: Winograd
    where that convolution fits (SAME and VALID padding do)."""
    return (len(strides) == 2 and all(lo <= 2 and hi <= 2 for lo, hi in pads) and
            _winograd_fits(tuple(w_shape[:2]) + (w_shape[3], w_shape[2]), strides, dilations))


def _winograd_conv_input(g, w, spatial, pads):
    """conv_backprop_input by `_winograd_conv` of g with the flipped, transposed filter."""
    wf = np.ascontiguousarray(w[::-1, ::-1].transpose(0, 1, 3, 2))
    return _winograd_conv(g, wf, tuple((2 - lo, 2 - hi) for lo, hi in pads), spatial)


def _cpu_conv_input(xp, g, w, in_shape, strides, dilations, pads):
    nd = len(strides)
    ksize, (cin, cout) = w.shape[:nd], w.shape[-2:]
    if in_shape[-1] != cin or not _native(xp, g, w):
        return NotImplemented
    spatial, out = tuple(in_shape[:-1]), g.shape[-nd - 1:-1]
    lead = g.shape[:-nd - 1]
    rows, width = math.prod(lead) * math.prod(out), math.prod(ksize) * cin
    if rows and _winograd_input_fits(w.shape, strides, dilations, pads):
        return _winograd_conv_input(g, w, spatial, pads)
    dx = np.zeros(lead + tuple(in_shape), g.dtype)
    if rows and width:
        gm = np.ascontiguousarray(g).reshape(rows, cout)
        wt = np.ascontiguousarray(w).reshape(width, cout).T
        geom = _geom(cin, spatial, out, ksize, strides, dilations, pads)
        step, blocks = _blocks(rows, width, g.itemsize)
        buf = np.empty((step, width), g.dtype)
        for r0, n in blocks:
            cols = buf[:n]
            np.matmul(gm[r0:r0 + n], wt, out=cols)
            cpu_kernels.col2im(cols, dx, geom, r0)
    return dx


def _cpu_conv_filter(xp, x, g, w_shape, strides, dilations, pads):
    nd = len(strides)
    ksize, (cin, cout) = tuple(w_shape[:nd]), w_shape[-2:]
    if x.shape[-1] != cin or not _native(xp, x, g):
        return NotImplemented
    spatial, out = x.shape[-nd - 1:-1], g.shape[-nd - 1:-1]
    rows, width = math.prod(x.shape[:-nd - 1]) * math.prod(out), math.prod(ksize) * cin
    if rows and _winograd_fits(w_shape, strides, dilations):
        return _winograd_filter(x, g, w_shape, pads, out)
    dw = np.zeros((width, cout), x.dtype)
    if rows and width and cout:
        x = np.ascontiguousarray(x)
        gm = np.ascontiguousarray(g).reshape(rows, cout)
        geom = _geom(cin, spatial, out, ksize, strides, dilations, pads)
        step, blocks = _blocks(rows, width, x.itemsize)
        buf = np.empty((step, width), x.dtype)
        part = np.empty((width, cout), x.dtype)
        for i, (r0, n) in enumerate(blocks):
            cols = buf[:n]
            cpu_kernels.im2col(x, cols, geom, r0)
            if i == 0:
                np.matmul(cols.T, gm[r0:r0 + n], out=dw)
            else:
                np.matmul(cols.T, gm[r0:r0 + n], out=part)
                dw += part
    return dw.reshape(tuple(w_shape))


# -- batching rules (tg.vectorized_map; ops/batching.py) -------------------------------------------

def _batched_filters(w, size):
    """Batched filters (B, *k, cin_g, cout) as one filter (*k, cin_g, B * cout)."""
    s = w._data.shape
    n = len(s)
    t = batching.transposed(w, tuple(range(1, n - 1)) + (0, n - 1))
    return batching.reshaped(t, s[1:-1] + (size * s[-1],))


def _batch_conv(op, vals, flags, params, size):
    # the filter shared: the batch folds into the op's own batch axis; per-example filters: into
    # the channels, each example a group of its own
    if not flags[1]:
        return batching.merge_first(op, vals, flags, params, size)
    x = batching.to_channels(batching.materialised(vals[0], flags[0], size), size)
    p = dict(params)
    if "in_shape" in p:  # the transposed convolution: its output has the input's channels
        p["in_shape"] = p["in_shape"][:-1] + (size * p["in_shape"][-1],)
    return batching.from_channels(apply(op, (x, _batched_filters(vals[1], size)), p), size)


def _batch_filter_groups(op, vals, flags, params, size):
    # per-example filter gradients: the batch folds into the channels, each example a group
    # of its own (input channel block b meets output channel block b only)
    x, g = (batching.to_channels(batching.materialised(v, b, size), size)
            for v, b in zip(vals, flags))
    w_shape = tuple(params["w_shape"])
    dw = apply(op, (x, g), dict(params, w_shape=w_shape[:-1] + (size * w_shape[-1],)))
    dw = batching.reshaped(dw, w_shape[:-1] + (size, w_shape[-1]))
    n = len(w_shape)
    return batching.transposed(dw, (n - 1,) + tuple(range(n - 1)) + (n,))


_conv = def_op("conv", _conv_forward, args=("x", "w"), saves=("x", "w"),
               vjp=(_conv_vjp_x, _conv_vjp_w), jvp=_conv_jvp, batch=_batch_conv,
               kernels={"numpy": _cpu_conv, "cuda": cudnn.conv_forward})
_conv_input = def_op("conv_backprop_input", _conv_input_forward, args=("g", "w"),
                     saves=("g", "w"), vjp=(_input_vjp_g, _input_vjp_w), jvp=_input_jvp,
                     batch=_batch_conv,
                     kernels={"numpy": _cpu_conv_input, "cuda": cudnn.conv_data_grad})
_conv_filter = def_op("conv_backprop_filter", _conv_filter_forward, args=("x", "g"),
                      saves=("x", "g"), vjp=(_filter_vjp_x, _filter_vjp_g), jvp=_filter_jvp,
                      batch=_batch_filter_groups,
                      kernels={"numpy": _cpu_conv_filter, "cuda": cudnn.conv_filter_grad})


# -- pooling ops -----------------------------------------------------------------------------------

def _lowest(xp, dtype):
    return -xp.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _max_pool_forward(xp, x, in_shape, ksize, strides, dilations, pads):
    """(max of each window, (index of its first maximum in the window,)): one pass over the
    windows per kernel tap. A NaN in a window is its maximum (the first NaN's tap: the
    gradient goes there), wherever it is in the window."""
    xpad = _pad(xp, x, pads, _lowest(xp, x.dtype))
    out_shape = tuple((n - (k - 1) * d - 1) // s + 1 for n, k, d, s in
                      zip(xpad.shape[-len(ksize) - 1:-1], ksize, dilations, strides))
    taps = list(np.ndindex(*ksize))
    out = xpad[_spatial_slices(taps[0], dilations, out_shape, strides)].copy()
    arg = xp.zeros(out.shape, dtype=np.uint8 if len(taps) < 256 else np.int32)
    for i, offsets in enumerate(taps[1:], 1):
        v = xpad[_spatial_slices(offsets, dilations, out_shape, strides)]
        better = v > out
        if x.dtype.kind == "f":  # a NaN wins over a number, not over an earlier NaN
            better |= (v != v) & (out == out)
        xp.copyto(out, v, where=better)
        arg[better] = i
    return out, (arg,)


def _overlap(ksize, strides, dilations):
    """Whether an input position can be in two windows."""
    return any((k - 1) * d + 1 > s or (d > 1 and k > 1) for k, s, d in
               zip(ksize, strides, dilations))


def _max_pool_grad_forward(xp, arg, g, in_shape, ksize, strides, dilations, pads):
    """Each g (with any leading batch axes) added to the input position of its window's max."""
    nd = len(ksize)
    spatial, c = tuple(in_shape[:-1]), in_shape[-1]
    lead, out = g.shape[:-nd - 1], g.shape[-nd - 1:-1]
    dx = xp.zeros(lead + _padded(spatial, pads) + (c,), dtype=g.dtype)
    zero = g.dtype.type(0)
    add = _overlap(ksize, strides, dilations)
    for i, offsets in enumerate(np.ndindex(*ksize)):
        where = _spatial_slices(offsets, dilations, out, strides)
        if add:
            dx[where] += xp.where(arg == i, g, zero)
        else:  # each input position in one window at most: an assignment
            dx[where] = xp.where(arg == i, g, zero)
    return _crop(dx, pads, spatial)


def _max_pool_grad_grad_forward(xp, arg, t, in_shape, ksize, strides, dilations, pads):
    """t (batch + input shape) read at each window's max: the transpose of max_pool_grad."""
    out_shape = arg.shape[-len(ksize) - 1:-1]
    tp = _pad(xp, t, pads)
    res = xp.zeros(t.shape[:-len(ksize) - 1] + arg.shape[-len(ksize) - 1:], dtype=t.dtype)
    for i, offsets in enumerate(np.ndindex(*ksize)):
        res = xp.where(arg == i, tp[_spatial_slices(offsets, dilations, out_shape, strides)], res)
    return res


def _max_pool_vjp(ops, g, arg, in_shape, **p):
    return ops.op("max_pool_grad", arg, g, in_shape=in_shape, **p)


def _max_pool_jvp(ops, t, arg, in_shape, **p):
    return ops.op("max_pool_grad_grad", arg, t, in_shape=in_shape, **p)


def _cpu_max_pool(xp, x, in_shape, ksize, strides, dilations, pads):
    """max_pool in one pass (C): the same maxima and first-maximum taps, as int32."""
    nd = len(ksize)
    if not _native(xp, x):
        return NotImplemented
    spatial = x.shape[-nd - 1:-1]
    out_shape = x.shape[:-nd - 1] + _out_spatial(spatial, ksize, strides, dilations, pads) + \
        x.shape[-1:]
    out = np.empty(out_shape, x.dtype)
    arg = np.empty(out_shape, np.int32)
    cpu_kernels.max_pool(np.ascontiguousarray(x), out, arg,
                         _geom(x.shape[-1], spatial, out_shape[-nd - 1:-1], ksize, strides,
                               dilations, pads))
    return out, (arg,)


def _cpu_max_pool_grad(xp, arg, g, in_shape, ksize, strides, dilations, pads):
    nd = len(ksize)
    if arg.dtype != np.int32 or not _native(xp, g) or type(arg) is not np.ndarray:
        return NotImplemented
    dx = np.zeros(g.shape[:g.ndim - arg.ndim] + arg.shape[:-nd - 1] + tuple(in_shape), g.dtype)
    cpu_kernels.max_pool_grad(np.ascontiguousarray(arg), np.ascontiguousarray(g), dx,
                              _geom(in_shape[-1], in_shape[:-1], arg.shape[-nd - 1:-1], ksize,
                                    strides, dilations, pads))
    return dx


# max_pool_grad(arg, g) and max_pool_grad_grad(arg, t) are linear in their second argument and
# each other's transposes; the window indices have no gradient
_max_pool = def_op("max_pool", _max_pool_forward, saves=("arg",), residuals=("arg",),
                   vjp=_max_pool_vjp, jvp=_max_pool_jvp, batch="merge",
                   kernels={"numpy": _cpu_max_pool})
_max_pool_grad = def_op(
    "max_pool_grad", _max_pool_grad_forward, args=("arg", "g"), saves=("arg",), same_dtype=False,
    vjp=(None, lambda ops, h, arg, **p: ops.op("max_pool_grad_grad", arg, h, **p)),
    jvp=lambda ops, ts, arg, **p: ops.op("max_pool_grad", arg, ts[1], **p), batch="merge",
    kernels={"numpy": _cpu_max_pool_grad})
_max_pool_grad_grad = def_op(
    "max_pool_grad_grad", _max_pool_grad_grad_forward, args=("arg", "t"), saves=("arg",),
    same_dtype=False,
    vjp=(None, lambda ops, h, arg, **p: ops.op("max_pool_grad", arg, h, **p)),
    jvp=lambda ops, ts, arg, **p: ops.op("max_pool_grad_grad", arg, ts[1], **p), batch="merge")


def _valid_counts(xp, spatial, ksize, strides, dilations, pads, dtype):
    """The number of unpadded inputs in each window, shape (*out, 1)."""
    total = np.ones((), dtype=np.float64)
    for n, k, s, d, (lo, hi) in zip(spatial, ksize, strides, dilations, pads):
        out = (n + lo + hi - (k - 1) * d - 1) // s + 1
        pos = np.arange(out)[:, None] * s + np.arange(k)[None, :] * d - lo
        total = np.multiply.outer(total, ((pos >= 0) & (pos < n)).sum(1))
    return xp.asarray(total[..., None], dtype=dtype)


def _avg_pool_forward(xp, x, ksize, strides, dilations, pads):
    nd = len(ksize)
    win = _windows(xp, _pad(xp, x, pads), ksize, strides, dilations)
    total = win.sum(axis=tuple(range(-nd, 0)))
    return total / _valid_counts(xp, x.shape[-nd - 1:-1], ksize, strides, dilations, pads,
                                 x.dtype)


def _avg_pool_grad_forward(xp, g, in_shape, ksize, strides, dilations, pads):
    nd = len(ksize)
    spatial, c = tuple(in_shape[:-1]), in_shape[-1]
    lead, out = g.shape[:-nd - 1], g.shape[-nd - 1:-1]
    gs = g / _valid_counts(xp, spatial, ksize, strides, dilations, pads, g.dtype)
    dx = xp.zeros(lead + _padded(spatial, pads) + (c,), dtype=g.dtype)
    for offsets in np.ndindex(*ksize):
        dx[_spatial_slices(offsets, dilations, out, strides)] += gs
    return _crop(dx, pads, spatial)


# avg_pool and avg_pool_grad are linear and each other's transposes (leading axes pass through)
_avg_pool = def_op("avg_pool", _avg_pool_forward, saves=("x.shape",), linear=True,
                   vjp=lambda ops, g, x_shape, **p: ops.op(
                       "avg_pool_grad", g, in_shape=tuple(x_shape[-len(p["ksize"]) - 1:]), **p),
                   batch="merge")
_avg_pool_grad = def_op("avg_pool_grad", _avg_pool_grad_forward, args=("g",), linear=True,
                        vjp=lambda ops, h, in_shape, **p: ops.op("avg_pool", h, **p), batch="merge")


# -- argument handling -----------------------------------------------------------------------------

_FORMATS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}


def _channels_first(data_format, nd, fn):
    last, first = _FORMATS[nd]
    if data_format is None or data_format == last:
        return False
    if data_format == first:
        return True
    raise ValueError(f"{fn}: data_format must be {last!r} or {first!r}, got {data_format!r}")


def _sizes(value, nd, what, fn, cfirst, default=1):
    """strides, dilations or ksize: an int, or a list of 1, nd or nd + 2 ints (then the batch
    and channel entries must be 1), as the spatial tuple."""
    if value is None:
        value = default
    if isinstance(value, (int, np.integer)):
        vals = (int(value),) * nd
    else:
        vals = tuple(int(v) for v in value)
        if len(vals) == 1:
            vals *= nd
        elif len(vals) == nd + 2:
            outer = (vals[0], vals[1]) if cfirst else (vals[0], vals[-1])
            if outer != (1, 1):
                raise InvalidArgumentError(
                    f"{fn}: {what} {list(vals)} must be 1 in the batch and channel dimensions")
            vals = vals[2:] if cfirst else vals[1:-1]
        elif len(vals) != nd:
            raise ValueError(f"{fn}: {what} should be of length 1, {nd} or {nd + 2} but was "
                             f"{len(vals)}")
    if any(v < 1 for v in vals):
        raise ValueError(f"{fn}: {what} must be positive, got {list(vals)}")
    return vals


def _pads(padding, spatial, ksize, strides, dilations, nd, fn, cfirst, explicit=True):
    """((lo, hi) per spatial axis) for "SAME", "VALID" or an explicit list."""
    eff = [(k - 1) * d + 1 for k, d in zip(ksize, dilations)]
    if isinstance(padding, str):
        if padding == "VALID":
            pads = ((0, 0),) * nd
        elif padding == "SAME":
            pads = []
            for n, e, s in zip(spatial, eff, strides):
                total = max((-(-n // s) - 1) * s + e - n, 0)
                pads.append((total // 2, total - total // 2))
            pads = tuple(pads)
        else:
            raise ValueError(f"{fn}: padding must be 'SAME', 'VALID'"
                             f"{' or a list of pairs' if explicit else ''}, got {padding!r}")
    else:
        if not explicit:
            raise ValueError(f"{fn}: padding must be 'SAME' or 'VALID', got {padding!r}")
        try:
            pairs = [tuple(int(v) for v in p) for p in padding]
        except TypeError:
            pairs = []
        if len(pairs) != nd + 2 or any(len(p) != 2 for p in pairs):
            raise ValueError(f"{fn}: explicit padding must be a list of {nd + 2} [before, after] "
                             f"pairs (one per dimension of the input), got {padding!r}")
        outer = (pairs[0], pairs[1]) if cfirst else (pairs[0], pairs[-1])
        if outer != ((0, 0), (0, 0)):
            raise ValueError(f"{fn}: explicit padding of the batch and channel dimensions must "
                             f"be [0, 0], got {padding!r}")
        pads = tuple(pairs[2:] if cfirst else pairs[1:-1])
        if any(v < 0 for p in pads for v in p):
            raise ValueError(f"{fn}: explicit padding must be non-negative, got {padding!r}")
    for n, e, (lo, hi) in zip(spatial, eff, pads):
        if n + lo + hi < e:
            raise InvalidArgumentError(
                f"{fn}: computed output size would be negative: the padded input size "
                f"{n + lo + hi} is smaller than the effective filter size {e} (input shape "
                f"{tuple(spatial)}, padding {padding!r})")
    return pads


def _to_last(x, nd):
    return transpose(x, (0,) + tuple(range(2, nd + 2)) + (1,))


def _to_first(y, nd):
    return transpose(y, (0, nd + 1) + tuple(range(1, nd + 1)))


def _rank(x, nd, fn, what="input"):
    if x.ndim != nd + 2:
        raise InvalidArgumentError(f"{fn}: {what} must have rank {nd + 2}, got shape {x.shape}")


def _conv_params(x, w, strides, padding, dilations, nd, fn, cfirst):
    """Checks shapes and returns the conv ops' params for channels-last x."""
    _rank(x, nd, fn)
    _rank(w, nd, fn, "filters")
    if x.dtype != w.dtype:
        raise InvalidArgumentError(f"{fn}: input ({x.dtype.name}) and filters ({w.dtype.name}) "
                                   "must have the same dtype")
    cin, cin_g, cout = x.shape[-1], w.shape[-2], w.shape[-1]
    if cin_g == 0 or cin % cin_g:
        raise InvalidArgumentError(f"{fn}: input depth must be evenly divisible by filter depth: "
                                   f"{cin} vs {cin_g} (input {x.shape}, filters {w.shape})")
    if cout % (cin // cin_g):
        raise InvalidArgumentError(f"{fn}: output depth must be evenly divisible by number of "
                                   f"groups: {cout} vs {cin // cin_g} (filters {w.shape})")
    strides = _sizes(strides, nd, "strides", fn, cfirst)
    dilations = _sizes(dilations, nd, "dilations", fn, cfirst)
    pads = _pads(padding, x.shape[1:-1], w.shape[:nd], strides, dilations, nd, fn, cfirst)
    return {"strides": strides, "dilations": dilations, "pads": pads}


def _convolution(input, filters, strides, padding, data_format, dilations, nd, fn):
    x = floating(input, fn)
    w = floating(filters, fn)
    cfirst = _channels_first(data_format, nd, fn)
    if cfirst:
        _rank(x, nd, fn)
        x = _to_last(x, nd)
    y = apply(_conv, (x, w), _conv_params(x, w, strides, padding, dilations, nd, fn, cfirst))
    return _to_first(y, nd) if cfirst else y


# -- public convolution ----------------------------------------------------------------------------

def conv1d(input, filters, stride, padding, data_format="NWC", dilations=None, name=None):
    """1-D convolution (cross-correlation, as TensorFlow) of `input` (N, W, C) with `filters`
    (width, C / groups, out_channels); data_format "NWC" or "NCW".

    >>> x = tg.reshape(tg.range(5.0), (1, 5, 1))
    >>> tg.nn.conv1d(x, tg.ones((2, 1, 1)), stride=1, padding="VALID").numpy()[0, :, 0]
    array([1., 3., 5., 7.], dtype=float32)
    """
    return _convolution(input, filters, stride, padding, data_format, dilations, 1, "conv1d")


def conv2d(input, filters, strides, padding, data_format="NHWC", dilations=None, name=None):
    """2-D convolution (cross-correlation, as TensorFlow) of `input` (N, H, W, C) with
    `filters` (kh, kw, C / groups, out_channels). `strides`, `dilations`: an int or a list of
    1, 2 or 4 ints; `padding`: "SAME" (output size ceil(in / stride)), "VALID" or explicit
    [[0, 0], [top, bottom], [left, right], [0, 0]]; data_format "NHWC" or "NCHW". A filter with
    C / groups input channels makes a grouped convolution.

    >>> x = tg.ones((1, 4, 4, 1))
    >>> y = tg.nn.conv2d(x, tg.ones((3, 3, 1, 2)), strides=2, padding="SAME")
    >>> y.shape, y.numpy()[0, :, :, 0]
    ((1, 2, 2, 2), array([[9., 6.],
           [6., 4.]], dtype=float32))
    """
    return _convolution(input, filters, strides, padding, data_format, dilations, 2, "conv2d")


def conv3d(input, filters, strides, padding, data_format="NDHWC", dilations=None, name=None):
    """3-D convolution of `input` (N, D, H, W, C) with `filters` (kd, kh, kw, C / groups,
    out_channels); data_format "NDHWC" or "NCDHW".

    >>> tg.nn.conv3d(tg.ones((1, 3, 3, 3, 1)), tg.ones((2, 2, 2, 1, 1)), [1, 1, 1, 1, 1],
    ...              "VALID").numpy().ravel()
    array([8., 8., 8., 8., 8., 8., 8., 8.], dtype=float32)
    """
    return _convolution(input, filters, strides, padding, data_format, dilations, 3, "conv3d")


def convolution(input, filters, strides=None, padding="VALID", data_format=None, dilations=None,
                name=None):
    """N-d convolution (1, 2 or 3 spatial dimensions, from the rank of `input`), as
    tf.nn.convolution; data_format channels-last by default, or "NCW", "NCHW", "NCDHW".

    >>> tg.nn.convolution(tg.ones((1, 3, 3, 1)), tg.ones((2, 2, 1, 1))).numpy()[0, :, :, 0]
    array([[4., 4.],
           [4., 4.]], dtype=float32)
    """
    x = floating(input, "convolution")
    nd = x.ndim - 2
    if nd not in _FORMATS:
        raise InvalidArgumentError(f"convolution: input must have rank 3, 4 or 5, got shape "
                                   f"{x.shape}")
    return _convolution(x, filters, strides, padding, data_format, dilations, nd, "convolution")


def conv2d_transpose(input, filters, output_shape, strides, padding="SAME", data_format="NHWC",
                     dilations=None, name=None):
    """The transpose (gradient with respect to its input) of conv2d: `input` (N, H, W, C_in) and
    `filters` (kh, kw, C_out, C_in) give an output of `output_shape` (N, H', W', C_out) such
    that conv2d of that shape with the same strides and padding has `input`'s shape.

    >>> y = tg.nn.conv2d_transpose(tg.ones((1, 2, 2, 1)), tg.ones((3, 3, 1, 1)), [1, 4, 4, 1],
    ...                            strides=2)
    >>> y.numpy()[0, :, :, 0]
    array([[1., 1., 2., 1.],
           [1., 1., 2., 1.],
           [2., 2., 4., 2.],
           [1., 1., 2., 1.]], dtype=float32)
    """
    fn = "conv2d_transpose"
    g = floating(input, fn)
    w = floating(filters, fn)
    cfirst = _channels_first(data_format, 2, fn)
    _rank(g, 2, fn)
    _rank(w, 2, fn, "filters")
    if hasattr(output_shape, "numpy"):
        output_shape = output_shape.numpy()
    out_shape = tuple(int(v) for v in output_shape)
    if len(out_shape) != 4:
        raise ValueError(f"{fn}: output_shape must have 4 elements, got {list(out_shape)}")
    given = g.shape
    if cfirst:
        g = _to_last(g, 2)
        out_shape = (out_shape[0],) + out_shape[2:] + (out_shape[1],)
    if out_shape[0] != g.shape[0]:
        raise InvalidArgumentError(f"{fn}: output_shape {list(output_shape)} and input {given} "
                                   "must have the same batch size")
    if w.shape[-1] != g.shape[-1]:
        raise InvalidArgumentError(f"{fn}: filters {w.shape} must have input's depth "
                                   f"{g.shape[-1]} as their last dimension")
    if out_shape[-1] % w.shape[-2]:
        raise InvalidArgumentError(f"{fn}: output depth {out_shape[-1]} must be divisible by the "
                                   f"filters' depth {w.shape[-2]}")
    strides = _sizes(strides, 2, "strides", fn, cfirst)
    dilations = _sizes(dilations, 2, "dilations", fn, cfirst)
    pads = _pads(padding, out_shape[1:-1], w.shape[:2], strides, dilations, 2, fn, cfirst)
    expect = tuple((n + lo + hi - (k - 1) * d - 1) // s + 1 for n, (lo, hi), k, d, s in
                   zip(out_shape[1:-1], pads, w.shape[:2], dilations, strides))
    if expect != g.shape[1:-1]:
        raise InvalidArgumentError(
            f"{fn}: output_shape {list(output_shape)} is inconsistent with input {given}: "
            f"conv2d of that shape with strides {list(strides)} and padding {padding!r} has "
            f"spatial size {list(expect)}, not {list(g.shape[1:-1])}")
    y = apply(_conv_input, (g, w), {"in_shape": tuple(out_shape[1:]), "strides": strides,
                                     "dilations": dilations, "pads": pads})
    return _to_first(y, 2) if cfirst else y


def depthwise_conv2d(input, filter, strides, padding, data_format=None, dilations=None,
                     name=None):
    """Each input channel convolved with its own `filter[:, :, c, :]` (kh, kw, C, multiplier):
    output channel c * multiplier + m, as tf.nn.depthwise_conv2d.

    >>> x = tg.constant([[[[1.0, 2.0]]]])
    >>> tg.nn.depthwise_conv2d(x, tg.ones((1, 1, 2, 2)), [1, 1, 1, 1], "VALID").numpy()
    array([[[[1., 1., 2., 2.]]]], dtype=float32)
    """
    fn = "depthwise_conv2d"
    w = floating(filter, fn)
    _rank(w, 2, fn, "filter")
    x = floating(input, fn)
    _rank(x, 2, fn)
    cfirst = _channels_first(data_format, 2, fn)
    c = x.shape[1] if cfirst else x.shape[-1]
    if w.shape[2] != c:
        raise InvalidArgumentError(f"{fn}: filter {w.shape} must have the input's depth {c} as "
                                   f"its third dimension (input {x.shape})")
    grouped = reshape(w, w.shape[:2] + (1, w.shape[2] * w.shape[3]))
    return _convolution(x, grouped, strides, padding, data_format, dilations, 2, fn)


# -- public pooling --------------------------------------------------------------------------------

def _pool(input, ksize, strides, padding, data_format, dilations, nd, kind, fn):
    x = floating(input, fn) if kind == "AVG" else _tensor_of(input, fn)
    cfirst = _channels_first(data_format, nd, fn)
    _rank(x, nd, fn)
    if cfirst:
        x = _to_last(x, nd)
    ksize = _sizes(ksize, nd, "ksize", fn, cfirst)
    strides = _sizes(strides, nd, "strides", fn, cfirst)
    dilations = _sizes(dilations, nd, "dilations", fn, cfirst)
    pads = _pads(padding, x.shape[1:-1], ksize, strides, dilations, nd, fn, cfirst,
                 explicit=kind == "MAX")
    params = {"ksize": ksize, "strides": strides, "dilations": dilations, "pads": pads}
    if kind == "MAX":
        y = apply(_max_pool, (x,), dict(params, in_shape=tuple(x.shape[1:])))
    else:
        y = apply(_avg_pool, (x,), params)
    return _to_first(y, nd) if cfirst else y


def _tensor_of(x, fn):
    x = x if isinstance(x, Tensor) else convert_to_tensor(x)
    if x._data.dtype.kind not in "fiu":
        raise InvalidArgumentError(f"{fn}: expected a real tensor, got {x.dtype.name}")
    return x


def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):
    """The maximum of each window of `input` (N, W, C); padding "SAME", "VALID" or explicit.

    >>> x = tg.reshape(tg.constant([1.0, 3.0, 2.0, 5.0, 4.0]), (1, 5, 1))
    >>> tg.nn.max_pool1d(x, 2, 2, "SAME").numpy().ravel()
    array([3., 5., 4.], dtype=float32)
    """
    return _pool(input, ksize, strides, padding, data_format, None, 1, "MAX", "max_pool1d")


def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
    """The maximum of each window of `input` (N, H, W, C); `ksize` and `strides` an int or a
    list of 1, 2 or 4 ints; padding "SAME" (output ceil(in / stride), padding ignored), "VALID"
    or explicit. Its gradient goes to the first maximum of each window.

    >>> x = tg.reshape(tg.range(16.0), (1, 4, 4, 1))
    >>> tg.nn.max_pool2d(x, 2, 2, "VALID").numpy()[0, :, :, 0]
    array([[ 5.,  7.],
           [13., 15.]], dtype=float32)
    """
    return _pool(input, ksize, strides, padding, data_format, None, 2, "MAX", "max_pool2d")


def max_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):
    """The maximum of each window of `input` (N, D, H, W, C).

    >>> tg.nn.max_pool3d(tg.reshape(tg.range(8.0), (1, 2, 2, 2, 1)), 2, 2, "VALID").numpy()
    array([[[[[7.]]]]], dtype=float32)
    """
    return _pool(input, ksize, strides, padding, data_format, None, 3, "MAX", "max_pool3d")


def avg_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):
    """The mean of each window of `input` (N, W, C); with "SAME", over the window's unpadded
    elements (as TensorFlow).

    >>> x = tg.reshape(tg.constant([1.0, 3.0, 2.0, 5.0, 4.0]), (1, 5, 1))
    >>> tg.nn.avg_pool1d(x, 2, 2, "SAME").numpy().ravel()
    array([2. , 3.5, 4. ], dtype=float32)
    """
    return _pool(input, ksize, strides, padding, data_format, None, 1, "AVG", "avg_pool1d")


def avg_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
    """The mean of each window of `input` (N, H, W, C); padding "SAME" (each window's mean over
    its unpadded elements, as TensorFlow) or "VALID".

    >>> x = tg.reshape(tg.range(9.0), (1, 3, 3, 1))
    >>> tg.nn.avg_pool2d(x, 2, 2, "SAME").numpy()[0, :, :, 0]
    array([[2. , 3.5],
           [6.5, 8. ]], dtype=float32)
    """
    return _pool(input, ksize, strides, padding, data_format, None, 2, "AVG", "avg_pool2d")


def avg_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):
    """The mean of each window of `input` (N, D, H, W, C).

    >>> tg.nn.avg_pool3d(tg.reshape(tg.range(8.0), (1, 2, 2, 2, 1)), 2, 2, "VALID").numpy()
    array([[[[[3.5]]]]], dtype=float32)
    """
    return _pool(input, ksize, strides, padding, data_format, None, 3, "AVG", "avg_pool3d")


def _pool_rank(input, fn):
    x = input if isinstance(input, Tensor) else convert_to_tensor(input)
    nd = x.ndim - 2
    if nd not in _FORMATS:
        raise InvalidArgumentError(f"{fn}: input must have rank 3, 4 or 5, got shape {x.shape}")
    return x, nd


def max_pool(input, ksize, strides, padding, data_format=None, name=None):
    """max_pool1d, max_pool2d or max_pool3d by the rank of `input` (3, 4 or 5).

    >>> tg.nn.max_pool(tg.ones((1, 4, 4, 1)), 2, 2, "VALID").shape
    (1, 2, 2, 1)
    """
    x, nd = _pool_rank(input, "max_pool")
    return _pool(x, ksize, strides, padding, data_format, None, nd, "MAX", "max_pool")


def avg_pool(input, ksize, strides, padding, data_format=None, name=None):
    """avg_pool1d, avg_pool2d or avg_pool3d by the rank of `input` (3, 4 or 5).

    >>> tg.nn.avg_pool(tg.ones((1, 4, 4, 1)), 2, 2, "VALID").shape
    (1, 2, 2, 1)
    """
    x, nd = _pool_rank(input, "avg_pool")
    return _pool(x, ksize, strides, padding, data_format, None, nd, "AVG", "avg_pool")


def pool(input, window_shape, pooling_type, strides=None, padding="VALID", data_format=None,
         dilations=None, name=None):
    """Max or average pooling ("MAX" or "AVG") with `window_shape`, optional `strides` and
    `dilations` (not both above 1, as tf.nn.pool), over 1, 2 or 3 spatial dimensions.

    >>> tg.nn.pool(tg.reshape(tg.range(5.0), (1, 5, 1)), [2], "MAX", dilations=[2]).numpy().ravel()
    array([2., 3., 4.], dtype=float32)
    """
    x, nd = _pool_rank(input, "pool")
    if pooling_type not in ("MAX", "AVG"):
        raise ValueError(f"pool: pooling_type must be 'MAX' or 'AVG', got {pooling_type!r}")
    window = [int(v) for v in ([window_shape] if isinstance(window_shape, int) else window_shape)]
    if len(window) != nd:
        raise ValueError(f"pool: window_shape {window} must have {nd} elements for an input of "
                         f"rank {nd + 2}")
    strides_ = _sizes(strides, nd, "strides", "pool", False)
    dil = _sizes(dilations, nd, "dilations", "pool", False)
    if any(d > 1 for d in dil) and any(s > 1 for s in strides_):
        raise ValueError(f"pool: strides {list(strides_)} > 1 not supported in conjunction with "
                         f"dilations {list(dil)} > 1")
    if pooling_type == "AVG" and not isinstance(padding, str):
        raise ValueError(f"pool: padding must be 'SAME' or 'VALID' for AVG pooling, got "
                         f"{padding!r}")
    return _pool(x, window, strides_, padding, data_format, dil, nd, pooling_type, "pool")


for _fn, _op in ((conv1d, _conv), (conv2d, _conv), (conv3d, _conv), (convolution, _conv),
                 (conv2d_transpose, _conv_input), (depthwise_conv2d, _conv),
                 (max_pool1d, _max_pool), (max_pool2d, _max_pool), (max_pool3d, _max_pool),
                 (max_pool, _max_pool), (avg_pool1d, _avg_pool), (avg_pool2d, _avg_pool),
                 (avg_pool3d, _avg_pool), (avg_pool, _avg_pool)):
    _fn.op = _op


__all__ = public(globals(), ("nn",))
