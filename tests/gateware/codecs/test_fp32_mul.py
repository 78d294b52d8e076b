# amaranth: UnusedElaboratable=no
"""Fp32Multiplier and fp32_mul_model against numpy float32 multiplication."""

import random
import time

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from squeezenic_hw.gateware.codecs.fp32_mul import Fp32Multiplier
from squeezenic_hw.reference.fp32_mul import fp32_mul_model
from squeezenic_hw.spec.fp32 import CANONICAL_NAN

U32 = np.uint32

# Edge operands (bit patterns); the cross product of these with themselves and
# their negations is checked exhaustively.
_EDGE_POSITIVE = [
    0x00000000,              # +0
    0x00000001,              # smallest subnormal 2**-149
    0x00000002, 0x00000003,  # 3 * 2**-149: * 0.5 is a tie between 1 and 2 ulps
    0x00000005,
    0x00400000, 0x00400001,  # 2**-127, and just above
    0x007FFFFF,              # largest subnormal (* (1 + 2**-23) rounds to min normal)
    0x00800000, 0x00800001,  # smallest normal, and just above
    0x00FFFFFF,              # (2 - 2**-23) * 2**-126: * 0.5 is a tie into min normal
    0x1F800000, 0x20000000,  # 2**-64, 2**-63
    0x33800000, 0x34000000,  # 2**-24, 2**-23
    0x3EFFFFFF, 0x3F000000, 0x3F000001,  # just below 0.5, 0.5, just above
    0x3F400000,              # 0.75
    0x3F7FFFFF,              # 1 - 2**-24
    0x3F800000, 0x3F800001,  # 1.0, 1 + 2**-23
    0x3F800800, 0x3F801800,  # 1 + 2**-12 (squared: exact tie, to even), 1 + 3 * 2**-12
    0x3FB504F3, 0x3FB504F4,  # ~sqrt(2): squares land either side of 2
    0x3FC00000,              # 1.5
    0x3FFFFFFF,              # 2 - 2**-23 (* (1 + 2**-23) rounds up to 2.0)
    0x40000000,              # 2.0
    0x4B000000, 0x4B800000,  # 2**23, 2**24
    0x5F800000, 0x5F000000,  # 2**64, 2**63
    0x7E800000, 0x7F000000,  # 2**126, 2**127
    0x7EFFFFFF, 0x7F7FFFFF,  # largest binade; largest finite (* (1 + 2**-23) -> inf)
    0x7F800000,              # inf
    0x7F800001, 0x7FA00000,  # signalling NaNs
    0x7FC00000, 0x7FC00001, 0x7FFFFFFF,  # quiet NaNs with payloads
]
EDGE_VALUES = np.array(_EDGE_POSITIVE + [x | 0x80000000 for x in _EDGE_POSITIVE], dtype=U32)


def edge_pairs():
    a, b = np.meshgrid(EDGE_VALUES, EDGE_VALUES, indexing="ij")
    return a.ravel(), b.ravel()


def numpy_reference(a, b):
    """numpy float32 product bits, NaN results canonicalised."""
    with np.errstate(all="ignore"):
        r = np.asarray(a, dtype=U32).view(np.float32) * np.asarray(b, dtype=U32).view(np.float32)
    return np.where(np.isnan(r), U32(CANONICAL_NAN), r.view(U32))


def random_pairs(rng, n):
    """Uniform 32-bit patterns: every class, NaN payloads and subnormals included."""
    return (rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(U32),
            rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(U32))


def _fractions(rng, n):
    """23-bit fractions: uniform, few set bits (exact products, ties), near all-ones,
    uniform with the low bits cleared."""
    kind = rng.integers(0, 4, n)
    uniform = rng.integers(0, 1 << 23, n)
    few = np.zeros(n, dtype=np.int64)
    for _ in range(3):
        bit = rng.integers(0, 24, n)          # bit 23 means "no bit"
        few |= np.where(bit < 23, 1 << np.minimum(bit, 22), 0)
    ones = (1 << 23) - 1 - rng.integers(0, 1 << rng.integers(0, 8, n))
    short = uniform & -(1 << rng.integers(0, 23, n))    # uniform with low bits cleared
    return np.select([kind == 0, kind == 1, kind == 2], [uniform, few, ones], short)


def _subnormal_fractions(rng, n):
    """Non-zero 23-bit fractions of every bit length (few or many set bits)."""
    frac = np.where(rng.integers(0, 2, n) == 0, rng.integers(1, 1 << 23, n), _fractions(rng, n))
    frac = frac >> rng.integers(0, 23, n)
    return np.maximum(frac, 1)


def interesting_pairs(rng, n):
    """Operand pairs aimed at the delicate cases.

    Normal x normal with exponents putting the product near the subnormal range,
    at the overflow boundary, or anywhere; significands that are random,
    sparse, near all-ones, constructed to make the product an exact rounding tie
    at its guard position, or constructed to make the product land within a few
    units of a power of two (rounding up into the next binade, to the smallest
    normal, to inf). A quarter are subnormal x normal instead.
    """
    u = rng.random(n)
    target = np.select(
        [u < 0.35, u < 0.55, u < 0.75],
        [rng.integers(-30, 4, n),             # result subnormal / underflow / min normal
         rng.integers(250, 259, n),           # overflow boundary
         rng.integers(-60, 320, n)],          # anywhere (incl. far under/overflow)
        rng.integers(1, 255, n),              # normal results
    )
    # ea + eb - 127 = target with 1 <= ea, eb <= 254
    target = np.clip(target, 2 - 127, 508 - 127)
    ea = rng.integers(np.maximum(1, target - 127), np.minimum(254, target + 126) + 1)
    eb = target + 127 - ea
    fa = _fractions(rng, n)
    fb = _fractions(rng, n)
    kind = rng.random(n)
    # exact ties: the product's lowest set bit i + j sits at the guard position
    # (P bit 22 or 23 for normal results, P bit 23 - target for subnormal ones)
    g = np.where(target <= 0, np.minimum(23 - target, 46), 22 + rng.integers(0, 2, n))
    i = rng.integers(np.maximum(0, g - 23), np.minimum(23, g) + 1)
    j = g - i
    ma = ((rng.integers(0, 1 << 24, n) | (1 << 23)) & -(1 << i)) | (1 << i)
    mb = ((rng.integers(0, 1 << 24, n) | (1 << 23)) & -(1 << j)) | (1 << j)
    tie = kind < 0.25
    fa = np.where(tie, ma & 0x7FFFFF, fa)
    fb = np.where(tie, mb & 0x7FFFFF, fb)
    # products within a few units of 2**47 or 2**48
    ma = fa | (1 << 23)
    mb = ((1 << (47 + rng.integers(0, 2, n))) // ma) + rng.integers(-2, 3, n)
    near = (kind >= 0.25) & (kind < 0.45)
    fb = np.where(near, np.clip(mb, 1 << 23, (1 << 24) - 1) & 0x7FFFFF, fb)
    # a quarter: a subnormal operand times a normal with an exponent that puts the
    # product anywhere from deep underflow to well into the normal range
    sub = rng.random(n) < 0.25
    ea = np.where(sub, 0, ea)
    fa = np.where(sub, _subnormal_fractions(rng, n), fa)
    eb = np.where(sub, rng.integers(60, 255, n), eb)
    sa = rng.integers(0, 2, n)
    sb = rng.integers(0, 2, n)
    a = (sa << 31) | (ea << 23) | fa
    b = (sb << 31) | (eb << 23) | fb
    swap = rng.random(n) < 0.5
    return np.where(swap, b, a).astype(U32), np.where(swap, a, b).astype(U32)


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

def simulate(a, b, *, stall=0.3, seed=0, a_subnormal=True):
    """Feed pair i on the i-th enabled cycle with random stalls (garbage on a/b
    while en = 0); return p after the LATENCY-th enabled edge counted from
    each pair's sampling edge. Checks p holds over every disabled cycle."""
    dut = Fp32Multiplier(a_subnormal=a_subnormal)
    a = [int(x) for x in a]
    b = [int(x) for x in b]
    n = len(a)
    rnd = random.Random(seed)
    out = []
    stats = {}

    async def bench(ctx):
        issued = enabled = cycles = 0
        last = ctx.get(dut.p)
        while len(out) < n:
            en = rnd.random() >= stall
            if en and issued < n:
                ctx.set(dut.a, a[issued])
                ctx.set(dut.b, b[issued])
            else:
                ctx.set(dut.a, rnd.getrandbits(32))
                ctx.set(dut.b, rnd.getrandbits(32))
            ctx.set(dut.en, en)
            await ctx.tick()
            cycles += 1
            p = ctx.get(dut.p)
            if en:
                issued += 1
                enabled += 1
                if enabled >= Fp32Multiplier.LATENCY:
                    out.append(p)
            else:
                assert p == last, f"p changed while en = 0 (cycle {cycles})"
            last = p
        stats["cycles"] = cycles

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    start = time.perf_counter()
    sim.run()
    stats["seconds"] = time.perf_counter() - start
    return np.array(out, dtype=U32), stats


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


def test_gateware_without_subnormal_a():
    """``a_subnormal=False``: every ``a`` that is not subnormal (zero, normal, inf, NaN),
    against every kind of ``b`` (subnormals included), edge values and random ones."""
    rng = np.random.default_rng(7)
    ea, eb = edge_pairs()
    ra, rb = random_pairs(rng, 4000)
    ia, ib = interesting_pairs(rng, 8000)
    a = np.concatenate([ea, ra, ia])
    b = np.concatenate([eb, rb, ib])
    keep = ((a >> 23) & 0xFF != 0) | (a & 0x7FFFFF == 0)
    assert keep.sum() > 5000 and (~keep).sum() > 100   # subnormal a's were left out
    check_gateware(a[keep], b[keep], seed=3, a_subnormal=False)


def test_rejects_bad_a_subnormal():
    with pytest.raises(ValueError, match="a_subnormal"):
        Fp32Multiplier(a_subnormal=1)


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
