"""Keras' masks and logits are kept beside tensors (tapegpu/models/tensor_attributes.py), not
on them: a tensor has no Keras fields, an annotation goes with its tensor, and a new tensor at a
freed tensor's address starts without one."""
import gc

import tapegpu as tg
from tapegpu.models import tensor_attributes as attrs

SINGLE_DEVICE = True  # bookkeeping only


def test_tensors_have_no_keras_fields():
    slots = set(tg.Tensor.__slots__) | {s for k in tg.Tensor.__mro__
                                         for s in getattr(k, "__slots__", ())}
    assert not {s for s in slots if "keras" in s}
    x = tg.ones((1, 2))
    assert not hasattr(x, "_keras_mask") and not hasattr(x, "_keras_logits")


def test_set_get_and_clear():
    x, mask = tg.ones((2, 3)), tg.constant([True, False])
    assert attrs.get_keras_mask(x) is None
    attrs.set_keras_mask(x, mask)
    assert attrs.get_keras_mask(x) is mask and attrs.get_keras_logits(x) is None
    attrs.set_keras_mask(x, None)
    assert attrs.get_keras_mask(x) is None
    attrs.set_keras_mask(x, None)  # clearing twice is fine
    attrs.set_keras_logits(x, "binary", mask)
    assert attrs.get_keras_logits(x) == ("binary", mask)
    assert attrs.get_keras_mask([x]) is None  # any object can be asked


def test_an_annotation_goes_with_its_tensor():
    before = len(attrs._MASKS), len(attrs._LOGITS)
    x = tg.ones((2, 3))
    attrs.set_keras_mask(x, tg.constant([True, True]))
    attrs.set_keras_mask(x, tg.constant([True, False]))  # replaced: still one entry
    attrs.set_keras_logits(x, "categorical", tg.zeros((2, 3)))
    assert (len(attrs._MASKS), len(attrs._LOGITS)) == (before[0] + 1, before[1] + 1)
    del x
    gc.collect()
    assert (len(attrs._MASKS), len(attrs._LOGITS)) == before
    fresh = [tg.ones((2, 3)) for _ in range(64)]  # one may reuse the freed address
    assert all(attrs.get_keras_mask(t) is None for t in fresh)


def test_layer_outputs_carry_masks_and_logits():
    tokens = tg.constant([[3, 0]])
    out = tg.keras.layers.Embedding(5, 2, mask_zero=True)(tokens)
    assert tg.keras.backend.get_keras_mask(out).numpy().tolist() == [[True, False]]
    dense = tg.layers.Dense(2, activation="softmax")
    probs = dense(tg.ones((1, 3)))
    kind, logits = attrs.get_keras_logits(probs)
    assert kind == "categorical"
    assert (tg.nn.softmax(logits).numpy() == probs.numpy()).all()
