# amaranth: UnusedElaboratable=no
"""FrameBusArbiter: N bare narrow lanes on one frame bus, then the HeaderFinisher; each
lane's frames as the reference TX lane makes them, whole and in order, under random idle
cycles and backpressure; never two lanes shown at once; frames back to back."""

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.arrays.frame_bus import FrameBusArbiter
from squeezenic_hw.gateware.arrays.header_finisher import HeaderFinisher
from squeezenic_hw.gateware.arrays.ring_cluster import RingCluster
from squeezenic_hw.gateware.common.layouts import axis_signature
from squeezenic_hw.gateware.tx.narrow import NarrowTxLane
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.sim.axis import AxisFrame, FrameSink, FrameSource
from squeezenic_hw.sim.streams import simulation_of

from support.lane_scenarios import host_stream
from support.param_sweep import rotated
from support.shared_duts import shared
from support.unused import rejected


class _Bus(wiring.Component):
    """``n`` bare lanes of ``codec`` on a frame bus, completed by a HeaderFinisher; with
    ``cluster``, the lanes share rings in clusters of that many."""

    def __init__(self, n, codec, cluster=None):
        self.lanes = [NarrowTxLane(codec, bare=True, shared_ring=cluster is not None)
                      for _ in range(n)]
        self.cluster = cluster
        self.rings = [] if cluster is None else [
            RingCluster(len(self.lanes[c:c + cluster]), self.lanes[0].ring_rows)
            for c in range(0, n, cluster)]
        self.arbiter = FrameBusArbiter(n, shared_rows=len(self.rings))
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
        for c, ring in enumerate(self.rings):
            m.submodules[f"ring{c}"] = ring
            for j, lane in enumerate(self.lanes[c * self.cluster:(c + 1) * self.cluster]):
                wiring.connect(m, lane.ring, ring.lanes[j])
            m.d.comb += [self.arbiter.rows[c].eq(ring.o), ring.en.eq(self.arbiter.en)]
        wiring.connect(m, self.arbiter.o, self.finisher.i)
        wiring.connect(m, self.finisher.o, wiring.flipped(self.o))
        return m


def _traffic(rng, codec, n, frames_per_lane, flush_rate):
    name, _, q = codec.partition(":")
    kw = dict(param=int(q), stochastic=False, scale=2.0) if q else {}
    return [[AxisFrame(f, src=k) for f in host_stream(
                rng, name, n_total=int(rng.integers(200, 60 * frames_per_lane)),
                max_k=60, flush_rate=flush_rate, **kw)] for k in range(n)]


def _run(n, codec, traffic, *, idle, backpressure, hold=0, cluster=None):
    """Run the bus; returns the sink and the largest number of lanes shown at once."""
    dut = shared(_Bus, n, codec, cluster)
    sources = [FrameSource(dut.i[k], traffic[k], idle=idle, seed=k) for k in range(n)]
    expected = [lr.tx([f.data for f in frames], codecs=[codec.partition(":")[0]])[0]
                for frames in traffic]
    total = sum(len(e) for e in expected)
    sink = FrameSink(dut.o, n_frames=total, backpressure=backpressure, seed=7,
                     timeout=400_000)
    shown = []

    async def closer(ctx):
        edges = aiter(ctx.tick())       # one trigger for the edges it waits
        while any(s.done_cycle is None for s in sources):
            await anext(edges)
        await edges.aclose()
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

    simulation_of(dut).run([*((s.run, True) for s in sources), (closer, True), (watch, True),
                            (bench, False)])
    return sink, expected, max(shown)


@pytest.mark.parametrize("n,codec,idle,backpressure", rotated(
    [(1, "sign"), (2, "fixed:8"), (3, "sign"), (5, "fixed:2")], [(0.0, 0.0), (0.3, 0.5)]))
def test_frame_bus_lanes_match_reference(n, codec, idle, backpressure):
    rng = np.random.default_rng([n, int(idle * 10), len(codec)])
    traffic = _traffic(rng, codec, n, 8, flush_rate=0.3)
    sink, expected, most = _run(n, codec, traffic, idle=idle, backpressure=backpressure)
    assert most == 1
    for k in range(n):
        got = [f.data for f in sink.frames if f.src == k]
        assert got == expected[k], k


@pytest.mark.parametrize("n,codec,cluster,idle,backpressure", rotated(
    [(5, "sign", 4), (4, "fixed:2", 3), (3, "fixed:8", 2), (5, "fixed:4", 4)],
    [(0.0, 0.0), (0.3, 0.5)]))
def test_clustered_lanes_match_reference(n, codec, cluster, idle, backpressure):
    """Lanes sharing rings (clusters of the most a half row allows, ``fixed:8`` at 2 and
    ``fixed:4`` at 4, and fewer; a last cluster short): every lane's frames are the
    reference's, whole and in order, with flushes and splits closing frames while other
    lanes' rows wait for their turns."""
    rng = np.random.default_rng([n, cluster, int(idle * 10), len(codec)])
    traffic = _traffic(rng, codec, n, 8, flush_rate=0.3)
    sink, expected, most = _run(n, codec, traffic, idle=idle, backpressure=backpressure,
                                cluster=cluster)
    assert most == 1
    for k in range(n):
        assert [f.data for f in sink.frames if f.src == k] == expected[k], k


@pytest.mark.parametrize("cluster", [None, 4])
def test_frame_bus_frames_back_to_back(cluster):
    """Lanes with frames waiting: the bus passes from frame to frame, lane to lane, with
    no idle cycle (the next owner is chosen at the last beat but one), from lanes' own
    rings and from a shared one."""
    rng = np.random.default_rng(1)
    traffic = _traffic(rng, "sign", 4, 12, flush_rate=1.0)
    sink, expected, most = _run(4, "sign", traffic, idle=0.0, backpressure=0.0, hold=3000,
                                cluster=cluster)
    assert most == 1
    for k in range(4):
        assert [f.data for f in sink.frames if f.src == k] == expected[k]
    # while every lane still had frames waiting, one beat a cycle
    first = sink.frames[:40]
    span = first[-1].last_cycle - first[0].first_cycle + 1
    beats = sum(-(-len(f.data) // 64) for f in first)
    assert span == beats
    assert len({f.src for f in first[:4]}) == 4          # round robin


@pytest.mark.parametrize("codec,cluster", [("fixed:8", 2), ("fixed:4", 4)])
def test_clustered_lanes_at_full_rate(codec, cluster):
    """Frames of one tensor at one beat a cycle into clusters of the most a half row
    allows: every lane's rows are written before its words come back to them (a cluster
    one larger fails here), and the frames are the reference's."""
    name, _, q = codec.partition(":")
    rng = np.random.default_rng(3)
    traffic = [[AxisFrame(f, src=k) for f in host_stream(
        rng, name, n_total=363 * 24, lengths=[363], param=int(q), stochastic=False,
        scale=2.0)] for k in range(cluster)]
    sink, expected, most = _run(cluster, codec, traffic, idle=0.0, backpressure=0.0,
                                cluster=cluster)
    assert most == 1
    for k in range(cluster):
        assert [f.data for f in sink.frames if f.src == k] == expected[k], k


def test_shared_ring_frame_waits_for_its_last_row():
    """One busy lane in a cluster of 16 (the most a sign lane allows), one-row frames
    (a flush in every host frame) on an otherwise idle bus: a frame is shown at once,
    often before the lane's next turn, so its header waits until its last row is
    written (without the wait the lane sends rows of older frames)."""
    rng = np.random.default_rng(5)
    traffic = _traffic(rng, "sign", 16, 60, flush_rate=1.0)
    traffic = [traffic[0]] + [[] for _ in range(15)]
    sink, expected, _ = _run(16, "sign", traffic, idle=0.0, backpressure=0.0, cluster=16)
    assert len(expected[0]) > 50
    assert [f.data for f in sink.frames] == expected[0]


def test_shared_ring_writes_rows_in_order():
    """Frames a word or two longer than whole rows, one lane in a cluster of 16: a row's
    second half often still waits for its turn when the close fills the next row's
    first half; the older half is written first, each to its own row."""
    rng = np.random.default_rng(6)
    frames = host_stream(rng, "sign", n_total=528 * 40, lengths=[528, 520, 536, 1040],
                         flush_rate=1.0)
    traffic = [[AxisFrame(f, src=0) for f in frames]] + [[] for _ in range(15)]
    sink, expected, _ = _run(16, "sign", traffic, idle=0.0, backpressure=0.0, cluster=16)
    assert len(expected[0]) == len(frames)
    assert [f.data for f in sink.frames] == expected[0]


@pytest.mark.parametrize("bad", [-1, 5, True, "1"])
def test_frame_bus_shared_rows_checked(bad):
    rejected(FrameBusArbiter, 4, shared_rows=bad, match="shared_rows")


@pytest.mark.parametrize("bad", [0, 65, True, "4"])
def test_frame_bus_inputs_checked(bad):
    rejected(FrameBusArbiter, bad, match="n_inputs")
