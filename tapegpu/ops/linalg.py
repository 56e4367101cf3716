"""Linear algebra: matmul, einsum, solve, inverse, determinants, Cholesky.

Matrix rules act on the last two axes, so any leading axes of `g` — the op's own batch of
matrices or a Jacobian's batch of cotangents — broadcast through `matmul` and `solve`.
"""
import string

import math

import numpy as np

from .registry import InvalidArgumentError, def_op
from ._base import EMPTY, apply, floating, public, tensor
from ..core.tensor import Tensor
from . import binary as _b, unary as _u
from .reduce import reduce_max, reduce_sum
from .shape import (_scatter_op, broadcast_to, getitem, matrix_transpose, reshape,
                    transpose)


def _mT(x):
    return x.swapaxes(-1, -2)


_SKINNY = 128  # rows up to which a b^T runs as (b a^T)^T (see _matmul_forward)


def _matmul_forward(xp, a, b, ta=False, tb=False):
    if ta:
        a = _mT(a)
    elif tb and b.ndim == 2 and a.ndim >= 2 and \
            1 < math.prod(a.shape[:-1]) <= min(_SKINNY, b.shape[0] - 1):
        # a b^T for a with few rows (a Jacobian's cotangents, a small batch) as (b a^T)^T:
        # OpenBLAS packs the larger matrix faster as the first operand, 20-45% less time for
        # 8-64 rows against a (512, 512) or (1024, 1024) weight, none from 256 rows on. The
        # result is column-major, which the next such product reads without a copy.
        rows = a.reshape(-1, a.shape[-1])
        return (b @ rows.T).T.reshape(a.shape[:-1] + (b.shape[0],))
    if tb:
        b = _mT(b)
    # one large GEMM instead of a loop of small ones when only one side carries leading axes
    if b.ndim == 2 and a.ndim > 2:
        return (a.reshape(-1, a.shape[-1]) @ b).reshape(a.shape[:-1] + (b.shape[-1],))
    if a.ndim == 2 and b.ndim > 2:
        m, k = a.shape
        lead = b.shape[:-2]
        n = b.shape[-1]
        flat = xp.moveaxis(b, -2, 0).reshape(k, -1)  # (k, lead * n)
        return xp.moveaxis((a @ flat).reshape((m,) + lead + (n,)), 0, -2)
    return xp.matmul(a, b)


# C = op(A) op(B), op a transpose where flagged:  d op(A) = g op(B)^T,  d op(B) = op(A)^T g
def _matmul_vjp_a(ops, g, a, b, ta=False, tb=False):
    if not ta:
        return ops.matmul(g, b, transpose_b=not tb)
    return ops.matmul(b, g, transpose_a=tb, transpose_b=True)


def _matmul_vjp_b(ops, g, a, b, ta=False, tb=False):
    if not tb:
        return ops.matmul(a, g, transpose_a=not ta)
    return ops.matmul(g, a, transpose_a=True, transpose_b=ta)


def _lift(ops, t, x, other):
    """Tangent t (batch + x.shape) with size-1 axes after its batch axes, so that its batch axes
    stay in front when it broadcasts against `other`'s leading (matrix-batch) axes."""
    k = other.ndim - x.ndim
    if k <= 0:
        return t
    nb = t.ndim - x.ndim
    return ops.reshape(t, t.shape[:nb] + (1,) * k + t.shape[nb:])


# d(op(A) op(B)) = op(dA) op(B) + op(A) op(dB)
def _matmul_jvp(ops, ts, a, b, ta=False, tb=False):
    da, db = ts
    out = None
    if da is not None:
        out = ops.matmul(_lift(ops, da, a, b), b, transpose_a=ta, transpose_b=tb)
    if db is not None:
        term = ops.matmul(a, _lift(ops, db, b, a), transpose_a=ta, transpose_b=tb)
        out = term if out is None else out + term
    return out


_matmul = def_op("matmul", _matmul_forward, args=("a", "b"), saves=("a", "b"),
                 vjp=(_matmul_vjp_a, _matmul_vjp_b), jvp=_matmul_jvp, batch="matmul")


_PARAMS = {(False, False): EMPTY, (True, False): {"ta": True}, (False, True): {"tb": True},
           (True, True): {"ta": True, "tb": True}}


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           name=None):
    """Matrix product over the last two axes, broadcasting leading axes (rank >= 2, as TF).

    >>> tg.matmul(tg.ones((2, 3)), tg.ones((3, 4))).shape
    (2, 4)
    """
    a, b = _b.as_tensor_pair(a, b)
    ta = bool(transpose_a or adjoint_a)
    tb = bool(transpose_b or adjoint_b)
    if a.ndim < 2 or b.ndim < 2:
        raise InvalidArgumentError(f"matmul: both operands need rank >= 2, got shapes {a.shape} "
                                   f"and {b.shape}; use tg.expand_dims or tg.tensordot for "
                                   "vectors")
    k_a = a.shape[-2] if ta else a.shape[-1]
    k_b = b.shape[-1] if tb else b.shape[-2]
    if k_a != k_b:
        raise InvalidArgumentError(f"matmul: inner dimensions differ: {a.shape}"
                                   f"{'^T' if ta else ''} @ {b.shape}{'^T' if tb else ''} "
                                   f"({k_a} != {k_b})")
    return apply(_matmul, (a, b), _PARAMS[ta, tb])


matmul.op = _matmul


def tensordot(a, b, axes, name=None):
    """Contracts `axes` of a with those of b (an int n means the last n of a, first n of b).

    >>> tg.tensordot(tg.ones((2, 3)), tg.ones((3, 4)), axes=1).shape
    (2, 4)
    """
    a, b = _b.as_tensor_pair(a, b)
    if isinstance(axes, int):
        ax_a = list(range(a.ndim - axes, a.ndim))
        ax_b = list(range(axes))
    else:
        ax_a, ax_b = ([x] if isinstance(x, int) else list(x) for x in axes)
        ax_a = [x % a.ndim for x in ax_a]
        ax_b = [x % b.ndim for x in ax_b]
    if [a.shape[i] for i in ax_a] != [b.shape[i] for i in ax_b]:
        raise InvalidArgumentError(f"tensordot: contracted axes {ax_a} of {a.shape} and "
                                   f"{ax_b} of {b.shape} differ in size")
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    k = math.prod([a.shape[i] for i in ax_a])
    at = reshape(transpose(a, free_a + ax_a), (-1, k))
    bt = reshape(transpose(b, ax_b + free_b), (k, -1))
    out = matmul(at, bt)
    return reshape(out, tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b))


# -- einsum --------------------------------------------------------------------------------------

def _parse_einsum(equation, shapes):
    """Explicit subscripts (ellipses replaced by letters) and the output."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise InvalidArgumentError(f"einsum: {equation!r} names {len(terms)} operands, got "
                                   f"{len(shapes)}")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    n_ell = max((len(s) - (len(t) - 3) for t, s in zip(terms, shapes) if "..." in t), default=0)
    ell = "".join(spare[:n_ell])
    out_terms = []
    for t, s in zip(terms, shapes):
        if "..." in t:
            k = len(s) - (len(t) - 3)
            t = t.replace("...", ell[n_ell - k:] if k else "")
        if len(t) != len(s):
            raise InvalidArgumentError(f"einsum: subscripts {t!r} do not match an operand of "
                                       f"shape {s}")
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = {}
        for t in out_terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return tuple(out_terms), out


def _einsum_vjp(ops, g, *operands, terms, out):
    # d/dX_i of sum(g * einsum(X...)) = einsum(g, X_j (j != i) -> X_i's subscripts);
    # batch axes of g get letters of their own; letters summed only inside X_i are broadcast back
    used = set("".join(terms) + out)
    spare = [c for c in string.ascii_letters if c not in used]
    nb = g.ndim - len(out)
    batch = "".join(spare[:nb])
    grads = []
    for i, (t, x) in enumerate(zip(terms, operands)):
        if len(set(t)) != len(t):
            raise InvalidArgumentError(f"einsum: the gradient for repeated subscripts within one "
                                       f"operand ({t!r}) is not supported")
        others = [(terms[j], operands[j]) for j in range(len(terms)) if j != i]
        avail = set(out).union(*[set(s) for s, _ in others]) if others else set(out)
        keep = "".join(c for c in t if c in avail)
        eq = ",".join([batch + out] + [s for s, _ in others]) + "->" + batch + keep
        gi = ops.einsum(eq, g, *[o for _, o in others])
        if keep != t:
            gi = ops.reshape(gi, g.shape[:nb] + tuple(x.shape[k] if c in avail else 1
                                                   for k, c in enumerate(t)))
            gi = ops.broadcast_to(gi, g.shape[:nb] + x.shape)
        grads.append(gi)
    return tuple(grads)


def _einsum_jvp(ops, ts, *operands, terms, out):
    # einsum is multilinear: d einsum(X_1, ..., X_n) = sum_i einsum(X_1, ..., dX_i, ..., X_n),
    # the tangent's batch axes getting letters of their own
    used = set("".join(terms) + out)
    spare = [c for c in string.ascii_letters if c not in used]
    total = None
    for i, t in enumerate(ts):
        if t is None:
            continue
        batch = "".join(spare[:t.ndim - len(terms[i])])
        subs = [batch + s if j == i else s for j, s in enumerate(terms)]
        args = [t if j == i else x for j, x in enumerate(operands)]
        term = ops.einsum(",".join(subs) + "->" + batch + out, *args)
        total = term if total is None else total + term
    return total


_einsum = def_op("einsum", lambda xp, *xs, terms, out:
                 xp.einsum(",".join(terms) + "->" + out, *xs, optimize=len(xs) > 2),
                 args=("*",), saves=("*",), vjp=_einsum_vjp, jvp=_einsum_jvp, variadic=True,
                 batch="einsum")


def einsum(equation, *inputs, name=None):
    """Einstein summation, as numpy.einsum (ellipses and implicit outputs included).

    >>> tg.einsum("ij,jk->ik", tg.ones((2, 3)), tg.ones((3, 4))).shape
    (2, 4)
    """
    xs = [tensor(x) for x in inputs]
    terms, out = _parse_einsum(equation, [x.shape for x in xs])
    return apply(_einsum, tuple(xs), {"terms": terms, "out": out})


# -- solve, inverse, determinants, Cholesky ------------------------------------------------------

def _check_square(x, op):
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise InvalidArgumentError(f"{op}: expected square matrices (..., n, n), got shape "
                                   f"{x.shape}")


def _solve_vjp(ops, g, matrix, out, rhs_shape, adjoint=False):
    # X = A^-1 B:  dB = A^-T g,  dA = -dB X^T  (transposed when A enters adjoint)
    gb = ops.solve(matrix, g, adjoint=not adjoint)
    ga = -ops.matmul(gb, out, transpose_b=True) if not adjoint else \
        -ops.matmul(out, gb, transpose_b=True)
    return ga, gb


def _solve_jvp(ops, ts, matrix, out, rhs_shape, adjoint=False):
    # X = A^-1 B:  dX = A^-1 (dB - dA X)  (A^T and dA^T when adjoint)
    da, db = ts
    rhs = None
    if db is not None:
        nb = db.ndim - len(rhs_shape)
        rhs = ops.reshape(db, db.shape[:nb] + (1,) * (out.ndim - len(rhs_shape)) + db.shape[nb:])
    if da is not None:
        dax = ops.matmul(_lift(ops, da, matrix, out), out, transpose_a=adjoint)
        rhs = -dax if rhs is None else rhs - dax
    return ops.solve(matrix, rhs, adjoint=adjoint)


# numpy's LAPACK calls raise LinAlgError for a singular or non-positive-definite input;
# CuPy's cuSOLVER calls never do (they return NaN, or a partial Cholesky factor). On a device
# the result is checked instead, so both raise the same error. The check costs one host sync
# per call (a reduction read back), on a GPU only.

def _device_check(xp, ok, message):
    """Raise numpy's LinAlgError(message) unless the device array `ok` is all true."""
    if xp is not np and not bool(xp.all(ok)):
        raise np.linalg.LinAlgError(message)


def _finite_if_input_finite(xp, out, *inputs):
    # LAPACK does not raise for NaN/inf input either: only a non-finite result of finite input
    # is a singular matrix
    ok = xp.isfinite(out).all()
    for x in inputs:
        ok = ok | ~xp.isfinite(x).all()
    return ok


def _solve_forward(xp, a, b, adjoint=False):
    if adjoint:
        a = _mT(a)
    # numpy's solve broadcasts the batch axes of a and b; CuPy's needs them equal
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if a.shape[:-2] != batch:
        a = xp.broadcast_to(a, batch + a.shape[-2:])
    if b.shape[:-2] != batch:
        b = xp.broadcast_to(b, batch + b.shape[-2:])
    out = xp.linalg.solve(a, b)
    _device_check(xp, _finite_if_input_finite(xp, out, a, b), "Singular matrix")
    return out


def _inv_forward(xp, x):
    out = xp.linalg.inv(x)
    _device_check(xp, _finite_if_input_finite(xp, out, x), "Singular matrix")
    return out


_solve = def_op("solve", _solve_forward, args=("matrix", "rhs"),
                saves=("matrix", "out", "rhs.shape"), vjp=_solve_vjp, jvp=_solve_jvp,
                batch="leading")


def solve(matrix, rhs, adjoint=False, name=None):
    """X with matrix @ X = rhs (rhs is (..., n, k), as TF).

    >>> tg.linalg.solve(tg.eye(2) * 2.0, tg.ones((2, 1))).numpy()
    array([[0.5],
           [0.5]], dtype=float32)
    """
    a, b = _b.as_tensor_pair(matrix, rhs)
    _check_square(a, "solve")
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise InvalidArgumentError(f"solve: rhs must be (..., {a.shape[-1]}, k) for a matrix of "
                                   f"shape {a.shape}, got {b.shape}")
    return apply(_solve, (a, b), {"adjoint": True} if adjoint else EMPTY)


solve.op = _solve

# d(A^-1) = -A^-1 dA A^-1  =>  dA = -A^-T g A^-T
_inv = def_op("inv", _inv_forward, saves=("out",),
              vjp=lambda ops, g, out: -ops.matmul(out, ops.matmul(g, out, transpose_b=True),
                                         transpose_a=True),
              jvp=lambda ops, t, out: -ops.matmul(out, ops.matmul(t, out)), batch="leading")


def inv(input, adjoint=False, name=None):  # noqa: A002
    """The matrix inverse over the last two axes.

    >>> tg.linalg.inv(tg.eye(2) * 4.0).numpy()
    array([[0.25, 0.  ],
           [0.  , 0.25]], dtype=float32)
    """
    x = floating(input, "inv")
    _check_square(x, "inv")
    y = apply(_inv, (x,), EMPTY)
    return matrix_transpose(y) if adjoint else y


inv.op = _inv


def _expand2(ops, s):
    return ops.reshape(s, s.shape + (1, 1))


def _inverse_for(ops, x, op):
    """A^-1 for the derivative of `op` (det, slogdet): TF's gradients need it too and raise for
    a singular input; the error names the function differentiated, not `inv`."""
    try:
        return ops.inv(x)
    except (InvalidArgumentError, np.linalg.LinAlgError) as e:
        raise InvalidArgumentError(
            f"{op}: the derivative of {op} at a singular matrix (shape {tuple(x.shape)}) is not "
            f"computed: it needs the matrix inverse ({e})") from None


# d det(A) = det(A) tr(A^-1 dA)  =>  dA = g det(A) A^-T
_det = def_op("det", lambda xp, x: xp.linalg.det(x), saves=("x", "out"),
              vjp=lambda ops, g, x, out:
              _expand2(ops, g * out) * ops.matrix_transpose(_inverse_for(ops, x, "det")),
              jvp=lambda ops, t, x, out: out * _trace_inv_times(ops, x, t, "det"), batch="leading")
# d log|det A| = tr(A^-1 dA)  =>  dA = g A^-T
_logabsdet = def_op("logabsdet", lambda xp, x: xp.linalg.slogdet(x)[1], saves=("x",),
                    vjp=lambda ops, g, x: _expand2(ops, g) *
                    ops.matrix_transpose(_inverse_for(ops, x, "slogdet")),
                    jvp=lambda ops, t, x: _trace_inv_times(ops, x, t, "slogdet"), batch="leading")


def _trace_inv_times(ops, x, t, op):
    # tr(A^-1 dA) = sum_ij (A^-T)_ij dA_ij
    return ops.reduce_sum(ops.matrix_transpose(_inverse_for(ops, x, op)) * t, axis=(-2, -1))


def det(input, name=None):  # noqa: A002
    """The determinant over the last two axes.

    >>> float(tg.linalg.det(tg.eye(2) * 3.0))
    9.0
    """
    x = floating(input, "det")
    _check_square(x, "det")
    return apply(_det, (x,), EMPTY)


det.op = _det


def slogdet(input, name=None):  # noqa: A002
    """(sign, log|det|) over the last two axes; the sign has no gradient.

    >>> [float(t) for t in tg.linalg.slogdet(tg.eye(2) * -2.0)]
    [1.0, 1.3862943649291992]
    """
    x = floating(input, "slogdet")
    _check_square(x, "slogdet")
    sign = type(x)(x._dev.xp.linalg.slogdet(x._data)[0].astype(x._data.dtype), x._dev)
    return sign, apply(_logabsdet, (x,), EMPTY)


def logdet(matrix, name=None):
    """log det of a Hermitian positive-definite matrix.

    >>> float(tg.linalg.logdet(tg.eye(2) * 2.0)) == float(tg.math.log(4.0))
    True
    """
    return slogdet(matrix)[1]


def _cholesky_vjp(ops, g, L):
    # A = L L^T (Murray 2016): P = Phi(L^T g), S = L^-T P L^-1, dA = (S + S^T) / 2, where Phi
    # keeps the lower triangle and halves the diagonal
    n = L.shape[-1]
    phi = ops.const_like(L, np.tril(np.ones((n, n))) - 0.5 * np.eye(n))
    P = ops.matmul(L, g, transpose_a=True) * phi
    Linv = ops.inv(L)
    S = ops.matmul(Linv, ops.matmul(P, Linv), transpose_a=True)
    return (S + ops.matrix_transpose(S)) * 0.5


def _cholesky_forward(xp, x):
    try:
        L = xp.linalg.cholesky(x)
        # CuPy's potrf stops at the first non-positive (or NaN) pivot and leaves it on the
        # diagonal: a factor is complete iff its diagonal is positive
        _device_check(xp, xp.diagonal(L, axis1=-2, axis2=-1) > 0,
                      "Matrix is not positive definite")
        return L
    except np.linalg.LinAlgError as e:
        raise ValueError(f"the matrix is not positive definite ({e})") from None


def _cholesky_jvp(ops, t, L):
    # A = L L^T:  dL = L Phi(L^-1 dA L^-T), Phi as above; dA is symmetrised first, as the VJP
    # treats the input as symmetric (its result is symmetric)
    n = L.shape[-1]
    phi = ops.const_like(L, np.tril(np.ones((n, n))) - 0.5 * np.eye(n))
    Linv = ops.inv(L)
    sym = (t + ops.matrix_transpose(t)) * 0.5
    return ops.matmul(L, ops.matmul(Linv, ops.matmul(sym, Linv, transpose_b=True)) * phi)


_cholesky = def_op("cholesky", _cholesky_forward, saves=("out",), vjp=_cholesky_vjp,
                   jvp=_cholesky_jvp, batch="leading")


def cholesky(input, name=None):  # noqa: A002
    """The lower-triangular L with L L^T = input (symmetric positive definite).

    >>> tg.linalg.cholesky(tg.eye(2) * 4.0).numpy()
    array([[2., 0.],
           [0., 2.]], dtype=float32)
    """
    x = floating(input, "cholesky")
    _check_square(x, "cholesky")
    return apply(_cholesky, (x,), EMPTY)


cholesky.op = _cholesky





def diag_part(input, k=0, name=None):  # noqa: A002
    """The main diagonal of the last two axes.

    >>> tg.linalg.diag_part(tg.constant([[1.0, 2.0], [3.0, 4.0]])).numpy()
    array([1., 4.], dtype=float32)
    """
    x = tensor(input)
    if x.ndim < 2:
        raise InvalidArgumentError(f"diag_part: needs rank >= 2, got shape {x.shape}")
    i = np.arange(min(x.shape[-1], x.shape[-2]))
    return getitem(x, (Ellipsis, i, i))


def tensor_diag(diagonal, name=None):
    """A tensor of rank 2k with `diagonal` (rank k) on its diagonal, zeros elsewhere:
    `out[i1, ..., ik, i1, ..., ik] = diagonal[i1, ..., ik]` (TF's tf.linalg.tensor_diag).

    >>> tg.linalg.tensor_diag(tg.constant([1.0, 2.0])).numpy()
    array([[1., 0.],
           [0., 2.]], dtype=float32)
    """
    d = tensor(diagonal)
    if d.ndim == 0:
        raise InvalidArgumentError("tensor_diag: the diagonal must have rank >= 1, got a scalar")
    n = d.size
    i = np.arange(n)
    # the transpose of reading the diagonal: a scatter of the values into zeros (exact for
    # inf and nan values, unlike a product with an identity matrix)
    out = apply(_scatter_op, (reshape(d, (n,)),),
                {"key": (i, i), "inner_shape": (n, n), "r": 1, "advanced": True})
    return reshape(out, d.shape + d.shape)


def trace(x, name=None):
    """The sum of the main diagonal of the last two axes.

    >>> float(tg.linalg.trace(tg.eye(3)))
    3.0
    """
    return reduce_sum(diag_part(x), axis=-1)


def norm(tensor_, ord="euclidean", axis=None, keepdims=False, name=None):  # noqa: A002
    """Vector norms (euclidean / 2, 1, inf, any p > 0) over `axis`, and the Frobenius norm of
    a matrix (`ord='fro'` or 'euclidean' with two axes).

    >>> float(tg.norm(tg.constant([3.0, 4.0])))
    5.0
    """
    x = floating(tensor_, "norm")
    if ord in ("euclidean", "fro", 2, 2.0):
        return _u.sqrt(reduce_sum(_u.square(x), axis=axis, keepdims=keepdims))
    if ord in (1, 1.0):
        return reduce_sum(_u.abs(x), axis=axis, keepdims=keepdims)
    if ord in (np.inf, "inf"):
        return reduce_max(_u.abs(x), axis=axis, keepdims=keepdims)
    if isinstance(ord, (int, float)) and ord > 0:
        p = float(ord)
        return _b.pow(reduce_sum(_b.pow(_u.abs(x), p), axis=axis, keepdims=keepdims), 1.0 / p)
    raise InvalidArgumentError(f"norm: ord {ord!r} is not supported; valid are 'euclidean', "
                               "'fro', 1, 2, inf or a positive number")


def global_norm(t_list, name=None):
    """sqrt(sum of squares of every tensor in the list).

    >>> float(tg.linalg.global_norm([tg.constant([3.0]), tg.constant([4.0])]))
    5.0
    """
    ts = [t for t in t_list if t is not None]
    return _u.sqrt(sum_list([reduce_sum(_u.square(tensor(t))) for t in ts]))


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """Scales every tensor of the list by clip_norm / max(global_norm, clip_norm), as TF: returns
    (the clipped list, with None kept, and the global norm). The gradient of each output is
    finite where the norm is 0.

    >>> clipped, norm = tg.clip_by_global_norm([tg.constant([3.0]), tg.constant([4.0])], 1.0)
    >>> float(norm), [t.numpy() for t in clipped]
    (5.0, [array([0.6], dtype=float32), array([0.8], dtype=float32)])
    """
    if isinstance(t_list, (Tensor, str)) or not hasattr(t_list, "__iter__"):
        raise TypeError(f"clip_by_global_norm: t_list must be a list or tuple of tensors, got "
                        f"{type(t_list).__name__}")
    t_list = list(t_list)
    ts = [tensor(t) for t in t_list if t is not None]
    if use_norm is None:  # global_norm, with sqrt's branch chosen away from 0 (finite gradients)
        squares = sum_list([reduce_sum(_u.square(t)) for t in ts])
        positive = _b.greater(squares, 0.0)
        norm = _b.where(positive, _u.sqrt(_b.where(positive, squares, 1.0)), squares)
    else:
        norm = tensor(use_norm)
    c = _b.as_tensor_pair(norm, clip_norm, "clip_by_global_norm")[1]
    if float(c.numpy()) < 0:
        raise InvalidArgumentError(f"clip_by_global_norm: clip_norm must be >= 0, got "
                                   f"{float(c.numpy())}")
    # clip_norm * min(1 / norm, 1 / clip_norm), with the 1 / norm branch chosen away from 0
    safe = _b.where(_b.greater(norm, 0.0), norm, 1.0)
    scale = c * _b.minimum(1.0 / safe, 1.0 / c)
    clipped = [None if t is None else tensor(t) * _u.cast(scale, tensor(t).dtype) for t in t_list]
    return clipped, norm


def matvec(a, b, transpose_a=False, adjoint_a=False, name=None):
    """The product of a matrix (..., m, n) and a vector (..., n), as tf.linalg.matvec.

    >>> tg.linalg.matvec(tg.constant([[1.0, 2.0], [3.0, 4.0]]), tg.constant([1.0, 1.0])).numpy()
    array([3., 7.], dtype=float32)
    """
    a, b = _b.as_tensor_pair(a, b, "matvec")
    if b.ndim < 1:
        raise InvalidArgumentError(f"matvec: b must be a vector (..., n), got shape {b.shape}")
    out = matmul(a, reshape(b, b.shape + (1,)), transpose_a=transpose_a, adjoint_a=adjoint_a)
    return reshape(out, out.shape[:-1])


def sum_list(ts):
    total = ts[0]
    for t in ts[1:]:
        total = total + t
    return total


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """Rescales t so that its L2 norm over `axes` is at most `clip_norm`.

    >>> float(tg.norm(tg.clip_by_norm(tg.constant([3.0, 4.0]), 1.0)))
    1.0
    """
    x = floating(t, "clip_by_norm")
    l2sum = reduce_sum(_u.square(x), axis=axes, keepdims=True)
    # TF's double where: at a zero vector the norm is l2sum itself (0, with a finite gradient)
    # and sqrt only ever sees positive values, so no NaN reaches the gradient
    positive = _b.greater(l2sum, 0.0)
    l2 = _b.where(positive, _u.sqrt(_b.where(positive, l2sum, 1.0)), l2sum)
    c = _b.as_tensor_pair(x, clip_norm)[1]
    return x * c / _b.maximum(l2, c)





__all__ = public(globals(), ("linalg",), special=(
    (("", "linalg"), (einsum, matmul, norm, tensordot)),
    (("",), (clip_by_norm, clip_by_global_norm)),
    ((), (sum_list,))))
