"""Shared datapath of ``fixed`` and ``qsgd``: fp32 → level, and level → fp32 (and in a
bank with either, ``fp16``'s rounding of its subnormal range: :func:`fp16_on_levels`).

Encoding (both codecs)::

    y = fl32(|x| · scale)                  ScaledFixedPoint: I, F and sticky of y
    L = min(R(y), 2**(p-1) - 1)            0 when y is NaN, ≤ 0
    R(y) = nearest-even(y)                 stochastic = 0
         = ⌊y⌋ + [U < (y − ⌊y⌋)·2**32]     stochastic = 1, U from CounterRng

``y`` is decomposed exactly into its integer part ``I`` (15 bits suffice: any
``y ≥ 2**15`` saturates), 32 fraction bits ``F`` and a sticky bit for anything
below ``2**-32``; the stochastic comparison ``U < F + δ`` with ``0 ≤ δ < 1``
(``δ > 0`` iff sticky) is ``U < F or (U = F and sticky)``, exactly the
reference's real-number comparison.

Decoding: the code's magnitude and sign, then ``fl32(±c · aux)`` by
:class:`~.integer_product.IntegerProduct` (an integer times an fp32 on one DSP48E2;
rounding to nearest even is symmetric, so ``fl32(-c · aux) = -fl32(c · aux)``, and a
NaN result is the canonical NaN either way).

The codec parameter ``p`` (2…16; other values are clamped) enters as
thermometer and one-hot masks of the code bits (:func:`code_mask`,
:func:`max_level`, :func:`top_bit_select`), each bit a compare of ``param``
with a constant: no shifter or adder on the parameter's path.
"""

from amaranth import Cat, Const, Mux, Signal

from squeezenic_hw.spec.codecs import codec_info

from .counter_rng import CounterRng, beat_draws
from .fp16 import SUBNORMAL_SCALE, fp16_normal_stages
from .integer_product import IntegerProduct
from .scaled_fixed_point import ScaledFixedPoint
from .unit import CodecParams

__all__ = ["ENCODE_LATENCY", "DECODE_LATENCY", "ELEMENTS_HELD", "build_levels",
           "build_scaled_values", "shared_levels", "shared_level_codes", "shared_scaled_values",
           "magnitude_sign", "code_mask", "max_level", "top_bit_select"]

_FIXED_ID = codec_info("fixed").id
_QSGD_ID = codec_info("qsgd").id
_FP16_ID = codec_info("fp16").id

# Encoder stages after y's integer part and fraction: two to round and saturate.
_ROUND = 2
# The draws are needed by the first rounding stage: x waits (_X_DELAY) if the generator is
# the slower, the draws wait (_U_DELAY) if the product is.
_X_DELAY = max(0, CounterRng.LATENCY - ScaledFixedPoint.LATENCY)
_U_DELAY = _X_DELAY + ScaledFixedPoint.LATENCY - CounterRng.LATENCY
#: cycles from the input beat to the registered level (product, round, saturate).
ENCODE_LATENCY = _X_DELAY + ScaledFixedPoint.LATENCY + _ROUND
#: cycles the encoder registers the elements unchanged: x waits, then the product's
#: first stage registers its fraction.
ELEMENTS_HELD = _X_DELAY + 1
# Decoder stages before the product: the code and the per-beat masks; its sign; the
# magnitude.
_MAGNITUDE = 3
#: cycles from the input beat to the registered fp32 value (the product's output).
DECODE_LATENCY = _MAGNITUDE + IntegerProduct.LATENCY


def code_mask(param):
    """The ``p`` low bits set (16 bits): bit ``k`` is ``k < clamp(param, 2, 16)``."""
    return Cat(*(Const(1) if k < 2 else param > k for k in range(16)))


def max_level(param):
    """``2**(p-1) - 1`` for the clamped parameter ``p`` (16 bits, a thermometer)."""
    return code_mask(param)[1:]


def top_bit_select(param):
    """One-hot (16 bits) of the top code bit ``p - 1`` for the clamped parameter ``p``."""
    return Cat(Const(0), param <= 2, *(param == k + 1 for k in range(2, 15)), param >= 16)


def fp16_on_levels(codecs):
    """Whether ``fp16`` encodes on the ``fixed``/``qsgd`` datapath in a bank of ``codecs``
    (ids): when it has one of them, whose 16 multipliers then also round ``fp16``'s
    subnormal range (:class:`~.fp16_levels.Fp16LevelEncoder`)."""
    codecs = set(codecs)
    return _FP16_ID in codecs and bool({_FIXED_ID, _QSGD_ID} & codecs)


def _level_codecs(shared, kind):
    """The codecs (ids) whose codes one ``level_codes`` part forms: those of the bank that
    use the levels, or ``kind``'s alone without a bank."""
    if shared is None:
        return {kind}
    ids = {_FIXED_ID, _QSGD_ID} & shared.codecs
    return ids | ({_FP16_ID} if fp16_on_levels(shared.codecs) else set())


#: The parameters an ``fp16`` beat gives the datapath: ``|x| · 2**24`` rounded to nearest
#: even (deterministic, whatever the header's flag), and no clamp below 2**15 - 1.
_FP16_PARAMS = {"param": 16, "stochastic": 0, "scale": SUBNORMAL_SCALE}


def _level_params(m, payload, codecs):
    """The datapath's parameters for ``payload``: the beat's own, or with ``fp16`` among
    ``codecs``, :data:`_FP16_PARAMS` for an ``fp16`` beat (a multiplexer a beat, not an
    element)."""
    if _FP16_ID not in codecs:
        return payload.params
    params = Signal(CodecParams, name="level_params")
    is_fp16 = (payload.meta.codec == _FP16_ID) if len(codecs) > 1 else Const(1)
    m.d.comb += params.eq(payload.params)
    for field, value in _FP16_PARAMS.items():
        m.d.comb += getattr(params, field).eq(Mux(is_fp16, value,
                                                  getattr(payload.params, field)))
    return params


def shared_levels(m, stager, payload, shared, codecs):
    """:func:`build_levels` once per pipeline: ``fixed`` and ``qsgd`` differ only in how
    they form a code from the level, so in a bank (``shared``, a
    :class:`~squeezenic_hw.gateware.codecs.unit.SharedParts`) one datapath, its 16
    multipliers and the bank's one random generator serve both (and ``fp16``'s
    subnormal range, :func:`fp16_on_levels`), the frame's parameters taken from each
    beat. Without ``shared``: a datapath of the caller's own. ``codecs``: the ids the
    datapath serves (:func:`_level_codecs`)."""
    def build():
        params = _level_params(m, payload, codecs)
        # fixed's code is the signed level: its beats' levels come negated where x is
        negated = None
        if _FIXED_ID in codecs:
            negated = (payload.meta.codec == _FIXED_ID) if len(codecs) > 1 else Const(1)
        return build_levels(m, stager, payload, "lv", beat_draws(m, stager, payload, shared),
                            params=params, negated=negated)
    return build() if shared is None else shared.get("levels", build)


def shared_level_codes(m, stager, payload, shared, codec):
    """The 16 codes of a ``fixed``, ``qsgd`` or ``fp16`` encoder (``codec``, its name),
    registers ``ENCODE_LATENCY + 1`` enabled cycles after the input beat, from
    :func:`shared_levels`. In a bank with several, one register per element takes the
    beat's codec's code (the codes differ only in this last stage).

    ``fixed``: ``c mod 2**q``, ``c = ±level``. ``qsgd``: the level, with bit ``b - 1``
    the sign of x when the level is not 0. ``fp16``: below the fp16 normals the level
    (``|x| · 2**24`` rounded), else :func:`~.fp16.fp16_normal_stages`' code; the sign
    of x on top."""
    kind = codec_info(codec).id
    ids = _level_codecs(shared, kind)
    levels = shared_levels(m, stager, payload, shared, ids)

    def form(name):
        beat_codec = stager.delay(payload.meta.codec, ENCODE_LATENCY, name="level_codec") \
            if len(ids) > 1 else None
        line = shared.find("input_line") if shared is not None else None
        tap = ENCODE_LATENCY - 2          # the fp16 normal path: two stages to the level's
        codes = []
        for e, (level, negative, mask, top_bit) in enumerate(levels):
            forms = {}
            if _FIXED_ID in ids:
                forms[_FIXED_ID] = level & mask      # negated in the datapath where x is
            if _QSGD_ID in ids:
                forms[_QSGD_ID] = (level | Mux(negative & (level != 0), top_bit, 0))[:16]
            if _FP16_ID in ids:
                x = (line[tap].elements[e] if line is not None and tap in line
                     else stager.delay(payload.elements[e], tap, name=f"fp16_x{e}"))
                normal, subnormal = fp16_normal_stages(m, stager, x, f"fp16_{e}")
                forms[_FP16_ID] = Cat(Mux(subnormal, level[:15], normal), negative)
            if beat_codec is None:
                (code,) = forms.values()
            else:
                code = Signal(16, name=f"{name}_form{e}")
                with m.Switch(beat_codec):
                    for c, value in forms.items():
                        with m.Case(c):
                            m.d.comb += code.eq(value)
            codes.append(stager.reg(code, name=f"{name}_code{e}"))
        return codes

    if shared is None:
        return form({_FIXED_ID: "fx", _QSGD_ID: "qs", _FP16_ID: "f16"}[kind])
    return shared.get("level_codes", lambda: form("lv"))


def build_levels(m, stager, payload, name, draws, params=None, negated=None):
    """Build the encoder datapath; return per element ``(level, negative, mask, top)``.

    ``draws`` are the beat's random draws, ``CounterRng.LATENCY`` enabled cycles after
    the input beat (:func:`~squeezenic_hw.gateware.codecs.counter_rng.beat_draws`);
    ``params``: the codec parameters to use (default the beat's, ``payload.params``).
    ``negated`` (1 bit, of the input beat): the levels of negative elements come
    negated, 16-bit two's complement (``fixed``'s code before its mask): ``-(I + up)``
    is ``~I + ~up``, the same adder with its inputs inverted.
    ``level`` (16 bits), ``negative`` (the sign bit of x) and, for the frame's
    codec parameter, ``mask`` (:func:`code_mask`) and ``top``
    (:func:`top_bit_select`) are registers ``ENCODE_LATENCY`` enabled cycles
    after the input beat, leaving the codec one stage to form its code.
    """
    # Stages (counted in enabled cycles from the input beat; _X_DELAY = 1 and
    # _U_DELAY = 0 with today's latencies, CounterRng 11 and ScaledFixedPoint 10):
    #   0..X        x waits (_X_DELAY)
    #   X..X+10     y = fl32(|x|·scale) as integer part, 32 fraction bits, sticky, zero
    #               and saturate flags; the draws u come at 11
    #   X+10..X+11  round-up decision (nearest even, or against u); I vs the top level
    #   X+11..X+12  I + up, saturate: the level
    round_stage = _X_DELAY + ScaledFixedPoint.LATENCY
    params = payload.params if params is None else params
    scale = stager.delay(params.scale, _X_DELAY, name="scale")
    params = stager.delay(params, round_stage - 1, name="params")
    top = stager.reg(max_level(params.param), name="top")       # beside I and F
    top_q = stager.reg(top, name="top_q")
    neg_top_q = stager.reg((-Cat(top, Const(0, 1)))[:16], name="neg_top_q")
    params = stager.reg(params, name="params_r")
    # at the level's stage: whether negative levels come negated
    negated = (Const(0) if negated is None
               else stager.delay(negated, round_stage + 1, name="negated"))
    # the masks the codes need, aligned with the levels
    mask = stager.delay(code_mask(params.param), _ROUND, name="mask_q")
    top_bit = stager.delay(top_bit_select(params.param), _ROUND, name="top_bit_q")
    out = []
    for e in range(len(payload.elements)):
        x = stager.delay(payload.elements[e], _X_DELAY, name=f"x{e}")
        unit = m.submodules[f"{name}_y{e}"] = ScaledFixedPoint()
        m.d.comb += [unit.x.eq(x), unit.scale.eq(scale), unit.en.eq(stager.enable)]
        integer, frac, sticky = unit.integer, unit.frac, unit.sticky
        zero, saturate = unit.zero, unit.saturate
        u = stager.delay(draws[e], _U_DELAY, name=f"u{e}")
        # round-up decision
        up = Signal(name=f"up{e}")
        m.d.comb += up.eq(Mux(
            params.stochastic,
            # u < frac, or u = frac with the sticky bit: the carry out of
            # frac + ~u + sticky, one carry chain (compare and equality apart map as a
            # chain of LUTs, seven deep under an area-minded mapper, and more of them)
            (Cat(frac, Const(0, 1)) + Cat(~u, Const(0, 1)) + sticky)[32],
            # nearest even: guard bit set and (anything below it, or I odd)
            frac[31] & ((frac[:31] != 0) | sticky | integer[0])))
        up = stager.reg(up, name=f"up{e}_q")
        # I + up > top  <=>  I > top, or I = top and up
        above = stager.reg(integer > top, name=f"above{e}")
        at_top = stager.reg(integer == top, name=f"at_top{e}")
        integer = stager.reg(integer, name=f"int{e}_q")
        zero = stager.reg(zero, name=f"zero{e}_q")
        saturate = stager.reg(saturate, name=f"sat{e}_q")
        sign = stager.delay(x[31], ScaledFixedPoint.LATENCY + _ROUND - 1, name=f"sign{e}")
        # the level (negated: inverted adder inputs, the top level's negation)
        flip = negated & sign
        level = Signal(16, name=f"level{e}")
        m.d.comb += level.eq(Mux(saturate | above | (at_top & up),
                                 Mux(flip, neg_top_q, top_q),
                                 (Cat(integer, Const(0, 1)) ^ flip.replicate(16)) + (up ^ flip)))
        # a zero level (NaN, ±0, negative scale) clears the register: its reset
        out.append((stager.reg(level, name=f"level{e}_q", clear=zero),
                    stager.reg(sign, name=f"neg{e}"), mask, top_bit))
    return out


def magnitude_sign(code, top, qsgd):
    """A ``fixed`` or ``qsgd`` code's ``(negate, negative)`` for :func:`build_scaled_values`
    (combinational), from the code and ``top`` (:func:`top_bit_select` of its parameter):
    the magnitude is ``((code ^ negate) + negate) & mask`` (``negate`` replicated over 16
    bits) and ``negative`` the sign of the decoded value.

    ``fixed``: the q-bit two's complement code; ``|c|`` is ``code & mask``, or
    ``(-code) mod 2**q`` (``~code + 1``) when negative. ``qsgd``: the level is the
    ``b - 1`` low bits, either way. The sign is bit ``p - 1`` for both. ``qsgd`` is a
    Python bool (one codec) or a 1-bit value (chosen per beat: whether a negative code is
    negated).
    """
    negative = (code & top).any()
    if isinstance(qsgd, bool):
        return (Const(0) if qsgd else negative), negative
    return negative & ~qsgd, negative


def shared_scaled_values(m, stager, payload, shared, qsgd):
    """:func:`build_scaled_values` of a ``fixed`` (``qsgd`` False) or ``qsgd`` decoder.
    In a bank with both (``shared``, a
    :class:`~squeezenic_hw.gateware.codecs.unit.SharedParts`) one datapath and its 16
    multipliers serve both, the code's reading chosen by the beat's ``meta.codec``."""
    if shared is None or not {_FIXED_ID, _QSGD_ID} <= shared.codecs:
        return build_scaled_values(m, stager, payload, "qs" if qsgd else "fx", qsgd)
    def build():
        return build_scaled_values(m, stager, payload, "sc",
                                   payload.meta.codec == _QSGD_ID)
    return shared.get("scaled", build)


def build_scaled_values(m, stager, payload, name, qsgd):
    """Decoder datapath of ``fixed`` (``qsgd`` False), ``qsgd`` (True) or both (a 1-bit
    value, per beat): per element the fp32 result ``fl32(±magnitude · aux)``, registers
    ``DECODE_LATENCY`` enabled cycles after the input beat.

    Stage 1 registers the code, and per beat the one-hot of the code's top bit, the
    parameter's mask and the codec; stage 2 the code's sign (an AND-OR of registers); stage
    3 the magnitude, one carry chain (the inversion in its LUTs); the product's search
    for the leading one follows. Every stage's logic starts at flip-flops, so no LUT
    mapping can stretch the sign's decode into a deep chain."""
    params = payload.params
    aux = stager.delay(params.aux, _MAGNITUDE, name="aux")
    top = stager.reg(top_bit_select(params.param), name="code_top")
    # The mask from the parameter registered first (clamped to five bits, 16 and above
    # alike): the parameter comes out of a shift register, and a thermometer of it is a
    # chain that a mapper minding area builds deep.
    param = stager.reg(Cat(params.param[:4], params.param[4:] != 0), name="code_param")
    if isinstance(qsgd, bool):
        beat_mask = max_level(param) if qsgd else code_mask(param)
    else:
        qsgd = stager.reg(qsgd, name="code_qsgd")
        beat_mask = Mux(qsgd, max_level(param), code_mask(param))
    mask = stager.delay(beat_mask, _MAGNITUDE - 2, name="code_mask")
    out = []
    for e in range(len(payload.codes)):
        code = stager.reg(payload.codes[e][:16], name=f"c{e}_code")
        negate, negative = magnitude_sign(code, top, qsgd)
        code = stager.reg(code, name=f"c{e}_code2")
        negate = stager.reg(negate, name=f"c{e}_negate")
        negative = stager.delay(negative, _MAGNITUDE - 1, name=f"c{e}_neg")
        magnitude = stager.reg(((code ^ negate.replicate(16)) + negate)[:16] & mask,
                               name=f"c{e}_magnitude")
        product = m.submodules[f"{name}_mul{e}"] = IntegerProduct()
        m.d.comb += [product.c.eq(magnitude), product.negative.eq(negative),
                     product.b.eq(aux), product.en.eq(stager.enable)]
        out.append(product.p)
    return out
