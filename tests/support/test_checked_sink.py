"""The checking sink of the stream tests (``support.checked_sink``): it takes what a stream
that keeps the rule gives, and fails on one that changes a beat not taken."""

import random

import pytest
from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import Out

from squeezenic_hw.sim.streams import simulation_of

from support.checked_sink import CheckedSink
from support.unused import rejected


class _Counter(wiring.Component):
    """Offers 0, 1, 2, …, each until it is taken."""

    o: Out(stream.Signature(8))
    moves_on = False

    def elaborate(self, platform):
        m = Module()
        count = Signal(8)
        m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(count)]
        with m.If(self.o.ready | self.moves_on):
            m.d.sync += count.eq(count + 1)
        return m


class _BadCounter(_Counter):
    """Breaks the rule: the count moves on whether or not the beat was taken."""

    moves_on = True


def _taken(dut, backpressure, cycles=200):
    taken = []

    async def bench(ctx):
        out = CheckedSink(ctx, dut.o, backpressure=backpressure, rng=random.Random(1))
        for _ in range(cycles):
            beat, _ = await out.cycle()
            if beat is not None:
                taken.append(beat)
        await out.close()

    simulation_of(dut).run([(bench, False)])
    return taken


def test_takes_every_beat_of_a_stream_that_holds():
    taken = _taken(_Counter(), backpressure=0.5)
    assert 0 < len(taken) < 200
    assert taken == [k % 256 for k in range(len(taken))]


def test_fails_on_a_beat_that_changes_while_not_taken():
    with pytest.raises(AssertionError, match="not taken changed"):
        _taken(_BadCounter(), backpressure=0.5)


def test_without_backpressure_every_cycle_takes_a_beat():
    assert _taken(_BadCounter(), backpressure=0.0) == list(range(200))


def test_backpressure_needs_a_generator():
    async def bench(ctx):
        rejected(CheckedSink, ctx, dut.o, backpressure=0.5, match="rng")

    dut = _Counter()
    simulation_of(dut).run([(bench, False)])
