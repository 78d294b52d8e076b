"""The reduce lane's frames for the successor (``docs/wire-format.md`` section 8.3): each
outgoing frame's version 2 header, written from the node's header template and the
frame's fields, then its payload beats, as one AXI-Stream frame."""

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import BEAT_BITS, axis_signature, keep_through
from squeezenic_hw.gateware.common.stream import (
    MAX_FANOUT,
    ROOM_SLACK,
    LutramFifo,
    fifo_with_room,
    stage_enable,
)
from squeezenic_hw.gateware.lane.header_builder import HeaderBuilder
from squeezenic_hw.spec.header import HEADER_LEN
from squeezenic_hw.spec.reduce import REDUCE_HDR

from .layouts import ReduceConfig, ReduceFrameInfo

__all__ = ["ReduceFrameOut"]

#: Outgoing fields the frame-out holds (frames whose payload is on its way).
_FRAMES = 16
_BEATS_BITS = 12          # a frame's payload beats, ≤ 150 (9600 bytes)
#: Cycles from a beat written into the payload queue to its read side (block RAM: the
#: RAM, its read port, the output register).
_READ_LATENCY = 3
#: Headers the header builder's queue holds.
_BUILDER_DEPTH = 4


class _Emit(data.Struct):
    """What the emitter needs of a frame besides its header."""
    beats: unsigned(_BEATS_BITS)     # payload beats, ≥ 1
    size: unsigned(16)
    last_byte: unsigned(6)           # of the last beat's bytes, the last one's index


class ReduceFrameOut(wiring.Component):
    """Writes each outgoing reduce frame: its header beat, then its payload beats.

    The header is the node's ``template`` with the frame's own fields: ``flags``
    (``encoded``, ``stochastic`` as ``cfg``, ``gather`` as the frame), ``n``, ``offset``,
    bytes 56–59 (contributions, width, ``cfg.nodes``, origin) and, through a
    :class:`~squeezenic_hw.gateware.lane.header_builder.HeaderBuilder`, the IPv4 and UDP
    lengths and the IPv4 checksum of its size 64 + ⌈n·w/8⌉.

    A frame's header leaves only when all of its payload beats are readable in the
    payload queue (a MAC cannot pause inside a frame; a register counts the beats
    readable), then its beats follow back to back.

    Parameters
    ----------
    depth : int
        Payload beats the queue holds (block RAM from 64), at least the longest frame's
        and 2 … 4096 (default 64).
    encoded : bool
        The ``encoded`` flag of the frames (default ``True``: the ring's reduce frames;
        ``False``: the host's result frames of section 8.5, whose ``width`` is 32).

    Attributes
    ----------
    desc : In(stream.Signature(ReduceFrameInfo))
        Each frame's outgoing fields, in order.
    payload : In(stream.Signature(unsigned(512)))
        The frames' payload beats, ⌈n·w/512⌉ each, back to back.
    template : In(512)
        The node's header for its successor (software writes it): addresses, ports, TOS,
        TTL, identification, ``version`` 2, ``codec``, ``param``, ``scale``, ``aux``; the
        fields above are overwritten.
    cfg : In(ReduceConfig)
        ``nodes`` and ``stochastic`` are read.
    o : Out(axis_signature())
        The frames; ``tkeep`` and ``tuser_size`` from the size, ``tuser_src``/``dst`` 0.

    Notes
    -----
    Latency: from a frame's fields accepted to its header offered, about 9 cycles when
    its payload is in (the fields queue; n·w, two registered stages; the header builder,
    4; the emitter's register). Throughput: one beat per cycle, frames back to back.
    Backpressure: ``payload.ready`` is a register (the queue's room), ``desc.ready`` the
    fields queue's not-full;
    ``o`` holds its beat while not ready. Nothing is dropped or reordered. Only valid
    bits, pointers and the emitter's state are reset.

    Resources, measured with ``python -c "from squeezenic_hw.flows import synth; from
    squeezenic_hw.gateware.reduce.frame_out import ReduceFrameOut;
    print(synth.synthesize(ReduceFrameOut(), timing=True).summary())"``: 994 LUT, 46
    LUTRAM, 1 614 FF, 7.5 BRAM36 (the payload queue), 1 DSP (n·w); estimated 2.65 ns, at
    most 4 LUT levels.
    """

    def __init__(self, *, depth=64, encoded=True):
        if isinstance(depth, bool) or not isinstance(depth, int) or not 2 <= depth <= 4096:
            raise ValueError(f"depth must be an int from 2 to 4096, got {depth!r}")
        if not isinstance(encoded, bool):
            raise ValueError(f"encoded must be a bool, got {encoded!r}")
        self.depth = depth
        self.encoded = encoded
        super().__init__({
            "desc": In(stream.Signature(ReduceFrameInfo)),
            "payload": In(stream.Signature(unsigned(BEAT_BITS))),
            "template": In(BEAT_BITS),
            "cfg": In(ReduceConfig),
            "o": Out(axis_signature()),
        })

    def elaborate(self, platform):
        m = Module()
        # the payload queue: its level says when a frame's beats are all in
        beats = fifo_with_room(m, "payload_queue", self.payload, None, self.depth,
                               block_ram=self.depth >= 64)

        # the fields through n·w (two registered stages), then the header builder's queue
        fields_q = m.submodules.fields_queue = LutramFifo(
            width=data.Layout.cast(ReduceFrameInfo).size, depth=_FRAMES)
        m.d.comb += [fields_q.w_en.eq(self.desc.valid), fields_q.w_data.eq(self.desc.payload),
                     self.desc.ready.eq(fields_q.w_rdy)]
        m.submodules.header_builder = builder = HeaderBuilder(depth=_BUILDER_DEPTH)
        # what the emitter needs of each frame waits beside its header, in a queue whose
        # read is a register (the header queue's read is distributed RAM)
        emits = m.submodules.emit_queue = LutramFifo(width=data.Layout.cast(_Emit).size,
                                                     depth=2 * _BUILDER_DEPTH + 4)
        info = Signal(ReduceFrameInfo)
        m.d.comb += info.eq(fields_q.r_data)
        # the stages move while the builder takes requests (its ready is a register)
        move = builder.i.ready
        v1, v2 = Signal(), Signal()
        info1 = Signal(ReduceFrameInfo, reset_less=True)
        info2 = Signal(ReduceFrameInfo, reset_less=True)
        nw1 = Signal(22, reset_less=True)
        nw2 = Signal(22, reset_less=True)
        m.d.comb += fields_q.r_en.eq(move)
        with m.If(move):
            m.d.sync += [v1.eq(fields_q.r_rdy), info1.eq(info), nw1.eq(info.n * info.width),
                         v2.eq(v1), info2.eq(info1), nw2.eq(nw1)]
        payload_bytes = Signal(16)
        m.d.comb += payload_bytes.eq((nw2 + 7) >> 3)
        header = Signal(BEAT_BITS)
        m.d.comb += header.eq(self.template)
        fields = {REDUCE_HDR.CONTRIBUTIONS: info2.contributions, REDUCE_HDR.WIDTH: info2.width,
                  REDUCE_HDR.NODES: self.cfg.nodes, REDUCE_HDR.ORIGIN: info2.origin}
        for (start, _), value in fields.items():
            m.d.comb += header[8 * start:8 * start + 8].eq(value)
        emit = Signal(_Emit)
        m.d.comb += [
            emit.beats.eq((nw2 + BEAT_BITS - 1) >> 9),
            emit.size.eq(HEADER_LEN + payload_bytes),
            emit.last_byte.eq(payload_bytes - 1),
            builder.i.valid.eq(v2),
            builder.i.payload.template.eq(header),
            builder.i.payload.size.eq(emit.size),
            builder.i.payload.n.eq(info2.n),
            builder.i.payload.offset.eq(info2.offset),
            builder.i.payload.flags.eq(
                Cat(Const(int(self.encoded), 1), self.cfg.stochastic, Const(0, 1),
                    info2.gather)),
            emits.w_en.eq(v2 & builder.i.ready), emits.w_data.eq(emit),
        ]

        # the emitter: a frame's header once its beats are in, then the beats
        head = Signal(_Emit)
        m.d.comb += head.eq(emits.r_data)
        left = Signal(_BEATS_BITS)        # payload beats still to send
        last_byte = Signal(6)
        size = Signal(16)
        # inside a frame: the output register takes the queue's beat, else the header
        # waiting (a register select; the register's enable is ``free``)
        in_frame = Signal(attrs={"max_fanout": MAX_FANOUT})
        out_valid = Signal()
        out = Signal(self.o.payload.shape(), reset_less=True)
        m.d.comb += [self.o.valid.eq(out_valid), self.o.payload.eq(out)]
        free = stage_enable("free")
        m.d.comb += free.eq(~out_valid | self.o.ready)
        # the beats readable at the queue's output side, a register: each beat counted once
        # the queue's write-to-read latency has passed
        readable = Signal(range(self.depth + ROOM_SLACK + 1))
        written = Signal(_READ_LATENCY)
        m.d.sync += written.eq(Cat(self.payload.valid & self.payload.ready, written[:-1]))
        start = emits.r_rdy & builder.o.valid & ~in_frame & (readable >= head.beats) & free
        send = in_frame & beats.r_rdy & free
        m.d.sync += readable.eq(readable + written[-1] - send)
        m.d.comb += [builder.o.ready.eq(start), emits.r_en.eq(start), beats.r_en.eq(send)]
        final = left == 1
        with m.If(free):
            m.d.sync += [
                out_valid.eq(start | send),
                out.data.eq(Mux(in_frame, beats.r_data, builder.o.payload.header)),
                out.last.eq(in_frame & final),
                out.keep.eq(Mux(in_frame & final, keep_through(last_byte), -1)),
                out.size.eq(Mux(in_frame, size, head.size)),
                out.src.eq(0), out.dst.eq(0),
            ]
        with m.If(start):
            m.d.sync += [in_frame.eq(1), left.eq(head.beats), last_byte.eq(head.last_byte),
                         size.eq(head.size)]
        with m.If(send):
            m.d.sync += [left.eq(left - 1), in_frame.eq(~final)]
        return m
