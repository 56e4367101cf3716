// cuda_emu.h: lets g++ compile a CUDA C kernel file for the CPU emulator.
//
// The kernel source is compiled unchanged except for one rewrite done in Python
// (`extern __shared__ T a[];` becomes a pointer to the block's dynamic shared
// memory, on the same line). Every CUDA-only word is defined here:
//
//   * qualifiers (__global__, __device__, ...) vanish; `__shared__` becomes
//     `static`: blocks run one after another on one OS thread and launches are
//     serialised, so one copy per library is one copy per running block;
//   * threadIdx/blockIdx/blockDim/gridDim read the scheduler's view of the
//     running fiber through a const reference, so kernels cannot assign them;
//   * barriers, warp shuffles and votes call the fiber runtime (runtime.cpp),
//     which suspends the calling thread until its partners have arrived;
//   * atomics are plain read-modify-writes: fibers only switch at collectives,
//     so nothing can interleave with them;
//   * math intrinsics map to libm.
#ifndef TAPEGPU_CUDA_EMU_H
#define TAPEGPU_CUDA_EMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <string>
#include <type_traits>
#include <utility>

// ---------------------------------------------------------------- vector types
struct uint3 { unsigned int x, y, z; };
struct dim3 {
  unsigned int x, y, z;
  dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

// ---------------------------------------------------------------- runtime interface
extern "C" {
struct emu_view { uint3 thread_idx, block_idx; dim3 block_dim, grid_dim; };
extern emu_view emu_current;              // the running fiber's indices
extern unsigned char *emu_dynamic_shared; // this block's `extern __shared__` bytes

enum { EMU_BAR_PLAIN, EMU_BAR_COUNT, EMU_BAR_AND, EMU_BAR_OR };
enum { EMU_SHFL_IDX, EMU_SHFL_UP, EMU_SHFL_DOWN, EMU_SHFL_XOR,
       EMU_VOTE_BALLOT, EMU_VOTE_ANY, EMU_VOTE_ALL, EMU_SYNCWARP };

int emu_barrier(int kind, int predicate, int line);
unsigned long long emu_warp(int kind, unsigned mask, unsigned long long value,
                            int param, int width, int line);
void emu_yield(void);
unsigned emu_active_mask(void);
void emu_assert_fail(const char *expr, const char *file, int line);  // never returns; not [[noreturn]], which
                                                                      // makes ASan unpoison the wrong stack
typedef void (*emu_body)(void **args);
int emu_run(const long long *config, void **args, emu_body body);
}

static inline const uint3 &emu_thread_idx() { return emu_current.thread_idx; }
static inline const uint3 &emu_block_idx() { return emu_current.block_idx; }
static inline const dim3 &emu_block_dim() { return emu_current.block_dim; }
static inline const dim3 &emu_grid_dim() { return emu_current.grid_dim; }

#define threadIdx (emu_thread_idx())
#define blockIdx (emu_block_idx())
#define blockDim (emu_block_dim())
#define gridDim (emu_grid_dim())
#define warpSize 32

// ---------------------------------------------------------------- qualifiers
#define __global__
#define __device__
#define __host__
#define __constant__
#define __shared__ static
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

// ---------------------------------------------------------------- collectives
// A call site is remembered by its line, so `__syncthreads` must expand where it
// is written: `__syncthreads()` becomes `emu_at{__LINE__}.syncthreads()`.
template <class T> static inline unsigned long long emu_bits(T v) {
  static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
  unsigned long long b = 0;
  memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T> static inline T emu_from_bits(unsigned long long b) {
  T v;
  memcpy(&v, &b, sizeof(T));
  return v;
}

struct emu_at {
  int line;
  void syncthreads() const { emu_barrier(EMU_BAR_PLAIN, 1, line); }
  int syncthreads_count(int p) const { return emu_barrier(EMU_BAR_COUNT, p != 0, line); }
  int syncthreads_and(int p) const { return emu_barrier(EMU_BAR_AND, p != 0, line); }
  int syncthreads_or(int p) const { return emu_barrier(EMU_BAR_OR, p != 0, line); }
  void syncwarp(unsigned mask = 0xffffffffu) const { emu_warp(EMU_SYNCWARP, mask, 0, 0, 32, line); }

  template <class T> T shfl(int kind, unsigned mask, T v, int param, int width) const {
    return emu_from_bits<T>(emu_warp(kind, mask, emu_bits(v), param, width, line));
  }
  template <class T> T shfl_idx(unsigned m, T v, int src, int w = 32) const { return shfl(EMU_SHFL_IDX, m, v, src, w); }
  template <class T> T shfl_up(unsigned m, T v, unsigned d, int w = 32) const { return shfl(EMU_SHFL_UP, m, v, (int)d, w); }
  template <class T> T shfl_down(unsigned m, T v, unsigned d, int w = 32) const { return shfl(EMU_SHFL_DOWN, m, v, (int)d, w); }
  template <class T> T shfl_xor(unsigned m, T v, int lm, int w = 32) const { return shfl(EMU_SHFL_XOR, m, v, lm, w); }

  unsigned ballot(unsigned m, int p) const { return (unsigned)emu_warp(EMU_VOTE_BALLOT, m, p != 0, 0, 32, line); }
  int any(unsigned m, int p) const { return (int)emu_warp(EMU_VOTE_ANY, m, p != 0, 0, 32, line); }
  int all(unsigned m, int p) const { return (int)emu_warp(EMU_VOTE_ALL, m, p != 0, 0, 32, line); }
};

#define __syncthreads emu_at{__LINE__}.syncthreads
#define __syncthreads_count emu_at{__LINE__}.syncthreads_count
#define __syncthreads_and emu_at{__LINE__}.syncthreads_and
#define __syncthreads_or emu_at{__LINE__}.syncthreads_or
#define __syncwarp emu_at{__LINE__}.syncwarp
#define __shfl_sync emu_at{__LINE__}.shfl_idx
#define __shfl_up_sync emu_at{__LINE__}.shfl_up
#define __shfl_down_sync emu_at{__LINE__}.shfl_down
#define __shfl_xor_sync emu_at{__LINE__}.shfl_xor
#define __ballot_sync emu_at{__LINE__}.ballot
#define __any_sync emu_at{__LINE__}.any
#define __all_sync emu_at{__LINE__}.all
#define __activemask emu_active_mask
#define __threadfence() ((void)0)
#define __threadfence_block() ((void)0)

#undef assert
#define assert(e) ((e) ? (void)0 : emu_assert_fail(#e, __FILE__, __LINE__))

// ---------------------------------------------------------------- atomics
// Fibers switch only inside collectives, so a read-modify-write cannot be
// interleaved: atomics need no locking. A failed atomicCAS yields so that a
// spin loop lets the thread holding the lock run.
template <class T> static inline T atomicAdd(T *a, T v) { T old = *a; *a = old + v; return old; }
template <class T> static inline T atomicSub(T *a, T v) { T old = *a; *a = old - v; return old; }
template <class T> static inline T atomicExch(T *a, T v) { T old = *a; *a = v; return old; }
template <class T> static inline T atomicMax(T *a, T v) { T old = *a; *a = old > v ? old : v; return old; }
template <class T> static inline T atomicMin(T *a, T v) { T old = *a; *a = old < v ? old : v; return old; }
template <class T> static inline T atomicAnd(T *a, T v) { T old = *a; *a = old & v; return old; }
template <class T> static inline T atomicOr(T *a, T v) { T old = *a; *a = old | v; return old; }
template <class T> static inline T atomicXor(T *a, T v) { T old = *a; *a = old ^ v; return old; }
template <class T> static inline T atomicCAS(T *a, T expected, T v) {
  T old = *a;
  if (old == expected) *a = v;
  else emu_yield();
  return old;
}

// ---------------------------------------------------------------- math
// libm provides the C99 functions CUDA names (expf, erff, log1pf, ...); these
// are the CUDA-only ones. The fast intrinsics are exact here (not on a GPU).
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
// glibc declares __expf & co. itself, so these are macros.
#define __expf expf
#define __logf logf
#define __sinf sinf
#define __cosf cosf
#define __tanhf tanhf
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752); }
static inline int __float_as_int(float x) { return emu_from_bits<int>(emu_bits(x)); }
static inline float __int_as_float(int x) { return emu_from_bits<float>(emu_bits(x)); }
static inline long long __double_as_longlong(double x) { return emu_from_bits<long long>(emu_bits(x)); }
static inline double __longlong_as_double(long long x) { return emu_from_bits<double>(emu_bits(x)); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
template <class T> static inline T __ldg(const T *p) { return *p; }
// CUDA overloads min/max for every arithmetic type in device code.
template <class A, class B> static inline auto min(A a, B b) -> decltype(a + b) { return a < b ? a : b; }
template <class A, class B> static inline auto max(A a, B b) -> decltype(a + b) { return a > b ? a : b; }

// ---------------------------------------------------------------- launcher helpers
// emu_invoke calls a kernel with arguments read from an array of pointers (as
// cuLaunchKernel takes them); emu_signature describes its parameter types to
// Python: "f4*" is float*, "cf4*" const float*, "i8" a 64-bit signed scalar,
// "v*" void*.
template <class T> static std::string emu_type_code() {
  typedef typename std::remove_cv<T>::type U;
  if constexpr (std::is_pointer<U>::value) {
    typedef typename std::remove_pointer<U>::type P;
    typedef typename std::remove_cv<P>::type E;
    std::string elem = std::is_pointer<E>::value ? std::string("?") : emu_type_code<E>();
    return (std::is_const<P>::value ? "c" : "") + elem + "*";
  } else if constexpr (std::is_void<U>::value) {
    return "v";
  } else if constexpr (std::is_same<U, bool>::value) {
    return "b1";
  } else {
    char kind = std::is_floating_point<U>::value ? 'f'
              : std::is_integral<U>::value ? (std::is_signed<U>::value ? 'i' : 'u') : 'x';
    return kind + std::to_string(sizeof(U));
  }
}

template <class... P> static const char *emu_signature(void (*)(P...)) {
  static std::string s;
  if (s.empty()) {
    std::string codes[] = {emu_type_code<P>()..., ""};
    for (size_t i = 0; i + 1 < sizeof(codes) / sizeof(codes[0]); ++i) s += (i ? "," : "") + codes[i];
    s += ";";  // keeps an argument-less kernel distinct from "not built"
  }
  return s.c_str();
}

template <class... P, size_t... I>
static void emu_invoke_seq(void (*kernel)(P...), void **args, std::index_sequence<I...>) {
  kernel(*static_cast<typename std::remove_reference<P>::type *>(args[I])...);
}
template <class... P> static void emu_invoke(void (*kernel)(P...), void **args) {
  emu_invoke_seq(kernel, args, std::index_sequence_for<P...>());
}

#define EMU_EXPORT extern "C" __attribute__((visibility("default")))

#endif
