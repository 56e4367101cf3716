"""tg.keras figure: `Model.fit`'s time per step against a hand-written GradientTape loop of the
same model, optimizer and batches.

    python -m benchmarks.keras_fit     (one thread, pinned; prints the ratio; --json FILE)

The data are 1797 synthetic 8x8 "digits" (the size of scikit-learn's digits set, which is not
available here): ten noisy class templates. The model is 64-64-10 (ReLU), Adam(0.01), batch 32,
5 epochs. `fit` runs with its progress display (verbose=1 to a pipe: one line per epoch) and
through tg.function, as it does by default; the hand loop is the custom-training-loop pattern
run eagerly, and through tg.function. Each is timed in 7 interleaved rounds; the ratios are
medians of the per-round ratios. Target: fit <= 1.1x the hand loop's time per step.
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


def data():
    rng = np.random.default_rng(0)
    templates = rng.uniform(0, 16, size=(10, 64)).astype(np.float32)
    y = rng.integers(0, 10, 1797)
    x = np.clip(templates[y] + rng.normal(0, 4, size=(1797, 64)), 0, 16).astype(np.float32)
    return x / 16.0, y


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
    t = time.perf_counter()
    with redirect_stdout(out):
        h = m.fit(x, y, epochs=EPOCHS, batch_size=BATCH, shuffle=False)
    return time.perf_counter() - t, h.history["accuracy"][-1], out.getvalue()


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
    t = time.perf_counter()
    for _ in range(EPOCHS):
        acc.reset_state()
        loss_mean.reset_state()
        for s in range(0, len(x), BATCH):
            step(tg.constant(x[s:s + BATCH]), tg.constant(y[s:s + BATCH]))
    return time.perf_counter() - t, float(acc.result())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    x, y = data()
    steps = EPOCHS * -(-len(x) // BATCH)
    fits, hands, hand_fns = [], [], []
    for _ in range(ROUNDS):  # interleaved rounds; ratios within a round, then medians
        fit_s, fit_acc, shown = time_fit(x, y)
        hand_s, hand_acc = time_hand(x, y, compiled=False)
        hand_fn_s, _ = time_hand(x, y, compiled=True)
        fits.append(fit_s), hands.append(hand_s), hand_fns.append(hand_fn_s)
    med = statistics.median
    result = {"steps": steps, "rounds": ROUNDS,
              "fit_ms_per_step": 1e3 * med(fits) / steps,
              "hand_ms_per_step": 1e3 * med(hands) / steps,
              "hand_function_ms_per_step": 1e3 * med(hand_fns) / steps,
              "fit_over_hand": med(f / h for f, h in zip(fits, hands)),
              "fit_over_hand_function": med(f / h for f, h in zip(fits, hand_fns)),
              "fit_accuracy": fit_acc, "hand_accuracy": hand_acc}
    print(shown.splitlines()[-1])
    for k, v in result.items():
        print(f"{k:>28}: {v:.4g}" if isinstance(v, float) else f"{k:>28}: {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
