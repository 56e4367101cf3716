"""C and CUDA C from per-element expressions: the one generator of tapegpu's elementwise kernels.

An elementwise op describes one element of its forward as a C expression of its arguments
(`c="tanh(x)"`) and, for one input, one element of its VJP as a C expression of the
cotangent `g` and its saves (`dc="g * (T(1) - out * out)"`); see ops/registry.py. `T` is the
element type (float or double); math goes through C's functions, which C++ and CUDA overload
for float. From those expressions this module writes every elementwise kernel:

* `activations_cu`: cuda_kernels/activations.cu, for the ops with both: per op and dtype the
  forward `tapegpu_<op>_fwd`, the backward from the saved value `tapegpu_<op>_bwd` (the
  cotangent may have batch axes) and bias + forward `tapegpu_bias_<op>_fwd`;
* `activations_h`: tapegpu/backends/_activations.h, the per-element functions of the CPU
  kernels in tapegpu/backends/_cpu.c (bias + forward, backward), for the ops whose
  expressions are `exact`: arithmetic, comparisons, `fabs` and `sqrt` only, so C gives
  numpy's bits;
* `fused_cuda` and `fused_host`: the kernels of tg.function's fused groups
  (function/fusion.py), from statements whose expressions `substitute` made of the ops' own.

Both files are generated (`python -m tapegpu.ops.generate`) and checked in;
tests/backends/kernels/test_generated.py checks that they are up to date. This module
imports nothing but the standard library.
"""
import math
import re

C_TYPES = {"float32": "float", "float64": "double"}
# library functions that give the correctly rounded result in C and numpy alike
EXACT_CALLS = frozenset({"fabs", "sqrt"})
# their float forms, for C (which does not overload them): `exact` expressions call no others
_C_FLOAT = {"fabs": "fabsf", "sqrt": "sqrtf"}
_WORD = re.compile(r"\b([A-Za-z_]\w*)\b(\s*\()?")
_KEYWORDS = frozenset({"T", "true", "false"})


def calls(expr):
    """The functions `expr` calls (`T(...)`, the conversion to the element type, is none)."""
    return {m.group(1) for m in _WORD.finditer(expr)
            if m.group(2) and m.group(1) not in _KEYWORDS}


def names(expr):
    """The names `expr` reads: its arguments, saves and params."""
    return {m.group(1) for m in _WORD.finditer(expr)
            if not m.group(2) and m.group(1) not in _KEYWORDS}


def exact(expr):
    """Whether `expr` computes its IEEE operations the same in C and numpy: it calls nothing but
    `EXACT_CALLS` (arithmetic and comparisons are the same operations everywhere)."""
    return calls(expr) <= EXACT_CALLS


def substitute(expr, values):
    """`expr` with each name in `values` (a dict) replaced by `(its C text)`."""
    if not values:
        return expr
    return _WORD.sub(lambda m: f"({values[m.group(1)]}){m.group(2) or ''}"
                     if not m.group(2) and m.group(1) in values else m.group(0), expr)


def fold(expr):
    """`expr` without a leading choice on a constant: `(true) ? a : b` is `a` (a param that
    selects a form, once substituted: the generated sources read as the form they compute)."""
    m = re.match(r"\s*\((true|false)\)\s*\?", expr)
    if not m:
        return expr
    depth, pending = 0, 1
    for k in range(m.end(), len(expr)):
        ch = expr[k]
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0 and ch == "?":
            pending += 1
        elif depth == 0 and ch == ":":
            pending -= 1
            if pending == 0:
                chosen = expr[m.end():k] if m.group(1) == "true" else expr[k + 1:]
                return fold(chosen.strip())
    return expr


def literal(value):
    """A param's value as C text in an expression (`T(0.5)`, `true`), or None when it is not
    a finite number or a bool."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "true" if value else "false"
    if isinstance(value, int) or type(value).__name__.startswith(("int", "uint")):
        return f"T({int(value)})"
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f"T({f!r})" if math.isfinite(f) and type(value).__name__ != "str" else None


def _as_c(expr, ctype):
    """An expression in C for one element type: `T(v)` as a cast, float library functions by
    their float names."""
    expr = re.sub(r"\bT\(", "(T)(", expr)
    if ctype == "float":
        expr = re.sub(r"\b(" + "|".join(_C_FLOAT) + r")(\s*\()",
                      lambda m: _C_FLOAT[m.group(1)] + m.group(2), expr)
    return expr


class Activation:
    """The generated kernels of one op: `name`, its argument `arg`, its saved value `saved`
    (`arg` or "out"), its forward `c` and VJP `dc` with every param given (`doc`: a line for
    the comment above them)."""

    def __init__(self, name, arg, saved, c, dc, doc=""):
        self.name, self.arg, self.saved, self.c, self.dc, self.doc = name, arg, saved, c, dc, doc
        unknown = (names(c) - {arg}) | (names(dc) - {"g", saved})
        if unknown:
            raise ValueError(f"op {name!r}: its expressions read {sorted(unknown)}, which are "
                             f"neither its argument {arg!r} nor g and its saved {saved!r}")

    @property
    def exact(self):
        return exact(self.c) and exact(self.dc)


_CU_HEAD = """\
// Elementwise activations: forward, backward and bias + activation.
//
// GENERATED by `python -m tapegpu.ops.generate` from the ops' c= (forward) and dc= (VJP)
// expressions (tapegpu/ops/): do not edit; change the op's entry and generate again.
//
// Forward:   y = f(x)
// Backward:  dx = df(g, s), one pass from what the op saved (s: its input or its output)
// Batched VJP: g may hold any number of cotangents for one saved value
//            (g.shape == batch_shape + s.shape); element i of g pairs with saved
//            element i % n_saved.
//
// Entry points: tapegpu_<act>_<fwd|bwd>_<f32|f64>, tapegpu_bias_<act>_fwd_<f32|f64>
// (y = f(x + b) with b along the last axis) and tapegpu_bias_<act>_bwd_<f32|f64> (its
// backward: dx and the bias gradient, in one launch), one set per TAPEGPU_ACTIVATION line:
// the launch layer reads the activations from those lines.

typedef long long i64;

// ------------------------------------------------------------ loops
template <typename T, T (*F)(T)>
__device__ void map_fwd(const T *x, T *y, i64 n) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x)
    y[i] = F(x[i]);
}

// dx[i] = D(g[i], saved[i % n_saved]) for i < n_g (n_g is a multiple of n_saved).
template <typename T, T (*D)(T, T)>
__device__ void map_bwd(const T *g, const T *saved, T *dx, i64 n_g, i64 n_saved) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n_g; i += (i64)blockDim.x * gridDim.x) {
    i64 j = n_g == n_saved ? i : i % n_saved;
    dx[i] = D(g[i], saved[j]);
  }
}

// y[r, c] = f(x[r, c] + b[c])
template <typename T, T (*F)(T)>
__device__ void map_bias_fwd(const T *x, const T *b, T *y, i64 rows, i64 cols) {
  i64 n = rows * cols;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x)
    y[i] = F(x[i] + b[i % cols]);
}

// dx[r, c] = D(g[r, c], saved[r, c]) and db[c] = sum over r of dx[r, c], in one launch.
// Thread t < parts * cols visits the rows t / cols, t / cols + parts, ... of column
// t % cols, adding from +0.0 in that order: with parts == 1 (every row, in order: the bits
// of a sum over the rows) that is db[c]; else it goes to part[t], and the last block to
// finish (its ticket from *count, zero at the launch) adds each column's parts in order.
// Every addition's operands are fixed by (rows, cols, parts), never by timing.
template <typename T, T (*D)(T, T)>
__device__ void map_bias_bwd(const T *g, const T *saved, T *dx, T *db, T *part,
                             unsigned int *count, i64 rows, i64 cols, i64 parts) {
  __shared__ bool last;
  const i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x, threads = parts * cols;
  if (t < threads) {
    T acc = T(0);
    for (i64 i = t; i < rows * cols; i += threads) {
      const T d = D(g[i], saved[i]);
      dx[i] = d;
      acc = acc + d;
    }
    if (parts == 1) db[t] = acc;
    else part[t] = acc;
  }
  if (parts == 1) return;
  __threadfence();  // this block's parts are visible before its ticket is
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(count, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  const volatile T *parts_of = part;  // written by other blocks: read past the L1 cache
  for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
    T acc = T(0);
    for (i64 p = 0; p < parts; ++p) acc = acc + parts_of[p * cols + c];
    db[c] = acc;
  }
}

#define TAPEGPU_ACTIVATION(NAME, T, SUFFIX)                                                \\
  extern "C" __global__ void tapegpu_##NAME##_fwd_##SUFFIX(const T *x, T *y, i64 n) {     \\
    map_fwd<T, NAME##_f<T> >(x, y, n);                                                   \\
  }                                                                                      \\
  extern "C" __global__ void tapegpu_##NAME##_bwd_##SUFFIX(const T *g, const T *saved,   \\
                                                           T *dx, i64 n_g, i64 n_saved) { \\
    map_bwd<T, NAME##_d<T> >(g, saved, dx, n_g, n_saved);                                \\
  }                                                                                      \\
  extern "C" __global__ void tapegpu_bias_##NAME##_fwd_##SUFFIX(const T *x, const T *b,  \\
                                                                T *y, i64 rows, i64 cols) { \\
    map_bias_fwd<T, NAME##_f<T> >(x, b, y, rows, cols);                                  \\
  }                                                                                      \\
  extern "C" __global__ void tapegpu_bias_##NAME##_bwd_##SUFFIX(                         \\
      const T *g, const T *saved, T *dx, T *db, T *part, unsigned int *count, i64 rows,  \\
      i64 cols, i64 parts) {                                                             \\
    map_bias_bwd<T, NAME##_d<T> >(g, saved, dx, db, part, count, rows, cols, parts);     \\
  }

// ------------------------------------------------------------ activations
"""


def activations_cu(acts):
    """The text of cuda_kernels/activations.cu for the Activations `acts`."""
    parts = [_CU_HEAD]
    for a in acts:
        parts.append(f"\n// {a.name}: {a.doc}\n" if a.doc else f"\n// {a.name}\n")
        parts.append(f"template <typename T> __device__ T {a.name}_f(T {a.arg}) {{\n"
                     f"  return {a.c};\n}}\n")
        parts.append(f"template <typename T> __device__ T {a.name}_d(T g, T {a.saved}) {{\n"
                     f"  return {a.dc};\n}}\n")
        for t, suffix in (("float", "f32"), ("double", "f64")):
            parts.append(f"TAPEGPU_ACTIVATION({a.name}, {t}, {suffix})\n")
    return "".join(parts)


_H_HEAD = """\
/* The per-element functions of the CPU kernels in _cpu.c (bias + activation, and the
 * activation's backward from its saved value).
 *
 * GENERATED by `python -m tapegpu.ops.generate` from the ops' c= (forward) and dc= (VJP)
 * expressions (tapegpu/ops/): do not edit; change the op's entry and generate again.
 * Only the ops whose expressions are exact (arithmetic, comparisons, fabs, sqrt) are here:
 * C computes them with numpy's bits. _cpu.c stamps its loops with
 * TAPEGPU_CPU_ACTIVATIONS(X): X(name) for each op with both expressions exact, whose
 * functions are <name>_f_<float|double>(x) and <name>_d_<float|double>(g, saved), and
 * TAPEGPU_CPU_BACKWARDS(X) for each op with only its VJP exact (<name>_d_ only).
 */
"""


def activations_h(acts):
    """The text of tapegpu/backends/_activations.h for the Activations of `acts` whose
    expressions are exact: both (the activations), or only the VJP (the backwards)."""
    exact_acts = [a for a in acts if a.exact]
    backwards = [a for a in acts if not a.exact and exact(a.dc)]
    parts = [_H_HEAD]
    for a in exact_acts + backwards:
        parts.append(f"\n/* {a.name}: {a.doc} */\n" if a.doc else f"\n/* {a.name} */\n")
        for t in ("float", "double"):
            if a.exact:
                parts.append(f"static inline {t} {a.name}_f_{t}({t} {a.arg})\n{{\n"
                             f"    typedef {t} T;\n    return {_as_c(a.c, t)};\n}}\n")
            parts.append(f"static inline {t} {a.name}_d_{t}({t} g, {t} {a.saved})\n{{\n"
                         f"    typedef {t} T;\n    return {_as_c(a.dc, t)};\n}}\n")
    for macro, group in (("ACTIVATIONS", exact_acts), ("BACKWARDS", backwards)):
        parts.append(f"\n#define TAPEGPU_CPU_{macro}(X)" +
                     "".join(f" X({a.name})" for a in group) + "\n")
    return "".join(parts)


# -- fused groups -----------------------------------------------------------------------------
# A group's work for flat element `i` is a tuple of statements: ("load", name, array number,
# index template with `{i}`), ("let", name, C expression of earlier names, None), ("store",
# name, output number, None), ("sum", name, sum number, None). A name's first letter gives its
# C type (computed, loaded): T (v, a), bool (b, c), int (m, n), long long (k, l).
PREFIX = {"T": ("v", "a"), "bool": ("b", "c"), "int": ("m", "n"), "long long": ("k", "l")}
TYPE_OF = {p: t for t, ps in PREFIX.items() for p in ps}
_STATEMENT_NAME = re.compile(r"\b([vabcmnkl]\d+)\b")


def index(shape, to, i="i"):
    """The C expression of the flat index into a C-contiguous array of `shape` that holds the
    element at flat index `i` of its broadcast to `to` (or of its reshape, same size)."""
    size = math.prod(shape)
    if size == 1:
        return "0"
    if tuple(shape) == tuple(to) or not broadcasts(shape, to):  # the same, or a reshape
        return i
    padded = (1,) * (len(to) - len(shape)) + tuple(shape)
    terms, d = [], 0
    while d < len(to):
        if padded[d] == 1 and to[d] != 1:
            d += 1
            continue
        e = d  # a run of dims the array has: one coordinate for all of them
        while e + 1 < len(to) and not (padded[e + 1] == 1 and to[e + 1] != 1):
            e += 1
        below, span, weight = (math.prod(to[e + 1:]), math.prod(to[d:e + 1]),
                               math.prod(padded[e + 1:]))
        t = i if below == 1 else f"{i} / {below}"
        if d > 0:
            t = f"({t}) % {span}"
        terms.append(f"({t}) * {weight}" if weight != 1 else f"({t})")
        d = e + 1
    return " + ".join(terms) or "0"


def broadcasts(shape, to):
    """Whether numpy broadcasting takes `shape` to `to` (and only by repeating)."""
    return len(shape) <= len(to) and all(
        a == b or a == 1 for a, b in zip(shape[::-1], to[::-1]))


def fused_cuda(name, dtype, in_types, out_types, stmts, n_sums=0, cols=None, parts=1):
    """A fused group as a CUDA C kernel `name(in0.., out0.., n)`: a grid-stride loop over the
    elements; with column sums (the sums' outputs last), a thread per column walks the rows in
    order from +0.0 (numpy's order for a sum over leading axes: its bits). With `parts` > 1,
    the column sums take two stages (`fused_column_sums`)."""
    params = [f"const {t} *__restrict__ in{j}" for j, t in enumerate(in_types)]
    params += [f"{t} *__restrict__ out{j}" for j, t in enumerate(out_types)]
    if n_sums and parts > 1:
        return fused_column_sums(name, dtype, params, stmts, len(out_types) - n_sums, n_sums,
                                 cols, parts)
    params += ["long long n"]
    head = (f"typedef {C_TYPES[dtype]} T;\n"
            f'extern "C" __global__ void {name}({", ".join(params)}) {{\n')
    if not n_sums:
        return (head + "  for (long long i = blockIdx.x * (long long)blockDim.x + "
                "threadIdx.x; i < n;\n"
                "       i += (long long)blockDim.x * gridDim.x) {\n"
                f"{_cuda_body(stmts)}  }}\n}}\n")
    n_out = len(out_types) - n_sums
    acc = "".join(f"    T s{k} = (T)0;\n" for k in range(n_sums))
    done = "".join(f"    out{n_out + k}[j] = s{k};\n" for k in range(n_sums))
    return (head +
            f"  for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; "
            f"j < {cols}LL;\n"
            "       j += (long long)blockDim.x * gridDim.x) {\n" + acc +
            f"    for (long long r = 0; r < n / {cols}LL; ++r) {{\n"
            f"    const long long i = r * {cols}LL + j;\n"
            f"{_cuda_body(stmts)}    }}\n" + done + "  }\n}\n")


def fused_column_sums(name, dtype, params, stmts, n_out, n_sums, cols, parts):
    """Column sums in two stages, so that a tall sum (a bias gradient over 800k rows and 64
    columns) runs on `parts * cols` threads instead of `cols`:

    1. `name(in0.., out0.., part, n)`: thread t < parts * cols visits the flat elements t,
       t + parts * cols, t + 2 parts * cols, ... (the rows t / cols, that plus parts, ... of
       column t % cols: a warp reads consecutive elements), stores the group's outputs there
       and adds the summed values in that order from +0.0 into `part[k * parts * cols + t]`;
    2. `name_sum(part, sum0..)`: a block per (sum, column) adds its `parts` partial sums, its
       threads each a strided share in order, then a tree over the block's threads in shared
       memory, halving.

    Every addition's operands are fixed by (n, cols, parts), never by timing: the bits are the
    same at every run. They differ from the rows' sum in order by rounding only (as any
    reordering: at most (rows - 1) ulp of the sum of magnitudes)."""
    threads, block = parts * cols, column_sum_block(parts)
    head = f"typedef {C_TYPES[dtype]} T;\n"
    acc = "".join(f"  T s{k} = (T)0;\n" for k in range(n_sums))
    done = "".join(f"  part[{k}LL * {threads}LL + t] = s{k};\n" for k in range(n_sums))
    stage1 = (f'extern "C" __global__ void {name}({", ".join(params[:-n_sums])}, '
              "T *__restrict__ part, long long n) {\n"
              "  const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
              f"  if (t >= {threads}LL) return;\n" + acc +
              f"  for (long long i = t; i < n; i += {threads}LL) {{\n"
              f"{_cuda_body(stmts)}  }}\n" + done + "}\n")
    outs = ", ".join(f"T *__restrict__ sum{k}" for k in range(n_sums))
    store = " else ".join(f"if (k == {k}) sum{k}[c] = acc[0];" for k in range(n_sums))
    stage2 = (f'extern "C" __global__ void {name}_sum(const T *__restrict__ part, {outs}) {{\n'
              f"  __shared__ T acc[{block}];\n"
              f"  for (long long p = blockIdx.x; p < {n_sums * cols}LL; p += gridDim.x) {{\n"
              f"    const long long k = p / {cols}LL, c = p - k * {cols}LL;\n"
              "    T s = (T)0;\n"
              f"    for (long long r = threadIdx.x; r < {parts}LL; r += {block}LL)\n"
              f"      s = s + part[k * {threads}LL + r * {cols}LL + c];\n"
              "    acc[threadIdx.x] = s;\n"
              "    __syncthreads();\n"
              f"    for (int h = {block // 2}; h > 0; h >>= 1) {{\n"
              "      if (threadIdx.x < h) acc[threadIdx.x] = acc[threadIdx.x] + acc[threadIdx.x + h];\n"
              "      __syncthreads();\n"
              "    }\n"
              f"    if (threadIdx.x == 0) {{ {store} }}\n"
              "    __syncthreads();\n"
              "  }\n}\n")
    return head + stage1 + stage2


def column_sum_block(parts):
    """Threads per block of a two-stage column sum's second stage (`fused_column_sums`)."""
    block = 32
    while block < min(parts, 256):
        block *= 2
    return block


def _cuda_body(stmts, sums="s{k}"):
    """The statements for element `i` (of a grid-stride loop); `sums` names the accumulator
    of sum `k`."""
    lines = []
    for kind, name, arg, at in stmts:
        t = TYPE_OF.get(name[0], "T")
        if kind == "load":
            lines.append(f"    const {t} {name} = in{arg}[{at.format(i='i')}];")
        elif kind == "let":
            lines.append(f"    const {t} {name} = ({t})({arg});")
        elif kind == "sum":
            acc = sums.format(k=arg)
            lines.append(f"    {acc} = {acc} + {name};")
        else:
            lines.append(f"    out{arg}[i] = {name};")
    return "\n".join(lines) + "\n"


def fused_host(name, dtype, in_types, out_types, stmts, lanes, n_sums=0, cols=None):
    """A fused group as C++ for the CPU, `void name(void **arrays, long long n)` (inputs, then
    outputs, then the column sums). With `lanes`, a loop over blocks of that many elements,
    each statement run for the block's lanes (independent work the processor overlaps: one
    element's chain of library calls would wait on each result); without, a plain loop over
    the elements, which the compiler vectorizes (exact expressions: no library calls). With
    column sums, the loop runs along each row (`cols` elements) and adds the row into the
    sums: rows in order from +0.0, numpy's order for a sum over leading axes, so its bits."""
    k = len(in_types)
    n_out = len(out_types) - n_sums
    lines = [f"  const {t} *__restrict__ in{j} = (const {t} *)a[{j}];"
             for j, t in enumerate(in_types)]
    lines += [f"  {t} *__restrict__ out{j} = ({t} *)a[{k + j}];"
              for j, t in enumerate(out_types[:n_out])]
    lines += [f"  T *__restrict__ s{j} = (T *)a[{k + n_out + j}];" for j in range(n_sums)]
    head = ("#include <math.h>\n"
            f"typedef {C_TYPES[dtype]} T;\n"
            f'extern "C" __attribute__((visibility("default"))) void {name}'
            "(void **a, long long n) {\n" + "\n".join(lines) + "\n")
    if not lanes:
        zero = "".join(f"  for (long long j = 0; j < {cols}LL; ++j) s{k2}[j] = (T)0;\n"
                       for k2 in range(n_sums))
        loop = ("  for (long long i = 0; i < n; ++i) {\n" if not n_sums else
                f"  for (long long r = 0; r < n; r += {cols}LL)\n"
                f"    for (long long c = 0; c < {cols}LL; ++c) {{\n"
                "    const long long i = r + c;\n")
        return head + zero + loop + _cuda_body(stmts, sums="s{k}[c]") + "  }\n}\n"
    if not n_sums:
        return (head + f"  for (long long i = 0; i < n; i += {lanes}) {{\n"
                "    const long long m = n - i;\n"
                f"{_host_body(stmts, lanes)}  }}\n}}\n")
    zero = "".join(f"  for (long long j = 0; j < {cols}LL; ++j) s{j2}[j] = (T)0;\n"
                   for j2 in range(n_sums))
    return (head + zero +
            f"  for (long long r = 0; r < n; r += {cols}LL)\n"
            f"    for (long long c = 0; c < {cols}LL; c += {lanes}) {{\n"
            "    const long long i = r + c, m = " f"{cols}LL - c;\n"
            f"{_host_body(stmts, lanes)}  }}\n}}\n")


def _host_body(stmts, lanes):
    """The statements for elements i .. i + lanes - 1, of which the first `m` are real (the
    others repeat element i + m - 1 and are neither stored nor summed)."""
    each = f"for (int l = 0; l < {lanes}; ++l)"
    real = f"for (int l = 0; l < {lanes} && l < m; ++l)"
    lines = [f"    long long k[{lanes}]; {each} k[l] = i + (l < m ? l : m - 1);"]
    for kind, name, arg, at in stmts:
        t = TYPE_OF.get(name[0], "T")
        if kind == "load":
            lines.append(f"    {t} {name}[{lanes}]; {each} {name}[l] = "
                         f"in{arg}[{at.format(i='k[l]')}];")
        elif kind == "let":
            expr = _STATEMENT_NAME.sub(r"\1[l]", arg)
            lines.append(f"    {t} {name}[{lanes}]; {each} {name}[l] = ({t})({expr});")
        elif kind == "sum":
            lines.append(f"    {real} s{arg}[c + l] = s{arg}[c + l] + {name}[l];")
        else:
            lines.append(f"    {real} out{arg}[i + l] = {name}[l];")
    return "\n".join(lines) + "\n"
