"""keras.losses against numpy transcriptions of Keras' formulas, and keras.metrics against the
outputs Keras documents for its examples."""
import numpy as np
import pytest

import tapegpu as tg

keras = tg.keras
EPS = 1e-7


def _f(t):
    return float(t.numpy()) if hasattr(t, "numpy") else float(t)


Y_TRUE = np.array([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0]], np.float32)
Y_PRED = np.array([[0.2, 0.7, -1.5], [2.5, 0.9, 0.1]], np.float32)


def test_mae_huber_match_formulas():
    err = Y_PRED - Y_TRUE
    np.testing.assert_allclose(keras.losses.mean_absolute_error(Y_TRUE, Y_PRED).numpy(),
                               np.abs(err).mean(-1), rtol=1e-6)
    a = np.abs(err)
    hub = np.where(a <= 1.0, 0.5 * a * a, 1.0 * (a - 0.5)).mean(-1)
    np.testing.assert_allclose(keras.losses.huber(Y_TRUE, Y_PRED).numpy(), hub, rtol=1e-6)
    np.testing.assert_allclose(_f(keras.losses.Huber()(Y_TRUE, Y_PRED)), hub.mean(), rtol=1e-6)
    hub2 = np.where(a <= 2.0, 0.5 * a * a, 2.0 * (a - 1.0)).mean(-1)
    np.testing.assert_allclose(_f(keras.losses.Huber(delta=2.0)(Y_TRUE, Y_PRED)), hub2.mean(),
                               rtol=1e-6)


def test_binary_crossentropy_probabilities_and_logits():
    p = 1 / (1 + np.exp(-Y_PRED.astype(np.float64)))
    want = -(Y_TRUE * np.log(p) + (1 - Y_TRUE) * np.log(1 - p)).mean(-1)
    got = keras.losses.BinaryCrossentropy(from_logits=True, reduction=None)(Y_TRUE, Y_PRED)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    pc = np.clip(p, EPS, 1 - EPS)
    want_p = -(Y_TRUE * np.log(pc) + (1 - Y_TRUE) * np.log(1 - pc)).mean(-1)
    got_p = keras.losses.BinaryCrossentropy()(Y_TRUE, p.astype(np.float32))
    np.testing.assert_allclose(_f(got_p), want_p.mean(), rtol=1e-5)
    # a probability of exactly 0 for a positive label is clipped: finite loss
    assert np.isfinite(_f(keras.losses.BinaryCrossentropy()([[1.0]], [[0.0]])))


def test_binary_crossentropy_keras_documented_example():
    # Keras' docstring: y_true [[0, 1], [0, 0]], y_pred [[0.6, 0.4], [0.4, 0.6]] -> 0.815
    bce = keras.losses.BinaryCrossentropy()
    assert round(_f(bce([[0.0, 1.0], [0.0, 0.0]], [[0.6, 0.4], [0.4, 0.6]])), 3) == 0.815


def test_reductions_and_sample_weight():
    per = np.abs(Y_PRED - Y_TRUE).mean(-1)
    w = np.array([0.25, 2.0], np.float32)
    mae = keras.losses.MeanAbsoluteError
    np.testing.assert_allclose(_f(mae(reduction="sum")(Y_TRUE, Y_PRED)), per.sum(), rtol=1e-6)
    np.testing.assert_allclose(mae(reduction="none")(Y_TRUE, Y_PRED).numpy(), per, rtol=1e-6)
    np.testing.assert_allclose(_f(mae()(Y_TRUE, Y_PRED, sample_weight=w)), (per * w).mean(),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="reduction must be one of"):
        mae(reduction="mean")


def test_kl_divergence():
    t = np.array([[0.2, 0.8]], np.float32)
    p = np.array([[0.5, 0.5]], np.float32)
    want = (t * np.log(t / p)).sum(-1)
    np.testing.assert_allclose(keras.losses.kl_divergence(t, p).numpy(), want, rtol=1e-5)


def test_loss_gradients_flow():
    x = tg.Variable(Y_PRED)
    for loss in (keras.losses.Huber(), keras.losses.MeanAbsoluteError(),
                 keras.losses.BinaryCrossentropy(from_logits=True)):
        with tg.GradientTape() as tape:
            value = loss(Y_TRUE, x)
        g = tape.gradient(value, x)
        assert g.shape == x.shape and np.isfinite(g.numpy()).all()


def test_losses_get_and_errors():
    assert isinstance(keras.losses.get("binary_crossentropy"), keras.losses.BinaryCrossentropy)
    assert keras.losses.MeanSquaredError is tg.losses.MeanSquaredError
    with pytest.raises(ValueError, match="Could not interpret loss identifier"):
        keras.losses.get("hinge_ish")
    with pytest.raises(ValueError, match="mean_absolute_error: y_true"):
        keras.losses.mean_absolute_error([[1.0, 2.0]], [[1.0]])


# -- metrics: Keras' documented examples -----------------------------------------------------

def test_mean_and_sum():
    m = keras.metrics.Mean()
    m.update_state([1, 3, 5, 7])
    assert _f(m.result()) == 4.0
    m.reset_state()
    m.update_state([1, 3, 5, 7], sample_weight=[1, 1, 0, 0])
    assert _f(m.result()) == 2.0
    s = keras.metrics.Sum()
    s.update_state([1, 3, 5, 7])
    assert _f(s.result()) == 16.0
    s.reset_state()
    assert _f(s.result()) == 0.0


def test_accuracies_documented_examples():
    m = keras.metrics.Accuracy()
    m.update_state([[1], [2], [3], [4]], [[0], [2], [3], [4]])
    assert _f(m.result()) == 0.75
    m.reset_state()
    m.update_state([[1], [2], [3], [4]], [[0], [2], [3], [4]], sample_weight=[1, 1, 0, 0])
    assert _f(m.result()) == 0.5

    m = keras.metrics.BinaryAccuracy()
    m.update_state([[1], [1], [0], [0]], [[0.98], [1], [0], [0.6]])
    assert _f(m.result()) == 0.75
    m.reset_state()
    m.update_state([[1], [1], [0], [0]], [[0.98], [1], [0], [0.6]], sample_weight=[1, 0, 0, 1])
    assert _f(m.result()) == 0.5

    m = keras.metrics.CategoricalAccuracy()
    m.update_state([[0, 0, 1], [0, 1, 0]], [[0.1, 0.9, 0.8], [0.05, 0.95, 0]])
    assert _f(m.result()) == 0.5
    m.reset_state()
    m.update_state([[0, 0, 1], [0, 1, 0]], [[0.1, 0.9, 0.8], [0.05, 0.95, 0]],
                   sample_weight=[0.7, 0.3])
    assert abs(_f(m.result()) - 0.3) < 1e-6

    m = keras.metrics.SparseCategoricalAccuracy()
    m.update_state([[2], [1]], [[0.1, 0.6, 0.3], [0.05, 0.95, 0]])
    assert _f(m.result()) == 0.5
    m.reset_state()
    m.update_state([[2], [1]], [[0.1, 0.6, 0.3], [0.05, 0.95, 0]], sample_weight=[0.7, 0.3])
    assert abs(_f(m.result()) - 0.3) < 1e-6


def test_precision_recall_documented_examples():
    p = keras.metrics.Precision()
    p.update_state([0, 1, 1, 1], [1, 0, 1, 1])
    assert abs(_f(p.result()) - 2 / 3) < 1e-6
    p.reset_state()
    p.update_state([0, 1, 1, 1], [1, 0, 1, 1], sample_weight=[0, 0, 1, 0])
    assert _f(p.result()) == 1.0
    r = keras.metrics.Recall()
    r.update_state([0, 1, 1, 1], [1, 0, 1, 1])
    assert abs(_f(r.result()) - 2 / 3) < 1e-6
    r.reset_state()
    r.update_state([0, 1, 1, 1], [1, 0, 1, 1], sample_weight=[0, 0, 1, 0])
    assert _f(r.result()) == 1.0
    # several thresholds give one value each
    p = keras.metrics.Precision(thresholds=[0.3, 0.7])
    p.update_state([0, 1, 1], [0.5, 0.5, 0.9])
    np.testing.assert_allclose(p.result().numpy(), [2 / 3, 1.0], rtol=1e-6)


def test_metrics_accumulate_tensors_on_the_device():
    m = keras.metrics.SparseCategoricalAccuracy()
    logits = tg.constant([[0.0, 1.0], [2.0, 0.0]])
    m.update_state(tg.constant([1, 1]), logits)
    m.update_state(tg.constant([0, 0]), logits)
    assert _f(m.result()) == 0.5
    assert _f(m(tg.constant([1, 0]), logits)) == pytest.approx(4 / 6)


def test_metric_errors():
    with pytest.raises(ValueError, match="sparse_categorical_accuracy: labels of shape"):
        keras.metrics.SparseCategoricalAccuracy().update_state([0, 1, 2], [[0.1, 0.9]])
    with pytest.raises(ValueError, match="Could not interpret metric identifier"):
        keras.metrics.get("f1ish")
    with pytest.raises(ValueError, match="Precision: thresholds must be in"):
        keras.metrics.Precision(thresholds=1.5)


def test_auc_documented_example_and_rank_statistic():
    m = keras.metrics.AUC(num_thresholds=3)
    m.update_state([0, 0, 1, 1], [0, 0.5, 0.3, 0.9])
    assert _f(m.result()) == 0.75
    m.reset_state()
    m.update_state([0, 0, 1, 1], [0, 0.5, 0.3, 0.9], sample_weight=[1, 0, 0, 1])
    assert _f(m.result()) == 1.0
    # with many thresholds, the ROC area approaches P(score of a positive > of a negative)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    p = np.clip(0.3 * y + rng.uniform(0, 0.7, 400), 0, 1)
    pos, neg = p[y == 1], p[y == 0]
    want = (pos[:, None] > neg[None, :]).mean()
    m = keras.metrics.AUC(num_thresholds=2000)
    m.update_state(y, p)
    assert abs(_f(m.result()) - want) < 2e-3
    with pytest.raises(NotImplementedError, match="AUC: only curve='ROC'"):
        keras.metrics.AUC(curve="PR")


@pytest.mark.parametrize("loss", [keras.losses.MeanSquaredError, keras.losses.MeanAbsoluteError,
                                  keras.losses.BinaryCrossentropy, keras.losses.Huber])
def test_a_label_vector_against_one_column_predictions_compares_row_by_row(loss):
    """Keras' adjustment (the regression tutorial's (n,) targets against a Dense(1)'s (n, 1)
    outputs): the column axis is added to the vector, never an (n, n) broadcast; other shape
    differences raise."""
    rng = np.random.default_rng(0)
    y = rng.uniform(0.1, 0.9, 6).astype(np.float32)
    p = rng.uniform(0.1, 0.9, (6, 1)).astype(np.float32)
    fn = loss(reduction="none")
    want = fn(y[:, None], p).numpy()
    np.testing.assert_array_equal(fn(y, p).numpy(), want)
    np.testing.assert_array_equal(fn(y[:, None], p[:, 0]).numpy(), want)
    assert want.shape == (6,)
    with pytest.raises(ValueError, match=r"y_true \(5,\) and y_pred \(6, 1\)"):
        fn(y[:5], p)
    with pytest.raises(ValueError, match="same shape"):
        fn(np.stack([y, y], 1), p[:, 0])


def test_a_metric_result_returned_from_tg_function_is_read_at_every_call():
    """The metric state is on the host: inside a trace its result is a node that reads it at
    each call (before: the trace's first value came back forever)."""
    mean = keras.metrics.Mean()
    acc = keras.metrics.SparseCategoricalAccuracy()

    @tg.function
    def step(v, y, p):
        mean.update_state(v)
        acc.update_state(y, p)
        return mean.result(), acc.result()

    got = [step(tg.constant([float(i)]), tg.constant([i % 2]),
                tg.constant([[0.9, 0.1]])) for i in range(4)]
    assert [float(m) for m, _ in got] == [0.0, 0.5, 1.0, 1.5]
    assert [float(a) for _, a in got] == [1.0, 0.5, float(np.float32(2 / 3)), 0.5]
    assert step.experimental_get_tracing_count() == 1


def test_cross_entropy_rmse_kl_and_top_k_metrics_as_keras():
    """Each metric's running result (two updates, the second with sample weights) against the
    same definition in numpy; these equal Keras 3.15's on these inputs (checked by hand)."""
    rng = np.random.default_rng(0)
    p = rng.random((6, 4)).astype("float32")
    p /= p.sum(1, keepdims=True)
    y = rng.integers(0, 4, 6)
    oh = np.eye(4, dtype="float32")[y]
    b = rng.integers(0, 2, (6, 4)).astype("float32")
    w = np.array([1.0, 0.0, 2.0])
    weights = np.concatenate([np.ones(6), w])

    def running(per_example, *args):
        v = np.concatenate([per_example(*args), per_example(*(a[:3] for a in args))])
        return float(np.sum(v * weights) / np.sum(weights))

    clip = lambda q: np.clip(q, 1e-7, 1 - 1e-7)  # noqa: E731
    bce = lambda t, q: -np.mean(t * np.log(clip(q)) + (1 - t) * np.log(1 - clip(q)), -1)  # noqa
    cce = lambda t, q: -np.sum(t * np.log(clip(q / q.sum(-1, keepdims=True))), -1)  # noqa
    kl = lambda t, q: np.sum(clip(t) * np.log(clip(t) / clip(q)), -1)  # noqa: E731
    top2 = lambda t, q: (np.argsort(-q, -1)[:, :2] == t[:, None]).any(-1).astype(float)  # noqa
    M = keras.metrics
    cases = [(M.BinaryCrossentropy(), (b, p), bce), (M.CategoricalCrossentropy(), (oh, p), cce),
             (M.SparseCategoricalCrossentropy(), (y, p), lambda t, q: cce(np.eye(4)[t], q)),
             (M.KLDivergence(), (oh, p), kl),
             (M.SparseTopKCategoricalAccuracy(k=2), (y, p), top2),
             (M.TopKCategoricalAccuracy(k=2), (oh, p), lambda t, q: top2(t.argmax(-1), q))]
    for metric, (t, q), ref in cases:
        metric.update_state(t, q)
        metric.update_state(t[:3], q[:3], sample_weight=w)
        assert float(metric.result()) == pytest.approx(running(ref, t, q), rel=1e-5), metric
    rmse = M.RootMeanSquaredError()
    rmse.update_state(b, p)
    rmse.update_state(b[:3], p[:3], sample_weight=w)
    sq = np.concatenate([((b - p) ** 2).ravel(), ((b[:3] - p[:3]) ** 2 * w[:, None]).ravel()])
    count = b.size + 4 * w.sum()
    assert float(rmse.result()) == pytest.approx(np.sqrt(sq.sum() / count), rel=1e-5)
    for name in ("binary_crossentropy", "root_mean_squared_error", "kld",
                 "sparse_top_k_categorical_accuracy"):
        assert isinstance(M.get(name), M.Metric)
