"""Kernel launches per training step on `cuda_emu`, with fusion on and off (the GPU cost model
of one step; issue: fusion must at least halve the launches). The step and the switch are
tapegpu.testing.launches.

    python -m benchmarks.launches [--batch 256]
"""
import argparse

from tapegpu.testing.launches import step_launches


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args(argv)
    on = step_launches(args.batch, True, "relu")
    off = step_launches(args.batch, False, "relu")
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
