"""tg.linalg's decompositions and solvers beyond the spec table: TF's return orders and shapes,
reconstruction, which triangle is read, degenerate and non-finite inputs, empty batches, errors,
and gradients checked against closed forms (not against the rules that compute them)."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.errors import InvalidArgumentError

RNG = np.random.default_rng(18)


def _grad(fn, x):
    x = tg.constant(x)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return tape.gradient(y, x).numpy()


def _T(a):
    return np.swapaxes(a, -1, -2)


# -- svd ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 3, 3)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_returns_s_u_v_with_v_not_its_transpose(shape, full):
    x = RNG.standard_normal(shape)
    s, u, v = tg.linalg.svd(x, full_matrices=full)
    m, n = shape[-2:]
    k = min(m, n)
    assert s.shape == shape[:-2] + (k,)
    assert u.shape == shape[:-2] + ((m, m) if full else (m, k))
    assert v.shape == shape[:-2] + ((n, n) if full else (n, k))
    s, u, v = s.numpy(), u.numpy(), v.numpy()
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ _T(v[..., :k]), x, atol=1e-12)
    np.testing.assert_allclose(_T(u) @ u, np.broadcast_to(np.eye(u.shape[-1]), _T(u).shape[:-1]
                                                          + (u.shape[-1],)), atol=1e-12)
    np.testing.assert_allclose(_T(v) @ v, np.broadcast_to(np.eye(v.shape[-1]), _T(v).shape[:-1]
                                                          + (v.shape[-1],)), atol=1e-12)
    assert np.all(np.diff(s, axis=-1) <= 0)


def test_svd_compute_uv_false_returns_only_the_singular_values():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    s = tg.linalg.svd(x, compute_uv=False)
    assert isinstance(s, tg.Tensor) and s.dtype == tg.float32 and s.shape == (2, 3)
    np.testing.assert_allclose(s.numpy(), np.linalg.svd(x, compute_uv=False), rtol=1e-5)


def test_gradient_of_the_nuclear_norm_is_u_v_transpose():
    """d sum(s) / dA = U V^T, for both compute_uv settings."""
    x = RNG.standard_normal((4, 3))
    u, _, vh = np.linalg.svd(x, full_matrices=False)
    for uv in (True, False):
        g = _grad(lambda a: tg.reduce_sum(
            tg.linalg.svd(a, compute_uv=uv)[0] if uv else tg.linalg.svd(a, compute_uv=False)), x)
        np.testing.assert_allclose(g, u @ vh, atol=1e-12)


def test_svd_gradient_at_equal_singular_values_is_finite():
    """At equal singular values TF's gradient drops the undefined terms (safe reciprocal)
    instead of returning inf or nan; a loss of s alone keeps its exact gradient U V^T."""
    q, _ = np.linalg.qr(RNG.standard_normal((3, 3)))
    x = 2.0 * q  # all singular values equal to 2
    g = _grad(lambda a: tg.reduce_sum(tg.linalg.svd(a)[0] ** 2), x)
    np.testing.assert_allclose(g, 2 * x, atol=1e-12)  # d ||A||_F^2 = 2 A

    def loss(a):
        s, u, v = tg.linalg.svd(a)
        return tg.reduce_sum(tg.matmul(u * s[..., None, :], v, transpose_b=True) * a)
    assert np.all(np.isfinite(_grad(loss, x)))


def test_svd_full_matrices_gradient_needs_nearly_square_input():
    x = tg.constant(RNG.standard_normal((5, 2)))
    with tg.GradientTape() as tape:
        tape.watch(x)
        s, u, v = tg.linalg.svd(x, full_matrices=True)
        y = tg.reduce_sum(s)
    with pytest.raises(NotImplementedError, match="abs\\(m - n\\) > 1"):
        tape.gradient(y, x)


def test_svd_of_a_non_finite_matrix_is_nan_on_every_device():
    x = RNG.standard_normal((2, 3, 3))
    x[1, 0, 0] = np.nan
    s, u, v = tg.linalg.svd(x)
    assert np.all(np.isnan(s.numpy()[1])) and np.all(np.isnan(u.numpy()[1]))
    np.testing.assert_allclose(s.numpy()[0], np.linalg.svd(x[0], compute_uv=False))


# -- eigh -----------------------------------------------------------------------------------------

def test_eigh_returns_ascending_eigenvalues_and_column_eigenvectors():
    a = RNG.standard_normal((2, 4, 4))
    sym = a + _T(a)
    e, v = tg.linalg.eigh(sym)
    e, v = e.numpy(), v.numpy()
    assert e.shape == (2, 4) and v.shape == (2, 4, 4)
    np.testing.assert_allclose(sym @ v, v * e[..., None, :], atol=1e-12)
    assert np.all(np.diff(e, axis=-1) > 0)
    np.testing.assert_allclose(tg.linalg.eigvalsh(sym).numpy(), e, atol=1e-12)


def test_eigh_reads_only_the_lower_triangle():
    a = RNG.standard_normal((3, 3))
    lower = np.tril(a) + np.tril(a, -1).T
    junk = np.tril(a) + np.triu(RNG.standard_normal((3, 3)), 1)
    np.testing.assert_allclose(tg.linalg.eigvalsh(junk).numpy(), np.linalg.eigvalsh(lower))
    g = _grad(lambda x: tg.reduce_sum(tg.linalg.eigvalsh(x) ** 3), junk)
    assert np.all(np.triu(g, 1) == 0)
    # d sum(e^3) = 3 V diag(e^2) V^T on the symmetric matrix; off-diagonal entries of the
    # lower triangle stand for two entries of it
    e, v = np.linalg.eigh(lower)
    full = 3 * (v * e ** 2) @ v.T
    np.testing.assert_allclose(g, np.tril(2 * full) - np.diag(np.diag(full)), atol=1e-12)


def test_eigh_gradient_at_repeated_eigenvalues_follows_tf():
    """At a repeated eigenvalue a loss of the eigenvalues alone keeps its exact gradient; a
    loss of the eigenvectors gets TF's: finite, exact outside the degenerate pair, and without
    the term coupling the pair (F's safe reciprocal gives 0 there, not inf)."""
    x = np.diag([1.0, 1.0, 3.0])
    g = _grad(lambda a: tg.reduce_sum(tg.linalg.eigvalsh(a) ** 2), x)
    np.testing.assert_allclose(g, 2 * x, atol=1e-12)

    def loss(a):
        e, v = tg.linalg.eigh(a)
        return tg.reduce_sum(tg.matmul(v * e[..., None, :], v, transpose_b=True))
    g = _grad(loss, x)  # sum(A) of the symmetric matrix: exactly tril(2J) - I
    exact = np.tril(2 * np.ones((3, 3))) - np.eye(3)
    assert np.all(np.isfinite(g))
    off_pair = np.ones((3, 3), bool)
    off_pair[1, 0] = False
    np.testing.assert_allclose(g[off_pair], exact[off_pair], atol=1e-12)
    assert g[1, 0] == 0


# -- qr -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("full", [False, True])
def test_qr_returns_q_r(shape, full):
    x = RNG.standard_normal(shape)
    q, r = tg.linalg.qr(x, full_matrices=full)
    m, n = shape[-2:]
    k = m if full else min(m, n)
    assert q.shape == shape[:-2] + (m, k) and r.shape == shape[:-2] + (k, n)
    q, r = q.numpy(), r.numpy()
    np.testing.assert_allclose(q @ r, x, atol=1e-12)
    np.testing.assert_allclose(_T(q) @ q, np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)),
                               atol=1e-12)
    assert np.all(np.tril(r, -1) == 0)


def test_qr_full_matrices_of_a_tall_matrix_has_no_gradient():
    x = tg.constant(RNG.standard_normal((4, 2)))
    with tg.GradientTape() as tape:
        tape.watch(x)
        q, r = tg.linalg.qr(x, full_matrices=True)
        y = tg.reduce_sum(r)
    with pytest.raises(NotImplementedError, match="nrows > ncols"):
        tape.gradient(y, x)


def test_qr_gradient_of_log_abs_det_r_is_the_inverse_transpose():
    """log|det A| = sum log|r_ii|, so its gradient through QR is A^-T."""
    x = RNG.standard_normal((3, 3)) + 2 * np.eye(3)
    g = _grad(lambda a: tg.reduce_sum(tg.math.log(tg.abs(tg.linalg.diag_part(
        tg.linalg.qr(a)[1])))), x)
    np.testing.assert_allclose(g, np.linalg.inv(x).T, atol=1e-10)


# -- triangular solves ----------------------------------------------------------------------------

@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_triangular_solve_reads_one_triangle(lower, adjoint):
    a = RNG.standard_normal((2, 3, 3)) + 4 * np.eye(3)
    b = RNG.standard_normal((3, 2))
    t = np.tril(a) if lower else np.triu(a)
    want = np.linalg.solve(_T(t) if adjoint else t, b)
    got = tg.linalg.triangular_solve(a, b, lower=lower, adjoint=adjoint)
    np.testing.assert_allclose(got.numpy(), want, atol=1e-12)
    g = _grad(lambda m: tg.reduce_sum(tg.linalg.triangular_solve(m, b, lower=lower,
                                                                 adjoint=adjoint)), a)
    other = np.triu(g, 1) if lower else np.tril(g, -1)
    assert np.all(other == 0) and np.any(g != 0)


def test_triangular_solve_shape_errors():
    with pytest.raises(InvalidArgumentError, match="rhs must be"):
        tg.linalg.triangular_solve(np.eye(3), np.ones((2, 1)))
    with pytest.raises(InvalidArgumentError, match="square"):
        tg.linalg.triangular_solve(np.ones((3, 2)), np.ones((3, 1)))
    with pytest.raises(InvalidArgumentError, match="broadcast"):
        tg.linalg.triangular_solve(np.ones((2, 3, 3)), np.ones((4, 3, 1)))


def test_triangular_solve_with_a_zero_pivot_raises_on_every_device():
    """CuPy's solvers return NaN where numpy's raise: both raise, as tg.linalg.solve does."""
    a = np.triu(np.ones((3, 3))) + np.tril(np.ones((3, 3)), -1) * 5
    a[1, 1] = 0.0
    with pytest.raises(InvalidArgumentError, match="Singular"):
        tg.linalg.triangular_solve(a, np.ones((3, 1)), lower=False)
    ok = tg.linalg.triangular_solve(a + 2 * np.eye(3), np.ones((3, 1)), lower=False)
    assert np.all(np.isfinite(ok.numpy()))


def test_cholesky_solve_solves_with_the_factor():
    a = RNG.standard_normal((3, 3))
    spd = a @ a.T + 3 * np.eye(3)
    b = RNG.standard_normal((3, 2))
    chol = tg.linalg.cholesky(spd)
    np.testing.assert_allclose(tg.linalg.cholesky_solve(chol, b).numpy(),
                               np.linalg.solve(spd, b), atol=1e-12)


# -- pinv and lstsq -------------------------------------------------------------------------------

def test_pinv_of_a_rank_deficient_matrix_meets_the_penrose_conditions():
    a = RNG.standard_normal((4, 2)) @ RNG.standard_normal((2, 3))  # rank 2
    p = tg.linalg.pinv(a).numpy()
    np.testing.assert_allclose(a @ p @ a, a, atol=1e-12)
    np.testing.assert_allclose(p @ a @ p, p, atol=1e-12)
    np.testing.assert_allclose((a @ p).T, a @ p, atol=1e-12)
    np.testing.assert_allclose((p @ a).T, p @ a, atol=1e-12)


def test_lstsq_without_fast_gives_the_minimum_norm_solution_of_a_rank_deficient_system():
    a = RNG.standard_normal((5, 2)) @ RNG.standard_normal((2, 3))
    b = RNG.standard_normal((5, 2))
    np.testing.assert_allclose(tg.linalg.lstsq(a, b, fast=False).numpy(),
                               np.linalg.pinv(a) @ b, atol=1e-10)


def test_lstsq_fast_minimises_the_regularised_residual():
    """At the solution the gradient of ||A X - B||^2 + l ||X||^2 in X vanishes."""
    a = RNG.standard_normal((6, 3)).astype(np.float32)
    b = RNG.standard_normal((6, 2)).astype(np.float32)
    x = tg.linalg.lstsq(a, b, l2_regularizer=0.5)
    assert x.dtype == tg.float32
    xs = x.numpy().astype(np.float64)
    np.testing.assert_allclose(a.T @ (a @ xs - b) + 0.5 * xs, 0, atol=1e-4)
    with pytest.raises(InvalidArgumentError, match="l2_regularizer"):
        tg.linalg.lstsq(a, b, l2_regularizer=-1.0)
    with pytest.raises(InvalidArgumentError, match="rhs must be"):
        tg.linalg.lstsq(a, b[:5])


# -- expm -----------------------------------------------------------------------------------------

def test_expm_closed_forms():
    d = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(tg.linalg.expm(np.diag(d)).numpy(), np.diag(np.exp(d)),
                               rtol=1e-14)
    nil = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]])  # nilpotent
    np.testing.assert_allclose(tg.linalg.expm(nil).numpy(), np.eye(3) + nil + nil @ nil / 2,
                               atol=1e-14)
    a = 4.0 * RNG.standard_normal((3, 3))  # needs scaling and squaring
    prod = tg.linalg.expm(a).numpy() @ tg.linalg.expm(-a).numpy()
    np.testing.assert_allclose(prod, np.eye(3), atol=1e-9)


def test_expm_scales_each_matrix_of_a_batch_by_its_own_norm():
    small = 0.01 * RNG.standard_normal((3, 3))
    large = 6.0 * RNG.standard_normal((3, 3))
    both = tg.linalg.expm(np.stack([small, large])).numpy()
    np.testing.assert_allclose(both[0], tg.linalg.expm(small).numpy(), rtol=1e-14, atol=1e-16)
    np.testing.assert_allclose(both[1], tg.linalg.expm(large).numpy(), rtol=1e-12)


def test_expm_gradient_of_the_trace_is_expm_transposed_and_has_a_second_derivative():
    """d tr(e^A) = tr(e^A dA): the gradient is (e^A)^T; the gradient of its (0, 0) entry by a
    second tape matches central differences of the first."""
    a = RNG.standard_normal((3, 3))
    g = _grad(lambda x: tg.linalg.trace(tg.linalg.expm(x)), a)
    np.testing.assert_allclose(g, tg.linalg.expm(a).numpy().T, rtol=1e-12, atol=1e-13)
    x = tg.constant(a)
    with tg.GradientTape() as outer:
        outer.watch(x)
        with tg.GradientTape() as inner:
            inner.watch(x)
            y = tg.linalg.trace(tg.linalg.expm(x))
        g00 = inner.gradient(y, x)[0, 0]
    h = outer.gradient(g00, x).numpy()
    eps = 1e-6
    fd = np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            d = np.zeros((3, 3))
            d[i, j] = eps
            fd[i, j] = (tg.linalg.expm(a + d).numpy()[0, 0] -
                        tg.linalg.expm(a - d).numpy()[0, 0]) / (2 * eps)
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-8)


# -- band_part, diag, adjoint ---------------------------------------------------------------------

def test_band_part_matches_tf_examples_and_keeps_integers():
    x = np.array([[0, 1, 2, 3], [-1, 0, 1, 2], [-2, -1, 0, 1], [-3, -2, -1, 0]], np.int32)
    got = tg.linalg.band_part(x, 1, -1)
    assert got.dtype == tg.int32
    np.testing.assert_array_equal(got.numpy(), [[0, 1, 2, 3], [-1, 0, 1, 2], [0, -1, 0, 1],
                                                [0, 0, -1, 0]])
    np.testing.assert_array_equal(tg.linalg.band_part(x, 2, 1).numpy(),
                                  [[0, 1, 0, 0], [-1, 0, 1, 0], [-2, -1, 0, 1], [0, -2, -1, 0]])
    assert tg.linalg.matrix_band_part is tg.linalg.band_part
    inf = tg.linalg.band_part(np.full((2, 2), np.inf), 0, 0).numpy()
    np.testing.assert_array_equal(inf, [[np.inf, 0], [0, np.inf]])
    with pytest.raises(InvalidArgumentError, match="num_lower must be negative or less"):
        tg.linalg.band_part(x, 5, 0)
    with pytest.raises(InvalidArgumentError, match="at least 2-dim"):
        tg.linalg.band_part(np.ones(3), 0, 0)


def test_diag_shapes_offsets_and_padding():
    d = np.arange(1.0, 7.0).reshape(2, 3)
    out = tg.linalg.diag(d).numpy()
    assert out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out[1], np.diag(d[1]))
    np.testing.assert_array_equal(tg.linalg.diag(d[0], k=-2).numpy(), np.diag(d[0], -2))
    padded = tg.linalg.diag(d[0], k=1, num_rows=4, padding_value=-1.0).numpy()
    assert padded.shape == (4, 4)
    np.testing.assert_array_equal(padded, np.diag(d[0], 1) - (1 - np.eye(4, k=1)))
    g = _grad(lambda v: tg.reduce_sum(tg.linalg.diag(v, k=1) * np.arange(16.0).reshape(4, 4)),
              d[0])
    np.testing.assert_array_equal(g, [1.0, 6.0, 11.0])
    with pytest.raises(InvalidArgumentError, match="diagonal"):
        tg.linalg.diag(d[0], num_rows=5, num_cols=5)
    with pytest.raises(InvalidArgumentError, match="at least 1-dim"):
        tg.linalg.diag(1.0)


def test_adjoint_transposes_the_last_two_axes():
    x = RNG.standard_normal((2, 3, 4))
    np.testing.assert_array_equal(tg.linalg.adjoint(x).numpy(), _T(x))


# -- empty batches and errors ---------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(0, 3, 3), (2, 0, 0), (3, 0), (2, 0, 3)], ids=str)
def test_empty_inputs_keep_their_shapes_and_gradients(shape):
    """Empty batches and 0-row or 0-column matrices: outputs of TF's shapes and gradients of
    the input's shape, on every device (CuPy's solve rejects empty systems)."""
    x = tg.constant(np.zeros(shape))
    m, n = shape[-2:]
    k = min(m, n)
    fns = {"svd": lambda a: tg.linalg.svd(a)[1], "qr": lambda a: tg.linalg.qr(a)[1],
           "pinv": tg.linalg.pinv, "band_part": lambda a: tg.linalg.band_part(a, 0, -1)}
    if m == n:
        fns.update(eigh=lambda a: tg.linalg.eigh(a)[1], lu=lambda a: tg.linalg.lu(a).lu,
                   expm=tg.linalg.expm)
    want = {"svd": shape[:-2] + (m, k), "qr": shape[:-2] + (k, n), "pinv": shape[:-2] + (n, m)}
    for name, fn in fns.items():
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
            loss = tg.reduce_sum(y)
        assert y.shape == want.get(name, shape), name
        assert tape.gradient(loss, x).shape == shape, name
    solved = tg.linalg.solve(np.zeros(shape[:-2] + (k, k)), np.zeros(shape[:-2] + (k, 2)))
    assert solved.shape == shape[:-2] + (k, 2)


def test_decompositions_reject_vectors_and_non_square_input():
    with pytest.raises(InvalidArgumentError, match="svd"):
        tg.linalg.svd(np.ones(3))
    with pytest.raises(InvalidArgumentError, match="qr"):
        tg.linalg.qr(np.ones(3))
    for fn in (tg.linalg.eigh, tg.linalg.eigvalsh, tg.linalg.expm):
        with pytest.raises(InvalidArgumentError, match="square"):
            fn(np.ones((2, 3)))
    with pytest.raises(InvalidArgumentError, match="floating"):
        tg.linalg.svd(np.ones((2, 2), np.int32))


def test_diag_part_reads_diagonal_k():
    x = np.arange(12.0).reshape(3, 4)
    for k in (-2, -1, 0, 1, 3):
        np.testing.assert_array_equal(tg.linalg.diag_part(x, k=k).numpy(), np.diagonal(x, k))
    g = _grad(lambda a: tg.reduce_sum(tg.linalg.diag_part(a, k=1)), x)
    np.testing.assert_array_equal(g, np.eye(3, 4, 1))
    with pytest.raises(InvalidArgumentError, match="k must be in"):
        tg.linalg.diag_part(x, k=4)


# -- lu -------------------------------------------------------------------------------------------

def test_lu_packs_l_and_u_with_rows_permuted_by_p():
    x = RNG.standard_normal((2, 4, 4))
    lu, p = tg.linalg.lu(x)
    assert lu.shape == (2, 4, 4) and p.shape == (2, 4) and p.dtype == tg.int32
    lu, p = lu.numpy(), p.numpy()
    lower = np.tril(lu, -1) + np.eye(4)
    upper = np.triu(lu)
    np.testing.assert_allclose(lower @ upper, np.take_along_axis(x, p[..., None], axis=-2),
                               atol=1e-12)
    assert np.all(np.abs(np.tril(lu, -1)) <= 1)  # partial pivoting: |l_ij| <= 1
    np.testing.assert_allclose(tg.linalg.lu_reconstruct(lu, p).numpy(), x, atol=1e-12)
    b = RNG.standard_normal((2, 4, 3))
    np.testing.assert_allclose(tg.linalg.lu_solve(lu, p, b).numpy(), np.linalg.solve(x, b),
                               atol=1e-12)
    np.testing.assert_allclose(tg.linalg.lu_matrix_inverse(lu, p).numpy(), np.linalg.inv(x),
                               atol=1e-12)


def test_lu_gradient_of_log_abs_det_u_is_the_inverse_transpose():
    """log|det A| = sum log|u_ii| (L has a unit diagonal, P a determinant of +-1)."""
    x = RNG.standard_normal((3, 3))
    g = _grad(lambda a: tg.reduce_sum(tg.math.log(tg.abs(tg.linalg.diag_part(
        tg.linalg.lu(a).lu)))), x)
    np.testing.assert_allclose(g, np.linalg.inv(x).T, atol=1e-10)


def test_lu_of_a_singular_matrix_raises_on_every_device():
    with pytest.raises(InvalidArgumentError, match="not invertible"):
        tg.linalg.lu(np.ones((2, 3, 3)))


# -- matmul's transposes ----------------------------------------------------------------------------

@pytest.mark.parametrize("rows", [3, 64])  # (3: a few rows, b a^T transposed; 64: a b^T)
def test_transposed_products_of_matrices_are_numpys_and_their_gradients_too(rows, tg_device):
    """On the host the products are numpy's, bit for bit, whichever layout matmul picks. On a
    real GPU they are cuBLAS's, whose kernels (and so the order of the k products' sum)
    depend on the shapes and transposes: there each equals the float64 product within the
    rounding of a float32 dot product of length k (TF32 is off in the suite)."""
    a = RNG.standard_normal((rows, 70)).astype(np.float32)
    b = RNG.standard_normal((20, 70)).astype(np.float32)
    c = RNG.standard_normal((rows, 20)).astype(np.float32)

    def check(got, x, y, want=None):  # got == x @ y
        if not tg_device.startswith("gpu"):
            assert got.tobytes() == np.ascontiguousarray(x @ y if want is None else want).tobytes()
            return
        k = x.shape[1]
        exact = x.astype(np.float64) @ y.astype(np.float64)
        bound = k * np.finfo(np.float32).eps * (np.abs(x).astype(np.float64) @ np.abs(y))
        assert got.dtype == np.float32 and np.all(np.abs(got - exact) <= bound)

    got = tg.matmul(tg.constant(a), tg.constant(b), transpose_b=True).numpy()
    check(got, a, b.T, (b @ a.T).T if rows <= 16 else a @ b.T)
    got = tg.matmul(tg.constant(a), tg.constant(c), transpose_a=True).numpy()
    check(got, a.T, c)
    ta, tb = tg.constant(a), tg.constant(b.T.copy())
    with tg.GradientTape() as tape:
        tape.watch([ta, tb])
        y = tg.matmul(ta, tb)
    ga, gb = tape.gradient(y, [ta, tb], output_gradients=tg.constant(c))
    check(ga.numpy(), c, tb.numpy().T)  # g b^T (b^T stored)
    check(gb.numpy(), a.T, c)
