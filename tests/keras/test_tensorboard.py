"""keras.callbacks.TensorBoard: event files TensorBoard reads (TFRecord framing with masked
CRC-32C, Event/Summary protocol buffers), decoded here field by field; the files of this
writer were also read back with TensorFlow 2.21's `summary_iterator` when it was written."""
import glob
import os

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.keras import tensorboard
from tapegpu.testing import event_files

SINGLE_DEVICE = True


def test_crc32c_check_value_and_masking():
    assert tensorboard.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert tensorboard.crc32c(b"") == 0


_fields, _events, _scalars = event_files.fields, event_files.events, event_files.scalars


def test_fit_writes_epoch_scalars_for_train_and_validation(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.random((40, 3)).astype("float32"), rng.random((40, 1)).astype("float32")
    model = tg.keras.Sequential([tg.keras.Input((3,)), tg.keras.layers.Dense(1)])
    model.compile(optimizer=tg.keras.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    history = model.fit(x, y, epochs=3, batch_size=8, validation_data=(x[:8], y[:8]),
                        verbose=0, callbacks=[tg.keras.callbacks.TensorBoard(tmp_path,
                                                                              update_freq=2)])
    (train,) = glob.glob(os.path.join(tmp_path, "train", "events.out.tfevents.*"))
    (val,) = glob.glob(os.path.join(tmp_path, "validation", "events.out.tfevents.*"))
    events = _events(train)
    assert events[0][3] == [b"brain.Event:2"]
    scalars = _scalars(events)
    epochs = [(step, v) for step, v in scalars if "epoch_loss" in v]
    batches = [(step, v) for step, v in scalars if "batch_loss" in v]
    assert [s for s, _ in epochs] == [0, 1, 2] and [s for s, _ in batches] == list(range(2, 16, 2))
    for (_, v), loss, mae in zip(epochs, history.history["loss"], history.history["mae"]):
        assert v["epoch_loss"] == pytest.approx(loss, rel=1e-6)
        assert v["epoch_mae"] == pytest.approx(mae, rel=1e-6)
        assert v["epoch_learning_rate"] == pytest.approx(0.1)
    val_scalars = [v for _, v in _scalars(_events(val))]
    assert [v["epoch_loss"] for v in val_scalars] == pytest.approx(history.history["val_loss"],
                                                                    rel=1e-6)


def test_unsupported_outputs_warn_and_bad_update_freq_raises(tmp_path):
    with pytest.warns(UserWarning, match=r"\['histogram_freq'\] are not written"):
        tg.keras.callbacks.TensorBoard(tmp_path, histogram_freq=1)
    with pytest.raises(ValueError, match="update_freq must be 'epoch', 'batch' or a positive"):
        tg.keras.callbacks.TensorBoard(tmp_path, update_freq=0)
