"""tg.experimental.dtensor: meshes, layouts, pack/unpack against hand-computed shards, layouts
following ops, DVariable, and TensorFlow's errors."""
import gc
import pickle

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.dtensor import api as _api
from tapegpu.ops import registry

dtensor = tg.experimental.dtensor
SINGLE_DEVICE = True  # CPU meshes: the tensors live on the CPU


@pytest.fixture
def mesh():
    cpu = tg.config.list_physical_devices("CPU")[0]
    tg.config.set_logical_device_configuration(cpu, [tg.config.LogicalDeviceConfiguration()] * 6)
    return dtensor.create_mesh([("x", 2), ("y", 3)], devices=[f"CPU:{i}" for i in range(6)])


def test_mesh_as_tensorflow_describes_it(mesh):
    assert mesh.dim_names == ["x", "y"] and mesh.shape() == [2, 3] and mesh.size == 6
    assert mesh["y"] == ("y", 3) and mesh.dim_size("x") == 2 and mesh.strides == [3, 1]
    assert mesh.device_type() == "CPU" and mesh.num_local_devices() == 6
    assert mesh.local_devices()[4] == "/job:localhost/replica:0/task:0/device:CPU:4"
    # device 4 sits at (1, 1): TF's unravel_index
    assert mesh.unravel_index()[4] == {"x": 1, "y": 1}
    assert dtensor.Mesh.from_string(mesh.to_string()) == mesh
    assert pickle.loads(pickle.dumps(mesh)) == mesh
    assert mesh.to_string().startswith("|x=2,y=3|0,1,2,3,4,5|0,1,2,3,4,5|/job:localhost/")
    with pytest.raises(ValueError, match="not a dimension name"):
        mesh.dim_size("z")


def test_create_mesh_checks_the_device_count_and_defaults_to_one_dimension_x():
    cpu = tg.config.list_physical_devices("CPU")[0]
    tg.config.set_logical_device_configuration(cpu, [tg.config.LogicalDeviceConfiguration()] * 4)
    m = dtensor.create_mesh(device_type="CPU")
    assert m.dim_names == ["x"] and m.shape() == [4]
    assert dtensor.create_mesh({"a": 2, "b": 2}, device_type="CPU").shape() == [2, 2]
    with pytest.raises(ValueError, match=r"length of devices \(4\) must be equal to total size "
                                         r"of the mesh of shape \[3\]"):
        dtensor.create_mesh([("x", 3)], device_type="CPU")
    with pytest.raises(ValueError, match="logical CPU"):  # CPU:5 does not exist
        dtensor.create_mesh([("x", 2)], devices=["CPU:0", "CPU:5"])
    with pytest.raises(ValueError, match="sequentially increase"):
        dtensor.Mesh(["x"], np.array([0, 2]), [0, 1], ["CPU:0", "CPU:1"])
    with pytest.raises(ValueError, match="Duplicate devices"):
        dtensor.Mesh(["x"], np.array([0, 1]), [0, 1], ["CPU:0", "CPU:0"])


def test_layout_specs_and_strings(mesh):
    lay = dtensor.Layout(["x", dtensor.UNSHARDED], mesh)
    assert lay.rank == 2 and lay.sharding_specs == ["x", "unsharded"] and lay.shape == [2, 1]
    assert lay.mesh == mesh and not lay.is_fully_replicated()
    assert lay.to_string().startswith("sharding_specs:x,unsharded, mesh:|x=2,y=3|")
    assert dtensor.Layout.from_string(lay.to_string()) == lay
    assert dtensor.Layout.batch_sharded(mesh, "x", rank=2) == lay
    assert dtensor.Layout.inner_sharded(mesh, "y", rank=3).sharding_specs == \
        ["unsharded", "unsharded", "y"]
    assert dtensor.Layout.replicated(mesh, 2).is_fully_replicated()
    assert lay.delete([0]).sharding_specs == ["unsharded"]
    assert dtensor.UNSHARDED == "unsharded" and dtensor.MATCH == "match"
    with pytest.raises(ValueError, match="Mesh dimension x was repeated"):
        dtensor.Layout(["x", "x"], mesh)
    with pytest.raises(ValueError, match="z: A dimension sharding must either be a valid mesh "
                                         "dimension or UNSHARDED"):
        dtensor.Layout(["z"], mesh)
    with pytest.raises(ValueError, match="mesh is not a valid Mesh object"):
        dtensor.Layout(["x"], "mesh")


def test_unpack_gives_tensorflows_shards_in_mesh_order(mesh):
    # TF's pack docstring, mesh [X(2), Y(3)]: layout [X, Y] of range(6).reshape(2, 3) gives
    # device d the element d; layout [X] of range(128) gives devices 0-2 range(0, 64)
    g = tg.reshape(tg.range(6.0), [2, 3])
    parts = dtensor.unpack(dtensor.relayout(g, dtensor.Layout(["x", "y"], mesh)))
    assert [p.numpy().tolist() for p in parts] == [[[float(d)]] for d in range(6)]
    v = dtensor.relayout(tg.range(128), dtensor.Layout(["x"], mesh))
    parts = dtensor.unpack(v)
    for d in range(6):
        want = np.arange(64) if d < 3 else np.arange(64, 128)
        np.testing.assert_array_equal(parts[d].numpy(), want)
    # [X, unsharded, unsharded] of range(12).reshape(2, 2, 3): devices 3-5 hold range(6, 12)
    t = dtensor.relayout(tg.reshape(tg.range(12.0), [2, 2, 3]),
                         dtensor.Layout(["x", "unsharded", "unsharded"], mesh))
    np.testing.assert_array_equal(dtensor.unpack(t)[4].numpy(),
                                  np.arange(6.0, 12.0).reshape(1, 2, 3))
    # a scalar: every device holds it
    s = dtensor.copy_to_mesh(tg.constant(123.0), dtensor.Layout.replicated(mesh, 0))
    assert [float(p) for p in dtensor.unpack(s)] == [123.0] * 6


def test_pack_inverts_unpack_and_checks_components(mesh):
    lay = dtensor.Layout(["y", "x"], mesh)  # axis 0 over y (3 shards), axis 1 over x (2)
    g = np.arange(24.0).reshape(6, 4).astype(np.float32)
    parts = dtensor.unpack(dtensor.relayout(tg.constant(g), lay))
    # device d at (x, y) = divmod(d, 3) holds rows 2y:2y+2, columns 2x:2x+2
    for d, p in enumerate(parts):
        x, y = divmod(d, 3)
        np.testing.assert_array_equal(p.numpy(), g[2 * y:2 * y + 2, 2 * x:2 * x + 2])
    packed = dtensor.pack(parts, lay)
    np.testing.assert_array_equal(packed.numpy(), g)
    assert dtensor.fetch_layout(packed) == lay
    with pytest.raises(ValueError, match="got 5 components for a mesh of 6 local devices"):
        dtensor.pack(parts[:5], lay)
    with pytest.raises(ValueError, match="do not match the layout's rank 2"):
        dtensor.pack([tg.ones([2])] * 6, lay)
    with pytest.raises(ValueError, match="share one shape and dtype"):
        dtensor.pack(parts[:5] + [tg.ones([1, 2])], lay)
    rep = dtensor.Layout(["x", "unsharded"], mesh)  # devices 0-2 hold one shard: must agree
    with pytest.raises(ValueError, match="same shard"):
        dtensor.pack([tg.ones([1, 2]) * float(d) for d in range(6)], rep)
    with pytest.raises(TypeError, match="Received Variable input to Pack"):
        dtensor.pack([tg.Variable(tg.ones([1, 2]))] * 6, rep)


def test_layouts_follow_ops(mesh):
    lay = dtensor.Layout(["x", "unsharded"], mesh)
    a = dtensor.call_with_layout(tg.ones, lay, shape=[4, 3])
    assert dtensor.fetch_layout(a) == lay
    assert dtensor.fetch_layout(tg.nn.relu(a * 2.0 + 1.0)) == lay  # elementwise keeps it
    b = tg.ones([3])  # broadcast along axis 1: the sharded axis 0 survives
    assert dtensor.fetch_layout(b + a).sharding_specs == ["x", "unsharded"]
    assert dtensor.fetch_layout(tg.matmul(a, tg.ones([3, 2]))).sharding_specs == \
        ["x", "unsharded"]  # rows keep a's sharding
    w = dtensor.copy_to_mesh(tg.ones([3, 6]), dtensor.Layout(["unsharded", "y"], mesh))
    assert dtensor.fetch_layout(tg.matmul(a, w)).sharding_specs == ["x", "y"]
    assert dtensor.fetch_layout(tg.reduce_sum(a)).rank == 0
    assert dtensor.fetch_layout(tg.reduce_sum(a, 1)).sharding_specs == ["x"]
    assert dtensor.fetch_layout(tg.reduce_mean(a, 0, keepdims=True)).sharding_specs == \
        ["unsharded", "unsharded"]
    assert dtensor.fetch_layout(tg.transpose(a)).sharding_specs == ["unsharded", "x"]
    assert dtensor.fetch_layout(tg.reshape(a, [12])).is_fully_replicated()
    assert not dtensor.is_dtensor(tg.ones([2]) * 2.0)
    # the values are the ordinary ones
    np.testing.assert_array_equal((a * 3.0).numpy(), np.full((4, 3), 3.0, np.float32))
    with pytest.raises(tg.errors.InvalidArgumentError, match="not a DTensor"):
        dtensor.fetch_layout(tg.ones([2]))


def test_observer_is_installed_only_while_dtensors_live(mesh):
    gc.collect()
    assert _api._observe not in registry.OBSERVERS  # no DTensor: ops pay nothing
    t = dtensor.copy_to_mesh(tg.ones([2]), dtensor.Layout(["x"], mesh))
    assert _api._observe in registry.OBSERVERS
    del t
    gc.collect()
    assert _api._observe not in registry.OBSERVERS


def test_an_observer_added_after_it_is_never_skipped(mesh):
    # while an op calls the observers, the DTensor observer leaves the list only when it is
    # the last one: removing it from before another would make that op skip the other
    seen = []

    def other(op, inputs, out, params):
        seen.append(op.name)

    t = dtensor.copy_to_mesh(tg.ones([2]), dtensor.Layout(["x"], mesh))
    registry.OBSERVERS.append(other)
    try:
        del t
        gc.collect()
        _ = tg.ones([2]) * 3.0
        assert seen == ["multiply"] and _api._observe in registry.OBSERVERS
    finally:
        registry.OBSERVERS.remove(other)
    _ = tg.ones([2]) + 1.0  # now last and idle: it leaves
    assert _api._observe not in registry.OBSERVERS


def test_relayout_match_and_shape_checks(mesh):
    t = dtensor.copy_to_mesh(tg.ones([4, 6]), dtensor.Layout(["x", "unsharded"], mesh))
    r = dtensor.relayout(t, dtensor.Layout([dtensor.MATCH, "y"], mesh))
    assert dtensor.fetch_layout(r).sharding_specs == ["x", "y"]
    assert dtensor.fetch_layout(t).sharding_specs == ["x", "unsharded"]  # t keeps its own
    with pytest.raises(ValueError, match="axis 0 of shape \\[3\\] has size 3, which the 2 "
                                         "shards of mesh dimension 'x' do not divide evenly"):
        dtensor.relayout(tg.ones([3]), dtensor.Layout(["x"], mesh))
    with pytest.raises(ValueError, match="rank 1"):
        dtensor.copy_to_mesh(tg.ones([2]), dtensor.Layout.replicated(mesh, 2))
    dtensor.check_layout(r, dtensor.Layout(["x", "y"], mesh))
    with pytest.raises(ValueError, match="did not match expected layout"):
        dtensor.check_layout(r, dtensor.Layout.replicated(mesh, 2))


def test_gradients_flow_through_relayout_pack_and_unpack(mesh):
    x = tg.constant(np.arange(6.0, dtype=np.float32))
    with tg.GradientTape() as tape:
        tape.watch(x)
        s = dtensor.relayout(x, dtensor.Layout(["y"], mesh))
        parts = dtensor.unpack(s)
        y = tg.reduce_sum(parts[1] * parts[1])  # device 1 holds elements 2, 3
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [0, 0, 4, 6, 0, 0])


def test_dvariable_keeps_its_layout_through_assignments_and_training(mesh):
    lay = dtensor.Layout(["unsharded", "y"], mesh)
    w = dtensor.DVariable(dtensor.call_with_layout(tg.ones, lay, shape=[2, 3]))
    assert w.layout == lay and dtensor.fetch_layout(w) == lay and dtensor.is_dtensor(w)
    w.assign(w * 2.0)
    assert dtensor.fetch_layout(w.read_value()) == lay
    with tg.GradientTape() as tape:
        loss = tg.reduce_sum(w * w)
    g = tape.gradient(loss, w)
    np.testing.assert_array_equal(g.numpy(), np.full((2, 3), 4.0, np.float32))
    assert dtensor.fetch_layout(w * 1.0) == lay
    v = dtensor.DVariable(tg.zeros([2, 3]), layout=lay)
    assert v.layout == lay
    back = pickle.loads(pickle.dumps(v))
    assert isinstance(back, dtensor.DVariable) and back.layout == lay
    with pytest.raises(ValueError, match="not a DTensor"):
        dtensor.DVariable(tg.zeros([2, 3]))
    with pytest.raises(TypeError, match="Received Variable input to unpack"):
        dtensor.unpack(w)


def test_default_mesh_and_runtime_queries(mesh):
    assert dtensor.get_default_mesh() is None
    with dtensor.default_mesh(mesh):
        assert dtensor.get_default_mesh() == mesh
        z = tg.zeros([2, 2]) + 1.0
    assert dtensor.fetch_layout(z) == dtensor.Layout.replicated(mesh, 2)
    with pytest.raises(ValueError, match="Expect `mesh` to be `Mesh`"):
        with dtensor.default_mesh("x"):
            pass
    assert dtensor.num_local_devices("CPU") == 6 and dtensor.num_global_devices("CPU") == 6
    assert dtensor.client_id() == 0 and dtensor.num_clients() == 1
    assert dtensor.local_devices("CPU")[5].endswith("device:CPU:5")
    assert dtensor.call_with_layout(tg.ones, None, shape=[2]).shape == (2,)


def test_a_keras_step_on_dtensor_values_gives_the_plain_numbers(mesh):
    # the DTensor ML tutorial's shape: batch-sharded data, model-sharded weights
    rng = np.random.default_rng(0)
    xv = rng.normal(size=(4, 3)).astype(np.float32)
    wv = rng.normal(size=(3, 6)).astype(np.float32)
    x = dtensor.copy_to_mesh(tg.constant(xv), dtensor.Layout.batch_sharded(mesh, "x", rank=2))
    w = dtensor.DVariable(tg.constant(wv), layout=dtensor.Layout(["unsharded", "y"], mesh))
    with tg.GradientTape() as tape:
        loss = tg.reduce_mean(tg.square(tg.matmul(x, w)))
    g = tape.gradient(loss, w)
    want = 2.0 * xv.T @ (xv @ wv) / (4 * 6)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-5)


def test_barrier_checks_its_mesh(mesh):
    assert dtensor.barrier(mesh, "sync") is None
    with pytest.raises(ValueError, match="mesh must be a Mesh"):
        dtensor.barrier("x")


def test_the_ml_tutorials_dense_layer_trains_in_a_tg_function_as_without_dtensor():
    # tensorflow/docs' dtensor_ml_tutorial: an 8-CPU mesh, model-sharded DVariables made by
    # call_with_layout of a traced initializer, batch-sharded inputs, a traced train step
    from tapegpu.experimental import dtensor as dt  # as the tutorial imports it
    cpu = tg.config.list_physical_devices("CPU")[0]
    tg.config.set_logical_device_configuration(cpu, [tg.config.LogicalDeviceConfiguration()] * 8)
    mesh8 = dt.create_mesh([("batch", 2), ("model", 4)], devices=[f"CPU:{i}" for i in range(8)])
    lay = dt.Layout([dt.UNSHARDED, "model"], mesh8)
    init = tg.function(tg.random.stateless_normal)
    w = dt.DVariable(dt.call_with_layout(init, lay, shape=[4, 8], seed=(1, 2)))
    b = dt.DVariable(dt.call_with_layout(tg.zeros, lay.delete([0]), [8]))
    w0, b0 = w.numpy().copy(), b.numpy().copy()
    xv = np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4)
    x = dt.relayout(dt.copy_to_mesh(tg.constant(xv), dt.Layout.replicated(mesh8, 2)),
                    dt.Layout(["batch", dt.UNSHARDED], mesh8))

    def make_step(w, b):
        @tg.function
        def step(x):
            with tg.GradientTape() as tape:
                loss = tg.reduce_sum(tg.nn.relu(tg.matmul(x, w) + b))
            for v, g in zip([w, b], tape.gradient(loss, [w, b])):
                v.assign_sub(0.1 * g)
            return loss
        return step

    step = make_step(w, b)
    losses = [float(step(x)) for _ in range(3)]
    pw, pb = tg.Variable(w0), tg.Variable(b0)
    plain = make_step(pw, pb)
    want = [float(plain(tg.constant(xv))) for _ in range(3)]
    assert losses == want
    np.testing.assert_array_equal(w.numpy(), pw.numpy())
    assert dt.fetch_layout(w) == lay
    out = tg.matmul(x, w) + b
    assert dt.fetch_layout(out).sharding_specs == ["batch", "model"]
    assert [tuple(c.shape) for c in dt.unpack(out)] == [(3, 2)] * 8


def test_a_dvariable_restores_from_a_checkpoint_with_its_layout(mesh, tmp_path):
    lay = dtensor.Layout(["x"], mesh)
    v = dtensor.DVariable(tg.constant([1.0, 2.0, 3.0, 4.0]), layout=lay)
    ckpt = tg.train.Checkpoint(v=v)
    path = ckpt.save(str(tmp_path / "ckpt"))
    v.assign(tg.zeros([4]))
    ckpt.restore(path)
    assert v.numpy().tolist() == [1.0, 2.0, 3.0, 4.0]
    assert [p.numpy().tolist() for p in dtensor.unpack(v.read_value())][3] == [3.0, 4.0]


def _repack_local_tensor(x, layout):
    # the ML tutorial's helper: split along each sharded axis with tf.split, then pick each
    # device's piece by its location on the mesh, and pack
    x = tg.convert_to_tensor(x)
    sharded_dims = []
    queue = [x]
    for axis, dim in enumerate(layout.sharding_specs):
        if dim == dtensor.UNSHARDED:
            continue
        num_splits = layout.shape[axis]
        queue = tg.nest.map_structure(lambda t: tg.split(t, num_splits, axis=axis), queue)
        sharded_dims.append(dim)
    components = []
    for locations in layout.mesh.local_device_locations():
        t = queue[0]
        for dim in sharded_dims:
            t = t[locations[dim]]
        components.append(t)
    return dtensor.pack(components, layout)


def test_the_tutorials_repack_helper_agrees_with_relayout(mesh):
    g = np.arange(72.0, dtype=np.float32).reshape(6, 12)
    for specs in (["x", "y"], ["y", "x"], ["unsharded", "y"], ["x", "unsharded"]):
        lay = dtensor.Layout(specs, mesh)
        packed = _repack_local_tensor(g, lay)
        np.testing.assert_array_equal(packed.numpy(), g)
        mine = dtensor.unpack(dtensor.relayout(tg.constant(g), lay))
        for a, b in zip(dtensor.unpack(packed), mine):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
