"""The workloads on a GPU: tapegpu on `tg.device("gpu")` against PyTorch CUDA and JAX GPU.

    python -m benchmarks.gpu [--only W2,W3] [--repeats 9]

Before the workloads: the per-op launch latency (a tiny `tg.add` against `cupy.add`, each
followed by a synchronization) and the MLP training step of W2 against the same step written by
hand in CuPy (its matmuls, ReLU masks, softmax cross-entropy and SGD update), cross-checked.
W3's rows compare the batched Jacobian with the loop of VJPs.

Needs CuPy and a CUDA device (`pip install ".[cuda12]"`); PyTorch and JAX are used when they are
installed with CUDA support. Every case synchronizes its device before returning, results are
cross-checked as in the CPU harness (run.py), and the report gives same-round ratios to tapegpu.
Without a GPU the script says why and exits 0.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

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


def launch_latency(tg, cupy, calls=2000):
    """{"tapegpu_us", "cupy_us"}: time per tiny add followed by a device synchronization."""
    with tg.device("gpu"):
        a = tg.constant([1.0])
        dev = a._dev
        raw = a._data

        def tg_call():
            tg.add(a, a)
            dev.synchronize()

        def cupy_call():
            cupy.add(raw, raw)
            cupy.cuda.runtime.deviceSynchronize()
        out = {}
        for name, fn in (("tapegpu_us", tg_call), ("cupy_us", cupy_call)):
            fn()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            out[name] = (time.perf_counter() - t0) / calls * 1e6
    return out


def mlp_cases(tg, cupy, sizes=(784, 1024, 1024, 10), batch=256, lr=1e-3, seed=2):
    """{"tapegpu": step, "cupy by hand": step}: one SGD step of the ReLU MLP with softmax
    cross-entropy on the GPU, each returning the gradients (kernels, then biases) before its
    update, from the same initial weights."""
    rng = np.random.default_rng(seed)
    ws = [(rng.standard_normal((m, n)) * np.sqrt(2.0 / m)).astype(np.float32)
          for m, n in zip(sizes, sizes[1:])]
    bs = [np.zeros(n, np.float32) for n in sizes[1:]]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int32)
    with tg.device("gpu"):
        vw, vb = [tg.Variable(w) for w in ws], [tg.Variable(b) for b in bs]
        xt, yt = tg.constant(x), tg.constant(y)
    opt = tg.optimizers.SGD(learning_rate=lr)

    def tapegpu_step():
        with tg.device("gpu"), tg.GradientTape() as tape:
            h = xt
            for i, (w, b) in enumerate(zip(vw, vb)):
                h = tg.matmul(h, w) + b
                if i < len(vw) - 1:
                    h = tg.nn.relu(h)
            loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(yt, h))
        grads = tape.gradient(loss, vw + vb)
        opt.apply_gradients(zip(grads, vw + vb))
        return [g._data for g in grads]

    cw, cb = [cupy.asarray(w) for w in ws], [cupy.asarray(b) for b in bs]
    cx, cy = cupy.asarray(x), cupy.asarray(y)
    rows = cupy.arange(batch)

    def cupy_step():
        hs, masks = [cx], []
        h = cx
        for i, (w, b) in enumerate(zip(cw, cb)):
            h = h @ w + b
            if i < len(cw) - 1:
                masks.append(h > 0)
                h = h * masks[-1]
                hs.append(h)
        p = cupy.exp(h - h.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[rows, cy] -= 1
        g = p / batch
        dws, dbs = [], []
        for i in range(len(cw) - 1, -1, -1):
            dws.append(hs[i].T @ g)
            dbs.append(g.sum(axis=0))
            if i:
                g = (g @ cw[i].T) * masks[i - 1]
        dws.reverse()
        dbs.reverse()
        for a, d in zip(cw + cb, dws + dbs):
            a -= lr * d
        return dws + dbs
    return {"tapegpu": tapegpu_step, "cupy by hand": cupy_step}


def compare_mlp(tg, cupy, repeats=9, **sizes):
    """Cross-checks the two MLP steps' first gradients, then times them interleaved: {"tapegpu_ms",
    "cupy_ms", "ratio"} (median of same-round ratios)."""
    cases = mlp_cases(tg, cupy, **sizes)
    a, b = cases["tapegpu"](), cases["cupy by hand"]()
    for u, v in zip(a, b):
        np.testing.assert_allclose(cupy.asnumpy(u), cupy.asnumpy(v), rtol=2e-3, atol=1e-5)
    times = {k: [] for k in cases}
    for _ in range(repeats):
        for k, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            cupy.cuda.runtime.deviceSynchronize()
            times[k].append(time.perf_counter() - t0)
    ratios = [u / v for u, v in zip(times["tapegpu"], times["cupy by hand"])]
    return {"tapegpu_ms": statistics.median(times["tapegpu"]) * 1e3,
            "cupy_ms": statistics.median(times["cupy by hand"]) * 1e3,
            "ratio": statistics.median(ratios)}


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
    import cupy
    lat = launch_latency(tg, cupy)
    print(f"launch latency per tiny op + sync: tapegpu {lat['tapegpu_us']:.1f} us, "
          f"cupy {lat['cupy_us']:.1f} us")
    mlp = compare_mlp(tg, cupy, repeats=args.repeats)
    print(f"MLP step 784-1024-1024-10, batch 256: tapegpu {mlp['tapegpu_ms']:.3f} ms, CuPy by "
          f"hand {mlp['cupy_ms']:.3f} ms, ratio {mlp['ratio']:.2f}")
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
