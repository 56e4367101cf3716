"""`tg.queue.FIFOQueue`: a first-in first-out queue of tuples of tensors, as TF 2's eager
`tf.queue.FIFOQueue` (blocking `dequeue` on an empty queue and `enqueue` on a full one, thread
safe; `close` ends it: dequeues then drain what is left and raise OutOfRangeError). The other
queues of tf.queue (padding, random-shuffle, priority) are refused.

>>> q = tg.queue.FIFOQueue(3, tg.float32)
>>> q.enqueue_many([[1.0, 2.0]])
>>> float(q.dequeue()), int(q.size())
(1.0, 1)
"""
import collections
import sys
import threading

import numpy as np

from .compat import surface
from .core import dtypes as _dtypes
from .core.tensor import Tensor, Variable, constant, convert_to_tensor
from .errors import CancelledError, InvalidArgumentError, OutOfRangeError

__all__ = ["FIFOQueue"]


class FIFOQueue:
    """A queue of elements (tuples of tensors of `dtypes`, of `shapes` when given), at most
    `capacity` of them, dequeued in the order enqueued, as `tf.queue.FIFOQueue`. With `names`,
    elements are dicts."""

    def __init__(self, capacity, dtypes, shapes=None, names=None, shared_name=None,
                 name="fifo_queue"):
        single = not isinstance(dtypes, (list, tuple))
        self._dtypes = [_dtypes.as_dtype(d) for d in ([dtypes] if single else dtypes)]
        if shapes is not None:
            shapes = [shapes] if single else list(shapes)
            if len(shapes) != len(self._dtypes):
                raise ValueError("Queue shapes must have the same length as dtypes")
            shapes = [tuple(s) for s in shapes]
        self._shapes = shapes
        if names is not None:
            names = [names] if isinstance(names, str) else list(names)
            if len(names) != len(self._dtypes):
                raise ValueError("Queue names must have the same length as dtypes")
        self._names = names
        self._capacity = int(capacity)
        self._items = collections.deque()
        self._closed = False
        self._cancelled = False
        self._cond = threading.Condition()
        self.name = name

    @property
    def dtypes(self):
        return list(self._dtypes)

    @property
    def shapes(self):
        return None if self._shapes is None else list(self._shapes)

    @property
    def names(self):
        return None if self._names is None else list(self._names)

    # -- components ----------------------------------------------------------------------------
    def _components(self, vals, many):  # noqa: C901
        if self._names is not None:
            if not isinstance(vals, dict) or set(vals) != set(self._names):
                raise ValueError(f"Queue with names {self._names} expects a dict with those "
                                 f"keys, got {vals!r}")
            vals = [vals[n] for n in self._names]
        else:  # a list or tuple holds the components; anything else is the one component
            vals = list(vals) if isinstance(vals, (list, tuple)) else [vals]
        if len(vals) != len(self._dtypes):
            raise ValueError(f"Expected {len(self._dtypes)} components, got {len(vals)}")
        out = []
        for v, d in zip(vals, self._dtypes):
            v = v._read() if isinstance(v, Variable) else v
            t = v if isinstance(v, Tensor) else convert_to_tensor(v, dtype=d)
            if t.dtype != d:
                raise InvalidArgumentError(f"Queue component of dtype {t.dtype.name} does not "
                                           f"match the queue's {d.name}")
            out.append(t.numpy())
        if self._shapes is not None:
            for a, s in zip(out, self._shapes):
                got = a.shape[1:] if many else a.shape
                if tuple(got) != s:
                    raise InvalidArgumentError(f"Shape mismatch in tuple component: expected "
                                               f"{list(s)}, got {list(got)}")
        return out

    def _element(self, arrays):
        ts = [constant(a) for a in arrays]
        if self._names is not None:
            return dict(zip(self._names, ts))
        return ts[0] if len(ts) == 1 else ts

    # -- enqueue ----------------------------------------------------------------------------
    def _put(self, element):
        with self._cond:
            while not self._closed and len(self._items) >= self._capacity:
                self._cond.wait()
            if self._closed:
                raise CancelledError(None, None, f"Queue '{self.name}' is closed.")
            self._items.append(element)
            self._cond.notify_all()

    def enqueue(self, vals, name=None):
        """Adds one element (blocks while the queue is full)."""
        self._put(self._components(vals, many=False))

    def enqueue_many(self, vals, name=None):
        """Adds the elements along the first axis of every component."""
        comps = self._components(vals, many=True)
        n = comps[0].shape[0] if comps[0].ndim else None
        if n is None or any(c.ndim == 0 or c.shape[0] != n for c in comps):
            raise InvalidArgumentError("enqueue_many: every component needs the same first "
                                       "dimension (the number of elements)")
        for i in range(n):
            self._put([c[i] for c in comps])

    # -- dequeue ----------------------------------------------------------------------------
    def _take(self, n, up_to):
        with self._cond:
            while len(self._items) < n and not self._closed:
                self._cond.wait()
            if len(self._items) < n and (not up_to or not self._items):
                raise OutOfRangeError(None, None, f"FIFOQueue '{self.name}' is closed and has "
                                      f"insufficient elements (requested {n}, current size "
                                      f"{len(self._items)})")
            taken = [self._items.popleft() for _ in range(min(n, len(self._items)))]
            self._cond.notify_all()
            return taken

    def dequeue(self, name=None):
        """Removes and returns the oldest element (blocks while the queue is empty and
        open; OutOfRangeError once it is closed and empty)."""
        return self._element(self._take(1, False)[0])

    def dequeue_many(self, n, name=None):
        """The `n` oldest elements, stacked along a new first axis (blocks for them)."""
        items = self._take(int(n), False)
        return self._element([np.stack(c) for c in zip(*items)])

    def dequeue_up_to(self, n, name=None):
        """Like `dequeue_many`, but a closed queue gives what it has left (at least one)."""
        items = self._take(int(n), True)
        return self._element([np.stack(c) for c in zip(*items)])

    # -- state ----------------------------------------------------------------------------
    def size(self, name=None):
        """The number of elements (an int32 scalar tensor)."""
        return constant(np.int32(len(self._items)))

    def close(self, cancel_pending_enqueues=False, name=None):
        """No more enqueues; pending dequeues finish with what is left."""
        with self._cond:
            self._closed = True
            self._cancelled = bool(cancel_pending_enqueues)
            self._cond.notify_all()

    def is_closed(self, name=None):
        """Whether `close` was called (a bool tensor)."""
        return constant(self._closed)

    @property
    def queue_ref(self):
        return self


# the names of tf.queue this module lacks are refusals, however it is first imported
surface.hook(sys.modules[__name__], "tf.queue")
