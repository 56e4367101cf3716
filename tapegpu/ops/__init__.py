"""All ops, by family; importing this registers them and gives tensors their operators."""
from .creation import eye, fill, linspace, ones, ones_like, range, zeros, zeros_like  # noqa: F401
from ..core.tensor import Tensor, Variable, constant, convert_to_tensor  # noqa: F401
from .unary import *  # noqa: F401,F403
from .unary import (abs, cast, cos, elu, exp, floor, gelu, identity, leaky_relu, log, negative,
    relu, relu6, round, selu, sigmoid, sign, sin, softplus, sqrt, square, stop_gradient, tanh)
from .binary import (add, divide, equal, floordiv, floormod, greater, greater_equal, less,
    less_equal, logical_and, logical_not, logical_or, logical_xor, maximum, minimum, mod,
    multiply, not_equal, pow, squared_difference, subtract, truediv, where)
from .reduce import (argmax, argmin, count_nonzero, moments, reduce_all, reduce_any,
    reduce_logsumexp, reduce_max, reduce_mean, reduce_min, reduce_prod, reduce_std, reduce_sum,
    reduce_variance)
from .shape import (broadcast_to, concat, expand_dims, gather, getitem, matrix_transpose,
    one_hot, pad, rank, reshape, shape, size, split, squeeze, stack, tile, transpose, unstack)
from .linalg import (cholesky, clip_by_norm, det, diag_part, einsum, global_norm, inv, logdet,
    matmul, norm, slogdet, solve, tensordot, trace)
from .nn import (batch_normalization, bias_add, dropout, l2_loss, log_softmax,
    sigmoid_cross_entropy_with_logits, softmax, softmax_cross_entropy_with_logits,
    sparse_softmax_cross_entropy_with_logits)
from . import unary as _unary_mod


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
    ts = [convert_to_tensor(t) for t in inputs]
    shapes = {t.shape for t in ts}
    if len(shapes) != 1:
        raise ValueError(f"add_n: inputs must have one shape, got {[t.shape for t in ts]}")
    total = ts[0]
    for t in ts[1:]:
        total = add(total, t)
    return total


def _install_operators():
    """Python operators for Tensor and Variable (a variable reads its value first)."""
    def rev(fn):
        return lambda a, b: fn(b, a)

    def _matmul_op(a, b):
        return matmul(a, b)

    def _T(a):
        return transpose(a)

    table = {
        "__add__": add, "__radd__": rev(add), "__sub__": subtract, "__rsub__": rev(subtract),
        "__mul__": multiply, "__rmul__": rev(multiply), "__truediv__": divide,
        "__rtruediv__": rev(divide), "__floordiv__": floordiv, "__rfloordiv__": rev(floordiv),
        "__mod__": floormod, "__rmod__": rev(floormod), "__pow__": pow, "__rpow__": rev(pow),
        "__matmul__": _matmul_op, "__rmatmul__": rev(_matmul_op),
        "__lt__": less, "__le__": less_equal, "__gt__": greater, "__ge__": greater_equal,
        "__eq__": equal, "__ne__": not_equal,
        "__and__": logical_and, "__rand__": rev(logical_and), "__or__": logical_or,
        "__ror__": rev(logical_or), "__xor__": logical_xor, "__rxor__": rev(logical_xor),
        "__neg__": negative, "__abs__": abs, "__invert__": logical_not,
        "__getitem__": getitem, "__pos__": lambda a: a,
    }
    for name, fn in table.items():
        setattr(Tensor, name, fn)
    Tensor.T = property(_T)
    Tensor.to = lambda self, device: _copy_to(self, device)

    def via_read(fn):
        def method(self, *args):
            return fn(self._read(), *args)
        return method

    for name, fn in table.items():
        setattr(Variable, name, via_read(fn))
    Variable.T = property(lambda self: transpose(self._read()))


def _copy_to(x, device):
    from ..core.device import copy_to
    return copy_to(x, device)


_install_operators()
