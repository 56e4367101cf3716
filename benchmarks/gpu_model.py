"""Arithmetic of the GPU cost model: a roofline for one step and ring allreduce over N GPUs.

No GPU runs here; these functions turn counts taken on the `cuda_emu` device (kernel launches,
bytes moved, FLOPs per step; see gpu_cost.py) into time estimates for a stated machine, so that
the benefit of fewer launches, and of more GPUs, is shown where it cannot be timed. The numbers
used are those below and nothing else:

- H100 SXM: 3.35 TB/s HBM3 bandwidth, 67 TFLOP/s float32 without tensor cores, 5 µs per kernel
  launch when launches are issued one by one from Python (CUDA's own launch latency is 2–4 µs;
  the Python around an eager op adds the rest), 1 µs per kernel inside a replayed CUDA graph.
- NVLink 4 between the 8 GPUs of a node: 450 GB/s per direction per GPU, 2 µs per ring step.
- Networks between nodes: 100 Gb/s (12.5 GB/s) or 400 Gb/s (50 GB/s) per node, 5 µs per step.
- Every link runs at 80% of its stated bandwidth (what NCCL's bus bandwidth reaches on large
  messages).

Roofline: a step takes at least max(bytes / bandwidth, flops / peak) plus its launch latency
(launches are serial on one stream; the model assumes no overlap of launch latency with work,
which is what small steps see). Ring allreduce of B bytes over n GPUs moves 2(n-1)/n · B per
GPU in 2(n-1) steps; over nodes of g GPUs it is hierarchical (reduce-scatter in the node,
allreduce of each 1/g shard between the m nodes over the network, all-gather in the node), as
NCCL does. Data-parallel step on n GPUs: compute (the roofline of one GPU's step) plus the
allreduce time not hidden behind the backward sweep; buckets as DDP/tg.distribute: the
reduction of a bucket starts when its gradients are final, so at most the backward time minus
the last bucket's reduction can be hidden.
"""
from dataclasses import dataclass

GB = 1e9


@dataclass(frozen=True)
class Machine:
    """The stated hardware figures (see the module docstring)."""
    name: str = "H100 SXM"
    hbm_bytes_per_s: float = 3.35e12
    fp32_flops_per_s: float = 67e12
    launch_s: float = 5e-6
    graph_launch_s: float = 1e-6
    nvlink_bytes_per_s: float = 450 * GB
    nvlink_step_s: float = 2e-6
    link_efficiency: float = 0.8


H100 = Machine()
NETWORKS = {"100 Gb/s": (12.5 * GB, 5e-6), "400 Gb/s": (50 * GB, 5e-6)}


def roofline_s(bytes_moved, flops, launches, machine=H100, graph=False):
    """Lower bound of one step's time: memory or arithmetic, plus serial launch latency."""
    per_launch = machine.graph_launch_s if graph else machine.launch_s
    work = max(bytes_moved / machine.hbm_bytes_per_s, flops / machine.fp32_flops_per_s)
    return work + launches * per_launch


def ring_allreduce_s(nbytes, n, bytes_per_s, step_s, efficiency=H100.link_efficiency):
    """Time of a ring allreduce of `nbytes` over `n` peers on links of `bytes_per_s`."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes / (bytes_per_s * efficiency) + 2 * (n - 1) * step_s


def allreduce_s(nbytes, gpus_per_node, nodes=1, network=None, machine=H100):
    """Hierarchical allreduce: NVLink ring in each node, the network ring between nodes."""
    if gpus_per_node < 1 or nodes < 1:
        raise ValueError(f"allreduce_s: gpus_per_node and nodes must be >= 1, got "
                         f"{gpus_per_node} and {nodes}")
    if nodes > 1 and network not in NETWORKS:
        raise ValueError(f"allreduce_s: network must be one of {sorted(NETWORKS)} when "
                         f"nodes > 1, got {network!r}")
    g = gpus_per_node
    inside = ring_allreduce_s(nbytes, g, machine.nvlink_bytes_per_s, machine.nvlink_step_s,
                              machine.link_efficiency)
    if nodes == 1:
        return inside
    bw, step = NETWORKS[network]
    # each node's NIC carries all g shards of 1/g of the bytes: nbytes in total per node
    between = ring_allreduce_s(nbytes, nodes, bw, step, machine.link_efficiency)
    return inside + between


def data_parallel(step_s, backward_s, grad_bytes, gpus_per_node, nodes=1, network=None,
                  bucket_bytes=25 * 2**20, machine=H100):
    """{"comm_s", "exposed_s", "step_s", "efficiency"} of one weak-scaled step on n GPUs.

    Gradients are reduced in buckets of `bucket_bytes` as they become final during the
    backward sweep (`backward_s`); the last bucket's reduction can never be hidden, the others
    are hidden as far as the backward time allows.
    """
    comm = allreduce_s(grad_bytes, gpus_per_node, nodes, network, machine)
    buckets = max(1, -(-int(grad_bytes) // int(bucket_bytes)))
    last = comm / buckets
    hidden = min(comm - last, max(0.0, backward_s - last))
    exposed = comm - hidden
    total = step_s + exposed
    return {"comm_s": comm, "exposed_s": exposed, "step_s": total,
            "efficiency": step_s / total}


def scaling_table(step_s, backward_s, grad_bytes, bucket_bytes=25 * 2**20, machine=H100):
    """Rows (label, gpus, result) for 1-8 GPUs on one node and 4 nodes of 8 on each network."""
    rows = [(f"{g} GPU{'s' if g > 1 else ''}, NVLink", g,
             data_parallel(step_s, backward_s, grad_bytes, g, 1, None, bucket_bytes, machine))
            for g in (1, 2, 4, 8)]
    for net in NETWORKS:
        rows.append((f"4 nodes x 8, {net}", 32,
                     data_parallel(step_s, backward_s, grad_bytes, 8, 4, net, bucket_bytes,
                                   machine)))
    return rows
