"""`tg.image`: resizing, dtype conversion, flips and rotations, crops and pads, colour
adjustments (brightness, contrast, saturation, hue, grayscale, HSV), their random versions, and
image quality measures (total variation, PSNR, SSIM), with TensorFlow 2's semantics.

Images are `[height, width, channels]` or batches `[batch, height, width, channels]`. Every
function is composed from tapegpu's ops, so it runs on every device and is differentiable
where TensorFlow's is. The random functions draw from tapegpu's random streams
(`tg.random.set_seed`, op seeds): each call draws anew, also inside a `tg.function`, where the
draw is a random node of the graph.

`resize` samples at TF2's half-pixel centers (`half_pixel_centers=True`, `align_corners=False`):
output pixel i along an axis of input size n and output size m reads the input at
`(i + 0.5) * n / m - 0.5` (nearest neighbour: `floor((i + 0.5) * n / m)`), with the positions
computed in float32 as TensorFlow's kernels do. Each method is linear along each axis, so a
resize is `M_h @ image @ M_w^T` over the spatial axes with interpolation matrices that depend
only on the sizes; the gradient is the transposed product (nearest neighbour: a gather, whose
gradient adds up the output pixels each input pixel fed).

Dtypes: as in TensorFlow, bilinear and bicubic give float32 for integer and float16 images and
nearest neighbour keeps the image's dtype; float64 images stay float64 (TensorFlow rounds them
to float32), so that float64 gradients can be checked. `adjust_contrast` likewise computes
float64 images in float64.
"""
import math

import numpy as np

from ..core.dtypes import as_dtype, np_dtype
from ..core.tensor import Tensor, Variable
from ._base import InvalidArgumentError, apply, public, tensor
from .registry import def_op
from .binary import clip_by_value, equal, greater, less, maximum, where
from .conv import depthwise_conv2d
from .linalg import einsum, tensordot
from .random import stateless_uniform, uniform
from .reduce import reduce_max, reduce_mean, reduce_min, reduce_std, reduce_sum
from .shape import expand_dims, gather, pad, reshape, squeeze, stack, tile
from .shape import transpose as permute
from .unary import abs as absolute, cast, floor, log
from ..errors import UnimplementedError


class ResizeMethod:
    """The names of `tg.image.resize`'s methods (`tf.image.ResizeMethod`). BILINEAR,
    NEAREST_NEIGHBOR and BICUBIC are implemented; the others raise `tg.errors.UnimplementedError`.
    """
    BILINEAR = "bilinear"
    NEAREST_NEIGHBOR = "nearest"
    BICUBIC = "bicubic"
    AREA = "area"
    LANCZOS3 = "lanczos3"
    LANCZOS5 = "lanczos5"
    GAUSSIAN = "gaussian"
    MITCHELLCUBIC = "mitchellcubic"


_METHODS = ("bilinear", "nearest", "bicubic")
_NOT_HERE = ("area", "lanczos3", "lanczos5", "gaussian", "mitchellcubic")


# -- interpolation matrices (host numpy, float64 weights from TF's float32 positions) ----------

def _scale(n_in, n_out):
    return np.float32(n_in) / np.float32(n_out)


def _bilinear_matrix(n_in, n_out):
    """Row i: TF's `lower`, `upper` and `lerp` of output i (resize_bilinear_op.cc)."""
    pos = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * _scale(n_in, n_out) - \
        np.float32(0.5)
    floor = np.floor(pos)
    lerp = (pos - floor).astype(np.float64)
    lower = np.maximum(floor.astype(np.int64), 0)
    upper = np.minimum(np.ceil(pos).astype(np.int64), n_in - 1)
    m = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    np.add.at(m, (rows, lower), 1.0 - lerp)
    np.add.at(m, (rows, upper), lerp)
    return m


def _nearest_index(n_in, n_out):
    """TF's nearest source index: min(floor((i + 0.5) * scale), n_in - 1), at least 0."""
    pos = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * _scale(n_in, n_out)
    return np.clip(np.floor(pos).astype(np.int64), 0, n_in - 1)


_TABLE = 1024  # TF's bicubic kernel reads its weights from a table of 1024 steps per pixel


def _keys_cubic(x, a=-0.5):
    """Keys' cubic convolution kernel with a = -0.5 (TF2's bicubic, half-pixel centers)."""
    x = np.abs(x)
    return np.where(x <= 1, ((a + 2) * x - (a + 3)) * x * x + 1,
                    np.where(x < 2, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0.0))


def _bicubic_matrix(n_in, n_out):
    """Row i: TF's four taps around floor(pos), weights at the fraction rounded to 1/1024 (TF's
    table), taps outside the image weighted 0 and the rest renormalised to sum 1."""
    pos = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * _scale(n_in, n_out) - \
        np.float32(0.5)
    base = np.floor(pos)
    delta = pos - base
    step = np.rint(delta * np.float32(_TABLE)).astype(np.int64)
    d = step / float(_TABLE)  # exact; the weights in float64 (TF's table holds float32s)
    weights = [_keys_cubic(d + 1), _keys_cubic(d), _keys_cubic(1 - d), _keys_cubic(2 - d)]
    base = base.astype(np.int64)
    m = np.zeros((n_out, n_in))
    taps = [base - 1, base, base + 1, base + 2]
    inside = [(t >= 0) & (t < n_in) for t in taps]
    total = sum(np.where(ok, w, 0.0) for ok, w in zip(inside, weights))
    rows = np.arange(n_out)
    for t, ok, w in zip(taps, inside, weights):
        np.add.at(m, (rows[ok], t[ok]), w[ok] / total[ok])
    return m


_MATRICES = {"bilinear": _bilinear_matrix, "bicubic": _bicubic_matrix}


def _on_device(x, host):
    dev = x._dev
    return Tensor(host if dev.xp is np else dev.asarray(host), dev)


def _float_image(x):
    """Integer and float16 images as float32 (plain casts, TF's resize); float32/64 unchanged."""
    return x if x._data.dtype in (np.float32, np.float64) else cast(x, np.float32)


# -- resize ---------------------------------------------------------------------------------------

def _as_batch(images, op):
    x = tensor(images)
    if x.ndim not in (3, 4):
        raise InvalidArgumentError(f"{op}: 'images' must have either 3 or 4 dimensions "
                                   f"([height, width, channels] or [batch, height, width, "
                                   f"channels]), got shape {x.shape}")
    return (x, False) if x.ndim == 4 else (expand_dims(x, 0), True)


def _size(size, op):
    if isinstance(size, Tensor):
        size = size.numpy().tolist()
    try:
        vals = list(size)
    except TypeError:
        vals = None
    if vals is None or len(vals) != 2 or any(
            isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in vals):
        raise InvalidArgumentError(f"{op}: size must be 2 integers [new_height, new_width], got "
                                   f"{size!r}")
    if vals[0] <= 0 or vals[1] <= 0:
        raise InvalidArgumentError(f"{op}: the output size must be positive, got {vals}")
    return int(vals[0]), int(vals[1])


def _method(method, antialias, op):
    m = str(method).lower()
    if m in _NOT_HERE:
        raise UnimplementedError(None, None, f"{op}: method {m!r} is not implemented in tapegpu; "
                                             f"use one of {list(_METHODS)}")
    if m not in _METHODS:
        raise InvalidArgumentError(f"{op}: resize method is not implemented: {method!r}; valid "
                                   f"methods are {list(_METHODS) + list(_NOT_HERE)}")
    return m


def _check_antialias(antialias, method, x, height, width, op):
    """antialias=True changes nothing when no axis shrinks (TF's documented behaviour); when
    one does, its filters are not implemented here."""
    if antialias and (method != "bilinear" or height < x.shape[1] or width < x.shape[2]):
        raise UnimplementedError(None, None, f"{op}: antialias=True is implemented only for "
                                             f"bilinear upsampling (where it changes nothing); "
                                             f"got method {method!r} from "
                                             f"{tuple(x.shape[1:3])} to {(height, width)}")


def _resize4(x, height, width, method):
    """Resizes a [batch, height, width, channels] tensor (TF's resize kernels)."""
    h, w = x.shape[1], x.shape[2]
    if method == "nearest":
        x = gather(x, _nearest_index(h, height), axis=1)
        return gather(x, _nearest_index(w, width), axis=2)
    x = _float_image(x)
    dt = x._data.dtype
    make = _MATRICES[method]
    mh = _on_device(x, make(h, height).astype(dt))
    mw = _on_device(x, make(w, width).astype(dt))
    return einsum("pw,bowc->bopc", mw, einsum("oh,bhwc->bowc", mh, x))


def resize(images, size, method=ResizeMethod.BILINEAR, preserve_aspect_ratio=False,
           antialias=False, name=None):
    """Resizes images to `size = [new_height, new_width]` (tf.image.resize, TF2's half-pixel
    centers; see the module docstring). `method`: 'bilinear' (default), 'nearest' or 'bicubic'
    (TF2's Keys cubic, a = -0.5); `preserve_aspect_ratio` scales both sides by the smaller
    factor so that the result fits in `size`. `antialias=True` is accepted where it changes
    nothing (bilinear upsampling); elsewhere it raises `tg.errors.UnimplementedError`.
    Bilinear and bicubic return float32 (float64 for float64 images), nearest the image's
    dtype. Differentiable.

    >>> img = tg.reshape(tg.constant([0.0, 1.0, 2.0, 3.0]), (2, 2, 1))
    >>> tg.image.resize(img, [4, 4])[..., 0].numpy()
    array([[0.  , 0.25, 0.75, 1.  ],
           [0.5 , 0.75, 1.25, 1.5 ],
           [1.5 , 1.75, 2.25, 2.5 ],
           [2.  , 2.25, 2.75, 3.  ]], dtype=float32)
    >>> tg.image.resize(img, [1, 4], method="nearest")[..., 0].numpy()
    array([[2., 2., 3., 3.]], dtype=float32)
    """
    x, single = _as_batch(images, "resize")
    height, width = _size(size, "resize")
    m = _method(method, antialias, "resize")
    if preserve_aspect_ratio:
        h, w = np.float32(x.shape[1]), np.float32(x.shape[2])
        factor = min(np.float32(height) / h, np.float32(width) / w)
        height, width = int(np.round(factor * h)), int(np.round(factor * w))
    if x.shape[1] == 0 or x.shape[2] == 0:
        raise InvalidArgumentError(f"resize: the input image must be non-empty, got shape "
                                   f"{x.shape[1:] if single else x.shape}")
    _check_antialias(antialias, m, x, height, width, "resize")
    out = _resize4(x, height, width, m)
    return squeeze(out, 0) if single else out


def resize_with_pad(image, target_height, target_width, method=ResizeMethod.BILINEAR,
                    antialias=False):
    """Resizes to fit in `[target_height, target_width]` keeping the aspect ratio, then pads
    with zeros to that size, the image centred (tf.image.resize_with_pad, TF2; its arithmetic
    in float32). Differentiable.

    >>> img = tg.ones((2, 4, 1))
    >>> tg.image.resize_with_pad(img, 4, 4)[..., 0].numpy()
    array([[0., 0., 0., 0.],
           [1., 1., 1., 1.],
           [1., 1., 1., 1.],
           [0., 0., 0., 0.]], dtype=float32)
    """
    x, single = _as_batch(image, "resize_with_pad")
    th, tw = int(target_height), int(target_width)
    if th <= 0 or tw <= 0:
        raise InvalidArgumentError(f"resize_with_pad: target_height and target_width must be "
                                   f"> 0, got {target_height} and {target_width}")
    m = _method(method, antialias, "resize_with_pad")
    f32 = np.float32
    h, w = f32(x.shape[1]), f32(x.shape[2])
    if h == 0 or w == 0:
        raise InvalidArgumentError(f"resize_with_pad: the input image must be non-empty, got "
                                   f"shape {x.shape[1:] if single else x.shape}")
    ratio = max(w / f32(tw), h / f32(th))
    rh, rw = h / ratio, w / ratio
    new_h, new_w = int(np.floor(rh)), int(np.floor(rw))
    top = max(0, int(np.floor((f32(th) - rh) / f32(2))))
    left = max(0, int(np.floor((f32(tw) - rw) / f32(2))))
    _check_antialias(antialias, m, x, new_h, new_w, "resize_with_pad")
    resized = _resize4(x, new_h, new_w, m)
    if m != "nearest":
        resized = _float_image(resized)
    out = pad(resized, [[0, 0], [top, th - top - new_h], [left, tw - left - new_w], [0, 0]])
    return squeeze(out, 0) if single else out


# -- convert_image_dtype --------------------------------------------------------------------------

def _max(npd):
    return np.iinfo(npd).max if npd.kind in "iu" else 1.0


def _saturate(xp, a, target):
    """`a` clamped to `target`'s range (computed in float64 for floats, as the bounds need),
    then cast: TF's saturate_cast."""
    info = np.iinfo(target)
    if a.dtype.kind == "f":
        lo = float(info.min)
        hi = float(np.nextafter(np.float64(info.max), 0)) if info.max > 2 ** 53 else \
            float(info.max)
        return xp.clip(a.astype(np.float64), lo, hi).astype(target)
    src = np.iinfo(a.dtype)
    return xp.clip(a, max(info.min, src.min), min(info.max, src.max)).astype(target)


def convert_image_dtype(image, dtype, saturate=False, name=None):
    """Converts an image's dtype, scaling values to the new range (tf.image.convert_image_dtype):
    floats are in [0, 1), integers in [0, MAX]. float to float casts (differentiable); int to
    float multiplies by 1 / MAX(in); float to int multiplies by MAX(out) + 0.5 and casts
    (truncating; `saturate=True` clamps to the range first); int to int shifts the range by
    integer division or multiplication. A dtype equal to the image's returns the image.

    >>> tg.image.convert_image_dtype(tg.constant([0, 128, 255], dtype=tg.uint8),
    ...                              tg.float32).numpy()
    array([0.       , 0.5019608, 1.       ], dtype=float32)
    >>> tg.image.convert_image_dtype(tg.constant([0.0, 0.5, 1.0]), tg.uint8).numpy()
    array([  0, 127, 255], dtype=uint8)
    """
    x = tensor(image)
    src = x._data.dtype
    target = np.dtype(np_dtype(dtype))
    if target.kind not in "fiu":
        raise InvalidArgumentError(f"convert_image_dtype: dtype must be either floating point "
                                   f"or integer, got {as_dtype(target).name}")
    if src.kind not in "fiu":
        raise InvalidArgumentError(f"convert_image_dtype: image dtype must be either floating "
                                   f"point or integer, got {x.dtype.name}")
    if src == target:
        return x
    if src.kind == "f" and target.kind == "f":
        return cast(x, target)
    return apply(_convert_image, (x,), {"target": target, "saturate": bool(saturate)})


def _convert_image_forward(xp, a, target, saturate):
    """convert_image_dtype between an integer dtype and another dtype (no gradient)."""
    src = a.dtype
    if src.kind in "iu" and target.kind in "iu":
        scale_in, scale_out = _max(src), _max(target)
        if scale_in > scale_out:
            scaled = xp.floor_divide(a, src.type((scale_in + 1) // (scale_out + 1)))
            out = _saturate(xp, scaled, target) if saturate else scaled.astype(target)
        else:
            cast_ = _saturate(xp, a, target) if saturate else a.astype(target)
            out = cast_ * target.type((scale_out + 1) // (scale_in + 1))
    elif src.kind in "iu":
        out = a.astype(target) * target.type(1.0 / _max(src))
    else:
        scaled = a * src.type(_max(target) + 0.5)
        if saturate:
            out = _saturate(xp, scaled, target)
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                out = scaled.astype(target)
    return out


_convert_image = def_op("convert_image_dtype", _convert_image_forward, batch="broadcast")


# -- adjust_contrast -------------------------------------------------------------------------------

def adjust_contrast(images, contrast_factor):
    """Moves each pixel away from (factor > 1) or towards (factor < 1) its channel's mean over
    the image, `(x - mean) * contrast_factor + mean` (tf.image.adjust_contrast); images of rank
    >= 3 with the last three axes [height, width, channels]. Integer images are converted to
    float32 in [0, 1] and back (saturating); float64 images are computed in float64.
    Differentiable in the images and the factor.

    >>> img = tg.reshape(tg.constant([1.0, 2.0, 3.0, 6.0]), (2, 2, 1))
    >>> tg.image.adjust_contrast(img, 2.0)[..., 0].numpy()
    array([[-1.,  1.],
           [ 3.,  9.]], dtype=float32)
    """
    x = tensor(images)
    if x.ndim < 3:
        raise InvalidArgumentError(f"adjust_contrast: images must be at least 3-D [..., height, "
                                   f"width, channels], got shape {x.shape}")
    orig = x._data.dtype
    if orig.kind not in "fiu":
        raise InvalidArgumentError(f"adjust_contrast: images must be floating or integer, got "
                                   f"{x.dtype.name}")
    flt = x if orig.kind == "f" else convert_image_dtype(x, np.float32)
    factor = contrast_factor
    if isinstance(factor, Variable):  # a tf.Variable factor is read (and differentiated)
        factor = tensor(factor)
    if isinstance(factor, Tensor):
        if factor.ndim != 0:
            raise InvalidArgumentError(f"adjust_contrast: contrast_factor must be a scalar, got "
                                       f"shape {factor.shape}")
        factor = cast(factor, flt._data.dtype)
    elif not isinstance(factor, (int, float, np.floating, np.integer)) or \
            isinstance(factor, bool) or not math.isfinite(float(factor)):
        raise InvalidArgumentError(f"adjust_contrast: contrast_factor must be a finite number "
                                   f"or a scalar tensor, got {contrast_factor!r}")
    else:
        factor = float(factor)
    mean = reduce_mean(flt, axis=(-3, -2), keepdims=True)
    out = (flt - mean) * factor + mean
    return out if orig.kind == "f" else convert_image_dtype(out, orig, saturate=True)


# -- flips, rotations, crops and pads -------------------------------------------------------------

def _image(image, op, arg="image"):
    """`image` as a tensor of rank 3 ([height, width, channels]) or 4 (a batch), else TF's
    ValueError (InvalidArgumentError is one)."""
    x = tensor(image)
    if x.ndim not in (3, 4):
        raise InvalidArgumentError(f"{op}: '{arg}' (shape {x.shape}) must have either 3 or 4 "
                                   f"dimensions")
    return x


def _reverse(x, axis):
    n = x.shape[axis]
    return gather(x, np.arange(n - 1, -1, -1, dtype=np.int64), axis=axis)


def flip_left_right(image):
    """Reverses the width axis of an image or a batch of images (tf.image.flip_left_right).
    Differentiable (a gather).

    >>> img = tg.reshape(tg.constant([1.0, 2.0, 3.0, 4.0]), (2, 2, 1))
    >>> tg.image.flip_left_right(img)[..., 0].numpy()
    array([[2., 1.],
           [4., 3.]], dtype=float32)
    """
    return _reverse(_image(image, "flip_left_right"), -2)


def flip_up_down(image):
    """Reverses the height axis of an image or a batch of images (tf.image.flip_up_down).

    >>> img = tg.reshape(tg.constant([1.0, 2.0, 3.0, 4.0]), (2, 2, 1))
    >>> tg.image.flip_up_down(img)[..., 0].numpy()
    array([[3., 4.],
           [1., 2.]], dtype=float32)
    """
    return _reverse(_image(image, "flip_up_down"), -3)


def _random_flip(image, axis, seed, op):
    """Each image flipped along `axis` with probability 1/2 (one draw per image of a batch)."""
    x = _image(image, op)
    batch = x.shape[:1] if x.ndim == 4 else ()
    coin = uniform(batch + (1, 1, 1) if batch else (), seed=seed, dtype=np.float32,
                   device=x._dev)
    return where(less(coin, 0.5), _reverse(x, axis), x)


def random_flip_left_right(image, seed=None):
    """Flips an image left to right with probability 1/2; in a batch each image has its own
    draw (tf.image.random_flip_left_right). The draw comes from tapegpu's random streams:
    `tg.random.set_seed` and `seed` make it repeatable, and every call (also of a
    `tg.function`) draws anew.

    >>> img = tg.reshape(tg.constant([1.0, 2.0]), (1, 2, 1))
    >>> sorted(tg.image.random_flip_left_right(img, seed=1)[0, :, 0].numpy().tolist())
    [1.0, 2.0]
    """
    return _random_flip(image, -2, seed, "random_flip_left_right")


def random_flip_up_down(image, seed=None):
    """Flips an image upside down with probability 1/2, per image of a batch
    (tf.image.random_flip_up_down; draws as `random_flip_left_right`).

    >>> img = tg.reshape(tg.constant([1.0, 2.0]), (2, 1, 1))
    >>> sorted(tg.image.random_flip_up_down(img, seed=1)[:, 0, 0].numpy().tolist())
    [1.0, 2.0]
    """
    return _random_flip(image, -3, seed, "random_flip_up_down")


def _swap_hw(x):
    return permute(x, (1, 0, 2) if x.ndim == 3 else (0, 2, 1, 3))


def transpose(image, name=None):
    """Swaps the height and width axes of an image or a batch (tf.image.transpose).

    >>> img = tg.reshape(tg.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), (2, 3, 1))
    >>> tg.image.transpose(img)[..., 0].numpy()
    array([[1., 4.],
           [2., 5.],
           [3., 6.]], dtype=float32)
    """
    return _swap_hw(_image(image, "transpose"))


def rot90(image, k=1, name=None):
    """Rotates an image or a batch by `k` quarter turns counter-clockwise (tf.image.rot90;
    `k` may be negative). Differentiable.

    >>> img = tg.reshape(tg.constant([1.0, 2.0, 3.0, 4.0]), (2, 2, 1))
    >>> tg.image.rot90(img)[..., 0].numpy()
    array([[2., 4.],
           [1., 3.]], dtype=float32)
    """
    x = _image(image, "rot90")
    if isinstance(k, Tensor):
        k = k.numpy().tolist()
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise InvalidArgumentError(f"rot90: k must be an integer number of quarter turns, got "
                                   f"{k!r}")
    k = int(k) % 4
    if k == 1:
        return _swap_hw(_reverse(x, -2))
    if k == 2:
        return _reverse(_reverse(x, -2), -3)
    if k == 3:
        return _reverse(_swap_hw(x), -2)
    return x


def _offsets(op, **values):
    """The integer values of a crop's or pad's arguments (tensors read); offsets must be
    >= 0 (TF's message)."""
    out = []
    for key, v in values.items():
        if isinstance(v, Tensor):
            v = v.numpy().tolist()
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise InvalidArgumentError(f"{op}: {key} must be an integer, got {v!r}")
        if key.startswith("offset") and v < 0:
            raise InvalidArgumentError(f"{op}: {key} must be >= 0, got {v}")
        out.append(int(v))
    return out


def crop_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """The `[target_height, target_width]` window of an image (or of each image of a batch)
    whose top-left corner is at `(offset_height, offset_width)`
    (tf.image.crop_to_bounding_box). Differentiable.

    >>> img = tg.reshape(tg.range(16.0), (4, 4, 1))
    >>> tg.image.crop_to_bounding_box(img, 1, 2, 2, 2)[..., 0].numpy()
    array([[ 6.,  7.],
           [10., 11.]], dtype=float32)
    """
    op = "crop_to_bounding_box"
    x = _image(image, op)
    oh, ow, th, tw = _offsets(op, offset_height=offset_height, offset_width=offset_width,
                              target_height=target_height, target_width=target_width)
    h, w = x.shape[-3], x.shape[-2]
    for what, v in (("target_width", tw), ("target_height", th)):
        if v <= 0:
            raise InvalidArgumentError(f"{op}: {what} must be > 0, got {v}")
    if w < ow + tw:
        raise InvalidArgumentError(f"{op}: width must be >= target + offset: image width {w} < "
                                   f"offset_width {ow} + target_width {tw}")
    if h < oh + th:
        raise InvalidArgumentError(f"{op}: height must be >= target + offset: image height {h} "
                                   f"< offset_height {oh} + target_height {th}")
    return x[..., oh:oh + th, ow:ow + tw, :]


def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """Pads an image (or each image of a batch) with zeros to `[target_height, target_width]`,
    the image's top-left corner at `(offset_height, offset_width)`
    (tf.image.pad_to_bounding_box). Differentiable.

    >>> img = tg.ones((1, 2, 1))
    >>> tg.image.pad_to_bounding_box(img, 1, 1, 3, 4)[..., 0].numpy()
    array([[0., 0., 0., 0.],
           [0., 1., 1., 0.],
           [0., 0., 0., 0.]], dtype=float32)
    """
    op = "pad_to_bounding_box"
    x = _image(image, op)
    oh, ow, th, tw = _offsets(op, offset_height=offset_height, offset_width=offset_width,
                              target_height=target_height, target_width=target_width)
    h, w = x.shape[-3], x.shape[-2]
    if th - oh - h < 0:
        raise InvalidArgumentError(f"{op}: height must be <= target - offset: image height {h}, "
                                   f"target_height {th}, offset_height {oh}")
    if tw - ow - w < 0:
        raise InvalidArgumentError(f"{op}: width must be <= target - offset: image width {w}, "
                                   f"target_width {tw}, offset_width {ow}")
    pads = [[oh, th - oh - h], [ow, tw - ow - w], [0, 0]]
    return pad(x, ([[0, 0]] if x.ndim == 4 else []) + pads)


def resize_with_crop_or_pad(image, target_height, target_width):
    """Crops (centrally) or pads (with zeros, evenly) an image or a batch to
    `[target_height, target_width]` (tf.image.resize_with_crop_or_pad). Differentiable.

    >>> img = tg.reshape(tg.range(9.0), (3, 3, 1))
    >>> tg.image.resize_with_crop_or_pad(img, 1, 5)[..., 0].numpy()
    array([[0., 3., 4., 5., 0.]], dtype=float32)
    """
    op = "resize_with_crop_or_pad"
    x = _image(image, op)
    th, tw = _offsets(op, target_height=target_height, target_width=target_width)
    if th <= 0 or tw <= 0:
        raise InvalidArgumentError(f"{op}: target_height and target_width must be > 0, got "
                                   f"{th} and {tw}")
    h, w = x.shape[-3], x.shape[-2]
    crop = crop_to_bounding_box(x, max((h - th) // 2, 0), max((w - tw) // 2, 0), min(th, h),
                                min(tw, w))
    return pad_to_bounding_box(crop, max((th - h) // 2, 0), max((tw - w) // 2, 0), th, tw)


def central_crop(image, central_fraction):
    """The central `central_fraction` (in (0, 1]) of an image or a batch along height and width
    (tf.image.central_crop: the window starts at `int((size - size * fraction) / 2)` and is
    symmetric). Differentiable.

    >>> img = tg.reshape(tg.range(16.0), (4, 4, 1))
    >>> tg.image.central_crop(img, 0.5)[..., 0].numpy()
    array([[ 5.,  6.],
           [ 9., 10.]], dtype=float32)
    """
    x = _image(image, "central_crop")
    f = float(central_fraction.numpy()) if isinstance(central_fraction, Tensor) else \
        float(central_fraction)
    if not 0.0 < f <= 1.0:
        raise InvalidArgumentError(f"central_crop: central_fraction must be within (0, 1], got "
                                   f"{central_fraction!r}")
    if f == 1.0:
        return x
    h, w = x.shape[-3], x.shape[-2]
    top, left = int((h - h * f) / 2), int((w - w * f) / 2)
    return x[..., top:h - top, left:w - left, :]


def random_crop(value, size, seed=None, name=None):
    """A window of shape `size` at a uniformly random offset of `value` (any rank; `size` has
    one entry per axis), as tf.random_crop / tf.image.random_crop. The offset is a random
    node (new at every call, also of a `tg.function`) and the window a gather along each
    axis, so the crop is differentiable.

    >>> tg.image.random_crop(tg.ones((5, 6, 3)), [2, 3, 3], seed=1).shape
    (2, 3, 3)
    """
    x = tensor(value)
    if isinstance(size, Tensor):
        size = size.numpy().tolist()
    size = list(size) if isinstance(size, (list, tuple, np.ndarray)) else None
    if size is None or len(size) != x.ndim or any(
            isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in size):
        raise InvalidArgumentError(f"random_crop: size must be a list of {x.ndim} integers (one "
                                   f"per axis of value, shape {x.shape}), got {size!r}")
    if any(s < 0 or s > n for s, n in zip(size, x.shape)):
        raise InvalidArgumentError(f"random_crop: need value.shape >= size, got shape "
                                   f"{x.shape} and size {list(size)}")
    limits = np.array([n - s + 1 for n, s in zip(x.shape, size)], np.float64)
    draw = uniform((x.ndim,), seed=seed, dtype=np.float64, device=x._dev)
    offsets = cast(floor(draw * limits), np.int64)
    for axis, s in enumerate(size):
        if s != x.shape[axis]:
            x = gather(x, offsets[axis] + np.arange(s, dtype=np.int64), axis=axis)
    return x


# -- color ----------------------------------------------------------------------------------------

def _to_float(x, op):
    """An image as floats and how to return: floats as they are, integers as float32 in [0, 1]
    (convert_image_dtype), converted back saturating."""
    orig = x._data.dtype
    if orig.kind not in "fiu":
        raise InvalidArgumentError(f"{op}: images must be floating or integer, got "
                                   f"{x.dtype.name}")
    flt = x if orig.kind == "f" else convert_image_dtype(x, np.float32)

    def back(out):
        return out if orig.kind == "f" else convert_image_dtype(out, orig, saturate=True)
    return flt, back


def _scalar(value, dtype, op, what):
    """A Python number or a scalar tensor (differentiable) as `dtype`."""
    if isinstance(value, Variable):
        value = tensor(value)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise InvalidArgumentError(f"{op}: {what} must be a scalar, got shape {value.shape}")
        return cast(value, dtype)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)):
        raise InvalidArgumentError(f"{op}: {what} must be a finite number or a scalar tensor, "
                                   f"got {value!r}")
    return float(value)


def adjust_brightness(image, delta):
    """Adds `delta` to every pixel (tf.image.adjust_brightness); integer images are converted
    to float32 in [0, 1], shifted and converted back (saturating). Differentiable in the image
    and `delta`.

    >>> tg.image.adjust_brightness(tg.constant([[[0.25, 0.5]]]), 0.25).numpy()
    array([[[0.5 , 0.75]]], dtype=float32)
    """
    x = tensor(image)
    flt, back = _to_float(x, "adjust_brightness")
    return back(flt + _scalar(delta, flt._data.dtype, "adjust_brightness", "delta"))


def random_brightness(image, max_delta, seed=None):
    """`adjust_brightness` by a delta drawn uniformly from [-max_delta, max_delta)
    (tf.image.random_brightness; one delta for the whole tensor, as TF).

    >>> out = tg.image.random_brightness(tg.zeros((2, 2, 1)), 0.1, seed=3)
    >>> bool(tg.reduce_max(tg.abs(out)) <= 0.1)
    True
    """
    if max_delta < 0:
        raise InvalidArgumentError(f"random_brightness: max_delta must be non-negative, got "
                                   f"{max_delta}")
    x = tensor(image)
    dt = x._data.dtype if x._data.dtype.kind == "f" else np.float32
    delta = uniform((), -max_delta, max_delta, seed=seed, dtype=dt, device=x._dev)
    return adjust_brightness(x, delta)


def random_contrast(image, lower, upper, seed=None):
    """`adjust_contrast` by a factor drawn uniformly from [lower, upper)
    (tf.image.random_contrast; one factor for the whole tensor, as TF).

    >>> out = tg.image.random_contrast(tg.ones((2, 2, 1)), 0.5, 1.5, seed=3)
    >>> out.numpy().ravel().tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    if upper <= lower:
        raise InvalidArgumentError(f"random_contrast: upper must be > lower, got lower={lower}, "
                                   f"upper={upper}")
    if lower < 0:
        raise InvalidArgumentError(f"random_contrast: lower must be non-negative, got {lower}")
    x = tensor(image)
    dt = x._data.dtype if x._data.dtype.kind == "f" else np.float32
    return adjust_contrast(x, uniform((), lower, upper, seed=seed, dtype=dt,
                                       device=x._dev))


_GRAY = (0.2989, 0.5870, 0.1140)


def rgb_to_grayscale(images, name=None):
    """The luma `0.2989 R + 0.5870 G + 0.1140 B` of RGB images (last axis 3), keeping a last
    axis of size 1 (tf.image.rgb_to_grayscale). Integer images go through float32 in [0, 1];
    float images are computed in their dtype (TF computes float64 in float32). Differentiable.

    >>> tg.image.rgb_to_grayscale(tg.constant([[[1.0, 0.0, 0.0]]])).numpy()
    array([[[0.2989]]], dtype=float32)
    """
    x = tensor(images)
    if x.ndim < 1 or x.shape[-1] != 3:
        raise InvalidArgumentError(f"rgb_to_grayscale: the last dimension of images must be of "
                                   f"size 3 (RGB), got shape {x.shape}")
    flt, _ = _to_float(x, "rgb_to_grayscale")
    dt = flt._data.dtype
    gray = expand_dims(tensordot(flt, _on_device(flt, np.array(_GRAY, dt)), [[-1], [-1]]), -1)
    orig = x._data.dtype
    return gray if orig.kind == "f" else convert_image_dtype(gray, orig)


def grayscale_to_rgb(images, name=None):
    """Repeats the single channel of grayscale images three times (tf.image.grayscale_to_rgb).

    >>> tg.image.grayscale_to_rgb(tg.constant([[[0.5]]])).numpy()
    array([[[0.5, 0.5, 0.5]]], dtype=float32)
    """
    x = tensor(images)
    if x.ndim < 2 or x.shape[-1] != 1:
        raise InvalidArgumentError(f"grayscale_to_rgb: images must have rank >= 2 and a last "
                                   f"dimension of size 1, got shape {x.shape}")
    return tile(x, [1] * (x.ndim - 1) + [3])


def per_image_standardization(image):
    """Scales each image to mean 0 and variance 1: `(x - mean) / max(stddev, 1 / sqrt(N))`
    over the last three axes, N their number of elements (tf.image.per_image_standardization).
    Integer images are cast to float32 (no rescaling, as TF); float64 stays float64 (TF
    gives float32). Differentiable.

    >>> out = tg.image.per_image_standardization(tg.constant([[[1.0], [3.0]]]))
    >>> out[..., 0].numpy()
    array([[-1.,  1.]], dtype=float32)
    """
    x = tensor(image)
    if x.ndim < 3:
        raise InvalidArgumentError(f"per_image_standardization: image must be at least 3-D "
                                   f"[..., height, width, channels], got shape {x.shape}")
    if x._data.dtype.kind not in "fiu":
        raise InvalidArgumentError(f"per_image_standardization: image must be floating or "
                                   f"integer, got {x.dtype.name}")
    flt = x if x._data.dtype in (np.float32, np.float64) else cast(x, np.float32)
    n = int(np.prod(x.shape[-3:]))
    mean = reduce_mean(flt, axis=(-3, -2, -1), keepdims=True)
    std = reduce_std(flt, axis=(-3, -2, -1), keepdims=True)
    return (flt - mean) / maximum(std, float(1.0 / np.sqrt(max(n, 1))))


# -- image quality -------------------------------------------------------------------------------

def total_variation(images, name=None):
    """The sum of absolute differences between neighbouring pixels along height and width
    (tf.image.total_variation): a scalar for one image, one value per image for a batch.
    Differentiable (almost everywhere).

    >>> float(tg.image.total_variation(tg.constant([[[0.0], [1.0]], [[3.0], [1.0]]])))
    6.0
    """
    x = tensor(images)
    if x.ndim not in (3, 4):
        raise InvalidArgumentError(f"total_variation: 'images' must be either 3 or "
                                   f"4-dimensional, got shape {x.shape}")
    axes = None if x.ndim == 3 else (1, 2, 3)
    dh = x[..., 1:, :, :] - x[..., :-1, :, :]
    dw = x[..., :, 1:, :] - x[..., :, :-1, :]
    return reduce_sum(absolute(dh), axis=axes) + reduce_sum(absolute(dw), axis=axes)


def psnr(a, b, max_val, name=None):
    """The peak signal-to-noise ratio between images `a` and `b`, per image:
    `20 log10(max_val) - 10 log10(mean((a - b)^2))` over the last three axes (tf.image.psnr).
    Integer images are converted to float32 in [0, 1] (and `max_val` with them); float64
    stays float64. Differentiable.

    >>> float(tg.image.psnr(tg.zeros((2, 2, 1)), tg.fill((2, 2, 1), 0.1), max_val=1.0))
    20.0
    """
    x, y = tensor(a), tensor(b)
    if x.shape != y.shape or x.ndim < 3:
        raise InvalidArgumentError(f"psnr: a and b must have the same shape of rank >= 3, got "
                                   f"{x.shape} and {y.shape}")
    if x._data.dtype != y._data.dtype:
        raise InvalidArgumentError(f"psnr: a and b must have the same dtype, got "
                                   f"{x.dtype.name} and {y.dtype.name}")
    src = x._data.dtype
    fx, _ = _to_float(x, "psnr")
    fy, _ = _to_float(y, "psnr")
    peak = float(max_val) / (float(np.iinfo(src).max) if src.kind in "iu" else 1.0)
    diff = fx - fy
    mse = reduce_mean(diff * diff, axis=(-3, -2, -1))
    return 20.0 * math.log10(peak) - (10.0 / math.log(10.0)) * log(mse)


def _gaussian_window(size, sigma):
    """TF's `_fspecial_gauss`: the normalised 2-D Gaussian exp(-(x^2 + y^2) / (2 sigma^2)) on
    `size` points centred on 0 (float64 on the host)."""
    coords = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    g = -0.5 * coords ** 2 / sigma ** 2
    w = np.exp(g[:, None] + g[None, :])
    return w / w.sum()


def ssim(img1, img2, max_val, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03,
         return_index_map=False):
    """The structural similarity of two images or batches (tf.image.ssim): per channel, local
    means, variances and covariance under a `filter_size` x `filter_size` Gaussian window of
    `filter_sigma` (VALID positions only), combined as
    `(2 mu_x mu_y + C1) / (mu_x^2 + mu_y^2 + C1) * (2 s_xy + C2) / (s_x^2 + s_y^2 + C2)`,
    `C1 = (k1 max_val)^2`, `C2 = (k2 max_val)^2`, averaged over the positions and then the
    channels (`return_index_map=True`: the channel mean at each position). Integer images
    are converted to float32 in [0, 1] (and `max_val` with them); float64 stays float64.
    Differentiable.

    >>> img = tg.random.stateless_uniform((16, 16, 3), seed=[1, 2])
    >>> float(tg.image.ssim(img, img, max_val=1.0))
    1.0
    """
    x, y = tensor(img1), tensor(img2)
    if x.shape != y.shape or x.ndim < 3:
        raise InvalidArgumentError(f"ssim: img1 and img2 must have the same shape of rank >= 3 "
                                   f"[..., height, width, channels], got {x.shape} and "
                                   f"{y.shape}")
    if x._data.dtype != y._data.dtype:
        raise InvalidArgumentError(f"ssim: img1 and img2 must have the same dtype, got "
                                   f"{x.dtype.name} and {y.dtype.name}")
    size = int(filter_size)
    h, w, c = x.shape[-3:]
    if size < 1 or size > h or size > w:
        raise InvalidArgumentError(f"ssim: can't use a filter size greater than the image size "
                                   f"(or < 1): filter_size {size}, image {h}x{w}")
    src = x._data.dtype
    fx, _ = _to_float(x, "ssim")
    fy, _ = _to_float(y, "ssim")
    dt = fx._data.dtype
    peak = float(max_val) / (float(np.iinfo(src).max) if src.kind in "iu" else 1.0)
    window = np.tile(_gaussian_window(size, float(filter_sigma))[:, :, None, None], (1, 1, c, 1))
    kernel = _on_device(fx, window.astype(dt))
    batch = x.shape[:-3]

    def local_mean(z):
        out = depthwise_conv2d(reshape(z, (-1, h, w, c)), kernel, [1, 1, 1, 1], "VALID")
        return reshape(out, batch + tuple(out.shape[1:]))
    c1, c2 = (k1 * peak) ** 2, (k2 * peak) ** 2
    mean_x, mean_y = local_mean(fx), local_mean(fy)
    num0 = mean_x * mean_y * 2.0
    den0 = mean_x * mean_x + mean_y * mean_y
    luminance = (num0 + c1) / (den0 + c1)
    cs = (local_mean(fx * fy) * 2.0 - num0 + c2) / (local_mean(fx * fx + fy * fy) - den0 + c2)
    index_map = luminance * cs
    if return_index_map:
        return reduce_mean(index_map, axis=-1)
    return reduce_mean(reduce_mean(index_map, axis=(-3, -2)), axis=-1)



# -- HSV -----------------------------------------------------------------------------------------

def _rgb_channels(images, op):
    x = tensor(images)
    if x.ndim < 1 or x.shape[-1] != 3:
        raise InvalidArgumentError(f"{op}: the last dimension of images must be of size 3, got "
                                   f"shape {x.shape}")
    if x._data.dtype.kind != "f":
        raise InvalidArgumentError(f"{op}: images must be floating (use convert_image_dtype "
                                   f"first), got {x.dtype.name}")
    return x, x[..., 0], x[..., 1], x[..., 2]


def rgb_to_hsv(images, name=None):
    """Converts RGB images (floats in [0, 1], last axis 3) to HSV (tf.image.rgb_to_hsv): value
    = max(r, g, b), saturation = (max - min) / max (0 for black), hue in [0, 1) from the
    channel holding the maximum (0 for greys). Differentiable away from the channel ties.

    >>> tg.image.rgb_to_hsv(tg.constant([[[1.0, 0.5, 0.0]]])).numpy()
    array([[[0.08333334, 1.        , 1.        ]]], dtype=float32)
    """
    x, r, g, b = _rgb_channels(images, "rgb_to_hsv")
    value = reduce_max(x, axis=-1)
    spread = value - reduce_min(x, axis=-1)
    positive = greater(spread, 0.0)
    safe = where(positive, spread, 1.0)  # no 0/0 in the branch `where` drops (nor its gradient)
    saturation = where(greater(value, 0.0), spread / where(greater(value, 0.0), value, 1.0), 0.0)
    hue = where(equal(r, value), (g - b) / (6.0 * safe),
                where(equal(g, value), (b - r) / (6.0 * safe) + 1.0 / 3.0,
                      (r - g) / (6.0 * safe) + 2.0 / 3.0))
    hue = where(positive, hue, 0.0)
    hue = where(less(hue, 0.0), hue + 1.0, hue)
    return stack([hue, saturation, value], axis=-1)


def hsv_to_rgb(images, name=None):
    """Converts HSV images (last axis 3, hue in [0, 1)) to RGB (tf.image.hsv_to_rgb, TF's
    piecewise-linear form: channel c is `v * (1 - s + s * clip(...))` of the hue).
    Differentiable.

    >>> tg.image.hsv_to_rgb(tg.constant([[[0.0, 1.0, 0.5]]])).numpy()
    array([[[0.5, 0. , 0. ]]], dtype=float32)
    """
    _, h, s, v = _rgb_channels(images, "hsv_to_rgb")
    dh = h * 6.0
    red = clip_by_value(absolute(dh - 3.0) - 1.0, 0.0, 1.0)
    green = clip_by_value(2.0 - absolute(dh - 2.0), 0.0, 1.0)
    blue = clip_by_value(2.0 - absolute(dh - 4.0), 0.0, 1.0)
    return stack([v * (1.0 - s + s * c) for c in (red, green, blue)], axis=-1)


def adjust_saturation(image, saturation_factor, name=None):
    """Scales the saturation of RGB images by `saturation_factor` in HSV space, clipped to
    [0, 1] (tf.image.adjust_saturation). Integer images go through float32 in [0, 1] and
    back (saturating); float64 stays float64. Differentiable in the image and the factor.

    >>> tg.image.adjust_saturation(tg.constant([[[1.0, 0.5, 0.0]]]), 0.0).numpy()
    array([[[1., 1., 1.]]], dtype=float32)
    """
    x = tensor(image)
    flt, back = _to_float(x, "adjust_saturation")
    factor = _scalar(saturation_factor, flt._data.dtype, "adjust_saturation",
                     "saturation_factor")
    hsv = rgb_to_hsv(flt)
    s = clip_by_value(hsv[..., 1] * factor, 0.0, 1.0)
    return back(hsv_to_rgb(stack([hsv[..., 0], s, hsv[..., 2]], axis=-1)))


def adjust_hue(image, delta, name=None):
    """Rotates the hue of RGB images by `delta` (in [-1, 1], a fraction of the colour wheel)
    in HSV space (tf.image.adjust_hue). Integer images go through float32 in [0, 1] and back;
    float64 stays float64. Differentiable in the image and `delta`.

    >>> tg.image.adjust_hue(tg.constant([[[1.0, 0.0, 0.0]]]), 1 / 3).numpy().round(6)
    array([[[0., 1., 0.]]], dtype=float32)
    """
    x = tensor(image)
    flt, back = _to_float(x, "adjust_hue")
    d = _scalar(delta, flt._data.dtype, "adjust_hue", "delta")
    if not isinstance(d, Tensor) and not -1.0 <= d <= 1.0:
        raise InvalidArgumentError(f"adjust_hue: delta must be in the interval [-1, 1], got "
                                   f"{delta}")
    hsv = rgb_to_hsv(flt)
    h = hsv[..., 0] + d
    h = h - floor(h)  # mod 1, with the gradient of h (floor's is zero)
    return back(hsv_to_rgb(stack([h, hsv[..., 1], hsv[..., 2]], axis=-1)))


# -- stateless and further random colour ops, Sobel edges, crop_and_resize -----------------------

def _seed_pair(seed, op):
    s = np.asarray(seed.numpy() if isinstance(seed, Tensor) else seed)
    if s.shape != (2,) or s.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{op}: seed must be a shape [2] integer tensor, got {seed!r}")
    return s


def stateless_random_brightness(image, max_delta, seed):
    """`adjust_brightness` by a delta drawn uniformly from [-max_delta, max_delta) that
    depends only on `seed` (shape [2]), as tf.image.stateless_random_brightness.

    >>> a = tg.image.stateless_random_brightness(tg.zeros((2, 2, 1)), 0.2, seed=(1, 2))
    >>> b = tg.image.stateless_random_brightness(tg.zeros((2, 2, 1)), 0.2, seed=(1, 2))
    >>> bool(tg.reduce_all(a == b)), bool(tg.reduce_max(tg.abs(a)) <= 0.2)
    (True, True)
    """
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    x = tensor(image)
    dt = x._data.dtype if x._data.dtype.kind == "f" else np.float32
    s = _seed_pair(seed, "stateless_random_brightness")
    delta = stateless_uniform((), s, -max_delta, max_delta, dtype=dt)
    return adjust_brightness(x, delta)


def _factor_range(image, lower, upper):
    """(the image as a tensor, the dtype of its factor) after TF's checks of a factor's range
    [lower, upper)."""
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    x = tensor(image)
    return x, x._data.dtype if x._data.dtype.kind == "f" else np.float32


def stateless_random_contrast(image, lower, upper, seed):
    """`adjust_contrast` by a factor drawn uniformly from [lower, upper) that depends only on
    `seed`, as tf.image.stateless_random_contrast.

    >>> tg.image.stateless_random_contrast(tg.ones((2, 2, 1)), 0.5, 1.5, seed=(3, 4)).shape
    (2, 2, 1)
    """
    x, dt = _factor_range(image, lower, upper)
    s = _seed_pair(seed, "stateless_random_contrast")
    return adjust_contrast(x, stateless_uniform((), s, lower, upper, dtype=dt))


def stateless_random_crop(value, size, seed, name=None):
    """A window of shape `size` at an offset that depends only on `seed` (shape [2]), as
    tf.image.stateless_random_crop (differentiable, as `random_crop`).

    >>> x = tg.reshape(tg.range(30), (5, 6))
    >>> a = tg.image.stateless_random_crop(x, [2, 3], seed=(7, 8))
    >>> a.shape, bool(tg.reduce_all(a == tg.image.stateless_random_crop(x, [2, 3], (7, 8))))
    ((2, 3), True)
    """
    x = tensor(value)
    if isinstance(size, Tensor):
        size = size.numpy().tolist()
    size = list(size) if isinstance(size, (list, tuple, np.ndarray)) else None
    if size is None or len(size) != x.ndim:
        raise InvalidArgumentError(f"stateless_random_crop: size must be a list of {x.ndim} "
                                   f"integers (one per axis of value, shape {x.shape}), got "
                                   f"{size!r}")
    if any(int(s) < 0 or int(s) > n for s, n in zip(size, x.shape)):
        raise InvalidArgumentError(f"stateless_random_crop: Need value.shape >= size, got "
                                   f"shape {x.shape} and size {size}")
    s = _seed_pair(seed, "stateless_random_crop")
    limits = np.array([n - int(k) + 1 for n, k in zip(x.shape, size)], np.float64)
    draw = stateless_uniform((x.ndim,), s, dtype=np.float64).numpy()
    offsets = np.floor(draw * limits).astype(np.int64)
    for axis, k in enumerate(size):
        if int(k) != x.shape[axis]:
            x = gather(x, offsets[axis] + np.arange(int(k), dtype=np.int64), axis=axis)
    return x


def random_hue(image, max_delta, seed=None):
    """`adjust_hue` by a delta drawn uniformly from [-max_delta, max_delta), max_delta in
    [0, 0.5], as tf.image.random_hue.

    >>> tg.image.random_hue(tg.constant([[[0.2, 0.4, 0.6]]]), 0.1, seed=1).shape
    (1, 1, 3)
    """
    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    x = tensor(image)
    dt = x._data.dtype if x._data.dtype.kind == "f" else np.float32
    return adjust_hue(x, uniform((), -max_delta, max_delta, seed=seed, dtype=dt,
                                 device=x._dev))


def random_saturation(image, lower, upper, seed=None):
    """`adjust_saturation` by a factor drawn uniformly from [lower, upper), as
    tf.image.random_saturation.

    >>> tg.image.random_saturation(tg.constant([[[0.2, 0.4, 0.6]]]), 0.5, 1.5, seed=1).shape
    (1, 1, 3)
    """
    x, dt = _factor_range(image, lower, upper)
    return adjust_saturation(x, uniform((), lower, upper, seed=seed, dtype=dt,
                                        device=x._dev))


def _reflect1(x, axis):
    """`x` padded by one element at both ends of `axis` with the reflection (TF's REFLECT:
    the edge element is not repeated)."""
    n = x.shape[axis]
    idx = np.concatenate([[1 if n > 1 else 0], np.arange(n), [n - 2 if n > 1 else 0]])
    return gather(x, idx.astype(np.int64), axis=axis)


_SOBEL = (((-1, -2, -1), (0, 0, 0), (1, 2, 1)),  # d/dy
          ((-1, 0, 1), (-2, 0, 2), (-1, 0, 1)))  # d/dx


def sobel_edges(image):
    """The Sobel gradients of `image` [batch, h, w, d]: [batch, h, w, d, 2] with dy then dx,
    the borders reflected, as tf.image.sobel_edges (differentiable).

    >>> img = tg.reshape(tg.range(16, dtype=tg.float32), (1, 4, 4, 1))
    >>> e = tg.image.sobel_edges(img)
    >>> e.shape, float(e[0, 1, 1, 0, 0]), float(e[0, 1, 1, 0, 1])
    ((1, 4, 4, 1, 2), 32.0, 8.0)
    """
    x = tensor(image)
    if x.ndim != 4:
        raise InvalidArgumentError(f"sobel_edges: image must be [batch, h, w, d], got shape "
                                   f"{x.shape}")
    if x._data.dtype.kind != "f":
        x = cast(x, np.float32)
    h, w = x.shape[1], x.shape[2]
    p = _reflect1(_reflect1(x, 1), 2)
    outs = []
    for kernel in _SOBEL:
        acc = None
        for i in range(3):
            for j in range(3):
                k = kernel[i][j]
                if k:
                    term = p[:, i:i + h, j:j + w, :] * float(k)
                    acc = term if acc is None else acc + term
        outs.append(acc)
    return stack(outs, axis=-1)


def _axis_samples(lo, hi, n, size):
    """Sample positions of one crop axis in pixels: TF's `lo (size-1) + i (hi-lo)(size-1)/(n-1)`
    (the centre when n == 1), as [boxes, n] tensors of the boxes' dtype."""
    if n > 1:
        steps = np.arange(n, dtype=np.float32) / (n - 1)
        return expand_dims(lo, -1) * (size - 1) + expand_dims(hi - lo, -1) * (size - 1) * steps
    return expand_dims((lo + hi) * 0.5 * (size - 1), -1)


def crop_and_resize(image, boxes, box_indices, crop_size, method="bilinear",
                    extrapolation_value=0.0, name=None):
    """Crops of `image` [batch, h, w, d] at `boxes` ([n, 4] normalized [y1, x1, y2, x2], of
    image `box_indices[i]`), each resized to `crop_size` [ch, cw] by bilinear or nearest
    sampling, as tf.image.crop_and_resize: float32 [n, ch, cw, d]; samples outside the image
    take `extrapolation_value`. Differentiable in the image and the boxes (bilinear).

    >>> img = tg.reshape(tg.range(16, dtype=tg.float32), (1, 4, 4, 1))
    >>> tg.image.crop_and_resize(img, [[0.0, 0.0, 1.0, 1.0]], [0], [2, 2])[0, ..., 0].numpy()
    array([[ 0.,  3.],
           [12., 15.]], dtype=float32)
    """
    x = tensor(image)
    if x.ndim != 4:
        raise InvalidArgumentError(f"crop_and_resize: image must be 4-D [batch, h, w, d], got "
                                   f"shape {x.shape}")
    if method not in ("bilinear", "nearest"):
        raise ValueError(f"crop_and_resize: method must be 'bilinear' or 'nearest', got "
                         f"{method!r}")
    x = cast(x, np.float32) if x._data.dtype != np.float32 else x
    b = cast(tensor(boxes), np.float32)
    ind = np.asarray(box_indices.numpy() if isinstance(box_indices, Tensor) else box_indices,
                     dtype=np.int64).reshape(-1)
    if b.ndim != 2 or b.shape[1] != 4 or b.shape[0] != ind.shape[0]:
        raise InvalidArgumentError(f"crop_and_resize: boxes must be [num_boxes, 4] and "
                                   f"box_indices [num_boxes], got {b.shape} and {ind.shape}")
    if ind.size and (ind.min() < 0 or ind.max() >= x.shape[0]):
        raise InvalidArgumentError(f"crop_and_resize: box_indices has values outside [0, "
                                   f"{x.shape[0]})")
    size = crop_size.numpy().tolist() if isinstance(crop_size, Tensor) else list(crop_size)
    ch, cw = int(size[0]), int(size[1])
    if ch <= 0 or cw <= 0:
        raise InvalidArgumentError(f"crop_and_resize: crop dimensions must be positive, got "
                                   f"{size}")
    h, w, d = x.shape[1], x.shape[2], x.shape[3]
    ys = _axis_samples(b[:, 0], b[:, 2], ch, h)  # [n, ch]
    xs = _axis_samples(b[:, 1], b[:, 3], cw, w)  # [n, cw]
    ys_np, xs_np = ys.numpy(), xs.numpy()
    inside = ((ys_np >= 0) & (ys_np <= h - 1))[:, :, None] & \
        ((xs_np >= 0) & (xs_np <= w - 1))[:, None, :]
    flat = reshape(x, (-1, d))

    def pick(yi, xi):  # [n, ch, cw, d] pixels at integer rows yi [n, ch] and columns xi [n, cw]
        yi = np.clip(yi, 0, h - 1)
        xi = np.clip(xi, 0, w - 1)
        idx = (ind[:, None, None] * h + yi[:, :, None]) * w + xi[:, None, :]
        return gather(flat, idx.astype(np.int64))

    if method == "nearest":
        # C's roundf: halves away from zero (the samples used are >= 0)
        out = pick(np.floor(ys_np + 0.5).astype(np.int64), np.floor(xs_np + 0.5).astype(np.int64))
    else:
        y0 = np.floor(ys_np).astype(np.int64)
        x0 = np.floor(xs_np).astype(np.int64)
        fy = expand_dims(expand_dims(ys - y0.astype(np.float32), -1), -1)  # [n, ch, 1, 1]
        fx = expand_dims(expand_dims(xs - x0.astype(np.float32), 1), -1)  # [n, 1, cw, 1]
        top = pick(y0, x0) + (pick(y0, x0 + 1) - pick(y0, x0)) * fx
        bottom = pick(y0 + 1, x0) + (pick(y0 + 1, x0 + 1) - pick(y0 + 1, x0)) * fx
        out = top + (bottom - top) * fy
    return where(inside[..., None], out, np.float32(extrapolation_value))


__all__ = public(globals(), ("image",)) + ["ResizeMethod"]
