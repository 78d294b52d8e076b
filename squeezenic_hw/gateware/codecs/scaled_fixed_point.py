"""``fl32(|x| · scale)`` as the ``fixed`` and ``qsgd`` encoders read it: its integer
part, 32 fraction bits and a sticky bit, from the significand product, with no fp32 in
between.

The encoders round ``y = fl32(|x| · scale)`` to a level (:mod:`.levels`): they need
``y``'s integer part ``I`` (``y ≥ 2**15`` saturates), its first 32 fraction bits ``F``
and whether anything is left below them. :class:`~.fp32_mul.Fp32Multiplier` followed by
a decomposition of its result computes that in two steps, each with a shifter: the
multiplier denormalises a subnormal result and packs an fp32, and the decomposition
unpacks it and shifts its significand to the binary point. Here the rounding to 24
significant bits is done on the normalised product and its result shifted once:

* a normal result, ``Er = esum + t ≥ 1`` (:func:`~.fp32_mul.product_stages`):
  ``R = round(P, 24 bits)`` (nearest even, on ``P[47:24]`` or ``P[46:23]``), 25 bits
  with the rounding's carry; ``y = R · 2**(Er - 150)``, so ``y · 2**32`` is
  ``R · 2**(sh - 32)`` with ``sh = Er - 86`` (7…55; 7 for ``Er ≤ 93``, where only the
  sticky bit is left; ``Er ≥ 142`` saturates). A DSP48E2 shifts: it multiplies ``R`` by
  ``2**(sh mod 16)``, and a 4:1 choice of a 48-bit window of that product by
  ``sh div 16`` places it. The sticky bit is the product's bits below the window. A
  carry into bit 24 makes ``y`` a power of two one binade up, which the same shift
  places.
* a subnormal or zero result, ``Er ≤ 0``: ``I = F = 0``, and the sticky bit says
  whether ``y`` is not zero: the exact product ``P · 2**(esum - 173)`` exceeds
  ``2**-150`` (half the least subnormal; the tie rounds to zero, which is even), which
  for ``P`` in ``[2**46, 2**48)`` is a compare of ``esum`` with -23 and -24, and
  whether ``P`` is ``2**46`` or at least ``2**47``.

Flags: ``zero`` for a result that is NaN, ±0 (an underflow included) or negative (a
negative scale), and ``saturate`` for ``y ≥ 2**15`` (inf included), as the encoders read
them; ``I``, ``F`` and ``sticky`` are undefined under either, ``saturate`` under
``zero``.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .fp32_mul import pipeline_helpers, product_stages

__all__ = ["ScaledFixedPoint"]


class ScaledFixedPoint(wiring.Component):
    """``y = fl32(|x| · scale)`` as integer part, 32 fraction bits and sticky, pipelined.

    Bit-exact with :class:`~.fp32_mul.Fp32Multiplier` on ``(|x|, scale)`` followed by
    the encoders' decomposition of its result (see the module docstring), for every
    pair of binary32 operands.

    Attributes
    ----------
    LATENCY : int
        10 enabled cycles (see the notes).
    x : In(32)
        An element (its sign is ignored).
    scale : In(32)
        The frame's scale.
    en : In(1)
        Clock enable of every register (no register takes a reset).
    integer : Out(15)
        ``⌊y⌋``.
    frac : Out(32)
        ``⌊(y - ⌊y⌋) · 2**32⌋``.
    sticky : Out(1)
        ``y · 2**32`` is not an integer.
    zero : Out(1)
        ``y`` is NaN, ±0 or negative (the level is 0).
    saturate : Out(1)
        ``y ≥ 2**15`` (the level is the top one); undefined when ``zero``.

    Notes
    -----
    Stages 1-5 are the multiplier's (unpack and normalise, the significand product on
    DSP48E2 slices, the exponent sums); beside stages 4 and 5, the shift ``sh`` and the
    saturation, subnormal and non-zero tests for both values of ``t = P[47]``. Stage 6:
    the 1-bit normalisation (select on ``t``), guard and sticky, the round-up decision;
    stage 7: ``R = sig + up`` and ``2**(sh mod 16)`` (the DSP's input registers); stages
    8 and 9: their product (its multiplier and output registers); stage 10: the window,
    the sticky bit, the outputs.
    """

    LATENCY = 10

    def __init__(self):
        super().__init__({
            "x": In(32),
            "scale": In(32),
            "en": In(1),
            "integer": Out(15),
            "frac": Out(32),
            "sticky": Out(1),
            "zero": Out(1),
            "saturate": Out(1),
        })

    @property
    def latency(self):
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        reg, comb = pipeline_helpers(m, self.en)
        ps = product_stages(m, reg, comb, Cat(self.x[:31], Const(0, 1)), self.scale)

        # ---- stages 4, 5: what depends on the exponent alone, for t = 0 and t = 1
        # y·2**32 = R·2**(Er - 118): sh = Er - 86 (7 for Er ≤ 93, where only the sticky
        # bit is left; 55 for Er ≥ 141), R·2**(sh - 32)
        esum = ps["esum"]                      # [esum, esum + 1]: Er for t = 0, 1
        s4_sh = [reg(Mux(er <= 93, 7, Mux(er >= 141, 55, (er - 86)[:6])), f"s4_sh{t}", 6)
                 for t, er in enumerate(esum)]
        s4_big = [reg(er >= 142, f"s4_big{t}") for t, er in enumerate(esum)]
        s4_sub = [reg(er <= 0, f"s4_sub{t}") for t, er in enumerate(esum)]
        # a subnormal result is not zero iff P > 2**(23 - esum)
        s4_beyond = reg(esum[0] > -23, "s4_beyond")        # 23 - esum < 46: always
        s4_at46 = reg(esum[0] == -23, "s4_at46")            # P > 2**46
        s4_at47 = reg(esum[0] == -24, "s4_at47")            # P > 2**47
        s4_flags = reg(ps["flags3"], "s4_flags")
        s5_sh = [reg(r, f"s5_sh{t}") for t, r in enumerate(s4_sh)]
        s5_big = [reg(b, f"s5_big{t}") for t, b in enumerate(s4_big)]
        s5_sub = [reg(b, f"s5_sub{t}") for t, b in enumerate(s4_sub)]
        s5_beyond = reg(s4_beyond, "s5_beyond")
        s5_at46 = reg(s4_at46, "s5_at46")
        s5_at47 = reg(s4_at47, "s5_at47")
        s5_flags = reg(s4_flags, "s5_flags")

        # ---- stage 6: 1-bit normalisation, guard, sticky, the round-up decision
        prod, low = ps["prod"], ps["low"]      # P[47:17], OR of P[16:0]
        t = prod[30]
        sig = Mux(t, prod[7:31], prod[6:30])
        guard = Mux(t, prod[6], prod[5])
        below = Mux(t, prod[:6].any(), prod[:5].any()) | low
        up = guard & (below | sig[0])
        # (P = 2**46 is 2**23 · 2**23; P is never 2**47, so P ≥ 2**47 means P > 2**47)
        p_is_2_46 = ~t & ~prod[:29].any() & ~low
        nonzero_sub = s5_beyond | (s5_at46 & ~p_is_2_46) | (s5_at47 & t)
        sign, nan, inf, zero = s5_flags
        s6_sig = reg(sig, "s6_sig")
        s6_up = reg(up, "s6_up")
        s6_sh = reg(Mux(t, s5_sh[1], s5_sh[0]), "s6_sh")
        s6_sub = reg(Mux(t, s5_sub[1], s5_sub[0]), "s6_sub")
        s6_nonzero_sub = reg(nonzero_sub, "s6_nonzero_sub")
        s6_zero = reg(sign | nan | zero, "s6_zero")
        s6_sat = reg(inf | Mux(t, s5_big[1], s5_big[0]), "s6_sat")

        # ---- stage 7: the rounded significand, with its carry; 2**(sh mod 16)
        s7_rounded = reg(s6_sig + s6_up, "s7_rounded", 25)
        s7_power = reg(Const(1, 16) << s6_sh[:4], "s7_power", 16)
        late = {"window": s6_sh[4:], "sub": s6_sub, "nonzero_sub": s6_nonzero_sub,
                "zero": s6_zero, "sat": s6_sat}
        for stage in (7, 8, 9):
            late = {key: reg(value, f"s{stage}_{key}") for key, value in late.items()}

        # ---- stages 8, 9: D = R·2**(sh mod 16), a shift on a DSP48E2's multiplier (its
        # input, multiplier and output registers)
        s8_d = reg(s7_rounded * s7_power, "s8_d", 40)
        s9_d = reg(s8_d, "s9_d")

        # ---- stage 10: the window of D by sh div 16 (y·2**32 = D·2**(16·(sh div 16) -
        # 32)), the bits below it (sticky); a carry to 2**15 saturates
        d = Cat(s9_d, Const(0, 8))
        window = late["window"]
        shifted = Signal(48, name="shifted10")
        for i in range(48):
            m.d.comb += shifted[i].eq(Array(
                d[i + 32 - 16 * q] if 0 <= i + 32 - 16 * q < len(d) else Const(0)
                for q in range(4))[window])
        lost = Mux(window == 0, s9_d[:32].any(), (window == 1) & s9_d[:16].any())
        m.d.comb += [
            self.integer.eq(reg(shifted[32:47], "s10_integer")),
            self.frac.eq(reg(shifted[:32], "s10_frac")),
            self.sticky.eq(reg(Mux(late["sub"], late["nonzero_sub"], lost), "s10_sticky")),
            self.zero.eq(reg(late["zero"] | (late["sub"] & ~late["nonzero_sub"]),
                             "s10_zero")),
            self.saturate.eq(reg(late["sat"] | shifted[47], "s10_saturate")),
        ]
        return m
