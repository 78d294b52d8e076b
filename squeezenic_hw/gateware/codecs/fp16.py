"""Codec 1, ``fp16``: IEEE binary16, as numpy's ``astype(np.float16)`` and back.

Encoding rounds to nearest even, with fp16 subnormals, overflow to ±inf, and
NaNs as numpy's software conversion does: the top 10 payload bits are kept
(no quieting), and a payload that would shift out entirely becomes 1 so the
result stays a NaN. Decoding widens exactly (fp16 subnormals become fp32
normals, NaN payloads are kept).
"""

from amaranth import Cat, Const, Mux, Signal

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT
from squeezenic_hw.gateware.common.lut_tree import kept, or_tree

from .unit import DecoderUnit, EncoderUnit

__all__ = ["Fp16Encoder", "Fp16Decoder", "SUBNORMAL_SCALE", "fp16_normal_stages"]

#: fp32 bits of ``2**24``: ``|x| · 2**24`` rounded to an integer (nearest even) is the
#: fp16 code of an ``x`` below the fp16 normals (``|x| < 2**-14``), 1024 included (the
#: least normal, where the rounding carries into the exponent).
SUBNORMAL_SCALE = 0x4B800000


def fp16_normal_stages(m, stager, x, name):
    """The fp16 code of ``x`` (an fp32 element) where it is not an fp16 subnormal: its
    low 15 bits and ``subnormal`` (``|x| < 2**-14``: the low 15 bits are then
    undefined), registered after two enabled cycles of ``stager``.

    Normals (biased exponent 113…142) keep their top 10 mantissa bits, the exponent
    rebiased by -112 (``exp + 16 mod 32``: bit 4 flipped, no adder), and round to
    nearest even with an increment that carries into the exponent (and up to inf);
    beyond the range, inf; NaN as :class:`Fp16Encoder`."""
    exp, man = x[23:31], x[0:23]
    mag = Cat(man[13:23], exp[0:4], ~exp[4])
    up = man[12] & ((man[:12] != 0) | man[13])
    nan_payload = man[13:23]
    special_code = Mux((exp == 255) & (man != 0),
                       Cat(Mux(nan_payload == 0, 1, nan_payload), Const(0x1F, 5)),
                       Const(0x7C00, 15))
    mag1 = stager.reg(mag, name=f"{name}_mag")
    up1 = stager.reg(up, name=f"{name}_up")
    special1 = stager.reg(exp >= 143, name=f"{name}_special")
    special_code1 = stager.reg(special_code, name=f"{name}_special_code")
    subnormal1 = stager.reg(exp < 113, name=f"{name}_subnormal")
    code = stager.reg(Mux(special1, special_code1, (mag1 + up1)[:15]), name=f"{name}_code")
    return code, stager.reg(subnormal1, name=f"{name}_subnormal_q")


class Fp16Encoder(EncoderUnit):
    """``fp16`` encoder: code = bits of ``x.astype(np.float16)``.

    Latency 3 cycles (the shift amount, sticky mask and special cases; the
    shift, guard, sticky and round decision; the rounding increment); one
    beat per cycle; holds under backpressure
    (see :class:`~squeezenic_hw.gateware.codecs.unit.PipelinedBeatUnit`).
    """
    WAITS_AT_INPUT = True
    LATENCY = 3
    CODE_WIDTH = 16

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        codes = []
        for e in range(ELEMENTS_PER_BEAT):
            x = payload.elements[e]
            sign, exp, man = x[31], x[23:31], x[0:23]
            # The implicit bit is set even for fp32 subnormals: they shift out
            # entirely (shift 25), so it never reaches the result.
            sig = Cat(man, Const(1, 1))

            # Right shift that leaves the fp16 significand in the low 11 bits:
            # 13 for fp16 normals (exp >= 113), one more per step below, and
            # 25 (everything below half the smallest subnormal) from exp 101 down.
            sh = Signal(range(26), name=f"sh{e}")
            with m.If(exp >= 113):
                m.d.comb += sh.eq(13)
            with m.Elif(exp <= 101):
                m.d.comb += sh.eq(25)
            with m.Else():
                m.d.comb += sh.eq(126 - exp)
            # The bits under the guard bit (sig bits below sh - 1), as compares on exp:
            # k < sh - 1 is k < 12 for normals, exp < 125 - k below.
            below = Cat(*((k < 12) | (exp < 125 - k) for k in range(24)))
            # Exponent and mantissa fields without the increment: the carry of
            # the increment ripples into the exponent (and up to inf) by itself.
            exp_field = Mux(exp >= 113, exp - 112, 0)[0:5]

            # inf, NaN and exponents beyond fp16's range bypass the rounding.
            nan_payload = man[13:23]
            special = (exp == 255) | (exp >= 143)
            special_code = Signal(15, name=f"special{e}")
            with m.If((exp == 255) & (man != 0)):
                m.d.comb += special_code.eq(
                    Cat(Mux(nan_payload == 0, 1, nan_payload), Const(0x1F, 5)))
            with m.Else():
                m.d.comb += special_code.eq(0x7C00)

            # stage 1 registers
            sig = stager.reg(sig, name=f"sig{e}_d1")
            sh_1 = stager.reg(sh, name=f"sh{e}_d1")
            sh_m1 = stager.reg((sh - 1)[:5], name=f"sh_m1_{e}_d1")  # unsigned shift
            below = stager.reg(below, name=f"below{e}_d1")
            exp_field = stager.reg(exp_field, name=f"exp_field{e}_d1")
            special = stager.reg(special, name=f"special{e}_d1")
            special_code = stager.reg(special_code, name=f"special_code{e}_d1")
            sign = stager.reg(sign, name=f"sign{e}_d1")

            # stage 2: shift, guard, sticky, round decision
            q = Signal(11, name=f"q{e}")
            m.d.comb += q.eq(sig >> sh_1)
            guard = (sig >> sh_m1)[0]
            sticky = (sig & below).any()
            round_up = stager.reg(guard & (sticky | q[0]), name=f"round_up{e}_d2")
            mag = stager.reg(Cat(q[0:10], exp_field), name=f"mag{e}_d2")
            special = stager.reg(special, name=f"special{e}_d2")
            special_code = stager.reg(special_code, name=f"special_code{e}_d2")
            sign = stager.reg(sign, name=f"sign{e}_d2")

            # stage 3: the increment
            rounded = Signal(15, name=f"rounded{e}")
            m.d.comb += rounded.eq(mag + round_up)
            code = Cat(Mux(special, special_code, rounded), sign)
            codes.append(stager.reg(code, name=f"code{e}"))
        return codes


class Fp16Decoder(DecoderUnit):
    """``fp16`` decoder: element = exact fp32 widening of the fp16 code.

    Latency 1 cycle; one beat per cycle; holds under backpressure.
    """
    WAITS_AT_INPUT = True
    LATENCY = 1
    CODE_WIDTH = 16

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        elements = []
        for e in range(ELEMENTS_PER_BEAT):
            h = payload.codes[e]
            sign, exp, man = h[15], h[10:15], h[0:10]
            exp_zero = kept(m, exp == 0, f"f16d_exp_zero{e}")
            # A subnormal's leading one at bit p becomes the implicit bit, value
            # 2^(p - 24), i.e. fp32 exponent 103 + p, its mantissa shifted up by 10 - p.
            # The leading one is found one-hot (kept pieces of at most six inputs) and
            # each output bit is an OR over it: its depth is two LUTs and an OR tree
            # whichever LUT mapper maps the bank, where a priority chain and a shifter
            # would map as deep as the mapper lets them.
            high = kept(m, man[5:] != 0, f"f16d_man_high{e}")
            lead = []
            for p in range(10):
                above = (man[p + 1:] != 0) if p >= 5 else (high | (man[p + 1:5] != 0))
                lead.append(kept(m, man[p] & ~above, f"f16d_lead{e}_{p}"))
            # (each root leaves room for the select below in its LUT)
            norm_man = Cat(*(or_tree(m, [lead[p] & man[p - 10 + j] for p in range(10 - j, 10)],
                                     inputs=2, name=f"f16d_man{e}_{j}", room=2)
                             for j in range(10)))
            norm_exp = Cat(*(or_tree(m, [lead[p] for p in range(10) if (103 + p) >> k & 1],
                                     name=f"f16d_exp{e}_{k}", room=3) for k in range(8)))
            exp_max = kept(m, exp == 0x1F, f"f16d_exp_max{e}")
            f_exp = Mux(exp_max, 0xFF, Mux(exp_zero, norm_exp, exp + 112))
            f_man = Cat(Const(0, 13), Mux(exp_zero, norm_man, man))
            elements.append(stager.reg(Cat(f_man, f_exp, sign), name=f"element{e}"))
        return elements
