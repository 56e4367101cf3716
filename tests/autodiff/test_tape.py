"""GradientTape semantics, ported from TensorFlow's "Introduction to gradients" and "Advanced
automatic differentiation" guides with their documented outputs, plus common questions."""
import numpy as np
import pytest

import tapegpu as tg


def dense(x, w, b, act=None):
    y = tg.matmul(x, w) + b
    return act(y) if act else y


# -- the basics -----------------------------------------------------------------------------------

def test_scalar_variable():
    x = tg.Variable(3.0)
    with tg.GradientTape() as tape:
        y = x ** 2
    assert tape.gradient(y, x).numpy() == 6.0


def test_gradient_structure_follows_sources():
    w = tg.Variable(tg.random.normal((3, 2)), name="w")
    b = tg.Variable(tg.zeros(2, dtype=tg.float32), name="b")
    x = [[1.0, 2.0, 3.0]]
    with tg.GradientTape(persistent=True) as tape:
        y = x @ w + b
        loss = tg.reduce_mean(y ** 2)
    [dl_dw, dl_db] = tape.gradient(loss, [w, b])
    assert dl_dw.shape == w.shape and dl_db.shape == b.shape
    d = tape.gradient(loss, {"w": w, "b": b})
    assert set(d) == {"w", "b"}
    np.testing.assert_allclose(d["w"].numpy(), dl_dw.numpy())
    t = tape.gradient(loss, (w, (b,)))
    assert isinstance(t, tuple) and isinstance(t[1], tuple)


def test_what_the_tape_watches():
    x0 = tg.Variable(3.0, name="x0")
    x1 = tg.Variable(3.0, name="x1", trainable=False)
    x2 = tg.Variable(2.0, name="x2") + 1.0  # a tensor, not a variable
    x3 = tg.constant(3.0)
    with tg.GradientTape() as tape:
        y = (x0 ** 2) + (x1 ** 2) + (x2 ** 2)
    grad = tape.gradient(y, [x0, x1, x2, x3])
    assert float(grad[0]) == 6.0
    assert grad[1:] == [None, None, None]
    assert [v.name for v in tape.watched_variables()] == ["x0"]


def test_watch_accessed_variables_false():
    x0 = tg.Variable(0.0)
    x1 = tg.Variable(10.0)
    with tg.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(x1)
        y = tg.math.sin(x0) + tg.nn.softplus(x1)
        ys = tg.reduce_sum(y)
    grad = tape.gradient(ys, {"x0": x0, "x1": x1})
    assert grad["x0"] is None
    assert float(grad["x1"]) == pytest.approx(0.9999546, abs=1e-7)


def test_gradient_of_intermediate():
    x = tg.constant(3.0)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    assert float(tape.gradient(z, y)) == 18.0


def test_gradient_with_respect_to_intermediate_and_input_together():
    x = tg.constant(3.0)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    dz_dy, dz_dx = tape.gradient(z, [y, x])
    assert (float(dz_dy), float(dz_dx)) == (18.0, 108.0)


def test_persistent_tape():
    x = tg.constant([1, 3.0])
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    np.testing.assert_array_equal(tape.gradient(z, x).numpy(), [4.0, 108.0])
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [2.0, 6.0])


def test_non_persistent_second_call_raises():
    x = tg.constant(2.0)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    tape.gradient(y, x)
    with pytest.raises(RuntimeError, match="non-persistent"):
        tape.gradient(y, x)
    with pytest.raises(RuntimeError, match="non-persistent"):
        tape.watch(x)
    with pytest.raises(RuntimeError, match="non-persistent"):
        with tape:
            pass


def test_non_scalar_targets_are_summed():
    x = tg.Variable(2.0)
    with tg.GradientTape(persistent=True) as tape:
        y0 = x ** 2
        y1 = 1 / x
    assert float(tape.gradient({"y0": y0, "y1": y1}, x)) == 3.75
    with tg.GradientTape() as tape:
        y = x * [3.0, 4.0]
    assert float(tape.gradient(y, x)) == 7.0


def test_vjp_with_output_gradients():
    x = tg.Variable([1.0, 2.0, 3.0])
    with tg.GradientTape() as tape:
        y = x * x
    g = tape.gradient(y, x, output_gradients=tg.constant([1.0, 0.0, 10.0]))
    np.testing.assert_array_equal(g.numpy(), [2.0, 0.0, 60.0])


def test_control_flow():
    x = tg.constant(1.0)
    v0 = tg.Variable(2.0)
    v1 = tg.Variable(2.0)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        result = v0 if x > 0.0 else v1 ** 2
    dv0, dv1 = tape.gradient(result, [v0, v1])
    assert float(dv0) == 1.0 and dv1 is None
    assert tape.gradient(result, x) is None


def test_cases_that_return_none():
    x = tg.Variable(2.0)
    y = tg.Variable(3.0)
    with tg.GradientTape() as tape:
        z = y * y
    assert tape.gradient(z, x) is None
    # a variable replaced by a tensor is no longer watched
    x = tg.Variable(2.0)
    seen = []
    for _ in range(2):
        with tg.GradientTape() as tape:
            y = x + 1
        seen.append(tape.gradient(y, x))
        x = x + 1
    assert float(seen[0]) == 1.0 and seen[1] is None
    # calculations outside tapegpu
    x = tg.Variable([[1.0, 2.0], [3.0, 4.0]], dtype=tg.float32)
    with tg.GradientTape() as tape:
        x2 = x ** 2
        y = np.mean(x2, axis=0)
        y = tg.reduce_mean(y, axis=0)
    assert tape.gradient(y, x) is None
    # integer sources
    x = tg.constant(10)
    with tg.GradientTape() as g:
        g.watch(x)
        y = x * x
    with pytest.warns(UserWarning, match="got int32"):  # TensorFlow logs a warning
        assert g.gradient(y, x) is None
    # stateful ops stop the gradient
    x0 = tg.Variable(3.0)
    x1 = tg.Variable(0.0)
    with tg.GradientTape() as tape:
        x1.assign_add(x0)
        y = x1 ** 2
    assert tape.gradient(y, x0) is None


def test_unconnected_gradients_zero():
    x = tg.Variable([2.0, 2.0])
    y = tg.Variable(3.0)
    with tg.GradientTape(persistent=True) as tape:
        z = y ** 2
    np.testing.assert_array_equal(
        tape.gradient(z, x, unconnected_gradients=tg.UnconnectedGradients.ZERO).numpy(), [0, 0])
    assert tape.gradient(z, x, unconnected_gradients="zero").dtype == tg.float32
    assert tape.gradient(z, x, unconnected_gradients="none") is None
    with pytest.raises(ValueError, match="unconnected_gradients"):
        tape.gradient(z, x, unconnected_gradients="maybe")


# -- advanced guide ------------------------------------------------------------------------------

def test_stop_recording():
    x = tg.Variable(2.0)
    y = tg.Variable(3.0)
    with tg.GradientTape() as t:
        x_sq = x * x
        with t.stop_recording():
            y_sq = y * y
        z = x_sq + y_sq
    grad = t.gradient(z, {"x": x, "y": y})
    assert float(grad["x"]) == 4.0 and grad["y"] is None


def test_reset():
    x = tg.Variable(2.0)
    y = tg.Variable(3.0)
    with tg.GradientTape() as t:
        y_sq = y * y
        t.reset()
        z = x * x + y_sq
    grad = t.gradient(z, {"x": x, "y": y})
    assert float(grad["x"]) == 4.0 and grad["y"] is None


def test_stop_gradient():
    x = tg.Variable(2.0)
    y = tg.Variable(3.0)
    with tg.GradientTape() as t:
        z = x ** 2 + tg.stop_gradient(y ** 2)
    grad = t.gradient(z, {"x": x, "y": y})
    assert float(grad["x"]) == 4.0 and grad["y"] is None


def test_custom_gradient_clips():
    @tg.custom_gradient
    def clip_gradients(y):
        def backward(dy):
            return tg.clip_by_norm(dy, 0.5)
        return y, backward

    v = tg.Variable(2.0)
    with tg.GradientTape() as t:
        output = clip_gradients(v * v)
    assert float(t.gradient(output, v)) == 2.0


@pytest.mark.filterwarnings("ignore:overflow encountered in exp")  # e^100 is inf in float32
def test_custom_gradient_numerically_stable_and_second_order():
    @tg.custom_gradient
    def log1pexp(x):
        e = tg.exp(x)

        def grad(upstream):
            return upstream * (1 - 1 / (1 + e))
        return tg.math.log(1 + e), grad

    x = tg.constant(100.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = log1pexp(x)
    assert float(t.gradient(y, x)) == 1.0
    x = tg.constant(0.0)
    with tg.GradientTape() as t2:
        t2.watch(x)
        with tg.GradientTape() as t1:
            t1.watch(x)
            y = log1pexp(x)
        dy = t1.gradient(y, x)
    assert float(dy) == 0.5
    assert float(t2.gradient(dy, x)) == pytest.approx(0.25)


def test_custom_gradient_with_variables():
    v = tg.Variable(2.0)

    @tg.custom_gradient
    def scale(x):
        y = x * v

        def grad_fn(dy, variables):
            assert len(variables) == 1 and variables[0] is v
            return dy * v, [dy * x * 10.0]  # a deliberately scaled variable gradient
        return y, grad_fn

    x = tg.constant(3.0)
    with tg.GradientTape() as t:
        t.watch(x)
        out = scale(x)
    gx, gv = t.gradient(out, [x, v])
    assert (float(gx), float(gv)) == (2.0, 30.0)


def test_custom_gradient_reading_variables_needs_variables_kwarg():
    v = tg.Variable(2.0)

    @tg.custom_gradient
    def f(x):
        return x * v, lambda dy: dy * v

    with tg.GradientTape():
        with pytest.raises(TypeError, match="variables"):
            f(tg.constant(1.0))


def test_custom_gradient_under_a_jacobian_runs_per_row():
    @tg.custom_gradient
    def double(x):
        return x * 2.0, lambda dy: tg.reduce_sum(dy) * tg.ones_like(x) * 0.0 + dy * 2.0

    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as t:
        t.watch(x)
        y = double(x) * x
    np.testing.assert_allclose(t.jacobian(y, x).numpy(), np.diag([4.0, 8.0, 12.0]))


def test_multiple_tapes():
    x0 = tg.constant(0.0)
    x1 = tg.constant(0.0)
    with tg.GradientTape() as tape0, tg.GradientTape() as tape1:
        tape0.watch(x0)
        tape1.watch(x1)
        y = tg.math.sin(x0) + tg.nn.sigmoid(x1)
        ys = tg.reduce_sum(y)
    assert float(tape0.gradient(ys, x0)) == 1.0
    assert float(tape1.gradient(ys, x1)) == 0.25


def test_higher_order():
    x = tg.Variable(1.0)
    with tg.GradientTape() as t2:
        with tg.GradientTape() as t1:
            y = x * x * x
        dy_dx = t1.gradient(y, x)
    d2y_dx2 = t2.gradient(dy_dx, x)
    assert (float(dy_dx), float(d2y_dx2)) == (3.0, 6.0)


def test_third_order_with_persistent_tapes():
    x = tg.constant(0.7, dtype=tg.float64)
    with tg.GradientTape() as t3:
        t3.watch(x)
        with tg.GradientTape() as t2:
            t2.watch(x)
            with tg.GradientTape() as t1:
                t1.watch(x)
                y = tg.sin(x) * x
            d1 = t1.gradient(y, x)
        d2 = t2.gradient(d1, x)
    d3 = t3.gradient(d2, x)
    xv = 0.7
    assert float(d1) == pytest.approx(np.cos(xv) * xv + np.sin(xv))
    assert float(d2) == pytest.approx(-np.sin(xv) * xv + 2 * np.cos(xv))
    assert float(d3) == pytest.approx(-np.cos(xv) * xv - 3 * np.sin(xv))


def test_input_gradient_regularisation_pattern():
    x = tg.random.normal((7, 5), seed=1)
    w = tg.Variable(tg.random.normal((5, 10), seed=2) * 0.3)
    b = tg.Variable(tg.zeros(10))
    with tg.GradientTape() as t2:
        with tg.GradientTape() as t1:
            t1.watch(x)
            y = dense(x, w, b, tg.nn.sigmoid)
        dy_dx = t1.gradient(y, x)
        loss = tg.norm(dy_dx)
    dw, db = t2.gradient(loss, [w, b])
    assert dw.shape == (5, 10) and db.shape == (10,)
    # finite differences on one weight entry
    eps = 1e-3

    def loss_at(wv):
        with tg.GradientTape() as t:
            t.watch(x)
            y = dense(x, tg.constant(wv), b, tg.nn.sigmoid)
        return float(tg.norm(t.gradient(y, x)))
    wv = w.numpy().astype(np.float64)
    e = np.zeros_like(wv)
    e[1, 2] = eps
    fd = (loss_at((wv + e).astype(np.float32)) - loss_at((wv - e).astype(np.float32))) / (2 * eps)
    assert float(dw[1, 2]) == pytest.approx(fd, rel=2e-2, abs=1e-3)


# -- Jacobians -----------------------------------------------------------------------------------

def test_jacobian_scalar_source():
    x = tg.linspace(-10.0, 10.0, 200 + 1)
    delta = tg.Variable(0.0)
    with tg.GradientTape() as tape:
        y = tg.nn.sigmoid(x + delta)
    dy_dx = tape.jacobian(y, delta)
    assert dy_dx.shape == (201,)
    s = 1 / (1 + np.exp(-x.numpy()))
    np.testing.assert_allclose(dy_dx.numpy(), s * (1 - s), rtol=1e-5, atol=1e-7)


def test_jacobian_of_layer_kernel_sums_to_gradient():
    x = tg.random.normal((7, 5), seed=3)
    w = tg.Variable(tg.random.normal((5, 10), seed=4))
    b = tg.Variable(tg.zeros(10))
    with tg.GradientTape(persistent=True) as tape:
        y = dense(x, w, b, tg.nn.relu)
    j = tape.jacobian(y, w)
    assert j.shape == (7, 10, 5, 10)
    g = tape.gradient(y, w)
    j_sum = tg.reduce_sum(j, axis=[0, 1])
    assert float(tg.reduce_max(tg.abs(g - j_sum))) < 1e-3


def test_jacobian_equals_loop_and_batch_jacobian_is_its_diagonal():
    # float32: the batched and the looped sweeps sum in different orders (a few ulp of the
    # largest terms)
    x = tg.random.normal((7, 5), seed=5)
    w1 = tg.Variable(tg.random.normal((5, 8), seed=6))
    w2 = tg.Variable(tg.random.normal((8, 6), seed=7))
    with tg.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
        tape.watch(x)
        y = tg.nn.elu(tg.matmul(tg.nn.elu(tg.matmul(x, w1)), w2))
    j = tape.jacobian(y, x)
    assert j.shape == (7, 6, 7, 5)
    loop = tape.jacobian(y, x, experimental_use_pfor=False)
    np.testing.assert_allclose(j.numpy(), loop.numpy(), rtol=1e-5, atol=1e-6)
    jb = tape.batch_jacobian(y, x)
    assert jb.shape == (7, 6, 5)
    np.testing.assert_allclose(tg.reduce_sum(j, axis=2).numpy(), jb.numpy(), rtol=1e-5,
                               atol=1e-6)
    jb_loop = tape.batch_jacobian(y, x, experimental_use_pfor=False)
    np.testing.assert_allclose(jb.numpy(), jb_loop.numpy(), rtol=1e-5, atol=1e-6)
    assert tape.jacobian(y, w1) is None  # not watched
    np.testing.assert_array_equal(
        tape.jacobian(y, w1, unconnected_gradients="zero").numpy(), np.zeros((7, 6, 5, 8)))


def test_jacobian_chunks_match_unchunked():
    x = tg.random.normal((4, 3), seed=8, dtype=tg.float64)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tg.tanh(tg.matmul(x, x, transpose_b=True))
    full = tape.jacobian(y, x)
    for k in (1, 3, 5, 16):
        np.testing.assert_array_equal(tape.jacobian(y, x, parallel_iterations=k).numpy(),
                                      full.numpy())


def test_hessian_by_nested_jacobian():
    x = tg.constant([0.3, -0.4, 0.9], dtype=tg.float64)
    a = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 3.0]])
    with tg.GradientTape() as t2:
        t2.watch(x)
        with tg.GradientTape() as t1:
            t1.watch(x)
            y = 0.5 * tg.reduce_sum(x * tg.linalg.matmul(tg.constant(a), tg.reshape(x, (3, 1)))
                                    [:, 0]) + tg.reduce_sum(tg.sin(x))
        g = t1.gradient(y, x)
    h = t2.jacobian(g, x)
    np.testing.assert_allclose(h.numpy(), a - np.diag(np.sin(x.numpy())), rtol=1e-12)


def test_jacobian_nested_structure_of_sources():
    x = tg.constant([1.0, 2.0])
    v = tg.Variable(3.0)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = x * v
    j = tape.jacobian(y, {"x": x, "v": v})
    np.testing.assert_array_equal(j["x"].numpy(), np.eye(2) * 3)
    np.testing.assert_array_equal(j["v"].numpy(), [1.0, 2.0])


# -- variables and immutability -----------------------------------------------------------------

def test_assign_does_not_change_saved_values():
    v = tg.Variable([1.0, 2.0])
    with tg.GradientTape() as tape:
        y = v * v
    v.assign([10.0, 20.0])
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), [2.0, 4.0])
    v2 = tg.Variable([1.0, 2.0])
    with tg.GradientTape() as tape:
        y = v2 * v2
    v2.assign_add([1.0, 1.0])
    v2.assign_sub([5.0, 5.0])
    np.testing.assert_array_equal(tape.gradient(y, v2).numpy(), [2.0, 4.0])


def test_gradient_flows_across_assignment():
    v = tg.Variable(2.0)
    with tg.GradientTape() as tape:
        a = v * v
        v.assign(3.0)
        b = v * v
        total = a + b
    assert float(tape.gradient(total, v)) == 10.0  # 2*2 + 2*3


def test_user_arrays_are_not_aliased():
    a = np.array([1.0, 2.0], dtype=np.float32)
    t = tg.constant(a)
    v = tg.Variable(a)
    a[0] = 99.0
    assert t.numpy()[0] == 1.0 and v.numpy()[0] == 1.0
    view = np.asarray(t)
    with pytest.raises(ValueError):
        view[0] = 5.0
    out = t.numpy()
    out[0] = 7.0
    assert t.numpy()[0] == 1.0


def test_python_scalars_adopt_dtype():
    x = tg.constant([1.0, 2.0])
    assert (x * 2.5).dtype == tg.float32
    assert (2 * x + 1).dtype == tg.float32
    x64 = tg.constant(np.array([1.0]))
    assert (x64 * 3.0).dtype == tg.float64
    i = tg.constant([1, 2])
    assert (i + 1).dtype == tg.int32
    with pytest.raises(TypeError, match="int32"):
        i + 1.5


def test_python_scalars_keep_the_sign_of_zero_and_bool_checks():
    # scalars are cached per dtype and device; -0.0 == 0.0 as a key but not as a summand
    z = tg.constant([-0.0])
    assert np.signbit((z + 0.0).numpy()[0]) == np.signbit(np.float32(-0.0) + np.float32(0.0))
    assert np.signbit((z + -0.0).numpy()[0])
    assert np.signbit((z + -0.0).numpy()[0])  # a second time, after 0.0 is cached
    b = tg.constant([True])
    assert tg.logical_and(b, True).dtype == tg.bool
    with pytest.raises(TypeError, match="bool"):
        tg.logical_and(b, 1)  # True == 1 as a key: a cached True must not let 1 through


def test_no_recording_without_a_tape():
    from tapegpu.core.tensor import _thread
    assert not _thread.recorders
    x = tg.constant(1.0)
    with tg.GradientTape() as t:
        pass
    y = tg.sin(x)
    assert t._entries == []
    assert not _thread.recorders and y.shape == ()


def _in_thread(fn):
    import threading
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 (re-raised in the caller's thread)
            out["error"] = e
    th = threading.Thread(target=run)
    th.start()
    th.join()
    if "error" in out:
        raise out["error"]
    return out.get("value")


def test_tapes_record_only_their_own_thread():
    """As in TensorFlow, a tape sees the ops of the thread that entered it: another thread's ops
    on a watched tensor (or a read of a watched variable) are not recorded."""
    x = tg.constant([1.0, 2.0])
    v = tg.Variable([3.0, 4.0])
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = _in_thread(lambda: tg.sin(x) + v * 2.0)
    assert [e.op.name for e in tape._entries] == ["multiply"]
    assert tape.gradient(z, x) is None and tape.gradient(z, v) is None
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [2.0, 4.0])
    assert tape.watched_variables() == ()


def test_a_tape_in_another_thread_is_independent():
    x = tg.constant([1.0, 2.0])

    def worker():  # its own tape, nested in its own thread, while the main thread records
        with tg.GradientTape() as outer:
            outer.watch(x)
            with tg.GradientTape() as inner:
                inner.watch(x)
                y = x * x * x
            dy = inner.gradient(y, x)
        return dy.numpy(), outer.gradient(dy, x).numpy()

    with tg.GradientTape() as main:
        main.watch(x)
        dy, d2y = _in_thread(worker)
        w = tg.exp(x)
    np.testing.assert_allclose(dy, [3.0, 12.0])
    np.testing.assert_allclose(d2y, [6.0, 12.0])
    assert [e.op.name for e in main._entries] == ["exp"]
    np.testing.assert_allclose(main.gradient(w, x).numpy(), np.exp([1.0, 2.0]), rtol=1e-6)


def test_a_tape_exited_in_another_thread_stops_recording_where_it_started():
    x = tg.constant(1.0)
    tape = tg.GradientTape()
    tape.__enter__()
    tape.watch(x)
    _in_thread(lambda: tape.__exit__(None, None, None))
    from tapegpu.core.tensor import _thread
    assert tape not in _thread.recorders
    y = tg.sin(x)  # not recorded: the tape stopped
    assert tape._entries == [] and y.shape == ()


def test_sweep_visits_only_ops_between_sources_and_target():
    from tapegpu.autodiff import sweep
    x = tg.constant(1.0)
    z = tg.constant(2.0)
    with tg.GradientTape(persistent=True) as t:
        t.watch([x, z])
        a = tg.sin(x)
        unrelated = tg.exp(z) * 3.0  # depends on a watched tensor but not on the source
        side = tg.cos(x) * 2.0  # depends on the source but not on the target
        y = a * a
    plan, _ = sweep.prune(t._entries, [x._uid], [y._uid])
    assert [e.op.name for e in plan] == ["multiply", "sin"]
    assert unrelated.shape == side.shape == ()


# -- errors ----------------------------------------------------------------------------------------

def test_errors_name_the_op_and_shapes():
    with pytest.raises(tg.InvalidArgumentError, match=r"add.*\[2, 3\].*\[4\]"):
        tg.add(tg.zeros((2, 3)), tg.zeros(4))
    with pytest.raises(tg.InvalidArgumentError, match=r"matmul: inner dimensions.*\(2, 3\)"):
        tg.matmul(tg.zeros((2, 3)), tg.zeros((2, 3)))
    with pytest.raises(tg.InvalidArgumentError, match="same dtype.*float32.*float64"):
        tg.multiply(tg.zeros(2), tg.zeros(2, dtype=tg.float64))
    with pytest.raises(tg.InvalidArgumentError, match="sin: expected a floating tensor"):
        tg.sin(tg.constant([1, 2]))
    with pytest.raises(tg.InvalidArgumentError, match="reshape: cannot reshape"):
        tg.reshape(tg.zeros(6), (4, -1))
    with pytest.raises(tg.InvalidArgumentError, match="axis 2 is out of range"):
        tg.reduce_sum(tg.zeros((2, 3)), axis=2)
    with pytest.raises(tg.InvalidArgumentError,
                       match=r"gather: indices\[0\] = 5 is not in"):  # on a GPU: at
        tg.gather(tg.zeros(3), [5]).numpy()                                 # the first read
    with pytest.raises(tg.InvalidArgumentError, match="label 7"):
        tg.nn.sparse_softmax_cross_entropy_with_logits(labels=[7], logits=tg.zeros((1, 3))).numpy()


def test_tape_usage_errors():
    x = tg.constant(1.0)
    with tg.GradientTape() as t:
        with pytest.raises(ValueError, match="watch: expected a tg.Tensor"):
            t.watch([1.0])
        y = x * 2.0
    with pytest.raises(TypeError, match="source 1 is a float"):
        t.gradient(y, [x, 2.0])
    with tg.GradientTape() as t:
        t.watch(x)
        y = x * tg.constant([1.0, 2.0])
    with pytest.raises(ValueError, match=r"output_gradients of shape \(3,\)"):
        t.gradient(y, x, output_gradients=tg.zeros(3))
    t = tg.GradientTape()
    with pytest.raises(ValueError, match="not recording"):
        with t.stop_recording():
            pass
    with pytest.raises(ValueError, match="batch"):
        with tg.GradientTape() as t:
            t.watch(x)
            y = x * 2.0
        t.batch_jacobian(tg.reshape(y, (1,)), tg.zeros((3, 1)))


def test_variable_assign_checks():
    v = tg.Variable([1.0, 2.0])
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        v.assign([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="float64"):
        v.assign(np.array([1.0, 2.0]))


def test_compute_gradient_matches_tf_example():
    theoretical, numerical = tg.test.compute_gradient(lambda x: x * x, [1.0])
    np.testing.assert_allclose(theoretical[0], [[2.0]])
    np.testing.assert_allclose(numerical[0], [[2.0]], rtol=1e-4)
    theo, num = tg.test.compute_gradient(lambda a, b: tg.matmul(a, b),
                                         [np.ones((2, 3)), np.arange(12.0).reshape(3, 4)])
    assert theo[0].shape == (8, 6) and theo[1].shape == (8, 12)
    for a, b in zip(theo, num):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_check_gradients_catches_a_wrong_rule(monkeypatch):
    from tapegpu.ops.registry import REGISTRY
    op = REGISTRY["sin"]
    tg.test.check_gradients(tg.sin, [np.array([0.3, 0.8])], order=2)
    monkeypatch.setattr(op, "vjp", lambda ops, g, x: g * ops.cos(x) * 1.01)
    monkeypatch.setattr(op, "steps", {})  # the sweep's steps are built from the rule
    with pytest.raises(AssertionError, match="order 1"):
        tg.test.check_gradients(tg.sin, [np.array([0.3, 0.8])])


def test_stop_recording_keeps_the_tape_nested_inside_an_accumulator():
    x = tg.constant(0.5, dtype=tg.float64)
    with tg.GradientTape() as tape:
        tape.watch(x)
        with tg.autodiff.ForwardAccumulator(x, tg.constant(1.0, dtype=tg.float64)) as acc:
            with tape.stop_recording():
                pass
            y = tg.sin(x)
            dy = acc.jvp(y)  # recorded by the tape: reverse over forward
    assert float(tape.gradient(dy, x)) == pytest.approx(-np.sin(0.5))


def test_layer_built_by_hand_keeps_its_variables():
    dense = tg.layers.Dense(3)
    dense.build([None, 2])
    kernel = dense.kernel
    dense(tg.ones((1, 2)))
    assert dense.kernel is kernel and dense.built
