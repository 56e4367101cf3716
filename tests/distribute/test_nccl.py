"""tg.distribute's NCCL route on the simulated GPU: under mpiexec (scripts/nccl_checks.py, the
stand-in's cupy.cuda.nccl over MPI), and the stand-in's NCCL itself, in this process.

The multi-rank tests skip, saying why, without mpi4py and mpiexec or without the CUDA emulator
(the stand-in runs tapegpu's kernels in it).
"""
import re

import numpy as np
import pytest

import cupy_sim
import tapegpu as tg
from tapegpu import backends as backend
from tapegpu.distribute import collectives, gradients, nccl

from test_distribute import SCRIPTS, _mpiexec, needs_mpi

SINGLE_DEVICE = True

needs_emulator = pytest.mark.skipif(
    not backend.CudaEmuBackend.available(),
    reason=f"the CuPy stand-in runs kernels in the emulator: "
           f"{backend.CudaEmuBackend.unavailable_reason()}")


@needs_mpi
@needs_emulator
@pytest.mark.parametrize("n", [2, 4])
def test_nccl_route_on_the_simulated_gpu(n):
    """On every rank: init gives the rank gpu:0; broadcast_variables is one NCCL bcast; the
    averaged gradients (one bucket, several, one per variable, without overlap) equal one
    process's on the whole batch (rtol 1e-5), bit-identical across ranks, with one allreduce
    per bucket, no host sync and no copy between host and device; each bucket's allreduce
    starts on a non-blocking side stream between pieces of the sweep and the current stream
    waits for its event (a reader that skips the wait reads NaN); the host-staged route copies
    and syncs; fp16 and bf16 compression on the device; 10 SGD-momentum steps
    (DistributedGradientTape, DistributedOptimizer) with 0 syncs and 0 copies per step, bit-
    identical across ranks and equal to one process; allreduce, allgather, broadcast on the
    device."""
    code, out, _ = _mpiexec(n, SCRIPTS / "nccl_checks.py", timeout=120)
    assert code == 0, out
    for check in ("device", "broadcast_variables", "gradients_default", "gradients_buckets",
                  "gradients_one_per_bucket", "gradients_no_overlap",
                  "overlap_on_a_side_stream", "results_need_the_event", "host_staged_route",
                  "compression_on_the_device", "sources_and_unconnected", "training_tape",
                  "training_optimizer", "collectives"):
        for r in range(n):
            assert f"ok {check} rank={r}" in out, (check, r, out)
    steps = re.findall(r"measured rank=\d+ steps=10 syncs_per_step=(\[.*?\]) "
                       r"copies_per_step=(\[.*?\])", out)
    assert len(steps) == n and all(s == c == str([0] * 10) for s, c in steps), out


# -- the stand-in's NCCL, in this process ----------------------------------------------------

@pytest.fixture
def cp():
    """The stand-in's cupy module with two devices, without touching sys.modules."""
    mods = cupy_sim.build()
    old = cupy_sim.set_device_count(2)
    try:
        yield mods["cupy"]
    finally:
        cupy_sim.set_device_count(old)


def _one(cp):
    n = cp.cuda.nccl
    return n, n.NcclCommunicator(1, n.get_unique_id(), 0)


def test_a_collective_lands_when_work_ordered_after_it_needs_it(cp):
    nccl_, comm = _one(cp)
    a = cp.arange(4, dtype=cp.float32)
    side = cp.cuda.Stream(non_blocking=True)
    cupy_sim.stats.reset()
    comm.allReduce(a.data.ptr, a.data.ptr, 4, nccl_.NCCL_FLOAT32, nccl_.NCCL_SUM, side.ptr)
    assert sum(cupy_sim.stats.nccl.values()) == 1
    b = a * 1  # the null stream does not wait for a non-blocking stream: NaN
    assert np.isnan(b.get()).all()
    done = side.record()
    cp.cuda.get_current_stream().wait_event(done)
    assert a.get().tolist() == [0.0, 1.0, 2.0, 3.0] and done.done
    assert sum(cupy_sim.stats.syncs.values()) == 2  # the two .get(), not the wait


def test_the_null_stream_waits_for_blocking_streams(cp):
    nccl_, comm = _one(cp)
    a = cp.ones(3, dtype=cp.float64)
    blocking = cp.cuda.Stream()
    comm.allReduce(a.data.ptr, a.data.ptr, 3, nccl_.NCCL_FLOAT64, nccl_.NCCL_SUM, blocking.ptr)
    assert (a + 0).get().tolist() == [1.0, 1.0, 1.0]  # CUDA's legacy default stream


def test_a_single_process_clique_reduces_in_a_group(cp):
    nccl_ = cp.cuda.nccl
    comms = nccl_.NcclCommunicator.initAll([0, 1])
    bufs = []
    for d, comm in enumerate(comms):
        with cp.cuda.Device(d):
            bufs.append(cp.asarray(np.array([0.1, 0.2, 0.7], np.float32) * (d + 1)))
            assert bufs[-1].device.id == d and comm.device_id() == d
    nccl_.groupStart()
    for comm, b in zip(comms, bufs):
        with cp.cuda.Device(comm.device_id()):
            comm.allReduce(b.data.ptr, b.data.ptr, 3, nccl_.NCCL_FLOAT32, nccl_.NCCL_SUM,
                           cp.cuda.Stream.null.ptr)
    nccl_.groupEnd()
    want = np.array([0.1, 0.2, 0.7], np.float32) + np.array([0.1, 0.2, 0.7], np.float32) * 2
    assert bufs[0].get().tobytes() == bufs[1].get().tobytes() == want.tobytes()
    with pytest.raises(nccl_.NcclError, match="INVALID_USAGE.*groupStart"):
        comms[0].allReduce(bufs[0].data.ptr, bufs[0].data.ptr, 3, nccl_.NCCL_FLOAT32,
                           nccl_.NCCL_SUM, 0)
    with pytest.raises(nccl_.NcclError, match="a buffer on device 1, the communicator on "
                                              "device 0"):
        comms[0].bcast(bufs[1].data.ptr, 3, nccl_.NCCL_FLOAT32, 0, 0)


def test_reductions_round_in_the_wire_dtype_at_each_step(cp):
    nccl_ = cp.cuda.nccl
    rows = np.array([[2048.0], [1.0], [1.0]], np.float16)  # 2048 + 1 rounds back to 2048
    assert nccl_._combine(rows, nccl_.NCCL_SUM, nccl_.NCCL_FLOAT16)[0] == 2048.0
    bits = collectives.to_bfloat16(np, np.array([[256.0], [1.0], [1.0]], np.float32))
    total = nccl_._combine(bits, nccl_.NCCL_SUM, nccl_.NCCL_BFLOAT16)
    assert collectives.from_bfloat16(np, total, np.float32).tolist() == [256.0]
    assert nccl_._combine(np.array([[7], [2]], np.int32), nccl_.NCCL_AVG,
                          nccl_.NCCL_INT32).tolist() == [4]


def test_pointers_must_come_from_live_arrays(cp):
    nccl_, comm = _one(cp)
    with pytest.raises(ValueError, match="which no live cupy array's .data.ptr gave"):
        comm.allReduce(12345, 12345, 1, nccl_.NCCL_FLOAT32, nccl_.NCCL_SUM, 0)
    a = cp.ones(2, dtype=cp.float32)
    with pytest.raises(ValueError, match="past the end of its allocation"):
        comm.allReduce(a.data.ptr, a.data.ptr, 3, nccl_.NCCL_FLOAT32, nccl_.NCCL_SUM, 0)


# -- no MPI job needed -----------------------------------------------------------------------

def test_bfloat16_rounds_to_nearest_even_and_keeps_nan():
    x = np.array([1.0, 1.00390625, 1.01171875, 3.4e38, np.nan, np.inf], np.float32)
    bits = collectives.to_bfloat16(np, x)
    assert bits.dtype == np.uint16
    back = collectives.from_bfloat16(np, bits, np.float32)
    assert back[:2].tolist() == [1.0, 1.0]  # a tie rounds to the even mantissa
    assert back[2] == np.float32(1.015625) and np.isinf(back[3]) and np.isnan(back[4])
    t, ctx = tg.distribute.Compression.bf16.compress(tg.constant([1.5, -2.0]))
    assert t.dtype == tg.int16 and ctx == np.float32  # the bits
    assert tg.distribute.Compression.bf16.decompress(t, ctx).numpy().tolist() == [1.5, -2.0]


def test_tensorflow_names_of_the_reduce_ops():
    assert tg.distribute.ReduceOp.SUM is tg.distribute.Sum
    assert tg.distribute.ReduceOp.MEAN is tg.distribute.Average


def test_only_gpu_tensors_take_the_nccl_route(monkeypatch):
    assert nccl.route(backend.NUMPY) == "mpi"
    monkeypatch.setenv("TAPEGPU_DISTRIBUTE_NCCL", "0")

    class FakeGpu:
        name = "cuda"
    assert nccl.route(FakeGpu()) == "mpi"
    with pytest.raises(ValueError, match=r"compression must be .*Compression.bf16"):
        tg.distribute.DistributedGradientTape(tg.GradientTape(), compression="bf16")


def test_buckets_keep_device_and_host_gradients_apart():
    plan = gradients.plan_buckets(["float32"] * 4, [40] * 4, 200,
                                  places=["nccl", "host", "nccl", "host"])
    assert plan == [[3, 1], [2, 0]]
