"""Codec 5, ``sign``: one sign bit per element.

The code is bit 31 of x (so −0.0 and NaNs with the sign bit set give 1).
Decoding copies the 32 bits of the frame's ``scale`` for code 0 and of ``aux``
for code 1 (bit copies: NaN payloads and signed zeros are kept).
"""

from amaranth import Mux

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT

from .unit import DecoderUnit, EncoderUnit

__all__ = ["SignEncoder", "SignDecoder"]


class SignEncoder(EncoderUnit):
    """``sign`` encoder: code = the element's sign bit.

    Latency 1 cycle; one beat per cycle; holds under backpressure
    (see :class:`~squeezenic_hw.gateware.codecs.unit.PipelinedBeatUnit`).
    """
    LATENCY = 1
    CODE_WIDTH = 1

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        return [stager.reg(payload.elements[e][31], name=f"code{e}")
                for e in range(ELEMENTS_PER_BEAT)]


class SignDecoder(DecoderUnit):
    """``sign`` decoder: element = ``scale`` bits for code 0, ``aux`` bits for code 1.

    Latency 1 cycle; one beat per cycle; holds under backpressure.
    """
    WAITS_AT_INPUT = True
    LATENCY = 1
    CODE_WIDTH = 1

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        scale, aux = payload.params.scale, payload.params.aux
        return [stager.reg(Mux(payload.codes[e][0], aux, scale), name=f"element{e}")
                for e in range(ELEMENTS_PER_BEAT)]

    @classmethod
    def datapath_parts(cls, m, stager, payload):
        """In a bank that selects by OR (:class:`~.bank.DecoderBank`): per element, the
        ``(value, select)`` pairs whose OR is the element, registers one cycle after the
        input: ``aux`` where the code is 1, ``scale`` where it is 0. The bank clears each
        in its own register, so the element's 32-bit multiplexer is the bank's OR."""
        aux = stager.reg(payload.params.aux, name="sign_aux")
        scale = stager.reg(payload.params.scale, name="sign_scale")
        bits = [stager.reg(payload.codes[e][0], name=f"sign_code{e}")
                for e in range(ELEMENTS_PER_BEAT)]
        return [[(aux, bit), (scale, ~bit)] for bit in bits]
