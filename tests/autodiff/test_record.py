"""The compiled recorder (tapegpu/core/_record.c) against its Python twins, the oracle:
registry.wrap and recording.Recorder.record give the same tensors, entries and gradients."""
import os
import shutil

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.core import recording
from tapegpu.ops import registry
from tapegpu.testing.op_specs import SPECS, sample

compiled = pytest.mark.skipif(recording.compiled is None, reason="the compiled recorder is not "
                              "built here (or TAPEGPU_PURE_PYTHON is set)")


@pytest.fixture
def python_twins(monkeypatch):
    """Runs the test with the Python definitions of wrap and record."""
    monkeypatch.setattr(recording.Recorder, "record", recording.py_record)
    monkeypatch.setattr(registry, "wrap", registry.py_wrap)


def _record_spec(spec, xs):
    ts = [tg.constant(x) for x in xs]
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(ts)
        y = spec.fn(*ts)
    uids = {t._uid: ("input", i) for i, t in enumerate(ts)}
    described = []
    for e in tape._entries:  # ids are renamed by first appearance, to compare across runs
        uids.setdefault(e.out_uid, ("entry", len(described)))
        saved = e.saved
        described.append((
            e.op.name, tuple(None if u is None else uids.get(u, "other") for u in e.in_uids),
            e.in_shapes, repr(e.params), e.recompute,
            tuple((s.dtype.name, s.numpy().tobytes()) if isinstance(s, tg.Tensor) else s
                  for s in saved)))
    grads = tape.gradient(y, ts)
    return described, [None if g is None else g.numpy().tobytes() for g in grads], y


def _both(spec, request):
    xs = sample(spec, np.float64)
    compiled_run = _record_spec(spec, xs)
    request.getfixturevalue("python_twins")
    return compiled_run, _record_spec(spec, xs)


@compiled
@pytest.mark.parametrize("spec", [s for s in SPECS if s.grad], ids=str)
def test_compiled_recording_equals_the_python_twins(spec, request):
    (entries_c, grads_c, y_c), (entries_py, grads_py, y_py) = _both(spec, request)
    assert entries_c == entries_py
    assert grads_c == grads_py
    assert type(y_c) is type(y_py) is tg.Tensor and y_c.dtype == y_py.dtype


@compiled
@pytest.mark.parametrize("twins", [False, True], ids=["compiled", "python"])
def test_budget_custom_ops_and_accumulators_are_offered_the_same(twins, request):
    if twins:
        request.getfixturevalue("python_twins")
    v = tg.Variable([1.0, 2.0])
    block = tg.recompute_grad(lambda x: tg.sin(x) * v)  # a custom op with a variable slot
    x = tg.constant([0.5, 1.5])
    with tg.GradientTape(memory_budget=64) as budgeted:  # the budget sees every entry
        budgeted.watch(x)
        z = tg.reduce_sum(tg.sin(tg.sin(x) * 2.0))
    np.testing.assert_allclose(budgeted.gradient(z, x).numpy(),
                               np.cos(2 * np.sin(x.numpy())) * 2 * np.cos(x.numpy()), rtol=1e-6)
    with tg.GradientTape() as tape:
        tape.watch(x)
        with tg.autodiff.ForwardAccumulator(x, tg.constant([1.0, 0.0])) as acc:
            ex = tg.exp(x)
        y = tg.reduce_sum(block(x) * ex)
    np.testing.assert_allclose(acc.jvp(ex).numpy(), [np.exp(0.5), 0.0], rtol=1e-6)
    gx, gv = tape.gradient(y, [x, v])
    xn, vn = x.numpy(), v.numpy()
    np.testing.assert_allclose(gx.numpy(), (np.cos(xn) * vn + np.sin(xn) * vn) * np.exp(xn),
                               rtol=1e-6)
    np.testing.assert_allclose(gv.numpy(), np.sin(xn) * np.exp(xn), rtol=1e-6)


@compiled
def test_compiled_record_reports_errors_as_python_does(request):
    x = tg.constant([1.0])
    op = registry.REGISTRY["sin"]
    with tg.GradientTape() as tape:
        tape.watch(x)
        with pytest.raises(AttributeError, match="_uid"):
            tape.record(op, (object(),), x, {})
        with pytest.raises(TypeError):
            tape.record(op, 3, x, {})


def test_the_recorder_is_compiled_where_a_compiler_is():
    """Where a C compiler is (CI), the install builds the recorder: otherwise the compiled path
    would go untested without anyone noticing."""
    if os.environ.get("TAPEGPU_PURE_PYTHON", "") not in ("", "0"):
        assert recording.compiled is None
        return
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: the Python recorder runs")
    assert recording.compiled is not None, \
        "tapegpu.core._record is not built: reinstall with `pip install -e .`"


@pytest.mark.parametrize("twins", [False, True], ids=["compiled", "python"])
def test_an_input_shape_is_saved_inline(twins, request):
    """The ops that keep only their input's shape (reductions, reshape, getitem) share the
    inline plan SAVE_XSHAPE, which recording saves without the op's saved_values: the shape
    itself, by the compiled recorder and its twin alike."""
    if twins:
        request.getfixturevalue("python_twins")
    for name in ("reduce_sum", "reduce_mean", "reshape", "getitem"):
        assert registry.REGISTRY[name].save_plan is recording.SAVE_XSHAPE
    x = tg.constant(np.ones((3, 4), np.float32))
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.reduce_sum(tg.reshape(x, (4, 3)), axis=0)
    assert [e.saved for e in tape._entries] == [((3, 4),), ((4, 3),)]
    assert tape.gradient(y, x).numpy().tolist() == np.ones((3, 4)).tolist()
