"""Which weights the compiled metrics see, as Keras 3.15 (keras/src/trainers/compile_utils.py,
metrics/reduction_metrics.py): `compile(metrics=...)` get no sample weights, and so no class
weights (fit folds those into the sample weights); `weighted_metrics` get both; a masked
prediction's padded positions count for neither. `fit(validation_split=...)` that leaves no
training (or no validation) rows raises, as Keras.

The models are trained with a learning rate of 0, so their predictions (from `predict`) give
the expected values with numpy."""
import numpy as np
import pytest

import tapegpu as tg

K = tg.keras


def _blobs(n=48, classes=4, dim=6, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = (rng.normal(size=(classes, dim))[y] + rng.normal(size=(n, dim))).astype(np.float32)
    return x, y


def _classifier(run_eagerly=False, metrics=("accuracy",), weighted_metrics=("accuracy",)):
    tg.random.set_seed(1)
    model = K.Sequential([K.Input(shape=(6,)), K.layers.Dense(4)])
    model.compile(optimizer=K.optimizers.SGD(0.0),
                  loss=K.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=list(metrics), weighted_metrics=list(weighted_metrics),
                  run_eagerly=run_eagerly)
    return model


def _hits(model, x, y):
    return (model.predict(x, verbose=0).argmax(-1) == y).astype(np.float64)


def _weighted_mean(values, weights):
    return (values * weights).sum() / weights.sum()


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_metrics_ignore_sample_weight_and_weighted_metrics_use_it(run_eagerly):
    x, y = _blobs()
    w = np.random.default_rng(2).uniform(0.0, 3.0, len(y)).astype(np.float32)
    model = _classifier(run_eagerly)
    history = model.fit(x, y, sample_weight=w, batch_size=16, shuffle=False, verbose=0)
    hits = _hits(model, x, y)
    assert list(history.history) == ["loss", "accuracy", "weighted_accuracy"]
    assert _weighted_mean(hits, w) != pytest.approx(hits.mean(), rel=1e-3)  # they differ here
    np.testing.assert_allclose(history.history["accuracy"], [hits.mean()], rtol=1e-6)
    np.testing.assert_allclose(history.history["weighted_accuracy"], [_weighted_mean(hits, w)],
                               rtol=1e-6)
    logs = model.evaluate(x, y, sample_weight=w, batch_size=16, verbose=0, return_dict=True)
    assert list(logs) == ["loss", "accuracy", "weighted_accuracy"]
    np.testing.assert_allclose(logs["accuracy"], hits.mean(), rtol=1e-6)
    np.testing.assert_allclose(logs["weighted_accuracy"], _weighted_mean(hits, w), rtol=1e-6)


def test_class_weight_weighs_weighted_metrics_only():
    x, y = _blobs()
    class_weight = {0: 0.5, 1: 3.0, 3: 2.0}  # class 2: weight 1
    model = _classifier()
    history = model.fit(x, y, class_weight=class_weight, batch_size=16, shuffle=False,
                        verbose=0).history
    hits = _hits(model, x, y)
    w = np.array([class_weight.get(int(c), 1.0) for c in y])
    np.testing.assert_allclose(history["accuracy"], [hits.mean()], rtol=1e-6)
    np.testing.assert_allclose(history["weighted_accuracy"], [_weighted_mean(hits, w)],
                               rtol=1e-6)


def test_weighted_metrics_alone_keep_their_names_until_one_repeats():
    x, y = _blobs()
    w = np.random.default_rng(3).uniform(0.0, 3.0, len(y)).astype(np.float32)
    model = _classifier(metrics=(), weighted_metrics=("accuracy", "accuracy"))
    logs = model.evaluate(x, y, sample_weight=w, verbose=0, return_dict=True)
    assert list(logs) == ["loss", "accuracy", "weighted_accuracy"]
    hits = _hits(model, x, y)
    for name in ("accuracy", "weighted_accuracy"):
        np.testing.assert_allclose(logs[name], _weighted_mean(hits, w), rtol=1e-6)


def test_a_metric_in_both_lists_is_logged_twice_as_keras_names_them():
    x, y = _blobs()
    w = np.random.default_rng(4).uniform(0.0, 3.0, len(y)).astype(np.float32)
    model = _classifier(metrics=("accuracy", "accuracy"),
                        weighted_metrics=("accuracy", "accuracy"))
    logs = model.evaluate(x, y, sample_weight=w, verbose=0, return_dict=True)
    names = ["loss", "accuracy", "accuracy_1", "weighted_accuracy", "weighted_accuracy_1"]
    assert list(logs) == names and model.metrics_names == names
    hits = _hits(model, x, y)
    for name in names[1:3]:
        np.testing.assert_allclose(logs[name], hits.mean(), rtol=1e-6)
    for name in names[3:]:
        np.testing.assert_allclose(logs[name], _weighted_mean(hits, w), rtol=1e-6)
    values = model.evaluate(x, y, sample_weight=w, verbose=0)
    np.testing.assert_allclose(values, [logs[n] for n in names], rtol=1e-6)


def _tokens(n=12, steps=5, seed=5):
    """Padded sequences (0 is padding), one at least of each length 1..steps."""
    rng = np.random.default_rng(seed)
    lengths = np.concatenate([np.arange(1, steps + 1), rng.integers(1, steps + 1, n - steps)])
    tokens = rng.integers(1, 10, (n, steps))
    return np.where(np.arange(steps) < lengths[:, None], tokens, 0)


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_a_masked_sequence_output_counts_its_unmasked_steps_only(run_eagerly):
    tokens = _tokens()
    labels = np.random.default_rng(6).integers(0, 2, tokens.shape)
    # a weight per step: Keras' losses refuse one per sequence with a mask (it multiplies the
    # mask (batch, steps) by weights (batch,) with numpy's broadcasting)
    w = np.random.default_rng(7).uniform(0.5, 2.0, tokens.shape).astype(np.float32)
    tg.random.set_seed(2)
    model = K.Sequential([K.layers.Embedding(10, 4, mask_zero=True),
                          K.layers.LSTM(3, return_sequences=True), K.layers.Dense(2)])
    model.compile(optimizer=K.optimizers.SGD(0.0),
                  loss=K.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], weighted_metrics=["accuracy"], run_eagerly=run_eagerly)
    history = model.fit(tokens, labels, sample_weight=w, batch_size=4, shuffle=False,
                        verbose=0).history
    hits = (model.predict(tokens, verbose=0).argmax(-1) == labels).astype(np.float64)
    keep = (tokens != 0).astype(np.float64)
    want = _weighted_mean(hits, keep)
    want_weighted = _weighted_mean(hits, keep * w)
    assert want != pytest.approx(hits.mean(), rel=1e-3)  # the padding would change it
    np.testing.assert_allclose(history["accuracy"], [want], rtol=1e-6)
    np.testing.assert_allclose(history["weighted_accuracy"], [want_weighted], rtol=1e-6)
    logs = model.evaluate(tokens, labels, sample_weight=w, batch_size=4, verbose=0,
                          return_dict=True)
    np.testing.assert_allclose(logs["accuracy"], want, rtol=1e-6)
    np.testing.assert_allclose(logs["weighted_accuracy"], want_weighted, rtol=1e-6)


def test_a_mean_metric_averages_each_example_then_the_examples():
    """Keras' Mean: an example's values (and weights) are averaged over its positions, so a
    batch of longer rows does not weigh more; with a mask, its padded positions weigh 0."""
    rng = np.random.default_rng(8)
    short, long_ = rng.normal(size=(2, 3)), rng.normal(size=(3, 5))
    m = K.metrics.Mean()
    m.update_state(short)
    m.update_state(long_)
    examples = np.concatenate([short.mean(1), long_.mean(1)])
    np.testing.assert_allclose(float(m.result()), examples.mean(), rtol=1e-6)
    assert examples.mean() != pytest.approx(np.concatenate([short.ravel(), long_.ravel()])
                                            .mean(), rel=1e-3)

    embed = K.layers.Embedding(10, 3, mask_zero=True)  # its output: masked logits
    accuracy = K.metrics.SparseCategoricalAccuracy()
    total = count = 0.0
    for steps, seed in ((5, 9), (2, 10)):
        tokens = _tokens(n=6, steps=steps, seed=seed)
        labels = np.random.default_rng(seed).integers(0, 3, tokens.shape)
        logits = embed(tokens)
        accuracy.update_state(labels, logits)
        hit = (logits.numpy().argmax(-1) == labels) * (tokens != 0)
        total += hit.mean(1).sum()
        count += (tokens != 0).mean(1).sum()
    np.testing.assert_allclose(float(accuracy.result()), total / count, rtol=1e-6)


@pytest.mark.parametrize("rows, split", [(5, 0.9), (10, 0.95), (10, 1e-17)])
def test_validation_split_leaving_a_side_empty_raises(rows, split):
    x, y = _blobs(n=rows)
    model = _classifier()
    with pytest.raises(ValueError, match=rf"fit: training data contains {rows} samples.*"
                                         rf"`validation_split={split}`"):
        model.fit(x, y, validation_split=split, verbose=0)
    history = model.fit(x, y, validation_split=0.5, verbose=0).history
    assert {"loss", "val_loss"} <= set(history)
