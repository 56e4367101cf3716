"""The chain rule by parts: dz/dx = dz/dy · dy/dx with `tape.jacobian`.

Useful when a computation is split across tapes or functions (or when the middle part is not
differentiated by tapegpu at all): take each Jacobian separately and contract them.
"""
import numpy as np

import tapegpu as tg

x = tg.constant([0.5, -1.0], dtype=tg.float64)
w = tg.constant([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0]], dtype=tg.float64)

with tg.GradientTape() as t1:
    t1.watch(x)
    y = tg.tanh(tg.tensordot(x, w, axes=1))    # R^2 -> R^3
dy_dx = t1.jacobian(y, x)                      # (3, 2)

y_in = tg.constant(y.numpy())                  # a fresh start: the second part on its own
with tg.GradientTape() as t2:
    t2.watch(y_in)
    z = tg.stack([tg.reduce_sum(y_in ** 2), tg.reduce_prod(y_in)])  # R^3 -> R^2
dz_dy = t2.jacobian(z, y_in)                   # (2, 3)

by_parts = tg.matmul(dz_dy, dy_dx)             # (2, 2)

with tg.GradientTape() as t:                   # all at once, for comparison
    t.watch(x)
    yy = tg.tanh(tg.tensordot(x, w, axes=1))
    zz = tg.stack([tg.reduce_sum(yy ** 2), tg.reduce_prod(yy)])
direct = t.jacobian(zz, x)

print("dz/dx by parts:\n", by_parts.numpy())
np.testing.assert_allclose(by_parts.numpy(), direct.numpy(), rtol=1e-12)
