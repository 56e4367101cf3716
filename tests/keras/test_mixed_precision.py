"""tg.keras.mixed_precision as Keras 3: policies, layers computing in float16/bfloat16 with
float32 variables, LossScaleOptimizer's dynamic loss scaling, compile(auto_scale_loss=), and
TensorFlow's mixed-precision guide programs (fit, and a custom tg.function loop with loss
scaling) running unchanged on every device with a loss within a stated tolerance of float32
training's."""
import numpy as np
import pytest

import tapegpu as tf
from tapegpu import keras
from tapegpu.keras import layers, mixed_precision

pytest.importorskip("ml_dtypes")

# the loss after two epochs of mixed-precision training against float32 training's, relative:
# the runs here differ by under 1e-3 (16-bit products, float32 variables and updates)
LOSS_RTOL = 5e-3


@pytest.fixture(autouse=True)
def _float32_policy_after():
    yield
    mixed_precision.set_global_policy("float32")


# -- policies -----------------------------------------------------------------------------------

def test_policies_are_keras_3s():
    p = mixed_precision.Policy("mixed_float16")
    assert (p.name, p.compute_dtype, p.variable_dtype) == ("mixed_float16", "float16", "float32")
    p = mixed_precision.DTypePolicy("mixed_bfloat16")
    assert (p.compute_dtype, p.variable_dtype) == ("bfloat16", "float32")
    assert mixed_precision.Policy("float64").compute_dtype == "float64"
    assert repr(p) == '<DTypePolicy "mixed_bfloat16">' and keras.DTypePolicy is mixed_precision.Policy
    assert mixed_precision.global_policy() == mixed_precision.Policy("float32")
    with pytest.raises(ValueError, match="Valid policies include 'mixed_float16'"):
        mixed_precision.Policy("mixed_int8")
    with pytest.raises(ValueError, match="set_global_policy"):
        mixed_precision.set_global_policy(3)
    mixed_precision.set_global_policy("mixed_bfloat16")
    assert mixed_precision.global_policy().name == "mixed_bfloat16"
    mixed_precision.set_global_policy(None)
    assert mixed_precision.global_policy().name == "float32"


@pytest.mark.parametrize("policy,compute", [("mixed_float16", tf.float16),
                                            ("mixed_bfloat16", "bfloat16")])
def test_layers_compute_in_16_bits_with_float32_variables(policy, compute, tg_device):
    """The TF guide's checks: the layer's policy, float16/bfloat16 outputs, float32 kernels;
    gradients reach the float32 variables in float32; a float32 last layer gives float32."""
    mixed_precision.set_global_policy(policy)
    dense = layers.Dense(8, activation="relu", name="dense_1")
    norm = layers.BatchNormalization()
    out = layers.Activation("softmax", dtype="float32")
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    with tf.GradientTape() as tape:
        h = dense(x)
        n = norm(h, training=True)
        y = out(n)
        loss = tf.reduce_sum(y * y)
    assert dense.dtype_policy.name == policy and dense.compute_dtype == tf.as_dtype(compute).name
    assert dense.variable_dtype == "float32" and dense.kernel.dtype == tf.float32
    assert h.dtype == compute and n.dtype == compute and y.dtype == tf.float32
    assert norm.moving_mean.dtype == tf.float32 and norm.gamma.dtype == tf.float32
    grads = tape.gradient(loss, dense.trainable_variables + norm.trainable_variables)
    assert all(g is not None and g.dtype == tf.float32 for g in grads)
    # the variables are themselves again after the call (the autocast lasts the call only)
    assert isinstance(dense.kernel, tf.Variable) and dense.kernel in dense.trainable_variables
    # a layer's own dtype= wins over the global policy; a policy name works per layer too
    mixed_precision.set_global_policy("float32")
    d16 = layers.Dense(3, dtype=policy)
    assert d16(x).dtype == compute and d16.kernel.dtype == tf.float32


def test_16_bit_products_are_rounded_as_tensorflow_computes_them():
    """A mixed Dense layer's output equals the float64 product of the 16-bit-rounded input and
    kernel, rounded once to 16 bits (what a float32-accumulating GEMM gives)."""
    mixed_precision.set_global_policy("mixed_bfloat16")
    d = layers.Dense(16, use_bias=False)
    x = np.random.default_rng(1).standard_normal((8, 300)).astype(np.float32)
    y = d(x).numpy().astype(np.float64)
    xb = tf.cast(x, "bfloat16").numpy().astype(np.float64)
    kb = tf.cast(d.kernel, "bfloat16").numpy().astype(np.float64)
    ref = xb @ kb
    np.testing.assert_allclose(y, ref, rtol=2 ** -8, atol=1e-6)


def test_losses_of_16_bit_predictions_are_float32(tg_device):
    """Keras 3's losses compute in float32: a mixed model without a float32 last layer still
    gets a float32 loss (a float16 loss would round it to 11 bits)."""
    mixed_precision.set_global_policy("mixed_float16")
    dense = layers.Dense(3)
    x = np.random.default_rng(2).standard_normal((16, 5)).astype(np.float32)
    pred = dense(x)
    assert pred.dtype == tf.float16
    y = np.arange(16) % 3
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y, pred)
    ref = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
        y, tf.cast(pred, tf.float32))
    assert loss.dtype == tf.float32 and float(loss) == float(ref)
    assert keras.losses.MeanSquaredError()(np.zeros((16, 3), np.float32), pred).dtype == \
        tf.float32


# -- LossScaleOptimizer -------------------------------------------------------------------------

def _lso(**kw):
    return keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.5), **kw)


def test_loss_scale_optimizer_scales_unscales_and_updates(tg_device):
    opt = _lso(initial_scale=1024.0)
    assert mixed_precision.LossScaleOptimizer is keras.optimizers.LossScaleOptimizer
    w = tf.Variable([1.0, -2.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * w)
        scaled = opt.scale_loss(loss)
    assert float(scaled) == 1024.0 * 5.0
    grads = tape.gradient(scaled, [w])
    assert grads[0].numpy().tolist() == [2048.0, -4096.0]
    opt.apply_gradients(zip(grads, [w]))
    assert w.numpy().tolist() == [0.0, 0.0]  # 1 - 0.5 * 2, -2 - 0.5 * -4: the unscaled step
    assert int(opt.iterations) == 1 and float(opt.dynamic_scale) == 1024.0


def test_non_finite_gradients_skip_the_step_and_halve_the_scale(tg_device):
    opt = _lso(initial_scale=8.0, dynamic_growth_steps=2)
    w = tf.Variable([1.0, 2.0])
    opt.apply_gradients([(tf.constant([np.inf, 1.0]), w)])
    assert w.numpy().tolist() == [1.0, 2.0] and float(opt.dynamic_scale) == 4.0
    assert int(opt.iterations) == 0  # a skipped step is no update
    opt.apply_gradients([(tf.constant([np.nan, 1.0]), w)])
    assert float(opt.dynamic_scale) == 2.0
    for _ in range(2):  # two finite steps in a row double it
        opt.apply_gradients([(tf.constant([2.0, 2.0]), w)])
    assert float(opt.dynamic_scale) == 4.0 and int(opt.iterations) == 2
    assert int(opt.step_counter) == 0
    # both steps unscaled by 2 (the scale doubled after the second): gradient 1, step 0.5
    assert w.numpy().tolist() == [0.0, 1.0]


def test_keras_2_form_get_scaled_loss_and_get_unscaled_gradients(tg_device):
    """TensorFlow's Keras 2 guide: the gradients it unscales are applied as they are."""
    opt = _lso(initial_scale=64.0)
    w = tf.Variable([3.0])
    with tf.GradientTape() as tape:
        scaled = opt.get_scaled_loss(w * w)
    grads = opt.get_unscaled_gradients(tape.gradient(scaled, [w]))
    assert grads[0].numpy().tolist() == [6.0]
    opt.apply_gradients(zip(grads, [w]))
    assert w.numpy().tolist() == [0.0]


def test_loss_scaling_in_a_tf_function_follows_the_scale_at_every_call(tg_device):
    """A traced step reads the scale variable at each call and replays the check: an overflow
    in the third call is skipped and halves the scale for the fourth."""
    opt = _lso(initial_scale=2.0 ** 15, dynamic_growth_steps=1000)
    w = tf.Variable([0.5])

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cast(tf.cast(w, tf.float16) * tf.cast(x, tf.float16),
                                         tf.float32))
            scaled = opt.scale_loss(loss)
        grads = tape.gradient(scaled, [w])
        opt.apply_gradients(zip(grads, [w]))
        return scaled

    assert float(step(tf.constant([1.0]))) == 0.5 * 2.0 ** 15  # then w = 0.5 - 0.5 * 1
    assert float(step(tf.constant([1.0]))) == 0.0 and w.numpy().tolist() == [-0.5]
    step(tf.constant([np.inf]))  # inf gradient: skipped, the scale halves
    assert w.numpy().tolist() == [-0.5] and float(opt.dynamic_scale) == 2.0 ** 14
    assert float(step(tf.constant([2.0]))) == -0.5 * 2.0 * 2.0 ** 14
    assert int(opt.iterations) == 3 and w.numpy().tolist() == [-1.5]


def test_loss_scale_optimizer_refuses_bad_arguments():
    with pytest.raises(TypeError, match="inner_optimizer"):
        keras.optimizers.LossScaleOptimizer("sgd")
    with pytest.raises(ValueError, match="initial_scale"):
        _lso(initial_scale=0.0)
    with pytest.raises(ValueError, match="dynamic_growth_steps"):
        _lso(dynamic_growth_steps=0)
    with pytest.raises(TypeError, match="inner_optimizer"):
        keras.optimizers.LossScaleOptimizer(_lso())


def test_compile_wraps_a_mixed_float16_models_optimizer():
    """Keras 3: auto_scale_loss (default True) wraps for mixed_float16 only; jit_compile is
    accepted."""
    def model():
        return keras.Sequential([layers.Dense(4), layers.Dense(2)])
    mixed_precision.set_global_policy("mixed_float16")
    m = model()
    m.compile(optimizer="sgd", loss="mse", jit_compile=True)
    assert isinstance(m.optimizer, keras.optimizers.LossScaleOptimizer)
    m2 = model()
    m2.compile(optimizer="sgd", loss="mse", auto_scale_loss=False)
    assert isinstance(m2.optimizer, keras.optimizers.SGD)
    mixed_precision.set_global_policy("mixed_bfloat16")
    m3 = model()
    m3.compile(optimizer="sgd", loss="mse", jit_compile="auto")
    assert isinstance(m3.optimizer, keras.optimizers.SGD)


# -- TensorFlow's mixed-precision guide, unchanged ---------------------------------------------

def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 20)).astype("float32")
    y = np.argmax(x @ rng.standard_normal((20, 4)).astype("float32"), axis=1).astype("int64")
    return x, y


def _guide_model():
    inputs = keras.Input(shape=(20,), name="digits")
    x = layers.Dense(64, activation="relu", name="dense_1")(inputs)
    x = layers.Dense(64, activation="relu", name="dense_2")(x)
    x = layers.Dense(4, name="dense_logits")(x)
    outputs = layers.Activation("softmax", dtype="float32", name="predictions")(x)
    return keras.Model(inputs=inputs, outputs=outputs)


def _fit(policy):
    mixed_precision.set_global_policy(policy)
    tf.random.set_seed(1)
    model = _guide_model()
    model.compile(loss="sparse_categorical_crossentropy",
                  optimizer=keras.optimizers.RMSprop(1e-3), metrics=["accuracy"])
    x, y = _data()
    history = model.fit(x, y, batch_size=64, epochs=2, verbose=0)
    mixed_precision.set_global_policy("float32")
    return history.history["loss"], model


def _custom_loop(policy):
    mixed_precision.set_global_policy(policy)
    tf.random.set_seed(1)
    model = _guide_model()
    optimizer = keras.optimizers.RMSprop(1e-3)
    optimizer = mixed_precision.LossScaleOptimizer(optimizer)
    loss_object = keras.losses.SparseCategoricalCrossentropy()
    x, y = _data()

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            predictions = model(x)
            loss = loss_object(y, predictions)
            scaled_loss = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled_loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    losses = []
    for _ in range(2):
        losses.append(np.mean([float(train_step(x[i:i + 64], y[i:i + 64]))
                               for i in range(0, 256, 64)]))
    mixed_precision.set_global_policy("float32")
    return losses, optimizer


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_tf_guide_fit_matches_float32_training(policy, tg_device):
    ref, _ = _fit("float32")
    got, model = _fit(policy)
    assert model.get_layer("dense_1").kernel.dtype == tf.float32
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer) == \
        (policy == "mixed_float16")
    assert got[-1] < 0.9 * got[0]  # it trains
    np.testing.assert_allclose(got, ref, rtol=LOSS_RTOL)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_tf_guide_custom_loop_with_loss_scaling_matches_float32_training(policy, tg_device):
    ref, _ = _custom_loop("float32")
    got, optimizer = _custom_loop(policy)
    assert got[-1] < 0.95 * got[0]
    np.testing.assert_allclose(got, ref, rtol=LOSS_RTOL)
    assert int(optimizer.iterations) == 8 and float(optimizer.dynamic_scale) == 2.0 ** 15


def _encoder_losses(policy, steps=3):
    """A post-norm Transformer encoder block (the form of benchmarks/gpu_cost.py's) trained a
    few SGD steps under `policy`: its losses and the attention output's dtype."""
    mixed_precision.set_global_policy(policy)
    tf.random.set_seed(3)
    inp = keras.Input(shape=(6, 16))
    a = layers.MultiHeadAttention(num_heads=2, key_dim=8)(inp, inp)
    h = layers.LayerNormalization()(layers.Add()([inp, a]))
    f = layers.Dense(16)(layers.Dense(32, activation="relu")(h))
    h = layers.LayerNormalization()(layers.Add()([h, f]))
    out = layers.Dense(3, dtype="float32")(layers.GlobalAveragePooling1D()(h))
    m = keras.Model(inp, out)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((4, 6, 16)).astype(np.float32))
    y = tf.constant(rng.integers(0, 3, 4).astype(np.int32))
    opt = keras.optimizers.SGD(0.1)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    losses = []
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, m(x, training=True))
        grads = tape.gradient(loss, m.trainable_variables)
        assert all(g is not None and g.dtype == tf.float32 for g in grads)
        opt.apply_gradients(zip(grads, m.trainable_variables))
        losses.append(float(loss))
    attention = keras.Model(inp, a)(x).dtype
    mixed_precision.set_global_policy("float32")
    return losses, attention


@pytest.mark.parametrize("policy,compute,rtol", [("mixed_float16", tf.float16, 1e-2),
                                                 ("mixed_bfloat16", "bfloat16", 5e-2)])
def test_a_transformer_block_trains_in_16_bits(policy, compute, rtol, tg_device):
    """MultiHeadAttention's one attention op returned float32 for bfloat16 inputs on numpy
    (ml_dtypes' matmul widens), and the output projection refused the mixed dtypes."""
    ref, _ = _encoder_losses("float32")
    got, dtype = _encoder_losses(policy)
    assert dtype == compute
    np.testing.assert_allclose(got, ref, rtol=rtol)
