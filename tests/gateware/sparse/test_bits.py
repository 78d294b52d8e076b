"""The sparse blocks' gate-level counts (``sparse/bits.py``) against Python's popcount:
every input pattern up to 8 bits, random and edge patterns of 16."""

import random

import pytest
from amaranth import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from squeezenic_hw.gateware.sparse.bits import (
    count_onehot,
    popcount16,
    popcount_table,
    prefix_counts16,
)


class _Counts(wiring.Component):
    """The counts of ``n`` input bits, side by side (16-bit ones only for ``n`` = 16)."""

    def __init__(self, n):
        self.n = n
        ports = {"bits": In(max(n, 1)), "onehot": Out(n + 1)}
        if n <= 4:
            ports["table"] = Out(max(n.bit_length(), 1))
        if n == 16:
            ports.update({"popcount": Out(5), "total": Out(5), "ranks": Out(4 * 16)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        bits = [self.bits[k] for k in range(self.n)]
        m.d.comb += self.onehot.eq(Cat(*count_onehot(m, bits, "oh")))
        if self.n <= 4 and bits:
            m.d.comb += self.table.eq(Cat(*popcount_table(m, bits, "table")))
        if self.n == 16:
            ranks, total = prefix_counts16(m, bits, "prefix")
            m.d.comb += [self.popcount.eq(popcount16(m, bits, "pop")),
                         self.total.eq(total), self.ranks.eq(Cat(*ranks))]
        return m


def _patterns(n):
    if n <= 8:
        return range(1 << n)
    rng = random.Random(n)
    edges = [0, (1 << n) - 1, 1, 1 << (n - 1), 0x5555 & ((1 << n) - 1),
             0xAAAA & ((1 << n) - 1)]
    return edges + [1 << k for k in range(n)] + [rng.getrandbits(n) for _ in range(300)]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8, 12, 15, 16])
def test_counts_match_popcount(n):
    dut = _Counts(n)
    seen = []

    async def bench(ctx):
        for value in _patterns(n):
            ctx.set(dut.bits, value)
            count = value.bit_count()
            assert ctx.get(dut.onehot) == 1 << count, (n, value)
            if 0 < n <= 4:
                assert ctx.get(dut.table) == count, (n, value)
            if n == 16:
                assert ctx.get(dut.popcount) == count == ctx.get(dut.total), value
                ranks = ctx.get(dut.ranks)
                for e in range(16):
                    below = (value & ((1 << e) - 1)).bit_count()
                    assert (ranks >> 4 * e) & 0xF == below % 16, (value, e)
            seen.append(value)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert len(seen) == len(list(_patterns(n)))
