// runtime.cpp: the fiber scheduler behind cuda_emu.h.
//
// A launch runs its blocks one after another on the calling OS thread. Each
// thread of a block is a fiber with its own stack. A fiber runs until it
// reaches a collective (barrier, warp shuffle or vote, failed atomicCAS) or
// returns; the scheduler then resolves the collectives that are complete and
// resumes the released fibers in the requested order (forward, reverse or
// random). Running the same launch in forward and in reverse order exposes a
// missing barrier whichever way the race goes.
//
// Errors (divergent barrier, barrier after exit, deadlock, device assert, bad
// warp mask) abort the launch: the message is kept for emu_last_error() and
// emu_run returns nonzero. Abandoned fibers are simply never resumed.
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#if !defined(EMU_UCONTEXT) && !defined(__x86_64__) && !defined(__aarch64__)
#define EMU_UCONTEXT 1
#endif
#ifdef EMU_UCONTEXT
#include <ucontext.h>
#endif
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#endif

#define EMU_HIDDEN __attribute__((visibility("hidden")))
#define EMU_EXPORT extern "C" __attribute__((visibility("default")))

struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x, y, z; };
extern "C" {
struct emu_view { uint3 thread_idx, block_idx; dim3 block_dim, grid_dim; };
EMU_HIDDEN emu_view emu_current;
EMU_HIDDEN unsigned char *emu_dynamic_shared;
typedef void (*emu_body)(void **args);
}

enum { EMU_BAR_PLAIN, EMU_BAR_COUNT, EMU_BAR_AND, EMU_BAR_OR };
enum { EMU_SHFL_IDX, EMU_SHFL_UP, EMU_SHFL_DOWN, EMU_SHFL_XOR,
       EMU_VOTE_BALLOT, EMU_VOTE_ANY, EMU_VOTE_ALL, EMU_SYNCWARP };
static const char *const kWarpOpName[] = {
    "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
    "__ballot_sync", "__any_sync", "__all_sync", "__syncwarp"};
enum { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM };

#ifndef EMU_STACK_SIZE
#ifdef EMU_ASAN
#define EMU_STACK_SIZE (512 * 1024)
#else
#define EMU_STACK_SIZE (64 * 1024)
#endif
#endif

// ================================================================ context switch
// emu_switch(&save, to) saves the callee-saved registers on the current stack,
// stores the stack pointer in *save and continues on stack `to`; a new stack is
// prepared by prepare_stack() so that its first switch "returns" into
// emu_fiber_start, which calls fiber_main(arg).
#ifndef EMU_UCONTEXT
extern "C" void emu_switch(void **save, void *to) EMU_HIDDEN;
extern "C" void emu_fiber_start(void) EMU_HIDDEN;
#if defined(__x86_64__)
// Frame (low to high): mxcsr|x87cw, r15, r14, r13, r12, rbx, rbp, return address.
__asm__(
    ".text\n.p2align 4\n.hidden emu_switch\n.type emu_switch,@function\nemu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n.size emu_switch,.-emu_switch\n"
    ".p2align 4\n.hidden emu_fiber_start\n.type emu_fiber_start,@function\nemu_fiber_start:\n"
    "  movq %r13, %rdi\n  callq *%r12\n  ud2\n.size emu_fiber_start,.-emu_fiber_start\n");
enum { FRAME_WORDS = 8, FRAME_FN = 4, FRAME_ARG = 3, FRAME_RET = 7, FRAME_FPU = 0 };
static const unsigned long long kFpuInit = 0x1F80ULL | (0x037FULL << 32);
#elif defined(__aarch64__)
// Frame (low to high): x19..x28, x29, x30 (return address), d8..d15.
__asm__(
    ".text\n.p2align 4\n.hidden emu_switch\n.type emu_switch,%function\nemu_switch:\n"
    "  sub sp, sp, #160\n"
    "  stp x19, x20, [sp, #0]\n  stp x21, x22, [sp, #16]\n  stp x23, x24, [sp, #32]\n"
    "  stp x25, x26, [sp, #48]\n  stp x27, x28, [sp, #64]\n  stp x29, x30, [sp, #80]\n"
    "  stp d8, d9, [sp, #96]\n  stp d10, d11, [sp, #112]\n  stp d12, d13, [sp, #128]\n"
    "  stp d14, d15, [sp, #144]\n"
    "  mov x2, sp\n  str x2, [x0]\n  mov sp, x1\n"
    "  ldp x19, x20, [sp, #0]\n  ldp x21, x22, [sp, #16]\n  ldp x23, x24, [sp, #32]\n"
    "  ldp x25, x26, [sp, #48]\n  ldp x27, x28, [sp, #64]\n  ldp x29, x30, [sp, #80]\n"
    "  ldp d8, d9, [sp, #96]\n  ldp d10, d11, [sp, #112]\n  ldp d12, d13, [sp, #128]\n"
    "  ldp d14, d15, [sp, #144]\n"
    "  add sp, sp, #160\n  ret\n.size emu_switch,.-emu_switch\n"
    ".p2align 4\n.hidden emu_fiber_start\n.type emu_fiber_start,%function\nemu_fiber_start:\n"
    "  mov x0, x20\n  blr x19\n  brk #0\n.size emu_fiber_start,.-emu_fiber_start\n");
enum { FRAME_WORDS = 20, FRAME_FN = 0, FRAME_ARG = 1, FRAME_RET = 11, FRAME_FPU = -1 };
static const unsigned long long kFpuInit = 0;
#endif
#endif

struct Fiber {
  enum State { READY, YIELDED, AT_BARRIER, AT_WARP, DONE };
  State state;
  int line;                // source line of the collective it waits at
  int kind;                // barrier or warp-op kind
  unsigned mask;           // warp collectives: lanes named by the mask
  int param, width;        // shuffle source/delta/lane mask, segment width
  unsigned long long value, result;
  void *sp;                // saved stack pointer while suspended
#ifdef EMU_UCONTEXT
  ucontext_t ctx;
#endif
};

struct Scheduler {
  std::vector<Fiber> fibers;
  std::vector<int> order;                  // resume order of the block's threads
  std::vector<std::vector<int> > warp_order; // the same order, split by warp
  std::vector<int> warp_waiting;           // lanes of each warp waiting at a warp collective
  unsigned char *stacks = nullptr;   // one mapping: [guard page | stack] per fiber
  size_t stack_count = 0, slot_size = 0;
  void *main_sp = nullptr;           // the scheduler's own stack while a fiber runs
#ifdef EMU_UCONTEXT
  ucontext_t main_ctx;
#endif
#ifdef EMU_ASAN
  void *asan_fake_stack = nullptr;
  const void *main_stack_bottom = nullptr;
  size_t main_stack_size = 0;
#endif
  int current = -1;
  int nthreads = 0, order_mode = ORDER_FORWARD;
  unsigned long long rng = 0;
  emu_body body = nullptr;
  void **args = nullptr;
  bool failed = false;
  std::string error;
};

static Scheduler S;  // launches are serialised by the Python side

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  if (S.failed) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  S.failed = true;
  S.error = buf;
}

static std::string where() {
  char buf[160];
  const emu_view &v = emu_current;
  snprintf(buf, sizeof buf, "block (%u,%u,%u) thread (%u,%u,%u)", v.block_idx.x, v.block_idx.y,
           v.block_idx.z, v.thread_idx.x, v.thread_idx.y, v.thread_idx.z);
  return buf;
}

// ================================================================ fibers
static void ensure_stacks(size_t n) {
  if (n <= S.stack_count) return;
  if (S.stacks) munmap(S.stacks, S.stack_count * S.slot_size);
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  S.slot_size = EMU_STACK_SIZE + page;
  void *p = mmap(nullptr, n * S.slot_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) { perror("tapegpu emu: mmap of fiber stacks"); abort(); }
  S.stacks = (unsigned char *)p;
  S.stack_count = n;
  for (size_t i = 0; i < n; ++i) mprotect(S.stacks + i * S.slot_size, page, PROT_NONE);
}

// The stacks cost two memory mappings per thread (stack and guard page) for as long as the
// library is loaded; a library loaded for a few launches gives them back after each one.
static void release_stacks() {
  if (S.stacks) munmap(S.stacks, S.stack_count * S.slot_size);
  S.stacks = nullptr;
  S.stack_count = 0;
}

// A thread that overflows its stack touches a guard page: say so and abort,
// rather than die with a bare SIGSEGV. The handler runs on an alternate stack
// and hands every other fault to the handler that was installed before it.
static struct sigaction previous_segv;

static void on_segv(int sig, siginfo_t *info, void *context) {
  unsigned char *a = (unsigned char *)info->si_addr;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (S.stacks && a >= S.stacks && a < S.stacks + S.stack_count * S.slot_size &&
      (size_t)(a - S.stacks) % S.slot_size < page) {
    char msg[256];
    const emu_view &v = emu_current;
    int n = snprintf(msg, sizeof msg,
                     "tapegpu emu: stack overflow in block (%u,%u,%u) thread (%u,%u,%u): an emulated "
                     "thread has %d KiB of stack; use fewer or smaller local arrays\n",
                     v.block_idx.x, v.block_idx.y, v.block_idx.z, v.thread_idx.x, v.thread_idx.y,
                     v.thread_idx.z, EMU_STACK_SIZE / 1024);
    if (write(2, msg, n) < 0) {}
    abort();
  }
  if (previous_segv.sa_flags & SA_SIGINFO) {
    previous_segv.sa_sigaction(sig, info, context);
  } else if (previous_segv.sa_handler != SIG_IGN && previous_segv.sa_handler != SIG_DFL) {
    previous_segv.sa_handler(sig);
  } else {
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
  }
}

static void install_overflow_handler() {
  static thread_local bool have_altstack = false;
  if (!have_altstack) {
    stack_t current;
    if (sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE)) {
      stack_t alt;
      alt.ss_size = 64 * 1024;
      alt.ss_sp = malloc(alt.ss_size);  // kept for the life of the thread
      alt.ss_flags = 0;
      sigaltstack(&alt, nullptr);
    }
    have_altstack = true;
  }
  static bool installed = false;
  if (!installed) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
    installed = true;
  }
}

static unsigned char *stack_bottom(int t) {
  return S.stacks + (size_t)t * S.slot_size + (S.slot_size - EMU_STACK_SIZE);
}

static void set_view(int t) {
  const dim3 &d = emu_current.block_dim;
  emu_current.thread_idx.x = t % d.x;
  emu_current.thread_idx.y = (t / d.x) % d.y;
  emu_current.thread_idx.z = t / (d.x * d.y);
}

// Leave the running fiber for the scheduler; returns when it is resumed.
static void to_scheduler() {
  Fiber &f = S.fibers[S.current];
#ifdef EMU_ASAN
  __sanitizer_start_switch_fiber(f.state == Fiber::DONE ? nullptr : &S.asan_fake_stack,
                                 S.main_stack_bottom, S.main_stack_size);
#endif
#ifdef EMU_UCONTEXT
  swapcontext(&f.ctx, &S.main_ctx);
#else
  emu_switch(&f.sp, S.main_sp);
#endif
#ifdef EMU_ASAN
  __sanitizer_finish_switch_fiber(S.asan_fake_stack, nullptr, nullptr);
#endif
}

static void resume(int t) {
  S.current = t;
  set_view(t);
#ifdef EMU_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, stack_bottom(t), EMU_STACK_SIZE);
#endif
#ifdef EMU_UCONTEXT
  swapcontext(&S.main_ctx, &S.fibers[t].ctx);
#else
  emu_switch(&S.main_sp, S.fibers[t].sp);
#endif
#ifdef EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, &S.main_stack_bottom, &S.main_stack_size);
#endif
  S.current = -1;
}

static void fiber_main(void *) {
#ifdef EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &S.main_stack_bottom, &S.main_stack_size);
#endif
  S.body(S.args);
  S.fibers[S.current].state = Fiber::DONE;
  to_scheduler();
  abort();  // a finished fiber is never resumed
}

#ifdef EMU_UCONTEXT
static void fiber_entry_ucontext() { fiber_main(nullptr); }
#endif

static void start_fiber(int t) {
  Fiber &f = S.fibers[t];
  f.state = Fiber::READY;
  unsigned char *bottom = stack_bottom(t);
#ifdef EMU_UCONTEXT
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = bottom;
  f.ctx.uc_stack.ss_size = EMU_STACK_SIZE;
  f.ctx.uc_link = nullptr;
  makecontext(&f.ctx, fiber_entry_ucontext, 0);
#else
  // 16-byte aligned top, with the frame emu_switch pops placed below it.
  unsigned long long *frame = (unsigned long long *)(bottom + EMU_STACK_SIZE - 16) - FRAME_WORDS;
  memset(frame, 0, FRAME_WORDS * sizeof *frame);
  frame[FRAME_FN] = (unsigned long long)(void *)fiber_main;
  frame[FRAME_ARG] = 0;
  frame[FRAME_RET] = (unsigned long long)(void *)emu_fiber_start;
  if (FRAME_FPU >= 0) frame[FRAME_FPU] = kFpuInit;
  f.sp = frame;
#endif
}

// ================================================================ resume order
static unsigned long long next_random() {  // xorshift64*
  S.rng ^= S.rng >> 12;
  S.rng ^= S.rng << 25;
  S.rng ^= S.rng >> 27;
  return S.rng * 2685821657736338717ULL;
}

static void make_order() {
  int n = S.nthreads;
  S.order.resize(n);
  for (int i = 0; i < n; ++i) S.order[i] = S.order_mode == ORDER_REVERSE ? n - 1 - i : i;
  if (S.order_mode == ORDER_RANDOM)
    for (int i = n - 1; i > 0; --i) std::swap(S.order[i], S.order[next_random() % (i + 1)]);
  S.warp_order.assign((n + 31) / 32, std::vector<int>());
  for (int t : S.order) S.warp_order[t / 32].push_back(t);
}

// ================================================================ collectives
extern "C" EMU_HIDDEN int emu_barrier(int kind, int predicate, int line) {
  Fiber &f = S.fibers[S.current];
  f.state = Fiber::AT_BARRIER;
  f.kind = kind;
  f.line = line;
  f.value = (unsigned long long)predicate;
  to_scheduler();
  return (int)f.result;
}

extern "C" EMU_HIDDEN void emu_yield(void) {
  S.fibers[S.current].state = Fiber::YIELDED;  // runnable again at the next sweep
  to_scheduler();
}

static int warp_size_of(int warp) {
  int left = S.nthreads - warp * 32;
  return left < 32 ? left : 32;
}

extern "C" EMU_HIDDEN unsigned emu_active_mask(void) {
  int warp = S.current / 32, lanes = warp_size_of(warp);
  unsigned m = 0;
  for (int l = 0; l < lanes; ++l)
    if (S.fibers[warp * 32 + l].state != Fiber::DONE) m |= 1u << l;
  return m;
}

static int shuffle_source(const Fiber &f, int lane) {
  int w = f.width, base = lane & ~(w - 1), offset = lane & (w - 1);
  switch (f.kind) {
    case EMU_SHFL_IDX: return base + (f.param & (w - 1));
    case EMU_SHFL_UP: return offset >= f.param ? lane - f.param : lane;
    case EMU_SHFL_DOWN: return offset + f.param < w ? lane + f.param : lane;
    default: {  // xor: a source outside the caller's segment returns its own value
      int src = lane ^ f.param;
      return (src & ~(w - 1)) == base ? src : lane;
    }
  }
}

// The last lane to arrive computes every participant's result.
static void complete_warp_op(int warp, unsigned mask) {
  Fiber *lanes = &S.fibers[warp * 32];
  unsigned long long ballot = 0;
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1) ballot |= (unsigned long long)(lanes[l].value != 0) << l;
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1)) continue;
    Fiber &f = lanes[l];
    switch (f.kind) {
      case EMU_VOTE_BALLOT: f.result = ballot; break;
      case EMU_VOTE_ANY: f.result = ballot != 0; break;
      case EMU_VOTE_ALL: f.result = ballot == mask; break;
      case EMU_SYNCWARP: f.result = 0; break;
      default: {
        int src = shuffle_source(f, l);
        if (!(mask >> src & 1)) {
          fail("%s at line %d: lane %d reads lane %d, which is not in the mask 0x%08x (block (%u,%u,%u), warp %d)",
               kWarpOpName[f.kind], f.line, l, src, mask, emu_current.block_idx.x,
               emu_current.block_idx.y, emu_current.block_idx.z, warp);
          return;
        }
        f.result = lanes[src].value;
      }
    }
  }
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1) lanes[l].state = Fiber::READY;
  S.warp_waiting[warp] -= __builtin_popcount(mask);
}

extern "C" EMU_HIDDEN unsigned long long emu_warp(int kind, unsigned mask, unsigned long long value,
                                                 int param, int width, int line) {
  int t = S.current, warp = t / 32, lane = t % 32, lanes = warp_size_of(warp);
  Fiber &f = S.fibers[t];
  const char *op = kWarpOpName[kind];
  if (!(mask >> lane & 1)) {
    fail("%s at line %d: the calling lane %d is not in its mask 0x%08x (%s)", op, line, lane, mask, where().c_str());
  } else if (lanes < 32 && (mask >> lanes) != 0) {
    fail("%s at line %d: mask 0x%08x names lanes that do not exist (warp %d has %d threads; %s)",
         op, line, mask, warp, lanes, where().c_str());
  } else if (width < 1 || width > 32 || (width & (width - 1))) {
    fail("%s at line %d: width %d is not a power of two in [1, 32] (%s)", op, line, width, where().c_str());
  }
  for (int l = 0; l < lanes && !S.failed; ++l)
    if ((mask >> l & 1) && S.fibers[warp * 32 + l].state == Fiber::DONE)
      fail("%s at line %d: mask 0x%08x names lane %d, which has already exited (%s)", op, line, mask, l,
           where().c_str());
  if (S.failed) { to_scheduler(); return 0; }

  f.state = Fiber::AT_WARP;
  f.kind = kind; f.mask = mask; f.value = value; f.param = param; f.width = width; f.line = line;
  // Check the named lanes only once enough lanes of the warp wait.
  bool all_here = ++S.warp_waiting[warp] >= __builtin_popcount(mask);
  for (int l = 0; l < lanes && all_here; ++l) {  // mask names no lane >= lanes (checked above)
    const Fiber &o = S.fibers[warp * 32 + l];
    if (mask >> l & 1)
      all_here = o.state == Fiber::AT_WARP && o.mask == mask &&
                 (o.kind == kind || (o.kind <= EMU_SHFL_XOR && kind <= EMU_SHFL_XOR));
  }
  if (all_here) complete_warp_op(warp, mask);
  to_scheduler();
  return f.result;
}

extern "C" EMU_HIDDEN void emu_assert_fail(const char *expr, const char *file, int line) {
  fail("device assert `%s` failed at %s:%d in %s", expr, file, line, where().c_str());
  to_scheduler();
  abort();  // an aborted launch never resumes its fibers
}

// ================================================================ block scheduling
static std::string describe(const Fiber &f) {
  char buf[128];
  switch (f.state) {
    case Fiber::AT_BARRIER: snprintf(buf, sizeof buf, "wait at __syncthreads (line %d)", f.line); break;
    case Fiber::AT_WARP:
      snprintf(buf, sizeof buf, "wait at %s (line %d, mask 0x%08x)", kWarpOpName[f.kind], f.line, f.mask);
      break;
    case Fiber::DONE: snprintf(buf, sizeof buf, "have exited"); break;
    case Fiber::YIELDED: snprintf(buf, sizeof buf, "spin on atomicCAS"); break;
    default: snprintf(buf, sizeof buf, "are runnable"); break;
  }
  return buf;
}

// "threads 0-31 wait at ...; threads 32-63 have exited", grouping runs of equal state.
static std::string who_waits_where() {
  std::string out;
  int n = S.nthreads;
  for (int a = 0; a < n;) {
    std::string d = describe(S.fibers[a]);
    int b = a;
    while (b + 1 < n && describe(S.fibers[b + 1]) == d) ++b;
    char range[64];
    if (a == b) snprintf(range, sizeof range, "thread %d ", a);
    else snprintf(range, sizeof range, "threads %d-%d ", a, b);
    out += (out.empty() ? "" : "; ") + std::string(range) + d;
    a = b + 1;
  }
  return out;
}

static std::string block_name() {
  char buf[64];
  const uint3 &b = emu_current.block_idx;
  snprintf(buf, sizeof buf, "block (%u,%u,%u)", b.x, b.y, b.z);
  return buf;
}

// Called when no fiber is runnable: release a barrier every live thread has
// reached at the same line, or report why the block cannot go on.
static bool release_barrier() {
  int live = 0, waiting = 0, first = -1;
  for (int t = 0; t < S.nthreads; ++t) {
    const Fiber &f = S.fibers[t];
    if (f.state == Fiber::DONE) continue;
    ++live;
    if (f.state == Fiber::AT_BARRIER) { ++waiting; if (first < 0) first = t; }
  }
  if (waiting > 0 && live < S.nthreads) {
    fail("__syncthreads at line %d in %s after %d of %d threads exited (a barrier must be reached by "
         "every thread of the block): %s",
         S.fibers[first].line, block_name().c_str(), S.nthreads - live, S.nthreads, who_waits_where().c_str());
    return false;
  }
  if (waiting == 0 || waiting < live) {
    fail("deadlock in %s: %s", block_name().c_str(), who_waits_where().c_str());
    return false;
  }
  int line = S.fibers[first].line, kind = S.fibers[first].kind;
  for (int t = 0; t < S.nthreads; ++t)
    if (S.fibers[t].line != line) {
      fail("divergent __syncthreads in %s: thread %d waits at line %d, thread %d at line %d (%s)",
           block_name().c_str(), first, line, t, S.fibers[t].line, who_waits_where().c_str());
      return false;
    }
  unsigned long long count = 0;
  for (int t = 0; t < S.nthreads; ++t) count += S.fibers[t].value;
  unsigned long long r = kind == EMU_BAR_COUNT ? count
                       : kind == EMU_BAR_AND   ? count == (unsigned long long)S.nthreads
                       : kind == EMU_BAR_OR    ? count != 0 : 0;
  for (int t = 0; t < S.nthreads; ++t) {
    S.fibers[t].result = r;
    S.fibers[t].state = Fiber::READY;
  }
  return true;
}

// Run warp w until none of its lanes can go on: a warp whose collective
// completed continues at once, ahead of the other warps, as a GPU may let it.
// This is what exposes a missing barrier between warps (one warp overwriting
// shared memory that another has not read yet).
static bool run_warp(int w) {
  for (bool ran = true; ran;) {
    ran = false;
    for (int t : S.warp_order[w]) {
      if (S.fibers[t].state != Fiber::READY) continue;
      resume(t);
      ran = true;
      if (S.failed) return false;
    }
  }
  return true;
}

// A sweep visits the warps in resume order; when no thread can run, the
// barrier everyone waits at (if any) is released.
static bool run_block() {
  const long kMaxSpinSweeps = 1000000;
  long spin_sweeps = 0;
  for (int t = 0; t < S.nthreads; ++t) start_fiber(t);
  S.warp_waiting.assign((S.nthreads + 31) / 32, 0);
  for (;;) {
    bool yielded = false;
    for (int t = 0; t < S.nthreads; ++t)
      if (S.fibers[t].state == Fiber::YIELDED) { S.fibers[t].state = Fiber::READY; yielded = true; }
    if (yielded && ++spin_sweeps > kMaxSpinSweeps) {
      fail("livelock in %s: threads keep failing atomicCAS while no other thread can progress (%s)",
           block_name().c_str(), who_waits_where().c_str());
      return false;
    }
    if (S.order_mode == ORDER_RANDOM) make_order();
    bool ran = false;
    for (int t : S.order) {
      if (S.fibers[t].state != Fiber::READY) continue;
      ran = true;
      if (!run_warp(t / 32)) return false;
    }
    if (ran) continue;
    bool finished = true;
    for (int t = 0; t < S.nthreads && finished; ++t) finished = S.fibers[t].state == Fiber::DONE;
    if (finished) return true;
    if (!release_barrier()) return false;
    spin_sweeps = 0;
  }
}

// config: grid x y z, block x y z, dynamic shared bytes, order, seed, release the stacks after.
extern "C" EMU_HIDDEN int emu_run(const long long *config, void **args, emu_body body) {
  S.failed = false;
  S.error.clear();
  S.body = body;
  S.args = args;
  S.order_mode = (int)config[7];
  S.rng = (unsigned long long)config[8] * 0x9E3779B97F4A7C15ULL + 1;
  dim3 grid = {(unsigned)config[0], (unsigned)config[1], (unsigned)config[2]};
  dim3 block = {(unsigned)config[3], (unsigned)config[4], (unsigned)config[5]};
  size_t shared_bytes = (size_t)config[6];
  S.nthreads = (int)(block.x * block.y * block.z);
  S.fibers.assign(S.nthreads, Fiber());
  ensure_stacks(S.nthreads);
#ifndef EMU_ASAN
  install_overflow_handler();  // ASan reports stack overflows itself
#endif
  make_order();
  emu_current.grid_dim = grid;
  emu_current.block_dim = block;
  // Unwritten shared memory reads as 0xFF bytes (NaN), so a missing store shows.
  unsigned char *shared = (unsigned char *)aligned_alloc(16, (shared_bytes + 15) / 16 * 16 + 16);
  emu_dynamic_shared = shared;
  bool ok = true;
  for (unsigned z = 0; z < grid.z && ok; ++z)
    for (unsigned y = 0; y < grid.y && ok; ++y)
      for (unsigned x = 0; x < grid.x && ok; ++x) {
        emu_current.block_idx = {x, y, z};
        memset(shared, 0xFF, shared_bytes);
        ok = run_block();
      }
  free(shared);
  emu_dynamic_shared = nullptr;
#ifdef EMU_ASAN
  // Fibers abandoned by a failed launch leave their frames' poisoning behind.
  if (!ok)
    for (int t = 0; t < S.nthreads; ++t) ASAN_UNPOISON_MEMORY_REGION(stack_bottom(t), EMU_STACK_SIZE);
#endif
  if (config[9]) release_stacks();
  return ok ? 0 : 1;
}

EMU_EXPORT const char *emu_last_error(void) { return S.error.c_str(); }

EMU_EXPORT const char *emu_context_switch(void) {
#ifdef EMU_UCONTEXT
  return "ucontext";
#elif defined(__x86_64__)
  return "x86_64 assembly";
#else
  return "aarch64 assembly";
#endif
}
