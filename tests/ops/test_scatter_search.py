"""scatter_nd, tensor_scatter_nd_*, searchsorted, unique and nn.embedding_lookup: TensorFlow's
documented examples, repeated indices, gradients and errors."""
import numpy as np
import pytest

import tapegpu as tg


def test_scatter_nd_tf_examples():
    got = tg.scatter_nd([[4], [3], [1], [7]], tg.constant([9, 10, 11, 12]), tf_shape := [8])
    assert got.numpy().tolist() == [0, 11, 0, 10, 9, 0, 0, 12] and got.shape == tuple(tf_shape)
    updates = tg.constant([[[5, 5, 5, 5], [6, 6, 6, 6], [7, 7, 7, 7], [8, 8, 8, 8]],
                           [[5, 5, 5, 5], [6, 6, 6, 6], [7, 7, 7, 7], [8, 8, 8, 8]]])
    got = tg.scatter_nd([[0], [2]], updates, tg.constant([4, 4, 4])).numpy()
    assert got[0].tolist() == got[2].tolist() == updates.numpy()[0].tolist()
    assert not got[[1, 3]].any()


def test_scatter_nd_repeated_indices_add_and_gradient_gathers():
    u = tg.constant([1.0, 2.0, 4.0], tg.float64)
    with tg.GradientTape() as tape:
        tape.watch(u)
        y = tg.scatter_nd([[1, 0], [0, 1], [1, 0]], u, [2, 2])
        loss = tg.reduce_sum(y * tg.constant([[1.0, 10.0], [100.0, 1000.0]], tg.float64))
    assert y.numpy().tolist() == [[0, 2], [5, 0]]
    assert tape.gradient(loss, u).numpy().tolist() == [100, 10, 100]


def test_tensor_scatter_nd_ops_tf_examples():
    t = tg.constant([1, 2, 3, 4, 5, 6, 7, 8])
    idx = [[4], [3], [1], [7]]
    u = tg.constant([9, 10, 11, 12])
    assert tg.tensor_scatter_nd_update(t, idx, u).numpy().tolist() == [1, 11, 3, 10, 9, 6, 7, 12]
    assert tg.tensor_scatter_nd_add(t, idx, u).numpy().tolist() == [1, 13, 3, 14, 14, 6, 7, 20]
    assert tg.tensor_scatter_nd_sub(t, idx, u).numpy().tolist() == \
        [1, -9, 3, -6, -4, 6, 7, -4]
    z = tg.zeros(8, tg.int32)
    assert tg.tensor_scatter_nd_max(z, [[1], [1], [3]], tg.constant([-1, 4, 2])).numpy().tolist() \
        == [0, 4, 0, 2, 0, 0, 0, 0]
    assert tg.tensor_scatter_nd_min(z, [[1], [1], [3]], tg.constant([-1, -4, 2])).numpy() \
        .tolist() == [0, -4, 0, 0, 0, 0, 0, 0]


def test_tensor_scatter_nd_update_last_wins_and_gradients():
    x = tg.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], tg.float64)
    u = tg.constant([[7.0, 8.0], [9.0, 10.0]], tg.float64)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch([x, u])
        y = tg.tensor_scatter_nd_update(x, [[1], [1]], u)
        loss = tg.reduce_sum(y * tg.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], tg.float64))
    assert y.numpy().tolist() == [[1, 2], [9, 10], [5, 6]]
    assert tape.gradient(loss, x).numpy().tolist() == [[1, 2], [0, 0], [5, 6]]
    assert tape.gradient(loss, u).numpy().tolist() == [[0, 0], [3, 4]]
    assert x.numpy().tolist() == [[1, 2], [3, 4], [5, 6]]  # nothing the user holds changes


def test_tensor_scatter_nd_update_keeps_inf_and_nan_elsewhere():
    x = tg.constant([np.inf, np.nan, 1.0])
    y = tg.tensor_scatter_nd_update(x, [[2]], tg.constant([5.0])).numpy()
    assert np.isposinf(y[0]) and np.isnan(y[1]) and y[2] == 5.0


def test_scatter_errors_name_the_function_and_shapes():
    with pytest.raises(tg.errors.InvalidArgumentError, match=r"scatter_nd: indices\[1\] = \[4\] "
                                                             r"does not index into shape \[4\]"):
        tg.scatter_nd([[0], [4]], tg.constant([1.0, 2.0]), [4])
    with pytest.raises(tg.errors.InvalidArgumentError, match="does not index"):
        tg.tensor_scatter_nd_add(tg.zeros(4), [[-1]], tg.constant([1.0]))
    with pytest.raises(tg.errors.InvalidArgumentError, match=r"updates must have shape .*\[2, 3\]"):
        tg.tensor_scatter_nd_update(tg.zeros((4, 3)), [[0], [1]], tg.zeros((2, 2)))
    with pytest.raises(tg.errors.InvalidArgumentError, match="must be integers"):
        tg.scatter_nd(tg.constant([[0.0]]), tg.constant([1.0]), [2])


def test_searchsorted_tf_examples():
    seq = tg.constant([[0, 3, 9, 9, 10], [1, 2, 3, 4, 5]])
    vals = tg.constant([[2, 4, 9], [0, 2, 6]])
    assert tg.searchsorted(seq, vals).numpy().tolist() == [[1, 2, 2], [0, 1, 5]]
    assert tg.searchsorted(seq, vals, side="right").numpy().tolist() == [[1, 2, 4], [0, 2, 5]]
    out = tg.searchsorted(tg.constant([1.0, 2.0]), tg.constant([1.5]), out_type=tg.int64)
    assert out.dtype == tg.int64


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_batched_matches_numpy_per_row(side):
    rng = np.random.default_rng(0)
    seq = np.sort(rng.integers(0, 6, (2, 3, 7)), -1).astype(np.float32)
    vals = rng.integers(-1, 7, (2, 3, 4)).astype(np.float32)  # many ties with the sequence
    got = tg.searchsorted(seq, vals, side=side).numpy()
    want = np.array([[np.searchsorted(r, v, side=side) for r, v in zip(rs, vs)]
                     for rs, vs in zip(seq, vals)])
    np.testing.assert_array_equal(got, want)


def test_searchsorted_errors():
    with pytest.raises(tg.errors.InvalidArgumentError, match="side"):
        tg.searchsorted(tg.constant([1.0]), tg.constant([1.0]), side="middle")
    with pytest.raises(tg.errors.InvalidArgumentError, match="leading dimensions"):
        tg.searchsorted(tg.constant([[1.0], [2.0]]), tg.constant([[1.0]]))


def test_unique_tf_example_and_inverse():
    y, idx = tg.unique(tg.constant([1, 1, 2, 4, 4, 4, 7, 8, 8]))
    assert y.numpy().tolist() == [1, 2, 4, 7, 8]
    assert idx.numpy().tolist() == [0, 0, 1, 2, 2, 2, 3, 4, 4] and idx.dtype == tg.int32
    x = np.random.default_rng(1).integers(0, 5, 30).astype(np.float32)
    y, idx = tg.unique(tg.constant(x), out_idx=tg.int64)
    assert idx.dtype == tg.int64
    np.testing.assert_array_equal(y.numpy()[idx.numpy()], x)  # y[idx] rebuilds x
    first = [int(np.nonzero(x == v)[0][0]) for v in y.numpy()]
    assert first == sorted(first)  # in order of first occurrence
    with pytest.raises(tg.errors.InvalidArgumentError, match="vector"):
        tg.unique(tg.constant([[1, 2]]))


def test_unique_has_no_gradient():
    x = tg.constant([1.0, 1.0, 2.0])
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.unique(x).y
    assert tape.gradient(tg.reduce_sum(y), x) is None


def test_embedding_lookup_sharded_div_strategy_and_gradient():
    # "div": 5 ids over 2 shards are [0, 1, 2] and [3, 4]
    a = tg.Variable(np.arange(6.0).reshape(3, 2))
    b = tg.Variable(np.arange(6.0, 10.0).reshape(2, 2))
    with tg.GradientTape() as tape:
        e = tg.nn.embedding_lookup([a, b], [4, 0, 4])
        loss = tg.reduce_sum(e)
    assert e.numpy().tolist() == [[8, 9], [0, 1], [8, 9]]
    ga, gb = tape.gradient(loss, [a, b])
    assert ga.numpy().tolist() == [[1, 1], [0, 0], [0, 0]]
    assert gb.numpy().tolist() == [[0, 0], [2, 2]]


def test_embedding_lookup_max_norm_clips_only_long_rows():
    p = tg.constant([[3.0, 4.0], [0.3, 0.4]])
    got = tg.nn.embedding_lookup(p, [0, 1], max_norm=1.0).numpy()
    np.testing.assert_allclose(got, [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)
    with pytest.raises(tg.errors.InvalidArgumentError, match=r"is not in \[0, 2\)"):
        tg.nn.embedding_lookup(p, [2]).numpy()  # on a GPU the index check is read here
