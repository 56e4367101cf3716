"""`tg.image`: resizing, dtype conversion and contrast, with TensorFlow 2's semantics.

Images are `[height, width, channels]` or batches `[batch, height, width, channels]`.

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
from ._base import InvalidArgumentError, public, tensor
from .linalg import einsum
from .reduce import reduce_mean
from .shape import expand_dims, gather, pad, squeeze
from .unary import cast
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
    xp, a = x._dev.xp, x._data
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
    return Tensor(out, x._dev)


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


__all__ = public(globals(), ("image",)) + ["ResizeMethod"]
