"""Codec 1, ``fp16``, encoded on the ``fixed``/``qsgd`` datapath, for banks that have it.

Below the fp16 normals (``|x| < 2**-14``) the fp16 code is ``|x| · 2**24`` rounded to
nearest even: an exact product (a power of two), rounded to an integer, which is what the
``fixed``/``qsgd`` datapath does for every element (:mod:`.levels`). A bank with that
datapath gives it an ``fp16`` beat with scale ``2**24`` (deterministic rounding, no
clamp), and rounds the normals and the special values beside it with an increment
(:func:`~.fp16.fp16_normal_stages`): no shifter of its own. Bit-exact with
:class:`~.fp16.Fp16Encoder`.
"""

from .levels import ELEMENTS_HELD, ENCODE_LATENCY, shared_level_codes
from .unit import EncoderUnit

__all__ = ["Fp16LevelEncoder"]


class Fp16LevelEncoder(EncoderUnit):
    """``fp16`` encoder on the levels datapath: code = bits of ``x.astype(np.float16)``.

    Latency: ``ENCODE_LATENCY + 1`` = 14 cycles, as
    :class:`~squeezenic_hw.gateware.codecs.fixed.FixedEncoder` (the normal path takes the
    element from the bank's delay line two stages before the level). Throughput: one
    beat per cycle. Backpressure: the whole pipeline holds. On its own it builds the
    whole datapath (16 multipliers and the random generator): it is meant for a bank
    that has it anyway (:func:`~.levels.fp16_on_levels`).
    """
    LATENCY = ENCODE_LATENCY + 1
    HOLDS_INPUT = ELEMENTS_HELD
    INPUT_TAPS = (ENCODE_LATENCY - 2,)
    CODE_WIDTH = 16

    @classmethod
    def datapath(cls, m, stager, payload, shared=None):
        return shared_level_codes(m, stager, payload, shared, "fp16")
