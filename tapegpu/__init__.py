"""tapegpu: TensorFlow's GradientTape, on NVIDIA GPUs (CuPy + CUDA kernels) and on CPUs (numpy).

    import tapegpu as tg

    x = tg.Variable([1.0, 2.0])
    with tg.GradientTape() as tape:
        y = tg.reduce_sum(tg.sin(x) * x)
    tape.gradient(y, x)
"""
import types as _types

from .core import dtypes as _dtypes
from .core.dtypes import (DType, as_dtype, bool, complex64, complex128, float16, float32,
    float64, int8, int16, int32, int64, uint8)
from .core.tensor import Tensor, Variable, constant, convert_to_tensor  # noqa: F401
from .ops.registry import InvalidArgumentError  # noqa: F401
from .ops import (abs, add, add_n, argmax, argmin, broadcast_to, cast, clip_by_norm,
    clip_by_value, concat, cos, cosh, divide, einsum, equal, exp, expand_dims, eye, fill,
    gather, greater, identity, linspace, log, matmul, maximum, minimum, multiply, norm,
    one_hot, ones, ones_like, pad, pow, range, reduce_max, reduce_mean, reduce_sum, reshape,
    round, sigmoid, split, squeeze, stack, stop_gradient, subtract, tanh, tensordot, tile,
    transpose, unstack, where, zeros, zeros_like, rank, size, shape)
from .ops import unary as _u, binary as _b, reduce as _r, linalg as _l, nn as _n
import importlib as _importlib
_s = _importlib.import_module(".ops.shape", __name__)  # `ops.shape` is also a function
from .autodiff.tape import GradientTape, UnconnectedGradients  # noqa: F401
from .ops import fused as _fused  # noqa: F401  (array-level VJPs for the sweep)
from .ops import dispatch as _dispatch  # noqa: F401  (kernel overrides on cuda / cuda_emu)
from .autodiff.custom import custom_gradient  # noqa: F401
from .core.device import copy_to, device  # noqa: F401
from .core import dlpack as experimental  # noqa: F401
from .core.dlpack import from_dlpack  # noqa: F401
from .ops import random  # noqa: F401
from . import testing as test  # noqa: F401
from .core.profiler import profile as profiler  # noqa: F401
from .autodiff.checkpoint import recompute_grad  # noqa: F401

__version__ = "0.1.0"


def _namespace(name, **members):
    ns = _types.ModuleType(f"tapegpu.{name}")
    for k, v in members.items():
        setattr(ns, k, v)
    return ns


math = _namespace(
    "math", **{k: getattr(_u, k) for k in (
        "abs", "sign", "square", "sqrt", "rsqrt", "exp", "expm1", "log", "log1p", "sin", "cos",
        "tan", "tanh", "sinh", "cosh", "atan", "sigmoid", "softplus", "erf", "reciprocal",
        "floor", "ceil", "round", "negative")},
    **{k: getattr(_b, k) for k in (
        "add", "subtract", "multiply", "divide", "truediv", "pow", "maximum", "minimum",
        "squared_difference", "equal", "not_equal", "less", "less_equal", "greater",
        "greater_equal", "logical_and", "logical_or", "logical_not", "logical_xor", "floordiv",
        "floormod", "mod")},
    **{k: getattr(_r, k) for k in (
        "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
        "reduce_logsumexp", "reduce_variance", "reduce_std", "reduce_any", "reduce_all",
        "argmax", "argmin", "count_nonzero")},
    add_n=add_n, l2_normalize=None, divide_no_nan=None)
del math.l2_normalize, math.divide_no_nan
nn = _namespace(
    "nn", **{k: getattr(_u, k) for k in ("relu", "relu6", "elu", "selu", "gelu", "leaky_relu",
                                         "sigmoid", "tanh", "softplus")},
    **{k: getattr(_n, k) for k in (
        "softmax", "log_softmax", "sparse_softmax_cross_entropy_with_logits",
        "softmax_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits", "l2_loss",
        "batch_normalization", "dropout", "bias_add", "bias_act")},
    moments=_r.moments)
linalg = _namespace(
    "linalg", **{k: getattr(_l, k) for k in (
        "matmul", "solve", "inv", "det", "slogdet", "logdet", "cholesky", "norm", "diag_part",
        "trace", "tensordot", "einsum", "global_norm")},
    matrix_transpose=_s.matrix_transpose)
# the math, nn and linalg functions are top-level names too, as in TensorFlow
for _ns in (math, nn):
    for _k, _v in vars(_ns).items():
        if not _k.startswith("_") and _k not in globals():
            globals()[_k] = _v
reduce_min = _r.reduce_min
reduce_prod = _r.reduce_prod
reduce_logsumexp = _r.reduce_logsumexp
reduce_variance = _r.reduce_variance
reduce_std = _r.reduce_std
reduce_any = _r.reduce_any
reduce_all = _r.reduce_all
sqrt = _u.sqrt
truediv = _b.truediv
squared_difference = _b.squared_difference


def _autodiff():
    return _namespace("autodiff")


autodiff = _autodiff()


def _config():
    from .core.device import default_device, list_devices
    return _namespace("config", list_devices=list_devices, default_device=default_device)


config = _config()

# -- forward mode (autodiff namespace): tapegpu/forward.py --------------------------------------
from .autodiff import forward as _forward, forward_jacobian as _forward_jacobian  # noqa: E402
autodiff.ForwardAccumulator = _forward.ForwardAccumulator
autodiff.GradientTape = GradientTape
autodiff.jvp = _forward.jvp
autodiff.vjp = _forward.vjp
autodiff.hvp = _forward.hvp
autodiff.hessian = _forward_jacobian.hessian
autodiff.NoJVPError = _forward.NoJVPError
# -- neural-network pieces, optimizers, black-box ops: see tapegpu/nn, tapegpu/optimizers --------
from . import models  # noqa: E402
from .models import initializers, layers, losses  # noqa: E402,F401
from .models.module import Module  # noqa: E402,F401
from . import optimizers  # noqa: E402,F401
from .autodiff import blackbox as _blackbox  # noqa: E402
from .autodiff.blackbox import NoGradientError, numpy_function  # noqa: E402,F401

estimators = _namespace(
    "estimators", central_difference=_blackbox.central_difference,
    forward_difference=_blackbox.forward_difference, spsa=_blackbox.spsa,
    JacobianEstimator=_blackbox.JacobianEstimator, CentralDifference=_blackbox.CentralDifference,
    ForwardDifference=_blackbox.ForwardDifference, SPSA=_blackbox.SPSA)
