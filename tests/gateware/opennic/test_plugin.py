# amaranth: UnusedElaboratable=no
"""The OpenNIC plugin simulated through its OpenNIC ports, against the numpy reference.
(The core with its wire looped back and its generators started over AXI-Lite, on the
compiled backend and on Amaranth: ``tests/sim/test_core_model.py``.)"""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from squeezenic_hw.build.params import PluginParams
from squeezenic_hw.gateware.opennic.core import SqueezeNicCore
from squeezenic_hw.gateware.opennic.plugin import OpenNicPlugin
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.reference.allreduce import (
    allreduce,
    contribution_frames,
    integer_values,
    result_frames,
)
from squeezenic_hw.regmap.plugin import PLUGIN_ID, REDUCE_TEMPLATE_WORDS, version_word
from squeezenic_hw.sim.axil import OKAY, SLVERR, axil_read, axil_write
from squeezenic_hw.sim.axis import AxisFrame, FrameSink, FrameSource
from squeezenic_hw.sim.opennic import add_clocks, axil_bus, flat_stream, reset
from squeezenic_hw.sim.reduce_ring import node_config
from squeezenic_hw.spec.counters import RX_COUNTERS, TX_COUNTERS
from squeezenic_hw.spec.frames import Header, build_host_frame

from support.lane_scenarios import host_stream, mixed_traffic
from support.reduce_frames import by_chunk_and_phase
from support.unused import rejected

CODECS = ["fp16", "sign"]


def _reg(rm, name):
    return rm[name].offset


def test_plugin_registers_and_streams_through_opennic_ports():
    """Registers over AXI-Lite (125 MHz) and H2C → TX, RX → C2H against the reference."""
    params = PluginParams(codecs=CODECS)
    top = OpenNicPlugin(params)
    rm = top.regmap
    rng = np.random.default_rng(5)
    h2c = mixed_traffic(rng, CODECS, n_streams=3, elements=(300, 1200), max_k=120)
    wire_in = [AxisFrame(f, src=3, dst=7) for f in lr.tx([f.data for f in h2c],
                                                          codecs=CODECS)[0]]
    wire_in += [AxisFrame(build_host_frame(Header(codec=1), np.ones(5, np.float32)))]
    bus = axil_bus(top)
    srcs = {"h2c": FrameSource(flat_stream(top, "s_axis_qdma_h2c", 0), h2c, idle=0.3, seed=1),
            "rx": FrameSource(flat_stream(top, "s_axis_adap_rx_250mhz", 0), wire_in,
                              idle=0.3, seed=2)}
    expected_tx, tx_cnt = lr.tx([f.data for f in h2c], codecs=CODECS)
    expected_c2h, rx_cnt = lr.rx([f.data for f in wire_in], codecs=CODECS)
    sinks = {"tx": FrameSink(flat_stream(top, "m_axis_adap_tx_250mhz", 0), backpressure=0.3,
                             seed=3, n_frames=len(expected_tx), timeout=100_000),
             "c2h": FrameSink(flat_stream(top, "m_axis_qdma_c2h", 0), backpressure=0.3,
                              seed=4, n_frames=len(expected_c2h), timeout=100_000)}
    got = {}
    arng = random.Random(7)

    async def bench(ctx):
        await reset(ctx, top)

        async def read(name_or_addr):
            addr = name_or_addr if isinstance(name_or_addr, int) else _reg(rm, name_or_addr)
            return await axil_read(ctx, bus, addr, rng=arng, max_delay=3, domain="axil")

        assert await read("id") == (PLUGIN_ID, OKAY)
        assert await read("version") == (version_word(), OKAY)
        assert await read("build_codecs") == ((1 << 1) | (1 << 5), OKAY)
        assert await read("build_mtu") == (1518, OKAY)
        assert await read("udp_port") == (params.port, OKAY)
        assert await axil_write(ctx, bus, _reg(rm, "scratch"), 0xDEADBEEF, rng=arng,
                                max_delay=3, domain="axil") == OKAY
        assert await read("scratch") == (0xDEADBEEF, OKAY)
        # unmapped: a gap in the map, past its end, and far above it
        for addr in (0x0F00, rm.size, 0x8000_0000):
            assert (await read(addr))[1] == SLVERR
            assert await axil_write(ctx, bus, addr, 1, domain="axil") == SLVERR
        # the streams ran meanwhile; wait for both sources, then close the open frame
        while srcs["h2c"].done_cycle is None or srcs["rx"].done_cycle is None:
            await ctx.tick("axil")
        for _ in range(60):
            await ctx.tick("axil")
        assert await axil_write(ctx, bus, _reg(rm, "tx_close"), 1, domain="axil") == OKAY
        for _ in range(5000):
            if len(sinks["tx"].frames) == len(expected_tx) and \
                    len(sinks["c2h"].frames) == len(expected_c2h):
                break
            await ctx.tick("axil")
        for _ in range(20):
            await ctx.tick("axil")
        got["tx_counters"] = {name: (await read(f"host0_tx_{name}"))[0]
                              for name in TX_COUNTERS}
        got["rx_counters"] = {name: (await read(f"host0_rx_{name}"))[0]
                              for name in RX_COUNTERS}

    sim = Simulator(top)
    add_clocks(sim, top)
    for s in srcs.values():
        sim.add_testbench(s.run, background=True)
    for s in sinks.values():
        sim.add_testbench(s.run, background=True)
    sim.add_testbench(bench)
    sim.run()

    assert [f.data for f in sinks["tx"].frames] == expected_tx
    assert all(f.dst == 1 << 6 for f in sinks["tx"].frames)     # the adapter's port bit
    assert [f.data for f in sinks["c2h"].frames] == expected_c2h
    assert all(f.dst == 1 for f in sinks["c2h"].frames)         # PCIe function 0
    assert got["tx_counters"] == tx_cnt | {"size_errors": 0}
    assert got["rx_counters"] == rx_cnt | {"size_errors": 0}
    assert tx_cnt["wire_frames"] > 3 and tx_cnt["bypass_frames"] > 0 and tx_cnt["close_end"]


def test_tx_only_build_has_generator_lanes_and_no_checkers():
    """The default --host-bw build is the paper's: generator lanes of the Table 6 codec
    onto the wire, no loopback RX lanes or checkers; the host lanes keep every codec."""
    params = PluginParams(host_bw=400)
    assert params.gen_codecs == ("fixed:8",) and params.rx_lanes == 0
    assert params.codecs == (0, 1, 2, 3, 4, 5, 6)
    core = SqueezeNicCore(params)
    names = {r.name for r in core.regmap}
    assert {"lane3_frames_sent", "lane3_tx_wire_frames", "build_rx_lanes"} <= names
    assert not any(n.startswith(("lane0_rx_", "lane0_chk_")) for n in names)
    from squeezenic_hw.gateware.arrays.lane_arrays import lane_codec_names
    assert lane_codec_names(params.gen_codecs) == ["fixed"]
    loop = PluginParams(host_bw=6400, loopback=True)
    assert loop.gen_codecs == ("sign",) and loop.rx_lanes == 32
    names = {r.name for r in SqueezeNicCore(loop).regmap}
    assert "lane31_chk_crc" in names and "lane32_chk_crc" not in names
    assert "lane63_tx_wire_frames" in names
    # a trusted generator lane's counters only; every TX counter when it checks frames
    assert "lane0_tx_close_end" in names and "lane0_tx_bypass_frames" not in names
    from squeezenic_hw.regmap.plugin import plugin_register_map
    thr = {r.name for r in plugin_register_map(PluginParams(host_bw=200,
                                                            gen_codecs=["sign", "threshold"]))}
    assert "lane1_tx_bypass_frames" in thr and "lane1_tx_size_errors" in thr


@pytest.mark.parametrize("bad,match", [
    (dict(num_intf=3), "num_intf"), (dict(host_bw=150), "host_bw"),
    (dict(host_bw=400, gen_codecs=["nope"]), "gen_codecs"),
    (dict(host_bw=400, gen_codecs=["fixed:40"]), "gen_codecs"),
    (dict(host_bw=400, gen_codecs=[]), "gen_codecs"), (dict(loopback=1), "loopback"),
    (dict(codecs=["nope"]), "codec"), (dict(mtu=60), "mtu"), (dict(port=0), "port"),
    (dict(max_host_elements=0), "max_host_elements"), (dict(idle_timeout=-1), "idle_timeout"),
])
def test_bad_parameters_name_themselves(bad, match):
    rejected(PluginParams, **bad, match=match)


def test_second_interface_and_runtime_registers():
    """num_intf 2: interface 1's lanes sit in the upper bits; enable, udp_port and
    idle_timeout act at once."""
    params = PluginParams(num_intf=2, codecs=["sign"])
    top = OpenNicPlugin(params)
    rm = top.regmap
    rng = np.random.default_rng(9)
    other_port = 4000
    a = host_stream(rng, "sign", n_total=120, max_k=40, flush_rate=0.0)       # default port
    b = host_stream(rng, "sign", n_total=80, max_k=40, flush_rate=0.0,
                    header=Header(dst_port=other_port))
    c = host_stream(rng, "sign", n_total=60, max_k=30, flush_rate=0.0)
    h2c = flat_stream(top, "s_axis_qdma_h2c", 1)
    tx = flat_stream(top, "m_axis_adap_tx_250mhz", 1)
    bus = axil_bus(top)
    want = (lr.tx(a, codecs=["sign"])[0]                      # closed by the idle timeout
            + lr.tx(b, codecs=["sign"], port=other_port)[0]   # after udp_port = 4000
            + c)                                              # enable = 0: unchanged
    sink = FrameSink(tx, n_frames=len(want), backpressure=0.2, seed=1, timeout=200_000)
    got = {}

    async def bench(ctx):
        await reset(ctx, top)

        async def write(name, value):
            assert await axil_write(ctx, bus, rm[name].offset, value, domain="axil") == OKAY

        await write("idle_timeout", 40)
        for frames in (a, b, c):
            if frames is b:
                await write("udp_port", other_port)
            if frames is c:
                await write("enable", 0)
            src = FrameSource(h2c, frames, idle=0.2, seed=len(frames))
            await src.run(ctx)
            for _ in range(120):          # past the idle timeout
                await ctx.tick()
        for _ in range(200):
            await ctx.tick()
        got["other_port"] = (await axil_read(ctx, bus, rm["host1_tx_bypass_other_port"].offset,
                                             domain="axil"))[0]
        got["close_idle"] = (await axil_read(ctx, bus, rm["host1_tx_close_idle"].offset,
                                             domain="axil"))[0]
        got["if0"] = (await axil_read(ctx, bus, rm["host0_tx_host_frames"].offset,
                                      domain="axil"))[0]

    sim = Simulator(top)
    add_clocks(sim, top)
    sim.add_testbench(sink.run, background=True)
    sim.add_testbench(bench)
    sim.run()
    assert [f.data for f in sink.frames] == want
    assert all(f.dst == 1 << 7 for f in sink.frames)    # interface 1: adapter bit 6 + 1
    assert got == {"other_port": len(c), "close_idle": 2, "if0": 0}


def test_reduce_node_through_opennic_ports():
    """A ``--reduce sign`` plugin as node 1 of a ring of two, configured over AXI-Lite: its
    host's contribution frames on H2C and node 0's reduce frames on the wire give node 1's
    frames of the reference ring on the wire and its host's result frames on C2H."""
    nodes, rank, elements = 2, 1, 300
    settings = {"scale": 0.5, "aux": -0.25}
    params = PluginParams(codecs=["sign"], reduce=["sign"])
    top = OpenNicPlugin(params)
    rm = top.regmap
    rng = np.random.default_rng(11)
    xs = [rng.normal(size=elements).astype(np.float32) for _ in range(nodes)]
    result = allreduce(xs, "sign", seed=3, mtu=params.mtu, **settings)
    h2c = contribution_frames(xs[rank], rank, nodes, "sign", mtu=params.mtu, **settings)
    expected_tx = result.links[rank]
    expected_c2h = result_frames(result, rank, "sign", **settings)
    bus = axil_bus(top)
    start = 4000                        # cycles of 250 MHz: the registers are written by then
    srcs = [FrameSource(flat_stream(top, "s_axis_qdma_h2c", 0), h2c, idle=0.2, seed=1,
                        times=[start] + [0] * (len(h2c) - 1)),
            FrameSource(flat_stream(top, "s_axis_adap_rx_250mhz", 0), result.links[0],
                        idle=0.2, seed=2, times=[start] + [0] * (len(result.links[0]) - 1))]
    sinks = {"tx": FrameSink(flat_stream(top, "m_axis_adap_tx_250mhz", 0), backpressure=0.2,
                             seed=3, n_frames=len(expected_tx), timeout=100_000),
             "c2h": FrameSink(flat_stream(top, "m_axis_qdma_c2h", 0), backpressure=0.2,
                              seed=4, n_frames=len(expected_c2h), timeout=100_000)}
    config = node_config(nodes, rank, "sign", elements, param=0, seed=3, stochastic=False,
                         **settings)
    template = int.from_bytes(expected_tx[0][:64], "little")
    table = integer_values(np.arange(nodes + 1), "sign", nodes, **settings).view(np.uint32)
    got = {}

    async def bench(ctx):
        await reset(ctx, top)

        async def write(name, value):
            assert await axil_write(ctx, bus, _reg(rm, name), int(value),
                                    domain="axil") == OKAY

        for name, value in config.items():
            if name != "enable":
                await write(f"reduce_{name}", value)
        for k in range(REDUCE_TEMPLATE_WORDS):
            await write(f"reduce_template{k}", template >> (32 * k) & 0xFFFFFFFF)
        for k, v in enumerate(table):
            await write("reduce_table_addr", k)
            await write("reduce_table_data", v)
            await write("reduce_table_write", 1)
        await write("reduce_enable", 1)
        while len(sinks["tx"].frames) < len(expected_tx) or \
                len(sinks["c2h"].frames) < len(expected_c2h):
            await ctx.tick("axil")
        for _ in range(20):
            await ctx.tick("axil")
        got["counters"] = {name: (await axil_read(ctx, bus, _reg(rm, name),
                                                  domain="axil"))[0]
                           for name in ("count_reduce_taken", "count_contribution_taken",
                                        "count_reduce_overflows")}

    sim = Simulator(top)
    add_clocks(sim, top)
    for s in srcs + list(sinks.values()):
        sim.add_testbench(s.run, background=True)
    sim.add_testbench(bench)
    sim.run()

    assert by_chunk_and_phase([f.data for f in sinks["tx"].frames]) == \
        by_chunk_and_phase(expected_tx)
    assert by_chunk_and_phase([f.data for f in sinks["c2h"].frames]) == \
        by_chunk_and_phase(expected_c2h)
    assert got["counters"] == {"count_reduce_taken": len(result.links[0]),
                               "count_contribution_taken": len(h2c),
                               "count_reduce_overflows": 0}
