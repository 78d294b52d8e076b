"""The narrow lane's ring of rows: its own LUTRAM, or its region of a block RAM a
cluster of lanes shares."""

from amaranth import Cat, Const, Mux, Signal

from squeezenic_hw.gateware.common.layouts import DATA_BYTES, RING_HALVES


class SharedRead:
    """A shared ring's read, as the lane sees it: the address it drives; the data goes
    to the frame bus from the cluster, not through the lane."""

    def __init__(self, addr):
        self.addr = addr
        self.data = Const(0, 8 * DATA_BYTES)


class RingStage:
    """The row stage of a :class:`~.lane.NarrowTxLane` with a shared ring (whose
    parameters its methods read)."""


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
