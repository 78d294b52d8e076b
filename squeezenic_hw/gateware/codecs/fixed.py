"""Codec 3, ``fixed``: symmetric two's complement integers of q = 2…16 bits."""

from amaranth import Const, Mux

from .levels import (
    DECODE_LATENCY,
    ENCODE_LATENCY,
    _clamped_param,
    build_levels,
    build_scaled_values,
    top_bit,
)
from .unit import DecoderUnit, EncoderUnit

__all__ = ["FixedEncoder", "FixedDecoder"]


def _mask(param):
    return ((Const(1, 17) << _clamped_param(param)) - 1)[:16]


class FixedEncoder(EncoderUnit):
    """``fixed`` encoder: ``c = ±min(R(fl32(|x|·scale)), 2**(q-1) - 1)``, q bits.

    ``q`` is the frame's codec parameter; ``R`` rounds to nearest even, or
    stochastically with the section-5 draws when the frame's ``stochastic``
    flag is set. Codes are ``c mod 2**q`` in the low bits.

    Latency: ``ENCODE_LATENCY + 1`` = 11 cycles (4 waiting for the random draws,
    4 in the multiplier, 2 to decompose and round, 1 to form the code), in
    both rounding modes. Throughput: one beat per cycle. Backpressure: the
    whole pipeline holds (see
    :class:`~squeezenic_hw.gateware.codecs.unit.PipelinedBeatUnit`).
    """
    LATENCY = ENCODE_LATENCY + 1
    CODE_WIDTH = 16

    @classmethod
    def datapath(cls, m, stager, payload):
        codes = []
        for e, (level, negative, param) in enumerate(build_levels(m, stager, payload, "fx")):
            code = Mux(negative, -level, level)[:16] & _mask(param)
            codes.append(stager.reg(code, name=f"code{e}"))
        return codes


class FixedDecoder(DecoderUnit):
    """``fixed`` decoder: ``fl32(c · aux)``, c the sign-extended q-bit code.

    Latency: ``DECODE_LATENCY`` = 6 cycles (int → fp32, 4 in the multiplier, 1
    out). Throughput: one beat per cycle. Backpressure: the pipeline holds.
    """
    LATENCY = DECODE_LATENCY
    CODE_WIDTH = 16

    @classmethod
    def datapath(cls, m, stager, payload):
        def magnitude_sign(code, param):
            q = _clamped_param(param)
            code = code & _mask(param)
            negative = (code >> top_bit(param))[0]
            value = Mux(negative, ((Const(1, 17) << q) - code)[:16], code)
            return value, negative, Const(0)
        return build_scaled_values(m, stager, payload, "fx", magnitude_sign)
