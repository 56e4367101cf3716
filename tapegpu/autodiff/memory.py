"""Memory accounting for tapes: what the saved values and cotangents of a sweep hold.

Bytes are counted per underlying buffer (a view counts towards the array it views, once), so
an activation saved by two ops (a ReLU's output that the next matmul also saves) is one
activation. Arrays under `MIN_TRACKED` bytes are not tracked in sweeps: they are negligible
next to activations, and tracking them would cost more time than they weigh.
"""
import math

from ..core import nest
from . import sweep
from .recorder import READ_VARIABLE, saved_arrays


MIN_TRACKED = 4096


def root(a):
    """The array that owns `a`'s memory."""
    while getattr(a, "base", None) is not None and hasattr(a.base, "nbytes"):
        a = a.base
    return a


def buffer_bytes(arrays):
    """Bytes of the distinct buffers behind `arrays`."""
    seen = {}
    for a in arrays:
        r = root(a)
        seen[id(r)] = r.nbytes
    return sum(seen.values())


class Ledger:
    """Live bytes of a set of arrays (by buffer, with reference counts) and their peak."""

    __slots__ = ("held", "live", "peak")

    def __init__(self):
        self.held = {}
        self.live = 0
        self.peak = 0

    def hold(self, a):
        if a.nbytes < MIN_TRACKED:
            return
        r = root(a)
        k = id(r)
        cell = self.held.get(k)
        if cell is None:
            self.held[k] = [r.nbytes, 1, r]
            self.live += r.nbytes
            if self.live > self.peak:
                self.peak = self.live
        else:
            cell[1] += 1

    def drop(self, a):
        if a.nbytes < MIN_TRACKED:
            return
        k = id(root(a))
        cell = self.held.get(k)
        if cell is None:
            return
        cell[1] -= 1
        if cell[1] == 0:
            self.live -= cell[0]
            del self.held[k]


def tape_stats(tape):
    """Recorded ops, saved bytes (all, activations only, by op type), last sweep's peak."""
    # activations: what recorded ops produced (a variable read returns the variable's buffer)
    produced = {e.out_uid for e in tape._entries if e.op is not READ_VARIABLE}
    by_op = {}
    all_arrays, activations = [], []
    for e in tape._entries:
        arrs = saved_arrays(e)
        acts = [s._data for s in (e.saved or ()) if hasattr(s, "_uid") and s._uid in produced]
        by_op.setdefault(e.op.name, []).extend(arrs)
        all_arrays.extend(arrs)
        activations.extend(acts)
    return {
        "recorded_ops": len(tape._entries),
        "saved_bytes": buffer_bytes(all_arrays),
        "activation_bytes": buffer_bytes(activations),
        "saved_bytes_by_op": {k: buffer_bytes(v) for k, v in sorted(by_op.items())},
        "peak_bytes": tape._peak_bytes,
    }


class Plan:
    """What a backward sweep will keep, free and recompute, before it runs (`tape.plan`)."""

    def __init__(self, steps, kept, recompute, peak):
        self.steps = steps          # [(op name, saved bytes freed after its VJP, cotangent bytes)]
        self.kept_bytes = kept      # saved bytes held when the sweep starts
        self.recompute = recompute  # [(op name, bytes it re-creates)] in recompute order
        self.predicted_peak_bytes = peak

    def as_dict(self):
        return {"steps": self.steps, "kept_bytes": self.kept_bytes,
                "recompute": self.recompute, "predicted_peak_bytes": self.predicted_peak_bytes}

    def __str__(self):
        lines = [f"backward plan: {len(self.steps)} VJPs, {self.kept_bytes / 2**20:.2f} MiB "
                 f"saved at start, predicted peak {self.predicted_peak_bytes / 2**20:.2f} MiB"]
        if self.recompute:
            lines.append(f"  recomputes {len(self.recompute)} ops "
                         f"({sum(b for _, b in self.recompute) / 2**20:.2f} MiB)")
        for name, freed, ct in self.steps:
            lines.append(f"  {name:<28} frees {freed / 2**20:8.3f} MiB   cotangent "
                         f"{ct / 2**20:8.3f} MiB")
        return "\n".join(lines)


def plan(tape, target, sources):
    """Simulates the sweep of `tape.gradient(target, sources)` on byte counts: which saved
    buffers each VJP frees, which segments are recomputed, and the peak of saved plus
    cotangent bytes."""
    srcs = [s._uid for s in nest.flatten(sources)]
    targets = nest.flatten(target)
    order, reach = sweep.prune(tape._entries, srcs, [t._uid for t in targets])
    last_use = {}
    for i, e in enumerate(order):
        for a in saved_arrays(e):
            r = root(a)
            last_use[id(r)] = (i, r.nbytes)
    freed_at = [0] * len(order)
    for i, nbytes in last_use.values():
        freed_at[i] += nbytes
    kept = sum(n for _, n in last_use.values())
    size = max((t._data.itemsize for t in targets), default=4)
    cts = {t._uid: t._data.nbytes for t in targets}
    held = kept
    peak = held + sum(cts.values())
    steps, recompute = [], []
    seen_segments = set()
    for i, e in enumerate(order):
        seg = getattr(e, "recompute", None)
        if seg is not None and id(seg) not in seen_segments:
            seen_segments.add(id(seg))
            extra = seg.activation_bytes()
            recompute.append((f"segment of {len(seg.entries)} ops", extra))
            held += extra
            freed_at[i] += 0
        if e.out_uid not in srcs:
            cts.pop(e.out_uid, None)
        for u, shape in zip(e.in_uids, e.in_shapes):
            if u in reach and u not in cts:
                cts[u] = math.prod(shape) * size
        peak = max(peak, held + sum(cts.values()))
        held -= freed_at[i]
        steps.append((e.op.name, freed_at[i], sum(cts.values())))
    return Plan(steps, kept, recompute, peak)
