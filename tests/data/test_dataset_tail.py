"""tf.data's remaining transformations and sources: concatenate, scan, take_while, counter,
random, sample_from_datasets, choose_from_datasets, get_single_element, unique,
group_by_window, bucket_by_sequence_length — values against their definitions, element_spec
and cardinality."""
import collections

import numpy as np
import pytest

import tapegpu as tg

D = tg.data.Dataset
UNKNOWN, INFINITE = tg.data.UNKNOWN_CARDINALITY, tg.data.INFINITE_CARDINALITY


def _ints(ds):
    return [int(x) for x in ds]


def test_concatenate_values_spec_and_cardinality():
    a, b = D.range(3), D.range(5, 7)
    ds = a.concatenate(b)
    assert _ints(ds) == [0, 1, 2, 5, 6] and _ints(ds) == [0, 1, 2, 5, 6]
    assert int(ds.cardinality()) == 5
    assert int(a.concatenate(D.range(2).repeat()).cardinality()) == INFINITE
    assert int(a.filter(lambda x: True).concatenate(b).cardinality()) == UNKNOWN
    ragged = D.from_tensor_slices([[1, 2]]).concatenate(D.from_tensor_slices([[1, 2, 3]]))
    assert ragged.element_spec == tg.TensorSpec((None,), tg.int32)
    assert [x.numpy().tolist() for x in ragged] == [[1, 2], [1, 2, 3]]
    assert _ints(D.range(0).concatenate(D.range(0))) == []
    with pytest.raises(TypeError, match="Incompatible"):
        a.concatenate(D.range(3).map(lambda x: tg.cast(x, tg.float32)))
    with pytest.raises(TypeError, match="Incompatible"):
        a.concatenate(D.zip(a, a))


def test_concatenate_keeps_both_inputs_options():
    options = tg.data.Options()
    options.deterministic = False
    ds = D.range(2).concatenate(D.range(2).with_options(options))
    assert ds.options().deterministic is False


def test_scan_is_a_running_fold():
    xs = np.arange(1, 7)
    ds = D.from_tensor_slices(xs).scan(np.int64(0), lambda s, x: (s + x, s * x))
    state, want = 0, []
    for x in xs:
        want.append(state * x)
        state += x
    assert _ints(ds) == want and int(ds.cardinality()) == 6
    assert ds.element_spec == tg.TensorSpec((), tg.int64)
    # tuple elements come as one argument; a growing output gets a None dimension
    pairs = D.from_tensor_slices(([1, 2], [3, 4])).scan(
        tg.constant(0), lambda s, x: (s + x[0], tg.fill([x[1]], s)))
    assert pairs.element_spec == tg.TensorSpec((None,), tg.int32)
    assert [x.numpy().tolist() for x in pairs] == [[0, 0, 0], [1, 1, 1, 1]]
    with pytest.raises(TypeError, match="structure and dtypes"):
        list(D.range(3).scan(np.int64(0), lambda s, x: (tg.cast(s, tg.float32), x)))
    with pytest.raises(TypeError, match="pair"):
        list(D.range(3).scan(np.int64(0), lambda s, x: s + x))


def test_take_while_stops_at_the_first_false():
    ds = D.from_tensor_slices([1, 2, 5, 1, 0]).take_while(lambda x: x < 4)
    assert _ints(ds) == [1, 2] and int(ds.cardinality()) == UNKNOWN
    pairs = D.from_tensor_slices(([1, 2], [3, 4])).take_while(lambda a, b: a < 2)
    assert [(int(a), int(b)) for a, b in pairs] == [(1, 3)]
    assert _ints(D.range(5).take_while(lambda x: x > 9)) == []
    with pytest.raises(ValueError, match="bool scalar"):
        list(D.range(3).take_while(lambda x: x))


def test_counter_and_random_sources():
    c = D.counter(2, -3, dtype=tg.int32)
    assert _ints(c.take(4)) == [2, -1, -4, -7]
    assert c.element_spec == tg.TensorSpec((), tg.int32) and int(c.cardinality()) == INFINITE
    assert _ints(D.counter().take(3)) == [0, 1, 2]
    r = D.random(seed=4)
    assert r.element_spec == tg.TensorSpec((), tg.int64) and int(r.cardinality()) == INFINITE
    first = _ints(r.take(200))
    assert first == _ints(r.take(200)) == _ints(D.random(seed=4).take(200))
    assert first != _ints(D.random(seed=5).take(200))
    assert all(0 <= v < 2 ** 32 for v in first) and len(set(first)) > 190
    again = D.random(seed=4, rerandomize_each_iteration=True).take(50)
    assert _ints(again) != _ints(again)
    tg.random.set_seed(3)
    a = _ints(D.random().take(5))
    tg.random.set_seed(3)
    assert a == _ints(D.random().take(5))


def test_sample_from_datasets_draws_by_weight():
    ds = D.sample_from_datasets([D.range(3), D.range(10, 15)], seed=1)
    got = _ints(ds)
    assert sorted(got) == [0, 1, 2, 10, 11, 12, 13, 14]
    assert [v for v in got if v < 10] == [0, 1, 2]  # each input keeps its order
    assert int(ds.cardinality()) == UNKNOWN and got == _ints(ds)
    stop = _ints(D.sample_from_datasets([D.range(3), D.range(10, 15)], seed=1,
                                        stop_on_empty_dataset=True))
    assert stop == got[:len(stop)] and len(stop) < len(got)
    assert stop.count(0) + stop.count(1) + stop.count(2) == 3  # it ended on an empty pick
    forever = D.sample_from_datasets([D.range(1).repeat(), D.range(1, 2).repeat()],
                                     weights=[0.8, 0.2], seed=0)
    assert int(forever.cardinality()) == INFINITE
    counts = collections.Counter(_ints(forever.take(4000)))
    assert abs(counts[0] / 4000 - 0.8) < 0.03
    only = D.sample_from_datasets([D.range(3), D.range(10, 13)], weights=[0.0, 1.0], seed=2)
    assert _ints(only) == [10, 11, 12]
    with pytest.raises(ValueError, match="same length"):
        D.sample_from_datasets([D.range(3), D.range(3)], weights=[1.0])
    with pytest.raises(ValueError, match="should not be empty"):
        D.sample_from_datasets([])
    with pytest.raises(NotImplementedError, match="weights given as a dataset"):
        D.sample_from_datasets([D.range(3)], weights=D.from_tensors([1.0]).repeat())
    with pytest.raises(tg.errors.InvalidArgumentError, match="non-negative"):
        D.sample_from_datasets([D.range(3), D.range(3)], weights=[1.0, -1.0])
    with pytest.raises(TypeError, match="compatible element specs"):
        D.sample_from_datasets([D.range(3), D.range(3).map(lambda x: tg.cast(x, tg.float32))])


def test_choose_from_datasets_follows_the_choices():
    picks = D.from_tensor_slices(np.array([0, 1, 1, 0, 0, 0, 1], np.int64))
    ds = D.choose_from_datasets([D.range(3), D.range(10, 15)], picks)
    assert _ints(ds) == [0, 10, 11, 1, 2]
    skip = D.choose_from_datasets([D.range(3), D.range(10, 15)], picks,
                                  stop_on_empty_dataset=False)
    assert _ints(skip) == [0, 10, 11, 1, 2, 12]
    assert ds.element_spec == tg.TensorSpec((), tg.int64)
    with pytest.raises(TypeError, match="scalar `tg.int64`"):
        D.choose_from_datasets([D.range(3)], D.from_tensor_slices(np.array([0], np.int32)))
    with pytest.raises(tg.errors.InvalidArgumentError, match="out of range: 2 >= 1"):
        list(D.choose_from_datasets([D.range(3)], D.from_tensor_slices(np.array([2]))))


def test_get_single_element():
    value = D.from_tensors(([1, 2], 3.0)).get_single_element()
    assert value[0].numpy().tolist() == [1, 2] and float(value[1]) == 3.0
    with pytest.raises(tg.errors.InvalidArgumentError, match="was empty"):
        D.range(0).get_single_element()
    with pytest.raises(tg.errors.InvalidArgumentError, match="more than one"):
        D.range(2).get_single_element()


def test_unique_keeps_first_occurrences():
    xs = np.random.default_rng(0).integers(0, 6, 40)
    ds = D.from_tensor_slices(xs).unique()
    assert _ints(ds) == list(dict.fromkeys(xs.tolist()))
    assert ds.element_spec == tg.TensorSpec((), tg.int64) and int(ds.cardinality()) == UNKNOWN
    with pytest.raises(TypeError, match="only"):
        D.from_tensor_slices([1.0, 2.0]).unique()
    with pytest.raises(tg.errors.InvalidArgumentError, match="single component"):
        D.from_tensor_slices(([1], [2])).unique()


def _group_reference(xs, key, size):
    """group_by_window's definition: windows per key, emitted when full, the rest at the end
    in the order the keys first appeared."""
    windows, out = {}, []
    for x in xs:
        k = key(x)
        windows.setdefault(k, []).append(x)
        if len(windows[k]) == size(k):
            out.append(windows.pop(k))
    return out + list(windows.values())


def test_group_by_window_matches_the_definition():
    xs = list(range(17))
    ds = D.range(17).group_by_window(lambda x: x % 3, lambda k, w: w.batch(10),
                                     window_size_func=lambda k: k + 2)
    assert [b.numpy().tolist() for b in ds] == _group_reference(xs, lambda x: x % 3,
                                                                lambda k: k + 2)
    assert ds.element_spec == tg.TensorSpec((None,), tg.int64)
    assert int(ds.cardinality()) == UNKNOWN
    fixed = D.range(10).group_by_window(lambda x: x % 2, lambda k, w: w.batch(2), window_size=4)
    assert [b.numpy().tolist() for b in fixed] == [[0, 2], [4, 6], [1, 3], [5, 7], [8], [9]]
    with pytest.raises(ValueError, match="Either"):
        D.range(3).group_by_window(lambda x: x, lambda k, w: w)
    with pytest.raises(ValueError, match="int64 scalar"):
        list(D.range(3).group_by_window(lambda x: tg.cast(x, tg.int32), lambda k, w: w, 2))


SEQS = [[0], [1, 2, 3, 4], [5, 6, 7], [7, 8, 9, 10, 11], list(range(13, 21)), [21, 22]]


def _seqs():
    return D.from_generator(lambda: SEQS, tg.int64, output_shapes=[None])


def _pad(rows, length, value=0):
    return [r + [value] * (length - len(r)) for r in rows]


def test_bucket_by_sequence_length_pads_each_bucket():
    ds = _seqs().bucket_by_sequence_length(lambda e: tg.shape(e)[0], [3, 5], [2, 2, 2])
    # lengths 1 4 3 5 8 2 -> buckets 0 1 1 2 2 0; each full bucket is emitted as it fills
    want = [_pad([SEQS[1], SEQS[2]], 4), _pad([SEQS[3], SEQS[4]], 8), _pad([SEQS[0], SEQS[5]], 2)]
    assert [b.numpy().tolist() for b in ds] == want
    assert ds.element_spec == tg.TensorSpec((None, None), tg.int64)
    bounded = _seqs().bucket_by_sequence_length(
        lambda e: tg.shape(e)[0], [3, 9], [2, 2, 2], pad_to_bucket_boundary=True,
        padding_values=np.int64(-1), drop_remainder=True)
    assert [b.numpy().tolist() for b in bounded] == [
        _pad([SEQS[1], SEQS[2]], 8, -1), _pad([SEQS[3], SEQS[4]], 8, -1),
        _pad([SEQS[0], SEQS[5]], 2, -1)]
    assert bounded.element_spec == tg.TensorSpec((None, None), tg.int64)
    partial = _seqs().bucket_by_sequence_length(lambda e: tg.shape(e)[0], [3], [4, 3],
                                                drop_remainder=True)
    assert [b.numpy().tolist() for b in partial] == [_pad([SEQS[1], SEQS[2], SEQS[3]], 5)]
    same = D.from_tensor_slices(np.arange(6).reshape(3, 2)).bucket_by_sequence_length(
        lambda e: tg.shape(e)[0], [2], [2, 2], no_padding=True)
    assert [b.numpy().tolist() for b in same] == [[[0, 1], [2, 3]], [[4, 5]]]


def test_bucket_by_sequence_length_errors():
    with pytest.raises(ValueError, match=r"len\(bucket_boundaries\) \+ 1"):
        _seqs().bucket_by_sequence_length(lambda e: tg.shape(e)[0], [3, 5], [2, 2])
    too_long = _seqs().bucket_by_sequence_length(lambda e: tg.shape(e)[0], [3, 5], [2, 2, 2],
                                                 pad_to_bucket_boundary=True)
    with pytest.raises(tg.errors.InvalidArgumentError, match="max\\(bucket_boundaries\\)"):
        list(too_long)
