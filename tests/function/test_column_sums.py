"""Column sums that end a fused kernel on a GPU (a bias gradient: `reduce_sum(g, axis=0)`) take
two stages over more than fusion.SUM_ROWS_PER_THREAD rows: many threads per column, then a
tree per column (backends/kernels/codegen.py fused_column_sums). Their results equal the
one-thread-per-column kernel's within rounding, and are the same bits at every run, whatever
order the threads run in."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.backends import emu
from tapegpu.function import fusion


@pytest.fixture(autouse=True)
def gpu_only(tg_device):
    if tg_device == "numpy":
        pytest.skip("column sums take two stages in GPU kernels (cuda_emu, cuda)")


def _bias_grad(x, b):
    g = tg.abs(x + b) * 2.0 - 1.0  # the group's value, summed over the rows
    return tg.reduce_sum(g, axis=0), tg.reduce_sum(g * g, axis=0), g


def _run(x, b, calls=2):
    f = tg.function(_bias_grad)
    f(x, b)  # traces (eagerly)
    outs = [[t.numpy() for t in f(x, b)] for _ in range(calls)]
    (kernel,) = f.get_concrete_function(x, b)._plan.graph.fused
    return kernel, outs


def test_a_tall_bias_gradient_launches_64x_more_threads_than_columns():
    (first, grid, block), (second, grid2, block2) = fusion.launch_geometry(802816 * 64, 64, 1)
    assert (first, second) == ("", "_sum")
    parts = fusion.column_sum_parts(802816 * 64, 64)
    assert parts * 64 >= 64 * 64 and grid * block >= parts * 64
    assert grid2 == 64 and block2 >= 32  # a block per column adds the shares as a tree
    # one share (rows <= SUM_ROWS_PER_THREAD): a thread per column, rows in order
    assert fusion.launch_geometry(16 * 64, 64, 1) == [("", 1, fusion.BLOCK)]
    assert fusion.launch_geometry(1000, None, 0) == [("", 4, fusion.BLOCK)]


def test_the_runner_launches_that_geometry(monkeypatch):
    launched = []
    real = fusion._module

    class Recording:
        def __init__(self, module):
            self.module = module

        def get_function(self, name):
            fn = self.module.get_function(name)

            def call(grid, block, args, **kw):
                launched.append((name, grid[0], block[0]))
                return fn(grid, block, args, **kw)
            return call
    monkeypatch.setattr(fusion, "_module", lambda dev, source: Recording(real(dev, source)))
    monkeypatch.setattr(fusion, "_compiled", {})
    rng = np.random.default_rng(1)
    x = tg.constant(rng.standard_normal((4096, 64)).astype(np.float32))
    b = tg.constant(rng.standard_normal(64).astype(np.float32))
    kernel, _ = _run(x, b, calls=1)
    assert kernel.parts == 256 and len(kernel.sums) == 2
    assert launched == kernel.launches() == [(kernel.name, 64, 256),
                                             (kernel.name + "_sum", 128, 256)]
    assert launched[0][1] * launched[0][2] == 256 * 64  # threads: 256 per column


def _bits(a):
    """The bytes of `a` with every NaN made numpy's: results compared by value and sign, and
    by where they are NaN, not by NaN payloads (IEEE 754 leaves them to the hardware)."""
    return np.where(np.isnan(a), a.dtype.type(np.nan), a).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_two_stage_sums_equal_the_rows_in_order_within_rounding(dtype, monkeypatch):
    rng = np.random.default_rng(0)
    rows, cols = 3000, 37
    x = rng.standard_normal((rows, cols)).astype(dtype)
    x[:, 3] = np.inf  # infinities and NaN propagate as in the sum in order
    x[5, 4] = np.nan
    b = rng.standard_normal(cols).astype(dtype)
    kernel, (two, again) = _run(tg.constant(x), tg.constant(b))
    assert kernel.parts > 1
    for u, v in zip(two, again):  # the same bits at every run
        assert u.tobytes() == v.tobytes()
    monkeypatch.setattr(fusion, "SUM_ROWS_PER_THREAD", rows)  # one thread per column
    kernel1, (one, _) = _run(tg.constant(x), tg.constant(b))
    assert kernel1.parts == 1
    g = np.abs(x + b) * dtype(2.0) - dtype(1.0)
    np.testing.assert_array_equal(one[2], two[2])  # the elementwise output: the same bits
    for s, values in ((0, g), (1, g * g)):
        np.testing.assert_array_equal(np.isnan(one[s]), np.isnan(two[s]))
        ok = np.isfinite(one[s])
        np.testing.assert_array_equal(one[s][~ok], two[s][~ok])
        bound = (rows - 1) * np.finfo(dtype).eps * np.abs(values).sum(axis=0)
        assert np.all(np.abs(two[s][ok] - one[s][ok]) <= bound[ok])
        # numpy's order: its bits, NaN payloads aside (an NVIDIA GPU's float32 arithmetic
        # gives the canonical NaN 0x7fffffff, x86's keeps its operand's 0x7fc00000)
        assert _bits(one[s]) == _bits(values.sum(axis=0))


def test_a_column_of_negative_zeros_sums_to_positive_zero():
    x = tg.constant(np.full((500, 4), -0.5, np.float32))
    b = tg.constant(np.float32([0.5, 0.5, 0.5, 0.5]))
    kernel, (out, _) = _run(x, b)
    assert kernel.parts > 1
    g = tg.function(lambda x, b: tg.reduce_sum((x + b) * -1.0, axis=0))
    g(x, b)
    assert not np.signbit(g(x, b).numpy()).any()


@pytest.mark.parametrize("order", ["reverse", "random"])
def test_the_bits_do_not_depend_on_the_order_threads_run_in(order, monkeypatch, tg_device):
    if tg_device != "cuda_emu":
        pytest.skip("the emulator's thread orders")
    rng = np.random.default_rng(2)
    x = tg.constant(rng.standard_normal((2000, 24)))
    b = tg.constant(rng.standard_normal(24))
    _, (forward, _) = _run(x, b)
    monkeypatch.setattr(fusion, "_compiled", {})
    monkeypatch.setattr(fusion, "_module", lambda dev, source: emu.RawModule(
        code=source, order=order, seed=7, keep_stacks=False))
    _, (other, _) = _run(x, b)
    for u, v in zip(forward, other):
        assert u.tobytes() == v.tobytes()
