"""CUDA graphs for tg.function (tapegpu/function/capture.py): `jit_compile=True` replays a
captured step as one graph launch on `cuda_emu` and on `cuda` (the CuPy stand-in, with CuPy's
capture rules), with the uncaptured replay's results bit for bit."""

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.backends.emu import stream as emu_stream
from tapegpu.function import capture
from tapegpu.testing.launches import launches_of, traced_step_launches

GPU = ("cuda_emu", "cuda_sim")


def _mlp_step(captured):
    """A 8-16-4 MLP training step with momentum written as assigns (capturable)."""
    rng = np.random.default_rng(0)
    ws = [tg.Variable(rng.standard_normal(s).astype(np.float32) * 0.3)
          for s in ((8, 16), (16,), (16, 4), (4,))]
    vs = [tg.Variable(np.zeros(w.shape, np.float32)) for w in ws]

    def step(x, y):
        with tg.GradientTape() as tape:
            h = tg.nn.relu(tg.matmul(x, ws[0]) + ws[1])
            logits = tg.matmul(h, ws[2]) + ws[3]
            loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        grads = tape.gradient(loss, ws)
        for g, w, v in zip(grads, ws, vs):
            nv = v * 0.9 - g * 0.05
            v.assign(nv)
            w.assign(w + nv)
        return loss
    return tg.function(step, jit_compile=True if captured else None), ws, vs


def _data(batch=6):
    rng = np.random.default_rng(1)
    return (tg.constant(rng.standard_normal((batch, 8)).astype(np.float32)),
            tg.constant(rng.integers(0, 4, batch).astype(np.int32)))


def test_a_captured_training_step_is_one_graph_launch_with_the_uncaptured_bits(tg_device):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    x, y = _data()
    cap, ws_c, vs_c = _mlp_step(True)
    ref, ws_r, vs_r = _mlp_step(False)
    dev = ws_c[0]._value._dev
    held = ws_c[0].value()  # an array a caller holds: no later launch may change it
    held_bits = held.numpy().copy()
    for i in range(4):
        lc, counts = launches_of(dev, cap, x, y)
        lr = ref(x, y)
        assert lc.numpy().tobytes() == lr.numpy().tobytes(), i
        for a, b in zip(ws_c + vs_c, ws_r + vs_r):
            assert a.numpy().tobytes() == b.numpy().tobytes(), i
        if i >= 2:  # call 0 traces, call 1 captures (and runs the step), then replays
            assert counts == {capture.GRAPH_LAUNCH: 1}, (i, counts)
    assert held.numpy().tobytes() == held_bits.tobytes()
    info = cap.get_concrete_function(x, y).capture_info
    assert info["captured"] and info["reason"] is None and info["captures"] == 1
    assert info["graph_launches"] == (2 if tg_device == "cuda_emu" else 3)


def test_the_uncaptured_replay_counts_every_launch(tg_device):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    x, y = _data()
    ref, ws, _ = _mlp_step(False)
    ref(x, y)
    _, counts = launches_of(ws[0]._value._dev, ref, x, y)
    assert capture.GRAPH_LAUNCH not in counts and sum(counts.values()) > 5


def test_a_variable_assigned_outside_the_step_is_copied_into_the_graph(tg_device):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    w = tg.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))

    @tg.function(jit_compile=True)
    def f(x):
        return tg.reduce_sum(tg.matmul(x, w) * 2.0 + 1.0, axis=0)
    x = tg.constant(np.ones((4, 2), np.float32))
    for _ in range(3):
        f(x)
    w.assign(np.full((2, 3), 10.0, np.float32))
    np.testing.assert_array_equal(f(x).numpy(), np.full(3, 4 * (20 * 2 + 1), np.float32))
    assert f.get_concrete_function(x).capture_info["captured"]


def test_a_new_shape_or_python_value_is_a_new_capture(tg_device):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")

    def fn(x, scale):
        return tg.sin(x) * scale + 1.0
    f, ref = tg.function(fn, jit_compile=True), tg.function(fn)
    a = tg.constant(np.linspace(-1, 1, 5, dtype=np.float32))
    b = tg.constant(np.linspace(-1, 1, 7, dtype=np.float32))
    for _ in range(3):
        for x, scale in ((a, 2.0), (b, 2.0), (a, 3.0)):
            assert f(x, scale).numpy().tobytes() == ref(x, scale).numpy().tobytes()
    infos = [f.get_concrete_function(*args).capture_info for args in
             ((a, 2.0), (b, 2.0), (a, 3.0))]
    assert [i["captures"] for i in infos] == [1, 1, 1]
    assert all(i["graph_launches"] == (1 if tg_device == "cuda_emu" else 2) for i in infos)


@pytest.mark.parametrize("what", ["print", "guard", "random", "update"])
def test_host_work_in_the_step_refuses_capture_with_the_reason(tg_device, what, capsys):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    w = tg.Variable(np.ones(3, np.float32))

    def halving(step):  # a learning rate of Python code (run on the host at every call)
        return 0.1 * 0.5 ** step
    opt = tg.optimizers.SGD(halving)

    @tg.function(jit_compile=True)
    def f(x):
        y = x * 2.0 + 1.0
        if what == "print":
            tg.print(y)
        elif what == "guard":
            if tg.reduce_sum(y) > 0:
                y = y + 1.0
        elif what == "random":
            y = y + tg.random.uniform((3,))
        else:
            opt.apply_gradients([(y, w)])
        return y
    x = tg.constant(np.ones(3, np.float32))
    for _ in range(3):
        r = f(x)
    if what != "random":
        np.testing.assert_array_equal(r.numpy(), np.full(3, 4.0 if what == "guard" else 3.0))
    info = f.get_concrete_function(x).capture_info
    assert not info["captured"] and info["graph_launches"] == 0
    word = {"print": "tg.print", "guard": "Python code read", "random": "random",
            "update": "learning rate 'test_host_work_in_the_step_refuses_capture_with_the_"
                      "reason.<locals>.halving'"}[what]
    assert word in info["reason"]
    if what == "update":  # the uncaptured replay kept the host's schedule: 0.1, 0.05, 0.025
        np.testing.assert_allclose(w.numpy(), 1.0 - 3.0 * 0.175, rtol=1e-6)
        assert "SGD" in info["reason"] and "Python callable" in info["reason"]


def test_a_host_read_during_the_capture_falls_back_with_the_reason(tg_device):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    w = tg.Variable(np.ones(3, np.float32))

    @tg.function(jit_compile=True)
    def f(x):
        w.assign(x * 2.0)
        return w * 3.0
    x = tg.constant(np.ones(3, np.float32))
    f(x)
    dev = w._value._dev
    plan = f.get_concrete_function(x)._plan
    # a step that reads the device on the host while it runs (as a schedule reading a tensor
    # learning rate would): the capture refuses it, the step replays uncaptured
    kind, fn, *rest = plan.steps[0]

    def reading(*args):
        dev.to_numpy(args[0])
        return fn(*args)
    plan.steps[0] = (kind, reading, *rest)
    r = f(x)
    np.testing.assert_array_equal(r.numpy(), np.full(3, 6.0, np.float32))
    np.testing.assert_array_equal(w.numpy(), np.full(3, 2.0, np.float32))
    info = f.get_concrete_function(x).capture_info
    assert not info["captured"] and "capture failed" in info["reason"] and \
        ("D2H" in info["reason"] or "device-to-host" in info["reason"])
    assert f(x).numpy().tolist() == [6.0, 6.0, 6.0]  # and keeps replaying uncaptured


def test_numpy_steps_are_not_captured(tg_device):
    if tg_device != "numpy":
        pytest.skip("the CPU case")
    f = tg.function(lambda x: x * 2.0 + 1.0, jit_compile=True)
    x = tg.constant(np.ones(3, np.float32))
    f(x), f(x)
    info = f.get_concrete_function(x).capture_info
    assert not info["captured"] and "numpy" in info["reason"]


def test_the_emulated_stream_keeps_cudas_capture_rules(tg_device):
    if tg_device != "cuda_emu":
        pytest.skip("the emulator's stream")
    dev = tg.constant(0.0)._dev
    s = emu_stream.Stream(dev)
    with pytest.raises(emu_stream.CaptureError, match="not capturing"):
        s.end_capture()
    s.begin_capture()
    try:
        with pytest.raises(emu_stream.CaptureError, match="already capturing"):
            s.begin_capture()
        with pytest.raises(emu_stream.CaptureError, match="device-to-host"):
            dev.to_numpy(np.ones(2))
        with pytest.raises(emu_stream.CaptureError, match="synchronize"):
            dev.synchronize()
        a, b = np.ones(3, np.float32), np.empty(3, np.float32)

        def add(x):
            dev.launches["add"] += 1
            return x + 1
        b[...] = add(a)
        s.record(add, (a,), (b,), {"add": 1})
    finally:
        g = s.end_capture()
    a[...] = 5
    before = dev.launches[capture.GRAPH_LAUNCH]
    g.launch()
    np.testing.assert_array_equal(b, np.full(3, 6, np.float32))
    assert dev.launches[capture.GRAPH_LAUNCH] == before + 1
    s.begin_capture()
    s.record(lambda x: x, (a,), (b,), {"add": 1})  # claims a launch it does not issue
    bad = s.end_capture()
    with pytest.raises(emu_stream.CaptureError, match="not the captured launches"):
        bad.launch()


def test_the_cupy_stand_in_captures_as_cupy_does(tg_device):
    if tg_device != "cuda_sim":
        pytest.skip("the CuPy stand-in")
    cp = tg.constant(0.0)._dev.xp
    with pytest.raises(RuntimeError, match="default"):
        cp.cuda.Stream.null.begin_capture()
    with pytest.raises(NotImplementedError):
        cp.cuda.Graph()
    before = cp.arange(4, dtype=cp.float32)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        assert s.is_capturing()
        with pytest.raises(RuntimeError, match="D2H"):
            before.get()
        with pytest.raises(RuntimeError, match="D2H"):
            float(before[0])
        with pytest.raises(RuntimeError, match="H2D"):
            cp.asarray(np.ones(2))
        with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="Capture"):
            s.synchronize()
        twice = before * 2  # kept: a temporary freed here would be the error below
        made = twice + 1
        before += 1  # an in-place write to an array of before the capture
        g = s.end_capture()
    assert not s.is_capturing()
    # a capture runs nothing: what it wrote is undone, what it made is not computed yet
    np.testing.assert_array_equal(before.get(), np.arange(4))
    assert np.isnan(made.get()).all()
    g.launch()
    np.testing.assert_array_equal(made.get(), np.arange(4) * 2 + 1)
    np.testing.assert_array_equal(before.get(), np.arange(4) + 1)
    g.launch()
    np.testing.assert_array_equal(before.get(), np.arange(4) + 2)
    # an array of the capture freed from the default pool: its memory may be another's
    with s:
        s.begin_capture()
        tmp = before * 3
        out = tmp + 1
        g2 = s.end_capture()
    del tmp
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="freed"):
        g2.launch()
    # from a pool of the graph's own it stays allocated
    pool = cp.cuda.MemoryPool()
    with cp.cuda.using_allocator(pool.malloc), s:
        s.begin_capture()
        tmp = before * 3
        out = tmp + 1
        g3 = s.end_capture()
    del tmp
    g3.launch()
    np.testing.assert_array_equal(out.get(), (np.arange(4) + 2) * 3 + 1)
    # a device-to-device memcpy is captured; a synchronous one is refused
    dst = cp.zeros(4, cp.float32)
    with s:
        s.begin_capture()
        with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="Capture"):
            dst.data.copy_from_device(before.data, before.nbytes)
        dst.data.copy_from_device_async(before.data, before.nbytes)
        g4 = s.end_capture()
    np.testing.assert_array_equal(dst.get(), np.zeros(4))
    g4.launch()
    np.testing.assert_array_equal(dst.get(), before.get())


def test_the_profiler_reports_one_graph_launch_per_step(tg_device):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    x, y = _data()
    cap, ws, _ = _mlp_step(True)
    cap(x, y), cap(x, y)
    with tg.profiler() as prof:
        cap(x, y)
        cap(x, y)
    name = ws[0]._value._dev.name
    assert prof.as_dict()["launches"][name] == {capture.GRAPH_LAUNCH: 2}
    assert f"kernel launches on {name}: 2 ({capture.GRAPH_LAUNCH} 2)" in str(prof)


def test_the_mlp_training_step_captured_replays_its_fused_launches_as_one(tg_device):
    if tg_device != "cuda_emu":
        pytest.skip("launch counts are the emulator's")
    fused, none = traced_step_launches(8, "relu", None, update="assign")
    captured, inside = traced_step_launches(8, "relu", True, update="assign")
    assert none is None and captured == {capture.GRAPH_LAUNCH: 1}
    assert inside == fused  # the graph holds exactly the fused replay's launches
    # apply_gradients (SGD with momentum): captured too, its update kernels inside the graph
    fused, none = traced_step_launches(8, "relu", None)
    captured, inside = traced_step_launches(8, "relu", True)
    assert none is None and captured == {capture.GRAPH_LAUNCH: 1}
    # the same launches, the update's kernel reading its learning rate from device memory
    expected = dict(fused)
    expected["tapegpu_sgd_multi_update_devlr_f32"] = expected.pop("tapegpu_sgd_multi_update_f32")
    assert inside == expected


def test_a_call_while_the_graph_is_in_use_replays_uncaptured(tg_device):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    f = tg.function(lambda x: x * 2.0 + 1.0, jit_compile=True)
    x = tg.constant(np.arange(3, dtype=np.float32))
    f(x), f(x)
    cap = f.get_concrete_function(x)._capture
    launched = cap.info["graph_launches"]
    with cap._lock:  # as another thread holding the graph's buffers
        r = f(tg.constant(np.full(3, 5.0, np.float32)))
    np.testing.assert_array_equal(r.numpy(), np.full(3, 11.0, np.float32))
    assert cap.info["graph_launches"] == launched
    np.testing.assert_array_equal(f(x).numpy(), [1.0, 3.0, 5.0])
    assert cap.info["graph_launches"] == launched + 1
