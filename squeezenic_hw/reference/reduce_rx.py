"""One node's checks on the reduce frames it receives (``docs/wire-format.md`` section
8.4), in plain Python: whether a frame is taken into the reduce lane or bypassed to the
host, and why.

The same for the contribution frames of its host (section 8.5):
:class:`ContributionReceiver`.

A :class:`ReduceReceiver` holds the node's configuration and, per chunk and phase, the
offset it expects next; :meth:`ReduceReceiver.receive` judges one frame, checks in the
order of section 8.4, and counts it (:data:`~squeezenic_hw.spec.counters.REDUCE_COUNTERS`).
"""

from collections import Counter
from dataclasses import dataclass

from squeezenic_hw.spec.codecs import codec_info, f32_bits, validate_param
from squeezenic_hw.spec.counters import (
    CONTRIBUTION_COUNTERS,
    REDUCE_COUNTERS,
    contribution_counter_name,
    reduce_counter_name,
)
from squeezenic_hw.spec.frames import BypassReason, check_transport, classify_wire_frame
from squeezenic_hw.spec.header import (
    DEFAULT_MTU,
    DEFAULT_PORT,
    FLAG_ENCODED,
    FLAG_FLUSH,
    FLAG_STOCHASTIC,
    HEADER_LEN,
    check_port,
)
from squeezenic_hw.spec.reduce import (
    FLAG_GATHER,
    HOST_VALUE_WIDTH,
    REDUCE_FLAGS_RESERVED,
    REDUCE_VERSION,
    ContributionReason,
    ReduceFields,
    ReduceReason,
    check_nodes,
    chunk_bounds,
    host_segments,
    partial_width,
    reduce_frame_length,
    sums_per_frame,
)

__all__ = ["TakenFrame", "ReduceVerdict", "ReduceReceiver", "ContributionVerdict",
           "ContributionReceiver"]

#: Largest tensor a node's configuration describes: offsets are 32-bit.
MAX_ELEMENTS = 2**32 - 1


@dataclass(frozen=True)
class TakenFrame:
    """The fields of a taken reduce frame that the reduce lane works with."""
    gather: bool          # the gather phase (else the reduce phase)
    contributions: int    # k: nodes whose elements the sums hold
    origin: int           # the chunk
    offset: int           # tensor index of the first sum
    n: int                # sums in the frame
    width: int            # bits per sum


@dataclass(frozen=True)
class ReduceVerdict:
    """What a node does with one received frame.

    ``reason``: ``None`` when the frame is not a reduce frame (section 7's checks before
    ``version`` fail, or ``version`` ≠ 2): it is bypassed and no reduce counter counts
    it. ``ReduceReason.NONE`` when it is taken (``fields`` then holds its fields), any
    other reason when it is a reduce frame bypassed for that reason.
    """
    reason: ReduceReason | None
    fields: TakenFrame | None = None

    @property
    def taken(self):
        return self.reason is ReduceReason.NONE


class _Enabled:
    """``enabled``: a node's reduce enable; disabling it makes the node forget its
    state (``_forget``)."""

    @property
    def enabled(self):
        return self._enabled

    @enabled.setter
    def enabled(self, value):
        self._enabled = bool(value)
        if not self._enabled:
            self._forget()


class ReduceReceiver(_Enabled):
    """Node ``rank`` of a ring of ``nodes``: the checks of section 8.4 on each frame it
    receives from node ``rank − 1``.

    Parameters
    ----------
    nodes, rank : int
        The ring's size N (2…16) and this node's place in it (0…N−1).
    codec, param, scale, aux, stochastic :
        The ring's codec settings (a reducible codec, section 8.2); ``stochastic`` is
        what its frames carry (cleared for a codec without stochastic rounding, as
        :func:`~squeezenic_hw.reference.allreduce.allreduce` does).
    elements : int
        E, the tensor's elements (0 … 2**32 − 1): the chunks are
        :func:`~squeezenic_hw.spec.reduce.chunk_bounds` of it.
    enabled : bool
        Reduce enabled; while it is not, every reduce frame is bypassed (``DISABLED``),
        and disabling forgets the expected offsets.
    port : int
        The SqueezeNIC UDP port (section 7's checks).

    Attributes
    ----------
    counters : collections.Counter
        Per key of :data:`~squeezenic_hw.spec.counters.REDUCE_COUNTERS`, the frames
        taken or bypassed for that reason.
    width : int
        w of section 8.2 for these settings.
    """

    def __init__(self, nodes, rank, codec, *, elements, param=0, scale=1.0, aux=1.0,
                 stochastic=False, enabled=True, port=DEFAULT_PORT):
        self.nodes = check_nodes(nodes)
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < nodes:
            raise ValueError(f"rank must be an int from 0 to nodes - 1 = {nodes - 1}, "
                             f"got {rank!r}")
        if isinstance(elements, bool) or not isinstance(elements, int) or not (
                0 <= elements <= MAX_ELEMENTS):
            raise ValueError(f"elements must be an int from 0 to {MAX_ELEMENTS}, "
                             f"got {elements!r}")
        info = codec_info(codec)
        self.rank, self.elements, self.port = rank, elements, check_port(port)
        self.codec, self.param = info.id, validate_param(info.name, param)
        self.width = partial_width(info, self.param, nodes)
        self.stochastic = bool(stochastic) and info.stochastic
        self.scale_bits, self.aux_bits = f32_bits(scale), f32_bits(aux)
        self.counters = Counter(dict.fromkeys(REDUCE_COUNTERS, 0))
        self._expected = {}
        self._enabled = bool(enabled)

    def _forget(self):
        self._expected.clear()

    def same_settings(self, h):
        """Whether header ``h`` carries the ring's codec settings (check ``settings``)."""
        return (h.codec, h.param, bool(h.flags & FLAG_STOCHASTIC), h.scale_bits,
                h.aux_bits) == (self.codec, self.param, self.stochastic, self.scale_bits,
                                self.aux_bits)

    def expected(self, chunk, gather):
        """The offset the node takes next of ``chunk`` in the reduce (``gather`` false) or
        gather phase: the end of the last frame taken, or the chunk's start (before the
        first and after the chunk's last)."""
        return self._expected.get((chunk, bool(gather)),
                                  chunk_bounds(self.elements, self.nodes, chunk)[0])

    def receive(self, frame, tuser_size=None):
        """Judge one received frame (``bytes``; ``tuser_size``: the length OpenNIC
        announces, ``len(frame)`` by default) and count it; a frame taken moves its chunk
        and phase's expected offset on. Returns a :class:`ReduceVerdict`."""
        verdict = self._judge(bytes(frame), tuser_size)
        if verdict.reason is not None:
            self.counters[reduce_counter_name(verdict.reason)] += 1
        if verdict.taken:
            f = verdict.fields
            end = f.offset + f.n
            key = (f.origin, f.gather)
            if end == chunk_bounds(self.elements, self.nodes, f.origin)[1]:
                self._expected.pop(key, None)     # the chunk is complete: its start again
            else:
                self._expected[key] = end
        return verdict

    def _judge(self, frame, tuser_size):
        h, reason = classify_wire_frame(frame, port=self.port, tuser_size=tuser_size)
        if reason is not BypassReason.VERSION or h.version != REDUCE_VERSION:
            return ReduceVerdict(None)
        f = ReduceFields.of(h)
        size = len(frame) if tuser_size is None else int(tuser_size)
        nodes, rank = self.nodes, self.rank
        if not self._enabled:
            return ReduceVerdict(ReduceReason.DISABLED)
        if h.n == 0 or size != reduce_frame_length(f.width, h.n) or len(frame) != size:
            return ReduceVerdict(ReduceReason.LENGTH)
        if h.flags & (REDUCE_FLAGS_RESERVED | FLAG_ENCODED) != FLAG_ENCODED:
            return ReduceVerdict(ReduceReason.FLAGS)
        if not self.same_settings(h):
            return ReduceVerdict(ReduceReason.SETTINGS)
        if f.nodes != nodes:
            return ReduceVerdict(ReduceReason.NODES)
        if f.width != self.width:
            return ReduceVerdict(ReduceReason.WIDTH)
        k, origin = f.contributions, f.origin
        if f.gather:
            phase_ok = k == nodes and origin < nodes and origin != (rank + 1) % nodes
        else:
            phase_ok = 1 <= k < nodes and origin < nodes and (origin + k) % nodes == rank
        if not phase_ok:
            return ReduceVerdict(ReduceReason.PHASE)
        lo, hi = chunk_bounds(self.elements, nodes, origin)
        if not lo <= h.offset <= h.offset + h.n <= hi:
            return ReduceVerdict(ReduceReason.OFFSET)
        expected = self.expected(origin, f.gather)
        if h.offset < expected:
            return ReduceVerdict(ReduceReason.DUPLICATE)
        if h.offset > expected:
            return ReduceVerdict(ReduceReason.OFFSET)
        return ReduceVerdict(ReduceReason.NONE, TakenFrame(
            gather=f.gather, contributions=k, origin=origin, offset=h.offset, n=h.n,
            width=f.width))


@dataclass(frozen=True)
class ContributionVerdict:
    """What a node does with one frame from its host: ``reason`` ``None`` when it is not a
    contribution frame (it goes to the TX lane, no contribution counter counts it);
    ``NONE`` when it is taken (``chunk``, ``offset``, ``n`` then say which elements);
    any other reason when it is a contribution frame passed on for that reason."""
    reason: ContributionReason | None
    chunk: int | None = None
    offset: int = 0
    n: int = 0

    @property
    def taken(self):
        return self.reason is ContributionReason.NONE


class ContributionReceiver(_Enabled):
    """Node ``rank``'s checks on the frames of its host (section 8.5): which are
    contribution frames it takes, in ring order, and why the others are passed on.

    Parameters and attributes as :class:`ReduceReceiver`'s, and ``mtu``, the ring's
    reduce frames' (the host's segments are theirs:
    :func:`~squeezenic_hw.spec.reduce.host_segments`); ``counters`` are keyed by
    :data:`~squeezenic_hw.spec.counters.CONTRIBUTION_COUNTERS`, :attr:`position` is the
    ``(chunk, offset)`` the node expects next (``(None, 0)`` when every chunk is empty)
    and :attr:`segment_end` the end of the segment it lies in.
    """

    def __init__(self, nodes, rank, codec, *, elements, param=0, scale=1.0, aux=1.0,
                 stochastic=False, enabled=True, port=DEFAULT_PORT, mtu=DEFAULT_MTU):
        self._ring = ReduceReceiver(nodes, rank, codec, elements=elements, param=param,
                                    scale=scale, aux=aux, stochastic=stochastic,
                                    enabled=enabled, port=port)
        self.nodes, self.rank, self.elements = nodes, rank, elements
        self.counters = Counter(dict.fromkeys(CONTRIBUTION_COUNTERS, 0))
        self._enabled = bool(enabled)
        self._segments = host_segments(
            elements, nodes, rank, sums_per_frame(partial_width(codec, param, nodes), mtu))
        self._forget()

    @property
    def position(self):
        if not self._segments:
            return None, 0
        return self._segments[self._segment][0], self._offset

    @property
    def segment_end(self):
        return self._segments[self._segment][2] if self._segments else 0

    def _forget(self):
        self._segment = 0
        self._offset = self._segments[0][1] if self._segments else 0

    def receive(self, frame, tuser_size=None):
        """Judge one frame from the host and count it; a frame taken moves the expected
        position on. Returns a :class:`ContributionVerdict`."""
        verdict = self._judge(bytes(frame), tuser_size)
        if verdict.reason is not None:
            self.counters[contribution_counter_name(verdict.reason)] += 1
        if verdict.taken:
            self._offset = verdict.offset + verdict.n
            if self._offset == self.segment_end:      # the next segment, after the last the first
                self._segment = (self._segment + 1) % len(self._segments)
                self._offset = self._segments[self._segment][1]
        return verdict

    def _judge(self, frame, tuser_size):
        h, reason = check_transport(frame, port=self._ring.port, tuser_size=tuser_size)
        if reason is not None or h.version != REDUCE_VERSION or h.flags & FLAG_ENCODED:
            return ContributionVerdict(None)
        if not self._enabled:
            return ContributionVerdict(ContributionReason.DISABLED)
        size = len(frame) if tuser_size is None else int(tuser_size)
        if h.n == 0 or size != HEADER_LEN + 4 * h.n or len(frame) != size:
            return ContributionVerdict(ContributionReason.LENGTH)
        if h.flags & (REDUCE_FLAGS_RESERVED | FLAG_FLUSH | FLAG_GATHER):
            return ContributionVerdict(ContributionReason.FLAGS)
        if not self._ring.same_settings(h):
            return ContributionVerdict(ContributionReason.SETTINGS)
        f = ReduceFields.of(h)
        if f.nodes != self.nodes:
            return ContributionVerdict(ContributionReason.NODES)
        if f.contributions != 0 or f.width != HOST_VALUE_WIDTH:
            return ContributionVerdict(ContributionReason.FIELDS)
        chunk, offset = self.position
        if chunk is None or (f.origin, h.offset) != (chunk, offset) or (
                h.offset + h.n > self.segment_end):
            return ContributionVerdict(ContributionReason.OFFSET)
        return ContributionVerdict(ContributionReason.NONE, chunk, h.offset, h.n)
