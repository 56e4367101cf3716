"""Elementwise functions of one tensor.

Each rule states its derivative; all are `elementwise`, so their JVPs are derived from the VJP
(a diagonal Jacobian is its own transpose).
"""
import math

import numpy as np

from .registry import def_op
from ..core.dtypes import np_dtype
from ..core.tensor import Tensor, _thread
from ._base import EMPTY, apply, apply1, floating, public, tensor
from .kernels import activation_kernels, cpu_act_backward, cpu_index, tanh_float32
from .registry import InvalidArgumentError, forward_on, passthrough, quiet, ufunc

try:
    import scipy.special as _scipy_special  # optional: exact special functions
except ImportError:
    _scipy_special = None

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _max0(x):
    """numpy's maximum(x, 0) as a C expression (NaN kept, -0.0 becomes +0.0)."""
    return f"({x} > T(0) || {x} != {x} ? {x} : T(0))"


def _min0(x):
    """numpy's minimum(x, 0) as a C expression (NaN kept, -0.0 becomes +0.0)."""
    return f"({x} < T(0) || {x} != {x} ? {x} : T(0))"


def _public(op, doc, example_input="[0.5, 1.0]", floats_only=True, api="tg"):
    """The public function of a one-input elementwise op."""
    if floats_only:
        def fn(x, name=None):
            if type(x) is not Tensor or x._data.dtype.kind not in "fcV":
                x = floating(x, op.name)
            return apply1(op, x, EMPTY)
    else:
        def fn(x, name=None):
            return apply1(op, x if type(x) is Tensor else tensor(x), EMPTY)
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = f"""{doc}

    >>> {api}.{op.name}(tg.constant({example_input})).shape
    (2,)
    """
    fn.op = op
    fn.plain = True  # fn(x) is the op itself: rules on arrays call its forward directly
    return fn


def _unary(name, forward, vjp=None, saves=(), doc="", floats_only=True, example="[0.5, 1.0]",
           api="tg", **entry):
    op = def_op(name, forward, vjp=vjp, saves=saves, elementwise=True, **entry)
    return _public(op, doc or f"Elementwise {name}(x).", example, floats_only, api)


negative = _unary("negative", ufunc("negative"), c="-x", vjp=lambda ops, g: -g,
                  floats_only=False, linear=True, doc="-x, elementwise.")
# |x|' = sign(x)
abs = _unary("abs", ufunc("abs"), c="fabs(x)", vjp=lambda ops, g, x: g * ops.sign(x),  # noqa: A001
             saves=("x",),
             floats_only=False, doc="|x|, elementwise.")
# TensorFlow defines sign's gradient as zero (not None).
sign = _unary("sign", ufunc("sign"), vjp=lambda ops, g: g * 0.0, floats_only=False,
              doc="The sign of x (-1, 0, 1), elementwise; its gradient is zero.")
# (x^2)' = 2x
square = _unary("square", ufunc("square"), c="x * x", vjp=lambda ops, g, x: g * (x * 2.0),
                saves=("x",), floats_only=False, doc="x * x, elementwise.")
# sqrt(x)' = 1 / (2 sqrt(x))
sqrt = _unary("sqrt", quiet(ufunc("sqrt")), c="sqrt(x)", vjp=lambda ops, g, out: g / (out * 2.0),
              saves=("out",), doc="The square root, elementwise.")
# rsqrt(x)' = -rsqrt(x)^3 / 2
rsqrt = _unary("rsqrt", quiet(lambda xp, x: 1 / xp.sqrt(x)), c="T(1) / sqrt(x)",
               vjp=lambda ops, g, out: g * (out * out * out * -0.5), saves=("out",),
               doc="1 / sqrt(x), elementwise.")
# e^x' = e^x: keep the output, not the input
exp = _unary("exp", ufunc("exp"), c="exp(x)", vjp=lambda ops, g, out: g * out, saves=("out",),
             doc="e^x, elementwise.")
# expm1(x)' = e^x = expm1(x) + 1
expm1 = _unary("expm1", ufunc("expm1"), c="expm1(x)", vjp=lambda ops, g, out: g * (out + 1.0),
               saves=("out",), doc="e^x - 1, accurate for small x.")
# log(x)' = 1/x
log = _unary("log", quiet(ufunc("log")), c="log(x)", vjp=lambda ops, g, x: g / x, saves=("x",),
             doc="The natural logarithm, elementwise.")
# log1p(x)' = 1/(1+x)
log1p = _unary("log1p", quiet(ufunc("log1p")), c="log1p(x)", vjp=lambda ops, g, x: g / (x + 1.0),
               saves=("x",), doc="log(1 + x), accurate for small x.")
# sin' = cos, cos' = -sin
sin = _unary("sin", ufunc("sin"), c="sin(x)", vjp=lambda ops, g, x: g * ops.cos(x), saves=("x",),
             doc="The sine, elementwise.")
cos = _unary("cos", ufunc("cos"), c="cos(x)", vjp=lambda ops, g, x: g * -ops.sin(x),
             saves=("x",), doc="The cosine, elementwise.")
# tan' = 1 + tan^2
tan = _unary("tan", ufunc("tan"), c="tan(x)", vjp=lambda ops, g, out: g * (out * out + 1.0),
             saves=("out",), doc="The tangent, elementwise.")
# tanh' = 1 - tanh^2; differentiated itself (Hessians), the VJP is one op: tanh_grad
def _tanh_backward(g, out):
    return g * (1.0 - out * out)


def _tanh_vjp(ops, g, out):
    if _differentiated(ops):
        return ops.op("tanh_grad", g, out)
    return _tanh_backward(g, out)


def _tanh_numpy(x, out=None):
    # float32 correctly rounded, by the CPU kernel where it is built (kernels.py)
    return tanh_float32(x, out) if x.dtype == np.float32 else np.tanh(x, out=out)


def _tanh_forward(xp, x):
    return _tanh_numpy(x) if xp is np else xp.tanh(x)


def _tanh_into(forward, in_shapes, params):
    """tg.function's replay on numpy: tanh written into a buffer of its plan (never its input's:
    the kernel may read a block of it again)."""
    return None if params else (_tanh_numpy, False)


tanh = _unary("tanh", _tanh_forward, c="tanh(x)", vjp=_tanh_vjp,
              dc="g * (T(1) - out * out)", fresh=True, replay_into=_tanh_into,
              saves=("out",), doc="The hyperbolic tangent, elementwise.",
              **activation_kernels("tanh"))
# sinh' = cosh, cosh' = sinh
sinh = _unary("sinh", ufunc("sinh"), c="sinh(x)", vjp=lambda ops, g, x: g * ops.cosh(x),
              saves=("x",),
              doc="The hyperbolic sine, elementwise.")
cosh = _unary("cosh", ufunc("cosh"), c="cosh(x)", vjp=lambda ops, g, x: g * ops.sinh(x),
              saves=("x",),
              doc="The hyperbolic cosine, elementwise.")
# atan' = 1 / (1 + x^2)
atan = _unary("atan", ufunc("arctan"), c="atan(x)", vjp=lambda ops, g, x: g / (x * x + 1.0),
              saves=("x",), doc="The arctangent, elementwise.")
# asin' = 1 / sqrt(1 - x^2), acos' = -1 / sqrt(1 - x^2)
asin = _unary("asin", quiet(ufunc("arcsin")), c="asin(x)",
              vjp=lambda ops, g, x: g * ops.rsqrt(1.0 - x * x), saves=("x",),
              doc="The arcsine, elementwise (NaN outside [-1, 1]).")
acos = _unary("acos", quiet(ufunc("arccos")), c="acos(x)",
              vjp=lambda ops, g, x: g * -ops.rsqrt(1.0 - x * x), saves=("x",),
              doc="The arccosine, elementwise (NaN outside [-1, 1]).")


# real(z) = Re z, imag(z) = Im z. The cotangent g of a part is the complex cotangent with g in
# that part, as TF's gradients of Real and Imag: complex(g, 0), complex(0, g).
def _real_vjp(ops, g):
    return ops.complex(g, ops.zeros_like(g))


def _imag_vjp(ops, g):
    return ops.complex(ops.zeros_like(g), g)


_real_op = def_op("real", lambda xp, x: xp.real(x).copy(), vjp=_real_vjp,
                  linear=True, batch="broadcast")
_imag_op = def_op("imag", lambda xp, x: xp.imag(x).copy(), vjp=_imag_vjp,
                  linear=True, batch="broadcast")


def real(input, name=None):  # noqa: A002 (TF's name)
    """The real part of a complex tensor (float32 of complex64, float64 of complex128); a real
    numeric tensor is returned unchanged, as tf.math.real.

    >>> tg.math.real(tg.constant([1 + 2j, 3 - 4j], dtype=tg.complex64)).numpy()
    array([1., 3.], dtype=float32)
    """
    x = tensor(input)
    kind = x._data.dtype.kind
    if kind == "c":
        return apply1(_real_op, x, EMPTY)
    if kind in "biufV":
        return x
    raise TypeError(f"input must be a numeric tensor, but got tensor with dtype {x.dtype.name}")


def imag(input, name=None):  # noqa: A002 (TF's name)
    """The imaginary part of a complex tensor (float32 of complex64, float64 of complex128),
    as tf.math.imag.

    >>> tg.math.imag(tg.constant([1 + 2j, 3 - 4j], dtype=tg.complex64)).numpy()
    array([ 2., -4.], dtype=float32)
    """
    x = tensor(input)
    if x._data.dtype.kind != "c":
        raise InvalidArgumentError(f"imag: expected a complex64 or complex128 tensor, got "
                                   f"{x.dtype.name}")
    return apply1(_imag_op, x, EMPTY)


real.op, imag.op = _real_op, _imag_op


def _sigmoid(xp, x):
    if x.dtype.kind == "c":  # 1/(1+e^-x) itself, as TensorFlow's (|x| and x >= 0 are real)
        return 1 / (1 + xp.exp(-x))
    # 1/(1+e^-x) for x >= 0 and e^x/(1+e^x) for x < 0: no overflow either way
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


_SIGMOID_C = "x >= T(0) ? T(1) / (T(1) + exp(-fabs(x))) : exp(-fabs(x)) / (T(1) + exp(-fabs(x)))"

# sigmoid' = s (1 - s)
sigmoid = _unary("sigmoid", _sigmoid, vjp=lambda ops, g, out: g * (out * (1.0 - out)),
                 c=_SIGMOID_C, dc="g * (out * (T(1) - out))",
                 saves=("out",), doc="The logistic function 1 / (1 + e^-x), elementwise.",
                 **activation_kernels("sigmoid"))
sigmoid.keras_logits = "binary"  # its Keras logits kind (see tapegpu/models/tensor_attributes.py)


def _softplus(xp, x):
    # log(1 + e^x) = max(x, 0) + log1p(e^-|x|): exact for large |x|
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


# softplus' = sigmoid
softplus = _unary("softplus", _softplus, vjp=lambda ops, g, x: g * ops.sigmoid(x), saves=("x",),
                  c=_max0("x") + " + log1p(exp(-fabs(x)))", dc=f"g * ({_SIGMOID_C})",
                  doc="log(1 + e^x), elementwise, computed without overflow.",
                  **activation_kernels("softplus"))


def _special(name):
    """The forward of a special function `name` (scipy.special's and math's name): scipy's (exact
    to the last ulp) when it is installed, else math's elementwise; CuPy's cupyx on a GPU."""
    def forward(xp, x):
        if xp.__name__ != "numpy":  # CuPy's (backends/cuda.py imports CuPy: on a GPU only)
            from ..backends.cuda import special
            return special(name)(x).astype(x.dtype, copy=False)
        if _scipy_special is not None:
            return getattr(_scipy_special, name)(x).astype(x.dtype, copy=False)
        return np.vectorize(getattr(math, name), otypes=[x.dtype])(x) if x.size else x.copy()
    return forward


_erf = _special("erf")


# erf' = 2/sqrt(pi) e^(-x^2)
erf = _unary("erf", _erf, c="erf(x)",
             vjp=lambda ops, g, x: g * (ops.exp(-(x * x)) * _TWO_OVER_SQRT_PI),
             saves=("x",), doc="The error function, elementwise.")
# erfc' = -2/sqrt(pi) e^(-x^2)
erfc = _unary("erfc", _special("erfc"), saves=("x",),
              vjp=lambda ops, g, x: g * (ops.exp(-(x * x)) * -_TWO_OVER_SQRT_PI),
              doc="1 - erf(x), elementwise, accurate where erf(x) is close to 1.", api="tg.math")


def _log_sigmoid(xp, x):
    # log(1 / (1 + e^-x)) = -softplus(-x) = -(max(-x, 0) + log1p(e^-|x|)): no overflow
    return -(xp.maximum(-x, 0) + xp.log1p(xp.exp(-xp.abs(x))))


# log_sigmoid' = 1 - sigmoid(x) = sigmoid(-x)
log_sigmoid = _unary("log_sigmoid", _log_sigmoid, saves=("x",),
                     vjp=lambda ops, g, x: g * ops.sigmoid(-x),
                     doc="log(sigmoid(x)), elementwise, computed without overflow.",
                     api="tg.math")


def _is(name, ufunc_name):
    op = def_op(name, ufunc(ufunc_name), batch="broadcast")  # no gradient: a bool result
    return _public(op, f"Whether each element is {name[3:]} (a bool tensor; no gradient).",
                   "[1.0, 2.0]", api="tg.math")


is_nan = _is("is_nan", "isnan")
is_inf = _is("is_inf", "isinf")
is_finite = _is("is_finite", "isfinite")
# (1/x)' = -1/x^2
reciprocal = _unary("reciprocal", quiet(lambda xp, x: 1 / x), c="T(1) / x",
                    vjp=lambda ops, g, out: g * -(out * out), saves=("out",),
                    doc="1 / x, elementwise.")
floor = _unary("floor", ufunc("floor"), doc="Rounds down; no gradient (as in TF).")
ceil = _unary("ceil", ufunc("ceil"), doc="Rounds up; no gradient (as in TF).")
round = _unary("round", ufunc("round"),  # noqa: A001
               doc="Rounds half to even (banker's rounding, as TF); no gradient.")

# softsign(x) = x / (1 + |x|);  softsign'(x) = 1 / (1 + |x|)^2
softsign = _unary("softsign", lambda xp, x: x / (1 + xp.abs(x)), saves=("x",),
                  vjp=lambda ops, g, x: g / ops.square(1.0 + ops.abs(x)),
                  c="x / (T(1) + fabs(x))", dc="g / ((T(1) + fabs(x)) * (T(1) + fabs(x)))",
                  doc="x / (1 + |x|), elementwise.", example="[-1.0, 3.0]",
                  **activation_kernels("softsign"))

# -- activations ---------------------------------------------------------------------------------

# The backward of a piecewise-linear activation as an op of (g, features), as TensorFlow's
# ReluGrad, Relu6Grad and LeakyReluGrad: linear in g, and with a derivative in the features that
# is zero but connected (TF's ReluGradGrad returns zeros for them). So a second-order gradient
# w.r.t. what enters only through the activation's derivative (a WGAN-GP gradient penalty
# w.r.t. the critic's biases) is zeros, as in TF, not None. Rules use these ops only while a
# tape or accumulator differentiates them (`_differentiated`); otherwise they keep the plain
# ops, which the array sweep's kernels and tg.function's replay (which fuses a ReLU's greater +
# where) run fastest. Both give the same bits.

def _differentiated(ops):
    """Whether a rule's values are being differentiated: they are tensors (`ops.records`) and
    a tape or forward accumulator records them, not only a tg.function trace."""
    if not ops.records:
        return False
    tracers = _thread.tracers
    return any(getattr(r, "records", True) and r not in tracers for r in _thread.recorders)


def _zero_connected(ops, g, *saved, **params):
    # d/d(features) of a piecewise-constant derivative: 0, as a value (connected), not None;
    # one element broadcast to g's shape (a view: nothing is filled)
    return ops.broadcast_to(ops.const_like(g, 0.0), g.shape)


def _zero(g):
    return g.dtype.type(0)


# tanh_grad(g, y) = g (1 - y^2), y tanh's output (the rule's operations, so its bits; on
# numpy the CPU kernel of tanh's backward, one pass): d/dg is tanh_grad, d/dy = -2 g y
_TANH_CPU = cpu_index("tanh", backward=True)
_tanh_grad = def_op(
    "tanh_grad", lambda xp, g, y: _tanh_backward(g, y), args=("g", "y"), saves=("g", "y"),
    elementwise=True, kernels={} if _TANH_CPU is None else {
        "numpy": lambda xp, g, y: cpu_act_backward(_TANH_CPU, g, y)},
    vjp=(lambda ops, c, g, y: ops.op("tanh_grad", c, y), lambda ops, c, g, y: c * g * (y * -2.0)))

# relu_grad(g, y) = g where y > 0 (y is relu's output)
_relu_grad = def_op("relu_grad", lambda xp, g, y: xp.where(y > 0, g, _zero(g)),
                    args=("g", "y"), saves=("y",), elementwise=True,
                    vjp=(lambda ops, g, y: ops.op("relu_grad", g, y), _zero_connected))
# relu6_grad(g, x) = g where 0 < x < 6
_relu6_grad = def_op("relu6_grad", lambda xp, g, x: xp.where((x > 0) & (x < 6), g, _zero(g)),
                     args=("g", "x"), saves=("x",), elementwise=True,
                     vjp=(lambda ops, g, x: ops.op("relu6_grad", g, x), _zero_connected))
# leaky_relu_grad(g, x) = g where x > 0, else alpha g
_leaky_relu_grad = def_op(
    "leaky_relu_grad",
    lambda xp, g, x, alpha: xp.where(x > 0, g, g * xp.asarray(alpha, dtype=g.dtype)),
    args=("g", "x"), saves=("x",), elementwise=True,
    vjp=(lambda ops, g, x, alpha: ops.op("leaky_relu_grad", g, x, alpha=alpha),
         _zero_connected))


# relu' = 1 where out > 0
def _relu_vjp(ops, g, out):
    if _differentiated(ops):
        return ops.op("relu_grad", g, out)
    return ops.keep(ops.greater(out, 0.0), g)


# relu6' = 1 on (0, 6)
def _relu6_vjp(ops, g, x):
    if _differentiated(ops):
        return ops.op("relu6_grad", g, x)
    return ops.keep(ops.logical_and(ops.greater(x, 0.0), ops.less(x, 6.0)), g)


relu = _unary("relu", lambda xp, x: xp.maximum(x, 0), vjp=_relu_vjp, saves=("out",),
              c=_max0("x"), dc="out > T(0) ? g : T(0)", doc="max(x, 0), elementwise.",
              **activation_kernels("relu"))
relu6 = _unary("relu6", lambda xp, x: xp.clip(x, 0, 6), vjp=_relu6_vjp, saves=("x",),
               doc="min(max(x, 0), 6), elementwise.")


def _elu_forward(xp, x, alpha=1.0):
    # x + 0 for x > 0, 0 + alpha (e^x - 1) otherwise: the same bits as a select on x > 0,
    # without numpy's `where`, which branches per element on its mask (3x slower)
    neg = xp.expm1(xp.minimum(x, 0))
    return xp.maximum(x, 0) + (neg if alpha == 1.0 else alpha * neg)


# elu' = 1 for x > 0, alpha e^x = out + alpha for x <= 0: the output suffices
_elu_op = def_op("elu", _elu_forward, saves=("out",), elementwise=True,
                 vjp=lambda ops, g, out, alpha=1.0:
                 ops.where(ops.greater(out, 0.0), g, g * (out + alpha)),
                 c=f"{_max0('x')} + alpha * expm1({_min0('x')})",
                 dc="out > T(0) ? g : g * (out + alpha)",
                 **activation_kernels("elu"))


def elu(features, alpha=1.0, name=None):
    """Exponential linear unit: x for x > 0, alpha (e^x - 1) otherwise.

    >>> tg.nn.elu(tg.constant([-1.0, 2.0])).numpy().round(4)
    array([-0.6321,  2.    ], dtype=float32)
    """
    x = floating(features, "elu")
    return apply(_elu_op, (x,), EMPTY if alpha == 1.0 else {"alpha": float(alpha)})


elu.op = _elu_op

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(features, name=None):
    """Scaled ELU: scale * elu(x, alpha) with the self-normalising constants.

    >>> tg.nn.selu(tg.constant([1.0])).numpy()
    array([1.050701], dtype=float32)
    """
    return elu(features, alpha=_SELU_ALPHA) * _SELU_SCALE


def _leaky_forward(xp, x, alpha=0.2):
    return xp.where(x > 0, x, x * xp.asarray(alpha, dtype=x.dtype))


# leaky_relu' = 1 for x > 0, alpha otherwise
def _leaky_vjp(ops, g, x, alpha=0.2):
    if _differentiated(ops):
        return ops.op("leaky_relu_grad", g, x, alpha=alpha)
    return ops.where(ops.greater(x, 0.0), g, g * alpha)


_leaky_op = def_op("leaky_relu", _leaky_forward, saves=("x",), elementwise=True,
                   vjp=_leaky_vjp)


def leaky_relu(features, alpha=0.2, name=None):
    """x for x > 0, alpha * x otherwise.

    >>> tg.nn.leaky_relu(tg.constant([-1.0, 2.0])).numpy()
    array([-0.2,  2. ], dtype=float32)
    """
    return apply(_leaky_op, (floating(features, "leaky_relu"),), {"alpha": float(alpha)})


leaky_relu.op = _leaky_op


def _gelu_forward(xp, x, approximate=False):
    if approximate:
        c = xp.asarray(_SQRT_2_OVER_PI, dtype=x.dtype)
        return 0.5 * x * (1 + xp.tanh(c * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + _erf(xp, x * xp.asarray(_INV_SQRT_2, dtype=x.dtype)))


def _gelu_vjp(ops, g, x, approximate=False):
    if approximate:
        # u = c (x + 0.044715 x^3);  gelu' = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3*0.044715 x^2)
        x2 = x * x
        t = ops.tanh((x + x * x2 * 0.044715) * _SQRT_2_OVER_PI)
        du = (x2 * (3 * 0.044715) + 1.0) * _SQRT_2_OVER_PI
        return g * ((t + 1.0) * 0.5 + x * (1.0 - t * t) * du * 0.5)
    # gelu'(x) = Phi(x) + x phi(x), Phi the normal CDF and phi its density
    cdf = (ops.erf(x * _INV_SQRT_2) + 1.0) * 0.5
    pdf = ops.exp(x * x * -0.5) * _INV_SQRT_2PI
    return g * (cdf + x * pdf)


def _gelu_c():
    """(c, dc) of gelu: the forward and the rule above, operation for operation."""
    s, i, p = f"T({_SQRT_2_OVER_PI!r})", f"T({_INV_SQRT_2!r})", f"T({_INV_SQRT_2PI!r})"
    tanh_c = f"T(0.5) * x * (T(1) + tanh({s} * (x + T(0.044715) * x * x * x)))"
    erf_c = f"T(0.5) * x * (T(1) + erf(x * {i}))"
    t = f"tanh((x + x * (x * x) * T(0.044715)) * {s})"
    du = f"((x * x) * T({3 * 0.044715!r}) + T(1)) * {s}"
    tanh_dc = f"g * (({t} + T(1)) * T(0.5) + x * (T(1) - {t} * {t}) * ({du}) * T(0.5))"
    erf_dc = f"g * ((erf(x * {i}) + T(1)) * T(0.5) + x * (exp(x * x * T(-0.5)) * {p}))"
    return f"approximate ? {tanh_c} : {erf_c}", f"approximate ? {tanh_dc} : {erf_dc}"


_gelu_op = def_op("gelu", _gelu_forward, saves=("x",), elementwise=True, vjp=_gelu_vjp,
                  c=_gelu_c()[0], dc=_gelu_c()[1],
                  **activation_kernels("gelu"))


def gelu(features, approximate=False, name=None):
    """Gaussian error linear unit x * Phi(x) (tanh approximation with `approximate=True`).

    >>> tg.nn.gelu(tg.constant([1.0])).numpy().round(4)
    array([0.8413], dtype=float32)
    """
    x = floating(features, "gelu")
    return apply(_gelu_op, (x,), {"approximate": True} if approximate else EMPTY)


gelu.op = _gelu_op

# -- casts, identity, stop_gradient ---------------------------------------------------------------

identity_op = def_op("identity", lambda xp, x: x, vjp=passthrough, elementwise=True,
                     linear=True, view=True)


def identity(input, name=None):  # noqa: A002
    """Returns a tensor with the same value (recorded, so it has its own gradient identity).

    >>> tg.identity(tg.constant([1.0])).numpy()
    array([1.], dtype=float32)
    """
    return apply(identity_op, (tensor(input),), EMPTY)


_stop_op = def_op("stop_gradient", lambda xp, x: x, view=True, batch="broadcast")


def stop_gradient(input, name=None):  # noqa: A002
    """The same value, with no gradient flowing through it.

    >>> x = tg.constant(2.0)
    >>> with tg.GradientTape() as t:
    ...     t.watch(x)
    ...     y = x * tg.stop_gradient(x)
    >>> float(t.gradient(y, x))
    2.0
    """
    return apply(_stop_op, (tensor(input),), EMPTY)


def _cast_forward(xp, x, dtype, src):
    if dtype.kind in "iu" and x.dtype.kind == "f":
        return xp.trunc(x).astype(dtype)  # TF truncates towards zero
    return x.astype(dtype)


# d cast(x)/dx = 1: the cotangent is cast back to the input's dtype
_cast_op = def_op("cast", _cast_forward, elementwise=True, linear=True, flops=0,
                  c="x",  # the kernel's (T) conversion: fused from bool (GPUs) or T to itself
                  vjp=lambda ops, g, dtype, src: ops.cast(g, src) if src.kind in "fcV" else None)


def cast(x, dtype, name=None):
    """Converts to `dtype` (floats to ints truncate); differentiable between floating dtypes.

    >>> tg.cast(tg.constant([1.7, -1.7]), tg.int32).numpy()
    array([ 1, -1], dtype=int32)
    """
    x = tensor(x)
    target = np_dtype(dtype)
    if x._data.dtype == target:
        return x
    return apply(_cast_op, (x,), {"dtype": target, "src": x._data.dtype})


cast.op = _cast_op


def _cast_arrays(dev, x, dtype):  # rules on arrays (namespace.py)
    dtype = np_dtype(dtype)
    return x if x.dtype == dtype else forward_on(_cast_op, dev, (x,), {"dtype": dtype,
                                                                        "src": x.dtype})


cast.on_arrays = _cast_arrays


def silu(features, beta=1.0, name=None):
    """x * sigmoid(beta x), elementwise (also `tg.nn.swish`).

    >>> tg.nn.silu(tg.constant([0.0, 1.0])).numpy().round(4)
    array([0.    , 0.7311], dtype=float32)
    """
    x = floating(features, "silu")
    return x * sigmoid(x * float(beta) if beta != 1.0 else x)


swish = silu


# -- the log-gamma function and its derivatives -------------------------------------------------
# numpy has no vectorised lgamma: these evaluate in float64 with array operations only, the same
# on numpy and CuPy (cupyx's gammaln computes float32 in float32, and stand-ins of it raise at
# the poles), and round once to the input's dtype.

# Lanczos' series (g = 7, 9 terms): Gamma(z + 1) = sqrt(2 pi) t^(z + 1/2) e^-t A(z) with
# t = z + 7.5, relative error below 1e-15 for z >= -1/2
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012,
            9.9843695780195716e-6, 1.5056327351493116e-7)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# Bernoulli numbers B_2k for the asymptotic series of the polygamma functions
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


def _lgamma64(xp, x):
    # reflection below 1/2: lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x); sin(pi x) is
    # taken of x's fractional part, exact however large |x| is; poles (0, -1, ...) give inf
    refl = x < 0.5
    z = xp.where(refl, -x, x - 1.0)
    a = _LANCZOS[0]
    for k, c in enumerate(_LANCZOS[1:], 1):
        a = a + c / (z + k)
    t = z + 7.5
    lg = _HALF_LOG_2PI + (z + 0.5) * xp.log(t) - t + xp.log(a)
    frac = x - xp.floor(x)
    out = xp.where(refl, xp.log(math.pi / xp.abs(xp.sin(math.pi * frac))) - lg, lg)
    return xp.where(xp.isinf(x), xp.inf, out)  # lgamma(+-inf) = inf, as TensorFlow


def _shift_up(xp, x, n, low):
    """(y, s): y = x + m >= low for the least m >= 0, s = sum_{k<m} 1 / (x + k)^(n + 1), by the
    recurrence psi^(n)(x) = psi^(n)(x + 1) + (-1)^(n+1) n! / x^(n + 1)."""
    y, s = x, xp.zeros_like(x)
    finite = xp.isfinite(x)
    steps = float(xp.max(xp.where(finite, low - x, 0.0))) if x.size else 0.0
    for _ in range(max(int(math.ceil(steps)), 0)):
        small = finite & (y < low)
        s = s + xp.where(small, 1.0 / xp.where(small, y, 1.0) ** (n + 1), 0.0)
        y = xp.where(small, y + 1.0, y)
    return y, s


def _digamma64(xp, x):
    # reflection below 1/2: psi(x) = psi(1 - x) - pi / tan(pi x); then psi(y) = psi(y + m) -
    # sum 1/(y + k) up to y + m >= 10, and the asymptotic series
    # psi(y) = log y - 1/(2y) - sum_k B_2k / (2k y^2k); poles (0, -1, ...) give nan
    refl = x < 0.5
    y, s = _shift_up(xp, xp.where(refl, 1.0 - x, x), 0, 10.0)
    inv2 = 1.0 / (y * y)
    series, p = 0.0, inv2
    for k, b in enumerate(_BERNOULLI, 1):
        series = series + b / (2 * k) * p
        p = p * inv2
    psi = xp.log(y) - 0.5 / y - series - s
    frac = x - xp.floor(x)
    out = xp.where(refl, psi - math.pi / xp.tan(math.pi * frac), psi)
    return xp.where(refl & (frac == 0), xp.nan, out)


def _polygamma64(xp, x, n):
    # psi^(n)(x) = (-1)^(n+1) n! sum_k 1/(x + k)^(n+1): the first terms up to x + k >= 10 + n,
    # then the asymptotic series (-1)^(n+1) [(n-1)!/y^n + n!/(2 y^(n+1))
    # + sum_k B_2k (2k+n-1)! / ((2k)! y^(2k+n))]; psi^(1) reflects below 0:
    # psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x). Poles (0, -1, ...) give inf for odd n.
    refl = (x < 0) if n == 1 else xp.zeros(x.shape, dtype=bool)
    y, s = _shift_up(xp, xp.where(refl, 1.0 - x, x), n, 10.0 + n)
    series = math.factorial(n - 1) / y ** n + math.factorial(n) / (2 * y ** (n + 1))
    for k, b in enumerate(_BERNOULLI, 1):
        series = series + b * math.factorial(2 * k + n - 1) / math.factorial(2 * k) / \
            y ** (2 * k + n)
    sign = 1.0 if n % 2 else -1.0
    out = sign * (series + math.factorial(n) * s)
    if n == 1:
        frac = x - xp.floor(x)
        out = xp.where(refl, (math.pi / xp.sin(math.pi * frac)) ** 2 - out, out)
    return out


def _in_float64(fn):
    """A forward computing `fn` in float64 and rounding once to the input's dtype."""
    def forward(xp, x, **params):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return fn(xp, x.astype(xp.float64), **params).astype(x.dtype, copy=False)
    return forward


def _polygamma_forward(xp, x, n):
    if n == 0:
        return _digamma64(xp, x)
    return _polygamma64(xp, x, n)


# lgamma' = digamma
_lgamma = def_op("lgamma", _in_float64(_lgamma64), saves=("x",), elementwise=True,
                 vjp=lambda ops, g, x: g * ops.op("polygamma", x, n=0))
# (psi^(n))' = psi^(n+1); n = 0 is the digamma function
_polygamma = def_op("polygamma", _in_float64(_polygamma_forward), saves=("x",),
                    elementwise=True,
                    vjp=lambda ops, g, x, n: g * ops.op("polygamma", x, n=n + 1))


def lgamma(x, name=None):
    """log |Gamma(x)|, elementwise, as `tf.math.lgamma` (inf at 0, -1, -2, ...). Computed in
    float64 on every device and rounded once (float32 stays float32).

    >>> tg.math.lgamma(tg.constant([0.5, 3.0])).numpy()  # log sqrt(pi), log 2!
    array([0.5723649, 0.6931472], dtype=float32)
    """
    return apply1(_lgamma, floating(x, "lgamma"), EMPTY)


def digamma(x, name=None):
    """The digamma function psi(x) = d/dx lgamma(x), elementwise, as `tf.math.digamma` (nan at
    0, -1, -2, ...; float32 stays float32).

    >>> round(float(tg.math.digamma(tg.constant(1.0))), 6)  # -Euler's gamma
    -0.577216
    """
    return apply(_polygamma, (floating(x, "digamma"),), {"n": 0})


def polygamma(a, x, name=None):
    """The n-th derivative of the digamma function, elementwise, as `tf.math.polygamma`; `a`
    (the order n) must be one non-negative integer (TensorFlow also takes a tensor of orders).
    Differentiable in `x`.

    >>> round(float(tg.math.polygamma(1, tg.constant(1.0))), 6)  # pi^2 / 6
    1.644934
    """
    x = floating(x, "polygamma")
    order = a.numpy() if isinstance(a, Tensor) else np.asarray(a)
    if order.size != 1 or order.reshape(()) != np.floor(order.reshape(())) or \
            order.reshape(()) < 0:
        raise InvalidArgumentError(f"polygamma: a must be one non-negative integer, got "
                                   f"{order.tolist()!r}")
    return apply(_polygamma, (x,), {"n": int(order.reshape(()))})


# where tapegpu's API lists each function ("activations": Keras' activation names)
__all__ = public(globals(), ("", "math"), special=(
    (("", "nn", "activations"), (relu, relu6, elu, selu, gelu, leaky_relu, silu)),
    (("", "math", "nn", "activations"), (sigmoid, tanh, softplus, softsign)),
    (("",), (cast, identity, stop_gradient)),
    (("math",), (erfc, log_sigmoid, is_nan, is_inf, is_finite)),
    (("math",), (real, imag)),
    (("math",), (lgamma, digamma, polygamma))))
