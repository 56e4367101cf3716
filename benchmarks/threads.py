"""Training on a loaded machine: tapegpu's BLAS threads against TensorFlow's default.

    python -m benchmarks.threads [--steps 200] [--busy 1] [--rounds 3] [--cases ...]

One eager training loop (an MLP 784-1024-1024-10 with ReLU, batch 256, softmax cross-entropy,
plain SGD through `GradientTape`), written once and run by both frameworks (tapegpu ports by
changing the import), each case in a fresh process, while `--busy` processes spin on the cores.
Both start from the same numpy weights and data, and their losses after the run must agree before
anything is reported. Cases rotate each round; each figure is the median over rounds of the
loop's wall time and of its CPU time (all of its threads, `time.process_time`): CPU time well
above wall time x threads that could run means threads waiting on each other.

Cases: `tapegpu` (its default), `tapegpu:N` (`set_intra_op_parallelism_threads(N)`),
`tensorflow` (its default), `tensorflow:N` (TF's intra-op pool at N threads).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

SIZES = (784, 1024, 1024, 10)
BATCH = 256


def data(steps):
    rng = np.random.default_rng(0)
    weights = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        weights.append(rng.normal(0, (2.0 / fan_in) ** 0.5, (fan_in, fan_out)).astype(np.float32))
        weights.append(np.zeros(fan_out, np.float32))
    x = rng.normal(0, 1, (8, BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], (8, BATCH)).astype(np.int64)
    return weights, [(x[i % 8], y[i % 8]) for i in range(steps)]


def train(tf, steps, lr=0.01):
    """The training loop, in the frameworks' shared API; returns (wall s, CPU s, last loss)."""
    weights, batches = data(steps + 3)
    params = [tf.Variable(w) for w in weights]

    def step(x, y):
        with tf.GradientTape() as tape:
            h = x
            for i in range(0, len(params) - 2, 2):
                h = tf.nn.relu(h @ params[i] + params[i + 1])
            logits = h @ params[-2] + params[-1]
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        for p, g in zip(params, tape.gradient(loss, params)):
            p.assign_sub(lr * g)
        return loss

    for x, y in batches[:3]:  # warm-up: first calls, allocations
        step(x, y)
    wall, cpu = time.perf_counter(), time.process_time()
    for x, y in batches[3:]:
        loss = step(x, y)
    loss = float(loss.numpy())
    return time.perf_counter() - wall, time.process_time() - cpu, loss


def child(case, steps):
    name, _, threads = case.partition(":")
    if name == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf
        if threads:
            tf.config.threading.set_intra_op_parallelism_threads(int(threads))
    else:
        import tapegpu as tf
        if threads:
            tf.config.threading.set_intra_op_parallelism_threads(int(threads))
        from tapegpu.core import config
        threads = threads or f"default {config.blas_threads()}"
    wall, cpu, loss = train(tf, steps)
    print(json.dumps({"case": case, "threads": threads or "default", "wall": wall, "cpu": cpu,
                      "loss": loss}))


def spinners(n):
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.threads", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--busy", type=int, default=1, help="competing busy processes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="+",
                        default=["tapegpu", "tapegpu:1", f"tapegpu:{os.cpu_count()}",
                                 "tensorflow"])
    parser.add_argument("--tf-python", default=sys.executable,
                        help="the Python that has TensorFlow (default: this one)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.steps)
    results = {case: [] for case in args.cases}
    load = os.getloadavg()[0]
    busy = spinners(args.busy)
    try:
        for r in range(args.rounds):
            order = args.cases[r % len(args.cases):] + args.cases[:r % len(args.cases)]
            for case in order:
                python = args.tf_python if case.startswith("tensorflow") else sys.executable
                out = subprocess.run([python, "-m", "benchmarks.threads", "--child", case,
                                      "--steps", str(args.steps)],
                                     capture_output=True, text=True, check=True)
                results[case].append(json.loads(out.stdout.strip().splitlines()[-1]))
                run = results[case][-1]
                print(f"  round {r + 1}: {case}: wall {run['wall']:.2f} s, CPU {run['cpu']:.2f} s"
                      f", loss {run['loss']:.4f}", file=sys.stderr, flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    losses = [run["loss"] for runs in results.values() for run in runs]
    assert max(losses) - min(losses) <= 1e-3 * max(abs(v) for v in losses), losses
    cores = len(os.sched_getaffinity(0))
    print(f"{args.steps} steps of {'-'.join(map(str, SIZES))}, batch {BATCH}; {cores} cores, "
          f"{args.busy} busy process(es), load average {load:.1f} before they started; median of "
          f"{args.rounds} rounds; loss {losses[0]:.4f}")
    print(f"| case | BLAS / intra-op threads | wall s | CPU s | ms per step |")
    print("|---|---|---:|---:|---:|")
    for case, runs in results.items():
        wall = statistics.median(run["wall"] for run in runs)
        cpu = statistics.median(run["cpu"] for run in runs)
        print(f"| {case} | {runs[0]['threads']} | {wall:.2f} | {cpu:.2f} | "
              f"{1000 * wall / args.steps:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
