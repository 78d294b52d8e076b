"""The narrow lane's gearbox: items into wire frames of 16·b-bit words, and where
the frames close."""

from amaranth import Cat, Const, Mux, Signal

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT
from squeezenic_hw.gateware.common.lut_tree import kept
from squeezenic_hw.spec.header import HEADER_LEN

from .held_fields import held, pack
from .layouts import HOST_OFFSET, HostFields, Kind, Token, spread, thermometer
from .sizes import ROW


class Gearbox:
    """The gearbox of a :class:`~.lane.NarrowTxLane` (whose parameters its methods
    read): items into words, decisions of where frames close, tokens of closed frames."""

    def _gearbox(self, m, items, host_in):
        """Items into words for the row stage and tokens of closed frames; returns the
        ring's read port and the token FIFO."""
        cap = self._capacity
        W, b, E = self._word, self._b, ELEMENTS_PER_BEAT

        item = items.payload
        open_ = Signal()                          # a wire frame is open
        room = Signal(17, init=cap)               # elements the open frame can still take
        room_big = Signal(init=int(cap > E))      # room > 16
        part = Signal(W, reset_less=True)         # codes not yet a whole word
        plen = Signal(4)                          # how many (elements)
        slot = Signal(range(self._slots))         # next word's slot in the row
        tail = Signal(W, reset_less=True)         # a closed frame's last word, next cycle
        tail_len = Signal(4, reset_less=True)     # its codes
        tail_valid = Signal()
        cur = Signal(HostFields, reset_less=True)   # the host frame being cut
        cur_flush = Signal(reset_less=True)
        at = Signal(32, reset_less=True)          # offset of the next element
        frame = Signal(HostFields, reset_less=True)  # the open frame's first host frame's
        frame_offset = Signal(32, reset_less=True)

        wr, rd, wptr, ring_tight, tokens, tokens_tight = self._ring_and_tokens(m)

        # A host frame with ``flush`` whose last beat is split closes two frames: the full
        # one now, the one its rest opens (a flush close) in the next free cycle.
        flush_pending = Signal()
        busy = tail_valid | flush_pending         # a cycle for the frame before
        # a shared ring: from a close until the closed frame's last row is written (the
        # next frame's words would fill the half that waits for its turn)
        row_wait = Signal()
        self._row_wait = row_wait
        decide = Signal()
        m.d.comb += [decide.eq(items.valid & ~busy & ~ring_tight & ~tokens_tight & ~row_wait),
                     items.ready.eq(decide)]

        # What this cycle does. The data below is worked out from the item whether or not
        # it is taken (from registers only); ``decide`` gates only what is stored.
        pay = items.valid & (item.kind == Kind.PAYLOAD) & ~busy
        is_payload = decide & pay
        is_header = decide & ~pay
        # a beat takes its k elements, or when it fills the frame the room there is
        room5 = room[:5]
        full_c = Signal()
        split_c = Signal()
        m.d.comb += [
            full_c.eq(pay & ~room_big & (item.k >= room5)),
            split_c.eq(full_c & (item.k > room5)),
        ]
        full = decide & full_c
        split = decide & split_c
        rot = self._rotate(m, item, plen)
        # plen + the elements taken, its two sums made from registers beside the full
        # compare
        total = Signal(6)
        sum_full = Signal(6)
        sum_pay = Signal(6)
        m.d.comb += [sum_full.eq(plen + room5), sum_pay.eq(plen + item.k),
                     total.eq(Mux(full_c, sum_full, Mux(pay, sum_pay, plen)))]
        # a whole word is made: each sum's carry kept, so that the choice between them is
        # one LUT behind its carry chain, not behind the chosen sum
        whole_c = Signal()
        m.d.comb += whole_c.eq(Mux(full_c, kept(m, sum_full[4], "whole_full"),
                                   pay & kept(m, sum_pay[4], "whole_pay")))
        flush_c = pay & item.last & cur_flush & ~full_c
        header_close_c = ~pay & open_ & (host_in["idle"] | ~host_in["coalesce"])
        flush_close = decide & flush_c
        header_close = decide & header_close_c
        end_close = Signal()
        idle_close = Signal()
        late_flush = Signal()
        m.d.comb += late_flush.eq(flush_pending & ~tail_valid & ~ring_tight & ~tokens_tight
                                  & ~row_wait)
        with m.If(split & item.last & cur_flush):
            m.d.sync += flush_pending.eq(1)
        with m.Elif(late_flush):
            m.d.sync += flush_pending.eq(0)
        closes = Signal()
        m.d.comb += closes.eq((decide & (full_c | flush_c | header_close_c))
                              | end_close | idle_close | late_flush)
        rest_len = total[:4]

        word, word_valid, last_word_now = self._word_stage(
            m, rot=rot, part=part, plen=plen, tail=tail, tail_len=tail_len,
            tail_valid=tail_valid, room_big=room_big, pay=pay, decide=decide,
            whole_c=whole_c, closes=closes, rest_len=rest_len)

        self._row_stage(m, word, word_valid, last_word_now, slot, wptr, wr, closes, row_wait)

        # the state of the open frame
        taken_room = Signal(17)
        m.d.comb += taken_room.eq(Mux(full_c, 0, room - Mux(pay, item.k, 0)))
        # with a split the old frame takes ``room`` elements, the next one the rest: rotated
        # to plen + room, which is the capacity mod 16 (the frame's elements so far are
        # capacity - room, and its part word holds them mod 16), so a constant turn puts
        # them first
        c = cap % E
        split_bits = rot.rotate_right(c * b)
        split_len = Signal(4)
        m.d.comb += split_len.eq(Mux(split_c, item.k - room5, 0))
        # room > 16 after a beat, from registers only: with room ≤ 16 it stays so, and a
        # fresh frame has more (the capacity is at least 32 less 15 split elements)
        big_after_all = Signal()
        m.d.comb += big_after_all.eq(room - item.k > E)
        assert cap - (E - 1) > E
        with m.If(closes):
            m.d.sync += [open_.eq(split), room.eq(Mux(split_c, cap - (item.k - room5), cap)),
                         room_big.eq(1),
                         part.eq(split_bits), plen.eq(split_len)]
        with m.Elif(is_payload):
            m.d.sync += [open_.eq(1), room.eq(taken_room), room_big.eq(room_big & big_after_all),
                         part.eq(Mux(whole_c, rot, word)), plen.eq(rest_len)]
        with m.If(is_payload & (~open_ | split)):
            m.d.sync += [frame.eq(cur), frame_offset.eq(Mux(split_c, at + room5, at))]
        with m.If(is_header):
            m.d.sync += [cur.eq(host_in["host"]), cur_flush.eq(host_in["flush"]),
                         at.eq(host_in["offset"])]
        with m.Elif(is_payload):
            m.d.sync += at.eq(at + item.k)

        # idle and end closes: between frames, nothing waiting
        quiet = (self._between_frames & ~self.i.valid & ~self._in_flight & ~items.valid & ~busy
                 & ~ring_tight & ~tokens_tight & ~row_wait)
        m.d.comb += [
            idle_close.eq(quiet & open_ & self._late),
            end_close.eq(quiet & open_ & ~self._late & self.close),
            self.close_done.eq(quiet & self.close),
        ]

        self._token_stage(m, tokens, host_in, item, open_=open_, cur=cur, cur_flush=cur_flush,
                          frame=frame, at=at, frame_offset=frame_offset, is_header=is_header,
                          is_payload=is_payload, full=full, split=split, closes=closes,
                          flush_close=flush_close, late_flush=late_flush,
                          taken_room=taken_room)

        # counters: events registered, added a cycle later
        events = {
            "host_frames": is_header,
            "wire_frames": closes,
            "close_full": full,
            "close_mismatch": header_close & ~host_in["idle"],
            "close_flush": flush_close | late_flush,
            "close_idle": idle_close | (header_close & host_in["idle"]),
            "close_end": end_close,
        }
        self._count_events(m, events, Mux(is_header, host_in["n"], 0))
        return rd, tokens

    def _rotate(self, m, item, plen):
        """The item's codes rotated to the open word's fill."""
        W, b = self._word, self._b
        # The beat's codes rotated to the open word's fill, code i to element
        # (plen + i) mod 16: those that fit the word follow its ``plen`` codes, the rest
        # are a word that begins with them. Two levels of 4:1 multiplexers, where a shift
        # into a window of two words and the shift of a split's rest were four.
        rot1 = Signal(W)
        rot = Signal(W)
        with m.Switch(plen[:2]):
            for n in range(4):
                with m.Case(n):
                    m.d.comb += rot1.eq(item.bits.rotate_left(n * b))
        with m.Switch(plen[2:]):
            for n in range(4):
                with m.Case(n):
                    m.d.comb += rot.eq(rot1.rotate_left(4 * n * b))
        return rot

    def _word_stage(self, m, *, rot, part, plen, tail, tail_len, tail_valid, room_big, pay,
                    decide, whole_c, closes, rest_len):
        """The word made this cycle and whether it is the frame's last: ``(word, valid,
        last)``."""
        W, b, E = self._word, self._b, ELEMENTS_PER_BEAT
        cap = self._capacity
        # the word made this cycle: a tail's first ``tail_len`` codes; or the part word's
        # ``plen`` codes and the rotated beat's after them (a whole word, or a closing
        # frame's last). An element takes one of three sources or none, so a code bit is
        # one LUT. Codes past a frame's end are zero: the beat's are zero beyond its
        # elements, and where the open frame ends inside this word (room ≤ 16 and
        # plen < c, c = capacity mod 16: it ends at element c) the word takes none from
        # c on, which a split would fill with the next frame's.
        # Each element's three selects are kept nets (a LUT each, of ``plen`` or
        # ``tail_len`` and two flags), so that a code bit is one LUT behind them
        # whichever way a LUT mapper would rather share the thermometer.
        c = cap % E
        in_part = Signal(E)
        ends_here = Signal()
        m.d.comb += [
            in_part.eq(thermometer(plen, E)),
            ends_here.eq(~room_big & (plen < c) if c else 0),
        ]
        from_part = kept(m, in_part & ~tail_valid.replicate(E), "from_part")
        from_beat = kept(m, ~in_part & pay.replicate(E)
                         & ~Cat(Const(0, c), ends_here.replicate(E - c)), "from_beat")
        from_tail = kept(m, thermometer(tail_len, E) & tail_valid.replicate(E), "from_tail")
        word = Signal(W)
        word_valid = Signal()
        m.d.comb += [
            word.eq((spread(from_tail, b) & tail) | (spread(from_part, b) & part)
                    | (spread(from_beat, b) & rot)),
            word_valid.eq(tail_valid | (decide & whole_c) | (closes & (rest_len != 0))),
        ]
        # the frame's last word: now, or next cycle when a whole word is made as well
        tail_next = closes & whole_c & (rest_len != 0)
        m.d.sync += [tail_valid.eq(tail_next), tail.eq(rot), tail_len.eq(rest_len)]
        last_word_now = (closes & ~tail_next) | tail_valid
        return word, word_valid, last_word_now

    def _token_stage(self, m, tokens, host_in, item, *, open_, cur, cur_flush, frame, at,
                     frame_offset, is_header, is_payload, full, split, closes, flush_close,
                     late_flush, taken_room):
        """The token of a closing frame, or of a key change with no frame open: t0 takes
        what the gearbox knows (n, offset, first host frame, the IPv4 words it copies,
        summed), t1 the sizes that follow from n, and goes into the FIFO."""
        cap = self._capacity
        log_b = self._b.bit_length() - 1          # b is a power of two

        def times_b(count):
            """``count`` elements as a number of code bits."""
            return Cat(Const(0, log_b), count) if log_b else count

        switch_only = is_header & host_in["key_new"] & ~open_
        t0 = Signal(Token, reset_less=True)
        t0_valid = Signal()
        opened_now = is_payload & ~open_      # opened and closed by the same beat
        first_host = Signal(HostFields)
        # (with the fields the source holds put in, so the IPv4 sum is of what is sent)
        m.d.comb += first_host.eq(held(Mux(opened_now, cur, frame), self._constant_bits,
                                        HOST_OFFSET))
        copied = first_host.copied
        tos, ip_id, frag, ttl = copied[:8], copied[8:24], copied[24:40], copied[40:48]
        be16 = lambda v: Cat(v[8:16], v[:8])          # noqa: E731  (two header bytes, BE)
        m.d.sync += t0_valid.eq(closes | switch_only)
        m.d.sync += [
            t0.frame.eq(closes),
            t0.switch.eq(is_header & host_in["key_new"]),
            t0.flush.eq(Mux(full, cur_flush & item.last & ~split, flush_close | late_flush)),
            t0.offset.eq(Mux(opened_now, at, frame_offset)),
            t0.host.eq(first_host),
            t0.n.eq(cap - taken_room),
            t0.ip_sum.eq(tos + be16(ip_id) + be16(frag) + Cat(Const(0, 8), ttl)),
        ]
        t1 = Signal(Token, reset_less=True)
        t1_valid = Signal()
        payload_bytes = Signal(14)
        m.d.comb += payload_bytes.eq((times_b(t0.n) + 7) >> 3)
        m.d.sync += [
            t1_valid.eq(t0_valid), t1.eq(t0),
            t1.rows.eq((times_b(t0.n) + ROW - 1) >> 9),
            t1.size.eq(payload_bytes + HEADER_LEN),
            t1.last_bytes.eq(payload_bytes - 1),
            # the IPv4 total length, size - 14, joins the sum
            t1.ip_sum.eq(t0.ip_sum + payload_bytes + (HEADER_LEN - 14)),
        ]
        m.d.comb += [tokens.w_data.eq(pack(t1.as_value(), self._constant_bits)),
                     tokens.w_en.eq(t1_valid)]
        # while the gearbox waits for a closed row to be written no token is made, so a
        # token with others behind it is not of the frame that waits
        self._newest_token = ~t0_valid & ~t1_valid & ~tokens.r_rdy
        if self._header_pop is not None:
            m.d.comb += self._header_pop.eq(is_header)

    def _count_events(self, m, events, elements_in):
        """The counters: ``events`` registered and added a cycle later, and the elements
        of the host frames taken (``elements_in``)."""
        c = self.counters
        for name, event in events.items():
            q = Signal(name=f"event_{name}")
            m.d.sync += [q.eq(event), c[name].eq(c[name] + q)]
        elements = Signal(16, name="event_elements")
        m.d.sync += [elements.eq(elements_in),
                     c["elements"].eq(c["elements"] + elements)]
