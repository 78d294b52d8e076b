"""Pipelined IEEE-754 binary32 multiplier.

Semantics
---------
``p = fl32(a * b)``: binary32 multiplication rounded to nearest, ties to even,
with subnormal inputs and outputs handled in full (no flush-to-zero or
denormals-are-zero) and overflow to ±inf. The result is bit-exact with numpy's
``np.float32 * np.float32`` on x86, except that every NaN result is the
canonical quiet NaN ``0x7FC00000`` (positive, payload ``0x400000``) whatever the
operands' signs and payloads. The sign of zero and infinite results is
``sign(a) XOR sign(b)``; ``inf * 0`` is NaN.

Algorithm
---------
:func:`fp32_mul_model` and :class:`Fp32Multiplier` implement the very same
bit-level algorithm; the model computes the quantities the gateware registers,
stage by stage (where the gateware prepares two candidates of a value for the
two possible values of ``P[47]``, the model computes the selected one
directly). ``X[h:l]`` denotes bits ``h`` down to ``l`` of ``X``.

Stage 1 - unpack, normalise inputs, exponent bases, special cases
    1. Split each operand into sign ``s``, biased exponent ``e`` (8 bits) and
       fraction ``f`` (23 bits). The result sign is ``sa XOR sb``.
    2. Classify: NaN (``e = 255, f != 0``), inf (``e = 255, f = 0``), zero
       (``e = 0, f = 0``). The result is NaN if either operand is NaN or one is
       inf and the other zero; else inf if either is inf; else zero if either
       is zero. Otherwise it is computed by the steps below (which run anyway;
       their result is then replaced in step 15).
    3. Significand ``m = (e != 0) << 23 | f`` (24 bits) and effective exponent
       ``E = max(e, 1)`` (subnormals share the exponent of the smallest normal),
       so that ``|x| = m * 2**(E - 150)``.
    4. Normalise: ``lz`` = number of leading zeros of the 24-bit ``m`` (a
       leading-zero counter; 24 for ``m = 0``), then ``m = (m << lz) mod 2**24``.
       Only ``e = 0`` needs it (``lz = 0`` otherwise), so the gateware counts
       and shifts ``m = f`` (hidden bit 0) while the exponent test runs, and
       selects after.
       Afterwards bit 23 of a non-zero ``m`` is set and
       ``|x| = m * 2**(E - lz - 150)``. ``lz`` is 0 for normal operands.
    5. Exponent bases, which do not depend on ``lz`` and are computed in
       parallel (signed, 10 bits): ``ebase = Ea + Eb - 127``, ``ebase + 1``
       and ``1 - ebase``.

Stage 2 - significand product, exponent and shift preparation
    6. ``P = ma * mb`` (24 x 24 -> 48 bits). Both factors lie in
       ``[2**23, 2**24)``, so ``P`` lies in ``[2**46, 2**48)``: its leading one
       is bit 47 (``t = 1``) or bit 46 (``t = 0``), ``t = P[47]``.
    7. ``lzs = lza + lzb``; ``esum = ebase - lzs``, ``esum + 1``,
       ``d = 1 - esum`` (each a single add of ``lzs`` to a stage-1 base). The
       result's biased exponent is ``Er = esum + t``:
       ``|a*b| = P * 2**(esum - 173) = (N / 2**47) * 2**(Er - 127)`` with
       ``N = P << (1 - t)`` the 1-bit-normalised product.
    8. While the multiplier works, prepare what depends on ``Er``:

       - ``norm = esum >= 1`` (``d <= 0``): the result is normal for either ``t``;
       - ``v = clamp(d, 0, 26)``: the right shift that denormalises a
         subnormal result (step 9);
       - the thermometer ``mv[k] = v >= k + 2``, ``k = 0 … 24`` (step 11);
       - for ``t`` in 0, 1: the packed exponent field
         ``ef_t = Er_t if Er_t >= 1 else 0`` (8 bits) and the overflow flag
         ``ovf_t = Er_t >= 255``, with ``Er_t = esum + t``.

Stage 3 - normalisation and denormalisation shift, sticky, round decision
    9. ``X = P << 1`` (49 bits) and ``S = X >> u`` with ``u = t`` if
       ``norm`` else ``v``. This right shift does both the 1-bit normalisation
       and the denormalisation: for a normal result ``S = X >> t = N``; for
       ``Er <= 0``, ``u = 1 - esum`` and ``S = N >> (1 - Er)`` whatever ``t``
       (the gateware shifts by the registered ``v`` in parallel with the 1-bit
       normalisation and selects afterwards). Either way ``S[47]`` is the
       hidden-bit position (set iff the result is normal). A shift of 26
       already puts the leading one of ``X`` below the guard position, so the
       clamp of step 8 does not change the rounded result.
    10. Fraction ``frac = S[46:24]`` (the hidden bit is implied by the exponent
        field), guard bit ``g = S[23]``; select ``ef = ef_t``, ``ovf = ovf_t``.
    11. Sticky: OR of the bits of ``X`` below the guard position,
        ``st = (X & (2**(23 + u) - 1)) != 0``. The mask is a thermometer: bits
        0-22 set, bit 23 = ``(u >= 1) = ~norm | t``, bits ``24 + k`` = ``mv[k]``
        (prepared in stage 2, independent of ``P``); nothing is lost below
        bit 0 because the shift only moves bits of ``X`` down.
    12. Round to nearest even: ``up = g & (st | frac[0])``.
    13. Overflow (``ovf``) turns the result into inf; the special cases of
        step 2 take precedence.

Stage 4 - round and pack
    14. ``w = (ef << 23 | frac) + up`` (31 bits). The increment's carry ripples
        from the fraction into the exponent field, which handles every
        boundary at once: a significand of all ones rounds up to the next
        binade, the largest subnormal rounds up to the smallest normal (field
        0 -> 1) and the largest finite magnitude rounds up to inf
        (``0x7F7FFFFF + 1 = 0x7F800000``).
    15. ``p = sign << 31 | w``, or the special value: NaN -> ``0x7FC00000``,
        inf -> ``sign << 31 | 0x7F800000``, zero -> ``sign << 31``.
"""

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.spec.fp32 import CANONICAL_NAN, INF_BITS, MUL_MAX_SHIFT

__all__ = ["Fp32Multiplier"]

def _lzc(bits):
    """Leading-zero counter tree over ``bits`` (most significant first, power of
    two long). Returns ``(nonzero, count)``; ``count`` is valid if ``nonzero``."""
    if len(bits) == 2:
        hi, lo = bits
        return hi | lo, ~hi
    half = len(bits) // 2
    nz_hi, c_hi = _lzc(bits[:half])
    nz_lo, c_lo = _lzc(bits[half:])
    return nz_hi | nz_lo, Cat(Mux(nz_hi, c_hi, c_lo), ~nz_hi)


class Fp32Multiplier(wiring.Component):
    """Pipelined binary32 multiplier, bit-exact with
    :func:`squeezenic_hw.reference.fp32_mul.fp32_mul_model`.

    See the module docstring for the semantics and the algorithm (steps 1-15).
    One multiplication per enabled cycle; a DSP48-style shared clock enable.

    Attributes
    ----------
    LATENCY : int
        4. Operands on ``a``/``b`` are sampled at an enabled clock edge (``en``
        high in that cycle); their product is on ``p`` after the ``LATENCY``-th
        enabled edge counting the sampling one, i.e. ``LATENCY - 1`` enabled
        edges later. With ``en`` held high, operands driven in cycle ``c``
        give ``p`` in cycle ``c + LATENCY``.
    a, b : In(32)
        Operand bit patterns (both arbitrary binary32; the constructor takes
        no parameters).
    en : In(1)
        Clock enable of every pipeline register.
    p : Out(32)
        Result bit pattern (register output).

    Notes
    -----
    Every register belongs to one of four stages and updates only when ``en``
    is high (``p`` is the stage-4 register), so a low ``en`` freezes the whole
    pipeline and ``p``.

    Stage 1 (steps 1-5)
        Unpack, special-case flags and result sign; per operand a
        leading-zero counter (tree) and a left barrel shift of ``0 | f`` (the
        significand with hidden bit 0), selected when the exponent field is 0;
        beside them the
        exponent bases ``Ea + Eb - 127`` (+1, and ``1 -``).
        Registers: the normalised 24-bit significands (the multiplier's input
        registers), the leading-zero counts, the bases, sign and flags.
    Stage 2 (steps 6-8)
        The 24 x 24 -> 48-bit unsigned product as a plain ``*`` of registered
        signals into a register (two cascaded DSP48E2). Beside it, in fabric:
        ``lza + lzb`` and three adds (``esum``, ``esum + 1``, ``1 - esum``),
        the clamped denormalisation shift, its thermometer mask, and the
        exponent-field and overflow candidates for both values of ``P[47]``.
    Stage 3 (steps 9-13)
        A 49-bit right shift by ``v`` (0-26) beside the 1-bit normalisation,
        candidate select on ``P[47]``, sticky (mask AND + 49-input OR), guard
        and the round-to-nearest-even decision, overflow -> inf.
    Stage 4 (steps 14-15)
        31-bit increment of ``exponent field | fraction`` (carry into the
        exponent), sign and special-value selection into the ``p`` register.
    """

    LATENCY = 4

    def __init__(self):
        super().__init__({
            "a": In(32),
            "b": In(32),
            "en": In(1),
            "p": Out(32),
        })

    @property
    def latency(self):
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()

        # a datapath: no register here needs a reset
        def reg(value, name, shape=None):
            r = Signal(shape if shape is not None else value.shape(), name=name,
                       reset_less=True)
            with m.If(self.en):
                m.d.sync += r.eq(value)
            return r

        def comb(value, name, shape):
            c = Signal(shape, name=name)
            m.d.comb += c.eq(value)
            return c

        # ---- stage 1: unpack, classify, normalise, exponent bases (steps 1-5)
        def unpack(x, tag):
            e = x[23:31]
            f = x[:23]
            e_max = e == 0xFF
            e_zero = e == 0
            f_zero = f == 0
            # The normaliser only acts on subnormals (hidden bit 0), so it works on
            # Cat(f, 0) without waiting for the exponent test, which only selects.
            # Padded to 32 bits with ones below: the count saturates at 24 for 0.
            padded = Cat(Const(0xFF, 8), f, Const(0, 1))
            _, lz_sub = _lzc([padded[i] for i in reversed(range(32))])
            lz_sub = comb(lz_sub, f"{tag}_lzsub1", 5)
            sig_sub = comb(Cat(f, Const(0, 1)) << lz_sub, f"{tag}_sigsub1", 24)
            return {
                "nan": e_max & ~f_zero, "inf": e_max & f_zero, "zero": e_zero & f_zero,
                "sig": Mux(e_zero, sig_sub, Cat(f, Const(1, 1))),
                "lz": Mux(e_zero, lz_sub, 0), "e_eff": Mux(e_zero, 1, e),
            }

        ua = unpack(self.a, "a")
        ub = unpack(self.b, "b")
        nan1 = ua["nan"] | ub["nan"] | (ua["inf"] & ub["zero"]) | (ua["zero"] & ub["inf"])
        inf1 = ~nan1 & (ua["inf"] | ub["inf"])
        zero1 = ~nan1 & ~inf1 & (ua["zero"] | ub["zero"])
        esum_e = ua["e_eff"] + ub["e_eff"]

        s1_sign = reg(self.a[31] ^ self.b[31], "s1_sign")
        s1_nan = reg(nan1, "s1_nan")
        s1_inf = reg(inf1, "s1_inf")
        s1_zero = reg(zero1, "s1_zero")
        s1_ma = reg(ua["sig"], "s1_ma")
        s1_mb = reg(ub["sig"], "s1_mb")
        s1_lza = reg(ua["lz"], "s1_lza")
        s1_lzb = reg(ub["lz"], "s1_lzb")
        s1_base0 = reg(esum_e - 127, "s1_base0", signed(10))    # ebase
        s1_base1 = reg(esum_e - 126, "s1_base1", signed(10))    # ebase + 1
        s1_based = reg(128 - esum_e, "s1_based", signed(10))    # 1 - ebase

        # ---- stage 2: product, exponent, shift preparation (steps 6-8)
        s2_prod = reg(s1_ma * s1_mb, "s2_prod", unsigned(48))
        lzs = comb(s1_lza + s1_lzb, "lzs2", 6)
        esum0 = comb(s1_base0 - lzs, "esum0_2", signed(10))
        esum1 = comb(s1_base1 - lzs, "esum1_2", signed(10))
        d = comb(s1_based + lzs, "d2", signed(10))
        v = comb(Mux(d <= 0, 0, Mux(d >= MUL_MAX_SHIFT, MUL_MAX_SHIFT, d[:5])), "v2", 5)
        s2_norm = reg(d <= 0, "s2_norm", unsigned(1))
        s2_v = reg(v, "s2_v")
        s2_mv = reg(Cat(*(v >= k + 2 for k in range(25))), "s2_mv", unsigned(25))
        s2_ef = [reg(Mux(er >= 1, er[:8], 0), f"s2_ef{t}", unsigned(8))
                 for t, er in enumerate((esum0, esum1))]
        s2_ovf = [reg(er >= 255, f"s2_ovf{t}", unsigned(1))
                  for t, er in enumerate((esum0, esum1))]
        s2_sign = reg(s1_sign, "s2_sign")
        s2_nan = reg(s1_nan, "s2_nan")
        s2_inf = reg(s1_inf, "s2_inf")
        s2_zero = reg(s1_zero, "s2_zero")

        # ---- stage 3: shift, guard, sticky, round decision (steps 9-13)
        t = s2_prod[47]
        x = Cat(Const(0, 1), s2_prod)                                  # P << 1, 49 bits
        # X >> u, u = t if norm else v: the subnormal shift by the registered v
        # runs in parallel with the 1-bit normalisation and is selected after
        shifted = comb(Mux(s2_norm, Mux(t, x >> 1, x), x >> s2_v), "s3", 49)
        mask = comb(Cat(Const((1 << 23) - 1, 23), ~s2_norm | t, s2_mv), "mask3", 49)
        frac = shifted[24:47]
        guard = shifted[23]
        sticky = (x & mask).any()
        up = guard & (sticky | frac[0])
        ef = Mux(t, s2_ef[1], s2_ef[0])
        ovf = Mux(t, s2_ovf[1], s2_ovf[0])
        s3_word = reg(Cat(frac, ef), "s3_word", unsigned(31))
        s3_up = reg(up, "s3_up")
        s3_sign = reg(s2_sign, "s3_sign")
        s3_nan = reg(s2_nan, "s3_nan")
        s3_inf = reg(s2_inf | (ovf & ~s2_nan & ~s2_zero), "s3_inf")
        s3_zero = reg(s2_zero, "s3_zero")

        # ---- stage 4: round, pack (steps 14-15)
        w = comb(s3_word + s3_up, "w4", 31)
        result = Mux(s3_nan, CANONICAL_NAN,
                     Mux(s3_inf, Cat(Const(INF_BITS, 31), s3_sign),
                         Mux(s3_zero, Cat(Const(0, 31), s3_sign),
                             Cat(w, s3_sign))))
        m.d.comb += self.p.eq(reg(result, "s4_p", unsigned(32)))
        return m
