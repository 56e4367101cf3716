"""Generates docs/api.md from the docstrings of tapegpu's public namespaces.

    python docs/gen_api.py            # rewrite docs/api.md
    python docs/gen_api.py --check    # exit 1 if docs/api.md is out of date

Walks `tg.GradientTape` (every public method), `tg` (its own names: those no namespace below
exports), `tg.math`, `tg.nn`, `tg.linalg`, `tg.random`, `tg.test`, `tg.autodiff`,
`tg.config`, and whichever of `tg.layers`, `tg.losses`, `tg.optimizers`, `tg.initializers`,
`tg.estimators`, `tg.profiler`, `tg.experimental`, `tg.train`, `tg.data`, `tg.saved_model`,
`tg.image`, `tg.errors`, `tg.keras` exist. Each object is documented once, under the first
namespace that holds it; the others refer to it. `>>>` examples become code blocks.
The output depends only on the code (no addresses, no dates), so tests/test_docs.py can compare.
"""
import enum
import inspect
import os
import re
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import tapegpu as tg  # noqa: E402

NAMESPACES = ("math", "nn", "linalg", "random", "test", "autodiff", "config")
OPTIONAL = ("layers", "losses", "optimizers", "initializers", "estimators", "profiler",
            "experimental", "train", "data", "saved_model", "image", "errors",
            "keras", "summary", "debugging", "sparse", "ragged")


# Op-author helpers that `from .ops import *` in tapegpu/__init__.py leaks into `tg`; they are
# not user API (STYLE.md: the op-author API belongs in tapegpu/extend.py) and are not listed.
# The tape's recording protocol (called by ops and variables, not by users) is not listed either:
# with the compiled core, `record` is a C method.
NOT_API = {"tg": {"apply", "apply1", "def_op", "floating", "tensor"},
           "tg.GradientTape": {"record", "record_variable_read", "note_variable"}}


def namespaces():
    """[(qualified name, namespace object)] in the order the page lists them."""
    out = [(f"tg.{n}", getattr(tg, n)) for n in NAMESPACES if hasattr(tg, n)]
    out += [(f"tg.{n}", getattr(tg, n)) for n in OPTIONAL if hasattr(tg, n)]
    # a name that is a class or function (tg.profiler may be one) is documented under `tg`
    return [(q, ns) for q, ns in out if isinstance(ns, types.ModuleType)]


def _from_tapegpu(obj):
    mod = getattr(obj, "__module__", None) or ""
    return mod == "tapegpu" or mod.startswith("tapegpu.")


def _defined_in(obj, module):
    mod = getattr(obj, "__module__", None) or ""
    return mod == module or mod.startswith(module + ".")


def public_names(ns):
    """Public callables and constants of a namespace, sorted: those defined by tapegpu (a
    module's imports of numpy and the like are not its API), less NOT_API."""
    skip = NOT_API.get("tg") if ns is tg else ()
    names = getattr(ns, "__all__", None)
    own_only = names is None and getattr(ns, "__file__", None) is not None
    if names is None:
        names = [n for n in dir(ns) if not n.startswith("_")]
    out = []
    for n in sorted(set(names) - set(skip)):
        obj = getattr(ns, n, None)
        if obj is None or isinstance(obj, types.ModuleType):
            continue
        if callable(obj) and not _from_tapegpu(obj):
            continue
        if own_only and callable(obj) and not _defined_in(obj, ns.__name__):
            continue  # a module's imports (tg.random's Tensor) are documented where they live
        if not callable(obj) and not isinstance(obj, tg.DType):
            continue
        out.append(n)
    return out


def signature(obj):
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = list(sig.parameters.values())
    if params and params[0].name == "self":
        sig = sig.replace(parameters=params[1:])
    sig = str(sig)
    return re.sub(r" at 0x[0-9a-fA-F]+", "", sig)


def render_doc(doc):
    """A docstring as markdown: prose as is, `>>>` examples (with their output) as code."""
    if not doc:
        return ["*(no docstring)*"]
    lines, code = [], False
    for line in doc.splitlines():
        is_prompt = line.lstrip().startswith((">>>", "..."))
        if is_prompt and not code:
            lines.append("```python")
            code = True
        elif code and not line.strip():
            lines.append("```")
            code = False
        lines.append(line)
    if code:
        lines.append("```")
    return lines


def kind(obj):
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return "exception"
    if isinstance(obj, type):
        return "class"
    return "function"


def methods(cls):
    """Public methods and properties defined by tapegpu classes in `cls`'s hierarchy."""
    out = []
    for name in sorted(dir(cls)):
        if name.startswith("_") or name in ("mro",):
            continue
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        if owner is None or not _from_tapegpu(owner):
            continue
        attr = vars(owner)[name]
        if isinstance(attr, (staticmethod, classmethod)):
            attr = attr.__func__
        if isinstance(attr, property) or inspect.isfunction(attr):
            out.append((name, attr))
    return out


def document(qual, obj, level=3):
    lines = []
    if isinstance(obj, tg.DType):
        return [f"{'#' * level} `{qual}`", "", f"The dtype `{obj!r}`.", ""]
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        members = ", ".join(f"`{m.name}` (`{m.value!r}`)" for m in obj)
        return [f"{'#' * level} `{qual}` (enum)", "", *render_doc(inspect.getdoc(obj)), "",
                f"Members: {members}.", ""]
    sig = signature(obj)
    lines += [f"{'#' * level} `{qual}{sig}`" + ("" if kind(obj) == "function"
                                                 else f" ({kind(obj)})"), ""]
    lines += render_doc(inspect.getdoc(obj))
    lines.append("")
    if kind(obj) == "class":
        for name, attr in methods(obj):
            if isinstance(attr, property):
                first = (inspect.getdoc(attr) or "").split("\n")[0]
                lines += [f"- `{qual}.{name}` (property): {first}"]
                continue
            lines += ["", f"{'#' * (level + 1)} `{qual}.{name}{signature(attr)}`", ""]
            lines += render_doc(inspect.getdoc(attr))
        lines.append("")
    return lines


def generate():
    """The text of docs/api.md."""
    seen = {}
    body = []
    toc = []

    def section(title, ns, names, intro=None):
        toc.append(f"- [`{title}`](#{re.sub(r'[^a-z0-9-]', '', title.lower().replace(' ', '-'))})")
        body.extend([f"## {title}", ""])
        if intro:
            body.extend([intro, ""])
        refs = []
        for n in names:
            obj = getattr(ns, n)
            qual = f"{title}.{n}"
            key = id(obj) if callable(obj) else None
            if key is not None and key in seen:
                refs.append(f"`{n}` (see `{seen[key]}`)")
                continue
            if key is not None:
                seen[key] = qual
            body.extend(document(qual, obj))
        if refs:
            body.extend(["Also here: " + ", ".join(refs) + ".", ""])

    toc.append("- [`tg.GradientTape`](#tggradienttape)")
    body.extend(["## tg.GradientTape", ""] + _tape_section())
    seen[id(tg.GradientTape)] = "tg.GradientTape"
    spaces = namespaces()
    elsewhere = {id(getattr(ns, n)) for _, ns in spaces for n in public_names(ns)}
    top = public_names(tg)
    own = [n for n in top if id(getattr(tg, n)) not in elsewhere or not callable(getattr(tg, n))]
    section("tg", tg, own, intro="Tensors, variables, dtypes, creation, devices and the other "
            "top-level names. The functions of `tg.math` and `tg.nn` (and some of "
            "`tg.linalg`) are top-level names too, as in TensorFlow; they are documented in "
            "their namespace.")
    for qual, ns in spaces:
        section(qual, ns, public_names(ns))
    head = ["# tapegpu API reference", "",
            "Generated from the docstrings by `python docs/gen_api.py`; do not edit by hand "
            "(tests/test_docs.py checks that this file is up to date).", ""]
    return "\n".join(head + toc + [""] + body).rstrip() + "\n"


def _tape_section():
    cls = tg.GradientTape
    lines = [f"### `tg.GradientTape{signature(cls)}` (class)", ""]
    lines += render_doc(inspect.getdoc(cls))
    lines.append("")
    for name, attr in methods(cls):
        if isinstance(attr, property) or name in NOT_API["tg.GradientTape"]:
            continue
        lines += [f"#### `tg.GradientTape.{name}{signature(attr)}`", ""]
        lines += render_doc(inspect.getdoc(attr))
        lines.append("")
    return lines


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    path = os.path.join(HERE, "api.md")
    text = generate()
    if "--check" in argv:
        with open(path) as f:
            same = f.read() == text
        print("docs/api.md is up to date" if same else
              "docs/api.md is out of date: run python docs/gen_api.py")
        return 0 if same else 1
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
