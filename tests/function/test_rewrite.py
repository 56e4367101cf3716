"""tg.function's algebraic rewrites (tapegpu/function/rewrite.py): each rule fires where its
pattern is, and the rewritten replay computes what eager does."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.core.options import options


def _mlp(rng, sizes):
    ws = [tg.constant((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32))
          for a, b in zip(sizes[:-1], sizes[1:])]
    bs = [tg.constant(rng.standard_normal(b).astype(np.float32)) for b in sizes[1:]]
    return ws, bs


def _forward(h, ws, bs, act):
    for i, (w, b) in enumerate(zip(ws, bs)):
        h = tg.matmul(h, w) + b
        if i < len(ws) - 1:
            h = act(h)
    return h


def _ops(concrete):
    return [n.op.name for n in concrete.graph.nodes if n.kind == "op"]


def _largest_constant(concrete):
    return max((a.size for a in concrete.graph.constants.values()), default=0)


@pytest.mark.parametrize("act", [tg.nn.elu, tg.nn.selu, tg.math.tanh])
def test_batch_jacobian_traced_equals_eager_without_a_basis_sized_constant(act):
    rng = np.random.default_rng(0)
    ws, bs = _mlp(rng, [6, 12, 10, 4])
    x = tg.constant(rng.standard_normal((40, 6)).astype(np.float32))

    def bj(x):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = _forward(x, ws, bs, act)
        return tape.batch_jacobian(y, x)

    f = tg.function(bj)
    got = f(x).numpy()
    np.testing.assert_allclose(got, bj(x).numpy(), rtol=2e-5, atol=1e-6)
    concrete = f.get_concrete_function(x)
    # the basis (4, 40, 4) is neither kept nor multiplied: its 4 rows are selected from w^T
    assert _largest_constant(concrete) < 4 * 40 * 4
    assert "gather" in _ops(concrete)
    assert _ops(concrete).count("matmul") == 2 + 2  # two forward layers, two backward products
    if act is not tg.math.tanh:  # the activation's select runs on (40, n), not (4, 40, n)
        shapes = [concrete.graph.meta[n.out][1] for n in concrete.graph.nodes
                  if n.kind == "op" and n.op.name == "where"]
        assert all(len(s) == 2 for s in shapes)


def test_jacobian_of_a_vector_function_selects_the_identity_rows(monkeypatch):
    """The identity basis of a (1, 3) output: the rewrite selects its rows (with the diagonal
    pass off, which takes such a basis first); with both on, the basis is gone."""
    monkeypatch.setattr(options, "diagonal", False)
    rng = np.random.default_rng(1)
    ws, bs = _mlp(rng, [5, 7, 3])
    x = tg.constant(rng.standard_normal((5,)).astype(np.float32))

    def jac(x):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = _forward(tg.reshape(x, (1, 5)), ws, bs, tg.nn.elu)
        return tape.jacobian(y, x)

    f = tg.function(jac)
    np.testing.assert_allclose(f(x).numpy(), jac(x).numpy(), rtol=2e-5, atol=1e-6)
    assert "gather" in _ops(f.get_concrete_function(x))
    monkeypatch.setattr(options, "diagonal", True)
    g = tg.function(jac)
    np.testing.assert_allclose(g(x).numpy(), jac(x).numpy(), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(g(x).numpy(), jac(x).numpy(), rtol=2e-5, atol=1e-6)
    constants = g.get_concrete_function(x).graph.constants.values()
    assert all(a.shape != (3, 1, 3) for a in constants)  # the basis


def test_the_rewrites_can_be_turned_off(monkeypatch):
    rng = np.random.default_rng(2)
    ws, bs = _mlp(rng, [3, 5, 2])
    x = tg.constant(rng.standard_normal((8, 3)).astype(np.float32))

    def bj(x):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = _forward(x, ws, bs, tg.nn.elu)
        return tape.batch_jacobian(y, x)

    monkeypatch.setattr(options, "rewrites", False)
    f = tg.function(bj)
    f(x)
    assert "gather" not in _ops(f.get_concrete_function(x))
    assert _largest_constant(f.get_concrete_function(x)) == 2 * 8 * 2


def test_a_product_with_a_repeated_constant_runs_once_and_broadcasts():
    rng = np.random.default_rng(3)
    c = np.repeat(rng.standard_normal((3, 1, 4)).astype(np.float32), 50, axis=1)

    @tg.function
    def f(w):
        return tg.matmul(tg.constant(c), w) * 2.0

    w = tg.constant(rng.standard_normal((4, 6)).astype(np.float32))
    np.testing.assert_allclose(f(w).numpy(), (tg.matmul(tg.constant(c), w) * 2.0).numpy(),
                               rtol=1e-6, atol=1e-6)
    concrete = f.get_concrete_function(w)
    (mm,) = [n for n in concrete.graph.nodes if n.kind == "op" and n.op.name == "matmul"]
    assert concrete.graph.meta[mm.out][1] == (3, 1, 6)
    assert _largest_constant(concrete) == 3 * 4


def test_a_product_with_a_general_constant_is_left_alone():
    rng = np.random.default_rng(4)
    c = rng.standard_normal((5, 4)).astype(np.float32)

    @tg.function
    def f(w):
        return tg.matmul(tg.constant(c), w, transpose_b=True)

    w = tg.constant(rng.standard_normal((6, 4)).astype(np.float32))
    np.testing.assert_array_equal(f(w).numpy(), tg.matmul(tg.constant(c), w,
                                                          transpose_b=True).numpy())
    assert _ops(f.get_concrete_function(w)) == ["matmul"]


@pytest.mark.parametrize("transpose_b", [False, True])
def test_one_hot_rows_select_rows_of_the_other_factor(transpose_b):
    rng = np.random.default_rng(5)
    e = np.eye(6, dtype=np.float32)[[4, 0, 0, 5]]  # unit rows, repeated and out of order

    @tg.function
    def f(w):
        return tg.matmul(tg.constant(e), w, transpose_b=transpose_b)

    w = tg.constant(rng.standard_normal((3, 6) if transpose_b else (6, 3)).astype(np.float32))
    np.testing.assert_array_equal(f(w).numpy(), tg.matmul(tg.constant(e), w,
                                                          transpose_b=transpose_b).numpy())
    assert "matmul" not in _ops(f.get_concrete_function(w))


def test_a_constant_with_a_zero_row_is_not_a_selection():
    e = np.eye(4, dtype=np.float32)[[1, 2]]
    e[1] = 0.0

    @tg.function
    def f(w):
        return tg.matmul(tg.constant(e), w)

    w = tg.constant(np.arange(12, dtype=np.float32).reshape(4, 3))
    np.testing.assert_array_equal(f(w).numpy(), [[3.0, 4.0, 5.0], [0.0, 0.0, 0.0]])
    assert _ops(f.get_concrete_function(w)) == ["matmul"]


_SPECIAL = np.array([[-0.0, 0.0, np.nan, np.inf], [-np.inf, 1e-45, -1e-45, 3.0],
                     [-3.0, 0.5, -0.5, 1e30]], np.float32)


@pytest.mark.parametrize("scaled_first", [False, True])
def test_a_select_of_a_scaled_cotangent_selects_the_factor(scaled_first):
    rng = np.random.default_rng(6)
    g = tg.constant(rng.standard_normal((5, 3, 4)).astype(np.float32) * 10)
    s = tg.constant(_SPECIAL)

    def sel(g, s):
        m = s > 0.5
        return tg.where(m, g * s, g) if scaled_first else tg.where(m, g, s * g)

    f = tg.function(sel)
    got, want = f(g, s).numpy(), sel(g, s).numpy()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    concrete = f.get_concrete_function(g, s)
    (w,) = [n for n in concrete.graph.nodes if n.kind == "op" and n.op.name == "where"]
    assert concrete.graph.meta[w.out][1] == (3, 4)


def test_a_select_of_a_same_sized_product_is_left_alone():
    def sel(g, s):
        return tg.where(s > 0.0, g, g * s)

    f = tg.function(sel)
    g = tg.constant(np.ones((3, 4), np.float32))
    s = tg.constant(_SPECIAL)
    np.testing.assert_array_equal(f(g, s).numpy(), sel(g, s).numpy())
    assert _ops(f.get_concrete_function(g, s)) == ["greater", "multiply", "where"]


@pytest.mark.parametrize("c", [1.0, 0.5, 0.0])
def test_a_clipped_shift_is_a_minimum_bit_for_bit(c):
    def shift(y):
        return tg.where(y > 0.0, tg.constant(c), y + c)

    f = tg.function(shift)
    y = tg.constant(_SPECIAL)
    got, want = f(y).numpy(), shift(y).numpy()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert _ops(f.get_concrete_function(y)) == ["add", "minimum"]


@pytest.mark.parametrize("c, other", [(-1.0, -1.0), (1.0, 2.0)])
def test_a_shift_by_a_negative_or_different_constant_keeps_its_select(c, other):
    def shift(y):
        return tg.where(y > 0.0, tg.constant(c), y + other)

    f = tg.function(shift)
    y = tg.constant(_SPECIAL)
    np.testing.assert_array_equal(f(y).numpy(), shift(y).numpy())
    assert "where" in _ops(f.get_concrete_function(y))


def test_a_broadcast_the_elementwise_op_does_itself_is_dropped():
    def f(a, b):
        return tg.broadcast_to(a, (4, 3, 2)) * b

    tf_ = tg.function(f)
    a = tg.constant(np.arange(8, dtype=np.float32).reshape(4, 1, 2))
    b = tg.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
    np.testing.assert_array_equal(tf_(a, b).numpy(), f(a, b).numpy())
    assert _ops(tf_.get_concrete_function(a, b)) == ["multiply"]
    # where the op alone would not broadcast to the same shape, the broadcast stays
    g = tg.function(lambda a, b: tg.broadcast_to(a, (4, 3, 2)) + b[:1, :1])
    np.testing.assert_array_equal(g(a, b).numpy(), np.broadcast_to(a.numpy(), (4, 3, 2)))
    assert "broadcast_to" in _ops(g.get_concrete_function(a, b))


def test_a_rewritten_batch_jacobian_saves_and_loads(tmp_path):
    rng = np.random.default_rng(7)

    class Jac(tg.Module):
        def __init__(self):
            super().__init__()
            self.w = tg.Variable((rng.standard_normal((4, 3)) / 2).astype(np.float32))
            self.v = tg.Variable((rng.standard_normal((3, 2)) / 2).astype(np.float32))

        @tg.function(input_signature=[tg.TensorSpec([6, 4], tg.float32)])
        def __call__(self, x):
            with tg.GradientTape() as tape:
                tape.watch(x)
                y = tg.matmul(tg.nn.elu(tg.matmul(x, self.w)), self.v)
            return tape.batch_jacobian(y, x)

    m = Jac()
    x = tg.constant(rng.standard_normal((6, 4)).astype(np.float32))
    want = m(x).numpy()
    assert "gather" in _ops(m.__call__.get_concrete_function(x))
    tg.saved_model.save(m, tmp_path)
    np.testing.assert_array_equal(tg.saved_model.load(tmp_path)(x).numpy(), want)


@pytest.mark.parametrize("chunk", [1, 3])
def test_chunked_jacobians_traced_equal_eager(chunk):
    rng = np.random.default_rng(8)
    ws, bs = _mlp(rng, [4, 9, 5])
    x = tg.constant(rng.standard_normal((7, 4)).astype(np.float32))

    def both(x):
        with tg.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = _forward(x, ws, bs, tg.nn.elu)
        return (tape.batch_jacobian(y, x, parallel_iterations=chunk),
                tape.jacobian(y, x, parallel_iterations=chunk))

    f = tg.function(both)
    for got, want in zip(f(x), both(x)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=1e-6)
    # batch_jacobian pushes tangents forward (4 inputs < 5 outputs), a chunk of basis vectors
    # at a time: each chunk selects rows of the first weight
    assert _ops(f.get_concrete_function(x)).count("gather") == -(-4 // chunk)
