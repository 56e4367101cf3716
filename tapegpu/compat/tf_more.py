"""Smaller TensorFlow names that belong to no larger tapegpu module: `tf.version`,
`tf.experimental.numpy.random`, `tf.nn.scale_regularization_loss`, `tf.saturate_cast`,
`tf.autograph.to_code`, `tf.random.split` and `tf.data.experimental`'s `Counter` and
`assert_cardinality` (reached through `tapegpu/compat/surface.py`'s `LAZY` table).
"""
import inspect
import math
import platform
import textwrap
import types

import numpy as np

from .. import _version
from ..core import dtypes
from ..core.tensor import Tensor, Variable, constant, convert_to_tensor
from ..ops import random as _random
from ..ops.registry import InvalidArgumentError
from . import surface
import tapegpu as _tg

newaxis = None  # tf.experimental.numpy.newaxis, as numpy's

# -- tf.version ---------------------------------------------------------------------------------
version = types.ModuleType(
    "tapegpu.version", "`tf.version`: the version strings (tapegpu's own, as `tg.__version__`; "
    "GraphDef versions have no meaning without TF graphs and are refused).")
version.VERSION = _version.__version__
version.GIT_VERSION = "v" + _version.__version__
version.COMPILER_VERSION = platform.python_compiler()
surface.hook(version, "tf.version")


# -- tf.experimental.numpy.random ---------------------------------------------------------------
def _size(size):
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)


def seed(s):
    """Sets the global seed (`tg.random.set_seed`), as `tnp.random.seed`.

    >>> tg.experimental.numpy.random.seed(3)
    """
    try:
        s = int(s)
    except TypeError:
        raise ValueError(f"Argument `s` got an invalid value {s}. Only integers are "
                         f"supported.") from None
    _random.set_seed(s)


def standard_normal(size=None):
    """Standard normal samples of shape `size` (float64, numpy's default float), as
    `tnp.random.standard_normal`.

    >>> x = tg.experimental.numpy.random.standard_normal((2, 3))
    >>> x.shape, x.dtype
    ((2, 3), tg.float64)
    """
    return _random.normal(_size(size), dtype=dtypes.float64)


def randn(*args):
    """Standard normal samples of shape `args` (float64), as `tnp.random.randn`.

    >>> tg.experimental.numpy.random.randn(2, 3).shape
    (2, 3)
    """
    return standard_normal(args)


def uniform(low=0.0, high=1.0, size=None):
    """Uniform samples in [low, high) (float64; `size` defaults to the broadcast shape of
    `low` and `high`), as `tnp.random.uniform`.

    >>> x = tg.experimental.numpy.random.uniform(2.0, 3.0, size=(4,))
    >>> bool(tg.reduce_all((x >= 2.0) & (x < 3.0)))
    True
    """
    lo = convert_to_tensor(low, dtype=dtypes.float64)
    hi = convert_to_tensor(high, dtype=dtypes.float64)
    shape = np.broadcast_shapes(tuple(lo.shape), tuple(hi.shape)) if size is None \
        else _size(size)
    unit = _random.uniform(shape, dtype=dtypes.float64)
    return lo + unit * (hi - lo)


def random(size=None):
    """Uniform samples in [0, 1) of shape `size` (float64), as `tnp.random.random`.

    >>> tg.experimental.numpy.random.random(3).shape
    (3,)
    """
    return uniform(0.0, 1.0, size)


def rand(*size):
    """Uniform samples in [0, 1) of shape `size` (float64), as `tnp.random.rand`.

    >>> tg.experimental.numpy.random.rand(2, 2).dtype
    tg.float64
    """
    return uniform(0.0, 1.0, size)


def randint(low, high=None, size=None, dtype=np.int64):
    """Integers in [low, high) (in [0, low) without `high`), int64 or int32, as
    `tnp.random.randint`.

    >>> x = tg.experimental.numpy.random.randint(5, size=(10,))
    >>> bool(tg.reduce_all((x >= 0) & (x < 5))), x.dtype
    (True, tg.int64)
    """
    low = int(low)
    if high is None:
        low, high = 0, low
    npd = np.dtype(dtypes.np_dtype(dtypes.as_dtype(dtype)))
    if npd not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise ValueError(f"Argument `dtype` got an invalid value {dtype}. Only those "
                         f"convertible to (numpy.int32, numpy.int64) are supported.")
    return _random.uniform(_size(size), minval=low, maxval=int(high),
                           dtype=dtypes.as_dtype(npd))


def poisson(lam=1.0, size=None):
    """Poisson samples of rate `lam` (int64), as `tnp.random.poisson`.

    >>> tg.experimental.numpy.random.poisson(3.0, size=(2,)).dtype
    tg.int64
    """
    lam = np.asarray(lam._numpy() if isinstance(lam, Tensor) else lam, dtype=np.float64)
    draw = _random._gen(None, "poisson").poisson(lam, size=_size(size) + lam.shape)
    return constant(draw.astype(np.int64))


numpy_random = types.ModuleType("tapegpu.experimental.numpy.random",
                                "`tf.experimental.numpy.random`: numpy's random functions, "
                                "drawing from tapegpu's global generator (seeded by `seed`).")
for _fn in (seed, standard_normal, randn, uniform, random, rand, randint, poisson):
    setattr(numpy_random, _fn.__name__, _fn)
surface.hook(numpy_random, "tf.experimental.numpy.random")


def numpy_copy(a):
    """A copy of `a` as a tensor (numpy's `copy`), as `tnp.copy`.

    >>> a = tg.constant([1.0, 2.0])
    >>> b = tg.experimental.numpy.copy(a)
    >>> b.numpy().tolist(), b is a
    ([1.0, 2.0], False)
    """
    if isinstance(a, Variable):
        a = a._read()
    if isinstance(a, Tensor):
        return _tg.identity(a)
    return convert_to_tensor(np.array(a))


# -- tf.nn, tf.saturate_cast --------------------------------------------------------------------
def scale_regularization_loss(regularization_loss):
    """The sum of `regularization_loss` (a tensor, or a list of them) divided by the number of
    replicas in sync, as `tf.nn.scale_regularization_loss`; tapegpu has no `tf.distribute`
    strategy, so that number is 1 (under `tapegpu.distribute` each process adds its own).

    >>> float(tg.nn.scale_regularization_loss([tg.constant(0.5), tg.constant(0.25)]))
    0.75
    """
    if isinstance(regularization_loss, (list, tuple)):
        if not regularization_loss:
            return constant(np.float32(0.0))
        return _tg.add_n([_tg.reduce_sum(x) for x in regularization_loss])
    return _tg.reduce_sum(regularization_loss)


def _limits(npd):
    return (np.iinfo(npd).min, np.iinfo(npd).max) if npd.kind in "iu" else \
        (np.finfo(npd).min, np.finfo(npd).max) if npd.kind == "f" else (None, None)


def _representable(limit, in_npd, toward):
    """`limit` as a value of `in_npd` no further from zero than `limit` (float32 has no
    2**31 - 1: the nearest float below it)."""
    v = np.asarray(limit).astype(in_npd)
    if in_npd.kind == "f" and np.float64(v) > limit:
        v = np.nextafter(v, in_npd.type(-np.inf))
    elif in_npd.kind == "f" and np.float64(v) < limit:
        v = np.nextafter(v, in_npd.type(np.inf))
    return v


def saturate_cast(value, dtype, name=None):
    """`value` cast to `dtype`, clamped to the range of `dtype` first (no wrap-around or
    overflow to inf), as `tf.saturate_cast`; complex values lose their imaginary part when the
    target is real.

    >>> tg.saturate_cast(tg.constant([-5.0, 3.7, 300.0]), tg.uint8).numpy().tolist()
    [0, 3, 255]
    """
    x = value._read() if isinstance(value, Variable) else convert_to_tensor(value)
    out = dtypes.as_dtype(dtype)
    in_npd, out_npd = np.dtype(x._data.dtype), np.dtype(dtypes.np_dtype(out))
    if in_npd.kind == "c" and out_npd.kind != "c":  # the real part (no gradient flows)
        x = constant(np.real(x.numpy()))
        in_npd = np.dtype(x._data.dtype)
    if out_npd.kind == "b" or in_npd.kind not in "biuf":
        return _tg.cast(x, out)
    lo, hi = _limits(out_npd)
    in_lo, in_hi = _limits(in_npd) if in_npd.kind != "b" else (0, 1)
    if lo is not None and in_lo < lo:
        x = _tg.maximum(x, constant(_representable(lo, in_npd, 1)))
    if hi is not None and in_hi > hi:
        x = _tg.minimum(x, constant(_representable(hi, in_npd, -1)))
    return _tg.cast(x, out)


# -- tf.random.split ----------------------------------------------------------------------------
def split(seed, num=2, alg="auto_select"):
    """`num` new seeds (a [num, 2] tensor of the seed's dtype) derived deterministically from
    the stateless seed `seed` (shape [2]), as `tf.random.split`. The values are tapegpu's
    (its stateless generators are not TensorFlow's Philox streams).

    >>> s = tg.random.split(tg.constant([1, 2], dtype=tg.int64), num=3)
    >>> s.shape, s.dtype
    ((3, 2), tg.int64)
    """
    s = convert_to_tensor(seed)
    if tuple(s.shape) != (2,) or s._data.dtype.kind not in "iu":
        raise InvalidArgumentError(f"random.split: seed must be an integer tensor of shape "
                                   f"[2], got {s.dtype.name} of shape {tuple(s.shape)}")
    npd = np.dtype(s._data.dtype)
    words = [int(v) & 0xFFFFFFFFFFFFFFFF for v in s.numpy().tolist()]
    gen = np.random.Generator(np.random.Philox(key=words))
    info = np.iinfo(npd)
    out = gen.integers(info.min, info.max, size=(int(num), 2), dtype=npd, endpoint=True)
    return constant(out)


# -- tf.autograph.to_code -----------------------------------------------------------------------
def to_code(entity, recursive=True, experimental_optional_features=None):
    """The source code of `entity` (a function or method) as a string, as
    `tf.autograph.to_code`. tapegpu's `tg.function` traces the Python function as written (no
    AutoGraph rewrite), so the code that runs is the function's own source, dedented.

    >>> def f(x):
    ...     return x * 2
    >>> print(tg.autograph.to_code(f), end="")
    def f(x):
        return x * 2
    """
    fn = getattr(entity, "python_function", None) or getattr(entity, "_python_function",
                                                                 None) or entity
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    if not callable(fn):
        raise TypeError(f"autograph.to_code: expected a function or method, got {entity!r}")
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as e:
        raise ValueError(f"autograph.to_code: the source of {entity!r} is not available "
                         f"({e})") from None


autograph = types.ModuleType("tapegpu.autograph",
                             "`tf.autograph`: `to_code` (tg.function traces Python as written, "
                             "so no AutoGraph conversion takes place).")
autograph.to_code = to_code
surface.hook(autograph, "tf.autograph")


# -- tf.data.experimental -----------------------------------------------------------------------
def Counter(start=0, step=1, dtype=dtypes.int64, name=None):  # noqa: N802 (TF's name)
    """An infinite dataset counting from `start` by `step`, as
    `tf.data.experimental.Counter` (`tg.data.Dataset.counter`).

    >>> [int(x) for x in tg.data.experimental.Counter(2, 3).take(3)]
    [2, 5, 8]
    """
    return _tg.data.Dataset.counter(start, step, dtype)


def assert_cardinality(expected_cardinality):
    """A transformation (for `dataset.apply`) asserting that the dataset has
    `expected_cardinality` elements: its `cardinality()` then reports it, and iterating
    raises `tg.errors.FailedPreconditionError` when the count turns out different, as
    `tf.data.experimental.assert_cardinality`.

    >>> ds = tg.data.Dataset.range(5).filter(lambda x: True)
    >>> int(ds.apply(tg.data.experimental.assert_cardinality(5)).cardinality())
    5
    """
    n = int(expected_cardinality)

    def _apply(dataset):
        return _AssertCardinality(dataset, n)
    return _apply


class _AssertCardinality(_tg.data.dataset._Unary):
    def __init__(self, input_dataset, n):
        super().__init__(input_dataset)
        self._n = n

    def _card(self):
        return self._n

    def _iterate(self, ctx):
        seen = 0
        for element in self._input._iterate(ctx):
            seen += 1
            if self._n >= 0 and seen > self._n:
                raise _tg.errors.FailedPreconditionError(
                    None, None, f"Input dataset was expected to contain {self._n} elements "
                    f"but contained at least {seen} elements.")
            yield element
        if self._n == _tg.data.INFINITE_CARDINALITY:
            raise _tg.errors.FailedPreconditionError(
                None, None, f"Input dataset was expected to contain an infinite number of "
                f"elements but contained only {seen} elements.")
        if seen < self._n:
            raise _tg.errors.FailedPreconditionError(
                None, None, f"Input dataset was expected to contain {self._n} elements but "
                f"contained only {seen} elements.")


# -- candidate sampling and the sampled losses (tf.random.*_candidate_sampler, tf.nn.nce_loss,
# tf.nn.sampled_softmax_loss) ---------------------------------------------------------------------

def _expected_count(p, num_sampled, num_tries, unique):
    """TF's expected count of a candidate of probability p among the samples: p * n for
    sampling with replacement, 1 - (1 - p)^tries for unique sampling."""
    if not unique or num_tries == num_sampled:
        return p * num_sampled
    return -np.expm1(num_tries * np.log1p(-p))


def _candidates(true_classes, num_true, num_sampled, unique, range_max, seed, draw, prob, fn):
    labels = _tg.cast(convert_to_tensor(true_classes), _tg.int64).numpy()
    if labels.ndim != 2 or labels.shape[1] != int(num_true):
        raise InvalidArgumentError(f"{fn}: true_classes must be [batch_size, num_true] with "
                                   f"num_true={num_true}, got shape {labels.shape}")
    n, rmax = int(num_sampled), int(range_max)
    if unique and n > rmax:
        raise InvalidArgumentError(f"{fn}: with unique=True, num_sampled ({n}) must be <= "
                                   f"range_max ({rmax})")
    gen = _random._gen(seed, fn)
    if unique:
        picked, seen, tries = [], set(), 0
        while len(picked) < n:
            tries += 1
            v = int(draw(gen))
            if v not in seen:
                seen.add(v)
                picked.append(v)
    else:
        picked, tries = [int(draw(gen)) for _ in range(n)], n
    sampled = np.asarray(picked, np.int64)
    true_count = _expected_count(prob(labels), n, tries, unique).astype(np.float32)
    sampled_count = _expected_count(prob(sampled), n, tries, unique).astype(np.float32)
    return constant(sampled), constant(true_count), constant(sampled_count)


def log_uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                                  seed=None, name=None):
    """`num_sampled` classes drawn from the log-uniform (Zipfian) distribution
    P(k) = log((k + 2) / (k + 1)) / log(range_max + 1) over [0, range_max), without
    repeats when `unique`, with the expected counts of the true and sampled classes, as
    tf.random.log_uniform_candidate_sampler: (sampled int64 [num_sampled],
    true_expected_count float32 [batch, num_true], sampled_expected_count float32
    [num_sampled]). The draws are tapegpu's (not TF's random stream).

    >>> s, t, c = tg.random.log_uniform_candidate_sampler([[1], [5]], 1, 4, True, 10, seed=1)
    >>> s.shape, t.shape, c.shape, len(set(s.numpy().tolist()))
    ((4,), (2, 1), (4,), 4)
    """
    log_range = math.log(int(range_max) + 1)

    def draw(gen):
        return (int(math.exp(gen.random() * log_range)) - 1) % int(range_max)

    def prob(v):
        return np.log((v + 2.0) / (v + 1.0)) / log_range
    return _candidates(true_classes, num_true, num_sampled, unique, range_max, seed, draw, prob,
                       "log_uniform_candidate_sampler")


def uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                              seed=None, name=None):
    """`num_sampled` classes drawn uniformly from [0, range_max) (without repeats when
    `unique`), with expected counts, as tf.random.uniform_candidate_sampler.

    >>> s, _, c = tg.random.uniform_candidate_sampler([[0]], 1, 3, True, 3, seed=2)
    >>> sorted(s.numpy().tolist()), c.numpy().round(3).tolist()
    ([0, 1, 2], [1.0, 1.0, 1.0])
    """
    def draw(gen):
        return gen.integers(0, int(range_max))

    def prob(v):
        return np.full(np.shape(v), 1.0 / int(range_max))
    return _candidates(true_classes, num_true, num_sampled, unique, range_max, seed, draw, prob,
                       "uniform_candidate_sampler")


def _sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes, num_true,
                    sampled_values, subtract_log_q, remove_accidental_hits, fn):
    """TF's `_compute_sampled_logits`: logits of the true and the sampled classes
    ([batch, num_true + num_sampled]) and their labels (1 / num_true for the true ones)."""
    if isinstance(weights, (list, tuple)):
        weights = _tg.concat(list(weights), axis=0)  # a partitioned table: its shards stacked
    labels = _tg.cast(convert_to_tensor(labels), _tg.int64)
    if labels.ndim == 1:
        labels = _tg.expand_dims(labels, -1)
    if sampled_values is None:
        sampled_values = log_uniform_candidate_sampler(labels, num_true, num_sampled, True,
                                                       num_classes)
    sampled, true_count, sampled_count = sampled_values
    sampled = _tg.cast(convert_to_tensor(sampled), _tg.int64)
    x = convert_to_tensor(inputs)
    true_w = _tg.gather(weights, labels)  # [batch, num_true, dim]
    true_b = _tg.gather(biases, labels)
    sampled_w = _tg.gather(weights, sampled)  # [num_sampled, dim]
    sampled_b = _tg.gather(biases, sampled)
    true_logits = _tg.reduce_sum(_tg.expand_dims(x, 1) * true_w, axis=-1) + true_b
    sampled_logits = _tg.matmul(x, sampled_w, transpose_b=True) + sampled_b
    if remove_accidental_hits:
        hits = np.any(labels.numpy()[:, :, None] == sampled.numpy()[None, None, :], axis=1)
        floor = np.finfo(np.dtype(x._data.dtype)).min
        sampled_logits = _tg.where(constant(hits), sampled_logits + floor, sampled_logits)
    if subtract_log_q:
        true_logits = true_logits - _tg.math.log(_tg.cast(true_count, x.dtype))
        sampled_logits = sampled_logits - _tg.math.log(_tg.cast(sampled_count, x.dtype))
    logits = _tg.concat([true_logits, sampled_logits], axis=1)
    batch = x.shape[0]
    target = np.concatenate([np.full((batch, num_true), 1.0 / num_true),
                             np.zeros((batch, int(num_sampled)))], axis=1)
    return logits, constant(target.astype(np.dtype(x._data.dtype)))


def nce_loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
             sampled_values=None, remove_accidental_hits=False, name="nce_loss"):
    """The noise-contrastive estimation loss per example ([batch]), as tf.nn.nce_loss: the
    sigmoid cross-entropy of the true classes (label 1 / num_true) and `num_sampled` sampled
    classes (label 0), their logits `inputs . weights[c] + biases[c] - log(expected count)`;
    the classes are drawn log-uniformly (or given by `sampled_values`).

    >>> w, b = tg.random.normal((10, 4)), tg.zeros((10,))
    >>> tg.nn.nce_loss(w, b, [[1], [3]], tg.random.normal((2, 4)), 3, 10).shape
    (2,)
    """
    logits, target = _sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes,
                                      num_true, sampled_values, True, remove_accidental_hits,
                                      "nce_loss")
    losses = _tg.nn.sigmoid_cross_entropy_with_logits(labels=target, logits=logits)
    return _tg.reduce_sum(losses, axis=1)


def sampled_softmax_loss(weights, biases, labels, inputs, num_sampled, num_classes,
                         num_true=1, sampled_values=None, remove_accidental_hits=True,
                         seed=None, name="sampled_softmax_loss"):
    """The softmax cross-entropy over the true classes and `num_sampled` sampled ones
    ([batch]), as tf.nn.sampled_softmax_loss (logits corrected by the log expected counts;
    sampled classes equal to a true one removed).

    >>> w, b = tg.random.normal((10, 4)), tg.zeros((10,))
    >>> tg.nn.sampled_softmax_loss(w, b, [[1], [3]], tg.random.normal((2, 4)), 3, 10).shape
    (2,)
    """
    if sampled_values is None:
        lab = _tg.cast(convert_to_tensor(labels), _tg.int64)
        lab = _tg.expand_dims(lab, -1) if lab.ndim == 1 else lab
        sampled_values = log_uniform_candidate_sampler(lab, num_true, num_sampled, True,
                                                       num_classes, seed=seed)
    logits, target = _sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes,
                                      num_true, sampled_values, True, remove_accidental_hits,
                                      "sampled_softmax_loss")
    return _tg.nn.softmax_cross_entropy_with_logits(labels=target, logits=logits)
