"""The optional compiled core (tapegpu/_core.c, tapegpu/_cpu.c): built when a C compiler and
Python's headers are present; without them tapegpu runs its pure-Python tape and numpy (same
results, more overhead per op)."""
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# -O3 vectorizes _cpu.c's loops (with the baseline SSE2 of x86-64); gcc and clang spelling
OPTIMIZE = {"tapegpu._core": "-O2", "tapegpu._cpu": "-O3"}


class BuildExt(build_ext):
    def build_extensions(self):
        if self.compiler.compiler_type == "unix":
            for ext in self.extensions:
                ext.extra_compile_args = [OPTIMIZE[ext.name]]
        super().build_extensions()


setup(ext_modules=[Extension(name, [name.replace(".", "/") + ".c"], optional=True)
                   for name in OPTIMIZE],
      cmdclass={"build_ext": BuildExt})
