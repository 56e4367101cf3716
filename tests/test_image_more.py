"""The stateless/random colour ops, sobel_edges and crop_and_resize of tapegpu/ops/image.py
against hand-computed values and finite differences."""
import numpy as np
import pytest

import tapegpu as tg


def _ramp():
    return tg.reshape(tg.range(16, dtype=tg.float32), (1, 4, 4, 1))  # pixel = 4 y + x


def test_stateless_ops_depend_only_on_the_seed():
    img = tg.random.uniform((4, 5, 3))
    a = tg.image.stateless_random_brightness(img, 0.3, seed=(1, 2))
    assert bool(tg.reduce_all(a == tg.image.stateless_random_brightness(img, 0.3, (1, 2))))
    delta = (a - img).numpy()
    assert np.allclose(delta, delta.flat[0], atol=1e-6) and abs(delta.flat[0]) <= 0.3
    c = tg.image.stateless_random_contrast(img, 0.2, 0.5, seed=(3, 4))
    mean = img.numpy().mean(axis=(0, 1))
    factor = ((c.numpy() - mean) / (img.numpy() - mean)).ravel()
    assert np.allclose(factor, factor[0], rtol=1e-3) and 0.2 <= factor[0] < 0.5
    x = tg.reshape(tg.range(30), (5, 6))
    crop = tg.image.stateless_random_crop(x, [2, 3], seed=(5, 6)).numpy()
    r, col = divmod(int(crop[0, 0]), 6)
    np.testing.assert_array_equal(crop, x.numpy()[r:r + 2, col:col + 3])
    with pytest.raises(ValueError, match="non-negative"):
        tg.image.stateless_random_brightness(img, -1.0, seed=(1, 2))
    with pytest.raises(tg.errors.InvalidArgumentError, match="Need value.shape >= size"):
        tg.image.stateless_random_crop(x, [6, 3], seed=(1, 2))


def test_random_hue_and_saturation_ranges():
    img = tg.constant([[[0.2, 0.4, 0.6]]])
    with pytest.raises(ValueError, match="max_delta must be <= 0.5"):
        tg.image.random_hue(img, 0.6)
    with pytest.raises(ValueError, match="upper must be > lower"):
        tg.image.random_saturation(img, 1.0, 0.5)
    # a saturation factor in [0, 1e-6): the pixel turns gray at its value (max channel)
    out = tg.image.random_saturation(img, 0.0, 1e-6, seed=3).numpy()
    np.testing.assert_allclose(out, [[[0.6, 0.6, 0.6]]], atol=1e-5)
    gray = tg.constant([[[0.5, 0.5, 0.5]]])
    np.testing.assert_allclose(tg.image.random_hue(gray, 0.5).numpy(), gray.numpy(), atol=1e-6)


def test_sobel_edges_values_and_gradient():
    e = tg.image.sobel_edges(_ramp()).numpy()
    assert e.shape == (1, 4, 4, 1, 2)
    # reflected borders: the first and last rows (columns) see a zero difference
    np.testing.assert_array_equal(e[0, :, :, 0, 0], [[0] * 4, [32] * 4, [32] * 4, [0] * 4])
    np.testing.assert_array_equal(e[0, :, :, 0, 1], [[0, 8, 8, 0]] * 4)
    x = tg.random.uniform((1, 3, 4, 2))
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.reduce_sum(tg.image.sobel_edges(x) ** 2)
    g = tape.gradient(y, x).numpy()
    eps, i = 1e-2, (0, 1, 2, 1)
    xp, xm = x.numpy().copy(), x.numpy().copy()
    xp[i] += eps
    xm[i] -= eps
    fd = (np.sum(tg.image.sobel_edges(xp).numpy() ** 2) -
          np.sum(tg.image.sobel_edges(xm).numpy() ** 2)) / (2 * eps)
    np.testing.assert_allclose(g[i], fd, rtol=1e-2)


def test_crop_and_resize_bilinear_nearest_extrapolation():
    img = _ramp()
    out = tg.image.crop_and_resize(img, [[0, 0, 1, 1], [0.25, 0.25, 0.75, 0.5]], [0, 0],
                                   [2, 2]).numpy()[..., 0]
    # bilinear sampling of a linear image is exact: 4 y + x at y in [0.75, 2.25], x in
    # [0.75, 1.5]
    np.testing.assert_allclose(out, [[[0, 3], [12, 15]], [[3.75, 4.5], [9.75, 10.5]]])
    ext = tg.image.crop_and_resize(img, [[-1, 0, 1, 1]], [0], [3, 2],
                                   extrapolation_value=-7).numpy()[0, ..., 0]
    np.testing.assert_array_equal(ext, [[-7, -7], [0, 3], [12, 15]])
    near = tg.image.crop_and_resize(img, [[0, 0, 1, 1]], [0], [3, 3],
                                    method="nearest").numpy()[0, ..., 0]
    np.testing.assert_array_equal(near, [[0, 2, 3], [8, 10, 11], [12, 14, 15]])  # 1.5 -> 2
    one = tg.image.crop_and_resize(img, [[0, 0, 1, 1]], [0], [1, 1]).numpy()
    np.testing.assert_allclose(one.ravel(), [7.5])  # the box centre
    boxes = tg.constant([[0.1, 0.2, 0.8, 0.9]])
    with tg.GradientTape() as tape:
        tape.watch(boxes)
        y = tg.reduce_sum(tg.image.crop_and_resize(img, boxes, [0], [3, 3]))
    # d/dbox of sum(4 y + x): y samples y1*3 + i (y2-y1)*3/2, i = 0, 1, 2
    np.testing.assert_allclose(tape.gradient(y, boxes).numpy(),
                               [[4 * 3 * 3 * 1.5, 3 * 3 * 1.5, 4 * 3 * 3 * 1.5, 3 * 3 * 1.5]],
                               rtol=1e-5)
    with pytest.raises(tg.errors.InvalidArgumentError, match="box_indices"):
        tg.image.crop_and_resize(img, [[0, 0, 1, 1]], [1], [2, 2])
