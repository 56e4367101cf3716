"""A GPU cost model that runs without a GPU: kernel launches (and bytes moved) per step.

    python -m benchmarks.gpu_cost [--only W1,W2] [--json FILE] [--markdown]

Runs tapegpu's side of each workload (workloads.py) once on the `cuda_emu` device, where every
custom kernel runs from the same `.cu` source as on a GPU through the CPU emulator, and reads
the backend's launch counter (`launches`: kernel launches per kernel name) around one step
after a warm-up. Each workload is counted twice: with the sweep's array mode and fused VJPs
(the default; `tapegpu.core.options.options.array_sweep`) and with the tensor-mode rules only, so the effect
of fusion is visible; then under `tg.function` unfused ("traced"), fused ("traced, fused") and
captured as one CUDA graph ("captured", `jit_compile=True`: 1 launch per step where the step
can be captured, else the fused replay's count; tapegpu/function/capture.py says which steps
are refused). Where `tg.profiler` reports bytes moved, they are shown too.

On a GPU each launch costs a few microseconds of latency whatever its size, so launches per step
bound the step time of the small workloads (W1, W4-W6) from below; bytes moved over memory
bandwidth bound the large ones (W2, W3). Both become a roofline estimate on an H100 (the
figures stated in gpu_model.py): eager launches one by one, and the same kernels replayed from
one captured graph. For the MLP training step (W2) the data-parallel step on 1-8 GPUs of a node
and on 4 nodes of 8 is estimated from the same counts (ring allreduce of its float32 gradients,
bucketed as tg.distribute does). If this tapegpu has no `cuda_emu` device, the script says so
and exits 0.

    python -m benchmarks.gpu_cost --models [mlp,cnn,transformer,lstm] [--markdown] [--json F]

counts issue 30's models instead, as Keras training steps (GradientTape, SGD): the MLP
784-1024-1024-10 at batch 256, benchmarks/conv.py's CNN at batch 64, a Transformer encoder
block under 'mixed_bfloat16' and an LSTM(256) step; launches eager, traced and fused, and
captured, the profiler's bytes and FLOPs (its FLOPs leave out the convolutions, which declare
none), and a roofline on an H200 (4.8 TB/s; 67 TFLOP/s float32, 495 TF32, 990 bfloat16) per
precision: eager, replayed from one graph, and the work alone.
"""
import argparse
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import gpu_model  # noqa: E402

MLP_WIDTHS = (784, 1024, 1024, 10)  # W2's layers (workloads.py): its gradients are reduced


def emu_device():
    """The `cuda_emu` backend, or None (with the reason) when it is missing."""
    import tapegpu as tg
    try:
        with tg.device("cuda_emu"):
            dev = tg.constant(0.0)._dev
    except Exception as e:  # ValueError (unknown device) or a build error of the emulator
        return None, f"{type(e).__name__}: {e}"
    if not hasattr(dev, "launches"):
        return None, f"backend {dev!r} has no launch counter"
    return dev, None


def _profiler_bytes(tg, fn):
    """{"bytes", "flops"} of `fn()` by `tg.profiler` (forward + backward), or None without it."""
    prof = getattr(tg, "profiler", None)
    if prof is None or not callable(prof):
        return None
    try:
        with prof() as p:
            fn()
        d = p.as_dict()
    except Exception:  # a profiler without this interface: no byte counts
        return None
    total = {"bytes": 0, "flops": 0}
    for sweep_name in ("forward", "backward"):
        for stats in (d.get(sweep_name) or {}).values():
            for k in total:
                total[k] += int(stats.get(k, 0))
    return total


def count(dev, fn, warmup=1):
    """Kernel launches per kernel name of one call of `fn` (after `warmup` calls: a captured
    tg.function traces at its first call and captures at its second)."""
    for _ in range(warmup):
        fn()
    dev.synchronize()
    before = collections.Counter(dev.launches)
    fn()
    dev.synchronize()
    after = collections.Counter(dev.launches)
    after.subtract(before)
    return {k: v for k, v in after.items() if v}


def roofline(entry):
    """{"unfused", "eager", "traced, fused", "graph"}: estimated H100 µs per step of one
    counted workload (bytes and FLOPs are the eager step's in every column: fusion's savings
    in bytes are not counted, so the fused column is an upper bound)."""
    f, u = entry.get("fused", {}), entry.get("unfused", {})
    b = f.get("bytes")
    if b is None or "launches" not in f:
        return None
    out = {"eager": gpu_model.roofline_s(b["bytes"], b["flops"], f["launches"]) * 1e6}
    if "launches" in u:
        out["unfused"] = gpu_model.roofline_s(b["bytes"], b["flops"], u["launches"]) * 1e6
    tf_ = entry.get("traced, fused", {})
    best = tf_.get("launches", f["launches"])
    if "launches" in tf_:
        out["traced, fused"] = gpu_model.roofline_s(b["bytes"], b["flops"], best) * 1e6
    out["graph"] = gpu_model.roofline_s(b["bytes"], b["flops"], best, graph=True) * 1e6
    return out


def markdown(report):
    """The counts and roofline estimates as a markdown table."""
    lines = ["| workload | launches unfused | eager | traced | traced, fused | captured "
             "| MiB moved | MFLOP | H100 µs unfused | eager | traced, fused | one graph |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, e in report.items():
        b = e.get("fused", {}).get("bytes") or {}
        r = e.get("roofline_us") or {}
        cells = [name, *(e.get(m, {}).get("launches", "error")
                         for m in ("unfused", "fused", "traced", "traced, fused",
                                   "captured")),
                 f"{b['bytes'] / 2**20:.1f}" if b else "", f"{b['flops'] / 1e6:.1f}" if b else "",
                 *(f"{r[k]:.1f}" if k in r else "" for k in ("unfused", "eager", "traced, fused",
                                                             "graph"))]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def scaling(entry, grad_bytes):
    """Rows of gpu_model.scaling_table for a counted training step (eager, one graph)."""
    r = roofline(entry)
    if r is None:
        return None
    rows = {}
    for mode in ("eager", "graph"):
        step = r[mode] * 1e-6
        # the backward sweep is about two thirds of a training step's work (two matmuls per
        # forward matmul), the part of the step behind which buckets can be reduced
        rows[mode] = [{"config": label, "gpus": n, **{k: v for k, v in res.items()}}
                      for label, n, res in gpu_model.scaling_table(step, step * 2 / 3,
                                                                   grad_bytes)]
    return rows


# -- issue 30's models: training steps against the H200's peaks by precision ------------------
# An H200 SXM (datasheet figures): 4.8 TB/s of HBM3e; dense 67 TFLOP/s float32 on CUDA cores,
# 495 TFLOP/s TF32 and 990 TFLOP/s bfloat16/float16 on tensor cores. Launch costs as gpu_model's.
H200 = gpu_model.Machine(name="H200 SXM", hbm_bytes_per_s=4.8e12, fp32_flops_per_s=67e12)
PEAKS = {"float32": 67e12, "tf32": 495e12, "bfloat16": 990e12}


def _mlp_step(tg, batch=256):
    """MLP 784-1024-1024-10 ReLU, batch 256, softmax cross-entropy, SGD (W2's model as Keras
    layers)."""
    model = tg.keras.Sequential([tg.keras.layers.Dense(1024, activation="relu"),
                                 tg.keras.layers.Dense(1024, activation="relu"),
                                 tg.keras.layers.Dense(10)])
    return _keras_step(tg, model, (batch, 784), 10)


def _cnn_step(tg, batch=64):
    """benchmarks/conv.py's net: conv 3x3 32 relu, max pool 2, conv 3x3 64 relu, max pool 2,
    dense 10, batch 64 of 28x28x1, VALID."""
    L = tg.keras.layers
    model = tg.keras.Sequential([L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(2),
                                 L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(2),
                                 L.Flatten(), L.Dense(10)])
    return _keras_step(tg, model, (batch, 28, 28, 1), 10)


def _transformer_step(tg, batch=16, length=128, width=256, heads=4, ff=1024):
    """A post-norm Transformer encoder block under 'mixed_bfloat16': multi-head self-attention
    (4 heads of 64), residual + LayerNormalization, a 256-1024-256 ReLU feed-forward, residual +
    LayerNormalization, mean over the sequence, dense 10; batch 16 of 128 tokens."""
    L = tg.keras.layers
    tg.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        inp = tg.keras.Input(shape=(length, width))
        a = L.MultiHeadAttention(num_heads=heads, key_dim=width // heads)(inp, inp)
        h = L.LayerNormalization()(L.Add()([inp, a]))
        f = L.Dense(width)(L.Dense(ff, activation="relu")(h))
        h = L.LayerNormalization()(L.Add()([h, f]))
        out = L.Dense(10, dtype="float32")(L.GlobalAveragePooling1D()(h))
        model = tg.keras.Model(inp, out)
        return _keras_step(tg, model, (batch, length, width), 10)
    finally:
        tg.keras.mixed_precision.set_global_policy(None)


def _lstm_step(tg, batch=64, steps=32, features=128, units=256):
    """LSTM(256) over 32 steps of 128 features, batch 64, then dense 10."""
    L = tg.keras.layers
    model = tg.keras.Sequential([L.LSTM(units), L.Dense(10)])
    return _keras_step(tg, model, (batch, steps, features), 10)


def _keras_step(tg, model, shape, classes):
    """One training step of `model` (GradientTape, sparse softmax cross-entropy, SGD) as a
    function of no arguments, on the current device."""
    import numpy as np
    rng = np.random.default_rng(0)
    x = tg.constant(rng.standard_normal(shape).astype(np.float32))
    y = tg.constant(rng.integers(0, classes, shape[0]).astype(np.int32))
    opt = tg.keras.optimizers.SGD(1e-3)
    loss_fn = tg.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model(x)  # build

    def step():
        with tg.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return step


MODELS = {"MLP 784-1024-1024-10, batch 256, float32": (_mlp_step, ("float32", "tf32")),
          "CNN step (benchmarks/conv.py's net), batch 64, float32": (_cnn_step,
                                                                     ("float32", "tf32")),
          "Transformer encoder block, mixed_bfloat16, batch 16 x 128 tokens": (
              _transformer_step, ("bfloat16",)),
          "LSTM(256) step, 32 steps, batch 64, float32": (_lstm_step, ("float32", "tf32"))}


def model_roofline_us(bytes_moved, flops, launches, precision, graph=False):
    """H200 µs of one step: max(bytes / bandwidth, FLOPs / the precision's peak) plus the
    launches' serial latency (gpu_model's per-launch figures)."""
    m = gpu_model.Machine(name=H200.name, hbm_bytes_per_s=H200.hbm_bytes_per_s,
                          fp32_flops_per_s=PEAKS[precision])
    return gpu_model.roofline_s(bytes_moved, flops, launches, machine=m, graph=graph) * 1e6


def count_models(dev, names=None):
    """{model: {"launches", "traced, fused", "captured", "per_kernel", "bytes", "flops",
    "roofline_us"}} for issue 30's models on the emulator device."""
    import tapegpu as tg
    report = {}
    for name, (make, precisions) in MODELS.items():
        if names and not any(n.lower() in name.lower() for n in names):
            continue
        entry = {}
        try:
            with tg.device("cuda_emu"):
                step = make(tg)
                launches = count(dev, step)
                entry.update(launches=sum(launches.values()), per_kernel=launches)
                moved = _profiler_bytes(tg, step)
                if moved is not None:
                    entry.update(moved)
                for mode, jit in (("traced, fused", None), ("captured", True)):
                    try:
                        traced = tg.function(step, jit_compile=jit)
                        entry[mode] = sum(count(dev, traced, warmup=2 if jit else 1).values())
                    except Exception as e:
                        entry[mode] = f"{type(e).__name__}: {e}"
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"
            report[name] = entry
            print(f"{name}: {entry['error']}", flush=True)
            continue
        if "bytes" in entry:
            best = entry["traced, fused"] if isinstance(entry["traced, fused"], int) \
                else entry["launches"]
            entry["roofline_us"] = {
                p: {"eager": model_roofline_us(entry["bytes"], entry["flops"],
                                               entry["launches"], p),
                    "one graph": model_roofline_us(entry["bytes"], entry["flops"], best, p,
                                                   graph=True),
                    "work only": model_roofline_us(entry["bytes"], entry["flops"], 0, p)}
                for p in precisions}
        report[name] = entry
        line = f"{name}: launches eager {entry['launches']}, traced and fused " \
               f"{entry['traced, fused']}, captured {entry['captured']}"
        if "bytes" in entry:
            line += f"; {entry['bytes'] / 2**20:,.1f} MiB moved, {entry['flops'] / 1e9:,.2f} " \
                    f"GFLOP"
            for p, r in entry["roofline_us"].items():
                line += f"; H200 {p}: {r['eager']:.0f} µs eager, {r['one graph']:.0f} µs one " \
                        f"graph, {r['work only']:.1f} µs work"
        print(line, flush=True)
        top = sorted(entry["per_kernel"].items(), key=lambda kv: -kv[1])[:6]
        print("    " + ", ".join(f"{k} x{v}" for k, v in top), flush=True)
    return report


def models_markdown(report):
    """The models' counts and H200 estimates as a markdown table."""
    lines = ["| model | launches eager | traced, fused | captured | MiB moved | GFLOP | precision "
             "| H200 µs eager | one graph | work only |",
             "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for name, e in report.items():
        for p, r in (e.get("roofline_us") or {"": {}}).items():
            cells = [name, e.get("launches", e.get("error", "")), e.get("traced, fused", ""),
                     e.get("captured", ""),
                     f"{e['bytes'] / 2**20:.1f}" if "bytes" in e else "",
                     f"{e['flops'] / 1e9:.2f}" if "flops" in e else "", p,
                     *(f"{r[k]:.1f}" if k in r else "" for k in ("eager", "one graph",
                                                                "work only"))]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="comma-separated workloads (default: W1-W6)")
    p.add_argument("--json", help="also write the counts here")
    p.add_argument("--markdown", action="store_true", help="also print a markdown table")
    p.add_argument("--models", nargs="?", const="all",
                   help="issue 30's models instead of W1-W6 (MLP, CNN, Transformer, LSTM: "
                        "all, or comma-separated words of their names)")
    args = p.parse_args(argv)
    if args.models:
        dev, why = emu_device()
        if dev is None:
            print(f"gpu_cost: the cuda_emu device is not available in this tapegpu ({why}); "
                  "nothing to count.")
            return 0
        names = None if args.models == "all" else args.models.split(",")
        report = count_models(dev, names)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(report, fh, indent=1)
        if args.markdown:
            print(models_markdown(report))
        return 0
    import tapegpu as tg
    from tapegpu.core.options import options
    from benchmarks import workloads
    dev, why = emu_device()
    if dev is None:
        print(f"gpu_cost: the cuda_emu device is not available in this tapegpu ({why}); "
              "nothing to count.")
        return 0
    keys = args.only.split(",") if args.only else list(workloads.ALL)
    report = {}
    for key in keys:
        with tg.device("cuda_emu"):
            w = workloads.ALL[key]({})
        for (row, fw), fn in w.cases.items():
            if fw != workloads.TAPEGPU:
                continue
            entry = {}
            for mode, fused in (("fused", True), ("unfused", False)):
                try:
                    with options(array_sweep=fused):
                        launches = count(dev, fn)
                        entry[mode] = {"launches": sum(launches.values()),
                                       "per_kernel": launches,
                                       "bytes": _profiler_bytes(tg, fn) if fused else None}
                except Exception as e:
                    entry[mode] = {"error": f"{type(e).__name__}: {e}"}
            for mode, jit in (("traced", False), ("traced, fused", None), ("captured", True)):
                try:
                    with tg.device("cuda_emu"):
                        traced = tg.function(fn, jit_compile=jit)
                        launches = count(dev, traced, warmup=2 if jit else 1)
                    entry[mode] = {"launches": sum(launches.values()), "per_kernel": launches}
                except Exception as e:
                    entry[mode] = {"error": f"{type(e).__name__}: {e}"}
            report[f"{key}: {row}"] = entry
            f, u = entry["fused"], entry["unfused"]
            t, tf_ = entry["traced"], entry["traced, fused"]
            line = f"{key}: {row}: launches fused {f.get('launches', f.get('error'))}, " \
                   f"unfused {u.get('launches', u.get('error'))}, traced " \
                   f"{t.get('launches', t.get('error'))}, traced and fused " \
                   f"{tf_.get('launches', tf_.get('error'))}, captured " \
                   f"{entry['captured'].get('launches', entry['captured'].get('error'))}"
            if f.get("bytes") is not None:
                line += f"; bytes moved {f['bytes']['bytes'] / 2**20:,.2f} MiB, " \
                        f"{f['bytes']['flops'] / 1e6:,.1f} MFLOP"
            print(line, flush=True)
            top = sorted(f.get("per_kernel", {}).items(), key=lambda kv: -kv[1])[:6]
            if top:
                print("    " + ", ".join(f"{k} x{v}" for k, v in top))
    for name, entry in report.items():
        entry["roofline_us"] = roofline(entry)
    w2 = next((name for name in report if name.startswith("W2")), None)
    if w2 is not None:
        grad_bytes = 4 * sum(a * b + b for a, b in zip(MLP_WIDTHS, MLP_WIDTHS[1:]))
        report[w2]["data_parallel"] = scaling(report[w2], grad_bytes)
        dp = report[w2]["data_parallel"]
        if dp:
            print(f"{w2}: data-parallel estimate ({grad_bytes / 1e6:.1f} MB of gradients, "
                  "25 MiB buckets)")
            for mode, rows in dp.items():
                print(f"  {mode}: " + "; ".join(
                    f"{r['config']}: {r['step_s'] * 1e6:.0f} µs, eff {r['efficiency']:.2f}"
                    for r in rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1)
    if args.markdown:
        print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
