"""What a tg.distribute strategy costs `Model.fit` on one CPU: its replicas run eagerly.

    python -m benchmarks.strategy_fit     (one thread, pinned; prints the table; --json FILE)

`fit` of an MLP 784-256-10 (ReLU, SGD, global batch 128, 16 steps per epoch on fixed random
data) compiled four ways: without a strategy (fit's default: the step through tg.function),
without a strategy and `run_eagerly=True`, and under `MirroredStrategy` with one and with two
logical CPU devices (each replica's step eager; two replicas compute 64 rows each, in turn, and
their gradients are combined). The cases are timed in interleaved rounds (benchmarks/timing.py);
the figures are each case's median wall and process CPU time per step and the medians of its
per-round ratios to the traced fit (the CPU ratio is the steadier one on a shared machine: a
process waiting for the CPU does not count). All cases compute the same arithmetic per step on one core; what differs is
tg.function's replay and fusion, and the strategy's work around the replicas.
"""
from benchmarks.timing import pin_one_thread

pin_one_thread()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import tapegpu as tg  # noqa: E402

BATCH, STEPS = 128, 16


def make_fit(strategy=None, run_eagerly=False):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH * STEPS, 784)).astype(np.float32)
    y = rng.integers(0, 10, size=BATCH * STEPS).astype(np.int64)
    tg.random.set_seed(0)
    scope = strategy.scope() if strategy is not None else tg.distribute.get_strategy().scope()
    with scope:
        model = tg.keras.Sequential([tg.keras.layers.Dense(256, activation="relu"),
                                     tg.keras.layers.Dense(10)])
        model.compile(optimizer=tg.keras.optimizers.SGD(0.01),
                      loss=tg.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      run_eagerly=run_eagerly)

    def fit():
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    return fit


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the results to this file (atomically)")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args(argv)
    cases = {
        "fit, traced (no strategy)": make_fit(),
        "fit, run_eagerly (no strategy)": make_fit(run_eagerly=True),
        "MirroredStrategy, 1 CPU": make_fit(tg.distribute.MirroredStrategy(["/cpu:0"])),
        "MirroredStrategy, 2 logical CPUs": make_fit(
            tg.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])),
    }
    base = "fit, traced (no strategy)"
    names = list(cases)
    for fn in cases.values():  # warm-up: traces, first-run work
        fn()
        fn()
    wall = {n: [] for n in names}
    cpu = {n: [] for n in names}
    for r in range(args.repeats):  # interleaved rounds, the order rotating
        for n in names[r % len(names):] + names[:r % len(names)]:
            w0, c0 = time.perf_counter(), time.process_time()
            cases[n]()
            wall[n].append((time.perf_counter() - w0) / STEPS)
            cpu[n].append((time.process_time() - c0) / STEPS)
    results = {}
    for n in names:
        results[n] = {
            "wall_ms": statistics.median(wall[n]) * 1e3,
            "cpu_ms": statistics.median(cpu[n]) * 1e3,
            "wall_ratio": statistics.median(a / b for a, b in zip(wall[n], wall[base])),
            "cpu_ratio": statistics.median(a / b for a, b in zip(cpu[n], cpu[base])),
            "rounds": args.repeats}
    results["load_average_1min"] = os.getloadavg()[0]
    print(f"fit per step (MLP 784-256-10, batch {BATCH}, one pinned CPU; medians of "
          f"{args.repeats} interleaved rounds; 1-minute load average "
          f"{results['load_average_1min']:.1f})")
    print(f"  {'case':<34} {'wall ms':>9} {'cpu ms':>9} {'wall ratio':>11} {'cpu ratio':>10}")
    for n in names:
        r = results[n]
        print(f"  {n:<34} {r['wall_ms']:>9.2f} {r['cpu_ms']:>9.2f} {r['wall_ratio']:>11.3f} "
              f"{r['cpu_ratio']:>10.3f}")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, args.json)


if __name__ == "__main__":
    main()
