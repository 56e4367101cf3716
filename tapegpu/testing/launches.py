"""Kernel launches per training step on `cuda_emu`, with fusion on and off, eager and under
tg.function: the GPU cost model of one step (benchmarks/launches.py prints it; a test holds
fusion to at most half the launches).

One step of a 784-1024-1024-10 MLP (tg.layers.Dense, `activation` its hidden activation) with
sparse cross-entropy:
forward, backward (tape.gradient) and an SGD-momentum update. "Fusion on" is the default
dispatch: our kernels forward, backward kernels in the array-mode sweep, one multi-tensor
optimizer kernel for all the variables (of one dtype). "Fusion off" (`unfused()`) runs the same step with every op as a library call: the
reference forwards, the tensor-mode sweep (each VJP as separate ops) and the optimizer rule as
tapegpu ops. A library call counts as one launch (one CuPy/cuBLAS kernel on a GPU); views
(reshape, transpose, broadcast, basic indexing) count none, eager and traced.
"""
import collections
import contextlib

import numpy as np

from .. import backends
from ..core.options import options
from ..autodiff.tape import GradientTape
from ..core.device import device
from ..core.tensor import Variable, constant
from ..function.api import function
from ..keras.layers import Dense, activations
from ..keras.model import Sequential
from ..ops import reduce_mean, sparse_softmax_cross_entropy_with_logits, zeros_like
from ..ops.registry import REGISTRY
from ..optimizers import SGD


def launches_of(dev, fn, *args):
    """(fn(*args), {kernel name: launches}) of the call on backend `dev` (its launch counter's
    change; kernels launched 0 times left out)."""
    before = collections.Counter(dev.launches)
    out = fn(*args)
    after = collections.Counter(dev.launches)
    after.subtract(before)
    return out, {k: v for k, v in after.items() if v}


@contextlib.contextmanager
def unfused(backend_name="cuda_emu"):
    """Every op a library call on a backend: no kernels, no bias+activation op, tensor-mode
    sweep."""
    saved = {name: (op.kernels.pop(backend_name, None), op.vjp_kernels.pop(backend_name, None))
             for name, op in REGISTRY.items()}
    for op in REGISTRY.values():
        op.steps.clear()
    fusable = dict(activations._FUSABLE)
    activations._FUSABLE.clear()
    try:
        with options(array_sweep=False):
            yield
    finally:
        activations._FUSABLE.update(fusable)
        for name, (fwd, vjp) in saved.items():
            if fwd is not None:
                REGISTRY[name].kernels[backend_name] = fwd
            if vjp is not None:
                REGISTRY[name].vjp_kernels[backend_name] = vjp
        for op in REGISTRY.values():
            op.steps.clear()


def sgd_momentum_as_ops(grads, variables, velocities, lr=0.01, momentum=0.9):
    """Keras' rule, v = momentum v - lr g; p += v, written as separate tapegpu ops."""
    for g, var, v in zip(grads, variables, velocities):
        new_v = v * momentum - g * lr
        v.assign(new_v)
        var.assign(var + new_v)


def _mlp_step(batch, activation, update):
    """(step(x, y) -> loss, x, y) on `cuda_emu` (call under `device("cuda_emu")`): the
    784-1024-1024-10 model built on a (batch, 784) input, SGD with momentum 0.9 as the optimizer
    ("optimizer") or as assigns (`sgd_momentum_as_ops`, "assign")."""
    rng = np.random.default_rng(0)
    model = Sequential([Dense(1024, activation=activation), Dense(1024, activation=activation),
                        Dense(10)])
    x = constant(rng.standard_normal((batch, 784)).astype(np.float32))
    y = constant(rng.integers(0, 10, batch).astype(np.int32))
    model(x)  # build
    opt = SGD(learning_rate=0.01, momentum=0.9)
    velocities = [Variable(zeros_like(v)) for v in model.trainable_variables]

    def step(x, y):
        with GradientTape() as tape:
            logits = model(x)
            loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(y, logits))
        grads = tape.gradient(loss, model.trainable_variables)
        if update == "optimizer":
            opt.apply_gradients(zip(grads, model.trainable_variables))
        else:
            sgd_momentum_as_ops(grads, model.trainable_variables, velocities)
        return loss
    return step, x, y


def step_launches(batch, fused, activation):
    """{kernel or op name: launches} of one training step on `cuda_emu`: eager, with tapegpu's
    fused kernels and the optimizer, or unfused (`unfused()`, the update as ops)."""
    with device("cuda_emu"):
        step, x, y = _mlp_step(batch, activation, "optimizer" if fused else "assign")
        backends.CUDA_EMU.launches.clear()
        with contextlib.nullcontext() if fused else unfused():
            step(x, y)
        return dict(backends.CUDA_EMU.launches)


def traced_step_launches(batch, activation, jit_compile=None, update="optimizer"):
    """({kernel or op name: launches} of one replay, {name: launches} inside its captured
    graph or None) of the training step of `step_launches` under
    `tg.function(..., jit_compile=jit_compile)` on `cuda_emu`, after the calls that trace (and
    capture) it. `update`: "optimizer" (SGD-momentum's apply_gradients, one graph node; a
    captured graph computes its learning rate and step count on the device, see
    tapegpu/optimizers/captured.py) or "assign" (the same rule as assigns,
    `sgd_momentum_as_ops`)."""
    with device("cuda_emu"):
        step, x, y = _mlp_step(batch, activation, update)
        traced = function(step, jit_compile=jit_compile)
        traced(x, y)  # traces
        traced(x, y)  # captures (jit_compile=True)
        counter = backends.CUDA_EMU.launches
        before = collections.Counter(counter)
        traced(x, y)
        after = collections.Counter(counter)
        after.subtract(before)
        cap = traced.get_concrete_function(x, y)._capture
        inside = dict(cap.entry.graph.launches) if cap is not None and cap.entry else None
        return {k: v for k, v in after.items() if v}, inside
