"""keras.applications.Xception, MobileNet and EfficientNet: Keras' parameter counts, layer
names and shapes."""
import numpy as np
import pytest

import tapegpu as tg


def _count(variables):
    return sum(int(np.prod(v.shape)) for v in variables)


def test_parameter_counts_and_names_match_keras():
    model = tg.keras.applications.Xception(weights=None)
    assert _count(model.variables) == 22910480  # Keras' total
    assert _count(model.trainable_variables) == 22855952
    names = {layer.name for layer in model.layers}
    for name in ("block1_conv1", "block2_sepconv2_bn", "block12_sepconv3", "block13_pool",
                 "block14_sepconv2_act", "avg_pool", "predictions"):
        assert name in names
    assert model.outputs[0].shape == (None, 1000)


def test_headless_small_input_runs():
    model = tg.keras.applications.Xception(weights=None, include_top=False,
                                           input_shape=(71, 71, 3), pooling="max")
    out = model(np.random.default_rng(0).uniform(0, 255, (2, 71, 71, 3)).astype(np.float32))
    assert out.shape == (2, 2048) and np.isfinite(out.numpy()).all()
    assert _count(model.variables) == 22910480 - (2048 * 1000 + 1000)
    with pytest.raises(ValueError, match="at least 71x71"):
        tg.keras.applications.Xception(weights=None, include_top=False, input_shape=(64, 64, 3))
    with pytest.raises(ValueError, match="downloads nothing"):
        tg.keras.applications.Xception()
    np.testing.assert_allclose(
        tg.keras.applications.xception.preprocess_input(np.array([0.0, 127.5, 255.0])),
        [-1.0, 0.0, 1.0])


def test_mobilenet_counts_names_and_forward():
    model = tg.keras.applications.MobileNet(weights=None)
    assert _count(model.variables) == 4253864  # Keras' MobileNet 1.0 224
    assert _count(model.trainable_variables) == 4231976
    assert model.name == "mobilenet_1.00_224" and model.outputs[0].shape == (None, 1000)
    names = {layer.name for layer in model.layers}
    assert {"conv1_pad", "conv_dw_13_relu", "conv_pw_6_bn", "conv_preds", "reshape_2",
            "predictions"} <= names
    small = tg.keras.applications.MobileNet(input_shape=(32, 32, 3), alpha=0.25,
                                            include_top=False, weights=None, pooling="avg")
    out = small(np.ones((2, 32, 32, 3), np.float32))
    assert out.shape == (2, 256) and np.isfinite(out.numpy()).all()
    np.testing.assert_allclose(
        tg.keras.applications.mobilenet.preprocess_input(np.array([0.0, 255.0])), [-1.0, 1.0])


def test_efficientnet_b0_b1_counts_names_and_forward():
    b0 = tg.keras.applications.EfficientNetB0(weights=None)
    assert _count(b0.variables) == 5330571  # Keras 3's EfficientNetB0
    assert _count(b0.trainable_variables) == 5288548
    assert b0.name == "efficientnetb0" and b0.inputs[0].shape == (None, 224, 224, 3)
    names = {layer.name for layer in b0.layers}
    assert {"stem_conv_pad", "block1a_se_excite", "block2b_drop", "block6d_add", "top_conv",
            "top_dropout", "predictions"} <= names
    assert _count(tg.keras.applications.EfficientNetB1(weights=None).variables) == 7856239
    small = tg.keras.applications.EfficientNetB0(weights=None, include_top=False,
                                                 input_shape=(32, 32, 3), pooling="avg")
    out = small(np.random.default_rng(1).uniform(0, 255, (2, 32, 32, 3)).astype(np.float32))
    assert out.shape == (2, 1280) and np.isfinite(out.numpy()).all()
    x = np.array([0.0, 255.0])
    assert tg.keras.applications.efficientnet.preprocess_input(x) is x
