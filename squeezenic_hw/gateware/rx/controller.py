"""The RX lane's frame controller: bypass, or hand a wire frame to the unpacker and splitter.

After the :class:`~squeezenic_hw.gateware.lane.classifier.FrameClassifier`:

* a frame to bypass: a descriptor with ``built = 0`` (for the merger's order)
  and its beats on ``bypass``;
* a wire frame to decode: one descriptor with ``built = 1`` (template header,
  ``n``, ``offset``, flags, ``tuser_src``/``dst``), which the
  :class:`~.host_frame_splitter.HostFrameSplitter` turns into host frames; one
  on ``frames`` (``n``, the code width, ``n``·width, the codec parameters) for
  the :class:`~.unpacker.WireUnpacker`, and its payload beats on ``payload``.

With ``threshold`` (codec 7) built in, a threshold wire frame's payload is
split: its layout bytes go to ``payload`` as a bitmap of ``n`` one-bit codes
(bitmap layout) or to ``index`` (index layout, for the
:class:`~.index_to_bitmap.IndexToBitmap`), and its value bytes to ``values``
(for the :class:`~.sparse.expander.SparseExpander`); the beat holding both
goes to both. ``order`` says, per decoded frame, where the unpacker's input
comes from.
"""

from types import SimpleNamespace

from amaranth import Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.unit import CodecParams
from squeezenic_hw.gateware.common.layouts import (
    BEAT_BITS,
    axis_signature,
    field_le,
)
from squeezenic_hw.gateware.common.lut_tree import kept
from squeezenic_hw.gateware.common.onehot_states import OneHotStates
from squeezenic_hw.gateware.lane.classifier import ClassifiedBeat
from squeezenic_hw.gateware.lane.control import bypass_first_beat, codec_params_of
from squeezenic_hw.spec.codecs import THRESHOLD_ID, resolve_codecs
from squeezenic_hw.spec.counters import RX_COUNTERS
from squeezenic_hw.spec.frames import RX_REASONS
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, HDR

from .unpacker import unpacker_frame_layout

__all__ = ["RxController", "rx_counters_layout", "wire_desc_layout", "rx_frame_layout",
           "rx_payload_layout", "rx_payload_tag_layout"]

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
        "single": unsigned(1),     # built: n ≤ max_host_elements, one host frame
    })


def rx_payload_tag_layout():
    """What rides with each job through the unpacker to the decoders."""
    return data.StructLayout({"codec": unsigned(3), "params": CodecParams})


def rx_frame_layout():
    """One decoded wire frame for the unpacker (:func:`~.unpacker.unpacker_frame_layout`)."""
    return unpacker_frame_layout(rx_payload_tag_layout())


def rx_payload_layout():
    """A payload beat for the unpacker, with ``last`` on the frame's last one."""
    return data.StructLayout({"data": unsigned(BEAT_BITS), "zero": unsigned(1),
                              "last": unsigned(1)})


#: One decoded wire frame, in order: ``index`` = its bitmap comes from the IndexToBitmap.
RX_ORDER_LAYOUT = data.StructLayout({"index": unsigned(1)})
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
    max_host_elements : int
        The splitter's most elements per host frame (``desc.single`` says a wire
        frame fits one).

    Attributes
    ----------
    i : In(stream.Signature(ClassifiedBeat))
        Classified beats; the header-derived quantities come in ``rx``
        (:class:`~squeezenic_hw.gateware.lane.classifier.RxFrameInfo`).
    desc : Out(stream.Signature(wire_desc_layout()))
        One per input frame, for the host-frame splitter.
    frames : Out(stream.Signature(rx_frame_layout()))
        One per decoded frame, for the unpacker: ``n``, code width, payload
        bits, codec and parameters (a ``threshold`` frame: its bitmap, 1-bit
        codes; an index-list frame's parameters read 0).
    payload : Out(stream.Signature(rx_payload_layout()))
        Payload beats of decoded frames (a ``threshold`` frame: its bitmap
        beats), ``last`` on each frame's last one.
    bypass : Out(axis_signature())
    counters : Out(rx_counters_layout())
    order, index_desc, index, vdesc, values : Out(stream.Signature(...))
        ``threshold`` only (never valid without it): per decoded frame whether
        its bitmap comes from the index list; the index frames' ``n``/``k`` and
        index beats; the value descriptors and value beats.
    layout_error : Out(1)
        A bitmap frame with padding bits set (one-cycle strobe, two cycles
        after its last bitmap beat is accepted).

    Notes
    -----
    Latency: combinational from ``i`` to the outputs, which go into FIFOs.
    Throughput: one beat per cycle. Backpressure: a beat is accepted only when
    every output it needs is ready. The accept logic depends only on registers
    (the input's, this block's state, and the outputs' ``ready``, which the RX
    lane makes flip-flops): the header's quantities come from the classifier,
    and where a payload beat goes is decided a beat ahead, into flags. Wire
    frames whose beats end before ``tuser_size`` says are padded with zero
    beats, extra beats are discarded; both count in ``size_errors``. The
    state, the per-frame flags and counts, and the counters are reset; the
    bitmap check's byte index and mask are not.
    """

    def __init__(self, *, codecs=None, max_host_elements=DEFAULT_HOST_ELEMENTS):
        self._codecs = sorted(resolve_codecs(codecs))
        self._max_host = max_host_elements
        self._sparse = THRESHOLD_ID in self._codecs
        super().__init__({
            "i": In(stream.Signature(ClassifiedBeat)),
            "desc": Out(stream.Signature(wire_desc_layout())),
            "frames": Out(stream.Signature(rx_frame_layout())),
            "payload": Out(stream.Signature(rx_payload_layout())),
            "bypass": Out(axis_signature()),
            "counters": Out(rx_counters_layout()),
            # threshold only (never valid without it)
            "order": Out(stream.Signature(RX_ORDER_LAYOUT)),
            "index_desc": Out(stream.Signature(RX_INDEX_DESC_LAYOUT)),
            "index": Out(stream.Signature(unsigned(BEAT_BITS))),
            "vdesc": Out(stream.Signature(RX_VALUES_DESC_LAYOUT)),
            "values": Out(stream.Signature(unsigned(BEAT_BITS))),
            # a bitmap frame with padding bits set (one-cycle strobe)
            "layout_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        beat = self.i.payload.beat
        h = self.i.payload.rx
        hdr = beat.data
        desc, pay, byp, frames = self.desc, self.payload, self.bypass, self.frames
        counters = self.counters
        # the bypass data is the input beat in every state: its valid says when it counts
        m.d.comb += byp.payload.eq(beat)
        sparse = self._sparse

        def bump(name, amount=1):
            m.d.sync += counters[name].eq(counters[name] + amount)

        h_codec = field_le(hdr, *HDR.CODEC)
        h_n = field_le(hdr, *HDR.N)
        h_sparse = h.sparse if sparse else Const(0)
        h_index = h.index if sparse else Const(0)
        # A descriptor's fields are the header beat's in every state, whether the frame is
        # decoded or bypassed (``built`` says which; a bypassed frame's token uses only its
        # size): driven only when decoded, each bit would be an AND gate.
        m.d.comb += [
            desc.payload.template.eq(hdr),
            desc.payload.n.eq(h_n),
            desc.payload.offset.eq(field_le(hdr, *HDR.OFFSET)),
            desc.payload.flags.eq(field_le(hdr, *HDR.FLAGS)),
            desc.payload.built.eq(~self.i.payload.bypass),
            desc.payload.size.eq(beat.size),
            desc.payload.src.eq(beat.src),
            desc.payload.dst.eq(beat.dst),
            desc.payload.single.eq(h_n <= self._max_host),
        ]

        # Frame state, loaded at the header. What the next payload beat is (its flags) is
        # known a beat ahead, so the accept logic reads flags, never counters.
        state = self._frame_state(sparse=sparse)
        m.d.comb += [
            # a beat that stands in for a missing one is zero: the unpacker clears it
            # (``zero``) where it stores it, not a 512-bit AND gate here
            pay.payload.data.eq(beat.data),
            pay.payload.zero.eq(state.pad),
            pay.payload.last.eq(state.pay_last),
            self.index.payload.eq(Mux(state.pad, 0, beat.data)),
            self.values.payload.eq(Mux(state.pad, 0, beat.data)),
        ]

        # The unpacker's frame: threshold's bitmap is n 1-bit codes (the classifier's
        # width and bits say so); an index-list frame's parameters read 0.
        m.d.comb += [
            frames.payload.n.eq(h_n),
            frames.payload.width.eq(h.width),
            frames.payload.bits.eq(h.bits),
            frames.payload.tag.codec.eq(h_codec),
        ]
        with m.If(~h_index):
            m.d.comb += codec_params_of(frames.payload.tag.params, hdr)

        def load_flags(sparse_v, index_v, beats, lay_beats, val_beat, k_nz):
            """Flags of the first payload beat, from the header's quantities."""
            counts = [state.final.eq(beats == 1), state.left.eq(beats)]
            if not sparse:
                return counts
            lay_one = lay_beats == 1
            return counts + [
                state.to_pay.eq(~sparse_v | ~index_v),
                state.to_idx.eq(sparse_v & index_v),
                state.to_val.eq(sparse_v & k_nz & (val_beat == 0)),
                state.pay_last.eq(Mux(sparse_v, lay_one, beats == 1)),
                state.in_layout.eq(1),
                state.lay_last.eq(lay_one),
                state.lay_left.eq(lay_beats),
                state.in_values.eq(k_nz & (val_beat == 0)),
                state.pre_val.eq(val_beat),
            ]

        # one flip-flop a state: the handshake reads them without a decoding LUT
        fsm = OneHotStates(m, ["IDLE", "PAYLOAD", "BYPASS", "DRAIN"], name="rx_ctrl")
        hs = self._handshake(m, fsm, state=state, h_sparse=h_sparse, h_index=h_index)
        with fsm.state("IDLE"):
            self._header_state(m, fsm, hs=hs, byp=byp, bump=bump, sparse=sparse,
                               h_sparse=h_sparse, h_index=h_index, h=h, h_n=h_n,
                               load_flags=load_flags, state=state, beat=beat)
        with fsm.state("PAYLOAD"):
            self._payload_state(m, fsm, hs=hs, state=state, sparse=sparse, beat=beat,
                                bump=bump)
        with fsm.state("BYPASS"):
            with m.If(hs.byp_next & beat.last):
                fsm.goto("IDLE")
        with fsm.state("DRAIN"):
            with m.If(self.i.valid & beat.last):
                fsm.goto("IDLE")
        if sparse:
            self._layout_check(m, beat.data, state.check_layout, state.last_byte, state.pad_bits)
        return m

    def _frame_state(self, *, sparse):
        """Frame state, loaded at the header. What the next payload beat is (its flags) is known a
        beat ahead, so the accept logic reads flags, never counters."""
        left = Signal(16)          # payload beats still to come, this one included
        final = Signal()           # left == 1
        pad = Signal()             # the input ended early: zero beats stand in
        f_sparse = Signal()
        to_pay = Signal()          # this beat goes to `payload` ...
        to_idx = Signal()          # ... to `index`
        to_val = Signal()          # ... to `values`
        pay_last = Signal()        # last beat of the unpacker's frame
        lay_left = Signal(11)      # threshold: layout beats to come, this one included
        lay_last = Signal()        # lay_left == 1
        in_layout = Signal()
        pre_val = Signal(10)       # threshold: beats before the first value beat
        in_values = Signal()
        has_k = Signal()
        f_index = Signal()
        last_byte = Signal(6, reset_less=True)   # bitmap: the last layout byte in its beat
        pad_bits = Signal(8, reset_less=True)    # bitmap: its bits past n (0 when n % 8 = 0)
        check_layout = Signal()    # this beat holds a bitmap's last byte

        if not sparse:
            # every payload beat goes to `payload`, the frame's last one is its last
            to_pay, to_idx, to_val, pay_last = Const(1), Const(0), Const(0), final
        return SimpleNamespace(left=left, final=final, pad=pad, f_sparse=f_sparse, to_pay=to_pay,
                               to_idx=to_idx, to_val=to_val, pay_last=pay_last, lay_left=lay_left,
                               lay_last=lay_last, in_layout=in_layout, pre_val=pre_val,
                               in_values=in_values, has_k=has_k, f_index=f_index,
                               last_byte=last_byte, pad_bits=pad_bits, check_layout=check_layout)

    def _handshake(self, m, fsm, *, state, h_sparse, h_index):
        """Every ``valid`` and ``ready`` of the block, and when a beat is taken, in every state.

        Each is built from pieces of at most six inputs on kept nets
        (:func:`~squeezenic_hw.gateware.common.lut_tree.kept`), so that a ready that enters
        this block from an output FIFO reaches ``i.ready``, a FIFO's write enable or a
        state register through two or three LUTs whichever LUT mapper maps the lane (one
        mapping for area would chain the ten-odd inputs of ``i.ready`` six deep)."""
        i, desc, frames, byp, pay = self.i, self.desc, self.frames, self.bypass, self.payload
        sparse = self._sparse
        idle, in_pay, in_byp = (fsm.ongoing(name) for name in ("IDLE", "PAYLOAD", "BYPASS"))
        in_drain = fsm.ongoing("DRAIN")
        valid, to_byp = i.valid, i.payload.bypass

        # IDLE, a decoded frame's header: every output it needs must take it in one cycle
        needs = {"desc": (desc.ready, Const(1)), "frames": (frames.ready, Const(1))}
        if sparse:
            needs["order"] = (self.order.ready, Const(1))
            needs["vdesc"] = (self.vdesc.ready, h_sparse)
            needs["index_desc"] = (self.index_desc.ready, h_sparse & h_index)

        def others_ready(skip):
            ok = Const(1)
            for name, (ready, used) in needs.items():
                if name != skip:
                    ok = ok & (ready | ~used)
            return ok

        hdr = idle & valid & ~to_byp
        first = idle & valid & to_byp          # a bypassed frame's first beat
        if sparse:
            base = kept(m, desc.ready & frames.ready & self.order.ready, "rx_ctrl_hdr_base")
            go = kept(m, base & (self.vdesc.ready | ~h_sparse)
                      & (self.index_desc.ready | ~(h_sparse & h_index)), "rx_ctrl_hdr_go")
            # PAYLOAD: every output this beat goes to must take it
            ok = kept(m, (~state.to_pay | pay.ready) & (~state.to_idx | self.index.ready)
                      & (~state.to_val | self.values.ready), "rx_ctrl_pay_ok")
        else:
            go = desc.ready & frames.ready
            ok = pay.ready
        have = valid | state.pad
        hs = SimpleNamespace(
            hdr_take=kept(m, hdr & go, "rx_ctrl_hdr_take"),
            first_take=kept(m, first & desc.ready & byp.ready, "rx_ctrl_first_take"),
            advance=kept(m, in_pay & have & ok, "rx_ctrl_advance"),
            byp_next=kept(m, in_byp & valid & byp.ready, "rx_ctrl_byp_next"),
        )
        ready_idle = kept(m, valid & Mux(to_byp, desc.ready & byp.ready, go), "rx_ctrl_ready_idle")
        ready_pay = kept(m, ok & ~state.pad, "rx_ctrl_ready_pay")
        m.d.comb += [
            i.ready.eq((idle & ready_idle) | (in_pay & ready_pay) | (in_byp & byp.ready)
                       | in_drain),
            desc.valid.eq(kept(m, (hdr & others_ready("desc")) | (first & byp.ready),
                               "rx_ctrl_desc_valid")),
            frames.valid.eq(kept(m, hdr & others_ready("frames"), "rx_ctrl_frames_valid")),
            byp.valid.eq(kept(m, (first & desc.ready) | (in_byp & valid), "rx_ctrl_byp_valid")),
            pay.valid.eq(kept(m, in_pay & have & state.to_pay & ok, "rx_ctrl_pay_valid")),
        ]
        if sparse:
            m.d.comb += [
                self.order.valid.eq(hdr & others_ready("order")),
                self.vdesc.valid.eq(hdr & h_sparse & others_ready("vdesc")),
                self.index_desc.valid.eq(hdr & h_sparse & h_index & others_ready("index_desc")),
                self.index.valid.eq(in_pay & have & state.to_idx & ok),
                self.values.valid.eq(in_pay & have & state.to_val & ok),
            ]
        return hs

    def _header_state(self, m, fsm, *, hs, byp, bump, sparse, h_sparse, h_index, h, h_n,
                      load_flags, state, beat):
        """The IDLE state: a header beat goes to every output that needs it in the same cycle and
        loads the frame's state; a bypassed frame's first beat goes to the bypass."""
        bypass_first_beat(m, hs.first_take, beat=beat, reason=self.i.payload.reason,
                          reasons=RX_REASONS, bump=bump, goto=fsm.goto)
        if sparse:
            m.d.comb += [
                self.order.payload.index.eq(h_sparse & h_index),
                self.vdesc.payload.k.eq(h.k),
                self.vdesc.payload.start.eq(h.start),
                self.index_desc.payload.n.eq(h_n),
                self.index_desc.payload.k.eq(h.k),
            ]
        with m.If(hs.hdr_take):
            bump("wire_frames")
            bump("elements", h_n)
            m.d.sync += [
                *load_flags(h_sparse, h_index, h.beats, h.layout_beats,
                            h.value_beat, h.k != 0),
                state.pad.eq(beat.last),
                state.f_sparse.eq(h_sparse),
                state.f_index.eq(h_index),
                state.has_k.eq(h.k != 0),
                state.last_byte.eq(h.last_byte),
                state.pad_bits.eq(Mux(h_n[:3] == 0, 0, (Const(0xFF, 8) << h_n[:3])[:8])),
            ]
            with m.If(h.beats == 0):
                # index layout with k = 0: the header is the whole frame
                with m.If(~beat.last):
                    bump("size_errors")
                    fsm.goto("DRAIN")
            with m.Else():
                with m.If(beat.last):
                    bump("size_errors")
                fsm.goto("PAYLOAD")

    def _payload_state(self, m, fsm, *, hs, state, sparse, beat, bump):
        """The PAYLOAD state: payload beats to the unpacker, the index and the value paths, as the
        flags say (:meth:`_handshake`); zero beats where the input ended early."""
        advance = hs.advance
        with m.If(advance):
            m.d.sync += [state.left.eq(state.left - 1), state.final.eq(state.left == 2)]
            if sparse:
                next_in_layout = state.in_layout & ~state.lay_last
                next_lay_last = state.in_layout & (state.lay_left == 2)
                next_in_values = state.has_k & (state.in_values | (state.pre_val == 1))
                m.d.sync += [
                    state.lay_left.eq(state.lay_left - 1),
                    state.lay_last.eq(next_lay_last),
                    state.in_layout.eq(next_in_layout),
                    state.pre_val.eq(state.pre_val - 1),
                    state.in_values.eq(next_in_values),
                    state.to_pay.eq(~state.f_sparse | (next_in_layout & ~state.f_index)),
                    state.to_idx.eq(state.f_sparse & next_in_layout & state.f_index),
                    state.to_val.eq(state.f_sparse & next_in_values),
                    state.pay_last.eq(Mux(state.f_sparse, next_lay_last, state.left == 2)),
                ]
            with m.If(~state.pad & beat.last & ~state.final):
                bump("size_errors")
                m.d.sync += state.pad.eq(1)
            with m.If(state.final):
                m.d.sync += state.pad.eq(0)
                with m.If(~state.pad & ~beat.last):
                    bump("size_errors")
                    fsm.goto("DRAIN")
                with m.Else():
                    fsm.goto("IDLE")
        m.d.comb += state.check_layout.eq(advance & ~state.pad & state.f_sparse & state.to_pay
                                          & state.pay_last)

    def _layout_check(self, m, data_, check, last_byte, pad_bits):
        """``layout_error``: the last bitmap byte's bits past n must be zero. Registered
        twice (the byte's bits, then their OR), so the 64-way byte select has a cycle."""
        seen = Signal(name="layout_check")
        bad_bits = Signal(8, name="layout_bad_bits", reset_less=True)
        m.d.sync += [
            seen.eq(check),
            bad_bits.eq(data_.word_select(last_byte, 8) & pad_bits),
            self.layout_error.eq(seen & (bad_bits != 0)),
        ]
