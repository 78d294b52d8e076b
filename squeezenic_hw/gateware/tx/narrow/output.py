"""The narrow lane's output: a closed frame's header beat, then its rows, on a
stream or a frame bus."""

from amaranth import Cat, Const, Mux, Signal

from squeezenic_hw.gateware.common.layouts import DATA_BYTES, keep_through
from squeezenic_hw.gateware.lane.header_builder import ones_complement_fold
from squeezenic_hw.spec.header import ETHERTYPE_IPV4, FLAG_ENCODED, HDR, IPV4_VIHL, PROTO_UDP

from .held_fields import unpack
from .layouts import COPIED_BYTES, KEY_BYTES, Token


class OutputStage:
    """The output of a :class:`~.lane.NarrowTxLane` (whose parameters its methods
    read)."""

    def _key_byte(self, key, b):
        """Header byte ``b`` of a key from :meth:`~.input_stage.InputStage._key_of` (a
        constant when held)."""
        if b in self._key_fixed:
            return Const(self._key_fixed[b], 8)
        i = self._key_bytes.index(b)
        return key[8 * i:8 * i + 8]

    def _output(self, m, rd, tokens):
        """The next frame's token and its header, then the beats: a beat register
        (``o``), or in ``bare`` mode the lane's side of a frame bus."""
        tq = Signal(Token, reset_less=True)     # the next frame's token
        tq_valid = Signal()
        ready_q = Signal()                       # its checksum is in ``checksum``
        checksum = Signal(16, reset_less=True)
        key_out = Signal(self._key_width, reset_less=True)
        key_sum_in = Signal(19, reset_less=True)   # the key's IPv4 words, summed
        key_sum = Signal(19, reset_less=True)
        issue_header = Signal()                  # the header of ``tq`` goes out

        key_in = self._key_in
        key_byte = self._key_byte

        def be_word(key, b):
            return Cat(key_byte(key, b + 1), key_byte(key, b))

        ip_words = [be_word(key_in, b) for b in range(HDR.SRC_IP[0], HDR.DST_IP[0] + 4, 2)]
        m.d.sync += key_sum_in.eq(sum(ip_words) + (IPV4_VIHL << 8) + PROTO_UDP)

        switch = Signal()
        m.d.comb += switch.eq((issue_header & tq.switch) | (tq_valid & ~tq.frame))
        with m.If(switch):
            m.d.sync += [key_out.eq(key_in), key_sum.eq(key_sum_in),
                         self._key_pending.eq(0)]
        pop = issue_header | (tq_valid & ~tq.frame)
        load = (~tq_valid | pop) & tokens.r_rdy
        m.d.comb += tokens.r_en.eq(load)
        # the IPv4 sum of the token loaded now: its words and its key's (the new key's
        # when the key changes as it loads: a token after a switch has the new key)
        tq_sum = Signal(20, reset_less=True)
        head = Signal(Token)
        m.d.comb += head.eq(unpack(tokens.r_data, self._constant_bits))
        with m.If(load):
            m.d.sync += [tq.eq(head), tq_valid.eq(1),
                         tq_sum.eq(Mux(switch, key_sum_in, key_sum) + head.ip_sum)]
        with m.Elif(pop):
            m.d.sync += tq_valid.eq(0)
        ip_length = Signal(16, reset_less=True)
        udp_length = Signal(16, reset_less=True)
        if not self._shared_ring:
            m.d.sync += ready_q.eq(tq_valid & ~pop)
        m.d.sync += [checksum.eq(~ones_complement_fold(m, tq_sum)),
                     ip_length.eq(tq.size - 14), udp_length.eq(tq.size - 34)]

        hb = [None] * DATA_BYTES

        def put(start, value, big_endian=False):
            n = len(value) // 8
            for i in range(n):
                byte = value[8 * i:8 * i + 8]
                hb[start + (n - 1 - i if big_endian else i)] = byte

        for start, count in KEY_BYTES:
            for b in range(start, start + count):
                hb[b] = key_byte(key_out, b)
        put(HDR.ETHERTYPE[0], Const(ETHERTYPE_IPV4, 16), big_endian=True)
        put(HDR.IP_VIHL[0], Const(IPV4_VIHL, 8))
        for i, b in enumerate(COPIED_BYTES):
            hb[b] = tq.host.copied[8 * i:8 * i + 8]
        udp_checksum = Const(0, 16)
        if self._bare:
            # (what only the sums read is then left out by synthesis)
            ip_length = checksum = Const(0, 16)
            udp_length, udp_checksum = tq.host.src, tq.host.dst
        put(HDR.IP_TOTAL_LENGTH[0], ip_length, big_endian=True)
        put(HDR.IP_PROTO[0], Const(PROTO_UDP, 8))
        put(HDR.IP_CHECKSUM[0], checksum, big_endian=True)
        put(HDR.UDP_LENGTH[0], udp_length, big_endian=True)
        put(HDR.UDP_CHECKSUM[0], udp_checksum, big_endian=True)
        put(HDR.VERSION[0], Const(1, 8))
        stochastic = Const(0, 1) if self._stochastic_held else key_out[-1]
        put(HDR.FLAGS[0], Cat(Const(FLAG_ENCODED, 1), stochastic, tq.flush, Const(0, 5)))
        put(HDR.N[0], tq.n)
        put(HDR.OFFSET[0], tq.offset)
        assert all(x is not None for x in hb)
        header = Signal(8 * DATA_BYTES)
        m.d.comb += header.eq(Cat(*hb))

        if self._shared_ring:
            # one register, so that the round robin of the many lanes sharing rings (32
            # or 64 on a frame bus) starts at a flip-flop: ``tq`` is a frame loaded at
            # least a cycle ago whose header has not gone out (a frame is popped by its
            # header, and nothing loads while one waits), and the newest frame's last
            # row does not wait for the lane's turn to be written (a close makes a newer
            # token, so a frame found not waiting a cycle ago does not wait now)
            frame_ready = Signal()
            m.d.sync += frame_ready.eq(tq_valid & tq.frame & ~issue_header
                                       & ~(self._row_wait & self._newest_token))
        else:
            frame_ready = tq_valid & tq.frame & ready_q
        if self._bare:
            self._bus_beats(m, rd, tq, frame_ready, header, issue_header)
        else:
            self._stream_beats(m, rd, tq, frame_ready, header, issue_header)

    def _stream_beats(self, m, rd, tq, frame_ready, header, issue_header):
        """``o``: a beat register loaded with the header, then with the rows."""
        o = self.o
        advance = ~o.valid | o.ready
        # the beat register takes no reset (only o.valid does): the header's constant
        # bytes become the flip-flops' synchronous set and reset instead of a select
        beat = Signal.like(o.payload, reset_less=True)
        m.d.comb += o.payload.eq(beat)
        rptr = self._rptr
        issue_row = Signal()
        if self._deep_ring:
            m.d.comb += rd.addr.eq(Mux(issue_row, self._next_row(rptr), rptr))
        else:
            m.d.comb += rd.addr.eq(rptr)
        beats_left = Signal(8)
        beats_none = Signal(init=1)              # beats_left == 0
        beats_one = Signal()                     # beats_left == 1
        last_keep = Signal(DATA_BYTES, reset_less=True)
        m.d.comb += issue_header.eq(advance & beats_none & frame_ready)
        with m.If(advance):
            with m.If(~beats_none):
                m.d.comb += issue_row.eq(1)
                m.d.sync += [o.valid.eq(1), beat.data.eq(rd.data),
                             beat.last.eq(beats_one),
                             beat.keep.eq(Mux(beats_one, last_keep, -1)),
                             beats_left.eq(beats_left - 1), rptr.eq(self._next_row(rptr)),
                             beats_none.eq(beats_one), beats_one.eq(beats_left == 2)]
            with m.Elif(issue_header):
                m.d.sync += [o.valid.eq(1), beat.data.eq(header),
                             beat.last.eq(0), beat.keep.eq(-1),
                             beat.size.eq(tq.size), beat.src.eq(tq.host.src),
                             beat.dst.eq(tq.host.dst),
                             beats_left.eq(tq.rows), beats_none.eq(0),
                             beats_one.eq(tq.rows == 1),
                             last_keep.eq(keep_through(tq.last_bytes))]
            with m.Else():
                m.d.sync += o.valid.eq(0)

    def _bus_beats(self, m, rd, tq, frame_ready, header, issue_header):
        """``bus``: the header from a register that is zero but while it is shown, the
        rows straight from the ring (its zero row while none is shown)."""
        bus = self.bus
        rptr = self._rptr
        # zero but while the header is shown; no reset (the clear is then the flip-flops'
        # synchronous reset, with no gate): the first cycle of a reset clears it, ``en``
        # being high while the arbiter's output register is reset
        hdr = Signal(8 * DATA_BYTES, reset_less=True)
        show_hdr = Signal()
        show_row = Signal()
        rows_left = Signal(8)                    # rows to show, the one shown included
        rows_one = Signal()                      # rows_left == 1
        rows_two = Signal()                      # rows_left == 2
        taken = bus.en & (show_hdr | show_row)
        last_taken = bus.en & show_row & rows_one
        # the next frame starts as the last row of this one is taken, or on an idle bus
        m.d.comb += issue_header.eq(bus.en & bus.grant & frame_ready
                                    & ((~show_hdr & ~show_row) | last_taken))
        show_row_next = Signal()
        rptr_next = Signal.like(rptr)
        m.d.comb += [
            show_row_next.eq(Mux(bus.en & show_hdr, 1, Mux(last_taken, 0, show_row))),
            rptr_next.eq(Mux(bus.en & show_row, self._next_row(rptr), rptr)),
        ]
        with m.If(bus.en):
            m.d.sync += hdr.eq(Mux(issue_header, header, 0))
        m.d.sync += [show_row.eq(show_row_next), rptr.eq(rptr_next)]
        with m.If(issue_header):
            m.d.sync += [show_hdr.eq(1), rows_left.eq(tq.rows), rows_one.eq(tq.rows == 1),
                         rows_two.eq(tq.rows == 2)]
        with m.Elif(taken):
            m.d.sync += show_hdr.eq(0)
        with m.If(bus.en & show_row & ~issue_header):
            m.d.sync += [rows_left.eq(rows_left - 1), rows_one.eq(rows_two),
                         rows_two.eq(rows_left == 3)]
        if self._deep_ring:
            # block RAM: its read is registered, so it is addressed a cycle ahead
            m.d.comb += rd.addr.eq(Mux(show_row_next, rptr_next, self._rows))
            if self._shared_ring:
                m.d.comb += self.ring.r_en.eq(show_row_next)
        else:
            m.d.comb += rd.addr.eq(Mux(show_row, rptr, self._rows))
        m.d.comb += [
            bus.show.eq(show_hdr | show_row),
            bus.penult.eq((show_hdr & rows_one) | (show_row & rows_two)),
            bus.head.eq(hdr),
            bus.beat.data.eq(rd.data),
            bus.beat.last.eq(show_row & rows_one),
            bus.ready.eq(frame_ready),
        ]
