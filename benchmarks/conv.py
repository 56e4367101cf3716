"""Convolution figures: a conv-net training step and conv2d forward + backward alone.

    python -m benchmarks.conv          (one thread, pinned; --json FILE)

The net: conv 3x3 32 (relu) -> max_pool 2 -> conv 3x3 64 (relu) -> max_pool 2 -> dense 10 with
softmax cross-entropy, batch 64 of 28x28x1, float32: forward and the gradient of every weight,
with VALID convolutions and with SAME ones (as TensorFlow programs and Keras' padding="same"
write them: W8 of issue 33; the conv2d alone on 14x14 SAME is W8b). Each tapegpu case is
timed against a numpy floor written by hand (the same im2col matmuls, pooling masks and col2im
adds, without a tape), interleaved round by round (benchmarks/timing.py); against PyTorch too
where it is installed. Wall times are medians over
rounds; CPU times (process time) are measured after, over the same number of calls.
"""
from benchmarks.timing import pin_one_thread

pin_one_thread()

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402

import tapegpu as tg  # noqa: E402
from benchmarks.timing import compare  # noqa: E402

try:  # optional: the reference framework
    import torch  # noqa: E402
except ImportError:  # pragma: no cover
    torch = None


# -- the numpy floor ---------------------------------------------------------------------------

def _cols(x, k):
    """(N, H, W, C) -> (N * Ho * Wo, C * k * k) im2col (VALID, stride 1)."""
    win = sliding_window_view(x, (k, k), axis=(1, 2))  # (N, Ho, Wo, C, k, k)
    return win.reshape(-1, win.shape[3] * k * k), win.shape[:3]


def _col2im(dcols, shape, k):
    n, h, w, c = shape
    ho, wo = h - k + 1, w - k + 1
    d = dcols.reshape(n, ho, wo, c, k, k)
    dx = np.zeros(shape, dcols.dtype)
    for i in range(k):
        for j in range(k):
            dx[:, i:i + ho, j:j + wo] += d[..., i, j]
    return dx


def _wmat(w):
    """(k, k, cin, cout) -> (cin * k * k, cout), rows in im2col's order."""
    return w.transpose(2, 0, 1, 3).reshape(-1, w.shape[-1])


def _same(x, k, same):
    """x zero-padded for a stride-1 SAME convolution with a k x k filter (or x)."""
    if not same:
        return x
    lo = (k - 1) // 2
    return np.pad(x, ((0, 0), (lo, k - 1 - lo), (lo, k - 1 - lo), (0, 0)))


def _conv_np(x, w, same=False):
    cols, lead = _cols(_same(x, w.shape[0], same), w.shape[0])
    return (cols @ _wmat(w)).reshape(lead + (w.shape[-1],)), cols


def _conv_np_backward(g, cols, x_shape, w, need_x=True, same=False):
    k, cout = w.shape[0], w.shape[-1]
    gm = g.reshape(-1, cout)
    dw = (cols.T @ gm).reshape(w.shape[2], k, k, cout).transpose(1, 2, 0, 3)
    dx = None
    if need_x:
        n, h, wd, c = x_shape
        lo = (k - 1) // 2 if same else 0
        pad = k - 1 if same else 0
        dx = _col2im(gm @ _wmat(w).T, (n, h + pad, wd + pad, c), k)[:, lo:lo + h, lo:lo + wd]
    return dx, dw


def _pool_np(x):
    n, h, w, c = x.shape
    v = x[:, :h // 2 * 2, :w // 2 * 2].reshape(n, h // 2, 2, w // 2, 2, c)
    y = v.max(axis=(2, 4))
    return y, v == y[:, :, None, :, None]


def _pool_np_backward(g, mask, shape):
    dx = np.zeros(shape, g.dtype)
    n, h, w, c = shape
    dx[:, :h // 2 * 2, :w // 2 * 2] = (mask * g[:, :, None, :, None]).reshape(
        n, h // 2 * 2, w // 2 * 2, c)
    return dx


def numpy_step(x, labels, w1, w2, w3, same=False):
    """The net's loss and weight gradients, by hand."""
    a1, c1 = _conv_np(x, w1, same)
    r1 = np.maximum(a1, 0)
    p1, m1 = _pool_np(r1)
    a2, c2 = _conv_np(p1, w2, same)
    r2 = np.maximum(a2, 0)
    p2, m2 = _pool_np(r2)
    flat = p2.reshape(len(x), -1)
    z = flat @ w3
    z = z - z.max(1, keepdims=True)
    e = np.exp(z)
    prob = e / e.sum(1, keepdims=True)
    loss = -np.log(prob[np.arange(len(x)), labels]).mean()
    dz = prob
    dz[np.arange(len(x)), labels] -= 1
    dz /= len(x)
    d3 = flat.T @ dz
    dp2 = (dz @ w3.T).reshape(p2.shape)
    da2 = _pool_np_backward(dp2, m2, r2.shape) * (a2 > 0)
    dp1, d2 = _conv_np_backward(da2, c2, p1.shape, w2, same=same)
    da1 = _pool_np_backward(dp1, m1, r1.shape) * (a1 > 0)
    _, d1 = _conv_np_backward(da1, c1, x.shape, w1, need_x=False, same=same)
    return loss, (d1, d2, d3)


# -- the cases -------------------------------------------------------------------------------------

def net_cases(batch=64, padding="VALID"):
    """The net's step: numpy floor, tapegpu (eager), PyTorch; `padding` "VALID" or "SAME"
    (pooling's too: 2x2 windows of stride 2 on even sizes pad nothing either way)."""
    same = padding == "SAME"
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (batch, 28, 28, 1)).astype(np.float32)
    labels = rng.integers(0, 10, batch).astype(np.int32)
    ws = [(rng.standard_normal(s) * np.sqrt(2 / np.prod(s[:-1]))).astype(np.float32)
          for s in ((3, 3, 1, 32), (3, 3, 32, 64), (3136 if same else 1600, 10))]
    xt, yt = tg.constant(x), tg.constant(labels)
    vs = [tg.Variable(w) for w in ws]

    def tapegpu_step():
        with tg.GradientTape() as tape:
            h = tg.nn.max_pool2d(tg.nn.relu(tg.nn.conv2d(xt, vs[0], 1, padding)), 2, 2, padding)
            h = tg.nn.max_pool2d(tg.nn.relu(tg.nn.conv2d(h, vs[1], 1, padding)), 2, 2, padding)
            logits = tg.matmul(tg.reshape(h, (batch, -1)), vs[2])
            loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(yt, logits))
        return tape.gradient(loss, vs)

    def floor_step():
        return numpy_step(x, labels, *ws, same=same)

    cases = {"numpy floor (hand im2col)": floor_step, "tapegpu conv net step": tapegpu_step}
    if torch is not None:  # pragma: no cover
        tx = torch.from_numpy(x.transpose(0, 3, 1, 2).copy())
        ty = torch.from_numpy(labels.astype(np.int64))
        tw = [torch.tensor(ws[0].transpose(3, 2, 0, 1).copy(), requires_grad=True),
              torch.tensor(ws[1].transpose(3, 2, 0, 1).copy(), requires_grad=True),
              torch.tensor(ws[2], requires_grad=True)]
        F = torch.nn.functional

        pad = 1 if same else 0

        def torch_step():
            h = F.max_pool2d(F.relu(F.conv2d(tx, tw[0], padding=pad)), 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, tw[1], padding=pad)), 2)
            h = h.permute(0, 2, 3, 1).reshape(batch, -1)
            return torch.autograd.grad(F.cross_entropy(h @ tw[2], ty), tw)
        cases["pytorch conv net step"] = torch_step
    return cases, (x, labels, ws, tapegpu_step, same)


def conv2d_cases(batch=64, padding="VALID"):
    """conv2d 3x3, 32 -> 64 channels (the net's second layer: on 13x13 VALID, on 14x14 SAME):
    forward, and the gradients of input and filter."""
    same = padding == "SAME"
    size = 14 if same else 13
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, size, size, 32)).astype(np.float32)
    w = (rng.standard_normal((3, 3, 32, 64)) * 0.06).astype(np.float32)
    out = 14 if same else 11
    g = rng.standard_normal((batch, out, out, 64)).astype(np.float32)
    xt, wt, gt = tg.constant(x), tg.constant(w), tg.constant(g)

    def tapegpu_conv():
        with tg.GradientTape() as tape:
            tape.watch([xt, wt])
            y = tg.nn.conv2d(xt, wt, 1, padding)
        return tape.gradient(y, [xt, wt], output_gradients=gt)

    def floor_conv():
        y, cols = _conv_np(x, w, same)
        return _conv_np_backward(g, cols, x.shape, w, same=same)

    cases = {"numpy floor (hand im2col)": floor_conv, "tapegpu conv2d fwd+bwd": tapegpu_conv}
    if torch is not None:  # pragma: no cover
        tx = torch.tensor(x.transpose(0, 3, 1, 2).copy(), requires_grad=True)
        tw = torch.tensor(w.transpose(3, 2, 0, 1).copy(), requires_grad=True)
        tg_ = torch.from_numpy(g.transpose(0, 3, 1, 2).copy())

        def torch_conv():
            y = torch.nn.functional.conv2d(tx, tw, padding=1 if same else 0)
            return torch.autograd.grad(y, [tx, tw], tg_)
        cases["pytorch conv2d fwd+bwd"] = torch_conv
    return cases, (x, w, g, tapegpu_conv, floor_conv)


def _check(net, conv):
    """tapegpu computes what the floor computes (so that the ratio compares like with like).
    The net's gradients are compared in norm: a max-pool window whose two largest values are
    within rounding of each other may pick either (float32 vs float64 flips 3 of the 102400
    windows of the second pooling), which sends that term of the gradient elsewhere."""
    x, labels, ws, step, same = net
    for a, b in zip(step(), numpy_step(x, labels, *ws, same=same)[1]):
        assert np.linalg.norm(a.numpy() - b) <= 1e-2 * np.linalg.norm(b), "net gradients differ"
    *_, tape_conv, floor_conv = conv
    for a, b in zip(tape_conv(), floor_conv()):
        np.testing.assert_allclose(a.numpy(), b, rtol=2e-3, atol=2e-4)


def _cpu_ms(fn, calls):
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - wall) / calls * 1e3, (time.process_time() - cpu) / calls * 1e3


def run(repeats=9, paddings=("VALID", "SAME")):
    baseline = "pytorch" if torch is not None else "numpy floor"
    out = {}
    suites = []
    for padding in paddings:
        net, net_data = net_cases(padding=padding)
        conv, conv_data = conv2d_cases(padding=padding)
        _check(net_data, conv_data)
        size = "14x14" if padding == "SAME" else "13x13"
        suites += [(f"conv net step, {padding} (batch 64, 28x28x1, float32)", net),
                   (f"conv2d 3x3 32->64 on 64x{size}, {padding}, forward + backward", conv)]
    for title, cases in suites:
        base = next(n for n in cases if n.startswith(baseline))
        res = compare(cases, base, repeats=repeats)
        for n, r in res.items():
            r["wall_ms_after"], r["cpu_ms"] = _cpu_ms(cases[n], max(3, r["inner"]))
        out[title] = {"baseline": base, "results": res}
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--json", help="write the figures to this file")
    p.add_argument("--padding", nargs="*", choices=("VALID", "SAME"), default=["VALID", "SAME"])
    args = p.parse_args(argv)
    out = run(args.repeats, tuple(args.padding))
    for title, block in out.items():
        print(f"\n{title}")
        print(f"  {'case':<30} {'median wall ms':>15} {'CPU ms':>8} "
              f"{'ratio to ' + block['baseline']:>36}")
        for n, r in block["results"].items():
            print(f"  {n:<30} {r['median_s'] * 1e3:>15.2f} {r['cpu_ms']:>8.2f} "
                  f"{r['ratio']:>36.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
