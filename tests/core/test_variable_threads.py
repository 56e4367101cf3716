"""Variable.assign_add / assign_sub from several threads lose no update, eagerly and through a
tg.function's replay (TF's resource variables lose none).

The race they guard against is a read-modify-write: read the value, add, write back. Python
switches threads every 5 ms by default, which hides it; a switch interval of 1 us makes it show
on every run (without the variable's lock, over half the updates are lost)."""
import sys
import threading

import numpy as np
import pytest

import tapegpu as tg

THREADS, ITERATIONS = 8, 1000


@pytest.fixture(autouse=True)
def fast_thread_switches():
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def hammer(work, device):
    """Runs `work()` ITERATIONS times in each of THREADS threads, all started together on
    `device` (the test's: a thread starts on the default device)."""
    start = threading.Barrier(THREADS)
    errors = []

    def run():
        try:
            with tg.device(device):
                start.wait()
                for _ in range(ITERATIONS):
                    work()
        except Exception as e:  # noqa: BLE001 (reported by the test's thread)
            errors.append(e)
    threads = [threading.Thread(target=run) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_eager_assign_add_loses_no_update():
    v = tg.Variable(np.zeros(3, np.float32))
    delta = np.array([1.0, 2.0, 0.5], np.float32)
    hammer(lambda: v.assign_add(delta), v.device)
    np.testing.assert_array_equal(v.numpy(), THREADS * ITERATIONS * delta)


def test_eager_assign_add_and_assign_sub_interleave_without_loss():
    v = tg.Variable(10.0)
    up, down = tg.constant(3.0), tg.constant(1.0)

    def work():
        v.assign_add(up)
        v.assign_sub(down)
    hammer(work, v.device)
    assert float(v) == 10.0 + THREADS * ITERATIONS * (3.0 - 1.0)


def test_traced_assign_add_loses_no_update():
    v = tg.Variable(0, dtype="int64")
    step = tg.function(lambda d: v.assign_add(d, read_value=False))
    delta = tg.constant(3, dtype="int64")
    step(delta)  # traced here, once
    hammer(lambda: step(delta), v.device)
    assert int(v) == 3 * (THREADS * ITERATIONS + 1)


def test_traced_assign_sub_loses_no_update():
    v = tg.Variable(0.0)
    step = tg.function(lambda: v.assign_sub(0.25, read_value=False))
    step()
    hammer(step, v.device)
    assert float(v) == -0.25 * (THREADS * ITERATIONS + 1)
