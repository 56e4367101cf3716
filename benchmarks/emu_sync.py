"""Cost of the CUDA emulator: per thread per __syncthreads, per warp shuffle,
and a 1M-element reduction, for the assembly and the ucontext context switch.

    python benchmarks/emu_sync.py

Each number is the best of several runs; the cost per barrier is the slope
between a kernel with many barriers and the same kernel with none."""

import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tapegpu.backends.emu import RawModule  # noqa: E402

SOURCE = r'''
typedef long long i64;

extern "C" __global__ void barriers(float *y, int rounds) {
  float v = (float)threadIdx.x;
  for (int r = 0; r < rounds; ++r) __syncthreads();
  y[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

extern "C" __global__ void shuffles(float *y, int rounds) {
  float v = (float)threadIdx.x;
  for (int r = 0; r < rounds; ++r) v = __shfl_xor_sync(0xffffffffu, v, 1);
  y[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

// Grid-stride sum: warp shuffles, then shared memory across warps, one atomicAdd per block.
extern "C" __global__ void reduce_sum(const float *x, float *out, i64 n) {
  __shared__ float partial[32];
  float v = 0.0f;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x)
    v += x[i];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) atomicAdd(out, v);
  }
}
'''


def best(f, repeats=5):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def per_thread_per_round(module, kernel, blocks=8, threads=256, rounds=200):
    f = module.get_function(kernel)
    y = np.zeros(blocks * threads, np.float32)
    t_many = best(lambda: f((blocks,), (threads,), (y, np.int32(rounds))))
    t_none = best(lambda: f((blocks,), (threads,), (y, np.int32(0))))
    return (t_many - t_none) / (blocks * threads * rounds)


def main():
    for switch in ("assembly", "ucontext"):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["TAPEGPU_EMU_CACHE"] = cache
            os.environ["TAPEGPU_EMU_UCONTEXT"] = "1" if switch == "ucontext" else "0"
            t = time.perf_counter()
            module = RawModule(code=SOURCE)
            build = time.perf_counter() - t
            t = time.perf_counter()
            RawModule(code=SOURCE)
            load = time.perf_counter() - t
            sync = per_thread_per_round(module, "barriers")
            shfl = per_thread_per_round(module, "shuffles")
            x = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
            out = np.zeros(1, np.float32)
            f = module.get_function("reduce_sum")
            reduce = best(lambda: f((120,), (256,), (x, out, np.int64(x.size))))
            print(f"{switch:9s} build {build:5.2f} s, cached load {load * 1e3:5.2f} ms, "
                  f"__syncthreads {sync * 1e9:6.1f} ns/thread, __shfl_xor_sync {shfl * 1e9:6.1f} ns/thread, "
                  f"1M-element reduction (120 x 256) {reduce * 1e3:6.1f} ms")


if __name__ == "__main__":
    main()
