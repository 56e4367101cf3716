"""tg.data: TensorFlow's documented outputs for each Dataset method, nested elements, devices,
shuffle's buffer semantics, threads (parallel map, prefetch), errors, and a training loop."""
import collections
import gc
import threading
import time

import numpy as np
import pytest

import tapegpu as tg

Dataset = tg.data.Dataset


def values(ds):
    """The elements as nested Python lists / numbers."""
    def py(e):
        if isinstance(e, dict):
            return {k: py(v) for k, v in e.items()}
        if isinstance(e, tuple):
            return tuple(py(v) for v in e)
        assert isinstance(e, tg.Tensor), type(e)
        return e.numpy().tolist()
    return [py(e) for e in ds]


# -- TF's documented outputs -------------------------------------------------------------------

def test_range():
    assert values(Dataset.range(5)) == [0, 1, 2, 3, 4]
    assert values(Dataset.range(2, 5)) == [2, 3, 4]
    assert values(Dataset.range(1, 5, 2)) == [1, 3]
    assert values(Dataset.range(1, 5, -2)) == []
    assert values(Dataset.range(5, 1)) == []
    assert values(Dataset.range(5, 1, -2)) == [5, 3]
    assert Dataset.range(3).element_spec == tg.TensorSpec((), tg.int64)
    assert values(Dataset.range(2, 5, output_type=tg.int32)) == [2, 3, 4]
    assert next(iter(Dataset.range(1, output_type=tg.float32))).dtype == tg.float32


def test_batch_as_documented():
    assert values(Dataset.range(8).batch(3)) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert values(Dataset.range(8).batch(3, drop_remainder=True)) == [[0, 1, 2], [3, 4, 5]]
    assert Dataset.range(8).batch(3).element_spec == tg.TensorSpec((None,), tg.int64)
    assert Dataset.range(8).batch(3, True).element_spec == tg.TensorSpec((3,), tg.int64)
    assert int(Dataset.range(8).batch(3).cardinality()) == 3
    assert int(Dataset.range(8).batch(3, drop_remainder=True).cardinality()) == 2


def test_batching_slices_matches_batching_elements():
    x = {"a": np.arange(14).reshape(7, 2), "b": (np.arange(7.0),)}
    direct = Dataset.from_tensor_slices(x)
    generic = direct.map(lambda e: e)  # batch stacks element by element here
    for size, drop in ((3, False), (3, True), (7, True), (10, False), (10, True)):
        assert values(direct.batch(size, drop)) == values(generic.batch(size, drop))
    assert len(values(direct.batch(3))) == int(direct.batch(3).cardinality()) == 3


def test_from_tensor_slices_as_documented():
    assert values(Dataset.from_tensor_slices([1, 2, 3])) == [1, 2, 3]
    assert values(Dataset.from_tensor_slices([[1, 2], [3, 4]])) == [[1, 2], [3, 4]]
    assert values(Dataset.from_tensor_slices(([1, 2], [3, 4], [5, 6]))) == \
        [(1, 3, 5), (2, 4, 6)]
    assert values(Dataset.from_tensor_slices({"a": [1, 2], "b": [3, 4]})) == \
        [{"a": 1, "b": 3}, {"a": 2, "b": 4}]
    features, labels = [[1, 3], [2, 1], [3, 3]], [0, 1, 1]
    assert values(Dataset.from_tensor_slices((features, labels))) == \
        [([1, 3], 0), ([2, 1], 1), ([3, 3], 1)]
    # Python floats become float32, ints int32 (TF's defaults); numpy arrays keep their dtype
    x, y = next(iter(Dataset.from_tensor_slices(([1.0], np.array([1], np.int64)))))
    assert (x.dtype, y.dtype) == (tg.float32, tg.int64)


def test_nested_structures_keep_their_types():
    Point = collections.namedtuple("Point", "x y")
    ds = Dataset.from_tensor_slices({"p": Point([1, 2], [3.0, 4.0]), "label": ([5, 6],)})
    first = next(iter(ds))
    assert isinstance(first["p"], Point) and isinstance(first["label"], tuple)
    assert values(ds) == [{"p": (1, 3.0), "label": (5,)}, {"p": (2, 4.0), "label": (6,)}]
    assert ds.element_spec == {"label": (tg.TensorSpec((), tg.int32),),
                               "p": Point(tg.TensorSpec((), tg.int32),
                                          tg.TensorSpec((), tg.float32))}
    batched = next(iter(ds.batch(2)))
    assert isinstance(batched["p"], Point)
    assert batched["p"].y.numpy().tolist() == [3.0, 4.0]
    # a namedtuple is passed whole to map_func; a plain tuple is unpacked
    assert values(ds.map(lambda d: d["p"].x + d["label"][0])) == [6, 8]
    pairs = Dataset.from_tensor_slices(([1, 2], [10, 20]))
    assert values(pairs.map(lambda a, b: {"sum": a + b})) == [{"sum": 11}, {"sum": 22}]


def test_from_tensors_as_documented():
    assert values(Dataset.from_tensors([1, 2, 3])) == [[1, 2, 3]]
    assert values(Dataset.from_tensors(([1, 2, 3], "x" == "x"))) == [([1, 2, 3], True)]
    assert int(Dataset.from_tensors([1]).cardinality()) == 1


def test_from_generator_with_output_signature():
    def gen():
        for i in range(1, 4):
            yield i, [1] * i

    ds = Dataset.from_generator(gen, output_signature=(
        tg.TensorSpec(shape=(), dtype=tg.int32), tg.TensorSpec(shape=(None,), dtype=tg.int32)))
    assert values(ds) == [(1, [1]), (2, [1, 1]), (3, [1, 1, 1])]
    assert values(ds) == [(1, [1]), (2, [1, 1]), (3, [1, 1, 1])]  # the generator is called again
    assert int(ds.cardinality()) == tg.data.UNKNOWN_CARDINALITY
    assert values(ds.padded_batch(2)) == [([1, 2], [[1, 0], [1, 1]]), ([3], [[1, 1, 1]])]


def test_from_generator_with_output_types_shapes_and_args():
    def gen(stop):
        for i in range(int(stop)):
            yield {"x": np.full(2, i, np.float64), "i": i}

    ds = Dataset.from_generator(gen, output_types={"x": tg.float32, "i": tg.int64},
                                output_shapes={"x": (2,), "i": ()}, args=(3,))
    assert values(ds) == [{"x": [0.0, 0.0], "i": 0}, {"x": [1.0, 1.0], "i": 1},
                          {"x": [2.0, 2.0], "i": 2}]
    assert next(iter(ds))["x"].dtype == tg.float32
    assert ds.element_spec == {"x": tg.TensorSpec((2,), tg.float32),
                               "i": tg.TensorSpec((), tg.int64)}
    unknown = Dataset.from_generator(lambda: iter([[1, 2], [3]]), output_types=tg.int32)
    assert unknown.element_spec == tg.TensorSpec(None, tg.int32)
    assert values(unknown) == [[1, 2], [3]]


def test_from_generator_checks_what_it_yields():
    spec = tg.TensorSpec((2,), tg.float32)
    with pytest.raises(tg.InvalidArgumentError, match=r"yielded an element of shape \(3,\)"):
        list(Dataset.from_generator(lambda: iter([[1.0, 2.0, 3.0]]), output_signature=spec))
    with pytest.raises(TypeError, match="did not match the expected structure"):
        list(Dataset.from_generator(lambda: iter([1.0]), output_signature=(spec, spec)))
    with pytest.raises(TypeError, match="could not be converted"):
        list(Dataset.from_generator(lambda: iter([[1.5, 2.5]]),
                                    output_signature=tg.TensorSpec((2,), tg.int32)))
    with pytest.raises(TypeError, match="must be a Python callable"):
        Dataset.from_generator([1, 2], output_signature=spec)
    with pytest.raises(TypeError, match="output_signature"):
        Dataset.from_generator(lambda: iter([]))


def test_zip_as_documented():
    a, b = Dataset.range(1, 4), Dataset.range(4, 7)
    assert values(Dataset.zip((a, b))) == [(1, 4), (2, 5), (3, 6)]
    assert values(Dataset.zip(b, a)) == [(4, 1), (5, 2), (6, 3)]
    c = Dataset.range(7, 13).batch(2)
    assert values(Dataset.zip((a, b, c))) == [(1, 4, [7, 8]), (2, 5, [9, 10]),
                                              (3, 6, [11, 12])]
    d = Dataset.range(13, 15)
    assert values(Dataset.zip((a, d))) == [(1, 13), (2, 14)]  # the shortest
    assert values(Dataset.zip({"a": a, "d": d})) == [{"a": 1, "d": 13}, {"a": 2, "d": 14}]
    assert int(Dataset.zip((a, d)).cardinality()) == 2
    assert int(Dataset.zip((a, d.repeat())).cardinality()) == 3


def test_map_filter_as_documented():
    assert values(Dataset.range(1, 6).map(lambda x: x + 1)) == [2, 3, 4, 5, 6]
    assert values(Dataset.from_tensor_slices([1, 2, 3]).filter(lambda x: x < 3)) == [1, 2]
    assert values(Dataset.from_tensor_slices([1, 2, 3]).filter(
        lambda x: tg.math.equal(x, 1))) == [1]
    ds = Dataset.range(3).map(lambda x: (x, [x, x * 2]))  # a list output becomes a tensor
    assert values(ds) == [(0, [0, 0]), (1, [1, 2]), (2, [2, 4])]
    assert ds.element_spec == (tg.TensorSpec((), tg.int64), tg.TensorSpec((2,), tg.int64))
    assert Dataset.range(3).map(lambda x: tg.fill([int(x)], x)).element_spec == \
        tg.TensorSpec((None,), tg.int64)
    with pytest.raises(ValueError, match="must return a bool scalar"):
        list(Dataset.range(3).filter(lambda x: x))
    with pytest.raises(TypeError, match="returned None"):
        list(Dataset.range(3).map(lambda x: None))


def test_map_with_threads_keeps_the_order_and_runs_in_parallel():
    active, peak = [0], [0]
    lock = threading.Lock()

    def slow(x):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.005 * (5 - int(x) % 5))  # later elements finish first
        with lock:
            active[0] -= 1
        return x * 10

    for calls in (4, tg.data.AUTOTUNE):
        assert values(Dataset.range(20).map(slow, num_parallel_calls=calls)) == \
            [10 * i for i in range(20)]
    assert peak[0] > 1


def test_map_errors_in_worker_threads_reach_the_consumer():
    def bad(x):
        if int(x) == 3:
            raise KeyError("element 3")
        return x

    it = iter(Dataset.range(10).map(bad, num_parallel_calls=3))
    assert [int(next(it)) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(KeyError, match="element 3"):
        next(it)


def test_padded_batch_as_documented():
    a = Dataset.range(1, 5, output_type=tg.int32).map(lambda x: tg.fill([int(x)], x))
    assert values(a.padded_batch(2)) == [[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]]]
    assert values(a.padded_batch(2, padded_shapes=5)) == [
        [[1, 0, 0, 0, 0], [2, 2, 0, 0, 0]], [[3, 3, 3, 0, 0], [4, 4, 4, 4, 0]]]
    assert values(a.padded_batch(2, padded_shapes=(None,), padding_values=-1)) == [
        [[1, -1], [2, 2]], [[3, 3, 3, -1], [4, 4, 4, 4]]]
    assert a.padded_batch(2).element_spec == tg.TensorSpec((None, None), tg.int32)
    assert a.padded_batch(2, padded_shapes=[5], drop_remainder=True).element_spec == \
        tg.TensorSpec((2, 5), tg.int32)
    elements = [([1, 2, 3], [-1, -2]), ([4, 5], [-4])]
    c = Dataset.from_generator(lambda: iter(elements), output_signature=(
        tg.TensorSpec(shape=[None], dtype=tg.int32), tg.TensorSpec(shape=[None], dtype=tg.int32)))
    assert values(c.padded_batch(2, padded_shapes=([4], [None]), padding_values=(-1, 100))) == [
        ([[1, 2, 3, -1], [4, 5, -1, -1]], [[-1, -2], [-4, 100]])]
    with pytest.raises(tg.InvalidArgumentError, match="smaller size than the input element"):
        list(a.padded_batch(4, padded_shapes=[3]))
    with pytest.raises(ValueError, match="does not match the structure"):
        list(c.padded_batch(2, padded_shapes=[4]))
    with pytest.raises(TypeError, match="padding value"):
        list(a.padded_batch(2, padding_values=0.5))


def test_batch_needs_equal_shapes():
    a = Dataset.range(1, 4).map(lambda x: tg.fill([int(x)], x))
    with pytest.raises(tg.InvalidArgumentError, match="Cannot batch tensors with different"):
        list(a.batch(2))


def test_unbatch_as_documented():
    elements = [[1, 2, 3], [1, 2], [1, 2, 3, 4]]
    ds = Dataset.from_generator(lambda: iter(elements), tg.int64)
    assert values(ds.unbatch()) == [1, 2, 3, 1, 2, 1, 2, 3, 4]
    pairs = Dataset.from_tensor_slices(([[1, 2], [3, 4]], [[5, 6], [7, 8]])).unbatch()
    assert values(pairs) == [(1, 5), (2, 6), (3, 7), (4, 8)]
    assert pairs.element_spec == (tg.TensorSpec((), tg.int32), tg.TensorSpec((), tg.int32))
    assert values(Dataset.range(7).batch(3).unbatch()) == list(range(7))
    with pytest.raises(tg.InvalidArgumentError, match="non-scalar"):
        list(Dataset.range(3).unbatch())


def test_repeat_take_skip_as_documented():
    assert values(Dataset.from_tensor_slices([1, 2, 3]).repeat(3)) == [1, 2, 3] * 3
    assert values(Dataset.range(10).take(3)) == [0, 1, 2]
    assert values(Dataset.range(10).skip(7)) == [7, 8, 9]
    assert values(Dataset.range(3).take(-1)) == [0, 1, 2]
    assert values(Dataset.range(3).skip(-1)) == []
    assert values(Dataset.range(3).repeat().take(7)) == [0, 1, 2, 0, 1, 2, 0]
    assert values(Dataset.range(0).repeat()) == []  # an empty dataset forever is empty
    assert values(Dataset.range(3).repeat(0)) == []


def test_enumerate_and_shard_as_documented():
    ds = Dataset.from_tensor_slices([1, 2, 3]).enumerate(start=5)
    assert values(ds) == [(5, 1), (6, 2), (7, 3)]
    assert ds.element_spec[0] == tg.TensorSpec((), tg.int64)
    nested = Dataset.from_tensor_slices([(7, 8), (9, 10)]).enumerate()
    assert values(nested) == [(0, [7, 8]), (1, [9, 10])]
    assert values(Dataset.range(10).shard(num_shards=3, index=0)) == [0, 3, 6, 9]
    assert values(Dataset.range(10).shard(num_shards=3, index=1)) == [1, 4, 7]
    assert values(Dataset.range(10).shard(num_shards=3, index=2)) == [2, 5, 8]
    assert [int(Dataset.range(10).shard(3, i).cardinality()) for i in range(3)] == [4, 3, 3]


def test_reduce_as_documented():
    assert Dataset.range(5).reduce(np.int64(0), lambda x, _: x + 1).numpy() == 5
    assert Dataset.range(5).reduce(np.int64(0), lambda x, y: x + y).numpy() == 10
    pairs = Dataset.from_tensor_slices(([1.0, 2.0], [3, 4]))
    total = pairs.reduce((0.0, 0), lambda s, e: (s[0] + e[0], s[1] + e[1]))
    assert (float(total[0]), int(total[1])) == (3.0, 7)
    with pytest.raises(TypeError, match="structure and dtypes"):
        Dataset.range(3).reduce(np.int64(0), lambda s, x: tg.cast(s, tg.float32))


def test_cardinality_as_documented():
    ds = Dataset.range(42)
    assert int(ds.cardinality()) == 42
    assert ds.cardinality().dtype == tg.int64
    ds = ds.repeat()
    assert int(ds.cardinality()) == tg.data.INFINITE_CARDINALITY == -1
    ds = ds.filter(lambda x: True)
    assert int(ds.cardinality()) == tg.data.UNKNOWN_CARDINALITY == -2
    assert tg.data.experimental.INFINITE_CARDINALITY == -1
    assert int(Dataset.range(10).skip(3).take(5).cardinality()) == 5
    assert int(Dataset.range(5).repeat(3).batch(4).cardinality()) == 4
    assert int(Dataset.range(5).repeat().take(8).cardinality()) == 8
    assert len(Dataset.range(5).map(lambda x: x).shuffle(2).cache().prefetch(1)) == 5
    with pytest.raises(TypeError, match="infinite"):
        len(Dataset.range(5).repeat())
    with pytest.raises(TypeError, match="unknown"):
        len(Dataset.range(5).filter(lambda x: True))


# -- shuffle -------------------------------------------------------------------------------------

def test_shuffle_with_a_seed_is_a_repeatable_permutation_reshuffled_per_epoch():
    ds = Dataset.range(20).shuffle(20, seed=42)
    first, second = values(ds), values(ds)
    assert sorted(first) == sorted(second) == list(range(20))
    assert first != list(range(20)) and first != second
    again = Dataset.range(20).shuffle(20, seed=42)
    assert values(again) == first and values(again) == second  # a seed repeats the epochs
    fixed = Dataset.range(20).shuffle(20, seed=42, reshuffle_each_iteration=False)
    assert values(fixed) == values(fixed)
    # repeat iterates the shuffled dataset again: each repetition is a new order
    twice = values(Dataset.range(10).shuffle(10, seed=1).repeat(2))
    assert sorted(twice[:10]) == sorted(twice[10:]) == list(range(10))
    assert twice[:10] != twice[10:]


def test_shuffle_global_seed():
    tg.random.set_seed(3)
    a = values(Dataset.range(10).shuffle(10))
    tg.random.set_seed(3)
    assert values(Dataset.range(10).shuffle(10)) == a


def test_shuffle_buffer_semantics():
    # buffer_size 1: the input order
    assert values(Dataset.range(10).shuffle(1, seed=0)) == list(range(10))
    # buffer_size 2: the first output is 0 or 1; element i can only come out at position >= i-1
    for seed in range(20):
        out = values(Dataset.range(10).shuffle(2, seed=seed))
        assert sorted(out) == list(range(10))
        assert out[0] in (0, 1)
        assert all(pos >= x - 1 for pos, x in enumerate(out))
    # each output is uniform over the buffer: the first of range(4).shuffle(3) is 0, 1 or 2,
    # each a third of the time
    firsts = collections.Counter(values(Dataset.range(4).shuffle(3, seed=s))[0]
                                 for s in range(3000))
    assert set(firsts) == {0, 1, 2}
    assert all(abs(n / 3000 - 1 / 3) < 0.04 for n in firsts.values())


# -- cache, re-iteration, iterators ------------------------------------------------------------

def test_cache_reads_once_and_datasets_are_reiterable():
    calls = []
    ds = Dataset.range(5).map(lambda x: calls.append(int(x)) or x * x).cache()
    assert values(ds) == [0, 1, 4, 9, 16]
    assert values(ds) == [0, 1, 4, 9, 16]
    assert calls == [0, 1, 2, 3, 4]
    partial = Dataset.range(3).map(lambda x: calls.append(-1) or x).cache()
    next(iter(partial))  # a partial iteration caches nothing
    assert values(partial) == [0, 1, 2]
    assert values(partial) == [0, 1, 2]
    assert calls.count(-1) == 1 + 3
    # shuffle then cache: the first order is kept
    shuffled = Dataset.range(10).shuffle(10, seed=0).cache()
    assert values(shuffled) == values(shuffled)


def test_iterators_and_numpy_iterator():
    ds = Dataset.from_tensor_slices(([1, 2], [[3.0], [4.0]]))
    it = iter(ds)
    a, b = next(it)
    assert isinstance(a, tg.Tensor) and int(a) == 1 and b.numpy().tolist() == [3.0]
    assert int(it.get_next()[0]) == 2
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    assert it.element_spec == ds.element_spec
    out = list(ds.as_numpy_iterator())
    assert isinstance(out[0][0], np.int32) and out[0][0] == 1
    assert isinstance(out[0][1], np.ndarray) and out[1][1].tolist() == [4.0]
    assert list(Dataset.range(3).as_numpy_iterator()) == [0, 1, 2]


@pytest.mark.parametrize("where", ["cpu", "cuda_emu"])
def test_elements_are_created_on_the_current_device(where):
    source = Dataset.from_tensor_slices((np.arange(6.0).reshape(3, 2), [1, 2, 3]))
    pipe = (source.map(lambda x, y: (x * 2, y), num_parallel_calls=2).shuffle(3, seed=0)
            .batch(2).prefetch(2))
    want = tg.zeros(1).device
    assert all(t.device == want for e in pipe for t in e)  # the fixture's device
    with tg.device(where):
        placed = tg.zeros(1).device
        it = iter(pipe)
    batches = list(it)  # iterated outside the block: the device of iter() holds
    assert all(t.device == placed for e in batches for t in e)
    assert sorted(sum((b[1].numpy().tolist() for b in batches), [])) == [1, 2, 3]
    with tg.device(where):
        cached = Dataset.range(3).cache()
        list(cached)
    assert {t.device for t in cached} == {want}  # cached elements move to the current device


# -- prefetch -------------------------------------------------------------------------------------

def test_prefetch_overlaps_the_pipeline_with_the_consumer():
    n, delay = 10, 0.02
    made, used = [], []

    def produce(x):
        t0 = time.perf_counter()
        time.sleep(delay)
        made.append((t0, time.perf_counter()))
        return x

    start = time.perf_counter()
    for x in Dataset.range(n).map(produce).prefetch(2):
        t0 = time.perf_counter()
        time.sleep(delay)
        used.append((t0, time.perf_counter()))
    wall = time.perf_counter() - start
    # elements are produced while the consumer works on earlier ones
    overlapping = sum(1 for m0, m1 in made[1:] if any(m0 < u1 and m1 > u0 for u0, u1 in used))
    assert overlapping >= (n - 1) // 2, (made, used)
    assert wall < 0.8 * 2 * n * delay


def test_prefetch_reraises_errors_and_autotune():
    def bad(x):
        if int(x) == 2:
            raise ZeroDivisionError("bad element")
        return x

    it = iter(Dataset.range(5).map(bad).prefetch(tg.data.AUTOTUNE))
    assert [int(next(it)), int(next(it))] == [0, 1]
    with pytest.raises(ZeroDivisionError, match="bad element"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    assert values(Dataset.range(3).prefetch(0)) == [0, 1, 2]


def _prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "tg.data.prefetch"]


def test_prefetch_thread_stops_when_the_iterator_is_dropped():
    before = len(_prefetch_threads())
    it = iter(Dataset.range(10).repeat().prefetch(2).prefetch(1))
    assert int(next(it)) == 0
    assert len(_prefetch_threads()) == before + 2
    del it
    gc.collect()
    deadline = time.time() + 5
    while len(_prefetch_threads()) > before and time.time() < deadline:
        time.sleep(0.01)
    assert len(_prefetch_threads()) == before
    for _ in Dataset.range(100).repeat().prefetch(3):
        break  # leaving a loop early drops the iterator too
    deadline = time.time() + 5
    while len(_prefetch_threads()) > before and time.time() < deadline:
        time.sleep(0.01)
    assert len(_prefetch_threads()) == before


# -- errors ---------------------------------------------------------------------------------------

def test_argument_errors():
    ds = Dataset.range(10)
    for bad in (0, -1):
        with pytest.raises(tg.InvalidArgumentError, match="batch_size must be greater than zero"):
            ds.batch(bad)
        with pytest.raises(tg.InvalidArgumentError, match="batch_size"):
            ds.padded_batch(bad)
        with pytest.raises(tg.InvalidArgumentError, match="buffer_size"):
            ds.shuffle(bad)
    with pytest.raises(tg.InvalidArgumentError, match=r"Index must be between 0 and 1 \("
                                                      r"currently index = 2\)"):
        ds.shard(2, 2)
    with pytest.raises(ValueError, match="Index must be between"):
        ds.shard(2, -1)
    with pytest.raises(tg.InvalidArgumentError, match="num_shards"):
        ds.shard(0, 0)
    with pytest.raises(TypeError, match="batch_size must be an integer"):
        ds.batch(2.5)
    with pytest.raises(tg.InvalidArgumentError, match="count"):
        ds.repeat(-2)
    with pytest.raises(tg.InvalidArgumentError, match="num_parallel_calls"):
        ds.map(lambda x: x, num_parallel_calls=0)
    with pytest.raises(TypeError, match="callable"):
        ds.map(3)
    with pytest.raises(tg.InvalidArgumentError, match="step"):
        Dataset.range(0, 5, 0)
    with pytest.raises(tg.InvalidArgumentError, match="Dimensions 2 and 3 are not compatible"):
        Dataset.from_tensor_slices(([1, 2], [1, 2, 3]))
    with pytest.raises(ValueError, match="rank >= 1"):
        Dataset.from_tensor_slices(1.0)
    with pytest.raises(TypeError, match="None"):
        Dataset.from_tensor_slices(([1, 2], None))
    with pytest.raises(TypeError, match="datasets"):
        Dataset.zip((Dataset.range(2), [1, 2]))


# -- training -------------------------------------------------------------------------------------

def test_training_loop_over_a_dataset():
    tg.random.set_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 3)).astype(np.float32)
    w_true = np.array([[1.5], [-2.0], [0.5]], np.float32)
    y = (x @ w_true + 0.3 + 0.01 * rng.standard_normal((256, 1))).astype(np.float32)
    ds = (Dataset.from_tensor_slices((x, y)).shuffle(256, seed=0).batch(32)
          .prefetch(tg.data.AUTOTUNE))
    model = tg.layers.Sequential([tg.layers.Dense(8, activation="tanh"), tg.layers.Dense(1)])
    opt = tg.optimizers.Adam(learning_rate=0.05)
    epoch_losses = []
    for epoch in range(30):
        losses = []
        for xb, yb in ds:
            with tg.GradientTape() as tape:
                loss = tg.reduce_mean(tg.losses.mean_squared_error(yb, model(xb)))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            losses.append(float(loss))
        epoch_losses.append(np.mean(losses))
    assert len(losses) == 8  # 256 examples in batches of 32
    assert epoch_losses[0] > 1.0, epoch_losses  # about the targets' variance at first
    assert epoch_losses[-1] < 0.02, epoch_losses  # 0.006 here; the noise floor is 1e-4


@pytest.mark.parametrize("pipeline", [
    lambda ds: ds,
    lambda ds: ds.prefetch(2),
    lambda ds: ds.filter(lambda x: x > -1.0),
])
def test_tapes_do_not_see_what_the_pipeline_computes(pipeline):
    # TF runs a dataset's functions as graphs of their own: a tape around the loop records
    # nothing of `map`, whether the map runs in the consumer thread or a prefetch thread
    v = tg.Variable(2.0)
    ds = pipeline(tg.data.Dataset.from_tensor_slices(np.arange(3, dtype=np.float32))
                  .map(lambda x: x * v))
    with tg.GradientTape(persistent=True) as tape:
        total = tg.add_n(list(ds))
        reduced = ds.reduce(tg.constant(0.0), lambda s, x: s + x * v)
        kept = total * v  # ops of the loop itself are still recorded
    assert float(total) == 6.0 and float(reduced) == 12.0
    assert tape.gradient(total, v) is None
    assert tape.gradient(reduced, v) is None
    assert float(tape.gradient(kept, v)) == 6.0


def test_get_next_at_the_end_raises_out_of_range_as_tf():
    it = iter(tg.data.Dataset.range(1))
    assert int(it.get_next()) == 0
    with pytest.raises(tg.errors.OutOfRangeError, match="End of sequence"):
        it.get_next()
    with pytest.raises(StopIteration):
        next(iter(tg.data.Dataset.range(0)))


def test_experimental_cardinality_is_the_datasets():
    ds = tg.data.Dataset.range(7).batch(2)
    assert int(tg.data.experimental.cardinality(ds)) == int(ds.cardinality()) == 4
    assert int(tg.data.experimental.cardinality(ds.repeat())) == \
        tg.data.experimental.INFINITE_CARDINALITY
