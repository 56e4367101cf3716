"""`tg.signal`: real FFTs, framing and the short-time Fourier transform, as `tf.signal`.

`rfft` / `rfft2d` take a real signal to the non-negative-frequency half of its spectrum
(float32 -> complex64, float64 -> complex128), `irfft` / `irfft2d` invert them; `fft_length`
crops or zero-pads the transformed axes first. Gradients follow TensorFlow's rules for a
complex value z (the cotangent is dL/dRe z + i dL/dIm z):

- rfft: `grad_x[n] = Re(sum_k g_k e^{+2 pi i k n / N})`, the adjoint of the half spectrum
  (the spectrum zero-padded to full length, then N times the inverse FFT);
- irfft: `grad_Y = rfft(g) * mask / N`, mask 1 at the frequencies counted once (0, and N/2 for
  even N) and 2 at the others, which the inverse counts twice (Hermitian symmetry).

Each backward rule is an op of its own whose own gradient is the forward transform again (the
two are adjoint linear maps), so higher derivatives work.

>>> tg.signal.rfft(tg.constant([1.0, 0.0, 0.0, 0.0])).numpy()
array([1.+0.j, 1.+0.j, 1.+0.j], dtype=complex64)
"""
import math
import sys

import numpy as np

from .compat import surface
from .core.dtypes import as_dtype
from .core.tensor import Tensor, Variable, convert_to_tensor
from .ops.registry import InvalidArgumentError, apply1, def_op
from . import ops

__all__ = ["rfft", "irfft", "rfft2d", "irfft2d", "frame", "hann_window", "hamming_window",
           "stft"]


def _complex_of(dtype):
    return np.complex64 if dtype == np.float32 else np.complex128


def _real_of(dtype):
    return np.float32 if dtype == np.complex64 else np.float64


def _fit(xp, x, sizes):
    """`x` cropped or zero-padded at the end of its last len(sizes) axes to `sizes`."""
    rank = len(sizes)
    idx = tuple(slice(0, s) for s in sizes)
    x = x[(Ellipsis,) + idx]
    pad = [(0, 0)] * (x.ndim - rank) + [(0, s - d) for s, d in zip(sizes, x.shape[-rank:])]
    return xp.pad(x, pad) if any(p[1] for p in pad) else x


# -- forward ops ----------------------------------------------------------------------------------

def _rfft_forward(xp, x, lengths, shape):
    axes = tuple(range(-len(lengths), 0))
    out = xp.fft.rfftn(_fit(xp, x, lengths), s=lengths, axes=axes)
    return out.astype(_complex_of(x.dtype))


def _irfft_forward(xp, y, lengths, shape):
    half = lengths[:-1] + (lengths[-1] // 2 + 1,)
    axes = tuple(range(-len(lengths), 0))
    out = xp.fft.irfftn(_fit(xp, y, half), s=lengths, axes=axes)
    return out.astype(_real_of(y.dtype))


def _rfft_adjoint_forward(xp, g, lengths, shape):
    """Re(A^H g) for the half-spectrum map A: g zero-padded to the full spectrum, times the
    inverse FFT scaled by the number of points, then fitted back to the input's axes."""
    full = _fit(xp, g, lengths)
    axes = tuple(range(-len(lengths), 0))
    out = xp.real(xp.fft.ifftn(full, s=lengths, axes=axes)) * float(np.prod(lengths))
    return _fit(xp, out, shape).astype(_real_of(g.dtype))


def _irfft_adjoint_forward(xp, h, lengths, shape):
    """rfft(h) * mask / N fitted to the spectrum's axes (mask: 2 where the inverse counts a
    frequency twice)."""
    axes = tuple(range(-len(lengths), 0))
    spec = xp.fft.rfftn(h, s=lengths, axes=axes)
    n = lengths[-1]
    mask = np.full(n // 2 + 1, 2.0)
    mask[0] = 1.0
    if n % 2 == 0:
        mask[-1] = 1.0
    spec = spec * xp.asarray(mask) / float(np.prod(lengths))
    return _fit(xp, spec, shape).astype(_complex_of(h.dtype))


def _rfft_vjp(ops, g, lengths, shape):
    return ops.op("rfft_adjoint", g, lengths=lengths, shape=shape)


def _rfft_adjoint_vjp(ops, h, lengths, shape):
    half = lengths[:-1] + (lengths[-1] // 2 + 1,)
    return ops.op("rfft", h, lengths=lengths, shape=half)


def _irfft_vjp(ops, g, lengths, shape):
    return ops.op("irfft_adjoint", g, lengths=lengths, shape=shape)


def _irfft_adjoint_vjp(ops, c, lengths, shape):
    return ops.op("irfft", c, lengths=lengths, shape=lengths)


_rfft_op = def_op("rfft", _rfft_forward, vjp=_rfft_vjp, linear=True, batch="broadcast")
_rfft_adjoint_op = def_op("rfft_adjoint", _rfft_adjoint_forward, vjp=_rfft_adjoint_vjp,
                          linear=True, batch="broadcast")
_irfft_op = def_op("irfft", _irfft_forward, vjp=_irfft_vjp, linear=True, batch="broadcast")
_irfft_adjoint_op = def_op("irfft_adjoint", _irfft_adjoint_forward, vjp=_irfft_adjoint_vjp,
                           linear=True, batch="broadcast")


def _tensor(x):
    if isinstance(x, Variable):
        return x._read()
    return x if isinstance(x, Tensor) else convert_to_tensor(x)


def _lengths(fft_length, default, rank, fn):
    if fft_length is None:
        return tuple(default)
    if isinstance(fft_length, Tensor):
        fft_length = fft_length.numpy().tolist()
    lengths = tuple(int(v) for v in np.atleast_1d(fft_length))
    if len(lengths) != rank or any(v < 0 for v in lengths):
        raise InvalidArgumentError(f"{fn}: fft_length must be {rank} non-negative integers, got "
                                   f"{fft_length!r}")
    return lengths


def _real_input(x, fn, rank):
    x = _tensor(x)
    if x._data.dtype.kind in "iub":
        x = ops.cast(x, np.float32)
    if x._data.dtype not in (np.float32, np.float64):
        raise InvalidArgumentError(f"{fn}: input must be float32 or float64, got {x.dtype.name}")
    if x.ndim < rank:
        raise InvalidArgumentError(f"{fn}: input must have rank >= {rank}, got shape {x.shape}")
    return x


def _complex_input(x, fn, rank):
    x = _tensor(x)
    if x._data.dtype not in (np.complex64, np.complex128):
        raise InvalidArgumentError(f"{fn}: input must be complex64 or complex128, got "
                                   f"{x.dtype.name}")
    if x.ndim < rank:
        raise InvalidArgumentError(f"{fn}: input must have rank >= {rank}, got shape {x.shape}")
    return x


def rfft(input_tensor, fft_length=None, name=None):
    """The FFT of a real signal over its last axis, non-negative frequencies only
    (`fft_length // 2 + 1` of them; `fft_length` crops or zero-pads the axis, default its
    length), as tf.signal.rfft.

    >>> tg.signal.rfft(tg.constant([1.0, 2.0, 3.0, 4.0])).numpy()
    array([10.+0.j, -2.+2.j, -2.+0.j], dtype=complex64)
    """
    x = _real_input(input_tensor, "rfft", 1)
    lengths = _lengths(fft_length, x.shape[-1:], 1, "rfft")
    return apply1(_rfft_op, x, {"lengths": lengths, "shape": tuple(x.shape[-1:])})


def rfft2d(input_tensor, fft_length=None, name=None):
    """The 2-D FFT of a real signal over its last two axes, non-negative frequencies of the
    last (`fft_length` crops or zero-pads both), as tf.signal.rfft2d.

    >>> tg.signal.rfft2d(tg.ones((2, 4))).numpy()
    array([[8.+0.j, 0.+0.j, 0.+0.j],
           [0.+0.j, 0.+0.j, 0.+0.j]], dtype=complex64)
    """
    x = _real_input(input_tensor, "rfft2d", 2)
    lengths = _lengths(fft_length, x.shape[-2:], 2, "rfft2d")
    return apply1(_rfft_op, x, {"lengths": lengths, "shape": tuple(x.shape[-2:])})


def irfft(input_tensor, fft_length=None, name=None):
    """The real signal of length `fft_length` (default `2 * (n - 1)` for n frequencies) whose
    half spectrum is `input_tensor`, as tf.signal.irfft.

    >>> tg.signal.irfft(tg.signal.rfft(tg.constant([1.0, 2.0, 3.0, 4.0]))).numpy()
    array([1., 2., 3., 4.], dtype=float32)
    """
    y = _complex_input(input_tensor, "irfft", 1)
    lengths = _lengths(fft_length, (2 * (y.shape[-1] - 1),), 1, "irfft")
    return apply1(_irfft_op, y, {"lengths": lengths, "shape": tuple(y.shape[-1:])})


def irfft2d(input_tensor, fft_length=None, name=None):
    """The inverse of `rfft2d` over the last two axes (default `fft_length`:
    `[m, 2 * (n - 1)]`), as tf.signal.irfft2d.

    >>> x = tg.constant([[1.0, 2.0], [3.0, 4.0]])
    >>> tg.signal.irfft2d(tg.signal.rfft2d(x)).numpy()
    array([[1., 2.],
           [3., 4.]], dtype=float32)
    """
    y = _complex_input(input_tensor, "irfft2d", 2)
    lengths = _lengths(fft_length, (y.shape[-2], 2 * (y.shape[-1] - 1)), 2, "irfft2d")
    return apply1(_irfft_op, y, {"lengths": lengths, "shape": tuple(y.shape[-2:])})


# -- framing and the STFT -------------------------------------------------------------------------

def frame(signal, frame_length, frame_step, pad_end=False, pad_value=0, axis=-1, name=None):
    """Frames of `frame_length` samples every `frame_step` along `axis`: that axis becomes
    [frames, frame_length]; `pad_end` pads the end with `pad_value` so that every sample is in
    a frame, as tf.signal.frame (differentiable).

    >>> tg.signal.frame(tg.range(6), 3, 2).numpy()
    array([[0, 1, 2],
           [2, 3, 4]], dtype=int32)
    """
    x = _tensor(signal)
    if x.ndim == 0:
        raise InvalidArgumentError("frame: signal must have rank >= 1")
    length, step = int(frame_length), int(frame_step)
    if length <= 0 or step <= 0:
        raise InvalidArgumentError(f"frame: frame_length and frame_step must be positive, got "
                                   f"{frame_length} and {frame_step}")
    ax = axis + x.ndim if axis < 0 else axis
    n = x.shape[ax]
    if pad_end:
        frames = -(-n // step)
        total = max((frames - 1) * step + length, n)
        if total > n:
            pad = [[0, 0]] * x.ndim
            pad[ax] = [0, total - n]
            x = ops.pad(x, pad, constant_values=pad_value)
    else:
        frames = max(0, 1 + (n - length) // step) if n >= length else 0
    idx = (np.arange(frames)[:, None] * step + np.arange(length)[None, :]).astype(np.int64)
    return ops.gather(x, idx, axis=ax)


def _raised_cosine(window_length, periodic, dtype, a, b, fn):
    n = int(window_length)
    if n < 0:
        raise InvalidArgumentError(f"{fn}: window_length must be >= 0, got {window_length}")
    npd = np.dtype(np.float32 if dtype is None else as_dtype(dtype).name)
    if npd.kind != "f":
        raise ValueError(f"{fn}: dtype must be a floating point type, got {dtype!r}")
    if n == 1:
        return convert_to_tensor(np.ones(1, npd))
    even = 1 - n % 2
    denom = n + int(bool(periodic)) * even - 1
    k = np.arange(n, dtype=np.float64)
    return convert_to_tensor((a - b * np.cos(2.0 * math.pi * k / denom)).astype(npd))


def hann_window(window_length, periodic=True, dtype=None, name=None):
    """The Hann window `0.5 - 0.5 cos(2 pi n / N)`, N = window_length (periodic, even length)
    or window_length - 1, as tf.signal.hann_window.

    >>> tg.signal.hann_window(4).numpy()
    array([0. , 0.5, 1. , 0.5], dtype=float32)
    """
    return _raised_cosine(window_length, periodic, dtype, 0.5, 0.5, "hann_window")


def hamming_window(window_length, periodic=True, dtype=None, name=None):
    """The Hamming window `0.54 - 0.46 cos(2 pi n / N)`, as tf.signal.hamming_window.

    >>> tg.signal.hamming_window(3, periodic=False).numpy()
    array([0.08, 1.  , 0.08], dtype=float32)
    """
    return _raised_cosine(window_length, periodic, dtype, 0.54, 0.46, "hamming_window")


def stft(signals, frame_length, frame_step, fft_length=None, window_fn=hann_window,
         pad_end=False, name=None):
    """The short-time Fourier transform: `rfft` of the frames of `signals` (last axis) times
    `window_fn(frame_length)`; `fft_length` defaults to the smallest power of 2 >=
    frame_length, as tf.signal.stft. [..., frames, fft_length // 2 + 1], complex.

    >>> tg.signal.stft(tg.zeros([1000]), frame_length=256, frame_step=128).shape
    (6, 129)
    """
    x = _real_input(signals, "stft", 1)
    length = int(frame_length)
    n = 1 << max(0, (length - 1).bit_length()) if fft_length is None else int(fft_length)
    framed = frame(x, length, frame_step, pad_end=pad_end)
    if window_fn is not None:
        framed = framed * ops.cast(window_fn(length, dtype=x.dtype), x.dtype)
    return rfft(framed, [n])


# the names of tf.signal this module lacks are refusals, however it is first imported
surface.hook(sys.modules[__name__], "tf.signal")
