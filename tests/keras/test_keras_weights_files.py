"""Keras weights files: `save_weights` (and so `ModelCheckpoint`) replaces the file atomically, so
a process killed during a save leaves the previous file whole; `load_weights` never unpickles,
checks every array against its variable before reading its data, and every failure names the
file and what was expected (nothing is assigned unless everything reads)."""
import io
import os
import pickle
import struct
import subprocess
import sys
import textwrap
import tracemalloc
import zipfile

import numpy as np
import pytest

import tapegpu as tg

keras = tg.keras
X = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)


def _model(seed):
    tg.random.set_seed(seed)
    model = keras.Sequential([keras.layers.Dense(5, activation="relu"), keras.layers.Dense(3)])
    model(X)
    return model


def _same(model, other):
    return all(np.array_equal(a, b) for a, b in zip(model.get_weights(), other.get_weights()))


KILLED_IN_A_SAVE = textwrap.dedent("""
    import os, sys
    import numpy as np
    import tapegpu as tg
    keras = tg.keras

    def write_half_then_die(f, array, *args, **kwargs):  # the process is killed mid-write
        data = array.tobytes()
        f.write(data[:len(data) // 2])
        f.flush()
        os._exit(3)

    model = keras.Sequential([keras.layers.Dense(5, activation="relu"), keras.layers.Dense(3)])
    x = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True))
    np.lib.format.write_array = write_half_then_die
    save = keras.callbacks.ModelCheckpoint(sys.argv[1], save_weights_only=True)
    model.fit(x, np.arange(8) % 3, epochs=1, verbose=0, callbacks=[save])
    os._exit(0)
""")


def test_a_process_killed_during_a_model_checkpoint_save_leaves_the_previous_file(tmp_path):
    path = str(tmp_path / "ckpt.weights.npz")
    before = _model(1)
    before.save_weights(path)
    done = subprocess.run([sys.executable, "-c", KILLED_IN_A_SAVE, path], timeout=120,
                          capture_output=True, text=True)
    assert done.returncode == 3, done.stderr  # killed inside the save
    restored = _model(2)
    assert not _same(restored, before)
    restored.load_weights(path)
    assert _same(restored, before)


def test_a_failed_save_leaves_the_previous_file_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "w.npz"
    before = _model(1)
    before.save_weights(path)
    after = _model(2)

    def fail_midway(f, array, *args, **kwargs):
        f.write(array.tobytes()[:7])
        raise KeyboardInterrupt
    with monkeypatch.context() as m:
        m.setattr(np.lib.format, "write_array", fail_midway)
        with pytest.raises(KeyboardInterrupt):
            after.save_weights(path)
    assert os.listdir(tmp_path) == ["w.npz"]
    after.load_weights(path)
    assert _same(after, before)
    # what it writes is numpy.savez's layout, read by numpy without pickle
    with np.load(path, allow_pickle=False) as data:
        assert [data[f"arr_{i}"].tobytes() for i in range(len(data.files))] == \
            [w.tobytes() for w in before.get_weights()]
    with pytest.raises(FileExistsError, match="exists and overwrite=False"):
        after.save_weights(path, overwrite=False)
    with pytest.raises(FileNotFoundError, match="Model.save_weights: cannot write .*the "
                                                "directory .* does not exist"):
        after.save_weights(tmp_path / "missing" / "w.npz")


def _expect_unreadable(model, path, what):
    before = model.get_weights()
    with pytest.raises(ValueError) as e:
        model.load_weights(path)
    message = str(e.value)
    assert message.startswith(f"Model.load_weights: cannot read weights file {str(path)!r}: ")
    assert what in message, message
    assert "expected an .npz archive written by save_weights, with one array per variable of " \
           f"model {model.name!r}" in message
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def _member_data_offset(path, name):
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    with open(path, "rb") as f:
        f.seek(info.header_offset + 26)
        n, extra = struct.unpack("<HH", f.read(4))
    return info.header_offset + 30 + n + extra, info.file_size


def test_damaged_files_raise_naming_the_file_and_assign_nothing(tmp_path):
    model = _model(1)
    path = tmp_path / "w.npz"
    model.save_weights(path)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    _expect_unreadable(model, path, "it is truncated or not a zip archive")
    path.write_bytes(b"not a weights file")
    _expect_unreadable(model, path, "it is truncated or not a zip archive")
    # a flipped bit in the last array's data: the zip's CRC-32 catches it
    path.write_bytes(data)
    start, size = _member_data_offset(path, "arr_3.npy")
    damaged = bytearray(data)
    damaged[start + size - 1] ^= 0x04
    path.write_bytes(bytes(damaged))
    _expect_unreadable(model, path, "arr_3.npy is damaged (BadZipFile")
    # members of another layout
    with zipfile.ZipFile(path, "w") as zf:
        for name in ("arr_0.npy", "arr_2.npy"):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.zeros(3, np.float32))
            zf.writestr(name, buf.getvalue())
    _expect_unreadable(model, path, "its members are ['arr_0.npy', 'arr_2.npy'], not "
                                    "arr_0.npy, arr_1.npy, ... each once")
    with pytest.raises(FileNotFoundError, match="Model.load_weights: no weights file at "
                                                f"{str(tmp_path / 'none.npz')!r}"):
        model.load_weights(tmp_path / "none.npz")


class _Trap:
    """Unpickling it would run code: it records that it did."""

    def __init__(self, flag):
        self.flag = flag

    def __reduce__(self):
        return (open, (self.flag, "w"))


def _savez(path, arrays, pickled=False):
    with zipfile.ZipFile(path, "w") as zf:
        for i, a in enumerate(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, a, allow_pickle=pickled)
            zf.writestr(f"arr_{i}.npy", buf.getvalue())


def test_nothing_in_a_weights_file_is_unpickled(tmp_path):
    model = _model(1)
    flag = tmp_path / "ran"
    arrays = model.get_weights()
    trap = np.empty(arrays[1].shape, object)
    trap[:] = [_Trap(str(flag))] * trap.size
    pickle.dumps(trap)  # it pickles (and would unpickle by opening `flag`)
    _savez(tmp_path / "w.npz", arrays[:1] + [trap] + arrays[2:], pickled=True)
    _expect_unreadable(model, tmp_path / "w.npz", "arr_1.npy is damaged (ValueError: an "
                                                  "array of dtype object (only bool, integer, "
                                                  "float and complex arrays are read)")
    assert not flag.exists()


def _npy(shape, data=b"", descr="<f4"):
    d = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    d += b" " * (-(len(d) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d + data


def test_headers_are_checked_before_any_data_is_read(tmp_path):
    model = _model(1)
    arrays = model.get_weights()
    path = tmp_path / "w.npz"
    _savez(path, arrays[:2] + [np.zeros((5, 4), np.float32)] + arrays[3:])
    with pytest.raises(ValueError, match=r"Model.load_weights: variable .* has shape \(5, 3\), "
                                         r"the array arr_2.npy of .*w.npz' has shape \(5, 4\)"):
        model.load_weights(path)
    # a header claiming 3 * 10^8 elements in a tiny file: refused before anything is allocated
    with zipfile.ZipFile(path, "w") as zf:
        for i, a in enumerate(arrays):
            zf.writestr(f"arr_{i}.npy", _npy(a.shape, a.tobytes()) if i != 2 else
                        _npy((10 ** 8, 3), a.tobytes()))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"has shape \(100000000, 3\)"):
            model.load_weights(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 ** 20
    # the right shape with its data cut short
    with zipfile.ZipFile(path, "w") as zf:
        for i, a in enumerate(arrays):
            zf.writestr(f"arr_{i}.npy", _npy(a.shape, a.tobytes()[:-4 if i == 2 else None]))
    _expect_unreadable(model, path, "arr_2.npy is damaged (ValueError: truncated: 56 of the "
                                    "60 bytes of data)")
    # files written by numpy.savez (the format's origin) load
    np.savez(path, *arrays)
    other = _model(2)
    other.load_weights(path)
    assert _same(other, model)
