"""A GPU cost model that runs without a GPU: kernel launches (and bytes moved) per step.

    python -m benchmarks.gpu_cost [--only W1,W2] [--json FILE]

Runs tapegpu's side of each workload (workloads.py) once on the `cuda_emu` device, where every
custom kernel runs from the same `.cu` source as on a GPU through the CPU emulator, and reads
the backend's launch counter (`launches`: kernel launches per kernel name) around one step
after a warm-up. Each workload is counted twice: with the sweep's array mode and fused VJPs
(the default, `tapegpu.autodiff.sweep.FUSED = True`) and with the tensor-mode rules only, so the effect
of fusion is visible. Where `tg.profiler` reports bytes moved, they are shown too.

On a GPU each launch costs a few microseconds of latency whatever its size, so launches per step
bound the step time of the small workloads (W1, W4-W6) from below; bytes moved over memory
bandwidth bound the large ones (W2, W3). If this tapegpu has no `cuda_emu` device, the script
says so and exits 0.
"""
import argparse
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


def count(dev, fn):
    """Kernel launches per kernel name of one call of `fn` (after one warm-up call)."""
    fn()
    dev.synchronize()
    before = collections.Counter(dev.launches)
    fn()
    dev.synchronize()
    after = collections.Counter(dev.launches)
    after.subtract(before)
    return {k: v for k, v in after.items() if v}


def markdown(report):
    """The counts as a markdown table."""
    lines = ["| workload | launches (fused) | launches (unfused) | MiB moved | MFLOP |",
             "|---|---:|---:|---:|---:|"]
    for name, e in report.items():
        f, u = e.get("fused", {}), e.get("unfused", {})
        b = f.get("bytes") or {}
        lines.append(f"| {name} | {f.get('launches', 'error')} | {u.get('launches', 'error')} | "
                     f"{b['bytes'] / 2**20:.1f} | {b['flops'] / 1e6:.1f} |" if b else
                     f"| {name} | {f.get('launches', 'error')} | {u.get('launches', 'error')} "
                     "| | |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="comma-separated workloads (default: W1-W6)")
    p.add_argument("--json", help="also write the counts here")
    p.add_argument("--markdown", action="store_true", help="also print a markdown table")
    args = p.parse_args(argv)
    import tapegpu as tg
    from tapegpu.autodiff import sweep
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
                old = sweep.FUSED
                sweep.FUSED = fused
                try:
                    launches = count(dev, fn)
                    entry[mode] = {"launches": sum(launches.values()), "per_kernel": launches,
                                   "bytes": _profiler_bytes(tg, fn) if fused else None}
                except Exception as e:
                    entry[mode] = {"error": f"{type(e).__name__}: {e}"}
                finally:
                    sweep.FUSED = old
            report[f"{key}: {row}"] = entry
            f, u = entry["fused"], entry["unfused"]
            line = f"{key}: {row}: launches fused {f.get('launches', f.get('error'))}, " \
                   f"unfused {u.get('launches', u.get('error'))}"
            if f.get("bytes") is not None:
                line += f"; bytes moved {f['bytes']['bytes'] / 2**20:,.2f} MiB, " \
                        f"{f['bytes']['flops'] / 1e6:,.1f} MFLOP"
            print(line, flush=True)
            top = sorted(f.get("per_kernel", {}).items(), key=lambda kv: -kv[1])[:6]
            if top:
                print("    " + ", ".join(f"{k} x{v}" for k, v in top))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1)
    if args.markdown:
        print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
