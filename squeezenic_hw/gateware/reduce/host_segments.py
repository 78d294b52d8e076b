"""The segments of the tensor in the order a node's host sends them (``docs/wire-format.md``
section 8.5): round by round, each chunk's next reduce frame's elements, the chunks in ring
order. The contribution checker follows them to judge the host's frames, and the adder to
know which codes make the node's own frames and which join a frame from the ring."""

from amaranth import Array, Const, Module, Mux, ResetInserter, Signal, signed, unsigned
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
    chunk 0 to chunk K − 1 (K = ``cfg.chunks``); back at the first, it starts the next
    round. A chunk k places after the own one in ring order (the node's k-th hop of it)
    gives, in round R, its segment R − k, which starts (R − k)·F elements into the chunk
    (F = :func:`~squeezenic_hw.spec.reduce.sums_per_frame`): one F less than the chunk
    before it in the walk, (N − K + 1)·F less across the empty chunks after chunk 0, and
    none when R − k is negative or past the chunk's end. After the round whose last chunk
    is past every chunk's end it starts again at round 0, ready for the next all-reduce of
    the same tensor size. A chunk's bounds move by C (``cfg.chunk``) from one chunk to
    the next, so the walk needs no multiplier: the starting chunk's lo and the last
    chunk's, and (N − K + 1)·F, are sums of shifted C and F, while ``cfg.enable`` is 0.

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
    level : Out(range(depth + 1))
        Segments the queue holds (``o`` 's among them).
    width : Out(6)
        The configured partial sums' width w (a register, a cycle after ``cfg``).
    cfg : In(ReduceConfig)
        ``enable`` (0: the walk and its queue start again), ``nodes``, ``rank``,
        ``codec``, ``param``, ``elements``, ``chunk``, ``chunks``; written while ``enable``
        is 0, at least :data:`SEGMENTS_CONFIG_CYCLES` before it rises.

    Notes
    -----
    Latency: 7 cycles from ``enable`` to the first segment on ``o``. Throughput: one step
    of the walk every two cycles (its decisions are registers). A round ends at the first
    chunk whose segment is rounds away (the chunks after it are further away still) and
    the next starts at the round's first chunk not past its end, rounds without a segment
    skipped, so a round wastes at most three steps (its end, a chunk newly past its end, a
    shorter last chunk past its end): ahead of a consumer of long segments, the queue
    filled meanwhile; a consumer of segments shorter than a few beats each may find it
    empty, and waits (the contribution checker takes a beat only while the queue holds a
    segment for every frame its pipeline may hold).
    Backpressure: the walk stops while the queue has fewer than five free entries. Only
    the walk's state, valid bits and the queue's pointers are reset.

    Resources, measured with ``python -c "from squeezenic_hw.flows import synth; from
    squeezenic_hw.gateware.reduce.host_segments import HostSegments;
    print(synth.synthesize(HostSegments(), timing=True).summary())"``: 934 LUT, 5 LUTRAM
    (the queue), 839 FF, 0 BRAM, 0 DSP; estimated 2.73 ns at 3 LUT levels.
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
            "level": Out(range(depth + 1)),
            "width": Out(6),
            "cfg": In(ReduceConfig),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.cfg
        # ---- what the configuration gives (registered stages) ------------------------------
        enable = Signal(name="cfg_enable_q")
        kmax = Signal(4, name="cfg_last_chunk")           # K − 1
        any_chunk = Signal(name="cfg_any_chunk")          # K ≠ 0
        start = Signal(4, name="cfg_start_chunk")
        elements = Signal(32, name="cfg_elements")
        size = Signal(32, name="cfg_chunk")
        m.d.sync += [
            enable.eq(c.enable), kmax.eq(c.chunks - 1), any_chunk.eq(c.chunks != 0),
            start.eq(Mux(c.rank < c.chunks, c.rank, c.chunks - 1)),
            elements.eq(c.elements), size.eq(c.chunk),
        ]
        # F of the configured width
        nodes_range = range(MAX_NODES + 16)
        log2 = Array(Const((n - 1).bit_length() if n else 0, 5) for n in nodes_range)
        bits = Array(Const(n.bit_length(), 5) for n in nodes_range)
        width = self.width
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

        def times(index, value, width, name):
            """``index`` · ``value`` in two registered stages, no multiplier: the sums of
            ``value`` shifted by the low and by the high half of ``index`` 's set bits,
            then their sum (``width`` bits)."""
            bits = len(index)
            halves = [Signal(width + bits, name=f"{name}_{k}") for k in range(2)]
            for k, part in enumerate((range(0, (bits + 1) // 2), range((bits + 1) // 2, bits))):
                m.d.sync += halves[k].eq(sum(Mux(index[b], value << b, 0) for b in part))
            total = Signal(width, name=name)
            m.d.sync += total.eq(halves[0] + halves[1])
            return total

        start_lo = times(start, size, 32, "cfg_start_lo")
        last_lo = times(kmax, size, 32, "cfg_last_lo")
        last_size = Signal(32, name="cfg_last_size")      # the last chunk's elements
        m.d.sync += last_size.eq(elements - last_lo)

        # (N − K + 1)·F: how far the segments move back from chunk 0 to chunk K − 1, N − K
        # empty chunks between them in ring order (sums of shifted F)
        gap = Signal(5, name="cfg_wrap_chunks")
        m.d.sync += gap.eq(c.nodes - kmax)
        wrap_delta = times(gap, per_frame, 21, "cfg_wrap_delta")

        # ---- the walk ---------------------------------------------------------------------
        chunk = Signal(4, name="walk_chunk")
        lo = Signal(32, name="walk_lo")                   # the chunk's first element
        base = Signal(signed(34), name="walk_base")       # (round − k)·F: its segment's start
        # the round's first chunk not past its end, where the next round starts
        found = Signal(name="walk_found")
        first_chunk = Signal(4, name="walk_first_chunk")
        first_lo = Signal(32, name="walk_first_lo")
        first_base = Signal(signed(34), name="walk_first_base")

        q = m.submodules.queue = ResetInserter(~enable)(
            LutramFifo(width=data.Layout.cast(Segment).size, depth=self.depth))
        # a step now, the three in the stages and the write of the one before them are not
        # in the level of a cycle ago: room while it leaves five entries
        room = Signal(name="walk_room")
        m.d.sync += room.eq(q.level <= self.depth - 5)
        step = Signal(name="walk_step")
        m.d.comb += step.eq(enable & any_chunk & room)

        # a step takes two cycles: its decisions into registers, then the move
        deciding = Signal(init=1, name="walk_deciding")
        decide = step & deciding
        move = step & ~deciding
        with m.If(~enable):
            m.d.sync += deciding.eq(1)
        with m.Elif(step):
            m.d.sync += deciding.eq(~deciding)

        at_last = chunk == kmax
        next_chunk = Mux(chunk == 0, kmax, chunk - 1)
        ahead = Signal(name="walk_ahead")                 # its first segment is rounds away
        past = Signal(name="walk_past")                   # past its chunk's end
        wrap = Signal(name="walk_wrap")                   # the last chunk in ring order
        with m.If(decide):
            m.d.sync += [
                ahead.eq(base[-1]),
                # both compares, then the choice: a level less than choosing first
                past.eq(~base[-1] & Mux(at_last, base[:33] >= last_size, base[:33] >= size)),
                wrap.eq(next_chunk == start),
            ]
        has = ~ahead & ~past
        next_lo = Mux(chunk == 0, last_lo, lo - size)
        # the chunks after one whose segment is rounds away are further away still: the
        # round ends there, or after the last chunk in ring order
        round_end = ahead | wrap
        done = round_end & ~found & past                  # every chunk past its end
        n_chunk = Mux(found, first_chunk, chunk)
        n_lo = Mux(found, first_lo, lo)
        n_base = Mux(found, first_base, base) + per_frame
        with m.If(~enable):
            m.d.sync += [chunk.eq(start), lo.eq(start_lo), base.eq(0), found.eq(0)]
        with m.Elif(move):
            with m.If(round_end & done):
                m.d.sync += [chunk.eq(start), lo.eq(start_lo), base.eq(0), found.eq(0)]
            with m.Elif(round_end):
                # rounds in which that chunk's segment is still ahead have none: skipped
                m.d.sync += [chunk.eq(n_chunk), lo.eq(n_lo),
                             base.eq(Mux(n_base < 0, 0, n_base)), found.eq(0)]
            with m.Else():
                m.d.sync += [chunk.eq(next_chunk), lo.eq(next_lo),
                             base.eq(base - Mux(chunk == 0, wrap_delta, per_frame))]
                with m.If(~found & ~past):
                    m.d.sync += [found.eq(1), first_chunk.eq(chunk), first_lo.eq(lo),
                                 first_base.eq(base)]

        # ---- the segment, in three stages --------------------------------------------------
        valid1 = Signal(name="segment_valid_s1")
        chunk1 = Signal(4, name="segment_chunk_s1", reset_less=True)
        lo1 = Signal(32, name="segment_lo_s1", reset_less=True)
        hi1 = Signal(33, name="segment_chunk_hi_s1", reset_less=True)
        m.d.sync += [
            valid1.eq(move & has),
            chunk1.eq(chunk), lo1.eq(lo + base[:32]),
            hi1.eq(Mux(at_last, elements, lo + size)),
        ]
        valid2 = Signal(name="segment_valid_s2")
        chunk2 = Signal(4, name="segment_chunk_s2", reset_less=True)
        lo2 = Signal(32, name="segment_lo_s2", reset_less=True)
        end2 = Signal(33, name="segment_end_s2", reset_less=True)
        hi2 = Signal(33, name="segment_chunk_hi_s2", reset_less=True)
        m.d.sync += [valid2.eq(valid1 & enable), chunk2.eq(chunk1), lo2.eq(lo1),
                     end2.eq(lo1 + per_frame), hi2.eq(hi1)]
        seg = Signal(Segment, reset_less=True)
        valid3 = Signal(name="segment_valid_s3")
        m.d.sync += [
            valid3.eq(valid2 & enable),
            seg.chunk.eq(chunk2), seg.lo.eq(lo2),
            seg.hi.eq(Mux(end2 < hi2, end2, hi2)),
        ]
        m.d.comb += [
            q.w_en.eq(valid3), q.w_data.eq(seg),
            self.o.valid.eq(q.r_rdy), self.o.payload.eq(q.r_data), q.r_en.eq(self.o.ready),
            self.level.eq(q.level),
        ]
        return m
