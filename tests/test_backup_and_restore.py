"""keras.callbacks.BackupAndRestore: Keras 3's documented example (an interrupted fit resumes
at the epoch it reached, with the weights and optimizer state it had)."""
import os

import numpy as np
import pytest

import tapegpu as tg


class _Interrupt(tg.keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 4:
            raise RuntimeError("Interrupting!")


def _model():
    model = tg.keras.Sequential([tg.keras.Input((20,)), tg.keras.layers.Dense(10,
                                 kernel_initializer="ones")])
    model.compile(tg.keras.optimizers.Adam(0.01), loss="mse")
    return model


def test_an_interrupted_fit_resumes_where_it_stopped(tmp_path):
    x, y = np.arange(100, dtype=np.float32).reshape(5, 20) / 100, np.zeros((5, 10), np.float32)
    backup = tg.keras.callbacks.BackupAndRestore(backup_dir=str(tmp_path / "backup"))
    model = _model()
    with pytest.raises(RuntimeError, match="Interrupting"):
        model.fit(x, y, epochs=10, batch_size=1, callbacks=[backup, _Interrupt()], verbose=0,
                  shuffle=False)
    assert os.path.exists(tmp_path / "backup" / "training_metadata.json")
    history = model.fit(x, y, epochs=10, batch_size=1, callbacks=[backup], verbose=0,
                        shuffle=False)
    assert len(history.history["loss"]) == 6  # epochs 4..9
    assert not os.path.exists(tmp_path / "backup")  # deleted after a finished fit
    # the same as ten uninterrupted epochs (weights and Adam's state were restored)
    ref = _model()
    ref.fit(x, y, epochs=10, batch_size=1, verbose=0, shuffle=False)
    np.testing.assert_allclose(model.layers[0].kernel.numpy(), ref.layers[0].kernel.numpy(),
                               rtol=1e-5, atol=1e-6)
    # a fresh model restores the backup before its first epoch
    fresh = _model()
    with pytest.raises(RuntimeError):
        fresh.fit(x, y, epochs=10, batch_size=1, callbacks=[backup, _Interrupt()], verbose=0,
                  shuffle=False)
    other = _model()
    h = other.fit(x, y, epochs=10, batch_size=1, callbacks=[backup], verbose=0,
                  shuffle=False)
    assert len(h.history["loss"]) == 6
    np.testing.assert_allclose(other.layers[0].kernel.numpy(), ref.layers[0].kernel.numpy(),
                               rtol=1e-5, atol=1e-6)


def test_arguments_and_batch_frequency(tmp_path):
    with pytest.raises(ValueError, match="Empty `backup_dir`"):
        tg.keras.callbacks.BackupAndRestore("")
    with pytest.raises(ValueError, match="save_freq"):
        tg.keras.callbacks.BackupAndRestore(str(tmp_path), save_freq="batch")
    keep = tg.keras.callbacks.BackupAndRestore(str(tmp_path / "b"), save_freq=2,
                                               delete_checkpoint=False)
    model = _model()
    model.fit(np.ones((6, 20)), np.zeros((6, 10)), epochs=1, batch_size=1, callbacks=[keep],
              verbose=0)
    assert os.path.exists(tmp_path / "b" / "training_metadata.json")
