"""Gradient checking: `tg.test.compute_gradient` and `tg.test.check_gradients`."""
import numpy as np

from .. import ops
from ..autodiff.tape import GradientTape
from ..core.tensor import Tensor, convert_to_tensor


def compute_gradient(f, x, delta=None):
    """Theoretical (by the tape) and numerical (central differences) Jacobians of `f` at `x`.

    As `tf.test.compute_gradient`: `x` is a list of arguments; returns two tuples with one
    2-d array per argument, of shape (y.size, x_i.size).

    >>> theo, num = tg.test.compute_gradient(lambda x: x * x, [tg.constant([1.0, 2.0])])
    >>> bool(np.allclose(theo[0], num[0], atol=1e-2))
    True
    """
    if not isinstance(x, (list, tuple)):
        raise ValueError(f"compute_gradient: x must be a list or tuple of arguments, not "
                         f"{type(x).__name__}")
    delta = 1.0 / 1024 if delta is None else delta
    xs = [convert_to_tensor(v) for v in x]
    theoretical, numerical = [], []
    for i, xi in enumerate(xs):
        with GradientTape() as tape:
            tape.watch(xi)
            y = ops.convert_to_tensor(f(*xs))
        jac = np.asarray(tape.jacobian(y, xi, unconnected_gradients="zero"))
        if jac.shape != tuple(y.shape) + tuple(xi.shape):  # an empty one reshapes to anything
            raise ValueError(f"compute_gradient: the Jacobian of argument {i} has shape "
                             f"{jac.shape}; for an output of shape {tuple(y.shape)} and an "
                             f"argument of shape {tuple(xi.shape)} it must be "
                             f"{tuple(y.shape) + tuple(xi.shape)}")
        theoretical.append(jac.reshape(y.size, xi.size))
        numerical.append(_numerical(f, xs, i, delta, y.size))
    return tuple(theoretical), tuple(numerical)


def _numerical(f, xs, i, delta, ysize):
    base = xs[i].numpy()
    dt = base.dtype
    out = np.zeros((ysize, base.size), dtype=dt)
    flat = base.reshape(-1)
    for j in range(flat.size):
        cols = []
        for sign in (1, -1):
            pert = flat.copy()
            pert[j] = pert[j] + sign * delta
            args = list(xs)
            args[i] = Tensor(xs[i]._dev.asarray(pert.reshape(base.shape)), xs[i]._dev)
            cols.append(np.asarray(f(*args), dtype=np.float64).reshape(-1))
        out[:, j] = ((cols[0] - cols[1]) / (2 * delta)).astype(dt)
    return out


def max_error(grad1, grad2):
    """The largest absolute difference between two lists of Jacobians.

    >>> tg.test.max_error(*tg.test.compute_gradient(tg.sin, [np.array([0.5])])) < 1e-6
    True
    """
    return max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
               if np.size(a) else 0.0 for a, b in zip(grad1, grad2))


def check_gradients(f, args, order=1, delta=None, atol=1e-5, rtol=1e-3):
    """Checks the tape's derivatives of `f` up to `order` against central differences.

    Raises AssertionError naming the argument and the largest error on a mismatch.

    >>> tg.test.check_gradients(tg.sin, [tg.constant([0.3, 0.7], tg.float64)], order=2)
    """
    xs = [convert_to_tensor(a) for a in args]
    fn = f
    for k in range(1, order + 1):
        theo, num = compute_gradient(fn, xs, delta=delta or _default_delta(xs))
        for i, (a, b) in enumerate(zip(theo, num)):
            if not np.allclose(a, b, atol=atol, rtol=rtol):
                raise AssertionError(f"check_gradients: order {k}, argument {i}: max error "
                                     f"{np.max(np.abs(a - b)):.3g}\ntape:\n{a}\nnumerical:\n{b}")
        fn = _gradient_fn(fn)


def _default_delta(xs):
    return 1e-5 if all(x._data.dtype == np.float64 for x in xs) else 1.0 / 1024


def _gradient_fn(f):
    """x -> sum of the gradients of f w.r.t. all arguments (a scalar-per-element function)."""
    def g(*xs):
        with GradientTape() as tape:
            for x in xs:
                tape.watch(x)
            y = f(*xs)
        grads = tape.gradient(y, list(xs), unconnected_gradients="zero")
        return ops.concat([ops.reshape(gr, (-1,)) for gr in grads], axis=0)
    return g
