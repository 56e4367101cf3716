"""A steady `fit` step on a GPU (the CuPy stand-in, which counts every host sync and transfer
by call site) makes no host sync and no upload: metrics' updates wait on the device until the
metrics are read, shuffled batches are gathered on the device with an order uploaded once per
epoch, Embedding's index check is a device check."""
import numpy as np
import pytest

import cupy_sim
import tapegpu as tg
from tapegpu import keras
from tapegpu.keras import metrics as metrics_module

SINGLE_DEVICE = True
layers = keras.layers


class Counter(keras.callbacks.Callback):
    """Host syncs and transfers between the ends of consecutive batches (the data's next batch
    and the step), per batch."""

    def __init__(self):
        super().__init__()
        self.per_batch = []

    def on_train_batch_end(self, batch, logs=None):
        self.per_batch.append((dict(cupy_sim.stats.syncs), dict(cupy_sim.stats.transfers)))
        cupy_sim.stats.reset()


def _models():
    return {
        "dense": lambda: keras.Sequential([layers.Dense(16, activation="relu"),
                                           layers.Dense(3)]),
        "embedding": lambda: keras.Sequential([layers.Embedding(50, 8), layers.Flatten(),
                                               layers.Dense(16, activation="relu"),
                                               layers.Dense(3)]),
    }


def _data(kind, rng):
    x = rng.integers(0, 50, (96, 6)) if kind == "embedding" else \
        rng.normal(size=(96, 20)).astype(np.float32)
    return x, rng.integers(0, 3, 96)


def _fit(kind, counter=None, epochs=2, lr=0.01):
    rng = np.random.default_rng(0)
    x, y = _data(kind, rng)
    tg.random.set_seed(0)
    np.random.seed(0)
    with tg.device("gpu:0"):
        model = _models()[kind]()
        model.compile(optimizer=keras.optimizers.Adam(lr), metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        history = model.fit(x, y, batch_size=16, epochs=epochs, verbose=0, shuffle=True,
                            callbacks=[counter] if counter else None)
    return history.history


@pytest.mark.parametrize("kind", ["dense", "embedding"])
def test_a_steady_fit_step_makes_no_host_sync_and_no_upload(cupy_gpu, kind, monkeypatch):
    counter = Counter()
    history = _fit(kind, counter)
    steady = counter.per_batch[2:6] + counter.per_batch[7:]  # after the trace; not epoch ends
    assert len(steady) == 9
    for syncs, transfers in steady:
        assert syncs == {} and transfers == {}
    # the metrics read the deferred updates at the epoch's end: the values of updating at once
    monkeypatch.setattr(metrics_module, "DEFER_BYTES", -1)
    assert _fit(kind) == history
    assert history["loss"][1] < history["loss"][0]


def test_a_variable_learning_rate_is_read_once_per_value(cupy_gpu):
    with tg.device("gpu:0"):
        lr = tg.Variable(0.01)
    counter = Counter()
    history = _fit("dense", counter, lr=lr)
    for syncs, transfers in counter.per_batch[2:6] + counter.per_batch[7:]:
        assert syncs == {} and transfers == {}
    assert history == _fit("dense", lr=0.01)
    opt = keras.optimizers.SGD(lr)
    assert opt.learning_rate == np.float32(0.01)
    with tg.device("gpu:0"):
        lr.assign(0.5)  # a new value: read at the next step
    assert opt.learning_rate == 0.5


def test_an_embedding_index_out_of_range_is_reported_at_the_next_read(cupy_gpu):
    with tg.device("gpu:0"):
        layer = layers.Embedding(5, 2)
        out = layer(tg.constant(np.array([[1, 7]])))  # no host read here
        with pytest.raises(tg.errors.InvalidArgumentError, match=r"indices must be in \[0, 5\)"
                           r", got values in \[1, 7\]"):
            out.numpy()
