"""Keras' annotations of a tensor, kept beside it: the mask a layer attached to its output
(`get_keras_mask`) and the logits an activation's output was computed from
(`get_keras_logits`).

Keras on TensorFlow sets them as attributes of the tensor (`output._keras_mask`); tapegpu's
`Tensor` has no Keras fields, so each annotation is a table keyed by the tensor's id whose entry
goes when the tensor is freed (a weak reference's callback), as Keras 3 does for the tensors
of its backends that take no attributes. The layers set them (tapegpu/keras/layers/), the
losses and metrics read them (tapegpu/models/losses.py, tapegpu/keras/metrics.py); the tables
live here, below both, so that imports flow one way (keras -> models -> core).
"""
import weakref


class _Entry(weakref.ref):
    """A weak reference to a tensor, holding its annotation (`value`) and its key in the table."""

    __slots__ = ("key", "value")


class _Table(dict):
    """id(tensor) -> the tensor's `_Entry`; the entry goes when the tensor is freed."""

    def __init__(self):
        super().__init__()
        self._freed = self._forget  # the entries' callback (one bound method for all)

    def _forget(self, entry):
        if self.get(entry.key) is entry:  # not replaced by a newer entry meanwhile
            self.pop(entry.key, None)

    def value(self, x):
        entry = self.get(id(x))
        return None if entry is None or entry() is not x else entry.value

    def assign(self, x, value):
        key = id(x)
        if value is None:
            entry = self.get(key)
            if entry is not None and entry() is x:
                self.pop(key, None)
            return
        entry = _Entry(x, self._freed)
        entry.key, entry.value = key, value
        self[key] = entry


_MASKS = _Table()
_LOGITS = _Table()


def get_keras_mask(x):
    """The mask a Keras layer attached to the tensor `x` (bool, `(batch, timesteps)`), or None:
    what Keras on TensorFlow keeps as `x._keras_mask`.

    >>> emb = tg.keras.layers.Embedding(10, 3, mask_zero=True)
    >>> tg.keras.backend.get_keras_mask(emb(tg.constant([[4, 0]]))).numpy()
    array([[ True, False]])
    >>> tg.keras.backend.get_keras_mask(tg.ones((1, 2))) is None
    True
    """
    return _MASKS.value(x)


def set_keras_mask(x, mask):
    """Attaches `mask` to the tensor `x` (None: removes it), for the layers, losses and metrics
    that `x` is given to: Keras on TensorFlow's `x._keras_mask = mask`.

    >>> x = tg.constant([[[1.0], [3.0], [5.0]]])
    >>> tg.keras.backend.set_keras_mask(x, tg.constant([[True, True, False]]))
    >>> tg.keras.layers.GlobalAveragePooling1D()(x).numpy()  # the mean of the unmasked steps
    array([[2.]], dtype=float32)
    """
    _MASKS.assign(x, mask)


def get_keras_logits(x):
    """`(kind, logits)` when the tensor `x` is the output of an activation a Keras layer applied
    whose description names a kind of logits (`keras_logits`: "categorical" or "binary"), else
    None; a cross-entropy of that kind computes from the logits (tapegpu/models/losses.py).

    >>> from tapegpu.models.tensor_attributes import get_keras_logits
    >>> get_keras_logits(tg.ones((1, 2))) is None
    True
    """
    return _LOGITS.value(x)


def set_keras_logits(x, kind, logits):
    """Records that the tensor `x` is an activation of `logits` of this kind (see
    `get_keras_logits`).

    >>> from tapegpu.models.tensor_attributes import get_keras_logits, set_keras_logits
    >>> x = tg.zeros((1, 2))
    >>> y = tg.fill((1, 2), 0.5)
    >>> set_keras_logits(y, "categorical", x)
    >>> get_keras_logits(y)[1] is x
    True
    """
    _LOGITS.assign(x, (kind, logits))
