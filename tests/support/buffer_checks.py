"""Checks every stream buffer of ``common/stream.py`` passes: a struct payload through at
full rate, and an ``i.ready`` that no input of the cycle can move."""

from amaranth import unsigned
from amaranth.lib import data
from amaranth.sim import Simulator

from squeezenic_hw.sim.streams import run_stream

from support.shared_duts import shared

__all__ = ["check_struct_payload_at_full_rate", "ready_per_cycle"]

LAYOUT = data.StructLayout({"value": unsigned(13), "last": unsigned(1)})


def check_struct_payload_at_full_rate(buffer_class, latency=1):
    """200 beats of a struct payload through ``buffer_class(LAYOUT)``: every value in
    order, a latency of ``latency`` and no bubble."""
    beats = [{"value": k * 37 % 8192, "last": k % 3 == 0} for k in range(200)]
    run = run_stream(shared(buffer_class, LAYOUT), beats)
    assert [data.Const(LAYOUT, v).value for v in run.outputs] == [b["value"] for b in beats]
    assert run.latency == latency
    assert run.max_ready_streak == len(beats)       # no bubble: one beat per cycle


def ready_per_cycle(dut, cycles, release):
    """``i.ready`` of each of ``cycles`` cycles while a beat is offered every cycle and
    ``o`` stalls until cycle ``release``; asserts that flipping ``o.ready`` and
    ``i.valid`` within a cycle never moves it."""
    seen = []

    async def bench(ctx):
        for k in range(cycles):
            ready = []
            for o_ready, i_valid in [(0, 0), (1, 0), (0, 1), (1, 1)]:
                ctx.set(dut.o.ready, o_ready)
                ctx.set(dut.i.valid, i_valid)
                ready.append(ctx.get(dut.i.ready))
            assert len(set(ready)) == 1, f"i.ready follows o.ready or i.valid in cycle {k}"
            seen.append(ready[0])
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, k)
            ctx.set(dut.o.ready, k >= release)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    return seen
