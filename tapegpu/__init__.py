"""tapegpu: TensorFlow's GradientTape, on NVIDIA GPUs (CuPy + CUDA kernels) and on CPUs (numpy).

    import tapegpu as tg

    x = tg.Variable([1.0, 2.0])
    with tg.GradientTape() as tape:
        y = tg.reduce_sum(tg.sin(x) * x)
    tape.gradient(y, x)
"""
import sys as _sys
import types as _types

from .core import dtypes as _dtypes
from .core.dtypes import (DType, as_dtype, bool, complex64, complex128, float16, float32,  # noqa: F401,A004
                          float64, int8, int16, int32, int64, string, uint8, uint16, uint32,
                          uint64)
double, half = float64, float16  # TensorFlow's aliases
if hasattr(_dtypes, "bfloat16"):  # ml_dtypes' bfloat16 (absent without ml_dtypes)
    bfloat16 = _dtypes.bfloat16
from .core.tensor import (Tensor, Variable, constant, convert_to_tensor,  # noqa: F401
                          register_tensor_conversion_function)
from .core.shape import TensorShape  # noqa: F401
from .ops.registry import InvalidArgumentError  # noqa: F401
from .ops import EXPORTS as _EXPORTS
from .autodiff.tape import GradientTape, UnconnectedGradients  # noqa: F401
from .autodiff.custom import custom_gradient, grad_pass_through, recompute_grad  # noqa: F401
from .core import device as _device
from .core import nest  # noqa: F401  (tg.nest, as tf.nest)
from .core.device import copy_to, device  # noqa: F401
from .core import dlpack as _dlpack
from .ops import numpy_names as _numpy_names
# tg.experimental: dlpack (and its two functions, as before) and numpy (numpy's names)
experimental = _types.ModuleType("tapegpu.experimental")
experimental.dlpack = _dlpack.dlpack
experimental.from_dlpack, experimental.to_dlpack = _dlpack.from_dlpack, _dlpack.to_dlpack
experimental.numpy = _types.ModuleType("tapegpu.experimental.numpy", _numpy_names.__doc__)
experimental.numpy.__dict__.update(_numpy_names.TABLE)
from .core.dlpack import from_dlpack  # noqa: F401
from .ops import random as _random_ops
from . import testing as test  # noqa: F401
from .core.profiler import profile as profiler  # noqa: F401

from ._version import __version__  # noqa: E402,F401


def _namespace(name, **members):
    ns = _types.ModuleType(f"tapegpu.{name}")
    for k, v in members.items():
        setattr(ns, k, v)
    return ns


# tg.math, tg.nn, tg.linalg and the top level, as each op family declares (`fn.api`)
math = _namespace("math")
nn = _namespace("nn")
linalg = _namespace("linalg")
for _name, _fn in _EXPORTS.items():
    for _ns in _fn.api:
        if _ns in ("math", "nn", "linalg"):
            setattr(globals()[_ns], _name, _fn)
        elif not _ns:
            globals()[_name] = _fn


# tg.dtypes, as tf.dtypes: the dtypes tapegpu has (with TF's aliases), as_dtype, DType, cast
dtypes = _namespace("dtypes", DType=DType, as_dtype=as_dtype, cast=_EXPORTS["cast"], double=double,
                    half=half, **{d.name: d for d in _dtypes._BY_NUMPY.values()})

autodiff = _namespace("autodiff")
# tg.random: its public functions only (not the module's imports)
random = _namespace("random", **{_n: getattr(_random_ops, _n) for _n in _random_ops.__all__})


config = _namespace("config", list_devices=_device.list_devices,
                    default_device=_device.default_device)
from .core import config as _config  # noqa: E402
from .core import determinism as _determinism  # noqa: E402
for _name in ("list_physical_devices", "list_logical_devices", "get_visible_devices",
              "PhysicalDevice", "LogicalDevice", "set_visible_devices",
              "LogicalDeviceConfiguration", "set_logical_device_configuration",
              "get_logical_device_configuration", "set_soft_device_placement",
              "get_soft_device_placement"):
    setattr(config, _name, getattr(_config, _name))
config.optimizer = _namespace("config.optimizer",
                              set_experimental_options=_config.set_experimental_options,
                              get_experimental_options=_config.get_experimental_options)
config.experimental = _namespace("config.experimental",
                                 set_memory_growth=_config.set_memory_growth,
                                 get_memory_growth=_config.get_memory_growth,
                                 list_physical_devices=_config.list_physical_devices,
                                 list_logical_devices=_config.list_logical_devices,
                                 get_visible_devices=_config.get_visible_devices,
                                 set_visible_devices=_config.set_visible_devices,
                                 VirtualDeviceConfiguration=_config.VirtualDeviceConfiguration,
                                 set_virtual_device_configuration=(
                                     _config.set_logical_device_configuration),
                                 get_virtual_device_configuration=(
                                     _config.get_logical_device_configuration),
                                 enable_tensor_float_32_execution=(
                                     _config.enable_tensor_float_32_execution),
                                 tensor_float_32_execution_enabled=(
                                     _config.tensor_float_32_execution_enabled),
                                 enable_op_determinism=_determinism.enable_op_determinism)
config.threading = _namespace("config.threading", **{
    _name: getattr(_config, _name) for _name in (
        "set_intra_op_parallelism_threads", "get_intra_op_parallelism_threads",
        "set_inter_op_parallelism_threads", "get_inter_op_parallelism_threads")})

# -- forward mode (autodiff namespace): tapegpu/forward.py --------------------------------------
from .autodiff import forward as _forward, functional as _functional  # noqa: E402
autodiff.ForwardAccumulator = _forward.ForwardAccumulator
autodiff.GradientTape = GradientTape
autodiff.jvp = _functional.jvp
autodiff.vjp = _functional.vjp
autodiff.hvp = _functional.hvp
autodiff.hessian = _functional.hessian
autodiff.NoJVPError = _forward.NoJVPError
# -- neural-network pieces, optimizers, black-box ops: see tapegpu/nn, tapegpu/optimizers --------
from . import models  # noqa: E402
from .models import initializers, losses  # noqa: E402,F401
from .models.module import Module  # noqa: E402,F401
from . import optimizers  # noqa: E402,F401
from . import train  # noqa: E402,F401  (tg.train: checkpoints)
from . import distribute  # noqa: E402,F401  (data-parallel over MPI; mpi4py loads at init())
train.ClusterSpec = distribute.cluster_resolver.ClusterSpec  # tf.train.ClusterSpec
from .autodiff import blackbox as _blackbox  # noqa: E402
from .autodiff.blackbox import NoGradientError, numpy_function, py_function  # noqa: E402,F401
# -- tg.function: tracing into graphs (tapegpu/function) ------------------------------------------
from .function import TensorSpec, init_scope, function  # noqa: E402,F401
from .function import print_ as print  # noqa: E402,F401,A001
from .function import saved_model  # noqa: E402,F401  (tg.saved_model: save, load)
from . import io, strings  # noqa: E402,F401  (tg.io, tg.strings: host-resident string tensors)
from .io.tensors import make_ndarray, make_tensor_proto  # noqa: E402,F401
from .function import api as _function_api  # noqa: E402
config.run_functions_eagerly = _function_api.run_functions_eagerly
config.functions_run_eagerly = _function_api.functions_run_eagerly
from .ops.control_flow import TensorArray  # noqa: E402,F401  (tg.TensorArray)
# -- tg.data: input pipelines (tapegpu/data) -----------------------------------------------------
from . import data  # noqa: E402,F401
# -- tg.keras: Keras 3's layers, models, training loop, metrics (tapegpu/keras) -----------------
from . import keras  # noqa: E402,F401
# tg.layers: the classes of tg.keras.layers, the one Sequential (a tg.keras.Model) and Keras'
# activations by name
layers = _namespace("layers", Sequential=keras.Sequential,
                    get_activation=keras.layers.activations.get_activation,
                    **{_n: getattr(keras.layers, _n) for _n in keras.layers.__all__})

estimators = _namespace(
    "estimators", central_difference=_blackbox.central_difference,
    forward_difference=_blackbox.forward_difference, spsa=_blackbox.spsa,
    JacobianEstimator=_blackbox.JacobianEstimator, CentralDifference=_blackbox.CentralDifference,
    ForwardDifference=_blackbox.ForwardDifference, SPSA=_blackbox.SPSA)
# -- small TensorFlow surfaces: tg.newaxis, tg.errors, tg.image -----------------------------------
newaxis = None  # x[:, tg.newaxis] inserts an axis (tf.newaxis)
from . import errors  # noqa: E402,F401
from .ops import image as _image_ops  # noqa: E402
image = _namespace("image", **{_n: getattr(_image_ops, _n) for _n in _image_ops.__all__},
                   **{_n: getattr(io, _n) for _n in (
                       "decode_and_crop_jpeg", "decode_bmp", "decode_gif", "decode_image",
                       "decode_jpeg", "decode_png", "encode_jpeg", "encode_png",
                       "extract_jpeg_shape", "is_jpeg")})
from . import image_codecs as _codecs  # noqa: E402
audio = _namespace("audio", decode_wav=_codecs.decode_wav, encode_wav=_codecs.encode_wav)
from .autodiff.vectorize import vectorized_map  # noqa: E402,F401
from . import summary  # noqa: E402,F401  (tg.summary: scalars for TensorBoard)
from . import dtensor as _dtensor  # noqa: E402  (tg.experimental.dtensor: layouts as metadata)
experimental.dtensor = _dtensor
# `from tensorflow.experimental import dtensor`, as TensorFlow's DTensor guides import it
_sys.modules.setdefault(__name__ + ".experimental", experimental)
from . import debugging  # noqa: E402,F401  (tg.debugging: check_numerics, asserts)
# -- tg.compat (tf.compat, tf.compat.v1) and the rest of TF's and Keras' public names: each one
# resolves, to tapegpu's object or to a refusal saying why and what to use instead
# (tapegpu/compat/surface.py; the list: tapegpu/testing/api_surface/names.txt)
from . import compat  # noqa: E402,F401
compat.tf_names.install(_sys.modules[__name__])
compat.private_paths.install(_sys.modules[__name__])
compat.surface.install(_sys.modules[__name__], keras)
