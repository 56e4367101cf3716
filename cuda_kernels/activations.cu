// Elementwise activations: forward, backward and bias + activation.
//
// Forward:   y = f(x)
// Backward:  dx = g * f'(.), in one pass from what the op saved: the output y
//            for relu, elu, sigmoid and tanh (f' is a function of y), the input
//            x for gelu and softplus.
// Batched VJP: g may hold any number of cotangents for one saved activation
//            (g.shape == batch_shape + x.shape); element i of g pairs with
//            saved element i % n_saved.
//
// Entry points: tapegpu_<act>_<fwd|bwd>_<f32|f64> and tapegpu_bias_<act>_fwd_<f32|f64>
// (y = f(x + b) with b along the last axis), one set per TAPEGPU_ACTIVATION line: the
// launch layer reads the activations from those lines.

typedef long long i64;

// ------------------------------------------------------------ libm by type
__device__ __forceinline__ float ex(float x) { return expf(x); }
__device__ __forceinline__ double ex(double x) { return exp(x); }
__device__ __forceinline__ float lg1p(float x) { return log1pf(x); }
__device__ __forceinline__ double lg1p(double x) { return log1p(x); }
__device__ __forceinline__ float em1(float x) { return expm1f(x); }
__device__ __forceinline__ double em1(double x) { return expm1(x); }
__device__ __forceinline__ float th(float x) { return tanhf(x); }
__device__ __forceinline__ double th(double x) { return tanh(x); }
__device__ __forceinline__ float erf_(float x) { return erff(x); }
__device__ __forceinline__ double erf_(double x) { return erf(x); }
__device__ __forceinline__ float abs_(float x) { return fabsf(x); }
__device__ __forceinline__ double abs_(double x) { return fabs(x); }

// ------------------------------------------------------------ activations
// relu(x) = max(x, 0) with NaN kept (numpy's maximum);  relu'(x) = [y > 0]
template <typename T> __device__ T relu_f(T x) { return x > T(0) || x != x ? x : T(0); }
template <typename T> __device__ T relu_d(T y) { return y > T(0) ? T(1) : T(0); }

// elu(x) = x if x > 0 else e^x - 1 (alpha = 1);  elu'(x) = 1 if y > 0 else y + 1
template <typename T> __device__ T elu_f(T x) { return x > T(0) ? x : em1(x); }
template <typename T> __device__ T elu_d(T y) { return y > T(0) ? T(1) : y + T(1); }

// sigmoid(x) = 1 / (1 + e^-x), evaluated without overflow for either sign;
// sigmoid'(x) = y (1 - y)
template <typename T> __device__ T sigmoid_f(T x) {
  if (x >= T(0)) return T(1) / (T(1) + ex(-x));
  T e = ex(x);
  return e / (T(1) + e);
}
template <typename T> __device__ T sigmoid_d(T y) { return y * (T(1) - y); }

// tanh'(x) = 1 - y^2
template <typename T> __device__ T tanh_f(T x) { return th(x); }
template <typename T> __device__ T tanh_d(T y) { return T(1) - y * y; }

// softplus(x) = log(1 + e^x) = max(x, 0) + log1p(e^-|x|);  softplus'(x) = sigmoid(x)
template <typename T> __device__ T softplus_f(T x) { return relu_f(x) + lg1p(ex(-abs_(x))); }
template <typename T> __device__ T softplus_d(T x) { return sigmoid_f(x); }

// gelu(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2  (exact form, not tanh);
// gelu'(x) = Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi)
template <typename T> __device__ T gelu_f(T x) {
  return T(0.5) * x * (T(1) + erf_(x * T(0.70710678118654752440)));
}
template <typename T> __device__ T gelu_d(T x) {
  T cdf = T(0.5) * (T(1) + erf_(x * T(0.70710678118654752440)));
  T pdf = ex(T(-0.5) * x * x) * T(0.39894228040143267794);
  return cdf + x * pdf;
}

// ------------------------------------------------------------ loops
template <typename T, T (*F)(T)>
__device__ void map_fwd(const T *x, T *y, i64 n) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x)
    y[i] = F(x[i]);
}

// dx[i] = g[i] * D(saved[i % n_saved]) for i < n_g (n_g is a multiple of n_saved).
template <typename T, T (*D)(T)>
__device__ void map_bwd(const T *g, const T *saved, T *dx, i64 n_g, i64 n_saved) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n_g; i += (i64)blockDim.x * gridDim.x) {
    i64 j = n_g == n_saved ? i : i % n_saved;
    dx[i] = g[i] * D(saved[j]);
  }
}

// y[r, c] = f(x[r, c] + b[c])
template <typename T, T (*F)(T)>
__device__ void map_bias_fwd(const T *x, const T *b, T *y, i64 rows, i64 cols) {
  i64 n = rows * cols;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x)
    y[i] = F(x[i] + b[i % cols]);
}

#define TAPEGPU_ACTIVATION(NAME, T, SUFFIX)                                                \
  extern "C" __global__ void tapegpu_##NAME##_fwd_##SUFFIX(const T *x, T *y, i64 n) {     \
    map_fwd<T, NAME##_f<T> >(x, y, n);                                                   \
  }                                                                                      \
  extern "C" __global__ void tapegpu_##NAME##_bwd_##SUFFIX(const T *g, const T *saved,   \
                                                           T *dx, i64 n_g, i64 n_saved) { \
    map_bwd<T, NAME##_d<T> >(g, saved, dx, n_g, n_saved);                                \
  }                                                                                      \
  extern "C" __global__ void tapegpu_bias_##NAME##_fwd_##SUFFIX(const T *x, const T *b,  \
                                                                T *y, i64 rows, i64 cols) { \
    map_bias_fwd<T, NAME##_f<T> >(x, b, y, rows, cols);                                  \
  }

TAPEGPU_ACTIVATION(relu, float, f32)
TAPEGPU_ACTIVATION(relu, double, f64)
TAPEGPU_ACTIVATION(elu, float, f32)
TAPEGPU_ACTIVATION(elu, double, f64)
TAPEGPU_ACTIVATION(gelu, float, f32)
TAPEGPU_ACTIVATION(gelu, double, f64)
TAPEGPU_ACTIVATION(sigmoid, float, f32)
TAPEGPU_ACTIVATION(sigmoid, double, f64)
TAPEGPU_ACTIVATION(tanh, float, f32)
TAPEGPU_ACTIVATION(tanh, double, f64)
TAPEGPU_ACTIVATION(softplus, float, f32)
TAPEGPU_ACTIVATION(softplus, double, f64)
