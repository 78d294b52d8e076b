"""A stream recipe made into host frames: values, scales, lengths, offsets and
the header fields that vary."""

import struct
from dataclasses import replace

import numpy as np

from squeezenic_hw.spec.codecs import codec_info, f32_bits
from squeezenic_hw.spec.frames import Header, build_host_frame
from squeezenic_hw.spec.header import FLAG_FLUSH, FLAG_STOCHASTIC

from ..vectors import EDGE_F32_BITS, gradient_like, random_f32_bits, sparse_gradient
from .recipes import MALFORMED_MARK, MAX_ELEMENTS, U32

__all__ = ["stream_frames"]


def _f32(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def _usable(scale):
    """``|scale|`` when it is a positive normal number, else 1.0."""
    s = np.float32(abs(scale))
    return s if np.isfinite(s) and s >= np.finfo(np.float32).tiny else np.float32(1)


def _tie_values(rng, n, scale):
    """Rounding ties of every codec: ``(k + ½)/scale`` (``fixed``, ``qsgd``), fp16 and
    bf16 half-way mantissas, ``natural``'s rounding point ``m = 2²²``."""
    kind = rng.integers(0, 4, n)
    sign = rng.integers(0, 2, n).astype(np.uint32) << 31
    s = _usable(scale)
    k = rng.integers(0, 2**15, n).astype(np.float32)
    levels = ((k + np.float32(0.5)) / s).astype(np.float32).view(np.uint32)
    fp16 = (rng.integers(103, 143, n).astype(np.uint32) << 23) | (
        rng.integers(0, 2**10, n).astype(np.uint32) << 13) | np.uint32(0x1000)
    bf16 = (rng.integers(1, 255, n).astype(np.uint32) << 23) | (
        rng.integers(0, 2**7, n).astype(np.uint32) << 16) | np.uint32(0x8000)
    natural = (rng.integers(1, 255, n).astype(np.uint32) << 23) | np.uint32(0x400000)
    bits = np.choose(kind, [levels, fp16, bf16, natural]).astype(np.uint32)
    return _f32(bits | sign)


def _values(rng, recipe, n, scale):
    magnitude = np.float32(10.0 ** rng.uniform(-4, 4))
    if recipe.values == "bits":
        x = _f32(random_f32_bits(rng, n))
    elif recipe.values == "ties":
        x = _tie_values(rng, n, scale)
    elif recipe.values == "sparse":
        x = sparse_gradient(rng, n, float(rng.choice([0.0, 0.01, 0.1, 0.5, 1.0])),
                            scale=float(_usable(scale)))
    else:
        x = gradient_like(rng, n) * magnitude
    x = np.array(x, dtype=np.float32)
    edge = rng.random(n) < recipe.edge_share
    x[edge] = _f32(EDGE_F32_BITS[rng.integers(0, len(EDGE_F32_BITS), int(edge.sum()))])
    return x


#: The edge values that are zeros, infinities and NaNs.
_SPECIAL_F32_BITS = EDGE_F32_BITS[(EDGE_F32_BITS & 0x7FFFFFFF == 0)
                                  | (EDGE_F32_BITS & 0x7F800000 == 0x7F800000)]


def _scale_aux(rng, recipe):
    """``scale`` and ``aux`` before the values are known (``fitted`` is refined after)."""
    kind = recipe.scale_kind
    if kind == "edge":
        return tuple(_f32(EDGE_F32_BITS[rng.integers(0, len(EDGE_F32_BITS), 2)]))
    if kind == "special":
        return tuple(_f32(_SPECIAL_F32_BITS[rng.integers(0, len(_SPECIAL_F32_BITS), 2)]))
    if kind == "pow2":
        e = rng.integers(-20, 21, 2).astype(np.float32)
        signs = np.where(rng.random(2) < 0.2, -1, 1).astype(np.float32)
        return tuple(np.float32(2) ** e * signs)
    if kind == "random":
        return tuple((10.0 ** rng.uniform(-6, 6, 2) * np.where(
            rng.random(2) < 0.3, -1, 1)).astype(np.float32))
    return np.float32(1), np.float32(1)


def _fitted(info, param, x, rng):
    """``scale``/``aux`` as a caller of the codec would set them from the data."""
    finite = np.abs(x[np.isfinite(x)])
    amax = np.float32(finite.max()) if finite.size else np.float32(0)
    if info.param_range and not info.variable:           # fixed, qsgd
        levels = np.float32(2 ** (param - 1) - 1)
        if amax == 0:
            return np.float32(0), np.float32(0)
        return np.float32(levels / amax), np.float32(amax / levels)
    if info.name == "sign":                              # the onebit preset
        v = x[np.isfinite(x)]
        pos, neg = v[~np.signbit(v)], v[np.signbit(v)]
        return (np.float32(pos.mean(dtype=np.float64)) if pos.size else np.float32(0),
                np.float32(neg.mean(dtype=np.float64)) if neg.size else np.float32(0))
    if info.variable:                                    # threshold at a quantile
        q = float(rng.choice([0.0, 0.5, 0.9, 0.99, 1.0]))
        return (np.float32(np.quantile(finite, q)) if finite.size else np.float32(0),
                np.float32(1))
    return np.float32(1), np.float32(1)


def _lengths(rng, recipe):
    n, kind = recipe.frames, recipe.lengths
    if kind == "short":
        return rng.integers(1, 17, n)
    if kind == "long":
        return rng.integers(300, MAX_ELEMENTS + 1, n)
    if kind == "one_length":
        one = int(rng.choice([1, 2, 15, 16, 17, 31, 32, 33, 100, 181, 362, MAX_ELEMENTS,
                              int(rng.integers(1, MAX_ELEMENTS + 1))]))
        return np.full(n, one)
    if kind == "beat_edges":
        k = rng.integers(1, MAX_ELEMENTS // 16 + 1, n)
        return np.clip(16 * k + rng.integers(-1, 2, n), 1, MAX_ELEMENTS)
    return rng.integers(1, MAX_ELEMENTS + 1, n)


def _start_offset(rng, kind):
    if kind == "zero":
        return 0
    if kind == "wrap":
        return U32 - int(rng.integers(1, 2000))
    return int(rng.integers(0, U32))


def batch_header(rng, port):
    """The addresses a batch's streams share (each stream may change one of them)."""
    return Header(dst_mac=b"\x02" + rng.bytes(5), src_mac=b"\x02" + rng.bytes(5),
                  src_ip=bytes([10]) + rng.bytes(3), dst_ip=bytes([10]) + rng.bytes(3),
                  src_port=int(rng.integers(1024, 65536)), dst_port=port)


def _identity(base, field_name, k):
    """``base`` with its ``field_name`` made the ``k``-th stream's own."""
    tag = struct.pack(">H", k + 1)
    if field_name == "src_ip":
        return replace(base, src_ip=b"\x0a\x01" + tag)
    if field_name == "dst_ip":
        return replace(base, dst_ip=b"\x0a\x02" + tag)
    if field_name == "src_mac":
        return replace(base, src_mac=b"\x02\x00\x01\x00" + tag)
    if field_name == "dst_mac":
        return replace(base, dst_mac=b"\x02\x00\x02\x00" + tag)
    if field_name == "src_port":
        return replace(base, src_port=(base.src_port + k + 1) % 65536 or 1)
    return base


def stream_frames(recipe, base=None, k=0):
    """The host frames (``bytes``) of a :class:`~.recipes.StreamRecipe`.

    Parameters
    ----------
    recipe : StreamRecipe
    base : Header, optional
        The addresses and port the batch's streams share (default :class:`Header`).
    k : int
        The stream's index in its batch: its own value of ``recipe.identity``.
    """
    rng = np.random.default_rng(recipe.data_seed)
    info = codec_info(recipe.codec)
    lengths = _lengths(rng, recipe)
    # edge scales make infinities and NaNs on the way: wanted, not warned about
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scale, aux = _scale_aux(rng, recipe)
        x = _values(rng, recipe, int(lengths.sum()), scale)
        if recipe.scale_kind == "fitted":
            scale, aux = _fitted(info, recipe.param, x, rng)
    h = replace(_identity(base or Header(), recipe.identity, k), codec=recipe.codec,
                param=recipe.param, seed=recipe.seed, scale_bits=f32_bits(scale),
                aux_bits=f32_bits(aux), ip_id=0)
    stochastic = FLAG_STOCHASTIC if recipe.stochastic else 0
    offset = _start_offset(rng, recipe.offsets)
    frames, pos = [], 0
    for n in lengths.tolist():
        flags = stochastic | (FLAG_FLUSH if rng.random() < recipe.flush_rate else 0)
        fh = replace(h, offset=offset, flags=flags)
        if recipe.header_noise:
            fh = replace(fh, ip_id=int(rng.integers(0, MALFORMED_MARK)),
                         ttl=int(rng.integers(1, 256)), ip_tos=int(rng.integers(0, 256)),
                         ip_frag=int(rng.choice([0, 0x4000])))
        frames.append(build_host_frame(fh, x[pos:pos + n]))
        pos += n
        offset = (offset + n) % U32
        if rng.random() < recipe.gap_rate:
            offset = (offset + int(rng.integers(1, 1 << 20))) % U32
    return frames
