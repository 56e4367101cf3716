"""`tg.summary`: scalars for TensorBoard, as `tf.summary` (file writers, a default writer and
a default step).

`create_file_writer(logdir)` opens an event file (the writer of
`tapegpu/keras/tensorboard.py`); `scalar(name, data, step)` writes through the default writer
set by `writer.as_default()`. Inside a `tg.function` a scalar is a graph node, as `tg.print`
is (the same node kind: its "stream" takes the host values instead of text), so it writes at
every call, with the writer that was the default when the function was traced (as TF). A
function holding a scalar summary cannot be saved with `tg.saved_model.save`.
"""
import contextlib
import os
import types

import numpy as np

from .core.tensor import Tensor, Variable, _thread, constant, convert_to_tensor
from .keras.tensorboard import EventFileWriter

_writers = []  # the default writer is the last one
_step = [None]  # tg.summary.experimental.set_step's value (an int, tensor or variable)


class SummaryWriter:
    """Writes summaries to an event file in `logdir`, as `tf.summary.SummaryWriter`. Every
    write reaches the file at once (`flush` has nothing left to do)."""

    def __init__(self, logdir):
        self.logdir = os.fspath(logdir)
        self._events = EventFileWriter(self.logdir)
        self._closed = False

    @contextlib.contextmanager
    def as_default(self, step=None):
        """Makes this the default writer inside the block (and `step`, when given, the
        default step).

        >>> import tempfile
        >>> writer = tg.summary.create_file_writer(tempfile.mkdtemp())
        >>> with writer.as_default(step=3):
        ...     bool(tg.summary.scalar("loss", 0.5))
        True
        """
        self._check_open()
        saved = _step[0]
        if step is not None:
            _step[0] = step
        _writers.append(self)
        try:
            yield self
        finally:
            _writers.remove(self)
            _step[0] = saved

    def set_as_default(self, step=None):
        """Makes this the default writer from now on (and `step`, when given, the step)."""
        self._check_open()
        if step is not None:
            _step[0] = step
        _writers.append(self)

    def init(self):
        """Nothing to do: the file is open from the start (as TF's `init`)."""

    def flush(self):
        """Nothing to do: every summary is flushed to the file as it is written."""

    def close(self):
        """Closes the event file; the writer cannot be used afterwards."""
        if not self._closed:
            self._events.close()
            self._closed = True
        while self in _writers:
            _writers.remove(self)

    def _check_open(self):
        if self._closed:
            raise RuntimeError(f"SummaryWriter {self!r} is already closed")

    def _write(self, tag, value, step):
        self._check_open()
        self._events.scalars(step, {tag: value})

    def __repr__(self):
        return f"<tg.summary.SummaryWriter logdir={self.logdir!r}>"


def create_file_writer(logdir, max_queue=None, flush_millis=None, filename_suffix=None,
                       name=None, experimental_trackable=False, experimental_mesh=None):
    """A `SummaryWriter` of a new event file in `logdir` (created), as
    `tf.summary.create_file_writer`; the queue and flush settings are accepted (every write
    is flushed).

    >>> import tempfile
    >>> writer = tg.summary.create_file_writer(tempfile.mkdtemp())
    >>> writer.close()
    """
    return SummaryWriter(logdir)


class _ScalarSink:
    """The "stream" of a scalar's graph node: `graph.format_print` hands it the host values
    (data, step) of each call."""

    takes_values = True

    def __init__(self, writer, tag):
        self.writer, self.tag = writer, tag

    def write(self, values):
        data, step = values
        self.writer._write(self.tag, float(np.asarray(data)), int(np.asarray(step)))


def _step_tensor(step):
    step = _step[0] if step is None else step
    if step is None:
        raise ValueError("summary.scalar: No step set. Please specify one either through the "
                         "`step` argument or through tg.summary.experimental.set_step()")
    if isinstance(step, Variable):
        return step._read()  # read by the graph at every call
    if not isinstance(step, (Tensor, int, np.integer)) or isinstance(step, bool):
        raise TypeError(f"summary.scalar: step must be an integer scalar, got {step!r}")
    t = step if isinstance(step, Tensor) else convert_to_tensor(np.int64(step))
    if t.ndim != 0 or t._data.dtype.kind not in "iu":
        raise TypeError(f"summary.scalar: step must be an integer scalar, got {t.dtype.name} of "
                        f"shape {t.shape}")
    return t


def scalar(name, data, step=None, description=None):
    """Writes the number `data` under the tag `name` at `step` (default:
    `tg.summary.experimental.get_step()`) to the default writer, as `tf.summary.scalar`.
    Returns a bool tensor: True when written, False when there is no default writer.

    >>> bool(tg.summary.scalar("loss", 0.5, step=1))  # no default writer
    False
    """
    if not _writers:
        return constant(False)
    writer = _writers[-1]
    writer._check_open()
    t = data._read() if isinstance(data, Variable) else convert_to_tensor(data)
    if t.ndim != 0:
        raise ValueError(f"summary.scalar: Expected scalar shape for {name}, saw shape: "
                         f"{t.shape}.")
    if t._data.dtype.kind not in "biuf":
        raise TypeError(f"summary.scalar: data must be a real number, got {t.dtype.name}")
    step_t = _step_tensor(step)
    sink = _ScalarSink(writer, name)
    template = ((("t", None), ("t", None)), "", "", sink)
    for tracer in _thread.tracers:
        tracer.on_print(template, [t, step_t])
    sink.write([t._dev.to_numpy(t._data), step_t._dev.to_numpy(step_t._data)])
    return constant(True)


def get_step():
    """The default step set by `set_step` (or `as_default(step=...)`), None if none.

    >>> tg.summary.experimental.set_step(4); tg.summary.experimental.get_step()
    4
    """
    return _step[0]


def set_step(step):
    """Sets the default step of `scalar` (an int, an integer tensor or a variable, which is
    read at each write; None unsets it).

    >>> tg.summary.experimental.set_step(None)
    """
    _step[0] = step


experimental = types.ModuleType("tapegpu.summary.experimental",
                                "`get_step`, `set_step`: the default step.")
experimental.get_step = get_step
experimental.set_step = set_step
