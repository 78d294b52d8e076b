"""The per-lane data generator, numpy reference ("SqzGen v1").

Each lane of the host-bandwidth array has an on-chip generator that emits
SqueezeNIC host frames of gradient-like fp32 values. This module defines those
frames bit for bit; ``squeezenic_hw/gateware/arrays/generator.py`` produces
the same bytes. Every decision, with check values, is in ``docs/generator.md``.

Values
------
Element ``j`` of a tensor (``j = offset + i`` mod 2**32) is the fp32 with bits
``value_bits(U)``, ``U = draw_u32(value_seed ^ VALUE_SALT, j)`` (SqzRng v1,
``docs/rng.md``). With ``s = U[31]``, ``e8 = U[30:23]``, ``m = U[22:0]``:

* ``e8`` = 0 (probability 1/256): ``±0`` (sign ``s``), the zero class;
* ``e8`` = 1, 2, 3 (3/256): ``±1.m × 2**(e8 − 2)``, magnitude in [0.5, 4), large;
* ``e8`` = 4 … 255 (252/256): ``±1.m × 2**(−10 − k)``, magnitude in
  [2**-21, 2**-9), small.

For the small class ``z`` = number of leading zeros of ``e8`` (0…5) and ``b``
the bit just below its leading one: ``k = 2z + b`` (0…11). The exponent is
thus picked by a leading-zero count (each pair of binades half as likely as
the one above), the mantissa is ``m`` unchanged: no arithmetic at all, never
NaN, infinity or subnormal.

Frames
------
:func:`generate_frames` builds frame ``k`` of a run (``k`` = 0, 1, …) with
:func:`squeezenic_hw.spec.frames.build_host_frame`: ``elements`` values starting at
tensor index ``offset + k·elements`` (mod 2**32), IP identification ``k`` mod
2**16, flag ``flush`` on frames ``K−1, 2K−1, …`` when ``flush_every`` = K > 0.
"""

from dataclasses import replace

import numpy as np

from squeezenic_hw.spec.frames import build_host_frame
from squeezenic_hw.spec.generator import VALUE_SALT
from squeezenic_hw.spec.header import FLAG_FLUSH

from .rng import draw_u32, tensor_indices

__all__ = [
    "EXPONENT_TABLE", "value_bits", "gradient_values", "frame_header", "generate_frame",
    "generate_frames",
]

_U32 = 0xFFFFFFFF


def _exponent_of(e8):
    """Biased fp32 exponent for the 8 class bits ``e8`` (the definition, one value)."""
    if e8 == 0:
        return 0                          # zero
    if e8 < 4:
        return 127 + e8 - 2               # large: 2**-1 … 2**1
    z = 8 - e8.bit_length()               # leading zeros, 0…5
    b = (e8 >> (6 - z)) & 1               # the bit just below the leading one
    return 127 - 10 - (2 * z + b)         # small: 2**-10 … 2**-21


#: Biased exponent by ``e8``, 256 entries (uint32).
EXPONENT_TABLE = np.array([_exponent_of(e) for e in range(256)], dtype=np.uint32)


def value_bits(u):
    """fp32 bit patterns of the generated values for the 32-bit draws ``u`` (vectorised).

    Parameters
    ----------
    u : array_like of uint32

    Returns
    -------
    numpy.ndarray of uint32
    """
    u = np.asarray(u, dtype=np.uint32)
    e8 = (u >> np.uint32(23)) & np.uint32(0xFF)
    mantissa = np.where(e8 == 0, np.uint32(0), u & np.uint32(0x7FFFFF))
    return ((u & np.uint32(0x80000000)) | (EXPONENT_TABLE[e8] << np.uint32(23))
            | mantissa).astype(np.uint32)


def gradient_values(value_seed, offset, n):
    """The ``n`` generated values at tensor indices ``offset … offset+n−1`` (mod 2**32).

    Parameters
    ----------
    value_seed : int
        32-bit seed of the values (not the codec seed).
    offset : int
        Tensor index of the first value.
    n : int

    Returns
    -------
    numpy.ndarray of float32
    """
    u = draw_u32((int(value_seed) & _U32) ^ VALUE_SALT, tensor_indices(offset, n))
    return value_bits(u).view(np.float32)


def frame_header(config, k):
    """The :class:`~squeezenic_hw.spec.frames.Header` of frame ``k`` of a run (``n`` included)."""
    flush = config.flush_every > 0 and (k + 1) % config.flush_every == 0
    return replace(
        config.template, ip_id=k & 0xFFFF, src_port=config.udp_src_port, codec=config.codec,
        param=config.param, flags=config.flags | (FLAG_FLUSH if flush else 0),
        n=config.elements, scale_bits=config.scale_bits, aux_bits=config.aux_bits,
        seed=config.seed, offset=(config.offset + k * config.elements) & _U32)


def generate_frame(config, k):
    """Frame ``k`` (``bytes``) of a run of ``config``."""
    h = frame_header(config, k)
    return build_host_frame(h, gradient_values(config.value_seed, h.offset, config.elements))


def generate_frames(config, n_frames):
    """Frames ``0 … n_frames−1`` of a run of ``config``, as a list of ``bytes``."""
    return [generate_frame(config, k) for k in range(n_frames)]
