"""tg.config's device configuration: logical devices, visibility, soft placement, optimizer
options, and tg.debugging.set_log_device_placement."""
import pytest

import tapegpu as tg
from tapegpu import backends

SINGLE_DEVICE = True


def _cpu():
    return tg.config.list_physical_devices("CPU")[0]


def test_logical_cpus_are_listed_and_placeable():
    assert tg.config.get_logical_device_configuration(_cpu()) is None
    tg.config.set_logical_device_configuration(_cpu(),
                                               [tg.config.LogicalDeviceConfiguration()] * 8)
    names = [d.name for d in tg.config.list_logical_devices("CPU")]
    assert names == [f"/device:CPU:{i}" for i in range(8)]
    assert len(tg.config.get_logical_device_configuration(_cpu())) == 8
    with tg.device("/device:CPU:3"):
        x = tg.ones([2]) * 2.0
    assert x.numpy().tolist() == [2.0, 2.0]  # computed on the one CPU
    assert x.device.endswith("CPU:0")
    with pytest.raises(ValueError, match="8 logical CPU"):
        tg.device("/device:CPU:8")


def test_configuration_is_fixed_once_its_devices_were_used():
    one = [tg.config.LogicalDeviceConfiguration()] * 2
    tg.config.set_logical_device_configuration(_cpu(), one)
    tg.config.set_logical_device_configuration(_cpu(), one)  # the same again: fine
    tg.config.set_logical_device_configuration(_cpu(), one * 2)  # not used yet: changes
    tg.device("/CPU:1")
    tg.config.set_logical_device_configuration(_cpu(), one * 2)
    with pytest.raises(RuntimeError, match="Virtual devices cannot be modified after being "
                                           "initialized"):
        tg.config.set_logical_device_configuration(_cpu(), one)


def test_tensorflows_checks_of_logical_configurations():
    with pytest.raises(ValueError, match="Setting memory limit on CPU virtual devices is "
                                         "currently not supported"):
        tg.config.set_logical_device_configuration(
            _cpu(), [tg.config.LogicalDeviceConfiguration(memory_limit=100)])
    with pytest.raises(ValueError, match="experimental_priority"):
        tg.config.set_logical_device_configuration(
            _cpu(), [tg.config.LogicalDeviceConfiguration(experimental_priority=1)])
    with pytest.raises(ValueError, match="unrecognized device"):
        tg.config.set_logical_device_configuration("CPU:0", [])
    c = tg.config.experimental.VirtualDeviceConfiguration()
    assert c == tg.config.LogicalDeviceConfiguration() and c.memory_limit is None
    tg.config.experimental.set_virtual_device_configuration(_cpu(), [c, c])
    assert len(tg.config.list_logical_devices("CPU")) == 2
    assert tg.config.experimental.list_physical_devices("CPU") == [_cpu()]


def test_hiding_the_gpus_places_on_the_cpu():
    gpus = tg.config.list_physical_devices("GPU")
    resolved = backends._default_backend
    if gpus and resolved is not None and resolved.device_type == "GPU":
        # the default device is a GPU already: as TensorFlow after initialisation
        with pytest.raises(RuntimeError, match="Visible devices cannot be modified after "
                                               "being initialized"):
            tg.config.set_visible_devices([_cpu()])
        return
    tg.config.set_visible_devices([_cpu()])  # hides every GPU
    assert tg.config.get_visible_devices("GPU") == []
    assert tg.config.list_logical_devices("GPU") == []
    assert backends.gpu_count() == 0
    assert tg.config.list_physical_devices("GPU") == gpus  # still listed, as in TF
    with pytest.raises(ValueError, match="the CPU must stay visible"):
        tg.config.set_visible_devices([])
    with pytest.raises(ValueError, match="unrecognized device"):
        tg.config.set_visible_devices(["CPU:0"])


def test_soft_placement_falls_back_to_the_cpu():
    assert tg.config.get_soft_device_placement() is False
    with pytest.raises(RuntimeError, match="no such GPU"):
        tg.device("gpu:99")
    tg.config.set_soft_device_placement(True)
    with tg.device("gpu:99"):
        x = tg.ones([1])
    assert x.device.endswith("CPU:0") and tg.config.get_soft_device_placement()
    with tg.device("/device:CPU:5"):  # a logical CPU that was not configured
        y = tg.ones([1])
    assert y.device.endswith("CPU:0")


def test_optimizer_options_are_recorded():
    # TF lists these two always, the toggles once set
    assert tg.config.optimizer.get_experimental_options() == \
        {"disable_model_pruning": False, "disable_meta_optimizer": False}
    tg.config.optimizer.set_experimental_options({"layout_optimizer": False,
                                                  "min_graph_nodes": -1})
    assert tg.config.optimizer.get_experimental_options() == \
        {"layout_optimizer": False, "disable_model_pruning": False,
         "disable_meta_optimizer": False, "min_graph_nodes": -1}
    with pytest.raises(TypeError, match="must be True or False"):
        tg.config.optimizer.set_experimental_options({"remapping": 1})
    with pytest.raises(ValueError, match="unknown option 'fast'"):
        tg.config.optimizer.set_experimental_options({"fast": True})


def test_log_device_placement_prints_each_op(capsys):
    x = tg.ones([2])
    tg.debugging.set_log_device_placement(True)
    try:
        _ = x * 2.0
    finally:
        tg.debugging.set_log_device_placement(False)
    _ = x + 1.0
    err = capsys.readouterr().err
    assert "Executing op multiply in device /job:localhost/replica:0/task:0/device:CPU:0" in err
    assert "op add" not in err
    assert not tg.debugging.get_log_device_placement()
