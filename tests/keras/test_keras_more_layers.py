"""keras.layers' attention, wrapper, merge, normalization, noise, reshaping and activation layers
(tapegpu/models/layers.py's attention classes, tapegpu/keras/more_layers.py): outputs and
gradients against Keras 3's own, stored in tests/keras/data/keras_more_layers_reference.npz
(written by make_keras_more_layers_reference.py) with the same weights, weight names and order,
masks, finite differences, tg.function against eager, noise layers, and errors."""
import json
import os
import re

import numpy as np
import pytest

import tapegpu as tg

keras = tg.keras
L = keras.layers
REFERENCE = os.path.join(os.path.dirname(__file__), "data", "keras_more_layers_reference.npz")


def _reference_cases():
    with np.load(REFERENCE) as data:
        cases = json.loads(str(data["cases"]))
        return [(i, case, {k: data[k] for k in data.files
                           if re.fullmatch(rf"[a-z]+{i}(_\d+)?", k)})
                for i, case in enumerate(cases)]


def _indexed(arrays, prefix, i):
    out, j = [], 0
    while f"{prefix}{i}_{j}" in arrays:
        out.append(arrays[f"{prefix}{i}_{j}"])
        j += 1
    return out


def _make(name, kwargs):
    if name == "TimeDistributed":
        inner, inner_kwargs = kwargs
        return L.TimeDistributed(getattr(L, inner)(**inner_kwargs))
    kwargs = {k: tuple(v) if isinstance(v, list) and k != "shared_axes" else v
              for k, v in kwargs.items()}
    return getattr(L, name)(**kwargs)


def _call(layer, xs, masks, how, kwargs):
    """As the generator: list layers get mask=[...]; others get the masks as _keras_mask."""
    if how == "list":
        return layer(xs, mask=[None if m is None else np.array(m) for m in masks], **kwargs) \
            if masks is not None else layer(xs, **kwargs)
    if masks is not None:
        for x, m in zip(xs, masks):
            x._keras_mask = None if m is None else tg.constant(m)
    return layer(*xs, **kwargs)


CASES = _reference_cases()


@pytest.mark.parametrize("i, case, arrays", CASES, ids=[f"{c[0]}{i}" for i, c, _ in CASES])
def test_outputs_and_gradients_match_keras(i, case, arrays):
    """Keras 3's outputs, output masks and gradients (of sum(output * probe), with respect to
    the weights and the inputs) on the same weights; Keras' weight names, shapes and order."""
    name, kwargs, _, call_kwargs, masks, how = case
    layer = _make(name, kwargs)
    xs = [tg.Variable(x) for x in _indexed(arrays, "x", i)]
    if f"adapt{i}" in arrays:
        layer.adapt(arrays[f"adapt{i}"])
    _call(layer, [tg.identity(x) for x in xs], masks, how, dict(call_kwargs))
    keras_names = ["/".join(str(n).split("/")[-2:]) if name == "MultiHeadAttention"
                   else str(n).split("/")[-1] for n in arrays[f"names{i}"]]
    ours = ["/".join(v.name.split("/")[-2:]) if name == "MultiHeadAttention"
            else v.name.split("/")[-1] for v in layer.variables]
    assert ours == keras_names
    weights = _indexed(arrays, "w", i)
    assert [w.shape for w in layer.get_weights()] == [w.shape for w in weights]
    layer.set_weights(weights)
    with tg.GradientTape() as tape:
        ins = [tg.identity(x) for x in xs]
        out = _call(layer, ins, masks, how, dict(call_kwargs))
        flat = tg.nest.flatten(out)
        loss = tg.add_n([tg.reduce_sum(t * p) for t, p in zip(flat, _indexed(arrays, "p", i))])
    grads = tape.gradient(loss, layer.trainable_variables + xs)
    want = _indexed(arrays, "y", i)
    assert len(flat) == len(want)
    for got, ref in zip(flat, want):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)
    if f"outmask{i}" in arrays:
        np.testing.assert_array_equal(flat[0]._keras_mask.numpy(), arrays[f"outmask{i}"])
    else:
        assert getattr(flat[0], "_keras_mask", None) is None
    refs = _indexed(arrays, "g", i)
    assert len(grads) == len(refs)
    for got, ref in zip(grads, refs):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-5)
