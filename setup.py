"""The optional compiled core: built when a C compiler and Python's headers are present; without
them tapegpu runs its pure-Python tape (same results, more overhead per op)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("tapegpu._core", ["tapegpu/_core.c"], optional=True,
                             extra_compile_args=["-O2"])])
