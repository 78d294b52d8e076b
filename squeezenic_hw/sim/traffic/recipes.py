"""Recipes: the small records hypothesis draws, each standing for a batch of
traffic, and the kinds their fields take."""

from dataclasses import dataclass

from squeezenic_hw.spec.frames import RX_REASONS, TX_REASONS
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS

__all__ = [
    "MAX_ELEMENTS", "SCALE_KINDS", "VALUE_KINDS", "LENGTH_KINDS", "OFFSET_KINDS",
    "IDENTITY_FIELDS", "MALFORMED_KINDS", "StreamRecipe", "MalformedRecipe", "TrafficRecipe",
    "NARROW_SCALE_KINDS",
]


#: Most elements of a host frame drawn (a host frame of 1516 bytes fits MTU 1518).
MAX_ELEMENTS = DEFAULT_HOST_ELEMENTS
#: How a stream's ``scale`` and ``aux`` are chosen: fitted to the data (the presets'
#: way), a power of two (so that ``x·scale`` lands on exact ties), random magnitude and
#: sign, or an fp32 edge value (0, subnormal, inf, NaN…).
SCALE_KINDS = ("fitted", "pow2", "random", "edge")
#: The scales a narrow ``fixed`` lane takes (``NarrowTxLane``): powers of two, and the
#: fp32 zeros, infinities and NaNs (``special``).
NARROW_SCALE_KINDS = ("pow2", "special")
#: How a stream's values are drawn: gradient-like, uniformly random bit patterns,
#: rounding ties of every codec, or sparse around the threshold.
VALUE_KINDS = ("gradient", "bits", "ties", "sparse")
#: Frame lengths in elements: random 1…363, one beat or less (1…16), long (300…363),
#: one length for the whole stream, or next to a beat boundary (16k−1, 16k, 16k+1).
LENGTH_KINDS = ("random", "short", "long", "one_length", "beat_edges")
#: Where a stream's offsets start: random, 0, or just below 2³² (they wrap).
OFFSET_KINDS = ("random", "zero", "wrap")
#: The coalescing-key field that sets a stream apart from the batch's other streams
#: (``shared``: none; codec, parameter, flags, scale, aux and seed are drawn anyway).
IDENTITY_FIELDS = ("shared", "src_ip", "dst_ip", "src_mac", "dst_mac", "src_port")
#: Frames a lane must pass unchanged, by lane: one kind per bypass reason (its value)
#: and ARP, IPv6 and VLAN-tagged frames (reason ``not_ipv4``; an ARP frame of fewer than
#: 64 bytes, ``short_frame``).
MALFORMED_KINDS = {
    "tx": tuple(r.value for r in TX_REASONS) + ("arp", "ipv6", "vlan"),
    "rx": tuple(r.value for r in RX_REASONS) + ("arp", "ipv6", "vlan"),
}
NOT_IPV4_KINDS = ("arp", "ipv6", "vlan")
#: Malformed frames carry an IPv4 identification with its top bit set, streams' frames
#: one without: a frame a lane builds never equals a malformed one.
MALFORMED_MARK = 0x8000
U32 = 2**32


@dataclass(frozen=True)
class StreamRecipe:
    """One tensor stream of host frames: the header fields that are drawn, and numpy's
    seed (``data_seed``) for its values, lengths, offsets and per-frame fields."""
    codec: int
    param: int
    stochastic: bool
    seed: int                  # the header's seed field
    scale_kind: str            # SCALE_KINDS
    values: str                # VALUE_KINDS
    edge_share: float          # share of elements replaced by fp32 edge values
    lengths: str               # LENGTH_KINDS
    frames: int
    flush_rate: float
    gap_rate: float            # share of frames whose offset does not continue the last
    offsets: str               # OFFSET_KINDS
    identity: str              # IDENTITY_FIELDS
    header_noise: bool         # IP identification, TTL, TOS and DF vary frame by frame
    data_seed: int


@dataclass(frozen=True)
class MalformedRecipe:
    """A frame the lane passes unchanged: its kind (:data:`MALFORMED_KINDS`), the codec of
    the frame it is made from, and numpy's seed for the rest."""
    kind: str
    codec: int
    data_seed: int


@dataclass(frozen=True)
class TrafficRecipe:
    """A batch: streams and host-side malformed frames (exactly ``frames`` host frames in
    all), how many stream frames get a wrong ``tuser_size``, the longest run of frames
    of one stream, and the wire side's own malformed frames and wrong sizes."""
    streams: tuple
    malformed: tuple
    size_errors: int
    run_length: int
    wire_malformed: tuple
    wire_size_errors: int
    seed: int
    #: A timed batch: the TX lane closes wire frames after this many idle cycles, and the
    #: host frames arrive at the cycles :func:`~.batches.arrival_times` gives (``None``:
    #: back to back, no timeout).
    idle_timeout: int | None = None

    @property
    def frames(self):
        """Host frames of the batch."""
        return sum(s.frames for s in self.streams) + len(self.malformed)
