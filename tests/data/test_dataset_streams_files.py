"""tg.data: interleave, flat_map, window, rebatch, the file cache, options, and prefetch's
copy stream on the GPU path (CuPy's `cuda.Stream`; the simulated CuPy on cuda_sim)."""
import os
import threading

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.data import cache_file, iterators

Dataset = tg.data.Dataset


def ints(ds):
    return [int(x) for x in ds]


# -- interleave, flat_map -----------------------------------------------------------------------

def test_interleave_order_is_tf_documented_one():
    ds = Dataset.range(1, 6)
    expected = [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5,
                5, 5, 5, 5]
    rep = lambda x: Dataset.from_tensors(x).repeat(6)  # noqa: E731
    assert ints(ds.interleave(rep, cycle_length=2, block_length=4)) == expected
    # the parallel version keeps the order
    assert ints(ds.interleave(rep, cycle_length=2, block_length=4,
                              num_parallel_calls=tg.data.AUTOTUNE, deterministic=False)) == \
        expected
    # block_length 1: round robin; datasets of different lengths
    ds = Dataset.range(1, 4).interleave(lambda x: Dataset.range(10 * x, 10 * x + x),
                                        cycle_length=3)
    assert ints(ds) == [10, 20, 30, 21, 31, 32]
    # cycle_length 1 is flat_map
    assert ints(Dataset.range(3).interleave(lambda x: Dataset.range(x), cycle_length=1)) == \
        ints(Dataset.range(3).flat_map(lambda x: Dataset.range(x))) == [0, 0, 1]


def test_interleave_reads_ahead_in_threads_and_unpacks_tuples():
    names = []

    def source(i):
        def gen():
            names.append(threading.current_thread().name)
            yield i
        return Dataset.from_generator(gen, output_signature=tg.TensorSpec((), tg.int64))

    ds = Dataset.from_tensor_slices((np.arange(4), np.arange(4) * 10)).interleave(
        lambda a, b: source(int(a + b)), cycle_length=2, num_parallel_calls=2)
    assert ints(ds) == [0, 11, 22, 33]
    assert names and all(n == "tg.data.prefetch" for n in names)
    assert ds.element_spec == tg.TensorSpec((), tg.int64)
    assert int(ds.cardinality()) == tg.data.UNKNOWN_CARDINALITY


def test_interleave_and_flat_map_errors():
    with pytest.raises(TypeError, match="Dataset.interleave: map_func must return a "
                                        "tg.data.Dataset, got Tensor"):
        list(Dataset.range(2).interleave(lambda x: x, cycle_length=1))
    with pytest.raises(TypeError, match="Dataset.flat_map: map_func must return"):
        Dataset.range(2).flat_map(lambda x: [x]).element_spec
    with pytest.raises(tg.errors.InvalidArgumentError, match="cycle_length must be positive"):
        Dataset.range(2).interleave(Dataset.range, cycle_length=0)
    with pytest.raises(tg.errors.InvalidArgumentError, match="block_length must be greater"):
        Dataset.range(2).interleave(Dataset.range, block_length=0)
    with pytest.raises(TypeError, match="Dataset.flat_map: `map_func` must be a Python callable"):
        Dataset.range(2).flat_map(3)


# -- window ---------------------------------------------------------------------------------------

def windows(ds):
    return [ints(w) for w in ds]


def test_window_tf_documented_examples():
    ds = Dataset.range(7)
    assert windows(ds.window(2)) == [[0, 1], [2, 3], [4, 5], [6]]
    assert windows(ds.window(3, 2, 1, True)) == [[0, 1, 2], [2, 3, 4], [4, 5, 6]]
    assert windows(ds.window(3, 1, 2, True)) == [[0, 2, 4], [1, 3, 5], [2, 4, 6]]
    # shorter windows at the end unless drop_remainder; windows further apart than long
    assert windows(ds.window(3, shift=2)) == [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]
    assert windows(ds.window(2, shift=3)) == [[0, 1], [3, 4], [6]]
    for w in (ds.window(2), ds.window(3, 2, 1, True), ds.window(3, 1, 2, True),
              ds.window(3, shift=2), ds.window(2, shift=3), ds.window(8, drop_remainder=True)):
        assert int(w.cardinality()) == len(list(w))


def test_window_of_nested_elements_gives_nested_datasets():
    ds = Dataset.from_tensor_slices(([1, 2, 3, 4], [5.0, 6.0, 7.0, 8.0])).window(2)
    assert ds.element_spec == (tg.data.DatasetSpec(tg.TensorSpec((), tg.int32)),
                               tg.data.DatasetSpec(tg.TensorSpec((), tg.float32)))
    got = [(ints(a), [float(v) for v in b]) for a, b in ds]
    assert got == [([1, 2], [5.0, 6.0]), ([3, 4], [7.0, 8.0])]
    ds = Dataset.from_tensor_slices({"a": [1, 2, 3]}).window(2)
    assert [{k: ints(v) for k, v in w.items()} for w in ds] == [{"a": [1, 2]}, {"a": [3]}]
    # the usual sliding-window batches
    frames = Dataset.range(6).window(3, shift=1, drop_remainder=True).flat_map(
        lambda w: w.batch(3))
    assert frames.element_spec == tg.TensorSpec((None,), tg.int64)
    assert [b.numpy().tolist() for b in frames] == [[0, 1, 2], [1, 2, 3], [2, 3, 4],
                                                    [3, 4, 5]]
    pairs = Dataset.from_tensor_slices(([1, 2, 3], [4, 5, 6])).window(2).flat_map(
        lambda a, b: Dataset.zip((a.batch(2), b.batch(2))))
    assert [(a.numpy().tolist(), b.numpy().tolist()) for a, b in pairs] == [
        ([1, 2], [4, 5]), ([3], [6])]


def test_window_errors():
    with pytest.raises(tg.errors.InvalidArgumentError, match="Dataset.window: size must be "
                                                             "greater than zero"):
        Dataset.range(3).window(0)
    with pytest.raises(tg.errors.InvalidArgumentError, match="shift must be greater"):
        Dataset.range(3).window(2, shift=0)
    with pytest.raises(TypeError, match="Dataset.window: stride must be an integer"):
        Dataset.range(3).window(2, stride=1.5)


def test_rebatch():
    ds = Dataset.range(7).batch(4).rebatch(3)
    assert [b.numpy().tolist() for b in ds] == [[0, 1, 2], [3, 4, 5], [6]]
    ds = Dataset.range(7).batch(4).rebatch(3, drop_remainder=True)
    assert [b.numpy().tolist() for b in ds] == [[0, 1, 2], [3, 4, 5]]
    assert ds.element_spec == tg.TensorSpec((3,), tg.int64)


# -- the file cache -------------------------------------------------------------------------------

def _counted(calls):
    def fn(x):
        calls.append(int(x))
        return x, tg.cast(x, tg.float32) * 0.5
    return Dataset.range(5).map(fn)


def test_file_cache_second_iteration_reads_the_file(tmp_path):
    calls = []
    prefix = str(tmp_path / "cache")
    ds = _counted(calls).cache(prefix)
    first = [(int(a), float(b)) for a, b in ds]
    assert sorted(os.listdir(tmp_path)) == ["cache.tgcache"]
    n = len(calls)
    second = [(int(a), float(b)) for a, b in ds]
    assert second == first == [(i, i * 0.5) for i in range(5)] and len(calls) == n
    # another pipeline (another process) with the same file reads it, on the current device
    other_calls = []
    third = list(_counted(other_calls).cache(prefix))
    assert other_calls == [1, 2]  # only the calls on element_spec's placeholders
    assert [(int(a), float(b)) for a, b in third] == first
    a, b = third[0]
    assert a.dtype == tg.int64 and b.dtype == tg.float32 and a.shape == ()
    assert a.device == tg.zeros(1).device
    # tapegpu's own format, no pickle
    with open(prefix + ".tgcache", "rb") as f:
        assert f.read(len(cache_file.MAGIC)) == cache_file.MAGIC


def test_incomplete_file_cache_is_not_used(tmp_path):
    calls = []
    prefix = str(tmp_path / "c")
    ds = _counted(calls).cache(prefix)
    it = iter(ds)
    next(it), next(it)
    it.close()
    assert os.listdir(tmp_path) == []  # the partial file is removed, nothing is cached
    ds.take(3).batch(2).as_numpy_iterator().__next__()
    assert os.listdir(tmp_path) == []
    calls.clear()
    assert ints(ds.map(lambda a, b: a)) == [0, 1, 2, 3, 4]
    assert [c for c in calls] == [0, 1, 2, 3, 4]  # computed: there was no cache
    # a partial file left by a process that died is not read either
    (tmp_path / "d.tgcache.partial-1-0").write_bytes(cache_file.MAGIC)
    assert [int(a) for a, _ in _counted([]).cache(str(tmp_path / "d"))] == [0, 1, 2, 3, 4]


def test_file_cache_errors(tmp_path):
    prefix = str(tmp_path / "c")
    list(_counted([]).cache(prefix))
    other = Dataset.range(5).map(lambda x: (tg.cast(x, tg.float32), x)).cache(prefix)
    with pytest.raises(tg.errors.InvalidArgumentError, match="data types do not match at "
                       "component 0: expected float32 but the file has int64"):
        list(other)
    data = (tmp_path / "c.tgcache").read_bytes()
    (tmp_path / "c.tgcache").write_bytes(data[:-20])
    with pytest.raises(tg.errors.DataLossError, match="damaged"):
        list(_counted([]).cache(prefix))
    (tmp_path / "c.tgcache").write_bytes(b"not a cache")
    with pytest.raises(tg.errors.DataLossError, match="is not a tapegpu cache file"):
        list(_counted([]).cache(prefix))
    with pytest.raises(tg.errors.NotFoundError, match="Dataset.cache: cannot create the cache"):
        list(_counted([]).cache(str(tmp_path / "missing" / "c")))
    with pytest.raises(TypeError, match="Dataset.cache: filename must be a str"):
        Dataset.range(2).cache(3)


# -- options --------------------------------------------------------------------------------------

def test_options_are_accepted_merged_and_reported():
    a = tg.data.Options()
    a.deterministic = False
    a.threading.private_threadpool_size = 2
    b = tg.data.Options()
    b.experimental_distribute.auto_shard_policy = tg.data.experimental.AutoShardPolicy.OFF
    b.threading.private_threadpool_size = 4
    ds = Dataset.range(3).with_options(a).map(lambda x: x + 1).with_options(b)
    assert ints(ds) == [1, 2, 3]
    got = ds.options()
    assert got.deterministic is False and got.threading.private_threadpool_size == 4
    assert got.experimental_distribute.auto_shard_policy == -1
    assert Dataset.range(3).options() == tg.data.Options()
    zipped = Dataset.zip((Dataset.range(2).with_options(a), Dataset.range(2)))
    assert zipped.options().deterministic is False
    with pytest.raises(AttributeError, match="Cannot set the property not_an_option on Options"):
        a.not_an_option = 1
    with pytest.raises(TypeError, match="Dataset.with_options: options must be a "
                                        "tg.data.Options"):
        Dataset.range(2).with_options({"deterministic": False})


# -- prefetch's copy stream -----------------------------------------------------------------------

def test_prefetch_runs_the_pipeline_on_its_own_stream(tg_device, monkeypatch):
    seen, made = [], []
    real = iterators.copy_stream
    monkeypatch.setattr(iterators, "copy_stream", lambda dev: made.append(real(dev)) or made[-1])

    def note(x):
        dev = tg.zeros(1)._dev
        cuda = getattr(dev.xp, "cuda", None)
        seen.append(None if cuda is None else cuda.get_current_stream())
        return x * 2

    ds = Dataset.range(6).map(note).prefetch(2)
    assert ints(ds) == [0, 2, 4, 6, 8, 10]
    assert len(made) == 1
    stream = made[0]
    if tg_device == "cuda_sim" or tg_device.startswith("gpu"):  # a GPU: a CUDA stream
        import cupy  # the simulated CuPy on cuda_sim, the real one on a GPU
        assert isinstance(stream, iterators.DeviceStream)
        side = stream._stream
        # the map ran in the prefetch thread with the copy stream current
        assert all(s is not None and s.ptr == side.ptr for s in seen[-6:])
        if tg_device == "cuda_sim":  # the stand-in's streams remember the events they waited for
            # the consumer's stream waited for each element's event, recorded on the copy stream
            waited = list(cupy.cuda.get_current_stream().waited)
            assert len(waited) >= 6 and all(e.stream is side for e in waited[-6:])
        assert not stream._held  # released at the end
    else:  # numpy, cuda_emu: no streams
        assert isinstance(stream, iterators.HostStream)
        assert all(s is None for s in seen)


def test_device_stream_holds_elements_until_the_consumer_stream_passes_them():
    class Event:
        def __init__(self):
            self.done = False

    class Stream:
        def __init__(self):
            self.events, self.waited = [], []

        def record(self):
            self.events.append(Event())
            return self.events[-1]

        def wait_event(self, event):
            self.waited.append(event)

        def synchronize(self):
            for e in self.events:
                e.done = True

    current = Stream()
    cuda = type("cuda", (), {"Stream": lambda non_blocking: Stream(),
                             "get_current_stream": staticmethod(lambda: current)})
    s = iterators.DeviceStream(cuda)
    ready = s.record()
    assert s.hand_over("a", ready) == "a" and current.waited == [ready]
    s.hand_over("b", s.record())
    assert [e[0] for e in s._held] == ["a", "b"]  # "a" may still be read by queued steps
    current.events[0].done = True  # the consumer's stream passed the steps that used "a"
    s.hand_over("c", s.record())
    assert [e[0] for e in s._held] == ["b", "c"]
    s.release()
    assert not s._held and all(e.done for e in current.events)
