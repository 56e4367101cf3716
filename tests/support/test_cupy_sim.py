"""The CuPy stand-in refuses what CuPy refuses, and tapegpu's cuda path keeps CuPy's contract.

Part 1 seeds GPU-only bug patterns as small functions of an array module `xp`: each works with
numpy and fails with the stand-in, as it would on a GPU. Part 2 runs tapegpu on the `cuda`
backend with the stand-in as CuPy (the `sim` fixture, whatever `--device` says): one test per
GPU-only bug fixed in tapegpu.
"""
import importlib.util
import os

import numpy as np
import pytest

import cupy_sim
import tapegpu as tg
from tapegpu import backends as backend
from tapegpu.backends import checks
from tapegpu.optimizers import levenberg_marquardt as lm_module

SINGLE_DEVICE = True


@pytest.fixture
def cp():
    """The stand-in's cupy module, without touching sys.modules."""
    return cupy_sim.build()["cupy"]


@pytest.fixture
def sim(cupy_gpu):
    """tapegpu's gpu:0 with the stand-in as CuPy (tests/conftest.py), for the test."""
    with tg.device("gpu:0"):
        yield cupy_gpu


# -- part 1: the stand-in rejects what CuPy rejects ------------------------------------------

def test_implicit_host_conversion_raises_and_explicit_ones_count(cp):
    a = cp.arange(3.0)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(a)
    cupy_sim.stats.reset()
    assert cp.asnumpy(a).tolist() == [0.0, 1.0, 2.0]
    assert a.get().tolist() == [0.0, 1.0, 2.0]
    assert float(a.sum()) == 3.0 and bool(a[1])
    sites = [s for s in cupy_sim.stats.syncs if "test_cupy_sim.py" in s]
    assert sum(cupy_sim.stats.syncs[s] for s in sites) == 4
    assert sum(n for (d, s), n in cupy_sim.stats.transfers.items() if d == "d2h") == 4


def test_numpy_operands_and_numpy_only_names_are_refused(cp):
    a = cp.ones(3)
    with pytest.raises(TypeError, match="Unsupported type"):
        a + np.ones(3)
    with pytest.raises(TypeError):
        np.ones(3) + a
    with pytest.raises(TypeError, match="Unsupported type"):
        cp.exp(np.ones(3))
    for name in ("asmatrix", "seterr", "errstate", "nditer", "frompyfunc"):
        assert not hasattr(cp, name), name
    assert np.exp(a).__class__ is cp.ndarray  # numpy's functions dispatch to CuPy's


def test_results_are_zero_d_arrays_and_indices_wrap(cp):
    a = cp.arange(3.0)
    assert isinstance(a.sum(), cp.ndarray) and a.sum().shape == ()
    assert isinstance(a[1], cp.ndarray)
    assert a[cp.asarray([1, 3])].get().tolist() == [1.0, 0.0]   # numpy raises IndexError
    assert cp.take(a, cp.asarray([-4])).get().tolist() == [2.0]


def test_linalg_never_raises_and_solve_does_not_broadcast(cp):
    assert bool(cp.isnan(cp.linalg.inv(cp.ones((2, 2)))).all())
    assert bool(cp.isnan(cp.linalg.solve(cp.ones((2, 2)), cp.ones((2, 1)))).all())
    L = cp.linalg.cholesky(cp.asarray(np.array([[1.0, 2.0], [2.0, 1.0]])))
    assert L.get().tolist() == [[1.0, 0.0], [2.0, -3.0]]  # potrf's partial factor
    with pytest.raises(ValueError, match="must have"):
        cp.linalg.solve(cp.ones((2, 3, 3)), cp.ones((3, 1)))
    with pytest.raises(TypeError, match="cupy_mean"):
        cp.mean(cp.ones(2, dtype=np.int32), dtype=np.int32)


def test_raw_module_runs_kernels_in_the_emulator(cp):
    mod = cp.RawModule(code='extern "C" __global__ void twice(const double* x, double* y, '
                            'long long n) { long long i = blockIdx.x * blockDim.x + '
                            'threadIdx.x; if (i < n) y[i] = 2 * x[i]; }', options=("-std=c++17",))
    x, y = cp.arange(5.0), cp.empty(5)
    mod.get_function("twice")((1,), (32,), (x, y, np.int64(5)))
    assert y.get().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert cp.cuda.runtime.getDeviceCount() == 1
    with cp.cuda.Device(0):
        cp.cuda.Stream.null.synchronize()


# Known GPU-only bug patterns: each returns what the caller expects and works with numpy.

def _to_host_implicitly(xp):
    return np.asarray(xp.arange(3.0)).sum()


def _repeated_index_scatter(xp):
    idx = xp.asarray(np.array([0, 0, 1]))
    out = xp.zeros(2)
    if isinstance(idx, np.ndarray):   # "is it an index array?": False for device arrays
        np.add.at(out, idx, 1.0)
    else:
        out[idx] = 1.0                # duplicates lost
    return out


def _batch_broadcast_solve(xp):
    return xp.linalg.solve(xp.eye(3) * 2.0, xp.ones((2, 3, 1)))


def _singular_check_by_exception(xp):
    try:
        xp.linalg.inv(xp.ones((2, 2)))
    except np.linalg.LinAlgError:
        return "singular"
    return "inverted"


def _host_operand(xp):
    return xp.arange(3.0) + np.ones(3)


def _integer_mean(xp):
    return xp.mean(xp.asarray(np.array([1, 2, 4])), dtype=np.int64)


def _out_of_range_index_raises(xp):
    try:
        xp.arange(3)[xp.asarray(np.array([3]))]
    except IndexError:
        return "raised"
    return "wrapped"


def _scalar_as_python_index(xp):
    return [10, 20, 30][xp.argmax(xp.asarray(np.array([1, 5, 2])))]


def _numpy_only_name(xp):
    with xp.errstate(divide="ignore"):
        return xp.log(xp.zeros(1))


SEEDED = {
    _to_host_implicitly: 3.0,
    _repeated_index_scatter: [2.0, 1.0],
    _batch_broadcast_solve: np.full((2, 3, 1), 0.5),
    _singular_check_by_exception: "singular",
    _host_operand: [1.0, 2.0, 3.0],
    _integer_mean: 2,
    _out_of_range_index_raises: "raised",
    _scalar_as_python_index: 20,
    _numpy_only_name: [-np.inf],
}


def _host(v, cp):
    return cp.asnumpy(v) if isinstance(v, cp.ndarray) else v


@pytest.mark.parametrize("fn", list(SEEDED), ids=lambda f: f.__name__.strip("_"))
def test_seeded_gpu_only_bug_fails_only_on_the_stand_in(fn, cp):
    expected = SEEDED[fn]
    got = fn(np)
    if isinstance(expected, str):
        assert got == expected
    else:
        np.testing.assert_array_equal(np.asarray(got), expected)
    try:
        got = _host(fn(cp), cp)
    except (TypeError, ValueError, AttributeError):
        return  # refused, as CuPy refuses it
    if isinstance(expected, str):
        assert got != expected
    else:
        assert not np.array_equal(np.asarray(got), expected)


def test_float_sums_add_in_a_gpu_reductions_order_not_numpys(cp):
    """CuPy's sum gives each result to a block of threads (strided shares, then a tree), so
    its bits are not numpy's (the rows in order); the stand-in's are not either, so code that
    needs one order of its sums shows it on cuda_sim (a traced step's bias gradient did)."""
    x = np.random.default_rng(0).standard_normal((64, 33)).astype(np.float32)
    got = cp.sum(cp.asarray(x), axis=0).get()
    assert got.tobytes() != x.sum(axis=0).tobytes()
    np.testing.assert_allclose(got, x.sum(axis=0), rtol=1e-5, atol=1e-5)
    assert cp.asarray(x).sum(axis=0).get().tobytes() == got.tobytes()   # the method too
    two = x[:2]   # two elements per result: one order only
    assert cp.sum(cp.asarray(two), axis=0).get().tobytes() == two.sum(axis=0).tobytes()
    assert cp.sum(cp.asarray(x), axis=(0, 1), keepdims=True).shape == (1, 1)
    ints = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(cp.sum(cp.asarray(ints), axis=0).get(), ints.sum(axis=0))


def test_reduce_sum_on_a_gpu_adds_the_rows_in_order_as_the_eager_sweep(sim):
    """reduce_sum over at most IN_ORDER_ROWS rows per result takes the un-broadcast kernel
    (the eager sweep's sum of a bias's cotangent), numpy's bits; over more, CuPy's sum."""
    from tapegpu.ops import reduce as reduce_ops
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 33)).astype(np.float32)
    assert tg.reduce_sum(tg.constant(x), axis=0).numpy().tobytes() == \
        x.sum(axis=0).tobytes()
    y = rng.standard_normal((4, 6, 3))
    assert tg.reduce_sum(tg.constant(y), axis=[0, 1], keepdims=True).numpy().tobytes() == \
        y.sum(axis=(0, 1), keepdims=True).tobytes()
    tall = rng.standard_normal((reduce_ops.IN_ORDER_ROWS + 1, 2)).astype(np.float32)
    np.testing.assert_allclose(tg.reduce_sum(tg.constant(tall), axis=0).numpy(),
                               tall.sum(axis=0), rtol=1e-4)


def test_scatter_max_and_min_are_cupys_atomics(cp):
    """CuPy's maximum.at/minimum.at: fmaxf/fminf in a CAS loop (float64 rounded to float32, NaN
    skipped), no 8/16-bit integer loop; ufunc.at only for the scatter ufuncs."""
    out = cp.full(2, -1e300)
    cp.maximum.at(out, cp.asarray(np.array([0, 0, 1])),
                  cp.asarray(np.array([1.2530809568010897, np.nan, 0.5])))
    assert out.get().tolist() == [float(np.float32(1.2530809568010897)), 0.5]
    with pytest.raises(TypeError, match="maximum.at only supports"):
        cp.maximum.at(cp.zeros(2, dtype=np.int8), cp.asarray(np.array([0])), 1)
    with pytest.raises(NotImplementedError, match="power.at"):
        cp.power.at(cp.zeros(2), cp.asarray(np.array([0])), 2.0)


def test_a_zero_fill_is_a_memset_that_drops_the_sign(cp):
    a = cp.ones(2)
    a.fill(-0.0)
    for got in (a, cp.full(2, -0.0), cp.asarray(-0.0), cp.asarray(np.float32(-0.0))):
        assert not np.signbit(got.get()).any()
    assert np.signbit(cp.asarray(np.array([-0.0])).get()).all()  # copied byte for byte


def test_svd_of_a_non_finite_matrix_is_partly_finite(cp):
    x = np.eye(3)
    x[0, 0] = np.nan
    s = cp.linalg.svd(cp.asarray(x), compute_uv=False).get()
    assert np.isnan(s).any() and not np.isnan(s).all()


def test_dlpack_exports_the_device_buffer(cp):
    a = cp.arange(3.0)
    with pytest.raises((BufferError, RuntimeError), match="Unsupported device"):
        np.from_dlpack(a)  # numpy reads host memory only
    host = np.from_dlpack(a, device="cpu")  # a copy, as CuPy's CPU export
    host[0] = 7.0
    back = cp.from_dlpack(a.toDlpack())  # the same buffer
    back[1] = 5.0
    assert a.get().tolist() == [0.0, 5.0, 2.0]


# -- part 2: tapegpu's cuda path under the stand-in -------------------------------------------

def test_gather_gradient_adds_repeated_indices(sim):
    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.reduce_sum(tg.gather(x, [0, 0, 2, 0]))
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [3.0, 0.0, 1.0])


def test_repeat_and_device_index_gradients_add_up(sim):
    x = tg.constant([1.0, 2.0])
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        r = tg.repeat(x, [3, 1])
        g = tg.gather(x, sim.asarray(np.array([1, 1])))
    np.testing.assert_array_equal(tape.gradient(r, x).numpy(), [3.0, 1.0])
    np.testing.assert_array_equal(tape.gradient(g, x).numpy(), [0.0, 2.0])


def test_solve_broadcasts_batch_axes(sim):
    a = tg.constant(np.eye(3) * 2.0)
    b = tg.constant(np.ones((2, 2, 3, 1)))
    with tg.GradientTape() as tape:
        tape.watch([a, b])
        x = tg.linalg.solve(a, b)
    np.testing.assert_allclose(x.numpy(), np.full((2, 2, 3, 1), 0.5))
    ga, gb = tape.gradient(x, [a, b])
    assert ga.shape == (3, 3) and gb.shape == (2, 2, 3, 1)
    np.testing.assert_allclose(gb.numpy(), np.full((2, 2, 3, 1), 0.5))


@pytest.mark.parametrize("call, message", [
    (lambda: tg.linalg.inv(tg.ones((2, 2))), "^inv: Singular matrix"),
    (lambda: tg.linalg.solve(tg.ones((2, 2)), tg.ones((2, 1))), "^solve: Singular matrix"),
    (lambda: tg.linalg.cholesky(tg.constant([[1.0, 2.0], [2.0, 1.0]])),
     "^cholesky: the matrix is not positive definite"),
    (lambda: tg.linalg.cholesky(tg.constant([[[4.0, 0.0], [0.0, 1.0]],
                                             [[1.0, 0.0], [0.0, -1.0]]])),
     "^cholesky: the matrix is not positive definite"),
])
def test_linalg_raises_as_on_the_cpu(sim, call, message):
    with pytest.raises(tg.InvalidArgumentError, match=message):
        call()
    with tg.device("cpu"):
        with pytest.raises(tg.InvalidArgumentError, match=message):
            call()


def test_linalg_checks_cost_one_sync_and_nan_input_passes_through(sim):
    a = tg.constant(np.eye(2) * 2.0)
    cupy_sim.stats.reset()
    tg.linalg.inv(a)
    syncs = cupy_sim.stats.sites("tapegpu/ops/linalg.py")
    assert sum(syncs.values()) == 1, syncs
    out = tg.linalg.inv(tg.constant([[np.nan, 0.0], [0.0, 1.0]]))  # LAPACK does not raise
    assert np.isnan(out.numpy()).any()


def test_compute_gradient_on_a_gpu(sim):
    theo, num = tg.test.compute_gradient(lambda a, b: tg.matmul(a, b),
                                         [np.ones((2, 3)), np.arange(12.0).reshape(3, 4)])
    np.testing.assert_allclose(theo[0], num[0], rtol=1e-6)
    tg.test.check_gradients(tg.sin, [np.array([0.3, 0.8])], order=2)


def test_tensors_from_device_arrays_own_their_buffer(sim):
    a = sim.arange(3.0)
    t, t64, v = tg.constant(a), tg.constant(a, dtype=tg.float64), tg.Variable(a)
    t32 = tg.constant(a, dtype=tg.float32)
    a[0] = 42.0
    for x in (t, t64, v, t32):
        assert x.numpy().tolist() == [0.0, 1.0, 2.0]
    with tg.device("cpu"):
        c = tg.constant(a)  # an explicit copy to the host
    assert c.device.endswith("CPU:0") and c.numpy().tolist() == [42.0, 1.0, 2.0]


def test_getitem_with_a_device_index_array(sim):
    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.reduce_sum(x[sim.asarray(np.array([2, 2]))])
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [0.0, 0.0, 2.0])


def test_integer_reduce_mean_truncates_as_on_the_cpu(sim):
    for vals, dt in (([1, 2], tg.int32), ([-3, -4], tg.int64), ([100, 100], tg.int8)):
        got = tg.reduce_mean(tg.constant(vals, dtype=dt))
        with tg.device("cpu"):
            want = tg.reduce_mean(tg.constant(vals, dtype=dt))
        assert got.dtype == want.dtype and got.numpy() == want.numpy(), vals


def test_optimizer_iterations_live_on_the_variables_device(sim):
    v = tg.Variable(tg.ones((2, 2)))
    opt = tg.optimizers.Adam(0.1)
    opt.apply_gradients([(tg.ones((2, 2)), v)])
    assert isinstance(opt.iterations._value._data, sim.ndarray)
    assert int(opt.iterations) == 1


@pytest.mark.parametrize("device", ["gpu:0", "cuda_emu", "cpu"])
@pytest.mark.parametrize("make", [lambda: tg.optimizers.Adam(0.1),
                                  lambda: tg.optimizers.SGD(0.1, momentum=0.9)],
                         ids=["adam", "momentum"])
def test_fused_updates_accept_a_fortran_order_variable(sim, device, make):
    with tg.device(device):
        xp = backend.lookup(device).xp
        v = tg.Variable(xp.asfortranarray(xp.ones((2, 3))))
        make().apply_gradients([(tg.ones((2, 3), dtype=tg.float64), v)])
        assert v.numpy().max() < 1.0


# -- no host syncs in a training step ---------------------------------------------------------

def _h2d(stats):
    return {site: n for (direction, site), n in stats.transfers.items() if direction == "h2d"}


def _mlp_step(seed=0):
    rng = np.random.default_rng(seed)
    x = tg.constant(rng.normal(size=(32, 8)).astype(np.float32))
    y = tg.constant(rng.integers(0, 4, size=32))
    layers = [tg.layers.Dense(16, activation="gelu"), tg.layers.Dropout(0.5),
              tg.layers.Dense(4)]
    loss_fn = tg.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt = tg.optimizers.Adam(0.05)

    def step():
        with tg.GradientTape() as tape:
            h = layers[1](layers[0](x), training=True)
            loss = loss_fn(y, layers[2](h))
        variables = [v for layer in layers for v in layer.trainable_variables]
        grads, _ = tg.clip_by_global_norm(tape.gradient(loss, variables), 1.0)
        opt.apply_gradients(zip(grads, variables))
        return loss, opt
    return step


def test_a_training_step_makes_no_host_sync_and_no_upload(sim):
    """Dense layers, dropout, sparse cross-entropy, clipping by global norm, Adam: after a
    warm-up step (slots, the device generator, kernels), a step reads nothing from the device
    and copies nothing to it."""
    tg.random.set_seed(1)
    step = _mlp_step()
    first, _ = step()
    cupy_sim.stats.reset()
    losses = [step()[0] for _ in range(3)]
    assert dict(cupy_sim.stats.syncs) == {}, cupy_sim.stats.syncs
    assert _h2d(cupy_sim.stats) == {}, cupy_sim.stats.transfers
    opt = step()[1]
    assert int(opt.iterations) == 5
    assert all(np.isfinite(float(v)) for v in losses) and float(losses[-1]) < float(first)


def test_device_checks_are_read_at_the_next_host_read(sim):
    logits = tg.zeros((2, 3))
    labels = tg.constant([0, 7])
    cupy_sim.stats.reset()
    loss = tg.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    idx = tg.gather(tg.zeros(3), tg.constant([1, -4]))
    assert dict(cupy_sim.stats.syncs) == {} and checks.pending() == 2
    with pytest.raises(tg.InvalidArgumentError,
                       match="sparse_softmax_cross_entropy_with_logits: label 7 is out of range"):
        idx.numpy()  # any read reports the first failed check, once
    assert checks.pending() == 0 and idx.numpy().shape == (2,)
    assert np.isnan(loss.numpy()[1]) and np.isfinite(loss.numpy()[0])  # as TF's GPU kernel
    tg.gather(tg.zeros(3), tg.constant([5]))
    with pytest.raises(tg.InvalidArgumentError,
                       match=r"gather: indices\[0\] = 5 is not in \[0, 3\)"):
        float(tg.reduce_sum(logits))


def test_device_checks_in_sync_mode_raise_at_the_op(sim, monkeypatch):
    monkeypatch.setattr(checks, "SYNC", True)
    with pytest.raises(tg.InvalidArgumentError, match="label 3 is out of range"):
        tg.nn.sparse_softmax_cross_entropy_with_logits(labels=[3], logits=tg.zeros((1, 3)))
    with pytest.raises(tg.InvalidArgumentError, match="received a label value of -1"):
        tg.losses.sparse_categorical_crossentropy([-1], tg.zeros((1, 3)), from_logits=True)
    assert checks.pending() == 0


def test_device_checks_queue_is_bounded(sim, monkeypatch):
    monkeypatch.setattr(checks, "LIMIT", 4)
    cupy_sim.stats.reset()
    for _ in range(10):
        tg.gather(tg.zeros(3), tg.constant([1]))
    assert checks.pending() <= 4
    assert sum(cupy_sim.stats.sites("tapegpu/backends/checks.py").values()) == 2


def test_dropout_masks_are_drawn_on_the_device(sim):
    x = tg.ones((64, 64))
    tg.gather(x, tg.constant([0]))
    cupy_sim.stats.reset()
    a, b = tg.nn.dropout(x, 0.5), tg.nn.dropout(x, 0.5)
    s1, s2 = tg.nn.dropout(x, 0.5, seed=3), tg.nn.dropout(x, 0.5, seed=3)
    assert _h2d(cupy_sim.stats) == {} and dict(cupy_sim.stats.syncs) == {}
    a, b, s1, s2 = (t.numpy() for t in (a, b, s1, s2))
    assert set(np.unique(a)) == {0.0, 2.0} and 0.4 < (a == 0).mean() < 0.6
    assert (a != b).any() and (s1 != s2).any()  # an op seed is a stream (TensorFlow's)
    tg.random.set_seed(7)
    c = tg.nn.dropout(x, 0.5).numpy()
    tg.random.set_seed(7)
    assert (tg.nn.dropout(x, 0.5).numpy() == c).all()
    u = tg.random.uniform((1000,), minval=2.0, maxval=3.0, dtype=tg.float16)
    assert u.dtype == tg.float16 and 2.0 <= float(tg.reduce_min(u)) <= float(tg.reduce_max(u)) <= 3.0


def test_global_clipnorm_reads_no_norm_on_the_host(sim):
    v = tg.Variable([3.0, 4.0])
    opt = tg.optimizers.SGD(1.0, global_clipnorm=1.0)
    cupy_sim.stats.reset()
    opt.apply_gradients([(tg.constant([3.0, 4.0]), v)])
    assert sum(cupy_sim.stats.sites("tapegpu/optimizers").values()) == 0
    np.testing.assert_allclose(v.numpy(), [2.4, 3.2], rtol=1e-6)
    assert v.dtype == tg.float32


# -- Levenberg–Marquardt under CuPy's never-raising linalg ------------------------------------

def test_lm_refuses_cupys_partial_cholesky_factor(sim):
    """CuPy's cholesky of an indefinite matrix returns potrf's partial factor, finite here: the
    damped solve must see it from the factor's diagonal, not from an exception or NaNs."""
    a = sim.asarray(np.array([[1.0, 2.0], [2.0, 1.0]]))
    step, ok = lm_module._solve_damped(sim, a, sim.ones(2), 0.0, sim.ones(2))
    assert not bool(ok)
    step, ok = lm_module._solve_damped(sim, a, sim.ones(2), 3.0, sim.ones(2))
    assert bool(ok)
    np.testing.assert_allclose(sim.asnumpy(step), np.linalg.solve([[4.0, 2.0], [2.0, 4.0]],
                                                                  [-1.0, -1.0]))
    _, ok = lm_module._solve_damped(np, np.array([[1.0, 2.0], [2.0, 1.0]]), np.ones(2), 0.0,
                                    np.ones(2))
    assert not ok


def test_lm_reads_the_device_twice_per_iteration(sim):
    t = np.linspace(0.0, 1.0, 20)
    a, b = tg.Variable(1.0, dtype=tg.float64), tg.Variable(0.0, dtype=tg.float64)
    x, y = tg.constant(t), tg.constant(2.0 * np.exp(-1.5 * t))
    cupy_sim.stats.reset()
    result = tg.optimizers.LevenbergMarquardt().minimize(lambda: a * tg.exp(b * x) - y, [a, b])
    syncs = sum(cupy_sim.stats.sites("tapegpu").values())
    assert result.converged and result.iterations >= 3
    assert syncs <= 2 * result.iterations + 2, cupy_sim.stats.syncs  # +2: start and result
    np.testing.assert_allclose([float(a), float(b)], [2.0, -1.5], rtol=1e-8)


# -- dtypes and devices of special functions, integer means, Fortran-order updates ------------

DEVICES = ["gpu:0", "cuda_emu", "cpu"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [tg.math.erf, tg.nn.gelu, lambda x: tg.nn.gelu(x, approximate=True)],
                         ids=["erf", "gelu", "gelu_approximate"])
def test_special_functions_keep_float16(sim, device, fn):
    values = np.array([-2.0, -0.5, 0.0, 0.7, 3.0])
    with tg.device(device):
        got = fn(tg.constant(values, dtype=tg.float16))
        want = fn(tg.constant(values, dtype=tg.float32)).numpy()
    assert got.dtype == tg.float16 and got.device == tg.constant(0.0).to(device).device
    np.testing.assert_allclose(got.numpy().astype(np.float32), want, rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_gelu_approximate_backward_runs_on_its_inputs_device(sim, device):
    other = "cpu" if device != "cpu" else "gpu:0"
    with tg.device(device):
        x = tg.constant([0.5, -1.0, 2.0], dtype=tg.float64)
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = tg.nn.gelu(x, approximate=True)
    with tg.device(other):
        g = tape.gradient(y, x)
    assert g.device == x.device
    eps, xs = 1e-6, np.array([0.5, -1.0, 2.0])
    approx = lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))
    np.testing.assert_allclose(g.numpy(), (approx(xs + eps) - approx(xs - eps)) / (2 * eps),
                               rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_integer_reduce_mean_has_tensorflows_semantics_on_every_device(sim, device):
    """TF's eager kernel sums in 64 bits (TF issue #125978: int8 to int32 means do not wrap)
    and divides truncating towards zero."""
    cases = [([1, 2], np.int32, None), ([-3, -4], np.int64, None), ([100, 100], np.int8, None),
             ([[1, 2], [4, 7]], np.uint8, 0), ([[-1, -2], [5, 6]], np.int16, 1)]
    for vals, dt, axis in cases:
        a = np.array(vals, dtype=dt)
        total = a.sum(axis=axis, dtype=np.uint64 if dt == np.uint8 else np.int64)
        n = a.size if axis is None else a.shape[axis]
        want = (np.sign(total) * (np.abs(total.astype(np.int64)) // n)).astype(dt)
        with tg.device(device):
            got = tg.reduce_mean(tg.constant(a), axis=axis)
        assert got.dtype == tg.as_dtype(dt), (vals, dt)
        np.testing.assert_array_equal(got.numpy(), want, err_msg=f"{vals} {dt}")


def test_a_copy_between_two_gpus_does_not_go_through_the_host(sim, monkeypatch):
    """copy_to from one GPU backend to another: a device-to-device copy, no download and no
    upload (the stand-in has one device, so the second backend is another gpu:0 object)."""
    from tapegpu.backends.cuda import CudaBackend
    from tapegpu.core import device as device_mod
    other = CudaBackend(0)
    monkeypatch.setattr(device_mod._backend, "lookup", lambda name: other)
    x = tg.constant(np.arange(6.0, dtype=np.float32))
    cupy_sim.stats.reset()
    y = tg.copy_to(x, "gpu:1")
    assert y._dev is other and y.dtype == tg.float32
    assert dict(cupy_sim.stats.transfers) == {} and dict(cupy_sim.stats.syncs) == {}
    assert y._data is not x._data
    np.testing.assert_array_equal(y.numpy(), np.arange(6.0))


# -- benchmarks/gpu.py's own cases, run on the stand-in (the code a GPU machine runs first) --

def _gpu_bench():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location(
        "_bench_gpu", os.path.join(root, "benchmarks", "gpu.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_benchmark_cupy_step_matches_tapegpu_and_both_update(sim):
    cases = _gpu_bench().mlp_cases(tg, sim, sizes=(12, 16, 16, 5), batch=8)
    a, b = cases["tapegpu"](), cases["cupy by hand"]()
    assert len(a) == len(b) == 6
    for u, v in zip(a, b):
        np.testing.assert_allclose(sim.asnumpy(u), sim.asnumpy(v), rtol=1e-4, atol=1e-6)
    # both applied their SGD update: the second step's gradients differ from the first's
    a2, b2 = cases["tapegpu"](), cases["cupy by hand"]()
    assert not np.allclose(sim.asnumpy(a2[0]), sim.asnumpy(a[0]))
    np.testing.assert_allclose(sim.asnumpy(a2[0]), sim.asnumpy(b2[0]), rtol=1e-4, atol=1e-6)


def test_gpu_benchmark_compare_and_latency_report_positive_times(sim):
    mod = _gpu_bench()
    r = mod.compare_mlp(tg, sim, repeats=3, sizes=(12, 16, 16, 5), batch=8)
    assert r["tapegpu_ms"] > 0 and r["cupy_ms"] > 0 and r["ratio"] > 0
    lat = mod.launch_latency(tg, sim, calls=20)
    assert lat["tapegpu_us"] > 0 and lat["cupy_us"] > 0


def test_many_modules_keep_the_memory_mappings_bounded(sim):
    """Every RawModule is an emulator library; its threads' stacks are given back after each
    launch, so a session's hundreds of fused kernels fit in the process's ~65,000 mappings."""
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("needs /proc (Linux)")

    def mappings():
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    before = mappings()
    for k in range(8):
        src = ('extern "C" __global__ void k(float *x, long long n) { for (long long i = '
               'blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)'
               f'blockDim.x * gridDim.x) x[i] += {k}.0f; }}')
        x = sim.zeros(600, dtype=sim.float32)
        sim.RawModule(code=src).get_function("k")((3,), (256,), (x, np.int64(600)))
        assert float(x[599]) == k
    assert mappings() - before < 8 * 60


def test_segment_and_scatter_extremes_are_exact_in_float64_and_propagate_nan(sim):
    data = np.array([[1.2530809568010897, -0.3], [0.1, 0.7], [-1.0, 2.0]])
    x = tg.constant(data)
    with tg.GradientTape() as tape:
        tape.watch(x)
        m = tg.math.unsorted_segment_max(x, [0, 0, 1], 3)
        top = m[0]
    got = m.numpy()
    assert got[0].tolist() == [1.2530809568010897, 0.7]  # not float32-rounded
    assert got[2].tolist() == [np.finfo(np.float64).min] * 2  # an empty segment
    # the gradient goes where the data equals the maximum (CuPy's rounded one matched none)
    assert tape.gradient(top, x).numpy().tolist() == [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
    data[2, 0] = np.nan
    got = tg.math.unsorted_segment_max(tg.constant(data), [0, 0, 1], 2).numpy()
    assert np.isnan(got[1, 0]) and got[1, 1] == 2.0  # NaN wins, as numpy's maximum.at
    low = tg.math.unsorted_segment_min(tg.constant(np.array([3, -2, 5], np.int8)), [1, 1, 0], 2)
    assert low.numpy().tolist() == [5, -2]  # int8: no CuPy atomic, same answer
    t = tg.tensor_scatter_nd_min(tg.constant(data[:2]), [[1], [1]],
                                 tg.constant(np.array([[0.1, 0.69999999999], [0.2, 0.8]])))
    assert t.numpy()[1].tolist() == [0.1, 0.69999999999]


def test_python_scalar_negative_zero_keeps_its_sign(sim):
    z = tg.constant([-0.0])
    assert np.signbit((z + -0.0).numpy()).all()
    assert np.signbit(tg.constant(-0.0).numpy())
    assert np.signbit(tg.constant(-0.0, shape=[2]).numpy()).all()


def test_svd_of_a_non_finite_matrix_is_all_nan(sim):
    x = np.eye(3)
    x[1, 1] = np.nan
    s, u, v = tg.linalg.svd(x)
    assert np.isnan(s.numpy()).all() and np.isnan(u.numpy()).all() and np.isnan(v.numpy()).all()


def test_dlpack_of_a_second_gpus_tensor_comes_back_on_that_gpu(two_gpus):
    """A capsule or a producer names its GPU (DLDevice's id): both came back on gpu:0."""
    with tg.device("gpu:1"):
        x = tg.constant([1.0, 2.0])
    assert x._data.__dlpack_device__() == (2, 1)
    for source in (tg.experimental.dlpack.to_dlpack(x), x._data):
        y = tg.from_dlpack(source)
        assert y.device.endswith("GPU:1") and y.numpy().tolist() == [1.0, 2.0]


def test_dlpack_capsules_of_gpu_tensors_come_back_on_the_gpu(sim):
    x = tg.constant([1.0, 2.0])
    y = tg.from_dlpack(tg.experimental.dlpack.to_dlpack(x))
    assert "GPU" in y.device and y.numpy().tolist() == [1.0, 2.0]
