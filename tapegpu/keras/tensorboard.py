"""TensorBoard's event files, written without TensorFlow: `keras.callbacks.TensorBoard` and
the scalar writer behind it.

An event file is a sequence of records (TFRecord framing: the length as a little-endian
uint64, its masked CRC-32C, the data, the data's masked CRC-32C), each an `Event` protocol
buffer: the first holds `file_version` "brain.Event:2", the others a wall time, a step and a
`Summary` of scalar values (tag, `simple_value`). That is all TensorBoard needs to plot
scalars; the few protobuf fields are encoded here by hand (tensorflow/core/util/event.proto,
tensorflow/core/framework/summary.proto).
"""
import os
import socket
import struct
import time
import warnings

from . import callbacks as _callbacks


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli), as TFRecord frames use it."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    """One TFRecord: length, its masked CRC, the data, its masked CRC."""
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", _masked(crc32c(n))) + data + \
        struct.pack("<I", _masked(crc32c(data)))


def _varint(n):
    out = bytearray()
    n &= (1 << 64) - 1  # int64 fields: two's complement, as protobuf
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number, wire, payload):
    key = _varint((number << 3) | wire)
    if wire == 2:  # length-delimited
        return key + _varint(len(payload)) + payload
    return key + payload


def event(wall_time, step=None, file_version=None, scalars=None):
    """An `Event` message: wall_time (1, double), step (2, int64), file_version (3, string) or
    summary (5) of scalar values (Summary.value (1): tag (1, string), simple_value (2, float))."""
    out = _field(1, 1, struct.pack("<d", wall_time))
    if step is not None:
        out += _field(2, 0, _varint(int(step)))
    if file_version is not None:
        out += _field(3, 2, file_version.encode())
    if scalars:
        values = b"".join(_field(1, 2, _field(1, 2, tag.encode()) +
                                 _field(2, 5, struct.pack("<f", float(v))))
                          for tag, v in scalars.items())
        out += _field(5, 2, values)
    return out


class EventFileWriter:
    """Scalars into one event file in `logdir` (created), flushed after each write so
    TensorBoard sees them while training runs."""

    def __init__(self, logdir):
        os.makedirs(logdir, exist_ok=True)
        now = time.time()
        name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}.v2"
        self.path = os.path.join(logdir, name)
        self._f = open(self.path, "wb")
        self._f.write(record(event(now, file_version="brain.Event:2")))
        self._f.flush()

    def scalars(self, step, values):
        """Writes {tag: number} at `step`."""
        if values:
            self._f.write(record(event(time.time(), step=step, scalars=values)))
            self._f.flush()

    def close(self):
        self._f.close()


class TensorBoard(_callbacks.Callback):
    """Writes fit's metrics for TensorBoard (Keras' `keras.callbacks.TensorBoard`):
    `<log_dir>/train` gets `epoch_<name>` at each epoch's end (and `epoch_learning_rate`),
    `<log_dir>/validation` the `val_` metrics under the same tags; with `update_freq="batch"`
    or an integer N, `batch_<name>` every N training steps too. Scalars only: histograms,
    graphs, images and profiling (`histogram_freq`, `write_graph`, `write_images`,
    `profile_batch`, `embeddings_freq`) are not written, and asking for them warns.

    >>> import tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()
    >>> model = tg.keras.Sequential([tg.keras.Input((2,)), tg.keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> _ = model.fit(np.ones((4, 2), np.float32), np.ones((4, 1), np.float32), epochs=2,
    ...               verbose=0, callbacks=[tg.keras.callbacks.TensorBoard(tmp.name)])
    >>> sorted(os.listdir(tmp.name))
    ['train']
    >>> tmp.cleanup()
    """

    def __init__(self, log_dir="logs", histogram_freq=0, write_graph=True, write_images=False,
                 write_steps_per_second=False, update_freq="epoch", profile_batch=0,
                 embeddings_freq=0, embeddings_metadata=None):
        super().__init__()
        self.log_dir = os.fspath(log_dir)
        if update_freq not in ("epoch", "batch") and not (
                isinstance(update_freq, int) and update_freq > 0):
            raise ValueError(f"TensorBoard: update_freq must be 'epoch', 'batch' or a positive "
                             f"integer, got {update_freq!r}")
        self.update_freq = 1 if update_freq == "batch" else update_freq
        unsupported = [name for name, v in (("histogram_freq", histogram_freq),
                                            ("write_images", write_images),
                                            ("profile_batch", profile_batch),
                                            ("embeddings_freq", embeddings_freq)) if v]
        if unsupported:
            warnings.warn(f"TensorBoard: {unsupported} are not written (tapegpu writes "
                          f"scalars only)", UserWarning, stacklevel=2)
        self._writers = {}
        self._step = 0

    def _writer(self, which):
        w = self._writers.get(which)
        if w is None:
            w = self._writers[which] = EventFileWriter(os.path.join(self.log_dir, which))
        return w

    def on_train_begin(self, logs=None):
        self._step = 0

    def on_train_batch_end(self, batch, logs=None):
        self._step += 1
        if self.update_freq != "epoch" and self._step % self.update_freq == 0 and logs:
            self._writer("train").scalars(self._step, {f"batch_{k}": float(v)
                                                       for k, v in dict(logs).items()})

    def on_epoch_end(self, epoch, logs=None):
        logs = dict(logs or {})
        train = {f"epoch_{k}": float(v) for k, v in logs.items() if not k.startswith("val_")}
        val = {f"epoch_{k[4:]}": float(v) for k, v in logs.items() if k.startswith("val_")}
        if hasattr(getattr(self.model, "optimizer", None), "learning_rate"):
            train.setdefault("epoch_learning_rate",
                             _callbacks._learning_rate(self.model, "TensorBoard"))
        self._writer("train").scalars(epoch, train)
        if val:
            self._writer("validation").scalars(epoch, val)

    def on_train_end(self, logs=None):
        for w in self._writers.values():
            w.close()
        self._writers = {}
