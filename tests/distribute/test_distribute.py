"""tg.distribute: multi-rank runs under mpiexec (scripts/checks.py, scripts/fail.py), and the
parts that need no MPI job.

The multi-rank tests skip, saying why, without mpi4py or mpiexec (`pip install -e
".[distributed]"`). Each rank gets one BLAS/OpenMP thread; `-n 4` oversubscribes small
machines (MPICH allows it).
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.distribute import gradients, run, runtime

SINGLE_DEVICE = True  # the scripts choose their devices; the rest is device-independent
SCRIPTS = Path(__file__).resolve().parent / "scripts"
ROOT = Path(__file__).resolve().parents[2]


def _mpi_missing():
    try:
        import mpi4py  # noqa: F401  (optional: the distributed extra)
    except ImportError:
        return "mpi4py is not installed (pip install -e \".[distributed]\")"
    if run.find_mpiexec() is None:
        return "mpiexec not found (pip install -e \".[distributed]\" brings MPICH's)"
    return None


needs_mpi = pytest.mark.skipif(_mpi_missing() is not None, reason=str(_mpi_missing()))


def _mpiexec(n, *args, timeout=60):
    """Runs `python *args` on n ranks; returns (returncode, stdout + stderr, seconds)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=str(ROOT))
    env.pop("TAPEGPU_DISTRIBUTE_TIMEOUT", None)
    start = time.monotonic()
    p = subprocess.run(run.command(n, str(args[0]), [str(a) for a in args[1:]]), env=env,
                       capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - start


CHECKS = ("broadcast_variables", "gradients_default", "gradients_buckets",
          "gradients_one_per_bucket", "gradients_no_overlap",
          "overlap_starts_buckets_during_the_sweep", "sum_and_fp16",
          "sources_and_unconnected", "training_tape", "training_optimizer", "collectives")


@needs_mpi
@pytest.mark.parametrize("n,device", [(2, "cpu"), (4, "cpu"), (2, "cuda_emu")])
def test_ranks_agree_with_one_process_on_the_whole_batch(n, device):
    """Per rank: broadcast_variables gives rank 0's initial values; averaged gradients (one
    bucket, several, one per variable, without overlap) equal one process's gradients of the
    whole batch (rtol 1e-5) and are bit-identical across ranks; with one variable per bucket,
    buckets start between segments of the sweep; Sum and fp16; after 5 SGD
    steps (DistributedGradientTape, DistributedOptimizer) the variables are bit-identical
    across ranks and equal to one process trained on the whole batch; allreduce (Average,
    Sum, Min, Max, ints), allgather of uneven rows, broadcast, and the object forms."""
    code, out, _ = _mpiexec(n, SCRIPTS / "checks.py", device)
    assert code == 0, out
    for check in CHECKS:
        for r in range(n):
            assert f"ok {check} rank={r}" in out, (check, r, out)


@needs_mpi
def test_a_rank_that_raises_ends_the_job():
    code, out, seconds = _mpiexec(2, SCRIPTS / "fail.py", "raise")
    assert code != 0
    assert "RuntimeError: deliberate failure on rank 1" in out
    assert "rank 1 of 2 raised RuntimeError; aborting the job" in out
    assert "should not get here" not in out
    assert seconds < 60


@needs_mpi
def test_mismatched_shapes_show_both_sides():
    code, out, _ = _mpiexec(2, SCRIPTS / "fail.py", "mismatch")
    assert code != 0
    assert "ValueError: tg.distribute.DistributedGradientTape.gradient: the ranks do not agree" \
        in out
    assert "entry 0: rank 0 has hidden/kernel float32[3, 4], rank 1 has hidden/kernel " \
        "float32[3, 5]" in out
    assert "should not get here" not in out


@needs_mpi
def test_variables_in_another_order_are_a_mismatch():
    code, out, _ = _mpiexec(2, SCRIPTS / "fail.py", "order")
    assert code != 0
    assert "entry 0: rank 0 has hidden/kernel float32[3, 4], rank 1 has out/bias float32[2]" \
        in out


@needs_mpi
@pytest.mark.parametrize("case", ["exit", "systemexit", "leave"])
def test_a_rank_that_exits_ends_the_job_and_is_named(case):
    """sys.exit(1), raise SystemExit(3), or the end of the script, before a collective: no
    excepthook sees these, but the rank waiting for it raises at once (the collective timeout
    is 60 s), naming the rank, and aborts the job."""
    code, out, seconds = _mpiexec(2, SCRIPTS / "fail.py", case)
    assert code != 0
    assert "rank 1 leaves" in out
    assert "UnavailableError: tg.distribute.allreduce: rank 1 of 2 exited while this rank " \
           "waited for it" in out, out
    assert "rank 0 of 2 raised UnavailableError; aborting the job" in out
    assert "should not get here" not in out and "TimeoutError" not in out
    assert seconds < 30


@needs_mpi
def test_a_rank_that_is_stuck_makes_the_others_time_out():
    code, out, seconds = _mpiexec(2, SCRIPTS / "fail.py", "stuck")
    assert code != 0
    assert "TimeoutError: tg.distribute.allreduce: the other ranks did not join within 2 s" in out
    assert "should not get here" not in out
    assert seconds < 25  # the stuck rank would sleep 30 s: the abort ended it


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_ranks_that_leave_at_the_end_of_a_healthy_job_are_no_error(n):
    """Every rank sends an exit notice; one that nobody waits for is never read."""
    code, out, _ = _mpiexec(n, SCRIPTS / "fail.py", "uneven")
    assert code == 0, out
    for r in range(n):
        assert f"rank {r} done {[float(n)] * 4}" in out, out


@needs_mpi
def test_launcher_runs_the_example():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "tapegpu.distribute.run", "-n", "2",
                        str(ROOT / "examples" / "distributed_mlp.py"), "--steps", "3"],
                       env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 ranks" in p.stdout and "identical on every rank: True" in p.stdout


# -- no MPI job needed ------------------------------------------------------------------------

def test_before_init_the_error_says_to_call_init():
    assert not tg.distribute.is_initialized()
    with pytest.raises(ValueError, match=r"tg.distribute.rank: tg.distribute.init\(\) has not "):
        tg.distribute.rank()
    with pytest.raises(ValueError, match=r"allreduce: tg.distribute.init\(\) has not been"):
        tg.distribute.allreduce(tg.ones(2))


def test_without_mpi4py_init_names_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import fails as when not installed
    with pytest.raises(ImportError, match=r"tg.distribute.init: needs mpi4py and an MPI "
                                          r"library.*pip install -e \"\.\[distributed\]\""):
        tg.distribute.init()
    assert not tg.distribute.is_initialized()


def test_launcher_without_mpiexec_says_how_to_install(monkeypatch):
    monkeypatch.setattr(run, "find_mpiexec", lambda: None)
    with pytest.raises(FileNotFoundError, match=r"mpiexec not found.*\[distributed\]"):
        run.command(2, "x.py", [])
    assert run.main(["-n", "2", "x.py"]) == 127


def test_launcher_gives_each_rank_its_share_of_threads():
    env = run.environment(2, base={})
    assert env["OMP_NUM_THREADS"] == str(max(1, (os.cpu_count() or 1) // 2))
    assert run.environment(2, base={"OMP_NUM_THREADS": "3"}) == {"OMP_NUM_THREADS": "3"}


def test_shard_takes_every_nth_row():
    x = np.arange(10).reshape(5, 2)
    np.testing.assert_array_equal(tg.distribute.shard(x, 2, 1), x[1::2])
    t = tg.distribute.shard(tg.constant(x), 2, 0)
    assert isinstance(t, tg.Tensor) and t.numpy().tolist() == x[0::2].tolist()
    with pytest.raises(ValueError, match=r"shard: index must be in 0 .. 1, got 2"):
        tg.distribute.shard(x, 2, 2)
    with pytest.raises(ValueError, match=r"shard: num_shards must be a positive int"):
        tg.distribute.shard(x, 0, 0)


def test_buckets_go_last_to_first_one_dtype_each():
    plan = gradients.plan_buckets(["float32", "float32", "int32", "float64", "float32"],
                                  [40, 40, 8, 80, 40], bucket_bytes=80)
    assert plan == [[4, 1], [3], [0]]  # sources last to first; ints are not reduced
    assert gradients.plan_buckets(["float32"] * 3, [100, 1, 1], 10) == [[2, 1], [0]]


def test_arguments_are_checked_before_any_communication():
    with pytest.raises(TypeError, match=r"DistributedGradientTape: expected a tg.GradientTape"):
        tg.distribute.DistributedGradientTape(object())
    with pytest.raises(ValueError, match=r"compression must be tg.distribute.Compression"):
        tg.distribute.DistributedGradientTape(tg.GradientTape(), compression="fp16")
    with pytest.raises(ValueError, match=r"op must be tg.distribute.Average, Sum, Min or Max"):
        tg.distribute.DistributedGradientTape(tg.GradientTape(), op="mean")
    with pytest.raises(ValueError, match=r"bucket_bytes must be a positive number of bytes"):
        tg.distribute.DistributedGradientTape(tg.GradientTape(), bucket_bytes=0)
    with pytest.raises(TypeError, match=r"DistributedOptimizer: expected an optimizer"):
        tg.distribute.DistributedOptimizer(object())


def test_fp16_compression_round_trips_floats_only():
    c = tg.distribute.Compression.fp16
    t, ctx = c.compress(tg.constant([1.0, 2.5]))
    assert t.dtype == tg.float16 and c.decompress(t, ctx).dtype == tg.float32
    i, ctx = c.compress(tg.constant([1, 2]))
    assert ctx is None and i.dtype == tg.int32


def test_timeout_must_be_positive():
    with pytest.raises(ValueError, match=r"init: timeout must be a positive number of seconds, "
                                         r"got 0"):
        tg.distribute.init(timeout=0)
    assert not tg.distribute.is_initialized()
