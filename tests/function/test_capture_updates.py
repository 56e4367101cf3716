"""CUDA-graph capture of training steps that call an optimizer's `apply_gradients`
(tapegpu/function/capture.py, tapegpu/optimizers/captured.py): the step's learning rate,
schedule, bias corrections and step count are computed on the device inside the graph, so
one graph launch per call computes, call after call, what the uncaptured replay and eager
code compute, bit for bit."""

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.testing.launches import launches_of
from tapegpu.function import capture

GPU = ("cuda_emu", "cuda_sim")
S = tg.optimizers.schedules

OPTIMIZERS = {
    "sgd_momentum": lambda: tg.optimizers.SGD(0.05, momentum=0.9),
    "sgd_nesterov_piecewise": lambda: tg.optimizers.SGD(
        S.PiecewiseConstantDecay([1, 3], [0.1, 0.05, 0.01]), momentum=0.8, nesterov=True),
    "adam_exponential_decay": lambda: tg.optimizers.Adam(S.ExponentialDecay(0.01, 3, 0.5)),
    "adam_amsgrad_cosine": lambda: tg.optimizers.Adam(S.CosineDecay(0.01, 4), amsgrad=True),
    "adamw_polynomial_cycle": lambda: tg.optimizers.AdamW(
        S.PolynomialDecay(0.01, 2, power=2.0, cycle=True), weight_decay=0.1),
    "rmsprop": lambda: tg.optimizers.RMSprop(0.01),
    "rmsprop_centered_momentum_clipnorm": lambda: tg.optimizers.RMSprop(
        0.01, momentum=0.5, centered=True, clipnorm=0.5),
    "adagrad_inverse_time_global_clip": lambda: tg.optimizers.Adagrad(
        S.InverseTimeDecay(0.1, 2, 0.5, staircase=True), global_clipnorm=1.0),
    "adamax_restarts": lambda: tg.optimizers.Adamax(S.CosineDecayRestarts(0.01, 2, t_mul=1.0)),
    "adadelta": lambda: tg.optimizers.Adadelta(1.0),
    "lion_clipvalue": lambda: tg.optimizers.Lion(1e-3, clipvalue=0.01),
    "ftrl": lambda: tg.optimizers.Ftrl(0.1, l1_regularization_strength=0.01, beta=0.1),
    "sgd_keras2_decay": lambda: tg.optimizers.SGD(0.1, decay=0.5),
}


def _model(make_opt):
    """An 8-16-4 MLP (float32, a float64 output bias: two dtypes in one update) and its
    optimizer."""
    rng = np.random.default_rng(0)
    ws = [tg.Variable(rng.standard_normal(s).astype(np.float32) * 0.3, name=f"w{i}")
          for i, s in enumerate(((8, 16), (16,), (16, 4)))]
    ws.append(tg.Variable(np.zeros(4, np.float64), name="bias64"))
    opt = make_opt()

    def step(x, y):
        with tg.GradientTape() as tape:
            h = tg.nn.relu(tg.matmul(x, ws[0]) + ws[1])
            logits = tg.matmul(h, ws[2]) + tg.cast(ws[3], tg.float32)
            loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        grads = tape.gradient(loss, ws)
        opt.apply_gradients(zip(grads, ws))
        return loss
    return step, ws, opt


def _batches(n, batch=6):
    rng = np.random.default_rng(1)
    return [(tg.constant(rng.standard_normal((batch, 8)).astype(np.float32)),
             tg.constant(rng.integers(0, 4, batch).astype(np.int32))) for _ in range(n)]


def _state(ws, opt):
    """Bytes of the variables, every slot and `iterations`, and the host's learning rate."""
    return [w.numpy().tobytes() for w in ws] + \
        [v.numpy().tobytes() for v in opt.variables()] + [repr(float(opt.learning_rate))]


def _run(make_opt, mode, calls=6):
    step, ws, opt = _model(make_opt)
    f = step if mode == "eager" else tg.function(step, jit_compile=mode)
    dev = ws[0]._value._dev
    losses, counts = [], []
    for x, y in _batches(calls):
        loss, c = launches_of(dev, f, x, y)
        losses.append(loss.numpy().tobytes())
        counts.append(c)
    return f, losses, _state(ws, opt), counts, opt


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_training_step_with_apply_gradients_is_one_graph_launch_per_call(tg_device, name):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    make = OPTIMIZERS[name]
    f, losses, state, counts, opt = _run(make, True)
    for mode in (None, "eager"):  # the uncaptured replay, eager code
        _, losses_r, state_r, _, _ = _run(make, mode)
        assert losses == losses_r, mode
        assert state == state_r, mode
    info = f.get_concrete_function(*_batches(1)[0]).capture_info
    assert info["captured"] and info["reason"] is None and info["captures"] == 1, info
    # call 0 traces, call 1 captures (and runs the step), then one graph launch per call
    assert all(c == {capture.GRAPH_LAUNCH: 1} for c in counts[2:]), counts
    assert int(opt.iterations.numpy()) == 6 and opt._step == 6


def test_a_step_of_apply_gradients_alone_is_captured(tg_device):
    """No op but the update (the graph's device is its arguments')."""
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    runs = {}
    for mode in (True, "eager"):
        w = tg.Variable(np.linspace(-1, 1, 5).astype(np.float32))
        opt = tg.optimizers.Adam(S.PolynomialDecay(0.1, 3))

        def apply(g):
            opt.apply_gradients([(g, w)])
        f = apply if mode == "eager" else tg.function(apply, jit_compile=mode)
        for k in range(5):
            f(tg.constant(np.full(5, k - 2.0, np.float32)))
        runs[mode] = _state([w], opt)
        if mode is True:
            info = f.get_concrete_function(tg.constant(np.zeros(5, np.float32))).capture_info
    assert runs[True] == runs["eager"]
    assert info["captured"] and info["graph_launches"] >= 3, info


def test_a_variable_learning_rate_is_read_by_the_graph(tg_device):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    runs = {}
    for mode in (True, "eager"):
        rate = tg.Variable(np.float32(0.02), trainable=False)
        step, ws, opt = _model(lambda: tg.optimizers.Adam(rate))
        f = step if mode == "eager" else tg.function(step, jit_compile=mode)
        for i, (x, y) in enumerate(_batches(6)):
            if i == 3:  # assigned between calls: the graph reads the new value
                rate.assign(np.float32(0.005))
            f(x, y)
        runs[mode] = _state(ws, opt)
        if mode is True:
            info = f.get_concrete_function(*_batches(1)[0]).capture_info
    assert runs[True] == runs["eager"]
    assert info["captured"] and info["captures"] == 1 and info["graph_launches"] >= 4, info


def test_a_new_number_learning_rate_is_written_to_the_graph_a_new_schedule_recaptures(
        tg_device):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    runs = {}
    for mode in (True, "eager"):
        step, ws, opt = _model(OPTIMIZERS["sgd_momentum"])
        f = step if mode == "eager" else tg.function(step, jit_compile=mode)
        for i, (x, y) in enumerate(_batches(8)):
            if i == 3:  # Keras' callbacks set a number (ReduceLROnPlateau): no new capture
                opt.learning_rate = 0.01
            if i == 5:  # another kind of rate: the graph is captured again
                opt.learning_rate = S.ExponentialDecay(0.02, 2, 0.5)
            f(x, y)
        runs[mode] = _state(ws, opt)
        if mode is True:
            info = f.get_concrete_function(*_batches(1)[0]).capture_info
    assert runs[True] == runs["eager"]
    assert info["captured"] and info["captures"] == 2 and info["graph_launches"] >= 4, info


def test_slots_and_iterations_restored_from_a_checkpoint_reach_the_graph(tg_device, tmp_path):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    runs = {}
    for mode in (True, "eager"):
        step, ws, opt = _model(OPTIMIZERS["adam_exponential_decay"])
        f = step if mode == "eager" else tg.function(step, jit_compile=mode)
        ckpt = tg.train.Checkpoint(optimizer=opt, **{f"w{i}": w for i, w in enumerate(ws)})
        batches = _batches(7)
        for x, y in batches[:3]:
            f(x, y)
        path = ckpt.write(str(tmp_path / f"ckpt_{mode}"))
        for x, y in batches[3:5]:
            f(x, y)
        ckpt.read(path)  # new slot arrays, iterations back to 3
        assert int(opt.iterations.numpy()) == 3 and opt._step == 3
        for x, y in batches[5:]:
            f(x, y)
        runs[mode] = _state(ws, opt)
    assert runs[True] == runs["eager"]


def test_a_capture_that_fails_after_the_update_gives_the_slots_back(tg_device):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")
    runs = {}
    for mode in (True, "eager"):
        train, ws, opt = _model(OPTIMIZERS["adam_exponential_decay"])

        def step(x, y):
            loss = train(x, y)
            return loss + tg.reduce_sum(ws[1])  # an op after the update
        f = step if mode == "eager" else tg.function(step, jit_compile=mode)
        batches = _batches(4)
        f(*batches[0])
        if mode is True:  # the op after the update reads the device on the host: refused
            plan = f.get_concrete_function(*batches[0])._plan
            dev = ws[0]._value._dev
            kinds = [s[0] for s in plan.steps]
            k = len(kinds) - 1 - kinds[::-1].index(0)  # the last op (graph.OP)
            assert kinds.index(3) < k  # after the update (graph.UPDATE)
            kind, fn, *rest = plan.steps[k]

            def reading(*args, fn=fn):
                dev.to_numpy(args[0])
                return fn(*args)
            plan.steps[k] = (kind, reading, *rest)
        for x, y in batches[1:]:
            f(x, y)
        runs[mode] = _state(ws, opt)
        if mode is True:
            info = f.get_concrete_function(*batches[0]).capture_info
            assert not info["captured"] and "capture failed" in info["reason"], info
    assert runs[True] == runs["eager"]


@pytest.mark.parametrize("what", ["callable", "nadam", "restarts", "subclass", "iterations"])
def test_updates_that_need_the_host_are_refused_with_the_reason(tg_device, what):
    if tg_device not in GPU:
        pytest.skip("graphs are captured on GPUs")

    class Halved(S.ExponentialDecay):
        def __call__(self, step):
            return super().__call__(step) / 2

    def warmup(step):
        return 0.01 * min(1.0, (step + 1) / 3)
    def made_on_the_cpu():
        with tg.device("cpu"):  # outside the step's device: `iterations` lives on numpy
            return tg.optimizers.SGD(0.1)
    make = {"callable": lambda: tg.optimizers.SGD(warmup),
            "nadam": lambda: tg.optimizers.Nadam(0.01),
            "restarts": lambda: tg.optimizers.Adam(S.CosineDecayRestarts(0.01, 2, t_mul=2.0)),
            "subclass": lambda: tg.optimizers.Adam(Halved(0.01, 2, 0.5)),
            "iterations": made_on_the_cpu}[what]
    f, losses, state, counts, opt = _run(make, True, calls=4)
    _, losses_r, state_r, _, _ = _run(make, None, calls=4)
    assert losses == losses_r and state == state_r  # uncaptured, with the host's numbers
    info = f.get_concrete_function(*_batches(1)[0]).capture_info
    assert not info["captured"] and info["graph_launches"] == 0
    word = {"callable": "learning rate 'test_updates_that_need_the_host_are_refused_with_the_"
                        "reason.<locals>.warmup'",
            "nadam": "Nadam's momentum schedule",
            "restarts": "t_mul=2.0",
            "subclass": "class Halved defines __call__ only",
            "iterations": "`iterations` is on numpy"}[what]
    assert word in info["reason"], info["reason"]
    assert "apply_gradients" in info["reason"]


def test_the_schedules_device_forms_are_their_host_formulas_bit_for_bit(tg_device):
    if tg_device != "numpy":
        pytest.skip("numpy's float64 functions, the same on every device of the test run")
    cases = [S.ExponentialDecay(0.1, 7, 0.9), S.ExponentialDecay(0.1, 7, 0.9, staircase=True),
             S.InverseTimeDecay(0.1, 5, 0.3), S.InverseTimeDecay(0.1, 5, 0.3, staircase=True),
             S.PiecewiseConstantDecay([10, 20.5, 40], [1.0, 0.5, 0.1, 0.01]),
             S.CosineDecay(0.1, 37, alpha=0.1), S.PolynomialDecay(0.1, 30, power=0.5),
             S.PolynomialDecay(0.1, 13, end_learning_rate=0.01, power=2.0, cycle=True),
             S.CosineDecayRestarts(0.1, 9, t_mul=1.0, m_mul=0.8, alpha=0.05)]
    for s in cases:
        for step in range(0, 200):
            host = s(step)
            for device_step in (np.asarray(float(step)), np.float64(step)):
                got = s._on_device(np, device_step)
                assert np.asarray(got).shape == () and np.asarray(got).dtype == np.float64
                assert float(got) == host or (np.isnan(host) and np.isnan(got)), (s, step)


def test_a_step_with_apply_gradients_on_numpy_is_not_captured(tg_device):
    if tg_device != "numpy":
        pytest.skip("the CPU case")
    f, losses, state, counts, opt = _run(OPTIMIZERS["adam_exponential_decay"], True, calls=3)
    _, losses_r, state_r, _, _ = _run(OPTIMIZERS["adam_exponential_decay"], "eager", calls=3)
    assert losses == losses_r and state == state_r
    info = f.get_concrete_function(*_batches(1)[0]).capture_info
    assert not info["captured"] and "numpy" in info["reason"]
