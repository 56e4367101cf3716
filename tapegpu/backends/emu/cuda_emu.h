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

#include "emu_math.h"
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
// "v*" void*, "?*" a pointer to a pointer, "x<size>" anything else. Written
// without the standard library's <string>, <type_traits> and <utility>: every
// kernel's library is compiled with this header, and those cost more to read
// and instantiate than a small kernel costs to compile.
template <class T> struct emu_cv { typedef T type; static constexpr bool is_const = false; };
template <class T> struct emu_cv<const T> { typedef T type; static constexpr bool is_const = true; };
template <class T> struct emu_cv<volatile T> { typedef T type; static constexpr bool is_const = false; };
template <class T> struct emu_cv<const volatile T> { typedef T type; static constexpr bool is_const = true; };
template <class T> struct emu_is_pointer { static constexpr bool value = false; };
template <class T> struct emu_is_pointer<T *> { static constexpr bool value = true; typedef T pointee; };
template <class T> struct emu_no_ref { typedef T type; };
template <class T> struct emu_no_ref<T &> { typedef T type; };
template <class T> struct emu_no_ref<T &&> { typedef T type; };

// the kind of a cv-free value type: 'f' floating, 'i'/'u' signed/unsigned integer, 'x' other
template <class T> struct emu_kind { static constexpr char value = 'x'; };
#define EMU_KIND(T, K) template <> struct emu_kind<T> { static constexpr char value = K; };
#define EMU_INT_KIND(T) EMU_KIND(T, (T)-1 < (T)0 ? 'i' : 'u')
EMU_KIND(float, 'f') EMU_KIND(double, 'f') EMU_KIND(long double, 'f')
EMU_INT_KIND(char) EMU_INT_KIND(signed char) EMU_INT_KIND(unsigned char)
EMU_INT_KIND(short) EMU_INT_KIND(unsigned short) EMU_INT_KIND(int) EMU_INT_KIND(unsigned)
EMU_INT_KIND(long) EMU_INT_KIND(unsigned long) EMU_INT_KIND(long long)
EMU_INT_KIND(unsigned long long) EMU_INT_KIND(wchar_t) EMU_INT_KIND(char16_t)
EMU_INT_KIND(char32_t)
#undef EMU_INT_KIND
#undef EMU_KIND

static inline char *emu_put_number(char *s, size_t n) {
  char digits[24];
  int k = 0;
  do { digits[k++] = (char)('0' + n % 10); n /= 10; } while (n);
  while (k) *s++ = digits[--k];
  return s;
}

template <class U> struct emu_value_code {   // a cv-free value type
  static char *put(char *s) { *s++ = emu_kind<U>::value; return emu_put_number(s, sizeof(U)); }
};
template <> struct emu_value_code<void> { static char *put(char *s) { *s++ = 'v'; return s; } };
template <> struct emu_value_code<bool> {
  static char *put(char *s) { *s++ = 'b'; *s++ = '1'; return s; }
};

// writes the code of T (cv-qualifiers dropped) at s; returns the end
template <class T> static char *emu_type_code(char *s) {
  typedef typename emu_cv<T>::type U;
  if constexpr (emu_is_pointer<U>::value) {
    typedef typename emu_is_pointer<U>::pointee P;   // with its cv-qualifiers
    typedef typename emu_cv<P>::type E;
    if (emu_cv<P>::is_const) *s++ = 'c';
    if constexpr (emu_is_pointer<E>::value) *s++ = '?';
    else s = emu_type_code<E>(s);
    *s++ = '*';
    return s;
  } else {
    return emu_value_code<U>::put(s);
  }
}

template <class... P> struct emu_signature_text {
  char text[sizeof...(P) * 32 + 2];
  emu_signature_text() {
    char *s = text;
    ((s = emu_type_code<P>(s), *s++ = ','), ...);
    if (s != text) --s;  // no comma after the last
    *s++ = ';';  // keeps an argument-less kernel distinct from "not built"
    *s = 0;
  }
};
template <class... P> static const char *emu_signature(void (*)(P...)) {
  static const emu_signature_text<P...> s;
  return s.text;
}

template <size_t... I> struct emu_index_sequence {};
#if defined(__clang__)
template <size_t N> using emu_indices = __make_integer_seq<emu_index_sequence, size_t, N>;
#else
template <size_t N> using emu_indices = emu_index_sequence<__integer_pack(N)...>;
#endif
template <class... P, size_t... I>
static void emu_invoke_seq(void (*kernel)(P...), void **args, emu_index_sequence<I...>) {
  kernel(*static_cast<typename emu_no_ref<P>::type *>(args[I])...);
}
template <class... P> static void emu_invoke(void (*kernel)(P...), void **args) {
  emu_invoke_seq(kernel, args, emu_indices<sizeof...(P)>());
}

#define EMU_EXPORT extern "C" __attribute__((visibility("default")))

#endif
