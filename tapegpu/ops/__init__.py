"""All ops, by family; importing this registers them and gives tensors their operators.

`EXPORTS` lists each family's public functions with the namespaces of tapegpu's API they
belong to (`fn.api`, from the family's `__all__`), from which `tapegpu/__init__.py` builds
`tg.math`, `tg.nn`, `tg.linalg` and the top level. `TENSOR_OPS` is the namespace rules compute
with on tensors (see namespace.py).
"""
import sys

from ..core.device import copy_to
from ..core.tensor import Tensor, Variable, constant, convert_to_tensor  # noqa: F401
from . import attention, binary, control_flow, conv, creation, linalg, nn, reduce, unary
from . import shape as _shape_family  # (`shape` is also a function)
from .attention import *  # noqa: F401,F403
from .binary import *  # noqa: F401,F403
from .control_flow import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .creation import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .namespace import TensorOps
from .nn import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from .shape import getitem
from .unary import *  # noqa: F401,F403

EXPORTS = {name: getattr(family, name)
           for family in (unary, binary, reduce, _shape_family, linalg, nn, conv, attention,
                          creation, control_flow)
           for name in family.__all__}
TENSOR_OPS = TensorOps(sys.modules[__name__])


def _install_operators():
    """Python operators for Tensor and Variable (a variable reads its value first)."""
    def rev(fn):
        return lambda a, b: fn(b, a)

    def _matmul_op(a, b):
        return matmul(a, b)

    def _T(a):
        return transpose(a)

    table = {
        "__add__": add, "__radd__": rev(add), "__sub__": subtract, "__rsub__": rev(subtract),
        "__mul__": multiply, "__rmul__": rev(multiply), "__truediv__": divide,
        "__rtruediv__": rev(divide), "__floordiv__": floordiv, "__rfloordiv__": rev(floordiv),
        "__mod__": floormod, "__rmod__": rev(floormod), "__pow__": pow, "__rpow__": rev(pow),
        "__matmul__": _matmul_op, "__rmatmul__": rev(_matmul_op),
        "__lt__": less, "__le__": less_equal, "__gt__": greater, "__ge__": greater_equal,
        "__eq__": equal, "__ne__": not_equal,
        "__and__": logical_and, "__rand__": rev(logical_and), "__or__": logical_or,
        "__ror__": rev(logical_or), "__xor__": logical_xor, "__rxor__": rev(logical_xor),
        "__neg__": negative, "__abs__": abs, "__invert__": logical_not,
        "__getitem__": getitem, "__pos__": lambda a: a,
    }
    for name, fn in table.items():
        setattr(Tensor, name, fn)
    Tensor.T = property(_T)
    Tensor.to = lambda self, device: copy_to(self, device)

    def via_read(fn):
        def method(self, *args):
            return fn(self._read(), *args)
        return method

    for name, fn in table.items():
        setattr(Variable, name, via_read(fn))
    Variable.T = property(lambda self: transpose(self._read()))


_install_operators()
