"""tg.keras figure: `Model.fit`'s time per step against a hand-written GradientTape loop of the
same model, optimizer and batches.

    python -m benchmarks.keras_fit     (one thread, pinned; prints the ratio; --json FILE)

The data are scikit-learn's 1797 8x8 digits when scikit-learn is installed, else 1797 synthetic
8x8 "digits" (ten noisy class templates; `--synthetic` forces them). The model is 64-64-10 (ReLU), Adam(0.01), batch 32,
5 epochs. `fit` runs with its progress display (verbose=1 to a pipe: one line per epoch) and
through tg.function, as it does by default; the hand loop is the custom-training-loop pattern
run eagerly, and through tg.function. Each is timed in 7 interleaved rounds; the ratios are
medians of the per-round ratios, for wall time and for process CPU time (the CPU ratio is the
steadier one on a shared machine). Target: fit <= 1.1x the tg.function hand loop's time per
step.
"""
from benchmarks.timing import pin_one_thread

pin_one_thread()

import argparse  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from contextlib import redirect_stdout  # noqa: E402

import numpy as np  # noqa: E402

import tapegpu as tg  # noqa: E402

keras = tg.keras
EPOCHS, BATCH, ROUNDS = 5, 32, 7


def data(synthetic=False):
    """(x, y, which): the digits scaled to [0, 1], and which digits they are."""
    if not synthetic:
        try:
            from sklearn.datasets import load_digits  # optional: the real digits
        except ImportError:
            pass
        else:
            digits = load_digits()
            return (digits.data / 16.0).astype(np.float32), digits.target, "scikit-learn"
    rng = np.random.default_rng(0)
    templates = rng.uniform(0, 16, size=(10, 64)).astype(np.float32)
    y = rng.integers(0, 10, 1797)
    x = np.clip(templates[y] + rng.normal(0, 4, size=(1797, 64)), 0, 16).astype(np.float32)
    return x / 16.0, y, "synthetic"


def model():
    tg.random.set_seed(0)
    return keras.Sequential([keras.layers.Dense(64, activation="relu", input_shape=(64,)),
                             keras.layers.Dense(10)])


def time_fit(x, y):
    m = model()
    m.compile(optimizer=keras.optimizers.Adam(0.01),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    out = io.StringIO()
    t, c = time.perf_counter(), time.process_time()
    with redirect_stdout(out):
        h = m.fit(x, y, epochs=EPOCHS, batch_size=BATCH, shuffle=False)
    return (time.perf_counter() - t, time.process_time() - c), h.history["accuracy"][-1], \
        out.getvalue()


def time_hand(x, y, compiled):
    m = model()
    opt = keras.optimizers.Adam(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    acc = keras.metrics.SparseCategoricalAccuracy()
    loss_mean = keras.metrics.Mean()

    def step(xb, yb):
        with tg.GradientTape() as tape:
            pred = m(xb, training=True)
            loss = loss_fn(yb, pred)
        grads = tape.gradient(loss, m.trainable_variables)
        opt.apply_gradients(zip(grads, m.trainable_variables))
        loss_mean(loss)
        acc(yb, pred)

    step = tg.function(step) if compiled else step
    t, c = time.perf_counter(), time.process_time()
    for _ in range(EPOCHS):
        acc.reset_state()
        loss_mean.reset_state()
        for s in range(0, len(x), BATCH):
            step(tg.constant(x[s:s + BATCH]), tg.constant(y[s:s + BATCH]))
    return (time.perf_counter() - t, time.process_time() - c), float(acc.result())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--synthetic", action="store_true", help="the synthetic digits")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    x, y, which = data(args.synthetic)
    steps = EPOCHS * -(-len(x) // BATCH)
    fits, hands, hand_fns = [], [], []
    for _ in range(args.rounds):  # interleaved rounds; ratios within a round, then medians
        fit_t, fit_acc, shown = time_fit(x, y)
        hand_t, hand_acc = time_hand(x, y, compiled=False)
        hand_fn_t, _ = time_hand(x, y, compiled=True)
        fits.append(fit_t), hands.append(hand_t), hand_fns.append(hand_fn_t)
    med = statistics.median
    result = {"data": f"{which} digits", "steps": steps, "rounds": args.rounds}
    for i, kind in enumerate(("wall", "cpu")):
        result[f"fit_ms_per_step_{kind}"] = 1e3 * med(f[i] for f in fits) / steps
        result[f"hand_ms_per_step_{kind}"] = 1e3 * med(h[i] for h in hands) / steps
        result[f"hand_function_ms_per_step_{kind}"] = 1e3 * med(h[i] for h in hand_fns) / steps
        result[f"fit_over_hand_{kind}"] = med(f[i] / h[i] for f, h in zip(fits, hands))
        result[f"fit_over_hand_function_{kind}"] = med(f[i] / h[i]
                                                       for f, h in zip(fits, hand_fns))
    result["cpu_over_wall_fit"] = med(f[1] / f[0] for f in fits)
    result.update(fit_accuracy=fit_acc, hand_accuracy=hand_acc)
    print(shown.splitlines()[-1])
    for k, v in result.items():
        print(f"{k:>34}: {v:.4g}" if isinstance(v, float) else f"{k:>34}: {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
