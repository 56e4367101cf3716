"""Property-based: random small programs of tapegpu ops, differentiated by the tape, against
central differences in float64, and batched VJPs against stacked single VJPs, on every device
the suite runs on."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tapegpu as tg

# (name, arity, function): smooth on the values the programs produce (inputs in [-1, 1];
# every step keeps values bounded), so central differences are accurate
UNARY = [("sin", tg.sin), ("cos", tg.cos), ("tanh", tg.tanh), ("sigmoid", tg.sigmoid),
         ("softplus", tg.math.softplus), ("square", tg.square), ("exp_small", lambda x: tg.exp(x * 0.3)),
         ("log1p_sq", lambda x: tg.math.log1p(x * x)), ("atan", tg.math.atan),
         ("neg", tg.negative), ("softsign", tg.nn.softsign),
         ("sum_keep", lambda x: tg.reduce_sum(x, axis=-1, keepdims=True) * 0.3 + x),
         ("mean_rows", lambda x: x - tg.reduce_mean(x, axis=0)),
         ("transpose_back", lambda x: tg.transpose(tg.transpose(x) * 1.5)),
         ("reshape_back", lambda x: tg.reshape(tg.reshape(x, (-1,)) * 0.7, x.shape)),
         ("softmax", lambda x: tg.nn.softmax(x) * 3.0)]
BINARY = [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
          ("mul", lambda a, b: a * b), ("div", lambda a, b: a / (b * b + 1.0)),
          ("bcast_row", lambda a, b: a * b[:1]), ("matmul", lambda a, b: tg.tanh(a @ tg.transpose(b)) @ b * 0.5)]

step = st.one_of(
    st.tuples(st.just(1), st.integers(0, len(UNARY) - 1), st.integers(0, 7), st.just(0)),
    st.tuples(st.just(2), st.integers(0, len(BINARY) - 1), st.integers(0, 7), st.integers(0, 7)))
programs = st.lists(step, min_size=1, max_size=6)


def run(program, xs):
    """Each step applies an op to earlier values (indices wrap); the result sums the last value
    with a weighted sum of all values, so every input can matter."""
    vals = list(xs)
    for arity, k, i, j in program:
        a = vals[i % len(vals)]
        if arity == 1:
            vals.append(UNARY[k][1](a))
        else:
            vals.append(BINARY[k][1](a, vals[j % len(vals)]))
    return vals[-1] + sum(v * (0.1 * (n + 1)) for n, v in enumerate(vals[:-1]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=programs, seed=st.integers(0, 2**16))
def test_random_programs_match_finite_differences_and_batch(program, seed):
    rng = np.random.default_rng(seed)
    xs = [rng.uniform(-1, 1, (3, 4)) for _ in range(2)]
    ts = [tg.constant(x) for x in xs]
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(ts)
        y = run(program, ts)
    u = rng.standard_normal(y.shape)
    grads = tape.gradient(y, ts, output_gradients=tg.constant(u))
    # <u, J v> by central differences along a random direction v, against <J^T u, v>
    vs = [rng.standard_normal(x.shape) for x in xs]
    h = 1e-5
    plus = run(program, [tg.constant(x + h * v) for x, v in zip(xs, vs)]).numpy()
    minus = run(program, [tg.constant(x - h * v) for x, v in zip(xs, vs)]).numpy()
    fd = float(np.sum(u * (plus - minus) / (2 * h)))
    ad = sum(float(np.sum(g.numpy() * v)) for g, v in zip(grads, vs) if g is not None)
    assert ad == pytest.approx(fd, rel=1e-6, abs=1e-8)
    # three cotangents in one batched sweep equal three single sweeps
    us = rng.standard_normal((3,) + y.shape)
    batched = tape.batched_gradient(y, ts, tg.constant(us), 1)
    for k in range(3):
        single = tape.gradient(y, ts, output_gradients=tg.constant(us[k]))
        for b, s in zip(batched, single):
            if s is None:
                assert b is None
            else:
                np.testing.assert_allclose(b.numpy()[k], s.numpy(), rtol=1e-10, atol=1e-12)
