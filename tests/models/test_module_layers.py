"""tg.Module variable tracking and the Keras-style layers."""
import gc
import weakref

import numpy as np
import pytest

import tapegpu as tg


# -- Module ------------------------------------------------------------------------------------

class Leaf(tg.Module):
    def __init__(self, n, name=None):
        super().__init__(name=name)
        self.w = tg.Variable(np.ones(n, np.float32), name=f"{self.name}/w")
        self.stat = tg.Variable(np.zeros(n, np.float32), trainable=False, name=f"{self.name}/s")


class Tree(tg.Module):
    def __init__(self):
        super().__init__()
        self.first = Leaf(1, "a")
        self.blocks = [Leaf(2, "b"), (Leaf(3, "c"),)]
        self.table = {"z": Leaf(4, "z"), "y": tg.Variable(0.0, name="y")}
        self.alias = self.first  # reachable twice: listed once
        self.shared = self.first.w
        self.note = "not a variable"


def test_module_finds_nested_variables_in_order_without_duplicates():
    tree = Tree()
    names = [v.name for v in tree.variables]
    assert names == ["a/w", "a/s", "b/w", "b/s", "c/w", "c/s", "y", "z/w", "z/s"]
    assert [v.name for v in tree.trainable_variables] == ["a/w", "b/w", "c/w", "y", "z/w"]
    assert [v.name for v in tree.non_trainable_variables] == ["a/s", "b/s", "c/s", "z/s"]
    assert [m.name for m in tree.submodules] == ["a", "b", "c", "z"]
    assert [v.name for v in Tree().variables] == names  # deterministic


def test_submodules_are_breadth_first():
    class Outer(tg.Module):
        def __init__(self):
            super().__init__()
            self.inner = Tree()
            self.leaf = Leaf(1, "outer_leaf")

    names = [m.name for m in Outer().submodules]
    assert names == ["tree", "outer_leaf", "a", "b", "c", "z"]


def test_module_name_defaults_to_snake_case_class_name():
    assert Tree().name == "tree"
    with pytest.raises(TypeError, match="name must be a string"):
        tg.Module(name=3)


# -- Dense -------------------------------------------------------------------------------------

def test_dense_builds_from_the_last_dimension():
    layer = tg.layers.Dense(5, activation="relu")
    assert layer.kernel is None and not layer.built
    y = layer(tg.random.normal((4, 3)))
    assert y.shape == (4, 5)
    assert layer.kernel.shape == (3, 5) and layer.bias.shape == (5,)
    assert [v.name for v in layer.trainable_variables] == [layer.kernel.name, layer.bias.name]
    assert float(tg.reduce_min(y)) >= 0.0
    assert layer(tg.ones((2, 7, 3))).shape == (2, 7, 5)  # rank-3 inputs


def test_dense_matches_numpy_and_supports_named_and_callable_activations():
    x = np.random.randn(6, 3).astype(np.float32)
    for name, ref in [("tanh", np.tanh), ("sigmoid", lambda z: 1 / (1 + np.exp(-z))),
                      ("softplus", lambda z: np.log1p(np.exp(z))), ("linear", lambda z: z),
                      (None, lambda z: z), (lambda t: t * 2.0, lambda z: 2 * z)]:
        layer = tg.layers.Dense(4, activation=name)
        y = layer(x).numpy()
        z = x @ layer.kernel.numpy() + layer.bias.numpy()
        np.testing.assert_allclose(y, ref(z), rtol=1e-5, atol=1e-6)
    for name in ("relu", "elu", "gelu", "softmax"):
        assert tg.layers.Dense(2, activation=name)(x).shape == (6, 2)
    with pytest.raises(ValueError, match="unknown activation 'relux'.*valid names"):
        tg.layers.Dense(2, activation="relux")


def test_dense_without_bias_and_initializers():
    layer = tg.layers.Dense(3, use_bias=False, kernel_initializer="ones")
    y = layer(tg.ones((1, 2)))
    assert layer.bias is None and len(layer.variables) == 1
    np.testing.assert_array_equal(y.numpy(), [[2.0, 2.0, 2.0]])
    with pytest.raises(ValueError, match="unknown initializer"):
        tg.layers.Dense(2, kernel_initializer="nope")


def test_glorot_uniform_limit():
    layer = tg.layers.Dense(200)
    layer(tg.ones((1, 300)))
    limit = np.sqrt(6.0 / 500)
    w = layer.kernel.numpy()
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.9 * limit


def test_dense_dtype_follows_the_first_input_and_autocasts_floating_inputs():
    layer = tg.layers.Dense(2)
    y = layer(np.ones((3, 4)))  # float64 array
    assert y.dtype == tg.float64 and layer.kernel.dtype == tg.float64
    # a float32 input is cast to the layer's dtype, as Keras' autocast does
    z = layer(tg.ones((3, 4)))
    assert z.dtype == tg.float64
    np.testing.assert_array_equal(z.numpy(), y.numpy())
    f32 = tg.layers.Dense(2)
    assert f32(tg.constant([[1, 2]])).dtype == tg.float32  # integers are cast (Keras)
    with pytest.raises(ValueError, match="last dimension 2, got shape \\(3, 5\\)"):
        f32(tg.ones((3, 5)))


def test_dense_gradients_reach_kernel_and_bias():
    layer = tg.layers.Dense(2)
    x = tg.random.normal((5, 3))
    with tg.GradientTape() as tape:
        loss = tg.reduce_sum(layer(x))
    gk, gb = tape.gradient(loss, [layer.kernel, layer.bias])
    np.testing.assert_allclose(gk.numpy(), np.tile(x.numpy().sum(0)[:, None], (1, 2)),
                               rtol=1e-5)
    np.testing.assert_allclose(gb.numpy(), [5.0, 5.0])


# -- BatchNormalization --------------------------------------------------------------------------

def _bn_reference(batches, momentum, eps, gamma, beta):
    mm, mv = np.zeros(batches[0].shape[-1]), np.ones(batches[0].shape[-1])
    outs = []
    for x in batches:
        mean, var = x.mean(0), x.var(0)
        outs.append((x - mean) / np.sqrt(var + eps) * gamma + beta)
        mm = mm * momentum + mean * (1 - momentum)
        mv = mv * momentum + var * (1 - momentum)
    return outs, mm, mv


def test_batch_normalization_training_matches_numpy_over_several_steps():
    rng = np.random.default_rng(1)
    batches = [rng.normal(3.0, 2.0, size=(16, 4)) for _ in range(5)]
    bn = tg.layers.BatchNormalization(momentum=0.9, epsilon=1e-3)
    outs = [bn(tg.constant(x), training=True).numpy() for x in batches]
    ref, mm, mv = _bn_reference(batches, 0.9, 1e-3, np.ones(4), np.zeros(4))
    for got, want in zip(outs, ref):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(bn.moving_mean.numpy(), mm, rtol=1e-12)
    np.testing.assert_allclose(bn.moving_variance.numpy(), mv, rtol=1e-12)
    # inference uses the moving statistics and leaves them alone
    x = batches[0]
    got = bn(tg.constant(x)).numpy()
    np.testing.assert_allclose(got, (x - mm) / np.sqrt(mv + 1e-3), rtol=1e-10)
    np.testing.assert_allclose(bn.moving_mean.numpy(), mm, rtol=1e-12)


def test_batch_normalization_variables_and_gradients():
    bn = tg.layers.BatchNormalization(dtype="float32")
    x = tg.random.normal((8, 3))
    with tg.GradientTape() as tape:
        y = bn(x, training=True)
        loss = tg.reduce_sum(y * tg.constant([1.0, 2.0, 3.0]))
    assert [v.name.split("/")[-1] for v in bn.trainable_variables] == ["gamma", "beta"]
    assert [v.name.split("/")[-1] for v in bn.non_trainable_variables] == \
        ["moving_mean", "moving_variance"]
    gg, gb = tape.gradient(loss, [bn.gamma, bn.beta])
    np.testing.assert_allclose(gb.numpy(), [8.0, 16.0, 24.0], rtol=1e-6)
    np.testing.assert_allclose(gg.numpy(), [0.0, 0.0, 0.0], atol=1e-4)  # sum of normalised x
    assert y.dtype == tg.float32 and bn.moving_mean.dtype == tg.float32


def test_batch_normalization_other_axis_and_no_center_scale():
    bn = tg.layers.BatchNormalization(axis=1, center=False, scale=False)
    x = np.random.randn(4, 3, 5)
    y = bn(tg.constant(x), training=True).numpy()
    mean, var = x.mean((0, 2), keepdims=True), x.var((0, 2), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-3), rtol=1e-10)
    assert bn.trainable_variables == [] and bn.moving_mean.shape == (3,)


# -- Dropout -------------------------------------------------------------------------------------

def test_dropout_is_identity_in_inference_and_scales_in_training():
    drop = tg.layers.Dropout(0.25, seed=3)
    x = tg.ones((200, 50))
    assert drop(x) is x
    y = drop(x, training=True).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.02
    assert y.dtype == np.float32
    y2 = drop(x, training=True).numpy()
    assert not np.array_equal(y, y2)  # a new mask per call
    again = tg.layers.Dropout(0.25, seed=3)(x, training=True).numpy()
    np.testing.assert_array_equal(y, again)  # the seed makes the sequence repeatable
    with pytest.raises(ValueError, match="rate must be in"):
        tg.layers.Dropout(1.0)


def test_dropout_gradient_uses_the_same_mask():
    drop = tg.layers.Dropout(0.5, seed=0)
    x = tg.Variable(np.ones((10, 10), np.float32))
    with tg.GradientTape() as tape:
        y = drop(x, training=True)
    g = tape.gradient(y, x).numpy()
    np.testing.assert_array_equal(g, y.numpy())


# -- Sequential ----------------------------------------------------------------------------------

def test_sequential_passes_training_and_tracks_layers():
    model = tg.layers.Sequential([
        tg.layers.Dense(8, activation="tanh"),
        tg.layers.BatchNormalization(),
        tg.layers.Dropout(0.5, seed=0),
        tg.layers.Dense(3),
    ])
    x = tg.random.normal((16, 4))
    y_train = model(x, training=True)
    mm = model.layers[1].moving_mean.numpy().copy()
    assert np.abs(mm).sum() > 0  # training updated the moving mean
    y_infer = model(x)
    np.testing.assert_array_equal(model.layers[1].moving_mean.numpy(), mm)
    assert y_train.shape == y_infer.shape == (16, 3)
    assert [v.shape for v in model.trainable_variables] == [(4, 8), (8,), (8,), (8,), (8, 3),
                                                            (3,)]
    assert len(model.variables) == 8 and len(model.submodules) == 4
    np.testing.assert_allclose(model(x).numpy(), y_infer.numpy())  # inference is deterministic
    lines = []
    model.summary(print_fn=lines.append)
    assert f"Total params: {4 * 8 + 8 + 4 * 8 + 8 * 3 + 3}" in lines


def test_sequential_add_and_plain_callables():
    model = tg.layers.Sequential()
    model.add(tg.layers.Dense(2))
    model.add(tg.nn.relu)
    assert model(tg.ones((1, 3))).shape == (1, 2)
    with pytest.raises(TypeError, match="expected a layer or callable"):
        model.add(3)


def test_layers_get_unique_variable_names():
    a, b = tg.layers.Dense(1), tg.layers.Dense(1)
    a(tg.ones((1, 1)))
    b(tg.ones((1, 1)))
    assert a.kernel.name != b.kernel.name


def test_batch_normalization_reports_mismatched_inputs():
    bn = tg.layers.BatchNormalization()
    bn(tg.ones((2, 3)))
    with pytest.raises(ValueError, match="built for 3 features on axis 1, got inputs of shape "
                                         r"\(2, 4\)"):
        bn(tg.ones((2, 4)))
    with pytest.raises(ValueError, match="built for 3 features"):
        bn(tg.ones((3,)))


def test_keras_weight_accessors_and_rank_check():
    layer = tg.layers.Dense(2)
    with pytest.raises(ValueError, match=r"Dense 'dense.*rank >= 2.*shape \(3,\)"):
        layer(tg.ones(3))
    layer(tg.ones((1, 3)))
    assert layer.weights == [layer.kernel, layer.bias] and layer.non_trainable_weights == []
    values = [np.full((3, 2), 0.5, np.float32), np.array([1.0, -1.0], np.float32)]
    layer.set_weights(values)
    np.testing.assert_array_equal(layer(tg.ones((1, 3))).numpy(), [[2.5, 0.5]])
    assert [w.shape for w in layer.get_weights()] == [(3, 2), (2,)]
    with pytest.raises(ValueError, match="set_weights got 1 arrays for 2 variables"):
        layer.set_weights(values[:1])


def test_variable_accessors_are_lists_in_a_stable_order():
    tree = Tree()
    for attr in ("variables", "trainable_variables", "non_trainable_variables"):
        first, again = getattr(tree, attr), getattr(tree, attr)
        assert type(first) is list and [id(v) for v in first] == [id(v) for v in again]
        first.append(None)  # a new list each time: the module is not changed
        assert len(getattr(tree, attr)) == len(again)
    model = tg.layers.Sequential([tg.layers.Dense(3), tg.layers.BatchNormalization()])
    model(tg.ones((2, 4)), training=True)
    for attr in ("variables", "trainable_variables", "non_trainable_variables", "weights",
                 "trainable_weights", "non_trainable_weights"):
        assert type(getattr(model, attr)) is list
    assert [v.name.split("/")[-1] for v in model.variables] == \
        ["kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance"]
    assert [v.name.split("/")[-1] for v in model.non_trainable_variables] == \
        ["moving_mean", "moving_variance"]


def test_batch_normalization_accepts_fused_and_ignores_it():
    x = np.random.randn(6, 3)
    outs = []
    for fused in (None, True, False):
        bn = tg.layers.BatchNormalization(fused=fused)
        outs.append(bn(tg.constant(x), training=True).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
    with pytest.raises(TypeError, match="BatchNormalization: fused must be None, True or False"):
        tg.layers.BatchNormalization(fused="yes")


def test_sequential_does_not_keep_dropped_callables_alive():
    def double(x):
        return x * 2.0

    class Scale:  # a callable object
        def __call__(self, x, training=False):
            return x * (3.0 if training else 1.0)

    scale = Scale()
    model = tg.layers.Sequential([double, scale, lambda x: x + 1.0])
    np.testing.assert_allclose(model(tg.ones((1, 2)), training=True).numpy(), [[7.0, 7.0]])
    refs = [weakref.ref(double), weakref.ref(scale), weakref.ref(model.layers[2])]
    del model, double, scale
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
