// Sums that un-broadcast cotangents.
//
// A cotangent g of shape batch_shape + full_shape is reduced to
// batch_shape + in_shape by summing over the axes where in_shape broadcast.
// The launch layer collapses the axes into (outer, reduce, inner) groups and
// calls one of these kernels per group of reduced axes:
//
//   out[o, i] = sum_r g[o, r, i]
//
// tapegpu_sum_middle: one thread per output element, looping over r; reads
//   are coalesced along i. Used when inner > 1.
// tapegpu_sum_last:   inner == 1, one block per output element; the block's
//   threads stride over r and combine through warp shuffles and shared memory.

typedef long long i64;

template <typename T>
__device__ void sum_middle(const T *g, T *out, i64 outer, i64 reduce, i64 inner) {
  i64 n = outer * inner;
  for (i64 j = blockIdx.x * (i64)blockDim.x + threadIdx.x; j < n; j += (i64)blockDim.x * gridDim.x) {
    i64 o = j / inner, i = j - o * inner;
    const T *src = g + o * reduce * inner + i;
    T acc = T(0);
    for (i64 r = 0; r < reduce; ++r) acc += src[r * inner];
    out[j] = acc;
  }
}

template <typename T> __device__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// Lane 0 of warp 0 ends up with the block's sum (blockDim.x a multiple of 32).
template <typename T> __device__ T block_sum(T v, T *partial) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : T(0);
  if (warp == 0) v = warp_sum(v);
  __syncthreads();  // `partial` is reused by the next row
  return v;
}

template <typename T> __device__ void sum_last(const T *g, T *out, i64 outer, i64 reduce) {
  __shared__ T partial[32];
  for (i64 o = blockIdx.x; o < outer; o += gridDim.x) {
    const T *row = g + o * reduce;
    T acc = T(0);
    for (i64 r = threadIdx.x; r < reduce; r += blockDim.x) acc += row[r];
    acc = block_sum(acc, partial);
    if (threadIdx.x == 0) out[o] = acc;
  }
}

extern "C" __global__ void tapegpu_sum_middle_fwd_f32(const float *g, float *out, i64 outer, i64 reduce,
                                                      i64 inner) {
  sum_middle(g, out, outer, reduce, inner);
}
extern "C" __global__ void tapegpu_sum_middle_fwd_f64(const double *g, double *out, i64 outer,
                                                      i64 reduce, i64 inner) {
  sum_middle(g, out, outer, reduce, inner);
}
extern "C" __global__ void tapegpu_sum_last_fwd_f32(const float *g, float *out, i64 outer, i64 reduce) {
  sum_last(g, out, outer, reduce);
}
extern "C" __global__ void tapegpu_sum_last_fwd_f64(const double *g, double *out, i64 outer, i64 reduce) {
  sum_last(g, out, outer, reduce);
}
