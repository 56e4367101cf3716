"""Issue-2 figures: eager per-op overhead, Jacobian of an MLP, an MLP training step; and the
small-tensor workloads as TensorFlow code writes them, against PyTorch eager (issue 33).

    python -m benchmarks.core          (one thread, pinned; prints ratios; --json FILE)
    python -m benchmarks.core --eager-peers   (W1, W2, W4, W5, W6 against PyTorch eager only)

Each figure is a ratio to a baseline timed in the same run, interleaved round by round.
"""
from benchmarks.timing import pin_one_thread

pin_one_thread()

import argparse  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402

import tapegpu as tg  # noqa: E402
from benchmarks.timing import compare, table  # noqa: E402
from benchmarks.workloads import matmul_floor  # noqa: E402

try:
    import torch  # noqa: E402
    torch.set_num_threads(1)
except ImportError:  # torch is optional: pip install torch==2.13.0
    torch = None


# -- W1: eager per-op overhead ------------------------------------------------------------------

def overhead_cases():
    """W1 of the harness (workloads.w1_overhead): hand-written numpy, tapegpu, PyTorch."""
    from benchmarks.workloads import FLOOR, TAPEGPU, w1_overhead
    w = w1_overhead({"torch": torch})
    names = {FLOOR: "numpy by hand", TAPEGPU: "tapegpu", "pytorch": "pytorch autograd"}
    cases = {names[fw]: fn for (_, fw), fn in w.cases.items()}
    np.testing.assert_allclose(cases["tapegpu"]().numpy(), cases["numpy by hand"](), rtol=1e-5)
    cases.update(_overhead_breakdown())
    np.testing.assert_allclose(cases["minimal eager tape"](), cases["numpy by hand"](),
                               rtol=1e-5)
    return cases


def _overhead_breakdown(steps=100):
    """Where tapegpu's W1 time goes: the forward alone, the forward recorded on a tape (the
    full step adds the sweep), and the least an eager tape can do: a tensor class whose
    operators run numpy and append one tuple each, and a sweep over those tuples, with none of
    tapegpu's checks, dtypes, devices or bookkeeping."""
    x0 = np.random.default_rng(0).standard_normal(16).astype(np.float32)
    xt = tg.constant(x0)

    def forward_only():
        y = xt
        for _ in range(steps):
            y = tg.sin(y) * 1.01 + 0.1
        return y

    def forward_recorded():
        with tg.GradientTape() as tape:
            tape.watch(xt)
            forward_only()
        return tape

    def minimal_tape():
        _Minimal.tape = []
        y = x = _Minimal(x0)
        for _ in range(steps):
            y = y.sin() * 1.01 + 0.1
        grads = {id(y): np.ones_like(y.data)}
        for kind, i, o, saved, _ in reversed(_Minimal.tape):
            g = grads.pop(o)
            grads[i] = g * np.cos(saved) if kind == 0 else g * saved if kind == 1 else g
        _Minimal.tape = []  # as a tape does after its sweep
        return grads[id(x)]

    return {"tapegpu forward only": forward_only,
            "tapegpu forward recorded": forward_recorded,
            "minimal eager tape": minimal_tape}


class _Minimal:
    """A tensor of the minimal eager tape: (kind, input id, output id, saved, input) per op;
    keeping the input alive keeps the ids unique until the sweep."""
    __slots__ = ("data",)
    tape = []

    def __init__(self, data):
        self.data = data

    def _record(self, kind, out, saved):
        t = _Minimal(out)
        _Minimal.tape.append((kind, id(self), id(t), saved, self))
        return t

    def sin(self):
        return self._record(0, np.sin(self.data), self.data)

    def __mul__(self, c):
        c = np.asarray(c, self.data.dtype)
        return self._record(1, self.data * c, c)

    def __add__(self, c):
        return self._record(2, self.data + np.asarray(c, self.data.dtype), None)


# -- W3: Jacobian of a 256-512-512-64 tanh MLP w.r.t. its input --------------------------------

def jacobian_cases():
    rng = np.random.default_rng(1)
    sizes = [256, 512, 512, 64]
    ws = [(rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32)
          for i, o in zip(sizes[:-1], sizes[1:])]
    bs = [np.zeros(o, np.float32) for o in sizes[1:]]
    x0 = rng.standard_normal((1, 256)).astype(np.float32)
    tw = [tg.constant(w) for w in ws]
    tb = [tg.constant(b) for b in bs]
    xt = tg.constant(x0)

    def mlp(x):
        for w, b in zip(tw, tb):
            x = tg.tanh(tg.matmul(x, w) + b)
        return x

    def tapegpu_jacobian(pfor=True):
        with tg.GradientTape(persistent=not pfor) as tape:  # the loop needs it, as in TF
            tape.watch(xt)
            y = mlp(xt)
        return tape.jacobian(y, xt, experimental_use_pfor=pfor)

    def numpy_by_hand():
        # forward keeping activations, then J = I D3 W3^T D2 W2^T D1 W1^T, left to right
        hs = []
        h = x0
        for w, b in zip(ws, bs):
            h = np.tanh(h @ w + b)
            hs.append(h)
        g = np.eye(64, dtype=np.float32)
        for w, h in zip(reversed(ws), reversed(hs)):
            g = (g * (1 - h * h)) @ w.T
        return g

    cases = {"tapegpu jacobian": tapegpu_jacobian,
             "tapegpu loop (pfor=False)": lambda: tapegpu_jacobian(False),
             "numpy by hand": numpy_by_hand}
    if torch is not None:
        qw = [torch.tensor(w) for w in ws]
        qb = [torch.tensor(b) for b in bs]

        def f(x):
            for w, b in zip(qw, qb):
                x = torch.tanh(x @ w + b)
            return x
        xq = torch.tensor(x0)
        jacrev = torch.func.jacrev(f)
        cases["pytorch jacrev"] = lambda: jacrev(xq)
        np.testing.assert_allclose(tapegpu_jacobian().numpy(), jacrev(xq).numpy(), rtol=1e-4,
                                   atol=1e-6)
    np.testing.assert_allclose(tapegpu_jacobian().numpy(), tapegpu_jacobian(False).numpy(),
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(tapegpu_jacobian().numpy().reshape(64, 256), numpy_by_hand(),
                               rtol=1e-5, atol=1e-6)
    return cases


# -- W2: one training step of a 784-1024-1024-10 ReLU MLP ----------------------------------------

def training_cases(batch=256):
    rng = np.random.default_rng(2)
    sizes = [784, 1024, 1024, 10]
    ws = [(rng.standard_normal((i, o)) * np.sqrt(2 / i)).astype(np.float32)
          for i, o in zip(sizes[:-1], sizes[1:])]
    bs = [np.zeros(o, np.float32) for o in sizes[1:]]
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    labels = rng.integers(0, 10, batch).astype(np.int32)
    floor_8_matmuls = matmul_floor(x, ws, bs)

    model = tg.layers.Sequential([tg.layers.Dense(1024, activation="relu"),
                                  tg.layers.Dense(1024, activation="relu"),
                                  tg.layers.Dense(10)])
    xt = tg.constant(x)
    yt = tg.constant(labels)
    model(xt)
    for layer, w, b in zip(model.layers, ws, bs):
        layer.kernel.assign(w)
        layer.bias.assign(b)
    variables = [layer.kernel for layer in model.layers] + [layer.bias for layer in model.layers]

    def tapegpu_step():
        with tg.GradientTape() as tape:
            logits = model(xt)
            loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(yt, logits))
        return tape.gradient(loss, variables)

    cases = {"numpy 8 matmuls (floor)": floor_8_matmuls, "tapegpu step": tapegpu_step}
    if torch is not None:
        qw = [torch.tensor(w, requires_grad=True) for w in ws]
        qb = [torch.tensor(b, requires_grad=True) for b in bs]
        qx = torch.tensor(x)
        qy = torch.tensor(labels.astype(np.int64))

        def torch_step():
            h = qx
            for i, (w, b) in enumerate(zip(qw, qb)):
                h = h @ w + b
                if i < 2:
                    h = torch.relu(h)
            loss = torch.nn.functional.cross_entropy(h, qy)
            return torch.autograd.grad(loss, qw + qb)
        cases["pytorch step"] = torch_step
        got = [g.numpy() for g in tapegpu_step()]
        want = [g.numpy() for g in torch_step()]
        for a, b in zip(got, want):
            # relative to the whole gradient: two float32 forwards summed in different orders
            # put a few pre-activations on different sides of ReLU's kink, which moves single
            # entries by far more than rounding does
            err = np.linalg.norm(a - b) / np.linalg.norm(b)
            assert err < 1e-2, f"tapegpu and PyTorch gradients differ: relative error {err:.2e}"
    return cases


# -- issue 33: the small-tensor rows against PyTorch eager -----------------------------------------

def _tanh_layer_bj(batch=128):
    """W4 as TF code writes it: `tape.batch_jacobian` of a (128, 16) -> (128, 32) tanh layer;
    PyTorch: vmap(jacrev) of the layer."""
    rng = np.random.default_rng(4)
    x0 = rng.standard_normal((batch, 16)).astype(np.float32)
    w0 = (rng.standard_normal((16, 32)) / 4).astype(np.float32)
    b0 = (rng.standard_normal(32) * 0.1).astype(np.float32)
    xt, wt, bt = tg.constant(x0), tg.constant(w0), tg.constant(b0)

    def tapegpu_bj():
        with tg.GradientTape() as tape:
            tape.watch(xt)
            y = tg.tanh(tg.matmul(xt, wt) + bt)
        return tape.batch_jacobian(y, xt)

    def floor():
        d = 1 - np.tanh(x0 @ w0 + b0) ** 2            # (b, 32)
        return d[:, :, None] * w0.T[None]              # (b, 32, 16)
    cases = {"numpy (floor)": floor, "tapegpu": tapegpu_bj}
    if torch is not None:
        qw, qb, qx = torch.tensor(w0), torch.tensor(b0), torch.tensor(x0)
        bjq = torch.func.vmap(torch.func.jacrev(lambda x: torch.tanh(x @ qw + qb)))
        cases["pytorch"] = lambda: bjq(qx)
    return cases


def eager_peer_suites():
    """{title: (cases, tolerance)}: each workload's tapegpu eager case beside PyTorch eager
    (and the numpy floor where one is written): the rows of issue 33's table."""
    from benchmarks import workloads as W
    fw = {"torch": torch} if torch is not None else {}
    names = {W.TAPEGPU: "tapegpu", W.FLOOR: "numpy (floor)", "pytorch": "pytorch"}

    def rows(w, pick):
        row = next(r for r in w.rows() if r.startswith(pick))
        return {names[f]: fn for (r, f), fn in w.cases.items() if r == row and f in names}
    w1 = W.w1_overhead(fw)
    w4 = W.w4_batch_jacobian(fw)
    w5 = W.w5_hvp(fw)
    w6 = W.w6_per_example(fw)
    out = {"W1 eager overhead: 100 x (sin, *, +) on (16,), fwd+bwd": (rows(w1, "100 x"),
                                                                        w1.tol),
           "W2 MLP step 784-1024-1024-10 ReLU, batch 256 (gradients)": (
               {("pytorch" if "pytorch" in k else "numpy (floor)" if "floor" in k else
                 "tapegpu"): v for k, v in training_cases().items()}, None),
           "W4 batch_jacobian (128,16,32) of a 32-64-64-16 ELU MLP": (
               rows(w4, "batch_jacobian"), w4.tol),
           "W4 batch_jacobian of a (128,16)->(128,32) tanh layer": (_tanh_layer_bj(),
                                                                   (1e-4, 1e-6))}
    for label, pick in (("gradient", "gradient"), ("HVP fwd-over-rev", "HVP, forward"),
                        ("HVP rev-over-rev", "HVP, reverse")):
        out[f"W5 784-256-10 tanh MLP, batch 64: {label}"] = (rows(w5, pick), w5.tol)
    out["W6 per-example gradients by tape.jacobian, 100-128-10 tanh, batch 64 "
        "(PyTorch: vmap(grad))"] = (rows(w6, "per-example gradients,"), w6.tol)
    out["W6 per-example gradients by vectorized_map, 100-128-10 tanh, batch 64"] = (
        rows(w6, "per-example gradients by"), w6.tol)
    return out


def _check_same(cases, tol):
    if tol is None or "tapegpu" not in cases:
        return
    want = [np.asarray(a) for a in _flat(cases["tapegpu"]())]
    for name, fn in cases.items():
        for a, b in zip(_flat(fn()), want):
            np.testing.assert_allclose(np.asarray(a), b, rtol=tol[0], atol=tol[1],
                                       err_msg=name)


def _flat(x):
    from benchmarks.workloads import to_numpy
    return to_numpy(x)


def eager_peers(repeats):
    """The issue-33 rows: each ratio to PyTorch eager in the same rounds (to tapegpu where
    PyTorch is missing); CPU time over wall time per case."""
    from benchmarks.timing import cpu_over_wall
    results = {}
    for title, (cases, tol) in eager_peer_suites().items():
        _check_same(cases, tol)
        base = "pytorch" if "pytorch" in cases else "tapegpu"
        r = compare(cases, base, repeats=repeats)
        for n, fn in cases.items():
            r[n]["cpu_over_wall"] = cpu_over_wall(fn, 0.2)
        print(table(title, r, base))
        print("  cpu/wall: " + ", ".join(f"{n} {r[n]['cpu_over_wall']:.2f}" for n in r))
        results[title] = r
    return results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--eager-peers", action="store_true",
                   help="issue 33's rows only: W1, W2, W4, W5, W6 against PyTorch eager")
    args = p.parse_args(argv)
    results = {}
    print(f"tapegpu {tg.__version__}, numpy {np.__version__}"
          f"{', torch ' + torch.__version__ if torch is not None else ''}; one thread")
    if args.eager_peers:
        results = eager_peers(args.repeats)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
        return results
    r = compare(overhead_cases(), "numpy by hand", repeats=args.repeats)
    print(table("W1 eager overhead: 100 x (sin, *, +) on (16,), forward + backward", r,
                "numpy by hand"))
    results["overhead"] = r
    r = compare(jacobian_cases(), "tapegpu jacobian", repeats=args.repeats)
    print(table("W3 jacobian of a 256-512-512-64 tanh MLP w.r.t. its (1, 256) input", r,
                "tapegpu jacobian"))
    results["jacobian"] = r
    r = compare(training_cases(), "numpy 8 matmuls (floor)", repeats=args.repeats)
    print(table("W2 training step 784-1024-1024-10 ReLU, batch 256, softmax cross-entropy", r,
                "numpy 8 matmuls (floor)"))
    results["training"] = r
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
