"""The in-process checks of `python -m tapegpu selftest` (selftest.py runs each in a process of
its own, with a timeout). Each is `check(dev, emit) -> (status, detail, data)`: `dev` is the
GPU's backend, `emit(record)` appends one result (a kernel case, a training run) to the step's
log as soon as it is known, so that a step killed at its timeout keeps what it did.

* kernels: every hand-written kernel of the table (cuda_kernels/) on the GPU and in the
  emulator on the same inputs, at a small size and at one that wraps the grid (elementwise
  kernels: more elements than BLOCK * MAX_BLOCKS threads) and exceeds one block (row kernels:
  more rows than MAX_BLOCKS blocks, rows longer than a block);
* generated: the kernels tg.function generates (fusion.py) for every fusible op of the op spec
  table, its VJP, column sums in one and two stages, and a training step's groups, each run by
  the GPU and by the emulator on the same inputs;
* capture: steps captured as CUDA graphs (`jit_compile=True`) against the same steps replayed
  uncaptured, call after call;
* training: an MLP by hand (GradientTape, clipping, Adam), and Keras `fit` of a CNN and of an
  LSTM: each loss must fall.
"""
import copy
import time

import numpy as np

import tapegpu as tg
from .. import backends as backend
from ..backends.kernels.launch import KERNELS, KernelSet, parity_cases
from ..function import fusion
from ..ops.registry import REGISTRY

# bit-exact, or within these bounds where a kernel calls CUDA's math functions (they differ
# from glibc's, which the emulator calls, by an ulp or two; a few expressions cancel)
RTOL = {"float32": 1e-4, "float64": 1e-10}
ATOL = {"float32": 1e-6, "float64": 1e-13}
# (rows, columns) of the kernel cases: small; and 1100 rows x 300 columns, 330,000 elements:
# elementwise kernels wrap their 1024 x 256 threads, row kernels their 1024 blocks, and a row
# is longer than a block of 256 threads
KERNEL_SHAPES = ((37, 70), (1100, 300))
GENERATED_ELEMENTS = 300_007  # more than 1024 x 256 threads: the grid-stride loops wrap


def _compare(want, got, dtype):
    """(bit_exact, within_tolerance, max_abs_diff) of host arrays."""
    same = all(np.array_equal(w, h, equal_nan=True) and w.dtype == h.dtype
               for w, h in zip(want, got))
    name = np.dtype(dtype).name
    close = same or all(
        w.shape == h.shape and np.allclose(h, w, rtol=RTOL.get(name, 0), atol=ATOL.get(name, 0),
                                           equal_nan=True)
        for w, h in zip(want, got))
    err = 0.0
    for w, h in zip(want, got):
        if w.shape == h.shape and w.dtype.kind == "f" and w.size:
            d = np.abs(h.astype(np.float64) - w.astype(np.float64))
            d = d[np.isfinite(d)]
            err = max(err, float(d.max(initial=0.0)))
    return same, close, err


def kernels(dev, emit, quick=False):
    """Each parity case on the GPU's kernel set and in the emulator, at each of KERNEL_SHAPES,
    and at the small one on a grid of 2 blocks of 32 threads (every loop wraps). `quick`: the
    small shape on both grids only."""
    emu = KernelSet.emulated()
    tiny_emu = KernelSet.emulated(block=32, max_blocks=2)
    tiny_dev = copy.copy(dev.kernels)  # the GPU's modules, launched on the tiny grid
    tiny_dev.block, tiny_dev.max_blocks = 32, 2
    runs = [(shape, emu, dev.kernels, "") for shape in KERNEL_SHAPES[:1 if quick else None]]
    runs.append((KERNEL_SHAPES[0], tiny_emu, tiny_dev, " grid 2x32"))
    failed, exact, count = [], 0, 0
    for shape, on_emu, on_dev, grid in runs:
        for label, run in parity_cases(shape=shape):
            start = time.perf_counter()
            want = [np.asarray(a) for a in run(on_emu, lambda a: np.array(a, copy=True))]
            got = [dev.to_numpy(a) for a in run(on_dev, dev.asarray)]
            dtype = label.rsplit(" ", 1)[1]
            same, close, err = _compare(want, got, dtype)
            label = f"{label} {shape[0]}x{shape[1]}{grid}"
            emit({"case": label, "bit_exact": same, "ok": close, "max_abs_diff": err,
                  "seconds": round(time.perf_counter() - start, 3)})
            count += 1
            exact += same
            if not close:
                failed.append(label)
    missing = sorted({name for _, name in KERNELS.values()} - set(emu.launches) -
                     set(tiny_emu.launches))
    status = "FAILED" if failed or missing else "passed"
    detail = f"{count} cases, {exact} bit-exact, {len(failed)} beyond tolerance" + \
        (f": {', '.join(failed[:5])}" if failed else "") + \
        (f"; kernels never launched: {', '.join(missing)}" if missing else "")
    return status, detail, {"failed": failed, "not_launched": missing, "cases": count}


# -- generated kernels -------------------------------------------------------------------------
def _fusible_unary_specs():
    from ..testing.op_specs import SPECS  # the op spec table: sample inputs per op
    out = []
    for spec in SPECS:
        ops = spec.covers or (spec.name,)
        if len(ops) == 1 and ops[0] in REGISTRY and REGISTRY[ops[0]].c is not None and \
                len(spec.shapes) == 1 and REGISTRY[ops[0]].elementwise:
            out.append(spec)
    return out


def _op_function(fn, grad):
    """An op's spec function and (with `grad`) its VJP, as a function of one tensor (tg.function
    takes every argument, defaults too, as part of its trace key)."""
    def forward_and_vjp(x):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        out = y * 1.0 * 1.0
        if not grad:
            return out
        return out, tape.gradient(y, x, output_gradients=tg.ones_like(y) * 0.5) * 1.0
    return forward_and_vjp


def _corpus(quick=False):
    """(label, function, argument arrays) whose traces hold generated kernels: each fusible
    op forward and its VJP, column sums (bias gradients) in one and two stages, a training
    step's groups. `quick`: three ops, smaller sizes."""
    from ..testing.op_specs import sample
    rng = np.random.default_rng(0)
    n = 3001 if quick else GENERATED_ELEMENTS
    for spec in _fusible_unary_specs()[:3 if quick else None]:
        for dtype in (np.float32, np.float64):
            x0 = sample(spec, dtype)[0].ravel()
            x = np.resize(x0, n).astype(dtype)
            yield f"{spec.name} {np.dtype(dtype).name}", _op_function(spec.fn, spec.grad), (x,)
    sizes = ((16, 64), (300, 7)) if quick else ((16, 64), (3000, 64), (1100, 300), (20000, 7))
    for rows, cols in sizes:
        for dtype in (np.float32, np.float64):
            x = rng.standard_normal((rows, cols)).astype(dtype)
            b = rng.standard_normal(cols).astype(dtype)

            def bias_grad(x, b):
                g = tg.where(x + b > 0.0, x * 2.0, tg.zeros_like(x))  # a ReLU's backward
                return g, tg.reduce_sum(g, axis=0), tg.reduce_sum(g * g - 1.0, axis=0)
            yield f"column sums {rows}x{cols} {np.dtype(dtype).name}", bias_grad, (x, b)
    x = rng.standard_normal((1100, 96)).astype(np.float32)
    y = rng.integers(0, 10, 1100).astype(np.int32)
    w1 = (rng.standard_normal((96, 64)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((64, 10)) * 0.1).astype(np.float32)

    def mlp_grads(x, y, w1, w2):
        with tg.GradientTape() as tape:
            tape.watch([w1, w2])
            h = tg.nn.gelu(tg.matmul(x, w1) + 0.5)
            logits = tg.matmul(tg.nn.relu(h) * 1.5, w2)
            loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        return tape.gradient(loss, [w1, w2])
    yield "mlp gradients 1100x96", mlp_grads, (x, y, w1, w2)


def _inputs(kernel, rng):
    """Host arrays for the kernel's leaves: floats, bools and small integers."""
    out = []
    for v in kernel.leaves:
        _, shape, dtype, _ = kernel.graph.meta[v]
        dt = np.dtype(dtype)
        if dt.kind == "b":
            out.append(rng.random(shape) > 0.5)
        elif dt.kind in "iu":
            out.append(rng.integers(0, 10, shape).astype(dt))
        else:
            out.append(rng.uniform(-3.0, 3.0, shape).astype(dt))
    return out


def generated(dev, emit, quick=False):
    """Every kernel the corpus's traces generate on the GPU, run by the GPU and by the
    emulator (the same CUDA C source) on the same inputs."""
    rng = np.random.default_rng(1)
    seen, failed, exact, count, untraced = set(), [], 0, 0, []
    for label, fn, args in _corpus(quick):
        try:
            with tg.device(dev.short):
                tensors = [tg.constant(a) for a in args]
                f = tg.function(fn)
                f(*tensors)
                kernels = getattr(f.get_concrete_function(*tensors)._plan.graph, "fused", [])
        except Exception as e:  # an op the GPU cannot trace: said, the others go on
            untraced.append(f"{label}: {type(e).__name__}: {e}"[:300])
            emit({"case": label, "ok": False, "error": untraced[-1]})
            continue
        for k in kernels:
            source = k.cuda_source()
            if source in seen:
                continue
            seen.add(source)
            start = time.perf_counter()
            host = _inputs(k, rng)
            on_emu = copy.copy(k)
            on_emu.dev = backend.CUDA_EMU
            want = [np.asarray(a) for a in fusion._device_runner(on_emu)(*host)]
            got = [dev.to_numpy(a) for a in
                   fusion._device_runner(k)(*[dev.asarray(a) for a in host])]
            same, close, err = _compare(want, got, k.dtype)
            count += 1
            exact += same
            case = f"{label}: {k.name} [{', '.join(k.ops)}] n={k.n}" + \
                (f" cols={k.cols} parts={k.parts}" if k.sums else "")
            emit({"case": case, "exact_expressions": k.exact, "bit_exact": same, "ok": close,
                  "max_abs_diff": err, "launches": k.launches(),
                  "seconds": round(time.perf_counter() - start, 3)})
            # exact expressions (arithmetic, comparisons, selects, fabs, sqrt) with --fmad=false
            # give the emulator's bits; library functions may differ by an ulp or two
            if not close or (k.exact and not same):
                failed.append(case)
    status = "FAILED" if failed or untraced or not count else "passed"
    detail = f"{count} generated kernels, {exact} bit-exact, {len(failed)} failed" + \
        (f": {'; '.join(failed[:3])}" if failed else "") + \
        (f"; {len(untraced)} functions not traced: {untraced[0]}" if untraced else "")
    return status, detail, {"failed": failed, "untraced": untraced, "kernels": count}


# -- capture -----------------------------------------------------------------------------------
def _capture_cases(rng):
    x = rng.standard_normal((512, 128)).astype(np.float32)
    y = rng.integers(0, 10, 512).astype(np.int32)

    def chain(x):
        g = tg.where(x > 0.0, tg.tanh(x) * 2.0, tg.zeros_like(x))
        return g, tg.reduce_sum(g, axis=0)
    yield "fused chain and column sums", lambda: chain, lambda: (x + rng.standard_normal(
        x.shape).astype(np.float32),)

    def make_step():
        from ..testing.launches import sgd_momentum_as_ops
        r = np.random.default_rng(3)
        w1 = tg.Variable((r.standard_normal((128, 64)) * 0.1).astype(np.float32))
        b1 = tg.Variable(np.zeros(64, np.float32))
        w2 = tg.Variable((r.standard_normal((64, 10)) * 0.1).astype(np.float32))
        variables = [w1, b1, w2]
        velocities = [tg.Variable(tg.zeros_like(v)) for v in variables]

        def step(x, y):
            with tg.GradientTape() as tape:
                h = tg.nn.relu(tg.matmul(x, w1) + b1)
                loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(
                    y, tg.matmul(h, w2)))
            sgd_momentum_as_ops(tape.gradient(loss, variables), variables, velocities)
            return loss, w1 * 1.0
        return step
    yield "MLP step, SGD momentum as assigns", make_step, lambda: (x, y)

    def make_adam_step():  # apply_gradients: the schedule, bias correction and step count on
        r = np.random.default_rng(4)  # the device, inside the graph
        w1 = tg.Variable((r.standard_normal((128, 64)) * 0.1).astype(np.float32))
        b1 = tg.Variable(np.zeros(64, np.float32))
        w2 = tg.Variable((r.standard_normal((64, 10)) * 0.1).astype(np.float32))
        variables = [w1, b1, w2]
        opt = tg.optimizers.Adam(tg.optimizers.schedules.ExponentialDecay(0.01, 2, 0.5))

        def step(x, y):
            with tg.GradientTape() as tape:
                h = tg.nn.relu(tg.matmul(x, w1) + b1)
                loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(
                    y, tg.matmul(h, w2)))
            opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss, w1 * 1.0, b1 * 1.0, tg.cast(opt.iterations, tg.float32)
        return step
    yield "MLP step, Adam apply_gradients with ExponentialDecay", make_adam_step, \
        lambda: (x + rng.standard_normal(x.shape).astype(np.float32), y)


def capture(dev, emit, quick=False, calls=4):
    """Each case's function with `jit_compile=True` (captured as one CUDA graph at its second
    call) against the same function with `jit_compile=None` (the fused replay), from the same
    state, call after call: the same results."""
    rng = np.random.default_rng(2)
    failed, refused, count = [], [], 0
    for label, make, inputs in _capture_cases(rng):
        count += 1
        batches = [inputs() for _ in range(calls)]
        results = {}
        info = None
        for jit in (True, None):
            with tg.device(dev.short):
                tg.random.set_seed(0)
                f = tg.function(make(), jit_compile=jit)
                outs = []
                for batch in batches:
                    args = [tg.constant(a) for a in batch]
                    outs.append([dev.to_numpy(t._data) for t in tg.nest.flatten(f(*args))])
                if jit:
                    info = f.get_concrete_function(*args).capture_info
            results[jit] = outs
        same = all(np.array_equal(a, b, equal_nan=True)
                   for u, v in zip(results[True], results[None]) for a, b in zip(u, v))
        captured = bool(info and info.get("captured"))
        emit({"case": label, "bit_exact": same, "captured": captured, "capture_info": info})
        if not same:
            failed.append(label)
        if not captured:
            refused.append(f"{label}: {info and info.get('reason')}")
    status = "FAILED" if failed or refused else "passed"
    detail = f"{count} steps, {calls} calls each, captured and uncaptured: {len(failed)} " \
        "differ" + (f": {', '.join(failed)}" if failed else "") + \
        (f"; not captured: {'; '.join(refused)}" if refused else "")
    return status, detail, {"failed": failed, "not_captured": refused}


# -- training ----------------------------------------------------------------------------------
def _mlp(dev, steps=30):
    tg.random.set_seed(0)
    rng = np.random.default_rng(0)
    with tg.device(dev.short):
        x = tg.constant(rng.normal(size=(256, 32)).astype(np.float32))
        y = tg.constant((rng.normal(size=256) > 0).astype(np.int64) +
                        2 * (rng.normal(size=256) > 0))
        model = [tg.layers.Dense(64, activation="gelu"), tg.layers.Dropout(0.2),
                 tg.layers.Dense(4)]
        loss_fn = tg.losses.SparseCategoricalCrossentropy(from_logits=True)
        opt = tg.optimizers.Adam(0.01)
        losses, times = [], []
        for _ in range(steps):
            start = time.perf_counter()
            with tg.GradientTape() as tape:
                loss = loss_fn(y, model[2](model[1](model[0](x), training=True)))
            variables = [v for layer in model for v in layer.trainable_variables]
            grads, _ = tg.clip_by_global_norm(tape.gradient(loss, variables), 1.0)
            opt.apply_gradients(zip(grads, variables))
            dev.synchronize()
            times.append(time.perf_counter() - start)
            losses.append(loss)
        values = [float(v) for v in losses]
    return values, 1e3 * float(np.median(times[1:]))


def _fit(dev, kind, epochs=4):
    from .. import keras
    layers = keras.layers
    rng = np.random.default_rng(0)
    tg.random.set_seed(0)
    if kind == "cnn":
        x = rng.normal(size=(512, 16, 16, 1)).astype(np.float32)
        y = (x[:, :8].mean(axis=(1, 2, 3)) > x[:, 8:].mean(axis=(1, 2, 3))).astype(np.int32)
        x[:, :8] += 0.5 * y[:, None, None, None]
        model = keras.Sequential([layers.Conv2D(16, 3, padding="same", activation="relu"),
                                  layers.MaxPooling2D(2), layers.Conv2D(16, 3, activation="relu"),
                                  layers.Flatten(), layers.Dense(2)])
    else:
        x = rng.normal(size=(512, 12, 8)).astype(np.float32)
        y = (x[:, :, 0].sum(axis=1) > 0).astype(np.int32)
        model = keras.Sequential([layers.LSTM(32), layers.Dense(2)])
    with tg.device(dev.short):
        model.compile(optimizer=keras.optimizers.Adam(0.01), metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        start = time.perf_counter()
        history = model.fit(x, y, batch_size=64, epochs=epochs, verbose=0)
        dev.synchronize()
        seconds = time.perf_counter() - start
    losses = [float(v) for v in history.history["loss"]]
    return losses, seconds


def training(dev, emit, quick=False):
    """An MLP by hand and Keras fits of a CNN and an LSTM on the GPU: each loss must fall.
    `quick`: fewer steps and epochs."""
    failed, parts = [], []
    epochs = 2 if quick else 4
    runs = (("mlp", lambda: _mlp(dev, 10 if quick else 30)),
            ("keras cnn", lambda: _fit(dev, "cnn", epochs)),
            ("keras lstm", lambda: _fit(dev, "lstm", epochs)))
    for label, run in runs:
        try:
            losses, t = run()
        except Exception as e:  # one model's failure is its result; the others still run
            emit({"case": label, "ok": False, "error": f"{type(e).__name__}: {e}"[:500]})
            failed.append(label)
            parts.append(f"{label} {type(e).__name__}")
            continue
        ok = bool(np.all(np.isfinite(losses))) and losses[-1] < losses[0]
        timing = {"mlp": "median_step_ms"}.get(label, "fit_seconds")
        emit({"case": label, "ok": ok, "losses": losses, timing: t})
        parts.append(f"{label} {losses[0]:.3f}->{losses[-1]:.3f}")
        if not ok:
            failed.append(label)
    return ("FAILED" if failed else "passed"), "; ".join(parts), {"failed": failed}


CHECKS = {"kernels": kernels, "generated": generated, "capture": capture, "training": training}
