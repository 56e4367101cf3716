"""tapegpu against PyTorch and JAX on the same GPU, same shapes, ratios from one run.

    python -m benchmarks.gpu [--device gpu:0] [--json FILE] [--budget SECONDS] [--repeats 7]
                             [--only mlp,cnn] [--quick]

Rows (tapegpu eager and under tg.function, PyTorch eager, JAX jit):

* launch: the per-op launch latency (a tiny add followed by a synchronization; CuPy's too);
* mlp: an SGD training step of the 784-1024-1024-10 ReLU MLP, batch 256 (mlp_cupy: tapegpu's
  eager step against the same step written by hand in CuPy, gradients cross-checked);
* cnn: a step of conv 3x3x32 - ReLU - max pool 2 - conv 3x3x64 - ReLU - dense 10, batch 64
  of 28x28x1;
* lstm: a step of LSTM(128) over 32 steps of 32 features, dense 10, batch 64;
* transformer: a step of one encoder block (4-head self-attention, d_model 256, feed-forward
  1024, layer norms), batch 16 of 128 tokens;
* jacobian: `jacobian` of tanh(x W1) W2 (128 -> 128) and `batch_jacobian` over 64 rows;
* per_example: per-example gradients of a 784-256-10 MLP's loss, batch 128;
* memory: the peak device memory of the mlp step (tapegpu: CuPy's pool; PyTorch:
  max_memory_allocated; JAX: the device's peak_bytes_in_use).

Every case synchronizes its device before its time is read, runs once untimed (compiles,
traces), then `--repeats` rounds interleaved across frameworks; the report gives each
framework's median and the median of same-round ratios to tapegpu (tg.function where it
exists). Each result goes to the JSON file (`--json`, rewritten atomically after each one) as
it comes: a case that fails or is cut by `--budget` says so, and the others still run. Without
a GPU it says why and exits 0.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = ("launch", "mlp", "mlp_cupy", "cnn", "lstm", "transformer", "jacobian", "per_example",
         "memory")


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


def peers():
    """({"pytorch": torch, "jax": jax} for those installed with GPU support, {name: why not})."""
    found, why = {}, {}
    try:
        import torch
        if torch.cuda.is_available():
            found["pytorch"] = torch
        else:
            why["pytorch"] = "torch sees no CUDA device"
    except Exception as e:  # not installed, or a broken install: said, not fatal
        why["pytorch"] = f"{type(e).__name__}: {e}"[:200]
    try:
        import jax
        if any(d.platform == "gpu" for d in jax.devices()):
            found["jax"] = jax
        else:
            why["jax"] = "jax sees no GPU"
    except Exception as e:
        why["jax"] = f"{type(e).__name__}: {e}"[:200]
    return found, why


class Report:
    """The results so far, written to `path` (atomically) after each one."""

    def __init__(self, path, header):
        self.path, self.doc = path, dict(header, results=[])

    def add(self, result):
        self.doc["results"].append(result)
        line = ", ".join(f"{k} {v['median_ms']:.3f} ms" + (
            f" ({v['ratio_to_tapegpu']:.2f}x)" if "ratio_to_tapegpu" in v else "")
            for k, v in result.get("times", {}).items())
        extra = result.get("error") or result.get("reason") or result.get("errors") or ""
        print(f"{result['name']}: {result['status']} {line} {extra}".rstrip(), flush=True)
        self.write()

    def write(self):
        if not self.path:
            return
        tmp = f"{self.path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1, default=str)
        os.replace(tmp, self.path)


def time_rounds(fns, repeats, deadline, errors):
    """{name: [seconds per round]}: each function once untimed (one that raises there is left
    out, its error in `errors`), then `repeats` rounds, each calling every function once
    (interleaved), while time is left."""
    for k, fn in list(fns.items()):
        try:
            fn()
        except Exception as e:  # one framework's failure: the others are still timed
            errors[k] = f"{type(e).__name__}: {e}"[:500]
            del fns[k]
    times = {k: [] for k in fns}
    for _ in range(repeats):
        if time.monotonic() > deadline:
            break
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return times


def summarize(times, base="tapegpu function"):
    base = base if base in times else next(iter(times))
    out = {}
    for k, ts in times.items():
        if not ts:
            continue
        row = {"median_ms": statistics.median(ts) * 1e3, "rounds": len(ts)}
        if k != base and times.get(base):
            row["ratio_to_tapegpu"] = statistics.median(
                [u / v for u, v in zip(ts, times[base])])
        out[k] = row
    return out


# -- the frameworks' sides ---------------------------------------------------------------------
def _sync_tg(dev):
    return dev.synchronize


def _mlp_data(rng, sizes, batch):
    ws = [(rng.standard_normal((m, n)) * np.sqrt(2.0 / m)).astype(np.float32)
          for m, n in zip(sizes, sizes[1:])]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int64)
    return ws, x, y


def tg_model_step(tg, device, model, x, y, lr=0.01):
    """(eager step, tg.function step) of a Keras model with SGD on the device."""
    with tg.device(device):
        xt, yt = tg.constant(x), tg.constant(y)
        model(xt)
        opt = tg.optimizers.SGD(lr)
        loss_fn = tg.losses.SparseCategoricalCrossentropy(from_logits=True)

        def step(x, y):
            with tg.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        traced = tg.function(step)
    dev = xt._dev

    def eager():
        with tg.device(device):
            step(xt, yt)
        dev.synchronize()

    def function():
        with tg.device(device):
            traced(xt, yt)
        dev.synchronize()
    return {"tapegpu eager": eager, "tapegpu function": function}


def torch_step(torch, model, x, y, lr=0.01):
    model = model.cuda()
    xt, yt = torch.tensor(x).cuda(), torch.tensor(y).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xt), yt)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
    return step


def jax_step(jax, loss, params, x, y, lr=0.01):
    import jax.numpy as jnp
    xt, yt = jnp.asarray(x), jnp.asarray(y)

    @jax.jit
    def update(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
    state = [params]

    def step():
        state[0] = update(state[0], xt, yt)
        jax.block_until_ready(state[0])
    return step


def _jax_xent(logits, y):
    import jax
    import jax.numpy as jnp
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


# -- tapegpu against the MLP step written by hand in CuPy (cross-checked) ----------------
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


# -- cases -------------------------------------------------------------------------------------
def case_launch(tg, device, fw, quick):
    import cupy
    with tg.device(device):
        a = tg.constant(np.ones(1, np.float32))
    dev, raw = a._dev, a._data
    fns = {}

    def tg_add():
        for _ in range(100):
            tg.add(a, a)
        dev.synchronize()
    fns["tapegpu eager"] = tg_add  # eager op dispatch: the row's baseline

    def cupy_add():
        for _ in range(100):
            cupy.add(raw, raw)
        cupy.cuda.runtime.deviceSynchronize()
    fns["cupy"] = cupy_add
    if "pytorch" in fw:
        torch = fw["pytorch"]
        t = torch.ones(1, device="cuda")

        def torch_add():
            for _ in range(100):
                t + t
            torch.cuda.synchronize()
        fns["pytorch"] = torch_add
    if "jax" in fw:
        import jax.numpy as jnp
        j = jnp.ones(1)

        def jax_add():
            r = None
            for _ in range(100):
                r = j + j
            r.block_until_ready()
        fns["jax"] = jax_add
    return fns, "100 tiny adds then one synchronization (per-op cost = median / 100)"


def case_mlp(tg, device, fw, quick):
    sizes, batch = (784, 1024, 1024, 10), 256
    ws, x, y = _mlp_data(np.random.default_rng(0), sizes, batch)
    layers = tg.keras.layers
    model = tg.keras.Sequential([layers.Dense(1024, activation="relu"),
                                 layers.Dense(1024, activation="relu"), layers.Dense(10)])
    fns = tg_model_step(tg, device, model, x, y)
    if "pytorch" in fw:
        nn = fw["pytorch"].nn
        fns["pytorch"] = torch_step(fw["pytorch"], nn.Sequential(
            nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
            nn.Linear(1024, 10)), x, y)
    if "jax" in fw:
        import jax
        import jax.numpy as jnp
        params = [(jnp.asarray(w), jnp.zeros(w.shape[1])) for w in ws]

        def loss(params, x, y):
            h = x
            for i, (w, b) in enumerate(params):
                h = h @ w + b
                if i < len(params) - 1:
                    h = jax.nn.relu(h)
            return _jax_xent(h, y)
        fns["jax"] = jax_step(jax, loss, params, x, y)
    return fns, "SGD step, 784-1024-1024-10 ReLU MLP, batch 256"


def case_cnn(tg, device, fw, quick):
    rng = np.random.default_rng(1)
    batch = 64
    x = rng.standard_normal((batch, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, batch).astype(np.int64)
    layers = tg.keras.layers
    model = tg.keras.Sequential([layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(2),
                                 layers.Conv2D(64, 3, activation="relu"), layers.Flatten(),
                                 layers.Dense(10)])
    fns = tg_model_step(tg, device, model, x, y)
    if "pytorch" in fw:
        torch = fw["pytorch"]
        nn = torch.nn
        fns["pytorch"] = torch_step(torch, nn.Sequential(
            nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
            nn.Flatten(), nn.Linear(64 * 11 * 11, 10)), x.transpose(0, 3, 1, 2).copy(), y)
    if "jax" in fw:
        import jax
        import jax.numpy as jnp
        r = np.random.default_rng(2)
        params = {"c1": jnp.asarray(r.standard_normal((3, 3, 1, 32)) * 0.3, jnp.float32),
                  "c2": jnp.asarray(r.standard_normal((3, 3, 32, 64)) * 0.06, jnp.float32),
                  "d": jnp.asarray(r.standard_normal((64 * 11 * 11, 10)) * 0.01, jnp.float32)}
        dn = ("NHWC", "HWIO", "NHWC")

        def loss(p, x, y):
            h = jax.nn.relu(jax.lax.conv_general_dilated(x, p["c1"], (1, 1), "VALID",
                                                         dimension_numbers=dn))
            h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                      "VALID")
            h = jax.nn.relu(jax.lax.conv_general_dilated(h, p["c2"], (1, 1), "VALID",
                                                         dimension_numbers=dn))
            return _jax_xent(h.reshape(h.shape[0], -1) @ p["d"], y)
        fns["jax"] = jax_step(jax, loss, params, x, y)
    return fns, "SGD step, conv32-pool-conv64-dense10 on 64 x 28x28x1"


def case_lstm(tg, device, fw, quick):
    rng = np.random.default_rng(3)
    batch, steps, features, units = 64, 32, 32, 128
    x = rng.standard_normal((batch, steps, features)).astype(np.float32)
    y = rng.integers(0, 10, batch).astype(np.int64)
    layers = tg.keras.layers
    model = tg.keras.Sequential([layers.LSTM(units), layers.Dense(10)])
    fns = tg_model_step(tg, device, model, x, y)
    if "pytorch" in fw:
        torch = fw["pytorch"]

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = torch.nn.LSTM(features, units, batch_first=True)
                self.out = torch.nn.Linear(units, 10)

            def forward(self, x):
                return self.out(self.lstm(x)[0][:, -1])
        fns["pytorch"] = torch_step(torch, Net(), x, y)
    if "jax" in fw:
        import jax
        import jax.numpy as jnp
        r = np.random.default_rng(4)
        params = {"wx": jnp.asarray(r.standard_normal((features, 4 * units)) * 0.1, jnp.float32),
                  "wh": jnp.asarray(r.standard_normal((units, 4 * units)) * 0.1, jnp.float32),
                  "b": jnp.zeros(4 * units, jnp.float32),
                  "d": jnp.asarray(r.standard_normal((units, 10)) * 0.1, jnp.float32)}

        def loss(p, x, y):
            def cell(carry, xt):
                h, c = carry
                z = xt @ p["wx"] + h @ p["wh"] + p["b"]
                i, f, g, o = jnp.split(z, 4, axis=-1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
                return (h, c), None
            zeros = jnp.zeros((x.shape[0], units), jnp.float32)
            (h, _), _ = jax.lax.scan(cell, (zeros, zeros), jnp.swapaxes(x, 0, 1))
            return _jax_xent(h @ p["d"], y)
        fns["jax"] = jax_step(jax, loss, params, x, y)
    return fns, "SGD step, LSTM(128) over 32 x 32 features, dense 10, batch 64"


def case_transformer(tg, device, fw, quick):
    rng = np.random.default_rng(5)
    batch, seq, d, heads, ff = 16, 128, 256, 4, 1024
    x = rng.standard_normal((batch, seq, d)).astype(np.float32)
    y = rng.integers(0, 10, batch).astype(np.int64)
    layers = tg.keras.layers

    class Block(tg.keras.Model):
        def __init__(self):
            super().__init__()
            self.att = layers.MultiHeadAttention(heads, d // heads)
            self.n1, self.n2 = layers.LayerNormalization(), layers.LayerNormalization()
            self.f1, self.f2 = layers.Dense(ff, activation="relu"), layers.Dense(d)
            self.out = layers.Dense(10)

        def call(self, x, training=False):
            h = self.n1(x + self.att(x, x))
            h = self.n2(h + self.f2(self.f1(h)))
            return self.out(tg.reduce_mean(h, axis=1))
    fns = tg_model_step(tg, device, Block(), x, y)
    if "pytorch" in fw:
        torch = fw["pytorch"]

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.block = torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0,
                                                              batch_first=True)
                self.out = torch.nn.Linear(d, 10)

            def forward(self, x):
                return self.out(self.block(x).mean(dim=1))
        fns["pytorch"] = torch_step(torch, Net(), x, y)
    if "jax" in fw:
        import jax
        import jax.numpy as jnp
        r = np.random.default_rng(6)

        def w(*shape):
            return jnp.asarray(r.standard_normal(shape) / np.sqrt(shape[0]), jnp.float32)
        params = {"q": w(d, d), "k": w(d, d), "v": w(d, d), "o": w(d, d), "f1": w(d, ff),
                  "f2": w(ff, d), "out": w(d, 10)}

        def norm(h):
            mu = h.mean(-1, keepdims=True)
            return (h - mu) / jnp.sqrt(((h - mu) ** 2).mean(-1, keepdims=True) + 1e-3)

        def loss(p, x, y):
            def split(t):
                return t.reshape(batch, seq, heads, d // heads).transpose(0, 2, 1, 3)
            q, k, v = split(x @ p["q"]), split(x @ p["k"]), split(x @ p["v"])
            a = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(d // heads), axis=-1)
            att = (a @ v).transpose(0, 2, 1, 3).reshape(batch, seq, d) @ p["o"]
            h = norm(x + att)
            h = norm(h + jax.nn.relu(h @ p["f1"]) @ p["f2"])
            return _jax_xent(h.mean(axis=1) @ p["out"], y)
        fns["jax"] = jax_step(jax, loss, params, x, y)
    return fns, "SGD step, one encoder block (4 heads, d 256, ff 1024), 16 x 128 tokens"


def case_jacobian(tg, device, fw, quick):
    rng = np.random.default_rng(7)
    n, rows = 128, 64
    w1 = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    w2 = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    x = rng.standard_normal((rows, n)).astype(np.float32)
    with tg.device(device):
        tw1, tw2, tx = tg.constant(w1), tg.constant(w2), tg.constant(x)
    dev = tx._dev

    def tg_jac():
        with tg.device(device):
            v = tx[0]
            with tg.GradientTape() as tape:
                tape.watch(v)
                out = tg.matmul(tg.tanh(tg.matmul(v[None], tw1)), tw2)[0]
            tape.jacobian(out, v)
            with tg.GradientTape() as tape:
                tape.watch(tx)
                out = tg.matmul(tg.tanh(tg.matmul(tx, tw1)), tw2)
            tape.batch_jacobian(out, tx)
        dev.synchronize()
    fns = {"tapegpu eager": tg_jac}
    if "pytorch" in fw:
        fns["pytorch"] = _torch_jacobian(fw["pytorch"], w1, w2, x)
    if "jax" in fw:
        import jax
        import jax.numpy as jnp
        a, b, jx = jnp.asarray(w1), jnp.asarray(w2), jnp.asarray(x)
        jac = jax.jit(jax.jacrev(lambda v: jnp.tanh(v @ a) @ b))
        bjac = jax.jit(jax.vmap(jax.jacrev(lambda v: jnp.tanh(v @ a) @ b)))

        def jax_jac():
            jac(jx[0]).block_until_ready()
            bjac(jx).block_until_ready()
        fns["jax"] = jax_jac
    return fns, "jacobian (128 -> 128) and batch_jacobian over 64 rows of tanh(x W1) W2"


# Each framework's side is made in a function of its own: closures over the case's locals
# would read the names the next framework's side rebinds (PyTorch's product then met JAX's
# arrays).
def _torch_jacobian(torch, w1, w2, x):
    a, b, tx = (torch.tensor(t).cuda() for t in (w1, w2, x))

    def f(v):
        return torch.tanh(v @ a) @ b

    def torch_jac():
        torch.func.jacrev(f)(tx[0])
        torch.func.vmap(torch.func.jacrev(f))(tx)
        torch.cuda.synchronize()
    return torch_jac


def _torch_per_example(torch, ws, x, y):
    pw = [torch.tensor(w).cuda() for w in ws]
    px, py = torch.tensor(x).cuda(), torch.tensor(y).cuda()

    def loss(params, xi, yi):
        logits = torch.relu(xi @ params[0]) @ params[1]
        return torch.nn.functional.cross_entropy(logits[None], yi[None])

    def torch_per_example():
        torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(pw, px, py)
        torch.cuda.synchronize()
    return torch_per_example


def case_per_example(tg, device, fw, quick):
    rng = np.random.default_rng(8)
    ws, x, y = _mlp_data(rng, (784, 256, 10), 128)
    with tg.device(device):
        tw = [tg.Variable(w) for w in ws]
        tx, ty = tg.constant(x), tg.constant(y)
    dev = tx._dev

    def tg_per_example():
        with tg.device(device):
            with tg.GradientTape() as tape:
                h = tg.nn.relu(tg.matmul(tx, tw[0]))
                losses = tg.nn.sparse_softmax_cross_entropy_with_logits(ty, tg.matmul(h, tw[1]))
            tape.jacobian(losses, tw)  # row i: the gradient of example i's loss
        dev.synchronize()
    fns = {"tapegpu eager": tg_per_example}
    if "pytorch" in fw:
        fns["pytorch"] = _torch_per_example(fw["pytorch"], ws, x, y)
    if "jax" in fw:
        import jax
        import jax.numpy as jnp
        jw = [jnp.asarray(w) for w in ws]
        jx, jy = jnp.asarray(x), jnp.asarray(y)

        def loss(params, xi, yi):
            logits = jax.nn.relu(xi @ params[0]) @ params[1]
            return -jax.nn.log_softmax(logits)[yi]
        per = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))

        def jax_per_example():
            jax.block_until_ready(per(jw, jx, jy))
        fns["jax"] = jax_per_example
    return fns, "per-example gradients, 784-256-10 MLP, batch 128"


def case_memory(tg, device, fw, quick):
    """Not timed: the peak device memory of one mlp step per framework (MiB)."""
    import cupy
    fns, _ = case_mlp(tg, device, fw, quick)
    peaks = {}
    pool = cupy.get_default_memory_pool()
    fns["tapegpu function"]()
    pool.free_all_blocks()
    before = pool.total_bytes()
    fns["tapegpu function"]()
    peaks["tapegpu function"] = (pool.total_bytes() - before) / 2 ** 20
    if "pytorch" in fns:
        torch = fw["pytorch"]
        torch.cuda.reset_peak_memory_stats()
        fns["pytorch"]()
        peaks["pytorch"] = torch.cuda.max_memory_allocated() / 2 ** 20
    if "jax" in fns:
        fns["jax"]()
        stats = fw["jax"].devices()[0].memory_stats() or {}
        peaks["jax"] = stats.get("peak_bytes_in_use", float("nan")) / 2 ** 20
    return peaks


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="gpu:0")
    p.add_argument("--json", default=None, help="write the results there (as they come)")
    p.add_argument("--budget", type=float, default=600.0, help="seconds for every case")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--only", help=f"comma-separated cases among {', '.join(CASES)}")
    p.add_argument("--quick", action="store_true",
                   help="2 rounds per case, the launch and jacobian cases unless --only")
    args = p.parse_args(argv)
    why = gpu_missing()
    if why is not None:
        print(f"benchmarks.gpu: no GPU here: {why}. Nothing to time.")
        return 0
    import tapegpu as tg
    deadline = time.monotonic() + args.budget
    fw, missing = peers()
    with tg.device(args.device):
        dev = tg.constant(0.0)._dev
    try:
        props = dev.properties()
    except Exception as e:  # the report still gets written
        props = {"error": str(e)}
    report = Report(args.json, {"tapegpu": tg.__version__, "device": dev.device,
                                "properties": props, "peers": sorted(fw),
                                "peers_missing": missing, "repeats": args.repeats})
    report.write()
    print(f"tapegpu {tg.__version__} on {dev.device} ({props.get('name', '?')}); peers: "
          f"{', '.join(fw) or 'none'}" + "".join(f"; {k}: {v}" for k, v in missing.items()))
    cases = args.only.split(",") if args.only else \
        ["launch", "jacobian"] if args.quick else list(CASES)
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        p.error(f"unknown cases {unknown}; choose among {', '.join(CASES)}")
    repeats = 2 if args.quick else args.repeats
    failed = 0
    for name in cases:
        if time.monotonic() > deadline:
            report.add({"name": name, "status": "skipped", "reason": "the budget ran out"})
            continue
        start = time.perf_counter()
        try:
            if name == "mlp_cupy":  # tapegpu's eager step against CuPy's by hand
                import cupy
                with tg.device(args.device):
                    r = compare_mlp(tg, cupy, repeats=repeats)
                report.add({"name": name, "status": "ok", "what": "eager MLP step against "
                            "the same step by hand in CuPy, gradients cross-checked",
                            "times": {"tapegpu eager": {"median_ms": r["tapegpu_ms"]},
                                      "cupy by hand": {"median_ms": r["cupy_ms"],
                                                       "ratio_to_tapegpu": 1 / r["ratio"]}},
                            "seconds": time.perf_counter() - start})
                continue
            if name == "memory":
                peaks = case_memory(tg, args.device, fw, args.quick)
                report.add({"name": name, "status": "ok", "peak_mib": peaks,
                            "seconds": time.perf_counter() - start})
                continue
            fns, what = globals()[f"case_{name}"](tg, args.device, fw, args.quick)
            errors = {}
            times = time_rounds(fns, repeats, deadline, errors)
            failed += bool(errors)
            report.add({"name": name, "status": "error" if errors else "ok", "what": what,
                        "times": summarize(times), "errors": errors,
                        "seconds": time.perf_counter() - start})
        except Exception as e:  # one case's failure is its result; the others still run
            failed += 1
            import traceback
            report.add({"name": name, "status": "error", "error": f"{type(e).__name__}: {e}"[:500],
                        "traceback": traceback.format_exc()[-2000:]})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
