"""Every `>>>` example in tapegpu's docstrings runs and prints what it says."""
import doctest
import importlib
import pkgutil

import numpy as np
import pytest

import tapegpu as tg

SINGLE_DEVICE = True  # the examples run on the default device

SKIP = {"tapegpu.backends.cuda"}  # imports CuPy: only on a machine with a GPU


def _modules():
    names = ["tapegpu"]
    for info in pkgutil.walk_packages(tg.__path__, "tapegpu."):
        if info.name not in SKIP and not info.name.endswith("__main__"):
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    failures = []
    for test in finder.find(module, name, globs={"tg": tg, "np": np}):
        result = runner.run(test, out=failures.append)
        del result
    assert not failures, "".join(failures)
