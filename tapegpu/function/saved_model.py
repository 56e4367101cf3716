"""`tg.saved_model.save` and `tg.saved_model.load` (TensorFlow's names): an object's variables
and the graphs of its `tg.function`s in one file, loadable without the object's Python code.

`save(obj, export_dir)` writes `<export_dir>/saved_model.npz`, a zip archive written and read
by tg.train's checkpoint helpers (atomic write, `index.json` first, one `.npy` member per array,
`allow_pickle=False`). Its index holds the variables by their object paths (as checkpoints
name them), and each concrete function as a JSON graph: values (shape, dtype), inputs,
constants (arrays), nodes (registry op names with their params in a small tagged encoding,
variable reads and assignments by path, guards, prints) and the outputs with their structure.
`load(export_dir)` rebuilds the variables on the current device and the graphs as replayable
plans; registry ops are looked up by name. The format is described in docs/function.md
("Saving").
"""
import inspect
import math
import os
import sys

import warnings

import numpy as np

from .. import backends as _backend
from .._version import __version__
from ..core import dtypes, files, nest
from ..core.tensor import Tensor, Variable, convert_to_tensor
from ..models.module import Module, _sorted_keys
from ..ops import registry
from ..train import checkpoint as _ckpt
from .api import ConcreteFunction, Function, InputSignatureError, TensorSpec, returns_lines
from .graph import Graph, GuardMismatch, Node, Plan

__all__ = ["save", "load", "SaveOptions", "LoadOptions"]

FORMAT = "tapegpu-saved-model"
VERSION = 1
FILE = "saved_model.npz"
_CONTAINERS = (list, tuple, dict)
_P = inspect.Parameter
_PARAM_KINDS = {_P.POSITIONAL_ONLY: "positional", _P.POSITIONAL_OR_KEYWORD: "positional",
                _P.VAR_POSITIONAL: "var_positional", _P.KEYWORD_ONLY: "keyword_only",
                _P.VAR_KEYWORD: "var_keyword"}


# -- the object's variables and functions -------------------------------------------------------
class _Objects:
    """What `save` finds from the root: `variables` {path: Variable} (each once, at its first
    path, as tg.train.Checkpoint names them), `paths` {id(variable): path}, `nodes` [(path,
    kind, type name)] of the containers, `functions` {attribute name: tg.function}."""

    def __init__(self, root):
        self.variables, self.paths, self.nodes = {}, {}, []
        self._seen = {id(root)}
        self.functions = {}
        for name in sorted(dir(type(root))):
            if isinstance(getattr(type(root), name, None), Function):
                self.functions[name] = getattr(root, name)
        self._children(root, "")

    def _children(self, obj, path):
        if isinstance(obj, (list, tuple)):
            items = list(enumerate(obj))
        elif isinstance(obj, dict):
            items = [(k, obj[k]) for k in _sorted_keys(obj)]
        else:
            ignored = getattr(obj, "_IGNORED_ATTRIBUTES", ())
            items = [(k, v) for k, v in vars(obj).items() if k not in ignored and k != "_name"]
            if not path:
                for k, v in items:
                    if isinstance(v, (Function, ConcreteFunction)):
                        self.functions.setdefault(k, v)
        for key, child in items:
            if isinstance(child, (Variable, Module) + _CONTAINERS):
                self._visit(child, _ckpt._join(path, _ckpt._component(key)))

    def _visit(self, obj, path):
        if id(obj) in self._seen:
            return
        self._seen.add(id(obj))
        if isinstance(obj, Variable):
            self.variables[path] = obj
            self.paths[id(obj)] = path
            return
        kind = "list" if isinstance(obj, list) else "tuple" if isinstance(obj, tuple) else \
            "dict" if isinstance(obj, dict) else "module"
        self.nodes.append((path, kind, type(obj).__name__))
        self._children(obj, path)


def _concretes(f, where):
    """The ConcreteFunctions of a tg.function (each traced signature, concrete shape and guard
    variant) or a ConcreteFunction itself."""
    if isinstance(f, ConcreteFunction):
        return [f]
    if not isinstance(f, Function):
        raise TypeError(f"tg.saved_model.save: {where} must be a tg.function or a "
                        f"ConcreteFunction, got {type(f).__name__}")
    out = [cf for entry in f._entries.values() for variants in entry.variants.values()
           for cf in variants]
    if not out:
        raise ValueError(f"tg.saved_model.save: tg.function {f._name} ({where}) has not been "
                         "traced, so it has no graph to save; call it once on arguments of "
                         "each shape to export (tapegpu traces by running the function)")
    return out


def _has_graphs(f):
    """Whether a tg.function has a concrete function (a trace that raised leaves none)."""
    return any(variants for entry in f._entries.values() for variants in entry.variants.values())


def _trace_signature(f, where, objects):
    """Traces a tg.function that has an `input_signature` of known shapes but was never
    called, as TF traces it at save. tapegpu traces by running the function, so it runs once
    on zeros of the signature's shapes, and every variable reachable from the saved object
    gets its value back afterwards (a traced `assign` changes nothing). A signature with
    unknown dimensions is not traced (tapegpu's graphs are concrete in their shapes, so no
    one trace serves it). Returns {where: why} for what the caller should hear: a signature
    left untraced, or a trace that failed (saved without a graph)."""
    specs = nest.flatten(f.input_signature)
    if any(s.shape is None or None in s.shape for s in specs):
        return {where: f"{f._name} was never called and its input_signature "
                       f"{list(f.input_signature)} has unknown dimensions, so it is saved "
                       f"without graphs (tapegpu's graphs are concrete in their shapes): call "
                       f"it on each shape to export before saving"}
    examples = [convert_to_tensor(np.zeros(s.shape, dtype=dtypes.np_dtype(s.dtype)))
                for s in specs]
    args = nest.pack_sequence_as(list(f.input_signature), examples)
    kept = [(v, v._value) for v in objects.variables.values()]
    try:
        with np.errstate(all="ignore"):
            f.get_concrete_function(*args)
    except Exception as e:  # noqa: BLE001 (any error of the user's function: reported)
        return {where: f"tracing {f._name} on its input_signature raised "
                       f"{type(e).__name__}: {e}; it is saved without graphs"}
    finally:
        for v, value in kept:
            v._value = value
    return {}


# -- the tagged encoding of params and Python values ---------------------------------------------
class _Leaf:
    """A placeholder leaf of an encoded structure."""

    def __repr__(self):
        return "<leaf>"


LEAF = _Leaf()


class _Unsupported(Exception):
    pass


class _Encoder:
    """JSON for params and Python values; arrays go to `arrays` as [(path, array)]."""

    def __init__(self, arrays, prefix):
        self.arrays, self.prefix = arrays, prefix

    def array(self, a):
        a = np.asarray(a)
        if a.dtype.kind not in _ckpt._DTYPE_KINDS:
            raise _Unsupported(f"an array of dtype {a.dtype}")
        path = f"{self.prefix}/a{len(self.arrays)}"
        self.arrays.append((path, np.array(a, order="C")))
        return path

    def __call__(self, x):
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int) and type(x) is int:
            return x
        if type(x) is float:
            return x if math.isfinite(x) else {"type": "float", "value": repr(x)}
        if x is LEAF:
            return {"type": "leaf"}
        if x is Ellipsis:
            return {"type": "ellipsis"}
        if type(x) is tuple:
            return {"type": "tuple", "items": [self(v) for v in x]}
        if type(x) is list:
            return [self(v) for v in x]
        if type(x) is dict:
            return {"type": "dict", "items": [[self(k), self(v)] for k, v in x.items()]}
        if type(x) is slice:
            return {"type": "slice", "start": self(x.start), "stop": self(x.stop),
                    "step": self(x.step)}
        if type(x) is complex:
            return {"type": "complex", "real": self(x.real), "imag": self(x.imag)}
        if isinstance(x, dtypes.DType):
            return {"type": "tg_dtype", "name": x.name}
        if isinstance(x, np.dtype):
            return {"type": "dtype", "name": x.name}
        if isinstance(x, type) and issubclass(x, np.generic):
            return {"type": "scalar_type", "name": np.dtype(x).name}
        if isinstance(x, np.generic):
            return {"type": "scalar", "path": self.array(x)}
        if isinstance(x, np.ndarray):
            return {"type": "array", "path": self.array(x)}
        if hasattr(x, "__cuda_array_interface__"):  # a GPU array param (an index): copied out
            return {"type": "array", "path": self.array(x.get())}
        raise _Unsupported(f"a value of type {type(x).__name__} ({x!r:.80})")


class _Decoder:
    def __init__(self, arrays, fail):
        self.arrays, self.fail = arrays, fail

    def __call__(self, x):
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, list):
            return [self(v) for v in x]
        if not isinstance(x, dict):
            self.fail(f"a malformed value {str(x)[:100]}")
        t = x.get("type")
        try:
            if t == "leaf":
                return LEAF
            if t == "ellipsis":
                return Ellipsis
            if t == "float":
                return float(x["value"])
            if t == "tuple":
                return tuple(self(v) for v in x["items"])
            if t == "dict":
                return {self(k): self(v) for k, v in x["items"]}
            if t == "slice":
                return slice(self(x["start"]), self(x["stop"]), self(x["step"]))
            if t == "complex":
                return complex(self(x["real"]), self(x["imag"]))
            if t == "tg_dtype":
                return dtypes.as_dtype(x["name"])
            if t in ("dtype", "scalar_type") and not _is_dtype(x["name"]):
                raise ValueError("not a bool, integer, float or complex dtype")
            if t == "dtype":
                return np.dtype(x["name"])
            if t == "scalar_type":
                return np.dtype(x["name"]).type
            if t == "scalar":
                return self.arrays[x["path"]][()]
            if t == "array":
                return self.arrays[x["path"]].copy()
        except (KeyError, TypeError, ValueError) as e:
            self.fail(f"a malformed value {str(x)[:100]} ({type(e).__name__}: {e})")
        self.fail(f"a value of unknown type {t!r}")


# -- save ------------------------------------------------------------------------------------------
def _streams():
    return {"stdout": sys.stdout, "stderr": sys.stderr}


def _encode_graph(cf, label, prefix, objects, arrays):
    """The JSON of one ConcreteFunction's graph (its arrays appended to `arrays`)."""
    g = cf.graph
    fname = f"{label} (tg.function {g.name})"
    if g.opaque:
        raise ValueError(f"tg.saved_model.save: {fname} cannot be saved: its graph holds "
                         f"{g.opaque[0]!r}, a per-call op (custom_gradient, recompute_grad, "
                         f"numpy_function or a random draw) that is not a registry op, so a "
                         f"loaded graph could not reproduce it (its gradient, or its values for "
                         f"new inputs)")
    enc = _Encoder(arrays, prefix)

    def node_error(n, what):
        text = str(g).splitlines()[1 + len(g.constants) + g.nodes.index(n)].strip()
        return ValueError(f"tg.saved_model.save: {fname} cannot be saved: node `{text}` "
                          f"{what}")

    def var_path(n, var):
        path = objects.paths.get(id(var))
        if path is None:
            raise node_error(n, f"uses variable {var.name!r}, which is not reachable from the "
                                f"saved object's attributes (TensorFlow's untracked resource); "
                                f"assign it to an attribute of the object")
        return path

    nodes = []
    for n in g.nodes:
        d = {"kind": n.kind, "ins": list(n.ins)}
        if n.kind == "op":
            if not n.op.registered:
                raise node_error(n, f"applies op {n.op.name!r}, which is not a registry op")
            try:
                params = {k: enc(v) for k, v in n.params.items()}
            except _Unsupported as e:
                raise node_error(n, f"has a param that cannot be saved: {e}") from None
            d.update(op=n.op.name, params=params, out=n.out)
        elif n.kind == "read":
            d.update(variable=var_path(n, n.op), out=n.out)
        elif n.kind == "assign":
            d.update(variable=var_path(n, n.op), mode=n.params)
        elif n.kind == "guard":
            d.update(expected=enc.array(n.op))
        elif n.kind == "print":
            parts, sep, end, stream = n.op
            names = [k for k, s in _streams().items() if s is stream]
            if stream is not None and not names:
                raise node_error(n, f"prints to {stream!r}; only sys.stdout and sys.stderr "
                                    "(the default) can be saved")
            d.update(parts=[[k, t] for k, t in parts], sep=sep, end=end,
                     stream=names[0] if names else None)
        else:  # update
            raise node_error(n, "is an optimizer update (apply_gradients), which runs the "
                                "optimizer's Python code; save the model's inference "
                                "functions, and the training state with tg.train.Checkpoint")
        nodes.append(d)
    try:
        outputs = [["v", v] if k == "v" else ["py", enc(v)] for k, v in g.outputs]
        structure = enc(nest.pack_sequence_as(g.structure, [LEAF] * len(g.outputs)))
        arg_structure = enc(nest.pack_sequence_as(cf._arg_structure,
                                                  [LEAF] * len(cf._concrete_key[1])))
        args = []
        for k, s in zip(cf._concrete_key[1], cf._key[1]):
            if k[0] == "T":
                args.append({"kind": "tensor", "shape": list(k[1]), "dtype": k[2],
                             "spec_shape": list(s[1])})
            elif k[0] == "V":
                raise _Unsupported("a tg.Variable argument (pass its value as a tensor)")
            else:
                args.append({"kind": "python", "value": enc(k[2])})
    except _Unsupported as e:
        raise ValueError(f"tg.saved_model.save: {fname} cannot be saved: its arguments or "
                         f"outputs hold {e}") from None
    constants = []
    for v, a in g.constants.items():
        try:
            constants.append([v, enc.array(_ckpt._host(a, g.meta[v][3]))])
        except _Unsupported as e:
            raise ValueError(f"tg.saved_model.save: {fname} cannot be saved: constant %{v} is "
                             f"{e}") from None
    fn = cf.function
    params = [[name, _PARAM_KINDS[q.kind]] for name, q in fn._signature.parameters.items()]
    return {"name": g.name, "values": [[lab, list(shape), dt] for lab, shape, dt, _ in g.meta],
            "inputs": list(g.inputs), "input_names": list(g.input_names),
            "constants": constants, "nodes": nodes, "outputs": outputs,
            "structure": structure, "arg_structure": arg_structure, "args": args,
            "parameters": params, "input_signature": fn.input_signature is not None,
            "traced_nodes": g.traced_nodes, "merged": g.merged, "dropped": g.dropped}


class SaveOptions:
    """TensorFlow's `tf.saved_model.SaveOptions`, accepted by `save(..., options=)`. Its
    fields change nothing in tapegpu's format but one: `experimental_custom_gradients` (TF's
    default True) cannot be honoured, since a custom gradient is Python code; a graph holding
    one is refused with a ValueError naming it, whatever the option."""

    def __init__(self, namespace_whitelist=None, save_debug_info=False, function_aliases=None,
                 experimental_debug_stripper=False, experimental_io_device=None,
                 experimental_variable_policy=None, experimental_custom_gradients=True,
                 experimental_image_format=False, experimental_skip_saver=False,
                 experimental_sharding_callback=None, extra_tags=None):
        self.namespace_whitelist = namespace_whitelist
        self.save_debug_info = bool(save_debug_info)
        self.function_aliases = dict(function_aliases or {})
        self.experimental_custom_gradients = bool(experimental_custom_gradients)
        self.experimental_io_device = experimental_io_device
        self.experimental_variable_policy = experimental_variable_policy
        self.extra_tags = extra_tags


class LoadOptions:
    """TensorFlow's `tf.saved_model.LoadOptions`, accepted by `load(..., options=)`: its
    fields (I/O device, allowing partial checkpoints, ...) change nothing here."""

    def __init__(self, allow_partial_checkpoint=False, experimental_io_device=None,
                 experimental_skip_checkpoint=False, experimental_variable_policy=None,
                 experimental_load_function_aliases=False):
        self.allow_partial_checkpoint = bool(allow_partial_checkpoint)
        self.experimental_io_device = experimental_io_device


def _check_options(options, cls, caller):
    if options is not None and not isinstance(options, cls):
        raise TypeError(f"{caller}: options must be a tg.saved_model.{cls.__name__}, got "
                        f"{options!r}")


def save(obj, export_dir, signatures=None, options=None):
    """Saves `obj`'s variables and the graphs of its `tg.function`s to `export_dir` (TensorFlow's
    `tf.saved_model.save`), as `<export_dir>/saved_model.npz`; `tg.saved_model.load` rebuilds
    them without `obj`'s Python code.

    Saved: the variables reachable from `obj`'s attributes (modules, layers, lists, tuples and
    dicts, each at its path, as tg.train.Checkpoint names them); every traced concrete function
    of each `tg.function` attribute or method of `obj` (call a function on each input shape you
    export: tapegpu's graphs are concrete in their shapes); and `signatures`: a tg.function, a
    ConcreteFunction, or a dict {name: either} (a single one is named "serving_default").
    A tg.function with an `input_signature` of known shapes that was never called is traced
    here, as TF does: it runs once on zeros of those shapes, and the variables reachable from
    `obj` are given their values back (one with unknown dimensions is saved without graphs,
    with a warning).
    A graph that cannot be saved (optimizer updates, custom_gradient, recompute_grad or
    numpy_function, a variable not reachable from `obj`) raises ValueError naming the function
    and the node. See docs/function.md ("Saving").

    >>> import tempfile
    >>> class Scale(tg.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = tg.Variable(3.0)
    ...     @tg.function(input_signature=[tg.TensorSpec([2], tg.float32)])
    ...     def __call__(self, x):
    ...         return x * self.w
    >>> m = Scale()
    >>> _ = m(tg.constant([1.0, 2.0]))
    >>> tmp = tempfile.TemporaryDirectory()
    >>> tg.saved_model.save(m, tmp.name)
    >>> loaded = tg.saved_model.load(tmp.name)
    >>> loaded(tg.constant([1.0, 2.0])).numpy(), float(loaded.w)
    (array([3., 6.], dtype=float32), 3.0)
    >>> tmp.cleanup()
    """
    if isinstance(obj, (Variable, Tensor) + _CONTAINERS) or not hasattr(obj, "__dict__"):
        raise TypeError(f"tg.saved_model.save: obj must be an object whose attributes hold its "
                        f"variables and functions (a tg.Module, a layer), got "
                        f"{type(obj).__name__}")
    _check_options(options, SaveOptions, "tg.saved_model.save")
    objects = _Objects(obj)
    if signatures is None:
        signatures = {}
    elif not isinstance(signatures, dict):
        signatures = {"serving_default": signatures}
    for k in signatures:
        if not isinstance(k, str):
            raise TypeError(f"tg.saved_model.save: signature names must be strings, got {k!r}")
    arrays = []
    index_fns = {}
    graphs = []
    graph_ids = {}

    def graph_ids_of(f, where):
        ids = []
        for cf in _concretes(f, where):
            if id(cf) not in graph_ids:
                graph_ids[id(cf)] = len(graphs)
                graphs.append(_encode_graph(cf, where, f"graphs/{len(graphs)}", objects,
                                            arrays))
            ids.append(graph_ids[id(cf)])
        return ids

    # functions with an input_signature that were never called: traced now, as TF traces
    # them at save (the signature is the shape to export)
    probed = {}
    for where, f in [(f"attribute {n!r}", f) for n, f in objects.functions.items()] + \
            [(f"signature {n!r}", f) for n, f in signatures.items()]:
        if isinstance(f, Function) and not _has_graphs(f) and f.input_signature is not None:
            probed.update(_trace_signature(f, where, objects))
    untraced = []
    for name, f in objects.functions.items():
        if isinstance(f, Function) and not _has_graphs(f):  # never traced: no graph (TF
            untraced.append(name)                  # saves it without concrete functions too)
            index_fns[name] = []
            continue
        index_fns[name] = graph_ids_of(f, f"attribute {name!r}")
    untraced = [n for n in untraced if f"attribute {n!r}" not in probed]
    if untraced:
        warnings.warn(f"tg.saved_model.save: {untraced} were never traced, so they are saved "
                      f"without graphs (the loaded ones raise when called); call each once on "
                      f"arguments of each shape to export, or give it an input_signature",
                      UserWarning, stacklevel=2)
    if probed:
        warnings.warn("tg.saved_model.save: " + "; ".join(
            f"{where}: {why}" for where, why in probed.items()), UserWarning, stacklevel=2)
    index_sigs = {name: graph_ids_of(f, f"signature {name!r}") for name, f in signatures.items()}
    values, var_arrays = [], []
    for path, var in objects.variables.items():
        arr = _ckpt._host(var._value._data, var._value._dev)
        values.append({"path": "variables/" + path, "kind": "variable", "dtype": arr.dtype.name,
                       "shape": list(arr.shape), "name": var.name,
                       "trainable": var.trainable})
        var_arrays.append(("variables/" + path, arr))
    for path, arr in arrays:
        values.append({"path": path, "kind": "constant", "dtype": arr.dtype.name,
                       "shape": list(arr.shape)})
    arrays = var_arrays + arrays
    index = {"format": FORMAT, "version": VERSION, "tapegpu_version": __version__,
             "values": values,
             "objects": [{"path": p, "kind": k, "type": t} for p, k, t in objects.nodes],
             "functions": index_fns, "signatures": index_sigs, "graphs": graphs}
    _ckpt._write_checkpoint(os.path.join(os.fspath(export_dir), FILE), index, arrays)


# -- load ------------------------------------------------------------------------------------------
class _Reader(_ckpt._Reader):
    """A SavedModel file opened for reading (tg.train's checkpoint reader, with this format's
    name, version and kinds of values, and the index's functions, signatures and graphs)."""

    format, version, kinds, what = FORMAT, VERSION, ("variable", "constant"), "SavedModel"
    missing_hint = "pass the directory tg.saved_model.save wrote"

    def _validate(self, index):
        index = super()._validate(index)
        graphs = index.get("graphs")
        if not isinstance(graphs, list) or not isinstance(index.get("objects"), list):
            self._fail(f"its {_ckpt.INDEX} has no list of graphs or of objects")
        for k in ("functions", "signatures"):
            table = index.get(k)
            if not isinstance(table, dict) or not all(
                    isinstance(ids, list) and all(type(i) is int and 0 <= i < len(graphs)
                                                  for i in ids) for ids in table.values()):
                self._fail(f"its {_ckpt.INDEX} has no valid {k} (names to lists of graph "
                           f"numbers below {len(graphs)})")
        return index


class _Loaded(Module):
    """An object `tg.saved_model.load` returns: its variables as attributes at their saved
    paths (modules as objects like this one, lists, tuples, dicts), its functions as callable
    attributes, `signatures`, `variables` and `trainable_variables`."""

    _IGNORED_ATTRIBUTES = frozenset({"signatures", "_variables", "_saved_type"})

    def __init__(self, saved_type):
        super().__init__(name=None)
        self._saved_type = saved_type

    @property
    def variables(self):
        if "_variables" in vars(self):
            return list(self._variables)
        return super().variables

    def __call__(self, *args, **kwargs):
        f = vars(self).get("__call__")
        if f is None:
            raise TypeError(f"tg.saved_model: the loaded {self._saved_type} object is not "
                            "callable (no tg.function `__call__` was saved)")
        return f(*args, **kwargs)

    def __repr__(self):
        return f"<tg.saved_model loaded {self._saved_type}: {len(self.variables)} variables>"


class _LoadedConcreteFunction(ConcreteFunction):
    """One saved graph, rebuilt: `.graph` (printable), `structured_input_signature`; calling
    it replays the graph (op by op through the registry under a tape, so it is
    differentiable)."""

    def __init__(self, graph, spec, dev):
        self.function = None
        self.graph = graph
        self._made_plan = None
        self._spec = spec
        self._dev = dev

    @property
    def _plan(self):
        """The replay plan, made at the first call, not at load: making it runs the ops on
        constants alone (constant folding), whose results the file's params size."""
        if self._made_plan is None:
            self._made_plan = Plan(self.graph)
        return self._made_plan

    @property
    def structured_input_signature(self):
        leaves = [TensorSpec(a["spec_shape"], a["dtype"]) if a["kind"] == "tensor" else
                  a["value"] for a in self._spec["args"]]
        args, kwargs = nest.pack_sequence_as(self._spec["arg_structure"], leaves)
        return tuple(args), dict(kwargs)

    def _bind(self, args, kwargs):
        """The call's flattened leaves as this graph takes them, or None if they do not
        match; tensors converted to tensors on the loaded device. Arguments are bound as the
        saved function's Python signature binds them; an omitted argument takes the Python
        value the graph was traced with (a default)."""
        spec = self._spec
        saved_args, saved_kwargs = spec["arg_structure"]
        positional = [n for n, kind in spec["parameters"] if kind == "positional"]
        var_positional = any(kind == "var_positional" for _, kind in spec["parameters"])
        if len(args) > len(saved_args) or (len(args) > len(positional) and not var_positional):
            return None
        kwargs = dict(kwargs)
        flat_specs = iter(spec["args"])
        leaves = []
        parts = [(i, part) for i, part in enumerate(saved_args)] + \
            [(k, saved_kwargs[k]) for k in sorted(saved_kwargs)]
        for key, part in parts:
            specs = [next(flat_specs) for _ in nest.flatten(part)]
            if isinstance(key, int):
                name = positional[key] if key < len(positional) else None
                given = key < len(args) or name in kwargs
                value = args[key] if key < len(args) else kwargs.pop(name, None)
            else:
                given, value = key in kwargs, kwargs.pop(key, None)
            if not given:
                if any(s["kind"] != "python" for s in specs):
                    return None
                leaves += [s["value"] for s in specs]
                continue
            if len(specs) == 1 and specs[0]["kind"] == "tensor" and not nest.is_nested(part) \
                    and isinstance(value, (list, tuple)):
                try:  # a nested list of Python numbers for a tensor, as TensorFlow's
                    value = convert_to_tensor(value)  # loaded functions take (no cast after)
                except (TypeError, ValueError):
                    return None
            try:
                nest.assert_same_structure(value, part, check_types=False)
            except (ValueError, TypeError):
                return None
            for x, s in zip(nest.flatten(value), specs):
                x = self._leaf(x, s)
                if x is _NO_MATCH:
                    return None
                leaves.append(x)
        return None if kwargs else leaves

    def _leaf(self, x, s):
        if s["kind"] == "python":
            return x if type(x) is type(s["value"]) and x == s["value"] else _NO_MATCH
        if isinstance(x, Variable):
            x = x._read()
        if not isinstance(x, Tensor):
            if not isinstance(x, np.ndarray) and not self._spec["input_signature"]:
                return _NO_MATCH
            try:
                x = convert_to_tensor(x, dtype=s["dtype"] if self._spec["input_signature"]
                                      else None)
            except (TypeError, ValueError):
                return _NO_MATCH
        if x._data.dtype.name != s["dtype"] or list(x._data.shape) != s["shape"]:
            return _NO_MATCH
        if x._dev is not self._dev:
            raise ValueError(f"tg.saved_model: {self.graph.name} was loaded on "
                             f"{self._dev.device} and runs there, but an argument is on "
                             f"{x._dev.device}; load it inside `with tg.device(...)` for that "
                             "device, or copy the argument (tg.copy_to)")
        return x

    def _run(self, leaves):
        tensors = [x for x in leaves if isinstance(x, Tensor)]
        outs = self._replay(tensors)
        return nest.pack_sequence_as(self._spec["structure"], outs)

    def __call__(self, *args, **kwargs):
        leaves = self._bind(args, kwargs)
        if leaves is None:
            raise InputSignatureError(_mismatch(self.graph.name, [self], args, kwargs))
        return self._run(leaves)

    def pretty_printed_signature(self):
        args, kwargs = self.structured_input_signature
        positional = [n for n, _ in self._spec["parameters"]][:len(args)]
        lines = [f"{self.graph.name}({', '.join(positional)}"
                 f"{''.join(', ' + k for k in sorted(kwargs))})", "  Args:"]
        names = iter(self.graph.input_names)
        for a in self._spec["args"]:
            if a["kind"] == "tensor":
                lines.append(f"    {next(names)}: {a['dtype']} Tensor, shape="
                             f"{tuple(a['shape'])}")
            else:
                lines.append(f"    {a['value']!r}")
        return "\n".join(lines + returns_lines(self.graph))

    def __repr__(self):
        return f"<loaded ConcreteFunction {self.graph.name}: {len(self.graph.nodes)} nodes>"


_NO_MATCH = object()


def _mismatch(name, concretes, args, kwargs):
    described = [type(a).__name__ if not isinstance(a, (Tensor, np.ndarray)) else
                 f"{a.dtype} {tuple(a.shape)}" for a in list(args) + list(kwargs.values())]
    sigs = "\n".join(c.pretty_printed_signature() for c in concretes)
    return (f"tg.saved_model: could not find a matching concrete function of {name} for the "
            f"arguments ({', '.join(described)}). A loaded function replays only the graphs "
            f"that were saved (each for the shapes it was traced on); the saved ones are:\n"
            f"{sigs}")


class _LoadedFunction:
    """A saved tg.function: calling it runs the first saved graph whose signature matches the
    arguments (and whose guards hold). `concrete_functions` lists them."""

    def __init__(self, name, concretes):
        self.__name__ = self._name = name
        self.concrete_functions = list(concretes)

    def __call__(self, *args, **kwargs):
        if not self.concrete_functions:
            raise ValueError(f"tg.saved_model: {self._name} was saved without graphs: it had "
                             f"not been traced when the model was saved (call it before "
                             f"tg.saved_model.save)")
        matched = False
        for cf in self.concrete_functions:
            leaves = cf._bind(args, kwargs)
            if leaves is None:
                continue
            matched = True
            try:
                return cf._run(leaves)
            except GuardMismatch:
                continue
        if matched:
            raise ValueError(f"tg.saved_model: {self._name}: the saved graphs for these "
                             "argument shapes were traced for other values of the tensors "
                             "their Python control flow depends on (their guards failed), and "
                             "a loaded function cannot trace again")
        raise InputSignatureError(_mismatch(self._name, self.concrete_functions, args, kwargs))

    def pretty_printed_concrete_signatures(self):
        return "\n\n".join(cf.pretty_printed_signature() for cf in self.concrete_functions)

    def __repr__(self):
        return f"<loaded tg.function {self._name}: {len(self.concrete_functions)} graphs>"


_NODE_KINDS = ("op", "read", "assign", "guard", "print")
_MAX_RANK = 64  # numpy's


def _is_shape(x, unknown=False):
    return isinstance(x, list) and len(x) <= _MAX_RANK and all(
        (type(d) is int and d >= 0) or (unknown and d is None) for d in x)


def _is_dtype(name):
    try:
        return isinstance(name, str) and np.dtype(name).kind in files.PLAIN_KINDS and \
            np.dtype(name).name == name
    except (TypeError, ValueError):
        return False


def _check_graph(d, arrays, variables, fail):
    """Fails, naming the file, unless the JSON of a graph has the fields and types save
    writes, every value id is one of its values, every variable path one of the loaded
    variables and every array path one of the file's arrays: nothing from the index is used as
    a position or a name before this."""
    name = d.get("name") if isinstance(d, dict) else None
    if not isinstance(name, str):
        fail(f"a graph is malformed: {str(d)[:100]} is not an object with a name")
    bad = _complaint(name, fail)
    values = d.get("values")
    if not isinstance(values, list) or not all(
            isinstance(v, list) and len(v) == 3 and isinstance(v[0], str) and _is_shape(v[1])
            and _is_dtype(v[2]) for v in values):
        bad("values", "are not [label, shape, dtype name] triples")
    n = len(values)

    def is_id(v):
        return type(v) is int and 0 <= v < n
    inputs, names = d.get("inputs"), d.get("input_names")
    if not isinstance(inputs, list) or not all(map(is_id, inputs)):
        bad("inputs", f"are not value ids (below {n})")
    if not isinstance(names, list) or len(names) != len(inputs) or \
            not all(isinstance(x, str) for x in names):
        bad("input_names", "are not a name per input")
    for c in _listed(d, "constants", bad):
        if not (isinstance(c, list) and len(c) == 2 and is_id(c[0]) and _names(c[1], arrays) and
                list(arrays[c[1]].shape) == values[c[0]][1] and
                arrays[c[1]].dtype.name == values[c[0]][2]):
            bad("constants", f"hold {str(c)[:100]}, not [value id, path of an array of the "
                             "value's shape and dtype]")
    for node in _listed(d, "nodes", bad):
        what = _node_problem(node, is_id, variables, arrays)
        if what:
            bad("nodes", f"hold {str(node)[:100]}: {what}")
    for out in _listed(d, "outputs", bad):
        if not (isinstance(out, list) and len(out) == 2 and
                (out[0] == "v" and is_id(out[1]) or out[0] == "py")):
            bad("outputs", f"hold {str(out)[:100]}, not [\"v\", value id] or [\"py\", value]")
    _check_arguments(d, len(inputs), bad)
    if not all(type(d.get(k)) is int for k in ("traced_nodes", "merged", "dropped")):
        fail(f"function {name!r} is malformed: its traced_nodes, merged and dropped counts "
             "are not all integers")


def _complaint(name, fail):
    """`bad(field, what)`: fails naming the function and the field of its JSON."""
    def bad(field, what):
        fail(f"function {name!r} is malformed: its {field!r} {what}")
    return bad


def _names(x, table):
    """Whether `x` is a string key of `table` (a list from the file is not even hashable)."""
    return isinstance(x, str) and x in table


def _listed(d, field, bad):
    if not isinstance(d.get(field), list):
        bad(field, "are not a list")
    return d[field]


def _node_problem(node, is_id, variables, arrays):
    """What is wrong with a node's JSON, or None."""
    if not isinstance(node, dict) or node.get("kind") not in _NODE_KINDS:
        return f"the kind of node is not one of {_NODE_KINDS}"
    kind = node["kind"]
    if not isinstance(node.get("ins"), list) or not all(map(is_id, node["ins"])):
        return "its inputs are not value ids"
    if kind in ("op", "read") and not is_id(node.get("out")):
        return "its output is not a value id"
    if kind == "op" and not (isinstance(node.get("op"), str) and
                             isinstance(node.get("params"), dict)):
        return "an op node needs an op name and params"
    if kind in ("read", "assign") and not _names(node.get("variable"), variables):
        return "it uses no variable of the file"
    if kind == "assign" and node.get("mode") not in ("assign", "assign_add", "assign_sub"):
        return "an assignment is assign, assign_add or assign_sub"
    if kind == "guard" and not _names(node.get("expected"), arrays):
        return "a guard names no array of the file"
    if kind == "print" and not (
            isinstance(node.get("parts"), list) and all(
                isinstance(p, list) and len(p) == 2 and p[0] in ("t", "py") for p in node["parts"])
            and isinstance(node.get("sep"), str) and isinstance(node.get("end"), str)
            and node.get("stream") in (None, "stdout", "stderr")):
        return "a print has parts, sep, end and a stream (stdout, stderr or null)"
    return None


def _check_arguments(d, n_inputs, bad):
    tensors = 0
    for a in _listed(d, "args", bad):
        if isinstance(a, dict) and a.get("kind") == "tensor" and _is_shape(a.get("shape")) \
                and _is_dtype(a.get("dtype")) and _is_shape(a.get("spec_shape"), True) and \
                len(a["spec_shape"]) == len(a["shape"]):
            tensors += 1
        elif not (isinstance(a, dict) and a.get("kind") == "python" and "value" in a):
            bad("args", f"hold {str(a)[:100]}, not a tensor (shape, dtype, spec_shape) or a "
                        "Python value")
    if tensors != n_inputs:
        bad("args", f"hold {tensors} tensors for {n_inputs} inputs")
    kinds = tuple(sorted(set(_PARAM_KINDS.values())))
    if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and p[1] in kinds
               for p in _listed(d, "parameters", bad)):
        bad("parameters", f"are not [name, kind] pairs with kinds in {list(kinds)}")
    if not isinstance(d.get("input_signature"), bool):
        bad("input_signature", "is not a boolean")


def _check_structures(d, outputs, arg_structure, args, bad):
    """The decoded output and argument nestings hold one leaf per output and per argument."""
    if nest.flatten(outputs) != [LEAF] * len(d["outputs"]):
        bad("structure", f"does not nest its {len(d['outputs'])} outputs")
    ok = isinstance(arg_structure, (list, tuple)) and len(arg_structure) == 2 and \
        isinstance(arg_structure[0], (list, tuple)) and isinstance(arg_structure[1], dict) and \
        all(isinstance(k, str) for k in arg_structure[1])
    if not ok or nest.flatten(arg_structure) != [LEAF] * len(args):
        bad("arg_structure", f"is not [positional, keyword] nesting its {len(args)} arguments")


def _build_graph(d, arrays, variables, dev, fail, saved_version):
    """A Graph (and its replay) on `dev` from the JSON of one graph, checked first."""
    _check_graph(d, arrays, variables, fail)
    try:
        g = Graph(d["name"])
        g.meta = [(lab, tuple(shape), dt, dev) for lab, shape, dt in d["values"]]
        g.inputs, g.input_names = list(d["inputs"]), list(d["input_names"])
        dec = _Decoder(arrays, fail)
        for v, path in d["constants"]:
            g.constants[v] = dev.asarray(np.array(arrays[path], copy=True, order="C"))
        nodes = []
        for n in d["nodes"]:
            kind, ins = n["kind"], tuple(n["ins"])
            if kind == "op":
                op = registry.REGISTRY.get(n["op"])
                if op is None:
                    raise ValueError(
                        f"tg.saved_model.load: {fail.file!r}: function {d['name']!r} uses op "
                        f"{n['op']!r}, which this tapegpu ({__version__}) does not have (the "
                        f"file was saved by tapegpu {saved_version}); load it with that "
                        f"version, or one that has the op")
                params = {k: dec(v) for k, v in n["params"].items()}
                nodes.append(Node("op", op, ins, params, n["out"], dev))
            elif kind == "read":
                nodes.append(Node("read", variables[n["variable"]], ins, None, n["out"], dev))
            elif kind == "assign":
                nodes.append(Node("assign", variables[n["variable"]], ins, n["mode"], None,
                                  None))
            elif kind == "guard":
                nodes.append(Node("guard", arrays[n["expected"]], ins, None, None, None))
            else:  # print
                stream = _streams()[n["stream"]] if n["stream"] is not None else None
                template = (tuple((k, t) for k, t in n["parts"]), n["sep"], n["end"], stream)
                nodes.append(Node("print", template, ins, None, None, None))
        g.nodes = nodes
        g.outputs = [("v", v) if k == "v" else ("py", dec(v)) for k, v in d["outputs"]]
        g.structure = dec(d["structure"])
        g.traced_nodes, g.merged, g.dropped = d["traced_nodes"], d["merged"], d["dropped"]
        spec = dict(d, structure=g.structure, arg_structure=dec(d["arg_structure"]),
                    args=[dict(a, value=dec(a["value"])) if a["kind"] == "python" else a
                          for a in d["args"]])
    except (KeyError, TypeError, IndexError, AttributeError, RecursionError) as e:
        fail(f"function {d['name']!r} is malformed ({type(e).__name__}: {e})")
    _check_structures(d, g.structure, spec["arg_structure"], spec["args"],
                      _complaint(d["name"], fail))
    return _LoadedConcreteFunction(g, spec, dev)


def _unescape(segment):
    if segment == "%":
        return ""
    s = segment
    if s.startswith("%2E"):
        s = "." + s[3:]
    return s.replace("%2F", "/").replace("%25", "%")


# -- the loaded object's tree ----------------------------------------------------------------------
_CONTAINER_KINDS = ("module", "list", "tuple", "dict")
# The list items a load creates in all, saved ones and the holes (None) before them: a list
# position in the file sizes a Python list, so the file's positions are bounded before any is
# used (2**20 items: 8 MiB of pointers; a saved list holds its modules and variables, not data).
_MAX_LIST_ITEMS = 2 ** 20
# Attribute names a loaded object keeps for itself: its class's (methods, properties, Python's
# own names) and the ones load sets.
_RESERVED = frozenset(dir(_Loaded)) | {"signatures", "_variables", "_saved_type", "_name"}


def _key(segment, kind, where, fail):
    """The key a path segment names in a container of `kind`: checked to be what save writes
    (the escaping of tg.train's paths), a list position, or an attribute name that is not one
    of the loaded object's own."""
    key = _unescape(segment)
    if _ckpt._component(key) != segment:
        fail(f"{where}: {segment!r} is not a path segment save writes ('%' is escaped as %25, "
             "'/' as %2F, a leading '.' as %2E)")
    if kind in ("list", "tuple"):
        if not (key.isascii() and key.isdigit()) or str(int(key)) != key:
            fail(f"{where}: {key!r} is not a list position (a non-negative integer, no leading "
                 "zeros)")
        return int(key)
    if kind == "module" and key in _RESERVED:
        fail(f"{where}: {key!r} cannot be an attribute of the loaded object (it is one of the "
             "object's own: a method, a property or a name Python or load uses)")
    return key


def _object_kinds(index, fail):
    """{path: (kind, type name)} of the index's objects, checked."""
    kinds = {}
    for o in index["objects"]:
        if not (isinstance(o, dict) and isinstance(o.get("path"), str) and o["path"] and
                o.get("kind") in _CONTAINER_KINDS and isinstance(o.get("type", "?"), str)):
            fail(f"its objects hold a malformed entry {str(o)[:200]} (each has a path, a kind "
                 f"in {list(_CONTAINER_KINDS)} and a type name)")
        if o["path"] in kinds:
            fail(f"object {o['path']!r} is listed twice")
        kinds[o["path"]] = (o["kind"], o.get("type", "?"))
    return kinds


def _tree(index, fail):
    """Where load puts each variable, every path checked before anything is built:
    `containers` {path: (kind, type name, parent path, key)}, parents before their children,
    and `places` {variable path: (parent path, key)}."""
    kinds = _object_kinds(index, fail)
    containers = {"": ("module", "object", None, None)}
    places, lengths = {}, {}
    for e in index["values"]:
        if e["kind"] != "variable":
            continue
        where = f"the path of variable {e['path']!r}"
        if not e["path"].startswith("variables/"):
            fail(f"{where} is not under 'variables/'")
        segments = e["path"][len("variables/"):].split("/")
        parent = ""
        for depth, segment in enumerate(segments):
            path = _ckpt._join(parent, segment)
            key = _key(segment, containers[parent][0], where, fail)
            if isinstance(key, int):
                lengths[parent] = max(lengths.get(parent, 0), key + 1)
            if depth == len(segments) - 1:
                if path in containers or path in kinds:
                    fail(f"{where}: {path!r} is both a variable and a container")
                places[path] = (parent, key)
            else:
                if path in places:
                    fail(f"{where}: {path!r} is both a variable and a container")
                if path not in containers:
                    kind, type_name = kinds.get(path, ("module", "?"))
                    containers[path] = (kind, type_name, parent, key)
            parent = path
    if sum(lengths.values()) > _MAX_LIST_ITEMS:
        fail(f"its lists would hold {sum(lengths.values())} items (their largest positions "
             f"+ 1, holes included); a SavedModel's lists hold at most {_MAX_LIST_ITEMS} in all")
    return containers, places


def _build_tree(root, containers, places, variables):
    """Puts the variables into new containers below `root` at the places `_tree` checked."""
    objects = {"": root}
    for path, (kind, type_name, parent, key) in containers.items():
        if path:
            obj = [] if kind in ("list", "tuple") else {} if kind == "dict" else \
                _Loaded(type_name)
            _put(objects[parent], key, obj)
            objects[path] = obj
    for path, (parent, key) in places.items():
        _put(objects[parent], key, variables[path])
    for path in reversed(list(containers)):  # children are listed after their parents
        kind, _, parent, key = containers[path]
        if kind == "tuple":
            _put(objects[parent], key, tuple(objects[path]), replace=True)


def _put(parent, key, value, replace=False):
    if isinstance(parent, list):
        if not replace:
            parent.extend([None] * (key + 1 - len(parent)))
        parent[key] = value
    elif isinstance(parent, dict):
        parent[key] = value
    else:
        setattr(parent, key, value)


def _set_functions(root, index, graphs, fail):
    own = set(vars(root))
    for name, ids in index["functions"].items():
        if name != "__call__" and name in _RESERVED or name in own:
            fail(f"function {name!r} cannot be an attribute of the loaded object (the name is "
                 "one of the object's own, or of a saved value)")
        setattr(root, name, _LoadedFunction(name, [graphs[i] for i in ids]))
    root.signatures = {name: _LoadedFunction(name, [graphs[i] for i in ids])
                       for name, ids in index["signatures"].items()}


def load(export_dir, tags=None, options=None):
    """Loads what `tg.saved_model.save` wrote to `export_dir` (TensorFlow's
    `tf.saved_model.load`): an object with the saved variables (at their saved attribute
    paths, and in `variables` / `trainable_variables`), the saved functions as callable
    attributes and `signatures` {name: function}. No Python code of the saved object is needed.

    Everything goes to the device current at the call (`with tg.device("cuda_emu"): load(...)`)
    and the functions run there. A function replays the saved graph whose signature matches the
    arguments (a new shape cannot be traced: there is no Python function); under a
    GradientTape it runs op by op, so it is differentiable with respect to its inputs and the
    loaded variables. A damaged, truncated or foreign file raises ValueError naming the file and
    what is wrong: every name, position and size the file gives is checked before it is used,
    nothing the file only claims sizes an allocation, and load runs none of its ops. See
    docs/function.md ("Saving").

    >>> import tempfile
    >>> m = tg.Module()
    >>> m.w = tg.Variable([1.0, 2.0])
    >>> m.f = tg.function(lambda x: tg.reduce_sum(x * m.w))
    >>> _ = m.f(tg.constant([3.0, 4.0]))
    >>> tmp = tempfile.TemporaryDirectory()
    >>> tg.saved_model.save(m, tmp.name)
    >>> loaded = tg.saved_model.load(tmp.name)
    >>> x = tg.constant([3.0, 4.0])
    >>> with tg.GradientTape() as tape:
    ...     y = loaded.f(x)
    >>> float(y), tape.gradient(y, loaded.w).numpy()
    (11.0, array([3., 4.], dtype=float32))
    >>> tmp.cleanup()
    """
    _check_options(options, LoadOptions, "tg.saved_model.load")
    export_dir = os.fspath(export_dir)
    file = os.path.join(export_dir, FILE) if os.path.isdir(export_dir) or \
        not export_dir.endswith(".npz") else export_dir
    reader = _Reader(file, "tg.saved_model.load")
    try:
        index = reader.index
        arrays = {e["path"]: reader.read(e) for e in index["values"]}
    finally:
        reader.close()

    def fail(what):
        raise ValueError(f"tg.saved_model.load: cannot read SavedModel {file!r}: {what}") \
            from None
    fail.file = file
    containers, places = _tree(index, fail)
    dev = _backend.current()
    variables = {}
    for e in index["values"]:
        if e["kind"] == "variable":
            path = e["path"][len("variables/"):]
            value = Tensor(dev.asarray(np.array(arrays[e["path"]], copy=True, order="C")), dev)
            variables[path] = Variable(value, trainable=bool(e.get("trainable", True)),
                                       name=e.get("name") if isinstance(e.get("name"), str)
                                       else path)
    graphs = [_build_graph(d, arrays, variables, dev, fail, index.get("tapegpu_version", "?"))
              for d in index["graphs"]]
    root = _Loaded("object")
    _build_tree(root, containers, places, variables)
    root._variables = list(variables.values())
    _set_functions(root, index, graphs, fail)
    return root
