"""tg.signal against numpy.fft and TF's documented behaviour; gradients against central
differences of real-valued losses (TF's complex-cotangent convention)."""
import numpy as np
import pytest

import tapegpu as tg

rng = np.random.default_rng(0)


def test_transforms_match_numpy_with_fft_length():
    x = rng.standard_normal((2, 6)).astype(np.float32)
    y = tg.signal.rfft(x)
    assert y.dtype == tg.complex64 and y.shape == (2, 4)
    np.testing.assert_allclose(y.numpy(), np.fft.rfft(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tg.signal.rfft(x, [8]).numpy(), np.fft.rfft(x, 8), atol=1e-5)
    np.testing.assert_allclose(tg.signal.rfft(x, [4]).numpy(), np.fft.rfft(x[:, :4]), atol=1e-5)
    spec = np.fft.rfft(x.astype(np.float64))
    back = tg.signal.irfft(tg.constant(spec))
    assert back.dtype == tg.float64 and back.shape == (2, 6)  # 2 * (4 - 1)
    np.testing.assert_allclose(tg.signal.irfft(tg.constant(spec), [6]).numpy(), x, atol=1e-6)
    np.testing.assert_allclose(tg.signal.rfft2d(x, [3, 5]).numpy(), np.fft.rfft2(x, (3, 5)),
                               atol=1e-5)
    z = np.fft.rfft2(x.astype(np.float64))
    np.testing.assert_allclose(tg.signal.irfft2d(tg.constant(z), [2, 6]).numpy(), x, atol=1e-6)
    with pytest.raises(tg.errors.InvalidArgumentError, match="complex64 or complex128"):
        tg.signal.irfft(x)


def _fd_check(f, x, eps=1e-6):
    x = np.asarray(x, np.float64)
    t = tg.constant(x)
    with tg.GradientTape() as tape:
        tape.watch(t)
        y = f(t)
    g = tape.gradient(y, t).numpy()
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        p, m = x.copy(), x.copy()
        p[i] += eps
        m[i] -= eps
        fd[i] = (float(f(tg.constant(p))) - float(f(tg.constant(m)))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_gradients_of_real_losses():
    w = rng.standard_normal(4)
    v = rng.standard_normal(4)
    _fd_check(lambda t: tg.reduce_sum(tg.math.real(tg.signal.rfft(t)) * w +
                                      tg.math.imag(tg.signal.rfft(t)) * v), rng.standard_normal(6))
    _fd_check(lambda t: tg.reduce_sum(tg.abs(tg.math.imag(tg.signal.rfft(t, [5]))) ** 2),
              rng.standard_normal(7))
    h = rng.standard_normal(6)
    _fd_check(lambda t: tg.reduce_sum(tg.signal.irfft(tg.complex(t[:4], t[4:]), [6]) * h),
              rng.standard_normal(8))
    _fd_check(lambda t: tg.reduce_sum(tg.math.real(tg.signal.rfft2d(tg.reshape(t, (3, 4)))) ** 2),
              rng.standard_normal(12))
    # the backward of the backward: a second derivative
    x = tg.constant(rng.standard_normal(6))
    with tg.GradientTape() as outer:
        outer.watch(x)
        with tg.GradientTape() as inner:
            inner.watch(x)
            y = tg.reduce_sum(tg.math.real(tg.signal.rfft(x)) ** 2)
        g = inner.gradient(y, x)
    hess_sum = outer.gradient(g, x).numpy()  # the Hessian 2 A A^T summed over its rows
    a = np.real(np.fft.rfft(np.eye(6), axis=-1))  # Re(rfft) as a matrix: [6 inputs, 4 freqs]
    np.testing.assert_allclose(hess_sum, (2 * a @ a.T).sum(axis=0), atol=1e-10)


def test_frame_pad_end_and_axis():
    np.testing.assert_array_equal(tg.signal.frame(tg.range(7), 3, 2).numpy(),
                                  [[0, 1, 2], [2, 3, 4], [4, 5, 6]])
    np.testing.assert_array_equal(tg.signal.frame(tg.range(7), 3, 2, pad_end=True,
                                                  pad_value=-1).numpy()[-1], [6, -1, -1])
    x = tg.reshape(tg.range(12), (6, 2))
    out = tg.signal.frame(x, 4, 2, axis=0)
    assert out.shape == (2, 4, 2)
    np.testing.assert_array_equal(out.numpy()[1, :, 1], [5, 7, 9, 11])
    # TF's example: 3 frames of 512 from a 1000-sample signal... of a batch of 3
    assert tg.signal.frame(tg.zeros((3, 1000)), 512, 256).shape == (3, 2, 512)


def test_windows_and_stft():
    np.testing.assert_allclose(tg.signal.hann_window(4).numpy(), [0, 0.5, 1, 0.5], atol=1e-7)
    np.testing.assert_allclose(tg.signal.hann_window(4, periodic=False).numpy(),
                               0.5 - 0.5 * np.cos(2 * np.pi * np.arange(4) / 3), atol=1e-7)
    np.testing.assert_allclose(tg.signal.hann_window(5).numpy(), [0, .5, 1, .5, 0], atol=1e-7)
    assert tg.signal.hann_window(1).numpy().tolist() == [1.0]
    sig = rng.standard_normal(1000).astype(np.float32)
    s = tg.signal.stft(sig, frame_length=200, frame_step=100)
    assert s.shape == (9, 129) and s.dtype == tg.complex64  # fft_length 256
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(200) / 200)
    want = np.fft.rfft(sig[300:500] * win, 256)
    np.testing.assert_allclose(s.numpy()[3], want, rtol=1e-3, atol=1e-3)
