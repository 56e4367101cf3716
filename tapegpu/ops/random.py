"""Random tensors, with TensorFlow's global and op seeds: `set_seed` makes the sequence of every
op repeatable; an op-level `seed` gives that op (by name and seed) its own stream, which every
call, eager or a `tg.function`'s replay, advances (so `dropout(x, 0.5, seed=1)` draws a new mask
per step, as TensorFlow's kernels' counters do) and `set_seed` restarts. The numbers are not
TensorFlow's (numpy's and CuPy's generators, not Philox)."""
import zlib

import numpy as np

from .. import backends as _backend
from ..core.dtypes import np_dtype
from .registry import InvalidArgumentError
from ..core.tensor import Tensor, _thread
from ._base import public, tensor
from .reduce import argmax
from .shape import expand_dims, gather

_rng = [np.random.default_rng()]
_global_seed = [None]
_DEFAULT_GLOBAL_SEED = 87654321  # TensorFlow's, used with an op seed when set_seed was not called
_streams = {}  # (device or None, op name, op seed) -> its generator, until the next set_seed


def set_seed(seed):
    """Seeds tapegpu's random generator and restarts the stream of every op seed (TensorFlow's
    global seed).

    >>> tg.random.set_seed(0); a = tg.random.normal((2,)).numpy()
    >>> tg.random.set_seed(0); bool((a == tg.random.normal((2,)).numpy()).all())
    True
    """
    _rng[0] = np.random.default_rng(seed)
    _global_seed[0] = None if seed is None else int(seed)
    _streams.clear()


def _gen(seed, op=None):
    """The host generator for `op` with op seed `seed` (None: the global one)."""
    return _rng[0] if seed is None else _stream(None, op, seed, np.random.default_rng)


def _stream(dev, op, seed, make):
    key = (dev, op, int(seed))
    gen = _streams.get(key)
    if gen is None:
        first = _DEFAULT_GLOBAL_SEED if _global_seed[0] is None else _global_seed[0]
        entropy = np.random.SeedSequence([first & 0xFFFFFFFFFFFFFFFF, int(seed) & 0xFFFFFFFFFFFFFFFF,
                                          zlib.crc32(op.encode())])
        gen = _streams[key] = make(int(entropy.generate_state(1, np.uint64)[0]))
    return gen


def _float_dtype(dtype, op):
    dt = np_dtype(dtype) or np.dtype(np.float32)
    if dt.kind not in "fV":  # V: bfloat16
        raise InvalidArgumentError(f"{op}: dtype must be floating, got {dt.name}")
    return dt


def _is_tensor(value):
    return isinstance(value, Tensor) or hasattr(value, "assign")


def _param(value, like, op):
    """A distribution's parameter as a tensor of the draw's dtype and device (TF converts it
    to that dtype; a tensor of another dtype is refused, as TF does)."""
    if not _is_tensor(value):
        return Tensor(like._dev.xp.asarray(value, dtype=like._data.dtype), like._dev)
    t = tensor(value)
    if t._data.dtype != like._data.dtype:
        raise InvalidArgumentError(f"{op}: a parameter of dtype {t.dtype.name} cannot "
                                   f"parametrise a draw of dtype {like.dtype.name}")
    return t


def _scaled(unit, scale, shift, op):
    """unit * scale + shift for tensor parameters: ops, as TF builds them, so that in a
    tg.function each call uses its own parameters (and they get gradients)."""
    return unit * _param(scale, unit, op) + _param(shift, unit, op)


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
    if _is_tensor(mean) or _is_tensor(stddev):
        return _scaled(normal(shape, dtype=dt, seed=seed, device=device), stddev, mean,
                       "random.normal")
    return _emit("normal", lambda: (_gen(seed, "normal").standard_normal(shape, dtype=np.float64) * stddev
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
        return _emit("uniform", lambda: _gen(seed, "uniform").integers(minval, maxval, size=shape,
                                                           dtype=dt), device)
    hi = 1.0 if maxval is None else maxval
    if _is_tensor(minval) or _is_tensor(hi):
        unit = uniform(shape, dtype=dt, seed=seed, device=device)
        lo, hi = _param(minval, unit, "random.uniform"), _param(hi, unit, "random.uniform")
        return _scaled(unit, hi - lo, lo, "random.uniform")

    def on_device(dev):
        r = _device_gen(dev, seed, "uniform").random(shape, dtype=dt if dt.itemsize >= 4 else np.float32)
        r = r if (minval, hi) == (0, 1.0) else r * (hi - minval) + minval
        return r.astype(dt, copy=False)
    return _emit("uniform", lambda: _gen(seed, "uniform").uniform(minval, hi, size=shape).astype(dt),
                 device, on_device)


_device_gens = {}  # backend -> (the host generator that seeded it, its generator)


def _device_gen(dev, seed, op):
    """A generator on a GPU (CuPy's): the op seed's stream on this device; else one per device, seeded
    from tapegpu's host generator (so set_seed makes its draws repeatable too). Its numbers
    differ from the CPU's for the same seeds, as TensorFlow's do across devices."""
    with dev.context():
        if seed is not None:
            return _stream(dev, op, seed, dev.xp.random.default_rng)
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
    if _is_tensor(mean) or _is_tensor(stddev):
        return _scaled(truncated_normal(shape, dtype=dt, seed=seed), stddev, mean,
                       "random.truncated_normal")

    def draw():
        return _truncated_draw(_gen(seed, "truncated_normal"), shape, mean, stddev, dt)
    return _emit("truncated_normal", draw, None)



def seeded_uniform(seed):
    """For a layer's `seed=`: None, or `draw(shape, dtype, device)`, floats in [0, 1) from the
    layer's own generator, which every call advances (also every call of a `tg.function`: the
    draw is a graph node), so two layers with one seed draw the same sequence, as Keras' seed
    generators."""
    if seed is None:
        return None
    gen = np.random.default_rng(int(seed) & 0xFFFFFFFFFFFFFFFF)

    def draw(shape, dtype, device):
        dt = np_dtype(dtype)
        return _emit("uniform", lambda: _uniform_draw(gen, shape, 0.0, 1.0, dt, "dropout"),
                     device)
    return draw


def seeded_normal(seed):
    """As `seeded_uniform`, for normal numbers: None, or `draw(shape, dtype, device)`, samples of
    N(0, 1) from the layer's own generator (Keras' GaussianNoise and GaussianDropout)."""
    if seed is None:
        return None
    gen = np.random.default_rng(int(seed) & 0xFFFFFFFFFFFFFFFF)

    def draw(shape, dtype, device):
        dt = np_dtype(dtype)
        return _emit("normal", lambda: _normal_draw(gen, shape, 0.0, 1.0, dt), device)
    return draw


# -- draws shared by the functions and Generator ---------------------------------------------------

def _normal_draw(gen, shape, mean, stddev, dt):
    return (gen.standard_normal(shape, dtype=np.float64) * stddev + mean).astype(dt)


def _uniform_draw(gen, shape, minval, maxval, dt, op):
    if dt.kind in "iu":
        if minval is None and maxval is None:  # the dtype's full range
            info = np.iinfo(dt)
            return gen.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
        if minval is None or maxval is None:
            raise InvalidArgumentError(f"{op}: for integer dtypes give both minval and maxval, "
                                       f"or neither (the full range)")
        return gen.integers(minval, maxval, size=shape, dtype=dt)
    if dt.kind not in "fV":  # V: bfloat16
        raise InvalidArgumentError(f"{op}: dtype must be floating or integer, got {dt.name}")
    lo = 0.0 if minval is None else minval
    hi = 1.0 if maxval is None else maxval
    return gen.uniform(lo, hi, size=shape).astype(dt)


def _truncated_draw(gen, shape, mean, stddev, dt):
    z = gen.standard_normal(shape)
    bad = np.abs(z) > 2
    while bad.any():
        z[bad] = gen.standard_normal(int(bad.sum()))
        bad = np.abs(z) > 2
    return (z * stddev + mean).astype(dt)


def _shape(shape):
    if isinstance(shape, Tensor):
        shape = shape.numpy().tolist()
    return tuple(int(n) for n in shape)


# -- shuffle, categorical ----------------------------------------------------------------------

def shuffle(value, seed=None, name=None):
    """`value` with its first axis in a random order, as `tf.random.shuffle` (a gather: the
    gradient goes back to where each slice came from).

    >>> sorted(tg.random.shuffle(tg.constant([1, 2, 3])).numpy().tolist())
    [1, 2, 3]
    """
    x = tensor(value)
    if x.ndim == 0:
        raise InvalidArgumentError("random.shuffle: value must have rank >= 1 (it shuffles the "
                                   "first axis), got a scalar")
    n = x.shape[0]
    perm = _emit("shuffle", lambda: _gen(seed, "shuffle").permutation(n).astype(np.int64), x._dev)
    return gather(x, perm, axis=0)


def categorical(logits, num_samples, dtype=None, seed=None, name=None):
    """`num_samples` class indices per row of `logits` ([batch, classes], unnormalised log
    probabilities), as `tf.random.categorical` (int64 unless `dtype`). Drawn by the Gumbel-max
    trick, argmax(logits + Gumbel noise), so that the draw is ops on `logits` (no gradient).

    >>> tg.random.categorical(tg.math.log([[0.5, 0.5]]), 5).shape
    (1, 5)
    """
    lg = tensor(logits)
    dt = np_dtype(dtype) or np.dtype(np.int64)
    if lg.ndim != 2 or lg._data.dtype.kind != "f":
        raise InvalidArgumentError(f"random.categorical: logits must be a floating matrix "
                                   f"[batch_size, num_classes], got {lg.dtype.name} of shape "
                                   f"{lg.shape}")
    if dt not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise InvalidArgumentError(f"random.categorical: dtype must be int32 or int64, got {dt}")
    k = int(num_samples)
    if k < 0:
        raise InvalidArgumentError(f"random.categorical: num_samples must be >= 0, got {k}")
    shape = (lg.shape[0], k, lg.shape[1])
    src = lg._data.dtype

    def gumbel():
        u = _gen(seed, "categorical").uniform(np.finfo(np.float64).tiny, 1.0, size=shape)
        return (-np.log(-np.log(u))).astype(src)
    noise = _emit("categorical", gumbel, lg._dev)
    return argmax(expand_dims(lg, 1) + noise, axis=-1, output_type=dt)


# -- stateless ops -------------------------------------------------------------------------------

def _stateless_gen(seed, op):
    s = np.asarray(seed.numpy() if isinstance(seed, Tensor) else seed)
    if s.shape != (2,) or s.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{op}: seed must be a shape [2] integer tensor, got "
                                   f"{s.tolist()!r}")
    return np.random.default_rng([int(v) & 0xFFFFFFFFFFFFFFFF for v in s])


def stateless_normal(shape, seed, mean=0.0, stddev=1.0, dtype=np.float32, name=None,
                     alg="auto_select"):
    """N(mean, stddev^2) samples that depend only on `seed` (shape [2]), as
    `tf.random.stateless_normal`: the same seed gives the same numbers on every call and
    device (tapegpu's own stream, not TensorFlow's Philox numbers).

    >>> a = tg.random.stateless_normal([3], seed=[1, 2])
    >>> bool(tg.reduce_all(a == tg.random.stateless_normal([3], seed=[1, 2])))
    True
    """
    dt = _float_dtype(dtype, "random.stateless_normal")
    shape = _shape(shape)
    s = np.asarray(seed.numpy() if isinstance(seed, Tensor) else seed)
    _stateless_gen(s, "random.stateless_normal")
    return _emit("stateless_normal", lambda: _normal_draw(
        _stateless_gen(s, "random.stateless_normal"), shape, mean, stddev, dt), None)


def stateless_uniform(shape, seed, minval=0, maxval=None, dtype=np.float32, name=None,
                      alg="auto_select"):
    """Uniform samples in [minval, maxval) that depend only on `seed` (shape [2]), as
    `tf.random.stateless_uniform` (integer dtypes: give minval and maxval, or neither for the
    dtype's full range).

    >>> tg.random.stateless_uniform([2], seed=[3, 4], minval=0, maxval=10, dtype=tg.int32).dtype
    tg.int32
    """
    dt = np_dtype(dtype)
    shape = _shape(shape)
    s = np.asarray(seed.numpy() if isinstance(seed, Tensor) else seed)
    _uniform_draw(_stateless_gen(s, "random.stateless_uniform"), (0,), minval, maxval, dt,
                  "random.stateless_uniform")  # argument errors now, not at the draw
    return _emit("stateless_uniform", lambda: _uniform_draw(
        _stateless_gen(s, "random.stateless_uniform"), shape, minval, maxval, dt,
        "random.stateless_uniform"), None)


# -- Generator -----------------------------------------------------------------------------------

class Generator:
    """A random generator with its own state, as `tf.random.Generator`: `from_seed(seed)` is
    repeatable, `from_non_deterministic_state()` is not; `split(count)` makes independent
    generators. (The state is numpy's PCG64 stream, not TensorFlow's Philox counter.)

    >>> g = tg.random.Generator.from_seed(1)
    >>> g.normal(shape=[2, 3]).shape
    (2, 3)
    """

    def __init__(self, copy_from=None, state=None, alg=None):
        if copy_from is not None:
            self._rng = np.random.default_rng()
            self._rng.bit_generator.state = copy_from._rng.bit_generator.state
        else:
            self._rng = np.random.default_rng(state)

    @classmethod
    def from_seed(cls, seed, alg=None):
        """A generator whose draws are fixed by the integer `seed`."""
        if isinstance(seed, Tensor):
            seed = seed.numpy().tolist()
        return cls(state=int(seed) & 0xFFFFFFFFFFFFFFFF)

    @classmethod
    def from_non_deterministic_state(cls, alg=None):
        """A generator seeded from the operating system's entropy."""
        return cls()

    def reset_from_seed(self, seed):
        """Restarts this generator's stream as `from_seed(seed)` would."""
        self._rng = np.random.default_rng(int(seed) & 0xFFFFFFFFFFFFFFFF)

    def split(self, count=1):
        """`count` new generators with streams independent of this one (and of each other)."""
        return [Generator(state=self._rng.integers(0, 2 ** 63, size=4).tolist())
                for _ in range(int(count))]

    def make_seeds(self, count=1):
        """A [2, count] int64 tensor of seeds for the stateless ops."""
        return _emit("make_seeds", lambda: self._rng.integers(
            -2 ** 63, 2 ** 63 - 1, size=(2, int(count)), dtype=np.int64), None)

    def normal(self, shape, mean=0.0, stddev=1.0, dtype=np.float32, name=None):
        """Samples from N(mean, stddev^2)."""
        dt = _float_dtype(dtype, "Generator.normal")
        shape = _shape(shape)
        return _emit("normal", lambda: _normal_draw(self._rng, shape, mean, stddev, dt), None)

    def uniform(self, shape, minval=0, maxval=None, dtype=np.float32, name=None):
        """Samples uniformly from [minval, maxval) (integers: both bounds, or neither for the
        dtype's full range)."""
        dt = np_dtype(dtype)
        shape = _shape(shape)
        _uniform_draw(self._rng, (0,), minval, maxval, dt, "Generator.uniform")
        return _emit("uniform", lambda: _uniform_draw(self._rng, shape, minval, maxval, dt,
                                                      "Generator.uniform"), None)

    def truncated_normal(self, shape, mean=0.0, stddev=1.0, dtype=np.float32, name=None):
        """N(mean, stddev^2) resampled beyond two standard deviations."""
        dt = _float_dtype(dtype, "Generator.truncated_normal")
        shape = _shape(shape)
        return _emit("truncated_normal", lambda: _truncated_draw(self._rng, shape, mean,
                                                                 stddev, dt), None)


_global_generator = []


def get_global_generator():
    """The generator `tf.random.get_global_generator` returns: made (non-deterministically) on
    the first call, then the same one.

    >>> tg.random.get_global_generator().uniform([2]).shape
    (2,)
    """
    if not _global_generator:
        _global_generator.append(Generator.from_non_deterministic_state())
    return _global_generator[0]


def set_global_generator(generator):
    """Replaces the global generator (as `tf.random.set_global_generator`).

    >>> tg.random.set_global_generator(tg.random.Generator.from_seed(7))
    >>> a = tg.random.get_global_generator().normal([2])
    >>> tg.random.get_global_generator().reset_from_seed(7)
    >>> bool(tg.reduce_all(a == tg.random.get_global_generator().normal([2])))
    True
    """
    if not isinstance(generator, Generator):
        raise TypeError(f"random.set_global_generator: expected a tg.random.Generator, got "
                        f"{type(generator).__name__}")
    _global_generator[:] = [generator]


__all__ = public(globals(), ("random",),
                 special=(((), (seeded_uniform, seeded_normal)),)) + ["Generator"]
