/* tapegpu._cpu: CPU kernels for the numpy backend, each one pass where numpy needs several
 * (the ops' entries declare them: tapegpu/ops/kernels.py), and the caller of the kernels
 * that tg.function's fusion compiles (call_fused, below).
 *
 *   bias_act(k, x, b, out)      out = f(x + b) over rows of len(b), f the k-th activation of
 *                               ACTIVATIONS (numpy: an add, then f's passes)
 *   act_backward(k, y, g, out)  out = f's backward from its saved value y and the cotangent
 *                               g, f the k-th of ACTIVATIONS + BACKWARDS; y repeats over g's
 *                               leading batch axes (numpy: the rule's passes, three for ReLU:
 *                               a comparison, a mask, a select)
 *   outer(x, g, out)            out[r, i, j] = x[r, i] * g[r, j] + 0.0: one outer product per
 *                               row r, out of shape (..., m, n), bit for bit numpy's einsum
 *                               (which adds the products to a zeroed output: -0.0 gives +0.0);
 *                               numpy pays per output row, this runs at memory speed
 *   colsum(x, out)              out = the sum of the rows of x (rows, n), in row order:
 *                               numpy's add.reduce over axis 0 for n > 1, its bits
 *   shift(x, z)                 z = x - each row's max: the normalised exponential's shift
 *   rowsum(x, out)              out = the sum of each row of x (rows, n), pairwise as
 *                               numpy's add.reduce over the last axis, its bits
 *   xent_shift, xent_finish,    sparse cross-entropy's steps between numpy's exp, sum
 *   xent_grad, xent_grad_vjp    and log, its VJP, and that VJP's own: one pass each (below)
 *   tanh32(x, out)              out = tanh(x) of float32, correctly rounded (numpy's float32
 *                               loop is not), computed in double; out must not be x (below)
 *
 * The activations are the ops whose forward (c=) and VJP (dc=) expressions are exact, the
 * backwards those whose VJP only is (their forwards call the C library's functions); their
 * per-element functions are generated from those expressions into _activations.h (`python -m
 * tapegpu.ops.generate`), so they compute the rules' IEEE operations, with numpy's bits.
 * The arrays are C-contiguous float32 or float64 buffers of one dtype, `out` writeable; the
 * Python side (tapegpu/ops/kernels.py) checks that and falls back to numpy otherwise. The GIL
 * is released while they run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

typedef struct {
    Py_buffer b[6];
    int n;
} Buffers;

static void release(Buffers *bs)
{
    for (int i = 0; i < bs->n; i++)
        PyBuffer_Release(&bs->b[i]);
    bs->n = 0;
}

/* the buffers of args, C-contiguous (argument i writeable where bit i of `writable` is set),
 * one per letter of `kinds`: 'f' a float buffer of the first one's type (float32 or float64),
 * 'i' an int32 or int64 one. The float item size (4 or 8) is returned, 0 with an exception set
 * on bad arguments. */
static int get_many(PyObject *const *args, Py_ssize_t nargs, const char *name, const char *kinds,
                    int writable, Buffers *bs)
{
    Py_ssize_t want = (Py_ssize_t)strlen(kinds);
    bs->n = 0;
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arrays", name, want);
        return 0;
    }
    for (int i = 0; i < want; i++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | ((writable >> i) & 1 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(args[i], &bs->b[i], flags) < 0) {
            release(bs);
            return 0;
        }
        bs->n++;
    }
    const char *f = bs->b[0].format;
    int size = (int)bs->b[0].itemsize;
    int ok = (size == 4 && strcmp(f, "f") == 0) || (size == 8 && strcmp(f, "d") == 0);
    for (int i = 1; i < want; i++) {
        const char *fi = bs->b[i].format;
        if (kinds[i] == 'f')
            ok = ok && bs->b[i].itemsize == size && strcmp(fi, f) == 0;
        else
            ok = ok && ((bs->b[i].itemsize == 4 && strcmp(fi, "i") == 0) ||
                        (bs->b[i].itemsize == 8 && (strcmp(fi, "l") == 0 || strcmp(fi, "q") == 0)));
    }
    if (!ok) {
        release(bs);
        PyErr_Format(PyExc_TypeError, "%s: the arrays must all be float32 or all float64%s",
                     name, strchr(kinds, 'i') ? ", the labels int32 or int64" : "");
        return 0;
    }
    return size;
}

/* three float buffers of one type, the last writeable */
static int get_buffers(PyObject *const *args, Py_ssize_t nargs, const char *name, Buffers *bs)
{
    return get_many(args, nargs, name, "fff", 0x4, bs);
}

/* kernel(a, b, out, n, k): arguments in the Python call's order; n elements in the whole
 * arrays, k in the one that repeats */
typedef void (*kernel)(const void *, const void *, void *, Py_ssize_t, Py_ssize_t);

/* checks the arrays, then runs the float32 or float64 kernel without the GIL: `whole` is the
 * index of the argument that `out` is like, `part` of the one that repeats over it */
static PyObject *run(PyObject *const *args, Py_ssize_t nargs, const char *name, int whole,
                     int part, kernel f32, kernel f64, const char *shape_rule)
{
    Buffers bs;
    int size = get_buffers(args, nargs, name, &bs);
    if (size == 0)
        return NULL;
    Py_ssize_t n = bs.b[whole].len / size, k = bs.b[part].len / size;
    if (k == 0 || n % k != 0 || bs.b[2].len != bs.b[whole].len) {
        release(&bs);
        PyErr_Format(PyExc_ValueError, "%s: %s", name, shape_rule);
        return NULL;
    }
    kernel f = size == 4 ? f32 : f64;
    Py_BEGIN_ALLOW_THREADS
    f(bs.b[0].buf, bs.b[1].buf, bs.b[2].buf, n, k);
    Py_END_ALLOW_THREADS
    release(&bs);
    Py_RETURN_NONE;
}

/* ---- activations ----------------------------------------------------------------------
 * The loops, stamped for each op of TAPEGPU_CPU_ACTIVATIONS; the per-element functions
 * <name>_f_<T>(x) and <name>_d_<T>(g, saved) are generated from the ops' expressions. */
#include "_activations.h"

#define BIAS_LOOP(NAME, T)                                                                 \
    static void bias_##NAME##_##T(const void *xv, const void *bv, void *ov, Py_ssize_t n,  \
                                  Py_ssize_t k)                                           \
    {                                                                                     \
        const T *x = xv, *b = bv;                                                         \
        T *out = ov;                                                                      \
        for (Py_ssize_t i = 0; i < n; i += k)                                             \
            for (Py_ssize_t j = 0; j < k; j++)                                            \
                out[i + j] = NAME##_f_##T(x[i + j] + b[j]);                               \
    }
#define BACKWARD_LOOP(NAME, T)                                                             \
    static void NAME##_backward_##T(const void *yv, const void *gv, void *ov, Py_ssize_t n, \
                                    Py_ssize_t m)                                         \
    {                                                                                     \
        const T *y = yv, *g = gv;                                                         \
        T *out = ov;                                                                      \
        for (Py_ssize_t i = 0; i < n; i += m)                                             \
            for (Py_ssize_t j = 0; j < m; j++)                                            \
                out[i + j] = NAME##_d_##T(g[i + j], y[j]);                                \
    }
#define ACTIVATION_BOTH(NAME)                                                              \
    BIAS_LOOP(NAME, float) BIAS_LOOP(NAME, double) BACKWARD_BOTH(NAME)
#define BACKWARD_BOTH(NAME) BACKWARD_LOOP(NAME, float) BACKWARD_LOOP(NAME, double)
TAPEGPU_CPU_ACTIVATIONS(ACTIVATION_BOTH)
TAPEGPU_CPU_BACKWARDS(BACKWARD_BOTH)

typedef struct {
    const char *name;
    kernel bias[2], backward[2]; /* float, double */
} Activation;
#define ACTIVATION_ENTRY(NAME)                                                             \
    {#NAME, {bias_##NAME##_float, bias_##NAME##_double},                                  \
     {NAME##_backward_float, NAME##_backward_double}},
#define BACKWARD_ENTRY(NAME)                                                               \
    {#NAME, {NULL, NULL}, {NAME##_backward_float, NAME##_backward_double}},
/* the activations, then the backwards (no bias kernels) */
static const Activation activations[] = {
    TAPEGPU_CPU_ACTIVATIONS(ACTIVATION_ENTRY) TAPEGPU_CPU_BACKWARDS(BACKWARD_ENTRY){NULL}};
#define ONE(NAME) +1
#define N_ACTIVATIONS ((Py_ssize_t)(0 TAPEGPU_CPU_ACTIVATIONS(ONE)))
#define N_KERNELS ((Py_ssize_t)(sizeof activations / sizeof activations[0]) - 1)

/* the activation args[0] names (its index in ACTIVATIONS, or in ACTIVATIONS + BACKWARDS for
 * a backward: `n` of them), or NULL with an exception set */
static const Activation *activation_of(PyObject *const *args, Py_ssize_t nargs,
                                       const char *name, Py_ssize_t n, const char *names)
{
    Py_ssize_t k = nargs == 4 ? PyLong_AsSsize_t(args[0]) : -1;
    if (k == -1 && PyErr_Occurred())
        return NULL;
    if (k < 0 || k >= n) {
        PyErr_Format(PyExc_TypeError, "%s(k, ...) takes an index k into %s (%zd "
                     "activations) and 3 arrays", name, names, n);
        return NULL;
    }
    return &activations[k];
}

static PyObject *bias_act(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    const Activation *a = activation_of(args, nargs, "bias_act", N_ACTIVATIONS, "ACTIVATIONS");
    if (a == NULL)
        return NULL;
    return run(args + 1, 3, "bias_act", 0, 1, a->bias[0], a->bias[1],
               "x must be rows of len(b), out like x");
}

static PyObject *act_backward(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    const Activation *a = activation_of(args, nargs, "act_backward", N_KERNELS,
                                        "ACTIVATIONS + BACKWARDS");
    if (a == NULL)
        return NULL;
    return run(args + 1, 3, "act_backward", 1, 0, a->backward[0], a->backward[1],
               "g must be batches of y, out like g");
}

/* out[r, i, j] = x[r, i] * g[r, j] + 0 for rows r of x (m long) and g (n long); the + 0 (kept:
 * no -ffast-math) turns -0.0 into +0.0 as numpy's einsum does, and changes nothing else */
#define OUTER(T)                                                                     \
    static void outer_##T(const T *x, const T *g, T *out, Py_ssize_t rows,           \
                          Py_ssize_t m, Py_ssize_t n)                                \
    {                                                                                \
        for (Py_ssize_t r = 0; r < rows; r++, x += m, g += n)                        \
            for (Py_ssize_t i = 0; i < m; i++, out += n) {                           \
                const T s = x[i];                                                    \
                for (Py_ssize_t j = 0; j < n; j++)                                   \
                    out[j] = s * g[j] + (T)0;                                        \
            }                                                                        \
    }
OUTER(float)
OUTER(double)

static PyObject *outer(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    Buffers bs;
    int size = get_buffers(args, nargs, "outer", &bs);
    if (size == 0)
        return NULL;
    Py_buffer *o = &bs.b[2];
    Py_ssize_t m = o->ndim >= 2 ? o->shape[o->ndim - 2] : 0;
    Py_ssize_t n = o->ndim >= 2 ? o->shape[o->ndim - 1] : 0;
    Py_ssize_t rows = m && n ? o->len / size / (m * n) : 0;
    if (rows == 0 || bs.b[0].len != rows * m * size || bs.b[1].len != rows * n * size) {
        release(&bs);
        PyErr_SetString(PyExc_ValueError, "outer: out must have shape (..., m, n), x the "
                        "elements of (..., m) and g of (..., n), none empty");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (size == 4)
        outer_float(bs.b[0].buf, bs.b[1].buf, o->buf, rows, m, n);
    else
        outer_double(bs.b[0].buf, bs.b[1].buf, o->buf, rows, m, n);
    Py_END_ALLOW_THREADS
    release(&bs);
    Py_RETURN_NONE;
}

/* out[j] = ((0 + x[0, j]) + x[1, j]) + ... over the rows of a C-contiguous (rows, n) x: numpy's
 * add.reduce over the first axis when n > 1 (it starts from the identity, so -0.0 sums to +0.0,
 * and adds whole rows in order; one column it sums pairwise instead), so its bits: the bias
 * gradient of a dense layer, one pass without numpy's reduction machinery */
#define COLSUM(T)                                                                    \
    static void colsum_##T(const T *x, T *out, Py_ssize_t rows, Py_ssize_t n)        \
    {                                                                                \
        for (Py_ssize_t j = 0; j < n; j++)                                           \
            out[j] = (T)0 + x[j];                                                    \
        for (Py_ssize_t r = 1; r < rows; r++) {                                      \
            x += n;                                                                  \
            for (Py_ssize_t j = 0; j < n; j++)                                       \
                out[j] += x[j];                                                      \
        }                                                                            \
    }
COLSUM(float)
COLSUM(double)

/* out[r] = 0 + the pairwise sum of row r of a C-contiguous (rows, n) x: numpy's add.reduce
 * over the last axis, so its bits (numpy sums each row from the identity with its pairwise
 * scheme: under 8 elements in order from -0.0; up to 128 in 8 running sums, combined as
 * ((0+1)+(2+3))+((4+5)+(6+7)), then the rest in order; longer rows halved at a multiple of 8) */
#define ROWSUM(T)                                                                    \
    static T pairwise_##T(const T *a, Py_ssize_t n)                                  \
    {                                                                                \
        if (n < 8) {                                                                 \
            T res = (T)-0.0;                                                         \
            for (Py_ssize_t i = 0; i < n; i++)                                       \
                res += a[i];                                                         \
            return res;                                                              \
        }                                                                            \
        if (n <= 128) {                                                              \
            T r[8];                                                                  \
            Py_ssize_t i;                                                            \
            for (int j = 0; j < 8; j++)                                              \
                r[j] = a[j];                                                         \
            for (i = 8; i < n - (n % 8); i += 8)                                     \
                for (int j = 0; j < 8; j++)                                          \
                    r[j] += a[i + j];                                                \
            T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])); \
            for (; i < n; i++)                                                       \
                res += a[i];                                                         \
            return res;                                                              \
        }                                                                            \
        Py_ssize_t n2 = n / 2;                                                       \
        n2 -= n2 % 8;                                                                \
        return pairwise_##T(a, n2) + pairwise_##T(a + n2, n - n2);                   \
    }                                                                                \
    static void rowsum_##T(const T *x, T *out, Py_ssize_t rows, Py_ssize_t n)        \
    {                                                                                \
        for (Py_ssize_t r = 0; r < rows; r++, x += n)                                \
            out[r] = (T)0 + pairwise_##T(x, n);                                      \
    }
ROWSUM(float)
ROWSUM(double)

/* z = x - the max of x's row, per row of a C-contiguous (rows, n) x: the shift before the
 * exponential (the max as numpy's maximum.reduce takes it, a NaN row giving NaN; the sign of
 * a zero max, which numpy's vector code may pick otherwise, changes no difference's
 * exponential) */
#define SHIFT(T)                                                                     \
    static T shift_row_##T(const T *x, T *z, Py_ssize_t n) /* one row; its max */    \
    {                                                                                \
        T m = x[0];                                                                  \
        for (Py_ssize_t j = 1; j < n; j++)                                           \
            m = (m >= x[j] || m != m) ? m : x[j];                                    \
        for (Py_ssize_t j = 0; j < n; j++)                                           \
            z[j] = x[j] - m;                                                         \
        return m;                                                                    \
    }                                                                                \
    static void shift_##T(const T *x, T *z, Py_ssize_t rows, Py_ssize_t n)           \
    {                                                                                \
        for (Py_ssize_t r = 0; r < rows; r++, x += n, z += n)                        \
            shift_row_##T(x, z, n);                                                  \
    }
SHIFT(float)
SHIFT(double)

/* the row kernels' call: x (rows, n), none empty, and out of (n,) for colsum, (rows,) for
 * rowsum, x's shape for shift (`which` 0, 1, 2) */
static PyObject *rows_call(PyObject *const *args, Py_ssize_t nargs, int which)
{
    static const char *names[] = {"colsum", "rowsum", "shift"};
    static const char *outs[] = {"(n,)", "(rows,)", "like x"};
    Buffers bs;
    int size = get_many(args, nargs, names[which], "ff", 0x2, &bs);
    if (size == 0)
        return NULL;
    Py_buffer *x = &bs.b[0];
    Py_ssize_t m = bs.b[1].len / size, n = x->ndim >= 1 ? x->shape[x->ndim - 1] : 0;
    Py_ssize_t rows = n ? x->len / size / n : 0;
    if (rows == 0 || m != (which == 0 ? n : which == 1 ? rows : rows * n)) {
        release(&bs);
        PyErr_Format(PyExc_ValueError, "%s: x must be (rows, n) and out %s, none empty",
                     names[which], outs[which]);
        return NULL;
    }
    void *o = bs.b[1].buf;
    Py_BEGIN_ALLOW_THREADS
    switch (which * 2 + (size == 8)) {
    case 0: colsum_float(x->buf, o, rows, n); break;
    case 1: colsum_double(x->buf, o, rows, n); break;
    case 2: rowsum_float(x->buf, o, rows, n); break;
    case 3: rowsum_double(x->buf, o, rows, n); break;
    case 4: shift_float(x->buf, o, rows, n); break;
    default: shift_double(x->buf, o, rows, n);
    }
    Py_END_ALLOW_THREADS
    release(&bs);
    Py_RETURN_NONE;
}

static PyObject *colsum(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return rows_call(args, nargs, 0);
}

static PyObject *rowsum(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return rows_call(args, nargs, 1);
}

static PyObject *shift(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return rows_call(args, nargs, 2);
}

/* call_fused(address, n, n_out, counts, itemsizes, *arrays): runs a kernel that tg.function's
 * fusion compiled, `void kernel(void **arrays, long long n)`, on the arrays' buffers (inputs,
 * then n_out outputs). `counts` and `itemsizes` are tuples with each array's element count and
 * item size (its dtype's: 4 or 8 for the floats, 1 for a bool). Every buffer must be
 * C-contiguous with exactly that many elements of that size, outputs writeable; else
 * ValueError and nothing runs. The GIL is released only for large n (a tiny call costs less
 * than the switch).
 */
#define MAX_FUSED_ARRAYS 64
typedef void (*fused_kernel)(void **, long long);

static PyObject *call_fused(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 5 || nargs - 5 > MAX_FUSED_ARRAYS || !PyTuple_Check(args[3])
            || !PyTuple_Check(args[4]) || PyTuple_GET_SIZE(args[3]) != nargs - 5
            || PyTuple_GET_SIZE(args[4]) != nargs - 5) {
        PyErr_SetString(PyExc_TypeError,
                        "call_fused(address, n, n_out, counts, itemsizes, *arrays)");
        return NULL;
    }
    void *address = PyLong_AsVoidPtr(args[0]);
    long long n = PyLong_AsLongLong(args[1]);
    long n_out = PyLong_AsLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t count = nargs - 5;
    Py_buffer b[MAX_FUSED_ARRAYS];
    void *ptrs[MAX_FUSED_ARRAYS];
    Py_ssize_t got = 0;
    for (; got < count; got++) {
        int out = got >= count - n_out;
        Py_ssize_t itemsize = PyLong_AsSsize_t(PyTuple_GET_ITEM(args[4], got));
        Py_ssize_t want = PyLong_AsSsize_t(PyTuple_GET_ITEM(args[3], got)) * itemsize;
        if (PyErr_Occurred())
            break;
        if (PyObject_GetBuffer(args[5 + got], &b[got],
                               PyBUF_C_CONTIGUOUS | (out ? PyBUF_WRITABLE : 0)) < 0)
            break;
        if (b[got].itemsize != itemsize || b[got].len != want) {
            PyErr_Format(PyExc_ValueError, "call_fused: array %zd has %zd bytes of %zd-byte "
                         "items, the kernel needs %zd bytes of %zd-byte items", got,
                         b[got].len, b[got].itemsize, want, itemsize);
            PyBuffer_Release(&b[got]);
            break;
        }
        ptrs[got] = b[got].buf;
    }
    if (got == count) {
        if (n >= 65536) {
            Py_BEGIN_ALLOW_THREADS
            ((fused_kernel)address)(ptrs, n);
            Py_END_ALLOW_THREADS
        } else {
            ((fused_kernel)address)(ptrs, n);
        }
    }
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&b[i]);
    if (got != count)
        return NULL;
    Py_RETURN_NONE;
}

/* ---- convolution and pooling kernels (tapegpu/ops/conv.py) -------------------------------
 *
 * Channels-last arrays with up to 3 spatial dimensions (fewer: leading sizes of 1) and a
 * flattened leading batch. `geom` is a tuple of 19 ints:
 *     C, in[3], out[3], ksize[3], strides[3], dilations[3], pad_lo[3]
 * Output position o and kernel tap k meet input position o * stride + k * dilation - pad_lo;
 * outside [0, in) is padding (zero for convolution, never chosen for max pooling).
 *
 *   im2col(x, cols, geom, row0)        cols[r, (tap, c)] = x at the input position of row
 *                                      row0 + r (rows are (batch, *out)) and tap, or 0 in
 *                                      the padding: rows of taps * C, each tap's C contiguous
 *   col2im(cols, dx, geom, row0)       the transpose: dx += cols' values at their input
 *                                      positions (dx must be zero where nothing else is)
 *   max_pool(x, out, arg, geom)        out = each window's maximum, arg (int32) = the tap of
 *                                      its first maximum, padding taps counted as the lowest
 *                                      value (as numpy's strict `>` over padded input); a
 *                                      NaN is above every number (the first NaN wins)
 *   max_pool_grad(arg, g, dx, geom)    dx += g at each window's arg position; g may have
 *                                      leading batch axes that arg lacks (dx has them too)
 *
 * float32 or float64, C-contiguous; ValueError/TypeError on mismatched sizes. The GIL is
 * released while they run.
 */
typedef struct {
    Py_ssize_t c, in[3], out[3], k[3], s[3], d[3], lo[3], taps, in_n, out_n;
} Geom;

static int parse_geom(PyObject *t, Geom *g, const char *name)
{
    Py_ssize_t v[19];
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 19) {
        PyErr_Format(PyExc_TypeError, "%s: geom must be a tuple of 19 ints", name);
        return 0;
    }
    for (int i = 0; i < 19; i++) {
        v[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, i));
        if (v[i] == -1 && PyErr_Occurred())
            return 0;
        if (v[i] < (i >= 7 && i < 16 ? 1 : 0)) {
            PyErr_Format(PyExc_ValueError, "%s: bad geom entry %d: %zd", name, i, v[i]);
            return 0;
        }
    }
    g->c = v[0];
    for (int i = 0; i < 3; i++) {
        g->in[i] = v[1 + i];
        g->out[i] = v[4 + i];
        g->k[i] = v[7 + i];
        g->s[i] = v[10 + i];
        g->d[i] = v[13 + i];
        g->lo[i] = v[16 + i];
    }
    g->taps = g->k[0] * g->k[1] * g->k[2];
    g->in_n = g->in[0] * g->in[1] * g->in[2];
    g->out_n = g->out[0] * g->out[1] * g->out[2];
    return 1;
}

/* the buffers args[0..n-1], C-contiguous, all float32 or all float64 except `int_arg` (int32,
 * -1 for none); those in `writable` (a bit mask) writeable. Returns the float item size. */
static int conv_buffers(PyObject *const *args, int n, int writable, int int_arg,
                        const char *name, Py_buffer *b)
{
    int size = 0;
    for (int i = 0; i < n; i++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | ((writable >> i) & 1 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(args[i], &b[i], flags) < 0) {
            for (int j = 0; j < i; j++)
                PyBuffer_Release(&b[j]);
            return 0;
        }
    }
    const char *bad = NULL, *ff = NULL;
    for (int i = 0; i < n && !bad; i++) {
        const char *f = b[i].format;
        if (i == int_arg) {
            if (b[i].itemsize != 4 || !(strcmp(f, "i") == 0 || strcmp(f, "l") == 0))
                bad = "the index array must be int32";
        } else if (ff == NULL) {
            ff = f;
            size = b[i].itemsize;
            if (!((size == 4 && strcmp(f, "f") == 0) || (size == 8 && strcmp(f, "d") == 0)))
                bad = "the arrays must all be float32 or all float64";
        } else if (b[i].itemsize != size || strcmp(f, ff) != 0) {
            bad = "the arrays must all be float32 or all float64";
        }
    }
    if (bad) {
        for (int i = 0; i < n; i++)
            PyBuffer_Release(&b[i]);
        PyErr_Format(PyExc_TypeError, "%s: %s", name, bad);
        return 0;
    }
    return size;
}

static void release_n(Py_buffer *b, int n)
{
    for (int i = 0; i < n; i++)
        PyBuffer_Release(&b[i]);
}

/* the window of one output position: its first input position on each axis (may be in the
 * padding) */
typedef struct {
    Py_ssize_t base[3];
} Window;

static inline Window window_of(const Geom *g, Py_ssize_t o)
{
    Window w;
    Py_ssize_t o2 = o % g->out[2], rest = o / g->out[2];
    w.base[2] = o2 * g->s[2] - g->lo[2];
    w.base[1] = (rest % g->out[1]) * g->s[1] - g->lo[1];
    w.base[0] = (rest / g->out[1]) * g->s[0] - g->lo[0];
    return w;
}

/* the input position (flat within one image) of window `w` at tap (t0, t1, t2), or -1 in the
 * padding */
static inline Py_ssize_t at_tap(const Geom *g, const Window *w, Py_ssize_t t0, Py_ssize_t t1,
                                Py_ssize_t t2)
{
    Py_ssize_t i0 = w->base[0] + t0 * g->d[0], i1 = w->base[1] + t1 * g->d[1],
               i2 = w->base[2] + t2 * g->d[2];
    if (i0 < 0 || i0 >= g->in[0] || i1 < 0 || i1 >= g->in[1] || i2 < 0 || i2 >= g->in[2])
        return -1;
    return (i0 * g->in[1] + i1) * g->in[2] + i2;
}

static inline Py_ssize_t at_flat_tap(const Geom *g, const Window *w, Py_ssize_t t)
{
    return at_tap(g, w, t / (g->k[1] * g->k[2]), (t / g->k[2]) % g->k[1], t % g->k[2]);
}

/* runs BODY for every tap of window `w` in order, with `t` its index and `i` its input
 * position (-1 in the padding) */
#define FOR_TAPS(g, w, BODY)                                                                  \
    {                                                                                         \
        Py_ssize_t t = 0;                                                                     \
        for (Py_ssize_t t0 = 0; t0 < (g)->k[0]; t0++)                                         \
            for (Py_ssize_t t1 = 0; t1 < (g)->k[1]; t1++)                                     \
                for (Py_ssize_t t2 = 0; t2 < (g)->k[2]; t2++, t++) {                          \
                    Py_ssize_t i = at_tap(g, &(w), t0, t1, t2);                               \
                    BODY                                                                      \
                }                                                                             \
    }

/* whether every tap of window `w` is inside the input (no padding) */
static inline int inside(const Geom *g, const Window *w)
{
    for (int a = 0; a < 3; a++)
        if (w->base[a] < 0 || w->base[a] + (g->k[a] - 1) * g->d[a] >= g->in[a])
            return 0;
    return 1;
}

/* the channel loops, on pointers that do not alias (so that they vectorize: not inlined, where
 * gcc would drop the `restrict`s and branch per element) */
#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif
#define CHANNEL_LOOPS(T, I)                                                                    \
    static NOINLINE void add_##T(T *restrict dst, const T *restrict src, Py_ssize_t c)          \
    {                                                                                         \
        for (Py_ssize_t j = 0; j < c; j++)                                                    \
            dst[j] += src[j];                                                                 \
    }                                                                                         \
    static NOINLINE void pool_first_##T(const T *restrict v, T *restrict ob,                    \
                                      int32_t *restrict ab, Py_ssize_t c, T lowest)           \
    {                                                                                         \
        for (Py_ssize_t j = 0; j < c; j++) {                                                  \
            ob[j] = v ? v[j] : lowest;                                                        \
            ab[j] = 0;                                                                        \
        }                                                                                     \
    }                                                                                         \
    static NOINLINE void pool_step_##T(const T *restrict v, T *restrict ob,                     \
                                     int32_t *restrict ab, Py_ssize_t c, int32_t t)           \
    {                                                                                         \
        for (Py_ssize_t j = 0; j < c; j++) { /* selects by bit masks: no branch */            \
            T a = v[j], m = ob[j];                                                            \
            I ai, mi, mask = -(I)((a > m) | ((a != a) & (m == m))); /* NaN wins, once */      \
            memcpy(&ai, &a, sizeof(T));                                                       \
            memcpy(&mi, &m, sizeof(T));                                                       \
            ai = (ai & mask) | (mi & ~mask);                                                  \
            memcpy(ob + j, &ai, sizeof(T));                                                   \
            ab[j] = (ab[j] & ~(int32_t)mask) | (t & (int32_t)mask);                           \
        }                                                                                     \
    }
CHANNEL_LOOPS(float, int32_t)
CHANNEL_LOOPS(double, int64_t)

#define CONV_KERNELS(T)                                                                       \
    static void im2col_##T(const T *restrict x, T *restrict cols, const Geom *g,              \
                           Py_ssize_t row0, Py_ssize_t rows)                                  \
    {                                                                                         \
        Py_ssize_t c = g->c;                                                                  \
        for (Py_ssize_t r = 0; r < rows; r++) {                                               \
            Py_ssize_t row = row0 + r;                                                        \
            const T *xb = x + row / g->out_n * g->in_n * c;                                   \
            Window w = window_of(g, row % g->out_n);                                          \
            T *dst = cols + r * g->taps * c;                                                  \
            if (g->d[2] == 1 && inside(g, &w)) { /* each run of the last axis's taps: one */  \
                Py_ssize_t run = g->k[2] * c;                                                 \
                for (Py_ssize_t t0 = 0; t0 < g->k[0]; t0++)                                   \
                    for (Py_ssize_t t1 = 0; t1 < g->k[1]; t1++, dst += run)                   \
                        memcpy(dst, xb + at_tap(g, &w, t0, t1, 0) * c, run * sizeof(T));      \
                continue;                                                                     \
            }                                                                                 \
            FOR_TAPS(g, w, {                                                                  \
                if (i < 0)                                                                    \
                    memset(dst, 0, c * sizeof(T));                                            \
                else if (c == 1)                                                              \
                    *dst = xb[i];                                                             \
                else                                                                          \
                    memcpy(dst, xb + i * c, c * sizeof(T));                                   \
                dst += c;                                                                     \
            })                                                                                \
        }                                                                                     \
    }                                                                                         \
    static void col2im_##T(const T *restrict cols, T *restrict dx, const Geom *g,             \
                           Py_ssize_t row0, Py_ssize_t rows)                                  \
    {                                                                                         \
        Py_ssize_t c = g->c;                                                                  \
        for (Py_ssize_t r = 0; r < rows; r++) {                                               \
            Py_ssize_t row = row0 + r;                                                        \
            T *xb = dx + row / g->out_n * g->in_n * c;                                        \
            Window w = window_of(g, row % g->out_n);                                          \
            const T *src = cols + r * g->taps * c;                                            \
            if (g->d[2] == 1 && inside(g, &w)) {                                              \
                Py_ssize_t run = g->k[2] * c;                                                 \
                for (Py_ssize_t t0 = 0; t0 < g->k[0]; t0++)                                   \
                    for (Py_ssize_t t1 = 0; t1 < g->k[1]; t1++, src += run)                   \
                        add_##T(xb + at_tap(g, &w, t0, t1, 0) * c, src, run);                 \
                continue;                                                                     \
            }                                                                                 \
            FOR_TAPS(g, w, {                                                                  \
                if (i >= 0)                                                                   \
                    add_##T(xb + i * c, src, c);                                              \
                src += c;                                                                     \
            })                                                                                \
        }                                                                                     \
    }                                                                                         \
    static void max_pool_##T(const T *restrict x, T *restrict out, int32_t *restrict arg,     \
                             const Geom *g, Py_ssize_t batch, T lowest)                       \
    {                                                                                         \
        Py_ssize_t c = g->c;                                                                  \
        for (Py_ssize_t b = 0; b < batch; b++) {                                              \
            const T *xb = x + b * g->in_n * c;                                                \
            for (Py_ssize_t o = 0; o < g->out_n; o++) {                                       \
                T *ob = out + (b * g->out_n + o) * c;                                         \
                int32_t *ab = arg + (b * g->out_n + o) * c;                                   \
                Window w = window_of(g, o);                                                   \
                FOR_TAPS(g, w, {                                                              \
                    if (t == 0)                                                               \
                        pool_first_##T(i < 0 ? NULL : xb + i * c, ob, ab, c, lowest);         \
                    else if (i >= 0) /* the padding's lowest value never wins (>) */          \
                        pool_step_##T(xb + i * c, ob, ab, c, (int32_t)t);                     \
                })                                                                            \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    static void max_pool_grad_##T(const int32_t *restrict arg, const T *restrict gr,          \
                                  T *restrict dx, const Geom *g, Py_ssize_t batch,            \
                                  Py_ssize_t reps, const Py_ssize_t *restrict offset)         \
    {                                                                                         \
        Py_ssize_t c = g->c;                                                                  \
        for (Py_ssize_t rep = 0; rep < reps; rep++) {                                         \
            const T *gg = gr + rep * batch * g->out_n * c;                                    \
            T *dd = dx + rep * batch * g->in_n * c;                                           \
            for (Py_ssize_t b = 0; b < batch; b++)                                            \
                for (Py_ssize_t o = 0; o < g->out_n; o++) {                                   \
                    Window w = window_of(g, o);                                               \
                    Py_ssize_t at = (b * g->out_n + o) * c;                                   \
                    T *db = dd + b * g->in_n * c;                                             \
                    if (inside(g, &w)) { /* every tap in the input: a table of offsets */     \
                        Py_ssize_t base = (w.base[0] * g->in[1] + w.base[1]) * g->in[2]       \
                                          + w.base[2];                                        \
                        for (Py_ssize_t j = 0; j < c; j++)                                    \
                            db[(base + offset[arg[at + j]]) * c + j] += gg[at + j];           \
                        continue;                                                             \
                    }                                                                         \
                    for (Py_ssize_t j = 0; j < c; j++) {                                      \
                        Py_ssize_t i = at_flat_tap(g, &w, arg[at + j]);                       \
                        if (i >= 0)                                                           \
                            db[i * c + j] += gg[at + j];                                      \
                    }                                                                         \
                }                                                                             \
        }                                                                                     \
    }

CONV_KERNELS(float)
CONV_KERNELS(double)

/* im2col(x, cols, geom, row0) and col2im(cols, dx, geom, row0): `which` 0 or 1 */
static PyObject *cols_call(PyObject *const *args, Py_ssize_t nargs, int which)
{
    const char *name = which ? "col2im" : "im2col";
    Geom g;
    Py_buffer b[2];
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "%s takes (array, array, geom, row0)", name);
        return NULL;
    }
    Py_ssize_t row0 = PyLong_AsSsize_t(args[3]);
    if ((row0 == -1 && PyErr_Occurred()) || !parse_geom(args[2], &g, name))
        return NULL;
    int size = conv_buffers(args, 2, 2, -1, name, b);
    if (!size)
        return NULL;
    /* image = the x or dx side, cols = the other */
    Py_buffer *img = &b[which], *cols = &b[1 - which];
    Py_ssize_t width = g.taps * g.c, per = g.in_n * g.c;
    Py_ssize_t batch = per ? img->len / size / per : 0;
    Py_ssize_t rows = width ? cols->len / size / width : 0;
    if (row0 < 0 || (per && img->len / size != batch * per) || rows * width * size != cols->len
            || row0 + rows > batch * g.out_n) {
        release_n(b, 2);
        PyErr_Format(PyExc_ValueError, "%s: the arrays do not fit the geometry", name);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (which == 0 && size == 4)
        im2col_float(b[0].buf, b[1].buf, &g, row0, rows);
    else if (which == 0)
        im2col_double(b[0].buf, b[1].buf, &g, row0, rows);
    else if (size == 4)
        col2im_float(b[0].buf, b[1].buf, &g, row0, rows);
    else
        col2im_double(b[0].buf, b[1].buf, &g, row0, rows);
    Py_END_ALLOW_THREADS
    release_n(b, 2);
    Py_RETURN_NONE;
}

static PyObject *im2col(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return cols_call(args, nargs, 0);
}

static PyObject *col2im(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return cols_call(args, nargs, 1);
}

static PyObject *max_pool_kernel(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    Geom g;
    Py_buffer b[3];
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "max_pool takes (x, out, arg, geom)");
        return NULL;
    }
    if (!parse_geom(args[3], &g, "max_pool"))
        return NULL;
    int size = conv_buffers(args, 3, 6, 2, "max_pool", b);
    if (!size)
        return NULL;
    Py_ssize_t per = g.in_n * g.c, batch = per ? b[0].len / size / per : 0;
    if ((per && b[0].len / size != batch * per) || b[1].len / size != batch * g.out_n * g.c
            || b[2].len / 4 != batch * g.out_n * g.c) {
        release_n(b, 3);
        PyErr_SetString(PyExc_ValueError, "max_pool: the arrays do not fit the geometry");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (size == 4)
        max_pool_float(b[0].buf, b[1].buf, b[2].buf, &g, batch, -INFINITY);
    else
        max_pool_double(b[0].buf, b[1].buf, b[2].buf, &g, batch, -INFINITY);
    Py_END_ALLOW_THREADS
    release_n(b, 3);
    Py_RETURN_NONE;
}

static PyObject *max_pool_grad_kernel(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    Geom g;
    Py_buffer b[3];
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "max_pool_grad takes (arg, g, dx, geom)");
        return NULL;
    }
    if (!parse_geom(args[3], &g, "max_pool_grad"))
        return NULL;
    int size = conv_buffers(args, 3, 4, 0, "max_pool_grad", b);
    if (!size)
        return NULL;
    Py_ssize_t per = g.out_n * g.c, batch = per ? b[0].len / 4 / per : 0;
    Py_ssize_t reps = batch * per ? b[1].len / size / (batch * per) : 0;
    if ((per && b[0].len / 4 != batch * per) || b[1].len / size != reps * batch * per
            || b[2].len / size != reps * batch * g.in_n * g.c) {
        release_n(b, 3);
        PyErr_SetString(PyExc_ValueError, "max_pool_grad: the arrays do not fit the geometry");
        return NULL;
    }
    Py_ssize_t bad = 0;
    const int32_t *arg = b[0].buf;
    for (Py_ssize_t i = 0; i < b[0].len / 4; i++)
        bad |= arg[i] < 0 || arg[i] >= g.taps;
    if (bad) {
        release_n(b, 3);
        PyErr_SetString(PyExc_ValueError, "max_pool_grad: a tap index is out of range");
        return NULL;
    }
    Py_ssize_t *offset = PyMem_Malloc(g.taps * sizeof(Py_ssize_t));
    if (offset == NULL) {
        release_n(b, 3);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t t = 0; t < g.taps; t++) /* tap t's input position in an inside window */
        offset[t] = ((t / (g.k[1] * g.k[2])) * g.d[0] * g.in[1]
                     + (t / g.k[2]) % g.k[1] * g.d[1]) * g.in[2] + t % g.k[2] * g.d[2];
    Py_BEGIN_ALLOW_THREADS
    if (size == 4)
        max_pool_grad_float(b[0].buf, b[1].buf, b[2].buf, &g, batch, reps, offset);
    else
        max_pool_grad_double(b[0].buf, b[1].buf, b[2].buf, &g, batch, reps, offset);
    Py_END_ALLOW_THREADS
    PyMem_Free(offset);
    release_n(b, 3);
    Py_RETURN_NONE;
}

/* Winograd F(2x2, 3x3) for a 3x3 stride-1 2-D convolution (channels last): 16 matmuls of
 * transformed tiles in place of one of 9 taps (2.25 times fewer multiplications).
 * `wgeom` is a tuple of 8 ints: C, H, W (input), Ho, Wo (output), pad_top, pad_left, and the
 * tiles' first index tile0; tiles are (batch, Ho / 2 rounded up, Wo / 2 rounded up), tile t's
 * output at rows 2 * ti, 2 * ti + 1 and columns 2 * tj, 2 * tj + 1.
 *
 *   winograd_input(x, v, wgeom)    v[e, t, c] (16, tiles, C) = (B^T d B)[e] of the 4x4 input
 *                                  tile d of tile tile0 + t (0 in the padding)
 *   winograd_output(m, y, wgeom)   y at tile tile0 + t = A^T m[:, t] A (the 2x2 output, cut
 *                                  at the edges), m (16, tiles, Cout), y (B, Ho, Wo, Cout)
 */
typedef struct {
    Py_ssize_t c, h, w, ho, wo, top, left, tile0, th, tw;
} WGeom;

static int parse_wgeom(PyObject *t, WGeom *g, const char *name)
{
    Py_ssize_t v[8];
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 8) {
        PyErr_Format(PyExc_TypeError, "%s: wgeom must be a tuple of 8 ints", name);
        return 0;
    }
    for (int i = 0; i < 8; i++) {
        v[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, i));
        if (v[i] == -1 && PyErr_Occurred())
            return 0;
        if (v[i] < 0) {
            PyErr_Format(PyExc_ValueError, "%s: bad wgeom entry %d: %zd", name, i, v[i]);
            return 0;
        }
    }
    g->c = v[0], g->h = v[1], g->w = v[2], g->ho = v[3], g->wo = v[4];
    g->top = v[5], g->left = v[6], g->tile0 = v[7];
    g->th = (g->ho + 1) / 2, g->tw = (g->wo + 1) / 2;
    return 1;
}

#define WINOGRAD_KERNELS(T)                                                                   \
    static NOINLINE void sum2_##T(T *restrict o, const T *restrict p, const T *restrict q,    \
                                  Py_ssize_t c)                                               \
    {                                                                                         \
        for (Py_ssize_t j = 0; j < c; j++)                                                    \
            o[j] = p[j] + q[j];                                                               \
    }                                                                                         \
    static NOINLINE void dif2_##T(T *restrict o, const T *restrict p, const T *restrict q,    \
                                  Py_ssize_t c)                                               \
    {                                                                                         \
        for (Py_ssize_t j = 0; j < c; j++)                                                    \
            o[j] = p[j] - q[j];                                                               \
    }                                                                                         \
    static NOINLINE void sum3_##T(T *restrict o, const T *restrict p, const T *restrict q,    \
                                  const T *restrict r, Py_ssize_t c)                          \
    {                                                                                         \
        for (Py_ssize_t j = 0; j < c; j++)                                                    \
            o[j] = p[j] + q[j] + r[j];                                                        \
    }                                                                                         \
    static NOINLINE void dif3_##T(T *restrict o, const T *restrict p, const T *restrict q,    \
                                  const T *restrict r, Py_ssize_t c)                          \
    {                                                                                         \
        for (Py_ssize_t j = 0; j < c; j++)                                                    \
            o[j] = p[j] - q[j] - r[j];                                                        \
    }                                                                                         \
    /* B^T d B of one tile, a row of c channels at a time: d and tmp 16 rows of c (row-major  \
     * 4x4), v 16 rows `stride` apart */                                                      \
    static void wino_in_##T(const T *restrict d, T *restrict tmp, T *restrict v,              \
                            Py_ssize_t stride, Py_ssize_t c)                                  \
    {                                                                                         \
        for (int q = 0; q < 4; q++) { /* B^T d: over rows */                                  \
            dif2_##T(tmp + (0 + q) * c, d + (0 + q) * c, d + (8 + q) * c, c);                 \
            sum2_##T(tmp + (4 + q) * c, d + (4 + q) * c, d + (8 + q) * c, c);                 \
            dif2_##T(tmp + (8 + q) * c, d + (8 + q) * c, d + (4 + q) * c, c);                 \
            dif2_##T(tmp + (12 + q) * c, d + (4 + q) * c, d + (12 + q) * c, c);               \
        }                                                                                     \
        for (int r = 0; r < 4; r++) { /* (B^T d) B: over columns */                           \
            const T *row = tmp + 4 * r * c;                                                   \
            dif2_##T(v + (4 * r + 0) * stride, row, row + 2 * c, c);                          \
            sum2_##T(v + (4 * r + 1) * stride, row + c, row + 2 * c, c);                      \
            dif2_##T(v + (4 * r + 2) * stride, row + 2 * c, row + c, c);                      \
            dif2_##T(v + (4 * r + 3) * stride, row + c, row + 3 * c, c);                      \
        }                                                                                     \
    }                                                                                         \
    static void winograd_input_##T(const T *restrict x, T *restrict v, const WGeom *g,        \
                                   Py_ssize_t tiles, T *restrict tile)                        \
    {                                                                                         \
        Py_ssize_t c = g->c, per = g->th * g->tw;                                             \
        T *tmp = tile + 16 * c;                                                               \
        for (Py_ssize_t t = 0; t < tiles; t++) {                                              \
            Py_ssize_t at = g->tile0 + t, b = at / per, ti = at % per / g->tw,                \
                       tj = at % g->tw;                                                       \
            const T *xb = x + b * g->h * g->w * c;                                            \
            for (int r = 0; r < 4; r++) {                                                     \
                Py_ssize_t i = 2 * ti + r - g->top;                                           \
                for (int q = 0; q < 4; q++) {                                                 \
                    Py_ssize_t k = 2 * tj + q - g->left;                                      \
                    T *dst = tile + (4 * r + q) * c;                                          \
                    if (i < 0 || i >= g->h || k < 0 || k >= g->w)                             \
                        memset(dst, 0, c * sizeof(T));                                        \
                    else                                                                      \
                        memcpy(dst, xb + (i * g->w + k) * c, c * sizeof(T));                  \
                }                                                                             \
            }                                                                                 \
            wino_in_##T(tile, tmp, v + t * c, tiles * c, c);                                  \
        }                                                                                     \
    }                                                                                         \
    static void winograd_output_##T(const T *restrict m, T *restrict y, const WGeom *g,       \
                                    Py_ssize_t tiles, Py_ssize_t cout, T *restrict u)         \
    {                                                                                         \
        Py_ssize_t per = g->th * g->tw, s = tiles * cout;                                     \
        for (Py_ssize_t t = 0; t < tiles; t++) {                                              \
            Py_ssize_t at = g->tile0 + t, b = at / per, ti = at % per / g->tw,                \
                       tj = at % g->tw;                                                       \
            const T *mt = m + t * cout;                                                       \
            T *yb = y + ((b * g->ho + 2 * ti) * g->wo + 2 * tj) * cout;                       \
            int down = 2 * ti + 1 < g->ho, right = 2 * tj + 1 < g->wo;                        \
            for (int q = 0; q < 4; q++) { /* A^T m: u rows 0..3 and 4..7 */                   \
                sum3_##T(u + q * cout, mt + q * s, mt + (4 + q) * s, mt + (8 + q) * s, cout); \
                dif3_##T(u + (4 + q) * cout, mt + (4 + q) * s, mt + (8 + q) * s,              \
                         mt + (12 + q) * s, cout);                                            \
            }                                                                                 \
            for (int r = 0; r < 2; r++) { /* (A^T m) A */                                     \
                const T *row = u + 4 * r * cout;                                              \
                T *yr = yb + r * g->wo * cout;                                                \
                if (r == 1 && !down)                                                          \
                    break;                                                                    \
                sum3_##T(yr, row, row + cout, row + 2 * cout, cout);                          \
                if (right)                                                                    \
                    dif3_##T(yr + cout, row + cout, row + 2 * cout, row + 3 * cout, cout);    \
            }                                                                                 \
        }                                                                                     \
    }
WINOGRAD_KERNELS(float)
WINOGRAD_KERNELS(double)

/* the adjoint of winograd_output: m[:, t] = A dy_t A^T, dy_t the 2x2 output tile (0 past the
 * edges), from y (B, Ho, Wo, Cout) to m (16, tiles, Cout) */
#define WINOGRAD_ADJOINT(T)                                                                   \
    static NOINLINE void neg_##T(T *restrict o, const T *restrict p, Py_ssize_t c)            \
    {                                                                                         \
        for (Py_ssize_t j = 0; j < c; j++)                                                    \
            o[j] = -p[j];                                                                     \
    }                                                                                         \
    /* the 4 rows (r0, r0 + r1, r0 - r1, -r1) of A r for a pair of rows r0, r1 */             \
    static void wino_lift_##T(T *o0, T *o1, T *o2, T *o3, const T *r0, const T *r1,           \
                              Py_ssize_t c)                                                   \
    {                                                                                         \
        memcpy(o0, r0, c * sizeof(T));                                                        \
        sum2_##T(o1, r0, r1, c);                                                              \
        dif2_##T(o2, r0, r1, c);                                                              \
        neg_##T(o3, r1, c);                                                                   \
    }                                                                                         \
    static void winograd_grad_output_##T(const T *restrict y, T *restrict m, const WGeom *g,  \
                                         Py_ssize_t tiles, Py_ssize_t cout, T *restrict u)    \
    {                                                                                         \
        Py_ssize_t per = g->th * g->tw, s = tiles * cout;                                     \
        T *zero = u + 8 * cout; /* u: A dy, 4 rows of 2 columns of cout; then zeros */  \
        memset(zero, 0, cout * sizeof(T));                                                    \
        for (Py_ssize_t t = 0; t < tiles; t++) {                                              \
            Py_ssize_t at = g->tile0 + t, b = at / per, ti = at % per / g->tw,                \
                       tj = at % g->tw;                                                       \
            const T *yb = y + ((b * g->ho + 2 * ti) * g->wo + 2 * tj) * cout;                 \
            int down = 2 * ti + 1 < g->ho, right = 2 * tj + 1 < g->wo;                        \
            const T *y00 = yb, *y01 = right ? yb + cout : zero;                               \
            const T *y10 = down ? yb + g->wo * cout : zero;                                   \
            const T *y11 = down && right ? yb + (g->wo + 1) * cout : zero;                    \
            T *a = u; /* A dy: row r, column k at a + (2 r + k) cout */                        \
            wino_lift_##T(a, a + 2 * cout, a + 4 * cout, a + 6 * cout, y00, y10, cout);       \
            wino_lift_##T(a + cout, a + 3 * cout, a + 5 * cout, a + 7 * cout, y01, y11, cout);\
            T *mt = m + t * cout;                                                             \
            for (int r = 0; r < 4; r++)                                                       \
                wino_lift_##T(mt + (4 * r) * s, mt + (4 * r + 1) * s, mt + (4 * r + 2) * s,   \
                              mt + (4 * r + 3) * s, a + 2 * r * cout, a + (2 * r + 1) * cout, \
                              cout);                                                          \
        }                                                                                     \
    }
WINOGRAD_ADJOINT(float)
WINOGRAD_ADJOINT(double)


/* output: 0 winograd_input (x, v), 1 winograd_output (m, y), 2 winograd_grad_output (y, m) */
static PyObject *winograd_call(PyObject *const *args, Py_ssize_t nargs, int output)
{
    const char *name = output == 2 ? "winograd_grad_output" :
                       output ? "winograd_output" : "winograd_input";
    WGeom g;
    Py_buffer b[2];
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s takes (array, array, wgeom)", name);
        return NULL;
    }
    if (!parse_wgeom(args[2], &g, name))
        return NULL;
    int size = conv_buffers(args, 2, 2, -1, name, b);
    if (!size)
        return NULL;
    /* the image side: x (input) or y (output); the tile side: v or m (16, tiles, width) */
    int img_at = output == 1 ? 1 : 0;
    Py_buffer *img = &b[img_at], *tl = &b[1 - img_at];
    Py_ssize_t n_img = img->len / size;
    int shaped = tl->ndim == 3 && tl->shape[0] == 16;
    Py_ssize_t tiles = shaped ? tl->shape[1] : 0, width = shaped ? tl->shape[2] : 0;
    Py_ssize_t plane = output ? g.ho * g.wo : g.h * g.w;
    Py_ssize_t batch = plane && width ? n_img / (plane * width) : 0;
    if (!shaped || width == 0 || plane == 0 || n_img != batch * plane * width
            || (!output && width != g.c) || g.tile0 + tiles > batch * g.th * g.tw) {
        release_n(b, 2);
        PyErr_Format(PyExc_ValueError, "%s: the arrays do not fit the geometry (the tiles "
                     "(16, tiles, channels))", name);
        return NULL;
    }
    /* scratch: the input tile and its half transform (32 rows of C), or A^T m (8 rows) */
    void *tile = PyMem_Malloc((output == 2 ? 9 : output ? 8 : 32) * width * size);
    if (tile == NULL) {
        release_n(b, 2);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    if (output == 2 && size == 4)
        winograd_grad_output_float(b[0].buf, b[1].buf, &g, tiles, width, tile);
    else if (output == 2)
        winograd_grad_output_double(b[0].buf, b[1].buf, &g, tiles, width, tile);
    else if (output && size == 4)
        winograd_output_float(b[0].buf, b[1].buf, &g, tiles, width, tile);
    else if (output)
        winograd_output_double(b[0].buf, b[1].buf, &g, tiles, width, tile);
    else if (size == 4)
        winograd_input_float(b[0].buf, b[1].buf, &g, tiles, tile);
    else
        winograd_input_double(b[0].buf, b[1].buf, &g, tiles, tile);
    Py_END_ALLOW_THREADS
    PyMem_Free(tile);
    release_n(b, 2);
    Py_RETURN_NONE;
}

static PyObject *winograd_input(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return winograd_call(args, nargs, 0);
}

static PyObject *winograd_output(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return winograd_call(args, nargs, 1);
}
static PyObject *winograd_grad_output(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return winograd_call(args, nargs, 2);
}
/* ---- end of the convolution and pooling kernels ---- */

/* ---- sparse cross-entropy (tapegpu/ops/kernels.py) ------------------------------------
 * numpy's arithmetic for the steps between numpy's own exp, sum and log (the caller runs those,
 * so the results keep numpy's bits), one pass each instead of a numpy call per step:
 *   xent_shift(logits, labels, z, ml)     z = logits - the row's max (numpy's maximum: NaN
 *                                         wins), ml[r] = (max, logits[r, labels[r]]); False,
 *                                         and nothing written, when a label is outside [0, n)
 *   xent_finish(z, s, ls, ml, loss)       loss[r] = (ls[r] + max) - picked, z[r] /= s[r]
 *   xent_grad(probs, labels, g, out)      out[r] = (probs[r] - onehot(labels[r])) * g[r]
 * logits, z, probs, out: (rows, n) C-contiguous float32 or float64; labels: rows int32 or
 * int64; s, ls, loss, g: rows floats; ml: rows x 2 floats. */
#define LABEL(lab, lsize, r) ((lsize) == 4 ? (long long)((const int32_t *)(lab))[r] \
                                           : (long long)((const int64_t *)(lab))[r])

#define XENT(T)                                                                              \
    static int xent_shift_##T(const T *x, const void *lab, int lsize, T *z, T *ml,          \
                              Py_ssize_t rows, Py_ssize_t n)                                 \
    {                                                                                        \
        for (Py_ssize_t r = 0; r < rows; r++) {                                              \
            long long l = LABEL(lab, lsize, r);                                              \
            if (l < 0 || l >= n)                                                             \
                return 0;                                                                    \
        }                                                                                    \
        for (Py_ssize_t r = 0; r < rows; r++, x += n, z += n) {                              \
            ml[2 * r] = shift_row_##T(x, z, n);                                              \
            ml[2 * r + 1] = x[LABEL(lab, lsize, r)];                                         \
        }                                                                                    \
        return 1;                                                                            \
    }                                                                                        \
    static void xent_finish_##T(T *z, const T *s, const T *ls, const T *ml, T *loss,        \
                                Py_ssize_t rows, Py_ssize_t n)                               \
    {                                                                                        \
        for (Py_ssize_t r = 0; r < rows; r++, z += n) {                                      \
            loss[r] = (ls[r] + ml[2 * r]) - ml[2 * r + 1];                                   \
            const T d = s[r];                                                                \
            for (Py_ssize_t j = 0; j < n; j++)                                               \
                z[j] = z[j] / d;                                                             \
        }                                                                                    \
    }                                                                                        \
    static void xent_grad_##T(const T *p, const void *lab, int lsize, const T *g, T *out,   \
                              Py_ssize_t rows, Py_ssize_t n)                                 \
    {                                                                                        \
        for (Py_ssize_t r = 0; r < rows; r++, p += n, out += n) {                            \
            const long long l = LABEL(lab, lsize, r);                                        \
            const T gr = g[r];                                                               \
            for (Py_ssize_t j = 0; j < n; j++)                                               \
                out[j] = (j == l ? p[j] - (T)1 : p[j]) * gr;                                 \
        }                                                                                    \
    }                                                                                        \
    static void xent_grad_vjp_##T(const T *c, const void *lab, int lsize, const T *g,       \
                                  const T *p, T *dz, T *dg, T *row, Py_ssize_t rows,         \
                                  Py_ssize_t n)                                              \
    {                                                                                        \
        for (Py_ssize_t r = 0; r < rows; r++, c += n, p += n, dz += n) {                     \
            const long long l = LABEL(lab, lsize, r);                                        \
            const T gr = g[r];                                                               \
            for (Py_ssize_t j = 0; j < n; j++)                                               \
                row[j] = (c[j] * gr) * p[j];                                                 \
            const T s = (T)0 + pairwise_##T(row, n);                                         \
            for (Py_ssize_t j = 0; j < n; j++)                                               \
                dz[j] = p[j] * (c[j] * gr - s);                                              \
            for (Py_ssize_t j = 0; j < n; j++)                                               \
                row[j] = (j == l ? p[j] - (T)1 : p[j]) * c[j];                               \
            dg[r] = (T)0 + pairwise_##T(row, n);                                             \
        }                                                                                    \
    }
XENT(float)
XENT(double)

/* the buffers of a cross-entropy kernel (`kinds` and `writable` as get_many's) and the rows
 * and n of the first, (rows, n); `counts` gives each argument's element count: 'N' rows * n,
 * 'R' rows, '2' 2 * rows. The float item size is returned, 0 with an exception set. */
static int xent_args(PyObject *const *args, Py_ssize_t nargs, const char *name,
                     const char *kinds, const char *counts, int writable, Buffers *m,
                     Py_ssize_t *rows, Py_ssize_t *n)
{
    int size = get_many(args, nargs, name, kinds, writable, m);
    if (size == 0)
        return 0;
    Py_buffer *x = &m->b[0];
    *n = x->ndim >= 1 ? x->shape[x->ndim - 1] : 0;
    *rows = *n ? x->len / size / *n : 0;
    if (*rows == 0) {
        release(m);
        PyErr_Format(PyExc_ValueError, "%s: the logits must be (rows, n), none empty", name);
        return 0;
    }
    for (int i = 1; counts[i]; i++) {
        Py_ssize_t want = counts[i] == 'N' ? *rows * *n : counts[i] == '2' ? 2 * *rows : *rows;
        if (m->b[i].len != want * m->b[i].itemsize) {
            PyErr_Format(PyExc_ValueError, "%s: argument %d has %zd elements, not %zd", name, i,
                         m->b[i].len / m->b[i].itemsize, want);
            release(m);
            return 0;
        }
    }
    return size;
}

static PyObject *xent_shift(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    Buffers m;
    Py_ssize_t rows, n;
    int size = xent_args(args, nargs, "xent_shift", "fiff", "NRN2", 0xC, &m, &rows, &n), ok;
    if (size == 0)
        return NULL;
    int lsize = (int)m.b[1].itemsize;
    if (size == 4)
        ok = xent_shift_float(m.b[0].buf, m.b[1].buf, lsize, m.b[2].buf, m.b[3].buf, rows, n);
    else
        ok = xent_shift_double(m.b[0].buf, m.b[1].buf, lsize, m.b[2].buf, m.b[3].buf, rows, n);
    release(&m);
    return PyBool_FromLong(ok);
}

static PyObject *xent_finish(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    Buffers m;
    Py_ssize_t rows, n;
    int size = xent_args(args, nargs, "xent_finish", "fffff", "NRR2R", 0x11, &m, &rows, &n);
    if (size == 0)
        return NULL;
    if (size == 4)
        xent_finish_float(m.b[0].buf, m.b[1].buf, m.b[2].buf, m.b[3].buf, m.b[4].buf, rows, n);
    else
        xent_finish_double(m.b[0].buf, m.b[1].buf, m.b[2].buf, m.b[3].buf, m.b[4].buf, rows, n);
    release(&m);
    Py_RETURN_NONE;
}

/* whether every label (argument 1) is in [0, n); else ValueError, the buffers released */
static int labels_in_range(Buffers *m, Py_ssize_t rows, Py_ssize_t n, const char *name)
{
    int lsize = (int)m->b[1].itemsize;
    for (Py_ssize_t r = 0; r < rows; r++) {
        long long l = LABEL(m->b[1].buf, lsize, r);
        if (l < 0 || l >= n) {
            release(m);
            PyErr_Format(PyExc_ValueError, "%s: label %lld is outside [0, %zd)", name, l, n);
            return 0;
        }
    }
    return 1;
}

static PyObject *xent_grad(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    Buffers m;
    Py_ssize_t rows, n;
    int size = xent_args(args, nargs, "xent_grad", "fiff", "NRRN", 0x8, &m, &rows, &n);
    if (size == 0 || !labels_in_range(&m, rows, n, "xent_grad"))
        return NULL;
    int lsize = (int)m.b[1].itemsize;
    if (size == 4)
        xent_grad_float(m.b[0].buf, m.b[1].buf, lsize, m.b[2].buf, m.b[3].buf, rows, n);
    else
        xent_grad_double(m.b[0].buf, m.b[1].buf, lsize, m.b[2].buf, m.b[3].buf, rows, n);
    release(&m);
    Py_RETURN_NONE;
}

/* xent_grad_vjp(c, labels, g, probs, dz, dg): the VJP of g * (probs - onehot) for its
 * cotangent c, per row: dz = probs * (c g - <c g, probs>) (the normalised exponential's
 * VJP of c g) and dg = <c, probs - onehot>, each sum 0 + numpy's pairwise sum of the row:
 * the rules' operations (nn.py), so their bits */
static PyObject *xent_grad_vjp(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    Buffers m;
    Py_ssize_t rows, n;
    int size = xent_args(args, nargs, "xent_grad_vjp", "fiffff", "NRRNNR", 0x30, &m, &rows,
                         &n);
    if (size == 0 || !labels_in_range(&m, rows, n, "xent_grad_vjp"))
        return NULL;
    void *row = PyMem_Malloc((size_t)n * size);
    if (row == NULL) {
        release(&m);
        return PyErr_NoMemory();
    }
    int lsize = (int)m.b[1].itemsize;
    if (size == 4)
        xent_grad_vjp_float(m.b[0].buf, m.b[1].buf, lsize, m.b[2].buf, m.b[3].buf, m.b[4].buf,
                            m.b[5].buf, row, rows, n);
    else
        xent_grad_vjp_double(m.b[0].buf, m.b[1].buf, lsize, m.b[2].buf, m.b[3].buf, m.b[4].buf,
                             m.b[5].buf, row, rows, n);
    PyMem_Free(row);
    release(&m);
    Py_RETURN_NONE;
}

/* ---- tanh32(x, out): float32 tanh, correctly rounded ------------------------------------
 * numpy's float32 tanh is off by one unit in the last place on about a third of its inputs;
 * this one is the float nearest the exact value. tanh(a) = -u / (2 + u), u = expm1(-2a)
 * = 2^k e^r - 1 (a = |x|; k, r from -2a = k ln2 + r, |r| <= ln2/2; e^r - 1 by its Taylor
 * polynomial to r^10), in double: relative error under 2^-40. Where that double lies within
 * 2^15 double units (2^-37 relatively) of a midpoint between two floats, so that its rounding
 * could differ from the exact value's, the element is computed again by the C library's long
 * double tanh (one in 10^4 inputs). |x| < 2^-12 gives x (tanh(x) = x (1 - x^2/3 ...) rounds to
 * x there), NaN stays NaN, +-inf gives +-1. An AVX2+FMA loop where the processor has them (4
 * lanes; a block of 64 elements with a lane near a midpoint is done again by the plain loop),
 * else plain C: both round correctly, so they agree, and with the float32 reference on numpy
 * (ops/kernels.py `tanh_float32`). tests/backends/exhaustive_tanh32.py checks every float32. */
#define TANH_SHIFT 6755399441055744.0 /* 1.5 * 2^52: adding it rounds to an integer */
#define TANH_MID ((int64_t)1 << 28)   /* a float midpoint: these low 29 bits of a double */
#define TANH_NEAR ((int64_t)1 << 15)  /* within this many double units of it: recompute */
static const double tanh_poly[9] = {
    2.7557319223985893e-07, 2.7557319223985888e-06, 2.4801587301587302e-05,
    1.9841269841269841e-04, 1.3888888888888889e-03, 8.3333333333333332e-03,
    4.1666666666666664e-02, 1.6666666666666666e-01, 0.5};

static float tanh_exact(float x) /* the slow path: rounded once from long double */
{
    return (float)tanhl((long double)x);
}

static float tanh_one(float x) /* the plain C element */
{
    double a = fabs((double)x);
    if (a != a)
        return x + x; /* (quiet) */
    if (a < 0x1p-12)
        return x;
    a = a > 20.0 ? 20.0 : a;
    double y = -2.0 * a;
    double z = y * 1.4426950408889634 + TANH_SHIFT;
    double kd = z - TANH_SHIFT;
    double r = y - kd * 6.93147180369123816490e-01;
    r = r - kd * 1.90821492927058770002e-10;
    double p = tanh_poly[0];
    for (int i = 1; i < 9; i++)
        p = p * r + tanh_poly[i];
    p = p * (r * r) + r;
    int64_t zb, sb;
    memcpy(&zb, &z, 8);
    sb = (int64_t)((uint64_t)zb << 52) + ((int64_t)1023 << 52);
    double s, t;
    memcpy(&s, &sb, 8);
    double u = s * p + (s - 1.0);
    t = -u / (2.0 + u);
    int64_t tb;
    memcpy(&tb, &t, 8);
    int64_t d = (tb & ((TANH_MID << 1) - 1)) - TANH_MID;
    float f = (d > -TANH_NEAR && d < TANH_NEAR) ? tanh_exact((float)a) : (float)t;
    return copysignf(f, x);
}

static void tanh32_plain(const float *x, float *out, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        out[i] = tanh_one(x[i]);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(TAPEGPU_PLAIN)
#include <immintrin.h>
#define TANH_AVX2 1
__attribute__((target("avx2,fma"))) static void tanh32_avx2(const float *x, float *out,
                                                              Py_ssize_t n)
{
    const __m256d shift = _mm256_set1_pd(TANH_SHIFT), cap = _mm256_set1_pd(20.0),
                  tiny = _mm256_set1_pd(0x1p-12), one = _mm256_set1_pd(1.0),
                  minus_two = _mm256_set1_pd(-2.0), abs_mask = _mm256_castsi256_pd(
                      _mm256_set1_epi64x(0x7fffffffffffffffLL));
    const __m256i bias = _mm256_set1_epi64x((int64_t)1023 << 52),
                  low = _mm256_set1_epi64x((TANH_MID << 1) - 1),
                  lo = _mm256_set1_epi64x(TANH_MID - TANH_NEAR),
                  hi = _mm256_set1_epi64x(2 * TANH_NEAR);
    const __m128 sign = _mm_set1_ps(-0.0f);
    Py_ssize_t i = 0, block = 0;
    const __m256d none = _mm256_castsi256_pd(low);
    __m256d least = none; /* the block's lanes' distances below */
#define TANH_NEAR_ANY(v) \
    _mm256_movemask_pd(_mm256_cmp_pd(v, _mm256_castsi256_pd(hi), _CMP_LT_OQ))
    for (; i + 4 <= n; i += 4) {
        __m128 xf = _mm_loadu_ps(x + i);
        __m256d xa = _mm256_and_pd(_mm256_cvtps_pd(xf), abs_mask);
        __m256d a = _mm256_min_pd(cap, xa); /* (NaN stays NaN: min returns its 2nd operand) */
        __m256d y = _mm256_mul_pd(a, minus_two);
        __m256d z = _mm256_fmadd_pd(y, _mm256_set1_pd(1.4426950408889634), shift);
        __m256d kd = _mm256_sub_pd(z, shift);
        /* (one rounding of kd ln2 - y: ln2's own error, under 2^-53 ln2 per unit of k, is
         * below 2^-47 of the result) */
        __m256d r = _mm256_fmadd_pd(kd, _mm256_set1_pd(-0.69314718055994530942), y);
        __m256d p = _mm256_set1_pd(tanh_poly[0]);
        for (int k = 1; k < 9; k++)
            p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(tanh_poly[k]));
        p = _mm256_fmadd_pd(p, _mm256_mul_pd(r, r), r);
        __m256d s = _mm256_castsi256_pd(
            _mm256_add_epi64(_mm256_slli_epi64(_mm256_castpd_si256(z), 52), bias));
        __m256d u = _mm256_fmadd_pd(s, p, _mm256_sub_pd(s, one));
        __m256d t = _mm256_div_pd(u, _mm256_sub_pd(minus_two, u)); /* -u / (2 + u) */
        __m256d small = _mm256_cmp_pd(xa, tiny, _CMP_NGE_UQ); /* tiny or NaN: x itself */
        t = _mm256_blendv_pd(t, xa, small);
        /* the low 29 bits less (midpoint - NEAR), modulo 2^29: under 2 NEAR near a midpoint;
         * the block's least, compared after it (as doubles: small integers' bits order as
         * the denormals they are) */
        __m256i d = _mm256_and_si256(_mm256_sub_epi64(_mm256_castpd_si256(t), lo), low);
        __m128 f = _mm256_cvtpd_ps(t);
        f = _mm_or_ps(f, _mm_and_ps(xf, sign)); /* |tanh| carries x's sign */
        _mm_storeu_ps(out + i, f);
        least = _mm256_min_pd(least, _mm256_castsi256_pd(d));
        /* every 64 elements: a block with such a lane again by the plain loop (no call in
         * the loop above, so its constants stay in registers) */
        if (((i + 4) & 63) == 0) {
            if (TANH_NEAR_ANY(least))
                tanh32_plain(x + block, out + block, i + 4 - block);
            least = none;
            block = i + 4;
        }
    }
    if (TANH_NEAR_ANY(least))
        tanh32_plain(x + block, out + block, i - block);
    tanh32_plain(x + i, out + i, n - i);
}
#endif

static PyObject *tanh32(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    Buffers bs;
    if (get_many(args, nargs, "tanh32", "ff", 0x2, &bs) == 0)
        return NULL;
    Py_ssize_t n = bs.b[0].len / 4;
    if (bs.b[0].itemsize != 4 || bs.b[1].len != bs.b[0].len) {
        release(&bs);
        PyErr_SetString(PyExc_TypeError, "tanh32(x, out): float32 arrays of one size");
        return NULL;
    }
    const float *x = bs.b[0].buf;
    float *out = bs.b[1].buf;
    Py_BEGIN_ALLOW_THREADS
#ifdef TANH_AVX2
    static int avx2 = -1;
    if (avx2 < 0)
        avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (avx2)
        tanh32_avx2(x, out, n);
    else
#endif
        tanh32_plain(x, out, n);
    Py_END_ALLOW_THREADS
    release(&bs);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"tanh32", (PyCFunction)(void (*)(void))tanh32, METH_FASTCALL,
     "tanh32(x, out): out = tanh(x), float32, correctly rounded (out not x)."},
    {"bias_act", (PyCFunction)(void (*)(void))bias_act, METH_FASTCALL,
     "bias_act(k, x, b, out): out = f(x + b) over rows of len(b), f = ACTIVATIONS[k]."},
    {"act_backward", (PyCFunction)(void (*)(void))act_backward, METH_FASTCALL,
     "act_backward(k, y, g, out): f's backward from its saved y, f = (ACTIVATIONS + "
     "BACKWARDS)[k]; y repeats over g's batch axes."},
    {"outer", (PyCFunction)(void (*)(void))outer, METH_FASTCALL,
     "outer(x, g, out): out[r, i, j] = x[r, i] * g[r, j], out of shape (..., m, n)."},
    {"colsum", (PyCFunction)(void (*)(void))colsum, METH_FASTCALL,
     "colsum(x, out): out = the sum of x's rows, x (rows, n), in row order from 0."},
    {"shift", (PyCFunction)(void (*)(void))shift, METH_FASTCALL,
     "shift(x, z): z = x - the max of each row of x (rows, n)."},
    {"rowsum", (PyCFunction)(void (*)(void))rowsum, METH_FASTCALL,
     "rowsum(x, out): out = each row's sum, x (rows, n), numpy's pairwise order."},
    {"call_fused", (PyCFunction)(void (*)(void))call_fused, METH_FASTCALL,
     "call_fused(address, n, n_out, counts, itemsizes, *arrays): runs a fused kernel."},

    /* sparse cross-entropy (tapegpu/ops/kernels.py) */
    {"xent_shift", (PyCFunction)(void (*)(void))xent_shift, METH_FASTCALL,
     "xent_shift(logits, labels, z, ml): z = logits - row max, ml = (max, picked); False on a "
     "label out of range."},
    {"xent_finish", (PyCFunction)(void (*)(void))xent_finish, METH_FASTCALL,
     "xent_finish(z, s, ls, ml, loss): loss = (ls + max) - picked, z /= s per row."},
    {"xent_grad", (PyCFunction)(void (*)(void))xent_grad, METH_FASTCALL,
     "xent_grad(probs, labels, g, out): out = (probs - onehot(labels)) * g per row."},
    {"xent_grad_vjp", (PyCFunction)(void (*)(void))xent_grad_vjp, METH_FASTCALL,
     "xent_grad_vjp(c, labels, g, probs, dz, dg): the VJP of xent_grad's output for c."},

    /* convolution and pooling (tapegpu/ops/conv.py) */
    {"im2col", (PyCFunction)(void (*)(void))im2col, METH_FASTCALL,
     "im2col(x, cols, geom, row0): rows of window values (tap, channel), 0 in the padding."},
    {"col2im", (PyCFunction)(void (*)(void))col2im, METH_FASTCALL,
     "col2im(cols, dx, geom, row0): dx += the rows' values at their input positions."},
    {"max_pool", (PyCFunction)(void (*)(void))max_pool_kernel, METH_FASTCALL,
     "max_pool(x, out, arg, geom): each window's max and the tap of its first max."},
    {"max_pool_grad", (PyCFunction)(void (*)(void))max_pool_grad_kernel, METH_FASTCALL,
     "max_pool_grad(arg, g, dx, geom): dx += g at each window's max."},
    {"winograd_input", (PyCFunction)(void (*)(void))winograd_input, METH_FASTCALL,
     "winograd_input(x, v, wgeom): the F(2x2, 3x3) transforms of input tiles."},
    {"winograd_output", (PyCFunction)(void (*)(void))winograd_output, METH_FASTCALL,
     "winograd_output(m, y, wgeom): the 2x2 outputs of transformed tiles."},
    {"winograd_grad_output", (PyCFunction)(void (*)(void))winograd_grad_output, METH_FASTCALL,
     "winograd_grad_output(y, m, wgeom): the adjoint of winograd_output."},
    {NULL}
};

static struct PyModuleDef cpu_module = {
    PyModuleDef_HEAD_INIT, "tapegpu._cpu",
    "One-pass CPU kernels for the numpy backend (see tapegpu/ops/kernels.py).", -1, methods,
};

/* the names of activations[from:to] as a tuple, added to the module as `attr` */
static int add_names(PyObject *m, const char *attr, Py_ssize_t from, Py_ssize_t to)
{
    PyObject *names = PyTuple_New(to - from);
    for (Py_ssize_t k = from; names != NULL && k < to; k++) {
        PyObject *name = PyUnicode_FromString(activations[k].name);
        if (name == NULL)
            Py_CLEAR(names);
        else
            PyTuple_SET_ITEM(names, k - from, name);
    }
    if (names == NULL || PyModule_AddObject(m, attr, names) < 0) {
        Py_XDECREF(names);
        return -1;
    }
    return 0;
}

/* the module, with ACTIVATIONS and BACKWARDS: the names of the activations and of the
 * backwards, in their index order */
PyMODINIT_FUNC PyInit__cpu(void)
{
    PyObject *m = PyModule_Create(&cpu_module);
    if (m == NULL)
        return NULL;
    if (add_names(m, "ACTIVATIONS", 0, N_ACTIVATIONS) < 0 ||
        add_names(m, "BACKWARDS", N_ACTIVATIONS, N_KERNELS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
