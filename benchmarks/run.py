"""The benchmark harness: tapegpu against every peer installed, in one run.

    python -m benchmarks                    # one thread, pinned to one core
    python -m benchmarks --threads all      # every core, every BLAS/OpenMP thread
    python -m benchmarks --only W1,W5 --repeats 9

For each workload (workloads.py) the harness first cross-checks every framework's result against
a reference (the hand-written numpy floor, or tapegpu) with `np.testing.assert_allclose`; a case
that disagrees is reported and never timed. It then times all cases of the workload in rounds,
rotating their order within each round, and reports per case the median time and the median
over rounds of the ratio to tapegpu timed in the same round (these machines change speed by up
to 1.8x within seconds; a same-round ratio is what survives that). W7 (peak memory) runs one
fresh process per framework (memory_probe.py).

Results: `benchmarks/results/latest.json` (one entry per thread mode, merged), `latest.md` and
`ratios.png` (matplotlib, optional).
"""
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


# -- set-up: threads first (before numpy is imported), then the peers -----------------------------

def configure_threads(mode):
    """`"1"`: one BLAS/OpenMP thread per library and one core; `"all"`: the libraries' defaults.
    Must run before numpy (or any peer) is imported."""
    if "numpy" in sys.modules:
        raise RuntimeError("configure_threads must run before numpy is imported")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if mode == "1":
        from benchmarks.timing import pin_one_thread
        pin_one_thread()
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=false"
                                   " intra_op_parallelism_threads=1").strip()


def import_peers(mode, wanted=None):
    """{name: module or None} for torch, jax, tf, autograd, and their versions."""
    fw, versions, missing = {}, {}, {}

    def want(name):
        return wanted is None or name in wanted

    if want("torch"):
        try:
            import torch
            if mode == "1":
                torch.set_num_threads(1)
                torch.set_num_interop_threads(1)
            fw["torch"] = torch
            versions["pytorch"] = torch.__version__
        except ImportError as e:
            missing["pytorch"] = str(e)
    if want("jax"):
        try:
            import jax
            import jax.numpy  # noqa: F401
            jax.config.update("jax_platforms", "cpu")
            fw["jax"] = jax
            versions["jax"] = jax.__version__
        except ImportError as e:
            missing["jax"] = str(e)
    if want("tf"):
        try:
            import tensorflow as tf
            if mode == "1":
                tf.config.threading.set_intra_op_parallelism_threads(1)
                tf.config.threading.set_inter_op_parallelism_threads(1)
            tf.get_logger().setLevel("ERROR")
            fw["tf"] = tf
            versions["tensorflow"] = tf.__version__
        except ImportError as e:
            missing["tensorflow"] = str(e)
    if want("autograd"):
        try:
            import autograd
            import autograd.numpy  # noqa: F401
            from importlib.metadata import version
            fw["autograd"] = autograd
            versions["autograd"] = version("autograd")
        except ImportError as e:
            missing["autograd"] = str(e)
    return fw, versions, missing


def machine():
    """CPU model, cores, Python and platform: the context every figure needs."""
    model = platform.processor() or "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


# -- correctness, then timing ---------------------------------------------------------------------

def cross_check(w):
    """Runs every case once and compares it with its row's reference. Returns
    {(row, fw): None if it agrees, else the error text}."""
    import numpy as np
    from benchmarks.workloads import to_numpy
    results, status = {}, {}
    for key, fn in w.cases.items():
        try:
            results[key] = to_numpy(fn())
            status[key] = None
        except Exception as e:  # a peer that cannot run a workload is reported, not fatal
            status[key] = f"failed to run: {type(e).__name__}: {e}"
            traceback.print_exc(limit=3)
    rtol, atol = w.tol
    for (row, fw), got in results.items():
        ref = w.reference.get(row)
        if ref is None or (row, ref) not in results or fw == ref or (row, fw) in w.unchecked:
            continue
        want = results[row, ref]
        try:
            if len(got) != len(want):
                raise AssertionError(f"{len(got)} arrays, reference has {len(want)}")
            for a, b in zip(got, want):
                np.testing.assert_allclose(a.reshape(b.shape), b, rtol=rtol, atol=atol)
        except (AssertionError, ValueError) as e:
            status[row, fw] = f"disagrees with {ref}: {str(e).strip()[:400]}"
    return status


def time_cases(cases, repeats, warmup, target):
    """Per-case times (seconds per call), one per round, case order rotating each round."""
    from benchmarks.timing import time_rounds
    return time_rounds(cases, repeats, warmup, target)


def summarize(w, times, inner, status):
    """JSON-ready rows: per framework median time, ratio to tapegpu and to the floor."""
    from benchmarks.workloads import FLOOR, TAPEGPU

    def ratio(a, b):
        return statistics.median(x / y for x, y in zip(times[a], times[b]))

    rows = {}
    for row in w.rows():
        cells = {}
        for (r, fw) in w.cases:
            if r != row:
                continue
            cell = {"status": status.get((r, fw)) or "ok"}
            if (r, fw) in times:
                cell["median_s"] = statistics.median(times[r, fw])
                cell["inner"] = inner[r, fw]
                cell["rounds"] = len(times[r, fw])
                if (row, TAPEGPU) in times:
                    cell["ratio_to_tapegpu"] = ratio((r, fw), (row, TAPEGPU))
                if (row, FLOOR) in times:
                    cell["ratio_to_floor"] = ratio((r, fw), (row, FLOOR))
            cells[fw] = cell
        rows[row] = cells
    derived = {}
    for label, a, b in w.derived:
        derived[label] = {fw: ratio((a, fw), (b, fw)) for (r, fw) in w.cases
                          if r == a and (a, fw) in times and (b, fw) in times}
    return {"title": w.title, "rows": rows, "derived": derived}


def run_memory(mode, frameworks):
    """W7: one fresh process per framework; {framework: probe result}."""
    out = {}
    for name in frameworks:
        cmd = [sys.executable, "-m", "benchmarks.memory_probe", name, "--threads", mode]
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              cwd=os.path.dirname(HERE), timeout=900)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode == 0 and lines:
            out[name] = json.loads(lines[-1])
        else:
            out[name] = {"status": f"probe failed (exit {proc.returncode}): "
                                   f"{proc.stderr.strip()[-400:]}"}
        print(f"  W7 {name:<14} {out[name]}", flush=True)
    ref = out.get("tapegpu", {}).get("peak_increase_bytes")
    for r in out.values():
        if ref and "peak_increase_bytes" in r:
            r["ratio_to_tapegpu"] = r["peak_increase_bytes"] / ref
    return out


# -- reports --------------------------------------------------------------------------------------

def _fmt_ratio(cell):
    if cell is None:
        return ""
    if cell.get("status", "ok") != "ok":
        return "fails" if "disagrees" in cell["status"] else "n/a"
    r = cell.get("ratio_to_tapegpu")
    return "" if r is None else f"{r:.2f}"


def markdown(doc):
    """The markdown report of every thread mode in `doc`."""
    from benchmarks.workloads import FRAMEWORKS, TAPEGPU
    m = doc["machine"]
    lines = ["# tapegpu benchmarks", "",
             f"Machine: {m['cpu']}, {m['cores']} cores; Python {m['python']}; "
             f"{m['platform']}.", ""]
    lines += ["How each framework runs: tapegpu, PyTorch, TensorFlow and HIPS autograd eagerly "
              "(TensorFlow with `tf.GradientTape`, no `tf.function`); JAX under `jax.jit`, as it "
              "is meant to be used, except the loop rows of W3 (a Python loop over an eager "
              "`vjp_fn`). \"numpy (floor)\" is the same computation written by hand in numpy "
              "(for W2: only its 8 matmuls). Loops: a Python loop of one VJP per output row "
              "(`experimental_use_pfor=False` for tapegpu and TensorFlow; `autograd.jacobian` "
              "is such a loop). Every result is cross-checked against the floor or tapegpu "
              "(`np.testing.assert_allclose`, float32 tolerances) before anything is timed.", ""]
    for mode, run in sorted(doc["runs"].items()):
        vers = ", ".join(f"{k} {v}" for k, v in run["versions"].items())
        threads = "one thread, pinned to one core" if mode == "1" else "all threads"
        lines += [f"## {threads}", "",
                  f"{vers}. {run['started']}; median of {run['repeats']} interleaved rounds "
                  "after warm-up.", "",
                  "Cells are the median over rounds of (framework time / tapegpu time in the "
                  "same round): above 1, tapegpu is faster; below 1, slower. \"fails\": the "
                  "result disagreed with the reference and was not timed; empty: the framework "
                  "has no such variant.", ""]
        fws = [f for f in FRAMEWORKS if any(f in row for w in run["workloads"].values()
                                            for row in w["rows"].values())]
        others = [f for f in fws if f != TAPEGPU]
        lines.append("| | workload | tapegpu ms | " + " | ".join(others) + " |")
        lines.append("|---|---|---:|" + "---:|" * len(others))
        for key, w in run["workloads"].items():
            for row, cells in w["rows"].items():
                t = cells.get(TAPEGPU, {})
                ms = f"{t['median_s'] * 1e3:.3f}" if "median_s" in t else "n/a"
                lines.append(f"| {key} | {row} | {ms} | " +
                             " | ".join(_fmt_ratio(cells.get(f)) for f in others) + " |")
        derived = [(key, label, vals) for key, w in run["workloads"].items()
                   for label, vals in w["derived"].items()]
        if derived:
            lines += ["", "Within each framework (same-round ratio, not relative to tapegpu):",
                      "", "| | ratio | " + " | ".join(fws) + " |",
                      "|---|---|" + "---:|" * len(fws)]
            for key, label, vals in derived:
                lines.append(f"| {key} | {label} | " + " | ".join(
                    f"{vals[f]:.2f}" if f in vals else "" for f in fws) + " |")
        mem = run.get("memory")
        if mem:
            lines += ["", "W7: peak memory of one forward + backward step of a 16-layer "
                      "1024-wide ReLU MLP, batch 512, float32 (fresh process per framework, "
                      "after a warm-up on one layer): increase of the peak resident set, and "
                      "tracemalloc's peak for numpy-based frameworks.", "",
                      "| framework | peak RSS increase MiB | ratio to tapegpu | "
                      "tracemalloc peak MiB |", "|---|---:|---:|---:|"]
            for name, r in mem.items():
                if "peak_increase_bytes" not in r:
                    lines.append(f"| {name} | n/a | | |")
                    continue
                tm = r.get("tracemalloc_peak_bytes")
                lines.append(f"| {name} | {r['peak_increase_bytes'] / 2**20:.1f} | "
                             f"{r.get('ratio_to_tapegpu', float('nan')):.2f} | "
                             f"{'' if tm is None else f'{tm / 2**20:.1f}'} |")
        problems = [(key, row, f, c["status"]) for key, w in run["workloads"].items()
                    for row, cells in w["rows"].items() for f, c in cells.items()
                    if c.get("status", "ok") != "ok"]
        if problems:
            lines += ["", "Not timed:", ""]
            lines += [f"- {key} {row}, {f}: {s[:200]}" for key, row, f, s in problems]
        lines.append("")
    return "\n".join(lines)


MEMORY_LABEL = "W7: peak memory, 16 x 1024 ReLU MLP step"


def plot(doc, path):
    """Horizontal bars: each framework's time over tapegpu's (log scale), per workload row."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install '.[bench]'): no plot")
        return False
    from benchmarks.workloads import FRAMEWORKS, TAPEGPU
    modes = sorted(doc["runs"])
    fws = [f for f in FRAMEWORKS if f != TAPEGPU]
    colors = dict(zip(fws, ["#7f7f7f", "#ee4c2c", "#4285f4", "#ff8f00", "#2ca02c"]))
    first = doc["runs"][modes[0]]
    labels = [f"{k}: {row}" for k, w in first["workloads"].items() for row in w["rows"]]
    if first.get("memory"):
        labels.append(MEMORY_LABEL)
    fig, axes = plt.subplots(1, len(modes), figsize=(7.5 * len(modes), 0.55 * len(labels) + 2),
                             squeeze=False, sharey=True)
    h = 0.8 / len(fws)
    for ax, mode in zip(axes[0], modes):
        run = doc["runs"][mode]
        rows = [(f"{k}: {row}", cells) for k, w in run["workloads"].items()
                for row, cells in w["rows"].items()]
        if run.get("memory"):
            rows.append((MEMORY_LABEL, run["memory"]))
        index = {lab: i for i, lab in enumerate(labels)}
        for j, f in enumerate(fws):
            ys, xs = [], []
            for lab, cells in rows:
                c = cells.get(f, {})
                if lab in index and "ratio_to_tapegpu" in c and c.get("status", "ok") == "ok":
                    ys.append(index[lab] + (j - (len(fws) - 1) / 2) * h)
                    xs.append(c["ratio_to_tapegpu"])
            if xs:
                ax.barh(ys, xs, height=h, left=0, color=colors[f], label=f)
        ax.axvline(1.0, color="black", lw=1)
        ax.set_xscale("log")
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels, fontsize=8)
        ax.set_xlabel("time (W7: peak memory) / tapegpu's, same round (log; > 1: tapegpu "
                      "better)")
        ax.set_title("one thread" if mode == "1" else "all threads")
        ax.grid(axis="x", which="both", alpha=0.3)
    axes[0][0].invert_yaxis()  # once: the y axis is shared
    axes[0][0].legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.07), ncol=3)
    fig.suptitle(f"tapegpu vs peers on {doc['machine']['cpu']} ({doc['machine']['cores']} cores)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# -- main -----------------------------------------------------------------------------------------

def main(args):
    import numpy as np
    import tapegpu as tg
    from benchmarks import workloads

    if args.report_only:
        return write_reports(args.out)
    wanted = None if args.frameworks is None else set(args.frameworks.split(","))
    fw, versions, missing = import_peers(args.threads, wanted)
    versions = {"tapegpu": tg.__version__, "numpy": np.__version__, **versions}
    only = args.only.split(",") if args.only else list(workloads.ALL) + ["W7"]
    print(f"threads: {args.threads}; " + ", ".join(f"{k} {v}" for k, v in versions.items()) +
          (f"; not installed: {', '.join(missing)}" if missing else ""), flush=True)
    run = {"versions": versions, "missing": missing, "repeats": args.repeats,
           "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "workloads": {}}
    for key in only:
        if key == "W7" or key not in workloads.ALL:
            continue
        t0 = time.perf_counter()
        w = workloads.ALL[key](fw)
        status = cross_check(w)
        for k, s in status.items():
            if s is not None:
                print(f"  {key} {k}: {s[:300]}", flush=True)
        timed = {k: fn for k, fn in w.cases.items() if status.get(k) is None}
        times, inner = time_cases(timed, args.repeats, args.warmup, args.target)
        summary = summarize(w, times, inner, status)
        run["workloads"][key] = summary
        print(f"{key} ({time.perf_counter() - t0:.0f} s) {w.title}", flush=True)
        for row, cells in summary["rows"].items():
            print(f"  {row}: " + ", ".join(
                f"{f} {c['median_s'] * 1e3:.3f} ms ({c.get('ratio_to_tapegpu', float('nan')):.2f})"
                for f, c in cells.items() if "median_s" in c), flush=True)
        for label, vals in summary["derived"].items():
            print(f"  {label}: " + ", ".join(f"{f} {v:.2f}" for f, v in vals.items()))
    if "W7" in only:
        names = ["numpy (floor)", "tapegpu"] + [n for n, m in
                                                 (("pytorch", "torch"), ("jax", "jax"),
                                                  ("tensorflow", "tf"), ("autograd", "autograd"))
                                                 if m in fw]
        run["memory"] = run_memory(args.threads, names)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "latest.json")
    doc = {"machine": machine(), "runs": {}}
    if os.path.exists(path) and not args.fresh:
        with open(path) as f:
            old = json.load(f)
        if old.get("machine", {}).get("cpu") == doc["machine"]["cpu"]:
            doc["runs"] = old.get("runs", {})
    doc["runs"][args.threads] = run
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
    return write_reports(args.out)


def write_reports(out):
    """latest.md and ratios.png from latest.json."""
    with open(os.path.join(out, "latest.json")) as f:
        doc = json.load(f)
    with open(os.path.join(out, "latest.md"), "w") as f:
        f.write(markdown(doc))
    plotted = plot(doc, os.path.join(out, "ratios.png"))
    print(f"wrote {out}/latest.json, latest.md" + (", ratios.png" if plotted else ""))
    return doc
