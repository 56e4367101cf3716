"""`tg.data.Dataset`: input pipelines with tf.data's names, defaults and semantics.

A dataset describes how to produce elements; iterating it (`for x in ds`, `iter(ds)`,
`as_numpy_iterator()`) starts over each time and yields nested tuples / dicts of tensors
created on the device current at `iter()`. Transformations return new datasets. The
element's structure is described by `element_spec` (`tg.TensorSpec`s) and the number of
elements by `cardinality()` (`INFINITE_CARDINALITY`, `UNKNOWN_CARDINALITY` when not known).
"""
import collections
import contextlib
import itertools
import os

import numpy as np

from .. import backends as _backend
from ..core import dtypes, nest
from ..core.tensor import Tensor, constant
from ..function import TensorSpec
from ..io import gfile as _gfile
from ..ops import random as _random
from ..ops.registry import InvalidArgumentError
from . import cache_file, iterators, structure

AUTOTUNE = -1
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2

_AUTOTUNE_PREFETCH = 4  # elements buffered by prefetch(AUTOTUNE)


def _count(value, who, name, minimum, none_as=None):
    """An integer argument: a Python int, numpy integer or integer scalar tensor >= minimum."""
    if value is None and none_as is not None:
        return none_as
    if isinstance(value, Tensor):
        if value.ndim != 0 or value.dtype not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"{who}: {name} must be an integer scalar, got a tensor of shape "
                            f"{value.shape} and dtype {value.dtype.name}")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{who}: {name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise InvalidArgumentError(f"{who}: {name} must be " + (
            "greater than zero" if minimum == 1 else f"at least {minimum}") +
            f", got {value}")
    return value


def _call(fn, element):
    """tf.data's calling convention: a (plain) tuple element is unpacked into arguments. No
    tape or trace of the calling thread sees what `fn` computes (`iterators.unseen`)."""
    with iterators.unseen():
        if type(element) is tuple:
            return fn(*element)
        return fn(element)


def _check_callable(fn, who, name):
    if not callable(fn):
        raise TypeError(f"{who}: `{name}` must be a Python callable, got {fn!r}")


class Dataset:
    """A sequence of elements (nested tuples and dicts of tensors), as `tf.data.Dataset`.

    Build one with `from_tensor_slices`, `from_tensors`, `from_generator`, `range` or `zip`,
    transform it with `map`, `filter`, `batch`, `shuffle`, ... and iterate it:

    >>> ds = tg.data.Dataset.range(8).batch(3)
    >>> [b.numpy().tolist() for b in ds]
    [[0, 1, 2], [3, 4, 5], [6, 7]]
    """

    _spec_cache = None

    # -- iteration -----------------------------------------------------------------------------
    def __iter__(self):
        return iterators.Iterator(self)

    def _iterate(self, ctx):
        raise NotImplementedError

    def as_numpy_iterator(self):
        """An iterator of the elements with numpy leaves (0-d ones as numpy scalars).

        >>> [int(x) for x in tg.data.Dataset.range(3).as_numpy_iterator()]
        [0, 1, 2]
        >>> ds = tg.data.Dataset.from_tensor_slices({"a": [1, 2], "b": [3.0, 4.0]})
        >>> [sorted((k, v.item()) for k, v in e.items()) for e in ds.as_numpy_iterator()]
        [[('a', 1), ('b', 3.0)], [('a', 2), ('b', 4.0)]]
        """
        return iterators.NumpyIterator(self)

    @property
    def element_spec(self):
        """The structure of `tg.TensorSpec`s describing one element (None dimensions vary).

        >>> tg.data.Dataset.range(3).batch(2).element_spec
        TensorSpec(shape=(None,), dtype=tg.int64, name=None)
        """
        if self._spec_cache is None:
            self._spec_cache = self._spec()
        return self._spec_cache

    def _spec(self):
        raise NotImplementedError

    def cardinality(self):
        """The number of elements as an int64 scalar tensor; `tg.data.INFINITE_CARDINALITY`
        (-1) for an infinite dataset, `tg.data.UNKNOWN_CARDINALITY` (-2) when not known without
        iterating (after `filter`, `from_generator`, `unbatch`).

        >>> ds = tg.data.Dataset.range(42)
        >>> int(ds.cardinality()), int(ds.repeat().cardinality())
        (42, -1)
        >>> int(ds.filter(lambda x: True).cardinality()) == tg.data.UNKNOWN_CARDINALITY
        True
        """
        return constant(np.int64(self._card()))

    def _card(self):
        raise NotImplementedError

    def __len__(self):
        n = self._card()
        if n == INFINITE_CARDINALITY:
            raise TypeError("The dataset is infinite.")
        if n == UNKNOWN_CARDINALITY:
            raise TypeError("The dataset length is unknown.")
        return n

    def __bool__(self):
        return True  # a dataset is not a container to test for emptiness

    def __repr__(self):
        try:
            spec = repr(self.element_spec)
        except Exception:  # noqa: BLE001 - a map function that fails on placeholder values
            spec = "?"
        return f"<{type(self).__name__} element_spec={spec}>"

    # -- sources -------------------------------------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors, name=None):
        """A dataset of the slices of `tensors` along their first dimension; `tensors` may be
        nested tuples and dicts (lists become tensors, as in tf.data).

        >>> ds = tg.data.Dataset.from_tensor_slices(([1, 2, 3], [[1.0, 2.0]] * 3))
        >>> [(int(a), b.numpy().tolist()) for a, b in ds]
        [(1, [1.0, 2.0]), (2, [1.0, 2.0]), (3, [1.0, 2.0])]
        """
        return _TensorSlices(tensors)

    @staticmethod
    def from_tensors(tensors, name=None):
        """A dataset of one element, `tensors`.

        >>> [t.numpy().tolist() for t in tg.data.Dataset.from_tensors([1, 2, 3])]
        [[1, 2, 3]]
        """
        return _Tensors(tensors)

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None, name=None):
        """The files matching a glob pattern (or any of a list of patterns) as scalar tg.string
        tensors (`tf.data.Dataset.list_files`), sorted, then shuffled anew at each iteration
        unless `shuffle=False`; an InvalidArgumentError when nothing matches.

        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> for n in ("b.csv", "a.csv"):
        ...     open(os.path.join(d, n), "w").close()
        >>> ds = tg.data.Dataset.list_files(os.path.join(d, "*.csv"), shuffle=False)
        >>> [os.path.basename(f.numpy()) for f in ds]
        [b'a.csv', b'b.csv']
        """
        if isinstance(file_pattern, Tensor):
            file_pattern = [bytes(p) for p in np.ravel(np.asarray(file_pattern.numpy(),
                                                                 dtype=object))]
        patterns = file_pattern if isinstance(file_pattern, (list, tuple)) else [file_pattern]
        found = _gfile.glob(list(patterns))
        if not found:
            shown = ", ".join(p.decode() if isinstance(p, bytes) else os.fspath(p)
                              for p in patterns)
            raise InvalidArgumentError(f"Dataset.list_files: No files matched pattern: {shown}")
        dataset = Dataset.from_tensor_slices([f.encode("utf-8") for f in found])
        if shuffle is None or shuffle:
            dataset = dataset.shuffle(len(found), seed=seed)
        return dataset

    @staticmethod
    def from_generator(generator, output_types=None, output_shapes=None, args=None,
                       output_signature=None, name=None):
        """A dataset of the values yielded by `generator(*args)` (called again for each
        iteration), converted to the dtypes and checked against the shapes of
        `output_signature` (a structure of `tg.TensorSpec`s; the older `output_types` and
        `output_shapes` describe the same).

        >>> def gen():
        ...     for i in range(1, 4):
        ...         yield i, [1] * i
        >>> ds = tg.data.Dataset.from_generator(gen, output_signature=(
        ...     tg.TensorSpec(shape=(), dtype=tg.int32),
        ...     tg.TensorSpec(shape=(None,), dtype=tg.int32)))
        >>> [(int(a), b.numpy().tolist()) for a, b in ds]
        [(1, [1]), (2, [1, 1]), (3, [1, 1, 1])]
        """
        return _Generator(generator, output_types, output_shapes, args, output_signature)

    @staticmethod
    def range(*args, output_type=dtypes.int64, name=None):
        """`range(stop)`, `range(start, stop[, step])`: int64 scalars as Python's `range`.

        >>> [int(x) for x in tg.data.Dataset.range(1, 10, 3)]
        [1, 4, 7]
        """
        return _Range(args, output_type)

    @staticmethod
    def zip(*args, datasets=None, name=None):
        """The elements of several datasets together: `zip(a, b)` or `zip((a, b))` gives
        tuples, `zip({"x": a, "y": b})` dicts; it ends with the shortest.

        >>> a = tg.data.Dataset.range(1, 4)
        >>> b = tg.data.Dataset.range(4, 7)
        >>> [(int(x), int(y)) for x, y in tg.data.Dataset.zip(a, b)]
        [(1, 4), (2, 5), (3, 6)]
        """
        if datasets is not None and args:
            raise TypeError("Dataset.zip: pass the datasets either positionally or as "
                            "`datasets`, not both")
        if datasets is None:
            if not args:
                raise TypeError("Dataset.zip: expected at least one dataset")
            datasets = args[0] if len(args) == 1 and structure.is_structure(args[0]) else args
        return _Zip(datasets)

    # -- transformations -----------------------------------------------------------------------
    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        """`map_func` applied to each element (a tuple element is passed as separate
        arguments), eagerly, in the thread that computes the element. `element_spec` calls it
        on two placeholder elements (unknown dimensions and values 1, then 2) to find its
        output's structure, dtypes and shapes, as tf.data traces it. With `num_parallel_calls`
        (a count, or `tg.data.AUTOTUNE`: the number of CPUs) that many elements are mapped at
        once on a thread pool; the order is kept (also with `deterministic=False`).

        >>> ds = tg.data.Dataset.range(1, 6).map(lambda x: x * 2, num_parallel_calls=2)
        >>> [int(x) for x in ds]
        [2, 4, 6, 8, 10]
        """
        _check_callable(map_func, "Dataset.map", "map_func")
        if num_parallel_calls is not None:
            num_parallel_calls = _count(num_parallel_calls, "Dataset.map", "num_parallel_calls",
                                        AUTOTUNE)
            if num_parallel_calls == 0:
                raise InvalidArgumentError("Dataset.map: num_parallel_calls must be positive or "
                                           "tg.data.AUTOTUNE (-1), got 0")
            if num_parallel_calls == AUTOTUNE:
                num_parallel_calls = os.cpu_count() or 1
        return _Map(self, map_func, num_parallel_calls)

    def filter(self, predicate, name=None):
        """The elements for which `predicate` returns True (a bool scalar).

        >>> [int(x) for x in tg.data.Dataset.range(1, 6).filter(lambda x: x % 2 == 0)]
        [2, 4]
        """
        _check_callable(predicate, "Dataset.filter", "predicate")
        return _Filter(self, predicate)

    def apply(self, transformation_func):
        """`transformation_func(self)`, which must return a dataset (the transformations of
        `tg.data.experimental`, such as `assert_cardinality`).

        >>> [int(x) for x in tg.data.Dataset.range(5).apply(lambda ds: ds.skip(3))]
        [3, 4]
        """
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError(f"Dataset.apply: `transformation_func` must return a Dataset, got "
                            f"{type(out).__name__}")
        return out

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None,
              deterministic=None, name=None):
        """Consecutive elements stacked along a new first dimension, `batch_size` at a time;
        the last batch is smaller unless `drop_remainder`.

        >>> [b.numpy().tolist() for b in tg.data.Dataset.range(8).batch(3, drop_remainder=True)]
        [[0, 1, 2], [3, 4, 5]]
        """
        batch_size = _count(batch_size, "Dataset.batch", "batch_size", 1)
        return _Batch(self, batch_size, bool(drop_remainder))

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None,
                     drop_remainder=False, name=None):
        """Like `batch`, padding each component at the end of every dimension to its padded
        shape (None or -1: the largest in the batch) with its padding value (default 0).

        >>> ds = tg.data.Dataset.range(1, 5).map(lambda x: tg.fill([int(x)], x))
        >>> [b.numpy().tolist() for b in ds.padded_batch(2)]
        [[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]]]
        >>> [b.numpy().tolist() for b in ds.padded_batch(2, padded_shapes=5,
        ...                                             padding_values=-1)][0]
        [[1, -1, -1, -1, -1], [2, 2, -1, -1, -1]]
        """
        batch_size = _count(batch_size, "Dataset.padded_batch", "batch_size", 1)
        return _PaddedBatch(self, batch_size, padded_shapes, padding_values,
                            bool(drop_remainder))

    def unbatch(self, name=None):
        """Splits each element along its first dimension into elements.

        >>> ds = tg.data.Dataset.from_tensors([[1, 2], [3, 4]]).unbatch()
        >>> [x.numpy().tolist() for x in ds]
        [[1, 2], [3, 4]]
        """
        return _Unbatch(self)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True, name=None):
        """The elements in random order, drawn through a buffer: the buffer holds the next
        `buffer_size` input elements; each output is drawn uniformly from it and its slot is
        refilled with the next input. A `buffer_size` at least the dataset's size gives a
        uniform permutation. With a `seed` (or after `tg.random.set_seed`) the orders repeat
        from run to run; `reshuffle_each_iteration` draws a new order for each iteration.

        >>> ds = tg.data.Dataset.range(5).shuffle(5, seed=7)
        >>> a, b = [[int(x) for x in ds] for _ in range(2)]
        >>> sorted(a) == sorted(b) == [0, 1, 2, 3, 4], a != b
        (True, True)
        """
        buffer_size = _count(buffer_size, "Dataset.shuffle", "buffer_size", 1)
        if seed is None:
            seed = int(_random._gen(None).integers(2 ** 63))  # tg.random.set_seed repeats it
        else:
            seed = _count(seed, "Dataset.shuffle", "seed", 0)
        return _Shuffle(self, buffer_size, seed, bool(reshuffle_each_iteration))

    def repeat(self, count=None, name=None):
        """The dataset `count` times over (None or -1: forever).

        >>> [int(x) for x in tg.data.Dataset.range(3).repeat(2)]
        [0, 1, 2, 0, 1, 2]
        """
        count = _count(count, "Dataset.repeat", "count", -1, none_as=-1)
        return _Repeat(self, count)

    def take(self, count, name=None):
        """The first `count` elements (-1: all).

        >>> [int(x) for x in tg.data.Dataset.range(10).take(3)]
        [0, 1, 2]
        """
        return _Take(self, _count(count, "Dataset.take", "count", -1))

    def skip(self, count, name=None):
        """All but the first `count` elements (-1: none).

        >>> [int(x) for x in tg.data.Dataset.range(10).skip(7)]
        [7, 8, 9]
        """
        return _Skip(self, _count(count, "Dataset.skip", "count", -1))

    def cache(self, filename="", name=None):
        """Keeps the elements after the first complete iteration; later iterations read them
        from there instead of computing them. With `filename` ('' : in memory) they are kept
        in the file `filename + '.tgcache'` (tapegpu's own format, see `cache_file`), which
        later iterations and other processes read; it is written under a temporary name and
        renamed when the input is exhausted, so an iteration that stops early caches nothing
        (as tf.data, an incomplete cache is never used). Each element's record has a checksum:
        a damaged file raises `tg.errors.DataLossError` naming the file and the element. The
        file's header holds the element spec: a file written by a pipeline of other dtypes,
        shapes or number of components raises `tg.errors.InvalidArgumentError` naming the file
        (tf.data reads another pipeline's cache too, and its iterator raises that error on the
        mismatch); delete it or use another filename.

        >>> calls = []
        >>> ds = tg.data.Dataset.range(3).map(lambda x: calls.append(1) or x).cache()
        >>> _ = list(ds), list(ds)
        >>> len(calls)
        3
        """
        if not isinstance(filename, (str, os.PathLike)) or \
                not isinstance(os.fspath(filename), str):
            raise TypeError(f"Dataset.cache: filename must be a str or path, got {filename!r}")
        filename = os.fspath(filename)
        return _Cache(self, filename)

    def prefetch(self, buffer_size, name=None):
        """Elements produced ahead by a background thread into a buffer of `buffer_size`
        (`tg.data.AUTOTUNE`: a few), overlapping the input pipeline with the consumer's work.
        Errors in the pipeline are raised by `next`; the thread stops when the iterator is
        dropped.

        >>> [int(x) for x in tg.data.Dataset.range(4).prefetch(2)]
        [0, 1, 2, 3]
        """
        buffer_size = _count(buffer_size, "Dataset.prefetch", "buffer_size", AUTOTUNE)
        if buffer_size == AUTOTUNE:
            buffer_size = _AUTOTUNE_PREFETCH
        return _Prefetch(self, buffer_size)

    def enumerate(self, start=0, name=None):
        """(index, element) pairs, the index an int64 scalar counting from `start`.

        >>> [(int(i), int(x)) for i, x in tg.data.Dataset.range(5, 7).enumerate(start=1)]
        [(1, 5), (2, 6)]
        """
        start = _count(start, "Dataset.enumerate", "start", -2 ** 63)
        return _Enumerate(self, start)

    def shard(self, num_shards, index, name=None):
        """Every `num_shards`-th element starting at `index` (one worker's share).

        >>> [int(x) for x in tg.data.Dataset.range(10).shard(num_shards=3, index=0)]
        [0, 3, 6, 9]
        """
        num_shards = _count(num_shards, "Dataset.shard", "num_shards", 1)
        index = _count(index, "Dataset.shard", "index", -2 ** 63)
        if not 0 <= index < num_shards:
            raise InvalidArgumentError(f"Dataset.shard: Index must be between 0 and "
                                       f"{num_shards - 1} (currently index = {index}).")
        return _Shard(self, num_shards, index)

    def flat_map(self, map_func, name=None):
        """`map_func` maps each element to a dataset; the elements of those datasets follow one
        another (`interleave` with `cycle_length=1`).

        >>> ds = tg.data.Dataset.range(1, 4).flat_map(
        ...     lambda x: tg.data.Dataset.from_tensors(x).repeat(x))
        >>> [int(v) for v in ds]
        [1, 2, 2, 3, 3, 3]
        """
        _check_callable(map_func, "Dataset.flat_map", "map_func")
        return _Interleave(self, map_func, 1, 1, None, "Dataset.flat_map")

    def interleave(self, map_func, cycle_length=None, block_length=None,
                   num_parallel_calls=None, deterministic=None, name=None):
        """`map_func` maps each element to a dataset; `cycle_length` of those are open at a
        time and `block_length` consecutive elements are taken from each in turn. When one
        ends, the next input element's dataset takes its place when the cycle comes back to
        it (tf.data's order). `cycle_length` None or `tg.data.AUTOTUNE`: the number of CPUs.
        With `num_parallel_calls`, each open dataset is read ahead by a thread of its own (up
        to `num_parallel_calls` of them); the order stays the same (also with
        `deterministic=False`).

        >>> ds = tg.data.Dataset.range(1, 6).interleave(
        ...     lambda x: tg.data.Dataset.from_tensors(x).repeat(6), cycle_length=2,
        ...     block_length=4)
        >>> [int(v) for v in ds]  # doctest: +NORMALIZE_WHITESPACE
        [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5,
         5]
        """
        who = "Dataset.interleave"
        _check_callable(map_func, who, "map_func")
        cycle_length = _count(cycle_length, who, "cycle_length", AUTOTUNE, none_as=AUTOTUNE)
        if cycle_length in (AUTOTUNE, 0):
            if cycle_length == 0:
                raise InvalidArgumentError(f"{who}: cycle_length must be positive or "
                                           "tg.data.AUTOTUNE (-1), got 0")
            cycle_length = os.cpu_count() or 1
        block_length = _count(block_length, who, "block_length", 1, none_as=1)
        threads = None
        if num_parallel_calls is not None:
            threads = _count(num_parallel_calls, who, "num_parallel_calls", AUTOTUNE)
            if threads == 0:
                raise InvalidArgumentError(f"{who}: num_parallel_calls must be positive or "
                                           "tg.data.AUTOTUNE (-1), got 0")
            if threads == AUTOTUNE:
                threads = cycle_length
        return _Interleave(self, map_func, cycle_length, block_length, threads, who)

    def window(self, size, shift=None, stride=1, drop_remainder=False, name=None):
        """Windows of `size` elements, each a dataset (for tuple or dict elements, a tuple or
        dict of datasets, one per component, as tf.data). Window k starts at input element
        `k * shift` (`shift` defaults to `size`) and takes every `stride`-th element from
        there. The last windows are shorter unless `drop_remainder`.

        >>> windows = tg.data.Dataset.range(7).window(3, shift=2, drop_remainder=True)
        >>> [[int(v) for v in w] for w in windows]
        [[0, 1, 2], [2, 3, 4], [4, 5, 6]]
        >>> [[int(v) for v in w] for w in tg.data.Dataset.range(7).window(3, 1, 2, True)]
        [[0, 2, 4], [1, 3, 5], [2, 4, 6]]
        >>> ds = tg.data.Dataset.range(5).window(2).flat_map(lambda w: w.batch(2))
        >>> [b.numpy().tolist() for b in ds]
        [[0, 1], [2, 3], [4]]
        """
        who = "Dataset.window"
        size = _count(size, who, "size", 1)
        shift = _count(shift, who, "shift", 1, none_as=size)
        stride = _count(stride, who, "stride", 1)
        return _Window(self, size, shift, stride, bool(drop_remainder))

    def rebatch(self, batch_size, drop_remainder=False, name=None):
        """The rows of the (batched) elements regrouped into batches of `batch_size`, as
        `unbatch().batch(batch_size, drop_remainder)`.

        >>> ds = tg.data.Dataset.range(6).batch(4).rebatch(3)
        >>> [b.numpy().tolist() for b in ds]
        [[0, 1, 2], [3, 4, 5]]
        """
        batch_size = _count(batch_size, "Dataset.rebatch", "batch_size", 1)
        return self.unbatch().batch(batch_size, drop_remainder)

    def options(self):
        """The `tg.data.Options` set on this dataset and its inputs (`with_options`)."""
        return _options_of(self)

    def with_options(self, options, name=None):
        """This dataset with `options` (a `tg.data.Options`) set; options set later override
        earlier ones. They are accepted and reported by `options()`; tapegpu's pipelines
        always keep the order of their elements, and need no threading or optimisation
        settings.

        >>> options = tg.data.Options()
        >>> options.deterministic = False
        >>> tg.data.Dataset.range(3).with_options(options).options().deterministic
        False
        """
        if not isinstance(options, Options):
            raise TypeError(f"Dataset.with_options: options must be a tg.data.Options, got "
                            f"{options!r}")
        return _WithOptions(self, options)

    def reduce(self, initial_state, reduce_func, name=None):
        """Folds the elements into a state: `state = reduce_func(state, element)`, starting
        from `initial_state`; the state keeps its structure and dtypes.

        >>> tg.data.Dataset.range(5).reduce(np.int64(0), lambda x, _: x + 1).numpy()
        array(5)
        >>> tg.data.Dataset.range(5).reduce(np.int64(0), lambda x, y: x + y).numpy()
        array(10)
        """
        _check_callable(reduce_func, "Dataset.reduce", "reduce_func")
        state = structure.normalize(initial_state, "Dataset.reduce")
        spec = structure.spec_of(state)
        for element in self:
            with iterators.unseen():
                new = structure.normalize(reduce_func(state, element), "Dataset.reduce")
            new_spec = structure.spec_of(new)
            if not structure.same_structure(spec, new_spec) or [s.dtype for s in nest.flatten(
                    spec)] != [s.dtype for s in nest.flatten(new_spec)]:
                raise TypeError(f"Dataset.reduce: reduce_func must return a state with the "
                                f"structure and dtypes of the initial state {spec}, got "
                                f"{new_spec}")
            state = new
        return state


    def concatenate(self, dataset, name=None):
        """The elements of this dataset followed by those of `dataset` (whose elements must
        have the same structure and dtypes; dimensions that differ become None).

        >>> ds = tg.data.Dataset.range(3).concatenate(tg.data.Dataset.range(5, 7))
        >>> [int(x) for x in ds]
        [0, 1, 2, 5, 6]
        """
        if not isinstance(dataset, Dataset):
            raise TypeError(f"Dataset.concatenate: expected a tg.data.Dataset, got {dataset!r}")
        return _Concatenate((self, dataset), _common_spec(
            (self, dataset), "Dataset.concatenate", "Incompatible dataset elements"))

    def scan(self, initial_state, scan_func, name=None):
        """A running computation: `state, output = scan_func(state, element)` for each
        element, starting from `initial_state`, yielding each `output`; the state keeps its
        structure and dtypes.

        >>> ds = tg.data.Dataset.range(5).scan(np.int64(0), lambda s, x: (s + x, s + x))
        >>> [int(x) for x in ds]
        [0, 1, 3, 6, 10]
        """
        _check_callable(scan_func, "Dataset.scan", "scan_func")
        return _Scan(self, structure.normalize(initial_state, "Dataset.scan"), scan_func)

    def take_while(self, predicate, name=None):
        """The elements up to (not including) the first for which `predicate` is False.

        >>> [int(x) for x in tg.data.Dataset.range(10).take_while(lambda x: x < 4)]
        [0, 1, 2, 3]
        """
        _check_callable(predicate, "Dataset.take_while", "predicate")
        return _TakeWhile(self, predicate)

    @staticmethod
    def counter(start=0, step=1, dtype=dtypes.int64, name=None):
        """The infinite count start, start + step, ... as scalars of `dtype`.

        >>> [int(x) for x in tg.data.Dataset.counter(2, 3).take(3)]
        [2, 5, 8]
        """
        start = _count(start, "Dataset.counter", "start", -2 ** 63)
        step = _count(step, "Dataset.counter", "step", -2 ** 63)
        return _Counter(start, step, dtypes.as_dtype(dtype))

    @staticmethod
    def random(seed=None, rerandomize_each_iteration=None, name=None):
        """An infinite dataset of random int64 scalars in [0, 2**32). With a `seed` (or after
        `tg.random.set_seed`) the sequence repeats from run to run; each iteration repeats it
        unless `rerandomize_each_iteration`.

        >>> ds = tg.data.Dataset.random(seed=4).take(3)
        >>> [int(x) for x in ds] == [int(x) for x in ds]
        True
        """
        return _RandomInts(_seed(seed, "Dataset.random"), bool(rerandomize_each_iteration))

    @staticmethod
    def sample_from_datasets(datasets, weights=None, seed=None, stop_on_empty_dataset=False,
                             rerandomize_each_iteration=None):
        """Elements drawn from `datasets` at random, dataset i with probability `weights[i]`
        (normalised; default uniform). An exhausted dataset drops out (the others' weights are
        renormalised), unless `stop_on_empty_dataset`: then the result ends there.

        >>> ds = tg.data.Dataset.sample_from_datasets(
        ...     [tg.data.Dataset.range(3), tg.data.Dataset.range(10, 12)], seed=1)
        >>> sorted(int(x) for x in ds)
        [0, 1, 2, 10, 11]
        """
        who = "Dataset.sample_from_datasets"
        datasets = _dataset_list(datasets, who)
        n = len(datasets)
        if isinstance(weights, Dataset):
            raise NotImplementedError(f"{who}: weights given as a dataset (changing over time) "
                                      f"are not supported; pass a list or tensor of weights")
        if weights is None:
            w = np.full(n, 1.0 / n)
        else:
            w = np.asarray(weights.numpy() if isinstance(weights, Tensor) else weights,
                           dtype=np.float64).reshape(-1)
            if len(w) != n:
                raise ValueError(f"{who}: Invalid `weights`. `weights` should have the same "
                                 f"length as `datasets` but got `len(weights)={len(w)}` vs. "
                                 f"`len(datasets)={n}`.")
            if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
                raise InvalidArgumentError(f"{who}: weights must be finite, non-negative and not "
                                           f"all zero, got {w.tolist()}")
        spec = _common_spec(datasets, who, "Invalid `datasets`. `datasets` must have "
                                            "compatible element specs.")
        return _Sample(datasets, spec, w / w.sum(), _seed(seed, who),
                       bool(stop_on_empty_dataset), bool(rerandomize_each_iteration))

    @staticmethod
    def choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset=True):
        """Elements taken from `datasets` in the order `choice_dataset` (int64 scalars) names
        them. When a chosen dataset is exhausted the result ends
        (`stop_on_empty_dataset`) or that choice is skipped.

        >>> ds = tg.data.Dataset.choose_from_datasets(
        ...     [tg.data.Dataset.range(3), tg.data.Dataset.range(10, 13)],
        ...     tg.data.Dataset.from_tensor_slices(np.array([0, 1, 1, 0], np.int64)))
        >>> [int(x) for x in ds]
        [0, 10, 11, 1]
        """
        who = "Dataset.choose_from_datasets"
        datasets = _dataset_list(datasets, who)
        if not isinstance(choice_dataset, Dataset) or \
                choice_dataset.element_spec != TensorSpec((), dtypes.int64):
            got = choice_dataset.element_spec if isinstance(choice_dataset, Dataset) else \
                repr(choice_dataset)
            raise TypeError(f"{who}: Invalid `choice_dataset`. Elements of `choice_dataset` "
                            f"must be scalar `tg.int64` tensors but are {got}.")
        spec = _common_spec(datasets, who, "Invalid `datasets`. `datasets` must have "
                                            "compatible element specs.")
        return _Choose(datasets, spec, choice_dataset, bool(stop_on_empty_dataset))

    def get_single_element(self, name=None):
        """The one element of this dataset (InvalidArgumentError if it has none or more).

        >>> int(tg.data.Dataset.range(5, 6).get_single_element())
        5
        """
        it = iter(self)
        try:
            first = next(it, None)
            if first is None:
                raise InvalidArgumentError("Dataset.get_single_element: Dataset was empty.")
            if next(it, None) is not None:
                raise InvalidArgumentError("Dataset.get_single_element: Dataset had more than "
                                           "one element.")
        finally:
            it.close()
        return first

    def unique(self, name=None):
        """The elements (int32 / int64 scalars) without repetitions, in first-seen order.

        >>> [int(x) for x in tg.data.Dataset.from_tensor_slices([1, 3, 1, 2, 3]).unique()]
        [1, 3, 2]
        """
        spec = self.element_spec
        if not isinstance(spec, TensorSpec):
            raise InvalidArgumentError(f"Dataset.unique: only supports inputs with a single "
                                       f"component, got element_spec {spec}")
        if spec.dtype not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"Dataset.unique: does not support type {spec.dtype.name} -- only "
                            f"tg.int32 and tg.int64 are supported.")
        if spec.shape is None or len(spec.shape) != 0:
            raise InvalidArgumentError(f"Dataset.unique: elements must be scalars, got "
                                       f"element_spec {spec}")
        return _Unique(self)

    def group_by_window(self, key_func, reduce_func, window_size=None, window_size_func=None,
                        name=None):
        """Groups the elements by `key_func(element)` (an int64 scalar): each group fills a
        window of `window_size` elements (or `window_size_func(key)`); a full window, as a
        dataset, goes to `reduce_func(key, window)`, whose dataset's elements are the output.
        Windows still partly full at the end follow in the order their keys first appeared.

        >>> ds = tg.data.Dataset.range(10).group_by_window(
        ...     key_func=lambda x: x % 2, reduce_func=lambda k, w: w.batch(3), window_size=3)
        >>> [b.numpy().tolist() for b in ds]
        [[0, 2, 4], [1, 3, 5], [6, 8], [7, 9]]
        """
        who = "Dataset.group_by_window"
        _check_callable(key_func, who, "key_func")
        _check_callable(reduce_func, who, "reduce_func")
        if (window_size is None) == (window_size_func is None):
            raise ValueError(f"{who}: Either the `window_size` argument or the "
                             f"`window_size_func` argument must be specified.")
        if window_size is not None:
            size = _count(window_size, who, "window_size", 1)
            window_size_func = lambda key: size  # noqa: E731
        _check_callable(window_size_func, who, "window_size_func")
        return _GroupByWindow(self, key_func, reduce_func, window_size_func)

    def bucket_by_sequence_length(self, element_length_func, bucket_boundaries,
                                  bucket_batch_sizes, padded_shapes=None, padding_values=None,
                                  pad_to_bucket_boundary=False, no_padding=False,
                                  drop_remainder=False, name=None):
        """Batches elements of similar length together, as tf.data: an element of length L
        (`element_length_func(element)`) goes to bucket i where
        bucket_boundaries[i-1] <= L < bucket_boundaries[i] (the first bucket below the first
        boundary, the last from the last boundary up); bucket i emits `padded_batch`es of
        `bucket_batch_sizes[i]` elements, padded to the longest in the batch or, with
        `pad_to_bucket_boundary`, to bucket_boundaries[i] - 1 (then every length must be below
        the last boundary); `no_padding` uses `batch`.

        >>> ds = tg.data.Dataset.range(1, 6).map(lambda x: tg.fill([int(x)], x))
        >>> ds = ds.bucket_by_sequence_length(lambda e: tg.shape(e)[0], [3], [2, 2])
        >>> [b.numpy().tolist() for b in ds]
        [[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]], [[5, 5, 5, 5, 5]]]
        """
        who = "Dataset.bucket_by_sequence_length"
        _check_callable(element_length_func, who, "element_length_func")
        bounds = [_count(b, who, "each bucket boundary", 0) for b in bucket_boundaries]
        sizes = [_count(b, who, "each bucket batch size", 1) for b in bucket_batch_sizes]
        if len(sizes) != len(bounds) + 1:
            raise ValueError(f"{who}: `len(bucket_batch_sizes)` must equal "
                             f"`len(bucket_boundaries) + 1` but `len(bucket_batch_sizes)="
                             f"{len(sizes)}` and `len(bucket_boundaries)={len(bounds)}`.")
        if sorted(bounds) != bounds:
            raise ValueError(f"{who}: bucket_boundaries must be sorted, got {bounds}")
        if pad_to_bucket_boundary and not bounds:
            raise ValueError(f"{who}: pad_to_bucket_boundary needs at least one boundary")
        edges = np.asarray(bounds, dtype=np.int64)

        def key(*element):
            length = int(_call(element_length_func, element[0] if len(element) == 1
                               else element))
            if pad_to_bucket_boundary and length >= bounds[-1]:
                raise InvalidArgumentError(f"{who}: When pad_to_bucket_boundary=True, elements "
                                           f"must have length < max(bucket_boundaries) = "
                                           f"{bounds[-1]}, got {length}")
            return np.int64(np.searchsorted(edges, length, side="right"))

        def batching(bucket, window):
            size = sizes[int(bucket)]
            if no_padding:
                return window.batch(size, drop_remainder=drop_remainder)
            shapes = padded_shapes
            if pad_to_bucket_boundary:
                top = bounds[min(int(bucket), len(bounds) - 1)] - 1
                shapes = nest.map_structure(
                    lambda s: (top,) + (None,) * (len(s.shape) - 1), window.element_spec)
            return window.padded_batch(size, shapes, padding_values,
                                       drop_remainder=drop_remainder)

        return _GroupByWindow(self, key, batching, lambda bucket: sizes[int(bucket)],
                              trace_keys=range(len(sizes)), batch_unknown=True)


# -- sources -------------------------------------------------------------------------------------

class _TensorSlices(Dataset):
    def __init__(self, tensors):
        self._value = structure.normalize(tensors, "Dataset.from_tensor_slices")
        leaves = structure.flatten(self._value)
        if not leaves:
            raise ValueError("Dataset.from_tensor_slices: the structure has no tensors")
        for t in leaves:
            if t.ndim == 0:
                raise ValueError("Dataset.from_tensor_slices: Unbatching a tensor is only "
                                 f"supported for rank >= 1 (got a scalar of dtype "
                                 f"{t.dtype.name})")
        self._n = leaves[0].shape[0]
        for t in leaves[1:]:
            if t.shape[0] != self._n:
                raise InvalidArgumentError(
                    f"Dataset.from_tensor_slices: Dimensions {self._n} and {t.shape[0]} are not "
                    "compatible: every component must have the same size in its first "
                    f"dimension (shapes {[tuple(x.shape) for x in leaves]})")

    def _iterate(self, ctx):
        return structure.split(self._value, "Dataset.from_tensor_slices", ctx.dev)

    def _iterate_batches(self, ctx, size, drop_remainder):
        """`batch(size, drop_remainder)` of the slices, as slices of `size` rows (the same
        elements without building each slice first)."""
        leaves = [structure.to_device(t, ctx.dev) for t in structure.flatten(self._value)]
        stop = self._n - self._n % size if drop_remainder else self._n
        for i in range(0, stop, size):
            yield structure.pack(self._value, [Tensor(t._data[i:i + size], t._dev)
                                               for t in leaves])  # (strings on the host)

    def _spec(self):
        return nest.map_structure(lambda t: TensorSpec(tuple(t.shape[1:]), t.dtype), self._value)

    def _card(self):
        return self._n


class _Tensors(Dataset):
    def __init__(self, tensors):
        self._value = structure.normalize(tensors, "Dataset.from_tensors")

    def _iterate(self, ctx):
        yield nest.map_structure(lambda t: structure.to_device(t, ctx.dev), self._value)

    def _spec(self):
        return structure.spec_of(self._value)

    def _card(self):
        return 1


class _Range(Dataset):
    def __init__(self, args, output_type):
        if not 1 <= len(args) <= 3:
            raise TypeError(f"Dataset.range: expected 1 to 3 arguments (stop, or start, stop "
                            f"[, step]), got {len(args)}")
        args = [_count(a, "Dataset.range", "each argument", -2 ** 63) for a in args]
        self._range = range(*args) if args[-1] != 0 or len(args) < 3 else None
        if self._range is None:
            raise InvalidArgumentError("Dataset.range: step must not be 0")
        self._dtype = dtypes.as_dtype(output_type)
        if self._dtype._np.kind not in "iuf":
            raise TypeError(f"Dataset.range: output_type must be an integer or floating dtype, "
                            f"got {self._dtype.name}")

    def _iterate(self, ctx):
        npd = self._dtype._np
        for i in self._range:
            yield iterators.scalar(i, npd, ctx.dev)

    def _spec(self):
        return TensorSpec((), self._dtype)

    def _card(self):
        return len(self._range)


def _signature(output_types, output_shapes, output_signature):
    who = "Dataset.from_generator"
    if output_signature is not None:
        if output_types is not None or output_shapes is not None:
            raise TypeError(f"{who}: `output_types` and `output_shapes` must not be given with "
                            "`output_signature`")
        for s in nest.flatten(output_signature):
            if not isinstance(s, TensorSpec):
                raise TypeError(f"{who}: `output_signature` must be a (nested) structure of "
                                f"tg.TensorSpec, got a {type(s).__name__}: {s!r}")
        if isinstance(output_signature, list):
            output_signature = tuple(output_signature)
        return output_signature
    if output_types is None:
        raise TypeError(f"{who}: `output_signature` (a structure of tg.TensorSpec) or the "
                        "deprecated `output_types` must be given")

    def build(types, shapes):
        if isinstance(types, dict):
            if shapes is not None and (not isinstance(shapes, dict) or set(shapes) != set(types)):
                raise TypeError(f"{who}: `output_shapes` {shapes!r} does not match the "
                                f"structure of `output_types` {types!r}")
            return {k: build(v, None if shapes is None else shapes[k]) for k, v in types.items()}
        if isinstance(types, (tuple, list)):
            if shapes is not None and (not isinstance(shapes, (tuple, list)) or
                                       len(shapes) != len(types)):
                raise TypeError(f"{who}: `output_shapes` {shapes!r} does not match the "
                                f"structure of `output_types` {types!r}")
            return tuple(build(v, None if shapes is None else shapes[i])
                         for i, v in enumerate(types))
        return TensorSpec(shapes, dtypes.as_dtype(types))

    return build(output_types, output_shapes)


def _conform(value, spec, who):
    if isinstance(spec, dict):
        if not isinstance(value, dict) or set(value) != set(spec):
            raise TypeError(f"{who}: `generator` yielded an element that did not match the "
                            f"expected structure. The expected structure was {spec}, but the "
                            f"yielded element was {value!r}.")
        return {k: _conform(value[k], spec[k], who) for k in spec}
    if isinstance(spec, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(spec):
            raise TypeError(f"{who}: `generator` yielded an element that did not match the "
                            f"expected structure. The expected structure was {spec}, but the "
                            f"yielded element was {value!r}.")
        return nest.pack_sequence_as(spec, [_conform(v, s, who) for v, s in zip(value, spec)])
    try:
        t = structure.to_device(structure.convert(value, who, dtype=spec.dtype))
    except (TypeError, ValueError) as e:
        raise TypeError(f"{who}: `generator` yielded an element that could not be converted to "
                        f"the expected type. The expected type was {spec.dtype.name}, but the "
                        f"yielded element was {value!r} ({e}).") from None
    if not spec.is_compatible_with(t):
        raise InvalidArgumentError(f"{who}: `generator` yielded an element of shape "
                                   f"{tuple(t.shape)} where an element of shape {spec.shape} "
                                   "was expected.")
    return t


class _Generator(Dataset):
    def __init__(self, generator, output_types, output_shapes, args, output_signature):
        _check_callable(generator, "Dataset.from_generator", "generator")
        self._generator = generator
        self._signature = _signature(output_types, output_shapes, output_signature)
        self._args = () if args is None else tuple(
            structure.convert(a, "Dataset.from_generator").numpy() for a in args)

    def _iterate(self, ctx):
        for value in self._generator(*self._args):
            yield _conform(value, self._signature, "Dataset.from_generator")

    def _spec(self):
        return self._signature

    def _card(self):
        return UNKNOWN_CARDINALITY


class _Zip(Dataset):
    def __init__(self, datasets):
        if isinstance(datasets, list):
            datasets = tuple(datasets)
        for d in nest.flatten(datasets):
            if not isinstance(d, Dataset):
                raise TypeError(f"Dataset.zip: expected datasets (in a tuple or dict), got a "
                                f"{type(d).__name__}: {d!r}")
        self._datasets = datasets

    def _iterate(self, ctx):
        leaves = nest.flatten(self._datasets)
        its = [d._iterate(ctx) for d in leaves]
        try:
            for elements in zip(*its):
                yield nest.pack_sequence_as(self._datasets, list(elements))
        finally:
            for it in its:
                it.close()

    def _spec(self):
        return nest.map_structure(lambda d: d.element_spec, self._datasets)

    def _card(self):
        out = INFINITE_CARDINALITY
        for d in nest.flatten(self._datasets):
            n = d._card()
            if n == UNKNOWN_CARDINALITY:
                return n
            if n != INFINITE_CARDINALITY:
                out = n if out == INFINITE_CARDINALITY else min(out, n)
        return out


# -- transformations ------------------------------------------------------------------------------

class _Unary(Dataset):
    """A transformation of one input dataset (same spec and cardinality unless overridden)."""

    def __init__(self, input_dataset):
        self._input = input_dataset

    def _spec(self):
        return self._input.element_spec

    def _card(self):
        return self._input._card()


class _Map(_Unary):
    def __init__(self, input_dataset, fn, num_threads):
        super().__init__(input_dataset)
        self._fn = fn
        self._threads = num_threads

    def _apply(self, element):
        out = _call(self._fn, element)
        if out is None:
            raise TypeError("Dataset.map: map_func returned None; it must return tensors (or "
                            "nested tuples / dicts of them)")
        if type(out) is list:  # as tf.data: a returned list (decode_csv's) is a tuple of
            out = tuple(out)   # components, not a tensor to stack
        return structure.normalize(out, "Dataset.map")

    def _iterate(self, ctx):
        elements = self._input._iterate(ctx)
        if self._threads is None:
            try:
                for element in elements:
                    yield self._apply(element)
            finally:
                elements.close()
        else:
            yield from iterators.parallel_map(elements, self._apply, self._threads, ctx)

    def _spec(self):
        # as tf.data traces map_func on placeholders: call it on placeholder values of the
        # input's spec, twice (unknown dimensions and values 1, then 2); output dimensions that
        # differ are None
        spec = self._input.element_spec
        dev = _backend.lookup("cpu")
        outs = []
        with np.errstate(all="ignore"), iterators.Context(dev).scope:
            try:
                for size in (1, 2):
                    element = nest.map_structure(lambda s: _placeholder(s, size, dev), spec)
                    outs.append(structure.spec_of(self._apply(element)))
            except Exception:  # noqa: BLE001 (map_func needs real values: a file name it
                # reads, text it parses): the spec of its output on the first element
                for element in self._input._iterate(iterators.Context(dev)):
                    out = structure.spec_of(self._apply(element))
                    return out
                raise
        unknown_rank = any(s.shape is None for s in nest.flatten(spec))
        return nest.map_structure(
            lambda s: TensorSpec(None, s.dtype) if unknown_rank else s,
            _map_pair(structure.most_specific_common, outs[0], outs[1]))

    def __repr__(self):
        return f"<{type(self).__name__} map_func={getattr(self._fn, '__name__', self._fn)}>"


def _map_pair(fn, a, b):
    return nest.pack_sequence_as(a, [fn(x, y) for x, y in zip(nest.flatten(a), nest.flatten(b))])


class _Filter(_Unary):
    def __init__(self, input_dataset, predicate):
        super().__init__(input_dataset)
        self._predicate = predicate

    def _keep(self, element):
        out = _call(self._predicate, element)
        if isinstance(out, (bool, np.bool_)):
            return bool(out)
        if isinstance(out, Tensor) and out.dtype == dtypes.bool and out.ndim == 0:
            return bool(out)
        desc = (f"a tensor of shape {out.shape} and dtype {out.dtype.name}"
                if isinstance(out, Tensor) else repr(out))
        raise ValueError("Dataset.filter: Invalid `predicate`. `predicate` must return a bool "
                         f"scalar tensor, but it returned {desc}")

    def _iterate(self, ctx):
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            for element in elements:
                if self._keep(element):
                    yield element

    def _card(self):
        return UNKNOWN_CARDINALITY


def _chunks(elements, size, drop_remainder):
    try:
        while True:
            chunk = list(itertools.islice(elements, size))
            if not chunk or (drop_remainder and len(chunk) < size):
                return
            yield chunk
    finally:
        elements.close()


def _batched_card(n, size, drop_remainder):
    if n < 0:
        return n
    return n // size if drop_remainder else -(-n // size)


class _Batch(_Unary):
    def __init__(self, input_dataset, batch_size, drop_remainder):
        super().__init__(input_dataset)
        self._size = batch_size
        self._drop = drop_remainder

    def _iterate(self, ctx):
        if type(self._input) is _TensorSlices:
            yield from self._input._iterate_batches(ctx, self._size, self._drop)
            return
        for chunk in _chunks(self._input._iterate(ctx), self._size, self._drop):
            yield structure.stack(chunk, ctx.dev)

    def _spec(self):
        dim = self._size if self._drop else None
        return nest.map_structure(lambda s: structure.batched_spec(s, dim),
                                  self._input.element_spec)

    def _card(self):
        return _batched_card(self._input._card(), self._size, self._drop)


def _shape_arg(shape):
    if shape is None:
        return None
    if isinstance(shape, Tensor):
        shape = shape.numpy().tolist()
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(None if d is None else int(d) for d in shape)


class _PaddedBatch(_Batch):
    def __init__(self, input_dataset, batch_size, padded_shapes, padding_values,
                 drop_remainder):
        super().__init__(input_dataset, batch_size, drop_remainder)
        self._shapes = padded_shapes
        self._values = padding_values

    def _flat_shapes(self, element):
        """padded_shapes as a flat list matching `element`'s leaves (None: batch maximum)."""
        if self._shapes is None:
            return [None] * len(structure.flatten(element))
        return _shapes_up_to(element, self._shapes, "Dataset.padded_batch")

    def _resolve(self, element):
        """(padded shapes, padding values) as flat lists matching `element`'s leaves."""
        who = "Dataset.padded_batch"
        leaves = structure.flatten(element)
        shapes = self._flat_shapes(element)
        if self._values is None:
            values = [0] * len(leaves)
        elif structure.is_structure(self._values):
            if not structure.same_structure(element, self._values):
                raise ValueError(f"{who}: padding_values {self._values!r} does not match the "
                                 "structure of the elements")
            values = nest.flatten(self._values)
        else:
            values = [self._values] * len(leaves)
        values = [structure.padding_scalar(v, t.dtype, who) for v, t in zip(values, leaves)]
        return shapes, values

    def _iterate(self, ctx):
        resolved = None
        for chunk in _chunks(self._input._iterate(ctx), self._size, self._drop):
            if resolved is None:
                resolved = self._resolve(chunk[0])
            yield structure.pad_stack(chunk, resolved[0], resolved[1], ctx.dev)

    def _spec(self):
        spec = self._input.element_spec
        leaves = nest.flatten(spec)
        shapes = self._flat_shapes(spec)
        dim = self._size if self._drop else None
        out = []
        for s, want in zip(leaves, shapes):
            if want is None:
                shape = s.shape
            else:
                shape = tuple(None if w in (None, -1) else w for w in want)
            out.append(TensorSpec(None if shape is None else (dim,) + tuple(shape), s.dtype))
        return nest.pack_sequence_as(spec, out)


def _shapes_up_to(element, shapes, who):
    """padded_shapes flattened along the element's structure (its leaves are shapes: lists or
    tuples of ints / None, an int for rank 1, or None)."""
    if isinstance(element, dict):
        if not isinstance(shapes, dict) or set(shapes) != set(element):
            raise ValueError(f"{who}: padded_shapes {shapes!r} does not match the structure of "
                             f"the elements (a dict with keys {sorted(element)})")
        return [x for k in sorted(element) for x in _shapes_up_to(element[k], shapes[k], who)]
    if isinstance(element, tuple):
        if not isinstance(shapes, (tuple, list)) or len(shapes) != len(element):
            raise ValueError(f"{who}: padded_shapes {shapes!r} does not match the structure of "
                             f"the elements (a tuple of {len(element)})")
        return [x for e, sh in zip(element, shapes) for x in _shapes_up_to(e, sh, who)]
    return [_shape_arg(shapes)]


class _Unbatch(_Unary):
    def _iterate(self, ctx):
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            for element in elements:
                yield from structure.split(element, "Dataset.unbatch", ctx.dev)

    def _spec(self):
        return nest.map_structure(lambda s: structure.unbatched_spec(s, "Dataset.unbatch"),
                                  self._input.element_spec)

    def _card(self):
        return UNKNOWN_CARDINALITY


class _Shuffle(_Unary):
    def __init__(self, input_dataset, buffer_size, seed, reshuffle):
        super().__init__(input_dataset)
        self._size = buffer_size
        self._seed = seed
        self._reshuffle = reshuffle
        self._epochs = itertools.count()

    def _iterate(self, ctx):
        epoch = next(self._epochs) if self._reshuffle else 0
        rng = np.random.default_rng([self._seed, epoch])
        buffer = []
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            for element in elements:
                if len(buffer) < self._size:
                    buffer.append(element)
                    continue
                i = int(rng.integers(len(buffer)))
                out, buffer[i] = buffer[i], element
                yield out
            while buffer:  # input exhausted: draw the rest, the last slot filling the gap
                i = int(rng.integers(len(buffer)))
                buffer[i], buffer[-1] = buffer[-1], buffer[i]
                yield buffer.pop()


class _Repeat(_Unary):
    def __init__(self, input_dataset, count):
        super().__init__(input_dataset)
        self._count = count

    def _iterate(self, ctx):
        epochs = itertools.count() if self._count == -1 else range(self._count)
        for _ in epochs:
            produced = False
            with contextlib.closing(self._input._iterate(ctx)) as elements:
                for element in elements:
                    produced = True
                    yield element
            if not produced:  # an empty input repeated forever is empty, not a hang
                return

    def _card(self):
        n = self._input._card()
        if self._count == -1:
            return 0 if n == 0 else INFINITE_CARDINALITY
        if self._count == 0:
            return 0
        if n < 0:
            return n
        return n * self._count


class _Take(_Unary):
    def __init__(self, input_dataset, count):
        super().__init__(input_dataset)
        self._count = count

    def _iterate(self, ctx):
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            if self._count == -1:
                yield from elements
            else:
                yield from itertools.islice(elements, self._count)

    def _card(self):
        n = self._input._card()
        if self._count == -1:
            return n
        if n == INFINITE_CARDINALITY:
            return self._count
        if n == UNKNOWN_CARDINALITY:
            return 0 if self._count == 0 else n
        return min(n, self._count)


class _Skip(_Unary):
    def __init__(self, input_dataset, count):
        super().__init__(input_dataset)
        self._count = count

    def _iterate(self, ctx):
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            if self._count == -1:
                for _ in elements:
                    pass
                return
            yield from itertools.islice(elements, self._count, None)

    def _card(self):
        n = self._input._card()
        if n < 0:
            return n
        return 0 if self._count == -1 else max(0, n - self._count)


class _Cache(_Unary):
    def __init__(self, input_dataset, filename=""):
        super().__init__(input_dataset)
        self._elements = None
        self._filename = filename

    def _iterate(self, ctx):
        if self._filename:
            return self._iterate_file(ctx)
        return self._iterate_memory(ctx)

    def _iterate_file(self, ctx):
        spec = self.element_spec
        leaves = nest.flatten(spec)
        if os.path.exists(cache_file.path_of(self._filename)):
            for arrays in cache_file.read(self._filename, leaves):
                yield structure.pack(spec, [structure.to_device(Tensor(a, _backend.NUMPY), ctx.dev)
                                            for a in arrays])  # strings stay on the host
            return
        writer = cache_file.Writer(self._filename, leaves)
        try:
            with contextlib.closing(self._input._iterate(ctx)) as elements:
                for element in elements:
                    writer.write([t._dev.to_numpy(t._data) for t in structure.flatten(element)])
                    yield element
        except BaseException:  # stopped early or failed: no cache
            writer.discard()
            raise
        writer.finish()

    def _iterate_memory(self, ctx):
        cached = self._elements
        if cached is not None:
            for element in cached:
                yield nest.map_structure(lambda t: structure.to_device(t, ctx.dev), element)
            return
        filling = []
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            for element in elements:
                filling.append(element)
                yield element
        self._elements = filling  # only a complete iteration fills the cache


class _Prefetch(_Unary):
    def __init__(self, input_dataset, buffer_size):
        super().__init__(input_dataset)
        self._size = buffer_size

    def _iterate(self, ctx):
        if self._size == 0:
            yield from self._input._iterate(ctx)
            return
        prefetcher = iterators.Prefetcher(self._input._iterate, self._size, ctx)
        try:
            yield from prefetcher
        finally:
            prefetcher.close()


class _Enumerate(_Unary):
    def __init__(self, input_dataset, start):
        super().__init__(input_dataset)
        self._start = start

    def _iterate(self, ctx):
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            for i, element in enumerate(elements, self._start):
                yield iterators.scalar(i, np.int64, ctx.dev), element

    def _spec(self):
        return TensorSpec((), dtypes.int64), self._input.element_spec


class _Shard(_Unary):
    def __init__(self, input_dataset, num_shards, index):
        super().__init__(input_dataset)
        self._num = num_shards
        self._index = index

    def _iterate(self, ctx):
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            yield from itertools.islice(elements, self._index, None, self._num)

    def _card(self):
        n = self._input._card()
        if n < 0:
            return n
        return n // self._num + (1 if self._index < n % self._num else 0)




# -- datasets of datasets ------------------------------------------------------------------------

class DatasetSpec:
    """The spec of a dataset-valued component (the windows of `Dataset.window`): the
    `element_spec` of the datasets it holds."""

    def __init__(self, element_spec):
        self.element_spec = element_spec

    def __eq__(self, other):
        return isinstance(other, DatasetSpec) and other.element_spec == self.element_spec

    def __hash__(self):
        return hash(repr(self.element_spec))

    def __repr__(self):
        return f"DatasetSpec({self.element_spec!r})"


class _Elements(Dataset):
    """A finite dataset of elements already computed (a window's)."""

    def __init__(self, elements, spec):
        self._elements = elements
        self._spec_value = spec

    def _iterate(self, ctx):
        for element in self._elements:
            yield nest.map_structure(lambda t: structure.to_device(t, ctx.dev), element)

    def _spec(self):
        return self._spec_value

    def _card(self):
        return len(self._elements)


def _placeholder(spec, size, dev):
    """A stand-in value for `spec` (a dataset for a DatasetSpec), to find a function's output
    structure as tf.data traces it."""
    if isinstance(spec, DatasetSpec):
        return _Elements([], spec.element_spec)
    return structure.placeholder(spec, size, dev)


class _Interleave(_Unary):
    def __init__(self, input_dataset, fn, cycle_length, block_length, threads, who):
        super().__init__(input_dataset)
        self._fn = fn
        self._cycle, self._block, self._threads = cycle_length, block_length, threads
        self._who = who

    def _open(self, element, ctx, readers):
        ds = _call(self._fn, element)
        if not isinstance(ds, Dataset):
            raise TypeError(f"{self._who}: map_func must return a tg.data.Dataset, got "
                            f"{type(ds).__name__}: {ds!r}")
        if self._threads is not None and readers < self._threads:
            return iterators.Prefetcher(ds._iterate, 2, ctx)
        return ds._iterate(ctx)

    def _iterate(self, ctx):
        slots = [None] * self._cycle
        with contextlib.closing(self._input._iterate(ctx)) as inputs:
            try:
                yield from self._cycle_through(inputs, slots, ctx)
            finally:
                for it in slots:
                    if it is not None:
                        it.close()

    def _cycle_through(self, inputs, slots, ctx):
        index, input_done = 0, False
        while True:
            it = slots[index]
            if it is None and not input_done:
                element = next(inputs, None)
                if element is None:
                    input_done = True
                else:
                    readers = sum(isinstance(s, iterators.Prefetcher) for s in slots)
                    it = slots[index] = self._open(element, ctx, readers)
            if it is not None:
                for _ in range(self._block):
                    value = next(it, None)
                    if value is None:  # this one has ended: its slot is refilled next time
                        it.close()
                        slots[index] = None
                        break
                    yield value
            if input_done and all(s is None for s in slots):
                return
            index = (index + 1) % self._cycle

    def _spec(self):
        spec = self._input.element_spec
        dev = _backend.lookup("cpu")
        with np.errstate(all="ignore"), iterators.Context(dev).scope:
            element = nest.map_structure(lambda s: _placeholder(s, 1, dev), spec)
            ds = _call(self._fn, element)
        if not isinstance(ds, Dataset):
            raise TypeError(f"{self._who}: map_func must return a tg.data.Dataset, got "
                            f"{type(ds).__name__}: {ds!r}")
        return ds.element_spec

    def _card(self):
        return UNKNOWN_CARDINALITY


class _Window(_Unary):
    def __init__(self, input_dataset, size, shift, stride, drop_remainder):
        super().__init__(input_dataset)
        self._size, self._shift, self._stride = size, shift, stride
        self._drop = drop_remainder

    def _iterate(self, ctx):
        span = (self._size - 1) * self._stride + 1  # input elements one window covers
        buffer = collections.deque()
        spec = self._input.element_spec
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            done = False
            while True:
                while not done and len(buffer) < span:
                    element = next(elements, None)
                    if element is None:
                        done = True
                    else:
                        buffer.append(element)
                if not buffer:
                    return
                window = list(itertools.islice(buffer, 0, span, self._stride))
                if len(window) < self._size and self._drop:
                    return
                yield self._as_datasets(window, spec)
                for _ in range(min(self._shift, len(buffer))):
                    buffer.popleft()
                if done and not buffer:
                    return
                skip = self._shift - span  # windows further apart than they are long
                while skip > 0 and not done:
                    if next(elements, None) is None:
                        done = True
                    skip -= 1

    @staticmethod
    def _as_datasets(window, spec):
        leaves = [structure.flatten(e) for e in window]
        specs = nest.flatten(spec)
        return nest.pack_sequence_as(spec, [
            _Elements([ls[c] for ls in leaves], specs[c]) for c in range(len(specs))])

    def _spec(self):
        return nest.map_structure(DatasetSpec, self._input.element_spec)

    def _card(self):
        n = self._input._card()
        if n < 0:
            return n
        if self._drop:
            span = (self._size - 1) * self._stride + 1
            return 0 if n < span else (n - span) // self._shift + 1
        return -(-n // self._shift)


# -- several inputs: concatenate, sample, choose; scan, take_while, unique, group_by_window -------

def _dataset_list(datasets, who):
    datasets = list(datasets) if isinstance(datasets, (list, tuple)) else datasets
    if not isinstance(datasets, list) or not datasets:
        raise ValueError(f"{who}: Invalid `datasets`. `datasets` should not be empty.")
    for d in datasets:
        if not isinstance(d, Dataset):
            raise TypeError(f"{who}: expected a list of tg.data.Dataset, got {d!r}")
    return datasets


def _common_spec(datasets, who, message):
    """The element_spec all `datasets` share (dimensions that differ become None)."""
    specs = [d.element_spec for d in datasets]
    out = specs[0]
    for i, spec in enumerate(specs[1:], 1):
        try:
            if not structure.same_structure(out, spec):
                raise TypeError("structures differ")
            out = _map_pair(structure.most_specific_common, out, spec)
        except TypeError:
            raise TypeError(f"{who}: {message}\n  {specs[0]} vs. {spec} (dataset {i})") from None
    return out


def _seed(seed, who):
    if seed is None:
        return int(_random._gen(None).integers(2 ** 63))  # tg.random.set_seed repeats it
    return _count(seed, who, "seed", 0)


class _Several(Dataset):
    """A dataset built from several input datasets (`_inputs`; their options merge)."""

    def __init__(self, inputs, spec):
        self._inputs = list(inputs)
        self._spec_value = spec

    def _spec(self):
        return self._spec_value

    def _card(self):
        return UNKNOWN_CARDINALITY


class _Concatenate(_Several):
    def _iterate(self, ctx):
        for d in self._inputs:
            with contextlib.closing(d._iterate(ctx)) as elements:
                yield from elements

    def _card(self):
        ns = [d._card() for d in self._inputs]
        if INFINITE_CARDINALITY in ns:
            return INFINITE_CARDINALITY
        return UNKNOWN_CARDINALITY if UNKNOWN_CARDINALITY in ns else sum(ns)


class _Sample(_Several):
    def __init__(self, inputs, spec, weights, seed, stop_on_empty, rerandomize):
        super().__init__(inputs, spec)
        self._weights, self._seed, self._stop = weights, seed, stop_on_empty
        self._rerandomize, self._epoch = rerandomize, 0

    def _iterate(self, ctx):
        epoch = self._epoch
        self._epoch += self._rerandomize
        rng = np.random.default_rng([self._seed, epoch])
        its = [d._iterate(ctx) for d in self._inputs]
        w = self._weights.copy()
        try:
            while w.sum() > 0:
                i = int(rng.choice(len(w), p=w / w.sum()))
                element = next(its[i], None)
                if element is None:
                    if self._stop:
                        return
                    w[i] = 0.0
                    continue
                yield element
        finally:
            for it in its:
                it.close()

    def _card(self):
        ns = [d._card() for d, w in zip(self._inputs, self._weights) if w > 0]
        return INFINITE_CARDINALITY if all(n == INFINITE_CARDINALITY for n in ns) \
            else UNKNOWN_CARDINALITY


class _Choose(_Several):
    def __init__(self, inputs, spec, choices, stop_on_empty):
        super().__init__(list(inputs) + [choices], spec)
        self._stop = stop_on_empty

    def _iterate(self, ctx):
        *datasets, choices = self._inputs
        its = [d._iterate(ctx) for d in datasets]
        try:
            with contextlib.closing(choices._iterate(ctx)) as picks:
                for pick in picks:
                    i = int(pick)
                    if not 0 <= i < len(its):
                        raise InvalidArgumentError(f"Dataset.choose_from_datasets: Selector "
                                                   f"index out of range: {i} >= {len(its)}")
                    element = next(its[i], None)
                    if element is None:
                        if self._stop:
                            return
                        continue
                    yield element
        finally:
            for it in its:
                it.close()


class _Counter(Dataset):
    def __init__(self, start, step, dtype):
        self._start, self._step, self._dtype = start, step, dtype

    def _iterate(self, ctx):
        for i in itertools.count(self._start, self._step):
            yield iterators.scalar(i, self._dtype._np, ctx.dev)

    def _spec(self):
        return TensorSpec((), self._dtype)

    def _card(self):
        return INFINITE_CARDINALITY


class _RandomInts(Dataset):
    def __init__(self, seed, rerandomize):
        self._seed, self._rerandomize, self._epoch = seed, rerandomize, 0

    def _iterate(self, ctx):
        epoch = self._epoch
        self._epoch += self._rerandomize
        rng = np.random.default_rng([self._seed, epoch])
        while True:
            yield iterators.scalar(rng.integers(2 ** 32), np.int64, ctx.dev)

    def _spec(self):
        return TensorSpec((), dtypes.int64)

    def _card(self):
        return INFINITE_CARDINALITY


def _scan_step(fn, state, element):
    with iterators.unseen():
        out = fn(state, element)
    if not isinstance(out, tuple) or len(out) != 2:
        raise TypeError(f"Dataset.scan: Invalid `scan_func`. `scan_func` should return a pair "
                        f"consisting of new state and the output value but it returned {out!r}")
    new = structure.normalize(out[0], "Dataset.scan")
    old_spec, new_spec = structure.spec_of(state), structure.spec_of(new)
    if not structure.same_structure(old_spec, new_spec) or [s.dtype for s in nest.flatten(
            old_spec)] != [s.dtype for s in nest.flatten(new_spec)]:
        raise TypeError(f"Dataset.scan: Invalid `scan_func`. The new state must match the "
                        f"structure and dtypes of the initial state {old_spec}, got {new_spec}")
    return new, structure.normalize(out[1], "Dataset.scan")


class _Scan(_Unary):
    def __init__(self, input_dataset, initial_state, fn):
        super().__init__(input_dataset)
        self._state, self._fn = initial_state, fn

    def _iterate(self, ctx):
        state = nest.map_structure(lambda t: structure.to_device(t, ctx.dev), self._state)
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            for element in elements:
                state, out = _scan_step(self._fn, state, element)
                yield out

    def _spec(self):
        # traced as `map` is: on placeholder elements of two sizes; the state as given
        spec = self._input.element_spec
        dev = _backend.lookup("cpu")
        outs = []
        with np.errstate(all="ignore"), iterators.Context(dev).scope:
            state = nest.map_structure(lambda t: structure.to_device(t, dev), self._state)
            for size in (1, 2):
                element = nest.map_structure(lambda s: _placeholder(s, size, dev), spec)
                outs.append(structure.spec_of(_scan_step(self._fn, state, element)[1]))
        return _map_pair(structure.most_specific_common, outs[0], outs[1])


class _TakeWhile(_Filter):
    def _iterate(self, ctx):
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            for element in elements:
                if not self._keep(element):
                    return
                yield element


class _Unique(_Unary):
    def _iterate(self, ctx):
        seen = set()
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            for element in elements:
                value = int(element)
                if value not in seen:
                    seen.add(value)
                    yield element

    def _card(self):
        return UNKNOWN_CARDINALITY


def _key_of(fn, element, who):
    out = _call(fn, element)
    if isinstance(out, Tensor) and (out.ndim != 0 or out.dtype != dtypes.int64):
        raise ValueError(f"{who}: `key_func` must return a single tg.int64 scalar tensor, got "
                         f"{out.dtype.name} of shape {out.shape}")
    if not isinstance(out, (Tensor, int, np.integer)) or isinstance(out, bool):
        raise ValueError(f"{who}: `key_func` must return a single tg.int64 scalar tensor, got "
                         f"{out!r}")
    return int(out)


class _GroupByWindow(_Unary):
    _WHO = "Dataset.group_by_window"

    def __init__(self, input_dataset, key_func, reduce_func, size_func, trace_keys=(0, 1),
                 batch_unknown=False):
        super().__init__(input_dataset)
        self._key, self._reduce, self._size = key_func, reduce_func, size_func
        self._trace_keys, self._batch_unknown = tuple(trace_keys), batch_unknown

    def _window_size(self, key):
        with iterators.unseen():
            size = self._size(iterators.scalar(key, np.int64, _backend.current()))
        return _count(size, self._WHO, "the window size", 1)

    def _emit(self, key, window, ctx):
        ds = self._reduce(iterators.scalar(key, np.int64, ctx.dev),
                          _Elements(window, self._input.element_spec))
        if not isinstance(ds, Dataset):
            raise TypeError(f"{self._WHO}: reduce_func must return a tg.data.Dataset, got "
                            f"{type(ds).__name__}: {ds!r}")
        with contextlib.closing(ds._iterate(ctx)) as elements:
            yield from elements

    def _iterate(self, ctx):
        windows, sizes = {}, {}
        with contextlib.closing(self._input._iterate(ctx)) as elements:
            for element in elements:
                key = _key_of(self._key, element, self._WHO)
                if key not in sizes:
                    sizes[key] = self._window_size(key)
                window = windows.setdefault(key, [])
                window.append(element)
                if len(window) == sizes[key]:
                    del windows[key]
                    yield from self._emit(key, window, ctx)
        for key, window in windows.items():
            yield from self._emit(key, window, ctx)

    def _spec(self):
        # traced for keys 0 and 1 (TF traces a symbolic key); dimensions that differ are None
        dev = _backend.lookup("cpu")
        specs = []
        for key in self._trace_keys:
            with np.errstate(all="ignore"), iterators.Context(dev).scope:
                ds = self._reduce(iterators.scalar(key, np.int64, dev),
                                  _Elements([], self._input.element_spec))
            if not isinstance(ds, Dataset):
                raise TypeError(f"{self._WHO}: reduce_func must return a tg.data.Dataset, got "
                                f"{type(ds).__name__}: {ds!r}")
            specs.append(ds.element_spec)
        out = specs[0]
        for spec in specs[1:]:
            out = _map_pair(structure.most_specific_common, out, spec)
        if self._batch_unknown:  # the batch size depends on the key
            out = nest.map_structure(lambda s: structure.batched_spec(
                TensorSpec(None if s.shape is None else s.shape[1:], s.dtype), None), out)
        return out

    def _card(self):
        return UNKNOWN_CARDINALITY


# -- options ---------------------------------------------------------------------------------------

class _OptionGroup:
    """A group of options (`options.threading`, `options.experimental_optimization`, ...):
    any attribute can be set and is kept."""

    def __init__(self, name):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_values", {})

    def __getattr__(self, key):
        if key.startswith("_"):
            raise AttributeError(key)
        return self._values.get(key)

    def __setattr__(self, key, value):
        self._values[key] = value

    def __repr__(self):
        return f"<{self._name} {self._values}>"


class Options:
    """Settings of a pipeline, as `tf.data.Options`: `deterministic`, `threading.*`,
    `experimental_optimization.*`, `experimental_distribute.*`, `autotune.*`, ... Set them
    and apply them with `Dataset.with_options`. tapegpu accepts and reports them; its
    pipelines always keep their order and need no tuning.

    >>> options = tg.data.Options()
    >>> options.experimental_distribute.auto_shard_policy = (
    ...     tg.data.experimental.AutoShardPolicy.OFF)
    >>> options.threading.private_threadpool_size = 2
    """

    _GROUPS = ("autotune", "experimental_distribute", "experimental_optimization", "threading")
    _SCALARS = ("deterministic", "experimental_deterministic", "experimental_external_state_policy",
                "experimental_slack", "experimental_symbolic_checkpoint",
                "experimental_warm_start")

    def __init__(self):
        for g in self._GROUPS:
            object.__setattr__(self, g, _OptionGroup(f"Options.{g}"))
        for k in self._SCALARS:
            object.__setattr__(self, k, None)

    def __setattr__(self, key, value):
        if key not in self._SCALARS:
            raise AttributeError(f"Cannot set the property {key} on Options (valid: "
                                 f"{', '.join(self._SCALARS + self._GROUPS)})")
        object.__setattr__(self, key, value)

    def merge(self, options):
        """These options with `options`' set values on top."""
        out = Options()
        for src in (self, options):
            for k in self._SCALARS:
                if getattr(src, k) is not None:
                    object.__setattr__(out, k, getattr(src, k))
            for g in self._GROUPS:
                getattr(out, g)._values.update(getattr(src, g)._values)
        return out

    def __eq__(self, other):
        return isinstance(other, Options) and all(
            getattr(self, k) == getattr(other, k) for k in self._SCALARS) and all(
            getattr(self, g)._values == getattr(other, g)._values for g in self._GROUPS)

    __hash__ = None


class _WithOptions(_Unary):
    def __init__(self, input_dataset, options):
        super().__init__(input_dataset)
        self._options = options

    def _iterate(self, ctx):
        return self._input._iterate(ctx)


def _options_of(dataset):
    """The options of `dataset`: those of its inputs, then its own on top."""
    out = Options()
    inputs = []
    if isinstance(dataset, _Unary):
        inputs = [dataset._input]
    elif isinstance(dataset, _Zip):
        inputs = nest.flatten(dataset._datasets)
    elif isinstance(dataset, _Several):
        inputs = dataset._inputs
    for d in inputs:
        out = out.merge(_options_of(d))
    if isinstance(dataset, _WithOptions):
        out = out.merge(dataset._options)
    return out
