"""TensorFlow semantics of the creation, shape, reduction and linear-algebra functions: errors
that name the public function, gradients at edges, and small APIs (tensor_diag, repeat)."""
import warnings

import numpy as np
import pytest

import tapegpu as tg


# -- errors name the public function ------------------------------------------------------------

@pytest.mark.parametrize("make, exc, msg", [
    (lambda: tg.ones((2.5,)), TypeError, r"^ones: shape must be an int or a sequence of ints"),
    (lambda: tg.zeros([2, 1.0]), TypeError, r"^zeros: shape must be"),
    (lambda: tg.zeros(None), TypeError, r"^zeros: shape must be"),
    (lambda: tg.ones((2, -1)), tg.InvalidArgumentError, r"^ones: shape \(2, -1\) has a negative"),
    (lambda: tg.fill((2.0,), 1.0), TypeError, r"^fill: shape must be"),
    (lambda: tg.ones(tg.constant([2.0])), TypeError, r"^ones: a shape tensor must be an integer"),
    (lambda: tg.eye(-1), tg.InvalidArgumentError, r"^eye: num_rows must be >= 0, got -1"),
    (lambda: tg.eye(2, 2.5), TypeError, r"^eye: num_columns must be an int, got 2.5"),
    (lambda: tg.range(0.0, 1.0, 0.0), tg.InvalidArgumentError, r"^range: Requires delta != 0"),
    (lambda: tg.range(0, 3, 0), tg.InvalidArgumentError, r"^range: Requires delta != 0"),
    (lambda: tg.range("3"), TypeError, r"^range: start, limit and delta must be ints or floats"),
    (lambda: tg.linspace(0.0, 1.0, 2.5), TypeError, r"^linspace: num must be an int"),
    (lambda: tg.reduce_sum(tg.ones((2, 3)), axis=0.5), TypeError,
     r"^reduce_sum: axis must be None, an int or a sequence of ints, got 0.5"),
    (lambda: tg.reduce_mean(tg.ones((2, 3)), axis=[0, 1.0]), TypeError, r"^reduce_mean: axis"),
    (lambda: tg.reduce_max(tg.ones((2, 3)), axis="0"), TypeError, r"^reduce_max: axis"),
    (lambda: tg.math.reduce_any(tg.ones((2,)) > 0, axis=0.5), TypeError, r"^reduce_any: axis"),
    (lambda: tg.argmax(tg.ones((2,)), axis=0.5), TypeError, r"^argmax: axis"),
    (lambda: tg.reduce_logsumexp(tg.ones((2,)), axis=0.5), TypeError,
     r"^reduce_logsumexp: axis"),
])
def test_bad_arguments_raise_naming_the_function(make, exc, msg):
    with pytest.raises(exc, match=msg):
        make()


def test_integer_axis_forms_still_work():
    x = tg.ones((2, 3))
    for axis in (np.int64(1), np.array([1]), [np.int32(1)], tg.constant(1)):
        np.testing.assert_array_equal(tg.reduce_sum(x, axis=axis).numpy(), [3.0, 3.0])
    assert tg.eye(np.int64(2), batch_shape=[3]).shape == (3, 2, 2)
    assert tg.range(tg.constant(3)).numpy().tolist() == [0, 1, 2]


def test_det_gradient_at_a_singular_matrix_names_det():
    m = tg.constant(np.ones((2, 2)))
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(m)
        d = tg.linalg.det(m)
        s = tg.linalg.slogdet(m)[1]
    assert float(d) == 0.0
    with pytest.raises(tg.InvalidArgumentError, match="^det: the derivative of det at a "
                                                      r"singular matrix \(shape \(2, 2\)\)"):
        tape.gradient(d, m)
    with pytest.raises(tg.InvalidArgumentError, match="^slogdet: the derivative of slogdet"):
        tape.gradient(s, m)
    with pytest.raises(tg.InvalidArgumentError, match="^det: "):
        tg.autodiff.jvp(tg.linalg.det, [m], [tg.ones_like(m)])


def test_no_numpy_warning_from_a_mean_over_no_elements():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(float(tg.reduce_mean(tg.zeros((0,)))))
        np.testing.assert_array_equal(tg.reduce_mean(tg.zeros((0, 2)), axis=0).numpy(),
                                      [np.nan, np.nan])
        assert tg.reduce_mean(tg.zeros((0, 2)), axis=1).shape == (0,)


# -- clip_by_norm at zero ------------------------------------------------------------------------

@pytest.mark.parametrize("axes", [None, 1])
def test_clip_by_norm_gradient_is_finite_at_a_zero_vector(axes):
    """TF's double where: at t = 0 the output is t * 1, so the gradient is 1 (not NaN)."""
    x = tg.constant(np.array([[0.0, 0.0], [3.0, 4.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = tg.clip_by_norm(x, 1.0, axes=axes)
        g = tape.gradient(y, x).numpy()
    assert np.isfinite(g).all()
    if axes == 1:
        np.testing.assert_array_equal(g[0], [1.0, 1.0])
        np.testing.assert_allclose(y.numpy()[1], [0.6, 0.8])
    z = tg.constant(np.zeros(3))
    with tg.GradientTape() as tape:
        tape.watch(z)
        y = tg.reduce_sum(tg.clip_by_norm(z, 2.0))
    np.testing.assert_array_equal(tape.gradient(y, z).numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(tg.clip_by_norm(z, 2.0).numpy(), [0.0, 0.0, 0.0])


# -- tensor_diag, repeat, size -------------------------------------------------------------------

def test_tensor_diag_as_tensorflow():
    d = tg.constant([[1.0, 2.0], [3.0, 4.0]])
    out = tg.linalg.tensor_diag(d)
    assert out.shape == (2, 2, 2, 2) and out.dtype == tg.float32
    want = np.zeros((2, 2, 2, 2), np.float32)
    for i in range(2):
        for j in range(2):
            want[i, j, i, j] = d.numpy()[i, j]
    np.testing.assert_array_equal(out.numpy(), want)
    inf = tg.linalg.tensor_diag(tg.constant([np.inf, 1.0]))
    np.testing.assert_array_equal(inf.numpy(), [[np.inf, 0.0], [0.0, 1.0]])  # no inf * 0
    assert tg.linalg.tensor_diag(tg.constant([1, 2])).dtype == tg.int32
    with pytest.raises(tg.InvalidArgumentError, match="^tensor_diag: the diagonal must have rank"):
        tg.linalg.tensor_diag(tg.constant(1.0))


def test_repeat_as_tensorflow():
    x = tg.constant([[1, 2], [3, 4]])
    np.testing.assert_array_equal(tg.repeat(x, 2).numpy(), [1, 1, 2, 2, 3, 3, 4, 4])
    np.testing.assert_array_equal(tg.repeat(x, [1, 2], axis=-1).numpy(),
                                  [[1, 2, 2], [3, 4, 4]])
    np.testing.assert_array_equal(tg.repeat(x, tg.constant([0, 2]), axis=0).numpy(),
                                  [[3, 4], [3, 4]])
    np.testing.assert_array_equal(tg.repeat(tg.constant(5.0), 3).numpy(), [5.0, 5.0, 5.0])
    y = tg.constant([1.0, 2.0])
    with tg.GradientTape() as tape:
        tape.watch(y)
        r = tg.repeat(y, [3, 1])
    np.testing.assert_array_equal(tape.gradient(r, y).numpy(), [3.0, 1.0])
    with pytest.raises(tg.InvalidArgumentError, match="^repeat: 3 repeats for axis 0 of size 2"):
        tg.repeat(x, [1, 2, 3], axis=0)
    with pytest.raises(tg.InvalidArgumentError, match="^repeat: repeats must be >= 0"):
        tg.repeat(x, -1)
    with pytest.raises(TypeError, match="^repeat: repeats must be an int or a vector of ints"):
        tg.repeat(x, 1.5)
    with pytest.raises(TypeError, match="^repeat: axis must be None or an int"):
        tg.repeat(x, 2, axis=0.5)
    with pytest.raises(tg.InvalidArgumentError, match="^repeat: axis 2 is out of range"):
        tg.repeat(x, 2, axis=2)


def test_size_and_shape_accept_tapegpu_dtypes():
    x = tg.zeros((2, 3))
    s = tg.size(x, out_type=tg.float32)
    assert s.dtype == tg.float32 and float(s) == 6.0
    assert tg.size(x, out_type=tg.int64).dtype == tg.int64
    assert tg.shape(x, out_type=tg.int64).dtype == tg.int64
    assert tg.size(x).dtype == tg.int32


@pytest.mark.parametrize("expr, name", [
    (lambda x: x + None, "add"), (lambda x: None * x, "multiply"),
    (lambda x: tg.where(tg.constant([True]), x, None), "where"),
    (lambda x: tg.maximum(x, [None]), "maximum")])
def test_none_operands_raise_naming_the_op(expr, name):
    with pytest.raises(ValueError, match=rf"^{name}:.*None"):
        expr(tg.constant([1.0]))


@pytest.mark.parametrize("fn, x", [
    (tg.math.log, 0.0), (tg.math.log, -1.0), (tg.math.log1p, -1.0), (tg.sqrt, -1.0),
    (tg.math.rsqrt, 0.0), (tg.math.reciprocal, 0.0), (lambda x: x / 0.0, 1.0),
    (lambda x: x ** -1.0, 0.0), (lambda x: tg.math.floormod(x, 0.0), 1.0)])
def test_domain_edges_give_inf_or_nan_without_warnings(fn, x):
    """As TensorFlow: log(0) = -inf, x / 0 = inf, sqrt(-1) = nan, with no numpy warning
    raised from tapegpu's own lines, forward or backward."""
    t = tg.constant(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tg.GradientTape() as tape:
            tape.watch(t)
            y = fn(t)
        tape.gradient(y, t)
    assert not np.isfinite(y.numpy())


@pytest.mark.parametrize("fn", [tg.math.xlogy, tg.math.xlog1py])
def test_xlogy_is_zero_with_zero_gradients_where_x_is_zero(fn):
    """As TensorFlow: 0 where x == 0 whatever y is (0, -1, nan), and so are both derivatives."""
    x = tg.constant([0.0, 0.0, 0.0, 2.0])
    y = tg.constant([0.0, -1.0, np.nan, 3.0])
    with tg.GradientTape() as tape:
        tape.watch([x, y])
        z = fn(x, y)
    gx, gy = tape.gradient(z, [x, y])
    log = np.log if fn is tg.math.xlogy else np.log1p
    np.testing.assert_array_equal(z.numpy(), [0.0, 0.0, 0.0, 2.0 * log(np.float32(3.0))])
    np.testing.assert_array_equal(gx.numpy()[:3], 0.0)
    np.testing.assert_array_equal(gy.numpy()[:3], 0.0)


def test_clip_by_global_norm_as_tensorflow():
    a, b = tg.constant([3.0]), tg.constant([4.0])
    (ca, none, cb), norm = tg.clip_by_global_norm([a, None, b], 2.5)
    assert none is None and float(norm) == 5.0
    np.testing.assert_allclose([ca.numpy()[0], cb.numpy()[0]], [1.5, 2.0], rtol=1e-6)
    (ua, ub), _ = tg.clip_by_global_norm([a, b], 10.0)  # under the limit: unchanged
    assert ua.numpy()[0] == 3.0 and ub.numpy()[0] == 4.0
    z = tg.zeros(3)
    with tg.GradientTape() as tape:  # finite gradient at a zero norm
        tape.watch(z)
        (cz,), _ = tg.clip_by_global_norm([z], 1.0)
        y = tg.reduce_sum(cz)
    assert np.all(np.isfinite(tape.gradient(y, z).numpy()))
    with pytest.raises(TypeError, match="clip_by_global_norm"):
        tg.clip_by_global_norm(a, 1.0)


def test_sorting_as_tensorflow():
    x = tg.constant([[2.0, 1.0, 2.0, 0.0]])
    idx = tg.argsort(x)
    assert idx.dtype == tg.int32 and idx.numpy().tolist() == [[3, 1, 0, 2]]  # stable on ties
    assert tg.argsort(x, direction="DESCENDING").numpy().tolist() == [[0, 2, 1, 3]]
    values, indices = tg.math.top_k(x, k=2)
    assert values.numpy().tolist() == [[2.0, 2.0]] and indices.numpy().tolist() == [[0, 2]]
    with tg.GradientTape() as tape:  # top_k's gradient goes to the entries picked
        tape.watch(x)
        y = tg.reduce_sum(tg.math.top_k(x, k=2).values * tg.constant([1.0, 10.0]))
    assert tape.gradient(y, x).numpy().tolist() == [[1.0, 0.0, 10.0, 0.0]]
    with pytest.raises(tg.InvalidArgumentError, match="top_k: k=5"):
        tg.math.top_k(x, k=5)
    with pytest.raises(tg.InvalidArgumentError, match="sort.*direction"):
        tg.sort(x, direction="UP")


def test_segments_and_indexing_as_tensorflow():
    x = tg.constant([1.0, 3.0, 3.0])
    with tg.GradientTape() as tape:  # ties share the gradient, as TF
        tape.watch(x)
        m = tg.math.unsorted_segment_max(x, [0, 0, 0], 2)
        first = m[0]
    assert m.numpy()[1] == np.finfo(np.float32).min  # an empty segment: the lowest value
    assert tape.gradient(first, x).numpy().tolist() == [0.0, 0.5, 0.5]
    assert tg.math.unsorted_segment_min(tg.constant([2], tg.int32), [0], 2).numpy().tolist() == \
        [2, np.iinfo(np.int32).max]
    with pytest.raises(tg.InvalidArgumentError, match=r"segment ids must be in \[0, 2\)"):
        tg.math.unsorted_segment_sum(x, [0, 1, 2], 2)
    with pytest.raises(tg.InvalidArgumentError, match="must be sorted"):
        tg.math.segment_sum(x, [1, 0, 1])
    with pytest.raises(tg.InvalidArgumentError, match="gather_nd: index 5 is out of range"):
        tg.gather_nd(tg.ones((2, 2)), [[5, 0]])
    with pytest.raises(tg.InvalidArgumentError, match="boolean_mask: mask must be bool"):
        tg.boolean_mask(tg.ones((2, 2)), [True, False, True])


@pytest.mark.parametrize("fn", [tg.nn.relu, tg.nn.relu6, tg.nn.elu, tg.nn.selu, tg.nn.gelu,
                                tg.nn.leaky_relu, tg.nn.softplus, tg.sigmoid, tg.tanh,
                                tg.nn.swish])
def test_activations_keep_nan_on_every_device(fn):
    """NaN in, NaN out (numpy's maximum, and TensorFlow's kernels): an activation kernel that
    compares `x > 0` and returns 0 otherwise would hide a NaN from the loss."""
    x = tg.constant([np.nan, -1.0, 2.0], tg.float32)
    y = fn(x).numpy()
    assert np.isnan(y[0]) and np.isfinite(y[1:]).all()
    b = tg.constant([np.nan, 0.5], tg.float32)
    z = tg.nn.bias_add(tg.constant([[1.0, -3.0], [-1.0, 1.0]]), b)
    np.testing.assert_array_equal(np.isnan(fn(z).numpy()), [[True, False], [True, False]])


@pytest.mark.parametrize("indices", [[-1], [0, 3], [[0, 1], [2, -3]]])
def test_gather_refuses_indices_outside_0_n_as_tf(indices):
    """A negative index is an error, not counted from the end (TF: "indices[0] = -1 is not in
    [0, 3)"); on a device the check is queued and raises at the next read of a value."""
    x = tg.constant([1.0, 2.0, 3.0])
    with pytest.raises(tg.InvalidArgumentError, match=r"gather: indices\[.*\] = -?\d+ is not "
                                                      r"in \[0, 3\)"):
        tg.gather(x, indices).numpy()
    with pytest.raises(tg.InvalidArgumentError, match=r"is not in \[0, 3\)"):
        tg.nn.embedding_lookup(x, tg.constant(indices)).numpy()
