"""``fixed`` and ``qsgd`` encoder/decoder units against the numpy reference, bit for bit.

Each unit simulates at ~150 cycles/s (16 fp32 multipliers and the random
generator per beat), so every parameter value of a codec shares one
simulation: one frame per parameter, random idle and backpressure throughout.
"""

import numpy as np
import pytest
from amaranth.back import verilog

from squeezenic_hw.gateware.codecs.fixed import FixedDecoder, FixedEncoder
from squeezenic_hw.gateware.codecs.qsgd import QsgdDecoder, QsgdEncoder
from squeezenic_hw.reference import codecs as ref
from squeezenic_hw.sim.vectors import EDGE_F32_BITS, gradient_like, random_f32_bits

from support.codec_unit_harness import assert_full_rate, check_unit

ENCODERS = {"fixed": FixedEncoder, "qsgd": QsgdEncoder}
DECODERS = {"fixed": FixedDecoder, "qsgd": QsgdDecoder}
PARAMS = range(2, 17)


def _bits(x):
    return ref.to_bits(np.asarray(x, dtype=np.float32))


# Scales (fp32 bits) chosen per frame: ordinary, powers of two (exact ties),
# tiny (subnormal products), huge (overflow to inf), and the degenerate ones.
SCALES = [0x40400000, 0x3F800000, 0x41000000, 0x02000000, 0x7E000000, 0x00000003,
          0x7F800000, 0x00000000, 0xC0000000, 0x7FC00001, 0x3DCCCCCD, 0x4B000000,
          0x3F000000, 0x80000000, 0x42FE0000]


def _encoder_frames(rng, scale_bits, length):
    """Edge values, rounding ties at this scale, random patterns, gradients."""
    scale = ref.from_bits([scale_bits])[0]
    with np.errstate(all="ignore"):
        ties = np.float32([0.5, 1.5, 2.5, 3.5, 4.5, 126.5, 127.5, 32766.5, 0.49999997,
                           0.50000006]) / scale
    parts = [EDGE_F32_BITS, _bits(ties), _bits(-ties), random_f32_bits(rng, 24),
             _bits(gradient_like(rng, 24) * np.float32(200))]
    values = np.concatenate(parts)
    rng.shuffle(values)
    return values[:length]


@pytest.mark.parametrize("stochastic", [0, 1])
@pytest.mark.parametrize("codec", ["fixed", "qsgd"])
def test_encoder_every_param_random_stalls(codec, stochastic):
    rng = np.random.default_rng([3, stochastic, codec == "qsgd"])
    frames, params = [], []
    for k, q in enumerate(PARAMS):
        # lengths 1…~170 elements: partial last beats of every fill
        length = [1, 15, 16, 17, 33, 47, 64, 79, 100, 113, 128, 150, 170, 2, 31][k]
        frames.append(_encoder_frames(rng, SCALES[k], length))
        params.append(dict(param=q, stochastic=stochastic, scale=SCALES[k],
                           seed=int(rng.integers(0, 2**32))))
    check_unit(ENCODERS[codec], codec, frames, params, idle=0.25, backpressure=0.25,
               seed=11 + stochastic)


@pytest.mark.parametrize("codec", ["fixed", "qsgd"])
def test_encoder_stochastic_offsets_near_wrap(codec):
    # Tensor indices wrap modulo 2^32 inside a beat, as the reference's do.
    rng = np.random.default_rng(7)
    frames = [_bits(gradient_like(rng, 40) * np.float32(1000)) for _ in range(3)]
    params = [dict(param=p, stochastic=1, scale=0x40A00000, seed=s)
              for p, s in [(2, 0), (8, 0xFFFFFFFF), (16, 12345)]]
    check_unit(ENCODERS[codec], codec, frames, params, offsets=[2**32 - 7, 2**32 - 40, 0],
               idle=0.3, backpressure=0.3, seed=4)


AUX = [0x3DCCCCCD, 0x7F800000, 0xFFC00001, 0x80000000, 0x00000001, 0x7F7FFFFF,
       0x3F800000, 0xFF800000, 0x00800000, 0x7FA00000, 0x38000000, 0xBF800000,
       0x00000000, 0x33800001, 0x42C80000]


@pytest.mark.parametrize("codec", ["fixed", "qsgd"])
def test_decoder_every_param_random_stalls(codec):
    rng = np.random.default_rng([5, codec == "qsgd"])
    frames, params = [], []
    for k, q in enumerate(PARAMS):
        special = [0, 1, (1 << q) - 1, 1 << (q - 1), (1 << (q - 1)) - 1, (1 << (q - 1)) + 1]
        codes = np.concatenate([special, rng.integers(0, 1 << q, 20),
                                rng.integers(0, 1 << 16, 6)])  # bits above q ignored
        rng.shuffle(codes)
        frames.append(codes[: 1 + (k * 7) % 32])
        params.append(dict(param=q, aux=AUX[k]))
    check_unit(DECODERS[codec], codec, frames, params, idle=0.25, backpressure=0.25, seed=13)


@pytest.mark.parametrize("codec", ["fixed", "qsgd"])
@pytest.mark.parametrize("encoder", [True, False])
def test_full_rate_and_documented_latency(codec, encoder):
    rng = np.random.default_rng(17)
    if encoder:
        frames = [random_f32_bits(rng, 16 * 40)]
        params = dict(param=6, stochastic=1, scale=0x41200000, seed=99)
        unit = ENCODERS[codec]
    else:
        frames = [rng.integers(0, 1 << 16, 16 * 40)]
        params = dict(param=6, aux=0x3C23D70A)
        unit = DECODERS[codec]
    run, dut, n_beats = check_unit(unit, codec, frames, params)
    assert_full_rate(run, dut, n_beats)


# each unit alone (the default suite converts every unit inside the all-codec lanes and
# plugin: tests/sim/test_compiled.py, tests/cosim)
@pytest.mark.slow
@pytest.mark.parametrize("unit", [FixedEncoder, FixedDecoder, QsgdEncoder, QsgdDecoder])
def test_converts_to_verilog(unit):
    assert "module" in verilog.convert(unit(), name=unit.__name__.lower())
