"""The cuDNN binding (tapegpu/backends/cudnn.py) on the `cuda` backend, run end to end on the
CuPy stand-in with the cuDNN frontend stand-in (tests/support/cudnn_sim): convolutions and
attention through cuDNN compared with the same computation on the CPU (im2col, explicit
attention), the graph cache, TF32, the fallbacks (cuDNN absent, refusing, a dtype it lacks),
and the stand-in's own checks refusing wrong descriptors. A real GPU checks the real module
(tests marked gpu in this file's last part)."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.backends import cudnn as binding
from tapegpu.cli import info
from tapegpu.core import determinism

SINGLE_DEVICE = True

CONV_CASES = [  # (x shape, filter shape, strides, padding, dilations)
    ((2, 9, 8, 6), (3, 3, 6, 4), 1, "SAME", 1),
    ((2, 9, 8, 6), (3, 3, 6, 4), 2, "VALID", 1),
    ((1, 10, 9, 3), (3, 2, 3, 5), 1, "SAME", 2),
    ((2, 7, 7, 4), (2, 2, 4, 3), (2, 1), [[0, 0], [1, 0], [0, 2], [0, 0]], 1),
    ((2, 8, 8, 6), (3, 3, 3, 4), 1, "SAME", 1),  # groups = 2
]


def _conv_run(device, x, w, strides, padding, dilations, dtype="float32"):
    """(y, dx, dw) of sum(y^2) on `device`, as float64 numpy arrays."""
    with tg.device(device):
        xt, wt = tg.cast(tg.constant(x), dtype), tg.cast(tg.constant(w), dtype)
        with tg.GradientTape() as tape:
            tape.watch([xt, wt])
            y = tg.nn.conv2d(xt, wt, strides, padding, dilations=dilations)
            loss = tg.reduce_sum(tg.cast(y, "float32") ** 2)
        dx, dw = tape.gradient(loss, [xt, wt])
        return [tg.cast(a, "float64").numpy() for a in (y, dx, dw)]


def _close(got, want, rtol):
    for g, w in zip(got, want):
        scale = np.abs(w).max()
        assert np.abs(g - w).max() <= rtol * scale, (np.abs(g - w).max() / scale, rtol)


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_through_cudnn_matches_im2col(cudnn_gpu, case):
    x_shape, w_shape, strides, padding, dilations = CONV_CASES[case]
    rng = np.random.default_rng(case)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    want = _conv_run("cpu", x, w, strides, padding, dilations)
    got = _conv_run("gpu:0", x, w, strides, padding, dilations)
    _close(got, want, 1e-5)  # float32 with TF32 off: far under 1e-3
    assert cudnn_gpu.CALLS["conv_fprop"] == 1
    assert cudnn_gpu.CALLS["conv_dgrad"] == 1 and cudnn_gpu.CALLS["conv_wgrad"] == 1
    assert not binding.refusals()


@pytest.mark.parametrize("dtype,rtol", [("float16", 5e-3), ("bfloat16", 2e-2)])
def test_conv_16_bit_through_cudnn(cudnn_gpu, dtype, rtol):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 6, 6, 8)), rng.standard_normal((3, 3, 8, 8)) / 4
    want = _conv_run("cpu", x, w, 1, "SAME", 1, dtype)
    got = _conv_run("gpu:0", x, w, 1, "SAME", 1, dtype)
    _close(got, want, rtol)
    assert cudnn_gpu.CALLS["conv_fprop"] == 1 and cudnn_gpu.CALLS["conv_wgrad"] == 1


def test_conv_1d_and_3d_through_cudnn(cudnn_gpu):
    rng = np.random.default_rng(2)
    for fn, x_shape, w_shape in ((tg.nn.conv1d, (2, 11, 3), (3, 3, 4)),
                                 (tg.nn.conv3d, (1, 5, 6, 4, 2), (2, 3, 2, 2, 3))):
        x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
        outs = []
        for dev in ("cpu", "gpu:0"):
            with tg.device(dev):
                xt, wt = tg.constant(x, tg.float32), tg.constant(w, tg.float32)
                with tg.GradientTape() as tape:
                    tape.watch([xt, wt])
                    strides = 2 if fn is tg.nn.conv1d else [1, 1, 2, 1, 1]
                    y = fn(xt, wt, strides, "SAME")
                    loss = tg.reduce_sum(y * y)
                outs.append([y.numpy()] + [g.numpy() for g in tape.gradient(loss, [xt, wt])])
        _close(outs[1], outs[0], 1e-5)
    assert cudnn_gpu.CALLS["conv_fprop"] == 2 and cudnn_gpu.CALLS["conv_dgrad"] == 2


def test_graphs_are_built_once_per_key(cudnn_gpu):
    x, w = np.ones((1, 5, 5, 2)), np.ones((3, 3, 2, 2))
    for _ in range(3):
        _conv_run("gpu:0", x, w, 1, "SAME", 1)
    assert binding.COUNTS["conv_fprop:built"] == 1 and binding.COUNTS["conv_fprop"] == 3
    assert cudnn_gpu.CALLS["conv_fprop"] == 3
    _conv_run("gpu:0", np.ones((2, 5, 5, 2)), w, 1, "SAME", 1)  # another batch: another graph
    assert binding.COUNTS["conv_fprop:built"] == 2


def test_tf32_switch_selects_the_engines(cudnn_gpu):
    x, w = np.ones((1, 4, 4, 2)), np.ones((1, 1, 2, 2))

    def notes():
        [graph] = [g for k, g in binding._GRAPHS.items() if k[0] == "conv_fprop"]
        return graph.graph._deselected

    _conv_run("gpu:0", x, w, 1, "SAME", 1)  # the suite runs with TF32 off
    assert notes() == {cudnn_gpu.numerical_note.TENSOR_CORE}
    binding.reset()
    tg.config.experimental.enable_tensor_float_32_execution(True)
    try:
        _conv_run("gpu:0", x, w, 1, "SAME", 1)
        assert notes() == set()
        _conv_run("gpu:0", x, w, 1, "SAME", 1, "float16")  # 16-bit: never deselected
    finally:
        tg.config.experimental.enable_tensor_float_32_execution(False)


def test_op_determinism_selects_deterministic_engines(cudnn_gpu, monkeypatch):
    rng = np.random.default_rng(9)
    q = rng.standard_normal((1, 4, 2, 8))
    monkeypatch.setattr(determinism, "_enabled", True)  # enable_op_determinism, undone after
    _conv_run("gpu:0", np.ones((1, 4, 4, 2)), np.ones((1, 1, 2, 2)), 1, "SAME", 1)
    _attention_run("gpu:0", q, q, q, "float16")
    graphs = {k[0]: g.graph for k, g in binding._GRAPHS.items()}
    assert cudnn_gpu.numerical_note.NONDETERMINISTIC in graphs["conv_wgrad"]._deselected
    [op] = graphs["sdpa_bwd"]._ops
    assert op["deterministic"]


@pytest.mark.parametrize("kind", ["conv_fprop", "conv_dgrad", "conv_wgrad"])
def test_refused_conv_falls_back_to_im2col(cudnn_gpu, kind):
    cudnn_gpu.REFUSE.add(kind)
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 6, 6, 3)), rng.standard_normal((3, 3, 3, 2))
    want = _conv_run("cpu", x, w, 2, "SAME", 1)
    got = _conv_run("gpu:0", x, w, 2, "SAME", 1)
    _close(got, want, 1e-5)
    assert cudnn_gpu.CALLS[kind] == 0
    assert binding.COUNTS[kind + ":build_refused"] == 1
    [why] = binding.refusals().values()
    assert "cudnnGraphNotSupportedError" in why and "REFUSE" in why
    _conv_run("gpu:0", x, w, 2, "SAME", 1)  # remembered: no second build
    assert binding.COUNTS[kind + ":build_refused"] == 1 and binding.COUNTS[kind + ":refused"] == 2


def test_float64_conv_stays_on_im2col(cudnn_gpu):
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((1, 5, 5, 2)), rng.standard_normal((3, 3, 2, 2))
    _close(_conv_run("gpu:0", x, w, 1, "SAME", 1, "float64"),
           _conv_run("cpu", x, w, 1, "SAME", 1, "float64"), 1e-12)
    assert sum(cudnn_gpu.CALLS.values()) == 0


def test_without_cudnn_info_says_why_and_convs_run(cupy_gpu, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "cudnn", None)  # import cudnn fails
    binding.reset()
    try:
        ok, why = binding.status()
        assert not ok and "not installed" in why and "tapegpu[cudnn]" in why
        line = info.cudnn_status()
        assert line.startswith("im2col + cuBLAS, explicit attention") and "not installed" in line
        rng = np.random.default_rng(5)
        x, w = rng.standard_normal((1, 5, 5, 2)), rng.standard_normal((3, 3, 2, 2))
        _close(_conv_run("gpu:0", x, w, 1, "SAME", 1), _conv_run("cpu", x, w, 1, "SAME", 1),
               1e-5)
        assert binding.COUNTS == {}
    finally:
        binding.reset()


def test_disabled_by_environment(cudnn_gpu, monkeypatch):
    monkeypatch.setenv("TAPEGPU_CUDNN", "0")
    binding.reset()
    assert binding.status() == (False, "disabled by TAPEGPU_CUDNN=0")
    _conv_run("gpu:0", np.ones((1, 4, 4, 1)), np.ones((2, 2, 1, 1)), 1, "SAME", 1)
    assert sum(cudnn_gpu.CALLS.values()) == 0


def test_old_cudnn_is_not_used(cudnn_gpu, monkeypatch):
    monkeypatch.setattr(cudnn_gpu, "BACKEND_VERSION", 8600)
    binding.reset()
    ok, why = binding.status()
    assert not ok and "8600" in why and "older" in why


def test_info_reports_cudnn(cudnn_gpu):
    line = info.cudnn_status()
    assert line.startswith("cuDNN 91000") and "conv" in line and "attention" in line
    assert "cudnn" in info.report(check_kernels=False)


def test_the_cudnn_extra_brings_the_frontend_and_cudnn_9():
    import os
    import tomllib
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert extras["cudnn"] == ["nvidia-cudnn-frontend>=1.5", "nvidia-cudnn-cu12>=9"]
    assert extras["cudnn13"] == ["nvidia-cudnn-frontend>=1.5", "nvidia-cudnn-cu13>=9"]


# -- attention ------------------------------------------------------------------------------------

def _attention_run(device, q, k, v, dtype, causal=False, mask=None):
    with tg.device(device):
        qt, kt, vt = (tg.cast(tg.constant(a, tg.float32), dtype) for a in (q, k, v))
        with tg.GradientTape() as tape:
            tape.watch([qt, kt, vt])
            o = tg.nn.scaled_dot_product_attention(
                qt, kt, vt, is_causal=causal, mask=None if mask is None else tg.constant(mask))
            loss = tg.reduce_sum(tg.cast(o, "float32") * np.linspace(-1, 1, o.shape[-1]))
        grads = tape.gradient(loss, [qt, kt, vt])
        return [tg.cast(a, "float64").numpy() for a in [o] + grads]


@pytest.mark.parametrize("dtype,rtol", [("float16", 5e-3), ("bfloat16", 3e-2)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [((2, 6, 3, 16), (2, 6, 3, 16)), ((1, 5, 2, 8), (1, 9, 2, 8))])
def test_attention_through_cudnn_matches_explicit(cudnn_gpu, dtype, rtol, causal, shape):
    rng = np.random.default_rng(6)
    q = rng.standard_normal(shape[0])
    k, v = rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    want = _attention_run("cpu", q, k, v, dtype, causal)
    got = _attention_run("gpu:0", q, k, v, dtype, causal)
    _close(got, want, rtol)
    # the forward, and the backward's forward with statistics, then the backward
    assert cudnn_gpu.CALLS["sdpa"] == 2 and cudnn_gpu.CALLS["sdpa_backward"] == 1


def test_attention_falls_back_where_cudnn_does_not_apply(cudnn_gpu):
    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, 4, 2, 8))
    # float32 (cuDNN's flash attention is 16-bit), a head_dim not a multiple of 8, a mask
    cases = [(q, "float32", None), (rng.standard_normal((1, 4, 2, 12)), "float16", None),
             (q, "float16", np.tril(np.ones((4, 4), bool)))]
    for a, dtype, mask in cases:
        want = _attention_run("cpu", a, a, a, dtype, mask=mask)
        got = _attention_run("gpu:0", a, a, a, dtype, mask=mask)
        _close(got, want, 1e-5 if dtype == "float32" else 5e-3)
    assert sum(cudnn_gpu.CALLS.values()) == 0


def test_refused_attention_falls_back(cudnn_gpu):
    cudnn_gpu.REFUSE.add("sdpa_backward")
    rng = np.random.default_rng(8)
    q = rng.standard_normal((1, 4, 2, 8))
    # the forward through cuDNN (float32 inside), the backward the rule's (float16 products)
    _close(_attention_run("gpu:0", q, q, q, "float16", True),
           _attention_run("cpu", q, q, q, "float16", True), 1e-2)
    assert cudnn_gpu.CALLS["sdpa"] == 1 and cudnn_gpu.CALLS["sdpa_backward"] == 0


# -- the stand-in checks what the real frontend checks --------------------------------------------

def _conv_graph(sim, x_stride=None, y_dims=None, order="ok"):
    g = sim.pygraph(io_data_type=sim.data_type.FLOAT,
                    intermediate_data_type=sim.data_type.FLOAT,
                    compute_data_type=sim.data_type.FLOAT, handle=sim.create_handle())
    X = g.tensor(name="X", dim=[1, 2, 4, 4], stride=x_stride or [32, 1, 8, 2],
                 data_type=sim.data_type.FLOAT)
    W = g.tensor(name="W", dim=[3, 2, 3, 3], stride=[18, 1, 6, 2],
                 data_type=sim.data_type.FLOAT)
    Y = g.conv_fprop(image=X, weight=W, pre_padding=[1, 1], post_padding=[1, 1],
                     stride=[1, 1], dilation=[1, 1])
    Y.set_output(True).set_dim(y_dims or [1, 3, 4, 4]).set_stride([48, 1, 12, 3])
    steps = [g.validate, g.build_operation_graph,
             lambda: g.create_execution_plans([sim.heur_mode.A]), g.check_support,
             g.build_plans]
    if order == "skip":
        del steps[2]
    for step in steps:
        step()
    return g, X, W, Y


def test_stand_in_refuses_wrong_descriptors(cudnn_gpu):
    sim = cudnn_gpu
    _conv_graph(sim)  # the right one builds
    with pytest.raises(ValueError, match=r"output-side dims \[1, 3, 3, 3\]"):
        _conv_graph(sim, y_dims=[1, 3, 3, 3])  # the output dims of another padding
    with pytest.raises(sim.cudnnGraphNotSupportedError, match="channels-last"):
        _conv_graph(sim, x_stride=[32, 16, 4, 1])  # NCHW strides: not what tapegpu sends
    with pytest.raises(ValueError, match="overlap"):
        _conv_graph(sim, x_stride=[32, 1, 4, 2])
    with pytest.raises(RuntimeError, match="check_support.*needs 'execution plans created'"):
        _conv_graph(sim, order="skip")


def test_stand_in_checks_execute(cudnn_gpu):
    sim = cudnn_gpu
    cupy = __import__("cupy")
    g, X, W, Y = _conv_graph(sim)
    x, w = cupy.ones((1, 4, 4, 2), dtype="float32"), cupy.ones((3, 3, 3, 2), dtype="float32")
    y = cupy.zeros((1, 4, 4, 3), dtype="float32")
    ws = cupy.empty(max(g.get_workspace_size(), 1), dtype="uint8")
    with pytest.raises(ValueError, match=r"lacks \['W'\]"):
        g.execute({X: x.data.ptr, Y: y.data.ptr}, ws.data.ptr, handle=g.handle)
    with pytest.raises(ValueError, match="past the end"):  # an output buffer too short
        g.execute({X: x.data.ptr, W: w.data.ptr, Y: x.data.ptr}, ws.data.ptr,
                  handle=g.handle)
    g.execute({X: x.data.ptr, W: w.data.ptr, Y: y.data.ptr}, ws.data.ptr, handle=g.handle)
    assert float(y[0, 1, 1, 0]) == 18.0 and float(y[0, 0, 0, 0]) == 8.0
    with pytest.raises(RuntimeError, match="after validate"):
        g.tensor(name="late", dim=[1], stride=[1])


def test_stand_in_checks_sdpa_arguments(cudnn_gpu):
    sim = cudnn_gpu
    g = sim.pygraph(io_data_type=sim.data_type.HALF, intermediate_data_type=sim.data_type.FLOAT,
                    compute_data_type=sim.data_type.FLOAT)
    q = g.tensor(name="Q", dim=[1, 2, 4, 8], stride=[64, 8, 16, 1])
    with pytest.raises(RuntimeError, match="Exactly one of"):
        g.sdpa(q=q, k=q, v=q, attn_scale=0.5)
    with pytest.raises(RuntimeError, match="attn_scale"):
        g.sdpa(q=q, k=q, v=q, generate_stats=False, attn_scale=1)
    o, stats = g.sdpa(q=q, k=q, v=q, generate_stats=True, attn_scale=0.5)
    o.set_output(True).set_dim([1, 2, 4, 8]).set_stride([64, 8, 16, 1])
    stats.set_output(True).set_dim([1, 2, 4, 1]).set_stride([8, 4, 1, 1])  # FLOAT not set
    with pytest.raises(ValueError, match="stats must be FLOAT"):
        g.validate()


# -- a real GPU with the real frontend (skipped without one) ---------------------------------------

def _real_cudnn_or_skip():
    binding.reset()
    ok, why = binding.status()
    if not ok:
        pytest.skip(f"no usable cuDNN frontend here: {why}")


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_real_cudnn_conv(case):
    _real_cudnn_or_skip()
    x_shape, w_shape, strides, padding, dilations = CONV_CASES[case]
    rng = np.random.default_rng(case)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    want = _conv_run("cpu", x, w, strides, padding, dilations)
    _close(_conv_run("gpu:0", x, w, strides, padding, dilations), want, 1e-4)  # TF32 off
    for kind in ("conv_fprop", "conv_dgrad", "conv_wgrad"):
        assert binding.COUNTS[kind] == 1, (kind, binding.refusals())
    tg.config.experimental.enable_tensor_float_32_execution(True)
    try:
        _close(_conv_run("gpu:0", x, w, strides, padding, dilations), want, 3e-3)
    finally:
        tg.config.experimental.enable_tensor_float_32_execution(False)
    for dtype, rtol in (("float16", 5e-3), ("bfloat16", 2e-2)):
        _close(_conv_run("gpu:0", x, w, strides, padding, dilations, dtype),
               _conv_run("cpu", x, w, strides, padding, dilations, dtype), rtol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,rtol", [("float16", 5e-3), ("bfloat16", 3e-2)])
@pytest.mark.parametrize("causal", [False, True])
def test_real_cudnn_attention(dtype, rtol, causal):
    _real_cudnn_or_skip()
    rng = np.random.default_rng(10)
    q = rng.standard_normal((2, 128, 4, 64))
    k, v = rng.standard_normal((2, 96, 4, 64)), rng.standard_normal((2, 96, 4, 64))
    want = _attention_run("cpu", q, k, v, dtype, causal)
    _close(_attention_run("gpu:0", q, k, v, dtype, causal), want, rtol)
    assert binding.COUNTS["sdpa_fwd"] == 2 and binding.COUNTS["sdpa_bwd"] == 1, \
        binding.refusals()
