"""OneDeviceStrategy, CentralStorageStrategy, the cluster resolvers, tf.train.ClusterSpec and
the variable partitioners."""
import json

import numpy as np
import pytest

import tapegpu as tg

SINGLE_DEVICE = True


def _fit(strategy):
    tg.random.set_seed(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)
    scope = strategy.scope() if strategy is not None else tg.distribute.get_strategy().scope()
    with scope:
        model = tg.keras.Sequential([tg.keras.Input((3,)), tg.keras.layers.Dense(1)])
        model.compile(optimizer=tg.keras.optimizers.SGD(0.1), loss="mse")
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    return model.get_weights()


def test_one_device_strategy_trains_as_no_strategy_does():
    strategy = tg.distribute.OneDeviceStrategy("/cpu:0")
    assert strategy.num_replicas_in_sync == 1
    assert strategy.extended.worker_devices == ("/job:localhost/replica:0/task:0/device:CPU:0",)
    for a, b in zip(_fit(strategy), _fit(None)):
        np.testing.assert_array_equal(a, b)


def test_one_device_strategy_run_and_reduce():
    strategy = tg.distribute.OneDeviceStrategy("/cpu:0")
    out = strategy.run(lambda x: x * 3.0, args=(tg.constant([1.0, 2.0]),))
    np.testing.assert_array_equal(out.numpy(), [3.0, 6.0])
    assert float(strategy.reduce(tg.distribute.ReduceOp.SUM, out, axis=0)) == 9.0
    assert [t.numpy().tolist() for t in strategy.experimental_local_results(out)] == \
        [[3.0, 6.0]]
    with pytest.raises(ValueError, match="OneDeviceStrategy"):
        tg.distribute.OneDeviceStrategy(["/cpu:0"])
    with pytest.raises(ValueError, match="OneDeviceStrategy: device 'tpu:0'"):
        tg.distribute.OneDeviceStrategy("tpu:0")


def test_central_storage_strategy_on_one_device():
    strategy = tg.distribute.experimental.CentralStorageStrategy()
    assert strategy.num_replicas_in_sync == 1
    # one compute device (the first GPU, else the CPU): the parameters live on it, as TF
    one = "GPU:0" if tg.config.list_logical_devices("GPU") else "CPU:0"
    assert strategy.extended.parameter_devices == \
        (f"/job:localhost/replica:0/task:0/device:{one}",)
    for a, b in zip(_fit(strategy), _fit(None)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    two = tg.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
    assert two.num_replicas_in_sync == 2
    assert two.extended.parameter_devices == ("/job:localhost/replica:0/task:0/device:CPU:0",)


def test_cluster_spec():
    spec = tg.train.ClusterSpec({"worker": ["w0:1", "w1:1"], "ps": {0: "p0:1", 2: "p2:1"}})
    assert spec.jobs == ["ps", "worker"]
    assert spec.num_tasks("ps") == 2 and spec.task_indices("ps") == [0, 2]
    assert spec.job_tasks("ps") == ["p0:1", None, "p2:1"]
    assert spec.as_dict() == {"worker": ["w0:1", "w1:1"], "ps": {0: "p0:1", 2: "p2:1"}}
    assert tg.train.ClusterSpec(spec) == spec and bool(spec)
    assert not tg.train.ClusterSpec({})
    with pytest.raises(ValueError, match="No such job in cluster: 'chief'"):
        spec.num_tasks("chief")
    with pytest.raises(ValueError, match="No task with index 1"):
        spec.task_address("ps", 1)
    with pytest.raises(TypeError, match="must be a dictionary"):
        tg.train.ClusterSpec(["w0:1"])


def test_tf_config_cluster_resolver(monkeypatch):
    cfg = {"cluster": {"chief": ["c:1"], "worker": ["w0:2", "w1:3"]},
           "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc"}
    monkeypatch.setenv("TF_CONFIG", json.dumps(cfg))
    r = tg.distribute.cluster_resolver.TFConfigClusterResolver()
    assert (r.task_type, r.task_id, r.rpc_layer, r.environment) == ("worker", 1, "grpc", "")
    assert r.cluster_spec().as_dict() == cfg["cluster"]
    assert r.master() == "grpc://w1:3" and r.master("chief", 0, rpc_layer="http") == "http://c:1"
    assert tg.distribute.cluster_resolver.TFConfigClusterResolver(
        task_type="chief", task_id=0).master() == "grpc://c:1"
    n = len(tg.config.list_physical_devices("GPU"))
    assert r.num_accelerators() == ({"GPU": n} if n else {})
    monkeypatch.delenv("TF_CONFIG")
    r = tg.distribute.cluster_resolver.TFConfigClusterResolver()
    assert r.task_type is None and r.master() == "" and not r.cluster_spec()
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        r.cluster_spec()


def test_simple_cluster_resolver():
    spec = tg.train.ClusterSpec({"worker": ["a:1"]})
    r = tg.distribute.cluster_resolver.SimpleClusterResolver(
        spec, master="grpc://m:0", task_type="worker", task_id=0,
        num_accelerators={"GPU": 2})
    assert r.cluster_spec() is spec and r.master() == "grpc://m:0"
    assert r.master("worker", 0, rpc_layer="grpc") == "grpc://a:1"
    assert r.num_accelerators() == {"GPU": 2} and r.task_type == "worker"
    with pytest.raises(TypeError, match="ClusterSpec"):
        tg.distribute.cluster_resolver.SimpleClusterResolver({"worker": ["a:1"]})


def test_partitioners():
    parts = tg.distribute.experimental.partitioners
    # 1000 float32 = 4000 bytes; shards of >= 1024 bytes: ceil(3.9) = 4, capped by max_shards
    assert parts.MinSizePartitioner(1024, max_shards=3)([1000], tg.float32) == [3]
    assert parts.MinSizePartitioner(1024, max_shards=8)([1000], tg.float32) == [4]
    assert parts.MinSizePartitioner(1024, max_shards=8)([2, 500], tg.float32) == [2, 1]
    assert parts.MinSizePartitioner()([10], tg.float64) == [1]  # the default: one shard
    assert parts.FixedShardsPartitioner(3)([4, 5], tg.float32, axis=1) == [1, 3]
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        parts.FixedShardsPartitioner(3)([4, 5], tg.float32, axis=2)


def test_collective_communication_is_the_old_name_of_communication_implementation():
    assert tg.distribute.experimental.CollectiveCommunication.NCCL == \
        tg.distribute.experimental.CommunicationImplementation.NCCL
