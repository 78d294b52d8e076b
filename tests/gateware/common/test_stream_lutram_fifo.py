# amaranth: UnusedElaboratable=no
"""LutramFifo and LutramQueue: Amaranth's SyncFIFOBuffered and SyncFIFO cycle for cycle
(every output, every cycle, under random writes and reads), LutramFifo with the
``max_fanout`` attribute on its output register's enable in the Verilog; ``fifo_with_room``:
a registered ready that never overfills."""

import random

import pytest
from amaranth import Module, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from squeezenic_hw.collector import to_verilog
from squeezenic_hw.gateware.common.stream import (
    MAX_FANOUT,
    ROOM_SLACK,
    LutramFifo,
    LutramQueue,
    fifo_with_room,
)

from support.unused import rejected


class _Both(wiring.Component):
    """One of ours and Amaranth's FIFO it stands for, fed the same writes and reads."""

    def __init__(self, width, depth, ours=LutramFifo, theirs=fifo.SyncFIFOBuffered):
        self.ours = ours(width=width, depth=depth)
        self.theirs = theirs(width=width, depth=depth)
        super().__init__({"w_data": In(width), "w_en": In(1), "r_en": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.ours, m.submodules.theirs = self.ours, self.theirs
        for q in (self.ours, self.theirs):
            m.d.comb += [q.w_data.eq(self.w_data), q.w_en.eq(self.w_en),
                         q.r_en.eq(self.r_en)]
        return m


@pytest.mark.parametrize("kind", ["buffered", "queue"])
@pytest.mark.parametrize("width,depth", [(1, 2), (8, 3), (33, 5), (100, 16)])
def test_cycle_for_cycle_as_amaranths_fifos(kind, width, depth):
    """LutramFifo is SyncFIFOBuffered and LutramQueue is SyncFIFO, every output, every
    cycle."""
    dut = (_Both(width, depth) if kind == "buffered"
           else _Both(width, depth, LutramQueue, fifo.SyncFIFO))
    rng = random.Random(width * 100 + depth)
    seen = {"reads": 0, "full": 0}

    async def bench(ctx):
        for _ in range(1200):
            ctx.set(dut.w_en, rng.random() < 0.6)
            ctx.set(dut.r_en, rng.random() < 0.5)
            ctx.set(dut.w_data, rng.getrandbits(width))
            await ctx.delay(1e-9)
            for name in ("w_rdy", "r_rdy", "level", "w_level", "r_level"):
                assert ctx.get(getattr(dut.ours, name)) == ctx.get(getattr(dut.theirs, name)), name
            if ctx.get(dut.theirs.r_rdy):
                assert ctx.get(dut.ours.r_data) == ctx.get(dut.theirs.r_data)
                seen["reads"] += ctx.get(dut.r_en)
            seen["full"] += not ctx.get(dut.theirs.w_rdy)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    assert seen["reads"] > 200 and seen["full"] > 0


def test_output_enable_carries_max_fanout():
    q = LutramFifo(width=64, depth=4)
    text = to_verilog(q, name="q", ports=[q.w_data, q.w_en, q.r_en, q.r_data, q.r_rdy,
                                         q.w_rdy])
    assert f"(* max_fanout = 32'd{MAX_FANOUT} *)" in text
    rejected(LutramFifo, width=8, depth=1, match="depth")


class _Room(wiring.Component):
    i: In(stream.Signature(8))
    o: Out(stream.Signature(8))

    def __init__(self, depth):
        self.depth = depth
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        self.q = fifo_with_room(m, "q", self.i, self.o, self.depth)
        return m


def test_fifo_with_room_ready_is_a_register_and_fills_to_its_depth():
    """``i.ready`` follows the level a cycle late, yet a writer that writes whenever it
    sees ready never overfills the FIFO, and with the reader stopped exactly ``depth``
    entries go in."""
    dut = _Room(5)
    rng = random.Random(3)
    written, read = [], []

    async def bench(ctx):
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.o.ready, 0)
        for _ in range(12):                          # the reader stopped
            ctx.set(dut.i.payload, len(written))
            _, _, ready = await ctx.tick().sample(dut.i.ready)
            if ready:
                written.append(len(written))
        assert 5 <= len(written) <= 5 + ROOM_SLACK - 1
        previous_level = None
        for _ in range(600):                         # random writes and reads
            valid = rng.random() < 0.7
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.i.payload, len(written) % 256)
            ctx.set(dut.o.ready, rng.random() < 0.6)
            await ctx.delay(1e-9)
            level = ctx.get(dut.q.level)
            if previous_level is not None:
                # ready now says whether the level a cycle ago left two entries free
                assert ctx.get(dut.i.ready) == (previous_level <= 5 - 1)
            assert level <= 5 + ROOM_SLACK
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                read.append(ctx.get(dut.o.payload))
            if valid and ctx.get(dut.i.ready):
                written.append(len(written) % 256)
            previous_level = level
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    assert read == written[:len(read)] and len(read) > 200
    assert isinstance(dut.q, LutramFifo) and isinstance(dut.i.ready, Signal)
