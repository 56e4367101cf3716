"""`python -m tapegpu info`: version, backends, GPUs, whether the kernels compile (NVRTC) and
run (the emulator), and the default device."""
import argparse
import glob
import os
import platform
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from importlib.util import find_spec

import numpy as np

import tapegpu as tg
from .. import backends as backend
from ..backends import cpu_kernels
from ..backends.kernels import ACTIVATIONS, KERNEL_DIR, kernel_files, nvrtc
from ..autodiff import recorder
from ..ops.registry import REGISTRY


def _gpus():
    out = []
    for i in range(backend.gpu_count()):
        try:
            out.append({"device": f"gpu:{i}", **backend.gpu(i).properties()})
        except Exception as e:  # report, don't fail: info is for diagnosing installs
            out.append({"device": f"gpu:{i}", "error": str(e)})
    return out


def _cupy():
    if find_spec("cupy") is None:
        return "not installed (pip install 'tapegpu[cuda12]' or '[cuda13]' for a GPU)"
    try:
        import cupy  # optional: only where a GPU install is
        return cupy.__version__
    except Exception as e:
        return f"installed but not importable: {e}"


def _nvrtc():
    """Whether every kernel file compiles for compute_80 with NVRTC (no GPU needed)."""
    if not nvrtc.available():
        return f"unavailable: {nvrtc.reason()}"
    try:
        for f in kernel_files():
            nvrtc.compile_file(os.path.join(KERNEL_DIR, f + ".cu"), "compute_80")
    except Exception as e:
        return f"FAILED: {e}"
    return f"ok ({len(kernel_files())} files, compute_80)"


def _emulator():
    """Whether the emulator builds and runs a kernel, checked against its op's reference."""
    if not backend.CudaEmuBackend.available():
        return f"unavailable: {backend.CudaEmuBackend.unavailable_reason()}"
    name = ACTIVATIONS[0]
    try:
        x = np.linspace(-2, 2, 37)
        got = backend.CUDA_EMU.kernels.act_fwd(name, x)
        if not np.allclose(got, REGISTRY[name].forward(np, x), rtol=1e-12):
            return f"FAILED: the {name} kernel disagrees with numpy"
    except Exception as e:
        return f"FAILED: {e}"
    return f"ok ({name} kernel run and checked)"


PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def built_copies_elsewhere(package_dir=PACKAGE_DIR, paths=None):
    """Other copies of the package on `paths` (default `sys.path`) whose CPU kernels are built.

    `pip install .` builds the kernels into the installed copy (site-packages) only; Python run
    from the repository's root imports `./tapegpu` first, which has none. This finds the copies
    that the import shadowed."""
    here = os.path.realpath(package_dir)
    found = []
    for entry in sys.path if paths is None else paths:
        candidate = os.path.realpath(os.path.join(entry or os.getcwd(), "tapegpu"))
        if candidate == here or candidate in found:
            continue
        built = [path for suffix in EXTENSION_SUFFIXES
                 for path in glob.glob(os.path.join(candidate, "backends", "_cpu" + suffix))]
        if built:
            found.append(candidate)
    return found


def cpu_kernels_status(long=True):
    """Whether the CPU kernels are built; when not, why, and whether an installed copy shadowed
    by this one (a source tree) has them."""
    if cpu_kernels is not None:
        return "yes (tapegpu.backends._cpu: bias + ReLU forward, ReLU backward)" if long \
            else "built"
    if os.environ.get("TAPEGPU_PURE_PYTHON", "") not in ("", "0"):
        return "off (TAPEGPU_PURE_PYTHON is set): numpy runs those ops" if long \
            else "off (TAPEGPU_PURE_PYTHON)"
    elsewhere = built_copies_elsewhere()
    if elsewhere:
        return (f"not built in the copy imported ({PACKAGE_DIR}), but built in the installed "
                f"copy {elsewhere[0]}, which this one shadows: run from another directory, or "
                "install with `pip install -e .` (which builds them in place)")
    if long:
        return "no: not built (a C compiler at install builds them); numpy runs those ops"
    return "not built"


def recorder_status():
    """Whether the per-op recording runs compiled (autodiff/_record.c) or in Python."""
    if recorder._record is not None:
        return "compiled (tapegpu.autodiff._record)"
    if os.environ.get("TAPEGPU_PURE_PYTHON", "") not in ("", "0"):
        return "Python (TAPEGPU_PURE_PYTHON is set)"
    return "Python (not built: a C compiler at install builds it; same results, slower per op)"


def report(check_kernels=True):
    """A dict: versions, devices, GPUs, kernel status, default device."""
    out = {
        "tapegpu": tg.__version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpu kernels": cpu_kernels_status(),
        "recorder": recorder_status(),
        "cupy": _cupy(),
        "backends": [f"{b.name} ({b.short})" for b in backend.available()],
        "gpus": _gpus() or "none",
        "default_device": backend._default().device,
    }
    if check_kernels:
        out["kernels_compile (nvrtc)"] = _nvrtc()
        out["kernels_run (emulator)"] = _emulator()
    return out


def main(argv=None):
    """`python -m tapegpu info [--no-kernel-checks]`: prints the report; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m tapegpu info",
                                     description="Versions, backends, GPUs and kernel status.")
    parser.add_argument("--no-kernel-checks", action="store_true",
                        help="skip compiling (NVRTC) and running (emulator) the CUDA kernels")
    args = parser.parse_args(argv)
    for k, v in report(check_kernels=not args.no_kernel_checks).items():
        print(f"{k:>24}: {v}")
    return 0
