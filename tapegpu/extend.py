"""The API for people who add ops to tapegpu (the user API is `tapegpu` itself).

An op is one entry: `def_op(name, forward, saves=..., vjp=..., jvp=..., elementwise=...,
kernels=...)` registers it (the contract is the docstring of `tapegpu.ops.registry`); `apply`
runs an entry on tensors and records it on active tapes. Rules take a namespace first,
`vjp(ops, g, *saved, **params)`, and compute with `ops.<tapegpu function>` and Python operators,
so that one rule serves tensors (higher-order gradients) and raw arrays (the fast sweep).
`docs/adding_an_op.md` walks through an elementwise op, an op with a kernel and a backend;
`SPECS` and `Spec` are the op spec table the test suite derives its checks from.

An unregistered entry works the same (`def_op` is `Op` plus registration):

>>> from tapegpu.extend import Op, apply
>>> cube = Op("cube", lambda xp, x: x * x * x, saves=("x",),
...           vjp=lambda ops, g, x: g * (x * x * 3.0), elementwise=True)
>>> x = tg.constant([2.0])
>>> with tg.GradientTape() as tape:
...     tape.watch(x)
...     y = apply(cube, (x,), {})
>>> tape.gradient(y, x).numpy()
array([12.], dtype=float32)
"""
from .ops._base import floating, norm_axes, norm_axis, public, tensor
from .ops.kernels import activation_kernels, bias_act_kernels, softmax_kernels
from .ops.registry import (REGISTRY, InvalidArgumentError, Op, apply, def_op, forward_on,
                           passthrough, quiet, ufunc)
from .testing.op_specs import SPECS, Spec, covered_ops, sample

__all__ = ["REGISTRY", "InvalidArgumentError", "Op", "apply", "def_op", "forward_on",
           "passthrough", "quiet", "ufunc", "floating", "norm_axes", "norm_axis", "public",
           "tensor", "activation_kernels", "bias_act_kernels", "softmax_kernels", "SPECS", "Spec",
           "covered_ops", "sample"]
