// Off-by-one copies: one writes one element past the end, one before the start.
typedef long long i64;

extern "C" __global__ void copy_past_end(const float *x, float *y, i64 n) {
  for (i64 i = threadIdx.x; i <= n; i += blockDim.x) y[i] = i < n ? x[i] : 0.0f;
}

extern "C" __global__ void copy_before_start(const float *x, float *y, i64 n) {
  for (i64 i = threadIdx.x; i < n; i += blockDim.x) y[i - 1] = x[i];
}
