"""Codec 6, ``natural``: sign and a power-of-two exponent (natural compression).

Code = ``sign << 8 | e'`` (9 bits), where ``e'`` is the biased fp32 exponent
``e`` rounded up by one when the 23-bit mantissa ``m`` says so: ``m >= 2**22``
(deterministic), or ``u < m * 2**9`` with ``u = draw_u32(seed, j)`` for the
element's tensor index ``j`` (stochastic, i.e. ``u / 2**32 < m / 2**23``).
``e = 255`` (inf, NaN) stays 255; ``e = 254`` may round up to 255 (±inf).
Decoding gives ``sign << 31 | e' << 23``: ±0 for ``e' = 0``, ±inf for 255.
"""

from amaranth import Cat, Const, Mux, Signal

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT

from .counter_rng import CounterRng
from .unit import DecoderUnit, EncoderUnit

__all__ = ["NaturalEncoder", "NaturalDecoder"]


class NaturalEncoder(EncoderUnit):
    """``natural`` encoder: code = sign and the rounded biased exponent.

    Latency ``CounterRng.LATENCY + 1`` cycles in both modes (the elements wait
    for the random draws, then one cycle compares and rounds); one beat per
    cycle; holds under backpressure, the generator included
    (see :class:`~squeezenic_hw.gateware.codecs.unit.PipelinedBeatUnit`).
    """
    LATENCY = CounterRng.LATENCY + 1
    CODE_WIDTH = 9

    @classmethod
    def datapath(cls, m, stager, payload):
        # The generator registers on the pipeline's enable, so its draws stay
        # lined up with the delayed elements through stalls and bubbles.
        m.submodules.rng = rng = CounterRng()
        m.d.comb += [
            rng.seed.eq(payload.params.seed),
            rng.offset.eq(payload.offset),
            rng.en.eq(stager.enable),
        ]
        stochastic = stager.delay(payload.params.stochastic, CounterRng.LATENCY,
                                  name="stochastic")
        codes = []
        for e in range(ELEMENTS_PER_BEAT):
            x = stager.delay(payload.elements[e], CounterRng.LATENCY, name=f"x{e}")
            sign, exp, man = x[31], x[23:31], x[0:23]
            up = Mux(stochastic, rng.u[e] < Cat(Const(0, 9), man), man[22])
            # exp <= 254 here, so exp + up fits 8 bits (254 + 1 = 255 is ±inf).
            rounded = Signal(8, name=f"rounded{e}")
            m.d.comb += rounded.eq(Mux(exp == 255, 255, exp + up))
            codes.append(stager.reg(Cat(rounded, sign), name=f"code{e}"))
        return codes


class NaturalDecoder(DecoderUnit):
    """``natural`` decoder: element = ``sign << 31 | e' << 23``.

    Latency 1 cycle; one beat per cycle; holds under backpressure.
    """
    LATENCY = 1
    CODE_WIDTH = 9

    @classmethod
    def datapath(cls, m, stager, payload):
        return [stager.reg(Cat(Const(0, 23), payload.codes[e][0:8], payload.codes[e][8]),
                           name=f"element{e}")
                for e in range(ELEMENTS_PER_BEAT)]
