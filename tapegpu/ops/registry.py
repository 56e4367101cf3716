"""The op registry: every operation is one entry here, and the machinery reads only entries.

Contract (what every rule may rely on, and must honour)
-------------------------------------------------------
* `forward(xp, *arrays, **params) -> array` computes the op with the array module `xp` (numpy
  or cupy). It is the reference every backend runs. `kernels={backend name: kernel}` overrides
  it where a custom kernel exists (`cuda`, `cuda_emu`, the CPU kernels on `numpy`); a kernel
  has the forward's signature and returns `NotImplemented` for inputs it does not cover
  (dtypes, parameters), and the reference runs instead. Results never depend on whether a
  kernel exists, only the number of launches does.
* `saves` declares what the VJP sees, in order: an argument name (the input tensor), `"out"`
  (the output tensor), `"<arg>.shape"` (only the input's shape), `"*"` (every input, for
  variadic ops), or the name of a derived residual: an op with `residuals=("probs",)` returns
  `(out, (probs,))` from its forward, and the residual is saved like an output (sparse
  cross-entropy keeps its probabilities this way). The rule gets exactly these, then the op's
  params as keywords. Nothing else is kept alive by a tape. Each residual is also an op of
  its own, `"<name>:<residual>"` (`op.residual_ops`), computing that residual from the same
  inputs and params: a tg.function trace records a residual as a node of it, so that a rule
  inside a traced function gets the residual as a value of the graph, computed again at every
  call (the replay runs the op and its residuals in one pass), never a constant of the trace.
* `vjp` is either a tuple with one rule per tensor argument (`None` for an argument with no
  gradient, such as indices or a condition), each `rule(ops, g, *saved, **params) -> cotangent`,
  or one rule returning a tuple of cotangents (for ops whose input gradients share work or
  whose argument count varies). A rule runs only for inputs that need a gradient.
* `ops` is the namespace a rule computes with, and the one thing that makes a rule serve every
  path: `ops.<name>(...)` is tapegpu's public function `<name>`, Python operators work on the
  values, `ops.keep(mask, g)` is `where(mask, g, 0)`, `ops.op(name, *values, **params)` a
  registered op with its own params, `ops.const_like(like, value)` and
  `ops.arange_like(like, n)` constants beside a value (see namespace.py). A rule never reads a
  value's array: inside tg.function that array is the traced call's, and anything made from it
  outside an op would be a constant of the graph (the trace refuses an array of a traced value
  among an op's params). When a tape records the sweep (higher order), the values are tensors and `ops` is tapegpu itself (`ops.records` is True);
  otherwise they are the backend's arrays and `ops` computes on them directly, with the same
  floating-point operations (so both give identical bits). `vjp_kernels={backend: kernel}`
  replaces a rule on arrays by a kernel, `kernel(g, *saved, **params)`, which may also return
  `NotImplemented`. A rule that can only run on tensors (user functions: custom gradients)
  declares `tensor_rule=True`.
* Batch axes: a cotangent `g` has shape `batch_shape + out.shape` for any number of leading batch
  axes. Rules index from the right (negative axes, `...`). A rule may return a cotangent that
  still has the broadcast shape of the op's output: the sweep sums it to `batch_shape +
  input.shape` in one place (`sweep.sum_to`), so rules never un-broadcast.
* `None` is the one spelling of a zero cotangent: a rule may return None, and is never called
  with a None `g`.
* `jvp(ops, t, *saved, **params)` for one tensor argument, `jvp(ops, ts, *saved, **params)` (a
  tuple with None for zero tangents) for several. `elementwise=True` derives it from the VJP
  (the Jacobian is diagonal, so the JVP of each input is its VJP rule applied to the tangent);
  `linear=True` makes it the op itself applied to the tangents.
* `view=True`: the op only makes a view or reads metadata; on backends that count launches, any
  other reference forward counts as one library launch. `view_when=pred` for an op that is a
  view for some params only: `pred(params)` says whether this call is (getitem: basic indexing
  is a view, a gather is a launch); `Op.launches(params)` combines both.
* `c="sin(x)"`: the forward on one element of each floating input, as a C/CUDA C expression
  of the op's `args` (type `T`: float or double; C's math functions, which C++ and CUDA overload
  for float) that computes the same IEEE operations as `forward`. tg.function's fusion
  (function/fusion.py) generates its kernels from these expressions only; an op without one
  is never fused. Views that only relabel elements (reshape, broadcasting a single element)
  have `c="x"`. Comparisons give a C `bool` and `where`'s condition is one (`c="c ? x : y"`;
  kernels with bool values are generated for GPUs only). An expression may name the op's
  params (`alpha`), which a kernel gets as literals of the call's values (or of the forward's
  defaults); a call whose referenced param is not a number or a bool is not fused.
* `dc="g * (T(1) - out * out)"`: the VJP rule on one element, as a C expression of `g` (the
  cotangent's element), the op's declared saves (`x`, `out`) and params, for an elementwise op
  of one input: the same IEEE operations as the rule on arrays. The rule stays the definition
  (on tensors it is differentiable, for higher order); the kernels are generated from `c` and
  `dc` (tapegpu/backends/kernels/codegen.py): the CUDA kernels of cuda_kernels/activations.cu
  (`python -m tapegpu.ops.generate` writes them), and the CPU kernels of
  tapegpu/backends/_cpu.c for the ops whose expressions are exact (arithmetic, comparisons,
  `fabs`, `sqrt`: numpy's bits). tests/backends/kernels/test_expressions.py checks each `dc`
  against its rule.
* `zero_when=(("x",), ("y",))`: groups of argument names such that the result is 0 wherever
  every argument of one group is 0, whatever the others hold (a product: either factor; a
  quotient: its numerator; `where`: both branches). tg.function's diagonal pass
  (function/diagonal.py) keeps a per-example value in its compact form through such ops. (An
  Inf or NaN in the other arguments is not considered: the pass never forms those products.)
* Rules tg.function's passes apply to the op's nodes, registered from its family's file (the
  passes name no op): `rewrite(r, node)` returns the nodes that replace `node` in a traced
  graph (or None), building them with the pass's `r` (function/rewrite.py); `diagonal(d, node)`
  says how a value diagonal over a Jacobian's basis goes through the op (function/diagonal.py);
  `replay_into(forward, in_shapes, params)` gives `(fn(*arrays, out), may_alias)` (or None),
  the forward on numpy arrays written into a buffer of the replay's plan, which may be an
  input's buffer when `may_alias` (function/graph.py). `broadcast_only=True`: the op only
  broadcasts its input, so an elementwise op may read the input itself.
* `flops=`: what tg.profiler counts for one forward call, an int or `flops(in_shapes,
  out_shape, params)`; by default 0 for a view and the larger of the output's and the inputs'
  element counts otherwise (elementwise ops and reductions).
* An op without `vjp` has no gradient (floor, argmax, comparisons): it is never recorded, so
  gradients through it are unconnected (`None`), as in TensorFlow.
* `batch` names how the op runs on values with a batch axis (`tg.vectorized_map`, see
  ops/batching.py): one of `BATCH_KINDS`, or a rule of the op's own. `elementwise=True` gives
  "broadcast"; an op without one runs once per batch element there (and says so).
* `fresh=True` says that the forward on numpy arrays always returns a new array, never a view
  of an input (numpy's ufuncs are known to): tg.function's plan (function/graph.py) may then
  keep the op's inputs in its reusable buffers. `reduction="add"` says that the op sums its
  input over its `axis` param in order, as numpy's sum does: fusion may end a generated kernel
  with it as a column sum (function/fusion.py).
* `per_example` says how an eager `tape.jacobian` of per-example values keeps its cotangent in
  diagonal form through the op's VJP (autodiff/jacobian.py; elementwise ops need nothing):
  "reduction" (a reduction over its `axis` param), "product" (matmul's `ta`/`tb` products), or
  ("leading", when): the op is independent along a leading axis q of its output (rank r) where
  `when(q, r, params)` holds.

Adding an op: docs/adding_an_op.md. In short: one `def_op` entry in its family's file under
`ops/`, its public function beside it, and a row in `tapegpu/testing/op_specs.py` (a meta-test
fails for an op without one).
"""
import numpy as np

from ..core import profiler as _profiler
from ..core.quiet import quiet_enter, quiet_exit
from ..errors import InvalidArgumentError
from ..core.profiler import _active as _profilers
from ..core import recording
from ..core.recording import SAVE_OUT, SAVE_X, SAVE_XSHAPE, SAVE_XY, Entry, Recorder
from ..core.tensor import Tensor, _next_uid, _thread

REGISTRY = {}

# Observers of EVERY op applied, differentiable or not (tapegpu.function's tracer, which records
# a graph): `observer(op, inputs, out, params)` after the output tensor exists. Empty unless a
# trace is active in some thread (each observer filters by thread); while non-empty, apply1 and
# apply2 take the general path through `_finish`, so the fast path costs one list test.
OBSERVERS = []

# How an op batches (its `batch` field) under tg.vectorized_map: one of these kinds, shared by
# many ops (implemented and described in ops/batching.py), or a rule of the op's own
BATCH_KINDS = ("broadcast", "leading", "leading_broadcast", "axis", "first", "merge", "channels",
               "lead")


class Op:
    """One registered operation (see the module docstring; built by `def_op`)."""
    __slots__ = ("name", "forward", "vjp", "jvp", "args", "saves", "save_plan", "elementwise",
                 "linear", "batched", "same_dtype", "kernels", "vjp_kernels", "variadic",
                 "residuals", "view", "view_when", "tensor_rule", "steps", "c", "dc", "batch",
                 "fresh", "reduction", "registered", "per_example", "zero_when", "residual_ops", "residual_of", "flops", "rewrite",
                 "broadcast_only", "diagonal", "replay_into")

    def __init__(self, name, forward=None, *, args=("x",), vjp=None, jvp=None, saves=(),
                 elementwise=False, linear=False, batched=True, same_dtype=True,
                 variadic=False, residuals=(), view=False, tensor_rule=False, kernels=None,
                 vjp_kernels=None, c=None, dc=None, batch=None, fresh=False, view_when=None,
                 zero_when=(), flops=None, rewrite=None, broadcast_only=False, diagonal=None,
                 replay_into=None, reduction=None, per_example=None):
        self.name = name
        self.c = c  # the forward as one C expression of `args` (see the module docstring)
        self.dc = dc  # the VJP as one C expression of `g` and the saves (module docstring)
        self.forward = forward
        self.args = tuple(args)
        if "out" in self.args:  # `saves=("out",)` names the output
            raise ValueError(f"op {name!r}: an argument may not be named 'out' (the output's "
                             f"name in `saves`)")
        self.vjp = vjp
        self.jvp = jvp
        self.saves = tuple(saves)
        self.residuals = tuple(residuals)
        self.residual_ops = ()  # the ops computing each residual (def_op registers them)
        self.residual_of = None  # (op, index) for such an op: residual `index` of `op`
        plan = tuple(_plan(s, self.args, name, self.residuals) for s in self.saves)
        # the common plans as shared objects, so that saved_values can test them by identity
        self.save_plan = next((c for c in _COMMON_PLANS if c == plan), plan)
        self.elementwise = elementwise
        self.linear = linear
        self.batched = batched  # False: the rule takes no batch axes (one call per row)
        self.same_dtype = same_dtype
        self.variadic = variadic
        self.view = view
        self.view_when = view_when  # None, or params -> whether this call only makes a view
        self.tensor_rule = tensor_rule
        self.kernels = dict(kernels or {})  # backend name -> forward kernel
        self.vjp_kernels = dict(vjp_kernels or {})  # backend name -> VJP kernel
        self.steps = {}  # the array sweep's VJP per (backend, batched): see sweep._array_step
        if batch is None and elementwise:
            batch = "broadcast"
        if batch is not None and not callable(batch) and batch not in BATCH_KINDS:
            raise ValueError(f"op {name!r}: batch={batch!r} is neither one of {BATCH_KINDS} "
                             f"nor a rule")
        self.batch = batch  # how it runs under tg.vectorized_map (ops/batching.py); None: a loop
        self.fresh = fresh  # its forward on numpy makes a new array (module docstring)
        self.reduction = reduction  # "add": it sums over its `axis` param (module docstring)
        self.registered = False  # True for the ops of REGISTRY (def_op), not per-call ops
        self.per_example = per_example  # eager per-example Jacobians (module docstring)
        self.zero_when = tuple(tuple(group) for group in zero_when)  # (module docstring)
        self.flops = 0 if view and flops is None else flops  # (module docstring)
        self.rewrite = rewrite  # tg.function's rewrites of its nodes (module docstring)
        self.broadcast_only = broadcast_only
        self.diagonal = diagonal  # tg.function's diagonal pass (module docstring)
        self.replay_into = replay_into  # the replay's forward into a buffer (module docstring)
        unknown = {a for group in self.zero_when for a in group} - set(self.args)
        if unknown:
            raise ValueError(f"op {name!r}: zero_when names {sorted(unknown)}, not among its "
                             f"args {self.args}")

    @property
    def differentiable(self):
        return self.vjp is not None

    def launches(self, params):
        """Whether the reference forward with `params` launches a kernel on a GPU (one library
        call), rather than only making a view or reading metadata."""
        return not (self.view or (self.view_when is not None and self.view_when(params)))

    def saved_values(self, inputs, out):
        """The declared residuals of one call, in the order the rules take them."""
        plan = self.save_plan
        if plan is SAVE_OUT:
            return (out,)
        if plan is SAVE_X:
            return (inputs[0],)
        if plan is SAVE_XSHAPE:
            return (inputs[0]._data.shape,)
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


_COMMON_PLANS = (SAVE_OUT, SAVE_X, SAVE_XY, SAVE_XSHAPE)


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


def ufunc(name):
    """The forward of an op that is the array module's function `name` (a numpy/CuPy ufunc of
    one array): `forward.ufunc` names it, so that rules on arrays call it directly and a code
    generator knows it."""
    def forward(xp, x):
        return getattr(xp, name)(x)
    forward.ufunc = name
    return forward


def exact_ufunc(name, forward):
    """`forward` (kept as it is: the eager path calls it) tagged as computing exactly the
    array module's ufunc `name` of its arrays (`x + y` is `xp.add(x, y)`), so that
    tg.function's replay calls the ufunc itself."""
    forward.ufunc = name
    return forward


def quiet(forward):
    """A forward whose documented results at its domain's edges are inf or nan (log(0),
    x / 0, sqrt(-1)): numpy's warnings about them are not raised from tapegpu's lines, as
    TensorFlow gives these values silently."""
    def run(xp, *arrays, **params):
        token = quiet_enter()
        try:
            return forward(xp, *arrays, **params)
        finally:
            quiet_exit(token)
    if hasattr(forward, "ufunc"):
        run.ufunc = forward.ufunc
    return run


def passthrough(ops, g, *saved, **params):
    """The VJP of an input whose Jacobian is the identity (add, identity): g itself, which the
    sweep hands on without calling anything."""
    return g


def def_op(name, forward, **entry):
    """Registers an op and returns its entry: `Op`'s keywords, described in the module
    docstring."""
    if name in REGISTRY:
        raise ValueError(f"op {name!r} is already registered")
    op = REGISTRY[name] = Op(name, forward, **entry)
    op.registered = True
    op.residual_ops = tuple(_residual_op(op, i) for i in range(len(op.residuals)))
    return op


def _residual_op(op, index):
    """The op computing residual `index` of `op` (no gradient: rules that differentiate
    through a residual recompute it from the inputs, as sparse cross-entropy's does)."""
    def forward(xp, *arrays, **params):
        return op.forward(xp, *arrays, **params)[1][index]

    def kernel(backend):
        def run(xp, *arrays, **params):
            out = op.kernels[backend](xp, *arrays, **params)
            return out if out is NotImplemented else out[1][index]
        return run

    name = f"{op.name}:{op.residuals[index]}"
    res = REGISTRY[name] = Op(name, forward, args=op.args, same_dtype=op.same_dtype,
                              variadic=op.variadic,
                              kernels={b: kernel(b) for b in op.kernels})
    res.residual_of = (op, index)
    res.registered = True
    return res


def apply(op, inputs, params):
    """Runs `op` on tensors `inputs` with keyword `params` and records it on active tapes."""
    if len(inputs) == 1:
        return apply1(op, inputs[0], params)
    if len(inputs) == 2:
        return apply2(op, inputs[0], inputs[1], params)
    dev = inputs[0]._dev
    _check_inputs(op, inputs, dev)
    arrays = [t._data for t in inputs]
    try:
        if op.kernels and dev.name in op.kernels:
            return _kernel_forward(op, inputs, arrays, dev, params)
        out = op.forward(dev.xp, *arrays, **params)
    except (ValueError, TypeError, IndexError, ArithmeticError) as e:
        return _failed(op, inputs, params, e)
    return _finish(op, inputs, out, dev, params, True)


def apply1(op, x, params):
    """`apply` for one input (the hot path of elementwise code)."""
    dev = x._dev
    try:
        if op.kernels and dev.name in op.kernels:
            return _kernel_forward(op, (x,), (x._data,), dev, params)
        out = op.forward(dev.xp, x._data, **params) if params else op.forward(dev.xp, x._data)
    except (ValueError, TypeError, IndexError, ArithmeticError) as e:
        return _failed(op, (x,), params, e)
    if op.residuals or dev.counts_launches or _profilers or OBSERVERS:
        return _finish(op, (x,), out, dev, params, True)
    return wrap(op, (x,), out, dev, params)


def apply2(op, x, y, params):
    """`apply` for two inputs."""
    dev = x._dev
    xd = x._data
    yd = y._data
    if y._dev is not dev or (op.same_dtype and yd.dtype is not xd.dtype and
                             yd.dtype != xd.dtype):
        _check_inputs(op, (x, y), dev)
    try:
        if op.kernels and dev.name in op.kernels:
            return _kernel_forward(op, (x, y), (xd, yd), dev, params)
        out = op.forward(dev.xp, xd, yd, **params) if params else op.forward(dev.xp, xd, yd)
    except (ValueError, TypeError, IndexError, ArithmeticError) as e:
        return _failed(op, (x, y), params, e)
    if op.residuals or dev.counts_launches or _profilers or OBSERVERS:
        return _finish(op, (x, y), out, dev, params, True)
    return wrap(op, (x, y), out, dev, params)


def forward_on(op, dev, arrays, params):
    """The op's forward on backend arrays, by the backend's kernel where it covers them:
    nothing is wrapped, recorded or counted (recomputation, array-level rules)."""
    kernel = op.kernels.get(dev.name) if op.kernels else None
    if kernel is not None:
        out = kernel(dev.xp, *arrays, **params)
        if out is not NotImplemented:
            return out
    return op.forward(dev.xp, *arrays, **params)


def _kernel_forward(op, inputs, arrays, dev, params):
    """The forward by the backend's kernel, or by the reference where the kernel does not cover
    the inputs (it returned NotImplemented)."""
    out = op.kernels[dev.name](dev.xp, *arrays, **params)
    reference = out is NotImplemented
    if reference:
        out = op.forward(dev.xp, *arrays, **params)
    return _finish(op, inputs, out, dev, params, reference)


def py_wrap(op, inputs, out, dev, params):
    """The output array `out` of `op` as a tensor, offered to this thread's recorders when the
    op has a gradient and the output is floating: the common end of an apply (`wrap`)."""
    y = Tensor(out, dev)
    active = _thread.recorders
    if active and op.vjp is not None and out.dtype.kind in "fcV":
        for rec in active:
            rec.record(op, inputs, y, params)
    return y


# `wrap` is the compiled twin (core/_record.c, see core/recording.py) where it is built; it
# reads the fields of tensors, entries and ops by their slots
wrap = py_wrap
if recording.compiled is not None:
    recording.compiled.configure(Tensor, Entry, Op, Recorder, _thread, _next_uid, SAVE_X,
                                 SAVE_OUT, SAVE_XY, SAVE_XSHAPE)
    wrap = recording.compiled.wrap


def _finish(op, inputs, out, dev, params, reference):
    """The end of an apply in general: count the launch, wrap the array and offer it to the
    recorders, report it to profilers. Kernels count their own launches; a reference forward
    is one library launch (CuPy/cuBLAS) on a GPU unless it only makes a view."""
    if op.residuals:
        return _with_residuals(op, inputs, out, dev, params, reference)
    if dev.counts_launches and reference and op.launches(params):
        dev.launches[op.name] += 1
    if OBSERVERS:
        y = Tensor(out, dev)
        _observe_then_record(op, inputs, y, params)
    else:
        y = wrap(op, inputs, out, dev, params)
    if _profilers:
        _profiler.on_forward(op, inputs, out, params)
    return y


def _observe_then_record(op, inputs, y, params):
    """Observers (a tg.function trace) see the output before recorders do: a forward
    accumulator computes the output's tangent from it at once, and the trace must know the
    output as a value of its graph by then (else it would take it for a constant)."""
    for observe in OBSERVERS:
        observe(op, inputs, y, params)
    active = _thread.recorders
    if active and op.vjp is not None and y._data.dtype.kind in "fcV":
        for rec in active:
            rec.record(op, inputs, y, params)


def _with_residuals(op, inputs, result, dev, params, reference):
    """The output of an op whose forward also returned residuals for its VJP: recorders read
    them from the output while recording; afterwards the output no longer holds them."""
    out, res = result
    if dev.counts_launches and reference and op.launches(params):
        dev.launches[op.name] += 1
    y = Tensor(out, dev)
    if _thread.recorders and op.vjp is not None and out.dtype.kind in "fcV":
        y._res = (Tensor(res[0], dev),) if len(res) == 1 else tuple(Tensor(r, dev) for r in res)
        _observe_then_record(op, inputs, y, params)
        del y._res
    else:
        _observe_then_record(op, inputs, y, params)
    if _profilers:
        _profiler.on_forward(op, inputs, out, params)
    return y


def _failed(op, inputs, params, e):
    """The forward raised. Where an input is a batched value of `tg.vectorized_map`, that was
    its array refusing to be computed with (it is a stand-in whose type has `batching`): the op
    runs by its batching rule instead. This costs nothing on the path of ordinary values.
    Otherwise the error, naming the op and its inputs."""
    for t in inputs:
        batching = getattr(type(t._data), "batching", None)
        if batching is not None:
            return batching(op, inputs, params)
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


