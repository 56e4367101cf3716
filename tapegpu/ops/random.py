"""Random tensors. `set_seed` makes the sequence repeatable; an op-level `seed` makes one call
repeatable on its own (as TensorFlow's global and op seeds)."""
import numpy as np

from .. import backends as _backend
from ..core.dtypes import np_dtype
from .registry import InvalidArgumentError
from ..core.tensor import Tensor, _thread

_rng = [np.random.default_rng()]


def set_seed(seed):
    """Seeds tapegpu's random generator.

    >>> tg.random.set_seed(0); a = tg.random.normal((2,)).numpy()
    >>> tg.random.set_seed(0); bool((a == tg.random.normal((2,)).numpy()).all())
    True
    """
    _rng[0] = np.random.default_rng(seed)


def _gen(seed):
    return _rng[0] if seed is None else np.random.default_rng(seed)


def _float_dtype(dtype, op):
    dt = np_dtype(dtype) or np.dtype(np.float32)
    if dt.kind != "f":
        raise InvalidArgumentError(f"{op}: dtype must be floating, got {dt.name}")
    return dt


def _emit(name, draw, device, device_draw=None):
    """The tensor of `draw()` (a host array) on the device, or of `device_draw(dev)` drawn on a
    GPU itself (no upload). Inside a `tg.function` trace the draw becomes a graph node that
    draws again at every call, as TensorFlow's random ops do (not a constant captured once)."""
    dev = device or _backend.current()

    def fresh():
        if dev.xp is np:
            return draw()
        return dev.asarray(draw()) if device_draw is None else device_draw(dev)
    fresh.__name__ = f"random.{name}"
    out = Tensor(fresh(), dev)
    if _thread.tracers:
        _thread.tracers[-1].record_random(fresh, out)
    return out


def normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None, name=None, device=None):
    """Samples from N(mean, stddev^2).

    >>> tg.random.normal((2, 3)).shape
    (2, 3)
    """
    dt = _float_dtype(dtype, "random.normal")
    shape = tuple(shape)
    return _emit("normal", lambda: (_gen(seed).standard_normal(shape, dtype=np.float64) * stddev
                                    + mean).astype(dt), device)


def uniform(shape, minval=0, maxval=None, dtype=None, seed=None, name=None, device=None):
    """Samples uniformly from [minval, maxval) (maxval defaults to 1 for floats).

    >>> float(tg.reduce_max(tg.random.uniform((100,)))) < 1.0
    True
    """
    dt = np_dtype(dtype) or np.dtype(np.float32)
    shape = tuple(shape)
    if dt.kind in "iu":
        if maxval is None:
            raise InvalidArgumentError("random.uniform: integer dtypes need maxval")
        return _emit("uniform", lambda: _gen(seed).integers(minval, maxval, size=shape,
                                                           dtype=dt), device)
    hi = 1.0 if maxval is None else maxval

    def on_device(dev):
        r = _device_gen(dev, seed).random(shape, dtype=dt if dt.itemsize >= 4 else np.float32)
        r = r if (minval, hi) == (0, 1.0) else r * (hi - minval) + minval
        return r.astype(dt, copy=False)
    return _emit("uniform", lambda: _gen(seed).uniform(minval, hi, size=shape).astype(dt),
                 device, on_device)


_device_gens = {}  # backend -> (the host generator that seeded it, its generator)


def _device_gen(dev, seed):
    """A generator on a GPU (CuPy's): a fresh one for an op seed; else one per device, seeded
    from tapegpu's host generator (so set_seed makes its draws repeatable too). Its numbers
    differ from the CPU's for the same seeds, as TensorFlow's do across devices."""
    with dev.context():
        if seed is not None:
            return dev.xp.random.default_rng(seed)
        host, gen = _device_gens.get(dev, (None, None))
        if host is not _rng[0]:
            gen = dev.xp.random.default_rng(int(_rng[0].integers(2**63)))
            _device_gens[dev] = (_rng[0], gen)
        return gen


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None, name=None):
    """N(mean, stddev^2) resampled beyond two standard deviations.

    >>> float(tg.reduce_max(tg.abs(tg.random.truncated_normal((100,))))) <= 2.0
    True
    """
    dt = _float_dtype(dtype, "random.truncated_normal")
    shape = tuple(shape)

    def draw():
        gen = _gen(seed)
        z = gen.standard_normal(shape)
        bad = np.abs(z) > 2
        while bad.any():
            z[bad] = gen.standard_normal(int(bad.sum()))
            bad = np.abs(z) > 2
        return (z * stddev + mean).astype(dt)
    return _emit("truncated_normal", draw, None)
