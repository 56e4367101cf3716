"""`tg.debugging`: runtime checks, as `tf.debugging` (check_numerics, assert_equal,
assert_near, assert_shapes).

`check_numerics` inside a `tg.function` is a graph node of the print kind (its "stream" takes
the host values, see `graph.format_print`), so it checks at every call. The asserts check the
values they are given when they run (in a `tg.function`, at trace time).
"""
import sys

import numpy as np

from .core.tensor import Tensor, Variable, _thread, convert_to_tensor
from .ops import registry as _registry
from .ops.registry import InvalidArgumentError


def _tensor(x):
    return x._read() if isinstance(x, Variable) else convert_to_tensor(x)


class _NumericsCheck:
    """The "stream" of check_numerics' graph node: raises when the value is not finite."""

    takes_values = True

    def __init__(self, message):
        self.message = message

    def write(self, values):
        (a,) = values
        a = np.asarray(a)
        nan, inf = bool(np.isnan(a).any()), bool(np.isinf(a).any())
        if nan or inf:
            what = "Inf and NaN" if nan and inf else ("NaN" if nan else "Inf")
            raise InvalidArgumentError(f"check_numerics: {self.message} : Tensor had {what} "
                                       f"values")


def check_numerics(tensor, message, name=None):
    """`tensor` itself, after checking that it holds no NaN or Inf (InvalidArgumentError naming
    `message` otherwise), as tf.debugging.check_numerics; the gradient passes through.

    >>> tg.debugging.check_numerics(tg.constant([1.0, 2.0]), "weights").numpy()
    array([1., 2.], dtype=float32)
    """
    t = _tensor(tensor)
    if t._data.dtype.kind != "f":
        raise InvalidArgumentError(f"check_numerics: expected a floating tensor (float16, "
                                   f"float32, float64), got {t.dtype.name}")
    check = _NumericsCheck(str(message))
    for tracer in _thread.tracers:
        tracer.on_print(((("t", None),), "", "", check), [t])
    check.write([t._dev.to_numpy(t._data)])
    return t


def _pair(x, y, who):
    a, b = _tensor(x).numpy(), _tensor(y).numpy()
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise InvalidArgumentError(f"{who}: Incompatible shapes: {list(a.shape)} vs. "
                                   f"{list(b.shape)}") from None
    return a, b


def _fail(message, condition, a, b, bad):
    at = np.argwhere(bad)[:3].tolist()
    prefix = f"{message}\n" if message else ""
    raise InvalidArgumentError(f"{prefix}Condition {condition} did not hold.\nIndices of first "
                               f"different values: {at}\nx: {a.ravel()[:3].tolist()} ...\n"
                               f"y: {b.ravel()[:3].tolist()} ...")


def assert_equal(x, y, message=None, summarize=None, name=None):
    """Raises InvalidArgumentError (with `message`) unless x == y everywhere (broadcasting),
    as tf.debugging.assert_equal.

    >>> tg.debugging.assert_equal(tg.constant([1, 2]), [1, 2])
    """
    a, b = _pair(x, y, "assert_equal")
    bad = np.broadcast_to(a != b, np.broadcast_shapes(a.shape, b.shape))
    if bad.any():
        _fail(message, "x == y", a, b, bad)


def assert_near(x, y, rtol=None, atol=None, message=None, summarize=None, name=None):
    """Raises InvalidArgumentError (with `message`) unless |x - y| <= atol + rtol * |y|
    everywhere, as tf.debugging.assert_near (both tolerances default to 10 * the dtype's
    machine epsilon).

    >>> tg.debugging.assert_near(tg.constant([1.0, 2.0]), tg.constant([1.0, 2.000001]))
    """
    a, b = _pair(x, y, "assert_near")
    if a.dtype != b.dtype:
        raise InvalidArgumentError(f"assert_near: x and y must have one dtype, got {a.dtype} "
                                   f"and {b.dtype}")
    eps = 10 * np.finfo(a.dtype).eps if a.dtype.kind in "fc" else 0
    rtol = eps if rtol is None else rtol
    atol = eps if atol is None else atol
    bad = ~(np.abs(a - b) <= atol + rtol * np.abs(b))
    if bad.any():
        _fail(message, f"|x - y| <= atol + rtol * |y| (rtol = {rtol}, atol = {atol})", a, b,
              np.broadcast_to(bad, bad.shape))


def assert_shapes(shapes, data=None, summarize=None, message=None, name=None):
    """Raises ValueError unless each (tensor, spec) in `shapes` has the shape `spec`
    describes, as tf.debugging.assert_shapes: an int is that size, a string a size that must
    be the same wherever the string appears, None or "." any size, and a leading "*" any
    number of leading axes.

    >>> x, y = tg.ones((2, 3)), tg.ones((3,))
    >>> tg.debugging.assert_shapes([(x, ("N", "Q")), (y, ("Q",))])
    """
    sizes = {}
    prefix = f"{message}  " if message else ""
    for x, spec in (shapes.items() if isinstance(shapes, dict) else shapes):
        shape = tuple(_tensor(x).shape)
        spec = tuple(spec) if isinstance(spec, (tuple, list)) else (spec,)
        any_leading = bool(spec) and spec[0] == "*"
        spec = spec[1:] if any_leading else spec
        if (len(shape) < len(spec)) if any_leading else (len(shape) != len(spec)):
            raise ValueError(f"assert_shapes: {prefix}Tensor of shape {shape} must have rank "
                             f"{'at least ' if any_leading else ''}{len(spec)}. Received rank "
                             f"{len(shape)}")
        dims = shape[len(shape) - len(spec):]
        for axis, (want, got) in enumerate(zip(spec, dims)):
            if want is None or want == ".":
                continue
            if isinstance(want, str):
                want = sizes.setdefault(want, got)
            if int(want) != got:
                raise ValueError(f"assert_shapes: {prefix}Tensor of shape {shape} dimension "
                                 f"{axis} must have size {want}. Received size {got}")


# -- device placement logging ------------------------------------------------------------------
def _log_placement(op, inputs, out, params):
    print(f"Executing op {op.name} in device {out.device}", file=sys.stderr)


def set_log_device_placement(enabled):
    """Whether each op prints the device it runs on, as
    `tf.debugging.set_log_device_placement`: to stderr, TensorFlow's line "Executing op NAME in
    device DEVICE", with tapegpu's op names (`matmul`, not TensorFlow's `MatMul`). Ops run
    inside a traced `tg.function` are logged when it traces, not when its graph replays. When
    off (the default) it costs nothing: the log is an observer of the op registry, installed
    only while on.

    >>> tg.debugging.set_log_device_placement(True)
    >>> tg.debugging.get_log_device_placement()
    True
    >>> tg.debugging.set_log_device_placement(False)
    """
    if enabled:
        if _log_placement not in _registry.OBSERVERS:
            _registry.OBSERVERS.append(_log_placement)
    elif _log_placement in _registry.OBSERVERS:
        _registry.OBSERVERS.remove(_log_placement)


def get_log_device_placement():
    """Whether `set_log_device_placement(True)` is in effect, as
    `tf.debugging.get_log_device_placement`.

    >>> tg.debugging.get_log_device_placement()
    False
    """
    return _log_placement in _registry.OBSERVERS
