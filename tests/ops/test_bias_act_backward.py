"""A Dense layer's epilogues: `matmul` then `bias_act` forward (one GEMM, one kernel on a GPU),
and `bias_act`'s backward as one kernel giving both cotangents (the bias's summed over the
rows) before the two GEMMs. Checked on every device against float64 references and finite
differences, with NaNs, empty batches, batched and forward-mode derivatives, higher order,
tg.function, and the launches a step takes where the device counts them."""

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.testing.launches import launches_of
from tapegpu.ops.nn import bias_activations
from tapegpu.backends.kernels.launch import ACTIVATIONS

ACTS = [a for a in ("relu", "tanh", "sigmoid", "elu") if a in bias_activations()]
REF = {"relu": lambda z: np.maximum(z, 0), "tanh": np.tanh,
       "sigmoid": lambda z: 1 / (1 + np.exp(-z)),
       "elu": lambda z: np.where(z > 0, z, np.expm1(np.minimum(z, 0)))}
# rows: one share of rows per column (<= 16), several shares (the launch's last block adds
# them), and a rank-3 input (rows = 2 * 15)
SHAPES = [(5, 7), (40, 9), (2, 15, 6)]


def _rand(shape, seed, dtype=np.float64, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def _dense(act, x, w, b):
    return tg.nn.bias_act(tg.matmul(x, w) if x.ndim == 2 else tg.einsum("...i,ij->...j", x, w),
                          b, act)


def _grads(act, x, w, b, u):
    """(dx, dw, db) of <u, act(x w + b)> by the tape."""
    ts = [tg.constant(a) for a in (x, w, b)]
    with tg.GradientTape() as tape:
        tape.watch(ts)
        y = _dense(act, *ts)
    return [g.numpy() for g in tape.gradient(y, ts, output_gradients=tg.constant(u))]


def _reference_grads(act, x, w, b, u):
    """The same in float64 numpy: z = x w + b, dz = u act'(z)."""
    z = x.astype(np.float64) @ w + b
    h = 1e-7
    dz = u * (REF[act](z + h) - REF[act](z - h)) / (2 * h) if act != "relu" else u * (z > 0)
    rows = dz.reshape(-1, dz.shape[-1])
    return (dz @ w.T, x.reshape(-1, x.shape[-1]).T @ rows, rows.sum(0))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("act", ACTS)
def test_gradients_match_float64_reference(act, shape):
    x, w, b = _rand(shape, 0), _rand((shape[-1], 4), 1), _rand((4,), 2)
    u = _rand(shape[:-1] + (4,), 3)
    for dtype, tol in ((np.float64, 1e-6), (np.float32, 1e-4)):
        got = _grads(act, x.astype(dtype), w.astype(dtype), b.astype(dtype), u.astype(dtype))
        want = _reference_grads(act, x, w, b, u)
        for g, r in zip(got, want):
            assert g.dtype == dtype
            np.testing.assert_allclose(g, r, rtol=tol, atol=tol)


@pytest.mark.parametrize("act", ACTS)
def test_vjp_matches_central_differences(act):
    x, w, b = _rand((40, 5), 0), _rand((5, 3), 1), _rand((3,), 2)
    u = _rand((40, 3), 3)
    grads = _grads(act, x, w, b, u)
    vs = [_rand(a.shape, 10 + i) for i, a in enumerate((x, w, b))]
    h = 1e-6

    def f(s):
        return _dense(act, *[tg.constant(a + s * v) for a, v in zip((x, w, b), vs)]).numpy()
    fd = np.sum(u * (f(h) - f(-h)) / (2 * h))
    assert sum(np.sum(g * v) for g, v in zip(grads, vs)) == pytest.approx(fd, rel=1e-6)


@pytest.mark.parametrize("act", ACTS)
def test_nan_in_stays_nan_out(act):
    """A NaN in an input row gives NaN in that row's output and in the bias gradient; the
    other rows and columns stay finite (relu(NaN) is NaN, as TensorFlow's)."""
    x, w, b = _rand((30, 4), 0), _rand((4, 3), 1), _rand((3,), 2)
    x[7, 1] = np.nan
    y = _dense(act, tg.constant(x), tg.constant(w), tg.constant(b)).numpy()
    assert np.isnan(y[7]).all() and np.isfinite(np.delete(y, 7, 0)).all()
    u = np.ones((30, 3))
    u[11, 2] = np.nan  # a NaN cotangent reaches the bias gradient of its column
    dx, dw, db = _grads(act, np.where(np.isnan(x), 0.0, x), w, b, u)
    assert np.isnan(db[2]) and np.isfinite(db[:2]).all()
    assert np.isnan(dx[11]).any() and np.isfinite(np.delete(dx, 11, 0)).all()


@pytest.mark.parametrize("act", ACTS)
def test_empty_batch(act):
    x, w, b = np.zeros((0, 4)), _rand((4, 3), 1), _rand((3,), 2)
    y = _dense(act, tg.constant(x), tg.constant(w), tg.constant(b))
    assert y.shape == (0, 3)
    dx, dw, db = _grads(act, x, w, b, np.zeros((0, 3)))
    assert dx.shape == (0, 4) and not dw.any() and db.shape == (3,) and not db.any()


@pytest.mark.parametrize("act", ACTS)
def test_jacobians_are_stacked_vjps_and_jvps(act):
    """tape.jacobian (batched VJPs), one VJP per output element, and forward mode agree."""
    x, w, b = (tg.constant(a) for a in (_rand((20, 3), 0), _rand((3, 2), 1), _rand((2,), 2)))
    with tg.GradientTape(persistent=True) as tape:
        tape.watch([x, b])
        y = _dense(act, x, w, b)
    jb = tape.jacobian(y, b).numpy()
    jx = tape.jacobian(y, x).numpy()
    loop = tape.jacobian(y, b, experimental_use_pfor=False).numpy()
    np.testing.assert_allclose(jb, loop, rtol=1e-12, atol=1e-12)
    tb = _rand((2,), 5)
    with tg.autodiff.ForwardAccumulator(b, tg.constant(tb)) as acc:
        yf = _dense(act, x, w, b)
    np.testing.assert_allclose(acc.jvp(yf).numpy(), jb @ tb, rtol=1e-12, atol=1e-12)
    bj = tape.batch_jacobian(y, x).numpy()
    np.testing.assert_allclose(bj, np.einsum("ajak->ajk", jx), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_gradient_of_gradient(act):
    """Second order through a Dense layer: the recorded backward is the rule's ops, so its
    gradient equals the one through the unfused ops."""
    x, w, b = (tg.constant(a) for a in (_rand((24, 3), 0), _rand((3, 2), 1), _rand((2,), 2)))
    unfused = {"tanh": tg.tanh, "sigmoid": tg.sigmoid}[act]

    def second(f):
        with tg.GradientTape() as outer:
            outer.watch([w, b])
            with tg.GradientTape() as inner:
                inner.watch([w, b])
                y = tg.reduce_sum(f() ** 2)
            gw, gb = inner.gradient(y, [w, b])
            s = tg.reduce_sum(gw * gw) + tg.reduce_sum(gb * gb)
        return [g.numpy() for g in outer.gradient(s, [w, b])]
    got = second(lambda: _dense(act, x, w, b))
    want = second(lambda: unfused(tg.matmul(x, w) + b))
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12)


def test_traced_equals_eager_over_calls():
    layer = tg.keras.layers.Dense(5, activation="relu", dtype="float64")

    def step(x):
        with tg.GradientTape() as tape:
            y = layer(x)
            loss = tg.reduce_sum(y * y)
        return tape.gradient(loss, layer.trainable_variables)
    traced = tg.function(step)
    for seed in range(3):
        x = tg.constant(_rand((33, 4), seed, scale=2.0))
        for e, t in zip(step(x), traced(x)):
            np.testing.assert_allclose(t.numpy(), e.numpy(), rtol=1e-12, atol=1e-12)


def _launches(fn):
    return launches_of(tg.constant(0.0)._dev, fn)


@pytest.mark.parametrize("rows", [8, 300])
@pytest.mark.parametrize("act", ["relu", "tanh"])
def test_dense_launches(act, rows):
    """Where the device counts launches: a Dense layer's forward is one GEMM and one kernel
    (bias + activation), its backward one kernel (the activation's backward and the bias
    gradient) and the two GEMMs."""
    if not tg.constant(0.0)._dev.counts_launches:
        pytest.skip("the device counts no launches")
    assert act in ACTIVATIONS
    layer = tg.keras.layers.Dense(16, activation=act)
    x = tg.constant(_rand((rows, 8), 0, np.float32))
    layer(x)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y, fwd = _launches(lambda: layer(x))
    grads, bwd = _launches(lambda: tape.gradient(y, [x] + layer.trainable_variables,
                                                 output_gradients=tg.ones_like(y)))
    assert fwd == {"matmul": 1, f"tapegpu_bias_{act}_fwd_f32": 1}
    assert bwd == {f"tapegpu_bias_{act}_bwd_f32": 1, "matmul.vjp": 2}
    z = x.numpy().astype(np.float64) @ layer.kernel.numpy() + layer.bias.numpy()
    dz = (z > 0) * 1.0 if act == "relu" else 1 - np.tanh(z) ** 2
    np.testing.assert_allclose(grads[2].numpy(), dz.sum(0), rtol=1e-5)
