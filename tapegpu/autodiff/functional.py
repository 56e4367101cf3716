"""The functional forms of differentiation: `tg.autodiff.jvp`, `vjp`, `hvp` and `hessian`,
each a tape or an accumulator (or both) around a call of `f`."""
from ..core.tensor import Tensor, Variable
from .. import ops
from .forward import ForwardAccumulator
from .forward_jacobian import hessian_blocks
from .tape import GradientTape


def _args(primals):
    single = isinstance(primals, (Tensor, Variable))
    return ([primals] if single else list(primals)), single


def jvp(f, primals, tangents):
    """`(f(*primals), J v)`: the value of `f` and its Jacobian-vector product, in forward mode.

    `primals` is a tensor or a list/tuple of arguments, `tangents` the same structure; the JVP
    has the structure of `f`'s output (zeros where it does not depend on the primals).

    >>> y, t = tg.autodiff.jvp(lambda x: x * x, tg.constant(3.0), tg.constant(1.0))
    >>> float(y), float(t)
    (9.0, 6.0)
    """
    xs, single = _args(primals)
    vs = [tangents] if single else list(tangents)
    with ForwardAccumulator(xs, vs) as acc:
        out = f(*xs)
    return out, acc.jvp(out, unconnected_gradients="zero")


def vjp(f, primals):
    """`(f(*primals), vjp_fn)`: `vjp_fn(cotangent)` gives the vector-Jacobian product with the
    structure of `primals` (a tensor or a list/tuple of arguments); it may be called repeatedly.

    >>> y, vjp_fn = tg.autodiff.vjp(lambda x: x * x, tg.constant(3.0))
    >>> float(vjp_fn(tg.constant(1.0)))
    6.0
    """
    xs, single = _args(primals)
    tape = GradientTape(persistent=True)
    with tape:
        tape.watch(xs)
        out = f(*xs)

    def vjp_fn(cotangent):
        g = tape.gradient(out, xs, output_gradients=cotangent)
        return g[0] if single else type(primals)(g)
    return out, vjp_fn


def hvp(f, primals, tangents, mode="reverse_over_forward"):
    """The Hessian-vector product `H v` of the scalar `f(*primals)`. The result has the
    structure of `primals` (zeros for arguments `f` does not depend on).

    `mode='reverse_over_forward'` (the default): the gradient of the JVP `<grad f, v>`, with
    the accumulator inside a tape. `mode='forward_over_reverse'`: the JVP of the gradient, with
    the tape inside the accumulator (TensorFlow's recipe). Both are exact; the first is cheaper
    here: a product `x @ W` whose input x carries no tangent costs one product for its JVP and
    one for its gradient (`x^T g`), where forward-over-reverse needs two more (`x^T g` and its
    JVP `x^T dg`), and its backward sweep records nothing, so it runs on raw arrays.

    >>> x = tg.constant([1.0, 2.0])
    >>> tg.autodiff.hvp(lambda x: tg.reduce_sum(x ** 3.0), x, tg.constant([1.0, 0.0])).numpy()
    array([6., 0.], dtype=float32)
    """
    xs, single = _args(primals)
    vs = [tangents] if single else list(tangents)
    if mode == "reverse_over_forward":
        with GradientTape() as tape:
            tape.watch(xs)
            with ForwardAccumulator(xs, vs) as acc:
                y = f(*xs)
            jv = acc.jvp(y)
        out = tape.gradient(jv, xs, unconnected_gradients="zero") if jv is not None else \
            [ops.zeros_like(x) for x in xs]
    elif mode == "forward_over_reverse":
        with ForwardAccumulator(xs, vs) as acc:
            with GradientTape() as tape:
                tape.watch(xs)
                y = f(*xs)
            grads = tape.gradient(y, xs, unconnected_gradients="zero")
        out = acc.jvp(grads, unconnected_gradients="zero")
    else:
        raise ValueError(f"hvp: mode must be 'reverse_over_forward' or 'forward_over_reverse', "
                         f"got {mode!r}")
    return out[0] if single else out


def hessian(f, primals):
    """The Hessian of the scalar `f(*primals)`, by forward-over-reverse: for one tensor x, a
    tensor of shape `x.shape + x.shape`; for a list of arguments, a list of lists with
    `H[i][j]` of shape `x_i.shape + x_j.shape` (zeros where f does not couple x_i and x_j).

    >>> x = tg.constant([1.0, 2.0])
    >>> tg.autodiff.hessian(lambda x: tg.reduce_sum(x ** 3.0), x).numpy()
    array([[ 6.,  0.],
           [ 0., 12.]], dtype=float32)
    """
    single = isinstance(primals, (Tensor, Variable))
    xs = [primals] if single else list(primals)
    with GradientTape(persistent=True) as outer:
        outer.watch(xs)
        with GradientTape() as inner:
            inner.watch(xs)
            y = f(*xs)
        grads = inner.gradient(y, xs)
    rows = hessian_blocks(outer, xs, grads)
    return rows[0][0] if single else rows
