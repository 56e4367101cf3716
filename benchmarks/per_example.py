"""Per-example gradients: `tg.vectorized_map` over one example's gradient, `tape.jacobian` of
the per-example losses, and a Python loop.

The model is a 100-128-10 tanh MLP with a softmax cross-entropy, batch 64. `vectorized_map` runs
the gradient of one example once, on the batch, by the ops' batching rules (TensorFlow's
per-example recipe). The Jacobian route takes the Jacobian of the vector of per-example losses
with respect to the variables: one forward pass and one batched backward sweep. The loop runs one
forward and one backward pass per example. All are timed interleaved (the order rotates every
round) on one pinned core with one BLAS thread; the report gives each one's median time and the
median over rounds of its ratio to the jacobian's time in the same round
(`benchmarks/timing.py`).

    python benchmarks/per_example.py [--repeats 9] [--batch 64]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.timing import compare, pin_one_thread  # noqa: E402

pin_one_thread()  # one BLAS thread, one core: before numpy is imported

import argparse  # noqa: E402

import numpy as np  # noqa: E402

import tapegpu as tg  # noqa: E402


def make_problem(batch, seed=0):
    tg.random.set_seed(seed)
    rng = np.random.default_rng(seed)
    model = tg.layers.Sequential([tg.layers.Dense(128, activation="tanh"), tg.layers.Dense(10)])
    x = tg.constant(rng.standard_normal((batch, 100)).astype(np.float32))
    y = tg.constant(rng.integers(0, 10, size=batch).astype(np.int32))
    model(x)
    return model, x, y


def per_example_jacobian(model, x, y):
    """(batch,) + variable.shape for each variable, from one batched backward sweep."""
    with tg.GradientTape() as tape:
        losses = tg.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=model(x))
    return tape.jacobian(losses, model.trainable_variables)


def per_example_vectorized(model, x, y):
    """The same, by vectorized_map over the gradient of one example (a batch of one)."""
    def grad_of_one(example):
        xi, yi = tg.expand_dims(example[0], 0), tg.expand_dims(example[1], 0)
        with tg.GradientTape() as tape:
            loss = tg.nn.sparse_softmax_cross_entropy_with_logits(labels=yi, logits=model(xi))
        return tape.gradient(loss, model.trainable_variables)
    return tg.vectorized_map(grad_of_one, (x, y))


def per_example_loop(model, x, y):
    """The same, one gradient per example."""
    rows = []
    for i in range(x.shape[0]):
        with tg.GradientTape() as tape:
            loss = tg.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y[i:i + 1], logits=model(x[i:i + 1]))
        rows.append(tape.gradient(loss, model.trainable_variables))
    return [tg.stack(list(col)) for col in zip(*rows)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed rounds (at least 7)")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args(argv)
    model, x, y = make_problem(args.batch)
    loop = per_example_loop(model, x, y)
    for route in (per_example_jacobian, per_example_vectorized):
        for a, b in zip(route(model, x, y), loop):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-4, atol=2e-6)

    cases = {"jacobian": lambda: per_example_jacobian(model, x, y),
             "vectorized_map": lambda: per_example_vectorized(model, x, y),
             "loop": lambda: per_example_loop(model, x, y)}
    results = compare(cases, baseline="jacobian", repeats=max(7, args.repeats))
    n_params = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    print(f"per-example gradients, 100-128-10 tanh MLP ({n_params:,} parameters), batch "
          f"{args.batch}, 1 thread on 1 core, median over {results['loop']['repeats']} "
          "interleaved rounds")
    for name, r in results.items():
        print(f"  {name:<14} {r['median_s'] * 1e3:9.2f} ms   ({r['ratio']:.2f}x the jacobian, "
              "same-round ratio)")
    return results


if __name__ == "__main__":
    main()
