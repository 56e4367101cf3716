"""`python -m tapegpu demo`: a tour of tapegpu on a small real problem.

1. the devices tapegpu sees and where tensors live;
2. an MLP classifier of the 8x8 digits (scikit-learn's copy when it is installed, otherwise a
   generated 10-class problem of the same shape) trained with Adam, with a progress bar;
3. a curve fitted by Levenberg–Marquardt;
4. a Jacobian (per-example input gradients) and a Hessian-vector product by nested tapes.

`--small` runs a short version (for CI). `main` returns the exit status; `run` returns the
numbers it printed.
"""
import argparse
import sys
import time

import numpy as np

import tapegpu as tg
from .info import cpu_kernels_status, recorder_status


def load_digits(seed=0):
    """(x_train, y_train, x_test, y_test, source): 8x8 images scaled to [0, 1], labels 0-9."""
    try:
        from sklearn.datasets import load_digits as sk_load
    except ImportError:
        x, y = _generated_digits(seed)
        source = "generated 8x8 digits (scikit-learn not installed)"
    else:
        data = sk_load()
        x, y = data.data / 16.0, data.target
        source = "scikit-learn 8x8 digits"
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    x, y = x[order].astype(np.float32), y[order].astype(np.int32)
    n_test = len(y) // 5
    return x[n_test:], y[n_test:], x[:n_test], y[:n_test], source


def _generated_digits(seed, n=1797):
    """Ten random 8x8 stroke prototypes, each sample shifted by a pixel and noised."""
    rng = np.random.default_rng(seed)
    protos = np.zeros((10, 8, 8))
    for k in range(10):
        for _ in range(3):  # three strokes per class
            r, c = rng.integers(1, 7, size=2)
            dr, dc = rng.integers(-1, 2, size=2)
            for s in range(-3, 4):
                protos[k, np.clip(r + s * dr, 0, 7), np.clip(c + s * dc, 0, 7)] = 1.0
    y = rng.integers(0, 10, size=n)
    imgs = protos[y]
    shifts = rng.integers(-1, 2, size=(n, 2))
    imgs = np.stack([np.roll(im, tuple(s), axis=(0, 1)) for im, s in zip(imgs, shifts)])
    x = np.clip(imgs * rng.uniform(0.6, 1.0, size=(n, 1, 1)) +
                rng.normal(0.0, 0.25, size=imgs.shape), 0.0, 1.0)
    return x.reshape(n, 64), y


def progress(epoch, epochs, step, steps, loss, width=30, stream=sys.stdout):
    """A one-line text progress bar, redrawn in place with a carriage return."""
    done = int(width * step / steps)
    bar = "=" * done + (">" if done < width else "") + " " * max(0, width - done - 1)
    stream.write(f"\r  epoch {epoch}/{epochs} [{bar}] {step}/{steps} mean loss {loss:.4f}")
    if step == steps:
        stream.write("\n")
    stream.flush()


def _interactive(stream):
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def make_model(seed=0, dtype=None):
    """The classifier: Dense(64, GELU), Dropout(0.1), Dense(10) logits (smooth: the
    Hessian-vector product is checked against central differences)."""
    return tg.layers.Sequential([
        tg.layers.Dense(64, activation="gelu", dtype=dtype),
        tg.layers.Dropout(0.1, seed=seed),
        tg.layers.Dense(10, dtype=dtype),
    ])


def train_classifier(epochs, batch_size=64, seed=0, out=sys.stdout):
    """Trains the classifier with Adam; the loss shown per epoch is the epoch's mean (over
    examples) of the batch losses. Returns (model, accuracy, seconds, (x_test, y_test),
    epoch_losses)."""
    x_train, y_train, x_test, y_test, source = load_digits(seed)
    print(f"data: {source}: {len(y_train)} training and {len(y_test)} test images", file=out)
    tg.random.set_seed(seed)
    model = make_model(seed)
    loss_fn = tg.losses.SparseCategoricalCrossentropy(from_logits=True)
    schedule = tg.optimizers.schedules.ExponentialDecay(0.01, decay_steps=100, decay_rate=0.8)
    opt = tg.optimizers.Adam(learning_rate=schedule)
    rng = np.random.default_rng(seed)
    steps = int(np.ceil(len(y_train) / batch_size))
    start = time.perf_counter()
    epoch_losses = []
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(y_train))
        total, seen = 0.0, 0
        for step in range(1, steps + 1):
            idx = order[(step - 1) * batch_size:step * batch_size]
            xb, yb = tg.constant(x_train[idx]), tg.constant(y_train[idx])
            with tg.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            total += float(loss) * len(idx)  # the batch mean, weighted by the batch's size
            seen += len(idx)
            if step == steps or _interactive(out):
                progress(epoch, epochs, step, steps, total / seen, stream=out)
        epoch_losses.append(total / seen)
    seconds = time.perf_counter() - start
    logits = model(tg.constant(x_test))
    accuracy = float(np.mean(np.argmax(logits.numpy(), axis=1) == y_test))
    print(f"test accuracy {accuracy:.3f} after {epochs} epochs ({int(opt.iterations)} Adam "
          f"steps, {seconds:.2f} s)", file=out)
    return model, accuracy, seconds, (x_test, y_test), epoch_losses


def fit_curve(out=sys.stdout):
    """y = a exp(-b x) cos(c x) + d on noisy samples, by Levenberg–Marquardt."""
    rng = np.random.default_rng(1)
    x = np.linspace(0.0, 4.0, 80)
    true = (2.0, 0.7, 3.0, 0.5)
    y = true[0] * np.exp(-true[1] * x) * np.cos(true[2] * x) + true[3] + \
        rng.normal(0.0, 0.02, x.shape)
    a, b, c, d = (tg.Variable(v, dtype=tg.float64, name=n)
                  for v, n in zip((1.0, 0.5, 2.6, 0.0), "abcd"))
    xt, yt = tg.constant(x), tg.constant(y)
    start = time.perf_counter()
    result = tg.optimizers.LevenbergMarquardt().minimize(
        lambda: a * tg.exp(-b * xt) * tg.cos(c * xt) + d - yt, [a, b, c, d])
    seconds = time.perf_counter() - start
    fitted = [float(v) for v in (a, b, c, d)]
    print(f"Levenberg-Marquardt fit of a exp(-b x) cos(c x) + d to 80 noisy points: "
          f"{result.iterations} iterations, {seconds * 1e3:.1f} ms, converged={result.converged}",
          file=out)
    print("  fitted " + ", ".join(f"{n}={v:.3f}" for n, v in zip("abcd", fitted)) +
          "   (true " + ", ".join(f"{n}={v}" for n, v in zip("abcd", true)) + ")", file=out)
    return fitted, result, seconds


def derivatives(model, x, y, out=sys.stdout):
    """Input Jacobians of the logits and a Hessian-vector product of the loss."""
    xs = tg.constant(x[:8])
    start = time.perf_counter()
    with tg.GradientTape() as tape:
        tape.watch(xs)
        logits = model(xs)
    jac = tape.batch_jacobian(logits, xs)  # (8, 10, 64): d logits_i / d image_i
    t_jac = time.perf_counter() - start
    print(f"batch_jacobian of the logits w.r.t. 8 input images: shape {jac.shape}, "
          f"{t_jac * 1e3:.1f} ms", file=out)

    loss_fn = tg.losses.SparseCategoricalCrossentropy(from_logits=True)
    variables = model.trainable_variables
    rng = np.random.default_rng(2)
    v = [tg.constant(rng.standard_normal(w.shape).astype(np.float32)) for w in variables]
    xb, yb = tg.constant(x[:64]), tg.constant(y[:64])
    start = time.perf_counter()
    with tg.GradientTape() as outer:
        with tg.GradientTape() as inner:
            loss = loss_fn(yb, model(xb))
        grads = inner.gradient(loss, variables)
        gv = tg.add_n([tg.reduce_sum(g * vi) for g, vi in zip(grads, v)])
    hvp = outer.gradient(gv, variables)  # H v = d/dw (grad(w) . v)
    t_hvp = time.perf_counter() - start
    num = np.concatenate([h.numpy().ravel() for h in hvp]).astype(np.float64)
    ref = hvp_by_differences(model, x[:64], y[:64], [vi.numpy() for vi in v])
    rel = float(np.linalg.norm(num - ref) / max(np.linalg.norm(ref), 1e-30))
    n_params = sum(int(np.prod(w.shape)) for w in variables)
    print(f"Hessian-vector product by nested tapes over {n_params:,} parameters: "
          f"{t_hvp * 1e3:.1f} ms", file=out)
    tolerance = hvp_tolerance(hvp[0].device)
    print(f"  check against central differences of the float64 gradient: "
          f"{hvp_verdict(rel, tolerance)}", file=out)
    return jac, rel, tolerance


HVP_TOLERANCE = 1e-4  # float32 nested tapes against float64 central differences (step 1e-4)
# the same where float32 products round their inputs to TensorFloat-32 (10 bits of mantissa,
# a relative rounding of 2^-11; a GPU's default, as TensorFlow's): about 1e-3 measured on an H200
HVP_TOLERANCE_TF32 = 1e-2


def hvp_tolerance(device):
    """The check's tolerance for a Hessian-vector product computed on `device` (a device
    string): looser on a GPU while TensorFloat-32 is enabled."""
    tf32 = tg.config.experimental.tensor_float_32_execution_enabled()
    return HVP_TOLERANCE_TF32 if tf32 and ":GPU:" in device.upper() else HVP_TOLERANCE


def hvp_verdict(rel, tolerance=HVP_TOLERANCE):
    """'ok (relative difference 3.1e-07 < 1e-04)' or 'FAILED (... >= ...)'."""
    if rel < tolerance:
        return f"ok (relative difference {rel:.1e} < {tolerance:.0e})"
    return f"FAILED (relative difference {rel:.1e} >= {tolerance:.0e})"


def hvp_by_differences(model, x, y, v, eps=1e-4):
    """H v of the loss by central differences of the gradient along v, on a float64 copy of
    `model` (so that neither the step nor float32 rounding limits the check): a flat array."""
    x64 = tg.constant(np.asarray(x, np.float64))
    copy = make_model(dtype="float64")
    copy(x64[:1])  # builds the variables
    copy.set_weights([w.astype(np.float64) for w in model.get_weights()])
    loss_fn = tg.losses.SparseCategoricalCrossentropy(from_logits=True)
    variables = copy.trainable_variables
    start = [w.numpy() for w in variables]
    grads = []
    for sign in (1.0, -1.0):
        for w, w0, vi in zip(variables, start, v):
            w.assign(w0 + sign * eps * np.asarray(vi, np.float64))
        with tg.GradientTape() as tape:
            loss = loss_fn(tg.constant(y), copy(x64))
        grads.append(np.concatenate([g.numpy().ravel() for g in tape.gradient(loss, variables)]))
    return (grads[0] - grads[1]) / (2 * eps)


def main(argv=None):
    """`python -m tapegpu demo [--small] [--epochs N]`: runs the demo; returns 0, or 1 when the
    Hessian-vector product check failed."""
    result = run(argv)
    return 0 if result["hvp_relative_error"] < result["hvp_tolerance"] else 1


def run(argv=None):
    """Runs the demo; returns a dict of what it measured."""
    parser = argparse.ArgumentParser(prog="python -m tapegpu demo",
                                     description="A short tour of tapegpu.")
    parser.add_argument("--small", action="store_true", help="a short run (CI)")
    parser.add_argument("--epochs", type=int, default=None, help="training epochs")
    args = parser.parse_args(argv)
    epochs = args.epochs or (4 if args.small else 20)
    out = sys.stdout
    devices = tg.config.list_devices()
    probe = tg.ones((2,))
    print(f"tapegpu {tg.__version__} (CPU kernels: {cpu_kernels_status(long=False)}; "
          f"recording: {recorder_status().split(' (')[0]}); "
          "devices: " +
          ", ".join(f"{d.name} ({d.device_type})" for d in devices), file=out)
    print(f"tensors are created on {probe.device}", file=out)
    print("\n[1] MLP classifier", file=out)
    model, accuracy, t_train, (x_test, y_test), losses = train_classifier(epochs, out=out)
    print("\n[2] curve fitting", file=out)
    fitted, lm_result, t_lm = fit_curve(out=out)
    print("\n[3] Jacobian and Hessian-vector product", file=out)
    _, hvp_error, hvp_tol = derivatives(model, x_test, y_test, out=out)
    print(f"\ntimings: training {t_train:.2f} s, curve fit {t_lm * 1e3:.0f} ms", file=out)
    return {"accuracy": accuracy, "epoch_losses": losses, "fitted": fitted, "lm_converged": lm_result.converged,
            "hvp_relative_error": hvp_error, "hvp_tolerance": hvp_tol, "device": probe.device}


if __name__ == "__main__":
    sys.exit(main())
