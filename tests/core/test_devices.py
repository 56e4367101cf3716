"""Devices: selection, placement, errors, interop, kernel dispatch and launch counts."""
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.testing.launches import step_launches
from tapegpu import backends as backend
from tapegpu.autodiff import sweep

SINGLE_DEVICE = True  # these tests choose their devices themselves
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code, **env):
    full = {**os.environ, "PYTHONPATH": ROOT, **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, timeout=120)


def test_list_devices_and_default():
    types = [d.device_type for d in tg.config.list_devices()]
    assert "CPU" in types and "CUDA_EMU" in types
    if not backend.gpu_count():
        assert tg.config.default_device().endswith("CPU:0")


def test_tapegpu_device_env_sets_the_default():
    r = _run("import tapegpu as tg; print(tg.zeros(1).device)", TAPEGPU_DEVICE="cuda_emu")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("CUDA_EMU:0")
    r = _run("import tapegpu as tg; tg.zeros(1)", TAPEGPU_DEVICE="tpu")
    assert r.returncode != 0 and "unknown device 'tpu'" in r.stderr


def test_device_context_and_decorator_place_tensors():
    with tg.device("cuda_emu"):
        a = tg.ones(2)
        with tg.device("cpu"):
            b = tg.ones(2)
        c = tg.constant([1.0, 2.0]) * 2.0
    assert a.device.endswith("CUDA_EMU:0") and c.device.endswith("CUDA_EMU:0")
    assert b.device.endswith("CPU:0")

    @tg.device("cuda_emu")
    def make():
        return tg.zeros(3)
    assert make().device.endswith("CUDA_EMU:0")
    assert tg.zeros(1).device.endswith("CPU:0")


def test_copies_between_devices_and_gradients_follow_sources():
    x = tg.constant([0.5, -1.0, 2.0])
    xe = x.to("cuda_emu")
    assert xe.device.endswith("CUDA_EMU:0") and tg.copy_to(xe, "cpu").device.endswith("CPU:0")
    np.testing.assert_array_equal(xe.numpy(), x.numpy())
    with tg.GradientTape() as t:
        t.watch(xe)
        y = tg.reduce_sum(tg.nn.relu(xe) * xe)
    g = t.gradient(y, xe)
    assert g.device == xe.device
    np.testing.assert_allclose(g.numpy(), [1.0, 0.0, 4.0])


def test_mixing_devices_is_an_error_naming_both():
    with tg.device("cuda_emu"):
        a = tg.ones(2)
    with pytest.raises(tg.InvalidArgumentError, match="different devices.*cuda_emu.*cpu"):
        a + tg.ones(2)


def test_asking_for_a_missing_gpu_is_a_clear_error():
    if backend.gpu_count():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match=r"no such GPU here.*available devices: .*cpu"):
        tg.device("gpu")
    with pytest.raises(RuntimeError, match="gpu:3"):
        tg.ones(2).to("gpu:3")


def test_import_works_without_cupy_and_never_imports_it():
    r = _run("import sys, tapegpu as tg; tg.ones(2) + 1.0; print('cupy' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_kernels_run_forward_and_fused_backward_on_cuda_emu():
    launches = backend.CUDA_EMU.launches
    with tg.device("cuda_emu"):
        x = tg.constant(np.linspace(-1, 1, 50, dtype=np.float32))
        launches.clear()
        with tg.GradientTape() as t:
            t.watch(x)
            y = tg.reduce_sum(tg.tanh(x) * tg.nn.relu(x))
        g = t.gradient(y, x)
    assert launches["tapegpu_tanh_fwd_f32"] == 1 and launches["tapegpu_relu_fwd_f32"] == 1
    assert launches["tapegpu_tanh_bwd_f32"] == 1 and launches["tapegpu_relu_bwd_f32"] == 1
    xn = np.linspace(-1, 1, 50, dtype=np.float32)
    want = (1 - np.tanh(xn) ** 2) * np.maximum(xn, 0) + np.tanh(xn) * (xn > 0)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6, atol=1e-7)


def test_higher_order_sweeps_use_the_differentiable_rules_not_kernels():
    launches = backend.CUDA_EMU.launches
    with tg.device("cuda_emu"):
        x = tg.constant(np.array([0.3, -0.2]))
        with tg.GradientTape() as t2:
            t2.watch(x)
            with tg.GradientTape() as t1:
                t1.watch(x)
                y = tg.reduce_sum(tg.tanh(x))
            launches.clear()
            g = t1.gradient(y, x)  # t2 records this sweep: tensor mode, no fused kernel
            assert launches["tapegpu_tanh_bwd_f64"] == 0
        h = t2.gradient(g, x)
    xn = np.array([0.3, -0.2])
    np.testing.assert_allclose(h.numpy(), -2 * np.tanh(xn) * (1 - np.tanh(xn) ** 2))


def test_fusion_halves_launches_of_a_training_step():
    on = sum(step_launches(8, True, "relu").values())
    off = sum(step_launches(8, False, "relu").values())
    assert on <= 0.5 * off, (on, off)


def test_unbroadcast_kernel_sums_bias_gradients():
    with tg.device("cuda_emu"):
        x = tg.constant(np.arange(12.0).reshape(3, 4))
        b = tg.Variable(np.zeros(4))
        backend.CUDA_EMU.launches.clear()
        with tg.GradientTape() as t:
            y = tg.reduce_sum((x + b) * x)
        gb = t.gradient(y, b)
    np.testing.assert_array_equal(gb.numpy(), np.arange(12.0).reshape(3, 4).sum(0))
    assert sum(v for k, v in backend.CUDA_EMU.launches.items() if "sum_" in k) == 1


def test_dlpack_and_array_interop():
    a = np.arange(4.0)
    t = tg.from_dlpack(a)
    a[0] = 99.0
    assert t.numpy()[0] == 0.0  # host data is copied
    back = np.from_dlpack(t)
    np.testing.assert_array_equal(back, [0.0, 1.0, 2.0, 3.0])
    assert np.asarray(t).flags.writeable is False
    with pytest.raises(AttributeError, match="__cuda_array_interface__"):
        t.__cuda_array_interface__
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(torch.from_dlpack(t).numpy(), [0.0, 1.0, 2.0, 3.0])


def test_info_reports_backends_and_kernels():
    from tapegpu.cli import info
    r = info.report(check_kernels=False)
    assert "numpy (cpu)" in r["backends"] and r["tapegpu"] == tg.__version__
    r = _run("import tapegpu.__main__ as m; m.main(['info'])")
    assert r.returncode == 0, r.stderr
    assert "kernels_run (emulator): ok" in r.stdout and "default_device" in r.stdout


def test_the_wheel_holds_every_subpackage_and_the_kernel_sources(tmp_path):
    """A built wheel has every package of the tree, the CUDA sources and the emulator's
    header: the kernels are loaded from the package, nowhere else."""
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                        str(tmp_path), ROOT], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (wheel,) = tmp_path.glob("tapegpu-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for d, _, files in os.walk(os.path.join(ROOT, "tapegpu")):
        rel = os.path.relpath(d, ROOT)
        for f in files:
            if f.endswith((".py", ".cu", ".h", ".cpp")):
                assert f"{rel}/{f}".replace(os.sep, "/") in names, f"{rel}/{f} is not in the wheel"
    assert any(n.startswith("tapegpu/cuda_kernels/") and n.endswith(".cu") for n in names)
    assert not any(n.startswith("cuda_kernels/") for n in names)


@pytest.mark.gpu
def test_gpu_step_matches_cpu():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    results = []
    for dev in ("cpu", "gpu"):
        with tg.device(dev):
            wv = tg.Variable(w)
            with tg.GradientTape() as t:
                y = tg.reduce_sum(tg.nn.softmax(tg.nn.relu(tg.constant(x) @ wv)))
            results.append(t.gradient(y, wv).numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-4, atol=1e-6)
