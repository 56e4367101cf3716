"""tg.distribute figures: weak scaling from 1 to 2 ranks, and how much of the gradient
reduction the backward sweep hides.

    python -m benchmarks.distributed [--json FILE] [--ranks 2]

Runs itself under `mpiexec -n N` (each rank: one BLAS thread, pinned to CPU rank % cpus). Workload: the training step of benchmarks.core (MLP 784-1024-1024-10 ReLU,
softmax cross-entropy), batch 256 per rank, SGD update; 1.86 M float32 parameters (7.5 MB of
gradients). Cases, timed in rounds in a rotating order, the same on every rank (fixed step
counts: the ranks stay in lockstep):

- `local, rank 0 alone`: the step on rank 0 while the other ranks wait (sleeping): the
  one-rank baseline, timed in the same rounds as the rest;
- `local`: the step without communication (on N ranks at once: the compute floor under the
  same contention for memory bandwidth);
- `local + 1-float allreduce`: the same, in lockstep (every step waits for the slowest rank,
  as a distributed step does);
- `reduce only`: the bucketed reduction of the 7.5 MB of gradients alone (no sweep);
- `dist ...`: the step with DistributedGradientTape: after the sweep (`overlap=False`), with
  the default 25 MiB bucket (one bucket: it can only start at the end), and with 1 MiB
  buckets (started during the sweep).

Figures, each the median over rounds of a ratio of times from the same round (this machine's
speed drifts): weak-scaling efficiency = rank 0 alone / the distributed step on N ranks;
hidden fraction = 1 - (dist - lockstep) / reduce-only (1: the reduction costs nothing beyond
the lockstep; 0: it all adds up; negative: the distributed step costs more than both). Each case reports its process CPU time over wall time
(busy polling of MPI counts as CPU).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def worker(args):
    import numpy as np  # after the launcher's thread settings

    import tapegpu as tg
    from tapegpu.distribute.gradients import reduce_gradients

    D = tg.distribute
    D.init()
    rank, size = D.rank(), D.size()
    try:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    except (AttributeError, OSError):
        pass
    rng = np.random.default_rng(100 + rank)
    x = tg.constant(rng.standard_normal((256, 784)).astype(np.float32))
    y = tg.constant(rng.integers(0, 10, 256).astype(np.int32))
    tg.random.set_seed(0)
    model = tg.layers.Sequential([tg.layers.Dense(1024, activation="relu"),
                                  tg.layers.Dense(1024, activation="relu"),
                                  tg.layers.Dense(10)])
    model(x)
    D.broadcast_variables(model.variables)
    variables = model.trainable_variables
    opt = tg.optimizers.SGD(1e-3)

    def step(wrap=None):
        def run():
            with tg.GradientTape() as tape:
                logits = model(x)
                loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            if wrap is not None:
                tape = wrap(tape)
            opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return run

    grads = [tg.ones_like(v) for v in variables]
    sync = tg.constant([0.0])
    local = step()

    def lockstep():
        local()
        D.allreduce(sync)

    def solo():  # rank 0 alone; the others wait (sleeping) at the allreduce
        if rank == 0:
            local()

    cases = {
        "local, rank 0 alone": solo,
        "local": local,
        "local + 1-float allreduce": lockstep,
        "reduce only": lambda: reduce_gradients(grads, variables),
        "dist after sweep (25 MiB)": step(lambda t: D.DistributedGradientTape(t, overlap=False)),
        "dist overlap, 25 MiB buckets": step(lambda t: D.DistributedGradientTape(t)),
        "dist overlap, 1 MiB buckets": step(
            lambda t: D.DistributedGradientTape(t, bucket_bytes=2 ** 20)),
    }
    names = list(cases)
    for fn in cases.values():
        for _ in range(3):
            fn()
    times = {n: [] for n in names}
    cpu = {n: [] for n in names}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            D.allreduce(sync)  # start together
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                cases[n]()
            if n == "local, rank 0 alone":
                D.allreduce(sync)
            wall = time.perf_counter() - w0
            times[n].append(wall / args.steps)
            cpu[n].append((time.process_time() - c0) / wall)
    everyone = D.allgather_object((times, cpu))
    if rank == 0:
        slowest = {n: [max(e[0][n][r] for e in everyone) for r in range(args.rounds)]
                   for n in names}
        out = {n: {"median_s": statistics.median(slowest[n]),
                   "cpu_over_wall": statistics.mean(statistics.median(e[1][n])
                                                    for e in everyone)} for n in names}
        alone = times["local, rank 0 alone"]  # rank 0's own
        out["local, rank 0 alone"] = {"median_s": statistics.median(alone),
                                      "cpu_over_wall": statistics.median(
                                          cpu["local, rank 0 alone"])}
        for n in names:
            if n.startswith("dist"):  # per-round ratios, median over rounds
                out[n]["efficiency"] = statistics.median(
                    a / b for a, b in zip(alone, slowest[n]))
                out[n]["hidden"] = statistics.median(
                    1 - (d - l) / c for d, l, c in zip(slowest[n],
                                                       slowest["local + 1-float allreduce"],
                                                       slowest["reduce only"]))
        with open(args.worker_json, "w") as f:
            json.dump({"ranks": size, "cases": out}, f)


def launch(n, args, extra_env=None):
    from tapegpu.distribute.run import command
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        env = dict(os.environ, PYTHONPATH=ROOT, **{v: "1" for v in THREADS}, **(extra_env or {}))
        cmd = command(n, os.path.abspath(__file__),
                      ["--worker-json", path, "--rounds", str(args.rounds), "--steps",
                       str(args.steps)])
        subprocess.run(cmd, env=env, check=True, cwd=ROOT)
        with open(path) as f:
            return json.load(f)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--async-progress", action="store_true",
                   help="MPICH's progress thread (MPIR_CVAR_ASYNC_PROGRESS=1) in every rank")
    p.add_argument("--worker-json", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker_json:
        return worker(args)
    w0, c0 = time.perf_counter(), time.process_time()
    env = {"MPIR_CVAR_ASYNC_PROGRESS": "1"} if args.async_progress else None
    many = launch(args.ranks, args, env)["cases"]
    n = args.ranks
    rows = []
    for name, c in many.items():
        row = {"case": name, "ms": c["median_s"] * 1e3, "cpu/wall": c["cpu_over_wall"]}
        if "efficiency" in c:
            row["weak-scaling efficiency"] = c["efficiency"]
            row["hidden fraction"] = c["hidden"]
        rows.append(row)
    print(f"MLP 784-1024-1024-10, batch 256 per rank, one thread per rank; {n} ranks on "
          f"{os.cpu_count()} CPUs" + ("; MPICH async progress" if env else ""))
    print(f"{'case':30s} {'ms/step':>8s} {'cpu/wall':>9s} {'efficiency':>11s} {'hidden':>7s}")
    for r in rows:
        eff = f"{r['weak-scaling efficiency']:.2f}" if "weak-scaling efficiency" in r else ""
        hid = f"{r['hidden fraction']:.2f}" if "hidden fraction" in r else ""
        print(f"{r['case']:30s} {r['ms']:8.2f} {r['cpu/wall']:9.2f} {eff:>11s} {hid:>7s}")
    print(f"(benchmark wall {time.perf_counter() - w0:.1f} s, CPU {time.process_time() - c0:.1f} s "
          f"in this process; 1-minute load average {os.getloadavg()[0]:.1f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ranks": n, "cpus": os.cpu_count(), "async_progress": bool(env),
                       "load_average_1min_at_end": os.getloadavg()[0],
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
