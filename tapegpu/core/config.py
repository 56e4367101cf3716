"""`tg.config`'s TensorFlow surface: the physical and logical devices, memory growth and the
thread-pool settings.

TensorFlow lists device types "CPU" and "GPU"; so does tapegpu (the CPU always, each GPU that
CuPy can use). The CUDA emulator is no TensorFlow device: `tg.config.list_devices()` lists it.
"""
import os
from collections import namedtuple

try:  # a dependency; an environment installed before it was one imports tapegpu without it
    import threadpoolctl
except ImportError:
    threadpoolctl = None

from .. import backends as _backend
from .device import PhysicalDevice

LogicalDevice = namedtuple("LogicalDevice", "name device_type")

_Placement = _backend.Placement


def _devices(device_type):
    """(type, index) of the physical devices of `device_type` here (None: all; a type other
    than CPU and GPU: none, as in TensorFlow), GPUs first as TensorFlow orders them, then the
    CPU."""
    kind = None if device_type is None else str(device_type).upper()
    found = [("GPU", i) for i in range(_backend.physical_gpu_count())] + [("CPU", 0)]
    return [(t, i) for t, i in found if kind is None or t == kind]


def list_physical_devices(device_type=None):
    """The devices of `device_type` ("CPU", "GPU"; None: all) as
    `PhysicalDevice(name, device_type)`, as `tf.config.list_physical_devices` (hidden ones
    included: see `set_visible_devices`).

    >>> tg.config.list_physical_devices("CPU")
    [PhysicalDevice(name='/physical_device:CPU:0', device_type='CPU')]
    """
    return [PhysicalDevice(f"/physical_device:{t}:{i}", t)
            for t, i in _devices(device_type)]


def list_logical_devices(device_type=None):
    """The devices tensors can be placed on, as `LogicalDevice(name, device_type)`, as
    `tf.config.list_logical_devices`: one per visible physical device, or as many as
    `set_logical_device_configuration` split it into. The names work in `tg.device`; a
    physical device's logical devices all compute on it.

    >>> tg.config.list_logical_devices("CPU")[0].name
    '/device:CPU:0'
    """
    kind = None if device_type is None else str(device_type).upper()
    gpus = _Placement.logical_gpus
    n_gpu = len(gpus) if gpus is not None else _backend.gpu_count()
    found = [("GPU", i) for i in range(n_gpu)] + \
            [("CPU", i) for i in range(_Placement.logical_cpus)]
    return [LogicalDevice(f"/device:{t}:{i}", t) for t, i in found if kind in (None, t)]


def get_visible_devices(device_type=None):
    """The physical devices tapegpu may use (all, unless `set_visible_devices` hid some), as
    `tf.config.get_visible_devices`.

    >>> [d.device_type for d in tg.config.get_visible_devices("CPU")]
    ['CPU']
    """
    out = list_physical_devices(device_type)
    if _Placement.visible_gpus is None:
        return out
    shown = {f"/physical_device:GPU:{i}" for i in _Placement.visible_gpus}
    return [d for d in out if d.device_type != "GPU" or d.name in shown]


def set_visible_devices(devices, device_type=None):
    """Makes only `devices` (a PhysicalDevice or a list of them) of `device_type` (None: of
    every type) visible, as `tf.config.set_visible_devices`: hidden GPUs are not used, so
    hiding them all places tensors on the CPU. The CPU cannot be hidden here (tapegpu always
    has it). As TensorFlow, a change after the runtime used the devices raises RuntimeError:
    here, after the default device was resolved to a GPU that would be hidden.

    >>> tg.config.set_visible_devices(tg.config.list_physical_devices())   # all of them
    >>> tg.config.get_visible_devices("CPU")
    [PhysicalDevice(name='/physical_device:CPU:0', device_type='CPU')]
    """
    if isinstance(devices, PhysicalDevice):
        devices = [devices]
    devices = list(devices)
    physical = list_physical_devices()
    for d in devices:
        if not isinstance(d, PhysicalDevice) or d not in physical:
            raise ValueError(f"config.set_visible_devices: unrecognized device {d!r}; give "
                             f"devices of tg.config.list_physical_devices()")
    kind = None if device_type is None else str(device_type).upper()
    if kind not in (None, "CPU", "GPU"):
        raise ValueError(f"config.set_visible_devices: device_type must be 'CPU', 'GPU' or "
                         f"None, got {device_type!r}")
    if kind in (None, "CPU") and not any(d.device_type == "CPU" for d in devices):
        raise ValueError("config.set_visible_devices: the CPU must stay visible (tapegpu "
                         "always has it); pass tg.config.list_physical_devices('CPU') too")
    if kind == "CPU":
        return  # the CPU is the only one of its type: nothing changes
    gpus = sorted(int(d.name.rsplit(":", 1)[1]) for d in devices if d.device_type == "GPU")
    if gpus == list(range(_backend.physical_gpu_count())):
        gpus = None  # all visible
    if gpus == _Placement.visible_gpus:
        return
    resolved = _backend._default_backend
    if "GPU" in _Placement.used or (resolved is not None and resolved.device_type == "GPU"):
        raise RuntimeError("Visible devices cannot be modified after being initialized")
    _Placement.visible_gpus = gpus
    _apply_logical()  # logical GPUs are counted over the visible ones


# -- logical devices ----------------------------------------------------------------------------

class LogicalDeviceConfiguration:
    """How to make one logical device of a physical one, as
    `tf.config.LogicalDeviceConfiguration(memory_limit=None, experimental_priority=None,
    experimental_device_ordinal=None)`; give a list of them to `set_logical_device_configuration`.
    `memory_limit` (MiB) is required for GPU logical devices (recorded: CuPy's pool is not
    capped by it) and refused for CPU ones, as in TensorFlow.

    >>> tg.config.LogicalDeviceConfiguration(memory_limit=1024).memory_limit
    1024
    """

    __slots__ = ("memory_limit", "experimental_priority", "experimental_device_ordinal")

    def __init__(self, memory_limit=None, experimental_priority=None,
                 experimental_device_ordinal=None):
        self.memory_limit = memory_limit
        self.experimental_priority = experimental_priority
        self.experimental_device_ordinal = experimental_device_ordinal

    def _key(self):
        return (self.memory_limit, self.experimental_priority, self.experimental_device_ordinal)

    def __eq__(self, other):
        return isinstance(other, LogicalDeviceConfiguration) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (f"LogicalDeviceConfiguration(memory_limit={self.memory_limit!r}, "
                f"experimental_priority={self.experimental_priority!r}, "
                f"experimental_device_ordinal={self.experimental_device_ordinal!r})")


VirtualDeviceConfiguration = LogicalDeviceConfiguration  # tf.config.experimental's old name
_logical_config = {}  # PhysicalDevice -> [LogicalDeviceConfiguration]


def set_logical_device_configuration(device, logical_devices):
    """Splits the physical `device` into the logical devices `logical_devices` (a list of
    `LogicalDeviceConfiguration`; None: back to one), as
    `tf.config.set_logical_device_configuration`. TensorFlow's guides make several CPU
    devices this way ('/device:CPU:0' ... for MirroredStrategy or DTensor meshes); in tapegpu
    they all compute on the one CPU (no speed-up, the same numbers).

    Checks as TensorFlow's: the device must be listed by `list_physical_devices`; CPU logical
    devices take no memory_limit or experimental_priority (ValueError); GPU ones need a
    memory_limit. Changing the configuration after its logical devices were used (a
    `tg.device` block on one of them, a DTensor mesh over them) raises RuntimeError "Virtual
    devices cannot be modified after being initialized"; setting the same one again is fine.

    >>> cpu = tg.config.list_physical_devices("CPU")[0]
    >>> tg.config.set_logical_device_configuration(
    ...     cpu, [tg.config.LogicalDeviceConfiguration()] * 4)
    >>> len(tg.config.list_logical_devices("CPU"))
    4
    """
    _physical(device, "set_logical_device_configuration", "config")
    if logical_devices is not None:
        logical_devices = list(logical_devices)
        for vdev in logical_devices:
            if not isinstance(vdev, LogicalDeviceConfiguration):
                raise ValueError(f"config.set_logical_device_configuration: logical_devices "
                                 f"must be LogicalDeviceConfiguration objects, got {vdev!r}")
            if device.device_type == "CPU":
                if vdev.memory_limit is not None:
                    raise ValueError("Setting memory limit on CPU virtual devices is currently "
                                     "not supported")
                if vdev.experimental_priority is not None:
                    raise ValueError("Setting experimental_priority on CPU virtual devices is "
                                     "currently not supported")
            elif vdev.memory_limit is None:
                raise ValueError("Setting memory limit is required for GPU virtual devices")
        if not logical_devices:
            raise ValueError("config.set_logical_device_configuration: logical_devices must "
                             "not be empty (None restores one logical device)")
    if _logical_config.get(device) == logical_devices:
        return
    if device.device_type in _Placement.used:
        raise RuntimeError("Virtual devices cannot be modified after being initialized")
    if logical_devices is None:
        _logical_config.pop(device, None)
    else:
        _logical_config[device] = logical_devices
    _apply_logical()


def _apply_logical():
    cpus = [c for d, c in _logical_config.items() if d.device_type == "CPU"]
    _Placement.logical_cpus = len(cpus[0]) if cpus else 1
    split = {int(d.name.rsplit(":", 1)[1]): len(c) for d, c in _logical_config.items()
             if d.device_type == "GPU"}
    if not split:
        _Placement.logical_gpus = None
        return
    out = []
    for index in range(_backend.gpu_count()):
        physical = index if _Placement.visible_gpus is None else _Placement.visible_gpus[index]
        out += [index] * split.get(physical, 1)
    _Placement.logical_gpus = out


def get_logical_device_configuration(device):
    """The list of `LogicalDeviceConfiguration` that `device` was split into, or None when it
    was not, as `tf.config.get_logical_device_configuration`.

    >>> cpu = tg.config.list_physical_devices("CPU")[0]
    >>> tg.config.set_logical_device_configuration(
    ...     cpu, [tg.config.LogicalDeviceConfiguration()] * 4)
    >>> len(tg.config.get_logical_device_configuration(cpu))
    4
    """
    _physical(device, "get_logical_device_configuration", "config")
    found = _logical_config.get(device)
    return list(found) if found is not None else None


def _reset_placement():
    """Back to one logical device per physical device, all visible, strict placement, nothing
    used (for tests: the configuration is process-wide)."""
    _logical_config.clear()
    _Placement.visible_gpus = None
    _Placement.logical_cpus = 1
    _Placement.logical_gpus = None
    _Placement.soft = False
    _Placement.used.clear()
    _optimizer_options.clear()


# -- soft placement and the graph optimizer's options ------------------------------------------

def set_soft_device_placement(enabled):
    """Whether a device that is not here falls back to one that is, as
    `tf.config.set_soft_device_placement`: with it on, `tg.device('gpu')` on a machine without
    a GPU (or a logical CPU that was not configured) places on the CPU instead of raising.
    tapegpu's default is off (TensorFlow's eager default is on): a device that is not there is
    an error unless asked for.

    >>> tg.config.set_soft_device_placement(True)
    >>> with tg.device("/device:GPU:7"):
    ...     x = tg.ones(2)
    >>> tg.config.set_soft_device_placement(False)
    """
    _Placement.soft = bool(enabled)


def get_soft_device_placement():
    """Whether soft device placement is on (False unless `set_soft_device_placement(True)`),
    as `tf.config.get_soft_device_placement`.

    >>> tg.config.get_soft_device_placement()
    False
    """
    return _Placement.soft


# Grappler's options in the order TensorFlow's get_experimental_options lists them
_OPTIMIZER_OPTIONS = ("layout_optimizer", "constant_folding", "shape_optimization",
                      "remapping", "arithmetic_optimization", "dependency_optimization",
                      "loop_optimization", "function_optimization", "debug_stripper",
                      "disable_model_pruning", "scoped_allocator_optimization",
                      "pin_to_host_optimization", "implementation_selector",
                      "auto_mixed_precision", "use_plugin_optimizers", "disable_meta_optimizer",
                      "auto_mixed_precision_onednn_bfloat16", "auto_mixed_precision_mkl",
                      "min_graph_nodes")
_ALWAYS = ("disable_model_pruning", "disable_meta_optimizer")  # listed even when not set
_optimizer_options = {}


def set_experimental_options(options):
    """Records Grappler's options (a dict such as `{"layout_optimizer": False}`), as
    `tf.config.optimizer.set_experimental_options`; `get_experimental_options` returns them.
    tapegpu's graph optimizations (tg.function's fusion and memory plan) are not Grappler and
    are not steered by these options. Unknown keys raise ValueError, naming the valid ones.

    >>> tg.config.optimizer.set_experimental_options({"constant_folding": True})
    >>> tg.config.optimizer.get_experimental_options()["constant_folding"]
    True
    """
    if not isinstance(options, dict):
        raise TypeError(f"config.optimizer.set_experimental_options: options must be a dict, "
                        f"got {options!r}")
    for key, value in options.items():
        if key not in _OPTIMIZER_OPTIONS:
            raise ValueError(f"config.optimizer.set_experimental_options: unknown option "
                             f"{key!r}; valid are {', '.join(_OPTIMIZER_OPTIONS)}")
        if key == "min_graph_nodes":
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"config.optimizer.set_experimental_options: min_graph_nodes "
                                f"must be an int, got {value!r}")
        elif not isinstance(value, bool):
            raise TypeError(f"config.optimizer.set_experimental_options: {key} must be True or "
                            f"False, got {value!r}")
    _optimizer_options.update(options)


def get_experimental_options():
    """The options as TensorFlow's `tf.config.optimizer.get_experimental_options` reports
    them: those set (min_graph_nodes when not 0), and disable_model_pruning and
    disable_meta_optimizer always (False unless set).

    >>> tg.config.optimizer.get_experimental_options()["disable_meta_optimizer"]
    False
    """
    out = {}
    for key in _OPTIMIZER_OPTIONS:
        if key in _optimizer_options:
            if key != "min_graph_nodes" or _optimizer_options[key] != 0:
                out[key] = _optimizer_options[key]
        elif key in _ALWAYS:
            out[key] = False
    return out


# -- tg.config.experimental: memory growth ---------------------------------------------------------

_memory_growth = {}


def _physical(device, fn, namespace="config.experimental"):
    if not isinstance(device, PhysicalDevice) or device not in list_physical_devices():
        raise ValueError(f"{namespace}.{fn}: unrecognized device {device!r}; give one of "
                         f"tg.config.list_physical_devices()")
    return device.name


def set_memory_growth(device, enable):
    """Records whether a GPU's memory grows on demand, as
    `tf.config.experimental.set_memory_growth`. CuPy's memory pool always grows on demand
    (it never reserves the whole GPU up front), so this changes nothing but what
    `get_memory_growth` returns.

    >>> for gpu in tg.config.list_physical_devices("GPU"):
    ...     tg.config.experimental.set_memory_growth(gpu, True)
    """
    name = _physical(device, "set_memory_growth")
    if device.device_type != "GPU":
        raise ValueError(f"config.experimental.set_memory_growth: cannot set memory growth on "
                         f"non-GPU devices ({name})")
    _memory_growth[name] = bool(enable)


def get_memory_growth(device):
    """What `set_memory_growth` recorded for `device` (False until then), as
    `tf.config.experimental.get_memory_growth`.

    >>> tg.config.experimental.get_memory_growth(tg.config.list_physical_devices()[-1])
    False
    """
    return _memory_growth.get(_physical(device, "get_memory_growth"), False)


# -- tg.config.threading ------------------------------------------------------------------------
# TensorFlow sizes its own kernels' thread pools. tapegpu's CPU work runs in numpy, whose matrix
# products run in its BLAS (OpenBLAS in numpy's wheels), by default with one thread per core.
# OpenBLAS splits a product between its threads and waits for all of them, spinning: when another
# process holds a core, every product waits for the thread that is not running, while the
# spinning ones take the time it needs (docs/benchmarks.md, "Threads on a loaded machine": 2.3x
# slower than one thread on 2 cores with one busy process). tapegpu's default therefore leaves a
# core to the rest of the machine: cores - 1 BLAS threads (1 on 2 cores), set when tapegpu is
# imported, unless a BLAS variable (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, ...) says otherwise.
# threadpoolctl resizes the BLAS already loaded (numpy is often imported before tapegpu, after
# which the variables no longer act); it is a dependency: small, pure Python, no dependencies.

BLAS_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                  "BLIS_NUM_THREADS")
_threads = {"intra": 0, "inter": 0}


def cores():
    """The cores this process may run on (its CPU affinity), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_blas_threads():
    """tapegpu's choice of BLAS threads when intra-op is 0: cores - 1, at least 1."""
    return max(1, cores() - 1)


def blas_threads():
    """The threads of the BLAS that numpy uses now (threadpoolctl's reading), or None when no
    BLAS is found (or threadpoolctl is not installed)."""
    if threadpoolctl is None:
        return None
    counts = [lib["num_threads"] for lib in threadpoolctl.threadpool_info()
              if lib["user_api"] == "blas"]
    return max(counts) if counts else None


def blas_variables():
    """{name: value} of the BLAS thread variables set in the environment."""
    return {k: os.environ[k] for k in BLAS_VARIABLES if os.environ.get(k, "").strip()}


def _apply_blas_threads():
    """Sizes the BLAS for the intra-op setting: N threads, or for 0 tapegpu's default (left
    as the BLAS variables set it when one is set)."""
    n = _threads["intra"]
    if n == 0:
        if blas_variables():
            n = _threads.get("from_variables")
        else:
            n = default_blas_threads()
    if n and threadpoolctl is not None:  # without it the BLAS keeps numpy's threads
        threadpoolctl.threadpool_limits(n, user_api="blas")


def set_intra_op_parallelism_threads(num_threads):
    """Sets the threads one op may use, as
    `tf.config.threading.set_intra_op_parallelism_threads`: numpy's BLAS (matrix products,
    solves) gets `num_threads` threads at once. 0, the default, is tapegpu's choice: cores - 1
    (at least 1), which leaves a core to the rest of the machine, because numpy's BLAS slows
    down by several times when one of its threads waits for a core; or, where
    OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / MKL_NUM_THREADS is set, what that set.

    >>> tg.config.threading.set_intra_op_parallelism_threads(1)
    >>> tg.config.threading.get_intra_op_parallelism_threads()
    1
    >>> tg.config.threading.set_intra_op_parallelism_threads(0)   # back to the default
    """
    _threads["intra"] = _count(num_threads, "set_intra_op_parallelism_threads")
    _apply_blas_threads()


def get_intra_op_parallelism_threads():
    """The intra-op setting (0: tapegpu's choice, see `set_intra_op_parallelism_threads`)."""
    return _threads["intra"]


def set_inter_op_parallelism_threads(num_threads):
    """Sets the threads for independent ops (0: the system's choice), as
    `tf.config.threading.set_inter_op_parallelism_threads`. tapegpu runs ops one after
    another in the calling thread, so this is only recorded.

    >>> tg.config.threading.set_inter_op_parallelism_threads(2)
    >>> tg.config.threading.get_inter_op_parallelism_threads()
    2
    """
    _threads["inter"] = _count(num_threads, "set_inter_op_parallelism_threads")


def get_inter_op_parallelism_threads():
    """The inter-op setting (0: the system's choice)."""
    return _threads["inter"]


def _count(n, fn):
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"config.threading.{fn}: num_threads must be an int >= 0 (0: the "
                         f"system's choice), got {n!r}")
    return n


# the BLAS's count as its variables left it (restored by intra-op 0), then tapegpu's default
_threads["from_variables"] = blas_threads()
_apply_blas_threads()


# -- tg.config.experimental: TensorFloat-32 ----------------------------------------------------
# TF32 rounds the float32 inputs of matrix products (and so of convolutions, which are products
# here) to 10 bits of mantissa on tensor cores: about 8x float32's speed on Ampere and newer
# GPUs. TensorFlow and JAX enable it by default; CuPy leaves it off unless CUPY_TF32=1. tapegpu
# follows TensorFlow: on by default, applied to CuPy's cuBLAS products through its compute type
# for float32 (cupy._core.set_compute_type) on GPUs of compute capability 8.0 or newer (older
# ones and the CPU compute in full float32 whatever the switch says, as TensorFlow).

_COMPUTE_TYPE_DEFAULT, _COMPUTE_TYPE_TF32 = 1, 7  # cupy._core._routines_linalg's values
_tf32 = {"enabled": True}


def enable_tensor_float_32_execution(enabled):
    """Enables or disables TensorFloat-32 for float32 matrix products and convolutions on GPUs
    of compute capability 8.0 (Ampere) or newer, as
    `tf.config.experimental.enable_tensor_float_32_execution`; on by default, as TensorFlow.
    Other hardware (the CPU, older GPUs) computes in full float32 either way.

    >>> tg.config.experimental.enable_tensor_float_32_execution(False)
    >>> tg.config.experimental.tensor_float_32_execution_enabled()
    False
    >>> tg.config.experimental.enable_tensor_float_32_execution(True)
    """
    _tf32["enabled"] = bool(enabled)
    apply_tensor_float_32()


def tensor_float_32_execution_enabled():
    """Whether TensorFloat-32 is enabled (True by default), as
    `tf.config.experimental.tensor_float_32_execution_enabled`.

    >>> tg.config.experimental.tensor_float_32_execution_enabled()
    True
    """
    return _tf32["enabled"]


def apply_tensor_float_32():
    """Sets CuPy's compute type for float32 products from the switch, where tapegpu's GPU
    backend has loaded CuPy and its first GPU has tensor cores with TF32 (compute capability
    8.0+); a no-op otherwise (the backend calls this when it is created)."""
    import sys
    if "tapegpu.backends.cuda" not in sys.modules:
        return  # CuPy not loaded yet: the GPU backend applies the switch when it is created
    cupy = sys.modules["tapegpu.backends.cuda"].cupy
    core = getattr(cupy, "_core", None)
    if core is None or not hasattr(core, "set_compute_type"):
        return
    try:
        tf32 = int(cupy.cuda.Device(0).compute_capability) >= 80
    except Exception:  # no usable device: nothing computes on it
        return
    import numpy as np
    core.set_compute_type(np.float32, _COMPUTE_TYPE_TF32 if tf32 and _tf32["enabled"]
                          else _COMPUTE_TYPE_DEFAULT)

