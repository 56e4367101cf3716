"""The hinge, log-cosh, cosine-similarity, percentage, logarithmic and Poisson losses and the
metrics built on them, confusion counts, F-beta/F1 and R2, against numpy transcriptions of
Keras 3's definitions (sample weights, reductions, gradients, bad input)."""
import warnings

import numpy as np
import pytest

import tapegpu as tg

keras = tg.keras
EPS = 1e-7
RNG = np.random.default_rng(7)
Y_REAL = RNG.uniform(-1.0, 2.0, (5, 3)).astype(np.float32)
Y_POS = RNG.uniform(0.1, 2.0, (5, 3)).astype(np.float32)
Y_BIN = np.array([[0, 1, 1], [1, 0, 0], [0, 0, 1], [1, 1, 1], [0, 1, 0]], np.float32)
ONE_HOT = np.eye(3, dtype=np.float32)[[0, 2, 1, 1, 0]]
WEIGHTS = np.array([1.0, 0.5, 2.0, 0.0, 3.0], np.float32)


def _hinge_labels(t):
    return 2 * t - 1 if np.isin(t, (0.0, 1.0)).all() else t


def _unit(x):
    return x / np.sqrt(np.maximum((x * x).sum(-1, keepdims=True), EPS * EPS))


# per-example numpy definitions (float64), as Keras 3 writes them
DEFINITIONS = {
    "hinge": lambda t, p: np.maximum(1 - _hinge_labels(t) * p, 0).mean(-1),
    "squared_hinge": lambda t, p: np.square(np.maximum(1 - _hinge_labels(t) * p, 0)).mean(-1),
    "categorical_hinge": lambda t, p: np.maximum(
        ((1 - t) * p).max(-1) - (t * p).sum(-1) + 1, 0),
    "log_cosh": lambda t, p: np.log(np.cosh(p - t)).mean(-1),
    "cosine_similarity": lambda t, p: -(_unit(t) * _unit(p)).sum(-1),
    "mean_absolute_percentage_error": lambda t, p: 100 * np.abs(
        (t - p) / np.maximum(np.abs(t), EPS)).mean(-1),
    "mean_squared_logarithmic_error": lambda t, p: np.square(
        np.log(np.maximum(p, EPS) + 1) - np.log(np.maximum(t, EPS) + 1)).mean(-1),
    "poisson": lambda t, p: (p - t * np.log(p + EPS)).mean(-1),
}
CLASSES = {"hinge": "Hinge", "squared_hinge": "SquaredHinge",
           "categorical_hinge": "CategoricalHinge", "log_cosh": "LogCosh",
           "cosine_similarity": "CosineSimilarity",
           "mean_absolute_percentage_error": "MeanAbsolutePercentageError",
           "mean_squared_logarithmic_error": "MeanSquaredLogarithmicError",
           "poisson": "Poisson"}
LABELS = [("real", Y_REAL), ("binary", Y_BIN), ("one_hot", ONE_HOT)]


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
@pytest.mark.parametrize("labels", [lab for lab, _ in LABELS])
def test_loss_functions_match_definitions(name, labels):
    t = dict(LABELS)[labels]
    want = DEFINITIONS[name](t.astype(np.float64), Y_POS.astype(np.float64))
    got = getattr(keras.losses, name)(t, Y_POS)
    assert got.dtype == tg.float32 and got.shape == (5,)
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
def test_loss_classes_weight_and_reduce_like_keras(name):
    per_example = DEFINITIONS[name](Y_REAL.astype(np.float64), Y_POS.astype(np.float64))
    cls = getattr(keras.losses, CLASSES[name])
    assert cls().name == name
    weighted = per_example * WEIGHTS
    np.testing.assert_allclose(float(cls()(Y_REAL, Y_POS, sample_weight=WEIGHTS)),
                               weighted.sum() / 5, rtol=2e-5)
    np.testing.assert_allclose(float(cls(reduction="sum")(Y_REAL, Y_POS, WEIGHTS)),
                               weighted.sum(), rtol=2e-5)
    np.testing.assert_allclose(cls(reduction=None)(Y_REAL, Y_POS, WEIGHTS).numpy(), weighted,
                               rtol=2e-5, atol=1e-6)
    assert type(keras.losses.get(name)) is cls


def test_loss_aliases_and_get():
    assert keras.losses.mape is keras.losses.mean_absolute_percentage_error
    assert keras.losses.msle is keras.losses.mean_squared_logarithmic_error
    assert type(keras.losses.get("mape")).__name__ == "MeanAbsolutePercentageError"
    assert type(keras.losses.get("msle")).__name__ == "MeanSquaredLogarithmicError"
    with pytest.raises(ValueError, match="Could not interpret loss identifier: 'logcoshh'"):
        keras.losses.get("logcoshh")


def test_hinge_maps_only_all_binary_labels():
    # one label that is neither 0 nor 1 keeps every label as given (Keras' all() test)
    t = np.array([[0.0, 1.0], [-1.0, 1.0]], np.float32)
    p = np.array([[0.6, 0.4], [0.3, -0.2]], np.float32)
    np.testing.assert_allclose(keras.losses.hinge(t, p).numpy(),
                               np.maximum(1 - t * p, 0).mean(-1), rtol=1e-6)
    np.testing.assert_allclose(keras.losses.hinge(t[:1], p[:1]).numpy(),
                               np.maximum(1 - (2 * t[:1] - 1) * p[:1], 0).mean(-1), rtol=1e-6)


def test_cosine_similarity_axis_sign_and_zero_vectors():
    t = np.array([[1.0, 2.0], [0.0, 0.0]], np.float32)
    p = np.array([[2.0, 4.0], [1.0, 1.0]], np.float32)
    np.testing.assert_allclose(keras.losses.cosine_similarity(t, p).numpy(), [-1.0, 0.0],
                               atol=1e-6)
    got = keras.losses.CosineSimilarity(axis=0, reduction=None)(t, p).numpy()
    np.testing.assert_allclose(got, -(_unit(t.T) * _unit(p.T)).sum(-1), rtol=1e-6)
    with tg.GradientTape() as tape:
        x = tg.constant(p)
        tape.watch(x)
        loss = keras.losses.CosineSimilarity()(t, x)
    assert np.isfinite(tape.gradient(loss, x).numpy()).all()


def test_log_cosh_is_finite_for_large_errors():
    got = keras.losses.log_cosh([[0.0]], [[200.0]]).numpy()  # cosh(200) overflows float32
    np.testing.assert_allclose(got, [200.0 - np.log(2.0)], rtol=1e-6)


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
def test_loss_gradients_match_finite_differences(name):
    t = (ONE_HOT if name == "categorical_hinge" else Y_REAL).astype(np.float64)
    p = Y_POS.astype(np.float64)
    loss = getattr(keras.losses, CLASSES[name])()
    with tg.GradientTape() as tape:
        x = tg.constant(p)
        tape.watch(x)
        value = loss(t, x, sample_weight=WEIGHTS.astype(np.float64))
    got = tape.gradient(value, x).numpy()
    want, h = np.zeros_like(p), 1e-6
    for i in np.ndindex(p.shape):
        d = np.zeros_like(p)
        d[i] = h
        want[i] = ((DEFINITIONS[name](t, p + d) - DEFINITIONS[name](t, p - d)) * WEIGHTS).sum() \
            / (2 * h * len(p))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)


def test_losses_reject_bad_input():
    with pytest.raises(TypeError, match="hinge: y_pred must be floating"):
        keras.losses.hinge([[1.0]], np.array([[1]], np.int32))
    with pytest.raises(ValueError, match="poisson: y_true .* must have the same shape"):
        keras.losses.poisson(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="reduction must be one of"):
        keras.losses.LogCosh(reduction="mean")
    with pytest.raises(ValueError, match="sample_weight must hold numbers"):
        keras.losses.Hinge()(Y_BIN, Y_POS, sample_weight=[1.0, None, 1.0, 1.0, 1.0])


def test_losses_keep_float64():
    out = keras.losses.MeanSquaredLogarithmicError()(Y_POS.astype(np.float64),
                                                     Y_REAL.astype(np.float64))
    assert out.dtype == tg.float64


# -- metrics -------------------------------------------------------------------------------

METRICS = {"MeanAbsolutePercentageError": ("mean_absolute_percentage_error", 1.0),
           "MeanSquaredLogarithmicError": ("mean_squared_logarithmic_error", 1.0),
           "LogCoshError": ("log_cosh", 1.0), "CosineSimilarity": ("cosine_similarity", -1.0),
           "Hinge": ("hinge", 1.0), "SquaredHinge": ("squared_hinge", 1.0),
           "CategoricalHinge": ("categorical_hinge", 1.0), "Poisson": ("poisson", 1.0)}


@pytest.mark.parametrize("cls", sorted(METRICS))
def test_mean_metrics_accumulate_weighted_means(cls):
    fn, sign = METRICS[cls]
    m = getattr(keras.metrics, cls)()
    m.update_state(Y_REAL, Y_POS, sample_weight=WEIGHTS)
    m.update_state(Y_BIN, Y_POS)
    values = np.concatenate([DEFINITIONS[fn](Y_REAL.astype(np.float64), Y_POS) * WEIGHTS,
                             DEFINITIONS[fn](Y_BIN.astype(np.float64), Y_POS)])
    np.testing.assert_allclose(float(m.result()), sign * values.sum() / (WEIGHTS.sum() + 5),
                               rtol=2e-5)
    m.reset_state()
    assert float(m.result()) == 0.0


def test_metric_names_and_get():
    assert keras.metrics.LogCoshError().name == "logcosh"
    assert keras.metrics.CosineSimilarity().name == "cosine_similarity"
    assert keras.metrics.TruePositives().name == "true_positives"
    for name, cls in [("mape", "MeanAbsolutePercentageError"), ("f1_score", "F1Score"),
                      ("r2_score", "R2Score"), ("false_negatives", "FalseNegatives")]:
        assert type(keras.metrics.get(name)).__name__ == cls


P_SCORES = RNG.uniform(size=(5, 3)).astype(np.float32)


@pytest.mark.parametrize("cls,cell", [("TruePositives", (1, 1)), ("FalsePositives", (1, 0)),
                                      ("TrueNegatives", (0, 0)), ("FalseNegatives", (0, 1))])
def test_confusion_counts(cls, cell):
    pred_pos, label_pos = cell
    w = WEIGHTS[:, None] * np.ones((1, 3))

    def count(th, weights):
        hit = ((P_SCORES > th) == bool(pred_pos)) & ((Y_BIN > 0.5) == bool(label_pos))
        return (hit * weights).sum()

    m = getattr(keras.metrics, cls)()
    m.update_state(Y_BIN, P_SCORES, sample_weight=WEIGHTS[:, None])
    m.update_state(Y_BIN, P_SCORES)
    assert m.result().shape == ()
    np.testing.assert_allclose(float(m.result()), count(0.5, w) + count(0.5, 1.0), rtol=1e-6)
    several = getattr(keras.metrics, cls)(thresholds=[0.2, 0.7])
    got = several(Y_BIN, P_SCORES).numpy()
    np.testing.assert_allclose(got, [count(0.2, 1.0), count(0.7, 1.0)], rtol=1e-6)
    with pytest.raises(ValueError, match="thresholds must be in"):
        getattr(keras.metrics, cls)(thresholds=1.5)


def _fbeta(t, p, w, average, beta, threshold):
    hit = p > threshold if threshold is not None else \
        (p >= p.max(-1, keepdims=True)) & (np.abs(p) > 1e-9)
    hit, w = hit.astype(np.float64), w[:, None]
    tp, fp = (hit * t * w).sum(0), (hit * (1 - t) * w).sum(0)
    fn, support = ((1 - hit) * t * w).sum(0), (t * w).sum(0)
    if average == "micro":
        tp, fp, fn = tp.sum(), fp.sum(), fn.sum()
    precision, recall = tp / (tp + fp + EPS), tp / (tp + fn + EPS)
    f = (1 + beta ** 2) * precision * recall / (beta ** 2 * precision + recall + EPS)
    if average == "weighted":
        return (f * support / (support.sum() + EPS)).sum()
    return f.mean() if average else f


@pytest.mark.parametrize("average", [None, "micro", "macro", "weighted"])
@pytest.mark.parametrize("threshold", [None, 0.4])
def test_fbeta_and_f1_scores(average, threshold):
    m = keras.metrics.FBetaScore(average=average, beta=2.0, threshold=threshold)
    m.update_state(Y_BIN, P_SCORES, sample_weight=WEIGHTS)
    want = _fbeta(Y_BIN, P_SCORES, WEIGHTS.astype(np.float64), average, 2.0, threshold)
    got = m.result().numpy()
    assert got.shape == np.shape(want)  # (classes,) for average=None, else a scalar
    np.testing.assert_allclose(got, want, rtol=1e-5)
    f1 = keras.metrics.F1Score(average=average, threshold=threshold)
    f1.update_state(Y_BIN[:2], P_SCORES[:2])
    f1.update_state(Y_BIN[2:], P_SCORES[2:])
    np.testing.assert_allclose(f1.result().numpy(),
                               _fbeta(Y_BIN, P_SCORES, np.ones(5), average, 1.0, threshold),
                               rtol=1e-5)


def test_fbeta_rejects_bad_arguments():
    with pytest.raises(ValueError, match="invalid `average`"):
        keras.metrics.F1Score(average="samples")
    with pytest.raises(ValueError, match="`beta` must be a Python float > 0"):
        keras.metrics.FBetaScore(beta=2)
    with pytest.raises(ValueError, match="0 < threshold <= 1"):
        keras.metrics.F1Score(threshold=0.0)
    with pytest.raises(ValueError, match="expects 2D inputs"):
        keras.metrics.F1Score()(Y_BIN[0], P_SCORES[0])


def _r2(t, p, w, aggregation, k):
    w = np.broadcast_to(w[:, None], t.shape)
    mean = (w * t).sum(0) / w.sum(0)
    variance = (w * (t - mean) ** 2).sum(0)
    raw = 1 - (w * (t - p) ** 2).sum(0) / variance
    score = {"uniform_average": raw.mean(), None: raw,
             "variance_weighted_average": (variance * raw).sum() / variance.sum()}[aggregation]
    n = t.size  # Keras counts label values, not rows
    return 1 - (1 - score) * (n - 1) / (n - k - 1) if k else score


@pytest.mark.parametrize("aggregation", ["uniform_average", "variance_weighted_average", None])
@pytest.mark.parametrize("k", [0, 3])
def test_r2_score(aggregation, k):
    m = keras.metrics.R2Score(class_aggregation=aggregation, num_regressors=k)
    m.update_state(Y_REAL[:2], Y_POS[:2], sample_weight=WEIGHTS[:2])
    m.update_state(Y_REAL[2:], Y_POS[2:], sample_weight=WEIGHTS[2:])
    want = _r2(Y_REAL.astype(np.float64), Y_POS.astype(np.float64),
               WEIGHTS.astype(np.float64), aggregation, k)
    np.testing.assert_allclose(m.result().numpy(), want, rtol=1e-5)


def test_r2_score_edge_cases():
    constant = keras.metrics.R2Score()
    assert float(constant(np.ones((3, 1)), np.zeros((3, 1)))) == 0.0  # no variance: 0
    few = keras.metrics.R2Score(num_regressors=5)
    with pytest.warns(UserWarning, match="falling back to the standard R2"):
        value = float(few([[1.0], [2.0], [4.0]], [[1.0], [2.0], [3.0]]))
    np.testing.assert_allclose(value, 1 - 1 / (14 / 3), rtol=1e-6)
    with pytest.raises(ValueError, match="class_aggregation"):
        keras.metrics.R2Score(class_aggregation="mean")
    with pytest.raises(ValueError, match="num_regressors"):
        keras.metrics.R2Score(num_regressors=-1)
    with pytest.raises(ValueError, match="expects 2D inputs"):
        keras.metrics.R2Score()(np.ones((2, 2, 2)), np.ones((2, 2, 2)))


def test_vector_metrics_in_fit_logs():
    model = keras.Sequential([keras.layers.Dense(3)])
    model.compile(optimizer="adamax", loss="squared_hinge",
                  metrics=["f1_score", keras.metrics.TruePositives(thresholds=[0.2, 0.7])])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = model.fit(Y_POS, Y_BIN, epochs=1, verbose=1).history
    assert np.shape(history["f1_score"][0]) == (3,)
    assert np.shape(history["true_positives"][0]) == (2,)


def _mean_iou(pairs, n):
    """IoU per class from (label, prediction, weight) triples, averaged over present classes."""
    cm = np.zeros((n, n))
    for t, p, w in pairs:
        if 0 <= t < n and 0 <= p < n:
            cm[int(t), int(p)] += w
    ious = [cm[c, c] / (cm[c].sum() + cm[:, c].sum() - cm[c, c])
            for c in range(n) if cm[c].sum() + cm[:, c].sum() > 0]
    return np.mean(ious) if ious else 0.0


def test_mean_iou():
    t = RNG.integers(0, 4, (6, 5))
    p = RNG.integers(0, 5, (6, 5))  # 4 is out of range: not counted
    w = RNG.uniform(0.0, 2.0, 6)
    m = keras.metrics.MeanIoU(num_classes=4)
    assert m.name == "mean_io_u"
    m.update_state(t[:3], p[:3], sample_weight=w[:3])  # one weight per example
    m.update_state(t[3:], p[3:], sample_weight=w[3:])
    pairs = [(a, b, ww) for row_t, row_p, ww in zip(t, p, w) for a, b in zip(row_t, row_p)]
    np.testing.assert_allclose(float(m.result()), _mean_iou(pairs, 4), rtol=1e-5)
    ignoring = keras.metrics.MeanIoU(num_classes=4, ignore_class=2)
    ignoring.update_state(t, p)
    np.testing.assert_allclose(float(ignoring.result()),
                               _mean_iou([(a, b, 1.0) for a, b, _ in pairs if a != 2], 4),
                               rtol=1e-5)
    scores = RNG.uniform(size=(6, 5, 4))
    dense = keras.metrics.MeanIoU(num_classes=4, sparse_y_pred=False)
    dense.update_state(t, scores)
    np.testing.assert_allclose(float(dense.result()),
                               _mean_iou(zip(t.ravel(), scores.argmax(-1).ravel(),
                                             np.ones(30)), 4), rtol=1e-5)
    # fractional ids truncate toward 0 (Keras' int64 state): -0.5 is class 0, 1.7 class 1
    frac = keras.metrics.MeanIoU(num_classes=2)
    np.testing.assert_allclose(float(frac([0, 1, 1], [-0.5, 1.7, 0.2])),
                               _mean_iou([(0, 0, 1), (1, 1, 1), (1, 0, 1)], 2), rtol=1e-5)
    assert float(keras.metrics.MeanIoU(3).result()) == 0.0
    with pytest.raises(ValueError, match="num_classes must be an integer >= 1"):
        keras.metrics.MeanIoU(0)
    with pytest.raises(ValueError, match="give one prediction per label"):
        keras.metrics.MeanIoU(2)([0, 1], [0, 1, 1])
