// Recurrent cells: the pointwise part of one LSTM or GRU step (after the GEMMs), forward and
// backward, one launch each. One thread per (row n, unit j); grid-stride over rows * units.
//
// LSTM (Keras' gate order i, f, c, o; recurrent activation sigmoid, activation tanh):
//   x, h: (rows, 4u) the input and recurrent projections, b: (4u,), c_prev: (rows, u)
//   z = (x + b) + h;  i = s(z_i), f = s(z_f), g = tanh(z_c), o = s(z_o)
//   c = f c_prev + i g;  h = o tanh(c);  out = [h; c]: (2, rows, u)
//   backward from gh = g[0], gc = g[1]:
//     dc = gc + gh o (1 - tanh(c)^2);  dz_i = dc g i(1-i), dz_f = dc c_prev f(1-f),
//     dz_c = dc i (1 - g^2), dz_o = gh tanh(c) o(1-o);  dc_prev = dc f
//
// GRU, reset_after=True (gate order z, r, h):
//   x, h: (rows, 3u) the projections without biases, b: (2, 3u) (input, recurrent),
//   s: (rows, u) the previous state
//   z = s((x_z + b0_z) + (h_z + b1_z)), r = s((x_r + b0_r) + (h_r + b1_r)),
//   hh = tanh((x_h + b0_h) + r (h_h + b1_h)),  out = z s + (1 - z) hh: (rows, u)
//   backward from g: dz = (g s - g hh) z(1-z), da = g (1 - z) (1 - hh^2), dr = da rh r(1-r)
//     dxb = [dz, dr, da] (the cotangent of x and of b's first row),
//     dhb = [dz, dr, da r] (of h and of b's second row), written as dxh: (rows, 2, 3u);
//     ds = g z
//
// Every product and sum is written in the order of the composite ops (tapegpu's sigmoid,
// tanh, multiply and add, and their VJP rules), so on the emulator the results are those of
// the composite path bit for bit; NVRTC compiles with --fmad=false.

typedef long long i64;

template <typename T> __device__ T sig(T x) {  // as activations.cu's sigmoid_f
  return x >= T(0) ? T(1) / (T(1) + exp(-fabs(x))) : exp(-fabs(x)) / (T(1) + exp(-fabs(x)));
}

template <typename T>
__device__ void lstm_gates(const T *x, const T *h, const T *b, i64 n, i64 j, i64 u, T &i, T &f,
                           T &g, T &o) {
  const T *xr = x + n * 4 * u, *hr = h + n * 4 * u;
  i = sig((xr[j] + b[j]) + hr[j]);
  f = sig((xr[u + j] + b[u + j]) + hr[u + j]);
  g = tanh((xr[2 * u + j] + b[2 * u + j]) + hr[2 * u + j]);
  o = sig((xr[3 * u + j] + b[3 * u + j]) + hr[3 * u + j]);
}

template <typename T>
__device__ void lstm_fwd(const T *x, const T *h, const T *b, const T *c_prev, T *out, i64 rows,
                         i64 u) {
  i64 total = rows * u;
  for (i64 k = blockIdx.x * (i64)blockDim.x + threadIdx.x; k < total; k += (i64)blockDim.x * gridDim.x) {
    i64 n = k / u, j = k % u;
    T i, f, g, o;
    lstm_gates(x, h, b, n, j, u, i, f, g, o);
    T c = f * c_prev[k] + i * g;
    out[k] = o * tanh(c);
    out[total + k] = c;
  }
}

template <typename T>
__device__ void lstm_bwd(const T *gr, const T *x, const T *h, const T *b, const T *c_prev,
                         const T *out, T *dz, T *dc_prev, i64 rows, i64 u) {
  i64 total = rows * u;
  for (i64 k = blockIdx.x * (i64)blockDim.x + threadIdx.x; k < total; k += (i64)blockDim.x * gridDim.x) {
    i64 n = k / u, j = k % u;
    T i, f, g, o;
    lstm_gates(x, h, b, n, j, u, i, f, g, o);
    T gh = gr[k], tc = tanh(out[total + k]);
    T dc = gr[total + k] + (gh * o) * (T(1) - tc * tc);
    T *dzr = dz + n * 4 * u;
    dzr[j] = (dc * g) * (i * (T(1) - i));
    dzr[u + j] = (dc * c_prev[k]) * (f * (T(1) - f));
    dzr[2 * u + j] = (dc * i) * (T(1) - g * g);
    dzr[3 * u + j] = (gh * tc) * (o * (T(1) - o));
    dc_prev[k] = dc * f;
  }
}

template <typename T>
__device__ void gru_gates(const T *x, const T *h, const T *b, i64 n, i64 j, i64 u, T &z, T &r,
                          T &hh, T &rh) {
  const T *xr = x + n * 3 * u, *hr = h + n * 3 * u, *b1 = b + 3 * u;
  z = sig((xr[j] + b[j]) + (hr[j] + b1[j]));
  r = sig((xr[u + j] + b[u + j]) + (hr[u + j] + b1[u + j]));
  rh = hr[2 * u + j] + b1[2 * u + j];
  hh = tanh((xr[2 * u + j] + b[2 * u + j]) + r * rh);
}

template <typename T>
__device__ void gru_fwd(const T *x, const T *h, const T *b, const T *s, T *out, i64 rows, i64 u) {
  for (i64 k = blockIdx.x * (i64)blockDim.x + threadIdx.x; k < rows * u; k += (i64)blockDim.x * gridDim.x) {
    T z, r, hh, rh;
    gru_gates(x, h, b, k / u, k % u, u, z, r, hh, rh);
    out[k] = z * s[k] + (T(1) - z) * hh;
  }
}

template <typename T>
__device__ void gru_bwd(const T *gr, const T *x, const T *h, const T *b, const T *s, T *dxh,
                        T *ds, i64 rows, i64 u) {
  for (i64 k = blockIdx.x * (i64)blockDim.x + threadIdx.x; k < rows * u; k += (i64)blockDim.x * gridDim.x) {
    i64 n = k / u, j = k % u;
    T z, r, hh, rh;
    gru_gates(x, h, b, n, j, u, z, r, hh, rh);
    T g = gr[k];
    T dz = (g * s[k] - g * hh) * (z * (T(1) - z));
    T da = (g * (T(1) - z)) * (T(1) - hh * hh);
    T dr = (da * rh) * (r * (T(1) - r));
    T *dx = dxh + n * 6 * u, *dh = dx + 3 * u;
    dx[j] = dz;
    dx[u + j] = dr;
    dx[2 * u + j] = da;
    dh[j] = dz;
    dh[u + j] = dr;
    dh[2 * u + j] = da * r;
    ds[k] = g * z;
  }
}

#define TAPEGPU_RNN(T, SUFFIX)                                                                   \
  extern "C" __global__ void tapegpu_lstm_cell_fwd_##SUFFIX(const T *x, const T *h, const T *b, \
                                                            const T *c_prev, T *out, i64 rows,  \
                                                            i64 u) {                            \
    lstm_fwd<T>(x, h, b, c_prev, out, rows, u);                                                 \
  }                                                                                             \
  extern "C" __global__ void tapegpu_lstm_cell_bwd_##SUFFIX(                                    \
      const T *g, const T *x, const T *h, const T *b, const T *c_prev, const T *out, T *dz,     \
      T *dc_prev, i64 rows, i64 u) {                                                            \
    lstm_bwd<T>(g, x, h, b, c_prev, out, dz, dc_prev, rows, u);                                 \
  }                                                                                             \
  extern "C" __global__ void tapegpu_gru_cell_fwd_##SUFFIX(const T *x, const T *h, const T *b,  \
                                                           const T *s, T *out, i64 rows,        \
                                                           i64 u) {                             \
    gru_fwd<T>(x, h, b, s, out, rows, u);                                                       \
  }                                                                                             \
  extern "C" __global__ void tapegpu_gru_cell_bwd_##SUFFIX(const T *g, const T *x, const T *h,  \
                                                           const T *b, const T *s, T *dxh,      \
                                                           T *ds, i64 rows, i64 u) {            \
    gru_bwd<T>(g, x, h, b, s, dxh, ds, rows, u);                                                \
  }

TAPEGPU_RNN(float, f32)
TAPEGPU_RNN(double, f64)
