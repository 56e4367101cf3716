"""A Keras metric's update_state from several threads loses no update: tapegpu's own metrics
(state on the host, `+=` under the metric's lock), eagerly and replayed by a tg.function, and
a custom metric whose state is `add_variable`s updated with assign_add.

A switch interval of 1 us makes the read-modify-write race show on every run (see
tests/core/test_variable_threads.py)."""
import sys
import threading

import numpy as np
import pytest

import tapegpu as tg

K = tg.keras
THREADS, ITERATIONS = 8, 500


@pytest.fixture(autouse=True)
def fast_thread_switches():
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def hammer(work, device):
    """Runs `work(thread index)` ITERATIONS times in each of THREADS threads, all started
    together on `device`."""
    start = threading.Barrier(THREADS)
    errors = []

    def run(i):
        try:
            with tg.device(device):
                start.wait()
                for _ in range(ITERATIONS):
                    work(i)
        except Exception as e:  # noqa: BLE001 (reported by the test's thread)
            errors.append(e)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _batches():
    """One (values, weights) batch per thread, different in each."""
    rng = np.random.default_rng(0)
    return [(rng.integers(0, 5, 4).astype(np.float32),
             rng.integers(1, 4, 4).astype(np.float32)) for _ in range(THREADS)]


def test_a_metrics_eager_update_state_loses_no_update():
    batches = _batches()
    total, mean = K.metrics.Sum(), K.metrics.Mean()

    def work(i):
        values, weights = batches[i]
        total.update_state(values)
        mean.update_state(values, sample_weight=weights)
    hammer(work, tg.constant(0.0).device)
    values = np.stack([b[0] for b in batches]).astype(np.float64)
    weights = np.stack([b[1] for b in batches]).astype(np.float64)
    assert float(total.result()) == ITERATIONS * values.sum()
    np.testing.assert_allclose(float(mean.result()),
                               (values * weights).sum() / weights.sum(), rtol=1e-6)


def test_a_metric_updated_by_a_traced_function_loses_no_update():
    batches = _batches()
    labels = np.array([0, 1, 2, 1])
    accuracy = K.metrics.SparseCategoricalAccuracy()
    step = tg.function(lambda y, p: accuracy.update_state(y, p))
    preds = [tg.constant(np.eye(3, dtype=np.float32)[b[0].astype(int) % 3]) for b in batches]
    y = tg.constant(labels)
    step(y, preds[0])  # traced here: counts as one update
    accuracy.reset_state()
    hammer(lambda i: step(y, preds[i]), y.device)
    hits = np.mean([np.mean(b[0].astype(int) % 3 == labels) for b in batches])
    np.testing.assert_allclose(float(accuracy.result()), hits, rtol=1e-6)
    assert accuracy.count == THREADS * ITERATIONS * len(labels)


class _Count(K.metrics.Metric):
    def __init__(self):
        super().__init__(name="count")
        self.n = self.add_variable(shape=(), initializer="zeros", name="n")

    def update_state(self, values):
        self.n.assign_add(tg.cast(tg.size(values), "float32"))

    def result(self):
        return self.n


@pytest.mark.parametrize("traced", [False, True])
def test_a_custom_metrics_variables_lose_no_update(traced):
    count = _Count()
    values = tg.ones((3,))
    update = tg.function(count.update_state) if traced else count.update_state
    update(values)
    hammer(lambda i: update(values), values.device)
    assert float(count.result()) == 3 * (THREADS * ITERATIONS + 1)
