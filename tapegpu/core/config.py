"""`tg.config`'s TensorFlow surface: the physical and logical devices, memory growth and the
thread-pool settings.

TensorFlow lists device types "CPU" and "GPU"; so does tapegpu (the CPU always, each GPU that
CuPy can use). The CUDA emulator is no TensorFlow device: `tg.config.list_devices()` lists it.
"""
from collections import namedtuple

from .. import backends as _backend
from .device import PhysicalDevice

LogicalDevice = namedtuple("LogicalDevice", "name device_type")

def _devices(device_type):
    """(type, index) of the devices of `device_type` here (None: all; a type other than CPU and
    GPU: none, as in TensorFlow), GPUs first as TensorFlow orders them, then the CPU."""
    kind = None if device_type is None else str(device_type).upper()
    found = [("GPU", i) for i in range(_backend.gpu_count())] + [("CPU", 0)]
    return [(t, i) for t, i in found if kind is None or t == kind]


def list_physical_devices(device_type=None):
    """The devices of `device_type` ("CPU", "GPU"; None: all) as
    `PhysicalDevice(name, device_type)`, as `tf.config.list_physical_devices`.

    >>> tg.config.list_physical_devices("CPU")
    [PhysicalDevice(name='/physical_device:CPU:0', device_type='CPU')]
    """
    return [PhysicalDevice(f"/physical_device:{t}:{i}", t)
            for t, i in _devices(device_type)]


def list_logical_devices(device_type=None):
    """The devices tensors can be placed on, as `LogicalDevice(name, device_type)` (one per
    physical device), as `tf.config.list_logical_devices`; the names work in `tg.device`.

    >>> tg.config.list_logical_devices("CPU")[0].name
    '/device:CPU:0'
    """
    return [LogicalDevice(f"/device:{t}:{i}", t)
            for t, i in _devices(device_type)]


def get_visible_devices(device_type=None):
    """The physical devices tapegpu uses (all of them), as `tf.config.get_visible_devices`.

    >>> [d.device_type for d in tg.config.get_visible_devices("CPU")]
    ['CPU']
    """
    return list_physical_devices(device_type)


# -- tg.config.experimental: memory growth ---------------------------------------------------------

_memory_growth = {}


def _physical(device, fn):
    if not isinstance(device, PhysicalDevice) or device not in list_physical_devices():
        raise ValueError(f"config.experimental.{fn}: unrecognized device {device!r}; give one of "
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
# TensorFlow's thread pools size its own kernels. tapegpu's CPU work runs in numpy and its BLAS,
# whose thread counts are fixed by OMP_NUM_THREADS / OPENBLAS_NUM_THREADS before numpy loads;
# with threadpoolctl installed, the intra-op setting is applied to the BLAS at once.

_threads = {"intra": 0, "inter": 0}


def set_intra_op_parallelism_threads(num_threads):
    """Sets the threads one op may use (0: the system's choice), as
    `tf.config.threading.set_intra_op_parallelism_threads`; applied to numpy's BLAS when
    threadpoolctl is installed, else only recorded.

    >>> tg.config.threading.set_intra_op_parallelism_threads(0)
    >>> tg.config.threading.get_intra_op_parallelism_threads()
    0
    """
    n = _count(num_threads, "set_intra_op_parallelism_threads")
    _threads["intra"] = n
    try:
        import threadpoolctl  # optional: resizes the BLAS thread pools of this process
    except ImportError:
        return
    if n:
        threadpoolctl.threadpool_limits(n, user_api="blas")


def get_intra_op_parallelism_threads():
    """The intra-op setting (0: the system's choice)."""
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
