"""`tg.summary`: scalars, histograms, images, audio and text for TensorBoard, as `tf.summary`
(file writers, a default writer and a default step).

`create_file_writer(logdir)` opens an event file (the writer of
`tapegpu/keras/tensorboard.py`); `scalar(name, data, step)` writes through the default writer
set by `writer.as_default()`. Inside a `tg.function` a scalar is a graph node, as `tg.print`
is (the same node kind: its "stream" takes the host values instead of text), so it writes at
every call, with the writer that was the default when the function was traced (as TF). A
function holding a scalar summary cannot be saved with `tg.saved_model.save`.
"""
import contextlib
import io as _io
import os
import struct
import time
import types
import wave
import zlib

import numpy as np

from .core.tensor import Tensor, Variable, _thread, constant, convert_to_tensor
from .keras.tensorboard import EventFileWriter, _field, _varint, record

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

    def _write_tensor(self, tag, step, tensor, plugin, content, data_class, description):
        """One `Summary.Value` holding a TensorProto (`tensor`'s bytes) with the plugin's
        metadata, as TF 2's summaries write them."""
        self._check_open()
        plugin_data = _field(1, 2, plugin.encode()) + (_field(2, 2, content) if content else b"")
        metadata = _field(1, 2, plugin_data)
        if description:
            metadata += _field(3, 2, description.encode())
        metadata += _field(4, 0, _varint(data_class))
        value = _field(1, 2, tag.encode()) + _field(9, 2, metadata) + _field(8, 2, tensor)
        ev = _field(1, 1, struct.pack("<d", time.time())) + _field(2, 0, _varint(int(step))) + \
            _field(5, 2, _field(1, 2, value))
        self._events._f.write(record(ev))
        self._events._f.flush()

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


# -- histograms, images, audio, text: tensor summaries (TensorBoard's plugins) -------------------

_DT_DOUBLE, _DT_STRING = 2, 7  # TensorProto dtypes
_DATA_CLASS_TENSOR, _DATA_CLASS_BLOB_SEQUENCE = 2, 3


def _tensor_proto(array):
    """A TensorProto of a float64 or bytes numpy array."""
    shape = b"".join(_field(2, 2, _field(1, 0, _varint(d))) for d in array.shape)
    if array.dtype == object:
        body = b"".join(_field(8, 2, bytes(v)) for v in array.ravel())
        return _field(1, 0, _varint(_DT_STRING)) + _field(2, 2, shape) + body
    data = np.ascontiguousarray(array, dtype="<f8").tobytes()
    return _field(1, 0, _varint(_DT_DOUBLE)) + _field(2, 2, shape) + \
        (_field(4, 2, data) if data else b"")


class _TensorSink:
    """A summary's graph-node stream: `encode(data)` turns the data's host value into the
    TensorProto written at each call."""

    takes_values = True

    def __init__(self, writer, tag, encode, plugin, content, data_class, description):
        self.writer, self.tag, self.encode = writer, tag, encode
        self.meta = (plugin, content, data_class, description)

    def write(self, values):
        data, step = values
        self.writer._write_tensor(self.tag, int(np.asarray(step)),
                                  _tensor_proto(self.encode(np.asarray(data))), *self.meta)


def _summary(fn, name, data, step, encode, plugin, content, data_class, description,
             check=None):
    if not _writers:
        return constant(False)
    writer = _writers[-1]
    writer._check_open()
    t = data._read() if isinstance(data, Variable) else convert_to_tensor(data)
    if check is not None:
        check(t)
    step_t = _step_tensor(step)
    sink = _TensorSink(writer, name, encode, plugin, content, data_class, description)
    template = ((("t", None), ("t", None)), "", "", sink)
    for tracer in _thread.tracers:
        tracer.on_print(template, [t, step_t])
    sink.write([t._dev.to_numpy(t._data), step_t._dev.to_numpy(step_t._data)])
    return constant(True)


def _histogram_buckets(data, bucket_count):
    """[bucket_count, 3] float64 (left edge, right edge, count) over [min, max], as
    TensorBoard's v2 histogram: equal widths, the maximum in the last bucket; data of one
    value: every edge at it and all the count in the last bucket."""
    x = np.asarray(data, dtype=np.float64).ravel()
    if bucket_count == 0 or x.size == 0:
        return np.zeros((bucket_count, 3))
    lo, hi = x.min(), x.max()
    if hi - lo == 0:
        counts = np.zeros(bucket_count)
        counts[-1] = x.size
        return np.stack([np.full(bucket_count, lo), np.full(bucket_count, lo), counts], axis=1)
    width = (hi - lo) / bucket_count
    idx = np.minimum(np.floor((x - lo) / width).astype(np.int64), bucket_count - 1)
    counts = np.bincount(idx, minlength=bucket_count).astype(np.float64)
    edges = np.linspace(lo, hi, bucket_count + 1)
    return np.stack([edges[:-1], edges[1:], counts], axis=1)


def histogram(name, data, step=None, buckets=None, description=None):
    """Writes a histogram of `data`'s values (`buckets` equal-width buckets, 30 by default)
    under `name` at `step` to the default writer, as `tf.summary.histogram`; returns a bool
    tensor (False without a default writer).

    >>> import tempfile
    >>> with tg.summary.create_file_writer(tempfile.mkdtemp()).as_default(step=0):
    ...     bool(tg.summary.histogram("weights", tg.random.normal([100])))
    True
    """
    n = 30 if buckets is None else int(buckets)
    if n < 0:
        raise ValueError(f"summary.histogram: buckets must be >= 0, got {buckets}")

    def check(t):
        if t._data.dtype.kind not in "biuf":
            raise TypeError(f"summary.histogram: data must be numeric, got {t.dtype.name}")
    return _summary("histogram", name, data, step, lambda a: _histogram_buckets(a, n),
                    "histograms", b"", _DATA_CLASS_TENSOR, description, check)


def _png(image):
    """PNG bytes of a [h, w, c] uint8 image (c: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA)."""
    h, w, c = image.shape
    color = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    raw = b"".join(b"\x00" + image[i].tobytes() for i in range(h))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + \
            struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0)) \
        + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def _as_uint8(images):
    """Images as uint8, as `tf.image.convert_image_dtype(saturate=True)`: floats in [0, 1]
    scaled by 255.5 and truncated, other integer types rescaled by their range."""
    if images.dtype == np.uint8:
        return images
    if images.dtype.kind == "f":
        return np.clip(images.astype(np.float64) * 255.5, 0, 255).astype(np.uint8)
    if images.dtype.kind == "b":
        return images.astype(np.uint8) * 255
    info = np.iinfo(images.dtype)
    scaled = np.clip(images.astype(np.float64), 0, info.max) * (255.0 / info.max)
    return scaled.astype(np.uint8)


def image(name, data, step=None, max_outputs=3, description=None):
    """Writes up to `max_outputs` images of `data` ([k, h, w, c], c in 1, 2, 3, 4; floats in
    [0, 1] or integers) as PNGs under `name` at `step`, as `tf.summary.image`.

    >>> import tempfile
    >>> with tg.summary.create_file_writer(tempfile.mkdtemp()).as_default(step=0):
    ...     bool(tg.summary.image("img", tg.zeros([2, 4, 4, 3])))
    True
    """
    def check(t):
        if t.ndim != 4 or t.shape[-1] not in (1, 2, 3, 4):
            raise ValueError(f"summary.image: data must have shape [k, h, w, c] with c in "
                             f"(1, 2, 3, 4), got {tuple(t.shape)}")

    def encode(a):
        imgs = _as_uint8(a[:int(max_outputs)])
        out = [str(a.shape[2]).encode(), str(a.shape[1]).encode()] + [_png(im) for im in imgs]
        return np.array(out, dtype=object)
    return _summary("image", name, data, step, encode, "images", b"",
                    _DATA_CLASS_BLOB_SEQUENCE, description, check)


def _wav(clip, sample_rate):
    """WAV bytes of a [t, c] float clip in [-1, 1] (16-bit PCM)."""
    pcm = np.round(np.clip(clip, -1.0, 1.0) * 32767.0).astype("<i2")
    buf = _io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(clip.shape[1])
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def audio(name, data, sample_rate, step=None, max_outputs=3, encoding=None, description=None):
    """Writes up to `max_outputs` clips of `data` ([k, t, c] floats in [-1, 1]) as WAV files
    under `name` at `step`, as `tf.summary.audio` (`encoding` must be None or 'wav').

    >>> import tempfile
    >>> with tg.summary.create_file_writer(tempfile.mkdtemp()).as_default(step=0):
    ...     bool(tg.summary.audio("a", tg.zeros([1, 100, 1]), sample_rate=8000))
    True
    """
    if encoding not in (None, "wav"):
        raise ValueError(f"Unknown encoding: {encoding!r}")
    rate = int(np.asarray(sample_rate.numpy() if isinstance(sample_rate, Tensor)
                          else sample_rate))

    def check(t):
        if t.ndim != 3 or t._data.dtype.kind != "f":
            raise ValueError(f"summary.audio: data must be a float tensor of shape [k, t, c], "
                             f"got {t.dtype.name} of shape {tuple(t.shape)}")

    def encode(a):
        clips = a[:int(max_outputs)]
        return np.array([[_wav(c, rate), b""] for c in clips], dtype=object).reshape(-1, 2)
    return _summary("audio", name, data, step, encode, "audio", _field(2, 0, _varint(11)),
                    _DATA_CLASS_BLOB_SEQUENCE, description, check)


def text(name, data, step=None, description=None):
    """Writes the string tensor `data` (any shape; Markdown for TensorBoard) under `name` at
    `step`, as `tf.summary.text`.

    >>> import tempfile
    >>> with tg.summary.create_file_writer(tempfile.mkdtemp()).as_default(step=0):
    ...     bool(tg.summary.text("note", "hello *world*"))
    True
    """
    def check(t):
        if t.dtype != "string":
            raise TypeError(f"summary.text: data must be a string tensor, got {t.dtype.name}")

    def encode(a):
        return np.array([v.encode() if isinstance(v, str) else bytes(v) for v in
                         np.asarray(a, dtype=object).ravel()], dtype=object).reshape(a.shape)
    return _summary("text", name, data, step, encode, "text", b"", _DATA_CLASS_TENSOR,
                    description, check)
