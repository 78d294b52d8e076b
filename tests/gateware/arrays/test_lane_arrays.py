# amaranth: UnusedElaboratable=no
"""The host-bandwidth arrays: generators → TX lanes → arbiter → wire → distributor → RX
lanes → checkers."""

import pytest
from amaranth import Module
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.sim import Simulator

from squeezenic_hw.gateware.arrays.lane_arrays import RxArray, TxArray
from squeezenic_hw.reference.array import array_reference
from squeezenic_hw.reference.checker import CHECKER_KEYS
from squeezenic_hw.sim.streams import simulation_of
from squeezenic_hw.spec.generator import GeneratorConfig, config_values, lane_run_config
from squeezenic_hw.spec.scaling import lanes_for

from support.shared_duts import shared
from support.unused import rejected


class Loopback(wiring.Component):
    """TxArray → RxArray, the on-chip loopback of the paper's set-up."""

    def __init__(self, host_bw, codecs):
        self.tx = TxArray(host_bw, codecs=codecs)
        self.rx = RxArray(host_bw, codecs=codecs)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx, m.submodules.rx = self.tx, self.rx
        wiring.connect(m, self.tx.o, self.rx.i)
        return m


def _run_loopback(host_bw, cfg, n_frames, codecs, max_cycles=20000):
    dut = shared(Loopback, host_bw, codecs)
    n = dut.tx.n_lanes
    got = {}

    async def bench(ctx):
        ctrl = dut.tx.ctrl
        for name, value in config_values(cfg).items():
            if hasattr(ctrl, name):
                ctx.set(getattr(ctrl, name), value)
        ctx.set(ctrl.n_frames, n_frames)
        ctx.set(ctrl.start, 1)
        for _ in range(max_cycles):
            await ctx.tick()
            if all(ctx.get(dut.tx.frames_sent[k]) == n_frames for k in range(n)):
                break
        ctx.set(ctrl.start, 0)
        for _ in range(40):      # the last host frames reach the controllers
            await ctx.tick()
        ctx.set(dut.tx.close, 1)
        want = sum(len(r["wire"]) for r in expected)
        for _ in range(max_cycles):
            await ctx.tick()
            seen = sum(ctx.get(dut.rx.rx_counters[k].wire_frames) for k in range(n))
            if seen >= want:
                break
        for _ in range(120):     # the last host frames drain into the checkers
            await ctx.tick()
        for k in range(n):
            got[k] = {name: ctx.get(getattr(dut.rx.checkers[k], name))
                      for name in CHECKER_KEYS}
            got[k]["tx"] = {name: ctx.get(dut.tx.tx_counters[k][name])
                            for name in ("host_frames", "wire_frames", "elements")}

    expected = array_reference(lanes_for(host_bw), cfg, n_frames, codecs=codecs)
    simulation_of(dut).run([(bench, False)])
    return got, expected


def _check_lanes(got, expected, frames, elements):
    """Every lane's TX counts, checker counts and CRC as the reference's."""
    for k, want in enumerate(expected):
        assert got[k]["tx"]["host_frames"] == frames
        assert got[k]["tx"]["wire_frames"] == want["tx"]["wire_frames"]
        for name in CHECKER_KEYS:
            assert got[k][name] == want["checker"][name], (k, name)
        assert got[k]["gaps"] == 0 and got[k]["elements"] == frames * elements


@pytest.mark.parametrize("codec,param", [(1, 0), (5, 0)])
def test_loopback_two_lanes_matches_reference(codec, param):
    cfg = GeneratorConfig(codec=codec, param=param, elements=100, flush_every=3,
                          value_seed=5, seed=9, rate_bytes_per_cycle=64.0)
    got, expected = _run_loopback(200, cfg, 5, ["fp16", "sign"])
    _check_lanes(got, expected, 5, 100)


@pytest.mark.parametrize("codec,scale_bits,held", [("fixed:8", 0x406CCCCD, 0x40000000),
                                                   ("fixed:8", 0x45812345, 0x45800000),
                                                   ("fixed:4", 0x43812345, 0x43800000)])
def test_loopback_fixed_lanes_run_their_setting(codec, scale_bits, held):
    """``fixed`` generator lanes (narrow): the generators run the lane's width, nearest,
    with the scale's power of two, whatever the registers ask (here fp16, stochastic and
    a scale with fraction bits); counts and CRCs equal the reference of that run. At
    2**12 (``fixed:8``) and 2**8 (``fixed:4``) the small values take every level, so the
    cut mantissas the generators send are read to their last bit."""
    cfg = GeneratorConfig(codec=1, param=4, stochastic=True, scale_bits=scale_bits,
                          elements=100, flush_every=3, value_seed=5, seed=9,
                          rate_bytes_per_cycle=64.0)
    got, expected = _run_loopback(200, cfg, 4, [codec])
    assert lane_run_config(cfg, [codec]).scale_bits == held
    _check_lanes(got, expected, 4, 100)


@pytest.mark.parametrize("host_bw,codecs,codec", [
    (400, ["sign"], 5),
    pytest.param(800, ["fp16", "sign"], 1, marks=pytest.mark.slow),
])
def test_loopback_four_and_eight_lanes_match_reference(host_bw, codecs, codec):
    """Every lane's counts and CRC equal the reference at 4 and 8 lanes."""
    cfg = GeneratorConfig(codec=codec, elements=64, flush_every=2, value_seed=11, seed=3,
                          rate_bytes_per_cycle=64.0)
    got, expected = _run_loopback(host_bw, cfg, 3, codecs)
    assert len(expected) == lanes_for(host_bw)
    _check_lanes(got, expected, 3, 64)


def test_host_bw_validated():
    for bad in (0, 50, 150, 6500, 100.0, True):
        rejected(TxArray, bad, match="host_bw")
    assert lanes_for(6400) == 64


@pytest.mark.parametrize("host_bw", [
    # 200 and 400 (with the RX side) are converted inside the plugin: tests/flows/test_opennic.py
    pytest.param(200, marks=pytest.mark.slow),
    pytest.param(800, marks=pytest.mark.slow),    # ~3 min on a loaded 2-core box
    pytest.param(6400, marks=pytest.mark.slow),
])
def test_arrays_convert_to_verilog(host_bw):
    for top in (TxArray(host_bw, codecs=["sign"]), RxArray(host_bw, codecs=["sign"])):
        assert "module top" in verilog.convert(top, name="top")


@pytest.mark.slow
def test_eight_generators_keep_their_rate_onto_one_wire():
    from squeezenic_hw.flows.throughput import by_host_bw

    r = by_host_bw(800, "sign", 308, cycles=300, warmup=100)
    assert r.lanes == 8 and r.all_full_rate and r.generator_gbps_min > 90


def _run_rx_array(rx, wire, *, idle=0.0, seed=0):
    """``wire`` into RxArray ``rx``, then 400 quiet cycles: every lane's checker counters,
    every lane's ``wire_frames`` and the source (its accepted cycles)."""
    from squeezenic_hw.sim.axis import FrameSource

    source = FrameSource(rx.i, wire, idle=idle, seed=seed)
    got, wire_frames = {}, {}

    async def bench(ctx):
        while source.done_cycle is None:
            await ctx.tick()
        for _ in range(400):
            await ctx.tick()
        for k in range(rx.n_lanes):
            got[k] = {name: ctx.get(getattr(rx.checkers[k], name)) for name in CHECKER_KEYS}
            wire_frames[k] = ctx.get(rx.rx_counters[k].wire_frames)

    sim = Simulator(rx)
    sim.add_clock(4e-9)
    sim.add_testbench(source.run, background=True)
    sim.add_testbench(bench)
    sim.run()
    return got, wire_frames, source


def test_rx_array_takes_the_wire_at_full_rate_with_enough_lanes():
    """fp16 doubles the bytes: two RX lanes keep a one-beat-per-cycle wire moving."""
    cfg = GeneratorConfig(codec=1, elements=363, value_seed=3)
    ref = array_reference(2, cfg, 6, codecs=["fp16"])
    wire = [f for pair in zip(ref[0]["wire"], ref[1]["wire"], strict=True) for f in pair]
    got, _, source = _run_rx_array(RxArray(200, codecs=["fp16"]), wire)
    beats = sum(-(-len(f) // 64) for f in wire)
    cycles = source.done_cycle - source.accepted_cycles[0] + 1
    assert beats / cycles > 0.95, beats / cycles
    for k in range(2):
        assert got[k] == ref[k]["checker"]


def test_fewer_rx_lanes_than_generators_match_reference():
    """4 generators (sign) → wire → 2 RX lanes: each generator's wire frames are the
    reference's in order, and RX lane j (generators j and j + 2, interleaved as the
    arbiter sent them) ends with the checker reference of exactly that wire order."""
    from squeezenic_hw.reference import lane as lane_reference
    from squeezenic_hw.reference.checker import check_frames
    from squeezenic_hw.sim.axis import FrameSink
    from squeezenic_hw.spec.scaling import SRC_PORT_BASE

    n_frames = 3
    cfg = GeneratorConfig(codec=5, elements=64, flush_every=2, value_seed=7, seed=3,
                          rate_bytes_per_cycle=64.0)
    expected = array_reference(4, cfg, n_frames, codecs=["sign"])
    tx = TxArray(400, codecs=["sign"])
    n_wire = sum(len(e["wire"]) for e in expected)
    sink = FrameSink(tx.o, n_frames=n_wire, backpressure=0.3, seed=4)

    async def drive(ctx):
        for name, value in config_values(cfg).items():
            if hasattr(tx.ctrl, name):
                ctx.set(getattr(tx.ctrl, name), value)
        ctx.set(tx.ctrl.n_frames, n_frames)
        ctx.set(tx.ctrl.start, 1)
        while not all(ctx.get(tx.frames_sent[k]) == n_frames for k in range(4)):
            await ctx.tick()
        for _ in range(40):
            await ctx.tick()
        ctx.set(tx.close, 1)
        await ctx.tick()
        ctx.set(tx.close, 0)

    sim = Simulator(tx)
    sim.add_clock(4e-9)
    sim.add_testbench(drive, background=True)
    sim.add_testbench(sink.run)
    sim.run()
    wire = [f.data for f in sink.frames]
    sport = [int.from_bytes(f[34:36], "big") - SRC_PORT_BASE for f in wire]
    for k in range(4):
        assert [f for f, s in zip(wire, sport, strict=True) if s == k] == expected[k]["wire"]
    assert len(set(sport[:4])) > 1          # the arbiter interleaves the generators

    rx = RxArray(400, codecs=["sign"], lanes=2)
    assert rx.n_lanes == 2
    got, wire_frames, _ = _run_rx_array(rx, wire, idle=0.2, seed=6)
    for j in range(2):
        mine = [f for f, s in zip(wire, sport, strict=True) if s % 2 == j]
        back, _ = lane_reference.rx(mine, codecs=["sign"])
        want = check_frames(back)
        assert wire_frames[j] == len(mine)
        assert got[j] == want, j
        assert want["frames"] == sum(expected[k]["checker"]["frames"] for k in (j, j + 2))
        assert want["elements"] == 2 * n_frames * 64


def test_rx_array_lanes_validated():
    for bad in (0, 5, 2.0, True):
        rejected(RxArray, 400, lanes=bad, match="lanes")


def test_tx_array_of_a_lane_count_is_that_of_its_bandwidth():
    """``lanes=N`` (a build's resolved lane count) builds what ``host_bw = 100·N`` does."""
    by_count = TxArray(lanes=4, codecs=["sign"], lane_module="gen_lane")
    assert by_count.n_lanes == 4
    assert (verilog.convert(by_count, name="top")
            == verilog.convert(TxArray(400, codecs=["sign"], lane_module="gen_lane"),
                               name="top"))
    for bad in (0, 65, 2.0, True):
        rejected(TxArray, lanes=bad, match="lanes")
    for both_or_neither in (dict(host_bw=400, lanes=4), dict()):
        rejected(TxArray, **both_or_neither, match="host_bw or lanes")


def test_tx_array_lanes_as_instances_of_one_module():
    """With ``lane_module`` every generator lane is an instance of that module, whose
    ports are those of a GeneratorLane converted on its own."""
    import re

    from squeezenic_hw.gateware.arrays.lane_arrays import GeneratorLane

    text = verilog.convert(TxArray(400, codecs=["sign"], lane_module="gen_lane"), name="top")
    assert len(re.findall(r"^\s*gen_lane \S+ \(", text, re.M)) == 4
    lane = verilog.convert(GeneratorLane(["sign"]), name="gen_lane")
    ports = set(re.search(r"module gen_lane\((.*?)\);", lane, re.S).group(1)
                .replace("\n", " ").replace(" ", "").split(","))
    inst = re.search(r"^\s*gen_lane \S+ \((.*?)\);", text, re.M | re.S).group(1)
    assert set(re.findall(r"\.(\w+)\(", inst)) == ports
    rejected(TxArray, 400, lane_module="not a name", match="lane_module")


def test_generator_lane_options():
    from squeezenic_hw.gateware.arrays.lane_arrays import generator_lane_options

    assert generator_lane_options(["fixed:8"]) == {"trusted": True, "code_bits": 8}
    assert generator_lane_options("sign") == {"trusted": True, "code_bits": None}
    assert generator_lane_options(["fixed:4", "sign"])["code_bits"] == 4
    assert generator_lane_options(["fixed:4", "qsgd:4"])["code_bits"] == 4
    assert generator_lane_options(["fixed:4", "qsgd:8"])["code_bits"] is None
    assert generator_lane_options(["fixed"])["code_bits"] is None
    # threshold's keep mask needs the classifier: such lanes check their frames
    assert generator_lane_options(["sign", "threshold"]) == {"trusted": False,
                                                              "code_bits": None}
    assert generator_lane_options(["7"])["trusted"] is False


def test_ring_sharing_is_worked_out_without_building_a_lane(monkeypatch):
    """``ring_cluster_size`` and ``shared_rings`` (which every ``GeneratorLane`` and the
    report call) take the lane's sizes from ``narrow_lane_sizes``: no lane is built and
    left unelaborated. Those sizes are the lane's own."""
    from squeezenic_hw.gateware.arrays import lane_arrays
    from squeezenic_hw.gateware.tx.narrow import NarrowTxLane, narrow_lane_sizes

    for codec in ("sign", "fixed:2", "fixed:4", "fixed:8"):
        for mtu in (68 + 4 * 8, 1518, 9600):
            lane = NarrowTxLane(codec, mtu=mtu)
            assert narrow_lane_sizes(codec, mtu) == (lane.capacity, lane.ring_rows,
                                                     lane.max_cluster)
    monkeypatch.setattr(lane_arrays, "NarrowTxLane", None)
    assert lane_arrays.ring_cluster_size(["sign"]) == 4
    assert lane_arrays.ring_cluster_size(["fixed:8"]) is None
    assert lane_arrays.shared_rings(["sign"], 6) == (32, [4, 2])
