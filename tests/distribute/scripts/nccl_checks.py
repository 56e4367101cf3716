"""Run by tests/distribute/test_nccl.py under `mpiexec -n N python nccl_checks.py`: the NCCL
route of tg.distribute on the simulated GPU (tests/support/cupy_sim installed as CuPy, its
cupy.cuda.nccl over MPI).

Every rank asserts; the test reads one "ok <check>" line per check from every rank, and the
"measured" lines (syncs, copies and NCCL calls per step, the largest gradient error).
"""
import hashlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "support"))
import cupy_sim  # noqa: E402

cupy_sim.install()  # before tapegpu looks for CuPy

import numpy as np  # noqa: E402

import tapegpu as tg  # noqa: E402

# float32 products in full float32 (the suite's setting, as TensorFlow's own tests): the
# comparisons with one process below are at float32's tolerances
tg.config.experimental.enable_tensor_float_32_execution(False)
from tapegpu.autodiff import sweep  # noqa: E402
from tapegpu.distribute import nccl, runtime  # noqa: E402

D = tg.distribute
D.init(timeout=60)
R, P = D.rank(), D.size()
ROWS = 8  # per rank
RTOL, ATOL = 1e-5, 1e-7
stats = cupy_sim.stats


def ok(name):
    print(f"ok {name} rank={R}", flush=True)


def mlp(seed):
    """An MLP 6-16-12-3 on the current device, its variables drawn from `seed`."""
    model = tg.layers.Sequential([tg.layers.Dense(16, activation="relu"),
                                  tg.layers.Dense(12, activation="tanh"),
                                  tg.layers.Dense(3)])
    model(tg.zeros((1, 6)))
    rng = np.random.default_rng(seed)
    for v in model.trainable_variables:
        v.assign(rng.normal(0, 0.5, v.shape).astype(np.float32))
    return model


def loss_fn(model, x, y):
    logits = model(x)
    return tg.reduce_mean(tg.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))


def digest(values):
    h = hashlib.sha256()
    for v in values:
        h.update(np.ascontiguousarray(v.numpy()).tobytes())
    return h.hexdigest()


def same_everywhere(values):
    return len(set(D.allgather_object(digest(values)))) == 1


def counts():
    """(host syncs, device<->host copies, NCCL calls by name) since the last stats.reset()."""
    calls = {}
    for (name, _), n in stats.nccl.items():
        calls[name] = calls.get(name, 0) + n
    return sum(stats.syncs.values()), sum(stats.transfers.values()), calls


# -- one GPU per rank, chosen by init ----------------------------------------------------------
assert runtime._state.device is not None and runtime._state.device.short == "gpu:0"
assert tg.zeros((1,)).device.endswith("GPU:0"), tg.zeros((1,)).device
ok("device")

data = np.random.default_rng(123)
X = data.normal(size=(ROWS * P, 6)).astype(np.float32)  # the whole batch, the same on all ranks
Y = data.integers(0, 3, size=ROWS * P).astype(np.int32)
x_all, y_all = tg.constant(X), tg.constant(Y)
x, y = D.shard(x_all, P, R), D.shard(y_all, P, R)

# -- broadcast_variables by NCCL ------------------------------------------------------------
model = mlp(seed=R)
stats.reset()
D.broadcast_variables(model.variables, root_rank=0)
syncs, copies, calls = counts()
assert calls == {"bcast": 1} and syncs == 0 and copies == 0, (calls, syncs, copies)
assert same_everywhere(model.trainable_variables)
assert digest(model.trainable_variables) == D.broadcast_object(
    digest(mlp(seed=0).trainable_variables))
ok("broadcast_variables")

# -- gradients == one process's on the whole batch ------------------------------------------
reference = mlp(seed=0)
with tg.GradientTape() as tape:
    loss = loss_fn(reference, x_all, y_all)
want = [g.numpy() for g in tape.gradient(loss, reference.trainable_variables)]
worst = 0.0
for label, kwargs, buckets in [("default", {}, 1), ("buckets", {"bucket_bytes": 300}, 4),
                               ("one_per_bucket", {"bucket_bytes": 1}, 6),
                               ("no_overlap", {"overlap": False, "bucket_bytes": 300}, 4)]:
    with tg.GradientTape() as tape:
        loss = loss_fn(model, x, y)
    stats.reset()
    grads = D.DistributedGradientTape(tape, **kwargs).gradient(loss, model.trainable_variables)
    syncs, copies, calls = counts()
    assert syncs == 0 and copies == 0 and calls == {"allReduce": buckets}, \
        (label, syncs, copies, calls)
    for g, w, v in zip(grads, want, model.trainable_variables):
        assert g.device == v.device, (g.device, v.device)
        np.testing.assert_allclose(g.numpy(), w, rtol=RTOL, atol=ATOL, err_msg=label)
        worst = max(worst, float(np.max(np.abs(g.numpy() - w) / (np.abs(w) + ATOL / RTOL))))
    assert same_everywhere(grads), label
    ok(f"gradients_{label}")
print(f"measured rank={R} gradient_rtol_max={worst:.3g}", flush=True)

# each bucket's allreduce starts on the side stream while the sweep goes on; the current
# stream (where the optimizer runs) waits for each bucket's event
events = []
backward, start = sweep.backward, nccl.DeviceReduction.start
sweep.backward = lambda *a, **k: events.append("sweep") or backward(*a, **k)
nccl.DeviceReduction.start = lambda self: events.append("allreduce") or start(self)
try:
    with tg.GradientTape() as tape:
        loss = loss_fn(model, x, y)
    null = cupy_sim.build()["cupy"].cuda.get_current_stream()
    null.waited.clear()
    stats.reset()
    D.DistributedGradientTape(tape, bucket_bytes=1).gradient(loss, model.trainable_variables)
finally:
    sweep.backward, nccl.DeviceReduction.start = backward, start
assert events.count("allreduce") == 6 and events[-1] == "allreduce", events
assert events.index("allreduce") < len(events) - 1 - events[::-1].index("sweep"), events
side = runtime._state.link.stream
assert side is not null and side.non_blocking
sites = [site for (name, site) in stats.nccl if name == "allReduce"]
assert all("tapegpu/distribute/nccl.py" in s for s in sites), sites
waited = [e for e in null.waited if e.stream is side]
assert len(waited) == 6, len(waited)  # one event per bucket, on the side stream
ok("overlap_on_a_side_stream")

# a reader that skipped the current stream's wait for the bucket's event reads NaN (the
# stand-in's receive buffers hold 0xFF bytes until the collective lands)
stream_type = type(null)
wait_event = stream_type.wait_event
stream_type.wait_event = lambda self, event: self.waited.append(event)
try:
    with tg.GradientTape() as tape:
        loss = loss_fn(model, x, y)
    early = D.DistributedGradientTape(tape).gradient(loss, model.trainable_variables)
    assert all(np.isnan(g.numpy()).all() for g in early)
finally:
    stream_type.wait_event = wait_event
runtime._state.link.stream.synchronize()  # the skipped collectives land
ok("results_need_the_event")

# -- the host-staged route (TAPEGPU_DISTRIBUTE_NCCL=0): copies and syncs every step ----------
os.environ["TAPEGPU_DISTRIBUTE_NCCL"] = "0"
try:
    with tg.GradientTape() as tape:
        loss = loss_fn(model, x, y)
    stats.reset()
    staged = D.DistributedGradientTape(tape, bucket_bytes=512).gradient(
        loss, model.trainable_variables)
    h_syncs, h_copies, h_calls = counts()
finally:
    del os.environ["TAPEGPU_DISTRIBUTE_NCCL"]
# each of the 6 gradients to the host (a sync each) and back
assert h_calls == {} and h_copies >= 12 and h_syncs >= 6, (h_syncs, h_copies, h_calls)
for g, w in zip(staged, want):
    np.testing.assert_allclose(g.numpy(), w, rtol=RTOL, atol=ATOL)
print(f"measured rank={R} host_staged syncs={h_syncs} copies={h_copies}", flush=True)
ok("host_staged_route")

# -- compression on the device ---------------------------------------------------------------
with tg.GradientTape(persistent=True) as tape:
    loss = loss_fn(model, x, y)
for label, comp, rtol, atol in [("fp16", D.Compression.fp16, 2e-2, 2e-3),
                                ("bf16", D.Compression.bf16, 4e-2, 4e-3)]:
    stats.reset()
    got = D.DistributedGradientTape(tape, compression=comp).gradient(
        loss, model.trainable_variables)
    syncs, copies, calls = counts()
    assert syncs == 0 and copies == 0 and calls == {"allReduce": 1}, (label, syncs, calls)
    for g, w in zip(got, want):
        assert g.dtype == tg.float32
        np.testing.assert_allclose(g.numpy(), w, rtol=rtol, atol=atol, err_msg=label)
    assert same_everywhere(got), label
summed = D.DistributedGradientTape(tape, op=D.Sum).gradient(loss, model.trainable_variables)
for s, w in zip(summed, want):
    np.testing.assert_allclose(s.numpy(), P * w, rtol=RTOL, atol=ATOL * P)
ok("compression_on_the_device")

# -- None, a watched tensor, a CPU variable beside GPU ones ----------------------------------
unused = tg.Variable(tg.ones((2,)), name="unused")
with tg.device("cpu"):
    host_var = tg.Variable(np.ones(3, np.float32), name="on_cpu")
with tg.GradientTape() as tape:
    tape.watch(x)
    out = model(x)
og = tg.ones_like(out) * float(R + 1)
gx, gu, gk = D.DistributedGradientTape(tape, bucket_bytes=64).gradient(
    out, [x, unused, model.trainable_variables[0]], output_gradients=og)
assert gu is None and gx.shape == x.shape and gk.device.endswith("GPU:0")
with tg.GradientTape() as tape:  # a CPU tensor travels over MPI
    loss_cpu = tg.reduce_sum(host_var * float(R + 1))
stats.reset()
g_host, = D.DistributedGradientTape(tape).gradient(loss_cpu, [host_var])
assert g_host.device.endswith("CPU:0") and counts()[2] == {}
np.testing.assert_allclose(g_host.numpy(), np.full(3, (P + 1) / 2))
ok("sources_and_unconnected")

# -- training: 10 steps, per step 0 syncs and 0 copies, bit-identical, equal to one process ---
def train(model, opt, steps, distributed, use_optimizer=False, watch=False):
    per_step = []
    for _ in range(steps):
        stats.reset()
        with tg.GradientTape() as tape:
            loss = loss_fn(model, x if distributed else x_all, y if distributed else y_all)
        if distributed and not use_optimizer:
            tape = D.DistributedGradientTape(tape, bucket_bytes=512)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        per_step.append(counts())
    return per_step


single = mlp(seed=0)
train(single, tg.optimizers.SGD(0.1, momentum=0.9), 1, distributed=False)  # warm-up (slots)
single = mlp(seed=0)
train(single, tg.optimizers.SGD(0.1, momentum=0.9), 10, distributed=False)
trained = mlp(seed=R + 11)
D.broadcast_variables(trained.variables)
trained_start = digest(trained.trainable_variables)
assert trained_start == D.broadcast_object(digest(mlp(seed=11).trainable_variables))
for v, w in zip(trained.trainable_variables, mlp(seed=0).trainable_variables):
    v.assign(w)  # the reference's start
per_step = train(trained, tg.optimizers.SGD(0.1, momentum=0.9), 10, distributed=True)
steady = per_step[1:]  # step 0 makes the optimizer's slots
assert all(s == 0 and c == 0 for s, c, _ in steady), per_step
assert all(calls == {"allReduce": 3} for _, _, calls in steady), per_step  # 512-byte buckets
print(f"measured rank={R} steps=10 syncs_per_step={[s for s, _, _ in per_step]} "
      f"copies_per_step={[c for _, c, _ in per_step]} "
      f"allreduce_per_step={[calls.get('allReduce', 0) for _, _, calls in per_step]}",
      flush=True)
assert same_everywhere(trained.trainable_variables)
for a, b in zip(trained.trainable_variables, single.trainable_variables):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=RTOL, atol=1e-6)
ok("training_tape")

other = mlp(seed=0)
opt = D.DistributedOptimizer(tg.optimizers.SGD(0.1, momentum=0.9), bucket_bytes=512)
per_step = train(other, opt, 10, distributed=True, use_optimizer=True)
assert all(s == 0 and c == 0 for s, c, _ in per_step[1:]), per_step
assert same_everywhere(other.trainable_variables)
for a, b in zip(other.trainable_variables, single.trainable_variables):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=RTOL, atol=1e-6)
ok("training_optimizer")

# -- collectives on device tensors -----------------------------------------------------------
t = tg.constant(np.arange(6, dtype=np.float32).reshape(2, 3) + R)
ints, rows = tg.constant([R, 1], dtype=tg.int64), tg.fill((R + 1, 2), float(R))
pair = tg.constant([float(R), 1.0])
stats.reset()
results = [D.allreduce(t), D.allreduce(t, op=D.Sum), D.allreduce(t, op=D.Min),
           D.allreduce(t, op=D.Max), D.allreduce(ints, op=D.Sum), D.allgather(rows),
           D.broadcast(pair, root_rank=P - 1)]
syncs, copies, calls = counts()
assert syncs == 0 and copies == 0, (syncs, copies)
assert calls == {"allReduce": 5, "allGather": 1, "bcast": 1}, calls
assert all(r.device.endswith("GPU:0") for r in results)
base = np.arange(6).reshape(2, 3)
np.testing.assert_array_equal(results[0].numpy(), base + (P - 1) / 2)
np.testing.assert_array_equal(results[1].numpy(), P * base + P * (P - 1) / 2)
np.testing.assert_array_equal(results[2].numpy(), base)
np.testing.assert_array_equal(results[3].numpy(), base + P - 1)
assert results[4].dtype == tg.int64 and results[4].numpy().tolist() == [P * (P - 1) // 2, P]
g = results[5]
assert g.shape == (P * (P + 1) // 2, 2)
assert g.numpy()[:, 0].tolist() == [float(r) for r in range(P) for _ in range(r + 1)]
assert results[6].numpy().tolist() == [float(P - 1), 1.0]
ok("collectives")

print(f"done rank={R}", flush=True)
