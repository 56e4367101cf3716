"""The emulator's execution model and every diagnostic it promises."""

SINGLE_DEVICE = True  # about the kernels themselves, not a tapegpu device

import json
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from tapegpu.backends.emu import (EmuArgumentError, EmuCompileError, EmuKernelError,
    EmuLaunchError, EmuOutOfBoundsError, RawModule)
from tapegpu.backends.emu import build as emu_build


FEATURES = r'''
typedef long long i64;
typedef unsigned int u32;

__constant__ float scale[4];

// Linear thread id, block id and dims, for a 3-D launch.
extern "C" __global__ void indices(int *tid, int *bid, int *dims) {
  int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int nt = blockDim.x * blockDim.y * blockDim.z;
  tid[b * nt + t] = t;
  bid[b * nt + t] = b;
  if (b == 0 && t == 0) {
    dims[0] = gridDim.x; dims[1] = gridDim.y; dims[2] = gridDim.z;
    dims[3] = blockDim.x; dims[4] = blockDim.y; dims[5] = blockDim.z; dims[6] = warpSize;
  }
}

// Reverse a block's slice through static shared memory, then through dynamic.
extern "C" __global__ void reverse_shared(const float *x, float *y, float *z) {
  __shared__ float s[256];
  extern __shared__ float d[];
  int t = threadIdx.x, n = blockDim.x, base = blockIdx.x * n;
  s[t] = x[base + t];
  d[t] = 2.0f * x[base + t];
  __syncthreads();
  y[base + t] = s[n - 1 - t];
  z[base + t] = d[n - 1 - t];
}

// Dynamic shared memory reads back 0xFF bytes where nothing was written.
extern "C" __global__ void read_unwritten(u32 *out) {
  extern __shared__ u32 raw[];
  out[threadIdx.x] = raw[threadIdx.x];
}

extern "C" __global__ void barrier_predicates(const int *p, int *count, int *all, int *any) {
  int v = p[threadIdx.x];
  count[threadIdx.x] = __syncthreads_count(v);
  all[threadIdx.x] = __syncthreads_and(v);
  any[threadIdx.x] = __syncthreads_or(v);
}

// Each kind of shuffle, with a width, on float and double.
extern "C" __global__ void shuffles(const float *x, float *out, const double *xd, double *outd,
                                    int param, int width) {
  int t = threadIdx.x;
  unsigned full = 0xffffffffu;
  out[0 * blockDim.x + t] = __shfl_sync(full, x[t], param, width);
  out[1 * blockDim.x + t] = __shfl_up_sync(full, x[t], (unsigned)param, width);
  out[2 * blockDim.x + t] = __shfl_down_sync(full, x[t], (unsigned)param, width);
  out[3 * blockDim.x + t] = __shfl_xor_sync(full, x[t], param, width);
  outd[t] = __shfl_xor_sync(full, xd[t], param, width);
}

// Votes in two divergent halves of each warp, each naming only its own lanes.
extern "C" __global__ void votes(const int *p, u32 *ballot, int *any, int *all) {
  int t = threadIdx.x, lane = t & 31;
  unsigned mask = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  if (lane < 16) {
    ballot[t] = __ballot_sync(mask, p[t]);
    any[t] = __any_sync(mask, p[t]);
    all[t] = __all_sync(mask, p[t]);
  } else {
    ballot[t] = __ballot_sync(mask, p[t]);
    any[t] = __any_sync(mask, p[t]);
    all[t] = __all_sync(mask, p[t]);
  }
}

// __syncwarp in two divergent halves, each naming its own lanes; then every lane is active.
extern "C" __global__ void warp_sync(const float *x, float *y, u32 *active) {
  __shared__ float s[64];
  int t = threadIdx.x, lane = t & 31;
  s[t] = x[t];
  if (lane < 16) __syncwarp(0x0000ffffu); else __syncwarp(0xffff0000u);
  y[t] = s[t ^ 1];  // the neighbour is in the same half
  active[t] = __activemask();
}

// Every thread of every block adds into a few counters.
extern "C" __global__ void atomics(float *fsum, double *dsum, int *isum, int *imax, int *imin,
                                   int *exch, int *cas_sum, const int *v) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(fsum, 0.5f);
  atomicAdd(dsum, 0.25);
  atomicAdd(isum, 1);
  atomicMax(imax, v[g]);
  atomicMin(imin, v[g]);
  atomicExch(exch, 7);
  int old = *cas_sum, seen;
  while ((seen = atomicCAS(cas_sum, old, old + v[g])) != old) old = seen;
}

// A spin lock built on atomicCAS/atomicExch around a non-atomic update.
extern "C" __global__ void spin_lock(int *lock, int *counter) {
  if (threadIdx.x % 32 == 0) {
    while (atomicCAS(lock, 0, 1) != 0) {}
    *counter += 1;
    atomicExch(lock, 0);
  }
}

// The order in which threads come back from a barrier.
extern "C" __global__ void resume_order(int *ticket, int *order) {
  __syncthreads();
  order[atomicAdd(ticket, 1)] = threadIdx.x;
}

extern "C" __global__ void constants(const float *x, float *y) {
  y[threadIdx.x] = x[threadIdx.x] * scale[threadIdx.x % 4];
}

extern "C" __global__ void math_f32(const float *x, float *y) {
  float v = x[threadIdx.x];
  float *o = y + 16 * threadIdx.x;
  o[0] = expf(v); o[1] = logf(v); o[2] = tanhf(v); o[3] = erff(v); o[4] = sqrtf(v);
  o[5] = rsqrtf(v); o[6] = fmaxf(v, 1.0f); o[7] = fminf(v, 1.0f); o[8] = log1pf(v);
  o[9] = expm1f(v); o[10] = __expf(v); o[11] = __fdividef(v, 3.0f); o[12] = powf(v, 1.5f);
  o[13] = max(v, 2.0f); o[14] = __int_as_float(__float_as_int(v)); o[15] = erfcf(v);
}

extern "C" __global__ void math_f64(const double *x, double *y) {
  double v = x[threadIdx.x];
  double *o = y + 10 * threadIdx.x;
  o[0] = exp(v); o[1] = log(v); o[2] = tanh(v); o[3] = erf(v); o[4] = sqrt(v);
  o[5] = rsqrt(v); o[6] = fmax(v, 1.0); o[7] = log1p(v); o[8] = expm1(v); o[9] = min(v, 2.0);
}

// About 16 KiB of locals per thread: fits the 64 KiB fiber stack.
extern "C" __global__ void deep_stack(float *y) {
  volatile float local[4096];
  for (int i = 0; i < 4096; ++i) local[i] = (float)i;
  float s = 0.0f;
  for (int i = 0; i < 4096; ++i) s += local[i];
  y[threadIdx.x] = s;
}

extern "C" __global__ void scalars(float *y, int a, i64 b, float c, double d, bool e) {
  y[0] = (float)a; y[1] = (float)b; y[2] = c; y[3] = (float)d; y[4] = e ? 1.0f : 0.0f;
}

extern "C" __global__ void no_args() {}
'''


@pytest.fixture(scope="module")
def features():
    return {o: RawModule(code=FEATURES, order=o, seed=3) for o in ("forward", "reverse", "random")}


# ------------------------------------------------------------ execution model
def test_indices_3d(features):
    f = features["forward"].get_function("indices")
    grid, block = (2, 3, 2), (4, 2, 3)
    nb, nt = 12, 24
    tid, bid, dims = np.zeros(nb * nt, np.int32), np.zeros(nb * nt, np.int32), np.zeros(7, np.int32)
    f(grid, block, (tid, bid, dims))
    np.testing.assert_array_equal(tid, np.tile(np.arange(nt), nb))
    np.testing.assert_array_equal(bid, np.repeat(np.arange(nb), nt))
    np.testing.assert_array_equal(dims, [2, 3, 2, 4, 2, 3, 32])


def test_static_and_dynamic_shared_are_per_block(features, order):
    f = features[order].get_function("reverse_shared")
    x = np.arange(3 * 64, dtype=np.float32)
    y, z = np.zeros_like(x), np.zeros_like(x)
    f((3,), (64,), (x, y, z), shared_mem=64 * 4)
    want = x.reshape(3, 64)[:, ::-1].ravel()
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(z, 2 * want)


def test_dynamic_shared_starts_as_0xff(features):
    out = np.zeros(32, np.uint32)
    features["forward"].get_function("read_unwritten")((2,), (32,), (out,), shared_mem=128)
    assert (out == 0xFFFFFFFF).all()


def test_barrier_predicates(features, order):
    f = features[order].get_function("barrier_predicates")
    for p in (np.zeros(64, np.int32), np.ones(64, np.int32), (np.arange(64) % 3 == 0).astype(np.int32)):
        count, all_, any_ = (np.zeros(64, np.int32) for _ in range(3))
        f((1,), (64,), (p, count, all_, any_))
        assert (count == p.sum()).all()
        assert (all_ == int(p.all())).all()
        assert (any_ == int(p.any())).all()


def _shuffle_reference(x, kind, param, width):
    out = np.empty_like(x)
    for lane in range(len(x)):
        base, off = lane - lane % width, lane % width
        if kind == "idx":
            src = base + param % width
        elif kind == "up":
            src = lane - param if off >= param else lane
        elif kind == "down":
            src = lane + param if off + param < width else lane
        else:
            src = lane ^ param
            src = src if src - src % width == base else lane
        out[lane] = x[(lane // 32) * 32 + src % 32]
    return out


@pytest.mark.parametrize("param,width", [(1, 32), (5, 32), (3, 8), (2, 4), (16, 32), (9, 16)])
def test_shuffles(features, order, param, width):
    f = features[order].get_function("shuffles")
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    xd = x.astype(np.float64) * 3
    out, outd = np.zeros(4 * 64, np.float32), np.zeros(64)
    f((1,), (64,), (x, out, xd, outd, np.int32(param), np.int32(width)))
    for k, kind in enumerate(("idx", "up", "down", "xor")):
        np.testing.assert_array_equal(out[k * 64:(k + 1) * 64], _shuffle_reference(x, kind, param, width),
                                      err_msg=kind)
    np.testing.assert_array_equal(outd, _shuffle_reference(xd, "xor", param, width))


@pytest.mark.parametrize("pattern", ["random", "ones", "zeros"])
def test_votes_with_disjoint_masks(features, order, pattern):
    p = {"random": (np.random.default_rng(1).random(64) < 0.4).astype(np.int32),
         "ones": np.ones(64, np.int32), "zeros": np.zeros(64, np.int32)}[pattern]
    if pattern == "random":
        p[32:48] = 1
    ballot, any_, all_ = np.zeros(64, np.uint32), np.zeros(64, np.int32), np.zeros(64, np.int32)
    features[order].get_function("votes")((1,), (64,), (p, ballot, any_, all_))
    for t in range(64):
        lanes = [l for l in range(32) if (l < 16) == (t % 32 < 16)]
        bits = sum(int(p[(t // 32) * 32 + l]) << l for l in lanes)
        assert ballot[t] == bits
        assert any_[t] == int(bits != 0)
        assert all_[t] == int(all(p[(t // 32) * 32 + l] for l in lanes))


def test_syncwarp_and_activemask(features, order):
    x = np.arange(64, dtype=np.float32)
    y, active = np.zeros(64, np.float32), np.zeros(64, np.uint32)
    features[order].get_function("warp_sync")((1,), (64,), (x, y, active))
    np.testing.assert_array_equal(y, x.reshape(-1, 2)[:, ::-1].ravel())
    # __activemask: the lanes of the warp that have not exited. After the
    # barrier-free tail, lanes exit one by one in resume order.
    lanes = np.arange(64) % 32
    own = (active >> lanes.astype(np.uint32)) & 1
    assert own.all()
    first = 0 if order == "forward" else 31
    assert (active[lanes == first] == 0xFFFFFFFF).all()


def test_atomics(features):
    f = features["random"].get_function("atomics")
    n = 3 * 96
    v = np.random.default_rng(2).integers(-1000, 1000, n).astype(np.int32)
    fsum, dsum = np.zeros(1, np.float32), np.zeros(1)
    isum, imax, imin = np.zeros(1, np.int32), np.full(1, -2**31, np.int32), np.full(1, 2**31 - 1, np.int32)
    exch, cas = np.zeros(1, np.int32), np.zeros(1, np.int32)
    f((3,), (96,), (fsum, dsum, isum, imax, imin, exch, cas, v))
    assert fsum[0] == 0.5 * n and dsum[0] == 0.25 * n and isum[0] == n
    assert imax[0] == v.max() and imin[0] == v.min() and exch[0] == 7 and cas[0] == v.sum()


def test_spin_lock_with_atomic_cas(features, order):
    lock, counter = np.zeros(1, np.int32), np.zeros(1, np.int32)
    features[order].get_function("spin_lock")((2,), (128,), (lock, counter))
    assert counter[0] == 8 and lock[0] == 0


def test_resume_orders(features):
    def run(module):
        ticket, got = np.zeros(1, np.int32), np.zeros(64, np.int32)
        module.get_function("resume_order")((1,), (64,), (ticket, got))
        return got

    np.testing.assert_array_equal(run(features["forward"]), np.arange(64))
    np.testing.assert_array_equal(run(features["reverse"]), np.arange(64)[::-1])
    shuffled = run(features["random"])
    assert sorted(shuffled) == list(range(64))
    assert list(shuffled) not in (list(range(64)), list(range(64))[::-1])
    # Seeded: the n-th launch of a module made with the same seed resumes alike.
    first, second = (RawModule(code=FEATURES, order="random", seed=11) for _ in range(2))
    np.testing.assert_array_equal(run(first), run(second))
    assert list(run(first)) != list(run(second := RawModule(code=FEATURES, order="random", seed=12)))


def test_constant_memory(features):
    m = features["forward"]
    m.get_global("scale").view(np.float32)[:] = [1, 10, 100, 1000]
    x, y = np.ones(8, np.float32), np.zeros(8, np.float32)
    m.get_function("constants")((1,), (8,), (x, y))
    np.testing.assert_array_equal(y, [1, 10, 100, 1000] * 2)
    with pytest.raises(AttributeError, match="no __constant__ 'nope'.*scale"):
        m.get_global("nope")


def test_math_intrinsics(features):
    x = np.array([0.3, 1.0, 2.5, 7.0], np.float32)
    y = np.zeros(16 * 4, np.float32)
    features["forward"].get_function("math_f32")((1,), (4,), (x, y))
    import math
    want = [[math.exp(v), math.log(v), math.tanh(v), math.erf(v), math.sqrt(v), 1 / math.sqrt(v),
             max(v, 1), min(v, 1), math.log1p(v), math.expm1(v), math.exp(v), v / 3, v ** 1.5,
             max(v, 2), v, math.erfc(v)] for v in x.astype(float)]
    np.testing.assert_allclose(y.reshape(4, 16), want, rtol=2e-6)
    xd, yd = x.astype(np.float64), np.zeros(40)
    features["forward"].get_function("math_f64")((1,), (4,), (xd, yd))
    want = [[math.exp(v), math.log(v), math.tanh(v), math.erf(v), math.sqrt(v), 1 / math.sqrt(v),
             max(v, 1), math.log1p(v), math.expm1(v), min(v, 2)] for v in xd]
    np.testing.assert_allclose(yd.reshape(4, 10), want, rtol=1e-14)


def test_large_locals_fit_the_fiber_stack(features):
    y = np.zeros(64, np.float32)
    features["forward"].get_function("deep_stack")((2,), (64,), (y,))
    assert (y == 4095 * 4096 / 2).all()


def test_scalar_marshalling(features):
    f = features["forward"].get_function("scalars")
    y = np.zeros(5, np.float32)
    f((1,), (1,), (y, np.int32(-3), 2**40, np.float32(1.5), 2.25, True))   # int -> i64, float -> f64
    np.testing.assert_array_equal(y, [-3, 2.0**40, 1.5, 2.25, 1])
    features["forward"].get_function("no_args")(1, 1, ())


def test_launches_from_threads_are_serialised(features):
    f = features["forward"].get_function("reverse_shared")
    x = np.arange(8 * 64, dtype=np.float32)
    results = [None] * 4

    def work(k):
        y, z = np.zeros_like(x), np.zeros_like(x)
        for _ in range(5):
            f((8,), (64,), (x, y, z), shared_mem=256)
        results[k] = y

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = x.reshape(8, 64)[:, ::-1].ravel()
    for y in results:
        np.testing.assert_array_equal(y, want)


def test_portable_context_switch(tmp_path, monkeypatch):
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(tmp_path))
    monkeypatch.setenv("TAPEGPU_EMU_UCONTEXT", "1")
    m = RawModule(code=FEATURES, order="reverse")
    m._lib.emu_context_switch.restype = __import__("ctypes").c_char_p
    assert m._lib.emu_context_switch() == b"ucontext"
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    out, outd = np.zeros(4 * 64, np.float32), np.zeros(64)
    m.get_function("shuffles")((1,), (64,), (x, out, x.astype(np.float64), outd, np.int32(3), np.int32(8)))
    np.testing.assert_array_equal(out[3 * 64:], _shuffle_reference(x, "xor", 3, 8))
    ticket, got = np.zeros(1, np.int32), np.zeros(64, np.int32)
    m.get_function("resume_order")((1,), (64,), (ticket, got))
    np.testing.assert_array_equal(got, np.arange(64)[::-1])


# ------------------------------------------------------------ deliberate bugs
def test_missing_barrier_is_caught_by_some_order(broken):
    x = np.arange(64, dtype=np.float32)
    results = {}
    for o in ("forward", "reverse"):
        out = np.zeros(1, np.float32)
        broken("missing_barrier", order=o).get_function("block_sum")((1,), (64,), (x, out, 64),
                                                                     shared_mem=256)
        results[o] = out[0]
    assert any(r != x.sum() for r in results.values()), results
    for o in ("forward", "reverse"):   # the fixed kernel is right in every order
        out = np.zeros(1, np.float32)
        broken("missing_barrier", order=o, options=("-DFIXED",)).get_function("block_sum")(
            (1,), (64,), (x, out, 64), shared_mem=256)
        assert out[0] == x.sum()


@pytest.mark.parametrize("kernel,where", [("copy_past_end", "byte 0 past its end"),
                                          ("copy_before_start", "4 bytes before its start")])
def test_out_of_bounds_write(kernel, where, broken):
    x, y = np.ones(100, np.float32), np.zeros(100, np.float32)
    with pytest.raises(EmuOutOfBoundsError, match=f"argument 1 \\(y\\).*{where}.*400 bytes"):
        broken("out_of_bounds").get_function(kernel)((1,), (32,), (x, y, 100))
    assert (y == 0).all()  # nothing is copied back from a failed launch


def test_divergent_barrier(order, broken):
    y = np.zeros(32, np.float32)
    with pytest.raises(EmuKernelError, match=r"divergent __syncthreads in block \(0,0,0\): "
                                             r"thread 0 waits at line 5, thread 16 at line 8"):
        broken("divergent_barrier", order=order).get_function("divergent")((1,), (32,), (y,))


def test_barrier_after_exit(order, broken):
    y = np.zeros(64, np.float32)
    with pytest.raises(EmuKernelError, match=r"__syncthreads at line 8 in block \(0,0,0\) after 24 of 64 "
                                             r"threads exited.*threads 0-39 wait at __syncthreads"):
        broken("barrier_after_exit", order=order).get_function("early_exit")((1,), (64,), (y, 40))
    y = np.zeros(64, np.float32)  # every thread reaches the barrier: fine
    broken("barrier_after_exit", order=order).get_function("early_exit")((1,), (64,), (y, 64))
    assert (y == 2).all()


def test_deadlock_reports_who_waits_where(order, broken):
    y = np.zeros(32, np.float32)
    with pytest.raises(EmuKernelError, match=r"deadlock in block \(0,0,0\): threads 0-15 wait at "
                                             r"__syncthreads \(line 6\); threads 16-31 wait at "
                                             r"__shfl_sync \(line 8, mask 0xffffffff\)"):
        broken("deadlock", order=order).get_function("crossed")((1,), (32,), (y,))


def test_warp_collective_naming_an_exited_lane():
    m = RawModule(code=r'''
extern "C" __global__ void half(float *y) {
  if (threadIdx.x >= 16) return;
  y[threadIdx.x] = __shfl_down_sync(0xffffffffu, y[threadIdx.x], 1);
}''', order="reverse")
    with pytest.raises(EmuKernelError, match=r"__shfl_down_sync at line 4: mask 0xffffffff names lane 16, "
                                             r"which has already exited"):
        m.get_function("half")((1,), (32,), (np.zeros(32, np.float32),))


def test_device_assert(order, broken):
    x = np.ones(300, np.float32)
    x[201] = -1
    with pytest.raises(EmuKernelError, match=r"device assert `x\[i\] >= 0.0f` failed at .*device_assert.cu:6 "
                                             r"in block \(1,0,0\) thread \(9,0,0\)"):
        broken("device_assert", order=order).get_function("check_non_negative")((2,), (64,), (x, 300))


def test_error_leaves_the_emulator_usable(features, broken):
    with pytest.raises(EmuKernelError):
        broken("deadlock").get_function("crossed")((1,), (32,), (np.zeros(32, np.float32),))
    test_static_and_dynamic_shared_are_per_block(features, "forward")


def test_compile_error_names_the_file_and_line(broken):
    with pytest.raises(EmuCompileError, match=r"compile_error.cu:3.*undeclared_name"):
        broken("compile_error")


# ------------------------------------------------------------ launch configuration
@pytest.mark.parametrize("grid,block,shared,match", [
    ((1,), (1025,), 0, r"block.x = 1025 is outside \[1, 1024\]"),
    ((1,), (64, 32), 0, r"block \(64, 32, 1\) has 2048 threads; at most 1024"),
    ((1,), (1, 1, 65), 0, r"block.z = 65 is outside \[1, 64\]"),
    ((0,), (32,), 0, r"grid.x = 0 is outside"),
    ((1, 70000), (32,), 0, r"grid.y = 70000 is outside \[1, 65535\]"),
    ((1, 1, 1, 1), (32,), 0, r"1 to 3 dimensions"),
    ((1,), (32,), 48 * 1024 + 4, r"49156 bytes of dynamic shared memory.*48 KiB"),
])
def test_bad_launch_configuration(features, grid, block, shared, match):
    f = features["forward"].get_function("read_unwritten")
    with pytest.raises(EmuLaunchError, match=match):
        f(grid, block, (np.zeros(2048, np.uint32),), shared_mem=shared)


# ------------------------------------------------------------ argument marshalling
@pytest.mark.parametrize("args,match", [
    ((np.zeros(5, np.float32), 1, 2, np.float32(1), 2.0, True),
     r"argument 1 \(a\) is int32 but gets int64 \(a Python int is passed as int64, as CuPy does\); "
     r"pass numpy.int32"),
    ((np.zeros(5, np.float32), np.int32(1), 2, 1.0, 2.0, True),
     r"argument 3 \(c\) is float but gets float64 \(a Python float is passed as float64"),
    ((np.zeros(5, np.float32), np.int32(1), np.int32(2), np.float32(1), 2.0, True),
     r"argument 2 \(b\) is int64 but gets int32"),
    ((np.zeros(5, np.float64), np.int32(1), 2, np.float32(1), 2.0, True),
     r"argument 0 \(y\) is float\* but the array has dtype float64"),
    ((np.zeros(5, np.float32), np.int32(1), 2, np.float32(1), 2.0),
     r"scalars takes 6 arguments \(y, a, b, c, d, e\), got 5"),
    ((np.zeros(5, np.float32), np.int32(1), 2, np.float32(1), 2.0, True, 1), r"takes 6 arguments"),
    ((np.zeros(10, np.float32)[::2], np.int32(1), 2, np.float32(1), 2.0, True), r"not C-contiguous"),
    ((5, np.int32(1), 2, np.float32(1), 2.0, True), r"argument 0 \(y\) is a pointer \(float\*\); got int"),
    ((np.zeros(5, np.float32), np.zeros(1, np.int32), 2, np.float32(1), 2.0, True),
     r"argument 1 \(a\) is a scalar \(int32\); got an array"),
    ((np.zeros(5, np.float32), np.int32(1), 2, np.float32(1), 2.0, "x"), r"cannot pass str"),
])
def test_bad_arguments(features, args, match):
    f = features["forward"].get_function("scalars")
    with pytest.raises(EmuArgumentError, match=match):
        f((1,), (1,), args)


def test_same_array_twice_is_one_buffer(features):
    """In place: x and y are one array, as they would be one pointer on a GPU."""
    x = np.arange(64, dtype=np.float32)
    features["forward"].get_function("reverse_shared")((1,), (64,), (x, x, np.zeros(64, np.float32)),
                                                       shared_mem=256)
    np.testing.assert_array_equal(x, np.arange(64)[::-1])
    with pytest.raises(EmuArgumentError, match=r"argument 1 \(y\) overlaps argument 0 \(x\)"):
        features["forward"].get_function("reverse_shared")((1,), (32,), (x[:32], x[16:48], x[48:]))


def test_read_only_array_for_a_writable_pointer(features):
    y = np.zeros(5, np.float32)
    y.flags.writeable = False
    with pytest.raises(EmuArgumentError, match="read-only"):
        features["forward"].get_function("scalars")((1,), (1,), (y, np.int32(1), 2, np.float32(1), 2.0, True))


def test_unknown_kernel(features):
    with pytest.raises(AttributeError, match="has no kernel 'nope'.*indices"):
        features["forward"].get_function("nope")


def test_raw_module_arguments():
    with pytest.raises(ValueError, match="exactly one of"):
        RawModule()
    with pytest.raises(ValueError, match="order must be one of"):
        RawModule(code="", order="sideways")


def test_parameter_type_codes():
    """Each parameter's code, as Python checks arguments against it: cv-qualifiers of a value
    dropped, a const pointee marked, pointers to pointers as '?', other types by size."""
    code = r'''
    struct three { char c[3]; };
    enum colour { red };
    extern "C" __global__ void k(const float *__restrict__ a, float *b, long long n, int i,
        unsigned u, bool f, double d, void *v, const void *cv, float **pp,
        const float *const *cpp, char c, unsigned char uc, signed char sc, short s,
        unsigned short us, unsigned long long ull, three t, colour e, const int ci,
        volatile float *vf, const volatile double *cvd, char16_t c16, float *const fc) {}
    extern "C" __global__ void none() {}
    '''
    module = RawModule(code=code)
    assert module.get_function("k").param_types == (
        "cf4*", "f4*", "i8", "i4", "u4", "b1", "f8", "v*", "cv*", "?*", "c?*", "i1", "u1", "i1",
        "i2", "u2", "u8", "x3", "x4", "i4", "f4*", "cf8*", "u2", "f4*")
    assert module.get_function("none").param_types == ()


def test_file_scope_extern_shared_is_rejected():
    with pytest.raises(EmuCompileError, match=":1: extern __shared__ at file scope"):
        RawModule(code='extern __shared__ float s[];\nextern "C" __global__ void k() {}')


# ------------------------------------------------------------ build cache
def test_cache_reuses_a_build_and_rebuilds_on_change(tmp_path, monkeypatch):
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(tmp_path))
    code = 'extern "C" __global__ void k(float *y) { y[threadIdx.x] = 1.0f; }'
    path, key = emu_build.build_library(code, "k.cu")
    assert path.parent == tmp_path and key in path.name
    mtime = path.stat().st_mtime_ns
    monkeypatch.setattr(emu_build, "_compile", lambda *a: pytest.fail("rebuilt a cached library"))
    assert emu_build.build_library(code, "k.cu") == (path, key)
    assert path.stat().st_mtime_ns == mtime
    assert emu_build.content_hash(code + " ") != key
    assert emu_build.content_hash(code, ("-DX",)) != key
    manifest = emu_build.manifest_path(tmp_path, "k", key)
    assert sorted(p.name for p in tmp_path.iterdir() if not emu_build.is_shared_part(p)) == \
        sorted([path.name, manifest.name])  # no temporary left behind


def test_cached_library_with_a_wrong_hash_is_refused(tmp_path, monkeypatch):
    """A library that passes the file checks (see test_emu_cache.py) but was built for another
    source is still refused by the hash it carries."""
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(tmp_path))
    a = 'extern "C" __global__ void a(float *y) {}'
    b = 'extern "C" __global__ void b(float *y) {}'
    path_a, key_a = emu_build.build_library(a, "<code>")
    key_b = emu_build.content_hash(b)
    manifest = json.loads(emu_build.manifest_path(tmp_path, "_code_", key_a).read_text())
    manifest["key"] = key_b
    manifest["library"] = path_a.name.replace(key_a, key_b)
    (tmp_path / manifest["library"]).write_bytes(path_a.read_bytes())
    emu_build.manifest_path(tmp_path, "_code_", key_b).write_text(json.dumps(manifest))
    with pytest.raises(EmuCompileError, match="does not match its content hash"):
        RawModule(code=b)


def test_concurrent_builds_of_one_library(tmp_path):
    script = (
        "import numpy as np\n"
        "from tapegpu.backends.emu import RawModule\n"
        "m = RawModule(code='extern \"C\" __global__ void k(float *y) { y[threadIdx.x] = 2.0f; }')\n"
        "y = np.zeros(4, np.float32); m.get_function('k')(1, 4, (y,)); assert (y == 2).all()\n")
    env = dict(os.environ, TAPEGPU_EMU_CACHE=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE)
             for _ in range(2)]
    for p in procs:
        assert p.wait(timeout=60) == 0, p.stderr.read().decode()
    own = [p for p in tmp_path.iterdir() if not emu_build.is_shared_part(p)]
    assert len([p for p in own if p.suffix == ".so"]) == 1
    assert len([p for p in own if p.suffix == ".json"]) == 1
    assert not [p for p in own if p.suffix not in (".so", ".json")]


def test_stack_overflow_is_reported(tmp_path):
    """A thread that outgrows its fiber stack (64 KiB, 512 KiB under ASan) hits a guard page; the
    process then stops with a message instead of a bare SIGSEGV."""
    script = (
        "import numpy as np\n"
        "from tapegpu.backends.emu import RawModule\n"
        "m = RawModule(code='''extern \"C\" __global__ void big(float *y) {\n"
        "  volatile float local[256 * 1024];\n"
        "  for (int i = 0; i < 256 * 1024; ++i) local[i] = (float)i;\n"
        "  y[threadIdx.x] = local[threadIdx.x];\n"
        "}''')\n"
        "m.get_function('big')(1, 2, (np.zeros(2, np.float32),))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "stack overflow in block (0,0,0) thread (0,0,0)" in r.stderr or "stack-overflow" in r.stderr


AARCH64_MAIN = r'''
#include <math.h>
#include <stdio.h>
extern "C" const char *emu_last_error(void);
extern "C" const char *emu_context_switch(void);
int main() {
  static float x[128], y[128];
  for (int i = 0; i < 128; ++i) x[i] = (float)(i % 7);
  float *xp = x, *yp = y, *zp = y;
  void *args[] = {&xp, &yp, &zp};
  for (int order = 0; order < 3; ++order) {
    long long config[9] = {2, 1, 1, 64, 1, 1, 256, order, 7};
    if (emu_launch_reverse_shared(config, args)) { printf("%s\n", emu_last_error()); return 1; }
    for (int i = 0; i < 128; ++i)
      if (y[i] != 2.0f * x[(i / 64) * 64 + 63 - i % 64]) { printf("wrong at %d\n", i); return 1; }
  }
  printf("%s ok\n", emu_context_switch());
  return 0;
}
'''


@pytest.mark.skipif(not (shutil.which("aarch64-linux-gnu-g++") and shutil.which("qemu-aarch64")),
                    reason="needs aarch64-linux-gnu-g++ and qemu-aarch64 (Debian: g++-aarch64-linux-gnu, "
                           "qemu-user)")
def test_aarch64_context_switch_under_qemu(tmp_path):
    """The aarch64 assembly switch, cross-compiled and run under qemu-user."""
    kernels, constants = emu_build.parse(emu_build.preprocess(FEATURES))
    source = emu_build.generate(FEATURES, "features.cu", kernels, constants, "test")
    (tmp_path / "main.cpp").write_text(source + AARCH64_MAIN)
    exe = tmp_path / "features"
    subprocess.run(["aarch64-linux-gnu-g++", "-std=c++17", "-O2", "-static", "-I", str(emu_build.HERE),
                    str(tmp_path / "main.cpp"), str(emu_build.RUNTIME), "-o", str(exe)], check=True)
    r = subprocess.run(["qemu-aarch64", str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "aarch64 assembly ok", r.stdout + r.stderr
