"""Recording: the entries a tape keeps (one per recorded op) and the part of a tape that runs
once per op (`Recorder.record`), with what every autodiff module shares about them: the op of a
variable read, `UnconnectedGradients`, and the arrays an entry keeps alive."""
import enum
import os

from ..ops import registry
from ..ops.registry import SAVE_OUT, SAVE_X, SAVE_XY, Op, def_op, passthrough
from ..core.tensor import Tensor, Variable, _next_uid, _thread

# Recorder.record compiled (tapegpu/autodiff/_record.c), built at install where a C compiler is;
# the Python method below is its definition and test oracle. TAPEGPU_PURE_PYTHON=1 leaves it out.
_record = None
if os.environ.get("TAPEGPU_PURE_PYTHON", "") in ("", "0"):
    try:
        from . import _record
    except ImportError:  # not built
        _record = None



# a variable read under a tape: identity from the variable's id to the value it returned
READ_VARIABLE = def_op("read_variable", lambda xp, x: x, vjp=passthrough, elementwise=True,
                       linear=True, view=True)


class UnconnectedGradients(enum.Enum):
    """What `gradient` returns for a source the target does not depend on."""
    NONE = "none"
    ZERO = "zero"


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


class Recorder:
    """The part of a tape that runs once per recorded op (`_tracked`, `_entries` and `_budget`
    are the tape's)."""

    def record(self, op, inputs, out, params):
        """Records one op run on `inputs` when one of them is tracked."""
        tracked = self._tracked
        if len(inputs) == 1:  # the hot path: no loops, the common save plans inline
            x = inputs[0]
            if x._uid not in tracked:
                return
            in_uids = (x._uid,)
            shapes = (x._data.shape,)
            plan = op.save_plan
            saved = inputs if plan is SAVE_X else (out,) if plan is SAVE_OUT else \
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


py_record, py_wrap = Recorder.record, registry.wrap
if _record is not None:
    _record.configure(Tensor, Entry, Op, Recorder, _thread, _next_uid, SAVE_X, SAVE_OUT, SAVE_XY)
    Recorder.record = _record.method
    registry.wrap = _record.wrap  # apply1/apply2 call it through the module




def as_unconnected(value):
    if isinstance(value, UnconnectedGradients):
        return value
    try:
        return UnconnectedGradients(str(value).lower())
    except ValueError:
        raise ValueError(f"unconnected_gradients must be 'none' or 'zero', got {value!r}") \
            from None


def source_uid(s, i):
    if isinstance(s, (Tensor, Variable)):
        return s._uid
    raise TypeError(f"GradientTape.gradient: source {i} is a {type(s).__name__}; sources must "
                    "be tg.Tensor or tg.Variable (watch tensors with tape.watch)")


def saved_arrays(entry):
    """The arrays an entry's saved values keep alive."""
    if entry.saved is None:
        return []
    return [s._data for s in entry.saved if hasattr(s, "_data")]
