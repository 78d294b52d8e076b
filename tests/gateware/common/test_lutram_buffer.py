# amaranth: UnusedElaboratable=no
"""LutramBuffer: every beat once and in order under random idle and backpressure, one beat
per cycle when nothing stalls, a ``ready`` that no input of the cycle can change, and the
payload kept in distributed RAM."""

import random

import pytest
from amaranth import unsigned
from amaranth.lib import data
from amaranth.sim import Simulator

from squeezenic_hw.flows import synth
from squeezenic_hw.gateware.common.stream import LutramBuffer
from squeezenic_hw.sim.streams import run_stream

LAYOUT = data.StructLayout({"value": unsigned(13), "last": unsigned(1)})


@pytest.mark.parametrize("width,depth", [(1, 2), (8, 4), (600, 4), (33, 32)])
@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.0), (0.0, 0.5),
                                               (0.4, 0.4), (0.1, 0.8)])
def test_every_beat_in_order(width, depth, idle, backpressure):
    rng = random.Random(width)
    beats = [rng.getrandbits(width) for _ in range(300)]
    run = run_stream(LutramBuffer(data.StructLayout({"x": unsigned(width)}), depth), beats,
                     idle=idle, backpressure=backpressure, seed=width + depth)
    assert run.outputs == beats


def test_struct_payload_and_full_rate():
    beats = [{"value": k * 37 % 8192, "last": k % 3 == 0} for k in range(200)]
    run = run_stream(LutramBuffer(LAYOUT), beats)
    assert [data.Const(LAYOUT, v).value for v in run.outputs] == [b["value"] for b in beats]
    assert run.latency == 1
    assert run.max_ready_streak == len(beats)       # no bubble: one beat per cycle


@pytest.mark.parametrize("depth", [2, 4])
def test_ready_depends_on_the_level_only(depth):
    dut = LutramBuffer(unsigned(8), depth)
    seen = []

    async def bench(ctx):
        for k in range(depth + 4):
            # flipping o.ready and i.valid within a cycle never moves i.ready
            ready = []
            for o_ready, i_valid in [(0, 0), (1, 0), (0, 1), (1, 1)]:
                ctx.set(dut.o.ready, o_ready)
                ctx.set(dut.i.valid, i_valid)
                ready.append(ctx.get(dut.i.ready))
            seen.append(ready)
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, k)
            ctx.set(dut.o.ready, k >= depth + 1)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    assert all(len(set(r)) == 1 for r in seen)
    # o stalls from the start: depth beats go in, then i.ready falls until o moves
    assert [r[0] for r in seen][:depth + 2] == [1] * depth + [0, 0]


def test_payload_in_lutram(tmp_path):
    result = synth.synthesize(LutramBuffer(unsigned(600)), name="buf", workdir=tmp_path)
    assert result.lutram == -(-600 // 14) and result.lut < 40 and result.ff < 620


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="shape"):
        LutramBuffer("wide")
    for bad in (1, 33, True):
        with pytest.raises(ValueError, match="depth"):
            LutramBuffer(unsigned(8), bad)
