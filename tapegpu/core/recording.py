"""Recording, below the op registry: what a tape keeps of one op (an `Entry`) and the part of a
tape that runs once per op (`Recorder.record`). The registry offers each op's output to this
thread's recorders (`registry.wrap`).

`record` and the registry's `wrap` have a compiled twin (tapegpu/core/_record.c), built at
install where a C compiler is; the Python definitions are its definition and test oracle
(tests/autodiff/test_record.py), and run where it is not built or TAPEGPU_PURE_PYTHON=1. The
registry configures the twin once `Op` exists (it reads fields of Tensor, Entry and Op)."""
import os

# The common save plans (`Op.save_plan`, ops/registry.py), which recording saves inline: the
# output, the one input, both inputs, the one input's shape
SAVE_OUT = ((1, -1),)
SAVE_X = ((0, 0),)
SAVE_XY = ((0, 0), (0, 1))
SAVE_XSHAPE = ((2, 0),)

compiled = None  # tapegpu.core._record, where built and not turned off
if os.environ.get("TAPEGPU_PURE_PYTHON", "") in ("", "0"):
    try:
        from . import _record as compiled
    except ImportError:  # not built
        compiled = None


class Entry:
    """One recorded op: the op, its input and output ids, declared residuals, params, and the
    input shapes (for un-broadcasting) — nothing else."""
    __slots__ = ("op", "in_uids", "out_uid", "saved", "params", "in_shapes", "args", "recompute")

    def __init__(self, op, in_uids, out_uid, saved, params, in_shapes):
        self.op = op
        self.in_uids = in_uids
        self.out_uid = out_uid
        self.saved = saved
        self.params = params
        self.in_shapes = in_shapes
        self.recompute = None  # the checkpoint segment that can restore `saved` (memory budget)


def py_record(self, op, inputs, out, params):
    """Records one op run on `inputs` when one of them is tracked (`Recorder.record`)."""
    tracked = self._tracked
    if len(inputs) == 1:  # the hot path: no loops, the common save plans inline
        x = inputs[0]
        if x._uid not in tracked:
            return
        in_uids = (x._uid,)
        shapes = (x._data.shape,)
        plan = op.save_plan
        saved = inputs if plan is SAVE_X else (out,) if plan is SAVE_OUT else \
            (x._data.shape,) if plan is SAVE_XSHAPE else \
            op.saved_values(inputs, out) if plan else ()
    elif len(inputs) == 2:
        x, y = inputs
        ux = x._uid
        uy = y._uid
        if ux not in tracked:
            if uy not in tracked:
                return
            ux = None
        elif uy not in tracked:
            uy = None
        in_uids = (ux, uy)
        shapes = (x._data.shape, y._data.shape)
        plan = op.save_plan
        saved = inputs if plan is SAVE_XY else op.saved_values(inputs, out) if plan else ()
    else:
        in_uids = tuple([t._uid if t._uid in tracked else None for t in inputs])
        if in_uids.count(None) == len(in_uids):
            return
        shapes = tuple([t._data.shape for t in inputs])
        saved = op.saved_values(inputs, out) if op.save_plan else ()
    tracked.add(out._uid)
    e = Entry(op, in_uids, out._uid, saved, params, shapes)
    self._entries.append(e)
    if self._budget is not None:
        self._budget.on_record(e, inputs, out)


class Recorder:
    """The part of a tape that runs once per recorded op (`_tracked`, `_entries` and `_budget`
    are the tape's)."""

    record = py_record if compiled is None else compiled.method
