"""keras.utils: set_random_seed, pad_sequences, normalize, timeseries_dataset_from_array and
Progbar against their definitions (Keras 3.15's behaviour)."""
import random

import numpy as np
import pytest

import tapegpu as tg

u = tg.keras.utils


def test_set_random_seed_seeds_python_numpy_and_tapegpu():
    def draw():
        return random.random(), np.random.rand(), tg.random.normal((3,)).numpy().tolist()

    u.set_random_seed(7)
    a = draw()
    u.set_random_seed(7)
    assert draw() == a
    u.set_random_seed(8)
    b = draw()
    assert all(x != y for x, y in zip(a, b))
    for bad in (1.5, None, "1", True):
        with pytest.raises(ValueError, match="integer"):
            u.set_random_seed(bad)


def _pad_reference(seqs, maxlen, padding, truncating, value, dtype):
    n = max(map(len, seqs)) if maxlen is None else maxlen
    out = []
    for s in seqs:
        s = list(s)
        s = s[max(len(s) - n, 0):] if truncating == "pre" else s[:n]
        fill = [value] * (n - len(s))
        out.append(fill + s if padding == "pre" else s + fill)
    return np.array(out, dtype=dtype)


@pytest.mark.parametrize("maxlen", [None, 2, 5, 0])
@pytest.mark.parametrize("padding", ["pre", "post"])
@pytest.mark.parametrize("truncating", ["pre", "post"])
def test_pad_sequences_matches_the_definition(maxlen, padding, truncating):
    seqs = [[1, 2, 3], [4, 5], [6], []]
    got = u.pad_sequences(seqs, maxlen=maxlen, padding=padding, truncating=truncating,
                          value=-1)
    want = _pad_reference(seqs, maxlen, padding, truncating, -1, np.int32)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_pad_sequences_dtypes_trailing_shapes_and_errors():
    got = u.pad_sequences([[1, 2, 3], [4]], dtype="float32", value=0.5)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [[1, 2, 3], [0.5, 0.5, 4]])
    got = u.pad_sequences([[[1, 2], [3, 4]], [[5, 6]]], padding="post")
    np.testing.assert_array_equal(got, [[[1, 2], [3, 4]], [[5, 6], [0, 0]]])
    assert u.pad_sequences([tg.constant([1, 2]), np.array([3])]).tolist() == [[1, 2], [0, 3]]
    assert u.pad_sequences([], maxlen=3).shape == (0, 3)
    with pytest.raises(ValueError, match="Padding type"):
        u.pad_sequences([[1]], padding="middle")
    with pytest.raises(ValueError, match="Truncating type"):
        u.pad_sequences([[1]], truncating="middle")
    with pytest.raises(ValueError, match="non-iterable"):
        u.pad_sequences([1, 2])
    with pytest.raises(ValueError, match="dtype=object"):
        u.pad_sequences([[1]], value="x")
    with pytest.raises(ValueError, match="different from expected shape"):
        u.pad_sequences([[[1, 2]], [[1, 2, 3]]])


@pytest.mark.parametrize("axis,order", [(-1, 2), (0, 1), (1, np.inf), (0, 2)])
def test_normalize_numpy_and_tensor(axis, order):
    x = np.array([[3.0, -4.0, 1.0], [0.0, 0.0, 0.0], [1.0, 2.0, -2.0]])
    norm = np.linalg.norm(x, order, axis, keepdims=True)
    want = x / np.where(norm == 0, 1, norm)
    got = u.normalize(x, axis=axis, order=order)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, want)
    t = u.normalize(tg.constant(x), axis=axis, order=order)
    assert isinstance(t, tg.Tensor) and t.dtype == tg.float64
    np.testing.assert_allclose(t.numpy(), want)


def test_normalize_tensor_gradient_is_finite_and_matches_differences():
    x = np.array([[3.0, -4.0], [0.5, 2.0]])
    v = tg.constant(x)
    with tg.GradientTape() as tape:
        tape.watch(v)
        y = tg.reduce_sum(u.normalize(v) * tg.constant(np.array([[1.0, 2.0], [-1.0, 0.5]])))
    g = tape.gradient(y, v).numpy()
    eps = 1e-6
    for idx in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[idx] += eps
        lo[idx] -= eps
        f = [np.sum(u.normalize(a) * np.array([[1.0, 2.0], [-1.0, 0.5]])) for a in (hi, lo)]
        assert abs(g[idx] - (f[0] - f[1]) / (2 * eps)) < 1e-6


def _windows_reference(data, targets, length, stride, rate, start, end):
    start = start or 0
    end = len(data) if end is None else end
    count = end - start - (length - 1) * rate
    if targets is not None:
        count = min(count, len(targets))
    out = []
    for p in range(0, max(count, 0), stride):
        window = [data[start + p + j * rate] for j in range(length)]
        out.append((window, None if targets is None else targets[start + p]))
    return out


@pytest.mark.parametrize("length,stride,rate,start,end", [
    (3, 1, 1, None, None), (3, 2, 2, None, None), (5, 1, 1, 3, 12), (4, 3, 2, 2, None),
    (2, 5, 1, None, 15)])
def test_timeseries_dataset_matches_the_definition(length, stride, rate, start, end):
    data = np.arange(40).reshape(20, 2).astype(np.float32)
    targets = np.arange(100, 117)
    ds = u.timeseries_dataset_from_array(data, targets, sequence_length=length,
                                         sequence_stride=stride, sampling_rate=rate,
                                         batch_size=3, start_index=start, end_index=end)
    assert isinstance(ds, tg.data.Dataset)
    got = [(x.tolist(), int(y)) for bx, by in ds for x, y in zip(bx.numpy(), by.numpy())]
    want = [(np.array(w).tolist(), t) for w, t in
            _windows_reference(data, targets, length, stride, rate, start, end)]
    assert got == want
    assert int(ds.cardinality()) == -(-len(want) // 3)
    spec = ds.element_spec
    assert spec[0] == tg.TensorSpec((None, length, 2), tg.float32)
    assert spec[1] == tg.TensorSpec((None,), tg.int64)


def test_timeseries_dataset_without_targets_batching_or_order():
    data = np.arange(30)
    ds = u.timeseries_dataset_from_array(data, None, sequence_length=4, batch_size=None)
    assert ds.element_spec == tg.TensorSpec((4,), tg.int64)
    assert [x.numpy().tolist() for x in ds][:2] == [[0, 1, 2, 3], [1, 2, 3, 4]]
    shuffled = u.timeseries_dataset_from_array(data, None, sequence_length=4, batch_size=5,
                                               shuffle=True, seed=3)
    rows = [r.tolist() for b in shuffled for r in b.numpy()]
    assert sorted(rows) == [list(range(i, i + 4)) for i in range(27)]
    assert rows != sorted(rows)
    # the time-series tutorial's split: windows mapped into (inputs, labels)
    split = shuffled.map(lambda w: (w[:, :3], w[:, 3:]))
    x, y = next(iter(split))
    np.testing.assert_array_equal(x.numpy()[:, 1:], x.numpy()[:, :2] + 1)
    np.testing.assert_array_equal(y.numpy()[:, 0], x.numpy()[:, 2] + 1)


def test_timeseries_dataset_errors():
    data = np.arange(20)
    for kw, match in [(dict(sampling_rate=0), "sampling_rate"),
                      (dict(sequence_stride=0), "sequence_stride"),
                      (dict(start_index=-1), "0 or greater"),
                      (dict(start_index=30), "lower than the length"),
                      (dict(start_index=5, end_index=4), "higher than `start_index`"),
                      (dict(end_index=25), "lower than the length")]:
        with pytest.raises(ValueError, match=match):
            u.timeseries_dataset_from_array(data, None, sequence_length=3, **kw)
    empty = u.timeseries_dataset_from_array(data, None, sequence_length=30)
    assert list(empty) == []


def test_progbar_averages_values_and_draws(capsys):
    bar = u.Progbar(4, width=10, stateful_metrics=["acc"])
    bar.update(1, [("loss", 1.0), ("acc", 0.5)])
    bar.add(3, [("loss", 3.0), ("acc", 0.25)])
    assert bar.mean("loss") == pytest.approx((1.0 + 3 * 3.0) / 4)
    assert bar.mean("acc") == 0.25
    out = capsys.readouterr().out
    assert out.endswith("\n") and "4/4 [==========]" in out and "loss: 2.5000" in out
    quiet = u.Progbar(None, verbose=0)
    quiet.add(2, [("loss", tg.constant(2.0))])
    assert quiet.mean("loss") == 2.0 and capsys.readouterr().out == ""
