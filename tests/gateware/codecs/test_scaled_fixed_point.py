# amaranth: UnusedElaboratable=no
"""ScaledFixedPoint against the decomposition of numpy's float32 product: the integer
part, 32 fraction bits, sticky, zero and saturate of fl32(|x|·scale)."""

import numpy as np
import pytest
from amaranth.back import verilog

from squeezenic_hw.flows import synth
from squeezenic_hw.gateware.codecs.scaled_fixed_point import ScaledFixedPoint

from support.fp32_pairs import (
    U32,
    edge_pairs,
    interesting_pairs,
    random_pairs,
    run_enabled_pipeline,
)

_OUTPUTS = ["integer", "frac", "sticky", "zero", "saturate"]


def decomposed(x, scale):
    """What the encoders read of y = fl32(|x|·scale): ``(integer, frac, sticky, zero,
    saturate)``, the first three only where neither flag is set and ``saturate`` only
    where ``zero`` is not (else -1)."""
    with np.errstate(all="ignore"):
        y = (np.asarray(x, U32) & U32(0x7FFFFFFF)).view(np.float32) * \
            np.asarray(scale, U32).view(np.float32)
    bits = y.view(U32)
    zero = (bits >> U32(31) == 1) | (y == 0) | np.isnan(y)
    saturate = ~zero & (((bits >> U32(23)) & U32(0xFF)) >= 142)
    v = np.where(zero | saturate, 0.0, y.astype(np.float64))
    integer = np.floor(v)
    scaled = (v - integer) * 2.0**32          # exact: 24 significant bits
    frac = np.floor(scaled)
    sticky = scaled != frac
    undefined = zero | saturate
    return (np.where(undefined, -1, integer.astype(np.int64)),
            np.where(undefined, -1, frac.astype(np.int64)),
            np.where(undefined, -1, sticky.astype(np.int64)),
            zero.astype(np.int64), np.where(zero, -1, saturate.astype(np.int64)))


def level_pairs(rng, n):
    """Pairs whose product lands where the levels are, 2**-40 … 2**16, with the
    significands of ``interesting_pairs`` (ties at the rounding position, products
    near a binade's edge) and a quarter subnormal ``x`` or scales."""
    a, b = interesting_pairs(rng, n)
    target = rng.integers(-40, 17, n) + 127              # biased exponent of the product
    ea = (a >> U32(23)) & U32(0xFF)
    normal = (ea > 0) & (ea < 255)
    eb = np.clip(target + 127 - ea.astype(np.int64), 1, 254).astype(U32)
    b = np.where(normal, (b & U32(0x807FFFFF)) | (eb << U32(23)), b)
    return a, b


def check(x, scale, *, seed=0, stall=0.3):
    out, stats = run_enabled_pipeline(ScaledFixedPoint(), {"x": x, "scale": scale}, _OUTPUTS,
                                      stall=stall, seed=seed)
    want = decomposed(x, scale)
    for name, ref in zip(_OUTPUTS, want, strict=True):
        got = np.array(out[name], dtype=np.int64)
        bad = np.flatnonzero((ref != -1) & (got != ref))
        assert bad.size == 0, [
            f"{name}: x {x[i]:#010x} scale {scale[i]:#010x}: gateware {got[i]:#x}, "
            f"reference {ref[i]:#x}" for i in bad[:8]]
    return want


def test_edge_cross_product():
    x, scale = edge_pairs()
    zero, saturate = check(x, scale, seed=1)[3:]
    assert zero.any() and (saturate == 1).any() and ((zero == 0) & (saturate == 0)).any()


def test_random_interesting_and_level_pairs():
    """Uniform patterns, the multiplier's delicate pairs (subnormal results, exact ties,
    products at a power of two) and pairs that land on the levels; both operand
    orders."""
    rng = np.random.default_rng(5)
    ra, rb = random_pairs(rng, 3000)
    ia, ib = interesting_pairs(rng, 6000)
    la, lb = level_pairs(rng, 12000)
    x = np.concatenate([ra, ia, ib, la])
    scale = np.concatenate([rb, ib, ia, lb])
    integer, frac, sticky, zero, saturate = check(x, scale, seed=2)
    defined = (zero == 0) & (saturate == 0)
    # every kind of result came up: integers, fractions, only a sticky bit
    assert (defined & (integer > 1000)).sum() > 100
    assert (defined & (integer == 0) & (frac > 0)).sum() > 100
    assert (defined & (integer == 0) & (frac == 0) & (sticky == 1)).sum() > 100


def test_no_stalls():
    rng = np.random.default_rng(6)
    x, scale = level_pairs(rng, 2000)
    check(x, scale, seed=3, stall=0.0)


def test_converts_to_verilog():
    assert "module scaled" in verilog.convert(ScaledFixedPoint(), name="scaled")


@pytest.mark.parametrize("name", _OUTPUTS)
def test_ports(name):
    assert hasattr(ScaledFixedPoint(), name) and ScaledFixedPoint.LATENCY == 10


def test_shift_on_a_dsp_and_within_budget(tmp_path):
    # the significand product on two DSP48E2s, the shift to the binary point on a third
    result = synth.synthesize(ScaledFixedPoint(), name="scaled", workdir=tmp_path,
                              timing=True)
    assert result.dsp == 3
    assert result.timing.est_ns <= 3.2
