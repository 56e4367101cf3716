"""Every kernel file compiles with NVRTC for real GPUs, warnings as errors, and
exports exactly the entry points the launch table expects.

Needs the PyPI packages cuda-bindings and nvidia-cuda-nvrtc (no GPU)."""

SINGLE_DEVICE = True  # about the kernels themselves, not a tapegpu device

import os

import pytest

from tapegpu.backends.kernels import KERNEL_DIR, kernel_files, kernel_names, nvrtc

pytestmark = pytest.mark.skipif(not nvrtc.available(), reason=f"NVRTC unavailable: {nvrtc.reason()}")


@pytest.mark.parametrize("arch", nvrtc.ARCHS)
@pytest.mark.parametrize("file", kernel_files())
def test_kernel_file_compiles(file, arch):
    ptx, entries = nvrtc.compile_file(os.path.join(KERNEL_DIR, file + ".cu"), arch)
    assert f".target sm_{arch.split('_')[1]}" in ptx
    assert entries == kernel_names(file)


def test_warnings_are_errors():
    source = 'extern "C" __global__ void k(float *y) { int unused = 3; y[threadIdx.x] = 1.0f; }'
    with pytest.raises(nvrtc.NvrtcError, match=r"(?s)unused.*declared but never referenced"):
        nvrtc.compile_source(source, "unused.cu")


def test_host_only_constructs_are_rejected():
    """What g++ (and so the emulator) accepts but NVRTC does not."""
    source = '#include <cstdint>\nextern "C" __global__ void k(int64_t *y) { y[0] = 1; }'
    with pytest.raises(nvrtc.NvrtcError, match="cstdint"):
        nvrtc.compile_source(source, "include.cu")


def test_entry_names_from_ptx():
    ptx = ".visible .entry tapegpu_a_fwd_f32(\n.param .u64 p)\n.visible .entry b(\n"
    assert nvrtc.entry_names(ptx) == ["b", "tapegpu_a_fwd_f32"]


def test_status():
    assert nvrtc.status().startswith("NVRTC 1")


def test_compiling_leaves_the_interpreters_shared_bytes_alone():
    """An empty log is one byte (NVRTC's NUL): written into `b" " * 1`, which is the
    interpreter's shared b" ", it made every later b" " (and text encoded through it, such as
    print's separator into a captured stream) a NUL byte."""
    nvrtc.compile_source('extern "C" __global__ void k() {}', "k.cu", "compute_80")
    assert b" "[0] == 32 and " ".encode()[0] == 32  # (bytes([32]) is that shared object too)
