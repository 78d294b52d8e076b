"""Bit-level numpy model of the pipelined fp32 multiplier
(:class:`squeezenic_hw.gateware.codecs.fp32_mul.Fp32Multiplier`).

It follows the algorithm in the multiplier's module docstring step by step: the model
computes the quantities the gateware registers, stage by stage (where the gateware prepares
two candidates of a value for the two possible values of ``P[47]``, the model computes the
selected one directly). Its result is ``fl32(a * b)`` with every NaN as ``0x7FC00000``.
"""

import numpy as np

from squeezenic_hw.spec.fp32 import CANONICAL_NAN, FRAC_MASK, INF_BITS, MUL_MAX_SHIFT, SIG_MASK

__all__ = ["fp32_mul_model"]


def _lz_model(e, f):
    """Step 4's ``lz``: for ``e = 0`` the leading zeros of the 23-bit ``f`` (23 for 0),
    else 0 (int64 arrays).

    Only subnormals and zeros (rare in most data) go through the binary search.
    """
    lz = np.zeros(f.shape, dtype=np.int64)
    idx = np.flatnonzero(e == 0)
    if idx.size:
        x = (f[idx] << 1) | 1       # 24 bits, padded with a one below: 23 for f = 0
        z = np.zeros(idx.size, dtype=np.int64)
        for k in (16, 8, 4, 2, 1):
            top_zero = (x >> (24 - k)) == 0
            x = np.where(top_zero, (x << k) & SIG_MASK, x)
            z += top_zero * k
        lz[idx] = z
    return lz


def fp32_mul_model(a_bits, b_bits):
    """Bit-level model of :class:`~squeezenic_hw.gateware.codecs.fp32_mul.Fp32Multiplier`.

    Follows the module docstring's algorithm step by step, vectorised with
    integer numpy operations only (no float arithmetic, no per-element loops).

    Parameters
    ----------
    a_bits, b_bits : array_like of int
        binary32 bit patterns (e.g. ``x.view(np.uint32)``); broadcast together.
        Only the low 32 bits of each value are used.

    Returns
    -------
    numpy.ndarray of uint32
        Bit patterns of ``fl32(a * b)``, NaN results as ``0x7FC00000``; the
        broadcast shape of the operands.

    Raises
    ------
    TypeError
        If an operand is not of an integer (or bool) dtype.
    """
    a = np.asarray(a_bits)
    b = np.asarray(b_bits)
    if a.dtype.kind not in "iub" or b.dtype.kind not in "iub":
        raise TypeError("fp32_mul_model takes integer bit patterns, not floats")
    shape = np.broadcast_shapes(a.shape, b.shape)
    # All arithmetic in int64: every intermediate fits (X has 49 bits).
    a = np.broadcast_to(a, shape).astype(np.int64).ravel() & 0xFFFFFFFF
    b = np.broadcast_to(b, shape).astype(np.int64).ravel() & 0xFFFFFFFF

    # ---- stage 1: unpack, classify, count leading zeros, exponent base (steps 1-5)
    sign = (a ^ b) >> 31
    ea = (a >> 23) & 0xFF
    eb = (b >> 23) & 0xFF
    fa = a & FRAC_MASK
    fb = b & FRAC_MASK
    a_max, b_max = ea == 255, eb == 255
    a_zero = (ea == 0) & (fa == 0)
    b_zero = (eb == 0) & (fb == 0)
    a_inf = a_max & (fa == 0)
    b_inf = b_max & (fb == 0)
    is_nan = (a_max & ~a_inf) | (b_max & ~b_inf) | (a_inf & b_zero) | (a_zero & b_inf)
    is_inf = ~is_nan & (a_inf | b_inf)
    is_zero = ~is_nan & ~is_inf & (a_zero | b_zero)
    lza = _lz_model(ea, fa)
    lzb = _lz_model(eb, fb)
    ebase = ea + eb - 127

    # ---- stage 2: normalising shift (steps 3, 4)
    ma = np.where(ea == 0, (fa << (lza + 1)) & SIG_MASK, fa | (1 << 23))
    mb = np.where(eb == 0, (fb << (lzb + 1)) & SIG_MASK, fb | (1 << 23))

    # ---- stages 3, 4: partial products (step 6), exponent (step 7, stage 3), shift
    # preparation (step 8, stage 4)
    prod_lo = (ma & 0x1FFFF) * mb         # 17 x 24
    prod_hi = (ma >> 17) * mb             # 7 x 24
    esum = ebase - (lza + lzb)
    norm = esum >= 1
    v = np.minimum(np.maximum(1 - esum, 0), MUL_MAX_SHIFT)

    # ---- stage 5: P[47:17] from the two parts, the OR of P[16:0], the thermometer
    # (steps 6, 11, 8)
    prod = (((prod_lo >> 17) + prod_hi) << 17) | (prod_lo & 0x1FFFF)
    low_sticky = (prod_lo & 0x1FFFF) != 0

    # ---- stage 6: shift, guard, sticky (steps 9-11, 13)
    t = prod >> 47
    x = prod << 1
    u = np.where(norm, t, v)
    s = x >> u
    frac = (s >> 24) & FRAC_MASK
    guard = (s >> 23) & 1
    er = esum + t
    ef = np.maximum(er, 0) & 0xFF
    # the mask keeps X[17:1] = P[16:0] whatever u: those are low_sticky
    sticky = ((x & ((1 << (23 + u)) - 1) & ~((1 << 18) - 1)) != 0) | low_sticky
    is_inf |= (er >= 255) & ~is_nan & ~is_zero

    # ---- stage 7: round decision, round (the carry ripples into the exponent field),
    # pack (steps 12, 14-15)
    up = guard & (sticky | frac)
    w = ((ef << 23) | frac) + up
    p = (sign << 31) | np.where(is_inf, INF_BITS, np.where(is_zero, 0, w))
    p[is_nan] = CANONICAL_NAN
    return p.astype(np.uint32).reshape(shape)
