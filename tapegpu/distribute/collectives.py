"""Collectives on tensors: allreduce, allgather, broadcast (and their pickled-object forms).

Two routes (nccl.py): tensors of the CPU devices (numpy, cuda_emu) travel over MPI as raw bytes
(no pickling, any dtype); tensors of a GPU travel by NCCL on the device, stream-ordered, never
through the host (without NCCL, they are copied to the host and go over MPI).

Determinism. tapegpu reduces without MPI's reduction operators, so the result does not depend
on which algorithm MPI picks. A buffer of n elements is cut into `size()` chunks. Phase 1
(Ialltoall) sends chunk j of every rank to rank j; rank j combines them in rank order,
`((x0 + x1) + x2) + ...` (then divides by size() for Average); phase 2 (Iallgather) sends every
reduced chunk to every rank. Each element is therefore computed once, by one rank, in a fixed
order, and every rank receives the same bits: ranks stay bit-identical, and a run is
reproducible for a fixed number of ranks. The traffic is that of a ring allreduce (each rank
sends and receives about 2n elements).

Non-blocking reductions are issued on two communicators of their own (one per phase), always
in the same order on every rank, so ranks that reach a bucket at different moments still match.
NCCL's reductions are deterministic too (its ring reduces each chunk once and passes the
result on), so ranks stay bit-identical on that route as well.
"""
import hashlib
import pickle

import numpy as np

from ..core.tensor import Tensor, Variable, convert_to_tensor
from . import nccl
from .runtime import _need, _state, wait


class ReduceOp:
    """How `allreduce` combines the ranks' values: `Average`, `Sum`, `Min` or `Max` (Horovod's
    names); `ReduceOp.SUM` and `ReduceOp.MEAN` are TensorFlow's names of `Sum` and `Average`
    (`tf.distribute.ReduceOp`, what `Strategy.reduce` takes)."""

    def __init__(self, name, ufunc, kinds):
        self.name = name
        self.ufunc = ufunc
        self.kinds = kinds  # numpy dtype kinds it applies to

    def __repr__(self):
        return f"tg.distribute.{self.name}"


Average = ReduceOp("Average", np.add, "fc")
Sum = ReduceOp("Sum", np.add, "iufc")
Min = ReduceOp("Min", np.minimum, "iuf")
Max = ReduceOp("Max", np.maximum, "iuf")
_OPS = (Average, Sum, Min, Max)
ReduceOp.SUM = Sum
ReduceOp.MEAN = Average


class NoneCompressor:
    """No compression: values travel in their own dtype."""

    name = "none"

    @staticmethod
    def wire_dtype(dtype):
        return np.dtype(dtype)

    @staticmethod
    def wire_name(dtype):
        return np.dtype(dtype).name

    @staticmethod
    def encode(xp, array):
        """`array` as it travels (on its device, numpy or CuPy)."""
        return array

    @staticmethod
    def decode(xp, array, dtype):
        return array

    @staticmethod
    def compress(tensor):
        """`(tensor, context)`: the tensor as it travels, and what `decompress` needs."""
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor:
    """Floating-point values travel as float16 (half the bytes of float32), converted on their
    device; results come back in the original dtype. Over MPI each rank combines its chunk in
    the original dtype; NCCL adds in float16 (Horovod's fp16 over NCCL does the same). Other
    dtypes travel unchanged."""

    name = "fp16"

    @staticmethod
    def wire_dtype(dtype):
        dtype = np.dtype(dtype)
        return np.dtype(np.float16) if dtype.kind == "f" else dtype

    @classmethod
    def wire_name(cls, dtype):
        return cls.wire_dtype(dtype).name

    @staticmethod
    def encode(xp, array):
        return array.astype(np.float16) if array.dtype.kind == "f" else array

    @staticmethod
    def decode(xp, array, dtype):
        return array if array.dtype == dtype else array.astype(dtype)

    @staticmethod
    def compress(tensor):
        """`(tensor as float16, its original dtype)` for floating tensors; others unchanged."""
        data = tensor._data if isinstance(tensor, Tensor) else np.asarray(tensor)
        if data.dtype.kind != "f":
            return tensor, None
        out = data.astype(np.float16)
        return (Tensor(out, tensor._dev) if isinstance(tensor, Tensor) else out), data.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is None:
            return tensor
        if isinstance(tensor, Tensor):
            return Tensor(tensor._data.astype(ctx), tensor._dev)
        return np.asarray(tensor).astype(ctx)


def to_bfloat16(xp, array):
    """bfloat16 bits (uint16) of a floating array, rounded to nearest even (NaN stays NaN):
    the high half of float32, on the array's device."""
    f = array.astype(np.float32)
    u = f.view(np.uint32)
    rounded = ((u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) >>
               np.uint32(16)).astype(np.uint16)
    return xp.where(xp.isnan(f), np.uint16(0x7FC0), rounded)


def from_bfloat16(xp, bits, dtype):
    """The values of bfloat16 bits (uint16, or int16 holding them) in `dtype`: the bits are
    float32's high half."""
    if bits.dtype == np.int16:
        bits = bits.view(np.uint16)
    f = (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return f if np.dtype(dtype) == np.float32 else f.astype(dtype)


class BF16Compressor:
    """Floating-point values travel as bfloat16 (float32's range, 8 bits of mantissa; half the
    bytes of float32), converted on their device; results come back in the original dtype.
    The bits travel as uint16 arrays (numpy and CuPy have no bfloat16): NCCL reduces them as
    NCCL_BFLOAT16, MPI's ranks widen them to the original dtype to add. Other dtypes travel
    unchanged. (tapegpu's addition to Horovod's choices.)"""

    name = "bf16"

    @staticmethod
    def wire_dtype(dtype):
        dtype = np.dtype(dtype)
        return np.dtype(np.uint16) if dtype.kind == "f" else dtype

    @staticmethod
    def wire_name(dtype):
        dtype = np.dtype(dtype)
        return "bfloat16" if dtype.kind == "f" else dtype.name

    @staticmethod
    def encode(xp, array):
        return to_bfloat16(xp, array) if array.dtype.kind == "f" else array

    @staticmethod
    def decode(xp, array, dtype):
        return from_bfloat16(xp, array, dtype) if np.dtype(dtype).kind == "f" else array

    @staticmethod
    def compress(tensor):
        """`(bfloat16 bits in an int16 tensor, the original dtype)` for floating tensors
        (tapegpu has no uint16 tensors; the bits are the same)."""
        data = tensor._data if isinstance(tensor, Tensor) else np.asarray(tensor)
        if data.dtype.kind != "f":
            return tensor, None
        xp = tensor._dev.xp if isinstance(tensor, Tensor) else np
        out = to_bfloat16(xp, data).view(np.int16)
        return (Tensor(out, tensor._dev) if isinstance(tensor, Tensor) else out), data.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is None:
            return tensor
        if isinstance(tensor, Tensor):
            return Tensor(from_bfloat16(tensor._dev.xp, tensor._data, ctx), tensor._dev)
        return from_bfloat16(np, np.asarray(tensor), ctx)


class Compression:
    """Horovod's compression choices, `Compression.none` and `Compression.fp16`, and
    `Compression.bf16`: what travels between the ranks."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor


def check_op(op, dtype, what):
    if op not in _OPS:
        raise ValueError(f"tg.distribute.{what}: op must be tg.distribute.Average, Sum, Min or "
                         f"Max, got {op!r}")
    if np.dtype(dtype).kind not in op.kinds:
        valid = {"fc": "floating or complex", "iufc": "numeric", "iuf": "real (int or float)"}
        hint = " (use Sum for integers)" if op is Average and np.dtype(dtype).kind in "iu" \
            else ""
        raise TypeError(f"tg.distribute.{what}: op {op.name} needs {valid[op.kinds]} tensors, "
                        f"got {np.dtype(dtype).name}{hint}")


def check_compression(compression, what):
    if compression not in (NoneCompressor, FP16Compressor, BF16Compressor):
        raise ValueError(f"tg.distribute.{what}: compression must be tg.distribute.Compression"
                         f".none, Compression.fp16 or Compression.bf16, got {compression!r}")


def path_of(t, dtype=None, compression=NoneCompressor):
    """'nccl' when the tensor travels by NCCL (a GPU tensor of a dtype NCCL carries), else
    'mpi' (nccl.py)."""
    dtype = np.dtype(t._data.dtype if dtype is None else dtype)
    if nccl.route(t._dev) == "nccl" and nccl.carries(dtype, compression.wire_name(dtype)):
        return "nccl"
    return "mpi"


# -- arrays in and out ----------------------------------------------------------------------------

def as_tensor(t, what):
    if isinstance(t, Variable):
        return t._value
    if isinstance(t, Tensor):
        return t
    try:
        return convert_to_tensor(t)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"tg.distribute.{what}: expected a tensor, variable or array, got "
                        f"{type(t).__name__} ({exc})") from None


def host(t):
    """A tensor's value as a host numpy array (no copy on the numpy and cuda_emu devices)."""
    return np.asarray(t._dev.to_numpy(t._data))


def on_device(array, dev):
    return Tensor(dev.asarray(array), dev)


def _bytes(a):
    """A contiguous array's bytes as a 1-d uint8 view (0-d and empty arrays too)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


# -- the non-blocking reduction of one flat buffer --------------------------------------------

class Reduction:
    """One flat host buffer of n elements being allreduced in two phases (module docstring).
    Fill `buffer` (n elements of the values' dtype), then `start()`. Create and start them in
    the same order on every rank; `Reducer` drives them."""

    def __init__(self, n, dtype, op, compression):
        st = _state
        self.p = p = st.comm.Get_size()
        self.op = op
        self.n = n
        self.compression = compression
        self.dtype = dtype = np.dtype(dtype)
        self.wire = wire = compression.wire_dtype(dtype)
        self.m = m = max(1, -(-n // p))
        self.send = np.empty((p, m), wire)
        flat = self.send.reshape(-1)
        flat[n:] = 0  # the padding
        # packed straight into the send buffer when nothing is compressed
        self.buffer = flat[:n] if wire == dtype else np.empty(n, dtype)
        self.request = None
        self.out = None

    def start(self):
        if self.wire != self.dtype:
            self.send.reshape(-1)[:self.n] = self.compression.encode(np, self.buffer)
        self.buffer = None
        if self.p == 1:  # the rank-order combination of one value: the value itself
            self.out = self.send
            self.request = _state.MPI.REQUEST_NULL
            return
        self.recv = np.empty((self.p, self.m), self.wire)
        self.request = _state.comm_scatter.Ialltoall(self.send.view(np.uint8),
                                                     self.recv.view(np.uint8))

    def scattered(self):
        return self.out is not None or self.request.Test()

    def gather(self):
        """Combines this rank's chunk in rank order and starts phase 2."""
        if self.out is not None:
            return
        rows = self.recv
        c = self.compression
        acc = c.decode(np, rows[0], self.dtype).astype(self.dtype)
        ufunc = self.op.ufunc
        for j in range(1, rows.shape[0]):
            ufunc(acc, c.decode(np, rows[j], self.dtype), out=acc)
        if self.op is Average:
            acc /= rows.shape[0]
        self.chunk = np.ascontiguousarray(c.encode(np, acc).astype(self.wire, copy=False))
        self.send = self.recv = None
        self.out = np.empty((rows.shape[0], self.m), self.wire)
        self.request = _state.comm_gather.Iallgather(self.chunk.view(np.uint8),
                                                     self.out.view(np.uint8))

    def result(self):
        flat = self.out.reshape(-1)[:self.n]
        return flat if flat.dtype == self.dtype else \
            self.compression.decode(np, flat, self.dtype).astype(self.dtype, copy=False)


class Reducer:
    """Drives reductions: starts each one's phase 2 in creation order as soon as its phase 1
    is done (`progress`, called between pieces of work), and waits for all of them
    (`finish`, bounded by the job's timeout)."""

    def __init__(self):
        self.items = []
        self.gathering = 0  # items before this one have started phase 2

    def add(self, n, dtype, op, compression):
        """A new reduction of n elements: fill its `buffer`, then `start()` it."""
        r = Reduction(n, dtype, op, compression)
        self.items.append(r)
        return r

    def progress(self):
        """Advances MPI; returns whether every reduction is complete."""
        items = self.items
        while self.gathering < len(items) and items[self.gathering].scattered():
            items[self.gathering].gather()
            self.gathering += 1
        if self.gathering < len(items):
            return False
        return _state.MPI.Request.Testall([r.request for r in items])

    def finish(self, what):
        wait(self.progress, what)
        return [r.result() for r in self.items]


# -- signatures: what every rank must agree on before a collective ----------------------------

def check_signature(signature, what, describe=None):
    """Raises ValueError on every rank when the ranks' `signature`s (a list of plain values,
    e.g. one (name, dtype, shape) per gradient) differ, showing rank 0's and the first
    differing rank's. A 16-byte digest travels, the signatures only when they differ."""
    st = _state
    p = st.comm.Get_size()
    if p == 1:
        return
    digest = np.frombuffer(hashlib.blake2b(repr(signature).encode(), digest_size=16).digest(),
                           np.uint8)
    everyone = np.empty((p, 16), np.uint8)
    wait([st.comm.Iallgather(digest, everyone)], what)
    if (everyone == everyone[0]).all():
        return
    sigs = allgather_object(signature, _what=what)
    r = next(i for i in range(1, p) if sigs[i] != sigs[0])
    a, b = sigs[0], sigs[r]
    show = describe or repr
    lines = []
    if len(a) != len(b):
        lines.append(f"rank 0 has {len(a)} entries, rank {r} has {len(b)}")
    diffs = [i for i in range(min(len(a), len(b))) if a[i] != b[i]]
    for i in diffs[:5]:
        lines.append(f"entry {i}: rank 0 has {show(a[i])}, rank {r} has {show(b[i])}")
    if len(diffs) > 5:
        lines.append(f"... and {len(diffs) - 5} more differences")
    if len(a) != len(b) and not diffs:
        longer, who = (a, 0) if len(a) > len(b) else (b, r)
        lines.append(f"rank {who} also has {[show(x) for x in longer[min(len(a), len(b)):]]}")
    raise ValueError(f"tg.distribute.{what}: the ranks do not agree on what to reduce (every "
                     "rank must pass the same variables, shapes and dtypes, in the same order): "
                     + "; ".join(lines) + f"\n  rank 0: {[show(x) for x in a]}\n  rank {r}: "
                     f"{[show(x) for x in b]}")


def _describe_array(entry):
    """(name, dtype, shape, ...) as `name float32[3, 4] ...`; other entries as `key=value`."""
    if len(entry) >= 3 and isinstance(entry[2], tuple):
        extra = "".join(f" {x}" for x in entry[3:])
        return f"{entry[0]} {entry[1]}{list(entry[2])}{extra}"
    return "=".join(str(x) for x in entry)


# -- tensor collectives -----------------------------------------------------------------------

def allreduce(tensor, op=Average, compression=Compression.none, name=None):
    """The elementwise reduction of `tensor` over all ranks (`Average` by default, `Sum`,
    `Min`, `Max`), on every rank, bit-identical everywhere (see the module docstring).

        g = tg.distribute.allreduce(tg.constant([1.0, 2.0]) * (tg.distribute.rank() + 1))
        # with 2 ranks: [1.5, 3.0] on both
    """
    st = _need("allreduce")
    check_compression(compression, "allreduce")
    t = as_tensor(tensor, "allreduce")
    check_op(op, t._data.dtype, "allreduce")
    path = path_of(t, compression=compression)
    check_signature([(name or "tensor", t._data.dtype.name, tuple(t.shape)), ("op", op.name),
                     ("compression", compression.name), ("path", path)], "allreduce",
                    _describe_array)
    del st
    if path == "nccl":  # on the device, stream-ordered
        r = nccl.DeviceReduction(nccl.link(t._dev, "allreduce"), t.size, t._data.dtype, op,
                                 compression)
        r.pack(0, t._data)
        r.start()
        return Tensor(r.result().reshape(t.shape), t._dev)
    reducer = Reducer()
    r = reducer.add(t.size, t._data.dtype, op, compression)
    r.buffer[...] = host(t).reshape(-1)
    r.start()
    (flat,) = reducer.finish("allreduce")
    return on_device(flat.reshape(t.shape), t._dev)


def allgather(tensor, name=None):
    """The ranks' tensors concatenated along axis 0, in rank order, on every rank. Their
    dtypes and shapes past axis 0 must agree; axis 0 may differ.

        x = tg.ones((tg.distribute.rank() + 1, 3))
        tg.distribute.allgather(x).shape  # (3, 3) with 2 ranks
    """
    st = _need("allgather")
    t = as_tensor(tensor, "allgather")
    if t.ndim == 0:
        raise ValueError("tg.distribute.allgather: the tensor must have at least one axis (it is "
                         "concatenated along axis 0); got a scalar, reshape it to (1,)")
    path = "nccl" if nccl.route(t._dev) == "nccl" else "mpi"
    check_signature([(name or "tensor", t._data.dtype.name, ("*",) + tuple(t.shape[1:])),
                     ("path", path)], "allgather", _describe_array)
    p = st.comm.Get_size()
    rows = np.empty(p, np.int64)
    wait([st.comm.Iallgather(np.array([t.shape[0]], np.int64), rows)], "allgather")
    if path == "nccl":  # padded to the most rows, gathered on the device, padding dropped
        lk = nccl.link(t._dev, "allgather")
        xp = lk.xp
        most = int(rows.max())
        with t._dev.context():
            send = xp.zeros((most,) + tuple(t.shape[1:]), t._data.dtype)
            send[:t.shape[0]] = t._data
            stacked = nccl.allgather_flat(lk, send, most)
            out = xp.concatenate([stacked[j, :int(rows[j])] for j in range(p)])
        return Tensor(out, t._dev)
    data = np.ascontiguousarray(host(t))
    row_bytes = data.dtype.itemsize * int(np.prod(data.shape[1:], dtype=np.int64))
    counts = [int(r) * row_bytes for r in rows]
    displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist()
    out = np.empty((int(rows.sum()),) + data.shape[1:], data.dtype)
    wait([st.comm.Iallgatherv(_bytes(data), [_bytes(out), counts, displs, st.MPI.BYTE])],
         "allgather")
    return on_device(out, t._dev)


def broadcast(tensor, root_rank=0, name=None):
    """Rank `root_rank`'s value of `tensor`, on every rank (a new tensor on the tensor's
    device). Every rank passes a tensor of the same shape and dtype.

        w0 = tg.distribute.broadcast(tg.random.normal((3,)), root_rank=0)  # rank 0's draw
    """
    st = _need("broadcast")
    _check_root(root_rank, "broadcast")
    t = as_tensor(tensor, "broadcast")
    path = "nccl" if nccl.route(t._dev) == "nccl" else "mpi"
    check_signature([(name or "tensor", t._data.dtype.name, tuple(t.shape)),
                     ("root_rank", int(root_rank)), ("path", path)], "broadcast",
                    _describe_array)
    if path == "nccl":
        lk = nccl.link(t._dev, "broadcast")
        with t._dev.context():
            buf = lk.xp.array(t._data, copy=True, order="C").reshape(-1)
        return Tensor(nccl.broadcast_flat(lk, buf, root_rank).reshape(t.shape), t._dev)
    buf = np.array(host(t), copy=True, order="C")
    wait([st.comm.Ibcast(_bytes(buf), root=int(root_rank))], "broadcast")
    return on_device(buf, t._dev)


def _check_root(root_rank, what):
    p = _state.comm.Get_size()
    if isinstance(root_rank, bool) or not isinstance(root_rank, (int, np.integer)) or \
            not 0 <= root_rank < p:
        raise ValueError(f"tg.distribute.{what}: root_rank must be a rank, 0 .. {p - 1}, got "
                         f"{root_rank!r}")


def broadcast_object(obj, root_rank=0, name=None):
    """Rank `root_rank`'s `obj` (any picklable value), on every rank.

        config = tg.distribute.broadcast_object(config if tg.distribute.rank() == 0 else None)
    """
    st = _need("broadcast_object")
    _check_root(root_rank, "broadcast_object")
    root = st.comm.Get_rank() == root_rank
    payload = np.frombuffer(pickle.dumps(obj), np.uint8) if root else None
    length = np.array([payload.size if root else 0], np.int64)
    wait([st.comm.Ibcast(length, root=int(root_rank))], "broadcast_object")
    buf = np.array(payload) if root else np.empty(int(length[0]), np.uint8)
    wait([st.comm.Ibcast(buf, root=int(root_rank))], "broadcast_object")
    return obj if root else pickle.loads(buf.tobytes())


def allgather_object(obj, name=None, _what="allgather_object"):
    """The list of every rank's `obj` (any picklable value), in rank order, on every rank.

        sizes = tg.distribute.allgather_object(len(my_shard))
    """
    st = _need(_what)
    payload = np.frombuffer(pickle.dumps(obj), np.uint8)
    p = st.comm.Get_size()
    lengths = np.empty(p, np.int64)
    wait([st.comm.Iallgather(np.array([payload.size], np.int64), lengths)], _what)
    counts = [int(x) for x in lengths]
    displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist()
    out = np.empty(int(lengths.sum()), np.uint8)
    wait([st.comm.Iallgatherv(np.array(payload), [out, counts, displs, st.MPI.BYTE])], _what)
    return [pickle.loads(out[d:d + c].tobytes()) for d, c in zip(displs, counts)]
