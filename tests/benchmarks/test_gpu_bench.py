"""benchmarks/gpu.py's own cases (launch latency, the MLP step against CuPy by hand) run under
the strict CuPy stand-in, so the code a GPU machine runs first is exercised here."""
import importlib.util
import os
import sys

import numpy as np
import pytest

import tapegpu as tg
from tapegpu import backends as backend

SINGLE_DEVICE = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
import cupy_sim  # noqa: E402


@pytest.fixture
def gpu():
    if not backend.CudaEmuBackend.available():
        pytest.skip(f"the stand-in runs kernels in the emulator: "
                    f"{backend.CudaEmuBackend.unavailable_reason()}")
    was = cupy_sim.installed()
    if not was and importlib.util.find_spec("cupy") is not None:
        pytest.skip("a real CuPy is installed; the stand-in does not shadow it")
    cupy = cupy_sim.install()
    saved = dict(backend._gpus)
    backend._gpus.clear()
    spec = importlib.util.spec_from_file_location("_bench_gpu",
                                                  os.path.join(ROOT, "benchmarks", "gpu.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        yield mod, cupy
    finally:
        backend._gpus.clear()
        backend._gpus.update(saved)
        if not was:
            cupy_sim.uninstall()


def test_the_hand_written_cupy_step_matches_tapegpu_and_both_update(gpu):
    mod, cupy = gpu
    cases = mod.mlp_cases(tg, cupy, sizes=(12, 16, 16, 5), batch=8)
    a, b = cases["tapegpu"](), cases["cupy by hand"]()
    assert len(a) == len(b) == 6
    for u, v in zip(a, b):
        np.testing.assert_allclose(cupy.asnumpy(u), cupy.asnumpy(v), rtol=1e-4, atol=1e-6)
    # both applied their SGD update: the second step's gradients differ from the first's
    a2, b2 = cases["tapegpu"](), cases["cupy by hand"]()
    assert not np.allclose(cupy.asnumpy(a2[0]), cupy.asnumpy(a[0]))
    np.testing.assert_allclose(cupy.asnumpy(a2[0]), cupy.asnumpy(b2[0]), rtol=1e-4, atol=1e-6)


def test_compare_and_latency_report_positive_times(gpu):
    mod, cupy = gpu
    r = mod.compare_mlp(tg, cupy, repeats=3, sizes=(12, 16, 16, 5), batch=8)
    assert r["tapegpu_ms"] > 0 and r["cupy_ms"] > 0 and r["ratio"] > 0
    lat = mod.launch_latency(tg, cupy, calls=20)
    assert lat["tapegpu_us"] > 0 and lat["cupy_us"] > 0
