"""tg.function's tracing rules, with the retracing counts of TensorFlow's tf.function guide."""
import sys

import pytest

import tapegpu as tg


def test_python_scalars_retrace_per_value_tensors_per_shape_and_dtype():
    @tg.function
    def double(a):
        return a + a

    double(tg.constant(1))
    double(tg.constant(1.1))
    double(tg.constant("a") if False else tg.constant([1, 2]))
    assert double.experimental_get_tracing_count() == 3
    double(tg.constant(7))  # same shape and dtype as the first call: no trace
    assert double.experimental_get_tracing_count() == 3
    double(2)
    double(3)
    double(2)
    assert double.experimental_get_tracing_count() == 5  # one trace per Python value


def test_decorator_with_arguments_and_kwargs_and_nested_arguments():
    @tg.function()
    def f(xs, scale=2.0):
        return [x * scale for x in xs["a"]], xs["b"] + 1.0

    a = [tg.constant([1.0]), tg.constant([2.0])]
    out = f({"a": a, "b": tg.constant(0.5)})
    assert [float(o[0]) for o in out[0]] == [2.0, 4.0] and float(out[1]) == 1.5
    out = f({"a": [tg.constant([3.0]), tg.constant([4.0])], "b": tg.constant(1.5)})
    assert [float(o[0]) for o in out[0]] == [6.0, 8.0] and float(out[1]) == 2.5
    assert f.experimental_get_tracing_count() == 1
    f({"a": a, "b": tg.constant(0.5)}, scale=3.0)
    assert f.experimental_get_tracing_count() == 2


def test_input_signature_with_none_dims_traces_once_and_rejects_other_inputs():
    @tg.function(input_signature=[tg.TensorSpec([None], tg.int32)])
    def next_collatz(x):
        return tg.where(x % 2 == 0, x // 2, 3 * x + 1)

    assert next_collatz(tg.constant([1, 2])).numpy().tolist() == [4, 1]
    assert next_collatz(tg.constant([1, 2, 3, 4])).numpy().tolist() == [4, 1, 10, 2]
    assert next_collatz.experimental_get_tracing_count() == 1
    with pytest.raises(TypeError):
        next_collatz(tg.constant([[1, 2], [3, 4]]))  # wrong rank
    with pytest.raises(ValueError):
        next_collatz(tg.constant([1.0, 2.0]))  # wrong dtype
    with pytest.raises(TypeError, match="next_collatz"):
        next_collatz(tg.constant([1]), tg.constant([2]))


def test_reduce_retracing_generalizes_the_differing_dimension():
    @tg.function(reduce_retracing=True)
    def g(x):
        return x * 2

    for n in (1, 2, 3, 4):
        assert g(tg.ones((n,))).numpy().tolist() == [2.0] * n
    assert g.experimental_get_tracing_count() == 2  # (1,), then (None,)
    g(tg.ones((2, 2)))  # another rank: a new trace
    assert g.experimental_get_tracing_count() == 3
    assert "shape=(None,)" in g.pretty_printed_concrete_signatures()


def test_python_side_effects_at_trace_time_only_and_tg_print_every_call(capsys):
    seen = []

    @tg.function
    def f(x):
        print("traced")
        seen.append(1)
        tg.print("value:", x, output_stream=sys.stdout)
        return x + 1

    for v in (1.0, 2.0, 3.0):
        f(tg.constant(v))
    out = capsys.readouterr().out
    assert out.count("traced") == 1 and len(seen) == 1
    assert out.count("value:") == 3 and "value: 3.0" in out


def test_variables_may_be_created_on_the_first_trace_only():
    class Counter:
        def __init__(self):
            self.v = None

        @tg.function
        def __call__(self, x):
            if self.v is None:
                self.v = tg.Variable(1.0)
            return self.v * x

    c = Counter()
    assert float(c(tg.constant(2.0))) == 2.0
    assert float(c(tg.constant(3.0))) == 3.0
    c(tg.constant([1.0, 2.0]))  # a retrace that creates nothing is fine

    @tg.function
    def f(x):
        v = tg.Variable(1.0)
        return v + x

    f(tg.constant(1.0))
    with pytest.raises(ValueError, match="only supports singleton tg.Variables created on the "
                                         "first call"):
        f(tg.constant([1.0]))


def test_methods_have_a_cache_per_instance():
    class M:
        def __init__(self, k):
            self.k = k

        @tg.function
        def f(self, x):
            return x * self.k

    a, b = M(2.0), M(3.0)
    assert float(a.f(tg.constant(1.0))) == 2.0
    assert float(b.f(tg.constant(1.0))) == 3.0
    assert float(a.f(tg.constant(2.0))) == 4.0
    assert a.f.experimental_get_tracing_count() == 1
    assert b.f.experimental_get_tracing_count() == 1


def test_get_concrete_function_and_signatures():
    @tg.function
    def f(x, n):
        return x * n

    cf = f.get_concrete_function(tg.constant([1.0, 2.0]), 3)
    args, kwargs = cf.structured_input_signature
    assert args == (tg.TensorSpec([2], tg.float32), 3) and kwargs == {}
    assert "multiply" in str(cf.graph)
    assert cf(tg.constant([2.0, 3.0]), 3).numpy().tolist() == [6.0, 9.0]
    assert "x: float32 Tensor, shape=(2,)" in f.pretty_printed_concrete_signatures()
    assert f.experimental_get_tracing_count() == 1


def test_python_conditions_on_tensor_values_are_guards():
    @tg.function
    def f(x):
        if tg.reduce_sum(x) > 0:
            return x * 2.0
        return x - 1.0

    assert f(tg.constant([1.0])).numpy().tolist() == [2.0]
    assert f(tg.constant([2.0])).numpy().tolist() == [4.0]  # the guard holds: replay
    assert f.experimental_get_tracing_count() == 1
    assert f(tg.constant([-1.0])).numpy().tolist() == [-2.0]  # guard fails: a retrace
    assert f.experimental_get_tracing_count() == 2
    assert f(tg.constant([-3.0])).numpy().tolist() == [-4.0]
    assert f(tg.constant([3.0])).numpy().tolist() == [6.0]
    assert f.experimental_get_tracing_count() == 2


def test_a_failed_guard_undoes_the_assignments_before_it():
    v = tg.Variable(0.0)

    @tg.function
    def f(x):
        v.assign_add(1.0)
        if x > 0:
            return v * 1.0
        return v * -1.0

    assert float(f(tg.constant(1.0))) == 1.0
    assert float(f(tg.constant(-1.0))) == -2.0  # guard failed after the assign: undone once
    assert float(v) == 2.0
    assert float(f(tg.constant(1.0))) == 3.0


def test_guards_are_refused_under_an_input_signature():
    @tg.function(input_signature=[tg.TensorSpec([], tg.float32)])
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(TypeError, match="input_signature"):
        f(tg.constant(1.0))


def test_init_scope_lifts_out_of_the_trace():
    calls = []

    @tg.function
    def f(x):
        with tg.init_scope():
            c = tg.constant(3.0) + 1.0
            calls.append(1)
        return x * c

    assert float(f(tg.constant(1.0))) == 4.0
    assert float(f(tg.constant(2.0))) == 8.0
    assert "add" not in str(f.get_concrete_function(tg.constant(1.0)).graph)


# -- the examples of TensorFlow's tf.function guide, with its counts --------------------------------

def test_tf_guide_double_traces_per_dtype_and_shape(capsys):
    @tg.function
    def double(a):
        print("Tracing with", a.dtype.name)
        return a + a

    double(tg.constant(1))
    double(tg.constant(1.1))
    double(tg.constant([1, 2]))
    double(tg.constant(2))  # int32 scalar again: reuses the first graph
    assert double.experimental_get_tracing_count() == 3
    assert capsys.readouterr().out.count("Tracing with") == 3


def test_tf_guide_python_side_effects_and_list_appends(capsys):
    @tg.function
    def f(x):
        print("Traced with", x)
        tg.print("Executed with", x, output_stream=sys.stdout)

    f(1)
    f(1)
    f(2)
    assert capsys.readouterr().out.splitlines() == [
        "Traced with 1", "Executed with 1", "Executed with 1", "Traced with 2",
        "Executed with 2"]

    external_list = []

    @tg.function
    def side_effect(x):
        external_list.append(x)

    for _ in range(3):
        side_effect(tg.constant(1))
    assert len(external_list) == 1


def test_tf_guide_python_arguments_retrace_tensor_arguments_do_not(capsys):
    @tg.function
    def train(num_steps):
        print("Tracing with num_steps =", num_steps)
        return tg.reduce_sum(tg.ones((3,)) * tg.cast(num_steps, tg.float32))

    train(num_steps=10)
    train(num_steps=20)
    assert train.experimental_get_tracing_count() == 2
    train(num_steps=tg.constant(10))
    train(num_steps=tg.constant(20))
    assert train.experimental_get_tracing_count() == 3
    assert float(train(num_steps=tg.constant(30))) == 90.0
    assert capsys.readouterr().out.count("Tracing with") == 3


def test_tf_guide_reduce_retracing_counts():
    @tg.function(reduce_retracing=True)
    def g(x):
        return x

    g(tg.constant([1, 2, 3]))  # traces
    g(tg.constant([1, 2, 3, 4, 5]))  # traces again, generalized to shape (None,)
    g(tg.constant([1, 2, 3, 4, 5, 6, 7]))  # no more tracing
    assert g(tg.constant(list(range(9)))).numpy().tolist() == list(range(9))
    assert g.experimental_get_tracing_count() == 2


def test_tf_guide_counter_module_creates_its_variable_once():
    class Count(tg.Module):
        def __init__(self):
            super().__init__()
            self.count = None

        @tg.function
        def __call__(self):
            if self.count is None:
                self.count = tg.Variable(0)
            return self.count.assign_add(1)

    c = Count()
    assert [int(c()) for _ in range(3)] == [1, 2, 3]
    assert c.__call__.experimental_get_tracing_count() == 1


# -- Python control flow on tensor values: the guard rule ------------------------------------------

def test_a_loop_whose_trip_count_is_a_tensor_retraces_per_count_and_warns():
    @tg.function
    def power(x, n):
        y = tg.ones_like(x)
        i = tg.constant(0)
        while i < n:  # a tensor condition: one guard per iteration
            y = y * x
            i = i + 1
        return y

    x = tg.constant([2.0])
    assert power(x, tg.constant(3)).numpy().tolist() == [8.0]
    assert power(x * 1.5, tg.constant(3)).numpy().tolist() == [27.0]  # same count: replay
    assert power.experimental_get_tracing_count() == 1
    for n in (1, 2, 4):
        assert power(x, tg.constant(n)).numpy().tolist() == [2.0 ** n]
    assert power.experimental_get_tracing_count() == 4  # TF's AutoGraph: 1 (see docs)
    with pytest.warns(UserWarning, match="power: 5 graphs for one input signature"):
        power(x, tg.constant(5))
    assert power(x, tg.constant(2)).numpy().tolist() == [4.0]  # every graph kept
    assert power.experimental_get_tracing_count() == 5


def test_conditions_on_python_values_and_constants_add_no_guard():
    @tg.function
    def f(x, flag):
        if flag:  # a Python argument: part of the trace's key
            x = x * 2.0
        if tg.constant(2) > 1:  # constants: folded
            x = x + 1.0
        return x

    assert float(f(tg.constant(1.0), True)) == 3.0
    assert float(f(tg.constant(1.0), False)) == 2.0
    for flag in (True, False):
        assert "guard" not in str(f.get_concrete_function(tg.constant(1.0), flag).graph)


def test_a_function_without_arguments_retraces_per_device_only():
    x = tg.constant([1.0, 2.0])

    @tg.function
    def f():
        return x * 2.0

    assert f().numpy().tolist() == [2.0, 4.0]
    assert f().numpy().tolist() == [2.0, 4.0]
    assert f.get_concrete_function() is f.get_concrete_function()
    assert f.experimental_get_tracing_count() == 1
    other = "cuda_emu" if tg.backends.current().name == "numpy" else "numpy"
    with tg.device(other):
        assert f().numpy().tolist() == [2.0, 4.0]
    assert f.experimental_get_tracing_count() == 2
    with pytest.raises(TypeError, match="f: too many positional arguments"):
        f(1)


def test_returned_python_numbers_and_arrays_are_tensors_as_tf():
    """TF's graphs guide: `simple_relu` returns 0 on one branch and the caller calls .numpy()
    on it. Numbers and numpy arrays come back as tensors (TF's dtypes for Python numbers),
    at the tracing call and at every replay; None and other objects as they are."""
    import numpy as np

    @tg.function
    def f(x):
        if x > 0:
            return x
        return 0

    assert f(tg.constant(-1)).numpy() == 0 and f(tg.constant(-1)).dtype == tg.int32
    assert f(tg.constant(3)).numpy() == 3

    @tg.function
    def g(x):
        return {"n": 1, "f": 2.5, "b": True, "np": np.float64(0.5), "arr": np.arange(3),
                "none": None, "s": "label", "x": x}

    for _ in range(2):  # the trace, then a replay
        out = g(tg.constant(1.0))
        assert {k: v.dtype for k, v in out.items() if isinstance(v, tg.Tensor)} == {
            "n": tg.int32, "f": tg.float32, "b": tg.bool, "np": tg.float64,
            "arr": tg.int64, "x": tg.float32}
        assert out["n"].numpy() == 1 and out["f"].numpy() == 2.5 and out["b"].numpy()
        assert out["none"] is None and out["s"] == "label"
    assert g.experimental_get_tracing_count() == 1


def test_run_functions_eagerly_runs_the_python_function_at_every_call(capsys):
    @tg.function
    def f(x):
        print("python ran")
        return x * 2.0

    class M(tg.Module):
        @tg.function
        def __call__(self, x):
            print("method ran")
            return x + 1.0

    m = M()
    try:
        tg.config.run_functions_eagerly(True)
        assert tg.config.functions_run_eagerly()
        assert [float(f(tg.constant(1.0))) for _ in range(3)] == [2.0] * 3
        assert [float(m(tg.constant(1.0))) for _ in range(2)] == [2.0] * 2
        assert capsys.readouterr().out == "python ran\n" * 3 + "method ran\n" * 2
        assert f.experimental_get_tracing_count() == 0
    finally:
        tg.config.run_functions_eagerly(False)
    assert not tg.config.functions_run_eagerly()
    f(tg.constant(1.0))
    f(tg.constant(1.0))
    assert capsys.readouterr().out == "python ran\n"  # traced once, replayed
    assert f.experimental_get_tracing_count() == 1
