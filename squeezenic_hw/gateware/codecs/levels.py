"""Shared datapath of ``fixed`` and ``qsgd``: fp32 → level, and level → fp32.

Encoding (both codecs)::

    y = fl32(|x| · scale)                  Fp32Multiplier
    L = min(R(y), 2**(p-1) - 1)            0 when y is NaN, ≤ 0
    R(y) = nearest-even(y)                 stochastic = 0
         = ⌊y⌋ + [U < (y − ⌊y⌋)·2**32]     stochastic = 1, U from CounterRng

``y`` is decomposed exactly into its integer part ``I`` (15 bits suffice: any
``y ≥ 2**15`` saturates), 32 fraction bits ``F`` and a sticky bit for anything
below ``2**-32``; the stochastic comparison ``U < F + δ`` with ``0 ≤ δ < 1``
(``δ > 0`` iff sticky) is ``U < F or (U = F and sticky)``, exactly the
reference's real-number comparison.

Decoding: the integer code becomes an fp32 exactly (≤ 16 significant bits),
then ``fl32(c · aux)`` on the same multiplier.
"""

from amaranth import Const, Mux, Signal

from .counter_rng import CounterRng
from .fp32_mul import Fp32Multiplier

__all__ = ["ENCODE_LATENCY", "DECODE_LATENCY", "build_levels", "int_to_fp32",
           "build_scaled_values", "max_level", "top_bit"]

# x waits 4 cycles so that the product meets the random draws (CounterRng.LATENCY = 8)
_X_DELAY = CounterRng.LATENCY - Fp32Multiplier.LATENCY
#: cycles from the input beat to the registered level (decompose, shift, round).
ENCODE_LATENCY = _X_DELAY + Fp32Multiplier.LATENCY + 2
#: cycles from the input beat to the registered fp32 value.
DECODE_LATENCY = 1 + Fp32Multiplier.LATENCY + 1


def _clamped_param(param):
    """The parameter clamped to 2…16 (frames with other values never reach a unit
    in a lane; clamping keeps the unit's behaviour defined regardless)."""
    return Mux(param < 2, 2, Mux(param > 16, 16, param[:5]))[:5]


def top_bit(param):
    """Index ``p - 1`` of the top code bit, as an unsigned shift amount."""
    return (_clamped_param(param) - 1)[:5]


def max_level(param):
    """``2**(p-1) - 1`` for the clamped parameter ``p``."""
    return ((Const(1, 17) << top_bit(param)) - 1)[:16]


def build_levels(m, stager, payload, name):
    """Build the encoder datapath; return per element ``(level, negative, param)``.

    ``level`` (16 bits) and ``negative`` (the sign bit of x) are registered
    ``ENCODE_LATENCY - 1`` times, leaving one stage for the codec to form its code.
    """
    rng = m.submodules[f"{name}_rng"] = CounterRng()
    m.d.comb += [
        rng.seed.eq(payload.params.seed),
        rng.offset.eq(payload.offset),
        rng.en.eq(stager.enable),
    ]
    # Stages (counted in enabled cycles from the input beat):
    #   0..4  x waits (_X_DELAY) so that the product meets the random draws
    #   4..8  y = fl32(|x|·scale) in the multiplier; the draws u are ready at 8
    #   8..9  decompose y into integer part, 32 fraction bits and sticky
    #   9..10 round (nearest even or against u) and saturate: the level
    decompose_stage = _X_DELAY + Fp32Multiplier.LATENCY + 1
    params = stager.delay(payload.params, decompose_stage, name="params")
    scale = stager.delay(payload.params.scale, _X_DELAY, name="scale")
    top = max_level(params.param)
    param = stager.reg(params.param, name="param_q")  # aligned with the registered levels
    out = []
    for e in range(len(payload.elements)):
        x = stager.delay(payload.elements[e], _X_DELAY, name=f"x{e}")
        mul = m.submodules[f"{name}_mul{e}"] = Fp32Multiplier()
        m.d.comb += [
            mul.a.eq(x[:31]),  # |x|
            mul.b.eq(scale),
            mul.en.eq(stager.enable),
        ]
        integer, frac, sticky, zero, saturate = _decompose(m, stager, mul.p, e)
        u = stager.reg(rng.u[e], name=f"u{e}")
        up = Signal(name=f"up{e}")
        m.d.comb += up.eq(Mux(
            params.stochastic,
            (u < frac) | ((u == frac) & sticky),
            # nearest even: guard bit set and (anything below it, or I odd)
            frac[31] & ((frac[:31] != 0) | sticky | integer[0])))
        level = Signal(16, name=f"level{e}")
        rounded = integer + up
        m.d.comb += level.eq(Mux(zero, 0, Mux(saturate | (rounded > top), top, rounded)))
        negative = stager.delay(x[31], Fp32Multiplier.LATENCY + 2, name=f"neg{e}")
        out.append((stager.reg(level, name=f"level{e}_q"), negative, param))
    return out


def _decompose(m, stager, y, e):
    """y (fp32 bits, stage 8) → registered integer part, 32 fraction bits, sticky,
    zero and saturate flags (stage 9)."""
    exp = y[23:31]
    man = y[:23]
    zero = Signal(name=f"y{e}_zero")
    saturate = Signal(name=f"y{e}_sat")
    # NaN, negative (a negative scale), +0 and -0 give level 0; y ≥ 2^15 and inf saturate.
    m.d.comb += [
        zero.eq(y[31] | (exp == 0) & (man == 0) | (exp == 255) & (man != 0)),
        saturate.eq(exp >= 127 + 15),
    ]
    # y·2^32 = sig · 2^(E - 118) with E = max(exp, 1); as a fixed-point number
    # X = sig << 23 shifted right by r = 141 - E (r ≥ 48 leaves only sticky).
    sig = Mux(exp != 0, Const(1 << 23, 24) | man, man)
    big_e = Mux(exp == 0, 1, exp)
    r = Signal(range(49), name=f"y{e}_r")
    m.d.comb += r.eq(Mux(big_e < 141 - 47, 48, 141 - big_e))
    x = Signal(47, name=f"y{e}_x")
    m.d.comb += x.eq(Mux(saturate, 0, sig << 23))
    shifted = Signal(47, name=f"y{e}_shifted")
    m.d.comb += shifted.eq(x >> r)
    sticky = Signal(name=f"y{e}_sticky")
    m.d.comb += sticky.eq((shifted << r)[:47] != x)
    integer = stager.reg(shifted[32:47], name=f"y{e}_int")
    frac = stager.reg(shifted[:32], name=f"y{e}_frac")
    return (integer, frac, stager.reg(sticky, name=f"y{e}_sticky_q"),
            stager.reg(zero, name=f"y{e}_zero_q"), stager.reg(saturate, name=f"y{e}_sat_q"))


def int_to_fp32(m, magnitude, name):
    """fp32 bits of an unsigned integer of up to 16 bits (exact): a priority
    encoder for the leading one and a left shift."""
    width = len(magnitude)
    lead = Signal(range(width), name=f"{name}_lead")
    for k in range(width):  # the highest set bit wins
        with m.If(magnitude[k]):
            m.d.comb += lead.eq(k)
    bits = Signal(32, name=f"{name}_f32")
    mantissa = (magnitude << (23 - lead)[:5])[:23]
    with m.If(magnitude != 0):
        m.d.comb += bits.eq(Const(0, 32) | ((lead + 127) << 23) | mantissa)
    return bits


def build_scaled_values(m, stager, payload, name, magnitude_sign):
    """Decoder datapath: per element ``magnitude_sign(code, param) -> (mag, negate_int,
    negate_result)``; returns the registered fp32 results ``fl32(±mag · aux)``."""
    aux = stager.reg(payload.params.aux, name="aux")
    out = []
    for e in range(len(payload.codes)):
        mag, int_negative, result_negative = magnitude_sign(payload.codes[e],
                                                           payload.params.param)
        as_float = int_to_fp32(m, mag, f"c{e}")
        value = stager.reg(as_float | (int_negative << 31), name=f"c{e}_f32_q")
        flip = stager.reg(result_negative, name=f"flip{e}")
        mul = m.submodules[f"{name}_mul{e}"] = Fp32Multiplier()
        m.d.comb += [mul.a.eq(value), mul.b.eq(aux), mul.en.eq(stager.enable)]
        flip = stager.delay(flip, Fp32Multiplier.LATENCY, name=f"flip{e}")
        nan = (mul.p[23:31] == 255) & (mul.p[:23] != 0)
        # −fl32(L·aux): flip the sign, except of the canonical NaN
        out.append(stager.reg(mul.p ^ ((flip & ~nan) << 31), name=f"v{e}"))
    return out

