"""The cost model of docs/distribute.md (benchmarks/distribute_cost.py): its arithmetic, and the
table in the docs being the module's output."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import distribute_cost as cost, gpu_model  # noqa: E402

SINGLE_DEVICE = True
MB = 1e6


def test_host_staged_terms():
    one = cost.host_staged_s(100 * MB, 10, 1)
    # one GPU: only the copies, 100 MB each way over 25.6 GB/s, plus 10 synced copies each way
    assert one["total_s"] == pytest.approx(2 * (100 * MB / 25.6e9 + 10 * 10e-6))
    eight = cost.host_staged_s(100 * MB, 10, 8)
    # 8 ranks of a node: 4 * 7/8 of the bytes copied by each rank, 3 * 7/8 moved by its adds
    assert eight["host_s"] == pytest.approx((4 * 7 / 8 + 3 * 7 / 8) * 100 * MB / 10e9)
    assert eight["network_s"] == 0.0
    nodes = cost.host_staged_s(100 * MB, 10, 8, 4, "400 Gb/s")
    # flat over 32 ranks: each sends 2 * 24/32 of the bytes to other nodes, 8 ranks per link
    assert nodes["network_s"] == pytest.approx(8 * 2 * 24 / 32 * 100 * MB / (50e9 * 0.8)
                                               + 2 * 5e-6)
    with pytest.raises(ValueError, match=r"host_staged_s: network must be one of"):
        cost.host_staged_s(MB, 1, 8, 2, "10 Gb/s")


def test_nccl_beats_the_host_for_every_configuration():
    for name, label, nccl, host in cost.rows():
        assert nccl["comm_s"] < host["total_s"] / 5, (name, label)
        assert nccl["efficiency"] > host["efficiency"], (name, label)
    # the NCCL column is gpu_model's (the same model as docs/distribute.md's MLP table)
    resnet = cost.WORKLOADS["ResNet-50 size (25.6M params, 161 tensors)"]
    assert cost.rows()[0][2]["comm_s"] == gpu_model.allreduce_s(resnet[0], 8)


def test_the_docs_show_the_models_table():
    docs = (ROOT / "docs" / "distribute.md").read_text()
    assert cost.markdown() in docs, "regenerate: python -m benchmarks.distribute_cost"
