"""The CPU kernels (tapegpu/backends/_cpu.c) are optional: an install with a C compiler builds
them, and without them (TAPEGPU_PURE_PYTHON=1) the op, tape and model suites pass on numpy."""
import os
import shutil
import subprocess
import sys

import pytest

from tapegpu.backends import cpu_kernels

SINGLE_DEVICE = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_cpu_kernels_are_built_where_a_compiler_is():
    """Where a C compiler is (CI), the install builds the kernels: otherwise their paths would
    be skipped without anyone noticing."""
    if os.environ.get("TAPEGPU_PURE_PYTHON", "") not in ("", "0"):
        assert cpu_kernels is None
        return
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: numpy runs those ops")
    assert cpu_kernels is not None, \
        "tapegpu.backends._cpu is not built: reinstall with `pip install -e .`"


@pytest.mark.skipif(cpu_kernels is None, reason="numpy runs those ops here already")
def test_the_suites_pass_without_the_cpu_kernels():
    env = dict(os.environ, TAPEGPU_PURE_PYTHON="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        "-p", "no:xdist", "--device", "numpy", "tests/autodiff/test_tape.py",
                        "tests/autodiff/test_memory.py", "tests/ops/test_ops.py",
                        "tests/models/test_module_layers.py",
                        "tests/backends/test_cpu_kernels.py::"
                        "test_the_cpu_kernels_are_built_where_a_compiler_is"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and " failed" not in r.stdout
