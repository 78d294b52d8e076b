# amaranth: UnusedElaboratable=no
"""BlockRamFifo: the queue of a SyncFIFOBuffered (same order, levels and ready/valid under
random writes and reads), with its storage in block RAM and its read data registered."""

import random
from collections import deque

import pytest
from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from squeezenic_hw.flows import synth
from squeezenic_hw.gateware.common.stream import BlockRamFifo, fifo_between

from support.unused import rejected


@pytest.mark.parametrize("width,depth", [(8, 3), (33, 5), (625, 64)])
def test_queue_under_random_writes_and_reads(width, depth):
    dut = BlockRamFifo(width=width, depth=depth)
    rng = random.Random(width + depth)
    model = deque()
    counts = {"read": 0, "full": 0}

    async def bench(ctx):
        for _ in range(1500):
            w_en = rng.random() < 0.55
            r_en = rng.random() < 0.5
            data = rng.getrandbits(width)
            ctx.set(dut.w_en, w_en)
            ctx.set(dut.w_data, data)
            ctx.set(dut.r_en, r_en)
            await ctx.delay(1e-9)
            w_rdy, r_rdy = ctx.get(dut.w_rdy), ctx.get(dut.r_rdy)
            assert ctx.get(dut.level) == len(model)
            assert not w_rdy or len(model) < depth
            counts["full"] += not w_rdy
            if r_rdy:
                assert model, "valid with nothing written"
                assert ctx.get(dut.r_data) == model[0]
                if r_en:
                    model.popleft()
                    counts["read"] += 1
            # a written entry is readable from the cycle after the next at the latest
            if w_en and w_rdy:
                model.append(data)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    assert counts["read"] > 300 and counts["full"] > 0


def test_one_entry_per_cycle_once_filled():
    """Written and read every cycle: each entry is out three cycles after it went in
    (the RAM, its read port, the output register) and one leaves every cycle."""
    dut = BlockRamFifo(width=16, depth=8)
    outs = []

    async def bench(ctx):
        ctx.set(dut.r_en, 1)
        ctx.set(dut.w_en, 1)
        for t in range(40):
            ctx.set(dut.w_data, t)
            await ctx.delay(1e-9)
            assert ctx.get(dut.w_rdy)
            if ctx.get(dut.r_rdy):
                outs.append((t, ctx.get(dut.r_data)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    assert outs == [(t, t - 3) for t in range(3, 40)]


@pytest.mark.parametrize("depth", [2, 0, True, 4.0])
def test_rejects_a_depth_under_three(depth):
    rejected(BlockRamFifo, width=8, depth=depth, match="depth")


class _Queue(wiring.Component):
    def __init__(self):
        super().__init__({"i": In(stream.Signature(625)), "o": Out(stream.Signature(625))})

    def elaborate(self, platform):
        m = Module()
        fifo_between(m, "q", self.i, self.o, 64, block_ram=True)
        return m


def test_storage_is_block_ram(tmp_path):
    result = synth.synthesize(_Queue(), name="q", workdir=tmp_path, timing=True)
    # 64 × 625 bits: RAMB36s, where SyncFIFOBuffered's storage is 89 RAM64M8
    assert result.bram > 0 and result.lutram == 0
    # the read data goes straight into the output register, no logic before it
    assert result.timing.bram_reads_into_logic == ()
    assert result.timing.ram_output_ffs == 625
