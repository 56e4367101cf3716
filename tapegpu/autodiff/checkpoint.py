"""Checkpointing: trade recomputation for memory.

`recompute_grad(f)` records `f` as one entry that keeps only `f`'s inputs; its VJP re-runs `f`
under a fresh tape. `GradientTape(memory_budget=bytes)` does the same automatically over the
tape (Chen et al. 2016): entries are grouped into segments; a closed segment drops its saved
values and keeps only the tensors that flow into it from outside (its checkpoints); the sweep
re-runs a segment's forwards, from those, right before its VJPs. When the checkpoints
themselves outgrow half the budget, adjacent segments merge (dropping the checkpoint between
them), so kept bytes stay within the budget at the cost of about one extra forward pass.
Recomputation runs the same forwards on the same arrays, so gradients are bit-identical.
"""
from .memory import root
from ..ops.registry import forward_on
from ..core.tensor import Tensor


# -- recompute_grad ------------------------------------------------------------------------------

# -- automatic segments under a memory budget ----------------------------------------------------

class Segment:
    """Closed entries without saved values, and the tensors that flow into them."""

    __slots__ = ("entries", "dropped_bytes")

    def __init__(self, entries, dropped_bytes):
        self.entries = entries
        self.dropped_bytes = dropped_bytes

    def activation_bytes(self):
        return self.dropped_bytes

    def restore(self):
        """Re-runs the forwards of the segment, giving every entry its saved values back.
        A recomputed output is dropped after its last use inside the segment, so only what
        the entries save stays alive."""
        last = {}
        for i, e in enumerate(self.entries):
            for a in e.args:
                if type(a) is int:
                    last[a] = i
        values = {}
        for i, e in enumerate(self.entries):
            inputs = [values[a] if type(a) is int else a for a in e.args]
            dev = inputs[0]._dev
            op = e.op
            result = forward_on(op, dev, [t._data for t in inputs], e.params)
            if op.residuals:
                result, res = result
            out = Tensor(result, dev)
            if op.residuals:
                out._res = tuple(Tensor(r, dev) for r in res)
            e.saved = op.saved_values(inputs, out) if op.save_plan else ()
            if last.get(e.out_uid, -1) > i:
                values[e.out_uid] = out
            for a in e.args:
                if type(a) is int and last[a] == i:
                    del values[a]

    def drop(self):
        for e in self.entries:
            e.saved = None


class Budget:
    """Segments a tape's entries so that its kept saved values stay within `limit` bytes."""

    def __init__(self, limit):
        self.limit = int(limit)
        self.open = []
        self.open_buffers = {}
        self.closed = []
        self.produced = set()
        self.peak_kept = 0
        self.kept_checkpoints = 0
        self.pinned = 0  # bytes saved by entries that cannot be recomputed (kept as they are)

    def on_record(self, entry, inputs, out):
        self.produced.add(entry.out_uid)
        if entry.op.forward is None:
            # an op built per call (custom_gradient, recompute_grad, numpy_function with a
            # grad): no registry forward to re-run, so it joins no segment and keeps what it
            # saved; a segment that uses its output keeps that output as a checkpoint
            self.pinned += sum(r.nbytes for r in {id(r): r for r in (
                root(s._data) for s in entry.saved if isinstance(s, Tensor) and
                s._uid in self.produced)}.values())
            self.peak_kept = max(self.peak_kept, sum(self.open_buffers.values()) +
                                 self.kept_checkpoints + self.pinned)
            return
        entry.args = tuple(inputs)
        new = {}
        for s in entry.saved:
            if isinstance(s, Tensor) and s._uid in self.produced:
                r = root(s._data)
                if id(r) not in self.open_buffers:
                    new[id(r)] = r.nbytes
        open_bytes = sum(self.open_buffers.values())
        if self.open and open_bytes + sum(new.values()) > self.limit // 2:
            self._close(open_bytes)  # close before this entry would overflow the open half
        self.open.append(entry)
        self.open_buffers.update(new)
        self.peak_kept = max(self.peak_kept, sum(self.open_buffers.values()) +
                             self.kept_checkpoints + self.pinned)

    def _close(self, open_bytes):
        seg = Segment(self.open, open_bytes)
        inside = {e.out_uid for e in self.open}
        for e in self.open:
            # inputs made inside the segment are recomputed; the others are its checkpoints
            e.args = tuple(a._uid if isinstance(a, Tensor) and a._uid in inside else a
                           for a in e.args)
            e.saved = None
            e.recompute = seg
        self.closed.append(seg)
        self.open = []
        self.open_buffers = {}
        self.kept_checkpoints = self.checkpoint_bytes()
        while len(self.closed) > 1 and self.kept_checkpoints > self.limit // 2:
            self._merge_oldest()
            self.kept_checkpoints = self.checkpoint_bytes()

    def _merge_oldest(self):
        a, b = self.closed[0], self.closed[1]
        merged = Segment(a.entries + b.entries, a.dropped_bytes + b.dropped_bytes)
        inside = {e.out_uid for e in a.entries}
        for e in b.entries:
            e.args = tuple(x._uid if isinstance(x, Tensor) and x._uid in inside else x
                           for x in e.args)
        for e in merged.entries:
            e.recompute = merged
        self.closed[:2] = [merged]

    def checkpoint_bytes(self):
        """Bytes of the activations that closed segments keep as their inputs."""
        seen = {}
        for seg in self.closed:
            for e in seg.entries:
                for a in e.args:
                    if isinstance(a, Tensor) and a._uid in self.produced:
                        r = root(a._data)
                        seen[id(r)] = r.nbytes
        return sum(seen.values())
