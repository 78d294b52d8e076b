"""The narrow lane's ring of rows: its own LUTRAM, or its region of a block RAM a
cluster of lanes shares."""

from amaranth import Cat, Const, Mux, Signal, unsigned
from amaranth.lib.memory import Memory

from squeezenic_hw.gateware.common.layouts import DATA_BYTES, RING_HALVES
from squeezenic_hw.gateware.common.stream import LutramQueue

from .layouts import TOKEN_BITS


class SharedRead:
    """A shared ring's read, as the lane sees it: the address it drives; the data goes
    to the frame bus from the cluster, not through the lane."""

    def __init__(self, addr):
        self.addr = addr
        self.data = Const(0, 8 * DATA_BYTES)


class RingStage:
    """The ring of a :class:`~.lane.NarrowTxLane` (whose parameters its methods read):
    the ring and token FIFO, the row register and its writes."""

    def _ring_and_tokens(self, m):
        """The ring of rows and the token FIFO, and whether each is too full for what one
        decision writes; returns ``(write port, read port, write pointer, ring tight,
        tokens, tokens tight)``."""
        depth = self._ring_depth
        if self._shared_ring:
            # the cluster's block RAM, read a cycle after it is addressed
            self._deep_ring = True
            wr = None
            rd = SharedRead(self.ring.r_addr)
        else:
            m.submodules.ring = ring = Memory(shape=unsigned(8 * DATA_BYTES), depth=depth,
                                              init=[])
            wr = ring.write_port()
            # a shallow ring is LUTRAM read as it is addressed; a deep one (jumbo MTUs)
            # is block RAM, whose read is registered: it is addressed a cycle ahead
            self._deep_ring = depth > 64
            rd = ring.read_port(domain="sync" if self._deep_ring else "comb")
        wptr = Signal(range(depth))
        self._rptr = rptr = Signal(range(depth))
        ring_tight = Signal()
        # a bare lane reads its last row, never written (zero), while it sends no row:
        # its side of the frame bus is then zero without a gate
        self._rows = rows = depth - 1 if self._bare else depth
        self._next_row = lambda ptr: (Mux(ptr == rows - 1, 0, ptr + 1) if self._bare
                                      else (ptr + 1)[:len(ptr)])
        level = Signal(range(depth))
        if self._bare:
            m.d.comb += level.eq(Mux(wptr >= rptr, wptr - rptr, wptr + rows - rptr))
        else:
            m.d.comb += level.eq(wptr - rptr)
        # unbuffered: the output's token register ``tq`` takes the LUTRAM's read directly
        tokens = m.submodules.tokens = LutramQueue(
            width=TOKEN_BITS - sum(len(v) for _, v in self._constant_bits),
            depth=self._token_depth)
        tokens_tight = Signal()
        m.d.sync += [
            ring_tight.eq(level >= rows - 6),
            tokens_tight.eq(tokens.level >= self._token_depth - 5),
        ]
        return wr, rd, wptr, ring_tight, tokens, tokens_tight

    def _row_stage(self, m, word, word_valid, last_word_now, slot, wptr, wr, closes, row_wait):
        """The row stage, a cycle after the gearbox: words into the slots of the row
        register, rows into the ring."""
        W = self._word
        word_q = Signal(W, reset_less=True)
        word_valid_q = Signal()
        last_q = Signal()
        m.d.sync += [word_q.eq(word), word_valid_q.eq(word_valid), last_q.eq(last_word_now)]
        row = Signal(8 * DATA_BYTES, reset_less=True)
        for s in range(self._slots):
            with m.If(word_valid_q & (slot == s)):
                m.d.sync += row[W * s:W * (s + 1)].eq(word_q)
        # a row is done when its last slot fills, and when its frame's last word is in
        # (or the frame closes with a row partly filled and nothing left to add)
        row_done = ((word_valid_q & (slot == self._slots - 1))
                    | (last_q & (word_valid_q | (slot != 0))))
        if self._shared_ring:
            self._shared_row_stage(m, row, slot, wptr, word_valid_q, last_q, row_done,
                                   closes, row_wait)
        else:
            write_row = Signal()
            m.d.sync += write_row.eq(row_done)
            m.d.comb += [wr.addr.eq(wptr), wr.data.eq(row), wr.en.eq(write_row)]
            with m.If(write_row):
                m.d.sync += wptr.eq(self._next_row(wptr))
        with m.If(last_q):
            m.d.sync += slot.eq(0)
        with m.Elif(word_valid_q):
            m.d.sync += slot.eq(slot + 1)

    def _shared_row_stage(self, m, row, slot, wptr, word_valid_q, last_q, row_done, closes,
                          row_wait):
        """The row register's halves, each written to the cluster's ring in a turn of
        the lane's once it is filled (or its frame closes), while words fill the other
        half; after a close the gearbox waits until the closed row is written."""
        ring = self.ring
        half = self._slots // RING_HALVES
        pend = [Signal(name=f"pend{h}") for h in range(RING_HALVES)]
        pend_row = [Signal(range(self._ring_depth), name=f"pend_row{h}", reset_less=True)
                    for h in range(RING_HALVES)]
        same_row = Signal()      # both halves pending are of one row
        closing = last_q & (word_valid_q | (slot != 0))
        # the half a word fills, or a close's last slot (the one before when no word comes
        # with it; a half filled just before is pending already) is in
        now = [(word_valid_q & (slot == half - 1))
               | (closing & Mux(word_valid_q, slot < half, (slot != 0) & (slot < half))),
               (word_valid_q & (slot == self._slots - 1))
               | (closing & Mux(word_valid_q, slot >= half, slot > half))]
        # the older half first: a row's second half is older than the next row's first
        w_first = pend[0] & (~pend[1] | same_row)
        m.d.comb += [ring.w_data.eq(row), ring.w_en.eq(Cat(w_first, pend[1])),
                     ring.w_addr.eq(Mux(pend[1], pend_row[1], pend_row[0]))]
        written = [ring.w_turn & w_first, ring.w_turn & pend[1]]
        for h in range(RING_HALVES):
            with m.If(now[h]):
                m.d.sync += [pend[h].eq(1), pend_row[h].eq(wptr)]
            with m.Elif(written[h]):
                m.d.sync += pend[h].eq(0)
        with m.If(now[1]):
            m.d.sync += same_row.eq(1)
        with m.Elif(now[0]):
            m.d.sync += same_row.eq(0)
        with m.If(row_done):
            m.d.sync += wptr.eq(self._next_row(wptr))
        # the close in flight to this stage (its last word comes a cycle or two later)
        close_flight = Signal()
        with m.If(closes):
            m.d.sync += [close_flight.eq(1), row_wait.eq(1)]
        with m.Else():
            with m.If(last_q):
                m.d.sync += close_flight.eq(0)
            # (falls as the last half is written)
            with m.If(~close_flight & (~pend[0] | written[0]) & (~pend[1] | written[1])):
                m.d.sync += row_wait.eq(0)
