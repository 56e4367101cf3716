"""DLPack round trips with PyTorch and JAX on the CPU: `tg.experimental.from_dlpack(x)` and
`torch.from_dlpack(t)` / `jax.numpy.from_dlpack(t)` (tensor.__dlpack__), and the capsule forms;
what PyTorch writes into its import never reaches the tensor.
Each peer's tests skip, saying so, where it is not installed (benchmarks' peers venv has both)."""
import numpy as np
import pytest

import tapegpu as tg

SINGLE_DEVICE = True

DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8", "bool"]


def _values(dtype, shape=(2, 3)):
    v = np.arange(int(np.prod(shape))).reshape(shape) % 5
    return (v % 2 == 0) if dtype == "bool" else v.astype(dtype)


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")


@pytest.fixture(scope="module")
def jnp():
    pytest.importorskip("jax", reason="JAX is not installed (pip install jax jaxlib)")
    import jax.numpy
    return jax.numpy


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_round_trip(torch, dtype):
    host = _values(dtype)
    x = torch.from_numpy(host.copy())
    with tg.device("cpu"):
        t = tg.experimental.from_dlpack(x)
    assert t.dtype.name == dtype and t.device.endswith("CPU:0")
    np.testing.assert_array_equal(t.numpy(), host)
    x[0, 0] = 1 if dtype == "bool" else 7   # the producer's buffer is not the tensor's
    np.testing.assert_array_equal(t.numpy(), host)
    back = torch.from_dlpack(t)
    assert str(back.dtype) == f"torch.{dtype}"
    np.testing.assert_array_equal(back.numpy(), host)


def test_torch_non_contiguous_zero_d_and_capsules(torch):
    x = torch.arange(6.0).reshape(2, 3).T  # strided
    t = tg.experimental.from_dlpack(x)
    np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3).T)
    assert tg.experimental.from_dlpack(torch.tensor(3, dtype=torch.int64)).numpy() == 3
    cap = torch.utils.dlpack.to_dlpack(torch.ones(2, dtype=torch.float64))
    np.testing.assert_array_equal(tg.experimental.from_dlpack(cap).numpy(), [1.0, 1.0])
    got = torch.utils.dlpack.from_dlpack(tg.experimental.to_dlpack(tg.constant([1, 2])))
    assert got.tolist() == [1, 2] and got.dtype == torch.int32
    y = tg.matmul(tg.experimental.from_dlpack(x), tg.ones((2, 1)))  # usable in ops
    np.testing.assert_allclose(torch.from_dlpack(y).numpy(), np.arange(6.0).reshape(2, 3).T
                               .sum(axis=1, keepdims=True))


def test_writing_into_torchs_import_leaves_the_tensor(torch):
    """PyTorch ignores DLPack 1.0's read-only flag: it gets a copy, not the tensor's buffer."""
    t = tg.constant([1.0, 2.0])
    with tg.GradientTape() as tape:
        tape.watch(t)
        y = tg.reduce_sum(t * t)
    torch.from_dlpack(t)[0] = 5.0
    assert t.numpy().tolist() == [1.0, 2.0]
    assert tape.gradient(y, t).numpy().tolist() == [2.0, 4.0]


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d not in ("float64", "int64")])  # JAX's
# default (jax_enable_x64 off) makes 64-bit inputs 32-bit
def test_jax_round_trip(jnp, dtype):
    host = _values(dtype)
    x = jnp.asarray(host)
    with tg.device("cpu"):
        t = tg.experimental.from_dlpack(x)
    assert t.dtype.name == dtype
    np.testing.assert_array_equal(t.numpy(), host)
    back = jnp.from_dlpack(t)  # JAX asks for an unversioned export: it gets a copy
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(back), host)


def test_jax_zero_d_and_gradients_through_imported_values(jnp):
    assert tg.experimental.from_dlpack(jnp.float32(2.5)).numpy() == np.float32(2.5)
    w = tg.experimental.from_dlpack(jnp.arange(3.0, dtype=jnp.float32))
    with tg.GradientTape() as tape:
        tape.watch(w)
        y = tg.reduce_sum(w * w)
    g = jnp.from_dlpack(tape.gradient(y, w))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 2.0, 4.0])
