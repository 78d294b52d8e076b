# amaranth: UnusedElaboratable=no
"""pow2_fixed_codes: ``fixed`` codes for power-of-two scales, against the reference
encoder, edge values included, with the pipeline's enable toggled at random."""

import numpy as np
import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from squeezenic_hw.gateware.codecs.fixed_pow2 import (
    POW2_FIXED_LATENCY,
    Pow2Scale,
    pow2_fixed_codes,
    pow2_scale_of,
)
from squeezenic_hw.gateware.common.stream import Stager
from squeezenic_hw.reference.codecs import encode
from squeezenic_hw.sim.vectors import EDGE_F32_BITS, gradient_like

N = 16


class _Dut(wiring.Component):
    def __init__(self, q):
        self._q = q
        super().__init__({"x": In(32).array(N), "valid": In(N), "scale": In(32),
                          "en": In(1), "codes": Out(q).array(N)})

    def elaborate(self, platform):
        m = Module()
        frame = Signal(Pow2Scale)
        m.d.comb += frame.eq(pow2_scale_of(self.scale, self._q))
        stager = Stager(m, self.en, reset_less=True)
        codes = pow2_fixed_codes(m, stager, list(self.x), self.valid, frame, self._q)
        for e in range(N):
            m.d.comb += self.codes[e].eq(codes[e])
        return m


def _scales():
    exps = [0, 1, 2, 100, 120, 126, 127, 128, 130, 134, 140, 160, 200, 253, 254, 255]
    out = [e << 23 for e in exps] + [(1 << 31) | (127 << 23), 0x80000000, 0x7FC00000,
                                     0x7F800001]
    return np.array(out, dtype=np.uint32)


def _values(rng, n):
    x = (gradient_like(rng, n) * np.float32(rng.uniform(0.5, 300))).view(np.uint32)
    edge = rng.random(n) < 0.3
    x[edge] = EDGE_F32_BITS[rng.integers(0, len(EDGE_F32_BITS), int(edge.sum()))]
    # halves and near-halves of small integers: the ties
    ties = rng.random(n) < 0.2
    k = rng.integers(0, 300, int(ties.sum())).astype(np.float32) / np.float32(2)
    x[ties] = (k.view(np.uint32) + rng.integers(-1, 2, k.size).astype(np.uint32))
    return x


@pytest.mark.parametrize("q", [2, 4, 8])
def test_pow2_fixed_codes_match_reference(q):
    rng = np.random.default_rng(q)
    cases = []
    for scale in _scales():
        for _ in range(3):
            cases.append((scale, _values(rng, N), int(rng.integers(0, 2**N))))
    dut = _Dut(q)
    got = []

    async def bench(ctx):
        pending = []          # (enabled cycles still to go, case index)
        i = 0
        while i < len(cases) or pending:
            en = rng.random() < 0.7
            if i < len(cases) and en:
                scale, x, valid = cases[i]
                ctx.set(dut.scale, int(scale))
                ctx.set(dut.valid, valid)
                for e in range(N):
                    ctx.set(dut.x[e], int(x[e]))
            ctx.set(dut.en, en)
            await ctx.tick()
            if en:
                pending = [(c - 1, j) for c, j in pending]
                if i < len(cases):
                    pending.append((POW2_FIXED_LATENCY - 1, i))
                    i += 1
                done = [j for c, j in pending if c == 0]
                pending = [(c, j) for c, j in pending if c > 0]
                for j in done:
                    got.append((j, [ctx.get(dut.codes[e]) for e in range(N)]))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(got) == len(cases)
    for j, codes in got:
        scale, x, valid = cases[j]
        want = encode(x.view(np.float32), "fixed", param=q,
                      scale=np.uint32(scale).view(np.float32))
        mask = [(valid >> e) & 1 for e in range(N)]
        want = [int(w) if k else 0 for w, k in zip(want, mask, strict=True)]
        assert codes == want, (hex(int(scale)), [hex(int(v)) for v in x])


def test_pow2_fixed_codes_rejects_other_widths():
    m = Module()
    with pytest.raises(ValueError, match="q must be"):
        pow2_fixed_codes(m, Stager(m, 1), [Signal(32)], Signal(1), Signal(Pow2Scale), 3)
