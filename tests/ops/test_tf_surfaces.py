"""Small TensorFlow surfaces: tg.roll (TF's documented examples and definition), tg.newaxis and
tg.errors (TF's classes, codes and constructors)."""
import itertools
import pickle

import numpy as np
import pytest

import tapegpu as tg


def _roll_reference(x, shifts, axes):
    """tf.roll's definition, one element at a time: the element at index i moves to index
    (i + shift) mod n along each rolled axis (repeated axes add their shifts)."""
    x = np.asarray(x)
    out = np.empty_like(x)
    for idx in itertools.product(*[range(n) for n in x.shape]):
        dst = list(idx)
        for s, a in zip(shifts, axes):
            a %= x.ndim
            dst[a] = (dst[a] + s) % x.shape[a]
        out[tuple(dst)] = x[idx]
    return out


def test_roll_tf_documented_examples():
    assert tg.roll([0, 1, 2, 3, 4], shift=2, axis=0).numpy().tolist() == [3, 4, 0, 1, 2]
    t = [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert tg.roll(t, shift=[1, -2], axis=[0, 1]).numpy().tolist() == \
        [[7, 8, 9, 5, 6], [2, 3, 4, 0, 1]]
    assert tg.roll(t, shift=[2, -3], axis=[1, 1]).numpy().tolist() == \
        [[1, 2, 3, 4, 0], [6, 7, 8, 9, 5]]


@pytest.mark.parametrize("shifts,axes", [([1], [0]), ([-7], [2]), ([3, 1], [0, -1]),
                                         ([2, 5, -1], [1, 1, 0]), ([4], [1]), ([0], [0])])
def test_roll_matches_the_definition(shifts, axes):
    x = np.arange(3 * 4 * 2, dtype=np.float64).reshape(3, 4, 2)
    got = tg.roll(tg.constant(x), shift=shifts, axis=axes)
    np.testing.assert_array_equal(got.numpy(), _roll_reference(x, shifts, axes))
    assert got.dtype == tg.float64


def test_roll_gradient_rolls_back():
    """The VJP of a roll is the opposite roll: d/dx sum(w * roll(x)) = roll(w, -shift)."""
    x = tg.constant(np.arange(12.0).reshape(3, 4))
    w = np.arange(12.0).reshape(3, 4) ** 2
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.reduce_sum(tg.roll(x, shift=[1, 3], axis=[0, 1]) * w)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(),
                                  _roll_reference(w, [-1, -3], [0, 1]))


def test_roll_empty_and_identity_shifts():
    e = tg.zeros((0, 3))
    assert tg.roll(e, 2, 0).shape == (0, 3)
    assert tg.roll(e, 2, 1).shape == (0, 3)
    x = tg.constant([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(tg.roll(x, 3, 0).numpy(), [1.0, 2.0, 3.0])
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.reduce_sum(tg.roll(x, 6, 0) * tg.constant([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [1.0, 2.0, 3.0])


def test_roll_errors():
    with pytest.raises(tg.InvalidArgumentError, match="roll: axis 1 is out of range"):
        tg.roll(tg.zeros(3), 1, 1)
    with pytest.raises(tg.InvalidArgumentError, match="roll: axis 0 is out of range"):
        tg.roll(tg.constant(1.0), 1, 0)
    with pytest.raises(tg.InvalidArgumentError, match="same length"):
        tg.roll(tg.zeros((2, 2)), [1, 2], [0])
    with pytest.raises(tg.InvalidArgumentError, match="same length"):
        tg.roll(tg.zeros((2, 2)), 1, [0])
    with pytest.raises(tg.InvalidArgumentError, match="shift must be an int"):
        tg.roll(tg.zeros(2), 1.5, 0)


def test_newaxis_inserts_an_axis():
    x = tg.constant([1.0, 2.0, 3.0])
    assert tg.newaxis is None
    assert x[:, tg.newaxis].shape == (3, 1)
    assert x[tg.newaxis, :, tg.newaxis].shape == (1, 3, 1)


TF_CODES = {"CancelledError": 1, "UnknownError": 2, "DeadlineExceededError": 4,
            "NotFoundError": 5, "AlreadyExistsError": 6, "PermissionDeniedError": 7,
            "UnauthenticatedError": 16, "ResourceExhaustedError": 8,
            "FailedPreconditionError": 9, "AbortedError": 10, "OutOfRangeError": 11,
            "UnimplementedError": 12, "InternalError": 13, "UnavailableError": 14,
            "DataLossError": 15}


def test_errors_namespace_has_tf_classes_and_codes():
    assert tg.errors.InvalidArgumentError is tg.InvalidArgumentError
    assert tg.errors.INVALID_ARGUMENT == 3 and tg.errors.OK == 0
    for name, code in TF_CODES.items():
        cls = getattr(tg.errors, name)
        assert issubclass(cls, tg.errors.OpError) and cls.error_code == code, name
        const = "".join("_" + c if c.isupper() else c for c in name[:-len("Error")]).upper()
        assert getattr(tg.errors, const.lstrip("_")) == code, name


def test_errors_constructors_and_fields():
    e = tg.errors.OutOfRangeError(None, None, "End of sequence")
    assert (e.node_def, e.op, e.message, e.error_code, str(e)) == \
        (None, None, "End of sequence", 11, "End of sequence")
    e = tg.errors.NotFoundError("no file")
    assert e.message == "no file" and e.error_code == 5
    e = tg.errors.OpError(None, "op", "failed", tg.errors.UNAVAILABLE)
    assert e.error_code == 14 and e.op == "op"
    back = pickle.loads(pickle.dumps(tg.errors.ResourceExhaustedError(None, None, "OOM")))
    assert type(back) is tg.errors.ResourceExhaustedError and back.message == "OOM"
    with pytest.raises(TypeError, match="a message is required"):
        tg.errors.NotFoundError(None, None)
    with pytest.raises(tg.errors.OpError):
        raise tg.errors.UnimplementedError("not here")


def test_op_errors_are_caught_as_tf_errors():
    with pytest.raises(tg.errors.InvalidArgumentError, match="reshape"):
        tg.reshape(tg.zeros(6), (4, 2))
    # as in TF, an op's InvalidArgumentError is an OpError with code 3 (and a ValueError here)
    with pytest.raises(tg.errors.OpError) as info:
        tg.reshape(tg.zeros(6), (4, 2))
    assert info.value.error_code == tg.errors.INVALID_ARGUMENT and \
        isinstance(info.value, ValueError)
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is tg.InvalidArgumentError and back.message == info.value.message


def test_shapes_take_integer_scalar_tensors_as_sizes():
    """tf.data's guide: `tf.fill([tf.cast(x, tf.int32)], x)`; a float tensor is no size."""
    import numpy as np
    n = tg.constant(3)
    assert tg.fill([n], 7).numpy().tolist() == [7, 7, 7]
    assert tg.zeros([n, tg.constant(2, dtype=tg.int64)]).shape == (3, 2)
    with pytest.raises(TypeError, match="fill: shape must be an int or a sequence of ints"):
        tg.fill([tg.constant(2.0)], 1.0)
    with pytest.raises(TypeError, match="fill"):
        tg.fill([tg.constant(np.array([1, 2]))], 1.0)  # a vector inside the list: no size
