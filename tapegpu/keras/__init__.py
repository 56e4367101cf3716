"""`tg.keras`: a Keras 3 subset (models, layers, optimizers, losses, metrics, callbacks) on
tapegpu's own layers and optimizers.

`tg.keras.layers.Dense is tg.layers.Dense`, `tg.keras.optimizers.Adam is tg.optimizers.Adam`
and `tg.keras.losses` holds `tg.losses`' classes: one implementation, two spellings. A program
written for `tf.keras` runs with `import tapegpu as tf`.

>>> keras = tg.keras
>>> model = keras.Sequential([keras.Input(shape=(3,)),
...                           keras.layers.Dense(4, activation="gelu"),
...                           keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> x = np.zeros((8, 3), np.float32); y = np.zeros((8, 1), np.float32)
>>> history = model.fit(x, y, epochs=2, verbose=0)
>>> len(history.history["loss"])
2
"""
import sys as _sys
import types as _types

from .. import optimizers as _optimizers
from ..models import initializers as _initializers
from ..models import losses as _losses
from ..models import regularizers as _regularizers
from ..ops import EXPORTS as _EXPORTS
from ..ops import control_flow as _control_flow
from ..ops import numpy_names as _numpy_names
from ..ops.reduce import moments as _moments
from ..ops.shape import top_k as _top_k
from ..ops.unary import stop_gradient as _stop_gradient
from ..core.tensor import convert_to_tensor as _convert_to_tensor
from ..autodiff.vectorize import vectorized_map as _vectorized_map
from . import callbacks, layers, metrics  # noqa: F401
from .layers.activations import get_activation as _get_activation
from .layers.core import Input, InputLayer, KerasTensor  # noqa: F401
from .tensorboard import TensorBoard as _TensorBoard
callbacks.TensorBoard = _TensorBoard
from . import datasets as _datasets
from .model import Functional, Model, Sequential  # noqa: F401
from .training import get_optimizer as _get_optimizer
from . import training as _training
from .extras import utils  # noqa: F401
from . import backend  # noqa: F401
utils.unpack_x_y_sample_weight = _training.unpack_x_y_sample_weight
utils.pack_x_y_sample_weight = _training.pack_x_y_sample_weight
from . import applications  # noqa: F401


def _namespace(name, doc, **members):
    ns = _types.ModuleType(f"tapegpu.keras.{name}", doc)
    for k, v in members.items():
        setattr(ns, k, v)
    return ns


optimizers = _namespace(
    "optimizers", "Keras optimizers: the classes of `tg.optimizers`, and `get`.",
    Optimizer=_optimizers.Optimizer, SGD=_optimizers.SGD, Adam=_optimizers.Adam,
    AdamW=_optimizers.AdamW, RMSprop=_optimizers.RMSprop, Adagrad=_optimizers.Adagrad,
    schedules=_optimizers.schedules, get=_get_optimizer)

losses = _namespace("losses", "Keras losses: the classes and functions of `tg.losses`.",
                    **{k: v for k, v in vars(_losses).items()
                       if not k.startswith("_") and callable(v) and
                       getattr(v, "__module__", "") == _losses.__name__})

initializers = _namespace(
    "initializers", "Keras initializers: those of `tg.initializers`.",
    **{k: v for k, v in vars(_initializers).items()
       if not k.startswith("_") and callable(v) and
       getattr(v, "__module__", "") == _initializers.__name__})

activations = _namespace(
    "activations", "Keras activations by name (`get`), as functions of tapegpu.",
    get=_get_activation, linear=lambda x: x,
    **{name: fn for name, fn in _EXPORTS.items() if "activations" in fn.api})



def _dot_product_attention(query, key, value, bias=None, mask=None, scale=None,
                           is_causal=False, flash_attention=None, attn_logits_soft_cap=None):
    """Keras 3's `keras.ops.dot_product_attention`: tg.nn.scaled_dot_product_attention (which
    takes cuDNN's flash attention by itself where it applies, whatever `flash_attention`)."""
    if attn_logits_soft_cap is not None:
        raise NotImplementedError("dot_product_attention: attn_logits_soft_cap is not "
                                  "supported by tapegpu")
    return _EXPORTS["scaled_dot_product_attention"](query, key, value, bias=bias, mask=mask,
                                                    scale=scale, is_causal=is_causal)


def _ops_namespace():
    """Keras 3's `keras.ops`: numpy's names (`tg.experimental.numpy`: mean, sum, argmax,
    reshape, ...), the activations (with Keras' defaults where they differ from TF's: `gelu`
    approximates, `leaky_relu` takes `negative_slope`) and Keras' core ops."""
    members = {k: v for k, v in _numpy_names.TABLE.items() if callable(v) and
               not isinstance(v, type) and k != "experimental_enable_numpy_behavior"}
    members.update({k: v for k, v in vars(activations).items()
                    if not k.startswith("_") and k not in ("get", "linear")})
    gelu, leaky = activations.gelu, activations.leaky_relu
    members.update(
        gelu=lambda x, approximate=True: gelu(x, approximate=approximate),
        leaky_relu=lambda x, negative_slope=0.2: leaky(x, alpha=negative_slope),
        cast=_EXPORTS["cast"], convert_to_tensor=_convert_to_tensor,
        convert_to_numpy=lambda x: _convert_to_tensor(x).numpy(),
        stop_gradient=_stop_gradient, rsqrt=_EXPORTS["rsqrt"], erf=_EXPORTS["erf"],
        logsumexp=lambda x, axis=None, keepdims=False: _EXPORTS["reduce_logsumexp"](
            x, axis=axis, keepdims=keepdims),
        one_hot=lambda x, num_classes, axis=-1, dtype=None: _EXPORTS["one_hot"](
            x, num_classes, axis=axis, dtype=dtype or "float32"),
        moments=lambda x, axes, keepdims=False: _moments(x, axes, keepdims=keepdims),
        top_k=lambda x, k, sorted=True: _top_k(x, k, sorted=sorted),
        scatter=lambda indices, values, shape: _EXPORTS["scatter_nd"](indices, values, shape),
        cond=_control_flow.cond, while_loop=_control_flow.while_loop,
        vectorized_map=_vectorized_map, dot_product_attention=_dot_product_attention)
    return _namespace("ops", "Keras 3's `keras.ops` on tapegpu's ops.", **members)


ops = _ops_namespace()

regularizers = _namespace(
    "regularizers", "Keras weight regularizers: `L1`, `L2`, `L1L2` (and `l1`, `l2`, `l1_l2`).",
    Regularizer=_regularizers.Regularizer, L1=_regularizers.L1, L2=_regularizers.L2,
    L1L2=_regularizers.L1L2, l1=_regularizers.l1, l2=_regularizers.l2,
    l1_l2=_regularizers.l1_l2, get=_regularizers.get)

datasets = _datasets.namespace()



def _load_model(filepath, custom_objects=None, compile=True, safe_mode=True):  # noqa: A002
    """Keras' `keras.models.load_model`: not available (tapegpu has no whole-model format);
    it raises, naming what to use instead.

    >>> tg.keras.models.load_model("model.keras")
    Traceback (most recent call last):
    NotImplementedError: keras.models.load_model('model.keras'): tapegpu has no whole-model file format; build the model in code and call model.load_weights(...), or load a tg.saved_model export with tg.saved_model.load
    """
    raise NotImplementedError(
        f"keras.models.load_model({filepath!r}): tapegpu has no whole-model file format; build "
        f"the model in code and call model.load_weights(...), or load a tg.saved_model export "
        f"with tg.saved_model.load")


models = _namespace("models", "`Model`, `Sequential`, `load_model` (which raises: no .keras "
                    "format).", Model=Model, Sequential=Sequential, load_model=_load_model)

# `from tapegpu.keras.losses import Huber` (as `from tensorflow.keras.losses import Huber`)
for _ns in (optimizers, losses, initializers, activations, regularizers, models, utils, backend,
            datasets):
    _sys.modules.setdefault(_ns.__name__, _ns)

for _name in ("Adamax", "Nadam", "Adadelta", "Lion", "Ftrl"):  # also by name in compile()
    setattr(optimizers, _name, getattr(_optimizers, _name))
    _training._OPTIMIZERS.setdefault(_name.lower(), getattr(_optimizers, _name))

# keras.mixed_precision (Keras 3: policies, LossScaleOptimizer); the optimizer in
# keras.optimizers too
from . import mixed_precision  # noqa: E402,F401
optimizers.LossScaleOptimizer = _optimizers.LossScaleOptimizer
DTypePolicy = mixed_precision.DTypePolicy

# -- more of Keras' public names (tapegpu/compat/surface.py lists the rest as refusals) --------
from . import random  # noqa: E402,F401  (keras.random)
from . import initializers_extra as _initializers_extra  # noqa: E402
from . import legacy_preprocessing as _legacy  # noqa: E402
from . import ops_more as _ops_more  # noqa: E402
from .cloning import Variable, clone_model  # noqa: E402,F401
from .layers.base import Layer  # noqa: E402,F401  (keras.Layer)
from .metrics import Metric  # noqa: E402,F401
from .. import optimizers as _tg_optimizers  # noqa: E402

Optimizer = _tg_optimizers.Optimizer
Loss = getattr(losses, "Loss", None)
Initializer = _initializers.Initializer
Regularizer = _regularizers.Regularizer
for _k, _v in _initializers_extra.members().items():
    setattr(initializers, _k, _v)
    if not hasattr(_initializers, _k):  # tf.initializers is tg.initializers
        setattr(_initializers, _k, _v)
for _k in ("truncated_normal", "lecun_uniform", "identity"):
    _initializers._BY_NAME.setdefault(_k, getattr(_initializers_extra, "".join(
        p.title() for p in _k.split("_")) if _k != "identity" else "Identity"))
for _k, _v in _ops_more.NAMES.items():
    if not hasattr(ops, _k):
        setattr(ops, _k, _v)
models.clone_model = clone_model


class _Reduction:
    """Keras 2's `tf.keras.losses.Reduction`: the names a loss's `reduction=` takes."""
    AUTO, NONE, SUM, SUM_OVER_BATCH_SIZE = "auto", "none", "sum", "sum_over_batch_size"

    @classmethod
    def all(cls):
        return (cls.AUTO, cls.NONE, cls.SUM, cls.SUM_OVER_BATCH_SIZE)

    @classmethod
    def validate(cls, key):
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key: {key}. Expected keys are {cls.all()}")


_Reduction.__name__ = _Reduction.__qualname__ = "Reduction"
losses.Reduction = _Reduction
for _name in ("img_to_array", "array_to_img", "load_img", "save_img", "get_file"):
    setattr(utils, _name, getattr(_legacy, _name))
utils.clear_session = backend.clear_session
from . import dataset_utils as _dataset_utils  # noqa: E402
for _name in ("image_dataset_from_directory", "text_dataset_from_directory",
              "audio_dataset_from_directory"):
    setattr(utils, _name, getattr(_dataset_utils, _name))
utils.standardize_dtype = backend.standardize_dtype
utils.is_keras_tensor = backend.is_keras_tensor

preprocessing = _namespace(
    "preprocessing", "Keras 2's `keras.preprocessing`: `text`, `sequence` and `image` helpers "
    "(tapegpu/keras/legacy_preprocessing.py), and the dataset helpers.",
    text=_namespace("preprocessing.text", "Keras 2's text helpers.",
                    Tokenizer=_legacy.Tokenizer, text_to_word_sequence=_legacy.text_to_word_sequence,
                    one_hot=_legacy.one_hot, hashing_trick=_legacy.hashing_trick,
                    tokenizer_from_json=_legacy.tokenizer_from_json),
    sequence=_namespace("preprocessing.sequence", "Keras 2's sequence helpers.",
                        pad_sequences=utils.pad_sequences, skipgrams=_legacy.skipgrams,
                        make_sampling_table=_legacy.make_sampling_table),
    image=_namespace("preprocessing.image", "Keras 2's image helpers.",
                     img_to_array=_legacy.img_to_array, array_to_img=_legacy.array_to_img,
                     load_img=_legacy.load_img, save_img=_legacy.save_img),
    timeseries_dataset_from_array=utils.timeseries_dataset_from_array,
    image_dataset_from_directory=utils.image_dataset_from_directory,
    text_dataset_from_directory=utils.text_dataset_from_directory)
for _ns in (preprocessing, preprocessing.text, preprocessing.sequence, preprocessing.image,
            random):
    _sys.modules.setdefault(_ns.__name__, _ns)
