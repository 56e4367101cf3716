"""tg.function's diagonal propagation (tapegpu/function/diagonal.py): a traced Jacobian of
per-example losses runs its backward on per-example values, and computes what eager does; where
the structure does not hold (batch-mixing ops), the pass falls back and results stay right."""
import numpy as np
import pytest

import tapegpu as tg

B, F, H, C = 6, 5, 7, 3  # batch, features, hidden, classes: distinct, to tell axes apart


def _basis_sized(cf, n):
    """Values of the graph's nodes that carry an (n, n) basis x batch block."""
    g = cf.graph
    outs = [n_.out for n_ in g.nodes if n_.kind == "op"]
    return [g.meta[v][1] for v in outs if len(g.meta[v][1]) >= 2 and g.meta[v][1][:2] == (n, n)]


def _mlp(act, bias, mix=None, loss="xent"):
    rng = np.random.default_rng(1)
    x = tg.constant(rng.standard_normal((B, F)).astype(np.float32))
    y = tg.constant(rng.integers(0, C, B).astype(np.int32))
    target = tg.constant(rng.standard_normal((B, C)).astype(np.float32))
    vs = [tg.Variable(rng.standard_normal((F, H)).astype(np.float32) * 0.5),
          tg.Variable(rng.standard_normal((H, C)).astype(np.float32) * 0.5)]
    if bias:
        vs += [tg.Variable(rng.standard_normal(H).astype(np.float32) * 0.1),
               tg.Variable(rng.standard_normal(C).astype(np.float32) * 0.1)]
    activation = {"tanh": tg.tanh, "relu": tg.nn.relu}[act]

    def jac():
        with tg.GradientTape() as tape:
            h = tg.matmul(x, vs[0])
            if bias:
                h = h + vs[2]
            h = activation(h)
            if mix == "centre":  # BatchNorm-like: every example's h depends on the others'
                h = h - tg.reduce_mean(h, axis=0)
            elif mix == "batch_sum":
                h = h * tg.reduce_sum(h)
            z = tg.matmul(h, vs[1])
            if bias:
                z = z + vs[3]
            if loss == "xent":
                losses = tg.nn.sparse_softmax_cross_entropy_with_logits(y, z)
            else:
                losses = tg.reduce_sum(tg.square(z - target), axis=1)
        return tape.jacobian(losses, vs)
    return jac


def _assert_close(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("loss", ["xent", "squared"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_per_example_jacobian_runs_per_example(act, bias, loss):
    jac = _mlp(act, bias, loss=loss)
    traced = tg.function(jac)
    traced()  # the first call traces (and returns what the Python code computed)
    _assert_close(traced(), jac())
    cf = traced.get_concrete_function()
    assert _basis_sized(cf, B) == []
    # the kernel gradients are the per-example outer products, not x^T @ (basis x batch)
    assert any(n.op.name == "multiply" and cf.graph.meta[n.out][1] == (B, F, H)
               for n in cf.graph.nodes if n.kind == "op")


@pytest.mark.parametrize("mix", ["centre", "batch_sum"])
@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_batch_mixing_falls_back_and_stays_right(act, mix):
    jac = _mlp(act, True, mix=mix)
    traced = tg.function(jac)
    traced()  # the first call traces (and returns what the Python code computed)
    _assert_close(traced(), jac())
    # the structure does not hold through the batch-mixing op: the pass materialised the
    # basis there (its full values are in the graph)
    assert _basis_sized(traced.get_concrete_function(), B)


N, M, Q = 4, 3, 5
_rng = np.random.default_rng(2)
_ARRAYS = {
    "EYE": np.eye(N, dtype=np.float32),
    "X": _rng.standard_normal((N, M)).astype(np.float32),      # (b, m)
    "W": _rng.standard_normal((M, Q)).astype(np.float32),      # (m, q)
    "WT": _rng.standard_normal((Q, M)).astype(np.float32),     # (q, m)
    "YB": _rng.standard_normal((Q, N)).astype(np.float32),     # (q, b)
    "MASK": _rng.standard_normal((N, M)) > 0,
    "K": np.arange(N, dtype=np.float32).reshape(N, 1, 1),       # varies along k
}


def c(name):  # the array as a tensor on the current device (a constant of the trace)
    return tg.constant(_ARRAYS[name])


def _v(x):  # (k, b, m) = (k == b) x[b]: x is the traced function's argument
    return c("EYE")[:, :, None] * x


def _vt(x):  # (k, m, b) = (k == b) x[b]^T
    return c("EYE")[:, None, :] * tg.transpose(x)


# functions of an identity constant: (name, function, whether the pass keeps all of it diagonal)
CASES = [
    ("sum over b", lambda x: tg.reduce_sum(_v(x), axis=1), True),
    ("sum over k", lambda x: tg.reduce_sum(_v(x), axis=0), True),
    ("sum over b, keepdims", lambda x: tg.reduce_sum(_v(x), axis=1, keepdims=True), True),
    ("sum over k, keepdims", lambda x: tg.reduce_sum(_v(x), axis=0, keepdims=True), True),
    ("sum over b and m", lambda x: tg.reduce_sum(_v(x), axis=[1, 2]), True),
    ("sum over m (stays diagonal)", lambda x: tg.reduce_sum(_v(x), axis=2), False),
    ("sum of b at axis 2", lambda x: tg.reduce_sum(_vt(x) * 2.0, axis=-1), True),
    ("trace (k and b)", lambda x: tg.reduce_sum(_v(x), axis=[0, 1]), False),
    ("exp (not zero at zero)", lambda x: tg.reduce_sum(tg.exp(_v(x)), axis=1), False),
    ("sin (zero at zero)", lambda x: tg.reduce_sum(tg.sin(_v(x)), axis=1), True),
    ("cos (not zero at zero)", lambda x: tg.reduce_sum(tg.cos(_v(x)), axis=1), False),
    ("plus a constant", lambda x: tg.reduce_sum(_v(x) + 1.0, axis=1), False),
    ("plus a diagonal", lambda x: tg.reduce_sum(_v(x) + 3.0 * _v(x), axis=1), True),
    ("divided by x", lambda x: tg.reduce_sum(_v(x) / (tg.abs(c("X")) + 1.0), axis=1), True),
    ("x divided by it", lambda x: tg.reduce_sum(c("X") / (_v(x) + 1.0), axis=1), False),
    ("times a k-varying value", lambda x: tg.reduce_sum(_v(x) * c("K"), axis=1), False),
    ("where(mask, V, 0)", lambda x: tg.reduce_sum(tg.where(c("MASK"), _v(x), tg.constant(0.0)),
                                                axis=1), True),
    ("where(mask, V, 1)", lambda x: tg.reduce_sum(tg.where(c("MASK"), _v(x), tg.constant(1.0)),
                                                axis=1), False),
    ("relu backward", lambda x: tg.reduce_sum(tg.nn.relu(_v(x) - 0.5), axis=1), False),
    ("V @ w", lambda x: tg.reduce_sum(tg.matmul(_v(x), c("W")), axis=1), True),
    ("V @ w^T", lambda x: tg.reduce_sum(tg.matmul(_v(x), c("WT"), transpose_b=True), axis=1), True),
    ("w^T @ V^T (b in the columns)",
     lambda x: tg.reduce_sum(tg.matmul(c("WT"), _v(x), transpose_b=True), axis=2), True),
    ("x^T @ V (kernel gradient)", lambda x: tg.matmul(c("X"), _v(x), transpose_a=True), True),
    ("y @ V (contracts b)", lambda x: tg.matmul(c("YB"), _v(x)), True),
    ("V^T @ y (contracts b)",
     lambda x: tg.matmul(_v(x), tg.transpose(c("YB")), transpose_a=True), True),
    ("Vt @ y^T", lambda x: tg.matmul(_vt(x), c("YB"), transpose_b=True), True),
    ("y @ Vt^T", lambda x: tg.matmul(c("YB"), _vt(x), transpose_b=True), True),
    ("V @ V^T (both diagonal)", lambda x: tg.matmul(_v(x), _v(x), transpose_b=True), False),
    ("a new axis by indexing", lambda x: tg.reduce_sum(_v(x)[:, :, None] * 2.0, axis=[1, 2]),
     True),
    ("the full value out", lambda x: _v(x) * 2.0, False),
    ("a batch-mixing cumsum",
     lambda x: tg.reduce_sum(tg.math.cumsum(_v(x), axis=1), axis=1), False),
]


@pytest.mark.parametrize("name,fn,diagonal", CASES, ids=[c[0] for c in CASES])
def test_rules_compute_what_the_graph_does(name, fn, diagonal):
    traced = tg.function(fn)
    x = c("X") * 1.5
    traced(x)  # the first call traces; the second replays the graph
    got, want = traced(x), fn(x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=1e-6)
    # diagonal all through: no (N, N, .) value left; else the full value is rebuilt
    assert bool(_basis_sized(traced.get_concrete_function(x), N)) != diagonal, name


def _per_example_xent(x, y, vs):
    with tg.GradientTape() as tape:
        z = tg.matmul(tg.tanh(tg.matmul(x, vs[0])), vs[1])
        losses = tg.nn.sparse_softmax_cross_entropy_with_logits(y, z)
    return tape.jacobian(losses, vs)


def _data():
    rng = np.random.default_rng(3)
    return (tg.constant(rng.standard_normal((B, F)).astype(np.float32)),
            tg.constant(rng.integers(0, C, B).astype(np.int32)),
            [tg.Variable(rng.standard_normal((F, H)).astype(np.float32) * 0.5),
             tg.Variable(rng.standard_normal((H, C)).astype(np.float32) * 0.5)])


def test_the_rewritten_graph_is_differentiable():
    # under a tape the graph runs op by op (recorded): the pass's ops have gradients too
    x, y, vs = _data()
    traced = tg.function(_per_example_xent)
    traced(x, y, vs)
    assert _basis_sized(traced.get_concrete_function(x, y, vs), B) == []
    grads = []
    for fn in (traced, _per_example_xent):
        with tg.GradientTape() as tape:
            jac = fn(x, y, vs)
            s = tg.add_n([tg.reduce_sum(j * j) for j in jac])
        grads.append(tape.gradient(s, vs))
    _assert_close(grads[0], grads[1])


def test_the_rewritten_graph_saves_and_loads(tmp_path):
    x, y, vs = _data()
    module = tg.Module()
    module.vs = vs
    module.per_example = tg.function(lambda x, y: _per_example_xent(x, y, module.vs))
    module.per_example(x, y)
    tg.saved_model.save(module, str(tmp_path))
    loaded = tg.saved_model.load(str(tmp_path))
    _assert_close(loaded.per_example(x, y), _per_example_xent(x, y, vs))
