# amaranth: UnusedElaboratable=no
"""RingCluster: the turns go round the lanes one a cycle; a lane's ready halves are
written to its own region in its turn; a read returns the row a lane addressed two cycles
later (the RAM, then its output register, which holds while ``en`` is low), and zero when
no lane addresses one. (Lanes on a cluster, against the reference:
``test_frame_bus.py``.)"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from squeezenic_hw.gateware.arrays.ring_cluster import RingCluster

from support.unused import rejected

HALF = 256


def _drive(g, rows, seed):
    """Random half writes from every lane, then a read of every row of every region;
    returns (turn sequence, the model's rows, the rows read, the idle reads)."""
    rng = np.random.default_rng(seed)
    dut = RingCluster(g, rows)
    model = {}
    turns, reads, idle, held = [], {}, [], []

    async def bench(ctx):
        for _ in range(12 * g):
            for lane in dut.lanes:
                ctx.set(lane.r_addr, rows - 1)
                ctx.set(lane.r_en, 0)
                ctx.set(lane.w_data, int.from_bytes(rng.bytes(64), "little"))
                ctx.set(lane.w_en, int(rng.integers(0, 4)))
                ctx.set(lane.w_addr, int(rng.integers(0, rows - 1)))
            await ctx.delay(1e-9)
            turn = [k for k, lane in enumerate(dut.lanes) if ctx.get(lane.w_turn)]
            assert len(turn) == 1
            k = turn[0]
            turns.append(k)
            lane = dut.lanes[k]
            en, addr, data = ctx.get(lane.w_en), ctx.get(lane.w_addr), ctx.get(lane.w_data)
            row = model.setdefault((k, addr), [0, 0])
            for h in range(2):
                if en >> h & 1:
                    row[h] = data >> (HALF * h) & ((1 << HALF) - 1)
            await ctx.tick()
        for lane in dut.lanes:
            ctx.set(lane.w_en, 0)
        ctx.set(dut.en, 1)
        for k, lane in enumerate(dut.lanes):
            for addr in range(rows):
                ctx.set(lane.r_addr, addr)
                ctx.set(lane.r_en, 1)
                await ctx.tick()            # the RAM reads the row
                ctx.set(lane.r_addr, rows - 1)
                ctx.set(lane.r_en, 0)
                await ctx.tick()            # the output register takes it
                reads[(k, addr)] = ctx.get(dut.o)
                # while ``en`` is low the output register holds the row
                ctx.set(dut.en, 0)
                await ctx.tick().repeat(2)
                held.append(ctx.get(dut.o) == reads[(k, addr)])
                ctx.set(dut.en, 1)
                await ctx.tick()
                idle.append(ctx.get(dut.o))

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    want = {key: half[0] | half[1] << HALF for key, half in model.items()}
    return turns, want, reads, idle, held


@pytest.mark.parametrize("g,rows", [(1, 4), (3, 4), (4, 8)])
def test_ring_cluster_writes_in_turns_and_reads_rows(g, rows):
    turns, want, reads, idle, held = _drive(g, rows, seed=g)
    assert turns == [k % g for k in range(len(turns))]
    assert want
    for (k, addr), value in reads.items():
        assert value == want.get((k, addr), 0), (k, addr)
    # no lane reads: the last row of the last region, never written, reads zero
    assert idle == [0] * len(idle)
    assert held and all(held)


@pytest.mark.parametrize("kw", [dict(n_lanes=0, rows=32), dict(n_lanes=17, rows=32),
                                dict(n_lanes=True, rows=32), dict(n_lanes=4, rows=24),
                                dict(n_lanes=4, rows=1), dict(n_lanes=4, rows=2048)])
def test_ring_cluster_parameters_checked(kw):
    name = "n_lanes" if kw["rows"] == 32 else "rows"
    rejected(RingCluster, **kw, match=name)
