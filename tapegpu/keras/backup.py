"""`keras.callbacks.BackupAndRestore`: fault-tolerant `fit`. At the end of every epoch (or
every `save_freq` batches) the model's and its optimizer's variables are written to
`backup_dir` (a `tg.train.Checkpoint`, with the optimizer's slots and step count) beside
`training_metadata.json` (the epoch reached); a `fit` that starts while a backup exists
restores it and resumes at that epoch. A finished `fit` deletes the backup (unless
`delete_checkpoint=False`)."""
import json
import os
import shutil

from .callbacks import Callback

__all__ = ["BackupAndRestore"]


class BackupAndRestore(Callback):
    """Backs up the training state to `backup_dir` and restores it at the next `fit`, as
    `keras.callbacks.BackupAndRestore` (Keras 3's arguments).

    >>> import tempfile, numpy as np
    >>> backup = tg.keras.callbacks.BackupAndRestore(tempfile.mkdtemp())
    >>> model = tg.keras.Sequential([tg.keras.Input((2,)), tg.keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> len(model.fit(np.ones((4, 2)), np.ones(4), epochs=2, verbose=0,
    ...               callbacks=[backup]).history["loss"])
    2
    """

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True):
        super().__init__()
        if not backup_dir:
            raise ValueError("Empty `backup_dir` argument passed")
        if save_freq != "epoch" and (isinstance(save_freq, bool) or
                                     not isinstance(save_freq, int)):
            raise ValueError(f"Invalid value for argument `save_freq`. Received: "
                             f"save_freq={save_freq}. Expected either 'epoch' or an integer "
                             f"value.")
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq, self.delete_checkpoint = save_freq, bool(delete_checkpoint)
        self._prefix = os.path.join(self.backup_dir, "latest")
        self._metadata_path = os.path.join(self.backup_dir, "training_metadata.json")
        self._current_epoch = 0
        self._last_batch_seen = 0
        self._batches_since_save = 0

    def _checkpoint(self):
        import tapegpu
        objects = {"model": self.model}
        if getattr(self.model, "optimizer", None) is not None:
            objects["optimizer"] = self.model.optimizer
        return tapegpu.train.Checkpoint(**objects)

    def on_train_begin(self, logs=None):
        if not self.model.built:
            raise ValueError(f"To use the BackupAndRestore callback, you model must be built "
                             f"before you call `fit()`. Model {self.model} is unbuilt. You can "
                             f"build it beforehand by calling it on a batch of data.")
        if os.path.exists(self._metadata_path):
            with open(self._metadata_path, encoding="utf-8") as f:
                metadata = json.load(f)
            self._checkpoint().read(metadata["checkpoint"])
            self._current_epoch = int(metadata["epoch"])
            # fit starts at this epoch (read once by fit, after on_train_begin)
            self.model.__dict__["_initial_epoch"] = self._current_epoch

    def on_epoch_end(self, epoch, logs=None):
        self._current_epoch = epoch + 1
        self._last_batch_seen = 0
        if self.save_freq == "epoch":
            self._save()

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        added = batch + 1 if batch <= self._last_batch_seen else batch - self._last_batch_seen
        self._batches_since_save += added
        self._last_batch_seen = batch
        if self._batches_since_save >= self.save_freq:
            self._batches_since_save = 0
            self._save()

    def _save(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        path = self._checkpoint().write(self._prefix)
        tmp = self._metadata_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"epoch": self._current_epoch, "batch": self._last_batch_seen,
                       "checkpoint": path}, f)
        os.replace(tmp, self._metadata_path)  # the metadata names a complete checkpoint

    def on_train_end(self, logs=None):
        if self.delete_checkpoint and os.path.exists(self.backup_dir):
            shutil.rmtree(self.backup_dir)
