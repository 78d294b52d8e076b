# amaranth: UnusedElaboratable=no
"""SkidBuffer: every beat once and in order under random idle and backpressure, one beat per
cycle when nothing stalls, and a ``ready`` that no input of the cycle can change."""

import random

import pytest
from amaranth import unsigned
from amaranth.lib import data
from amaranth.sim import Simulator

from squeezenic_hw.gateware.common.stream import SkidBuffer
from squeezenic_hw.sim.streams import run_stream

from support.buffer_checks import check_struct_payload_at_full_rate, ready_per_cycle
from support.shared_duts import shared
from support.unused import rejected


@pytest.mark.parametrize("width", [1, 8, 600])
@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.0), (0.0, 0.5),
                                               (0.4, 0.4), (0.1, 0.8)])
def test_every_beat_in_order(width, idle, backpressure):
    rng = random.Random(width)
    beats = [rng.getrandbits(width) for _ in range(300)]
    dut = shared(SkidBuffer, data.StructLayout({"x": unsigned(width)}))
    run = run_stream(dut, beats, idle=idle, backpressure=backpressure, seed=width)
    assert run.outputs == beats


def test_struct_payload_and_full_rate():
    check_struct_payload_at_full_rate(SkidBuffer)


def test_ready_is_a_register():
    # o stalls from the start: one beat in the output register, one in the skid, then full
    assert ready_per_cycle(SkidBuffer(unsigned(8)), 6, 3) == [1, 1, 0, 0, 1, 1]


def test_bad_shape_is_rejected():
    rejected(SkidBuffer, "wide", match="shape")


def test_ready_next_is_the_next_cycles_ready():
    """``ready_next`` now is ``i.ready`` a cycle later, under random valid and ready."""
    dut = SkidBuffer(unsigned(8))
    rng = random.Random(3)
    seen = set()

    async def bench(ctx):
        for _ in range(400):
            ctx.set(dut.i.valid, rng.random() < 0.6)
            ctx.set(dut.o.ready, rng.random() < 0.5)
            predicted = ctx.get(dut.ready_next)
            await ctx.tick()
            assert ctx.get(dut.i.ready) == predicted
            seen.add(predicted)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == {0, 1}
