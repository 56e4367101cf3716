"""Op determinism (`tg.config.experimental.enable_op_determinism`, as TensorFlow's): once on,
every op gives the same bits at every run on the same inputs and hardware. On the CPU tapegpu's
ops already do. On a GPU the scatters (a gather's gradient, segment sums, `scatter_nd`) add
repeated indices with atomics, in an order that changes from run to run; with determinism on
they add in numpy's order instead (ops/_base.py `add_at`: slower, one pass per repeat of the
most repeated index). A traced function then also compiles its kernels in the call rather
than in the background (function/fusion.py), so that no call's result depends on when a
compile finished."""

_enabled = False


def enable_op_determinism():
    """Makes ops deterministic: the same inputs give the same bits at every run (GPU scatters
    add in a fixed order, more slowly). As in TensorFlow it cannot be turned off again; set the
    seeds too (`tg.keras.utils.set_random_seed`) for random ops to repeat.

    >>> tg.keras.utils.set_random_seed(1)  # then: tg.config.experimental.enable_op_determinism()
    """
    global _enabled
    _enabled = True


def enabled():
    """Whether `enable_op_determinism` was called."""
    return _enabled
