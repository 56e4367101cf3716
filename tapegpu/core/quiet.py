"""numpy's warnings about division by zero and invalid operations, off for a block: what
`np.errstate(divide="ignore", invalid="ignore")` does, for the places that enter it on every
call (the reverse sweep, the forwards of log, division, square roots).

np.errstate builds numpy's error state anew at each entry (its settings merged into the
current ones); here the state is built once per current state and set directly, a tenth of
the cost. Where numpy does not have the context variable and the constructor this relies on
(numpy < 2, or internals that moved), the block enters np.errstate itself.

    token = quiet_enter()
    try:
        ...
    finally:
        quiet_exit(token)
"""
import numpy as np

try:  # numpy >= 2: the error state is a context variable holding an opaque state object
    from numpy._core._ufunc_config import _extobj_contextvar as _STATE, _make_extobj
    _make_extobj(divide="ignore", invalid="ignore")
except Exception:  # pragma: no cover - numpy 1.x, or a numpy whose internals moved
    _STATE = None

_QUIET = {}  # current state object -> the same with divide and invalid ignored


def quiet_enter():
    """Ignores numpy's divide and invalid floating-point errors until `quiet_exit(token)`;
    the other settings (overflow, underflow, the error callback) stay as they are."""
    if _STATE is None:  # pragma: no cover - numpy 1.x
        state = np.errstate(divide="ignore", invalid="ignore")
        state.__enter__()
        return state
    current = _STATE.get()
    quiet = _QUIET.get(current)
    if quiet is None:
        if len(_QUIET) > 32:  # (states a program sets and drops: keep the table small)
            _QUIET.clear()
        quiet = _QUIET[current] = _make_extobj(divide="ignore", invalid="ignore")
    return _STATE.set(quiet)


def quiet_exit(token):
    """Restores the error state `quiet_enter` replaced."""
    if _STATE is None:  # pragma: no cover - numpy 1.x
        token.__exit__(None, None, None)
        return
    _STATE.reset(token)
