"""The pure-Python tape (no compiled core): the tape suite passes with it, and an install
with a C compiler does build the core."""
import os
import shutil
import subprocess
import sys

import pytest

from tapegpu.compiled import core

SINGLE_DEVICE = True
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_core_is_built_where_a_compiler_is():
    """Where a C compiler is (CI), the install builds the core: otherwise the compiled paths
    would be skipped without anyone noticing."""
    if os.environ.get("TAPEGPU_PURE_PYTHON", "") not in ("", "0"):
        assert core is None
        return
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: the pure-Python tape runs")
    assert core is not None, "tapegpu._core is not built: reinstall with `pip install -e .`"


@pytest.mark.skipif(core is None, reason="the pure-Python tape is what the suite runs here")
def test_the_tape_suite_passes_without_the_compiled_core():
    env = dict(os.environ, TAPEGPU_PURE_PYTHON="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        "-p", "no:xdist", "tests/test_tape.py", "tests/test_memory.py",
                        "tests/test_ops.py", "tests/test_forward.py",
                        "tests/test_pure_python.py::test_the_core_is_built_where_a_compiler_is"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and " failed" not in r.stdout
