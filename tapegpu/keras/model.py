"""`keras.Model` (subclassing and functional) and `keras.Sequential` (also `tg.layers.Sequential`).

A functional model is a graph of layer calls recorded on symbolic tensors (`KerasTensor`,
tapegpu/keras/layers/core.py): `keras.Input(shape)` makes one, and calling a layer on it runs
the layer once on a batch of zeros (building its variables and finding the output shape) and
returns a new `KerasTensor` that remembers the call. `keras.Model(inputs, outputs)` then
replays those calls, in order, on real tensors.
"""
import inspect
import os
import zipfile

from collections.abc import Mapping

import numpy as np

from .. import ops
from ..core import files, nest
from ..core.tensor import Tensor, convert_to_tensor
from ..models.module import Module
from . import layers as _layers
from . import training
from .layers.base import Layer, _floatx, _symbolic_input, _takes_training
from .layers.core import InputLayer, KerasTensor


def _as_tensors(structure):
    """numpy arrays among the inputs become tensors (Keras converts them)."""
    if isinstance(structure, Tensor):  # the common case, at every call
        return structure
    return nest.map_structure(
        lambda v: convert_to_tensor(v) if isinstance(v, (np.ndarray, np.generic)) else v,
        structure)


def _training_is_second(model):
    """Whether `model.call`'s parameter after the inputs is `training` (so that
    `model(x, True)` means training=True, as in Keras)."""
    try:
        params = list(inspect.signature(model.call).parameters)
    except (TypeError, ValueError):
        return False
    return len(params) > 1 and params[1] == "training"


class Model(training.Trainer, Layer):
    """A layer with training and saving: subclass it (create layers in `__init__`, compute in
    `call(inputs, training=None)`), or build a functional model with
    `keras.Model(inputs, outputs)`.

    >>> class MLP(tg.keras.Model):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.hidden = tg.keras.layers.Dense(8, activation="gelu")
    ...         self.out = tg.keras.layers.Dense(2)
    ...     def call(self, x, training=None):
    ...         return self.out(self.hidden(x))
    >>> model = MLP()
    >>> model(tg.ones((3, 4))).shape
    (3, 2)
    >>> [v.shape for v in model.trainable_variables]
    [(4, 8), (8,), (8, 2), (2,)]
    """

    _IGNORED_ATTRIBUTES = frozenset({"_inputs", "_outputs", "_nodes", "_compiled",
                                     "optimizer", "history", "_output_shapes",
                                     "_regularized", "_init_args"})

    def __new__(cls, *args, **kwargs):
        if not issubclass(cls, Functional) and _functional_arguments(cls, args, kwargs):
            # Keras 3: a subclass called with (inputs, outputs) is a functional model that
            # keeps the subclass's methods (a train_step override: "customizing fit")
            cls = Functional if cls is Model else _functional_subclass(cls)
        return object.__new__(cls)

    def __init__(self, *args, name=None, dtype=None, trainable=True, **kwargs):
        if args or kwargs:
            raise TypeError(f"keras.Model: unexpected arguments {args!r} {sorted(kwargs)}; a "
                            "subclass takes name=, dtype=, trainable=; a functional model "
                            "takes (inputs, outputs)")
        Layer.__init__(self, dtype=dtype, name=name, trainable=trainable)
        self._compiled = None
        self.stop_training = False
        self.optimizer = None

    @property
    def layers(self):
        """The model's direct sub-layers, in the order they were assigned."""
        return [m for m in _direct_layers(self)]

    def build(self, input_shape):
        """Builds the variables by calling the model on zeros of `input_shape` (None
        dimensions become 1)."""
        if self.built:
            return
        shape = [1 if d is None else int(d) for d in input_shape]
        self.built = True  # call() must not re-enter build
        self.call(ops.zeros(shape, dtype=(self._dtype or np.dtype(_floatx())).name))

    def __call__(self, inputs, *args, training=None, **kwargs):
        return self._tracked(self._model_call, inputs, *args, training=training, **kwargs)

    def _model_call(self, inputs, *args, training=None, **kwargs):
        symbolic = _symbolic_input(inputs)
        if symbolic is not None:
            if training is not None:
                kwargs["training"] = training
            return symbolic._symbolic_call(self, inputs, args, kwargs)
        if args and training is None and _training_is_second(self):
            training, args = args[0], args[1:]  # model(x, True): training passed positionally
        inputs = _as_tensors(inputs)
        if not self.built:
            self._build_on_first_call(inputs)
            self.built = True
        if _takes_training(self):
            kwargs["training"] = training
        return self.call(inputs, *args, **kwargs)

    def _build_on_first_call(self, inputs):
        """A subclass's own `build(input_shape)` runs before its first call, with the first
        input's shape (the layers of a model without one build on their first call)."""
        if type(self).build is not Model.build:
            self.build(tuple(nest.flatten(inputs)[0].shape))

    def call(self, inputs, training=None):
        raise NotImplementedError(f"{type(self).__name__}: a keras.Model subclass must "
                                  "implement call(inputs, training=None)")

    def get_layer(self, name=None, index=None):
        """A layer of `layers` by its name or its index (Keras' `Model.get_layer`).

        >>> model = tg.keras.Sequential([tg.keras.Input((2,)),
        ...                              tg.keras.layers.Dense(3, name="hidden")])
        >>> model.get_layer("hidden") is model.get_layer(index=0)
        True
        """
        if (name is None) == (index is None):
            raise ValueError(f"get_layer: provide either a layer name or a layer index, got "
                             f"name={name!r}, index={index!r}")
        layers = self.layers
        if index is not None:
            if not -len(layers) <= index < len(layers):
                raise ValueError(f"get_layer: was asked to retrieve layer at index {index} but "
                                 f"model {self.name!r} only has {len(layers)} layers")
            return layers[index]
        for layer in layers:
            if layer.name == name:
                return layer
        raise ValueError(f"No such layer: {name}. Existing layers are: "
                         f"{[layer.name for layer in layers]}.")

    # -- weights --------------------------------------------------------------------------------
    def save(self, filepath, overwrite=True, **kwargs):
        """Keras' whole-model save (`.keras` files) is not available: it raises, naming what to
        use instead (tapegpu does not write Keras' format, and reads no file that would run
        code)."""
        raise NotImplementedError(
            f"Model.save({os.fspath(filepath)!r}): tapegpu has no whole-model file format (.keras, "
            f".h5); save the weights with model.save_weights(...) and rebuild the model in "
            f"code, use tg.train.Checkpoint(model=model) for weights and optimizer state, or "
            f"export traced functions with tg.saved_model.save")

    def save_weights(self, filepath, overwrite=True):
        """Saves the variables' values, in the order of `variables`, to `filepath` (an `.npz`
        archive: `arr_0.npy`, `arr_1.npy`, ..., no pickle), atomically: the file is written
        under a temporary name in the same directory and renamed over `filepath` (as
        tg.train's checkpoints), so a process killed during a save leaves the previous file
        whole. See docs/checkpoints.md ("Keras weights files").

        >>> import os, tempfile
        >>> model = tg.keras.Sequential([tg.keras.layers.Dense(2)])
        >>> _ = model(tg.ones((1, 3)))
        >>> tmp = tempfile.TemporaryDirectory()
        >>> path = os.path.join(tmp.name, "model.weights.npz")
        >>> model.save_weights(path)
        >>> other = tg.keras.Sequential([tg.keras.layers.Dense(2)])
        >>> _ = other(tg.zeros((1, 3)))
        >>> other.load_weights(path)
        >>> bool((other(tg.ones((1, 3))) == model(tg.ones((1, 3)))).numpy().all())
        True
        >>> tmp.cleanup()
        """
        path = os.fspath(filepath)
        if not overwrite and os.path.exists(path):
            raise FileExistsError(f"Model.save_weights: {path!r} exists and overwrite=False")
        directory = os.path.dirname(path) or "."
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"Model.save_weights: cannot write {path!r}: the directory "
                                    f"{directory!r} does not exist")
        files.write_npz(path, [v.numpy() for v in self.variables])

    def load_weights(self, filepath):
        """Loads values saved by `save_weights` (the model must be built, with the same
        variables' shapes). Nothing in the file is unpickled or run: each array's header is
        read first (bool, integer, float and complex dtypes only; the variable's shape) and its
        data only then. A file that is missing, damaged, truncated or of another model raises
        naming the file and what was expected (FileNotFoundError, else ValueError), and nothing
        is assigned unless every array reads."""
        path = os.fspath(filepath)
        variables = self.variables
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            raise FileNotFoundError(f"Model.load_weights: no weights file at {path!r} (the "
                                    "file does not exist)") from None
        with f:
            arrays = _read_weights(f, path, self.name, variables)
        self.set_weights(arrays)

    # -- summary --------------------------------------------------------------------------------
    def summary(self, print_fn=None, line_length=72):
        """Prints each layer with its output shape (when known) and parameter count, then the
        totals (Keras' layout)."""
        print_fn = print_fn or print
        rows = []
        shapes = getattr(self, "_output_shapes", {})
        for layer in self.layers:
            n = sum(int(np.prod(v.shape)) for v in layer.variables) \
                if isinstance(layer, Module) else 0
            rows.append((f"{layer.name} ({type(layer).__name__})",
                         str(shapes.get(id(layer), "?")), f"{n:,}"))
        w0 = max([len("Layer (type)")] + [len(r[0]) for r in rows]) + 2
        w1 = max([len("Output Shape")] + [len(r[1]) for r in rows]) + 2
        line = "-" * max(line_length, w0 + w1 + 12)
        print_fn(f'Model: "{self.name}"')
        print_fn(line)
        print_fn(f"{'Layer (type)':<{w0}}{'Output Shape':<{w1}}{'Param #':>10}")
        print_fn(line.replace("-", "="))
        for r in rows:
            print_fn(f"{r[0]:<{w0}}{r[1]:<{w1}}{r[2]:>10}")
        print_fn(line)
        count = lambda vs: sum(int(np.prod(v.shape)) for v in vs)  # noqa: E731
        print_fn(f"Total params: {count(self.variables):,}")
        print_fn(f"Trainable params: {count(self.trainable_variables):,}")
        print_fn(f"Non-trainable params: {count(self.non_trainable_variables):,}")


def _read_weights(f, path, model, variables):
    """The arrays of a `save_weights` file, each checked against its variable before its data
    is read (so a damaged header cannot size an allocation)."""
    def fail(what):
        raise ValueError(f"Model.load_weights: cannot read weights file {path!r}: {what}; "
                         f"expected an .npz archive written by save_weights, with one array per "
                         f"variable of model {model!r}") from None
    try:
        zf = zipfile.ZipFile(f)
    except Exception as e:  # zipfile raises several types for damaged archives
        fail(f"it is truncated or not a zip archive ({type(e).__name__}: {e})")
    with zf:
        names = zf.namelist()
        if set(names) != {f"arr_{i}.npy" for i in range(len(names))}:
            fail(f"its members are {names[:4]}{'...' if len(names) > 4 else ''}, not arr_0.npy, "
                 "arr_1.npy, ... each once")
        if len(names) != len(variables):
            raise ValueError(f"Model.load_weights: {path!r} holds {len(names)} arrays but model "
                             f"{model!r} has {len(variables)} variables (build the model first "
                             "by calling it on a batch)")
        size = os.fstat(f.fileno()).st_size
        return [_read_weight(zf, size, f"arr_{i}.npy", v, path, fail)
                for i, v in enumerate(variables)]


def _read_weight(zf, size, name, var, path, fail):
    info = zf.getinfo(name)
    arr = trailing = None
    try:
        with zf.open(info) as m:
            header = files.npy_header(m)
            if tuple(header[0]) == tuple(var.shape):
                arr = files.npy_data(m, header, files.zip_member_limit(info, size))
                trailing = m.read(1)  # at the member's end, zipfile has checked its CRC-32
    except Exception as e:  # numpy and zipfile raise several types for damaged data
        fail(f"{name} is damaged ({type(e).__name__}: {e})")
    if arr is None:
        raise ValueError(f"Model.load_weights: variable {var.name!r} has shape {var.shape}, "
                         f"the array {name} of {path!r} has shape {tuple(header[0])}")
    if trailing:
        fail(f"{name} has bytes after its data")
    return arr


def _direct_layers(module):
    found, seen = [], set()

    def visit(value):
        if id(value) in seen:
            return
        if isinstance(value, Layer):
            seen.add(id(value))
            found.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)
        elif isinstance(value, dict):
            for k in sorted(value, key=str):
                visit(value[k])

    for key, value in vars(module).items():
        if key not in module._IGNORED_ATTRIBUTES and key != "_name":
            visit(value)
    return found


def _functional_arguments(cls, args, kwargs):
    """Whether a Model constructor call is Keras' functional one, (inputs, outputs): for a
    subclass, only when the inputs are keras.Input tensors (its own constructor may take two
    other arguments)."""
    if len(args) >= 2:
        inputs = args[0]
    elif "inputs" in kwargs and (args or "outputs" in kwargs):
        inputs = kwargs["inputs"]
    elif len(args) == 1 and "outputs" in kwargs:
        inputs = args[0]
    else:
        return False
    return cls is Model or (bool(nest.flatten(inputs)) and all(
        isinstance(t, KerasTensor) for t in nest.flatten(inputs)))


_FUNCTIONAL_SUBCLASSES = {}  # a Model subclass -> its functional variant


def _functional_subclass(cls):
    """`cls` with Functional's construction and call: (cls, Functional) in that order, so the
    subclass's overrides win."""
    sub = _FUNCTIONAL_SUBCLASSES.get(cls)
    if sub is None:
        sub = _FUNCTIONAL_SUBCLASSES[cls] = type(cls.__name__, (cls, Functional), {
            "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__})
    return sub


class Functional(Model):
    """A model given by its symbolic inputs and outputs (`keras.Model(inputs, outputs)`)."""

    def __init__(self, inputs, outputs, name=None, trainable=True):
        super().__init__(name=name, trainable=trainable)
        for label, s in (("inputs", inputs), ("outputs", outputs)):
            bad = [t for t in nest.flatten(s) if not isinstance(t, KerasTensor)]
            if bad or not nest.flatten(s):
                raise ValueError(f"keras.Model: {label} must be keras.Input tensors or outputs "
                                 f"of layers called on them, got {bad or s!r}")
        self._inputs, self._outputs = inputs, outputs
        input_ids = {id(t) for t in nest.flatten(inputs)}
        order, state = [], {}

        def visit(node):  # depth-first topological order of the calls
            if state.get(id(node)) == "done":
                return
            state[id(node)] = "done"
            for parent in node.parents():
                visit(parent)
            order.append(node)

        for t in nest.flatten(outputs):
            if t._keras_history is not None:
                visit(t._keras_history[0])
            elif id(t) not in input_ids:
                raise ValueError(f"keras.Model: output {t!r} is an Input not among inputs")
        for node in order:
            for t in nest.flatten(node.inputs):
                if isinstance(t, KerasTensor) and t._keras_history is None and \
                        id(t) not in input_ids:
                    raise ValueError(f"keras.Model: the graph needs input {t!r}, which is not "
                                     "among the model's inputs")
        self._nodes = order
        model_layers, seen = [], set()
        for t in nest.flatten(inputs):
            if hasattr(t, "_input_layer"):
                model_layers.append(t._input_layer)
                seen.add(id(t._input_layer))
        for node in order:
            if id(node.layer) not in seen:
                seen.add(id(node.layer))
                model_layers.append(node.layer)
        self._layers = model_layers
        self._output_shapes = {id(n.layer): n.outputs[0].shape if len(n.outputs) == 1 else
                               [o.shape for o in n.outputs] for n in order}
        for t in nest.flatten(inputs):
            if hasattr(t, "_input_layer"):
                self._output_shapes[id(t._input_layer)] = t.shape
        self.built = True

    @property
    def layers(self):
        return list(self._layers)

    @property
    def inputs(self):
        return nest.flatten(self._inputs)

    @property
    def outputs(self):
        return nest.flatten(self._outputs)

    @property
    def output_shape(self):
        """The output's shape (a list of them for several outputs), batch axis None."""
        shapes = [t.shape for t in self.outputs]
        return shapes[0] if len(shapes) == 1 else shapes

    def call(self, inputs, training=None):
        expected = nest.flatten(self._inputs)
        if isinstance(inputs, Mapping) and not isinstance(self._inputs, Mapping):
            # a dict for inputs given as a list: matched by the keras.Input names (Keras),
            # never by the dict's order
            names = [t.name for t in expected]
            missing = [n for n in names if n not in inputs]
            if missing:
                raise ValueError(f"{self.name}: the inputs dict has keys {sorted(inputs)} but "
                                 f"the model's inputs are named {names} (missing {missing}); "
                                 f"key the dict by the keras.Input names")
            inputs = [inputs[n] for n in names]
        if isinstance(inputs, (list, tuple)) and len(expected) == 1 and len(inputs) == 1:
            inputs = inputs[0]
        given = nest.flatten(inputs) if len(expected) > 1 else [inputs]
        if len(given) != len(expected):
            raise ValueError(f"{self.name}: the model has {len(expected)} inputs, got "
                             f"{len(given)}")
        values = {id(k): v for k, v in zip(expected, given)}
        for node in self._nodes:
            args = nest.map_structure(
                lambda t: values[id(t)] if isinstance(t, KerasTensor) else t, node.inputs)
            kwargs = dict(node.kwargs)
            if training is not None and "training" not in kwargs and \
                    _takes_training(node.layer):
                kwargs["training"] = training
            out = node.layer(args, *node.args, **kwargs)
            for sym, val in zip(node.outputs, nest.flatten(out)):
                values[id(sym)] = val
        return nest.map_structure(lambda t: values[id(t)], self._outputs)


class Sequential(Model):
    """A `keras.Model` made of a stack of layers, each fed the previous one's output; also
    `tg.layers.Sequential`.

    The input shape can be declared with `keras.Input(shape)` (or `InputLayer`) as the first
    element, or with `input_shape=` on the first layer; the model is then built at once.
    Otherwise each layer builds on its first call. An element may be any callable of a tensor
    (e.g. a function); `training=` is passed to the elements whose `call` takes it.

    >>> model = tg.keras.Sequential([tg.keras.layers.Dense(8, activation="gelu",
    ...                                                    input_shape=(4,)),
    ...                              tg.keras.layers.Dense(3)])
    >>> len(model.trainable_variables)
    4
    >>> model(tg.ones((2, 4))).shape
    (2, 3)
    >>> model = tg.layers.Sequential([tg.layers.Dense(8, activation="gelu"),
    ...                               lambda x: 2.0 * x, tg.layers.Dense(2)])
    >>> model(tg.ones((5, 3))).shape
    (5, 2)
    >>> [v.shape for v in model.trainable_variables]
    [(3, 8), (8,), (8, 2), (2,)]
    """

    def __init__(self, layers=None, name=None, trainable=True):
        Model.__init__(self, name=name, trainable=trainable)
        # the stack is the attribute `layers`, so that checkpoints name its variables
        # model/layers/0/kernel, ...; the property `layers` returns a copy (Keras')
        self.__dict__["layers"] = []
        self._input_spec = None
        self._output_shapes = {}
        for layer in layers or ():
            self.add(layer)

    @property
    def _stack(self):
        return self.__dict__["layers"]

    @property
    def layers(self):
        """The model's layers (and callables), in order: a new list."""
        return list(self._stack)

    @property
    def output_shape(self):
        """The last layer's output shape, batch axis None (Keras').

        Known when the input shape is declared (`keras.Input`, `input_shape=`) or given to
        `build`, and after the first call.

        >>> model = tg.keras.Sequential([tg.keras.Input((3,)), tg.keras.layers.Dense(4)])
        >>> model.output_shape
        (None, 4)
        """
        if not self._stack or id(self._stack[-1]) not in self._output_shapes:
            raise AttributeError(f"Sequential {self.name!r}: the output shape is unknown until "
                                 "the input shape is declared (keras.Input or input_shape=) "
                                 "or given to build()")
        return self._output_shapes[id(self._stack[-1])]

    def add(self, layer):
        """Appends a layer (or any callable); a `keras.Input` or `InputLayer` first declares the
        input shape."""
        if isinstance(layer, KerasTensor):
            layer = getattr(layer, "_input_layer", None)
            if layer is None:
                raise TypeError("Sequential.add: a symbolic tensor can only be a keras.Input")
        if isinstance(layer, InputLayer):
            if self._stack or self._input_spec is not None:
                raise ValueError("Sequential.add: an InputLayer must come first")
            self._input_spec = layer.output
            return
        if not callable(layer):
            raise TypeError(f"Sequential.add: expected a layer or callable, got {layer!r}")
        if not self._stack and self._input_spec is None and \
                getattr(layer, "_input_shape_arg", None) is not None:
            self._input_spec = KerasTensor((None,) + layer._input_shape_arg,
                                           layer.dtype or _floatx())
        self._stack.append(layer)
        if self._input_spec is not None:
            self._build_symbolic()

    def _build_symbolic(self):
        x = self._input_spec
        for layer in self._stack:
            x = layer(x) if not isinstance(layer, Layer) or \
                not _takes_training(layer) else layer(x, training=False)
            if isinstance(x, KerasTensor):
                self._output_shapes[id(layer)] = x.shape
        self.built = True

    def build(self, input_shape=None):
        if input_shape is None and self._input_spec is None:
            raise ValueError(f"Sequential {self.name!r}: build() needs an input_shape when the "
                             "model declares none (keras.Input or input_shape=)")
        if input_shape is not None and self._input_spec is None:
            self._input_spec = KerasTensor(tuple(input_shape), self._dtype or _floatx())
        self._build_symbolic()

    def _build_on_first_call(self, inputs):
        """Nothing: the layers build on their first call (`call` notes their output shapes)."""

    def call(self, inputs, training=None):
        x = inputs
        shapes = None if self._output_shapes else self._output_shapes  # the first call's
        for layer in self._stack:
            if _takes_training(layer):  # None passes on: each layer's default (Keras 3)
                x = layer(x, training=training)
            else:
                x = layer(x)
            if shapes is not None and isinstance(x, Tensor):
                shapes[id(layer)] = tuple(x.shape)
        return x

    def get_config(self):
        """`{'name', 'trainable', 'layers': [{'class_name', 'config'}, ...]}`, the input shape
        first as an InputLayer when declared; `from_config` rebuilds the model."""
        layers = []
        if self._input_spec is not None:
            layers.append({"class_name": "InputLayer",
                           "config": {"batch_shape": tuple(self._input_spec.shape),
                                      "dtype": self._input_spec.dtype.name}})
        for layer in self._stack:
            if not isinstance(layer, Layer):
                raise NotImplementedError(f"Sequential.get_config: {layer!r} is not a layer")
            layers.append({"class_name": type(layer).__name__, "config": layer.get_config()})
        return {"name": self.name, "trainable": self.trainable, "layers": layers}

    @classmethod
    def from_config(cls, config):
        layers = []
        for entry in config["layers"]:
            name = entry["class_name"]
            layer_cls = None if name.startswith("_") else getattr(_layers, name, None)
            if not (isinstance(layer_cls, type) and issubclass(layer_cls, Layer)):
                raise ValueError(f"Sequential.from_config: unknown layer class {name!r}")
            layers.append(layer_cls(**entry["config"]))
        return cls(layers, name=config.get("name"), trainable=config.get("trainable", True))
