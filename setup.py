"""The optional compiled parts, built when a C compiler and Python's headers are present; without
them tapegpu runs the same in Python and numpy, with the same results:
- tapegpu/backends/_cpu.c: numpy's CPU kernels (one-pass bias + activation and its backward,
  per-example outer products, convolution's im2col/col2im and Winograd transforms, max pooling,
  the caller of tg.function's fused kernels);
- tapegpu/autodiff/_record.c: Recorder.record, the per-op bookkeeping of a recording tape."""
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    def build_extensions(self):
        if self.compiler.compiler_type == "unix":  # -O3 vectorizes the loops (gcc, clang)
            for ext in self.extensions:
                ext.extra_compile_args = ["-O3"]
        super().build_extensions()


setup(ext_modules=[Extension(name, [name.replace(".", "/") + ".c"], optional=True)
                   for name in ("tapegpu.backends._cpu", "tapegpu.autodiff._record")],
      cmdclass={"build_ext": BuildExt})
