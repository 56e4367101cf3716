"""Custom CUDA kernels: the launch layer, the numpy references, NVRTC checks.

``KernelSet`` launches the kernels of ``cuda_kernels/`` on numpy arrays
through the emulator (``KernelSet.emulated()``) or on CuPy arrays through
``cupy.RawModule``; ``reference`` holds what each kernel must compute;
``nvrtc`` compiles the sources for real GPUs without needing one.
This package imports only numpy and the standard library.
"""

from .launch import ACTIVATIONS, KERNEL_DIR, KERNELS, KernelSet, kernel_files, kernel_names

__all__ = ["ACTIVATIONS", "KERNEL_DIR", "KERNELS", "KernelSet", "kernel_files", "kernel_names"]
