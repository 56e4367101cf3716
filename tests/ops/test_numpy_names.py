"""tg.experimental.numpy: numpy's names for tapegpu's ops give numpy's results (and gradients)."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.ops import numpy_names

tnp = tg.experimental.numpy


@pytest.fixture
def numpy_behavior():
    """Numpy's methods on tensors for one test, removed again after it (they are global)."""
    added = [n for n in numpy_names._numpy_methods() if not hasattr(tg.Tensor, n)]
    tnp.experimental_enable_numpy_behavior()
    yield
    for n in added:
        delattr(tg.Tensor, n)
        delattr(tg.Variable, n)
X = np.array([[0.5, -1.5, 2.0], [3.0, 0.25, -0.75]])
Y = np.array([[1.5, 2.0, -0.5], [0.5, -1.0, 4.0]])

UNARY = ["abs", "absolute", "negative", "sign", "square", "exp", "expm1", "sin", "cos", "tan",
         "tanh", "sinh", "cosh", "arctan", "floor", "ceil", "reciprocal", "isnan", "isinf",
         "isfinite"]
BINARY = ["add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "mod",
          "remainder", "maximum", "minimum", "arctan2", "equal", "not_equal", "less",
          "less_equal", "greater", "greater_equal"]
REDUCTIONS = ["sum", "mean", "prod", "max", "amax", "min", "amin", "std", "var"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_names(name):
    np.testing.assert_allclose(getattr(tnp, name)(tg.constant(X)).numpy(),
                               getattr(np, name)(X), rtol=1e-12)


@pytest.mark.parametrize("name", BINARY)
def test_binary_names(name):
    np.testing.assert_allclose(getattr(tnp, name)(tg.constant(X), tg.constant(Y)).numpy(),
                               getattr(np, name)(X, Y), rtol=1e-12)


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 1), True)])
def test_reductions_reduce_every_axis_by_default(name, axis, keepdims):
    got = getattr(tnp, name)(tg.constant(X), axis=axis, keepdims=keepdims).numpy()
    np.testing.assert_allclose(got, getattr(np, name)(X, axis=axis, keepdims=keepdims),
                               rtol=1e-12)


def test_flattening_defaults_as_numpy():
    x = tg.constant(X)
    for name in ("argmax", "argmin", "cumsum", "cumprod", "sort", "argsort"):
        np.testing.assert_allclose(getattr(tnp, name)(x, axis=None).numpy(),
                                   getattr(np, name)(X, axis=None), err_msg=name)
    assert tnp.argmax(x).numpy() == np.argmax(X) and tnp.cumsum(x).shape == (6,)
    np.testing.assert_array_equal(tnp.sort(x).numpy(), np.sort(X))  # axis=-1 by default
    np.testing.assert_array_equal(tnp.argsort(x, axis=0).numpy(), np.argsort(X, axis=0))
    np.testing.assert_array_equal(tnp.take(x, [4, 0]).numpy(), np.take(X, [4, 0]))
    np.testing.assert_array_equal(tnp.take(x, [1], axis=1).numpy(), np.take(X, [1], axis=1))


def test_shapes_products_and_creation():
    x = tg.constant(X)
    np.testing.assert_array_equal(tnp.reshape(x, (3, 2)).numpy(), X.reshape(3, 2))
    np.testing.assert_array_equal(tnp.transpose(x).numpy(), X.T)
    np.testing.assert_array_equal(tnp.concatenate([x, x], axis=1).numpy(),
                                  np.concatenate([X, X], axis=1))
    np.testing.assert_allclose(tnp.dot(x, tg.constant(Y.T)).numpy(), X.dot(Y.T))
    np.testing.assert_allclose(tnp.dot(tg.constant(X[0]), tg.constant(Y[0])).numpy(),
                               X[0].dot(Y[0]))
    np.testing.assert_allclose(tnp.outer(x, tg.constant(Y[0])).numpy(), np.outer(X, Y[0]))
    np.testing.assert_array_equal(tnp.clip(x, -1.0, 1.0).numpy(), np.clip(X, -1, 1))
    np.testing.assert_allclose(tnp.round(tg.constant([1.234, 2.5]), 2).numpy(),
                               np.round([1.234, 2.5], 2))
    assert tnp.ndim(x) == 2 and tnp.shape(x) == (2, 3) and tnp.size(x) == 6
    assert tnp.size(x, 1) == 3
    for got, want in [(tnp.zeros(3), np.zeros(3)), (tnp.ones((2, 1)), np.ones((2, 1))),
                      (tnp.arange(4), np.arange(4)), (tnp.arange(0.0, 1.0, 0.25),
                                                       np.arange(0.0, 1.0, 0.25)),
                      (tnp.linspace(0, 1, 5), np.linspace(0, 1, 5)),
                      (tnp.linspace(0, 1, 4, endpoint=False), np.linspace(0, 1, 4, False)),
                      (tnp.full((2,), 7), np.full((2,), 7)), (tnp.eye(3), np.eye(3)),
                      (tnp.asarray([1.0, 2.0]), np.asarray([1.0, 2.0])),
                      (tnp.array(3.0, ndmin=2), np.array(3.0, ndmin=2))]:
        assert got.dtype.as_numpy_dtype == want.dtype, (got, want)
        np.testing.assert_allclose(got.numpy(), want)
    assert tnp.zeros(2, dtype=tnp.float32).dtype == tg.float32
    assert tnp.ndarray is tg.Tensor and tnp.float32 is tg.float32 and tnp.pi == np.pi


def test_gradients_flow_through_the_numpy_names():
    x = tg.constant(X)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tnp.sum(tnp.exp(x) * tnp.mean(x, axis=0, keepdims=True))
    g = tape.gradient(y, x).numpy()
    m = X.mean(0, keepdims=True)
    np.testing.assert_allclose(g, np.exp(X) * m + np.exp(X).sum(0, keepdims=True) / 2,
                               rtol=1e-12)


def test_dlpack_stays_in_experimental():
    t = tg.experimental.dlpack.from_dlpack(np.arange(3.0))
    assert t.numpy().tolist() == [0.0, 1.0, 2.0]
    assert tg.experimental.from_dlpack is tg.experimental.dlpack.from_dlpack


def test_enable_numpy_behavior_gives_tensors_numpy_methods(numpy_behavior):
    x = tg.constant(X)
    np.testing.assert_array_equal(x.reshape(3, 2).numpy(), X.reshape(3, 2))
    np.testing.assert_array_equal(x.reshape((3, 2)).numpy(), X.reshape((3, 2)))
    np.testing.assert_array_equal(x.transpose().numpy(), X.transpose())
    np.testing.assert_array_equal(x.transpose(1, 0).numpy(), X.transpose(1, 0))
    np.testing.assert_allclose(x.sum(axis=0).numpy(), X.sum(axis=0))
    np.testing.assert_allclose(x.mean().numpy(), X.mean())
    assert x.astype(tg.float32).dtype == tg.float32 and x.ravel().shape == (6,)
    assert x.tolist() == X.tolist() and int(x.argmax()) == X.argmax()
    v = tg.Variable(X)
    with tg.GradientTape() as tape:
        y = v.sum()
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), np.ones_like(X))


def test_numpy_functions_still_take_tensors_with_numpy_methods(numpy_behavior):
    x = tg.constant(X)
    for fn in (np.sum, np.mean, np.max, np.min, np.prod, np.std, np.var, np.argmax, np.cumsum,
               np.round, np.transpose, np.ravel):
        np.testing.assert_allclose(np.asarray(fn(x)), fn(X), err_msg=fn.__name__)
    np.testing.assert_allclose(np.asarray(np.std(x, ddof=1)), np.std(X, ddof=1))
    np.testing.assert_allclose(np.asarray(np.var(x, axis=0, ddof=1)), np.var(X, axis=0, ddof=1))
    np.testing.assert_allclose(np.asarray(np.reshape(x, (3, 2))), X.reshape(3, 2))
    with pytest.raises(tg.errors.InvalidArgumentError, match="immutable"):
        np.sum(x, out=np.zeros(()))
