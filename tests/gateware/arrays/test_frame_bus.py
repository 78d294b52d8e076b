# amaranth: UnusedElaboratable=no
"""FrameBusArbiter: N bare narrow lanes on one frame bus, then the HeaderFinisher; each
lane's frames as the reference TX lane makes them, whole and in order, under random idle
cycles and backpressure; never two lanes shown at once; frames back to back."""

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator
from lane_scenarios import host_stream

from squeezenic_hw.gateware.arrays.frame_bus import FrameBusArbiter
from squeezenic_hw.gateware.arrays.header_finisher import HeaderFinisher
from squeezenic_hw.gateware.common.layouts import axis_signature
from squeezenic_hw.gateware.tx.narrow_lane import NarrowTxLane
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.sim.axis import AxisFrame, FrameSink, FrameSource


class _Bus(wiring.Component):
    """``n`` bare lanes of ``codec`` on a frame bus, completed by a HeaderFinisher."""

    def __init__(self, n, codec):
        self.lanes = [NarrowTxLane(codec, bare=True) for _ in range(n)]
        self.arbiter = FrameBusArbiter(n)
        self.finisher = HeaderFinisher(self.lanes[0].code_bits)
        super().__init__({"i": In(axis_signature()).array(n), "close": In(1),
                          "o": Out(axis_signature())})

    def elaborate(self, platform):
        m = Module()
        m.submodules.arbiter, m.submodules.finisher = self.arbiter, self.finisher
        for k, lane in enumerate(self.lanes):
            m.submodules[f"lane{k}"] = lane
            wiring.connect(m, wiring.flipped(self.i[k]), lane.i)
            wiring.connect(m, lane.bus, self.arbiter.lanes[k])
            m.d.comb += lane.close.eq(self.close)
        wiring.connect(m, self.arbiter.o, self.finisher.i)
        wiring.connect(m, self.finisher.o, wiring.flipped(self.o))
        return m


def _traffic(rng, codec, n, frames_per_lane, flush_rate):
    name, _, q = codec.partition(":")
    kw = dict(param=int(q), stochastic=False, scale=2.0) if q else {}
    return [[AxisFrame(f, src=k) for f in host_stream(
                rng, name, n_total=int(rng.integers(200, 60 * frames_per_lane)),
                max_k=60, flush_rate=flush_rate, **kw)] for k in range(n)]


def _run(n, codec, traffic, *, idle, backpressure, hold=0):
    """Run the bus; returns the sink and the largest number of lanes shown at once."""
    dut = _Bus(n, codec)
    sources = [FrameSource(dut.i[k], traffic[k], idle=idle, seed=k) for k in range(n)]
    expected = [lr.tx([f.data for f in frames], codecs=[codec.partition(":")[0]])[0]
                for frames in traffic]
    total = sum(len(e) for e in expected)
    sink = FrameSink(dut.o, n_frames=total, backpressure=backpressure, seed=7,
                     timeout=400_000)
    shown = []

    async def closer(ctx):
        while any(s.done_cycle is None for s in sources):
            await ctx.tick()
        for _ in range(16):
            await ctx.tick()
        ctx.set(dut.close, 1)

    async def watch(ctx):
        async for _, _, *shows in ctx.tick().sample(*[lane.bus.show for lane in dut.lanes]):
            shown.append(sum(shows))

    async def bench(ctx):
        for _ in range(hold):          # the output held: lanes fill up
            await ctx.tick()
        await sink.run(ctx)

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    for s in sources:
        sim.add_testbench(s.run, background=True)
    sim.add_testbench(closer, background=True)
    sim.add_process(watch)
    sim.add_testbench(bench)
    sim.run()
    return sink, expected, max(shown)


@pytest.mark.parametrize("n,codec", [(1, "sign"), (2, "fixed:8"), (3, "sign"), (5, "fixed:2")])
@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.5)])
def test_frame_bus_lanes_match_reference(n, codec, idle, backpressure):
    rng = np.random.default_rng([n, int(idle * 10), len(codec)])
    traffic = _traffic(rng, codec, n, 8, flush_rate=0.3)
    sink, expected, most = _run(n, codec, traffic, idle=idle, backpressure=backpressure)
    assert most == 1
    for k in range(n):
        got = [f.data for f in sink.frames if f.src == k]
        assert got == expected[k], k


def test_frame_bus_frames_back_to_back():
    """Lanes with frames waiting: the bus passes from frame to frame, lane to lane, with
    no idle cycle (the next owner is chosen at the last beat but one)."""
    rng = np.random.default_rng(1)
    traffic = _traffic(rng, "sign", 4, 12, flush_rate=1.0)
    sink, expected, most = _run(4, "sign", traffic, idle=0.0, backpressure=0.0, hold=3000)
    assert most == 1
    for k in range(4):
        assert [f.data for f in sink.frames if f.src == k] == expected[k]
    # while every lane still had frames waiting, one beat a cycle
    first = sink.frames[:40]
    span = first[-1].last_cycle - first[0].first_cycle + 1
    beats = sum(-(-len(f.data) // 64) for f in first)
    assert span == beats
    assert len({f.src for f in first[:4]}) == 4          # round robin


@pytest.mark.parametrize("bad", [0, 65, True, "4"])
def test_frame_bus_inputs_checked(bad):
    with pytest.raises(ValueError, match="n_inputs"):
        FrameBusArbiter(bad)
