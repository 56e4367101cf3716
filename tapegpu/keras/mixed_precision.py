"""`tg.keras.mixed_precision`: Keras 3's dtype policies and loss scaling.

A policy names two dtypes: the one a layer computes in (`compute_dtype`) and the one of its
variables (`variable_dtype`). 'mixed_float16' and 'mixed_bfloat16' compute in 16 bits and keep
float32 variables: the layer casts its floating inputs to the compute dtype, and, during its
call, its trainable floating variables too (Keras 3's autocast: the product is 16-bit, the
gradient reaches the float32 variable through the cast, and the optimizer updates float32).
A plain dtype name ('float32', 'float16', 'bfloat16', 'float64') is a policy computing and
storing in that dtype.

    tg.keras.mixed_precision.set_global_policy("mixed_float16")
    model = tg.keras.Sequential([tg.keras.layers.Dense(64, activation="relu"),
                                 tg.keras.layers.Dense(10),
                                 tg.keras.layers.Activation("softmax", dtype="float32")])

Layers made without a `dtype` take the global policy when they are made; `dtype=` takes a
policy or its name. As in Keras, the last layer is usually given `dtype="float32"` so that the
outputs (and the loss) are float32; the losses cast a 16-bit prediction to float32 anyway.
`compile(auto_scale_loss=True)` (the default) wraps the optimizer of a 'mixed_float16' model in
a `LossScaleOptimizer` (bfloat16 has float32's range and needs none).

Normalization layers (BatchNormalization, LayerNormalization, GroupNormalization) compute in
float32 whatever the policy and give their output in the compute dtype, as Keras 3's.
"""
import numpy as np

from ..core.dtypes import as_dtype
from ..optimizers.loss_scale import LossScaleOptimizer  # noqa: F401

_MIXED = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


def _floatx():
    """Keras' floatx (tapegpu.core.floatx's setting; float32 where that module is absent)."""
    try:
        from ..core import floatx
    except ImportError:
        return "float32"
    return floatx.floatx()
_FLOATS = ("float16", "bfloat16", "float32", "float64")


class DTypePolicy:
    """A layer's dtypes: `compute_dtype` (its computations) and `variable_dtype` (its
    variables), from a name: 'mixed_float16', 'mixed_bfloat16' or a float dtype's name (None:
    Keras' floatx). Keras 3's `keras.DTypePolicy` (`keras.mixed_precision.Policy`).

    >>> p = tg.keras.mixed_precision.Policy("mixed_bfloat16")
    >>> p.compute_dtype, p.variable_dtype
    ('bfloat16', 'float32')
    """

    def __init__(self, name=None):
        if name is None:
            name = _floatx()
        if isinstance(name, DTypePolicy):
            name = name.name
        if not isinstance(name, str):
            try:
                name = as_dtype(name).name
            except TypeError:
                name = repr(name)
        if name in _MIXED:
            compute, variable = _MIXED[name], "float32"
        elif name in _FLOATS:
            compute = variable = name
        else:
            raise ValueError(f"DTypePolicy: cannot convert {name!r} to a mixed precision "
                             f"DTypePolicy. Valid policies include 'mixed_float16', "
                             f"'mixed_bfloat16', and the name of any float dtype such as "
                             f"'float32'.")
        if compute == "bfloat16":
            _need_bfloat16(name)
        self._name = name
        self._compute_dtype = compute
        self._variable_dtype = variable

    @property
    def name(self):
        return self._name

    @property
    def compute_dtype(self):
        """The dtype of the layer's computations and outputs, as a string."""
        return self._compute_dtype

    @property
    def variable_dtype(self):
        """The dtype of the layer's variables, as a string."""
        return self._variable_dtype

    def get_config(self):
        return {"name": self._name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __eq__(self, other):
        return isinstance(other, DTypePolicy) and other._name == self._name

    def __hash__(self):
        return hash(self._name)

    def __repr__(self):
        return f'<DTypePolicy "{self._name}">'


Policy = DTypePolicy  # Keras 3's alias (TensorFlow's Keras 2 class name)

_global = [None]  # the policy set by set_global_policy (None: floatx's)


def set_global_policy(policy):
    """Sets the policy of the layers made from now on without a `dtype`: a `DTypePolicy`, its
    name ('mixed_float16', 'mixed_bfloat16', 'float32', ...) or None (back to Keras' floatx),
    as `keras.mixed_precision.set_global_policy`. Only floating policies are accepted.

    >>> tg.keras.mixed_precision.set_global_policy("mixed_float16")
    >>> tg.keras.layers.Dense(2)(np.ones((1, 3), np.float32)).dtype
    tg.float16
    >>> tg.keras.mixed_precision.set_global_policy(None)
    """
    if policy is None:
        _global[0] = None
        return
    if not isinstance(policy, (DTypePolicy, str)):
        raise ValueError(f"set_global_policy: invalid `policy` argument {policy!r}; give a "
                         f"DTypePolicy or a policy name such as 'mixed_float16'")
    p = DTypePolicy(policy)
    _global[0] = None if p.name == "float32" and _floatx() == "float32" else p


def global_policy():
    """The global policy (`DTypePolicy(floatx())` unless `set_global_policy` set another), as
    `keras.mixed_precision.global_policy`.

    >>> tg.keras.mixed_precision.global_policy()
    <DTypePolicy "float32">
    """
    return _global[0] if _global[0] is not None else DTypePolicy(_floatx())


dtype_policy = global_policy  # Keras 3's other names
set_dtype_policy = set_global_policy


def _need_bfloat16(name):
    from ..core import dtypes
    if not hasattr(dtypes, "bfloat16"):
        raise ValueError(f"DTypePolicy {name!r}: bfloat16 needs the ml_dtypes package "
                         f"(pip install ml_dtypes)")


# -- what layers use (tapegpu/keras/layers/base.py) -----------------------------------------------

def layer_dtypes(dtype):
    """(the layer's compute dtype, its variable dtype where it differs, its policy) for a
    layer's `dtype=` argument: None for the first while it follows its first input (no dtype
    and no global policy, the fast case)."""
    if dtype is None:
        p = _global[0]
        if p is None:
            return None, None, None
    elif isinstance(dtype, DTypePolicy) or isinstance(dtype, str) and dtype in _MIXED:
        p = DTypePolicy(dtype)
    else:
        d = np.dtype(as_dtype(dtype).as_numpy_dtype)
        return d, None, None
    compute = np.dtype(as_dtype(p.compute_dtype).as_numpy_dtype)
    variable = np.dtype(as_dtype(p.variable_dtype).as_numpy_dtype)
    return compute, (variable if variable != compute else None), p


def needs_install(compute, variable):
    """Whether a layer of these dtypes (`layer_dtypes`) converts its inputs and variables here
    rather than by the Layer class's own rules: under a policy (a global one, or a mixed one
    of its own) and for bfloat16."""
    return variable is not None or compute is not None and (
        compute.kind == "V" or _global[0] is not None)


def install(layer, compute, variable):
    """Gives `layer` the conversion of its inputs to `compute` (unless its class converts them
    its own way, as Embedding) and, where its variables are of another dtype `variable`,
    Keras 3's autocast of them during its calls. Models keep their inputs as given (their
    layers convert them, as Keras' functional models). Other layers keep the class's methods
    untouched."""
    from .layers.base import Layer
    from .training import Trainer
    if isinstance(layer, Trainer):
        return
    if type(layer)._convert is Layer._convert:
        layer._convert = _Convert(layer, compute)
    if variable is not None:
        layer.call = _Autocast(layer, compute, variable)


def _cast_tree(x, dtype):
    from .. import ops
    from ..core.tensor import Tensor
    if isinstance(x, Tensor) and x._data.dtype.kind in "fV" and x._data.dtype != dtype:
        return ops.cast(x, dtype)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_cast_tree(v, dtype) for v in x)
    return x


class _Convert:
    """A policy layer's inputs as tensors of its compute dtype: floating, integer and bool
    inputs are cast (Keras' autocast of inputs)."""

    def __init__(self, layer, compute):
        self.layer, self.compute = layer, compute

    def __call__(self, inputs):
        from .. import ops
        from ..core.tensor import Tensor, Variable, convert_to_tensor
        x = inputs._read() if isinstance(inputs, Variable) else inputs
        if not isinstance(x, Tensor):
            x = convert_to_tensor(x)
        if x._data.dtype != self.compute and x._data.dtype.kind in "fVbiu":
            x = ops.cast(x, self.compute)
        return x


class _Autocast:
    """The `call` of a layer computing in `compute` with variables of `variable` dtype: during
    the call its trainable variables of that dtype read as `compute` (Keras 3's autocast; the
    gradient reaches the variable through the cast). A layer that computes in float32 whatever
    the policy (`_float32_compute`: the normalizations) gets float32 inputs and gives its
    output in `compute` instead. Its signature is the layer's `call` (`__wrapped__`)."""

    def __init__(self, layer, compute, variable):
        self.layer, self.compute, self.variable = layer, compute, variable

    @property
    def __wrapped__(self):
        return type(self.layer).call.__get__(self.layer)

    def __call__(self, *args, **kwargs):
        from .. import ops
        from ..core.tensor import Variable
        layer = self.layer
        call = type(layer).call
        if getattr(layer, "_float32_compute", False):
            args = (_cast_tree(args[0], self.variable),) + args[1:] if args else args
            return _cast_tree(call(layer, *args, **kwargs), self.compute)
        d = layer.__dict__
        swapped = {}
        for k, v in list(d.items()):
            cast = self._cast_variables(v, ops, Variable)
            if cast is not v:
                swapped[k] = v
                d[k] = cast
        try:
            return call(layer, *args, **kwargs)
        finally:
            d.update(swapped)

    def _cast_variables(self, v, ops, Variable):
        """`v` with its trainable variables of the variable dtype cast to the compute dtype: a
        variable, or a list, tuple or dict holding them (one level); `v` itself when none."""
        if isinstance(v, Variable):
            if v.trainable and v._value._data.dtype == self.variable:
                return ops.cast(v, self.compute)
            return v
        if isinstance(v, (list, tuple)) and not hasattr(v, "_fields") and \
                any(isinstance(x, Variable) for x in v):
            return type(v)(self._cast_variables(x, ops, Variable) for x in v)
        if isinstance(v, dict) and any(isinstance(x, Variable) for x in v.values()):
            return {k: self._cast_variables(x, ops, Variable) for k, x in v.items()}
        return v
