# amaranth: UnusedElaboratable=no
"""IntegerProduct against numpy: fl32(±c · b) for 16-bit integers c, bit for bit, under
random stalls: edge factors, every small integer, rounding ties, results either side of
the subnormal and overflow boundaries."""

import numpy as np
from amaranth.back import verilog

from squeezenic_hw.flows import synth
from squeezenic_hw.gateware.codecs.integer_product import IntegerProduct

from support.fp32_pairs import EDGE_VALUES, U32, numpy_reference, run_enabled_pipeline

_EDGE_C = [0, 1, 2, 3, 5, 7, 255, 256, 257, 4095, 32767, 32768, 32769, 65535]


def _int_bits(c, negative):
    """binary32 bits of ±c (exact: at most 16 significant bits); -0 for c = 0, negative."""
    return np.asarray(c, np.float32).view(U32) | (np.asarray(negative, U32) << U32(31))


def check(c, negative, b, *, seed=0, stall=0.3):
    c, negative, b = (np.asarray(v) for v in (c, negative, b))
    out, stats = run_enabled_pipeline(IntegerProduct(), {"c": c, "negative": negative, "b": b},
                                      ["p"], stall=stall, seed=seed)
    got = np.array(out["p"], dtype=U32)
    want = numpy_reference(_int_bits(c, negative), b)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [f"{'-' if negative[i] else ''}{c[i]} * {b[i]:#010x}: gateware "
                           f"{got[i]:#010x}, numpy {want[i]:#010x}" for i in bad[:8]]
    return got


def test_edge_cross_product():
    c, b = np.meshgrid(_EDGE_C, EDGE_VALUES, indexing="ij")
    c, b = c.ravel(), b.ravel()
    negative = np.arange(c.size) % 2
    check(c, negative, b)


def test_every_small_integer_and_random_factors():
    rng = np.random.default_rng(1)
    c = np.concatenate([np.arange(4097), rng.integers(0, 1 << 16, 3000)])
    b = rng.integers(0, 1 << 32, c.size, dtype=np.uint64).astype(U32)
    check(c, rng.integers(0, 2, c.size), b, seed=1)


def _boundary_factors(rng, n):
    """Factors that put c·b near 2**-149 … 2**-125 (subnormal results, and the first
    normal binade) or near 2**128 (overflow), with sparse or dense significands, and
    subnormal factors."""
    c = np.where(rng.random(n) < 0.5, rng.integers(1, 1 << 16, n),
                 1 << rng.integers(0, 16, n))
    lead = np.floor(np.log2(np.maximum(c, 1))).astype(np.int64)
    low = rng.random(n) < 0.7
    target = np.where(low, rng.integers(-150, -123, n), rng.integers(126, 130, n))
    e = np.clip(target - lead + 127, 0, 254)
    frac = np.where(rng.random(n) < 0.5, rng.integers(0, 1 << 23, n),
                    1 << rng.integers(0, 23, n))
    return c, ((e << 23) | frac).astype(U32)


def _tie_factors(rng, n):
    """An odd c times a significand whose lowest set bit puts the product's lowest set bit
    at the guard position of either normalisation (half of them exact ties)."""
    c = rng.integers(0, 1 << 15, n) * 2 + 1
    lead = np.floor(np.log2(c)).astype(np.int64)
    j = np.maximum(lead - rng.integers(0, 2, n), 0)
    m = (rng.integers(0, 1 << 24, n) | (1 << 23)) & -(1 << j) | (1 << j)
    e = rng.integers(1, 255, n)
    return c, ((e << 23) | (m & 0x7FFFFF)).astype(U32)


def test_boundaries_and_ties():
    rng = np.random.default_rng(2)
    c1, b1 = _boundary_factors(rng, 3000)
    c2, b2 = _tie_factors(rng, 3000)
    c, b = np.concatenate([c1, c2]), np.concatenate([b1, b2])
    got = check(c, rng.integers(0, 2, c.size), b, seed=2)
    exponent = (got >> U32(23)) & U32(0xFF)
    # the sets reach what they aim at: subnormal results, overflow, rounding up
    assert np.count_nonzero((exponent == 0) & ((got & U32(0x7FFFFF)) != 0)) > 500
    assert np.count_nonzero(exponent == 255) > 100
    # and exact ties: the float64 product (exact, 40 significant bits) halfway between
    # the result and its neighbour
    r = got[c1.size:].view(np.float32)
    with np.errstate(all="ignore"):
        x = c2.astype(np.float64) * b2.view(np.float32).astype(np.float64)
        ulp = np.abs(np.nextafter(r, np.float32(np.inf)).astype(np.float64) - r)
    assert np.count_nonzero(np.isfinite(r) & (np.abs(x - r) * 2 == ulp)) > 300


def test_no_stalls_gives_one_product_per_cycle():
    rng = np.random.default_rng(3)
    c = rng.integers(0, 1 << 16, 200)
    b = rng.integers(0, 1 << 32, 200, dtype=np.uint64).astype(U32)
    out, stats = run_enabled_pipeline(IntegerProduct(), {"c": c, "negative": c % 2, "b": b},
                                      ["p"], stall=0.0)
    assert stats["cycles"] == 200 + IntegerProduct.LATENCY - 1
    assert np.array_equal(np.array(out["p"], U32), numpy_reference(_int_bits(c, c % 2), b))


def test_converts_to_verilog():
    assert "module product" in verilog.convert(IntegerProduct(), name="product")


def test_two_dsps_no_shifter_and_within_budget(tmp_path):
    # P = C·M and Q = c·f each on a DSP48E2; no denormalising shifter around them
    result = synth.synthesize(IntegerProduct(), name="product", workdir=tmp_path,
                              timing=True)
    assert result.dsp == 2
    assert result.lut < 260
    assert result.timing.est_ns <= 3.2
