"""Run by tests/distribute/test_distribute.py: `mpiexec -n N python fail.py CASE`.

raise:    the last rank raises before the first allreduce, the others wait in it
exit:     the last rank calls sys.exit(1) there instead (no excepthook sees it)
systemexit: the last rank raises SystemExit(3) there
leave:    the last rank's script ends there, with status 0
stuck:    the last rank sleeps past the others' timeout (2 s) instead of joining
uneven:   a healthy job: the last rank leaves right after the last allreduce, while rank 0
          still works (and reads no exit notice)
mismatch: the last rank's model has a differently shaped layer
order:    the last rank passes the same variables in another order
"""
import sys
import time

import numpy as np

import tapegpu as tg

D = tg.distribute
CASE = sys.argv[1]
D.init(timeout=2 if CASE == "stuck" else 60)
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
elif CASE in ("exit", "systemexit", "leave", "stuck"):
    if last:
        print(f"rank {R} leaves", flush=True)
        if CASE == "exit":
            sys.exit(1)
        if CASE == "systemexit":
            raise SystemExit(3)
        if CASE == "stuck":
            time.sleep(30)
    else:
        D.allreduce(tg.constant(np.ones(3, np.float32)))
        print(f"rank {R} should not get here", flush=True)
elif CASE == "uneven":
    for _ in range(3):
        total = D.allreduce(tg.ones((4,)), op=D.Sum)
    if R == 0:
        time.sleep(1.0)  # the last rank has left by now; its notice waits here unread
    print(f"rank {R} done {total.numpy().tolist()}", flush=True)
