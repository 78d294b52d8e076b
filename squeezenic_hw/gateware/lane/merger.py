"""The output stage of a lane: built frames and bypassed frames into one AXI-Stream.

Tokens (:class:`~.common.layouts.FrameToken`) give the output order. A built
frame is its header beat (from the token) followed by its payload beats (from
the payload stream, e.g. the TX lane's wire ring); a bypassed frame is copied
whole from the bypass stream.
"""

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    DATA_BYTES,
    AxisBeat,
    FrameToken,
    RingRead,
    axis_signature,
)
from squeezenic_hw.gateware.common.lut_tree import kept
from squeezenic_hw.gateware.common.stream import MAX_FANOUT, stage_enable

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

    Parameters
    ----------
    bypass : bool
        Build the ``bypass`` input (default). Without it every token must be a built
        frame (``built = 1``; the bit is then ignored): for a lane whose source never
        sends a frame to bypass.
    banked : bool
        ``payload`` carries :class:`~squeezenic_hw.gateware.common.layouts.RingRead`
        (the TX ring's two read ports and which holds the beat) instead of the beat:
        the bank is chosen in the output multiplexer, a 4:1 select (two select bits,
        one LUT a bit) of bypass, header and the two banks. Default ``False``.

    Attributes
    ----------
    tokens : In(stream.Signature(FrameToken))
    bypass : In(axis_signature())
        Whole bypassed frames, one per ``built = 0`` token (only with ``bypass=True``).
    payload : In(stream.Signature(unsigned(512)))
        Payload beats of built frames, back to back, in token order
        (``RingRead`` with ``banked``).
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
    beat. Whether the beat on offer is its frame's last is kept in registers
    (counted down ahead of the beat), so ``tokens.ready`` is a kept LUT of
    ``o.ready``, a state register and two kept nets: the beat on offer is its
    frame's last (one LUT of state registers and the current input's ``valid`` and
    ``last``), and ``tokens.ready`` were ``o.ready`` low (one LUT of that net,
    ``o.valid`` and a state register). ``payload.ready`` and ``bypass.ready`` are one
    LUT of ``o.ready``, ``o.valid`` and a state register. The token register loads
    whenever ``tokens.ready`` is high, so the queue in front and the token register
    read one net. The state registers change on one enable and their next values
    are functions of registers, the inputs' ``valid`` and ``last`` and the token,
    never of ``o.ready``.

    Reset: the state registers (which input is read, the beat count, the
    last-beat flags) and ``o.valid``; the token, the last beat's compares and the
    output payload take none (the payload changes only with a valid beat; the
    token is read only after a valid one has loaded).

    Resources: the output register (``AxisBeat``, 625 bits + valid), the current token
    (561 bits), a 10-bit beat counter, 23 compares of the last beat's byte count and
    its ``tkeep`` (a LUT a bit), and seven state bits.
    """

    def __init__(self, *, bypass=True, banked=False):
        if not isinstance(bypass, bool):
            raise ValueError(f"bypass must be a bool, got {bypass!r}")
        if not isinstance(banked, bool):
            raise ValueError(f"banked must be a bool, got {banked!r}")
        self._bypass = bypass
        self._banked = banked
        super().__init__({
            "tokens": In(stream.Signature(FrameToken)),
            **({"bypass": In(axis_signature())} if bypass else {}),
            "payload": In(stream.Signature(RingRead if banked else unsigned(512))),
            "o": Out(axis_signature()),
        })

    @property
    def latency(self):
        """Cycles from an accepted ``bypass``/``payload`` beat to the same beat on ``o``."""
        return 1

    def elaborate(self, platform):
        m = Module()

        # ---- state: which input the beat on offer comes from, and is it the last --
        # At most one of the three ``send_*`` is set; none: idle, waiting for a token.
        # ``send_header`` and a copy of ``~send_bypass`` (inverted, so that no synthesis
        # merges it with ``send_bypass``) select the beat's bits, and Vivado copies them
        # for every ``MAX_FANOUT`` loads: the handshake logic reads ``send_bypass``, a
        # register of a few loads.
        idle = Signal(init=1)
        send_header = Signal(attrs={"max_fanout": MAX_FANOUT})  # built frame: the header
        send_payload = Signal()    # built frame: a payload beat
        send_bypass = Signal()     # bypassed frame: a beat of ``bypass``
        sel_not_bypass = Signal(init=1, attrs={"max_fanout": MAX_FANOUT})
        if self._bypass:
            bypass = self.bypass
        else:
            # no bypass input: a stream that never offers a beat, and no bypassed frames
            bypass = stream.Signature(AxisBeat).create()
        header_end = Signal()      # send_header, and the header is the frame's last beat
        payload_end = Signal()     # send_payload, and this payload beat is the last
        remaining = Signal(10)     # built frame: payload beats still to send
        tok = Signal(FrameToken, reset_less=True)
        # The last beat's tkeep (``size mod 64`` bytes, 64 when that is 0) from 23 compares
        # of the new token's size bits, registered with the token: each keep bit is then
        # a function of four flip-flops, which no LUT mapper can chain deep.
        last_keep = _LastKeep()
        keep_last = Signal(DATA_BYTES)
        m.d.comb += keep_last.eq(last_keep.keep())

        enable = stage_enable()          # the output register takes a beat this cycle
        m.d.comb += enable.eq(~self.o.valid | self.o.ready)

        # ---- the beat on offer ---------------------------------------------
        built_last = header_end | payload_end
        beat = Signal(AxisBeat)
        beat_valid = Signal()
        m.d.comb += [
            beat_valid.eq(send_header | (send_payload & self.payload.valid)
                          | (send_bypass & bypass.valid)),
            beat.data.eq(self._data(m, ~sel_not_bypass, send_header, bypass.payload.data,
                                    tok.header)),
            beat.keep.eq(Mux(sel_not_bypass, Mux(built_last, keep_last, _ALL_KEEP),
                             bypass.payload.keep)),
            beat.last.eq(Mux(sel_not_bypass, built_last, bypass.payload.last)),
            beat.size.eq(Mux(sel_not_bypass, tok.size, bypass.payload.size)),
            beat.src.eq(Mux(sel_not_bypass, tok.src, bypass.payload.src)),
            beat.dst.eq(Mux(sel_not_bypass, tok.dst, bypass.payload.dst)),
            self.payload.ready.eq(send_payload & enable),
            bypass.ready.eq(send_bypass & enable),
        ]

        # the frame's last beat goes out this cycle: ``enable`` and the last beat on offer
        # (kept, from registers and the inputs' valid)
        last_on_offer = kept(m, header_end | (payload_end & self.payload.valid)
                             | (send_bypass & bypass.valid & bypass.payload.last),
                             "last_on_offer")
        # The next token comes in with the last beat of the current frame: no bubble
        # (``tokens.ready = idle | enable & last_on_offer``). It is ``o.ready`` choosing
        # between its two values, the one without it on a kept net that reads
        # ``o.valid``, so that no LUT mapper can build it on the output register's enable
        # (a net of 600-odd loads): two LUTs from the output's handshake to the token queue.
        ready_unless = kept(m, idle | (~self.o.valid & last_on_offer), "token_ready_unless")
        m.d.comb += self.tokens.ready.eq(kept(
            m, Mux(self.o.ready, idle | last_on_offer, ready_unless), "token_ready"))

        # The output register takes a beat only when one is on offer: its enable (625
        # loads) is then a net of its own, and ``enable`` a small one, so the paths from
        # the output's handshake through ``enable`` to the inputs' ready and on into the
        # blocks in front pay no large net's routing.
        out = Signal(AxisBeat, reset_less=True)
        out_valid = Signal()
        load_out = stage_enable("load_out")
        m.d.comb += [self.o.valid.eq(out_valid), self.o.payload.eq(out),
                     load_out.eq((~self.o.valid | self.o.ready) & beat_valid)]
        with m.If(enable):
            m.d.sync += out_valid.eq(beat_valid)
        with m.If(load_out):
            m.d.sync += out.eq(beat)

        # ---- the state advances ---------------------------------------------
        # It advances while idle or when the beat on offer goes out. The late handshake
        # reaches the state registers only as their enable (``advance``); their next
        # values come from registers, the payload's and tokens' ``valid`` and the token,
        # since under ``advance`` the beat on offer is the frame's last exactly when one
        # of the registered end flags is set (a payload beat goes out only when valid):
        # then the next token's frame starts, or the merger goes idle.
        advance = stage_enable("advance")
        moving = kept(m, send_header | (send_payload & self.payload.valid)
                      | (send_bypass & bypass.valid & bypass.payload.last), "beat_moving")
        m.d.comb += advance.eq(idle | (enable & moving))
        free = Signal()
        m.d.comb += free.eq(idle | header_end | payload_end | send_bypass)

        new = self.tokens.payload
        size_m1 = Signal(16)
        payload_beats = Signal(10)
        header_only = Signal()
        m.d.comb += [
            size_m1.eq(new.size - 1),
            # ceil((size - 64) / 64) payload beats
            payload_beats.eq(size_m1[6:]),
            # size <= 64 (no payload beat) from the token's bits as they are, not from the
            # subtraction: size < 64, or size == 64; in kept pieces of at most six bits,
            # since the token is a distributed RAM's read
            header_only.eq(kept(m, new.size[11:] == 0, "size_hi_zero")
                           & kept(m, new.size[7:11] == 0, "size_mid_zero")
                           & (~new.size[6] | kept(m, new.size[:6] == 0, "size_lo_zero"))),
        ]
        built = new.built if self._bypass else Const(1)
        starts = Signal()        # a token's frame starts (if the state advances)
        m.d.comb += starts.eq(free & self.tokens.valid)
        with m.If(advance):
            m.d.sync += [
                idle.eq(free & ~self.tokens.valid),
                send_header.eq(starts & built),
                send_payload.eq(~free),
                send_bypass.eq(starts & ~built),
                sel_not_bypass.eq(~(starts & ~built)),
                header_end.eq(starts & built & header_only),
                payload_end.eq(~free & Mux(send_header, remaining == 1, remaining == 2)),
                remaining.eq(Mux(free, payload_beats,
                                 Mux(send_header, remaining, remaining - 1))),
            ]
        # The token register's enable (wide) is ``tokens.ready`` alone: with no token on
        # offer it loads a value that no frame reads (the next frame starts only with a
        # valid token, which then loads again), and the queue in front reads the same net.
        load_token = stage_enable("load_token")
        m.d.comb += load_token.eq(self.tokens.ready)
        with m.If(load_token):
            m.d.sync += [tok.eq(new), *last_keep.load(new.size[:6])]
        return m

    def _data(self, m, send_bypass, send_header, bypass_data, header):
        """The beat on offer's data: the bypassed beat, the header or the payload beat."""
        if not self._banked:
            return Mux(send_bypass, bypass_data,
                       Mux(send_header, header, self.payload.payload))
        # Two select bits from the state and the bank, so each data bit is one 4:1 select
        # (a LUT6) of the two banks, the header and the bypassed beat.
        sel = Signal(2, name="data_sel")
        m.d.comb += sel.eq(Mux(send_bypass, 3, Mux(send_header, 2,
                                                   self.payload.payload.bank)))
        data = Signal(8 * DATA_BYTES, name="data")
        with m.Switch(sel):
            for k, source in enumerate([*self.payload.payload.banks, header, bypass_data]):
                with m.Case(k):
                    m.d.comb += data.eq(source)
        return data


class _LastKeep:
    """``tkeep`` of ``n`` bytes (0: all 64) from registered compares of ``n``'s bit fields:
    byte ``8a + b`` is kept when ``n`` is 0, or its upper three bits exceed ``a``, or
    equal ``a`` with its lower three exceeding ``b``."""

    def __init__(self):
        self.whole = Signal(name="keep_whole", reset_less=True)
        self.over_hi = [Signal(name=f"keep_over_hi{a}", reset_less=True) for a in range(7)]
        self.at_hi = [Signal(name=f"keep_at_hi{a}", reset_less=True) for a in range(8)]
        self.over_lo = [Signal(name=f"keep_over_lo{b}", reset_less=True) for b in range(7)]

    def load(self, n):
        """The assignments that register the compares of ``n`` (6 bits)."""
        hi, lo = n[3:], n[:3]
        return [self.whole.eq(n == 0),
                *(r.eq(hi > k) for k, r in enumerate(self.over_hi)),
                *(r.eq(hi == k) for k, r in enumerate(self.at_hi)),
                *(r.eq(lo > k) for k, r in enumerate(self.over_lo))]

    def keep(self):
        # a 3-bit field never exceeds 7: those compares are constant 0
        over_hi, over_lo = [*self.over_hi, Const(0)], [*self.over_lo, Const(0)]
        return Cat(self.whole | over_hi[a] | (self.at_hi[a] & over_lo[b])
                   for a in range(8) for b in range(8))
