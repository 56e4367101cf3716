"""`tg.io.read_file` and `tg.io.write_file`: whole files as scalar string tensors.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "f.txt")
>>> tg.io.write_file(path, tg.constant("hello"))
>>> tg.io.read_file(path).numpy()
b'hello'
"""
import os

from ..core import files
from ..core.tensor import Tensor, convert_to_tensor

__all__ = ["read_file", "write_file"]


def path_of(path, who):
    """A file name given as a str, bytes, os.PathLike or scalar string tensor, as a str; the
    errors name `who`, the public function."""
    if isinstance(path, Tensor):
        if not path.dtype.is_string or path.ndim != 0:
            raise TypeError(f"{who}: the path must be a scalar string, got {path.dtype.name} of "
                            f"shape {path.shape}")
        path = path.numpy()
    if isinstance(path, bytes):
        path = path.decode("utf-8")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{who}: the path must be a str, bytes, os.PathLike or scalar string "
                        f"tensor, got {path!r}")
    return os.fspath(path)


def read_file(filename, name=None):
    """The whole contents of the file, as a scalar tg.string tensor (bytes)."""
    path = path_of(filename, "tg.io.read_file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        from ..errors import NotFoundError
        raise NotFoundError(f"tg.io.read_file: {path}; No such file or directory") from None
    return convert_to_tensor(data)


def write_file(filename, contents, name=None):
    """Writes a scalar string (tensor, str or bytes) as the file's contents, atomically
    (a temporary file renamed into place)."""
    path = path_of(filename, "tg.io.write_file")
    t = convert_to_tensor(contents)
    if not t.dtype.is_string or t.ndim != 0:
        raise ValueError(f"tg.io.write_file: contents must be a scalar string, got "
                         f"{t.dtype.name} of shape {t.shape}")
    data = t._data.item()
    files.atomic_write(path, lambda f: f.write(data))
