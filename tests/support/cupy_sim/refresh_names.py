"""Regenerate names.txt: the public names of CuPy the stand-in may expose.

Two ways, same output format (`<namespace> <name>` per line, sorted):

* From an installed CuPy (on a machine with one)::

      python tests/support/cupy_sim/refresh_names.py > tests/support/cupy_sim/names.txt

  walks ``dir()`` of cupy, cupy.linalg, cupy.random, cupy.fft, cupy.cuda, cupy.cuda.runtime,
  cupyx, cupyx.scipy.special, cupyx.scipy.linalg and of ``cupy.ndarray``, keeping names that
  do not start with ``_`` (and the ndarray dunders the stand-in must model).

* From CuPy's source at one or more release tags (no GPU needed)::

      python tests/support/cupy_sim/refresh_names.py --source /path/to/cupy.git v13.6.0 v14.2.0

  parses each namespace's ``__init__.py`` (names imported, assigned or defined at top level)
  and ``cupy/_core/core.pyx`` (the methods and properties of ``_ndarray_base``) with
  ``git show TAG:path``, and keeps the names present at every tag given. names.txt was made
  this way from v13.6.0 and v14.2.0, so it holds what both CuPy 13 and 14 have.
"""
import ast
import re
import subprocess
import sys

NAMESPACES = {
    "cupy": "cupy/__init__.py",
    "cupy.linalg": "cupy/linalg/__init__.py",
    "cupy.random": "cupy/random/__init__.py",
    "cupy.fft": "cupy/fft/__init__.py",
    "cupy.cuda": "cupy/cuda/__init__.py",
    "cupy.lib.stride_tricks": "cupy/lib/stride_tricks.py",
    "cupyx": "cupyx/__init__.py",
    "cupyx.scipy.special": "cupyx/scipy/special/__init__.py",
    "cupyx.scipy.linalg": "cupyx/scipy/linalg/__init__.py",
}
# Implemented in Cython (no __init__.py to parse): the few runtime calls the stand-in models.
RUNTIME = ["getDevice", "getDeviceCount", "getDeviceProperties", "deviceSynchronize",
           "runtimeGetVersion", "driverGetVersion", "CUDARuntimeError"]
NDARRAY_DUNDERS = ["__array__", "__array_ufunc__", "__array_function__", "__bool__",
                   "__float__", "__int__", "__complex__", "__len__", "__iter__", "__getitem__",
                   "__setitem__", "__dlpack__", "__dlpack_device__", "__cuda_array_interface__"]


def _top_level(src):
    names = set()
    for node in ast.parse(src).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
    return {n for n in names if not n.startswith("_") and n != "annotations"}


def _ndarray_members(pyx):
    body = pyx.split("cdef class _ndarray_base", 1)[1].split("\n", 1)[1]
    body = re.split(r"^\S", body, maxsplit=1, flags=re.M)[0]
    found = set(re.findall(r"^    (?:cpdef|def) (?:[\w.]+ )?(\w+)\(", body, re.M))
    found |= set(re.findall(r"^    property (\w+)", body, re.M))
    return {n for n in found if not n.startswith("_")} | set(NDARRAY_DUNDERS)


def from_source(repo, tags):
    per_tag = []
    for tag in tags:
        def show(path):
            return subprocess.run(["git", "-C", repo, "show", f"{tag}:{path}"], check=True,
                                  capture_output=True, text=True).stdout
        names = {(ns, n) for ns, path in NAMESPACES.items() for n in _top_level(show(path))}
        names |= {("cupy.ndarray", n) for n in _ndarray_members(show("cupy/_core/core.pyx"))}
        pxd = show("cupy/_core/core.pxd")
        names |= {("cupy.ndarray", n) for n in re.findall(r"readonly [\w.]+ (\w+)", pxd)
                  if not n.startswith("_")}
        names |= {("cupy.cuda.runtime", n) for n in RUNTIME}
        per_tag.append(names)
    return set.intersection(*per_tag)


def from_installed():
    import importlib
    import cupy
    names = set()
    for ns in NAMESPACES:
        mod = importlib.import_module(ns)
        names |= {(ns, n) for n in dir(mod) if not n.startswith("_")}
    names |= {("cupy.cuda.runtime", n) for n in RUNTIME if hasattr(cupy.cuda.runtime, n)}
    names |= {("cupy.ndarray", n) for n in dir(cupy.ndarray)
              if not n.startswith("_") or n in NDARRAY_DUNDERS}
    return names


def main(argv):
    if argv[:1] == ["--source"]:
        names = from_source(argv[1], argv[2:])
    else:
        names = from_installed()
    print("# CuPy's public names: `<namespace> <name>`; made by refresh_names.py (see there).")
    for ns, n in sorted(names):
        print(ns, n)


if __name__ == "__main__":
    main(sys.argv[1:])
