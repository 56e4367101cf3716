"""Writes keras_recurrent_reference.npz: Keras 3's outputs of its recurrent layers on random
inputs, with the layers' weights and the gradients of a loss of the outputs with respect to the
weights and the inputs, for test_keras_recurrent.py.

Run with Keras 3 on TensorFlow installed (it was written with keras 3.15.1 on tensorflow
2.21.0):
    python tests/keras/data/make_keras_recurrent_reference.py
"""
import json
import os

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

# (layer, its arguments, the wrapped layer and its arguments for Bidirectional or the cells for
#  RNN, input shape, whether an initial state is given)
CASES = [
    ("SimpleRNN", dict(units=5, return_sequences=True, return_state=True), None, (2, 4, 3),
     True),
    ("LSTM", dict(units=4, return_sequences=True, return_state=True), None, (2, 5, 3), True),
    ("LSTM", dict(units=3, go_backwards=True, return_state=True, unit_forget_bias=False),
     None, (3, 4, 2), False),
    ("GRU", dict(units=4, return_sequences=True, return_state=True), None, (2, 5, 3), True),
    ("GRU", dict(units=3, reset_after=False, go_backwards=True, return_sequences=True), None,
     (2, 4, 3), False),
    ("GRU", dict(units=3, use_bias=False), None, (2, 3, 2), False),
    ("Bidirectional", dict(merge_mode="concat"),
     ("LSTM", dict(units=3, return_sequences=True)), (2, 4, 3), False),
    ("Bidirectional", dict(merge_mode="sum"),
     ("GRU", dict(units=2, return_state=True)), (2, 4, 3), False),
    ("RNN", dict(return_sequences=True, return_state=True),
     [("LSTMCell", dict(units=4)), ("GRUCell", dict(units=3))], (2, 4, 3), False),
    # masked (MASKS below): carried states and outputs, zeros with zero_output_for_mask
    ("LSTM", dict(units=3, return_sequences=True, return_state=True), None, (3, 5, 2), True),
    ("GRU", dict(units=3, return_sequences=True, go_backwards=True, zero_output_for_mask=True),
     None, (3, 5, 2), False),
    ("SimpleRNN", dict(units=2, zero_output_for_mask=True), None, (3, 5, 2), False),
    ("Bidirectional", dict(merge_mode="concat"),
     ("GRU", dict(units=2, return_sequences=True)), (3, 5, 2), False),
]
MASK = [[True, True, False, True, False],   # the last step masked
        [False, True, True, True, True],    # the first step masked
        [True, False, False, True, True]]
MASKED = range(9, 13)  # the cases run with MASK


def _layer(name, kwargs, inner):
    if name == "Bidirectional":
        inner_name, inner_kwargs = inner
        return keras.layers.Bidirectional(getattr(keras.layers, inner_name)(**inner_kwargs),
                                          **kwargs)
    if name == "RNN":  # stacked cells
        return keras.layers.RNN([getattr(keras.layers, n)(**k) for n, k in inner], **kwargs)
    return getattr(keras.layers, name)(**kwargs)


def main():
    rng = np.random.default_rng(0)
    arrays = {"cases": np.array(json.dumps(CASES)),
              "versions": np.array(f"keras {keras.__version__}, tensorflow {tf.__version__}")}
    for i, (name, kwargs, inner, shape, with_state) in enumerate(CASES):
        layer = _layer(name, kwargs, inner)
        x = rng.normal(size=shape).astype("float32")
        units = kwargs.get("units")
        n_states = 2 if name == "LSTM" else 1
        states = [rng.normal(scale=0.5, size=(shape[0], units)).astype("float32")
                  for _ in range(n_states)] if with_state else None
        mask = np.array(MASK) if i in MASKED else None
        layer(x, initial_state=states, mask=mask)
        for j, w in enumerate(layer.get_weights()):  # Keras' own initial values
            arrays[f"init{i}_{j}"] = w
        weights = [rng.normal(scale=0.4, size=w.shape).astype("float32")
                   for w in layer.get_weights()]
        layer.set_weights(weights)
        xv = tf.Variable(x)
        with tf.GradientTape() as tape:
            out = layer(xv, initial_state=states, mask=mask)
            flat = tf.nest.flatten(out)
            probes = [rng.normal(size=t.shape).astype("float32") for t in flat]
            loss = sum(tf.reduce_sum(t * p) for t, p in zip(flat, probes))
        grads = tape.gradient(loss, layer.trainable_weights + [xv])
        arrays[f"x{i}"] = x
        if mask is not None:
            arrays[f"mask{i}"] = mask
        for j, s in enumerate(states or ()):
            arrays[f"s{i}_{j}"] = s
        for j, (t, p) in enumerate(zip(flat, probes)):
            arrays[f"y{i}_{j}"] = np.asarray(t)
            arrays[f"p{i}_{j}"] = p
        for j, w in enumerate(weights):
            arrays[f"w{i}_{j}"] = w
        for j, g in enumerate(grads):
            arrays[f"g{i}_{j}"] = np.asarray(g)
        arrays[f"names{i}"] = np.array([w.path for w in layer.weights])
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "keras_recurrent_reference.npz")
    np.savez_compressed(path, **arrays)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
