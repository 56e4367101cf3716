"""The C kernels of convolution and max pooling on `numpy` (tapegpu/backends/_cpu.c, called from
tapegpu/ops/conv.py) against the ops' numpy references: strides, dilations, SAME/VALID/explicit
padding, 1-3 spatial dimensions, extra leading axes, empty batches, odd sizes, NaN and ties in
pooling; through the public functions (NHWC and NCHW, groups, gradients) with the kernels on
and off; and the kernels' own argument checks."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.backends import cpu_kernels
from tapegpu.ops import conv

SINGLE_DEVICE = True  # the kernels are the numpy backend's; each test picks its device

pytestmark = pytest.mark.skipif(not conv._CPU_CONV, reason="the C kernels are not built")


def _geometries(nd, count, seed, max_pad=2):
    """Random (spatial, ksize, strides, dilations, pads) with a non-empty output."""
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        spatial = tuple(int(v) for v in rng.integers(1, 8, nd))
        ksize = tuple(int(v) for v in rng.integers(1, 4, nd))
        strides = tuple(int(v) for v in rng.integers(1, 4, nd))
        dilations = tuple(int(v) for v in rng.integers(1, 3, nd))
        pads = tuple((int(lo), int(hi)) for lo, hi in rng.integers(0, max_pad + 1, (nd, 2)))
        out = conv._out_spatial(spatial, ksize, strides, dilations, pads)
        if min(out) > 0:
            found.append((spatial, ksize, strides, dilations, pads))
    return found


CONV_CASES = [(nd, g, lead, dt) for nd in (1, 2, 3)
              for i, g in enumerate(_geometries(nd, 8, nd))
              for lead, dt in [(((2,), np.float32), ((3, 2), np.float64), ((0,), np.float32),
                                ((1,), np.float64))[i % 4]]]


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nd, geom, lead, dtype", CONV_CASES)
def test_conv_kernels_match_the_references(nd, geom, lead, dtype):
    spatial, ksize, strides, dilations, pads = geom
    rng = np.random.default_rng(sum(spatial) + len(lead))
    cin, cout = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    out = conv._out_spatial(spatial, ksize, strides, dilations, pads)
    x = rng.standard_normal(lead + spatial + (cin,)).astype(dtype)
    w = rng.standard_normal(ksize + (cin, cout)).astype(dtype)
    g = rng.standard_normal(lead + out + (cout,)).astype(dtype)
    p = {"strides": strides, "dilations": dilations, "pads": pads}
    pairs = [(conv._cpu_conv(np, x, w, **p), conv._conv_forward(np, x, w, **p)),
             (conv._cpu_conv_input(np, g, w, spatial + (cin,), **p),
              conv._conv_input_forward(np, g, w, spatial + (cin,), **p)),
             (conv._cpu_conv_filter(np, x, g, w.shape, **p),
              conv._conv_filter_forward(np, x, g, w.shape, **p))]
    for got, want in pairs:
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, **_tol(dtype))


def test_conv_kernels_over_many_row_blocks(monkeypatch):
    """Blocks of a few rows (each matmul and im2col/col2im call on its own slice) give the
    result of one block."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 9, 7, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 5, 4)).astype(np.float32)
    p = {"strides": (2, 1), "dilations": (1, 2), "pads": ((1, 1), (2, 0))}
    g = rng.standard_normal(conv._cpu_conv(np, x, w, **p).shape).astype(np.float32)
    whole = [conv._cpu_conv(np, x, w, **p), conv._cpu_conv_input(np, g, w, x.shape[1:], **p),
             conv._cpu_conv_filter(np, x, g, w.shape, **p)]
    monkeypatch.setattr(conv, "_BLOCK_BYTES", 7 * 2 * 5 * 4)  # 7 rows a block
    blocked = [conv._cpu_conv(np, x, w, **p), conv._cpu_conv_input(np, g, w, x.shape[1:], **p),
               conv._cpu_conv_filter(np, x, g, w.shape, **p)]
    for a, b in zip(blocked, whole):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_conv_kernels_leave_what_they_do_not_cover_to_the_reference():
    x = np.ones((1, 4, 4, 4), np.float32)
    p = {"strides": (1, 1), "dilations": (1, 1), "pads": ((0, 0), (0, 0))}
    grouped = np.ones((2, 2, 2, 6), np.float32)  # 2 groups
    assert conv._cpu_conv(np, x, grouped, **p) is NotImplemented
    assert conv._cpu_conv(np, x.astype(np.float16), grouped[:, :, :, :4].repeat(2, 2)
                          .astype(np.float16), **p) is NotImplemented
    assert conv._cpu_conv(np, x, np.ones((2, 2, 4, 3), np.float64), **p) is NotImplemented
    assert conv._cpu_conv(np, x, np.ones((2, 2, 4, 3), np.float32), **p) is not NotImplemented


POOL_CASES = [(nd, g, lead, dt) for nd in (1, 2, 3)
              for i, g in enumerate(_geometries(nd, 8, 10 + nd, max_pad=1))
              for lead, dt in [(((2,), np.float32), ((2, 3), np.float64), ((0,), np.float32),
                                ((1,), np.float64))[i % 4]]]


@pytest.mark.parametrize("nd, geom, lead, dtype", POOL_CASES)
def test_max_pool_kernels_match_the_references(nd, geom, lead, dtype):
    """The same maxima and the same first-maximum taps (ties, NaN, -inf, padding), and the
    same gradient (with an extra batch axis on the cotangent)."""
    spatial, ksize, strides, dilations, pads = geom
    pads = tuple((min(lo, k - 1), min(hi, k - 1)) for (lo, hi), k in zip(pads, ksize))
    if min(conv._out_spatial(spatial, ksize, strides, dilations, pads)) <= 0:
        pytest.skip("no output")
    rng = np.random.default_rng(sum(spatial))
    c = int(rng.integers(1, 6))
    x = rng.integers(-2, 3, lead + spatial + (c,)).astype(dtype)  # many ties
    x[x == 2] = np.nan
    x[x == -2] = -np.inf
    p = {"ksize": ksize, "strides": strides, "dilations": dilations, "pads": pads}
    in_shape = spatial + (c,)
    out, (arg,) = conv._cpu_max_pool(np, x, in_shape, **p)
    want, (want_arg,) = conv._max_pool_forward(np, x, in_shape, **p)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(arg, want_arg)
    g = rng.standard_normal((2,) + out.shape).astype(dtype)
    got = conv._cpu_max_pool_grad(np, arg, g, in_shape, **p)
    np.testing.assert_allclose(got, conv._max_pool_grad_forward(np, want_arg, g, in_shape, **p),
                               **_tol(dtype))


def _net(x, ws, cfirst, strides, padding, dilations):
    """conv -> max_pool -> grouped conv, and the gradients of a weighted sum."""
    fmt = "NCHW" if cfirst else "NHWC"
    xt, vs = tg.constant(x), [tg.constant(w) for w in ws]
    with tg.GradientTape() as tape:
        tape.watch([xt] + vs)
        h = tg.nn.conv2d(xt, vs[0], strides, padding, data_format=fmt, dilations=dilations)
        h = tg.nn.max_pool2d(tg.tanh(h), 2, [1, 1, 1, 2] if cfirst else [1, 1, 2, 1], "SAME",
                             data_format=fmt)
        y = tg.nn.conv2d(h, vs[1], 1, "SAME", data_format=fmt)
        loss = tg.reduce_sum(y * tg.cos(y))
    return [loss.numpy()] + [a.numpy() for a in tape.gradient(loss, [xt] + vs)]


@pytest.mark.parametrize("cfirst", [False, True])
@pytest.mark.parametrize("xs, ks, strides, padding, dilations", [
    ((2, 9, 7, 3), (3, 3), 1, "VALID", 1),
    ((3, 8, 11, 1), (3, 2), 2, "SAME", 1),
    ((1, 10, 9, 2), (2, 3), 1, "SAME", 2),
    ((2, 7, 8, 3), (3, 3), [1, 2], [[0, 0], [2, 1], [0, 3], [0, 0]], 1),
    ((0, 7, 7, 2), (3, 3), 1, "SAME", 1),
])
def test_public_convolutions_with_and_without_the_kernels(monkeypatch, cfirst, xs, ks, strides,
                                                          padding, dilations):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(xs)
    ws = [rng.standard_normal(ks + (xs[-1], 4)), rng.standard_normal((2, 2, 2, 6))]  # 2 groups
    if cfirst:
        x = np.moveaxis(x, -1, 1)
        if not isinstance(padding, str):
            padding = [padding[0], padding[3], padding[1], padding[2]]
    for dtype, tol in ((np.float64, 1e-10), (np.float32, 2e-4)):
        args = (x.astype(dtype), [w.astype(dtype) for w in ws], cfirst, strides, padding,
                dilations)
        with tg.device("cpu"):
            got = _net(*args)
            monkeypatch.setattr(conv, "_CPU_CONV", False)
            want = _net(*args)
            monkeypatch.setattr(conv, "_CPU_CONV", True)
        for a, b in zip(got, want):
            assert a.dtype == dtype
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_the_public_functions_run_the_kernels(monkeypatch):
    calls = []
    for name in ("im2col", "col2im", "max_pool", "max_pool_grad"):
        kernel = getattr(cpu_kernels, name)
        monkeypatch.setattr(cpu_kernels, name,
                            lambda *a, _k=kernel, _n=name: calls.append(_n) or _k(*a))
    x = tg.constant(np.ones((2, 6, 6, 3), np.float32))
    w = tg.constant(np.ones((3, 3, 3, 4), np.float32))
    with tg.device("cpu"), tg.GradientTape() as tape:
        tape.watch([x, w])
        y = tg.reduce_sum(tg.nn.max_pool2d(tg.nn.conv2d(x, w, 1, "SAME"), 2, 2, "VALID"))
    tape.gradient(y, [x, w])
    assert set(calls) == {"im2col", "col2im", "max_pool", "max_pool_grad"}


def _geom(**kw):
    g = dict(c=2, spatial=(4, 4), out=(3, 3), ksize=(2, 2), strides=(1, 1), dilations=(1, 1),
             pads=((0, 0), (0, 0)))
    g.update(kw)
    return conv._geom(g["c"], g["spatial"], g["out"], g["ksize"], g["strides"], g["dilations"],
                      g["pads"])


def test_kernel_argument_checks():
    x = np.zeros((1, 4, 4, 2), np.float32)
    cols = np.zeros((9, 8), np.float32)
    cpu_kernels.im2col(x, cols, _geom(), 0)
    with pytest.raises(ValueError, match="do not fit"):
        cpu_kernels.im2col(x, np.zeros((10, 8), np.float32), _geom(), 0)  # rows past the end
    with pytest.raises(ValueError, match="do not fit"):
        cpu_kernels.col2im(cols, np.zeros((1, 4, 4, 3), np.float32), _geom(), 0)
    with pytest.raises(TypeError, match="float32 or all float64"):
        cpu_kernels.im2col(x, cols.astype(np.float64), _geom(), 0)
    with pytest.raises(ValueError, match="bad geom"):
        cpu_kernels.im2col(x, cols, _geom(strides=(0, 1)), 0)
    with pytest.raises(TypeError, match="19 ints"):
        cpu_kernels.im2col(x, cols, _geom()[:-1], 0)
    arg = np.zeros((1, 3, 3, 2), np.int32)
    out = np.zeros((1, 3, 3, 2), np.float32)
    cpu_kernels.max_pool(x, out, arg, _geom())
    with pytest.raises(TypeError, match="int32"):
        cpu_kernels.max_pool(x, out, arg.astype(np.int64), _geom())
    arg[0, 0, 0, 0] = 4  # a 2x2 window has taps 0..3
    with pytest.raises(ValueError, match="out of range"):
        cpu_kernels.max_pool_grad(arg, out, np.zeros_like(x), _geom())


WINOGRAD_CASES = [  # (x shape, pads, cout): odd and even sizes, padding on one side or both
    ((2, 9, 8, 32), ((0, 0), (0, 0)), 8),
    ((3, 7, 10, 33), ((1, 1), (1, 1)), 16),
    ((1, 4, 5, 40), ((2, 0), (0, 1)), 9),
    ((2, 3, 3, 32), ((1, 2), (2, 1)), 8),
    ((2, 2, 6, 32), ((1, 1), (0, 0)), 12),
    ((2, 3, 5, 7, 32), ((0, 1), (1, 0)), 8),  # two leading axes
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs, pads, cout", WINOGRAD_CASES)
def test_winograd_forward_and_filter_gradient_match_the_references(monkeypatch, xs, pads, cout,
                                                                   dtype):
    rng = np.random.default_rng(xs[1])
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((3, 3, xs[-1], cout)).astype(dtype)
    p = {"strides": (1, 1), "dilations": (1, 1), "pads": pads}
    assert conv._winograd_fits(w.shape, (1, 1), (1, 1))
    g = rng.standard_normal(conv._conv_forward(np, x, w, **p).shape).astype(dtype)
    wants = [conv._conv_forward(np, x, w, **p), conv._conv_filter_forward(np, x, g, w.shape, **p)]
    for one_tile_blocks in (False, True):
        if one_tile_blocks:
            monkeypatch.setattr(conv, "_BLOCK_BYTES", 1)
        gots = [conv._cpu_conv(np, x, w, **p), conv._cpu_conv_filter(np, x, g, w.shape, **p)]
        for got, want in zip(gots, wants):
            assert got.dtype == dtype and got.shape == want.shape
            # float32 rounding relative to the results' scale (sums of many products of order 1)
            tol = {"rtol": 1e-5, "atol": 1e-6 * np.abs(want).max()} if dtype == np.float32 \
                else _tol(dtype)
            np.testing.assert_allclose(got, want, **tol)


def test_winograd_runs_only_where_it_fits(monkeypatch):
    calls = []
    kernel = cpu_kernels.winograd_input
    monkeypatch.setattr(cpu_kernels, "winograd_input", lambda *a: calls.append(1) or kernel(*a))
    x = np.ones((1, 6, 6, 32), np.float32)
    p = {"dilations": (1, 1), "pads": ((0, 0), (0, 0))}
    conv._cpu_conv(np, x, np.ones((3, 3, 32, 8), np.float32), strides=(2, 2), **p)
    conv._cpu_conv(np, x, np.ones((2, 3, 32, 8), np.float32), strides=(1, 1), **p)
    conv._cpu_conv(np, x[..., :16], np.ones((3, 3, 16, 8), np.float32), strides=(1, 1), **p)
    conv._cpu_conv(np, x[:0], np.ones((3, 3, 32, 8), np.float32), strides=(1, 1), **p)
    assert not calls
    conv._cpu_conv(np, x, np.ones((3, 3, 32, 8), np.float32), strides=(1, 1), **p)
    assert len(calls) == 1
    conv._cpu_conv_filter(np, x, np.ones((1, 4, 4, 8), np.float32), (3, 3, 32, 8),
                          strides=(1, 1), **p)
    assert len(calls) == 2


def test_public_conv2d_through_winograd_with_and_without_the_kernels(monkeypatch):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 7, 6, 32)).astype(np.float32)
    w = rng.standard_normal((3, 3, 32, 8)).astype(np.float32)
    outs = []
    for on in (True, False):
        monkeypatch.setattr(conv, "_CPU_CONV", on)
        with tg.device("cpu"):
            wt = tg.constant(w)
            with tg.GradientTape() as tape:
                tape.watch(wt)
                y1 = tg.nn.conv2d(np.moveaxis(x, -1, 1), wt, 1, "SAME", data_format="NCHW")
                y2 = tg.nn.conv2d(x, wt, 1, [[0, 0], [2, 0], [1, 1], [0, 0]])
                loss = tg.reduce_sum(tg.sin(y1)) + tg.reduce_sum(y2 * y2)
            outs.append([y1.numpy(), y2.numpy(), tape.gradient(loss, wt).numpy()])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())


def test_winograd_kernel_argument_checks():
    x = np.zeros((1, 4, 4, 8), np.float32)
    geom = (8, 4, 4, 2, 2, 0, 0, 0)
    cpu_kernels.winograd_input(x, np.zeros((16, 1, 8), np.float32), geom)
    with pytest.raises(ValueError, match="do not fit"):
        cpu_kernels.winograd_input(x, np.zeros((16, 2, 8), np.float32), geom)  # 1 tile only
    with pytest.raises(ValueError, match="do not fit"):
        cpu_kernels.winograd_input(x, np.zeros((16, 1, 4), np.float32), geom)  # not C wide
    with pytest.raises(ValueError, match="do not fit"):
        cpu_kernels.winograd_output(np.zeros((8, 1, 3), np.float32),
                                    np.zeros((1, 2, 2, 3), np.float32), geom)
    cpu_kernels.winograd_grad_output(np.zeros((1, 2, 2, 3), np.float32),
                                     np.zeros((16, 1, 3), np.float32), geom)
    with pytest.raises(ValueError, match="do not fit"):
        cpu_kernels.winograd_grad_output(np.zeros((1, 2, 2, 3), np.float32),
                                         np.zeros((16, 2, 3), np.float32), geom)
    with pytest.raises(ValueError, match="bad wgeom"):
        cpu_kernels.winograd_input(x, np.zeros((16, 1, 8), np.float32), geom[:-1] + (-1,))
