"""`python -m tapegpu info`: version, backends, GPUs, whether the kernels compile (NVRTC) and
run (the emulator), whether tg.function fuses (generated C++ kernels), which path convolutions
and attention take on GPUs (cuDNN or im2col + cuBLAS / explicit), and the default device."""
import argparse
import glob
import os
import platform
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from importlib import metadata
from importlib.util import find_spec

import numpy as np

import tapegpu as tg
from .. import backends as backend
from ..backends import cpu_kernels
from ..backends import cudnn
from ..backends.kernels import ACTIVATIONS, KERNEL_DIR, kernel_files, nvrtc
from ..core.options import options
from ..core import recording
from ..function import fusion
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
        major = cupy_cuda_major()
        return cupy.__version__ + (f" (for CUDA {major})" if major else "")
    except Exception as e:
        return f"installed but not importable: {e}"


# the oldest Linux driver each CUDA major runs on (NVIDIA's minor-version compatibility)
MIN_DRIVER = {12: "525.60.13", 13: "580.65.06"}


def cupy_cuda_major():
    """The CUDA major version of the installed CuPy wheel (cupy-cuda12x: 12), or None."""
    for major in sorted(MIN_DRIVER):
        try:
            metadata.version(f"cupy-cuda{major}x")
            return major
        except metadata.PackageNotFoundError:
            continue
    return None


def why_no_gpu():
    """Why CuPy sees no GPU: CuPy's own error and what to do about it, for this CuPy's CUDA
    major version ('' when a GPU is usable)."""
    if find_spec("cupy") is None:
        return "CuPy is not installed: pip install 'tapegpu[cuda12]' (NVIDIA driver >= " \
               f"{MIN_DRIVER[12]}) or 'tapegpu[cuda13]' (driver >= {MIN_DRIVER[13]})"
    major = cupy_cuda_major()
    cuda = f"CUDA {major}" if major else "its CUDA"
    try:
        import cupy  # optional: only where a GPU install is
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CuPy's error says it best (driver too old, no device, no library)
        error = f"CuPy says {type(e).__name__}: {e}".rstrip(": ")
        text = str(e).lower()
        if "insufficient" in text or "driver version" in text:
            hint = f"the NVIDIA driver is too old for {cuda}" + (
                f" (needs >= {MIN_DRIVER[major]})" if major else "") + \
                "; update it, or install the CuPy of the CUDA that `nvidia-smi` shows"
        elif "no cuda-capable device" in text or "nodevice" in text:
            hint = "no GPU is visible (CUDA_VISIBLE_DEVICES? a container started without " \
                   "--gpus all?)"
        elif major:
            hint = f"pip install 'cupy-cuda{major}x[ctk]' brings CUDA {major}'s libraries " \
                   f"(runtime, NVRTC, cuBLAS, cuSOLVER) from PyPI; the driver must be >= " \
                   f"{MIN_DRIVER[major]}"
        else:
            hint = "pip install 'tapegpu[cuda12]' installs CuPy with its CUDA libraries"
        return f"{error}; {hint}"
    return "" if n > 0 else f"CuPy finds no CUDA device (driver for {cuda} present, 0 GPUs)"


def _nvrtc():
    """Whether every kernel file compiles for compute_80 with NVRTC (no GPU needed)."""
    if not nvrtc.available():
        major = cupy_cuda_major()
        if major == 12:  # the wheels that match CuPy for CUDA 12 (the nvrtc extra is CUDA 13's)
            return f"unavailable: {nvrtc.reason().split('; pip install')[0]}; pip install " \
                   "'cuda-bindings==12.*' 'nvidia-cuda-nvrtc-cu12==12.*'"
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


def _fusion_probe(x, m=tg):
    """A chain long enough to be fused on the CPU (fusion.HOST_MIN_OPS)."""
    for _ in range(fusion.HOST_MIN_OPS // 2):
        x = m.sin(x) * 2.0
    return x


def _fusion():
    """Whether tg.function's fusion builds and runs a kernel on the CPU, checked against the
    unfused replay; else why it replays unfused."""
    if not options.fusion:
        return "off (TAPEGPU_FUSION=0): traced functions replay unfused"
    try:
        with tg.device("cpu"):
            x = tg.constant(np.linspace(-2.0, 2.0, 37))
            f = tg.function(_fusion_probe)
            f(x)
            fusion.wait_compiled()  # a cold kernel cache compiles in the background
            got = f(x).numpy()
            kernels = getattr(f.get_concrete_function(x)._plan.graph, "fused", [])
    except Exception as e:
        return f"FAILED: {e}"
    if not kernels:
        return f"unavailable ({fusion.unavailable_reason('numpy') or 'no kernel made'}): " \
            "traced functions replay unfused"
    if not np.array_equal(got, _fusion_probe(np.linspace(-2.0, 2.0, 37), np)):
        return "FAILED: a fused kernel disagrees with numpy"
    return "ok (C++ kernels on numpy; one built, run and checked)"


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
        return ("yes (tapegpu.backends._cpu: bias + activation, convolution and pooling, "
                "outer products, fused kernels)") if long else "built"
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
    """Whether the per-op recording runs compiled (core/_record.c) or in Python."""
    if recording.compiled is not None:
        return "compiled (tapegpu.core._record)"
    if os.environ.get("TAPEGPU_PURE_PYTHON", "") not in ("", "0"):
        return "Python (TAPEGPU_PURE_PYTHON is set)"
    return "Python (not built: a C compiler at install builds it; same results, slower per op)"


def cudnn_status():
    """Which path convolutions and attention take on a GPU, and why."""
    ok, why = cudnn.status()
    if not ok:
        return f"im2col + cuBLAS, explicit attention: {why}"
    return (f"{why}: conv forward and gradients (float32, float16, bfloat16) and attention "
            f"(float16, bfloat16, head_dim a multiple of 8 up to {cudnn.SDPA_HEAD_DIMS[1]}, "
            "no bias or mask) through cuDNN; the rest, and what cuDNN refuses, im2col + cuBLAS "
            "and explicit attention")


def _default_device():
    try:
        return backend._default().device
    except (RuntimeError, ValueError) as e:  # TAPEGPU_DEVICE names a device not here
        return f"error: TAPEGPU_DEVICE={os.environ.get('TAPEGPU_DEVICE')!r}: {e}"


def _kernel_cache():
    from ..backends.emu import build
    return build.cache_summary()


def _blas_threads():
    from ..core import config
    n = config.blas_threads()
    if n is None:
        return ("no BLAS found (threadpoolctl)" if config.threadpoolctl is not None else
                "numpy's own (threadpoolctl is not installed: pip install threadpoolctl)")
    why = (f"as {', '.join(f'{k}={v}' for k, v in config.blas_variables().items())} set"
           if config.blas_variables() else f"tapegpu's default for {config.cores()} cores")
    intra = config.get_intra_op_parallelism_threads()
    return f"{n} ({why})" if not intra else f"{n} (set_intra_op_parallelism_threads({intra}))"


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
        "gpus": _gpus() or f"none: {why_no_gpu() or 'no device'}",
        "cudnn": cudnn_status(),
        "default_device": _default_device(),
        "kernel cache": _kernel_cache(),
        "blas threads": _blas_threads(),
    }
    if check_kernels:
        out["kernels_compile (nvrtc)"] = _nvrtc()
        out["kernels_run (emulator)"] = _emulator()
        out["fusion (tg.function)"] = _fusion()
    return out


def main(argv=None):
    """`python -m tapegpu info [--no-kernel-checks]`: prints the report; returns 0, or 1 with a
    one-line error when TAPEGPU_DEVICE names a device this machine lacks."""
    parser = argparse.ArgumentParser(prog="python -m tapegpu info",
                                     description="Versions, backends, GPUs and kernel status.")
    parser.add_argument("--no-kernel-checks", action="store_true",
                        help="skip compiling (NVRTC) and running (emulator) the CUDA kernels")
    args = parser.parse_args(argv)
    out = report(check_kernels=not args.no_kernel_checks)
    for k, v in out.items():
        print(f"{k:>24}: {v}")
    if out["default_device"].startswith("error: "):
        print(f"python -m tapegpu info: {out['default_device']}", file=sys.stderr)
        return 1
    return 0
