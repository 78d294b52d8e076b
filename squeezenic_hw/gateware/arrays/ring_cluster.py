"""A ring of rows in block RAM shared by a cluster of narrow lanes.

A narrow lane keeps the rows of its closed wire frames in a ring until the frame bus
takes them. Alone, that ring is 512 bits wide and a few dozen rows deep: LUTRAM, about
300 LUTs a lane. A cluster of G lanes shares one block RAM instead, each lane a region
of it: the write port goes to each lane in turn (one lane a cycle, in rotation), which
writes the halves of its row register that are ready; the read port reads the row the
lane showing on the frame bus asks for, into an output register (block RAM's read data
feeds no logic; Vivado makes it the RAM's ``DOB_REG``), which goes to the bus once for the
cluster (:class:`~.frame_bus.FrameBusArbiter`'s ``rows``).

A lane fills one half of its row register while the other waits for its turn, so a
turn must come before the other half fills: G is at most the words in half a row
(:attr:`~.narrow.lane.NarrowTxLane.max_cluster`).
"""

from amaranth import Array, Cat, Const, Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.frame_arbiter import tree_or
from squeezenic_hw.gateware.common.layouts import (
    BEAT_BITS,
    RING_HALVES,
    shared_ring_signature,
)

__all__ = ["RingCluster"]


class RingCluster(wiring.Component):
    """The shared ring of ``n_lanes`` narrow lanes of ``rows`` rows each.

    Parameters
    ----------
    n_lanes : int
        Lanes in the cluster, 1…16.
    rows : int
        Rows of each lane's region (:attr:`~.NarrowTxLane.ring_rows`), a power of two
        from 2 to 1024.

    Attributes
    ----------
    lanes : In(shared_ring_signature(rows)).array(n_lanes)
        The lanes' sides (``NarrowTxLane(shared_ring=True).ring``).
    en : In(1)
        The frame bus moves on (:attr:`~.frame_bus.FrameBusArbiter.en`): the output
        register takes the row read.
    o : Out(512)
        The output register: the row read in the cycle after a lane addressed it, taken
        when ``en``; zero when no lane did (every lane's address is then its region's last
        row, which it never writes).

    Notes
    -----
    Latency: a row addressed in cycle ``t`` is read in cycle ``t + 1`` and on ``o`` in
    cycle ``t + 2`` when ``en`` was high in ``t + 1``; a half ready in cycle ``t`` is
    written by cycle ``t + n_lanes - 1``.

    Throughput: one row read a cycle; one lane's write a cycle.

    Backpressure: none; the lanes wait for their turns (``w_turn``, a register). While
    ``en`` is low the output register holds (the lane showing holds its address).

    Resources: one memory of ``n_lanes · rows`` × 512 bits (block RAM), written in
    halves, with its 512-bit output register (flip-flops in Yosys's count, inside the RAM
    in Vivado's); a ``n_lanes``:1 multiplexer of the lanes' row registers in front of its
    write port, and an AND of their read addresses.
    """

    def __init__(self, n_lanes, rows):
        if isinstance(n_lanes, bool) or not isinstance(n_lanes, int) \
                or not 1 <= n_lanes <= 16:
            raise ValueError(f"n_lanes must be an int from 1 to 16, got {n_lanes!r}")
        if isinstance(rows, bool) or not isinstance(rows, int) or not 2 <= rows <= 1024 \
                or rows & (rows - 1):
            raise ValueError(f"rows must be a power of two from 2 to 1024, got {rows!r}")
        self.n_lanes = n_lanes
        self.rows = rows
        super().__init__({
            "lanes": In(shared_ring_signature(rows)).array(n_lanes),
            "en": In(1),
            "o": Out(BEAT_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        g, rows = self.n_lanes, self.rows
        lanes = self.lanes
        index_bits = (g - 1).bit_length()
        m.submodules.mem = mem = Memory(shape=unsigned(BEAT_BITS), depth=rows << index_bits,
                                        init=[], attrs={"ram_style": "block"})
        wr = mem.write_port(granularity=BEAT_BITS // RING_HALVES)
        rd = mem.read_port()

        # the turn: a counter for the write multiplexer, one-hot for the lanes
        turn = Signal(range(g) if g > 1 else 1)
        onehot = Signal(g, init=1)
        if g > 1:
            m.d.sync += [turn.eq(turn + 1), onehot.eq(onehot.rotate_left(1))]
            with m.If(turn == g - 1):
                m.d.sync += turn.eq(0)
        for k, lane in enumerate(lanes):
            m.d.comb += lane.w_turn.eq(onehot[k])
        w_data = [lane.w_data for lane in lanes]
        w_en = [lane.w_en for lane in lanes]
        w_addr = [lane.w_addr for lane in lanes]
        if g > 1:
            m.d.comb += [wr.data.eq(Array(w_data)[turn]), wr.en.eq(Array(w_en)[turn]),
                         wr.addr.eq(Cat(Array(w_addr)[turn], turn[:index_bits]))]
        else:
            m.d.comb += [wr.data.eq(w_data[0]), wr.en.eq(w_en[0]), wr.addr.eq(w_addr[0])]

        # the read address: the lane that reads, or (none) all ones, a row never written
        row = Signal(range(rows))
        m.d.comb += row.eq(~tree_or([~lane.r_addr for lane in lanes]))
        if index_bits:
            index = ~tree_or([~Const(k, index_bits) & lane.r_en.replicate(index_bits)
                              for k, lane in enumerate(lanes)])
            m.d.comb += rd.addr.eq(Cat(row, index))
        else:
            m.d.comb += rd.addr.eq(row)
        row_out = Signal(BEAT_BITS, reset_less=True)
        with m.If(self.en):
            m.d.sync += row_out.eq(rd.data)
        m.d.comb += self.o.eq(row_out)
        return m
