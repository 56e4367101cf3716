"""NCCL for device tensors (CuPy's `cupy.cuda.nccl`): this rank's communicator on its GPU, the
side stream its collectives run on, and flat device buffers reduced there.

Routes. A tensor of the `cuda` backend travels by NCCL when CuPy's NCCL is available (`pip
install -e ".[nccl]"`); tensors of the CPU devices (numpy, cuda_emu) travel by MPI, which also
carries the bootstrap and the small host-side agreements (signatures, which gradients are
None). Without NCCL, device tensors go through the host over MPI (a warning says so once);
`TAPEGPU_DISTRIBUTE_NCCL=0` asks for that path. Every rank must take the same route for a
tensor: the route is part of what the ranks check they agree on.

Bootstrap. At the first collective on a device tensor, rank 0 makes NCCL's unique id, MPI
broadcasts it, and every rank creates its communicator on its GPU (one GPU per rank: `init`
gives each rank the GPU `local_rank() % gpu_count()` unless TAPEGPU_DEVICE says otherwise).

Stream order. What a collective sends is written on the current stream, which records an
event; the side stream waits for that event, runs the collective and records another event;
the current stream waits for the second event before anything reads the result (the
optimizer's update included). Nothing blocks the host and nothing goes through it: no
synchronize, no copy between host and device.
"""
import contextlib
import importlib
import os
import pickle
import threading
import warnings

import numpy as np

from .runtime import _state, wait

_checked = {}  # "available": bool, "why": the reason NCCL is not usable


def module(what):
    """CuPy's `cupy.cuda.nccl`, or an ImportError saying what to install."""
    try:
        nccl = importlib.import_module("cupy.cuda.nccl")  # CuPy is imported by the GPU backend
    except ImportError as exc:
        raise ImportError(f"tg.distribute.{what}: NCCL for device tensors needs CuPy's "
                          f"cupy.cuda.nccl ({exc}); install it with `pip install -e "
                          "\".[nccl]\"` (CuPy with NCCL's wheel)") from exc
    if not getattr(nccl, "available", False):
        raise ImportError(f"tg.distribute.{what}: CuPy cannot load libnccl; install it with "
                          "`pip install -e \".[nccl]\"` (nvidia-nccl-cu12), or set "
                          "TAPEGPU_DISTRIBUTE_NCCL=0 to reduce device tensors through the host")
    return nccl


class _Forced(threading.local):
    route = None  # 'mpi' inside `forced('mpi')`


_forced = _Forced()


@contextlib.contextmanager
def forced(name):
    """Within the block, this thread's device tensors take route `name` ('mpi': through the
    host; None changes nothing): MultiWorkerMirroredStrategy's RING implementation."""
    saved = _forced.route
    _forced.route = name or saved
    try:
        yield
    finally:
        _forced.route = saved


def route(dev):
    """'nccl' for a tensor of the `cuda` backend when NCCL is usable, else 'mpi'."""
    if getattr(dev, "name", None) != "cuda" or _forced.route == "mpi":
        return "mpi"
    if os.environ.get("TAPEGPU_DISTRIBUTE_NCCL", "") == "0":
        return "mpi"
    if "available" not in _checked:
        try:
            module("init")
            _checked["available"] = True
        except ImportError as exc:
            _checked["available"] = False
            warnings.warn(f"tg.distribute: device tensors go through the host over MPI, since "
                          f"NCCL is not usable: {exc}", RuntimeWarning, stacklevel=3)
    return "nccl" if _checked["available"] else "mpi"


_TYPES = {"int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
          "uint32": "NCCL_UINT32", "int64": "NCCL_INT64", "uint64": "NCCL_UINT64",
          "float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
          "complex64": "NCCL_FLOAT32", "complex128": "NCCL_FLOAT64"}


def carries(dtype, wire=None):
    """Whether NCCL reduces this dtype (its own, or the compressed `wire` dtype)."""
    return (wire or np.dtype(dtype).name) in _TYPES or wire == "bfloat16"


def _bcast_bytes(payload, what):
    """Rank 0's bytes on every rank, over MPI (the bootstrap)."""
    st = _state
    root = st.comm.Get_rank() == 0
    length = np.array([len(payload) if root else 0], np.int64)
    wait([st.comm.Ibcast(length, root=0)], what)
    buf = np.frombuffer(payload, np.uint8).copy() if root else np.empty(int(length[0]), np.uint8)
    wait([st.comm.Ibcast(buf, root=0)], what)
    return buf.tobytes()


class Link:
    """This rank's NCCL communicator on its GPU `dev` and its side stream."""

    def __init__(self, dev, what):
        self.nccl = nccl = module(what)
        self.dev = dev
        self.xp = dev.xp
        st = _state
        self.size = st.comm.Get_size()
        rank = st.comm.Get_rank()
        with dev.context():
            uid = nccl.get_unique_id() if rank == 0 else None
            uid = pickle.loads(_bcast_bytes(pickle.dumps(uid) if rank == 0 else b"", what))
            self.comm = nccl.NcclCommunicator(self.size, uid, rank)
            self.stream = self.xp.cuda.Stream(non_blocking=True)

    def dtype_code(self, name):
        return getattr(self.nccl, "NCCL_BFLOAT16" if name == "bfloat16" else _TYPES[name])

    def op_code(self, op):
        return {"Average": self.nccl.NCCL_SUM, "Sum": self.nccl.NCCL_SUM,
                "Min": self.nccl.NCCL_MIN, "Max": self.nccl.NCCL_MAX}[op.name]

    def after_current(self):
        """Makes the side stream wait for the work issued so far on the current stream."""
        cuda = self.xp.cuda
        ready = cuda.Event(disable_timing=True)
        ready.record(cuda.get_current_stream())
        self.stream.wait_event(ready)

    def done_event(self):
        done = self.xp.cuda.Event(disable_timing=True)
        done.record(self.stream)
        return done

    def destroy(self):
        self.comm.destroy()


def link(dev, what):
    """The Link of this rank's GPU (created at the first use, collectively)."""
    st = _state
    if st.link is None:
        st.link = Link(dev, what)
    elif st.link.dev is not dev:
        raise ValueError(f"tg.distribute.{what}: a tensor on {dev.short}, but this rank's NCCL "
                         f"communicator is on {st.link.dev.short}: each rank reduces the "
                         f"tensors of one GPU (put them on {st.link.dev.short}, or on the CPU)")
    return st.link


def _count(buf, wire_name):
    """The element count NCCL sees for a flat buffer (complex: twice as many reals)."""
    return buf.size * (2 if wire_name.startswith("complex") else 1)


class DeviceReduction:
    """One flat device buffer of n elements allreduced by NCCL on the link's side stream.

    `pack(offset, array)` / `zero(offset, k)` write it on the current stream (compressing as
    they write), `start()` issues the collective, `result()` orders the current stream after
    it and returns the reduced flat array in the values' dtype (decompressed, divided by the
    rank count for Average)."""

    def __init__(self, link, n, dtype, op, compression):
        self.link = link
        self.dtype = np.dtype(dtype)
        self.op = op
        self.compression = compression
        self.wire = compression.wire_name(self.dtype)
        xp = link.xp
        with link.dev.context():
            self.buffer = xp.empty(n, compression.wire_dtype(self.dtype))
        self.done = None

    def pack(self, offset, array):
        flat = array.reshape(-1)
        self.buffer[offset:offset + flat.size] = self.compression.encode(self.link.xp, flat)

    def zero(self, offset, k):
        self.buffer[offset:offset + k] = 0

    def start(self):
        lk = self.link
        with lk.dev.context():
            lk.after_current()
            ptr = self.buffer.data.ptr
            lk.comm.allReduce(ptr, ptr, _count(self.buffer, self.wire), lk.dtype_code(self.wire),
                              lk.op_code(self.op), lk.stream.ptr)
            self.done = lk.done_event()

    def result(self):
        lk = self.link
        xp = lk.xp
        with lk.dev.context():
            xp.cuda.get_current_stream().wait_event(self.done)
            flat = self.compression.decode(xp, self.buffer, self.dtype)
            if self.op.name == "Average":
                flat = flat / self.dtype.type(lk.size)
        self.buffer = None
        return flat


def broadcast_flat(lk, buf, root):
    """Rank `root`'s bytes of the flat device buffer `buf`, in place on every rank."""
    with lk.dev.context():
        lk.after_current()
        raw = buf.view(lk.xp.uint8)
        lk.comm.bcast(raw.data.ptr, raw.size, lk.nccl.NCCL_UINT8, int(root), lk.stream.ptr)
        lk.xp.cuda.get_current_stream().wait_event(lk.done_event())
    return buf


def allgather_flat(lk, send, rows):
    """Every rank's `send` (a contiguous device array of `rows` rows, padded to the same
    size on every rank) stacked in rank order: (size, *send.shape)."""
    xp = lk.xp
    with lk.dev.context():
        out = xp.empty((lk.size,) + tuple(send.shape), send.dtype)
        lk.after_current()
        s, r = send.reshape(-1).view(xp.uint8), out.reshape(-1).view(xp.uint8)
        lk.comm.allGather(s.data.ptr, r.data.ptr, s.size, lk.nccl.NCCL_UINT8, lk.stream.ptr)
        xp.cuda.get_current_stream().wait_event(lk.done_event())
    return out
