"""TensorFlow's multi-worker tutorials ('Custom training loop with Keras and
MultiWorkerMirroredStrategy', 'Multi-worker training with Keras'), ported by changing the import
(`import tensorflow as tf` -> `import tapegpu as tf`), on a small synthetic data set instead of
MNIST, with `reduction="none"` (Keras 3's spelling of `tf.keras.losses.Reduction.NONE`).

Run by tests/distribute/test_strategy.py: `mpiexec -n N python tf_multi_worker.py DEVICE`,
DEVICE 'cpu' (gradients cross the ranks over MPI) or 'gpu' (the simulated GPU of
tests/support/cupy_sim: NCCL). Each rank also trains the same model in one process on the whole
batches and checks that the workers' variables equal it (rtol 1e-5) and are bit-identical
across the ranks. Prints one "ok <check> rank=R" line per check.
"""
import hashlib
import os
import sys

DEVICE = sys.argv[1] if len(sys.argv) > 1 else "cpu"
if DEVICE == "gpu":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "support"))
    import cupy_sim  # noqa: E402

    cupy_sim.install()

import numpy as np  # noqa: E402

import tapegpu as tf  # noqa: E402  (was: import tensorflow as tf)

# float32 products in full float32 (the suite's setting, as TensorFlow's own tests): the
# comparisons with one process below are at float32's tolerances
tf.config.experimental.enable_tensor_float_32_execution(False)

per_worker_batch_size = 8
STEPS = 6


def mnist_dataset(batch_size):
    rng = np.random.default_rng(7)
    x_train = rng.normal(size=(96, 6, 6)).astype(np.float32)
    y_train = rng.integers(0, 4, size=96).astype(np.int64)
    return tf.data.Dataset.from_tensor_slices((x_train, y_train)).repeat().batch(batch_size)


def dataset_fn(global_batch_size, input_context):
    batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    dataset = mnist_dataset(batch_size)
    dataset = dataset.shard(input_context.num_input_pipelines,
                            input_context.input_pipeline_id)
    return dataset


def build_cnn_model(seed=1):
    tf.random.set_seed(seed)  # the single-process model below starts from the same values
    return tf.keras.Sequential([
        tf.keras.layers.Reshape(target_shape=(6, 6, 1)),
        tf.keras.layers.Conv2D(4, 3, activation="relu"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(16, activation="relu"),
        tf.keras.layers.Dense(4)])


strategy = tf.distribute.MultiWorkerMirroredStrategy()
task_type, task_id = (strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id)
num_workers = strategy.num_replicas_in_sync
R = task_id
assert task_type == "worker" and num_workers == tf.distribute.size()


def ok(name):
    print(f"ok {name} rank={R}", flush=True)


def digest(variables):
    h = hashlib.sha256()
    for v in variables:
        h.update(np.ascontiguousarray(v.numpy()).tobytes())
    return h.hexdigest()


def same_everywhere(variables):
    return len(set(tf.distribute.allgather_object(digest(variables)))) == 1


# -- the custom training loop ----------------------------------------------------------------
global_batch_size = per_worker_batch_size * num_workers
with strategy.scope():
    # rank 1 draws other initial values: the scope broadcasts rank 0's when it ends
    multi_worker_model = build_cnn_model(seed=1 if R == 0 else 99)
    multi_worker_model.build((None, 6, 6))

multi_worker_dataset = strategy.distribute_datasets_from_function(
    lambda input_context: dataset_fn(global_batch_size, input_context))

with strategy.scope():
    optimizer = tf.keras.optimizers.RMSprop(learning_rate=0.001)
    train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")


@tf.function
def train_step(iterator):
    """Training step function."""

    def step_fn(inputs):
        """Per-Replica step function."""
        x, y = inputs
        with tf.GradientTape() as tape:
            predictions = multi_worker_model(x, training=True)
            per_batch_loss = tf.keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction="none")(y, predictions)
            loss = tf.nn.compute_average_loss(per_batch_loss,
                                              global_batch_size=global_batch_size)

        grads = tape.gradient(loss, multi_worker_model.trainable_variables)
        optimizer.apply_gradients(zip(grads, multi_worker_model.trainable_variables))
        train_accuracy.update_state(y, predictions)
        return loss

    per_replica_losses = strategy.run(step_fn, args=(next(iterator),))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)


iterator = iter(multi_worker_dataset)
losses = [float(train_step(iterator)) for _ in range(STEPS)]
assert train_step.experimental_get_tracing_count() == 1
if DEVICE == "gpu":
    assert multi_worker_model.trainable_variables[0].device.endswith("GPU:0")

# one process on the whole batches
model = build_cnn_model()
opt = tf.keras.optimizers.RMSprop(learning_rate=0.001)
single_losses = []
for x, y in mnist_dataset(global_batch_size).take(STEPS):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="none")(y, model(x, training=True)))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables))
    single_losses.append(float(loss))
np.testing.assert_allclose(losses, single_losses, rtol=1e-5)
assert same_everywhere(multi_worker_model.trainable_variables)
for a, b in zip(multi_worker_model.trainable_variables, model.trainable_variables):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
ok("custom_training_loop")

# -- experimental_distribute_dataset: each global batch split over the workers ----------------
with strategy.scope():
    split_model = build_cnn_model()
    split_model.build((None, 6, 6))
    split_optimizer = tf.keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
dist_dataset = strategy.experimental_distribute_dataset(
    mnist_dataset(global_batch_size).take(STEPS))


@tf.function
def split_step(dist_inputs):
    def step_fn(inputs):
        x, y = inputs
        assert x.shape[0] == per_worker_batch_size  # this worker's share of the global batch
        with tf.GradientTape() as tape:
            per_example_loss = loss_object(y, split_model(x, training=True))
            loss = tf.nn.compute_average_loss(per_example_loss,
                                              global_batch_size=global_batch_size)
        grads = tape.gradient(loss, split_model.trainable_variables)
        split_optimizer.apply_gradients(zip(grads, split_model.trainable_variables))
        return per_example_loss

    per_replica = strategy.run(step_fn, args=(dist_inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=0)  # global mean


split_losses = [float(split_step(batch)) for batch in dist_dataset]
assert len(split_losses) == STEPS and split_step.experimental_get_tracing_count() == 1
model = build_cnn_model()
opt = tf.keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
single_losses = []
for x, y in mnist_dataset(global_batch_size).take(STEPS):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(loss_object(y, model(x, training=True)))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables))
    single_losses.append(float(loss))
np.testing.assert_allclose(split_losses, single_losses, rtol=1e-5)
assert same_everywhere(split_model.trainable_variables)
for a, b in zip(split_model.trainable_variables, model.trainable_variables):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
ok("experimental_distribute_dataset")

# -- Keras fit under the strategy's scope ('Multi-worker training with Keras') -----------------
with strategy.scope():
    fit_model = build_cnn_model()
    fit_model.compile(
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=tf.keras.optimizers.SGD(learning_rate=0.05),
        metrics=["accuracy"])
history = fit_model.fit(mnist_dataset(global_batch_size), epochs=2, steps_per_epoch=3,
                        verbose=0)
# one replica per worker: fit's step is traced once, the reduction an effect of its graph
assert fit_model.make_train_function().step.function.experimental_get_tracing_count() == 1
reference = build_cnn_model()
reference.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=tf.keras.optimizers.SGD(learning_rate=0.05))
reference.fit(mnist_dataset(global_batch_size), epochs=2, steps_per_epoch=3, verbose=0)
assert same_everywhere(fit_model.trainable_variables)
for a, b in zip(fit_model.trainable_variables, reference.trainable_variables):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
assert len(history.history["loss"]) == 2
ok("keras_fit")

print(f"done rank={R}", flush=True)
