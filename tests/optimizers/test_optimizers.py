"""Optimizers against hand-written numpy sequences of Keras' update rules."""
import math
import warnings

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.optimizers import base as opt_base

GRADS = [np.array([0.5, -1.0, 2.0]), np.array([0.1, 0.3, -0.7]), np.array([1.5, 0.0, 0.2]),
         np.array([-0.4, 0.9, 0.1]), np.array([0.0, -2.0, 1.0])]
P0 = np.array([1.0, -2.0, 0.5])


def _run(opt, dtype=np.float64):
    w = tg.Variable(P0.astype(dtype))
    out = []
    for g in GRADS:
        opt.apply_gradients([(tg.constant(g.astype(dtype)), w)])
        out.append(w.numpy())
    return np.array(out)


def _sgd_reference(lr, momentum=0.0, nesterov=False):
    p, v, out = P0.copy(), np.zeros(3), []
    for g in GRADS:
        if momentum == 0:
            p = p - lr * g
        else:
            v = momentum * v - lr * g
            p = p + (momentum * v - lr * g if nesterov else v)
        out.append(p)
    return np.array(out)


@pytest.mark.parametrize("momentum,nesterov", [(0.0, False), (0.9, False), (0.9, True)])
def test_sgd_matches_keras_rule(momentum, nesterov):
    got = _run(tg.optimizers.SGD(0.1, momentum=momentum, nesterov=nesterov))
    np.testing.assert_allclose(got, _sgd_reference(0.1, momentum, nesterov), rtol=1e-13)


def test_adam_matches_keras_rule_with_bias_correction():
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-7
    p, m, v, want = P0.copy(), np.zeros(3), np.zeros(3), []
    for t, g in enumerate(GRADS, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        lr_t = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        p = p - lr_t * m / (np.sqrt(v) + eps)
        want.append(p)
    opt = tg.optimizers.Adam(lr)
    got = _run(opt)
    np.testing.assert_allclose(got, np.array(want), rtol=1e-12)
    # first step: bias correction makes the move lr * sign(g) (up to epsilon)
    np.testing.assert_allclose(got[0], P0 - lr * np.sign(GRADS[0]), rtol=1e-6)
    np.testing.assert_allclose(opt.get_slot(opt._slots[next(iter(opt._slots))][0], "m").numpy(),
                               m, rtol=1e-12)


def test_adam_amsgrad_keeps_the_largest_second_moment():
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-7
    p, m, v, vhat, want = P0.copy(), np.zeros(3), np.zeros(3), np.zeros(3), []
    for t, g in enumerate(GRADS, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vhat = np.maximum(vhat, v)
        p = p - lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(vhat) + eps)
        want.append(p)
    np.testing.assert_allclose(_run(tg.optimizers.Adam(lr, amsgrad=True)), want, rtol=1e-12)


@pytest.mark.parametrize("momentum,centered", [(0.0, False), (0.5, False), (0.0, True),
                                               (0.5, True)])
def test_rmsprop_matches_keras_rule(momentum, centered):
    lr, rho, eps = 0.01, 0.9, 1e-7
    p, s, a, mom, want = P0.copy(), np.zeros(3), np.zeros(3), np.zeros(3), []
    for g in GRADS:
        s = rho * s + (1 - rho) * g * g
        denom = s + eps
        if centered:
            a = rho * a + (1 - rho) * g
            denom = s - a * a + eps
        step = lr * g / np.sqrt(denom)
        if momentum:
            mom = momentum * mom + step
            p = p - mom
        else:
            p = p - step
        want.append(p)
    got = _run(tg.optimizers.RMSprop(lr, rho=rho, momentum=momentum, centered=centered))
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("make", [lambda: tg.optimizers.SGD(0.1, momentum=0.9),
                                  lambda: tg.optimizers.Adam(0.1),
                                  lambda: tg.optimizers.RMSprop(0.1, momentum=0.5)])
def test_float32_stays_float32(make):
    got = _run(make(), np.float32)
    assert got.dtype == np.float32


def test_none_gradient_is_skipped_with_a_warning_naming_the_variable():
    a = tg.Variable([1.0], name="used")
    b = tg.Variable([2.0], name="unused")
    opt = tg.optimizers.SGD(0.5)
    with pytest.warns(UserWarning, match=r"no gradient for variables \['unused'\]"):
        opt.apply_gradients(zip([tg.constant([1.0]), None], [a, b]))
    assert a.numpy()[0] == 0.5 and b.numpy()[0] == 2.0
    assert int(opt.iterations) == 1


def test_apply_gradients_checks_shapes_and_dtypes():
    w = tg.Variable([1.0, 2.0], name="w")
    opt = tg.optimizers.Adam()
    with pytest.raises(ValueError, match=r"gradient float32\[3\] for variable 'w' of "
                                         r"float32\[2\]"):
        opt.apply_gradients([(tg.ones(3), w)])
    with pytest.raises(ValueError, match="gradient float64"):
        opt.apply_gradients([(tg.ones(2, dtype=tg.float64), w)])


def test_schedules_and_callable_learning_rates():
    s = tg.optimizers.schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    assert s(0) == 0.1 and s(2) == pytest.approx(0.05) and s(1) == pytest.approx(0.1 / 2 ** 0.5)
    stair = tg.optimizers.schedules.ExponentialDecay(0.1, 2, 0.5, staircase=True)
    assert stair(1) == 0.1 and stair(3) == pytest.approx(0.05)
    w = tg.Variable([0.0])
    opt = tg.optimizers.SGD(s)
    for _ in range(4):
        opt.apply_gradients([(tg.constant([1.0]), w)])
    assert float(w.numpy()[0]) == pytest.approx(-sum(s(k) for k in range(4)), rel=1e-6)
    assert opt.learning_rate == pytest.approx(s(4))
    w2 = tg.Variable([0.0])
    seen = []
    opt2 = tg.optimizers.SGD(lambda step: seen.append(step) or 1.0 / (step + 1))
    for _ in range(3):
        opt2.apply_gradients([(tg.constant([1.0]), w2)])
    assert seen == [0, 1, 2]
    assert float(w2.numpy()[0]) == pytest.approx(-(1 + 1 / 2 + 1 / 3), rel=1e-6)
    pw = tg.optimizers.schedules.PiecewiseConstantDecay([1, 2], [1.0, 0.5, 0.1])
    assert [pw(k) for k in range(4)] == [1.0, 1.0, 0.5, 0.1]


def test_minimize_and_iterations():
    w = tg.Variable([3.0, -1.0])
    opt = tg.optimizers.SGD(0.25)
    for _ in range(20):
        loss = opt.minimize(lambda: tg.reduce_sum(w * w), [w])
    assert int(opt.iterations) == 20 and opt.iterations.dtype == tg.int64
    assert float(loss) < 1e-10
    with pytest.raises(TypeError, match="loss must be a callable"):
        opt.minimize(tg.constant(1.0), [w])


def test_updates_never_write_into_arrays_a_tape_holds():
    w = tg.Variable([2.0, 3.0])
    opt = tg.optimizers.SGD(0.1, momentum=0.9)
    with tg.GradientTape(persistent=True) as tape:
        y = tg.reduce_sum(w * w * w)
    before = tape.gradient(y, w).numpy()
    opt.apply_gradients([(tg.constant([1.0, 1.0]), w)])
    np.testing.assert_array_equal(tape.gradient(y, w).numpy(), before)  # saved values intact


def test_clipping_options():
    w = tg.Variable([0.0, 0.0])
    tg.optimizers.SGD(1.0, clipnorm=1.0).apply_gradients([(tg.constant([3.0, 4.0]), w)])
    np.testing.assert_allclose(w.numpy(), [-0.6, -0.8], rtol=1e-6)
    w = tg.Variable([0.0, 0.0])
    tg.optimizers.SGD(1.0, clipvalue=1.0).apply_gradients([(tg.constant([3.0, -0.5]), w)])
    np.testing.assert_allclose(w.numpy(), [-1.0, 0.5], rtol=1e-6)


class _FakeKernels:
    """A kernel table with the launch layer's optimizer signatures, computing with numpy."""

    def __init__(self):
        self.calls = []

    def sgd_update(self, p, g, v, lr, momentum=0.0, nesterov=False):
        self.calls.append("sgd")
        if v is None:
            p -= lr * g
            return
        v *= momentum
        v -= lr * g
        p += momentum * v - lr * g if nesterov else v

    def adam_update(self, p, g, m, v, lr_t, b1, b2, eps):
        self.calls.append("adam")
        m += (g - m) * (1 - b1)
        v += (g * g - v) * (1 - b2)
        p -= lr_t * m / (np.sqrt(v) + eps)


class _FakeBackend:
    name = "fake"
    short = "fake:0"
    device = "/device:FAKE:0"
    xp = np

    def __init__(self):
        self.kernels = _FakeKernels()

    def to_numpy(self, array):
        return np.asarray(array)


def test_fused_hook_runs_one_kernel_per_variable_and_matches_the_xp_rule():
    dev = _FakeBackend()
    for make, kind in [(lambda: tg.optimizers.SGD(0.1, momentum=0.9, nesterov=True), "sgd"),
                       (lambda: tg.optimizers.Adam(0.01), "adam")]:
        w = tg.Variable(P0)
        original = tg.Tensor(P0.copy(), dev)
        w._value = original
        opt = make()
        for g in GRADS:
            opt.apply_gradients([(tg.Tensor(g, dev), w)])
        assert dev.kernels.calls.count(kind) == len(GRADS)
        np.testing.assert_allclose(w.numpy(), _run(make())[-1], rtol=1e-12)
        np.testing.assert_array_equal(original.numpy(), P0)  # the old array was not written
    assert opt_base._fused_update("rmsprop", w, w._value._data, GRADS[0], [], {}) is None


def test_optimizer_arguments_are_checked():
    with pytest.raises(ValueError, match="momentum must be in"):
        tg.optimizers.SGD(momentum=1.5)
    with pytest.raises(ValueError, match="beta_1 must be in"):
        tg.optimizers.Adam(beta_1=1.0)
    with pytest.raises(TypeError, match="learning_rate must be"):
        tg.optimizers.SGD("fast")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tg.optimizers.SGD(0.1).apply_gradients([])


def test_fused_hook_with_the_emulated_cuda_kernels():
    try:
        from tapegpu.backends.kernels.launch import KernelSet
        kernels = KernelSet.emulated()
    except Exception as e:  # no C++ compiler for the emulator here
        pytest.skip(f"the CUDA emulator is unavailable: {e}")
    dev = _FakeBackend()
    dev.kernels = kernels
    for make in (lambda: tg.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
                 lambda: tg.optimizers.SGD(0.1), lambda: tg.optimizers.Adam(0.01)):
        w = tg.Variable(P0.astype(np.float32))
        w._value = tg.Tensor(P0.astype(np.float32), dev)
        opt = make()
        for g in GRADS:
            opt.apply_gradients([(tg.Tensor(g.astype(np.float32), dev), w)])
        np.testing.assert_allclose(w.numpy(), _run(make(), np.float32)[-1], rtol=1e-6,
                                   atol=1e-7)


_ALL = [lambda: tg.optimizers.SGD(0.1), lambda: tg.optimizers.SGD(0.1, momentum=0.9),
        lambda: tg.optimizers.Adam(0.1), lambda: tg.optimizers.Adam(0.1, amsgrad=True),
        lambda: tg.optimizers.RMSprop(0.1, momentum=0.5)]


@pytest.mark.parametrize("make", _ALL)
def test_float16_trains_alike_on_every_device(make):
    """float16 has no fused kernel: the array rule runs, on cpu as on cuda_emu."""
    got = _run(make(), np.float16)
    assert got.dtype == np.float16
    with tg.device("cpu"):
        want = _run(make(), np.float16)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("make", _ALL)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_variables_raise_naming_optimizer_and_variable(make, dtype):
    opt = make()
    w = tg.Variable(np.array([1, 2], dtype), name="counts")
    with pytest.raises(TypeError, match=rf"{opt.name}\.apply_gradients: variable 'counts' has "
                                        rf"dtype {np.dtype(dtype).name}.*floating"):
        opt.apply_gradients([(tg.constant(np.array([1, 1], dtype)), w)])
    np.testing.assert_array_equal(w.numpy(), [1, 2])
    assert w.dtype == tg.as_dtype(dtype)


@pytest.mark.parametrize("arg", ["clipnorm", "clipvalue", "global_clipnorm"])
def test_negative_clipping_thresholds_raise_at_construction(arg):
    for cls in (tg.optimizers.SGD, tg.optimizers.Adam, tg.optimizers.RMSprop):
        with pytest.raises(ValueError, match=rf"{cls.__name__}: {arg} must be >= 0.*got -1"):
            cls(**{arg: -1.0})
        with pytest.raises(TypeError, match=rf"{arg} must be a number"):
            cls(**{arg: "1"})
        cls(**{arg: 0.0})
