/* tapegpu._core: the compiled form of the tape's per-op bookkeeping.
 *
 * A few pieces of tensor.py, registry.py, tape.py and sweep.py run once per op, and in an eager
 * loop of small ops their Python costs more than the ops' own numpy calls. This module does
 * exactly what the Python code beside it does, in C:
 *
 *   TensorBase      tensor.PyTensorBase: a tensor's fields (`_data`, `_dev`, `_uid`, `_res`)
 *                   and constructor; `next_uid` is the one counter of tensor and variable ids.
 *   apply1, apply2  registry.py_apply1 and py_apply2: run an op's forward, wrap the result,
 *                   offer it to the recording tapes.
 *   Entry           tape.PyEntry: one recorded op (the same eight attributes).
 *   Recorder        tape.PyRecorder, the base of GradientTape: `record` and the three
 *                   attributes it uses (`_tracked`, `_entries`, `_budget`).
 *   sweep_arrays    the loop of sweep._sweep_arrays for a sweep that nothing watches (no memory
 *                   ledger, no profiler); it runs the common steps from their descriptions
 *                   (`step.fast`, see sweep.py) and calls the others.
 *
 * The Python code is the reference and the fallback (no compiler, or TAPEGPU_PURE_PYTHON=1);
 * tests/test_compiled_core.py runs both on the same programs and requires identical entries and
 * bit-identical gradients, and tests/test_pure_python.py runs the tape suite without this module.
 * Only the CPython C API is used (no numpy headers). Rare paths (errors, ops with residuals,
 * launch counting, profilers, restoring checkpoints, un-broadcasting) call back into the
 * Python code, so they exist once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

static PyObject *SAVE_X, *SAVE_OUT, *SAVE_XY;  /* registry's shared save plans */
static PyObject *S_dev, *S_name, *S_xp, *S_counts_launches, *S_kind, *S_record, *S_fast,
    *S_recorders;
static PyObject *S_uid, *S_data, *S_shape, *S_saved_values, *S_on_record, *S_base, *S_flags,
    *S_writeable, *S_dtype;

/* -- TensorBase --------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *data, *dev, *uid, *res, *weakrefs;
} TensorBase;

static PyTypeObject TensorBaseType;
static long long uid_counter = 0;
static PyObject *default_device;  /* backend.current (configure_tensor) */

static PyObject *new_uid(void)
{
    return PyLong_FromLongLong(++uid_counter);
}

static PyObject *next_uid(PyObject *mod, PyObject *unused)
{
    return new_uid();
}

static int TensorBase_init(TensorBase *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"data", "dev", NULL};
    PyObject *data, *dev = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:Tensor", names, &data, &dev))
        return -1;
    if (dev == Py_None) {
        if (default_device == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "tapegpu._core is not configured");
            return -1;
        }
        dev = PyObject_CallNoArgs(default_device);
        if (dev == NULL)
            return -1;
    } else {
        Py_INCREF(dev);
    }
    PyObject *uid = new_uid();
    if (uid == NULL) {
        Py_DECREF(dev);
        return -1;
    }
    Py_INCREF(data);
    Py_XSETREF(self->data, data);
    Py_XSETREF(self->dev, dev);
    Py_XSETREF(self->uid, uid);
    return 0;
}

/* a new tensor of `type` (a subclass of TensorBase without fields of its own) */
static PyObject *tensor_new(PyTypeObject *type, PyObject *data, PyObject *dev)
{
    PyObject *uid = new_uid();
    if (uid == NULL)
        return NULL;
    TensorBase *t = (TensorBase *)type->tp_alloc(type, 0);
    if (t == NULL) {
        Py_DECREF(uid);
        return NULL;
    }
    Py_INCREF(data); t->data = data;
    Py_INCREF(dev); t->dev = dev;
    t->uid = uid;
    return (PyObject *)t;
}

static int TensorBase_traverse(TensorBase *t, visitproc visit, void *arg)
{
    /* subtype_traverse visits the (heap) type of a Tensor */
    Py_VISIT(t->data); Py_VISIT(t->dev); Py_VISIT(t->uid); Py_VISIT(t->res);
    return 0;
}

static int TensorBase_clear(TensorBase *t)
{
    Py_CLEAR(t->data); Py_CLEAR(t->dev); Py_CLEAR(t->uid); Py_CLEAR(t->res);
    return 0;
}

static void TensorBase_dealloc(TensorBase *t)
{
    /* Tensor is a Python subclass: subtype_dealloc releases the type */
    PyObject_GC_UnTrack(t);
    if (t->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)t);
    TensorBase_clear(t);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyMemberDef TensorBase_members[] = {
    {"_data", T_OBJECT_EX, offsetof(TensorBase, data), 0, NULL},
    {"_dev", T_OBJECT_EX, offsetof(TensorBase, dev), 0, NULL},
    {"_uid", T_OBJECT_EX, offsetof(TensorBase, uid), 0, NULL},
    {"_res", T_OBJECT_EX, offsetof(TensorBase, res), 0, NULL},
    {NULL}
};

static PyTypeObject TensorBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tapegpu._core.TensorBase",
    .tp_doc = "TensorBase(data, dev=None)\n--\n\n"
              "The fields of a tensor: its array, its backend and its id.",
    .tp_basicsize = sizeof(TensorBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)TensorBase_init,
    .tp_traverse = (traverseproc)TensorBase_traverse,
    .tp_clear = (inquiry)TensorBase_clear,
    .tp_dealloc = (destructor)TensorBase_dealloc,
    .tp_members = TensorBase_members,
    .tp_weaklistoffset = offsetof(TensorBase, weakrefs),
};

/* x._data, x._dev, x._uid: the fields themselves for a tensor, else by attribute */
static PyObject *tensor_field(PyObject *x, Py_ssize_t offset, PyObject *name)
{
    if (PyObject_TypeCheck(x, &TensorBaseType)) {
        PyObject *v = *(PyObject **)((char *)x + offset);
        if (v != NULL)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(x, name);
}

#define T_DATA(x) tensor_field(x, offsetof(TensorBase, data), S_data)
#define T_DEV(x) tensor_field(x, offsetof(TensorBase, dev), S_dev)
#define T_UID(x) tensor_field(x, offsetof(TensorBase, uid), S_uid)

/* registry.Op's slots read by offset (configure_apply finds them): op.forward and the like
 * cost a pointer read instead of an attribute lookup */
static PyTypeObject *OpType;
enum { F_FORWARD, F_OVERRIDES, F_RESIDUALS, F_VJP, F_SAME_DTYPE, F_SAVE_PLAN, F_STEPS, N_FIELDS };
static const char *op_field_names[N_FIELDS] = {"forward", "overrides", "residuals", "vjp",
                                               "same_dtype", "save_plan", "steps"};
static PyObject *op_field_strs[N_FIELDS];
static Py_ssize_t op_offsets[N_FIELDS];

static PyObject *op_attr(PyObject *op, int field)
{
    if (Py_TYPE(op) == OpType && op_offsets[field] > 0) {
        PyObject *v = *(PyObject **)((char *)op + op_offsets[field]);
        if (v != NULL)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(op, op_field_strs[field]);
}

static int find_op_offsets(PyObject *op_type)
{
    for (int f = 0; f < N_FIELDS; f++) {
        op_offsets[f] = -1;
        PyObject *d = PyObject_GetAttrString(op_type, op_field_names[f]);
        if (d == NULL)
            return -1;
        if (Py_IS_TYPE(d, &PyMemberDescr_Type)) {
            PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
            if (m->type == T_OBJECT_EX)
                op_offsets[f] = m->offset;
        }
        Py_DECREF(d);
    }
    return 0;
}

/* -- apply1, apply2 ---------------------------------------------------------------------------- */

/* registry's objects (configure_apply) */
static PyTypeObject *TensorType;         /* tensor.Tensor */
static PyObject *thread_state;           /* tensor._thread: .recorders, this thread's tapes */
static PyObject *profilers_list;         /* profiler._active */
static PyObject *raise_error;            /* registry._raise_error(op, inputs, params, e) */
static PyObject *with_residuals;         /* registry._with_residuals */
static PyObject *check_inputs;           /* registry._check_inputs(op, inputs, dev) */
static PyObject *count_launch;           /* registry._count_launch(op, dev): not for views */
static PyObject *on_forward;             /* profiler.on_forward */

static PyObject *Recorder_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
static PyTypeObject RecorderType;

/* the forward `registry.apply` would call: op.overrides[dev.name] or op.forward */
static PyObject *forward_of(PyObject *op, PyObject *dev, PyObject **default_forward)
{
    PyObject *fwd = op_attr(op, F_FORWARD);
    *default_forward = fwd;
    if (fwd == NULL)
        return NULL;
    PyObject *ov = op_attr(op, F_OVERRIDES);
    if (ov == NULL)
        return NULL;
    PyObject *chosen = fwd;
    int any = PyObject_IsTrue(ov);
    if (any > 0) {
        PyObject *name = PyObject_GetAttr(dev, S_name);
        PyObject *f = name == NULL ? NULL : PyObject_GetItem(ov, name);
        Py_XDECREF(name);
        if (f == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_KeyError)) {
                Py_DECREF(ov);
                return NULL;
            }
            PyErr_Clear();
        } else {
            Py_DECREF(f);  /* the overrides dict keeps it alive */
            chosen = f;
        }
    }
    Py_DECREF(ov);
    if (any < 0)
        return NULL;
    Py_INCREF(chosen);
    return chosen;
}

/* forward(dev.xp, *arrays, **params); a bad-input error becomes registry._error's message */
static PyObject *run_forward(PyObject *op, PyObject *forward, PyObject *dev, PyObject *inputs,
                             PyObject **arrays, Py_ssize_t n, PyObject *params)
{
    PyObject *xp = PyObject_GetAttr(dev, S_xp);
    if (xp == NULL)
        return NULL;
    PyObject *call[3] = {xp, arrays[0], n > 1 ? arrays[1] : NULL};
    PyObject *out;
    if (PyDict_GET_SIZE(params) == 0) {
        out = PyObject_Vectorcall(forward, call, n + 1, NULL);
    } else {
        PyObject *a = PyTuple_New(n + 1);
        if (a == NULL) {
            Py_DECREF(xp);
            return NULL;
        }
        for (Py_ssize_t i = 0; i <= n; i++)
            PyTuple_SET_ITEM(a, i, Py_NewRef(call[i]));
        out = PyObject_Call(forward, a, params);
        Py_DECREF(a);
    }
    Py_DECREF(xp);
    if (out == NULL && (PyErr_ExceptionMatches(PyExc_ValueError) ||
                        PyErr_ExceptionMatches(PyExc_TypeError) ||
                        PyErr_ExceptionMatches(PyExc_IndexError) ||
                        PyErr_ExceptionMatches(PyExc_ArithmeticError))) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        PyObject *r = PyObject_CallFunctionObjArgs(raise_error, op, inputs, params,
                                                   value ? value : Py_None, NULL);
        Py_XDECREF(type); Py_XDECREF(value); Py_XDECREF(tb);
        Py_XDECREF(r);  /* raise_error raises: r is NULL */
        if (r != NULL)
            PyErr_SetString(PyExc_SystemError, "registry._raise_error returned");
        return NULL;
    }
    return out;
}

/* `out` (wrapped as `y`) offered to this thread's recorders, as registry.py_apply1 does */
/* this thread's `tensor._thread.recorders` (a new reference). The list of a thread is never
 * rebound, so the last thread's is kept, by thread state id (ids are never reused). */
static uint64_t cached_thread_id = 0;
static PyObject *cached_recorders = NULL;

static PyObject *thread_recorders(void)
{
    uint64_t id = PyThreadState_GetID(PyThreadState_Get());
    if (cached_recorders != NULL && id == cached_thread_id)
        return Py_NewRef(cached_recorders);
    PyObject *active = PyObject_GetAttr(thread_state, S_recorders);
    if (active == NULL)
        return NULL;
    Py_XSETREF(cached_recorders, Py_NewRef(active));
    cached_thread_id = id;
    return active;
}

static int offer(PyObject *op, PyObject *inputs, PyObject *y, PyObject *out, PyObject *params)
{
    PyObject *active = thread_recorders();
    if (active == NULL)
        return -1;
    int status = -1;
    if (!PyList_Check(active)) {
        PyErr_SetString(PyExc_TypeError, "tensor._thread.recorders must be a list");
        goto out;
    }
    if (PyList_GET_SIZE(active) == 0) {
        status = 0;
        goto out;
    }
    PyObject *vjp = op_attr(op, F_VJP);
    if (vjp == NULL)
        goto out;
    int rec = vjp != Py_None;
    Py_DECREF(vjp);
    if (rec) {  /* out.dtype.kind in "fc" */
        PyObject *dt = PyObject_GetAttr(out, S_dtype);
        PyObject *kind = dt == NULL ? NULL : PyObject_GetAttr(dt, S_kind);
        Py_XDECREF(dt);
        if (kind == NULL)
            goto out;
        rec = PyUnicode_Check(kind) && PyUnicode_GET_LENGTH(kind) == 1 &&
              (PyUnicode_READ_CHAR(kind, 0) == 'f' || PyUnicode_READ_CHAR(kind, 0) == 'c');
        Py_DECREF(kind);
    }
    /* `for rec in active`: by index over the live list, as a list iterator goes */
    PyObject *args[4] = {op, inputs, y, params};
    for (Py_ssize_t i = 0; rec && i < PyList_GET_SIZE(active); i++) {
        PyObject *r = Py_NewRef(PyList_GET_ITEM(active, i)), *ok;
        if (PyObject_TypeCheck(r, &RecorderType) &&
            Py_TYPE(r)->tp_getattro == PyObject_GenericGetAttr &&
            _PyType_Lookup(Py_TYPE(r), S_record) == _PyType_Lookup(&RecorderType, S_record))
            ok = Recorder_record(r, args, 4);  /* a GradientTape: its C method, directly */
        else
            ok = PyObject_CallMethodObjArgs(r, S_record, op, inputs, y, params, NULL);
        Py_DECREF(r);
        if (ok == NULL)
            goto out;
        Py_DECREF(ok);
    }
    status = 0;
out:
    Py_DECREF(active);
    return status;
}

/* registry._finish: count the launch, wrap, record, report */
static PyObject *finish(PyObject *op, PyObject *inputs, PyObject *out, PyObject *dev,
                        PyObject *params, PyObject *forward, PyObject *default_forward)
{
    PyObject *res = op_attr(op, F_RESIDUALS);
    if (res == NULL)
        return NULL;
    int has_res = PyObject_IsTrue(res);
    Py_DECREF(res);
    if (has_res < 0)
        return NULL;
    if (has_res)
        return PyObject_CallFunctionObjArgs(with_residuals, op, inputs, out, dev, params,
                                            forward, NULL);
    PyObject *counts = PyObject_GetAttr(dev, S_counts_launches);
    if (counts == NULL)
        return NULL;
    int c = PyObject_IsTrue(counts);
    Py_DECREF(counts);
    if (c < 0)
        return NULL;
    if (c && forward == default_forward) {
        PyObject *r = PyObject_CallFunctionObjArgs(count_launch, op, dev, NULL);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    }
    PyObject *y = tensor_new(TensorType, out, dev);
    if (y == NULL)
        return NULL;
    if (offer(op, inputs, y, out, params) < 0)
        goto fail;
    if (PyList_GET_SIZE(profilers_list)) {
        PyObject *r = PyObject_CallFunctionObjArgs(on_forward, op, inputs, out, params, NULL);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
    }
    return y;
fail:
    Py_DECREF(y);
    return NULL;
}

static PyObject *apply_n(PyObject *op, PyObject **xs, Py_ssize_t n, PyObject *params)
{
    if (!PyDict_Check(params)) {
        PyErr_SetString(PyExc_TypeError, "apply: params must be a dict");
        return NULL;
    }
    PyObject *arrays[2] = {NULL, NULL}, *dev = NULL, *forward = NULL, *default_forward = NULL;
    PyObject *inputs = NULL, *out = NULL, *y = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if ((arrays[i] = T_DATA(xs[i])) == NULL)
            goto done;
    if ((dev = T_DEV(xs[0])) == NULL)
        goto done;
    inputs = n == 1 ? PyTuple_Pack(1, xs[0]) : PyTuple_Pack(2, xs[0], xs[1]);
    if (inputs == NULL)
        goto done;
    if (n == 2) {  /* devices and dtypes: registry._check_inputs explains a mismatch */
        PyObject *dev1 = T_DEV(xs[1]);
        if (dev1 == NULL)
            goto done;
        Py_DECREF(dev1);
        int check = dev1 != dev;
        if (!check) {
            PyObject *same = op_attr(op, F_SAME_DTYPE);
            int sd = same == NULL ? -1 : PyObject_IsTrue(same);
            Py_XDECREF(same);
            if (sd < 0)
                goto done;
            if (sd) {
                PyObject *d0 = PyObject_GetAttr(arrays[0], S_dtype);
                PyObject *d1 = d0 == NULL ? NULL : PyObject_GetAttr(arrays[1], S_dtype);
                check = d1 == NULL ? -1 : d0 == d1 ? 0 : PyObject_RichCompareBool(d1, d0, Py_NE);
                Py_XDECREF(d0); Py_XDECREF(d1);
                if (check < 0)
                    goto done;
            }
        }
        if (check) {
            PyObject *r = PyObject_CallFunctionObjArgs(check_inputs, op, inputs, dev, NULL);
            if (r == NULL)
                goto done;
            Py_DECREF(r);
        }
    }
    if ((forward = forward_of(op, dev, &default_forward)) == NULL)
        goto done;
    if ((out = run_forward(op, forward, dev, inputs, arrays, n, params)) == NULL)
        goto done;
    y = finish(op, inputs, out, dev, params, forward, default_forward);
done:
    Py_XDECREF(arrays[0]); Py_XDECREF(arrays[1]); Py_XDECREF(dev); Py_XDECREF(forward);
    Py_XDECREF(default_forward); Py_XDECREF(inputs); Py_XDECREF(out);
    return y;
}

static int configured(void)
{
    if (TensorType == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "tapegpu._core.configure_apply was not called");
        return 0;
    }
    return 1;
}

static PyObject *apply1(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "apply1(op, x, params)");
        return NULL;
    }
    if (!configured())
        return NULL;
    PyObject *xs[1] = {args[1]};
    return apply_n(args[0], xs, 1, args[2]);
}

static PyObject *apply2(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "apply2(op, x, y, params)");
        return NULL;
    }
    if (!configured())
        return NULL;
    PyObject *xs[2] = {args[1], args[2]};
    return apply_n(args[0], xs, 2, args[3]);
}

static PyObject *configure_tensor(PyObject *mod, PyObject *current)
{
    Py_XSETREF(default_device, Py_NewRef(current));
    Py_RETURN_NONE;
}

static PyObject *configure_apply(PyObject *mod, PyObject *args)
{
    PyObject *tensor, *op, *active, *profilers, *err, *res, *check, *count, *onf, *x, *o, *xy;
    if (!PyArg_ParseTuple(args, "O!O!OO!OOOOOOOO:configure_apply", &PyType_Type, &tensor,
                          &PyType_Type, &op, &active, &PyList_Type, &profilers,
                          &err, &res, &check, &count, &onf, &x, &o, &xy))
        return NULL;
    Py_XSETREF(SAVE_X, Py_NewRef(x));
    Py_XSETREF(SAVE_OUT, Py_NewRef(o));
    Py_XSETREF(SAVE_XY, Py_NewRef(xy));
    if (find_op_offsets(op) < 0)
        return NULL;
    Py_XSETREF(OpType, (PyTypeObject *)Py_NewRef(op));
    if (!PyType_IsSubtype((PyTypeObject *)tensor, &TensorBaseType) ||
        ((PyTypeObject *)tensor)->tp_basicsize != TensorBaseType.tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "configure_apply: the tensor type must derive from "
                        "TensorBase with no fields of its own (__slots__ = ())");
        return NULL;
    }
    Py_XSETREF(TensorType, (PyTypeObject *)Py_NewRef(tensor));
    Py_XSETREF(thread_state, Py_NewRef(active));
    Py_CLEAR(cached_recorders);
    Py_XSETREF(profilers_list, Py_NewRef(profilers));
    Py_XSETREF(raise_error, Py_NewRef(err));
    Py_XSETREF(with_residuals, Py_NewRef(res));
    Py_XSETREF(check_inputs, Py_NewRef(check));
    Py_XSETREF(count_launch, Py_NewRef(count));
    Py_XSETREF(on_forward, Py_NewRef(onf));
    Py_RETURN_NONE;
}

/* -- Entry ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *op, *in_uids, *out_uid, *saved, *params, *in_shapes, *args, *recompute;
} Entry;

static PyTypeObject EntryType;

static Entry *entry_new(PyObject *op, PyObject *in_uids, PyObject *out_uid, PyObject *saved,
                        PyObject *params, PyObject *in_shapes)
{
    /* steals nothing: every field gets a new reference */
    Entry *e = PyObject_GC_New(Entry, &EntryType);
    if (e == NULL)
        return NULL;
    Py_INCREF(op); e->op = op;
    Py_INCREF(in_uids); e->in_uids = in_uids;
    Py_INCREF(out_uid); e->out_uid = out_uid;
    Py_INCREF(saved); e->saved = saved;
    Py_INCREF(params); e->params = params;
    Py_INCREF(in_shapes); e->in_shapes = in_shapes;
    e->args = NULL;
    Py_INCREF(Py_None); e->recompute = Py_None;
    PyObject_GC_Track(e);
    return e;
}

static PyObject *Entry_tp_new(PyTypeObject *type, PyObject *a, PyObject *kw)
{
    static char *names[] = {"op", "in_uids", "out_uid", "saved", "params", "in_shapes", NULL};
    PyObject *op, *in_uids, *out_uid, *saved, *params, *in_shapes;
    if (!PyArg_ParseTupleAndKeywords(a, kw, "OOOOOO:Entry", names, &op, &in_uids, &out_uid,
                                     &saved, &params, &in_shapes))
        return NULL;
    return (PyObject *)entry_new(op, in_uids, out_uid, saved, params, in_shapes);
}

static int Entry_traverse(Entry *e, visitproc visit, void *arg)
{
    Py_VISIT(e->op); Py_VISIT(e->in_uids); Py_VISIT(e->out_uid); Py_VISIT(e->saved);
    Py_VISIT(e->params); Py_VISIT(e->in_shapes); Py_VISIT(e->args); Py_VISIT(e->recompute);
    return 0;
}

static int Entry_clear(Entry *e)
{
    Py_CLEAR(e->op); Py_CLEAR(e->in_uids); Py_CLEAR(e->out_uid); Py_CLEAR(e->saved);
    Py_CLEAR(e->params); Py_CLEAR(e->in_shapes); Py_CLEAR(e->args); Py_CLEAR(e->recompute);
    return 0;
}

static void Entry_dealloc(Entry *e)
{
    PyObject_GC_UnTrack(e);
    Py_TRASHCAN_BEGIN(e, Entry_dealloc)
    Entry_clear(e);
    PyObject_GC_Del(e);
    Py_TRASHCAN_END
}

static PyMemberDef Entry_members[] = {
    {"op", T_OBJECT_EX, offsetof(Entry, op), 0, NULL},
    {"in_uids", T_OBJECT_EX, offsetof(Entry, in_uids), 0, NULL},
    {"out_uid", T_OBJECT_EX, offsetof(Entry, out_uid), 0, NULL},
    {"saved", T_OBJECT_EX, offsetof(Entry, saved), 0, NULL},
    {"params", T_OBJECT_EX, offsetof(Entry, params), 0, NULL},
    {"in_shapes", T_OBJECT_EX, offsetof(Entry, in_shapes), 0, NULL},
    {"args", T_OBJECT_EX, offsetof(Entry, args), 0, NULL},
    {"recompute", T_OBJECT_EX, offsetof(Entry, recompute), 0, NULL},
    {NULL}
};

static PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tapegpu._core.Entry",
    .tp_doc = "One recorded op: the op, its input and output ids, declared residuals, params, "
              "and the input shapes (for un-broadcasting).",
    .tp_basicsize = sizeof(Entry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = Entry_tp_new,
    .tp_traverse = (traverseproc)Entry_traverse,
    .tp_clear = (inquiry)Entry_clear,
    .tp_dealloc = (destructor)Entry_dealloc,
    .tp_members = Entry_members,
};

/* -- Recorder --------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *tracked, *entries, *budget;
} Recorder;

static int Recorder_traverse(Recorder *r, visitproc visit, void *arg)
{
    Py_VISIT(r->tracked); Py_VISIT(r->entries); Py_VISIT(r->budget);
    return 0;
}

static int Recorder_clear(Recorder *r)
{
    Py_CLEAR(r->tracked); Py_CLEAR(r->entries); Py_CLEAR(r->budget);
    return 0;
}

static void Recorder_dealloc(Recorder *r)
{
    /* a Python subclass's instance (GradientTape): subtype_dealloc releases the type */
    PyObject_GC_UnTrack(r);
    Recorder_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

/* x._uid if it is in `tracked`, else NULL with no error; -1 on error (in *err) */
static PyObject *tracked_uid(PyObject *tracked, PyObject *x, int *err)
{
    PyObject *uid = T_UID(x);
    if (uid == NULL) {
        *err = 1;
        return NULL;
    }
    int in = PySet_Contains(tracked, uid);
    if (in <= 0) {
        Py_DECREF(uid);
        if (in < 0)
            *err = 1;
        return NULL;
    }
    return uid;
}

static PyObject *data_shape(PyObject *x)
{
    PyObject *data = T_DATA(x);
    if (data == NULL)
        return NULL;
    PyObject *shape = PyObject_GetAttr(data, S_shape);
    Py_DECREF(data);
    return shape;
}

/* what an op declared to keep: the common plans inline, the others by op.saved_values */
static PyObject *saved_values(PyObject *op, PyObject *inputs, PyObject *out, Py_ssize_t n)
{
    PyObject *plan = op_attr(op, F_SAVE_PLAN);
    if (plan == NULL)
        return NULL;
    PyObject *saved;
    if (n == 1 && plan == SAVE_X)
        saved = PyTuple_Pack(1, PySequence_Fast_GET_ITEM(inputs, 0));
    else if (plan == SAVE_OUT)
        saved = PyTuple_Pack(1, out);
    else if (n == 2 && plan == SAVE_XY)
        saved = PyTuple_Pack(2, PySequence_Fast_GET_ITEM(inputs, 0),
                             PySequence_Fast_GET_ITEM(inputs, 1));
    else if (PyTuple_Check(plan) && PyTuple_GET_SIZE(plan) == 0)
        saved = PyTuple_New(0);
    else
        saved = PyObject_CallMethodObjArgs(op, S_saved_values, inputs, out, NULL);
    Py_DECREF(plan);
    return saved;
}

static PyObject *Recorder_record(PyObject *self_obj, PyObject *const *args, Py_ssize_t nargs)
{
    Recorder *self = (Recorder *)self_obj;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "record(op, inputs, out, params)");
        return NULL;
    }
    PyObject *op = args[0], *inputs_arg = args[1], *out = args[2], *params = args[3];
    PyObject *tracked = self->tracked, *entries = self->entries;
    if (tracked == NULL || !PyAnySet_Check(tracked) || entries == NULL ||
        !PyList_Check(entries)) {
        PyErr_SetString(PyExc_TypeError, "record: the tape's _tracked must be a set and its "
                        "_entries a list");
        return NULL;
    }
    PyObject *inputs = PySequence_Fast(inputs_arg, "record: inputs must be a sequence");
    if (inputs == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(inputs);
    PyObject *in_uids = NULL, *shapes = NULL, *saved = NULL, *out_uid = NULL;
    Entry *e = NULL;
    int err = 0, any = 0;
    in_uids = PyTuple_New(n);
    shapes = PyTuple_New(n);
    if (in_uids == NULL || shapes == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(inputs, i);
        PyObject *uid = tracked_uid(tracked, x, &err);
        if (err)
            goto fail;
        if (uid == NULL) {
            if (n == 1)
                goto untracked;
            Py_INCREF(Py_None);
            uid = Py_None;
        } else {
            any = 1;
        }
        PyTuple_SET_ITEM(in_uids, i, uid);
    }
    if (!any)
        goto untracked;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *shape = data_shape(PySequence_Fast_GET_ITEM(inputs, i));
        if (shape == NULL)
            goto fail;
        PyTuple_SET_ITEM(shapes, i, shape);
    }
    saved = saved_values(op, inputs, out, n);
    if (saved == NULL)
        goto fail;
    out_uid = T_UID(out);
    if (out_uid == NULL || PySet_Add(tracked, out_uid) < 0)
        goto fail;
    e = entry_new(op, in_uids, out_uid, saved, params, shapes);
    if (e == NULL || PyList_Append(entries, (PyObject *)e) < 0)
        goto fail;
    if (self->budget != NULL && self->budget != Py_None) {
        PyObject *r = PyObject_CallMethodObjArgs(self->budget, S_on_record, (PyObject *)e,
                                                 inputs_arg, out, NULL);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
    }
    Py_DECREF(e); Py_DECREF(out_uid); Py_DECREF(saved); Py_DECREF(shapes); Py_DECREF(in_uids);
    Py_DECREF(inputs);
    Py_RETURN_NONE;
untracked:
    Py_XDECREF(in_uids); Py_XDECREF(shapes); Py_DECREF(inputs);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(e); Py_XDECREF(out_uid); Py_XDECREF(saved); Py_XDECREF(shapes);
    Py_XDECREF(in_uids); Py_DECREF(inputs);
    return NULL;
}

static PyMethodDef Recorder_methods[] = {
    {"record", (PyCFunction)(void (*)(void))Recorder_record, METH_FASTCALL,
     "record(op, inputs, out, params): records one op if one of its inputs is tracked."},
    {NULL}
};

static PyMemberDef Recorder_members[] = {
    {"_tracked", T_OBJECT_EX, offsetof(Recorder, tracked), 0, NULL},
    {"_entries", T_OBJECT_EX, offsetof(Recorder, entries), 0, NULL},
    {"_budget", T_OBJECT_EX, offsetof(Recorder, budget), 0, NULL},
    {NULL}
};

static PyTypeObject RecorderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tapegpu._core.Recorder",
    .tp_doc = "The recording part of a GradientTape.",
    .tp_basicsize = sizeof(Recorder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)Recorder_traverse,
    .tp_clear = (inquiry)Recorder_clear,
    .tp_dealloc = (destructor)Recorder_dealloc,
    .tp_methods = Recorder_methods,
    .tp_members = Recorder_members,
};

/* -- the array sweep's loop --------------------------------------------------------------------- */

/* sweep._owned: only the grads dict (whose reference `a` is borrowed here) holds the buffer, it
 * owns its memory and is writeable */
static int owned(PyObject *a)
{
    if (Py_REFCNT(a) != 1)
        return 0;
    PyObject *base = PyObject_GetAttr(a, S_base);
    if (base == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(base);
    if (base != Py_None)
        return 0;
    PyObject *flags = PyObject_GetAttr(a, S_flags);
    if (flags == NULL)
        return -1;
    PyObject *w = PyObject_GetAttr(flags, S_writeable);
    Py_DECREF(flags);
    if (w == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 1;
    }
    int r = PyObject_IsTrue(w);
    Py_DECREF(w);
    return r;
}

/* attribute `name` of a and b compare equal: 1, 0, or -1 on error */
static int same_attr(PyObject *a, PyObject *b, PyObject *name)
{
    PyObject *x = PyObject_GetAttr(a, name);
    if (x == NULL)
        return -1;
    PyObject *y = PyObject_GetAttr(b, name);
    if (y == NULL) {
        Py_DECREF(x);
        return -1;
    }
    int r = PyObject_RichCompareBool(x, y, Py_EQ);
    Py_DECREF(x);
    Py_DECREF(y);
    return r;
}

/* grads[u] += c, in place when the sweep alone holds grads[u] (sweep._sweep_arrays) */
static int accumulate(PyObject *grads, PyObject *u, PyObject *c, int in_place)
{
    PyObject *prev = PyDict_GetItemWithError(grads, u);  /* borrowed */
    if (prev == NULL)
        return PyErr_Occurred() ? -1 : PyDict_SetItem(grads, u, c);
    int own = in_place ? owned(prev) : 0;
    if (own > 0)
        own = same_attr(prev, c, S_shape);
    if (own > 0)
        own = same_attr(prev, c, S_dtype);
    if (own < 0)
        return -1;
    if (own) {
        Py_INCREF(prev);  /* the in-place add needs its own reference */
        PyObject *r = PyNumber_InPlaceAdd(prev, c);
        Py_DECREF(prev);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
        return 0;
    }
    PyObject *sum = PyNumber_Add(prev, c);
    if (sum == NULL)
        return -1;
    int r = PyDict_SetItem(grads, u, sum);
    Py_DECREF(sum);
    return r;
}

/* a rule called as rule(xp, g, *arrays, **params) */
static PyObject *call_rule(PyObject *rule, PyObject *xp, PyObject *g, PyObject **arrays,
                           Py_ssize_t n, PyObject *params)
{
    PyObject *call[4] = {xp, g, arrays[0], n > 1 ? arrays[1] : NULL};
    if (!PyDict_Check(params) || PyDict_GET_SIZE(params) == 0)
        return PyObject_Vectorcall(rule, call, n + 2, NULL);
    PyObject *a = PyTuple_New(n + 2);
    if (a == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n + 2; i++)
        PyTuple_SET_ITEM(a, i, Py_NewRef(call[i]));
    PyObject *r = PyObject_Call(rule, a, params);
    Py_DECREF(a);
    return r;
}

/* what sweep's steps with a `fast` description return (sweep.FAST_*), without calling them;
 * NULL with no error when the entry does not fit the description (the step is called) */
enum { FAST_PASS = 1, FAST_UNARY = 2, FAST_ADD = 3, FAST_BINARY = 4 };

static PyObject *fast_step(PyObject *fast, PyObject *xp, PyObject *g, Entry *e, PyObject *reach)
{
    if (!PyTuple_Check(fast) || PyTuple_GET_SIZE(fast) != 3)
        return NULL;
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(fast, 0));
    if (kind == -1 && PyErr_Occurred())
        return NULL;
    PyObject *r[2] = {PyTuple_GET_ITEM(fast, 1), PyTuple_GET_ITEM(fast, 2)};
    if (kind == FAST_PASS)
        return PyTuple_Pack(1, g);
    PyObject *uids = e->in_uids, *saved = e->saved;
    Py_ssize_t n = kind == FAST_UNARY ? 1 : 2;
    if (!PyTuple_Check(uids) || PyTuple_GET_SIZE(uids) != (kind == FAST_UNARY ? 1 : 2))
        return NULL;
    if (kind == FAST_ADD) {
        PyObject *c[2];
        for (int i = 0; i < 2; i++) {
            int in = PySet_Contains(reach, PyTuple_GET_ITEM(uids, i));
            if (in < 0)
                return NULL;
            c[i] = in ? g : Py_None;
        }
        return PyTuple_Pack(2, c[0], c[1]);
    }
    if ((kind != FAST_UNARY && kind != FAST_BINARY) || !PyTuple_Check(saved) ||
        PyTuple_GET_SIZE(saved) < n)
        return NULL;
    PyObject *arrays[2] = {NULL, NULL}, *c[2] = {NULL, NULL}, *out = NULL;
    Py_INCREF(uids);  /* held: the rules run Python */
    for (Py_ssize_t i = 0; i < n; i++)
        if ((arrays[i] = T_DATA(PyTuple_GET_ITEM(saved, i))) == NULL)
            goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        int in = kind == FAST_UNARY ? 1 : PySet_Contains(reach, PyTuple_GET_ITEM(uids, i));
        if (in < 0)
            goto done;
        c[i] = in ? call_rule(r[i], xp, g, arrays, n, e->params) : Py_NewRef(Py_None);
        if (c[i] == NULL)
            goto done;
    }
    out = n == 1 ? PyTuple_Pack(1, c[0]) : PyTuple_Pack(2, c[0], c[1]);
done:
    Py_XDECREF(arrays[0]); Py_XDECREF(arrays[1]); Py_XDECREF(c[0]); Py_XDECREF(c[1]);
    Py_DECREF(uids);
    if (out == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_SystemError, "fast_step failed without an error");
    return out;
}

/* one entry's cotangents into grads; `g` is the entry's output cotangent */
static int step_entry(Entry *e, PyObject *g, PyObject *grads, PyObject *reach, PyObject *key,
                      PyObject *xp, int batched, int release, int in_place, PyObject *restore,
                      PyObject *build_step, PyObject *sum_to)
{
    if (e->saved == Py_None) {
        PyObject *r = PyObject_CallOneArg(restore, (PyObject *)e);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    PyObject *steps = op_attr(e->op, F_STEPS);
    if (steps == NULL)
        return -1;
    PyObject *step = PyDict_Check(steps) ? PyDict_GetItemWithError(steps, key) : NULL;
    Py_XINCREF(step);
    Py_DECREF(steps);
    if (step == NULL) {
        if (PyErr_Occurred())
            return -1;
        step = PyObject_CallOneArg(build_step, e->op);
        if (step == NULL)
            return -1;
    }
    PyObject *cts = NULL;
    PyObject *fdict = PyFunction_Check(step) ? ((PyFunctionObject *)step)->func_dict : NULL;
    PyObject *fast = fdict != NULL ? PyDict_GetItemWithError(fdict, S_fast) : NULL;
    if (fast != NULL)
        cts = fast_step(fast, xp, g, e, reach);
    if (cts == NULL && !PyErr_Occurred()) {
        PyObject *call[4] = {xp, g, (PyObject *)e, reach};
        cts = PyObject_Vectorcall(step, call, 4, NULL);
    }
    Py_DECREF(step);
    if (cts == NULL)
        return -1;
    if (release)
        Py_SETREF(e->saved, Py_NewRef(Py_None));
    PyObject *seq = PySequence_Fast(cts, "a VJP step must return a sequence of cotangents");
    Py_DECREF(cts);
    if (seq == NULL)
        return -1;
    /* held: the rules and un-broadcasts called below run Python */
    PyObject *uids = Py_NewRef(e->in_uids), *shapes = Py_NewRef(e->in_shapes);
    int status = -1;
    if (!PyTuple_Check(uids) || !PyTuple_Check(shapes)) {
        PyErr_SetString(PyExc_TypeError, "an entry's in_uids and in_shapes must be tuples");
        goto out;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (PyTuple_GET_SIZE(uids) < n)
        n = PyTuple_GET_SIZE(uids);
    if (PyTuple_GET_SIZE(shapes) < n)
        n = PyTuple_GET_SIZE(shapes);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *c = PySequence_Fast_GET_ITEM(seq, k);
        if (c == Py_None)
            continue;
        PyObject *shape = PyTuple_GET_ITEM(shapes, k);
        Py_INCREF(c);
        int reduce = batched;
        if (!reduce) {
            PyObject *cs = PyObject_GetAttr(c, S_shape);
            reduce = cs == NULL ? -1 : PyObject_RichCompareBool(cs, shape, Py_NE);
            Py_XDECREF(cs);
        }
        if (reduce) {
            PyObject *r = reduce < 0 ? NULL : PyObject_CallFunctionObjArgs(sum_to, c, shape, NULL);
            Py_DECREF(c);
            if (r == NULL)
                goto out;
            c = r;
        }
        int r = accumulate(grads, PyTuple_GET_ITEM(uids, k), c, in_place);
        Py_DECREF(c);
        if (r < 0)
            goto out;
    }
    status = 0;
out:
    Py_DECREF(uids);
    Py_DECREF(shapes);
    Py_DECREF(seq);
    return status;
}

static PyObject *sweep_arrays(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "sweep_arrays(forward, keep, grads, reach, key, xp, "
                        "batch_ndim, release, in_place, restore, build_step, sum_to)");
        return NULL;
    }
    PyObject *forward = args[0], *keep = args[1], *grads = args[2], *reach = args[3];
    PyObject *key = args[4], *xp = args[5];
    PyObject *restore = args[9], *build_step = args[10], *sum_to = args[11];
    int batched = PyObject_IsTrue(args[6]), release = PyObject_IsTrue(args[7]);
    int in_place = PyObject_IsTrue(args[8]);
    if (batched < 0 || release < 0 || in_place < 0)
        return NULL;
    if (!PyList_Check(forward) || !PyAnySet_Check(keep) || !PyDict_Check(grads)) {
        PyErr_SetString(PyExc_TypeError, "sweep_arrays: forward must be a list, keep a set and "
                        "grads a dict");
        return NULL;
    }
    for (Py_ssize_t i = PyList_GET_SIZE(forward) - 1; i >= 0; i--) {
        if (i >= PyList_GET_SIZE(forward))
            continue;  /* a callback shortened the list */
        PyObject *item = PyList_GET_ITEM(forward, i);
        if (Py_TYPE(item) != &EntryType) {
            PyErr_Format(PyExc_TypeError, "sweep_arrays: expected tape entries, got %.100s",
                         Py_TYPE(item)->tp_name);
            return NULL;
        }
        Entry *e = (Entry *)item;
        Py_INCREF(e);
        int kept = PySet_Contains(keep, e->out_uid);
        PyObject *g = kept < 0 ? NULL : PyDict_GetItemWithError(grads, e->out_uid);
        Py_XINCREF(g);
        if (g == NULL && PyErr_Occurred()) {
            Py_DECREF(e);
            return NULL;
        }
        if (g != NULL && !kept && PyDict_DelItem(grads, e->out_uid) < 0) {
            Py_DECREF(g);
            Py_DECREF(e);
            return NULL;
        }
        int r = 0;
        if (g != NULL && g != Py_None)
            r = step_entry(e, g, grads, reach, key, xp, batched, release, in_place, restore,
                           build_step, sum_to);
        Py_XDECREF(g);
        Py_DECREF(e);
        if (r < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

/* -- module ----------------------------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"sweep_arrays", (PyCFunction)(void (*)(void))sweep_arrays, METH_FASTCALL,
     "The loop of sweep._sweep_arrays when nothing watches the sweep."},
    {"apply1", (PyCFunction)(void (*)(void))apply1, METH_FASTCALL,
     "registry.apply1(op, x, params), compiled."},
    {"apply2", (PyCFunction)(void (*)(void))apply2, METH_FASTCALL,
     "registry.apply2(op, x, y, params), compiled."},
    {"next_uid", next_uid, METH_NOARGS, "A new tensor or variable id (never reused)."},
    {"configure_apply", configure_apply, METH_VARARGS,
     "configure_apply(Tensor, Op, tensor._thread, profilers, _raise_error, _with_residuals, "
     "_check_inputs, _count_launch, on_forward, SAVE_X, SAVE_OUT, SAVE_XY): registry's "
     "objects."},
    {"configure_tensor", configure_tensor, METH_O,
     "configure_tensor(current): the device of a tensor made without one."},
    {NULL}
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "tapegpu._core",
    "The compiled form of the tape's per-op bookkeeping (see tape.py and sweep.py).", -1,
    module_methods,
};

#define INTERN(var, s) if ((var = PyUnicode_InternFromString(s)) == NULL) return NULL

PyMODINIT_FUNC PyInit__core(void)
{
    INTERN(S_dev, "_dev"); INTERN(S_name, "name"); INTERN(S_xp, "xp");
    INTERN(S_counts_launches, "counts_launches"); INTERN(S_kind, "kind");
    INTERN(S_record, "record"); INTERN(S_fast, "fast"); INTERN(S_recorders, "recorders");
    for (int f = 0; f < N_FIELDS; f++)
        INTERN(op_field_strs[f], op_field_names[f]);
    INTERN(S_uid, "_uid"); INTERN(S_data, "_data"); INTERN(S_shape, "shape");
    INTERN(S_saved_values, "saved_values");
    INTERN(S_on_record, "on_record"); INTERN(S_base, "base");
    INTERN(S_flags, "flags"); INTERN(S_writeable, "writeable"); INTERN(S_dtype, "dtype");
    if (PyType_Ready(&TensorBaseType) < 0 || PyType_Ready(&EntryType) < 0 ||
        PyType_Ready(&RecorderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "TensorBase", (PyObject *)&TensorBaseType) < 0 ||
        PyModule_AddObjectRef(m, "Entry", (PyObject *)&EntryType) < 0 ||
        PyModule_AddObjectRef(m, "Recorder", (PyObject *)&RecorderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
