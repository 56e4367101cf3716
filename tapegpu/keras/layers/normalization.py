"""Keras' normalization layers: `BatchNormalization`, `LayerNormalization`,
`UnitNormalization`, `GroupNormalization`.
"""
from ... import ops
from ...core.tensor import _thread
from ...models import regularizers
from .base import Layer


class BatchNormalization(Layer):
    """Normalises over the batch (training) or with moving statistics (inference).

    With `training=True` the output uses the batch mean and (biased) variance over every axis
    but `axis`, and the moving statistics are updated:
    `moving = moving * momentum + batch_stat * (1 - momentum)` (Keras' rule). With
    `training=False` (default) it uses `moving_mean` and `moving_variance`, which are
    non-trainable variables. `gamma` (scale) and `beta` (center) are trainable.

    `fused` is accepted for code written for tf.keras and ignored (as Keras 3 does): there is
    one implementation, `tg.nn.batch_normalization`.

    >>> bn = tg.layers.BatchNormalization()
    >>> x = tg.constant([[1.0, 10.0], [3.0, 30.0]])
    >>> bn(x, training=True).numpy().round(2)
    array([[-1., -1.],
           [ 1.,  1.]], dtype=float32)
    >>> bn.moving_mean.numpy().round(2)
    array([0.02, 0.2 ], dtype=float32)
    """

    supports_masking = True  # passes its input's mask on (Keras)
    _float32_compute = True  # in float32 under a mixed policy (Keras 3)

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones",
                 moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 fused=None, dtype=None, name=None, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        if fused not in (None, True, False):
            raise TypeError(f"BatchNormalization: fused must be None, True or False, got "
                            f"{fused!r}")
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"BatchNormalization: momentum must be in [0, 1], got {momentum}")
        self.axis = int(axis)
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.center, self.scale = bool(center), bool(scale)
        self._inits = (beta_initializer, gamma_initializer, moving_mean_initializer,
                       moving_variance_initializer)
        self.gamma = self.beta = self.moving_mean = self.moving_variance = None

    def build(self, input_shape):
        ndim = len(input_shape)
        if not -ndim <= self.axis < ndim:
            raise ValueError(f"BatchNormalization {self.name!r}: axis {self.axis} is out of "
                             f"range for inputs of shape {input_shape}")
        self.axis = self.axis % ndim
        dim = (input_shape[self.axis],)
        beta, gamma, mean, var = self._inits
        if self.scale:
            self.gamma = self.add_weight("gamma", dim, gamma)
        if self.center:
            self.beta = self.add_weight("beta", dim, beta)
        self.moving_mean = self.add_weight("moving_mean", dim, mean, trainable=False)
        self.moving_variance = self.add_weight("moving_variance", dim, var, trainable=False)

    def call(self, inputs, training=False):
        ndim = inputs.ndim
        features = self.moving_mean.shape[0]
        if ndim <= self.axis or inputs.shape[self.axis] != features:
            raise ValueError(f"BatchNormalization {self.name!r}: built for {features} features "
                             f"on axis {self.axis}, got inputs of shape {inputs.shape}")
        bshape = [1] * ndim
        bshape[self.axis] = inputs.shape[self.axis]
        if training:
            axes = [a for a in range(ndim) if a != self.axis]
            mean, var = ops.moments(inputs, axes=axes, keepdims=True)
            self._update_moving(mean, var)
        else:
            mean = ops.reshape(self.moving_mean.value(), bshape)
            var = ops.reshape(self.moving_variance.value(), bshape)
        gamma = ops.reshape(self.gamma.value(), bshape) if self.scale else None
        beta = ops.reshape(self.beta.value(), bshape) if self.center else None
        return ops.batch_normalization(inputs, mean, var, beta, gamma, self.epsilon)

    def _update_moving(self, mean, var):
        """moving = moving * m + stat * (1 - m): eagerly on raw arrays (no tape records it);
        inside tg.function as ops and an assign, so that every call of the function updates
        the statistics (a raw update would happen at the trace only)."""
        m = self.momentum
        for moving, stat in ((self.moving_mean, mean), (self.moving_variance, var)):
            if _thread.tracers:
                batch = ops.reshape(ops.stop_gradient(stat), moving.shape)
                moving.assign(moving.value() * m + batch * (1.0 - m))
                continue
            batch = stat._data.reshape(moving.shape)
            moving._assign_array(moving._value._data * m + batch * (1.0 - m))


class LayerNormalization(Layer):
    """Normalises each example over `axis` (default: the last):
    `(x - mean) / sqrt(variance + epsilon) * gamma + beta`, Keras' formula.

    >>> ln = tg.layers.LayerNormalization()
    >>> ln(tg.constant([[1.0, 3.0]])).numpy().round(4)
    array([[-0.9995,  0.9995]], dtype=float32)
    """

    supports_masking = True  # passes its input's mask on (Keras)
    _float32_compute = True  # in float32 under a mixed policy (Keras 3)

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", dtype=None, name=None,
                 **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        self.axis = tuple(axis) if isinstance(axis, (list, tuple)) else (int(axis),)
        self.epsilon = float(epsilon)
        self.center, self.scale = bool(center), bool(scale)
        self._inits = (beta_initializer, gamma_initializer)
        self.gamma = self.beta = None

    def build(self, input_shape):
        ndim = len(input_shape)
        for a in self.axis:
            if not -ndim <= a < ndim:
                raise ValueError(f"LayerNormalization {self.name!r}: axis {a} is out of range "
                                 f"for inputs of shape {input_shape}")
        self.axis = tuple(sorted(a % ndim for a in self.axis))
        shape = tuple(input_shape[a] for a in self.axis)
        if self.scale:
            self.gamma = self.add_weight("gamma", shape, self._inits[1])
        if self.center:
            self.beta = self.add_weight("beta", shape, self._inits[0])

    def call(self, inputs):
        bshape = [inputs.shape[a] if a in self.axis else 1 for a in range(inputs.ndim)]
        mean, var = ops.moments(inputs, axes=list(self.axis), keepdims=True)
        y = (inputs - mean) * ops.rsqrt(var + self.epsilon)
        if self.scale:
            y = y * ops.reshape(self.gamma.value(), bshape)
        if self.center:
            y = y + ops.reshape(self.beta.value(), bshape)
        return y


def _l2_normalize(x, axis):
    """x / sqrt(max(sum(x^2), 1e-12)) along `axis` (Keras' normalize)."""
    return x * ops.rsqrt(ops.maximum(ops.reduce_sum(ops.square(x), axis=axis, keepdims=True),
                                     ops.cast(1e-12, x.dtype)))


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
    _float32_compute = True  # in float32 under a mixed policy (Keras 3)

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
