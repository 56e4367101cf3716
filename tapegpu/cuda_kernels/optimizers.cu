// Fused optimizer updates: one launch per variable, in place on the parameter
// and its slots. Optimizer updates have no backward; they are named
// tapegpu_<optimizer>_update_<f32|f64>. Rules are Keras's.
//
// SGD with momentum:  v = momentum * v - lr * g
//                     p += v                          (plain)
//                     p += momentum * v - lr * g      (Nesterov, with the new v)
// Adam:               m = b1 * m + (1 - b1) * g
//                     v = b2 * v + (1 - b2) * g^2
//                     p -= lr_t * m / (sqrt(v) + eps)
//   where lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t) is computed on the host.

typedef long long i64;

__device__ __forceinline__ float sqrt_(float x) { return sqrtf(x); }
__device__ __forceinline__ double sqrt_(double x) { return sqrt(x); }

template <typename T>
__device__ void sgd_update(T *p, const T *g, T *v, i64 n, T lr, T momentum, int nesterov) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x) {
    T vi = momentum * v[i] - lr * g[i];
    v[i] = vi;
    p[i] += nesterov ? momentum * vi - lr * g[i] : vi;
  }
}

template <typename T>
__device__ void adam_update(T *p, const T *g, T *m, T *v, i64 n, T lr_t, T b1, T b2, T eps) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x) {
    T gi = g[i];
    T mi = b1 * m[i] + (T(1) - b1) * gi;
    T vi = b2 * v[i] + (T(1) - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr_t * mi / (sqrt_(vi) + eps);
  }
}

extern "C" __global__ void tapegpu_sgd_update_f32(float *p, const float *g, float *v, i64 n, float lr,
                                                  float momentum, int nesterov) {
  sgd_update(p, g, v, n, lr, momentum, nesterov);
}
extern "C" __global__ void tapegpu_sgd_update_f64(double *p, const double *g, double *v, i64 n,
                                                  double lr, double momentum, int nesterov) {
  sgd_update(p, g, v, n, lr, momentum, nesterov);
}
extern "C" __global__ void tapegpu_adam_update_f32(float *p, const float *g, float *m, float *v, i64 n,
                                                   float lr_t, float b1, float b2, float eps) {
  adam_update(p, g, m, v, n, lr_t, b1, b2, eps);
}
extern "C" __global__ void tapegpu_adam_update_f64(double *p, const double *g, double *m, double *v,
                                                   i64 n, double lr_t, double b1, double b2,
                                                   double eps) {
  adam_update(p, g, m, v, n, lr_t, b1, b2, eps);
}
