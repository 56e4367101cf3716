"""A loss measured outside the graph: `tg.numpy_function` with a gradient estimator.

The "measurement" here is a numpy function standing for anything tapegpu cannot see into: an
external simulator, a compiled program, a reading from hardware. The estimator builds its
Jacobian from extra evaluations when a gradient is asked for ('central_difference': two per
input element; `tg.estimators.spsa(...)`: two per sample, whatever the input size), and the
gradient flows on through the differentiable part of the model as usual.
"""
import numpy as np

import tapegpu as tg


def measure(signal):
    """A black box: the mean squared distance of a smoothed signal to a target shape."""
    smooth = np.convolve(signal, np.ones(3) / 3.0, mode="same")
    target = np.sin(np.linspace(0.0, np.pi, signal.size))
    return np.mean((smooth - target) ** 2).astype(signal.dtype)


tg.random.set_seed(0)
model = tg.layers.Dense(16)          # maps a fixed code to a 16-sample signal
code = tg.ones((1, 4))
opt = tg.optimizers.Adam(learning_rate=0.05)

for estimator in ("central_difference", tg.estimators.spsa(num_samples=16, seed=0)):
    with tg.GradientTape() as tape:
        value = tg.numpy_function(measure, [model(code)[0]], tg.float32, grad=estimator)
    grads = tape.gradient(value, model.trainable_variables)
    print(f"{estimator!s:>36}: loss {float(value):.4f}, |grad kernel| "
          f"{float(tg.norm(grads[0])):.4f}")

losses = []
for _ in range(150):
    with tg.GradientTape() as tape:
        value = tg.numpy_function(measure, [model(code)[0]], tg.float32,
                                  grad="central_difference")
    grads = tape.gradient(value, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    losses.append(float(value))
print(f"black-box loss: {losses[0]:.4f} -> {losses[-1]:.5f} after {len(losses)} Adam steps")
assert losses[-1] < 0.05 * losses[0]
