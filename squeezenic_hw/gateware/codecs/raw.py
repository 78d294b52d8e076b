"""Codec 0, ``raw``: fp32 bits unchanged."""

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT

from .unit import DecoderUnit, EncoderUnit

__all__ = ["RawEncoder", "RawDecoder"]


class RawEncoder(EncoderUnit):
    """``raw`` encoder: code = the element's 32 bits.

    Latency 1 cycle; one beat per cycle; holds under backpressure
    (see :class:`~squeezenic_hw.gateware.codecs.unit.PipelinedBeatUnit`).
    """
    WAITS_AT_INPUT = True
    LATENCY = 1
    CODE_WIDTH = 32

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        return [stager.reg(payload.elements[e]) for e in range(ELEMENTS_PER_BEAT)]


class RawDecoder(DecoderUnit):
    """``raw`` decoder: element = the code's 32 bits.

    Latency 1 cycle; one beat per cycle; holds under backpressure.
    """
    WAITS_AT_INPUT = True
    LATENCY = 1
    CODE_WIDTH = 32

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        return [stager.reg(payload.codes[e]) for e in range(ELEMENTS_PER_BEAT)]
