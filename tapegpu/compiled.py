"""The compiled core, or None for each part.

`core` (`tapegpu/_core.c`) is the C form of the per-op bookkeeping: tensor fields, `apply1` and
`apply2`, `Entry`, `GradientTape.record` and the array sweep's loop. The Python code in
tensor.py, registry.py, tape.py and sweep.py is the reference. `cpu` (`tapegpu/_cpu.c`) has two
one-pass elementwise kernels for the numpy backend (bias + ReLU and ReLU's backward; see
dispatch.py), numpy being the reference. The Python runs when the extensions were not built
(no C compiler at install) or when the environment sets `TAPEGPU_PURE_PYTHON=1`; the results
are the same, bit for bit.
"""
import os

core = cpu = None
if os.environ.get("TAPEGPU_PURE_PYTHON", "") in ("", "0"):
    try:
        from . import _core as core
    except ImportError:  # not built: the pure-Python tape
        core = None
    try:
        from . import _cpu as cpu
    except ImportError:  # not built: numpy runs those ops
        cpu = None
