"""``fl32(±c · b)`` for an unsigned integer ``c`` of up to 16 bits and a binary32 ``b``:
what the ``fixed`` and ``qsgd`` decoders compute, on one DSP48E2 per product.

:class:`~.fp32_mul.Fp32Multiplier` on ``c`` made an fp32 computes the same with a
24 × 24 significand product (two DSP48E2s and an add in fabric) and a 49-bit
denormalising shift with its sticky mask. An integer operand needs less:

* ``c`` is normalised as an integer, ``C = c << (15 - lead)`` (``lead`` the position of
  its leading one), and the product ``P = C · M`` (``M`` the normalised significand of
  ``b``, :func:`~.fp32_mul.operand_value`) is 16 × 24 bits, in ``[2**38, 2**40)``:
  ``t = P[39]``.
* With ``E' = e - lz`` (``b``'s exponent field and normalising shift), the value is
  ``P · 2**(lead + E' - 165)``, so a normal result has the biased exponent
  ``Er = lead + E' + t`` and the significand ``P[39:15]`` or ``P[38:14]``, rounded on the
  bits below (guard and sticky).
* A subnormal result is exact: the value is a whole multiple of ``2**-149`` (``c`` is an
  integer and ``b`` one of ``2**-149``), so its fraction field is ``P >> (16 - lead -
  E')`` with nothing lost and no rounding (the guard and sticky positions hold zeros).
  One right shift of ``P[39:15]`` by ``u = t`` (normal) or ``1 - (lead + E')``
  (subnormal, at most 23: ``c ≥ 1`` and ``b ≥ 2**-149`` keep the value at least
  ``2**-149``) does both.

Special values as :class:`~.fp32_mul.Fp32Multiplier`'s: a NaN result is ``0x7FC00000``;
``c = 0`` times inf is NaN; the sign of a zero or infinite result is ``negative XOR
sign(b)``; overflow gives ±inf.
"""

from amaranth import Cat, Const, Module, Mux, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.spec.fp32 import CANONICAL_NAN, INF_BITS

from .fp32_mul import operand_stage, operand_value, pipeline_helpers

__all__ = ["IntegerProduct"]

# The largest denormalising shift: 1 - (lead + E') with lead ≥ 0 and E' ≥ -22.
_MAX_SHIFT = 23


class IntegerProduct(wiring.Component):
    """``p = fl32(±c · b)``, pipelined: ``c`` an unsigned integer (16 bits), ``negative``
    its sign, ``b`` any binary32.

    Bit-exact with numpy's ``float32(±c) * float32(b)`` (every NaN result canonical), for
    every ``c`` and ``b`` (see the module docstring for the algorithm).

    Attributes
    ----------
    LATENCY : int
        7 enabled cycles from ``c``/``negative``/``b`` to ``p``.
    c : In(16)
        The integer's magnitude.
    negative : In(1)
        Its sign (for ``c = 0`` too: ``-0 · b``).
    b : In(32)
        The binary32 factor.
    en : In(1)
        Clock enable of every register (no register takes a reset).
    p : Out(32)
        The product's bit pattern (a register).

    Notes
    -----
    Stage 1: ``lead`` (a priority search over ``c``), ``b`` unpacked (its leading-zero
    groups). Stage 2: ``C = c << (15 - lead)``, ``M``, the exponent base ``lead + e``, the
    special cases. Stages 3 and 4: ``P = C · M`` through the DSP48E2's multiplier and
    output registers; beside it ``Er0 = lead + E'``, then the shift for a subnormal result
    and the exponent field and overflow for both values of ``t``. Stage 5: ``u`` and the
    shift by ``u mod 8``, guard, sticky; stage 6: the shift by the rest of ``u``, the
    round-up decision; stage 7: the 31-bit increment of exponent field and fraction (its
    carry makes the next binade, or inf), sign and special values.
    """

    LATENCY = 7

    def __init__(self):
        super().__init__({
            "c": In(16),
            "negative": In(1),
            "b": In(32),
            "en": In(1),
            "p": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        reg, comb = pipeline_helpers(m, self.en)

        # ---- stage 1: the integer's leading one; b unpacked
        lead = Const(0, 4)
        for k in range(1, 16):          # the highest set bit wins
            lead = Mux(self.c[k], k, lead)
        s1_lead = reg(lead, "s1_lead")
        s1_c = reg(self.c, "s1_c")
        s1_c_zero = reg(self.c == 0, "s1_c_zero")
        s1_sign = reg(self.negative ^ self.b[31], "s1_sign")
        s1_e = reg(self.b[23:31], "s1_e")
        ob = operand_value(operand_stage(reg, self.b, "b"))

        # ---- stage 2: normalised factors, the exponent base, the special cases
        s2_c = reg((s1_c << ~s1_lead)[:16], "s2_c")           # leading one at bit 15
        s2_m = reg(ob.m, "s2_m")
        s2_lz = reg(ob.lz, "s2_lz")
        s2_base = reg(s1_lead + s1_e, "s2_base", unsigned(9))
        nan = ob.nan | (ob.inf & s1_c_zero)
        inf = ~nan & ob.inf
        zero = ~nan & ~inf & (ob.zero | s1_c_zero)
        s2_flags = reg(Cat(s1_sign, nan, inf, zero), "s2_flags")

        # ---- stages 3, 4: P = C·M (the DSP's multiplier and output registers)
        s3_p = reg(s2_c * s2_m, "s3_p", unsigned(40))
        s4_p = reg(s3_p, "s4_p")
        s3_er0 = reg(s2_base - s2_lz, "s3_er0", signed(10))
        s3_flags = reg(s2_flags, "s3_flags")
        er = [s3_er0, s3_er0 + 1]                              # Er for t = 0, 1
        s4_norm0 = reg(s3_er0 >= 1, "s4_norm0")
        s4_d = reg(Mux(s3_er0 >= 1, 0, Mux(s3_er0 <= 1 - _MAX_SHIFT, _MAX_SHIFT,
                                            (1 - s3_er0)[:5])), "s4_d", unsigned(5))
        s4_ef = [reg(Mux(e >= 1, e[:8], 0), f"s4_ef{t}", unsigned(8)) for t, e in enumerate(er)]
        s4_ovf = [reg(e >= 255, f"s4_ovf{t}") for t, e in enumerate(er)]
        s4_flags = reg(s3_flags, "s4_flags")

        # ---- stage 5: u = t (normal) or the denormalising shift; >> (u mod 8)
        t = s4_p[39]
        u = comb(Mux(s4_norm0, t, s4_d), "u5", unsigned(5))
        top = s4_p[15:40]                                      # 25 bits
        s5_fine = reg(top >> u[:3], "s5_fine", unsigned(25))
        s5_coarse = reg(u[3:], "s5_coarse")
        # guard and sticky of a normal result (zero for a subnormal one: exact)
        s5_guard = reg(Mux(t, s4_p[15], s4_p[14]), "s5_guard")
        s5_sticky = reg(Mux(t, s4_p[:15].any(), s4_p[:14].any()), "s5_sticky")
        s5_ef = reg(Mux(t, s4_ef[1], s4_ef[0]), "s5_ef")
        sign, nan, inf, zero = s4_flags
        s5_flags = reg(Cat(sign, nan, inf | (Mux(t, s4_ovf[1], s4_ovf[0]) & ~nan & ~zero),
                           zero), "s5_flags")

        # ---- stage 6: >> 8·(u div 8); the round-up decision
        frac = comb((s5_fine >> Cat(Const(0, 3), s5_coarse))[:23], "frac6", unsigned(23))
        s6_word = reg(Cat(frac, s5_ef), "s6_word", unsigned(31))
        s6_up = reg(s5_guard & (s5_sticky | frac[0]), "s6_up")
        s6_flags = reg(s5_flags, "s6_flags")

        # ---- stage 7: round, pack
        sign, nan, inf, zero = s6_flags
        w = comb(s6_word + s6_up, "w7", unsigned(31))
        result = Mux(nan, CANONICAL_NAN,
                     Mux(inf, Cat(Const(INF_BITS, 31), sign),
                         Mux(zero, Cat(Const(0, 31), sign), Cat(w, sign))))
        m.d.comb += self.p.eq(reg(result, "s7_p", unsigned(32)))
        return m
