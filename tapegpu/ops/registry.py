"""The op registry: every differentiable operation is one entry here.

Contract (what every rule may rely on, and must honour)
-------------------------------------------------------
* `forward(xp, *arrays, **params) -> array` computes the op with the array module `xp` (numpy
  or cupy). It is the reference every backend can run; a backend may override it with a custom
  kernel (`overrides[backend_name]`, same signature).
* `saves` declares what the VJP sees, in order: an argument name (the input tensor), `"out"`
  (the output tensor), `"<arg>.shape"` (only the input's shape), `"*"` (every input, for
  variadic ops), or the name of a derived residual: an op with `residuals=("probs",)` returns
  `(out, (probs,))` from its forward, and the residual is saved like an output (sparse
  cross-entropy keeps its softmax this way). The rule gets exactly these, then the op's params
  as keywords. Nothing else is kept alive by a tape.
* `vjp` is either a tuple with one rule per tensor argument (`None` for an argument with no
  gradient, such as indices or a condition), each `rule(g, *saved, **params) -> cotangent`, or
  one rule returning a tuple of cotangents (for ops whose input gradients share work or whose
  argument count varies). A rule runs only for inputs that need a gradient.
* Batch axes: a cotangent `g` has shape `batch_shape + out.shape` for any number of leading batch
  axes. Rules index from the right (negative axes, `...`). A rule may return a cotangent that
  still has the broadcast shape of the op's output: the sweep sums it to `batch_shape +
  input.shape` in one place (`sweep.sum_to`), so rules never un-broadcast.
* Rules are written with tapegpu ops, never raw numpy/cupy, so that they are themselves
  recorded by outer tapes (higher-order gradients) and run on any device.
* `None` is the one spelling of a zero cotangent: a rule may return None, and is never called
  with a None `g`.
* `jvp(t, *saved, **params)` for one tensor argument, `jvp(ts, *saved, **params)` (a tuple with
  None for zero tangents) for several. `elementwise=True` derives it from the VJP (the Jacobian
  is diagonal, so the JVP of each input is its VJP rule applied to the tangent); `linear=True`
  makes it the op itself applied to the tangents.
* `fused_vjp` (optional, set in fused.py) is the same VJP as one array-level call
  `rule(xp, g, *saved_arrays, **params)` (or a tuple, one per input), used by the sweep when no
  tape records it (nothing needs the VJP's own graph). It must equal `vjp` exactly; the op
  tests check that. `fused_overrides[backend]` launches a kernel instead (dispatch.py).
* On backends that count launches (`cuda`, `cuda_emu`), a reference forward counts as one
  library launch unless the op only makes a view (`VIEW_OPS`).
* An op without `vjp` has no gradient (floor, argmax, comparisons): it is never recorded, so
  gradients through it are unconnected (`None`), as in TensorFlow.

Adding an op: write `forward`, declare `saves`, write `vjp` (and `jvp` if it is neither
elementwise nor linear), define the public function in the family's file under `ops/`, and add a
spec to `tests/op_specs.py` (a meta-test fails for an op without one).
"""
from ..core import profiler as _profiler
from ..core.profiler import _active as _profilers
from ..core.tensor import Tensor, _thread

REGISTRY = {}
# ops that return views or metadata: no kernel launch on a GPU
VIEW_OPS = frozenset(("reshape", "transpose", "broadcast_to", "identity", "read_variable",
                      "stop_gradient", "expand_dims", "squeeze"))


class InvalidArgumentError(ValueError):
    """Bad shapes, dtypes or values for an op (TensorFlow's `tf.errors.InvalidArgumentError`)."""


class Op:
    __slots__ = ("name", "forward", "vjp", "jvp", "args", "saves", "save_plan", "elementwise",
                 "linear", "batched", "same_dtype", "overrides", "variadic", "_fused_vjp",
                 "fused_overrides", "residuals", "steps")

    def __init__(self, name, forward, args, vjp, jvp, saves, elementwise, linear, batched,
                 same_dtype, variadic, residuals=()):
        self.name = name
        self.forward = forward
        self.args = args
        self.vjp = vjp
        self.jvp = jvp
        self.saves = saves
        self.residuals = residuals
        plan = tuple(_plan(s, args, name, residuals) for s in saves)
        # the common plans as shared objects, so that saved_values can test them by identity
        self.save_plan = next((c for c in _COMMON_PLANS if c == plan), plan)
        self.elementwise = elementwise
        self.linear = linear
        self.batched = batched
        self.same_dtype = same_dtype
        self.overrides = {}
        self.variadic = variadic
        self.steps = {}  # the array sweep's VJP per (backend, batched): see sweep._array_step
        self.fused_vjp = None  # optional array-level VJP (see fused.py)
        self.fused_overrides = {}  # backend name -> fused VJP launching kernels (dispatch.py)

    @property
    def fused_vjp(self):
        return self._fused_vjp

    @fused_vjp.setter
    def fused_vjp(self, rule):
        self._fused_vjp = rule
        self.steps.clear()  # the array sweep's steps are built from it

    @property
    def differentiable(self):
        return self.vjp is not None

    def saved_values(self, inputs, out):
        """The declared residuals of one call, in the order the rules take them."""
        plan = self.save_plan
        if plan is SAVE_OUT:
            return (out,)
        if plan is SAVE_X:
            return (inputs[0],)
        if plan is SAVE_XY and len(inputs) == 2:
            return inputs
        vals = []
        for kind, i in plan:
            if kind == 0:
                vals.append(inputs[i])
            elif kind == 1:
                vals.append(out)
            elif kind == 2:
                vals.append(inputs[i]._data.shape)
            elif kind == 4:
                vals.append(out._res[i])
            else:
                vals.extend(inputs)
        return tuple(vals)

    def __repr__(self):
        return f"<op {self.name}>"


SAVE_OUT = ((1, -1),)
SAVE_X = ((0, 0),)
SAVE_XY = ((0, 0), (0, 1))
_COMMON_PLANS = (SAVE_OUT, SAVE_X, SAVE_XY)


def _plan(name, args, op, residuals=()):
    """Where one declared save comes from: (0, arg index), (1, out), (2, arg index) for the
    shape, (3, all inputs) or (4, residual index)."""
    if name == "out":
        return (1, -1)
    if name in residuals:
        return (4, residuals.index(name))
    base, _, attr = name.partition(".")
    if base == "*":  # every input, for variadic ops (einsum)
        return (3, -1)
    if base not in args:
        raise ValueError(f"op {op!r}: declared save {name!r} is not an argument of {args}")
    if attr == "":
        return (0, args.index(base))
    if attr == "shape":
        return (2, args.index(base))
    raise ValueError(f"op {op!r}: declared save {name!r}: only '<arg>' or '<arg>.shape'")


def def_op(name, forward, args=("x",), vjp=None, jvp=None, saves=(), elementwise=False,
           linear=False, batched=True, same_dtype=True, variadic=False, residuals=()):
    """Registers an op and returns its entry. See the module docstring for the contract."""
    if name in REGISTRY:
        raise ValueError(f"op {name!r} is already registered")
    op = Op(name, forward, tuple(args), vjp, jvp, tuple(saves), elementwise, linear, batched,
            same_dtype, variadic, tuple(residuals))
    REGISTRY[name] = op
    return op


def apply(op, inputs, params):
    """Runs `op` on tensors `inputs` with keyword `params` and records it on active tapes."""
    if len(inputs) == 1:
        return apply1(op, inputs[0], params)
    if len(inputs) == 2:
        return apply2(op, inputs[0], inputs[1], params)
    dev = inputs[0]._dev
    _check_inputs(op, inputs, dev)
    forward = op.overrides.get(dev.name, op.forward) if op.overrides else op.forward
    try:
        out = forward(dev.xp, *[t._data for t in inputs], **params)
    except (ValueError, TypeError, IndexError, ArithmeticError) as e:
        raise _error(op, inputs, params, e) from None
    return _finish(op, inputs, out, dev, params, forward)


def apply1(op, x, params):
    """`apply` for one input (the hot path of elementwise code)."""
    dev = x._dev
    forward = op.overrides.get(dev.name, op.forward) if op.overrides else op.forward
    try:
        out = forward(dev.xp, x._data, **params) if params else forward(dev.xp, x._data)
    except (ValueError, TypeError, IndexError, ArithmeticError) as e:
        raise _error(op, (x,), params, e) from None
    return _finish(op, (x,), out, dev, params, forward)


def apply2(op, x, y, params):
    """`apply` for two inputs."""
    dev = x._dev
    xd = x._data
    yd = y._data
    if y._dev is not dev or (op.same_dtype and yd.dtype is not xd.dtype and
                             yd.dtype != xd.dtype):
        _check_inputs(op, (x, y), dev)
    forward = op.overrides.get(dev.name, op.forward) if op.overrides else op.forward
    try:
        out = forward(dev.xp, xd, yd, **params) if params else forward(dev.xp, xd, yd)
    except (ValueError, TypeError, IndexError, ArithmeticError) as e:
        raise _error(op, (x, y), params, e) from None
    return _finish(op, (x, y), out, dev, params, forward)


def _finish(op, inputs, out, dev, params, forward):
    """The end of every apply: count the launch, wrap the array, offer the call to this
    thread's recorders, report it to profilers."""
    if op.residuals:
        return _with_residuals(op, inputs, out, dev, params, forward)
    if dev.counts_launches and forward is op.forward:
        _count_launch(op, dev)
    y = Tensor(out, dev)
    active = _thread.recorders
    if active and op.vjp is not None and out.dtype.kind in "fc":
        for rec in active:
            rec.record(op, inputs, y, params)
    if _profilers:
        _profiler.on_forward(op, inputs, out, params)
    return y


def _count_launch(op, dev):
    """A reference forward is one library launch (CuPy/cuBLAS) on a GPU, unless it only makes
    a view."""
    if op.name not in VIEW_OPS:
        dev.launches[op.name] += 1



def _with_residuals(op, inputs, result, dev, params, forward):
    """The output of an op whose forward also returned residuals for its VJP: recorders read
    them from the output while recording; afterwards the output no longer holds them."""
    out, res = result
    if dev.counts_launches and forward is op.forward:
        _count_launch(op, dev)
    y = Tensor(out, dev)
    active = _thread.recorders
    if active and op.vjp is not None and out.dtype.kind in "fc":
        y._res = tuple(Tensor(r, dev) for r in res)
        for rec in active:
            rec.record(op, inputs, y, params)
        del y._res
    if _profilers:
        _profiler.on_forward(op, inputs, out, params)
    return y


def _raise_error(op, inputs, params, e):
    raise _error(op, inputs, params, e) from None


def _error(op, inputs, params, e):
    return InvalidArgumentError(f"{op.name}: {e} (inputs: {describe(inputs)}"
                                f"{', params: ' + repr(params) if params else ''})")


def _check_inputs(op, inputs, dev):
    dt = inputs[0]._data.dtype
    for t in inputs:
        if t._dev is not dev:
            raise InvalidArgumentError(
                f"{op.name}: inputs are on different devices ({describe(inputs)}); move them "
                f"to one device with tensor.to(device) or tg.copy_to")
        if op.same_dtype and t._data.dtype != dt:
            raise InvalidArgumentError(
                f"{op.name}: inputs must have the same dtype, got {describe(inputs)}; "
                f"use tg.cast to convert explicitly (tapegpu never promotes silently)")


def describe(tensors):
    return ", ".join(f"{t.dtype.name}{list(t.shape)}@{t._dev.short}" for t in tensors)


