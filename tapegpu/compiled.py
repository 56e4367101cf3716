"""The compiled core (`tapegpu/_core.c`), or None.

It is the C form of the tape's per-op bookkeeping: `Entry`, `GradientTape.record` and the array
sweep's loop. The Python code in tape.py and sweep.py is the reference and runs when the
extension was not built (no C compiler at install) or when the environment sets
`TAPEGPU_PURE_PYTHON=1`; both give the same entries and bit-identical gradients.
"""
import os

core = None
if os.environ.get("TAPEGPU_PURE_PYTHON", "") in ("", "0"):
    try:
        from . import _core as core
    except ImportError:  # not built: the pure-Python tape
        core = None
