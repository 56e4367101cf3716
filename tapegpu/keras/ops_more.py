"""More of Keras 3's `keras.ops`, written with tapegpu's ops (differentiable where the
operation is): `norm` (numpy's `linalg.norm`), the `flip`/`stack`/`diag` family, the
activations Keras adds (`hard_sigmoid`, `hard_silu`, `log_sigmoid`, `celu`, `glu`), the
losses (`binary_crossentropy`, ...), `normalize`, `divide_no_nan`, `is_tensor`, `identity`.

>>> float(tg.keras.ops.norm(tg.constant([3.0, 4.0])))
5.0
"""
import numpy as np

_TG = []


def _tg():
    if not _TG:
        import tapegpu
        _TG.append(tapegpu)
    return _TG[0]


def _t(x):
    return _tg().convert_to_tensor(x)


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002
    """The vector or matrix norm of `x`, as `numpy.linalg.norm`: the 2-norm of the flattened
    tensor by default; vector norms (`ord` a number, inf, -inf, 0) over one axis; matrix norms
    ('fro', 'nuc' via singular values is not available; 1, -1, inf, -inf) over two.

    >>> tg.keras.ops.norm(tg.constant([[1.0, -2.0], [3.0, 4.0]]), ord=1, axis=1).numpy()
    array([3., 7.], dtype=float32)
    """
    tg = _tg()
    x = _t(x)
    if x.dtype.is_integer or x.dtype.is_bool:
        x = tg.cast(x, "float32")
    if axis is None:
        if ord in (None, "fro", "euclidean", 2) and (ord != 2 or len(x.shape) <= 1):
            return tg.sqrt(tg.reduce_sum(tg.square(x), keepdims=keepdims))
        axis = tuple(range(len(x.shape)))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    a = tg.abs(x)
    if len(axes) == 1:
        ax = axes[0]
        if ord is None or ord == 2:
            return tg.sqrt(tg.reduce_sum(tg.square(x), axis=ax, keepdims=keepdims))
        if ord == np.inf:
            return tg.reduce_max(a, axis=ax, keepdims=keepdims)
        if ord == -np.inf:
            return tg.reduce_min(a, axis=ax, keepdims=keepdims)
        if ord == 0:
            return tg.reduce_sum(tg.cast(tg.not_equal(x, 0), x.dtype), axis=ax,
                                 keepdims=keepdims)
        if ord == 1:
            return tg.reduce_sum(a, axis=ax, keepdims=keepdims)
        if isinstance(ord, str):
            raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
        return tg.pow(tg.reduce_sum(tg.pow(a, float(ord)), axis=ax, keepdims=keepdims),
                      1.0 / float(ord))
    if len(axes) == 2:
        r, c = axes
        if ord in (None, "fro"):
            return tg.sqrt(tg.reduce_sum(tg.square(x), axis=axes, keepdims=keepdims))
        if ord in (1, -1):
            s = tg.reduce_sum(a, axis=r, keepdims=True)
            out = (tg.reduce_max if ord == 1 else tg.reduce_min)(s, axis=c, keepdims=True)
        elif ord in (np.inf, -np.inf):
            s = tg.reduce_sum(a, axis=c, keepdims=True)
            out = (tg.reduce_max if ord == np.inf else tg.reduce_min)(s, axis=r, keepdims=True)
        else:
            raise ValueError(f"norm: matrix norm order {ord!r} is not available in tapegpu "
                             f"(valid: None, 'fro', 1, -1, inf, -inf)")
        return out if keepdims else tg.squeeze(out, list(sorted(a % len(x.shape)
                                                                for a in axes)))
    raise ValueError(f"norm: axis must be None, an int or a pair of ints, got {axis!r}")


def normalize(x, axis=-1, order=2, epsilon=None):
    """`x` divided by its `order`-norm along `axis` (Keras 3's `ops.normalize`).

    >>> tg.keras.ops.normalize(tg.constant([3.0, 4.0])).numpy()
    array([0.6, 0.8], dtype=float32)
    """
    tg = _tg()
    x = _t(x)
    n = norm(x, ord=order, axis=axis, keepdims=True)
    return x / tg.maximum(n, epsilon or 1e-12)


def is_tensor(x):
    """Whether `x` is a tapegpu tensor (or variable)."""
    from ..core.tensor import Tensor, Variable
    return isinstance(x, (Tensor, Variable))


def identity(n, dtype=None):
    """The n x n identity matrix (numpy's `identity`; floatx by default)."""
    from ..core.floatx import floatx
    return _tg().eye(n, dtype=dtype or floatx())


def dtype(x):
    """`x`'s dtype name (Keras 3's `ops.dtype`)."""
    return _t(x).dtype.name


def flip(x, axis=None):
    tg = _tg()
    x = _t(x)
    axes = list(range(len(x.shape))) if axis is None else \
        [axis] if isinstance(axis, int) else list(axis)
    return tg.reverse(x, axes)


def fliplr(x):
    return flip(x, 1)


def flipud(x):
    return flip(x, 0)


def hstack(xs):
    xs = [_t(x) for x in xs]
    return _tg().concat(xs, axis=0 if len(xs[0].shape) == 1 else 1)


def vstack(xs):
    tg = _tg()
    xs = [_t(x) for x in xs]
    xs = [tg.reshape(x, (1, -1)) if len(x.shape) == 1 else x for x in xs]
    return tg.concat(xs, axis=0)


def log2(x):
    return _tg().math.log(_t(x)) / np.log(2.0)


def log10(x):
    return _tg().math.log(_t(x)) / np.log(10.0)


def logaddexp(x1, x2):
    tg = _tg()
    return tg.reduce_logsumexp(tg.stack([_t(x1), _t(x2)]), axis=0)


def divide_no_nan(x1, x2):
    """x1 / x2, 0 where x2 is 0 (TF's `divide_no_nan`)."""
    return _tg().math.divide_no_nan(x1, x2)


def hard_sigmoid(x):
    """relu6(x + 3) / 6 (Keras 3's hard_sigmoid).

    >>> tg.keras.ops.hard_sigmoid(tg.constant([-3.0, 0.0, 3.0])).numpy()
    array([0. , 0.5, 1. ], dtype=float32)
    """
    tg = _tg()
    return tg.nn.relu6(_t(x) + 3.0) / 6.0


def hard_silu(x):
    """x * hard_sigmoid(x)."""
    x = _t(x)
    return x * hard_sigmoid(x)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    return -_tg().nn.softplus(-_t(x))


def celu(x, alpha=1.0):
    """max(x, 0) + min(0, alpha * (exp(x / alpha) - 1))."""
    tg = _tg()
    x = _t(x)
    return tg.maximum(x, 0.0) + tg.minimum(0.0, alpha * (tg.exp(x / alpha) - 1.0))


def glu(x, axis=-1):
    """a * sigmoid(b) of `x`'s halves along `axis`."""
    tg = _tg()
    a, b = tg.split(_t(x), 2, axis=axis)
    return a * tg.sigmoid(b)


def binary_crossentropy(target, output, from_logits=False):
    """Elementwise binary cross-entropy (Keras 3's `ops.binary_crossentropy`)."""
    from .backend import binary_crossentropy as bce
    return bce(target, output, from_logits=from_logits)


def categorical_crossentropy(target, output, from_logits=False, axis=-1):
    from ..models import losses
    return losses.categorical_crossentropy(target, output, from_logits=from_logits, axis=axis)


def sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1):
    from ..models import losses
    return losses.sparse_categorical_crossentropy(target, output, from_logits=from_logits,
                                                  axis=axis)


def full_like(x, fill_value, dtype=None):
    tg = _tg()
    x = _t(x)
    return tg.fill(x.shape, tg.cast(fill_value, dtype or x.dtype))


def count_nonzero(x, axis=None):
    tg = _tg()
    return tg.reduce_sum(tg.cast(tg.not_equal(_t(x), 0), "int32"), axis=axis)


def moveaxis(x, source, destination):
    x = _t(x)
    perm = list(range(len(x.shape)))
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    src = [s % len(perm) for s in src]
    dst = [d % len(perm) for d in dst]
    order = [p for p in perm if p not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _tg().transpose(x, order)


def in_top_k(targets, predictions, k):
    return _tg().math.in_top_k(targets, predictions, k)


def multi_hot(inputs, num_classes, axis=-1, dtype=None):
    """1 at each class index of each row of `inputs` (batch, indices), else 0."""
    tg = _tg()
    oh = tg.one_hot(tg.cast(_t(inputs), "int64"), num_classes, dtype=dtype or "float32")
    return tg.reduce_max(oh, axis=-2)


NAMES = {name: fn for name, fn in dict(globals()).items()
         if callable(fn) and not name.startswith("_") and getattr(fn, "__module__", "") ==
         __name__}
