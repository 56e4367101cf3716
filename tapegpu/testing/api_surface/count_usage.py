"""Regenerate usage.txt: how often real TF2 code uses each name of names.txt.

    python tapegpu/testing/api_surface/count_usage.py \\
        --repo tensorflow/docs=PATH --repo tensorflow/examples=PATH \\
        --repo ageron/handson-ml3=PATH --repo aymericdamien/TensorFlow-Examples=PATH

Each PATH is a checkout or a bare git directory (read at HEAD) of the repository; CORPUS below
says which files of each are counted. What is counted, statically (no code runs):
- the Python files and the code cells of the notebooks (shell `!` and magic `%` lines and
  whole-line comments dropped);
- in each file, the names its imports bind to TensorFlow or Keras (`import tensorflow as tf`,
  `from tensorflow import keras`, `from tensorflow.keras import layers`, `import keras`,
  `from keras.layers import Dense`, `import tensorflow.keras.backend as K`, ...);
- every use of such a name, followed by its attribute chain (`tf.keras.layers.Dense(...)`), is
  one reference to the longest name of names.txt that the chain starts with (attributes of a
  class or function, such as `tf.data.Dataset.from_tensor_slices`, count for the class); a
  name imported directly (`from keras.layers import Dense`) counts at its import and at each
  later use;
- a chain that continues past a listed module with a name the module does not list
  (`tf.contrib.layers`) is an unlisted reference: reported in corpus.txt, not weighted.
Writes usage.txt (`count name`, most used first) and corpus.txt (what was read).
"""
import argparse
import collections
import fnmatch
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# repository -> (globs of the files counted, globs left out)
CORPUS = {
    # guide/migrate: TF1 programs shown next to their TF2 rewrites (the TF2 halves repeat the
    # other guides); site/en/r1: TF1's docs
    "tensorflow/docs": (["site/en/tutorials/*", "site/en/guide/*", "site/en/hub/*"],
                        ["site/en/guide/migrate/*"]),
    "tensorflow/examples": (["tensorflow_examples/models/*"], []),
    "ageron/handson-ml3": (["*"], []),
    "aymericdamien/TensorFlow-Examples": (["tensorflow_v2/*"], []),
}
ROOTS = {"tensorflow": "tf", "keras": "keras", "tf_keras": "tf.keras"}


def _files(path):
    """{relative path: text} of the .py and .ipynb files of a checkout or bare git dir."""
    out = {}
    if os.path.isdir(os.path.join(path, "objects")) or path.endswith(".git"):
        names = subprocess.run(["git", "--git-dir", path, "ls-tree", "-r", "--name-only", "HEAD"],
                               capture_output=True, text=True, check=True).stdout.split("\n")
        for name in names:
            if name.endswith((".py", ".ipynb")):
                blob = subprocess.run(["git", "--git-dir", path, "show", f"HEAD:{name}"],
                                      capture_output=True, check=True).stdout
                out[name] = blob.decode("utf-8", "replace")
        commit = subprocess.run(["git", "--git-dir", path, "rev-parse", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        return out, commit
    for root, _, fnames in os.walk(path):
        for fname in fnames:
            if fname.endswith((".py", ".ipynb")):
                full = os.path.join(root, fname)
                with open(full, encoding="utf-8", errors="replace") as f:
                    out[os.path.relpath(full, path).replace(os.sep, "/")] = f.read()
    return out, "checkout"


def code_of(name, text):
    if name.endswith(".ipynb"):
        try:
            cells = json.loads(text).get("cells", [])
        except ValueError:
            return ""
        text = "\n".join("".join(c.get("source", [])) for c in cells
                         if c.get("cell_type") == "code")
    lines = [ln for ln in text.split("\n")
             if not ln.lstrip().startswith(("!", "%", "#"))]
    return "\n".join(lines)


def _dotted(module):
    head, _, rest = module.partition(".")
    if head not in ROOTS:
        return None
    return ROOTS[head] + ("." + rest if rest else "")


_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w. \t,]+?)[ \t]*$", re.M)
_FROM = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]+)", re.M)


def aliases(code):
    """{local name: dotted API name} bound by the file's imports, and the names imported
    directly from a module (counted once at their import)."""
    bound, imported = {}, []
    for m in _IMPORT.finditer(code):
        for part in m.group(1).split(","):
            bits = part.split()
            if not bits:
                continue
            dotted = _dotted(bits[0])
            if dotted is None:
                continue
            if len(bits) == 3 and bits[1] == "as":
                bound[bits[2]] = dotted
            elif "." not in bits[0]:
                bound[bits[0]] = dotted
    for m in _FROM.finditer(code):
        base = _dotted(m.group(1))
        if base is None:
            continue
        for part in m.group(2).strip("() \t").split(","):
            bits = part.split("#")[0].split()
            if not bits or bits[0] == "*":
                continue
            local = bits[2] if len(bits) == 3 and bits[1] == "as" else bits[0]
            bound[local] = f"{base}.{bits[0]}"
            imported.append(f"{base}.{bits[0]}")
    return bound, imported


def resolve(dotted, names):
    """(the longest listed name `dotted` starts with, or None; whether the chain goes on past a
    listed module with an unlisted name)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        head = ".".join(parts[:n])
        if head in names:
            unlisted = n < len(parts) and names[head] == "m"
            return head, unlisted
    return None, True


def count(files, names, counts, unlisted):
    for name, text in files.items():
        code = code_of(name, text)
        bound, imported = aliases(code)
        for dotted in imported:
            head, gone_on = resolve(dotted, names)
            if head and not gone_on:
                counts[head] += 1
            else:
                unlisted[dotted] += 1
        if not bound:
            continue
        body = "\n".join(ln for ln in code.split("\n")
                         if not re.match(r"\s*(import|from)\s", ln))
        pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(bound, key=len,
                                                                           reverse=True)))
                             + r")((?:\s*\.\s*[A-Za-z_]\w*)*)")
        for m in pattern.finditer(body):
            chain = re.sub(r"\s+", "", m.group(2))
            dotted = bound[m.group(1)] + chain
            head, gone_on = resolve(dotted, names)
            if head is None or gone_on:
                unlisted[dotted if head is None else head + "." +
                         dotted[len(head) + 1:].split(".")[0]] += 1
            else:
                counts[head] += 1


def load_names(path=os.path.join(HERE, "names.txt")):
    with open(path, encoding="utf-8") as f:
        names = dict(line.split() for line in f if line.strip())
    for root in ("tf", "keras"):
        names.setdefault(root, "m")
    for name in list(names):  # every module on a listed path is a module
        parts = name.split(".")
        for n in range(1, len(parts)):
            names.setdefault(".".join(parts[:n]), "m")
    return names


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", action="append", default=[], metavar="OWNER/NAME=PATH")
    parser.add_argument("--out", default=os.path.join(HERE, "usage.txt"))
    parser.add_argument("--corpus-out", default=os.path.join(HERE, "corpus.txt"))
    args = parser.parse_args(argv)
    names = load_names()
    counts, unlisted = collections.Counter(), collections.Counter()
    summary = []
    for spec in args.repo:
        repo, path = spec.split("=", 1)
        include, exclude = CORPUS[repo]
        files, commit = _files(path)
        files = {k: v for k, v in files.items()
                 if any(fnmatch.fnmatch(k, g) for g in include) and
                 not any(fnmatch.fnmatch(k, g) for g in exclude)}
        before = sum(counts.values())
        count(files, names, counts, unlisted)
        summary.append(f"{repo} {commit}: {len(files)} files ({', '.join(include)}), "
                       f"{sum(counts.values()) - before} references")
    listed = {k: v for k, v in counts.items() if k in names and names[k] != "m" or
              k in names and k.count(".") >= 1}
    with open(args.out, "w", encoding="utf-8") as f:
        for name, n in sorted(listed.items(), key=lambda kv: (-kv[1], kv[0])):
            f.write(f"{n} {name}\n")
    with open(args.corpus_out, "w", encoding="utf-8") as f:
        f.write("# The corpus usage.txt was counted over (count_usage.py):\n")
        f.write("".join(f"{line}\n" for line in summary))
        f.write(f"# {sum(listed.values())} references to {len(listed)} listed names; "
                f"{sum(unlisted.values())} to names TF 2.21 and Keras 3 do not list, most "
                f"used:\n")
        for name, n in unlisted.most_common(40):
            f.write(f"#   {n} {name}\n")
    print("\n".join(summary), file=sys.stderr)


if __name__ == "__main__":
    main()
