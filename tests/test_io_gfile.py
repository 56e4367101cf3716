"""tf.io.gfile and TF1's tf.compat.v1.gfile on the local file system."""
import os

import pytest

import tapegpu as tg

G = tg.io.gfile


def _read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def _write(path, data):
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def test_gfile_read_write_modes(tmp_path):
    p = str(tmp_path / "f.txt")
    with G.GFile(p, "w") as f:
        f.write("héllo\n")
        f.write(b"second\n")
        assert not os.path.exists(p)  # written atomically: the target appears on close
    assert os.path.exists(p)
    with G.GFile(p) as f:
        assert f.readline() == "héllo\n" and f.read() == "second\n"
    with G.GFile(p, "rb") as f:
        assert f.read(2) == b"h\xc3" and f.tell() == 2
        f.seek(0)
        assert f.readlines() == ["héllo\n".encode(), b"second\n"]
    with G.GFile(p, "a") as f:
        f.write("third")
    assert list(G.GFile(p)) == ["héllo\n", "second\n", "third"]
    assert G.GFile(p).size() == os.path.getsize(p)
    with pytest.raises(tg.errors.PermissionDeniedError):
        G.GFile(p).write("x")
    with pytest.raises(tg.errors.NotFoundError):
        G.GFile(str(tmp_path / "missing")).read()
    with pytest.raises(ValueError, match="mode"):
        G.GFile(p, "x")
    with G.GFile(str(tmp_path / "empty"), "w"):
        pass
    assert _read(str(tmp_path / "empty")) == b""


def test_directories(tmp_path):
    root = str(tmp_path / "r")
    G.makedirs(os.path.join(root, "a", "b"))
    G.makedirs(os.path.join(root, "a", "b"))  # exists: nothing happens
    open(os.path.join(root, "a", "x.txt"), "w").close()
    open(os.path.join(root, "y.csv"), "w").close()
    assert G.isdir(root) and G.exists(os.path.join(root, "y.csv"))
    assert G.listdir(root) == ["a", "y.csv"]
    assert G.glob(os.path.join(root, "*", "*.txt")) == [os.path.join(root, "a", "x.txt")]
    assert G.glob([os.path.join(root, "*.csv"), os.path.join(root, "*.csv")]) == \
        [os.path.join(root, "y.csv")]
    walked = [(os.path.relpath(d, root), ds, fs) for d, ds, fs in G.walk(root)]
    assert walked == [(".", ["a"], ["y.csv"]), ("a", ["b"], ["x.txt"]),
                      (os.path.join("a", "b"), [], [])]
    st = G.stat(os.path.join(root, "y.csv"))
    assert st.length == 0 and not st.is_directory and st.mtime_nsec > 0
    with pytest.raises(tg.errors.AlreadyExistsError):
        G.mkdir(root)
    with pytest.raises(tg.errors.NotFoundError):
        G.listdir(os.path.join(root, "nope"))
    G.rmtree(os.path.join(root, "a"))
    assert G.listdir(root) == ["y.csv"]
    with pytest.raises(tg.errors.NotFoundError):
        G.rmtree(os.path.join(root, "a"))
    G.remove(os.path.join(root, "y.csv"))
    with pytest.raises(tg.errors.NotFoundError):
        G.remove(os.path.join(root, "y.csv"))


def test_copy_and_rename(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    _write(a, "1")
    G.copy(a, b)
    assert _read(b, "r") == "1"
    with pytest.raises(tg.errors.AlreadyExistsError):
        G.copy(a, b)
    _write(a, "2")
    G.copy(a, b, overwrite=True)
    assert _read(b, "r") == "2"
    with pytest.raises(tg.errors.AlreadyExistsError):
        G.rename(a, b)
    G.rename(a, b, overwrite=True)
    assert not G.exists(a) and _read(b, "r") == "2"
    with pytest.raises(tg.errors.NotFoundError):
        G.rename(a, b)


def test_remote_schemes_are_unimplemented(tmp_path):
    with pytest.raises(tg.errors.UnimplementedError, match="'gs'"):
        G.exists("gs://bucket/x")
    assert G.exists("file://" + str(tmp_path))


def test_v1_names(tmp_path):
    v1 = tg.compat.v1.gfile
    d = str(tmp_path / "d")
    v1.MakeDirs(d)
    with v1.GFile(os.path.join(d, "f"), "w") as f:
        f.write("x")
    assert v1.Exists(d) and v1.IsDirectory(d) and v1.ListDirectory(d) == ["f"]
    assert v1.Glob(os.path.join(d, "*")) == [os.path.join(d, "f")]
    assert [fs for _, _, fs in v1.Walk(d)] == [["f"]]
    v1.Copy(os.path.join(d, "f"), os.path.join(d, "g"))
    v1.Rename(os.path.join(d, "g"), os.path.join(d, "h"))
    assert sorted(v1.ListDirectory(d)) == ["f", "h"]
    v1.DeleteRecursively(d)
    assert not v1.Exists(d)
    assert tg.compat.v1.io.gfile.GFile is G.GFile


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path):
    p = str(tmp_path / "keep.txt")
    _write(p, "old")
    with pytest.raises(RuntimeError):
        with G.GFile(p, "w") as f:
            f.write("half")
            raise RuntimeError("interrupted")
    assert _read(p, "r") == "old" and G.listdir(str(tmp_path)) == ["keep.txt"]
