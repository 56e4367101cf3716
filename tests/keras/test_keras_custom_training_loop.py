"""TF's "custom training loop" pattern (TensorFlow 2 quickstart for experts: a keras.Model
subclass trained with a GradientTape over a tf.data pipeline, keras.metrics and
keras.optimizers.Adam), run by changing `import tensorflow as tf` to `import tapegpu as tf`.
The data are small synthetic 8x8 "images" (10 noisy class templates) instead of MNIST."""
import numpy as np
import pytest

import tapegpu as tf
from tapegpu.keras import Model
from tapegpu.keras.layers import Dense, Flatten


def _data():
    rng = np.random.default_rng(0)
    templates = rng.normal(size=(10, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, 600)
    x = (templates[y] + 0.8 * rng.normal(size=(600, 8, 8))).astype(np.float32)
    return (x[:500], y[:500]), (x[500:], y[500:])


class MyModel(Model):
    def __init__(self):
        super().__init__()
        self.flatten = Flatten()
        self.d1 = Dense(128, activation='relu')
        self.d2 = Dense(10)

    def call(self, x):
        x = self.flatten(x)
        x = self.d1(x)
        return self.d2(x)


def run_quickstart(use_function, epochs=5):
    """The guide's code, verbatim but for the data and `use_function` (tf.function or not)."""
    (x_train, y_train), (x_test, y_test) = _data()
    train_ds = tf.data.Dataset.from_tensor_slices(
        (x_train, y_train)).shuffle(10000, seed=1).batch(32)
    test_ds = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(32)

    tf.random.set_seed(0)
    model = MyModel()
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.Adam()

    train_loss = tf.keras.metrics.Mean(name='train_loss')
    train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name='train_accuracy')
    test_loss = tf.keras.metrics.Mean(name='test_loss')
    test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name='test_accuracy')

    def train_step(images, labels):
        with tf.GradientTape() as tape:
            # training=True is only needed if there are layers with different
            # behavior during training versus inference (e.g. Dropout).
            predictions = model(images, training=True)
            loss = loss_object(labels, predictions)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))

        train_loss(loss)
        train_accuracy(labels, predictions)

    def test_step(images, labels):
        predictions = model(images, training=False)
        t_loss = loss_object(labels, predictions)

        test_loss(t_loss)
        test_accuracy(labels, predictions)

    if use_function:
        train_step, test_step = tf.function(train_step), tf.function(test_step)

    lines = []
    for epoch in range(epochs):
        # Reset the metrics at the start of the next epoch
        train_loss.reset_state()
        train_accuracy.reset_state()
        test_loss.reset_state()
        test_accuracy.reset_state()

        for images, labels in train_ds:
            train_step(images, labels)

        for test_images, test_labels in test_ds:
            test_step(test_images, test_labels)

        lines.append(
            f'Epoch {epoch + 1}, '
            f'Loss: {train_loss.result():0.2f}, '
            f'Accuracy: {train_accuracy.result() * 100:0.2f}, '
            f'Test Loss: {test_loss.result():0.2f}, '
            f'Test Accuracy: {test_accuracy.result() * 100:0.2f}'
        )
    return lines, model, float(test_accuracy.result()), float(train_loss.result())


@pytest.mark.parametrize("use_function", [False, True])
def test_quickstart_for_experts_trains(use_function):
    lines, model, test_acc, _ = run_quickstart(use_function)
    assert len(lines) == 5 and lines[0].startswith("Epoch 1, Loss: ")
    assert test_acc >= 0.95, lines
    assert [v.shape for v in model.trainable_variables] == [(64, 128), (128,), (128, 10), (10,)]


def test_metrics_inside_tf_function_match_eager():
    """Metrics updated inside tf.function see each call's values (not the trace's): the
    compiled loop reports what the eager loop reports."""
    eager, _, eager_acc, eager_loss = run_quickstart(False, epochs=2)
    compiled, _, compiled_acc, compiled_loss = run_quickstart(True, epochs=2)
    assert eager == compiled
    assert eager_acc == pytest.approx(compiled_acc, abs=1e-6)
    assert eager_loss == pytest.approx(compiled_loss, rel=1e-5)


def test_writing_a_training_loop_from_scratch():
    """Keras' guide "Writing a training loop from scratch" (TensorFlow backend): a functional
    model, a tf.data pipeline, `model.trainable_weights`, a metric read per epoch, and the
    regularization `model.losses` added to the loss."""
    keras = tf.keras
    layers = tf.keras.layers
    rng = np.random.default_rng(3)
    centers = 2.0 * rng.normal(size=(10, 20))
    y_all = rng.integers(0, 10, 1200)
    x_all = (centers[y_all] + rng.normal(size=(1200, 20))).astype("float32")
    x_train, y_train, x_val, y_val = x_all[:1000], y_all[:1000], x_all[1000:], y_all[1000:]

    inputs = keras.Input(shape=(20,), name="digits")
    x1 = layers.Dense(64, activation="relu",
                      kernel_regularizer=keras.regularizers.l2(1e-4))(inputs)
    x2 = layers.Dense(64, activation="relu")(x1)
    outputs = layers.Dense(10, name="predictions")(x2)
    model = keras.Model(inputs=inputs, outputs=outputs)

    optimizer = keras.optimizers.Adam(learning_rate=1e-2)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    train_acc_metric = keras.metrics.SparseCategoricalAccuracy()
    val_acc_metric = keras.metrics.SparseCategoricalAccuracy()

    batch_size = 64
    train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    train_dataset = train_dataset.shuffle(buffer_size=1024, seed=0).batch(batch_size)
    val_dataset = tf.data.Dataset.from_tensor_slices((x_val, y_val))
    val_dataset = val_dataset.batch(batch_size)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss_value = loss_fn(y, logits)
            loss_value += sum(model.losses)
        grads = tape.gradient(loss_value, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights))
        train_acc_metric.update_state(y, logits)
        return loss_value

    @tf.function
    def test_step(x, y):
        val_logits = model(x, training=False)
        val_acc_metric.update_state(y, val_logits)

    log = []
    for epoch in range(3):
        for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
            loss_value = train_step(x_batch_train, y_batch_train)
            if step % 5 == 0:
                log.append("Training loss (for one batch) at step %d: %.4f"
                           % (step, float(loss_value)))
        train_acc = train_acc_metric.result()
        log.append("Training acc over epoch: %.4f" % (float(train_acc),))
        train_acc_metric.reset_state()
        for x_batch_val, y_batch_val in val_dataset:
            test_step(x_batch_val, y_batch_val)
        val_acc = val_acc_metric.result()
        val_acc_metric.reset_state()
        log.append("Validation acc: %.4f" % (float(val_acc),))
    assert float(val_acc) >= 0.9, log
    assert len(model.losses) == 1 and float(model.losses[0]) > 0
    assert log[-1].startswith("Validation acc: ")
