"""`tg.io.gfile`: TensorFlow's file API (`tf.io.gfile`) on the local file system: `GFile`,
`exists`, `glob`, `isdir`, `listdir`, `makedirs`, `mkdir`, `remove`, `rmtree`, `rename`,
`copy`, `stat`, `walk`, `join`; and TF1's spellings (`tf.compat.v1.gfile.Exists`, ...).

Failures raise TensorFlow's errors: `tg.errors.NotFoundError` for a missing path,
`tg.errors.AlreadyExistsError` where the target exists and `overwrite` is False. Paths with
a file-system scheme other than `file://` (gs://, s3://, hdfs://) raise
`tg.errors.UnimplementedError`. A file opened for writing ('w', 'wb') is written to a
temporary file that replaces the target when it is closed, so a reader never sees half of it
(and a `with` block that raises leaves the target as it was).

>>> import os, tempfile
>>> d = os.path.join(tempfile.mkdtemp(), "a", "b")
>>> tg.io.gfile.makedirs(d)
>>> with tg.io.gfile.GFile(os.path.join(d, "x.txt"), "w") as f:
...     _ = f.write("one\\ntwo\\n")
>>> tg.io.gfile.listdir(d), list(tg.io.gfile.GFile(os.path.join(d, "x.txt")))
(['x.txt'], ['one\\n', 'two\\n'])
"""
import collections
import glob as _glob
import os
import secrets
import shutil

from ..core import files as _files
from ..core.tensor import Tensor
from .files import path_of
from ..errors import (AlreadyExistsError, FailedPreconditionError, NotFoundError,
                      PermissionDeniedError, UnimplementedError)

__all__ = ["GFile", "copy", "exists", "get_registered_schemes", "glob", "isdir", "join",
           "listdir", "makedirs", "mkdir", "remove", "rename", "rmtree", "stat", "walk"]


def _path(path, who):
    path = path_of(path, f"tf.io.gfile.{who}")
    if "://" in path:
        scheme, rest = path.split("://", 1)
        if scheme != "file":
            raise UnimplementedError(f"tf.io.gfile.{who}: File system scheme '{scheme}' not "
                                     f"implemented (file: {path}); tapegpu reads local files "
                                     "only")
        path = rest
    return path


def _os_error(e, path, who):
    """The TensorFlow error for an OSError."""
    text = f"tf.io.gfile.{who}: {path}; {e.strerror or e}"
    if isinstance(e, FileNotFoundError):
        return NotFoundError(text)
    if isinstance(e, FileExistsError):
        return AlreadyExistsError(text)
    if isinstance(e, PermissionError):
        return PermissionDeniedError(text)
    return FailedPreconditionError(text)


class GFile:
    """A file (`tf.io.gfile.GFile(name, mode='r')`), opened when first used: `read(n=-1)`,
    `readline()`, `readlines()`, iteration over lines, `write`, `seek`, `tell`, `size`,
    `flush`, `close`; a context manager. Modes 'r', 'w', 'a' (str) and 'rb', 'wb', 'ab'
    (bytes); 'w' replaces the file atomically when closed.

    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "f.bin")
    >>> with tg.io.gfile.GFile(p, "wb") as f:
    ...     _ = f.write(b"ab\\ncd")
    >>> g = tg.io.gfile.GFile(p, "rb")
    >>> g.readline(), g.read(), g.size()
    (b'ab\\n', b'cd', 5)
    """

    def __init__(self, name, mode="r"):
        if mode not in ("r", "rb", "w", "wb", "a", "ab", "r+", "rb+", "w+", "wb+", "a+", "ab+"):
            raise ValueError(f"tf.io.gfile.GFile: mode must be 'r', 'w' or 'a', with 'b' for "
                             f"bytes (and '+'), got {mode!r}")
        self.name = name
        self._path = _path(name, "GFile")
        self.mode = mode
        self._binary = "b" in mode
        self._f = None
        self._tmp = None
        self._closed = False

    def _file(self, who):
        if self._closed:
            raise ValueError(f"tf.io.gfile.GFile.{who}: I/O operation on a closed file")
        if self._f is None:
            mode = self.mode.replace("b", "") + "b"
            try:
                if mode.startswith("w") and "+" not in mode:
                    directory = os.path.dirname(self._path) or "."
                    if not os.path.isdir(directory):
                        raise FileNotFoundError(2, "No such file or directory")
                    self._tmp = os.path.join(directory, f".{os.path.basename(self._path)}.tmp"
                                                        f"{os.getpid()}.{secrets.token_hex(4)}")
                    self._f = open(self._tmp, mode)
                else:
                    self._f = open(self._path, mode)
            except OSError as e:
                raise _os_error(e, self._path, "GFile") from None
        return self._f

    def _out(self, data):
        return data if self._binary else data.decode("utf-8")

    def _check_read(self, who):
        if not (self.mode.startswith("r") or "+" in self.mode):
            raise PermissionDeniedError(f"tf.io.gfile.GFile.{who}: File isn't open for reading")
        return self._file(who)

    def read(self, n=-1):
        """Up to `n` bytes/characters (all that is left when n is -1)."""
        f = self._check_read("read")
        data = f.read() if n is None or n < 0 else f.read(n)
        return self._out(data)

    def readline(self):
        return self._out(self._check_read("readline").readline())

    def readlines(self):
        return [self._out(line) for line in self._check_read("readlines").readlines()]

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    next = __next__

    def write(self, file_content):
        """Writes str or bytes (str is UTF-8 encoded)."""
        if self.mode.startswith("r") and "+" not in self.mode:
            raise PermissionDeniedError("tf.io.gfile.GFile.write: File isn't open for writing")
        if isinstance(file_content, Tensor):
            file_content = file_content.numpy()
        if isinstance(file_content, str):
            file_content = file_content.encode("utf-8")
        self._file("write").write(file_content)

    def seek(self, offset=None, whence=0, position=None):
        if position is not None:
            offset = position
        self._file("seek").seek(offset, whence)

    def tell(self):
        return self._file("tell").tell()

    def size(self):
        """The file's length in bytes."""
        if self._f is not None and self._tmp is not None:
            self._f.flush()
            return os.path.getsize(self._tmp)
        try:
            return os.path.getsize(self._path)
        except OSError as e:
            raise _os_error(e, self._path, "GFile.size") from None

    def flush(self):
        if self._f is not None:
            self._f.flush()

    def close(self):
        """Closes the file; a file written with 'w' replaces its target now."""
        if self._closed:
            return
        self._closed = True
        if self._f is None:
            if self.mode.startswith("w"):  # opened for writing, nothing written: empty file
                _files.atomic_write(self._path, lambda f: None)
            return
        f, self._f = self._f, None
        if self._tmp is None:
            f.close()
            return
        try:
            f.flush()
            os.fsync(f.fileno())
            f.close()
            os.replace(self._tmp, self._path)
        except BaseException:
            f.close()
            try:
                os.remove(self._tmp)
            except OSError:
                pass
            raise

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is not None and self._tmp is not None:  # a failed write leaves the
            self._abort()                                      # target as it was
        self.close()

    def _abort(self):
        self._closed = True
        f, self._f = self._f, None
        if f is not None:
            f.close()
        try:
            os.remove(self._tmp)
        except OSError:
            pass

    def __del__(self):  # as TensorFlow's file objects: an unclosed file is closed when dropped
        try:
            self.close()
        except Exception:  # noqa: BLE001 - an interpreter shutting down
            pass

    def seekable(self):
        return True

    def readable(self):
        return self.mode.startswith("r") or "+" in self.mode

    def writable(self):
        return not self.mode.startswith("r") or "+" in self.mode


def exists(path):
    """Whether the path exists (`tf.io.gfile.exists`).

    >>> tg.io.gfile.exists("/no/such/path")
    False
    """
    return os.path.exists(_path(path, "exists"))


def isdir(path):
    """Whether the path is a directory (`tf.io.gfile.isdir`).

    >>> import tempfile
    >>> tg.io.gfile.isdir(tempfile.gettempdir())
    True
    """
    return os.path.isdir(_path(path, "isdir"))


def glob(pattern):
    """The paths matching a pattern, or any of a list of patterns (`tf.io.gfile.glob`),
    sorted; `*`, `?` and `[...]` match within one path component.

    >>> tg.io.gfile.glob("/no/such/dir/*.txt")
    []
    """
    patterns = pattern if isinstance(pattern, (list, tuple)) else [pattern]
    out = set()
    for p in patterns:
        p = _path(p, "glob")
        out.update(_glob.glob(p))
    return sorted(out)


def listdir(path):
    """The names of the entries in a directory, sorted (`tf.io.gfile.listdir`); a
    NotFoundError when it is not a directory.

    >>> import tempfile
    >>> tg.io.gfile.listdir(tempfile.mkdtemp())
    []
    """
    path = _path(path, "listdir")
    if not os.path.isdir(path):
        raise NotFoundError(f"tf.io.gfile.listdir: Could not find directory {path}")
    return sorted(os.listdir(path))


def makedirs(path):
    """Creates a directory and its missing parents; nothing if it exists
    (`tf.io.gfile.makedirs`).

    >>> import os, tempfile
    >>> d = os.path.join(tempfile.mkdtemp(), "x", "y")
    >>> tg.io.gfile.makedirs(d); tg.io.gfile.makedirs(d); tg.io.gfile.isdir(d)
    True
    """
    path = _path(path, "makedirs")
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        raise FailedPreconditionError(f"tf.io.gfile.makedirs: {path} exists and is not a "
                                      "directory") from None
    except OSError as e:
        raise _os_error(e, path, "makedirs") from None


def mkdir(path):
    """Creates one directory (`tf.io.gfile.mkdir`): its parent must exist; an
    AlreadyExistsError if it exists.

    >>> import os, tempfile
    >>> d = os.path.join(tempfile.mkdtemp(), "new")
    >>> tg.io.gfile.mkdir(d); tg.io.gfile.isdir(d)
    True
    """
    path = _path(path, "mkdir")
    try:
        os.mkdir(path)
    except OSError as e:
        raise _os_error(e, path, "mkdir") from None


def remove(path):
    """Deletes a file (`tf.io.gfile.remove`); a NotFoundError if it does not exist.

    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "f")
    >>> open(p, "w").close(); tg.io.gfile.remove(p); tg.io.gfile.exists(p)
    False
    """
    path = _path(path, "remove")
    try:
        os.remove(path)
    except OSError as e:
        raise _os_error(e, path, "remove") from None


def rmtree(path):
    """Deletes a directory and everything under it (`tf.io.gfile.rmtree`); a NotFoundError
    if it does not exist.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); tg.io.gfile.makedirs(os.path.join(d, "a", "b"))
    >>> tg.io.gfile.rmtree(d); tg.io.gfile.exists(d)
    False
    """
    path = _path(path, "rmtree")
    if not os.path.exists(path):
        raise NotFoundError(f"tf.io.gfile.rmtree: {path}; No such file or directory")
    if not os.path.isdir(path) or os.path.islink(path):
        raise FailedPreconditionError(f"tf.io.gfile.rmtree: {path} is not a directory")
    try:
        shutil.rmtree(path)
    except OSError as e:
        raise _os_error(e, path, "rmtree") from None


def _check_target(dst, overwrite, who):
    if os.path.exists(dst):
        if not overwrite:
            raise AlreadyExistsError(f"tf.io.gfile.{who}: file already exists: {dst}")
        if os.path.isdir(dst):
            raise FailedPreconditionError(f"tf.io.gfile.{who}: {dst} is a directory")


def rename(src, dst, overwrite=False):
    """Renames (moves) `src` to `dst` (`tf.io.gfile.rename`); an AlreadyExistsError when
    `dst` exists unless `overwrite`.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); a, b = os.path.join(d, "a"), os.path.join(d, "b")
    >>> open(a, "w").close(); tg.io.gfile.rename(a, b); tg.io.gfile.listdir(d)
    ['b']
    """
    src, dst = _path(src, "rename"), _path(dst, "rename")
    if not os.path.exists(src):
        raise NotFoundError(f"tf.io.gfile.rename: {src}; No such file or directory")
    _check_target(dst, overwrite, "rename")
    try:
        os.replace(src, dst)
    except OSError as e:
        raise _os_error(e, src, "rename") from None


def copy(src, dst, overwrite=False):
    """Copies the file `src` to `dst` (`tf.io.gfile.copy`), atomically; an AlreadyExistsError
    when `dst` exists unless `overwrite`.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); a, b = os.path.join(d, "a"), os.path.join(d, "b")
    >>> with open(a, "w") as f: _ = f.write("hi")
    >>> tg.io.gfile.copy(a, b); tg.io.gfile.GFile(b).read()
    'hi'
    """
    src, dst = _path(src, "copy"), _path(dst, "copy")
    if not os.path.isfile(src):
        raise NotFoundError(f"tf.io.gfile.copy: {src}; No such file")
    _check_target(dst, overwrite, "copy")
    try:
        with open(src, "rb") as f:
            _files.atomic_write(dst, lambda out: shutil.copyfileobj(f, out))
    except OSError as e:
        raise _os_error(e, dst, "copy") from None


class FileStatistics(collections.namedtuple("FileStatistics",
                                            ["length", "mtime_nsec", "is_directory"])):
    """What `tg.io.gfile.stat` returns: `length` (bytes), `mtime_nsec`, `is_directory`."""


def stat(path):
    """The file's statistics (`tf.io.gfile.stat`): `length`, `mtime_nsec`, `is_directory`.

    >>> import tempfile
    >>> tg.io.gfile.stat(tempfile.gettempdir()).is_directory
    True
    """
    path = _path(path, "stat")
    try:
        st = os.stat(path)
    except OSError as e:
        raise _os_error(e, path, "stat") from None
    return FileStatistics(st.st_size, st.st_mtime_ns, os.path.isdir(path))


def walk(top, topdown=True, onerror=None):
    """(dirpath, subdirectory names, file names) for each directory under `top`
    (`tf.io.gfile.walk`), as `os.walk`; nothing when `top` does not exist.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); tg.io.gfile.makedirs(os.path.join(d, "s"))
    >>> [(os.path.relpath(p, d), ds, fs) for p, ds, fs in tg.io.gfile.walk(d)]
    [('.', ['s'], []), ('s', [], [])]
    """
    top = _path(top, "walk")

    def on_error(e):
        if onerror is not None:
            onerror(_os_error(e, getattr(e, "filename", top), "walk"))

    for dirpath, dirnames, filenames in os.walk(top, topdown=topdown, onerror=on_error):
        dirnames.sort()
        yield dirpath, dirnames, sorted(filenames)


def join(path, *paths):
    """Joins path components with '/' (`tf.io.gfile.join`).

    >>> tg.io.gfile.join("a", "b", "c.txt")
    'a/b/c.txt'
    """
    return os.path.join(path, *paths)


def get_registered_schemes():
    """The file-system schemes tapegpu can read: the local file system only.

    >>> tg.io.gfile.get_registered_schemes()
    ['file']
    """
    return ["file"]
