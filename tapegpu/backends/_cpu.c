/* tapegpu._cpu: two elementwise kernels for the numpy backend, each one pass where numpy needs
 * several, for the ops that every ReLU layer runs (dispatch.py installs them), and the caller
 * of the kernels that tg.function's fusion compiles (call_fused, below).
 *
 *   bias_relu(x, b, out)        out = max(x + b, 0) over rows of len(b), with numpy's
 *                               `maximum` semantics: NaN propagates, -0.0 becomes +0.0
 *                               (numpy: an add, then a maximum)
 *   relu_backward(y, g, out)    out = g where y > 0, else +0.0, bit for bit (inf and NaN of g
 *                               kept where y > 0); y repeats over g's leading batch axes
 *                               (numpy: a comparison, a cast to a mask, a bitwise and)
 *   outer(x, g, out)            out[r, i, j] = x[r, i] * g[r, j] + 0.0: one outer product per
 *                               row r, out of shape (..., m, n), bit for bit numpy's einsum
 *                               (which adds the products to a zeroed output: -0.0 gives +0.0);
 *                               numpy pays per output row, this runs at memory speed
 *
 * The arrays are C-contiguous float32 or float64 buffers of one dtype, `out` writeable; the
 * Python side (dispatch.py) checks that and falls back to numpy otherwise. The results equal
 * numpy's bit for bit (tests/test_compiled_core.py). The GIL is released while they run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_buffer b[3];
    int n;
} Buffers;

static void release(Buffers *bs)
{
    for (int i = 0; i < bs->n; i++)
        PyBuffer_Release(&bs->b[i]);
    bs->n = 0;
}

/* the three buffers, C-contiguous, of one float format; the last writeable. The item size
 * (4 or 8) is returned, 0 with an exception set on bad arguments. */
static int get_buffers(PyObject *const *args, Py_ssize_t nargs, const char *name, Buffers *bs)
{
    bs->n = 0;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s takes 3 arrays", name);
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (i == 2 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(args[i], &bs->b[i], flags) < 0) {
            release(bs);
            return 0;
        }
        bs->n++;
    }
    const char *f = bs->b[0].format;
    int size = bs->b[0].itemsize;
    int ok = (size == 4 && strcmp(f, "f") == 0) || (size == 8 && strcmp(f, "d") == 0);
    for (int i = 1; i < 3; i++)
        ok = ok && bs->b[i].itemsize == size && strcmp(bs->b[i].format, f) == 0;
    if (!ok) {
        release(bs);
        PyErr_Format(PyExc_TypeError, "%s: the arrays must all be float32 or all float64", name);
        return 0;
    }
    return size;
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

/* max(x + b, 0) as numpy's maximum: NaN propagates, -0.0 and +0.0 give +0.0 */
#define BIAS_RELU(T)                                                                  \
    static void bias_relu_##T(const void *xv, const void *bv, void *ov, Py_ssize_t n, \
                              Py_ssize_t k)                                          \
    {                                                                                \
        const T *x = xv, *b = bv;                                                    \
        T *out = ov;                                                                 \
        for (Py_ssize_t i = 0; i < n; i += k)                                        \
            for (Py_ssize_t j = 0; j < k; j++) {                                     \
                T v = x[i + j] + b[j];                                               \
                out[i + j] = (v > 0 || v != v) ? v : (T)0;                           \
            }                                                                        \
    }
BIAS_RELU(float)
BIAS_RELU(double)

/* the bits of g where y > 0, else 0: a mask of all ones or all zeros, no branch */
#define RELU_BACKWARD(T, I)                                                          \
    static void relu_backward_##T(const void *yv, const void *gv, void *ov,          \
                                  Py_ssize_t n, Py_ssize_t m)                        \
    {                                                                                \
        const T *y = yv;                                                             \
        const I *g = gv;                                                             \
        I *out = ov;                                                                 \
        for (Py_ssize_t i = 0; i < n; i += m)                                        \
            for (Py_ssize_t j = 0; j < m; j++)                                       \
                out[i + j] = g[i + j] & -(I)(y[j] > 0);                              \
    }
RELU_BACKWARD(float, int32_t)
RELU_BACKWARD(double, int64_t)

static PyObject *bias_relu(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return run(args, nargs, "bias_relu", 0, 1, bias_relu_float, bias_relu_double,
               "x must be rows of len(b), out like x");
}

static PyObject *relu_backward(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return run(args, nargs, "relu_backward", 1, 0, relu_backward_float, relu_backward_double,
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

/* call_fused(address, n, itemsize, n_out, counts, *arrays): runs a kernel that tg.function's
 * fusion compiled, `void kernel(void **arrays, long long n)`, on the arrays' buffers (inputs,
 * then n_out outputs). `counts` is a tuple with each array's element count. Every buffer must
 * be C-contiguous with exactly that many elements of `itemsize` bytes, outputs writeable; else
 * ValueError and nothing runs. The GIL is released only for large n (a tiny call costs less
 * than the switch).
 */
#define MAX_FUSED_ARRAYS 64
typedef void (*fused_kernel)(void **, long long);

static PyObject *call_fused(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 5 || nargs - 5 > MAX_FUSED_ARRAYS || !PyTuple_Check(args[4])
            || PyTuple_GET_SIZE(args[4]) != nargs - 5) {
        PyErr_SetString(PyExc_TypeError,
                        "call_fused(address, n, itemsize, n_out, counts, *arrays)");
        return NULL;
    }
    void *address = PyLong_AsVoidPtr(args[0]);
    long long n = PyLong_AsLongLong(args[1]);
    long itemsize = PyLong_AsLong(args[2]);
    long n_out = PyLong_AsLong(args[3]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t count = nargs - 5;
    Py_buffer b[MAX_FUSED_ARRAYS];
    void *ptrs[MAX_FUSED_ARRAYS];
    Py_ssize_t got = 0;
    for (; got < count; got++) {
        int out = got >= count - n_out;
        Py_ssize_t want = PyLong_AsSsize_t(PyTuple_GET_ITEM(args[4], got)) * itemsize;
        if (PyErr_Occurred())
            break;
        if (PyObject_GetBuffer(args[5 + got], &b[got],
                               PyBUF_C_CONTIGUOUS | (out ? PyBUF_WRITABLE : 0)) < 0)
            break;
        if (b[got].itemsize != itemsize || b[got].len != want) {
            PyErr_Format(PyExc_ValueError, "call_fused: array %zd has %zd bytes of %zd-byte "
                         "items, the kernel needs %zd bytes of %ld-byte items", got,
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

/* ---- tg.function replay kernels (graph.py's Plan) -------------------------------------------
 *
 *   relu_backward_sum(y, g, out, sums)   out = g where y > 0, else +0.0 (relu_backward's bits),
 *                                        and sums[j] = the sum of out's column j, rows added in
 *                                        order from +0.0 (numpy's sum(axis=0) on C-contiguous
 *                                        rows, bit for bit); y, g, out C-contiguous of one
 *                                        shape, sums as long as their rows; float32 or float64.
 *                                        One pass where the replay made two (the mask, then the
 *                                        sum reading the result again): a Dense layer's ReLU
 *                                        backward and its bias gradient. out may be g.
 */
#define RELU_BACKWARD_SUM(T, I)                                                         \
    static void relu_backward_sum_##T(const T *y, const I *g, I *out, T *restrict sums, \
                                      Py_ssize_t rows, Py_ssize_t cols)                 \
    {                                                                                   \
        for (Py_ssize_t j = 0; j < cols; j++)                                           \
            sums[j] = (T)0;                                                             \
        for (Py_ssize_t i = 0; i < rows; i++) {                                         \
            const T *yr = y + i * cols;                                                 \
            const I *gr = g + i * cols;                                                 \
            I *o = out + i * cols;                                                      \
            for (Py_ssize_t j = 0; j < cols; j++) {                                     \
                I bits = gr[j] & -(I)(yr[j] > 0);                                       \
                T v;                                                                    \
                memcpy(&v, &bits, sizeof v);                                            \
                o[j] = bits;                                                            \
                sums[j] += v;                                                           \
            }                                                                           \
        }                                                                               \
    }
RELU_BACKWARD_SUM(float, int32_t)
RELU_BACKWARD_SUM(double, int64_t)

static PyObject *relu_backward_sum(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "relu_backward_sum takes 4 arrays (y, g, out, sums)");
        return NULL;
    }
    Buffers bs;
    int size = get_buffers(args, 3, "relu_backward_sum", &bs);
    if (size == 0)
        return NULL;
    Py_buffer s;
    if (PyObject_GetBuffer(args[3], &s, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        release(&bs);
        return NULL;
    }
    Py_ssize_t n = bs.b[1].len / size, cols = s.len / size;
    int ok = s.itemsize == size && strcmp(s.format, bs.b[1].format) == 0 && cols > 0 &&
             n % cols == 0 && bs.b[0].len == bs.b[1].len && bs.b[2].len == bs.b[1].len;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        if (size == 4)
            relu_backward_sum_float(bs.b[0].buf, bs.b[1].buf, bs.b[2].buf, s.buf, n / cols, cols);
        else
            relu_backward_sum_double(bs.b[0].buf, bs.b[1].buf, bs.b[2].buf, s.buf, n / cols,
                                     cols);
        Py_END_ALLOW_THREADS
    } else {
        PyErr_SetString(PyExc_ValueError, "relu_backward_sum: y, g and out must have one shape "
                        "and dtype, sums the length of their rows and that dtype");
    }
    PyBuffer_Release(&s);
    release(&bs);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}

/* ---- end of the tg.function replay kernels ------------------------------------------------ */

static PyMethodDef methods[] = {
    {"bias_relu", (PyCFunction)(void (*)(void))bias_relu, METH_FASTCALL,
     "bias_relu(x, b, out): out = max(x + b, 0) over rows of len(b)."},
    {"relu_backward", (PyCFunction)(void (*)(void))relu_backward, METH_FASTCALL,
     "relu_backward(y, g, out): out = g where y > 0 else 0; y repeats over g's batch axes."},
    {"outer", (PyCFunction)(void (*)(void))outer, METH_FASTCALL,
     "outer(x, g, out): out[r, i, j] = x[r, i] * g[r, j], out of shape (..., m, n)."},
    {"call_fused", (PyCFunction)(void (*)(void))call_fused, METH_FASTCALL,
     "call_fused(address, n, itemsize, n_out, counts, *arrays): runs a fused kernel."},
    {"relu_backward_sum", (PyCFunction)(void (*)(void))relu_backward_sum, METH_FASTCALL,
     "relu_backward_sum(y, g, out, sums): relu_backward, and the column sums of out."},
    {NULL}
};

static struct PyModuleDef cpu_module = {
    PyModuleDef_HEAD_INIT, "tapegpu._cpu",
    "One-pass elementwise kernels for the numpy backend (see dispatch.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__cpu(void)
{
    return PyModule_Create(&cpu_module);
}
