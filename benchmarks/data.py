"""tg.data figure: an epoch of a prefetched input pipeline against the same training steps on
batches already in memory.

    python -m benchmarks.data      (one thread, pinned; prints the ratio; --json FILE)

The step is a gradient step of a 784-512-10 ReLU MLP (batch 128, SGD). The pipeline batches
from_tensor_slices and maps each batch through a function that sleeps as long as a step
computes (the compute-only epoch's median over its steps) (an input stage as slow as the model: reading, decoding), then
`prefetch(2)`: a background thread runs the input stage while the step computes, so the epoch
should take about the compute-only time (target <= 1.2x). The same pipeline without prefetch
is listed for reference (about 2x: the stages alternate). Each case also reports its process
CPU time over wall time (the input stage sleeps: it costs wall time, not CPU) and CPU time
against compute-only's (what the pipeline's own work costs). On a loaded machine the wall
ratio is noisy (the pinned core is shared); the CPU ratio is not.
"""
from benchmarks.timing import pin_one_thread

pin_one_thread()

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import tapegpu as tg  # noqa: E402

BATCH, STEPS = 128, 40


def make_step():
    tg.random.set_seed(0)
    model = tg.layers.Sequential([tg.layers.Dense(512, activation="relu"), tg.layers.Dense(10)])
    opt = tg.optimizers.SGD(learning_rate=0.01)

    def step(x, y):
        with tg.GradientTape() as tape:
            loss = tg.reduce_mean(tg.losses.sparse_categorical_crossentropy(
                y, model(x), from_logits=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


def cases(step, delay):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH * STEPS, 784)).astype(np.float32)
    y = rng.integers(0, 10, BATCH * STEPS).astype(np.int32)
    in_memory = [(tg.constant(x[i:i + BATCH]), tg.constant(y[i:i + BATCH]))
                 for i in range(0, len(x), BATCH)]

    def slow_input(xb, yb):
        time.sleep(delay)
        return xb, yb

    source = tg.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).map(slow_input)
    prefetched = source.prefetch(2)

    def compute_only():
        for xb, yb in in_memory:
            step(xb, yb)

    def epoch(ds, train=True):
        def run():
            n = 0
            for xb, yb in ds:
                if train:
                    step(xb, yb)
                n += 1
            assert n == STEPS
        return run

    return {"compute only (batches in memory)": compute_only,
            "pipeline + prefetch(2)": epoch(prefetched),
            "pipeline, no prefetch": epoch(source),
            "input only (pipeline, no steps)": epoch(source, train=False)}


def step_time(step, repeats=5):
    """The step's time: the median compute-only epoch over the steps per epoch."""
    compute_only = cases(step, 0.0)["compute only (batches in memory)"]
    compute_only()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        compute_only()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / STEPS


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--repeats", type=int, default=7, help="timed epochs per case")
    args = p.parse_args(argv)
    step = make_step()
    delay = step_time(step)
    fns = cases(step, delay)
    base = "compute only (batches in memory)"
    walls = {n: [] for n in fns}
    cpus = {n: [] for n in fns}
    for fn in fns.values():
        fn()  # warm-up
    for r in range(args.repeats):
        names = list(fns)
        names = names[r % len(names):] + names[:r % len(names)]  # rotate the order
        for n in names:
            w0, c0 = time.perf_counter(), time.process_time()
            fns[n]()
            walls[n].append(time.perf_counter() - w0)
            cpus[n].append(time.process_time() - c0)
    results = {"step_ms": delay * 1e3, "steps_per_epoch": STEPS, "cases": {}}
    print(f"tapegpu {tg.__version__}, numpy {np.__version__}; one thread; device "
          f"{tg.zeros(1).device.rsplit('/', 1)[-1]}")
    print(f"step {delay * 1e3:.2f} ms (median), input stage sleeps the same; "
          f"{STEPS} steps per epoch, {args.repeats} epochs per case")
    print(f"  {'case':<34} {'wall ms':>9} {'CPU ms':>9} {'CPU/wall':>9} {'wall ratio':>11} "
          f"{'CPU ratio':>10}")
    for n in fns:
        ratios = [a / b for a, b in zip(walls[n], walls[base])]
        cpu_ratios = [a / b for a, b in zip(cpus[n], cpus[base])]
        wall, cpu = statistics.median(walls[n]), statistics.median(cpus[n])
        results["cases"][n] = {"wall_s": wall, "cpu_s": cpu, "ratio": statistics.median(ratios),
                               "cpu_ratio": statistics.median(cpu_ratios)}
        print(f"  {n:<34} {wall * 1e3:>9.1f} {cpu * 1e3:>9.1f} {cpu / wall:>9.2f} "
              f"{statistics.median(ratios):>11.3f} {statistics.median(cpu_ratios):>10.3f}")
    ratio = results["cases"]["pipeline + prefetch(2)"]["ratio"]
    bound = [max(c, i) for c, i in zip(walls[base], walls["input only (pipeline, no steps)"])]
    overlap = statistics.median(p / b for p, b in zip(walls["pipeline + prefetch(2)"], bound))
    results["overlap"] = overlap
    print(f"prefetched epoch / compute-only epoch: {ratio:.3f}x (target <= 1.2x)")
    print(f"prefetched epoch / max(compute-only, input-only) epoch: {overlap:.3f}x (1.0: the "
          "input stage is hidden entirely)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
