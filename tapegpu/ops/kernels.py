"""Kernel entries for op declarations: `def_op(..., **activation_kernels(name))` and the like.

Each function returns the `kernels=` and `vjp_kernels=` of one op: per backend name, a forward
or VJP that launches our CUDA kernels (`cuda` on a GPU, `cuda_emu` on the CPU; see
`backends.kernels.KernelSet`) or a CPU kernel (`numpy`, `tapegpu/backends/_cpu.c`). Each returns
`NotImplemented` for inputs it does not cover (dtypes, parameters, batched cotangents), and the
op's reference runs instead: results never depend on whether a kernel exists, only the number
of launches does.
"""
import numpy as np

from .. import backends
from ..backends import cpu_kernels
from ..backends.kernels.launch import ACTIVATIONS

KERNEL_BACKENDS = ("cuda_emu", "cuda")
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _kernel_set(backend_name):
    """`kernels_of(array)`: the kernel set of a backend for an array (on `cuda`, of the GPU
    the array lives on)."""
    if backend_name == "cuda_emu":
        return lambda a: backends.CUDA_EMU.kernels
    return lambda a: backends.gpu(a.device.id).kernels


def _floats(*arrays):
    dt = arrays[0].dtype
    return dt in _FLOATS and all(a.dtype == dt for a in arrays)


def _per_backend(make):
    return {name: make(_kernel_set(name)) for name in KERNEL_BACKENDS}


def cpu_index(name, backward=False):
    """The activation's index among the CPU kernels (`_cpu.ACTIVATIONS`), or with `backward`
    its backward's (`_cpu.ACTIVATIONS` and then `_cpu.BACKWARDS`, the ops whose VJP expression
    only is exact: act_backward's index); None where there is none."""
    names = getattr(cpu_kernels, "ACTIVATIONS", ())
    if backward:
        names += getattr(cpu_kernels, "BACKWARDS", ())
    return names.index(name) if name in names else None


def activation_kernels(name):
    """An elementwise activation with forward and VJP expressions (`c=`, `dc=`): the kernels
    generated from them, `tapegpu_<name>_fwd` and `tapegpu_<name>_bwd` of activations.cu (the
    backward from what the op saves) for the default parameters, and on `numpy` the CPU
    backward where its VJP expression is exact (one pass; the rule takes several). An op the
    generated sources do not have yet (`python -m tapegpu.ops.generate` writes them) gets no
    kernels: the reference and the rule run."""
    entries = {"kernels": {}, "vjp_kernels": {}}
    if name in ACTIVATIONS:
        entries = {"kernels": _per_backend(lambda ks: _act_forward(name, ks)),
                   "vjp_kernels": _per_backend(lambda ks: _act_backward(name, ks))}
    k = cpu_index(name, backward=True)
    if k is not None:
        entries["vjp_kernels"]["numpy"] = lambda g, saved, **params: \
            NotImplemented if params else cpu_act_backward(k, g, saved)
    return entries


def _act_forward(name, kernels_of):
    def fwd(xp, x, **params):
        if params or not _floats(x):
            return NotImplemented
        return kernels_of(x).act_fwd(name, x)
    return fwd


def _act_backward(name, kernels_of):
    def bwd(g, saved, **params):
        if params or not _floats(g, saved):
            return NotImplemented
        return kernels_of(g).act_bwd(name, g, saved)
    return bwd


def fits_cpu(*arrays):
    """What the CPU kernels take: C-contiguous, non-empty float arrays of one dtype."""
    dt = arrays[0].dtype
    if dt not in _FLOATS:
        return False
    for a in arrays:  # (a loop: asked on every VJP of a small model, a generator costs more)
        if type(a) is not np.ndarray or a.dtype != dt or not a.flags.c_contiguous or \
                not a.size:
            return False
    return True


def cpu_act_backward(k, g, saved):
    """The backward of the CPU's activation `k` from its saved value on `numpy`, one pass."""
    if not fits_cpu(g, saved) or g.shape[g.ndim - saved.ndim:] != saved.shape:
        return NotImplemented
    out = np.empty_like(g)
    cpu_kernels.act_backward(k, saved, g, out)
    return out


_TANH32 = getattr(cpu_kernels, "tanh32", None)
_FLOAT32 = np.dtype(np.float32)
_MIDPOINT = 1 << 28  # a double whose low 29 bits are this lies halfway between two floats


def tanh_float32(x, out=None):
    """tanh of a float32 numpy array, correctly rounded (numpy's float32 loop is one unit off
    on about a third of its inputs), into `out` (C-contiguous, not `x`) or a new array: the
    CPU kernel (`_cpu.tanh32`) where it is built and `x` is C-contiguous, else the same floats
    computed by numpy: the double tanh rounded to float32, or the long double one where the
    double lies within 64 units of a midpoint between two floats (the C library's double
    tanh is within 2 units of the exact value)."""
    if _TANH32 is not None and x.flags.c_contiguous:
        if out is None:
            out = np.empty(x.shape, _FLOAT32)
        _TANH32(x, out)
        return out
    t = np.tanh(x.astype(np.float64))
    y = t.astype(_FLOAT32)
    near = np.abs((t.view(np.int64) & (2 * _MIDPOINT - 1)) - _MIDPOINT) <= 64
    if near.any():
        y[near] = np.tanh(x[near].astype(np.longdouble)).astype(_FLOAT32)
    if out is None:
        return y
    out[...] = y
    return out


def cpu_sum(x, axis, keepdims):
    """numpy's add.reduce of a float array on `numpy` over `axis` (sorted non-negative axes)
    by the CPU kernels where they have its bits: every axis or the last (rows summed pairwise
    as numpy does, the array's axes taken as one), the first of a matrix with more than one
    column (rows added in order); None elsewhere."""
    if _ROWSUM is None or not fits_cpu(x):
        return None
    nd = x.ndim
    if len(axis) == nd and nd:  # (a 0-d array, not numpy's scalar, without keepdims)
        out = np.empty((1,) * nd if keepdims else (), x.dtype)
        _ROWSUM(x.reshape(1, -1), out.reshape(1))
        return out
    if nd >= 2 and axis == (nd - 1,):
        out = np.empty(x.shape[:-1] + ((1,) if keepdims else ()), x.dtype)
        _ROWSUM(x, out)
        return out
    if nd == 2 and axis == (0,) and x.shape[1] > 1 and _COLSUM is not None:
        out = np.empty((1, x.shape[1]) if keepdims else x.shape[1:], x.dtype)
        _COLSUM(x, out)
        return out
    return None


def add_reduce(x, axis, keepdims):
    """np.add.reduce(x, axis=axis, keepdims=keepdims) of a numpy array (`axis` sorted,
    non-negative), by the CPU kernels where they have its bits (`cpu_sum`)."""
    s = cpu_sum(x, axis, keepdims)
    return np.add.reduce(x, axis=axis, keepdims=keepdims) if s is None else s


_COLSUM = getattr(cpu_kernels, "colsum", None)
_ROWSUM = getattr(cpu_kernels, "rowsum", None)
cpu_shift = getattr(cpu_kernels, "shift", None)  # z = x - each row's max (_cpu.c)


def cpu_bias_act_into(act, x, b, out=None):
    """bias_act's forward on `numpy` by the CPU kernel, written into `out` (tg.function's
    buffers) or a new array; NotImplemented where the kernel does not apply."""
    k = cpu_index(act)
    if k is None or not fits_cpu(x, b) or b.ndim != 1 or x.shape[-1:] != b.shape:
        return NotImplemented
    if out is None:
        out = np.empty_like(x)
    elif not fits_cpu(out) or out.shape != x.shape or out.dtype != x.dtype:
        return NotImplemented
    cpu_kernels.bias_act(k, x, b, out)
    return out


def softmax_kernels(name):
    """A normalised exponential over the last axis (`name` and its log form):
    `tapegpu_<name>_fwd` and `_bwd`."""
    def forward(kernels_of):
        def fwd(xp, x, axis=-1):
            if axis != -1 or not _floats(x) or x.ndim == 0:
                return NotImplemented
            return getattr(kernels_of(x), name + "_fwd")(x)
        return fwd

    def vjp(kernels_of):
        def bwd(g, out, axis=-1):
            if axis != -1 or not _floats(g, out):
                return NotImplemented
            return getattr(kernels_of(g), name + "_bwd")(g, out)
        return bwd

    return {"kernels": _per_backend(forward), "vjp_kernels": _per_backend(vjp)}


def sparse_xent_kernels(labels_in_range):
    """Sparse cross-entropy of 2-d logits: the forward also returns the probabilities its
    backward kernel uses. `labels_in_range(xp, labels, n)` is the op's label check (on a GPU
    queued, not read; the kernel gives NaN for a label out of range)."""
    def forward(kernels_of):
        def fwd(xp, labels, logits):
            if logits.ndim != 2 or not _floats(logits):
                return NotImplemented
            if not labels_in_range(xp, labels, logits.shape[-1]):
                return NotImplemented  # the reference raises the clear error
            loss, probs = kernels_of(logits).sparse_xent_fwd(logits, labels)
            return loss, (probs,)
        return fwd

    def vjp(kernels_of):
        def bwd(g, labels, logits, probs):
            if logits.ndim != 2 or g.shape != logits.shape[:1] or not _floats(g, logits):
                return NotImplemented  # e.g. batched cotangents (Jacobians)
            return None, kernels_of(g).sparse_xent_bwd(g, probs, labels)
        return bwd

    return {"kernels": {**_per_backend(forward), "numpy": _sparse_xent_cpu},
            "vjp_kernels": {**_per_backend(vjp), "numpy": _sparse_xent_numpy_vjp}}


_LABELS = (np.dtype(np.int32), np.dtype(np.int64))


def cpu_labels(labels, logits, *rows):
    """Whether the CPU's cross-entropy kernels take these labels and logits (and arrays of
    rows beside them, of the logits' dtype)."""
    return _XENT_CPU and fits_cpu(logits, *rows) and type(labels) is np.ndarray and \
        labels.dtype in _LABELS and labels.flags.c_contiguous and \
        labels.shape == logits.shape[:-1]


_XENT_CPU = cpu_kernels is not None and hasattr(cpu_kernels, "xent_grad")


def _sparse_xent_cpu(xp, labels, logits):
    """The reference's steps (nn._sparse_xent_forward) on `numpy`, in as few calls: the max's
    shift, after numpy's exp the rows' sums (numpy's pairwise order), and after numpy's log
    the loss and the division, each one C pass (the same IEEE operations, so the same bits).
    A label out of range: the reference raises."""
    if not cpu_labels(labels, logits):
        return NotImplemented
    z = np.empty_like(logits)
    ml = np.empty(logits.shape[:-1] + (2,), logits.dtype)
    if not cpu_kernels.xent_shift(logits, labels, z, ml):
        return NotImplemented
    np.exp(z, out=z)
    s = add_reduce(z, (z.ndim - 1,), False)
    loss = np.empty_like(s)
    cpu_kernels.xent_finish(z, s, np.log(s), ml, loss)
    return loss, (z,)


def _sparse_xent_numpy_vjp(g, labels, logits, probs):
    """The rule's g * (probs - onehot(labels)) on numpy arrays: a copy of probs, 1 subtracted at
    the labels, times g (the same operations on the same values, so the same bits, without the
    rule's six dispatched ops; one C pass where the CPU kernels take the arrays). Batched
    cotangents take the rule."""
    if g.shape != logits.shape[:-1] or not g.dtype == probs.dtype == logits.dtype or \
            logits.dtype.kind != "f":
        return NotImplemented
    if cpu_labels(labels, probs, g):
        out = np.empty_like(probs)
        cpu_kernels.xent_grad(probs, labels, g, out)
        return None, out
    d = np.array(probs, order="C")
    rows = d.reshape(-1, d.shape[-1])
    rows[np.arange(rows.shape[0]), labels.reshape(-1)] -= 1
    d *= g[..., None]
    return None, d


def bias_act_kernels():
    """act(x + b) in one pass (`tapegpu_bias_<act>_fwd`; on `numpy`, the CPU kernel of the
    activations whose expressions are exact), and its backward: on a GPU `x`'s cotangent and
    `b`'s (summed over the rows) in one launch (`tapegpu_bias_<act>_bwd`), or for batched
    cotangents the activation's backward kernel (the sweep sums `b`'s); on `numpy` the CPU
    kernel of the activation's backward."""
    def forward(kernels_of):
        def fwd(xp, x, b, act):
            if act not in ACTIVATIONS or not _floats(x, b):
                return NotImplemented
            return kernels_of(x).bias_act_fwd(act, x, b)
        return fwd

    def vjp(kernels_of):
        def bwd(g, out, act):
            if act not in ACTIVATIONS or not _floats(g, out):
                return NotImplemented
            if g.shape == out.shape:
                return kernels_of(g).bias_act_bwd(act, g, out)
            gz = kernels_of(g).act_bwd(act, g, out)
            return gz, gz
        return bwd

    def cpu_forward(xp, x, b, act):
        return cpu_bias_act_into(act, x, b)

    def cpu_vjp(g, out, act):
        k = cpu_index(act)
        gz = NotImplemented if k is None else cpu_act_backward(k, g, out)
        return NotImplemented if gz is NotImplemented else (gz, gz)

    return {"kernels": {**_per_backend(forward), "numpy": cpu_forward},
            "vjp_kernels": {**_per_backend(vjp), "numpy": cpu_vjp}}


def cpu_einsum_outer(xp, *xs, terms, out):
    """einsum's forward on `numpy` where it is one outer product per row of shared leading axes
    (`...u,...v->...uv`, possibly with summed axes of size 1, as `tg.vectorized_map`'s
    per-example weight gradients are): the CPU kernel, at memory speed where numpy's einsum
    pays per output row (1.5x its time at (64, 100, 128) float32), bit for bit the same."""
    if cpu_kernels is None or len(xs) != 2 or len(out) < 2:
        return NotImplemented
    a, b = xs
    if not _floats(a, b) or type(a) is not np.ndarray or type(b) is not np.ndarray:
        return NotImplemented
    lead, u, v = out[:-2], out[-2], out[-1]
    kept = []
    for t, x in zip(terms, xs):  # each term without its summed axes, which must be of size 1
        if len(t) != x.ndim or any(s != 1 for c, s in zip(t, x.shape) if c not in out):
            return NotImplemented
        kept.append("".join(c for c in t if c in out))
    if kept[0] != lead + u or kept[1] != lead + v:
        return NotImplemented
    sa = [s for c, s in zip(terms[0], a.shape) if c in out]
    sb = [s for c, s in zip(terms[1], b.shape) if c in out]
    if sa[:-1] != sb[:-1] or not sa[-1] or not sb[-1] or 0 in sa:
        return NotImplemented  # broadcast leading axes, or empty
    res = np.empty(tuple(sa) + (sb[-1],), a.dtype)
    cpu_kernels.outer(np.ascontiguousarray(a), np.ascontiguousarray(b), res)
    return res


# -- recurrent cells (cuda_kernels/rnn.cu) --------------------------------------------------------

def rnn_cell_kernels(name):
    """The pointwise part of an LSTM or GRU step (`name`: "lstm_cell" or "gru_cell", args
    x, h, b and the previous state): `tapegpu_<name>_fwd` and, for an unbatched cotangent,
    `tapegpu_<name>_bwd`, whose one launch gives every input's cotangent (batched cotangents
    take the op's rule)."""
    def forward(kernels_of):
        def fwd(xp, x, h, b, state):
            if not _floats(x, h, b, state):
                return NotImplemented
            return getattr(kernels_of(x), name + "_fwd")(x, h, b, state)
        return fwd

    def vjp(kernels_of):
        def bwd(g, x, h, b, state, *out):
            if not _floats(g, x, h, b, state) or g.shape != (out[0] if out else state).shape:
                return NotImplemented
            if name == "lstm_cell":
                dz, dc = kernels_of(g).lstm_cell_bwd(g, x, h, b, state, out[0])
                return dz, dz, dz, dc
            dxh, ds = kernels_of(g).gru_cell_bwd(g, x, h, b, state)
            return dxh[..., 0, :], dxh[..., 1, :], dxh, ds
        return bwd

    return {"kernels": _per_backend(forward), "vjp_kernels": _per_backend(vjp)}
