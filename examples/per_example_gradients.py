"""Per-example gradients with `tape.jacobian`.

The Jacobian of the vector of per-example losses with respect to the variables has, for each
variable, shape `(batch,) + variable.shape`: row i is the gradient of example i's loss. tapegpu
computes it with one forward pass and one batched backward sweep (cotangents with a batch axis),
instead of one backward pass per example. Typical uses: differential privacy (clip each
example's gradient), gradient-noise statistics, influence estimates.
"""
import time

import numpy as np

import tapegpu as tg

# the checks below compare float32 products at float32's tolerance: TF32, on by default on
# GPUs of compute capability 8.0+ (as in TensorFlow), rounds their inputs to 10 bits
tg.config.experimental.enable_tensor_float_32_execution(False)
tg.random.set_seed(0)
rng = np.random.default_rng(0)
model = tg.layers.Sequential([tg.layers.Dense(128, activation="tanh"), tg.layers.Dense(10)])
x = tg.constant(rng.standard_normal((64, 100)).astype(np.float32))
y = tg.constant(rng.integers(0, 10, size=64).astype(np.int32))
loss_fn = tg.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
model(x)

start = time.perf_counter()
with tg.GradientTape() as tape:
    losses = loss_fn(y, model(x))                              # (64,)
per_example = tape.jacobian(losses, model.trainable_variables)
t_jac = time.perf_counter() - start
print("per-example gradient shapes:", [g.shape for g in per_example])

start = time.perf_counter()
loop = []
for i in range(64):
    with tg.GradientTape() as tape:
        loss = loss_fn(y[i:i + 1], model(x[i:i + 1]))[0]
    loop.append(tape.gradient(loss, model.trainable_variables))
t_loop = time.perf_counter() - start
print(f"jacobian {t_jac * 1e3:.1f} ms, loop of single-example gradients {t_loop * 1e3:.1f} ms")

for k, g in enumerate(per_example):
    np.testing.assert_allclose(g.numpy(), np.stack([row[k].numpy() for row in loop]),
                               rtol=2e-4, atol=2e-6)

# e.g. DP-SGD: clip each example's gradient to norm 1, then average
norms = np.sqrt(sum((g.numpy().reshape(64, -1) ** 2).sum(1) for g in per_example))
scale = np.minimum(1.0, 1.0 / norms).astype(np.float32)
clipped = [tg.reduce_mean(g * scale.reshape((64,) + (1,) * (g.ndim - 1)), axis=0)
           for g in per_example]
print("per-example gradient norms: min %.3f, max %.3f" % (norms.min(), norms.max()))
assert [c.shape for c in clipped] == [v.shape for v in model.trainable_variables]
