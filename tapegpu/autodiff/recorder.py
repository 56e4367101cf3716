"""What every autodiff module shares about recording: the entries a tape keeps and its
`Recorder` (defined below the registry, in core/recording.py), the op of a variable read,
`UnconnectedGradients`, and the arrays an entry keeps alive."""
import enum

from ..ops.registry import def_op, passthrough
from ..core.recording import Entry, Recorder  # noqa: F401  (the tape's; defined below the registry)
from ..core.tensor import Tensor, Variable

# a variable read under a tape: identity from the variable's id to the value it returned
READ_VARIABLE = def_op("read_variable", lambda xp, x: x, vjp=passthrough, elementwise=True,
                       linear=True, view=True)


class UnconnectedGradients(enum.Enum):
    """What `gradient` returns for a source the target does not depend on."""
    NONE = "none"
    ZERO = "zero"


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
