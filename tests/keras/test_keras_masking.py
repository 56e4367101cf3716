"""Keras masks: Embedding(mask_zero=True) and Masking make them, layers pass them on or use
them, losses count the unmasked positions only (checked against Keras 3.15 by hand: the same
weights give the same outputs and losses; here against explicit masks and numpy)."""
import warnings

import numpy as np
import pytest

import tapegpu as tg

K = tg.keras
get_keras_mask = K.backend.get_keras_mask
TOKENS = np.array([[3, 1, 4, 0, 0], [2, 7, 0, 0, 0], [5, 9, 2, 6, 5]])


def test_embedding_with_mask_zero_attaches_the_padding_mask():
    out = K.layers.Embedding(10, 4, mask_zero=True)(TOKENS)
    np.testing.assert_array_equal(get_keras_mask(out).numpy(), TOKENS != 0)
    assert get_keras_mask(K.layers.Embedding(10, 4)(TOKENS)) is None


@pytest.mark.parametrize("rnn", [lambda: K.layers.LSTM(3), lambda: K.layers.GRU(3),
                                 lambda: K.layers.SimpleRNN(3, return_sequences=True),
                                 lambda: K.layers.Bidirectional(K.layers.LSTM(3))])
def test_a_recurrent_layer_after_a_masking_embedding_skips_the_padding(rnn):
    emb, layer = K.layers.Embedding(10, 4, mask_zero=True), rnn()
    x = emb(TOKENS)
    auto = layer(x)
    explicit = layer(x, mask=tg.constant(TOKENS != 0))
    unmasked = layer(tg.constant(x.numpy()))  # the same values without a mask
    np.testing.assert_array_equal(auto.numpy(), explicit.numpy())
    assert not np.allclose(auto.numpy(), unmasked.numpy())


def test_return_sequences_passes_the_mask_on_and_a_last_step_output_does_not():
    x = K.layers.Embedding(10, 4, mask_zero=True)(TOKENS)
    seq = K.layers.LSTM(3, return_sequences=True)(x)
    np.testing.assert_array_equal(get_keras_mask(seq).numpy(), TOKENS != 0)
    assert get_keras_mask(K.layers.LSTM(3)(x)) is None
    dense = K.layers.Dense(2)(seq)  # Dense supports masking: passes it on
    np.testing.assert_array_equal(get_keras_mask(dense).numpy(), TOKENS != 0)


def test_masking_zeroes_and_masks_the_padded_steps():
    x = np.random.default_rng(0).standard_normal((2, 4, 3)).astype(np.float32)
    x[0, 2:] = -1.0
    x[1, 3] = -1.0
    x[1, 1, 0] = -1.0  # one feature at the mask value does not mask the step
    out = K.layers.Masking(mask_value=-1.0)(x)
    keep = np.array([[True, True, False, False], [True, True, True, False]])
    np.testing.assert_array_equal(get_keras_mask(out).numpy(), keep)
    np.testing.assert_array_equal(out.numpy(), np.where(keep[..., None], x, 0.0))
    gru = K.layers.GRU(2)
    np.testing.assert_array_equal(gru(out).numpy(), gru(out, mask=tg.constant(keep)).numpy())


def test_global_average_pooling_1d_averages_the_unmasked_steps():
    x = np.random.default_rng(1).standard_normal((3, 5, 2)).astype(np.float32)
    mask = np.array([[1, 1, 0, 1, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]], bool)
    out = K.layers.GlobalAveragePooling1D()(tg.constant(x), mask=tg.constant(mask)).numpy()
    want = [x[i][mask[i]].mean(0) if mask[i].any() else np.zeros(2) for i in range(3)]
    np.testing.assert_allclose(out, np.array(want), rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match=r"GlobalAveragePooling1D.*\(batch, steps\)"):
        K.layers.GlobalAveragePooling1D()(tg.constant(x), mask=tg.constant(mask[:, :4]))


def test_a_layer_that_drops_the_mask_warns_once():
    model = K.Sequential([K.layers.Embedding(10, 4, mask_zero=True), K.layers.Flatten(),
                          K.layers.Dense(2)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model(TOKENS)
        model(TOKENS)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "Flatten" in messages[0] and "masking" in messages[0]


def _sequence_model():
    return K.Sequential([K.layers.Embedding(10, 4, mask_zero=True),
                         K.layers.LSTM(3, return_sequences=True), K.layers.Dense(2)])


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", "none"])
def test_a_loss_on_a_masked_prediction_counts_the_unmasked_positions(reduction):
    model = _sequence_model()
    labels = np.random.default_rng(2).integers(0, 2, TOKENS.shape)
    logits = model(TOKENS)
    loss = K.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)
    got = loss(tg.constant(labels), logits).numpy()
    each = K.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")(
        tg.constant(labels), tg.constant(logits.numpy())).numpy()  # no mask: every position
    keep = TOKENS != 0
    want = {"none": np.where(keep, each, 0.0), "sum": each[keep].sum(),
            "sum_over_batch_size": each[keep].mean()}[reduction]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_masks_flow_through_functional_models_traced_functions_and_evaluate():
    inputs = K.Input((5,), dtype="int32")
    x = K.layers.Embedding(10, 4, mask_zero=True)(inputs)
    x = K.layers.LSTM(3, return_sequences=True)(x)
    functional = K.Model(inputs, K.layers.Dense(2)(x))
    sequential = _sequence_model()
    sequential(TOKENS)
    sequential.set_weights(functional.get_weights())
    want = sequential(TOKENS)
    got = functional(TOKENS)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(get_keras_mask(got).numpy(), TOKENS != 0)
    traced = tg.function(lambda t: sequential(t))(tg.constant(TOKENS))
    np.testing.assert_allclose(traced.numpy(), want.numpy(), rtol=1e-6)

    labels = np.random.default_rng(3).integers(0, 2, TOKENS.shape)
    sequential.compile(loss=K.losses.SparseCategoricalCrossentropy(from_logits=True))
    evaluated = sequential.evaluate(TOKENS, labels, verbose=0)
    each = K.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")(
        tg.constant(labels), tg.constant(want.numpy())).numpy()
    np.testing.assert_allclose(evaluated, each[TOKENS != 0].mean(), rtol=1e-5)


def test_concatenate_joins_masks_as_keras():
    """Along time the masks concatenate (an unmasked input counts as all True); along the
    features a step is kept when any input keeps it (Keras 3.15 gives these, by hand)."""
    left, right = K.layers.Embedding(10, 4, mask_zero=True), K.layers.Embedding(10, 4)
    a, b = left(TOKENS), right(TOKENS[:, :2])
    joined = K.layers.Concatenate(axis=1)([a, b])
    np.testing.assert_array_equal(get_keras_mask(joined).numpy(),
                                  np.concatenate([TOKENS != 0, np.ones((3, 2), bool)], 1))
    reverse = left(TOKENS[:, ::-1])
    features = K.layers.Concatenate()([a, reverse])
    np.testing.assert_array_equal(get_keras_mask(features).numpy(),
                                  (TOKENS != 0) | (TOKENS[:, ::-1] != 0))
    assert get_keras_mask(K.layers.Concatenate()([a, right(TOKENS)])).numpy().all()
    assert get_keras_mask(K.layers.Concatenate()([b, b])) is None
    lstm = K.layers.LSTM(3)  # the joined mask is used downstream
    given = tg.constant(get_keras_mask(joined).numpy())
    np.testing.assert_array_equal(lstm(joined).numpy(), lstm(joined, mask=given).numpy())
    with pytest.raises(ValueError, match="Concatenate.*one entry per input"):
        K.layers.Concatenate().compute_mask([a, b], [None])
