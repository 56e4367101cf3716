"""`keras.datasets.<name>.load_data`: nothing is downloaded here. Given `path=` to a local copy
of Keras' `.npz` file (arrays `x_train`, `y_train`, `x_test`, `y_test`), it loads that file;
otherwise it raises an error naming the file to fetch.
"""
import os
import types

import numpy as np

# Keras' files (under https://storage.googleapis.com/tensorflow/tf-keras-datasets/)
_FILES = {"mnist": "mnist.npz", "fashion_mnist": "fashion-mnist (4 .gz files)",
          "cifar10": "cifar-10-python.tar.gz", "cifar100": "cifar-100-python.tar.gz",
          "imdb": "imdb.npz", "boston_housing": "boston_housing.npz", "reuters": "reuters.npz"}
_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"


def _loader(name):
    def load_data(path=None, **kwargs):
        """Loads `(x_train, y_train), (x_test, y_test)` from a local `.npz` file given as
        `path` (no download is possible here)."""
        if path is None or not os.path.exists(str(path)):
            where = "no path was given" if path is None else f"{str(path)!r} does not exist"
            raise RuntimeError(
                f"keras.datasets.{name}.load_data: tapegpu does not download datasets and "
                f"{where}. Fetch {_URL}{_FILES[name]} on a machine with network access, save "
                f"it as an .npz with arrays x_train, y_train, x_test, y_test, and pass "
                f"load_data(path='/local/file.npz')")
        with np.load(str(path), allow_pickle=False) as f:
            missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in f]
            if missing:
                raise ValueError(f"keras.datasets.{name}.load_data: {str(path)!r} lacks "
                                 f"arrays {missing}; it holds {sorted(f.files)}")
            return (f["x_train"], f["y_train"]), (f["x_test"], f["y_test"])
    load_data.__name__ = "load_data"
    return load_data


def namespace():
    ns = types.ModuleType("tapegpu.keras.datasets", __doc__)
    for name in _FILES:
        sub = types.ModuleType(f"tapegpu.keras.datasets.{name}",
                               f"`load_data(path=...)` for Keras' {name} file.")
        sub.load_data = _loader(name)
        setattr(ns, name, sub)
    return ns
