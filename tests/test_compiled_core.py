"""The compiled core (tapegpu/_core.c) against its Python reference (tape.PyRecorder,
tape.PyEntry, the loop of sweep._sweep_arrays): the same entries, bit-identical gradients, the
same in-place accumulation; and the numpy backend's CPU kernels (tapegpu/_cpu.c) against numpy.
tests/test_pure_python.py runs the tape suite without them."""
import gc
import numpy as np
import pytest

import tapegpu as tg
from tapegpu import sweep, tape as tape_mod
from tapegpu.compiled import core, cpu

needs_core = pytest.mark.skipif(core is None, reason="the compiled core is not built here")


class _ReferenceTape(tg.GradientTape):
    """A tape whose `record` is the Python reference."""
    record = tape_mod.PyRecorder.record


def _program(x, w, v):
    """Ops of every recording shape: one input (save x, save out), two inputs with a Python
    scalar or both tracked, broadcasting, a variadic op, an op with residuals, a shape save, a
    variable read, an op with params."""
    a = tg.sin(x) * 1.01 + 0.1
    b = tg.exp(a) / (x + 2.0)
    c = tg.concat([a, b, a], axis=0)
    d = tg.matmul(tg.reshape(c, (3, 4)), w) + v
    e = tg.reduce_sum(d * d, axis=1, keepdims=True) - tg.reduce_mean(d)
    labels = tg.constant(np.array([0, 2, 1], np.int32))
    loss = tg.nn.sparse_softmax_cross_entropy_with_logits(labels, d)
    return tg.reduce_sum(e) + tg.reduce_sum(loss) + tg.einsum("ij,ij->", d, d)


def _inputs():
    rng = np.random.default_rng(3)
    x = tg.constant(rng.standard_normal(4))
    w = tg.constant(rng.standard_normal((4, 5)))
    v = tg.Variable(rng.standard_normal(5))
    return x, w, v


@needs_core
def test_compiled_record_makes_the_same_entries_as_the_reference():
    x, w, v = _inputs()
    with tg.GradientTape() as compiled, _ReferenceTape() as reference:
        compiled.watch([x, w])
        reference.watch([x, w])
        _program(x, w, v)
    assert type(compiled._entries[0]) is core.Entry
    assert len(compiled._entries) == len(reference._entries) > 10
    for c, r in zip(compiled._entries, reference._entries):
        assert c.op is r.op
        assert (c.in_uids, c.out_uid, c.in_shapes) == (r.in_uids, r.out_uid, r.in_shapes)
        assert len(c.saved) == len(r.saved)
        for a, b in zip(c.saved, r.saved):  # the same tensors (shapes are equal tuples)
            assert a is b if isinstance(a, tg.Tensor) else a == b, c.op.name
        assert c.params == r.params and c.recompute is None and r.recompute is None
    assert compiled._tracked == reference._tracked


@needs_core
def test_compiled_entry_behaves_like_the_python_one():
    for cls in (core.Entry, tape_mod.PyEntry):
        e = cls("op", (1, None), 2, ("s",), {}, ((3,), ()))
        assert (e.op, e.in_uids, e.out_uid, e.saved, e.params, e.in_shapes, e.recompute) == \
            ("op", (1, None), 2, ("s",), {}, ((3,), ()), None)
        with pytest.raises(AttributeError):
            e.args  # set only by a checkpoint segment
        e.args, e.saved = ("a",), None
        assert (e.args, e.saved) == (("a",), None)
    e = core.Entry("op", (), 1, (), {}, ())
    e.recompute = [e]  # a cycle, as checkpoint segments make: the collector must see it
    assert gc.is_tracked(e) and e.recompute in gc.get_referents(e)


def _gradients(persistent):
    """Sweeps through every path of the array sweep: a chain, fan-out into one tensor
    (accumulated in place), broadcasting (un-broadcast), kept targets, batched cotangents."""
    x, w, v = _inputs()
    with tg.GradientTape(persistent=True) as t:
        t.watch([x, w])
        y = _program(x, w, v)
        z = tg.add_n([tg.sin(x) * float(k) for k in range(1, 5)])
    out = list(t.gradient(y, [x, w, v]))
    out += t.gradient([y, z], [x, z])
    out.append(t.jacobian(z, x))
    out += t.batched_gradient(z, [x, w], tg.eye(4, dtype=tg.float64), unconnected_gradients="zero")
    return [g.numpy() for g in out]


@needs_core
@pytest.mark.parametrize("in_place", [True, False])
def test_compiled_sweep_gives_bit_identical_gradients(monkeypatch, in_place):
    monkeypatch.setattr(sweep, "IN_PLACE", in_place)
    compiled = _gradients(persistent=True)
    monkeypatch.setattr(sweep, "_core", None)
    reference = _gradients(persistent=True)
    assert len(compiled) == len(reference)
    for c, r in zip(compiled, reference):
        assert c.dtype == r.dtype
        np.testing.assert_array_equal(c, r)


@needs_core
@pytest.mark.parametrize("fast", [False, True], ids=["step", "fast step"])
def test_compiled_sweep_passes_on_errors_from_rules(monkeypatch, fast):
    x = tg.constant([1.0, 2.0])
    with tg.GradientTape() as t:
        t.watch(x)
        y = tg.sin(x)

    def step(xp, g, e, reach):
        return (1 / 0,)
    if fast:  # the core runs the described rule, not the step
        step.fast = (sweep.FAST_UNARY, lambda xp, g, x: g + {}, None)
    monkeypatch.setitem(tg.sin.op.steps, (x._dev.name, False), step)
    with pytest.raises(TypeError if fast else ZeroDivisionError):
        t.gradient(y, x)


# -- tapegpu._cpu: one-pass kernels of the numpy backend ------------------------------------------

needs_cpu = pytest.mark.skipif(cpu is None, reason="tapegpu._cpu is not built here")


def _specials(dtype, shape, seed):
    """Random values with every special one among them: NaNs of both signs, infinities, signed
    zeros, subnormals, huge values."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(dtype)
    flat = a.reshape(-1)
    info = np.finfo(dtype)
    neg_nan = -np.array(np.nan, dtype)  # the sign bit set
    special = np.array([np.nan, neg_nan, np.inf, -np.inf, 0.0, -0.0, info.tiny / 4,
                        -info.tiny / 4, info.max, -info.max], dtype)
    flat[rng.choice(flat.size, special.size, replace=False)] = special
    return a


def _bits(a):
    return a.view(np.int32 if a.dtype.itemsize == 4 else np.int64)


@needs_cpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_relu_kernel_gives_numpys_bits(dtype):
    x, b = _specials(dtype, (37, 29), 1), _specials(dtype, (29,), 2)
    got = np.empty_like(x)
    cpu.bias_relu(x, b, got)
    with np.errstate(over="ignore", invalid="ignore"):  # inf - inf, max + max
        want = np.maximum(x + b, 0)
    np.testing.assert_array_equal(_bits(got), _bits(want))


@needs_cpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)], ids=str)
def test_relu_backward_kernel_gives_keep_wheres_bits(dtype, batch):
    from tapegpu.fused import keep_where
    y = np.maximum(_specials(dtype, (13, 21), 3), 0)  # relu outputs: NaN, +0, positives
    g = _specials(dtype, batch + (13, 21), 4)
    got = np.empty_like(g)
    cpu.relu_backward(y, g, got)
    np.testing.assert_array_equal(_bits(got), _bits(keep_where(np, y > 0.0, g)))


@needs_cpu
def test_cpu_kernels_refuse_what_they_cannot_run():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match="float32 or all float64"):
        cpu.bias_relu(x, np.ones(3), np.empty_like(x))
    with pytest.raises(ValueError, match="rows of len"):
        cpu.bias_relu(x, np.ones(4, np.float32), np.empty_like(x))
    with pytest.raises(ValueError, match="not C-contiguous"):
        cpu.relu_backward(x.T, x.T, np.empty((3, 2), np.float32))


@needs_cpu
def test_numpy_backend_runs_the_cpu_kernels_and_falls_back(monkeypatch, tg_device):
    from tapegpu import dispatch
    calls = []

    class Counting:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(cpu, name)
    monkeypatch.setattr(dispatch, "cpu", Counting())

    def grads(x, w, b):
        with tg.GradientTape() as tape:
            tape.watch([w, b])
            h = tg.nn.bias_act(tg.matmul(x, w), b, "relu")
            y = tg.reduce_sum(tg.nn.relu(h * 2.0 - 1.0) * v)  # relu's g: contiguous
        return [g.numpy() for g in tape.gradient(y, [w, b])]

    rng = np.random.default_rng(5)
    x, w = tg.constant(rng.standard_normal((8, 6))), tg.constant(rng.standard_normal((6, 5)))
    b, v = tg.constant(rng.standard_normal(5)), tg.constant(rng.standard_normal((8, 5)))
    got = grads(x, w, b)
    want = sorted(["bias_relu", "relu_backward", "relu_backward"]) if tg_device == "numpy" else []
    assert sorted(calls) == want
    from tapegpu.registry import REGISTRY
    for op in (REGISTRY["relu"], REGISTRY["bias_act"]):  # the same without the kernels
        monkeypatch.setattr(op, "overrides", {k: f for k, f in op.overrides.items()
                                              if k != "numpy"})
        monkeypatch.setattr(op, "fused_overrides", {k: f for k, f in op.fused_overrides.items()
                                                    if k != "numpy"})
        monkeypatch.setattr(op, "steps", {})
    for g, r in zip(got, grads(x, w, b)):
        np.testing.assert_array_equal(g, r)
    monkeypatch.undo()
    monkeypatch.setattr(dispatch, "cpu", Counting())
    calls.clear()  # a transposed view is not C-contiguous: numpy runs it, to the same bits
    a = rng.standard_normal((5, 8))
    with tg.GradientTape() as tape:
        xt = tg.transpose(tg.constant(a))
        tape.watch(xt)
        y = tg.nn.bias_act(xt, b, "relu")
    assert calls == []
    np.testing.assert_array_equal(y.numpy(), np.maximum(a.T + b.numpy(), 0))
    np.testing.assert_array_equal(tape.gradient(y, xt).numpy(), (a.T + b.numpy() > 0) * 1.0)
