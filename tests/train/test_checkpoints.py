"""tg.train: Checkpoint, CheckpointManager and latest_checkpoint (TF's names and semantics).

Round trips are bit-exact (variables, a trained Sequential model, an Adam optimizer that keeps
training as if never interrupted); numbering, keeping and the `checkpoint` state file follow TF;
the load status reports what did not match; a writer killed mid-save leaves the previous
checkpoint and the state file intact; damaged files and mismatched shapes or dtypes raise
ValueError naming the file, the path and what is wrong. Every test runs on each device.
"""
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
import zipfile

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.train import checkpoint as ckpt_mod


def _bits(x):
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x).tobytes()


def _model():
    return tg.layers.Sequential([tg.layers.Dense(8, activation="gelu"),
                                 tg.layers.BatchNormalization(),
                                 tg.layers.Dense(3)])


X = np.random.default_rng(1).standard_normal((16, 5)).astype(np.float32)
Y = np.random.default_rng(2).standard_normal((16, 3)).astype(np.float32)


def _train(model, opt, steps, x=X, y=Y):
    for _ in range(steps):
        with tg.GradientTape() as tape:
            loss = tg.reduce_mean((model(tg.constant(x), training=True) - tg.constant(y)) ** 2)
        variables = model.trainable_variables
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))


def _built_model():
    model = _model()
    model(tg.constant(X))
    return model


# -- round trips -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "uint8",
                                   "bool", "complex64"])
def test_variable_round_trip_is_bit_exact(tmp_path, tg_device, dtype):
    rng = np.random.default_rng(0)
    values = [rng.standard_normal((3, 4)) * 10, rng.standard_normal(()) * 10,
              np.zeros((0, 2))]
    if dtype == "complex64":
        values = [v + 1j * v for v in values]
    values = [v.astype(dtype) for v in values]
    variables = [tg.Variable(v) for v in values]
    ckpt = tg.train.Checkpoint(a=variables[0], b=variables[1], c=variables[2])
    path = ckpt.save(tmp_path / "ckpt")
    for v in variables:
        v.assign(np.ones(v.shape, dtype))
    status = ckpt.restore(path)
    assert status.assert_consumed() is status
    for v, want in zip(variables, values):
        assert v.numpy().dtype == want.dtype and v.shape == want.shape
        assert _bits(v) == want.tobytes()
        assert v.device == tg.constant(0.0).device  # restored onto the variable's device


def test_containers_nested_checkpoints_and_file_layout(tmp_path):
    a, b, c, d = (tg.Variable(np.full((2,), i, np.float32)) for i in range(4))
    inner = tg.train.Checkpoint(d=d)
    ckpt = tg.train.Checkpoint(items=[a, {"x": b, "y/z": c}], inner=inner)
    ckpt.extra = a  # the same variable again: saved once, at its first path
    prefix = ckpt.write(tmp_path / "w")
    assert prefix == os.fspath(tmp_path / "w")
    assert sorted(os.listdir(tmp_path)) == ["w.npz"]  # write(): no numbering, no state file
    with np.load(tmp_path / "w.npz", allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files if k != "index.json"}
    assert sorted(arrays) == ["inner/d", "inner/save_counter", "items/0", "items/1/x",
                              "items/1/y%2Fz", "save_counter"]
    np.testing.assert_array_equal(arrays["items/1/y%2Fz"], [2.0, 2.0])
    with zipfile.ZipFile(tmp_path / "w.npz") as zf:
        assert zf.namelist()[0] == "index.json"
        index = json.loads(zf.read("index.json"))
    assert index["format"] == "tapegpu-checkpoint" and index["version"] == 1
    entry = next(e for e in index["values"] if e["path"] == "items/0")
    assert entry["dtype"] == "float32" and entry["shape"] == [2] and entry["kind"] == "variable"
    assert {"path": "inner", "type": "Checkpoint"} in index["objects"]

    fresh = [tg.Variable(np.zeros(2, np.float32)) for _ in range(4)]
    restored = tg.train.Checkpoint(items=[fresh[0], {"x": fresh[1], "y/z": fresh[2]}],
                                   inner=tg.train.Checkpoint(d=fresh[3]))
    restored.read(prefix).assert_consumed()
    assert [float(v.numpy()[0]) for v in fresh] == [0.0, 1.0, 2.0, 3.0]
    assert restored.inner.d is fresh[3]


def test_restore_accepts_the_file_name(tmp_path):
    v = tg.Variable(2.5)
    prefix = tg.train.Checkpoint(v=v).save(tmp_path / "ckpt")
    w = tg.Variable(0.0)
    tg.train.Checkpoint(v=w).restore(prefix + ".npz").assert_consumed()
    assert float(w) == 2.5


def test_checkpoint_saved_on_one_device_restores_on_another(tmp_path, tg_device):
    with tg.device("cpu"):
        src = tg.Variable(np.arange(6, dtype=np.float64).reshape(2, 3))
        prefix = tg.train.Checkpoint(v=src).save(tmp_path / "ckpt")
    dst = tg.Variable(np.zeros((2, 3)))
    tg.train.Checkpoint(v=dst).restore(prefix).assert_consumed()
    assert _bits(dst) == _bits(src)
    assert dst.device == tg.constant(0.0).device


def test_trained_sequential_restores_bit_identical(tmp_path, tg_device):
    model = _built_model()
    _train(model, tg.optimizers.SGD(0.1, momentum=0.9), 3)  # moves the BN statistics too
    prefix = tg.train.Checkpoint(model=model).save(tmp_path / "ckpt")
    fresh = _built_model()
    assert _bits(fresh(tg.constant(X))) != _bits(model(tg.constant(X)))
    tg.train.Checkpoint(model=fresh).restore(prefix).assert_consumed()
    assert _bits(fresh(tg.constant(X))) == _bits(model(tg.constant(X)))
    assert _bits(fresh(tg.constant(X), training=True)) == \
        _bits(model(tg.constant(X), training=True))
    for a, b in zip(fresh.variables, model.variables):
        assert _bits(a) == _bits(b) and a.trainable == b.trainable


@pytest.mark.parametrize("make_opt", [
    lambda: tg.optimizers.Adam(0.01),
    lambda: tg.optimizers.Adam(0.01, amsgrad=True),
    lambda: tg.optimizers.SGD(0.05, momentum=0.9, nesterov=True),
    lambda: tg.optimizers.RMSprop(0.01, momentum=0.5),
], ids=["adam", "adam-amsgrad", "sgd-nesterov", "rmsprop"])
def test_optimizer_state_continues_training_bit_identically(tmp_path, tg_device, make_opt):
    model, opt = _built_model(), make_opt()
    _train(model, opt, 3)
    ckpt = tg.train.Checkpoint(model=model, optimizer=opt)
    prefix = ckpt.save(tmp_path / "ckpt")
    _train(model, opt, 4)  # the uninterrupted run

    fresh, fresh_opt = _built_model(), make_opt()
    status = tg.train.Checkpoint(model=fresh, optimizer=fresh_opt).restore(prefix)
    status.assert_consumed()
    assert int(fresh_opt.iterations.numpy()) == 3
    _train(fresh, fresh_opt, 4)
    assert int(fresh_opt.iterations.numpy()) == int(opt.iterations.numpy()) == 7
    for a, b in zip(fresh.variables, model.variables):
        assert _bits(a) == _bits(b)
    for name in opt._slot_names:
        for a, b in zip(fresh.trainable_variables, model.trainable_variables):
            if opt._slots[b._uid][1][opt._slot_names.index(name)] is not None:
                assert _bits(fresh_opt.get_slot(a, name)) == _bits(opt.get_slot(b, name))


def test_slot_paths_follow_the_variables(tmp_path):
    w = tg.Variable([1.0, 2.0])
    opt = tg.optimizers.Adam(0.1)
    opt.apply_gradients([(tg.constant([1.0, 1.0]), w)])
    opt.apply_gradients([(tg.constant([1.0, 1.0]), tg.Variable([0.0, 0.0]))])  # not saved
    prefix = tg.train.Checkpoint(net={"w": w}, opt=opt).write(tmp_path / "w")
    with np.load(prefix + ".npz", allow_pickle=False) as f:
        files = sorted(f.files)
    assert files == ["index.json", "net/w", "net/w/.OPTIMIZER_SLOT/opt/m",
                     "net/w/.OPTIMIZER_SLOT/opt/v", "opt/iterations", "save_counter"]


# -- numbering, the state file, the manager --------------------------------------------------
def test_save_numbers_and_continues_after_restore(tmp_path):
    v = tg.Variable(0.0)
    ckpt = tg.train.Checkpoint(v=v)
    paths = [ckpt.save(tmp_path / "run" / "ckpt") for _ in range(2)]
    assert paths == [os.fspath(tmp_path / "run" / f"ckpt-{i}") for i in (1, 2)]
    assert int(ckpt.save_counter.numpy()) == 2
    assert tg.train.latest_checkpoint(tmp_path / "run") == paths[1]
    state = (tmp_path / "run" / "checkpoint").read_text()
    assert state == 'model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-2"\n'

    again = tg.train.Checkpoint(v=tg.Variable(0.0))
    again.restore(paths[1]).assert_consumed()
    assert again.save(tmp_path / "run" / "ckpt").endswith("ckpt-3")
    ckpt.write(tmp_path / "run" / "other")  # write() leaves the state file alone
    assert tg.train.latest_checkpoint(tmp_path / "run").endswith("ckpt-3")


def test_latest_checkpoint_none_cases(tmp_path):
    assert tg.train.latest_checkpoint(tmp_path) is None
    assert tg.train.latest_checkpoint(tmp_path / "missing") is None
    prefix = tg.train.Checkpoint(v=tg.Variable(1.0)).save(tmp_path / "ckpt")
    os.remove(prefix + ".npz")
    assert tg.train.latest_checkpoint(tmp_path) is None  # names a checkpoint that is gone


def test_manager_keeps_the_newest_and_deletes_the_rest(tmp_path, tg_device):
    v = tg.Variable(np.zeros(3, np.float32))
    ckpt = tg.train.Checkpoint(v=v)
    manager = tg.train.CheckpointManager(ckpt, tmp_path, max_to_keep=2)
    assert manager.latest_checkpoint is None and manager.checkpoints == []
    assert manager.restore_or_initialize() is None
    for i in range(1, 5):
        v.assign(np.full(3, i, np.float32))
        assert manager.save() == os.fspath(tmp_path / f"ckpt-{i}")
    assert manager.checkpoints == [os.fspath(tmp_path / "ckpt-3"), os.fspath(tmp_path / "ckpt-4")]
    assert manager.latest_checkpoint == tg.train.latest_checkpoint(tmp_path) == \
        os.fspath(tmp_path / "ckpt-4")
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-3.npz", "ckpt-4.npz"]
    state = (tmp_path / "checkpoint").read_text().splitlines()
    assert state[:3] == ['model_checkpoint_path: "ckpt-4"', 'all_model_checkpoint_paths: "ckpt-3"',
                         'all_model_checkpoint_paths: "ckpt-4"']

    # a new manager on the directory resumes: it keeps managing the same checkpoints
    w = tg.Variable(np.zeros(3, np.float32))
    other = tg.train.CheckpointManager(tg.train.Checkpoint(v=w), tmp_path, max_to_keep=2)
    assert other.checkpoints == manager.checkpoints
    assert other.restore_or_initialize() == os.fspath(tmp_path / "ckpt-4")
    np.testing.assert_array_equal(w.numpy(), [4.0, 4.0, 4.0])
    assert other.save() == os.fspath(tmp_path / "ckpt-5")  # the restored save_counter numbers
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-4.npz", "ckpt-5.npz"]


def test_manager_checkpoint_number_and_keep_all(tmp_path):
    step = tg.Variable(np.int64(0), trainable=False)
    ckpt = tg.train.Checkpoint(step=step)
    manager = tg.train.CheckpointManager(ckpt, tmp_path, max_to_keep=None, checkpoint_name="m")
    for s in (10, 20, 30):
        step.assign(np.int64(s))
        manager.save(checkpoint_number=step)
    manager.save(checkpoint_number=20)  # saved again: moves to the end
    assert [os.path.basename(p) for p in manager.checkpoints] == ["m-10", "m-30", "m-20"]
    assert int(ckpt.save_counter.numpy()) == 4
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "m-10.npz", "m-20.npz", "m-30.npz"]
    with pytest.raises(TypeError, match="checkpoint_number"):
        manager.save(checkpoint_number=1.5)


def test_manager_keep_checkpoint_every_n_hours(tmp_path, monkeypatch):
    clock = [1.7e9]
    monkeypatch.setattr(ckpt_mod.time, "time", lambda: clock[0])
    manager = tg.train.CheckpointManager(tg.train.Checkpoint(v=tg.Variable(0.0)), tmp_path,
                                         max_to_keep=1, keep_checkpoint_every_n_hours=1)
    for minutes in (0, 30, 70, 80, 100, 140, 200):
        clock[0] = 1.7e9 + 60 * minutes
        manager.save()
    # as each checkpoint leaves the list, it stays on disk if it is an hour or more newer than
    # the last one preserved (at first: the manager's start): ckpt-3 (70 min), then ckpt-6 (140)
    assert [os.path.basename(p) for p in manager.checkpoints] == ["ckpt-7"]
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-3.npz", "ckpt-6.npz",
                                            "ckpt-7.npz"]
    state = (tmp_path / "checkpoint").read_text()
    assert "last_preserved_timestamp: 1700008400.0" in state
    clock[0] += 60  # a new manager resumes from the state file: ckpt-7 is not preserved
    again = tg.train.CheckpointManager(tg.train.Checkpoint(v=tg.Variable(0.0)), tmp_path,
                                       max_to_keep=1, keep_checkpoint_every_n_hours=1)
    assert again.checkpoints == manager.checkpoints


@pytest.mark.parametrize("kwargs,match", [
    ({"max_to_keep": 0}, "max_to_keep"), ({"max_to_keep": -1}, "max_to_keep"),
    ({"max_to_keep": 2, "keep_checkpoint_every_n_hours": 0}, "every_n_hours"),
    ({"max_to_keep": 2, "checkpoint_name": ""}, "checkpoint_name")])
def test_manager_rejects_bad_arguments(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        tg.train.CheckpointManager(tg.train.Checkpoint(), tmp_path, **kwargs)
    with pytest.raises(TypeError, match="tg.train.Checkpoint"):
        tg.train.CheckpointManager(tg.Variable(1.0), tmp_path, max_to_keep=1)


def test_checkpoint_rejects_untrackable_objects_and_reserved_names():
    with pytest.raises(ValueError, match=r"items\[1\] must be a trackable object.*int"):
        tg.train.Checkpoint(items=[tg.Variable(1.0), 3])
    with pytest.raises(ValueError, match="make it a tg.Variable"):
        tg.train.Checkpoint(c=tg.constant(1.0))
    with pytest.raises(ValueError, match="reserved"):
        tg.train.Checkpoint(save_counter=tg.Variable(1))
    with pytest.raises(AttributeError, match="no object 'nope'"):
        tg.train.Checkpoint().nope


# -- the load status ---------------------------------------------------------------------------
def test_assert_consumed_reports_unused_values_and_unmatched_objects(tmp_path):
    prefix = tg.train.Checkpoint(a=tg.Variable(1.0), b=tg.Variable(2.0)).save(tmp_path / "c")
    a = tg.Variable(0.0)
    status = tg.train.Checkpoint(a=a).restore(prefix)
    assert float(a) == 1.0  # what matched is restored
    assert status.unused_values == ["b"] and status.unmatched_objects == []
    with pytest.raises(AssertionError, match=r"no object to restore into: \['b'\]"):
        status.assert_consumed()
    status.assert_existing_objects_matched().assert_nontrivial_match()

    status = tg.train.Checkpoint(a=tg.Variable(0.0), c=tg.Variable(0.0)).restore(prefix)
    status.expect_partial()
    with pytest.raises(AssertionError, match=r"no value in the checkpoint: \['c'\]"):
        status.assert_consumed()
    with pytest.raises(AssertionError, match=r"\['c'\]"):
        status.assert_existing_objects_matched()

    status = tg.train.Checkpoint(z=tg.Variable(0.0)).restore(prefix).expect_partial()
    with pytest.raises(AssertionError, match="nothing matched"):
        status.assert_nontrivial_match()


def test_unbuilt_layers_and_fresh_optimizer_slots(tmp_path):
    model, opt = _built_model(), tg.optimizers.Adam()
    _train(model, opt, 1)
    prefix = tg.train.Checkpoint(model=model, optimizer=opt).save(tmp_path / "c")
    status = tg.train.Checkpoint(model=_model(), optimizer=tg.optimizers.Adam()).restore(prefix)
    status.expect_partial()  # no deferred restoration: the unbuilt layers' values are unused
    assert "model/layers/0/kernel" in status.unused_values
    with pytest.raises(AssertionError, match="call a fresh model once before restoring"):
        status.assert_consumed()

    # the model alone (without the optimizer) into a program that has optimizer slots
    fresh, fresh_opt = _built_model(), tg.optimizers.Adam()
    _train(fresh, fresh_opt, 1)
    tg.train.Checkpoint(model=model).write(tmp_path / "model")
    status = tg.train.Checkpoint(model=fresh, optimizer=fresh_opt).read(tmp_path / "model")
    assert "optimizer/iterations" in status.unmatched_objects
    assert "model/layers/0/kernel/.OPTIMIZER_SLOT/optimizer/m" in status.unmatched_objects
    with pytest.raises(AssertionError, match="OPTIMIZER_SLOT"):
        status.assert_consumed()


def test_unused_values_warn_unless_expected(tmp_path):
    prefix = tg.train.Checkpoint(a=tg.Variable(1.0), b=tg.Variable(2.0)).save(tmp_path / "c")
    with pytest.warns(UserWarning, match=r"were not restored.*\['b'\].*expect_partial"):
        tg.train.Checkpoint(a=tg.Variable(0.0)).restore(prefix)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tg.train.Checkpoint(a=tg.Variable(0.0)).restore(prefix).expect_partial()
        tg.train.Checkpoint(a=tg.Variable(0.0), b=tg.Variable(0.0)).restore(prefix)


def test_read_does_not_expect_a_save_counter(tmp_path):
    """A file without `save_counter` (e.g. from another writer): `read` does not miss it,
    `restore` does (TF's difference between the two)."""
    v = tg.Variable(5.0)
    prefix = tg.train.Checkpoint(v=v).write(tmp_path / "w")
    _rewrite(prefix + ".npz", drop="save_counter")
    w = tg.Variable(0.0)
    tg.train.Checkpoint(v=w).read(prefix).assert_consumed()
    assert float(w) == 5.0
    with pytest.raises(AssertionError, match=r"\['save_counter'\]"):
        tg.train.Checkpoint(v=w).restore(prefix).assert_consumed()


def test_restore_none_restores_nothing():
    v = tg.Variable(1.0)
    status = tg.train.Checkpoint(v=v).restore(None)
    assert float(v) == 1.0
    with pytest.raises(AssertionError, match="No checkpoint specified"):
        status.assert_consumed()
    status.expect_partial()


# -- mismatches and damaged files --------------------------------------------------------------
@pytest.mark.parametrize("value", [np.zeros((3, 5), np.float32), np.zeros((3, 4), np.float64)],
                         ids=["shape", "dtype"])
def test_shape_or_dtype_mismatch_names_path_shapes_and_dtypes(tmp_path, tg_device, value):
    prefix = tg.train.Checkpoint(
        first=tg.Variable(np.ones(2, np.float32)),
        model={"w": tg.Variable(np.ones((3, 4), np.float32))}).save(tmp_path / "c")
    first = tg.Variable(np.zeros(2, np.float32))
    target = tg.Variable(value)
    with pytest.raises(ValueError) as e:
        tg.train.Checkpoint(first=first, model={"w": target}).restore(prefix)
    msg = str(e.value)
    assert "'model/w'" in msg and "c-1.npz" in msg
    assert "float32 of shape (3, 4)" in msg
    assert f"{value.dtype.name} of shape {value.shape}" in msg
    assert not first.numpy().any()  # checked before anything is assigned


def test_optimizer_slot_mismatch_is_reported(tmp_path):
    w = tg.Variable(np.ones(3, np.float32))
    opt = tg.optimizers.SGD(0.1, momentum=0.9)
    opt.apply_gradients([(tg.constant(np.ones(3, np.float32)), w)])
    prefix = tg.train.Checkpoint(w=w, opt=opt).save(tmp_path / "c")
    _rewrite(prefix + ".npz", drop="w")  # only the slot's variable differs: make it (4,)
    with pytest.raises(ValueError, match=r"float32 of shape \(3,\) at 'w/\.OPTIMIZER_SLOT/opt/"
                                         r"momentum', but the slot of variable .* is float32 "
                                         r"of shape \(4,\)"):
        tg.train.Checkpoint(w=tg.Variable(np.ones(4, np.float32)),
                            opt=tg.optimizers.SGD(0.1, momentum=0.9)).restore(prefix)


def _rewrite(file, drop=None, index_edit=None, members=None):
    """Rewrites a checkpoint file: without the value `drop`, with the index edited, with
    members replaced (name -> bytes)."""
    with zipfile.ZipFile(file) as zf:
        index = json.loads(zf.read("index.json"))
        data = {n: zf.read(n) for n in zf.namelist() if n != "index.json"}
    if drop is not None:
        index["values"] = [e for e in index["values"] if e["path"] != drop]
        data.pop(drop + ".npy")
    if index_edit is not None:
        index_edit(index)
    data.update(members or {})
    with zipfile.ZipFile(file, "w") as zf:
        zf.writestr("index.json", json.dumps(index))
        for n, b in data.items():
            zf.writestr(n, b)


def _saved(tmp_path):
    v = tg.Variable(np.arange(1000, dtype=np.float32))
    prefix = tg.train.Checkpoint(v=v).save(tmp_path / "c")
    return prefix, prefix + ".npz"


def _assert_clean_error(tmp_path, prefix, match, file=None):
    with pytest.raises(ValueError, match=match) as e:
        tg.train.Checkpoint(v=tg.Variable(np.zeros(1000, np.float32))).restore(prefix)
    assert (file or prefix + ".npz") in str(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__  # no zipfile/numpy trace


@pytest.mark.parametrize("keep", [0, 10, 0.5, -1])
def test_truncated_files_raise_value_error(tmp_path, keep):
    prefix, file = _saved(tmp_path)
    raw = open(file, "rb").read()
    n = int(len(raw) * keep) if isinstance(keep, float) else (keep if keep >= 0
                                                               else len(raw) + keep)
    open(file, "wb").write(raw[:n])
    _assert_clean_error(tmp_path, prefix, "truncated or is not a checkpoint")


def test_flipped_bytes_in_the_data_raise_value_error(tmp_path):
    prefix, file = _saved(tmp_path)
    raw = bytearray(open(file, "rb").read())
    at = raw.index(np.arange(1000, dtype=np.float32)[500:].tobytes()[:16])
    raw[at] ^= 0xFF
    open(file, "wb").write(bytes(raw))
    _assert_clean_error(tmp_path, prefix, r"the array of 'v' is damaged.*CRC")


def test_not_a_zip_raises_value_error(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"not a checkpoint at all" * 100)
    _assert_clean_error(tmp_path, os.fspath(tmp_path / "junk"), "not a complete zip archive")


def _v(index):
    return next(e for e in index["values"] if e["path"] == "v")


@pytest.mark.parametrize("edit,match", [
    (lambda i: i.update(format="something-else"), "does not describe a tapegpu-checkpoint"),
    (lambda i: i.update(version=99), "format version 99 is newer"),
    (lambda i: i.update(version="1"), "no integer format version"),
    (lambda i: i.update(values={}), "no list of values"),
    (lambda i: _v(i).update(shape=[-1]), "malformed entry"),
    (lambda i: _v(i).update(dtype="object"), "dtype 'object'"),
    (lambda i: _v(i).update(path="elsewhere"), "array of 'elsewhere' is missing"),
    (lambda i: _v(i).update(kind="other"), "malformed entry"),
    (lambda i: i["values"].append(dict(_v(i))), "listed twice"),
    (lambda i: _v(i).update(shape=[999]), r"index says float32 of shape \(999,\)"),
], ids=["format", "future-version", "version-type", "values-type", "negative-dim", "object-dtype",
        "missing-array", "kind", "duplicate", "wrong-shape"])
def test_bad_index_raises_value_error(tmp_path, edit, match):
    prefix, file = _saved(tmp_path)
    _rewrite(file, index_edit=edit)
    with pytest.raises(ValueError, match=match) as e:
        tg.train.Checkpoint(v=tg.Variable(np.zeros(999, np.float32))).read(prefix)
    assert file in str(e.value)


def test_index_that_is_not_json_or_missing(tmp_path):
    prefix, file = _saved(tmp_path)
    with zipfile.ZipFile(file, "w") as zf:
        zf.writestr("index.json", b"{not json")
    _assert_clean_error(tmp_path, prefix, "index.json is not valid JSON")
    with zipfile.ZipFile(file, "w") as zf:
        zf.writestr("v.npy", b"")
    _assert_clean_error(tmp_path, prefix, "it has no index.json")


def test_pickled_arrays_are_never_loaded(tmp_path):
    """An object array (numpy pickles those) in place of a value: refused, not unpickled."""
    prefix, file = _saved(tmp_path)
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([object()], dtype=object), allow_pickle=True)
    _rewrite(file, members={"v.npy": buf.getvalue()})
    _assert_clean_error(tmp_path, prefix, r"array of 'v' is damaged.*dtype object")


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at .*nothing-1.npz"):
        tg.train.Checkpoint(v=tg.Variable(1.0)).restore(tmp_path / "nothing-1")


def test_damaged_state_file_raises_value_error(tmp_path):
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-1\n')
    with pytest.raises(ValueError, match=r"checkpoint state file .*checkpoint', line 1"):
        tg.train.latest_checkpoint(tmp_path)
    (tmp_path / "checkpoint").write_text("garbage\n")
    with pytest.raises(ValueError, match="expected `<field>: <value>`"):
        tg.train.CheckpointManager(tg.train.Checkpoint(), tmp_path, max_to_keep=1)


# -- a writer killed mid-save ------------------------------------------------------------------
N = 4_000_000  # 16 MB per value: long enough a write to be killed during it

WRITER = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import tapegpu as tg

    directory, mode = sys.argv[1], sys.argv[2]
    w = tg.Variable(np.zeros({N}, np.float32))
    ckpt = tg.train.Checkpoint(w=w)
    manager = tg.train.CheckpointManager(ckpt, directory, max_to_keep=2)
    manager.restore_or_initialize()

    def save_next():  # checkpoint n holds w = n everywhere
        n = int(ckpt.save_counter.numpy()) + 1
        w.assign(np.full({N}, n, np.float32))
        return manager.save()

    if mode != "loop":  # stop in a chosen place of the second save: `mode` is the file renamed
        save_next()
        real_replace = os.replace
        def replace(src, dst):
            if os.path.basename(dst) == mode:
                print("paused", flush=True)
                time.sleep(600)
            real_replace(src, dst)
        os.replace = replace
    while True:
        print("saved", save_next(), flush=True)
""").replace("{N}", str(N))


def _run_writer(directory, mode, tg_device, kill_after=None):
    # the CuPy stand-in lives only in the test process: its writer runs on the CPU
    env = dict(os.environ, TAPEGPU_DEVICE="cpu" if tg_device in ("numpy", "cuda_sim")
               else tg_device)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, os.fspath(directory), mode],
                            stdout=subprocess.PIPE, env=env, text=True)
    try:
        line = proc.stdout.readline()  # the first checkpoint is saved, or the writer paused
        assert line.startswith(("saved", "paused")), line
        if kill_after:
            time.sleep(kill_after)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return line


def _assert_intact(prefix):
    """The checkpoint at `prefix` restores completely, and holds w = its number."""
    w = tg.Variable(np.zeros(N, np.float32))
    ckpt = tg.train.Checkpoint(w=w)
    ckpt.restore(prefix).assert_consumed()
    n = int(prefix.rsplit("-", 1)[1])
    assert int(ckpt.save_counter.numpy()) == n
    assert np.array_equal(w.numpy(), np.full(N, n, np.float32))


@pytest.mark.parametrize("killed_before", ["ckpt-2.npz", "checkpoint"])
def test_writer_killed_mid_save_leaves_the_previous_checkpoint(tmp_path, tg_device,
                                                               killed_before):
    """Killed (SIGKILL) after the new data is written and fsynced but before it is renamed into
    place, or after that but before the state file is replaced."""
    assert _run_writer(tmp_path, killed_before, tg_device).startswith("paused")
    latest = tg.train.latest_checkpoint(tmp_path)
    assert latest == os.fspath(tmp_path / "ckpt-1")
    _assert_intact(latest)
    left = sorted(os.listdir(tmp_path))
    if killed_before == "ckpt-2.npz":  # the new data is only in a temporary file
        assert left[0].startswith(".ckpt-2.npz.tmp") and left[1:] == ["checkpoint",
                                                                      "ckpt-1.npz"]
        assert os.path.getsize(tmp_path / left[0]) > N * 4
    else:  # complete but not yet recorded
        assert left[0].startswith(".checkpoint.tmp")
        assert left[1:] == ["checkpoint", "ckpt-1.npz", "ckpt-2.npz"]
        _assert_intact(os.fspath(tmp_path / "ckpt-2"))
    manager = tg.train.CheckpointManager(tg.train.Checkpoint(w=tg.Variable(np.zeros(N))),
                                         tmp_path, max_to_keep=2)
    assert manager.checkpoints == [os.fspath(tmp_path / "ckpt-1")]


def test_writer_killed_at_random_times_always_leaves_a_complete_latest(tmp_path, tg_device):
    rng = np.random.default_rng(7)
    for _ in range(3):
        _run_writer(tmp_path, "loop", tg_device, kill_after=float(rng.uniform(0.0, 0.4)))
        latest = tg.train.latest_checkpoint(tmp_path)
        assert latest is not None
        _assert_intact(latest)
        manager = tg.train.CheckpointManager(tg.train.Checkpoint(), tmp_path, max_to_keep=2)
        assert manager.latest_checkpoint == latest
        for prefix in manager.checkpoints:  # a kill between deleting and recording may list
            if os.path.exists(prefix + ".npz"):  # a deleted one; the others are complete
                _assert_intact(prefix)


# -- reading values by path (tf.train.list_variables, load_variable, load_checkpoint) ---------
def test_list_and_load_variables_by_path(tmp_path, tg_device):
    model = _built_model()
    opt = tg.optimizers.Adam(0.01)
    _train(model, opt, 2)
    ckpt = tg.train.Checkpoint(model=model, opt=opt)
    prefix = ckpt.save(os.fspath(tmp_path / "ckpt"))
    graph = ckpt_mod._Graph(ckpt)
    listed = tg.train.list_variables(os.fspath(tmp_path))  # the directory: its latest
    assert listed == sorted(listed) == tg.train.list_variables(prefix)
    names = dict(listed)
    for path, var in graph.variables.items():
        assert names[path] == list(var.shape)
        assert _bits(tg.train.load_variable(prefix, path)) == _bits(var._read())
    slots = [p for p in names if "/.OPTIMIZER_SLOT/" in p]
    assert len(slots) == 2 * len(model.trainable_variables)  # Adam's m and v
    reader = tg.train.load_checkpoint(prefix + ".npz")
    kernel = next(p for p in names if p.endswith("kernel"))
    assert reader.has_tensor(kernel) and reader.has_tensor(kernel + "/.ATTRIBUTES/VARIABLE_VALUE")
    assert reader.get_variable_to_dtype_map()[kernel] == tg.float32
    assert _bits(reader.get_tensor(kernel + "/.ATTRIBUTES/VARIABLE_VALUE")) == \
        _bits(reader.get_tensor(kernel))
    with pytest.raises(tg.errors.NotFoundError, match="no value 'model/nope'.*it has: "):
        tg.train.load_variable(prefix, "model/nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="list_variables: couldn't find a 'checkpoint'"):
        tg.train.list_variables(os.fspath(empty))
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        tg.train.load_checkpoint(os.fspath(tmp_path / "missing"))


def test_a_header_claiming_more_data_than_the_file_holds_allocates_nothing(tmp_path):
    """A value whose index and `.npy` header agree on 10^8 elements, in a member of a few
    bytes: refused before its data is read, without allocating what the header claims."""
    import tracemalloc
    prefix, file = _saved(tmp_path)
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False,
                                               "shape": (10 ** 8,)})

    def claim(index):
        for e in index["values"]:
            if e["path"] == "v":
                e["shape"] = [10 ** 8]
    _rewrite(file, index_edit=claim, members={"v.npy": buf.getvalue() + b"\0" * 16})
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="array of 'v' is damaged") as e:
            tg.train.load_variable(prefix, "v")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert file in str(e.value)
    assert peak < 16 << 20, peak
