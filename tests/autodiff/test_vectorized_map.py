"""tg.vectorized_map: every row of the op spec table batched equals a Python loop + stack;
nested structures; per-example gradients (a tape inside fn) equal stacked single gradients;
gradients through vectorized_map (a tape outside) equal those through the loop; errors."""
import warnings

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.backends import cpu_kernels
from tapegpu.ops import kernels, registry
from tapegpu.testing.op_specs import SPECS, sample

B = 3

# Rows whose ops run once per example (no batching rule covers their batched inputs), with
# every input batched: `unique` (its output's length depends on the values, as in TF,
# whose vectorized_map loops there too) and the recurrent cells (no batching rule yet: a
# per-example bias does not fit their kernels).
LOOPED = {"unique": {"unique"}, "unique_idx": {"unique"}, "lstm_cell": {"lstm_cell"},
          "gru_cell": {"gru_cell"}}
# Rows whose function reads a batched value as a Python value: all of fn runs per example.
PYTHON_VALUE = set()
# With only the first input batched (the others captured from outside fn), every rule covers
# its inputs but the recurrent cells'.
LOOPED_FIRST = {"lstm_cell", "gru_cell"}


def _run(fn, elems):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = tg.vectorized_map(fn, elems)
    return out, [str(w.message) for w in caught]


def _looped(messages):
    ops = set()
    for m in messages:
        if "ran once per example:" in m:
            ops.update(m.split("op(s) ")[1].split(" ran once")[0].split(", "))
    return ops


def _rows(spec):
    return [sample(spec, np.float64, seed=i) for i in range(B)]


# Rows whose result's shape depends on the values: examples do not stack (nor in TF)
RAGGED = {"where_indices", "count_true"}


@pytest.mark.parametrize("spec", [s for s in SPECS if s.name not in RAGGED], ids=str)
def test_every_spec_row_equals_the_loop(spec):
    rows = _rows(spec)
    stacked = tuple(tg.constant(np.stack(col)) for col in zip(*rows))
    got, messages = _run(lambda args: spec.fn(*args), stacked)
    want = tg.stack([spec.fn(*[tg.constant(a) for a in row]) for row in rows])
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
    assert _looped(messages) == LOOPED.get(spec.name, set()), messages
    assert any("Python value" in m for m in messages) == (spec.name in PYTHON_VALUE)


@pytest.mark.parametrize("spec", [s for s in SPECS if len(s.shapes) > 1], ids=str)
def test_spec_rows_with_captured_inputs(spec):
    """Only the first input batched; the others are the same tensors for every example."""
    rows = _rows(spec)
    rest = [tg.constant(a) for a in rows[0][1:]]
    first = tg.constant(np.stack([row[0] for row in rows]))
    got, messages = _run(lambda x: spec.fn(x, *rest), first)
    want = tg.stack([spec.fn(tg.constant(row[0]), *rest) for row in rows])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
    assert bool(_looped(messages)) == (spec.name in LOOPED_FIRST), messages


def test_nested_structures_in_and_out():
    rng = np.random.default_rng(0)
    a = tg.constant(rng.standard_normal((4, 3)))
    b = tg.constant(rng.standard_normal((4, 2, 3)))
    scale = tg.constant(2.0, dtype=tg.float64)

    def fn(ex):
        row, mat = ex["row"], ex["pair"][0]
        return {"sum": tg.reduce_sum(mat * row, axis=-1) * scale,
                "both": (row + 1.0, tg.transpose(mat)),
                "same": scale}  # not batched: repeated for every example

    got = tg.vectorized_map(fn, {"row": a, "pair": (b,)})
    rows = [fn({"row": a[i], "pair": (b[i],)}) for i in range(4)]
    np.testing.assert_allclose(got["sum"].numpy(), np.stack([r["sum"].numpy() for r in rows]))
    np.testing.assert_allclose(got["both"][1].numpy(),
                               np.stack([r["both"][1].numpy() for r in rows]))
    np.testing.assert_allclose(got["both"][0].numpy(), a.numpy() + 1)
    np.testing.assert_allclose(got["same"].numpy(), np.full(4, 2.0))


def _mlp(seed=0):
    rng = np.random.default_rng(seed)
    ws = [tg.Variable(rng.standard_normal(s) * 0.3) for s in [(5, 7), (7,), (7, 3), (3,)]]
    x = tg.constant(rng.standard_normal((6, 5)))
    y = tg.constant(rng.integers(0, 3, 6).astype(np.int32))
    return ws, x, y


def _loss(ws, xi, yi):
    h = tg.tanh(tg.matmul(xi[None], ws[0]) + ws[1])
    return tg.nn.sparse_softmax_cross_entropy_with_logits(yi[None], tg.matmul(h, ws[2]) + ws[3])


def test_per_example_gradients_equal_stacked_single_gradients():
    ws, x, y = _mlp()

    def grad_of_one(ex):
        with tg.GradientTape() as tape:
            loss = _loss(ws, *ex)
        return tape.gradient(loss, ws)

    got, messages = _run(grad_of_one, (x, y))
    assert not _looped(messages), messages
    singles = [grad_of_one((x[i], y[i])) for i in range(6)]
    for k, g in enumerate(got):
        assert g.shape == (6,) + ws[k].shape
        np.testing.assert_allclose(g.numpy(), np.stack([s[k].numpy() for s in singles]),
                                   rtol=1e-10, atol=1e-12)
    # and they are the rows of the Jacobian of the batch's per-example losses
    with tg.GradientTape() as tape:
        h = tg.tanh(tg.matmul(x, ws[0]) + ws[1])
        losses = tg.nn.sparse_softmax_cross_entropy_with_logits(y, tg.matmul(h, ws[2]) + ws[3])
    for g, j in zip(got, tape.jacobian(losses, ws)):
        np.testing.assert_allclose(g.numpy(), j.numpy(), rtol=1e-10, atol=1e-12)


def test_per_example_hessian_vector_products():
    """Two tapes inside fn: the inner sweep is recorded on batched values by the outer one."""
    x = tg.constant(np.random.default_rng(1).standard_normal((4, 3)))
    v = tg.constant([1.0, -2.0, 0.5], dtype=tg.float64)

    def hvp(xi):
        with tg.GradientTape() as outer:
            outer.watch(xi)
            with tg.GradientTape() as inner:
                inner.watch(xi)
                f = tg.reduce_sum(tg.sin(xi) * xi) * tg.reduce_sum(xi * xi)
            g = inner.gradient(f, xi)
        return outer.gradient(g, xi, output_gradients=v)

    got = tg.vectorized_map(hvp, x)
    want = tg.stack([hvp(x[i]) for i in range(4)])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def test_gradient_through_vectorized_map_equals_gradient_through_the_loop():
    ws, x, y = _mlp(2)

    def through(mapper):
        with tg.GradientTape() as tape:
            tape.watch(x)
            losses = mapper(lambda ex: _loss(ws, *ex)[0] * tg.reduce_sum(ex[0]))
            total = tg.reduce_sum(losses * losses)
        return tape.gradient(total, [x] + ws)

    got = through(lambda fn: tg.vectorized_map(fn, (x, y)))
    want = through(lambda fn: tg.stack([fn((x[i], y[i])) for i in range(6)]))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


def test_per_example_gradients_under_an_outer_tape():
    """A gradient of per-example gradients: the tape inside fn and the one outside both work."""
    ws, x, y = _mlp(3)

    def grad_norms(mapper):
        with tg.GradientTape() as tape:
            def one(ex):
                with tg.GradientTape() as t:
                    loss = _loss(ws, *ex)
                return tg.reduce_sum(t.gradient(loss, ws[0]) ** 2)
            total = tg.reduce_sum(mapper(one))
        return tape.gradient(total, ws[2])

    got = grad_norms(lambda fn: tg.vectorized_map(fn, (x, y)))
    want = grad_norms(lambda fn: tg.stack([fn((x[i], y[i])) for i in range(6)]))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-12)


def test_nested_vectorized_map():
    x = tg.constant(np.arange(24.0).reshape(2, 3, 4))
    c = tg.constant(np.arange(4.0))
    got = tg.vectorized_map(
        lambda m: tg.vectorized_map(lambda r: tg.reduce_sum(r * m[0] + c), m), x)
    want = np.array([[np.sum(r * m[0] + np.arange(4.0)) for r in m] for m in x.numpy()])
    np.testing.assert_allclose(got.numpy(), want)


def test_python_values_of_batched_tensors_run_per_example_or_raise():
    x = tg.constant([[1.0, -2.0], [-3.0, 4.0]])

    def fn(row):
        return row * 2.0 if float(row[0]) > 0 else -row

    with pytest.warns(UserWarning, match="Python value"):
        got = tg.vectorized_map(fn, x)
    np.testing.assert_allclose(got.numpy(), [[2.0, -4.0], [3.0, -4.0]])
    with pytest.raises(ValueError, match="fallback_to_while_loop"):
        tg.vectorized_map(fn, x, fallback_to_while_loop=False)


def test_an_op_without_a_rule_loops_says_so_or_raises():
    x = tg.constant(np.arange(24.0).reshape(2, 3, 4))
    looping = registry.def_op("test_vmap_no_rule", lambda xp, a: a[::-1].copy())
    try:
        with pytest.raises(ValueError, match="test_vmap_no_rule"):
            tg.vectorized_map(lambda r: registry.apply1(looping, r, {}), x,
                              fallback_to_while_loop=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # warn=False: silent
            out = tg.vectorized_map(lambda r: registry.apply1(looping, r, {}), x, warn=False)
        with pytest.warns(UserWarning, match="test_vmap_no_rule ran once per example"):
            tg.vectorized_map(lambda r: registry.apply1(looping, r, {}), x)
    finally:
        del registry.REGISTRY["test_vmap_no_rule"]
    np.testing.assert_allclose(out.numpy(), x.numpy()[:, ::-1])


def test_segment_sums_with_shared_and_per_example_ids():
    """Shared segment ids batch by the op's own `lead` param; per-example ids are Python values
    of the public function (it checks them), so fn runs once per example."""
    x = tg.constant(np.arange(24.0).reshape(2, 3, 4))
    ids = tg.constant([1, 0, 1])
    got, messages = _run(lambda d: tg.math.unsorted_segment_sum(d, ids, 2), x)
    assert not messages, messages
    want = np.stack([[d[1], d[0] + d[2]] for d in x.numpy()])
    np.testing.assert_allclose(got.numpy(), want)
    per = tg.constant([[1, 0, 1], [0, 0, 1]])
    got, messages = _run(lambda ex: tg.math.unsorted_segment_sum(ex[0], ex[1], 2), (x, per))
    assert any("Python value" in m for m in messages)
    np.testing.assert_allclose(got.numpy()[1], [x.numpy()[1][0] + x.numpy()[1][1],
                                                x.numpy()[1][2]])


def test_mismatched_leading_dims():
    with pytest.raises(tg.errors.InvalidArgumentError, match=r"\[3, 2\].*\[4\]"):
        tg.vectorized_map(lambda ex: ex[0], (tg.ones((3, 2)), tg.ones((4,))))
    with pytest.raises(ValueError, match="scalar"):
        tg.vectorized_map(lambda ex: ex, tg.constant(1.0))
    # a size of 1 is broadcast, as in TensorFlow
    got = tg.vectorized_map(lambda ex: ex[0] * ex[1], (tg.constant([[1.0, 2.0]]),
                                                      tg.constant([[1.0], [2.0], [3.0]])))
    np.testing.assert_allclose(got.numpy(), [[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])


def test_inputs_are_not_mutated_and_dtypes_kept():
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    before = a.copy()
    out = tg.vectorized_map(lambda r: r * 2.0 + 1.0, a)
    assert out.dtype == tg.float32
    np.testing.assert_array_equal(a, before)
    np.testing.assert_allclose(out.numpy(), before * 2 + 1)


def test_per_example_gradients_of_a_small_conv_net():
    """conv (its filter shared: folded into the op's own batch axis), max pooling (a residual
    the tapes inside fn save), bias and activation: no op loops, and the gradients equal the
    stacked single ones."""
    rng = np.random.default_rng(4)
    w = tg.Variable(rng.standard_normal((3, 3, 1, 2)) * 0.5)
    b = tg.Variable(rng.standard_normal(2) * 0.1)
    dense = tg.Variable(rng.standard_normal((8, 3)) * 0.3)
    x = tg.constant(rng.standard_normal((3, 6, 6, 1)))
    y = tg.constant(np.array([0, 2, 1], np.int32))

    def grad_of_one(ex):
        xi, yi = tg.expand_dims(ex[0], 0), tg.expand_dims(ex[1], 0)
        with tg.GradientTape() as tape:
            h = tg.nn.bias_act(tg.nn.conv2d(xi, w, 1, "SAME"), b, "tanh")
            h = tg.reshape(tg.nn.max_pool2d(h, 3, 3, "VALID"), (1, -1))
            loss = tg.nn.sparse_softmax_cross_entropy_with_logits(yi, tg.matmul(h, dense))
        return tape.gradient(loss, [w, b, dense])

    got, messages = _run(grad_of_one, (x, y))
    assert not messages, messages
    singles = [grad_of_one((x[i], y[i])) for i in range(3)]
    for k, g in enumerate(got):
        np.testing.assert_allclose(g.numpy(), np.stack([s[k].numpy() for s in singles]),
                                   rtol=1e-10, atol=1e-12)


def test_per_example_jacobians_and_forward_mode_inside_fn():
    x = tg.constant(np.random.default_rng(5).standard_normal((4, 3)))
    v = tg.constant([1.0, 0.5, -1.0], dtype=tg.float64)

    def jac(xi):
        with tg.GradientTape() as t:
            t.watch(xi)
            y = tg.sin(xi) * tg.reduce_sum(xi)
        return t.jacobian(y, xi)

    def jvp(xi):
        with tg.autodiff.ForwardAccumulator(xi, v) as acc:
            y = tg.reduce_sum(tg.sin(xi) * xi)
        return acc.jvp(y)

    for fn in (jac, jvp):
        got = tg.vectorized_map(fn, x)
        want = tg.stack([fn(x[i]) for i in range(4)])
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)


def test_unrecorded_sweeps_reuse_the_forwards_residuals():
    """A sweep inside fn that no tape records uses the softmax the cross-entropy kept; under a
    tape outside, it runs the cross-entropy's grad op (differentiable, recomputing the
    softmax), and both give the same gradients."""
    ws, x, y = _mlp(6)
    seen = []

    def observe(op, inputs, out, params):
        seen.append(op.name)

    def grad_of_one(ex):
        with tg.GradientTape() as tape:
            loss = _loss(ws, *ex)
        return tape.gradient(loss, ws[2])

    registry.OBSERVERS.append(observe)
    try:
        plain = tg.vectorized_map(grad_of_one, (x, y))
        alone = seen.count("softmax") + seen.count("sparse_softmax_cross_entropy_grad")
        del seen[:]
        with tg.GradientTape():
            recorded = tg.vectorized_map(grad_of_one, (x, y))
        under_tape = seen.count("sparse_softmax_cross_entropy_grad")
    finally:
        registry.OBSERVERS.remove(observe)
    assert alone == 0 and under_tape == 1
    np.testing.assert_allclose(plain.numpy(), recorded.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("lead", [(), (2,)])
def test_per_example_outer_products_are_one_einsum(ta, tb, lead):
    """Both operands batched with a contraction of length 1 (a dense layer's per-example weight
    gradient): one einsum on the operands as they come, no reshapes, no batched matmul, for
    every transpose flag and extra leading axes; the result is the stacked products."""
    rng = np.random.default_rng(7)
    a_shape = lead + ((1, 3) if ta else (3, 1))
    b_shape = lead + ((4, 1) if tb else (1, 4))
    a = tg.constant(rng.standard_normal((5,) + a_shape).astype(np.float32))
    b = tg.constant(rng.standard_normal((5,) + b_shape).astype(np.float32))
    seen = []

    def observe(op, inputs, out, params):
        seen.append(op.name)

    def fn(ab):
        return tg.matmul(ab[0], ab[1], transpose_a=ta, transpose_b=tb)

    registry.OBSERVERS.append(observe)
    try:
        got = tg.vectorized_map(fn, (a, b))
    finally:
        registry.OBSERVERS.remove(observe)
    assert seen == ["einsum"], seen
    want = tg.stack([fn((a[i], b[i])) for i in range(5)])
    assert got.shape == want.shape == (5,) + lead + (3, 4) and got.dtype == tg.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


class _CountingKernels:
    """The CPU kernels with their `outer` calls counted."""

    def __init__(self, real):
        self.real = real
        self.outer_calls = 0

    def outer(self, *args):
        self.outer_calls += 1
        return self.real.outer(*args)

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.mark.skipif(cpu_kernels is None, reason="the CPU kernels are not built here")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_per_example_weight_gradients_run_the_cpu_outer_kernel(tg_device, monkeypatch, dtype):
    """On numpy the per-example outer products (the dense layers' weight gradients of the
    per-example-gradient recipe) run the CPU kernel, once per layer, and the gradients equal the
    stacked single-example ones; the kernel's products equal numpy's einsum bit for bit (signed
    zeros, inf and NaN included). Elsewhere the reference runs."""
    counting = _CountingKernels(cpu_kernels)
    monkeypatch.setattr(kernels, "cpu_kernels", counting)
    ws, x, y = _mlp(8)
    ws = [tg.cast(w, dtype) for w in ws]
    x = tg.cast(x, dtype)

    def grad_of_one(ex):
        with tg.GradientTape() as tape:
            for w in ws:
                tape.watch(w)
            loss = _loss(ws, *ex)
        return tape.gradient(loss, ws)

    got = tg.vectorized_map(grad_of_one, (x, y))
    assert counting.outer_calls == (2 if tg_device == "numpy" else 0)
    singles = [grad_of_one((x[i], y[i])) for i in range(6)]
    for k, g in enumerate(got):
        assert g.dtype == dtype
        np.testing.assert_allclose(g.numpy(), np.stack([s[k].numpy() for s in singles]),
                                   rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-7)

    a = np.array([[-1.0, 2.0, np.nan, np.inf, 0.0]] * 2, dtype)
    b = np.array([[0.0, -0.0, 3.0, -np.inf, -2.0, 1e-30]] * 2, dtype)
    want = np.einsum("bi,bj->bij", a, b)
    got = kernels.cpu_einsum_outer(np, a[:, :, None], b[:, None, :], terms=("bxy", "byz"),
                                   out="bxz")
    bits = np.int32 if dtype == np.float32 else np.int64
    np.testing.assert_array_equal(got.view(bits), want.view(bits))


@pytest.mark.skipif(cpu_kernels is None, reason="the CPU kernels are not built here")
@pytest.mark.parametrize("terms,out,shapes", [
    (("bi", "bj"), "bij", [(4, 3), (4, 5)]),             # the plain outer product per row
    (("byx", "bzy"), "bxz", [(4, 1, 3), (4, 5, 1)]),     # transposed operands, size-1 sum
    (("abxy", "abyz"), "abxz", [(2, 4, 3, 1), (2, 4, 1, 5)]),
    (("bi", "bj"), "bij", [(1, 3), (4, 5)]),             # broadcast rows: declined
    (("bxy", "byz"), "bxz", [(4, 3, 2), (4, 2, 5)]),     # a real contraction: declined
    (("bi", "bj"), "bji", [(4, 3), (4, 5)]),             # the transposed product: declined
    (("bi", "bj", "bk"), "bijk", [(4, 3), (4, 5), (4, 2)]),
])
def test_the_einsum_outer_kernel_covers_outer_products_only(terms, out, shapes):
    """Where the kernel runs it equals numpy's einsum; anything else it declines
    (NotImplemented), and the op's reference runs."""
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    got = kernels.cpu_einsum_outer(np, *xs, terms=terms, out=out)
    covered = len(xs) == 2 and out[-2:] != "ji" and shapes[0][0] == shapes[1][0] and \
        (len(shapes[0]) < 3 or 1 in shapes[0][-2:])
    if not covered:
        assert got is NotImplemented
        return
    want = np.einsum(",".join(terms) + "->" + out, *xs)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert tg.einsum(",".join(terms) + "->" + out, *[tg.constant(x) for x in xs]).shape == \
        want.shape
