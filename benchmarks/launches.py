"""Kernel launches per training step on `cuda_emu` (the GPU cost model of one step): eager with
fusion off and on, under tg.function unfused (`jit_compile=False`), fused (the default) and
captured as one CUDA graph (`jit_compile=True`: the step with SGD-momentum's apply_gradients,
whose learning rate and step count the graph computes on the device, and with the momentum
update written as assigns; the kernels inside each graph are listed too). The steps are
tapegpu.testing.launches.

    python -m benchmarks.launches [--batch 256]
"""
import argparse

from tapegpu.testing.launches import step_launches, traced_step_launches


def _show(title, counts):
    print(f"{title}: {sum(counts.values())}")
    for k, v in sorted(counts.items()):
        print(f"    {k:<36} {v}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args(argv)
    rows = {"eager, unfused": step_launches(args.batch, False, "relu"),
            "eager, fused": step_launches(args.batch, True, "relu"),
            "traced": traced_step_launches(args.batch, "relu", False)[0],
            "traced, fused": traced_step_launches(args.batch, "relu", None)[0]}
    captured, inside = traced_step_launches(args.batch, "relu", True)
    rows["captured (apply_gradients)"] = captured
    captured_assign, inside_assign = traced_step_launches(args.batch, "relu", True,
                                                          update="assign")
    rows["captured (assign update)"] = captured_assign
    for title, counts in rows.items():
        _show(f"launches per step, {title}", counts)
    for title, counts in (("apply_gradients", inside), ("assign update", inside_assign)):
        if counts is not None:
            _show(f"kernels inside the captured graph ({title})", counts)
    base = sum(rows["eager, unfused"].values())
    print("ratio to eager unfused: " + ", ".join(
        f"{t} {sum(c.values()) / base:.3f}" for t, c in rows.items()))
    return {"rows": rows, "inside_graph": inside, "inside_graph_assign": inside_assign}


if __name__ == "__main__":
    main()
