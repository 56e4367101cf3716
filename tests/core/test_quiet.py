"""core/quiet.py: np.errstate(divide="ignore", invalid="ignore") for a block, the other
settings kept, the state restored, nested blocks and threads independent."""
import threading
import warnings

import numpy as np

import tapegpu as tg
from tapegpu.core import quiet


def test_a_block_ignores_divide_and_invalid_and_keeps_the_rest():
    before = np.geterr()
    with np.errstate(over="raise", under="warn"):
        token = quiet.quiet_enter()
        try:
            assert np.geterr() == {"divide": "ignore", "over": "raise", "under": "warn",
                                   "invalid": "ignore"}
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                np.log(np.zeros(2))
                np.zeros(2) / np.zeros(2)
            inner = quiet.quiet_enter()
            quiet.quiet_exit(inner)
            assert np.geterr()["over"] == "raise" and np.geterr()["divide"] == "ignore"
        finally:
            quiet.quiet_exit(token)
        assert np.geterr()["divide"] == before["divide"] and np.geterr()["over"] == "raise"
    assert np.geterr() == before


def test_each_thread_keeps_its_own_state():
    seen = {}
    token = quiet.quiet_enter()
    try:
        t = threading.Thread(target=lambda: seen.update(np.geterr()))
        t.start()
        t.join()
    finally:
        quiet.quiet_exit(token)
    assert seen["divide"] == "warn"  # numpy's default, not this thread's block


def test_log_at_zero_and_its_gradient_warn_nothing():
    x = tg.constant(np.array([0.0, 1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = tg.math.log(x)
        g = tape.gradient(y, x)
    assert np.isinf(y.numpy()[0]) and np.isinf(g.numpy()[0])
