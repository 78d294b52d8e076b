# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.reduce.code_aligner.CodeAligner`: beats of any
count in, reads of any count out, the codes in order; full rate when nothing stalls."""

import random

import pytest

from squeezenic_hw.gateware.reduce.code_aligner import CodeAligner
from squeezenic_hw.sim.streams import simulation_of

from support.shared_duts import shared
from support.unused import rejected


def run_aligner(code_width, beats, *, idle, pop_share, pops=(16, 16, *range(17)), seed=0):
    """Offer ``beats`` (lists of codes) and pop one of ``pops`` (at most ``level``) with
    probability ``pop_share`` each cycle; returns the codes read, in
    order, and the cycle each beat was taken."""
    dut = shared(CodeAligner, code_width)
    rng = random.Random(seed)
    out, taken = [], []
    total = sum(len(b) for b in beats)

    async def bench(ctx):
        k, t = 0, 0
        while len(out) < total:
            t += 1
            assert t < 40 * len(beats) + 100, f"{len(out)} of {total} codes after {t} cycles"
            offer = k < len(beats) and rng.random() >= idle
            if offer:
                codes = beats[k] + [0] * (16 - len(beats[k]))
                ctx.set(dut.i.payload, {"codes": codes, "count": len(beats[k])})
            ctx.set(dut.i.valid, offer)
            level = ctx.get(dut.level)
            pop = 0
            if rng.random() < pop_share:
                pop = min(level, rng.choice(pops))
            got = [ctx.get(dut.codes[e]) for e in range(pop)]
            ctx.set(dut.pop, pop)
            accepted = offer and ctx.get(dut.i.ready)
            await ctx.tick()
            out.extend(got)
            if accepted:
                taken.append(t)
                k += 1
        ctx.set(dut.pop, 0)
        ctx.set(dut.i.valid, 0)

    simulation_of(dut).run([(bench, False)])
    return out, taken


@pytest.mark.parametrize("code_width, idle, pop_share", [
    (16, 0.3, 0.7), (1, 0.1, 0.5), (5, 0.6, 0.9), (16, 0.0, 1.0)])
def test_codes_leave_in_order(code_width, idle, pop_share):
    rng = random.Random(code_width)
    counts = [rng.choice([16, 16, rng.randrange(17)]) for _ in range(120)]
    beats = [[rng.randrange(1 << code_width) for _ in range(c)] for c in counts]
    out, _ = run_aligner(code_width, beats, idle=idle, pop_share=pop_share, seed=code_width)
    assert out == [c for b in beats for c in b]


def test_full_rate():
    """Full beats offered every cycle and 16 codes popped whenever held: a beat a cycle."""
    rng = random.Random(3)
    beats = [[rng.randrange(1 << 16) for _ in range(16)] for _ in range(60)]
    out, taken = run_aligner(16, beats, idle=0.0, pop_share=1.0, pops=[16], seed=3)
    assert out == [c for b in beats for c in b]
    assert taken[-1] - taken[0] == len(beats) - 1


@pytest.mark.parametrize("code_width", [0, 17, True, "8"])
def test_bad_code_width(code_width):
    rejected(CodeAligner, code_width, match="code_width")
