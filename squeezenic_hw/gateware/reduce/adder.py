"""The reduce phase's hop for the integer codecs (``docs/wire-format.md`` sections 8.1–8.3):
each reduce frame taken from the ring's predecessor, its partial sums plus the host's codes
of the same offsets, as the payload of the frame for the successor."""

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    BEAT_BITS,
    CODES_PER_JOB,
    PackMeta,
    RingWrite,
)
from squeezenic_hw.gateware.common.stream import (
    MAX_FANOUT,
    BlockRamFifo,
    LutramFifo,
    fifo_with_room,
    skid_between,
)
from squeezenic_hw.gateware.rx.unpacker import MAX_HOST_ELEMENTS_LIMIT, WireUnpacker
from squeezenic_hw.gateware.tx.packer import WirePacker
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.header import DEFAULT_MTU
from squeezenic_hw.spec.reduce import (
    INTEGER_CODECS,
    MAX_NODES,
    MIN_NODES,
    partial_width,
)

from .code_aligner import CodeAligner, host_codes_layout
from .host_segments import HostSegments
from .layouts import (
    CheckedBeat,
    ReduceConfig,
    ReduceFrameInfo,
    integer_codecs,
    sums_job_layout,
)

__all__ = ["ReduceAdder", "integer_widths", "CONFIG_CYCLES"]

#: Cycles from ``cfg`` written to the own chunk's bounds derived from it (registers).
CONFIG_CYCLES = 6

_FIXED, _QSGD = (codec_info(c).id for c in ("fixed", "qsgd"))
#: Jobs of the unpacker are 16 sums but the frame's last: it cuts "host frames" of this
#: many sums, a multiple of 16 above any reduce frame's sums.
_JOB_CUT = MAX_HOST_ELEMENTS_LIMIT - MAX_HOST_ELEMENTS_LIMIT % CODES_PER_JOB
#: Frames the adder holds at most (waiting for their codes, or for theirs to be dropped).
_FRAMES = 32
#: A frame's turn in the order of the host's codes: ``n`` codes join its sums, or are
#: dropped (``skip``: the frame overflowed).
_ORDER = data.StructLayout({"skip": unsigned(1), "n": unsigned(16)})
#: Entries of the queues behind the sums' stages; the stages run while this many less
#: the stages in flight (and the room flag's cycle) are free.
_SUMS_DEPTH = 16
_SUM_STAGES = 3


def _ints(name, values, lo, hi):
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name}: expected an iterable of ints {lo}…{hi}, got {values!r}")
    values = sorted(set(values))
    if not values or not all(isinstance(v, int) and not isinstance(v, bool)
                             and lo <= v <= hi for v in values):
        raise ValueError(f"{name}: expected a non-empty iterable of ints {lo}…{hi}, "
                         f"got {values!r}")
    return tuple(values)


def integer_widths(codecs, nodes, params):
    """The partial-sum widths (section 8.2) of the integer ``codecs`` on rings of ``nodes``
    with ``params`` (the bits of ``fixed`` and ``qsgd``), ascending."""
    return tuple(sorted({partial_width(c, p if c != "sign" else 0, n)
                         for c in codecs for n in nodes
                         for p in (params if c != "sign" else (0,))}))


def _depth(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an int from {lo} to {hi}, got {value!r}")
    return value


def _queue(width, depth):
    """A FIFO of ``depth`` entries: block RAM from 64 entries on, else distributed RAM."""
    return (BlockRamFifo if depth >= 64 else LutramFifo)(width=width, depth=depth)


class ReduceAdder(wiring.Component):
    """Adds the host's codes to the partial sums of each reduce frame taken, at the frame's
    width: the payload, and the header fields, of the frame for the successor.

    A hop is a one-to-one frame transform (section 8.1): the outgoing frame has the
    incoming one's offsets, ``n`` and width w, one more contribution, and is the gather
    frame when that makes N. Sum ``i`` becomes (S_i + v_i) mod 2^w, v_i the signed value
    of the host's code (``fixed``: two's complement of ``param`` bits; ``qsgd``: sign and
    magnitude, ±L; ``sign``: the code bit), as
    :func:`~squeezenic_hw.reference.allreduce.integer_hop`.

    The frames' payload beats wait in the *wire queue*, their fields in a descriptor
    queue; a :class:`~squeezenic_hw.gateware.rx.unpacker.WireUnpacker` cuts the sums into
    jobs of 16 (a frame's last job holds the rest). The host's codes wait in the *host
    queue*, then a :class:`~.code_aligner.CodeAligner` hands each job as many codes as it
    has sums. A job moves on when those codes are there: three stages (the codes read;
    the host's signed values; the sums, cut to w bits) write the sums into a queue, and a
    frame's outgoing fields into ``desc`` after its last job. A
    :class:`~squeezenic_hw.gateware.tx.packer.WirePacker` packs the sums at w bits, and its
    beats leave on ``o``.

    The host's codes come segment by segment in the host's order (section 8.5): round by
    round, each chunk's next frame's elements, the chunks in ring order. A
    :class:`~.host_segments.HostSegments` walk of the same order says what each segment's
    codes are for: a segment of the node's own chunk makes a frame, k = 1, of zero sums
    plus the codes (its jobs made here: they need no unpacker); any other segment's codes
    join the next wire frame, which the predecessor sends in the same order (its hops of
    the round before). So a wire frame has arrived a round before its codes, and waits
    for them a round at most: the wire queue holds a round's frames, not a chunk's, and
    no hop waits for the wire. The adder does not compare offsets: the contribution
    checker has checked the host's order, the ring's checker each chunk's. (A frame lost
    before the node, after which the ring's checker bypasses the rest of its chunk as
    ``offset`` errors, leaves its segment's codes to the next frame taken: that ring's
    sums are then wrong, and the ``offset`` counter is what tells.) A frame arriving when
    its codes are not there waits in the wire queue; when the queue has no
    room for a frame's payload beats (or :data:`_FRAMES` frames wait), the frame leaves
    whole on ``overflow`` instead, and ``overflows`` counts it; the RX lane then
    delivers it to the host unchanged, as any bypassed frame (nothing is dropped).

    Parameters
    ----------
    codecs : iterable of str or int
        The codecs built in; the integer ones among them (``fixed``, ``qsgd``, ``sign``),
        at least one, get logic. A frame of another codec must not arrive (the
        :class:`~.checker.ReduceChecker` of the same ``codecs`` bypasses it).
    nodes : iterable of int
        The ring sizes N to build for, 2 … 16 (default all).
    params : iterable of int
        The ``fixed``/``qsgd`` bits to build for, 2 … 16 (default all).
    wire_depth : int
        Payload beats the wire queue holds, 2 … 4096 (default 512; block RAM from 64, and
        a 512-bit queue takes eight RAMB36 from 64 to 512 entries alike): a frame longer
        than this always overflows. A round of the predecessor's frames waits here, so at
        the host's rate it must hold N − 1 frames, ⌈(MTU − 64)/64⌉ beats each.
    host_depth : int
        Beats of codes the host queue holds, 2 … 4096 (default 64; block RAM from 64).
    mtu : int
        The longest reduce frame in bytes, 144 … 9600 (default 1518): the own chunk's
        frames hold :func:`~squeezenic_hw.spec.reduce.sums_per_frame` sums.

    Attributes
    ----------
    i : In(stream.Signature(CheckedBeat))
        The frames the checker takes: their header beat with ``info``, then the payload.
    host : In(stream.Signature(host_codes_layout(code_width)))
        The host's codes of the ring's codec, in tensor order, ``count`` per beat;
        ``code_width`` = :attr:`code_width`.
    o : Out(stream.Signature(unsigned(512)))
        The outgoing frames' payload beats, back to back: ⌈n·w/512⌉ a frame, the last one
        zero-padded.
    desc : Out(stream.Signature(ReduceFrameInfo))
        Each outgoing frame's fields, offered once its last sums are added (before its
        last beats leave on ``o``): ``contributions`` k + 1, ``gather`` when k + 1 = N,
        the rest as the incoming frame's.
    overflow : Out(stream.Signature(CheckedBeat))
        The frames the wire queue had no room for, whole and unchanged.
    cfg : In(ReduceConfig)
        The node's configuration: ``enable`` (0: the host's segments start again),
        ``codec``, ``param``, ``nodes``, ``rank``, ``elements``, ``chunk`` and ``chunks``
        are read (into registers, up to :data:`CONFIG_CYCLES` later: write them while
        ``enable`` is 0).
    overflows : Out(32)
        Frames sent to ``overflow`` (wrapping; reset to 0).

    Notes
    -----
    Latency: from a frame's last payload beat accepted, with its codes waiting, to its
    last beat on ``o``: ``LATENCY`` = 23 cycles, the sum of its parts' (the input stage;
    the wire queue, three cycles in block RAM; the unpacker, up to 6; a skid buffer; the
    three sum stages; the sums' queue, two; the packer, 5; the beat queue, two).
    Throughput: one job of 16 sums per cycle (the own chunk's frames: two cycles more
    each, where the next frame's ``n`` is loaded), so one beat of 16 host codes per cycle (the
    host's rate: its fp32 stream carries 16 elements a beat) and 16·w ≤ 320 bits of the
    wire a cycle: the host side is the limit, the wire side keeps up with it.
    Backpressure: ``i.ready`` and ``host.ready`` are registers. ``i.ready`` falls only
    while the ``overflow`` queue is nearly full or :data:`_FRAMES` frames wait for their
    codes (a frame that goes to the wire queue has its room reserved at its first beat);
    ``host.ready`` while the host queue is full. ``o`` and ``desc`` hold
    their beat while not ready; their queues fill and the sums' stages stop, then the
    unpacker, then the wire queue fills and frames overflow.
    Nothing is dropped or reordered. Only valid bits, pointers, levels, the reserved
    counts and the counter are reset.

    Resources, measured with ``python -c "from squeezenic_hw.flows import synth; from
    squeezenic_hw.gateware.reduce.adder import ReduceAdder;
    print(synth.synthesize(ReduceAdder(), timing=True).summary())"``: 16 902 LUT, 167
    LUTRAM and 173 SRL, 15 475 FF, 11.5 BRAM36 (the wire queue 8, the host queue), 1 DSP
    (n·w); estimated 3.19 ns (the aligner's write pointer → a slot), at most 5 LUT levels.
    The unpacker's and the packer's logic per width is most of it (19 widths, 2 … 20).
    ``codecs=["sign"]`` (widths 2 … 5, 1-bit codes): 6 435 LUT, 150 LUTRAM, 173 SRL,
    10 062 FF, 8 BRAM36, 1 DSP, 3.01 ns, 5 levels.
    """

    LATENCY = 1 + 3 + 6 + 1 + _SUM_STAGES + 2 + WirePacker.LATENCY + 2

    def __init__(self, *, codecs=INTEGER_CODECS, nodes=range(MIN_NODES, MAX_NODES + 1),
                 params=range(2, 17), wire_depth=512, host_depth=64, mtu=DEFAULT_MTU):
        self.codecs = integer_codecs(codecs)
        if isinstance(mtu, bool) or not isinstance(mtu, int) or not 144 <= mtu <= 9600:
            raise ValueError(f"mtu must be an int from 144 to 9600, got {mtu!r}")
        self.mtu = mtu
        self.nodes = _ints("nodes", nodes, MIN_NODES, MAX_NODES)
        self.params = _ints("params", params, 2, 16)
        self.wire_depth = _depth("wire_depth", wire_depth, 2, 4096)
        self.host_depth = _depth("host_depth", host_depth, 2, 4096)
        self.widths = integer_widths(self.codecs, self.nodes, self.params)
        #: Bits of a host code: the widest ``param``, or 1 for a ``sign``-only build.
        self.code_width = max(self.params) if set(self.codecs) - {"sign"} else 1
        self.sum_width = max(self.widths)
        super().__init__({
            "i": In(stream.Signature(CheckedBeat)),
            "host": In(stream.Signature(host_codes_layout(self.code_width))),
            "o": Out(stream.Signature(unsigned(BEAT_BITS))),
            "desc": Out(stream.Signature(ReduceFrameInfo)),
            "overflow": Out(stream.Signature(CheckedBeat)),
            "cfg": In(ReduceConfig),
            "overflows": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        unpacker, order = self._wire_side(m)
        self._sums(m, unpacker, order)
        return m

    # ---- the wire side: frames into the wire queue (or overflow), descriptors ------------

    def _wire_side(self, m):
        """The input stage, the overflow choice, the wire queue, the frames' order and the
        unpacker; returns the unpacker and the order queue."""
        beat_bits = data.Layout.cast(CheckedBeat).size
        # the input stage: a register, so the choice reads registers only
        in_valid = Signal()
        in_beat = Signal(CheckedBeat, reset_less=True)
        in_payload_beats = Signal(range(4096), reset_less=True)   # ⌈size/64⌉ − 1
        advance = Signal(init=1, attrs={"max_fanout": MAX_FANOUT})
        m.d.comb += self.i.ready.eq(advance)
        with m.If(advance):
            m.d.sync += [
                in_valid.eq(self.i.valid),
                in_beat.eq(self.i.payload),
                in_payload_beats.eq((self.i.payload.beat.size - 1) >> 6),
            ]

        # every frame's turn, in order: skip = its codes are dropped (it overflowed)
        order = m.submodules.frame_order = LutramFifo(
            width=data.Layout.cast(_ORDER).size, depth=_FRAMES)
        frames_free = Signal(range(_FRAMES + 1), init=_FRAMES)
        # the wire queue's free entries, less those reserved by the frames going into it
        wire_q = m.submodules.wire_queue = _queue(BEAT_BITS, self.wire_depth)
        free = Signal(range(self.wire_depth + 1), init=self.wire_depth)
        m.submodules.overflow_queue = over_q = LutramFifo(width=beat_bits, depth=8)

        to_overflow = Signal()             # the frame in the stage goes to overflow
        first = in_valid & in_beat.first
        fits = in_payload_beats <= free
        going_over = Mux(first, ~fits, to_overflow)
        moves = in_valid & advance
        starts = moves & in_beat.first
        reserve = starts & fits
        with m.If(starts):
            m.d.sync += [to_overflow.eq(~fits), self.overflows.eq(self.overflows + ~fits)]
        entry = Signal(_ORDER)
        m.d.comb += [
            entry.skip.eq(~fits), entry.n.eq(in_beat.info.n),
            order.w_en.eq(starts), order.w_data.eq(entry),
            over_q.w_en.eq(moves & going_over),
            over_q.w_data.eq(in_beat),
            wire_q.w_en.eq(moves & ~going_over & ~in_beat.first),
            wire_q.w_data.eq(in_beat.beat.data),
            self.overflow.valid.eq(over_q.r_rdy),
            self.overflow.payload.eq(over_q.r_data),
            over_q.r_en.eq(self.overflow.ready),
        ]
        # the stage moves while the overflow queue has room for it and the beat behind it
        # (its level a cycle old) and a frame's turn is free for each (the turns released
        # in this cycle counted in the next: they come from the sums' decision)
        taken_turns = Signal.like(frames_free)
        m.d.comb += taken_turns.eq(frames_free - starts)
        m.d.sync += [
            frames_free.eq(taken_turns + (order.r_en & order.r_rdy)),
            advance.eq((over_q.level <= 8 - 3) & (taken_turns >= 2)),
        ]

        # the unpacker takes the frames' descriptors and their payload beats
        m.submodules.unpacker = unpacker = WireUnpacker(
            self.widths, max_host_elements=_JOB_CUT, tag_shape=ReduceFrameInfo)
        popped = wire_q.r_rdy & unpacker.i.ready
        m.d.comb += [
            unpacker.i.valid.eq(wire_q.r_rdy),
            unpacker.i.payload.data.eq(wire_q.r_data),
            unpacker.i.payload.zero.eq(0),
            wire_q.r_en.eq(unpacker.i.ready),
        ]
        m.d.sync += free.eq(free - Mux(reserve, in_payload_beats, 0) + popped)

        # the frame's descriptor: its outgoing fields, and n·w (a DSP: registered in and out)
        info = in_beat.info
        out_info = Signal(ReduceFrameInfo, reset_less=True)
        d_valid = Signal(3)
        n1 = Signal(16, reset_less=True)
        w1 = Signal(6, reset_less=True)
        nw2 = Signal(22, reset_less=True)
        info2 = Signal(ReduceFrameInfo, reset_less=True)
        info3 = Signal(ReduceFrameInfo, reset_less=True)
        nw3 = Signal(22, reset_less=True)
        k = info.contributions + 1
        m.d.sync += [
            d_valid.eq(Cat(reserve, d_valid[:2])),
            n1.eq(info.n), w1.eq(info.width),
            out_info.eq(info),
            out_info.contributions.eq(k),
            out_info.gather.eq(k == self.cfg.nodes),
            nw2.eq(n1 * w1), info2.eq(out_info),
            nw3.eq(nw2), info3.eq(info2),
        ]
        desc_q = m.submodules.frame_queue = LutramFifo(
            width=data.Layout.cast(unpacker.frame_layout).size, depth=_FRAMES)
        desc = Signal(unpacker.frame_layout)
        m.d.comb += [
            desc.n.eq(info3.n), desc.width.eq(info3.width), desc.bits.eq(nw3),
            desc.tag.eq(info3),
            desc_q.w_data.eq(desc),
            desc_q.w_en.eq(d_valid[2]),
            unpacker.desc.valid.eq(desc_q.r_rdy),
            unpacker.desc.payload.eq(desc_q.r_data),
            desc_q.r_en.eq(unpacker.desc.ready),
        ]
        return unpacker, order

    # ---- the host side, the sums and the packer -------------------------------------------

    def _codec_config(self, m):
        """Registers of the configured codec: which one, and its ``param``'s bit masks."""
        cw, sw = self.code_width, self.sum_width
        c = self.cfg
        is_fixed = Signal(name="is_fixed")
        is_qsgd = Signal(name="is_qsgd")
        sign_bit = Signal(cw, name="sign_bit")          # one-hot: bit param − 1
        magnitude = Signal(cw, name="magnitude_bits")   # bits below param − 1
        extend = Signal(sw, name="extend_bits")         # bits from param − 1 up
        m.d.sync += [
            is_fixed.eq((c.codec == _FIXED) if "fixed" in self.codecs else 0),
            is_qsgd.eq((c.codec == _QSGD) if "qsgd" in self.codecs else 0),
        ]
        if cw > 1:
            m.d.sync += [
                sign_bit.eq(Cat(c.param == b + 1 for b in range(cw))),
                magnitude.eq(Cat(c.param > b + 1 for b in range(cw))),
                extend.eq(Cat(c.param <= b + 1 for b in range(sw))),
            ]
        return is_fixed, is_qsgd, sign_bit, magnitude, extend

    def _signed(self, m, code, config):
        """The host code's signed value, ``sum_width`` bits of two's complement; and whether
        it is subtracted (``qsgd``'s negative levels: the magnitude is returned)."""
        is_fixed, is_qsgd, sign_bit, magnitude, extend = config
        sw = self.sum_width
        if self.code_width == 1:
            return code[0], Const(0)
        negative = (code & sign_bit).any()
        # fixed: the code with its sign bit copied upwards; qsgd: the level, subtracted
        fixed = code | Mux(negative, extend, 0)
        level = code & magnitude
        value = Mux(is_fixed, fixed, Mux(is_qsgd, level, code[0]))
        return value[:sw], is_qsgd & negative

    def _own_frames(self, m):
        """The host's segments (:class:`~.host_segments.HostSegments`) in turn: a segment of
        the node's own chunk makes a frame, k = 1, of zero sums; any other is the next wire
        frame's turn. Returns the generator's signals (``step``: a job of an own frame
        taken; ``wire``: the head is a wire frame's turn; ``done``: that turn is over)."""
        c = self.cfg
        m.submodules.segments = walk = HostSegments(codecs=self.codecs, mtu=self.mtu)
        m.d.comb += walk.cfg.eq(c)
        head = walk.o.payload
        # whose the head is, a register: a cycle behind the head, so the cycle after a
        # segment is taken does nothing
        popped = Signal()
        own_r, wire_r = Signal(), Signal()
        m.d.sync += [popped.eq(walk.o.valid & walk.o.ready),
                     own_r.eq(walk.o.valid & (head.chunk == c.rank)),
                     wire_r.eq(walk.o.valid & (head.chunk != c.rank))]
        own_head = Signal()
        m.d.comb += own_head.eq(own_r & ~popped)

        loading = Signal()                  # the frame's n is in, its jobs' counts next
        loaded = Signal()
        off = Signal(32)
        n = Signal(16)
        left = Signal(16)
        count = Signal(5)
        last = Signal()
        step = Signal()
        info = Signal(ReduceFrameInfo)
        m.d.comb += [
            info.gather.eq(0), info.contributions.eq(1), info.origin.eq(c.rank),
            info.width.eq(walk.width), info.n.eq(n), info.offset.eq(off),
        ]
        with m.If(~c.enable):
            m.d.sync += [loading.eq(0), loaded.eq(0)]
        with m.Elif(own_head & ~loaded & ~loading):     # the frame's n
            m.d.sync += [n.eq(head.hi - head.lo), off.eq(head.lo), loading.eq(1)]
        with m.Elif(loading):               # its jobs
            m.d.sync += [left.eq(n), count.eq(Mux(n >= 16, 16, n)), last.eq(n <= 16),
                         loading.eq(0), loaded.eq(1)]
        with m.Elif(step):
            rem = left - count
            m.d.sync += [left.eq(rem), count.eq(Mux(rem >= 16, 16, rem)), last.eq(rem <= 16)]
            with m.If(last):
                m.d.sync += loaded.eq(0)
        done = Signal()
        m.d.comb += walk.o.ready.eq((step & last) | done)
        return {"active": own_head, "valid": own_head & loaded, "count": count,
                "last": last, "info": info, "step": step,
                "wire": wire_r & ~popped, "done": done}

    def _sums(self, m, unpacker, order):
        sw, cw = self.sum_width, self.code_width
        config = self._codec_config(m)

        # the host's codes: the host queue, then the aligner
        m.submodules.aligner = aligner = CodeAligner(cw)
        fifo_with_room(m, "host_queue", self.host, aligner.i, self.host_depth,
                       block_ram=self.host_depth >= 64)

        # the unpacker's jobs through a skid buffer (its read stages' enable is its o.ready)
        job = stream.Signature(unpacker.output_layout).create()
        skid_between(m, "job_skid", unpacker.o, job)

        # the queues behind the stages: room while the stages in flight fit
        sums_layout = sums_job_layout(sw)
        sums_q = m.submodules.sums_queue = LutramFifo(
            width=data.Layout.cast(sums_layout).size, depth=_SUMS_DEPTH)
        desc_q = m.submodules.desc_queue = LutramFifo(
            width=data.Layout.cast(ReduceFrameInfo).size, depth=_SUMS_DEPTH)
        room = Signal()
        limit = _SUMS_DEPTH - _SUM_STAGES - 2
        m.d.sync += room.eq((sums_q.level <= limit) & (desc_q.level <= limit))

        # the own chunk's jobs first (zero sums: its frames start the chunk), then the
        # wire frames' in their turns: each job takes its codes, or a turn's are dropped
        own = self._own_frames(m)
        turn = Signal(_ORDER)
        m.d.comb += turn.eq(order.r_data)
        joins = order.r_rdy & ~turn.skip & own["wire"]
        count = Mux(own["active"], own["count"], job.payload.count)
        # each side's compare, not one of the chosen count: whose the head is comes late
        enough_own = aligner.level >= own["count"]
        enough_wire = aligner.level >= job.payload.count
        fire = Signal()
        fire_wire = Signal()
        m.d.comb += [
            job.ready.eq(enough_wire & room & joins),
            fire_wire.eq(job.valid & enough_wire & room & joins),
            own["step"].eq(own["valid"] & enough_own & room),
            fire.eq(fire_wire | own["step"]),
        ]
        # dropping: 16 codes a cycle, then the rest
        dropping = Signal()
        left = Signal(16)                   # codes still to drop, after ``want``
        want = Signal(5)                    # codes dropped when the aligner holds them
        drop = Signal()
        m.d.comb += drop.eq(dropping & own["wire"] & (aligner.level >= want))
        with m.If(~dropping & order.r_rdy & turn.skip & own["wire"]):
            m.d.sync += [dropping.eq(1), want.eq(Mux(turn.n > 16, 16, turn.n)),
                         left.eq(Mux(turn.n > 16, turn.n - 16, 0))]
        with m.If(drop):
            m.d.sync += [want.eq(Mux(left > 16, 16, left)),
                         left.eq(Mux(left > 16, left - 16, 0)),
                         dropping.eq(left != 0)]
        m.d.comb += [
            aligner.pop.eq(Mux(own["step"], own["count"], 0) | Mux(fire_wire, job.payload.count, 0)
                           | Mux(drop, want, 0)),
            order.r_en.eq((fire_wire & job.payload.frame_last) | (drop & (left == 0))),
            own["done"].eq(order.r_en),
        ]

        # stage 1: the job's sums and the host's codes
        v = Signal(_SUM_STAGES)
        m.d.sync += v.eq(Cat(fire, v[:-1]))
        wire1 = Signal(data.ArrayLayout(unsigned(sw), CODES_PER_JOB), reset_less=True)
        host1 = Signal(data.ArrayLayout(unsigned(cw), CODES_PER_JOB), reset_less=True)
        side = data.StructLayout({"count": unsigned(5), "last": unsigned(1),
                                  "info": ReduceFrameInfo})
        side1 = Signal(side, reset_less=True)
        m.d.sync += [
            side1.count.eq(count),
            side1.last.eq(Mux(own["active"], own["last"], job.payload.frame_last)),
            side1.info.eq(Mux(own["active"], own["info"], job.payload.tag)),
        ]
        for e in range(CODES_PER_JOB):
            m.d.sync += [wire1[e].eq(Mux(own["active"], 0, job.payload.codes[e][:sw])),
                         host1[e].eq(aligner.codes[e])]

        # stage 2: the host's signed values, and the width's mask
        wire2 = Signal.like(wire1, reset_less=True)
        value2 = Signal(data.ArrayLayout(unsigned(sw), CODES_PER_JOB), reset_less=True)
        minus2 = Signal(CODES_PER_JOB, reset_less=True)
        mask2 = Signal(sw, reset_less=True)
        side2 = Signal(side, reset_less=True)
        m.d.sync += [wire2.eq(wire1), side2.eq(side1),
                     mask2.eq(Cat(side1.info.width > b for b in range(sw)))]
        for e in range(CODES_PER_JOB):
            value, minus = self._signed(m, host1[e], config)
            m.d.sync += [value2[e].eq(value), minus2[e].eq(minus)]

        # stage 3: the sums, cut to w bits
        out3 = Signal(sums_layout, reset_less=True)
        info3 = Signal(ReduceFrameInfo, reset_less=True)
        m.d.sync += [out3.count.eq(side2.count), out3.last.eq(side2.last),
                     out3.width.eq(side2.info.width), info3.eq(side2.info)]
        for e in range(CODES_PER_JOB):
            total = Mux(minus2[e], wire2[e] - value2[e], wire2[e] + value2[e])
            m.d.sync += out3.sums[e].eq(total[:sw] & mask2)
        m.d.comb += [
            sums_q.w_en.eq(v[-1]), sums_q.w_data.eq(out3),
            desc_q.w_en.eq(v[-1] & out3.last), desc_q.w_data.eq(info3),
            self.desc.valid.eq(desc_q.r_rdy), self.desc.payload.eq(desc_q.r_data),
            desc_q.r_en.eq(self.desc.ready),
        ]

        # the packer: the sums at w bits, a frame's last job closing it
        m.submodules.packer = packer = WirePacker(self.widths, registered_ready=True)
        queued = Signal(sums_layout)
        meta = Signal(PackMeta)
        m.d.comb += [
            queued.eq(sums_q.r_data),
            meta.width.eq(queued.width), meta.count.eq(queued.count),
            meta.close_end.eq(queued.last),
            packer.i.valid.eq(sums_q.r_rdy),
            packer.i.payload.meta.eq(meta),
            sums_q.r_en.eq(packer.i.ready),
        ]
        for e in range(CODES_PER_JOB):
            m.d.comb += packer.i.payload.codes[e].eq(queued.sums[e])

        # its items of up to two beats, one beat a cycle onto o
        beats_q = fifo_with_room(m, "beat_queue", packer.o, None, 4)
        item = Signal(RingWrite)
        second = Signal()
        m.d.comb += [
            item.eq(beats_q.r_data),
            self.o.valid.eq(beats_q.r_rdy & (item.count != 0)),
            self.o.payload.eq(Mux(second, item.beats[1], item.beats[0])),
        ]
        sent = self.o.valid & self.o.ready
        done = (item.count == 0) | (item.count == 1) | second
        m.d.comb += beats_q.r_en.eq((beats_q.r_rdy & (item.count == 0)) | (sent & done))
        with m.If(sent):
            m.d.sync += second.eq(~done)
