"""Forward mode over the op-spec table (JVP vs finite differences, the adjoint identity with the
tape's VJP, batched tangents, forward vs reverse Jacobians), Hessians, and ForwardAccumulator's
semantics, including TensorFlow's documented examples with their documented outputs."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.autodiff.forward import NoJVPError, has_jvp
from tapegpu.ops.registry import REGISTRY, Op, apply
from tapegpu.testing.op_specs import SPECS, sample

DIFF = [s for s in SPECS if s.grad]
FA = tg.autodiff.ForwardAccumulator


def _jvp(spec, xs, vs, batch_ndim=0):
    ts = [tg.constant(x) for x in xs]
    with FA(ts, [tg.constant(v) for v in vs], batch_ndim=batch_ndim) as acc:
        y = spec.fn(*ts)
    return y, acc.jvp(y)


def _dot(a, b):
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


# -- the op-spec table ----------------------------------------------------------------------------

def test_every_differentiable_op_has_a_jvp():
    missing = sorted(n for n, op in REGISTRY.items() if op.differentiable and not has_jvp(op))
    assert not missing, f"differentiable ops without a JVP rule (native or derived): {missing}"


@pytest.mark.parametrize("spec", DIFF, ids=str)
def test_jvp_matches_central_differences(spec):
    rng = np.random.default_rng(1)
    xs = sample(spec, np.float64)
    vs = [rng.standard_normal(x.shape) * spec.extra.get("scale", 1.0) for x in xs]
    y, t = _jvp(spec, xs, vs)
    h = spec.extra.get("h", 1e-6)
    plus = spec.fn(*[tg.constant(x + h * v) for x, v in zip(xs, vs)]).numpy()
    minus = spec.fn(*[tg.constant(x - h * v) for x, v in zip(xs, vs)]).numpy()
    fd = (plus - minus) / (2 * h)
    assert t is not None and t.shape == y.shape and t.dtype == y.dtype
    # a spec with its own wide step (float32 quantisation inside) gets a looser absolute bound
    atol = 1e-6 if "h" not in spec.extra else 1e-4
    np.testing.assert_allclose(t.numpy(), fd, rtol=1e-5, atol=atol, err_msg=spec.name)


@pytest.mark.parametrize("spec", DIFF, ids=str)
def test_adjoint_identity(spec):
    """<u, J v> from the JVP equals <J^T u, v> from the tape's VJP."""
    rng = np.random.default_rng(2)
    xs = sample(spec, np.float64)
    vs = [rng.standard_normal(x.shape) for x in xs]
    ts = [tg.constant(x) for x in xs]
    with FA(ts, [tg.constant(v) for v in vs]) as acc:
        with tg.GradientTape() as tape:
            tape.watch(ts)
            y = spec.fn(*ts)
    u = rng.standard_normal(y.shape)
    grads = tape.gradient(y, ts, output_gradients=tg.constant(u))
    lhs = _dot(u, acc.jvp(y))
    rhs = sum(_dot(g, v) for g, v in zip(grads, vs) if g is not None)
    # exact up to rounding (a float32 round trip inside rounds J v and J^T u differently)
    assert lhs == pytest.approx(rhs, rel=spec.extra.get("rel", 1e-9), abs=1e-10), spec.name


@pytest.mark.parametrize("batch", [(3,), (2, 2)], ids=["1axis", "2axes"])
@pytest.mark.parametrize("spec", DIFF, ids=str)
def test_batched_jvp_equals_stacked(spec, batch):
    rng = np.random.default_rng(3)
    xs = sample(spec, np.float64)
    vs = [rng.standard_normal(batch + x.shape) for x in xs]
    y, t = _jvp(spec, xs, vs, batch_ndim=len(batch))
    flat = [v.reshape((-1,) + x.shape) for v, x in zip(vs, xs)]
    singles = [_jvp(spec, xs, [f[i] for f in flat])[1].numpy()
               for i in range(int(np.prod(batch)))]
    want = np.stack(singles).reshape(batch + y.shape)
    assert t.shape == batch + y.shape
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-12, atol=1e-13, err_msg=spec.name)


@pytest.mark.parametrize("spec", DIFF, ids=str)
def test_forward_and_reverse_jacobians_agree(spec):
    xs = sample(spec, np.float64)
    ts = [tg.constant(x) for x in xs]
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(ts)
        y = spec.fn(*ts)
    fwd = tape.jacobian(y, ts, mode="forward")
    rev = tape.jacobian(y, ts, mode="reverse")
    for f, r, x in zip(fwd, rev, xs):
        assert f.shape == y.shape + x.shape
        np.testing.assert_allclose(f.numpy(), r.numpy(), rtol=spec.extra.get("rel", 1e-10),
                                   atol=1e-12, err_msg=spec.name)


@pytest.mark.parametrize("spec", DIFF, ids=str)
def test_float32_tangents_stay_float32(spec):
    xs = sample(spec, np.float32)
    y, t = _jvp(spec, xs, [np.ones_like(x) for x in xs])
    assert t.dtype == tg.float32


# -- TensorFlow's documented ForwardAccumulator examples -----------------------------------------

def test_tf_doc_higher_order_from_outer_accumulator():
    primal = tg.constant(1.1)
    with FA(primal, tg.constant(1.)) as outer:
        with FA(primal, tg.constant(1.)) as inner:
            primal_out = primal ** tg.constant(3.5)
    inner_jvp = inner.jvp(primal_out)
    assert float(inner_jvp) == pytest.approx(4.4417057, rel=1e-6)  # 3.5 * 1.1 ** 2.5
    assert float(outer.jvp(inner_jvp)) == pytest.approx(10.094786, rel=1e-6)
    # inner accumulators do not see the JVP computations of outer ones
    assert inner.jvp(outer.jvp(primal_out)) is None


def test_tf_doc_forward_over_backward_hvp():
    v = tg.Variable([1., 2.])
    with FA(v, tg.constant([1., 0.])) as acc:
        with tg.GradientTape() as tape:
            y = tg.reduce_sum(v ** 3.)
        backward = tape.gradient(y, v)
    np.testing.assert_array_equal(backward.numpy(), [3., 12.])
    np.testing.assert_array_equal(acc.jvp(backward).numpy(), [6., 0.])


def test_tf_doc_linear_regression_columns_match_gradient():
    x = tg.constant([[2.0, 3.0], [1.0, 4.0]])
    targets = tg.constant([[1.], [-1.]])
    dense = tg.layers.Dense(1)
    dense.build([None, 2])
    dense(x)  # (the layer also builds on its first call: the variables are fixed from here on)

    def loss_fn():
        return tg.reduce_sum((dense(x) - targets) ** 2.)

    kernel_fprop = []
    with FA(dense.kernel, tg.constant([[1.], [0.]])) as acc:
        kernel_fprop.append(acc.jvp(loss_fn()))
    with FA(dense.kernel, tg.constant([[0.], [1.]])) as acc:
        kernel_fprop.append(acc.jvp(loss_fn()))
    with FA(dense.bias, tg.constant([1.])) as acc:
        bias_fprop = acc.jvp(loss_fn())
    with tg.GradientTape() as tape:
        loss = loss_fn()
    kernel_grad, bias_grad = tape.gradient(loss, (dense.kernel, dense.bias))
    np.testing.assert_allclose(kernel_grad.numpy(), tg.stack(kernel_fprop).numpy()[:, None],
                               rtol=1e-6)
    np.testing.assert_allclose(bias_grad.numpy(), bias_fprop.numpy()[None], rtol=1e-6)


# -- ForwardAccumulator semantics ------------------------------------------------------------------

def test_nested_structures_and_variables():
    a = tg.constant([1.0, 2.0])
    v = tg.Variable(3.0)
    primals = {"a": a, "v": v}
    tangents = {"a": tg.constant([1.0, 1.0]), "v": tg.constant(2.0)}
    with FA(primals, tangents) as acc:
        y = tg.reduce_sum(a * a) * v
    # d = (2a . ta) v + |a|^2 tv = (2 + 4) 3 + 5 * 2
    assert float(acc.jvp(y)) == pytest.approx(28.0)
    got = acc.jvp({"a": a, "v": v, "y": [y]})
    np.testing.assert_array_equal(got["a"].numpy(), [1.0, 1.0])
    assert float(got["v"]) == 2.0 and float(got["y"][0]) == pytest.approx(28.0)


def test_unconnected_none_or_zero_and_recording_only_inside():
    x = tg.constant([1.0, 2.0])
    z = tg.constant([5.0, 6.0])
    with FA(x, tg.constant([1.0, 0.0])) as acc:
        y = z * 2.0
    assert acc.jvp(y) is None
    np.testing.assert_array_equal(acc.jvp(y, unconnected_gradients="zero").numpy(), [0, 0])
    outside = x * 3.0  # after the context: no new JVPs
    assert acc.jvp(outside) is None
    np.testing.assert_array_equal(acc.jvp(x).numpy(), [1.0, 0.0])  # still readable


def test_errors():
    x = tg.constant([1.0, 2.0])
    with pytest.raises(ValueError, match="multiple times"):
        FA([x, x], [tg.constant([1.0, 0.0])] * 2)
    with pytest.raises(ValueError, match="shape"):
        FA(x, tg.constant([1.0, 0.0, 0.0]))
    with pytest.raises(TypeError):
        FA(x, tg.constant([1.0, 0.0], dtype=tg.float64))  # no silent dtype conversion
    no_jvp = Op("reverse_only", lambda xp, x: x * 2, vjp=lambda ops, g: g * 2.0)
    with FA(x, tg.constant([1.0, 0.0])):
        with pytest.raises(NoJVPError, match="reverse_only"):
            apply(no_jvp, (x,), {})


def test_several_accumulators_at_once():
    x = tg.constant(2.0)
    w = tg.constant(3.0)
    with FA(x, tg.constant(1.0)) as ax, FA(w, tg.constant(1.0)) as aw:
        y = x * x * w
    assert float(ax.jvp(y)) == pytest.approx(12.0)  # 2 x w
    assert float(aw.jvp(y)) == pytest.approx(4.0)  # x^2
    # the inner one's JVP is differentiated by the outer one: d/dx (x^2) = 2x
    assert float(ax.jvp(aw.jvp(y))) == pytest.approx(4.0)


def test_reverse_over_forward_hvp():
    x = tg.constant([1.0, 2.0, 3.0], dtype=tg.float64)
    v = tg.constant([0.5, -1.0, 2.0], dtype=tg.float64)

    def f(x):
        return tg.reduce_sum(tg.sin(x) * x ** 2.0) + tg.reduce_prod(x)

    with tg.GradientTape() as tape:
        tape.watch(x)
        with FA(x, v) as acc:
            y = f(x)
        jv = acc.jvp(y)
    rev_fwd = tape.gradient(jv, x)
    H = tg.autodiff.hessian(f, x).numpy()
    np.testing.assert_allclose(rev_fwd.numpy(), H @ v.numpy(), rtol=1e-12)
    for mode in ("reverse_over_forward", "forward_over_reverse"):
        got = tg.autodiff.hvp(f, x, v, mode=mode)
        np.testing.assert_allclose(got.numpy(), H @ v.numpy(), rtol=1e-12, err_msg=mode)


@pytest.mark.parametrize("mode", ["reverse_over_forward", "forward_over_reverse"])
def test_hvp_of_an_mlp_with_variables(mode):
    rng = np.random.default_rng(5)
    x = tg.constant(rng.standard_normal((4, 3)))
    labels = tg.constant(np.array([0, 1, 1, 0], np.int32))
    ws = [tg.Variable(rng.standard_normal((3, 5))), tg.Variable(rng.standard_normal(5)),
          tg.Variable(rng.standard_normal((5, 2)))]
    vs = [tg.constant(rng.standard_normal(w.shape)) for w in ws]

    def loss(w1, b1, w2):
        h = tg.tanh(tg.matmul(x, w1) + b1)
        return tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(
            labels, tg.matmul(h, w2)))

    got = tg.autodiff.hvp(loss, ws, vs, mode=mode)
    flat = np.concatenate([w.numpy().ravel() for w in ws])
    sizes = np.cumsum([0] + [w.numpy().size for w in ws])

    def f_flat(theta):
        parts = [tg.reshape(theta[a:b], w.shape) for a, b, w in zip(sizes, sizes[1:], ws)]
        return loss(*parts)

    H = tg.autodiff.hessian(f_flat, tg.constant(flat)).numpy()
    want = H @ np.concatenate([v.numpy().ravel() for v in vs])
    np.testing.assert_allclose(np.concatenate([g.numpy().ravel() for g in got]), want,
                               rtol=1e-10, atol=1e-12)


def test_variable_reads_under_accumulator_and_tape():
    v = tg.Variable([1.0, 2.0], dtype=tg.float64)
    with FA(v, tg.constant([1.0, 1.0], dtype=tg.float64)) as acc:
        with tg.GradientTape() as tape:
            y = tg.reduce_sum(tg.exp(v) * v)
        g = tape.gradient(y, v)
    # g = e^v (1 + v); H = diag(e^v (2 + v))
    e = np.exp([1.0, 2.0])
    np.testing.assert_allclose(acc.jvp(g).numpy(), e * (2 + np.array([1.0, 2.0])))


# -- Jacobians and Hessians ------------------------------------------------------------------------

def _fns():
    return {
        "rosenbrock": lambda x: tg.reduce_sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 +
                                              (1.0 - x[:-1]) ** 2.0),
        "softmax_xent": lambda x: tg.reduce_sum(tg.nn.log_softmax(tg.reshape(x, (2, 3))) *
                                                tg.constant(np.arange(6.0).reshape(2, 3))),
        "mlp": lambda x: tg.reduce_sum(tg.tanh(tg.matmul(tg.reshape(x, (2, 3)), tg.constant(
            np.linspace(-1, 1, 12).reshape(3, 4)))) ** 2.0),
        "logdet": lambda x: tg.linalg.logdet(tg.matmul(tg.reshape(x, (2, 3)), tg.reshape(
            x, (2, 3)), transpose_b=True) + tg.eye(2, dtype=tg.float64)),
    }


@pytest.mark.parametrize("name", list(_fns()))
def test_hessian_symmetric_and_matches_differences_of_gradients(name):
    f = _fns()[name]
    x0 = np.random.default_rng(4).uniform(-1, 1, 6)
    H = tg.autodiff.hessian(f, tg.constant(x0)).numpy()
    np.testing.assert_allclose(H, H.T, rtol=1e-10, atol=1e-10)

    def grad(x):
        x = tg.constant(x)
        with tg.GradientTape() as t:
            t.watch(x)
            y = f(x)
        return t.gradient(y, x).numpy()

    h = 1e-5
    fd = np.stack([(grad(x0 + h * e) - grad(x0 - h * e)) / (2 * h) for e in np.eye(6)], 1)
    np.testing.assert_allclose(H, fd, rtol=1e-6, atol=1e-6)


def test_hessian_of_several_arguments():
    a = tg.constant([1.0, 2.0], dtype=tg.float64)
    b = tg.constant(3.0, dtype=tg.float64)
    c = tg.constant([4.0], dtype=tg.float64)
    H = tg.autodiff.hessian(lambda a, b, c: tg.reduce_sum(a * a) * b + b * b, [a, b, c])
    np.testing.assert_allclose(H[0][0].numpy(), 6.0 * np.eye(2))
    np.testing.assert_allclose(H[0][1].numpy(), [2.0, 4.0])
    np.testing.assert_allclose(H[1][0].numpy(), [2.0, 4.0])
    assert float(H[1][1]) == 2.0
    assert H[2][2].shape == (1, 1) and not H[2][2].numpy().any()


def test_auto_mode_and_batch_jacobian():
    x = tg.constant(np.linspace(-1, 1, 6).reshape(3, 2))
    w = tg.constant(np.linspace(0, 1, 10).reshape(2, 5))
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tg.sin(tg.matmul(x, w))
    rev = tape.jacobian(y, x, mode="reverse").numpy()
    np.testing.assert_allclose(tape.jacobian(y, x).numpy(), rev, rtol=1e-12)  # auto: forward
    bj_f = tape.batch_jacobian(y, x, mode="forward").numpy()
    bj_r = tape.batch_jacobian(y, x, mode="reverse").numpy()
    assert bj_f.shape == (3, 5, 2)
    np.testing.assert_allclose(bj_f, bj_r, rtol=1e-12)
    np.testing.assert_allclose(bj_f, np.stack([rev[i, :, i] for i in range(3)]), rtol=1e-12)
    with pytest.raises(ValueError, match="mode"):
        tape.jacobian(y, x, mode="sideways")


def test_forward_jacobian_chunks_and_unconnected():
    x = tg.constant(np.arange(5.0))
    z = tg.constant(1.0, dtype=tg.float64)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch([x, z])
        y = tg.exp(x)
    j = tape.jacobian(y, [x, z], mode="forward", parallel_iterations=2)
    np.testing.assert_allclose(j[0].numpy(), np.diag(np.exp(np.arange(5.0))))
    assert j[1] is None
    jz = tape.jacobian(y, z, mode="forward", unconnected_gradients="zero")
    assert jz.shape == (5,) and not jz.numpy().any()


def test_functional_jvp_and_vjp():
    y, t = tg.autodiff.jvp(lambda a, b: a * b, [tg.constant(2.0), tg.constant(3.0)],
                           [tg.constant(1.0), tg.constant(0.0)])
    assert float(y) == 6.0 and float(t) == 3.0
    y, vjp_fn = tg.autodiff.vjp(lambda a, b: a * b, [tg.constant(2.0), tg.constant(3.0)])
    ga, gb = vjp_fn(tg.constant(1.0))
    assert (float(ga), float(gb)) == (3.0, 2.0)
    ga, gb = vjp_fn(tg.constant(2.0))  # callable again
    assert (float(ga), float(gb)) == (6.0, 4.0)


# -- custom gradients ----------------------------------------------------------------------------

@tg.custom_gradient
def log1pexp(x):
    """softplus with its derivative, sigmoid, written out as a custom gradient (TF's example)."""
    e = tg.exp(x)

    def grad(dy):
        return dy * (1 - 1 / (1 + e))
    return tg.math.log(1 + e), grad


def test_custom_gradient_jvp_by_transposition():
    x = tg.constant([0.0, 1.0, 2.0], dtype=tg.float64)
    v = tg.constant([1.0, -2.0, 0.5], dtype=tg.float64)
    with FA(x, v) as acc:
        y = log1pexp(x)
    sig = 1 / (1 + np.exp(-x.numpy()))
    np.testing.assert_allclose(acc.jvp(y).numpy(), sig * v.numpy())
    # batched tangents through the transposed grad_fn
    with FA(x, tg.stack([v, 2.0 * v]), batch_ndim=1) as acc:
        y = log1pexp(x)
    np.testing.assert_allclose(acc.jvp(y).numpy(), [sig * v.numpy(), 2 * sig * v.numpy()])
    # and in a forward-mode Jacobian over a tape
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = log1pexp(x)
    np.testing.assert_allclose(tape.jacobian(y, x, mode="forward").numpy(), np.diag(sig))


def test_custom_gradient_with_two_inputs_and_a_variable():
    w = tg.Variable(2.0, dtype=tg.float64)

    @tg.custom_gradient
    def f(a, b):
        def grad(dy, variables=None):
            return (dy * b * w, dy * a * w), [dy * a * b]
        return a * b * w, grad

    a = tg.constant(3.0, dtype=tg.float64)
    b = tg.constant(5.0, dtype=tg.float64)
    with FA([a, b, w], [tg.constant(1.0, dtype=tg.float64)] * 3) as acc:
        y = f(a, b)
    assert float(acc.jvp(y)) == pytest.approx(5 * 2 + 3 * 2 + 15)


def test_custom_gradient_outside_tapegpu_is_reverse_only():
    @tg.custom_gradient
    def f(x):
        def grad(dy):
            return tg.constant(np.cos(x.numpy()) * dy.numpy())  # computed in numpy
        return tg.sin(x), grad

    x = tg.constant([0.5, 1.0])
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.cos([0.5, 1.0]), rtol=1e-6)
    with FA(x, tg.constant([1.0, 1.0])):
        with pytest.raises(NoJVPError, match="reverse mode only"):
            f(x)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tg.tile(f(x), [3])  # 6 outputs from 2 inputs: 'auto' would pick forward mode
    with pytest.raises(NoJVPError):
        tape.jacobian(y, x, mode="forward")
    want = np.tile(np.diag(np.cos([0.5, 1.0])), (3, 1))
    np.testing.assert_allclose(tape.jacobian(y, x).numpy(), want, rtol=1e-6)  # falls back


def test_forward_jacobian_of_variables_in_a_structure():
    v = tg.Variable(np.array([1.0, 2.0]))
    w = tg.Variable(np.array(3.0))
    with tg.GradientTape(persistent=True) as tape:
        y = tg.stack([v[0] * w, v[1] ** 2.0, tg.sin(w)])
    fwd = tape.jacobian(y, {"v": v, "w": w}, mode="forward")
    rev = tape.jacobian(y, {"v": v, "w": w}, mode="reverse")
    for k in ("v", "w"):
        np.testing.assert_allclose(fwd[k].numpy(), rev[k].numpy(), rtol=1e-12)


def test_docstring_examples_run():
    import doctest
    from tapegpu.autodiff import forward, functional
    for module in (forward, functional):
        result = doctest.testmod(module, extraglobs={"tg": tg, "np": np})
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_forward_jacobian_on_a_tape_with_a_memory_budget():
    """Checkpointed segments (saved values dropped) are restored for the forward sweep too."""
    x = tg.constant(np.linspace(0.1, 0.5, 4))
    with tg.GradientTape(persistent=True, memory_budget=600) as tape:
        tape.watch(x)
        h = x
        for _ in range(12):
            h = tg.sin(h) * 0.9 + h * tg.cos(h)
    assert tape.stats()["segments"] >= 2
    fwd = tape.jacobian(h, x, mode="forward").numpy()
    rev = tape.jacobian(h, x, mode="reverse").numpy()
    assert np.abs(rev).max() > 1e-3
    np.testing.assert_allclose(fwd, rev, rtol=1e-12)
    np.testing.assert_allclose(tape.jacobian(h, x, mode="forward").numpy(), fwd, rtol=0)


def test_forward_jacobian_edge_cases():
    x = tg.constant([1.0, 2.0, 3.0])
    e = tg.zeros((0,))
    i = tg.constant([1, 2])
    with tg.GradientTape(persistent=True) as tape:
        tape.watch([x, e])
        y = tg.concat([x, e], 0) * 2.0
    np.testing.assert_array_equal(tape.jacobian(x, x, mode="forward").numpy(), np.eye(3))
    with pytest.warns(UserWarning, match="got int32; its gradient is None"):
        jx, je, ji = tape.jacobian(y, [x, e, i], mode="forward")
    np.testing.assert_array_equal(jx.numpy(), 2 * np.eye(3))
    assert je.shape == (3, 0) and ji is None
    assert tape.jacobian(y, e, mode="reverse").shape == (3, 0)


@pytest.mark.parametrize("key", [(np.array([0, 1]), slice(None), np.array([1, 0])),
                                 (0, slice(None), np.array([1, 0, 3])),
                                 (None, np.array([1]), slice(None), 0)], ids=str)
def test_getitem_with_separated_index_arrays_keeps_batch_axes_in_front(key):
    """numpy moves the axes of index arrays that a slice separates to the front; the batch
    axes of a tangent must stay in front all the same."""
    rng = np.random.default_rng(6)
    x = tg.constant(rng.standard_normal((2, 3, 4)))
    vs = rng.standard_normal((5, 2, 3, 4))
    with FA(x, tg.constant(vs), batch_ndim=1) as acc:
        y = x[key]
    np.testing.assert_array_equal(acc.jvp(y).numpy(), np.stack([v[key] for v in vs]))


@pytest.mark.parametrize("mode", ["reverse_over_forward", "forward_over_reverse"])
def test_hvp_through_a_custom_gradient(mode):
    x = tg.constant([0.0, 1.0, 2.0], dtype=tg.float64)
    v = tg.constant([1.0, -2.0, 0.5], dtype=tg.float64)
    s = 1 / (1 + np.exp(-x.numpy()))
    # f = sum(softplus(x) x):  f'' = s (1 - s) x + 2 s, diagonal
    want = (s * (1 - s) * x.numpy() + 2 * s) * v.numpy()
    got = tg.autodiff.hvp(lambda x: tg.reduce_sum(log1pexp(x) * x), x, v, mode=mode)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_accumulators_see_only_their_own_thread():
    import threading
    x = tg.constant([1.0, 2.0])
    got = {}
    with tg.autodiff.ForwardAccumulator(x, tg.constant([1.0, 0.0])) as acc:
        y = x * x
        th = threading.Thread(target=lambda: got.update(z=tg.sin(x)))
        th.start()
        th.join()
    np.testing.assert_allclose(acc.jvp(y).numpy(), [2.0, 0.0])
    assert acc.jvp(got["z"]) is None  # computed in another thread: no tangent
