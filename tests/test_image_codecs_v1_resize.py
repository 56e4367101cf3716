"""tf.compat.v1.image's legacy-grid resizes, against values computed by hand from TF1's
kernels' rules (coordinate o * scale, no half-pixel centres)."""
import numpy as np
import pytest

import tapegpu as tg

v1 = tg.compat.v1.image


def _row(values):
    return tg.constant(np.asarray(values, np.float32).reshape(1, 1, -1, 1))


def test_bilinear_legacy_grid():
    # 3 -> 2: scale 1.5, coordinates 0 and 1.5 (lower 1, upper 2, weight 0.5)
    out = v1.resize_bilinear(_row([10, 20, 40]), [1, 2]).numpy().ravel()
    np.testing.assert_allclose(out, [10, 30])
    # align_corners: scale (3 - 1) / (5 - 1) = 0.5
    out = v1.resize_bilinear(_row([10, 20, 40]), [1, 5], align_corners=True).numpy().ravel()
    np.testing.assert_allclose(out, [10, 15, 20, 30, 40])
    assert v1.resize_bilinear(_row([1, 2]), [1, 3]).dtype == tg.float32


def test_nearest_legacy_grid_keeps_dtype():
    img = tg.constant(np.array([1, 2, 3], np.int32).reshape(1, 1, 3, 1))
    out = v1.resize_nearest_neighbor(img, [1, 5])  # scale 0.6: floor(0, .6, 1.2, 1.8, 2.4)
    assert out.dtype == tg.int32
    np.testing.assert_array_equal(out.numpy().ravel(), [1, 1, 2, 2, 3])
    # align_corners: scale 0.5, C's roundf (halves away from zero) of 0, .5, 1, 1.5, 2
    out = v1.resize_nearest_neighbor(img, [1, 5], align_corners=True)
    np.testing.assert_array_equal(out.numpy().ravel(), [1, 2, 2, 3, 3])
    out = v1.resize_nearest_neighbor(img, [1, 2])  # scale 1.5: floor(0, 1.5)
    np.testing.assert_array_equal(out.numpy().ravel(), [1, 2])


def test_bicubic_keys_minus_075():
    # at t = 0.5, Keys' cubic with a = -0.75 weighs the taps -3/32, 19/32, 19/32, -3/32
    out = v1.resize_bicubic(_row([0, 1, 2, 3]), [1, 8]).numpy().ravel()
    # o = 1: coordinate 0.5, taps -1, 0, 1, 2 clamped to 0, 0, 1, 2
    assert out[1] == pytest.approx(0 * (-3 / 32) + 0 * 19 / 32 + 1 * 19 / 32 + 2 * (-3 / 32))
    # o = 3: coordinate 1.5, taps 0, 1, 2, 3
    assert out[3] == pytest.approx(1.5)
    np.testing.assert_allclose(out[::2], [0, 1, 2, 3], atol=1e-6)  # integer coordinates


def test_area_overlap_weights():
    # 3 -> 2: boxes [0, 1.5) and [1.5, 3)
    out = v1.resize_area(_row([3, 6, 9]), [1, 2]).numpy().ravel()
    np.testing.assert_allclose(out, [(3 + 0.5 * 6) / 1.5, (0.5 * 6 + 9) / 1.5], rtol=1e-6)


def test_resize_images_methods_and_same_size():
    img = tg.constant(np.arange(12, dtype=np.uint8).reshape(3, 4, 1))
    assert v1.resize_images(img, [3, 4]) is not None
    assert v1.resize_images(img, [3, 4]).dtype == tg.uint8  # unchanged, as TF1
    out = v1.resize_images(img, [6, 8])
    assert out.shape == (6, 8, 1) and out.dtype == tg.float32
    np.testing.assert_allclose(out.numpy(), v1.resize_bilinear(img[None], [6, 8])[0].numpy())
    near = v1.resize_images(img, [6, 8], method=1)
    assert near.dtype == tg.uint8
    # factor min(6/3, 6/4) = 1.5: 4.5 rows, rounded half to even as tf.round
    assert v1.resize_images(img, [6, 6], preserve_aspect_ratio=True).shape == (4, 6, 1)
    with pytest.raises(ValueError, match="method"):
        v1.resize_images(img, [2, 2], method=7)


def test_legacy_resize_is_differentiable():
    x = tg.Variable(np.arange(4, dtype=np.float32).reshape(1, 2, 2, 1))
    with tg.GradientTape() as tape:
        y = tg.reduce_sum(v1.resize_bilinear(x, [4, 4]))
    g = tape.gradient(y, x).numpy().ravel()
    # each output pixel's weights sum to 1, so the gradient counts the weight each input gets
    assert g.sum() == pytest.approx(16.0)
    np.testing.assert_allclose(g, [1.5 * 1.5, 1.5 * 2.5, 2.5 * 1.5, 2.5 * 2.5])
