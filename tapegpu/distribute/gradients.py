"""Data-parallel training: gradients reduced over ranks in buckets, overlapped with the sweep.

`DistributedGradientTape.gradient` packs the gradients into buckets (`bucket_bytes`, 25 MiB by
default; one dtype per bucket, sources taken last to first, as a model's last layers get their
gradients first) and starts each bucket's non-blocking reduction as soon as all its gradients
are final, while the backward sweep goes on with the earlier layers.

A source's gradient is final once the reverse walk has passed its first use on the tape. The
tape's entries are cut at those points, and the walk runs segment by segment (each segment is
one `sweep.backward` call over consecutive entries, seeded with the cotangents flowing out of
the segments above it); between segments, the ready buckets start and MPI makes progress. The
cotangents are the same as in one sweep, summed in the same order. Buckets start in the same
order on every rank (a bucket waits for the ones before it), which MPI and NCCL need.

Gradients on a GPU go into flat device buckets (one per dtype, up to `bucket_bytes`, as DDP's)
that NCCL reduces on a side stream (nccl.py): a bucket is packed on the current stream as soon
as its gradients are final, the side stream waits for that and runs the allreduce, and the
gradients handed back are views of the reduced bucket, which the current stream (so the
optimizer's update) waits for with an event. Only which gradients are None crosses the host
(a few bytes over MPI per step); no gradient value does, and nothing synchronizes.
"""
import functools

import numpy as np

from ..autodiff import sweep
from ..autodiff.recorder import UnconnectedGradients
from ..autodiff.tape import GradientTape
from ..core import nest
from ..core.tensor import Tensor, Variable
from . import nccl
from .collectives import (_OPS, Average, Compression, Reducer, _describe_array, as_tensor,
                          check_compression, check_op, check_signature, host, on_device,
                          path_of)
from .runtime import _need, _state, wait

BUCKET_BYTES = 25 * 2 ** 20  # the default bucket size (as PyTorch DDP's bucket_cap_mb=25)


def _check_bucket_bytes(bucket_bytes, what):
    if bucket_bytes is None:
        return BUCKET_BYTES
    if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, (int, np.integer)) or \
            bucket_bytes < 1:
        raise ValueError(f"tg.distribute.{what}: bucket_bytes must be a positive number of "
                         f"bytes or None (25 MiB), got {bucket_bytes!r}")
    return int(bucket_bytes)


def _entry(s, i, compression=Compression.none):
    """What every rank must agree on about one source: (name, dtype, shape), and 'nccl' when
    its gradient travels by NCCL."""
    v = s._value if isinstance(s, Variable) else s
    if not isinstance(v, Tensor):
        raise TypeError(f"tg.distribute.DistributedGradientTape.gradient: source {i} is a "
                        f"{type(s).__name__}; sources must be tg.Tensor or tg.Variable")
    name = s.name if isinstance(s, Variable) else f"source {i}"
    entry = (name, v._data.dtype.name, tuple(v.shape))
    if v._data.dtype.kind in "fc" and path_of(v, compression=compression) == "nccl":
        entry += ("nccl",)
    return entry


def plan_buckets(dtypes, nbytes, bucket_bytes, places=None):
    """Buckets of source indices: floating sources only, last to first, one dtype (and one
    place: 'nccl' or the host) per bucket, each up to `bucket_bytes` (a larger gradient gets a
    bucket of its own). A function of the ranks' common signature, so every rank has the same
    buckets."""
    buckets, open_ = [], {}
    for i in range(len(dtypes) - 1, -1, -1):
        if np.dtype(dtypes[i]).kind not in "fc":
            continue
        key = (dtypes[i], None if places is None else places[i])
        b = open_.get(key)
        if b is None or (b[1] + nbytes[i] > bucket_bytes and b[0]):
            b = open_[key] = [[], 0]
            buckets.append(b)
        b[0].append(i)
        b[1] += nbytes[i]
    return [b[0] for b in buckets]


class _Exchange:
    """The buckets of one set of gradients: packing, starting (in bucket order), results.
    Host buckets are reduced over MPI (`Reducer`), device buckets by NCCL."""

    def __init__(self, sources, buckets, op, compression, what, on_device=()):
        self.sources = sources  # flat list of tensors / variables (their shapes and devices)
        self.buckets = buckets
        self.on_device = set(on_device)  # indices of the buckets NCCL reduces
        self.op = op
        self.compression = compression
        self.what = what
        self.reducer = Reducer()
        self.device = {}  # bucket index -> (DeviceReduction, [gradient is not None])
        self.started = 0  # buckets[:started] are on their way

    def start_through(self, k, values):
        """Starts buckets up to index k (inclusive) not started yet; `values[i]` is source i's
        local gradient (a Tensor) or None."""
        while self.started <= k:
            self._start(self.started, values)
            self.started += 1

    def _start(self, b, values):
        members = self.buckets[b]
        first = _value_of(self.sources[members[0]])
        dtype = first._data.dtype
        sizes = [_value_of(self.sources[i]).size for i in members]
        total = sum(sizes)
        if b in self.on_device:
            r = nccl.DeviceReduction(nccl.link(first._dev, self.what), total, dtype, self.op,
                                     self.compression)
            off = 0
            for i, n in zip(members, sizes):
                if values[i] is None:
                    r.zero(off, n)  # a None gradient counts as zeros
                else:
                    r.pack(off, values[i]._data)
                off += n
            r.start()
            self.device[b] = (r, [values[i] is not None for i in members])
            return
        r = self.reducer.add(total + len(members), dtype, self.op, self.compression)
        flat = r.buffer  # the gradients, then one flag each
        off = 0
        for k, (i, n) in enumerate(zip(members, sizes)):
            g = values[i]
            if g is None:
                flat[off:off + n] = 0
                flat[total + k] = 0
            else:
                flat[off:off + n] = host(g).reshape(-1)
                flat[total + k] = 1  # connected here: a None gradient counts as zeros
            off += n
        r.start()

    def progress(self):
        return self.reducer.progress()

    def results(self):
        """{source index: reduced Tensor, or None where no rank had a gradient}."""
        out = {}
        on_host = iter(self.reducer.finish(self.what))
        connected = self._connected()
        for b, members in enumerate(self.buckets):
            if b in self.on_device:
                flat = self.device[b][0].result()
                flags = connected[b]
            else:
                flat = next(on_host)
                flags = flat[flat.size - len(members):] != 0
            off = 0
            for k, i in enumerate(members):
                v = _value_of(self.sources[i])
                n = v.size
                if not flags[k]:
                    out[i] = None
                elif b in self.on_device:  # a view of the reduced bucket
                    out[i] = Tensor(flat[off:off + n].reshape(v.shape), v._dev)
                else:
                    out[i] = on_device(flat[off:off + n].reshape(v.shape), v._dev)
                off += n
        return out

    def _connected(self):
        """{device bucket: [whether some rank has each gradient]}: the ranks' flags meet over
        MPI (host values, known without reading the device)."""
        if not self.device:
            return {}
        order = sorted(self.device)
        mine = np.array([f for b in order for f in self.device[b][1]], np.uint8)
        st = _state
        every = mine.copy()
        if st.comm.Get_size() > 1:
            wait([st.comm.Iallreduce(mine, every, op=st.MPI.MAX)], self.what)
        out, off = {}, 0
        for b in order:
            n = len(self.device[b][1])
            out[b] = [bool(x) for x in every[off:off + n]]
            off += n
        return out


def _value_of(s):
    return s._value if isinstance(s, Variable) else s


def _prepare(flat, op, compression, bucket_bytes, what):
    """Checks the arguments and the ranks' agreement; returns the exchange, ready to start."""
    _need(what)
    check_compression(compression, what)
    entries = [_entry(s, i, compression) for i, s in enumerate(flat)]
    for entry in entries:
        if np.dtype(entry[1]).kind in "fc":
            check_op(op, entry[1], what)
    check_signature(entries + [("op", op.name), ("compression", compression.name)], what,
                    _describe_array)
    dtypes = [e[1] for e in entries]
    nbytes = [np.dtype(e[1]).itemsize * int(np.prod(e[2], dtype=np.int64)) for e in entries]
    places = ["nccl" if e[3:] == ("nccl",) else "host" for e in entries]
    buckets = plan_buckets(dtypes, nbytes, bucket_bytes, places)
    on_device = [b for b, members in enumerate(buckets) if places[members[0]] == "nccl"]
    return _Exchange(flat, buckets, op, compression, what, on_device)


class DistributedGradientTape:
    """Wraps a `tg.GradientTape`: `gradient` returns the gradients averaged (`op=Average`) or
    summed (`op=Sum`) over all ranks, identical on every rank (Horovod's
    `hvd.DistributedGradientTape`).

        with tg.GradientTape() as tape:
            loss = loss_fn(model(x_shard), y_shard)
        tape = tg.distribute.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)

    The gradients travel in buckets of up to `bucket_bytes` (25 MiB by default); with
    `overlap=True` (the default) each bucket's reduction starts during the backward sweep, as
    soon as its gradients are final (see tapegpu/distribute/gradients.py). `compression`
    (`Compression.none` or `Compression.fp16`) is what travels. A gradient that is None on
    some ranks counts as zeros there; it stays None only where it is None on every rank.
    `sparse_as_dense` is accepted for Horovod compatibility: tapegpu's gradients are always
    dense. Every rank must ask for the same sources (names, shapes, dtypes, in order): the
    first reduction checks it and raises ValueError showing both sides otherwise. The
    reduced gradients are new tensors that no tape records (no higher-order gradients
    through the reduction). Any other attribute is the wrapped tape's.
    """

    def __init__(self, gradtape, compression=Compression.none, sparse_as_dense=False,
                 op=Average, bucket_bytes=None, overlap=True):
        if not isinstance(gradtape, GradientTape):
            raise TypeError(f"tg.distribute.DistributedGradientTape: expected a "
                            f"tg.GradientTape, got {type(gradtape).__name__}")
        check_compression(compression, "DistributedGradientTape")
        if op not in _OPS:
            raise ValueError(f"tg.distribute.DistributedGradientTape: op must be "
                             f"tg.distribute.Average, Sum, Min or Max, got {op!r}")
        self._tape = gradtape
        self._compression = compression
        self._op = op
        self._bucket_bytes = _check_bucket_bytes(bucket_bytes, "DistributedGradientTape")
        self._overlap = bool(overlap)
        self.sparse_as_dense = bool(sparse_as_dense)

    def __getattr__(self, name):
        return getattr(self._tape, name)

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=UnconnectedGradients.NONE):
        """`GradientTape.gradient`, reduced over the ranks (see the class docstring).

            grads = tape.gradient(loss, model.trainable_variables)
        """
        what = "DistributedGradientTape.gradient"
        flat = nest.flatten(sources)
        exchange = _prepare(flat, self._op, self._compression, self._bucket_bytes, what)
        tape = self._tape
        if self._overlap:
            session = _OverlappedSweep(tape, flat, exchange)
            tape._sweep = session.sweep  # this call's sweep: segment by segment
            try:
                local = tape.gradient(target, sources, output_gradients, unconnected_gradients)
            finally:
                del tape._sweep
        else:
            local = tape.gradient(target, sources, output_gradients, unconnected_gradients)
        local_flat = nest.flatten(local)
        if exchange.buckets:
            exchange.start_through(len(exchange.buckets) - 1, local_flat)
        reduced = exchange.results()
        out = [local_flat[i] if reduced.get(i) is None else reduced[i]
               for i in range(len(flat))]
        return nest.pack_sequence_as(sources, out)


class _OverlappedSweep:
    """`GradientTape._sweep` for one `gradient` call: the reverse walk cut at the points where
    buckets' gradients become final, starting the buckets in between."""

    def __init__(self, tape, flat, exchange):
        self.tape = tape
        self.flat = flat
        self.exchange = exchange

    def sweep(self, entries, seeds, src_uids, batch_ndim, release=False, ledger=None,
              reach=None):
        run = functools.partial(GradientTape._sweep, self.tape)
        exchange = self.exchange
        if batch_ndim or not seeds or not exchange.buckets:
            return run(entries, seeds, src_uids, batch_ndim, release=release, ledger=ledger,
                       reach=reach)
        if reach is None:
            forward, reach = sweep.reachable(entries, src_uids)
        else:
            forward = entries
        n = len(forward)
        wanted = set(src_uids)
        first = {}  # source id -> index of its first use: its gradient is final past it
        for i in range(n - 1, -1, -1):
            for u in forward[i].in_uids:
                if u in wanted:
                    first[u] = i
        # bucket k can start once the walk is below `ready[k]` (and bucket k - 1 started)
        ready, lowest = [], n
        for members in exchange.buckets:
            lowest = min([lowest] + [first.get(src_uids[i], n) for i in members])
            ready.append(lowest)
        produced = {e.out_uid for e in forward}
        final = {}
        live = set()  # ids whose cotangents flow from the walked entries to those below
        carry = seeds
        hi = n
        k = 0
        for cut in sorted(set(ready), reverse=True):
            seg = forward[cut:hi]
            for e in seg:
                live.update(u for u in e.in_uids if u in reach)
            live.difference_update(e.out_uid for e in seg)
            finishing = [u for u in src_uids if u not in final and first.get(u, n) >= cut]
            got = run(seg, carry, list(live.union(finishing)), batch_ndim, release=release,
                      ledger=None, reach=reach)
            carry = [(u, g) for u, g in got.items() if g is not None and u in live]
            for u in finishing:
                final[u] = got.get(u)
                if u not in produced:
                    live.discard(u)  # a variable or watched tensor: nothing flows past it
            while k < len(ready) and ready[k] >= cut:
                k += 1
            exchange.start_through(k - 1, [final.get(u) for u in src_uids])
            exchange.progress()
            hi = cut
        return {u: final.get(u) for u in src_uids}


def reduce_gradients(grads, variables, op=Average, compression=Compression.none,
                     bucket_bytes=None, what="allreduce_gradients"):
    """The gradients `grads` of `variables` reduced over the ranks, in buckets (after the
    sweep: no overlap)."""
    variables = list(variables)
    grads = list(grads)
    exchange = _prepare(variables, op, compression, _check_bucket_bytes(bucket_bytes, what),
                        what)
    values = [None if g is None else as_tensor(g, what) for g in grads]
    if exchange.buckets:
        exchange.start_through(len(exchange.buckets) - 1, values)
    reduced = exchange.results()
    return [reduced.get(i, values[i]) for i in range(len(values))]


class DistributedOptimizer:
    """Wraps an optimizer: `apply_gradients` first reduces the gradients over the ranks
    (averages by default), then applies them (Horovod's `hvd.DistributedOptimizer`).

        opt = tg.distribute.DistributedOptimizer(tg.optimizers.Adam(1e-3))
        with tg.GradientTape() as tape:
            loss = loss_fn(model(x_shard), y_shard)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))

    Use it with a plain tape (with a `DistributedGradientTape`, gradients would be reduced
    twice). `minimize` reduces too. Any other attribute is the wrapped optimizer's.
    """

    def __init__(self, optimizer, compression=Compression.none, op=Average, bucket_bytes=None,
                 sparse_as_dense=False):
        if not hasattr(optimizer, "apply_gradients"):
            raise TypeError(f"tg.distribute.DistributedOptimizer: expected an optimizer (with "
                            f"apply_gradients), got {type(optimizer).__name__}")
        check_compression(compression, "DistributedOptimizer")
        self._optimizer = optimizer
        self._compression = compression
        self._op = op
        self._bucket_bytes = _check_bucket_bytes(bucket_bytes, "DistributedOptimizer")
        self.sparse_as_dense = bool(sparse_as_dense)

    def __getattr__(self, name):
        return getattr(self._optimizer, name)

    def apply_gradients(self, grads_and_vars):
        """Reduces the gradients over the ranks, then applies them with the wrapped optimizer.

            opt.apply_gradients(zip(grads, variables))
        """
        pairs = list(grads_and_vars)
        grads = reduce_gradients([g for g, _ in pairs], [v for _, v in pairs], self._op,
                                 self._compression, self._bucket_bytes,
                                 "DistributedOptimizer.apply_gradients")
        return self._optimizer.apply_gradients(zip(grads, [v for _, v in pairs]))

    def minimize(self, loss, var_list, tape=None):
        """The wrapped optimizer's `minimize`, with the gradients reduced over the ranks.

            opt.minimize(lambda: loss_fn(model(x), y), model.trainable_variables)
        """
        if tape is None:
            if not callable(loss):
                raise TypeError("tg.distribute.DistributedOptimizer.minimize: without a tape, "
                                "loss must be a callable returning the loss tensor")
            with GradientTape() as tape:
                value = loss()
        else:
            value = loss() if callable(loss) else loss
        variables = nest.flatten(var_list() if callable(var_list) else var_list)
        grads = tape.gradient(value, variables)
        self.apply_gradients(zip(grads, variables))
        return value

    def __repr__(self):
        return f"<DistributedOptimizer of {self._optimizer!r}>"


def broadcast_variables(variables, root_rank=0):
    """Assigns rank `root_rank`'s values to `variables` on every rank (call it once after
    creating the model and optimizer, so that every rank starts from the same point).

        tg.distribute.broadcast_variables(model.variables, root_rank=0)

    All the variables travel in one buffer; every rank must pass the same variables (names,
    shapes, dtypes, in order), which is checked first.
    """
    what = "broadcast_variables"
    st = _need(what)
    variables = nest.flatten(variables)
    for i, v in enumerate(variables):
        if not isinstance(v, Variable):
            raise TypeError(f"tg.distribute.broadcast_variables: item {i} is a "
                            f"{type(v).__name__}; expected tg.Variable")
    p = st.comm.Get_size()
    if isinstance(root_rank, bool) or not isinstance(root_rank, (int, np.integer)) or \
            not 0 <= root_rank < p:
        raise ValueError(f"tg.distribute.broadcast_variables: root_rank must be a rank, "
                         f"0 .. {p - 1}, got {root_rank!r}")
    places = [nccl.route(v._value._dev) for v in variables]
    entries = [(v.name, v._value._data.dtype.name, tuple(v.shape)) +
               (("nccl",) if p == "nccl" else ()) for v, p in zip(variables, places)]
    check_signature(entries + [("root_rank", int(root_rank))], what, _describe_array)
    on_gpu = [v for v, p in zip(variables, places) if p == "nccl"]
    if on_gpu:  # one flat device buffer of their bytes, broadcast by NCCL
        _broadcast_device_variables(on_gpu, root_rank, what)
    variables = [v for v, p in zip(variables, places) if p != "nccl"]
    if not variables:
        return
    arrays = [np.ascontiguousarray(host(v._value)) for v in variables]
    sizes = [a.nbytes for a in arrays]
    buf = np.empty(sum(sizes), np.uint8)
    off = 0
    for a, n in zip(arrays, sizes):
        buf[off:off + n] = a.reshape(-1).view(np.uint8)
        off += n
    wait([st.comm.Ibcast(buf, root=int(root_rank))], what)
    if st.comm.Get_rank() == root_rank:
        return
    off = 0
    for v, a, n in zip(variables, arrays, sizes):
        value = buf[off:off + n].view(a.dtype).reshape(a.shape).copy()
        v._assign_array(v._value._dev.asarray(value))
        off += n


def _broadcast_device_variables(variables, root_rank, what):
    """Rank `root_rank`'s values of GPU variables: their bytes in one flat device buffer,
    broadcast by NCCL; the variables then hold views of it."""
    dev = variables[0]._value._dev
    lk = nccl.link(dev, what)
    xp = lk.xp
    sizes = [v._value._data.nbytes for v in variables]
    with dev.context():
        buf = xp.empty(sum(sizes), xp.uint8)
        off = 0
        for v, n in zip(variables, sizes):
            buf[off:off + n] = xp.ascontiguousarray(v._value._data).reshape(-1).view(xp.uint8)
            off += n
        nccl.broadcast_flat(lk, buf, root_rank)
        if _state.comm.Get_rank() == root_rank:
            return
        off = 0
        for v, n in zip(variables, sizes):
            a = v._value._data
            v._assign_array(buf[off:off + n].view(a.dtype).reshape(a.shape))
            off += n
