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


def _record_pull(iterator, element, tracer):
    """`next(iterator)` in a trace: an effect that takes the iterator's next element at each
    call of the function, and a node per tensor of the element reading it (the element the
    trace took is the first call's)."""
    current = []

    def pull(_arrays, _variables):
        with iterator._ctx.scope, unseen():
            try:
                nxt = next(iterator._it)
            except StopIteration:
                raise OutOfRangeError("End of sequence") from None
        current[:] = [t._data for t in structure.flatten(nxt)]

    pull.__name__ = "data.next"
    tracer.on_pull(pull)
    for k, t in enumerate(structure.flatten(element)):
        def read(k=k):
            return current[k]
        read.__name__ = "data.next"
        tracer.record_random(read, t)


class Iterator:
    """An iterator over a `tg.data.Dataset` (as `tf.data.Iterator`): `next(it)` or
    `it.get_next()` gives the next element, on the device that was current at `iter(dataset)`.

    >>> it = iter(tg.data.Dataset.range(2))
    >>> int(next(it)), int(it.get_next())
    (0, 1)
    """

    def __init__(self, dataset):
        if _thread.tracers:
            raise NotImplementedError(
                "tg.data: iterating a dataset inside a tg.function (a Python `for` over it, "
                "iter(), reduce) would bake the elements of the traced call into the graph, "
                "and later calls would see them again; iterate outside and pass each batch as "
                "an argument, or make the iterator outside (it = iter(dataset)) and call "
                "next(it) inside: that takes a new element at every call")
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
        tracers = _thread.tracers
        with self._ctx.scope, unseen():
            element = next(self._it)
        if tracers:  # inside a tg.function: every call takes the next element
            _record_pull(self, element, tracers[-1])
        return element

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


class HostStream:
    """The copy stream of a device without streams (numpy, cuda_emu): work is done when the
    call returns, so there is nothing to order or to hold. It has `DeviceStream`'s interface,
    so prefetch runs the same code on every device."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def record(self):
        return None

    def hand_over(self, element, ready):
        return element

    def release(self):
        pass


class DeviceStream:
    """A CUDA stream of its own for a prefetch thread (CuPy's `cuda.Stream`): the input
    pipeline's work and its host-to-device copies are queued on it, so they overlap the
    consumer's steps on the current stream.

    `record()` (in the producer, after an element) gives an event; `hand_over(element,
    event)` (in the consumer) makes the consumer's current stream wait for it on the GPU (no
    host sync). CuPy's memory pool returns an array freed later to the pool of the stream
    that allocated it, where the next copy could reuse it while a queued step still reads
    it; so each element handed over is held until an event recorded on the consumer's
    stream at the next hand-over (after the steps that used it were queued) has completed.
    """

    def __init__(self, cuda):
        self._cuda = cuda
        self._stream = cuda.Stream(non_blocking=True)
        self._held = collections.deque()  # [element, event after its use or None]

    def __enter__(self):
        self._stream.__enter__()
        return self

    def __exit__(self, *exc):
        return self._stream.__exit__(*exc)

    def record(self):
        return self._stream.record()

    def hand_over(self, element, ready):
        current = self._cuda.get_current_stream()
        current.wait_event(ready)
        if self._held:
            after = current.record()
            for entry in self._held:
                if entry[1] is None:
                    entry[1] = after
            while self._held and self._held[0][1].done:
                self._held.popleft()
        self._held.append([element, None])
        return element

    def release(self):
        """At the end: waits for the steps that used the held elements, then drops them."""
        if self._held:
            self._cuda.get_current_stream().synchronize()
            self._held.clear()


def copy_stream(dev):
    """The stream a prefetch thread computes on for device `dev`."""
    cuda = getattr(dev.xp, "cuda", None)
    if cuda is not None and hasattr(cuda, "Stream") and hasattr(cuda, "get_current_stream"):
        with dev.context():  # the stream belongs to the device's GPU
            return DeviceStream(cuda)
    return HostStream()


class Prefetcher:
    """Elements of `source(ctx)` computed by a background thread into a queue of at most
    `buffer_size`; the producer's exceptions are raised by `next`. The thread runs the input
    pipeline on a stream of its own (`copy_stream`: on a GPU, a CUDA stream, so that its
    copies to the device overlap the consumer's steps). It ends at the end of the input, on
    `close()`, or when this object is dropped."""

    def __init__(self, source, buffer_size, ctx):
        self._queue = queue.Queue(maxsize=buffer_size)
        self._stop = threading.Event()
        self._done = False
        self._stream = copy_stream(ctx.dev)
        self._thread = threading.Thread(
            target=_produce, args=(source, ctx, self._stream, self._queue, self._stop),
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
            return self._stream.hand_over(*value)
        self._done = True
        self._stream.release()
        if kind == _ERROR:
            raise value
        raise StopIteration

    def close(self):
        self._done = True
        self._stop.set()
        self._stream.release()


def _put(q, stop, item):
    while not stop.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def _produce(source, ctx, stream, q, stop):
    with ctx.scope, stream:
        it = None
        try:
            it = source(ctx)
            for element in it:
                if not _put(q, stop, (_ITEM, (element, stream.record()))):
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
