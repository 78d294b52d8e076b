"""IEEE-754 binary32 facts the reference codecs, the multiplier model and the multiplier
gateware share."""

__all__ = ["CANONICAL_NAN", "INF_BITS", "FRAC_MASK", "SIG_MASK", "MUL_MAX_SHIFT"]

#: The canonical quiet NaN every NaN result is replaced with.
CANONICAL_NAN = 0x7FC00000
#: +inf.
INF_BITS = 0x7F800000
#: The 23 fraction bits.
FRAC_MASK = (1 << 23) - 1
#: A significand with its hidden bit (24 bits).
SIG_MASK = (1 << 24) - 1
#: Largest useful right shift of the multiplier's product (the multiplier's algorithm,
#: steps 8 and 9).
MUL_MAX_SHIFT = 26
