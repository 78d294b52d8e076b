"""The segments of the tensor in the order a node's host sends them (``docs/wire-format.md``
section 8.5): round by round, each chunk's next reduce frame's elements, the chunks in ring
order. The contribution checker follows them to judge the host's frames, and the adder to
know which codes make the node's own frames and which join a frame from the ring."""

from amaranth import Array, Const, Module, Mux, ResetInserter, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.stream import LutramFifo
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.header import DEFAULT_MTU
from squeezenic_hw.spec.reduce import INTEGER_CODECS, MAX_NODES, sums_per_frame

from .checker import codec_ids
from .layouts import ReduceConfig

__all__ = ["HostSegments", "Segment", "SEGMENTS_CONFIG_CYCLES"]

#: Cycles from ``cfg`` written to the walk's starting state derived from it (registers).
SEGMENTS_CONFIG_CYCLES = 5

class Segment(data.Struct):
    """One segment: the elements [``lo``, ``hi``) of chunk ``chunk``, a reduce frame's."""
    chunk: unsigned(4)
    lo: unsigned(32)
    hi: unsigned(32)


class HostSegments(wiring.Component):
    """Walks the host's segments (section 8.5,
    :func:`~squeezenic_hw.spec.reduce.host_segments`) onto ``o``, ahead of their use.

    The walk visits the non-empty chunks in ring order from the node's own (the last
    non-empty one when its own is empty), one a cycle: from chunk c > 0 to c − 1, from
    chunk 0 to chunk K − 1 (K = ``cfg.chunks``), back at the first it starts the next
    round, each round's segments F = :func:`~squeezenic_hw.spec.reduce.sums_per_frame`
    elements further into the chunks; a chunk whose elements end before the round's
    start gives no segment (only the last chunk, which may be shorter, is ever so).
    After the last round it starts again at round 0, ready for the next all-reduce of the
    same tensor size. A chunk's bounds move by C (``cfg.chunk``) from one chunk to the
    next, so the walk needs no multiplier: the starting chunk's lo and the last chunk's
    are two sums of shifted C each, while ``cfg.enable`` is 0.

    Parameters
    ----------
    codecs : iterable of str or int
        The reducible codecs built in (the partial sums' widths, so F, follow from them).
    mtu : int
        The reduce frames' MTU (F = ⌊(MTU − 64)·8 / w⌋).
    depth : int
        Segments the output queue holds, 4 … 64 (default 16).

    Attributes
    ----------
    o : Out(stream.Signature(Segment))
        The segments in order; a consumer takes one (``ready``) when it is done with it.
    cfg : In(ReduceConfig)
        ``enable`` (0: the walk and its queue start again), ``nodes``, ``rank``,
        ``codec``, ``param``, ``elements``, ``chunk``, ``chunks``; written while ``enable``
        is 0, at least :data:`SEGMENTS_CONFIG_CYCLES` before it rises.

    Notes
    -----
    Latency: 4 cycles from ``enable`` to the first segment on ``o``. Throughput: one step
    of the walk a cycle, a segment in each but a round's step at a shorter last chunk:
    at least one segment every two cycles, as fast as a consumer of whole frames (a
    segment takes a frame, at least two beats). Backpressure: the walk stops while the
    queue has fewer than four free entries. Only the walk's state, valid bits and the
    queue's pointers are reset.
    """

    def __init__(self, *, codecs=INTEGER_CODECS, mtu=DEFAULT_MTU, depth=16):
        self.codecs = codec_ids(codecs)
        if isinstance(mtu, bool) or not isinstance(mtu, int) or not 144 <= mtu <= 9600:
            raise ValueError(f"mtu must be an int from 144 to 9600, got {mtu!r}")
        if isinstance(depth, bool) or not isinstance(depth, int) or not 4 <= depth <= 64:
            raise ValueError(f"depth must be an int from 4 to 64, got {depth!r}")
        self.mtu, self.depth = mtu, depth
        super().__init__({
            "o": Out(stream.Signature(Segment)),
            "cfg": In(ReduceConfig),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.cfg
        # ---- what the configuration gives (registered stages) ------------------------------
        enable = Signal(name="cfg_enable_q")
        kmax = Signal(4, name="cfg_last_chunk")           # K − 1
        any_chunk = Signal(name="cfg_any_chunk")          # K ≠ 0
        single = Signal(name="cfg_single_chunk")          # K = 1
        start = Signal(4, name="cfg_start_chunk")
        elements = Signal(32, name="cfg_elements")
        size = Signal(32, name="cfg_chunk")
        m.d.sync += [
            enable.eq(c.enable), kmax.eq(c.chunks - 1), any_chunk.eq(c.chunks != 0),
            single.eq(c.chunks == 1), start.eq(Mux(c.rank < c.chunks, c.rank, c.chunks - 1)),
            elements.eq(c.elements), size.eq(c.chunk),
        ]
        # F of the configured width
        nodes_range = range(MAX_NODES + 16)
        log2 = Array(Const((n - 1).bit_length() if n else 0, 5) for n in nodes_range)
        bits = Array(Const(n.bit_length(), 5) for n in nodes_range)
        width = Signal(6, name="cfg_width")
        kinds = {"sign": bits[c.nodes], "fixed": c.param + log2[c.nodes],
                 "qsgd": c.param + log2[c.nodes]}
        choices = [(codec_info(i), kinds.get(codec_info(i).name)) for i in sorted(self.codecs)]
        choices = [(info, w if w is not None else Const(info.bits_per_element(0), 6))
                   for info, w in choices]
        value = choices[-1][1]              # a codec not built in: any width will do
        for info, w in choices[:-1]:
            value = Mux(c.codec == info.id, w, value)
        m.d.sync += width.eq(value)
        per_frame = Signal(16, name="cfg_per_frame")
        m.d.sync += per_frame.eq(Array(
            Const(sums_per_frame(w, self.mtu) if w else 0, 16) for w in range(64))[width])

        def times_chunk(index, name):
            """``index`` · C in two registered stages (sums of shifted C)."""
            half_a, half_b = Signal(36, name=f"{name}_a"), Signal(36, name=f"{name}_b")
            m.d.sync += [
                half_a.eq(Mux(index[0], size, 0) + Mux(index[1], size << 1, 0)),
                half_b.eq(Mux(index[2], size << 2, 0) + Mux(index[3], size << 3, 0)),
            ]
            total = Signal(32, name=name)
            m.d.sync += total.eq(half_a + half_b)
            return total

        start_lo = times_chunk(start, "cfg_start_lo")
        last_lo = times_chunk(kmax, "cfg_last_lo")
        last_size = Signal(32, name="cfg_last_size")      # the last chunk's elements
        m.d.sync += last_size.eq(elements - last_lo)

        # ---- the walk ---------------------------------------------------------------------
        chunk = Signal(4, name="walk_chunk")
        lo = Signal(32, name="walk_lo")                   # the chunk's first element
        base = Signal(32, name="walk_base")               # the round's start in a chunk
        base_next = Signal(33, name="walk_base_next")     # the next round's: base + F
        in_full = Signal(name="walk_in_full")             # base < C
        in_last = Signal(name="walk_in_last")             # base < the last chunk's size

        q = m.submodules.queue = ResetInserter(~enable)(
            LutramFifo(width=data.Layout.cast(Segment).size, depth=self.depth))
        # a step now, the two in the stages and the write of the one before them are not in
        # the level of a cycle ago: room while it leaves four entries
        room = Signal(name="walk_room")
        m.d.sync += room.eq(q.level <= self.depth - 4)
        step = Signal(name="walk_step")
        m.d.comb += step.eq(enable & any_chunk & room)

        at_last = chunk == kmax
        has = Mux(at_last, in_last, in_full)
        next_chunk = Mux(chunk == 0, kmax, chunk - 1)
        next_lo = Mux(chunk == 0, last_lo, lo - size)
        round_end = next_chunk == start
        more_full = base_next < size
        more_last = base_next < last_size
        done = ~more_last & (single | ~more_full)
        with m.If(~enable):
            m.d.sync += [chunk.eq(start), lo.eq(start_lo), base.eq(0),
                         base_next.eq(per_frame), in_full.eq(1), in_last.eq(1)]
        with m.Elif(step):
            m.d.sync += [chunk.eq(next_chunk), lo.eq(next_lo)]
            with m.If(round_end & done):
                m.d.sync += [base.eq(0), base_next.eq(per_frame), in_full.eq(1),
                             in_last.eq(1)]
            with m.Elif(round_end):
                m.d.sync += [base.eq(base_next), base_next.eq(base_next + per_frame),
                             in_full.eq(more_full), in_last.eq(more_last)]

        # ---- the segment, in two stages ----------------------------------------------------
        valid1 = Signal(name="segment_valid_s1")
        chunk1 = Signal(4, name="segment_chunk_s1", reset_less=True)
        lo1 = Signal(32, name="segment_lo_s1", reset_less=True)
        end1 = Signal(33, name="segment_end_s1", reset_less=True)
        hi1 = Signal(33, name="segment_chunk_hi_s1", reset_less=True)
        m.d.sync += [
            valid1.eq(step & has & enable),
            chunk1.eq(chunk), lo1.eq(lo + base), end1.eq(lo + base_next),
            hi1.eq(Mux(at_last, elements, lo + size)),
        ]
        seg = Signal(Segment, reset_less=True)
        valid2 = Signal(name="segment_valid_s2")
        m.d.sync += [
            valid2.eq(valid1 & enable),
            seg.chunk.eq(chunk1), seg.lo.eq(lo1),
            seg.hi.eq(Mux(end1 < hi1, end1, hi1)),
        ]
        m.d.comb += [
            q.w_en.eq(valid2), q.w_data.eq(seg),
            self.o.valid.eq(q.r_rdy), self.o.payload.eq(q.r_data), q.r_en.eq(self.o.ready),
        ]
        return m
