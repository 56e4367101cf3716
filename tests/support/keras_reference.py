"""Keras 3's own outputs stored by tests/keras/data/make_keras_*_reference.py: the cases (JSON)
and, per case i, arrays named <letters><i> or <letters><i>_<j> (inputs x, weights w, probes p,
outputs y, gradients g, ...)."""
import json
import os
import re

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "keras", "data")


def reference_cases(name):
    """[(i, case, {array name: array})] of the file tests/keras/data/`name`."""
    with np.load(os.path.join(DATA, name)) as data:
        cases = json.loads(str(data["cases"]))
        return [(i, case, {k: data[k] for k in data.files
                           if re.fullmatch(rf"[a-z]+{i}(_\d+)?", k)})
                for i, case in enumerate(cases)]


def indexed(arrays, prefix, i):
    """The arrays <prefix><i>_0, <prefix><i>_1, ... in order."""
    out, j = [], 0
    while f"{prefix}{i}_{j}" in arrays:
        out.append(arrays[f"{prefix}{i}_{j}"])
        j += 1
    return out
