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
:func:`~.reference.fp32_mul.fp32_mul_model` and :class:`Fp32Multiplier` implement the very same
bit-level algorithm; the model computes the quantities the gateware registers,
stage by stage (where the gateware prepares two candidates of a value for the
two possible values of ``P[47]``, the model computes the selected one
directly). ``X[h:l]`` denotes bits ``h`` down to ``l`` of ``X``.

Stage 1 - unpack, special cases, leading zeros, exponent bases
    1. Split each operand into sign ``s``, biased exponent ``e`` (8 bits) and
       fraction ``f`` (23 bits). The result sign is ``sa XOR sb``.
    2. Classify: NaN (``e = 255, f != 0``), inf (``e = 255, f = 0``), zero
       (``e = 0, f = 0``). The result is NaN if either operand is NaN or one is
       inf and the other zero; else inf if either is inf; else zero if either
       is zero (the gateware classifies in stage 2, from the exponent tests and
       the leading-zero groups of stage 1). Otherwise it is computed by the steps
       below (which run anyway; their result is then replaced in step 15).
    3. Significand ``m = (e != 0) << 23 | f`` (24 bits), so that
       ``|x| = m * 2**(max(e, 1) - 150)`` (subnormals share the exponent of the
       smallest normal).
    4. Normalise: for ``e = 0``, ``lz`` = number of leading zeros of the 23-bit
       ``f`` (23 for ``f = 0``; per group of four bits a count and the first
       group with a one in stage 1, their combination in stage 2) and
       ``m = (f << (lz + 1)) mod 2**24`` (stage 2, as a shift by four times that
       group's index and one by the count within it): the leading one of ``f``
       becomes bit 23, and ``|x| = m * 2**(-lz - 150)``. For ``e != 0``,
       ``lz = 0`` and ``m`` stays. Either way bit 23 of a non-zero ``m`` is set
       and ``|x| = m * 2**(e - lz - 150)``: the raw exponent field and ``lz``
       carry the whole scale.
    5. Exponent bases, which do not depend on ``lz`` and are computed in
       parallel (signed, 10 bits): ``ebase = ea + eb - 127``, ``ebase + 1``
       and ``1 - ebase``.

Stage 2 - normalising shift
    Step 4's count and shift of each subnormal significand, into the
    multiplier's input registers.

Stages 3 to 5 - significand product, exponent, shift preparation
    7. ``lzs = lza + lzb``; ``esum = ebase - lzs``, ``esum + 1``,
       ``d = 1 - esum`` (each a single add of ``lzs`` to a base; stage 3). The
       result's biased exponent is ``Er = esum + t`` (``t`` from step 6):
       ``|a*b| = P * 2**(esum - 173) = (N / 2**47) * 2**(Er - 127)`` with
       ``N = P << (1 - t)`` the 1-bit-normalised product.
    6. ``P = ma * mb`` (24 x 24 -> 48 bits). Both factors lie in
       ``[2**23, 2**24)``, so ``P`` lies in ``[2**46, 2**48)``: its leading one
       is bit 47 (``t = 1``) or bit 46 (``t = 0``), ``t = P[47]``.
       The product is formed as two partial products that each fit one DSP48E2,
       ``Plo = ma[16:0] * mb`` (17 x 24) and ``Phi = ma[23:17] * mb`` (7 x 24),
       each registered twice (stages 3 and 4: the DSP's multiplier and output
       registers); stage 5 adds ``P[47:17] = Plo[40:17] + Phi`` in fabric
       (``P[16:0] = Plo[16:0]``).
    8. While the multiplier works (stages 4 and 5), prepare what depends on
       ``Er``:

       - ``norm = esum >= 1`` (``d <= 0``): the result is normal for either ``t``;
       - ``v = clamp(d, 0, 26)``: the right shift that denormalises a
         subnormal result (step 9);
       - the thermometer ``mv[k] = v >= k + 2``, ``k = 0 … 24`` (step 11);
       - for ``t`` in 0, 1: the packed exponent field
         ``ef_t = Er_t if Er_t >= 1 else 0`` (8 bits) and the overflow flag
         ``ovf_t = Er_t >= 255``, with ``Er_t = esum + t``.

Stage 6 - normalisation and denormalisation shift, sticky
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
        (prepared in stage 5, independent of ``P``); nothing is lost below
        bit 0 because the shift only moves bits of ``X`` down. Bits 1-17 of
        ``X`` (``P[16:0]``) are always under the mask: stage 5 ORs them while
        it adds the partial products, stage 6 ORs in the rest.
    13. Overflow (``ovf``) turns the result into inf; the special cases of
        step 2 take precedence.

Stage 7 - round and pack
    12. Round to nearest even: ``up = g & (st | frac[0])``.
    14. ``w = (ef << 23 | frac) + up`` (31 bits). The increment's carry ripples
        from the fraction into the exponent field, which handles every
        boundary at once: a significand of all ones rounds up to the next
        binade, the largest subnormal rounds up to the smallest normal (field
        0 -> 1) and the largest finite magnitude rounds up to inf
        (``0x7F7FFFFF + 1 = 0x7F800000``).
    15. ``p = sign << 31 | w``, or the special value: NaN -> ``0x7FC00000``,
        inf -> ``sign << 31 | 0x7F800000``, zero -> ``sign << 31``.
"""

from collections import namedtuple

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.spec.fp32 import CANONICAL_NAN, INF_BITS, MUL_MAX_SHIFT

__all__ = ["Fp32Operand", "Fp32Multiplier", "pipeline_helpers", "product_stages", "operand_stage",
           "operand_value"]

def _leading_groups(m, f, tag):
    """Stage 1 of the leading-zero count of the 23-bit ``f`` padded with a one below
    (so the count is 23 for ``f = 0``): per group of four bits, most significant first,
    the count of its leading zeros (2 bits each), and the first group with a one
    (one-hot). Returns ``(first, counts)``.

    ``padded`` and ``nonzero`` (kept) are named wires, in a block of their own (``m``'s
    submodule ``leading_<tag>``): both are read many times, and Amaranth's simulator
    evaluates an unnamed expression at every read; on their own they are evaluated only
    when ``f`` changes, not with the rest of ``m``'s combinational logic."""
    def groups_of(bits):
        return [[bits[23 - i] for i in range(k, k + 4)] for k in range(0, 24, 4)]

    m.submodules[f"leading_{tag}"] = own = Module()
    value = Cat(Const(1, 1), f)
    padded = Signal(24, name="padded")
    # kept: each group's OR is a LUT of its own, so the one-hot ``first`` (up to six of
    # them) is one LUT behind it whichever LUT mapper maps the multiplier
    nonzero = Signal(6, name="nonzero", attrs={"keep": 1})
    # both from ``value``: one read of ``padded`` here would run the block twice
    own.d.comb += [padded.eq(value),
                   nonzero.eq(Cat(g[0] | g[1] | g[2] | g[3] for g in groups_of(value)))]
    groups = groups_of(padded)
    counts = [Cat(~g[0] & (g[1] | ~g[2]), ~g[0] & ~g[1]) for g in groups]
    first = []
    for k in range(6):
        first.append(nonzero[k])
        for j in range(k):
            first[k] = first[k] & ~nonzero[j]
    return Cat(*first), Cat(*counts)


def _normalised(f, first, counts):
    """Stage 2: ``((f << lz) mod 2**23, lz)`` from :func:`_leading_groups`: a shift by
    four times the first group's index (an AND-OR over the one-hot), then by the count
    within that group (0-3); ``lz = 4 * group + within``."""
    coarse = 0
    within = 0
    group = 0
    for k in range(6):
        coarse = coarse | Mux(first[k], (f << 4 * k)[:23], 0)
        within = within | Mux(first[k], counts[2 * k:2 * k + 2], 0)
        group = group | Mux(first[k], k, 0)
    return (coarse << within)[:23], Cat(within, group)[:5]


#: One operand as stage 2 reads it (:func:`operand_value`): the normalised significand
#: ``m`` (bit 23 set unless the operand is zero), the normalising shift ``lz`` (0 for a
#: normal operand) and the operand's class.
Fp32Operand = namedtuple("Fp32Operand", ["m", "lz", "nan", "inf", "zero"])


def operand_stage(m, reg, x, tag):
    """Stage 1 of one operand (steps 1, 3 and 4's groups) in ``m``: its fraction, the
    exponent tests and the leading-zero groups of its fraction, registered (``reg`` from
    :func:`pipeline_helpers`). Returns a dict for :func:`operand_value`."""
    e = x[23:31]
    f = x[:23]
    first, counts = _leading_groups(m, f, tag)
    fields = {"f": f, "e_max": e == 0xFF, "e_zero": e == 0, "first": first, "counts": counts}
    return {key: reg(value, f"s1_{key}_{tag}") for key, value in fields.items()}


def operand_value(op):
    """Stage 2 of one operand, combinational from :func:`operand_stage`'s registers, as
    an :class:`Fp32Operand`. A subnormal's fraction is shifted so that its leading
    one is bit 23 (step 4): ``|x| = m · 2**(e - lz - 150)`` either way. ``f = 0`` iff
    the first group with a one is the last (the padding's) and that one is its fourth
    bit."""
    shifted, lz = _normalised(op["f"], op["first"], op["counts"])
    m = Mux(op["e_zero"], Cat(Const(0, 1), shifted), Cat(op["f"], Const(1, 1)))
    lz = Mux(op["e_zero"], lz, 0)
    f_zero = op["first"][5] & (op["counts"][10:12] == 3)
    return Fp32Operand(m, lz, op["e_max"] & ~f_zero, op["e_max"] & f_zero,
                       op["e_zero"] & f_zero)


def pipeline_helpers(m, en):
    """``(reg, comb)`` for the stages of a datapath clocked on ``en``: ``reg(value, name,
    shape=None)`` an enabled register with no reset (the enclosing pipeline's valid bits
    say which results count), ``comb(value, name, shape)`` a named wire."""
    def reg(value, name, shape=None):
        r = Signal(shape if shape is not None else value.shape(), name=name,
                   reset_less=True)
        with m.If(en):
            m.d.sync += r.eq(value)
        return r

    def comb(value, name, shape):
        c = Signal(shape, name=name)
        m.d.comb += c.eq(value)
        return c

    return reg, comb


def product_stages(m, reg, comb, a, b):
    """Stages 1 to 5 of :class:`Fp32Multiplier` (steps 1-7, and 11's low part): what
    the multiplier and :class:`~.scaled_fixed_point.ScaledFixedPoint` share.

    ``reg`` and ``comb`` are :func:`pipeline_helpers`'. Returns a dict: ``esum``
    (``[esum, esum + 1]``), ``d`` (``1 - esum``) and ``flags3`` (sign, NaN, inf, zero),
    registers of stage 3; ``prod`` (``P[47:17]``) and ``low`` (the OR of ``P[16:0]``),
    registers of stage 5.
    """
    # ---- stage 1: unpack, exponent tests, leading-zero groups, exponent bases (1-5)
    oa = operand_value(operand_stage(m, reg, a, "a"))
    ob = operand_value(operand_stage(m, reg, b, "b"))
    esum_e = a[23:31] + b[23:31]
    s1_sign = reg(a[31] ^ b[31], "s1_sign")
    s1_base0 = reg(esum_e - 127, "s1_base0", signed(10))    # ebase
    s1_base1 = reg(esum_e - 126, "s1_base1", signed(10))    # ebase + 1
    s1_based = reg(128 - esum_e, "s1_based", signed(10))    # 1 - ebase

    # ---- stage 2: leading-zero count, normalising shift (4)
    s2_ma = reg(oa.m, "s2_ma")
    s2_mb = reg(ob.m, "s2_mb")
    s2_lz = [reg(oa.lz, "s2_lza"), reg(ob.lz, "s2_lzb")]
    s2_base0 = reg(s1_base0, "s2_base0")
    s2_base1 = reg(s1_base1, "s2_base1")
    s2_based = reg(s1_based, "s2_based")
    # the operands' classes (step 2)
    nan2 = oa.nan | ob.nan | (oa.inf & ob.zero) | (oa.zero & ob.inf)
    inf2 = ~nan2 & (oa.inf | ob.inf)
    zero2 = ~nan2 & ~inf2 & (oa.zero | ob.zero)
    s2_flags = reg(Cat(s1_sign, nan2, inf2, zero2), "s2_flags")

    # ---- stages 3, 4: partial products, each through the DSP48E2's multiplier and
    # output registers (6), split on ma.
    s3_lo = reg(s2_ma[:17] * s2_mb, "s3_lo", unsigned(41))
    s3_hi = reg(s2_ma[17:] * s2_mb, "s3_hi", unsigned(31))
    s4_lo = reg(s3_lo, "s4_lo")
    s4_hi = reg(s3_hi, "s4_hi")
    # Beside them, the exponent (7) in stage 3, the shift preparation (8) in stages
    # 4 and 5. (No value passes three registers without logic between: its last
    # register would become a slow shift-register output.)
    lzs = comb(s2_lz[0] + s2_lz[1], "lzs3", 6)
    s3_esum = [reg(s2_base0 - lzs, "s3_esum0", signed(10)),
               reg(s2_base1 - lzs, "s3_esum1", signed(10))]
    s3_d = reg(s2_based + lzs, "s3_d", signed(10))
    s3_flags = reg(s2_flags, "s3_flags")
    # ---- stage 5: the product from its two parts (6). P[16:0] = Plo[16:0] only
    # reach the sticky OR (they lie under the guard position whatever the shift), so
    # they are reduced here and only P[47:17] is registered.
    s5_prod = reg(s4_lo[17:] + s4_hi, "s5_prod", unsigned(31))     # P[47:17]
    s5_low = reg(s4_lo[:17].any(), "s5_low")
    return {"esum": s3_esum, "d": s3_d, "flags3": s3_flags, "prod": s5_prod, "low": s5_low}


class Fp32Multiplier(wiring.Component):
    """Pipelined binary32 multiplier, bit-exact with
    :func:`squeezenic_hw.reference.fp32_mul.fp32_mul_model`.

    See the module docstring for the semantics and the algorithm (steps 1-15).
    One multiplication per enabled cycle; a DSP48-style shared clock enable.

    Attributes
    ----------
    LATENCY : int
        7. Operands on ``a``/``b`` are sampled at an enabled clock edge (``en``
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
    Every register belongs to one of seven stages and updates only when ``en``
    is high (``p`` is the stage-7 register), so a low ``en`` freezes the whole
    pipeline and ``p``. No register takes a reset (a datapath: the enclosing
    pipeline's valid bits say which results count). Each stage fits the timing
    budget (``docs/timing.md``): at most six LUT levels, or a carry chain and a
    few LUT levels; no multiplier is combinational.

    Stage 1 (steps 1, 3, 4's groups, 5)
        Unpack and the result sign; per operand the exponent tests ``e = 255``
        and ``e = 0`` and the first half of a flat leading-zero counter over
        ``f`` (per group of four bits a 2-bit count, and the first group with a
        one, one-hot); beside them the exponent bases ``ea + eb - 127`` (+1,
        and ``1 -``).
    Stage 2 (2, 4's count and shift)
        Per operand the left shift of ``f`` (an AND-OR by four times the
        one-hot group, then a 0-3 shift by the count within that group),
        selected when ``e = 0``, into the multiplier's input registers; the
        count ``lz`` (masked to 0 for a normal operand); the operands' classes
        (``f = 0`` from the groups) and the result's special case.
    Stages 3 and 4 (6, 7, 8)
        The partial products ``ma[16:0] * mb`` (17 x 24) and ``ma[23:17] * mb``
        (7 x 24), each a plain ``*`` of registered signals into a register and
        a second register (one DSP48E2 each, with its input, multiplier and
        output registers). Beside them, in fabric: ``lza + lzb`` and three adds
        (``esum``, ``esum + 1``, ``1 - esum``) in stage 3; in stage 4 the
        clamped denormalisation shift, and the exponent-field and overflow
        candidates for both values of ``P[47]``.
    Stage 5 (6, 8, 11's low part)
        ``P[47:17] = Plo[40:17] + Phi``: one 31-bit carry chain; beside it the
        OR of ``P[16:0]`` and the thermometer mask.
    Stage 6 (9-11, 13)
        A 49-bit right shift by ``v`` (0-26) beside the 1-bit normalisation,
        candidate select on ``P[47]``, sticky (mask AND, the OR of ``X[48:18]`` and
        stage 5's OR), guard;
        overflow -> inf.
    Stage 7 (12, 14-15)
        The round-to-nearest-even decision and the 31-bit increment of
        ``exponent field | fraction`` (carry into the exponent), sign and
        special-value selection into the ``p`` register.
    """

    LATENCY = 7

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
        reg, comb = pipeline_helpers(m, self.en)
        ps = product_stages(m, reg, comb, self.a, self.b)
        s3_esum, s3_d, s3_flags = ps["esum"], ps["d"], ps["flags3"]
        s5_prod, s5_low = ps["prod"], ps["low"]
        d = s3_d
        s4_norm = reg(d <= 0, "s4_norm", unsigned(1))
        s4_v = reg(Mux(d <= 0, 0, Mux(d >= MUL_MAX_SHIFT, MUL_MAX_SHIFT, d[:5])), "s4_v",
                   unsigned(5))
        s4_ef = [reg(Mux(er >= 1, er[:8], 0), f"s4_ef{t}", unsigned(8))
                 for t, er in enumerate(s3_esum)]
        s4_ovf = [reg(er >= 255, f"s4_ovf{t}", unsigned(1)) for t, er in enumerate(s3_esum)]
        s4_flags = reg(s3_flags, "s4_flags")

        s5_norm = reg(s4_norm, "s5_norm")
        s5_v = reg(s4_v, "s5_v")
        s5_mv = reg(Cat(*(s4_v >= k + 2 for k in range(25))), "s5_mv", unsigned(25))
        s5_ef = [reg(ef, f"s5_ef{t}") for t, ef in enumerate(s4_ef)]
        s5_ovf = [reg(ovf, f"s5_ovf{t}") for t, ovf in enumerate(s4_ovf)]
        s5_flags = reg(s4_flags, "s5_flags")

        # ---- stage 6: shift, guard, sticky (9-11, 13)
        sign, nan, inf, zero = s5_flags
        t = s5_prod[30]
        x = Cat(Const(0, 18), s5_prod)               # P << 1 (49 bits), P[16:0] zeroed
        # X >> u, u = t if norm else v: the subnormal shift by the registered v
        # runs in parallel with the 1-bit normalisation and is selected after
        shifted = comb(Mux(s5_norm, Mux(t, x >> 1, x), x >> s5_v), "s6", 49)
        mask = comb(Cat(Const((1 << 23) - 1, 23), ~s5_norm | t, s5_mv), "mask6", 49)
        ef = Mux(t, s5_ef[1], s5_ef[0])
        ovf = Mux(t, s5_ovf[1], s5_ovf[0])
        s6_word = reg(Cat(shifted[24:47], ef), "s6_word", unsigned(31))
        s6_guard = reg(shifted[23], "s6_guard")
        s6_sticky = reg((x & mask).any() | s5_low, "s6_sticky")
        s6_sign = reg(sign, "s6_sign")
        s6_nan = reg(nan, "s6_nan")
        s6_inf = reg(inf | (ovf & ~nan & ~zero), "s6_inf")
        s6_zero = reg(zero, "s6_zero")

        # ---- stage 7: round, pack (12, 14-15)
        up = s6_guard & (s6_sticky | s6_word[0])
        w = comb(s6_word + up, "w7", 31)
        result = Mux(s6_nan, CANONICAL_NAN,
                     Mux(s6_inf, Cat(Const(INF_BITS, 31), s6_sign),
                         Mux(s6_zero, Cat(Const(0, 31), s6_sign),
                             Cat(w, s6_sign))))
        m.d.comb += self.p.eq(reg(result, "s7_p", unsigned(32)))
        return m
