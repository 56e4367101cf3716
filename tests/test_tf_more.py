"""The smaller TF names of tapegpu/compat/tf_more.py, checked against numpy and TF's
documented behaviour."""
import numpy as np
import pytest

import tapegpu as tg


def test_version_module():
    assert tg.version.VERSION == tg.__version__
    assert tg.version.GIT_VERSION == "v" + tg.__version__
    with pytest.raises(NotImplementedError, match="tf.version.GRAPH_DEF_VERSION"):
        tg.version.GRAPH_DEF_VERSION()


def test_tnp_random_shapes_dtypes_ranges_and_seed():
    r = tg.experimental.numpy.random
    assert r.randn(2, 3).shape == (2, 3) and r.randn(2, 3).dtype == tg.float64
    assert r.standard_normal().shape == () and r.standard_normal(4).shape == (4,)
    u = r.uniform(-1.0, [1.0, 2.0, 3.0])  # size from the broadcast shape
    assert u.shape == (3,) and bool(tg.reduce_all(u >= -1.0))
    x = r.randint(3, 7, size=1000)
    assert x.dtype == tg.int64 and set(np.unique(x.numpy())) == {3, 4, 5, 6}
    with pytest.raises(ValueError, match="invalid value"):
        r.randint(3, dtype=np.float32)
    assert r.rand(5).dtype == tg.float64 and r.random((2, 2)).shape == (2, 2)
    r.seed(7)
    a = r.randn(4).numpy()
    r.seed(7)
    np.testing.assert_array_equal(a, r.randn(4).numpy())
    big = r.randn(20000).numpy()
    assert abs(big.mean()) < 0.05 and abs(big.std() - 1) < 0.05
    assert tg.experimental.numpy.newaxis is None
    c = tg.experimental.numpy.copy(tg.constant([1, 2]))
    np.testing.assert_array_equal(c.numpy(), [1, 2])


def test_saturate_cast_clamps_as_tf():
    x = tg.constant([-5.0, 3.7, 300.0, 3e9, -3e9])
    np.testing.assert_array_equal(tg.saturate_cast(x, tg.uint8).numpy(), [0, 3, 255, 255, 0])
    # float32 has no 2**31 - 1: TF clamps to the nearest float32 below it
    np.testing.assert_array_equal(tg.saturate_cast(x, tg.int32).numpy(),
                                  [-5, 3, 300, 2147483520, -2147483648])
    y = tg.saturate_cast(tg.constant([1e300, -1e300, 1.5], dtype=tg.float64), tg.float32)
    np.testing.assert_array_equal(y.numpy(), np.array([3.4028235e38, -3.4028235e38, 1.5],
                                                      np.float32))
    np.testing.assert_array_equal(tg.dtypes.saturate_cast([70000, -70000], tg.int16).numpy(),
                                  [32767, -32768])


def test_scale_regularization_loss_sums():
    assert float(tg.nn.scale_regularization_loss(tg.constant([1.0, 2.5]))) == 3.5
    assert float(tg.nn.scale_regularization_loss([tg.constant(1.0), tg.constant(2.0)])) == 3.0


def test_nn_top_k_is_math_top_k():
    v, i = tg.nn.top_k(tg.constant([1.0, 5.0, 3.0]), k=2)
    np.testing.assert_array_equal(v.numpy(), [5.0, 3.0])
    np.testing.assert_array_equal(i.numpy(), [1, 2])


def test_random_split_is_deterministic_and_keeps_the_dtype():
    s = tg.random.split(tg.constant([3, 4], dtype=tg.int64), num=4)
    assert s.shape == (4, 2) and s.dtype == tg.int64
    again = tg.random.split(tg.constant([3, 4], dtype=tg.int64), num=4)
    np.testing.assert_array_equal(s.numpy(), again.numpy())
    assert not np.array_equal(s.numpy(), tg.random.split(tg.constant([3, 5], tg.int64), 4))
    assert len({tuple(r) for r in s.numpy().tolist()}) == 4
    assert tg.random.split(tg.constant([1, 2], dtype=tg.int32)).dtype == tg.int32
    with pytest.raises(tg.errors.InvalidArgumentError, match=r"shape \[2\]"):
        tg.random.split([1, 2, 3])


def test_autograph_to_code_returns_the_source():
    def f(x):
        if x > 0:
            return x
        return -x

    code = tg.autograph.to_code(f)
    assert code.startswith("def f(x):") and "return -x" in code
    assert tg.autograph.to_code(tg.function(f)) == code


def test_counter_and_assert_cardinality():
    assert [int(x) for x in tg.data.experimental.Counter(start=1, step=2).take(3)] == [1, 3, 5]
    ds = tg.data.Dataset.range(4).filter(lambda x: True)
    assert int(ds.cardinality()) == tg.data.UNKNOWN_CARDINALITY
    ok = ds.apply(tg.data.experimental.assert_cardinality(4))
    assert int(ok.cardinality()) == 4 and [int(x) for x in ok] == [0, 1, 2, 3]
    with pytest.raises(tg.errors.FailedPreconditionError, match="at least 4 elements"):
        list(ds.apply(tg.data.experimental.assert_cardinality(3)))
    with pytest.raises(tg.errors.FailedPreconditionError, match="only 4 elements"):
        list(ds.apply(tg.data.experimental.assert_cardinality(5)))
    with pytest.raises(TypeError, match="must return a Dataset"):
        ds.apply(lambda d: 3)


def test_asin_acos_values_and_gradients():
    x = tg.constant([-0.5, 0.0, 0.5])
    np.testing.assert_allclose(tg.math.acos(x).numpy(), np.arccos([-0.5, 0.0, 0.5]), rtol=1e-6)
    np.testing.assert_allclose(tg.asin(x).numpy(), np.arcsin([-0.5, 0.0, 0.5]), rtol=1e-6)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.reduce_sum(tg.acos(x))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(),
                               -1 / np.sqrt(1 - np.array([0.25, 0.0, 0.25])), rtol=1e-6)
    assert np.isnan(tg.acos(tg.constant(2.0)).numpy())


def test_unsigned_dtypes():
    for d, npd in ((tg.uint16, np.uint16), (tg.uint32, np.uint32), (tg.uint64, np.uint64)):
        assert tg.as_dtype(npd) == d and tg.dtypes.as_dtype(d.name) == d
        x = tg.constant([1, 2], dtype=d)
        assert x.dtype == d and (x + x).numpy().dtype == npd
    np.testing.assert_array_equal(tg.saturate_cast(tg.constant([-1.0, 5e9]), tg.uint32).numpy(),
                                  [0, 4294967040])  # the largest float32 below 2**32


def test_real_imag_complex_and_their_gradients():
    z = tg.constant([-2.25 + 4.75j, 3.25 + 5.75j], dtype=tg.complex64)  # TF's example
    np.testing.assert_array_equal(tg.math.real(z).numpy(), np.float32([-2.25, 3.25]))
    np.testing.assert_array_equal(tg.math.imag(z).numpy(), np.float32([4.75, 5.75]))
    x = tg.constant([1.0, 2.0])
    assert tg.math.real(x) is x
    with pytest.raises(tg.errors.InvalidArgumentError, match="complex64 or complex128"):
        tg.math.imag(x)
    c = tg.dtypes.complex(tg.constant([2.25, 3.25], tg.float64), tg.constant([4.75, 5.75],
                                                                            tg.float64))
    assert c.dtype == tg.complex128 and c.numpy().tolist() == [2.25 + 4.75j, 3.25 + 5.75j]
    with pytest.raises(TypeError, match="float32 or both float64"):
        tg.complex(tg.constant([1.0]), tg.constant([1.0], tg.float64))
    # TF's rules: d real / dz = complex(g, 0), d imag / dz = complex(0, g)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(z)
        r = tg.reduce_sum(tg.math.real(z) * 2.0)
        i = tg.reduce_sum(tg.math.imag(z) * 3.0)
    np.testing.assert_array_equal(tape.gradient(r, z).numpy(), [2 + 0j, 2 + 0j])
    np.testing.assert_array_equal(tape.gradient(i, z).numpy(), [3j, 3j])
    re, im = tg.constant([1.0, 2.0]), tg.constant([3.0, 4.0])
    with tg.GradientTape() as tape:
        tape.watch([re, im])
        y = tg.reduce_sum(tg.math.real(tg.complex(re, im)) * 5.0 +
                          tg.math.imag(tg.complex(re, im)) * 7.0)
    g_re, g_im = tape.gradient(y, [re, im])
    np.testing.assert_array_equal(g_re.numpy(), [5.0, 5.0])
    np.testing.assert_array_equal(g_im.numpy(), [7.0, 7.0])


def _sigmoid_ce(z, x):
    return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))


def test_nce_and_sampled_softmax_losses_against_numpy():
    r = np.random.default_rng(3)
    w, b = r.standard_normal((6, 3)), r.standard_normal(6)
    x, labels = r.standard_normal((2, 3)), np.array([[1], [4]])
    sampled = np.array([0, 4, 5])
    tc, sc = np.array([[0.3], [0.2]]), np.array([0.5, 0.2, 0.1])
    values = (tg.constant(sampled), tg.constant(tc), tg.constant(sc))
    true_logits = np.sum(x * w[labels[:, 0]], axis=1, keepdims=True) + b[labels] - np.log(tc)
    sampled_logits = x @ w[sampled].T + b[sampled] - np.log(sc)
    nce = tg.nn.nce_loss(tg.constant(w), tg.constant(b), labels, tg.constant(x), 3, 6,
                         sampled_values=values).numpy()
    want = _sigmoid_ce(1, true_logits).sum(1) + _sigmoid_ce(0, sampled_logits).sum(1)
    np.testing.assert_allclose(nce, want, rtol=1e-10)
    # sampled softmax removes the accidental hit (class 4 sampled for the row labelled 4)
    hit = sampled_logits.copy()
    hit[1, 1] += np.finfo(np.float64).min
    logits = np.concatenate([true_logits, hit], axis=1)
    lse = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    ssl = tg.nn.sampled_softmax_loss(tg.constant(w), tg.constant(b), labels, tg.constant(x), 3,
                                     6, sampled_values=values).numpy()
    np.testing.assert_allclose(ssl, lse - logits[:, 0], rtol=1e-10)


def test_candidate_samplers():
    s, t, c = tg.random.log_uniform_candidate_sampler([[0], [3]], 1, 5, True, 8, seed=4)
    assert s.dtype == tg.int64 and len(set(s.numpy().tolist())) == 5
    assert np.all((s.numpy() >= 0) & (s.numpy() < 8))
    p = lambda k: np.log((k + 2.0) / (k + 1.0)) / np.log(9.0)  # noqa: E731
    tries_p = c.numpy()
    # unique sampling: expected count 1 - (1 - p)^tries, the same tries for every class
    tries = np.log1p(-tries_p) / np.log1p(-p(s.numpy()))
    np.testing.assert_allclose(tries, tries[0], rtol=1e-4)
    assert tries[0] >= 5
    s2, t2, c2 = tg.random.uniform_candidate_sampler([[1]], 1, 4, False, 3, seed=1)
    np.testing.assert_allclose(c2.numpy(), 4 / 3)
    np.testing.assert_allclose(t2.numpy(), 4 / 3)
    big = tg.random.log_uniform_candidate_sampler([[0]], 1, 20000, False, 5, seed=9)[0].numpy()
    freq = np.bincount(big, minlength=5) / big.size
    k = np.arange(5)
    np.testing.assert_allclose(freq, np.log((k + 2.0) / (k + 1.0)) / np.log(6.0), atol=0.02)
