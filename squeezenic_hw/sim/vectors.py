"""Test vectors: fp32 edge values and gradient-like random data, as uint32 bit patterns."""

import numpy as np

__all__ = ["EDGE_F32_BITS", "edge_f32", "random_f32_bits", "gradient_like", "beats_of"]


def _bits(values):
    return np.array(values, dtype=np.uint32)


# Every class of fp32 the codecs treat differently, with both signs.
_EDGE_POSITIVE = _bits([
    0x00000000,              # +0
    0x00000001, 0x00000002,  # smallest subnormals
    0x00000003, 0x000FFFFF,
    0x003FFFFF, 0x00400000, 0x00400001,  # subnormal around the natural rounding point
    0x007FFFFF,              # largest subnormal
    0x00800000, 0x00800001,  # smallest normals
    0x33000000, 0x33000001, 0x337FFFFF, 0x33800000,  # fp16 subnormal/underflow boundary
    0x387FC000, 0x387FE000, 0x387FFFFF, 0x38800000,  # fp16 min normal region
    0x3F800000, 0x3F800001, 0x3FC00000, 0x3FBFFFFF, 0x3FC00001,  # 1.0, 1.5 and neighbours
    0x3F801000, 0x3F802000, 0x3F803000, 0x3F801001,  # fp16 ties (half-way, even/odd)
    0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF,  # bf16 ties
    0x3F000000, 0x3EFFFFFF, 0x3F400000, 0x3FA00000, 0x40200000,  # 0.5, 1.25, 2.5 (rint ties)
    0x40400000, 0x40600000, 0x40A00000,  # 3, 3.5, 5
    0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FFFFF, 0x47800000,  # fp16 max / overflow
    0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF,  # near fp32 max (bf16 overflow by rounding)
    0x7F800000,              # +inf
    0x7F800001, 0x7F801FFF, 0x7F802000, 0x7FA00000,  # signalling NaNs, payloads
    0x7FC00000, 0x7FC00001, 0x7FFFFFFF, 0x7FBFFFFF,  # quiet NaNs, payloads
])

EDGE_F32_BITS = np.concatenate([_EDGE_POSITIVE, _EDGE_POSITIVE | np.uint32(0x80000000)])


def edge_f32():
    """The edge values as float32 (NaN payloads preserved)."""
    return EDGE_F32_BITS.view(np.float32).copy()


def random_f32_bits(rng, n):
    """Uniformly random bit patterns: every exponent, NaNs and infinities included."""
    return rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)


def gradient_like(rng, n, *, sparse_large=0.01, zeros=0.01):
    """fp32 values shaped like a gradient: mostly small, random signs, a few large, some 0."""
    g = rng.standard_normal(n).astype(np.float32) * np.float32(1e-3)
    big = rng.random(n) < sparse_large
    g[big] *= np.float32(1e3)
    g[rng.random(n) < zeros] = np.float32(0)
    return g.astype(np.float32)


def sparse_gradient(rng, n, density, *, scale=1.0, specials=True):
    """fp32 values for ``threshold`` at a given density of kept elements.

    Most elements are tiny (``|x| ≤ scale/10``, exact zeros and −0 among them); a
    fraction ``density`` is large (``scale < |x| ≤ 100·scale``), so that
    ``abs(x) > scale`` keeps about that share. With ``specials`` a few NaN
    (never kept, payloads and signs varied), ±inf (always kept), values equal
    to ±scale (not kept: the compare is strict) and the next float above scale
    (kept) are mixed in, replacing elements of the same kind.
    """
    scale = np.float32(scale)
    g = (rng.standard_normal(n) * 0.03).astype(np.float32) * scale
    g = np.clip(g, -scale / np.float32(10), scale / np.float32(10)).astype(np.float32)
    g[rng.random(n) < 0.02] = np.float32(0)
    g[rng.random(n) < 0.01] = np.float32(-0.0)
    big = rng.random(n) < density
    mag = scale * np.float32(1.0001) + rng.random(big.sum()).astype(np.float32) * 99 * scale
    g[big] = np.where(rng.random(big.sum()) < 0.5, -mag, mag).astype(np.float32)
    if specials and n >= 8:
        small = np.flatnonzero(~big)
        if small.size:
            pick = rng.choice(small, size=min(small.size, max(1, n // 200)), replace=False)
            nan_bits = (np.uint32(0x7F800001) + rng.integers(0, 2**22, pick.size).astype(
                np.uint32)) | (rng.integers(0, 2, pick.size).astype(np.uint32) << 31)
            g[pick] = nan_bits.view(np.float32)
            edge = rng.choice(small, size=min(small.size, 2), replace=False)
            g[edge] = np.array([scale, -scale], dtype=np.float32)[:edge.size]
        large = np.flatnonzero(big)
        if large.size:
            pick = rng.choice(large, size=min(large.size, 3), replace=False)
            above = np.nextafter(scale, np.float32(np.inf), dtype=np.float32)
            g[pick] = np.array([np.inf, -np.inf, above], dtype=np.float32)[:pick.size]
    return g


def beats_of(bits, valid_counts=None, per_beat=16):
    """Split a flat uint32 array into beats of ``per_beat`` elements and their valid masks.

    Returns ``(elements, masks)``: a list of lists of ints and a list of masks.
    The last beat is partial when the length is not a multiple of ``per_beat``.
    """
    bits = np.asarray(bits, dtype=np.uint32)
    elements, masks = [], []
    for start in range(0, len(bits), per_beat):
        chunk = [int(v) for v in bits[start:start + per_beat]]
        masks.append((1 << len(chunk)) - 1)
        elements.append(chunk + [0] * (per_beat - len(chunk)))
    return elements, masks
