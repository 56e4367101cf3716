"""tg.queue.FIFOQueue: TF 2's eager semantics (order, capacity, blocking, close)."""
import threading
import time

import numpy as np
import pytest

import tapegpu as tg


def test_fifo_order_many_and_names():
    q = tg.queue.FIFOQueue(capacity=5, dtypes=tg.int32)
    q.enqueue(1)
    q.enqueue_many([[2, 3, 4]])
    assert int(q.size()) == 4 and int(q.dequeue()) == 1
    np.testing.assert_array_equal(q.dequeue_many(2).numpy(), [2, 3])
    pairs = tg.queue.FIFOQueue(3, [tg.float32, tg.int64], shapes=[(2,), ()])
    pairs.enqueue(([1.0, 2.0], 7))
    x, y = pairs.dequeue()
    assert x.numpy().tolist() == [1.0, 2.0] and x.dtype == tg.float32 and int(y) == 7
    with pytest.raises(tg.errors.InvalidArgumentError, match="Shape mismatch"):
        pairs.enqueue(([1.0], 1))
    named = tg.queue.FIFOQueue(2, [tg.int32, tg.float32], names=["a", "b"])
    named.enqueue({"a": 3, "b": 0.5})
    out = named.dequeue()
    assert int(out["a"]) == 3 and float(out["b"]) == 0.5


def test_close_drains_then_raises():
    q = tg.queue.FIFOQueue(4, tg.float32)
    q.enqueue_many([[1.0, 2.0, 3.0]])
    q.close()
    assert bool(q.is_closed())
    with pytest.raises(tg.errors.CancelledError, match="closed"):
        q.enqueue(4.0)
    np.testing.assert_array_equal(q.dequeue_up_to(5).numpy(), [1.0, 2.0, 3.0])
    with pytest.raises(tg.errors.OutOfRangeError, match="insufficient elements"):
        q.dequeue()


def test_blocking_producer_consumer():
    q = tg.queue.FIFOQueue(2, tg.int32)
    got = []

    def consume():
        for _ in range(5):
            got.append(int(q.dequeue()))

    t = threading.Thread(target=consume)
    t.start()
    for i in range(5):  # blocks whenever two are waiting
        q.enqueue(i)
    t.join(timeout=10)
    assert got == [0, 1, 2, 3, 4]
    start = time.time()
    threading.Timer(0.2, q.close).start()
    with pytest.raises(tg.errors.OutOfRangeError):
        q.dequeue()  # blocked until the close
    assert time.time() - start >= 0.15
