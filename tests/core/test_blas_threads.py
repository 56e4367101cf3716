"""tg.config.threading sizes numpy's BLAS: cores - 1 threads by default (no oversubscription of a
loaded machine), the BLAS variables when set, the intra-op setting when given.

Each case runs in a fresh process with a chosen CPU affinity, since the BLAS is sized at import.
"""
import json
import os
import subprocess
import sys

import pytest

SINGLE_DEVICE = True  # the BLAS is the CPU's, whatever the device (see conftest.py)
VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")

pytest.importorskip("threadpoolctl")
pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                                reason="needs os.sched_setaffinity (Linux) to choose the cores")


def blas_threads_in_child(cores, body, env=None):
    """Run `body` (which prints one JSON line) in a fresh Python on `cores` CPUs."""
    available = sorted(os.sched_getaffinity(0))
    if len(available) < cores:
        pytest.skip(f"needs {cores} CPUs, this process may use {len(available)}")
    code = (f"import os; os.sched_setaffinity(0, {available[:cores]!r})\n"
            "import json, threadpoolctl\n" + body)
    clean = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    out = subprocess.run([sys.executable, "-c", code], env={**clean, **(env or {})},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


BLAS = ("[l['num_threads'] for l in threadpoolctl.threadpool_info() "
        "if l['user_api'] == 'blas']")


def test_default_leaves_a_core_to_the_rest_of_the_machine():
    # numpy first (its BLAS loaded with a thread per core), then tapegpu resizes it
    got = blas_threads_in_child(2, "import numpy\nbefore = " + BLAS + "\nimport tapegpu as tg\n"
                                "print(json.dumps([before, " + BLAS + ", "
                                "tg.config.threading.get_intra_op_parallelism_threads()]))")
    before, after, intra = got
    if not after:
        pytest.skip("numpy has no BLAS that threadpoolctl finds")
    assert before == [2] * len(before)  # numpy's own default: one thread per core
    assert after == [1] * len(after)
    assert intra == 0                   # TensorFlow's value for "the system's choice"


def test_one_core_gets_one_thread():
    got = blas_threads_in_child(1, "import tapegpu\nprint(json.dumps(" + BLAS + "))")
    assert set(got) <= {1}


def test_a_blas_variable_set_by_the_user_wins_over_the_default():
    got = blas_threads_in_child(2, "import tapegpu as tg\nfirst = " + BLAS + "\n"
                                "tg.config.threading.set_intra_op_parallelism_threads(1)\n"
                                "one = " + BLAS + "\n"
                                "tg.config.threading.set_intra_op_parallelism_threads(0)\n"
                                "print(json.dumps([first, one, " + BLAS + "]))",
                                env={"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"})
    first, one, back = got
    if not first:
        pytest.skip("numpy has no BLAS that threadpoolctl finds")
    assert first == [2] * len(first)
    assert one == [1] * len(one)
    assert back == first  # 0 restores what the variables said, not tapegpu's default


def test_intra_op_setting_resizes_the_blas_at_once():
    got = blas_threads_in_child(2, "import tapegpu as tg\nt = tg.config.threading\n"
                                "t.set_intra_op_parallelism_threads(2)\na = " + BLAS + "\n"
                                "t.set_intra_op_parallelism_threads(0)\nb = " + BLAS + "\n"
                                "from tapegpu.core import config\n"
                                "print(json.dumps([a, b, config.blas_threads(), "
                                "config.default_blas_threads()]))")
    a, b, reading, default = got
    if not a:
        pytest.skip("numpy has no BLAS that threadpoolctl finds")
    assert a == [2] * len(a)
    assert b == [1] * len(b)
    assert reading == 1 and default == 1
