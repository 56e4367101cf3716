"""tg.image against TensorFlow's documented outputs and against direct-loop implementations of
TF's definitions (TF2's half-pixel centers, positions in float32 as TF's kernels compute them):
resize (bilinear, nearest, bicubic), preserve_aspect_ratio, resize_with_pad,
convert_image_dtype's scaling and saturation, adjust_contrast; gradients as the transposed
linear maps; dtypes, empty batches and errors."""
import math

import numpy as np
import pytest

import tapegpu as tg

F32 = np.float32


def _center(i, n_in, n_out):
    """TF's half-pixel source coordinate of output index i, in float32."""
    return (F32(i) + F32(0.5)) * (F32(n_in) / F32(n_out)) - F32(0.5)


def loop_bilinear(img, height, width):
    """resize_bilinear with half_pixel_centers, pixel by pixel ([h, w, c] float)."""
    h, w, c = img.shape
    out = np.zeros((height, width, c))
    for i in range(height):
        y = _center(i, h, height)
        y0 = math.floor(y)
        top, bottom, ly = max(y0, 0), min(math.ceil(y), h - 1), float(y - F32(y0))
        for j in range(width):
            x = _center(j, w, width)
            x0 = math.floor(x)
            left, right, lx = max(x0, 0), min(math.ceil(x), w - 1), float(x - F32(x0))
            for k in range(c):
                t = img[top, left, k] + (img[top, right, k] - img[top, left, k]) * lx
                b = img[bottom, left, k] + (img[bottom, right, k] - img[bottom, left, k]) * lx
                out[i, j, k] = t + (b - t) * ly
    return out


def loop_nearest(img, height, width):
    """resize_nearest_neighbor with half_pixel_centers: floor((i + 0.5) * scale), clamped."""
    h, w, c = img.shape
    out = np.zeros((height, width, c), img.dtype)
    for i in range(height):
        y = min(max(math.floor((F32(i) + F32(0.5)) * (F32(h) / F32(height))), 0), h - 1)
        for j in range(width):
            x = min(max(math.floor((F32(j) + F32(0.5)) * (F32(w) / F32(width))), 0), w - 1)
            out[i, j] = img[y, x]
    return out


def keys(t, a=-0.5):
    t = abs(t)
    if t <= 1:
        return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
    if t < 2:
        return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a
    return 0.0


def _cubic_taps(i, n_in, n_out):
    """Four taps around floor(pos) with Keys' weights at the fraction rounded to 1/1024 (TF's
    weight table), taps outside [0, n_in) dropped and the rest renormalised."""
    p = _center(i, n_in, n_out)
    base = math.floor(p)
    d = round(float(p - F32(base)) * 1024) / 1024
    taps = [(base + k, keys(d - k)) for k in (-1, 0, 1, 2)]
    taps = [(t, wt) for t, wt in taps if 0 <= t < n_in]
    total = sum(wt for _, wt in taps)
    return [(t, wt / total) for t, wt in taps]


def loop_bicubic(img, height, width):
    h, w, c = img.shape
    out = np.zeros((height, width, c))
    for i in range(height):
        for j in range(width):
            for ty, wy in _cubic_taps(i, h, height):
                for tx, wx in _cubic_taps(j, w, width):
                    out[i, j] += wy * wx * img[ty, tx]
    return out


LOOPS = {"bilinear": loop_bilinear, "bicubic": loop_bicubic}


def test_tf_documented_resize_example():
    image = tg.constant([[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0],
                         [0, 0, 0, 0, 1]])
    image = image[tg.newaxis, ..., tg.newaxis]
    assert image.shape == (1, 5, 5, 1)
    out = tg.image.resize(image, [3, 5])
    assert out.dtype == tg.float32
    np.testing.assert_allclose(out[0, ..., 0].numpy(), [
        [0.6666667, 0.3333333, 0.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.3333335, 0.6666665]], rtol=0, atol=1e-6)
    assert tg.image.resize(image[0], [3, 5]).shape == (3, 5, 1)
    a = tg.image.resize(image, [5, 10])
    b = tg.image.resize(image, [5, 10], antialias=True)  # no effect when upsampling
    assert float(tg.reduce_max(tg.abs(a - b))) == 0.0
    assert tg.image.resize(image, [10, 20], preserve_aspect_ratio=True).shape == (1, 10, 10, 1)
    assert tg.image.resize(image, [20, 10], preserve_aspect_ratio=True).shape == (1, 10, 10, 1)


SIZES = [((4, 5), (7, 3)), ((3, 3), (3, 3)), ((6, 2), (2, 9)), ((5, 7), (1, 1)),
         ((1, 4), (3, 4)), ((8, 8), (3, 5))]


@pytest.mark.parametrize("method", ["bilinear", "bicubic"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("src,dst", SIZES)
def test_interpolating_resize_matches_tf_definition(method, dtype, src, dst):
    rng = np.random.default_rng(0)
    img = rng.uniform(-1, 1, src + (2,)).astype(dtype)
    got = tg.image.resize(tg.constant(img), dst, method=method)
    assert got.dtype == dtype and got.shape == dst + (2,)
    tol = 2e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got.numpy(), LOOPS[method](img, *dst), rtol=tol, atol=tol)


@pytest.mark.parametrize("src,dst", SIZES)
def test_nearest_resize_matches_tf_definition_and_keeps_dtype(src, dst):
    img = np.arange(np.prod(src) * 3, dtype=np.uint8).reshape(src + (3,))
    got = tg.image.resize(tg.constant(img), dst, method=tg.image.ResizeMethod.NEAREST_NEIGHBOR)
    assert got.dtype == tg.uint8
    np.testing.assert_array_equal(got.numpy(), loop_nearest(img, *dst))


def test_integer_images_resize_to_float32():
    img = np.arange(24, dtype=np.uint8).reshape(1, 4, 6, 1)
    got = tg.image.resize(tg.constant(img), [3, 3])
    assert got.dtype == tg.float32
    np.testing.assert_allclose(got.numpy()[0], loop_bilinear(img[0].astype(np.float64), 3, 3),
                               rtol=1e-6)


def _jacobian(fn, shape):
    """The matrix of a linear map given by a loop reference, column by column."""
    cols = []
    for k in range(int(np.prod(shape))):
        e = np.zeros(int(np.prod(shape)))
        e[k] = 1.0
        cols.append(np.asarray(fn(e.reshape(shape)), np.float64).ravel())
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("method", ["bilinear", "bicubic", "nearest"])
def test_resize_gradient_is_the_transposed_map(method):
    rng = np.random.default_rng(1)
    shape, size = (3, 5, 2), (4, 3)
    loop = LOOPS.get(method, loop_nearest)
    x = tg.constant(rng.standard_normal(shape))
    w = rng.standard_normal(size + (2,))
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.reduce_sum(tg.image.resize(x, size, method=method) * w)
    want = (_jacobian(lambda e: loop(e, *size), shape).T @ w.ravel()).reshape(shape)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), want, rtol=1e-12, atol=1e-12)


def test_resize_empty_batch_and_preserve_aspect_ratio_rounding():
    assert tg.image.resize(tg.zeros((0, 3, 4, 1)), [5, 2]).shape == (0, 5, 2, 1)
    # scale = min(7 / 4, 9 / 6) = 1.5: round(4 * 1.5) = 6, round(6 * 1.5) = 9
    assert tg.image.resize(tg.zeros((4, 6, 1)), [7, 9], preserve_aspect_ratio=True).shape == \
        (6, 9, 1)


def test_resize_errors():
    with pytest.raises(tg.errors.InvalidArgumentError, match="3 or 4 dimensions"):
        tg.image.resize(tg.zeros((4, 4)), [2, 2])
    with pytest.raises(tg.errors.InvalidArgumentError, match="size must be 2 integers"):
        tg.image.resize(tg.zeros((4, 4, 1)), [2])
    with pytest.raises(tg.errors.InvalidArgumentError, match="must be positive"):
        tg.image.resize(tg.zeros((4, 4, 1)), [0, 2])
    with pytest.raises(ValueError, match="resize method is not implemented: 'linear'"):
        tg.image.resize(tg.zeros((4, 4, 1)), [2, 2], method="linear")
    with pytest.raises(tg.errors.UnimplementedError, match="'area' is not implemented"):
        tg.image.resize(tg.zeros((4, 4, 1)), [2, 2], method=tg.image.ResizeMethod.AREA)
    with pytest.raises(tg.errors.UnimplementedError, match="antialias=True"):
        tg.image.resize(tg.zeros((4, 4, 1)), [2, 2], antialias=True)


def loop_resize_with_pad(img, th, tw):
    """_resize_image_with_pad_common: fit by the larger ratio (float32), floor the sizes,
    resize, then place at floor of half the (float) margins in zeros."""
    h, w = F32(img.shape[0]), F32(img.shape[1])
    ratio = max(w / F32(tw), h / F32(th))
    rh, rw = h / ratio, w / ratio
    nh, nw = math.floor(rh), math.floor(rw)
    top, left = max(0, math.floor((F32(th) - rh) / F32(2))), max(0, math.floor((F32(tw) - rw) /
                                                                              F32(2)))
    resized = loop_bilinear(img.astype(np.float64), nh, nw)
    out = np.zeros((th, tw, img.shape[2]))
    for i in range(nh):
        for j in range(nw):
            out[top + i, left + j] = resized[i, j]
    return out


@pytest.mark.parametrize("src,dst", [((2, 4), (4, 4)), ((5, 3), (4, 6)), ((3, 7), (5, 5)),
                                     ((4, 4), (2, 8)), ((6, 6), (6, 6))])
def test_resize_with_pad_matches_tf_definition(src, dst):
    rng = np.random.default_rng(2)
    img = rng.uniform(0, 1, src + (2,)).astype(np.float32)
    got = tg.image.resize_with_pad(tg.constant(img), *dst)
    assert got.dtype == tg.float32 and got.shape == dst + (2,)
    np.testing.assert_allclose(got.numpy(), loop_resize_with_pad(img, *dst), rtol=2e-6,
                               atol=2e-6)
    batch = tg.image.resize_with_pad(tg.constant(np.stack([img, img])), *dst)
    assert batch.shape == (2,) + dst + (2,)
    int_img = (img * 255).astype(np.uint8)
    assert tg.image.resize_with_pad(tg.constant(int_img), *dst).dtype == tg.float32


def test_resize_with_pad_errors():
    with pytest.raises(tg.errors.InvalidArgumentError, match="must be > 0"):
        tg.image.resize_with_pad(tg.zeros((4, 4, 1)), 0, 3)


# -- convert_image_dtype -----------------------------------------------------------------------

def test_convert_image_dtype_int_to_float_divides_by_max():
    x = np.array([0, 1, 127, 128, 254, 255], np.uint8)
    got = tg.image.convert_image_dtype(tg.constant(x), tg.float32)
    assert got.dtype == tg.float32
    np.testing.assert_array_equal(got.numpy(), x.astype(np.float32) * np.float32(1.0 / 255))
    x8 = np.array([[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]], np.int8)
    got = tg.image.convert_image_dtype(tg.constant(x8), tg.float16)
    np.testing.assert_array_equal(got.numpy(), x8.astype(np.float16) * np.float16(1.0 / 127))


def test_convert_image_dtype_float_to_int_scales_by_max_plus_half():
    x = np.array([0.0, 0.25, 0.5, 0.999, 1.0], np.float32)
    got = tg.image.convert_image_dtype(tg.constant(x), tg.uint8)
    want = [math.trunc(float(np.float32(v) * np.float32(255.5))) for v in x]
    assert got.dtype == tg.uint8 and got.numpy().tolist() == want
    over = np.array([-0.5, 1.5, 0.5], np.float32)
    sat = tg.image.convert_image_dtype(tg.constant(over), tg.uint8, saturate=True)
    assert sat.numpy().tolist() == [0, 255, 127]
    sat32 = tg.image.convert_image_dtype(tg.constant(np.array([2.0, -2.0], np.float32)),
                                         tg.int32, saturate=True)
    assert sat32.numpy().tolist() == [2147483647, -2147483648]


def test_convert_image_dtype_int_to_int_shifts_the_range():
    x = np.array([0, 1, 100, 255], np.uint8)
    up = tg.image.convert_image_dtype(tg.constant(x), tg.int32)
    assert up.numpy().tolist() == [v * (2 ** 31 // 2 ** 8) for v in x.tolist()]
    down = tg.image.convert_image_dtype(up, tg.uint8)
    assert down.numpy().tolist() == x.tolist()
    i16 = np.array([-32768, -1, 255, 32767], np.int16)
    assert tg.image.convert_image_dtype(tg.constant(i16), tg.int8).numpy().tolist() == \
        [v // 256 for v in i16.tolist()]
    # int8 -> uint8 without saturation wraps the negative values as a cast does; with it, 0
    neg = np.array([-3, 5], np.int8)
    sat = tg.image.convert_image_dtype(tg.constant(neg), tg.uint8, saturate=True)
    assert sat.numpy().tolist() == [0, 10]


def test_convert_image_dtype_float_to_float_casts_and_is_differentiable():
    x = tg.constant([0.25, 2.0], dtype=tg.float64)
    same = tg.image.convert_image_dtype(x, tg.float64)
    assert same is x
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.image.convert_image_dtype(x, tg.float32)
        loss = tg.reduce_sum(y * tg.constant([3.0, 5.0]))
    assert y.dtype == tg.float32 and y.numpy().tolist() == [0.25, 2.0]
    np.testing.assert_array_equal(tape.gradient(loss, x).numpy(), [3.0, 5.0])


def test_convert_image_dtype_errors():
    with pytest.raises(tg.errors.InvalidArgumentError, match="dtype must be either floating"):
        tg.image.convert_image_dtype(tg.constant([1.0]), tg.bool)
    with pytest.raises(tg.errors.InvalidArgumentError, match="image dtype must be"):
        tg.image.convert_image_dtype(tg.constant([True]), tg.float32)


# -- adjust_contrast ---------------------------------------------------------------------------

def loop_adjust_contrast(img, factor):
    """(x - mean) * factor + mean, the mean per channel over height and width."""
    out = np.zeros(img.shape)
    *batch, h, w, c = img.shape
    for b in np.ndindex(*batch):
        for k in range(c):
            mean = sum(img[b + (i, j, k)] for i in range(h) for j in range(w)) / (h * w)
            for i in range(h):
                for j in range(w):
                    out[b + (i, j, k)] = (img[b + (i, j, k)] - mean) * factor + mean
    return out


def test_tf_documented_adjust_contrast_example():
    x = [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[7.0, 8.0, 9.0], [10.0, 11.0, 12.0]]]
    got = tg.image.adjust_contrast(x, 2.0)
    assert got.dtype == tg.float32
    np.testing.assert_array_equal(got.numpy(), [[[-3.5, -2.5, -1.5], [2.5, 3.5, 4.5]],
                                                [[8.5, 9.5, 10.5], [14.5, 15.5, 16.5]]])


@pytest.mark.parametrize("shape", [(3, 4, 2), (2, 3, 4, 1), (2, 1, 2, 2, 3)])
def test_adjust_contrast_matches_definition_and_is_differentiable(shape):
    rng = np.random.default_rng(3)
    img = rng.uniform(0, 1, shape)
    x, f = tg.constant(img), tg.constant(0.7, dtype=tg.float64)
    w = rng.standard_normal(shape)
    with tg.GradientTape() as tape:
        tape.watch([x, f])
        out = tg.image.adjust_contrast(x, f)
        loss = tg.reduce_sum(out * w)
    np.testing.assert_allclose(out.numpy(), loop_adjust_contrast(img, 0.7), rtol=1e-12)
    dx, df = tape.gradient(loss, [x, f])
    # d/df = sum(w * (x - mean)); d/dx = f w + (1 - f) mean_hw(w) per channel
    centred = loop_adjust_contrast(img, 1.0) - loop_adjust_contrast(img, 0.0)
    assert float(df) == pytest.approx(float(np.sum(w * centred)), rel=1e-12)
    np.testing.assert_allclose(dx.numpy(), 0.7 * w + 0.3 * loop_adjust_contrast(w, 0.0),
                               rtol=1e-12, atol=1e-12)


def test_adjust_contrast_takes_variables_for_the_image_and_the_factor():
    """TF's autodiff guide passes tf.Variables for both (TF then has no gradient for the op:
    LookupError; here it is differentiable)."""
    image, delta = tg.Variable([[[0.5, 0.0, 0.0]]]), tg.Variable(0.1)
    with tg.GradientTape() as tape:
        out = tg.image.adjust_contrast(image, delta)
        loss = tg.reduce_sum(out * tg.constant([[[1.0, 2.0, 3.0]]]))
    np.testing.assert_array_equal(out.numpy(), [[[0.5, 0.0, 0.0]]])  # one pixel: its mean
    d_image, d_delta = tape.gradient(loss, [image, delta])
    np.testing.assert_allclose(d_image.numpy(), [[[1.0, 2.0, 3.0]]])  # a 1x1 image: identity
    assert float(d_delta) == 0.0 and d_delta.dtype == tg.float32


def test_adjust_contrast_integer_images_saturate():
    img = np.array([[[0], [100]], [[200], [255]]], np.uint8)
    got = tg.image.adjust_contrast(tg.constant(img), 3.0)
    flt = img.astype(np.float32) * np.float32(1 / 255)
    adjusted = loop_adjust_contrast(flt.astype(np.float64), 3.0).astype(np.float32)
    want = np.clip(adjusted.astype(np.float64) * np.float32(255.5), 0, 255).astype(np.uint8)
    assert got.dtype == tg.uint8
    np.testing.assert_array_equal(got.numpy(), want)


def test_adjust_contrast_errors():
    with pytest.raises(tg.errors.InvalidArgumentError, match="at least 3-D"):
        tg.image.adjust_contrast(tg.zeros((2, 2)), 2.0)
    with pytest.raises(tg.errors.InvalidArgumentError, match="scalar"):
        tg.image.adjust_contrast(tg.zeros((2, 2, 1)), tg.constant([1.0, 2.0]))


# -- flips, rotations, crops, pads, colour and quality (numpy definitions) -------------------------

def _img(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(0, 1, shape).astype(dtype)


def _grad(fn, x, w):
    """d sum(fn(x) * w) / dx by the tape."""
    x = tg.constant(x)
    with tg.GradientTape() as tape:
        tape.watch(x)
        loss = tg.reduce_sum(fn(x) * w)
    return tape.gradient(loss, x).numpy()


PERMUTATIONS = [  # (tg function, numpy definition, numpy inverse) on [..., h, w, c]
    (tg.image.flip_left_right, lambda a: a[..., :, ::-1, :], lambda a: a[..., :, ::-1, :]),
    (tg.image.flip_up_down, lambda a: a[..., ::-1, :, :], lambda a: a[..., ::-1, :, :]),
    (tg.image.transpose, lambda a: np.swapaxes(a, -3, -2), lambda a: np.swapaxes(a, -3, -2)),
] + [(lambda x, k=k: tg.image.rot90(x, k), lambda a, k=k: np.rot90(a, k, axes=(-3, -2)),
      lambda a, k=k: np.rot90(a, -k, axes=(-3, -2))) for k in (-1, 1, 2, 3, 4, 5)]


@pytest.mark.parametrize("fn, ref, inverse", PERMUTATIONS)
@pytest.mark.parametrize("shape", [(3, 4, 2), (2, 3, 5, 1)])
def test_flips_and_rotations_match_numpy_and_route_gradients_back(fn, ref, inverse, shape):
    img = _img(shape, dtype=np.float64)
    np.testing.assert_array_equal(fn(tg.constant(img)).numpy(), ref(img))
    u8 = (img * 255).astype(np.uint8)
    out = fn(tg.constant(u8))
    assert out.dtype == tg.uint8
    np.testing.assert_array_equal(out.numpy(), ref(u8))
    w = np.random.default_rng(1).standard_normal(ref(img).shape)
    np.testing.assert_array_equal(_grad(fn, img, w), inverse(w))


def _loop_crop(img, top, left, height, width):
    out = np.zeros(img.shape[:-3] + (height, width, img.shape[-1]), img.dtype)
    for i in range(height):
        for j in range(width):
            out[..., i, j, :] = img[..., top + i, left + j, :]
    return out


def _loop_pad(img, top, left, height, width):
    out = np.zeros(img.shape[:-3] + (height, width, img.shape[-1]), img.dtype)
    for i in range(img.shape[-3]):
        for j in range(img.shape[-2]):
            out[..., top + i, left + j, :] = img[..., i, j, :]
    return out


@pytest.mark.parametrize("shape", [(5, 6, 2), (2, 5, 6, 1)])
def test_crop_and_pad_to_bounding_box_match_their_definitions(shape):
    img = _img(shape, dtype=np.float64)
    np.testing.assert_array_equal(tg.image.crop_to_bounding_box(img, 1, 2, 3, 4).numpy(),
                                  _loop_crop(img, 1, 2, 3, 4))
    np.testing.assert_array_equal(tg.image.pad_to_bounding_box(img, 2, 1, 8, 9).numpy(),
                                  _loop_pad(img, 2, 1, 8, 9))
    w = np.random.default_rng(2).standard_normal(shape[:-3] + (3, 4, shape[-1]))
    # the crop's gradient is the cotangent padded back into place
    np.testing.assert_array_equal(
        _grad(lambda x: tg.image.crop_to_bounding_box(x, 1, 2, 3, 4), img, w),
        _loop_pad(w, 1, 2, shape[-3], shape[-2]))


@pytest.mark.parametrize("src, dst", [((5, 7), (3, 9)), ((4, 4), (8, 2)), ((6, 3), (1, 1)),
                                      ((5, 5), (5, 5))])
def test_resize_with_crop_or_pad_centres_the_image(src, dst):
    img = _img(src + (2,))
    (h, w), (th, tw) = src, dst
    crop = _loop_crop(img, max((h - th) // 2, 0), max((w - tw) // 2, 0), min(h, th), min(w, tw))
    want = _loop_pad(crop, max((th - h) // 2, 0), max((tw - w) // 2, 0), th, tw)
    np.testing.assert_array_equal(tg.image.resize_with_crop_or_pad(img, th, tw).numpy(), want)


@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.77, 1.0])
@pytest.mark.parametrize("size", [(5, 7), (4, 4), (6, 3)])
def test_central_crop_matches_tf_definition(fraction, size):
    img = _img((2,) + size + (3,))
    h, w = size
    top, left = int((h - h * fraction) / 2), int((w - w * fraction) / 2)
    np.testing.assert_array_equal(tg.image.central_crop(img, fraction).numpy(),
                                  img[:, top:h - top, left:w - left])


def test_crop_and_pad_errors():
    img = tg.zeros((4, 4, 1))
    with pytest.raises(ValueError, match="either 3 or 4 dimensions"):
        tg.image.flip_left_right(tg.zeros((4, 4)))
    with pytest.raises(ValueError, match="offset_height must be >= 0"):
        tg.image.crop_to_bounding_box(img, -1, 0, 2, 2)
    with pytest.raises(ValueError, match="target_width must be > 0"):
        tg.image.crop_to_bounding_box(img, 0, 0, 2, 0)
    with pytest.raises(ValueError, match="width must be >= target \\+ offset"):
        tg.image.crop_to_bounding_box(img, 0, 3, 2, 2)
    with pytest.raises(ValueError, match="height must be <= target - offset"):
        tg.image.pad_to_bounding_box(img, 2, 0, 5, 5)
    with pytest.raises(ValueError, match="within \\(0, 1\\]"):
        tg.image.central_crop(img, 0.0)
    with pytest.raises(ValueError, match="integer"):
        tg.image.rot90(img, 1.5)
    with pytest.raises(ValueError, match="size must be a list of 3"):
        tg.image.random_crop(img, [2, 2])
    with pytest.raises(ValueError, match="value.shape >= size"):
        tg.image.random_crop(img, [5, 2, 1])


def _flipped_or_not(out, img, flip):
    """For each image of the batch: True if flipped, False if unchanged (else the test fails)."""
    which = []
    for o, i in zip(out, img):
        same, flipped = np.array_equal(o, i), np.array_equal(o, flip(i))
        assert same or flipped
        which.append(flipped)
    return np.array(which)


@pytest.mark.parametrize("fn, flip", [(tg.image.random_flip_left_right, lambda a: a[:, ::-1]),
                                      (tg.image.random_flip_up_down, lambda a: a[::-1])])
def test_random_flips_draw_per_image_repeatably_and_anew_in_functions(fn, flip):
    img = _img((64, 3, 3, 1))
    tg.random.set_seed(5)
    first = _flipped_or_not(fn(tg.constant(img)).numpy(), img, flip)
    second = _flipped_or_not(fn(tg.constant(img)).numpy(), img, flip)
    assert 0 < first.sum() < 64  # one draw per image, not one per batch
    assert not np.array_equal(first, second)  # every call draws anew
    tg.random.set_seed(5)
    np.testing.assert_array_equal(_flipped_or_not(fn(tg.constant(img)).numpy(), img, flip), first)
    a = _flipped_or_not(fn(tg.constant(img), seed=3).numpy(), img, flip)
    b = _flipped_or_not(fn(tg.constant(img), seed=3).numpy(), img, flip)
    assert not np.array_equal(a, b)  # an op seed's stream advances too
    traced = tg.function(lambda x: fn(x))
    c = _flipped_or_not(traced(tg.constant(img)).numpy(), img, flip)
    d = _flipped_or_not(traced(tg.constant(img)).numpy(), img, flip)
    assert not np.array_equal(c, d)  # a random node, not a constant captured at tracing
    single = fn(tg.constant(img[0])).numpy()
    _flipped_or_not(single[None], img[:1], flip)


def _window_offset(out, img):
    """The offsets at which `out` is a window of `img` (exactly one must match)."""
    hits = [off for off in np.ndindex(*(np.array(img.shape) - out.shape + 1))
            if np.array_equal(img[tuple(slice(o, o + s) for o, s in zip(off, out.shape))], out)]
    assert len(hits) == 1
    return hits[0]


def test_random_crop_is_a_window_at_a_random_offset_and_differentiable():
    img = np.random.default_rng(3).standard_normal((6, 7, 2))
    tg.random.set_seed(1)
    offsets = {_window_offset(tg.image.random_crop(img, [3, 4, 2]).numpy(), img)
               for _ in range(30)}
    assert len(offsets) > 4 and all(o[2] == 0 for o in offsets)
    tg.random.set_seed(1)
    again = _window_offset(tg.image.random_crop(img, [3, 4, 2]).numpy(), img)
    tg.random.set_seed(1)
    assert _window_offset(tg.image.random_crop(img, [3, 4, 2]).numpy(), img) == again
    traced = tg.function(lambda x: tg.image.random_crop(x, [3, 4, 2], seed=2))
    assert len({_window_offset(traced(tg.constant(img)).numpy(), img) for _ in range(10)}) > 1
    x = tg.constant(img)
    w = np.random.default_rng(4).standard_normal((3, 4, 2))
    with tg.GradientTape() as tape:
        tape.watch(x)
        out = tg.image.random_crop(x, [3, 4, 2])
        loss = tg.reduce_sum(out * w)
    top, left, _ = _window_offset(out.numpy(), img)
    want = np.zeros_like(img)
    want[top:top + 3, left:left + 4] = w
    np.testing.assert_array_equal(tape.gradient(loss, x).numpy(), want)


def test_adjust_brightness_adds_delta_and_saturates_integers():
    img = _img((3, 4, 3), dtype=np.float64)
    x, d = tg.constant(img), tg.constant(0.2, tg.float64)
    w = np.random.default_rng(5).standard_normal(img.shape)
    with tg.GradientTape() as tape:
        tape.watch([x, d])
        out = tg.image.adjust_brightness(x, d)
        loss = tg.reduce_sum(out * w)
    np.testing.assert_allclose(out.numpy(), img + 0.2, rtol=1e-15)
    gx, gd = tape.gradient(loss, [x, d])
    np.testing.assert_allclose(gx.numpy(), w)
    assert float(gd) == pytest.approx(w.sum())
    u8 = np.array([[[0, 100, 250]]], np.uint8)
    got = tg.image.adjust_brightness(tg.constant(u8), 0.1)
    flt = u8.astype(np.float32) * np.float32(1 / 255) + np.float32(0.1)
    want = np.clip(flt.astype(np.float64) * np.float32(255.5), 0, 255).astype(np.uint8)
    assert got.dtype == tg.uint8
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(ValueError, match="delta must be a finite number"):
        tg.image.adjust_brightness(x, "0.1")


def test_random_brightness_and_contrast_draw_one_value_per_call():
    img = _img((2, 4, 5, 3), seed=6)
    tg.random.set_seed(2)
    out = tg.image.random_brightness(tg.constant(img), 0.3).numpy()
    delta = out - img
    assert np.ptp(delta) < 1e-6 and abs(delta.flat[0]) <= 0.3 and out.dtype == np.float32
    tg.random.set_seed(2)
    np.testing.assert_array_equal(tg.image.random_brightness(tg.constant(img), 0.3).numpy(), out)
    mean = img.mean(axis=(-3, -2), keepdims=True)
    out = tg.image.random_contrast(tg.constant(img), 0.4, 0.9).numpy()
    factor = (out - mean) / (img - mean)
    assert np.ptp(factor) < 1e-3 and 0.4 <= factor.flat[0] < 0.9
    traced = tg.function(lambda x: tg.image.random_contrast(x, 0.4, 0.9, seed=1))
    assert not np.array_equal(traced(tg.constant(img)).numpy(), traced(tg.constant(img)).numpy())
    with pytest.raises(ValueError, match="max_delta must be non-negative"):
        tg.image.random_brightness(img, -0.1)
    with pytest.raises(ValueError, match="upper must be > lower"):
        tg.image.random_contrast(img, 0.5, 0.5)
    with pytest.raises(ValueError, match="lower must be non-negative"):
        tg.image.random_contrast(img, -0.5, 0.5)


GRAY = np.array([0.2989, 0.5870, 0.1140])


def test_rgb_to_grayscale_and_back():
    img = _img((2, 3, 4, 3), dtype=np.float64)
    out = tg.image.rgb_to_grayscale(img)
    assert out.dtype == tg.float64
    np.testing.assert_allclose(out.numpy(), (img @ GRAY)[..., None], rtol=1e-15)
    w = np.random.default_rng(7).standard_normal((2, 3, 4, 1))
    np.testing.assert_allclose(_grad(tg.image.rgb_to_grayscale, img, w), w * GRAY, rtol=1e-15)
    u8 = (img * 255).astype(np.uint8)
    flt = u8.astype(np.float32) * np.float32(1 / 255)
    want = ((flt @ GRAY.astype(np.float32))[..., None] * np.float32(255.5)).astype(np.uint8)
    np.testing.assert_array_equal(tg.image.rgb_to_grayscale(u8).numpy(), want)
    rgb = tg.image.grayscale_to_rgb(out)
    np.testing.assert_array_equal(rgb.numpy(), np.repeat(out.numpy(), 3, axis=-1))
    with pytest.raises(ValueError, match="size 3"):
        tg.image.rgb_to_grayscale(tg.zeros((2, 2, 4)))
    with pytest.raises(ValueError, match="size 1"):
        tg.image.grayscale_to_rgb(tg.zeros((2, 2, 3)))


@pytest.mark.parametrize("shape", [(3, 4, 2), (2, 3, 3, 1)])
def test_per_image_standardization_matches_definition_and_gradients(shape):
    img = np.random.default_rng(8).standard_normal(shape)
    n = np.prod(shape[-3:])
    mean = img.mean(axis=(-3, -2, -1), keepdims=True)
    std = np.maximum(img.std(axis=(-3, -2, -1), keepdims=True), 1 / np.sqrt(n))
    out = tg.image.per_image_standardization(img)
    assert out.dtype == tg.float64
    np.testing.assert_allclose(out.numpy(), (img - mean) / std, rtol=1e-12, atol=1e-12)
    tg.test.check_gradients(tg.image.per_image_standardization, [tg.constant(img)])
    flat = tg.image.per_image_standardization(tg.fill((2, 2, 1), 3))  # stddev 0: 1/sqrt(N)
    assert flat.dtype == tg.float32
    np.testing.assert_array_equal(flat.numpy(), np.zeros((2, 2, 1)))


def test_total_variation_and_psnr_match_definitions():
    rng = np.random.default_rng(9)
    a, b = rng.uniform(0, 1, (2, 4, 5, 3)), rng.uniform(0, 1, (2, 4, 5, 3))
    tv = np.abs(np.diff(a, axis=1)).sum(axis=(1, 2, 3)) + np.abs(np.diff(a, axis=2)).sum(
        axis=(1, 2, 3))
    np.testing.assert_allclose(tg.image.total_variation(a).numpy(), tv, rtol=1e-13)
    assert float(tg.image.total_variation(a[0])) == pytest.approx(tv[0], rel=1e-13)
    tg.test.check_gradients(tg.image.total_variation, [tg.constant(a)])
    mse = ((a - b) ** 2).mean(axis=(1, 2, 3))
    np.testing.assert_allclose(tg.image.psnr(a, b, 2.0).numpy(),
                               20 * np.log10(2.0) - 10 * np.log10(mse), rtol=1e-12)
    tg.test.check_gradients(lambda x: tg.image.psnr(x, b, 1.0), [tg.constant(a)])
    ua, ub = (a * 255).astype(np.uint8), (b * 255).astype(np.uint8)
    fa, fb = (u.astype(np.float64) / 255 for u in (ua, ub))
    np.testing.assert_allclose(tg.image.psnr(ua, ub, 255).numpy(),
                               -10 * np.log10(((fa - fb) ** 2).mean(axis=(1, 2, 3))), rtol=1e-5)
    with pytest.raises(ValueError, match="same shape"):
        tg.image.psnr(a, b[0], 1.0)
    with pytest.raises(ValueError, match="either 3 or"):
        tg.image.total_variation(a[0, 0])


# -- HSV (colorsys is the definition) ------------------------------------------------------------

def _per_pixel(fn, img):
    return np.apply_along_axis(lambda p: np.array(fn(*p)), -1, img)


def _hsv_images(seed=11, ties=True):
    """Random RGB images; with `ties`, also a grey, a two-channel maximum and black."""
    img = np.random.default_rng(seed).uniform(0.05, 0.95, (2, 3, 4, 3))
    if ties:
        img[0, 0, 0], img[0, 0, 1], img[0, 0, 2] = [0.5] * 3, [0.2, 0.7, 0.7], [0.0] * 3
    return img


def test_rgb_to_hsv_and_back_match_colorsys():
    import colorsys
    img = _hsv_images()
    hsv = tg.image.rgb_to_hsv(img)
    assert hsv.dtype == tg.float64
    np.testing.assert_allclose(hsv.numpy(), _per_pixel(colorsys.rgb_to_hsv, img), atol=1e-12)
    np.testing.assert_allclose(tg.image.hsv_to_rgb(hsv).numpy(), img, atol=1e-12)
    np.testing.assert_allclose(tg.image.hsv_to_rgb(img).numpy(),
                               _per_pixel(colorsys.hsv_to_rgb, img), atol=1e-12)
    smooth = tg.constant(_hsv_images(12, ties=False))  # no ties between channels: differentiable
    tg.test.check_gradients(tg.image.rgb_to_hsv, [smooth])
    tg.test.check_gradients(tg.image.hsv_to_rgb, [smooth])
    # greys and black: hue 0, saturation 0, and finite gradients
    x = tg.constant(img)
    with tg.GradientTape() as tape:
        tape.watch(x)
        loss = tg.reduce_sum(tg.image.rgb_to_hsv(x))
    assert np.isfinite(tape.gradient(loss, x).numpy()).all()


def test_adjust_saturation_and_hue_match_colorsys_definitions():
    import colorsys
    img = _hsv_images()
    hsv = _per_pixel(colorsys.rgb_to_hsv, img)
    sat = hsv.copy()
    sat[..., 1] = np.clip(sat[..., 1] * 1.7, 0, 1)
    np.testing.assert_allclose(tg.image.adjust_saturation(img, 1.7).numpy(),
                               _per_pixel(colorsys.hsv_to_rgb, sat), atol=1e-12)
    for delta in (0.3, -0.45, 1.0):
        hue = hsv.copy()
        hue[..., 0] = (hue[..., 0] + delta) % 1.0
        np.testing.assert_allclose(tg.image.adjust_hue(img, delta).numpy(),
                                   _per_pixel(colorsys.hsv_to_rgb, hue), atol=1e-12)
    smooth = _hsv_images(12, ties=False)
    tg.test.check_gradients(lambda x, f: tg.image.adjust_saturation(x, f),
                            [tg.constant(smooth), tg.constant(0.6, tg.float64)])
    tg.test.check_gradients(lambda x, d: tg.image.adjust_hue(x, d),
                            [tg.constant(smooth), tg.constant(0.1, tg.float64)])
    u8 = (img * 255).astype(np.uint8)
    flt = tg.image.convert_image_dtype(u8, tg.float32)
    want = tg.image.convert_image_dtype(tg.image.adjust_hue(flt, 0.2), tg.uint8, saturate=True)
    got = tg.image.adjust_hue(u8, 0.2)
    assert got.dtype == tg.uint8
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(ValueError, match="in the interval \\[-1, 1\\]"):
        tg.image.adjust_hue(img, 1.5)
    with pytest.raises(ValueError, match="size 3"):
        tg.image.rgb_to_hsv(img[..., :2])
    with pytest.raises(ValueError, match="floating"):
        tg.image.rgb_to_hsv(u8)


# -- SSIM (a loop over the Gaussian windows is the definition) ----------------------------------

def loop_ssim_map(x, y, max_val, size, sigma, k1, k2):
    """[h, w, c] images: SSIM at each VALID window position and channel."""
    coords = np.arange(size) - (size - 1) / 2
    g = np.exp(-(coords[:, None] ** 2 + coords[None, :] ** 2) / (2 * sigma ** 2))
    g /= g.sum()
    c1, c2 = (k1 * max_val) ** 2, (k2 * max_val) ** 2
    h, w, c = x.shape
    out = np.zeros((h - size + 1, w - size + 1, c))
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            for k in range(c):
                px, py = x[i:i + size, j:j + size, k], y[i:i + size, j:j + size, k]
                mx, my = (g * px).sum(), (g * py).sum()
                vx, vy = (g * px * px).sum() - mx * mx, (g * py * py).sum() - my * my
                cov = (g * px * py).sum() - mx * my
                out[i, j, k] = (2 * mx * my + c1) / (mx * mx + my * my + c1) * \
                    (2 * cov + c2) / (vx + vy + c2)
    return out


def test_ssim_matches_the_windowed_definition():
    rng = np.random.default_rng(13)
    a = rng.uniform(0, 1, (2, 13, 14, 2))
    b = np.clip(a + rng.normal(0, 0.1, a.shape), 0, 1)
    maps = np.stack([loop_ssim_map(x, y, 1.0, 11, 1.5, 0.01, 0.03) for x, y in zip(a, b)])
    got = tg.image.ssim(a, b, 1.0)
    assert got.dtype == tg.float64 and got.shape == (2,)
    np.testing.assert_allclose(got.numpy(), maps.mean(axis=(1, 2, 3)), rtol=1e-12)
    np.testing.assert_allclose(tg.image.ssim(a, b, 1.0, return_index_map=True).numpy(),
                               maps.mean(axis=-1), rtol=1e-12)
    other = loop_ssim_map(a[0], b[0], 2.0, 5, 0.8, 0.02, 0.05).mean()
    assert float(tg.image.ssim(a[0], b[0], 2.0, filter_size=5, filter_sigma=0.8, k1=0.02,
                               k2=0.05)) == pytest.approx(other, rel=1e-12)
    assert float(tg.image.ssim(a[0], a[0], 1.0)) == pytest.approx(1.0, rel=1e-12)
    small_a, small_b = tg.constant(a[0, :5, :5]), tg.constant(b[0, :5, :5])
    tg.test.check_gradients(lambda x: tg.image.ssim(x, small_b, 1.0, filter_size=3), [small_a])
    ua, ub = (a * 255).astype(np.uint8), (b * 255).astype(np.uint8)
    fa, fb = (u.astype(np.float64) / 255 for u in (ua, ub))
    want = [loop_ssim_map(x, y, 1.0, 11, 1.5, 0.01, 0.03).mean() for x, y in zip(fa, fb)]
    np.testing.assert_allclose(tg.image.ssim(ua, ub, 255).numpy(), want, rtol=1e-5)
    with pytest.raises(ValueError, match="filter size greater than the image size"):
        tg.image.ssim(a[:, :8], b[:, :8], 1.0)
    with pytest.raises(ValueError, match="same shape"):
        tg.image.ssim(a, b[0], 1.0)
