"""Codec 3, ``fixed``: symmetric two's complement integers of q = 2…16 bits."""

from .levels import (
    DECODE_LATENCY,
    ELEMENTS_HELD,
    ENCODE_LATENCY,
    shared_level_codes,
    shared_scaled_values,
)
from .unit import DecoderUnit, EncoderUnit

__all__ = ["FixedEncoder", "FixedDecoder"]


class FixedEncoder(EncoderUnit):
    """``fixed`` encoder: ``c = ±min(R(fl32(|x|·scale)), 2**(q-1) - 1)``, q bits.

    ``q`` is the frame's codec parameter; ``R`` rounds to nearest even, or
    stochastically with the section-5 draws when the frame's ``stochastic``
    flag is set. Codes are ``c mod 2**q`` in the low bits.

    Latency: ``ENCODE_LATENCY + 1`` = 14 cycles (2 waiting for the random
    draws, 7 in the multiplier, 2 to decompose the product, 2 to round and
    saturate, 1 to form the code), in both rounding modes. In a bank with
    ``qsgd`` the two share everything but the code's form (one register takes
    the beat's codec's code). Throughput: one beat per cycle. Backpressure: the
    whole pipeline holds (see
    :class:`~squeezenic_hw.gateware.codecs.unit.PipelinedBeatUnit`).
    """
    LATENCY = ENCODE_LATENCY + 1
    HOLDS_INPUT = ELEMENTS_HELD
    CODE_WIDTH = 16

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        return shared_level_codes(m, stager, payload, shared, "fixed")


class FixedDecoder(DecoderUnit):
    """``fixed`` decoder: ``fl32(c · aux)``, c the sign-extended q-bit code.

    Latency: ``DECODE_LATENCY`` = 9 cycles (1 for the code and the parameter's
    masks, 1 for the code's sign, 1 for the magnitude, 6 in
    :class:`~.integer_product.IntegerProduct`). Throughput: one
    beat per cycle. Backpressure: the pipeline holds.
    """
    LATENCY = DECODE_LATENCY
    CODE_WIDTH = 16

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        return shared_scaled_values(m, stager, payload, shared, qsgd=False)
