"""tg.experimental.ExtensionType, type_spec_from_value and the dispatch decorators, against
TF's guide "Extension types" (its MaskedTensor examples)."""
from typing import Mapping, Optional, Tuple

import numpy as np
import pytest

import tapegpu as tg


class MaskedTensor(tg.experimental.ExtensionType):
    values: tg.Tensor
    mask: tg.Tensor

    def __validate__(self):
        if tuple(self.values.shape) != tuple(self.mask.shape):
            raise ValueError("values and mask must have the same shape")

    @property
    def shape(self):
        return self.values.shape


def test_fields_are_converted_typed_and_immutable():
    mt = MaskedTensor(values=[[1, 2, 3], [4, 5, 6]], mask=[[True, True, False]] * 2)
    assert isinstance(mt.values, tg.Tensor) and mt.values.dtype == tg.int32
    assert mt.mask.dtype == tg.bool and mt.shape == (2, 3)
    with pytest.raises(AttributeError, match="Cannot mutate attribute `values`"):
        mt.values = tg.constant(1)
    with pytest.raises(ValueError, match="same shape"):
        MaskedTensor([1, 2], [True])
    with pytest.raises(TypeError, match="missing a required argument: 'mask'"):
        MaskedTensor([1])
    assert repr(mt).startswith("MaskedTensor(values=")


def test_python_fields_defaults_tuples_mappings():
    class Record(tg.experimental.ExtensionType):
        name: str
        dims: Tuple[int, ...]
        weights: Mapping[str, float] = {}
        extra: Optional[int] = None
        other: int | None = None

    r = Record("a", [1, 2], {"w": 1})
    assert r.dims == (1, 2) and r.weights["w"] == 1.0 and isinstance(r.weights["w"], float)
    assert r.extra is None and Record("b", (), other=3).other == 3
    with pytest.raises(TypeError, match=r"Record.name: expected str, got 3"):
        Record(3, [1])
    with pytest.raises(TypeError, match=r"Record.dims\[0\]: expected int"):
        Record("a", [1.5])
    with pytest.raises(TypeError):
        r.weights["w"] = 2.0  # an immutable mapping
    with pytest.raises(TypeError, match="unsupported type annotation"):
        class Bad(tg.experimental.ExtensionType):
            x: set[int]


def test_custom_constructor_runs_then_freezes():
    class Scaled(tg.experimental.ExtensionType):
        x: tg.Tensor

        def __init__(self, a, factor):
            self.x = tg.constant(a) * factor

    s = Scaled([1.0, 2.0], 3.0)
    np.testing.assert_array_equal(s.x.numpy(), [3.0, 6.0])
    with pytest.raises(AttributeError):
        s.x = 1


def test_equality_spec_and_type_spec_from_value():
    a = MaskedTensor([1, 2], [True, False])
    assert bool(a == MaskedTensor([1, 2], [True, False]))
    assert not bool(a == MaskedTensor([1, 3], [True, False]))
    assert bool(a != MaskedTensor([1, 3], [True, False]))
    assert (a == MaskedTensor([1, 2, 3], [True, False, True])) is False  # another spec
    spec = tg.type_spec_from_value(a)
    assert isinstance(spec, MaskedTensor.Spec) and spec.value_type is MaskedTensor
    assert spec.values == tg.TensorSpec((2,), tg.int32)
    assert spec == tg.type_spec_from_value(MaskedTensor([5, 6], [False, False]))
    assert tg.type_spec_from_value(np.zeros((2, 3), np.float32)) == \
        tg.TensorSpec((2, 3), tg.float32)
    with pytest.raises(TypeError, match="Could not build a TypeSpec"):
        tg.type_spec_from_value(object())


def test_values_pass_through_tg_function():
    @tg.function
    def double(m):
        return MaskedTensor(m.values * 2, m.mask)

    out = double(MaskedTensor([1, 2], [True, False]))
    out = double(MaskedTensor([3, 4], [False, False]))
    assert isinstance(out, MaskedTensor)
    np.testing.assert_array_equal(out.values.numpy(), [6, 8])
    np.testing.assert_array_equal(out.mask.numpy(), [False, False])
    assert double.experimental_get_tracing_count() == 1


def test_dispatch_for_api_and_unregister():
    @tg.experimental.dispatch_for_api(tg.math.reduce_sum, {"input_tensor": MaskedTensor})
    def masked_sum(input_tensor, axis=None, keepdims=False, name=None):
        return tg.math.reduce_sum(tg.where(input_tensor.mask, input_tensor.values, 0), axis,
                                  keepdims)

    try:
        mt = MaskedTensor([1, 2, 3], [True, False, True])
        assert int(tg.math.reduce_sum(mt)) == 4
        assert int(tg.reduce_sum(mt)) == 4
        assert int(tg.math.reduce_sum(tg.constant([1, 2]))) == 3  # ordinary calls unchanged
    finally:
        tg.experimental.unregister_dispatch_for(masked_sum)
    assert not hasattr(tg.math.reduce_sum, "_tg_dispatch_original")
    with pytest.raises(ValueError, match="was not registered"):
        tg.experimental.unregister_dispatch_for(masked_sum)
    with pytest.raises(ValueError, match="has no parameter 'nope'"):
        tg.experimental.dispatch_for_api(tg.math.add, {"nope": MaskedTensor})(lambda: 0)


def test_elementwise_dispatch():
    @tg.experimental.dispatch_for_unary_elementwise_apis(MaskedTensor)
    def unary(api_func, x):
        return MaskedTensor(api_func(x.values), x.mask)

    @tg.experimental.dispatch_for_binary_elementwise_apis(MaskedTensor, MaskedTensor)
    def binary(api_func, x, y):
        return MaskedTensor(api_func(x.values, y.values), x.mask & y.mask)

    try:
        mt = MaskedTensor([-1.0, 4.0], [True, False])
        np.testing.assert_array_equal(tg.abs(mt).values.numpy(), [1.0, 4.0])
        np.testing.assert_array_equal(tg.math.sqrt(tg.abs(mt)).values.numpy(), [1.0, 2.0])
        assert tg.cast(mt, tg.int32).values.dtype == tg.int32  # extra arguments kept
        s = tg.math.add(mt, MaskedTensor([1.0, 1.0], [True, True]))
        np.testing.assert_array_equal(s.values.numpy(), [0.0, 5.0])
        np.testing.assert_array_equal(s.mask.numpy(), [True, False])
        np.testing.assert_array_equal(tg.maximum(mt, mt).values.numpy(), [-1.0, 4.0])
    finally:
        tg.experimental.unregister_dispatch_for(unary)
        tg.experimental.unregister_dispatch_for(binary)
    assert float(tg.abs(tg.constant(-2.0))) == 2.0
    assert not hasattr(tg.abs, "_tg_dispatch_original")
