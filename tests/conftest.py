"""Every autodiff test runs on each device given by `--device` (default: numpy and cuda_emu).

`--device numpy` (or `cuda_emu`, `gpu`, `cuda_sim`, a comma-separated list, or `all`) chooses.
A test module that is about one device only (the kernel and emulator tests, docs, packaging)
sets `SINGLE_DEVICE = True`. Tests marked `gpu` need a real GPU and skip without one.

`cuda_sim` is tapegpu's real `cuda` backend (gpu:0) with CuPy replaced by the strict stand-in
of tests/support/cupy_sim (numpy underneath, CuPy's contract on top: no implicit host
conversion, CuPy's names only, linalg that never raises, wrapping indices; kernels through the
emulator). It is installed as `cupy` for the session when `--device` names it or when
TAPEGPU_TEST_CUPY_SIM=1 (then `all` includes it), and never where a real CuPy is importable.
With it, TAPEGPU_TEST_CUDNN_SIM=1 installs tests/support/cudnn_sim as `cudnn` for the session
(GPU convolutions and attention through tapegpu's cuDNN binding); the `cudnn_gpu` fixture
installs it for one test.
"""
import os
import sys

import numpy as np
import pytest


import tapegpu as tg  # noqa: E402
from tapegpu import backends as backend  # noqa: E402
from tapegpu.backends import checks  # noqa: E402
from tapegpu.core.options import options  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "support"))
import cupy_sim  # noqa: E402
import cudnn_sim  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--device", default="all",
                     help="devices to run the autodiff suite on: numpy, cuda_emu, gpu, a "
                          "comma-separated list, or 'all' (every one available here)")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a real GPU (skips without one)")
    # float32 products in full float32, as TensorFlow's own tests run: the suite checks float32
    # at float32's tolerances; the TF32 tests turn it on themselves
    tg.config.experimental.enable_tensor_float_32_execution(False)
    # a traced function's kernels compile before its first replay, so that the suite checks
    # the fused replay from the first call on (launch counts, bits); the background compile a
    # program gets by default is tested in tests/function/test_background_compile.py
    options.compile_in_background = False
    if _wants_sim(config) and _real_cupy() is None:
        cupy_sim.install()
        # TAPEGPU_TEST_CUDNN_SIM=1: the cuDNN frontend stand-in too, so that every GPU
        # convolution and attention of the run goes through tapegpu's cuDNN binding
        if os.environ.get("TAPEGPU_TEST_CUDNN_SIM", "") not in ("", "0") and \
                _real_cudnn() is None:
            cudnn_sim.install()


def _wants_sim(config):
    return os.environ.get("TAPEGPU_TEST_CUPY_SIM", "") not in ("", "0") or \
        "cuda_sim" in config.getoption("--device").split(",")


def _real_cupy():
    """The real CuPy's import spec, if one is installed (the stand-in then stays out)."""
    from importlib.util import find_spec
    if cupy_sim.installed():
        return None
    return find_spec("cupy")


def real_gpu_count():
    return 0 if cupy_sim.installed() else backend.gpu_count()


def _devices(config):
    opt = config.getoption("--device")
    if opt == "all":
        names = ["numpy"] + (["cuda_emu"] if backend.CudaEmuBackend.available() else [])
        names += [f"gpu:{i}" for i in range(real_gpu_count())]
        names += ["cuda_sim"] if cupy_sim.installed() else []
        return names
    return [d.strip() for d in opt.split(",") if d.strip()]


def pytest_generate_tests(metafunc):
    if "tg_device" in metafunc.fixturenames and \
            not getattr(metafunc.module, "SINGLE_DEVICE", False):
        metafunc.parametrize("tg_device", _devices(metafunc.config), indirect=True)


@pytest.fixture(autouse=True)
def tg_device(request):
    """Runs the test with its device as the current one."""
    name = getattr(request, "param", "numpy")
    with tg.device({"numpy": "cpu", "cuda_sim": "gpu:0"}.get(name, name)):
        yield name
    checks.clear()  # device checks a test queued and never read do not reach the next test


@pytest.fixture(autouse=True)
def _seed():
    np.random.seed(0)
    tg.random.set_seed(0)  # tapegpu's draws (and every op seed's stream) do not depend on the
    # tests run before, nor on how xdist distributes them


@pytest.fixture(autouse=True)
def _device_configuration():
    yield
    tg.core.config._reset_placement()  # logical devices, visibility and soft placement are
    # process-wide: a test (or a module's doctests) that set them leaves none to the next


def pytest_collection_modifyitems(config, items):
    # the slow tests (minutes: the Docker images' build) first, so that with `-n auto` they run
    # beside the rest instead of alone at the end
    items.sort(key=lambda item: "slow" not in item.keywords)
    if real_gpu_count():
        return
    skip = pytest.mark.skip(reason="needs a GPU (CuPy and a CUDA device); none here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cupy_gpu():
    """The CuPy stand-in as `cupy` for the test (installed if it is not, removed after if this
    fixture installed it), with tapegpu's GPU backends made fresh; yields the stand-in."""
    if not backend.CudaEmuBackend.available():
        pytest.skip(f"the stand-in runs kernels in the emulator: "
                    f"{backend.CudaEmuBackend.unavailable_reason()}")
    was = cupy_sim.installed()
    if not was and _real_cupy() is not None:
        pytest.skip("a real CuPy is installed; the stand-in does not shadow it")
    cupy = cupy_sim.install()
    saved = dict(backend._gpus)
    backend._gpus.clear()
    try:
        yield cupy
    finally:
        backend._gpus.clear()
        backend._gpus.update(saved)
        if not was:
            cupy_sim.uninstall()


@pytest.fixture
def cudnn_gpu(cupy_gpu):
    """The cuDNN frontend stand-in (tests/support/cudnn_sim) as `cudnn` on top of the CuPy
    stand-in, with tapegpu's cuDNN binding reset before and after; yields the stand-in."""
    from tapegpu.backends import cudnn as binding
    was = cudnn_sim.installed()
    if not was and _real_cudnn() is not None:
        pytest.skip("a real cuDNN frontend is installed; the stand-in does not shadow it")
    sim = cudnn_sim.install()
    binding.reset()
    sim.REFUSE.clear()
    sim.CALLS.clear()
    try:
        yield sim
    finally:
        sim.REFUSE.clear()
        if not was:
            cudnn_sim.uninstall()
        binding.reset()


def _real_cudnn():
    from importlib.util import find_spec
    return None if cudnn_sim.installed() else find_spec("cudnn")


@pytest.fixture
def two_gpus(cupy_gpu):
    """tapegpu's gpu:0 and gpu:1 on the CuPy stand-in with two devices, fresh backends and
    kernel caches; yields the stand-in."""
    old = cupy_sim.set_device_count(2)
    backend._gpus.clear()
    try:
        yield cupy_gpu
    finally:
        backend._gpus.clear()
        cupy_sim.set_device_count(old)
