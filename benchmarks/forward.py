"""Issue-5 figures: Hessian-vector product vs gradient of an MLP; a tall Jacobian, auto vs reverse.

    python -m benchmarks.forward       (one thread, pinned; prints ratios; --json FILE)

Each figure is a ratio of two cases timed in the same run, interleaved round by round (median
over rounds of the per-round ratio; see benchmarks/timing.py).
"""
from benchmarks.timing import pin_one_thread

pin_one_thread()

import argparse  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402

import tapegpu as tg  # noqa: E402
from benchmarks.timing import compare, table  # noqa: E402


# -- H1: HVP of a 784 -> 256 -> 10 tanh MLP with softmax cross-entropy, batch 64 ------------------

def hvp_cases(batch=64, dtype=np.float32):
    rng = np.random.default_rng(0)
    x = tg.constant(rng.standard_normal((batch, 784)).astype(dtype))
    labels = tg.constant(rng.integers(0, 10, batch).astype(np.int32))
    params = [tg.Variable((rng.standard_normal((784, 256)) / 28).astype(dtype)),
              tg.Variable(np.zeros(256, dtype)),
              tg.Variable((rng.standard_normal((256, 10)) / 16).astype(dtype)),
              tg.Variable(np.zeros(10, dtype))]
    vs = [tg.constant(rng.standard_normal(p.shape).astype(dtype)) for p in params]

    def loss(w1, b1, w2, b2):
        h = tg.tanh(tg.matmul(x, w1) + b1)
        logits = tg.matmul(h, w2) + b2
        return tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))

    def gradient():
        with tg.GradientTape() as tape:
            y = loss(*params)
        return tape.gradient(y, params)

    def hvp():
        return tg.autodiff.hvp(loss, params, vs)

    def hvp_fwd_rev():
        return tg.autodiff.hvp(loss, params, vs, mode="forward_over_reverse")

    return {"gradient": gradient, "hvp (default: reverse-over-forward)": hvp,
            "hvp (forward-over-reverse)": hvp_fwd_rev}


# -- J1: a tall Jacobian, 1 input -> 4096 outputs --------------------------------------------------

def tall_jacobian_cases(n=4096, dtype=np.float32):
    rng = np.random.default_rng(1)
    x = tg.constant(np.array([[0.3]], dtype))
    w = tg.constant(rng.standard_normal((1, n)).astype(dtype))

    def f():
        return tg.tanh(tg.sin(tg.matmul(x, w)) * 2.0 + 1.0) * tg.exp(tg.matmul(x, w) * 0.1)

    def jac(mode):
        def run():
            with tg.GradientTape() as tape:
                tape.watch(x)
                y = f()
            return tape.jacobian(y, x, mode=mode)
        return run

    return {"reverse": jac("reverse"), "auto (forward)": jac("auto")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    results = {}
    h = compare(hvp_cases(), "gradient", repeats=args.repeats)
    print(table("H1: HVP w.r.t. all parameters of a 784-256-10 tanh MLP, batch 64 (float32)",
                h, "gradient"))
    results["hvp_over_gradient"] = h["hvp (default: reverse-over-forward)"]["ratio"]
    results["hvp_forward_over_reverse_over_gradient"] = h["hvp (forward-over-reverse)"]["ratio"]
    j = compare(tall_jacobian_cases(), "auto (forward)", repeats=args.repeats)
    print(table("J1: Jacobian of 1 -> 4096 outputs (elementwise ops, a 1x4096 matmul)", j,
                "auto (forward)"))
    results["tall_jacobian_reverse_over_auto"] = j["reverse"]["ratio"]
    print(f"\nhvp / gradient = {results['hvp_over_gradient']:.3f}   (target <= 2.0; "
          f"forward-over-reverse: {results['hvp_forward_over_reverse_over_gradient']:.3f})")
    print(f"reverse / auto = {results['tall_jacobian_reverse_over_auto']:.1f}x (target >= 10)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"hvp": h, "tall_jacobian": j, "summary": results}, fh, indent=1)


if __name__ == "__main__":
    main()
