"""Saved values are exactly the declared ones; liveness in the sweep; stats and plan;
recompute_grad and memory budgets give bit-identical gradients; the profiler's counts."""
import gc
import weakref

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.core.options import options
from tapegpu.testing.op_specs import SPECS, sample

DIFF = [s for s in SPECS if s.grad]


@pytest.mark.parametrize("spec", DIFF, ids=str)
def test_tape_keeps_exactly_the_declared_saves(spec):
    xs = sample(spec, np.float64)
    ts = [tg.constant(x) for x in xs]
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(ts)
        spec.fn(*ts)
    assert tape._entries
    for e in tape._entries:
        saves = e.op.saves
        if not saves:
            assert e.saved == ()
            continue
        if saves == ("*",):
            assert len(e.saved) == len(e.in_uids)
            continue
        assert len(e.saved) == len(saves), e.op.name
        for name, value in zip(saves, e.saved):
            if name == "out":
                assert value._uid == e.out_uid
            elif name in e.op.residuals:  # a derived residual: the forward's own array
                assert isinstance(value, tg.Tensor)
                assert value._uid not in e.in_uids and value._uid != e.out_uid
            elif name.endswith(".shape"):
                i = e.op.args.index(name.split(".")[0])
                assert value == e.in_shapes[i]
            else:
                i = e.op.args.index(name)
                assert value.shape == e.in_shapes[i]
                if e.in_uids[i] is not None:
                    assert value._uid == e.in_uids[i]
        for v in e.params.values():  # params are metadata, never activations
            assert np.asarray(v, dtype=object).size < 64 or getattr(v, "nbytes", 0) < 4096


def test_undeclared_intermediates_are_not_kept_alive():
    x = tg.constant(np.linspace(0, 1, 1000))
    with tg.GradientTape() as tape:
        tape.watch(x)
        s = tg.sin(x)          # exp saves its output, not its input: s is dead once dropped
        y = tg.exp(s)
        a = tg.cos(x)          # sin saves its input: a stays alive through the tape
        z = tg.sin(a)
    s_ref, a_ref = weakref.ref(s), weakref.ref(a)
    del s, a
    gc.collect()
    assert s_ref() is None
    assert a_ref() is not None
    tape.gradient([y, z], x)
    gc.collect()
    assert a_ref() is None  # released by the sweep of a non-persistent tape


def test_sweep_releases_each_entry_right_after_its_vjp(monkeypatch):
    x = tg.constant(np.linspace(0, 1, 2000))
    with tg.GradientTape() as tape:
        tape.watch(x)
        a = tg.sin(x)
        b = tg.sin(a)      # saves a
        c = tg.reduce_sum(b)
    a_ref = weakref.ref(a)
    del a, b
    seen = []
    op = tape._entries[0].op
    rule = op.vjp

    def spy(ops, g, saved_x):
        gc.collect()
        seen.append(a_ref() is None)
        return rule(ops, g, saved_x)

    monkeypatch.setattr(op, "vjp", spy)
    monkeypatch.setattr(op, "steps", {})  # the sweep's steps are built from the rule
    tape.gradient(c, x)
    # the second sin's VJP still needs `a`; by the first sin's VJP it has been released
    assert seen == [False, True]


def test_stats_and_plan_report_bytes():
    x = tg.constant(np.ones((64, 64), np.float32))
    w = tg.Variable(np.ones((64, 64), np.float32))
    with tg.GradientTape(track_memory=True) as tape:
        h = tg.nn.relu(tg.matmul(x, w))          # relu saves its output (16 KiB)
        y = tg.reduce_sum(tg.tanh(h))            # tanh saves its output (16 KiB); matmul: x, w
    st = tape.stats()
    assert st["recorded_ops"] == 5  # variable read, matmul, relu, tanh, reduce_sum
    assert st["saved_bytes_by_op"] == {"matmul": 2 * 16384, "read_variable": 0,
                                       "reduce_sum": 0, "relu": 16384, "tanh": 16384}
    assert st["activation_bytes"] == 2 * 16384  # relu's and tanh's outputs, not x and w
    assert st["saved_bytes"] == 4 * 16384
    plan = tape.plan(y, w)
    assert plan.kept_bytes == st["saved_bytes"]
    assert [s[0] for s in plan.steps] == ["reduce_sum", "tanh", "relu", "matmul",
                                          "read_variable"]
    assert plan.predicted_peak_bytes >= plan.kept_bytes
    assert "backward plan" in str(plan)
    tape.gradient(y, w)
    after = tape.stats()
    assert after["recorded_ops"] == 5 and after["saved_bytes"] == 0
    assert after["peak_bytes"] >= 3 * 16384


def _mlp(depth=8, width=64, batch=32, seed=0):
    rng = np.random.default_rng(seed)
    ws = [tg.Variable((rng.standard_normal((width, width)) / 8).astype(np.float32))
          for _ in range(depth)]
    x = tg.constant(rng.standard_normal((batch, width)).astype(np.float32))
    return x, ws


def _loss(x, ws, layer=None):
    h = x
    for w in ws:
        h = (layer or _layer)(h, w)
    return tg.reduce_sum(h * h)


def _layer(h, w):
    return tg.nn.relu(tg.matmul(h, w))


def test_recompute_grad_is_bit_identical_and_keeps_less():
    x, ws = _mlp()
    with tg.GradientTape(track_memory=True) as plain:
        loss = _loss(x, ws)
    kept_plain = plain.stats()["activation_bytes"]
    want = plain.gradient(loss, ws)
    layer = tg.recompute_grad(_layer)
    with tg.GradientTape(track_memory=True) as ck:
        loss2 = _loss(x, ws, layer)
    kept_ck = ck.stats()["saved_bytes"]
    got = ck.gradient(loss2, ws)
    assert float(loss) == float(loss2)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert kept_ck < kept_plain


def test_recompute_grad_second_order():
    f = tg.recompute_grad(lambda x: tg.sin(x) * x)
    x = tg.constant(0.7, dtype=tg.float64)
    with tg.GradientTape() as t2:
        t2.watch(x)
        with tg.GradientTape() as t1:
            t1.watch(x)
            y = f(x)
        d1 = t1.gradient(y, x)
    d2 = t2.gradient(d1, x)
    assert float(d1) == pytest.approx(np.cos(0.7) * 0.7 + np.sin(0.7))
    assert float(d2) == pytest.approx(-np.sin(0.7) * 0.7 + 2 * np.cos(0.7))


def test_recompute_grad_reading_variables_and_jacobian():
    v = tg.Variable([1.5, -0.5])
    f = tg.recompute_grad(lambda x: tg.tanh(x * v))
    x = tg.constant([0.3, 0.2])
    with tg.GradientTape(persistent=True) as t:
        t.watch(x)
        y = f(x)
    gx, gv = t.gradient(y, [x, v])
    with tg.GradientTape(persistent=True) as ref:
        ref.watch(x)
        yr = tg.tanh(x * v)
    np.testing.assert_array_equal(gx.numpy(), ref.gradient(yr, x).numpy())
    np.testing.assert_array_equal(gv.numpy(), ref.gradient(yr, v).numpy())
    np.testing.assert_array_equal(t.jacobian(y, x).numpy(), ref.jacobian(yr, x).numpy())


@pytest.mark.parametrize("persistent", [False, True])
def test_memory_budget_keeps_within_budget_and_is_bit_identical(persistent):
    x, ws = _mlp(depth=16, width=64, batch=64)
    with tg.GradientTape(track_memory=True) as plain:
        loss = _loss(x, ws)
    full = plain.stats()["activation_bytes"]
    want = plain.gradient(loss, ws)
    budget = full // 4
    with tg.GradientTape(memory_budget=budget, persistent=persistent) as tape:
        loss2 = _loss(x, ws)
    st = tape.stats()
    assert st["peak_kept_bytes"] <= budget
    assert st["segments"] >= 1 and st["activation_bytes"] <= budget
    for _ in range(2 if persistent else 1):
        got = tape.gradient(loss2, ws)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    if persistent:
        assert tape.plan(loss2, ws).recompute


def test_memory_budget_refuses_higher_order_through_dropped_segments():
    x, ws = _mlp(depth=6, width=32, batch=8)
    with tg.GradientTape():  # records the inner sweep: a higher-order gradient
        with tg.GradientTape(memory_budget=1024) as inner:
            loss = _loss(x, ws)
        with pytest.raises(RuntimeError, match="memory_budget"):
            inner.gradient(loss, ws)


def test_profiler_counts_flops_and_phases():
    a = tg.ones((8, 16))
    b = tg.Variable(tg.ones((16, 4)))
    with tg.profiler() as prof:
        with tg.GradientTape() as tape:
            y = tg.reduce_sum(tg.tanh(tg.matmul(a, b)))
        tape.gradient(y, b)
    d = prof.as_dict()
    assert d["forward"]["matmul"] == {"count": 1, "flops": 2 * 8 * 16 * 4,
                                      "bytes": (8 * 16 + 16 * 4 + 8 * 4) * 4}
    assert d["forward"]["tanh"]["flops"] == 32
    assert d["backward"]["matmul"]["count"] == 1
    assert d["backward"]["matmul"]["flops"] == 2 * 8 * 16 * 4  # only dB is needed
    assert set(d["backward"]) == {"matmul", "tanh", "reduce_sum", "read_variable"}
    assert "forward" in str(prof) and "backward" in str(prof)


def test_profiler_counts_tensor_mode_rules_once():
    x = tg.constant(np.ones(5))
    with tg.profiler() as prof:
        with tg.GradientTape() as t2:
            t2.watch(x)
            with tg.GradientTape() as t1:
                t1.watch(x)
                y = tg.reduce_sum(tg.sin(x))
            t1.gradient(y, x)  # a tape records this sweep: tensor mode
    d = prof.as_dict()
    assert d["backward"]["sin"]["count"] == 1
    assert "cos" not in d["backward"]  # the rule's own ops are not counted again


def test_owned_means_only_the_sweep_holds_the_buffer():
    from tapegpu.autodiff import sweep
    grads = {1: np.ones(4)}
    prev = grads.get(1)
    assert sweep._owned(prev)
    other = prev
    assert not sweep._owned(prev) and other is prev
    grads[2] = np.ones(8)[2:]  # a view
    assert not sweep._owned(grads.get(2))
    ro = np.ones(4)
    ro.flags.writeable = False
    grads[3] = ro
    del ro
    assert not sweep._owned(grads.get(3))


def _sweep_peak(tape, y, x, seed, real_gpu=False):
    """The gradient and the peak of the memory the sweep allocated: host memory by tracemalloc
    (numpy arrays, the CuPy stand-in's), a real GPU's memory by a CuPy memory hook (its arrays
    are not in the host's heap: tracemalloc sees a few KiB of Python objects)."""
    if real_gpu:
        return _device_sweep_peak(tape, y, x, seed)
    import tracemalloc
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    g = tape.gradient(y, x, output_gradients=seed)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return g, peak


def _device_sweep_peak(tape, y, x, seed):
    """As `_sweep_peak`, on a real GPU: CuPy's pool hooks count the bytes of every block the
    sweep takes from the pool (`mem_size`, rounded up to the pool's 512 bytes) less those of
    them it gives back, and keep the maximum (blocks taken before, freed during the sweep, are
    not counted: they would lower the peak)."""
    import cupy

    class Peak(cupy.cuda.MemoryHook):
        name = "tapegpu_test_peak"

        def __init__(self):
            self.taken = {}
            self.used = self.peak = 0

        def malloc_postprocess(self, **kw):
            self.taken[kw["mem_ptr"]] = kw["mem_size"]
            self.used += kw["mem_size"]
            self.peak = max(self.peak, self.used)

        def free_postprocess(self, **kw):
            self.used -= self.taken.pop(kw["mem_ptr"], 0)

    hook = Peak()
    with hook:
        g = tape.gradient(y, x, output_gradients=seed)
        g._dev.synchronize()
    return g, hook.peak


def test_cotangents_accumulate_in_place_without_touching_anything_held(monkeypatch, tg_device):
    """A tensor used many times gets its cotangent summed in place (one buffer less at the
    peak), while a buffer someone else holds (the caller's output_gradients) is never written."""
    x = tg.constant(np.linspace(0.0, 1.0, 1 << 16))
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tg.add_n([tg.sin(x) * float(k) for k in range(1, 9)])
    seed = tg.ones_like(y)
    seed_copy = seed.numpy()
    real_gpu = tg_device.startswith("gpu")  # (the CuPy stand-in runs as "cuda_sim")
    g, peak_in_place = _sweep_peak(tape, y, x, seed, real_gpu)
    np.testing.assert_allclose(g.numpy(), 36.0 * np.cos(x.numpy()), rtol=1e-12)
    np.testing.assert_array_equal(seed.numpy(), seed_copy)  # add_n hands it to every term
    monkeypatch.setattr(options, "in_place", False)
    g2, peak_copying = _sweep_peak(tape, y, x, seed, real_gpu)
    np.testing.assert_array_equal(g.numpy(), g2.numpy())
    if tg_device == "cuda_sim":  # its peak is set by a rule's temporaries, not by the sums
        assert peak_in_place <= peak_copying + x.nbytes // 8, (peak_in_place, peak_copying)
    else:
        assert peak_in_place <= peak_copying - x.nbytes // 2, (peak_in_place, peak_copying)
