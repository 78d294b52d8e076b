"""The numpy reference codecs: the definition the hardware matches bit for bit.

Implements ``docs/wire-format.md`` sections 3–5 for codecs 0–6. All
functions are vectorised (no per-element Python loops) and take float32 arrays
whose NaN payloads are kept (use :func:`from_bits` to build them from bit
patterns).

Decisions where the spec is silent (also in ``docs/codecs.md``):

* **NaN results of arithmetic.** ``fl32(a·b)`` is numpy float32 multiplication
  (IEEE round to nearest even, subnormals kept), except that every NaN result
  is the canonical quiet NaN ``0x7FC00000``: IEEE leaves NaN payloads open and
  numpy's differ between CPUs (x86 gives ``0xFFC00000`` for ``0·inf``).
  Bit copies (``raw``, ``sign`` decode, ``bf16``/``fp16`` conversions) keep
  NaN signs and payloads as the codec table says.
* **``fixed``/``qsgd`` with y = fl32(|x|·scale) not > 0** (x NaN, scale NaN,
  negative or zero, ``0·inf``): the level is 0.
* **Stochastic rounding** draws ``u = U / 2**32`` with ``U`` from
  :mod:`.rng`; the comparison ``u < y − ⌊y⌋`` is exact.
* **``qsgd`` decode of a code with the sign bit set and level 0** (never made
  by the encoder): ``−fl32(0·aux)``.
"""

import numpy as np

from squeezenic_hw.spec.codecs import codec_info, f32_bits, validate_param
from squeezenic_hw.spec.fp32 import CANONICAL_NAN as FP32_CANONICAL_NAN

from .rng import draw_u32, tensor_indices

__all__ = [
    "CANONICAL_NAN", "to_bits", "from_bits", "mul_f32",
    "encode", "decode", "pack", "unpack",
]

#: The NaN every arithmetic NaN result becomes.
CANONICAL_NAN = np.uint32(FP32_CANONICAL_NAN)

_SIGN = np.uint32(0x80000000)
_ABS = np.uint32(0x7FFFFFFF)


def to_bits(x):
    """The uint32 bit patterns of a float32 array (a copy)."""
    return np.array(x, dtype=np.float32).view(np.uint32)


def from_bits(bits):
    """A float32 array with the given uint32 bit patterns (a copy; NaN payloads kept)."""
    return np.array(bits, dtype=np.uint32).view(np.float32)


def mul_f32(a, b):
    """``fl32(a·b)`` as bits: numpy float32 product, NaN results canonical."""
    with np.errstate(all="ignore"):
        p = (np.asarray(a, dtype=np.float32) * np.asarray(b, dtype=np.float32))
    bits = np.atleast_1d(p).view(np.uint32)
    return np.where(np.isnan(np.atleast_1d(p)), CANONICAL_NAN, bits).astype(np.uint32)


# ---- codecs: each is (encode(bits, ctx) -> codes, decode(codes, ctx) -> bits) ----

def _raw_encode(bits, ctx):
    return bits


def _raw_decode(codes, ctx):
    return codes


def _rne32(v, s):
    """Round ``v >> s`` to nearest even on uint32 arrays (1 ≤ s ≤ 31)."""
    one = np.uint32(1)
    q = v >> s
    rem = v & ((one << s) - one)
    half = one << (s - one)
    return q + ((rem > half) | ((rem == half) & ((q & one) == one)))


def _fp16_encode(bits, ctx):
    sign = (bits >> np.uint32(16)) & np.uint32(0x8000)
    mag = bits & _ABS
    exp = mag >> np.uint32(23)
    # Normal range and overflow: rebias by subtracting (127 - 15) << 23, round
    # the 23-bit mantissa to 10 bits; the carry ripples into the exponent and
    # everything at or past the 0x7C00 of infinity saturates there.
    with np.errstate(over="ignore"):
        out = np.minimum(_rne32(mag - np.uint32(112 << 23), np.uint32(13)), np.uint32(0x7C00))
    # Subnormal halves and zero: the significand counted in units of 2^-24.
    small = exp < 113
    e = np.maximum(exp[small], np.uint32(1))
    sig = (mag[small] & np.uint32(0x7FFFFF)) | (np.uint32(exp[small] > 0) << np.uint32(23))
    out[small] = _rne32(sig, np.minimum(np.uint32(126) - e, np.uint32(25)))
    # NaN keeps the top 10 payload bits (no quieting, as numpy), nudged to stay NaN.
    nan = mag > np.uint32(0x7F800000)
    payload = (mag[nan] >> np.uint32(13)) & np.uint32(0x3FF)
    out[nan] = np.uint32(0x7C00) | np.maximum(payload, np.uint32(1))
    return out | sign


def _fp16_decode(codes, ctx):
    h = codes & np.uint32(0xFFFF)
    sign = (h & np.uint32(0x8000)) << np.uint32(16)
    exp = (h >> np.uint32(10)) & np.uint32(0x1F)
    man = h & np.uint32(0x3FF)
    normal = ((exp + np.uint32(112)) << np.uint32(23)) | (man << np.uint32(13))
    special = np.uint32(0x7F800000) | (man << np.uint32(13))
    # Subnormal half m·2^-24: normalise so the leading one becomes the hidden bit.
    lead = np.floor(np.log2(np.maximum(man, 1))).astype(np.uint32)  # exact for < 2^10
    sub_exp = lead + np.uint32(103)
    sub_man = (man << (np.uint32(23) - lead)) & np.uint32(0x7FFFFF)
    sub = np.where(man == 0, 0, (sub_exp << np.uint32(23)) | sub_man)
    out = np.where(exp == 31, special, np.where(exp == 0, sub, normal))
    return (out | sign).astype(np.uint32)


def _bf16_encode(bits, ctx):
    nan = (bits & _ABS) > np.uint32(0x7F800000)
    b64 = bits.astype(np.uint64)
    rounded = (b64 + np.uint64(0x7FFF) + ((b64 >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    nan_code = ((bits >> np.uint32(16)) & np.uint32(0x8000)) | np.uint32(0x7FC0)
    return np.where(nan, nan_code, rounded.astype(np.uint32)).astype(np.uint32)


def _bf16_decode(codes, ctx):
    return ((codes & np.uint32(0xFFFF)) << np.uint32(16)).astype(np.uint32)


def _levels(bits, ctx, max_level):
    """Levels ``min(R(fl32(|x|·scale)), max_level)`` as int64; 0 where y is not > 0."""
    y = from_bits(mul_f32(from_bits(bits & _ABS), from_bits(ctx["scale_bits"])))
    y[~(y > 0)] = 0  # NaN, negative and zero products give level 0
    if ctx["stochastic"]:
        level = np.floor(y)
        with np.errstate(invalid="ignore"):  # inf - inf: the level saturates anyway
            frac = y - level  # exact in float32, and so is the scaling by 2^32 below
        u = draw_u32(ctx["seed"], tensor_indices(ctx["offset"], bits.size))
        level += u < frac * np.float32(2.0**32)  # compared exactly (promoted to float64)
    else:
        level = np.rint(y)  # nearest even, exactly as R() in the spec
    return np.minimum(level, np.float32(max_level)).astype(np.int64)


def _fixed_encode(bits, ctx):
    q = ctx["param"]
    level = _levels(bits, ctx, 2 ** (q - 1) - 1)
    negative = (bits & _SIGN) != 0
    c = np.where(negative, -level, level)
    return (c & ((1 << q) - 1)).astype(np.uint32)


def _fixed_decode(codes, ctx):
    q = ctx["param"]
    c = (codes & np.uint32((1 << q) - 1)).astype(np.int64)
    c = np.where(c >= 1 << (q - 1), c - (1 << q), c)
    return mul_f32(c.astype(np.float32), from_bits(ctx["aux_bits"]))


def _qsgd_encode(bits, ctx):
    b = ctx["param"]
    level = _levels(bits, ctx, 2 ** (b - 1) - 1)
    negative = ((bits & _SIGN) != 0) & (level > 0)
    return ((negative.astype(np.int64) << (b - 1)) | level).astype(np.uint32)


def _qsgd_decode(codes, ctx):
    b = ctx["param"]
    level = codes & np.uint32((1 << (b - 1)) - 1)
    negative = ((codes >> np.uint32(b - 1)) & np.uint32(1)) != 0
    v = mul_f32(level.astype(np.float32), from_bits(ctx["aux_bits"]))
    nan = v == CANONICAL_NAN
    return np.where(negative & ~nan, v ^ _SIGN, v).astype(np.uint32)


def _sign_encode(bits, ctx):
    return (bits >> np.uint32(31)).astype(np.uint32)


def _sign_decode(codes, ctx):
    return np.where((codes & np.uint32(1)) != 0, ctx["aux_bits"], ctx["scale_bits"]).astype(
        np.uint32)


def _natural_encode(bits, ctx):
    sign = bits >> np.uint32(31)
    exp = (bits >> np.uint32(23)) & np.uint32(0xFF)
    man = bits & np.uint32(0x7FFFFF)
    if ctx["stochastic"]:
        u = draw_u32(ctx["seed"], tensor_indices(ctx["offset"], bits.size))
        # u/2^32 < m/2^23  <=>  U < m·2^9 (exact in integers)
        up = u.astype(np.uint64) < (man.astype(np.uint64) << np.uint64(9))
    else:
        up = man >= np.uint32(1 << 22)
    exp = np.where(exp == 255, exp, exp + up.astype(np.uint32))
    return ((sign << np.uint32(8)) | exp).astype(np.uint32)


def _natural_decode(codes, ctx):
    sign = (codes >> np.uint32(8)) & np.uint32(1)
    exp = codes & np.uint32(0xFF)
    return ((sign << np.uint32(31)) | (exp << np.uint32(23))).astype(np.uint32)


_CODECS = {
    "raw": (_raw_encode, _raw_decode),
    "fp16": (_fp16_encode, _fp16_decode),
    "bf16": (_bf16_encode, _bf16_decode),
    "fixed": (_fixed_encode, _fixed_decode),
    "qsgd": (_qsgd_encode, _qsgd_decode),
    "sign": (_sign_encode, _sign_decode),
    "natural": (_natural_encode, _natural_decode),
}


def _context(codec, param, scale, aux, seed=0, offset=0, stochastic=False):
    info = codec_info(codec)
    if info.name not in _CODECS:
        raise ValueError(f"codec {info.name!r} has no reference implementation")
    param = validate_param(info.name, param)
    if not 0 <= int(seed) < 2**32:
        raise ValueError(f"seed must be a uint32, got {seed!r}")
    if not 0 <= int(offset) < 2**32:
        raise ValueError(f"offset must be a uint32, got {offset!r}")
    return info, {
        "param": param,
        "scale_bits": np.uint32(f32_bits(scale)),
        "aux_bits": np.uint32(f32_bits(aux)),
        "seed": int(seed),
        "offset": int(offset),
        "stochastic": bool(stochastic) and info.stochastic,
    }


def encode(x, codec, *, param=0, scale=1.0, aux=1.0, seed=0, offset=0, stochastic=False):
    """Encode float32 elements to codes (uint32, each masked to the code width).

    Element ``i`` has tensor index ``offset + i`` (mod 2**32) for the random
    draws. ``stochastic`` is ignored by codecs that have no stochastic mode.
    """
    info, ctx = _context(codec, param, scale, aux, seed, offset, stochastic)
    bits = np.ascontiguousarray(np.asarray(x, dtype=np.float32)).reshape(-1).view(np.uint32)
    return _CODECS[info.name][0](bits, ctx).astype(np.uint32)


def decode(codes, codec, *, param=0, scale=1.0, aux=1.0):
    """Decode codes (bits above the code width ignored) to float32 elements."""
    info, ctx = _context(codec, param, scale, aux)
    codes = np.asarray(codes, dtype=np.uint32).reshape(-1)
    return from_bits(_CODECS[info.name][1](codes, ctx))


def pack(codes, bits):
    """Pack codes of ``bits`` bits LSB-first into bytes (section 3); last byte zero-padded."""
    if not 1 <= bits <= 32:
        raise ValueError(f"bits must be 1..32, got {bits!r}")
    codes = np.asarray(codes, dtype=np.uint32).reshape(-1) & np.uint32((1 << bits) - 1)
    if bits in (8, 16, 32):
        return codes.astype(f"<u{bits // 8}").view(np.uint8).copy()
    shifts = np.arange(bits, dtype=np.uint32)
    matrix = ((codes[:, None] >> shifts) & np.uint32(1)).astype(np.uint8)
    return np.packbits(matrix.reshape(-1), bitorder="little")


def unpack(payload, bits, n):
    """Unpack ``n`` codes of ``bits`` bits from payload bytes (extra bytes ignored)."""
    if not 1 <= bits <= 32:
        raise ValueError(f"bits must be 1..32, got {bits!r}")
    payload = np.frombuffer(bytes(payload), dtype=np.uint8) if isinstance(
        payload, (bytes, bytearray, memoryview)) else np.asarray(payload, dtype=np.uint8)
    need = (n * bits + 7) // 8
    if payload.size < need:
        raise ValueError(f"payload has {payload.size} bytes, {n} codes of {bits} bits need {need}")
    if bits in (8, 16, 32):
        return payload[:need].view(f"<u{bits // 8}").astype(np.uint32)
    flat = np.unpackbits(payload[:need], bitorder="little")[:n * bits].reshape(n, bits)
    weights = (np.uint64(1) << np.arange(bits, dtype=np.uint64))
    return (flat.astype(np.uint64) @ weights).astype(np.uint32)
