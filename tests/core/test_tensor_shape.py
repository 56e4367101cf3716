"""tg.TensorShape: TensorFlow's methods, and everything tuples do (Tensor.shape is one)."""
import pickle

import numpy as np
import pytest

import tapegpu as tg


def test_tensor_shape_is_a_tensorshape_that_acts_as_a_tuple():
    x = tg.zeros((2, 3))
    s = x.shape
    assert isinstance(s, tg.TensorShape) and isinstance(s, tuple)
    assert s == (2, 3) and s == [2, 3] and s != (3, 2) and s != [2, 3, 1]
    assert s.as_list() == [2, 3] and s.rank == 2 and s.ndims == 2 and s.num_elements() == 6
    assert s[-1] == 3 and isinstance(s[-1], int)
    assert s[1:] == (3,) and isinstance(s[1:], tg.TensorShape)
    assert s + (4,) == (2, 3, 4) and type(s + (4,)) is tuple  # as a tuple would
    assert (1,) + s == (1, 2, 3) and type((1,) + s) is tuple
    assert isinstance(s + [4], tg.TensorShape) and s + [4] == [2, 3, 4]
    assert np.zeros(s).shape == (2, 3) and tg.zeros(s).shape == (2, 3)
    assert {s: 1}[(2, 3)] == 1 and hash(s) == hash((2, 3))
    assert f"{s}" == "(2, 3)" and repr(tg.zeros(()).shape) == "()"
    assert tg.Variable([1.0, 2.0]).shape.as_list() == [2]
    assert pickle.loads(pickle.dumps(s)) == s


def test_unknown_dimensions_and_rank():
    s = tg.TensorShape([None, 3])
    assert s.as_list() == [None, 3] and not s.is_fully_defined() and s.num_elements() is None
    assert s.is_compatible_with([5, 3]) and not s.is_compatible_with([5, 4])
    assert not s.is_compatible_with([5, 3, 1])
    assert s.merge_with([7, None]) == (7, 3)
    with pytest.raises(ValueError, match="not compatible"):
        s.merge_with([1, 2])
    u = tg.TensorShape(None)
    assert u.rank is None and u.dims is None and not u.is_fully_defined()
    assert u == tg.TensorShape(None) and u != tg.TensorShape([]) and tg.TensorShape([]) != u
    with pytest.raises(ValueError, match="unknown TensorShape"):
        u.as_list()
    with pytest.raises(ValueError, match="unknown rank"):
        len(u)
    assert u.merge_with([1, 2]) == [1, 2] and s.merge_with(u) == s
    assert u.is_compatible_with([4]) and s.is_compatible_with(u)
    assert s.concatenate([4]) == [None, 3, 4] and s.concatenate(u).rank is None
    assert s.most_specific_compatible_shape([4, 3]) == [None, 3]
    assert s.most_specific_compatible_shape([4]).rank is None
    assert u.with_rank(2) == [None, None]
    assert pickle.loads(pickle.dumps(u)).rank is None


def test_rank_checks_and_bad_dimensions():
    s = tg.TensorShape([2, 3])
    assert s.with_rank(2) == s and s.with_rank_at_least(1) == s and s.with_rank_at_most(2) == s
    with pytest.raises(ValueError, match="rank"):
        s.with_rank(3)
    with pytest.raises(ValueError, match="rank at least 3"):
        s.with_rank_at_least(3)
    with pytest.raises(ValueError, match="must have rank 1"):
        s.assert_has_rank(1)
    with pytest.raises(ValueError, match="incompatible"):
        s.assert_is_compatible_with([3, 2])
    with pytest.raises(TypeError, match="dimension"):
        tg.TensorShape([2, -1])
    with pytest.raises(TypeError, match="dimension"):
        tg.TensorShape([2.5])
    assert tg.TensorShape(np.array([2, 3])) == (2, 3)


def test_get_shape_is_the_shape():
    assert tg.zeros((2, 3)).get_shape().as_list() == [2, 3]
    assert tg.Variable(tg.zeros((4,))).get_shape() == [4]
