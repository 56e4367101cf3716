"""How a dataset's elements are produced: the iterator handed to Python, the background thread
of `prefetch` and the thread pool of `map(num_parallel_calls=...)`.

Each iteration captures the device current where it starts (`iter(dataset)`) and runs every
step on it: in the consumer thread (each `next`), in prefetch threads and in map workers, so
elements are created on that device wherever they are computed.
"""
import collections
import contextlib
import queue
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

from .. import backends as _backend
from ..core.device import device
from ..core.tensor import Tensor, _thread
from ..errors import OutOfRangeError
from . import structure


class Context:
    """One iteration's settings: the device elements are created on."""

    def __init__(self, dev=None):
        self.dev = _backend.current() if dev is None else dev
        self.scope = device(self.dev)  # usable from any thread (entered per thread)


@contextlib.contextmanager
def unseen():
    """Hides this thread's tapes, forward accumulators and traces while a pipeline computes:
    in TensorFlow a dataset's functions run as graphs of their own, which no `GradientTape`
    records, so a tape around the loop must not record what `map` or `filter` compute either
    (with or without `prefetch`)."""
    state = _thread
    lists = (state.recorders, state.variable_watchers, state.tracers)
    if not any(lists):  # nothing to hide (worker threads, or already hidden by the caller)
        yield
        return
    saved = [list(a) for a in lists]
    for a in lists:  # emptied in place: a tape keeps the list it was pushed on
        del a[:]
    try:
        yield
    finally:
        for a, s in zip(lists, saved):
            a[:0] = s


class Iterator:
    """An iterator over a `tg.data.Dataset` (as `tf.data.Iterator`): `next(it)` or
    `it.get_next()` gives the next element, on the device that was current at `iter(dataset)`.

    >>> it = iter(tg.data.Dataset.range(2))
    >>> int(next(it)), int(it.get_next())
    (0, 1)
    """

    def __init__(self, dataset):
        self._dataset = dataset
        self._ctx = Context()
        self._it = None
        with self._ctx.scope, unseen():
            self._it = dataset._iterate(self._ctx)

    @property
    def element_spec(self):
        """The `tg.TensorSpec` structure of the elements (the dataset's)."""
        return self._dataset.element_spec

    def __iter__(self):
        return self

    def __next__(self):
        with self._ctx.scope, unseen():
            return next(self._it)

    def get_next(self):
        """The next element; at the end raises `tg.errors.OutOfRangeError` ("End of sequence"),
        as TF's `get_next` (`next(it)` raises StopIteration, as Python's iterators).

        >>> it = iter(tg.data.Dataset.from_tensors(7))
        >>> it.get_next().numpy()
        array(7, dtype=int32)
        >>> it.get_next()
        Traceback (most recent call last):
        ...
        tapegpu.errors.OutOfRangeError: End of sequence
        """
        try:
            return self.__next__()
        except StopIteration:
            raise OutOfRangeError(None, None, "End of sequence") from None

    def close(self):
        """Stops the iteration now (background threads end; dropping the iterator does the
        same)."""
        it, self._it = self._it, iter(())
        if hasattr(it, "close"):
            it.close()


class NumpyIterator:
    """`Dataset.as_numpy_iterator()`: elements with numpy leaves (0-d ones as numpy scalars)."""

    def __init__(self, dataset):
        self._it = Iterator(dataset)

    def __iter__(self):
        return self

    def __next__(self):
        element = next(self._it)
        return structure.pack(element, [_to_numpy(t) for t in structure.flatten(element)])


def _to_numpy(t):
    a = t.numpy()
    return a[()] if a.ndim == 0 else a


# -- prefetch ------------------------------------------------------------------------------------

_ITEM, _END, _ERROR = 0, 1, 2


class Prefetcher:
    """Elements of `source(ctx)` computed by a background thread into a queue of at most
    `buffer_size`; the producer's exceptions are raised by `next`. The thread ends at the end
    of the input, on `close()`, or when this object is dropped."""

    def __init__(self, source, buffer_size, ctx):
        self._queue = queue.Queue(maxsize=buffer_size)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(
            target=_produce, args=(source, ctx, self._queue, self._stop),
            name="tg.data.prefetch", daemon=True)
        self._thread.start()
        weakref.finalize(self, self._stop.set)  # the thread holds no reference to self

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        kind, value = self._queue.get()
        if kind == _ITEM:
            return value
        self._done = True
        if kind == _ERROR:
            raise value
        raise StopIteration

    def close(self):
        self._done = True
        self._stop.set()


def _put(q, stop, item):
    while not stop.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def _produce(source, ctx, q, stop):
    with ctx.scope:
        it = None
        try:
            it = source(ctx)
            for element in it:
                if not _put(q, stop, (_ITEM, element)):
                    return
            _put(q, stop, (_END, None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which raises it
            _put(q, stop, (_ERROR, e))
        finally:
            if it is not None and hasattr(it, "close"):
                it.close()


# -- parallel map -------------------------------------------------------------------------------

def parallel_map(elements, call, num_threads, ctx):
    """`call(element)` for each of `elements` on a pool of `num_threads` threads, at most
    `num_threads` in flight, yielded in the input's order."""
    pool = ThreadPoolExecutor(num_threads, thread_name_prefix="tg.data.map")

    def run(element):
        with ctx.scope:
            return call(element)

    pending = collections.deque()
    try:
        exhausted = False
        while True:
            while not exhausted and len(pending) < num_threads:
                try:
                    element = next(elements)
                except StopIteration:
                    exhausted = True
                    break
                pending.append(pool.submit(run, element))
            if not pending:
                return
            yield pending.popleft().result()
    finally:
        for f in pending:
            f.cancel()
        pool.shutdown(wait=False)
        if hasattr(elements, "close"):
            elements.close()


def scalar(value, dtype_np, dev):
    """A 0-d tensor on `dev`."""
    return Tensor(dev.xp.asarray(value, dtype=dtype_np), dev)
