"""Writes the kernel sources generated from the ops' expressions (run in a source checkout):

    python -m tapegpu.ops.generate            # rewrite them
    python -m tapegpu.ops.generate --check    # exit 1 if one is out of date

Every registered op with a forward expression `c=` and a VJP expression `dc=` (see
ops/registry.py) gets CUDA kernels in cuda_kernels/activations.cu, and, where its expressions
are exact, CPU kernels through tapegpu/backends/_activations.h (built into
tapegpu/backends/_cpu.c at install). backends/kernels/codegen.py writes the text; this module
only gathers the ops. tests/backends/kernels/test_generated.py checks that the files are up
to date.
"""
import inspect
import os
import sys

from ..backends.kernels import codegen
from .registry import REGISTRY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = ("cuda_kernels/activations.cu", "tapegpu/backends/_activations.h")


def defaults(op):
    """The params of `op`'s forward with their default values."""
    params = list(inspect.signature(op.forward).parameters.values())[1 + len(op.args):]
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def activations():
    """An op's kernels, for every op with `c` and `dc` (in registration order): the
    expressions with its params' default values."""
    acts = []
    for op in REGISTRY.values():
        if op.c is None or op.dc is None:
            continue
        if not op.elementwise or len(op.args) != 1 or len(op.saves) != 1 or \
                op.saves[0] not in (op.args[0], "out"):
            raise ValueError(f"op {op.name!r}: dc= needs an elementwise op of one argument "
                             f"that saves it or its output, not args {op.args}, saves "
                             f"{op.saves}")
        values = {k: codegen.literal(v) for k, v in defaults(op).items()}
        acts.append(codegen.Activation(op.name, op.args[0], op.saves[0],
                                       codegen.fold(codegen.substitute(op.c, values)),
                                       codegen.fold(codegen.substitute(op.dc, values))))
    return acts


def sources():
    """{path relative to the checkout: the text it must have}."""
    acts = activations()
    return dict(zip(FILES, (codegen.activations_cu(acts), codegen.activations_h(acts))))


def main(argv):
    if not os.path.isfile(os.path.join(ROOT, "pyproject.toml")):
        sys.exit(f"{ROOT} is not a source checkout of tapegpu: nothing to write")
    stale = []
    for path, text in sources().items():
        full = os.path.join(ROOT, path)
        old = open(full).read() if os.path.exists(full) else None
        if old == text:
            continue
        stale.append(path)
        if "--check" not in argv:
            with open(full, "w") as f:
                f.write(text)
    verb = "out of date" if "--check" in argv else "written"
    for path in stale:
        print(f"{path}: {verb}")
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
