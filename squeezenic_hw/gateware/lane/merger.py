"""The output stage of a lane: built frames and bypassed frames into one AXI-Stream.

Tokens (:class:`~.lane_layouts.FrameToken`) give the output order. A built
frame is its header beat (from the token) followed by its payload beats (from
the payload stream, e.g. the TX lane's wire ring); a bypassed frame is copied
whole from the bypass stream.
"""

from amaranth import Const, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import DATA_BYTES, AxisBeat, FrameToken, axis_signature

__all__ = ["FrameMerger"]

_ALL_KEEP = (1 << DATA_BYTES) - 1


class FrameMerger(wiring.Component):
    """Merges built frames (header + payload beats) and bypassed frames in token order.

    For each token, in order:

    * ``built = 1``: beat 0 is ``header``, then ``ceil((size - 64) / 64)``
      beats from ``payload``. ``tkeep`` is all ones except on the last beat,
      where it covers the frame's remaining ``(size - 64) mod 64`` bytes (64 if
      that is 0); ``tlast`` on the last beat (on the header when
      ``size <= 64``, whose ``tkeep`` then covers ``size`` bytes). ``tuser``
      ``size``/``src``/``dst`` come from the token on every beat. ``size`` must
      be at least 1 (a wire frame is at least 65).
    * ``built = 0``: beats of ``bypass`` are forwarded unchanged up to and
      including the one with ``last``; the token's other fields are ignored.

    Attributes
    ----------
    tokens : In(stream.Signature(FrameToken))
    bypass : In(axis_signature())
        Whole bypassed frames, one per ``built = 0`` token.
    payload : In(stream.Signature(unsigned(512)))
        Payload beats of built frames, back to back, in token order.
    o : Out(axis_signature())

    Notes
    -----
    Latency: a ``bypass`` or ``payload`` beat accepted in cycle ``t`` is on
    ``o`` in cycle ``t + 1`` (``o`` is registered). A token accepted while
    the merger is idle gives its first beat on ``o`` 2 cycles later (the
    token register, then ``o``).

    Throughput: one beat per cycle, with no idle cycle between frames: the
    next token is accepted in the same cycle as the current frame's last beat,
    so the next frame's first beat follows at once if its token and data are
    ready.

    Backpressure: ``o`` holds (valid and payload) while ``o.valid & ~o.ready``;
    the merger then takes nothing from its inputs
    (``ready = o.ready | ~o.valid`` on the stream being read). ``tokens.ready``
    is high while no token is held, or with the transfer of a frame's last
    beat; it depends combinationally on ``o.ready`` and the current input's
    ``valid``.

    Resources: the output register (``AxisBeat``, 625 bits + valid), the current token
    (561 bits), a 10-bit beat counter and the 64-bit last ``tkeep``.
    """

    tokens: In(stream.Signature(FrameToken))
    bypass: In(axis_signature())
    payload: In(stream.Signature(unsigned(512)))
    o: Out(axis_signature())

    @property
    def latency(self):
        """Cycles from an accepted ``bypass``/``payload`` beat to the same beat on ``o``."""
        return 1

    def elaborate(self, platform):
        m = Module()

        tok = Signal(FrameToken)
        active = Signal()          # tok holds the frame being sent
        header_next = Signal()     # built frame: the header beat is still to send
        remaining = Signal(10)     # built frame: payload beats still to send
        keep_last = Signal(DATA_BYTES)

        # ---- the beat on offer this cycle --------------------------------
        beat = Signal(AxisBeat)
        beat_valid = Signal()
        enable = Signal()          # the output register takes a beat this cycle
        m.d.comb += enable.eq(~self.o.valid | self.o.ready)

        with m.If(active & tok.built):
            last = Mux(header_next, remaining == 0, remaining == 1)
            m.d.comb += [
                beat.data.eq(Mux(header_next, tok.header, self.payload.payload)),
                beat.keep.eq(Mux(last, keep_last, _ALL_KEEP)),
                beat.last.eq(last),
                beat.size.eq(tok.size),
                beat.src.eq(tok.src),
                beat.dst.eq(tok.dst),
                beat_valid.eq(header_next | self.payload.valid),
                self.payload.ready.eq(~header_next & enable),
            ]
        with m.Elif(active):
            m.d.comb += [
                beat.eq(self.bypass.payload),
                beat_valid.eq(self.bypass.valid),
                self.bypass.ready.eq(enable),
            ]

        sent = Signal()
        m.d.comb += [
            sent.eq(beat_valid & enable),
            # the next token comes in with the last beat of the current frame: no bubble
            self.tokens.ready.eq(~active | (sent & beat.last)),
        ]

        with m.If(enable):
            m.d.sync += [
                self.o.valid.eq(beat_valid),
                self.o.payload.eq(beat),
            ]

        with m.If(sent & tok.built):
            with m.If(header_next):
                m.d.sync += header_next.eq(0)
            with m.Else():
                m.d.sync += remaining.eq(remaining - 1)
        with m.If(sent & beat.last):
            m.d.sync += active.eq(0)

        # ---- a new token (overrides the end of the previous frame) -------
        size_m1 = Signal(16)
        m.d.comb += size_m1.eq(self.tokens.payload.size - 1)
        with m.If(self.tokens.valid & self.tokens.ready):
            m.d.sync += [
                tok.eq(self.tokens.payload),
                active.eq(1),
                header_next.eq(1),
                # ceil((size - 64) / 64) payload beats; the last one holds
                # ((size - 1) mod 64) + 1 bytes
                remaining.eq(size_m1[6:]),
                keep_last.eq(Const(_ALL_KEEP, DATA_BYTES) >> ~size_m1[:6]),
            ]
        return m
