"""Tests of the performance model (``squeezenic_hw.model``) and ``squeezenic-hw model``."""

import csv
import io
import json
import math
from itertools import pairwise

import pytest

from squeezenic_hw.cli import main
from squeezenic_hw.model import (
    GBIT,
    HW_PIPELINE_LATENCY,
    SCHEMES,
    Cluster,
    Compression,
    GpuCost,
    ModelConfig,
    SyncBreakdown,
    auto_host_bw,
    evaluate,
    hw_cost,
    iteration_time,
    parse_bandwidth,
    parse_size,
    parse_time,
    partition_sizes,
    pipeline_makespan,
    resolve_compression,
    t_app1,
    t_app2,
    t_baseline,
    wire_rate,
    workload,
)
from squeezenic_hw.model.gpu import gpu_cost
from squeezenic_hw.spec.codecs import CODECS, codec_info

from support.unused import rejected

approx = pytest.approx


class Free:
    """A compressor that costs nothing."""

    def comp_time(self, nbytes):
        return 0.0

    def decomp_time(self, nbytes):
        return 0.0


def given_rate(r):
    return Compression("test", "sign", 0, 1, r, "given")


# A small cluster worked by hand below: N = 4 nodes of M = 2 GPUs,
# B = 1 GB/s with alpha 10 us, V = 10 GB/s with alpha 1 us, |g| = 100 MB.
CL = Cluster(nodes=4, gpus_per_node=2, inter_bw=1e9, intra_bw=1e10,
             alpha_inter=1e-5, alpha_intra=1e-6)
G = 1e8


# ---------------------------------------------------------------- equations

def test_alpha_beta_link():
    assert CL.inter.time(0) == 1e-5
    assert CL.inter.time(1e9) == approx(1 + 1e-5)
    assert CL.intra.time(5e9) == approx(0.5 + 1e-6)


def test_equation_1_by_hand():
    b = t_baseline(G, CL)
    # (M-1) T_intra(g) = 1 * (1e-6 + 1e8/1e10) ; 2(N-1) T_inter(g) = 6 * (1e-5 + 1e8/1e9)
    assert b.intra == approx(0.010001)
    assert b.inter == approx(0.60006)
    assert b.total == approx(0.610061)
    assert b.nic_comp == b.nic_decomp == b.gpu_comp == b.gpu_decomp == 0


def test_equation_1_chunked_ring_by_hand():
    b = t_baseline(G, CL, ring="chunk")
    # ring steps carry g/M = 5e7 intra and g/N = 2.5e7 inter
    assert b.intra == approx(1e-6 + 5e7 / 1e10)
    assert b.inter == approx(6 * (1e-5 + 2.5e7 / 1e9))
    assert b.total == approx(0.005001 + 0.15006)


def test_hw_cost_by_hand():
    hw = hw_cost("sign", None, 400)
    assert (hw.lanes, hw.tx_latency_cycles, hw.rx_latency_cycles) == (4, 33, 16)
    assert hw.throughput == 4 * 64 * 250e6 == 64e9
    assert hw.comp_time(0) == approx(33 / 250e6)  # 132 ns
    assert hw.decomp_time(0) == approx(64e-9)
    assert hw.comp_time(1e8) == approx(132e-9 + 1e8 / 64e9)
    assert hw.decomp_time(1e8) == approx(64e-9 + 1.5625e-3)


def test_equation_2_by_hand():
    hw = hw_cost("sign", None, 400)
    b = t_app1(G, CL, 1 / 32, hw)
    # intra as (1); inter 6 * (1e-5 + 1e8/32/1e9) ; N T_comp = 4 * (132e-9 + 1e8/64e9)
    assert b.intra == approx(0.010001)
    assert b.inter == approx(6 * (1e-5 + 3.125e-3)) == approx(0.01881)
    assert b.nic_comp == approx(4 * (132e-9 + 1.5625e-3)) == approx(0.006250528)
    assert b.nic_decomp == approx(4 * (64e-9 + 1.5625e-3)) == approx(0.006250256)
    assert b.gpu_work == 0
    assert b.total == approx(0.010001 + 0.01881 + 0.006250528 + 0.006250256)


def test_equation_2_on_gpu_puts_the_work_on_the_gpu():
    gpu = GpuCost(1e-10, 2e-10)
    b = t_app1(G, CL, 0.25, gpu, where="gpu")
    assert b.nic_comp == b.nic_decomp == 0
    assert b.gpu_comp == approx(4 * 1e8 * 1e-10)   # N T_comp^GPU(g) = 0.04
    assert b.gpu_decomp == approx(0.08)
    assert b.inter == approx(6 * (1e-5 + 0.025))


def test_equation_3_by_hand():
    hw = hw_cost("sign", None, 400)
    gpu = GpuCost(1e-10, 2e-10)
    b = t_app2(G, CL, 1 / 32, gpu, hw)
    # (M-1) T_intra(Q(g)) = 1e-6 + 3.125e6/1e10 ; (M-1) T_comp^GPU = 1e8 * 1e-10 ; decomp 0.02
    assert b.intra == approx(1e-6 + 3.125e-4)
    assert b.gpu_comp == approx(0.01)
    assert b.gpu_decomp == approx(0.02)
    assert b.inter == approx(0.01881)
    assert b.nic_comp == approx(0.006250528)
    assert b.nic_decomp == approx(0.006250256)
    assert b.total == approx(3.135e-4 + 0.03 + 0.01881 + 0.006250528 + 0.006250256)
    # All on the GPU: the N terms move to the GPU, the total is the same formula.
    g2 = t_app2(G, CL, 1 / 32, gpu, gpu, where="gpu")
    assert g2.nic_comp == g2.nic_decomp == 0
    assert g2.gpu_comp == approx(0.01 + 4 * 0.01)
    assert g2.gpu_decomp == approx(0.02 + 4 * 0.02)


def test_equation_3_with_one_gpu_per_node_is_equation_2():
    cl = Cluster(4, 1, 1e9, 1e10)
    hw = hw_cost("fp16", None, 200)
    gpu = GpuCost(1e-9, 1e-9)
    assert t_app2(G, cl, 0.5, gpu, hw).total == approx(t_app1(G, cl, 0.5, hw).total)


@pytest.mark.parametrize("ring", ["partition", "chunk"])
def test_rate_one_and_free_compression_reduce_to_the_baseline(ring):
    base = t_baseline(G, CL, ring)
    assert t_app1(G, CL, 1.0, Free(), ring).total == approx(base.total)
    assert t_app2(G, CL, 1.0, Free(), Free(), ring).total == approx(base.total)
    assert t_app1(G, CL, 1.0, Free(), ring, where="gpu") == SyncBreakdown(base.intra, base.inter)


def test_compression_always_shortens_communication():
    hw = hw_cost("sign", None, 3200)
    for r in (0.5, 0.25, 1 / 32):
        b = t_app1(G, CL, r, hw)
        assert b.inter < t_baseline(G, CL).inter
        assert b.inter == approx(6 * (1e-5 + r * G / 1e9))


@pytest.mark.parametrize("bad, match", [
    (dict(rate=0), "rate"), (dict(rate=-0.5), "rate"), (dict(rate=3), "rate"),
    (dict(rate=float("nan")), "rate"), (dict(ring="tree"), "ring"), (dict(where="cpu"), "where"),
])
def test_equations_reject_bad_parameters(bad, match):
    kw = dict(rate=0.5, ring="partition", where="nic")
    kw.update(bad)
    with pytest.raises(ValueError, match=match):
        t_app1(G, CL, kw["rate"], Free(), kw["ring"], kw["where"])


@pytest.mark.parametrize("kw, name", [
    (dict(nodes=0), "nodes"), (dict(gpus_per_node=0), "gpus_per_node"),
    (dict(nodes=2.5), "nodes"), (dict(inter_bw=-1.0), "inter_bw"), (dict(intra_bw=0), "intra_bw"),
    (dict(inter_bw=math.inf), "inter_bw"), (dict(alpha_inter=-1e-6), "alpha_inter"),
    (dict(alpha_intra=float("nan")), "alpha_intra"),
])
def test_cluster_rejects_bad_parameters(kw, name):
    args = dict(nodes=2, gpus_per_node=2, inter_bw=1e9, intra_bw=1e10)
    args.update(kw)
    rejected(Cluster, **args, match=f"^{name}:")


# ---------------------------------------------------------------- hardware and codecs

def test_hw_latency_table_covers_every_codec():
    assert set(HW_PIPELINE_LATENCY) == set(CODECS)
    # measured on the lanes (bench/lanes.py); the slowest codecs wait for fp32 multiplies
    assert HW_PIPELINE_LATENCY["fixed"] == (46, 16) and HW_PIPELINE_LATENCY["raw"] == (33, 16)
    for bw in (100, 800, 6400):
        assert hw_cost("qsgd", 4, bw).lanes == bw // 100


@pytest.mark.parametrize("bw", [0, 50, 150, 6500, 12800, -100, 400.5, True, "400"])
def test_host_bw_must_be_a_multiple_of_100_up_to_6400(bw):
    with pytest.raises(ValueError, match="^host_bw:"):
        hw_cost("sign", None, bw)


def test_hw_cost_rejects_unknown_codec_and_bad_param():
    with pytest.raises(ValueError, match="^codec:"):
        hw_cost("zip", None, 400)
    with pytest.raises(ValueError, match="^param:"):
        hw_cost("qsgd", 1, 400)
    with pytest.raises(ValueError, match="^param:"):
        hw_cost("sign", 3, 400)


def test_auto_host_bw_keeps_the_wire_full():
    assert auto_host_bw(100 * GBIT, 1 / 32) == 3200
    assert auto_host_bw(100 * GBIT, 0.5) == 200
    assert auto_host_bw(100 * GBIT, 0.0317) == 3200     # 3154.6 Gb/s -> 32 lanes
    assert auto_host_bw(100 * GBIT, 1.0) == 100
    assert auto_host_bw(400 * GBIT, 1 / 32) == 6400     # capped
    assert auto_host_bw(1 * GBIT, 1.0) == 100


def test_wire_rate_without_headers_is_bits_over_32():
    for name, info in CODECS.items():
        param = 8 if info.param_range else None
        assert wire_rate(name, param, header_overhead=False) == 1 / codec_info(name).ratio(param)
    assert wire_rate("qsgd", 2, header_overhead=False) == 2 / 32


def test_wire_rate_with_headers_by_hand():
    # sign at MTU 1518: 11632 codes in 1454 payload bytes + 64 header bytes, against
    # plain UDP frames of 369 fp32 values in 1518 bytes
    assert wire_rate("sign") == approx((1518 / 11632) / (1518 / 369)) == approx(369 / 11632)
    # raw: 363 values per frame, a little worse than the baseline's framing
    assert wire_rate("raw") == approx((1516 / 363) / (1518 / 369))
    assert 1 < wire_rate("raw") < 1.02
    # jumbo frames: overhead shrinks
    assert wire_rate("sign", mtu=9000) < wire_rate("sign")
    with pytest.raises(ValueError, match="^mtu:"):
        wire_rate("sign", mtu=100)


def test_resolve_compression():
    c = resolve_compression()
    assert (c.label, c.codec, c.param, c.bits) == ("onebit", "sign", 0, 1)
    assert resolve_compression(preset="terngrad").codec == "qsgd"
    assert resolve_compression(preset="int8", header_overhead=False).rate == 0.25
    c = resolve_compression(codec="fixed", param=4, rate=0.2)
    assert (c.label, c.rate, c.rate_source) == ("fixed:4", 0.2, "given")
    for kw, name in [(dict(codec="zip"), "codec"), (dict(preset="zip"), "preset"),
                     (dict(codec="fixed"), "param"), (dict(codec="fixed", param=17), "param"),
                     (dict(codec="sign", preset="onebit"), "codec"),
                     (dict(rate=0), "rate"), (dict(rate=1.01), "rate")]:
        with pytest.raises(ValueError, match=f"^{name}:"):
            resolve_compression(**kw)


# ---------------------------------------------------------------- workloads and GPU cost

def test_workload_presets():
    bert = workload()
    assert bert.gradient_bytes == 1.36e9 and bert.compute_time == 3.3
    assert bert.gpu_compress["onebit"] == 0.062 and bert.gpu_compress["terngrad"] == 0.122
    assert bert.forward_time + bert.backward_time == approx(3.3)
    rn = workload("resnet-50")
    assert rn.gradient_bytes == approx(102.4e6) and rn.gpu_compress["onebit"] == 0.035
    custom = workload("custom", model_bytes=6.8e8, compute_time=1.0)
    assert custom.gpu_compress["onebit"] == approx(0.031)   # BERT's cost per byte
    big = workload("bert-large", model_bytes=2.72e9)
    assert big.gpu_compress["onebit"] == approx(0.124) and big.compute_time == 3.3
    with pytest.raises(ValueError, match="^model:"):
        workload("custom", model_bytes=1e9)
    with pytest.raises(ValueError, match="^model:"):
        workload("gpt-5")
    with pytest.raises(ValueError, match="^backward_fraction:"):
        workload(backward_fraction=1.5)
    with pytest.raises(ValueError, match="^model_bytes:"):
        workload("custom", model_bytes=-1, compute_time=1)


def test_gpu_cost_from_table2():
    bert = workload()
    g = gpu_cost(bert, "sign")
    assert g.comp_time(bert.gradient_bytes) == approx(0.062)
    assert g.decomp_time(bert.gradient_bytes) == approx(0.062)
    assert gpu_cost(bert, "qsgd", 2).comp_time(bert.gradient_bytes) == approx(0.122)
    assert "assumed" in gpu_cost(bert, "fp16").source
    g = gpu_cost(bert, "sign", comp_time=1.0, decomp_time=0.5)
    assert g.comp_time(0.68e9) == approx(0.5) and g.decomp_time(0.68e9) == approx(0.25)


# ---------------------------------------------------------------- pipelining

def test_partition_sizes():
    assert list(partition_sizes(100, 25)) == [25, 25, 25, 25]
    assert list(partition_sizes(110, 25)) == [25, 25, 25, 25, 10]
    assert list(partition_sizes(10, 25)) == [10]
    assert len(partition_sizes(1.36e9, 25 * 2**20)) == 52
    with pytest.raises(ValueError, match="^partition_bytes:"):
        partition_sizes(100, 0)


def test_pipeline_makespan_by_hand():
    assert pipeline_makespan([1, 1, 1], [2, 2, 2]) == 7      # 1 + 3 * 2: sync-bound
    assert pipeline_makespan([2, 2, 2], [1, 1, 1]) == 7      # 3 * 2 + 1: compute-bound
    assert pipeline_makespan([3, 1], [1, 1]) == 5            # C=3,S=4; C=4,S=5
    assert pipeline_makespan([1, 0], [0, 4]) == 5
    assert pipeline_makespan([], []) == 0
    # no overlap possible with one partition
    assert pipeline_makespan([2.5], [1.5]) == 4
    with pytest.raises(ValueError, match="^sync:"):
        pipeline_makespan([1, 2], [1])


def test_iteration_time_by_hand():
    # z = 100 MB in K = 2 partitions of 50 MB; compute 1 s, half of it backward.
    work = workload("custom", model_bytes=1e8, compute_time=1.0, backward_fraction=0.5)
    cfg = ModelConfig(work=work, nodes=(4,), gpus_per_node=2, inter_bw=1e9, intra_bw=1e10,
                      alpha_inter=1e-5, alpha_intra=1e-6, partition_bytes=5e7,
                      compression=given_rate(0.25), host_bw=400, gpu_contention=True)
    # (1) per partition: 1*(1e-6 + 5e7/1e10) + 6*(1e-5 + 5e7/1e9) = 0.005001 + 0.30006
    s = 0.305061
    it, sync, gw = iteration_time(cfg, 4, "none")
    # forward 0.5, then stages c = 0.25, s: 0.5 + 0.25 + 2 s
    assert it == approx(0.5 + 0.25 + 2 * s)
    assert sync == approx(2 * s) and gw == 0
    # gpu-app1: GPU work N*(comp+decomp) of each partition joins its compute stage
    gpu = cfg.gpu()
    work_k = 4 * (gpu.comp_time(5e7) + gpu.decomp_time(5e7))
    s1 = 0.005001 + 6 * (1e-5 + 0.25 * 5e7 / 1e9)
    it, sync, gw = iteration_time(cfg, 4, "gpu-app1")
    assert gw == approx(2 * work_k)
    assert it == approx(0.5 + pipeline_makespan([0.25 + work_k] * 2, [s1] * 2))
    # without contention the same work sits in the synchronisation stage
    free_cfg = ModelConfig(**{**cfg.__dict__, "gpu_contention": False})
    it2, _, _ = iteration_time(free_cfg, 4, "gpu-app1")
    assert it2 == approx(0.5 + pipeline_makespan([0.25] * 2, [s1 + work_k] * 2))


def test_model_config_rejects_bad_values():
    for kw, name in [(dict(nodes=()), "nodes"), (dict(nodes=(2, 0)), "nodes"),
                     (dict(nodes="16"), "nodes"), (dict(inter_bw=0), "inter_bw"),
                     (dict(partition_bytes=-1), "partition_bytes"), (dict(ring="x"), "ring"),
                     (dict(gpu_contention="yes"), "gpu_contention"),
                     (dict(compression="onebit"), "compression")]:
        rejected(ModelConfig, **kw, match=f"^{name}:")
    with pytest.raises(ValueError, match="^host_bw:"):
        evaluate(ModelConfig(host_bw=250))


# ---------------------------------------------------------------- limiting behaviour

def test_rate_one_and_free_compression_reduce_to_the_baseline_per_iteration():
    cfg = ModelConfig(compression=given_rate(1.0), gpu_comp_time=0, gpu_decomp_time=0,
                      host_bw=6400)
    res = evaluate(cfg)
    for n in cfg.nodes:
        base = res.row(n, "none").iteration_time
        for s in ("gpu-app1", "gpu-app2"):
            assert res.row(n, s).iteration_time == approx(base, rel=1e-12)
        # only the NIC's own time remains: N (T_comp + T_decom) per partition at 6400 Gb/s
        nic = res.partitions * n * (res.hw.comp_time(cfg.partition_bytes)
                                    + res.hw.decomp_time(cfg.partition_bytes))
        for s in ("nic-app1", "nic-app2"):
            assert base <= res.row(n, s).iteration_time <= base + nic + 1e-12
        assert nic < 0.01 * base


def test_larger_inter_node_bandwidth_shrinks_the_gain():
    gains = []
    for gbps in (25, 50, 100, 200, 400, 1600):
        res = evaluate(ModelConfig(inter_bw=gbps * GBIT, nodes=(16,)))
        gains.append(res.row(16, "nic-app1").speedup)
    assert all(a >= b for a, b in pairwise(gains))
    assert gains[0] > 2 and gains[-1] == approx(1, abs=0.01)


def test_more_nodes():
    res = evaluate(ModelConfig(nodes=(1, 2, 4, 8, 16, 32)))
    ns = res.config.nodes

    def series(scheme, attr="iteration_time"):
        return [getattr(res.row(n, scheme), attr) for n in ns]

    base = series("none")
    assert all(a <= b for a, b in pairwise(base))
    sp = series("nic-app1", "speedup")
    assert all(a <= b + 1e-12 for a, b in pairwise(sp))
    # as printed, each ring step carries the whole partition: inter time grows as 2(N-1)
    sync = series("none", "sync_time")
    assert sync[-1] > 10 * sync[1]
    # N T_comp^GPU(g): GPU work of Approach 1 on GPU grows linearly with N
    gw = series("gpu-app1", "gpu_work")
    assert gw == approx([n * 0.124 for n in ns])
    # the bandwidth-optimal ring: inter-node time is bounded by 2 z / B
    chunk = evaluate(ModelConfig(nodes=ns, ring="chunk", alpha_inter=0, alpha_intra=0))
    z_over_b = 1.36e9 / (100 * GBIT)
    for n in ns:
        b = chunk.row(n, "none")
        intra = 7 * (1.36e9 / 8) / 150e9
        assert b.sync_time == approx(2 * (n - 1) / n * z_over_b + intra)


def test_one_node_needs_no_inter_node_traffic():
    res = evaluate(ModelConfig(nodes=(1,), gpus_per_node=1))
    assert res.row(1, "none").sync_time == approx(0)


def test_speedup_definitions():
    res = evaluate()
    for r in res.rows:
        base = res.row(r.nodes, "none").iteration_time
        assert r.speedup == approx(base / r.iteration_time)
        if r.scheme.startswith("nic-"):
            gpu = res.row(r.nodes, "gpu-" + r.scheme[4:]).iteration_time
            assert r.speedup_vs_gpu == approx(gpu / r.iteration_time)
        else:
            assert r.speedup_vs_gpu is None
        assert r.exposed_sync == approx(r.iteration_time - 3.3)
    assert [r.scheme for r in res.rows[:5]] == list(SCHEMES)


def test_paper_setup_at_16_nodes():
    """Pins the numbers docs/model.md compares with the paper's 1.21x / 1.15x."""
    res = evaluate()
    assert res.partitions == 52 and res.hw.host_bw_gbps == 3200
    assert res.row(16, "nic-app1").speedup == approx(1.358, abs=5e-3)
    assert res.row(16, "nic-app2").speedup == approx(1.076, abs=5e-3)
    # below 16 nodes BERT-Large's 2.2 s backward pass hides the baseline's traffic
    for n in (2, 4, 8):
        assert res.row(n, "nic-app1").speedup == approx(1, abs=0.01)
    # GPU compression never pays off here
    assert all(r.speedup < 1 for r in res.rows if r.scheme.startswith("gpu-"))


# ---------------------------------------------------------------- units

def test_units():
    assert parse_size("25MiB") == 25 * 2**20
    assert parse_size("1.36GB") == 1.36e9
    assert parse_size("1e9") == 1e9
    assert parse_bandwidth("100") == 12.5e9
    assert parse_bandwidth("100Gb/s") == parse_bandwidth("100 Gbps") == 12.5e9
    assert parse_bandwidth("150GB/s") == 150e9
    assert parse_bandwidth("1Tb/s") == 125e9
    assert parse_time("10", default_unit="us") == 1e-5
    assert parse_time("3.3") == 3.3
    assert parse_time("90ms") == approx(0.09)
    for f, text in [(parse_size, "-1"), (parse_size, "1XB"), (parse_size, "abc"),
                    (parse_bandwidth, "0"), (parse_bandwidth, "10 furlongs"),
                    (parse_time, "-1s"), (parse_time, "1h"), (parse_size, "inf")]:
        with pytest.raises(ValueError, match="^x:"):
            f(text, "x")


# ---------------------------------------------------------------- CLI

def run_cli(capsys, *argv):
    code = main(["model", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_table_csv_json_agree(capsys):
    code, table, err = run_cli(capsys)
    assert code == 0 and err == ""
    code, text, _ = run_cli(capsys, "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(text)))
    code, js, _ = run_cli(capsys, "--format", "json")
    assert code == 0
    obj = json.loads(js)
    assert set(obj) == {"model", "parameters", "compression", "hardware", "gpu", "rows"}
    assert len(rows) == len(obj["rows"]) == 20
    assert list(rows[0]) == list(obj["rows"][0])
    for c, j in zip(rows, obj["rows"], strict=True):
        assert int(c["nodes"]) == j["nodes"] and c["scheme"] == j["scheme"]
        for k in ("iteration_s", "sync_s", "gpu_work_s", "exposed_sync_s", "speedup"):
            assert float(c[k]) == approx(j[k], rel=1e-12)
        assert (c["speedup_vs_gpu"] == "") == (j["speedup_vs_gpu"] is None)
    # the table shows the same rows (6 significant digits)
    lines = table.splitlines()
    assert lines[0].startswith("bert-large")
    at = next(i for i, ln in enumerate(lines) if ln.startswith("nodes "))
    header = lines[at].split()
    assert header == list(rows[0])
    assert set(lines[at + 1]) == {"-", " "}
    body = [ln.split() for ln in lines[at + 2:]]
    assert len(body) == 20
    for cells, j in zip(body, obj["rows"], strict=True):
        assert int(cells[0]) == j["nodes"] and cells[1] == j["scheme"]
        assert float(cells[header.index("speedup")]) == approx(j["speedup"], rel=1e-5)
        assert float(cells[header.index("iteration_s")]) == approx(j["iteration_s"], rel=1e-5)
    p = obj["parameters"]
    assert p["nodes"] == [2, 4, 8, 16] and p["gpus_per_node"] == 8 and p["partitions"] == 52
    assert p["inter_bw_Bps"] == 12.5e9 and p["intra_bw_Bps"] == 150e9
    assert obj["compression"]["label"] == "onebit" and obj["hardware"]["lanes"] == 32
    assert obj["gpu"]["comp_s"] == approx(0.062)


def test_cli_options_reach_the_model(capsys):
    code, js, err = run_cli(
        capsys, "--format", "json", "--model", "resnet-50", "--nodes", "3,5",
        "--gpus-per-node", "4", "--inter-bw", "25GB/s", "--intra-bw", "300GB/s",
        "--alpha", "2us", "--alpha-intra", "1", "--partition-bytes", "10MB",
        "--codec", "qsgd", "--param", "4", "--host-bw", "800", "--mtu", "9000",
        "--gpu-comp-time", "0.1", "--gpu-decomp-time", "50ms", "--ring", "chunk",
        "--no-gpu-contention", "--compute-time", "0.2", "--backward-fraction", "0.5")
    assert code == 0, err
    obj = json.loads(js)
    p = obj["parameters"]
    assert p["nodes"] == [3, 5] and p["gpus_per_node"] == 4
    assert p["inter_bw_Bps"] == 25e9 and p["intra_bw_Bps"] == 300e9
    assert p["alpha_inter_s"] == 2e-6 and p["alpha_intra_s"] == 1e-6
    assert p["partition_bytes"] == 1e7 and p["ring"] == "chunk"
    assert p["gpu_contention"] is False
    assert obj["compression"]["label"] == "qsgd:4" and obj["compression"]["bits"] == 4
    assert obj["hardware"]["host_bw_gbps"] == 800
    assert obj["gpu"]["comp_s"] == approx(0.1) and obj["gpu"]["decomp_s"] == approx(0.05)
    assert obj["model"]["name"] == "resnet-50" and obj["model"]["compute_s"] == 0.2
    assert [r["nodes"] for r in obj["rows"]] == [3] * 5 + [5] * 5
    code, js, _ = run_cli(capsys, "--format", "json", "--model-bytes", "500MB",
                          "--compute-time", "1", "--rate", "0.1", "--no-header-overhead")
    obj = json.loads(js)
    assert obj["model"]["name"] == "custom" and obj["model"]["gradient_bytes"] == 5e8
    assert obj["compression"]["rate"] == 0.1


@pytest.mark.parametrize("argv", [
    ["--inter-bw=-100"], ["--intra-bw", "0"], ["--intra-bw", "10XB/s"],
    ["--host-bw", "150"], ["--host-bw", "7000"], ["--host-bw", "fast"],
    ["--codec", "zip"], ["--codec", "qsgd"], ["--codec", "qsgd", "--param", "1"],
    ["--param", "4"], ["--preset", "gzip"], ["--codec", "sign", "--preset", "onebit"],
    ["--rate", "1.5"], ["--rate", "0"], ["--rate", "-0.1"], ["--rate", "half"],
    ["--nodes", "0"], ["--nodes", "a,b"], ["--nodes", ","], ["--gpus-per-node", "0"],
    ["--model", "gpt"], ["--model", "custom"], ["--model-bytes", "1GB"],
    ["--partition-bytes", "0"], ["--ring", "tree"], ["--mtu", "50"], ["--alpha=-1"],
    ["--backward-fraction", "2"], ["--compute-time", "-1"], ["--gpu-comp-time", "x"],
    ["--plot", "/nonexistent/dir/m.png"],
])
def test_cli_bad_options_fail_with_one_line(capsys, argv):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith("squeezenic-hw model: error: ")
    assert "Traceback" not in err


def test_cli_error_names_the_option(capsys):
    _, _, err = run_cli(capsys, "--host-bw", "150")
    assert "--host-bw" in err and "multiple of 100" in err
    _, _, err = run_cli(capsys, "--inter-bw=-100")
    assert "--inter-bw" in err
    _, _, err = run_cli(capsys, "--codec", "zip")
    assert "zip" in err


def test_cli_plot_writes_png(capsys, tmp_path):
    path = tmp_path / "fig3.png"
    code, out, err = run_cli(capsys, "--plot", str(path), "--format", "csv")
    assert code == 0 and err == ""
    assert out.startswith("nodes,scheme")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
