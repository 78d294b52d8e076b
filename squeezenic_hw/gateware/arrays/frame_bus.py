"""A frame bus: N narrow lanes ORed onto one stream of bare beats, a whole frame at a
time, in round robin.

Each lane drives its side of the bus to zero but while it shows a beat of a frame
(``frame_bus_signature``), so the merge is an OR of the lanes, not a multiplexer, and
the lanes need no header-or-row select: a narrow lane shows its header from a register
that is zero but then, and its rows straight from its ring, which reads a zero row while
the lane shows none. The OR is registered after its first level (groups of six lanes),
so a lane's LUTRAM read feeds one LUT before a flip-flop; the headers, which come from
flip-flops, are ORed whole and registered beside.
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.frame_arbiter import (
    check_n_inputs,
    none_set,
    round_robin_next,
    thermometer_count,
    tree_or,
)
from squeezenic_hw.gateware.common.layouts import (
    BEAT_BITS,
    BareBeat,
    bare_signature,
    frame_bus_signature,
)
from squeezenic_hw.gateware.common.stream import SkidBuffer

__all__ = ["FrameBusArbiter"]

_GROUP = 6      # lanes ORed before the register: one LUT6 a bit


class FrameBusArbiter(wiring.Component):
    """Owner of a frame bus of ``n_inputs`` lanes, in round robin by whole frame.

    Parameters
    ----------
    n_inputs : int
        Number of lanes, 1…64.
    head_mask : int or None
        The header bits the lanes may set (bit ``8·byte + i``; default all): the OR
        takes no others, which the lanes must leave zero
        (:func:`~.lane_arrays.generator_head_mask`).
    shared_rows : int
        Rings shared by clusters of lanes (:class:`~.ring_cluster.RingCluster`), whose
        reads come in on ``rows`` in place of the lanes' ``beat.data``, which is then
        not read (0, the default: each lane's rows on its own ``beat``).

    Attributes
    ----------
    lanes : In(frame_bus_signature()).array(n_inputs)
        The lanes' sides of the bus.
    o : Out(bare_signature())
        The frames, beats as the lanes showed them.
    grant : Out(range(n_inputs))
        The lane that owns the bus (for monitoring and tests).
    rows : In(512).array(shared_rows)
        With ``shared_rows``: the clusters' ring reads (``RingCluster.o``), registered in
        the rings on ``en``.
    en : Out(1)
        With ``shared_rows``: the bus moves on (the output skid buffer's ready, a
        register), for the rings' output registers.

    Notes
    -----
    Arbitration: one lane owns the bus (``grant``, a one-hot register). It starts a frame
    when it has one ready and the bus is idle, or as its own frame's last beat is taken.
    When the beat shown is its frame's last but one, the bus passes to the first lane
    after the owner (round robin) with a frame ready, which starts its header as the
    owner's last beat is taken: frames follow each other with no idle cycle. An idle
    bus whose owner has no frame ready passes in the same way (that lane's header is
    shown two cycles later). Frames are never interleaved: a lane shows its frame's
    beats in order, one a cycle while ``en``.

    Latency: 2 cycles (the OR of each group of six lanes is registered, then ``o``): a
    beat shown and taken in cycle ``t`` is on ``o`` in cycle ``t + 2``.

    Throughput: one beat per cycle, with no idle cycle between frames when a lane has
    a frame ready as the owner shows its frame's last beat but one. Every frame must
    have at least two beats (a header and a row).

    Backpressure: ``en``, which every lane and the group registers read, is the ready
    of ``o``'s :class:`~squeezenic_hw.gateware.common.stream.SkidBuffer`: a register.
    When ``o`` stalls, ``en`` falls a cycle later (the beat taken then waits in the skid
    register) and the lanes and the group registers hold. Nothing is dropped.

    Reset: the grant and the valid bits; the beat registers take none.

    Resources: an OR of the n beats (or the ``shared_rows`` rings' rows, registered in the
    rings, and the n ``last`` bits) and n headers (513 bits; ``show``, ``penult``), the
    lanes' rows registered after its first level (⌈n/6⌉ × 513 flip-flops), the headers'
    whole (the bits of ``head_mask``), the output and skid registers, and the round
    robin of :class:`~squeezenic_hw.gateware.common.frame_arbiter.FrameArbiter`.
    """

    def __init__(self, n_inputs, *, head_mask=None, shared_rows=0):
        if head_mask is None:
            head_mask = (1 << BEAT_BITS) - 1
        if isinstance(head_mask, bool) or not isinstance(head_mask, int) \
                or not 0 <= head_mask < 1 << BEAT_BITS:
            raise ValueError(f"head_mask must be None or an int of {BEAT_BITS} bits, "
                             f"got {head_mask!r}")
        self.n_inputs = check_n_inputs(n_inputs)
        if isinstance(shared_rows, bool) or not isinstance(shared_rows, int) \
                or not 0 <= shared_rows <= self.n_inputs:
            raise ValueError(f"shared_rows must be an int from 0 to n_inputs "
                             f"({self.n_inputs}), got {shared_rows!r}")
        self.head_mask = head_mask
        self.shared_rows = shared_rows
        members = {
            "lanes": In(frame_bus_signature()).array(n_inputs),
            "o": Out(bare_signature()),
            "grant": Out(range(n_inputs)),
        }
        if shared_rows:
            members["rows"] = In(BEAT_BITS).array(shared_rows)
            members["en"] = Out(1)
        super().__init__(members)

    @property
    def latency(self):
        """Cycles from a beat taken from a lane to the same beat on ``o``."""
        return 2

    def elaborate(self, platform):
        m = Module()
        n = self.n_inputs
        lanes = self.lanes
        m.submodules.out = out = SkidBuffer(BareBeat)
        wiring.connect(m, out.o, wiring.flipped(self.o))
        en = out.i.ready

        show = Signal()
        penult = Signal()
        m.d.comb += [
            show.eq(tree_or([lane.show for lane in lanes])),
            penult.eq(tree_or([lane.penult for lane in lanes])),
        ]
        # registered: the rows' OR after its first level (a LUT6 of six lanes' bits behind
        # their LUTRAM reads), the headers' whole (they come from flip-flops)
        shown = Signal()
        head = Signal(BEAT_BITS, reset_less=True)
        groups = [Cat(head, Const(0, 1))]
        if self.shared_rows:
            # the rows from the clusters' rings, registered there on ``en`` (block RAM
            # reads, which feed no logic); ``last`` from the lanes
            sources = []
            last = Signal(reset_less=True)
            with m.If(en):
                m.d.sync += last.eq(tree_or([lane.beat.last for lane in lanes]))
            groups.append(Cat(Const(0, BEAT_BITS), last))
            groups += [Cat(row, Const(0, 1)) for row in self.rows]
            m.d.comb += self.en.eq(en)
        else:
            sources = [lane.beat.as_value() for lane in lanes]
        for g in range(0, len(sources), _GROUP):
            part = Signal(len(sources[0]), name=f"group{g // _GROUP}", reset_less=True)
            with m.If(en):
                m.d.sync += part.eq(tree_or(sources[g:g + _GROUP]))
            groups.append(Cat(part, Const(0, BEAT_BITS + 1 - len(part))))   # (``last`` above)
        with m.If(en):
            m.d.sync += [shown.eq(show),
                         head.eq(tree_or([_masked(lane.head, self.head_mask) for lane in lanes]))]
        m.d.comb += [out.i.valid.eq(shown), out.i.payload.eq(tree_or(groups))]

        # the grant as a thermometer (bits 0 … grant set) and one-hot, loaded together
        upto = Signal(n, init=1)
        onehot = Signal(n, init=1)
        if n > 1:
            m.d.comb += self.grant.eq(thermometer_count(upto[1:]))
        for k, lane in enumerate(lanes):
            m.d.comb += [lane.grant.eq(onehot[k]), lane.en.eq(en)]
        if n > 1:
            readies = Signal(n)
            m.d.comb += readies.eq(Cat(lane.ready for lane in lanes))
            owner_ready = ~none_set(m, readies & onehot, name="owner_ready")
            # round robin after the owner: the first other lane above it with a frame
            # ready, else the first from 0, else the owner stays
            found, next_upto, next_onehot = round_robin_next(m, readies, upto, onehot)
            with m.If(((en & show & penult) | (~show & ~owner_ready)) & found):
                m.d.sync += [upto.eq(next_upto), onehot.eq(next_onehot)]
        return m


def _masked(head, mask):
    """``head`` with the bits outside ``mask`` constant zero (out of the OR): an AND with a
    constant, which synthesis folds to wires and zeros, and which Amaranth's simulator
    evaluates at once rather than bit by bit."""
    return head & Const(mask, len(head))
