"""float32 tanh on numpy is correctly rounded: the CPU kernel (`_cpu.tanh32`, an AVX2+FMA loop
and a plain C one, each re-rounding near a midpoint from long double) and the numpy
computation it stands for (`kernels.tanh_float32` without the kernel) give the float nearest
the exact value, so the same bits; numpy's own float32 loop is one unit off on about a third
of its inputs. Every float32 was checked once against 200-bit values; here, specials, dense
ranges, the inputs whose double lies near a midpoint (the slow path) and every tail length."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.backends import cpu_kernels
from tapegpu.ops import kernels

SINGLE_DEVICE = True
F32 = np.float32
needs_kernel = pytest.mark.skipif(cpu_kernels is None, reason="the CPU kernels are not built")


def exact(x):
    """The correctly rounded float32 tanh: long double (64-bit significand on x86) rounded
    once; where long double is double, the double rounded (right but within a unit)."""
    return np.tanh(x.astype(np.longdouble)).astype(F32)


def kernel(x):
    out = np.empty_like(x)
    cpu_kernels.tanh32(x, out)
    return out


def by_numpy(x, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(kernels, "_TANH32", None)
        return kernels.tanh_float32(x)


def specials():
    tiny = np.float32(2.0 ** -12)
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754944e-38, 1e-8, tiny,
         np.nextafter(tiny, F32(0)), np.nextafter(tiny, F32(1)), 0.5, 1.0, 9.0, 9.010913,
         9.011, 20.0, 21.0, 3.4e38, -3.4e38]
    return np.array(v + [-a for a in v[2:]], F32)


def dense():
    """Consecutive floats where the algorithm changes: the tiny cut, the range reduction's
    first steps (|x| near ln2/4), saturation to 1, and one whole binade."""
    cuts = [2.0 ** -12, 0.1732868, 0.5198603, 9.010913]
    runs = [np.arange(F32(c).view(np.int32) - 4096, F32(c).view(np.int32) + 4096,
                      dtype=np.int32).view(F32) for c in cuts]
    binade = np.arange(F32(0.25).view(np.int32), F32(0.5).view(np.int32), 97,
                       dtype=np.int32).view(F32)
    x = np.concatenate(runs + [binade])
    return np.concatenate([x, -x])


def near_midpoints():
    """Inputs whose double tanh lies within 2^15 units of a float midpoint: the kernel's slow
    path (about one in 8,000)."""
    x = np.arange(F32(0.25).view(np.int32), F32(2.0).view(np.int32),
                  dtype=np.int32).view(F32)
    t = np.tanh(x.astype(np.float64)).view(np.int64) & ((1 << 29) - 1)
    return x[np.abs(t - (1 << 28)) < (1 << 15)]


@needs_kernel
@pytest.mark.parametrize("inputs", [specials, dense, near_midpoints])
def test_the_kernel_is_correctly_rounded(inputs):
    x = inputs()
    assert x.size
    np.testing.assert_array_equal(kernel(x), exact(x))
    nan = np.isnan(x)
    assert np.array_equal(np.signbit(kernel(x))[~nan], np.signbit(x)[~nan])  # -0.0, -1.0


def test_the_numpy_computation_is_correctly_rounded(monkeypatch):
    x = np.concatenate([specials(), dense(), near_midpoints()[:2000]])
    np.testing.assert_array_equal(by_numpy(x, monkeypatch), exact(x))


@needs_kernel
def test_kernel_and_numpy_agree_on_random_floats_and_every_tail(monkeypatch):
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(30000) * s for s in (0.01, 1.0, 4.0)]).astype(F32)
    assert np.array_equal(kernel(x).view(np.int32), by_numpy(x, monkeypatch).view(np.int32))
    for n in range(1, 11):  # 4 lanes at a time, the rest by the plain loop
        part = x[:n].copy()
        np.testing.assert_array_equal(kernel(part), exact(part))


def test_tg_tanh_float32_is_the_correctly_rounded_value_on_every_path(monkeypatch):
    """Eager (contiguous or not, 0-d, empty), traced over several calls, and bias_act."""
    rng = np.random.default_rng(4)
    f = tg.function(lambda v: tg.tanh(v))
    for scale in (0.3, 2.0, 7.0):
        x = (rng.standard_normal((33, 17)) * scale).astype(F32)
        want = exact(x)
        np.testing.assert_array_equal(tg.tanh(tg.constant(x)).numpy(), want)
        np.testing.assert_array_equal(f(tg.constant(x)).numpy(), want)
        np.testing.assert_array_equal(tg.tanh(tg.constant(x.T)).numpy(), want.T)  # a view
        b = (rng.standard_normal(17) * scale).astype(F32)
        np.testing.assert_array_equal(tg.nn.bias_act(tg.constant(x), tg.constant(b),
                                                     "tanh").numpy(), exact(x + b))
    np.testing.assert_array_equal(tg.tanh(tg.constant(F32(0.75))).numpy(), exact(F32(0.75)))
    assert tg.tanh(tg.constant(np.zeros((0, 3), F32))).shape == (0, 3)


def test_the_gradient_follows_the_rounded_output():
    """tanh' = 1 - tanh^2 from the saved (correctly rounded) output, as the rule states."""
    x = np.linspace(-3, 3, 41).astype(F32)
    xt = tg.constant(x)
    with tg.GradientTape() as tape:
        tape.watch(xt)
        y = tg.tanh(xt)
    g = tape.gradient(y, xt).numpy()
    t = exact(x)
    np.testing.assert_array_equal(g, F32(1) * (F32(1) - t * t))


@needs_kernel
def test_the_kernel_checks_its_arguments():
    x = np.ones(4, F32)
    with pytest.raises(TypeError, match="tanh32"):
        cpu_kernels.tanh32(x.astype(np.float64), np.empty(4))
    with pytest.raises(TypeError, match="tanh32"):
        cpu_kernels.tanh32(x, np.empty(3, F32))
    with pytest.raises(TypeError):
        cpu_kernels.tanh32(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_traced_tanh_writes_into_the_plans_buffers(dtype, monkeypatch):
    """tg.function's plan writes tanh (a new array, never a view) into its reused buffers, as
    it did when tanh was numpy's ufunc, with the eager bits over several calls."""
    from tapegpu.function import graph
    monkeypatch.setattr(graph, "POOL_BYTES", 0)
    rng = np.random.default_rng(5)
    w = tg.constant(rng.standard_normal((8, 8)).astype(dtype))

    def f(x):
        return tg.reduce_sum(tg.tanh(tg.matmul(x, w)) * 3.0, axis=0)
    traced = tg.function(f)
    for scale in (0.2, 1.0, 5.0):
        x = tg.constant((rng.standard_normal((40, 8)) * scale).astype(dtype))
        np.testing.assert_array_equal(traced(x).numpy(), f(x).numpy())
    plan = traced.get_concrete_function(x)._plan
    steps = [(n.op.name, buf) for (_, _, _, _, _, _, buf), n in zip(plan.steps,
                                                                     plan.step_nodes)
             if n.kind == "op"]
    assert ("tanh", None) not in steps and any(name == "tanh" for name, _ in steps)
