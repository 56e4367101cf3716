"""tg.config's TensorFlow surface: physical and logical devices, memory growth, threading."""
import pytest

import tapegpu as tg
from tapegpu import backends


def test_physical_and_logical_devices_as_tensorflow_lists_them():
    n_gpu = backends.gpu_count()
    phys = tg.config.list_physical_devices()
    assert [d.device_type for d in phys] == ["GPU"] * n_gpu + ["CPU"]
    assert phys[-1] == tg.config.PhysicalDevice("/physical_device:CPU:0", "CPU")
    assert phys[-1].name == "/physical_device:CPU:0" and phys[-1].device_type == "CPU"
    assert len(tg.config.list_physical_devices("GPU")) == n_gpu
    assert tg.config.list_physical_devices("gpu") == tg.config.list_physical_devices("GPU")
    assert tg.config.list_physical_devices("TPU") == []
    logical = tg.config.list_logical_devices()
    assert [d.device_type for d in logical] == [d.device_type for d in phys]
    for d in logical:  # each logical device's name places tensors on it
        with tg.device(d.name):
            assert tg.zeros(1).device.endswith(f"device:{d.device_type}:0")
    assert tg.config.get_visible_devices() == phys


def test_memory_growth_is_recorded_per_gpu():
    cpu = tg.config.list_physical_devices("CPU")[0]
    assert tg.config.experimental.get_memory_growth(cpu) is False
    with pytest.raises(ValueError, match="non-GPU"):
        tg.config.experimental.set_memory_growth(cpu, True)
    for gpu in tg.config.list_physical_devices("GPU"):
        tg.config.experimental.set_memory_growth(gpu, True)
        assert tg.config.experimental.get_memory_growth(gpu) is True
        tg.config.experimental.set_memory_growth(gpu, False)
        assert tg.config.experimental.get_memory_growth(gpu) is False
    with pytest.raises(ValueError, match="unrecognized device"):
        tg.config.experimental.set_memory_growth("/physical_device:CPU:0", True)
    with pytest.raises(ValueError, match="unrecognized device"):
        tg.config.experimental.get_memory_growth(
            tg.config.PhysicalDevice("/physical_device:GPU:9", "GPU"))


def test_threading_settings():
    t = tg.config.threading
    before = t.get_intra_op_parallelism_threads(), t.get_inter_op_parallelism_threads()
    try:
        t.set_intra_op_parallelism_threads(0)
        t.set_inter_op_parallelism_threads(3)
        assert t.get_intra_op_parallelism_threads() == 0
        assert t.get_inter_op_parallelism_threads() == 3
        with pytest.raises(ValueError, match="num_threads must be an int >= 0"):
            t.set_intra_op_parallelism_threads(-1)
        with pytest.raises(ValueError, match="num_threads"):
            t.set_inter_op_parallelism_threads(1.5)
    finally:
        t.set_intra_op_parallelism_threads(before[0])
        t.set_inter_op_parallelism_threads(before[1])


def test_tf_dtypes_namespace_holds_the_dtypes_aliases_and_cast():
    """tf.dtypes.int32 (TF's graphs guide), tf.dtypes.as_dtype, tf.dtypes.cast; TF's aliases
    `double` and `half`; a dtype tapegpu lacks is not something else."""
    import numpy as np
    for name in ("bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
                 "uint8", "complex64", "complex128"):
        assert getattr(tg.dtypes, name) is getattr(tg, name)
    assert tg.dtypes.double is tg.double is tg.float64 and tg.dtypes.half is tg.half is tg.float16
    assert tg.dtypes.as_dtype("int32") is tg.dtypes.int32 and tg.dtypes.DType is tg.DType
    y = tg.dtypes.cast(tg.constant([1, 2]), tg.dtypes.float32)
    assert y.dtype == tg.float32 and y.numpy().tolist() == [1.0, 2.0]
    x = tg.random.uniform(shape=[3, 3], minval=-1, maxval=2, dtype=tg.dtypes.int32)
    assert x.dtype == tg.int32 and np.all((x.numpy() >= -1) & (x.numpy() < 2))
    # a dtype tapegpu lacks is not something else: a refusal that raises NotImplementedError
    # naming it (every listed TF name resolves: tapegpu/compat/surface.py), or the dtype itself
    string = tg.dtypes.string
    assert not isinstance(string, tg.DType) or string.name == "string"


def test_tapegpu_imports_and_reports_without_threadpoolctl():
    """An environment installed before threadpoolctl became a dependency: the BLAS keeps numpy's
    threads and `info` says why."""
    import subprocess
    import sys
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'threadpoolctl': raise ImportError('blocked')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import tapegpu as tg\n"
            "tg.config.threading.set_intra_op_parallelism_threads(1)\n"
            "from tapegpu.cli import info\n"
            "print(info._blas_threads())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "threadpoolctl is not installed" in out.stdout
