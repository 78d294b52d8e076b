"""``fl32(±c · b)`` for an unsigned integer ``c`` of up to 16 bits and a binary32 ``b``:
what the ``fixed`` and ``qsgd`` decoders compute, on two DSP48E2s per product.

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
* A subnormal result needs no shift either. It comes only from a subnormal ``b``
  (``c ≥ 1``, and a normal ``b`` is at least ``2**-126``), and then the value is
  ``Q · 2**-149`` with ``Q = c · f`` (``f`` the fraction field of ``b``), exactly. While
  ``Q < 2**24`` that value's binary32 bit pattern is ``Q`` itself (exponent field 0 or 1,
  fraction ``Q mod 2**23``), so a second DSP48E2 forms ``Q`` beside ``P`` and the result
  takes it; from ``Q ≥ 2**24`` on the result is normal (``Er ≥ 2``) and comes from ``P``.
  So neither case has a denormalising shifter.

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


class IntegerProduct(wiring.Component):
    """``p = fl32(±c · b)``, pipelined: ``c`` an unsigned integer (16 bits), ``negative``
    its sign, ``b`` any binary32.

    Bit-exact with numpy's ``float32(±c) * float32(b)`` (every NaN result canonical), for
    every ``c`` and ``b`` (see the module docstring for the algorithm).

    Attributes
    ----------
    LATENCY : int
        6 enabled cycles from ``c``/``negative``/``b`` to ``p``.
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
    special cases. Stages 3 and 4: ``P = C · M`` and ``Q = c · f`` through two DSP48E2s'
    multiplier and output registers; beside them ``Er0 = lead + E'``, then the exponent
    field and overflow for both values of ``t``. Stage 5: the fraction and exponent field
    (``P``'s after the 1-bit normalisation by ``t``, or ``Q``), guard, sticky and the
    round-up decision; stage 6: the 31-bit increment of exponent field and fraction (its
    carry makes the next binade, or inf), sign and special values.
    """

    LATENCY = 6

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
        ob_fields = operand_stage(m, reg, self.b, "b")
        ob = operand_value(ob_fields)

        # ---- stage 2: normalised factors, the exponent base, the special cases
        s2_c = reg((s1_c << ~s1_lead)[:16], "s2_c")           # leading one at bit 15
        s2_m = reg(ob.m, "s2_m")
        s2_lz = reg(ob.lz, "s2_lz")
        s2_base = reg(s1_lead + s1_e, "s2_base", unsigned(9))
        nan = ob.nan | (ob.inf & s1_c_zero)
        inf = ~nan & ob.inf
        zero = ~nan & ~inf & (ob.zero | s1_c_zero)
        s2_flags = reg(Cat(s1_sign, nan, inf, zero), "s2_flags")
        # the raw factors of Q = c·f, and whether b is subnormal (Q is then the value)
        s2_c_raw = reg(s1_c, "s2_c_raw")
        s2_f = reg(ob_fields["f"], "s2_f")
        s2_sub = reg(ob_fields["e_zero"], "s2_sub")

        # ---- stages 3, 4: P = C·M and Q = c·f (each a DSP's multiplier and output
        # registers)
        s3_p = reg(s2_c * s2_m, "s3_p", unsigned(40))
        s4_p = reg(s3_p, "s4_p")
        s3_q = reg(s2_c_raw * s2_f, "s3_q", unsigned(39))
        s4_q = reg(s3_q, "s4_q")
        s3_er0 = reg(s2_base - s2_lz, "s3_er0", signed(10))
        s3_flags = reg(s2_flags, "s3_flags")
        s3_sub = reg(s2_sub, "s3_sub")
        er = [s3_er0, s3_er0 + 1]                              # Er for t = 0, 1
        s4_ef = [reg(e[:8], f"s4_ef{t}", unsigned(8)) for t, e in enumerate(er)]
        s4_ovf = [reg(e >= 255, f"s4_ovf{t}") for t, e in enumerate(er)]
        s4_flags = reg(s3_flags, "s4_flags")
        s4_sub = reg(s3_sub, "s4_sub")

        # ---- stage 5: P normalised by t, or Q; guard, sticky and the round-up decision
        t = s4_p[39]
        # b subnormal and Q < 2**24: the value's bit pattern is Q (and P's exponent
        # Er ≤ 1, which s4_ef does not hold); otherwise the result is normal
        raw = s4_sub & ~s4_q[24:].any()
        frac = Mux(t, s4_p[16:39], s4_p[15:38])
        guard = Mux(t, s4_p[15], s4_p[14])
        sticky = Mux(t, s4_p[:15].any(), s4_p[:14].any())
        s5_word = reg(Mux(raw, s4_q[:31], Cat(frac, Mux(t, s4_ef[1], s4_ef[0]))),
                      "s5_word", unsigned(31))
        s5_up = reg(~raw & guard & (sticky | frac[0]), "s5_up")
        sign, nan, inf, zero = s4_flags
        s5_flags = reg(Cat(sign, nan, inf | (Mux(t, s4_ovf[1], s4_ovf[0]) & ~nan & ~zero
                                             & ~raw), zero), "s5_flags")

        # ---- stage 6: round, pack
        sign, nan, inf, zero = s5_flags
        w = comb(s5_word + s5_up, "w6", unsigned(31))
        result = Mux(nan, CANONICAL_NAN,
                     Mux(inf, Cat(Const(INF_BITS, 31), sign),
                         Mux(zero, Cat(Const(0, 31), sign), Cat(w, sign))))
        m.d.comb += self.p.eq(reg(result, "s6_p", unsigned(32)))
        return m
