"""`tf.distribute.OneDeviceStrategy` and `tf.distribute.experimental.CentralStorageStrategy`,
on MirroredStrategy's machinery (tapegpu/distribute/strategy.py)."""
from .experimental import CommunicationImplementation, CommunicationOptions
from . import cross_device
from .strategy import (MirroredStrategy, MultiWorkerMirroredStrategy, Strategy,
                       StrategyExtended, _replica_devices)


class OneDeviceStrategy(Strategy):
    """Everything on one device (TensorFlow's `tf.distribute.OneDeviceStrategy(device)`): one
    replica; variables made under `scope()` and the inputs of `run` go to `device`, and `fn`
    runs there. Code written for a strategy runs unchanged, on one device.

    >>> strategy = tg.distribute.OneDeviceStrategy("/cpu:0")
    >>> strategy.num_replicas_in_sync, strategy.extended.worker_devices
    (1, ('/job:localhost/replica:0/task:0/device:CPU:0',))
    >>> float(strategy.reduce("SUM", strategy.run(lambda x: x * 2.0, args=(tg.ones([3]),)),
    ...                       axis=0))
    6.0
    """

    def __init__(self, device):
        what = "OneDeviceStrategy"
        if not isinstance(device, str):
            raise ValueError(f"tg.distribute.{what}: device must be a device name such as "
                             f"'/gpu:0' or '/cpu:0', got {device!r}")
        super().__init__(_replica_devices([device], what), cross_device.ReductionToOneDevice(),
                         what=what)


class CentralStorageStrategy(MirroredStrategy):
    """Synchronous training with the variables kept on one device and the computation
    replicated over the local devices (TensorFlow's
    `tf.distribute.experimental.CentralStorageStrategy(compute_devices=None,
    parameter_device=None)`). `compute_devices` default to every GPU (else the CPU);
    `parameter_device` to the CPU when there are several compute devices, else the one.

    Each step's gradients are combined over the replicas and applied once, so the numbers
    are TensorFlow's. The replicas read copies of the variables that every update rewrites
    from the one updated value (MirroredStrategy's machinery), rather than reading the
    parameter device's copy over the bus; `extended.parameter_devices` names that device.

    >>> strategy = tg.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
    >>> strategy.extended.parameter_devices, strategy.num_replicas_in_sync
    (('/job:localhost/replica:0/task:0/device:CPU:0',), 2)
    """

    def __init__(self, compute_devices=None, parameter_device=None):
        super().__init__(compute_devices)
        self._what = "CentralStorageStrategy"
        if parameter_device is None:
            parameter_device = self._devices[0].name if len(self._devices) == 1 else "/cpu:0"
        (self._parameter_device,) = _replica_devices([parameter_device],
                                                     "CentralStorageStrategy")
        self.extended = _CentralExtended(self)


class _CentralExtended(StrategyExtended):
    @property
    def parameter_devices(self):
        return (self._strategy._parameter_device.name,)


class ExperimentalMultiWorkerMirroredStrategy(MultiWorkerMirroredStrategy):
    """TensorFlow's older `tf.distribute.experimental.MultiWorkerMirroredStrategy(
    communication=CommunicationImplementation.AUTO, cluster_resolver=None)`: the same
    strategy as `tg.distribute.MultiWorkerMirroredStrategy`, its collectives chosen by
    `communication`.

        strategy = tg.distribute.experimental.MultiWorkerMirroredStrategy()   # under mpiexec
    """

    def __init__(self, communication=CommunicationImplementation.AUTO, cluster_resolver=None):
        super().__init__(cluster_resolver,
                         CommunicationOptions(implementation=communication))
