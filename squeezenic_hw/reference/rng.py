"""The counter-based random generator of wire format section 5 ("SqzRng v1").

Stochastic rounding draws, for the element with tensor index ``j`` of a frame
whose header carries ``seed``, the 32-bit value::

    K = W(seed XOR 0x9E3779B9)          # once per frame (the key)
    U = W(W((j + K) mod 2**32) XOR K)   # once per element
    u = U / 2**32                       # uniform on [0, 1)

where ``W`` is Thomas Wang's 32-bit integer hash ``hash32shift``, a bijection
made only of shifts, XORs and additions (all mod 2**32)::

    x = (~x) + (x << 15)
    x = x ^ (x >> 12)
    x = x + (x << 2)
    x = x ^ (x >> 4)
    x = x + (x << 3) + (x << 11)        # x * 2057
    x = x ^ (x >> 16)

``>>`` is a logical shift of an unsigned 32-bit word. The draw is a pure
function of ``(seed, j)``: the codes of a tensor do not depend on how it was cut
into frames, nor on the number of lanes.

Properties worth knowing: ``W`` is a bijection, so for a fixed ``j`` and
``K`` running over all 2**32 keys, ``U`` is exactly uniform. One round of ``W``
on consecutive indices leaves lag-1 correlations of about 0.2 (and a bit
reversal of ``j`` before one round still 2–8 %); two rounds measure below
0.001 at every lag tried (``docs/rng.md``). The XOR with ``K`` between the
rounds keeps two seeds from giving one sequence shifted in ``j``. In hardware,
``offset + K`` is one adder per beat; each of the 16 elements then needs a
small add and two ``W`` (8 adders, 6 XOR layers), with no multiplier.
"""

import numpy as np

from squeezenic_hw.spec.rng import GOLDEN

__all__ = ["wang_hash32", "frame_key", "draw_u32", "tensor_indices"]

_U = np.uint32


def wang_hash32(x):
    """Wang's ``hash32shift`` on uint32 values (vectorised; returns uint32)."""
    x = _as_u32(x)
    with np.errstate(over="ignore"):
        t = x << _U(15)
        x = ~x
        x += t
        x ^= x >> _U(12)
        x += x << _U(2)
        x ^= x >> _U(4)
        t = x << _U(3)
        t += x << _U(11)
        x += t
        x ^= x >> _U(16)
    return x


def _as_u32(x):
    """uint32 copy of ``x``, integers wrapped modulo 2**32."""
    x = np.asarray(x)
    if x.dtype == np.uint32:
        return x.copy()
    return np.array(x, dtype=np.uint64).astype(np.uint32)


def frame_key(seed):
    """The per-frame key ``K = W(seed ^ 0x9E3779B9)`` (a uint32)."""
    return _U(wang_hash32((int(seed) & 0xFFFFFFFF) ^ GOLDEN))


def draw_u32(seed, j):
    """The 32-bit draws ``U`` for tensor indices ``j`` (array-like) under ``seed``."""
    key = frame_key(seed)
    x = _as_u32(j)
    with np.errstate(over="ignore"):
        x += key
    x = wang_hash32(x)
    x ^= key
    return wang_hash32(x)


def tensor_indices(offset, n):
    """Tensor indices ``offset + i`` (mod 2**32) of ``n`` elements, as uint32."""
    j = np.arange(n, dtype=np.uint32)
    with np.errstate(over="ignore"):
        j += np.uint32(int(offset) & 0xFFFFFFFF)
    return j
