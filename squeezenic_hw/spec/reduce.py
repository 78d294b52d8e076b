"""The ring all-reduce's shared facts (``docs/wire-format.md`` section 8): the reducible
codecs and their families, the partial sums' wire width, how a tensor is cut into chunks
and in which order a node meets them, the version 2 reduce frame's fields, the reasons a
node bypasses a reduce frame, and the checks a frame alone decides
(:func:`classify_reduce_frame`)."""

import enum
import functools
from dataclasses import dataclass

from .codecs import codec_info, validate_param
from .frames import BypassReason, check_transport
from .header import DEFAULT_PORT, FLAG_ENCODED, FLAG_STOCHASTIC, HEADER_LEN

__all__ = [
    "REDUCE_VERSION", "FLAG_GATHER", "REDUCE_FLAGS_RESERVED", "MIN_NODES", "MAX_NODES",
    "INTEGER_CODECS", "FLOAT_CODECS", "ReduceFields", "ReduceReason", "check_nodes",
    "ContributionReason", "HOST_VALUE_WIDTH", "contribution_fields", "result_fields",
    "host_flags", "host_segments",
    "reduce_family", "partial_width", "chunk_size", "chunk_bounds", "ring_order",
    "sums_per_frame", "reduce_frame_length", "REDUCE_HDR", "FRAME_REDUCE_REASONS",
    "classify_reduce_frame",
]

#: Header ``version`` of a reduce frame.
REDUCE_VERSION = 2
#: ``flags`` bit 3 of a reduce frame: the gather phase (0: the reduce phase).
FLAG_GATHER = 0x08
#: ``flags`` bits of a reduce frame that must be zero: ``flush`` (bit 2) and bits 4–7.
REDUCE_FLAGS_RESERVED = 0xF4
#: Nodes in a ring.
MIN_NODES, MAX_NODES = 2, 16

#: Codecs whose codes are summed exactly (section 8.2).
INTEGER_CODECS = ("fixed", "qsgd", "sign")
#: Codecs each node decodes, adds to in fp32 and encodes again.
FLOAT_CODECS = ("raw", "fp16", "bf16", "natural")


def check_nodes(nodes):
    """``nodes`` if it is a ring size (2…16), else ``ValueError`` naming it."""
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not (
            MIN_NODES <= nodes <= MAX_NODES):
        raise ValueError(f"nodes must be an int from {MIN_NODES} to {MAX_NODES}, "
                         f"got {nodes!r}")
    return nodes


def reduce_family(codec):
    """``"integer"`` or ``"float"``; ``ValueError`` naming a codec that cannot be reduced."""
    name = codec_info(codec).name
    if name in INTEGER_CODECS:
        return "integer"
    if name in FLOAT_CODECS:
        return "float"
    raise ValueError(f"codec {name!r} cannot be reduced in the NIC "
                     f"(reducible: {', '.join(INTEGER_CODECS + FLOAT_CODECS)})")


def partial_width(codec, param, nodes):
    """Bits of one partial sum on the wire: ``param`` + ⌈log₂ N⌉ (``fixed``, ``qsgd``),
    ⌈log₂(N+1)⌉ (``sign``), the codec's own width (the float codecs)."""
    info = codec_info(codec)
    reduce_family(info)
    check_nodes(nodes)
    param = validate_param(info.name, param)
    if info.name in ("fixed", "qsgd"):
        return param + (nodes - 1).bit_length()
    if info.name == "sign":
        return nodes.bit_length()
    return info.bits_per_element(param)


def chunk_size(elements, nodes):
    """C = ⌈E/N⌉: elements of every chunk but the last ones."""
    return -(-int(elements) // check_nodes(nodes))


def chunk_bounds(elements, nodes, chunk):
    """``(lo, hi)``: the tensor indices ``[lo, hi)`` of chunk ``chunk`` (empty: lo = hi)."""
    size = chunk_size(elements, nodes)
    lo = min(chunk * size, elements)
    return lo, min(lo + size, elements)


def ring_order(rank, nodes):
    """The chunks in the order node ``rank`` meets them (and its host sends them): its own
    chunk, then ``rank − 1``, ``rank − 2``, … (mod N)."""
    return [(rank - s) % nodes for s in range(nodes)]


def sums_per_frame(width, mtu):
    """Partial sums a reduce frame holds at most: ⌊(MTU − 64)·8 / w⌋."""
    return (int(mtu) - HEADER_LEN) * 8 // int(width)


def reduce_frame_length(width, n):
    """Bytes of a reduce frame of ``n`` sums of ``width`` bits: 64 + ⌈n·w/8⌉."""
    return HEADER_LEN + (int(n) * int(width) + 7) // 8


class REDUCE_HDR:
    """Byte offsets (start, length) of the fields a reduce frame puts in bytes 56–59 (the
    ``seed`` of a version 1 frame; section 8.3)."""
    CONTRIBUTIONS = (56, 1)
    WIDTH = (57, 1)
    NODES = (58, 1)
    ORIGIN = (59, 1)


@dataclass(frozen=True)
class ReduceFields:
    """What a reduce frame adds to the header: bytes 56–59 (the ``seed`` of a version 1
    frame) and the ``gather`` flag."""
    contributions: int
    width: int
    nodes: int
    origin: int
    gather: bool = False

    @property
    def seed_word(self):
        """Bytes 56–59 as the little-endian word :class:`~.frames.Header` keeps in
        ``seed``."""
        return (self.contributions | self.width << 8 | self.nodes << 16
                | self.origin << 24)

    def flags(self, stochastic):
        return FLAG_ENCODED | (FLAG_STOCHASTIC if stochastic else 0) | (
            FLAG_GATHER if self.gather else 0)

    @classmethod
    def of(cls, header):
        """The fields of a parsed :class:`~.frames.Header`."""
        w = header.seed
        return cls(contributions=w & 0xFF, width=w >> 8 & 0xFF, nodes=w >> 16 & 0xFF,
                   origin=w >> 24 & 0xFF, gather=bool(header.flags & FLAG_GATHER))


class ReduceReason(enum.IntEnum):
    """Why a node bypasses a reduce frame (section 8.4), in the order of the checks; each
    has a counter."""
    NONE = 0
    DISABLED = 1
    LENGTH = 2
    FLAGS = 3
    SETTINGS = 4
    NODES = 5
    WIDTH = 6
    PHASE = 7
    OFFSET = 8
    DUPLICATE = 9


class ContributionReason(enum.IntEnum):
    """Why a node passes a contribution frame on to the TX lane instead of taking it
    (section 8.5), in the order of the checks; each has a counter."""
    NONE = 0
    DISABLED = 1
    LENGTH = 2
    FLAGS = 3
    SETTINGS = 4
    NODES = 5
    FIELDS = 6
    OFFSET = 7


#: ``width`` of the hosts' reduce frames (section 8.5): their payload is fp32 values.
HOST_VALUE_WIDTH = 32


def contribution_fields(nodes, origin):
    """Bytes 56–59 and flags of a contribution frame of chunk ``origin`` (section 8.5)."""
    return ReduceFields(contributions=0, width=HOST_VALUE_WIDTH, nodes=nodes, origin=origin)


def result_fields(nodes, origin):
    """Bytes 56–59 and flags of a result frame of chunk ``origin`` (section 8.5)."""
    return ReduceFields(contributions=nodes, width=HOST_VALUE_WIDTH, nodes=nodes,
                        origin=origin, gather=True)


def host_flags(fields, stochastic):
    """The ``flags`` of a host-side reduce frame: ``encoded`` 0, ``stochastic``, ``gather``
    as ``fields``."""
    return fields.flags(stochastic) & ~FLAG_ENCODED


def host_segments(elements, nodes, rank, per_frame):
    """The segments of the tensor in the order node ``rank``'s host sends them (section
    8.5), each ``(chunk, lo, hi)``. Chunk c's j-th segment is the elements of its j-th
    reduce frame, [lo + j·F, min(lo + (j+1)·F, hi)) with F = ``per_frame``
    (:func:`sums_per_frame` of the ring's width and MTU), and it is the node's k-th hop
    of the chunk, k = (``rank`` − c) mod N. In round R = 0, 1, … the node takes, over the
    non-empty chunks in ring order (:func:`ring_order`), each chunk's segment j = R − k
    where there is one; the rounds are counted from the first chunk's k. So a hop's
    segment comes a round after the predecessor's hop of the same segment, which has then
    arrived: the ring runs at the host's rate, the wire waiting at most a round."""
    if isinstance(per_frame, bool) or not isinstance(per_frame, int) or per_frame < 1:
        raise ValueError(f"per_frame must be a positive int, got {per_frame!r}")
    return list(_host_segments(int(elements), check_nodes(nodes), int(rank), per_frame))


@functools.cache
def _host_segments(elements, nodes, rank, per_frame):
    walk = [(k, c, *chunk_bounds(elements, nodes, c))
            for k, c in enumerate(ring_order(rank, nodes))
            if chunk_bounds(elements, nodes, c)[0] < chunk_bounds(elements, nodes, c)[1]]
    if not walk:
        return ()
    out = []
    first = walk[0][0]
    for rnd in range(first, first + 2**32):
        for k, c, lo, hi in walk:
            j = rnd - k
            if j >= 0 and lo + j * per_frame < hi:
                out.append((c, lo + j * per_frame, min(lo + (j + 1) * per_frame, hi)))
        if (rnd - walk[-1][0]) * per_frame >= max(hi - lo for _, _, lo, hi in walk):
            return tuple(out)          # the last chunk's segment is past every chunk's end


#: The checks of section 8.4 that every node makes alike, whatever its configuration,
#: in check order (:func:`classify_reduce_frame`); the others (and ``disabled``) need the
#: node's configuration or state (:class:`~squeezenic_hw.reference.reduce_rx.ReduceReceiver`).
FRAME_REDUCE_REASONS = (ReduceReason.LENGTH, ReduceReason.FLAGS, ReduceReason.SETTINGS,
                        ReduceReason.NODES, ReduceReason.WIDTH, ReduceReason.PHASE)


def classify_reduce_frame(frame, *, port=DEFAULT_PORT, tuser_size=None):
    """Would every node bypass ``frame``, whatever its configuration, and why?

    A node's checks (section 8.4, :class:`~squeezenic_hw.reference.reduce_rx.ReduceReceiver`)
    compare a reduce frame with the node's N, rank, settings and expected offsets; this
    function makes those of :data:`FRAME_REDUCE_REASONS` against what the frame says of
    itself, so that a frame it bypasses for a reason, every enabled node bypasses for that
    reason or an earlier one: its length against its own ``n`` (at least 1) and ``width``;
    ``settings``, a reducible codec with a valid parameter and ``stochastic`` only where the
    codec rounds stochastically; ``nodes``, 2 … 16; ``width``, the partial sums' width of
    the codec, parameter and ``nodes``; ``phase``, ``origin`` < N and k = N when gathering,
    1 ≤ k ≤ N − 1 otherwise. A frame that passes is taken by the node whose configuration
    and expected offset agree with it.

    Parameters
    ----------
    frame, port, tuser_size :
        As for :func:`~.frames.classify_host_frame`.

    Returns
    -------
    (Header or None, BypassReason or ReduceReason or None)
        The parsed header (``None`` only for frames shorter than 64 bytes) and the first
        failing check: a :class:`~.frames.BypassReason` of the transport checks, or
        ``VERSION`` for a frame that is not a reduce frame, else a :class:`ReduceReason`;
        ``None`` when all pass.
    """
    h, reason = check_transport(frame, port=port, tuser_size=tuser_size)
    if reason is not None:
        return h, reason
    if h.version != REDUCE_VERSION:
        return h, BypassReason.VERSION
    size = len(frame) if tuser_size is None else int(tuser_size)
    f = ReduceFields.of(h)
    if h.n == 0 or size != reduce_frame_length(f.width, h.n) or len(frame) != size:
        return h, ReduceReason.LENGTH
    if h.flags & (REDUCE_FLAGS_RESERVED | FLAG_ENCODED) != FLAG_ENCODED:
        return h, ReduceReason.FLAGS
    try:
        info = codec_info(h.codec)
        reduce_family(info)
        validate_param(info.name, h.param)
    except ValueError:
        return h, ReduceReason.SETTINGS
    if h.flags & FLAG_STOCHASTIC and not info.stochastic:
        return h, ReduceReason.SETTINGS
    if not MIN_NODES <= f.nodes <= MAX_NODES:
        return h, ReduceReason.NODES
    if f.width != partial_width(info, h.param, f.nodes):
        return h, ReduceReason.WIDTH
    k = f.contributions
    if f.origin >= f.nodes or (k != f.nodes if f.gather else not 1 <= k < f.nodes):
        return h, ReduceReason.PHASE
    return h, None
