// Softmax, log-softmax and sparse softmax cross-entropy over the last axis.
//
// One block per row (grid-stride over rows); the threads of a block stride
// over the row, so rows of any length work. Row reductions go through warp
// shuffles, then through shared memory across the warps of the block.
//
//   softmax:      y = e^(x - m) / s,   m = max x, s = sum e^(x - m)
//   log-softmax:  y = x - m - log s
//   backward:     softmax      dx = y * (g - sum(g * y))
//                 log-softmax  dx = g - e^y * sum(g)
//   sparse xent:  loss = m + log s - z[label],  p = softmax(z)
//                 dz = g[row] * (p - onehot(label))
//
// Backward kernels take batched cotangents: g has rows_g = batch * rows rows,
// and row r of g pairs with row r % rows of the saved y.
// Labels are int64; a label outside [0, cols) gives a NaN loss (as on a GPU in
// TensorFlow) and a NaN gradient row.
// blockDim.x must be a multiple of 32 (the launch layer uses 32..256).

typedef long long i64;

__device__ __forceinline__ float ex(float x) { return expf(x); }
__device__ __forceinline__ double ex(double x) { return exp(x); }
__device__ __forceinline__ float lg(float x) { return logf(x); }
__device__ __forceinline__ double lg(double x) { return log(x); }
__device__ __forceinline__ float maxT(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double maxT(double a, double b) { return fmax(a, b); }
template <typename T> __device__ T neg_inf();
template <> __device__ float neg_inf<float>() { return -__int_as_float(0x7f800000); }
template <> __device__ double neg_inf<double>() { return -__longlong_as_double(0x7ff0000000000000LL); }
template <typename T> __device__ T quiet_nan();
template <> __device__ float quiet_nan<float>() { return __int_as_float(0x7fc00000); }
template <> __device__ double quiet_nan<double>() { return __longlong_as_double(0x7ff8000000000000LL); }

struct Sum { template <typename T> __device__ T operator()(T a, T b) const { return a + b; } };
struct Max { template <typename T> __device__ T operator()(T a, T b) const { return maxT(a, b); } };

// Butterfly reduction: after it, every lane holds the reduction of the warp.
template <typename T, typename Op> __device__ T warp_reduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Every thread returns the reduction over the block. Each warp reduces, lane 0
// posts the warp's value, and then every warp reduces the (at most 32) posted
// values, so no broadcast step is needed. The trailing barrier keeps the next
// call from overwriting `partial` before every warp has read it.
template <typename T, typename Op> __device__ T block_reduce(T v, Op op, T identity, T *partial) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_reduce(v, op);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < nwarps ? partial[lane] : identity;
  v = warp_reduce(v, op);
  __syncthreads();
  return v;
}

// m = max x and s = sum e^(x - m) over one row.
template <typename T> __device__ void row_max_sumexp(const T *x, i64 cols, T *partial, T &m, T &s) {
  T local = neg_inf<T>();
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) local = maxT(local, x[c]);
  m = block_reduce(local, Max(), neg_inf<T>(), partial);
  T acc = T(0);
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) acc += ex(x[c] - m);
  s = block_reduce(acc, Sum(), T(0), partial);
}

template <typename T> __device__ void softmax_fwd(const T *x, T *y, i64 rows, i64 cols, bool log_out) {
  __shared__ T partial[32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    T m, s;
    row_max_sumexp(xr, cols, partial, m, s);
    T log_s = lg(s), inv_s = T(1) / s;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x)
      yr[c] = log_out ? xr[c] - m - log_s : ex(xr[c] - m) * inv_s;
  }
}

template <typename T>
__device__ void softmax_bwd(const T *g, const T *y, T *dx, i64 rows_g, i64 rows, i64 cols, bool log_in) {
  __shared__ T partial[32];
  for (i64 r = blockIdx.x; r < rows_g; r += gridDim.x) {
    const T *gr = g + r * cols, *yr = y + (r % rows) * cols;
    T *dr = dx + r * cols;
    T acc = T(0);
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) acc += log_in ? gr[c] : gr[c] * yr[c];
    T total = block_reduce(acc, Sum(), T(0), partial);
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x)
      dr[c] = log_in ? gr[c] - ex(yr[c]) * total : yr[c] * (gr[c] - total);
  }
}

template <typename T>
__device__ void xent_fwd(const T *z, const i64 *labels, T *loss, T *p, i64 rows, i64 cols) {
  __shared__ T partial[32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *zr = z + r * cols;
    T *pr = p + r * cols;
    T m, s;
    row_max_sumexp(zr, cols, partial, m, s);
    T inv_s = T(1) / s;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) pr[c] = ex(zr[c] - m) * inv_s;
    if (threadIdx.x == 0) {
      i64 label = labels[r];
      loss[r] = label >= 0 && label < cols ? m + lg(s) - zr[label] : quiet_nan<T>();
    }
  }
}

template <typename T>
__device__ void xent_bwd(const T *g, const T *p, const i64 *labels, T *dz, i64 rows, i64 cols) {
  i64 n = rows * cols;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x) {
    i64 r = i / cols, c = i - r * cols, label = labels[r];
    T onehot = c == label ? T(1) : T(0);
    dz[i] = label >= 0 && label < cols ? g[r] * (p[i] - onehot) : quiet_nan<T>();
  }
}

// ------------------------------------------------------------ entry points
#define TAPEGPU_SOFTMAX(T, SUFFIX)                                                               \
  extern "C" __global__ void tapegpu_softmax_fwd_##SUFFIX(const T *x, T *y, i64 rows, i64 cols) { \
    softmax_fwd(x, y, rows, cols, false);                                                        \
  }                                                                                              \
  extern "C" __global__ void tapegpu_log_softmax_fwd_##SUFFIX(const T *x, T *y, i64 rows,        \
                                                              i64 cols) {                        \
    softmax_fwd(x, y, rows, cols, true);                                                         \
  }                                                                                              \
  extern "C" __global__ void tapegpu_softmax_bwd_##SUFFIX(const T *g, const T *y, T *dx,         \
                                                          i64 rows_g, i64 rows, i64 cols) {      \
    softmax_bwd(g, y, dx, rows_g, rows, cols, false);                                            \
  }                                                                                              \
  extern "C" __global__ void tapegpu_log_softmax_bwd_##SUFFIX(const T *g, const T *y, T *dx,     \
                                                              i64 rows_g, i64 rows, i64 cols) {  \
    softmax_bwd(g, y, dx, rows_g, rows, cols, true);                                             \
  }                                                                                              \
  extern "C" __global__ void tapegpu_sparse_xent_fwd_##SUFFIX(const T *z, const i64 *labels,     \
                                                              T *loss, T *p, i64 rows, i64 cols) { \
    xent_fwd(z, labels, loss, p, rows, cols);                                                    \
  }                                                                                              \
  extern "C" __global__ void tapegpu_sparse_xent_bwd_##SUFFIX(const T *g, const T *p,            \
                                                              const i64 *labels, T *dz,          \
                                                              i64 rows, i64 cols) {              \
    xent_bwd(g, p, labels, dz, rows, cols);                                                      \
  }

TAPEGPU_SOFTMAX(float, f32)
TAPEGPU_SOFTMAX(double, f64)
