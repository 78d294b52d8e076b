"""``fixed`` codes of one build-time width when ``scale`` is a power of two: no multiplier.

With ``scale = ±2**s`` (or ±0, ±inf, NaN) the product ``fl32(|x|·scale)`` is exact
wherever it can give a level other than 0 or the top one: ``|x|`` has at most 24
significant bits, and a result below ``2**-126`` (the only one that would round) is
below one half. So the level ``min(R(y), 2**(q-1) - 1)``, ``R`` nearest even, is the
significand of x shifted by its exponent plus ``s``, rounded::

    u = max(e_x, 1) + e_s - 253          y in [2**(u-2), 2**(u-1)) for a normal x
    u < 0       level 0                  (y < 1/2)
    0 ≤ u ≤ q   I = sig >> (24 - u), half = sig[23 - u], below = sig[:23 - u] ≠ 0,
                level = min(I + (half & (below | I[0])), 2**(q-1) - 1)
    u > q       the top level

``sig`` is x's significand with its hidden bit (none for a subnormal x). Level 0 for
x NaN or zero, and for a scale that is NaN, zero or negative; the top level for x
infinite or an infinite scale (with x neither zero nor NaN). The code is
``±level mod 2**q``, as :class:`~.fixed.FixedEncoder` forms it.

A scale with fraction bits (not a power of two) gives undefined codes: the caller
makes sure it never comes (the generator lanes clear them, ``docs/lanes.md``).
"""

from amaranth import Cat, Const, Mux, Signal
from amaranth.lib import data

__all__ = ["POW2_WIDTHS", "POW2_FIXED_LATENCY", "Pow2Scale", "pow2_scale_of",
           "pow2_fixed_codes"]

#: Code widths this datapath is built for (a 512-bit row holds whole beats of codes).
POW2_WIDTHS = (2, 4, 8)

#: Enabled cycles from the elements to the registered codes.
POW2_FIXED_LATENCY = 3


class Pow2Scale(data.Struct):
    """What the codes need of a frame's scale, worked out once per frame, so that an
    element needs no adder: ``u`` < 0 and ``u`` > q are compares of ``max(e_x, 1)`` with
    constants of the frame, and only ``u``'s low four bits are summed."""
    bias: 4          # (e_s - 253) mod 16
    below: 8         # u < 0  <=>  max(e_x, 1) < below   (253 - e_s, at least 0)
    above: 8         # u > q  <=>  max(e_x, 1) > above   (q + 253 - e_s, at most 255)
    zero: 1          # every level is 0 (scale NaN, ±0 or negative)
    inf: 1           # every level is the top one, but for x zero or NaN


def pow2_scale_of(scale, q):
    """The :class:`Pow2Scale` fields of the 32 ``scale`` bits for width ``q`` (a value
    to register)."""
    es = scale[23:31]
    nan = (es == 255) & (scale[:23] != 0)
    below = Const(253, 9) - es                  # negative (e_s > 253): never
    above = Const(q + 253, 10) - es             # above 255: never (e_x = 255 aside)
    return Cat((es - 253)[:4], Mux(below[-1], 0, below[:8]),
               Mux(above[8:].any(), 255, above[:8]),
               scale[31] | (es == 0) | nan, (es == 255) & ~nan)


def pow2_fixed_codes(m, stager, elements, valid, frame, q):
    """The ``q``-bit codes of ``elements`` (fp32 bit patterns), registers
    :data:`POW2_FIXED_LATENCY` enabled cycles of ``stager`` later; 0 where ``valid``
    (one bit per element) is 0. ``frame`` is the frame's :class:`Pow2Scale` (a register
    that holds while its frame's beats enter)."""
    if q not in POW2_WIDTHS:
        raise ValueError(f"q must be one of {POW2_WIDTHS}, got {q!r}")
    top = 2 ** (q - 1) - 1
    codes = []
    for e, x in enumerate(elements):
        # stage 1: the shift u, and the cases that do not need it
        ex, f = x[23:31], x[:23]
        ex_eff = Cat(ex[0] | ~ex.any(), ex[1:])
        x_nan = (ex == 255) & f.any()
        x_zero = ~ex.any() & ~f.any()
        x_inf = (ex == 255) & ~f.any()
        zero = frame.zero | x_nan | x_zero | ((ex_eff < frame.below) & ~x_inf & ~frame.inf)
        # u > q: above every shift
        sat = x_inf | frame.inf | (ex_eff > frame.above)
        u4 = (ex_eff[:4] + frame.bias)[:4]
        s1 = stager.reg(Cat(f, ex.any(), u4, zero, sat & ~zero, x[31], valid[e]),
                        name=f"fx{e}_s1")
        sig, u4 = s1[:24], s1[24:28]
        zero, sat, neg, ok = s1[28], s1[29], s1[30], s1[31]
        # stage 2: integer part, half bit and the bits below it, selected by u
        common = sig[:23 - q].any()
        picked = Signal(q + 2, name=f"fx{e}_pick")
        with m.Switch(u4):
            for k in range(q + 1):
                integer = Cat(sig[24 - k:24], Const(0, q - k)) if k < q else sig[24 - q:]
                below = (common | sig[23 - q:23 - k].any()) if k < q else common
                with m.Case(k):
                    m.d.comb += picked.eq(Cat(integer, sig[23 - k], below))
        s2 = stager.reg(Cat(picked, zero | ~ok, sat, neg), name=f"fx{e}_s2")
        integer, half, below = s2[:q], s2[q], s2[q + 1]
        zero, sat, neg = s2[q + 2], s2[q + 3], s2[q + 4]
        # stage 3: round, saturate, sign; ±(I + up) = (I ^ neg) + (up ^ neg) mod 2**q
        up = half & (below | integer[0])
        over = sat | integer[q - 1] | (integer[:q - 1].all() & up)
        negs = neg.replicate(q)
        signed_sum = ((integer ^ negs) + (up ^ neg))[:q]
        top_code = ((Const(top, q) ^ negs) + neg)[:q]
        code = Signal(q, name=f"fx{e}_code")
        with m.If(zero):
            m.d.comb += code.eq(0)
        with m.Elif(over):
            m.d.comb += code.eq(top_code)
        with m.Else():
            m.d.comb += code.eq(signed_sum)
        codes.append(stager.reg(code, name=f"fx{e}_code_q"))
    return codes
