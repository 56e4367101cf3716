"""Linear algebra: matmul, einsum, solve, inverse, determinants, Cholesky.

Matrix rules act on the last two axes, so any leading axes of `g` — the op's own batch of
matrices or a Jacobian's batch of cotangents — broadcast through `matmul` and `solve`.
"""
import string
from collections import namedtuple

import math

import numpy as np

from ..backends import checks, cublas
from .registry import InvalidArgumentError, def_op, forward_on
from ._base import EMPTY, apply, floating, public, tensor
from ..core.tensor import Tensor
from . import binary as _b, unary as _u
from . import batching
from .kernels import cpu_einsum_outer
from .reduce import reduce_max, reduce_sum
from .shape import (_scatter_op, broadcast_to, expand_dims, gather, getitem,
                    matrix_transpose, reshape, stack, transpose)


def _mT(x):
    return x.swapaxes(-1, -2)


# a b^T with up to _SKINNY rows in `a` and at least _SKINNY_K columns runs as (b a^T)^T: OpenBLAS
# packs the larger matrix faster as the first operand (8 rows against a (1024, 512) weight: 20%
# less time). The result is column-major: a product reads it without a copy, but an elementwise
# op that meets it with a row-major operand (a VJP's g * f'(x)) runs 1.5-2.5x slower, which
# costs more than the product saved from 64 rows on, or with a short inner axis (W5's
# (64, 10) @ (10, 256) cotangent product: 7.8 us either way, 16 us against 29 with the
# activation's VJP after it).
_SKINNY, _SKINNY_K = 16, 64


def _skinny(rows, k, n):
    """Whether a (rows, k) @ (n, k)^T product runs as (b a^T)^T."""
    return 1 < rows <= min(_SKINNY, n - 1) and k >= _SKINNY_K


def _matmul_forward(xp, a, b, ta=False, tb=False):
    if a.ndim == 2 and b.ndim == 2 and a.dtype.kind != "V":  # (the common cases first: a
        if not tb:  # dense layer's product and its VJP's, a.T g and g b.T)
            return xp.matmul(a.T if ta else a, b)
        if not ta and not _skinny(a.shape[0], a.shape[1], b.shape[0]):
            return xp.matmul(a, b.T)
    if a.dtype.kind == "V":  # bfloat16: numpy's product of ml_dtypes' is float32 (accumulated in
        return _matmul_forward(xp, a.astype(np.float32), b.astype(np.float32),  # float32, as
                               ta, tb).astype(a.dtype)  # TF's and cuBLAS's), rounded back
    if ta:
        a = _mT(a)
    elif tb and b.ndim == 2 and a.ndim >= 2 and \
            _skinny(math.prod(a.shape[:-1]), a.shape[-1], b.shape[0]):
        # a b^T for a with few rows (a Jacobian's cotangents, a small batch) as (b a^T)^T
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


def _matmul_flops(in_shapes, out_shape, params):
    # 2 m n k per product matrix
    a, b = in_shapes
    ta, tb = params.get("ta", False), params.get("tb", False)
    m, k = (a[-1], a[-2]) if ta else (a[-2], a[-1])
    n = b[-2] if tb else b[-1]
    return 2 * math.prod(out_shape[:-2]) * m * n * k


def _batch_matmul(op, vals, flags, params, size):
    # both batched with a contraction of length 1 (per-example weight gradients of a dense
    # layer): outer products, one einsum on the operands as they are (the size-1 contraction
    # axis summed), instead of numpy's batched matmul, a loop of rank-1 matrix products that
    # takes 5-8x as long; numpy's einsum also beats a broadcast multiply here (its
    # sum-of-products loop writes (64, 100, 128) float32 at memory speed, the multiply's
    # ufunc loop pays per row of the output). Otherwise as broadcasting ops
    a, b = vals
    if flags[0] and flags[1] and a._data.dtype.kind == "f":
        ta, tb = params.get("ta", False), params.get("tb", False)
        sa, sb = a._data.shape, b._data.shape
        if sa[-2 if ta else -1] == 1 and sa[:-2] == sb[:-2]:
            axes = _LETTERS[:len(sa) - 2]
            terms = (axes + ("yx" if ta else "xy"), axes + ("zy" if tb else "yz"))
            return apply(_einsum, (a, b), {"terms": terms, "out": axes + "xz"})
    return batching.broadcast(op, vals, flags, params, size)


_LETTERS = "abcdefghijklmnopqrstuvw"


def _matmul_into(forward, in_shapes, params):
    """tg.function's replay on numpy: the product written into a buffer of its plan (None
    where `_matmul_forward` computes it another way: skinny b^T products, batches)."""
    ta, tb = params.get("ta", False), params.get("tb", False)
    a, b = in_shapes
    if set(params) - {"ta", "tb"}:
        return None
    if len(a) == 2 and len(b) == 2 and (not tb or ta or not _skinny(a[0], a[1], b[0])):
        def product(x, y, out):
            return np.matmul(x.T if ta else x, y.T if tb else y, out=out)
        return product, False
    if not ta and len(a) > 2 and len(b) == 2 and \
            not (tb and _skinny(math.prod(a[:-1]), a[-1], b[0])):
        def rows(x, y, out):  # leading axes of `a` only: one GEMM on its rows, as the forward
            np.matmul(x.reshape(-1, x.shape[-1]), y.T if tb else y,
                      out=out.reshape(-1, out.shape[-1]))
            return out
        return rows, False
    return None


_matmul = def_op("matmul", _matmul_forward, args=("a", "b"), saves=("a", "b"),
                 vjp=(_matmul_vjp_a, _matmul_vjp_b), jvp=_matmul_jvp, batch=_batch_matmul,
                 fresh=True, flops=_matmul_flops, replay_into=_matmul_into,
                 per_example="product", kernels={"cuda": cublas.matmul})


# -- tg.function's rewrite of a product with a constant (function/rewrite.py) --------------------

def _repeated_axes(c):
    """The axes of `c` (but the last, which a product sums over) along which every slice equals
    the first."""
    return tuple(ax for ax in range(c.ndim - 1) if c.shape[ax] > 1 and
                 np.array_equal(c, np.take(c, [0], axis=ax).repeat(c.shape[ax], axis=ax)))


def _one_hot_rows(c):
    """Each row's column of the 1 when every row (last axis) of `c` is a unit vector, else
    None."""
    if c.shape[-1] == 0 or c.size == 0:
        return None
    idx = np.argmax(c, axis=-1)
    unit = np.zeros_like(c)
    np.put_along_axis(unit, idx[..., None], 1, axis=-1)
    return idx.astype(np.int64) if np.array_equal(c, unit) else None


def _constant_product(r, n):
    """`matmul(c, b)` with `c` a constant (not transposed) and `b` a matrix: computed on one
    copy of `c` where `c` repeats along an axis other than the summed one (a batch Jacobian's
    cotangent basis), and as a row selection (`gather`) where its rows are unit vectors (the
    identity basis of `jacobian`, rows of `one_hot`). The selection differs from the product
    only where `b` holds an infinity or NaN: the product's `0 * inf` is NaN in every row, the
    selection keeps each row's own values."""
    a, b = n.ins
    if n.params.get("ta") or not r.is_constant(a) or len(r.meta(b)[1]) != 2:
        return None
    dev = n.dev
    _, shape, dtype, _ = r.meta(n.out)
    c = r.constant_value(a)
    if c.ndim < 2 or c.dtype.kind != "f":
        return None
    axes = _repeated_axes(c)
    small = c[tuple(slice(0, 1) if ax in axes else slice(None) for ax in range(c.ndim))]
    idx = _one_hot_rows(small)
    if not axes and idx is None:
        return None
    tb = n.params.get("tb", False)
    bshape = r.meta(b)[1]
    rows = bshape[::-1] if tb else bshape  # op(b): (k, n)
    small_shape = small.shape[:-1] + rows[1:]
    target = None if axes else n.out
    nodes = []
    if idx is not None:
        src = b
        if tb:
            t = r.node(dev, transpose.op, (b,), {"perm": (1, 0)}, rows, dtype)
            nodes.append(t)
            src = t.out
        nodes.append(r.node(dev, gather.op, (src, r.constant(dev, idx)), {"axis": -2},
                            small_shape, dtype, target))
    else:
        nodes.append(r.node(dev, _matmul, (r.constant(dev, small), b), n.params, small_shape,
                            dtype, target))
    if axes:
        nodes.append(r.node(dev, broadcast_to.op, (nodes[-1].out,), {"shape": tuple(shape)},
                            shape, dtype, n.out))
    return nodes


_matmul.rewrite = _constant_product


_PARAMS = {(False, False): EMPTY, (True, False): {"ta": True}, (False, True): {"tb": True},
           (True, True): {"ta": True, "tb": True}}


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           name=None):
    """Matrix product over the last two axes, broadcasting leading axes (rank >= 2, as TF).

    >>> tg.matmul(tg.ones((2, 3)), tg.ones((3, 4))).shape
    (2, 4)
    """
    if type(a) is not Tensor or type(b) is not Tensor:
        a, b = _b.as_tensor_pair(a, b)
    ta = bool(transpose_a or adjoint_a)
    tb = bool(transpose_b or adjoint_b)
    sa = a._data.shape
    sb = b._data.shape
    if len(sa) < 2 or len(sb) < 2:
        raise InvalidArgumentError(f"matmul: both operands need rank >= 2, got shapes {a.shape} "
                                   f"and {b.shape}; use tg.expand_dims or tg.tensordot for "
                                   "vectors")
    k_a = sa[-2] if ta else sa[-1]
    k_b = sb[-1] if tb else sb[-2]
    if k_a != k_b:
        raise InvalidArgumentError(f"matmul: inner dimensions differ: {a.shape}"
                                   f"{'^T' if ta else ''} @ {b.shape}{'^T' if tb else ''} "
                                   f"({k_a} != {k_b})")
    return apply(_matmul, (a, b), _PARAMS[ta, tb])


matmul.op = _matmul


def _matmul_on_arrays(dev, a, b, transpose_a=False, transpose_b=False):
    """The rules' products on arrays: the backend's kernel where it has one, else the
    forward itself (no parameter dict: three of these in each dense layer's VJP)."""
    if _matmul.kernels and dev.name in _matmul.kernels:
        return forward_on(_matmul, dev, (a, b), {"ta": transpose_a, "tb": transpose_b})
    return _matmul_forward(dev.xp, a, b, transpose_a, transpose_b)


matmul.on_arrays = _matmul_on_arrays


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


def _einsum_flops(in_shapes, out_shape, params):
    # one multiply-add per point of the index space (one add for a single operand)
    sizes = {}
    for term, shape in zip(params["terms"], in_shapes):
        sizes.update(zip(term, shape))
    total = math.prod(sizes.values())
    return 2 * total if len(in_shapes) > 1 else total


def _batch_einsum(op, vals, flags, params, size):
    # a letter that no term uses is the batch axis of the batched operands and the output
    used = set("".join(params["terms"]) + params["out"])
    letter = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA"
                  if c not in used)
    terms = tuple(letter + t if b else t for t, b in zip(params["terms"], flags))
    return apply(op, vals, dict(params, terms=terms, out=letter + params["out"]))


_einsum = def_op("einsum", lambda xp, *xs, terms, out:
                 xp.einsum(",".join(terms) + "->" + out, *xs, optimize=len(xs) > 2),
                 args=("*",), saves=("*",), vjp=_einsum_vjp, jvp=_einsum_jvp, variadic=True,
                 batch=_batch_einsum, kernels={"numpy": cpu_einsum_outer}, flops=_einsum_flops)


def einsum(equation, *inputs, name=None):
    """Einstein summation, as numpy.einsum (ellipses and implicit outputs included).

    >>> tg.einsum("ij,jk->ik", tg.ones((2, 3)), tg.ones((3, 4))).shape
    (2, 4)
    """
    xs = [tensor(x) for x in inputs]
    terms, out = _parse_einsum(equation, [x.shape for x in xs])
    return apply(_einsum, tuple(xs), {"terms": terms, "out": out})


einsum.op = _einsum  # its entry, for passes keyed on entries (function/, autodiff/)


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
    if a.size == 0 or b.size == 0:  # an empty batch or system (CuPy's solve rejects them)
        return xp.zeros(b.shape, dtype=xp.result_type(a, b))
    out = xp.linalg.solve(a, b)
    _device_check(xp, _finite_if_input_finite(xp, out, a, b), "Singular matrix")
    return out


def _inv_forward(xp, x):
    out = xp.linalg.inv(x)
    _device_check(xp, _finite_if_input_finite(xp, out, x), "Singular matrix")
    return out


_solve = def_op("solve", _solve_forward, args=("matrix", "rhs"),
                saves=("matrix", "out", "rhs.shape"), vjp=_solve_vjp, jvp=_solve_jvp,
                batch="leading", flops=lambda ins, out, p: math.prod(ins[0][:-2]) * (
                    2 * ins[0][-1] ** 3 // 3 + 2 * ins[0][-1] ** 2 * ins[1][-1]))


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
              jvp=lambda ops, t, out: -ops.matmul(out, ops.matmul(t, out)), batch="leading",
              flops=lambda ins, out, p: math.prod(ins[0][:-2]) * 2 * ins[0][-1] ** 3)


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


def _lu_flops(in_shapes, out_shape, params):
    return math.prod(in_shapes[0][:-2]) * 2 * in_shapes[0][-1] ** 3 // 3


# d det(A) = det(A) tr(A^-1 dA)  =>  dA = g det(A) A^-T
_det = def_op("det", lambda xp, x: xp.linalg.det(x), saves=("x", "out"),
              vjp=lambda ops, g, x, out:
              _expand2(ops, g * out) * ops.matrix_transpose(_inverse_for(ops, x, "det")),
              jvp=lambda ops, t, x, out: out * _trace_inv_times(ops, x, t, "det"),
              batch="leading", flops=_lu_flops)
# d log|det A| = tr(A^-1 dA)  =>  dA = g A^-T
_logabsdet = def_op("logabsdet", lambda xp, x: xp.linalg.slogdet(x)[1], saves=("x",),
                    vjp=lambda ops, g, x: _expand2(ops, g) *
                    ops.matrix_transpose(_inverse_for(ops, x, "slogdet")),
                    jvp=lambda ops, t, x: _trace_inv_times(ops, x, t, "slogdet"),
                    batch="leading", flops=_lu_flops)


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


# the sign of det(A), in A's dtype (no gradient: it is piecewise constant)
_det_sign = def_op("det_sign", lambda xp, x: xp.linalg.slogdet(x)[0].astype(x.dtype),
                   batch="leading")


def slogdet(input, name=None):  # noqa: A002
    """(sign, log|det|) over the last two axes; the sign has no gradient.

    >>> [float(t) for t in tg.linalg.slogdet(tg.eye(2) * -2.0)]
    [1.0, 1.3862943649291992]
    """
    x = floating(input, "slogdet")
    _check_square(x, "slogdet")
    return apply(_det_sign, (x,), EMPTY), apply(_logabsdet, (x,), EMPTY)


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
                   jvp=_cholesky_jvp, batch="leading",
                   flops=lambda ins, out, p: math.prod(ins[0][:-2]) * ins[0][-1] ** 3 // 3)


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
    """Diagonal k (0 the main one, k > 0 above it) of the last two axes.

    >>> tg.linalg.diag_part(tg.constant([[1.0, 2.0], [3.0, 4.0]])).numpy()
    array([1., 4.], dtype=float32)
    """
    x = tensor(input)
    if x.ndim < 2:
        raise InvalidArgumentError(f"diag_part: needs rank >= 2, got shape {x.shape}")
    if not isinstance(k, (int, np.integer)):
        raise NotImplementedError(f"diag_part: only a single diagonal k (an int) is supported, "
                                  f"got k={k!r}")
    m, n = x.shape[-2:]
    k = int(k)
    if not -m < k < n and m and n:
        raise InvalidArgumentError(f"diag_part: k must be in ({-m}, {n}) for matrices of shape "
                                   f"({m}, {n}), got {k}")
    return getitem(x, (Ellipsis,) + _diag_index(max(min(m - max(-k, 0), n - max(k, 0)), 0), k))


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
    xp = c._dev.xp
    if checks.deferred(xp) and not isinstance(clip_norm, (int, float, np.number)):
        checks.check(xp, c._data < 0, _negative_clip_norm, c._data)  # no sync on a device
    elif float(clip_norm if isinstance(clip_norm, (int, float, np.number)) else c.numpy()) < 0:
        raise _negative_clip_norm(c.numpy())
    # clip_norm * min(1 / norm, 1 / clip_norm), with the 1 / norm branch chosen away from 0
    safe = _b.where(_b.greater(norm, 0.0), norm, 1.0)
    scale = c * _b.minimum(1.0 / safe, 1.0 / c)
    clipped = [None if t is None else tensor(t) * _u.cast(scale, tensor(t).dtype) for t in t_list]
    return clipped, norm


def _negative_clip_norm(c):
    return InvalidArgumentError(f"clip_by_global_norm: clip_norm must be >= 0, got {float(c)}")


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



# -- band part, diagonals, triangular solves -----------------------------------------------------

def _band_mask(xp, m, n, num_lower, num_upper):
    """in_band(i, j) = (num_lower < 0 or i - j <= num_lower) and (num_upper < 0 or
    j - i <= num_upper) over an (m, n) matrix, as TF's MatrixBandPart."""
    keep = xp.ones((m, n), dtype=bool)
    if num_upper >= 0:
        keep &= xp.tri(m, n, num_upper, dtype=bool)
    if num_lower >= 0:
        keep &= ~xp.tri(m, n, -num_lower - 1, dtype=bool)
    return keep


def _band_part_forward(xp, x, lower, upper):
    keep = _band_mask(xp, x.shape[-2], x.shape[-1], lower, upper)
    return xp.where(keep, x, x.dtype.type(0))  # a where: inf and nan outside the band become 0


# the band part is a mask: its own transpose, and linear
_band_part = def_op("band_part", _band_part_forward, linear=True, batch="leading",
                    vjp=lambda ops, g, lower, upper: ops.band_part(g, lower, upper))


def band_part(input, num_lower, num_upper, name=None):  # noqa: A002
    """Zeros everything outside a central band of each innermost matrix: entry (i, j) is kept
    where (num_lower < 0 or i - j <= num_lower) and (num_upper < 0 or j - i <= num_upper)
    (tf.linalg.band_part; a negative count keeps the whole triangle).

    >>> tg.linalg.band_part(tg.ones((3, 3)), 0, -1).numpy()
    array([[1., 1., 1.],
           [0., 1., 1.],
           [0., 0., 1.]], dtype=float32)
    """
    x = tensor(input)
    if x.ndim < 2:
        raise InvalidArgumentError(f"band_part: input must be at least 2-dim, received shape "
                                   f"{x.shape}")
    lower, upper = int(num_lower), int(num_upper)
    m, n = x.shape[-2:]
    if lower > m:
        raise InvalidArgumentError(f"band_part: num_lower must be negative or less or equal to "
                                   f"number of rows ({m}) got: {lower}")
    if upper > n:
        raise InvalidArgumentError(f"band_part: num_upper must be negative or less or equal to "
                                   f"number of columns ({n}) got: {upper}")
    return apply(_band_part, (x,), {"lower": lower, "upper": upper})


band_part.op = _band_part
matrix_band_part = band_part  # TF 1's name (tf.compat.v1.matrix_band_part)


def _diag_index(n, k):
    """Rows and columns of diagonal k (k > 0 above the main one) for a diagonal of length n."""
    i = np.arange(n)
    return (i, i + k) if k >= 0 else (i - k, i)


def _diag_forward(xp, d, k, rows, cols, padding):
    out = xp.full(d.shape[:-1] + (rows, cols), padding, dtype=d.dtype)
    r, c = _diag_index(d.shape[-1], k)
    out[..., xp.asarray(r), xp.asarray(c)] = d
    return out


# out[..., i, i + k] = d[..., i]:  g_d = g[..., i, i + k];  the tangent has no padding
_diag = def_op("diag", _diag_forward, batch="leading",
               vjp=lambda ops, g, k, rows, cols, padding:
               ops.getitem(g, (Ellipsis,) + _diag_index(min(rows - max(-k, 0),
                                                            cols - max(k, 0)), k)),
               jvp=lambda ops, t, k, rows, cols, padding:
               ops.op("diag", t, k=k, rows=rows, cols=cols, padding=0.0))


def diag(diagonal, name="diag", k=0, num_rows=-1, num_cols=-1, padding_value=0,
         align="RIGHT_LEFT"):
    """Batched diagonal matrices: the last axis of `diagonal` on diagonal `k` (k > 0 above the
    main one) of (num_rows, num_cols) matrices filled with `padding_value` elsewhere
    (tf.linalg.diag with one diagonal; the sizes default to the smallest that fit).

    >>> tg.linalg.diag(tg.constant([1.0, 2.0])).numpy()
    array([[1., 0.],
           [0., 2.]], dtype=float32)
    """
    d = tensor(diagonal)
    if not isinstance(k, (int, np.integer)):
        raise NotImplementedError(f"diag: only a single diagonal k (an int) is supported, got "
                                  f"k={k!r}")
    k = int(k)
    if d.ndim < 1:
        raise InvalidArgumentError(f"diag: diagonal must be at least 1-dim, received shape "
                                   f"{d.shape}")
    n = d.shape[-1]
    if num_rows == -1 and num_cols == -1:  # square, as TF
        rows = cols = n + abs(k)
    else:  # the one not given is the smallest that holds the diagonal
        rows = n + max(-k, 0) if num_rows == -1 else int(num_rows)
        cols = n + max(k, 0) if num_cols == -1 else int(num_cols)
    if min(rows - max(-k, 0), cols - max(k, 0)) != n:
        raise InvalidArgumentError(f"diag: diagonal {k} of a ({rows}, {cols}) matrix has length "
                                   f"{max(min(rows - max(-k, 0), cols - max(k, 0)), 0)}, got a "
                                   f"diagonal of shape {d.shape}")
    return apply(_diag, (d,), {"k": k, "rows": rows, "cols": cols,
                               "padding": float(padding_value)})


diag.op = _diag


def adjoint(matrix, name=None):
    """The conjugate transpose of the last two axes (tapegpu's dtypes are real: the transpose).

    >>> tg.linalg.adjoint(tg.zeros((4, 2, 3))).shape
    (4, 3, 2)
    """
    return matrix_transpose(matrix)


def _triangle(xp, a, lower):
    n = a.shape[-1]
    return xp.where(_band_mask(xp, n, n, -1, 0) if lower else _band_mask(xp, n, n, 0, -1),
                    a, a.dtype.type(0))


def _triangular_solve_forward(xp, a, b, lower=True, adjoint=False):
    # an LU solve of the triangle: batched on every backend (LAPACK's trtrs and cupyx's
    # solve_triangular take one matrix); LU leaves a triangular matrix as it is up to pivoting
    return _solve_forward(xp, _triangle(xp, a, lower), b, adjoint)


def _triangular_solve_vjp(ops, g, matrix, out, rhs_shape, lower=True, adjoint=False):
    # X = T^-1 B (T the triangle):  gB = T^-T g,  gT = -gB X^T, kept on the triangle
    gb = ops.triangular_solve(matrix, g, lower=lower, adjoint=not adjoint)
    ga = -ops.matmul(gb, out, transpose_b=True) if not adjoint else \
        -ops.matmul(out, gb, transpose_b=True)
    return ops.band_part(ga, -1, 0) if lower else ops.band_part(ga, 0, -1), gb


def _triangular_solve_jvp(ops, ts, matrix, out, rhs_shape, lower=True, adjoint=False):
    # dX = T^-1 (dB - dT X)  (T^T and dT^T when adjoint), dT the tangent's triangle
    da, db = ts
    rhs = None
    if db is not None:  # the tangent's batch axes in front of the matrix's batch axes
        nb = db.ndim - len(rhs_shape)
        rhs = ops.reshape(db, db.shape[:nb] + (1,) * (out.ndim - len(rhs_shape)) + db.shape[nb:])
    if da is not None:
        tri = ops.band_part(da, -1, 0) if lower else ops.band_part(da, 0, -1)
        dax = ops.matmul(_lift(ops, tri, matrix, out), out, transpose_a=adjoint)
        rhs = -dax if rhs is None else rhs - dax
    return ops.triangular_solve(matrix, rhs, lower=lower, adjoint=adjoint)


_triangular_solve = def_op("triangular_solve", _triangular_solve_forward,
                           batch="leading_broadcast",
                           args=("matrix", "rhs"), saves=("matrix", "out", "rhs.shape"),
                           vjp=_triangular_solve_vjp, jvp=_triangular_solve_jvp)


def triangular_solve(matrix, rhs, lower=True, adjoint=False, name=None):
    """X with T @ X = rhs for the lower (or upper) triangle T of `matrix` (T^T @ X = rhs with
    adjoint=True); the other triangle is not read (tf.linalg.triangular_solve). Batch axes
    broadcast. A zero on the diagonal raises, as tg.linalg.solve does.

    >>> tg.linalg.triangular_solve(tg.constant([[2.0, 9.0], [1.0, 1.0]]),
    ...                            tg.constant([[2.0], [2.0]])).numpy()
    array([[1.],
           [1.]], dtype=float32)
    """
    a, b = _b.as_tensor_pair(matrix, rhs, "triangular_solve")
    a = floating(a, "triangular_solve")
    _check_square(a, "triangular_solve")
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise InvalidArgumentError(f"triangular_solve: rhs must be (..., {a.shape[-1]}, k) for "
                                   f"a matrix of shape {a.shape}, got {b.shape}")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise InvalidArgumentError(f"triangular_solve: the batch shapes of matrix {a.shape} and "
                                   f"rhs {b.shape} do not broadcast") from None
    return apply(_triangular_solve, (a, b), {"lower": bool(lower), "adjoint": bool(adjoint)})


triangular_solve.op = _triangular_solve


def cholesky_solve(chol, rhs, name=None):
    """X with A @ X = rhs, given the Cholesky factor `chol` of A (tf.linalg.cholesky_solve):
    two triangular solves, L Y = rhs then L^T X = Y.

    >>> tg.linalg.cholesky_solve(tg.eye(2) * 2.0, tg.ones((2, 1))).numpy()
    array([[0.25],
           [0.25]], dtype=float32)
    """
    chol, rhs = _b.as_tensor_pair(chol, rhs, "cholesky_solve")
    _check_square(chol, "cholesky_solve")
    if rhs.ndim < 2 or rhs.shape[-2] != chol.shape[-1]:
        raise InvalidArgumentError(f"cholesky_solve: rhs must be (..., {chol.shape[-1]}, k) for "
                                   f"a factor of shape {chol.shape}, got {rhs.shape}")
    y = triangular_solve(chol, rhs, lower=True)
    return triangular_solve(chol, y, lower=True, adjoint=True)


# -- decompositions: svd, eigh, qr -----------------------------------------------------------------
# An op has one output, so a decomposition's op returns its factors packed into one array
# (..., sum of the factors' sizes), the factors flattened one after the other; its public
# function splits them (views), and its rules split the cotangent the same way. A factor that
# no loss reads gets a zero cotangent, which the rules handle like any other.

def _pack(xp, *parts):
    lead = parts[0].shape[:-2]
    return xp.concatenate([p.reshape(lead + (p.shape[-2] * p.shape[-1],)) for p in parts],
                          axis=-1)


def _unpack(reshape_, v, shapes):
    """The factors (..., r, c) of a packed value `v` (array or tensor, any leading axes)."""
    parts, start = [], 0
    for r, c in shapes:
        part = v[..., start:start + r * c]
        parts.append(reshape_(part, tuple(v.shape[:-1]) + (r, c)))
        start += r * c
    return parts


def _pack_ops(ops, *parts):
    return ops.concat([ops.reshape(p, tuple(p.shape[:-2]) + (p.shape[-2] * p.shape[-1],))
                       for p in parts], axis=-1)


def _nan_for_nonfinite(xp, fn, x):
    """fn(x) (a tuple of arrays over the batch of x), NaN for the matrices of x that are not
    finite, as TF's decompositions return. numpy's raise LinAlgError for them; cuSOLVER's
    return without an error, partly finite (an H200's SVD of a 3x3 matrix with one NaN: s =
    [nan, 0.61, 0.51]), so on a device the non-finite matrices are replaced by zeros and their
    results by NaN without asking the host. A failure on finite input still raises."""
    if xp is np:
        try:
            return fn(x)
        except np.linalg.LinAlgError:
            bad = ~np.isfinite(x).all(axis=(-2, -1))
            if not bad.any():
                raise
    else:
        bad = ~xp.isfinite(x).all(axis=(-2, -1))
    outs = fn(xp.where(bad[..., None, None], 0, x))
    return tuple(xp.where(bad.reshape(bad.shape + (1,) * (o.ndim - bad.ndim)), np.nan, o)
                 for o in outs)


def _safe_reciprocal(x):
    # TF's _SafeReciprocal: 1/x away from 0 and 0 at 0, so that equal singular values (or
    # eigenvalues) contribute nothing instead of inf
    return x / (x * x + 1e-20)


def _row(ops, s):
    """A vector (..., k) as a row (..., 1, k)."""
    return ops.reshape(s, tuple(s.shape[:-1]) + (1, s.shape[-1]))


def _svd_shapes(m, n, full):
    k = min(m, n)
    return ((1, k), (m, m if full else k), (n, n if full else k))


def _svd_forward(xp, x, full=False, uv=True):
    if not uv:
        return _nan_for_nonfinite(xp, lambda a: (xp.linalg.svd(a, compute_uv=False),), x)[0]
    u, s, vh = _nan_for_nonfinite(xp, lambda a: xp.linalg.svd(a, full_matrices=full), x)
    return _pack(xp, s[..., None, :], u, _mT(vh))


def _svd_full_check(m, n, full, what):
    if full and abs(m - n) > 1:
        raise NotImplementedError(f"svd: the {what} is not implemented for abs(m - n) > 1 when "
                                  f"full_matrices is True (input ({m}, {n})), as in TF: the "
                                  "extra singular vectors are not unique")


def _svd_vjp(ops, g, x, out, full=False, uv=True):
    # TF's SvdGrad (Giles 2008; Townsend 2016), with F_ij = 1 / (s_j^2 - s_i^2) off the
    # diagonal and 0 where singular values are equal (TF's safe reciprocal)
    m, n = x.shape[-2:]
    if not uv:  # A = U diag(s) V^T:  dA = U diag(g) V^T
        _, u, v = ops.svd(x)
        return ops.matmul(u * _row(ops, g), v, transpose_b=True)
    _svd_full_check(m, n, full, "gradient")
    s, u, v = _unpack(ops.reshape, out, _svd_shapes(m, n, full))
    gs, gu, gv = _unpack(ops.reshape, g, _svd_shapes(m, n, full))
    adjoint = m > n  # work on A^T = V S U^T, so that m <= n
    if adjoint:
        m, n, u, v, gu, gv = n, m, v, u, gv, gu
    s_col = ops.matrix_transpose(s)
    f = _safe_reciprocal(s * s - s_col * s_col)
    v1, gv1 = v[..., :, :m], gv[..., :, :m]
    f_u = f * ops.matmul(u, gu, transpose_a=True)
    f_v = f * ops.matmul(v1, gv1, transpose_a=True)
    eye = ops.const_like(s, np.eye(m))
    inner = gs * eye + (f_u + ops.matrix_transpose(f_u)) * s + \
        s_col * (f_v + ops.matrix_transpose(f_v))
    ga = ops.matmul(u, ops.matmul(inner, v1, transpose_b=True))
    if m != n:
        gv1t = ops.matrix_transpose(gv1)
        rest = gv1t - ops.matmul(ops.matmul(gv1t, v1), v1, transpose_b=True)
        if full:
            v2, gv2 = v[..., :, m:], gv[..., :, m:]
            rest = rest - ops.matmul(ops.matmul(v1, gv2, transpose_a=True), v2,
                                     transpose_b=True)
        ga = ga + ops.matmul(u * _safe_reciprocal(s), rest)
    return ops.matrix_transpose(ga) if adjoint else ga


def _svd_jvp(ops, t, x, out, full=False, uv=True):
    # dS = U^T dA V:  ds = diag(dS),  dU = U (F o (dS S + S dS^T)) + (I - U U^T) dA V S^-1,
    # dV = V (F o (S dS + dS^T S)) (for m >= n; the transpose otherwise)
    m, n = x.shape[-2:]
    if not uv:
        _, u, v = ops.svd(x)
        ds = ops.matmul(ops.matmul(u, t, transpose_a=True), v)
        return ops.reduce_sum(ds * ops.const_like(ds, np.eye(min(m, n))), axis=-2)
    _svd_full_check(m, n, full, "derivative")
    s, u, v = _unpack(ops.reshape, out, _svd_shapes(m, n, full))
    adjoint = m < n  # work on A^T, so that m >= n
    if adjoint:
        m, n, u, v, t = n, m, v, u, ops.matrix_transpose(t)
    u1 = u[..., :, :n]
    s_col = ops.matrix_transpose(s)
    f = _safe_reciprocal(s * s - s_col * s_col)
    tv = ops.matmul(t, v)
    dS = ops.matmul(u1, tv, transpose_a=True)
    eye = ops.const_like(s, np.eye(n))
    ds = ops.reduce_sum(dS * eye, axis=-2, keepdims=True)
    dSS = dS * s
    SdS = s_col * dS
    du = ops.matmul(u1, f * (dSS + ops.matrix_transpose(dSS)))
    dv = ops.matmul(v, f * (SdS + ops.matrix_transpose(SdS)))
    if m > n:
        s_inv = _safe_reciprocal(s)
        du = du + (tv - ops.matmul(u1, dS)) * s_inv
        if full:  # U2 spans the rest: U1^T dU2 = -(U2^T dU1)^T, U2^T dU2 = 0 (one column)
            u2 = u[..., :, n:]
            proj = ops.matmul(u2, tv, transpose_a=True) * s_inv
            du = ops.concat([du, -ops.matmul(u1, proj, transpose_b=True)], axis=-1)
    if adjoint:
        du, dv = dv, du
    return _pack_ops(ops, ds, du, dv)


_svd = def_op("svd", _svd_forward, saves=("x", "out"), vjp=_svd_vjp, jvp=_svd_jvp,
              batch="leading")


def svd(tensor, full_matrices=False, compute_uv=True, name=None):  # noqa: A002
    """The singular value decomposition tensor = u diag(s) v^T of each innermost matrix:
    returns (s, u, v) as tf.linalg.svd (v, not v^T; s descending), or s alone with
    compute_uv=False. The gradient is TF's: well defined for distinct nonzero singular values;
    equal ones contribute nothing to it (TF's convention) and with full_matrices=True it needs
    abs(m - n) <= 1. Non-finite matrices give NaN, as in TF.

    >>> s, u, v = tg.linalg.svd(tg.constant([[3.0, 0.0], [0.0, -2.0]]))
    >>> s.numpy()
    array([3., 2.], dtype=float32)
    """
    x = floating(tensor, "svd")
    if x.ndim < 2:
        raise InvalidArgumentError(f"svd: input must have rank >= 2, got shape {x.shape}")
    params = {"full": bool(full_matrices), "uv": bool(compute_uv)}
    packed = apply(_svd, (x,), params)
    if not compute_uv:
        return packed
    m, n = x.shape[-2:]
    s, u, v = _unpack(reshape, packed, _svd_shapes(m, n, bool(full_matrices)))
    return reshape(s, s.shape[:-2] + (s.shape[-1],)), u, v


svd.op = _svd


def _eigh_forward(xp, x, vectors=True):
    if not vectors:
        return _nan_for_nonfinite(xp, lambda a: (xp.linalg.eigvalsh(a),), x)[0]
    e, v = _nan_for_nonfinite(xp, xp.linalg.eigh, x)
    return _pack(xp, e[..., None, :], v)


def _lower_sym_vjp(ops, ga):
    # eigh reads the lower triangle only: A = tril(X) + tril(X, -1)^T, whose adjoint maps G to
    # tril(G + G^T) with G's diagonal once
    n = ga.shape[-1]
    phi = ops.const_like(ga, np.tril(np.ones((n, n))) - 0.5 * np.eye(n))
    return (ga + ops.matrix_transpose(ga)) * phi


def _lower_sym_jvp(ops, t):
    # the tangent of the symmetric matrix eigh sees: tril(dX) + tril(dX, -1)^T
    n = t.shape[-1]
    half = t * ops.const_like(t, np.tril(np.ones((n, n))) - 0.5 * np.eye(n))
    return half + ops.matrix_transpose(half)


def _eigh_vjp(ops, g, x, out, vectors=True):
    # A V = V diag(e):  dA = V (diag(g_e) + F o (V^T g_V)) V^T, F_ij = 1 / (e_j - e_i) off the
    # diagonal, 0 for equal eigenvalues (TF's SelfAdjointEigV2 gradient)
    n = x.shape[-1]
    if not vectors:
        _, v = ops.eigh(x)
        return _lower_sym_vjp(ops, ops.matmul(v * _row(ops, g), v, transpose_b=True))
    e, v = _unpack(ops.reshape, out, ((1, n), (n, n)))
    ge, gv = _unpack(ops.reshape, g, ((1, n), (n, n)))
    f = _safe_reciprocal(e - ops.matrix_transpose(e))
    inner = ge * ops.const_like(e, np.eye(n)) + f * ops.matmul(v, gv, transpose_a=True)
    return _lower_sym_vjp(ops, ops.matmul(v, ops.matmul(inner, v, transpose_b=True)))


def _eigh_jvp(ops, t, x, out, vectors=True):
    # M = V^T dA V:  de = diag(M),  dV = V (F o M)
    n = x.shape[-1]
    dA = _lower_sym_jvp(ops, t)
    eye = ops.const_like(t, np.eye(n))
    if not vectors:
        _, v = ops.eigh(x)
        return ops.reduce_sum(ops.matmul(v, ops.matmul(dA, v), transpose_a=True) * eye, axis=-2)
    e, v = _unpack(ops.reshape, out, ((1, n), (n, n)))
    M = ops.matmul(v, ops.matmul(dA, v), transpose_a=True)
    de = ops.reduce_sum(M * eye, axis=-2, keepdims=True)
    dv = ops.matmul(v, _safe_reciprocal(e - ops.matrix_transpose(e)) * M)
    return _pack_ops(ops, de, dv)


_eigh = def_op("eigh", _eigh_forward, saves=("x", "out"), vjp=_eigh_vjp, jvp=_eigh_jvp,
               batch="leading")


def eigh(tensor, name=None):  # noqa: A002
    """Eigenvalues (ascending) and eigenvectors (columns) of each innermost symmetric matrix,
    (e, v) as tf.linalg.eigh; only the lower triangle is read. The gradient is TF's: defined
    for distinct eigenvalues, equal ones contributing nothing; the eigenvectors' signs are
    arbitrary, so a loss should not depend on them. Non-finite matrices give NaN.

    >>> e, v = tg.linalg.eigh(tg.constant([[2.0, 0.0], [0.0, 1.0]]))
    >>> e.numpy()
    array([1., 2.], dtype=float32)
    """
    x = floating(tensor, "eigh")
    _check_square(x, "eigh")
    n = x.shape[-1]
    e, v = _unpack(reshape, apply(_eigh, (x,), EMPTY), ((1, n), (n, n)))
    return reshape(e, e.shape[:-2] + (n,)), v


eigh.op = _eigh


def eigvalsh(tensor, name=None):  # noqa: A002
    """The eigenvalues (ascending) of each innermost symmetric matrix (lower triangle read), as
    tf.linalg.eigvalsh.

    >>> tg.linalg.eigvalsh(tg.constant([[2.0, 1.0], [1.0, 2.0]])).numpy()
    array([1., 3.], dtype=float32)
    """
    x = floating(tensor, "eigvalsh")
    _check_square(x, "eigvalsh")
    return apply(_eigh, (x,), {"vectors": False})


def _qr_shapes(m, n, full):
    k = m if full else min(m, n)
    return ((m, k), (k, n))


def _qr_forward(xp, x, full=False):
    return _pack(xp, *xp.linalg.qr(x, mode="complete" if full else "reduced"))


def _qr_full_check(m, n, full, what):
    if full and m > n:
        raise NotImplementedError(f"qr: the {what} is not implemented when nrows > ncols and "
                                  f"full_matrices is True (input ({m}, {n})), as in TF: the "
                                  "extra columns of q are not unique")


def _times_r_inv(ops, x, r, transpose=False):
    """x R^-1 (x R^-T with transpose=True) for upper-triangular R; x may have more leading
    axes."""
    return ops.matrix_transpose(ops.triangular_solve(r, ops.matrix_transpose(x), lower=False,
                                                     adjoint=not transpose))


def _qr_vjp_deep(ops, q, r, gq, gr):
    # TF's QrGrad for m >= n (Roberts et al. 2020): with T = tril(Q^T gQ - gQ^T Q + R gR^T -
    # gR R^T),  gA = Q (gR + T R^-T) + (gQ - Q Q^T gQ) R^-T
    qdq = ops.matmul(q, gq, transpose_a=True)
    rdr = ops.matmul(r, gr, transpose_b=True)
    tril = ops.band_part(qdq - ops.matrix_transpose(qdq) + rdr - ops.matrix_transpose(rdr),
                         -1, 0)
    return ops.matmul(q, gr + _times_r_inv(ops, tril, r, transpose=True)) + \
        _times_r_inv(ops, gq - ops.matmul(q, qdq), r, transpose=True)


def _qr_vjp(ops, g, x, out, full=False):
    m, n = x.shape[-2:]
    _qr_full_check(m, n, full, "gradient")
    q, r = _unpack(ops.reshape, out, _qr_shapes(m, n, full))
    gq, gr = _unpack(ops.reshape, g, _qr_shapes(m, n, full))
    if m >= n:
        return _qr_vjp_deep(ops, q, r, gq, gr)
    # wide: A = [X, Y], R = [U, V] with X = Q U square and V = Q^T Y
    y = x[..., :, m:]
    gu, gv = gr[..., :, :m], gr[..., :, m:]
    gx = _qr_vjp_deep(ops, q, r[..., :, :m], gq + ops.matmul(y, gv, transpose_b=True), gu)
    return ops.concat([gx, ops.matmul(q, gv)], axis=-1)


def _qr_jvp_deep(ops, q, r, t):
    # C = Q^T dA R^-1, Omega = tril(C, -1) - tril(C, -1)^T (Q^T dQ, skew):
    # dR = (C - Omega) R,  dQ = dA R^-1 - Q (C - Omega)
    t_rinv = _times_r_inv(ops, t, r)
    c = ops.matmul(q, t_rinv, transpose_a=True)
    low = ops.band_part(c, -1, 0) - ops.band_part(c, 0, 0)
    upper = c - low + ops.matrix_transpose(low)
    return t_rinv - ops.matmul(q, upper), ops.matmul(upper, r)


def _qr_jvp(ops, t, x, out, full=False):
    m, n = x.shape[-2:]
    _qr_full_check(m, n, full, "derivative")
    q, r = _unpack(ops.reshape, out, _qr_shapes(m, n, full))
    if m >= n:
        return _pack_ops(ops, *_qr_jvp_deep(ops, q, r, t))
    dq, du = _qr_jvp_deep(ops, q, r[..., :, :m], t[..., :, :m])
    y = x[..., :, m:]
    dv = ops.matmul(dq, y, transpose_a=True) + ops.matmul(q, t[..., :, m:], transpose_a=True)
    return _pack_ops(ops, dq, ops.concat([du, dv], axis=-1))


_qr = def_op("qr", _qr_forward, saves=("x", "out"), vjp=_qr_vjp, jvp=_qr_jvp, batch="leading")


def qr(input, full_matrices=False, name=None):  # noqa: A002
    """The QR decomposition of each innermost (m, n) matrix: (q, r) with orthonormal columns in
    q and upper-triangular r, as tf.linalg.qr (Householder, as LAPACK: r's diagonal may be
    negative). The gradient is TF's: r must be invertible on its leading square, and
    full_matrices=True with m > n has none (the extra columns of q are not unique).

    >>> q, r = tg.linalg.qr(tg.constant([[3.0, 1.0], [4.0, 2.0]]))
    >>> float(tg.reduce_max(tg.abs(tg.matmul(q, r) - [[3.0, 1.0], [4.0, 2.0]]))) < 1e-5
    True
    """
    x = floating(input, "qr")
    if x.ndim < 2:
        raise InvalidArgumentError(f"qr: input must have rank >= 2, got shape {x.shape}")
    full = bool(full_matrices)
    m, n = x.shape[-2:]
    return tuple(_unpack(reshape, apply(_qr, (x,), {"full": full} if full else EMPTY),
                         _qr_shapes(m, n, full)))


qr.op = _qr


# -- pseudo-inverse, least squares, matrix exponential ---------------------------------------------

def _check_matrix(x, op):
    if x.ndim < 2:
        raise InvalidArgumentError(f"{op}: expected matrices (..., m, n), got shape {x.shape}")


def _cutoff_reciprocal(s, rcond):
    """1/s for singular values above rcond * max(s), 0 for the others, by TF's route: small
    values become inf first, so that no NaN reaches the gradient."""
    if s.size == 0:
        return s
    cutoff = rcond * reduce_max(s, axis=-1, keepdims=True)
    return 1.0 / _b.where(_b.greater(s, cutoff), s, math.inf)


def pinv(a, rcond=None, validate_args=False, name=None):
    """The Moore-Penrose pseudo-inverse of each innermost matrix, from its SVD: singular values
    at or below rcond * max(s) count as 0 (rcond defaults to 10 * max(m, n) * eps, as
    tf.linalg.pinv). Its gradient is the SVD's (distinct singular values).

    >>> tg.linalg.pinv(tg.constant([[2.0, 0.0], [0.0, 0.0]])).numpy()
    array([[0.5, 0. ],
           [0. , 0. ]], dtype=float32)
    """
    x = floating(a, "pinv")
    _check_matrix(x, "pinv")
    if rcond is None:
        rcond = 10.0 * max(x.shape[-2:]) * float(np.finfo(x._data.dtype).eps)
    s, u, v = svd(x)
    return matmul(v * expand_dims(_cutoff_reciprocal(s, float(rcond)), -2), u,
                  transpose_b=True)


def lstsq(matrix, rhs, l2_regularizer=0.0, fast=True, name=None):
    """X minimising ||matrix X - rhs||^2 + l2_regularizer ||X||^2 for each innermost (m, n)
    matrix and (m, k) right-hand side (tf.linalg.lstsq). fast=True solves the normal
    equations by Cholesky as TF: (A^T A + l I)^-1 A^T B for m >= n, A^T (A A^T + l I)^-1 B
    (the minimum-norm solution) for m < n; the matrix must have full rank. fast=False uses
    the SVD (rank-deficient matrices too, singular values below 10 max(m, n) eps of the
    largest counting as 0) and, unlike TF, applies the regularizer and has a gradient.

    >>> tg.linalg.lstsq(tg.constant([[1.0], [1.0]]), tg.constant([[1.0], [3.0]])).numpy()
    array([[2.]], dtype=float32)
    """
    a, b = _b.as_tensor_pair(matrix, rhs, "lstsq")
    a = floating(a, "lstsq")
    _check_matrix(a, "lstsq")
    if b.ndim < 2 or b.shape[-2] != a.shape[-2]:
        raise InvalidArgumentError(f"lstsq: rhs must be (..., {a.shape[-2]}, k) for a matrix of "
                                   f"shape {a.shape}, got {b.shape}")
    lam = float(l2_regularizer.numpy() if isinstance(l2_regularizer, Tensor) else l2_regularizer)
    if lam < 0:
        raise InvalidArgumentError(f"lstsq: l2_regularizer must be >= 0, got {lam}")
    m, n = a.shape[-2:]
    if not fast:
        s, u, v = svd(a)
        if lam == 0:
            inv_s = _cutoff_reciprocal(s, 10.0 * max(m, n) * float(np.finfo(a._data.dtype).eps))
        else:
            inv_s = s / (_u.square(s) + lam)
        return matmul(v * expand_dims(inv_s, -2), matmul(u, b, transpose_a=True))
    eye = Tensor(a._dev.xp.eye(min(m, n), dtype=a._data.dtype), a._dev)
    if m >= n:
        gram = matmul(a, a, transpose_a=True)
        return cholesky_solve(cholesky(gram + lam * eye if lam else gram),
                              matmul(a, b, transpose_a=True))
    gram = matmul(a, a, transpose_b=True)
    return matmul(a, cholesky_solve(cholesky(gram + lam * eye if lam else gram), b),
                  transpose_a=True)


# Pade approximants r_d(A) = (V - U)^-1 (V + U) of degree d and the 1-norm up to which each is
# accurate to the unit roundoff (Higham 2005, "The scaling and squaring method for the matrix
# exponential revisited"; TF uses the same table): float64 up to degree 13, float32 up to 7.
_PADE = {
    3: (120.0, 60.0, 12.0, 1.0),
    5: (30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0),
    7: (17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0),
    9: (17643225600.0, 8821612800.0, 2075673600.0, 302702400.0, 30270240.0, 2162160.0,
        110880.0, 3960.0, 90.0, 1.0),
    13: (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
         129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
         40840800.0, 960960.0, 16380.0, 182.0, 1.0),
}
_THETA = {np.dtype(np.float64): ((3, 1.495585217958292e-2), (5, 2.539398330063230e-1),
                                 (7, 9.504178996162932e-1), (9, 2.097847961257068),
                                 (13, 5.371920351148152)),
          np.dtype(np.float32): ((3, 4.258730016922831e-1), (5, 1.880152677804762),
                                 (7, 3.925724783138660))}


def _pade(xp, a, d):
    b = _PADE[d]
    eye = xp.eye(a.shape[-1], dtype=a.dtype)
    a2 = a @ a
    if d < 13:
        powers = [eye, a2]
        while len(powers) <= d // 2:
            powers.append(powers[-1] @ a2)
        u = a @ sum(b[2 * i + 1] * p for i, p in enumerate(powers))
        v = sum(b[2 * i] * p for i, p in enumerate(powers))
        return u, v
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 +
             b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + \
        b[0] * eye
    return u, v


def _expm_forward(xp, x):
    if x.size == 0:
        return x.copy()
    theta = _THETA[x.dtype]
    norm1 = xp.abs(x).sum(axis=-2).max(axis=-1)  # (...): each matrix's 1-norm
    largest = float(norm1.max())
    degree = next((d for d, t in theta if largest <= t), None)
    if degree is not None:
        squarings = None
    else:  # scale each matrix by 2^-s_i into the last degree's range, square back s_i times
        degree, top = theta[-1]
        squarings = xp.maximum(xp.ceil(xp.log2(norm1 / top)), 0)
        x = x / (2.0 ** squarings).astype(x.dtype)[..., None, None]
    u, v = _pade(xp, x, degree)
    out = xp.linalg.solve(v - u, v + u)
    if squarings is not None:
        s = squarings[..., None, None]
        for i in range(int(squarings.max())):
            out = xp.where(s > i, out @ out, out)
    return out


def _expm_frechet(ops, a, e):
    """The Frechet derivative L(A, E) of expm, the upper-right block of expm([[A, E], [0, A]])
    (Mathias 1996); e may have more leading axes than a."""
    n = a.shape[-1]
    a = ops.broadcast_to(a, tuple(e.shape))
    top = ops.concat([a, e], axis=-1)
    bottom = ops.concat([ops.zeros_like(e), a], axis=-1)
    return ops.expm(ops.concat([top, bottom], axis=-2))[..., :n, n:]


# d expm(A) = L(A, dA);  the adjoint of L(A, .) is L(A^T, .)
_expm = def_op("expm", _expm_forward, saves=("x",), batch="leading",
               vjp=lambda ops, g, x: _expm_frechet(ops, ops.matrix_transpose(x), g),
               jvp=lambda ops, t, x: _expm_frechet(ops, x, t))


def expm(input, name=None):  # noqa: A002
    """The matrix exponential of each innermost square matrix, by Pade approximation with
    scaling and squaring (Higham 2005), as tf.linalg.expm; each matrix of a batch is scaled by
    its own norm. Gradients are exact Frechet derivatives (block-triangular expm), not the
    derivative of the approximation.

    >>> tg.linalg.expm(tg.zeros((2, 2))).numpy()
    array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    x = floating(input, "expm")
    _check_square(x, "expm")
    return apply(_expm, (x,), EMPTY)


expm.op = _expm


# -- LU with partial pivoting ----------------------------------------------------------------------
# The op's output packs lu (the unit-lower L below the diagonal, U on and above it) and the row
# permutation p as floats (exact: n < 2^24), with LU = A[p]; the public function casts p back.

def _lu_forward(xp, x):
    n = x.shape[-1]
    batch = x.shape[:-2]
    a = x.reshape((math.prod(batch), n, n)).copy()
    rows = xp.arange(a.shape[0])
    perm = xp.broadcast_to(xp.arange(n), a.shape[:2]).copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in range(n):  # Doolittle, each step on the whole batch; pivot as LAPACK's getrf
            piv = xp.argmax(xp.abs(a[:, k:, k]), axis=-1) + k
            row, p = a[rows, k].copy(), perm[rows, k].copy()
            a[rows, k], perm[rows, k] = a[rows, piv], perm[rows, piv]
            a[rows, piv], perm[rows, piv] = row, p
            a[:, k + 1:, k] /= a[:, k, k][:, None]
            a[:, k + 1:, k + 1:] -= a[:, k + 1:, k, None] * a[:, k, None, k + 1:]
    if not bool(xp.all(xp.diagonal(a, axis1=-2, axis2=-1) != 0)):
        raise np.linalg.LinAlgError("Input is not invertible")
    return xp.concatenate([a.reshape(batch + (n * n,)), perm.astype(x.dtype).reshape(batch + (n,))],
                          axis=-1)


def _lu_factors(ops, out):
    """L (unit diagonal), U and the one-hot permutation P (P A = A[p] = L U) from the output."""
    n = (math.isqrt(4 * out.shape[-1] + 1) - 1) // 2
    lu_ = ops.reshape(out[..., :n * n], tuple(out.shape[:-1]) + (n, n))
    eye = ops.const_like(lu_, np.eye(n))
    lower = ops.band_part(lu_, -1, 0) - lu_ * eye + eye
    perm = ops.cast(ops.equal(out[..., n * n:, None], ops.arange_like(out, n)), lu_.dtype)
    return n, lower, ops.band_part(lu_, 0, -1), perm


def _lu_vjp(ops, g, out):
    # P A = L U: with M = tril(L^T gL, -1) + triu(gU U^T) (gL, gU the parts of g),
    # gA = P^T L^-T M U^-T
    n, lower, upper, perm = _lu_factors(ops, out)
    glu = ops.reshape(g[..., :n * n], tuple(g.shape[:-1]) + (n, n))
    ltg = ops.matmul(lower, glu, transpose_a=True)
    m = ops.band_part(ltg, -1, 0) - ops.band_part(ltg, 0, 0) + \
        ops.band_part(ops.matmul(glu, upper, transpose_b=True), 0, -1)
    y = ops.triangular_solve(lower, m, lower=True, adjoint=True)
    y = _times_r_inv(ops, y, upper, transpose=True)
    return ops.matmul(perm, y, transpose_a=True)


def _lu_jvp(ops, t, out):
    # X = L^-1 P dA U^-1:  d lu = L tril(X, -1) + triu(X) U;  p has no tangent
    n, lower, upper, perm = _lu_factors(ops, out)
    x = _times_r_inv(ops, ops.triangular_solve(lower, ops.matmul(perm, t)), upper)
    dlu = ops.matmul(lower, ops.band_part(x, -1, 0) - ops.band_part(x, 0, 0)) + \
        ops.matmul(ops.band_part(x, 0, -1), upper)
    return ops.concat([ops.reshape(dlu, tuple(dlu.shape[:-2]) + (n * n,)),
                       ops.zeros_like(t[..., 0, :])], axis=-1)


_lu = def_op("lu", _lu_forward, saves=("out",), vjp=_lu_vjp, jvp=_lu_jvp, batch="leading")

Lu = namedtuple("Lu", ["lu", "p"])


def lu(input, output_idx_type=np.int32, name=None):  # noqa: A002
    """The LU decomposition with partial pivoting of each innermost square matrix, as
    tf.linalg.lu: (lu, p) with L (unit diagonal, below) and U (on and above the diagonal)
    packed in lu and L U = input[p] (rows permuted by p). A singular matrix raises, as TF.

    >>> lu_, p = tg.linalg.lu(tg.constant([[1.0, 2.0], [3.0, 4.0]]))
    >>> p.numpy(), lu_.numpy()
    (array([1, 0], dtype=int32), array([[3.        , 4.        ],
           [0.33333334, 0.6666666 ]], dtype=float32))
    """
    x = floating(input, "lu")
    _check_square(x, "lu")
    n = x.shape[-1]
    packed = apply(_lu, (x,), EMPTY)
    return Lu(reshape(packed[..., :n * n], x.shape), _u.cast(packed[..., n * n:],
                                                            output_idx_type))


lu.op = _lu


def _permutation(perm, like):
    """The one-hot matrix P of a permutation p: (P B)[i] = B[p[i]]."""
    p = tensor(perm)
    n = p.shape[-1]
    cols = Tensor(p._dev.xp.arange(n, dtype=p._data.dtype), p._dev)
    return _u.cast(_b.equal(expand_dims(p, -1), cols), like.dtype)


def _lu_lower_upper(lower_upper):
    n = lower_upper.shape[-1]
    eye = Tensor(lower_upper._dev.xp.eye(n, dtype=lower_upper._data.dtype), lower_upper._dev)
    return (band_part(lower_upper, -1, 0) - lower_upper * eye + eye,
            band_part(lower_upper, 0, -1))


def lu_reconstruct(lower_upper, perm, validate_args=False, name=None):
    """The matrix whose tf.linalg.lu is (lower_upper, perm): P^T L U.

    >>> tg.linalg.lu_reconstruct(*tg.linalg.lu(tg.constant([[1.0, 2.0], [3.0, 4.0]]))).numpy()
    array([[1., 2.],
           [3., 4.]], dtype=float32)
    """
    lu_ = floating(lower_upper, "lu_reconstruct")
    _check_square(lu_, "lu_reconstruct")
    lower, upper = _lu_lower_upper(lu_)
    return matmul(_permutation(perm, lu_), matmul(lower, upper), transpose_a=True)


def lu_solve(lower_upper, perm, rhs, validate_args=False, name=None):
    """X with A X = rhs, from A's tf.linalg.lu (lower_upper, perm): two triangular solves.

    >>> lu_, p = tg.linalg.lu(tg.constant([[0.0, 2.0], [4.0, 0.0]]))
    >>> tg.linalg.lu_solve(lu_, p, tg.constant([[2.0], [4.0]])).numpy()
    array([[1.],
           [1.]], dtype=float32)
    """
    lu_, b = _b.as_tensor_pair(lower_upper, rhs, "lu_solve")
    _check_square(lu_, "lu_solve")
    if b.ndim < 2 or b.shape[-2] != lu_.shape[-1]:
        raise InvalidArgumentError(f"lu_solve: rhs must be (..., {lu_.shape[-1]}, k) for a "
                                   f"factorisation of shape {lu_.shape}, got {b.shape}")
    lower, upper = _lu_lower_upper(lu_)
    y = triangular_solve(lower, matmul(_permutation(perm, lu_), b), lower=True)
    return triangular_solve(upper, y, lower=False)


def lu_matrix_inverse(lower_upper, perm, validate_args=False, name=None):
    """The inverse of A from its tf.linalg.lu (lower_upper, perm).

    >>> lu_, p = tg.linalg.lu(tg.eye(2) * 4.0)
    >>> tg.linalg.lu_matrix_inverse(lu_, p).numpy()
    array([[0.25, 0.  ],
           [0.  , 0.25]], dtype=float32)
    """
    lu_ = floating(lower_upper, "lu_matrix_inverse")
    n = lu_.shape[-1]
    eye = Tensor(lu_._dev.xp.eye(n, dtype=lu_._data.dtype), lu_._dev)
    return lu_solve(lu_, perm, broadcast_to(eye, lu_.shape))


def cross(a, b, name=None):
    """The cross product a x b of 3-vectors along the last axis (the inputs have one shape),
    as tf.linalg.cross.

    >>> tg.linalg.cross(tg.constant([1.0, 0.0, 0.0]), tg.constant([0.0, 1.0, 0.0])).numpy()
    array([0., 0., 1.], dtype=float32)
    """
    a, b = tensor(a), tensor(b)
    if a.shape != b.shape or a.ndim == 0 or a.shape[-1] != 3 or a.dtype != b.dtype:
        raise InvalidArgumentError(f"cross: a and b must have one dtype and one shape whose "
                                   f"last axis is 3, got {a.dtype.name} {a.shape} and "
                                   f"{b.dtype.name} {b.shape}")
    ax, ay, az = (getitem(a, (Ellipsis, i)) for i in range(3))
    bx, by, bz = (getitem(b, (Ellipsis, i)) for i in range(3))
    return stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], axis=-1)


# -- tg.function's diagonal pass (function/diagonal.py): how a value diagonal over a
# Jacobian's basis goes through the op (returns ("diag", D, p), ("plain",) or None)

def _diagonal_matmul(ps, n):
    a, b = n.ins
    if (a in ps.diag) == (b in ps.diag):
        return None
    ta, tb = n.params.get("ta", False), n.params.get("tb", False)
    if set(n.params) - {"ta", "tb"}:
        return None
    _, out_shape, dtype, dev = ps.meta(n.out)
    r = len(out_shape)
    v, other = (a, b) if a in ps.diag else (b, a)
    d, p, size = ps.diag[v]
    if len(ps.shape(v)) != r or r < 3 or ps.shape(v)[0] != out_shape[0]:
        return None
    if v == a:  # the axis of V that the product sums over
        contracted = r - 2 if ta else r - 1
    else:
        contracted = r - 1 if tb else r - 2
    if p != contracted:
        o = ps.k_free(other, r, dev)
        if o is None:
            return None
        ins = [d, o] if v == a else [o, d]
        dd = ps.emit(_matmul, ins, n.params, out_shape[1:], dtype, dev)
        if p < r - 2:
            return "diag", dd, p
        return "diag", dd, (r - 2 if v == a else r - 1)
    # b is summed over: per-example outer products (rank 3, a matrix as the other operand)
    if r != 3 or len(ps.shape(other)) != 2:
        return None
    # D as (b, the other axis of V): V's product matrix is (b, columns) or (rows, b)
    dm = ps.transpose2(d, dev) if (tb if v == b else not ta) else d
    if v == b:  # out[k] = A^T[k, :] outer D[k, :], A = other (transposed when ta)
        xm = other if ta else ps.transpose2(other, dev)
        u, w = xm, dm
    else:  # out[k] = D[:, k] outer B[k, :], B = other (transposed when tb)
        xm = ps.transpose2(other, dev) if tb else other
        u, w = dm, xm
    bs, m = ps.shape(u)
    nn = ps.shape(w)[1]
    u3 = ps.reshape(u, (bs, m, 1), dev)
    w3 = ps.reshape(w, (bs, 1, nn), dev)
    ps.emit(_b.multiply.op, [u3, w3], {}, out_shape, dtype, dev, out=n.out)
    ps.defined.add(n.out)
    return ("plain",)


_matmul.diagonal = _diagonal_matmul


__all__ = public(globals(), ("linalg",), special=(
    (("", "linalg"), (einsum, matmul, norm, tensordot)),
    (("",), (clip_by_norm, clip_by_global_norm)),
    ((), (sum_list,))))
