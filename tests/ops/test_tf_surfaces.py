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


# -- reverse, slice, strided_slice, sequence_mask, meshgrid, counting, no-nan arithmetic -------

def _fd_check(fn, *xs, eps=1e-6):
    """The tape's gradient of sum(fn(*xs) * v) against central differences (float64)."""
    rng = np.random.default_rng(0)
    xs = [np.asarray(x, np.float64) for x in xs]
    v = rng.standard_normal(np.shape(fn(*[tg.constant(x) for x in xs]).numpy()))
    ts = [tg.constant(x) for x in xs]
    with tg.GradientTape() as tape:
        for t in ts:
            tape.watch(t)
        y = tg.reduce_sum(fn(*ts) * tg.constant(v))
    grads = tape.gradient(y, ts)
    for i, x in enumerate(xs):
        want = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            hi, lo = [a.copy() for a in xs], [a.copy() for a in xs]
            hi[i][idx] += eps
            lo[i][idx] -= eps
            f = [np.sum(fn(*[tg.constant(a) for a in p]).numpy() * v) for p in (hi, lo)]
            want[idx] = (f[0] - f[1]) / (2 * eps)
        got = np.zeros_like(x) if grads[i] is None else grads[i].numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_reverse_matches_flip_and_gradient():
    x = np.arange(24.0).reshape(2, 3, 4)
    for axes in ([0], [-1], [0, 2], []):
        np.testing.assert_array_equal(tg.reverse(x, axes).numpy(), np.flip(x, axes))
    _fd_check(lambda t: tg.reverse(t, [1]), x[:, :, :2])
    assert tg.reverse(tg.constant(5.0), []).numpy() == 5.0
    assert tg.reverse(tg.zeros((0, 2)), [0]).shape == (0, 2)
    with pytest.raises(tg.errors.InvalidArgumentError, match="more than once"):
        tg.reverse(x, [0, -3])
    with pytest.raises(tg.errors.InvalidArgumentError, match="out of range"):
        tg.reverse(x, [3])


def test_slice_matches_the_definition_and_gradient():
    x = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(tg.slice(x, [1, 0, 1], [-1, 2, 2]).numpy(), x[1:, 0:2, 1:3])
    np.testing.assert_array_equal(tg.slice(x, tg.constant([0, 3, 0]), [2, 0, -1]).numpy(),
                                  x[:, 3:3, :])
    _fd_check(lambda t: tg.slice(t, [0, 1], [2, -1]), np.arange(6.0).reshape(2, 3))
    with pytest.raises(tg.errors.InvalidArgumentError, match=r"size\[1\] in \[0, 3\]"):
        tg.slice(x, [0, 0, 0], [1, 5, 1])
    with pytest.raises(tg.errors.InvalidArgumentError, match=r"begin\[0\]"):
        tg.slice(x, [3, 0, 0], [-1, 1, 1])
    with pytest.raises(tg.errors.InvalidArgumentError, match="one entry per axis"):
        tg.slice(x, [0, 0], [1, 1])


@pytest.mark.parametrize("spec,key", [
    (dict(begin=[0, 1, 0], end=[2, 3, 4], strides=[1, 1, 2], begin_mask=1, shrink_axis_mask=2),
     np.s_[:2, 1, 0:4:2]),
    (dict(begin=[1, 0], end=[2, 0], strides=[1, 1], ellipsis_mask=2, shrink_axis_mask=1),
     np.s_[1, ...]),
    (dict(begin=[0, 0], end=[1, 0], strides=[1, 1], new_axis_mask=2), np.s_[0:1, None]),
    (dict(begin=[-1, 2, -1], end=[0, 0, 0], strides=[-1, -1, -2], end_mask=5),
     np.s_[::-1, 2:0:-1, ::-2]),
    (dict(begin=[0, -1], end=[0, 0], strides=[1, 1], ellipsis_mask=1, shrink_axis_mask=2),
     np.s_[..., -1]),
])
def test_strided_slice_matches_basic_indexing(spec, key):
    x = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(tg.strided_slice(x, **spec).numpy(), x[key])
    _fd_check(lambda t: tg.strided_slice(t, **spec), x)


def test_strided_slice_errors():
    x = tg.zeros((2, 3))
    with pytest.raises(tg.errors.InvalidArgumentError, match="non-zero"):
        tg.strided_slice(x, [0], [1], [0])
    with pytest.raises(tg.errors.InvalidArgumentError, match="out of bounds"):
        tg.strided_slice(x, [0, 3], [1, 4], shrink_axis_mask=2)
    with pytest.raises(tg.errors.InvalidArgumentError, match="one length"):
        tg.strided_slice(x, [0, 0], [1], [1])


def test_sequence_mask_matches_the_definition():
    lengths = np.array([[1, 3], [2, 0]])
    got = tg.sequence_mask(lengths, 4, dtype=tg.float32)
    want = (np.arange(4) < lengths[..., None]).astype(np.float32)
    assert got.dtype == tg.float32
    np.testing.assert_array_equal(got.numpy(), want)
    default = tg.sequence_mask([1, 3, 2])
    assert default.dtype == tg.bool and default.shape == (3, 3)
    np.testing.assert_array_equal(default.numpy(), np.arange(3) < np.array([1, 3, 2])[:, None])
    assert tg.sequence_mask(tg.constant([], tg.int32)).shape == (0, 0)
    assert tg.sequence_mask(2, 3).numpy().tolist() == [True, True, False]
    with pytest.raises(tg.errors.InvalidArgumentError, match="integers"):
        tg.sequence_mask([1.5])


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid_matches_numpy_and_gradient(indexing):
    a, b, c = np.arange(3.0), np.arange(2.0) + 5, np.arange(4.0) - 1
    got = tg.meshgrid(a, b, c, indexing=indexing)
    for g, w in zip(got, np.meshgrid(a, b, c, indexing=indexing)):
        np.testing.assert_array_equal(g.numpy(), w)
    _fd_check(lambda x, y: tg.meshgrid(x, y, indexing=indexing)[0] *
              tg.meshgrid(x, y, indexing=indexing)[1], a, b)
    assert [t.shape for t in tg.meshgrid(a, indexing=indexing)] == [(3,)]
    with pytest.raises(ValueError, match="'xy' or 'ij'"):
        tg.meshgrid(a, b, indexing="zz")


def test_divide_and_multiply_no_nan_values_and_gradients():
    x = tg.constant([0.0, 1.0, 2.0, np.inf, np.nan])
    y = tg.constant([0.0, 2.0, 0.0, 0.0, 0.0])
    with tg.GradientTape(persistent=True) as tape:
        tape.watch([x, y])
        d = tg.math.divide_no_nan(x, y)
        m = tg.math.multiply_no_nan(x, y)
    np.testing.assert_array_equal(d.numpy(), [0.0, 0.5, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(m.numpy(), [0.0, 2.0, 0.0, 0.0, 0.0])
    for grads in (tape.gradient(d, [x, y]), tape.gradient(m, [x, y])):
        assert all(np.isfinite(g.numpy()).all() for g in grads)
    np.testing.assert_allclose(tape.gradient(d, [x, y])[1].numpy(), [0, -0.25, 0, 0, 0])
    # away from the masked points both are the ordinary x / y and x * y
    xs, ys = np.array([1.5, -2.0, 0.0]), np.array([0.5, 3.0, 2.0])
    _fd_check(tg.math.divide_no_nan, xs, ys)
    _fd_check(tg.math.multiply_no_nan, xs, ys)
    # at y == 0 with x finite, d(x * y)/dy is still x
    _fd_check(tg.math.multiply_no_nan, np.array([3.0]), np.array([0.0]))


def test_in_top_k_matches_the_definition():
    rng = np.random.default_rng(1)
    p = rng.integers(0, 4, (6, 5)).astype(np.float32)  # many ties
    t = rng.integers(0, 5, 6)
    for k in (0, 1, 2, 5):
        want = [(p[i] > p[i, t[i]]).sum() < k for i in range(6)]
        assert tg.math.in_top_k(t, p, k).numpy().tolist() == want
    p[0, t[0]] = np.nan
    t[1] = 7
    got = tg.nn.in_top_k(t, p, 5).numpy()
    assert not got[0] and not got[1] and got[2:].all()
    with pytest.raises(tg.errors.InvalidArgumentError, match="matrix"):
        tg.math.in_top_k([0], [0.5, 0.2], 1)


def test_bincount_matches_numpy():
    x = np.array([[1, 1], [3, 0], [5, 1]])
    got = tg.math.bincount(x)
    assert got.dtype == tg.int32
    np.testing.assert_array_equal(got.numpy(), np.bincount(x.ravel()))
    np.testing.assert_array_equal(tg.math.bincount(x, minlength=9).numpy(),
                                  np.bincount(x.ravel(), minlength=9))
    np.testing.assert_array_equal(tg.math.bincount(x, maxlength=2).numpy(),
                                  np.bincount(x.ravel())[:2])
    w = np.linspace(0.5, 3.0, 6).reshape(3, 2)
    got = tg.math.bincount(x, weights=tg.constant(w))
    assert got.dtype == tg.float64
    np.testing.assert_allclose(got.numpy(), np.bincount(x.ravel(), w.ravel()))
    assert tg.math.bincount(x, dtype=tg.float32).dtype == tg.float32
    assert tg.math.bincount(tg.constant([], tg.int32), minlength=3).numpy().tolist() == [0] * 3
    _fd_check(lambda v: tg.math.bincount(x, weights=v, maxlength=4), w)  # TF has no gradient
    with pytest.raises(tg.errors.InvalidArgumentError, match="non-negative"):
        tg.math.bincount([-1, 2])
    with pytest.raises(tg.errors.InvalidArgumentError, match="integers"):
        tg.math.bincount([1.0, 2.0])
    with pytest.raises(tg.errors.InvalidArgumentError, match="same shape"):
        tg.math.bincount([1, 2], weights=[1.0])


def test_confusion_matrix_matches_the_definition():
    labels, preds = np.array([1, 2, 4, 2]), np.array([2, 2, 4, 0])
    want = np.zeros((5, 5), np.int32)
    np.add.at(want, (labels, preds), 1)
    got = tg.math.confusion_matrix(labels, preds)
    assert got.dtype == tg.int32
    np.testing.assert_array_equal(got.numpy(), want)
    w = np.array([1.0, 2.0, 3.0, 0.5])
    want = np.zeros((6, 6))
    np.add.at(want, (labels, preds), w)
    got = tg.math.confusion_matrix(labels, preds, num_classes=6, weights=w, dtype=tg.float64)
    np.testing.assert_array_equal(got.numpy(), want)
    assert tg.math.confusion_matrix(tg.constant([], tg.int32), tg.constant([], tg.int32),
                                    num_classes=2).numpy().sum() == 0
    with pytest.raises(tg.errors.InvalidArgumentError, match="out of bound"):
        tg.math.confusion_matrix(labels, preds, num_classes=3)
    with pytest.raises(tg.errors.InvalidArgumentError, match="negative"):
        tg.math.confusion_matrix([-1, 1], [0, 1])
    with pytest.raises(tg.errors.InvalidArgumentError, match="one shape"):
        tg.math.confusion_matrix([1, 2], [0])


def test_linalg_cross_eye_and_l2_normalize():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    np.testing.assert_allclose(tg.linalg.cross(a, b).numpy(), np.cross(a, b))
    _fd_check(tg.linalg.cross, a[:2], b[:2])
    with pytest.raises(tg.errors.InvalidArgumentError, match="last axis is 3"):
        tg.linalg.cross(a[:, :2], b[:, :2])
    np.testing.assert_array_equal(tg.linalg.eye(2, 3, dtype=tg.float64).numpy(), np.eye(2, 3))
    np.testing.assert_allclose(tg.linalg.l2_normalize(a, axis=-1).numpy(),
                               a / np.linalg.norm(a, axis=-1, keepdims=True))


def test_compute_average_loss_matches_the_definition():
    loss = np.array([[1.0, 2.0], [3.0, 4.0], [0.5, 0.0]])
    got = tg.nn.compute_average_loss(tg.constant(loss))
    np.testing.assert_allclose(got.numpy(), loss.sum() / 3)
    w = np.array([1.0, 0.0, 2.0])
    got = tg.nn.compute_average_loss(tg.constant(loss), sample_weight=w, global_batch_size=8)
    np.testing.assert_allclose(got.numpy(), (loss * w[:, None]).sum() / 8)
    assert tg.nn.compute_average_loss(tg.zeros([0])).numpy() == 0.0
    _fd_check(lambda t: tg.nn.compute_average_loss(t, sample_weight=w, global_batch_size=4),
              loss)
    with pytest.raises(ValueError, match="at least rank 1"):
        tg.nn.compute_average_loss(3.0)
    with pytest.raises(TypeError, match="integer"):
        tg.nn.compute_average_loss([1.0], global_batch_size=2.5)
    with pytest.raises(tg.errors.InvalidArgumentError, match="non-negative"):
        tg.nn.compute_average_loss([1.0], global_batch_size=-1)
