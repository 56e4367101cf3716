"""W7: peak memory of one forward + backward step, in a fresh process per framework.

    python -m benchmarks.memory_probe tapegpu [--threads 1|all] [--layers 16 --width 1024]
                                              [--batch 512]

The model is a `layers`-deep, `width`-wide ReLU MLP (kernels only), float32, loss
`mean(y ** 2)`; the step computes the gradients of all kernels and keeps them. The process
builds the weights, warms up on one layer (allocator pools, kernel caches, JAX compiles the full
step ahead of time), then resets the kernel's peak-RSS mark (`/proc/self/clear_refs`) and
measures `VmHWM - VmRSS` across the step: the memory the step itself needed, gradients
included. numpy-based frameworks (the floor, tapegpu, autograd) also report tracemalloc's peak,
which counts numpy's array buffers exactly. Prints one JSON line.
"""
import argparse
import gc
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NUMPY_BASED = ("numpy (floor)", "tapegpu", "autograd")


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no {field} in /proc/self/status")


def reset_peak():
    """Resets VmHWM to the current RSS (Linux >= 4.0); False if the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def make_step(name, ws_np, x_np):
    """(step, warm) for framework `name`: `step()` runs forward + backward over all layers and
    returns the gradients; `warm()` does the same on the first layer only."""
    import numpy as np
    if name == "numpy (floor)":
        def run(ws):
            hs, h = [x_np], x_np
            for w in ws:
                h = np.maximum(h @ w, 0)
                hs.append(h)
            g = h * (2.0 / h.size)
            grads = []
            for w in reversed(ws):  # each activation is dropped once its layer is done
                g = g * (hs.pop() > 0)
                grads.append(hs[-1].T @ g)
                g = g @ w.T
            return grads[::-1]
        return (lambda: run(ws_np)), (lambda: run(ws_np[:1]))
    if name == "tapegpu":
        import tapegpu as tg
        vs = [tg.Variable(w) for w in ws_np]
        x = tg.constant(x_np)

        def run(vs):
            with tg.GradientTape() as tape:
                h = x
                for v in vs:
                    h = tg.nn.relu(tg.matmul(h, v))
                loss = tg.reduce_mean(h * h)
            return tape.gradient(loss, vs)
        return (lambda: run(vs)), (lambda: run(vs[:1]))
    if name == "pytorch":
        import torch
        qs = [torch.tensor(w, requires_grad=True) for w in ws_np]
        x = torch.tensor(x_np)

        def run(qs):
            h = x
            for q in qs:
                h = torch.relu(h @ q)
            return torch.autograd.grad((h * h).mean(), qs)
        return (lambda: run(qs)), (lambda: run(qs[:1]))
    if name == "jax":
        import jax
        import jax.numpy as jnp
        js = [jnp.asarray(w) for w in ws_np]
        x = jnp.asarray(x_np)

        def loss(ws):
            h = x
            for w in ws:
                h = jax.nn.relu(h @ w)
            return jnp.mean(h * h)
        full = jax.jit(jax.grad(loss)).lower(js).compile()  # compiled before the measurement
        one = jax.jit(jax.grad(loss))
        return (lambda: jax.block_until_ready(full(js))), \
            (lambda: jax.block_until_ready(one(js[:1])))
    if name == "tensorflow":
        import tensorflow as tf
        fs = [tf.Variable(w) for w in ws_np]
        x = tf.constant(x_np)

        def run(fs):
            with tf.GradientTape() as tape:
                h = x
                for v in fs:
                    h = tf.nn.relu(h @ v)
                loss = tf.reduce_mean(h * h)
            return tape.gradient(loss, fs)
        return (lambda: run(fs)), (lambda: run(fs[:1]))
    if name == "autograd":
        import autograd
        import autograd.numpy as anp

        def loss(ws):
            h = x_np
            for w in ws:
                h = anp.maximum(anp.dot(h, w), 0.0)
            return anp.mean(h * h)
        g = autograd.grad(loss)
        return (lambda: g(ws_np)), (lambda: g(ws_np[:1]))
    raise SystemExit(f"unknown framework {name!r}")


def probe(name, layers=16, width=1024, batch=512):
    import numpy as np
    rng = np.random.default_rng(7)
    ws = [(rng.standard_normal((width, width)) * np.sqrt(2.0 / width)).astype(np.float32)
          for _ in range(layers)]
    x = rng.standard_normal((batch, width)).astype(np.float32)
    step, warm = make_step(name, ws, x)
    warm()
    warm()
    gc.collect()
    use_tm = name in NUMPY_BASED
    if use_tm:
        import tracemalloc
        tracemalloc.start()
    base = _status("VmRSS")
    resettable = reset_peak()
    grads = step()
    peak = _status("VmHWM")
    tm_peak = None
    if use_tm:
        tm_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    n = len(grads)
    del grads
    return {"framework": name, "peak_increase_bytes": max(0, peak - base) if resettable else None,
            "tracemalloc_peak_bytes": tm_peak, "gradients": n, "hwm_reset": resettable,
            "weights_bytes": sum(w.nbytes for w in ws), "activation_bytes": x.nbytes * layers}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("framework")
    p.add_argument("--threads", choices=("1", "all"), default="1")
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--batch", type=int, default=512)
    args = p.parse_args(argv)
    from benchmarks.run import configure_threads, import_peers
    configure_threads(args.threads)
    peer = {"pytorch": "torch", "jax": "jax", "tensorflow": "tf", "autograd": "autograd"}
    if args.framework in peer:  # thread settings, as in the timed runs
        fw, _, missing = import_peers(args.threads, {peer[args.framework]})
        if missing:
            raise SystemExit(f"{args.framework} is not installed: {missing}")
    print(json.dumps(probe(args.framework, args.layers, args.width, args.batch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
