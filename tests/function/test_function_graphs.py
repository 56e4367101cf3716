"""tg.function's graphs: variables, gradients inside and outside, nesting, optimizations and
the replay's memory."""
import weakref

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.core.options import options
from tapegpu.function import fusion, graph as graph_mod
from tapegpu.ops import registry


def test_variable_assignments_replay_in_order():
    v = tg.Variable([1.0, 2.0])

    @tg.function
    def f(x):
        v.assign(x)
        v.assign_add(tg.constant([1.0, 1.0]))
        y = v * 2.0
        v.assign_sub(tg.constant([0.5, 0.5]))
        return y

    assert f(tg.constant([0.0, 1.0])).numpy().tolist() == [2.0, 4.0]
    assert v.numpy().tolist() == [0.5, 1.5]
    assert f(tg.constant([2.0, 3.0])).numpy().tolist() == [6.0, 8.0]
    assert v.numpy().tolist() == [2.5, 3.5]
    assert f.experimental_get_tracing_count() == 1


def test_variables_are_read_at_replay_time():
    v = tg.Variable(2.0)

    @tg.function
    def f(x):
        return x * v

    assert float(f(tg.constant(3.0))) == 6.0
    v.assign(5.0)
    assert float(f(tg.constant(3.0))) == 15.0


def _training(traced, steps=4, momentum=0.9):
    tg.random.set_seed(3)
    model = tg.layers.Sequential([tg.layers.Dense(8, activation="relu"), tg.layers.Dense(3)])
    x = tg.constant(np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32))
    y = tg.constant(np.array([0, 1, 2, 1, 0, 2], np.int32))
    model(x)
    opt = tg.optimizers.SGD(0.1, momentum=momentum)

    def step(x, y):
        with tg.GradientTape() as tape:
            logits = model(x)
            loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    run = tg.function(step) if traced else step
    losses = [float(run(x, y)) for _ in range(steps)]
    return losses, [v.numpy() for v in model.trainable_variables], run, opt


def test_training_step_matches_the_eager_step_bit_for_bit():
    eager_losses, eager_vars, _, _ = _training(False)
    losses, variables, run, opt = _training(True)
    assert losses == eager_losses
    for a, b in zip(variables, eager_vars):
        np.testing.assert_array_equal(a, b)
    assert run.experimental_get_tracing_count() == 1
    assert int(opt.iterations) == 4


def test_gradient_of_a_traced_function_under_an_outer_tape():
    @tg.function
    def f(x, w):
        return tg.reduce_sum(tg.sin(x) * w)

    x = tg.constant([0.5, 1.0, 2.0])
    w = tg.Variable([1.0, 2.0, 3.0])
    f(x, w)  # traced without a tape
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = f(x, w)
    gx, gw = tape.gradient(y, [x, w])
    np.testing.assert_allclose(gx.numpy(), np.cos([0.5, 1.0, 2.0]) * [1, 2, 3], rtol=1e-6)
    np.testing.assert_allclose(gw.numpy(), np.sin([0.5, 1.0, 2.0]), rtol=1e-6)
    assert f.experimental_get_tracing_count() == 1


def test_nested_traced_functions_are_inlined():
    @tg.function
    def inner(x):
        return tg.sin(x) * 2.0

    @tg.function
    def outer(x):
        return inner(x) + inner(x * 3.0)

    x = tg.constant([0.1, 0.2])
    expected = np.sin([0.1, 0.2]) * 2 + np.sin([0.3, 0.6]) * 2
    np.testing.assert_allclose(outer(x).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(outer(x * 1.0).numpy(), expected, rtol=1e-6)
    assert str(outer.get_concrete_function(x).graph).count("sin(") == 2
    assert outer.experimental_get_tracing_count() == 1


def test_custom_gradient_recompute_grad_and_stop_gradient_inside():
    @tg.custom_gradient
    def clip_grad(x):
        def grad(dy):
            return tg.clip_by_value(dy, -0.5, 0.5)
        return tg.identity(x), grad

    layer = tg.recompute_grad(lambda x: tg.sin(x) * x)

    @tg.function
    def grads(x):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = tg.reduce_sum(clip_grad(x) * 3.0 + layer(x) + tg.stop_gradient(x) * x)
        return tape.gradient(y, x)

    def expected(v):
        return 0.5 + np.sin(v) + v * np.cos(v) + v

    for v in ([0.1, 0.2], [1.0, 2.0]):
        np.testing.assert_allclose(grads(tg.constant(v)).numpy(),
                                   expected(np.array(v)), rtol=1e-5)
    assert grads.experimental_get_tracing_count() == 1


def test_cse_and_dce_on_the_printed_graph():
    @tg.function
    def f(x):
        a = tg.sin(x)
        b = tg.sin(x)  # merged with a
        unused = tg.exp(x) * 4.0  # dropped  # noqa: F841
        return a + b

    text = str(f.get_concrete_function(tg.constant([1.0])).graph)
    assert text.count("sin(") == 1 and "exp(" not in text
    assert "CSE merged 1" in text and "DCE dropped 2" in text
    np.testing.assert_allclose(f(tg.constant([1.0])).numpy(), 2 * np.sin([1.0]), rtol=1e-6)


def test_replay_frees_intermediates_after_their_last_use():
    @tg.function(jit_compile=False)  # the unfused schedule: one array per op (fused: one kernel)
    def f(x):
        for _ in range(20):
            x = tg.sin(x) * 1.01 + 0.1
        return x

    x = tg.constant(np.ones(1000, np.float32))
    f(x)
    cf = f.get_concrete_function(x)
    assert cf.peak_live_values <= 6  # x, two constants, at most three intermediates
    made = []
    live = []

    def watch(vals):
        for a in vals:
            if getattr(a, "size", None) == 1000 and \
                    all(r() is not a for r in made):
                made.append(weakref.ref(a))
        live.append(sum(1 for a in vals if a is not None))

    with options(on_step=watch):
        out = f(x * 1.0)
    assert len(made) >= 60 and max(live) <= cf.peak_live_values
    alive = [r for r in made if r() is not None]
    assert len(alive) <= 2  # the output (and the cached input) only
    assert out.shape == (1000,)


def test_replay_matches_eager_results_bit_for_bit():
    def body(x):
        for _ in range(10):
            x = tg.sin(x) * 1.01 + 0.1
        return tg.reduce_sum(x * x)

    f = tg.function(body)
    x = tg.constant(np.random.default_rng(1).standard_normal(16).astype(np.float32))
    f(x)
    assert f(x).numpy() == body(x).numpy()


def test_random_draws_are_fresh_at_every_call_as_tf():
    # TF's random ops draw again at every call of a tf.function; a draw captured as a constant
    # at trace time would give every call the first call's values (the same dropout mask)
    @tg.function
    def f(x):
        return tg.random.normal((64,)) + x, tg.random.normal((64,)), \
            tg.nn.dropout(tg.ones((64,)), 0.5)

    x = tg.zeros((64,))
    a, b, m1 = f(x)
    c, d, m2 = f(x)
    assert not np.array_equal(a.numpy(), c.numpy())
    assert not np.array_equal(m1.numpy(), m2.numpy())
    assert not np.array_equal(a.numpy(), b.numpy())  # two draws in one call are not merged
    assert "random.normal()" in str(f.get_concrete_function(x).graph)
    tg.random.set_seed(7)
    first = [t.numpy() for t in f(x)]
    tg.random.set_seed(7)
    again = [t.numpy() for t in f(x)]
    assert all(np.array_equal(p, q) for p, q in zip(first, again))
    for t in first:
        assert t.dtype == np.float32


def test_dropout_under_function_trains_with_a_fresh_mask_per_step():
    layer = tg.layers.Dropout(0.5)

    @tg.function
    def step(x):
        return layer(x, training=True)

    x = tg.ones((256,))
    masks = {tuple(step(x).numpy() != 0) for _ in range(5)}
    assert len(masks) == 5


def test_where_with_zero_replays_bit_for_bit_with_nan_inf_and_signed_zeros():
    g = tg.constant(np.array([[np.nan, -0.0, 0.0, -np.inf], [np.inf, -2.5, 3.0, -np.nan]],
                             np.float32))
    y = tg.constant(np.array([[1.0, 1.0, -1.0, 1.0], [-1.0, 0.0, 2.0, -3.0]], np.float32))

    def f(g, y):
        return tg.where(y > 0.0, g, 0.0), tg.where(y > 0.0, g, -0.0)

    traced = tg.function(f)
    traced(g, y)
    for got, want in zip(traced(g, y), f(g, y)):
        assert got.numpy().tobytes() == want.numpy().tobytes()


def test_conditions_on_constants_are_folded_not_guarded():
    @tg.function
    def f(x):
        n = tg.constant(3)
        if n * 2 > 5:  # constants only: folded at trace time, no guard
            x = x + 1.0
        return x

    assert f(tg.constant(1.0)).numpy() == 2.0
    graph = str(f.get_concrete_function(tg.constant(1.0)).graph)
    assert "guard" not in graph and "multiply" not in graph and "greater" not in graph


def test_small_values_computed_from_constants_are_folded():
    @tg.function
    def f(x):
        c = tg.sin(tg.constant([1.0, 2.0])) * 3.0  # constants only: computed at trace time
        return x * c

    x = tg.constant([1.0, 1.0])
    np.testing.assert_array_equal(f(x).numpy(), (x * (tg.sin(tg.constant([1.0, 2.0])) * 3.0))
                                  .numpy())
    graph = f.get_concrete_function(x).graph
    assert [n.op.name for n in graph.nodes] == ["multiply"]

    outside = tg.constant([1.0, 2.0])

    @tg.function
    def g(x):
        return x * tg.sin(outside)  # a captured tensor is an input of the graph, as in TF

    g(x)
    assert [n.op.name for n in g.get_concrete_function(x).graph.nodes] == ["sin", "multiply"]


def _mlp_step(seed):
    rng = np.random.default_rng(seed)
    model = tg.layers.Sequential([tg.layers.Dense(32, activation="relu"),
                                  tg.layers.Dense(32, activation="relu"), tg.layers.Dense(4)])
    model(tg.zeros((16, 8)))

    def step(x, y):
        with tg.GradientTape() as tape:
            loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(y, model(x)))
        return tape.gradient(loss, model.trainable_variables)
    batches = [(tg.constant(rng.standard_normal((16, 8)).astype(np.float32)),
                tg.constant(rng.integers(0, 4, 16).astype(np.int32))) for _ in range(3)]
    return step, batches


def test_replay_into_the_plans_buffers_is_bit_for_bit_and_never_hands_them_out(monkeypatch):
    monkeypatch.setattr(graph_mod, "POOL_BYTES", 0)  # every eligible intermediate pooled
    step, batches = _mlp_step(0)
    traced = tg.function(step)
    traced(*batches[0])  # the trace
    kept = [[g.numpy().copy() for g in traced(x, y)] for x, y in batches]
    results = [traced(x, y) for x, y in batches]
    for got, want_copy, (x, y) in zip(results, kept, batches):
        for a, b, c in zip(got, want_copy, step(x, y)):
            assert a.numpy().tobytes() == b.tobytes() == c.numpy().tobytes()  # not overwritten
    plan = traced.get_concrete_function(*batches[0])._plan
    if tg.backends.current().name == "numpy":  # the buffers are for numpy's arrays
        assert plan.slots and plan.buffer_bytes > 0
        # the ReLUs' backwards and bias gradients: generated kernels, writing into buffers
        assert any(k == graph_mod.FUSED and n.kind == "fused" and buf is not None
                   for (k, _, _, _, _, _, buf), n in zip(plan.steps, plan.step_nodes))
        for g in results[-1]:
            assert not any(np.shares_memory(g.numpy(), b) for b in plan.buffers)
    # while another call holds the buffers (a thread), a call runs on new arrays
    with plan._lock:
        again = traced(*batches[1])
    for a, b in zip(again, kept[1]):
        assert a.numpy().tobytes() == b.tobytes()


def test_buffers_are_shared_by_values_whose_lives_do_not_overlap(monkeypatch):
    monkeypatch.setattr(graph_mod, "POOL_BYTES", 0)

    @tg.function
    def f(x, w):
        h = x
        for _ in range(6):
            h = tg.matmul(h, w) * 0.5
        return tg.reduce_sum(h, axis=0)

    x, w = tg.ones((4, 4)), tg.eye(4)
    np.testing.assert_array_equal(f(x, w).numpy(), np.full(4, 4 * 0.5 ** 6, np.float32))
    np.testing.assert_array_equal(f(x * 2.0, w).numpy(), np.full(4, 8 * 0.5 ** 6, np.float32))
    plan = f.get_concrete_function(x, w)._plan
    if tg.backends.current().name == "numpy":
        assert len(plan.slots) == 2  # 12 intermediates of one shape, two alive at a time


@pytest.mark.parametrize("transpose_b", [False, True])
def test_a_product_with_leading_axes_is_written_into_a_buffer(transpose_b, monkeypatch):
    monkeypatch.setattr(graph_mod, "POOL_BYTES", 0)
    rng = np.random.default_rng(0)
    x = tg.constant(rng.standard_normal((3, 200, 8)).astype(np.float32))
    w = tg.constant(rng.standard_normal((5, 8) if transpose_b else (8, 5)).astype(np.float32))

    def f(x, w):
        return tg.reduce_sum(tg.matmul(x, w, transpose_b=transpose_b) * 2.0, axis=1)

    traced = tg.function(f)
    for _ in range(2):  # the second call writes into the first call's buffer
        np.testing.assert_allclose(traced(x, w).numpy(), f(x, w).numpy(), rtol=1e-5, atol=1e-5)
    plan = traced.get_concrete_function(x, w)._plan
    if tg.backends.current().name == "numpy":
        mm = plan.steps[0]  # the product (then the scaling, the sum)
        assert plan.graph.meta[mm[3]][1] == (3, 200, 5)
        assert mm[6] is not None  # its buffer


def _special(shape, seed):
    """float32 values with NaN, +-inf, +-0.0 scattered among normal ones."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(np.float32)
    flat = a.reshape(-1)
    picks = rng.choice(flat.size, size=min(flat.size, 24), replace=False)
    flat[picks] = np.resize(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -np.nan],
                                     np.float32), picks.size)
    return a


def test_relu_backward_and_bias_gradient_replay_as_one_kernel_bit_for_bit(monkeypatch):
    """A ReLU's select and the bias gradient's column sums are one generated kernel, its mask
    is made in the forward's (fusion.py, from the ops' expressions) on every device, with
    numpy's bits."""
    rng = np.random.default_rng(5)
    w1 = tg.Variable(rng.standard_normal((8, 64)).astype(np.float32))
    b1 = tg.Variable(rng.standard_normal(64).astype(np.float32))
    w2 = tg.Variable(rng.standard_normal((64, 4)).astype(np.float32))
    x = rng.standard_normal((32, 8)).astype(np.float32)
    numpy = tg.backends.current().name == "numpy"
    if numpy:  # rows of NaN and inf pre-activations, -0.0 and 0.0 (bits compared on numpy)
        x[3, 2], x[5, 1], x[7] = np.nan, np.inf, -0.0
        x[9, :] = 0.0
    x = tg.constant(x)
    kinds = graph_mod.FUSED if numpy else None
    # a GPU kernel sums 32 rows in order (numpy's bits) with one thread per column; more rows
    # per column take two stages, within rounding (tests/function/test_column_sums.py)
    monkeypatch.setattr(fusion, "SUM_ROWS_PER_THREAD", 32)

    def step(x):
        with tg.GradientTape() as tape:
            h = tg.nn.relu(tg.matmul(x, w1) + b1)
            loss = tg.reduce_sum(tg.matmul(h, w2) * tg.matmul(h, w2))
        return tape.gradient(loss, [w1, b1, w2])

    traced = tg.function(step)
    for pooled in (False, True):  # into a new array, and into the plan's buffers
        if pooled:
            monkeypatch.setattr(graph_mod, "POOL_BYTES", 0)
            traced = tg.function(step)
        traced(x)
        for got, want in zip(traced(x), step(x)):
            assert got.numpy().tobytes() == want.numpy().tobytes()
        plan = traced.get_concrete_function(x)._plan
        kernels = [(s, n.params) for s, n in zip(plan.steps, plan.step_nodes)
                   if n.kind == "fused" and "where" in n.params.ops]
        (fused_step, kernel), = kernels
        assert {"where", "reduce_sum"} <= set(kernel.ops)  # the select and the bias gradient
        assert any("greater" in n.params.ops for n in plan.step_nodes if n.kind == "fused")
        assert len(fused_step[3]) == 2  # the masked gradient and the bias gradient
        assert not any(n.kind == "op" and n.op.name == "reduce_sum" and n.ins == kernel.outputs
                       for n in plan.step_nodes)
        if kinds is not None:  # numpy's arrays: its first result into the plan's buffer
            assert (fused_step[6] is not None) == pooled


def test_small_values_of_constants_alone_are_computed_once_per_plan():
    step, batches = _mlp_step(1)
    labels = tg.constant(np.array([0, 1, 2, 3] * 4, np.int32))

    def fixed_labels(x):
        return step(x, labels)

    folded = tg.function(fixed_labels)
    for xb, _ in batches:
        for got, want in zip(folded(xb), fixed_labels(xb)):
            assert got.numpy().tobytes() == want.numpy().tobytes()
    concrete = folded.get_concrete_function(batches[0][0])
    graph, plan = concrete.graph, concrete._plan
    if tg.backends.current().name == "numpy":
        on_constants = [n.out for n in graph.nodes if n.kind == "op" and n.ins and
                        all(v in graph.constants for v in n.ins)]
        assert on_constants  # the one-hot labels and the loss's scale, in the printed graph
        assert all(v in plan.constants for v in on_constants)
        computed = {v for s in plan.steps for v in (s[3] if isinstance(s[3], tuple) else (s[3],))}
        assert not computed & set(on_constants)  # no step of the replay computes them

    @tg.function
    def only_constants():
        return tg.constant([1.0, 2.0]) * tg.constant(3.0)  # an output: a new array every call

    a, b = only_constants(), only_constants()
    assert a.numpy().tolist() == [3.0, 6.0] and not np.shares_memory(a.numpy(), b.numpy())


def test_the_replays_kernels_follow_the_ops_expressions_not_their_names(monkeypatch):
    step, batches = _mlp_step(2)
    x, y = batches[0]
    want = [g.numpy().tobytes() for g in step(x, y)]

    def kernel_ops():
        traced = tg.function(step)
        assert [g.numpy().tobytes() for g in traced(x, y)] == want
        plan = traced.get_concrete_function(x, y)._plan
        return [sorted(n.params.ops) for n in plan.step_nodes if n.kind == "fused"]

    assert ["greater", "reduce_sum", "where"] in kernel_ops()
    monkeypatch.setattr(tg.where.op, "c", None)  # the entry no longer describes an element
    assert not any("where" in ops for ops in kernel_ops())


def test_a_relu_backward_on_constants_alone_is_folded_and_its_sum_still_computed():
    # a graph the trace would have folded itself, made by hand: the plan folds the mask and
    # the select, and its output, the sum, is still computed
    if tg.backends.current().name != "numpy":
        pytest.skip("the plan folds numpy's arrays")
    ops = registry.REGISTRY
    y = np.array([[1.0, -1.0], [2.0, 0.0], [-3.0, 4.0]], np.float32)
    g = np.array([[0.5, 7.0], [-0.0, 1.0], [9.0, -2.0]], np.float32)
    zero = np.zeros((), np.float32)
    graph = graph_mod.Graph("by_hand")
    for a in (y, g, zero):
        graph.constants[graph.new_value("constant", tg.constant(a))] = a
    mask = graph.add("op", ops["greater"], (0, 2), {}, tg.constant(y > 0))
    picked = graph.add("op", ops["where"], (mask, 1, 2), {}, tg.constant(g))
    total = graph.add("op", ops["reduce_sum"], (picked,), {"axis": (0,), "keepdims": False},
                      tg.constant(g[0]))
    graph.outputs = [("v", total)]
    plan = graph_mod.Plan(graph)
    assert picked in plan.constants
    want = np.sum(np.where(y > 0, g, np.float32(0)), axis=0)
    assert graph_mod.replay(plan, [])[0].tobytes() == want.tobytes()


def test_a_traced_random_draw_replays_under_a_tape_and_inside_another_function():
    """Under a GradientTape the replay runs op by op: a random node draws there too (it
    raised), and an outer tg.function records it as its own draw."""
    tg.random.set_seed(1)

    @tg.function
    def f(x):
        return x * tg.random.normal(())

    x = tg.Variable(2.0)
    f(x)
    with tg.GradientTape() as tape:
        y = f(x)
    assert float(tape.gradient(y, x)) == pytest.approx(float(y) / 2.0)

    @tg.function
    def outer(x):
        return f(x) + 0.0

    draws = {float(outer(x)) for _ in range(3)}
    assert len(draws) == 3
