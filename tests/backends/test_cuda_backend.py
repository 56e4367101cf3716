"""The GPU backend (tapegpu/backends/cuda.py) on the CuPy stand-in: one FMA policy for the
hand-written and the generated kernels, and kernels launched on their arrays' GPU whatever
CuPy's current device is."""
import os

import numpy as np
import pytest

import tapegpu as tg
from tapegpu import backends as backend
from tapegpu.backends.kernels import KERNEL_DIR, kernel_files, nvrtc
from tapegpu.backends.kernels.launch import NVRTC_OPTIONS
from tapegpu.function import fusion

SINGLE_DEVICE = True


@pytest.fixture
def modules(cupy_gpu, monkeypatch):
    """[(options, current device at load, [(kernel name, current device at launch)])] of every
    RawModule loaded and launched from now on."""
    loaded = []
    real = cupy_gpu.RawModule

    class Recording:
        def __init__(self, code=None, path=None, options=(), **kw):
            self.calls = []
            loaded.append((options, cupy_gpu.cuda.runtime.getDevice(), self.calls))
            self.module = real(code=code, path=path, options=options, **kw)

        def get_function(self, name):
            fn = self.module.get_function(name)

            def call(grid, block, args, **kw):
                self.calls.append((name, cupy_gpu.cuda.runtime.getDevice()))
                return fn(grid, block, args, **kw)
            return call
    monkeypatch.setattr(cupy_gpu, "RawModule", Recording)
    monkeypatch.setattr(fusion, "_compiled", {})
    return loaded


def test_hand_written_and_generated_kernels_compile_with_fmad_false(modules):
    assert "--fmad=false" in NVRTC_OPTIONS
    with tg.device("gpu:0"):
        x = tg.constant(np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8))
        tg.nn.softmax(x)  # a hand-written kernel (cuda_kernels/softmax.cu)
        f = tg.function(lambda x: tg.reduce_sum(tg.abs(x * 2.0 - 1.0), axis=0))
        f(x)
        f(x)  # a generated kernel
    assert len(modules) >= 2 and any(calls for _, _, calls in modules)
    assert {options for options, _, _ in modules} == {NVRTC_OPTIONS}


def test_kernels_load_and_launch_on_their_arrays_gpu(two_gpus, modules):
    with tg.device("gpu:1"):
        x = tg.constant(np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8))
        f = tg.function(lambda x: tg.reduce_sum(tg.abs(x * 2.0 - 1.0), axis=0))
        f(x)
    assert two_gpus.cuda.runtime.getDevice() == 0  # CuPy's current device, outside the block
    y = tg.nn.softmax(x)  # an op on gpu:1's tensor, outside any tg.device block
    # f again in the block: outside it the default device differs, so f would be traced again,
    # and a trace computes its elementwise ops (CuPy's ufuncs) on CuPy's current device (GPU 0:
    # a known limit of ops on another GPU's tensors outside a tg.device block; kernels launch
    # on their arrays' GPU)
    with tg.device("gpu:1"):
        f(x)
        out = f(x)  # a replay: its fused kernel
    launched = [(name, device) for _, _, calls in modules for name, device in calls]
    assert any(name.startswith("tapegpu_softmax") for name, _ in launched)
    assert any(name.startswith("tg_fused") for name, _ in launched)
    assert {device for _, device in launched} == {1}
    assert {device for _, device, _ in modules} == {1}
    assert y.device.endswith("GPU:1") and out.device.endswith("GPU:1")
    np.testing.assert_allclose(y.numpy().sum(axis=1), 1.0, rtol=1e-6)


@pytest.mark.skipif(not nvrtc.available(), reason=f"NVRTC unavailable: {nvrtc.reason()}")
@pytest.mark.parametrize("file", kernel_files())
def test_every_kernel_file_compiles_with_the_gpu_options(file):
    ptx, _ = nvrtc.compile_file(os.path.join(KERNEL_DIR, file + ".cu"),
                                options=NVRTC_OPTIONS[1:])  # compile_source adds -std=c++17
    if file == "optimizers":  # arithmetic and sqrt only: no a * b + c contracted into an FMA
        assert "fma.rn" not in ptx
