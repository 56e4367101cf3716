"""tg.bfloat16 (ml_dtypes' bfloat16) on every device, float16 beside it, and TensorFlow's
TensorFloat-32 switch (tg.config.experimental), which the CuPy stand-in honours as cuBLAS does:
float32 products round their inputs to TF32."""
import subprocess
import sys

import numpy as np
import pytest

import tapegpu as tg

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)


def test_bfloat16_is_tensorflows_dtype():
    assert tg.bfloat16 is tg.dtypes.bfloat16 is tg.as_dtype("bfloat16") is tg.as_dtype(BF16)
    assert tg.bfloat16 == "bfloat16" and tg.bfloat16 == BF16 and tg.bfloat16 != tg.float16
    assert tg.bfloat16.is_floating and not tg.bfloat16.is_integer and tg.bfloat16.size == 2
    assert tg.bfloat16.as_numpy_dtype is ml_dtypes.bfloat16 and repr(tg.bfloat16) == "tg.bfloat16"


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16_bit_tensors_convert_cast_and_round_as_tensorflow(dtype):
    x = tg.constant([1.0, 2.5, 1.0 + 2.0 ** -9, 3e4], dtype=dtype)
    assert x.dtype == dtype and x.numpy().dtype == np.dtype(tg.as_dtype(dtype).as_numpy_dtype)
    y = tg.cast(tg.constant([1.0 + 2.0 ** -9, 70000.0]), dtype)
    if dtype == "bfloat16":  # 8 bits of precision, float32's range
        assert y.numpy().astype(np.float32).tolist() == [1.0, 70144.0]
    else:  # 11 bits, 65504 at most
        assert y.numpy().astype(np.float32).tolist() == [1.0 + 2.0 ** -9, np.inf]
    z = tg.cast(x, tg.float32)
    assert z.dtype == tg.float32 and z.numpy()[1] == 2.5
    assert tg.zeros((2,), dtype).dtype == dtype and tg.ones((2,), dtype).dtype == dtype
    assert tg.random.normal((3,), dtype=dtype).dtype == dtype
    assert tg.random.uniform((3,), dtype=dtype).dtype == dtype


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16_bit_products_keep_their_dtype_and_accumulate_in_float32(dtype, tg_device):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 256)).astype(np.float32)
    b = rng.standard_normal((256, 8)).astype(np.float32)
    a16, b16 = (tg.cast(tg.constant(v), dtype) for v in (a, b))
    out = tg.matmul(a16, b16)
    assert out.dtype == dtype
    # the reference: the rounded operands multiplied in float64, rounded once to the dtype
    ref = (a16.numpy().astype(np.float64) @ b16.numpy().astype(np.float64))
    got = out.numpy().astype(np.float64)
    eps = float(ml_dtypes.finfo(tg.as_dtype(dtype).as_numpy_dtype).eps)
    assert np.all(np.abs(got - ref) <= eps * np.abs(ref) + 1e-3)


def test_bfloat16_carries_gradients_to_float32_variables(tg_device):
    """A float32 variable cast to bfloat16 (Keras' autocast) gets a float32 gradient; NaN in
    stays NaN out."""
    w = tg.Variable([[1.0, -2.0], [0.5, 4.0]])
    x = tg.constant([[1.0, 2.0], [3.0, 4.0]], dtype=tg.bfloat16)
    with tg.GradientTape() as tape:
        y = tg.nn.relu(tg.matmul(x, tg.cast(w, tg.bfloat16)))
        loss = tg.reduce_sum(tg.cast(y, tg.float32) ** 2)
    g = tape.gradient(loss, w)
    assert y.dtype == tg.bfloat16 and g.dtype == tg.float32
    xf = np.array([[1.0, 2.0], [3.0, 4.0]])
    yf = np.maximum(xf @ w.numpy(), 0)
    np.testing.assert_allclose(g.numpy(), xf.T @ (2 * yf), rtol=1e-2)
    n = tg.cast(tg.constant([np.nan, 1.0]), tg.bfloat16)
    assert np.isnan(tg.cast(n * 2.0, tg.float32).numpy()[0])


def test_tensor_float_32_switch_is_tensorflows_and_on_by_default():
    """TF's default (on) in a fresh process; the switch round-trips; on the CPU products are
    full float32 either way."""
    code = ("import tapegpu as tg; print(tg.config.experimental."
            "tensor_float_32_execution_enabled())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    was = tg.config.experimental.tensor_float_32_execution_enabled()
    try:
        tg.config.experimental.enable_tensor_float_32_execution(True)
        assert tg.config.experimental.tensor_float_32_execution_enabled() is True
        with tg.device("cpu"):
            x = tg.fill((64, 64), 1.0001)
            np.testing.assert_allclose(tg.matmul(x, tg.ones((64, 64)))[0, 0].numpy(), 64.0064,
                                       rtol=1e-6)
        tg.config.experimental.enable_tensor_float_32_execution(0)
        assert tg.config.experimental.tensor_float_32_execution_enabled() is False
    finally:
        tg.config.experimental.enable_tensor_float_32_execution(was)


def test_tensor_float_32_rounds_float32_products_on_an_ampere_gpu(cupy_gpu):
    """TF's own example: with TF32 a (1.0001 x 1) product loses the .0001 (10 bits of mantissa);
    without it the product is full float32. CuPy's compute type for float32 follows the
    switch."""
    was = tg.config.experimental.tensor_float_32_execution_enabled()
    try:
        with tg.device("gpu:0"):
            x, y = tg.fill((256, 256), 1.0001), tg.fill((256, 256), 1.0)
            tg.config.experimental.enable_tensor_float_32_execution(True)
            assert cupy_gpu._core.get_compute_type(np.float32) == 7  # COMPUTE_TYPE_TF32
            assert tg.matmul(x, y)[0, 0].numpy() == 256.0
            tg.config.experimental.enable_tensor_float_32_execution(False)
            assert cupy_gpu._core.get_compute_type(np.float32) == 1  # COMPUTE_TYPE_DEFAULT
            np.testing.assert_allclose(tg.matmul(x, y)[0, 0].numpy(), 256.0256, rtol=1e-6)
            # float64 products are never touched
            x64 = tg.cast(x, tg.float64)
            tg.config.experimental.enable_tensor_float_32_execution(True)
            np.testing.assert_allclose(tg.matmul(x64, tg.cast(y, tg.float64))[0, 0].numpy(),
                                       256.0256, rtol=1e-6)
    finally:
        tg.config.experimental.enable_tensor_float_32_execution(was)


def test_tapegpu_imports_and_runs_without_ml_dtypes():
    """ml_dtypes is optional at run time: without it tapegpu has no bfloat16 (tg.bfloat16 is
    no dtype) and the rest works."""
    code = ("import sys; sys.modules['ml_dtypes'] = None\n"
            "import tapegpu as tg\n"
            "from tapegpu.core import dtypes\n"
            "assert not hasattr(dtypes, 'bfloat16')\n"
            "assert not isinstance(getattr(tg, 'bfloat16', None), tg.DType)\n"
            "x = tg.Variable([1.0, 2.0])\n"
            "with tg.GradientTape() as t:\n"
            "    y = tg.reduce_sum(tg.cast(x, tg.float16) * 3.0)\n"
            "print(t.gradient(y, x).numpy().tolist())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[3.0, 3.0]"


def test_a_captured_graph_rounds_its_products_to_tensor_float_32_at_every_launch(cupy_gpu):
    """Under TF32 a captured step's products round the operands of each launch (the CuPy
    stand-in once rounded copies made at capture, which a graph's later launches read as the
    capture's freed arrays: NaN from the second call)."""
    was = tg.config.experimental.tensor_float_32_execution_enabled()
    try:
        tg.config.experimental.enable_tensor_float_32_execution(True)
        with tg.device("gpu:0"):
            w = tg.Variable(np.full((3, 2), 1.0001, np.float32))
            f = tg.function(lambda x: tg.matmul(x, w) + 1.0, jit_compile=True)
            for i in range(4):
                x = tg.constant(np.full((4, 3), i + 1, np.float32))
                want = (i + 1) * 3.0 + 1.0  # 1.0001 rounds to 1.0 in TF32
                np.testing.assert_array_equal(f(x).numpy(), np.full((4, 2), want, np.float32))
            assert f.get_concrete_function(x).capture_info["captured"]
    finally:
        tg.config.experimental.enable_tensor_float_32_execution(was)
