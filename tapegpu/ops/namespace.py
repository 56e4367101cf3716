"""The namespaces rules compute with: `ops` in `vjp(ops, g, *saved, **params)`.

A rule is written once, against `ops`, and runs two ways:

* `TENSOR_OPS`: tapegpu itself. Values are tensors, every call is an op, and a tape that is
  recording sees the rule's computation (higher-order gradients, forward mode);
* `array_ops(dev)`: the same names on one backend's arrays, for the backward sweep that
  nothing records. Each name computes exactly what tapegpu's function computes on tensors (the
  op's forward, by the backend's kernel where it has one), so both ways give identical bits,
  with no tensors and no recording in between.

Besides tapegpu's public functions, a namespace has `keep(mask, g)` (`where(mask, g, 0)`),
`op(name, *values, **params)` (a registered op by name, with the op's own params),
`const_like(like, value)` and `arange_like(like, n)` (constants beside `like`) and `records`
(True when the values are tensors that a tape may be recording).
"""
import functools

import numpy as np

from ..core.tensor import Tensor, scalar_like
from .binary import _where_arrays
from .registry import REGISTRY, apply, forward_on

_INTS = {2: "int16", 4: "int32", 8: "int64"}


class TensorOps:
    """tapegpu's functions on tensors (the attributes of `tapegpu.ops`, looked up once)."""

    records = True
    unbroadcast = None  # (arrays only: a backend's un-broadcast kernel)

    def __init__(self, functions):
        self._functions = functions

    def __getattr__(self, name):
        fn = getattr(self._functions, name)
        setattr(self, name, fn)
        return fn

    def keep(self, mask, g):
        """g where `mask` holds, else 0 (`mask` broadcasts against g's batch axes)."""
        return self.where(mask, g, scalar_like(0.0, g))

    @staticmethod
    def const_like(like, value):
        """A constant (no gradient) with the dtype and on the device of `like`."""
        return Tensor(like._dev.xp.asarray(value, dtype=like._data.dtype), like._dev)

    @staticmethod
    def arange_like(like, n):
        """0, 1, ..., n - 1 with the dtype and on the device of `like` (no gradient)."""
        return Tensor(like._dev.xp.arange(n, dtype=like._data.dtype), like._dev)

    @staticmethod
    def op(name, *values, **params):
        """Registered op `name` on tensors (Python scalars adopt the first tensor's dtype)."""
        for v in values:
            if type(v) is not Tensor:
                break
        else:  # (rules' grad ops: tensors only)
            return apply(REGISTRY[name], values, params)
        like = next(v for v in values if type(v) is Tensor)
        values = tuple(scalar_like(v, like) if type(v) in (float, int) else v for v in values)
        return apply(REGISTRY[name], values, params)


class ArrayOps:
    """tapegpu's functions on the arrays of backend `dev`: a function's own array form where
    its family's file gives one (`fn.on_arrays(dev, *arrays, **params)`: the hot paths of
    rules), the op's forward for a function that is its op (`fn.plain`), else the function on
    the arrays wrapped as tensors (nothing records while an array sweep runs)."""

    records = False

    def __init__(self, dev, tensor_ops):
        self._dev = dev
        self._xp = dev.xp
        self._tensor_ops = tensor_ops
        # the backend's kernel summing a cotangent to an input's shape (autodiff/sweep.sum_to)
        self.unbroadcast = dev.kernels.unbroadcast if dev.kernels is not None else None

    def __getattr__(self, name):
        fn = getattr(self._tensor_ops, name)
        op = getattr(fn, "op", None)
        on_arrays = getattr(fn, "on_arrays", None)
        if on_arrays is not None:  # the function's own array form (in its family's file)
            call = functools.partial(on_arrays, self._dev)
        elif op is not None and getattr(fn, "plain", False):  # fn(x[, y]) is the op itself
            dev = self._dev
            if hasattr(op.forward, "ufunc") and dev.name not in op.kernels:
                call = getattr(self._xp, op.forward.ufunc)  # the array module's own function
            else:
                def call(*arrays):
                    return forward_on(op, dev, arrays, {})
        else:
            call = self._wrapped(fn)
        setattr(self, name, call)
        return call

    def _wrapped(self, fn):
        dev = self._dev

        def wrap(v):
            if isinstance(v, (list, tuple)):
                return type(v)(wrap(a) for a in v)
            if isinstance(v, np.generic):
                v = dev.xp.asarray(v)
            if hasattr(v, "__array_namespace__") or isinstance(v, np.ndarray):
                return Tensor(v, dev)
            return v

        def unwrap(v):
            if type(v) is Tensor:
                return v._data
            if isinstance(v, (list, tuple)):
                return type(v)(unwrap(a) for a in v)
            return v

        def call(*args, **kwargs):
            return unwrap(fn(*[wrap(a) for a in args],
                             **{k: wrap(v) for k, v in kwargs.items()}))
        return call

    def keep(self, mask, g):
        """where(mask, g, 0), exactly (inf and nan included), without branches: the bits of g
        ANDed with all-ones (0 - True) or all-zeros (0 - False). numpy's `where` is several
        times slower on irregular masks."""
        xp = self._xp
        if g.ndim == 0 or mask.ndim == 0:
            return _where_arrays(xp, mask, g, g.dtype.type(0))
        ints = getattr(xp, _INTS[g.dtype.itemsize])
        m = xp.subtract(0, mask, dtype=ints)
        if m.shape != g.shape:  # the mask broadcasts against batch axes of g
            return xp.bitwise_and(m, g.view(ints)).view(g.dtype)
        xp.bitwise_and(m, g.view(ints), out=m)
        return m.view(g.dtype)

    def op(self, name, *arrays, **params):
        return forward_on(REGISTRY[name], self._dev, arrays, params)

    def const_like(self, like, value):
        return self._xp.asarray(value, dtype=like.dtype)

    def arange_like(self, like, n):
        return self._xp.arange(n, dtype=like.dtype)



_array_ops = {}


def array_ops(dev, tensor_ops):
    """The array namespace of backend `dev` (one per backend)."""
    ns = _array_ops.get(dev)
    if ns is None:
        ns = _array_ops[dev] = ArrayOps(dev, tensor_ops)
    return ns
