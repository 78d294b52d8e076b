"""A design's Amaranth simulation set up once and run many times (``sim.streams``): each run
starts from reset, runs its testbenches in the order given, and gives what a fresh
simulation gives."""

import random

from amaranth.hdl import Module
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

import squeezenic_hw.sim.streams as streams
from squeezenic_hw.gateware.common.stream import SkidBuffer
from squeezenic_hw.sim.streams import (
    ReusableSimulation,
    reuse_simulation,
    run_stream,
    simulation_of,
)


class _Scratch(wiring.Component):
    """A register (init 5) and a memory (init 1, 2, 3, 4) that the testbenches write."""

    def __init__(self):
        super().__init__({"we": In(1), "addr": In(2), "wdata": In(8), "rdata": Out(8),
                          "reg": Out(8, init=5), "reg_next": In(8), "reg_we": In(1),
                          "drive": In(8)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=8, depth=4, init=[1, 2, 3, 4])
        wr, rd = mem.write_port(), mem.read_port(domain="comb")
        m.d.comb += [wr.en.eq(self.we), wr.addr.eq(self.addr), wr.data.eq(self.wdata),
                     rd.addr.eq(self.addr), self.rdata.eq(rd.data)]
        with m.If(self.reg_we):
            m.d.sync += self.reg.eq(self.reg_next)
        return m


def test_every_run_starts_from_reset():
    dut = _Scratch()
    sim = ReusableSimulation(dut)
    seen = []

    async def scribble(ctx):
        seen.append(("reg", ctx.get(dut.reg)))
        mem = []
        for a in range(4):
            ctx.set(dut.addr, a)
            mem.append(ctx.get(dut.rdata))
        seen.append(("mem", mem))
        ctx.set(dut.reg_next, 99)
        ctx.set(dut.reg_we, 1)
        ctx.set(dut.we, 1)
        for a in range(4):
            ctx.set(dut.addr, a)
            ctx.set(dut.wdata, 40 + a)
            await ctx.tick()
        ctx.set(dut.we, 0)
        seen.append(("time", ctx.get(dut.reg)))

    for _ in range(3):
        sim.run([(scribble, False)])
    assert seen == [("reg", 5), ("mem", [1, 2, 3, 4]), ("time", 99)] * 3


def test_testbenches_run_in_the_order_given():
    """Two testbenches set the same input at time zero: the later one's value stands, in
    whichever order of background and foreground they come."""
    dut = _Scratch()
    sim = ReusableSimulation(dut)
    got = []

    def setter(value, *, read=False):
        async def bench(ctx):
            ctx.set(dut.drive, value)
            if read:
                await ctx.tick()
                got.append(ctx.get(dut.drive))
        return bench

    for order in ([(setter(1), True), (setter(2), True), (setter(3, read=True), False)],
                  [(setter(3, read=True), False), (setter(1), True)],
                  [(setter(7), False), (setter(8), False), (setter(9), True),
                   (setter(0, read=True), False), (setter(4), True)]):
        sim.run(order)
    assert got == [3, 1, 4]


def test_many_testbenches_in_one_run():
    dut = _Scratch()
    sim = ReusableSimulation(dut)
    ticks = []

    def counter(k):
        async def bench(ctx):
            for _ in range(k):
                await ctx.tick()
            ticks.append(k)
        return bench

    sim.run([(counter(k), k % 3 == 0) for k in range(1, 41)])
    foreground = [k for k in range(1, 41) if k % 3]
    assert all(k in ticks for k in foreground)
    sim.run([(counter(2), False)])          # the slots added for the large run stay idle
    assert ticks[-1] == 2


def test_run_stream_keeps_the_simulation_of_a_reused_design(monkeypatch):
    made = []
    real = streams.ReusableSimulation

    class Counting(real):
        def __init__(self, dut):
            made.append(dut)
            super().__init__(dut)

    monkeypatch.setattr(streams, "ReusableSimulation", Counting)
    layout = data.StructLayout({"x": 12})
    kept, once = SkidBuffer(layout), SkidBuffer(layout)
    assert reuse_simulation(kept) is kept
    assert simulation_of(kept) is simulation_of(kept)
    made.clear()
    rng = random.Random(5)
    for k in range(4):
        beats = [rng.getrandbits(12) for _ in range(50)]
        for dut in (kept, once):
            run = run_stream(dut, beats, idle=0.3, backpressure=0.3, seed=k)
            assert run.outputs == beats
    assert made.count(kept) == 0 and made.count(once) == 4
    fresh = run_stream(SkidBuffer(layout), beats, idle=0.3, backpressure=0.3, seed=3)
    again = run_stream(kept, beats, idle=0.3, backpressure=0.3, seed=3)
    assert (again.cycles, again.latency, again.max_ready_streak) == (
        fresh.cycles, fresh.latency, fresh.max_ready_streak)

