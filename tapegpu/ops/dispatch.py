"""Kernel dispatch: ops and fused VJPs that launch our CUDA kernels on backends that have
them (`cuda` on a GPU, `cuda_emu` on the CPU). Each override falls back to the op's
`xp`-generic reference for parameters or dtypes no kernel covers, so results never depend on
whether a kernel exists — only the number of launches does.

Registered here, per backend name, without touching the op definitions:
  forward:   relu elu gelu sigmoid tanh softplus (elementwise kernels), bias + activation,
             softmax and log_softmax over the last axis, sparse softmax cross-entropy (2-d
             logits; it also returns the softmax its backward kernel uses);
  fused VJP: the same activations' backward from their saved output or input (one launch,
             any number of leading batch axes), softmax/log-softmax backward, sparse
             cross-entropy backward; un-broadcasting of cotangents (sweep.sum_to_array).

On `numpy`, where the CPU kernels are built, bias + ReLU and ReLU's backward run as one-pass CPU
kernels (`tapegpu/_cpu.c`) where numpy needs two and three passes; they give numpy's bits.
"""
import numpy as np

from .. import backends as backend
from ..backends import cpu_kernels as cpu
from .registry import REGISTRY

KERNEL_BACKENDS = ("cuda_emu", "cuda")
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _backend_kernels(name):
    """`kernels_of(array)`: the kernel set of backend `name` for an array (on `cuda`, of the
    GPU the array lives on)."""
    if name == "cuda_emu":
        return lambda a: backend.CUDA_EMU.kernels
    return lambda a: backend.gpu(a.device.id).kernels


def _ok(*arrays):
    return all(a.dtype in _FLOATS for a in arrays)


def _tensor_rule(op, xp, g, *saved, **params):
    """An op's tensor VJP on arrays (for parameters no kernel or fused rule covers)."""
    from ..core.tensor import Tensor
    dev = backend.CUDA_EMU if xp is np else backend.current()
    out = op.vjp(Tensor(g, dev), *[Tensor(s, dev) for s in saved], **params)
    return None if out is None else out._data


def _activation(act, kernels_of):
    """Forward and fused VJP of an activation; kernels only for the default parameters."""
    op = REGISTRY[act]
    ref_fwd, ref_vjp = op.forward, op.fused_vjp

    def forward(xp, x, **params):
        if params or not _ok(x):
            return ref_fwd(xp, x, **params)
        return kernels_of(x).act_fwd(act, x)

    def vjp(xp, g, saved, **params):
        if params or not _ok(g, saved) or g.dtype != saved.dtype:
            if ref_vjp is None:
                return _tensor_rule(op, xp, g, saved, **params)
            return ref_vjp(xp, g, saved, **params)
        return kernels_of(g).act_bwd(act, g, saved)

    return forward, vjp


def _softmax(name, kernels_of):
    op = REGISTRY[name]
    ref_fwd, ref_vjp = op.forward, op.fused_vjp
    k_fwd, k_bwd = f"{name}_fwd", f"{name}_bwd"

    def forward(xp, x, axis=-1):
        if axis != -1 or not _ok(x) or x.ndim == 0:
            return ref_fwd(xp, x, axis=axis)
        return getattr(kernels_of(x), k_fwd)(x)

    def vjp(xp, g, out, axis=-1):
        if axis != -1 or not _ok(g, out) or g.dtype != out.dtype:
            return ref_vjp(xp, g, out, axis=axis)
        return getattr(kernels_of(g), k_bwd)(g, out)

    return forward, vjp


def _sparse_xent(kernels_of):
    op = REGISTRY["sparse_softmax_cross_entropy_with_logits"]
    ref_fwd = op.forward
    ref_vjp = op.fused_vjp[1]

    def forward(xp, labels, logits):
        if logits.ndim != 2 or not _ok(logits):
            return ref_fwd(xp, labels, logits)
        n = logits.shape[-1]
        if labels.size and (labels.min() < 0 or labels.max() >= n):
            return ref_fwd(xp, labels, logits)  # the reference raises the clear error
        loss, probs = kernels_of(logits).sparse_xent_fwd(logits, labels)
        return loss, (probs,)

    def vjp(xp, g, labels, logits, probs):
        if logits.ndim != 2 or g.shape != logits.shape[:1] or not _ok(g, logits):
            return ref_vjp(xp, g, labels, logits, probs)  # e.g. batched cotangents (Jacobians)
        return kernels_of(g).sparse_xent_bwd(g, probs, labels)

    return forward, vjp


def _bias_act(kernels_of):
    op = REGISTRY["bias_act"]
    ref_fwd, ref_vjp = op.forward, op.fused_vjp

    def forward(xp, x, b, act):
        if not _ok(x, b) or x.dtype != b.dtype:
            return ref_fwd(xp, x, b, act)
        return kernels_of(x).bias_act_fwd(act, x, b)

    def vjp(xp, g, out, act):
        if not _ok(g, out) or g.dtype != out.dtype:
            return ref_vjp(xp, g, out, act)
        gz = kernels_of(g).act_bwd(act, g, out)
        return gz, gz

    return forward, vjp


def _cpu_relu():
    """bias_act(relu) forward and relu / bias_act(relu) backward on `numpy` by tapegpu._cpu,
    for C-contiguous float arrays of one dtype; anything else goes to the references."""
    relu, bias_act = REGISTRY["relu"], REGISTRY["bias_act"]
    ref_fwd, ref_relu_vjp, ref_vjp = bias_act.forward, relu.fused_vjp, bias_act.fused_vjp

    def fits(*arrays):
        dt = arrays[0].dtype
        return dt in _FLOATS and all(type(a) is np.ndarray and a.dtype == dt and
                                     a.flags.c_contiguous and a.size for a in arrays)

    def forward(xp, x, b, act):
        if act != "relu" or not fits(x, b) or b.ndim != 1 or x.shape[-1:] != b.shape:
            return ref_fwd(xp, x, b, act)
        out = np.empty_like(x)
        cpu.bias_relu(x, b, out)
        return out

    def relu_vjp(xp, g, y):  # y: relu's output; g may carry leading batch axes
        if not fits(g, y) or g.shape[g.ndim - y.ndim:] != y.shape:
            return ref_relu_vjp(xp, g, y)
        out = np.empty_like(g)
        cpu.relu_backward(y, g, out)
        return out

    def vjp(xp, g, out, act):
        if act != "relu":
            return ref_vjp(xp, g, out, act)
        gz = relu_vjp(xp, g, out)
        return gz, gz

    bias_act.overrides["numpy"] = forward
    bias_act.fused_overrides["numpy"] = vjp
    relu.fused_overrides["numpy"] = relu_vjp


def install():
    if cpu is not None:
        _cpu_relu()
    for name in KERNEL_BACKENDS:
        kernels_of = _backend_kernels(name)
        for act in ("relu", "elu", "gelu", "sigmoid", "tanh", "softplus"):
            fwd, vjp = _activation(act, kernels_of)
            REGISTRY[act].overrides[name] = fwd
            REGISTRY[act].fused_overrides[name] = vjp
        for sm in ("softmax", "log_softmax"):
            fwd, vjp = _softmax(sm, kernels_of)
            REGISTRY[sm].overrides[name] = fwd
            REGISTRY[sm].fused_overrides[name] = vjp
        fwd, vjp = _sparse_xent(kernels_of)
        xent = REGISTRY["sparse_softmax_cross_entropy_with_logits"]
        xent.overrides[name] = fwd
        xent.fused_overrides[name] = (None, vjp)
        fwd, vjp = _bias_act(kernels_of)
        REGISTRY["bias_act"].overrides[name] = fwd
        REGISTRY["bias_act"].fused_overrides[name] = vjp


install()
