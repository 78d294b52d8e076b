"""The RX lane's frame controller: bypass, or hand a wire frame to the unpacker and splitter.

After the :class:`~squeezenic_hw.gateware.frame_classifier.FrameClassifier`:

* a frame to bypass: a descriptor with ``built = 0`` (for the merger's order)
  and its beats on ``bypass``;
* a wire frame to decode: one descriptor with ``built = 1`` (template header,
  ``n``, ``offset``, flags, ``tuser_src``/``dst``), which the
  :class:`~.host_frame_splitter.HostFrameSplitter` turns into host frames, and
  its payload beats on ``payload`` (for the
  :class:`~.wire_unpacker.WireUnpacker`) with ``n``, the code width and the
  codec parameters on each beat.
"""

from amaranth import Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..frames import RX_REASONS
from ..lane_reference import resolve_codecs, rx_counter_names
from .codec_unit import CodecParams
from .frame_classifier import ClassifiedBeat
from .lane_common import bypass_and_drain_states, bypass_first_beat, codec_params_of
from .lane_layouts import HDR, Reason, axis_signature, field_le, quiet_if_rejected
from .tx_controller import code_width_of
from .wire_unpacker import unpacker_input_layout

__all__ = ["RxController", "RX_COUNTERS", "rx_counters_layout", "wire_desc_layout",
           "rx_payload_tag_layout"]

#: Counter names of the RX lane: the reference's keys, then ``size_errors``.
RX_COUNTERS = tuple(rx_counter_names()) + ("size_errors",)


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

    @quiet_if_rejected
    def __init__(self, *, codecs=None):
        self._codecs = sorted(resolve_codecs(codecs))
        super().__init__({
            "i": In(stream.Signature(ClassifiedBeat)),
            "desc": Out(stream.Signature(wire_desc_layout())),
            "payload": Out(stream.Signature(unpacker_input_layout(rx_payload_tag_layout()))),
            "bypass": Out(axis_signature()),
            "counters": Out(rx_counters_layout()),
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

        f_n = Signal(16)
        f_width = Signal(6)
        f_tag = Signal(rx_payload_tag_layout())
        left = Signal(16)          # payload beats still to come
        pad = Signal()

        m.d.comb += [
            pay.payload.n.eq(f_n),
            pay.payload.width.eq(f_width),
            pay.payload.tag.eq(f_tag),
            pay.payload.data.eq(beat.data),
        ]
        with m.If(pad):
            m.d.comb += pay.payload.data.eq(0)

        with m.FSM(name="rx_ctrl"):
            with m.State("IDLE"):
                with m.If(self.i.valid & (reason != Reason.NONE)):
                    bypass_first_beat(m, self.i, desc, byp, built=desc.payload.built,
                                      size=desc.payload.size, reasons=RX_REASONS, bump=bump)
                with m.Elif(self.i.valid):
                    m.d.comb += [
                        desc.valid.eq(1),
                        desc.payload.built.eq(1),
                        desc.payload.template.eq(hdr),
                        desc.payload.n.eq(h_n),
                        desc.payload.offset.eq(field_le(hdr, *HDR.OFFSET)),
                        desc.payload.flags.eq(h_flags),
                        desc.payload.size.eq(beat.size),
                        desc.payload.src.eq(beat.src),
                        desc.payload.dst.eq(beat.dst),
                        self.i.ready.eq(desc.ready),
                    ]
                    with m.If(desc.ready):
                        bump("wire_frames")
                        bump("elements", h_n)
                        m.d.sync += [
                            f_n.eq(h_n),
                            f_width.eq(h_width),
                            f_tag.codec.eq(h_codec),
                            *codec_params_of(f_tag.params, hdr),
                            left.eq(h_beats),
                            pad.eq(beat.last),
                        ]
                        with m.If(beat.last):
                            bump("size_errors")
                        m.next = "PAYLOAD"

            with m.State("PAYLOAD"):
                have = self.i.valid | pad
                m.d.comb += [
                    pay.valid.eq(have),
                    self.i.ready.eq(pay.ready & ~pad),
                ]
                with m.If(have & pay.ready):
                    m.d.sync += left.eq(left - 1)
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
