"""Writing files so that a crash never leaves one half-written: the emulator's compiled
libraries and manifests, and `tg.train` checkpoints."""
import os
import secrets


def atomic_write(path, write, mode=None):
    """Calls `write(f)` on a new temporary file beside `path` (`.<name>.tmp...`, created
    private when `mode` is given, then set to `mode`), fsyncs it and renames it to `path`, then
    fsyncs the directory. A crash before the rename leaves `path` as it was."""
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp{os.getpid()}."
                                  f"{secrets.token_hex(4)}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    fsync_dir(directory)


def fsync_dir(directory):
    """Makes a rename in `directory` durable (where directories can be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows: directories cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
