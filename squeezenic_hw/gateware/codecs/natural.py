"""Codec 6, ``natural``: sign and a power-of-two exponent (natural compression).

Code = ``sign << 8 | e'`` (9 bits), where ``e'`` is the biased fp32 exponent
``e`` rounded up by one when the 23-bit mantissa ``m`` says so: ``m >= 2**22``
(deterministic), or ``u < m * 2**9`` with ``u = draw_u32(seed, j)`` for the
element's tensor index ``j`` (stochastic, i.e. ``u / 2**32 < m / 2**23``).
``e = 255`` (inf, NaN) stays 255; ``e = 254`` may round up to 255 (±inf).
Decoding gives ``sign << 31 | e' << 23``: ±0 for ``e' = 0``, ±inf for 255.
"""

from amaranth import Cat, Const, Mux

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT
from squeezenic_hw.gateware.common.stream import lutram_delay_each

from .counter_rng import CounterRng, beat_draws
from .unit import DecoderUnit, EncoderUnit

__all__ = ["NaturalEncoder", "NaturalDecoder"]


class NaturalEncoder(EncoderUnit):
    """``natural`` encoder: code = sign and the rounded biased exponent.

    Latency ``CounterRng.LATENCY + 1`` = 12 cycles in both modes (the elements
    wait for the random draws, then one cycle compares and rounds); one beat
    per cycle; holds under backpressure, the generator included
    (see :class:`~squeezenic_hw.gateware.codecs.unit.PipelinedBeatUnit`).
    """
    LATENCY = CounterRng.LATENCY + 1
    CODE_WIDTH = 9
    # the elements as the draws come: from a bank's delay line, when it has one
    INPUT_TAPS = (CounterRng.LATENCY,)

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        # the bank's one generator serves every stochastic codec
        draws = beat_draws(m, stager, payload, shared)
        stochastic = stager.delay(payload.params.stochastic, CounterRng.LATENCY,
                                  name="stochastic")
        line = shared.find("input_line") if shared is not None else None
        # Both candidate exponents are ready before the draw: exp + 1 (exp <= 254 here,
        # and 254 + 1 = 255 is ±inf) and exp, with 255 (inf, NaN) kept. The beat's bumped
        # exponents wait for the draws in distributed RAM.
        bumped = lutram_delay_each(
            m, stager, [Mux(x[23:31] == 255, 255, x[23:31] + 1)[:8] for x in payload.elements],
            CounterRng.LATENCY, name="bumped_line")
        codes = []
        for e in range(ELEMENTS_PER_BEAT):
            x = payload.elements[e]
            sign, exp, man = x[31], x[23:31], x[0:23]
            if line is not None:
                late = line[CounterRng.LATENCY].elements[e]
                kept, man = Cat(late[23:31], late[31]), late[:23]
            else:
                kept = stager.delay(Cat(exp, sign), CounterRng.LATENCY, name=f"kept{e}")
                man = stager.delay(man, CounterRng.LATENCY, name=f"man{e}")
            # u < m * 2**9 compares u's top 23 bits with m (the low 9 bits of m * 2**9
            # are zero)
            up = Mux(stochastic, draws[e][9:] < man, man[22])
            code = Cat(Mux(up, bumped[e], kept[:8]), kept[8])
            codes.append(stager.reg(code, name=f"code{e}"))
        return codes


class NaturalDecoder(DecoderUnit):
    """``natural`` decoder: element = ``sign << 31 | e' << 23``.

    Latency 1 cycle; one beat per cycle; holds under backpressure.
    """
    WAITS_AT_INPUT = True
    LATENCY = 1
    CODE_WIDTH = 9

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        return [stager.reg(Cat(Const(0, 23), payload.codes[e][0:8], payload.codes[e][8]),
                           name=f"element{e}")
                for e in range(ELEMENTS_PER_BEAT)]
