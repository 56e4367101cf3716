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
    untraced function cannot be saved."""
    model = MLP()
    with pytest.warns(UserWarning, match=r"\['__call__'\] were never traced"):
        tg.saved_model.save(model, tmp_path / "m")
    loaded = tg.saved_model.load(tmp_path / "m")
    with pytest.raises(ValueError, match="__call__ was saved without graphs"):
        loaded(tg.ones((2, 5)))
    with pytest.warns(UserWarning, match="never traced"), \
            pytest.raises(ValueError, match="tg.function __call__ .*has not been traced"):
        tg.saved_model.save(model, tmp_path / "s", signatures=model.__call__)


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
