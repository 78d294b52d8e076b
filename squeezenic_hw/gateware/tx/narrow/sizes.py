"""The codecs a narrow TX lane is built for, and the sizes that follow from its codec
and MTU."""


from squeezenic_hw.gateware.codecs.fixed_pow2 import POW2_WIDTHS
from squeezenic_hw.gateware.common.layouts import DATA_BYTES, ELEMENTS_PER_BEAT, RING_HALVES
from squeezenic_hw.spec.generator import NARROW_LANE_CODECS, narrow_lane_settings
from squeezenic_hw.spec.header import DEFAULT_MTU, HEADER_LEN

__all__ = ["NARROW_CODECS", "narrow_codec", "narrow_lane_sizes"]


#: Bits of a row of the ring: one beat.
ROW = 8 * DATA_BYTES
_MAX_N = 2**16 - 1

#: The codec specs a :class:`~.lane.NarrowTxLane` is built for.
NARROW_CODECS = NARROW_LANE_CODECS
assert NARROW_CODECS == ("sign",) + tuple(f"fixed:{q}" for q in POW2_WIDTHS)


def narrow_codec(spec):
    """``(codec id, code bits)`` of a :data:`NARROW_CODECS` spec, else None."""
    settings = narrow_lane_settings([spec])
    return None if settings is None else (settings["codec"], settings["param"] or 1)


def narrow_lane_sizes(codec, mtu=DEFAULT_MTU):
    """``(capacity, ring_rows, max_cluster)`` of ``NarrowTxLane(codec, mtu=mtu)`` (its
    :attr:`~.lane.NarrowTxLane.capacity`, :attr:`~.lane.NarrowTxLane.ring_rows` and
    :attr:`~.lane.NarrowTxLane.max_cluster`), without building one; ``codec`` and ``mtu`` as
    the lane checks them."""
    b = narrow_codec(codec)[1]
    capacity = min(_MAX_N, (mtu - HEADER_LEN) * 8 // b)
    max_rows = -(-capacity * b // ROW)
    # the largest frame and the rows in flight behind it (a row per 32/b beats, so one
    # frame is sent long before the next fills the rest); 32 at least, the depth of a
    # LUTRAM cell, for the small frames of a small MTU
    ring_rows = max(32, 1 << (max_rows + 7 - 1).bit_length())
    # a shared ring is written a half row at a time, while the other half fills: a half's
    # turn comes within G cycles of its filling, before the other half fills (so the
    # older half is never still waiting when the next one fills)
    max_cluster = ROW // (ELEMENTS_PER_BEAT * b) // RING_HALVES
    return capacity, ring_rows, max_cluster
