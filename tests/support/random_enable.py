"""Drive a component's ``value`` and ``en`` with random values and a random enable, and
read two of its outputs side by side (a block and the register chain it stands for)."""

import random

from amaranth.sim import Simulator

__all__ = ["outputs_under_random_enable"]


def outputs_under_random_enable(dut, width, names, *, settle, seed, cycles=400, enable=0.7):
    """``[(a, b)]``: the outputs ``names`` of ``dut`` after every cycle from ``settle`` on,
    with a random ``width``-bit ``value`` and ``en`` high with probability ``enable``."""
    rng = random.Random(seed)
    compared = []

    async def bench(ctx):
        for k in range(cycles):
            ctx.set(dut.value, rng.getrandbits(width))
            ctx.set(dut.en, rng.random() < enable)
            await ctx.tick()
            if k >= settle:
                compared.append(tuple(ctx.get(getattr(dut, n)) for n in names))

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    return compared
