// Asserts that every input is non-negative.
typedef long long i64;

extern "C" __global__ void check_non_negative(const float *x, i64 n) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x)
    assert(x[i] >= 0.0f);
}
