"""lgamma, digamma, polygamma and cumulative_logsumexp: values against independent references
(Python's math.lgamma, series, the definition), edge values, dtypes and errors."""
import math

import numpy as np
import pytest

import tapegpu as tg


def _lgamma_reference(v):
    if math.isnan(v):
        return math.nan
    if math.isinf(v) or (v <= 0 and v == math.floor(v)):
        return math.inf
    return math.lgamma(v)


def test_lgamma_is_float64_accurate_over_a_wide_range():
    x = np.concatenate([np.linspace(-40.3, 60, 3001), [0.5, 1e-8, 3.5e-5, 1e5, 1e15, 1e300],
                        -np.linspace(0.01, 0.99, 17) - 7])
    got = tg.math.lgamma(tg.constant(x)).numpy()
    want = np.array([_lgamma_reference(v) for v in x])
    np.testing.assert_allclose(got[x > 0], want[x > 0], rtol=2e-14, atol=2e-14)
    # below 0, by reflection: log(pi / |sin(pi x)|) - lgamma(1 - x) cancels near the poles
    np.testing.assert_allclose(got[x < 0], want[x < 0], rtol=1e-12)


def test_lgamma_edges_as_tensorflow():
    x = tg.constant([0.0, -1.0, -3.0, np.inf, -np.inf, np.nan], tg.float64)
    got = tg.math.lgamma(x).numpy()
    assert np.isposinf(got[:5]).all() and np.isnan(got[5])


def test_float32_stays_float32_and_rounds_once():
    x = np.linspace(0.1, 20, 50).astype(np.float32)
    got = tg.math.lgamma(tg.constant(x))
    assert got.dtype == tg.float32
    want = np.array([math.lgamma(v) for v in x.astype(np.float64)]).astype(np.float32)
    np.testing.assert_array_max_ulp(got.numpy(), want, maxulp=1)
    assert tg.math.digamma(tg.constant(x)).dtype == tg.float32


def test_digamma_known_values():
    euler = 0.5772156649015329
    x = tg.constant([1.0, 0.5, 2.0, -0.5, 10.0], tg.float64)
    want = [-euler, -euler - 2 * math.log(2), 1 - euler, 2 - euler - 2 * math.log(2) + 2 * 1.0,
            sum(1 / k for k in range(1, 10)) - euler]
    # psi(-1/2) = psi(1/2) + 2: the recurrence psi(x + 1) = psi(x) + 1/x
    want[3] = want[1] + 2.0
    np.testing.assert_allclose(tg.math.digamma(x).numpy(), want, rtol=1e-14, atol=1e-14)
    assert np.isnan(tg.math.digamma(tg.constant([0.0, -2.0], tg.float64)).numpy()).all()


def test_digamma_is_the_derivative_of_lgamma_and_polygamma_of_digamma():
    x = tg.constant(np.linspace(-4.7, 25, 60), tg.float64)
    with tg.GradientTape() as t2:
        t2.watch(x)
        with tg.GradientTape() as t1:
            t1.watch(x)
            y = tg.reduce_sum(tg.math.lgamma(x))
        d1 = t1.gradient(y, x)
    d2 = t2.gradient(d1, x)
    np.testing.assert_allclose(d1.numpy(), tg.math.digamma(x).numpy(), rtol=1e-15)
    np.testing.assert_allclose(d2.numpy(), tg.math.polygamma(1, x).numpy(), rtol=1e-15)
    h = 1e-6  # and polygamma(1) is digamma's slope (central differences)
    fd = (tg.math.digamma(x + h).numpy() - tg.math.digamma(x - h).numpy()) / (2 * h)
    np.testing.assert_allclose(d2.numpy(), fd, rtol=1e-6)


def test_polygamma_values():
    zeta3 = 1.2020569031595942
    x = tg.constant([1.0, 1.0, 1.0, 0.5], tg.float64)
    np.testing.assert_allclose(tg.math.polygamma(1, x).numpy()[0], math.pi ** 2 / 6, rtol=1e-15)
    np.testing.assert_allclose(tg.math.polygamma(2, x).numpy()[0], -2 * zeta3, rtol=1e-14)
    np.testing.assert_allclose(tg.math.polygamma(3, x).numpy()[0], math.pi ** 4 / 15,
                               rtol=1e-14)
    np.testing.assert_allclose(tg.math.polygamma(1, x).numpy()[3], math.pi ** 2 / 2, rtol=1e-14)
    # the reflection below 0 against the recurrence psi1(x) = psi1(x + 1) + 1/x^2
    neg = tg.constant([-2.3, -0.7, -11.5], tg.float64)
    np.testing.assert_allclose(tg.math.polygamma(1, neg).numpy(),
                               tg.math.polygamma(1, neg + 1).numpy() + 1 / neg.numpy() ** 2,
                               rtol=1e-13)
    np.testing.assert_allclose(tg.math.polygamma(0, x).numpy(), tg.math.digamma(x).numpy())


def test_special_function_errors():
    with pytest.raises(tg.errors.InvalidArgumentError, match="lgamma"):
        tg.math.lgamma(tg.constant([1, 2]))
    with pytest.raises(tg.errors.InvalidArgumentError, match="non-negative integer"):
        tg.math.polygamma(1.5, tg.constant(1.0))
    with pytest.raises(tg.errors.InvalidArgumentError, match="non-negative integer"):
        tg.math.polygamma(-1, tg.constant(1.0))


def _cumulative_logsumexp_reference(x, axis, exclusive, reverse):
    """The definition, one prefix at a time, with math.fsum in the shifted domain."""
    x = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    out = np.empty_like(x)
    n = x.shape[-1]
    for idx in np.ndindex(x.shape[:-1]):
        row = x[idx]
        for j in range(n):
            terms = row[j + 1:] if reverse and exclusive else row[j:] if reverse else \
                row[:j] if exclusive else row[:j + 1]
            if terms.size == 0:
                out[idx + (j,)] = -np.inf
                continue
            m = terms.max()
            out[idx + (j,)] = m + math.log(math.fsum(np.exp(terms - m)))
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumulative_logsumexp_matches_the_definition(exclusive, reverse, axis):
    x = np.random.default_rng(3).standard_normal((3, 5)) * 4
    got = tg.math.cumulative_logsumexp(tg.constant(x), axis=axis, exclusive=exclusive,
                                       reverse=reverse)
    np.testing.assert_allclose(got.numpy(), _cumulative_logsumexp_reference(
        x, axis, exclusive, reverse), rtol=1e-13, atol=1e-13)


def test_cumulative_logsumexp_does_not_overflow():
    x = tg.constant([1000.0, 1000.0, 999.0], tg.float32)
    got = tg.math.cumulative_logsumexp(x)
    assert got.dtype == tg.float32
    np.testing.assert_allclose(got.numpy(), [1000.0, 1000.0 + math.log(2),
                                             1000.0 + math.log(2 + math.exp(-1))], rtol=1e-7)
    x = tg.cast(x, tg.float64)  # (exp(1000) overflows float64 too)
    with tg.GradientTape() as tape:  # gradients stay finite: softmax weights of each prefix
        tape.watch(x)
        y = tg.reduce_sum(tg.math.cumulative_logsumexp(x))
    g = tape.gradient(y, x).numpy()
    e = np.exp([0.0, 0.0, -1.0])
    want = [1 + 0.5 + e[0] / e.sum(), 0.5 + e[1] / e.sum(), e[2] / e.sum()]
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_cumulative_logsumexp_exclusive_gradient_ignores_the_empty_prefix():
    x = tg.constant([0.5, -1.0, 2.0], tg.float64)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.math.cumulative_logsumexp(x, exclusive=True)
        loss = tg.reduce_sum(y[1:])  # y[0] is -inf
    g = tape.gradient(loss, x).numpy()
    assert np.isfinite(g).all()
    e = np.exp(x.numpy())
    np.testing.assert_allclose(g, [1 + e[0] / (e[0] + e[1]), e[1] / (e[0] + e[1]), 0.0],
                               rtol=1e-14)


def test_cumulative_logsumexp_errors():
    with pytest.raises(tg.errors.InvalidArgumentError, match="scalar"):
        tg.math.cumulative_logsumexp(tg.constant(1.0))
    with pytest.raises(tg.errors.InvalidArgumentError, match="floating"):
        tg.math.cumulative_logsumexp(tg.constant([1, 2]))
