"""Vector-Jacobian products: `tape.gradient(y, x, output_gradients=v)` computes vᵀ J.

A non-scalar target is summed by default (its cotangent is all ones); `output_gradients` gives
another cotangent. That is how to backpropagate an upstream gradient through a piece of a model,
or to weight each output differently.
"""
import numpy as np

import tapegpu as tg

x = tg.Variable([1.0, 2.0, 3.0])
with tg.GradientTape(persistent=True) as tape:
    y = tg.stack([x[0] * x[1], tg.sin(x[2]), tg.reduce_sum(x * x)])  # y: R^3 -> R^3

v = tg.constant([1.0, 0.5, -2.0])
vjp = tape.gradient(y, x, output_gradients=v)
summed = tape.gradient(y, x)  # the same as output_gradients=ones
jac = tape.jacobian(y, x)  # (3, 3): row i is dy_i / dx

print("J =\n", jac.numpy())
print("v^T J =", vjp.numpy())
np.testing.assert_allclose(vjp.numpy(), v.numpy() @ jac.numpy(), rtol=1e-6)
np.testing.assert_allclose(summed.numpy(), jac.numpy().sum(axis=0), rtol=1e-6)
