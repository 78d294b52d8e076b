"""The per-lane data generator, numpy reference ("SqzGen v2").

Each lane of the host-bandwidth array has an on-chip generator that emits
SqueezeNIC host frames of gradient-like fp32 values. This module defines those
frames bit for bit; ``squeezenic_hw/gateware/arrays/generator.py`` produces
the same bytes. Every decision, with check values, is in ``docs/generator.md``.

Values
------
A run's values come from one bit sequence ``s`` (a linear feedback shift
register of :data:`STATE_BITS` = 521 bits, ``s[n] = s[n − 521] ^ s[n − 489]``:
the primitive trinomial x^521 + x^32 + 1) seen through a window
``S_t = s[t·K … t·K + 520]`` that moves :data:`STEP_BITS` = K = 80 bits per
step. ``s[0 … 520]`` is the constant :data:`INITIAL_STATE`; during the first
:data:`WARMUP_STEPS` steps every new bit also takes a third tap
(:data:`WARMUP_TAP`) and two bits of ``value_seed`` (:data:`SEED_TAPS`). Payload
beat ``b`` of a run (``b`` = 0, 1, …, counted across its frames) is the window
``T = S_{WARMUP_STEPS + b + 1}``; element ``e`` (0…15) of it is the fp32 with

* sign and mantissa bits: each the XOR of three bits of ``T``
  (:data:`VALUE_TAPS`);
* biased exponent ``112 + g``: ``x`` = five bits of ``T`` (:data:`CLASS_TAPS`,
  among the 80 newest) and one more XOR of three bits ``c``; ``z`` = leading
  zeros of ``x``; ``g = 2·(4 − z) + c`` for ``x`` ≠ 0 (``z`` = 0…4, probability
  2**-(z+1): a small value, magnitude in [2**-15, 2**-5), each pair of binades
  half as likely as the one above), ``g = 14 + c`` for ``x`` = 0 (probability
  1/32: a large value, magnitude in [0.5, 2)).

Never zero, NaN, infinity or subnormal. Frame ``k`` of a run with ``P =
⌈elements/16⌉`` payload beats per frame holds the first ``elements`` values of
beats ``k·P … k·P + P − 1``.

Frames
------
:func:`generate_frames` builds frame ``k`` of a run (``k`` = 0, 1, …) with
:func:`squeezenic_hw.spec.frames.build_host_frame`: ``elements`` values as above,
tensor index ``offset + k·elements`` (mod 2**32) in the header, IP identification
``k`` mod 2**16, flag ``flush`` on frames ``K−1, 2K−1, …`` when ``flush_every`` = K > 0.
"""

from dataclasses import replace

import numpy as np

from squeezenic_hw.spec.frames import build_host_frame
from squeezenic_hw.spec.generator import VALUE_EXPONENT_HIGH
from squeezenic_hw.spec.header import FLAG_FLUSH

__all__ = [
    "STATE_BITS", "FEEDBACK_TAP", "STEP_BITS", "WARMUP_STEPS", "WARMUP_TAP", "ELEMENTS_PER_BEAT",
    "INITIAL_STATE", "SEED_TAPS", "VALUE_TAPS", "CLASS_TAPS", "EXPONENT_TABLE",
    "cut_mantissa", "bit_sequence", "window_values", "beat_values", "run_values", "frame_header",
    "generate_frame", "generate_frames",
]

_U32 = 0xFFFFFFFF

#: Length of the shift register (a Mersenne exponent: 2**521 − 1 is prime).
STATE_BITS = 521
#: ``s[n] = s[n − STATE_BITS] ^ s[n − STATE_BITS + FEEDBACK_TAP]`` (x^521 + x^32 + 1).
FEEDBACK_TAP = 32
#: New bits per step: one step per payload beat (and per warm-up cycle).
STEP_BITS = 80
#: Steps after the initial state before the first payload beat's window.
WARMUP_STEPS = 32
#: During the warm-up a new bit also takes the window bit this far above its first tap,
#: ``s[n] ^= s[n − STATE_BITS + WARMUP_TAP]``, which spreads the seed much faster.
WARMUP_TAP = 300
#: Values per beat.
ELEMENTS_PER_BEAT = 16
#: Sign and mantissa bits, and the exponent's ``c`` bit, per element.
_XOR_BITS = 25
#: Leading-zero class bits per element.
_CLASS_BITS = 5


def _initial_state():
    """Bits 0…31 of 17 successive xorshift32 (13, 17, 5) words from 2463534242."""
    x, bits = 2463534242, []
    while len(bits) < STATE_BITS:
        x ^= (x << 13) & _U32
        x ^= x >> 17
        x ^= (x << 5) & _U32
        bits += [(x >> j) & 1 for j in range(32)]
    return np.array(bits[:STATE_BITS], dtype=np.uint8)


#: ``s[0 … 520]``: the window every run starts from (uint8 bits).
INITIAL_STATE = _initial_state()

#: ``SEED_TAPS[i]``: the two ``value_seed`` bits new bit ``i`` of a warm-up step takes.
SEED_TAPS = np.array([[i % 32, (i + 11) % 32] for i in range(STEP_BITS)], dtype=np.int64)


def _value_taps():
    # Bit j (0…24) of element e: i = 25e + j; taps (a_r·i + c_r) mod 521.
    i = np.arange(ELEMENTS_PER_BEAT * _XOR_BITS)
    taps = np.stack([(1 * i + 0) % STATE_BITS, (11 * i + 160) % STATE_BITS,
                     (17 * i + 341) % STATE_BITS], axis=-1)
    return taps.reshape(ELEMENTS_PER_BEAT, _XOR_BITS, 3)


#: ``VALUE_TAPS[e, j]``: the three window bits XOR-ed into bit ``j`` of element ``e``:
#: ``j`` = 0…22 mantissa bit ``j``, 23 the sign, 24 the exponent's ``c``.
VALUE_TAPS = _value_taps()
#: ``CLASS_TAPS[e, j]``: window bit of ``x``'s bit ``j`` (bit 4 the first of the
#: leading-zero count): the 80 newest bits, element by element.
CLASS_TAPS = (STATE_BITS - STEP_BITS
              + np.arange(ELEMENTS_PER_BEAT * _CLASS_BITS)).reshape(ELEMENTS_PER_BEAT,
                                                                    _CLASS_BITS)


def _exponent_of(x, c):
    """Biased fp32 exponent for class bits ``x`` (5 bits) and bit ``c`` (the definition)."""
    if x == 0:
        return 112 + 14 + c                  # large: 2**-1, 2**0
    z = _CLASS_BITS - x.bit_length()        # leading zeros, 0…4
    return 112 + 2 * (4 - z) + c             # small: 2**-6 … 2**-15


#: Biased exponent by ``2·x + c``, 64 entries (uint32).
EXPONENT_TABLE = np.array([_exponent_of(v >> 1, v & 1) for v in range(64)], dtype=np.uint32)
assert np.all(EXPONENT_TABLE >> 4 == VALUE_EXPONENT_HIGH)


def bit_sequence(value_seed, n_steps):
    """The run's bit sequence ``s[0 … STATE_BITS + n_steps·STEP_BITS − 1]`` (uint8).

    Parameters
    ----------
    value_seed : int
        32-bit seed of the values.
    n_steps : int
        Steps of the window, the warm-up included.

    Returns
    -------
    numpy.ndarray of uint8
    """
    seed = int(value_seed) & _U32
    total = STATE_BITS + n_steps * STEP_BITS
    s = np.zeros(total, dtype=np.uint8)
    s[:STATE_BITS] = INITIAL_STATE
    seed_bits = np.array([(seed >> j) & 1 for j in range(32)], dtype=np.uint8)
    inject = np.bitwise_xor.reduce(seed_bits[SEED_TAPS], axis=1)
    lag_a, lag_b = STATE_BITS, STATE_BITS - FEEDBACK_TAP
    n = STATE_BITS
    for _ in range(min(n_steps, WARMUP_STEPS)):
        old = s[n - lag_a:n]                  # the window before the step
        s[n:n + STEP_BITS] = (old[:STEP_BITS] ^ old[FEEDBACK_TAP:FEEDBACK_TAP + STEP_BITS]
                              ^ old[WARMUP_TAP:WARMUP_TAP + STEP_BITS] ^ inject)
        n += STEP_BITS
    block = lag_b                       # each new bit is at least lag_b bits after its inputs
    while n < total:
        m = min(block, total - n)
        s[n:n + m] = s[n - lag_a:n - lag_a + m] ^ s[n - lag_b:n - lag_b + m]
        n += m
    return s


def window_values(windows):
    """fp32 bit patterns of the 16 values of each window (vectorised).

    Parameters
    ----------
    windows : array_like of uint8, shape (..., STATE_BITS)
        Windows ``T`` (bit ``p`` of the window is ``T[..., p]``).

    Returns
    -------
    numpy.ndarray of uint32, shape (..., 16)
    """
    t = np.asarray(windows, dtype=np.uint8)
    xbits = np.bitwise_xor.reduce(t[..., VALUE_TAPS], axis=-1).astype(np.uint32)  # (..,16,25)
    mantissa = (xbits[..., :23] << np.arange(23, dtype=np.uint32)).sum(axis=-1,
                                                                      dtype=np.uint32)
    sign, c = xbits[..., 23], xbits[..., 24]
    cls = t[..., CLASS_TAPS].astype(np.uint32)                                  # (..,16,5)
    x = (cls << np.arange(_CLASS_BITS, dtype=np.uint32)).sum(axis=-1, dtype=np.uint32)
    exponent = EXPONENT_TABLE[2 * x + c]
    return ((sign << np.uint32(31)) | (exponent << np.uint32(23)) | mantissa).astype(np.uint32)


def cut_mantissa(words, bits):
    """fp32 bit patterns with each mantissa cut to its top ``bits`` bits (1…23), the
    lowest of them *sticky*: the OR of itself and every bit below it, which become 0.

    What a ``GradientGenerator(mantissa_bits=bits)`` sends. A value keeps its sign, its
    exponent, its top ``bits`` − 1 mantissa bits and whether any bit below them is set.
    That is all that ``fixed:q`` reads at a power-of-two scale for ``bits`` ≥ q: a level
    below the top one has at most q − 1 bits, the hidden bit and q − 2 mantissa bits,
    then come the half bit and the sticky one (``docs/generator.md``). Zero, infinity and
    NaN stay what they are.
    """
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 23:
        raise ValueError(f"bits must be an int from 1 to 23, got {bits!r}")
    w = np.asarray(words, dtype=np.uint32)
    below = np.uint32((1 << (24 - bits)) - 1)           # the sticky bit and those under it
    sticky = ((w & below) != 0).astype(np.uint32) << np.uint32(23 - bits)
    return (w & ~below) | sticky


def beat_values(value_seed, n_beats):
    """fp32 bit patterns of payload beats ``0 … n_beats − 1`` of a run, shape (n_beats, 16)."""
    s = bit_sequence(value_seed, WARMUP_STEPS + n_beats + 1)
    starts = (WARMUP_STEPS + 1 + np.arange(n_beats)) * STEP_BITS
    windows = s[starts[:, None] + np.arange(STATE_BITS)]
    return window_values(windows)


def run_values(value_seed, elements, n_frames):
    """The values of frames ``0 … n_frames − 1`` of a run, shape (n_frames, elements).

    Parameters
    ----------
    value_seed : int
        32-bit seed of the values (not the codec seed).
    elements : int
        Values per frame.
    n_frames : int

    Returns
    -------
    numpy.ndarray of float32
    """
    per_frame = -(-elements // ELEMENTS_PER_BEAT)
    bits = beat_values(value_seed, n_frames * per_frame)
    bits = bits.reshape(n_frames, per_frame * ELEMENTS_PER_BEAT)[:, :elements]
    return np.ascontiguousarray(bits).view(np.float32)


def frame_header(config, k):
    """The :class:`~squeezenic_hw.spec.frames.Header` of frame ``k`` of a run (``n`` included)."""
    flush = config.flush_every > 0 and (k + 1) % config.flush_every == 0
    return replace(
        config.template, ip_id=k & 0xFFFF, src_port=config.udp_src_port, codec=config.codec,
        param=config.param, flags=config.flags | (FLAG_FLUSH if flush else 0),
        n=config.elements, scale_bits=config.scale_bits, aux_bits=config.aux_bits,
        seed=config.seed, offset=(config.offset + k * config.elements) & _U32)


def generate_frames(config, n_frames):
    """Frames ``0 … n_frames−1`` of a run of ``config``, as a list of ``bytes``."""
    values = run_values(config.value_seed, config.elements, n_frames)
    return [build_host_frame(frame_header(config, k), values[k]) for k in range(n_frames)]


def generate_frame(config, k):
    """Frame ``k`` (``bytes``) of a run of ``config`` (the values of the frames before it
    are generated too: a frame's values depend on its place in the run)."""
    return generate_frames(config, k + 1)[k]
