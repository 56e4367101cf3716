"""Run by tests/distribute/test_distribute.py under `mpiexec -n N python checks.py DEVICE`.

Every rank asserts; the test reads one "ok <check>" line per check from every rank.
"""
import hashlib
import sys

import numpy as np

import tapegpu as tg
from tapegpu.autodiff import sweep
from tapegpu.distribute import gradients

D = tg.distribute
DEVICE = sys.argv[1] if len(sys.argv) > 1 else "cpu"
D.init(timeout=60)
R, P = D.rank(), D.size()
ROWS = 8  # per rank
RTOL, ATOL = 1e-5, 1e-7


def ok(name):
    print(f"ok {name} rank={R}", flush=True)


def mlp(seed):
    """An MLP 6-16-12-3 whose variables are drawn from `seed` (ranks differ until broadcast)."""
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


def digest(variables):
    h = hashlib.sha256()
    for v in variables:
        h.update(np.ascontiguousarray(v.numpy()).tobytes())
    return h.hexdigest()


def same_everywhere(variables):
    return len(set(D.allgather_object(digest(variables)))) == 1


data = np.random.default_rng(123)
X = data.normal(size=(ROWS * P, 6)).astype(np.float32)  # the whole batch, the same on all ranks
Y = data.integers(0, 3, size=ROWS * P).astype(np.int32)

with tg.device(DEVICE):
    x_all, y_all = tg.constant(X), tg.constant(Y)
    x, y = D.shard(x_all, P, R), D.shard(y_all, P, R)
    assert x.shape == (ROWS, 6) and x.device == x_all.device

    # -- broadcast_variables: rank 0's initial values become everyone's ------------------------
    model = mlp(seed=R)
    zero_digest = D.broadcast_object(digest(model.trainable_variables), root_rank=0)
    if P > 1:
        assert not same_everywhere(model.trainable_variables)
    D.broadcast_variables(model.variables, root_rank=0)
    assert digest(model.trainable_variables) == zero_digest
    assert same_everywhere(model.trainable_variables)
    ok("broadcast_variables")

    # -- averaged gradients == the single-process gradients of the whole batch ----------------
    reference = mlp(seed=0)
    with tg.GradientTape() as tape:
        loss = loss_fn(reference, x_all, y_all)
    want = [g.numpy() for g in tape.gradient(loss, reference.trainable_variables)]
    for label, kwargs in [("default", {}), ("buckets", {"bucket_bytes": 300}),
                          ("one_per_bucket", {"bucket_bytes": 1}),
                          ("no_overlap", {"overlap": False, "bucket_bytes": 300})]:
        with tg.GradientTape() as tape:
            loss = loss_fn(model, x, y)
        dtape = D.DistributedGradientTape(tape, **kwargs)
        grads = dtape.gradient(loss, model.trainable_variables)
        for g, w, v in zip(grads, want, model.trainable_variables):
            assert g.device == v.device, (g.device, v.device)
            np.testing.assert_allclose(g.numpy(), w, rtol=RTOL, atol=ATOL, err_msg=label)
        assert same_everywhere(grads), label
        ok(f"gradients_{label}")

    # with small buckets, reductions start between pieces of the backward sweep
    events = []
    backward, start = sweep.backward, gradients._Exchange._start
    sweep.backward = lambda *a, **k: events.append("sweep") or backward(*a, **k)
    gradients._Exchange._start = lambda self, *a: events.append("start") or start(self, *a)
    try:
        with tg.GradientTape() as tape:
            loss = loss_fn(model, x, y)
        D.DistributedGradientTape(tape, bucket_bytes=1).gradient(loss, model.trainable_variables)
    finally:
        sweep.backward, gradients._Exchange._start = backward, start
    assert events.count("start") == 6 and events[-1] == "start", events
    assert events.index("start") < len(events) - 1 - events[::-1].index("sweep"), events
    ok("overlap_starts_buckets_during_the_sweep")

    # Sum: P times the average; fp16: close to it
    with tg.GradientTape(persistent=True) as tape:
        loss = loss_fn(model, x, y)
    summed = D.DistributedGradientTape(tape, op=D.Sum).gradient(loss, model.trainable_variables)
    half = D.DistributedGradientTape(tape, compression=D.Compression.fp16).gradient(
        loss, model.trainable_variables)
    for s, h, w in zip(summed, half, want):
        np.testing.assert_allclose(s.numpy(), P * w, rtol=RTOL, atol=ATOL * P)
        assert h.dtype == tg.float32
        np.testing.assert_allclose(h.numpy(), w, rtol=2e-2, atol=2e-3)
    ok("sum_and_fp16")

    # a watched tensor as a source, a variable the loss does not use, output_gradients
    unused = tg.Variable(tg.ones((2,)), name="unused")
    with tg.GradientTape() as tape:
        tape.watch(x)
        out = model(x)
    og = tg.ones_like(out) * float(R + 1)
    gx, gu, gk = D.DistributedGradientTape(tape, bucket_bytes=64).gradient(
        out, [x, unused, model.trainable_variables[0]], output_gradients=og)
    assert gu is None and gx.shape == x.shape
    ok("sources_and_unconnected")

    # -- training: bit-identical ranks, equal to one process on the whole batch ---------------
    def train(model, opt, steps, distributed, use_optimizer=False):
        for _ in range(steps):
            with tg.GradientTape() as tape:
                loss = loss_fn(model, x if distributed else x_all, y if distributed else y_all)
            if distributed and not use_optimizer:
                tape = D.DistributedGradientTape(tape, bucket_bytes=512)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))

    single = mlp(seed=0)
    train(single, tg.optimizers.SGD(0.1, momentum=0.9), 5, distributed=False)
    train(model, tg.optimizers.SGD(0.1, momentum=0.9), 5, distributed=True)
    assert same_everywhere(model.trainable_variables)
    for a, b in zip(model.trainable_variables, single.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=RTOL, atol=1e-6)
    ok("training_tape")

    other = mlp(seed=R + 7)
    D.broadcast_variables(other.variables)
    opt = D.DistributedOptimizer(tg.optimizers.SGD(0.1, momentum=0.9))
    train(other, opt, 5, distributed=True, use_optimizer=True)
    assert same_everywhere(other.trainable_variables)
    assert int(opt.iterations) == 5  # the wrapped optimizer's attributes
    ok("training_optimizer")

    # -- collectives on tensors and objects --------------------------------------------------
    t = tg.constant(np.arange(6, dtype=np.float32).reshape(2, 3) + R)
    np.testing.assert_array_equal(D.allreduce(t).numpy(),
                                  np.arange(6).reshape(2, 3) + (P - 1) / 2)
    np.testing.assert_array_equal(D.allreduce(t, op=D.Sum).numpy(),
                                  P * np.arange(6).reshape(2, 3) + P * (P - 1) / 2)
    np.testing.assert_array_equal(D.allreduce(t, op=D.Min).numpy(), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(D.allreduce(t, op=D.Max).numpy(),
                                  np.arange(6).reshape(2, 3) + P - 1)
    ints = D.allreduce(tg.constant([R, 1], dtype=tg.int64), op=D.Sum)
    assert ints.dtype == tg.int64 and ints.numpy().tolist() == [P * (P - 1) // 2, P]
    g = D.allgather(tg.fill((R + 1, 2), float(R)))
    assert g.shape == (P * (P + 1) // 2, 2)
    assert g.numpy()[:, 0].tolist() == [float(r) for r in range(P) for _ in range(r + 1)]
    b = D.broadcast(tg.constant([float(R), 1.0]), root_rank=P - 1)
    assert b.numpy().tolist() == [float(P - 1), 1.0]
    assert D.broadcast_object({"rank": R}, root_rank=P - 1) == {"rank": P - 1}
    assert D.allgather_object((R, "x" * R)) == [(r, "x" * r) for r in range(P)]
    ok("collectives")

print(f"done rank={R}", flush=True)
