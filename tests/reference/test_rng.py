"""The counter-based generator: numpy properties and the gateware against numpy."""

import random

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from squeezenic_hw.gateware.codecs.counter_rng import CounterRng
from squeezenic_hw.reference.rng import draw_u32, frame_key, wang_hash32


def test_wang_hash_known_values():
    # Worked by hand from the definition in docs/rng.md (x = 0: ~0 = 0xFFFFFFFF, ...).
    x = 0
    m = 0xFFFFFFFF
    x = ((~x & m) + (x << 15)) & m
    x ^= x >> 12
    x = (x + (x << 2)) & m
    x ^= x >> 4
    x = (x + (x << 3) + (x << 11)) & m
    x ^= x >> 16
    assert int(wang_hash32(0)) == x


def test_wang_hash_is_a_bijection_on_a_slice():
    # A bijection maps 2^20 distinct inputs to 2^20 distinct outputs.
    v = wang_hash32(np.arange(1 << 20, dtype=np.uint32) * np.uint32(4099))
    assert np.unique(v).size == 1 << 20


def test_draws_are_a_pure_function_of_seed_and_index():
    j = np.arange(1000, 3000, dtype=np.uint64)
    whole = draw_u32(42, j)
    assert np.array_equal(whole[500:700], draw_u32(42, j[500:700]))
    assert np.array_equal(draw_u32(42, [1500]), whole[500:501])
    assert not np.array_equal(whole, draw_u32(43, j))


def test_index_wraps_modulo_2_32():
    assert np.array_equal(draw_u32(7, [5]), draw_u32(7, [2**32 + 5]))


def test_draws_look_uniform_and_uncorrelated():
    u = draw_u32(1234, np.arange(1 << 21)).astype(np.float64) / 2**32
    counts, _ = np.histogram(u, bins=64, range=(0, 1))
    expected = u.size / 64
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 120  # 63 degrees of freedom: p ~ 1e-5 at 120
    for lag in (1, 2, 3, 16, 17, 256):
        assert abs(np.corrcoef(u[:-lag], u[lag:])[0, 1]) < 0.005, lag


def test_seeds_do_not_give_shifted_copies():
    # With one round and a plain key offset, two seeds' streams would be shifts of
    # each other; the XOR re-keying between the rounds breaks that.
    a = draw_u32(1, np.arange(4096))
    b = draw_u32(2, np.arange(4096))
    k1, k2 = int(frame_key(1)), int(frame_key(2))
    shift = (k2 - k1) % 2**32
    assert not np.array_equal(draw_u32(1, np.arange(4096) + shift), b)
    assert len(np.intersect1d(a, b)) < 5


def _simulate_rng(cases, enable_prob, seed=0):
    dut = CounterRng()
    rng = random.Random(seed)
    results = []

    async def testbench(ctx):
        presented = []
        k = 0
        while len(results) < len(cases):
            enable = rng.random() < enable_prob
            s, o = cases[min(k, len(cases) - 1)]
            ctx.set(dut.seed, s)
            ctx.set(dut.offset, o)
            ctx.set(dut.en, enable)
            await ctx.tick()
            if enable:
                presented.append((s, o))
                k += 1
                if len(presented) >= CounterRng.LATENCY:
                    results.append((presented[len(presented) - CounterRng.LATENCY],
                                    [ctx.get(dut.u[e]) for e in range(16)]))
            elif results:
                # A stalled pipeline holds its output.
                assert [ctx.get(dut.u[e]) for e in range(16)] == results[-1][1]

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(testbench)
    sim.run()
    return results


@pytest.mark.parametrize("enable_prob", [1.0, 0.6])
def test_gateware_matches_numpy(enable_prob):
    rng = random.Random(5)
    cases = [(0, 0), (0xFFFFFFFF, 0xFFFFFFF8), (1, 2**32 - 1)]
    cases += [(rng.getrandbits(32), rng.getrandbits(32)) for _ in range(80)]
    for (seed, offset), u in _simulate_rng(cases, enable_prob):
        assert u == [int(v) for v in draw_u32(seed, offset + np.arange(16))], (seed, offset)


def test_gateware_converts_to_verilog():
    assert "module" in verilog.convert(CounterRng(), name="counter_rng")
