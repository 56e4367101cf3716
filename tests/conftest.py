"""Every autodiff test runs on each device given by `--device` (default: numpy and cuda_emu).

`--device numpy` (or `cuda_emu`, `gpu`, a comma-separated list, or `all`) chooses. A test
module that is about one device only (the kernel and emulator tests, docs, packaging) sets
`SINGLE_DEVICE = True`. Tests marked `gpu` need a real GPU and skip without one.
"""
import os
import sys

import numpy as np
import pytest


import tapegpu as tg  # noqa: E402
from tapegpu import backends as backend  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--device", default="all",
                     help="devices to run the autodiff suite on: numpy, cuda_emu, gpu, a "
                          "comma-separated list, or 'all' (every one available here)")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a real GPU (skips without one)")


def _devices(config):
    opt = config.getoption("--device")
    if opt == "all":
        names = ["numpy"] + (["cuda_emu"] if backend.CudaEmuBackend.available() else [])
        names += [f"gpu:{i}" for i in range(backend.gpu_count())]
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
    with tg.device("cpu" if name == "numpy" else name):
        yield name


@pytest.fixture(autouse=True)
def _seed():
    np.random.seed(0)


def pytest_collection_modifyitems(config, items):
    if backend.gpu_count():
        return
    skip = pytest.mark.skip(reason="needs a GPU (CuPy and a CUDA device); none here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
