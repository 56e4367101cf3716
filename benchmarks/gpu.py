"""The workloads on a GPU: tapegpu on `tg.device("gpu")` against PyTorch CUDA and JAX GPU.

    python -m benchmarks.gpu [--only W2,W3] [--repeats 9]

Needs CuPy and a CUDA device (`pip install ".[cuda12]"`); PyTorch and JAX are used when they are
installed with CUDA support. Every case synchronizes its device before returning, results are
cross-checked as in the CPU harness (run.py), and the report gives same-round ratios to tapegpu.
Without a GPU the script says why and exits 0.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def gpu_missing():
    """None when CuPy sees a CUDA device, else the reason why not."""
    try:
        import cupy
    except ImportError as e:
        return f"CuPy is not installed ({e}); pip install '.[cuda12]' or '.[cuda13]'"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # no driver, no device
        return f"CuPy finds no CUDA device ({type(e).__name__}: {e})"
    return None if n > 0 else "CuPy finds no CUDA device"


def gpu_peers():
    """{"torch": module (CUDA), "jax": module (GPU)} for those installed with GPU support."""
    fw = {}
    try:
        import torch
        if torch.cuda.is_available():
            fw["torch"] = torch
            fw["torch_device"] = "cuda"
    except ImportError:
        pass
    try:
        import jax
        if any(d.platform == "gpu" for d in jax.devices()):
            fw["jax"] = jax
    except (ImportError, RuntimeError):
        pass
    return fw


def synchronized(fw_name, fn, tg_dev, fw):
    """`fn` followed by a device synchronization (JAX cases already block)."""
    if fw_name == "tapegpu":
        def call():
            out = fn()
            tg_dev.synchronize()
            return out
        return call
    if fw_name == "pytorch":
        torch = fw["torch"]

        def call():
            out = fn()
            torch.cuda.synchronize()
            return out
        return call
    return fn


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="comma-separated workloads (default: W1-W6)")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--target", type=float, default=0.05)
    args = p.parse_args(argv)
    why = gpu_missing()
    if why is not None:
        print(f"benchmarks.gpu: no GPU here: {why}. Nothing to time.")
        return 0
    import tapegpu as tg
    from benchmarks import workloads
    from benchmarks.run import cross_check, summarize, time_cases
    fw = gpu_peers()
    with tg.device("gpu"):
        tg_dev = tg.constant(0.0)._dev
    print(f"tapegpu {tg.__version__} on {tg_dev.device}; peers on the GPU: "
          f"{', '.join(k for k in fw if k != 'torch_device') or 'none'}")
    keys = args.only.split(",") if args.only else list(workloads.ALL)
    for key in keys:
        with tg.device("gpu"):
            w = workloads.ALL[key](fw)
        # the numpy floor and HIPS autograd run on the CPU: not part of a GPU comparison
        w.cases = {(row, f): synchronized(f, fn, tg_dev, fw) for (row, f), fn in w.cases.items()
                   if f in ("tapegpu", "pytorch", "jax")}
        w.reference = {row: "tapegpu" for row in w.rows()}
        status = cross_check(w)
        timed = {k: fn for k, fn in w.cases.items() if status.get(k) is None}
        times, inner = time_cases(timed, args.repeats, 2, args.target)
        summary = summarize(w, times, inner, status)
        print(f"{key} {w.title}")
        for row, cells in summary["rows"].items():
            print(f"  {row}: " + ", ".join(
                f"{f} {c['median_s'] * 1e3:.3f} ms ({c.get('ratio_to_tapegpu', float('nan')):.2f})"
                if "median_s" in c else f"{f} {c['status']}" for f, c in cells.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
