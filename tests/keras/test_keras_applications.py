"""keras.applications: MobileNetV2 and InceptionV3 built with weights=None (layer structure,
names and parameter counts against Keras' documented totals), the weights argument (nothing is
downloaded), input checks, forward and backward passes, and preprocess_input."""
import numpy as np
import pytest

import tapegpu as tg

keras = tg.keras
apps = keras.applications
L = keras.layers


def _count(variables):
    return sum(int(np.prod(v.shape)) for v in variables)


@pytest.fixture(scope="module")
def mobilenet():
    """MobileNetV2 at Keras' defaults (224 x 224 x 3, alpha 1.0, 1000 classes), built once."""
    keras.backend.clear_session()
    return apps.MobileNetV2(weights=None)


@pytest.fixture(scope="module")
def inception():
    """InceptionV3 with the top at its smallest input (75 x 75): the parameter count does not
    depend on the input size (global pooling before the classifier)."""
    return apps.InceptionV3(weights=None, input_shape=(75, 75, 3))


def _by_type(model, cls):
    return [layer for layer in model.layers if type(layer) is cls]


def test_mobilenet_v2_matches_keras_parameter_counts_and_structure(mobilenet):
    model = mobilenet
    # Keras' documented summary of MobileNetV2(): 3,538,984 total, 3,504,872 trainable,
    # 34,112 non-trainable (the batch normalizations' moving statistics)
    assert _count(model.variables) == 3_538_984
    assert _count(model.trainable_variables) == 3_504_872
    assert _count(model.non_trainable_variables) == 34_112
    lines = []
    model.summary(print_fn=lines.append)
    assert "Total params: 3,538,984" in lines and "Trainable params: 3,504,872" in lines
    assert model.name == "mobilenetv2_1.00_224"
    assert model.outputs[0].shape == (None, 1000) and model.inputs[0].shape == (None, 224, 224, 3)
    names = [layer.name for layer in model.layers]
    assert len(names) == 156 and names[1:4] == ["Conv1", "bn_Conv1", "Conv1_relu"]
    assert names[-4:] == ["Conv_1_bn", "out_relu", names[-2], "predictions"]
    assert isinstance(model.layers[-2], L.GlobalAveragePooling2D)
    # 17 inverted residual blocks: 16 expansions, 4 strided ones padded, 10 residual adds
    assert len([n for n in names if n.endswith("_expand")]) == 16
    assert [n for n in names if n.endswith("_pad")] == \
        ["block_1_pad", "block_3_pad", "block_6_pad", "block_13_pad"]
    assert len(_by_type(model, L.Add)) == 10 and "block_2_add" in names
    assert len(_by_type(model, L.DepthwiseConv2D)) == 17
    assert all(layer.max_value == 6.0 for layer in _by_type(model, L.ReLU))
    layers = {layer.name: layer for layer in model.layers}
    # the padding before a stride-2 depthwise convolution of an even (112) input: (0, 1)
    assert layers["block_1_pad"].padding == ((0, 1), (0, 1))
    assert layers["Conv1"].kernel.shape == (3, 3, 3, 32) and layers["Conv1"].bias is None
    assert layers["block_16_project"].kernel.shape == (1, 1, 960, 320)
    assert layers["predictions"].kernel.shape == (1280, 1000)
    assert layers["bn_Conv1"].momentum == 0.999 and layers["bn_Conv1"].epsilon == 1e-3


def test_inception_v3_matches_keras_parameter_counts_and_structure(inception):
    model = inception
    # Keras' documented summary of InceptionV3(): 23,851,784 total, 23,817,352 trainable,
    # 34,432 non-trainable
    assert _count(model.variables) == 23_851_784
    assert _count(model.trainable_variables) == 23_817_352
    assert _count(model.non_trainable_variables) == 34_432
    assert model.name == "inception_v3" and model.outputs[0].shape == (None, 1000)
    names = [layer.name for layer in model.layers]
    assert len(names) == 313
    for i in range(11):
        assert f"mixed{i}" in names
    assert "mixed9_0" in names and "mixed9_1" in names and names[-2:] == ["avg_pool",
                                                                          "predictions"]
    convs, norms = _by_type(model, L.Conv2D), _by_type(model, L.BatchNormalization)
    assert len(convs) == len(norms) == len(_by_type(model, L.Activation)) == 94
    assert all(c.bias is None for c in convs) and all(n.gamma is None for n in norms)
    assert len(_by_type(model, L.MaxPooling2D)) == 4
    assert len(_by_type(model, L.AveragePooling2D)) == 9
    # the 8 x 8 x 2048 of mixed10 for a 299 x 299 input is 1 x 1 here (75 x 75)
    shapes = model._output_shapes
    mixed = {layer.name: shapes[id(layer)] for layer in model.layers
             if layer.name.startswith("mixed")}
    assert mixed["mixed2"][-1] == 288 and mixed["mixed7"][-1] == 768
    assert mixed["mixed10"] == (None, 1, 1, 2048)


def test_inception_v3_without_top(tg_device):
    if tg_device != "numpy":
        pytest.skip("the architecture does not depend on the device (a 3 s build)")
    model = apps.InceptionV3(weights=None, include_top=False, input_shape=(75, 75, 3),
                             pooling="max")
    assert model.outputs[0].shape == (None, 2048)
    assert isinstance(model.layers[-1], L.GlobalMaxPooling2D)
    # Keras' 21,802,784 for InceptionV3(include_top=False)
    assert _count(model.variables) == 21_802_784


def test_small_mobilenet_v2_runs_and_trains_on_every_device():
    tg.random.set_seed(0)
    model = apps.MobileNetV2(weights=None, input_shape=(32, 32, 3), alpha=0.35, classes=3)
    assert model.name == "mobilenetv2_0.35_32"
    layers = {layer.name: layer for layer in model.layers}
    assert layers["Conv1"].kernel.shape == (3, 3, 3, 16)  # _make_divisible(32 * 0.35) = 16
    assert layers["Conv_1"].kernel.shape[-1] == 1280       # not narrowed for alpha < 1
    x = np.random.default_rng(0).uniform(0, 255, (2, 32, 32, 3)).astype(np.float32)
    x = apps.mobilenet_v2.preprocess_input(x)
    y = model(x)
    assert y.shape == (2, 3)
    np.testing.assert_allclose(tg.reduce_sum(y, axis=-1).numpy(), [1.0, 1.0], rtol=1e-5)
    # a larger image through the same model (it was built at 32 x 32)
    assert model(np.zeros((1, 64, 48, 3), np.float32)).shape == (1, 3)
    with tg.GradientTape() as tape:
        loss = tg.reduce_mean(keras.losses.sparse_categorical_crossentropy(
            tg.constant([0, 2]), model(x, training=True)))
    grads = tape.gradient(loss, model.trainable_variables)
    assert len(grads) == len(model.trainable_variables) == 158
    assert all(g is not None and np.all(np.isfinite(g.numpy())) for g in grads)
    assert all(float(tg.reduce_max(tg.abs(g))) > 0 for g in grads)


def test_mobilenet_v2_top_options():
    no_top = apps.MobileNetV2(weights=None, input_shape=(32, 32, 3), alpha=0.5,
                              include_top=False)
    assert no_top.outputs[0].shape == (None, 1, 1, 1280)
    pooled = apps.MobileNetV2(weights=None, input_shape=(64, 64, 3), alpha=0.5,
                              include_top=False, pooling="max")
    assert pooled.outputs[0].shape == (None, 1280)
    assert isinstance(pooled.layers[-1], L.GlobalMaxPooling2D)
    logits = apps.MobileNetV2(weights=None, input_shape=(32, 32, 3), alpha=0.5, classes=4,
                              classifier_activation=None)
    assert logits.layers[-1].activation is None
    wide = apps.MobileNetV2(weights=None, input_shape=(32, 32, 3), alpha=1.4, include_top=False)
    assert wide.layers[-3].kernel.shape[-1] == 1792  # 1280 * 1.4, for alpha > 1


def test_full_size_forward_pass_on_numpy(mobilenet, tg_device):
    if tg_device != "numpy":
        pytest.skip("the 224 x 224 forward pass runs on numpy only (time)")
    x = np.random.default_rng(1).uniform(0, 255, (1, 224, 224, 3)).astype(np.float32)
    y = mobilenet(apps.mobilenet_v2.preprocess_input(x)).numpy()
    assert y.shape == (1, 1000) and np.all(y >= 0)
    assert float(np.sum(y)) == pytest.approx(1.0, rel=1e-5)


def test_weights_argument(tmp_path):
    with pytest.raises(ValueError, match="downloads nothing.*load_weights"):
        apps.MobileNetV2()  # Keras' default: weights="imagenet"
    with pytest.raises(ValueError, match="downloads nothing.*load_weights"):
        apps.InceptionV3(weights="imagenet", include_top=False)
    with pytest.raises(ValueError, match="should be either `None`.*or the path"):
        apps.MobileNetV2(weights=str(tmp_path / "missing.npz"))
    tg.random.set_seed(1)
    model = apps.MobileNetV2(weights=None, input_shape=(32, 32, 3), alpha=0.35, classes=2)
    path = str(tmp_path / "w.npz")
    model.save_weights(path)
    tg.random.set_seed(2)
    loaded = apps.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, classes=2, weights=path)
    x = np.random.default_rng(0).normal(size=(2, 32, 32, 3)).astype(np.float32)
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="classifier_activation"):
        apps.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, classes=2, weights=path,
                         classifier_activation="sigmoid")


def test_input_checks():
    with pytest.raises(ValueError, match="Input size must be at least 32x32"):
        apps.MobileNetV2(weights=None, input_shape=(31, 64, 3))
    with pytest.raises(ValueError, match="Input size must be at least 75x75"):
        apps.InceptionV3(weights=None, input_shape=(74, 299, 3))
    with pytest.raises(ValueError, match="tuple of three integers"):
        apps.MobileNetV2(weights=None, input_shape=(32, 32))
    with pytest.raises(ValueError, match="give the input's rows and cols"):
        apps.MobileNetV2(weights=None, input_shape=(None, None, 3), include_top=False)
    with pytest.raises(ValueError, match="pooling must be None, 'avg' or 'max'"):
        apps.MobileNetV2(weights=None, input_shape=(32, 32, 3), include_top=False,
                         pooling="mean")
    with pytest.raises(ValueError, match="classes"):
        apps.MobileNetV2(weights=None, input_shape=(32, 32, 3), classes=0)
    # an input tensor: the model is built on it
    inputs = keras.Input(shape=(40, 40, 3))
    model = apps.MobileNetV2(weights=None, input_tensor=inputs, alpha=0.35, include_top=False,
                             pooling="avg")
    assert model.inputs[0] is inputs and model.outputs[0].shape == (None, 1280)
    with pytest.raises(ValueError, match="input_tensor must be a keras.Input"):
        apps.MobileNetV2(weights=None, input_tensor=np.zeros((1, 32, 32, 3)))


def test_preprocess_input():
    pixels = np.array([[0, 51, 255]], np.uint8)
    for fn in (apps.mobilenet_v2.preprocess_input, apps.inception_v3.preprocess_input):
        out = fn(pixels)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, [[-1.0, 51 / 127.5 - 1, 1.0]], rtol=1e-6)
    x = np.full((2, 2, 3), 255.0)
    out = apps.mobilenet_v2.preprocess_input(x)
    assert out.dtype == np.float64 and np.all(out == 1.0) and np.all(x == 255.0)  # no mutation
    t = apps.inception_v3.preprocess_input(tg.constant(x, tg.float32))
    assert isinstance(t, tg.Tensor) and t.dtype == tg.float32
    np.testing.assert_allclose(t.numpy(), np.ones((2, 2, 3)))
    rgb = np.array([[[10.0, 20.0, 30.0]]])
    utils = apps.imagenet_utils
    np.testing.assert_allclose(utils.preprocess_input(rgb, mode="caffe"),
                               [[[30 - 103.939, 20 - 116.779, 10 - 123.68]]], rtol=1e-6)
    np.testing.assert_allclose(
        utils.preprocess_input(tg.constant(rgb), mode="caffe").numpy(),
        [[[30 - 103.939, 20 - 116.779, 10 - 123.68]]], rtol=1e-6)
    np.testing.assert_allclose(
        utils.preprocess_input(rgb, mode="torch"),
        (rgb / 255.0 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225], rtol=1e-6)
    first = np.moveaxis(np.tile(rgb, (2, 2, 1))[None], -1, 1)  # (1, 3, 2, 2)
    out = utils.preprocess_input(first, data_format="channels_first", mode="caffe")
    np.testing.assert_allclose(out[0, :, 0, 0], [30 - 103.939, 20 - 116.779, 10 - 123.68])
    with pytest.raises(ValueError, match="Expected mode to be one of"):
        utils.preprocess_input(rgb, mode="keras")
    with pytest.raises(ValueError, match="Expected data_format"):
        utils.preprocess_input(rgb, data_format="NHWC")


def test_imports_as_keras():
    from tapegpu.keras.applications import InceptionV3, MobileNetV2
    from tapegpu.keras.applications.mobilenet_v2 import preprocess_input
    assert MobileNetV2 is apps.MobileNetV2 and InceptionV3 is apps.InceptionV3
    assert preprocess_input is apps.mobilenet_v2.preprocess_input
