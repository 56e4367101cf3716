"""The input gradient of a 3x3 stride-1 convolution on `numpy` by Winograd F(2x2, 3x3): a
convolution of the output gradient with the flipped filter, padded 2 - lo and 2 - hi
(tapegpu/ops/conv.py, `_winograd_conv_input`), against the op's numpy reference; SAME, VALID and
explicit padding; where it runs and where im2col/col2im stays."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.backends import cpu_kernels
from tapegpu.ops import conv

SINGLE_DEVICE = True  # the kernels are the numpy backend's

pytestmark = pytest.mark.skipif(not conv._CPU_CONV or not hasattr(cpu_kernels, "winograd_input"),
                                reason="the C kernels are not built")

CASES = [  # (input shape, pads, cout): cout is the inner dimension of the gradient's matmuls
    ((2, 14, 14, 32), ((1, 1), (1, 1)), 64),   # SAME
    ((2, 9, 8, 16), ((0, 0), (0, 0)), 32),     # VALID: the output gradient padded 2 and 2
    ((1, 5, 7, 8), ((2, 0), (0, 1)), 33),      # explicit, odd sizes
    ((3, 3, 3, 9), ((1, 2), (2, 1)), 40),
    ((2, 3, 4, 6, 8), ((0, 1), (1, 0)), 32),   # two leading axes
]


def _reference(g, w, in_shape, pads):
    return conv._conv_input_forward(np, g, w, in_shape=in_shape, strides=(1, 1),
                                    dilations=(1, 1), pads=pads)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs, pads, cout", CASES)
def test_winograd_input_gradient_matches_the_reference(monkeypatch, xs, pads, cout, dtype):
    rng = np.random.default_rng(xs[1] * 10 + cout)
    w = rng.standard_normal((3, 3, xs[-1], cout)).astype(dtype)
    out = conv._out_spatial(xs[-3:-1], (3, 3), (1, 1), (1, 1), pads)
    g = rng.standard_normal(xs[:-3] + out + (cout,)).astype(dtype)
    assert conv._winograd_input_fits(w.shape, (1, 1), (1, 1), pads)
    want = _reference(g, w, xs[-3:], pads)
    calls = []
    kernel = cpu_kernels.winograd_input
    monkeypatch.setattr(cpu_kernels, "winograd_input", lambda *a: calls.append(1) or kernel(*a))
    for one_tile_blocks in (False, True):
        if one_tile_blocks:
            monkeypatch.setattr(conv, "_BLOCK_BYTES", 1)
        got = conv._cpu_conv_input(np, g, w, xs[-3:], (1, 1), (1, 1), pads)
        assert got.dtype == dtype and got.shape == want.shape
        tol = {"rtol": 1e-5, "atol": 1e-6 * np.abs(want).max()} if dtype == np.float32 \
            else {"rtol": 1e-12, "atol": 1e-12}
        np.testing.assert_allclose(got, want, **tol)
    assert calls  # the Winograd tiles ran, not im2col/col2im


def test_winograd_input_gradient_runs_only_where_it_fits(monkeypatch):
    calls = []
    kernel = cpu_kernels.winograd_input
    monkeypatch.setattr(cpu_kernels, "winograd_input", lambda *a: calls.append(1) or kernel(*a))
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 3, 8, 32)).astype(np.float32)
    same = ((1, 1), (1, 1))
    for g, wt, in_shape, strides, pads in [
            (np.ones((1, 3, 3, 32), np.float32), w, (6, 6, 8), (2, 2), same),  # stride 2
            (np.ones((1, 5, 5, 32), np.float32), w, (4, 4, 8), (1, 1), ((3, 0), (1, 2))),  # pad 3
            (np.ones((1, 6, 6, 16), np.float32), w[..., :16], (6, 6, 8), (1, 1), same),  # cout 16
            (np.ones((1, 6, 6, 32), np.float32), w[..., :4, :], (6, 6, 4), (1, 1), same)]:  # cin 4
        got = conv._cpu_conv_input(np, g, wt, in_shape, strides, (1, 1), pads)
        want = conv._conv_input_forward(np, g, wt, in_shape=in_shape, strides=strides,
                                        dilations=(1, 1), pads=pads)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert not calls
    conv._cpu_conv_input(np, np.ones((1, 6, 6, 32), np.float32), w, (6, 6, 8), (1, 1), (1, 1),
                         same)
    assert calls


def test_conv2d_same_gradients_with_and_without_the_kernels(monkeypatch):
    """A SAME conv2d's input and filter gradients (second layer of a conv net) through the
    public function: the C kernels' (Winograd forward, filter and input gradients) equal the
    references'."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((3, 10, 9, 32)).astype(np.float32)
    w = (rng.standard_normal((3, 3, 32, 40)) * 0.1).astype(np.float32)
    outs = []
    for on in (True, False):
        monkeypatch.setattr(conv, "_CPU_CONV", on)
        with tg.device("cpu"):
            xt, wt = tg.constant(x), tg.constant(w)
            with tg.GradientTape() as tape:
                tape.watch([xt, wt])
                y = tg.nn.conv2d(xt, wt, 1, "SAME")
                loss = tg.reduce_sum(tg.sin(y))
            outs.append([y.numpy()] + [t.numpy() for t in tape.gradient(loss, [xt, wt])])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())
