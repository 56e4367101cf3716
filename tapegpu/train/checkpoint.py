"""Checkpoints: `Checkpoint`, `CheckpointManager` and `latest_checkpoint`, TensorFlow's API.

A checkpoint stores the values of an object graph: the objects given to `Checkpoint(...)`,
and, recursively, the variables and modules in their attributes, the items of lists, tuples and
dicts, and optimizers' slots and iteration counts. Each value is keyed by its path in that graph
(`model/layers/0/kernel`), not by variable names, so a checkpoint restores into any program that
builds the same structure (a fresh model of the same architecture), as TF's object-based
checkpoints.

File format (version 1; docs/checkpoints.md): `<prefix>.npz` is one uncompressed zip archive
whose first member `index.json` holds the format name and version, the object graph's paths
and each value's dtype and shape, followed by one `.npy` member per value named by its path
(so `numpy.load(f"{prefix}.npz")[path]` reads it). Reading loads nothing executable: JSON, and
arrays with `allow_pickle=False` of plain numeric and boolean dtypes only.

Writes are atomic: data goes to a temporary file in the same directory, is flushed to disk
(fsync) and renamed over the target (`os.replace`); the `checkpoint` state file naming the
latest checkpoint is replaced the same way afterwards, so a crash at any point leaves the
previous checkpoint, and the state file, intact.
"""
import collections
import json
import numbers
import os
import time
import warnings
import zipfile

import numpy as np

from ..core import files
from ..core.tensor import Tensor, Variable
from ..models.module import Module, _sorted_keys
from ..optimizers.base import Optimizer

FORMAT = "tapegpu-checkpoint"
VERSION = 1
SUFFIX = ".npz"
INDEX = "index.json"
STATE_FILE = "checkpoint"  # TF's name for the text file naming the latest checkpoints
SLOT = ".OPTIMIZER_SLOT"  # TF's path segment for an optimizer's slot of a variable
_DTYPE_KINDS = "biufc"  # bool, integers, floats, complex: nothing that pickles
_ZIP64_FROM = 2 ** 31 - 2 ** 20  # members this large need zip64 headers


# -- the object graph ------------------------------------------------------------------------
def _component(key):
    """A dict key or attribute name as one path segment: '%' and '/' escaped, a leading '.'
    too (segments starting with '.' are the format's own, e.g. '.OPTIMIZER_SLOT')."""
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise ValueError(f"tg.train.Checkpoint: dict keys in a checkpointed object graph must be "
                         f"strings or integers, got {key!r} ({type(key).__name__})")
    s = str(key).replace("%", "%25").replace("/", "%2F")
    if s.startswith("."):
        s = "%2E" + s[1:]
    return s or "%"


def _join(path, segment):
    return f"{path}/{segment}" if path else segment


class _Graph:
    """The objects reachable from a Checkpoint, each once at the first path that reaches it.

    `variables`: {path: Variable}; `paths`: {id(variable): path}; `optimizers`: {path: opt};
    `nodes`: [(path, type name)] of the containers (checkpoints, modules, optimizers);
    `counters`: the paths of checkpoints' `save_counter`s.
    """

    def __init__(self, root):
        self.variables = {}
        self.paths = {}
        self.optimizers = {}
        self.nodes = []
        self.counters = set()
        self._seen = set()
        self._visit(root, "")

    def _visit(self, obj, path):
        if id(obj) in self._seen:
            return
        if isinstance(obj, Variable):
            self._seen.add(id(obj))
            self.variables[path] = obj
            self.paths[id(obj)] = path
            return
        if isinstance(obj, Checkpoint):
            children = [("save_counter", obj._save_counter)] + list(obj._objects.items())
            self.counters.add(_join(path, "save_counter"))
        elif isinstance(obj, Module):
            children = [(k, v) for k, v in vars(obj).items()
                        if k not in obj._IGNORED_ATTRIBUTES and k != "_name"]
        elif isinstance(obj, Optimizer):
            children = [("iterations", obj._iterations)]
            if isinstance(obj._learning_rate, Variable):
                children.append(("learning_rate", obj._learning_rate))
            self.optimizers[path] = obj
        elif isinstance(obj, (list, tuple)):
            children = list(enumerate(obj))
        elif isinstance(obj, dict):
            children = [(k, obj[k]) for k in _sorted_keys(obj)]
        else:
            return  # numbers, strings, functions, constants: not part of a checkpoint
        self._seen.add(id(obj))
        if path and not isinstance(obj, (list, tuple, dict)):
            self.nodes.append((path, type(obj).__name__))
        segments = {}
        for key, child in children:
            if not _trackable(child):
                continue
            seg = _component(key)
            if seg in segments:
                raise ValueError(f"tg.train.Checkpoint: keys {segments[seg]!r} and {key!r} of "
                                 f"{path or 'the checkpoint'!r} give the same path segment "
                                 f"{seg!r}; use distinct string keys")
            segments[seg] = key
            self._visit(child, _join(path, seg))

    def slots(self):
        """[(path, optimizer path, optimizer, variable, slot index)] of the optimizers' existing
        slots whose variable is in the graph (TF saves no slots of variables outside it)."""
        out = []
        for opt_path, opt in self.optimizers.items():
            for var, arrays in opt._slots.values():
                var_path = self.paths.get(id(var))
                if var_path is None:
                    continue
                for i, (name, arr) in enumerate(zip(opt._slot_names, arrays)):
                    if arr is not None:
                        out.append((_slot_path(var_path, opt_path, name), opt_path, opt, var,
                                    i))
        return out


def _slot_path(var_path, opt_path, name):
    return f"{var_path}/{SLOT}/{opt_path}/{name}"


def _trackable(obj):
    return isinstance(obj, (Variable, Module, Optimizer, Checkpoint, list, tuple, dict))


def _check_trackable(obj, where):
    """TF's rule: a Checkpoint holds trackable objects (here: variables, modules, optimizers,
    checkpoints, and lists, tuples and dicts of them)."""
    if isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            _check_trackable(item, f"{where}[{i}]")
    elif isinstance(obj, dict):
        for k, item in obj.items():
            _check_trackable(item, f"{where}[{k!r}]")
    elif not isinstance(obj, (Variable, Module, Optimizer, Checkpoint)):
        hint = " (a constant: make it a tg.Variable to checkpoint it)" \
            if isinstance(obj, Tensor) else ""
        raise ValueError(f"tg.train.Checkpoint: {where} must be a trackable object (a "
                         f"tg.Variable, a tg.Module or layer, an optimizer, a "
                         f"tg.train.Checkpoint, or a list, tuple or dict of them), got "
                         f"{type(obj).__name__}{hint}")


def _host(array, dev):
    return np.asarray(dev.to_numpy(array), order="C")  # (0-d stays 0-d)


def _device_copy(arr, dev):
    """A C-contiguous array on `dev` that nobody else holds (slots are updated in place)."""
    return dev.asarray(np.array(arr, copy=True, order="C"))


# -- files -----------------------------------------------------------------------------------
def _file(save_path):
    """The file of a checkpoint given by its prefix (what `save` returns) or its file name."""
    save_path = os.fspath(save_path)
    return save_path if save_path.endswith(SUFFIX) else save_path + SUFFIX


def _atomic_write(path, write):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    files.atomic_write(path, write)


def _write_checkpoint(path, index, arrays):
    def write(f):
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            zf.writestr(INDEX, json.dumps(index, indent=1))
            for key, arr in arrays:
                with zf.open(key + ".npy", "w", force_zip64=arr.nbytes >= _ZIP64_FROM) as m:
                    np.lib.format.write_array(m, arr, allow_pickle=False)
    _atomic_write(path, write)


class _Reader:
    """A checkpoint file opened for reading: `index` (validated), then `read(entry)` per value.

    Every problem with the file raises ValueError naming the file and what is wrong. Other
    formats written by `_write_checkpoint` (tg.saved_model) subclass it and set the class
    attributes: the format's name and version, the kinds of values, what a file is called in
    messages and the hint for a missing file."""

    format, version, kinds, what = FORMAT, VERSION, ("variable", "slot"), "checkpoint"
    missing_hint = "pass the path `save` returned, or tg.train.latest_checkpoint(directory)"

    def __init__(self, file, caller):
        self.file, self.caller = file, caller
        try:
            self._f = open(file, "rb")
        except FileNotFoundError:
            raise FileNotFoundError(f"{caller}: no {self.what} at {file!r} (the file does not "
                                    f"exist; {self.missing_hint})") from None
        try:
            self._zip = zipfile.ZipFile(self._f)
        except Exception as e:  # zipfile raises several types for damaged archives
            self.close()
            self._fail(f"the file is truncated or is not a {self.what} (not a complete zip "
                       f"archive: {e})")
        try:
            self.members = set(self._zip.namelist())
            if INDEX not in self.members:
                self._fail(f"it has no {INDEX}: not a {self.format} file")
            try:
                raw = self._zip.read(INDEX)
            except Exception as e:  # a damaged member: zipfile's BadZipFile, zlib.error, ...
                self._fail(f"its {INDEX} cannot be read ({e})")
            try:
                index = json.loads(raw.decode("utf-8"))
            except ValueError as e:
                self._fail(f"its {INDEX} is not valid JSON ({e})")
            except RecursionError:  # JSON nested deeper than Python's recursion limit
                self._fail(f"its {INDEX} is nested too deeply to be an index tapegpu wrote")
            self.index = self._validate(index)
        except BaseException:
            self.close()
            raise

    def _fail(self, what):
        raise ValueError(f"{self.caller}: cannot read {self.what} {self.file!r}: {what}") \
            from None

    def _validate(self, index):
        if not isinstance(index, dict) or index.get("format") != self.format:
            self._fail(f"its {INDEX} does not describe a {self.format} file")
        version = index.get("version")
        if not isinstance(version, int) or isinstance(version, bool):
            self._fail(f"its {INDEX} has no integer format version (got {version!r})")
        if version > self.version:
            self._fail(f"format version {version} is newer than this tapegpu reads (up to "
                       f"{self.version}); upgrade tapegpu")
        values = index.get("values")
        if not isinstance(values, list):
            self._fail(f"its {INDEX} has no list of values")
        seen = set()
        for e in values:
            ok = isinstance(e, dict) and isinstance(e.get("path"), str) and \
                isinstance(e.get("shape"), list) and isinstance(e.get("dtype"), str) and \
                all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                    for d in e["shape"]) and e.get("kind") in self.kinds
            if not ok:
                self._fail(f"its {INDEX} has a malformed entry {str(e)[:200]}")
            if e["kind"] == "slot" and not all(isinstance(e.get(k), str)
                                               for k in ("variable", "optimizer", "slot")):
                self._fail(f"its {INDEX} has a malformed slot entry {str(e)[:200]}")
            try:
                dt = np.dtype(e["dtype"])
            except TypeError:
                dt = None
            if dt is None or dt.kind not in _DTYPE_KINDS or dt.name != e["dtype"]:
                self._fail(f"value {e['path']!r} has dtype {e['dtype']!r}; {self.what}s "
                           "hold bool, integer, float and complex arrays only")
            if e["path"] in seen:
                self._fail(f"value {e['path']!r} is listed twice")
            seen.add(e["path"])
            if e["path"] + ".npy" not in self.members:
                self._fail(f"the array of {e['path']!r} is missing")
        return index

    def read(self, entry):
        """The array of an index entry: its `.npy` header is checked against the entry, and
        the data's size against the member's, before the data is read (a number in the file
        never sizes an allocation the file cannot fill)."""
        path = entry["path"]
        info = self._zip.getinfo(path + ".npy")
        size = os.fstat(self._f.fileno()).st_size
        arr = trailing = None
        try:
            with self._zip.open(info) as m:
                shape, fortran, dtype = header = files.npy_header(m)
                if dtype.name == entry["dtype"] and list(shape) == entry["shape"]:
                    arr = files.npy_data(m, header, files.zip_member_limit(info, size))
                    trailing = m.read(1)  # at the member's end, zipfile checks its CRC-32
        except Exception as e:  # numpy and zipfile raise several types for damaged data
            self._fail(f"the array of {path!r} is damaged ({type(e).__name__}: {e})")
        if arr is None:
            self._fail(f"the array of {path!r} is {dtype.name} of shape {tuple(shape)} but the "
                       f"index says {entry['dtype']} of shape {tuple(entry['shape'])}")
        if trailing:
            self._fail(f"the array of {path!r} has stray bytes after its data")
        return arr

    def close(self):
        z = getattr(self, "_zip", None)
        if z is not None:
            z.close()
        self._f.close()


# -- the state file (TF's `checkpoint` text file) ----------------------------------------------
def _quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _unquote(s, where):
    if len(s) < 2 or s[0] != '"' or s[-1] != '"':
        raise ValueError(f"{where}: expected a quoted string, got {s!r}")
    out, i, body = [], 0, s[1:-1]
    while i < len(body):
        c = body[i]
        if c == "\\":
            if i + 1 >= len(body) or body[i + 1] not in '\\"n':
                raise ValueError(f"{where}: bad escape in {s!r}")
            out.append("\n" if body[i + 1] == "n" else body[i + 1])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _read_state(directory):
    """The state file's fields as a dict (None if there is no state file)."""
    path = os.path.join(directory, STATE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"tg.train: cannot read the checkpoint state file {path!r}: {e}") \
            from None
    state = {"model_checkpoint_path": None, "all_model_checkpoint_paths": [],
             "all_model_checkpoint_timestamps": [], "last_preserved_timestamp": None}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        where = f"tg.train: checkpoint state file {path!r}, line {n}"
        if not sep or key not in state:
            raise ValueError(f"{where}: expected `<field>: <value>` with a field of "
                             f"{sorted(state)}, got {line!r}")
        try:
            if key.endswith("paths") or key == "model_checkpoint_path":
                value = _unquote(value, where)
            else:
                value = float(value)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        if isinstance(state[key], list):
            state[key].append(value)
        else:
            state[key] = value
    return state


def _write_state(directory, latest, paths, timestamps=(), last_preserved=None):
    """Replaces the state file atomically; paths inside `directory` are stored relative."""
    def rel(p):
        r = os.path.relpath(p, directory)
        return p if r.startswith(os.pardir) else r
    lines = [f"model_checkpoint_path: {_quote(rel(latest))}"]
    lines += [f"all_model_checkpoint_paths: {_quote(rel(p))}" for p in paths]
    lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in timestamps]
    if last_preserved is not None:
        lines.append(f"last_preserved_timestamp: {last_preserved!r}")
    text = ("\n".join(lines) + "\n").encode("utf-8")
    _atomic_write(os.path.join(directory, STATE_FILE), lambda f: f.write(text))


def _absolute(directory, p):
    return p if os.path.isabs(p) else os.path.join(directory, p)


def latest_checkpoint(checkpoint_dir):
    """The prefix of the newest checkpoint in `checkpoint_dir`, or None (TF's
    `tf.train.latest_checkpoint`).

    It reads the `checkpoint` state file that `Checkpoint.save` and `CheckpointManager.save`
    keep in the directory; None if there is none or the checkpoint it names is missing. Since
    the state file is replaced only after the checkpoint is complete on disk, the checkpoint
    named is always complete.

    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> ckpt = tg.train.Checkpoint(w=tg.Variable(1.0))
    >>> tg.train.latest_checkpoint(tmp.name) is None
    True
    >>> path = ckpt.save(os.path.join(tmp.name, "ckpt"))
    >>> tg.train.latest_checkpoint(tmp.name) == path
    True
    >>> tmp.cleanup()
    """
    directory = os.fspath(checkpoint_dir)
    state = _read_state(directory)
    if state is None or not state["model_checkpoint_path"]:
        return None
    prefix = _absolute(directory, state["model_checkpoint_path"])
    return prefix if os.path.isfile(_file(prefix)) else None


# -- Checkpoint --------------------------------------------------------------------------------
def _counter_value(var):
    return int(var._value._dev.to_numpy(var._value._data))


def _set_counter(var, n):
    var._assign_array(var._value._dev.asarray(np.asarray(n, dtype=np.int64)))


class Checkpoint:
    """Saves and restores the variables of an object graph (TF's `tf.train.Checkpoint`).

    The keyword arguments name the objects to save: `tg.Variable`s, `tg.Module`s and layers
    (their variables, found by attribute path, as `Module.variables` finds them), optimizers
    (their slots, e.g. Adam's `m` and `v`, and `iterations`), other `Checkpoint`s, and lists,
    tuples and dicts of these. Values are keyed by their path from the checkpoint
    (`model/layers/0/kernel`), so a checkpoint restores into a fresh program building the same
    structure. Objects assigned as attributes later (`ckpt.extra = v`) are tracked too.

    `save(prefix)` numbers its checkpoints (`prefix-1`, `prefix-2`, ...) with `save_counter`
    and records the newest in the directory's `checkpoint` state file; `write(prefix)` writes
    exactly `prefix`. Both write the file `<prefix>.npz` atomically (docs/checkpoints.md).
    `restore(path)` and `read(path)` assign the saved values and return a status object whose
    `assert_consumed()` checks that everything matched.

    Layers create their variables on their first call: call a fresh model once (on any input
    of the right shape) before restoring into it; values whose variables do not exist yet are
    reported by `assert_consumed()` (tapegpu does not defer restorations).

    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> model = tg.layers.Dense(2)
    >>> _ = model(tg.ones((1, 3)))
    >>> opt = tg.optimizers.Adam(0.1)
    >>> ckpt = tg.train.Checkpoint(model=model, optimizer=opt)
    >>> path = ckpt.save(os.path.join(tmp.name, "ckpt"))
    >>> os.path.basename(path)
    'ckpt-1'
    >>> fresh = tg.layers.Dense(2)
    >>> _ = fresh(tg.ones((1, 3)))
    >>> status = tg.train.Checkpoint(model=fresh, optimizer=tg.optimizers.Adam(0.1)).restore(path)
    >>> _ = status.assert_consumed()
    >>> bool(tg.reduce_all(fresh.kernel == model.kernel))
    True
    >>> tmp.cleanup()
    """

    def __init__(self, **kwargs):
        object.__setattr__(self, "_objects", {})
        object.__setattr__(self, "_save_counter",
                           Variable(np.int64(0), trainable=False, name="save_counter"))
        for name, obj in kwargs.items():
            setattr(self, name, obj)

    @property
    def save_counter(self):
        """The number of `save` calls (an int64 variable, saved with the checkpoint, so
        numbering continues after a restore)."""
        return self._save_counter

    def __setattr__(self, name, value):
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        if name in ("save_counter", "save", "write", "restore", "read"):
            raise ValueError(f"tg.train.Checkpoint: {name!r} is reserved (a Checkpoint "
                             "attribute); choose another name for this object")
        _check_trackable(value, name)
        self._objects[name] = value

    def __getattr__(self, name):
        objects = self.__dict__.get("_objects", {})
        if name in objects:
            return objects[name]
        raise AttributeError(f"tg.train.Checkpoint has no object {name!r} (it holds "
                             f"{sorted(objects)})")

    def __delattr__(self, name):
        if name not in self._objects:
            raise AttributeError(name)
        del self._objects[name]

    def __repr__(self):
        return f"<tg.train.Checkpoint {sorted(self._objects)}>"

    # -- writing --------------------------------------------------------------------------------
    def write(self, file_prefix):
        """Writes the checkpoint to `<file_prefix>.npz` (no numbering, no state file) and
        returns `file_prefix`.

        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> ckpt = tg.train.Checkpoint(v=tg.Variable([1, 2]))
        >>> path = ckpt.write(os.path.join(tmp.name, "weights"))
        >>> sorted(os.listdir(tmp.name))
        ['weights.npz']
        >>> tmp.cleanup()
        """
        file_prefix = os.fspath(file_prefix)
        graph = _Graph(self)
        index = {"format": FORMAT, "version": VERSION, "values": [],
                 "objects": [{"path": p, "type": t} for p, t in graph.nodes]}
        arrays = []
        for path, var in graph.variables.items():
            arr = _host(var._value._data, var._value._dev)
            index["values"].append({"path": path, "kind": "variable", "dtype": arr.dtype.name,
                                    "shape": list(arr.shape), "name": var.name,
                                    "trainable": var.trainable})
            arrays.append((path, arr))
        for path, opt_path, opt, var, i in graph.slots():
            arr = _host(opt._slots[var._uid][1][i], var._value._dev)
            index["values"].append({"path": path, "kind": "slot", "dtype": arr.dtype.name,
                                    "shape": list(arr.shape),
                                    "variable": graph.paths[id(var)],
                                    "optimizer": opt_path,
                                    "slot": opt._slot_names[i]})
            arrays.append((path, arr))
        _write_checkpoint(_file(file_prefix), index, arrays)
        return file_prefix

    def save(self, file_prefix):
        """Writes a numbered checkpoint `<file_prefix>-<n>`, n = `save_counter` + 1, records
        it as the latest in the directory's `checkpoint` state file and returns its prefix.

        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> ckpt = tg.train.Checkpoint(v=tg.Variable(0.0))
        >>> [os.path.basename(ckpt.save(os.path.join(tmp.name, "ckpt"))) for _ in range(2)]
        ['ckpt-1', 'ckpt-2']
        >>> tmp.cleanup()
        """
        file_prefix = os.fspath(file_prefix)
        n = _counter_value(self._save_counter) + 1
        _set_counter(self._save_counter, n)
        path = self.write(f"{file_prefix}-{n}")
        directory = os.path.dirname(file_prefix) or "."
        _write_state(directory, path, [path])
        return path

    # -- reading --------------------------------------------------------------------------------
    def restore(self, save_path):
        """Restores the values saved at `save_path` (a prefix `save` returned, or the `.npz`
        file) into this checkpoint's objects; returns a `CheckpointLoadStatus`.

        Values are matched by path; optimizer slots are created for the variables that have
        saved ones. Every matched value is checked before any is assigned: a dtype or shape that
        differs from the object's raises ValueError naming the path, and nothing changes.
        `restore(None)` restores nothing (for `ckpt.restore(manager.latest_checkpoint)` on a
        first run).

        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> v = tg.Variable([1.0, 2.0])
        >>> ckpt = tg.train.Checkpoint(v=v)
        >>> path = ckpt.save(os.path.join(tmp.name, "ckpt"))
        >>> _ = v.assign([0.0, 0.0])
        >>> _ = ckpt.restore(path).assert_consumed()
        >>> v.numpy()
        array([1., 2.], dtype=float32)
        >>> tmp.cleanup()
        """
        return self._restore(save_path, "tg.train.Checkpoint.restore", expect_counter=True)

    def read(self, save_path):
        """Restores a checkpoint written by `write` (as `restore`, but a `save_counter` that the
        file lacks is not reported as unmatched).

        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> v = tg.Variable(3.0)
        >>> path = tg.train.Checkpoint(v=v).write(os.path.join(tmp.name, "w"))
        >>> w = tg.Variable(0.0)
        >>> _ = tg.train.Checkpoint(v=w).read(path).assert_consumed()
        >>> float(w)
        3.0
        >>> tmp.cleanup()
        """
        return self._restore(save_path, "tg.train.Checkpoint.read", expect_counter=False)

    def _restore(self, save_path, caller, expect_counter):
        if save_path is None:
            return CheckpointLoadStatus(None, (), (), 0)
        file = _file(save_path)
        graph = _Graph(self)
        reader = _Reader(file, caller)
        try:
            saved = {e["path"]: e for e in reader.index["values"]}
            plan, missing = [], []  # (entry, assign(array)), paths without values
            for path, var in graph.variables.items():
                e = saved.get(path)
                if e is None or e["kind"] != "variable":
                    if expect_counter or path not in graph.counters:
                        missing.append(path)
                    continue
                _check_match(caller, file, path, e, var)
                plan.append((e, _variable_setter(var)))
            existing = {p for p, *_ in graph.slots()}
            for e in saved.values():
                if e["kind"] != "slot":
                    continue
                opt = graph.optimizers.get(e["optimizer"])
                var = graph.variables.get(e["variable"])
                if opt is None or var is None or e["slot"] not in opt._slot_names or \
                        not opt._needs_slot(e["slot"]):
                    continue  # reported as unused below
                _check_match(caller, file, e["path"], e, var)
                plan.append((e, _slot_setter(opt, var, opt._slot_names.index(e["slot"]))))
                existing.discard(e["path"])
            missing += sorted(existing)  # slots of this program without saved values
            used = {e["path"] for e, _ in plan}
            unused = [p for p in saved if p not in used]
            values = [(reader.read(e), assign) for e, assign in plan]  # all read, then assigned
        finally:
            reader.close()
        for arr, assign in values:
            assign(arr)
        for path, opt in graph.optimizers.items():
            if _join(path, "iterations") in used:
                opt._step = _counter_value(opt._iterations)
        return CheckpointLoadStatus(file, missing, unused, len(used - graph.counters))


def _check_match(caller, file, path, entry, var):
    want_dtype, want_shape = var._value._data.dtype.name, tuple(var.shape)
    got_dtype, got_shape = entry["dtype"], tuple(entry["shape"])
    if got_dtype != want_dtype or got_shape != want_shape:
        what = "slot of variable" if entry["kind"] == "slot" else "variable"
        raise ValueError(f"{caller}: {file!r} holds {got_dtype} of shape {got_shape} at "
                         f"{path!r}, but the {what} {var.name!r} there is {want_dtype} of shape "
                         f"{want_shape}; restore into objects of the saved dtypes and shapes "
                         "(the same architecture)")


def _variable_setter(var):
    def assign(arr):
        var._assign_array(_device_copy(arr, var._value._dev))
    return assign


def _slot_setter(opt, var, i):
    def assign(arr):
        opt._slots_for(var)[i] = _device_copy(arr, var._value._dev)
    return assign


class CheckpointLoadStatus:
    """What a `restore` or `read` matched (TF's load status).

    `assert_consumed()` raises AssertionError when a saved value had no object to go to, or an
    object of the checkpoint (a variable, a slot, `iterations`) had no saved value;
    `assert_existing_objects_matched()` checks only the latter, `assert_nontrivial_match()` that
    anything matched. Each returns the status. When saved values went unused and none of these
    ran, the status warns as it is discarded, unless `expect_partial()` was called.

    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = tg.train.Checkpoint(a=tg.Variable(1.0), b=tg.Variable(2.0)).save(
    ...     os.path.join(tmp.name, "ckpt"))
    >>> status = tg.train.Checkpoint(a=tg.Variable(0.0)).restore(path)
    >>> status.unused_values
    ['b']
    >>> _ = status.expect_partial()
    >>> tmp.cleanup()
    """

    def __init__(self, save_path, missing, unused, matched):
        self.save_path = save_path
        self.unmatched_objects = list(missing)
        self.unused_values = list(unused)
        self._matched = matched
        self._checked = False

    def assert_consumed(self):
        """Raises AssertionError unless every saved value and every object matched."""
        self._checked = True
        self._require_path()
        problems = []
        if self.unused_values:
            problems.append(f"values in the checkpoint with no object to restore into: "
                            f"{self.unused_values}")
        if self.unmatched_objects:
            problems.append(f"objects with no value in the checkpoint: "
                            f"{self.unmatched_objects}")
        if problems:
            raise AssertionError(f"Checkpoint {self.save_path!r} was not consumed: "
                                 + "; ".join(problems) + " (a layer creates its variables on "
                                 "its first call: call a fresh model once before restoring)")
        return self

    def assert_existing_objects_matched(self):
        """Raises AssertionError if an object of the checkpoint had no saved value."""
        self._checked = True
        self._require_path()
        if self.unmatched_objects:
            raise AssertionError(f"Checkpoint {self.save_path!r}: objects with no value in "
                                 f"the checkpoint: {self.unmatched_objects}")
        return self

    def assert_nontrivial_match(self):
        """Raises AssertionError if no saved value was restored (`save_counter`s aside)."""
        self._checked = True
        self._require_path()
        if not self._matched:
            raise AssertionError(f"Checkpoint {self.save_path!r}: nothing matched (is this the "
                                 "checkpoint of this model?)")
        return self

    def expect_partial(self):
        """Silences the warning about unused saved values; returns the status."""
        self._checked = True
        return self

    def _require_path(self):
        if self.save_path is None:
            raise AssertionError("No checkpoint specified (save_path=None); nothing is being "
                                 "restored.")

    def __del__(self):
        if not getattr(self, "_checked", True) and self.unused_values:
            warnings.warn(f"tg.train.Checkpoint: values of {self.save_path!r} were not "
                          f"restored (no object at their paths): {self.unused_values[:10]}"
                          f"{' ...' if len(self.unused_values) > 10 else ''}; call "
                          "status.expect_partial() if that is intended", UserWarning)

    def __repr__(self):
        return f"<CheckpointLoadStatus {self.save_path!r}: {self._matched} restored, " \
               f"{len(self.unused_values)} unused, {len(self.unmatched_objects)} unmatched>"


# -- CheckpointManager -----------------------------------------------------------------------
class CheckpointManager:
    """Numbers, keeps and deletes checkpoints in a directory (TF's `tf.train.CheckpointManager`).

    `save()` writes `<directory>/<checkpoint_name>-<n>` (n = the checkpoint's `save_counter`, or
    `checkpoint_number`), records it in the directory's `checkpoint` state file and deletes the
    oldest checkpoints beyond `max_to_keep` (None keeps all). With
    `keep_checkpoint_every_n_hours`, a checkpoint at least that many hours newer than the last
    one preserved is kept on disk (no longer listed) instead of deleted. A manager created on a
    directory with a state file resumes from it.

    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> ckpt = tg.train.Checkpoint(v=tg.Variable(0.0))
    >>> manager = tg.train.CheckpointManager(ckpt, tmp.name, max_to_keep=2)
    >>> paths = [manager.save() for _ in range(3)]
    >>> [os.path.basename(p) for p in manager.checkpoints]
    ['ckpt-2', 'ckpt-3']
    >>> manager.latest_checkpoint == paths[-1] == tg.train.latest_checkpoint(tmp.name)
    True
    >>> tmp.cleanup()
    """

    def __init__(self, checkpoint, directory, max_to_keep, keep_checkpoint_every_n_hours=None,
                 checkpoint_name="ckpt"):
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"tg.train.CheckpointManager: checkpoint must be a "
                            f"tg.train.Checkpoint, got {type(checkpoint).__name__}")
        if max_to_keep is not None and (not isinstance(max_to_keep, numbers.Integral) or
                                        isinstance(max_to_keep, bool) or max_to_keep <= 0):
            raise ValueError(f"tg.train.CheckpointManager: expected a positive integer or None "
                             f"for max_to_keep, got {max_to_keep!r}")
        if keep_checkpoint_every_n_hours is not None and \
                not keep_checkpoint_every_n_hours > 0:
            raise ValueError(f"tg.train.CheckpointManager: keep_checkpoint_every_n_hours must "
                             f"be positive or None, got {keep_checkpoint_every_n_hours!r}")
        if not isinstance(checkpoint_name, str) or not checkpoint_name or \
                os.sep in checkpoint_name:
            raise ValueError(f"tg.train.CheckpointManager: checkpoint_name must be a file name, "
                             f"got {checkpoint_name!r}")
        self._checkpoint = checkpoint
        self._directory = os.fspath(directory)
        self._max_to_keep = max_to_keep
        self._every_n_hours = keep_checkpoint_every_n_hours
        self._prefix = os.path.join(self._directory, checkpoint_name)
        self._kept = collections.OrderedDict()  # prefix -> timestamp, oldest first
        now = time.time()
        state = _read_state(self._directory)
        if state is None:
            self._latest = None
            self._last_preserved = now - 1.0  # TF: a quickly re-created manager keeps its first
        else:
            latest = state["model_checkpoint_path"]
            self._latest = _absolute(self._directory, latest) if latest else None
            last = state["last_preserved_timestamp"]
            self._last_preserved = min(now, last) if last is not None else now - 1.0
            paths = state["all_model_checkpoint_paths"]
            stamps = state["all_model_checkpoint_timestamps"] or \
                [self._last_preserved] * len(paths)
            for p, t in zip(paths, stamps):
                t = min(t, now)
                if t > self._last_preserved or last is None:
                    self._kept[_absolute(self._directory, p)] = t

    @property
    def directory(self):
        """The directory the checkpoints are written to."""
        return self._directory

    @property
    def checkpoint(self):
        """The `tg.train.Checkpoint` this manager saves."""
        return self._checkpoint

    @property
    def latest_checkpoint(self):
        """The prefix of the newest checkpoint (None before the first), for `restore`."""
        return self._latest

    @property
    def checkpoints(self):
        """The prefixes of the kept checkpoints, oldest first."""
        return list(self._kept)

    def save(self, checkpoint_number=None):
        """Writes a checkpoint, updates the state file, deletes the oldest beyond
        `max_to_keep`, and returns the new checkpoint's prefix.

        `checkpoint_number` (an integer, or an integer variable such as a step counter) numbers
        the file instead of `save_counter` (which counts the call either way).

        >>> import os, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> manager = tg.train.CheckpointManager(tg.train.Checkpoint(v=tg.Variable(0.0)),
        ...                                      tmp.name, max_to_keep=1)
        >>> os.path.basename(manager.save(checkpoint_number=100))
        'ckpt-100'
        >>> tmp.cleanup()
        """
        counter = self._checkpoint._save_counter
        _set_counter(counter, _counter_value(counter) + 1)
        number = _counter_value(counter) if checkpoint_number is None else \
            _checkpoint_number(checkpoint_number)
        path = self._checkpoint.write(f"{self._prefix}-{number}")
        self._kept.pop(path, None)  # saved again: it moves to the end
        self._kept[path] = time.time()
        self._latest = path
        # the new checkpoint is recorded before anything is deleted, then again without them
        self._record_state()
        if self._sweep():
            self._record_state()
        return path

    def restore_or_initialize(self):
        """Restores the latest checkpoint and returns its prefix, or returns None when there
        is none (the objects keep their initial values).

        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> manager = tg.train.CheckpointManager(tg.train.Checkpoint(v=tg.Variable(0.0)),
        ...                                      tmp.name, max_to_keep=1)
        >>> manager.restore_or_initialize() is None
        True
        >>> tmp.cleanup()
        """
        if self._latest is None:
            return None
        self._checkpoint.restore(self._latest)
        return self._latest

    def _sweep(self):
        deleted = False
        if not self._max_to_keep:
            return deleted
        while len(self._kept) > self._max_to_keep:
            path, stamp = self._kept.popitem(last=False)
            deleted = True
            if self._every_n_hours and \
                    stamp - self._every_n_hours * 3600.0 >= self._last_preserved:
                self._last_preserved = stamp  # kept on disk, no longer listed (as TF)
                continue
            try:
                os.remove(_file(path))
            except FileNotFoundError:
                pass
        return deleted

    def _record_state(self):
        _write_state(self._directory, self._latest, list(self._kept),
                     list(self._kept.values()), self._last_preserved)

    def __repr__(self):
        return f"<tg.train.CheckpointManager {self._directory!r}: {len(self._kept)} kept, " \
               f"latest {self._latest!r}>"


def _checkpoint_number(n):
    if isinstance(n, (Variable, Tensor)):
        arr = n._value._data if isinstance(n, Variable) else n._data
        dev = n._value._dev if isinstance(n, Variable) else n._dev
        arr = np.asarray(dev.to_numpy(arr))
        if arr.ndim == 0 and arr.dtype.kind in "iu":
            return int(arr)
    elif isinstance(n, numbers.Integral) and not isinstance(n, bool):
        return int(n)
    raise TypeError(f"tg.train.CheckpointManager.save: checkpoint_number must be an integer or "
                    f"a scalar integer variable, got {n!r}")
