"""The TX controller's descriptors: the coalescer's records in, one header request per output
frame out, in output order.

The sizer follows the coalescer's records to know, for every wire frame, the host header
it copies (that of the host frame holding its first element), its ``tuser_src`` /
``tuser_dst`` and the tensor index of its first element; when a frame closes it sizes it
(wire format sections 2–4): ``64 + ⌈n·b/8⌉`` bytes for a dense codec of ``b`` bits,
``64 + 4k + min(⌈n/8⌉, 2k)`` for ``threshold`` (whose layout goes into the header's
``param``), and writes the request for the
:class:`~squeezenic_hw.gateware.lane.header_builder.HeaderBuilder`. A bypassed frame's
record becomes its token (``built = 0``) at its place in the order.
"""

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.unit import delay_taps
from squeezenic_hw.gateware.common.layouts import field_le, token_tag_layout
from squeezenic_hw.gateware.common.stream import Stager, split_like, stage_enable
from squeezenic_hw.gateware.lane.header_builder import header_request_layout
from squeezenic_hw.spec.header import FLAG_STOCHASTIC, HDR, HEADER_LEN

from .coalescer import Cut, RecordKind, close_record_layout
from .job_shaper import index_layout_shorter

__all__ = ["TxCloseSizer"]


#: One entry of the sizer's header store: a host header and its tuser_src / tuser_dst.
_HEADER_ENTRY = data.StructLayout({"hdr": unsigned(512), "src": unsigned(16),
                                   "dst": unsigned(16)})


class TxCloseSizer(wiring.Component):
    """Header requests for the TX lane's output frames (see the module docstring).

    Parameters
    ----------
    width : int or None
        The one code width built in, when there is one: ``n·b`` is then a constant
        product (no multiplier); ``None``: each record's ``width``.
    sparse : bool
        ``threshold`` is built in (its layout choice and size); default ``True``.

    Attributes
    ----------
    i : In(stream.Signature(close_record_layout()))
    o : Out(stream.Signature(header_request_layout(token_tag_layout())))

    Notes
    -----
    Latency: 5 cycles (stage 0: the record and where it cuts; stage 1: which frame
    closes, its template, offset, ``n`` and ``k``; stage 2: ``n·b`` into a DSP48E2, the
    threshold layout; stage 3: the product's second register; stage 4: the size and the
    request). Throughput: one request per
    cycle; a record that closes two frames, or a bypassed frame's record that closes the
    open frame first, takes two cycles, a record that only opens a frame none.
    Backpressure: the pipeline holds while ``o.valid & ~o.ready``; nothing is dropped.
    """

    LATENCY = 5

    def __init__(self, *, width=None, sparse=True):
        if width is not None and (isinstance(width, bool) or not isinstance(width, int)
                                  or not 1 <= width <= 32):
            raise ValueError(f"width must be None or an int 1..32, got {width!r}")
        self._width = width
        self._sparse = bool(sparse)
        super().__init__({
            "i": In(stream.Signature(close_record_layout())),
            "o": Out(stream.Signature(header_request_layout(token_tag_layout()))),
        })

    def elaborate(self, platform):
        m = Module()
        enable = stage_enable()
        m.d.comb += enable.eq(~self.o.valid | self.o.ready)
        st = Stager(m, enable, reset_less=True)
        # ---- stage 0: the record and where it cuts ------------------------------------
        rec_valid = Signal()
        rec = Signal(close_record_layout(), reset_less=True)
        incoming = Cut(m, self.i.payload, "in")
        cut_fields = {"take": incoming.take, "rest": incoming.rest,
                      "close1": incoming.close1, "flush1": incoming.flush1,
                      "rest_opens": incoming.rest_opens, "close2": incoming.close2,
                      "prefix_take": incoming.prefix_take, "suffix_take": incoming.suffix_take}
        cut = {name: Signal(len(value), name=f"cut_{name}", reset_less=True)
               for name, value in cut_fields.items()}
        kind = rec.kind

        # ---- stage 1: the frame that closes --------------------------------------------
        # Two host headers (with their tuser_src / tuser_dst) in distributed RAM: the open
        # frame's, at `opened`, and the latest, at `latest`; the same entry when no frame
        # is open or the open frame has the latest header. A frame that closes reads its
        # template at `opened`; a new header goes to the other entry while a frame stays
        # open with an older one, else over `opened`; a close points `opened` at the
        # latest (the next frame opens with it). So there is no multiplexer over the 512
        # bits, and no copy from register to register.
        headers = Memory(shape=_HEADER_ENTRY, depth=2, init=[])
        m.submodules.headers = headers
        hdr_write = headers.write_port()
        hdr_read = headers.read_port(domain="comb")
        opened = Signal()
        latest = Signal()
        frame_open = Signal()       # a frame is open after the records so far
        open_offset = Signal(32, reset_less=True)
        m.d.comb += hdr_read.addr.eq(opened)
        opened_entry = hdr_read.data

        second = Signal()           # the second close of a record that closes two frames
        # a beat that closes two frames, or a bypassed frame after the close of the open
        # one: two tokens, in two cycles
        double = (((kind == RecordKind.BEAT) & cut["close2"])
                  | ((kind == RecordKind.BYPASS) & rec.mismatch))
        last_of_record = ~double | second
        load = stage_enable("load")     # the record registers' enable (wide)
        m.d.comb += [load.eq(enable & (~rec_valid | last_of_record)), self.i.ready.eq(load)]
        with m.If(load):
            m.d.sync += [rec_valid.eq(self.i.valid), rec.eq(self.i.payload),
                         *[cut[name].eq(value) for name, value in cut_fields.items()]]
        advance = enable & rec_valid
        with m.If(advance):
            m.d.sync += second.eq(~last_of_record)

        emit = Signal()
        built = Signal()
        n = Signal(16)
        k = Signal(16)
        offset = Signal(32)
        flush = Signal()
        # the frame open before the record (a beat's element 0 may open it)
        beat_opens = (kind == RecordKind.BEAT) & rec.opens
        m.d.comb += [
            built.eq(1),
            offset.eq(Mux(beat_opens, rec.offset, open_offset)),
            n.eq(rec.n_before + cut["take"]),
            k.eq(rec.k_before + cut["prefix_take"]),
        ]
        rest_offset = rec.offset + cut["take"]
        # a header goes to the other entry while a frame stays open with the one it has
        stays = frame_open & ~rec.mismatch
        entry = Mux(stays, ~opened, opened)
        m.d.comb += [
            hdr_write.addr.eq(entry),
            # driven in every state
            hdr_write.data.hdr.eq(rec.hdr),
            hdr_write.data.src.eq(rec.src),
            hdr_write.data.dst.eq(rec.dst),
        ]
        closes = Signal()           # a frame closes: the next one opens with the latest header
        with m.If(advance & closes):
            m.d.sync += opened.eq(latest)
        with m.Switch(kind):
            with m.Case(RecordKind.HEADER):
                m.d.comb += emit.eq(rec.mismatch)
                m.d.comb += hdr_write.en.eq(advance)
                with m.If(advance):
                    m.d.sync += [latest.eq(entry), frame_open.eq(stays)]
            with m.Case(RecordKind.CLOSE):
                m.d.comb += [emit.eq(1), closes.eq(1)]
                with m.If(advance):
                    m.d.sync += frame_open.eq(0)
            with m.Case(RecordKind.BYPASS):
                with m.If(rec.mismatch & ~second):
                    # first the open frame closes, as for a CLOSE record
                    m.d.comb += [emit.eq(1), closes.eq(1)]
                    with m.If(advance):
                        m.d.sync += frame_open.eq(0)
                with m.Else():
                    m.d.comb += [emit.eq(1), built.eq(0)]
            with m.Case(RecordKind.BEAT):
                # (both cycles of a double close: the second frame reads the latest header)
                m.d.comb += closes.eq(cut["close1"])
                with m.If(second):
                    m.d.comb += [emit.eq(1), offset.eq(rest_offset),
                                 n.eq(cut["rest"]), k.eq(cut["suffix_take"]), flush.eq(1)]
                with m.Else():
                    m.d.comb += [emit.eq(cut["close1"]), flush.eq(cut["flush1"])]
                with m.If(advance & last_of_record):
                    m.d.sync += frame_open.eq(~cut["close1"]
                                              | (cut["rest_opens"] & ~cut["close2"]))
                    with m.If(cut["rest_opens"] | beat_opens):
                        m.d.sync += open_offset.eq(Mux(cut["rest_opens"], rest_offset,
                                                       rec.offset))

        s1_valid = st.reg(rec_valid & emit, name="s1_valid", reset_less=False)
        fields = {"built": built, "template": opened_entry.hdr, "src": opened_entry.src,
                  "dst": opened_entry.dst,
                  "offset": offset, "flush": flush, "size": rec.size, "sparse": rec.sparse}
        # n and k in flip-flops (stage 1 multiplies them, stage 4 adds them up for the
        # threshold sizes: no distributed-RAM read in front of that carry chain)
        counts = delay_taps(m, st, Cat(n, k), [1, 3], name="counts")
        s1_n, s1_k = split_like(counts[1], (n, k))
        s1 = {"n": s1_n, "k": s1_k, "width": st.reg(rec.width, name="s1_width")}

        # ---- stages 2 and 3: n·b (registered twice: a DSP48E2's MREG and PREG) ---------
        bits, layout, s3, s3_valid = self._product_stages(m, s1=s1, st=st, fields=fields,
                                                       s1_valid=s1_valid)

        # ---- stage 4: the size and the request -----------------------------------------
        self._request_stage(m, counts=counts, n=n, k=k, layout=layout, s3=s3, bits=bits, st=st,
                     s3_valid=s3_valid)
        return m

    def _product_stages(self, m, *, s1, st, fields, s1_valid):
        """Stages 2 and 3: n·b (registered twice: a DSP48E2's MREG and PREG), and the fields
        waiting beside it."""
        # one code width built in: n·b is a constant product (no multiplier)
        b = s1["width"] if self._width is None else self._width
        bits = st.reg(s1["n"] * b, name="s2_bits")
        # the threshold layout choice (only with threshold built in)
        layout = (st.reg(index_layout_shorter(s1["n"], s1["k"]), name="s2_index")
                  if self._sparse else Const(0, 1))
        # the fields wait three cycles beside the product in flip-flops (no LUT; a shift
        # register would take one a bit, distributed RAM half of one)
        waited = delay_taps(m, st, Cat(*fields.values()), [3], name="s3_fields")[3]
        s3 = dict(zip(fields, split_like(waited, list(fields.values())), strict=True))
        s3_valid = st.reg(st.reg(s1_valid, name="s2_valid", reset_less=False),
                          name="s3_valid", reset_less=False)
        bits = st.reg(bits, name="s3_bits")
        if self._sparse:
            layout = st.reg(layout, name="s3_index")
        return bits, layout, s3, s3_valid

    def _request_stage(self, m, *, counts, n, k, layout, s3, bits, st, s3_valid):
        """Stage 4: the size and the request."""
        n3, k3 = split_like(counts[3], (n, k))
        sparse_size = HEADER_LEN + (k3 << 2) + Mux(layout, k3 << 1, (n3 + 7) >> 3)
        size = Signal(16)
        m.d.comb += size.eq(Mux(s3["built"],
                                Mux(s3["sparse"] if self._sparse else 0, sparse_size,
                                    (bits + 7 + 8 * HEADER_LEN) >> 3),
                                s3["size"]))
        hdr = s3["template"]
        p0, plen = HDR.PARAM
        template = Mux(s3["sparse"] if self._sparse else 0,
                       Cat(hdr[:8 * p0], layout, Const(0, 7), hdr[8 * (p0 + plen):]), hdr)
        stochastic = field_le(hdr, *HDR.FLAGS)[FLAG_STOCHASTIC.bit_length() - 1]
        req = Signal.like(self.o.payload)
        m.d.comb += [
            req.template.eq(template),
            req.size.eq(size),
            req.n.eq(n3),
            req.offset.eq(s3["offset"]),
            req.flags.eq(Cat(Const(1, 1), stochastic, s3["flush"], Const(0, 5))),
            req.tag.built.eq(s3["built"]),
            req.tag.size.eq(size),
            req.tag.src.eq(s3["src"]),
            req.tag.dst.eq(s3["dst"]),
        ]
        m.d.comb += [
            self.o.valid.eq(st.reg(s3_valid, name="s4_valid", reset_less=False)),
            self.o.payload.eq(st.reg(req, name="s4_request")),
        ]
