"""Keras' core layers: `Dense`, `Embedding`, `Masking`, `Lambda`, `Identity`, and the entry of a
functional model: `Input`, `InputLayer` and the symbolic `KerasTensor`.

A functional model is a graph of layer calls recorded on symbolic tensors (`KerasTensor`):
`keras.Input(shape)` makes one, and calling a layer on it runs the layer once on a batch of
zeros (building its variables and finding the output shape) and returns a new `KerasTensor`
that remembers the call (`tapegpu/keras/model.py`'s `Functional` replays them).
"""
import numpy as np

from ... import ops
from ...backends import checks
from ...core import nest
from ...core.dtypes import np_dtype
from ...core.tensor import Tensor, Variable, convert_to_tensor
from ...models import initializers, regularizers
from ...ops.nn import bias_act
from ...ops.registry import InvalidArgumentError
from .activations import _FUSABLE, _activate, _keeps_logits, get_activation
from .base import Layer, _floatx, _symbolic_input, _unique_name


class Dense(Layer):
    """A fully connected layer: `activation(inputs @ kernel + bias)`.

    The kernel has shape `(input_shape[-1], units)`; inputs of rank > 2 are multiplied along
    their last axis.

    >>> layer = tg.layers.Dense(4, activation="elu")
    >>> layer(tg.ones((2, 3))).shape
    (2, 4)
    >>> layer.kernel.shape, layer.bias.shape
    ((3, 4), (4,))
    """

    supports_masking = True  # passes its input's mask on (Keras)

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 dtype=None, name=None, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        if int(units) <= 0 or int(units) != units:
            raise ValueError(f"Dense: units must be a positive integer, got {units!r}")
        self.units = int(units)
        self.activation = get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel = None
        self.bias = None

    def build(self, input_shape):
        if len(input_shape) < 2:
            raise ValueError(f"Dense {self.name!r}: inputs must have rank >= 2 (batch, ..., "
                             f"features), got shape {input_shape}; add a batch axis with "
                             "tg.expand_dims(x, 0)")
        self.kernel = self.add_weight("kernel", (input_shape[-1], self.units),
                                      self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.bias = self.add_weight("bias", (self.units,), self.bias_initializer,
                                        regularizer=self.bias_regularizer)

    def call(self, inputs):
        if inputs.ndim < 2 or inputs.shape[-1] != self.kernel.shape[0]:
            raise ValueError(f"Dense {self.name!r}: expected inputs with last dimension "
                             f"{self.kernel.shape[0]}, got shape {inputs.shape}")
        y = ops.matmul(inputs, self.kernel)
        fused = _FUSABLE.get(self.activation)
        if self.use_bias and fused is not None and not _keeps_logits(self.activation):
            return bias_act(y, self.bias, fused)  # one op (one kernel on a GPU)
        if self.use_bias:
            y = y + self.bias
        return _activate(self.activation, y)


class Embedding(Layer):
    """Maps integer indices in [0, input_dim) to rows of an `(input_dim, output_dim)` table.

    With `mask_zero=True` index 0 is padding: the output carries the mask `inputs != 0` for the
    layers after it (recurrent layers skip the padded steps), as Keras
    (`tg.keras.backend.get_keras_mask` reads it).

    >>> emb = tg.layers.Embedding(10, 4)
    >>> emb(tg.constant([[1, 2, 3]])).shape
    (1, 3, 4)
    >>> out = tg.layers.Embedding(10, 4, mask_zero=True)(tg.constant([[5, 2, 0]]))
    >>> tg.keras.backend.get_keras_mask(out).numpy()
    array([[ True,  True, False]])
    """

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", dtype=None,
                 name=None, mask_zero=False, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        self.mask_zero = self._makes_mask = bool(mask_zero)
        for label, n in (("input_dim", input_dim), ("output_dim", output_dim)):
            if int(n) != n or int(n) <= 0:
                raise ValueError(f"Embedding: {label} must be a positive integer, got {n!r}")
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.embeddings_initializer = initializers.get(embeddings_initializer)
        self.embeddings = None

    def _convert(self, inputs):  # indices stay integers
        x = inputs._read() if isinstance(inputs, Variable) else inputs
        x = x if isinstance(x, Tensor) else convert_to_tensor(x)
        if x._data.dtype.kind == "f":  # Keras accepts floats holding integers
            x = ops.cast(x, "int64")
        if x._data.dtype.kind not in "iu":
            raise TypeError(f"Embedding {self.name!r}: indices must be integers, got "
                            f"{x.dtype.name} of shape {x.shape}")
        return x

    def build(self, input_shape):
        self._dtype = self._dtype if self._dtype is not None and self._dtype.kind == "f" \
            else np.dtype(_floatx())
        self.embeddings = self.add_weight("embeddings", (self.input_dim, self.output_dim),
                                          self.embeddings_initializer)

    def call(self, inputs):
        data = inputs._data
        xp = inputs._dev.xp
        if data.size and checks.deferred(xp):  # on a GPU: read with the next host read
            checks.check(xp, (data < 0) | (data >= self.input_dim), self._out_of_range, data)
        elif data.size and (int(data.min()) < 0 or int(data.max()) >= self.input_dim):
            raise self._out_of_range(data)
        return ops.gather(self.embeddings, inputs)

    def _out_of_range(self, data):
        return InvalidArgumentError(f"Embedding {self.name!r}: indices must be in [0, "
                                    f"{self.input_dim}), got values in [{int(data.min())}, "
                                    f"{int(data.max())}]")

    def compute_mask(self, inputs, mask=None):
        """`inputs != 0` with `mask_zero=True`, else None (Keras)."""
        return ops.not_equal(inputs, 0) if self.mask_zero else None


class Masking(Layer):
    """Marks the timesteps whose features all equal `mask_value` as padding: they become zeros,
    and the output carries the mask `any(inputs != mask_value, axis=-1)` for the layers after it
    (recurrent layers skip the padded steps), as Keras. (Keras multiplies by the mask, so a
    padded step holding inf or NaN becomes NaN; here it is 0.)

    >>> x = tg.constant([[[1.0, 2.0], [0.0, 0.0]]])
    >>> tg.keras.backend.get_keras_mask(tg.layers.Masking()(x)).numpy()
    array([[ True, False]])
    """

    supports_masking = True
    _makes_mask = True

    def __init__(self, mask_value=0.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.mask_value = mask_value

    def call(self, inputs):
        keep = ops.reduce_any(ops.not_equal(inputs, self.mask_value), axis=-1, keepdims=True)
        return ops.where(keep, inputs, ops.zeros((), dtype=inputs.dtype))

    def compute_mask(self, inputs, mask=None):
        """The steps with a feature different from `mask_value`."""
        return ops.reduce_any(ops.not_equal(inputs, self.mask_value), axis=-1)


class Lambda(Layer):
    """Wraps a function of the inputs as a layer (`arguments` are extra keyword arguments).

    >>> tg.layers.Lambda(lambda x: x * 2.0)(tg.ones((2,))).numpy()
    array([2., 2.], dtype=float32)
    """

    def __init__(self, function, output_shape=None, arguments=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not callable(function):
            raise TypeError(f"Lambda: function must be callable, got {function!r}")
        self.function = function
        self.arguments = dict(arguments or {})

    def __call__(self, inputs, *args, **kwargs):
        symbolic = _symbolic_input(inputs)
        if symbolic is not None:
            return symbolic._symbolic_call(self, inputs, args, kwargs)
        self.built = True
        if isinstance(inputs, np.ndarray):  # arrays become tensors, as for every layer
            inputs = convert_to_tensor(inputs)
        elif isinstance(inputs, (list, tuple)):
            inputs = type(inputs)(convert_to_tensor(x) if isinstance(x, np.ndarray) else x
                                  for x in inputs)
        return self.call(inputs, *args, **kwargs)

    def call(self, inputs, *args, **kwargs):
        return self.function(inputs, *args, **self.arguments, **kwargs)


class Identity(Layer):
    """Returns its input unchanged (mask included).

    >>> tg.keras.layers.Identity()(tg.ones((2,))).numpy()
    array([1., 1.], dtype=float32)
    """

    supports_masking = True

    def call(self, inputs):
        return inputs


# -- the functional API's input: keras.Input, InputLayer, KerasTensor ------------------------------

class KerasTensor:
    """A symbolic tensor of a functional model: a shape (None for the batch axis), a dtype,
    and the layer call that produced it."""

    def __init__(self, shape, dtype="float32", name=None, history=None):
        self.shape = tuple(shape)
        self.dtype = np.dtype(np_dtype(dtype))
        self.name = name
        self._keras_history = history  # (node, index) or None for an input

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"<KerasTensor shape={self.shape}, dtype={self.dtype.name}, name={self.name}>"

    def _concrete(self):
        shape = [1 if d is None else d for d in self.shape]
        if self.dtype.kind == "O":  # a string input (keras.Input(dtype="string")): empty strings
            return convert_to_tensor(np.full(shape, b"", dtype=object))
        return ops.zeros(shape, dtype=self.dtype.name)

    def _symbolic_call(self, layer, inputs, args, kwargs):
        """Records `layer(inputs, *args, **kwargs)` and returns its symbolic output(s)."""
        for a in nest.flatten((args, kwargs)):
            if isinstance(a, KerasTensor):
                raise ValueError(f"{type(layer).__name__} {layer.name!r}: symbolic tensors must "
                                 "be passed as the first argument (a tensor or a list of them)")
        node = _Node(layer, inputs, args, kwargs)
        symbolic = _symbolic_outputs(layer, inputs)
        if symbolic is not None:  # unknown dimensions: shapes by the layer's rule, no probe
            out = nest.pack_sequence_as(symbolic, [
                KerasTensor(s.shape, s.dtype, name=f"{layer.name}_{i}", history=(node, i))
                for i, s in enumerate(nest.flatten(symbolic))])
            node.outputs = nest.flatten(out)
            return out
        concrete = nest.map_structure(
            lambda t: t._concrete() if isinstance(t, KerasTensor) else t, inputs)
        out = layer(concrete, *args, **kwargs)
        unknown_batch = any(isinstance(t, KerasTensor) and t.shape and t.shape[0] is None
                            for t in nest.flatten(inputs))
        flat = nest.flatten(out)
        sym = []
        for i, t in enumerate(flat):
            t = t if isinstance(t, Tensor) else convert_to_tensor(t)
            shape = tuple(t.shape)
            if unknown_batch and shape:
                shape = (None,) + shape[1:]
            sym.append(KerasTensor(shape, t._data.dtype, name=f"{layer.name}_{i}",
                                   history=(node, i)))
        node.outputs = sym
        return nest.pack_sequence_as(out, sym)


# -- symbolic shapes: layers on inputs with unknown dimensions --------------------------------------
# A functional graph on `Input((None, None, 3))` builds without running any layer: each layer
# with a rule below gets its output shape from its input shapes (None stays None where it
# depends on an unknown size), as Keras' compute_output_shape, and builds its variables from
# the known dimensions. A layer without a rule (and without its own `compute_output_shape`) is
# run on stand-in values instead, twice with different sizes for the unknown dimensions;
# dimensions that differ between the two are unknown.

class _Shape:
    """An output's (shape, dtype) from the symbolic rules (a leaf for nest)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


def _unknown_inner(inputs):
    return any(isinstance(t, KerasTensor) and None in t.shape[1:] for t in nest.flatten(inputs))


def _symbolic_outputs(layer, inputs):
    """The (shape, dtype) structure of `layer(inputs)` when some input has an unknown
    dimension besides the batch axis, else None (the caller runs the layer on stand-ins of the
    known shapes)."""
    if not _unknown_inner(inputs):
        return None
    flat = nest.flatten(inputs)
    if not all(isinstance(t, KerasTensor) for t in flat):
        return _probed_outputs(layer, inputs)
    shapes = [tuple(t.shape) for t in flat]
    first = flat[0].dtype
    own = getattr(type(layer), "compute_output_shape", None)
    rule = None if own is not None else _rule_of(layer)
    if own is None and rule is None:
        return _probed_outputs(layer, inputs)
    arg = shapes if layer._MULTI_INPUT or len(shapes) > 1 else shapes[0]
    if not layer.built:
        if layer._dtype is None:
            layer._dtype = first if first.kind == "f" else np.dtype(_floatx())
        layer.build(arg)
        layer.built = True
    out = layer.compute_output_shape(arg) if own is not None else rule(layer, arg)
    dtype = layer._dtype if layer._dtype is not None else first
    if isinstance(out, list):
        return [_Shape(s, dtype) for s in out]
    return _Shape(out, dtype)


def _probed_outputs(layer, inputs):
    """`layer` run on stand-ins twice, unknown dimensions of size 8 then 16 (the batch axis 1
    then 2); output dimensions that differ are unknown."""
    outs = []
    for size in (8, 16):
        concrete = nest.map_structure(
            lambda t: ops.zeros([(size // 8 if i == 0 else size) if d is None else d
                                 for i, d in enumerate(t.shape)], dtype=t.dtype.name)
            if isinstance(t, KerasTensor) else t, inputs)
        try:
            outs.append(nest.flatten(layer(concrete)))
        except Exception as e:
            raise ValueError(
                f"{type(layer).__name__} {layer.name!r}: cannot infer its output shape on "
                f"inputs with unknown dimensions (shapes "
                f"{[getattr(t, 'shape', t) for t in nest.flatten(inputs)]}): running it on "
                f"stand-in values raised {type(e).__name__}: {e}. Define "
                f"compute_output_shape(input_shape) on the layer (Keras' rule), or give the "
                f"Input a known shape") from None
    res = []
    for a, b in zip(*outs):
        a, b = convert_to_tensor(a), convert_to_tensor(b)
        if a.ndim != b.ndim:
            raise ValueError(f"{type(layer).__name__} {layer.name!r}: its output rank depends "
                             "on the input's unknown dimensions; define compute_output_shape")
        res.append(_Shape((x if x == y else None for x, y in zip(a.shape, b.shape)),
                          a._data.dtype))
    return res[0] if len(res) == 1 else res


def _conv_len(n, k, s, d, padding):
    if n is None:
        return None
    eff = (k - 1) * d + 1
    if padding == "same":
        return -(-n // s)
    if padding == "causal":
        return (n - 1) // s + 1
    return (n - eff) // s + 1


def _channels_first(layer):
    return getattr(layer, "data_format", "channels_last") == "channels_first"


def _spatial_rule(layer, shape, lengths, channels):
    if _channels_first(layer):
        return (shape[0], channels) + tuple(lengths)
    return (shape[0],) + tuple(lengths) + (channels,)


def _spatial_of(layer, shape):
    return shape[2:] if _channels_first(layer) else shape[1:-1]


def _conv_rule(layer, shape):
    lengths = [_conv_len(n, k, s, d, layer.padding) for n, k, s, d in
               zip(_spatial_of(layer, shape), layer.kernel_size, layer.strides,
                   layer.dilation_rate)]
    return _spatial_rule(layer, shape, lengths, layer.filters)


def _pool_rule(layer, shape):
    lengths = [_conv_len(n, k, s, 1, layer.padding)
               for n, k, s in zip(_spatial_of(layer, shape), layer.pool_size, layer.strides)]
    return _spatial_rule(layer, shape, lengths, shape[1] if _channels_first(layer) else shape[-1])


def _upsampling_rule(layer, shape):
    sizes = layer.size if isinstance(layer.size, tuple) else (layer.size,)
    lengths = [None if n is None else n * k for n, k in zip(_spatial_of(layer, shape), sizes)]
    return _spatial_rule(layer, shape, lengths, shape[1] if _channels_first(layer) else shape[-1])


def _merged(dims):
    known = [d for d in dims if d is not None and d != 1]
    return known[0] if known else (1 if all(d == 1 for d in dims) else None)


def _concatenate_rule(layer, shapes):
    ndim = len(shapes[0])
    axis = layer.axis % ndim
    if any(len(s) != ndim for s in shapes):
        raise ValueError(f"Concatenate {layer.name!r}: inputs must have the same rank, got "
                         f"shapes {shapes}")
    out = []
    for i in range(ndim):
        dims = [s[i] for s in shapes]
        if i == axis:
            out.append(None if None in dims else sum(dims))
            continue
        known = {d for d in dims if d is not None}
        if i and len(known) > 1:
            raise ValueError(f"Concatenate {layer.name!r}: inputs must match in every axis but "
                             f"the concatenation axis ({layer.axis}), got shapes {shapes}")
        out.append(known.pop() if known else None)
    return tuple(out)


def _merge_rule(layer, shapes):
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    return tuple(_merged([s[i] for s in padded]) for i in range(ndim))


def _dense_rule(layer, shape):
    return tuple(shape[:-1]) + (layer.units,)


def _same_rule(layer, shape):
    return tuple(shape)


def _rule_of(layer):
    from . import activations, convolutional, merging, normalization, pooling, regularization, \
        reshaping
    rules = [(convolutional._ConvND, _conv_rule), (pooling._Pooling, _pool_rule),
             (reshaping.UpSampling1D, _upsampling_rule),
             (reshaping.UpSampling2D, _upsampling_rule),
             (merging.Concatenate, _concatenate_rule), (merging.Add, _merge_rule),
             (merging._Merge, _merge_rule), (Dense, _dense_rule),
             ((activations.Activation, activations.ReLU, activations.LeakyReLU,
               activations.ELU, activations.Softmax, activations.PReLU,
               normalization.BatchNormalization, normalization.LayerNormalization,
               regularization.Dropout, regularization._SpatialDropout,
               regularization.GaussianNoise, regularization.GaussianDropout, Identity),
              _same_rule)]
    for kinds, rule in rules:
        if isinstance(layer, kinds) and not (rule is _merge_rule and
                                            isinstance(layer, merging.Dot)):
            return rule
    return None


def _operator(fn, label, reflected=False):
    """A KerasTensor operator: records `fn` as a Lambda layer of the graph."""
    def method(self, other):
        if isinstance(other, KerasTensor):
            pair = [other, self] if reflected else [self, other]
            return Lambda(lambda ts: fn(ts[0], ts[1]), name=_op_name(label))(pair)
        if reflected:
            return Lambda(lambda t: fn(other, t), name=_op_name(label))(self)
        return Lambda(lambda t: fn(t, other), name=_op_name(label))(self)
    method.__name__ = f"__{'r' if reflected else ''}{label}__"
    return method


def _op_name(label):
    return _unique_name(type(label, (), {}))


for _label, _fn in (("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
                    ("mul", lambda a, b: a * b), ("truediv", lambda a, b: a / b),
                    ("matmul", lambda a, b: a @ b), ("pow", lambda a, b: a ** b)):
    setattr(KerasTensor, f"__{_label}__", _operator(_fn, _label))
    setattr(KerasTensor, f"__r{_label}__", _operator(_fn, _label, reflected=True))
KerasTensor.__neg__ = lambda self: Lambda(lambda t: -t, name=_op_name("neg"))(self)
KerasTensor.__getitem__ = lambda self, key: Lambda(
    lambda t: t[key], name=_op_name("getitem"))(self)


class _Node:
    def __init__(self, layer, inputs, args, kwargs):
        self.layer, self.inputs, self.args, self.kwargs = layer, inputs, args, kwargs
        self.outputs = []

    def parents(self):
        return [t._keras_history[0] for t in nest.flatten(self.inputs)
                if isinstance(t, KerasTensor) and t._keras_history is not None]


class InputLayer(Layer):
    """The layer a `keras.Input` belongs to: it has no variables and passes inputs through.

    `keras.Sequential([keras.layers.InputLayer(shape=(4,)), ...])` declares the input shape.
    """

    def __init__(self, shape=None, batch_size=None, dtype=None, name=None, input_shape=None,
                 batch_shape=None, **kwargs):
        super().__init__(dtype=dtype, name=name)
        if kwargs:
            raise TypeError(f"InputLayer: unexpected arguments {sorted(kwargs)}")
        if shape is None:
            shape = input_shape
        if batch_shape is not None:
            batch_size, shape = batch_shape[0], batch_shape[1:]
        if shape is None:
            raise ValueError("InputLayer: give shape= (the shape of one example, without the "
                             "batch axis), e.g. keras.Input(shape=(28, 28))")
        if isinstance(shape, (int, np.integer)):  # Keras 2's spelling: Input(2) is (2,)
            shape = (int(shape),)
        try:
            shape = tuple(None if d is None else int(d) for d in shape)
        except TypeError:
            raise TypeError(f"InputLayer: shape must be a tuple of dimensions, got {shape!r}") \
                from None
        self.batch_shape = (batch_size,) + shape
        self.output = KerasTensor(self.batch_shape, self._dtype or _floatx(), name=self.name)
        self.output._input_layer = self
        self.built = True

    def call(self, inputs):
        return inputs


def Input(shape=None, batch_size=None, dtype=None, name=None, batch_shape=None,  # noqa: N802
          **kwargs):
    """A symbolic input of a functional model: `shape` is one example's shape (no batch axis).

    >>> inputs = tg.keras.Input(shape=(4,))
    >>> outputs = tg.keras.layers.Dense(2)(inputs)
    >>> outputs.shape
    (None, 2)
    >>> model = tg.keras.Model(inputs, outputs)
    >>> model(tg.ones((3, 4))).shape
    (3, 2)
    """
    if kwargs:
        raise TypeError(f"keras.Input: unexpected arguments {sorted(kwargs)}; valid: shape, "
                        "batch_size, dtype, name, batch_shape")
    return InputLayer(shape=shape, batch_size=batch_size, dtype=dtype, name=name,
                      batch_shape=batch_shape).output
