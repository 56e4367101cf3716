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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="comma-separated workloads (default: W1-W6)")
    p.add_argument("--json", help="also write the counts here")
    p.add_argument("--markdown", action="store_true", help="also print a markdown table")
    args = p.parse_args(argv)
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
