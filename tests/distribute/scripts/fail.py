"""Run by tests/distribute/test_distribute.py: `mpiexec -n N python fail.py CASE`.

raise:    the last rank raises before the first allreduce, the others wait in it
mismatch: the last rank's model has a differently shaped layer
order:    the last rank passes the same variables in another order
silent:   the last rank leaves without an error; the others' allreduce times out (2 s)
"""
import sys

import numpy as np

import tapegpu as tg

D = tg.distribute
CASE = sys.argv[1]
D.init(timeout=2 if CASE == "silent" else 60)
R, P = D.rank(), D.size()
last = R == P - 1

if CASE == "raise":
    if last:
        raise RuntimeError(f"deliberate failure on rank {R}")
    D.allreduce(tg.ones((3,)))
    print(f"rank {R} should not get here", flush=True)
elif CASE in ("mismatch", "order"):
    units = 5 if (CASE == "mismatch" and last) else 4
    model = tg.layers.Sequential([tg.layers.Dense(units, name="hidden"),
                                  tg.layers.Dense(2, name="out")])
    model(tg.ones((1, 3)))
    variables = model.trainable_variables
    if CASE == "order" and last:
        variables = variables[::-1]
    with tg.GradientTape() as tape:
        loss = tg.reduce_sum(model(tg.ones((2, 3))))
    D.DistributedGradientTape(tape).gradient(loss, variables)
    print(f"rank {R} should not get here", flush=True)
elif CASE == "silent":
    if not last:
        D.allreduce(tg.constant(np.ones(3, np.float32)))
        print(f"rank {R} should not get here", flush=True)
