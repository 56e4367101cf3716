"""The package layout and the optional compiled parts.

Layout: the packages under tapegpu/, and the repository's top-level cuda_kernels/ mapped into
the package as `tapegpu/cuda_kernels/` (package data: the .cu files), so that an install loads
the kernels from the package and nowhere else (tapegpu/backends/kernels/launch.py).

Compiled parts, built when a C compiler and Python's headers are present; without them tapegpu
runs the same in Python and numpy, with the same results:
- tapegpu/backends/_cpu.c: numpy's CPU kernels (one-pass bias + activation and the
  activations' backward, their per-element functions generated from the ops' expressions into
  tapegpu/backends/_activations.h; per-example outer products, convolution's im2col/col2im and
  Winograd transforms, max pooling, the caller of tg.function's fused kernels);
- tapegpu/core/_record.c: Recorder.record and registry.wrap, the per-op bookkeeping of a recording tape."""
from setuptools import Extension, find_namespace_packages, setup
from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    def build_extensions(self):
        if self.compiler.compiler_type == "unix":  # -O3 vectorizes the loops (gcc, clang);
            for ext in self.extensions:  # no fused multiply-adds: the kernels compute the
                ext.extra_compile_args = ["-O3", "-ffp-contract=off"]  # rules' IEEE operations
        super().build_extensions()


DEPENDS = {"tapegpu.backends._cpu": ["tapegpu/backends/_activations.h"]}

setup(packages=find_namespace_packages(include=["tapegpu*"], exclude=["tapegpu.cuda_kernels"])
      + ["tapegpu.cuda_kernels"],
      package_dir={"tapegpu.cuda_kernels": "cuda_kernels"},
      package_data={"tapegpu.backends": ["_activations.h"],
                    "tapegpu.backends.emu": ["*.h", "*.cpp"],
                    "tapegpu.cuda_kernels": ["*.cu"]},
      ext_modules=[Extension(name, [name.replace(".", "/") + ".c"], optional=True,
                             depends=DEPENDS.get(name, []))
                   for name in ("tapegpu.backends._cpu", "tapegpu.core._record")],
      cmdclass={"build_ext": BuildExt})
