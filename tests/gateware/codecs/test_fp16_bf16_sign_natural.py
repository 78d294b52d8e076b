"""Bit-exact tests of the ``fp16``, ``bf16``, ``sign`` and ``natural`` codec units.

Two layers:

* the numpy reference against independent definitions (numpy ``astype``,
  ``ml_dtypes``, the formulas of wire-format section 4), numpy only;
* every encoder/decoder unit against the reference, in Amaranth simulation
  under random idle and backpressure, plus one full-rate run (latency and one
  beat per cycle) and Verilog conversion.

The exhaustive sweeps over all 2**32 fp32 patterns are marked ``slow``: run
them with ``-m slow``.
"""

import zlib

import ml_dtypes
import numpy as np
import pytest
from amaranth.back import verilog

from squeezenic_hw.gateware.codecs.bf16 import Bf16Decoder, Bf16Encoder
from squeezenic_hw.gateware.codecs.fp16 import Fp16Decoder, Fp16Encoder
from squeezenic_hw.gateware.codecs.fp16_levels import Fp16LevelEncoder
from squeezenic_hw.gateware.codecs.natural import NaturalDecoder, NaturalEncoder
from squeezenic_hw.gateware.codecs.sign import SignDecoder, SignEncoder
from squeezenic_hw.reference import codecs as ref
from squeezenic_hw.reference.rng import draw_u32
from squeezenic_hw.sim.vectors import EDGE_F32_BITS, gradient_like, random_f32_bits

from support.codec_unit_harness import ONE_BITS, assert_full_rate, check_unit

U32 = np.uint32


# --------------------------------------------------------------------------
# Independent definitions (numpy / ml_dtypes / the spec's formulas)
# --------------------------------------------------------------------------

def _fp16_numpy(bits):
    with np.errstate(all="ignore"):
        return bits.view(np.float32).astype(np.float16).view(np.uint16).astype(U32)


def _bf16_ml_dtypes(bits):
    with np.errstate(all="ignore"):
        return bits.view(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16).astype(U32)


def _natural_spec(bits, stochastic, seed=0, offset=0):
    sign, exp, man = bits >> U32(31), (bits >> U32(23)) & U32(0xFF), bits & U32(0x7FFFFF)
    if stochastic:
        u = draw_u32(seed, offset + np.arange(bits.size, dtype=np.uint64))
        up = u.astype(np.float64) / 2.0**32 < man.astype(np.float64) / 2.0**23   # exact
    else:
        up = man >= U32(1 << 22)
    return (sign << U32(8)) | np.where(exp == 255, exp, exp + up.astype(U32))


def _ref_encode(bits, codec, **kw):
    return ref.encode(ref.from_bits(bits), codec, **kw)


def _check_equal(bits, got, want, what):
    bad = np.flatnonzero(got != want)
    if bad.size:
        rows = "\n  ".join(f"input {int(bits[i]):#010x}: reference {int(got[i]):#x}, "
                           f"expected {int(want[i]):#x}" for i in bad[:10])
        raise AssertionError(f"{what}: {bad.size} of {bits.size} differ; first:\n  {rows}")


def _edges_and_random(seed, n, chunk=1 << 21):
    """Edge patterns then ``n`` uniformly random patterns, in chunks."""
    yield EDGE_F32_BITS
    rng = np.random.default_rng(seed)
    for start in range(0, n, chunk):
        yield random_f32_bits(rng, min(chunk, n - start))


def _all_u32(chunk=1 << 24):
    for start in range(0, 1 << 32, chunk):
        yield np.arange(start, start + chunk, dtype=np.uint64).astype(U32)


# --------------------------------------------------------------------------
# Reference against the independent definitions
# --------------------------------------------------------------------------

@pytest.mark.parametrize("codec, independent", [("fp16", _fp16_numpy), ("bf16", _bf16_ml_dtypes)])
def test_reference_encode_random(codec, independent):
    for bits in _edges_and_random(0xF16 if codec == "fp16" else 0xBF16, 10_000_000):
        _check_equal(bits, _ref_encode(bits, codec), independent(bits), f"{codec} encode")


@pytest.mark.slow
@pytest.mark.parametrize("codec, independent", [("fp16", _fp16_numpy), ("bf16", _bf16_ml_dtypes)])
def test_reference_encode_exhaustive(codec, independent):
    for bits in _all_u32():
        _check_equal(bits, _ref_encode(bits, codec), independent(bits), f"{codec} encode")


@pytest.mark.parametrize("codec, widen", [
    ("fp16", lambda h: h.astype(np.uint16).view(np.float16).astype(np.float32)),
    ("bf16", lambda h: h.astype(np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)),
])
def test_reference_decode_all_codes(codec, widen):
    codes = np.arange(1 << 16, dtype=U32)
    _check_equal(codes, ref.to_bits(ref.decode(codes, codec)), ref.to_bits(widen(codes)),
                 f"{codec} decode")


def test_reference_sign():
    bits = np.concatenate(list(_edges_and_random(5, 1 << 16)))
    _check_equal(bits, _ref_encode(bits, "sign"), bits >> U32(31), "sign encode")
    for scale, aux in [(0x7FA00001, 0xFFC00123), (0x80000000, 0x00000000), (ONE_BITS, 0xBF800000)]:
        got = ref.to_bits(ref.decode(np.array([0, 1, 2, 3], dtype=U32), "sign",
                                     scale=ref.from_bits(U32(scale))[()],
                                     aux=ref.from_bits(U32(aux))[()]))
        _check_equal(np.arange(4, dtype=U32), got, np.array([scale, aux] * 2, dtype=U32),
                     "sign decode")


@pytest.mark.parametrize("stochastic", [False, True])
def test_reference_natural(stochastic):
    bits = np.concatenate(list(_edges_and_random(6, 1 << 20)))
    seed, offset = 0xC0FFEE, 0xFFF00000
    _check_equal(bits, _ref_encode(bits, "natural", stochastic=stochastic, seed=seed,
                                   offset=offset),
                 _natural_spec(bits, stochastic, seed, offset), "natural encode")
    codes = np.arange(512, dtype=U32)
    want = ((codes >> U32(8)) << U32(31)) | ((codes & U32(0xFF)) << U32(23))
    _check_equal(codes, ref.to_bits(ref.decode(codes, "natural")), want, "natural decode")


def test_reference_natural_stochastic_rate():
    # Mantissa m rounds up with probability m / 2**23: check it on 1.25 (m = 2**21).
    n = 1 << 16
    codes = _ref_encode(np.full(n, 0x3FA00000, dtype=U32), "natural", stochastic=True, seed=9)
    rate = np.mean(codes == 128)
    assert abs(rate - 0.25) < 5 * np.sqrt(0.25 * 0.75 / n)


# --------------------------------------------------------------------------
# Gateware against the reference
# --------------------------------------------------------------------------

ENCODERS = {"fp16": Fp16Encoder, "bf16": Bf16Encoder, "sign": SignEncoder,
            "natural": NaturalEncoder}
DECODERS = {"fp16": Fp16Decoder, "bf16": Bf16Decoder, "sign": SignDecoder,
            "natural": NaturalDecoder}
# fp16 on the fixed/qsgd datapath, as a bank with either builds it
UNITS = ([(c, u) for c, u in ENCODERS.items()] + [("fp16", Fp16LevelEncoder)]
         + [(c, u) for c, u in DECODERS.items()])
UNIT_IDS = [u.__name__ for _, u in UNITS]
CODE_BITS = {"fp16": 16, "bf16": 16, "sign": 1, "natural": 9}

# scale/aux pool: ordinary values, ±0, ±inf, NaNs with payloads, subnormals.
_PARAM_BITS = np.array([ONE_BITS, 0xBF800000, 0x00000000, 0x80000000, 0x7F800000, 0xFF800000,
                        0x7FC00000, 0xFFC00001, 0x7F800001, 0xFFA5A5A5, 0x00000001, 0x3A83126F],
                       dtype=U32)


def _random_params(rng, n_frames):
    def pick():
        if rng.random() < 0.6:
            return int(rng.choice(_PARAM_BITS))
        return int(random_f32_bits(rng, 1)[0])
    return [{"stochastic": int(rng.integers(0, 2)), "scale": pick(), "aux": pick(),
             "seed": int(rng.integers(0, 2**32))} for _ in range(n_frames)]


def _mixed_f32(rng, n):
    """Edge values, random bit patterns and gradient-like values, interleaved."""
    pools = [rng.choice(EDGE_F32_BITS, n), random_f32_bits(rng, n),
             gradient_like(rng, n).view(U32)]
    return np.choose(rng.integers(0, 3, n), pools).astype(U32)


def _rounding_sweep():
    """Every exponent and sign with mantissas at each rounding position.

    ``2**k``, ``2**k - 1``, ``2**k + 1`` and ``3·2**k`` put a tie, neighbours of
    it and an odd tie at every shift the fp16 subnormal path can take (and at
    the bf16 and natural rounding points); NaN payloads cover every
    fp16-visible payload, including the ones that shift out entirely.
    """
    mans = {0, 1, 0x7FFFFF, 0x400000, 0x3FFFFF, 0x001000, 0x003000, 0x001001, 0x000FFF}
    for k in range(23):
        mans |= {1 << k, (1 << k) - 1, (3 << k) & 0x7FFFFF, ((1 << k) + 1) & 0x7FFFFF}
    mans = np.array(sorted(mans), dtype=U32)
    exps = np.arange(256, dtype=U32)
    grid = (exps[:, None] << U32(23)) | mans[None, :]
    nans = U32(0x7F800000) | (np.arange(1, 1 << 10, dtype=U32) << U32(13))
    low = U32(0x7F800000) | np.arange(1, 1 << 13, 64, dtype=U32)   # payload shifted out
    pos = np.concatenate([grid.ravel(), nans, nans | U32(0x1FFF), low])
    return np.concatenate([pos, pos | U32(0x80000000)])


def _cut(values, rng, max_len=64):
    """Cut a flat array into frames of random lengths 1 … max_len."""
    frames, start = [], 0
    while start < len(values):
        n = int(rng.integers(1, max_len + 1))
        frames.append(values[start:start + n])
        start += n
    return frames


def _inputs(codec, unit, rng):
    """Frames for the randomised run: lengths 1 … 33, then edges and mixed data."""
    if unit in (*ENCODERS.values(), Fp16LevelEncoder):
        frames = [_mixed_f32(rng, n) for n in range(1, 34)]
        frames.append(EDGE_F32_BITS)
        frames += _cut(_mixed_f32(rng, 2000), rng)
    else:
        width = CODE_BITS[codec]
        # Codes the encoder makes from edge and mixed values, plus random codes.
        made = _ref_encode(np.concatenate([EDGE_F32_BITS, _mixed_f32(rng, 1000)]), codec)
        frames = [rng.integers(0, 2**width, n, dtype=np.uint64).astype(U32)
                  for n in range(1, 34)]
        frames += _cut(made, rng)
    return frames


@pytest.mark.parametrize("idle, backpressure", [(0.3, 0.3), (0.1, 0.7)])
@pytest.mark.parametrize("codec, unit", UNITS, ids=UNIT_IDS)
def test_unit_random_stalls(codec, unit, idle, backpressure):
    rng = np.random.default_rng(zlib.crc32(unit.__name__.encode()))
    frames = _inputs(codec, unit, rng)
    check_unit(unit, codec, frames, _random_params(rng, len(frames)),
               idle=idle, backpressure=backpressure, seed=1)


@pytest.mark.parametrize("codec, unit", UNITS, ids=UNIT_IDS)
def test_unit_full_rate(codec, unit):
    rng = np.random.default_rng(7)
    frames = _inputs(codec, unit, rng)[-8:]
    run, dut, n_beats = check_unit(unit, codec, frames, _random_params(rng, len(frames)),
                                   seed=2)
    assert_full_rate(run, dut, n_beats)


@pytest.mark.parametrize("codec, unit, stochastic", [
    ("fp16", Fp16Encoder, 0), ("fp16", Fp16LevelEncoder, 1), ("bf16", Bf16Encoder, 0),
    ("natural", NaturalEncoder, 0), ("natural", NaturalEncoder, 1),
], ids=["Fp16Encoder", "Fp16LevelEncoder", "Bf16Encoder", "NaturalEncoder-det",
        "NaturalEncoder-stoch"])
def test_encoder_rounding_sweep(codec, unit, stochastic):
    rng = np.random.default_rng(16 + stochastic)
    frames = _cut(_rounding_sweep(), rng, max_len=363)
    params = [dict(p, stochastic=stochastic) for p in _random_params(rng, len(frames))]
    check_unit(unit, codec, frames, params, idle=0.1, backpressure=0.1, seed=3)


@pytest.mark.parametrize("codec, unit", [("fp16", Fp16Decoder), ("bf16", Bf16Decoder),
                                         ("natural", NaturalDecoder)],
                         ids=["Fp16Decoder", "Bf16Decoder", "NaturalDecoder"])
def test_decoder_all_codes(codec, unit):
    rng = np.random.default_rng(CODE_BITS[codec])
    codes = rng.permutation(1 << CODE_BITS[codec]).astype(U32)
    frames = _cut(codes, rng, max_len=363)
    check_unit(unit, codec, frames, _random_params(rng, len(frames)),
               idle=0.3, backpressure=0.3, seed=4)


def test_sign_decoder_params():
    # Both codes against every pairing of special scale/aux bit patterns.
    rng = np.random.default_rng(55)
    pairs = [(int(s), int(a)) for s in _PARAM_BITS for a in _PARAM_BITS]
    frames = [rng.integers(0, 2, int(rng.integers(1, 40))).astype(U32) for _ in pairs]
    params = [{"scale": s, "aux": a, "seed": 0, "stochastic": 0} for s, a in pairs]
    check_unit(SignDecoder, "sign", frames, params, idle=0.3, backpressure=0.3, seed=5)


@pytest.mark.parametrize("stochastic", [0, 1])
def test_natural_encoder_modes(stochastic):
    # Frames that straddle beats at arbitrary offsets (the draws follow the tensor
    # index, not the lane), including offsets next to 2**32.
    rng = np.random.default_rng(60 + stochastic)
    frames = [_mixed_f32(rng, int(rng.integers(1, 80))) for _ in range(12)]
    offsets = [int(rng.integers(0, 2**32 - 80)) for _ in frames]
    offsets[0] = 2**32 - len(frames[0])
    offsets[1] = 0
    params = [dict(p, stochastic=stochastic) for p in _random_params(rng, len(frames))]
    check_unit(NaturalEncoder, "natural", frames, params, offsets=offsets,
               idle=0.3, backpressure=0.3, seed=6)


# each unit alone (the default suite converts every unit inside the all-codec lanes and
# plugin: tests/sim/test_compiled.py, tests/cosim)
@pytest.mark.slow
@pytest.mark.parametrize("codec, unit", UNITS, ids=UNIT_IDS)
def test_unit_converts_to_verilog(codec, unit):
    text = verilog.convert(unit(), name=unit.__name__.lower())
    assert "module" in text
