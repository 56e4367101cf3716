"""Reading a checkpoint's values by path, without the program that wrote it: TensorFlow's
`tf.train.list_variables`, `tf.train.load_variable` and `tf.train.load_checkpoint`.

Paths are those of the object graph (`model/dense_1/w`, slots as
`model/dense_1/w/.OPTIMIZER_SLOT/optimizer/m`): TensorFlow's keys add
`/.ATTRIBUTES/VARIABLE_VALUE`, which is accepted and ignored, so a ported
`load_variable(path, "model/w/.ATTRIBUTES/VARIABLE_VALUE")` reads `model/w`. Reading goes
through the checkpoint reader (tapegpu/train/checkpoint.py): JSON and plain numeric arrays,
nothing executable.
"""
import os

from ..core.dtypes import as_dtype
from ..errors import NotFoundError
from .checkpoint import _file, _Reader, latest_checkpoint

_TF_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


def _resolve(ckpt_dir_or_file, caller):
    """The checkpoint file of a directory (its latest checkpoint), a prefix or a file name."""
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        prefix = latest_checkpoint(path)
        if prefix is None:
            raise ValueError(f"{caller}: couldn't find a 'checkpoint' state file or "
                             f"checkpoints in the directory {path!r} (pass a checkpoint's "
                             "prefix, as Checkpoint.save returns it)")
        path = prefix
    return _file(path)


class CheckpointReader:
    """The values of one checkpoint file (`tg.train.load_checkpoint`), TF's reader API."""

    def __init__(self, file):
        reader = _Reader(file, "tg.train.load_checkpoint")
        try:
            self._entries = {e["path"]: e for e in reader.index["values"]}
        finally:
            reader.close()
        self._file = file

    @staticmethod
    def _key(name):
        name = str(name)
        return name[:-len(_TF_SUFFIX)] if name.endswith(_TF_SUFFIX) else name

    def has_tensor(self, name):
        return self._key(name) in self._entries

    def get_variable_to_shape_map(self):
        """{path: shape as a list}."""
        return {p: list(e["shape"]) for p, e in self._entries.items()}

    def get_variable_to_dtype_map(self):
        """{path: tg.DType}."""
        return {p: as_dtype(e["dtype"]) for p, e in self._entries.items()}

    def get_tensor(self, name):
        """The value at `name` as a numpy array (NotFoundError naming the paths there are)."""
        entry = self._entries.get(self._key(name))
        if entry is None:
            known = ", ".join(sorted(self._entries)[:20]) or "none"
            raise NotFoundError(f"tg.train: no value {name!r} in the checkpoint {self._file!r}; "
                                f"it has: {known}")
        reader = _Reader(self._file, "tg.train.load_variable")
        try:
            return reader.read(entry)
        finally:
            reader.close()


def load_checkpoint(ckpt_dir_or_file):
    """A reader of the checkpoint (a directory's latest, a prefix or a file).

    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = tg.train.Checkpoint(w=tg.Variable([1.0, 2.0])).save(os.path.join(tmp.name, "c"))
    >>> reader = tg.train.load_checkpoint(tmp.name)
    >>> reader.get_variable_to_shape_map()["w"], reader.get_tensor("w")
    ([2], array([1., 2.], dtype=float32))
    >>> tmp.cleanup()
    """
    return CheckpointReader(_resolve(ckpt_dir_or_file, "tg.train.load_checkpoint"))


def list_variables(ckpt_dir_or_file):
    """[(path, shape as a list)] of every value in the checkpoint, sorted by path.

    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = tg.train.Checkpoint(b=tg.Variable(0.0), a=tg.Variable(tg.zeros((2, 3)))).write(
    ...     os.path.join(tmp.name, "c"))
    >>> tg.train.list_variables(path)
    [('a', [2, 3]), ('b', []), ('save_counter', [])]
    >>> tmp.cleanup()
    """
    shapes = CheckpointReader(_resolve(ckpt_dir_or_file, "tg.train.list_variables")) \
        .get_variable_to_shape_map()
    return sorted(shapes.items())


def load_variable(ckpt_dir_or_file, name):
    """The value at path `name` in the checkpoint, as a numpy array.

    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = tg.train.Checkpoint(w=tg.Variable([1.0, 2.0])).write(os.path.join(tmp.name, "c"))
    >>> tg.train.load_variable(path, "w")
    array([1., 2.], dtype=float32)
    >>> tmp.cleanup()
    """
    return CheckpointReader(_resolve(ckpt_dir_or_file, "tg.train.load_variable")) \
        .get_tensor(name)
