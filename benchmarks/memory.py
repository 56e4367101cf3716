"""Issue-6 figures: peak memory of one forward + backward of a 16-layer 1024-wide ReLU MLP,
batch 512, float32, on a non-persistent tape; and the same under a memory budget; and the step
under `@tg.function` (W7 traced: the replay of the traced step, its plan's buffers included).

    python -m benchmarks.memory

Each measurement runs in a fresh process, after a warm-up on one layer. Peak is measured two
ways: tracemalloc (numpy reports its buffers) and the peak RSS increase (VmHWM, reset through
/proc/self/clear_refs before the step). The liveness minimum is the parameters' gradients
(16 x 4 MiB) plus one activation (2 MiB): 66 MiB.
"""
import json
import subprocess
import sys

MiB = 2 ** 20
LIVENESS_MIN = 16 * 4 * MiB + 2 * MiB

CHILD = r'''
import os, sys, json, time, tracemalloc
os.environ["OPENBLAS_NUM_THREADS"] = "1"
import numpy as np
import tapegpu as tg

mode, budget_frac = sys.argv[1], float(sys.argv[2])
rng = np.random.default_rng(0)
ws = [tg.Variable((rng.standard_normal((1024, 1024)) / 32).astype(np.float32)) for _ in range(16)]
bs = [tg.Variable(np.zeros(1024, np.float32)) for _ in range(16)]
x = tg.constant(rng.standard_normal((512, 1024)).astype(np.float32))

def step(n_layers=16, budget=None):
    with tg.GradientTape(memory_budget=budget) as tape:
        h = x
        for w, b in zip(ws[:n_layers], bs[:n_layers]):
            h = tg.nn.relu(tg.matmul(h, w) + b)
        loss = tg.reduce_sum(h)
    grads = tape.gradient(loss, ws[:n_layers] + bs[:n_layers])
    return grads, tape

def rss():
    fields = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024

step(1)  # warm-up on one layer
if mode.startswith("traced"):
    traced = tg.function(lambda: step()[0])
    traced()  # the trace (an eager run); the measured call is the first replay, which also
    mode = mode[len("traced_"):]  # allocates the plan's buffers
    step = lambda budget=None: (traced(), None)
budget = None
if budget_frac:
    budget = int(budget_frac * 16 * 2 * 2**20)  # a fraction of the 32 MiB of activations
out = {}
if mode == "rss":
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak RSS to the current RSS
    base, _ = rss()
    grads, tape = step(budget=budget)
    _, peak = rss()
    out["peak_bytes"] = peak - base
elif mode == "tracemalloc":
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    grads, tape = step(budget=budget)
    out["peak_bytes"] = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
elif mode == "grads":
    grads, tape = step(budget=budget)
    np.savez(sys.argv[3], *[g.numpy() for g in grads])
if budget is not None:
    st = tape.stats()
    out.update(budget=budget, peak_kept_bytes=st["peak_kept_bytes"], segments=st["segments"])
print(json.dumps(out))
'''


def child(mode, budget_frac=0.0, *extra):
    r = subprocess.run([sys.executable, "-c", CHILD, mode, str(budget_frac), *extra],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def timing(budget_frac=0.25, repeats=9):
    """Time of a step with the budget over the time without, interleaved, one thread."""
    from benchmarks.timing import pin_one_thread
    pin_one_thread()
    code = CHILD.split("step(1)  # warm-up")[0] + r'''
from benchmarks.timing import compare
step(1)
budget = int(%r * 16 * 2 * 2**20)
r = compare({"plain": lambda: step(), "budget": lambda: step(budget=budget)}, "plain",
            repeats=%d, target=0.0)
print(json.dumps({k: v["ratio"] for k, v in r.items()}))
''' % (budget_frac, repeats)
    r = subprocess.run([sys.executable, "-c", code, "x", "0"], capture_output=True, text=True,
                       check=True, env={**__import__("os").environ,
                                        "PYTHONPATH": __import__("os").getcwd()})
    return json.loads(r.stdout.strip().splitlines()[-1])["budget"]


def main():
    import os
    import tempfile
    import numpy as np
    res = {}
    for mode in ("tracemalloc", "rss", "traced_tracemalloc", "traced_rss"):
        res[mode] = child(mode)["peak_bytes"]
        print(f"peak ({mode}): {res[mode] / MiB:.1f} MiB = "
              f"{res[mode] / LIVENESS_MIN:.3f} x the liveness minimum ({LIVENESS_MIN / MiB:.0f})")
    b = child("tracemalloc", 0.25)
    print(f"budget 25% ({b['budget'] / MiB:.1f} MiB): peak kept {b['peak_kept_bytes'] / MiB:.2f}"
          f" MiB in {b['segments']} segments; backward peak {b['peak_bytes'] / MiB:.1f} MiB")
    with tempfile.TemporaryDirectory() as d:
        child("grads", 0.0, os.path.join(d, "a.npz"))
        child("grads", 0.25, os.path.join(d, "b.npz"))
        a, bb = np.load(os.path.join(d, "a.npz")), np.load(os.path.join(d, "b.npz"))
        identical = all(np.array_equal(a[k], bb[k]) for k in a.files)
    print(f"gradients bit-identical with and without the budget: {identical}")
    ratio = timing()
    print(f"time with the budget / without (one thread, interleaved): {ratio:.3f}")
    res.update(budget=b, identical=identical, time_ratio=ratio)
    return res


if __name__ == "__main__":
    main()
