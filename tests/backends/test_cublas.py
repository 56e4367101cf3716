"""Products by cuBLAS directly (tapegpu/backends/cublas.py), the `matmul` op's kernel on `cuda`.

On a machine without a GPU (and on the CuPy stand-in) the kernel declines and the products are
CuPy's; the tests marked `gpu` run on a real GPU: every layout and dtype against float64
products, the op taking the kernel, and a training step with products captured as a graph
(CuPy's own matmul refuses a capturing stream)."""
import contextlib
import ctypes
import types

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.backends import cublas


def test_the_stand_in_and_a_machine_without_a_gpu_take_cupys_products():
    try:
        import cupy
    except ImportError:
        assert not cublas.available() and "CuPy" in cublas.reason()
        return
    if hasattr(cupy, "cupy_sim"):
        a = cupy.ones((2, 3), np.float32)
        assert cublas.matmul(cupy, a, a.T) is NotImplemented
        assert "stand-in" in cublas.reason()


# -- the arguments cuBLAS gets, checked on the host against a column-major GEMM of numpy -------

class _Array:
    """A numpy array as the kernel reads a CuPy array (shape, strides, dtype, data.ptr, device)."""

    def __init__(self, a):
        self.a = a
        self.shape, self.ndim, self.dtype = a.shape, a.ndim, a.dtype
        self.strides, self.itemsize = a.strides, a.itemsize
        self.data = types.SimpleNamespace(ptr=a.ctypes.data)
        self.device = types.SimpleNamespace(id=0)


class _Xp:
    """The parts of CuPy the kernel calls, on the host."""

    def __init__(self):
        device = types.SimpleNamespace(id=0, compute_capability="90",
                                       __enter__=None, __exit__=None)
        self.cuda = types.SimpleNamespace(
            Device=lambda *a: contextlib.nullcontext(device) if a else device,
            get_current_stream=lambda: types.SimpleNamespace(ptr=0))
        self.made = []

    def empty(self, shape, dtype):
        out = _Array(np.full(shape, np.nan, dtype))
        self.made.append(out)
        return out


def _column_major(ptr, dtype, op, rows, cols, ld):
    """op(X) as a (rows, cols) view of the column-major matrix X at `ptr` with leading
    dimension `ld` (X itself is (rows, cols) for op N, (cols, rows) for op T)."""
    r, c = (rows, cols) if op == cublas._OP_N else (cols, rows)
    item = np.dtype(dtype).itemsize
    size = ld * (c - 1) + r
    flat = np.frombuffer((ctypes.c_char * (size * item)).from_address(ptr), dtype, size)
    x = np.lib.stride_tricks.as_strided(flat, (r, c), (item, ld * item))
    return x if op == cublas._OP_N else x.T


class _Lib:
    """cuBLAS's GEMMs by their documented column-major meaning, in float64."""
    DTYPES = {v: k for k, v in cublas._DATA.items()}

    def __init__(self):
        self.calls, self.bound = [], []

    def cublasSetStream_v2(self, handle, stream):
        self.bound.append(("stream", stream))
        return 0

    def cublasSetWorkspace_v2(self, handle, ptr, size):
        self.bound.append(("workspace", size))
        return 0

    def cublasGemmEx(self, h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc,
                     compute, algo):
        return self.cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt,
                                               ldb, 0, beta, C, ct, ldc, 0, 1, compute, algo)

    def cublasGemmStridedBatchedEx(self, h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb,
                                   sb, beta, C, ct, ldc, sc, count, compute, algo):
        dtype = self.DTYPES[at]
        item = np.dtype(dtype).itemsize
        self.calls.append((ta, tb, m, n, k, lda, ldb, ldc, count, compute))
        for i in range(count):
            a = _column_major(A + i * sa * item, dtype, ta, m, k, lda)
            b = _column_major(B + i * sb * item, dtype, tb, k, n, ldb)
            c = _column_major(C + i * sc * item, dtype, cublas._OP_N, m, n, ldc)
            c[...] = (a.astype(np.float64) @ b.astype(np.float64)).astype(dtype)
        return 0


@pytest.fixture
def lib(monkeypatch):
    """The module bound to the host GEMM (`_Lib`), with one GPU's handle made."""
    lib = _Lib()
    monkeypatch.setattr(cublas, "_load", lambda: lib)
    monkeypatch.setattr(cublas, "_lib", lib)
    monkeypatch.setattr(cublas, "_handles", {0: [None, None, 0, True, None]})
    monkeypatch.setattr(cublas, "backends", types.SimpleNamespace(
        gpu=lambda d: types.SimpleNamespace(counts_launches=False)))
    return lib


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("orders", ["CC", "TC", "CT", "TT"])
@pytest.mark.parametrize("shape", [(5, 3, 4), (1, 3, 4), (5, 1, 4), (5, 3, 1), (2, 5, 3, 4)])
def test_the_gemm_arguments_make_op_a_times_op_b(lib, dtype, ta, tb, orders, shape):
    """Row-major op(a) op(b) handed to column-major cuBLAS as op(b)^T op(a)^T: every layout,
    transpose flag and degenerate size, against numpy, by a host GEMM that reads the pointers
    and leading dimensions as cuBLAS does (a wrong op or ld reads other elements)."""
    *lead, m, k, n = shape
    rng = np.random.default_rng(len(shape) + m + 7 * k + 31 * n)
    # small integers: every product and sum exact in each dtype, whatever the order of the sums
    a = rng.integers(-8, 9, tuple(lead) + ((k, m) if ta else (m, k))).astype(dtype)
    b = rng.integers(-8, 9, tuple(lead) + ((n, k) if tb else (k, n))).astype(dtype)

    def layout(x, order):   # "T": the transposed view of a C-contiguous array
        return x if order == "C" else np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    xa, xb = layout(a, orders[0]), layout(b, orders[1])
    xp = _Xp()
    got = cublas.matmul(xp, _Array(xa), _Array(xb), ta, tb)
    want = (np.swapaxes(a, -1, -2) if ta else a).astype(np.float64) @ \
        (np.swapaxes(b, -1, -2) if tb else b).astype(np.float64)
    assert got is xp.made[0]
    np.testing.assert_array_equal(got.a, want.astype(dtype))
    (call,) = lib.calls
    assert call[-1] == (cublas._COMPUTE_64F if dtype == np.float64 else cublas._COMPUTE_32F)


def test_the_handle_is_bound_to_a_stream_only_when_the_stream_changes(lib):
    """Binding the stream (which resets the workspace) and the workspace at every product made
    each product wait for the GPU on an H200; a product on the stream bound last binds nothing."""
    xp = _Xp()
    a = _Array(np.ones((3, 2), np.float32))
    streams = [7, 7, 7, 9, 9, 7]
    for s in streams:
        xp.cuda.get_current_stream = lambda s=s: types.SimpleNamespace(ptr=s)
        cublas.matmul(xp, a, a, tb=True)
    size = cublas.WORKSPACE_BYTES
    assert lib.bound == [("stream", 7), ("workspace", size), ("stream", 9), ("workspace", size),
                         ("stream", 7), ("workspace", size)]
    assert len(lib.calls) == len(streams)


def _real_cublas_or_skip():
    cupy = pytest.importorskip("cupy")
    if hasattr(cupy, "cupy_sim") or not cublas.available():
        pytest.skip(f"no real GPU with cuBLAS here: {cublas.reason()}")
    return cupy


def _layout(cupy, x, order):
    """x on the GPU, C-contiguous ("C") or as the transposed view of a C-contiguous array
    ("T": column-major matrices, F-contiguous in 2-D)."""
    if order == "C":
        return cupy.asarray(x)
    return cupy.ascontiguousarray(cupy.asarray(np.swapaxes(x, -1, -2))).swapaxes(-1, -2)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-13), (np.float32, 2e-6),
                                        (np.float16, 2e-3)])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("orders", ["CC", "TC", "CT", "TT"])
@pytest.mark.parametrize("batch", [None, 3])
def test_products_of_every_layout_equal_float64_products(dtype, rtol, ta, tb, orders, batch):
    cupy = _real_cublas_or_skip()
    rng = np.random.default_rng(0)
    lead = () if batch is None else (batch,)
    m, k, n = 37, 29, 18
    a = rng.standard_normal(lead + ((k, m) if ta else (m, k))).astype(dtype)
    b = rng.standard_normal(lead + ((n, k) if tb else (k, n))).astype(dtype)
    want = np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b,
                     dtype=np.float64)
    da, db = _layout(cupy, a, orders[0]), _layout(cupy, b, orders[1])
    got = cublas.matmul(cupy, da, db, ta, tb)   # (TF32 off: the tests' conftest)
    assert got is not NotImplemented
    assert got.dtype == dtype and got.shape == want.shape and got.flags.c_contiguous
    bound = rtol * np.matmul(np.abs(np.swapaxes(a, -1, -2) if ta else a),
                             np.abs(np.swapaxes(b, -1, -2) if tb else b), dtype=np.float64)
    assert np.all(np.abs(cupy.asnumpy(got) - want) <= bound + 1e-30)


@pytest.mark.gpu
def test_other_layouts_are_declined_and_computed_by_cupy():
    cupy = _real_cublas_or_skip()
    a = cupy.asfortranarray(cupy.arange(24, dtype=np.float32).reshape(2, 3, 4))  # batch fastest
    b = cupy.arange(40, dtype=np.float32).reshape(2, 4, 5)
    assert cublas.matmul(cupy, a, b) is NotImplemented
    assert cublas.matmul(cupy, a[0, :, ::2], b[0, ::2]) is NotImplemented   # strided columns
    with tg.device("gpu:0"):
        got = tg.matmul(tg.constant(cupy.asnumpy(a)), tg.constant(cupy.asnumpy(b)))
    np.testing.assert_array_equal(got.numpy(), cupy.asnumpy(a) @ cupy.asnumpy(b))


@pytest.mark.gpu
def test_tf32_rounds_float32_products_only_while_enabled():
    cupy = _real_cublas_or_skip()
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 256)).astype(np.float32)
    b = rng.standard_normal((256, 32)).astype(np.float32)
    want = a.astype(np.float64) @ b
    da, db = cupy.asarray(a), cupy.asarray(b)
    was = tg.config.experimental.tensor_float_32_execution_enabled()
    try:
        tg.config.experimental.enable_tensor_float_32_execution(True)
        tf32 = cupy.asnumpy(cublas.matmul(cupy, da, db))
        tg.config.experimental.enable_tensor_float_32_execution(False)
        full = cupy.asnumpy(cublas.matmul(cupy, da, db))
    finally:
        tg.config.experimental.enable_tensor_float_32_execution(was)
    scale = np.abs(a) @ np.abs(b)
    assert np.max(np.abs(full - want) / scale) < 1e-6
    assert 1e-6 < np.max(np.abs(tf32 - want) / scale) < 2e-3  # 10 bits of mantissa


@pytest.mark.gpu
def test_the_matmul_op_and_its_gradients_take_cublas(monkeypatch):
    cupy = _real_cublas_or_skip()

    def refused(*a, **k):
        raise AssertionError("CuPy's matmul was called")
    monkeypatch.setattr(cupy, "matmul", refused)
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((16, 8)), rng.standard_normal((8, 4))
    with tg.device("gpu:0"):
        tx, tw = tg.constant(x), tg.Variable(w)
        with tg.GradientTape() as tape:
            y = tg.matmul(tx, tw)
            loss = tg.reduce_sum(y * y)
        g = tape.gradient(loss, tw)
    np.testing.assert_allclose(y.numpy(), x @ w, rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), 2 * x.T @ (x @ w), rtol=1e-12)


@pytest.mark.gpu
def test_a_training_step_with_products_is_captured_with_the_uncaptured_bits():
    cupy = _real_cublas_or_skip()  # noqa: F841
    rng = np.random.default_rng(3)
    x = rng.standard_normal((32, 20)).astype(np.float32)
    y = rng.integers(0, 5, 32)
    results = {}
    for jit in (True, None):
        with tg.device("gpu:0"):
            tg.random.set_seed(0)
            model = tg.keras.Sequential([tg.keras.layers.Dense(16, activation="relu"),
                                         tg.keras.layers.Dense(5)])
            model(tg.constant(x))
            opt = tg.optimizers.SGD(0.1, momentum=0.9)
            loss_fn = tg.losses.SparseCategoricalCrossentropy(from_logits=True)

            def step(x, y):
                with tg.GradientTape() as tape:
                    loss = loss_fn(y, model(x, training=True))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                return loss
            f = tg.function(step, jit_compile=jit)
            xs, ys = tg.constant(x), tg.constant(y)
            losses = [f(xs, ys).numpy() for _ in range(4)]
            if jit:
                info = f.get_concrete_function(xs, ys).capture_info
            results[jit] = (losses, [v.numpy() for v in model.trainable_variables])
    assert info["captured"], info
    assert info["graph_launches"] >= 1
    for got, want in zip(results[True][0] + results[True][1],
                         results[None][0] + results[None][1]):
        assert got.tobytes() == want.tobytes()
