"""TensorFlow semantics of tensors, variables, conversion, device scopes, DLPack and nest."""
import collections
import copy
import pickle
import threading

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.core import nest


# -- copies of variables ----------------------------------------------------------------------

def test_copied_variables_are_new_variables_for_tapes():
    v = tg.Variable([1.0, 2.0], name="w")
    shallow, deep = copy.copy(v), copy.deepcopy(v)
    assert len({v._uid, shallow._uid, deep._uid}) == 3
    for c in (shallow, deep):
        assert type(c) is tg.Variable and c.name == "w" and c.trainable is True
        np.testing.assert_array_equal(c.numpy(), v.numpy())
    with tg.GradientTape() as tape:
        y = tg.reduce_sum(v * v) + tg.reduce_sum(3.0 * deep)
    gv, gs, gd = tape.gradient(y, [v, shallow, deep])
    assert copy.deepcopy(tg.Variable(1.0, trainable=False)).trainable is False
    np.testing.assert_array_equal(gv.numpy(), [2.0, 4.0])  # nothing of the copy's mixed in
    assert gs is None
    np.testing.assert_array_equal(gd.numpy(), [3.0, 3.0])


def test_deepcopy_copies_the_value_and_keeps_sharing_within_a_structure():
    v = tg.Variable([1.0, 2.0])
    model = {"a": v, "b": [v]}
    c = copy.deepcopy(model)
    assert c["a"] is c["b"][0] and c["a"] is not v
    assert c["a"]._value._data is not v._value._data
    c["a"].assign([5.0, 6.0])
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    s = copy.copy(v)
    s.assign_add([1.0, 1.0])
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])


def test_pickled_variable_round_trips_as_a_new_variable():
    v = tg.Variable(np.array([[1.5, -2.0]], np.float64), name="kernel", trainable=False)
    p = pickle.loads(pickle.dumps(v))
    assert p._uid != v._uid
    assert (p.name, p.trainable, p.dtype, p.shape) == ("kernel", False, tg.float64, (1, 2))
    np.testing.assert_array_equal(p.numpy(), v.numpy())
    with tg.GradientTape() as tape:
        y = tg.reduce_sum(v * 2.0)
    assert tape.gradient(y, p) is None


# -- None is not a number -----------------------------------------------------------------------

NONE = r"Attempt to convert a value \(None\) with an unsupported type"


@pytest.mark.parametrize("make, fn", [
    (lambda: tg.constant([1.0]) + None, "add"),
    (lambda: None * tg.constant([1.0]), "multiply"),
    (lambda: tg.constant(None, tg.float32), "constant"),
    (lambda: tg.constant([1.0, None]), "constant"),
    (lambda: tg.constant([[1.0], [None]], tg.float32), "constant"),
    (lambda: tg.convert_to_tensor(None), "convert_to_tensor"),
    (lambda: tg.convert_to_tensor(None, dtype_hint=tg.float32), "convert_to_tensor"),
    (lambda: tg.Variable(None), "Variable"),
    (lambda: tg.Variable(1.0).assign(None), "Variable.assign"),
    (lambda: tg.Variable([1.0, 2.0]).assign([1.0, None]), "Variable.assign"),
], ids=["add", "rmul", "constant", "list", "nested_list", "convert", "convert_hint",
        "variable", "assign", "assign_list"])
def test_none_raises_value_error_as_tensorflow(make, fn):
    with pytest.raises(ValueError, match=f"^{fn}: {NONE}"):
        make()


# -- conversion --------------------------------------------------------------------------------

def test_object_arrays_and_non_numeric_values_are_refused():
    with pytest.raises(TypeError, match="^constant: numpy dtype object is not supported"):
        tg.constant(np.array([1.0, 2.0], dtype=object))
    assert tg.convert_to_tensor(np.array(["a"])).dtype == tg.string  # text: tg.string
    with pytest.raises(TypeError, match="^constant: cannot convert"):
        tg.constant([1.0, "a"])
    with pytest.raises(ValueError, match="^constant: cannot convert"):
        tg.constant([[1.0], [2.0, 3.0]])  # ragged


def test_python_ints_beyond_int32_become_int64_as_tensorflow():
    t = tg.constant(2 ** 40)
    assert t.dtype == tg.int64 and int(t) == 2 ** 40
    assert tg.constant(-2 ** 31).dtype == tg.int32
    assert tg.constant([1, 2 ** 40]).dtype == tg.int64
    with pytest.raises(TypeError, match="^constant: cannot convert 1099511627776 to dtype int32"):
        tg.constant(2 ** 40, tg.int32)
    with pytest.raises(ValueError, match="^constant: the Python int 2361183241434822606848 does "
                                         "not fit int64"):
        tg.constant(2 ** 71)


def test_python_int_out_of_a_tensors_range_raises_type_error():
    u = tg.constant(np.uint8(3))
    with pytest.raises(TypeError, match=r"Python int -1 with a tensor of dtype uint8: out of its "
                                        r"range \[0, 255\]"):
        u + (-1)
    with pytest.raises(TypeError, match="Python int 300 with a tensor of dtype uint8"):
        u * 300
    assert int(u + 2) == 5 and (u + 2).dtype == tg.uint8


def test_constant_and_variable_do_not_alias_the_callers_array():
    a = np.array([1.0, 2.0])
    c, v = tg.constant(a), tg.Variable(a)
    w = tg.Variable([0.0, 0.0], dtype=tg.float64)
    w.assign(a)
    a[0] = 9.0
    for t in (c, v, w):
        np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])


# -- immutability ------------------------------------------------------------------------------

def _saved_on_tape_stays(mutate):
    x = tg.constant([1.0, 2.0, 3.0], tg.float64)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.reduce_sum(x * x)
    try:
        mutate(x)
    except (ValueError, BufferError, TypeError, RuntimeError):  # numpy < 2.5: RuntimeError for a
        pass  # DLPack device it cannot read
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [2.0, 4.0, 6.0])


def test_np_asarray_of_a_tensor_cannot_be_made_writable():
    x = tg.constant([1.0, 2.0])
    a = np.asarray(x)
    assert not a.flags.writeable
    with pytest.raises(ValueError, match="cannot set WRITEABLE flag"):
        a.setflags(write=True)

    def mutate(t):
        arr = np.asarray(t)
        arr.setflags(write=True)
        arr[:] = 0.0
    _saved_on_tape_stays(mutate)
    v = tg.Variable([1.0, 2.0])
    with pytest.raises(ValueError, match="cannot set WRITEABLE flag"):
        np.asarray(v).setflags(write=True)


def test_dlpack_exports_cannot_write_into_a_tensor():
    x = tg.constant([1.0, 2.0])
    if "GPU" in x.device:
        # numpy reads host buffers only, and asks the producer for its own device
        # (dl_device=None): a GPU tensor exports its CUDA buffer, which numpy refuses (a
        # BufferError from numpy 2.5, a RuntimeError before); asked for the CPU, CuPy exports
        # a host copy, which numpy may write
        with pytest.raises((BufferError, RuntimeError), match="Unsupported device"):
            np.from_dlpack(x)
        a = np.from_dlpack(x, device="cpu")
        a[:] = 0.0
        np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
        _saved_on_tape_stays(lambda t: np.from_dlpack(t, device="cpu").__setitem__(..., 0.0))
    else:
        a = np.from_dlpack(x)  # DLPack 1.0: a read-only view
        np.testing.assert_array_equal(a, [1.0, 2.0])
        assert not a.flags.writeable
        with pytest.raises(ValueError, match="cannot set WRITEABLE flag"):
            a.setflags(write=True)

    def mutate(t):
        b = np.from_dlpack(t)
        b.setflags(write=True)
        b[:] = 0.0
    _saved_on_tape_stays(mutate)

    def mutate_legacy(t):  # an unversioned consumer gets a copy
        class Legacy:
            def __dlpack__(self, **kwargs):
                return t.__dlpack__()

            def __dlpack_device__(self):
                return t.__dlpack_device__()
        np.from_dlpack(Legacy())[:] = 0.0
    _saved_on_tape_stays(mutate_legacy)

    def mutate_capsule(t):
        cap = tg.experimental.dlpack.to_dlpack(t)
        tg.from_dlpack(cap)  # and a capsule imports (as a copy)
    _saved_on_tape_stays(mutate_capsule)
    y = tg.from_dlpack(tg.experimental.dlpack.to_dlpack(x))
    np.testing.assert_array_equal(y.numpy(), [1.0, 2.0])


def test_from_dlpack_refuses_non_producers():
    with pytest.raises(TypeError, match="^from_dlpack: expected a DLPack producer .* got list"):
        tg.from_dlpack([1, 2])


# -- device scopes are per thread --------------------------------------------------------------

def test_device_scope_applies_to_its_own_thread_only():
    entered, checked, exited = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def scoped():
        with tg.device("cuda_emu"):
            seen["inside"] = tg.zeros(1).device
            entered.set()
            checked.wait(10)
        seen["after"] = tg.zeros(1).device
        exited.set()

    def plain():
        seen["other_thread"] = tg.zeros(1).device

    here = tg.zeros(1).device
    a = threading.Thread(target=scoped)
    a.start()
    assert entered.wait(10)
    seen["main_during"] = tg.zeros(1).device
    b = threading.Thread(target=plain)
    b.start()
    b.join(10)
    with tg.device("cpu"):
        checked.set()  # the other thread leaves its block while this one is inside its own
        assert exited.wait(10)
        seen["main_inner"] = tg.zeros(1).device
    a.join(10)
    assert seen["inside"].endswith("CUDA_EMU:0")
    assert seen["main_during"] == here
    assert seen["other_thread"] == tg.config.default_device()
    assert seen["after"] == tg.config.default_device()
    assert seen["main_inner"].endswith("CPU:0")
    assert tg.zeros(1).device == here


def test_device_decorator_is_reentrant_across_threads():
    @tg.device("cuda_emu")
    def make(barrier):
        barrier.wait(10)
        return tg.zeros(1).device

    barrier = threading.Barrier(2)
    out = []
    threads = [threading.Thread(target=lambda: out.append(make(barrier))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(out) == 2 and all(d.endswith("CUDA_EMU:0") for d in out)


# -- nest ----------------------------------------------------------------------------------------

def test_nest_keeps_defaultdicts():
    d = collections.defaultdict(list, {"b": 2, "a": 1})
    assert nest.flatten(d) == [1, 2]
    packed = nest.pack_sequence_as(d, [10, 20])
    assert type(packed) is collections.defaultdict and packed.default_factory is list
    assert dict(packed) == {"b": 20, "a": 10} and list(packed) == ["b", "a"]
    nested = nest.map_structure(lambda x: x * 2, {"x": collections.defaultdict(int, {"k": 3})})
    assert nested["x"].default_factory is int and nested["x"]["k"] == 6


def test_format_of_scalar_tensors_as_tensorflow():
    loss = tg.constant(0.123456)
    assert f"{loss:.3f}" == "0.123" and f"{tg.constant(7, tg.int32):>3d}" == "  7"
    assert f"{loss}" == str(loss)
    with pytest.raises(TypeError):
        f"{tg.constant([1.0, 2.0]):.2f}"
