"""Backends: where arrays live and which array module computes on them.

A backend is a small object: `name`, `device` (TensorFlow-style device string), `xp` (the array
module: numpy or cupy), `asarray`, `to_numpy`, `synchronize`, `kernels` (the custom-kernel set or
None), `memory_stats` and `launches` (kernel launches per kernel name). Ops call `xp` through the
reference forward of each registry entry; a backend with `kernels` may override it.
"""
import collections

import numpy as np


class NumpyBackend:
    """CPU arrays, computed by numpy. Always available."""

    name = "numpy"
    device = "/job:localhost/replica:0/task:0/device:CPU:0"
    short = "cpu"
    xp = np
    kernels = None

    def __init__(self):
        self.launches = collections.Counter()

    def asarray(self, value, dtype=None):
        return np.asarray(value, dtype=dtype)

    def to_numpy(self, array):
        return np.asarray(array)

    def synchronize(self):
        pass

    def memory_stats(self):
        return {}

    def __repr__(self):
        return f"<backend {self.name}>"


NUMPY = NumpyBackend()

# The device stack: its last entry is where new tensors are created.
_device_stack = [NUMPY]


def current():
    return _device_stack[-1]


def all_backends():
    """The backends created so far (numpy always)."""
    return [NUMPY] + [b for b in _extra_backends if b is not NUMPY]


_extra_backends = []
