"""`tg.function`: Function (the per-signature cache), ConcreteFunction (one trace) and
TensorSpec. The rules are in docs/function.md."""
import functools
import inspect
import types
import warnings

import numpy as np

from .. import backends as _backend
from ..core import dtypes
from ..core import nest as _nest
from ..core.nest import composites as nest  # ExtensionType values: their parts
from ..core.options import options
from ..core.tensor import Tensor, Variable, _thread, convert_to_tensor
from ..ops import registry
from ..ops.control_flow import TensorArray
from . import graph as _graph
from . import capture, diagonal, fusion, rewrite
from .graph import GuardMismatch, Plan, format_print, optimize
from .trace import Tracer


GUARD_VARIANTS_WARNING = 5  # graphs per signature (guard variants) at which a call warns


class InputSignatureError(TypeError, ValueError):
    """Arguments that do not match a `tg.function`'s `input_signature` (a TypeError, as
    TensorFlow since 2.13, and a ValueError, as it was before)."""


class TensorSpec:
    """The shape and dtype of a tensor argument; None dimensions match any size.

    >>> tg.TensorSpec([None, 3], tg.float32)
    TensorSpec(shape=(None, 3), dtype=tg.float32, name=None)
    """

    def __init__(self, shape, dtype=dtypes.float32, name=None):
        self.shape = None if shape is None else tuple(None if d is None else int(d)
                                                      for d in shape)
        self.dtype = dtypes.as_dtype(dtype)
        self.name = name

    def is_compatible_with(self, t):
        """Whether the tensor (or spec) `t` has this dtype and a shape this one matches."""
        shape = tuple(t.shape)
        if dtypes.as_dtype(t.dtype) != self.dtype:
            return False
        if self.shape is None:
            return True
        return len(shape) == len(self.shape) and all(
            a is None or a == b for a, b in zip(self.shape, shape))

    def __eq__(self, other):
        return isinstance(other, TensorSpec) and (self.shape, self.dtype) == (other.shape,
                                                                             other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype.name))

    def __repr__(self):
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype!r}, name={self.name!r})"


# -- signatures ------------------------------------------------------------------------------------

def _treedef(s):
    if isinstance(s, (list, tuple)):
        return (type(s), tuple([_treedef(v) for v in s]))
    if isinstance(s, dict):
        return (type(s), tuple([(k, _treedef(s[k])) for k in sorted(s)]))
    if _nest.is_composite(s):  # an ExtensionType value: its parts
        return (type(s), tuple([_treedef(v) for v in s._tg_parts()]))
    return "*"


_NO_ARGS_TREEDEF = _treedef([[], {}])


def _leaf_key(x, name):
    if isinstance(x, Tensor):
        return ("T", tuple(x._data.shape), dtypes.name_of(x._data.dtype), x._dev.name)
    if isinstance(x, Variable):
        return ("V", x._uid)
    if isinstance(x, TensorArray):
        raise TypeError(f"tg.function {name}: a tg.TensorArray cannot be an argument (its "
                        f"elements would be fixed at trace time); pass ta.stack() and make the "
                        f"array inside the function")
    try:
        hash(x)
    except TypeError:
        raise TypeError(f"tg.function {name}: an argument of type {type(x).__name__} is not "
                        "hashable; Python arguments are part of the trace's key (pass tensors, "
                        "or hashable values)") from None
    return ("P", type(x), x)


def _relax(general, key):
    """`general` with None where the tensor shapes of `key` differ, or None if they are not
    the same kind of arguments (other Python values, dtypes or ranks)."""
    if general[0] != key[0] or len(general[1]) != len(key[1]):
        return None
    out = []
    for g, k in zip(general[1], key[1]):
        if g[0] != k[0]:
            return None
        if g[0] != "T":
            if g != k:
                return None
            out.append(g)
            continue
        if g[2:] != k[2:] or len(g[1]) != len(k[1]):
            return None
        out.append(("T", tuple(a if a == b else None for a, b in zip(g[1], k[1])), *g[2:]))
    return (general[0], tuple(out))


def _matches(general, key):
    relaxed = _relax(general, key)
    return relaxed is not None and relaxed == general


def _spec_text(leaf_key):
    kind = leaf_key[0]
    if kind == "T":
        return f"{leaf_key[2]} Tensor, shape={leaf_key[1]}"
    if kind == "V":
        return "tg.Variable"
    return repr(leaf_key[2])


class ConcreteFunction:
    """One trace of a `tg.function`: its graph (`.graph`, printable, optimized) and what it
    was traced for (`.structured_input_signature`). Calling it replays the graph."""

    _capture = None  # capture.Capture of the replay (jit_compile=True), or None

    def __init__(self, function, graph, key, arg_structure):
        self.function = function
        # a Jacobian's backward on per-example values, not on its basis (diagonal.py), then
        # the rewrites of constant bases and selects (rewrite.py)
        self.graph = rewrite.rewrite(diagonal.propagate(optimize(graph)))
        # the replayed copy has its elementwise groups fused (fusion.py; jit_compile=False: no).
        # By default a first call does not wait for the compiler: until the kernels are built
        # (in the background, when not cached) the calls replay the graph unfused
        self._plan = Plan(self.graph if function._jit_compile is False else fusion.fuse(
            self.graph, on_ready=self._fused if function._jit_compile is None else None))
        # jit_compile=True: replayed from a captured CUDA graph where it can be (capture.py)
        self._capture = capture.Capture(self._plan) if function._jit_compile is True and \
            options.capture else None
        self._key = key
        self._arg_structure = arg_structure

    def _fused(self, graph):
        """(the compiling thread) The fused replay, once its kernels are compiled: the calls
        from then on run it."""
        self._plan = Plan(graph)

    @property
    def structured_input_signature(self):
        """(positional argument specs, keyword argument specs), as TensorFlow: tensors as
        TensorSpec, other arguments as their values."""
        leaves = [TensorSpec(k[1], k[2]) if k[0] == "T" else
                  ("<variable>" if k[0] == "V" else k[2]) for k in self._key[1]]
        args, kwargs = nest.pack_sequence_as(self._arg_structure, leaves)
        return tuple(args), dict(kwargs)

    @property
    def capture_info(self):
        """Whether the replay runs from a captured CUDA graph (`jit_compile=True`), and if not,
        why: {"captured", "reason", "captures", "graph_launches", "copies"}, or None when
        capture is off (tapegpu/function/capture.py)."""
        return None if self._capture is None else dict(self._capture.info)

    @property
    def peak_live_values(self):
        """The most arrays the replay holds at once (inputs and constants included)."""
        return self._plan.peak_live

    def __call__(self, *args, **kwargs):
        return self.function._call_concrete(self, args, kwargs)

    def _replay(self, tensors):
        """The outputs (flattened) of one replay on the argument tensors."""
        if _thread.recorders:
            return self._run_ops(tensors)
        arrays = [t._data for t in tensors]
        arrays = _graph.replay(self._plan, arrays) if self._capture is None else \
            self._capture.run(arrays)
        meta = self.graph.meta
        outs = []
        for (kind, v), a in zip(self.graph.outputs, arrays):
            if kind == "v":
                a = np.asarray(a) if isinstance(a, np.generic) else a
                outs.append(Tensor(a, meta[v][3]))
            else:
                outs.append(a)
        return outs

    def _run_ops(self, tensors):
        """The graph op by op through `registry.apply` and the variables' own methods, so that
        active tapes, accumulators and outer traces record it (a differentiable call)."""
        g = self.graph
        vals = {v: Tensor(a, g.meta[v][3]) for v, a in g.constants.items()}
        vals.update(zip(g.inputs, tensors))
        snapshot = [(var, var._value) for var in self._plan.assigned] if \
            self._plan.has_guards else None
        try:
            for n in g.nodes:
                ins = [vals[i] for i in n.ins]
                if n.kind == "op":
                    vals[n.out] = registry.apply(n.op, ins, n.params)
                elif n.kind == "read":
                    vals[n.out] = n.op._read()
                elif n.kind == "random":  # a draw (or a host value) made again at each call
                    vals[n.out] = Tensor(n.op(), g.meta[n.out][3])
                    for tracer in _thread.tracers:  # an outer trace draws at its calls too
                        tracer.record_random(n.op, vals[n.out])
                elif n.kind == "assign":
                    getattr(n.op, n.params)(ins[0])
                elif n.kind == "update":
                    for tracer in _thread.tracers:
                        tracer.on_update(n.op, ins, n.params)
                    n.op([t._data for t in ins], n.params)
                elif n.kind == "print":
                    for tracer in _thread.tracers:
                        tracer.on_print(n.op, ins)
                    stream, text = format_print(n.op, [t._dev.to_numpy(t._data) for t in ins])
                    stream.write(text)
                else:
                    _graph._check(n.op, ins[0].numpy(), _backend.NUMPY)
        except GuardMismatch:
            for var, value in snapshot:
                var._value = value
            raise
        return [vals[v] if k == "v" else v for k, v in g.outputs]

    def pretty_printed_signature(self):
        name = self.graph.name
        args, kwargs = self.structured_input_signature
        lines = [f"{name}({', '.join(self.function._arg_names(len(args), kwargs))})",
                 "  Args:"]
        names = self.function._leaf_names(self._arg_structure)
        for name, leaf in zip(names, self._key[1]):
            lines.append(f"    {name}: {_spec_text(leaf)}")
        return "\n".join(lines + returns_lines(self.graph))

    def __repr__(self):
        return f"<ConcreteFunction {self.graph.name}: {len(self.graph.nodes)} nodes>"


class _Entry:
    """One traced signature: its ConcreteFunctions per concrete argument shapes, each a list of
    variants that differ by their guards."""

    def __init__(self, key):
        self.key = key
        self.variants = {}


_run_eagerly = [False]  # run_functions_eagerly's setting, for every tg.function


def run_functions_eagerly(run_eagerly):
    """With True, every `tg.function` runs its Python function as plain eager code (no trace,
    no replay: breakpoints and prints work at every call), as TensorFlow's
    `tf.config.run_functions_eagerly`, for debugging; False restores tracing.

    >>> @tg.function
    ... def f(x):
    ...     print("running")
    ...     return x + 1
    >>> tg.config.run_functions_eagerly(True)
    >>> float(f(tg.constant(1.0))), float(f(tg.constant(1.0)))
    running
    running
    (2.0, 2.0)
    >>> tg.config.run_functions_eagerly(False)
    >>> tg.config.functions_run_eagerly()
    False
    """
    _run_eagerly[0] = bool(run_eagerly)


def functions_run_eagerly():
    """Whether `run_functions_eagerly(True)` is in effect.

    >>> tg.config.functions_run_eagerly()
    False
    """
    return _run_eagerly[0]


class Function:
    """A Python function compiled by tracing (see `function`)."""

    def __init__(self, python_function, input_signature=None, reduce_retracing=False,
                 jit_compile=None, autograph=True, instance=None, owner=None):
        if not callable(python_function):
            raise TypeError(f"tg.function: expected a callable, got {python_function!r}")
        functools.update_wrapper(self, python_function)
        self._python_function = python_function
        self._name = getattr(python_function, "__name__", type(python_function).__name__)
        if input_signature is not None:
            input_signature = tuple(input_signature)
            for s in nest.flatten(input_signature):
                if not isinstance(s, TensorSpec):
                    raise TypeError(f"tg.function {self._name}: input_signature must hold "
                                    f"tg.TensorSpec objects, got {s!r}")
        self.input_signature = input_signature
        self._reduce_retracing = bool(reduce_retracing)
        self._jit_compile = jit_compile
        self._autograph = autograph
        self._instance = instance
        self._target = python_function if instance is None else \
            types.MethodType(python_function, instance)
        self._signature = inspect.signature(self._target)
        self._entries = {}
        self._general = []  # relaxed keys (reduce_retracing) and the input_signature's key
        self._tracing_count = 0
        self._traced = False
        self._bound = {}

    # -- methods: one Function (and cache) per instance ---------------------------------------
    def __get__(self, obj, objtype=None):
        if obj is None or self._instance is not None:
            return self
        key = id(obj)
        f = self._bound.get(key)
        if f is None or f._instance is not obj:
            f = Function(self._python_function, self.input_signature, self._reduce_retracing,
                         self._jit_compile, self._autograph, instance=obj)
            self._bound[key] = f
        return f

    # -- calls ------------------------------------------------------------------------------------
    def _canonical(self, args, kwargs):
        try:
            ba = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"tg.function {self._name}: {e}") from None
        ba.apply_defaults()
        return [list(ba.args), dict(ba.kwargs)]

    def _arguments(self, args, kwargs):
        """(structure, converted leaves, key)."""
        if not args and not kwargs and not self._signature.parameters:
            # no arguments (a training step over captured data): the key is the device's
            device = _backend.current().name
            return [[], {}], [], ((_NO_ARGS_TREEDEF, device), ())
        structure = self._canonical(args, kwargs)
        leaves = nest.flatten(structure)
        if self.input_signature is not None:
            leaves = self._check_signature(structure)
        else:
            leaves = [convert_to_tensor(x) if isinstance(x, np.ndarray) else x for x in leaves]
        key = ((_treedef(structure), _backend.current().name),
               tuple(_leaf_key(x, self._name) for x in leaves))
        return structure, leaves, key

    def _check_signature(self, structure):
        args, kwargs = structure
        sig = self.input_signature
        if kwargs or len(args) != len(sig):
            raise InputSignatureError(
                f"tg.function {self._name}: called with {len(args)} positional and "
                f"{len(kwargs)} keyword arguments, but its input_signature has {len(sig)} "
                f"specs")
        leaves = []
        for i, (a, s) in enumerate(zip(args, sig)):
            if _treedef(a) != _treedef(s):
                raise InputSignatureError(f"tg.function {self._name}: argument {i} ({a!r}) does "
                                          f"not have the structure of its spec {s!r}")
            for x, spec in zip(nest.flatten(a), nest.flatten(s)):
                if not isinstance(x, Tensor):
                    try:
                        x = convert_to_tensor(x._read() if isinstance(x, Variable) else x,
                                              dtype=spec.dtype)
                    except (TypeError, ValueError) as e:
                        raise InputSignatureError(
                            f"tg.function {self._name}: argument {i} cannot be converted to "
                            f"{spec}: {e}") from None
                if x.dtype != spec.dtype:
                    raise InputSignatureError(
                        f"tg.function {self._name}: argument {i} has dtype {x.dtype.name}, "
                        f"incompatible with the input_signature's {spec}")
                if not spec.is_compatible_with(x):
                    raise InputSignatureError(
                        f"tg.function {self._name}: argument {i} has shape {tuple(x.shape)}, "
                        f"incompatible with the input_signature's {spec}")
                leaves.append(x)
        return leaves

    def _signature_key(self, key):
        """The key of the trace that serves `key`: itself, a relaxed key that matches it, the
        input_signature's, or a new relaxed key (reduce_retracing)."""
        if self.input_signature is not None:
            specs = nest.flatten(self.input_signature)
            return (key[0], tuple(("T", s.shape, dtypes.np_dtype(s.dtype).name, k[3])
                                  for s, k in zip(specs, key[1])))
        if key in self._entries:
            return key
        for g in self._general:
            if _matches(g, key):
                return g
        if self._reduce_retracing:
            for k in list(self._entries):
                relaxed = _relax(k, key)
                if relaxed is not None and relaxed != k:
                    self._general.append(relaxed)
                    return relaxed
        return key

    def __call__(self, *args, **kwargs):
        if _run_eagerly[0]:
            return self._target(*args, **kwargs)
        structure, leaves, key = self._arguments(args, kwargs)
        skey = self._signature_key(key)
        entry = self._entries.get(skey)
        variants = entry.variants.get(key) if entry is not None else None
        tensors = [x for x in leaves if isinstance(x, Tensor)]
        if variants:
            for cf in variants:
                try:
                    outs = cf._replay(tensors)
                except GuardMismatch:
                    continue
                return nest.pack_sequence_as(cf.graph.structure, outs)
        cf, result = self._trace(structure, leaves, key, skey,
                                 counted=entry is None or bool(variants))
        n = len(self._entries[skey].variants[key])
        if n == GUARD_VARIANTS_WARNING:
            warnings.warn(
                f"tg.function {self._name}: {n} graphs for one input signature, one per value "
                f"of the tensors its Python control flow (if/while/for on a tensor, int(t), "
                f"float(t)) depends on; every new value is a retrace. Pass such values as "
                f"Python values, compute the condition with tg.where, or call the function "
                f"eagerly (docs/function.md, 'Python control flow on tensors')", stacklevel=2)
        return result

    def _call_concrete(self, cf, args, kwargs):
        structure, leaves, key = self._arguments(args, kwargs)
        if key != cf._key and not _matches(cf._key, key):
            raise InputSignatureError(f"ConcreteFunction {self._name}: arguments {key[1]} do "
                                      f"not match its signature {cf._key[1]}")
        if key != cf._concrete_key:  # another shape of a generic signature
            return self(*args, **kwargs)
        tensors = [x for x in leaves if isinstance(x, Tensor)]
        try:
            outs = cf._replay(tensors)
        except GuardMismatch:  # a value this trace did not see: the function decides
            return self(*args, **kwargs)
        return nest.pack_sequence_as(cf.graph.structure, outs)

    def _trace(self, structure, leaves, key, skey, counted):
        """Runs the Python function under a tracer; returns (ConcreteFunction, its result)."""
        entry = self._entries.get(skey)
        if entry is None:
            entry = self._entries[skey] = _Entry(skey)
        tracer = Tracer(self._name, forbid_guards=self.input_signature is not None,
                        may_create_variables=not self._traced)
        seen = set()
        call_leaves = []
        names = self._leaf_names(structure)
        with tracer:
            for x, name in zip(leaves, names):
                if isinstance(x, Tensor):
                    if x._uid in seen:  # the same tensor twice: two placeholders
                        x = Tensor(x._data, x._dev)
                    seen.add(x._uid)
                    tracer.placeholder(x, name)
                call_leaves.append(x)
            args, kwargs = nest.pack_sequence_as(structure, call_leaves)
            result = self._target(*args, **kwargs)
            result = tracer.finish(result, nest)
            graph = tracer.graph
        cf = ConcreteFunction(self, graph, skey, structure)
        cf._concrete_key = key
        entry.variants.setdefault(key, []).insert(0, cf)
        self._traced = True
        if counted:
            self._tracing_count += 1
        return cf, result

    def _leaf_names(self, structure):
        args, kwargs = structure
        params = list(self._signature.parameters)
        names = []
        for i, a in enumerate(args):
            base = params[i] if i < len(params) else f"arg{i}"
            n = len(nest.flatten(a))
            names += [base] if n == 1 and not nest.is_nested(a) else \
                [f"{base}_{j}" for j in range(n)]
        for k in sorted(kwargs):
            n = len(nest.flatten(kwargs[k]))
            names += [k] if not nest.is_nested(kwargs[k]) else [f"{k}_{j}" for j in range(n)]
        return names

    def _arg_names(self, n, kwargs):
        params = list(self._signature.parameters)
        return params[:n] + sorted(kwargs)

    # -- introspection (TensorFlow's names) ------------------------------------------------------
    def experimental_get_tracing_count(self):
        """How many times the Python function was traced (TensorFlow's count: new signatures
        and guard retraces; not the per-shape specializations of a generic signature)."""
        return self._tracing_count

    def get_concrete_function(self, *args, **kwargs):
        """The ConcreteFunction for these arguments, traced if needed. Tracing runs the
        function once on them (its side effects happen): pass the tensors it is for."""
        structure, leaves, key = self._arguments(args, kwargs)
        if any(isinstance(x, TensorSpec) for x in leaves):
            raise TypeError(f"tg.function {self._name}.get_concrete_function: pass example "
                            "tensors, not TensorSpecs (tapegpu traces by running the function)")
        skey = self._signature_key(key)
        entry = self._entries.get(skey)
        if entry is not None and entry.variants.get(key):
            return entry.variants[key][0]
        cf, _ = self._trace(structure, leaves, key, skey, counted=entry is None)
        return cf

    def pretty_printed_concrete_signatures(self):
        """Every ConcreteFunction's signature, as TensorFlow prints them."""
        out = []
        for entry in self._entries.values():
            for variants in entry.variants.values():
                out.append(variants[0].pretty_printed_signature())
        return "\n\n".join(out)

    def __repr__(self):
        return f"<tg.function {self._name}: {self._tracing_count} traces>"


def function(func=None, input_signature=None, reduce_retracing=False, jit_compile=None,
             autograph=True, experimental_compile=None, experimental_relax_shapes=None,
             experimental_implements=None, experimental_autograph_options=None,
             experimental_attributes=None, experimental_follow_type_hints=None):
    """Compiles a Python function by tracing it into a graph (TensorFlow's `tf.function`).

    The function runs once per new input signature (tensors by shape and dtype, other arguments
    by value) while its ops are recorded; later calls replay the recorded graph on arrays.
    Python side effects happen only when tracing; `tg.print` prints at every call. A decorator,
    with or without arguments, on functions and methods. See docs/function.md.

    `jit_compile`: None (default) replays with elementwise groups fused into generated
    kernels; False replays op by op; True also captures the replay on a GPU (`cuda`,
    `cuda_emu`) as one CUDA graph launched once per call, where the step allows it
    (`concrete.capture_info` says whether, and why not).

    >>> @tg.function
    ... def f(x):
    ...     return x * x + 1.0
    >>> float(f(tg.constant(2.0))), float(f(tg.constant(3.0))), f.experimental_get_tracing_count()
    (5.0, 10.0, 1)
    """
    # TF's deprecated spellings: experimental_compile is jit_compile, experimental_relax_shapes
    # is reduce_retracing; the other experimental_* arguments carry graph annotations tapegpu
    # has no use for (accepted, as TF accepts them)
    if experimental_compile is not None and jit_compile is None:
        jit_compile = experimental_compile
    if experimental_relax_shapes is not None and not reduce_retracing:
        reduce_retracing = bool(experimental_relax_shapes)

    def decorate(fn):
        return Function(fn, input_signature=input_signature, reduce_retracing=reduce_retracing,
                        jit_compile=jit_compile, autograph=autograph)
    return decorate if func is None else decorate(func)


def returns_lines(graph):
    """The "Returns:" part of a concrete function's `pretty_printed_signature`."""
    lines = ["  Returns:"]
    for kind, v in graph.outputs:
        if kind == "v":
            _, shape, dtype, _ = graph.meta[v]
            lines.append(f"    {dtype} Tensor, shape={shape}")
        else:
            lines.append(f"    {v!r}")
    return lines
