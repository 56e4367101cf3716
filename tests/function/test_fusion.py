"""tg.function's elementwise fusion (tapegpu/function/fusion.py): what is fused, that the fused
replay computes what the unfused one does (bit for bit for arithmetic, within the documented
bounds for library functions), on every device; every generated kernel compiles with NVRTC."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tapegpu as tg
from tapegpu import backends
from tapegpu.backends.kernels import codegen, nvrtc
from tapegpu.core.options import options
from tapegpu.function import fusion
from tapegpu.ops.registry import REGISTRY
from tapegpu.testing.launches import traced_step_launches
from tapegpu.testing.op_specs import SPECS, sample

# ulp bounds of a fused op against the unfused program, per dtype (docs/function.md states
# them): exact for the expressions codegen.exact accepts (arithmetic, comparisons, selects,
# fabs, sqrt, relabelling views), the C library's vs numpy's (CPU) for the rest. On the
# simulated GPU both sides run numpy's functions (the stand-in's kernels run on the CPU), so
# the same bounds apply.
ULP = {"float32": 2, "float64": 2}
# expressions that cancel where the spec table samples them, amplifying a library function's
# last-ulp difference: gelu's tanh form computes 1 + tanh(u), and near x = -2 tanh(u) is close
# to -1 (numpy's float32 tanh, its own SIMD code, is 1 ulp from C's on a third of inputs:
# up to 21 ulp of gelu's result there, 2e-6 relative)
CANCELS = {"gelu_tanh": {"float32": 32}}
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 5e-324, 1e30, -1e30]
GENERATED = {}  # kernel name -> CUDA C source, of every kernel these tests made


@pytest.fixture(autouse=True)
def every_group(monkeypatch, request):
    """The mechanics under test, whatever the CPU's profitability limits (tested at the end)."""
    if "limits" not in request.node.name:
        monkeypatch.setattr(fusion, "HOST_MIN_OPS", 2)
        monkeypatch.setattr(fusion, "HOST_MAX_ELEMENTS", 1 << 40)


def _fused(cf):
    kernels = getattr(cf._plan.graph, "fused", [])
    for k in kernels:
        GENERATED[k.name] = k.cuda_source()
    return kernels


def _ulps(a, b):
    """|a - b| in units in the last place, elementwise (0 where both are NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    it = np.int32 if a.dtype == np.float32 else np.int64

    def line(v):  # the bit patterns of sign and magnitude, onto one monotonic integer line
        i = v.view(it).astype(np.int64)
        return np.where(i < 0, -(i & np.int64(np.iinfo(it).max)), i)
    return np.where(np.isnan(a) & np.isnan(b), 0, np.abs(line(a) - line(b)))


def _same_bits(a, b):
    """The same bits, but for NaNs: NaN where the other is NaN, of any sign and payload (which
    NaN operand an x86 operation returns depends on the operands' order, which compilers and
    numpy's loops may swap; IEEE 754 leaves it open)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    assert a[~np.isnan(a)].tobytes() == b[~np.isnan(b)].tobytes()


def _both(fn, *args):
    """The fused and the unfused replays' results (a first call traces: it runs eagerly)."""
    fused, plain = tg.function(fn), tg.function(fn, jit_compile=False)
    fused(*args), plain(*args)
    return fused, plain, fused(*args), plain(*args)


def test_a_chain_of_elementwise_ops_and_its_gradient_is_one_kernel(tg_device):
    x = tg.constant(np.linspace(-2, 2, 16, dtype=np.float32))

    def step():
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = x
            for _ in range(10):
                y = tg.sin(y) * 1.01 + 0.1
            s = tg.reduce_sum(y)
        return tape.gradient(s, x)
    fused, plain, a, b = _both(step)
    kernels = _fused(fused.get_concrete_function())
    assert len(kernels) == 1 and kernels[0].n == 16
    # the gradient needs cos of each sin's input; the last sin's output is dead (DCE)
    assert kernels[0].ops.count("sin") == 9 and kernels[0].ops.count("cos") == 10
    assert not hasattr(plain.get_concrete_function()._plan.graph, "fused")
    assert a.dtype == tg.float32 and a.shape == (16,)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-5)
    # the IR (what concrete.graph shows and saved models keep) is not changed by fusion
    assert "fused" not in str(fused.get_concrete_function().graph)
    assert "tg_fused_" in str(fused.get_concrete_function()._plan.graph)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_arithmetic_is_bit_identical_to_the_unfused_replay(tg_device, dtype):
    base = np.array(SPECIALS + list(np.linspace(-3, 3, 22)), dtype=dtype)
    x = tg.constant(base)
    y = tg.constant(base[::-1].copy())

    def f(x, y):
        a = (x + y) * (x - y) / (y * y + 1.0)
        b = tg.reshape(-tg.square(a), (4, 8))
        return tg.reciprocal(b + 3.0) + tg.abs(b) * 0.5, tg.sqrt(tg.abs(a))
    fused, plain, a, b = _both(f, x, y)
    assert len(_fused(fused.get_concrete_function(x, y))) == 1
    for u, v in zip(a, b):
        assert u.dtype == v.dtype == dtype and u.shape == v.shape
        _same_bits(u.numpy(), v.numpy())


def _unary_specs():
    out = []
    for spec in SPECS:
        ops = spec.covers or (spec.name,)
        if len(ops) == 1 and ops[0] in REGISTRY and REGISTRY[ops[0]].c is not None and \
                len(spec.shapes) == 1 and _keeps_dtype(spec):
            out.append(spec)
    return out


def _keeps_dtype(spec):
    """Whether the spec's function gives its float input's dtype (a cast to an integer dtype
    is not fused: kernels compute in one floating dtype)."""
    with tg.device("cpu"):
        return spec.fn(tg.constant(sample(spec, np.float32)[0])).dtype == tg.float32


@pytest.mark.parametrize("spec", _unary_specs(), ids=repr)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_fusible_op_matches_the_unfused_replay_within_its_bound(tg_device, spec, dtype):
    x0 = sample(spec, dtype)[0]
    op = (spec.covers or (spec.name,))[0]
    if REGISTRY[op].elementwise:  # views (reshape, broadcast_to) keep their sample's shape
        x0 = np.concatenate([x0.ravel(), np.array(SPECIALS, dtype)])
    x = tg.constant(x0)
    # multiplying by 1.0 is exact: the op is in a kernel with two multiplies (one op alone, or
    # with views only, is not fused)
    fused, plain, a, b = _both(lambda x: spec.fn(x) * 1.0 * 1.0, x)
    cf = fused.get_concrete_function(x)
    assert len(_fused(cf)) == 1
    a, b = a.numpy(), b.numpy()
    assert a.dtype == b.dtype == dtype
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.isinf(a) * np.sign(a), np.isinf(b) * np.sign(b))
    # arithmetic, comparisons, selects, fabs and sqrt give numpy's bits (codegen.exact)
    bound = 0 if codegen.exact(REGISTRY[op].c) else \
        CANCELS.get(spec.name, {}).get(np.dtype(dtype).name, ULP[np.dtype(dtype).name])
    worst = _ulps(a, b).max()
    assert worst <= bound, f"{op} {np.dtype(dtype).name}: {worst} ulp (bound {bound})"


def test_reductions_split_groups_and_values_cross_them_through_memory(tg_device):
    x = tg.constant(np.linspace(0.1, 2, 12, dtype=np.float64).reshape(3, 4))

    def f(x):
        y = tg.exp(x) * 2.0 - 1.0
        s = tg.reduce_sum(y, axis=1, keepdims=True)  # not fused: ends the first group
        z = y / s + tg.cos(x)
        return tg.tanh(z) * 3.0, s
    fused, plain, a, b = _both(f, x)
    kernels = _fused(fused.get_concrete_function(x))
    # cos(x) is ready at the start: it joins the first kernel, which writes it for the second;
    # y / s reads s (3, 1) broadcast over the rows
    assert [k.ops for k in kernels] == [["exp", "multiply", "subtract", "cos"],
                                        ["divide", "add", "tanh", "multiply"]]
    assert [len(k.outputs) for k in kernels] == [2, 1]
    for u, v in zip(a, b):
        np.testing.assert_allclose(u.numpy(), v.numpy(), rtol=1e-14)


def test_side_effects_and_reads_keep_their_order_around_kernels(tg_device):
    v = tg.Variable(np.array([1.0, 2.0, 3.0], np.float32))

    @tg.function
    def f(x):
        a = tg.sin(v) * 2.0 + x
        v.assign(a * 0.5)
        b = tg.sin(v) * 2.0 + x  # reads the assigned value
        return a, b
    x = tg.constant(np.float32(0.25))
    a, b = f(x)
    v0 = np.array([1.0, 2.0, 3.0], np.float32)
    ea = np.sin(v0) * np.float32(2) + np.float32(0.25)
    np.testing.assert_allclose(a.numpy(), ea, rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), np.sin(ea * np.float32(0.5)) * 2 + 0.25, rtol=1e-6)
    np.testing.assert_allclose(v.numpy(), ea * 0.5, rtol=1e-6)
    assert len(_fused(f.get_concrete_function(x))) >= 2


def test_strided_and_scalar_leaves_are_read_correctly(tg_device):
    m = tg.constant(np.arange(12, dtype=np.float32).reshape(3, 4))

    def f(m):
        t = tg.transpose(m)  # a strided view on numpy: the kernel reads a contiguous copy
        return tg.sin(t) * tg.reduce_sum(m) + 1.0
    fused, plain, a, b = _both(f, m)
    assert len(_fused(fused.get_concrete_function(m))) == 1
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-6)
    np.testing.assert_allclose(a.numpy(), np.sin(np.arange(12.0).reshape(3, 4).T) * 66 + 1,
                               rtol=2e-5)


def test_integer_and_mixed_dtype_ops_are_not_fused(tg_device):
    def f(i, x):
        return (i * 2 + 1, tg.cast(x, tg.float64) * 2.0)
    i = tg.constant(np.arange(6, dtype=np.int32))
    x = tg.constant(np.ones(6, np.float32))
    fused = tg.function(f)
    r = fused(i, x)
    assert r[0].dtype == tg.int32 and r[1].dtype == tg.float64
    kernels = _fused(fused.get_concrete_function(i, x))
    assert all(k.dtype == "float64" for k in kernels)
    np.testing.assert_array_equal(r[0].numpy(), np.arange(6) * 2 + 1)


def test_without_a_compiler_the_replay_runs_unfused_and_says_why(tg_device, monkeypatch):
    def broken(*a, **k):
        raise fusion.build.EmuCompileError("g++ failed: no compiler here")
    monkeypatch.setattr(fusion, "_compiled", {})
    monkeypatch.setattr(fusion, "_failed", {})
    monkeypatch.setattr(fusion.build, "build_host_library", broken)
    monkeypatch.setattr(fusion, "_module", broken)
    x = tg.constant(np.linspace(-1, 1, 8))
    fused, plain, a, b = _both(lambda x: tg.sin(x) * 2.0, x)
    assert _fused(fused.get_concrete_function(x)) == []
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    dev = tg.constant(0.0)._dev.name
    assert "no compiler here" in fusion.unavailable_reason(dev)


def test_call_fused_checks_every_buffer_before_running():
    _cpu = pytest.importorskip("tapegpu.backends._cpu")
    x = np.ones(4, np.float32)
    out = np.empty(3, np.float32)
    with pytest.raises(ValueError, match="array 1 has 12 bytes"):
        _cpu.call_fused(0, 4, 1, (4, 4), (4, 4), x, out)  # a wrong size: nothing runs
    with pytest.raises(ValueError, match="not C-contiguous"):
        _cpu.call_fused(0, 2, 1, (2, 2), (4, 4), x[::2], out[:2])  # strided
    with pytest.raises(ValueError, match="array 0 has 4 bytes of 1-byte items"):
        _cpu.call_fused(0, 4, 1, (4, 4), (4, 4), x > 0, np.empty(4, np.float32))  # a bool


def _generated_sources():
    """The CUDA C of the kernels the graphs of these tests give (generated, not run)."""
    sources = dict(GENERATED)
    graphs = []
    for dtype in (np.float32, np.float64):
        x = tg.constant(np.linspace(-1, 1, 8).astype(dtype))
        elementwise = [s for s in _unary_specs()
                       if REGISTRY[(s.covers or (s.name,))[0]].elementwise]
        graphs.append(tg.function(lambda x: [s.fn(x) * 2.0 for s in elementwise])
                      .get_concrete_function(x).graph)
        graphs.append(tg.function(lambda x: tg.reshape(tg.sin(x) / (x * x + 1.0) - 0.5,
                                                       (2, 4))).get_concrete_function(x).graph)
    if backends.CudaEmuBackend.available():  # column sums end kernels on GPUs only
        with tg.device("cuda_emu"):
            x = tg.constant(np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6))
            graphs.append(tg.function(lambda x: tg.reduce_sum(tg.tanh(x) * 2.0 - x, axis=0))
                          .get_concrete_function(x).graph)
            graphs.append(tg.function(lambda x: tg.where(x > 0.5, x * 2.0, x - 1.0))
                          .get_concrete_function(x).graph)  # a bool value in a kernel
            labels = tg.constant(np.array([1, 5, 0, 2], np.int64))
            graphs.append(tg.function(lambda x, y: x - tg.cast(  # integers compared
                tg.equal(y[:, None], tg.range(6, dtype=tg.int64)), x.dtype))
                .get_concrete_function(x, labels).graph)
    for g in graphs:
        for k in fusion.groups(g):
            sources[k.name] = k.cuda_source()
    assert not backends.CudaEmuBackend.available() or (
        any("[j] = s0;" in src for src in sources.values()) and
        any("const bool b" in src for src in sources.values()) and
        any("const long long *" in src for src in sources.values()))
    return sources


@pytest.mark.skipif(not nvrtc.available(), reason=f"NVRTC unavailable: {nvrtc.reason()}")
@pytest.mark.parametrize("arch", nvrtc.ARCHS)
def test_every_generated_kernel_compiles_with_nvrtc(arch):
    sources = _generated_sources()
    assert len(sources) >= 3
    for name, source in sources.items():
        _, entries = nvrtc.compile_source(source, name + ".cu", arch, options=("--fmad=false",))
        assert entries == [name]


def test_broadcast_index_expressions_read_what_numpy_broadcasting_reads():
    rng = np.random.default_rng(0)
    for _ in range(300):
        to = tuple(int(d) for d in rng.integers(1, 5, size=rng.integers(1, 5)))
        shape = tuple(d if rng.random() < 0.5 else 1 for d in to[rng.integers(0, len(to)):])
        flat = np.broadcast_to(np.arange(int(np.prod(shape))).reshape(shape), to).ravel()
        expr = codegen.index(shape, to).replace("/", "//")
        assert [eval(expr, {"i": i}) for i in range(flat.size)] == list(flat), (shape, to)


def test_bias_and_row_broadcasts_fuse_with_the_ops_around_them(tg_device):
    x = tg.constant(np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6))
    b = tg.constant(np.linspace(0, 1, 6, dtype=np.float32))
    r = tg.constant(np.linspace(1, 2, 4, dtype=np.float32).reshape(4, 1))

    def f(x, b, r):
        return tg.abs(x + b) * r - tg.exp(b) / r
    fused, plain, a, e = _both(f, x, b, r)
    kernels = _fused(fused.get_concrete_function(x, b, r))
    # exp(b) has 6 elements, not 24: alone in its group, it is not a kernel; the kernel reads it
    assert len(kernels) == 1 and sorted(kernels[0].ops) == sorted(
        ["add", "abs", "multiply", "divide", "subtract"])
    _same_bits(a.numpy(), e.numpy())


def test_a_lone_op_is_not_made_a_kernel(tg_device):
    x = tg.constant(np.ones((3, 4), np.float32))
    f = tg.function(lambda x: tg.reduce_sum(tg.reshape(x * 2.0, (12,))))
    f(x)
    assert _fused(f.get_concrete_function(x)) == []


def test_without_the_compiled_helper_ctypes_calls_the_kernels(monkeypatch):
    monkeypatch.setattr(fusion, "call_fused", None)
    monkeypatch.setattr(fusion, "_compiled", {})
    x = tg.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    b = tg.constant(np.float32([1, 2, 3, 4]))
    fused, plain, a, e = _both(lambda x, b: tg.sin(tg.transpose(x)) * 2.0 + tg.reshape(b, (4, 1)),
                               x, b)
    assert len(_fused(fused.get_concrete_function(x, b))) == 1
    assert _ulps(a.numpy(), e.numpy()).max() <= ULP["float32"]  # C's sin and numpy's


def test_info_reports_whether_fusion_works_and_why_not_limits(monkeypatch):
    from tapegpu.cli import info
    assert info.report()["fusion (tg.function)"].startswith("ok")

    def broken(*a, **k):
        raise fusion.build.EmuCompileError("g++: not found")
    monkeypatch.setattr(fusion, "_compiled", {})
    monkeypatch.setattr(fusion, "_failed", {})
    monkeypatch.setattr(fusion.build, "build_host_library", broken)
    line = info.report()["fusion (tg.function)"]
    assert line.startswith("unavailable") and "g++: not found" in line
    monkeypatch.setattr(options, "fusion", False)
    assert info.report()["fusion (tg.function)"].startswith("off")


def test_info_finds_fusion_working_with_an_empty_kernel_cache(tmp_path):
    """A first run compiles in the background: `info` said "unavailable (no kernel made)" on
    every fresh machine (seen on an H200's first run) until it waited for the compile."""
    code = "from tapegpu.cli import info; print(info.report()['fusion (tg.function)'])"
    env = {**os.environ, "TAPEGPU_EMU_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok"), proc.stdout


def test_many_fused_kernels_on_the_emulator_keep_the_memory_mappings_bounded():
    """Each kernel is a library of its own; its threads' stacks (two mappings per thread) are
    given back after each launch, so hundreds of traced functions do not exhaust the process's
    mappings (about 65,000: 125 libraries that kept their stacks did)."""
    def mappings():
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("needs /proc (Linux)")
    with tg.device("cuda_emu"):
        x = tg.constant(np.linspace(-1, 1, 300))
        before = mappings()
        for k in range(12):
            def chain(x, k=k):  # k + 1 sines: a kernel of its own for each k
                for _ in range(k + 1):
                    x = tg.sin(x) * 1.5
                return x
            f = tg.function(chain)
            f(x)  # the trace (runs the ops); the next calls replay the kernel
            want = np.linspace(-1, 1, 300)
            for _ in range(k + 1):
                want = np.sin(want) * 1.5
            np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-12)
            assert len(_fused(f.get_concrete_function(x))) == 1
        grown = mappings() - before
    assert grown < 12 * 60, grown  # a library's own segments, not 256 threads' stacks each


def test_cpu_limits_leave_large_and_short_groups_to_numpy(tg_device):
    small = tg.constant(np.linspace(-1, 1, 64))
    big = tg.constant(np.linspace(-1, 1, fusion.HOST_MAX_ELEMENTS + 1))

    def chain(x, n):
        for _ in range(n):
            x = tg.sin(x) * 1.5
        return x
    cpu = tg.constant(0.0)._dev.name == "numpy"
    long_ops = fusion.HOST_MIN_OPS // 2 + 1
    for x, n, fused_on_cpu in ((small, long_ops, True), (small, 1, False), (big, long_ops, False)):
        f = tg.function(lambda x, n=n: chain(x, n))
        f(x)
        kernels = _fused(f.get_concrete_function(x))
        # a GPU (here the emulator) fuses every group of two ops or more
        assert len(kernels) == (1 if fused_on_cpu or not cpu else 0), (x.shape, n)
        np.testing.assert_allclose(f(x).numpy(), chain(x, n).numpy(), rtol=1e-14)


def test_a_column_sum_ends_the_kernel_of_the_group_it_sums(tg_device):
    x = tg.constant(np.linspace(-3, 3, 4 * 6 * 3, dtype=np.float32).reshape(4, 6, 3))
    b = tg.constant(np.linspace(0, 1, 3, dtype=np.float32))

    def f(x, b):
        g = tg.abs(x + b) * 2.0 - 1.0  # a bias gradient's shape: sums over leading axes
        return tg.reduce_sum(g, axis=0), tg.reduce_sum(g * g, axis=[0, 1]), g
    fused, plain, out, ref = _both(f, x, b)
    kernels = _fused(fused.get_concrete_function(x, b))
    g = out[2].numpy()
    assert g.tobytes() == ref[2].numpy().tobytes()  # elementwise: the unfused replay's bits
    # the kernel's column sum (axis 0; the sum over axes 0 and 1 is not fused, below): the rows
    # summed in order from +0.0, numpy's bits (numpy's sum over leading axes adds the rows in
    # order). Unfused sums are the device's library's: numpy's on numpy, cuda_emu and the
    # CuPy stand-in, so the same bits; CuPy's on a real GPU, another order (docs/function.md),
    # so there they are checked within the rounding of a reordered sum
    gpu = tg_device.startswith("gpu")
    for o, r, want, values, fused_sum in ((out[0], ref[0], g.sum(axis=0), g, True),
                                          (out[1], ref[1], (g * g).sum(axis=(0, 1)), g * g,
                                           False)):
        if fused_sum or not gpu:
            assert o.numpy().tobytes() == want.tobytes()
        if not gpu:
            assert r.numpy().tobytes() == want.tobytes()
        rows = values.size // want.size
        bound = (rows - 1) * np.finfo(np.float32).eps * np.abs(values).sum(
            axis=tuple(range(values.ndim - want.ndim)))
        assert np.all(np.abs(r.numpy() - want) <= bound)
        assert np.all(np.abs(o.numpy() - want) <= bound)
    (k,) = kernels
    assert k.cols == 18 and len(k.sums) == 1 and k.ops.count("reduce_sum") == 1
    ops = [n.op.name for n in fused.get_concrete_function(x, b)._plan.graph.nodes
           if n.kind == "op"]
    assert ops.count("reduce_sum") == 1  # the sum of another width stays a library call


def test_a_column_sum_alone_is_fused_and_a_full_sum_is_not(tg_device):
    x = tg.constant(np.arange(12, dtype=np.float64).reshape(3, 4) - 5.5)
    fused, plain, out, ref = _both(lambda x: (tg.reduce_sum(x * 3.0, axis=0),
                                              tg.reduce_sum(x - 1.0)), x)
    kernels = _fused(fused.get_concrete_function(x))
    for o, r in zip(out, ref):
        assert o.numpy().tobytes() == r.numpy().tobytes()
    assert [len(k.sums) for k in kernels] == [1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_comparisons_and_where_fuse_with_the_unfused_bits(tg_device, dtype):
    vals = np.array(SPECIALS + [1.5, -2.5, 3.0, -0.5, 2.0, 0.25], dtype)
    y = tg.constant(np.resize(vals, (4, 4)))
    g = tg.constant(np.resize(vals[::-1], (4, 4)))

    def f(y, g):  # an activation's backward: its mask, the masked gradient, its column sums
        masked = tg.where(y > 0.0, g, tg.zeros_like(g))
        picked = tg.where(tg.equal(y, g) | (y <= -1.0), y * 2.0, g - 1.0)
        return masked, tg.reduce_sum(masked, axis=0), picked, tg.cast(y != g, y.dtype)
    fused, plain, out, ref = _both(f, y, g)
    for o, r in zip(out, ref):
        assert o.numpy().tobytes() == r.numpy().tobytes()
    kernels = _fused(fused.get_concrete_function(y, g))
    ops = {op for k in kernels for op in k.ops}
    assert {"greater", "where", "less_equal", "multiply", "reduce_sum"} <= ops


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
def test_integer_comparisons_join_the_group_using_them_on_gpus(tg_device, label_dtype):
    """A one-hot of labels (labels[:, None] == class ids) is computed inside the kernel that
    uses it on GPUs; an integer comparison that no single group uses stays unfused."""
    labels = tg.constant(np.array([2, 0, 3, 3, 1], label_dtype))
    ids = tg.constant(np.arange(4, dtype=label_dtype))
    z = tg.constant(np.resize(np.array(SPECIALS + [1.5, -2.5], np.float32), (5, 4)))

    def f(labels, ids, z):
        hot = tg.cast(tg.equal(labels[:, None], ids), z.dtype)
        grad = (tg.exp(z) - hot) * 0.5
        near = labels[:, None] >= ids  # used by the result itself: no kernel to join
        return grad, tg.reduce_sum(grad, axis=0), near
    fused, plain, out, ref = _both(f, labels, ids, z)
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype and o.numpy().tobytes() == r.numpy().tobytes()
    kernels = _fused(fused.get_concrete_function(labels, ids, z))
    ops = [op for k in kernels for op in k.ops]
    if tg_device == "numpy":
        assert "equal" not in ops
    else:
        (k,) = kernels
        assert "equal" in k.ops and "greater_equal" not in ops
        ctype = {np.int32: "const int *", np.int64: "const long long *"}[label_dtype]
        assert ctype in k.cuda_source()


def test_the_traced_mlp_steps_masks_selects_and_bias_sums_are_in_kernels(tg_device):
    if tg_device != "cuda_emu":
        pytest.skip("launch counts are the emulator's")
    traced, _ = traced_step_launches(8, "relu", False)
    fused, _ = traced_step_launches(8, "relu", None)
    # each hidden layer's backward (mask, select, bias-gradient sum) is one kernel, and the
    # output layer's bias-gradient sum and the labels' one-hot join the cross-entropy
    # gradient's kernel
    for name in ("greater", "where", "reduce_sum", "subtract", "equal"):
        assert traced.get(name) and name not in fused, name
    assert sum(fused.values()) <= sum(traced.values()) - 4


def test_an_op_alone_in_its_group_is_computed_in_the_later_group_using_it(tg_device):
    x = tg.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    w = tg.constant(np.linspace(0.5, 1.5, 16, dtype=np.float32).reshape(4, 4))

    def f(x, w):
        mask = x > 0.0  # alone at its level: the matmul's result comes later
        h = tg.matmul(x, w)
        return tg.where(mask, h * 2.0, h - 1.0)
    fused, plain, out, ref = _both(f, x, w)
    assert out.numpy().tobytes() == ref.numpy().tobytes()
    (k,) = _fused(fused.get_concrete_function(x, w))
    assert sorted(k.ops) == ["greater", "multiply", "subtract", "where"]


@pytest.mark.parametrize("jit_compile", [False, None])
def test_views_launch_nothing_and_real_ops_one_launch_each_eager_and_traced(tg_device,
                                                                            jit_compile):
    x = tg.constant(np.arange(12, dtype=np.float32).reshape(3, 4))
    dev = x._dev
    if not dev.counts_launches:
        pytest.skip("numpy calls are not kernel launches")
    rows = np.array([2, 0])
    cases = {  # fn, the launches one call makes (by op name)
        "basic getitem": (lambda x: x[1:, None, ::2], {}),
        "getitem of an element": (lambda x: x[1, 2], {}),
        "reshape, transpose, expand_dims": (
            lambda x: tg.expand_dims(tg.transpose(tg.reshape(x, (4, 3))), 0), {}),
        "gather by getitem": (lambda x: x[rows], {"getitem": 1}),
        "a view, then arithmetic": (lambda x: x[:, None] * 2.0, {"multiply": 1}),
    }
    for label, (fn, want) in cases.items():
        dev.launches.clear()
        eager = fn(x)
        assert dict(dev.launches) == want, (label, "eager")
        traced = tg.function(fn, jit_compile=jit_compile)
        traced(x)
        dev.launches.clear()
        out = traced(x)
        assert dict(dev.launches) == want, (label, "traced")
        assert out.numpy().tobytes() == eager.numpy().tobytes(), label


ACTIVATIONS = {"relu": tg.nn.relu, "sigmoid": tg.sigmoid, "gelu": tg.nn.gelu, "elu": tg.nn.elu,
               "softplus": tg.math.softplus, "tanh": tg.tanh, "softsign": tg.nn.softsign}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_an_activation_and_its_gradient_are_one_kernel(tg_device, name):
    """The activations describe their elements (`c=`), so a traced step's forward and the
    rule's backward around them are one generated kernel: on a GPU two launches per step
    (the kernel and the loss's sum) instead of one per op."""
    act = ACTIVATIONS[name]
    x = tg.constant(np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8))

    def step(x):
        with tg.GradientTape() as tape:
            tape.watch(x)
            s = tg.reduce_sum(act(x * 2.0 + 0.5) * 3.0)
        return s, tape.gradient(s, x)
    fused, plain, out, ref = _both(step, x)
    (k,) = _fused(fused.get_concrete_function(x))
    assert name in k.ops and "multiply" in k.ops
    for o, r in zip(out, ref):  # C's library functions and numpy's, where they are called
        if codegen.exact(REGISTRY[name].c):
            _same_bits(o.numpy(), r.numpy())
        else:  # (1 - tanh^2 cancels: a last-ulp difference of tanh is relative to 1 there)
            np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-5,
                                       atol=1e-6 * np.abs(r.numpy()).max())
    dev = x._dev
    if dev.counts_launches:
        launches = {}
        for f in (fused, plain):
            dev.launches.clear()
            f(x)
            launches[f is fused] = dict(dev.launches)
        # the loss's sum: on cuda (and the stand-in) reduce_sum's kernel, the un-broadcast's
        loss = "tapegpu_sum_last_fwd_f32" if dev.name == "cuda" else "reduce_sum"
        assert launches[True] == {k.name: 1, loss: 1}
        assert sum(launches[False].values()) >= 8


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_groups_fuse_on_the_cpu_at_any_size_and_their_sums_are_numpys(tg_device, dtype,
                                                                             monkeypatch):
    """Arithmetic, comparisons and selects (no library call) fuse from two ops on at any size
    on the CPU too (the limits are for library calls); a column of negative zeros sums to
    +0.0 and rows of one element are left to numpy's (pairwise) sum, as numpy adds them."""
    monkeypatch.setattr(fusion, "HOST_MIN_OPS", 8)
    monkeypatch.setattr(fusion, "HOST_MAX_ELEMENTS", 4096)
    rng = np.random.default_rng(0)
    y = rng.standard_normal((300, 40)).astype(dtype)
    g = rng.standard_normal((300, 40)).astype(dtype)
    g[:, 3] = -0.0
    y[:, 5] = 1.0
    y[7, :] = np.nan

    def f(y, g, col):
        masked = tg.where(y > 0.0, g, tg.zeros_like(g))  # a ReLU's backward
        return masked, tg.reduce_sum(masked, axis=0), tg.reduce_sum(col * 2.0 - 1.0, axis=0)
    col = tg.constant(rng.standard_normal((5000, 1)).astype(dtype))
    fused, plain, out, ref = _both(f, tg.constant(y), tg.constant(g), col)
    for o, r in zip(out, ref):
        if tg_device == "numpy" or o is not out[1]:
            _same_bits(o.numpy(), r.numpy())
        else:  # on a GPU 300 rows are summed in two stages (fusion.SUM_ROWS_PER_THREAD):
            # another order of the same additions, so within rounding of numpy's
            o, r, mag = o.numpy(), r.numpy(), np.abs(np.where(y > 0, g, 0)).sum(axis=0)
            np.testing.assert_array_equal(np.isnan(o), np.isnan(r))
            ok = ~np.isnan(r)
            assert np.all(np.abs(o - r)[ok] <= 300 * np.finfo(dtype).eps * mag[ok])
    assert not np.signbit(out[1].numpy()[3])
    kernels = _fused(fused.get_concrete_function(tg.constant(y), tg.constant(g), col))
    assert sorted(sorted(k.ops) for k in kernels) == [
        ["greater", "reduce_sum", "where"], ["multiply", "subtract"]]


def test_an_expression_gets_its_params_and_a_param_it_cannot_take_is_not_fused(tg_device):
    x = tg.constant(np.linspace(-3, 3, 40))
    fused, plain, out, ref = _both(lambda x: tg.nn.elu(x * 2.0, alpha=0.25) * 3.0, x)
    (k,) = _fused(fused.get_concrete_function(x))
    assert "elu" in k.ops and "T(0.25)" in k.cuda_source()
    assert _ulps(out.numpy(), ref.numpy()).max() <= ULP["float64"]
    node = next(n for n in fused.get_concrete_function(x).graph.nodes if n.kind == "op" and
                n.op.name == "elu")
    assert fusion.param_values(node) == {"alpha": "T(0.25)"}
    node.params = {"alpha": "a string"}  # not a number: the expression cannot have it
    assert fusion.param_values(node) is None and not fusion.fusible(
        fused.get_concrete_function(x).graph, node)


def test_the_kernels_of_one_plan_are_built_as_one_library(tg_device, tmp_path, monkeypatch):
    """A library's fixed cost (compiler processes, header, link) is most of a small kernel's
    build: the kernels a trace needs are compiled together, once, and compute what the
    unfused replay does. (A real GPU's NVRTC compiles each module as before.)"""
    if tg_device not in ("numpy", "cuda_emu"):
        pytest.skip("NVRTC builds a GPU's kernels")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    monkeypatch.setattr(fusion, "_compiled", {})
    built, real = [], fusion.build._compile
    monkeypatch.setattr(fusion.build, "_compile",
                        lambda text, d, stem, *a: built.append(stem) or real(text, d, stem, *a))
    x = tg.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    w = tg.constant(np.linspace(0.5, -0.5, 20, dtype=np.float32).reshape(4, 5))

    def f(x, w):
        a = x * 3.0 + 1.0 - x * x
        b = tg.matmul(a, w)
        c = tg.matmul(tg.abs(a) * 0.25 - a, w * 2.0 + 1.0)
        return b * 0.5 - b * b * 2.0, c - c * c
    fused, plain, a, b = _both(f, x, w)
    kernels = _fused(fused.get_concrete_function(x, w))
    assert len(kernels) >= 3 and built == ["batch"]
    for u, v in zip(a, b):
        _same_bits(u.numpy(), v.numpy())
    # another trace of the same kernels (a new process would do the same): nothing is built
    monkeypatch.setattr(fusion, "_compiled", {})
    again = tg.function(f)
    again(x, w)
    for u, v in zip(again(x, w), b):
        _same_bits(u.numpy(), v.numpy())
    assert built == ["batch"]
