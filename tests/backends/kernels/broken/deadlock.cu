// Lanes 0-15 wait at a block barrier; lanes 16-31 wait at a shuffle that
// names lanes 0-15 too. Neither collective can complete.
extern "C" __global__ void crossed(float *y) {
  float v = y[threadIdx.x];
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    v = __shfl_sync(0xffffffffu, v, 0);
  }
  y[threadIdx.x] = v;
}
