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

LAYOUT = data.StructLayout({"value": unsigned(13), "last": unsigned(1)})


@pytest.mark.parametrize("width", [1, 8, 600])
@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.0), (0.0, 0.5),
                                               (0.4, 0.4), (0.1, 0.8)])
def test_every_beat_in_order(width, idle, backpressure):
    rng = random.Random(width)
    beats = [rng.getrandbits(width) for _ in range(300)]
    run = run_stream(SkidBuffer(data.StructLayout({"x": unsigned(width)})), beats, idle=idle,
                     backpressure=backpressure, seed=width)
    assert run.outputs == beats


def test_struct_payload_and_full_rate():
    beats = [{"value": k * 37 % 8192, "last": k % 3 == 0} for k in range(200)]
    run = run_stream(SkidBuffer(LAYOUT), beats)
    assert [data.Const(LAYOUT, v).value for v in run.outputs] == [b["value"] for b in beats]
    assert run.latency == 1
    assert run.max_ready_streak == len(beats)       # no bubble: one beat per cycle


def test_ready_is_a_register():
    dut = SkidBuffer(unsigned(8))
    seen = []

    async def bench(ctx):
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.i.payload, 1)
        for k in range(6):
            # flipping o.ready and i.valid within a cycle never moves i.ready
            ready = []
            for o_ready, i_valid in [(0, 0), (1, 0), (0, 1), (1, 1)]:
                ctx.set(dut.o.ready, o_ready)
                ctx.set(dut.i.valid, i_valid)
                ready.append(ctx.get(dut.i.ready))
            seen.append(ready)
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.o.ready, k >= 3)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    assert all(len(set(r)) == 1 for r in seen)
    # o stalls from the start: one beat in the output register, one in the skid, then full
    assert [r[0] for r in seen] == [1, 1, 0, 0, 1, 1]


def test_bad_shape_is_rejected():
    with pytest.raises(ValueError, match="shape"):
        SkidBuffer("wide")
