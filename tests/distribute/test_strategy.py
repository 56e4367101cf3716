"""TensorFlow's distribution strategies (tg.distribute.MirroredStrategy,
MultiWorkerMirroredStrategy): TensorFlow programs ported by changing the import, on logical CPU
devices and on two simulated GPUs in this process, and under mpiexec; the strategies' API as
TensorFlow documents it."""
import numpy as np
import pytest

import cupy_sim
import tapegpu as tf  # the programs below are TensorFlow's, with this import
from tapegpu import backends as backend
from tapegpu.distribute import replicas

from test_distribute import SCRIPTS, _mpiexec, needs_mpi
from test_nccl import needs_emulator

SINGLE_DEVICE = True
CPUS = ["/cpu:0", "/cpu:1"]


# -- TensorFlow's "Distributed training with Keras" ------------------------------------------
def keras_program(strategy, replicas=None):
    """The tutorial's program (MNIST replaced by 8x8 random images; fewer filters). The
    one-device reference passes `replicas` so that its batches are the same global batches."""
    rng = np.random.default_rng(0)
    images = rng.normal(size=(64, 8, 8, 1)).astype(np.float32)
    labels = rng.integers(0, 10, size=64).astype(np.int64)
    BATCH_SIZE_PER_REPLICA = 8
    BATCH_SIZE = BATCH_SIZE_PER_REPLICA * (replicas or strategy.num_replicas_in_sync)
    train_dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(BATCH_SIZE)
    tf.random.set_seed(5)
    with strategy.scope():
        model = tf.keras.Sequential([
            tf.keras.layers.Conv2D(4, 3, activation="relu", input_shape=(8, 8, 1)),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(16, activation="relu"),
            tf.keras.layers.Dense(10)])
        model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      optimizer=tf.keras.optimizers.Adam(),
                      metrics=["accuracy"])
    history = model.fit(train_dataset, epochs=2, verbose=0)
    eval_loss, eval_acc = model.evaluate(train_dataset, verbose=0)
    return model, history.history, (eval_loss, eval_acc)


def _check_against_one_device(devices, device):
    with tf.device(device):
        single, single_history, single_eval = keras_program(tf.distribute.get_strategy(), 2)
    strategy = tf.distribute.MirroredStrategy(devices)
    assert strategy.num_replicas_in_sync == 2
    model, history, evaluation = keras_program(strategy)
    np.testing.assert_allclose(history["loss"], single_history["loss"], rtol=1e-5)
    np.testing.assert_allclose(history["accuracy"], single_history["accuracy"])
    np.testing.assert_allclose(evaluation, single_eval, rtol=1e-5)
    for a, b in zip(model.weights, single.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)
    mirrored = {m.var.name for m in strategy._mirrors.values()}
    assert mirrored == {v.name for v in model.weights} | {model.optimizer.iterations.name}
    copies = [m.values for m in strategy._mirrors.values()]
    for values in copies:  # every replica holds the same bits
        assert values[0]._dev is not values[1]._dev or devices == CPUS
        assert values[0].numpy().tobytes() == values[1].numpy().tobytes()
    return strategy, copies


def test_keras_fit_with_mirrored_strategy_on_logical_cpus():
    """Each batch of 16 is split 8 + 8 over two CPU replicas; the averaged gradients give the
    one-device training's losses, accuracy, evaluation and weights (rtol 1e-5)."""
    strategy, _ = _check_against_one_device(CPUS, "cpu")
    assert isinstance(strategy.extended._strategy._xops, tf.distribute.ReductionToOneDevice)


@needs_emulator
def test_keras_fit_with_mirrored_strategy_on_two_simulated_gpus(two_gpus):
    """The same on gpu:0 and gpu:1: NCCL (initAll, group calls) reduces onto GPU 0 and
    broadcasts the update; each replica's copies live on its GPU."""
    cupy_sim.stats.reset()
    strategy, copies = _check_against_one_device(None, "gpu:0")
    assert isinstance(strategy._xops, tf.distribute.NcclAllReduce)
    calls = {}
    for (name, _), n in cupy_sim.stats.nccl.items():
        calls[name] = calls.get(name, 0) + n
    # 8 steps, two GPUs each: one reduction (float32 gradients), two broadcasts (the float32
    # weights, the optimizer's int64 iterations)
    assert calls == {"reduce": 2 * 8, "bcast": 2 * 2 * 8}
    for values in copies:
        assert [v._data.device.id for v in values] == [0, 1]


@pytest.mark.parametrize("where", ["cpu", "gpu"], ids=["cpu", "simulated_gpu"])
def test_keras_fit_with_one_replica_is_traced(where, request):
    """With one replica per process, fit's step runs through tg.function (one trace; the
    reduction over the replicas an effect of its graph): the same bits as fit without a
    strategy, BatchNormalization's moving statistics included, and a replica run eagerly
    (run_eagerly=True) agrees."""
    if where == "gpu":
        if not backend.CudaEmuBackend.available():
            pytest.skip("the CuPy stand-in runs kernels in the emulator")
        request.getfixturevalue("cupy_gpu")
    device = "cpu" if where == "cpu" else "gpu:0"
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 5)).astype(np.float32)
    y = rng.integers(0, 3, size=64).astype(np.int64)

    def program(strategy, run_eagerly=False):
        tf.random.set_seed(2)
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu"),
                                         tf.keras.layers.BatchNormalization(),
                                         tf.keras.layers.Dense(3)])
            model.compile(optimizer=tf.keras.optimizers.SGD(0.1, momentum=0.9),
                          loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          metrics=["accuracy"], run_eagerly=run_eagerly)
        history = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
        return model, history.history

    with tf.device(device):
        plain, plain_history = program(tf.distribute.get_strategy())
    model, history = program(tf.distribute.MirroredStrategy([device]))
    assert model.make_train_function().step.function.experimental_get_tracing_count() == 1
    assert history == plain_history
    for a, b in zip(model.weights, plain.weights):
        assert a.numpy().tobytes() == b.numpy().tobytes(), a.name
    eager, eager_history = program(tf.distribute.MirroredStrategy([device]), run_eagerly=True)
    assert eager.make_train_function().step.function is None
    np.testing.assert_allclose(eager_history["loss"], plain_history["loss"], rtol=1e-5)


# -- a custom training loop under tf.function ------------------------------------------------
def custom_loop(strategy, steps=4):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(64, 5)).astype(np.float32)
    Y = rng.integers(0, 3, size=64).astype(np.int64)
    GLOBAL_BATCH_SIZE = 16
    tf.random.set_seed(3)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu"),
                                     tf.keras.layers.Dense(3)])
        optimizer = tf.keras.optimizers.SGD(0.1, momentum=0.9)
        loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                    reduction="none")
    dataset = tf.data.Dataset.from_tensor_slices((X, Y)).batch(GLOBAL_BATCH_SIZE)
    dist_dataset = strategy.experimental_distribute_dataset(dataset)

    def train_step(inputs):
        x, y = inputs
        with tf.GradientTape() as tape:
            predictions = model(x, training=True)
            loss = tf.nn.compute_average_loss(loss_object(y, predictions),
                                              global_batch_size=GLOBAL_BATCH_SIZE)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    @tf.function
    def distributed_train_step(dataset_inputs):
        per_replica_losses = strategy.run(train_step, args=(dataset_inputs,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)

    losses = [float(distributed_train_step(x)) for x in dist_dataset]
    return losses, model, distributed_train_step


@pytest.mark.parametrize("where", ["cpu", "gpu"], ids=["logical_cpus", "simulated_gpus"])
def test_custom_training_loop_in_a_tg_function(where, request):
    """TensorFlow's custom-loop pattern: `strategy.run` and `strategy.reduce` inside a
    tg.function are graph effects that run at every call (one trace, four different
    losses), and the result equals one device's training."""
    if where == "gpu":
        if not backend.CudaEmuBackend.available():
            pytest.skip("the CuPy stand-in runs kernels in the emulator")
        request.getfixturevalue("two_gpus")
    devices = CPUS if where == "cpu" else None
    with tf.device("cpu" if where == "cpu" else "gpu:0"):
        want, single, _ = custom_loop(tf.distribute.get_strategy())
    losses, model, fn = custom_loop(tf.distribute.MirroredStrategy(devices))
    assert fn.experimental_get_tracing_count() == 1 and len(set(losses)) == 4
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    for a, b in zip(model.trainable_variables, single.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)


# -- the API as TensorFlow documents it ------------------------------------------------------
def test_run_reduce_and_replica_contexts():
    strategy = tf.distribute.MirroredStrategy(CPUS)
    assert not tf.distribute.has_strategy()
    assert tf.distribute.get_replica_context() is not None  # the default replica context
    with strategy.scope():
        assert tf.distribute.in_cross_replica_context()
        assert tf.distribute.get_replica_context() is None
        assert tf.distribute.get_strategy() is strategy

    seen = []

    def fn(x):
        ctx = tf.distribute.get_replica_context()
        seen.append((int(ctx.replica_id_in_sync_group), ctx.num_replicas_in_sync,
                     tf.distribute.in_cross_replica_context()))
        return x * float(int(ctx.replica_id_in_sync_group) + 1)

    out = strategy.run(fn, args=(tf.constant([1.0, 2.0]),))
    assert seen == [(0, 2, False), (1, 2, False)]
    local = strategy.experimental_local_results(out)
    assert [t.numpy().tolist() for t in local] == [[1.0, 2.0], [2.0, 4.0]]
    assert strategy.reduce("SUM", out, axis=None).numpy().tolist() == [3.0, 6.0]
    assert strategy.reduce(tf.distribute.ReduceOp.MEAN, out, axis=None).numpy().tolist() == \
        [1.5, 3.0]
    # TensorFlow's example: a global batch of 6 split [0..3] + [4, 5]: MEAN over axis 0
    # divides by the 6 examples, not by 2 replicas
    dist = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices(np.arange(6, dtype=np.float32)).batch(6))
    batch = next(iter(dist))
    assert [b.numpy().tolist() for b in batch] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert float(strategy.reduce("MEAN", batch, axis=0)) == 2.5
    assert float(strategy.reduce("SUM", batch, axis=0)) == 15.0
    assert strategy.gather(batch, axis=0).numpy().tolist() == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match=r"reduce_op must be tg.distribute.ReduceOp.SUM or "
                                         r"ReduceOp.MEAN"):
        strategy.reduce("MAX", out, axis=None)
    with pytest.raises(TypeError):
        strategy.reduce("SUM", out)  # axis has no default, as TensorFlow's


def test_all_reduce_and_merge_call_in_replicas():
    strategy = tf.distribute.MirroredStrategy(CPUS)

    def fn():
        ctx = tf.distribute.get_replica_context()
        mine = tf.constant([float(int(ctx.replica_id_in_sync_group)) + 1.0])
        total = ctx.all_reduce("SUM", mine)
        merged = ctx.merge_call(lambda s, v: len(s.experimental_local_results(v)),
                                args=(mine,))
        return total, merged

    total, merged = strategy.run(fn)
    assert [t.numpy().tolist() for t in strategy.experimental_local_results(total)] == \
        [[3.0], [3.0]]
    assert merged == 2


def test_a_replica_that_skips_apply_gradients_is_an_error():
    strategy = tf.distribute.MirroredStrategy(CPUS)
    v = tf.Variable(1.0)
    opt = tf.keras.optimizers.SGD(0.1)

    def fn():
        if int(tf.distribute.get_replica_context().replica_id_in_sync_group) == 0:
            opt.apply_gradients([(tf.constant(1.0), v)])
        return 0

    with pytest.raises(RuntimeError, match=r"replicas \[1\] returned while replicas \[0\] "
                                           r"wait in merge_call"):
        strategy.run(fn)

    def broken():
        raise KeyError("in a replica")
    with pytest.raises(KeyError, match="in a replica"):
        strategy.run(broken)


def test_replicas_assignments_are_averaged_at_the_end_of_run():
    """BatchNormalization's moving statistics: each replica updates its copy from its own
    share; after the step the copies hold their mean (a moving average's mean)."""
    strategy = tf.distribute.MirroredStrategy(CPUS)
    with strategy.scope():
        bn = tf.keras.layers.BatchNormalization(momentum=0.5)
    x = np.concatenate([np.zeros((4, 2)), np.full((4, 2), 4.0)]).astype(np.float32)
    dist = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices(x).batch(8))
    strategy.run(lambda b: bn(b, training=True), args=(next(iter(dist)),))
    # replica 0 saw zeros (mean 0), replica 1 fours (mean 4): 0.5 * 0 + 0.5 * (0 + 4) / 2
    np.testing.assert_allclose(bn.moving_mean.numpy(), [1.0, 1.0])
    values = strategy._mirrors[bn.moving_mean._uid].values
    assert values[0].numpy().tobytes() == values[1].numpy().tobytes()


def test_datasets_from_function_give_each_replica_its_batches():
    strategy = tf.distribute.MirroredStrategy(CPUS)
    contexts = []

    def dataset_fn(ctx):
        contexts.append(ctx)
        return tf.data.Dataset.range(6).batch(ctx.get_per_replica_batch_size(4))

    dist = strategy.distribute_datasets_from_function(dataset_fn)
    steps = [[t.numpy().tolist() for t in strategy.experimental_local_results(b)]
             for b in dist]
    assert steps == [[[0, 1], [2, 3]], [[4, 5]]][:1]  # a step needs a batch per replica
    ctx = contexts[0]
    assert (ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync) == \
        (1, 0, 2)
    with pytest.raises(ValueError, match=r"The `global_batch_size` 5 is not divisible by "
                                         r"`num_replicas_in_sync` 2"):
        ctx.get_per_replica_batch_size(5)


def test_arguments_are_checked_with_tensorflows_messages():
    with pytest.raises(ValueError, match=r"No duplicates allowed in `devices` argument"):
        tf.distribute.MirroredStrategy(["/cpu:0", "/device:CPU:0"])
    with pytest.raises(ValueError, match=r"`devices` cannot be empty"):
        tf.distribute.MirroredStrategy([])
    with pytest.raises(ValueError, match=r"MirroredStrategy: device '/gpu:7'"):
        tf.distribute.MirroredStrategy(["/gpu:7"])
    with pytest.raises(ValueError, match=r"NcclAllReduce needs GPU replicas"):
        tf.distribute.MirroredStrategy(CPUS, cross_device_ops=tf.distribute.NcclAllReduce())
    with pytest.raises(ValueError, match=r"cross_device_ops must be a tg.distribute."
                                         r"CrossDeviceOps"):
        tf.distribute.MirroredStrategy(CPUS, cross_device_ops="nccl")
    with pytest.raises(ValueError, match=r"the workers are the ranks of the MPI job"):
        tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=object())
    with pytest.raises(ValueError, match=r"implementation must be "):
        tf.distribute.experimental.CommunicationOptions(implementation="GRPC")
    a, b = tf.distribute.MirroredStrategy(CPUS), tf.distribute.MirroredStrategy(["/cpu:0"])
    with a.scope():
        with pytest.raises(ValueError, match=r"Mixing different tf.distribute.Strategy "
                                             r"objects"):
            with b.scope():
                pass
        with a.scope():  # the same strategy again is fine
            assert tf.distribute.get_strategy() is a
    with pytest.raises(RuntimeError, match=r"called in a replica context"):
        a.run(lambda: a.run(lambda: 0))
    assert replicas.context.replica is None and replicas.context.scopes == []


# -- MultiWorkerMirroredStrategy under mpiexec ----------------------------------------------
@needs_mpi
@pytest.mark.parametrize("n,device", [(2, "cpu"), (4, "cpu"), (2, "gpu")],
                         ids=["2_cpus", "4_cpus", "2_simulated_gpus"])
def test_tensorflow_multi_worker_programs(n, device):
    """TensorFlow's custom training loops with MultiWorkerMirroredStrategy (tg.function,
    distribute_datasets_from_function with RMSprop and a metric in the replica;
    experimental_distribute_dataset with reduce(MEAN, axis=0)) and Keras fit under its scope,
    on 2 and 4 ranks: each rank's variables equal one process trained on the whole
    batches (rtol 1e-5) and are bit-identical across ranks; a rank that drew other initial
    values gets rank 0's when the strategy's scope ends."""
    if device == "gpu" and not backend.CudaEmuBackend.available():
        pytest.skip("the CuPy stand-in runs kernels in the emulator")
    code, out, _ = _mpiexec(n, SCRIPTS / "tf_multi_worker.py", device, timeout=240)
    assert code == 0, out
    for check in ("custom_training_loop", "experimental_distribute_dataset", "keras_fit"):
        for r in range(n):
            assert f"ok {check} rank={r}" in out, (check, r, out)
