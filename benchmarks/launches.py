"""Kernel launches per training step on `cuda_emu`, with fusion on and off (the GPU cost model
of one step; issue: fusion must at least halve the launches).

    python -m benchmarks.launches [--batch 256]

One step of a 784-1024-1024-10 ReLU MLP (tg.layers.Dense) with softmax cross-entropy:
forward, backward (tape.gradient) and an SGD-momentum update. "Fusion on" is the default
dispatch: our kernels forward, fused backward kernels in the array-mode sweep, one optimizer
kernel per variable. "Fusion off" runs the same step with every op as a library call: the
reference forwards, the tensor-mode sweep (each VJP as separate ops) and the optimizer rule as
tapegpu ops. A library call counts as one launch (one CuPy/cuBLAS kernel on a GPU); views
(reshape, transpose, broadcast) count none.
"""
import argparse
import contextlib

import numpy as np

import tapegpu as tg
from tapegpu import backends as backend
from tapegpu.autodiff import sweep
from tapegpu.models import layers
from tapegpu.ops.registry import REGISTRY


@contextlib.contextmanager
def unfused():
    """Every op a library call: no kernel overrides, no bias+activation op, tensor-mode sweep,
    optimizer as ops."""
    saved = {name: (op.overrides.pop("cuda_emu", None), op.fused_overrides.pop("cuda_emu", None))
             for name, op in REGISTRY.items()}
    fusable = dict(layers._FUSABLE)
    layers._FUSABLE.clear()
    old_fused = sweep.FUSED
    sweep.FUSED = False
    try:
        yield
    finally:
        sweep.FUSED = old_fused
        layers._FUSABLE.update(fusable)
        for name, (fwd, vjp) in saved.items():
            if fwd is not None:
                REGISTRY[name].overrides["cuda_emu"] = fwd
            if vjp is not None:
                REGISTRY[name].fused_overrides["cuda_emu"] = vjp


def sgd_momentum_as_ops(grads, variables, velocities, lr=0.01, momentum=0.9):
    """Keras' rule, v = momentum v - lr g; p += v, written as separate tapegpu ops."""
    for g, var, v in zip(grads, variables, velocities):
        new_v = v * momentum - g * lr
        v.assign(new_v)
        var.assign(var + new_v)


def step_launches(batch, fused):
    rng = np.random.default_rng(0)
    with tg.device("cuda_emu"):
        model = tg.layers.Sequential([tg.layers.Dense(1024, activation="relu"),
                                      tg.layers.Dense(1024, activation="relu"),
                                      tg.layers.Dense(10)])
        x = tg.constant(rng.standard_normal((batch, 784)).astype(np.float32))
        y = tg.constant(rng.integers(0, 10, batch).astype(np.int32))
        model(x)  # build
        opt = tg.optimizers.SGD(learning_rate=0.01, momentum=0.9)
        velocities = [tg.Variable(tg.zeros_like(v)) for v in model.trainable_variables]
        backend.CUDA_EMU.launches.clear()
        ctx = contextlib.nullcontext() if fused else unfused()
        with ctx:
            with tg.GradientTape() as tape:
                logits = model(x)
                loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            grads = tape.gradient(loss, model.trainable_variables)
            if fused:
                opt.apply_gradients(zip(grads, model.trainable_variables))
            else:
                sgd_momentum_as_ops(grads, model.trainable_variables, velocities)
        return dict(backend.CUDA_EMU.launches)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args(argv)
    on = step_launches(args.batch, True)
    off = step_launches(args.batch, False)
    n_on, n_off = sum(on.values()), sum(off.values())
    print(f"launches per step, fusion on:  {n_on}")
    for k, v in sorted(on.items()):
        print(f"    {k:<36} {v}")
    print(f"launches per step, fusion off: {n_off}")
    for k, v in sorted(off.items()):
        print(f"    {k:<36} {v}")
    print(f"ratio on/off: {n_on / n_off:.3f}")
    return {"fused": on, "unfused": off, "ratio": n_on / n_off}


if __name__ == "__main__":
    main()
