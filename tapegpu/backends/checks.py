"""Checks of device values without a host sync, as CUDA frameworks report device-side errors.

On the CPU a check that needs array values (a label in range, an index in bounds) raises at
once. On a GPU, reading the answer would stop the host until the device catches up, every step;
so `check(xp, bad, report, *arrays)` only queues it: `bad` is computed on the device (a boolean
array, True where a value is invalid) and nothing is read. The rule:

- the queued checks are read at the next point that copies device values to the host anyway
  (`Tensor.numpy()`, `float(t)`, printing: the backend's `to_numpy`), in one sync for all of
  them; the first failed check raises its error there, naming the op that found it, and the
  queue is emptied;
- the op's result meanwhile holds what the device computed (NaN losses for a bad label, as
  TensorFlow's GPU kernels give; wrapped indices for a gather, as CuPy's `take`), so nothing
  outside tapegpu should trust a step whose values it never read;
- `TAPEGPU_SYNC_CHECKS=1` (or `checks.SYNC = True`) checks each at once, on the line that
  queued it (one sync per check: for debugging);
- more than `LIMIT` queued checks are read then (one sync per `LIMIT` checks), so a loop that
  never reads a value keeps a bounded queue.
"""
import os
import threading

import numpy as np

SYNC = os.environ.get("TAPEGPU_SYNC_CHECKS", "") not in ("", "0")
LIMIT = 256

_pending = []  # (flag: 0-d device bool, report, arrays)
_lock = threading.Lock()


def deferred(xp):
    """Whether checks of arrays of `xp` are queued (a device, SYNC off); otherwise the caller
    checks at once, on the host, as before."""
    return xp is not np and not SYNC


def check(xp, bad, report, *arrays):
    """Queues a check (see the module's rule): at the next host read, `report(*host_arrays)` is
    raised if `bad.any()`; `report` receives host copies of `arrays` and returns the error."""
    with _lock:
        _pending.append((bad.any(), report, arrays))
        full = len(_pending) > LIMIT
    if full:
        raise_pending(xp)


def pending():
    """How many checks wait for the next host read."""
    return len(_pending)


def clear():
    """Drops the queued checks unread (a test harness between tests)."""
    with _lock:
        del _pending[:]


def raise_pending(xp):
    """Reads every queued check (one sync per GPU) and raises the first failed one's error."""
    with _lock:
        if not _pending:
            return
        queued = list(_pending)
        del _pending[:]
    by_device = {}
    for i, (flag, _, _) in enumerate(queued):
        by_device.setdefault(flag.device.id, []).append(i)
    failed = np.zeros(len(queued), dtype=bool)
    for device, indices in by_device.items():  # one sync per GPU
        with xp.cuda.Device(device):
            failed[indices] = xp.asnumpy(xp.stack([queued[i][0] for i in indices]))
    for bad, (_, report, arrays) in zip(failed, queued):
        if bad:
            raise report(*[xp.asnumpy(a) for a in arrays])
