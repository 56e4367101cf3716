"""tg.saved_model: save an object's variables and tg.function graphs; load and replay them
without the object's Python code.

A trained MLP loaded in a fresh process (which never sees its class) gives the original's
outputs and gradients bit for bit; every op of the spec table round-trips (forward and traced
gradient, bit for bit); multiple signatures, guards, assignments and Python outputs survive;
loading on cuda_emu runs there; damaged, truncated and foreign files and unknown ops raise
ValueError naming the file (and the op and version); graphs that cannot be saved raise
ValueError naming the function and the node. Every test runs on each device.
"""
import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
import zipfile

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.function import saved_model as sm
from tapegpu.testing.op_specs import SPECS, sample


def _bits(x):
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x).tobytes()


class MLP(tg.Module):
    def __init__(self):
        super().__init__()
        self.hidden = tg.layers.Dense(16, activation="gelu")
        self.out = tg.layers.Dense(3)

    @tg.function(input_signature=[tg.TensorSpec([None, 5], tg.float32)])
    def __call__(self, x):
        return self.out(self.hidden(x))


X = np.random.default_rng(1).standard_normal((8, 5)).astype(np.float32)
Y = np.random.default_rng(2).standard_normal((8, 3)).astype(np.float32)


def _trained_mlp():
    model = MLP()
    opt = tg.optimizers.Adam(1e-2)
    for _ in range(3):
        with tg.GradientTape() as tape:
            loss = tg.reduce_mean((model(tg.constant(X)) - tg.constant(Y)) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))
    return model


def _outputs_and_grads(f, variables, x):
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
        loss = tg.reduce_sum(y * y)
    grads = tape.gradient(loss, [x] + list(variables))
    return [y] + grads


SUPPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support")
CHILD = textwrap.dedent("""
    import sys
    if sys.argv[2] == "cuda_sim":  # the CuPy stand-in, installed as in the test process
        sys.path.insert(0, sys.argv[5])
        import cupy_sim
        cupy_sim.install()
        sys.argv[2] = "gpu:0"
    import numpy as np
    import tapegpu as tg
    tg.config.experimental.enable_tensor_float_32_execution(False)  # as the tests (conftest.py)
    export_dir, device, data, out = sys.argv[1:5]
    with tg.device(device):
        loaded = tg.saved_model.load(export_dir)
        x = tg.constant(np.load(data)["x"])
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = loaded(x)
            loss = tg.reduce_sum(y * y)
        grads = tape.gradient(loss, [x] + loaded.trainable_variables)
        assert "MLP" not in dir(sys.modules["__main__"])
        np.savez(out, y=y.numpy(), device=y.device,
                 names=np.array([v.name for v in loaded.trainable_variables]),
                 **{f"g{i}": g.numpy() for i, g in enumerate(grads)})
""")


def test_trained_mlp_loads_in_a_fresh_process_bit_for_bit(tmp_path, tg_device):
    model = _trained_mlp()
    x = tg.constant(X[:4])
    expected = _outputs_and_grads(model, model.trainable_variables, x)
    tg.saved_model.save(model, tmp_path / "mlp")
    assert os.path.isfile(tmp_path / "mlp" / "saved_model.npz")
    np.savez(tmp_path / "data.npz", x=X[:4])
    device = "cpu" if tg_device == "numpy" else tg_device
    subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "mlp"), device,
                    str(tmp_path / "data.npz"), str(tmp_path / "out.npz"), SUPPORT], check=True,
                   timeout=120, cwd=str(tmp_path))
    got = np.load(tmp_path / "out.npz")
    assert _bits(got["y"]) == _bits(expected[0])
    for i, g in enumerate(expected[1:]):
        assert got[f"g{i}"].shape == tuple(g.shape)
        assert _bits(got[f"g{i}"]) == _bits(g), i
    assert list(got["names"]) == [v.name for v in model.trainable_variables]
    assert str(got["device"]) == x.device


def test_loaded_object_has_variables_at_their_paths(tmp_path):
    model = _trained_mlp()
    model.stats = [tg.Variable(1.5, trainable=False), (tg.Variable([1, 2]),)]
    model.table = {"a": tg.Variable(2.0)}
    tg.saved_model.save(model, tmp_path)
    loaded = tg.saved_model.load(tmp_path)
    assert _bits(loaded.hidden.kernel) == _bits(model.hidden.kernel)
    assert _bits(loaded.out.bias) == _bits(model.out.bias)
    assert isinstance(loaded.stats, list) and isinstance(loaded.stats[1], tuple)
    assert _bits(loaded.stats[1][0]) == _bits(model.stats[1][0])
    assert float(loaded.table["a"]) == 2.0
    assert [v.name for v in loaded.variables] == [v.name for v in model.variables]
    assert [v.trainable for v in loaded.variables] == [v.trainable for v in model.variables]
    assert len(loaded.trainable_variables) == len(model.trainable_variables)
    # the loaded object checkpoints at the original's paths
    path = tg.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    tg.train.Checkpoint(model=loaded).read(path).assert_consumed()


def test_load_on_cuda_emu_runs_there(tmp_path, tg_device):
    model = _trained_mlp()
    x = X[:2]
    expected = model(tg.constant(x)).numpy()
    tg.saved_model.save(model, tmp_path)
    with tg.device("cuda_emu"):
        loaded = tg.saved_model.load(tmp_path)
        y = loaded(x)
        assert all("CUDA_EMU" in v.device for v in loaded.variables)
    assert "CUDA_EMU" in y.device
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-6)
    if tg_device != "cuda_emu":  # an argument on another device: a clear error
        with pytest.raises(ValueError, match="was loaded on .*CUDA_EMU.*tg.device"):
            loaded(tg.constant(x))


def test_multiple_signatures_and_functions(tmp_path, tg_device):
    class Net(tg.Module):
        def __init__(self):
            super().__init__()
            self.w = tg.Variable([[1.0, -2.0], [0.5, 3.0]])

        @tg.function
        def apply(self, x, scale=2.0):
            return {"y": tg.matmul(x, self.w) * scale, "n": 7}

        @tg.function(input_signature=[tg.TensorSpec([None], tg.int32)])
        def pick(self, i):
            return tg.gather(self.w, i)

    net = Net()
    x1 = tg.constant(np.ones((3, 2), np.float32))
    x2 = tg.constant(np.arange(4, dtype=np.float64).reshape(2, 2))
    outs = [net.apply(x1), net.apply(x1, scale=3.0), net.pick(np.array([1, 0, 1], np.int32))]
    with pytest.raises((TypeError, ValueError)):
        net.apply(x2)  # float64 @ float32: the function is not traced for it
    sigs = {"apply_1": net.apply.get_concrete_function(x1), "pick": net.pick}
    tg.saved_model.save(net, tmp_path, signatures=sigs)
    loaded = tg.saved_model.load(tmp_path)
    assert sorted(loaded.signatures) == ["apply_1", "pick"]
    got = [loaded.apply(x1), loaded.apply(x1, scale=3.0), loaded.pick(np.array([1, 0, 1], np.int32))]
    for a, b in zip(got[:2], outs[:2]):
        assert a["n"] == b["n"] == 7 and _bits(a["y"]) == _bits(b["y"])
    assert _bits(got[2]) == _bits(outs[2])
    assert _bits(loaded.signatures["apply_1"](x1)["y"]) == _bits(outs[0]["y"])
    assert len(loaded.signatures["apply_1"].concrete_functions) == 1
    assert _bits(loaded.signatures["pick"](np.array([1, 0, 1], np.int32))) == _bits(outs[2])
    with pytest.raises(TypeError, match="could not find a matching concrete function"):
        loaded.apply(x1, scale=4.0)  # a Python value that was never traced
    with pytest.raises(ValueError, match="shape=\\(3,\\)"):
        loaded.pick(np.array([1, 0], np.int32))  # another length: no graph for it
    # the default signature name, for a single function
    tg.saved_model.save(net, tmp_path / "one", signatures=net.pick)
    assert list(tg.saved_model.load(tmp_path / "one").signatures) == ["serving_default"]


def test_guards_assignments_and_prints_round_trip(tmp_path, capsys):
    class Counter(tg.Module):
        def __init__(self):
            super().__init__()
            self.count = tg.Variable(0.0)

        @tg.function
        def step(self, x):
            self.count.assign_add(1.0)
            tg.print("count", self.count, output_stream=sys.stdout)
            if tg.reduce_sum(x) > 0:
                return x * 2.0
            return x - 1.0

    c = Counter()
    pos, neg = tg.constant([1.0, 2.0]), tg.constant([-1.0, -2.0])
    c.step(pos), c.step(neg)
    tg.saved_model.save(c, tmp_path)
    capsys.readouterr()
    loaded = tg.saved_model.load(tmp_path)
    assert float(loaded.count) == 2.0
    assert loaded.step(pos).numpy().tolist() == [2.0, 4.0]
    assert loaded.step(neg).numpy().tolist() == [-2.0, -3.0]
    assert float(loaded.count) == 4.0  # the failed guard undid its assignment
    assert capsys.readouterr().out == "count 3.0\ncount 4.0\n"


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_every_op_round_trips(spec, tmp_path, tg_device):
    if spec.name == "read_variable":
        pytest.skip("reads a variable outside the saved object (tested below)")
    if spec.name == "dropout":
        pytest.skip("draws random values: save refuses it (tested below)")
    xs = [tg.constant(a) for a in sample(spec, np.float64)]

    def body(*args):
        if not spec.grad:
            return spec.fn(*args)
        with tg.GradientTape() as tape:
            tape.watch(args)
            y = spec.fn(*args)
            loss = tg.reduce_sum(tg.nest.flatten(y)[0])
        return y, tape.gradient(loss, list(args))

    holder = tg.Module()
    holder.f = tg.function(body)
    expected = tg.nest.flatten(holder.f(*xs))
    tg.saved_model.save(holder, tmp_path)
    got = tg.nest.flatten(tg.saved_model.load(tmp_path).f(*xs))
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        if b is None:
            assert a is None
        else:
            assert a.shape == b.shape and a.dtype == b.dtype and _bits(a) == _bits(b)


# -- what cannot be saved --------------------------------------------------------------------
def test_optimizer_update_cannot_be_saved(tmp_path):
    model = MLP()
    opt = tg.optimizers.SGD(0.1)
    model(tg.constant(X))

    @tg.function
    def train_step(x):
        with tg.GradientTape() as tape:
            loss = tg.reduce_sum(model(x))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))
        return loss

    train_step(tg.constant(X))
    model.train_step = train_step
    with pytest.raises(ValueError, match="attribute 'train_step' \\(tg.function train_step\\) "
                                         "cannot be saved: node `update .*optimizer update"):
        tg.saved_model.save(model, tmp_path)
    assert not os.path.exists(tmp_path / "saved_model.npz")


def test_custom_gradient_cannot_be_saved(tmp_path):
    @tg.custom_gradient
    def clipped(x):
        return x * 1.0, lambda g: tg.clip_by_value(g, -1.0, 1.0)

    holder = tg.Module()
    holder.f = tg.function(lambda x: clipped(x) * 2.0)
    holder.f(tg.constant([1.0]))
    with pytest.raises(ValueError, match="tg.function <lambda>\\) cannot be saved: .*custom_"):
        tg.saved_model.save(holder, tmp_path)


def test_untracked_variable_cannot_be_saved(tmp_path):
    outside = tg.Variable(2.0, name="outside")
    holder = tg.Module()
    holder.f = tg.function(lambda x: x * outside)
    holder.f(tg.constant([1.0]))
    with pytest.raises(ValueError, match="node `%1 = read 'outside'.*not reachable"):
        tg.saved_model.save(holder, tmp_path)


def test_an_untraced_function_is_saved_without_graphs_with_a_warning(tmp_path):
    """As TF saves a never-traced tf.function without concrete functions: the save warns, the
    variables are saved, and the loaded function raises when called; as a signature, an
    untraced function cannot be saved. A function whose input_signature has unknown
    dimensions is not traced at save (no one graph serves it) and says so."""
    holder = tg.Module()
    holder.v = tg.Variable(2.0)
    holder.f = tg.function(lambda x: x * holder.v)
    with pytest.warns(UserWarning, match=r"\['f'\] were never traced"):
        tg.saved_model.save(holder, tmp_path / "h")
    assert float(tg.saved_model.load(tmp_path / "h").v) == 2.0
    model = MLP()
    with pytest.warns(UserWarning, match=r"__call__ was never called and its input_signature "
                                         r".*unknown dimensions, so it is saved without"):
        tg.saved_model.save(model, tmp_path / "m")
    loaded = tg.saved_model.load(tmp_path / "m")
    with pytest.raises(ValueError, match="__call__ was saved without graphs"):
        loaded(tg.ones((2, 5)))
    with pytest.warns(UserWarning, match="never called"), \
            pytest.raises(ValueError, match="tg.function __call__ .*has not been traced"):
        tg.saved_model.save(model, tmp_path / "s", signatures=model.__call__)


class _Counter(tg.Module):
    """TF's SavedModel guide's module: `mutate` has an input_signature and is never called
    before the save."""

    def __init__(self):
        super().__init__()
        self.v = tg.Variable(1.0)

    @tg.function(input_signature=[tg.TensorSpec([2], tg.float32)])
    def __call__(self, x):
        return x * self.v

    @tg.function(input_signature=[tg.TensorSpec([], tg.float32)])
    def mutate(self, new_v):
        self.v.assign(new_v)
        return self.v * 2.0


def test_functions_with_an_input_signature_are_traced_at_save_as_tensorflow(tmp_path,
                                                                              tg_device):
    """TF traces a tf.function's input_signature when it saves it: the loaded object's
    functions work though the original's were never called. Tracing runs the function
    (tapegpu traces by running it) but leaves the saved object's variables as they were."""
    import warnings
    m = _Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tg.saved_model.save(m, tmp_path / "m")
    assert float(m.v) == 1.0  # the traced assign of zeros was undone
    loaded = tg.saved_model.load(tmp_path / "m")
    assert loaded(tg.constant([1.0, 2.0])).numpy().tolist() == [1.0, 2.0]
    assert float(loaded.mutate(tg.constant(3.0))) == 6.0
    assert float(loaded.v) == 3.0 and float(m.v) == 1.0
    assert loaded(tg.constant([1.0, 2.0])).numpy().tolist() == [3.0, 6.0]
    # as a signature too
    m2 = _Counter()
    tg.saved_model.save(m2, tmp_path / "s", signatures={"serve": m2.__call__})
    served = tg.saved_model.load(tmp_path / "s").signatures["serve"]
    assert served(tg.constant([2.0, 4.0])).numpy().tolist() == [2.0, 4.0]


def test_a_signature_whose_trace_fails_is_saved_without_graphs_naming_the_error(tmp_path):
    holder = tg.Module()
    holder.v = tg.Variable(1.0)

    def bad(x):
        raise RuntimeError("no trace today")
    holder.f = tg.function(bad, input_signature=[tg.TensorSpec([3], tg.float32)])
    with pytest.warns(UserWarning, match="tracing bad on its input_signature raised "
                                         "RuntimeError: no trace today"):
        tg.saved_model.save(holder, tmp_path / "h")
    assert float(tg.saved_model.load(tmp_path / "h").v) == 1.0


# -- damaged files ---------------------------------------------------------------------------
def _saved(tmp_path):
    model = _trained_mlp()
    tg.saved_model.save(model, tmp_path / "m")
    return tmp_path / "m" / "saved_model.npz"


def test_truncated_file_raises_a_clear_error(tmp_path):
    file = _saved(tmp_path)
    data = file.read_bytes()
    file.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=f"cannot read SavedModel '{file}'.*truncated"):
        tg.saved_model.load(tmp_path / "m")


def test_corrupted_array_raises_a_clear_error(tmp_path):
    file = _saved(tmp_path)
    data = bytearray(file.read_bytes())
    with zipfile.ZipFile(file) as zf:
        info = zf.getinfo("variables/hidden/kernel.npy")
    at = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.file_size - 8
    data[at] ^= 0xFF
    file.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"cannot read SavedModel '{file}': the array of "
                                         "'variables/hidden/kernel' is damaged"):
        tg.saved_model.load(tmp_path / "m")


def _rewrite_index(file, change):
    with zipfile.ZipFile(file) as zf:
        members = [(n, zf.read(n)) for n in zf.namelist()]
    index = json.loads(members[0][1])
    change(index)
    with zipfile.ZipFile(file, "w") as zf:
        zf.writestr("index.json", json.dumps(index))
        for n, b in members[1:]:
            zf.writestr(n, b)


def test_unknown_op_names_the_op_and_the_saving_version(tmp_path):
    file = _saved(tmp_path)

    def rename(index):
        index["tapegpu_version"] = "9.9.9"
        node = next(n for n in index["graphs"][0]["nodes"] if n["kind"] == "op")
        node["op"] = "fancy_new_op"
    _rewrite_index(file, rename)
    with pytest.raises(ValueError, match="uses op 'fancy_new_op', which this tapegpu .* does "
                                         "not have \\(the file was saved by tapegpu 9.9.9\\)"):
        tg.saved_model.load(tmp_path / "m")


def test_foreign_and_missing_files(tmp_path):
    path = tg.train.Checkpoint(v=tg.Variable(1.0)).write(str(tmp_path / "ckpt"))
    with pytest.raises(ValueError, match="does not describe a tapegpu-saved-model file"):
        tg.saved_model.load(path + ".npz")
    file = _saved(tmp_path)
    _rewrite_index(file, lambda index: index["graphs"][0].pop("nodes"))
    with pytest.raises(ValueError, match="cannot read SavedModel .* is malformed"):
        tg.saved_model.load(tmp_path / "m")
    with pytest.raises(FileNotFoundError, match="no SavedModel at"):
        tg.saved_model.load(tmp_path / "nothing")


def test_random_draws_are_refused_with_a_clear_error(tmp_path):
    holder = tg.Module()
    holder.f = tg.function(lambda x: x + tg.random.normal((2,)))
    holder.f(tg.zeros((2,)))
    with pytest.raises(ValueError, match="random.normal.*random draw"):
        tg.saved_model.save(holder, tmp_path)
    assert not os.path.exists(os.path.join(tmp_path, "saved_model.npz"))


def test_a_loaded_function_takes_nested_lists_for_tensors_as_tensorflow(tmp_path, tg_device):
    """TF's guide calls a loaded module with `[[2.0, 2.0, 2.0]]`: a list of Python floats is
    the float32 tensor it would convert to; lists that convert to another dtype or shape do
    not match (no cast), and neither does a float64 array."""
    class Net(tg.Module):
        def __init__(self):
            super().__init__()
            self.w = tg.Variable([[1.0], [-2.0], [0.5]])

        @tg.function
        def __call__(self, x):
            return tg.matmul(x, self.w)

    net = Net()
    want = net(tg.constant([[2.0, 2.0, 3.0]]))
    tg.saved_model.save(net, tmp_path)
    loaded = tg.saved_model.load(tmp_path)
    got = loaded([[2.0, 2.0, 3.0]])
    assert got.dtype == tg.float32 and _bits(got) == _bits(want)
    assert _bits(loaded(np.array([[2.0, 2.0, 3.0]], np.float32))) == _bits(want)
    for bad in ([[2, 2, 3]], [[2.0, 2.0]], [2.0, 2.0, 3.0], np.array([[2.0, 2.0, 3.0]]),
                [["a", "b", "c"]]):
        with pytest.raises(TypeError, match="could not find a matching concrete function"):
            loaded(bad)


def test_save_and_load_take_tensorflows_options(tmp_path):
    """SaveOptions/LoadOptions are accepted (the advanced-autodiff guide passes
    experimental_custom_gradients=True); a custom gradient is still refused, by name."""
    @tg.custom_gradient
    def clip_gradients(y):
        def backward(dy):
            return tg.clip_by_norm(dy, 0.5)
        return y, backward

    class M(tg.Module):
        def __init__(self):
            super().__init__()
            self.w = tg.Variable(2.0)

        @tg.function
        def plain(self, x):
            return x * self.w

        @tg.function
        def clipped(self, x):
            return clip_gradients(x)

    m = M()
    m.plain(tg.constant(1.0))
    m.clipped(tg.constant(1.0))
    options = tg.saved_model.SaveOptions(experimental_custom_gradients=True)
    with pytest.raises(ValueError, match="'clip_gradients', a per-call op"):
        tg.saved_model.save(m, tmp_path / "clipped", options=options)
    del M.clipped  # the module without it saves
    tg.saved_model.save(m, tmp_path / "plain", options=options)
    loaded = tg.saved_model.load(tmp_path / "plain", options=tg.saved_model.LoadOptions())
    assert float(loaded.plain(tg.constant(3.0))) == 6.0
    with pytest.raises(TypeError, match="options must be a tg.saved_model.SaveOptions"):
        tg.saved_model.save(m, tmp_path / "x", options={"experimental_custom_gradients": True})


# -- what the index names: checked before it is used ------------------------------------------
def _small(tmp_path):
    """A saved object with a variable, a list, a dict and a function; the file's path."""
    m = tg.Module()
    m.w = tg.Variable([1.0, 2.0])
    m.stats = [tg.Variable(1.5)]
    m.table = {"a": tg.Variable(2.0)}
    m.f = tg.function(lambda x: x * m.w + 1.0)
    m.f(tg.constant([3.0, 4.0]))
    tg.saved_model.save(m, tmp_path / "m")
    return tmp_path / "m" / "saved_model.npz"


def _rewrite(file, change):
    """Rewrites the file's index with `change(index, members)`, which may also change the
    members ({name: bytes})."""
    with zipfile.ZipFile(file) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    index = json.loads(members.pop("index.json"))
    change(index, members)
    with zipfile.ZipFile(file, "w") as zf:
        zf.writestr("index.json", json.dumps(index))
        for n, b in members.items():
            zf.writestr(n, b)


def _move_value(old, new):
    def change(index, members):
        entry = next(e for e in index["values"] if e["path"] == old)
        entry["path"] = new
        members[new + ".npy"] = members.pop(old + ".npy")
    return change


def _refused(file, what):
    return pytest.raises(ValueError, match=f"tg.saved_model.load: cannot read SavedModel "
                                           f"'{file}': .*{what}")


def test_list_positions_are_checked_and_bounded_before_any_list_is_made(tmp_path):
    file = _small(tmp_path)
    data = file.read_bytes()
    assert [v.numpy() for v in tg.saved_model.load(file).stats] == [1.5]
    for position in ("-1", "x", "07", "1.0", "٣"):
        file.write_bytes(data)
        _rewrite(file, _move_value("variables/stats/0", f"variables/stats/{position}"))
        with _refused(file, f"'{position}' is not a list position"):
            tg.saved_model.load(file)
    # a position in a 1 KB file sized a Python list: bounded in all, before any list is made
    file.write_bytes(data)
    _rewrite(file, _move_value("variables/stats/0", "variables/stats/20000000"))
    tracemalloc.start()
    try:
        with _refused(file, "its lists would hold 20000001 items .* at most 1048576 in all"):
            tg.saved_model.load(file)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2 ** 20
    # holes below the bound are None, as in TensorFlow's loaded lists
    file.write_bytes(data)
    _rewrite(file, _move_value("variables/stats/0", "variables/stats/2"))
    stats = tg.saved_model.load(file).stats
    assert stats[:2] == [None, None] and float(stats[2]) == 1.5


def test_attribute_names_from_the_index_are_checked(tmp_path):
    file = _small(tmp_path)
    data = file.read_bytes()
    for name in ("__class__", "__dict__", "variables", "signatures", "_variables", "name",
                 "__call__"):
        file.write_bytes(data)
        _rewrite(file, _move_value("variables/table/a", f"variables/{name}"))
        with _refused(file, f"'{name}' cannot be an attribute of the loaded object"):
            tg.saved_model.load(file)
    for segment in ("a%41", "%2fx", "x%2Ey", "x%2"):  # escapes save never writes
        file.write_bytes(data)
        _rewrite(file, _move_value("variables/table/a", f"variables/{segment}"))
        with _refused(file, f"'{segment}' is not a path segment save writes"):
            tg.saved_model.load(file)
    file.write_bytes(data)
    _rewrite(file, _move_value("variables/table/a", "weights/a"))
    with _refused(file, "the path of variable 'weights/a' is not under 'variables/'"):
        tg.saved_model.load(file)
    file.write_bytes(data)
    _rewrite(file, _move_value("variables/table/a", "variables/stats"))
    with _refused(file, "'stats' is both a variable and a container"):
        tg.saved_model.load(file)
    for function in ("_variables", "variables", "__init__", "w"):
        file.write_bytes(data)
        _rewrite(file, lambda index, members: index["functions"].update(
            {function: index["functions"].pop("f")}))
        with _refused(file, f"function '{function}' cannot be an attribute of the loaded"):
            tg.saved_model.load(file)
    file.write_bytes(data)
    _rewrite(file, lambda index, members: index["objects"].append(
        {"path": "stats", "kind": "set", "type": "set"}))
    with _refused(file, "its objects hold a malformed entry"):
        tg.saved_model.load(file)
    # names save writes for odd keys load back
    m = tg.Module()
    m.table = {"a/b": tg.Variable(1.0), ".hidden": tg.Variable(2.0), "": tg.Variable(3.0),
               "%": tg.Variable(4.0)}
    tg.saved_model.save(m, tmp_path / "odd")
    assert {k: float(v) for k, v in tg.saved_model.load(tmp_path / "odd").table.items()} == \
        {"a/b": 1.0, ".hidden": 2.0, "": 3.0, "%": 4.0}


def _graph_change(field, value):
    def change(index, members):
        g = index["graphs"][0]
        g[field] = value(g) if callable(value) else value
    return change


def test_graph_fields_are_checked_before_use(tmp_path):
    file = _small(tmp_path)
    data = file.read_bytes()
    read = {"kind": "read", "ins": [], "out": 1}
    changes = {
        "'inputs' are not value ids": _graph_change("inputs", [999]),
        "'input_names' are not a name per input": _graph_change("input_names", []),
        "'outputs' hold \\['v', 999\\]": _graph_change("outputs", [["v", 999]]),
        "'values' are not \\[label, shape, dtype name\\] triples":
            _graph_change("values", lambda g: g["values"][:-1] + [["op", [2], "object"]]),
        "'constants' hold \\[0, 'nope'\\]": _graph_change("constants", [[0, "nope"]]),
        "it uses no variable of the file":
            _graph_change("nodes", lambda g: [dict(read, variable="nope")] + g["nodes"][1:]),
        "its inputs are not value ids":
            _graph_change("nodes", lambda g: [dict(read, variable="w", ins=["a"])]),
        "'args' hold 0 tensors for 1 inputs": _graph_change("args", []),
        "'parameters' are not \\[name, kind\\] pairs":
            _graph_change("parameters", [["x", ["positional"]]]),
        "'arg_structure' is not \\[positional, keyword\\] nesting its 1 arguments":
            _graph_change("arg_structure", [[{"type": "leaf"}], [{"type": "leaf"}]]),
        "'structure' does not nest its 1 outputs":
            _graph_change("structure", [{"type": "leaf"}, {"type": "leaf"}]),
        "traced_nodes, merged and dropped counts": _graph_change("merged", "0"),
    }
    for what, change in changes.items():
        file.write_bytes(data)
        _rewrite(file, change)
        with _refused(file, f"function '<lambda>' is malformed.*{what}"):
            tg.saved_model.load(file)
    file.write_bytes(data)  # params decode to bool, integer, float and complex dtypes only
    _rewrite(file, _graph_change("nodes", lambda g: g["nodes"][:1] + [dict(
        g["nodes"][1], params={"dtype": {"type": "dtype", "name": "object"}})] + g["nodes"][2:]))
    with _refused(file, "a malformed value .*not a bool, integer, float or complex dtype"):
        tg.saved_model.load(file)
    file.write_bytes(data)
    _rewrite(file, _graph_change("params", 1))  # a field save does not write: ignored
    assert tg.saved_model.load(file).f(tg.constant([3.0, 4.0])).numpy().tolist() == [4.0, 9.0]


def test_an_index_nested_too_deeply_is_refused_naming_the_file(tmp_path):
    file = _small(tmp_path)
    _rewrite(file, _graph_change("structure", json.loads("[" * 500 + "]" * 500)))
    with _refused(file, "is malformed"):
        tg.saved_model.load(file)
    with zipfile.ZipFile(file) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    deep = "[" * 100000 + "]" * 100000
    with zipfile.ZipFile(file, "w") as zf:
        zf.writestr("index.json", members.pop("index.json").replace(
            b'"objects":', b'"deep": ' + deep.encode() + b', "objects":'))
        for n, b in members.items():
            zf.writestr(n, b)
    with _refused(file, "its index.json is nested too deeply"):
        tg.saved_model.load(file)


def _npy(shape, data, descr="<f4"):
    d = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    d += b" " * (-(len(d) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(d).to_bytes(2, "little") + d + data


def test_array_sizes_are_checked_before_anything_is_allocated(tmp_path):
    file = _small(tmp_path)
    data = file.read_bytes()

    def claim(index_shape, header_shape):
        def change(index, members):
            entry = next(e for e in index["values"] if e["path"] == "variables/w")
            entry["shape"] = index_shape
            members["variables/w.npy"] = _npy(header_shape, b"\0" * 8)
        return change
    for index_shape, header_shape, what in (
            ([10 ** 8], (10 ** 8,), "the array of 'variables/w' is damaged \\(ValueError: the "
                                    "header claims 400000000 bytes of data"),
            ([2], (10 ** 8,), "the array of 'variables/w' is float32 of shape \\(100000000,\\) "
                              "but the index says float32 of shape \\(2,\\)")):
        file.write_bytes(data)
        _rewrite(file, claim(index_shape, header_shape))
        tracemalloc.start()
        try:
            with _refused(file, what):
                tg.saved_model.load(file)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 16 * 2 ** 20


def test_load_runs_no_op_of_the_file(tmp_path):
    """Making a replay plan folds the ops on constants alone, with the file's params: that
    happens at the first call of a loaded function, not at load."""
    file = _small(tmp_path)

    def tile_a_constant(index, members):
        g = index["graphs"][0]
        constant = g["constants"][0][0]
        g["values"].append(["op", [1], "float32"])
        g["nodes"].append({"kind": "op", "ins": [constant], "op": "tile", "out":
                           len(g["values"]) - 1, "params": {"multiples": {
                               "type": "tuple", "items": [10 ** 8]}}})
    _rewrite(file, tile_a_constant)
    tracemalloc.start()
    try:
        loaded = tg.saved_model.load(file)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2 ** 20
    assert loaded.f.concrete_functions[0].graph.nodes[-1].op.name == "tile"
