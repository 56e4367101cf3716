"""tg.function figures: the anchor workloads traced vs eager, beside JAX jit and TF's function.

    python -m benchmarks.function      (one thread, pinned; prints ratios; --json FILE)

W1: 100 x (sin, *, +) on a (16,) vector, forward + gradient (workloads.w1_overhead) against
hand-written numpy. W3b: the Jacobian wrt the first kernel (64x256x512). W8: the conv net's
step with SAME padding (benchmarks/conv.py), TensorFlow's the same code. W2: the gradient step
of core.training_cases against the 8-matmul floor, and the step with its SGD update
(workloads.w2_training) against tapegpu eager. W3a (Jacobian wrt the input, vectorized), W4
(batch Jacobian), W5 (gradient; HVP reverse-over-reverse and forward-over-reverse), W6
(per-example gradients): each workload's tapegpu code under
`@tg.function`, unchanged, against the same code eagerly. Where JAX and TensorFlow import
(a peers venv: docs/benchmarks.md), their cases run beside: JAX under `jax.jit` as the workloads
write it, TensorFlow's eager step under `tf.function`. Each case's result is checked against
tapegpu eager's before timing. Also reported: the first call (the trace; JAX's and TF's
compilation) and each case's process CPU time over wall time (1.0 = one busy core).
"""
from benchmarks.timing import pin_one_thread

pin_one_thread()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import tapegpu as tg  # noqa: E402
from tapegpu.function import fusion  # noqa: E402
from benchmarks import workloads as W  # noqa: E402
from benchmarks.core import training_cases  # noqa: E402
from benchmarks.run import import_peers  # noqa: E402
from benchmarks.timing import compare, cpu_over_wall, table  # noqa: E402

EAGER, TRACED = "tapegpu eager", "tapegpu @tg.function"
JAX, TF = "jax jit", "tensorflow tf.function"


def _numpy(x):
    return [np.asarray(W.to_numpy(a)) for a in tg.nest.flatten(x)]


def _first_call(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _check(name, got, want, tol):
    if tol is None:
        return
    for a, b in zip(_numpy(got), _numpy(want)):
        np.testing.assert_allclose(a, b, rtol=tol[0], atol=tol[1], err_msg=name)


def traced_cases(workload, row, fw, floor=None, stateful=False):
    """({case: fn}, {case: first-call seconds}) for one row: tapegpu eager and traced, JAX's
    and TF's compiled cases when present, and the floor when named. A `stateful` row (an
    optimizer step: each call computes from the previous call's variables) is not checked
    (tests/function checks traced training steps bit for bit)."""
    tol = None if stateful else workload.tol
    cases, first = {}, {}
    if floor is not None:
        cases["numpy (floor)"] = workload.cases[row, W.FLOOR]
    eager = workload.cases[row, W.TAPEGPU]
    cases[EAGER] = eager
    traced = tg.function(eager)
    out, first[TRACED] = _first_call(traced)
    # the first call does not wait for the C++ compiler (an empty kernel cache: the kernels
    # compile in the background, the calls meanwhile replay unfused); the timed calls below run
    # the fused kernels: when they were ready is reported beside the first call
    t0 = time.perf_counter()
    fusion.wait_compiled()
    first[TRACED + ", fused kernels ready"] = first[TRACED] + time.perf_counter() - t0
    _check(TRACED, traced(), eager(), tol)
    cases[TRACED] = traced
    if (row, "jax") in workload.cases:
        jfn = workload.cases[row, "jax"]
        out, first[JAX] = _first_call(jfn)
        _check(JAX, out, eager(), tol)
        cases[JAX] = jfn
    if (row, "tensorflow") in workload.cases:
        tfn = fw["tf"].function(workload.cases[row, "tensorflow"])
        out, first[TF] = _first_call(tfn)
        _check(TF, out, eager(), tol)
        cases[TF] = tfn
    return cases, first


def w1(fw):
    w = W.w1_overhead(fw)
    row = w.rows()[0]
    return traced_cases(w, row, fw, floor=True), "numpy (floor)", \
        "W1 100 x (sin, *, +) on (16,), forward + gradient"


def w2_grads(fw):
    cases = training_cases()
    cases = {("numpy (floor)" if "floor" in k else EAGER): v for k, v in cases.items()
             if k != "pytorch step"}
    traced = tg.function(cases[EAGER])
    _, first = _first_call(traced)
    for a, b in zip(traced(), cases[EAGER]()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    cases[TRACED] = traced
    return (cases, {TRACED: first}), "numpy (floor)", \
        "W2 training step 784-1024-1024-10 ReLU, batch 256 (gradients) vs the 8-matmul floor"


def w8_conv_net(fw, batch=64):
    """W8: the conv net's training step as TensorFlow code writes it, SAME padding
    (benchmarks/conv.py's net: conv 3x3 32 - max_pool 2 - conv 3x3 64 - max_pool 2 - dense 10,
    batch 64 of 28x28x1), the gradients of its three weights; TensorFlow's the same code."""
    from benchmarks.conv import net_cases
    cases, (x, labels, ws, step, _) = net_cases(batch, padding="SAME")
    row = "conv net step, SAME, batch 64 28x28x1"
    out = {(row, W.TAPEGPU): step, (row, W.FLOOR): cases["numpy floor (hand im2col)"]}
    if fw.get("tf"):
        tf = fw["tf"]
        xf, yf = tf.constant(x), tf.constant(labels)
        vf = [tf.Variable(w) for w in ws]

        def tf_step():
            with tf.GradientTape() as tape:
                h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(xf, vf[0], 1, "SAME")), 2, 2,
                                     "SAME")
                h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(h, vf[1], 1, "SAME")), 2, 2,
                                     "SAME")
                logits = tf.matmul(tf.reshape(h, (batch, -1)), vf[2])
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(yf, logits))
            return tape.gradient(loss, vf)
        out[row, "tensorflow"] = tf_step
    return W.Workload("W8", "conv net step, SAME padding", out, tol=(2e-3, 2e-4))


def _workload_row(build, pick, title, stateful=False):
    def make(fw):
        w = build(fw)
        row = next(r for r in w.rows() if pick in r)
        return traced_cases(w, row, fw, stateful=stateful), EAGER, f"{title}: {row}"
    return make


SUITES = {
    "w1": w1,
    "w2": w2_grads,
    "w2_sgd": _workload_row(W.w2_training, "SGD", "W2 step with SGD update", stateful=True),
    "w3a": _workload_row(W.w3_jacobian, "J wrt input (64x256), vectorized", "W3a"),
    "w3b": _workload_row(W.w3_jacobian, "J wrt W1 (64x256x512), vectorized", "W3b"),
    "w4": _workload_row(W.w4_batch_jacobian, "batch_jacobian", "W4"),
    "w5_grad": _workload_row(W.w5_hvp, "gradient w.r.t. all", "W5"),
    "w5_rr": _workload_row(W.w5_hvp, "reverse-over-reverse", "W5"),
    "w5_fr": _workload_row(W.w5_hvp, "forward-over-reverse", "W5"),
    "w6": _workload_row(W.w6_per_example, "per-example", "W6"),
    "w8": _workload_row(w8_conv_net, "conv net", "W8"),
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--only", nargs="*", choices=sorted(SUITES), help="these workloads only")
    p.add_argument("--no-peers", action="store_true", help="without JAX and TensorFlow")
    p.add_argument("--cold", action="store_true",
                   help="an empty kernel cache (a new private directory) for tapegpu's first "
                        "calls, as on a fresh install; JAX and TF keep no compiled code between "
                        "processes by default, so theirs are always cold")
    args = p.parse_args(argv)
    if args.cold:
        os.environ["TAPEGPU_EMU_CACHE"] = tempfile.mkdtemp(prefix="tapegpu-cold-cache-")
    fw, versions, _ = ({}, {}, {}) if args.no_peers else import_peers("1", {"jax", "tf"})
    print(f"tapegpu {tg.__version__}, numpy {np.__version__}"
          + "".join(f", {k} {v}" for k, v in versions.items()) + "; one thread"
          + ("; tapegpu's kernel cache empty at the start" if args.cold else ""))
    results = {}
    for name in args.only or list(SUITES):
        (cases, first), base, title = SUITES[name](fw)
        r = compare(cases, base, repeats=args.repeats)
        for n, fn in cases.items():
            r[n]["cpu_over_wall"] = cpu_over_wall(fn)
        print(table(title, r, base))
        print("  cpu/wall: " + ", ".join(f"{n} {r[n]['cpu_over_wall']:.2f}" for n in r))
        print("  first call (trace / compile): " +
              ", ".join(f"{n} {s * 1e3:.1f} ms" for n, s in first.items()))
        results[name] = {"cases": r, "first_call_s": first, "baseline": base}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
