"""Keras 3's preprocessing layers: `Rescaling`, `Normalization` (with `adapt`), and the image
preprocessing and augmentation layers `Resizing`, `CenterCrop`, `RandomCrop`, `RandomFlip`,
`RandomRotation`, `RandomZoom`, `RandomTranslation`, `RandomContrast`, `RandomBrightness`,
with the `affine_transform` the geometric ones share.

Images are channels-last, `(height, width, channels)` or a batch `(batch, height, width,
channels)`. Integer and float16 inputs are computed in float32 (Keras' compute dtype); float32
and float64 inputs keep their dtype. The random layers act unless called with
`training=False` (Keras 3's default: a direct call, or a model called without `training`,
augments; `predict` and `evaluate` pass False, `fit` True); their draws are random nodes (new
at every call, also of a `tg.function`), from the layer's own generator when it has a `seed`
(as `Dropout`'s) and from tapegpu's global stream otherwise (`tg.random.set_seed`).

`affine_transform` follows TensorFlow's `ImageProjectiveTransformV3` (Keras' TensorFlow
backend): output pixel (x, y) reads the input at `((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2)
/ k)`, `k = c0 x + c1 y + 1`; coordinates outside the image are first mapped by the fill mode
(reflect `dcba|abcd|dcba`, wrap `abcd|abcd|abcd`, nearest `aaaa|abcd|dddd`, constant: kept)
and clamped to the image, then sampled bilinearly or at the nearest pixel, samples outside
the image reading `fill_value`. One difference, an improvement: wrap is `c mod size`, where
TF's kernel divides by `size - 1` and so misplaces coordinates `size - 1` or more pixels
outside the image. The transform is gathers and arithmetic on tapegpu tensors, so it runs on
every device and is differentiable in the images.
"""
import math

import numpy as np

from ... import ops
from ...core.tensor import Tensor, Variable, convert_to_tensor
from ...ops.image import resize
from ...ops.random import seeded_uniform, uniform
from .base import Layer

_FILL_MODES = ("reflect", "wrap", "constant", "nearest")
_INTERPOLATIONS = ("bilinear", "nearest")


# -- affine_transform ------------------------------------------------------------------------------

def _reflect(c, n):
    """TF's reflect mapping of coordinates `c` into [0, n - 1] (dcba|abcd|dcba)."""
    period = 2.0 * n
    below = c + period * ops.floor(-c / period)
    below = ops.where(below < -n, below + period, -below - 1.0)
    above = c - period * ops.floor(c / period)
    above = ops.where(above >= n, period - above - 1.0, above)
    return ops.where(c < 0.0, below, ops.where(c > n - 1.0, above, c))


def _wrap(c, n):
    """The wrap mapping of coordinates `c` into [0, n) (abcd|abcd|abcd): c mod n. (TF's kernel
    divides by n - 1 instead, which wraps shifts of n - 1 pixels or more to the wrong place.)"""
    return c - n * ops.floor(c / n)


def _map_coordinates(c, n, fill_mode):
    if fill_mode == "constant":
        return c
    if n <= 1:
        return c * 0.0
    if fill_mode == "reflect":
        c = _reflect(c, float(n))
    elif fill_mode == "wrap":
        c = _wrap(c, float(n))
    return ops.clip_by_value(c, 0.0, float(n - 1))


def _read(flat, y, x, shape, fill_value):
    """Pixels `flat[b, y, x, :]` at integer-valued float coordinates `y`, `x` ([batch, height,
    width]); `fill_value` where they fall outside the image."""
    b, h, w, c = shape
    inside = (y >= 0.0) & (y <= h - 1.0) & (x >= 0.0) & (x <= w - 1.0)
    yi = ops.cast(ops.clip_by_value(y, 0.0, float(max(h - 1, 0))), np.int64)
    xi = ops.cast(ops.clip_by_value(x, 0.0, float(max(w - 1, 0))), np.int64)
    base = np.arange(b, dtype=np.int64).reshape(b, 1, 1) * (h * w)
    values = ops.gather(flat, base + yi * w + xi, axis=0)
    return ops.where(ops.expand_dims(inside, -1), values,
                     ops.cast(fill_value, flat.dtype))


def affine_transform(images, transform, interpolation="bilinear", fill_mode="constant",
                     fill_value=0.0):
    """Applies projective transforms to channels-last images, as
    `keras.ops.image.affine_transform` with TensorFlow's kernel (see the module docstring).
    `transform` is `[a0, a1, a2, b0, b1, b2, c0, c1]` mapping output to input coordinates,
    one (shape `(8,)`) for all images or one per image (`(batch, 8)`). Differentiable in the
    images.

    >>> from tapegpu.keras.layers.preprocessing import affine_transform
    >>> img = tg.reshape(tg.range(6.0), (2, 3, 1))
    >>> shift = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]  # reads x + 1
    >>> affine_transform(img, shift, fill_mode="nearest")[..., 0].numpy()
    array([[1., 2., 2.],
           [4., 5., 5.]], dtype=float32)
    """
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"affine_transform: invalid value for argument `interpolation`; "
                         f"expected one of {_INTERPOLATIONS}, received "
                         f"interpolation={interpolation!r}")
    if fill_mode not in _FILL_MODES:
        raise ValueError(f"affine_transform: invalid value for argument `fill_mode`; expected "
                         f"one of {_FILL_MODES}, received fill_mode={fill_mode!r}")
    x = _float_images(convert_to_tensor(images))
    if x.ndim not in (3, 4):
        raise ValueError(f"affine_transform: invalid images rank: expected rank 3 (single "
                         f"image) or rank 4 (batch of images), received images.shape={x.shape}")
    single = x.ndim == 3
    if single:
        x = ops.expand_dims(x, 0)
    dt = np.float64 if x.dtype == np.float64 else np.float32
    t = transform if isinstance(transform, Tensor) else np.asarray(transform, dt)
    t = convert_to_tensor(t)
    if t.ndim not in (1, 2) or t.shape[-1] != 8 or (t.ndim == 2 and t.shape[0] not in
                                                     (1, x.shape[0])):
        raise ValueError(f"affine_transform: transform must have shape (8,) or (batch, 8) with "
                         f"batch {x.shape[0]}, received transform.shape={t.shape}")
    b, h, w, c = x.shape
    t = ops.reshape(ops.cast(t, dt), (-1, 8, 1, 1))
    ys = np.arange(h, dtype=dt).reshape(1, h, 1)
    xs = np.arange(w, dtype=dt).reshape(1, 1, w)
    a0, a1, a2, b0, b1, b2, c0, c1 = (t[:, i] for i in range(8))
    k = c0 * xs + c1 * ys + 1.0
    src_x = _map_coordinates((a0 * xs + a1 * ys + a2) / k, w, fill_mode)
    src_y = _map_coordinates((b0 * xs + b1 * ys + b2) / k, h, fill_mode)
    if t.shape[0] != b:  # one transform for every image
        src_x = ops.broadcast_to(src_x, (b, h, w))
        src_y = ops.broadcast_to(src_y, (b, h, w))
    flat = ops.reshape(x, (b * h * w, c))
    shape = (b, h, w, c)
    if interpolation == "nearest":
        # std::round: halves away from zero
        ry = ops.sign(src_y) * ops.floor(ops.abs(src_y) + 0.5)
        rx = ops.sign(src_x) * ops.floor(ops.abs(src_x) + 0.5)
        out = _read(flat, ry, rx, shape, fill_value)
    else:
        y0, x0 = ops.floor(src_y), ops.floor(src_x)
        wy = ops.expand_dims(ops.cast(src_y - y0, x.dtype), -1)
        wx = ops.expand_dims(ops.cast(src_x - x0, x.dtype), -1)
        top = (1.0 - wx) * _read(flat, y0, x0, shape, fill_value) + \
            wx * _read(flat, y0, x0 + 1.0, shape, fill_value)
        bottom = (1.0 - wx) * _read(flat, y0 + 1.0, x0, shape, fill_value) + \
            wx * _read(flat, y0 + 1.0, x0 + 1.0, shape, fill_value)
        out = (1.0 - wy) * top + wy * bottom
    return ops.squeeze(out, 0) if single else out


# -- shared helpers --------------------------------------------------------------------------------

def _float_images(x):
    """Integer and float16 images as float32 (Keras' compute dtype); float32/64 kept."""
    return x if x.dtype in (np.float32, np.float64) else ops.cast(x, np.float32)


def _images(layer, inputs):
    x = _float_images(convert_to_tensor(inputs))
    if x.ndim not in (3, 4):
        raise ValueError(f"{type(layer).__name__}: expected the input image to be rank 3 or 4 "
                         f"(channels last), received inputs.shape={x.shape}")
    return x


def _draw(layer, shape, minval, maxval, dtype, device):
    """Uniform numbers in [minval, maxval): from the layer's own generator when it has a seed,
    else from tapegpu's global stream; a random node either way."""
    if layer._generator is None:
        u = uniform(shape, dtype=dtype, device=device)
    else:
        u = layer._generator(shape, dtype, device)
    return u * (maxval - minval) + minval


def _per_image(x):
    """The shape of one draw per image: `(batch,)` or `(1,)` for a single image."""
    return (x.shape[0],) if x.ndim == 4 else (1,)


def _size_arg(layer, **sizes):
    for key, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise ValueError(f"{type(layer).__name__}: {key} must be a positive integer, "
                             f"received {key}={v!r}")
    return tuple(int(v) for v in sizes.values())


def _factor_pair(layer, factor, name, bounds):
    """Keras' `factor` convention: a number f gives [-|f|, |f|] (cut at the lower bound), a
    pair (lower, upper) is sorted; every value within `bounds`."""
    msg = (f"{type(layer).__name__}: the `{name}` argument should be a number (or a list of two "
           f"numbers) in the range [{bounds[0]}, {bounds[1]}], received {name}={factor!r}")
    if isinstance(factor, (tuple, list)):
        if len(factor) != 2 or any(isinstance(v, bool) or not isinstance(
                v, (int, float, np.integer, np.floating)) for v in factor):
            raise ValueError(msg)
        lower, upper = sorted(float(v) for v in factor)
        if lower < bounds[0] or upper > bounds[1]:
            raise ValueError(msg)
        return lower, upper
    if isinstance(factor, bool) or not isinstance(factor, (int, float, np.integer, np.floating)):
        raise ValueError(msg)
    f = float(factor)
    if not bounds[0] <= f <= bounds[1] and not bounds[0] <= -f <= bounds[1]:
        raise ValueError(msg)
    return max(-abs(f), bounds[0]), abs(f)


def _check_modes(layer, fill_mode, interpolation):
    if fill_mode not in _FILL_MODES:
        raise NotImplementedError(f"{type(layer).__name__}: unknown `fill_mode` {fill_mode!r}; "
                                  f"expected one of {_FILL_MODES}")
    if interpolation not in _INTERPOLATIONS:
        raise NotImplementedError(f"{type(layer).__name__}: unknown `interpolation` "
                                  f"{interpolation!r}; expected one of {_INTERPOLATIONS}")


def _smart_resize(x, height, width, interpolation):
    """Keras' `smart_resize`: the largest central window with the target aspect ratio, resized
    to `(height, width)`."""
    h, w = x.shape[-3], x.shape[-2]
    crop_h = max(min(h, int(float(w * height) / width)), 1)
    crop_w = max(min(w, int(float(h * width) / height)), 1)
    top, left = int(float(h - crop_h) / 2), int(float(w - crop_w) / 2)
    x = x[..., top:top + crop_h, left:left + crop_w, :]
    return resize(x, [height, width], method=interpolation)


# -- resizing and cropping -------------------------------------------------------------------------

class Resizing(Layer):
    """Resizes images to `(height, width)` (Keras' Resizing, TF's half-pixel resize;
    `interpolation` 'bilinear', 'nearest' or 'bicubic'). With `crop_to_aspect_ratio=True` the
    largest central window with the target aspect ratio is resized, so nothing is distorted.
    Float images come back float32 (float64 for float64 images); integer images are resized
    in float32, rounded and cast back to their dtype, as Keras does.

    >>> tg.keras.layers.Resizing(4, 6)(tg.ones((2, 8, 8, 3))).shape
    (2, 4, 6, 3)
    """

    def __init__(self, height, width, interpolation="bilinear", crop_to_aspect_ratio=False,
                 name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.height, self.width = _size_arg(self, height=height, width=width)
        if interpolation not in ("bilinear", "nearest", "bicubic"):
            raise ValueError(f"Resizing: invalid interpolation {interpolation!r}; expected "
                             f"'bilinear', 'nearest' or 'bicubic'")
        self.interpolation = interpolation
        self.crop_to_aspect_ratio = bool(crop_to_aspect_ratio)

    def _convert(self, inputs):  # integer images keep their dtype (Keras resizes them back)
        x = inputs._read() if isinstance(inputs, Variable) else inputs
        x = x if isinstance(x, Tensor) else convert_to_tensor(x)
        return x if x._data.dtype.kind in "iu" else super()._convert(x)

    def call(self, inputs, training=False):  # the same in training and inference
        src = convert_to_tensor(inputs)
        x = _images(self, src)
        if self.crop_to_aspect_ratio:
            out = _smart_resize(x, self.height, self.width, self.interpolation)
        else:
            out = resize(x, [self.height, self.width], method=self.interpolation)
        if src._data.dtype.kind in "iu":  # Keras: integer images come back rounded, in their dtype
            info = np.iinfo(src._data.dtype)
            out = ops.cast(ops.clip_by_value(ops.round(out), float(info.min), float(info.max)),
                           src.dtype)
        return out


class CenterCrop(Layer):
    """The central `(height, width)` window of images (Keras' CenterCrop: the window starts at
    `(size - target) // 2`); an image smaller than the target along an axis is resized as
    `Resizing(..., crop_to_aspect_ratio=True)` instead.

    >>> img = tg.reshape(tg.range(16.0), (4, 4, 1))
    >>> tg.keras.layers.CenterCrop(2, 2)(img)[..., 0].numpy()
    array([[ 5.,  6.],
           [ 9., 10.]], dtype=float32)
    """

    def __init__(self, height, width, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.height, self.width = _size_arg(self, height=height, width=width)

    def call(self, inputs, training=False):  # the same in training and inference
        x = _images(self, inputs)
        h, w = x.shape[-3], x.shape[-2]
        if h < self.height or w < self.width:
            return _smart_resize(x, self.height, self.width, "bilinear")
        top, left = (h - self.height) // 2, (w - self.width) // 2
        return x[..., top:top + self.height, left:left + self.width, :]


def _inference(training):
    """Whether a random layer is the identity: only when called with `training=False` (None,
    a model called without `training`, augments as Keras 3's layers do)."""
    return training is not None and not training


class RandomCrop(Layer):
    """In training, a `(height, width)` window at a random offset (one offset for the whole
    batch, as Keras); at inference, and for inputs not larger than the target, the central
    window with the target aspect ratio resized to `(height, width)`, as Keras documents
    (Keras 3.15's code returns the input unchanged at inference, so its output shape differs
    between training and inference; here it is `(height, width)` in both).

    >>> layer = tg.keras.layers.RandomCrop(2, 3, seed=1)
    >>> layer(tg.ones((4, 5, 6, 3)), training=True).shape
    (4, 2, 3, 3)
    """

    def __init__(self, height, width, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.height, self.width = _size_arg(self, height=height, width=width)
        self.seed = seed
        self._generator = seeded_uniform(seed)

    def call(self, inputs, training=True):
        x = _images(self, inputs)
        h, w = x.shape[-3], x.shape[-2]
        if _inference(training) or not (h > self.height and w > self.width):
            return _smart_resize(x, self.height, self.width, "bilinear")
        limits = np.array([h - self.height + 1, w - self.width + 1], np.float64)
        start = ops.cast(ops.floor(_draw(self, (2,), 0.0, 1.0, np.float64, x._dev) * limits),
                         np.int64)
        x = ops.gather(x, start[0] + np.arange(self.height, dtype=np.int64), axis=x.ndim - 3)
        return ops.gather(x, start[1] + np.arange(self.width, dtype=np.int64), axis=x.ndim - 2)


# -- random flips and affine transforms ------------------------------------------------------------

_FLIP_MODES = ("horizontal", "vertical", "horizontal_and_vertical")


def _reverse(x, axis):
    return ops.gather(x, np.arange(x.shape[axis] - 1, -1, -1, dtype=np.int64),
                      axis=axis % x.ndim)


class RandomFlip(Layer):
    """In training, flips each image with probability 1/2: left-right (`mode='horizontal'`),
    upside down (`'vertical'`) or both, with one draw per image used for both axes
    (`'horizontal_and_vertical'`, the default), as Keras' RandomFlip.

    >>> layer = tg.keras.layers.RandomFlip("horizontal", seed=0)
    >>> img = tg.reshape(tg.constant([1.0, 2.0]), (1, 2, 1))
    >>> sorted(layer(img, training=True)[0, :, 0].numpy().tolist())
    [1.0, 2.0]
    """

    def __init__(self, mode="horizontal_and_vertical", seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if mode not in _FLIP_MODES:
            raise ValueError(f"RandomFlip: RandomFlip layer {self.name} received an unknown "
                             f"mode argument {mode!r}; expected one of {_FLIP_MODES}")
        self.mode, self.seed = mode, seed
        self._generator = seeded_uniform(seed)

    def call(self, inputs, training=True):
        x = _images(self, inputs)
        if _inference(training):
            return x
        coin = _draw(self, _per_image(x) + (1, 1, 1), 0.0, 1.0, np.float32, x._dev)
        flips = coin <= 0.5
        if x.ndim == 3:
            flips = ops.squeeze(flips, 0)
        if self.mode in ("horizontal", "horizontal_and_vertical"):
            x = ops.where(flips, _reverse(x, -2), x)
        if self.mode in ("vertical", "horizontal_and_vertical"):
            x = ops.where(flips, _reverse(x, -3), x)
        return x


class _RandomAffine(Layer):
    """The geometric random layers: `_transforms(x)` gives one affine transform per image."""

    def __init__(self, fill_mode, interpolation, seed, fill_value, name, kwargs):
        super().__init__(name=name, **kwargs)
        _check_modes(self, fill_mode, interpolation)
        self.fill_mode, self.interpolation = fill_mode, interpolation
        self.fill_value, self.seed = float(fill_value), seed
        self._generator = seeded_uniform(seed)

    def call(self, inputs, training=True):
        x = _images(self, inputs)
        if _inference(training):
            return x
        return affine_transform(x, self._transforms(x), self.interpolation, self.fill_mode,
                                self.fill_value)

    def _uniform(self, x, lower, upper):
        return _draw(self, _per_image(x), lower, upper, np.float32, x._dev)


def _rotation_transform(angles, height, width):
    """The transforms rotating `(height, width)` images by `angles` (radians, one per image,
    counter-clockwise) about their centre `((width - 1) / 2, (height - 1) / 2)`: Keras'
    affine matrix, `[cos, -sin, cx - cx cos + cy sin, sin, cos, cy - cx sin - cy cos, 0, 0]`."""
    a = convert_to_tensor(angles)
    cx, cy = (width - 1) / 2.0, (height - 1) / 2.0
    cos, sin = ops.cos(a), ops.sin(a)
    zero = ops.zeros_like(a)
    return ops.stack([cos, -sin, cx - cx * cos + cy * sin, sin, cos, cy - cx * sin - cy * cos,
                      zero, zero], axis=1)


class RandomRotation(_RandomAffine):
    """In training, rotates each image by a random angle about its centre (Keras'
    RandomRotation): `factor` f draws from [-f, f] and `(lower, upper)` from that range, as
    fractions of a full turn (f = 0.1 is up to 36 degrees either way). The pixels that come
    from outside the image follow `fill_mode` ('reflect', 'wrap', 'constant' with
    `fill_value`, 'nearest'); `interpolation` is 'bilinear' or 'nearest'.

    >>> layer = tg.keras.layers.RandomRotation(0.1, seed=0)
    >>> layer(tg.ones((2, 5, 5, 3)), training=True).shape
    (2, 5, 5, 3)
    """

    def __init__(self, factor, fill_mode="reflect", interpolation="bilinear", seed=None,
                 fill_value=0.0, name=None, **kwargs):
        super().__init__(fill_mode, interpolation, seed, fill_value, name, kwargs)
        self.factor = _factor_pair(self, factor, "factor", (-1.0, 1.0))

    def _transforms(self, x):
        angle = self._uniform(x, self.factor[0] * 2.0 * math.pi, self.factor[1] * 2.0 * math.pi)
        return _rotation_transform(angle, x.shape[-3], x.shape[-2])


class RandomZoom(_RandomAffine):
    """In training, zooms each image about its centre by a random factor (Keras' RandomZoom):
    `height_factor` f draws the vertical scale of what is read from [1 - f, 1 + f] (a pair
    `(lower, upper)`: [1 + lower, 1 + upper]), so a positive f zooms out and a negative one
    in; `width_factor` likewise, None keeps the aspect ratio (the height's draw). Fill modes
    and interpolation as RandomRotation.

    >>> layer = tg.keras.layers.RandomZoom(0.2, seed=0)
    >>> layer(tg.ones((2, 6, 6, 1)), training=True).shape
    (2, 6, 6, 1)
    """

    def __init__(self, height_factor, width_factor=None, fill_mode="reflect",
                 interpolation="bilinear", seed=None, fill_value=0.0, name=None, **kwargs):
        super().__init__(fill_mode, interpolation, seed, fill_value, name, kwargs)
        self.height_factor = height_factor
        self.height_lower, self.height_upper = _factor_pair(self, height_factor,
                                                            "height_factor", (-1.0, 1.0))
        self.width_factor = width_factor
        if width_factor is not None:
            self.width_lower, self.width_upper = _factor_pair(self, width_factor,
                                                              "width_factor", (-1.0, 1.0))

    def _transforms(self, x):
        zy = self._uniform(x, 1.0 + self.height_lower, 1.0 + self.height_upper)
        zx = zy if self.width_factor is None else \
            self._uniform(x, 1.0 + self.width_lower, 1.0 + self.width_upper)
        h, w = x.shape[-3], x.shape[-2]
        zero = ops.zeros_like(zx)
        return ops.stack([zx, zero, (w - 1) / 2.0 * (1.0 - zx), zero, zy,
                          (h - 1) / 2.0 * (1.0 - zy), zero, zero], axis=1)


class RandomTranslation(_RandomAffine):
    """In training, shifts each image by a random fraction of its size (Keras'
    RandomTranslation): `height_factor` f draws the vertical shift from [-f, f] times the
    height (a pair: [lower, upper]; positive moves the image down), `width_factor` the
    horizontal one (positive: right). Fill modes and interpolation as RandomRotation.

    >>> layer = tg.keras.layers.RandomTranslation(0.2, 0.2, seed=0)
    >>> layer(tg.ones((2, 5, 5, 1)), training=True).shape
    (2, 5, 5, 1)
    """

    def __init__(self, height_factor, width_factor, fill_mode="reflect",
                 interpolation="bilinear", seed=None, fill_value=0.0, name=None, **kwargs):
        super().__init__(fill_mode, interpolation, seed, fill_value, name, kwargs)
        self.height_factor, self.width_factor = height_factor, width_factor
        self.height_lower, self.height_upper = _factor_pair(self, height_factor,
                                                            "height_factor", (-1.0, 1.0))
        self.width_lower, self.width_upper = _factor_pair(self, width_factor, "width_factor",
                                                          (-1.0, 1.0))

    def _transforms(self, x):
        h, w = x.shape[-3], x.shape[-2]
        dy = self._uniform(x, self.height_lower, self.height_upper) * float(h)
        dx = self._uniform(x, self.width_lower, self.width_upper) * float(w)
        zero, one = ops.zeros_like(dx), ops.ones_like(dx)
        return ops.stack([one, zero, -dx, zero, one, -dy, zero, zero], axis=1)


# -- random colour changes -------------------------------------------------------------------------

def _value_range(layer, value_range):
    try:
        lo, hi = (float(v) for v in value_range)
    except (TypeError, ValueError):
        lo = hi = None
    if lo is None or not lo < hi:
        raise ValueError(f"{type(layer).__name__}: the `value_range` argument should be a list "
                         f"of two numbers (lower < upper), received value_range={value_range!r}")
    return lo, hi


class RandomContrast(Layer):
    """In training, scales each image's deviation from its per-channel mean by a random
    factor, `(x - mean) * f + mean`, then clips to `value_range` (Keras' RandomContrast).
    `factor` c draws f from [1 - c, 1 + c], a pair `(lower, upper)` from [1 - lower,
    1 + upper], as Keras documents (Keras 3.15's code draws a single number c from [1, 1 + c]).

    >>> layer = tg.keras.layers.RandomContrast(0.5, seed=0)
    >>> x = tg.fill((1, 2, 2, 1), 100.0)
    >>> bool(tg.reduce_all(layer(x, training=True) == x))  # a flat image keeps its mean
    True
    """

    def __init__(self, factor, value_range=(0, 255), seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(factor, (tuple, list)):
            self.factor = _factor_pair(self, factor, "factor", (0.0, 1.0))
        else:
            self.factor = (abs(_factor_pair(self, factor, "factor", (-1.0, 1.0))[1]),) * 2
        self.value_range = _value_range(self, value_range)
        self.seed = seed
        self._generator = seeded_uniform(seed)

    def call(self, inputs, training=True):
        x = _images(self, inputs)
        if _inference(training):
            return x
        f = _draw(self, _per_image(x) + (1, 1, 1), 1.0 - self.factor[0], 1.0 + self.factor[1],
                  x.dtype, x._dev)
        if x.ndim == 3:
            f = ops.squeeze(f, 0)
        mean = ops.reduce_mean(x, axis=(-3, -2), keepdims=True)
        return ops.clip_by_value((x - mean) * f + mean, *self.value_range)


class RandomBrightness(Layer):
    """In training, adds to each image a random delta, a fraction of the `value_range` width
    drawn from [-f, f] for `factor` f (or from [lower, upper] for a pair), then clips to
    `value_range` (Keras' RandomBrightness).

    >>> layer = tg.keras.layers.RandomBrightness(0.1, value_range=(0.0, 1.0), seed=0)
    >>> y = layer(tg.fill((2, 2, 2, 1), 0.5), training=True)
    >>> bool(tg.reduce_all(tg.abs(y - 0.5) <= 0.1))
    True
    """

    def __init__(self, factor, value_range=(0, 255), seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.factor = _factor_pair(self, factor, "factor", (-1.0, 1.0))
        self.value_range = _value_range(self, value_range)
        self.seed = seed
        self._generator = seeded_uniform(seed)

    def call(self, inputs, training=True):
        x = _images(self, inputs)
        if _inference(training):
            return x
        lo, hi = self.value_range
        delta = _draw(self, _per_image(x) + (1, 1, 1), self.factor[0], self.factor[1], x.dtype,
                      x._dev) * (hi - lo)
        if x.ndim == 3:
            delta = ops.squeeze(delta, 0)
        return ops.clip_by_value(x + delta, lo, hi)


# -- Rescaling, Normalization ----------------------------------------------------------------------

class Rescaling(Layer):
    """`inputs * scale + offset` (integer inputs are cast to the layer's dtype first).

    >>> tg.layers.Rescaling(1 / 255)(tg.constant([[0, 255]], dtype="uint8")).numpy()
    array([[0., 1.]], dtype=float32)
    """

    supports_masking = True  # passes its input's mask on (Keras)

    def __init__(self, scale, offset=0.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale, self.offset = float(scale), float(offset)

    def call(self, inputs):
        return inputs * self.scale + self.offset


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
