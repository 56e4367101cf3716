"""Reductions over axes. `axis` is normalised to a sorted tuple of non-negative axes of the
input; rules turn them into negative axes so that leading batch axes of `g` pass through."""
import math

import numpy as np

from .kernels import _kernel_set, add_reduce
from .registry import InvalidArgumentError, def_op, forward_on
from ..core.dtypes import np_dtype
from ..core.tensor import Tensor

from ._base import add_at, apply, extreme_at, floating, norm_axes, norm_axis, public, tensor
from . import binary as _b, unary as _u
from . import shape as _shape
from .shape import reshape


def _axis(axis, op):
    """`axis` checked for norm_axes: None, an int, a sequence or array of ints, or an integer
    tensor (TF raises TypeError for other types)."""
    if axis is None or type(axis) is int:
        return axis
    if isinstance(axis, Tensor):
        if axis._data.dtype.kind in "iu" and axis.ndim <= 1:
            return axis
    elif isinstance(axis, np.integer):
        return int(axis)
    elif isinstance(axis, (list, tuple, np.ndarray)):
        items = list(axis)
        if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in items):
            return tuple(int(a) for a in items)
    raise TypeError(f"{op}: axis must be None, an int or a sequence of ints, got {axis!r}")


def _expand(ops, g, x_shape, axis, keepdims):
    """g (batch + reduced shape) with the reduced axes restored as size 1."""
    if keepdims:
        return g
    nd = len(x_shape)
    kept = tuple(1 if i in axis else s for i, s in enumerate(x_shape))
    batch = g.shape[:g.ndim - (nd - len(axis))]
    return ops.reshape(g, batch + kept)


def _batch(g, x_shape, axis, keepdims):
    return g.shape[:g.ndim - (len(x_shape) - (0 if keepdims else len(axis)))]


def _sum_vjp(ops, g, x_shape, axis, keepdims):
    # d sum(x) / dx = 1: spread g over the reduced axes
    return ops.broadcast_to(_expand(ops, g, x_shape, axis, keepdims),
                            _batch(g, x_shape, axis, keepdims) + tuple(x_shape))


def _mean_vjp(ops, g, x_shape, axis, keepdims):
    n = math.prod([x_shape[i] for i in axis]) if axis else 1
    if not g.ndim:  # a mean over every axis (a loss): g spreads as it is, no reshape first
        return ops.broadcast_to(g, tuple(x_shape)) * (1.0 / max(n, 1))
    return _sum_vjp(ops, g, x_shape, axis, keepdims) * (1.0 / max(n, 1))


def _kept(g, x_shape, axis, keepdims):
    """x_shape with the reduced axes as 1 (g's shape with keepdims), or None where g carries
    batch axes (a batched cotangent: the rules take it)."""
    kept = tuple(1 if i in axis else s for i, s in enumerate(x_shape))
    if g.shape != (kept if keepdims else tuple(s for i, s in enumerate(x_shape)
                                               if i not in axis)):
        return None
    return kept


def _sum_numpy_vjp(g, x_shape, axis, keepdims):
    """The rule on numpy arrays without its dispatched ops: g spread over the reduced axes as
    a broadcast view (the rule's reshape and broadcast_to). Batched cotangents take the rule."""
    if not g.ndim:
        return _spread(g, x_shape)
    kept = _kept(g, x_shape, axis, keepdims)
    return NotImplemented if kept is None else _spread(g.reshape(kept), x_shape)


def _spread(a, shape):
    """np.broadcast_to(a, shape) for `a` 0-d or of the same rank with 1 on the spread axes: the
    read-only view made directly where a is a contiguous array (np.broadcast_to's checks and
    iterator take three times as long)."""
    if type(a) is not np.ndarray or not a.flags.c_contiguous:
        return np.broadcast_to(a, shape)
    strides = (0,) * len(shape) if not a.ndim else \
        tuple([0 if n != m else s for n, m, s in zip(a.shape, shape, a.strides)])
    view = np.ndarray(shape, a.dtype, a, 0, strides)
    view.flags.writeable = False
    return view


_INVERSES = {}  # (dtype, a loss's shape) -> 1 / its size in the dtype, as a Python float


def _mean_numpy_vjp(g, x_shape, axis, keepdims):
    """The rule on numpy arrays, one ufunc call broadcasting into the result (the same
    products, so the same bits; the rule's four dispatched ops cost more than the work on the
    small cotangents a loss's mean gets). Batched cotangents take the rule."""
    if g.dtype.kind not in "fc":
        return NotImplemented
    if not g.ndim and not keepdims and len(axis) == len(x_shape):
        # a mean over every axis (a loss): one product, filled in (the rule's, so its bits: for
        # float16/32, the product of the two as Python floats is exact and the fill rounds it
        # once, as the dtype's product does; for float64 it is that product)
        out = np.empty(x_shape, g.dtype)
        if g.dtype.kind == "f" and g.dtype.itemsize <= 8:
            key = (g.dtype, x_shape)
            inverse = _INVERSES.get(key)
            if inverse is None:
                if len(_INVERSES) > 64:
                    _INVERSES.clear()
                inverse = _INVERSES[key] = float(g.dtype.type(1.0 / max(math.prod(x_shape), 1)))
            out.fill(float(g) * inverse)
        else:
            out.fill(g * (1.0 / max(math.prod(x_shape), 1)))
        return out
    kept = _kept(g, x_shape, axis, keepdims)
    if kept is None:
        return NotImplemented
    n = math.prod([x_shape[i] for i in axis]) if axis else 1
    out = np.empty(x_shape, g.dtype)
    np.multiply(g.reshape(kept), 1.0 / max(n, 1), out=out)
    return out


def _extreme_vjp(ops, g, x, out, axis, keepdims):
    # the gradient goes to the elements equal to the extreme, shared equally among ties (as TF)
    ref = _expand(ops, out, x.shape, axis, keepdims)
    mask = ops.cast(ops.equal(x, ref), x.dtype)
    count = ops.reduce_sum(mask, axis=axis, keepdims=True)
    return _expand(ops, g, x.shape, axis, keepdims) * (mask / count)


def _prod_vjp(ops, g, x, out, axis, keepdims):
    # d prod(x) / dx_i = prod_{j != i} x_j, computed as the product of exclusive cumulative
    # products from both sides along the flattened reduced axes (exact with zeros)
    return _expand(ops, g, x.shape, axis, keepdims) * _prod_others(ops, x, axis)


# JVPs: the reduction applied to the tangent over the same axes, counted from the right so that
# the tangent's leading batch axes pass through
def _neg(axis, ndim):
    return tuple(a - ndim for a in axis)


def _sum_jvp(ops, t, x_shape, axis, keepdims):
    return ops.reduce_sum(t, axis=_neg(axis, len(x_shape)), keepdims=keepdims)


def _mean_jvp(ops, t, x_shape, axis, keepdims):
    return ops.reduce_mean(t, axis=_neg(axis, len(x_shape)), keepdims=keepdims)


def _extreme_jvp(ops, t, x, out, axis, keepdims):
    # d max(x) = the mean of dx over the elements equal to the extreme (ties shared, as the VJP)
    ref = _expand(ops, out, x.shape, axis, keepdims)
    mask = ops.cast(ops.equal(x, ref), x.dtype)
    weight = mask / ops.reduce_sum(mask, axis=axis, keepdims=True)
    return ops.reduce_sum(t * weight, axis=_neg(axis, x.ndim), keepdims=keepdims)


def _prod_jvp(ops, t, x, out, axis, keepdims):
    # d prod(x) = sum_i dx_i prod_{j != i} x_j
    return ops.reduce_sum(t * _prod_others(ops, x, axis), axis=_neg(axis, x.ndim),
                          keepdims=keepdims)


def _integer_mean(xp, x, axis, keepdims):
    """TensorFlow's mean of integers: the sum in 64 bits (int64, or uint64 for unsigned
    dtypes; 64-bit inputs wrap as TF's do), divided by the count in integers, truncating toward
    zero, and cast back (the mean of [2^60 + 1, 2^60 + 3] is 2^60 + 2, exactly); 0 over no
    elements. Spelled out: CuPy's mean has no integer-output loop."""
    s = xp.sum(x, axis=axis, keepdims=keepdims,
               dtype=xp.int64 if x.dtype.kind == "i" else xp.uint64)
    count = max(x.size // s.size, 1) if s.size else 1
    # s - fmod(s, count) is a multiple of count (fmod keeps s's sign, as C's %): floor
    # division of it is the truncated quotient
    return ((s - xp.fmod(s, count)) // count).astype(x.dtype)


_NUMPY_MEAN_AS_SUM = (np.dtype(np.float32), np.dtype(np.float64))


def _numpy_mean(x, axis, keepdims):
    """numpy's mean of float32 or float64 as numpy computes it (its `_methods._mean`: the sum,
    then a division by the count as an intp, into the sum's own buffer), without its Python
    wrappers (half of a small mean's time). float16 (summed in float32) and complex take
    numpy's own function."""
    s = add_reduce(x, axis, keepdims)
    if type(s) is np.ndarray:
        if not s.ndim:  # (a loss) the same division on Python floats, rounded into s
            s[()] = s.item() / x.size
            return s
        return np.true_divide(s, np.intp(x.size // s.size), out=s, casting="unsafe")
    # a numpy scalar: numpy divides it by the count in float64 and rounds to the dtype;
    # Python's float division is that same IEEE division
    return s.dtype.type(float(s) / x.size)


def _forward(fn):
    def forward(xp, x, axis, keepdims):
        # integers stay in their dtype (numpy would widen int32 to int64, or to float64 for a
        # mean; TensorFlow keeps int32, and a mean of integers truncates)
        if fn == "mean" and x.dtype.kind in "iu":
            return _integer_mean(xp, x, axis, keepdims)
        if fn in ("sum", "prod") and x.dtype.kind in "iu":
            return getattr(xp, fn)(x, axis=axis, keepdims=keepdims, dtype=x.dtype)
        if fn == "mean" and x.size == 0:
            # the mean over no elements is NaN, as in TF (numpy warns "Mean of empty slice")
            return xp.full_like(xp.sum(x, axis=axis, keepdims=keepdims), np.nan)
        return getattr(xp, fn)(x, axis=axis, keepdims=keepdims)
    return forward


_sum_reference = _forward("sum")
_mean_reference = _forward("mean")


def _sum_forward(xp, x, axis, keepdims):
    # float32/float64 numpy arrays: numpy's sum is add.reduce (so, without np.sum's wrapper,
    # the same bits), by the CPU kernels where they have its bits
    if type(x) is np.ndarray and x.dtype in _NUMPY_MEAN_AS_SUM:
        return add_reduce(x, axis, keepdims)
    return _sum_reference(xp, x, axis, keepdims)


def _mean_forward(xp, x, axis, keepdims):
    # a non-empty float32/float64 numpy array (a loss's mean) first, without the general
    # forward's tests of dtype and size
    if type(x) is np.ndarray and x.dtype in _NUMPY_MEAN_AS_SUM and x.size:
        return _numpy_mean(x, axis, keepdims)
    return _mean_reference(xp, x, axis, keepdims)


# The rows a GPU's reduce_sum adds in order, by the un-broadcast kernel (below); more take CuPy's
# sum, faster for a tall reduction (a column's thread walks every row)
IN_ORDER_ROWS = 4096
_gpu_kernels = _kernel_set("cuda")   # the kernel set of the GPU an array lives on


def _sum_cuda(xp, x, axis, keepdims):
    """A float sum on a GPU over at most IN_ORDER_ROWS elements per result, by the backend's
    un-broadcast kernel: the one the eager sweep sums a broadcast operand's cotangent with (a
    bias's rows in order). A traced gradient records that sum as reduce_sum on tensors, so the
    trace's own call computed it with CuPy's sum (another order), one unit in the last place
    from eager code and from the replays (seen on an H200: a traced step's first update)."""
    if x.dtype not in _NUMPY_MEAN_AS_SUM or not x.size or not axis:
        return NotImplemented
    if math.prod(x.shape[a] for a in axis) > IN_ORDER_ROWS:
        return NotImplemented
    kernels = _gpu_kernels(x)
    if kernels is None:
        return NotImplemented
    kept = tuple(1 if a in axis else n for a, n in enumerate(x.shape))
    with xp.cuda.Device(x.device.id):   # the array's GPU, not CuPy's current one
        out = kernels.unbroadcast(x, 0, kept)
    return out if keepdims else out.reshape(tuple(n for a, n in enumerate(x.shape)
                                                  if a not in axis))


_sum = def_op("reduce_sum", _sum_forward, vjp=_sum_vjp, jvp=_sum_jvp, saves=("x.shape",),
              kernels={"cuda": _sum_cuda},
              vjp_kernels={"numpy": _sum_numpy_vjp},
              linear=True, batch="axis", fresh=True,
              reduction="add", per_example="reduction")
_mean = def_op("reduce_mean", _mean_forward, vjp=_mean_vjp, jvp=_mean_jvp,
               vjp_kernels={"numpy": _mean_numpy_vjp},
               saves=("x.shape",), linear=True, batch="axis", fresh=True,
               per_example="reduction")
_max = def_op("reduce_max", _forward("max"), vjp=_extreme_vjp, jvp=_extreme_jvp,
              saves=("x", "out"), batch="axis", per_example="reduction")
_min = def_op("reduce_min", _forward("min"), vjp=_extreme_vjp, jvp=_extreme_jvp,
              saves=("x", "out"), batch="axis", per_example="reduction")
_prod = def_op("reduce_prod", _forward("prod"), vjp=_prod_vjp, jvp=_prod_jvp, saves=("x", "out"),
               batch="axis")


def _reduction(op, doc, floats_only=False, example="[[1.0, 2.0], [3.0, 4.0]]"):
    def fn(input_tensor, axis=None, keepdims=False, name=None):
        x = floating(input_tensor, op.name) if floats_only else tensor(input_tensor)
        data = x._data
        axes = norm_axes(_axis(axis, op.name), data.ndim, op.name)
        if data.dtype.kind == "b":
            raise InvalidArgumentError(f"{op.name}: bool tensors are not supported; use "
                                       "tg.reduce_any / tg.reduce_all or cast first")
        if op is not _mean and op is not _sum and op is not _prod and data.size == 0:
            raise InvalidArgumentError(f"{op.name}: empty input of shape {x.shape}")
        return apply(op, (x,), {"axis": axes, "keepdims": bool(keepdims)})

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = f"""{doc} over `axis` (all axes if None), keeping them as size 1 if `keepdims`.

    >>> tg.{op.name}(tg.constant({example}), axis=0).shape
    (2,)
    """
    fn.op = op
    return fn


reduce_sum = _reduction(_sum, "Sum")
reduce_sum.on_arrays = lambda dev, x, axis=None, keepdims=False: forward_on(  # (namespace.py)
    _sum, dev, (x,), {"axis": norm_axes(axis, x.ndim, "reduce_sum"), "keepdims": keepdims})
reduce_mean = _reduction(_mean, "Mean")
reduce_max = _reduction(_max, "Maximum")
reduce_min = _reduction(_min, "Minimum")
reduce_prod = _reduction(_prod, "Product")


def _bool_reduction(name, fn):
    op = def_op(name, lambda xp, x, axis, keepdims: getattr(xp, fn)(x, axis=axis,
                                                                     keepdims=keepdims),
                batch="axis")

    def f(input_tensor, axis=None, keepdims=False, name=None):
        x = tensor(input_tensor)
        return apply(op, (x,), {"axis": norm_axes(_axis(axis, op.name), x.ndim, op.name),
                                "keepdims": bool(keepdims)})

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"""Logical {fn} over `axis` (no gradient).

    >>> bool(tg.{name}(tg.constant([True, False])))
    {fn == "any"}
    """
    f.op = op
    return f


reduce_any = _bool_reduction("reduce_any", "any")
reduce_all = _bool_reduction("reduce_all", "all")


def _arg(name, fn):
    op = def_op(name, lambda xp, x, axis, dtype: getattr(xp, fn)(x, axis=axis).astype(dtype),
                batch="axis")

    def f(input, axis=None, output_type=np.int64, name=None):  # noqa: A002
        x = tensor(input)
        ax = 0 if axis is None else norm_axes(_axis(axis, op.name), x.ndim, op.name)[0]
        return apply(op, (x,), {"axis": ax, "dtype": np_dtype(output_type)})

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"""The index of the {fn[3:]}imum along `axis` (default 0); no gradient.

    >>> int(tg.{name}(tg.constant([1.0, 3.0, 2.0])))
    {1 if fn == "argmax" else 0}
    """
    f.op = op
    return f


argmax = _arg("argmax", "argmax")
argmin = _arg("argmin", "argmin")

# -- composites: gradients come from the primitives they are made of ----------------------------


def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """log(sum(exp(x))) over `axis`, computed stably (the max is subtracted first).

    >>> float(tg.reduce_logsumexp(tg.constant([0.0, 0.0])))  # log 2
    0.6931471824645996
    """
    x = floating(input_tensor, "reduce_logsumexp")
    axes = norm_axes(_axis(axis, "reduce_logsumexp"), x.ndim, "reduce_logsumexp")
    m = _u.stop_gradient(reduce_max(x, axis=axes, keepdims=True))
    m = _b.where(_b.equal(m, m), m, 0.0)  # all -inf or nan rows: shift by 0
    m = _b.where(_b.less(_u.abs(m), np.inf), m, 0.0)
    s = _u.log(reduce_sum(_u.exp(x - m), axis=axes, keepdims=True)) + m
    return s if keepdims else reshape(s, _reduced_shape(x.shape, axes))


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """Population variance (divides by n) over `axis`.

    >>> float(tg.reduce_variance(tg.constant([1.0, 3.0])))
    1.0
    """
    x = floating(input_tensor, "reduce_variance")
    mean = reduce_mean(x, axis=axis, keepdims=True)
    return reduce_mean(_u.square(x - mean), axis=axis, keepdims=keepdims)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """Population standard deviation over `axis`.

    >>> float(tg.reduce_std(tg.constant([1.0, 3.0])))
    1.0
    """
    return _u.sqrt(reduce_variance(input_tensor, axis=axis, keepdims=keepdims))


def moments(x, axes, shift=None, keepdims=False, name=None):
    """(mean, variance) over `axes`.

    >>> [float(t) for t in tg.nn.moments(tg.constant([1.0, 3.0]), axes=[0])]
    [2.0, 1.0]
    """
    x = floating(x, "moments")
    mean = reduce_mean(x, axis=axes, keepdims=True)
    var = reduce_mean(_u.square(x - mean), axis=axes, keepdims=True)
    if not keepdims:
        shape = _reduced_shape(x.shape, norm_axes(axes, x.ndim, "moments"))
        mean, var = reshape(mean, shape), reshape(var, shape)
    return mean, var


def count_nonzero(input, axis=None, keepdims=False, dtype=np.int64, name=None):  # noqa: A002
    """Number of non-zero elements over `axis` (no gradient).

    >>> int(tg.math.count_nonzero(tg.constant([0.0, 1.0, 2.0])))
    2
    """
    x = tensor(input)
    nonzero = x if x._data.dtype.kind == "b" else _b.not_equal(x, _b.scalar(0, x))
    return reduce_sum(_u.cast(nonzero, dtype), axis=axis, keepdims=keepdims)


def _reduced_shape(shape, axes):
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _prod_others(ops, x, axis):
    """prod_{j != i} x_j over the reduced axes, for every element i (no division, exact with
    zeros): the exclusive products from the left times those from the right."""
    nd = x.ndim
    rest = [i for i in range(nd) if i not in axis]
    perm = rest + list(axis)
    xt = ops.transpose(x, perm)
    lead = xt.shape[:len(rest)]
    n = math.prod([x.shape[i] for i in axis]) if axis else 1
    flat = ops.reshape(xt, lead + (n,))
    others = ops.cumprod(flat, axis=-1, exclusive=True) * \
        ops.cumprod(flat, axis=-1, exclusive=True, reverse=True)
    others = ops.reshape(others, xt.shape)
    inv = list(np.argsort(perm))
    return ops.transpose(others, inv)


# -- segment reductions ---------------------------------------------------------------------------
# data (lead batch axes) + ids.shape + rest reduced over equal ids into (num,) + rest; the batch
# axes of a cotangent or tangent lead (`lead`), and the ids index the axis after them

def _segment_key(ids, lead):
    return (slice(None),) * lead + (ids,)


def _segment_sum_forward(xp, data, ids, num, lead=0):
    shape = data.shape[:lead] + (num,) + data.shape[lead + ids.ndim:]
    out = xp.zeros(shape, dtype=data.dtype)
    add_at(xp, out, _segment_key(ids, lead), data)
    return out


def _segment_extreme_forward(fn):
    def forward(xp, data, ids, num, lead=0):
        shape = data.shape[:lead] + (num,) + data.shape[lead + ids.ndim:]
        info = xp.finfo(data.dtype) if data.dtype.kind == "f" else xp.iinfo(data.dtype)
        # an empty segment is the dtype's lowest (max) or highest (min) value, as TF
        out = xp.full(shape, info.min if fn == "maximum" else info.max, dtype=data.dtype)
        extreme_at(xp, fn, out, _segment_key(ids, lead), data)  # not CuPy's .at
        return out
    return forward


def _gather_segments(ops, g, ids, data_ndim):
    # d segment_sum / d data: each element gets its segment's cotangent
    return ops.gather(g, ids, axis=g.ndim - (data_ndim - ids.ndim + 1))


# segment_sum is linear in data: its VJP gathers, its JVP is itself on the tangent
_segment_sum = def_op("unsorted_segment_sum", _segment_sum_forward,
                      args=("data", "segment_ids"), saves=("data.shape", "segment_ids"),
                      same_dtype=False,
                      vjp=(lambda ops, g, d_shape, ids, num, lead=0:
                           _gather_segments(ops, g, ids, len(d_shape)), None),
                      jvp=lambda ops, ts, d_shape, ids, num, lead=0:
                      None if ts[0] is None else ops.op(
                          "unsorted_segment_sum", ts[0], ids, num=num,
                          lead=ts[0].ndim - len(d_shape)),
                      batch="lead")


# the gradient goes to the elements equal to their segment's extreme, shared among ties (as TF)
def _segment_extreme_vjp(ops, g, data, ids, out, num, lead=0):
    hit = ops.cast(ops.equal(data, _gather_segments(ops, out, ids, data.ndim)), data.dtype)
    ties = ops.op("unsorted_segment_sum", hit, ids, num=num)
    return _gather_segments(ops, g, ids, data.ndim) * (
        hit / _gather_segments(ops, ties, ids, data.ndim))


def _segment_extreme_jvp(ops, ts, data, ids, out, num, lead=0):
    hit = ops.cast(ops.equal(data, _gather_segments(ops, out, ids, data.ndim)), data.dtype)
    ties = ops.op("unsorted_segment_sum", hit, ids, num=num)
    nb = ts[0].ndim - data.ndim
    return ops.op("unsorted_segment_sum", ts[0] * hit, ids, num=num, lead=nb) / ties


_segment_max = def_op("unsorted_segment_max", _segment_extreme_forward("maximum"),
                      args=("data", "segment_ids"), saves=("data", "segment_ids", "out"),
                      same_dtype=False, vjp=(_segment_extreme_vjp, None),
                      jvp=_segment_extreme_jvp,
                      batch="lead")
_segment_min = def_op("unsorted_segment_min", _segment_extreme_forward("minimum"),
                      args=("data", "segment_ids"), saves=("data", "segment_ids", "out"),
                      same_dtype=False, vjp=(_segment_extreme_vjp, None),
                      jvp=_segment_extreme_jvp,
                      batch="lead")


def _segment_args(data, segment_ids, num_segments, op, sorted_ids=False):
    x = tensor(data)
    ids = tensor(segment_ids)
    if ids._data.dtype.kind not in "iu" or x.shape[:ids.ndim] != ids.shape:
        raise InvalidArgumentError(f"{op}: segment_ids must be integers whose shape {ids.shape} "
                                   f"is a prefix of data's shape {x.shape}")
    host = ids.numpy().ravel()
    if sorted_ids and host.size and np.any(np.diff(host) < 0):
        raise InvalidArgumentError(f"{op}: segment_ids must be sorted (use "
                                   f"unsorted_{op} for unsorted ids)")
    if num_segments is None:
        num_segments = int(host.max()) + 1 if host.size else 0
    num = int(num_segments)
    if host.size and (host.min() < 0 or host.max() >= num):
        raise InvalidArgumentError(f"{op}: segment ids must be in [0, {num}), got "
                                   f"{int(host.min())}..{int(host.max())}")
    return x, ids, num


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """Sums of `data` over equal `segment_ids`, as tf.math.unsorted_segment_sum: shape
    (num_segments,) + data.shape[segment_ids.ndim:].

    >>> tg.math.unsorted_segment_sum(tg.constant([1.0, 2.0, 3.0]), [1, 0, 1], 2).numpy()
    array([2., 4.], dtype=float32)
    """
    x, ids, num = _segment_args(data, segment_ids, num_segments, "unsorted_segment_sum")
    return apply(_segment_sum, (x, ids), {"num": num})


def unsorted_segment_mean(data, segment_ids, num_segments, name=None):
    """Means of `data` over equal `segment_ids` (0 for an empty segment), as TF.

    >>> tg.math.unsorted_segment_mean(tg.constant([1.0, 2.0, 3.0]), [1, 0, 1], 3).numpy()
    array([2., 2., 0.], dtype=float32)
    """
    x, ids, num = _segment_args(data, segment_ids, num_segments, "unsorted_segment_mean")
    total = apply(_segment_sum, (x, ids), {"num": num})
    ones = _u.cast(_b.equal(ids, ids), x.dtype)
    counts = apply(_segment_sum, (ones, ids), {"num": num})
    counts = reshape(counts, counts.shape + (1,) * (x.ndim - ids.ndim))
    return total / _b.maximum(counts, 1.0)


def unsorted_segment_max(data, segment_ids, num_segments, name=None):
    """Maxima of `data` over equal `segment_ids` (the dtype's lowest value for an empty
    segment), as TF; the gradient is shared among ties.

    >>> tg.math.unsorted_segment_max(tg.constant([1.0, 5.0, 3.0]), [1, 0, 1], 2).numpy()
    array([5., 3.], dtype=float32)
    """
    x, ids, num = _segment_args(data, segment_ids, num_segments, "unsorted_segment_max")
    return apply(_segment_max, (x, ids), {"num": num})


def unsorted_segment_min(data, segment_ids, num_segments, name=None):
    """Minima of `data` over equal `segment_ids` (the dtype's highest value for an empty
    segment), as TF.

    >>> tg.math.unsorted_segment_min(tg.constant([1.0, 5.0, 3.0]), [1, 0, 1], 2).numpy()
    array([5., 1.], dtype=float32)
    """
    x, ids, num = _segment_args(data, segment_ids, num_segments, "unsorted_segment_min")
    return apply(_segment_min, (x, ids), {"num": num})


def _sorted_segment(unsorted, op):
    def fn(data, segment_ids, name=None):
        x, ids, num = _segment_args(data, segment_ids, None, op, sorted_ids=True)
        return unsorted(x, ids, num)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"""As `unsorted_{op}` with sorted ids and as many segments as the largest id
    plus one, as tf.math.{op}.

    >>> tg.math.{op}(tg.constant([1.0, 2.0, 4.0]), [0, 0, 1]).numpy().shape
    (2,)
    """
    return fn


segment_sum = _sorted_segment(unsorted_segment_sum, "segment_sum")
segment_mean = _sorted_segment(unsorted_segment_mean, "segment_mean")
segment_max = _sorted_segment(unsorted_segment_max, "segment_max")
segment_min = _sorted_segment(unsorted_segment_min, "segment_min")


# -- scans ----------------------------------------------------------------------------------------

def _scan_forward(fn):
    def forward(xp, x, axis, exclusive, reverse):
        if reverse:
            x = xp.flip(x, axis=axis)
        out = getattr(xp, fn)(x, axis=axis, dtype=x.dtype)
        if exclusive and x.shape[axis]:  # shift by one along the axis, the identity first
            first = xp.full_like(xp.take(out, [0], axis=axis), 0 if fn == "cumsum" else 1)
            out = xp.concatenate([first, xp.take(out, range(x.shape[axis] - 1), axis=axis)],
                                 axis=axis)
        return xp.flip(out, axis=axis) if reverse else out
    return forward


# cumsum is linear, and its transpose is the cumsum the other way
_cumsum = def_op("cumsum", _scan_forward("cumsum"), linear=True,
                 vjp=lambda ops, g, axis, exclusive, reverse:
                 ops.cumsum(g, axis=axis, exclusive=exclusive, reverse=not reverse),
                 batch="leading")


# d cumprod(x)_i / dx_j = cumprod(x)_i / x_j for j in the scan of i: g's cotangent is the cumsum
# of g * out the other way, divided by x (as TensorFlow: inf or nan where x is 0)
def _cumprod_vjp(ops, g, x, out, axis, exclusive, reverse):
    return ops.cumsum(g * out, axis=axis, exclusive=exclusive, reverse=not reverse) / x


def _cumprod_jvp(ops, t, x, out, axis, exclusive, reverse):
    return out * ops.cumsum(t / x, axis=axis, exclusive=exclusive, reverse=reverse)


_cumprod = def_op("cumprod", _scan_forward("cumprod"), saves=("x", "out"), vjp=_cumprod_vjp,
                  jvp=_cumprod_jvp, batch="leading")


def _scan(op, doc):
    def fn(x, axis=0, exclusive=False, reverse=False, name=None):
        t = tensor(x)
        if t._data.dtype.kind not in "iufc":
            raise InvalidArgumentError(f"{op.name}: expected a numeric tensor, got {t.dtype.name}")
        if t.ndim == 0:
            raise InvalidArgumentError(f"{op.name}: a scalar has no axis to scan; give a tensor "
                                       "of rank >= 1")
        # the axis counted from the right, so that leading batch axes of g pass through
        return apply(op, (t,), {"axis": norm_axis(_axis(axis, op.name), t.ndim, op.name),
                                "exclusive": bool(exclusive), "reverse": bool(reverse)})

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = doc
    fn.op = op
    return fn


cumsum = _scan(_cumsum, """The cumulative sum along `axis` (`exclusive`: each element gets the sum
    of those before it; `reverse`: from the end), as `tf.math.cumsum`.

    >>> tg.math.cumsum(tg.constant([1.0, 2.0, 3.0])).numpy()
    array([1., 3., 6.], dtype=float32)
    >>> tg.math.cumsum(tg.constant([1.0, 2.0, 3.0]), exclusive=True, reverse=True).numpy()
    array([5., 3., 0.], dtype=float32)
    """)
cumprod = _scan(_cumprod, """The cumulative product along `axis` (`exclusive`, `reverse` as in
    `cumsum`), as `tf.math.cumprod`. Its gradient divides by x, as TensorFlow's: inf or nan
    where x is 0 (`reduce_prod`'s gradient is exact with zeros).

    >>> tg.math.cumprod(tg.constant([1.0, 2.0, 3.0]), exclusive=True).numpy()
    array([1., 1., 2.], dtype=float32)
    """)



# -- scatters and lookups built from segment reductions -------------------------------------------

def _tensor_scatter_extreme(op, segment, extreme, tensor_, indices, updates):
    x = tensor(tensor_)
    u = tensor(updates)
    key, _, inverse, n = _shape.unique_positions(op, x, indices, u)
    rows = reshape(u, (-1,) + x.shape[len(key):])
    best = segment(rows, inverse.astype(np.int32), n)  # the extreme update at each position
    return _shape.tensor_scatter_nd_update(x, np.stack(key, axis=-1) if key else
                                           np.zeros((n, 0), np.int32),
                                           extreme(_shape.getitem(x, key), best))


def tensor_scatter_nd_max(tensor_, indices, updates, name=None):
    """`tensor_` with each slice at `indices` replaced by the elementwise max of it and its
    updates, as `tf.tensor_scatter_nd_max`; the gradient goes to the larger (ties: as
    `tf.maximum`).

    >>> tg.tensor_scatter_nd_max(tg.zeros(3), [[0], [2], [0]], tg.constant([1.0, -1.0, 3.0])
    ...                          ).numpy()
    array([3., 0., 0.], dtype=float32)
    """
    return _tensor_scatter_extreme("tensor_scatter_nd_max", unsorted_segment_max, _b.maximum,
                                   tensor_, indices, updates)


def tensor_scatter_nd_min(tensor_, indices, updates, name=None):
    """`tensor_` with each slice at `indices` replaced by the elementwise min of it and its
    updates, as `tf.tensor_scatter_nd_min`.

    >>> tg.tensor_scatter_nd_min(tg.zeros(3), [[1]], tg.constant([-2.0])).numpy()
    array([ 0., -2.,  0.], dtype=float32)
    """
    return _tensor_scatter_extreme("tensor_scatter_nd_min", unsorted_segment_min, _b.minimum,
                                   tensor_, indices, updates)


def embedding_lookup(params, ids, max_norm=None, name=None):
    """The rows of `params` at `ids`, as `tf.nn.embedding_lookup`: `params` is a tensor or a
    list of shards split along axis 0 by TensorFlow's "div" strategy (consecutive ids per
    shard, so the shards concatenated are the table); with `max_norm`, each row looked up is
    scaled down to L2 norm `max_norm` if it is longer. The gradient scatters into the table.

    >>> tg.nn.embedding_lookup(tg.constant([[0.0, 1.0], [2.0, 3.0]]), [1, 1, 0]).numpy()
    array([[2., 3.],
           [2., 3.],
           [0., 1.]], dtype=float32)
    """
    shards = list(params) if isinstance(params, (list, tuple)) else [params]
    if not shards:
        raise InvalidArgumentError("embedding_lookup: params must be a tensor or a non-empty "
                                   "list of tensors")
    table = tensor(shards[0]) if len(shards) == 1 else _shape.concat(shards, axis=0)
    if table.ndim < 1:
        raise InvalidArgumentError(f"embedding_lookup: params must have rank >= 1, got shape "
                                   f"{table.shape}")
    rows = _shape.gather(table, ids, axis=0)
    if max_norm is None:
        return rows
    axes = tuple(range(rows.ndim - table.ndim + 1, rows.ndim))
    norm = _u.sqrt(reduce_sum(rows * rows, axis=axes, keepdims=True)) if axes else \
        _u.abs(rows)
    limit = _b.scalar(float(max_norm), norm)
    return rows * (limit / _b.maximum(norm, limit))


# -- cumulative_logsumexp -------------------------------------------------------------------------

def _cumulative_logsumexp_forward(xp, x, axis, exclusive, reverse):
    if reverse:
        x = xp.flip(x, axis=axis)
    if exclusive and x.shape[axis]:  # shift by one along the axis, log 0 = -inf first
        first = xp.full_like(xp.take(x, [0], axis=axis), -xp.inf)
        x = xp.concatenate([first, xp.take(x, range(x.shape[axis] - 1), axis=axis)], axis=axis)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if xp is np:  # exact however far the terms lie apart
            out = np.logaddexp.accumulate(x, axis=axis)
        else:  # shifted by the row's max: prefixes ~700 (float64) below it underflow to -inf
            m = xp.max(x, axis=axis, keepdims=True) if x.size else x
            m = xp.where(xp.isfinite(m), m, 0)
            out = xp.log(xp.cumsum(xp.exp(x - m), axis=axis)) + m
    return xp.flip(out, axis=axis) if reverse else out


def _log_parts(ops, v):
    """log(max(v, 0)) and log(max(-v, 0)), -inf where that part is 0, with gradients that stay
    finite (the logs only see ones there)."""
    pos, neg = v > 0, v < 0
    return (ops.where(pos, ops.log(ops.where(pos, v, 1.0)), -np.inf),
            ops.where(neg, ops.log(ops.where(neg, -v, 1.0)), -np.inf))


# d out_j / d x_i = exp(x_i - out_j) for each i in the scan of j: g's cotangent is
# exp(x) times the scan the other way of g exp(-out), in logs (g split by sign), as TensorFlow's.
# Where out is -inf (an exclusive scan's first element), g reaches nothing.
def _cumulative_logsumexp_vjp(ops, g, x, out, axis, exclusive, reverse):
    live = out > -np.inf
    out_safe = ops.where(live, out, 0.0)
    parts = []
    for lg in _log_parts(ops, g):
        lg = ops.where(live, lg - out_safe, -np.inf)
        parts.append(ops.exp(x + ops.op("cumulative_logsumexp", lg, axis=axis,
                                       exclusive=exclusive, reverse=not reverse)))
    return parts[0] - parts[1]


# t_out_j = sum over the scan of j of exp(x_i - out_j) t_i, in logs (t split by sign)
def _cumulative_logsumexp_jvp(ops, t, x, out, axis, exclusive, reverse):
    out_safe = ops.where(out > -np.inf, out, 0.0)
    parts = [ops.exp(ops.op("cumulative_logsumexp", x + lt, axis=axis, exclusive=exclusive,
                            reverse=reverse) - out_safe) for lt in _log_parts(ops, t)]
    return parts[0] - parts[1]


_cumulative_logsumexp = def_op("cumulative_logsumexp", _cumulative_logsumexp_forward,
                               batch="axis",
                               saves=("x", "out"), vjp=_cumulative_logsumexp_vjp,
                               jvp=_cumulative_logsumexp_jvp)


def cumulative_logsumexp(x, axis=0, exclusive=False, reverse=False, name=None):
    """log(cumsum(exp(x))) along `axis` without overflow (`exclusive`, `reverse` as in
    `cumsum`; an exclusive scan starts at log 0 = -inf), as `tf.math.cumulative_logsumexp`.

    >>> tg.math.cumulative_logsumexp(tg.constant([0.0, 0.0, 0.0])).numpy().round(4)
    array([0.    , 0.6931, 1.0986], dtype=float32)
    """
    t = floating(x, "cumulative_logsumexp")
    if t.ndim == 0:
        raise InvalidArgumentError("cumulative_logsumexp: a scalar has no axis to scan; give a "
                                   "tensor of rank >= 1")
    ax = norm_axis(_axis(axis, "cumulative_logsumexp"), t.ndim, "cumulative_logsumexp")
    return apply(_cumulative_logsumexp, (t,), {"axis": ax, "exclusive": bool(exclusive),
                                               "reverse": bool(reverse)})


# -- counting: in_top_k, bincount, confusion_matrix ---------------------------------------------

def in_top_k(targets, predictions, k, name=None):
    """Whether predictions[i, targets[i]] is among the k largest of row i (ties at the boundary
    count as in), as tf.math.in_top_k; false where that prediction is not finite or the
    target is out of range.

    >>> tg.math.in_top_k([2, 0], tg.constant([[0.1, 0.3, 0.6], [0.2, 0.5, 0.3]]), 1).numpy()
    array([ True, False])
    """
    p = tensor(predictions)
    t = tensor(targets)
    if p.ndim != 2 or t.ndim != 1 or t.shape[0] != p.shape[0] or t._data.dtype.kind not in "iu":
        raise InvalidArgumentError(f"in_top_k: predictions must be a matrix (batch, classes) and "
                                   f"targets an integer vector (batch,), got {p.shape} and "
                                   f"{t.dtype.name} of shape {t.shape}")
    if p._data.dtype.kind != "f":
        raise InvalidArgumentError(f"in_top_k: predictions must be floating, got "
                                   f"{p.dtype.name}")
    n = p.shape[1]
    valid = _b.logical_and(_b.greater_equal(t, 0), _b.less(t, n))
    safe = _b.where(valid, t, _b.scalar(0, t))
    picked = reshape(apply(_shape._take_along, (p, _shape.expand_dims(safe, -1)), {"axis": -1}),
                     (-1,))
    count = reduce_sum(_u.cast(_b.greater(p, _shape.expand_dims(picked, -1)), np.int32), -1)
    return _b.logical_and(_b.logical_and(valid, _u.is_finite(picked)),
                          _b.less(count, _b.scalar(int(k), count)))




def _counts_dtype(weights, dtype):
    return weights._data.dtype if weights is not None else np_dtype(dtype)


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype=np.int32, name=None,
             axis=None, binary_output=False):
    """How often each value 0, 1, ... occurs in the non-negative integers `arr` (all axes), or
    the sum of `weights` at those positions, as tf.math.bincount: the length is
    max(arr) + 1, at least `minlength`, at most `maxlength` (larger values are dropped); the
    dtype is the weights' (else `dtype`). Unlike TF, floating `arr` is an error (TF truncates
    it) and the result is differentiable in `weights`. Only axis=None is supported.

    >>> tg.math.bincount([1, 1, 3]).numpy()
    array([0, 2, 0, 1], dtype=int32)
    """
    x = tensor(arr)
    if x._data.dtype.kind not in "iu":
        raise InvalidArgumentError(f"bincount: arr must be integers, got {x.dtype.name}; use "
                                   f"tg.cast(arr, tg.int32) first")
    if axis not in (None, 0) or binary_output:
        raise InvalidArgumentError("bincount: only axis=None (count over all axes) and "
                                   "binary_output=False are supported")
    w = None if weights is None else tensor(weights)
    if w is not None and w.size and w.shape != x.shape:
        raise InvalidArgumentError(f"bincount: `weights` must be the same shape as `arr` or a "
                                   f"length-0 `Tensor`, got {w.shape} and {x.shape}")
    w = w if w is not None and w.size else None
    host = x.numpy().reshape(-1)
    if host.size and host.min() < 0:
        raise InvalidArgumentError("bincount: Input arr must be non-negative!")
    n = max(int(host.max()) + 1 if host.size else 0, 0 if minlength is None else int(minlength))
    n = n if maxlength is None else min(n, int(maxlength))
    keep = host < n
    idx = Tensor(x._dev.xp.asarray(host[keep].reshape(-1, 1)), x._dev)
    dt = _counts_dtype(w, dtype)
    if w is None:
        ones = Tensor(x._dev.xp.ones(idx.shape[0], dtype=dt), x._dev)
        return _shape.scatter_nd(idx, ones, [n])
    kept = _shape.boolean_mask(reshape(w, (-1,)), keep) if not keep.all() else reshape(w, (-1,))
    return _shape.scatter_nd(idx, kept, [n])


def confusion_matrix(labels, predictions, num_classes=None, weights=None, dtype=np.int32,
                     name=None):
    """The (num_classes, num_classes) matrix whose [i, j] counts (or sums `weights` over) the
    examples with label i predicted as j, as tf.math.confusion_matrix (`num_classes` defaults
    to the largest label or prediction + 1; weights are cast to `dtype`).

    >>> tg.math.confusion_matrix([1, 2, 2], [2, 2, 0]).numpy()
    array([[0, 0, 0],
           [0, 0, 1],
           [1, 0, 1]], dtype=int32)
    """
    lab, pred = tensor(labels), tensor(predictions)
    for what, v in (("labels", lab), ("predictions", pred)):
        if v._data.dtype.kind not in "iu" or v.ndim != 1:
            raise InvalidArgumentError(f"confusion_matrix: `{what}` must be an integer vector, "
                                       f"got {v.dtype.name} of shape {v.shape}")
    if lab.shape != pred.shape:
        raise InvalidArgumentError(f"confusion_matrix: labels and predictions must have one "
                                   f"shape, got {lab.shape} and {pred.shape}")
    hl, hp = lab.numpy(), pred.numpy()
    n = int(max(hl.max(initial=-1), hp.max(initial=-1))) + 1 if num_classes is None \
        else int(num_classes)
    for what, h in (("labels", hl), ("predictions", hp)):
        if h.size and h.min() < 0:
            raise InvalidArgumentError(f"confusion_matrix: `{what}` contains negative values")
        if h.size and h.max() >= n:
            raise InvalidArgumentError(f"confusion_matrix: `{what}` out of bound: the largest "
                                       f"is {int(h.max())}, num_classes is {n}")
    dt = np_dtype(dtype)
    if weights is None:
        values = Tensor(lab._dev.xp.ones(lab.shape, dtype=dt), lab._dev)
    else:
        values = _u.cast(tensor(weights), dt)
        if values.shape != lab.shape:
            raise InvalidArgumentError(f"confusion_matrix: weights must have the labels' shape "
                                       f"{lab.shape}, got {values.shape}")
    return _shape.scatter_nd(_shape.stack([lab, pred], axis=1), values, [n, n])


# -- tg.function's diagonal pass (function/diagonal.py): how a value diagonal over a
# Jacobian's basis goes through the op (returns ("diag", D, p), ("plain",) or None)

def _diagonal_reduce_sum(ps, n):
    (v,) = n.ins
    d, p, size = ps.diag[v]
    _, out_shape, dtype, dev = ps.meta(n.out)
    r = len(ps.shape(v))
    axis = n.params.get("axis")
    keep = n.params.get("keepdims", False)
    axes = tuple(range(r)) if axis is None else \
        tuple(sorted({a % r for a in ((axis,) if isinstance(axis, int) else axis)}))
    if 0 in axes and p in axes:
        return None  # the trace of the diagonal: run as traced
    rest = tuple(a - 1 for a in axes if a not in (0, p))
    if rest:
        s = [x for i, x in enumerate(ps.shape(d)) if keep or i not in rest]
        d = ps.emit(_sum, [d], {"axis": rest, "keepdims": keep}, s, dtype, dev)
    if 0 not in axes and p not in axes:
        return "diag", d, p - sum(1 for a in rest if a < p - 1 and not keep)
    # summed over k or over b: the diagonal itself, with b where the result has it
    pd = p - 1 - (0 if keep else sum(1 for a in rest if a < p - 1))
    if p in axes and pd:  # over b: the values of k, now in b's place, lead
        s = list(ps.shape(d))
        perm = list(range(len(s)))
        perm.insert(0, perm.pop(pd))
        d = ps.emit(_shape.transpose.op, [d], {"perm": tuple(perm)}, [s[i] for i in perm],
                    dtype, dev)
    # over k, b stays in its place; with keepdims, the summed axes are 1 in the result
    ps.reshape_into(d, n.out, out_shape, dev)
    return ("plain",)


_sum.diagonal = _diagonal_reduce_sum


__all__ = public(globals(), ("", "math"), special=((("", "nn"), (moments,)), (("math",), (
    unsorted_segment_sum, unsorted_segment_mean, unsorted_segment_max, unsorted_segment_min,
    segment_sum, segment_mean, segment_max, segment_min)), (("math",), (cumulative_logsumexp,)),
    (("",), (tensor_scatter_nd_max, tensor_scatter_nd_min)), (("nn",), (embedding_lookup,)),
    (("math", "nn"), (in_top_k,)), (("math",), (bincount, confusion_matrix))))
