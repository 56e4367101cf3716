"""keras.utils.plot_model: DOT text written without pydot; Keras' ImportError otherwise."""
import importlib.util
import os

import pytest

import tapegpu as tg


def _functional():
    a = tg.keras.Input((4,), name="a")
    b = tg.keras.Input((2,), name="b")
    h = tg.keras.layers.Dense(3, name="hidden")(a)
    c = tg.keras.layers.Concatenate(name="join")([h, b])
    return tg.keras.Model([a, b], tg.keras.layers.Dense(1, name="out")(c))


def _edges(text):
    names = {}
    for line in text.splitlines():
        line = line.strip()
        if "[label=" in line:
            names[line.split()[0]] = line.split('"')[1].split("\\n")[0]
    return {(names[x], names[y]) for x, y in
            (line.strip().rstrip(";").split(" -> ") for line in text.splitlines()
             if "->" in line)}


def test_dot_file_has_the_functional_graph(tmp_path):
    path = tmp_path / "m.dot"
    assert tg.keras.utils.plot_model(_functional(), to_file=str(path), show_shapes=True,
                                     show_layer_names=True) is None
    text = path.read_text()
    assert text.startswith('digraph "') and text.rstrip().endswith("}")
    assert "join (Concatenate)\\nInput shape: (None, 3), (None, 2)\\nOutput shape: (None, 5)" \
        in text
    assert _edges(text) == {("a (InputLayer)", "hidden (Dense)"),
                            ("hidden (Dense)", "join (Concatenate)"),
                            ("b (InputLayer)", "join (Concatenate)"),
                            ("join (Concatenate)", "out (Dense)")}


def test_sequential_chain_and_keras3_defaults(tmp_path):
    model = tg.keras.Sequential([tg.keras.Input((3,)), tg.keras.layers.Dense(2, name="d1"),
                                 tg.keras.layers.Dense(1, name="d2")])
    path = tmp_path / "s.gv"
    tg.keras.utils.plot_model(model, to_file=path, rankdir="LR")
    text = path.read_text()
    assert "rankdir=LR" in text and "dpi=200" in text
    assert _edges(text) == {("Dense", "Dense")}  # show_layer_names defaults to False
    assert "Input shape" not in text
    with pytest.raises(ValueError, match="rankdir"):
        tg.keras.utils.plot_model(model, to_file=str(tmp_path / "x.dot"), rankdir="BT")


@pytest.mark.skipif(importlib.util.find_spec("pydot") is not None, reason="pydot installed")
def test_other_formats_need_pydot_as_in_keras(tmp_path):
    with pytest.raises(ImportError, match=r"You must install pydot \(`pip install pydot`\)"):
        tg.keras.utils.plot_model(_functional(), to_file=str(tmp_path / "m.png"))
    assert not os.path.exists(tmp_path / "m.png")
