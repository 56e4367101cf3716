// The two halves of the block wait at different __syncthreads.
extern "C" __global__ void divergent(float *y) {
  if (threadIdx.x < 16) {
    y[threadIdx.x] = 1.0f;
    __syncthreads();
  } else {
    y[threadIdx.x] = 2.0f;
    __syncthreads();
  }
}
