/* Recording an op's output, in C: the one compiled piece of tapegpu's bookkeeping. Each function
 * has a Python twin, its definition and test oracle (tests/autodiff/test_record.py compares both
 * on every spec'd op); the twins run when this is not built or TAPEGPU_PURE_PYTHON=1.
 *   wrap(op, inputs, out, dev, params) = registry.wrap: the output array as a new Tensor, offered
 *     to this thread's recorders if the op has a VJP and the output is floating (a tape's record
 *     runs inline; an accumulator's `record` is called);
 *   record(recorder, op, inputs, out, params) = recording.Recorder.record: unless an input's
 *     `_uid` is in `_tracked`, nothing; else an Entry (uids, or None where untracked; the inputs'
 *     `_data.shape`; the declared saves, common plans inline, else `op.saved_values`) appended
 *     to `_entries`, the output's uid tracked, `_budget` told.
 * Tensor, Entry and Op fields are read and written by their __slots__ offsets (configure). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

enum { E_OP, E_IN_UIDS, E_OUT_UID, E_SAVED, E_PARAMS, E_IN_SHAPES, E_ARGS, E_RECOMPUTE, E_N };
static const char *entry_fields[E_N] = {"op", "in_uids", "out_uid", "saved", "params",
                                        "in_shapes", "args", "recompute"};
static Py_ssize_t entry_off[E_N], uid_off, data_off, dev_off, plan_off, vjp_off;
static PyTypeObject *entry_type, *tensor_type, *recorder_type;
static PyObject *thread_state, *next_uid;  /* tensor._thread, tensor._next_uid */
static PyObject *SAVE_X, *SAVE_OUT, *SAVE_XY, *SAVE_XSHAPE;
static PyObject *S_tracked, *S_entries, *S_budget, *S_shape, *S_saved_values, *S_on_record,
    *S_recorders, *S_record, *S_dtype, *S_kind;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static int slot_offset(PyObject *type, const char *name, Py_ssize_t *off)
{
    PyObject *d = PyObject_GetAttrString(type, name);
    if (d == NULL)
        return -1;
    if (!PyObject_TypeCheck(d, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "_record: %s.%s is not a __slots__ field",
                     ((PyTypeObject *)type)->tp_name, name);
        Py_DECREF(d);
        return -1;
    }
    *off = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_DECREF(d);
    return 0;
}

/* A field's value (a new reference): a tensor's by its slot (AttributeError as Python gives for
 * an unset slot), any other object's (custom gradients' variable slots) by name. */
static PyObject *tensor_field(PyObject *obj, Py_ssize_t off, const char *name)
{
    if (!PyObject_TypeCheck(obj, tensor_type))
        return PyObject_GetAttrString(obj, name);
    PyObject *v = SLOT(obj, off);
    if (v == NULL)
        return PyErr_Format(PyExc_AttributeError, "'%s' object has no attribute '%s'",
                            Py_TYPE(obj)->tp_name, name);
    Py_INCREF(v);
    return v;
}

static PyObject *configure(PyObject *mod, PyObject *args)
{
    PyObject *tensor, *entry, *op, *recorder;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OOOOOO", &PyType_Type, &tensor, &PyType_Type, &entry,
                          &PyType_Type, &op, &PyType_Type, &recorder, &thread_state, &next_uid,
                          &SAVE_X, &SAVE_OUT, &SAVE_XY, &SAVE_XSHAPE))
        return NULL;
    Py_INCREF(thread_state);
    Py_INCREF(next_uid);
    Py_INCREF(recorder);
    recorder_type = (PyTypeObject *)recorder;
    Py_INCREF(SAVE_X);
    Py_INCREF(SAVE_OUT);
    Py_INCREF(SAVE_XY);
    Py_INCREF(SAVE_XSHAPE);
    for (int i = 0; i < E_N; i++)
        if (slot_offset(entry, entry_fields[i], &entry_off[i]) < 0)
            return NULL;
    if (slot_offset(tensor, "_uid", &uid_off) < 0 || slot_offset(tensor, "_data", &data_off) < 0 ||
        slot_offset(tensor, "_dev", &dev_off) < 0 || slot_offset(op, "save_plan", &plan_off) < 0 ||
        slot_offset(op, "vjp", &vjp_off) < 0)
        return NULL;
    Py_INCREF(entry);
    entry_type = (PyTypeObject *)entry;
    Py_INCREF(tensor);
    tensor_type = (PyTypeObject *)tensor;
    Py_RETURN_NONE;
}

/* The declared saves of one call: the common plans inline, as the twin has them. */
static PyObject *saved_values(PyObject *op, PyObject *inputs, PyObject *out, Py_ssize_t n)
{
    PyObject *plan = SLOT(op, plan_off);
    if (plan == NULL)
        return PyErr_Format(PyExc_AttributeError, "op has no save_plan");
    if ((n == 1 && plan == SAVE_X) || (n == 2 && plan == SAVE_XY)) {
        Py_INCREF(inputs);
        return inputs;
    }
    if (n == 1 && plan == SAVE_OUT)
        return PyTuple_Pack(1, out);
    if (n == 1 && plan == SAVE_XSHAPE) {
        PyObject *data = tensor_field(PyTuple_GET_ITEM(inputs, 0), data_off, "_data");
        PyObject *shape = data == NULL ? NULL : PyObject_GetAttr(data, S_shape);
        Py_XDECREF(data);
        if (shape == NULL)
            return NULL;
        PyObject *saved = PyTuple_Pack(1, shape);
        Py_DECREF(shape);
        return saved;
    }
    int truth = PyObject_IsTrue(plan);
    if (truth <= 0)
        return truth < 0 ? NULL : PyTuple_New(0);
    return PyObject_CallMethodObjArgs(op, S_saved_values, inputs, out, NULL);
}

static PyObject *record(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);

/* Whether an array's dtype is floating or complex (`out.dtype.kind in "fcV"`, V: bfloat16);
 * dtypes are long-lived objects, so the last answer is kept for the last dtype. */
static PyObject *last_dtype;
static int last_floating;
static int floating(PyObject *out)
{
    PyObject *dtype = PyObject_GetAttr(out, S_dtype);
    if (dtype == last_dtype && dtype != NULL) {
        Py_DECREF(dtype);
        return last_floating;
    }
    PyObject *kind = dtype == NULL ? NULL : PyObject_GetAttr(dtype, S_kind);
    if (kind == NULL) {
        Py_XDECREF(dtype);
        return -1;
    }
    int r = PyUnicode_Check(kind) && PyUnicode_GET_LENGTH(kind) == 1 &&
            (PyUnicode_READ_CHAR(kind, 0) == 'f' || PyUnicode_READ_CHAR(kind, 0) == 'c' ||
             PyUnicode_READ_CHAR(kind, 0) == 'V');
    Py_DECREF(kind);
    Py_XSETREF(last_dtype, dtype);  /* keeps the reference */
    last_floating = r;
    return r;
}

static PyObject *wrap(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || tensor_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "wrap(op, inputs, out, dev, params), after configure()");
        return NULL;
    }
    PyObject *op = args[0], *inputs = args[1], *out = args[2], *dev = args[3], *params = args[4];
    PyObject *uid = PyObject_CallNoArgs(next_uid);
    PyObject *y = uid == NULL ? NULL : tensor_type->tp_alloc(tensor_type, 0);
    if (y == NULL) {
        Py_XDECREF(uid);
        return NULL;
    }
    Py_INCREF(out);
    Py_INCREF(dev);
    SLOT(y, data_off) = out;
    SLOT(y, dev_off) = dev;
    SLOT(y, uid_off) = uid;
    PyObject *active = PyObject_GetAttr(thread_state, S_recorders);
    if (active == NULL || !PyList_Check(active)) {
        if (active != NULL)
            PyErr_SetString(PyExc_TypeError, "_thread.recorders must be a list");
        goto fail;
    }
    PyObject *vjp = SLOT(op, vjp_off);
    int fl = PyList_GET_SIZE(active) && vjp != NULL && vjp != Py_None ? floating(out) : 0;
    if (fl < 0)
        goto fail;
    for (Py_ssize_t i = 0; fl && i < PyList_GET_SIZE(active); i++) {
        PyObject *rec = PyList_GET_ITEM(active, i), *r;
        Py_INCREF(rec);
        if (PyObject_TypeCheck(rec, recorder_type)) {  /* a tape: its record, inline */
            PyObject *a[5] = {rec, op, inputs, y, params};
            r = record(mod, a, 5);
        } else {  /* a forward accumulator */
            r = PyObject_CallMethodObjArgs(rec, S_record, op, inputs, y, params, NULL);
        }
        Py_DECREF(rec);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
    }
    Py_DECREF(active);
    return y;
fail:
    Py_XDECREF(active);
    Py_DECREF(y);
    return NULL;
}

static PyObject *record(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "record(recorder, op, inputs, out, params)");
        return NULL;
    }
    if (entry_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_record: configure() was not called");
        return NULL;
    }
    PyObject *self = args[0], *op = args[1], *out = args[3], *params = args[4];
    PyObject *inputs = PySequence_Tuple(args[2]);  /* a new reference; custom ops pass lists */
    if (inputs == NULL)
        return NULL;
    PyObject *tracked = NULL, *in_uids = NULL, *shapes = NULL, *saved = NULL, *uid = NULL;
    PyObject *e = NULL, *entries = NULL, *budget = NULL, *result = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(inputs);
    int any = 0;

    tracked = PyObject_GetAttr(self, S_tracked);
    if (tracked == NULL || (in_uids = PyTuple_New(n)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *u = tensor_field(PyTuple_GET_ITEM(inputs, i), uid_off, "_uid");
        int found = u == NULL ? -1 : PySet_Contains(tracked, u);
        if (found < 0) {
            Py_XDECREF(u);
            goto done;
        }
        any |= found;
        PyTuple_SET_ITEM(in_uids, i, found ? u : (Py_DECREF(u), Py_NewRef(Py_None)));
    }
    if (!any) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    if ((shapes = PyTuple_New(n)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *data = tensor_field(PyTuple_GET_ITEM(inputs, i), data_off, "_data");
        PyObject *shape = data == NULL ? NULL : PyObject_GetAttr(data, S_shape);
        Py_XDECREF(data);
        if (shape == NULL)
            goto done;
        PyTuple_SET_ITEM(shapes, i, shape);
    }
    if ((saved = saved_values(op, inputs, out, n)) == NULL)
        goto done;
    if ((uid = tensor_field(out, uid_off, "_uid")) == NULL || PySet_Add(tracked, uid) < 0)
        goto done;
    if ((e = entry_type->tp_alloc(entry_type, 0)) == NULL)
        goto done;
    PyObject *fields[E_N] = {op, in_uids, uid, saved, params, shapes, NULL, Py_None};
    for (int i = 0; i < E_N; i++) {
        Py_XINCREF(fields[i]);
        SLOT(e, entry_off[i]) = fields[i];  /* `args` stays unset, as the twin leaves it */
    }
    entries = PyObject_GetAttr(self, S_entries);
    if (entries == NULL || PyList_Append(entries, e) < 0)
        goto done;
    budget = PyObject_GetAttr(self, S_budget);
    if (budget == NULL)
        goto done;
    if (budget != Py_None) {
        PyObject *r = PyObject_CallMethodObjArgs(budget, S_on_record, e, inputs, out, NULL);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    result = Py_None;
    Py_INCREF(result);
done:
    Py_DECREF(inputs);
    Py_XDECREF(tracked);
    Py_XDECREF(in_uids);
    Py_XDECREF(shapes);
    Py_XDECREF(saved);
    Py_XDECREF(uid);
    Py_XDECREF(e);
    Py_XDECREF(entries);
    Py_XDECREF(budget);
    return result;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(Tensor, Entry, Op, Recorder, _thread, _next_uid, SAVE_X, SAVE_OUT, SAVE_XY, "
     "SAVE_XSHAPE)."},
    {"wrap", (PyCFunction)(void (*)(void))wrap, METH_FASTCALL,
     "wrap(op, inputs, out, dev, params): registry.wrap, compiled."},
    {"record", (PyCFunction)(void (*)(void))record, METH_FASTCALL,
     "record(recorder, op, inputs, out, params): recording.Recorder.record, compiled."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_record", NULL, -1, methods};

PyMODINIT_FUNC PyInit__record(void)
{
    PyObject **strs[] = {&S_tracked, &S_entries, &S_budget, &S_shape, &S_saved_values,
                         &S_on_record, &S_recorders, &S_record, &S_dtype, &S_kind};
    const char *names[] = {"_tracked", "_entries", "_budget", "shape", "saved_values",
                           "on_record", "recorders", "record", "dtype", "kind"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if ((*strs[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (mod == NULL)
        return NULL;
    /* `method`: record as a method (bound to its recorder), to assign as Recorder.record */
    PyObject *fn = PyObject_GetAttrString(mod, "record");
    PyObject *method = fn == NULL ? NULL : PyInstanceMethod_New(fn);
    Py_XDECREF(fn);
    if (method == NULL || PyModule_AddObject(mod, "method", method) < 0) {
        Py_XDECREF(method);
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
