"""The cost of reducing gradients across GPUs: tg.distribute's two routes side by side.

    python -m benchmarks.distribute_cost            # the table of docs/distribute.md

No GPU runs here: this is arithmetic on stated figures, not a measurement. Two routes carry a
GPU's gradients to the other GPUs (tapegpu/distribute/nccl.py chooses):

- NCCL (CuPy's `cupy.cuda.nccl`; the route of `cuda` tensors when NCCL is usable): gradients
  packed into flat device buckets, each bucket's allreduce on a side stream as soon as the
  sweep finishes it; hierarchical ring over NVLink in a node and the network between nodes
  (`gpu_model.allreduce_s`, `gpu_model.data_parallel`: what is not hidden behind the backward
  sweep is exposed).
- Host-staged (MPI; the route when NCCL is missing or `TAPEGPU_DISTRIBUTE_NCCL=0`, and every
  rank's route for CPU tensors): each gradient is copied to the host (a blocking sync each),
  reduced over MPI by tg.distribute's own algorithm (an alltoall of chunks, each rank adding its
  chunk in rank order, an allgather), and copied back. Nothing of it is hidden: each copy's
  sync waits for the device, so the device idles while the host reduces.

Figures used, beyond those of gpu_model.py (NVLink 4, 100 and 400 Gb/s networks, links at
80% of their stated bandwidth):

- PCIe Gen5 x16 between a GPU and its host: 64 GB/s per direction, at 80%, halved for the
  pageable host memory numpy arrays live in (CUDA stages pageable copies through a pinned
  buffer): 25.6 GB/s; 10 µs per copy for the sync and the call around it.
- Host memory copies by one MPI rank (MPICH's shared-memory transport copies each message
  twice, into a shared buffer and out of it): 10 GB/s per rank; numpy's additions of the
  chunks: 10 GB/s per rank (3 bytes moved per byte added).
- The host-staged reduction is flat over all ranks (tg.distribute's MPI algorithm knows no
  nodes): of the 2(N-1)/N·B bytes each rank sends and receives, the share bound for other
  nodes, 2(N-g)/N·B per rank, crosses the node's one network link, shared by its g ranks.

Workloads: a ResNet-50-sized model (25.6M float32 parameters in 161 tensors, torchvision's
layout: 102.4 MB of gradients), one H100 step of 85 ms for a batch of 256 images (about 3,000
images/s in mixed precision, the order of NVIDIA's published figures), two thirds of it the
backward sweep; and the MLP of benchmarks/gpu_cost.py (784-1024-1024-10: 7.5 MB in 6 tensors)
at its eager step time on an H100 from that model, 177 µs (backward: two thirds).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import gpu_model  # noqa: E402

GB = gpu_model.GB
PCIE_BYTES_PER_S = 64 * GB * gpu_model.H100.link_efficiency / 2  # pageable host memory
COPY_LATENCY_S = 10e-6  # per device<->host copy: the blocking sync and the call around it
HOST_COPY_BYTES_PER_S = 10 * GB  # one rank's memcpy
HOST_ADD_BYTES_PER_S = 10 * GB  # numpy's adds, bytes moved (3 per byte added)

WORKLOADS = {
    # name: (gradient bytes, gradient tensors, step seconds on one H100, backward share)
    "ResNet-50 size (25.6M params, 161 tensors)": (25.6e6 * 4, 161, 85e-3, 2 / 3),
    "MLP 784-1024-1024-10 (7.5 MB, 6 tensors)": (
        4 * (784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10), 6, 177e-6, 2 / 3),
}
CONFIGS = [("8 GPUs, NVLink", 8, 1, None),
           ("4 nodes x 8, 400 Gb/s", 8, 4, "400 Gb/s"),
           ("4 nodes x 8, 100 Gb/s", 8, 4, "100 Gb/s")]


def host_staged_s(nbytes, tensors, gpus_per_node, nodes=1, network=None):
    """{"copies_s", "host_s", "network_s", "total_s"}: one host-staged allreduce of `nbytes`
    in `tensors` gradients over `gpus_per_node` x `nodes` ranks (see the module docstring)."""
    if gpus_per_node < 1 or nodes < 1:
        raise ValueError(f"host_staged_s: gpus_per_node and nodes must be >= 1, got "
                         f"{gpus_per_node} and {nodes}")
    if nodes > 1 and network not in gpu_model.NETWORKS:
        raise ValueError(f"host_staged_s: network must be one of {sorted(gpu_model.NETWORKS)} "
                         f"when nodes > 1, got {network!r}")
    n = gpus_per_node * nodes
    # to the host and back, one synced copy per tensor each way
    copies = 2 * (nbytes / PCIE_BYTES_PER_S + tensors * COPY_LATENCY_S)
    if n == 1:
        return {"copies_s": copies, "host_s": 0.0, "network_s": 0.0, "total_s": copies}
    # within the node: the traffic of the alltoall and the allgather, copied twice by MPICH's
    # shared memory, and the adds of this rank's chunk (n chunks of nbytes / n)
    local_share = (gpus_per_node - 1) / n
    host = 2 * 2 * local_share * nbytes / HOST_COPY_BYTES_PER_S
    host += 3 * (n - 1) / n * nbytes / HOST_ADD_BYTES_PER_S
    wire = 0.0
    if nodes > 1:
        bw, step = gpu_model.NETWORKS[network]
        per_rank = 2 * (n - gpus_per_node) / n * nbytes
        wire = gpus_per_node * per_rank / (bw * gpu_model.H100.link_efficiency) + 2 * step
    return {"copies_s": copies, "host_s": host, "network_s": wire,
            "total_s": copies + host + wire}


def rows():
    """(workload, config, nccl dict of gpu_model.data_parallel, host-staged dict with
    'efficiency') for every workload and configuration."""
    out = []
    for name, (nbytes, tensors, step, backward) in WORKLOADS.items():
        for label, g, m, net in CONFIGS:
            nccl = gpu_model.data_parallel(step, step * backward, nbytes, g, m, net)
            host = host_staged_s(nbytes, tensors, g, m, net)
            host = dict(host, efficiency=step / (step + host["total_s"]))
            out.append((name, label, nccl, host))
    return out


def _ms(s):
    return f"{s * 1e3:.3g}"


def markdown():
    """The table of docs/distribute.md."""
    lines = ["| gradients | GPUs | NCCL: allreduce ms | exposed ms | efficiency | "
             "host-staged: ms (copies + host + network) | efficiency |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for name, label, nccl, host in rows():
        lines.append(
            f"| {name} | {label} | {_ms(nccl['comm_s'])} | {_ms(nccl['exposed_s'])} | "
            f"{nccl['efficiency']:.2f} | {_ms(host['total_s'])} ({_ms(host['copies_s'])} + "
            f"{_ms(host['host_s'])} + {_ms(host['network_s'])}) | {host['efficiency']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
