"""Elementwise functions of two (or three) tensors, with numpy broadcasting.

Rules return cotangents in the broadcast output shape; the sweep sums them down to each input's
shape. Python scalars adopt the other operand's dtype (float32 stays float32).
"""
import math

import numpy as np

from ..backends import checks
from .registry import InvalidArgumentError, def_op, exact_ufunc, passthrough, quiet
from ..core.tensor import Tensor, _thread, as_tensor_pair, scalar_like
from ._base import EMPTY, apply, apply2, call2, public, tensor
from .unary import is_finite as _is_finite, square


def _public(op, doc):
    """The public function of a binary op: Python scalars adopt the tensor's dtype."""
    def fn(x, y, name=None):
        if type(x) is Tensor:  # the hot path, inlined
            ty = type(y)
            if ty is Tensor:
                return apply2(op, x, y, EMPTY)
            if ty is float or ty is int:
                return apply2(op, x, scalar_like(y, x), EMPTY)
        return call2(op, x, y)

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = doc
    fn.op = op
    fn.plain = True  # fn(x, y) is the op itself: rules on arrays call its forward directly
    return fn


def _binary(name, forward, vjp=None, saves=(), doc="", linear=False, api="tg", c=None,
            zero_when=()):
    op = def_op(name, forward, args=("x", "y"), vjp=vjp, saves=saves, elementwise=True,
                linear=linear, c=c, zero_when=zero_when)
    return _public(op, f"""{doc}

    >>> {api}.{name}(tg.constant([1.0, 2.0]), 3.0).shape
    (2,)
    """)


add = _binary("add", exact_ufunc("add", lambda xp, x, y: x + y), c="x + y", vjp=(passthrough, passthrough),
              linear=True, doc="x + y, elementwise with broadcasting.")
subtract = _binary("subtract", exact_ufunc("subtract", lambda xp, x, y: x - y), c="x - y",
                   vjp=(passthrough, lambda ops, g: -g), linear=True,
                   doc="x - y, elementwise with broadcasting.")


def _times(g, other):
    """g * other, the product's cotangent; `other` itself where g is a numpy view spreading a
    single 1 over other's shape and dtype (a sum's cotangent from the seed: the dot product
    of a Hessian-vector product, `reduce_sum(g * v)`), as 1 * v is v, bit for bit."""
    if type(g) is np.ndarray and g.base is not None and g.shape == getattr(other, "shape", ()) \
            and g.dtype == other.dtype and g.size and not any(g.strides) and g.flat[0] == 1:
        return other
    return g * other


# d(xy) = y dx + x dy
multiply = _binary("multiply", exact_ufunc("multiply", lambda xp, x, y: x * y), c="x * y",
                   vjp=(lambda ops, g, x, y: _times(g, y), lambda ops, g, x, y: _times(g, x)),
                   saves=("x", "y"),
                   zero_when=(("x",), ("y",)), doc="x * y, elementwise with broadcasting.")


def _divide_forward(xp, x, y):
    if x.dtype.kind in "iu":  # TF's truediv: int32 -> float64 (no silent narrowing)
        return xp.true_divide(x, y, dtype=xp.float64 if x.dtype.itemsize > 2 else xp.float32)
    return x / y


# d(x/y) = dx / y - x dy / y^2
divide = _binary("divide", quiet(_divide_forward), saves=("x", "y"), c="x / y",
                 vjp=(lambda ops, g, x, y: g / y, lambda ops, g, x, y: -g * (x / (y * y))),
                 zero_when=(("x",),),
                 doc="x / y, elementwise (true division: integers give floats, as TF).")
truediv = divide


def _pow_dy(ops, g, x, y, out):
    # d(x^y)/dy = x^y log x, defined as 0 where x <= 0 (as TF)
    safe = ops.where(ops.greater(x, 0.0), x, 1.0)
    return g * (out * ops.log(safe))


# d(x^y)/dx = y x^(y-1)
pow = _binary("pow", quiet(lambda xp, x, y: xp.power(x, y)), saves=("x", "y", "out"),  # noqa: A001
              vjp=(lambda ops, g, x, y, out: g * (y * ops.pow(x, y - 1.0)), _pow_dy),
              doc="x ** y, elementwise.")
# the larger input gets the gradient; ties go to x (as TF)
maximum = _binary("maximum", lambda xp, x, y: xp.maximum(x, y), saves=("x", "y"),
                  vjp=(lambda ops, g, x, y: ops.keep(ops.greater_equal(x, y), g),
                       lambda ops, g, x, y: ops.keep(ops.less(x, y), g)),
                  doc="The larger of x and y, elementwise.")
minimum = _binary("minimum", lambda xp, x, y: xp.minimum(x, y), saves=("x", "y"),
                  vjp=(lambda ops, g, x, y: ops.keep(ops.less_equal(x, y), g),
                       lambda ops, g, x, y: ops.keep(ops.greater(x, y), g)),
                  doc="The smaller of x and y, elementwise.")


# atan2(y, x)' = (x, -y) / (x^2 + y^2)
def _atan2_vjp_y(ops, g, y, x):
    return g * (x / (x * x + y * y))


def _atan2_vjp_x(ops, g, y, x):
    return g * (-y / (x * x + y * y))


atan2 = _binary("atan2", quiet(lambda xp, y, x: xp.arctan2(y, x)), saves=("x", "y"),
                vjp=(_atan2_vjp_y, _atan2_vjp_x),
                doc="The angle of the point (x, y), atan2(y, x), elementwise (y first, as TF).")


# xlogy(x, y) = x log y, and 0 where x == 0 (whatever y is), as TF; so are its derivatives:
# d/dx = log y, d/dy = x / y, both 0 where x == 0
def _xlog_forward(log):
    def forward(xp, x, y):
        return xp.where(x == 0, xp.zeros_like(x), x * getattr(xp, log)(y))
    return quiet(forward)


def _xlog_vjp_x(log):
    def rule(ops, g, x, y):
        return ops.where(ops.not_equal(x, 0.0), g * getattr(ops, log)(y), 0.0)
    return rule


def _xlog_vjp_y(shift):
    def rule(ops, g, x, y):
        return ops.where(ops.not_equal(x, 0.0), g * (x / (y + shift) if shift else x / y), 0.0)
    return rule


xlogy = _binary("xlogy", _xlog_forward("log"), saves=("x", "y"),
                vjp=(_xlog_vjp_x("log"), _xlog_vjp_y(0.0)), zero_when=(("x",),),
                doc="x * log(y), elementwise, and 0 where x is 0 (as tf.math.xlogy).",
                api="tg.math")
xlog1py = _binary("xlog1py", _xlog_forward("log1p"), saves=("x", "y"),
                  vjp=(_xlog_vjp_x("log1p"), _xlog_vjp_y(1.0)), zero_when=(("x",),),
                  doc="x * log(1 + y), elementwise, and 0 where x is 0 (as tf.math.xlog1py).",
                  api="tg.math")


def _divisor_checked(name, xp, x, y):
    """Integer x // y and x % y raise where y is 0, as TensorFlow's kernels ("Integer division
    by zero"; numpy and CuPy give 0): at once on the host, and on a device by a deferred check
    (backends.checks: no sync, raised at the next host read). A result with no elements
    divides nothing."""
    if not (x.size and y.size):
        return
    if checks.deferred(xp):
        shapes = f"x {x.dtype.name}{list(x.shape)}, y {y.dtype.name}{list(y.shape)}"
        checks.check(xp, y == 0,
                     lambda host: InvalidArgumentError(
                         f"{name}: {_zero_divisor(host)} ({shapes}; found on the device, "
                         f"reported at the first read of a value after it)"),
                     y)
    elif (y == 0).any():
        raise ZeroDivisionError(_zero_divisor(y))


def _zero_divisor(y):
    at = [int(i) for i in np.argwhere(y == 0)[0]]
    place = f"y{at}" if at else "y"
    return (f"Integer division by zero: {place} is 0; integer floordiv (//) and floormod (%) "
            f"need a nonzero divisor everywhere (a float divisor gives inf or nan instead)")


def _floordiv_forward(xp, x, y):
    if x.dtype.kind == "f":
        # TensorFlow's floor(x / y): inf // 2 is inf (numpy's floor_divide: nan), 1 // 0.1 is 10
        return xp.floor(x / y)
    if x.dtype.kind in "iu":
        _divisor_checked("floordiv", xp, x, y)
    return xp.floor_divide(x, y)


def _floormod_forward(xp, x, y):
    if x.dtype.kind in "iu":
        _divisor_checked("floormod", xp, x, y)
    return xp.mod(x, y)


floordiv = _binary("floordiv", quiet(_floordiv_forward),
                   doc="floor(x / y), elementwise (integers: by zero raises, as TF); no "
                       "gradient.")
# d(x - floor(x / y) y) = dx - floor(x / y) dy, away from the jumps (TensorFlow's gradient)
floormod = _binary("floormod", quiet(_floormod_forward), saves=("x", "y"),
                   vjp=(passthrough, lambda ops, g, x, y: -g * ops.floor(x / y)),
                   doc="x - floor(x / y) * y, elementwise (integers: by zero raises, as TF; "
                       "the gradient is TensorFlow's: 1 for x, -floor(x / y) for y).")
mod = floormod


def squared_difference(x, y, name=None):
    """(x - y)^2, elementwise.

    >>> tg.squared_difference(tg.constant([1.0]), 3.0).numpy()
    array([4.], dtype=float32)
    """
    return square(subtract(x, y))


# -- where -----------------------------------------------------------------------------------------

def _where_arrays(xp, c, x, y):
    """xp.where of x and y of one dtype, with that dtype: CuPy 14 gives float32 for bfloat16
    operands one of which is 0-d (it reads it as a Python scalar; seen on an H200, where a
    traced ReLU's gradient, where(mask, g, 0), then met a bfloat16 kernel in a product)."""
    out = xp.where(c, x, y)
    return out if out.dtype == x.dtype else out.astype(x.dtype)


_where_op = def_op("where", _where_arrays, args=("c", "x", "y"),
                   saves=("c",), elementwise=True, same_dtype=False, fresh=True,
                   c="c ? x : y", zero_when=(("x", "y"),),
                   vjp=(None, lambda ops, g, c: ops.keep(c, g),
                        lambda ops, g, c: ops.keep(ops.logical_not(c), g)))


def where(condition, x=None, y=None, name=None):
    """Picks x where `condition` holds, else y (broadcasting); with only a condition, the
    indices of its true elements, as an int64 (n, rank) tensor.

    >>> tg.where(tg.constant([True, False]), 1.0, 2.0).numpy()
    array([1., 2.], dtype=float32)
    """
    c = tensor(condition)
    if x is None and y is None:
        return _true_indices(c)
    if (x is None) != (y is None):
        raise ValueError("where: x and y must both be given or both be None (then the indices "
                         "of the true elements are returned)")
    if c._data.dtype.kind != "b":
        raise InvalidArgumentError(f"where: condition must be bool, got {c.dtype.name}")
    x, y = as_tensor_pair(x, y, "where")
    if x._data.dtype != y._data.dtype:
        raise InvalidArgumentError(f"where: x and y must have one dtype, got {x.dtype.name} and "
                                   f"{y.dtype.name}")
    return apply(_where_op, (c, x, y), EMPTY)


where.op = _where_op
where.on_arrays = lambda dev, c, x, y: _where_arrays(dev.xp, c, x, y)  # rules on arrays

# where(condition) alone: the indices of the true (non-zero) elements, (n, rank) int64. Their
# number is a value: inside tg.function it is a guard (a new count retraces), so that every
# later shape in the graph holds; the indices themselves are computed at every call
_count_true = def_op("count_true",
                     lambda xp, c: xp.asarray(xp.count_nonzero(c), dtype=np.int64))
_where_indices = def_op("where_indices", lambda xp, c: xp.argwhere(c).astype(np.int64))


def _true_indices(c):
    if _thread.tracers:
        int(apply(_count_true, (c,), EMPTY))
    return apply(_where_indices, (c,), EMPTY)

# -- comparisons and logic (no gradient) -----------------------------------------------------------


def _predicate(name, forward, doc, c=None):
    op = def_op(name, forward, args=("x", "y"), batch="broadcast", c=c)
    return _public(op, f"""{doc} (a bool tensor; no gradient).

    >>> tg.{name}(tg.constant([1.0, 2.0]), 1.5).dtype
    tg.bool
    """)


equal = _predicate("equal", exact_ufunc("equal", lambda xp, x, y: xp.equal(x, y)), "x == y, elementwise",
                   c="x == y")
not_equal = _predicate("not_equal", exact_ufunc("not_equal", lambda xp, x, y: xp.not_equal(x, y)),
                       "x != y, elementwise", c="x != y")
less = _predicate("less", exact_ufunc("less", lambda xp, x, y: xp.less(x, y)), "x < y, elementwise", c="x < y")
less_equal = _predicate("less_equal", exact_ufunc("less_equal", lambda xp, x, y: xp.less_equal(x, y)),
                        "x <= y, elementwise", c="x <= y")
greater = _predicate("greater", exact_ufunc("greater", lambda xp, x, y: xp.greater(x, y)), "x > y, elementwise",
                     c="x > y")
greater_equal = _predicate("greater_equal", exact_ufunc("greater_equal", lambda xp, x, y: xp.greater_equal(x, y)),
                           "x >= y, elementwise", c="x >= y")


def _logical(name, forward):
    op = def_op(name, forward, args=("x", "y"), batch="broadcast")

    def fn(x, y, name=None):
        x, y = as_tensor_pair(x, y, op.name)
        for t in (x, y):
            if t._data.dtype.kind != "b":
                raise InvalidArgumentError(f"{op.name}: expected bool tensors, got "
                                           f"{t.dtype.name}")
        return apply(op, (x, y), EMPTY)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"""Elementwise logical {name[8:]} of two bool tensors.

    >>> tg.{name}(tg.constant([True, False]), True).dtype
    tg.bool
    """
    fn.op = op
    return fn


logical_and = _logical("logical_and", lambda xp, x, y: xp.logical_and(x, y))
logical_or = _logical("logical_or", lambda xp, x, y: xp.logical_or(x, y))
logical_xor = _logical("logical_xor", lambda xp, x, y: xp.logical_xor(x, y))
_not_op = def_op("logical_not", lambda xp, x: xp.logical_not(x), batch="broadcast")


def logical_not(x, name=None):
    """Elementwise logical not of a bool tensor.

    >>> tg.logical_not(tg.constant([True])).numpy()
    array([False])
    """
    x = tensor(x)
    if x._data.dtype.kind != "b":
        raise InvalidArgumentError(f"logical_not: expected a bool tensor, got {x.dtype.name}")
    return apply(_not_op, (x,), EMPTY)


logical_not.op = _not_op


def scalar(value, like):
    return scalar_like(value, like)


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """Clamps to [min, max]; the gradient passes where the value was not clipped.

    >>> tg.clip_by_value(tg.constant([-2.0, 0.5, 2.0]), -1.0, 1.0).numpy()
    array([-1. ,  0.5,  1. ], dtype=float32)
    """
    return minimum(maximum(t, clip_value_min), clip_value_max)


def add_n(inputs, name=None):
    """The elementwise sum of a list of tensors of one shape.

    >>> tg.add_n([tg.ones(2), tg.ones(2)]).numpy()
    array([2., 2.], dtype=float32)
    """
    ts = [tensor(t) for t in inputs]
    shapes = {t.shape for t in ts}
    if len(shapes) != 1:
        raise ValueError(f"add_n: inputs must have one shape, got {[t.shape for t in ts]}")
    total = ts[0]
    for t in ts[1:]:
        total = add(total, t)
    return total


def divide_no_nan(x, y, name=None):
    """x / y, and 0 where y is 0 (even where x is 0, inf or nan), as tf.math.divide_no_nan;
    the gradient is 0 there too.

    >>> tg.math.divide_no_nan(tg.constant([1.0, 3.0]), tg.constant([0.0, 2.0])).numpy()
    array([0. , 1.5], dtype=float32)
    """
    x, y = as_tensor_pair(x, y, "divide_no_nan")
    zero = equal(y, scalar_like(0, y))
    safe_y = where(zero, scalar_like(1, y), y)  # keeps x / 0 (and its gradient) out of the sum
    return where(zero, scalar_like(0, x), divide(x, safe_y))


def multiply_no_nan(x, y, name=None):
    """x * y, and 0 where y is 0 (even where x is inf or nan), as tf.math.multiply_no_nan.
    Its gradient in x is g * y (0 where y is 0); in y it is g * x, except where y is 0 and x is
    not finite: there it is 0 (TF's is x, inf or nan).

    >>> tg.math.multiply_no_nan(tg.constant([float("inf"), 2.0]), tg.constant([0.0, 3.0])).numpy()
    array([0., 6.], dtype=float32)
    """
    x, y = as_tensor_pair(x, y, "multiply_no_nan")
    # where y is 0 a non-finite x is replaced by 0, so x * y (and both derivatives) stay finite
    dropped = logical_and(equal(y, scalar_like(0, y)), logical_not(_is_finite(x)))
    return multiply(where(dropped, scalar_like(0, x), x), y)


# -- tg.function's rewrites of where (function/rewrite.py) ----------------------------------------

def _size(shape):
    return math.prod(shape)


def _scaled_select(r, n):
    """`where(m, g, g * s)` (or `where(m, g * s, g)`; an activation's backward: ELU, SELU, leaky
    ReLU) with the product used only here and `m`, `s` broadcasting to fewer elements than `g`
    (broadcast over a Jacobian's basis axis): `g * where(m, 1, s)`, the select on the small
    operands and one broadcasting product on the large one, bit for bit the same values
    (`g * 1` is `g`)."""
    m, x, y = n.ins
    _, shape, dtype, _ = r.meta(n.out)
    if r.meta(m)[2] != "bool" or dtype not in ("float16", "float32", "float64"):
        return None
    for g, p, scaled_second in ((x, y, True), (y, x, False)):
        prod = r.producer(p)
        if prod is None or prod.op is not multiply.op or r.uses(p) != 1 or g not in prod.ins:
            continue
        s = prod.ins[1] if prod.ins[0] == g else prod.ins[0]
        if r.meta(p)[1:3] != (shape, dtype) or r.meta(g)[2] != dtype or r.meta(s)[2] != dtype:
            continue
        small = np.broadcast_shapes(r.meta(m)[1], r.meta(s)[1])
        if len(small) > len(shape) or _size(small) >= _size(shape) or \
                np.broadcast_shapes(r.meta(g)[1], small) != shape:
            continue
        dev = n.dev
        one = r.constant(dev, np.ones((), dtype))
        factor = r.node(dev, _where_op, (m, one, s) if scaled_second else (m, s, one), {},
                        small, dtype)
        return [factor, r.node(dev, multiply.op, (g, factor.out), {}, shape, dtype, n.out)]
    return None


def _clipped_shift(r, n):
    """`where(y > 0, c, y + c)` for a constant scalar c >= 0 (ELU's derivative from its output):
    `[minimum(y + c, c)]`, bit for bit (rounding is monotone: y > 0 gives y + c >= c; NaN
    propagates through both), one pass instead of a comparison and a select. Differentiated
    (a traced function called under a tape runs its graph's ops), the two differ only for
    0 < y < half an ulp of c, where `y + c` rounds to c: the select's derivative in y is 0
    there, the minimum's 1 (ties go to its first input)."""
    m, c, s = n.ins
    cmp, shift_node = r.producer(m), r.producer(s)
    _, shape, dtype, _ = r.meta(n.out)
    if cmp is None or shift_node is None or cmp.op is not greater.op or \
            shift_node.op is not add.op or cmp.params or shift_node.params:
        return None
    y, zero = cmp.ins
    if y not in shift_node.ins:
        return None
    shift = shift_node.ins[1] if shift_node.ins[0] == y else shift_node.ins[0]
    z, cv, sv = r.scalar(zero), r.scalar(c), r.scalar(shift)
    if z is None or z != 0 or cv is None or not cv >= 0 or sv is None or \
            sv.dtype != cv.dtype or sv != cv or r.meta(s)[1:3] != (shape, dtype) or \
            r.meta(y)[1:3] != (shape, dtype):
        return None
    return [r.node(n.dev, minimum.op, (s, c), {}, shape, dtype, n.out)]


def _where_rewrite(r, n):
    new = _scaled_select(r, n)
    if new is not None:  # the small select it makes may be a clipped shift
        new[:1] = _clipped_shift(r, new[0]) or new[:1]
        return new
    return _clipped_shift(r, n)


_where_op.rewrite = _where_rewrite


# complex(x, y) = x + i y; its cotangent g splits into its parts, as TF's gradient of Complex:
# (real(g), imag(g))
def _complex_forward(xp, x, y):
    shape = np.broadcast_shapes(x.shape, y.shape)
    out = xp.empty(shape, dtype=xp.complex64 if x.dtype == xp.float32 else xp.complex128)
    parts = out.view(x.dtype).reshape(shape + (2,))  # (real, imaginary) pairs, in place
    parts[..., 0] = x
    parts[..., 1] = y
    return out


def _complex_vjp(ops, g):
    return ops.real(g), ops.imag(g)


_complex_op = def_op("complex", _complex_forward, args=("x", "y"), vjp=_complex_vjp,
                     linear=True, batch="broadcast")


def complex(real, imag, name=None):  # noqa: A001 (TF's name)
    """`real + i imag` (float32 parts give complex64, float64 parts complex128; the parts
    broadcast), as tf.complex / tf.dtypes.complex.

    >>> tg.complex(tg.constant([1.0, 2.0]), tg.constant([3.0, 4.0])).numpy()
    array([1.+3.j, 2.+4.j], dtype=complex64)
    """
    x, y = tensor(real), tensor(imag)
    if x._data.dtype != y._data.dtype or x._data.dtype.kind != "f" or \
            x._data.dtype.itemsize not in (4, 8):
        raise TypeError(f"complex: real and imag must both be float32 or both float64, got "
                        f"{x.dtype.name} and {y.dtype.name}")
    return apply2(_complex_op, x, y, EMPTY)


complex.op = _complex_op


__all__ = public(globals(), ("", "math"), special=((("",), (where, clip_by_value)),
                                                 (("math",), (xlogy, xlog1py)),
                                                 (("math",), (divide_no_nan, multiply_no_nan)),
                                                 ((), (scalar,)), (("",), (complex,))))
