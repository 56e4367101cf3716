"""`keras.utils.plot_model`: a model's layer graph as Graphviz DOT.

Keras draws the graph with pydot and Graphviz and raises ImportError when pydot is missing.
tapegpu writes the DOT text itself: `to_file="model.dot"` (or `.gv`) needs neither; any other
format (png, svg, pdf, ...) is rendered through pydot, and without pydot raises Keras'
ImportError. `dot -Tpng model.dot -o model.png` turns a .dot file into a picture
wherever Graphviz is installed.
"""
import os

from .model import Functional, Sequential
from .layers.core import KerasTensor
from ..core import nest

__all__ = ["plot_model"]


def _quote(text):
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _shape_text(shape):
    if shape is None:
        return "?"
    if isinstance(shape, list):
        return ", ".join(_shape_text(s) for s in shape)
    return "(" + ", ".join("None" if d is None else str(d) for d in tuple(shape)) + \
        ("," if len(tuple(shape)) == 1 else "") + ")"


def _label(layer, in_shape, out_shape, show_shapes, show_dtype, show_layer_names,
           show_layer_activations, show_trainable):
    cls = type(layer).__name__
    lines = [f"{layer.name} ({cls})" if show_layer_names else cls]
    if show_layer_activations and getattr(layer, "activation", None) is not None:
        act = layer.activation
        lines.append(f"Activation: {getattr(act, '__name__', act)}")
    if show_dtype:
        dtype = getattr(layer, "dtype", None)
        lines.append(f"dtype: {getattr(dtype, 'name', dtype)}")
    if show_shapes:
        lines.append(f"Input shape: {_shape_text(in_shape)}")
        lines.append(f"Output shape: {_shape_text(out_shape)}")
    if show_trainable:
        lines.append("Trainable" if getattr(layer, "trainable", True) else "Non-trainable")
    return "\\n".join(line.replace('"', '\\"') for line in lines)


def _graph(model):
    """([(layer, input shape, output shape)], [(source layer, target layer)])."""
    if isinstance(model, Functional):
        nodes, edges, shapes = [], [], {}
        for t in nest.flatten(model._inputs):
            layer = getattr(t, "_input_layer", None)
            if layer is not None:
                nodes.append((layer, t.shape, t.shape))
        for node in model._nodes:
            ins = [t for t in nest.flatten(node.inputs) if isinstance(t, KerasTensor)]
            outs = node.outputs
            in_shape = ins[0].shape if len(ins) == 1 else [t.shape for t in ins]
            out_shape = outs[0].shape if len(outs) == 1 else [t.shape for t in outs]
            if all(n[0] is not node.layer for n in nodes):
                nodes.append((node.layer, in_shape, out_shape))
            for t in ins:
                source = t._keras_history[0].layer if t._keras_history is not None \
                    else getattr(t, "_input_layer", None)
                if source is not None and (source, node.layer) not in edges:
                    edges.append((source, node.layer))
        del shapes
        return nodes, edges
    layers = list(model.layers)
    shapes = getattr(model, "_output_shapes", {})
    spec = getattr(model, "_input_spec", None)
    nodes, prev_shape = [], getattr(spec, "shape", None)
    for layer in layers:
        out = shapes.get(id(layer))
        nodes.append((layer, prev_shape, out))
        prev_shape = out
    edges = [(a, b) for a, b in zip(layers, layers[1:])] if isinstance(model, Sequential) \
        else []
    return nodes, edges


def model_to_dot_text(model, show_shapes=False, show_dtype=False, show_layer_names=False,
                      rankdir="TB", expand_nested=False, dpi=200, show_layer_activations=False,
                      show_trainable=False):
    """The DOT source of the model's layer graph (what `plot_model` writes to a .dot file)."""
    if rankdir not in ("TB", "LR"):
        raise ValueError(f"plot_model: rankdir must be 'TB' or 'LR', got {rankdir!r}")
    if not model.built:
        raise ValueError("This model has not yet been built. Build the model first by calling "
                         "`build()` or by calling the model on a batch of data.")
    nodes, edges = _graph(model)
    lines = [f"digraph {_quote(model.name)} {{", f"  graph [rankdir={rankdir}, "
             f"concentrate=true, dpi={int(dpi)}];", "  node [shape=box];"]
    ids = {}
    for i, (layer, in_shape, out_shape) in enumerate(nodes):
        ids[id(layer)] = f"n{i}"
        label = _label(layer, in_shape, out_shape, show_shapes, show_dtype, show_layer_names,
                       show_layer_activations, show_trainable)
        lines.append(f'  n{i} [label="{label}"];')
    for a, b in edges:
        if id(a) in ids and id(b) in ids:
            lines.append(f"  {ids[id(a)]} -> {ids[id(b)]};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def plot_model(model, to_file="model.png", show_shapes=False, show_dtype=False,
               show_layer_names=False, rankdir="TB", expand_nested=False, dpi=200,
               show_layer_activations=False, show_trainable=False, **kwargs):
    """Draws the model's layer graph into `to_file`, as `keras.utils.plot_model` (Keras 3's
    arguments and defaults). A `.dot` or `.gv` file gets the Graphviz DOT source, written by
    tapegpu without pydot or Graphviz; other formats are rendered with pydot (Graphviz's
    `dot` program), and without pydot raise ImportError as Keras does.

    >>> import os, tempfile
    >>> model = tg.keras.Sequential([tg.keras.Input((3,)), tg.keras.layers.Dense(2)])
    >>> path = os.path.join(tempfile.mkdtemp(), "model.dot")
    >>> tg.keras.utils.plot_model(model, to_file=path, show_shapes=True)
    >>> open(path).read().startswith("digraph")
    True
    """
    unknown = set(kwargs) - {"layer_range"}
    if unknown:
        raise TypeError(f"plot_model: unexpected keyword arguments {sorted(unknown)}")
    if kwargs.get("layer_range") is not None:
        raise NotImplementedError("keras.utils.plot_model(layer_range=...) is not available "
                                  "in tapegpu: it plots the whole model. Instead: "
                                  "layer_range=None")
    text = model_to_dot_text(model, show_shapes, show_dtype, show_layer_names, rankdir,
                             expand_nested, dpi, show_layer_activations, show_trainable)
    to_file = os.fspath(to_file)
    extension = os.path.splitext(to_file)[1][1:].lower() or "png"
    if extension in ("dot", "gv"):
        with open(to_file, "w", encoding="utf-8") as f:
            f.write(text)
        return None
    try:
        import pydot
    except ImportError:
        raise ImportError("You must install pydot (`pip install pydot`) for `plot_model` to "
                          "work. (tapegpu writes the graph without it when to_file ends in "
                          "'.dot'.)") from None
    graphs = pydot.graph_from_dot_data(text)
    graphs[0].write(to_file, format=extension)
    return None
