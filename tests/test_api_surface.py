"""Every public name of TensorFlow 2.21 and Keras 3 (tapegpu/testing/api_surface/names.txt)
resolves in tapegpu: implemented, or refused with a NotImplementedError that names it, says why
and what to use instead; never an AttributeError."""
import importlib
import re

import pytest

import tapegpu as tg
from tapegpu.compat import surface
from tapegpu.testing.api_surface import coverage

NAMES = coverage.load_names()
SINGLE_DEVICE = True  # names, not numerics: one device is enough
# usage-weighted coverage (docs/api_coverage.md) may only grow
COVERAGE_FLOOR = 0.875


def _spellings(name):
    """The spellings a refusal may name: `tf.keras.X` and `keras.X` are one object, and so are
    TF's lazy aliases of Keras modules (`tf.optimizers.X` is `keras.optimizers.X`)."""
    out = {name}
    if name.split(".")[1] in ("losses", "metrics", "optimizers", "initializers"):
        name = "tf.keras." + name[3:]
    return out | ({name, name[3:]} if name.startswith("tf.keras.") else
                  {name, "tf." + name} if name.startswith("keras.") else {name})


def test_the_list_is_the_whole_api():
    # spot checks that the generator read both sources, all namespaces
    for name in ("tf.GradientTape", "tf.math.reduce_sum", "tf.raw_ops.MatMul",
                 "tf.compat.v1.Session", "tf.keras.backend.random_normal",
                 "keras.layers.Dense", "keras.ops.norm", "tf.metrics.Mean", "tf.tpu.XLAOptions"):
        assert name in NAMES, name
    assert len(NAMES) > 9000


def test_every_name_resolves_implemented_or_refused():
    missing, badly_refused = [], []
    for name in NAMES:
        try:
            obj = surface.resolve(name)
        except NotImplementedError as e:
            if not any(n in str(e) for n in _spellings(name)):
                badly_refused.append((name, str(e)))
            continue
        except AttributeError as e:
            missing.append(f"{name}: {e}")
            continue
        if surface.is_refused(obj) and not isinstance(obj, type(tg)):
            with pytest.raises(NotImplementedError) as info:
                obj()
            msg = str(info.value)
            named = any(n in msg for n in _spellings(name)) or obj._tapegpu_refused is True
            if not named or "Instead:" not in msg:
                badly_refused.append((name, msg))
    assert not missing, f"{len(missing)} names are AttributeErrors: {missing[:20]}"
    assert not badly_refused, badly_refused[:10]


def test_refusal_message_names_the_name_why_and_instead():
    with pytest.raises(NotImplementedError, match=re.escape(
            "tf.compat.v1.placeholder is not available in tapegpu: it belongs to TF1's "
            "graph-mode API")) as info:
        tg.compat.v1.placeholder(tg.float32, shape=(None, 2))
    assert "Instead: the TF2 way" in str(info.value)
    with pytest.raises(NotImplementedError, match="tf.tpu.experimental.TPUSystemMetadata"):
        tg.tpu.experimental.TPUSystemMetadata()
    # an attribute of a refusal is refused too (not an AttributeError)
    with pytest.raises(NotImplementedError, match=r"tf.raw_ops.MatMul.__call__|tf.raw_ops.MatMul"):
        tg.raw_ops.MatMul.something
    # a subclass of a refused class can be declared; making one raises
    class Mine(tg.distribute.experimental.TPUStrategy):
        pass
    with pytest.raises(NotImplementedError, match="tf.distribute.experimental.TPUStrategy"):
        Mine()


def test_unlisted_names_are_still_attribute_errors():
    with pytest.raises(AttributeError):
        tg.reduce_summ
    with pytest.raises(AttributeError):
        tg.keras.layers.Densee
    with pytest.raises(AttributeError):
        tg.raw_ops._private
    assert not hasattr(tg.math, "no_such_op")


def test_listed_keras_names_answer_under_both_prefixes():
    # keras.X and tf.keras.X are both tg.keras.X
    assert surface.resolve("keras.layers.Dense") is tg.keras.layers.Dense
    assert surface.resolve("tf.keras.layers.Dense") is tg.keras.layers.Dense
    assert surface.status("tf.keras.backend.random_normal") == "implemented"


def test_compat_v1_shares_tf2_names():
    assert tg.compat.v1.nn.relu is tg.nn.relu
    assert tg.compat.v1.float32 is tg.float32
    assert tg.compat.v1.data.Dataset is tg.data.Dataset
    assert tg.compat.v2 is tg
    assert surface.status("tf.compat.v1.Session") == "refused"


def test_usage_weighted_coverage_is_reported():
    usage = coverage.load_usage()
    assert usage["tf.constant"] > 100  # the counter found real uses
    status = {n: surface.status(n) for n in usage if n in NAMES}
    done = sum(n for name, n in usage.items() if status.get(name) == "implemented")
    total = sum(n for name, n in usage.items() if name in status)
    assert done / total >= COVERAGE_FLOOR


def test_the_scripts_import():
    for mod in ("generate_names", "count_usage", "coverage"):
        importlib.import_module(f"tapegpu.testing.api_surface.{mod}")
