"""Keras 3's wrapper, merge, preprocessing, noise, reshaping, activation and normalization layers:
`TimeDistributed`; `Multiply`, `Subtract`, `Average`, `Maximum`, `Minimum`, `Dot`;
`Normalization` (with `adapt`); `GaussianNoise`, `GaussianDropout`, `SpatialDropout1D/2D/3D`;
`Permute`, `RepeatVector`, `Identity`; `PReLU`, `ELU`; `UnitNormalization`,
`GroupNormalization`; `ActivityRegularization`. (The attention layers are in
`tapegpu.models.layers`.)

Arguments, defaults, weight names, shapes and order, formulas and errors are Keras 3's, so
`set_weights(keras_layer.get_weights())` carries weights over. The noise layers are the identity
outside training; their `seed` gives the layer its own generator, as `Dropout`'s.
"""
import numpy as np

from .. import ops
from ..core.tensor import Tensor, convert_to_tensor
from ..models import initializers, regularizers
from ..models.layers import Layer, _takes_mask, _takes_training, _merge_call, _or_masks
from ..ops.nn import dropout_drawn
from ..ops.random import normal, seeded_normal, seeded_uniform
from .conv_layers import check_rank, data_format_of


# -- TimeDistributed -------------------------------------------------------------------------------

class TimeDistributed(Layer):
    """Applies `layer` to every timestep of `(batch, time, ...)` inputs: the steps are folded
    into the batch, `layer` runs once on `(batch * time, ...)`, and the result is unfolded, so
    one set of weights serves every step.

    The weights are `layer`'s (Keras' order and shapes). The input's mask passes on. (Keras
    calls `layer` once per step; the results are the same, except for layers whose training
    behaviour depends on the batch, e.g. `BatchNormalization(training=True)`, which here takes
    its statistics over every step at once.)

    >>> td = tg.keras.layers.TimeDistributed(tg.keras.layers.Dense(3))
    >>> td(tg.ones((2, 5, 4))).shape
    (2, 5, 3)
    >>> [v.shape for v in td.weights]
    [(4, 3), (3,)]
    """

    supports_masking = True

    def __init__(self, layer, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not isinstance(layer, Layer):
            raise ValueError(f"TimeDistributed: please initialize the wrapper with a "
                             f"`keras.layers.Layer` instance, got {layer!r}")
        self.layer = layer

    def build(self, input_shape):
        if len(input_shape) < 3:
            raise ValueError(f"TimeDistributed {self.name!r}: inputs must have rank >= 3 "
                             f"(batch, time, ...), got shape {tuple(input_shape)}")

    def call(self, inputs, training=False, mask=None):
        if inputs.ndim < 3:
            raise ValueError(f"TimeDistributed {self.name!r}: inputs must have rank >= 3 "
                             f"(batch, time, ...), got shape {inputs.shape}")
        batch, steps = inputs.shape[:2]
        folded = ops.reshape(inputs, (batch * steps,) + inputs.shape[2:])
        kwargs = {}
        if _takes_training(self.layer):
            kwargs["training"] = training
        if mask is not None and _takes_mask(self.layer):
            m = mask if isinstance(mask, Tensor) else convert_to_tensor(mask)
            if tuple(m.shape[:2]) != (batch, steps):
                raise ValueError(f"TimeDistributed {self.name!r}: the mask's first two "
                                 f"dimensions (batch, time) must match the inputs', got mask "
                                 f"shape {m.shape} for inputs of shape {inputs.shape}")
            if m.ndim > 2:
                kwargs["mask"] = ops.reshape(m, (batch * steps,) + m.shape[2:])
        out = self.layer(folded, **kwargs)
        return ops.reshape(out, (batch, steps) + out.shape[1:])


# -- merging ---------------------------------------------------------------------------------------

class _Merge(Layer):
    """Keras' elementwise merge layers: a list of tensors of one batch size whose shapes
    broadcast (an input of lower rank gets axes of size 1 after the batch axis, as Keras);
    the output mask is the OR of the inputs' masks (None if one has none)."""

    _MULTI_INPUT = True
    supports_masking = True
    _exactly = None  # the number of inputs the layer takes (None: at least 1)

    def _call_multi(self, inputs, args, kwargs):
        name = type(self).__name__
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"A merge layer ({name} {self.name!r}) should be called on a list "
                             f"of inputs, got {type(inputs).__name__}")
        if self._exactly is not None and len(inputs) != self._exactly:
            raise ValueError(f"A `{name}` layer should be called on exactly {self._exactly} "
                             f"inputs, got {len(inputs)}")
        return _merge_call(self, inputs, args, kwargs)

    def build(self, input_shape):
        batches = {s[0] for s in input_shape if len(s)}
        if len(batches) > 1:
            raise ValueError(f"{type(self).__name__} {self.name!r}: cannot merge tensors with "
                             f"different batch sizes, got shapes {list(input_shape)}")

    def compute_mask(self, inputs, mask=None):
        """The OR of the inputs' masks (Keras), None if an input has none."""
        return _or_masks(self, inputs, mask)

    def call(self, inputs):
        rank = max(x.ndim for x in inputs)  # Keras: lower ranks get axes after the batch's
        inputs = [ops.reshape(x, x.shape[:1] + (1,) * (rank - x.ndim) + x.shape[1:])
                  if 0 < x.ndim < rank else x for x in inputs]
        try:
            np.broadcast_shapes(*[x.shape for x in inputs])
        except ValueError:
            raise ValueError(f"{type(self).__name__} {self.name!r}: inputs have incompatible "
                             f"shapes, got {[x.shape for x in inputs]}") from None
        return self._merge(inputs)


class Multiply(_Merge):
    """The elementwise product of a list of tensors.

    >>> tg.keras.layers.Multiply()([tg.fill((2,), 3.0), tg.fill((2,), 2.0)]).numpy()
    array([6., 6.], dtype=float32)
    """

    def _merge(self, inputs):
        y = inputs[0]
        for x in inputs[1:]:
            y = y * x
        return y


class Subtract(_Merge):
    """`inputs[0] - inputs[1]` (exactly two inputs).

    >>> tg.keras.layers.Subtract()([tg.fill((2,), 3.0), tg.ones((2,))]).numpy()
    array([2., 2.], dtype=float32)
    """

    _exactly = 2

    def _merge(self, inputs):
        return inputs[0] - inputs[1]


class Average(_Merge):
    """The elementwise mean of a list of tensors.

    >>> tg.keras.layers.Average()([tg.fill((2,), 3.0), tg.ones((2,))]).numpy()
    array([2., 2.], dtype=float32)
    """

    def _merge(self, inputs):
        y = inputs[0]
        for x in inputs[1:]:
            y = y + x
        return y / len(inputs)


class Maximum(_Merge):
    """The elementwise maximum of a list of tensors.

    >>> tg.keras.layers.Maximum()([tg.constant([1.0, 4.0]), tg.constant([3.0, 2.0])]).numpy()
    array([3., 4.], dtype=float32)
    """

    def _merge(self, inputs):
        y = inputs[0]
        for x in inputs[1:]:
            y = ops.maximum(y, x)
        return y


class Minimum(_Merge):
    """The elementwise minimum of a list of tensors.

    >>> tg.keras.layers.Minimum()([tg.constant([1.0, 4.0]), tg.constant([3.0, 2.0])]).numpy()
    array([1., 2.], dtype=float32)
    """

    def _merge(self, inputs):
        y = inputs[0]
        for x in inputs[1:]:
            y = ops.minimum(y, x)
        return y


class Dot(_Merge):
    """Keras' batched dot product of two tensors: `axes` (an int, or a pair, one per input;
    negative counts from the end) are summed over, example by example; the output holds the
    remaining axes of the first input, then of the second ((batch, 1) if none remain). With
    `normalize=True` the inputs are first L2-normalised along `axes` (cosine similarity).
    The output has no mask (Keras).

    >>> tg.keras.layers.Dot(axes=1)([tg.ones((3, 4)), tg.ones((3, 4))]).numpy().ravel()
    array([4., 4., 4.], dtype=float32)
    >>> tg.keras.layers.Dot(axes=(2, 2))([tg.ones((2, 3, 4)), tg.ones((2, 5, 4))]).shape
    (2, 3, 5)
    """

    _exactly = 2

    def __init__(self, axes, normalize=False, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not isinstance(axes, int):
            if not isinstance(axes, (list, tuple)):
                raise TypeError(f"Dot: axes must be an int or a list of two ints, got "
                                f"{axes!r}")
            if len(axes) != 2 or not all(isinstance(a, int) for a in axes):
                raise ValueError(f"Dot: axes must hold two integers, got {axes!r}")
        self.axes = axes
        self.normalize = bool(normalize)

    def _resolve(self, shapes):
        pair = (self.axes, self.axes) if isinstance(self.axes, int) else tuple(self.axes)
        axes = []
        for a, s in zip(pair, shapes):
            if not -len(s) <= a < len(s) or a % len(s) == 0:
                raise ValueError(f"Dot {self.name!r}: axes {self.axes} out of range for inputs "
                                 f"of shapes {list(shapes)} (valid: the non-batch axes)")
            axes.append(a % len(s))
        return axes

    def build(self, input_shape):
        super().build(input_shape)
        s1, s2 = input_shape
        a1, a2 = self._resolve(input_shape)
        if s1[a1] != s2[a2]:
            raise ValueError(f"Dot {self.name!r}: incompatible input shapes: axis values "
                             f"{s1[a1]} (at axis {a1}) != {s2[a2]} (at axis {a2}). Full input "
                             f"shapes: {tuple(s1)}, {tuple(s2)}")

    def compute_mask(self, inputs, mask=None):
        """None (Keras)."""
        return None

    def call(self, inputs):
        x1, x2 = inputs
        a1, a2 = self._resolve([x1.shape, x2.shape])
        if x1.shape[a1] != x2.shape[a2] or x1.shape[0] != x2.shape[0]:
            raise ValueError(f"Dot {self.name!r}: incompatible input shapes {x1.shape} and "
                             f"{x2.shape} for axes ({a1}, {a2})")
        if self.normalize:
            x1 = _l2_normalize(x1, a1)
            x2 = _l2_normalize(x2, a2)
        letters = "abcdefghijklmnopqrstuvwxyz"
        s1 = list(letters[:x1.ndim])
        s2 = ["a"] + list(letters[x1.ndim:x1.ndim + x2.ndim - 1])
        s2[a2] = s1[a1]
        rest = [c for i, c in enumerate(s1) if i != a1] + \
            [c for i, c in enumerate(s2) if i not in (0, a2)]
        out = ops.einsum(f"{''.join(s1)},{''.join(s2)}->{''.join(rest)}", x1, x2)
        return ops.expand_dims(out, 1) if out.ndim == 1 else out


def _l2_normalize(x, axis):
    """x / sqrt(max(sum(x^2), 1e-12)) along `axis` (Keras' normalize)."""
    return x * ops.rsqrt(ops.maximum(ops.reduce_sum(ops.square(x), axis=axis, keepdims=True),
                                     ops.cast(1e-12, x.dtype)))


# -- Normalization ---------------------------------------------------------------------------------

class Normalization(Layer):
    """Keras 3's feature normalisation: `(inputs - mean) / max(sqrt(variance), 1e-7)` (with
    `invert=True`: `mean + inputs * max(sqrt(variance), 1e-7)`), `mean` and `variance` per
    position of the kept `axis` (default the last; None: one scalar each).

    Give `mean` and `variance`, or compute them from data with `adapt(data)` (an array, a
    tensor, a `tg.data.Dataset` or any iterable of batches; batches are combined as Keras
    does). Adapted statistics are the non-trainable weights `mean`, `variance` and `count`
    (int64, kept 0 as in Keras), in Keras' order.

    >>> norm = tg.keras.layers.Normalization()
    >>> norm.adapt(np.array([[1.0, 10.0], [3.0, 30.0]], np.float32))
    >>> norm(tg.constant([[2.0, 20.0]])).numpy()
    array([[0., 0.]], dtype=float32)
    """

    supports_masking = True

    def __init__(self, axis=-1, mean=None, variance=None, invert=False, dtype=None, name=None,
                 **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        if axis is None:
            axis = ()
        elif isinstance(axis, int):
            axis = (axis,)
        else:
            axis = tuple(axis)
        self.axis = axis
        self.input_mean, self.input_variance = mean, variance
        self.invert = bool(invert)
        if (mean is None) != (variance is None):
            raise ValueError(f"Normalization: when setting values directly, both mean and "
                             f"variance must be set, got mean={mean} and variance={variance}")
        if mean is not None:
            if np.shape(mean) != np.shape(variance):
                raise ValueError(f"Normalization: mean and variance must have the same shape, "
                                 f"got {np.shape(mean)} and {np.shape(variance)}")
            if np.ndim(mean) > len(self.axis):
                raise ValueError(f"Normalization: the rank of mean must be at most the number "
                                 f"of axes ({len(self.axis)}), got mean of shape "
                                 f"{np.shape(mean)} for axis {self.axis}")
        self._mean = self._variance = None

    def build(self, input_shape):
        ndim = len(input_shape)
        if any(not -ndim <= a < ndim for a in self.axis):
            raise ValueError(f"Normalization {self.name!r}: all axis values must be in the "
                             f"range [-ndim, ndim), got inputs with ndim={ndim} and axis="
                             f"{self.axis}")
        self._build_input_shape = tuple(input_shape)
        self._keep = tuple(sorted(a % ndim for a in self.axis))
        self._reduce = tuple(d for d in range(ndim) if d not in self._keep)
        self._bshape = [input_shape[d] if d in self._keep else 1 for d in range(ndim)]
        self._stat_shape = tuple(input_shape[d] for d in self._keep)
        if self.input_mean is None:
            self.adapt_mean = self.add_weight("mean", self._stat_shape, "zeros",
                                              trainable=False)
            self.adapt_variance = self.add_weight("variance", self._stat_shape, "ones",
                                                  trainable=False)
            self.count = self.add_weight("count", (), "zeros", trainable=False, dtype="int64")
        else:
            dt = self._dtype or np.dtype(np.float32)
            mean = np.asarray(self.input_mean, dt)
            variance = np.asarray(self.input_variance, dt)
            if mean.ndim:
                expanded = [1] * ndim
                for i in range(1, mean.ndim + 1):
                    expanded[self._keep[-i]] = mean.shape[-i]
                mean, variance = mean.reshape(expanded), variance.reshape(expanded)
            self._mean = np.broadcast_to(mean, self._bshape)
            self._variance = np.broadcast_to(variance, self._bshape)

    def adapt(self, data):
        """Computes `mean` and `variance` of `data` over every axis but `axis` (Keras' `adapt`):
        an array or tensor, or a dataset / iterable of batches (combined exactly, not
        averaged per batch)."""
        if isinstance(data, Tensor):
            data = data.numpy()
        elif hasattr(data, "__array__") and not isinstance(data, (list, tuple)):
            data = np.asarray(data)  # e.g. a pandas DataFrame (whose iteration gives columns)
        if isinstance(data, np.ndarray):
            batches, shape = [data], data.shape
        elif hasattr(data, "__iter__"):
            batches = [_batch_array(b, self) for b in data]
            if not batches:
                raise ValueError(f"Normalization {self.name!r}: adapt() received an empty "
                                 "iterable (no batches); pass arrays or a batched dataset")
            shape = batches[0].shape
        else:
            raise TypeError(f"Normalization {self.name!r}: adapt() takes an array, a tensor, a "
                            f"dataset or an iterable of batches, got {type(data).__name__}")
        if not self.built:
            if self._dtype is None:
                self._dtype = np.dtype(np.float32)
            self.build(shape)
            self.built = True
        if self.input_mean is not None:
            raise ValueError(f"Normalization {self.name!r}: the layer was given mean and "
                             "variance; adapt() cannot change them")
        total_mean = total_var = None
        count = 0
        for b in batches:
            if b.ndim != len(self._build_input_shape) or \
                    any(b.shape[d] != self._build_input_shape[d] for d in self._keep):
                raise ValueError(f"Normalization {self.name!r}: the layer was built with "
                                 f"input_shape={self._build_input_shape}, but adapt() got data "
                                 f"of an incompatible shape {b.shape}")
            b = b.astype(np.float64)
            mean, var = b.mean(axis=self._reduce), b.var(axis=self._reduce)
            n = int(np.prod([b.shape[d] for d in self._reduce])) if self._reduce else 1
            if total_mean is None:
                total_mean, total_var, count = mean, var, n
                continue
            count += n
            w = n / count
            new_mean = total_mean * (1 - w) + mean * w
            total_var = (total_var + (total_mean - new_mean) ** 2) * (1 - w) + \
                (var + (mean - new_mean) ** 2) * w
            total_mean = new_mean
        self.adapt_mean.assign(np.asarray(total_mean, self.adapt_mean.dtype.as_numpy_dtype))
        self.adapt_variance.assign(np.asarray(total_var,
                                              self.adapt_variance.dtype.as_numpy_dtype))

    def call(self, inputs):
        if self._keep and (inputs.ndim != len(self._bshape) or
                           any(inputs.shape[d] != self._bshape[d] for d in self._keep)):
            raise ValueError(f"Normalization {self.name!r}: built for inputs of shape "
                             f"{self._build_input_shape} (axis {self.axis}), got shape "
                             f"{inputs.shape}")
        bshape = self._bshape if self._keep else []  # axis=None: scalars, for any shape
        if self._mean is not None:
            mean = convert_to_tensor(self._mean.astype(inputs._data.dtype).reshape(bshape))
            variance = convert_to_tensor(
                self._variance.astype(inputs._data.dtype).reshape(bshape))
        else:
            mean = ops.reshape(ops.cast(self.adapt_mean.value(), inputs.dtype), bshape)
            variance = ops.reshape(ops.cast(self.adapt_variance.value(), inputs.dtype), bshape)
        std = ops.maximum(ops.sqrt(variance), ops.cast(1e-7, inputs.dtype))
        return mean + inputs * std if self.invert else (inputs - mean) / std


def _batch_array(batch, layer):
    """A batch of `adapt`'s data (an `(x, y)` pair's x) as a numpy array."""
    if isinstance(batch, (tuple, list)) and batch:
        batch = batch[0]
    if isinstance(batch, Tensor):
        return batch.numpy()
    if not hasattr(batch, "shape"):
        raise TypeError(f"Normalization {layer.name!r}: adapt() expects batches that are "
                        f"arrays or tensors, got {type(batch).__name__}")
    return np.asarray(batch)


# -- noise -----------------------------------------------------------------------------------------

def _check_rate(layer_name, rate):
    if not 0.0 <= float(rate) <= 1.0:
        raise ValueError(f"{layer_name}: rate must be a float in [0, 1], got rate={rate!r}")
    return float(rate)


def _standard_normal(layer, shape, x):
    if layer._generator is None:
        return normal(shape, dtype=x.dtype, device=x._dev)
    return layer._generator(shape, x.dtype, x._dev)


class GaussianNoise(Layer):
    """Adds N(0, stddev^2) noise in training (`training=True`); the identity otherwise.

    >>> layer = tg.keras.layers.GaussianNoise(0.1, seed=0)
    >>> x = tg.ones((2, 3))
    >>> bool(tg.reduce_all(layer(x) == x)), bool(tg.reduce_all(layer(x, training=True) == x))
    (True, False)
    """

    supports_masking = True

    def __init__(self, stddev, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not 0.0 <= float(stddev) <= 1.0:
            raise ValueError(f"GaussianNoise: stddev must be a float in [0, 1], got "
                             f"stddev={stddev!r}")
        self.stddev, self.seed = float(stddev), seed
        self._generator = seeded_normal(seed)

    def call(self, inputs, training=False):
        if not training or self.stddev == 0.0:
            return inputs
        return inputs + _standard_normal(self, inputs.shape, inputs) * \
            ops.cast(self.stddev, inputs.dtype)


class GaussianDropout(Layer):
    """Multiplies by N(1, rate / (1 - rate)) noise in training (for 0 < rate < 1); the
    identity otherwise.

    >>> layer = tg.keras.layers.GaussianDropout(0.5, seed=0)
    >>> layer(tg.ones((2, 2)), training=True).shape
    (2, 2)
    """

    supports_masking = True

    def __init__(self, rate, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.rate, self.seed = _check_rate("GaussianDropout", rate), seed
        self._generator = seeded_normal(seed)

    def call(self, inputs, training=False):
        if not training or not 0.0 < self.rate < 1.0:
            return inputs
        stddev = np.sqrt(self.rate / (1.0 - self.rate))
        return inputs * (_standard_normal(self, inputs.shape, inputs) *
                         ops.cast(stddev, inputs.dtype) + ops.cast(1.0, inputs.dtype))


class _SpatialDropout(Layer):
    """Dropout of whole feature maps: one keep/drop decision per (example, channel)."""

    supports_masking = True
    rank = None

    def __init__(self, rate, seed=None, data_format=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.rate, self.seed = _check_rate(type(self).__name__, rate), seed
        self.data_format = data_format_of(data_format)
        self._generator = seeded_uniform(seed)

    def build(self, input_shape):
        check_rank(self, input_shape, self.rank + 2)

    def call(self, inputs, training=False):
        check_rank(self, inputs.shape, self.rank + 2)
        if not training or self.rate == 0.0:
            return inputs
        if self.rate == 1.0:
            return ops.zeros_like(inputs)
        b = inputs.shape[0]
        noise = (b, inputs.shape[1]) + (1,) * self.rank if \
            self.data_format == "channels_first" else (b,) + (1,) * self.rank + \
            (inputs.shape[-1],)
        if self._generator is None:
            return ops.dropout(inputs, self.rate, noise_shape=noise)
        return dropout_drawn(inputs, self.rate, noise, self._generator)


class SpatialDropout1D(_SpatialDropout):
    """Drops whole channels of `(batch, steps, channels)` inputs with probability `rate` in
    training (the rest scaled by 1 / (1 - rate)); the identity otherwise.

    >>> y = tg.keras.layers.SpatialDropout1D(0.5, seed=1)(tg.ones((2, 4, 3)), training=True)
    >>> bool(tg.reduce_all(tg.reduce_max(y, axis=1) == tg.reduce_min(y, axis=1)))
    True
    """

    rank = 1

    def __init__(self, rate, seed=None, name=None, **kwargs):
        super().__init__(rate, seed=seed, name=name, **kwargs)


class SpatialDropout2D(_SpatialDropout):
    """Drops whole feature maps of `(batch, rows, cols, channels)` inputs (channels_first:
    `(batch, channels, rows, cols)`) with probability `rate` in training; the identity
    otherwise.

    >>> tg.keras.layers.SpatialDropout2D(0.5)(tg.ones((2, 4, 4, 3)), training=True).shape
    (2, 4, 4, 3)
    """

    rank = 2


class SpatialDropout3D(_SpatialDropout):
    """Drops whole 3-D feature maps of `(batch, d1, d2, d3, channels)` inputs (or channels
    first) with probability `rate` in training; the identity otherwise.

    >>> tg.keras.layers.SpatialDropout3D(0.5)(tg.ones((1, 2, 2, 2, 3))).shape
    (1, 2, 2, 2, 3)
    """

    rank = 3


# -- reshaping and identity -----------------------------------------------------------------------

class Permute(Layer):
    """Permutes the non-batch axes: `dims` is a permutation of 1..rank-1 (1-based, as Keras).

    >>> tg.keras.layers.Permute((2, 1))(tg.zeros((4, 3, 5))).shape
    (4, 5, 3)
    """

    def __init__(self, dims, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.dims = tuple(dims)
        if sorted(self.dims) != list(range(1, len(self.dims) + 1)):
            raise ValueError(f"Permute: invalid permutation argument dims={dims!r}; dims must "
                             f"be a permutation of 1..{len(self.dims)} (the batch axis, 0, "
                             "stays first)")

    def call(self, inputs):
        if inputs.ndim != len(self.dims) + 1:
            raise ValueError(f"Permute {self.name!r}: dims={self.dims} permutes "
                             f"{len(self.dims)} axes, got inputs of shape {inputs.shape}")
        return ops.transpose(inputs, (0,) + self.dims)


class RepeatVector(Layer):
    """Repeats `(batch, features)` inputs `n` times: `(batch, n, features)`.

    >>> tg.keras.layers.RepeatVector(3)(tg.zeros((2, 4))).shape
    (2, 3, 4)
    """

    def __init__(self, n, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError(f"RepeatVector: expected an integer value for n, got {n!r}")
        self.n = int(n)

    def build(self, input_shape):
        check_rank(self, input_shape, 2)

    def call(self, inputs):
        check_rank(self, inputs.shape, 2)
        return ops.tile(ops.expand_dims(inputs, 1), (1, self.n, 1))


class Identity(Layer):
    """Returns its input unchanged (mask included).

    >>> tg.keras.layers.Identity()(tg.ones((2,))).numpy()
    array([1., 1.], dtype=float32)
    """

    supports_masking = True

    def call(self, inputs):
        return inputs


class ActivityRegularization(Layer):
    """The identity, adding `(l1 * sum|x| + l2 * sum(x^2)) / batch_size` of its output to
    `losses` (Keras 3's activity regularization; `fit` adds it to the loss). `losses` holds the
    penalty of the last call.

    >>> layer = tg.keras.layers.ActivityRegularization(l1=0.5)
    >>> _ = layer(tg.fill((2, 3), -1.0))
    >>> [float(x) for x in layer.losses]  # 0.5 * 6 / 2
    [1.5]
    """

    supports_masking = True

    def __init__(self, l1=0.0, l2=0.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.l1, self.l2 = float(l1), float(l2)
        self._activity_losses = []

    def call(self, inputs):
        penalty = ops.zeros((), dtype=inputs.dtype)
        if self.l1:
            penalty = penalty + self.l1 * ops.reduce_sum(ops.abs(inputs))
        if self.l2:
            penalty = penalty + self.l2 * ops.reduce_sum(ops.square(inputs))
        if inputs.ndim and inputs.shape[0]:
            penalty = penalty / inputs.shape[0]
        self._activity_losses = [penalty]
        return inputs


# -- activations -----------------------------------------------------------------------------------

class PReLU(Layer):
    """Parametric rectifier: `x` for x >= 0, `alpha * x` below, with the trainable `alpha` of
    shape `input_shape[1:]` (size 1 along `shared_axes`), initialised to zeros.

    >>> layer = tg.keras.layers.PReLU(alpha_initializer=tg.keras.initializers.Constant(0.1))
    >>> layer(tg.constant([[-2.0, 3.0]])).numpy()
    array([[-0.2,  3. ]], dtype=float32)
    """

    supports_masking = True

    def __init__(self, alpha_initializer="Zeros", alpha_regularizer=None, alpha_constraint=None,
                 shared_axes=None, dtype=None, name=None, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        if alpha_constraint is not None:
            raise NotImplementedError(f"PReLU: alpha_constraint is not supported by tapegpu "
                                      f"(pass None), got {alpha_constraint!r}")
        self.alpha_initializer = initializers.get(
            alpha_initializer.lower() if isinstance(alpha_initializer, str) else
            alpha_initializer)
        self.alpha_regularizer = regularizers.get(alpha_regularizer)
        self.shared_axes = None if shared_axes is None else \
            list(shared_axes) if isinstance(shared_axes, (list, tuple)) else [shared_axes]

    def build(self, input_shape):
        shape = list(input_shape[1:])
        for a in self.shared_axes or ():
            if not 1 <= a < len(input_shape):
                raise ValueError(f"PReLU {self.name!r}: shared_axes {self.shared_axes} must be "
                                 f"non-batch axes (1..{len(input_shape) - 1}) of inputs of "
                                 f"shape {tuple(input_shape)}")
            shape[a - 1] = 1
        self.alpha = self.add_weight("alpha", tuple(shape), self.alpha_initializer,
                                     regularizer=self.alpha_regularizer)

    def call(self, inputs):
        want = self.alpha.shape
        if inputs.ndim != len(want) + 1 or any(
                w != 1 and w != d for w, d in zip(want, inputs.shape[1:])):
            raise ValueError(f"PReLU {self.name!r}: built for inputs of shape (batch,) + "
                             f"{want} (1: shared axes), got shape {inputs.shape}")
        zero = ops.zeros((), dtype=inputs.dtype)
        return ops.maximum(inputs, zero) + self.alpha * ops.minimum(inputs, zero)


class ELU(Layer):
    """Exponential linear unit: `x` for x > 0, `alpha * (exp(x) - 1)` otherwise.

    >>> tg.keras.layers.ELU(alpha=0.5)(tg.constant([-100.0, 2.0])).numpy()
    array([-0.5,  2. ], dtype=float32)
    """

    supports_masking = True

    def __init__(self, alpha=1.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.alpha = float(alpha)

    def call(self, inputs):
        zero = ops.zeros((), dtype=inputs.dtype)
        negative = ops.expm1(ops.minimum(inputs, zero)) * ops.cast(self.alpha, inputs.dtype)
        return ops.where(inputs > zero, inputs, negative)


# -- normalization ---------------------------------------------------------------------------------

class UnitNormalization(Layer):
    """Scales each example to unit L2 norm along `axis` (an int or a list):
    `x / sqrt(max(sum(x^2), 1e-12))`.

    >>> tg.keras.layers.UnitNormalization()(tg.constant([[3.0, 4.0]])).numpy()
    array([[0.6, 0.8]], dtype=float32)
    """

    supports_masking = True

    def __init__(self, axis=-1, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(axis, (list, tuple)):
            self.axis = list(axis)
        elif isinstance(axis, int):
            self.axis = axis
        else:
            raise TypeError(f"UnitNormalization: invalid value for axis: expected an int or a "
                            f"list/tuple of ints, got axis={axis!r}")

    def call(self, inputs):
        axes = self.axis if isinstance(self.axis, list) else [self.axis]
        if any(not -inputs.ndim <= a < inputs.ndim for a in axes):
            raise ValueError(f"UnitNormalization {self.name!r}: axis {self.axis} is out of "
                             f"bounds for inputs of shape {inputs.shape}")
        return _l2_normalize(inputs, self.axis)


class GroupNormalization(Layer):
    """Normalises each example over groups of channels: the `axis` channels are split into
    `groups` (-1: one per channel, instance normalisation), each group normalised by its mean
    and variance over its channels and the other non-batch axes, then scaled by `gamma` and
    shifted by `beta` (per channel), Keras 3's formula.

    >>> gn = tg.keras.layers.GroupNormalization(groups=2)
    >>> gn(tg.ones((2, 5, 4))).shape
    (2, 5, 4)
    >>> [v.name.split("/")[-1] for v in gn.weights]
    ['gamma', 'beta']
    """

    supports_masking = True

    def __init__(self, groups=32, axis=-1, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", beta_regularizer=None,
                 gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                 dtype=None, name=None, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        if not isinstance(groups, int) or (groups <= 0 and groups != -1):
            raise ValueError(f"GroupNormalization: groups must be a positive integer (or -1 "
                             f"for instance normalization), got groups={groups!r}")
        if beta_constraint is not None or gamma_constraint is not None:
            raise NotImplementedError("GroupNormalization: constraints are not supported by "
                                      "tapegpu (pass None)")
        self.groups, self.axis, self.epsilon = groups, int(axis), float(epsilon)
        self.center, self.scale = bool(center), bool(scale)
        self._inits = (beta_initializer, gamma_initializer)
        self._regs = (regularizers.get(beta_regularizer), regularizers.get(gamma_regularizer))
        self.gamma = self.beta = None

    def build(self, input_shape):
        ndim = len(input_shape)
        if not -ndim <= self.axis < ndim or self.axis % ndim == 0:
            raise ValueError(f"GroupNormalization {self.name!r}: axis {self.axis} is out of "
                             f"range (or the batch axis) for inputs of shape "
                             f"{tuple(input_shape)}")
        dim = input_shape[self.axis]
        if self.groups == -1:
            self.groups = dim
        if dim < self.groups:
            raise ValueError(f"GroupNormalization {self.name!r}: number of groups "
                             f"({self.groups}) cannot be more than the number of channels "
                             f"({dim})")
        if dim % self.groups:
            raise ValueError(f"GroupNormalization {self.name!r}: the number of channels ({dim})"
                             f" must be a multiple of the number of groups ({self.groups})")
        self._ndim, self._dim = ndim, dim
        if self.scale:
            self.gamma = self.add_weight("gamma", (dim,), self._inits[1],
                                         regularizer=self._regs[1])
        if self.center:
            self.beta = self.add_weight("beta", (dim,), self._inits[0],
                                        regularizer=self._regs[0])

    def call(self, inputs):
        axis = self.axis % self._ndim
        if inputs.ndim != self._ndim or inputs.shape[axis] != self._dim:
            raise ValueError(f"GroupNormalization {self.name!r}: built for {self._dim} channels "
                             f"on axis {self.axis} of rank-{self._ndim} inputs, got shape "
                             f"{inputs.shape}")
        shape = inputs.shape
        grouped = ops.reshape(inputs, shape[:axis] + (self.groups, self._dim // self.groups) +
                              shape[axis + 1:])
        reduce = [a for a in range(1, grouped.ndim) if a != axis]
        mean, var = ops.moments(grouped, axes=reduce, keepdims=True)
        y = ops.reshape((grouped - mean) * ops.rsqrt(var + self.epsilon), shape)
        bshape = [1] * self._ndim
        bshape[axis] = self._dim
        if self.scale:
            y = y * ops.reshape(self.gamma.value(), bshape)
        if self.center:
            y = y + ops.reshape(self.beta.value(), bshape)
        return y
