"""Codec 2, ``bf16``: bfloat16, as the ``ml_dtypes`` package converts.

Encoding rounds the upper 16 bits to nearest even (overflow rounds to ±inf by
the carry); any NaN becomes the quiet NaN 0x7FC0 with its sign. Decoding is
``code << 16``.
"""

from amaranth import Cat, Const, Mux, Signal

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT

from .unit import DecoderUnit, EncoderUnit

__all__ = ["Bf16Encoder", "Bf16Decoder"]


class Bf16Encoder(EncoderUnit):
    """``bf16`` encoder: code = round-to-nearest-even of the upper half.

    Latency 2 cycles (the increment's decision, then the add, so that neither sits
    behind the other in one cycle); one beat per cycle; holds under backpressure
    (see :class:`~squeezenic_hw.gateware.codecs.unit.PipelinedBeatUnit`).
    """
    WAITS_AT_INPUT = True
    LATENCY = 2
    CODE_WIDTH = 16

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        codes = []
        for e in range(ELEMENTS_PER_BEAT):
            x = payload.elements[e]
            is_nan = (x[23:31] == 0xFF) & (x[0:23] != 0)
            # Only the upper half needs the adder: the low half only decides
            # the increment (above half, or exactly half with an odd result).
            upper, lower = x[16:32], x[0:16]
            round_up = (lower > 0x8000) | ((lower == 0x8000) & upper[0])
            upper = stager.reg(upper, name=f"upper{e}_d1")
            round_up = stager.reg(round_up, name=f"round_up{e}_d1")
            is_nan = stager.reg(is_nan, name=f"is_nan{e}_d1")
            # Non-NaN inputs never carry out of bit 15: inf has a zero mantissa.
            rounded = Signal(16, name=f"rounded{e}")
            m.d.comb += rounded.eq(upper + round_up)
            code = Mux(is_nan, Cat(Const(0x7FC0, 15), upper[15]), rounded)
            codes.append(stager.reg(code, name=f"code{e}"))
        return codes


class Bf16Decoder(DecoderUnit):
    """``bf16`` decoder: element = ``code << 16``.

    Latency 1 cycle; one beat per cycle; holds under backpressure.
    """
    WAITS_AT_INPUT = True
    LATENCY = 1
    CODE_WIDTH = 16

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        return [stager.reg(Cat(Const(0, 16), payload.codes[e]), name=f"element{e}")
                for e in range(ELEMENTS_PER_BEAT)]
