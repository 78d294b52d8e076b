"""Codec 4, ``qsgd``: sign-magnitude levels of b = 2…16 bits (QSGD, TernGrad)."""

from .levels import (
    DECODE_LATENCY,
    ELEMENTS_HELD,
    ENCODE_LATENCY,
    shared_level_codes,
    shared_scaled_values,
)
from .unit import DecoderUnit, EncoderUnit

__all__ = ["QsgdEncoder", "QsgdDecoder"]


class QsgdEncoder(EncoderUnit):
    """``qsgd`` encoder: level ``L = min(R(fl32(|x|·scale)), 2**(b-1) - 1)``; the
    code is ``L`` with bit ``b-1`` = sign of x when ``L > 0``.

    Latency: ``ENCODE_LATENCY + 1`` = 14 cycles in both rounding modes (as
    :class:`~squeezenic_hw.gateware.codecs.fixed.FixedEncoder`). Throughput:
    one beat per cycle. Backpressure: the pipeline holds.
    """
    LATENCY = ENCODE_LATENCY + 1
    HOLDS_INPUT = ELEMENTS_HELD
    CODE_WIDTH = 16

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        return shared_level_codes(m, stager, payload, shared, "qsgd")


class QsgdDecoder(DecoderUnit):
    """``qsgd`` decoder: ``±fl32(L · aux)``, the sign from bit ``b-1``.

    Latency: ``DECODE_LATENCY`` = 9 cycles (as
    :class:`~squeezenic_hw.gateware.codecs.fixed.FixedDecoder`). Throughput:
    one beat per cycle. Backpressure: the pipeline holds.
    """
    LATENCY = DECODE_LATENCY
    CODE_WIDTH = 16

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        return shared_scaled_values(m, stager, payload, shared, qsgd=True)
