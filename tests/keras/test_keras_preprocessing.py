"""tg.keras' image preprocessing layers against numpy definitions: `affine_transform` against
a pixel loop of TensorFlow's projective-transform kernel (fill modes, bilinear and nearest
sampling) and its gradient as the transposed linear map; RandomRotation / RandomZoom /
RandomTranslation as that transform with Keras' matrices (a quarter turn is np.rot90, whole
pixel shifts are np.pad's symmetric / wrap / edge / constant windows); flips per image;
contrast and brightness per image; crops and resizing; identity at inference, seeds,
`tg.function` drawing anew, and argument errors."""
import math

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.keras.layers.preprocessing import affine_transform

L = tg.keras.layers
FILL_MODES = ["reflect", "wrap", "constant", "nearest"]


# -- a pixel loop of TF's ImageProjectiveTransformV3 -------------------------------------------

def _map(c, n, mode):
    """TF's MapCoordinate: reflect dcba|abcd|dcba, wrap abcd|abcd, nearest clamps, constant
    keeps; then clamped to [0, n - 1]."""
    if mode == "constant":
        return c
    if n <= 1:
        return 0.0
    if mode == "reflect":
        if c < 0:
            c = 2 * n * int(-c / (2 * n)) + c
            c = c + 2 * n if c < -n else -c - 1
        elif c > n - 1:
            c -= 2 * n * int(c / (2 * n))
            if c >= n:
                c = 2 * n - c - 1
    elif mode == "wrap":  # c mod n (TF's kernel divides by n - 1: wrong beyond n - 1 pixels)
        c = c % n
    return min(max(c, 0.0), n - 1.0)


def loop_affine(img, t, interpolation, mode, fill):
    """[h, w, c] image, one transform [a0, a1, a2, b0, b1, b2, c0, c1], pixel by pixel."""
    h, w, _ = img.shape
    out = np.zeros(img.shape)

    def read(y, x):
        return img[y, x] if 0 <= y < h and 0 <= x < w else np.full(img.shape[-1], fill)
    for i in range(h):
        for j in range(w):
            k = t[6] * j + t[7] * i + 1
            x = _map((t[0] * j + t[1] * i + t[2]) / k, w, mode)
            y = _map((t[3] * j + t[4] * i + t[5]) / k, h, mode)
            if interpolation == "nearest":
                out[i, j] = read(int(math.floor(y + 0.5)) if y >= 0 else -int(math.floor(-y + 0.5)),
                                 int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5)))
            else:
                y0, x0 = math.floor(y), math.floor(x)
                top = (x0 + 1 - x) * read(y0, x0) + (x - x0) * read(y0, x0 + 1)
                bottom = (x0 + 1 - x) * read(y0 + 1, x0) + (x - x0) * read(y0 + 1, x0 + 1)
                out[i, j] = (y0 + 1 - y) * top + (y - y0) * bottom
    return out


def _rotation(angle, h, w):
    """Keras' rotation matrix about the centre ((w - 1) / 2, (h - 1) / 2)."""
    c, s = math.cos(angle), math.sin(angle)
    cx, cy = (w - 1) / 2, (h - 1) / 2
    return [c, -s, cx - cx * c + cy * s, s, c, cy - cx * s - cy * c, 0.0, 0.0]


TRANSFORMS = [_rotation(0.3, 5, 6), _rotation(-2.5, 5, 6), [1.3, 0, -3.7, 0, 0.8, 2.2, 0, 0],
              [1, 0, -8.5, 0, 1, 7.5, 0, 0], [0.9, 0.1, 0.5, -0.2, 1.1, -0.3, 0.01, -0.02]]


@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
@pytest.mark.parametrize("mode", FILL_MODES)
def test_affine_transform_matches_tf_kernel_definition(mode, interpolation):
    img = np.random.default_rng(0).uniform(0, 1, (len(TRANSFORMS), 5, 6, 2))
    got = affine_transform(img, np.array(TRANSFORMS), interpolation, mode, 0.25)
    assert got.dtype == tg.float64
    want = np.stack([loop_affine(i, t, interpolation, mode, 0.25)
                     for i, t in zip(img, TRANSFORMS)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-9)
    one = affine_transform(img[0].astype(np.float32), TRANSFORMS[0], interpolation, mode, 0.25)
    assert one.dtype == tg.float32 and one.shape == (5, 6, 2)
    np.testing.assert_allclose(one.numpy(), want[0], atol=1e-5)


@pytest.mark.parametrize("mode", ["reflect", "constant"])
def test_affine_transform_gradient_is_the_transposed_map(mode):
    shape, t = (4, 5, 1), _rotation(0.7, 4, 5)
    x = tg.constant(np.random.default_rng(1).standard_normal(shape))
    w = np.random.default_rng(2).standard_normal(shape)
    with tg.GradientTape() as tape:
        tape.watch(x)
        loss = tg.reduce_sum(affine_transform(x, t, "bilinear", mode, 0.0) * w)
    cols = []
    for k in range(int(np.prod(shape))):
        e = np.zeros(int(np.prod(shape)))
        e[k] = 1.0
        cols.append(loop_affine(e.reshape(shape), t, "bilinear", mode, 0.0).ravel())
    want = (np.stack(cols, axis=1).T @ w.ravel()).reshape(shape)
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), want, atol=1e-12)


def test_affine_transform_errors():
    with pytest.raises(ValueError, match="fill_mode"):
        affine_transform(tg.zeros((2, 2, 1)), [1, 0, 0, 0, 1, 0, 0, 0], fill_mode="mirror")
    with pytest.raises(ValueError, match="interpolation"):
        affine_transform(tg.zeros((2, 2, 1)), [1, 0, 0, 0, 1, 0, 0, 0], interpolation="cubic")
    with pytest.raises(ValueError, match="rank 3"):
        affine_transform(tg.zeros((2, 2)), [1, 0, 0, 0, 1, 0, 0, 0])
    with pytest.raises(ValueError, match="transform must have shape"):
        affine_transform(tg.zeros((3, 2, 2, 1)), tg.zeros((2, 8)))


# -- the geometric layers ----------------------------------------------------------------------

def test_random_rotation_quarter_turn_is_rot90_counter_clockwise():
    img = np.random.default_rng(3).uniform(0, 255, (2, 5, 5, 3)).astype(np.float32)
    out = L.RandomRotation((0.25, 0.25))(img, training=True)
    assert out.dtype == tg.float32
    np.testing.assert_allclose(out.numpy(), np.rot90(img, 1, axes=(1, 2)), atol=1e-3)


@pytest.mark.parametrize("mode", FILL_MODES)
def test_random_rotation_fixed_angle_is_keras_matrix(mode):
    img = np.random.default_rng(4).uniform(0, 1, (2, 5, 6, 1))
    out = L.RandomRotation((0.1, 0.1), fill_mode=mode, fill_value=3.0)(img, training=True)
    want = loop_affine(img[1], _rotation(0.2 * math.pi, 5, 6), "bilinear", mode, 3.0)
    np.testing.assert_allclose(out.numpy()[1], want, atol=1e-6)  # the angle drawn in float32


@pytest.mark.parametrize("mode, np_mode", [("reflect", "symmetric"), ("wrap", "wrap"),
                                           ("nearest", "edge"), ("constant", "constant")])
@pytest.mark.parametrize("dy, dx", [(1, -2), (-3, 3), (2, 0)])
def test_random_translation_whole_pixels_fill_as_numpy_pad(mode, np_mode, dy, dx):
    img = np.random.default_rng(5).uniform(0, 1, (1, 4, 4, 2))
    layer = L.RandomTranslation((dy / 4, dy / 4), (dx / 4, dx / 4), fill_mode=mode)
    out = layer(img, training=True).numpy()[0]
    padded = np.pad(img[0], [(8, 8), (8, 8), (0, 0)], mode=np_mode)
    np.testing.assert_allclose(out, padded[8 - dy:12 - dy, 8 - dx:12 - dx], atol=1e-12)


def test_random_zoom_fixed_factor_is_keras_zoom_matrix():
    img = np.random.default_rng(6).uniform(0, 1, (2, 5, 6, 1))
    out = L.RandomZoom((0.3, 0.3), (-0.2, -0.2), fill_mode="constant")(img, training=True)
    zy, zx = 1.3, 0.8
    t = [zx, 0, 2.5 * (1 - zx), 0, zy, 2.0 * (1 - zy), 0, 0]
    np.testing.assert_allclose(out.numpy()[0], loop_affine(img[0], t, "bilinear", "constant",
                                                           0.0), atol=1e-6)  # float32 draws
    same = L.RandomZoom((-0.5, -0.5), interpolation="nearest")(img, training=True)  # width too
    t = [0.5, 0, 2.5 * 0.5, 0, 0.5, 2.0 * 0.5, 0, 0]
    np.testing.assert_allclose(same.numpy()[1], loop_affine(img[1], t, "nearest", "reflect", 0),
                               atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda s: L.RandomRotation(0.2, seed=s), lambda s: L.RandomZoom(0.3, seed=s),
    lambda s: L.RandomTranslation(0.3, 0.3, seed=s), lambda s: L.RandomFlip(seed=s),
    lambda s: L.RandomContrast(0.5, seed=s), lambda s: L.RandomBrightness(0.3, seed=s),
    lambda s: L.RandomCrop(3, 4, seed=s)])
def test_random_layers_identity_at_inference_seeded_and_fresh_in_functions(make):
    img = np.random.default_rng(7).uniform(0, 255, (8, 5, 6, 3)).astype(np.float32)
    layer = make(1)
    direct = make(2)(img).numpy()  # Keras 3: a call without `training` augments
    if not isinstance(layer, L.RandomCrop):
        assert not np.array_equal(direct, img)
        np.testing.assert_array_equal(layer(img, training=False).numpy(), img)
    a, b = layer(img, training=True).numpy(), layer(img, training=True).numpy()
    assert not np.array_equal(a, b)  # each call draws anew
    twin = make(1)
    np.testing.assert_array_equal(twin(img, training=True).numpy(), a)  # the seed's stream
    unseeded = make(None)
    tg.random.set_seed(3)
    c = unseeded(img, training=True).numpy()
    tg.random.set_seed(3)
    np.testing.assert_array_equal(unseeded(img, training=True).numpy(), c)
    traced = tg.function(lambda x: layer(x, training=True))
    assert not np.array_equal(traced(tg.constant(img)).numpy(), traced(tg.constant(img)).numpy())


def test_random_flip_per_image_and_modes():
    img = np.random.default_rng(8).uniform(0, 1, (64, 3, 4, 1)).astype(np.float32)
    for mode, flip in [("horizontal", lambda a: a[:, ::-1]), ("vertical", lambda a: a[::-1]),
                       ("horizontal_and_vertical", lambda a: a[::-1, ::-1])]:
        out = L.RandomFlip(mode, seed=2)(img, training=True).numpy()
        flipped = [np.array_equal(o, flip(i)) for o, i in zip(out, img)]
        kept = [np.array_equal(o, i) for o, i in zip(out, img)]
        assert all(f or k for f, k in zip(flipped, kept)) and 0 < sum(flipped) < 64
    single = L.RandomFlip("horizontal", seed=0)(img[0], training=True).numpy()
    assert np.array_equal(single, img[0]) or np.array_equal(single, img[0][:, ::-1])
    u8 = L.RandomFlip()(img.astype(np.uint8), training=True)
    assert u8.dtype == tg.float32


def test_random_contrast_and_brightness_per_image_then_clip():
    img = np.random.default_rng(9).uniform(50, 200, (16, 4, 5, 3)).astype(np.float32)
    out = L.RandomContrast(0.5, seed=1)(img, training=True).numpy()
    mean = img.mean(axis=(1, 2), keepdims=True)
    factor = (out - mean) / (img - mean)
    per_image = factor.reshape(16, -1)
    inside = (out > 0) & (out < 255)  # clipped pixels lose the factor
    for f, ok in zip(per_image, inside.reshape(16, -1)):
        assert np.ptp(f[ok]) < 1e-3 and 0.5 <= f[ok][0] <= 1.5
    assert np.ptp(per_image[:, 0]) > 0.05  # one factor per image
    assert out.min() >= 0 and out.max() <= 255
    out = L.RandomBrightness((-0.2, 0.4), value_range=(0, 255), seed=1)(img, training=True)
    delta = (out.numpy() - img).reshape(16, -1)
    unclipped = (out.numpy() < 255).reshape(16, -1)
    for d, ok in zip(delta, unclipped):
        assert np.ptp(d[ok]) < 1e-3 and -0.2 * 255 - 1e-3 <= d[ok][0] <= 0.4 * 255 + 1e-3
    assert out.numpy().max() <= 255


def _smart_resize(img, height, width):
    """Keras' smart_resize: the largest central window with the target aspect ratio."""
    h, w = img.shape[-3], img.shape[-2]
    ch = max(min(h, int(w * height / width)), 1)
    cw = max(min(w, int(h * width / height)), 1)
    top, left = int((h - ch) / 2), int((w - cw) / 2)
    return tg.image.resize(img[..., top:top + ch, left:left + cw, :], [height, width]).numpy()


def test_resizing_center_crop_and_random_crop():
    img = np.random.default_rng(10).uniform(0, 255, (2, 6, 9, 3)).astype(np.float32)
    np.testing.assert_array_equal(L.Resizing(4, 5)(img).numpy(),
                                  tg.image.resize(img, [4, 5]).numpy())
    np.testing.assert_array_equal(L.Resizing(4, 4, crop_to_aspect_ratio=True)(img).numpy(),
                                  _smart_resize(img, 4, 4))
    u8 = img.astype(np.uint8)
    out = L.Resizing(3, 4)(u8)
    assert out.dtype == tg.uint8
    want = np.clip(np.round(tg.image.resize(u8.astype(np.float32), [3, 4]).numpy()), 0, 255)
    np.testing.assert_array_equal(out.numpy(), want.astype(np.uint8))
    np.testing.assert_array_equal(L.CenterCrop(3, 4)(img).numpy(), img[:, 1:4, 2:6])
    np.testing.assert_array_equal(L.CenterCrop(8, 4)(img).numpy(), _smart_resize(img, 8, 4))
    np.testing.assert_array_equal(L.RandomCrop(3, 4)(img, training=False).numpy(),
                                  _smart_resize(img, 3, 4))
    crops = L.RandomCrop(3, 4, seed=0)
    starts = set()
    for _ in range(10):
        out = crops(img, training=True).numpy()
        hits = [(i, j) for i in range(4) for j in range(6)
                if np.array_equal(out, img[:, i:i + 3, j:j + 4])]  # one window for the batch
        assert len(hits) == 1
        starts.add(hits[0])
    assert len(starts) > 2


def test_layer_argument_errors():
    with pytest.raises(ValueError, match="factor"):
        L.RandomRotation(1.5)
    with pytest.raises(ValueError, match="height_factor"):
        L.RandomZoom((0.1, 0.2, 0.3))
    with pytest.raises(ValueError, match="width_factor"):
        L.RandomTranslation(0.1, "0.2")
    with pytest.raises(NotImplementedError, match="fill_mode"):
        L.RandomRotation(0.1, fill_mode="mirror")
    with pytest.raises(NotImplementedError, match="interpolation"):
        L.RandomZoom(0.1, interpolation="bicubic")
    with pytest.raises(ValueError, match="unknown mode"):
        L.RandomFlip("diagonal")
    with pytest.raises(ValueError, match="value_range"):
        L.RandomBrightness(0.1, value_range=(1, 0))
    with pytest.raises(ValueError, match="height must be a positive integer"):
        L.CenterCrop(0, 2)
    with pytest.raises(ValueError, match="rank 3 or 4"):
        L.RandomFlip()(tg.zeros((2, 2)), training=True)


@pytest.mark.parametrize("make", [
    lambda: L.RandomRotation(0.2, seed=0), lambda: L.RandomZoom(0.3, seed=0),
    lambda: L.RandomTranslation(0.3, 0.3, seed=0), lambda: L.RandomFlip(seed=0),
    lambda: L.RandomContrast(0.5, seed=0), lambda: L.RandomBrightness(0.3, seed=0),
    lambda: L.RandomCrop(3, 4, seed=0), lambda: L.CenterCrop(3, 4), lambda: L.Resizing(3, 4)])
def test_layers_keep_float64_and_compute_integers_in_float32(make):
    img = np.random.default_rng(11).uniform(0, 255, (2, 5, 6, 3))
    assert make()(img, training=True).dtype == tg.float64
    layer = make()
    want = tg.uint8 if isinstance(layer, L.Resizing) else tg.float32
    assert layer(img.astype(np.uint8), training=True).dtype == want


def test_augmentation_in_a_model_acts_in_fit_only():
    """The image tutorials' pattern: augmentation layers at the front of a Sequential model."""
    keras = tg.keras
    tg.random.set_seed(0)
    augment = keras.Sequential([L.RandomFlip("horizontal"), L.RandomRotation(0.1),
                                L.RandomZoom(0.1), L.RandomContrast(0.2)])
    model = keras.Sequential([keras.Input(shape=(10, 10, 3)), L.Resizing(8, 8), augment,
                              L.Rescaling(1 / 255), L.Flatten(), L.Dense(2)])
    model.compile(optimizer="sgd",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.default_rng(12).uniform(0, 255, (8, 10, 10, 3)).astype(np.float32)
    y = np.arange(8) % 2
    before = [v.numpy().copy() for v in model.trainable_variables]
    model.fit(x, y, epochs=1, batch_size=4, verbose=0)
    assert any(not np.array_equal(a, v.numpy()) for a, v in zip(before, model.trainable_variables))
    np.testing.assert_array_equal(model.predict(x, verbose=0), model.predict(x, verbose=0))
    inputs = tg.constant(x)
    assert not np.array_equal(augment(inputs, training=True).numpy(),
                              augment(inputs, training=True).numpy())


def test_augmentation_follows_keras_3_training_defaults():
    """As Keras 3: a direct call augments (the image classification tutorial shows
    `data_augmentation(images)`), so does a model called without `training`; `training=False`,
    `predict` and `evaluate` do not; a Dropout in the same model stays off unless training."""
    img = np.random.default_rng(0).random((4, 6, 6, 1)).astype(np.float32)
    flip = L.RandomFlip("horizontal", seed=3)
    assert not np.array_equal(flip(img).numpy(), img)
    np.testing.assert_array_equal(flip(img, training=False).numpy(), img)
    augment = tg.keras.Sequential([L.RandomFlip("horizontal", seed=3),
                                   L.RandomRotation(0.2, seed=4)])
    assert not np.array_equal(augment(img).numpy(), img)
    np.testing.assert_array_equal(augment(img, training=False).numpy(), img)
    model = tg.keras.Sequential([tg.keras.Input((6, 6, 1)), L.RandomFlip("horizontal", seed=5),
                                 tg.keras.layers.Flatten(), tg.keras.layers.Dropout(0.9),
                                 tg.keras.layers.Dense(2)])
    first = model.predict(img, verbose=0)
    np.testing.assert_array_equal(model.predict(img, verbose=0), first)
    np.testing.assert_array_equal(model(img, training=False).numpy(), first)
