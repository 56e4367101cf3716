// Block sum through shared memory with the barrier between the stores and the
// reads left out (compile with -DFIXED to put it back). Thread 0 reads slots
// other threads may not have written yet: wrong in at least one resume order.
typedef long long i64;

extern "C" __global__ void block_sum(const float *x, float *out, i64 n) {
  extern __shared__ float slot[];
  slot[threadIdx.x] = threadIdx.x < n ? x[threadIdx.x] : 0.0f;
#ifdef FIXED
  __syncthreads();
#endif
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (unsigned i = 0; i < blockDim.x; ++i) total += slot[i];
    out[0] = total;
  }
}
