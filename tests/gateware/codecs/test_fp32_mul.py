# amaranth: UnusedElaboratable=no
"""Fp32Multiplier and fp32_mul_model against numpy float32 multiplication."""

import time

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from squeezenic_hw.gateware.codecs.fp32_mul import Fp32Multiplier
from squeezenic_hw.reference.fp32_mul import fp32_mul_model
from squeezenic_hw.spec.fp32 import CANONICAL_NAN

from support.fp32_pairs import (
    U32,
    edge_pairs,
    interesting_pairs,
    numpy_reference,
    random_pairs,
    run_enabled_pipeline,
)


def _classify(a, b):
    """Counts of result categories (exact products in float64), for coverage."""
    exact = a.view(np.float32).astype(np.float64) * b.view(np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        r = (a.view(np.float32) * b.view(np.float32)).astype(np.float64)
        finite = np.isfinite(r) & np.isfinite(exact)
        other = np.nextafter(r.astype(np.float32),
                             np.where(exact > r, np.inf, -np.inf).astype(np.float32))
        other = other.astype(np.float64)
        tie = finite & (exact != r) & (np.abs(exact - r) == np.abs(other - exact))
    mag = np.abs(exact)
    return {
        "ties": int(tie.sum()),
        "subnormal results": int((finite & (np.abs(r) < 2.0 ** -126) & (r != 0)).sum()),
        "underflow to zero": int((finite & (r == 0) & (exact != 0)).sum()),
        "overflow to inf": int((np.isinf(r) & np.isfinite(exact)).sum()),
        "rounded up to min normal": int((finite & (np.abs(r) == 2.0 ** -126)
                                         & (mag < 2.0 ** -126)).sum()),
        "rounded up to next binade": int((finite & (exact != r) & (np.abs(r) > mag)
                                          & (np.frexp(r)[0] == 0.5)).sum()),
    }


def check_model(a, b):
    got = fp32_mul_model(a, b)
    want = numpy_reference(a, b)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [
        f"{a[i]:#010x} * {b[i]:#010x}: model {got[i]:#010x}, numpy {want[i]:#010x}"
        for i in bad[:10]
    ]


# ---------------------------------------------------------------------------- model

def test_model_edge_cross_product():
    a, b = edge_pairs()
    check_model(a, b)


def test_model_nan_results_are_canonical():
    nan_in = [0x7F800001, 0xFFC00000, 0x7FFFFFFF, 0xFFA5A5A5]
    a = np.array(nan_in + [0x7F800000, 0x00000000, 0xFF800000, 0x80000000], dtype=U32)
    b = np.array([0x3F800000] * 4 + [0x80000000, 0xFF800000, 0x00000000, 0x7F800000], dtype=U32)
    assert (fp32_mul_model(a, b) == CANONICAL_NAN).all()
    assert (fp32_mul_model(b, a) == CANONICAL_NAN).all()


def test_model_zero_and_inf_signs():
    assert fp32_mul_model(0x80000000, 0x3F800000) == 0x80000000
    assert fp32_mul_model(0x80000000, 0xBF800000) == 0x00000000
    assert fp32_mul_model(0xFF800000, 0x3F800000) == 0xFF800000
    assert fp32_mul_model(0x7F7FFFFF, 0xC0000000) == 0xFF800000      # overflow
    assert fp32_mul_model(0x00000001, 0xBF000000) == 0x80000000      # tie to even: -0
    assert fp32_mul_model(0x00FFFFFF, 0x3F000000) == 0x00800000      # tie up to min normal


def test_model_broadcasts_and_rejects_floats():
    r = fp32_mul_model(np.array([0x3F800000, 0x40000000], dtype=U32), 0x40000000)
    assert r.dtype == U32 and r.tolist() == [0x40000000, 0x40800000]
    with pytest.raises(TypeError):
        fp32_mul_model(np.float32(1.0), 0x3F800000)


def test_model_random_and_interesting():
    rng = np.random.default_rng(20240611)
    check_model(*random_pairs(rng, 2_000_000))
    a, b = interesting_pairs(rng, 2_000_000)
    check_model(a, b)
    cover = _classify(a, b)
    n = len(a)
    # every delicate case is well represented in the interesting set
    assert cover["ties"] > n // 20, cover
    assert cover["subnormal results"] > n // 20, cover
    assert cover["underflow to zero"] > n // 100, cover
    assert cover["overflow to inf"] > n // 100, cover
    assert cover["rounded up to min normal"] > 100, cover
    assert cover["rounded up to next binade"] > 1000, cover


@pytest.mark.slow
def test_model_random_sweep_slow():
    """128 Mi uniform random pairs plus 32 Mi interesting ones."""
    rng = np.random.default_rng(7)
    start = time.perf_counter()
    chunk = 1 << 22
    for _ in range(32):
        check_model(*random_pairs(rng, chunk))
    for _ in range(8):
        check_model(*interesting_pairs(rng, chunk))
    print(f"\n{40 * chunk} pairs in {time.perf_counter() - start:.1f} s")


# ---------------------------------------------------------------------------- gateware

def simulate(a, b, *, stall=0.3, seed=0):
    """``p`` for each pair through the multiplier under random stalls."""
    dut = Fp32Multiplier()
    out, stats = run_enabled_pipeline(dut, {"a": a, "b": b}, ["p"], stall=stall, seed=seed)
    return np.array(out["p"], dtype=U32), stats


def check_gateware(a, b, **kwargs):
    got, stats = simulate(a, b, **kwargs)
    model = fp32_mul_model(a, b)
    want = numpy_reference(a, b)
    for name, ref in (("model", model), ("numpy", want)):
        bad = np.flatnonzero(got != ref)
        assert bad.size == 0, [
            f"{a[i]:#010x} * {b[i]:#010x}: gateware {got[i]:#010x}, {name} {ref[i]:#010x}"
            for i in bad[:10]
        ]
    return stats


def test_gateware_edge_cross_product():
    a, b = edge_pairs()
    check_gateware(a, b, seed=1)


def test_gateware_random_and_interesting():
    rng = np.random.default_rng(99)
    ra, rb = random_pairs(rng, 20_000)
    ia, ib = interesting_pairs(rng, 40_000)
    stats = check_gateware(np.concatenate([ra, ia]), np.concatenate([rb, ib]), seed=2)
    print(f"\n{stats['cycles']} cycles in {stats['seconds']:.1f} s "
          f"({stats['cycles'] / stats['seconds']:.0f} cycles/s)")


def test_gateware_holds_when_disabled():
    dut = Fp32Multiplier()
    pairs = [(0x3FC00000, 0x40000000), (0x007FFFFF, 0x3F800001),
             (0x7F7FFFFF, 0x3F800001), (0x00000003, 0x3F000000),
             (0xC0400000, 0x3F800800), (0x7F800000, 0x00000000),
             (0x00FFFFFF, 0x3F000000), (0x80000001, 0x3F400000),
             (0x3F800001, 0x3F7FFFFF), (0xFF800000, 0xBF800000)]
    assert len(pairs) > Fp32Multiplier.LATENCY   # pairs wait outside as well as inside
    want = [int(x) for x in fp32_mul_model([p[0] for p in pairs], [p[1] for p in pairs])]
    latency = Fp32Multiplier.LATENCY

    async def bench(ctx):
        got = []
        # fill the pipeline with the first `latency` pairs
        for x, y in pairs[:latency]:
            ctx.set(dut.a, x)
            ctx.set(dut.b, y)
            ctx.set(dut.en, 1)
            await ctx.tick()
        got.append(ctx.get(dut.p))
        # stall with the pipeline full and other operands on the inputs
        ctx.set(dut.en, 0)
        for k in range(20):
            ctx.set(dut.a, 0x40400000 + k)
            ctx.set(dut.b, 0xC1000000 + k)
            await ctx.tick()
            assert ctx.get(dut.p) == got[0]
        # resume: the pairs in flight come out in order, nothing lost or repeated
        ctx.set(dut.en, 1)
        for x, y in pairs[latency:] + [(0, 0)] * (latency - 1):
            ctx.set(dut.a, x)
            ctx.set(dut.b, y)
            await ctx.tick()
            got.append(ctx.get(dut.p))
        assert got[:len(pairs)] == want

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()


def test_converts_to_verilog():
    dut = Fp32Multiplier()
    assert isinstance(dut.LATENCY, int) and dut.latency == dut.LATENCY == 7
    text = verilog.convert(dut, name="fp32_mul")
    assert "module fp32_mul" in text
    assert " * " in text    # the significand product is a plain multiplication
