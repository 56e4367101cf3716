"""TF1's image resizing (`tf.compat.v1.image.resize_images`, `resize_bilinear`,
`resize_nearest_neighbor`, `resize_bicubic`, `resize_area`): the legacy pixel grid.

TF1's kernels map output pixel `o` to input coordinate `o * scale` (no half-pixel centres),
`scale = in / out`, or `(in - 1) / (out - 1)` with `align_corners=True`, in float32:

- bilinear: `lower = floor(c)`, `upper = min(ceil(c), in - 1)`, weight `c - floor(c)`;
- nearest: input `min(floor(c), in - 1)` (`round(c)`, halves away from zero, with
  `align_corners`);
- bicubic: Keys' cubic with a = -0.75, its weights read from TF's 1024-entry table at
  `round((c - floor(c)) * 1024)`, the four taps clamped into the image;
- area: each output pixel averages the input box `[o * scale, (o + 1) * scale)`, partial
  pixels weighted by their overlap.

Each is one interpolation matrix per axis applied with tapegpu ops, so the results are
differentiable in the images. Bilinear, bicubic and area return float32, nearest the images'
dtype (`resize_images` returns the images unchanged when the size is already theirs, as TF1).

>>> img = tg.reshape(tg.constant([0.0, 1.0, 2.0, 3.0]), (2, 2, 1))
>>> tg.compat.v1.image.resize_bilinear(img[None], [4, 4])[0, ..., 0].numpy()
array([[0. , 0.5, 1. , 1. ],
       [1. , 1.5, 2. , 2. ],
       [2. , 2.5, 3. , 3. ],
       [2. , 2.5, 3. , 3. ]], dtype=float32)
"""
import numpy as np

from ..core.tensor import convert_to_tensor
from ..ops import cast, einsum, gather, squeeze
from ..ops.image import _as_batch, _float_image, _on_device
from ..ops.registry import InvalidArgumentError

_TABLE = 1024


def _scale(n_in, n_out, align_corners):
    if align_corners and n_out > 1:
        return np.float32(n_in - 1) / np.float32(n_out - 1)
    return np.float32(n_in) / np.float32(n_out)


def _coords(n_in, n_out, align_corners):
    return np.arange(n_out, dtype=np.float32) * _scale(n_in, n_out, align_corners)


def _bilinear(n_in, n_out, align_corners):
    c = _coords(n_in, n_out, align_corners)
    lower = np.maximum(np.floor(c), 0).astype(np.int64)
    upper = np.minimum(np.ceil(c).astype(np.int64), n_in - 1)
    lerp = c - np.floor(c)
    m = np.zeros((n_out, n_in), np.float32)
    rows = np.arange(n_out)
    np.add.at(m, (rows, lower), 1 - lerp)
    np.add.at(m, (rows, upper), lerp)
    return m


def _keys_table(a=-0.75):
    """TF's table of Keys' cubic weights: [i * 2] at distance i / 1024, [i * 2 + 1] at
    distance 1 + i / 1024."""
    table = np.zeros(2 * (_TABLE + 1), np.float32)
    for i in range(_TABLE + 1):
        x = np.float32(i / _TABLE)
        table[2 * i] = ((a + 2) * x - (a + 3)) * x * x + 1
        x = x + np.float32(1.0)
        table[2 * i + 1] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return table


def _bicubic(n_in, n_out, align_corners):
    table = _keys_table()
    m = np.zeros((n_out, n_in), np.float32)
    for o, c in enumerate(_coords(n_in, n_out, align_corners)):
        base = int(np.floor(c))
        offset = int(np.rint((c - np.floor(c)) * _TABLE))
        weights = (table[offset * 2 + 1], table[offset * 2], table[(_TABLE - offset) * 2],
                   table[(_TABLE - offset) * 2 + 1])
        for k, w in enumerate(weights):
            m[o, min(max(base - 1 + k, 0), n_in - 1)] += w
    return m


def _area(n_in, n_out, align_corners):
    scale = float(_scale(n_in, n_out, align_corners))
    m = np.zeros((n_out, n_in), np.float64)
    for o in range(n_out):
        lo, hi = o * scale, (o + 1) * scale
        for v in range(int(np.floor(lo)), int(np.ceil(hi))):
            w = min(v + 1, hi) - max(v, lo)
            m[o, min(v, n_in - 1)] += w / scale
    return m.astype(np.float32)


_MATRICES = {"bilinear": _bilinear, "bicubic": _bicubic, "area": _area}


def _resize(images, size, method, align_corners, who):
    x, single = _as_batch(images, who)
    try:
        height, width = (int(v) for v in np.asarray(
            size.numpy() if hasattr(size, "numpy") else size).reshape(-1))
    except (TypeError, ValueError):
        raise ValueError(f"{who}: size must be [new_height, new_width], got {size!r}") from None
    if height <= 0 or width <= 0:
        raise InvalidArgumentError(f"{who}: output dimensions must be positive, got "
                                   f"[{height}, {width}]")
    h, w = x.shape[1], x.shape[2]
    if h == 0 or w == 0:
        raise InvalidArgumentError(f"{who}: input image must be of non-zero size, got shape "
                                   f"{tuple(x.shape)}")
    if method == "nearest":
        def index(n_in, n_out):
            c = _coords(n_in, n_out, align_corners)
            c = np.floor(c + np.float32(0.5)) if align_corners else np.floor(c)  # roundf
            return np.minimum(c.astype(np.int64), n_in - 1)
        out = gather(gather(x, index(h, height), axis=1), index(w, width), axis=2)
    else:
        x = cast(_float_image(x), "float32")
        mh = _on_device(x, _MATRICES[method](h, height, align_corners))
        mw = _on_device(x, _MATRICES[method](w, width, align_corners))
        out = einsum("pw,bowc->bopc", mw, einsum("oh,bhwc->bowc", mh, x))
    return squeeze(out, 0) if single else out


def resize_bilinear(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """TF1's bilinear resize on the legacy grid (see the module docstring); float32.
    `half_pixel_centers=True` is TF2's `tg.image.resize(method='bilinear')`."""
    if half_pixel_centers:
        return _tf2(images, size, "bilinear", align_corners, "resize_bilinear")
    return _resize(images, size, "bilinear", align_corners, "resize_bilinear")


def resize_nearest_neighbor(images, size, align_corners=False, name=None,
                            half_pixel_centers=False):
    """TF1's nearest-neighbour resize on the legacy grid; the images' dtype."""
    if half_pixel_centers:
        return _tf2(images, size, "nearest", align_corners, "resize_nearest_neighbor")
    return _resize(images, size, "nearest", align_corners, "resize_nearest_neighbor")


def resize_bicubic(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """TF1's bicubic resize on the legacy grid (Keys' cubic, a = -0.75); float32.

    >>> img = tg.reshape(tg.range(16.0), (1, 4, 4, 1))
    >>> tg.compat.v1.image.resize_bicubic(img, [2, 2])[0, ..., 0].numpy()
    array([[ 0.,  2.],
           [ 8., 10.]], dtype=float32)
    """
    if half_pixel_centers:
        return _tf2(images, size, "bicubic", align_corners, "resize_bicubic")
    return _resize(images, size, "bicubic", align_corners, "resize_bicubic")


def resize_area(images, size, align_corners=False, name=None):
    """TF1's area resize: each output pixel the overlap-weighted mean of its input box;
    float32.

    >>> img = tg.reshape(tg.range(16.0), (1, 4, 4, 1))
    >>> tg.compat.v1.image.resize_area(img, [2, 2])[0, ..., 0].numpy()
    array([[ 2.5,  4.5],
           [10.5, 12.5]], dtype=float32)
    """
    return _resize(images, size, "area", align_corners, "resize_area")


def _tf2(images, size, method, align_corners, who):
    from ..ops.image import resize
    if align_corners:
        raise ValueError(f"{who}: align_corners and half_pixel_centers cannot both be True")
    return resize(images, size, method=method)


_V1_METHODS = {0: "bilinear", 1: "nearest", 2: "bicubic", 3: "area", "bilinear": "bilinear",
               "nearest": "nearest", "bicubic": "bicubic", "area": "area"}


def resize_images(images, size, method=0, align_corners=False, preserve_aspect_ratio=False,
                  name=None):
    """TF1's `resize_images` (`tf.compat.v1.image.resize_images`): `method` 0 bilinear
    (default), 1 nearest neighbour, 2 bicubic, 3 area (`ResizeMethodV1`; the names work too),
    on the legacy grid; `preserve_aspect_ratio` fits the image into `size`. Images whose
    size is already `size` come back unchanged.

    >>> img = tg.zeros((3, 4, 1), tg.uint8)
    >>> tg.compat.v1.image.resize_images(img, [6, 8]).dtype
    tg.float32
    """
    who = "resize_images"
    m = _V1_METHODS.get(method)
    if m is None:
        raise ValueError(f"{who}: method must be 0 (BILINEAR), 1 (NEAREST_NEIGHBOR), 2 "
                         f"(BICUBIC) or 3 (AREA), got {method!r}")
    x = convert_to_tensor(images)
    if x.ndim not in (3, 4):
        raise ValueError(f"{who}: 'images' must have either 3 or 4 dimensions, got shape "
                         f"{tuple(x.shape)}")
    h, w = x.shape[-3], x.shape[-2]
    height, width = (int(v) for v in np.asarray(
        size.numpy() if hasattr(size, "numpy") else size).reshape(-1))
    if preserve_aspect_ratio:
        factor = min(np.float32(height) / np.float32(h), np.float32(width) / np.float32(w))
        # tf.round: halves to even, as Python's round
        height, width = int(round(float(factor * h))), int(round(float(factor * w)))
    if (height, width) == (h, w):
        return x
    return _resize(x, [height, width], m, align_corners, who)
