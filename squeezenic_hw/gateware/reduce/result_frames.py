"""The host's result frames (``docs/wire-format.md`` section 8.5): each finished gather frame
of an integer codec, its sums made the host's fp32 values, in frames of at most
``max_host_elements`` values."""

from amaranth import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import BEAT_BITS, axis_signature, field_le
from squeezenic_hw.gateware.common.stream import fifo_with_room
from squeezenic_hw.gateware.rx.host_frame_splitter import check_max_host_elements
from squeezenic_hw.gateware.rx.unpacker import WireUnpacker
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, HDR
from squeezenic_hw.spec.reduce import (
    HOST_VALUE_WIDTH,
    INTEGER_CODECS,
    MAX_NODES,
    MIN_NODES,
    REDUCE_HDR,
)

from .adder import integer_widths
from .frame_out import ReduceFrameOut
from .judging import header_byte
from .layouts import ReduceConfig, integer_codecs
from .sum_decoder import SumDecoder

__all__ = ["ResultFrames"]

#: Gather frames whose descriptors wait for the unpacker and the splitter.
_FRAMES = 8
#: A gather frame's part the splitter cuts into result frames.
_SPLIT = data.StructLayout({"n": unsigned(16), "offset": unsigned(32), "origin": unsigned(4)})


class ResultFrames(wiring.Component):
    """Turns finished gather frames into the host's result frames.

    A gather frame's header gives its ``n`` sums of w bits, ``offset`` and ``origin``.
    A :class:`~squeezenic_hw.gateware.rx.unpacker.WireUnpacker` cuts its sums into jobs of
    up to 16, ``max_host_elements`` a result frame; a :class:`~.sum_decoder.SumDecoder`
    makes each job the host's values (one payload beat); the splitter gives each result
    frame its ``n`` and ``offset``; a :class:`~.frame_out.ReduceFrameOut` (``encoded`` 0)
    writes its header from the node's ``template`` (``gather`` 1, ``contributions`` N,
    ``width`` 32, ``origin``) and its beats.

    Parameters
    ----------
    codecs, nodes, params :
        As :class:`~.adder.ReduceAdder`'s: the sums' widths to build for.
    max_host_elements : int
        Most values a result frame carries (default 363: a 1518-byte frame).

    Attributes
    ----------
    i : In(axis_signature())
        Gather frames (checked: ``n`` ≥ 1, a built width, their length right).
    o : Out(axis_signature())
        The result frames.
    cfg : In(ReduceConfig)
        ``nodes``, ``stochastic``, ``codec`` and ``aux`` are read.
    template : In(512)
        The node's header (its ring frames').
    table_addr, table_data, table_we : In(5), In(32), In(1)
        The ``sign`` values' table (:class:`~.sum_decoder.SumDecoder`).

    Notes
    -----
    Latency: from a gather frame's last beat to its first result frame's header: the
    unpacker's, the decoder's and the frame out's (its header waits until the frame's
    beats are all in its queue). Throughput: one beat per cycle in; a result frame's
    values a beat a cycle out, its header one more. Backpressure: ``i.ready`` is a
    register (the unpacker's, on payload beats; the descriptor queues' room, on headers)
    chosen by a register; ``o`` holds its beat while not ready, and fills the queues
    behind it. Nothing is dropped or reordered.
    """

    def __init__(self, *, codecs=INTEGER_CODECS, nodes=range(MIN_NODES, MAX_NODES + 1),
                 params=range(2, 17), max_host_elements=DEFAULT_HOST_ELEMENTS):
        self.codecs = integer_codecs(codecs)
        self.max_host_elements = check_max_host_elements(max_host_elements)
        self.widths = integer_widths(self.codecs, tuple(nodes), tuple(params))
        self.sum_width = max(self.widths)
        self._decoder = SumDecoder(codecs=self.codecs, sum_width=self.sum_width)
        self._unpacker = WireUnpacker(self.widths, max_host_elements=self.max_host_elements,
                                      tag_shape=unsigned(6))
        # a result frame's beats are all in the frame out's queue before its header leaves
        self._frame_out = ReduceFrameOut(depth=max(64, -(-self.max_host_elements // 16)),
                                         encoded=False)
        super().__init__({
            "i": In(axis_signature()),
            "o": Out(axis_signature()),
            "cfg": In(ReduceConfig),
            "template": In(BEAT_BITS),
            "table_addr": In(5),
            "table_data": In(32),
            "table_we": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.unpacker = unpacker = self._unpacker
        m.submodules.decoder = decoder = self._decoder
        m.submodules.frame_out = frame_out = self._frame_out
        m.d.comb += [
            decoder.cfg.eq(self.cfg), frame_out.cfg.eq(self.cfg),
            frame_out.template.eq(self.template),
            decoder.table_addr.eq(self.table_addr), decoder.table_data.eq(self.table_data),
            decoder.table_we.eq(self.table_we),
        ]

        # ---- the input: a header gives the descriptors, the payload goes to the unpacker --
        beat = self.i.payload
        d = beat.data
        in_frame = Signal()                    # a payload beat is next
        descs = stream.Signature(unpacker.desc.payload.shape()).create(path=("descs",))
        splits = stream.Signature(_SPLIT).create(path=("splits",))
        fifo_with_room(m, "desc_queue", descs, unpacker.desc, _FRAMES)
        split_q = fifo_with_room(m, "split_queue", splits, None, _FRAMES)
        header_room = descs.ready & splits.ready
        m.d.comb += self.i.ready.eq(Mux(in_frame, unpacker.i.ready, header_room))
        moves = self.i.valid & self.i.ready
        with m.If(moves):
            m.d.sync += in_frame.eq(~beat.last)
        m.d.comb += [
            unpacker.i.valid.eq(self.i.valid & in_frame),
            unpacker.i.payload.data.eq(d),
            unpacker.i.payload.zero.eq(0),
        ]
        # the header's fields, then n·w (a product registered in and out) two cycles later;
        # headers are two beats apart at least (n ≥ 1), so the queues' room covers both
        took = Signal(2)
        n1, n2 = Signal(16, reset_less=True), Signal(16, reset_less=True)
        w1, w2 = Signal(6, reset_less=True), Signal(6, reset_less=True)
        nw2 = Signal(22, reset_less=True)
        offset1, offset2 = Signal(32, reset_less=True), Signal(32, reset_less=True)
        origin1, origin2 = Signal(4, reset_less=True), Signal(4, reset_less=True)
        m.d.sync += [took.eq(Cat(moves & ~in_frame, took[0])),
                     n2.eq(n1), w2.eq(w1), nw2.eq(n1 * w1), offset2.eq(offset1),
                     origin2.eq(origin1)]
        with m.If(moves & ~in_frame):
            m.d.sync += [n1.eq(field_le(d, *HDR.N)),
                         w1.eq(header_byte(d, REDUCE_HDR.WIDTH[0])),
                         offset1.eq(field_le(d, *HDR.OFFSET)),
                         origin1.eq(header_byte(d, REDUCE_HDR.ORIGIN[0]))]
        m.d.comb += [
            descs.valid.eq(took[1]),
            descs.payload.n.eq(n2),
            descs.payload.width.eq(w2),
            descs.payload.bits.eq(nw2),
            descs.payload.tag.eq(w2),
            splits.valid.eq(took[1]),
            splits.payload.n.eq(n2),
            splits.payload.offset.eq(offset2),
            splits.payload.origin.eq(origin2),
        ]

        # ---- the splitter: a result frame's fields a cycle --------------------------------
        M = self.max_host_elements
        head = Signal(_SPLIT)
        m.d.comb += head.eq(split_q.r_data)
        busy = Signal()
        left = Signal(16, reset_less=True)
        offset = Signal(32, reset_less=True)
        cur_left = Mux(busy, left, head.n)
        cur_offset = Mux(busy, offset, head.offset)
        last = cur_left <= M
        out = frame_out.desc
        fire = split_q.r_rdy & out.ready
        m.d.comb += [
            out.valid.eq(split_q.r_rdy),
            out.payload.gather.eq(1),
            out.payload.contributions.eq(self.cfg.nodes),
            out.payload.origin.eq(head.origin),
            out.payload.width.eq(HOST_VALUE_WIDTH),
            out.payload.n.eq(Mux(last, cur_left, M)),
            out.payload.offset.eq(cur_offset),
            split_q.r_en.eq(fire & last),
        ]
        with m.If(fire):
            m.d.sync += [busy.eq(~last), left.eq(cur_left - M), offset.eq(cur_offset + M)]

        # ---- the sums' values, a job a payload beat ---------------------------------------
        job = unpacker.o.payload
        sums = decoder.i.payload
        m.d.comb += [
            decoder.i.valid.eq(unpacker.o.valid),
            unpacker.o.ready.eq(decoder.i.ready),
            sums.count.eq(job.count),
            sums.width.eq(job.tag),
            sums.last.eq(job.host_last),
        ]
        for e in range(len(sums.sums)):
            m.d.comb += sums.sums[e].eq(job.codes[e][:self.sum_width])
        values = decoder.o.payload
        m.d.comb += [
            frame_out.payload.valid.eq(decoder.o.valid),
            decoder.o.ready.eq(frame_out.payload.ready),
            frame_out.payload.payload.eq(Cat(*values.elements)),
        ]
        wiring.connect(m, wiring.flipped(self.o), frame_out.o)
        return m
