"""Regenerate names.txt: TensorFlow's and Keras 3's public API, one dotted name a line.

    python tapegpu/testing/api_surface/generate_names.py \\
        --tf PATH --keras PATH_TO_KERAS_CHECKOUT [--out names.txt]

`--tf` is one of
- a TensorFlow source checkout (or its `tensorflow/tools/api/golden/v2` folder): the API golden
  files, `tensorflow.<module>.pbtxt`, each listing a module's members with their kinds;
- a TensorFlow wheel (`pip download --no-deps tensorflow-cpu==2.21.0`) or the folder it unpacks
  to: the generated `tensorflow/__init__.py` and `tensorflow/_api/v2/**/__init__.py`, which
  import every public name of each module (the same list as the golden files).
`--keras` is a checkout of keras-team/keras: `keras/api/**/__init__.py` lists Keras 3's public
names (`keras.*`); `keras/api/_tf_keras/keras/**` is what `tf.keras` resolves to in TF 2.16+
(Keras 3 with Keras 2's extra names), written here as `tf.keras.*`; `tf.losses`, `tf.metrics`,
`tf.optimizers` and `tf.initializers` are TF's lazy aliases of those `tf.keras` modules.

Each line is `dotted.name KIND`, KIND one of `m` (module), `c` (class), `f` (function or other
value). Left out: `tf.__internal__`, `tf.__operators__` and `tf.compat.v2` (the same names as
`tf.*`), `tf.compat.v1.compat` (likewise), private names and dunders (`__version__` stays).
"""
import argparse
import ast
import os
import re
import sys
import zipfile

SKIP_PREFIXES = ("tf.__internal__", "tf.__operators__", "tf.compat.v2", "tf.compat.v1.compat",
                 "tf.compat.v1.__internal__", "tf.compat.v1.keras")
KEEP_DUNDERS = ("__version__",)
LAZY_KERAS_MODULES = ("losses", "metrics", "optimizers", "initializers")


def _kind_of_name(name):
    return "c" if name[:1].isupper() and not name.isupper() else "f"


def _skip(dotted):
    last = dotted.rsplit(".", 1)[-1]
    if last.startswith("_") and last not in KEEP_DUNDERS:
        return True
    return any(dotted == p or dotted.startswith(p + ".") for p in SKIP_PREFIXES)


# -- TensorFlow: golden files ---------------------------------------------------------------------
_PATH = re.compile(r'^path:\s*"([^"]+)"', re.M)
_MEMBER = re.compile(r'(member|member_method)\s*\{\s*name:\s*"([^"]+)"(?:\s*mtype:\s*"([^"]*)")?')


def parse_golden(text):
    """(module path with `tf.` for `tensorflow.`, is_module, [(name, kind)]) of one pbtxt file;
    is_module is False for a class's file (its members are methods: not listed)."""
    path = _PATH.search(text).group(1)
    dotted = "tf" + path[len("tensorflow"):]
    if "tf_module" not in text:
        return dotted, False, []
    members = []
    for what, name, mtype in _MEMBER.findall(text):
        if what == "member_method":
            members.append((name, "f"))
        elif "module" in mtype:
            members.append((name, "m"))
        elif "type" in mtype or "class" in mtype and "ABCMeta" not in mtype:
            members.append((name, "c"))
        else:
            members.append((name, "c" if "ABCMeta" in mtype else "f"))
    return dotted, True, members


def tf_names_from_golden(folder):
    names = {}
    for fname in sorted(os.listdir(folder)):
        if fname.endswith(".pbtxt"):
            with open(os.path.join(folder, fname), encoding="utf-8") as f:
                dotted, is_module, members = parse_golden(f.read())
            if is_module:
                for name, kind in members:
                    names[f"{dotted}.{name}"] = kind
    return names


# -- TensorFlow: a wheel's generated API modules --------------------------------------------------
def _imports(source, module_path):
    """(name, kind) for each public name a generated __init__.py imports."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                name = alias.asname or alias.name
                if node.module.startswith("tensorflow._api.v2"):
                    out.append((name, "m"))
                elif node.module.startswith("tensorflow."):
                    out.append((name, _kind_of_name(name)))
    return out


def tf_names_from_wheel(path):
    if os.path.isdir(path):
        files = {}
        for root, _, fnames in os.walk(path):
            for fname in fnames:
                if fname == "__init__.py":
                    full = os.path.join(root, fname)
                    files[os.path.relpath(full, path).replace(os.sep, "/")] = full
        read = lambda key: open(files[key], encoding="utf-8").read()  # noqa: E731
        keys = list(files)
    else:
        zf = zipfile.ZipFile(path)
        keys = [n for n in zf.namelist() if n.endswith("__init__.py")]
        read = lambda key: zf.read(key).decode("utf-8")  # noqa: E731
    names = {}
    for key in keys:
        if key == "tensorflow/__init__.py":
            dotted = "tf"
        elif key.startswith("tensorflow/_api/v2/"):
            rel = key[len("tensorflow/_api/v2/"):-len("/__init__.py")]
            if not rel or rel == "__init__.py":
                continue
            dotted = "tf." + rel.replace("/", ".")
        else:
            continue
        for name, kind in _imports(read(key), dotted):
            names[f"{dotted}.{name}"] = kind
    names.setdefault("tf.keras", "m")  # set at import time (a lazy loader), not imported
    return names


# -- Keras 3 ------------------------------------------------------------------------------------
def keras_names(checkout):
    api = os.path.join(checkout, "keras", "api")
    names = {}
    for root, _, fnames in os.walk(api):
        if "__init__.py" not in fnames:
            continue
        rel = os.path.relpath(root, api).replace(os.sep, "/")
        if rel == ".":
            dotted = "keras"
        elif rel == "_tf_keras/keras" or rel.startswith("_tf_keras/keras/"):
            dotted = "tf.keras" + rel[len("_tf_keras/keras"):].replace("/", ".")
        elif rel.startswith("_tf_keras"):
            continue
        else:
            dotted = "keras." + rel.replace("/", ".")
        with open(os.path.join(root, "__init__.py"), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    name = alias.asname or alias.name
                    is_module = not node.module.startswith("keras.src") and node.level == 0
                    names[f"{dotted}.{name}"] = "m" if is_module else _kind_of_name(name)
    return names


def generate(tf_source, keras_checkout):
    golden = tf_source
    if os.path.isdir(os.path.join(tf_source, "tensorflow", "tools", "api", "golden", "v2")):
        golden = os.path.join(tf_source, "tensorflow", "tools", "api", "golden", "v2")
    if os.path.isdir(golden) and any(f.endswith(".pbtxt") for f in os.listdir(golden)):
        names = tf_names_from_golden(golden)
    else:
        names = tf_names_from_wheel(tf_source)
    names.update(keras_names(keras_checkout))
    # tf.losses, tf.metrics, tf.optimizers, tf.initializers: TF sets them at import to lazy
    # loaders of tf.keras's modules of those names (so no golden file or import lists them)
    for sub in LAZY_KERAS_MODULES:
        names[f"tf.{sub}"] = "m"
        prefix = f"tf.keras.{sub}."
        names.update({f"tf.{sub}." + k[len(prefix):]: v for k, v in list(names.items())
                      if k.startswith(prefix)})
    return {k: v for k, v in names.items() if not _skip(k)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tf", required=True)
    parser.add_argument("--keras", required=True)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "names.txt"))
    args = parser.parse_args(argv)
    names = generate(args.tf, args.keras)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("".join(f"{name} {kind}\n" for name, kind in sorted(names.items())))
    print(f"{len(names)} names -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
