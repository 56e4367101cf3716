"""Convolution and pooling against direct loops written from TensorFlow's definitions (one
output element at a time, on tiny shapes): SAME/VALID/explicit padding, strides, dilations,
NCHW, groups, depthwise, transpose; second derivatives; TensorFlow's errors."""
import itertools

import numpy as np
import pytest

import tapegpu as tg


def _same_pads(n, k, s, d):
    """TensorFlow's SAME: out = ceil(n / s), the padding split with the extra at the end."""
    out = -(-n // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
    return total // 2, total - total // 2


def _pads(padding, spatial, ksize, strides, dilations):
    if padding == "VALID":
        return [(0, 0)] * len(spatial)
    if padding == "SAME":
        return [_same_pads(n, k, s, d) for n, k, s, d in zip(spatial, ksize, strides, dilations)]
    return [tuple(p) for p in padding[1:-1]]


def loop_conv(x, w, strides, padding, dilations=None):
    """Channels-last convolution, every output element by its own sum (groups from w's shape)."""
    nd = x.ndim - 2
    dilations = dilations or (1,) * nd
    spatial, cin = x.shape[1:-1], x.shape[-1]
    ksize, cin_g, cout = w.shape[:nd], w.shape[-2], w.shape[-1]
    groups = cin // cin_g
    pads = _pads(padding, spatial, ksize, strides, dilations)
    outs = [(n + lo + hi - (k - 1) * d - 1) // s + 1
            for n, (lo, hi), k, s, d in zip(spatial, pads, ksize, strides, dilations)]
    y = np.zeros((x.shape[0], *outs, cout))
    for b, co in itertools.product(range(x.shape[0]), range(cout)):
        g = co // (cout // groups)
        for o in itertools.product(*map(range, outs)):
            acc = 0.0
            for tap in itertools.product(*map(range, ksize)):
                pos = [oi * s + t * d - lo for oi, s, t, d, (lo, _) in
                       zip(o, strides, tap, dilations, pads)]
                if all(0 <= p < n for p, n in zip(pos, spatial)):
                    for ci in range(cin_g):
                        acc += x[(b, *pos, g * cin_g + ci)] * w[(*tap, ci, co)]
            y[(b, *o, co)] = acc
    return y


def loop_pool(x, ksize, strides, padding, kind, dilations=None):
    nd = x.ndim - 2
    dilations = dilations or (1,) * nd
    spatial = x.shape[1:-1]
    pads = _pads(padding, spatial, ksize, strides, dilations)
    outs = [(n + lo + hi - (k - 1) * d - 1) // s + 1
            for n, (lo, hi), k, s, d in zip(spatial, pads, ksize, strides, dilations)]
    y = np.zeros((x.shape[0], *outs, x.shape[-1]))
    for b, c in itertools.product(range(x.shape[0]), range(x.shape[-1])):
        for o in itertools.product(*map(range, outs)):
            vals = []
            for tap in itertools.product(*map(range, ksize)):
                pos = [oi * s + t * d - lo for oi, s, t, d, (lo, _) in
                       zip(o, strides, tap, dilations, pads)]
                if all(0 <= p < n for p, n in zip(pos, spatial)):
                    vals.append(x[(b, *pos, c)])
            y[(b, *o, c)] = max(vals) if kind == "MAX" else sum(vals) / len(vals)
    return y


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


CONV2D_CASES = [  # (x shape, w shape, strides, padding, dilations)
    ((2, 5, 5, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1)),
    ((2, 5, 5, 3), (3, 3, 3, 4), (1, 1), "VALID", (1, 1)),
    ((1, 7, 6, 2), (3, 2, 2, 3), (2, 3), "SAME", (1, 1)),
    ((1, 8, 7, 2), (2, 3, 2, 2), (3, 2), "VALID", (1, 1)),
    ((1, 7, 7, 2), (3, 3, 2, 2), (1, 1), "SAME", (2, 3)),
    ((1, 6, 5, 4), (2, 2, 2, 6), (1, 2), "SAME", (1, 1)),  # groups = 2
    ((1, 5, 5, 3), (3, 3, 1, 3), (2, 2), "VALID", (1, 1)),  # groups = 3 (depthwise-like)
    ((1, 5, 4, 2), (3, 3, 2, 2), (2, 1), [[0, 0], [2, 1], [0, 3], [0, 0]], (1, 1)),
]


@pytest.mark.parametrize("xs, ws, strides, padding, dil", CONV2D_CASES)
def test_conv2d_matches_the_loops(xs, ws, strides, padding, dil):
    x, w = _rand(*xs), _rand(*ws, seed=1)
    got = tg.nn.conv2d(x, w, strides, padding, dilations=dil).numpy()
    np.testing.assert_allclose(got, loop_conv(x, w, strides, padding, dil), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("xs, ws, strides, padding, dil", CONV2D_CASES[:6])
def test_conv2d_nchw_is_nhwc_transposed(xs, ws, strides, padding, dil):
    x, w = _rand(*xs), _rand(*ws, seed=1)
    got = tg.nn.conv2d(np.moveaxis(x, -1, 1), w, [1, 1, *strides], padding, data_format="NCHW",
                       dilations=[1, 1, *dil]).numpy()
    np.testing.assert_allclose(np.moveaxis(got, 1, -1), loop_conv(x, w, strides, padding, dil),
                               rtol=1e-12, atol=1e-12)


def test_conv1d_and_conv3d_match_the_loops():
    x, w = _rand(2, 9, 3), _rand(3, 3, 2, seed=1)
    np.testing.assert_allclose(tg.nn.conv1d(x, w, 2, "SAME").numpy(),
                               loop_conv(x, w, (2,), "SAME"), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tg.nn.conv1d(np.moveaxis(x, -1, 1), w, 1, "VALID", "NCW",
                                            dilations=2).numpy(),
                               np.moveaxis(loop_conv(x, w, (1,), "VALID", (2,)), -1, 1),
                               rtol=1e-12, atol=1e-12)
    x, w = _rand(1, 4, 5, 3, 2), _rand(2, 3, 2, 2, 3, seed=1)
    np.testing.assert_allclose(tg.nn.conv3d(x, w, [1, 2, 1, 2, 1], "SAME").numpy(),
                               loop_conv(x, w, (2, 1, 2), "SAME"), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tg.nn.convolution(x, w, padding="VALID").numpy(),
                               loop_conv(x, w, (1, 1, 1), "VALID"), rtol=1e-12, atol=1e-12)


def test_depthwise_conv2d_matches_the_loops():
    x, w = _rand(2, 5, 4, 3), _rand(2, 3, 3, 2, seed=1)
    got = tg.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME").numpy()
    want = np.concatenate([loop_conv(x[..., c:c + 1], w[:, :, c:c + 1, :], (2, 2), "SAME")
                           for c in range(3)], axis=-1)  # channel c * multiplier + m
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("out, strides, padding", [
    ((2, 6, 5, 3), (2, 2), "SAME"), ((2, 7, 6, 3), (2, 2), "VALID"), ((2, 4, 4, 3), (1, 1), "SAME"),
    ((2, 6, 5, 3), (2, 2), [[0, 0], [1, 1], [0, 2], [0, 0]])])
def test_conv2d_transpose_is_the_transpose_of_conv2d(out, strides, padding):
    """<conv2d(y, w), g> = <y, conv2d_transpose(g, w)> for every y: checked on a basis of y."""
    w = _rand(3, 3, 3, 2, seed=1)
    y0 = np.zeros(out)
    gshape = loop_conv(y0, w, strides, padding).shape
    g = _rand(*gshape, seed=2)
    got = tg.nn.conv2d_transpose(g, w, out, strides, padding).numpy()
    want = np.zeros(out)
    for i in np.ndindex(*out):
        e = np.zeros(out)
        e[i] = 1.0
        want[i] = (loop_conv(e, w, strides, padding) * g).sum()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    nchw = tg.nn.conv2d_transpose(np.moveaxis(g, -1, 1), w, (out[0], out[3]) + out[1:3],
                                  strides, padding if isinstance(padding, str) else
                                  [padding[0], padding[3], padding[1], padding[2]],
                                  data_format="NCHW")
    np.testing.assert_allclose(np.moveaxis(nchw.numpy(), 1, -1), want, rtol=1e-12, atol=1e-12)


def test_conv2d_gradients_match_the_loops():
    """The filter gradient and the input gradient, element by element, by linearity."""
    x, w = _rand(1, 5, 4, 2), _rand(3, 2, 2, 2, seed=1)
    u = _rand(*loop_conv(x, w, (2, 1), "SAME").shape, seed=2)
    xt, wt = tg.constant(x), tg.constant(w)
    with tg.GradientTape() as tape:
        tape.watch([xt, wt])
        y = tg.nn.conv2d(xt, wt, [2, 1], "SAME")
    gx, gw = tape.gradient(y, [xt, wt], output_gradients=u)
    for a, grad, other, place in ((x, gw, w, 1), (w, gx, x, 0)):
        want = np.zeros(other.shape)
        for i in np.ndindex(*other.shape):
            e = np.zeros(other.shape)
            e[i] = 1.0
            args = (e, a) if place == 0 else (a, e)
            want[i] = (loop_conv(*args, (2, 1), "SAME") * u).sum()
        np.testing.assert_allclose(grad.numpy(), want, rtol=1e-12, atol=1e-12)


def test_second_derivatives_of_a_conv_net():
    """d/dw of |d loss / dx|^2 (a gradient penalty) against central differences."""
    x, w1, w2 = _rand(2, 6, 6, 2), _rand(3, 3, 2, 3, seed=1), _rand(2, 2, 3, 2, seed=2)
    xt, w2t = tg.constant(x), tg.constant(w2)

    def penalty(w1v):
        w1t = tg.constant(w1v)
        with tg.GradientTape() as outer:
            outer.watch(w1t)
            with tg.GradientTape() as inner:
                inner.watch(xt)
                h = tg.nn.max_pool2d(tg.tanh(tg.nn.conv2d(xt, w1t, 1, "SAME")), 2, 2, "VALID")
                h = tg.nn.avg_pool2d(h, 2, 1, "SAME")
                loss = tg.reduce_sum(tg.square(tg.nn.conv2d(h, w2t, 1, "VALID")))
            gx = inner.gradient(loss, xt)
            p = tg.reduce_sum(gx * gx)
        return float(p), outer.gradient(p, w1t).numpy()

    _, grad = penalty(w1)
    v = _rand(*w1.shape, seed=5)
    h = 1e-6
    fd = (penalty(w1 + h * v)[0] - penalty(w1 - h * v)[0]) / (2 * h)
    assert float((grad * v).sum()) == pytest.approx(fd, rel=1e-6)


POOL_CASES = [  # (x shape, ksize, strides, padding)
    ((2, 5, 5, 3), (2, 2), (2, 2), "SAME"),
    ((2, 5, 5, 3), (3, 3), (2, 2), "SAME"),
    ((1, 6, 7, 2), (3, 2), (1, 3), "VALID"),
    ((1, 6, 7, 2), (2, 3), (3, 1), "SAME"),
]


@pytest.mark.parametrize("kind", ["MAX", "AVG"])
@pytest.mark.parametrize("xs, ksize, strides, padding", POOL_CASES)
def test_pool2d_matches_the_loops(xs, ksize, strides, padding, kind):
    x = _rand(*xs)
    fn = tg.nn.max_pool2d if kind == "MAX" else tg.nn.avg_pool2d
    want = loop_pool(x, ksize, strides, padding, kind)
    np.testing.assert_allclose(fn(x, ksize, strides, padding).numpy(), want, rtol=1e-12,
                               atol=1e-15)
    nchw = fn(np.moveaxis(x, -1, 1), [1, 1, *ksize], [1, 1, *strides], padding, "NCHW")
    np.testing.assert_allclose(np.moveaxis(nchw.numpy(), 1, -1), want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(tg.nn.pool(x, ksize, kind, strides, padding).numpy(), want,
                               rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kind", ["MAX", "AVG"])
def test_pool_1d_3d_and_dilations_match_the_loops(kind):
    x = _rand(2, 7, 3)
    one = tg.nn.max_pool1d if kind == "MAX" else tg.nn.avg_pool1d
    np.testing.assert_allclose(one(x, 3, 2, "SAME").numpy(), loop_pool(x, (3,), (2,), "SAME", kind),
                               rtol=1e-12)
    x3 = _rand(1, 4, 5, 3, 2)
    three = tg.nn.max_pool3d if kind == "MAX" else tg.nn.avg_pool3d
    np.testing.assert_allclose(three(x3, [2, 3, 2], 2, "SAME").numpy(),
                               loop_pool(x3, (2, 3, 2), (2, 2, 2), "SAME", kind), rtol=1e-12)
    gen = tg.nn.max_pool if kind == "MAX" else tg.nn.avg_pool
    np.testing.assert_allclose(gen(x3, 2, 1, "VALID").numpy(),
                               loop_pool(x3, (2, 2, 2), (1, 1, 1), "VALID", kind), rtol=1e-12)
    x2 = _rand(1, 7, 6, 2)
    np.testing.assert_allclose(tg.nn.pool(x2, [2, 3], kind, padding="SAME",
                                          dilations=[3, 2]).numpy(),
                               loop_pool(x2, (2, 3), (1, 1), "SAME", kind, (3, 2)), rtol=1e-12)


def test_avg_pool_same_divides_by_the_valid_elements():
    x = tg.ones((1, 3, 3, 1))
    np.testing.assert_array_equal(tg.nn.avg_pool2d(x, 2, 2, "SAME").numpy(), np.ones((1, 2, 2, 1)))
    # values from tf.nn.avg_pool2d(tf.reshape(tf.range(9.), (1, 3, 3, 1)), 2, 2, "SAME")
    y = tg.nn.avg_pool2d(tg.reshape(tg.range(9.0), (1, 3, 3, 1)), 2, 2, "SAME")
    np.testing.assert_array_equal(y.numpy()[0, :, :, 0], [[2.0, 3.5], [6.5, 8.0]])


def test_max_pool_gradient_goes_to_the_first_maximum_of_a_window():
    x = tg.constant([[[[1.0], [1.0]], [[1.0], [0.0]]]])  # a 2x2 window with three ties
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.nn.max_pool2d(x, 2, 2, "VALID")
    np.testing.assert_array_equal(tape.gradient(y, x).numpy()[0, :, :, 0], [[1.0, 0.0],
                                                                            [0.0, 0.0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("c_kernels", [True, False])
def test_a_nan_anywhere_in_a_window_is_its_maximum_and_takes_its_gradient(
        dtype, c_kernels, monkeypatch):
    """Any NaN wins its window (the first NaN takes the gradient), in any position, after
    padding, in the C kernel and the reference alike. TensorFlow 2.21 skips it: its max of
    [NaN, 1] is 1, of [2, NaN] is 2."""
    from tapegpu.ops import conv
    if not c_kernels:
        monkeypatch.setattr(conv, "_CPU_CONV", False)
    nan = np.nan
    x = np.array([nan, 1, 2, nan, 0, 3, nan, nan, -np.inf, 5], dtype).reshape(1, 10, 1)
    xt = tg.constant(x)
    with tg.GradientTape() as tape:
        tape.watch(xt)
        y = tg.nn.max_pool1d(xt, 2, 2, "VALID")  # [nan,1] [2,nan] [0,3] [nan,nan] [-inf,5]
        s = tg.reduce_sum(y * tg.constant(np.arange(1, 6, dtype=dtype).reshape(1, 5, 1)))
    assert y.dtype == dtype
    np.testing.assert_array_equal(y.numpy().ravel(), [nan, nan, 3, nan, 5])
    np.testing.assert_array_equal(tape.gradient(s, xt).numpy().ravel(),
                                  [1, 0, 0, 2, 0, 3, 4, 0, 0, 5])
    padded = tg.nn.max_pool1d(tg.constant(np.array([nan, 1, 2], dtype).reshape(1, 3, 1)), 3, 1,
                              "SAME")  # windows [pad, nan, 1], [nan, 1, 2], [1, 2, pad]
    np.testing.assert_array_equal(padded.numpy().ravel(), [nan, nan, 2])


def test_overlapping_max_pool_gradient_adds_up():
    x = tg.constant(np.array([0.0, 3.0, 1.0, 2.0]).reshape(1, 4, 1))
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.nn.max_pool1d(x, 3, 1, "SAME")  # windows [0,3], [0,3,1], [3,1,2], [1,2]
    np.testing.assert_array_equal(tape.gradient(y, x).numpy().ravel(), [0.0, 3.0, 0.0, 1.0])


def test_integer_max_pool():
    x = tg.constant(np.arange(16, dtype=np.int32).reshape(1, 4, 4, 1))
    y = tg.nn.max_pool2d(x, 2, 2, "SAME")
    assert y.dtype == tg.int32
    np.testing.assert_array_equal(y.numpy()[0, :, :, 0], [[5, 7], [13, 15]])


def test_conv_layers_keep_float32():
    x, w = tg.ones((1, 5, 5, 2)), tg.ones((3, 3, 2, 4))
    with tg.GradientTape() as tape:
        tape.watch(w)
        y = tg.nn.max_pool2d(tg.nn.conv2d(x, w, 1, "SAME"), 2, 2, "SAME")
    assert y.dtype == tg.float32 and tape.gradient(y, w).dtype == tg.float32


# -- errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda: tg.nn.conv2d(tg.ones((1, 4, 4, 3)), tg.ones((3, 3, 2, 4)), 1, "SAME"),
     r"conv2d: input depth must be evenly divisible by filter depth: 3 vs 2"),
    (lambda: tg.nn.conv2d(tg.ones((1, 4, 4, 4)), tg.ones((3, 3, 2, 3)), 1, "SAME"),
     r"conv2d: output depth must be evenly divisible by number of groups: 3 vs 2"),
    (lambda: tg.nn.conv2d(tg.ones((4, 4, 3)), tg.ones((3, 3, 3, 4)), 1, "SAME"),
     r"conv2d: input must have rank 4, got shape \(4, 4, 3\)"),
    (lambda: tg.nn.conv2d(tg.ones((1, 4, 4, 3)), tg.ones((3, 3, 3)), 1, "SAME"),
     r"conv2d: filters must have rank 4"),
    (lambda: tg.nn.conv2d(tg.ones((1, 4, 4, 3)), tg.ones((3, 3, 3, 4)), 1, "same"),
     r"conv2d: padding must be 'SAME', 'VALID' or a list of pairs, got 'same'"),
    (lambda: tg.nn.conv2d(tg.ones((1, 2, 2, 3)), tg.ones((3, 3, 3, 4)), 1, "VALID"),
     r"conv2d: computed output size would be negative"),
    (lambda: tg.nn.conv2d(tg.ones((1, 4, 4, 3)), tg.ones((3, 3, 3, 4)), [1, 2, 2], "SAME"),
     r"conv2d: strides should be of length 1, 2 or 4 but was 3"),
    (lambda: tg.nn.conv2d(tg.ones((1, 4, 4, 3)), tg.ones((3, 3, 3, 4)), [2, 1, 1, 1], "SAME"),
     r"conv2d: strides \[2, 1, 1, 1\] must be 1 in the batch and channel dimensions"),
    (lambda: tg.nn.conv2d(tg.ones((1, 4, 4, 3)), tg.ones((3, 3, 3, 4)), 1,
                          [[0, 0], [1, 1], [1, 1]]),
     r"conv2d: explicit padding must be a list of 4 \[before, after\] pairs"),
    (lambda: tg.nn.conv2d(tg.ones((1, 4, 4, 3)), tg.ones((3, 3, 3, 4)), 1,
                          [[0, 0], [1, 1], [1, 1], [1, 0]]),
     r"conv2d: explicit padding of the batch and channel dimensions must be \[0, 0\]"),
    (lambda: tg.nn.conv2d(tg.ones((1, 4, 4, 3)), tg.ones((3, 3, 3, 4)), 1, "SAME",
                          data_format="NWHC"),
     r"conv2d: data_format must be 'NHWC' or 'NCHW', got 'NWHC'"),
    (lambda: tg.nn.conv2d(tg.ones((1, 4, 4, 3)), tg.ones((3, 3, 3, 4), dtype=tg.float64), 1,
                          "SAME"),
     r"conv2d: input \(float32\) and filters \(float64\) must have the same dtype"),
    (lambda: tg.nn.conv2d(tg.ones((1, 4, 4, 3), dtype=tg.int32), tg.ones((3, 3, 3, 4)), 1,
                          "SAME"), r"conv2d: expected a floating tensor"),
    (lambda: tg.nn.conv1d(tg.ones((1, 4, 3)), tg.ones((2, 3, 4)), 0, "SAME"),
     r"conv1d: strides must be positive"),
    (lambda: tg.nn.conv3d(tg.ones((1, 4, 4, 3)), tg.ones((2, 2, 2, 3, 4)), 1, "SAME"),
     r"conv3d: input must have rank 5"),
    (lambda: tg.nn.convolution(tg.ones((4, 3)), tg.ones((2, 3, 4))),
     r"convolution: input must have rank 3, 4 or 5"),
    (lambda: tg.nn.conv2d_transpose(tg.ones((1, 2, 2, 3)), tg.ones((3, 3, 2, 3)), [1, 5, 5, 2],
                                    2, "SAME"),
     r"conv2d_transpose: output_shape \[1, 5, 5, 2\] is inconsistent with input"),
    (lambda: tg.nn.conv2d_transpose(tg.ones((1, 2, 2, 3)), tg.ones((3, 3, 2, 4)), [1, 4, 4, 2],
                                    2), r"conv2d_transpose: filters \(3, 3, 2, 4\) must have"),
    (lambda: tg.nn.conv2d_transpose(tg.ones((1, 2, 2, 3)), tg.ones((3, 3, 2, 3)), [1, 4, 4],
                                    2), r"conv2d_transpose: output_shape must have 4 elements"),
    (lambda: tg.nn.depthwise_conv2d(tg.ones((1, 4, 4, 3)), tg.ones((2, 2, 2, 1)), [1, 1, 1, 1],
                                    "SAME"), r"depthwise_conv2d: filter \(2, 2, 2, 1\) must have"),
    (lambda: tg.nn.max_pool2d(tg.ones((1, 4, 4)), 2, 2, "SAME"),
     r"max_pool2d: input must have rank 4, got shape \(1, 4, 4\)"),
    (lambda: tg.nn.max_pool2d(tg.ones((1, 4, 4, 1)), [2, 2, 2], 2, "SAME"),
     r"max_pool2d: ksize should be of length 1, 2 or 4 but was 3"),
    (lambda: tg.nn.avg_pool2d(tg.ones((1, 4, 4, 1)), 2, 2, [[0, 0], [1, 1], [1, 1], [0, 0]]),
     r"avg_pool2d: padding must be 'SAME' or 'VALID'"),
    (lambda: tg.nn.avg_pool2d(tg.ones((1, 4, 4, 1), dtype=tg.int32), 2, 2, "SAME"),
     r"avg_pool2d: expected a floating tensor"),
    (lambda: tg.nn.max_pool3d(tg.ones((1, 1, 4, 4, 1)), 2, 1, "VALID"),
     r"max_pool3d: computed output size would be negative"),
    (lambda: tg.nn.pool(tg.ones((1, 4, 4, 1)), [2, 2], "MIN"),
     r"pool: pooling_type must be 'MAX' or 'AVG', got 'MIN'"),
    (lambda: tg.nn.pool(tg.ones((1, 4, 4, 1)), [2], "MAX"),
     r"pool: window_shape \[2\] must have 2 elements"),
    (lambda: tg.nn.pool(tg.ones((1, 4, 4, 1)), [2, 2], "MAX", strides=2, dilations=2),
     r"pool: strides \[2, 2\] > 1 not supported in conjunction with dilations"),
])
def test_errors_name_the_function(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_shape_errors_are_invalid_argument_errors():
    with pytest.raises(tg.InvalidArgumentError):
        tg.nn.conv2d(tg.ones((1, 4, 4, 3)), tg.ones((3, 3, 2, 4)), 1, "SAME")
