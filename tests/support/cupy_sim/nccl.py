"""`cupy.cuda.nccl` in the stand-in: NCCL's API as CuPy exposes it (CuPy 13/14), over numpy.

Calls take raw device pointers (`array.data.ptr`) and a stream pointer (`stream.ptr`), as
CuPy's do, and are stream-ordered as NCCL's are: a call returns at once, snapshotting what it
sends, and fills its receive buffer with 0xFF bytes (NaN in every float type); the results land
when work ordered after the call needs them (see `_Stream` in __init__.py: the stream's next
work, a synchronize, an event recorded after the call being waited for or synchronized). A
program that reads a result without ordering itself after the collective reads NaN, as it
would read garbage on a GPU.

Cliques of communicators:

* across processes, `NcclCommunicator(ndev, unique_id, rank)` in each of `ndev` MPI processes
  (mpi4py underneath). Every process of MPI_COMM_WORLD creates its communicator at the same
  time (they meet in MPI_Comm_split, keyed by the unique id), as tapegpu does; a clique over
  a subset of the world is not simulated.
* in one process, `NcclCommunicator.initAll(devices)`: one thread issues each collective for
  every member between `groupStart()` and `groupEnd()` (NCCL's rule for a thread driving
  several devices; a collective for one of several local members outside a group raises,
  where NCCL would deadlock). Driving the members from several threads is not simulated.

Reductions combine the ranks' values in rank order, `((x0 + x1) + x2) + ...`, in the wire
dtype: float16 rounds at each step; bfloat16 (uint16 bits, NCCL_BFLOAT16) is widened to
float32 and rounded back to bfloat16 at each step; NCCL_AVG divides the sum by the rank count
(integers: floor division). Every rank receives the same bits. The communicator's device is
the device current at its creation; buffers and streams on another device are refused.
`send`/`recv` are not simulated.
"""
import hashlib
import os
import threading

import numpy as np

from . import _memory, _pending_count, _pending_lock, _poison, _site, _stream_of, stats
from . import _device_state, _MODULES

NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN, NCCL_AVG = 0, 1, 2, 3, 4
NCCL_INT8 = NCCL_CHAR = 0
NCCL_UINT8 = 1
NCCL_INT32 = NCCL_INT = 2
NCCL_UINT32 = 3
NCCL_INT64 = 4
NCCL_UINT64 = 5
NCCL_FLOAT16 = NCCL_HALF = 6
NCCL_FLOAT32 = NCCL_FLOAT = 7
NCCL_FLOAT64 = NCCL_DOUBLE = 8
NCCL_BFLOAT16 = 9

available = True
_VERSION = 22105  # NCCL 2.21.5
_UNIQUE_ID_BYTES = 128
_DTYPES = {0: np.int8, 1: np.uint8, 2: np.int32, 3: np.uint32, 4: np.int64, 5: np.uint64,
           6: np.float16, 7: np.float32, 8: np.float64, 9: np.uint16}
_OPS = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}
_MESSAGES = {2: "NCCL_ERROR_SYSTEM_ERROR: unhandled system error",
             4: "NCCL_ERROR_INVALID_ARGUMENT: invalid argument",
             5: "NCCL_ERROR_INVALID_USAGE: invalid usage"}


class NcclError(RuntimeError):
    def __init__(self, status, detail=""):
        self.status = status
        msg = _MESSAGES.get(status, f"NCCL error {status}")
        super().__init__(f"{msg}{' (cupy_sim: ' + detail + ')' if detail else ''}")

    def __reduce__(self):
        return (type(self), (self.status,))


def get_version():
    return _VERSION


def get_build_version():
    return _VERSION


def get_unique_id():
    """128 signed chars, as CuPy's (random here: the clique meets by it in MPI_Comm_split)."""
    return tuple(int(b) - 256 if b > 127 else int(b) for b in os.urandom(_UNIQUE_ID_BYTES))


# -- groups -------------------------------------------------------------------------------------
class _GroupState(threading.local):
    def __init__(self):
        self.depth = 0
        self.cliques = []  # in-process cliques with collectives issued in the open group


_group = _GroupState()


def groupStart():
    _group.depth += 1


def groupEnd():
    if _group.depth == 0:
        raise NcclError(5, "groupEnd() without groupStart()")
    _group.depth -= 1
    if _group.depth == 0:
        cliques, _group.cliques = _group.cliques, []
        for clique in cliques:
            clique.launch()


# -- arithmetic ---------------------------------------------------------------------------------
def _bf16_widen(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _bf16_round(x):
    """float32 -> bfloat16 bits, round to nearest even (NaN stays NaN)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    out = ((u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    out[np.isnan(x)] = 0x7FC0
    return out


def _combine(rows, op, datatype):
    """The ranks' rows (p, n) combined in rank order, in the wire dtype."""
    p = rows.shape[0]
    if datatype == NCCL_BFLOAT16:
        acc = _bf16_widen(rows[0])
        for j in range(1, p):
            acc = _bf16_widen(_bf16_round(_ufunc(op)(acc, _bf16_widen(rows[j]))))
        if op == NCCL_AVG:
            acc = _bf16_widen(_bf16_round(acc / np.float32(p)))
        return _bf16_round(acc)
    acc = rows[0].copy()
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(1, p):
            _ufunc(op)(acc, rows[j], out=acc)
        if op == NCCL_AVG:
            if acc.dtype.kind == "f":
                acc = (acc / acc.dtype.type(p)).astype(acc.dtype)
            else:
                acc = acc // acc.dtype.type(p)
    return acc


def _ufunc(op):
    return {NCCL_SUM: np.add, NCCL_AVG: np.add, NCCL_PROD: np.multiply, NCCL_MAX: np.maximum,
            NCCL_MIN: np.minimum}[op]


# -- a collective in flight ---------------------------------------------------------------------
class _Collective:
    """One member's collective: `send` is its snapshot (None where it sends nothing), `recv`
    the numpy view of its receive buffer; it lands (writes `recv`) when its stream needs it."""

    def __init__(self, name, send, recv, count, datatype, op, root, member):
        self.name, self.send, self.recv = name, send, recv
        self.count, self.datatype, self.op, self.root = count, datatype, op, root
        self.member = member  # this rank in the clique
        self.position = 0
        self.result = None  # set by the clique when every member's contribution is in
        self.request = None  # cross-process: the MPI request
        self.gathered = None

    def signature(self):
        return (self.name, self.count, self.datatype, self.op, self.root)

    def ready(self):
        if self.result is not None:
            return True
        return self.request is not None and self.request.Test()

    def land(self):
        if self.result is None:
            if self.request is None:
                raise NcclError(5, f"{self.name} would never complete: the other members of "
                                "its single-process clique issued no matching collective "
                                "(NCCL would deadlock)")
            self.request.Wait()
            self.result = _outcome(self, self.gathered)
        if self.recv is not None and self.result is not False:
            self.recv[...] = self.result.reshape(self.recv.shape)


def _outcome(c, gathered):
    """What member `c.member` receives, given every member's send snapshot (rows, rank order);
    False where it receives nothing (reduce on a non-root)."""
    if c.name in ("allReduce", "reduce"):
        if c.name == "reduce" and c.member != c.root:
            return False
        return _combine(gathered, c.op, c.datatype)
    if c.name == "reduceScatter":
        full = _combine(gathered, c.op, c.datatype)
        return full[c.member * c.count:(c.member + 1) * c.count]
    if c.name == "allGather":
        return gathered.reshape(-1)
    return gathered[c.root]  # broadcast, bcast


class _LocalClique:
    """The communicators that `initAll` made in this process: collectives are matched by
    their order per member, and computed at the end of the group that issued them."""

    def __init__(self, devices):
        self.devices = list(devices)
        self.queues = [[] for _ in devices]  # per member: collectives issued, not computed

    def size(self):
        return len(self.devices)

    def issue(self, c):
        if self.size() > 1 and _group.depth == 0:
            raise NcclError(5, f"{c.name} on one of the {self.size()} communicators of "
                            "initAll() outside groupStart()/groupEnd(): a thread that drives "
                            "several devices must issue each collective for all of them in a "
                            "group (NCCL would deadlock here)")
        self.queues[c.member].append(c)
        if self.size() == 1:
            self.launch()
        elif self not in _group.cliques:
            _group.cliques.append(self)

    def launch(self):
        while all(self.queues):
            batch = [q.pop(0) for q in self.queues]
            sigs = {c.signature() for c in batch}
            if len(sigs) > 1:
                raise NcclError(4, f"the members of a single-process clique issued different "
                                f"collectives in the same position: {sorted(sigs)}")
            gathered = None
            if batch[0].send is not None or batch[0].name in ("broadcast", "bcast"):
                rows = [c.send for c in batch]
                width = max(r.size for r in rows if r is not None)
                dtype = next(r.dtype for r in rows if r is not None)
                gathered = np.stack([r if r is not None else np.zeros(width, dtype)
                                     for r in rows])
            for c in batch:
                c.result = _outcome(c, gathered)
        if any(self.queues):
            left = [len(q) for q in self.queues]
            raise NcclError(5, f"a group ended with collectives missing on some members of a "
                            f"single-process clique (issued per member: {left}); every member "
                            "must issue the same collectives (NCCL would deadlock)")


class _MpiClique:
    """The communicators of `ndev` processes, one each: MPI moves the bytes."""

    def __init__(self, comm):
        self.comm = comm

    def size(self):
        return self.comm.Get_size()

    def issue(self, c):
        p = self.size()
        if c.name in ("broadcast", "bcast"):  # row `root` of `gathered` is what travels
            c.gathered = np.empty((p, c.count), _DTYPES[c.datatype])
            if c.member == c.root:
                c.gathered[c.root] = c.send
            c.request = self.comm.Ibcast(c.gathered[c.root].view(np.uint8), root=c.root)
        else:
            width = c.send.size
            c.gathered = np.empty((p, width), c.send.dtype)
            c.request = self.comm.Iallgather(c.send.view(np.uint8), c.gathered.view(np.uint8))


# -- the communicator ---------------------------------------------------------------------------
class NcclCommunicator:
    """cupy.cuda.nccl.NcclCommunicator(ndev, commId, rank), or `initAll(devices)`."""

    def __init__(self, ndev, commId, rank, config=None):
        if isinstance(commId, (bytes, bytearray)):
            commId = tuple(int(b) - 256 if b > 127 else int(b) for b in commId)
        if len(commId) != _UNIQUE_ID_BYTES:
            raise AssertionError(f"commId must have {_UNIQUE_ID_BYTES} entries")
        if not (isinstance(ndev, int) and ndev >= 1 and isinstance(rank, int) and
                0 <= rank < ndev):
            raise NcclError(4, f"ndev={ndev!r}, rank={rank!r}: need ndev >= 1 and "
                            "0 <= rank < ndev")
        self._device = _device_state.current
        self._rank = rank
        self._alive = True
        if ndev == 1:
            self._clique = _LocalClique([self._device])
            self._member = 0
            return
        try:
            from mpi4py import MPI  # the stand-in's transport between processes
        except ImportError as exc:
            raise NcclError(2, f"a clique across processes needs mpi4py ({exc})") from None
        world = MPI.COMM_WORLD
        color = int.from_bytes(hashlib.blake2b(bytes(b & 0xFF for b in commId),
                                               digest_size=4).digest(), "little") & 0x3FFFFFFF
        comm = world.Split(color, key=rank)
        ranks = comm.allgather(rank)
        if comm.Get_size() != ndev or sorted(ranks) != list(range(ndev)):
            comm.Free()
            raise NcclError(5, f"{comm.Get_size()} processes met with this unique id, ranks "
                            f"{sorted(ranks)}, but ndev={ndev}: every process of "
                            "MPI_COMM_WORLD must create its communicator with the same id "
                            "and ndev, and a distinct rank")
        self._clique = _MpiClique(comm)
        self._member = rank

    @staticmethod
    def initAll(devices):
        if isinstance(devices, list):
            devlist = devices
        elif isinstance(devices, int):
            devlist = list(range(devices))
        else:
            raise ValueError("\"devices\" should be an int or a list of int.")
        count = _MODULES["cupy.cuda"].runtime.getDeviceCount()
        for d in devlist:
            if not 0 <= d < count:
                raise NcclError(4, f"device {d} does not exist ({count} device(s))")
        if len(set(devlist)) != len(devlist):
            raise NcclError(5, f"initAll: devices repeat in {devlist}")
        clique = _LocalClique(devlist)
        comms = []
        for i, d in enumerate(devlist):
            c = NcclCommunicator.__new__(NcclCommunicator)
            c._device, c._rank, c._alive, c._clique, c._member = d, i, True, clique, i
            comms.append(c)
        return comms

    @property
    def comm(self):
        return id(self) if self._alive else 0

    def destroy(self):
        if self._alive and isinstance(self._clique, _MpiClique) and \
                self._clique.comm is not None:
            self._clique.comm.Free()
            self._clique.comm = None
        self._alive = False

    def abort(self):
        self._alive = False

    def device_id(self):
        return self._device

    def rank_id(self):
        return self._rank

    def size(self):
        return self._clique.size()

    def check_async_error(self):
        pass

    # collectives
    def allReduce(self, sendbuf, recvbuf, count, datatype, op, stream):
        self._issue("allReduce", sendbuf, recvbuf, count, datatype, op, 0, stream)

    def reduce(self, sendbuf, recvbuf, count, datatype, op, root, stream):
        self._issue("reduce", sendbuf, recvbuf, count, datatype, op, root, stream)

    def broadcast(self, sendbuff, recvbuff, count, datatype, root, stream):
        self._issue("broadcast", sendbuff, recvbuff, count, datatype, None, root, stream)

    def bcast(self, buff, count, datatype, root, stream):
        self._issue("bcast", buff, buff, count, datatype, None, root, stream)

    def reduceScatter(self, sendbuf, recvbuf, recvcount, datatype, op, stream):
        self._issue("reduceScatter", sendbuf, recvbuf, recvcount, datatype, op, 0, stream)

    def allGather(self, sendbuf, recvbuf, count, datatype, stream):
        self._issue("allGather", sendbuf, recvbuf, count, datatype, None, 0, stream)

    def send(self, sendbuf, count, datatype, peer, stream):
        raise NotImplementedError("cupy_sim: ncclSend is not simulated")

    def recv(self, recvbuf, count, datatype, peer, stream):
        raise NotImplementedError("cupy_sim: ncclRecv is not simulated")

    def _issue(self, name, send_ptr, recv_ptr, count, datatype, op, root, stream_ptr):
        what = f"NcclCommunicator.{name}"
        if not self._alive:
            raise NcclError(5, f"{what} on a destroyed communicator")
        if datatype not in _DTYPES:
            raise NcclError(4, f"{what}: unknown datatype {datatype!r}")
        if op is not None and op not in _OPS:
            raise NcclError(4, f"{what}: unknown reduction op {op!r}")
        p = self._clique.size()
        if not 0 <= root < p:
            raise NcclError(4, f"{what}: root {root} is not a rank of {p}")
        stream = _stream_of(stream_ptr, what)
        if stream._nodes is not None:
            raise NotImplementedError("cupy_sim: NCCL calls inside a stream capture are not "
                                      "simulated")
        if stream is not type(stream).null and stream.device_id != self._device:
            raise NcclError(4, f"{what}: the stream is on device {stream.device_id}, the "
                            f"communicator on device {self._device}")
        dtype = np.dtype(_DTYPES[datatype])
        n_send = count * (p if name == "reduceScatter" else 1)
        n_recv = count * (p if name == "allGather" else 1)
        me = self._member
        sends = name not in ("broadcast", "bcast") or me == root
        receives = name != "reduce" or me == root
        with _pending_lock:
            send = self._buffer(send_ptr, n_send, dtype, what, stream) if sends else None
            recv = self._buffer(recv_ptr, n_recv, dtype, what, None) if receives else None
            c = _Collective(name, None if send is None else send.copy(), recv, count,
                            datatype, op, root, me)
            self._clique.issue(c)  # may refuse it: then nothing is issued
            if recv is not None and not (name == "bcast" and me == root):
                recv[...] = _poison(dtype)
            c.position = stream._issued
            stream._issued += 1
            stream._pending.append(c)
            _pending_count[0] += 1
            stats.nccl[(name, _site())] += 1

    def _buffer(self, ptr, n, dtype, what, stream):
        raw, device = _memory(ptr, n * dtype.itemsize, what)
        if device != self._device:
            raise NcclError(4, f"{what}: a buffer on device {device}, the communicator on "
                            f"device {self._device}")
        if stream is not None:  # what the stream issued before and writes here lands first
            lo, hi = raw.ctypes.data, raw.ctypes.data + raw.nbytes
            while any(_overlaps(op.recv, lo, hi) for op in stream._pending):
                op = stream._pending.pop(0)
                _pending_count[0] -= 1
                op.land()
        return raw.view(dtype)


def _overlaps(a, lo, hi):
    if a is None or a.size == 0:
        return False
    start = a.ctypes.data
    return start < hi and lo < start + a.nbytes
