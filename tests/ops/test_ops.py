"""Every op of the spec table: forward vs numpy, VJP vs finite differences (float64), batched
VJP == stacked single VJPs (one and two batch axes), no gradient where TF has none."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.ops.registry import REGISTRY
from tapegpu.testing.op_specs import SPECS, covered_ops, sample

DIFF = [s for s in SPECS if s.grad]
NONDIFF = [s for s in SPECS if not s.grad]


def _run(spec, xs, watch=True, persistent=False):
    ts = [tg.constant(x) for x in xs]
    tape = tg.GradientTape(persistent=persistent)
    with tape:
        if watch:
            tape.watch(ts)
        y = spec.fn(*ts)
    return tape, ts, y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_forward_matches_numpy(spec, dtype):
    xs = sample(spec, dtype)
    got = spec.fn(*[tg.constant(x) for x in xs])
    want = np.asarray(spec.ref(*xs))
    if want.dtype.kind == "f":
        expect = spec.extra.get("out_dtype", dtype)
        assert got.dtype == expect, f"{spec.name}: {dtype.__name__} became {got.dtype.name}"
        tol = 2e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got.numpy(), want)
    assert got.shape == want.shape


def _dot(a, b):
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


@pytest.mark.parametrize("spec", DIFF, ids=str)
def test_vjp_matches_central_differences(spec):
    """<u, J v> by central differences along a random v equals <J^T u, v> from the tape."""
    rng = np.random.default_rng(1)
    xs = sample(spec, np.float64)
    tape, ts, y = _run(spec, xs)
    u = rng.standard_normal(y.shape)
    grads = tape.gradient(y, ts, output_gradients=tg.constant(u))
    vs = [rng.standard_normal(x.shape) * spec.extra.get("scale", 1.0) for x in xs]
    h = spec.extra.get("h", 1e-6)
    plus = spec.fn(*[tg.constant(x + h * v) for x, v in zip(xs, vs)]).numpy()
    minus = spec.fn(*[tg.constant(x - h * v) for x, v in zip(xs, vs)]).numpy()
    fd = _dot(u, (plus - minus) / (2 * h))
    ad = sum(_dot(g, v) for g, v in zip(grads, vs) if g is not None)
    assert all(g is None or g.shape == x.shape for g, x in zip(grads, xs))
    assert ad == pytest.approx(fd, rel=spec.extra.get("rel", 1e-6), abs=1e-7), spec.name


@pytest.mark.parametrize("batch", [(3,), (2, 2)], ids=["1axis", "2axes"])
@pytest.mark.parametrize("spec", DIFF, ids=str)
def test_batched_vjp_equals_stacked(spec, batch):
    rng = np.random.default_rng(2)
    xs = sample(spec, np.float64)
    tape, ts, y = _run(spec, xs, persistent=True)
    us = rng.standard_normal(batch + y.shape)
    batched = tape.batched_gradient(y, ts, tg.constant(us), batch_ndim=len(batch))
    flat = us.reshape((-1,) + y.shape)
    for i, x in enumerate(xs):
        singles = [tape.gradient(y, ts[i], output_gradients=tg.constant(u)) for u in flat]
        if batched[i] is None:
            assert all(s is None for s in singles)
            continue
        want = np.stack([s.numpy() for s in singles]).reshape(batch + x.shape)
        assert batched[i].shape == batch + x.shape
        np.testing.assert_allclose(batched[i].numpy(), want, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("spec", NONDIFF, ids=str)
def test_no_gradient_where_tf_has_none(spec):
    xs = sample(spec, np.float64)
    tape, ts, y = _run(spec, xs)
    assert all(g is None for g in tape.gradient(y, ts))


@pytest.mark.parametrize("spec", DIFF, ids=str)
def test_float32_gradients_stay_float32(spec):
    xs = sample(spec, np.float32)
    tape, ts, y = _run(spec, xs)
    for g in tape.gradient(y, ts):
        assert g is None or g.dtype == tg.float32


def test_every_registered_op_has_a_spec():
    covered = set().union(*(covered_ops(s) for s in SPECS))
    missing = sorted(set(REGISTRY) - covered)
    assert not missing, f"registered ops without a spec in tapegpu/testing/op_specs.py: {missing}"


@pytest.mark.parametrize("batch", [(), (3,)], ids=["plain", "batched"])
@pytest.mark.parametrize("spec", DIFF, ids=str)
def test_array_sweep_equals_tensor_sweep(spec, batch, monkeypatch, tg_device):
    """The sweep on raw arrays (fused VJPs) gives the same bits as the sweep on tensors (on
    numpy; with kernels, which sum and round in their own order, to a few ulps)."""
    from tapegpu.core.options import options
    rng = np.random.default_rng(3)
    xs = sample(spec, np.float64)
    tape, ts, y = _run(spec, xs, persistent=True)
    us = tg.constant(rng.standard_normal(batch + y.shape))
    fused = tape.batched_gradient(y, ts, us, batch_ndim=len(batch))
    monkeypatch.setattr(options, "array_sweep", False)
    plain = tape.batched_gradient(y, ts, us, batch_ndim=len(batch))
    for a, b in zip(fused, plain):
        assert (a is None) == (b is None)
        if a is not None and tg_device == "numpy":
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        elif a is not None:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-13, atol=1e-15)


def test_sigmoid_cross_entropy_gradient_is_exact_at_zero_logits():
    """d/dx of the loss is sigmoid(x) - z everywhere, x = 0 included (where max(x, 0) and |x|
    have kinks), as in TensorFlow."""
    z = np.array([0.0, 0.25, 1.0])
    x = tg.constant(np.zeros(3))
    with tg.GradientTape() as tape:
        tape.watch(x)
        loss = tg.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x)
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), 0.5 - z, rtol=0, atol=1e-15)


def _elementwise(spec):
    ops = covered_ops(spec)
    return all(o in REGISTRY and REGISTRY[o].elementwise for o in ops)


# elementwise specs whose inputs share one shape and that central differences resolve at the
# default step (cast_roundtrip quantises to float32 and needs a wide one)
ZERO_D = [s for s in DIFF if _elementwise(s) and len(set(s.shapes)) == 1 and "h" not in s.extra]


def _zero_d(spec, dtype=np.float64):
    """The spec's sample reduced to 0-d inputs (its first elements: same domain and kinks)."""
    return [np.asarray(x.reshape(-1)[0]) for x in sample(spec, dtype)]


@pytest.mark.parametrize("spec", ZERO_D, ids=str)
def test_zero_d_gradients(spec):
    """Elementwise ops on 0-d tensors: gradients (as arrays, never numpy scalars) against
    central differences, batched against stacked, JVP, and a third derivative by nested tapes."""
    xs = _zero_d(spec)
    ts = [tg.constant(x) for x in xs]
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(ts)
        y = spec.fn(*ts)
    grads = tape.gradient(y, ts)
    eps = 1e-6
    for i, g in enumerate(grads):
        assert g.shape == () and g.dtype == tg.float64 and not isinstance(g._data, np.generic)
        hi = [x + eps if j == i else x for j, x in enumerate(xs)]
        lo = [x - eps if j == i else x for j, x in enumerate(xs)]
        fd = (spec.fn(*[tg.constant(v) for v in hi]).numpy() -
              spec.fn(*[tg.constant(v) for v in lo]).numpy()) / (2 * eps)
        np.testing.assert_allclose(g.numpy(), fd, rtol=1e-5, atol=1e-7)
    cot = np.array([1.0, -2.0, 0.5])
    batched = tape.batched_gradient(y, ts, tg.constant(cot), 1)
    for g, b in zip(grads, batched):
        np.testing.assert_allclose(b.numpy(), cot * g.numpy(), rtol=1e-12, atol=1e-15)
    with tg.autodiff.ForwardAccumulator(ts, [tg.constant(np.asarray(1.0))] * len(ts)) as acc:
        y2 = spec.fn(*ts)
    jvp = acc.jvp(y2)
    np.testing.assert_allclose(jvp.numpy(), sum(g.numpy() for g in grads), rtol=1e-9,
                               atol=1e-12)
    x = ts[0]
    with tg.GradientTape() as t3:
        t3.watch(x)
        with tg.GradientTape() as t2:
            t2.watch(x)
            with tg.GradientTape() as t1:
                t1.watch(x)
                y3 = spec.fn(x, *ts[1:])
            d1 = t1.gradient(y3, x)
        d2 = t2.gradient(d1, x) if d1 is not None else None
    if d2 is not None:
        d3 = t3.gradient(d2, x)
        assert d3 is None or d3.shape == ()


def test_reduce_prod_gradient_is_a_fixed_number_of_ops():
    """reduce_prod's rule is two cumulative products, not one op per reduced element: the ops an
    outer tape records for its gradient do not grow with the reduced axis."""
    def recorded(n):
        x = tg.constant(np.linspace(0.5, 1.5, n))
        with tg.GradientTape() as outer:
            outer.watch(x)
            with tg.GradientTape() as inner:
                inner.watch(x)
                y = tg.math.reduce_prod(x)
            inner.gradient(y, x)
        return len(outer._entries)
    assert recorded(5) == recorded(50)


def test_every_zero_when_description_holds_on_finite_inputs():
    """An entry's `zero_when` (what tg.function's diagonal pass relies on): zeroing every
    argument of a group gives 0 wherever the others are finite (and nonzero for a divisor)."""
    rng = np.random.default_rng(0)
    described = [op for op in REGISTRY.values() if op.zero_when]
    assert {op.name for op in described} >= {"multiply", "divide", "where", "xlogy", "xlog1py"}
    for op in described:
        for group in op.zero_when:
            arrays = []
            for name in op.args:
                if name == "c":  # where's condition
                    arrays.append(rng.random(8) < 0.5)
                elif name in group:
                    arrays.append(np.zeros(8))
                else:
                    arrays.append(rng.uniform(0.5, 2.0, 8) * rng.choice([-1.0, 1.0], 8))
            if op.name == "xlog1py" or op.name == "xlogy":
                arrays[1] = np.abs(arrays[1])  # inside the logarithm's domain
            out = op.forward(np, *arrays)
            np.testing.assert_array_equal(out, 0.0, err_msg=f"{op.name} {group}")


def test_zero_when_must_name_the_ops_arguments():
    from tapegpu.ops.registry import Op
    with pytest.raises(ValueError, match=r"zero_when names \['z'\], not among its args"):
        Op("bad", lambda xp, x, y: x * y, args=("x", "y"), zero_when=(("z",),))
