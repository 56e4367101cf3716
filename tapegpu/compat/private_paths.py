"""TensorFlow's and Keras' private module paths that real programs import, mapped to tapegpu's
public objects: with the import swapped, `from tensorflow.python.keras.engine.base_layer import
Layer` becomes `from tapegpu.python.keras.engine.base_layer import Layer`, and gets
`tg.keras.layers.Layer`. Keras 2's own package paths (`keras.engine.training`,
`keras.layers.core`, ...) and Keras 3's `keras.src.*` work the same under `tapegpu.keras`.

Each mapped module is a namespace whose names are tapegpu objects (`MODULES` lists them); a
module of a mapped package that is not listed forwards to the package's public namespace
(`tapegpu.python.keras.layers.convolutional` is `tg.keras.layers`). Any other private path
raises ModuleNotFoundError saying the module is TensorFlow's private one and what to import
instead.

>>> from tapegpu.python.keras.engine.base_layer import Layer
>>> Layer is tg.keras.layers.Layer
True
>>> from tapegpu.python.client import device_lib
>>> [d.device_type for d in device_lib.list_local_devices()][:1]
['CPU']
"""
import importlib.abc
import importlib.machinery
import sys
import types

# module path (after 'tapegpu.') -> {name: dotted path in tapegpu} or a dotted path of a
# namespace whose names the module forwards
_KERAS_FORWARDS = {
    "layers": "keras.layers", "optimizers": "keras.optimizers", "losses": "keras.losses",
    "metrics": "keras.metrics", "callbacks": "keras.callbacks", "models": "keras.models",
    "initializers": "keras.initializers", "regularizers": "keras.regularizers",
    "activations": "keras.activations", "backend": "keras.backend", "utils": "keras.utils",
    "preprocessing": "keras.preprocessing", "applications": "keras.applications",
    "datasets": "keras.datasets", "constraints": "keras.constraints", "ops": "keras.ops",
    "mixed_precision": "keras.mixed_precision", "random": "keras.random",
}
_ENGINE = {
    "base_layer": {"Layer": "keras.layers.Layer", "InputSpec": "keras.layers.InputSpec"},
    "training": {"Model": "keras.Model"},
    "functional": {"Functional": "keras.Functional"},
    "sequential": {"Sequential": "keras.Sequential"},
    "input_layer": {"Input": "keras.Input", "InputLayer": "keras.InputLayer"},
    "topology": {"Layer": "keras.layers.Layer", "Input": "keras.Input",
                 "InputLayer": "keras.InputLayer"},  # Keras 1 and early Keras 2
    "input_spec": {"InputSpec": "keras.layers.InputSpec"},
    "keras_tensor": {"KerasTensor": "keras.KerasTensor"},
    "data_adapter": {"unpack_x_y_sample_weight": "keras.utils.unpack_x_y_sample_weight",
                     "pack_x_y_sample_weight": "keras.utils.pack_x_y_sample_weight"},
}


def _keras_tree(prefix):
    """The mapped modules of a Keras package tree rooted at `prefix` (Keras 2's `keras` and
    `tensorflow.python.keras`, Keras 3's `keras.src`)."""
    out = {prefix: "keras"}
    for name, target in _KERAS_FORWARDS.items():
        out[f"{prefix}.{name}"] = target
    out[f"{prefix}.engine"] = {k: v for table in _ENGINE.values() for k, v in table.items()}
    for name, table in _ENGINE.items():
        out[f"{prefix}.engine.{name}"] = table
    out[f"{prefix}.utils.np_utils"] = {"to_categorical": "keras.utils.to_categorical",
                                       "normalize": "keras.utils.normalize"}
    out[f"{prefix}.utils.generic_utils"] = {"Progbar": "keras.utils.Progbar"}
    out[f"{prefix}.utils.data_utils"] = {"get_file": "keras.utils.get_file"}
    out[f"{prefix}.utils.layer_utils"] = {"count_params": "keras.backend.count_params"}
    out[f"{prefix}.layers.layer"] = {"Layer": "keras.layers.Layer"}  # Keras 3's keras.src
    out[f"{prefix}.models.model"] = {"Model": "keras.Model"}
    out[f"{prefix}.models.sequential"] = {"Sequential": "keras.Sequential"}
    out[f"{prefix}.models.functional"] = {"Functional": "keras.Functional"}
    out[f"{prefix}.models.cloning"] = {"clone_model": "keras.models.clone_model"}
    out[f"{prefix}.optimizers.optimizer_v2"] = "keras.optimizers"
    out[f"{prefix}.optimizers.optimizer_v2.optimizer_v2"] = {
        "OptimizerV2": "keras.optimizers.Optimizer"}
    return out


MODULES = {}
for _root in ("python.keras", "keras.src", "keras.engine_paths"):
    MODULES.update(_keras_tree(_root))
del MODULES["keras.engine_paths"]
# Keras 2's top-level package paths under tg.keras (keras.engine.*, keras.layers.core, ...)
for _path, _target in _keras_tree("keras").items():
    if _path in ("keras.layers", "keras.utils", "keras.models", "keras.optimizers") or \
            _path.startswith("keras.engine") or _path.startswith("keras.utils.") or \
            _path.startswith("keras.layers.") or _path.startswith("keras.models.") or \
            _path.startswith("keras.optimizers."):
        MODULES[_path] = _target
MODULES = {k: v for k, v in MODULES.items() if not k.startswith("keras.engine_paths")}
MODULES.update({
    "python": {"keras": "keras"},
    "python.framework": {},
    "python.framework.ops": {"Tensor": "Tensor", "EagerTensor": "Tensor",
                             "convert_to_tensor": "convert_to_tensor",
                             "name_scope": "name_scope", "executing_eagerly_outside_functions":
                             "compat.v1.executing_eagerly_outside_functions",
                             "init_scope": "init_scope", "device": "device"},
    "python.framework.dtypes": "dtypes",
    "python.framework.tensor_shape": {"TensorShape": "TensorShape"},
    "python.framework.constant_op": {"constant": "constant"},
    "python.framework.tensor_spec": {"TensorSpec": "TensorSpec"},
    "python.framework.errors_impl": "errors",
    "python.framework.errors": "errors",
    "python.ops": {},
    "python.ops.math_ops": "math",
    "python.ops.array_ops": "",
    "python.ops.nn": "nn",
    "python.ops.nn_ops": "nn",
    "python.ops.random_ops": "random",
    "python.ops.init_ops_v2": "initializers",
    "python.ops.variables": {"Variable": "Variable"},
    "python.ops.resource_variable_ops": {"ResourceVariable": "Variable"},
    "python.ops.control_flow_ops": {"cond": "cond", "while_loop": "while_loop",
                                    "group": "group", "no_op": "no_op"},
    "python.ops.gen_math_ops": "math",
    "python.ops.linalg_ops": "linalg",
    "python.eager": {},
    "python.eager.context": {"executing_eagerly": "executing_eagerly"},
    "python.eager.def_function": {"function": "function"},
    "python.eager.backprop": {"GradientTape": "GradientTape"},
    "python.platform": {},
    "python.platform.tf_logging": "compat.v1.logging",
    "python.platform.test": "test",
    "python.client": {},
    "python.training": {},
    "python.training.tracking": {},
    "python.training.tracking.tracking": {"AutoTrackable": "Module"},
    "python.module": {},
    "python.module.module": {"Module": "Module"},
    "python.data": {},
    "python.data.ops": {},
    "python.data.ops.dataset_ops": {"Dataset": "data.Dataset", "DatasetV2": "data.Dataset",
                                    "AUTOTUNE": "data.AUTOTUNE"},
})


class _DeviceAttributes:
    """One entry of `device_lib.list_local_devices()`: name, device_type, memory_limit."""

    def __init__(self, name, device_type, memory_limit=0, physical_device_desc=""):
        self.name, self.device_type = name, device_type
        self.memory_limit, self.physical_device_desc = memory_limit, physical_device_desc
        self.locality, self.incarnation = None, 0

    def __repr__(self):
        return (f'name: "{self.name}"\ndevice_type: "{self.device_type}"\n'
                f"memory_limit: {self.memory_limit}")


def list_local_devices(session_config=None):
    """TensorFlow's `device_lib.list_local_devices()`: the CPU, then each GPU tapegpu sees."""
    import tapegpu
    out = [_DeviceAttributes("/device:CPU:0", "CPU", 268435456)]
    for i, _ in enumerate(tapegpu.config.list_physical_devices("GPU")):
        out.append(_DeviceAttributes(f"/device:GPU:{i}", "GPU"))
    return out


_OWN = {"python.client.device_lib": {"list_local_devices": list_local_devices}}


def _resolve(dotted):
    import tapegpu
    obj = tapegpu
    for part in dotted.split(".") if dotted else ():
        obj = getattr(obj, part)
    return obj


def _public_of(mod_path):
    """The nearest mapped forwarding namespace above `mod_path` (for unlisted modules of a
    mapped package), or None."""
    parts = mod_path.split(".")
    for n in range(len(parts) - 1, 0, -1):
        target = MODULES.get(".".join(parts[:n]))
        if isinstance(target, str) and ".".join(parts[:n]) not in ("python", "keras.src"):
            return target
    return None


class _Module(types.ModuleType):
    """A mapped private module: its names are tapegpu's objects (read when first used)."""

    def __init__(self, name, table, forward):
        super().__init__(name, f"{name}: TensorFlow's private path, mapped to tapegpu's public "
                               f"objects (tapegpu/compat/private_paths.py)")
        self._table, self._forward = table, forward
        self.__path__ = []  # a package: its submodules are found by the finder

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        table = self.__dict__.get("_table") or {}
        if name in table:
            value = table[name] if not isinstance(table[name], str) else _resolve(table[name])
            setattr(self, name, value)
            return value
        forward = self.__dict__.get("_forward")
        if forward is not None:
            return getattr(_resolve(forward), name)
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r} (tapegpu maps "
                             f"only what real code uses of TensorFlow's private modules: "
                             f"{sorted(table)}; use the public tapegpu name instead)")

    def __dir__(self):
        names = set(self.__dict__.get("_table") or ())
        forward = self.__dict__.get("_forward")
        if forward is not None:
            names |= set(dir(_resolve(forward)))
        return sorted(names)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `tapegpu.<mapped private path>` modules (tapegpu.python.*, tapegpu.keras.src.*,
    tapegpu.keras.engine.*, ...)."""

    ROOTS = ("tapegpu.python", "tapegpu.keras.src", "tapegpu.keras.engine",
             "tapegpu.keras.utils.", "tapegpu.keras.layers.", "tapegpu.keras.models.",
             "tapegpu.keras.optimizers.")

    def find_spec(self, fullname, path=None, target=None):
        if not (fullname in ("tapegpu.python", "tapegpu.keras.src", "tapegpu.keras.engine") or
                fullname.startswith(tuple(r if r.endswith(".") else r + "."
                                          for r in self.ROOTS))):
            return None
        rel = fullname[len("tapegpu."):]
        if rel not in MODULES and rel not in _OWN and _public_of(rel) is None:
            tf_name = "tensorflow." + rel if rel.startswith("python") else rel
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: {tf_name} is a private module of TensorFlow or "
                f"Keras that tapegpu does not map (the mapped ones are listed in "
                f"tapegpu/compat/private_paths.py); import the public name instead (tg.X for "
                f"tf.X, tg.keras.X for keras.X)", name=fullname)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        rel = spec.name[len("tapegpu."):]
        if rel in _OWN:
            return _Module(spec.name, _OWN[rel], None)
        target = MODULES.get(rel)
        if target is None:
            return _Module(spec.name, {}, _public_of(rel))
        if isinstance(target, str):
            return _Module(spec.name, {}, target)
        return _Module(spec.name, dict(target), None)

    def exec_module(self, module):
        pass


def install(tg):
    """Adds the finder (once), so that the mapped private paths import; the Keras namespaces
    that have mapped submodules become packages (`tapegpu.keras.utils.np_utils`)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
    for ns in (tg.keras.utils, tg.keras.models, tg.keras.optimizers):
        if not hasattr(ns, "__path__"):
            ns.__path__ = []
