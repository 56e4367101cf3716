"""`tg.profiler`: what a piece of code computed, per op type, in the forward and the backward.

    with tg.profiler() as prof:
        with tg.GradientTape() as tape:
            loss = model(x)
        grads = tape.gradient(loss, model.trainable_variables)
    print(prof)            # a table
    prof.as_dict()         # {"forward": {op: {"count", "flops", "bytes"}}, "backward": ..., ...}

FLOPs: what each op's entry declares (`flops=`: exact for matmul and einsum, 2 per
multiply-add; the usual cubic counts for factorisations; 0 for views and copies), elements for
elementwise ops and reductions. Bytes moved: inputs plus outputs. In the
backward, each recorded op's VJP is counted under that op's name, whether it ran fused or as
tensor ops (whose own dispatches are then not counted again).
"""
import collections

import math


_active = []  # open profilers; registry.apply and the sweep report to them


def _nbytes(a):
    return int(getattr(a, "nbytes", 0))


def _size(shape):
    return math.prod(shape) if shape else 1


def flops(op, in_shapes, out_shape, params):
    """FLOPs of one forward call of `op`: its entry's `flops` (registry), else the larger of
    the output's and the inputs' element counts."""
    f = op.flops
    if f is None:
        return max(_size(out_shape), max((_size(s) for s in in_shapes), default=0))
    return f if isinstance(f, int) else f(in_shapes, out_shape, params)


class profile:
    """Context manager counting ops, FLOPs, bytes and kernel launches (see module docstring).

    >>> with tg.profiler() as prof:
    ...     y = tg.matmul(tg.ones((2, 3)), tg.ones((3, 4)))
    >>> prof.as_dict()["forward"]["matmul"]["flops"]
    48
    """

    def __init__(self):
        self.forward = collections.defaultdict(lambda: {"count": 0, "flops": 0, "bytes": 0})
        self.backward = collections.defaultdict(lambda: {"count": 0, "flops": 0, "bytes": 0})
        self.phase = "forward"
        self.muted = 0
        self._launch_start = {}
        self.launches = {}

    def __enter__(self):
        from .. import backends as backend
        self._launch_start = {b.name: collections.Counter(b.launches)
                              for b in backend.all_backends()}
        _active.append(self)
        return self

    def __exit__(self, *exc):
        from .. import backends as backend
        _active.remove(self)
        self.launches = {}
        for b in backend.all_backends():
            diff = collections.Counter(b.launches)
            diff.subtract(self._launch_start.get(b.name, collections.Counter()))
            self.launches[b.name] = {k: v for k, v in diff.items() if v}

    def add(self, table, op, in_arrays, out_array, in_shapes, out_shape, params, factor=1):
        row = table[op.name]
        row["count"] += 1
        row["flops"] += factor * flops(op, in_shapes, out_shape, params)
        row["bytes"] += sum(_nbytes(a) for a in in_arrays) + _nbytes(out_array)

    def as_dict(self):
        return {"forward": {k: dict(v) for k, v in sorted(self.forward.items())},
                "backward": {k: dict(v) for k, v in sorted(self.backward.items())},
                "launches": self.launches,
                "totals": {p: {"flops": sum(r["flops"] for r in t.values()),
                               "bytes": sum(r["bytes"] for r in t.values())}
                           for p, t in (("forward", self.forward),
                                        ("backward", self.backward))}}

    def table(self):
        lines = [f"{'phase':<9} {'op':<42} {'count':>7} {'MFLOP':>11} {'MB moved':>10}"]
        for phase, t in (("forward", self.forward), ("backward", self.backward)):
            for name, r in sorted(t.items(), key=lambda kv: -kv[1]["flops"]):
                lines.append(f"{phase:<9} {name:<42} {r['count']:>7} {r['flops'] / 1e6:>11.3f} "
                             f"{r['bytes'] / 1e6:>10.3f}")
        for dev, counts in self.launches.items():
            if counts:
                lines.append(f"kernel launches on {dev}: {sum(counts.values())} "
                             f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")
        return "\n".join(lines)

    __str__ = table


def on_forward(op, inputs, out, params):
    """Called by registry.apply for every op while a profiler is open."""
    for p in _active:
        if p.muted:
            continue
        table = p.backward if p.phase == "backward" else p.forward
        p.add(table, op, [t._data for t in inputs], out,
              [t._data.shape for t in inputs], out.shape, params)


def on_vjp(entry, g, cts):
    """Called by the sweep after each entry's VJP: counted as the op's backward."""
    for p in _active:
        needed = [c for c in cts if c is not None]
        # a VJP costs about one forward per input it differentiates
        p.add(p.backward, entry.op, [g] + needed, None, list(entry.in_shapes),
              g.shape, entry.params, factor=max(1, len(needed)))


class backward_phase:
    """Marks ops run inside a sweep as backward work (and mutes tensor-rule internals)."""

    def __enter__(self):
        for p in _active:
            p.phase = "backward"
        return self

    def __exit__(self, *exc):
        for p in _active:
            p.phase = "forward"


class muted:
    def __enter__(self):
        for p in _active:
            p.muted += 1

    def __exit__(self, *exc):
        for p in _active:
            p.muted -= 1
