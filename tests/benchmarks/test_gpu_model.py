"""The GPU cost model's arithmetic (benchmarks/gpu_model.py) and its report (gpu_cost.py)."""
import importlib.util
import json
import os

import pytest

SINGLE_DEVICE = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(name):
    spec = importlib.util.spec_from_file_location(
        f"_bench_{name}", os.path.join(ROOT, "benchmarks", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gm = _load("gpu_model")
H = gm.H100
MB = 2**20


def test_roofline_takes_the_slower_of_memory_and_arithmetic_plus_launches():
    mem_bound = gm.roofline_s(3.35e12, 1.0, 0)            # 1 s of HBM traffic
    flop_bound = gm.roofline_s(1.0, 67e12, 0)              # 1 s of float32 arithmetic
    assert mem_bound == pytest.approx(1.0) and flop_bound == pytest.approx(1.0)
    assert gm.roofline_s(0, 0, 10) == pytest.approx(10 * H.launch_s)
    assert gm.roofline_s(0, 0, 10, graph=True) == pytest.approx(10 * H.graph_launch_s)


def test_ring_allreduce_moves_2_n_minus_1_over_n_of_the_bytes():
    assert gm.ring_allreduce_s(100 * MB, 1, 1e9, 1e-6) == 0.0
    for n in (2, 4, 8):
        t = gm.ring_allreduce_s(100 * MB, n, 1e9, 0.0, efficiency=1.0)
        assert t == pytest.approx(2 * (n - 1) / n * 100 * MB / 1e9)
    assert gm.ring_allreduce_s(0, 4, 1e9, 1e-6) == pytest.approx(6e-6)   # latency only


def test_hierarchical_allreduce_adds_the_network_ring_between_nodes():
    one_node = gm.allreduce_s(64 * MB, 8)
    assert one_node == pytest.approx(gm.ring_allreduce_s(
        64 * MB, 8, H.nvlink_bytes_per_s, H.nvlink_step_s, H.link_efficiency))
    slow = gm.allreduce_s(64 * MB, 8, nodes=4, network="100 Gb/s")
    fast = gm.allreduce_s(64 * MB, 8, nodes=4, network="400 Gb/s")
    assert one_node < fast < slow
    assert slow - one_node == pytest.approx(gm.ring_allreduce_s(64 * MB, 4, 12.5e9, 5e-6))


@pytest.mark.parametrize("kwargs, match", [
    ({"gpus_per_node": 0}, "gpus_per_node and nodes must be >= 1"),
    ({"gpus_per_node": 8, "nodes": 2}, "network must be one of"),
    ({"gpus_per_node": 8, "nodes": 2, "network": "10 Gb/s"}, "network must be one of"),
])
def test_allreduce_rejects_impossible_configurations(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gm.allreduce_s(MB, **kwargs)


def test_one_bucket_hides_nothing_many_buckets_hide_all_but_the_last():
    step, bwd, grads = 1e-3, 0.7e-3, 64 * MB
    one = gm.data_parallel(step, bwd, grads, 8, bucket_bytes=grads)
    assert one["exposed_s"] == pytest.approx(one["comm_s"])
    many = gm.data_parallel(step, bwd, grads, 8, bucket_bytes=grads / 16)
    assert many["comm_s"] == pytest.approx(one["comm_s"])
    assert many["exposed_s"] == pytest.approx(max(many["comm_s"] / 16,
                                                  many["comm_s"] - (bwd - many["comm_s"] / 16)))
    assert many["efficiency"] > one["efficiency"]
    assert gm.data_parallel(step, bwd, grads, 1)["efficiency"] == 1.0


def test_scaling_table_efficiency_falls_with_more_gpus_and_slower_networks():
    rows = gm.scaling_table(1e-3, 0.7e-3, 32 * MB)
    eff = {label: r["efficiency"] for label, _, r in rows}
    node = [eff[f"{g} GPU{'s' if g > 1 else ''}, NVLink"] for g in (1, 2, 4, 8)]
    assert node[0] == 1.0 and node == sorted(node, reverse=True)
    assert eff["4 nodes x 8, 100 Gb/s"] < eff["4 nodes x 8, 400 Gb/s"] < node[-1]
    assert [n for _, n, _ in rows] == [1, 2, 4, 8, 32, 32]


def test_gpu_cost_reports_roofline_and_data_parallel_estimates_from_counts(tmp_path, capsys):
    gc = _load("gpu_cost")
    out = tmp_path / "cost.json"
    assert gc.main(["--only", "W2", "--json", str(out), "--markdown"]) == 0
    report = json.loads(out.read_text())
    (name, entry), = report.items()
    f = entry["fused"]
    r = entry["roofline_us"]
    assert r["eager"] == pytest.approx(gm.roofline_s(f["bytes"]["bytes"], f["bytes"]["flops"],
                                                     f["launches"]) * 1e6)
    assert r["graph"] < r["eager"] < r["unfused"]
    grads = 4 * (784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10)
    eight = next(row for row in entry["data_parallel"]["eager"] if row["gpus"] == 8)
    assert eight == {"config": "8 GPUs, NVLink", "gpus": 8,
                     **gm.data_parallel(r["eager"] * 1e-6, r["eager"] * 1e-6 * 2 / 3, grads, 8)}
    assert "one graph" in capsys.readouterr().out


def test_gpu_cost_models_count_a_keras_step_and_its_h200_roofline_by_precision(tmp_path):
    """issue 30's models (--models): the MLP step's launches, bytes and FLOPs, and its H200
    estimate for float32 and TF32 from them."""
    gc = _load("gpu_cost")
    out = tmp_path / "models.json"
    assert gc.main(["--models", "mlp", "--json", str(out)]) == 0
    (name, e), = json.loads(out.read_text()).items()
    assert name.startswith("MLP 784-1024-1024-10") and e["traced, fused"] > 0
    # eager, a layer's activation backward and bias gradient are one launch (bias_act's
    # kernel); traced and fused, a generated kernel ending in a bias gradient over more than
    # 16 rows takes two (its two stages): at most one more per layer
    assert e["traced, fused"] <= e["launches"] + 3
    assert e["captured"] == 1   # apply_gradients included (its step terms on the device)
    # the forward's GEMMs, the weights' gradients and the inputs' gradients but the first
    # layer's (the data needs none)
    gemm = 2 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10)
    assert e["flops"] >= 3 * gemm - 2 * 256 * 784 * 1024
    r = e["roofline_us"]
    assert set(r) == {"float32", "tf32"}
    assert r["float32"]["eager"] == pytest.approx(gm.roofline_s(
        e["bytes"], e["flops"], e["launches"], machine=gm.Machine(
            hbm_bytes_per_s=4.8e12, fp32_flops_per_s=67e12)) * 1e6)
    assert r["tf32"]["work only"] < r["float32"]["work only"]
    assert r["tf32"]["one graph"] < r["tf32"]["eager"]
