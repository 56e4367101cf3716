"""The optional CPU kernels (tapegpu/backends/_cpu.c): built when a C compiler and Python's
headers are present; without them numpy runs those ops (same results, one or two more passes
over memory)."""
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    def build_extensions(self):
        if self.compiler.compiler_type == "unix":  # -O3 vectorizes the loops (gcc, clang)
            for ext in self.extensions:
                ext.extra_compile_args = ["-O3"]
        super().build_extensions()


setup(ext_modules=[Extension("tapegpu.backends._cpu", ["tapegpu/backends/_cpu.c"], optional=True)],
      cmdclass={"build_ext": BuildExt})
