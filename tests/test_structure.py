"""The structure the design promises, checked on the source: the layers that run ops name no op
(per-op knowledge lives in the op's entry and its family's file), and no module rebinds another
module's functions while it is imported (the registry's `wrap` and the conversions of
core/tensor.py are defined where they live; ops register into them)."""
import ast
import importlib
import os
import types

import pytest

import tapegpu
from tapegpu.ops import registry as REGISTRY_MODULE
from tapegpu.ops.registry import REGISTRY

SINGLE_DEVICE = True  # source checks: no device involved

ROOT = os.path.dirname(tapegpu.__file__)
RUNNERS = ["function/" + f for f in sorted(os.listdir(os.path.join(ROOT, "function")))
           if f.endswith(".py")] + ["autodiff/sweep.py", "autodiff/vectorize.py",
                                    "core/profiler.py"]


def _tree(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return ast.parse(f.read(), rel)


def _names_an_op(node):
    """A string naming a registered op, or `<public function>.op` of one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in REGISTRY
    return isinstance(node, ast.Attribute) and node.attr == "op" and \
        isinstance(node.value, ast.Name) and node.value.id in REGISTRY


def _op_identity(node):
    """`x.op`, `x.name`, `op` or `name`: what an op-identity test compares."""
    return isinstance(node, ast.Attribute) and node.attr in ("op", "name") or \
        isinstance(node, ast.Name) and node.id in ("op", "name")


@pytest.mark.parametrize("rel", RUNNERS)
def test_the_runners_name_no_op(rel):
    found = []
    for n in ast.walk(_tree(rel)):
        if isinstance(n, ast.Compare):
            sides = [n.left] + n.comparators
            if any(map(_op_identity, sides)) and any(map(_names_an_op, sides)):
                found.append(f"line {n.lineno}: {ast.unparse(n)}")
        elif isinstance(n, ast.Subscript) and ast.unparse(n.value).endswith("REGISTRY"):
            found.append(f"line {n.lineno}: {ast.unparse(n)}")
    assert not found, f"tapegpu/{rel} tests for particular ops: {found}"


LAYERS = ("core", "ops", "autodiff", "backends", "function")


def _modules():
    for layer in LAYERS:
        for root, _, files in os.walk(os.path.join(ROOT, layer)):
            for f in sorted(files):
                if f.endswith(".py"):
                    rel = os.path.relpath(os.path.join(root, f), ROOT)
                    yield rel


def _top_level(nodes):
    """The statements a module runs when imported (not inside functions or classes)."""
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield node
        for field in ("body", "orelse", "handlers", "finalbody"):
            yield from _top_level(getattr(node, field, None) or [])


@pytest.mark.parametrize("rel", sorted(_modules()))
def test_no_module_rebinds_another_modules_names_at_import(rel):
    name = "tapegpu." + rel[:-3].replace(os.sep, ".").removesuffix(".__init__")
    try:
        module = importlib.import_module(name)
    except ImportError as e:  # an optional dependency (the GPU backend's CuPy)
        pytest.skip(f"{name} does not import here: {e}")
    found = []
    for node in _top_level(_tree(rel).body):
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and \
                    isinstance(getattr(module, t.value.id, None), types.ModuleType) and \
                    getattr(module, t.value.id).__name__.startswith("tapegpu"):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    assert not found, f"{name} rebinds names of other modules when imported: {found}"


def test_the_checks_find_what_they_look_for(tmp_path, monkeypatch):
    """Both checks on a module that does what they forbid."""
    pkg = tmp_path / "function"
    pkg.mkdir()
    (pkg / "bad.py").write_text("from tapegpu.ops import registry\n"
                                "registry.wrap = print\n"
                                "def f(n):\n"
                                "    return n.op.name == 'relu' or n.op is tanh.op\n"
                                "def g(n):\n"
                                "    return reshape.op  # building with an op is no test\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", str(tmp_path))
    with pytest.raises(AssertionError, match=r"relu.*tanh\.op"):
        test_the_runners_name_no_op("function/bad.py")
    # the module as imported, without running it (it would rebind registry.wrap here)
    bad = types.ModuleType("function.bad")
    bad.registry = REGISTRY_MODULE
    monkeypatch.setattr(importlib, "import_module", lambda name: bad)
    with pytest.raises(AssertionError, match="registry.wrap = print"):
        test_no_module_rebinds_another_modules_names_at_import("function/bad.py")
