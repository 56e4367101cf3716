"""`tf.compat.v1.gfile`: TF1's names of `tg.io.gfile`'s functions (`Exists`, `Glob`,
`GFile`, `MakeDirs`, `Walk(top, in_order=True)`, ...).

>>> tg.compat.v1.gfile.Exists("/no/such/path")
False
"""
from .gfile import GFile, exists, glob, isdir, listdir, makedirs, mkdir, remove, rename, \
    rmtree, stat, walk, copy


def _v1_walk(top, in_order=True):
    """`tf.compat.v1.gfile.Walk(top, in_order=True)`: `walk` with TF1's argument name."""
    return walk(top, topdown=in_order)


def _v1_copy(oldpath, newpath, overwrite=False):
    """`tf.compat.v1.gfile.Copy`."""
    copy(oldpath, newpath, overwrite)


def _v1_rename(oldname, newname, overwrite=False):
    """`tf.compat.v1.gfile.Rename`."""
    rename(oldname, newname, overwrite)


Copy, Rename, Walk = _v1_copy, _v1_rename, _v1_walk
DeleteRecursively, Exists, FastGFile, GFile, Glob = rmtree, exists, GFile, GFile, glob
IsDirectory, ListDirectory, MakeDirs, MkDir, Open = isdir, listdir, makedirs, mkdir, GFile
Remove, Stat = remove, stat
