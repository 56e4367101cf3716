"""The optional compiled core (tapegpu/_core.c, tapegpu/_cpu.c): built when a C compiler and
Python's headers are present; without them tapegpu runs its pure-Python tape and numpy (same
results, more overhead per op)."""
from setuptools import Extension, setup

# -O3 vectorizes _cpu.c's loops (with the baseline SSE2 of x86-64)
setup(ext_modules=[Extension(name, [path], optional=True, extra_compile_args=[opt])
                   for name, path, opt in (("tapegpu._core", "tapegpu/_core.c", "-O2"),
                                           ("tapegpu._cpu", "tapegpu/_cpu.c", "-O3"))])
