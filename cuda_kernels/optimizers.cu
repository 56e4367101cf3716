// Fused optimizer updates, in place on the parameters and their slots: one launch
// per variable (tapegpu_<optimizer>_update_<f32|f64>), or one launch for up to
// TAPEGPU_MULTI variables of one dtype (tapegpu_<optimizer>_multi_update_<f32|f64>).
// Both run the same per-element step, so their results are equal bit for bit.
// The `_devlr` entry points take the step's learning rate (SGD's lr, Adam's lr_t) as
// a pointer to one element in device memory instead of by value: a CUDA graph
// replays a launch with the arguments it was captured with, so a graph's update
// reads the rate its own kernels computed for that step (tapegpu/optimizers/base.py,
// tapegpu/function/capture.py). Every thread reads the same value, and the
// per-element step is the same function: equal bits for equal rates.
// Optimizer updates have no backward. Rules are Keras's.
//
// SGD with momentum:  v = momentum * v - lr * g
//                     p += v                          (plain)
//                     p += momentum * v - lr * g      (Nesterov, with the new v)
// Adam:               m = b1 * m + (1 - b1) * g
//                     v = b2 * v + (1 - b2) * g^2
//                     p -= lr_t * m / (sqrt(v) + eps)
//   where lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t) is computed on the host (by the
//   device, from the step count, in a captured graph: the _devlr entry points).

typedef long long i64;

__device__ __forceinline__ float sqrt_(float x) { return sqrtf(x); }
__device__ __forceinline__ double sqrt_(double x) { return sqrt(x); }

// One element of each rule. A null velocity reads as 0 and is not written (SGD
// without momentum in the multi-tensor kernel).
template <typename T>
__device__ __forceinline__ void sgd_step(T *p, const T *g, T *v, i64 i, T lr, T momentum,
                                         int nesterov) {
  T vi = momentum * (v ? v[i] : T(0)) - lr * g[i];
  if (v) v[i] = vi;
  p[i] += nesterov ? momentum * vi - lr * g[i] : vi;
}

template <typename T>
__device__ __forceinline__ void adam_step(T *p, const T *g, T *m, T *v, i64 i, T lr_t, T b1, T b2,
                                          T eps) {
  T gi = g[i];
  T mi = b1 * m[i] + (T(1) - b1) * gi;
  T vi = b2 * v[i] + (T(1) - b2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  p[i] -= lr_t * mi / (sqrt_(vi) + eps);
}

template <typename T>
__device__ void sgd_update(T *p, const T *g, T *v, i64 n, T lr, T momentum, int nesterov) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x)
    sgd_step(p, g, v, i, lr, momentum, nesterov);
}

template <typename T>
__device__ void adam_update(T *p, const T *g, T *m, T *v, i64 n, T lr_t, T b1, T b2, T eps) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x)
    adam_step(p, g, m, v, i, lr_t, b1, b2, eps);
}

// Multi-tensor updates: up to TAPEGPU_MULTI tensors per launch, passed as kernel
// arguments (their addresses and sizes: nothing is copied to the device for a
// launch). One grid-stride loop runs over the concatenated index space; as a
// thread's index only grows, its tensor index k only moves forward (past empty
// tensors too). Unused argument slots have size 0.
#define TAPEGPU_MULTI 8
#define TAPEGPU_ARGS(type, name) type name##0, type name##1, type name##2, type name##3, \
    type name##4, type name##5, type name##6, type name##7
#define TAPEGPU_LIST(name) {name##0, name##1, name##2, name##3, name##4, name##5, name##6, name##7}

template <typename T>
__device__ void sgd_multi_update(T *const *p, const T *const *g, T *const *v, const i64 *n,
                                 int has_v, T lr, T momentum, int nesterov) {
  i64 offsets[TAPEGPU_MULTI + 1];
  offsets[0] = 0;
  for (int k = 0; k < TAPEGPU_MULTI; ++k) offsets[k + 1] = offsets[k] + n[k];
  int k = 0;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < offsets[TAPEGPU_MULTI];
       i += (i64)blockDim.x * gridDim.x) {
    while (i >= offsets[k + 1]) ++k;
    sgd_step(p[k], g[k], has_v ? v[k] : (T *)0, i - offsets[k], lr, momentum, nesterov);
  }
}

template <typename T>
__device__ void adam_multi_update(T *const *p, const T *const *g, T *const *m, T *const *v,
                                  const i64 *n, T lr_t, T b1, T b2, T eps) {
  i64 offsets[TAPEGPU_MULTI + 1];
  offsets[0] = 0;
  for (int k = 0; k < TAPEGPU_MULTI; ++k) offsets[k + 1] = offsets[k] + n[k];
  int k = 0;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < offsets[TAPEGPU_MULTI];
       i += (i64)blockDim.x * gridDim.x) {
    while (i >= offsets[k + 1]) ++k;
    adam_step(p[k], g[k], m[k], v[k], i - offsets[k], lr_t, b1, b2, eps);
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
extern "C" __global__ void tapegpu_sgd_update_devlr_f32(float *p, const float *g, float *v, i64 n,
                                                        const float *lr, float momentum,
                                                        int nesterov) {
  sgd_update(p, g, v, n, *lr, momentum, nesterov);
}
extern "C" __global__ void tapegpu_sgd_update_devlr_f64(double *p, const double *g, double *v,
                                                        i64 n, const double *lr, double momentum,
                                                        int nesterov) {
  sgd_update(p, g, v, n, *lr, momentum, nesterov);
}
extern "C" __global__ void tapegpu_adam_update_devlr_f32(float *p, const float *g, float *m,
                                                         float *v, i64 n, const float *lr_t,
                                                         float b1, float b2, float eps) {
  adam_update(p, g, m, v, n, *lr_t, b1, b2, eps);
}
extern "C" __global__ void tapegpu_adam_update_devlr_f64(double *p, const double *g, double *m,
                                                         double *v, i64 n, const double *lr_t,
                                                         double b1, double b2, double eps) {
  adam_update(p, g, m, v, n, *lr_t, b1, b2, eps);
}
#define TAPEGPU_MULTI_KERNELS(T, SUFFIX)                                                       \
  extern "C" __global__ void tapegpu_sgd_multi_update_##SUFFIX(                               \
      TAPEGPU_ARGS(T *, p), TAPEGPU_ARGS(const T *, g), TAPEGPU_ARGS(T *, v),                  \
      TAPEGPU_ARGS(i64, n), int has_v, T lr, T momentum, int nesterov) {                        \
    T *const ps[] = TAPEGPU_LIST(p);                                                            \
    const T *const gs[] = TAPEGPU_LIST(g);                                                      \
    T *const vs[] = TAPEGPU_LIST(v);                                                            \
    const i64 ns[] = TAPEGPU_LIST(n);                                                           \
    sgd_multi_update(ps, gs, vs, ns, has_v, lr, momentum, nesterov);                            \
  }                                                                                             \
  extern "C" __global__ void tapegpu_adam_multi_update_##SUFFIX(                              \
      TAPEGPU_ARGS(T *, p), TAPEGPU_ARGS(const T *, g), TAPEGPU_ARGS(T *, m),                  \
      TAPEGPU_ARGS(T *, v), TAPEGPU_ARGS(i64, n), T lr_t, T b1, T b2, T eps) {                  \
    T *const ps[] = TAPEGPU_LIST(p);                                                            \
    const T *const gs[] = TAPEGPU_LIST(g);                                                      \
    T *const ms[] = TAPEGPU_LIST(m);                                                            \
    T *const vs[] = TAPEGPU_LIST(v);                                                            \
    const i64 ns[] = TAPEGPU_LIST(n);                                                           \
    adam_multi_update(ps, gs, ms, vs, ns, lr_t, b1, b2, eps);                                   \
  }                                                                                             \
  extern "C" __global__ void tapegpu_sgd_multi_update_devlr_##SUFFIX(                         \
      TAPEGPU_ARGS(T *, p), TAPEGPU_ARGS(const T *, g), TAPEGPU_ARGS(T *, v),                  \
      TAPEGPU_ARGS(i64, n), int has_v, const T *lr, T momentum, int nesterov) {                 \
    T *const ps[] = TAPEGPU_LIST(p);                                                            \
    const T *const gs[] = TAPEGPU_LIST(g);                                                      \
    T *const vs[] = TAPEGPU_LIST(v);                                                            \
    const i64 ns[] = TAPEGPU_LIST(n);                                                           \
    sgd_multi_update(ps, gs, vs, ns, has_v, *lr, momentum, nesterov);                           \
  }                                                                                             \
  extern "C" __global__ void tapegpu_adam_multi_update_devlr_##SUFFIX(                        \
      TAPEGPU_ARGS(T *, p), TAPEGPU_ARGS(const T *, g), TAPEGPU_ARGS(T *, m),                  \
      TAPEGPU_ARGS(T *, v), TAPEGPU_ARGS(i64, n), const T *lr_t, T b1, T b2, T eps) {           \
    T *const ps[] = TAPEGPU_LIST(p);                                                            \
    const T *const gs[] = TAPEGPU_LIST(g);                                                      \
    T *const ms[] = TAPEGPU_LIST(m);                                                            \
    T *const vs[] = TAPEGPU_LIST(v);                                                            \
    const i64 ns[] = TAPEGPU_LIST(n);                                                           \
    adam_multi_update(ps, gs, ms, vs, ns, *lr_t, b1, b2, eps);                                  \
  }

TAPEGPU_MULTI_KERNELS(float, f32)
TAPEGPU_MULTI_KERNELS(double, f64)
