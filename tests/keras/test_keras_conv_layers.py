"""keras.layers' convolution, pooling and spatial reshaping layers: outputs against tg.nn's ops
applied by hand to the layers' own weights, output shapes against Keras' formulas, gradients
against finite differences, configs, summaries and errors."""
import itertools
import json
import math
import os

import numpy as np
import pytest

import tapegpu as tg

keras = tg.keras
L = keras.layers
RNG = np.random.default_rng(0)
NN_FORMATS = {1: "NWC", 2: "NHWC", 3: "NDHWC"}


def _x(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


def _to_first(a):  # channels_last array -> channels_first
    return np.moveaxis(a, -1, 1)


def _to_last(a):
    return np.moveaxis(a, 1, -1)


def _length(n, k, s, d, padding):
    """Keras' documented output length: ceil(n / s) for 'same', else floor((n - dk) / s) + 1."""
    dk = (k - 1) * d + 1
    return math.ceil(n / s) if padding == "same" else (n - dk) // s + 1


# -- convolutions --------------------------------------------------------------------------------

CONV_CASES = [(rank, padding, strides, fmt)
              for rank in (1, 2, 3) for padding in ("valid", "same") for strides in (1, 2)
              for fmt in ("channels_last", "channels_first")]


@pytest.mark.parametrize("rank,padding,strides,fmt", CONV_CASES)
def test_conv_matches_tg_nn_on_its_own_weights(rank, padding, strides, fmt):
    cls = {1: L.Conv1D, 2: L.Conv2D, 3: L.Conv3D}[rank]
    spatial = (7, 6, 5)[:rank]
    x_last = _x((2,) + spatial + (4,))
    x = _to_first(x_last) if fmt == "channels_first" else x_last
    layer = cls(6, 3, strides=strides, padding=padding, data_format=fmt, activation="elu",
                bias_initializer="random_normal")
    y = layer(x).numpy()
    kernel, bias = layer.kernel.numpy(), layer.bias.numpy()
    assert kernel.shape == (3,) * rank + (4, 6) and bias.shape == (6,)
    assert layer.kernel.name == f"{layer.name}/kernel" and layer.bias.name == f"{layer.name}/bias"
    # by hand, always channels last: elu(conv(x, kernel) + bias)
    expect = tg.nn.elu(tg.nn.convolution(x_last, kernel, strides=strides,
                                         padding=padding.upper()) + bias).numpy()
    lengths = tuple(_length(n, 3, strides, 1, padding) for n in spatial)
    assert expect.shape == (2,) + lengths + (6,)
    got = _to_last(y) if fmt == "channels_first" else y
    assert got.shape == expect.shape
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_conv2d_dilation_groups_and_no_bias(fmt):
    x_last = _x((1, 9, 8, 4))
    x = _to_first(x_last) if fmt == "channels_first" else x_last
    layer = L.Conv2D(6, (3, 2), dilation_rate=(2, 1), groups=2, use_bias=False,
                     data_format=fmt)
    y = layer(x).numpy()
    assert [v.name for v in layer.weights] == [f"{layer.name}/kernel"]
    assert layer.kernel.shape == (3, 2, 2, 6)
    k = layer.kernel.numpy()
    # two groups by hand: channels 0-1 -> filters 0-2, channels 2-3 -> filters 3-5
    halves = [tg.nn.conv2d(x_last[..., 2 * g:2 * g + 2], k[..., 3 * g:3 * g + 3], 1, "VALID",
                           dilations=(2, 1)).numpy() for g in range(2)]
    expect = np.concatenate(halves, axis=-1)
    assert expect.shape == (1, 9 - 4, 7, 6)
    got = _to_last(y) if fmt == "channels_first" else y
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)


def test_conv1d_causal_padding_sees_only_the_past():
    layer = L.Conv1D(3, 3, padding="causal", dilation_rate=2, use_bias=False)
    x = _x((1, 10, 2))
    y = layer(x).numpy()
    assert y.shape == (1, 10, 3)
    x2 = x.copy()
    x2[:, 6:] += 1.0  # changing steps >= 6 leaves outputs 0..5 unchanged, changes 6
    y2 = layer(x2).numpy()
    np.testing.assert_array_equal(y2[:, :6], y[:, :6])
    assert not np.allclose(y2[:, 6], y[:, 6])
    # equal to a valid convolution of the input with (3 - 1) * 2 zeros in front
    expect = tg.nn.conv1d(np.pad(x, ((0, 0), (4, 0), (0, 0))), layer.kernel.numpy(), 1,
                          "VALID", dilations=2).numpy()
    np.testing.assert_allclose(y, expect, rtol=1e-5, atol=1e-6)


def _transpose_length(n, k, s, padding, out_pad):
    """Keras' output length of a transposed convolution (no dilation)."""
    if out_pad is None:
        return n * s if padding == "same" else (n - 1) * s + max(k, s)
    return (n - 1) * s + (k if padding == "valid" else k % 2) + out_pad


TRANSPOSE_CASES = [(padding, strides, out_pad, fmt)
                   for padding in ("valid", "same") for strides in (1, 2)
                   for out_pad in (None, 0, 1) for fmt in ("channels_last", "channels_first")
                   if out_pad is None or out_pad < strides]


@pytest.mark.parametrize("padding,strides,out_pad,fmt", TRANSPOSE_CASES)
def test_conv2d_transpose_shapes_and_values(padding, strides, out_pad, fmt):
    x_last = _x((2, 4, 5, 3))
    x = _to_first(x_last) if fmt == "channels_first" else x_last
    layer = L.Conv2DTranspose(2, 3, strides=strides, padding=padding, output_padding=out_pad,
                              data_format=fmt, bias_initializer="ones")
    y = layer(x).numpy()
    assert layer.kernel.shape == (3, 3, 2, 3) and layer.bias.shape == (2,)

    shape = (2, _transpose_length(4, 3, strides, padding, out_pad),
             _transpose_length(5, 3, strides, padding, out_pad), 2)
    got = _to_last(y) if fmt == "channels_first" else y
    assert got.shape == shape
    expect = tg.nn.conv2d_transpose(x_last, layer.kernel.numpy(), shape, strides,
                                    padding.upper()).numpy() + 1.0
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("padding,strides,out_pad", [
    ("valid", 1, None), ("valid", 2, None), ("valid", 3, 2), ("same", 1, None),
    ("same", 2, None), ("same", 2, 1)])
def test_conv1d_transpose_is_conv2d_transpose_over_one_row(padding, strides, out_pad):
    x = _x((2, 5, 3))
    one = L.Conv1DTranspose(4, 3, strides=strides, padding=padding, output_padding=out_pad,
                            bias_initializer="random_normal")
    y = one(x).numpy()
    two = L.Conv2DTranspose(4, (1, 3), strides=(1, strides), padding=padding,
                            output_padding=None if out_pad is None else (0, out_pad))
    two(x[:, None])
    two.set_weights([one.kernel.numpy()[None], one.bias.numpy()])
    expect = two(x[:, None]).numpy()[:, 0]
    assert y.shape == expect.shape == (2, _transpose_length(5, 3, strides, padding, out_pad), 4)
    np.testing.assert_allclose(y, expect, rtol=1e-5, atol=1e-6)


def test_conv2d_transpose_is_the_gradient_of_conv2d():
    # <conv2d(u, k), v> == <u, conv2d_transpose(v, k)> for the layer's kernel
    v = _x((1, 4, 4, 5), np.float64)
    layer = L.Conv2DTranspose(3, 3, strides=2, padding="same", use_bias=False, dtype="float64")
    t = layer(v).numpy()
    u = _x(t.shape, np.float64, seed=1)
    conv = tg.nn.conv2d(u, layer.kernel.numpy(), 2, "SAME").numpy()
    assert np.isclose(np.sum(conv * v), np.sum(u * t))


@pytest.mark.parametrize("padding,strides,fmt", list(itertools.product(
    ("valid", "same"), (1, 2), ("channels_last", "channels_first"))))
def test_depthwise_and_separable_match_tg_nn(padding, strides, fmt):
    x_last = _x((2, 7, 6, 3))
    x = _to_first(x_last) if fmt == "channels_first" else x_last
    dw = L.DepthwiseConv2D(3, strides=strides, padding=padding, depth_multiplier=2,
                           data_format=fmt, bias_initializer="random_normal")
    y = dw(x).numpy()
    assert [v.name.split("/")[-1] for v in dw.weights] == ["kernel", "bias"]
    assert dw.kernel.shape == (3, 3, 3, 2) and dw.bias.shape == (6,)
    assert dw.depthwise_kernel is dw.kernel
    expect = tg.nn.depthwise_conv2d(x_last, dw.kernel.numpy(), strides, padding.upper()) \
        .numpy() + dw.bias.numpy()
    assert expect.shape == (2, _length(7, 3, strides, 1, padding),
                            _length(6, 3, strides, 1, padding), 6)
    np.testing.assert_allclose(_to_last(y) if fmt == "channels_first" else y, expect,
                               rtol=1e-5, atol=1e-5)

    sep = L.SeparableConv2D(4, 3, strides=strides, padding=padding, depth_multiplier=2,
                            data_format=fmt, activation="tanh", bias_initializer="ones")
    y = sep(x).numpy()
    assert [v.name.split("/")[-1] for v in sep.weights] == \
        ["depthwise_kernel", "pointwise_kernel", "bias"]
    assert [v.shape for v in sep.weights] == [(3, 3, 3, 2), (1, 1, 6, 4), (4,)]
    mid = tg.nn.depthwise_conv2d(x_last, sep.depthwise_kernel.numpy(), strides,
                                 padding.upper())
    expect = np.tanh(tg.nn.conv2d(mid, sep.pointwise_kernel.numpy(), 1, "VALID").numpy() + 1.0)
    np.testing.assert_allclose(_to_last(y) if fmt == "channels_first" else y, expect,
                               rtol=1e-5, atol=1e-5)


# -- gradients -------------------------------------------------------------------------------------

def _check_layer_gradients(layer, x, eps=1e-6, tol=1e-6):
    """The tape's gradients of sum(layer(x) * r) w.r.t. x and every weight against central
    differences along a random direction (float64)."""
    x = tg.constant(x)
    y0 = layer(x)
    r = tg.constant(_x(y0.shape, np.float64, seed=5))
    variables = layer.trainable_variables
    assert variables, "the layer has weights"
    with tg.GradientTape() as tape:
        tape.watch(x)
        loss = tg.reduce_sum(layer(x) * r)
    grads = tape.gradient(loss, [x] + variables)
    assert all(g is not None for g in grads)
    rng = np.random.default_rng(7)
    f = lambda: float(tg.reduce_sum(layer(x) * r))  # noqa: E731
    d = rng.normal(size=x.shape)
    numeric = (float(tg.reduce_sum(layer(x + eps * d) * r)) -
               float(tg.reduce_sum(layer(x - eps * d) * r))) / (2 * eps)
    assert numeric == pytest.approx(float(np.sum(grads[0].numpy() * d)), rel=tol, abs=tol)
    for v, g in zip(variables, grads[1:]):
        base = v.numpy()
        d = rng.normal(size=base.shape)
        v.assign(base + eps * d)
        up = f()
        v.assign(base - eps * d)
        down = f()
        v.assign(base)
        assert (up - down) / (2 * eps) == pytest.approx(float(np.sum(g.numpy() * d)),
                                                        rel=tol, abs=tol), v.name


@pytest.mark.parametrize("make,shape", [
    (lambda **kw: L.Conv1D(3, 2, strides=2, padding="same", activation="tanh", **kw), (2, 5, 2)),
    (lambda **kw: L.Conv2D(4, 3, padding="same", groups=2, bias_initializer="ones",
                           activation="softplus", data_format="channels_first", **kw),
     (1, 2, 5, 4)),
    (lambda **kw: L.Conv3D(2, 2, strides=2, activation="tanh", **kw), (1, 4, 3, 4, 2)),
    (lambda **kw: L.Conv2DTranspose(3, 3, strides=2, padding="same", output_padding=1,
                                    activation="tanh", **kw), (1, 3, 2, 2)),
    (lambda **kw: L.Conv1DTranspose(2, 3, strides=2, padding="valid", output_padding=1,
                                    activation="tanh", **kw), (1, 3, 2)),
    (lambda **kw: L.DepthwiseConv2D(3, depth_multiplier=2, activation="tanh", **kw),
     (1, 5, 4, 2)),
    (lambda **kw: L.SeparableConv2D(3, 2, strides=2, activation="tanh", **kw), (1, 5, 4, 2)),
])
def test_gradients_flow_to_every_weight(make, shape):
    layer = make(dtype="float64")
    _check_layer_gradients(layer, _x(shape, np.float64))


@pytest.mark.parametrize("make,shape", [
    (lambda: L.MaxPooling2D(2, padding="same"), (1, 5, 5, 2)),
    (lambda: L.AveragePooling2D(3, 2, data_format="channels_first"), (1, 2, 5, 5)),
    (lambda: L.AveragePooling1D(padding="same"), (2, 5, 3)),
    (lambda: L.GlobalAveragePooling2D(), (2, 3, 3, 2)),
    (lambda: L.GlobalMaxPooling2D(), (2, 3, 3, 2)),
    (lambda: L.ZeroPadding2D(((1, 0), (2, 1))), (1, 3, 3, 2)),
    (lambda: L.Cropping2D(1), (1, 4, 4, 2)),
    (lambda: L.UpSampling2D(), (1, 2, 3, 2)),
    (lambda: L.UpSampling2D(interpolation="bilinear"), (1, 2, 3, 2)),
])
def test_gradients_through_pooling_and_reshaping(make, shape):
    layer = make()
    x = tg.constant(_x(shape, np.float64))
    tg.test.check_gradients(lambda v: layer(v), [x], atol=1e-6, rtol=1e-5)


# -- pooling ---------------------------------------------------------------------------------------

POOL_CASES = [(rank, kind, padding, strides, fmt)
              for rank in (1, 2, 3) for kind in ("MAX", "AVG") for padding in ("valid", "same")
              for strides in (None, 1) for fmt in ("channels_last", "channels_first")]


@pytest.mark.parametrize("rank,kind,padding,strides,fmt", POOL_CASES)
def test_pooling_matches_tg_nn(rank, kind, padding, strides, fmt):
    cls = getattr(L, f"{'Max' if kind == 'MAX' else 'Average'}Pooling{rank}D")
    spatial = (7, 6, 5)[:rank]
    x_last = _x((2,) + spatial + (3,))
    x = _to_first(x_last) if fmt == "channels_first" else x_last
    layer = cls(strides=strides, padding=padding, data_format=fmt)
    assert layer.pool_size == (2,) * rank  # Keras' default
    assert layer.strides == ((2,) * rank if strides is None else (1,) * rank)
    y = layer(x).numpy()
    s = 2 if strides is None else 1
    expect = tg.nn.pool(x_last, [2] * rank, kind, strides=[s] * rank,
                        padding=padding.upper()).numpy()
    assert expect.shape == (2,) + tuple(_length(n, 2, s, 1, padding) for n in spatial) + (3,)
    np.testing.assert_allclose(_to_last(y) if fmt == "channels_first" else y, expect,
                               rtol=1e-6, atol=1e-6)
    assert layer.weights == []


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_global_pooling(rank, fmt):
    x = _x((2,) + (4, 3, 2)[:rank] + (5,))
    axes = tuple(range(1, rank + 1))
    if fmt == "channels_first":
        x, axes = _to_first(x), tuple(range(2, rank + 2))
    for kind, ref in (("Average", np.mean), ("Max", np.max)):
        cls = getattr(L, f"Global{kind}Pooling{rank}D")
        y = cls(data_format=fmt)(x).numpy()
        np.testing.assert_allclose(y, ref(x, axis=axes), rtol=1e-6)
        assert y.shape == (2, 5)
        y = cls(data_format=fmt, keepdims=True)(x).numpy()
        np.testing.assert_allclose(y, ref(x, axis=axes, keepdims=True), rtol=1e-6)


# -- padding, cropping, upsampling -----------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_zero_padding_and_cropping(fmt):
    x = _x((2, 4, 5, 3))
    first = fmt == "channels_first"
    xi = _to_first(x) if first else x
    back = _to_last if first else (lambda a: a)
    for padding, pairs in ((2, ((2, 2), (2, 2))), ((1, 3), ((1, 1), (3, 3))),
                           (((1, 0), (0, 2)), ((1, 0), (0, 2)))):
        layer = L.ZeroPadding2D(padding, data_format=fmt)
        assert layer.padding == pairs
        np.testing.assert_array_equal(back(layer(xi).numpy()),
                                      np.pad(x, ((0, 0),) + pairs + ((0, 0),)))
    layer = L.Cropping2D(((1, 0), (2, 1)), data_format=fmt)
    np.testing.assert_array_equal(back(layer(xi).numpy()), x[:, 1:, 2:4])
    np.testing.assert_array_equal(back(L.Cropping2D(1, data_format=fmt)(xi).numpy()),
                                  x[:, 1:3, 1:4])
    y = L.ZeroPadding1D((1, 2))(x[:, 0])
    np.testing.assert_array_equal(y.numpy(), np.pad(x[:, 0], ((0, 0), (1, 2), (0, 0))))
    np.testing.assert_array_equal(L.Cropping1D((2, 1))(x[:, 0]).numpy(), x[:, 0, 2:4])
    with pytest.raises(ValueError, match="should be smaller than the corresponding spatial"):
        L.Cropping2D(((2, 2), (0, 0)))(x)
    with pytest.raises(ValueError, match="should have two elements"):
        L.ZeroPadding2D((1, 2, 3))
    with pytest.raises(ValueError, match="1st entry of padding"):
        L.ZeroPadding2D(((1, 2, 3), (1, 1)))


@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_upsampling(fmt):
    x = _x((2, 3, 4, 2))
    first = fmt == "channels_first"
    xi = _to_first(x) if first else x
    back = _to_last if first else (lambda a: a)
    y = L.UpSampling2D((2, 3), data_format=fmt)(xi).numpy()
    np.testing.assert_array_equal(back(y), np.repeat(np.repeat(x, 2, axis=1), 3, axis=2))
    y = L.UpSampling2D(2, data_format=fmt, interpolation="bilinear")(xi).numpy()
    np.testing.assert_allclose(back(y), tg.image.resize(x, [6, 8]).numpy(), rtol=1e-6)
    y1 = L.UpSampling1D(3)(x[:, 0]).numpy()
    np.testing.assert_array_equal(y1, np.repeat(x[:, 0], 3, axis=1))
    with pytest.raises(ValueError, match="interpolation"):
        L.UpSampling2D(interpolation="area")


# -- configs, summaries, errors --------------------------------------------------------------------

ALL_LAYERS = [
    (lambda: L.Conv1D(4, 3, strides=2, padding="causal", activation="gelu", name="c1"),
     (2, 9, 3)),
    (lambda: L.Conv2D(4, (3, 2), padding="same", data_format="channels_first", groups=2,
                      use_bias=False, kernel_initializer="he_normal"), (1, 2, 6, 5)),
    (lambda: L.Conv3D(2, 2, dilation_rate=2, bias_initializer="ones"), (1, 5, 5, 5, 1)),
    (lambda: L.Conv2DTranspose(3, 3, strides=2, output_padding=1), (1, 4, 4, 2)),
    (lambda: L.Conv1DTranspose(3, 3, strides=2, padding="same", data_format="channels_first"),
     (1, 2, 5)),
    (lambda: L.DepthwiseConv2D(3, depth_multiplier=2, padding="same"), (1, 5, 5, 3)),
    (lambda: L.SeparableConv2D(4, 3, depth_multiplier=2, activation="tanh"), (1, 5, 5, 3)),
    (lambda: L.MaxPooling2D(3, 2, padding="same"), (1, 5, 5, 3)),
    (lambda: L.AveragePooling1D(3, padding="same"), (1, 7, 3)),
    (lambda: L.GlobalAveragePooling2D(keepdims=True), (1, 5, 5, 3)),
    (lambda: L.ZeroPadding2D(((1, 2), (0, 1))), (1, 5, 5, 3)),
    (lambda: L.UpSampling2D((2, 1), interpolation="bilinear"), (1, 5, 5, 3)),
    (lambda: L.Cropping2D(((1, 1), (2, 0))), (1, 5, 5, 3)),
]


@pytest.mark.parametrize("make,shape", ALL_LAYERS)
def test_config_round_trip(make, shape):
    layer = make()
    x = _x(shape)
    y = layer(x).numpy()
    config = layer.get_config()
    assert config["name"] == layer.name and config["trainable"] is True
    clone = type(layer).from_config(dict(config, name=layer.name + "_clone"))
    assert {k: v for k, v in clone.get_config().items() if k != "name"} == \
        {k: v for k, v in config.items() if k != "name"}
    y2 = clone(x)
    assert [w.shape for w in clone.get_weights()] == [w.shape for w in layer.get_weights()]
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(clone(x).numpy(), y, rtol=1e-6, atol=1e-6)
    assert y2.shape == y.shape


def test_sequential_summary_counts_and_config():
    model = keras.Sequential([
        keras.Input(shape=(16, 16, 3)),
        L.Conv2D(8, 3, padding="same", activation="gelu"),             # 3*3*3*8 + 8 = 224
        L.DepthwiseConv2D(3, depth_multiplier=2, use_bias=False),      # 3*3*8*2 = 144
        L.SeparableConv2D(4, 3, strides=2, padding="same"),            # 9*16 + 16*4 + 4 = 212
        L.Conv2DTranspose(5, 2, strides=2),                            # 2*2*5*4 + 5 = 85
        L.MaxPooling2D(),
        L.GlobalAveragePooling2D(),
        L.Dense(3)])                                                   # 5*3 + 3 = 18
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "Total params: 683" in text and "Trainable params: 683" in text
    assert "(None, 14, 14, 16)" in text and "(None, 7, 7, 4)" in text
    assert "(None, 14, 14, 5)" in text and "(None, 7, 7, 5)" in text
    assert sum(int(np.prod(v.shape)) for v in model.trainable_variables) == 683
    clone = keras.Sequential.from_config(model.get_config())
    assert [type(a) for a in clone.layers] == [type(a) for a in model.layers]
    assert sum(int(np.prod(v.shape)) for v in clone.variables) == 683
    x = _x((2, 16, 16, 3))
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(clone(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)


def test_functional_model_with_conv_layers_and_regularizer():
    inputs = keras.Input(shape=(8, 8, 1))
    h = L.Conv2D(4, 3, padding="same", kernel_regularizer=keras.regularizers.l2(0.1))(inputs)
    a = L.MaxPooling2D()(h)
    b = L.AveragePooling2D()(h)
    out = L.GlobalMaxPooling2D()(L.Concatenate()([a, b]))
    model = keras.Model(inputs, out)
    assert out.shape == (None, 8)
    x = _x((3, 8, 8, 1))
    assert model(x).shape == (3, 8)
    conv = model.layers[1]
    assert isinstance(conv, L.Conv2D)
    penalty = 0.1 * np.sum(conv.kernel.numpy() ** 2)
    np.testing.assert_allclose([float(v) for v in model.losses], [penalty], rtol=1e-5)


@pytest.mark.parametrize("make,shape,ndim", [
    (lambda: L.Conv2D(2, 3), (8, 8, 1), 4),
    (lambda: L.Conv1D(2, 3), (2, 8, 8, 1), 3),
    (lambda: L.Conv3D(2, 3), (2, 8, 8, 1), 5),
    (lambda: L.Conv2DTranspose(2, 3), (8, 8), 4),
    (lambda: L.Conv1DTranspose(2, 3), (8, 8, 1, 1), 3),
    (lambda: L.DepthwiseConv2D(3), (2, 8, 8), 4),
    (lambda: L.SeparableConv2D(2, 3), (2, 8, 8, 1, 1), 4),
    (lambda: L.MaxPooling2D(), (2, 8, 8), 4),
    (lambda: L.AveragePooling1D(), (2, 8, 8, 1), 3),
    (lambda: L.GlobalAveragePooling2D(), (2, 8), 4),
    (lambda: L.ZeroPadding2D(), (2, 8, 8), 4),
    (lambda: L.UpSampling2D(), (2, 8), 4),
    (lambda: L.Cropping2D(1), (8, 8, 1), 4),
])
def test_bad_input_rank_is_a_keras_value_error(make, shape, ndim):
    layer = make()
    with pytest.raises(ValueError, match=rf'layer "{layer.name}" is incompatible with the layer: '
                                         rf"expected ndim={ndim}, found ndim={len(shape)}"):
        layer(np.zeros(shape, np.float32))


def test_built_layers_check_later_inputs():
    conv = L.Conv2D(2, 3)
    conv(np.zeros((1, 5, 5, 3), np.float32))
    with pytest.raises(ValueError, match="expected axis -1 of input shape to have value 3"):
        conv(np.zeros((1, 5, 5, 4), np.float32))
    with pytest.raises(ValueError, match="expected ndim=4, found ndim=3"):
        conv(np.zeros((5, 5, 3), np.float32))
    with pytest.raises(ValueError, match="output size would be negative"):
        L.Conv2D(2, 5)(np.zeros((1, 3, 3, 1), np.float32))
    with pytest.raises(ValueError, match="output size would be negative"):
        L.MaxPooling2D(4)(np.zeros((1, 3, 3, 1), np.float32))


def test_argument_errors():
    with pytest.raises(ValueError, match="strictly positive value. Received filters=0"):
        L.Conv2D(0, 3)
    with pytest.raises(ValueError, match="`kernel_size` argument must be a tuple of 2 integers"):
        L.Conv2D(2, (3, 3, 3))
    with pytest.raises(ValueError, match="`padding` argument must be one of"):
        L.Conv2D(2, 3, padding="full")
    with pytest.raises(ValueError, match="`padding` argument must be one of"):
        L.Conv2D(2, 3, padding="causal")
    with pytest.raises(ValueError, match="data_format"):
        L.Conv2D(2, 3, data_format="NHWC")
    with pytest.raises(ValueError, match="evenly divisible by the number of groups"):
        L.Conv2D(3, 3, groups=2)
    with pytest.raises(ValueError, match=r"input channels must be evenly divisible.*groups=2"):
        L.Conv2D(4, 3, groups=2)(np.zeros((1, 5, 5, 3), np.float32))
    with pytest.raises(ValueError, match="`strides > 1` not supported in conjunction"):
        L.Conv2D(2, 3, strides=2, dilation_rate=2)
    with pytest.raises(ValueError, match="Strides must be greater than output padding"):
        L.Conv2DTranspose(2, 3, strides=2, output_padding=2)
    with pytest.raises(ValueError, match="depth_multiplier"):
        L.DepthwiseConv2D(3, depth_multiplier=0)
    with pytest.raises(ValueError, match="`pool_size` argument must be a tuple of 2"):
        L.MaxPooling2D((2, 2, 2))
    with pytest.raises(ValueError, match="`strides` argument .* do not satisfy `value > 0`"):
        L.AveragePooling1D(2, strides=0)
    with pytest.raises(ValueError, match="unknown activation"):
        L.Conv2D(2, 3, activation="nope")


def test_layers_keep_float64_and_autocast_other_floats():
    conv = L.Conv2D(2, 3, dtype="float64")
    y = conv(np.ones((1, 4, 4, 1)))
    assert y.dtype == tg.float64 and conv.kernel.dtype == tg.float64
    # Keras' autocast: a float32 input into a float64 layer is cast to float64
    assert conv(np.ones((1, 4, 4, 1), np.float32)).dtype == tg.float64
    assert conv(tg.ones((1, 4, 4, 1))).dtype == tg.float64
    assert L.MaxPooling2D()(np.ones((1, 4, 4, 1), np.float32)).dtype == tg.float32


def test_keras_aliases():
    assert L.Convolution2D is L.Conv2D and L.MaxPool2D is L.MaxPooling2D
    assert L.AvgPool1D is L.AveragePooling1D and L.GlobalAvgPool2D is L.GlobalAveragePooling2D
    from tapegpu.keras.layers import Conv2D, GlobalMaxPooling2D  # noqa: F401
    assert Conv2D is L.Conv2D


def test_trainable_false_freezes_the_kernel():
    conv = L.Conv2D(2, 3, trainable=False)
    conv(np.ones((1, 4, 4, 1), np.float32))
    assert conv.trainable_variables == [] and len(conv.non_trainable_variables) == 2


def test_default_names_are_keras():
    keras.backend.clear_session()
    made = [L.Conv1D(1, 1), L.Conv2D(1, 1), L.Conv3D(1, 1), L.Conv2DTranspose(1, 1),
            L.Conv1DTranspose(1, 1),
            L.DepthwiseConv2D(1), L.SeparableConv2D(1, 1), L.MaxPooling2D(),
            L.AveragePooling1D(), L.GlobalAveragePooling2D(), L.GlobalMaxPooling1D(),
            L.ZeroPadding2D(), L.UpSampling2D(), L.Cropping2D(), L.Conv2D(1, 1)]
    assert [layer.name for layer in made] == [
        "conv1d", "conv2d", "conv3d", "conv2d_transpose", "conv1d_transpose", "depthwise_conv2d",
        "separable_conv2d", "max_pooling2d", "average_pooling1d", "global_average_pooling2d",
        "global_max_pooling1d", "zero_padding2d", "up_sampling2d", "cropping2d", "conv2d_1"]


# -- against Keras itself --------------------------------------------------------------------------

REFERENCE = os.path.join(os.path.dirname(__file__), "data", "keras_conv_reference.npz")


def _reference_cases():
    with np.load(REFERENCE) as ref:
        return json.loads(str(ref["cases"]))


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


@pytest.mark.parametrize("i,name,kwargs", [(i, name, kwargs) for i, (name, kwargs, _) in
                                           enumerate(_reference_cases())])
def test_outputs_and_weight_names_match_keras(i, name, kwargs):
    """Keras 3's own outputs (tests/keras/data/make_keras_reference.py) on its own weights."""
    with np.load(REFERENCE) as ref:
        x, expect = ref[f"x{i}"], ref[f"y{i}"]
        keras_names = [str(n) for n in ref[f"names{i}"]]
        weights = [ref[f"w{i}_{j}"] for j in range(len(keras_names))]
    layer = getattr(L, name)(**{k: _tuples(v) for k, v in kwargs.items()})
    layer(x)
    assert [v.name.split("/")[-1] for v in layer.weights] == keras_names
    assert [v.shape for v in layer.weights] == [w.shape for w in weights]
    layer.set_weights(weights)
    y = layer(x).numpy()
    assert y.shape == expect.shape
    np.testing.assert_allclose(y, expect, rtol=1e-4, atol=1e-5)


def test_input_shape_argument_builds_a_sequential_model():
    model = keras.Sequential([L.Conv2D(4, 3, input_shape=(10, 10, 2), name="first"),
                              L.MaxPooling2D(), L.GlobalAveragePooling2D()])
    assert model.built and model.layers[0].kernel.shape == (3, 3, 2, 4)
    lines = []
    model.summary(print_fn=lines.append)
    assert any("first (Conv2D)" in line and "(None, 8, 8, 4)" in line and "76" in line
               for line in lines)
    assert model(np.ones((3, 10, 10, 2), np.float32)).shape == (3, 4)
