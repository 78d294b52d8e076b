"""The RX lane's frame controller: bypass, or hand a wire frame to the unpacker and splitter.

After the :class:`~squeezenic_hw.gateware.lane.classifier.FrameClassifier`:

* a frame to bypass: a descriptor with ``built = 0`` (for the merger's order)
  and its beats on ``bypass``;
* a wire frame to decode: one descriptor with ``built = 1`` (template header,
  ``n``, ``offset``, flags, ``tuser_src``/``dst``), which the
  :class:`~.host_frame_splitter.HostFrameSplitter` turns into host frames, and
  its payload beats on ``payload`` (for the
  :class:`~.wire_unpacker.WireUnpacker`) with ``n``, the code width and the
  codec parameters on each beat.

With ``threshold`` (codec 7) built in, a threshold wire frame's payload is
split: its layout bytes go to ``payload`` as a bitmap of ``n`` one-bit codes
(bitmap layout) or to ``index`` (index layout, for the
:class:`~.index_to_bitmap.IndexToBitmap`), and its value bytes to ``values``
(for the :class:`~.sparse_expander.SparseExpander`); the beat holding both
goes to both. ``order`` says, per decoded frame, where the unpacker's input
comes from.
"""

from amaranth import Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.unit import CodecParams
from squeezenic_hw.gateware.common.layouts import (
    Reason,
    axis_signature,
    field_le,
)
from squeezenic_hw.gateware.lane.classifier import ClassifiedBeat
from squeezenic_hw.gateware.lane.control import (
    bypass_and_drain_states,
    bypass_first_beat,
    code_width_of,
    codec_params_of,
)
from squeezenic_hw.spec.codecs import THRESHOLD_ID, resolve_codecs
from squeezenic_hw.spec.counters import RX_COUNTERS
from squeezenic_hw.spec.frames import RX_REASONS
from squeezenic_hw.spec.header import HDR, HEADER_LEN

from .unpacker import unpacker_input_layout

__all__ = ["RxController", "rx_counters_layout", "wire_desc_layout",
           "rx_payload_tag_layout"]

def rx_counters_layout():
    return data.StructLayout({name: unsigned(32) for name in RX_COUNTERS})


def wire_desc_layout():
    """One input frame of the RX lane, for the host-frame splitter."""
    return data.StructLayout({
        "built": unsigned(1),      # 0: bypassed (only ``size`` matters)
        "template": unsigned(512),
        "n": unsigned(16),
        "offset": unsigned(32),
        "flags": unsigned(8),
        "size": unsigned(16),
        "src": unsigned(16),
        "dst": unsigned(16),
    })


def rx_payload_tag_layout():
    """What rides with each payload beat through the unpacker to the decoders."""
    return data.StructLayout({"codec": unsigned(3), "params": CodecParams})


def rx_payload_layout():
    """A payload beat for the unpacker, with ``last`` on the frame's last one."""
    return data.StructLayout({"beat": unpacker_input_layout(rx_payload_tag_layout()),
                              "last": unsigned(1)})


#: One decoded wire frame, in order: ``index`` = its bitmap comes from the IndexToBitmap.
RX_ORDER_LAYOUT = data.StructLayout({"index": unsigned(1), "n": unsigned(16)})
#: A threshold frame with the index layout, for the IndexToBitmap.
RX_INDEX_DESC_LAYOUT = data.StructLayout({"n": unsigned(16), "k": unsigned(16)})
#: A threshold frame's values, for the SparseExpander.
RX_VALUES_DESC_LAYOUT = data.StructLayout({"k": unsigned(16), "start": unsigned(6)})


class RxController(wiring.Component):
    """Frame controller of the RX lane (see the module docstring).

    Parameters
    ----------
    codecs : iterable of str or int, optional
        Codecs built in (default 0–6).

    Latency: combinational (the blocks around it register). Throughput: one
    beat per cycle. Backpressure: a beat is accepted only when every output
    it needs is ready. Wire frames whose beats end before ``tuser_size`` says
    are padded with zero beats, extra beats are discarded; both count in
    ``size_errors``.
    """

    def __init__(self, *, codecs=None):
        self._codecs = sorted(resolve_codecs(codecs))
        self._sparse = THRESHOLD_ID in self._codecs
        super().__init__({
            "i": In(stream.Signature(ClassifiedBeat)),
            "desc": Out(stream.Signature(wire_desc_layout())),
            "payload": Out(stream.Signature(rx_payload_layout())),
            "bypass": Out(axis_signature()),
            "counters": Out(rx_counters_layout()),
            # threshold only (never valid without it)
            "order": Out(stream.Signature(RX_ORDER_LAYOUT)),
            "index_desc": Out(stream.Signature(RX_INDEX_DESC_LAYOUT)),
            "index": Out(stream.Signature(unsigned(512))),
            "vdesc": Out(stream.Signature(RX_VALUES_DESC_LAYOUT)),
            "values": Out(stream.Signature(unsigned(512))),
            # a bitmap frame with padding bits set (one-cycle strobe)
            "layout_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        beat = self.i.payload.beat
        reason = self.i.payload.reason
        hdr = beat.data
        desc, pay, byp = self.desc, self.payload, self.bypass
        counters = self.counters

        def bump(name, amount=1):
            m.d.sync += counters[name].eq(counters[name] + amount)

        h_codec = field_le(hdr, *HDR.CODEC)
        h_param = field_le(hdr, *HDR.PARAM)
        h_flags = field_le(hdr, *HDR.FLAGS)
        h_n = field_le(hdr, *HDR.N)
        h_width = Signal(6)
        m.d.comb += h_width.eq(code_width_of(h_codec, h_param))
        h_beats = Signal(16)       # ⌈n·b / 512⌉ payload beats
        m.d.comb += h_beats.eq((h_n * h_width + 511) >> 9)

        # threshold: layout bytes L and values k from n, the layout and the length
        # (the classifier has checked that they agree)
        h_sparse = Signal()
        h_index = Signal()
        h_k = Signal(16)
        h_layout_bytes = Signal(16)
        h_total = Signal(16)       # payload beats
        if self._sparse:
            x = Signal(16, name="sparse_payload_bytes")
            bitmap = (h_n + 7) >> 3
            k_index = Signal(16, name="k_index")
            # x / 6 for x a multiple of 6 below 2**16: x·43691 / 2**18 is exact
            m.d.comb += [
                x.eq(beat.size - HEADER_LEN),
                k_index.eq((x * 43691) >> 18),
                h_sparse.eq(h_codec == THRESHOLD_ID),
                h_index.eq(h_param[0]),
                h_k.eq(Mux(h_index, k_index, (x - bitmap) >> 2)),
                h_layout_bytes.eq(Mux(h_index, k_index << 1, bitmap)),
                h_total.eq((x + 63) >> 6),
            ]

        f_n = Signal(16)
        f_width = Signal(6)
        f_tag = Signal(rx_payload_tag_layout())
        left = Signal(16)          # payload beats still to come
        pad = Signal()
        f_sparse = Signal()
        f_index = Signal()
        f_k = Signal(16)
        f_layout_bytes = Signal(16)
        t = Signal(16)             # payload beat number within the frame

        m.d.comb += [
            pay.payload.beat.n.eq(f_n),
            pay.payload.beat.width.eq(Mux(f_sparse, 1, f_width)),
            pay.payload.beat.tag.eq(f_tag),
            pay.payload.beat.data.eq(beat.data),
            self.index.payload.eq(beat.data),
            self.values.payload.eq(beat.data),
        ]
        with m.If(pad):
            m.d.comb += [pay.payload.beat.data.eq(0), self.index.payload.eq(0),
                         self.values.payload.eq(0)]

        with m.FSM(name="rx_ctrl"):
            with m.State("IDLE"):
                with m.If(self.i.valid & (reason != Reason.NONE)):
                    bypass_first_beat(m, self.i, desc, byp, built=desc.payload.built,
                                      size=desc.payload.size, reasons=RX_REASONS, bump=bump)
                with m.Elif(self.i.valid):
                    # every output the header needs must take it in the same cycle
                    sparse_ready = Const(1)
                    if self._sparse:
                        sparse_ready = (self.order.ready
                                        & (~h_sparse | self.vdesc.ready)
                                        & (~(h_sparse & h_index) | self.index_desc.ready))
                        go = desc.ready & sparse_ready
                        m.d.comb += [
                            self.order.valid.eq(desc.ready & (~h_sparse | self.vdesc.ready)
                                                & (~(h_sparse & h_index)
                                                   | self.index_desc.ready)),
                            self.order.payload.index.eq(h_sparse & h_index),
                            self.order.payload.n.eq(h_n),
                            self.vdesc.valid.eq(h_sparse & go),
                            self.vdesc.payload.k.eq(h_k),
                            self.vdesc.payload.start.eq(h_layout_bytes[:6]),
                            self.index_desc.valid.eq(h_sparse & h_index & go),
                            self.index_desc.payload.n.eq(h_n),
                            self.index_desc.payload.k.eq(h_k),
                        ]
                    m.d.comb += [
                        desc.valid.eq(sparse_ready),
                        desc.payload.built.eq(1),
                        desc.payload.template.eq(hdr),
                        desc.payload.n.eq(h_n),
                        desc.payload.offset.eq(field_le(hdr, *HDR.OFFSET)),
                        desc.payload.flags.eq(h_flags),
                        desc.payload.size.eq(beat.size),
                        desc.payload.src.eq(beat.src),
                        desc.payload.dst.eq(beat.dst),
                        self.i.ready.eq(desc.ready & sparse_ready),
                    ]
                    with m.If(desc.ready & sparse_ready):
                        bump("wire_frames")
                        bump("elements", h_n)
                        m.d.sync += [
                            f_n.eq(h_n),
                            f_width.eq(h_width),
                            f_tag.codec.eq(h_codec),
                            *codec_params_of(f_tag.params, hdr),
                            left.eq(Mux(h_sparse, h_total, h_beats)),
                            pad.eq(beat.last),
                            f_sparse.eq(h_sparse),
                            f_index.eq(h_index),
                            f_k.eq(h_k),
                            f_layout_bytes.eq(h_layout_bytes),
                            t.eq(0),
                        ]
                        with m.If(h_sparse & (h_total == 0)):
                            # index layout with k = 0: the header is the whole frame
                            with m.If(~beat.last):
                                bump("size_errors")
                                m.next = "DRAIN"
                        with m.Else():
                            with m.If(beat.last):
                                bump("size_errors")
                            m.next = "PAYLOAD"

            with m.State("PAYLOAD"):
                have = self.i.valid | pad
                layout_beats = (f_layout_bytes + 63) >> 6
                in_layout = t < layout_beats
                in_values = (t >= (f_layout_bytes >> 6)) & (f_k != 0)
                to_pay = ~f_sparse | (in_layout & ~f_index)
                to_idx = f_sparse & in_layout & f_index
                to_val = f_sparse & in_values
                ok = ((~to_pay | pay.ready) & (~to_idx | self.index.ready)
                      & (~to_val | self.values.ready))
                m.d.comb += [
                    pay.valid.eq(have & to_pay & ok),
                    pay.payload.last.eq(Mux(f_sparse, t + 1 == layout_beats, left == 1)),
                    self.index.valid.eq(have & to_idx & ok),
                    self.values.valid.eq(have & to_val & ok),
                    self.i.ready.eq(ok & ~pad),
                ]
                if self._sparse:
                    # bitmap padding bits (past n in the last bitmap byte) must be zero
                    last_byte = beat.data.word_select((f_layout_bytes - 1)[:6], 8)
                    pad_bits = (Const(0xFF, 8) << f_n[:3])[:8]
                    m.d.comb += self.layout_error.eq(
                        have & ok & ~pad & f_sparse & ~f_index & (t + 1 == layout_beats)
                        & (f_n[:3] != 0) & ((last_byte & pad_bits) != 0))
                with m.If(have & ok):
                    m.d.sync += [left.eq(left - 1), t.eq(t + 1)]
                    final = left == 1
                    with m.If(~pad & beat.last & ~final):
                        bump("size_errors")
                        m.d.sync += pad.eq(1)
                    with m.If(final):
                        m.d.sync += pad.eq(0)
                        with m.If(~pad & ~beat.last):
                            bump("size_errors")
                            m.next = "DRAIN"
                        with m.Else():
                            m.next = "IDLE"

            bypass_and_drain_states(m, self.i, byp)
        return m
