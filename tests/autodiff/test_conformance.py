"""TensorFlow conformance of the autodiff API's edges: repeated inputs, custom gradients'
contracts, forward accumulators, Jacobian sizes and empty Jacobians, memory budgets with ops
that cannot be recomputed, and the errors TensorFlow raises."""
import gc
import tracemalloc
import warnings
import weakref

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.autodiff import jacobian as jacobian_module


# -- recompute_grad and custom_gradient ------------------------------------------------------------

def test_recompute_grad_repeated_input_counts_once():
    f = tg.recompute_grad(lambda a, b: a * b)
    x = tg.constant(3.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = f(x, x)
    assert float(t.gradient(y, x)) == 6.0  # d(x*x)/dx = 2x, as TensorFlow


def test_recompute_grad_repeated_variable_and_tensor_mix():
    v = tg.Variable(2.0)
    f = tg.recompute_grad(lambda a, b, c: a * b * c * v)
    x = tg.constant(3.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = f(x, x, x)
    gx, gv = t.gradient(y, [x, v])
    assert float(gx) == pytest.approx(3 * 9.0 * 2.0) and float(gv) == pytest.approx(27.0)


def test_recompute_grad_tuple_outputs():
    f = tg.recompute_grad(lambda a: (tg.sin(a), [a * a, tg.cast(a, tg.int32)]))
    x = tg.constant([0.5, 1.0])
    with tg.GradientTape() as t:
        t.watch(x)
        s, (sq, i) = f(x)
        y = tg.reduce_sum(s) + tg.reduce_sum(sq)
    assert i.dtype == tg.int32
    np.testing.assert_allclose(t.gradient(y, x).numpy(), np.cos([0.5, 1.0]) + [1.0, 2.0],
                               rtol=1e-6)


def test_recompute_grad_forward_mode():
    v = tg.Variable([1.0, 2.0])
    f = tg.recompute_grad(lambda a: (tg.sin(a) * v, a * a))
    x = tg.constant([0.5, 1.0])
    with tg.autodiff.ForwardAccumulator(x, tg.constant([1.0, 1.0])) as acc:
        s, sq = f(x)
    np.testing.assert_allclose(acc.jvp(s).numpy(), np.cos([0.5, 1.0]) * [1.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(acc.jvp(sq).numpy(), [1.0, 2.0])
    with tg.GradientTape() as t:
        t.watch(x)
        s, _ = f(x)
    jac = t.jacobian(s, x, mode="forward")
    np.testing.assert_allclose(jac.numpy(), np.diag(np.cos([0.5, 1.0]) * [1.0, 2.0]), rtol=1e-6)


def test_custom_gradient_float_output_uses_the_rule():
    @tg.custom_gradient
    def f(x):
        return 3.0, lambda dy: dy * 10.0
    x = tg.constant(3.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = f(x)
    assert isinstance(y, tg.Tensor)
    assert float(t.gradient(y, x)) == 10.0


def test_custom_gradient_variable_returned_unchanged_uses_the_rule():
    v = tg.Variable(2.0)

    @tg.custom_gradient
    def f(x):
        return x, lambda dy: dy * 10.0
    with tg.GradientTape() as t:
        y = f(v)
    assert float(t.gradient(y, v)) == 10.0


@pytest.mark.parametrize("bad", [lambda dy: tg.ones((3, 3)), lambda dy: tg.ones((1,))])
def test_custom_gradient_checks_gradient_shapes(bad):
    @tg.custom_gradient
    def shaped(x):
        return x * 1.0, bad
    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as t:
        t.watch(x)
        y = shaped(x)
    with pytest.raises(ValueError, match=r"custom_gradient shaped: .*shape \(3,\)"):
        t.gradient(y, x)


def test_custom_gradient_checks_gradient_dtypes():
    @tg.custom_gradient
    def typed(x):
        return x * 1.0, lambda dy: tg.constant(np.ones(3))  # float64
    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as t:
        t.watch(x)
        y = typed(x)
    with pytest.raises(TypeError, match="custom_gradient typed: .*float64.*float32"):
        t.gradient(y, x)


def test_custom_gradient_integer_output_gets_an_upstream():
    seen = []

    @tg.custom_gradient
    def f(x):
        def grad_fn(dy, di):
            seen.append(di)
            return dy * 2.0
        return (x * 2.0, tg.constant(1)), grad_fn
    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as t:
        t.watch(x)
        y, _ = f(x)
    np.testing.assert_allclose(t.gradient(y, x).numpy(), [2.0, 2.0, 2.0])
    assert len(seen) == 1 and seen[0].dtype == tg.int32


def test_custom_gradient_method_self_is_not_an_input():
    class Layer:
        scale = 3.0

        @tg.custom_gradient
        def __call__(self, x):
            return x * self.scale, lambda dy: dy * self.scale
    x = tg.constant(2.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = Layer()(x)
    assert float(t.gradient(y, x)) == 3.0


def test_custom_gradient_empty_tuple_argument_is_not_an_input():
    @tg.custom_gradient
    def f(x, extra):
        return x * 2.0, lambda dy: dy * 2.0  # one gradient: () has no leaves
    x = tg.constant(2.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = f(x, ())
    assert float(t.gradient(y, x)) == 2.0


def test_grad_pass_through():
    x = tg.Variable(1.0)
    z = tg.Variable(3.0)
    with tg.GradientTape() as t:
        y = tg.grad_pass_through(x.assign)(z ** 2)
    assert float(t.gradient(y, z)) == 6.0
    a = tg.constant([0.3, 1.7])
    with tg.GradientTape() as t:
        t.watch(a)
        r = tg.grad_pass_through(tg.round)(a)
    np.testing.assert_allclose(r.numpy(), [0.0, 2.0])
    np.testing.assert_allclose(t.gradient(r, a).numpy(), [1.0, 1.0])


# -- ForwardAccumulator --------------------------------------------------------------------------

def test_forward_accumulator_none_tangent_raises():
    x = tg.constant(1.0)
    with pytest.raises(ValueError, match="ForwardAccumulator: the tangent .* is None"):
        tg.autodiff.ForwardAccumulator(x, None)
    with pytest.raises(ValueError, match="is None"):
        tg.autodiff.ForwardAccumulator([x, tg.constant(2.0)], [tg.constant(1.0), None])


def test_dropped_forward_accumulator_frees_its_tangents_without_gc():
    x = tg.constant(np.ones(10, np.float32))
    gc.disable()
    try:
        refs = []
        for _ in range(3):
            tangent = tg.constant(np.ones(10, np.float32))
            with tg.autodiff.ForwardAccumulator(x, tangent) as acc:
                y = tg.sin(x)
            refs += [weakref.ref(tangent), weakref.ref(acc.jvp(y))]
            del tangent, acc, y
        assert all(r() is None for r in refs)  # freed by reference counting alone
    finally:
        gc.enable()


def test_forward_accumulator_forgets_a_freed_primal():
    acc = tg.autodiff.ForwardAccumulator(tg.constant([1.0]), tg.constant([1.0]))
    with acc:
        y = tg.constant([2.0]) * 1.0  # not a primal: no tangent
    assert len(acc._tangents) == 0 and acc.jvp(y) is None
    x = tg.constant([1.0])
    with tg.autodiff.ForwardAccumulator(x, tg.constant([1.0])) as acc:
        y = x * 3.0
    assert len(acc._tangents) == 2
    del y
    assert len(acc._tangents) == 1


# -- Jacobian sizes and empty Jacobians -----------------------------------------------------------

@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setattr(jacobian_module, "MEMORY_BUDGET", 2**20)


def _peak(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_jacobian_chunks_are_sized_from_a_broadcast_target(small_budget, mode):
    x = tg.constant(np.ones(5, np.float32))
    with tg.GradientTape() as t:
        t.watch(x)
        y = x + tg.zeros((2000, 5))  # a (2000, 5) target from a (5,) source: J is 200 KB
    jac, peak = _peak(lambda: t.jacobian(y, x, mode=mode))
    assert jac.shape == (2000, 5, 5)
    np.testing.assert_array_equal(jac.numpy()[7], np.eye(5))
    assert peak < 4 * 2**20  # chunks sized from the inputs alone asked for hundreds of MiB


def test_batch_jacobian_chunks_are_sized_from_a_broadcast_target(small_budget):
    x = tg.constant(np.ones((2, 5), np.float32))
    with tg.GradientTape() as t:
        t.watch(x)
        y = tg.reshape(x, (2, 1, 5)) + tg.zeros((2, 2000, 5))
    jac, peak = _peak(lambda: t.batch_jacobian(y, x, mode="reverse"))
    assert jac.shape == (2, 2000, 5, 5)
    assert peak < 4 * 2**20


def test_jacobian_too_large_for_the_budget_raises_up_front(small_budget):
    x = tg.constant(np.ones(1000, np.float32))
    with tg.GradientTape(persistent=True) as t:
        t.watch(x)
        y = tg.sin(x)
    for call in (lambda: t.jacobian(y, x), lambda: t.jacobian(y, x, mode="forward")):
        with pytest.raises(MemoryError, match="parallel_iterations.*experimental_use_pfor=False"
                                              ".*smaller target|smaller target"):
            call()
    assert t.jacobian(y, x, parallel_iterations=250).shape == (1000, 1000)  # chosen chunks
    xb = tg.constant(np.ones((4, 300), np.float32))
    with tg.GradientTape() as t:
        t.watch(xb)
        yb = tg.sin(xb)
    with pytest.raises(MemoryError, match="GradientTape.batch_jacobian"):
        t.batch_jacobian(yb, xb)


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_jacobian_chunks_are_written_into_one_result(mode):
    x = tg.constant(np.linspace(0, 1, 1000).astype(np.float32))
    with tg.GradientTape(persistent=True) as t:
        t.watch(x)
        y = tg.sin(x)
    jac, peak = _peak(lambda: t.jacobian(y, x, parallel_iterations=100, mode=mode))
    np.testing.assert_allclose(np.diag(jac.numpy()), np.cos(np.linspace(0, 1, 1000)), rtol=1e-6)
    assert peak < 1.5 * jac.numpy().nbytes  # all chunks plus their concatenation was 2x


def test_jacobian_under_an_outer_tape_stays_differentiable():
    x = tg.constant([0.5, 1.0, 1.5])
    with tg.GradientTape() as outer:
        outer.watch(x)
        with tg.GradientTape(persistent=True) as inner:
            inner.watch(x)
            y = tg.sin(x)
        jac = inner.jacobian(y, x, parallel_iterations=1)
        s = tg.reduce_sum(jac)
    np.testing.assert_allclose(outer.gradient(s, x).numpy(), -np.sin([0.5, 1.0, 1.5]),
                               rtol=1e-6)


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_connected_empty_jacobian_is_an_empty_tensor(mode):
    x = tg.constant(np.ones((0,), np.float32))
    with tg.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * 2.0
        z = tg.zeros((0, 3))
    jac = t.jacobian(y, x, mode=mode)
    assert isinstance(jac, tg.Tensor) and jac.shape == (0, 0)
    assert t.jacobian(z, x, mode=mode) is None  # not connected
    xb = tg.constant(np.ones((2, 3), np.float32))
    with tg.GradientTape(persistent=True) as t:
        t.watch(xb)
        yb = tg.reshape(xb, (2, 3, 1))[:, :, :0]  # (2, 3, 0)
    bj = t.batch_jacobian(yb, xb, mode=mode)
    assert isinstance(bj, tg.Tensor) and bj.shape == (2, 3, 0, 3)


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_unconnected_batch_jacobian_zero_has_the_target_dtype(mode):
    x = tg.constant(np.ones((2, 3), np.float32))
    with tg.GradientTape(persistent=True) as t:
        t.watch(x)
        y = tg.zeros((2, 4), dtype=tg.float64) + tg.cast(tg.stop_gradient(x[:, :1]), tg.float64)
    bj = t.batch_jacobian(y, x, unconnected_gradients="zero", mode=mode)
    assert bj.shape == (2, 4, 3) and bj.dtype == tg.float64
    assert not np.any(bj.numpy())


# -- memory budget with ops that cannot be recomputed -------------------------------------------

@tg.custom_gradient
def _double(x):
    return x * 2.0, lambda dy: dy * 2.0


_sin_in_numpy = tg.recompute_grad(lambda a: tg.sin(a))


def _np_sin(y):
    return tg.numpy_function(np.sin, [y], tg.float32, grad=lambda a, dy: dy * tg.cos(a))


@pytest.mark.parametrize("fn", [_double, _sin_in_numpy, _np_sin],
                         ids=["custom_gradient", "recompute_grad", "numpy_function"])
def test_memory_budget_keeps_entries_it_cannot_recompute(fn):
    x = tg.constant(np.linspace(0, 1, 100).astype(np.float32))
    grads = []
    for budget in (None, 1000):
        with tg.GradientTape(memory_budget=budget) as t:
            t.watch(x)
            y = x
            for _ in range(5):
                y = tg.sin(fn(tg.exp(y * 0.1)))
            loss = tg.reduce_sum(y)
        grads.append(t.gradient(loss, x).numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    assert t.stats()["segments"] >= 1


# -- errors as TensorFlow's ---------------------------------------------------------------------

@pytest.mark.parametrize("target", [None, 3.0, "list_with_none"])
def test_non_tensor_targets_raise_type_error(target):
    x = tg.constant(1.0)
    with tg.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * 2.0
    if target == "list_with_none":
        target = [y, None]
    with pytest.raises(TypeError, match="GradientTape.gradient: the target is a"):
        t.gradient(target, x)
    with pytest.raises(TypeError, match="GradientTape.jacobian: the target is a"):
        t.jacobian(target, x)


def test_numpy_target_raises_type_error():
    x = tg.constant([1.0, 2.0])
    with tg.GradientTape(persistent=True) as t:
        t.watch(x)
        y = (x * 2.0).numpy()
    with pytest.raises(TypeError, match=r"jacobian: the target is a ndarray \(.numpy\(\)"):
        t.jacobian(y, x)
    with pytest.raises(TypeError, match="gradient: the target is a ndarray"):
        t.gradient(y, x)
    with pytest.raises(TypeError, match="batch_jacobian: the target is a ndarray"):
        t.batch_jacobian(y, x)


def test_non_persistent_message_is_tensorflows():
    x = tg.constant(1.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = x * x
    t.gradient(y, x)
    with pytest.raises(RuntimeError, match="^A non-persistent GradientTape can only be used to "
                                           "compute one set of gradients"):
        t.gradient(y, x)


def test_watch_ndarray_raises_value_error():
    with tg.GradientTape() as t:
        with pytest.raises(ValueError, match="GradientTape.watch: expected a tg.Tensor"):
            t.watch(np.ones(3))


def test_retry_after_a_failing_grad_fn_names_the_failure():
    @tg.custom_gradient
    def broken(a):
        def grad_fn(dy):
            raise ZeroDivisionError("bad rule")
        return a * 1.0, grad_fn
    x = tg.constant(1.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = tg.sin(broken(x))
    with pytest.raises(ZeroDivisionError):
        t.gradient(y, x)
    with pytest.raises(RuntimeError, match="earlier call .* raised ZeroDivisionError: bad rule") \
            as err:
        t.gradient(y, x)
    assert "one set of gradients" not in str(err.value)


def test_batch_jacobian_checks_ranks_and_batch_size():
    x = tg.constant([1.0, 2.0])
    x2 = tg.constant(np.ones((2, 3), np.float32))
    with tg.GradientTape(persistent=True) as t:
        t.watch([x, x2])
        y = x * 2.0
        y2 = tg.concat([x2, x2], 0)  # (4, 3)
    with pytest.raises(ValueError, match="rank 2 or higher"):
        t.batch_jacobian(y, x)
    with pytest.raises(ValueError, match="share their first"):
        t.batch_jacobian(y2, x2)


@pytest.mark.parametrize("method", ["jacobian", "batch_jacobian"])
def test_non_persistent_loop_fallback_raises_as_tensorflow(method):
    x = tg.constant(np.ones((2, 2), np.float32))
    with tg.GradientTape() as t:
        t.watch(x)
        y = x * 2.0
    with pytest.raises(RuntimeError, match="GradientTape must be created with persistent=True"):
        getattr(t, method)(y, x, experimental_use_pfor=False)
    with tg.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * 2.0
    assert getattr(t, method)(y, x, experimental_use_pfor=False) is not None


@pytest.mark.parametrize("method", ["jacobian", "batch_jacobian"])
def test_non_persistent_parallel_iterations_below_the_rows_raises_as_tensorflow(method):
    x = tg.constant(np.ones((2, 3), np.float32))
    for persistent, k in [(False, 2), (True, 2), (False, 6)]:
        with tg.GradientTape(persistent=persistent) as t:
            t.watch(x)
            y = x * 2.0
        if not persistent and k < 3:  # TensorFlow's pfor calls gradient more than once
            with pytest.raises(RuntimeError, match="^A non-persistent GradientTape can only be "
                                                   "used to compute one set of gradients"):
                getattr(t, method)(y, x, parallel_iterations=k)
        else:
            assert getattr(t, method)(y, x, parallel_iterations=k) is not None


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_parallel_iterations_must_be_a_positive_integer(bad):
    x = tg.constant(np.ones((2, 2), np.float32))
    with tg.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * 2.0
    with pytest.raises(ValueError, match="parallel_iterations must be None or a positive"):
        t.jacobian(y, x, parallel_iterations=bad)
    with pytest.raises(ValueError, match="parallel_iterations must be None or a positive"):
        t.batch_jacobian(y, x, parallel_iterations=bad)


def test_watched_variables_in_construction_order():
    a = tg.Variable(1.0, name="a")
    b = tg.Variable(1.0, name="b")
    c = tg.Variable(1.0, name="c")
    with tg.GradientTape() as t:
        t.watch(c)
        y = b * a
    assert [v.name for v in t.watched_variables()] == ["a", "b", "c"]


def test_integer_source_warns_and_gives_none():
    x = tg.constant(1.0)
    i = tg.constant(2)
    with tg.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * tg.cast(i, tg.float32)
    with pytest.warns(UserWarning, match="GradientTape.gradient: .*got int32"):
        assert t.gradient(y, [x, i])[1] is None
    with pytest.warns(UserWarning, match="GradientTape.jacobian: .*got int32"):
        assert t.jacobian(y, i) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t.gradient(y, x)  # float sources: no warning


@pytest.mark.parametrize("budget", [-5, 0, "1MB", True])
def test_memory_budget_must_be_a_positive_number_of_bytes(budget):
    with pytest.raises(ValueError, match="GradientTape: memory_budget must be a positive"):
        tg.GradientTape(memory_budget=budget)


def test_compute_gradient_rejects_a_jacobian_of_the_wrong_shape(monkeypatch):
    """An empty Jacobian of the wrong shape would reshape silently to (y.size, x.size)."""
    wrong = lambda self, y, x, **kw: tg.zeros((0, 5))  # noqa: E731
    monkeypatch.setattr(tg.GradientTape, "jacobian", wrong)
    with pytest.raises(ValueError, match=r"compute_gradient: .* has shape \(0, 5\)"):
        tg.test.compute_gradient(lambda x: tg.zeros((0,)) * tg.reduce_sum(x),
                                 [tg.constant([1.0, 2.0])])


def test_where_gradients_on_0d_tensors():
    x = tg.constant(0.5, dtype=tg.float64)
    y = tg.constant(2.0, dtype=tg.float64)
    with tg.GradientTape() as t:
        t.watch([x, y])
        z = tg.where(tg.constant(True), x * x, y) + tg.where(tg.constant(False), x, y * y)
    gx, gy = t.gradient(z, [x, y])
    assert gx.shape == gy.shape == ()
    assert float(gx) == 1.0 and float(gy) == 4.0


def test_tg_nest_is_tf_nest():
    from collections import defaultdict
    d = defaultdict(list, {"a": tg.constant(1.0)})
    out = tg.nest.pack_sequence_as(d, tg.nest.flatten(d))
    assert isinstance(out, defaultdict) and out.default_factory is list
