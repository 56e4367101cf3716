"""Keras losses against numpy references: values, reductions, weights, stability, gradients."""
import numpy as np
import pytest

import tapegpu as tg


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_mean_squared_error_reductions_and_weights():
    y = np.random.randn(5, 3).astype(np.float32)
    p = np.random.randn(5, 3).astype(np.float32)
    per = ((y - p) ** 2).mean(-1)
    mse = tg.losses.MeanSquaredError()
    out = mse(y, p)
    assert out.dtype == tg.float32 and out.shape == ()
    np.testing.assert_allclose(float(out), per.mean(), rtol=1e-6)
    w = np.array([1.0, 0.0, 2.0, 1.0, 0.5], np.float32)
    np.testing.assert_allclose(float(mse(y, p, sample_weight=w)), (per * w).sum() / 5, rtol=1e-6)
    np.testing.assert_allclose(float(tg.losses.MeanSquaredError(reduction="sum")(y, p)),
                               per.sum(), rtol=1e-6)
    np.testing.assert_allclose(tg.losses.MeanSquaredError(reduction="none")(y, p).numpy(), per,
                               rtol=1e-6)
    with pytest.raises(ValueError, match="reduction must be one of"):
        tg.losses.MeanSquaredError(reduction="mean")
    with pytest.raises(ValueError, match=r"y_true \(5, 2\) and y_pred \(5, 3\)"):
        mse(y[:, :2], p)


def test_sparse_categorical_crossentropy_from_logits():
    z = np.random.randn(6, 4) * 3
    labels = np.array([0, 3, 1, 1, 2, 0])
    want = -_log_softmax(z)[np.arange(6), labels]
    loss = tg.losses.SparseCategoricalCrossentropy(from_logits=True)
    np.testing.assert_allclose(float(loss(labels, z)), want.mean(), rtol=1e-12)
    np.testing.assert_allclose(float(loss(labels[:, None], z)), want.mean(), rtol=1e-12)
    np.testing.assert_allclose(float(loss(labels.astype(np.float32), z)), want.mean(),
                               rtol=1e-12)
    big = tg.constant([[1000.0, -1000.0]])  # stable for huge logits
    assert float(loss([1], big)) == pytest.approx(2000.0)
    with pytest.raises(ValueError, match=r"labels must have shape \(6,\)"):
        loss(labels[:3], z)


def test_sparse_categorical_crossentropy_from_probabilities_clips_like_keras():
    p = np.array([[0.2, 0.8, 0.0], [0.5, 0.25, 0.25]], np.float32)
    loss = tg.losses.SparseCategoricalCrossentropy()
    want = -np.log(np.array([0.8, 0.25]))
    np.testing.assert_allclose(float(loss([1, 2], p)), want.mean(), rtol=1e-6)
    zero = float(loss([2, 0], p))  # probability 0: clipped at 1e-7, finite
    np.testing.assert_allclose(zero, (-np.log(1e-7) - np.log(0.5)) / 2, rtol=1e-5)
    unnormalised = p * 4.0  # Keras renormalises the class axis
    np.testing.assert_allclose(float(loss([1, 2], unnormalised)), want.mean(), rtol=1e-6)


def test_categorical_crossentropy_logits_probabilities_and_smoothing():
    z = np.random.randn(4, 5)
    y = np.eye(5)[[1, 0, 4, 2]]
    want = -(y * _log_softmax(z)).sum(-1)
    np.testing.assert_allclose(
        float(tg.losses.CategoricalCrossentropy(from_logits=True)(y, z)), want.mean(), rtol=1e-12)
    p = np.exp(_log_softmax(z))
    np.testing.assert_allclose(float(tg.losses.CategoricalCrossentropy()(y, p)), want.mean(),
                               rtol=1e-9)
    smooth = y * 0.9 + 0.1 / 5
    np.testing.assert_allclose(
        float(tg.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)(y, z)),
        (-(smooth * _log_softmax(z)).sum(-1)).mean(), rtol=1e-12)
    with pytest.raises(ValueError, match="SparseCategoricalCrossentropy for integer labels"):
        tg.losses.CategoricalCrossentropy()([1, 0, 4, 2], p)


def test_crossentropy_gradients_are_softmax_minus_onehot_over_batch():
    z = tg.Variable(np.random.randn(3, 4).astype(np.float32))
    labels = np.array([1, 0, 3])
    for loss, target in [(tg.losses.SparseCategoricalCrossentropy(from_logits=True), labels),
                         (tg.losses.CategoricalCrossentropy(from_logits=True),
                          np.eye(4, dtype=np.float32)[labels])]:
        with tg.GradientTape() as tape:
            value = loss(target, z)
        g = tape.gradient(value, z).numpy()
        want = (np.exp(_log_softmax(z.numpy())) - np.eye(4)[labels]) / 3
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7)
        assert g.dtype == np.float32


def test_losses_refuse_integer_predictions():
    with pytest.raises(TypeError, match="y_pred must be floating"):
        tg.losses.MeanSquaredError()([1, 2], [1, 2])


@pytest.mark.parametrize("from_logits", [False, True])
@pytest.mark.parametrize("label", [3, -1])
def test_sparse_crossentropy_labels_out_of_range_raise_on_both_paths(from_logits, label):
    probs = [[0.2, 0.3, 0.5], [0.3, 0.3, 0.4]]
    loss = tg.losses.SparseCategoricalCrossentropy(from_logits=from_logits)
    with pytest.raises(tg.InvalidArgumentError) as info:  # on a GPU: at the first read
        with tg.GradientTape():
            loss([0, label], probs).numpy()
    msg = str(info.value)
    assert "SparseCategoricalCrossentropy" in msg and str(label) in msg and "[0, 3)" in msg
    with pytest.raises(tg.InvalidArgumentError, match=r"sparse_categorical_crossentropy.*\[0, 3\)"):
        tg.losses.sparse_categorical_crossentropy([[label], [0]], probs,
                                                  from_logits=from_logits).numpy()
    # labels in range still work, as float labels holding integers (Keras)
    assert np.isfinite(float(loss([0.0, 2.0], probs)))


def test_sample_weight_holding_none_raises():
    loss = tg.losses.SparseCategoricalCrossentropy()
    probs = [[0.2, 0.3, 0.5], [0.3, 0.3, 0.4]]
    for bad in ([None, 1.0], np.array([None, 1.0], dtype=object), [[None], [1.0]]):
        with pytest.raises(ValueError, match="SparseCategoricalCrossentropy: sample_weight"):
            loss([0, 1], probs, sample_weight=bad)
    with pytest.raises(ValueError, match="MeanSquaredError: sample_weight"):
        tg.losses.MeanSquaredError()([[0.0]], [[1.0]], sample_weight=[None])
    np.testing.assert_allclose(float(loss([0, 1], probs, sample_weight=[0.0, 1.0])),
                               -np.log(0.3) / 2, rtol=1e-6)
