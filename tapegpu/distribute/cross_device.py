"""How `MirroredStrategy` combines its replicas' values within this process: TensorFlow's
`tf.distribute.CrossDeviceOps` classes, `NcclAllReduce`, `HierarchicalCopyAllReduce` and
`ReductionToOneDevice`.

Each reduces the replicas' values onto the first replica's device (the primary: the update of a
mirrored variable runs there once), in replica order, and broadcasts the primary's new values
back to the other replicas, so that every replica holds the same bits:

* `NcclAllReduce`: NCCL on the GPUs (`NcclCommunicator.initAll`, one group call per step for
  the reduction and one for the broadcast, per dtype, on flat device buffers); the default
  when every replica is a GPU and CuPy's NCCL is there.
* `ReductionToOneDevice` (and `HierarchicalCopyAllReduce`, which reduces the same way here):
  device-to-device copies to the primary and additions there; the default otherwise (CPU
  replicas share their arrays: a copy is free).
"""
from .. import backends as _backend
from ..core.device import copy_to
from ..core.tensor import Tensor
from . import nccl


class CrossDeviceOps:
    """Base class of the ways `MirroredStrategy` reduces and broadcasts between its devices
    (TensorFlow's `tf.distribute.CrossDeviceOps`); pass an instance as `cross_device_ops`.

        strategy = tg.distribute.MirroredStrategy(
            cross_device_ops=tg.distribute.ReductionToOneDevice())
    """

    def check(self, devices, what):
        """Raises ValueError when these replica devices cannot use this implementation."""

    def reduce(self, devices, values):
        """`values[i]` is variable i's per-replica list (Tensors or None); returns one Tensor
        per variable on `devices[0]`, the replicas' sum in replica order (None where every
        replica has None; a None among others counts as zeros)."""
        raise NotImplementedError

    def broadcast(self, devices, tensors):
        """`tensors` live on `devices[0]`; returns, per replica, the list of their copies."""
        raise NotImplementedError


def _present(parts):
    first = next((p for p in parts if p is not None), None)
    if first is None:
        return None
    return [p if p is not None else Tensor(first._dev.xp.zeros_like(first._data), first._dev)
            for p in parts]


class ReductionToOneDevice(CrossDeviceOps):
    """Copies every replica's value to one device and adds them there, in replica order, then
    copies the result to every replica (TensorFlow's `tf.distribute.ReductionToOneDevice`).
    `reduce_to_device` must be None or the first device (the primary: the update runs there);
    `accumulation_fn`, if given, adds a list of tensors (default: left to right)."""

    def __init__(self, reduce_to_device=None, accumulation_fn=None):
        self.reduce_to_device = reduce_to_device
        self.accumulation_fn = accumulation_fn

    def check(self, devices, what):
        if self.reduce_to_device is None:
            return
        if _backend.lookup(self.reduce_to_device) is not devices[0].backend:
            raise ValueError(f"tg.distribute.{what}: ReductionToOneDevice(reduce_to_device="
                             f"{self.reduce_to_device!r}): tapegpu reduces on the first "
                             f"replica's device, {devices[0].name}; pass None or that device")

    def reduce(self, devices, values):
        primary = devices[0].backend
        out = []
        for parts in values:
            parts = _present(parts)
            if parts is None:
                out.append(None)
                continue
            moved = [copy_to(p, primary) for p in parts]
            if self.accumulation_fn is not None:
                out.append(self.accumulation_fn(moved))
                continue
            acc = moved[0]._data
            for p in moved[1:]:
                acc = acc + p._data
            out.append(Tensor(acc, primary))
        return out

    def broadcast(self, devices, tensors):
        return [[t if d.backend is t._dev else copy_to(t, d.backend) for t in tensors]
                for d in devices]


class HierarchicalCopyAllReduce(ReductionToOneDevice):
    """TensorFlow's `tf.distribute.HierarchicalCopyAllReduce(num_packs=1)`: here it reduces as
    `ReductionToOneDevice` does (device-to-device copies to the first device, additions
    there); TensorFlow's tree over a DGX-1's links is not modelled."""

    def __init__(self, num_packs=1):
        super().__init__()
        self.num_packs = num_packs


class NcclAllReduce(CrossDeviceOps):
    """NCCL between the replicas' GPUs (TensorFlow's `tf.distribute.NcclAllReduce`): per
    dtype, the replicas' values are packed into one flat buffer per GPU, reduced onto the
    first GPU by one NCCL group call, and the first GPU's new values broadcast back by
    another. `num_packs` is accepted and has no effect (one pack per dtype)."""

    def __init__(self, num_packs=1):
        self.num_packs = num_packs
        self._comms = {}  # tuple of GPU indices -> NcclCommunicator.initAll's list

    def check(self, devices, what):
        if any(getattr(d.backend, "name", None) != "cuda" for d in devices):
            raise ValueError(f"tg.distribute.{what}: NcclAllReduce needs GPU replicas, got "
                             f"{[d.name for d in devices]}; use ReductionToOneDevice for "
                             "CPU devices")
        nccl.module(what)

    def _comms_for(self, devices):
        key = tuple(d.backend.index for d in devices)
        if key not in self._comms:
            self._comms[key] = nccl.module("MirroredStrategy").NcclCommunicator.initAll(
                list(key))
        return self._comms[key]

    def reduce(self, devices, values):
        out = [None] * len(values)
        groups = {}
        for i, parts in enumerate(values):
            parts = _present(parts)
            if parts is not None:
                out[i] = parts
                groups.setdefault(parts[0]._data.dtype.name, []).append(i)
        for dtype, members in groups.items():
            flat = self._collective(devices, [[out[i][r]._data for i in members]
                                              for r in range(len(devices))], dtype, "reduce")
            off = 0
            for i in members:
                t = out[i][0]
                out[i] = Tensor(flat[off:off + t.size].reshape(t.shape), devices[0].backend)
                off += t.size
        return out

    def broadcast(self, devices, tensors):
        per = [[None] * len(tensors) for _ in devices]
        groups = {}
        for i, t in enumerate(tensors):
            groups.setdefault(t._data.dtype.name, []).append(i)
        for dtype, members in groups.items():
            arrays = [tensors[i]._data for i in members]
            flats = self._collective(devices, [arrays] + [None] * (len(devices) - 1), dtype,
                                     "bcast")
            for r, d in enumerate(devices):
                off = 0
                for i in members:
                    t = tensors[i]
                    per[r][i] = t if r == 0 else Tensor(
                        flats[r][off:off + t.size].reshape(t.shape), d.backend)
                    off += t.size
        return per

    def _collective(self, devices, arrays, dtype, kind):
        """One NCCL group call over the replicas' flat buffers of `arrays` (per replica: a
        list of arrays to pack, or None for a receiving buffer): 'reduce' returns the
        primary's sum, 'bcast' every replica's buffer."""
        comms = self._comms_for(devices)
        lib = nccl.module("MirroredStrategy")
        code = getattr(lib, nccl._TYPES[dtype])
        n = sum(a.size for a in next(a for a in arrays if a is not None))
        count = n * (2 if dtype.startswith("complex") else 1)
        flats = []
        for d, parts in zip(devices, arrays):
            xp = d.backend.xp
            with d.backend.context():
                buf = xp.empty(n, dtype)
                off = 0
                for a in parts or ():
                    buf[off:off + a.size] = a.reshape(-1)
                    off += a.size
            flats.append(buf)
        lib.groupStart()
        try:
            for d, comm, buf in zip(devices, comms, flats):
                with d.backend.context():
                    stream = d.backend.xp.cuda.get_current_stream().ptr
                    if kind == "reduce":
                        comm.reduce(buf.data.ptr, buf.data.ptr, count, code, lib.NCCL_SUM, 0,
                                    stream)
                    else:
                        comm.bcast(buf.data.ptr, count, code, 0, stream)
        finally:
            lib.groupEnd()
        return flats[0] if kind == "reduce" else flats


def default(devices):
    """NcclAllReduce when every replica is a GPU and NCCL is usable, else
    ReductionToOneDevice."""
    if len(devices) > 1 and all(nccl.route(d.backend) == "nccl" for d in devices):
        return NcclAllReduce()
    return ReductionToOneDevice()
