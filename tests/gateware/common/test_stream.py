"""Stream plumbing: ``merge_in_order`` against a Python model, under random idle cycles and
random backpressure."""

import random

import pytest
from amaranth import Module, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from squeezenic_hw.gateware.common.stream import merge_in_order

ITEM = data.StructLayout({"value": unsigned(8), "end": unsigned(1)})


class _Merge(wiring.Component):
    """``merge_in_order`` with its order queue fed from a stream, for the test."""

    order: In(stream.Signature(1))
    a: In(stream.Signature(ITEM))
    b: In(stream.Signature(ITEM))
    o: Out(stream.Signature(ITEM))

    def elaborate(self, platform):
        m = Module()
        m.submodules.queue = queue = fifo.SyncFIFOBuffered(width=1, depth=4)
        m.d.comb += [queue.w_data.eq(self.order.payload), queue.w_en.eq(self.order.valid),
                     self.order.ready.eq(queue.w_rdy)]
        merge_in_order(m, queue, [(self.a, self.a.payload, self.a.payload.end),
                                  (self.b, self.b.payload, self.b.payload.end)], self.o)
        return m


def _runs(rng, n_runs):
    """``[(source, [(value, end), ...]), ...]``: runs of 1…5 items, each ending with end=1."""
    runs = []
    for k in range(n_runs):
        length = rng.randint(1, 5)
        runs.append((rng.randint(0, 1),
                     [((k * 7 + j) & 0xFF, int(j == length - 1)) for j in range(length)]))
    return runs


def _simulate(runs, idle, backpressure, seed):
    dut = _Merge()
    rng = random.Random(seed)
    items = {0: [i for s, r in runs if s == 0 for i in r],
             1: [i for s, r in runs if s == 1 for i in r]}
    expected = sum(len(r) for _, r in runs)
    out = []
    cycles = []

    def source(port, values):
        async def bench(ctx):
            src = random.Random(rng.random())
            for value in values:
                while src.random() < idle:
                    ctx.set(port.valid, 0)
                    await ctx.tick()
                ctx.set(port.payload, value)
                ctx.set(port.valid, 1)
                await ctx.tick().until(port.ready)
            ctx.set(port.valid, 0)
        return bench

    async def sink(ctx):
        snk = random.Random(rng.random())
        t = 0
        while len(out) < expected:
            ready = snk.random() >= backpressure
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            t += 1
            assert t < 20 * expected + 200, "merge stalled"
            if ready and valid:
                out.append((payload.value, payload.end))
                cycles.append(t)

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(source(dut.order, [s for s, _ in runs]), background=True)
    sim.add_testbench(source(dut.a, [{"value": v, "end": e} for v, e in items[0]]),
                      background=True)
    sim.add_testbench(source(dut.b, [{"value": v, "end": e} for v, e in items[1]]),
                      background=True)
    sim.add_testbench(sink)
    sim.run()
    return out, cycles


@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)])
@pytest.mark.parametrize("seed", [1, 2])
def test_runs_leave_in_queued_order(idle, backpressure, seed):
    runs = _runs(random.Random(seed), 40)
    out, _ = _simulate(runs, idle, backpressure, seed)
    assert out == [item for _, run in runs for item in run]


def test_one_item_per_cycle_across_runs():
    runs = [(k % 2, [(k, 1)]) for k in range(12)] + [(0, [(1, 0), (2, 0), (3, 1)])]
    out, cycles = _simulate(runs, 0.0, 0.0, 5)
    assert out == [item for _, run in runs for item in run]
    # after the queue's first entry is readable, every cycle moves one item
    assert cycles[-1] - cycles[0] == len(out) - 1
