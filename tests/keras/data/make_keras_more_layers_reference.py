"""Writes keras_more_layers_reference.npz: Keras 3's outputs of its attention, wrapper, merge,
normalization and activation layers on random inputs (with masks where the case says so), the
layers' weights (random, set by set_weights) and their names, and the gradients of
sum(output * probe) with respect to the weights and the inputs, for test_keras_more_layers.py.

Run with Keras 3 on TensorFlow installed (it was written with keras 3.15.1 on tensorflow
2.21.0):
    python tests/keras/data/make_keras_more_layers_reference.py
"""
import json
import os

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

# (layer, its arguments, input shapes (a list: called on a list for list-taking layers, else as
#  positional arguments), call keyword arguments, masks per input (None or a (batch, steps)
#  list of booleans), how the layer is called: "list" / "args")
M35 = [[True, True, True, False, False], [True, True, True, True, True]]
M34 = [[True, True, False, True], [False, True, True, True]]
M33 = [[True, True, False], [True, False, True]]
CASES = [
    ("MultiHeadAttention", dict(num_heads=2, key_dim=3), [(2, 4, 5), (2, 4, 5)],
     dict(return_attention_scores=True), None, "args"),
    ("MultiHeadAttention", dict(num_heads=2, key_dim=3, value_dim=2, output_shape=4,
                                use_bias=False), [(2, 3, 5), (2, 4, 6), (2, 4, 3)],
     dict(return_attention_scores=True), None, "args"),
    # scores returned: Keras' explicit path, whose masked-out query rows get weights 0 (its
    # fused path, without scores, would give them uniform weights; tapegpu always gives 0)
    ("MultiHeadAttention", dict(num_heads=3, key_dim=2), [(2, 5, 4), (2, 5, 4)],
     dict(use_causal_mask=True, return_attention_scores=True), [M35, M35], "args"),
    ("MultiHeadAttention", dict(num_heads=2, key_dim=2), [(2, 3, 4), (2, 4, 4)],
     dict(return_attention_scores=True), [M33, M34], "args"),
    ("MultiHeadAttention", dict(num_heads=2, key_dim=2, attention_axes=(1, 2)),
     [(2, 3, 2, 4), (2, 3, 2, 4)], dict(return_attention_scores=True), None, "args"),
    ("MultiHeadAttention", dict(num_heads=2, key_dim=3, use_gate=True), [(2, 4, 5), (2, 4, 5)],
     dict(use_causal_mask=True), None, "args"),
    ("Attention", dict(), [(2, 3, 4), (2, 4, 4)], dict(return_attention_scores=True),
     [M33, M34], "list"),
    ("Attention", dict(use_scale=True, score_mode="concat"), [(2, 4, 3), (2, 4, 3), (2, 4, 3)],
     dict(use_causal_mask=True), None, "list"),
    ("AdditiveAttention", dict(), [(2, 3, 4), (2, 4, 4), (2, 4, 4)],
     dict(return_attention_scores=True), [M33, M34, None], "list"),
    ("TimeDistributed", ("Dense", dict(units=3, activation="tanh")), [(2, 4, 5)], {}, None,
     "args"),
    ("TimeDistributed", ("Conv2D", dict(filters=2, kernel_size=2)), [(2, 3, 4, 4, 1)], {},
     None, "args"),
    ("Multiply", dict(), [(2, 3), (2, 3), (2, 3)], {}, None, "list"),
    ("Subtract", dict(), [(2, 3, 4), (2, 3, 4)], {}, None, "list"),
    ("Average", dict(), [(2, 3), (2, 3)], {}, None, "list"),
    ("Maximum", dict(), [(2, 5), (2, 5)], {}, None, "list"),
    ("Minimum", dict(), [(2, 5), (2, 5), (2, 5)], {}, None, "list"),
    ("Dot", dict(axes=1), [(3, 4), (3, 4)], {}, None, "list"),
    ("Dot", dict(axes=(2, 2), normalize=True), [(2, 3, 4), (2, 5, 4)], {}, None, "list"),
    ("Dot", dict(axes=(1, 2)), [(2, 3, 4), (2, 5, 3)], {}, None, "list"),
    ("PReLU", dict(), [(2, 3, 4)], {}, None, "args"),
    ("PReLU", dict(shared_axes=[1]), [(2, 3, 4)], {}, None, "args"),
    ("ELU", dict(alpha=0.7), [(2, 6)], {}, None, "args"),
    ("UnitNormalization", dict(), [(2, 3, 4)], {}, None, "args"),
    ("UnitNormalization", dict(axis=(1, 2)), [(2, 3, 4)], {}, None, "args"),
    ("GroupNormalization", dict(groups=2), [(2, 3, 4)], {}, None, "args"),
    ("GroupNormalization", dict(groups=-1, epsilon=1e-2), [(2, 5, 3)], {}, None, "args"),
    ("GroupNormalization", dict(groups=2, axis=1), [(2, 4, 3, 2)], {}, None, "args"),
    ("Permute", dict(dims=(2, 1)), [(2, 3, 4)], {}, None, "args"),
    ("RepeatVector", dict(n=3), [(2, 4)], {}, None, "args"),
    ("Identity", dict(), [(2, 3)], {}, None, "args"),
    ("Normalization", dict(), [(2, 3)], {}, None, "args"),
    ("Normalization", dict(axis=None, invert=True), [(2, 3)], {}, None, "args"),
]
ADAPT = {30: (7, 3), 31: (7, 3)}  # Normalization cases: adapt() on random data of this shape


def _layer(name, kwargs):
    if name == "TimeDistributed":
        inner, inner_kwargs = kwargs
        return keras.layers.TimeDistributed(getattr(keras.layers, inner)(**inner_kwargs))
    return getattr(keras.layers, name)(**kwargs)


def _call(layer, xs, masks, how, kwargs):
    if how == "list":
        return layer(xs, mask=masks, **kwargs) if masks is not None else layer(xs, **kwargs)
    if masks is not None:
        for x, m in zip(xs, masks):
            if m is not None:
                x._keras_mask = tf.constant(m)
        if len(xs) > 1 and masks[1] is not None:
            kwargs = dict(kwargs, value_mask=tf.constant(masks[1]))
    return layer(*xs, **kwargs)


def main():
    rng = np.random.default_rng(0)
    arrays = {"cases": np.array(json.dumps(CASES)),
              "versions": np.array(f"keras {keras.__version__}, tensorflow {tf.__version__}")}
    for i, (name, kwargs, shapes, call_kwargs, masks, how) in enumerate(CASES):
        layer = _layer(name, kwargs)
        xs = [rng.normal(size=s).astype("float32") for s in shapes]
        if i in ADAPT:
            data = rng.normal(loc=2.0, scale=3.0, size=ADAPT[i]).astype("float32")
            arrays[f"adapt{i}"] = data
            layer.adapt(data)
        _call(layer, [tf.constant(x) for x in xs], masks, how, dict(call_kwargs))
        weights = [rng.normal(scale=0.5, size=w.shape).astype(w.dtype) if w.dtype.kind == "f"
                   else w for w in layer.get_weights()]
        if i not in ADAPT:
            layer.set_weights(weights)
        weights = layer.get_weights()
        with tf.GradientTape() as tape:
            ts = [tf.constant(x) for x in xs]
            for t in ts:
                tape.watch(t)
            out = _call(layer, ts, masks, how, dict(call_kwargs))
            flat = tf.nest.flatten(out)
            probes = [rng.normal(size=t.shape).astype("float32") for t in flat]
            loss = sum(tf.reduce_sum(t * p) for t, p in zip(flat, probes))
        grads = tape.gradient(loss, layer.trainable_weights + ts)
        for j, x in enumerate(xs):
            arrays[f"x{i}_{j}"] = x
        for j, (t, p) in enumerate(zip(flat, probes)):
            arrays[f"y{i}_{j}"] = np.asarray(t)
            arrays[f"p{i}_{j}"] = p
        mask = getattr(flat[0], "_keras_mask", None)
        if mask is not None:
            arrays[f"outmask{i}"] = np.asarray(mask)
        for j, w in enumerate(weights):
            arrays[f"w{i}_{j}"] = w
        for j, g in enumerate(grads):
            arrays[f"g{i}_{j}"] = np.zeros(1, np.float32) if g is None else np.asarray(g)
        arrays[f"names{i}"] = np.array([w.path for w in layer.weights])
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "keras_more_layers_reference.npz")
    np.savez_compressed(path, **arrays)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
